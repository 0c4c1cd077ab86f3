"""The registry: every API verb, as Kubernetes' generic registry + strategies do it.

Each verb validates and admits a request, then makes exactly one etcd transaction (SPEC
AS3–AS4); nothing is half-written. Update and status-update keep spec and status apart
(AS8); delete follows the graceful rules of GT1–GT3; `bind` and `evict` are the pod
subresources. Reads at a past revision and history come from etcd's log (AS6).
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from skiff.api import (
    ApiError,
    FieldSelector,
    KindInfo,
    LabelSelector,
    Reason,
    apply_defaults,
    lookup,
    ownership,
    prune_unknown_fields,
    validate,
)
from skiff.api.bytesfields import decode_bytes_fields
from skiff.api.defaults import initial_status
from skiff.api.errors import FieldError
from skiff.api.kinds import GENERATION_KINDS, storage_key, storage_prefix
from skiff.api.names import generate_name
from skiff.api.pods import set_condition
from skiff.api.podsecurity import PodSecurityConfig
from skiff.api.validation import (
    grace_period_problem,
    revision_problem,
    validate_ephemeral_containers_update,
)
from skiff.apiserver.admission.chain import Sources, default_chain
from skiff.apiserver.admission.interface import Attributes, Operation
from skiff.apiserver.admission.podsecurity import PodSecurityAdmission
from skiff.apiserver.admission.priority import builtin_priority_classes
from skiff.apiserver.admission.resourcequota import QuotaAdmission
from skiff.apiserver.admission.tolerations import AdmissionConfig
from skiff.apiserver.auth.escalation import EscalationCheck
from skiff.apiserver.endpoints.handlers.fieldmanager import apply as field_managers
from skiff.apiserver.registry import graceful
from skiff.apiserver.registry.scope import request_namespace
from skiff.apiserver.registry.service import clusterip, nodeports
from skiff.apiserver.storage import paging
from skiff.apiserver.storage.interface import Storage
from skiff.apiserver.storage.lookups import Lookup
from skiff.apiserver.storage.values import LIST_PAGE, KeyValue, LeaderFenced
from skiff.apiserver.storage.watchcache import BATCH_LIMIT, WatchCache, WatchEvent, WatchRequest
from skiff.clock import Clock, RealClock, rfc3339
from skiff.rpc import MAX_OBJECT_BYTES, decode_map, encode
from skiff.tracing import inject_into_object

log = logging.getLogger(__name__)

Obj = dict[str, Any]
T = TypeVar("T")

# Kinds whose status is reset on create (the controller or kubelet owns it).
# the Pod subresource `kubectl debug` writes: only spec.ephemeralContainers changes
EPHEMERAL_CONTAINERS = "ephemeralcontainers"


def object_subresource(kind: str, subresource: str) -> bool:
    """Whether requests to `subresource` read and write the object itself (through `get`
    and `update`): the object, its status, a Pod's ephemeral containers."""
    return subresource in ("", "status") or (kind, subresource) == ("Pod",
                                                                     EPHEMERAL_CONTAINERS)


_RESET_STATUS_ON_CREATE = {"Pod", "ReplicaSet", "ReplicationController", "StatefulSet",
                           "PodDisruptionBudget",
                           "HorizontalPodAutoscaler",
                           "PersistentVolumeClaim", "VolumeAttachment", "Fence",
                           "PersistentVolume"}
# Kinds whose top-level fields other than metadata are all "spec" (no status subresource).
_SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


@dataclass
class Result:
    object: Obj
    warnings: list[str] = field(default_factory=list)

    def to_wire(self) -> Obj:
        out: Obj = {"object": self.object}
        if self.warnings:
            out["warnings"] = self.warnings
        return out


@dataclass(frozen=True)
class RegistryConfig:
    admission: AdmissionConfig = AdmissionConfig()
    max_conflict_retries: int = 16
    # SPEC AX3: default and check pod.spec.serviceAccountName (the apiserver turns it on
    # unless --disable-admission-plugins names ServiceAccount).
    service_account_admission: bool = False
    # SPEC AU7: PodSecurity admission's defaults and exemptions (None: the plugin is off)
    pod_security: PodSecurityConfig | None = PodSecurityConfig()


def _name(obj: Obj) -> str:
    return str(obj.get("metadata", {}).get("name", ""))


