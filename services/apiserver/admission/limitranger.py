"""LimitRanger admission (plugin/pkg/admission/limitranger): a namespace's LimitRanges
applied to the pods and claims created in it.

A pod being created gets, per container and init container, the default limits and
requests of each Container item it lacks (after Kubernetes' own defaulting has copied
limits to missing requests), recorded in the `kubernetes.io/limit-ranger` annotation; then
every item is enforced: Container items on each container, Pod items on the pod's totals
(the larger of the containers' sum and any init container), PersistentVolumeClaim items on
a claim's storage request (at create). A violation refuses the write with 403
Forbidden and Kubernetes' words ("maximum cpu usage per Container is 1, but limit is 2").
Pod updates are not checked: containers' resources cannot change after create.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from skiff.api.errors import ApiError, Reason
from skiff.api.quantity import canonical, parse_quantity
from skiff.api.resources import binary_amounts, pod_amounts
from skiff.api.types import Obj
from skiff.apiserver.admission.interface import Attributes, DefaultingPlugin
from skiff.apiserver.storage.lookups import Lookup

ANNOTATION = "kubernetes.io/limit-ranger"


def _amounts(resources: Mapping[str, Any] | None, part: str) -> dict[str, Any]:
    return dict((resources or {}).get(part) or {})


def _defaults(container: Obj, item: Mapping[str, Any], prefix: str) -> list[str]:
    """mergeContainerResources: fill missing limits and requests; say what was set."""
    resources = container.setdefault("resources", {})
    said: list[str] = []
    for part, source, word in (("requests", "defaultRequest", "request"),
                               ("limits", "default", "limit")):
        amounts = resources.get(part) or {}
        added = sorted(k for k in (item.get(source) or {}) if k not in amounts)
        if added:
            resources[part] = {**amounts, **{k: item[source][k] for k in added}}
            said.append(f"{', '.join(added)} {word} for {prefix} {container.get('name', '')}")
    return said


def _min(kind: str, name: str, enforced: Any, requests: Mapping[str, Any],
         limits: Mapping[str, Any]) -> str | None:
    bound, head = parse_quantity(enforced), f"minimum {name} usage per {kind} is " \
                                            f"{canonical(enforced)}"
    if name not in requests:
        return f"{head}.  No request is specified"
    if parse_quantity(requests[name]) < bound:
        return f"{head}, but request is {canonical(requests[name])}"
    if name in limits and parse_quantity(limits[name]) < bound:
        return f"{head}, but limit is {canonical(limits[name])}"
    return None


def _max(kind: str, name: str, enforced: Any, requests: Mapping[str, Any],
         limits: Mapping[str, Any]) -> str | None:
    bound, head = parse_quantity(enforced), f"maximum {name} usage per {kind} is " \
                                            f"{canonical(enforced)}"
    if name not in limits:
        return f"{head}.  No limit is specified"
    if parse_quantity(limits[name]) > bound:
        return f"{head}, but limit is {canonical(limits[name])}"
    if name in requests and parse_quantity(requests[name]) > bound:
        return f"{head}, but request is {canonical(requests[name])}"
    return None


def _ratio(kind: str, name: str, enforced: Any, requests: Mapping[str, Any],
           limits: Mapping[str, Any]) -> str | None:
    request = parse_quantity(requests[name]) if name in requests else Fraction(0)
    limit = parse_quantity(limits[name]) if name in limits else Fraction(0)
    head = f"{name} max limit to request ratio per {kind} is {canonical(enforced)}"
    if not request:
        return f"{head}, but no request is specified or request is 0"
    if not limit:
        return f"{head}, but no limit is specified or limit is 0"
    if limit / request > parse_quantity(enforced):
        return f"{head}, but provided ratio is {float(limit / request):f}"
    return None


def _enforce(kind: str, item: Mapping[str, Any], requests: Mapping[str, Any],
             limits: Mapping[str, Any]) -> list[str]:
    problems = []
    for source, check in (("min", _min), ("max", _max), ("maxLimitRequestRatio", _ratio)):
        for name, enforced in (item.get(source) or {}).items():
            problem = check(kind, name, enforced, requests, limits)
            if problem:
                problems.append(problem)
    return problems


def _totals(spec: Mapping[str, Any], part: str) -> dict[str, Any]:
    """PodRequests / PodLimits (in the binary format when an amount had a binary suffix,
    as Quantity.Add keeps it)."""
    binary = binary_amounts(spec, part)
    return {name: canonical(value, binary=name in binary)
            for name, value in pod_amounts(spec, part).items()}


def _refuse(resource: str, name: str, problems: list[str]) -> ApiError:
    detail = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
    return ApiError(Reason.FORBIDDEN, f'{resource} "{name}" is forbidden: {detail}')


def admit_pod(pod: Obj, ranges: Iterable[Mapping[str, Any]]) -> bool:
    """Default then enforce every LimitRange of the pod's namespace (at create); True when
    a default was set, so the caller validates the pod again (as Kubernetes validates after
    mutating admission: a default limit below a stated request is refused)."""
    items = [item for lr in ranges for item in (lr.get("spec") or {}).get("limits") or []]
    if not items:
        return False
    spec = pod.setdefault("spec", {})
    said: list[str] = []
    for item in items:
        if item.get("type") != "Container":
            continue
        for field, prefix in (("containers", "container"), ("initContainers",
                                                           "init container")):
            for container in spec.get(field) or []:
                said += _defaults(container, item, prefix)
    if said:
        annotations = pod["metadata"].setdefault("annotations", {})
        annotations[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(said)
    problems: list[str] = []
    for item in items:
        if item.get("type") == "Container":
            for field in ("containers", "initContainers"):
                for container in spec.get(field) or []:
                    resources = container.get("resources")
                    problems += _enforce("Container", item, _amounts(resources, "requests"),
                                         _amounts(resources, "limits"))
        elif item.get("type") == "Pod":
            problems += _enforce("Pod", item, _totals(spec, "requests"),
                                 _totals(spec, "limits"))
    if problems:
        raise _refuse("pods", str(pod["metadata"].get("name", "")), problems)
    return bool(said)


def admit_claim(claim: Obj, ranges: Iterable[Mapping[str, Any]]) -> None:
    """PersistentVolumeClaim items bound the claim's storage request."""
    requests = _amounts((claim.get("spec") or {}).get("resources"), "requests")
    problems: list[str] = []
    for lr in ranges:
        for item in (lr.get("spec") or {}).get("limits") or []:
            if item.get("type") != "PersistentVolumeClaim":
                continue
            for name, enforced in (item.get("min") or {}).items():
                problem = _min("PersistentVolumeClaim", name, enforced, requests, {})
                problems += [problem] if problem else []
            for name, enforced in (item.get("max") or {}).items():
                problem = _max("PersistentVolumeClaim", name, enforced, {}, requests)
                problems += [problem] if problem else []
    if problems:
        raise _refuse("persistentvolumeclaims", str(claim["metadata"].get("name", "")),
                      problems)


class LimitRanger(DefaultingPlugin):
    """Applies the namespace's LimitRanges to a created pod or claim."""

    name = "LimitRanger"
    kinds = frozenset({"Pod", "PersistentVolumeClaim"})

    def __init__(self, limit_ranges: Lookup) -> None:
        self.limit_ranges = limit_ranges

    async def admit_create(self, attrs: Attributes) -> None:
        ranges = await self.limit_ranges.in_namespace(attrs.obj["metadata"]["namespace"])
        if attrs.info.kind == "PersistentVolumeClaim":
            admit_claim(attrs.obj, ranges)
        elif admit_pod(attrs.obj, ranges):
            attrs.revalidate(attrs.obj)
