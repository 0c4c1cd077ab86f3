"""The Kubernetes REST API over HTTP, so the real `kubectl` works against Skiff.

Discovery (`/api`, `/apis`, `/api/v1`, `/apis/<group>/<version>`), `/version`, list / get /
watch / create / update / status / patch / delete on every kind, `pods/binding`,
`pods/eviction` and `pods/log`, and server-side Table output (`Accept: ...;as=Table`) with
the same columns `skiff get` prints. Everything goes through the same `Registry` as the gRPC
front, so both see one set of rules.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import threading
from collections.abc import AsyncIterator
from typing import Any

from skiff.api import ApiError, Reason, tables
from skiff.api.errors import FieldError as ApiFieldError
from skiff.api.kinds import KINDS, KindInfo
from skiff.api.schema import prune_unknown_fields
from skiff.api.selectors import LabelSelector, workload_selector
from skiff.api.validation import revision_problem
from skiff.apiserver import (
    apimetrics,
    collection,
    decoding,
    healthz,
    metricsapi,
    openapi,
    openapi_pb,
    patches,
    protobuf,
    versions,
)
from skiff.apiserver import apply as field_managers
from skiff.apiserver.auth import reviews
from skiff.apiserver.auth.context import current_user
from skiff.apiserver.auth.satoken import TokenAuthority
from skiff.apiserver.guard import RequestGuard
from skiff.apiserver.http import Request, Response
from skiff.apiserver.paging import list_options
from skiff.apiserver.queryparams import query_bool
from skiff.apiserver.registry import Registry, object_subresource
from skiff.apiserver.tokenrequest import create_token
from skiff.auth import Authorizer
from skiff.client import logs as kubelet_logs
from skiff.client.credentials import Credentials

log = logging.getLogger(__name__)

Obj = dict[str, Any]

VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-skiff", "gitCommit": "skiff",
           "gitTreeState": "clean", "buildDate": "2026-11-22T00:00:00Z",
           "goVersion": "python3", "compiler": "cpython", "platform": "linux/amd64"}

_SUBRESOURCES = {"Pod": ("attach", "binding", "ephemeralcontainers", "eviction", "exec", "log",
                         "portforward", "status"),
                 "Node": ("status",), "ReplicaSet": ("status", "scale"),
                 "ReplicationController": ("status", "scale"),
                 "StatefulSet": ("status", "scale"),
                 "Deployment": ("status", "scale"), "DaemonSet": ("status",),
                 "Job": ("status",), "CronJob": ("status",), "Service": ("status",),
                 "PodDisruptionBudget": ("status",), "Namespace": ("status",),
                 "ServiceAccount": ("token",), "PersistentVolume": ("status",),
                 "HorizontalPodAutoscaler": ("status",)}
# A subresource's discovery entry as kube-apiserver lists it: its verbs, and the kind (with
# group and version when they differ from the parent's) that its requests carry. kubectl
# drain evicts only when `pods/eviction` names kind Eviction in a group and version;
# otherwise it falls back to deleting pods, past any PodDisruptionBudget.
_SUBRESOURCE_ENTRY: dict[str, Obj] = {
    "status": {"verbs": ["get", "patch", "update"]},
    "ephemeralcontainers": {"verbs": ["get", "patch", "update"]},
    "log": {"verbs": ["get"]},
    "binding": {"verbs": ["create"], "kind": "Binding"},
    "eviction": {"verbs": ["create"], "kind": "Eviction", "group": "policy", "version": "v1"},
    "exec": {"verbs": ["create", "get"], "kind": "PodExecOptions"},
    "attach": {"verbs": ["create", "get"], "kind": "PodAttachOptions"},
    "portforward": {"verbs": ["create", "get"], "kind": "PodPortForwardOptions"},
    "scale": {"verbs": ["get", "patch", "update"], "kind": "Scale", "group": "autoscaling",
              "version": "v1"},
    "token": {"verbs": ["create"], "kind": "TokenRequest", "group": "authentication.k8s.io",
              "version": "v1"},
}
_VERB_OF = {"PUT": "update", "POST": "create", "PATCH": "patch", "DELETE": "delete",
            "GET": "get"}
# The kinds in Kubernetes' `all` category that Skiff serves
_CATEGORY_ALL = {"Pod", "Service", "DaemonSet", "Deployment", "ReplicaSet", "StatefulSet",
                 "Job", "CronJob", "HorizontalPodAutoscaler", "ReplicationController"}
_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def _groups() -> dict[str, list[KindInfo]]:
    by_gv: dict[str, list[KindInfo]] = {}
    for info in KINDS:
        for served in info.served():
            by_gv.setdefault(served.api_version, []).append(served)
    return by_gv


def _api_groups(by_gv: dict[str, list[KindInfo]]) -> list[Obj]:
    """Every served group with its versions, the stored (preferred) one first."""
    groups: dict[str, Obj] = {}
    for gv in [*by_gv, *reviews.GROUP_VERSIONS]:
        if "/" in gv:
            group, version = gv.split("/")
            entry = {"groupVersion": gv, "version": version}
            found = groups.setdefault(group, {"name": group, "versions": [],
                                              "preferredVersion": entry})
            found["versions"].append(entry)
    return [*groups.values(), metricsapi.api_group()]


def _status(err: ApiError) -> Response:
    return Response(err.code, err.to_status())


def _resource_list(group_version: str, kinds: list[KindInfo]) -> Obj:
    resources: list[Obj] = []
    for info in kinds:
        resources.append({"name": info.resource, "singularName": info.kind.lower(),
                          "namespaced": info.namespaced, "kind": info.kind,
                          "verbs": [v for v in _VERBS if v != "deletecollection"
                                    or info.kind != "Namespace"],
                          "shortNames": list(info.short_names)})
        if info.kind in _CATEGORY_ALL:  # `kubectl get all`
            resources[-1]["categories"] = ["all"]
        for sub in _SUBRESOURCES.get(info.kind, ()):
            entry: Obj = {"name": f"{info.resource}/{sub}", "singularName": "",
                          "namespaced": info.namespaced, "kind": info.kind,
                          **_SUBRESOURCE_ENTRY[sub]}
            resources.append(entry)
    # sorted by name as kube-apiserver lists them (`kubectl get all` prints in this order)
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": sorted(resources, key=lambda r: str(r["name"]))}


# What a Table row carries (`?includeObject=`): Kubernetes' IncludeObjectPolicy values.
_INCLUDE_OBJECT = ("Metadata", "None", "Object")


def _include_object(query: dict[str, str]) -> str:
    include = query.get("includeObject") or "Metadata"
    if include not in _INCLUDE_OBJECT:
        raise ApiError.bad_request(
            f'includeObject: Unsupported value: "{include}": supported values: '
            + ", ".join(f'"{v}"' for v in _INCLUDE_OBJECT))
    return include


class KubeApi:
    """Routes one HTTP request to the registry, the way kube-apiserver would."""

    def __init__(self, registry: Registry, *, guard: RequestGuard | None = None,
                 tokens: TokenAuthority | None = None,
                 kubelet: Credentials | None = None,
                 health: healthz.HealthChecks | None = None) -> None:
        self.registry = registry
        self.health = health or healthz.HealthChecks()
        self.kubelet = kubelet or Credentials()  # to the kubelets' own port (logs)
        self.guard = guard
        self.authorizer: Authorizer = guard.authorizer if guard else reviews.ALLOW_ALL
        self.tokens = tokens or TokenAuthority()
        self.metrics = metricsapi.MetricsApi(registry, kubelet=self.kubelet)
        self.stats = apimetrics.ApiMetrics()  # GET /metrics (Prometheus)
        self._openapi_v3: dict[str, Obj] = {}
        self._openapi_v2_pb: bytes | None = None
        threading.Thread(target=openapi.warm, name="openapi-warm", daemon=True).start()
        self._by_gv = _groups()
        self._api_groups = _api_groups(self._by_gv)  # `/apis`, `/apis/<group>`

    async def handle(self, req: Request) -> Response:
        return await self.stats.measure(req, self._handle)

    async def _handle(self, req: Request) -> Response:
        try:
            if len(req.body) > decoding.LARGE_BODY:  # decoding must not stall the loop
                await asyncio.to_thread(_decode_ahead, req)
            return await self._route(req)
        except ApiError as err:
            return _status(err)
        except RecursionError:
            log.warning("refused an object nested too deeply to process",
                        extra={"method": req.method, "path": req.path})
            return _status(ApiError.bad_request(decoding.TOO_DEEP))
        except (ValueError, KeyError, TypeError, OverflowError, AttributeError) as err:
            # A body or parameter of an unexpected shape that no validation rule named: a
            # client error, so one log line (where it failed), no traceback, and no Python
            # exception text to the client.
            log.warning("refused a malformed request", extra={
                "method": req.method, "path": req.path, "error": type(err).__name__,
                "at": _where(err)})
            return _status(ApiError.bad_request(
                f"{req.method} {req.path}: the request has a field of the wrong type or out "
                "of range; check the object against `kubectl explain`"))
        except Exception:
            log.exception("internal error", extra={"method": req.method, "path": req.path})
            return _status(ApiError(Reason.INTERNAL_ERROR, f"{req.method} {req.path}: an "
                                    "internal error occurred; the apiserver log has the "
                                    "details"))

    async def _route(self, req: Request) -> Response:
        path = req.path.rstrip("/") or "/"
        endpoint, _, check = path.strip("/").partition("/")
        if endpoint in healthz.ENDPOINTS:
            return self.health.answer(endpoint, check, req.query)
        if path == "/version":
            return Response(200, VERSION)
        if path == "/metrics" and req.method == "GET":
            if self.guard is not None:
                await self.guard.http_non_resource(path=path, method=req.method)
            return self.stats.exposition()
        if path == "/api":
            return Response(200, {"kind": "APIVersions", "versions": ["v1"],
                                  "serverAddressByClientCIDRs": [
                                      {"clientCIDR": "0.0.0.0/0",
                                       "serverAddress": req.header("host")}]})
        if path == "/apis":
            return Response(200, {"kind": "APIGroupList", "apiVersion": "v1",
                                  "groups": self._api_groups})
        if path.startswith("/apis/") and path.count("/") == 2:  # /apis/<group>: APIGroup
            group = path.removeprefix("/apis/")
            for entry in self._api_groups:
                if entry["name"] == group:
                    return Response(200, {"kind": "APIGroup", "apiVersion": "v1", **entry})
            raise ApiError(Reason.NOT_FOUND, f"the server could not find the requested "
                                             f"resource (group {group})")
        if path.startswith(metricsapi.PREFIX):
            return await self.metrics.handle(req, path, authorize=self._authorize_metrics(req))
        if path == "/openapi/v3":
            return Response(200, {"paths": {
                ("api/v1" if gv == "v1" else f"apis/{gv}"): {
                    "serverRelativeURL": f"/openapi/v3/{'api/v1' if gv == 'v1' else 'apis/' + gv}"}
                for gv in self._by_gv}})
        if path.startswith("/openapi/v3/"):
            gv = path.removeprefix("/openapi/v3/").removeprefix("api/").removeprefix("apis/")
            if gv not in self._by_gv:
                raise ApiError.not_found("openapi", gv)
            if gv not in self._openapi_v3:  # the same for the life of the process
                self._openapi_v3[gv] = openapi.v3_document(gv, self._by_gv[gv],
                                                           VERSION["gitVersion"])
            return Response(200, self._openapi_v3[gv])
        if path == "/openapi/v2":
            if "protobuf" not in req.header("accept") and "json" in req.header("accept"):
                return Response(200, openapi.v2_document(self._by_gv, VERSION["gitVersion"]))
            # gnostic's Document (kubectl explain --output=plaintext-openapiv2, apply);
            # answered with kube-openapi's content type (Go's mime parser rejects the '@')
            if self._openapi_v2_pb is None:  # the same for the life of the process
                self._openapi_v2_pb = openapi_pb.encode(
                    openapi.v2_document(self._by_gv, VERSION["gitVersion"]))
            return Response(200, self._openapi_v2_pb,
                            content_type=openapi_pb.MEDIA_TYPE.replace("@", "."))
        if path.startswith("/openapi"):
            raise ApiError(Reason.NOT_FOUND, f"the server could not find the requested "
                                             f"resource ({path})")
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 2:
            gv, rest = parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 3:
            gv, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            raise ApiError.not_found("path", req.path)
        if gv in reviews.GROUP_VERSIONS:
            return await self._review(req, gv, rest)
        kinds = self._by_gv.get(gv)
        if kinds is None:
            raise ApiError(Reason.NOT_FOUND, f"the server could not find the requested "
                                             f"resource (group version {gv})")
        if not rest:
            return Response(200, _resource_list(gv, kinds))
        by_resource = {k.resource: k for k in kinds}
        namespace: str | None = None
        if (len(rest) >= 3 and rest[0] == "namespaces" and rest[2] in by_resource
                and by_resource[rest[2]].namespaced):
            namespace, rest = rest[1], rest[2:]
        elif len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status",
                                                                             "finalize"):
            # a namespaced resource this group does not serve (v1 resourcequotas), not a
            # subresource of the namespace
            raise ApiError(Reason.NOT_FOUND, f"the server could not find the requested "
                                             f"resource ({rest[2]} in {gv})")
        info = by_resource.get(rest[0])
        if info is None:
            raise ApiError(Reason.NOT_FOUND, f"the server could not find the requested "
                                             f"resource ({rest[0]} in {gv})")
        if len(rest) > 3:  # no served path goes deeper than <resource>/<name>/<sub>
            raise ApiError(Reason.NOT_FOUND, "the server could not find the requested "
                                             "resource")
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if info.namespaced and namespace is None:
            # Kubernetes serves a namespaced resource without a namespace only as the
            # all-namespaces list and watch: no object is addressed there (SPEC AU5).
            if name:
                raise ApiError(Reason.NOT_FOUND, "the server could not find the requested "
                                                 "resource")
            if req.method not in ("GET", "HEAD"):
                raise ApiError(Reason.METHOD_NOT_ALLOWED, "the server does not allow this "
                                                          "method on the requested resource")
        if self.guard is not None:  # 403 before the registry (SPEC AU3)
            await self.guard.http_resource(method=req.method, query=req.query,
                                           group=info.group, resource=info.resource,
                                           namespace=namespace, name=name, subresource=sub)
        return await self._resource(req, info, namespace, name, sub)

    def _authorize_metrics(self, req: Request) -> metricsapi.Authorize | None:
        guard = self.guard
        if guard is None:
            return None

        async def authorize(resource: str, namespace: str | None, name: str) -> None:
            await guard.http_resource(method=req.method, query=req.query,
                                      group=metricsapi.GROUP, resource=resource,
                                      namespace=namespace, name=name, subresource="")
        return authorize

    async def _resource(self, req: Request, info: KindInfo, namespace: str | None, name: str,
                        sub: str) -> Response:
        r, q = versions.view(self.registry, info), req.query
        method = req.method
        if not name:
            if method == "GET":
                if query_bool(q, "watch"):
                    return self._watch(req, info, namespace)
            if method == "DELETE" and info.kind != "Namespace":  # as in Kubernetes
                options = _delete_options(req)
                grace = options.get("gracePeriodSeconds", q.get("gracePeriodSeconds"))
                deleted = await collection.delete_collection(
                    r, info.resource, namespace,
                    label_selector=q.get("labelSelector", ""),
                    field_selector=q.get("fieldSelector", ""),
                    grace_period_seconds=None if grace in (None, "")
                    else _int_param("gracePeriodSeconds", grace),
                    dry_run=_dry_run(q, options))
                return Response(200, deleted)
            if method == "GET":
                _resource_version(q)
                listed = await r.list(info.resource, namespace,
                                      label_selector=q.get("labelSelector", ""),
                                      field_selector=q.get("fieldSelector", ""),
                                      **list_options(q))
                return Response(200, self._maybe_table(req, info, listed["items"], listed))
            if method == "POST":
                body = field_managers.record_update(info.kind, None,
                                                    _body(req, kind=info.kind),
                                                    manager=_manager(req))
                result = await r.create(info.resource, namespace, body,
                                        field_validation=q.get("fieldValidation", "Warn"),
                                        dry_run=_dry_run(q))
                return Response(201, result.object, headers=_warnings(result.warnings))
            raise ApiError.method_not_supported(info.resource, _VERB_OF.get(method, method),
                                                group=info.group)
        if sub == "log" and info.kind == "Pod" and method == "GET":
            return await self._log(namespace or "default", name, q)
        if sub in ("binding", "eviction") and info.kind == "Pod" and method == "POST":
            if sub == "binding":
                await r.bind(namespace, name, decoding.binding(_body(req, kind="Binding")))
                return Response(201, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                      "status": "Success", "code": 201})
            evicted = await r.evict(namespace, name, _body(req))
            return Response(201, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                  "status": "Success", "details": {"name": name},
                                  "code": 201}
                            if evicted["deleted"] else evicted["object"])
        if sub == "token" and info.kind == "ServiceAccount" and method == "POST":
            return Response(201, await create_token(self.registry, self.tokens,
                                                    namespace or "default", name,
                                                    decoding.token_request(_body(
                                                        req, kind="TokenRequest"))))
        if sub == "scale" and "scale" in _SUBRESOURCES.get(info.kind, ()):
            return await self._scale(req, info, namespace or "default", name)
        if not object_subresource(info.kind, sub):
            raise ApiError(Reason.NOT_FOUND, f"{info.resource}/{sub} is not served")
        if method == "GET":
            _resource_version(q)
            obj = await r.get(info.resource, namespace, name)
            return Response(200, self._maybe_table(req, info, [obj], obj))
        if method == "PUT":
            body = _body(req, kind=info.kind)
            if sub == "":
                old = await r.get(info.resource, namespace, name)
                body = field_managers.record_update(info.kind, old, body,
                                                    manager=_manager(req))
            result = await r.update(info.resource, namespace, body, subresource=sub,
                                    field_validation=q.get("fieldValidation", "Warn"),
                                    dry_run=_dry_run(q),
                                    manager=_manager(req) if sub == "status" else None,
                                    name=name)  # the URL's: another in the body is 400
            return Response(200, result.object, headers=_warnings(result.warnings))
        if method == "PATCH":
            return await self._patch(req, r, info, namespace, name, sub)
        if method == "DELETE":
            options = _delete_options(req)
            grace = options.get("gracePeriodSeconds", q.get("gracePeriodSeconds"))
            deleted = await r.delete(info.resource, namespace, name,
                                     grace_period_seconds=None if grace in (None, "")
                                     else _int_param("gracePeriodSeconds", grace),
                                     preconditions=options.get("preconditions"),
                                     dry_run=_dry_run(q, options),
                                     propagation_policy=options.get(
                                         "propagationPolicy", q.get("propagationPolicy")),
                                     orphan_dependents=_orphan_dependents(options, q))
            return Response(200, deleted["object"])
        raise ApiError.method_not_supported(info.resource, _VERB_OF.get(method, method),
                                            group=info.group)

    async def _patch(self, req: Request, r: Registry | versions.VersionView, info: KindInfo,
                     namespace: str | None, name: str, sub: str) -> Response:
        kind = req.header("content-type").split(";")[0].strip()
        if kind not in patches.PATCH_TYPES:
            raise ApiError(Reason.UNSUPPORTED_MEDIA_TYPE, f"the body of the request was in "
                           f"an unknown format - accepted media types include: "
                           f"{', '.join(patches.PATCH_TYPES)}")
        q = req.query
        strict = q.get("fieldValidation") == "Strict"
        dry_run = _dry_run(q)
        if q.get("force") and kind != patches.APPLY_PATCH:
            raise ApiError.bad_request(f"force: Invalid value: {q['force']}: may not be "
                                       "specified for non-apply patch")
        apply_body = _body(req) if kind == patches.APPLY_PATCH else None
        patch = None if kind in (patches.JSON_PATCH, patches.APPLY_PATCH) else _body(req)
        for _ in range(8):
            try:
                current: Obj | None = await r.get(info.resource, namespace, name)
            except ApiError as err:
                if err.reason != Reason.NOT_FOUND or apply_body is None:
                    raise
                current = None
            if apply_body is not None:
                patched = field_managers.server_side_apply(
                    info.kind, current, apply_body, manager=q.get("fieldManager", ""),
                    force=query_bool(q, "force"))
                if current is None:  # apply creates what does not exist yet
                    result = await r.create(
                        info.resource, namespace, patched,
                        field_validation=q.get("fieldValidation", "Strict"), dry_run=dry_run,
                        name=name)
                    return Response(201, result.object, headers=_warnings(result.warnings))
            else:
                assert current is not None
                if kind == patches.JSON_PATCH:
                    patched = patches.apply_json_patch(current, req.body)
                elif kind == patches.MERGE_PATCH:
                    patched = patches.merge_patch(current, patch)
                else:
                    assert patch is not None
                    patched = patches.strategic_merge_patch(info.kind, current, patch)
                if sub == "":
                    patched = field_managers.record_update(info.kind, current, patched,
                                                           manager=_manager(req))
            if strict:
                _refuse_unknown_patched_fields(patched)
            assert current is not None
            requested_rv = (patched.get("metadata") or {}).get("resourceVersion")
            pinned = requested_rv and requested_rv != current["metadata"]["resourceVersion"]
            patched.setdefault("metadata", {})["resourceVersion"] = (
                requested_rv or current["metadata"]["resourceVersion"])
            try:
                result = await r.update(
                    info.resource, namespace, patched, subresource=sub,
                    field_validation=q.get("fieldValidation", "Warn"), dry_run=dry_run,
                    manager=_manager(req) if sub == "status" and apply_body is None
                    else None, name=name)
            except ApiError as err:
                if err.reason == Reason.CONFLICT and not pinned and not (
                        patch or {}).get("metadata", {}).get("resourceVersion"):
                    continue
                raise
            return Response(200, result.object, headers=_warnings(result.warnings))
        raise ApiError(Reason.CONFLICT, "too many concurrent writers; retry the patch")

    async def _review(self, req: Request, gv: str, rest: list[str]) -> Response:
        if not rest:
            return Response(200, reviews.resource_list(gv))
        resource, namespace = reviews.route(gv, rest, method=req.method)
        if self.guard is not None:  # `create` on the review resource, by RBAC as any other
            await self.guard.http_resource(method=req.method, query=req.query,
                                           group=gv.partition("/")[0], resource=resource,
                                           namespace=namespace, name="", subresource="")
        tokens = None if self.guard is None else reviews.TokenReviewer(
            authenticator=self.guard.authenticator, service_accounts=self.tokens,
            get=reviews.registry_getter(self.registry))
        return Response(201, await reviews.review(
            gv, resource, _body(req), authorizer=self.authorizer,
            user=current_user.get() or reviews.ANONYMOUS_ADMIN, namespace=namespace,
            tokens=tokens))

    async def _scale(self, req: Request, info: KindInfo, namespace: str,
                     name: str) -> Response:
        """The `scale` subresource (autoscaling/v1 Scale): `spec.replicas` of a workload,
        read and written without touching the rest of it (`kubectl scale`)."""
        current = await self.registry.get(info.resource, namespace, name)
        if req.method == "GET":
            return Response(200, _scale_of(current))
        if req.method not in ("PUT", "PATCH"):
            raise ApiError(Reason.METHOD_NOT_ALLOWED, f"{req.method} is not supported on "
                                                      f"{info.resource}/scale")
        dry_run = _dry_run(req.query)
        body = _body(req)
        for _ in range(8):
            scale = _scale_of(current)
            if req.method == "PUT":
                wanted = body
            else:
                if not req.header("content-type").startswith(("application/merge-patch",
                                                              "application/strategic")):
                    raise ApiError.bad_request("patch the scale subresource with "
                                               "--type=merge or --type=strategic")
                wanted = patches.merge_patch(scale, body)
            replicas = (wanted.get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or isinstance(replicas, bool):
                raise ApiError.invalid("Scale", name, [ApiFieldError(
                    "spec.replicas", "Invalid value", "must be an integer", replicas)],
                    group="autoscaling")
            if replicas < 0:
                raise ApiError.invalid("Scale", name, [ApiFieldError(
                    "spec.replicas", "Invalid value", "must be greater than or equal to 0",
                    replicas)], group="autoscaling")
            requested_rv = (wanted.get("metadata") or {}).get("resourceVersion")
            updated = copy.deepcopy(current)
            updated.setdefault("spec", {})["replicas"] = replicas
            updated["metadata"]["resourceVersion"] = (requested_rv or
                                                      current["metadata"]["resourceVersion"])
            try:
                result = await self.registry.update(info.resource, namespace, updated,
                                                    dry_run=dry_run)
            except ApiError as err:
                if err.reason == Reason.CONFLICT and not requested_rv:
                    current = await self.registry.get(info.resource, namespace, name)
                    continue
                raise
            return Response(200, _scale_of(result.object))
        raise ApiError(Reason.CONFLICT, "too many concurrent writers; retry the scale")

    def _maybe_table(self, req: Request, info: KindInfo, items: list[Obj], whole: Obj) -> Obj:
        if "as=Table" not in req.header("accept"):
            return whole
        include = _include_object(req.query)
        cols = tables.columns_for(info.kind, wide=True)
        # kubectl's own columns; the NODE the skiff CLI adds to pods is -o wide here
        narrow = {name for name, _ in tables.COLUMNS.get(info.kind, tables.DEFAULT_COLUMNS)}
        rows = []
        for obj in items:
            shown = versions.stored_form(info, obj)  # the columns read the stored version
            row: Obj = {"cells": [fn(shown) for _, fn in cols], "object": None}
            if include == "Object":  # kubectl --sort-by asks for it: it sorts by any field
                row["object"] = {"apiVersion": info.api_version, "kind": info.kind, **obj}
            elif include == "Metadata":
                row["object"] = {"kind": "PartialObjectMetadata",
                                 "apiVersion": "meta.k8s.io/v1",
                                 "metadata": obj.get("metadata", {})}
            rows.append(row)
        return {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": "", **{  # a page's continue token too
                    k: v for k, v in whole.get("metadata", {}).items()
                    if k in ("resourceVersion", "continue", "remainingItemCount")}},
                "columnDefinitions": [
                    {"name": name.title() if name != "NAME" else "Name", "type": "string",
                     "format": "name" if name == "NAME" else "", "description": name,
                     "priority": 0 if name in narrow else 1}
                    for name, _ in cols],
                "rows": rows}

    def _watch(self, req: Request, info: KindInfo, namespace: str | None) -> Response:
        q = req.query
        table = "as=Table" in req.header("accept")
        if table:
            _include_object(q)  # a bad one is a Status, before the stream starts
        rv = q.get("resourceVersion", "")
        if rv not in ("", "0"):  # answer a bad one with a Status, before the stream starts
            problem = revision_problem(_resource_version(q))
            if problem:
                raise ApiError.bad_request(f"resourceVersion: Invalid value: {rv}: {problem}")

        timeout = collection.timeout_seconds(q.get("timeoutSeconds"))

        selectors = {"label_selector": q.get("labelSelector", ""),
                     "field_selector": q.get("fieldSelector", "")}
        r = versions.view(self.registry, info)
        source = (collection.watch_with_initial_events(r, info.resource,
                                                       namespace, **selectors)
                  if query_bool(q, "sendInitialEvents") else
                  r.watch(info.resource, namespace, resource_version=rv,
                                      **selectors))

        async def events() -> AsyncIterator[Obj]:
            first = True
            async for ev in collection.until_timeout(source, timeout):
                if ev.type == "BOOKMARK" and not query_bool(q, "allowWatchBookmarks"):
                    continue
                obj = ev.object
                if table and ev.type != "BOOKMARK":
                    obj = self._maybe_table(req, info, [obj], obj)
                    if not first:
                        obj["columnDefinitions"] = []
                    first = False
                yield {"type": ev.type, "object": obj}

        return Response(200, stream=events())

    async def _log(self, namespace: str, name: str, q: dict[str, str]) -> Response:
        pod = await self.registry.get("pods", namespace, name)
        node_name = pod.get("spec", {}).get("nodeName")
        if not node_name:
            raise ApiError.bad_request(f'pod "{name}" is not scheduled to a node yet')
        target = kubelet_logs.kubelet_endpoint(
            await self.registry.get("nodes", None, node_name))
        tail = q.get("tailLines")
        tail_lines = _int_param("tailLines", tail) if tail else None
        container = q.get("container") or None
        limit = q.get("limitBytes")
        limit_bytes = _int_param("limitBytes", limit) if limit else None
        if limit_bytes is not None and limit_bytes < 1:
            raise ApiError.invalid("PodLogOptions", name, [ApiFieldError(
                "limitBytes", "Invalid value", "must be greater than 0", limit_bytes)])
        if query_bool(q, "follow"):
            pieces = kubelet_logs.follow_logs(target, namespace, name, container=container,
                                              tail_lines=tail_lines, credentials=self.kubelet)
            # the first piece (or the kubelet's error) before the 200 goes out
            try:
                first = await anext(pieces)
            except StopAsyncIteration:
                first = ""

            async def stream() -> AsyncIterator[str | bytes]:
                left = limit_bytes  # --limit-bytes: the stream ends after that many

                def take(piece: str) -> str | bytes:
                    nonlocal left
                    if left is None:
                        return piece
                    data = piece.encode()[:left]
                    left -= len(data)
                    return data

                try:
                    if first:
                        yield take(first)
                    async for piece in pieces:
                        if left is not None and left <= 0:
                            break
                        yield take(piece)
                finally:
                    close = getattr(pieces, "aclose", None)
                    if close is not None:
                        await close()

            return Response(200, stream=stream(), content_type="text/plain")
        text = await kubelet_logs.fetch_logs(target, namespace, name, container=container,
                                             tail_lines=tail_lines,
                                             previous=query_bool(q, "previous"),
                                             credentials=self.kubelet)
        if limit_bytes is not None:
            return Response(200, str(text).encode()[:limit_bytes], content_type="text/plain")
        return Response(200, str(text), content_type="text/plain")


def _scale_of(obj: Obj) -> Obj:
    meta = obj.get("metadata", {})
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    selector = workload_selector(obj)
    try:
        text = str(LabelSelector.from_dict(selector)) if selector else ""
    except ApiError:
        text = ""
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                              "creationTimestamp") if k in meta},
            "spec": {"replicas": spec.get("replicas", 1)},
            "status": {"replicas": status.get("replicas", 0), "selector": text}}


def _orphan_dependents(options: Obj, q: dict[str, str]) -> bool | None:
    value = options.get("orphanDependents", q.get("orphanDependents"))
    return None if value in (None, "") else value in (True, "true", "1")


def _int_param(name: str, value: Any) -> int:
    """An integer query parameter (or DeleteOptions field), 400 as kube-apiserver words a
    value Go's strconv cannot parse."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise decoding.wrong_type("DeleteOptions", f"DeleteOptions.{name}", value, "int64")
    return value if isinstance(value, int) else decoding.go_int(name, value)


