"""The Kubernetes REST API over HTTP, so the real `kubectl` works against Skiff.

Discovery (`/api`, `/apis`, `/api/v1`, `/apis/<group>/<version>`), `/version`, list / get /
watch / create / update / status / patch / delete on every kind, `pods/binding`,
`pods/eviction` and `pods/log`, and server-side Table output (`Accept: ...;as=Table`) with
the same columns `skiff get` prints. Everything goes through the same `Registry` as the gRPC
front, so both see one set of rules.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import yaml

from skiff.api import ApiError, Reason, tables
from skiff.api.errors import FieldError as ApiFieldError
from skiff.api.kinds import KINDS, KindInfo
from skiff.api.schema import prune_unknown_fields
from skiff.api.selectors import LabelSelector
from skiff.api.validation import revision_problem
from skiff.apiserver import protobuf
from skiff.apiserver.http import Request, Response
from skiff.apiserver.paging import list_options
from skiff.apiserver.registry import Registry
from skiff.client import logs as kubelet_logs

log = logging.getLogger(__name__)

Obj = dict[str, Any]

VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-skiff", "gitCommit": "skiff",
           "gitTreeState": "clean", "buildDate": "2026-11-22T00:00:00Z",
           "goVersion": "python3", "compiler": "cpython", "platform": "linux/amd64"}

_SUBRESOURCES = {"Pod": ("status", "binding", "eviction", "log"),
                 "Node": ("status",), "ReplicaSet": ("status", "scale"),
                 "StatefulSet": ("status", "scale"),
                 "PodDisruptionBudget": ("status",), "Namespace": ("status",)}
_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def _groups() -> dict[str, list[KindInfo]]:
    by_gv: dict[str, list[KindInfo]] = {}
    for info in KINDS:
        by_gv.setdefault(info.api_version, []).append(info)
    return by_gv


def _status(err: ApiError) -> Response:
    return Response(err.code, err.to_status())


def _resource_list(group_version: str, kinds: list[KindInfo]) -> Obj:
    resources: list[Obj] = []
    for info in kinds:
        resources.append({"name": info.resource, "singularName": info.kind.lower(),
                          "namespaced": info.namespaced, "kind": info.kind, "verbs": _VERBS,
                          "shortNames": list(info.short_names)})
        for sub in _SUBRESOURCES.get(info.kind, ()):
            verbs = {"status": ["get", "patch", "update"], "binding": ["create"],
                     "eviction": ["create"], "log": ["get"],
                     "scale": ["get", "patch", "update"]}[sub]
            entry: Obj = {"name": f"{info.resource}/{sub}", "singularName": "",
                          "namespaced": info.namespaced, "kind": info.kind, "verbs": verbs}
            if sub == "scale":
                entry.update(kind="Scale", group="autoscaling", version="v1")
            resources.append(entry)
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": resources}


def _pb_string(field: int, value: bytes) -> bytes:
    return bytes([field << 3 | 2, len(value)]) + value


# An OpenAPI v2 protobuf Document with only `swagger` and `info`: older kubectl (Debian's
# 1.20) downloads it for client-side validation and, finding no schema for a kind, leaves
# validation to the server.
_OPENAPI_V2_PB = _pb_string(1, b"2.0") + _pb_string(
    2, _pb_string(1, b"Skiff") + _pb_string(2, b"v1.32.0-skiff"))


def _openapi_v3(group_version: str, kinds: list[KindInfo]) -> Obj:
    """Operation stubs only: enough for kubectl to see that the server validates fields
    itself (`fieldValidation` on PATCH), so it sends `fieldValidation=Strict` instead of
    validating against schemas Skiff does not publish."""
    group, _, version = group_version.rpartition("/")
    root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    paths: Obj = {}
    for info in kinds:
        gvk = {"group": group, "version": version, "kind": info.kind}
        prefix = f"{root}/namespaces/{{namespace}}" if info.namespaced else root
        params = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}]
        paths[f"{prefix}/{info.resource}/{{name}}"] = {
            "patch": {"parameters": params, "x-kubernetes-group-version-kind": gvk,
                      "responses": {"200": {"description": "OK"}}}}
        paths[f"{prefix}/{info.resource}"] = {
            "post": {"parameters": params, "x-kubernetes-group-version-kind": gvk,
                     "responses": {"201": {"description": "Created"}}}}
    return {"openapi": "3.0.0", "info": {"title": "Skiff", "version": VERSION["gitVersion"]},
            "paths": paths, "components": {"schemas": {}}}


def merge_patch(target: Any, patch: Any, *, strategic: bool = False) -> Any:
    """RFC 7386 JSON merge patch; `strategic` also merges lists of named maps by name and
    drops kubectl's `$`-directives (a practical subset of strategic merge patch)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if strategic and key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif (strategic and isinstance(value, list) and isinstance(result.get(key), list)
              and all(isinstance(v, dict) and "name" in v for v in value)
              and all(isinstance(v, dict) and "name" in v for v in result[key])):
            current = {v["name"]: v for v in result[key]}
            merged = []
            for item in value:
                base = current.pop(item["name"], {})
                merged.append(merge_patch(base, item, strategic=True))
            order = [v["name"] for v in result[key]]
            kept = [current[n] for n in order if n in current]
            result[key] = kept + merged if not patch.get(f"$setElementOrder/{key}") else \
                merged + kept
        else:
            result[key] = merge_patch(result.get(key), value, strategic=strategic)
    return result


