"""Discovery, as kube-apiserver answers it: `/version`, the served groups and versions
(`/api`, `/apis`, `/apis/<group>`) and each group/version's resources with their verbs,
short names, categories and subresources (`/api/v1`, `/apis/<group>/<version>`), which
kubectl reads before anything else.
"""

from __future__ import annotations

from skiff.api.kinds import KindInfo, all_kinds, served_versions
from skiff.api.types import Obj
from skiff.apiserver.auth import reviews
from skiff.apiserver.endpoints import metricsapi

VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-skiff", "gitCommit": "skiff",
           "gitTreeState": "clean", "buildDate": "2026-11-22T00:00:00Z",
           "goVersion": "python3", "compiler": "cpython", "platform": "linux/amd64"}

SUBRESOURCES = {"Pod": ("attach", "binding", "ephemeralcontainers", "eviction", "exec", "log",
                         "portforward", "status"),
                 "Node": ("status",), "ReplicaSet": ("status", "scale"),
                 "ReplicationController": ("status", "scale"),
                 "StatefulSet": ("status", "scale"),
                 "Deployment": ("status", "scale"), "DaemonSet": ("status",),
                 "Job": ("status",), "CronJob": ("status",), "Service": ("status",),
                 "PodDisruptionBudget": ("status",), "Namespace": ("status",),
                 "ServiceAccount": ("token",), "PersistentVolume": ("status",),
                 "HorizontalPodAutoscaler": ("status",),
                 "CustomResourceDefinition": ("status",), "APIService": ("status",),
                 "ValidatingAdmissionPolicy": ("status",),
                 "CertificateSigningRequest": ("approval", "status")}
# A subresource's discovery entry as kube-apiserver lists it: its verbs, and the kind (with
# group and version when they differ from the parent's) that its requests carry. kubectl
# drain evicts only when `pods/eviction` names kind Eviction in a group and version;
# otherwise it falls back to deleting pods, past any PodDisruptionBudget.
_SUBRESOURCE_ENTRY: dict[str, Obj] = {
    "status": {"verbs": ["get", "patch", "update"]},
    "ephemeralcontainers": {"verbs": ["get", "patch", "update"]},
    "approval": {"verbs": ["get", "patch", "update"]},
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
# The kinds in Kubernetes' `all` category that Skiff serves
_CATEGORY_ALL = {"Pod", "Service", "DaemonSet", "Deployment", "ReplicaSet", "StatefulSet",
                 "Job", "CronJob", "HorizontalPodAutoscaler", "ReplicationController"}
_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def served_groups() -> dict[str, list[KindInfo]]:
    """Every served kind by the group/version it is served in (a kind served in two
    versions is listed under both)."""
    by_gv: dict[str, list[KindInfo]] = {}
    for info in all_kinds():
        for served in served_versions(info):
            by_gv.setdefault(served.api_version, []).append(served)
    return by_gv


def api_groups(by_gv: dict[str, list[KindInfo]]) -> list[Obj]:
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


def resource_list(group_version: str, kinds: list[KindInfo]) -> Obj:
    """`/api/v1` or `/apis/<group>/<version>`: the APIResourceList kubectl discovers."""
    resources: list[Obj] = []
    for info in kinds:
        resources.append({"name": info.resource, "singularName": info.singular,
                          "namespaced": info.namespaced, "kind": info.kind,
                          "verbs": [v for v in _VERBS if v != "deletecollection"
                                    or info.kind != "Namespace"],
                          "shortNames": list(info.short_names)})
        if info.kind in _CATEGORY_ALL and not info.custom:  # `kubectl get all`
            resources[-1]["categories"] = ["all"]
        if info.categories:
            resources[-1]["categories"] = list(info.categories)
        for sub in info.subresources if info.custom else SUBRESOURCES.get(info.kind, ()):
            entry: Obj = {"name": f"{info.resource}/{sub}", "singularName": "",
                          "namespaced": info.namespaced, "kind": info.kind,
                          **_SUBRESOURCE_ENTRY[sub]}
            resources.append(entry)
    # sorted by name as kube-apiserver lists them (`kubectl get all` prints in this order)
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": sorted(resources, key=lambda r: str(r["name"]))}