def _resource_version(q: dict[str, str]) -> int:
    """`?resourceVersion=` of a get, list or watch: etcd revisions are unsigned integers;
    anything else is a 400 naming the value (Go's strconv.ParseUint words)."""
    rv = q.get("resourceVersion", "")
    if rv in ("", "0"):
        return 0
    if not rv.isascii() or not rv.isdigit():
        raise ApiError.bad_request(f'resourceVersion: Invalid value: "{rv}": '
                                   f'strconv.ParseUint: parsing "{rv}": invalid syntax')
    if int(rv) >= 1 << 64:
        raise ApiError.bad_request(f'resourceVersion: Invalid value: "{rv}": '
                                   f'strconv.ParseUint: parsing "{rv}": value out of range')
    return int(rv)


def _where(err: BaseException) -> str:
    """file:line where an exception was raised (for a one-line log entry)."""
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb is not None else ""


def _decode_ahead(req: Request) -> None:
    """Decode a large JSON/YAML body (run in a thread): `_body` then reads the result."""
    kind = req.header("content-type")
    if kind.split(";")[0].strip() in ("application/vnd.kubernetes.protobuf",
                                      patches.JSON_PATCH):
        return
    try:
        req.decoded = (decoding.decode_body(req.body, kind), None)
    except ApiError as err:
        req.decoded = (None, err)


