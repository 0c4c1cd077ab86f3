"""A workload's scale, built-in or custom (SPEC EX4), as client-go's polymorphic scale client
gives it to the HorizontalPodAutoscaler and the disruption controller.

Kubernetes' controllers read and write `<resource>/scale` over HTTP for any resource that
has the subresource. Over gRPC there is no scale subresource, so the scale is read from the
object itself and written by updating it: `spec.replicas` and `spec.selector` of the
built-in workloads, and for a custom resource the paths its CustomResourceDefinition names
(`specReplicasPath`, `statusReplicasPath`, `labelSelectorPath`; the stored version's, since
gRPC speaks the stored version). The CRD comes from the caller (`crd_of`: the controller-
manager passes its CRD informer's cache, the one `CustomKinds` follows), so resolving a
target costs no request. A kind that is served but has no scale subresource fails as the
apiserver's 404 on `<resource>/scale` does in Kubernetes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

from skiff.api import ApiError, LabelSelector, Reason, jsonpath
from skiff.api.apiextensions.crdversions import subresources_of
from skiff.api.kinds import KindInfo, lookup_kind
from skiff.api.selectors import workload_selector
from skiff.api.types import Obj, ObjView
from skiff.client.interface import Client

# The built-in kinds with a scale subresource, by (API group, kind).
BUILT_IN: frozenset[tuple[str, str]] = frozenset({
    ("apps", "Deployment"), ("apps", "ReplicaSet"), ("apps", "StatefulSet"),
    ("", "ReplicationController"),
})
# What kube-apiserver answers for `<resource>/scale` when the resource has none.
NO_SCALE_SUBRESOURCE = "the server could not find the requested resource"
RESCALE_ATTEMPTS = 5

CrdLookup = Callable[[str], ObjView | None]  # a CRD by name (`<plural>.<group>`)


class ScaleError(Exception):
    """The target has no scale to read (its message is what Kubernetes reports);
    `group_resource` names a served kind that has no scale subresource."""

    def __init__(self, message: str, *, group_resource: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.group_resource = group_resource


@dataclass(frozen=True)
class ScalePaths:
    """A custom resource's scale subresource (`.spec.replicas`-style JSON paths)."""

    spec_replicas: str
    status_replicas: str
    label_selector: str = ""


@dataclass(frozen=True)
class ScaleTarget:
    """A kind with a scale subresource; `paths` is None for a built-in kind."""

    info: KindInfo
    paths: ScalePaths | None = None

    @property
    def group_resource(self) -> str:
        """`deployments.apps`, `replicationcontrollers`, `crontabs.stable.example.com`."""
        group = self.info.group
        return f"{self.info.resource}.{group}" if group else self.info.resource


@dataclass(frozen=True)
class Scale:
    """The target's scale subresource (autoscaling/v1 Scale), and the object it was read
    from (written back by `update_replicas`)."""

    target: ScaleTarget
    obj: Obj
    spec_replicas: int
    status_replicas: int
    selector: str  # a label selector string ("" when the target has none)


def group_of(api_version: str) -> str:
    """The API group of an apiVersion; ValueError with apimachinery's message if it is not
    one."""
    parts = api_version.split("/")
    if len(parts) > 2:
        raise ValueError(f"unexpected GroupVersion string: {api_version}")
    return parts[0] if len(parts) == 2 else ""


def scale_paths(crd: ObjView, version: str) -> ScalePaths | None:
    """The scale subresource of one version of a CRD, or None when it has none."""
    scale = subresources_of(crd, version).get("scale")
    if not isinstance(scale, dict):
        return None
    return ScalePaths(spec_replicas=str(scale.get("specReplicasPath") or ""),
                      status_replicas=str(scale.get("statusReplicasPath") or ""),
                      label_selector=str(scale.get("labelSelectorPath") or ""))


