"""Each kind's strategy is looked up in one table, and the generic store asks it wherever
kinds differ: what status a created object keeps, which subresources are the object's
own, a pod's grace period, RBAC's escalation check; run on the in-memory storage."""

from __future__ import annotations

import pytest

from skiff.api.types import Obj
from skiff.apiserver.registry.store import Registry, RegistryConfig
from skiff.apiserver.registry.strategies.catalog import Strategies
from skiff.apiserver.registry.strategies.pod import PodStrategy
from skiff.apiserver.registry.strategies.rbac import RbacStrategy
from skiff.apiserver.registry.strategies.service import ServiceStrategy
from skiff.apiserver.registry.strategy import Strategy
from skiff.apiserver.storage.memory import MemoryStorage
from skiff.apiserver.storage.watchcache import WatchCache


@pytest.mark.parametrize(("kind", "expected", "reset"), [
    ("Pod", PodStrategy, True),
    ("Service", ServiceStrategy, False),
    ("ReplicaSet", Strategy, True),
    ("ClusterRoleBinding", RbacStrategy, False),
    ("ConfigMap", Strategy, False),
    ("Deployment", Strategy, False),
])
def test_each_kind_has_its_strategy(kind: str, expected: type[Strategy], reset: bool) -> None:
    strategy = Strategies()[kind]
    assert isinstance(strategy, expected)
    assert strategy.kind == kind
    assert strategy.reset_status_on_create is reset


def test_only_pods_serve_ephemeral_containers_through_the_object() -> None:
    strategies = Strategies()
    assert strategies["Pod"].serves("ephemeralcontainers")
    assert not strategies["Deployment"].serves("ephemeralcontainers")
    assert all(strategies[k].serves(s) for k in ("Pod", "Node") for s in ("", "status"))
    assert not strategies["Pod"].serves("log")


def test_a_pods_delete_is_graceful_and_others_are_not() -> None:
    pod: Obj = {"metadata": {"name": "p"},
                "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 12}}
    strategies = Strategies()
    assert strategies["Pod"].delete_grace_period(pod, None) == 12
    assert strategies["Pod"].delete_grace_period(pod, 3) == 3
    assert strategies["ConfigMap"].delete_grace_period({"metadata": {}}, 5) == 0


async def test_a_controller_owned_status_is_dropped_on_create() -> None:
    store = MemoryStorage()
    registry = Registry(store, WatchCache(store), config=RegistryConfig(pod_security=None))
    await registry.ensure_system_objects()
    labels = {"app": "web"}
    replicaset: Obj = {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
        "status": {"replicas": 7}}
    created = await registry.create("replicasets", "default", replicaset)
    assert created.object.get("status", {}).get("replicas", 0) != 7
    assert created.object["metadata"]["generation"] == 1