def _body(req: Request, *, kind: str = "") -> Obj:
    """The request body as an object; `kind` (what it should be) words decode errors as
    kube-apiserver does."""
    if not req.body:
        raise ApiError.bad_request("request body: required (a Kubernetes object)")
    content_type = req.header("content-type")
    if content_type.split(";")[0].strip() == "application/vnd.kubernetes.protobuf":
        return protobuf.decode(req.body)
    if req.decoded is not None:
        body, error = req.decoded
        if error is not None and kind and error.message.startswith(
                decoding.DECODE_PROBLEMS):  # decoded before the kind was known
            raise decoding.unrecognized(kind, error.message, req.body)
        if error is not None:
            raise error
    else:
        body = decoding.decode_body(req.body, content_type, kind=kind)
    if not isinstance(body, dict):
        raise ApiError.bad_request("request body must be a JSON object")
    return decoding.object_meta(body, kind) if kind else body


def _delete_options(req: Request) -> Obj:
    """The DeleteOptions body of a DELETE (none: {}), each field of its JSON type."""
    return decoding.delete_options(_body(req, kind="DeleteOptions")) if req.body else {}


def _refuse_unknown_patched_fields(patched: Obj) -> None:
    """fieldValidation=Strict on PATCH: kube-apiserver answers an Invalid Status about the
    field `patch`, whose value is the patched object (kubectl prints it that way)."""
    unknown = prune_unknown_fields(copy.deepcopy(patched))
    if unknown:
        listed = ", ".join(f'unknown field "{p}"' for p in unknown)
        raise ApiError.invalid("", "", [ApiFieldError(
            "patch", "Invalid value", f"strict decoding error: {listed}",
            json.dumps(patched, separators=(",", ":")))])


def _dry_run(q: dict[str, str], options: Obj | None = None) -> bool:
    """`dryRun=All` (query, or DeleteOptions.dryRun): run everything, store nothing."""
    values = (options or {}).get("dryRun") or ([q["dryRun"]] if q.get("dryRun") else [])
    for value in values:
        if value != "All":
            raise ApiError.bad_request(f'dryRun: Unsupported value: "{value}": supported '
                                       'values: "All"')
    return bool(values)


def _manager(req: Request) -> str:
    """The field manager of a write: `fieldManager`, or the user agent's product name."""
    return req.query.get("fieldManager") or field_managers.default_manager(
        req.header("user-agent"))


def _warnings(warnings: list[str]) -> dict[str, str]:
    """RFC 7234 Warning header: `299 - "text"`, inner quotes escaped; kubectl prints them."""
    def quoted(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return {"Warning": ", ".join(f"299 - {quoted(w)}" for w in warnings)} if warnings else {}