class KubeApi:
    """Routes one HTTP request to the registry, the way kube-apiserver would."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._by_gv = _groups()

    async def handle(self, req: Request) -> Response:
        try:
            return await self._route(req)
        except ApiError as err:
            return _status(err)
        except (ValueError, KeyError, TypeError, OverflowError):
            # A body or parameter of an unexpected shape that no validation rule named: say
            # so without Python's exception text (the log has the traceback).
            log.exception("malformed request", extra={"method": req.method, "path": req.path})
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
        if path in ("/healthz", "/readyz", "/livez"):
            return Response(200, "ok", content_type="text/plain")
        if path == "/version":
            return Response(200, VERSION)
        if path == "/api":
            return Response(200, {"kind": "APIVersions", "versions": ["v1"],
                                  "serverAddressByClientCIDRs": [
                                      {"clientCIDR": "0.0.0.0/0",
                                       "serverAddress": req.header("host")}]})
        if path == "/apis":
            return Response(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": gv.split("/")[0],
                 "versions": [{"groupVersion": gv, "version": gv.split("/")[1]}],
                 "preferredVersion": {"groupVersion": gv, "version": gv.split("/")[1]}}
                for gv in self._by_gv if "/" in gv]})
        if path == "/openapi/v3":
            return Response(200, {"paths": {
                ("api/v1" if gv == "v1" else f"apis/{gv}"): {
                    "serverRelativeURL": f"/openapi/v3/{'api/v1' if gv == 'v1' else 'apis/' + gv}"}
                for gv in self._by_gv}})
        if path.startswith("/openapi/v3/"):
            gv = path.removeprefix("/openapi/v3/").removeprefix("api/").removeprefix("apis/")
            if gv not in self._by_gv:
                raise ApiError.not_found("openapi", gv)
            return Response(200, _openapi_v3(gv, self._by_gv[gv]))
        if path == "/openapi/v2":
            # Go's mime parser rejects the '@' in the official media type; octet-stream is
            # what old clients accept for this raw protobuf body.
            return Response(200, _OPENAPI_V2_PB, content_type="application/octet-stream")
        if path.startswith("/openapi"):
            raise ApiError(Reason.NOT_FOUND, "Skiff serves only OpenAPI operation stubs")
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 2:
            gv, rest = parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 3:
            gv, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            raise ApiError.not_found("path", req.path)
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
        info = by_resource.get(rest[0])
        if info is None:
            raise ApiError(Reason.NOT_FOUND, f"the server could not find the requested "
                                             f"resource ({rest[0]})")
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        return await self._resource(req, info, namespace, name, sub)

    async def _resource(self, req: Request, info: KindInfo, namespace: str | None, name: str,
                        sub: str) -> Response:
        r, q = self.registry, req.query
        method = req.method
        if not name:
            if method == "GET":
                if q.get("watch") in ("true", "1"):
                    return self._watch(req, info, namespace)
                listed = await r.list(info.resource, namespace,
                                      label_selector=q.get("labelSelector", ""),
                                      field_selector=q.get("fieldSelector", ""),
                                      **list_options(q))
                return Response(200, self._maybe_table(req, info, listed["items"], listed))
            if method == "POST":
                _refuse_dry_run(q)
                result = await r.create(info.resource, namespace, _body(req),
                                        field_validation=q.get("fieldValidation", "Warn"))
                return Response(201, result.object, headers=_warnings(result.warnings))
            raise ApiError(Reason.METHOD_NOT_ALLOWED, f"{method} on a collection of "
                                                      f"{info.resource} is not supported")
        if sub == "log" and info.kind == "Pod" and method == "GET":
            return await self._log(namespace or "default", name, q)
        if sub in ("binding", "eviction") and info.kind == "Pod" and method == "POST":
            if sub == "binding":
                await r.bind(namespace, name, _body(req))
                return Response(201, {"kind": "Status", "apiVersion": "v1",
                                      "status": "Success", "code": 201})
            evicted = await r.evict(namespace, name, _body(req))
            return Response(201, {"kind": "Status", "apiVersion": "v1", "status": "Success",
                                  "code": 201, "details": {"name": name}}
                            if evicted["deleted"] else evicted["object"])
        if sub == "scale" and "scale" in _SUBRESOURCES.get(info.kind, ()):
            return await self._scale(req, info, namespace or "default", name)
        if sub not in ("", "status"):
            raise ApiError(Reason.NOT_FOUND, f"{info.resource}/{sub} is not served")
        if method == "GET":
            obj = await r.get(info.resource, namespace, name)
            return Response(200, self._maybe_table(req, info, [obj], obj))
        if method == "PUT":
            _refuse_dry_run(q)
            body = _body(req)
            result = await r.update(info.resource, namespace, body, subresource=sub,
                                    field_validation=q.get("fieldValidation", "Warn"))
            return Response(200, result.object, headers=_warnings(result.warnings))
        if method == "PATCH":
            _refuse_dry_run(q)
            return await self._patch(req, info, namespace, name, sub)
        if method == "DELETE":
            options = _body(req) if req.body else {}
            grace = options.get("gracePeriodSeconds", q.get("gracePeriodSeconds"))
            deleted = await r.delete(info.resource, namespace, name,
                                     grace_period_seconds=None if grace in (None, "")
                                     else _int_param("gracePeriodSeconds", grace),
                                     preconditions=options.get("preconditions"))
            return Response(200, deleted["object"])
        raise ApiError(Reason.METHOD_NOT_ALLOWED, f"{method} is not supported here")

    async def _patch(self, req: Request, info: KindInfo, namespace: str | None, name: str,
                     sub: str) -> Response:
        kind = req.header("content-type").split(";")[0].strip()
        if kind not in ("application/merge-patch+json", "application/strategic-merge-patch+json",
                        "application/json-patch+json"):
            raise ApiError(Reason.BAD_REQUEST, f"patch type {kind or '(none)'} is not "
                           "supported; use a merge or strategic merge patch")
        if kind == "application/json-patch+json":
            raise ApiError(Reason.BAD_REQUEST, "JSON patch is not supported; use "
                           "--type=merge or --type=strategic")
        patch = _body(req)
        strict = req.query.get("fieldValidation") == "Strict"
        for _ in range(8):
            current = await self.registry.get(info.resource, namespace, name)
            patched = merge_patch(current, patch,
                                  strategic=kind.startswith("application/strategic"))
            if strict:
                _refuse_unknown_patched_fields(patched)
            patched["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            try:
                result = await self.registry.update(
                    info.resource, namespace, patched, subresource=sub,
                    field_validation=req.query.get("fieldValidation", "Warn"))
            except ApiError as err:
                if err.reason == Reason.CONFLICT and not patch.get("metadata", {}).get(
                        "resourceVersion"):
                    continue
                raise
            return Response(200, result.object, headers=_warnings(result.warnings))
        raise ApiError(Reason.CONFLICT, "too many concurrent writers; retry the patch")

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
        _refuse_dry_run(req.query)
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
                wanted = merge_patch(scale, body)
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
                result = await self.registry.update(info.resource, namespace, updated)
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
        cols = tables.columns_for(info.kind, wide=True)
        narrow = {name for name, _ in tables.columns_for(info.kind)}
        rows = []
        for obj in items:
            meta = obj.get("metadata", {})
            rows.append({"cells": [fn(obj) for _, fn in cols],
                         "object": {"kind": "PartialObjectMetadata",
                                    "apiVersion": "meta.k8s.io/v1", "metadata": meta}})
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
        rv = q.get("resourceVersion", "")
        if rv not in ("", "0"):  # answer a bad one with a Status, before the stream starts
            problem = revision_problem(_int_param("resourceVersion", rv))
            if problem:
                raise ApiError.bad_request(f"resourceVersion: Invalid value: {rv}: {problem}")

        async def events() -> AsyncIterator[Obj]:
            first = True
            async for ev in self.registry.watch(
                    info.resource, namespace, resource_version=q.get("resourceVersion", ""),
                    label_selector=q.get("labelSelector", ""),
                    field_selector=q.get("fieldSelector", "")):
                if ev.type == "BOOKMARK" and q.get("allowWatchBookmarks") not in ("true", "1"):
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
        node = await self.registry.get("nodes", None, node_name)
        status = node.get("status", {})
        port = status.get("daemonEndpoints", {}).get("kubeletEndpoint", {}).get("Port")
        address = next((a["address"] for a in status.get("addresses", [])
                        if a.get("type") == "InternalIP"), "127.0.0.1")
        if not port:
            raise ApiError(Reason.SERVICE_UNAVAILABLE,
                           f'node "{node_name}" does not publish a kubelet endpoint')
        tail = q.get("tailLines")
        tail_lines = _int_param("tailLines", tail) if tail else None
        container = q.get("container") or None
        target = f"{address}:{port}"
        if q.get("follow") in ("true", "1"):
            pieces = kubelet_logs.follow_logs(target, namespace, name, container=container,
                                              tail_lines=tail_lines)
            # the first piece (or the kubelet's error) before the 200 goes out
            try:
                first = await anext(pieces)
            except StopAsyncIteration:
                first = ""

            async def stream() -> AsyncIterator[str]:
                if first:
                    yield first
                async for piece in pieces:
                    yield piece

            return Response(200, stream=stream(), content_type="text/plain")
        text = await kubelet_logs.fetch_logs(target, namespace, name, container=container,
                                             tail_lines=tail_lines,
                                             previous=q.get("previous") in ("true", "1"))
        return Response(200, str(text), content_type="text/plain")


def _scale_of(obj: Obj) -> Obj:
    meta = obj.get("metadata", {})
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    selector = spec.get("selector")
    try:
        text = str(LabelSelector.from_dict(selector)) if selector else ""
    except ApiError:
        text = ""
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                              "creationTimestamp") if k in meta},
            "spec": {"replicas": spec.get("replicas", 1)},
            "status": {"replicas": status.get("replicas", 0), "selector": text}}


def _int_param(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ApiError.bad_request(f"{name}: must be an integer")
    try:
        return int(value)
    except ValueError:
        raise ApiError.bad_request(f"{name}: {value!r} is not an integer") from None


def _body(req: Request) -> Obj:
    if not req.body:
        raise ApiError.bad_request("request body: required (a Kubernetes object)")
    kind = req.header("content-type")
    if kind.split(";")[0].strip() == "application/vnd.kubernetes.protobuf":
        return protobuf.decode(req.body)
    if "yaml" in kind:
        try:
            body = yaml.safe_load(req.body)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            raise ApiError.bad_request(f"request body is not valid YAML{where}") from None
    else:
        try:
            body = json.loads(req.body)
        except json.JSONDecodeError as err:
            raise ApiError.bad_request(f"request body is not valid JSON (line {err.lineno}, "
                                       f"column {err.colno}: {err.msg.lower()})") from None
        except ValueError:  # not UTF-8
            raise ApiError.bad_request("request body is not valid JSON (not UTF-8 text); "
                                       f"send {kind or 'application/json'} as UTF-8") from None
    if not isinstance(body, dict):
        raise ApiError.bad_request("request body must be a JSON object")
    return body


def _refuse_unknown_patched_fields(patched: Obj) -> None:
    """fieldValidation=Strict on PATCH: kube-apiserver answers an Invalid Status about the
    field `patch`, whose value is the patched object (kubectl prints it that way)."""
    unknown = prune_unknown_fields(copy.deepcopy(patched))
    if unknown:
        listed = ", ".join(f'unknown field "{p}"' for p in unknown)
        raise ApiError.invalid("", "", [ApiFieldError(
            "patch", "Invalid value", f"strict decoding error: {listed}",
            json.dumps(patched, separators=(",", ":")))])


def _refuse_dry_run(q: dict[str, str]) -> None:
    if q.get("dryRun"):
        raise ApiError.bad_request("dryRun is not supported by Skiff; run without "
                                   "--dry-run=server")


def _warnings(warnings: list[str]) -> dict[str, str]:
    """RFC 7234 Warning header: `299 - "text"`, inner quotes escaped; kubectl prints them."""
    def quoted(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return {"Warning": ", ".join(f"299 - {quoted(w)}" for w in warnings)} if warnings else {}
