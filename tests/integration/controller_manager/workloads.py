"""ReplicaSet and StatefulSet manifests for the integration tests."""

from __future__ import annotations

from skiff.api.types import Obj


def _template(app: str, unreachable_toleration: int | None) -> Obj:
    spec: Obj = {"containers": [{"name": "main", "image": "busybox",
                                 "command": ["sleep", "3600"]}]}
    if unreachable_toleration is not None:
        spec["tolerations"] = [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                "effect": "NoExecute",
                                "tolerationSeconds": unreachable_toleration}]
    return {"metadata": {"labels": {"app": app}}, "spec": spec}


def replica_set(name: str, namespace: str, *, replicas: int,
                unreachable_toleration: int | None = None) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": _template(name, unreachable_toleration)}}


def stateful_set(name: str, namespace: str, *, replicas: int, policy: str = "OrderedReady",
                 unreachable_toleration: int | None = None) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "serviceName": name,
                     "podManagementPolicy": policy,
                     "selector": {"matchLabels": {"app": name}},
                     "template": _template(name, unreachable_toleration)}}
