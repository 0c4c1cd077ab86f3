"""The Kubernetes REST API over HTTP, so the real `kubectl` works against Skiff.

Discovery (`/api`, `/apis`, `/api/v1`, `/apis/<group>/<version>`), `/version`, list / get /
watch / create / update / status / patch / delete on every kind, `pods/binding`,
`pods/eviction` and `pods/log`, and server-side Table output (`Accept: ...;as=Table`) with
the same columns `skiff get` prints. Everything goes through the same `Registry` as the gRPC
front, so both see one set of rules.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable

from skiff.api import ApiError, Reason
from skiff.api.kinds import KindInfo, kinds_generation
from skiff.api.types import Obj
from skiff.api.validation import revision_problem
from skiff.apiserver.aggregator import Aggregator
from skiff.apiserver.auth import reviews
from skiff.apiserver.auth.context import current_user
from skiff.apiserver.auth.satoken import TokenAuthority
from skiff.apiserver.endpoints import apimetrics, healthz, metricsapi
from skiff.apiserver.endpoints.discovery import (
    SUBRESOURCES,
    VERSION,
    api_groups,
    resource_list,
    served_groups,
)
from skiff.apiserver.endpoints.guard import RequestGuard
from skiff.apiserver.endpoints.handlers import collection, decoding, versions
from skiff.apiserver.endpoints.handlers import patch as patches
from skiff.apiserver.endpoints.handlers.fieldmanager import apply as field_managers
from skiff.apiserver.endpoints.handlers.logs import pod_log
from skiff.apiserver.endpoints.handlers.queryparams import list_options, query_bool
from skiff.apiserver.endpoints.handlers.request import (
    decode_ahead,
    delete_options,
    dry_run_of,
    include_object,
    int_param,
    manager_of,
    orphan_dependents,
    raised_at,
    read_body,
    refuse_unknown_patched_fields,
    resource_version,
    warning_header,
)
from skiff.apiserver.endpoints.handlers.scale import scale
from skiff.apiserver.endpoints.handlers.table import maybe_table
from skiff.apiserver.endpoints.http import Request, Response
from skiff.apiserver.endpoints.openapi import protobuf as openapi_pb
from skiff.apiserver.endpoints.openapi import schemas as openapi
from skiff.apiserver.endpoints.routes import Route, api_path, find
from skiff.apiserver.registry.store import Registry
from skiff.apiserver.registry.tokenrequest import create_token
from skiff.auth import Authorizer
from skiff.client.credentials import Credentials

log = logging.getLogger(__name__)

_VERB_OF = {"PUT": "update", "POST": "create", "PATCH": "patch", "DELETE": "delete",
            "GET": "get"}


# A resource request's handler: (request, kind, namespace, name).
ResourceHandler = Callable[[Request, KindInfo, str | None, str], Awaitable[Response]]


def _cached(q: dict[str, str]) -> bool:
    """Whether a get or list allows a cached answer (resourceVersion=0 or NotOlderThan):
    what a Perturbation's stale view answers (skiff.apiserver.perturbation)."""
    return q.get("resourceVersion") == "0" or q.get("resourceVersionMatch") == "NotOlderThan"


def _status(err: ApiError) -> Response:
    return Response(err.code, err.to_status())


