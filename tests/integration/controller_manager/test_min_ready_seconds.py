"""PS4 availability as Kubernetes 1.32 counts it: a ReplicaSet's or StatefulSet's pod is
available only once it has been Ready for `minReadySeconds`, and the controller comes back
by itself to count it then (no other event needed)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.controller_manager.conftest import StartControllerManager
from tests.integration.controller_manager.kubelet_double import KubeletDouble, wait_for
from tests.integration.controller_manager.workloads import replica_set, stateful_set

MIN_READY = 5


@pytest.mark.parametrize(("kind", "resource", "make"), [
    pytest.param("ReplicaSet", "replicasets", replica_set, id="replicaset"),
    pytest.param("StatefulSet", "statefulsets", stateful_set, id="statefulset"),
])
async def test_ps4_available_replicas_wait_for_min_ready_seconds(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager,
        kind: str, resource: str, make: Any) -> None:
    controller_manager("--controllers", "replicaset,statefulset")
    workload = make("web", namespace, replicas=1)
    workload["spec"]["minReadySeconds"] = MIN_READY
    await api.create(workload)
    async with KubeletDouble(api, f"m-{namespace}") as kubelet:
        async def one_pod() -> list[Obj] | None:
            items: list[Obj] = (await api.list("pods", namespace))["items"]
            return items or None

        created = await wait_for(one_pod, timeout=10, what=f"the {kind}'s pod")
        await kubelet.run_pod(namespace, str(created[0]["metadata"]["name"]))
        ready_at = time.monotonic()

        async def status() -> Obj:
            got: Obj = (await api.get(resource, "web", namespace)).get("status") or {}
            return got

        async def ready_not_available() -> bool:
            s = await status()
            return s.get("readyReplicas") == 1 and s.get("availableReplicas", 0) == 0

        await wait_for(ready_not_available, timeout=MIN_READY,
                       what="ready but not yet available")

        async def available() -> bool:
            return (await status()).get("availableReplicas") == 1

        await wait_for(available, timeout=MIN_READY + 10, what="available after minReadySeconds")
        assert time.monotonic() - ready_at >= MIN_READY - 1  # stamps have 1 s resolution
