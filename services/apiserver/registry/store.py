"""The generic store: every API verb for every kind, as Kubernetes' generic registry
(`k8s.io/apiserver/pkg/registry/generic/registry/store.go`) does it, asking each kind's
strategy (strategy.py, strategies/) wherever kinds differ.

Each verb validates and admits a request (the admission chain, admission/), then makes
exactly one storage transaction (SPEC AS3–AS4); nothing is half-written. Update and
status-update keep spec and status apart (AS8); delete follows the graceful rules of
GT1–GT3; `bind` and `evict` are the pod subresources (podsubresources.py). Reads at a past
revision and history come from etcd's log (AS6). The store depends on the `Storage`
Protocol only, so it runs on etcd or on the in-memory store.
"""

from __future__ import annotations

import builtins
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from skiff.api import (
    ApiError,
    FieldSelector,
    KindInfo,
    LabelSelector,
    Reason,
    lookup,
    ownership,
)
from skiff.api.kinds import storage_key, storage_prefix
from skiff.api.names import generate_name
from skiff.api.objcopy import deep_copy
from skiff.api.podsecurity import PodSecurityConfig
from skiff.api.types import Obj
from skiff.api.validation import grace_period_problem
from skiff.apiserver.admission.chain import Sources, default_chain
from skiff.apiserver.admission.interface import Attributes, Operation
from skiff.apiserver.admission.priority import builtin_priority_classes
from skiff.apiserver.admission.tolerations import AdmissionConfig
from skiff.apiserver.endpoints.handlers.fieldmanager import apply as field_managers
from skiff.apiserver.perturbation import PerturbationTable
from skiff.apiserver.perturbation.recording import reads, watches, writes
from skiff.apiserver.registry import graceful
from skiff.apiserver.registry.cachedupdate import FROM_CACHE, cached_kv
from skiff.apiserver.registry.conflicts import Retry, lost_race, retry_conflicts
from skiff.apiserver.registry.objects import (
    check_identity,
    check_preconditions,
    check_revision,
    check_size,
    name_of,
    nonzero_revision,
    omit_empty_metadata,
    prune,
    strip_rv,
    with_finalizers,
)
from skiff.apiserver.registry.podsubresources import PodSubresources
from skiff.apiserver.registry.scope import request_namespace
from skiff.apiserver.registry.strategies.catalog import Strategies
from skiff.apiserver.registry.strategy import Strategy, merge_update
from skiff.apiserver.storage import paging
from skiff.apiserver.storage.interface import Storage
from skiff.apiserver.storage.values import LIST_PAGE, KeyValue
from skiff.apiserver.storage.watchcache import BATCH_LIMIT, WatchCache, WatchEvent, WatchRequest
from skiff.clock import Clock, RealClock, rfc3339
from skiff.tracing import inject_into_object

log = logging.getLogger(__name__)

T = TypeVar("T")

_SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


@dataclass
class Result:
    """A write's answer: the stored object and the warnings for the response."""

    object: Obj
    warnings: list[str] = field(default_factory=list)

    def to_wire(self) -> Obj:
        out: Obj = {"object": self.object}
        if self.warnings:
            out["warnings"] = self.warnings
        return out


@dataclass(frozen=True)
class RegistryConfig:
    """The registry's settings (admission plugins' among them)."""

    admission: AdmissionConfig = AdmissionConfig()
    max_conflict_retries: int = 16
    # SPEC AX3: default and check pod.spec.serviceAccountName (the apiserver turns it on
    # unless --disable-admission-plugins names ServiceAccount).
    service_account_admission: bool = False
    # SPEC AU7: PodSecurity admission's defaults and exemptions (None: the plugin is off)
    pod_security: PodSecurityConfig | None = PodSecurityConfig()
    # kube-apiserver's --event-ttl: etcd deletes an Event this long after its last write
    # (0: Events are kept until deleted)
    event_ttl: int = 3600


def _start_generation(strategy: Strategy, meta: Obj) -> None:
    if strategy.generation:
        meta["generation"] = 1
    else:
        meta.pop("generation", None)