class KubeApi:
    """Routes one HTTP request to the registry, the way kube-apiserver would."""

    def __init__(self, registry: Registry, *, guard: RequestGuard | None = None,
                 tokens: TokenAuthority | None = None,
                 kubelet: Credentials | None = None,
                 health: healthz.HealthChecks | None = None,
                 aggregator: Aggregator | None = None) -> None:
        self.registry = registry
        self.aggregator = aggregator  # APIServices' group/versions (SPEC EX8)
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
        self._kinds_seen = -1  # skiff.api.kinds' generation the tables below were made at
        self._served: dict[str, list[KindInfo]] = {}
        self._groups: list[Obj] = []
        self._routes = self._route_table()
        self._subresources = self._subresource_table()

    def _refresh(self) -> None:
        """Rebuild what depends on the served kinds when a CRD came or went (SPEC EX1)."""
        generation = kinds_generation()
        if generation != self._kinds_seen:
            self._served = served_groups()
            self._groups = api_groups(self._served)
            self._openapi_v3, self._openapi_v2_pb = {}, None
            self._kinds_seen = generation

    @property
    def _by_gv(self) -> dict[str, list[KindInfo]]:
        """Every served kind by group/version."""
        self._refresh()
        return self._served

    @property
    def _api_groups(self) -> list[Obj]:
        """`/apis`, `/apis/<group>`."""
        self._refresh()
        if self.aggregator is not None:
            return self.aggregator.api_groups(self._groups)
        return self._groups

    async def handle(self, req: Request) -> Response:
        return await self.stats.measure(req, self._handle)

    async def _handle(self, req: Request) -> Response:
        try:
            if len(req.body) > decoding.LARGE_BODY:  # decoding must not stall the loop
                await asyncio.to_thread(decode_ahead, req)
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
                "at": raised_at(err)})
            return _status(ApiError.bad_request(
                f"{req.method} {req.path}: the request has a field of the wrong type or out "
                "of range; check the object against `kubectl explain`"))
        except Exception:
            log.exception("internal error", extra={"method": req.method, "path": req.path})
            return _status(ApiError(Reason.INTERNAL_ERROR, f"{req.method} {req.path}: an "
                                    "internal error occurred; the apiserver log has the "
                                    "details"))

    def _route_table(self) -> list[Route]:
        """The non-resource paths, in the order they are tried."""
        health = [route for name in healthz.ENDPOINTS
                  for route in (Route(f"/{name}", self._health),
                                Route(f"/{name}/", self._health, prefix=True))]
        return [
            *health,
            Route("/version", self._version),
            Route("/metrics", self._metrics, methods=frozenset({"GET"})),
            Route("/api", self._api_versions),
            Route("/apis", self._api_group_list),
            Route("/apis/", self._api_group, prefix=True, segments=2),
            Route(metricsapi.PREFIX, self._metrics_api, prefix=True),
            Route("/openapi/v3", self._openapi_v3_paths),
            Route("/openapi/v3/", self._openapi_v3_document, prefix=True),
            Route("/openapi/v2", self._openapi_v2_document),
            Route("/openapi", self._openapi_not_found, prefix=True),
        ]

    async def _route(self, req: Request) -> Response:
        path = req.path.rstrip("/") or "/"
        if self.aggregator is not None and (remote := self.aggregator.target(path)):
            return await self.aggregator.proxy(req, remote, guard=self.guard)
        handler = find(self._routes, path, req.method)
        if handler is not None:
            return await handler(req, path)
        return await self._api(req, *api_path(req.path))

    async def _health(self, req: Request, path: str) -> Response:
        endpoint, _, check = path.strip("/").partition("/")
        return self.health.answer(endpoint, check, req.query)

    async def _version(self, req: Request, path: str) -> Response:
        return Response(200, VERSION)

    async def _metrics(self, req: Request, path: str) -> Response:
        if self.guard is not None:
            await self.guard.http_non_resource(path=path, method=req.method)
        return self.stats.exposition()

    async def _api_versions(self, req: Request, path: str) -> Response:
        return Response(200, {"kind": "APIVersions", "versions": ["v1"],
                              "serverAddressByClientCIDRs": [
                                  {"clientCIDR": "0.0.0.0/0",
                                   "serverAddress": req.header("host")}]})

    async def _api_group_list(self, req: Request, path: str) -> Response:
        return Response(200, {"kind": "APIGroupList", "apiVersion": "v1",
                              "groups": self._api_groups})

    async def _api_group(self, req: Request, path: str) -> Response:
        """`/apis/<group>`: APIGroup."""
        group = path.removeprefix("/apis/")
        for entry in self._api_groups:
            if entry["name"] == group:
                return Response(200, {"kind": "APIGroup", "apiVersion": "v1", **entry})
        raise ApiError(Reason.NOT_FOUND, f"the server could not find the requested "
                                         f"resource (group {group})")

    async def _metrics_api(self, req: Request, path: str) -> Response:
        return await self.metrics.handle(req, path, authorize=self._authorize_metrics(req))

    async def _openapi_v3_paths(self, req: Request, path: str) -> Response:
        return Response(200, {"paths": {
            ("api/v1" if gv == "v1" else f"apis/{gv}"): {
                "serverRelativeURL": f"/openapi/v3/{'api/v1' if gv == 'v1' else 'apis/' + gv}"}
            for gv in self._by_gv} | (self.aggregator.openapi_v3_paths()
                                      if self.aggregator is not None else {})})

    async def _openapi_v3_document(self, req: Request, path: str) -> Response:
        gv = path.removeprefix("/openapi/v3/").removeprefix("api/").removeprefix("apis/")
        if gv not in self._by_gv:
            raise ApiError.not_found("openapi", gv)
        if gv not in self._openapi_v3:  # the same for the life of the process
            self._openapi_v3[gv] = openapi.v3_document(gv, self._by_gv[gv],
                                                       VERSION["gitVersion"])
        return Response(200, self._openapi_v3[gv])

    async def _openapi_v2_document(self, req: Request, path: str) -> Response:
        if "protobuf" not in req.header("accept") and "json" in req.header("accept"):
            return Response(200, openapi.v2_document(self._by_gv, VERSION["gitVersion"]))
        # gnostic's Document (kubectl explain --output=plaintext-openapiv2, apply);
        # answered with kube-openapi's content type (Go's mime parser rejects the '@')
        if self._openapi_v2_pb is None:  # the same for the life of the process
            self._openapi_v2_pb = openapi_pb.encode(
                openapi.v2_document(self._by_gv, VERSION["gitVersion"]))
        return Response(200, self._openapi_v2_pb,
                        content_type=openapi_pb.MEDIA_TYPE.replace("@", "."))

    async def _openapi_not_found(self, req: Request, path: str) -> Response:
        raise ApiError(Reason.NOT_FOUND, f"the server could not find the requested "
                                         f"resource ({path})")

    async def _api(self, req: Request, gv: str, rest: list[str]) -> Response:
        """A path under `/api/v1` or `/apis/<group>/<version>`: discovery, a review, or a
        resource request (authorized, then handed to `_resource`)."""
        if gv in reviews.GROUP_VERSIONS:
            return await self._review(req, gv, rest)
        kinds = self._by_gv.get(gv)
        if kinds is None:
            raise ApiError(Reason.NOT_FOUND, f"the server could not find the requested "
                                             f"resource (group version {gv})")
        if not rest:
            return Response(200, resource_list(gv, kinds))
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

    def _subresource_table(self) -> dict[tuple[str, str], tuple[str, ResourceHandler]]:
        """The subresources answered by their own handler (not through the object's
        verbs), by (kind, subresource): the method they take ("" for any) and handler."""
        table: dict[tuple[str, str], tuple[str, ResourceHandler]] = {
            ("Pod", "log"): ("GET", self._pod_log),
            ("Pod", "binding"): ("POST", self._binding),
            ("Pod", "eviction"): ("POST", self._eviction),
            ("ServiceAccount", "token"): ("POST", self._token),
            ("Perturbation", "record"): ("GET", self._perturbation_record),  # issue 35
        }
        for kind, subresources in SUBRESOURCES.items():
            if "scale" in subresources:
                table[(kind, "scale")] = ("", self._scale)
        return table

    async def _resource(self, req: Request, info: KindInfo, namespace: str | None, name: str,
                        sub: str) -> Response:
        if not name:
            return await self._collection(req, info, namespace)
        special = (("", self._scale) if info.custom and sub == "scale"
                   and self.registry.strategies.of(info).scale_paths() is not None
                   else self._subresources.get((info.kind, sub)))
        if special is not None and special[0] in ("", req.method):
            return await special[1](req, info, namespace, name)
        if not self.registry.strategies.of(info).serves(sub):
            raise ApiError(Reason.NOT_FOUND, f"{info.resource}/{sub} is not served")
        r, q, method = versions.view(self.registry, info), req.query, req.method
        if method == "GET":
            resource_version(q)
            obj = await r.get(info.ref, namespace, name, allow_cached=_cached(q))
            return Response(200, self._table(req, info, [obj], obj))
        if method == "PUT":
            body = read_body(req, kind=info.kind)
            if sub == "":
                old = await r.get(info.ref, namespace, name)
                body = field_managers.record_update(info.kind, old, body,
                                                    manager=manager_of(req))
            result = await r.update(info.ref, namespace, body, subresource=sub,
                                    field_validation=q.get("fieldValidation", "Warn"),
                                    dry_run=dry_run_of(q),
                                    manager=manager_of(req) if sub == "status" else None,
                                    name=name)  # the URL's: another in the body is 400
            return Response(200, result.object, headers=warning_header(result.warnings))
        if method == "PATCH":
            return await self._patch(req, r, info, namespace, name, sub)
        if method == "DELETE":
            options = delete_options(req)
            grace = options.get("gracePeriodSeconds", q.get("gracePeriodSeconds"))
            deleted = await r.delete(info.ref, namespace, name,
                                     grace_period_seconds=None if grace in (None, "")
                                     else int_param("gracePeriodSeconds", grace),
                                     preconditions=options.get("preconditions"),
                                     dry_run=dry_run_of(q, options),
                                     propagation_policy=options.get(
                                         "propagationPolicy", q.get("propagationPolicy")),
                                     orphan_dependents=orphan_dependents(options, q))
            return Response(200, deleted["object"])
        raise ApiError.method_not_supported(info.resource, _VERB_OF.get(method, method),
                                            group=info.group)

    async def _collection(self, req: Request, info: KindInfo,
                          namespace: str | None) -> Response:
        """list, watch, create and deletecollection."""
        r, q, method = versions.view(self.registry, info), req.query, req.method
        if method == "GET" and query_bool(q, "watch"):
            return self._watch(req, info, namespace)
        if method == "DELETE" and info.kind != "Namespace":  # as in Kubernetes
            options = delete_options(req)
            grace = options.get("gracePeriodSeconds", q.get("gracePeriodSeconds"))
            deleted = await collection.delete_collection(
                r, info.ref, namespace,
                label_selector=q.get("labelSelector", ""),
                field_selector=q.get("fieldSelector", ""),
                grace_period_seconds=None if grace in (None, "")
                else int_param("gracePeriodSeconds", grace),
                dry_run=dry_run_of(q, options))
            return Response(200, deleted)
        if method == "GET":
            resource_version(q)
            listed = await r.list(info.ref, namespace,
                                  label_selector=q.get("labelSelector", ""),
                                  field_selector=q.get("fieldSelector", ""),
                                  allow_cached=_cached(q), **list_options(q))
            return Response(200, self._table(req, info, listed["items"], listed))
        if method == "POST":
            body = field_managers.record_update(info.kind, None,
                                                read_body(req, kind=info.kind),
                                                manager=manager_of(req))
            result = await r.create(info.ref, namespace, body,
                                    field_validation=q.get("fieldValidation", "Warn"),
                                    dry_run=dry_run_of(q))
            return Response(201, result.object, headers=warning_header(result.warnings))
        raise ApiError.method_not_supported(info.resource, _VERB_OF.get(method, method),
                                            group=info.group)

    async def _pod_log(self, req: Request, info: KindInfo, namespace: str | None,
                       name: str) -> Response:
        return await pod_log(self.registry, namespace or "default", name, req.query,
                             kubelet=self.kubelet)

    async def _binding(self, req: Request, info: KindInfo, namespace: str | None,
                       name: str) -> Response:
        await self.registry.bind(namespace, name,
                                 decoding.binding(read_body(req, kind="Binding")))
        return Response(201, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                              "status": "Success", "code": 201})

    async def _eviction(self, req: Request, info: KindInfo, namespace: str | None,
                        name: str) -> Response:
        evicted = await self.registry.evict(namespace, name, read_body(req))
        return Response(201, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                              "status": "Success", "details": {"name": name},
                              "code": 201}
                        if evicted["deleted"] else evicted["object"])

    async def _perturbation_record(self, req: Request, info: KindInfo,
                                   namespace: str | None, name: str) -> Response:
        since = int_param("sinceSeq", req.query.get("sinceSeq") or "0")
        return Response(200, self.registry.perturbations.record(
            await self.registry.get(info.ref, None, name), since_seq=since))

    async def _token(self, req: Request, info: KindInfo, namespace: str | None,
                     name: str) -> Response:
        return Response(201, await create_token(
            self.registry, self.tokens, namespace or "default", name,
            read_body(req, kind="TokenRequest")))

    async def _patch(self, req: Request, r: Registry | versions.VersionView, info: KindInfo,
                     namespace: str | None, name: str, sub: str) -> Response:
        kind = req.header("content-type").split(";")[0].strip()
        if kind not in patches.PATCH_TYPES:
            raise ApiError(Reason.UNSUPPORTED_MEDIA_TYPE, f"the body of the request was in "
                           f"an unknown format - accepted media types include: "
                           f"{', '.join(patches.PATCH_TYPES)}")
        if info.custom and kind == patches.STRATEGIC_MERGE_PATCH:
            # custom resources have no patch strategy (SPEC EX2), as kube-apiserver answers
            accepted = [t for t in patches.PATCH_TYPES if t != patches.STRATEGIC_MERGE_PATCH]
            raise ApiError(Reason.UNSUPPORTED_MEDIA_TYPE, f"the body of the request was in "
                           f"an unknown format - accepted media types include: "
                           f"{', '.join(accepted)}")
        q = req.query
        strict = q.get("fieldValidation") == "Strict"
        dry_run = dry_run_of(q)
        if q.get("force") and kind != patches.APPLY_PATCH:
            raise ApiError.bad_request(f"force: Invalid value: {q['force']}: may not be "
                                       "specified for non-apply patch")
        apply_body = read_body(req) if kind == patches.APPLY_PATCH else None
        patch = None if kind in (patches.JSON_PATCH, patches.APPLY_PATCH) else read_body(req)
        for _ in range(8):
            try:
                current: Obj | None = await r.get(info.ref, namespace, name)
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
                        info.ref, namespace, patched,
                        field_validation=q.get("fieldValidation", "Strict"), dry_run=dry_run,
                        name=name)
                    return Response(201, result.object, headers=warning_header(result.warnings))
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
                                                           manager=manager_of(req))
            if strict:
                refuse_unknown_patched_fields(
                    patched, self.registry.strategies.of(info).prune_unknown)
            assert current is not None
            requested_rv = (patched.get("metadata") or {}).get("resourceVersion")
            pinned = requested_rv and requested_rv != current["metadata"]["resourceVersion"]
            patched.setdefault("metadata", {})["resourceVersion"] = (
                requested_rv or current["metadata"]["resourceVersion"])
            try:
                result = await r.update(
                    info.ref, namespace, patched, subresource=sub,
                    field_validation=q.get("fieldValidation", "Warn"), dry_run=dry_run,
                    manager=manager_of(req) if sub == "status" and apply_body is None
                    else None, name=name)
            except ApiError as err:
                if err.reason == Reason.CONFLICT and not pinned and not (
                        patch or {}).get("metadata", {}).get("resourceVersion"):
                    continue
                raise
            return Response(200, result.object, headers=warning_header(result.warnings))
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
            gv, resource, read_body(req), authorizer=self.authorizer,
            user=current_user.get() or reviews.ANONYMOUS_ADMIN, namespace=namespace,
            tokens=tokens))

    async def _scale(self, req: Request, info: KindInfo, namespace: str | None,
                     name: str) -> Response:
        return await scale(self.registry, req, info, namespace, name,
                           self.registry.strategies.of(info).scale_paths()
                           if info.custom else None)

    def _table(self, req: Request, info: KindInfo, items: list[Obj], whole: Obj) -> Obj:
        """`whole`, or a Table of `items` when the client asks for one."""
        return maybe_table(req, info, self.registry.strategies.of(info), items, whole)

    def _watch(self, req: Request, info: KindInfo, namespace: str | None) -> Response:
        q = req.query
        table = "as=Table" in req.header("accept")
        if table:
            include_object(q)  # a bad one is a Status, before the stream starts
        rv = q.get("resourceVersion", "")
        if rv not in ("", "0"):  # answer a bad one with a Status, before the stream starts
            problem = revision_problem(resource_version(q))
            if problem:
                raise ApiError.bad_request(f"resourceVersion: Invalid value: {rv}: {problem}")

        timeout = collection.timeout_seconds(q.get("timeoutSeconds"))

        selectors = {"label_selector": q.get("labelSelector", ""),
                     "field_selector": q.get("fieldSelector", "")}
        r = versions.view(self.registry, info)
        source = (collection.watch_with_initial_events(r, info.ref,
                                                       namespace, **selectors)
                  if query_bool(q, "sendInitialEvents") else
                  r.watch(info.ref, namespace, resource_version=rv,
                                      **selectors))

        async def events() -> AsyncIterator[Obj]:
            first = True
            try:
                async for ev in collection.until_timeout(source, timeout):
                    if ev.type == "BOOKMARK" and not query_bool(q, "allowWatchBookmarks"):
                        continue
                    obj = ev.object
                    if table and ev.type != "BOOKMARK":
                        obj = self._table(req, info, [obj], obj)
                        if not first:
                            obj["columnDefinitions"] = []
                        first = False
                    yield {"type": ev.type, "object": obj}
            except ApiError as err:
                # the stream has begun (200 sent): a failure is its last event, a Status, as
                # kube-apiserver ends a watch (410 Gone makes an informer list again)
                yield {"type": "ERROR", "object": err.to_status()}

        return Response(200, stream=events())