def resolve(*, api_version: str, kind: str, crd_of: CrdLookup) -> ScaleTarget:
    """The scalable kind a `scaleTargetRef` (or an ownerReference) names; ScaleError with
    Kubernetes' message when no kind matches or it has no scale subresource."""
    try:
        group = group_of(api_version)
    except ValueError as err:
        raise ScaleError(str(err)) from None
    try:
        info = lookup_kind(api_version, kind)
    except ApiError:
        raise ScaleError(f'no matches for kind "{kind}" in group "{group}"') from None
    if not info.custom:
        if (info.group, info.kind) in BUILT_IN:
            return ScaleTarget(info)
        raise ScaleError(NO_SCALE_SUBRESOURCE,
                         group_resource=ScaleTarget(info).group_resource)
    crd = crd_of(info.ref) if "scale" in info.subresources else None
    paths = scale_paths(crd, info.version) if crd is not None else None
    if paths is None or not paths.spec_replicas:
        raise ScaleError(NO_SCALE_SUBRESOURCE, group_resource=info.ref)
    return ScaleTarget(info, paths)


def _int_at(obj: Obj, path: str) -> int:
    """The integer at a JSON path; 0 when it is unset or not an integer (as the apiserver's
    scale subresource reads a custom resource)."""
    if not path:
        return 0
    try:
        value = jsonpath.first(obj, path)
    except jsonpath.JsonPathError:
        return 0
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def scale_of(target: ScaleTarget, obj: Obj) -> Scale:
    """The Scale of an object of `target`'s kind."""
    paths = target.paths
    if paths is None:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        selector = ""
        if spec.get("selector") is not None:
            try:
                selector = str(LabelSelector.from_dict(workload_selector(obj)))
            except ApiError:
                selector = ""
        replicas = spec.get("replicas")
        return Scale(target=target, obj=obj, spec_replicas=int(1 if replicas is None
                                                                else replicas),
                     status_replicas=int(status.get("replicas") or 0), selector=selector)
    text = ""
    if paths.label_selector:
        try:
            found = jsonpath.first(obj, paths.label_selector)
        except jsonpath.JsonPathError:
            found = None
        text = found if isinstance(found, str) else ""
    return Scale(target=target, obj=obj, spec_replicas=_int_at(obj, paths.spec_replicas),
                 status_replicas=_int_at(obj, paths.status_replicas), selector=text)


async def get_scale(client: Client, target: ScaleTarget, *, name: str,
                    namespace: str | None) -> Scale:
    """Read the scale of one object; ApiError NotFound says `<group resource> "<name>" not
    found`, as kube-apiserver's scale subresource does."""
    info = target.info
    try:
        obj = await client.get(info.ref, name, namespace if info.namespaced else None)
    except ApiError as err:
        if err.reason == Reason.NOT_FOUND:
            raise ApiError(Reason.NOT_FOUND,
                           f'{target.group_resource} "{name}" not found') from None
        raise
    obj.setdefault("kind", info.kind)  # client.update finds the resource by kind
    obj.setdefault("apiVersion", info.api_version)
    return scale_of(target, obj)


def _set_replicas(target: ScaleTarget, obj: Obj, replicas: int) -> None:
    path = target.paths.spec_replicas if target.paths is not None else ".spec.replicas"
    try:
        jsonpath.set_value(obj, path, replicas)
    except jsonpath.JsonPathError as err:
        raise ApiError.bad_request(f"scale: specReplicasPath {err}") from None


async def update_replicas(client: Client, scale: Scale, *, replicas: int,
                          attempts: int = RESCALE_ATTEMPTS) -> Scale:
    """Write `replicas` at the target's spec replicas (an update of the object) and return
    the new Scale. A conflict is retried on a fresh copy unless someone else changed the
    replicas meanwhile (then that conflict is raised, as the HPA reports it)."""
    target = scale.target
    obj = copy.deepcopy(scale.obj)
    meta = obj["metadata"]
    for attempt in range(attempts):
        _set_replicas(target, obj, replicas)
        try:
            return scale_of(target, await client.update(obj))
        except ApiError as err:
            if err.reason != Reason.CONFLICT or attempt == attempts - 1:
                raise
            conflict = err
        fresh = await get_scale(client, target, name=str(meta["name"]),
                                namespace=meta.get("namespace"))
        if fresh.spec_replicas != scale.spec_replicas:
            raise conflict
        obj = copy.deepcopy(fresh.obj)
    raise AssertionError("unreachable: the last attempt returns or raises")