def _strip_rv(obj: Obj) -> Obj:
    meta = {k: v for k, v in obj.get("metadata", {}).items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


def _start_generation(info: KindInfo, meta: Obj) -> None:
    if info.kind in GENERATION_KINDS:
        meta["generation"] = 1
    else:
        meta.pop("generation", None)


# Go's omitempty: an empty map or list in these ObjectMeta fields is not written, so
# `annotations: {}` (which kubectl's apply patches carry) never shows in a stored object.
_OMIT_EMPTY_METADATA = ("labels", "annotations", "finalizers", "ownerReferences",
                        "managedFields")


def _omit_empty_metadata(meta: Obj) -> None:
    for name in _OMIT_EMPTY_METADATA:
        if name in meta and not meta[name]:
            del meta[name]


def _has_spec_change(old: Obj, new: Obj) -> bool:
    skip = {"metadata", "status", "apiVersion", "kind"}
    return {k: v for k, v in old.items() if k not in skip} != {
        k: v for k, v in new.items() if k not in skip}


class Registry:
    def __init__(self, storage: Storage, cache: WatchCache, *,
                 config: RegistryConfig | None = None, clock: Clock | None = None) -> None:
        self.storage = storage
        self.cache = cache
        self.config = config or RegistryConfig()
        self.clock = clock or RealClock()
        self.namespaces = Lookup("namespaces", storage, cache)
        self.priority_classes = Lookup("priorityclasses", storage, cache)
        self.service_accounts = Lookup("serviceaccounts", storage, cache)
        self.limit_ranges = Lookup("limitranges", storage, cache)
        self.pod_security = None if self.config.pod_security is None else PodSecurityAdmission(
            config=self.config.pod_security, namespaces=self.namespaces, storage=storage)
        self.quota = QuotaAdmission(storage, cache)
        self.admission = default_chain(
            Sources(storage=storage, namespaces=self.namespaces,
                    priority_classes=self.priority_classes, limit_ranges=self.limit_ranges,
                    get_service_account=self._get_service_account),
            tolerations=self.config.admission,
            service_account=self.config.service_account_admission,
            pod_security=self.pod_security, quota=self.quota)
        # AX7: cluster IPs of Services (None: not allocated, e.g. in unit tests)
        self.service_ips: clusterip.ServiceIPs | None = None
        # node ports of NodePort and LoadBalancer Services (None: not allocated)
        self.node_ports: nodeports.NodePorts | None = None
        # AU6: RBAC escalation prevention (None: not authorizing, the insecure mode)
        self.escalation: EscalationCheck | None = None

    async def run_lookups(self) -> None:
        """Keep the admission lookups current (run as a task beside the watch cache)."""
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.namespaces.run(), name="lookup-namespaces")
            tg.create_task(self.priority_classes.run(), name="lookup-priorityclasses")
            tg.create_task(self.service_accounts.run(), name="lookup-serviceaccounts")
            tg.create_task(self.limit_ranges.run(), name="lookup-limitranges")
            tg.create_task(self.quota.quotas.run(), name="lookup-resourcequotas")

    # -- helpers -------------------------------------------------------------------------

    @staticmethod
    def _namespace(info: KindInfo, namespace: str | None) -> str | None:
        """The namespace a request for one object addresses (SPEC AU5, see scope.py)."""
        return request_namespace(info, namespace, collection=False)

    def _pod_namespace(self, namespace: str | None) -> str:
        ns = self._namespace(lookup("pods"), namespace)
        assert ns is not None  # pods are namespaced
        return ns

    async def _get_kv(self, info: KindInfo, namespace: str | None, name: str) -> KeyValue:
        if not name:
            raise ApiError.bad_request(f"a name is required to address a {info.kind}")
        kv, _ = await self.storage.get(storage_key(info, namespace, name))
        if kv is None or kv.obj is None:
            raise ApiError.not_found(info.resource, name, group=info.group)
        return kv

    async def _retry_conflicts(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Re-run a read-modify-write that lost a race (when no rv was requested)."""
        for _ in range(self.config.max_conflict_retries):
            try:
                return await fn()
            except _Retry:
                continue
        raise ApiError(Reason.CONFLICT, "too many concurrent writers; try again")

    def _check_size(self, info: KindInfo, obj: Obj) -> None:
        size = len(encode(obj))
        if size > MAX_OBJECT_BYTES:
            raise ApiError(Reason.REQUEST_ENTITY_TOO_LARGE,
                           f'{info.kind} "{_name(obj)}" is too large: {size} bytes, the '
                           f"limit is {MAX_OBJECT_BYTES} bytes (1.5 MiB)")

    def _validate(self, info: KindInfo, obj: Obj, old: Obj | None = None, *,
                  subresource: str = "") -> None:
        errors = (validate_ephemeral_containers_update(obj, old)
                  if subresource == EPHEMERAL_CONTAINERS and old is not None
                  else validate(obj, old=old))
        if errors:
            raise ApiError.invalid(info.kind, _name(obj), errors, group=info.group)

    @staticmethod
    def _prune(obj: Obj, field_validation: str, info: KindInfo | None = None) -> list[str]:
        # kube-apiserver's decode error wording, as kubectl shows it
        prefix = (f'{info.kind} in version "{info.version}" cannot be handled as a '
                  f"{info.kind}: ") if info is not None else ""
        undecodable = decode_bytes_fields(obj)  # base64 []byte fields (Secret data)
        if undecodable:
            raise ApiError.bad_request(f"{prefix}{undecodable}")
        unknown = prune_unknown_fields(obj)
        if unknown and field_validation == "Strict":
            listed = ", ".join(f'unknown field "{p}"' for p in unknown)
            raise ApiError.bad_request(f"{prefix}strict decoding error: {listed}")
        if field_validation == "Ignore":
            return []
        return [f'unknown field "{p}"' for p in unknown]

    def _check_identity(self, info: KindInfo, namespace: str | None, obj: Obj,
                        name: str | None = None) -> Obj:
        if not isinstance(obj, dict):
            raise ApiError.bad_request("object: must be a map (a Kubernetes object)")
        obj = copy.deepcopy(obj)
        kind = obj.get("kind")
        if kind not in (None, info.kind):
            raise ApiError.bad_request(
                f"kind: the object's kind {kind!r} does not match the resource "
                f"{info.resource!r}; send it to /{lookup(str(kind)).resource}"
                if _known(str(kind)) else
                f"kind: {kind!r} is not a kind Skiff serves")
        api_version = obj.get("apiVersion")
        if api_version not in (None, info.api_version):
            raise ApiError.bad_request(
                f"apiVersion: {api_version!r} is not served for {info.kind}; "
                f"use {info.api_version!r}")
        obj["kind"], obj["apiVersion"] = info.kind, info.api_version
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise ApiError.bad_request("metadata: must be a map")
        # SPEC AU5: what is written is what the request names (and was authorized): a
        # body naming another namespace or object is refused with Kubernetes' messages.
        if info.namespaced:
            if meta.get("namespace") and namespace and meta["namespace"] != namespace:
                raise ApiError.bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request")
            meta["namespace"] = meta.get("namespace") or namespace or "default"
        else:
            meta.pop("namespace", None)
        if name is not None and meta.get("name") and meta["name"] != name:
            raise ApiError.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({name})")
        if name is not None:
            meta["name"] = name
        return obj

    # -- create --------------------------------------------------------------------------

    async def create(self, resource: str, namespace: str | None, obj: Obj, *,
                     field_validation: str = "Warn", dry_run: bool = False,
                     manager: str | None = None, name: str | None = None) -> Result:
        """`dry_run` (AX2, `dryRun=All`): defaulting, validation and admission run; nothing
        is stored. `manager`: record the write in managedFields under this name (AX1).
        `name`: the URL's, when the create comes from an apply patch to that URL."""
        info = lookup(resource)
        namespace = self._namespace(info, namespace)
        obj = self._check_identity(info, namespace, obj, name)
        warnings = self._prune(obj, field_validation, info)
        meta = obj["metadata"]
        if _nonzero_revision(meta.pop("resourceVersion", None)):
            # etcd3 store's check: only a value that parses as a revision other than 0;
            # anything else ("0", "v1") is dropped, as Kubernetes drops it.
            raise ApiError.bad_request(
                "resourceVersion should not be set on objects to be created")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = generate_name(str(meta["generateName"]))
        for transient in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(transient, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = rfc3339(self.clock.now())
        _start_generation(info, meta)
        if info.kind in _RESET_STATUS_ON_CREATE:
            obj.pop("status", None)
        status = initial_status(info.kind)  # PrepareForCreate: the zero status
        if status is not None:
            obj["status"] = status
        apply_defaults(obj)
        _omit_empty_metadata(meta)
        self._validate(info, obj)
        if self.escalation is not None:
            await self.escalation.admit(info, obj, None, request_name=name or "")
        attrs = Attributes(info, obj, None, Operation.CREATE, dry_run=dry_run,
                           revalidate=lambda changed: self._validate(info, changed))
        warnings += await self.admission.admit(attrs)
        warnings += await self.admission.validate(attrs)
        if manager:
            obj = field_managers.record_update(info.kind, None, obj, manager=manager)
        inject_into_object(obj)
        self._check_size(info, obj)
        key = storage_key(info, meta.get("namespace"), meta["name"])
        held = await self._allocate_service_ips(info, obj, dry_run)
        try:
            held_ports = await self._allocate_node_ports(info, obj, dry_run)
        except BaseException:
            await self._give_back(held, [])
            raise
        if dry_run:
            existing, _ = await self.storage.get(key)
            if existing is not None:
                raise ApiError.already_exists(info.resource, meta["name"], group=info.group)
            return Result(obj, warnings)
        try:
            stored = await self.storage.create(key, obj)
        except BaseException as err:
            await self._give_back(held, held_ports)
            if isinstance(err, ApiError) and err.reason == Reason.ALREADY_EXISTS:
                raise ApiError.already_exists(info.resource, meta["name"],
                                               group=info.group) from None
            raise
        return Result(stored, warnings)

    async def _allocate_service_ips(self, info: KindInfo, obj: Obj,
                                    dry_run: bool) -> list[str]:
        if info.kind != "Service" or self.service_ips is None:
            return []
        return await self.service_ips.allocate(obj, dry_run=dry_run)

    async def _allocate_node_ports(self, info: KindInfo, obj: Obj,
                                   dry_run: bool) -> list[int]:
        if info.kind != "Service" or self.node_ports is None:
            return []
        return await self.node_ports.allocate(obj, dry_run=dry_run)

    async def _give_back(self, ips: list[str], ports: list[int]) -> None:
        """Free what a Service write held when the write was not stored."""
        if ips and self.service_ips is not None:
            await self.service_ips.release(ips)
        if ports and self.node_ports is not None:
            await self.node_ports.release(ports)

    async def _released(self, info: KindInfo, obj: Obj) -> None:
        """AX7: a deleted Service's cluster IP and node ports are free again."""
        if info.kind == "Service" and self.service_ips is not None:
            await self.service_ips.release_service(obj)
        if info.kind == "Service" and self.node_ports is not None:
            await self.node_ports.release_service(obj)

    async def _get_service_account(self, namespace: str, name: str) -> Obj | None:
        info = lookup("serviceaccounts")
        # From the watch-fed copy (as Kubernetes' admission reads its lister); a miss reads
        # etcd, so an account created a moment ago is found.
        account = await self.service_accounts.get(f"{namespace}/{name}")
        if account is None and name == "default":
            # Skiff's deviation: the serviceaccount controller makes `default` in every
            # namespace, but a pod created in the moment before it does (a new namespace, a
            # controller-manager still starting or failing over) would be refused; the
            # apiserver makes the same object itself instead of racing it.
            await self._ensure({"apiVersion": "v1", "kind": "ServiceAccount",
                                "metadata": {"name": "default", "namespace": namespace}})
            kv, _ = await self.storage.get(storage_key(info, namespace, name))
            account = kv.obj if kv is not None else None
        return account

    async def ensure_system_objects(self) -> None:
        """Namespaces and PriorityClasses every Kubernetes cluster has."""
        for ns in _SYSTEM_NAMESPACES:
            await self._ensure({"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": ns}})
        for pc in builtin_priority_classes():
            await self._ensure(pc)

    async def ensure(self, obj: Obj) -> None:
        """Create `obj` unless it exists (bootstrap objects, e.g. RBAC defaults)."""
        await self._ensure(obj)

    async def _ensure(self, obj: Obj) -> None:
        info = lookup(obj["kind"])
        meta = obj["metadata"]
        kv, _ = await self.storage.get(storage_key(info, meta.get("namespace"), meta["name"]))
        if kv is not None:
            return
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = rfc3339(self.clock.now())
        _start_generation(info, meta)
        apply_defaults(obj)
        try:
            await self.storage.create(storage_key(info, meta.get("namespace"),
                                                  meta["name"]), obj)
        except ApiError as err:
            if err.reason != Reason.ALREADY_EXISTS:
                raise

    # -- reads ---------------------------------------------------------------------------

    async def get(self, resource: str, namespace: str | None, name: str, *,
                  revision: int = 0) -> Obj:
        info = lookup(resource)
        namespace = self._namespace(info, namespace)
        _check_revision("revision", revision)
        kv, _ = await self.storage.get(storage_key(info, namespace, name), revision=revision)
        if kv is None or kv.obj is None:
            err = ApiError.not_found(info.resource, name, group=info.group)
            if revision:
                err.message += f" at revision {revision}"
            raise err
        return kv.obj

    async def list(self, resource: str, namespace: str | None, *,
                   label_selector: str = "", field_selector: str = "",
                   revision: int = 0, limit: int = 0, continue_token: str = "",
                   api_version: str = "") -> Obj:
        """A `<Kind>List`; with `limit`, one page of it and a `continue` token for the next
        (Kubernetes' chunked lists: every page is read at the first page's revision).
        `api_version`: the version the field selector is written in, if not the stored."""
        info = lookup(resource)
        labels = LabelSelector.parse(label_selector)
        fields = FieldSelector.parse(field_selector, kind=info.kind, api_version=api_version)
        ns = request_namespace(info, namespace, collection=True)  # None: every namespace
        _check_revision("revision", revision)
        if limit < 0:
            raise ApiError.bad_request(f"limit: {limit} must not be negative")
        prefix = storage_prefix(info, ns)

        def keep(obj: Obj | None) -> bool:
            return (obj is not None
                    and labels.matches(obj.get("metadata", {}).get("labels"))
                    and fields.matches(obj))

        if not limit and not continue_token:
            kvs, rev = await self.storage.list(prefix, revision=revision)
            items = [kv.obj for kv in kvs if keep(kv.obj)]
            return {"apiVersion": info.api_version, "kind": f"{info.kind}List",
                    "metadata": {"resourceVersion": str(revision or rev)}, "items": items}
        start = b""
        if continue_token:
            token = paging.decode_continue(continue_token)
            revision, start = token.revision, (prefix + token.start).encode()
        items = []
        meta: Obj = {}
        while True:
            want = (limit or LIST_PAGE) - len(items)
            try:
                page = await self.storage.list_page(prefix, revision=revision, start=start,
                                                    limit=max(want, 1))
            except ApiError as err:
                if err.reason == Reason.GONE and continue_token:
                    raise paging.expired(revision) from None
                raise
            revision = page.revision
            items.extend(kv.obj for kv in page.items if keep(kv.obj))
            if not page.more:
                break
            start = page.next_key
            if not limit or len(items) >= limit:
                meta["continue"] = paging.encode_continue(
                    revision, page.next_key.decode().removeprefix(prefix))
                if not label_selector and not field_selector:
                    meta["remainingItemCount"] = page.remaining
                break
        return {"apiVersion": info.api_version, "kind": f"{info.kind}List",
                "metadata": {"resourceVersion": str(revision), **meta}, "items": items}

    async def history(self, resource: str, namespace: str | None, name: str) -> Obj:
        """Every version of one object still in etcd, oldest first (AS6)."""
        info = lookup(resource)
        namespace = self._namespace(info, namespace)
        versions = await self.storage.history(storage_key(info, namespace, name))
        if not versions:
            raise ApiError.not_found(info.resource, name, group=info.group)
        items = []
        for kv in versions:
            if kv.obj is None:
                kind = "DELETED"
            elif kv.mod_revision == kv.create_revision:
                kind = "ADDED"
            else:
                kind = "MODIFIED"
            items.append({"revision": kv.mod_revision, "type": kind, "object": kv.obj})
        return {"items": items}

    # -- update --------------------------------------------------------------------------

    async def update(self, resource: str, namespace: str | None, obj: Obj, *,
                     subresource: str = "", field_validation: str = "Warn",
                     dry_run: bool = False, manager: str | None = None,
                     name: str | None = None) -> Result:
        """`name`: the object the request addresses (the URL's); a body naming another
        object is a 400, never a write to that other object (SPEC AU5)."""
        info = lookup(resource)
        namespace = self._namespace(info, namespace)
        obj = self._check_identity(info, namespace, obj, name)
        warnings = self._prune(obj, field_validation, info)
        pruned = len(warnings)  # admission's warnings follow, replaced on each retry
        name = _name(obj)
        requested_rv = str(obj["metadata"].get("resourceVersion") or "")
        if not object_subresource(info.kind, subresource):
            raise ApiError.bad_request(f"subresource {subresource!r} is not supported")
        if subresource == "status" and not info.has_status:
            raise ApiError.bad_request(f"{info.resource} have no status subresource")

        async def attempt() -> Result:
            cur = await self._get_kv(info, namespace, name)
            assert cur.obj is not None
            if requested_rv and requested_rv != str(cur.mod_revision):
                raise ApiError.conflict(
                    info.resource, name,
                    "the object has been modified; please apply your changes to the latest "
                    "version and try again")
            new = self._merge_update(info, cur.obj, obj, subresource)
            service_spec = info.kind == "Service" and subresource == ""
            if service_spec:
                clusterip.keep_on_update(cur.obj, new)
                nodeports.prepare_update(cur.obj, new)
            apply_defaults(new)
            _omit_empty_metadata(new["metadata"])
            if (subresource == "" and info.kind in GENERATION_KINDS
                    and _has_spec_change(cur.obj, new)):
                generation = int(cur.obj["metadata"].get("generation", 1))
                new["metadata"]["generation"] = generation + 1
            self._validate(info, new, old=cur.obj, subresource=subresource)
            if self.escalation is not None:
                await self.escalation.admit(info, new, cur.obj)
            attrs = Attributes(info, new, cur.obj, Operation.UPDATE, subresource=subresource,
                               dry_run=dry_run)
            warnings[pruned:] = [*await self.admission.admit(attrs),
                                 *await self.admission.validate(attrs)]
            if manager:  # the stored entries, whatever the writer's copy had (AX1)
                new = field_managers.record_update(info.kind, cur.obj, new, manager=manager,
                                                   subresource=subresource)
            self._check_size(info, new)
            if _strip_rv(new) == _strip_rv(cur.obj):
                return Result(cur.obj, warnings)
            held_ports: list[int] = []
            freed_ports: list[int] = []
            if service_spec and self.node_ports is not None:
                held_ports, freed_ports = await self.node_ports.allocate_update(
                    cur.obj, new, dry_run=dry_run)
            if dry_run:
                new["metadata"]["resourceVersion"] = str(cur.mod_revision)
                return Result(new, warnings)
            key = storage_key(info, namespace, name)
            try:
                if graceful.finished_finalizing(new):
                    rev = await self.storage.delete(key, expected_revision=cur.mod_revision)
                    new["metadata"]["resourceVersion"] = str(rev)
                    await self._released(info, new)
                    return Result(new, warnings)
                stored = await self.storage.update(key, new,
                                                   expected_revision=cur.mod_revision)
            except BaseException as err:
                await self._give_back([], held_ports)
                if not isinstance(err, ApiError) or not _lost_race(err):
                    raise
                if requested_rv:
                    raise ApiError.conflict(
                        info.resource, name,
                        "the object has been modified; please apply your changes to the "
                        "latest version and try again") from None
                raise _Retry() from None
            if freed_ports and self.node_ports is not None:
                await self.node_ports.release(freed_ports)
            return Result(stored, warnings)

        return await self._retry_conflicts(attempt)

    @staticmethod
    def _merge_update(info: KindInfo, old: Obj, new_in: Obj, subresource: str) -> Obj:
        """AS8: a spec write keeps the stored status; a status write keeps everything else;
        an `ephemeralcontainers` write changes only `spec.ephemeralContainers`."""
        if subresource == "status":
            merged = copy.deepcopy(old)
            merged["status"] = copy.deepcopy(new_in.get("status", {}))
            return merged
        if subresource == EPHEMERAL_CONTAINERS:
            merged = copy.deepcopy(old)
            merged.setdefault("spec", {})["ephemeralContainers"] = copy.deepcopy(
                (new_in.get("spec") or {}).get("ephemeralContainers") or [])
            return merged
        new = copy.deepcopy(new_in)
        meta, old_meta = new["metadata"], old["metadata"]
        for fixed in ("uid", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "generation"):
            if fixed in old_meta:
                meta[fixed] = old_meta[fixed]
            else:
                meta.pop(fixed, None)
        if info.has_status:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        return new

    # -- delete --------------------------------------------------------------------------

    async def delete(self, resource: str, namespace: str | None, name: str, *,
                     grace_period_seconds: int | None = None,
                     preconditions: Obj | None = None, dry_run: bool = False,
                     propagation_policy: str | None = None,
                     orphan_dependents: bool | None = None) -> Obj:
        """GT1–GT3: mark for graceful deletion, or remove now. Returns the object and
        whether it is gone (`{"object": ..., "deleted": bool}`). `propagation_policy`
        Orphan/Foreground adds the garbage collector's finalizer (see skiff.api.ownership)."""
        info = lookup(resource)
        propagation_finalizer = ownership.propagation_finalizer(
            propagation_policy, orphan_dependents=orphan_dependents)
        namespace = self._namespace(info, namespace)
        key = storage_key(info, namespace, name)
        if grace_period_seconds is not None and not isinstance(grace_period_seconds, int):
            raise ApiError.bad_request("gracePeriodSeconds: must be an integer")
        if grace_period_seconds is not None:
            problem = grace_period_problem(grace_period_seconds)
            if problem:
                raise ApiError.bad_request(f"gracePeriodSeconds: Invalid value: "
                                           f"{grace_period_seconds}: {problem}")

        async def attempt() -> Obj:
            cur = await self._get_kv(info, namespace, name)
            assert cur.obj is not None
            _check_preconditions(info, name, cur, preconditions)
            current = ownership.with_propagation_finalizer(cur.obj, propagation_finalizer)
            period: int | None = 0
            if info.kind == "Pod" and current["metadata"].get("deletionTimestamp"):
                period = graceful.later_delete_period(grace_period_seconds)
            elif info.kind == "Pod":
                period = graceful.pod_grace_period(current, grace_period_seconds)
            decision = graceful.decide(current, period, self.clock.now())
            terminating = graceful.mark_namespace_terminating(current, self.clock.now())
            if terminating is not None:
                decision = graceful.Decision(
                    graceful.Action.UNCHANGED if terminating is cur.obj
                    else graceful.Action.MARK, terminating)
            if dry_run:
                return {"object": decision.obj if decision.action is graceful.Action.MARK
                        else current,
                        "deleted": decision.action not in (graceful.Action.UNCHANGED,
                                                           graceful.Action.MARK)}
            try:
                if decision.action is graceful.Action.UNCHANGED:
                    if current is not cur.obj:  # a later DELETE asked for another propagation
                        stored = await self.storage.update(key, current,
                                                           expected_revision=cur.mod_revision)
                        return {"object": stored, "deleted": False}
                    return {"object": cur.obj, "deleted": False}
                if decision.action is graceful.Action.MARK:
                    marked = decision.obj
                    inject_into_object(marked)
                    stored = await self.storage.update(key, marked,
                                                       expected_revision=cur.mod_revision)
                    return {"object": stored, "deleted": False}
                rev = await self.storage.delete(key, expected_revision=cur.mod_revision)
            except ApiError as err:
                if _lost_race(err):
                    raise _Retry() from None
                raise
            gone = copy.deepcopy(cur.obj)
            gone["metadata"]["resourceVersion"] = str(rev)
            await self._released(info, gone)
            return {"object": gone, "deleted": True}

        return await self._retry_conflicts(attempt)

    # -- pod subresources ----------------------------------------------------------------

    async def bind(self, namespace: str | None, name: str, binding: Obj) -> Obj:
        """pods/binding: set spec.nodeName once and PodScheduled=True (AS8)."""
        info = lookup("pods")
        namespace = self._pod_namespace(namespace)
        _check_subresource_name(binding, name, "Binding")
        target = (binding.get("target") or {}).get("name") if isinstance(binding, dict) else None
        if not target:
            raise ApiError.invalid("Binding", name, [FieldError("target.name",
                                                                "Required value")])
        uid = (binding.get("metadata") or {}).get("uid")
        key = storage_key(info, namespace, name)
        first = [True]

        async def attempt() -> Obj:
            # First try: the watch cache's newest copy as the compare-and-swap's suggestion
            # (one etcd txn instead of a read and a txn, as Kubernetes' GuaranteedUpdate
            # does); it is only trusted where it lets the binding through, and a stale copy
            # fails the txn's compare, so both fall back to a fresh read.
            if first[0]:
                first[0] = False
                suggested = self._bind_suggestion(key, uid)
                if suggested is not None:
                    return await _swap(*suggested)
            cur = await self._get_kv(info, namespace, name)
            pod = cur.obj  # freshly decoded for this request, shared with nobody: no copy
            assert pod is not None
            if uid and pod["metadata"].get("uid") != uid:
                raise ApiError.conflict("pods", name, "the pod's UID does not match the "
                                        "binding; it was deleted and recreated")
            if pod["metadata"].get("deletionTimestamp"):
                raise ApiError.conflict("pods/binding", name,
                                        f"pod {name} is being deleted, cannot be assigned to "
                                        "a host")
            if pod["spec"].get("nodeName"):
                raise ApiError.conflict("pods/binding", name,
                                        f"pod {name} is already assigned to node "
                                        f'"{pod["spec"]["nodeName"]}"')
            return await _swap(pod, cur.mod_revision)

        async def _swap(pod: Obj, revision: int) -> Obj:
            pod["spec"]["nodeName"] = target
            set_condition(pod, "PodScheduled", "True", now=self.clock.now())
            inject_into_object(pod)
            try:
                return await self.storage.update(key, pod, expected_revision=revision)
            except ApiError as err:
                if _lost_race(err):
                    raise _Retry() from None
                raise

        return await self._retry_conflicts(attempt)

    def _bind_suggestion(self, key: str, uid: str | None) -> tuple[Obj, int] | None:
        """A private copy of the watch cache's newest pod at `key` and its revision, when
        that copy can be bound as it is (not deleted, terminating, bound or another uid)."""
        raw = self.cache.recent(key)
        if raw is None or raw.obj is None:
            return None
        meta, spec = raw.obj.get("metadata") or {}, raw.obj.get("spec") or {}
        if ((uid and meta.get("uid") != uid) or meta.get("deletionTimestamp")
                or spec.get("nodeName")):
            return None
        return decode_map(encode(raw.obj)), raw.revision

    async def evict(self, namespace: str | None, name: str, eviction: Obj) -> Obj:
        """pods/eviction: a graceful delete that honours PodDisruptionBudgets (429)."""
        namespace = self._pod_namespace(namespace)
        _check_subresource_name(eviction, name, "Eviction")
        options = (eviction.get("deleteOptions") or {}) if isinstance(eviction, dict) else {}
        grace = options.get("gracePeriodSeconds")
        cur = await self._get_kv(lookup("pods"), namespace, name)
        pod = cur.obj
        assert pod is not None
        phase = pod.get("status", {}).get("phase")
        unchanged_since: int | None = None
        if phase not in ("Succeeded", "Failed", "Pending") and not pod["metadata"].get(
                "deletionTimestamp"):
            if await self._take_disruption(namespace, pod):
                # An unhealthy pod evicted without using the budget: only if it has not
                # become ready since (Kubernetes' resourceVersion precondition).
                unchanged_since = cur.mod_revision
        await self._add_disruption_target(namespace, name, "EvictionByEvictionAPI",
                                          "Eviction API: evicting",
                                          unchanged_since=unchanged_since)
        return await self.delete("pods", namespace, name, grace_period_seconds=grace,
                                 preconditions={"uid": pod["metadata"]["uid"]})

    async def _take_disruption(self, namespace: str, pod: Obj) -> bool:
        """Take one disruption from the pod's PDB (429 when none is left). True when the
        pod may go without taking one: it is not ready and the budget's
        `unhealthyPodEvictionPolicy` is AlwaysAllow, or (IfHealthyBudget, the default)
        the budget is healthy enough (currentHealthy >= desiredHealthy > 0)."""
        info = lookup("poddisruptionbudgets")
        kvs, _ = await self.storage.list(storage_prefix(info, namespace))
        labels = pod.get("metadata", {}).get("labels") or {}
        matching = [kv for kv in kvs
                    if kv.obj is not None and _pdb_selects(kv.obj, labels)]
        if not matching:
            return False
        if len(matching) > 1:
            raise ApiError(Reason.INTERNAL_ERROR,
                           "This pod has more than one PodDisruptionBudget, which the "
                           "eviction subresource does not support.")
        kv = matching[0]
        pdb = copy.deepcopy(kv.obj)
        assert pdb is not None
        status = pdb.setdefault("status", {})
        pdb_name = pdb["metadata"]["name"]
        if not _is_ready(pod):
            policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy")
            if policy == "AlwaysAllow":
                return True
            desired = int(status.get("desiredHealthy", 0))
            if int(status.get("currentHealthy", 0)) >= desired > 0:
                return True
        if int(status.get("observedGeneration", 0)) < int(pdb["metadata"].get("generation", 1)):
            raise ApiError(Reason.TOO_MANY_REQUESTS,
                           f"Cannot evict pod as it would violate the pod's disruption budget. "
                           f"The disruption budget {pdb_name} is still being processed by "
                           "the server.", retry_after_seconds=10)
        allowed = int(status.get("disruptionsAllowed", 0))
        if allowed <= 0:
            raise ApiError(Reason.TOO_MANY_REQUESTS,
                           "Cannot evict pod as it would violate the pod's disruption budget. "
                           f"The disruption budget {pdb_name} needs "
                           f"{status.get('desiredHealthy', 0)} healthy pods and has "
                           f"{status.get('currentHealthy', 0)} currently",
                           retry_after_seconds=10)
        status["disruptionsAllowed"] = allowed - 1
        status.setdefault("disruptedPods", {})[pod["metadata"]["name"]] = rfc3339(
            self.clock.now())
        try:
            await self.storage.update(kv.key, pdb, expected_revision=kv.mod_revision)
        except ApiError as err:
            if _lost_race(err):
                raise ApiError(Reason.TOO_MANY_REQUESTS,
                               "the disruption budget changed during eviction; retry",
                               retry_after_seconds=1) from None
            raise
        return False

    async def _add_disruption_target(self, namespace: str, name: str, reason: str,
                                     message: str, *, unchanged_since: int | None = None
                                     ) -> None:
        info = lookup("pods")

        async def attempt() -> None:
            cur = await self._get_kv(info, namespace, name)
            pod = copy.deepcopy(cur.obj)
            assert pod is not None
            if unchanged_since is not None and cur.mod_revision != unchanged_since:
                raise ApiError(Reason.TOO_MANY_REQUESTS,
                               "Cannot evict pod as it would violate the pod's disruption "
                               "budget. The pod changed during eviction; retry",
                               retry_after_seconds=10)
            if pod["metadata"].get("deletionTimestamp"):
                return
            set_condition(pod, "DisruptionTarget", "True", now=self.clock.now(),
                           reason=reason, message=message)
            try:
                await self.storage.update(storage_key(info, namespace, name), pod,
                                          expected_revision=cur.mod_revision)
            except ApiError as err:
                if _lost_race(err):
                    raise _Retry() from None
                raise

        await self._retry_conflicts(attempt)

    # -- watch ---------------------------------------------------------------------------

    async def watch(self, resource: str, namespace: str | None, *,
                    resource_version: str = "", label_selector: str = "",
                    field_selector: str = "", name: str = "",
                    api_version: str = "") -> AsyncIterator[WatchEvent]:
        async for batch in self.watch_batches(
                resource, namespace, resource_version=resource_version,
                label_selector=label_selector, field_selector=field_selector, name=name,
                api_version=api_version):
            for ev in batch:
                yield ev

    async def watch_batches(self, resource: str, namespace: str | None, *,
                            resource_version: str = "", label_selector: str = "",
                            field_selector: str = "", name: str = "",
                            api_version: str = ""
                            ) -> AsyncIterator[builtins.list[WatchEvent]]:
        """`watch` in lists of the events that were ready together (WatchCache)."""
        info = lookup(resource)
        labels = LabelSelector.parse(label_selector)
        fields = FieldSelector.parse(field_selector, kind=info.kind, api_version=api_version)
        ns = request_namespace(info, namespace, collection=True)  # None: every namespace

        def matches(obj: Obj) -> bool:
            return labels.matches(obj.get("metadata", {}).get("labels")) and fields.matches(obj)

        request = WatchRequest(info, ns, matches, name or None,
                               selects_all=not label_selector and not field_selector)
        if resource_version in ("", "0"):
            # Kubernetes: no resourceVersion = the current state as ADDED events, then changes.
            await self.cache.ready()
            snapshot = await self.list(resource, ns, label_selector=label_selector,
                                       field_selector=field_selector)
            after = int(snapshot["metadata"]["resourceVersion"])
            added = [WatchEvent("ADDED", item, int(item["metadata"]["resourceVersion"]))
                     for item in snapshot["items"]
                     if not name or item["metadata"]["name"] == name]
            for start in range(0, len(added), BATCH_LIMIT):
                yield added[start:start + BATCH_LIMIT]
        else:
            try:
                after = int(resource_version)
            except ValueError:
                raise ApiError.bad_request(
                    f"resourceVersion: {resource_version!r} is not a valid resource "
                    "version; use one from a list or a previous watch event") from None
            _check_revision("resourceVersion", after)
        async for batch in self.cache.watch_batches(request, after):
            yield batch


def _nonzero_revision(value: Any) -> bool:
    try:
        return int(str(value)) != 0
    except ValueError:
        return False


def _check_revision(name: str, value: int) -> None:
    problem = revision_problem(value)
    if problem:
        raise ApiError.bad_request(f"{name}: Invalid value: {value}: {problem}")


def _check_subresource_name(body: Any, name: str, kind: str) -> None:
    """A Binding or Eviction names the pod it is posted to (SPEC AU5): another is a 400."""
    meta = body.get("metadata") if isinstance(body, dict) else None
    named = meta.get("name") if isinstance(meta, dict) else None
    if named and named != name:
        raise ApiError.bad_request(f"name in URL does not match name in {kind} object")


def _lost_race(err: ApiError) -> bool:
    """A compare-and-swap Conflict (read again and retry), not a leader-fencing refusal."""
    return err.reason == Reason.CONFLICT and not isinstance(err, LeaderFenced)


class _Retry(Exception):
    """A compare-and-swap lost to a concurrent writer; read again and retry."""


def _known(kind: str) -> bool:
    try:
        lookup(kind)
    except ApiError:
        return False
    return True


def _pdb_selects(pdb: Obj, labels: dict[str, str]) -> bool:
    """policy/v1: an empty selector selects every pod of the namespace, a missing one none;
    a PDB with an invalid selector selects nothing."""
    try:
        return LabelSelector.from_dict((pdb.get("spec") or {}).get("selector")).matches(labels)
    except ApiError:
        return False


def _is_ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _check_preconditions(info: KindInfo, name: str, cur: KeyValue,
                         preconditions: Obj | None) -> None:
    if not preconditions:
        return
    assert cur.obj is not None
    uid = preconditions.get("uid")
    if uid and cur.obj["metadata"].get("uid") != uid:
        raise ApiError.conflict(
            info.resource, name,
            f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
            f"{cur.obj['metadata'].get('uid')}")
    rv = preconditions.get("resourceVersion")
    if rv and str(rv) != str(cur.mod_revision):
        raise ApiError.conflict(
            info.resource, name,
            f"Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in "
            f"object meta: {cur.mod_revision}")