class Registry:
    """The generic store over `Storage`, with the watch cache for watches."""

    def __init__(self, storage: Storage, cache: WatchCache, *,
                 config: RegistryConfig | None = None, clock: Clock | None = None) -> None:
        self.storage = storage
        self.cache = cache
        self.config = config or RegistryConfig()
        self.clock = clock or RealClock()
        self.lookups = Sources(storage, cache)  # what admission reads
        self.admission = default_chain(
            self.lookups, tolerations=self.config.admission,
            service_account=(self._get_service_account
                             if self.config.service_account_admission else None),
            pod_security=self.config.pod_security)
        # every kind's strategy; the Services' holds the cluster IP and node port
        # allocators (AX7), which the apiserver sets (None: not allocated, unit tests)
        self.strategies = Strategies()
        self.pods = PodSubresources(self)
        self.perturbations = PerturbationTable(  # issue 35's stale views
            storage, cache, event_ttl=self.config.event_ttl)

    async def run_lookups(self) -> None:
        """Keep the admission lookups current (run as a task beside the watch cache)."""
        await self.lookups.run()

    # -- helpers -------------------------------------------------------------------------

    @staticmethod
    def _namespace(info: KindInfo, namespace: str | None) -> str | None:
        """The namespace a request for one object addresses (SPEC AU5, see scope.py)."""
        return request_namespace(info, namespace, collection=False)

    def pod_namespace(self, namespace: str | None) -> str:
        """The namespace a request for one pod addresses."""
        ns = self._namespace(lookup("pods"), namespace)
        assert ns is not None  # pods are namespaced
        return ns

    async def get_kv(self, info: KindInfo, namespace: str | None, name: str) -> KeyValue:
        """The stored key of one object (404 when there is none)."""
        if not name:
            raise ApiError.bad_request(f"a name is required to address a {info.kind}")
        kv, _ = await self.storage.get(storage_key(info, namespace, name))
        if kv is None or kv.obj is None:
            raise ApiError.not_found(info.resource, name, group=info.group)
        return kv

    async def retry_conflicts(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Re-run a read-modify-write that lost a race (when no rv was requested)."""
        return await retry_conflicts(fn, attempts=self.config.max_conflict_retries)

    def _validate(self, info: KindInfo, obj: Obj, old: Obj | None = None, *,
                  subresource: str = "") -> None:
        strategy = self.strategies.of(info)
        errors = (strategy.validate_create(obj) if old is None else
                  strategy.validate_update(obj, old, subresource=subresource))
        if errors:
            raise ApiError.invalid(info.kind, name_of(obj), errors, group=info.group)

    # -- create --------------------------------------------------------------------------

    @writes("create")  # issue 35: the record of a failed write
    async def create(self, resource: str, namespace: str | None, obj: Obj, *,
                     field_validation: str = "Warn", dry_run: bool = False,
                     manager: str | None = None, name: str | None = None) -> Result:
        """`dry_run` (AX2, `dryRun=All`): defaulting, validation and admission run; nothing
        is stored. `manager`: record the write in managedFields under this name (AX1).
        `name`: the URL's, when the create comes from an apply patch to that URL."""
        info = lookup(resource)
        strategy = self.strategies.of(info)
        namespace = self._namespace(info, namespace)
        obj = check_identity(info, namespace, obj, name)
        warnings = prune(obj, field_validation, info, strategy.prune_unknown)
        meta = obj["metadata"]
        if nonzero_revision(meta.pop("resourceVersion", None)):
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
        _start_generation(strategy, meta)
        strategy.prepare_for_create(obj)
        strategy.default(obj)
        omit_empty_metadata(meta)
        self._validate(info, obj)
        await strategy.before_write(info, obj, None, request_name=name or "")
        attrs = Attributes(info, obj, None, Operation.CREATE, dry_run=dry_run,
                           revalidate=lambda changed: self._validate(info, changed))
        warnings += await self.admission.admit(attrs)
        warnings += await self.admission.validate(attrs)
        if manager:
            obj = field_managers.record_update(info.kind, None, obj, manager=manager)
        inject_into_object(obj)
        check_size(info, obj)
        key = storage_key(info, meta.get("namespace"), meta["name"])
        held = await strategy.allocate(obj, dry_run=dry_run)
        if dry_run:
            existing, _ = await self.storage.get(key)
            if existing is not None:
                raise ApiError.already_exists(info.resource, meta["name"], group=info.group)
            return Result(obj, warnings)
        try:
            stored = await self.storage.create(key, obj, ttl=self._ttl(info))
        except BaseException as err:
            await held.give_back()
            if isinstance(err, ApiError) and err.reason == Reason.ALREADY_EXISTS:
                raise ApiError.already_exists(info.resource, meta["name"],
                                               group=info.group) from None
            raise
        self.perturbations.wrote(info, "create", stored)  # issue 35: crash on write
        return Result(stored, warnings)

    def _ttl(self, info: KindInfo) -> int:
        """Seconds after a write that etcd deletes the object (0: never): only Events (core
        v1, also served as events.k8s.io/v1) expire."""
        return self.config.event_ttl if info.resource == "events" else 0

    async def _get_service_account(self, namespace: str, name: str) -> Obj | None:
        info = lookup("serviceaccounts")
        # From the watch-fed copy (as Kubernetes' admission reads its lister); a miss reads
        # etcd, so an account created a moment ago is found.
        account = await self.lookups.service_accounts.get(f"{namespace}/{name}")
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
        obj = deep_copy(obj)
        meta = obj["metadata"]
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = rfc3339(self.clock.now())
        strategy = self.strategies.of(info)
        _start_generation(strategy, meta)
        strategy.default(obj)
        try:
            await self.storage.create(storage_key(info, meta.get("namespace"),
                                                  meta["name"]), obj)
        except ApiError as err:
            if err.reason != Reason.ALREADY_EXISTS:
                raise

    # -- reads ---------------------------------------------------------------------------

    @reads("get")  # issue 35: a stale view, the record
    async def get(self, resource: str, namespace: str | None, name: str, *,
                  revision: int = 0, allow_cached: bool = False) -> Obj:
        """`allow_cached`: resourceVersion=0 / NotOlderThan (a Perturbation's stale view)."""
        info = lookup(resource)
        namespace = self._namespace(info, namespace)
        check_revision("revision", revision)
        kv, _ = await self.storage.get(storage_key(info, namespace, name), revision=revision)
        if kv is None or kv.obj is None:
            err = ApiError.not_found(info.resource, name, group=info.group)
            if revision:
                err.message += f" at revision {revision}"
            raise err
        return kv.obj

    async def get_or_none(self, resource: str, namespace: str | None, name: str) -> Obj | None:
        """`get`, with None for an object that does not exist."""
        info = lookup(resource)
        kv, _ = await self.storage.get(storage_key(info, self._namespace(info, namespace), name))
        return None if kv is None else kv.obj

    @reads("list")  # issue 35: a stale view, the record
    async def list(self, resource: str, namespace: str | None, *,
                   label_selector: str = "", field_selector: str = "",
                   revision: int = 0, limit: int = 0, continue_token: str = "",
                   api_version: str = "", allow_cached: bool = False) -> Obj:
        """A `<Kind>List`; with `limit`, one page of it and a `continue` token for the next
        (Kubernetes' chunked lists: every page is read at the first page's revision).
        `api_version`: the version the field selector is written in, if not the stored.
        `allow_cached`: resourceVersion=0 / NotOlderThan (a Perturbation's stale view)."""
        info = lookup(resource)
        labels = LabelSelector.parse(label_selector)
        fields = FieldSelector.parse(field_selector, kind=info.kind, api_version=api_version,
                                     labels=self.strategies.of(info).field_labels())
        ns = request_namespace(info, namespace, collection=True)  # None: every namespace
        check_revision("revision", revision)
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

    @writes("update")  # issue 35: the record of a failed write
    async def update(self, resource: str, namespace: str | None, obj: Obj, *,
                     subresource: str = "", field_validation: str = "Warn",
                     dry_run: bool = False, manager: str | None = None,
                     name: str | None = None) -> Result:
        """`name`: the object the request addresses (the URL's); a body naming another
        object is a 400, never a write to that other object (SPEC AU5)."""
        info = lookup(resource)
        strategy = self.strategies.of(info)
        namespace = self._namespace(info, namespace)
        obj = check_identity(info, namespace, obj, name)
        warnings = prune(obj, field_validation, info, strategy.prune_unknown)
        pruned = len(warnings)  # admission's warnings follow, replaced on each retry
        name = name_of(obj)
        requested_rv = str(obj["metadata"].get("resourceVersion") or "")
        if not strategy.serves(subresource):
            raise ApiError.bad_request(f"subresource {subresource!r} is not supported")
        if subresource == "status" and not info.has_status:
            raise ApiError.bad_request(f"{info.resource} have no status subresource")

        first = [True]  # the first attempt may start from the watch cache's copy

        async def attempt() -> Result:
            cur = cached_kv(self.cache, storage_key(info, namespace, name), requested_rv,
                            first=first) or await self.get_kv(info, namespace, name)
            assert cur.obj is not None
            if requested_rv and requested_rv != str(cur.mod_revision):
                raise ApiError.conflict(
                    info.resource, name,
                    "the object has been modified; please apply your changes to the latest "
                    "version and try again")
            new = merge_update(info, strategy, cur.obj, obj, subresource)
            strategy.prepare_for_update(cur.obj, new, subresource=subresource)
            strategy.default(new)
            omit_empty_metadata(new["metadata"])
            if (subresource == "" and strategy.generation
                    and strategy.spec_changed(cur.obj, new)):
                generation = int(cur.obj["metadata"].get("generation", 1))
                new["metadata"]["generation"] = generation + 1
            self._validate(info, new, old=cur.obj, subresource=subresource)
            await strategy.before_write(info, new, cur.obj, request_name=None)
            attrs = Attributes(info, new, cur.obj, Operation.UPDATE, subresource=subresource,
                               dry_run=dry_run, revalidate=lambda changed: self._validate(
                                   info, changed, old=cur.obj, subresource=subresource))
            warnings[pruned:] = [*await self.admission.admit(attrs),
                                 *await self.admission.validate(attrs)]
            if manager:  # the stored entries, whatever the writer's copy had (AX1)
                new = field_managers.record_update(info.kind, cur.obj, new, manager=manager,
                                                   subresource=subresource)
            check_size(info, new)
            if strip_rv(new) == strip_rv(cur.obj):
                return Result(cur.obj, warnings)
            held = await strategy.allocate_update(cur.obj, new, subresource=subresource,
                                                  dry_run=dry_run)
            if dry_run:
                new["metadata"]["resourceVersion"] = str(cur.mod_revision)
                return Result(new, warnings)
            key = storage_key(info, namespace, name)
            try:
                if graceful.finished_finalizing(new):
                    rev = await self.storage.delete(key, expected_revision=cur.mod_revision)
                    new["metadata"]["resourceVersion"] = str(rev)
                    await strategy.released(new)
                    return Result(new, warnings)
                stored = await self.storage.update(key, new, expected_revision=cur.mod_revision,
                                                   ttl=self._ttl(info))
            except BaseException as err:
                await held.give_back()
                if not isinstance(err, ApiError) or not lost_race(err):
                    raise
                if requested_rv and cur.create_revision != FROM_CACHE:  # else: read etcd
                    raise ApiError.conflict(
                        info.resource, name,
                        "the object has been modified; please apply your changes to the "
                        "latest version and try again") from None
                raise Retry() from None
            await held.commit()
            self.perturbations.wrote(info, "update", stored, subresource)
            return Result(stored, warnings)

        return await self.retry_conflicts(attempt)

    # -- delete --------------------------------------------------------------------------

    @writes("delete")  # issue 35: the record of a failed write
    async def delete(self, resource: str, namespace: str | None, name: str, *,
                     grace_period_seconds: int | None = None,
                     preconditions: Obj | None = None, dry_run: bool = False,
                     propagation_policy: str | None = None,
                     orphan_dependents: bool | None = None) -> Obj:
        """GT1–GT3: mark for graceful deletion, or remove now. Returns the object and
        whether it is gone (`{"object": ..., "deleted": bool}`). `propagation_policy`
        Orphan/Foreground adds the garbage collector's finalizer (see skiff.api.ownership)."""
        info = lookup(resource)
        strategy = self.strategies.of(info)
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
            cur = await self.get_kv(info, namespace, name)
            assert cur.obj is not None
            check_preconditions(info, name, cur, preconditions)
            # DELETE admission (webhooks): the object being deleted is the old one
            attrs = Attributes(info, {}, cur.obj, Operation.DELETE, dry_run=dry_run)
            await self.admission.admit(attrs)
            await self.admission.validate(attrs)
            current = ownership.with_propagation_finalizer(cur.obj, propagation_finalizer)
            current = with_finalizers(current, strategy.finalizers_on_delete(current))
            period = strategy.delete_grace_period(current, grace_period_seconds)
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
                        stored = await self.storage.update(
                            key, current, expected_revision=cur.mod_revision,
                            ttl=self._ttl(info))
                        return {"object": stored, "deleted": False}
                    return {"object": cur.obj, "deleted": False}
                if decision.action is graceful.Action.MARK:
                    marked = decision.obj
                    inject_into_object(marked)
                    stored = await self.storage.update(key, marked,
                                                       expected_revision=cur.mod_revision,
                                                       ttl=self._ttl(info))
                    return {"object": stored, "deleted": False}
                rev = await self.storage.delete(key, expected_revision=cur.mod_revision)
            except ApiError as err:
                if lost_race(err):
                    raise Retry() from None
                raise
            gone = deep_copy(cur.obj)
            gone["metadata"]["resourceVersion"] = str(rev)
            await strategy.released(gone)
            self.perturbations.wrote(info, "delete", gone)
            return {"object": gone, "deleted": True}

        return await self.retry_conflicts(attempt)

    # -- pod subresources ----------------------------------------------------------------

    async def bind(self, namespace: str | None, name: str, binding: Obj) -> Obj:
        """pods/binding (podsubresources.py)."""
        return await self.pods.bind(namespace, name, binding)

    async def evict(self, namespace: str | None, name: str, eviction: Obj) -> Obj:
        """pods/eviction (podsubresources.py)."""
        return await self.pods.evict(namespace, name, eviction)

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

    @watches  # issue 35: the record of a watch
    async def watch_batches(self, resource: str, namespace: str | None, *,
                            resource_version: str = "", label_selector: str = "",
                            field_selector: str = "", name: str = "",
                            api_version: str = "", coalesce: bool = False
                            ) -> AsyncIterator[builtins.list[WatchEvent]]:
        """`watch` in lists of the events that were ready together (WatchCache);
        `coalesce`: a client's stream, which may wait for the cache's tick when busy."""
        info = lookup(resource)
        labels = LabelSelector.parse(label_selector)
        fields = FieldSelector.parse(field_selector, kind=info.kind, api_version=api_version,
                                     labels=self.strategies.of(info).field_labels())
        ns = request_namespace(info, namespace, collection=True)  # None: every namespace

        def matches(obj: Obj) -> bool:
            return labels.matches(obj.get("metadata", {}).get("labels")) and fields.matches(obj)

        request = WatchRequest(info, ns, matches, name or None,
                               selects_all=not label_selector and not field_selector,
                               node_name=fields.exact("spec.nodeName"))
        if resource_version in ("", "0"):
            # Kubernetes: no resourceVersion = the current state as ADDED events, then changes.
            await self.cache.ready()
            snapshot = await self.list(resource, ns, label_selector=label_selector,
                                       field_selector=field_selector,
                                       allow_cached=resource_version == "0")
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
            check_revision("resourceVersion", after)
        async for batch in self.perturbations.watch(info,
                                                    self.cache.watch_batches(
                                                        request, after, coalesce=coalesce)):
            yield batch
