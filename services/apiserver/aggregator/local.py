"""Local APIServices (kube-apiserver's autoregister and crdregistration controllers): one
APIService without a Service for every group/version this apiserver serves itself — the
built-in ones (`v1.`, `v1.apps`, ..., Skiff's `v1beta1.metrics.k8s.io` included), made at
start and labelled `kube-aggregator.kubernetes.io/automanaged: onstart`, and one per served
version of every stored CustomResourceDefinition (`automanaged: true`), removed when the
CRD no longer serves it — so `kubectl get apiservices` lists what kube's does, each
`Available` with reason `Local`.

CRD group/versions are read from the stored CRDs, not this process's served kinds, so
several apiservers agree on them while one is still catching up.
"""

from __future__ import annotations

import logging

from skiff.api import ApiError, Reason
from skiff.api.apiextensions import crdversions
from skiff.api.kinds import KINDS, served_versions
from skiff.api.types import Obj, ObjView
from skiff.apiserver.aggregator.table import RESOURCE
from skiff.apiserver.auth import reviews
from skiff.apiserver.endpoints import metricsapi
from skiff.apiserver.registry.store import Registry
from skiff.clock import rfc3339

log = logging.getLogger(__name__)

AUTOMANAGED_LABEL = "kube-aggregator.kubernetes.io/automanaged"
ON_START, FOR_CRD = "onstart", "true"
LOCAL_REASON, LOCAL_MESSAGE = "Local", "Local APIServices are always available"
# kube-apiserver's group/version priorities (groupPriorityMinimum, versionPriority)
PRIORITIES: dict[str, tuple[int, int]] = {
    "v1": (18000, 1), "apiregistration.k8s.io/v1": (18000, 15), "apps/v1": (17800, 15),
    "events.k8s.io/v1": (17750, 15), "authentication.k8s.io/v1": (17700, 15),
    "authorization.k8s.io/v1": (17600, 15), "autoscaling/v1": (17500, 15),
    "autoscaling/v2": (17500, 30), "batch/v1": (17400, 15),
    "certificates.k8s.io/v1": (17300, 15), "networking.k8s.io/v1": (17200, 15),
    "policy/v1": (17100, 15), "rbac.authorization.k8s.io/v1": (17000, 15),
    "storage.k8s.io/v1": (16800, 15), "admissionregistration.k8s.io/v1": (16700, 15),
    "apiextensions.k8s.io/v1": (16700, 15), "scheduling.k8s.io/v1": (16600, 15),
    "coordination.k8s.io/v1": (16500, 15), "node.k8s.io/v1": (16300, 15),
    "discovery.k8s.io/v1": (16200, 15), "flowcontrol.apiserver.k8s.io/v1": (16100, 21),
}
# groups kube has no entry for (Skiff's own, metrics.k8s.io served locally): after kube's
SERVED_ELSEWHERE_PRIORITY = (15000, 15)
# what kube's crdregistration controller gives every CRD group/version
CRD_PRIORITY = (1000, 100)


def api_service_name(group_version: str) -> str:
    """`apps/v1` → `v1.apps`; `v1` → `v1.`."""
    group, _, version = group_version.rpartition("/")
    return f"{version}.{group}"


def builtin_group_versions() -> list[str]:
    """Every group/version this apiserver serves itself without a CRD."""
    served = {s.api_version for info in KINDS for s in served_versions(info)}
    served |= {*reviews.GROUP_VERSIONS, metricsapi.GROUP_VERSION}
    return sorted(served)


def local_condition(now: str) -> Obj:
    return {"type": "Available", "status": "True", "lastTransitionTime": now,
            "reason": LOCAL_REASON, "message": LOCAL_MESSAGE}


def local_api_service(group_version: str, *, managed: str, priority: tuple[int, int],
                      now: str) -> Obj:
    """The APIService of a group/version served here."""
    group, _, version = group_version.rpartition("/")
    return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": api_service_name(group_version),
                         "labels": {AUTOMANAGED_LABEL: managed}},
            "spec": {"group": group, "version": version,
                     "groupPriorityMinimum": priority[0], "versionPriority": priority[1]},
            "status": {"conditions": [local_condition(now)]}}


def crd_group_versions(crds: list[ObjView]) -> set[str]:
    """The group/versions the stored CRDs serve (a CRD being deleted still does)."""
    return {f"{crd['spec']['group']}/{version}" for crd in crds
            if (crd.get("spec") or {}).get("group")
            for version in crdversions.served_versions(crd)}


async def ensure_builtin(registry: Registry) -> None:
    """Create the built-in group/versions' APIServices that do not exist yet."""
    now = rfc3339(registry.clock.now())
    for gv in builtin_group_versions():
        await registry.ensure(local_api_service(
            gv, managed=ON_START, now=now,
            priority=PRIORITIES.get(gv, SERVED_ELSEWHERE_PRIORITY)))


async def sync_crd_api_services(registry: Registry, existing: list[Obj]) -> None:
    """Make the stored CRDs' APIServices match them (`existing`: every APIService now)."""
    listed = await registry.list("customresourcedefinitions", None)
    wanted = crd_group_versions(listed["items"]) - set(builtin_group_versions())
    names = {str(o["metadata"]["name"]) for o in existing}
    now = rfc3339(registry.clock.now())
    for gv in sorted(wanted):
        if api_service_name(gv) not in names:
            await registry.ensure(local_api_service(gv, managed=FOR_CRD,
                                                    priority=CRD_PRIORITY, now=now))
    keep = {api_service_name(gv) for gv in wanted}
    for obj in existing:
        labels = obj["metadata"].get("labels") or {}
        name = str(obj["metadata"]["name"])
        if labels.get(AUTOMANAGED_LABEL) == FOR_CRD and name not in keep \
                and (obj.get("spec") or {}).get("service") is None:
            try:
                await registry.delete(RESOURCE, None, name)
            except ApiError as err:
                if err.reason != Reason.NOT_FOUND:
                    raise
