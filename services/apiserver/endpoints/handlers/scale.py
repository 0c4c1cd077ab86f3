"""The `scale` subresource (autoscaling/v1 Scale) of the workloads that have one: read and
write `spec.replicas` without touching the rest of the object (`kubectl scale`, the
HorizontalPodAutoscaler's writes over HTTP). A custom resource's scale reads and writes the
paths its CRD names (SPEC EX4: specReplicasPath, statusReplicasPath, labelSelectorPath).
"""

from __future__ import annotations

import copy

from skiff.api import ApiError, Reason, jsonpath
from skiff.api.errors import FieldError as ApiFieldError
from skiff.api.kinds import KindInfo
from skiff.api.selectors import LabelSelector, workload_selector
from skiff.api.types import Obj
from skiff.apiserver.endpoints.handlers import patch as patches
from skiff.apiserver.endpoints.handlers.request import dry_run_of, read_body
from skiff.apiserver.endpoints.http import Request, Response
from skiff.apiserver.registry.store import Registry

# A custom resource's (specReplicasPath, statusReplicasPath, labelSelectorPath)
ScalePaths = tuple[str, str, str]
_BUILT_IN: ScalePaths = (".spec.replicas", "", "")


async def scale(registry: Registry, req: Request, info: KindInfo, namespace: str | None,
                name: str, paths: ScalePaths | None = None) -> Response:
    """The `scale` subresource (autoscaling/v1 Scale): `spec.replicas` of a workload (or
    `paths`' of a custom resource), read and written without touching the rest of it
    (`kubectl scale`)."""
    current = await registry.get(info.ref, namespace, name)

    def scale_of(obj: Obj) -> Obj:
        return custom_scale_of(obj, paths) if paths is not None else workload_scale_of(obj)
    if req.method == "GET":
        return Response(200, scale_of(current))
    if req.method not in ("PUT", "PATCH"):
        raise ApiError(Reason.METHOD_NOT_ALLOWED, f"{req.method} is not supported on "
                                                  f"{info.resource}/scale")
    dry_run = dry_run_of(req.query)
    body = read_body(req)
    for _ in range(8):
        scale = scale_of(current)
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
        try:
            jsonpath.set_value(updated, (paths or _BUILT_IN)[0], replicas)
        except jsonpath.JsonPathError as err:
            raise ApiError.bad_request(f"scale: specReplicasPath {err}") from None
        updated["metadata"]["resourceVersion"] = (requested_rv or
                                                  current["metadata"]["resourceVersion"])
        try:
            result = await registry.update(info.ref, namespace, updated,
                                                dry_run=dry_run)
        except ApiError as err:
            if err.reason == Reason.CONFLICT and not requested_rv:
                current = await registry.get(info.ref, namespace, name)
                continue
            raise
        return Response(200, scale_of(result.object))
    raise ApiError(Reason.CONFLICT, "too many concurrent writers; retry the scale")


def _scale_meta(obj: Obj) -> Obj:
    meta = obj.get("metadata", {})
    return {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                 "creationTimestamp") if k in meta}


def custom_scale_of(obj: Obj, paths: ScalePaths) -> Obj:
    """A custom object's Scale, read at its CRD's paths."""
    spec_path, status_path, selector_path = paths
    replicas = jsonpath.first(obj, spec_path) if spec_path else None
    status = jsonpath.first(obj, status_path) if status_path else None
    selector = jsonpath.first(obj, selector_path) if selector_path else None
    return {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": _scale_meta(obj),
            "spec": {"replicas": replicas if isinstance(replicas, int) else 0},
            "status": {"replicas": status if isinstance(status, int) else 0,
                       **({"selector": selector} if isinstance(selector, str) else {})}}


def workload_scale_of(obj: Obj) -> Obj:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    selector = workload_selector(obj)
    try:
        text = str(LabelSelector.from_dict(selector)) if selector else ""
    except ApiError:
        text = ""
    return {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": _scale_meta(obj),
            "spec": {"replicas": spec.get("replicas", 1)},
            "status": {"replicas": status.get("replicas", 0), "selector": text}}
