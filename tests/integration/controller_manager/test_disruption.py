"""PodDisruptionBudget status from the disruption controller, as the apiserver's eviction
subresource reads it (AS8: 429 once the budget is spent)."""

from __future__ import annotations

import pytest

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.controller_manager.conftest import StartControllerManager
from tests.integration.controller_manager.kubelet_double import KubeletDouble, wait_for
from tests.integration.controller_manager.workloads import replica_set
from tests.integration.objects import pdb


async def _status(api: ApiClient, namespace: str) -> Obj:
    status: Obj = (await api.get("poddisruptionbudgets", "budget", namespace)).get(
        "status") or {}
    return status


async def test_as8_pdb_status_lets_one_eviction_through_then_refuses(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager) -> None:
    controller_manager("--controllers", "replicaset,disruption")
    await api.create(pdb("budget", namespace, {"app": "db"}, min_available=2))
    async with KubeletDouble(api, f"d-{namespace}") as kubelet:
        await api.create(replica_set("db", namespace, replicas=3))

        async def three() -> list[Obj] | None:
            items: list[Obj] = (await api.list("pods", namespace))["items"]
            return items if len(items) == 3 else None

        for p in await wait_for(three, timeout=10, what="3 pods"):
            await kubelet.run_pod(namespace, str(p["metadata"]["name"]))

        async def allowed(n: int) -> Obj | None:
            status = await _status(api, namespace)
            return status if status.get("disruptionsAllowed") == n and status.get(
                "currentHealthy") == 3 else None

        status = await wait_for(lambda: allowed(1), timeout=10, what="1 disruption allowed")
        assert (status["desiredHealthy"], status["expectedPods"]) == (2, 3)
        assert status["observedGeneration"] == 1

        names = sorted(str(p["metadata"]["name"])
                       for p in (await api.list("pods", namespace))["items"])
        await api.evict(namespace, names[0])
        with pytest.raises(ApiError) as refused:
            await api.evict(namespace, names[1])
        assert refused.value.reason == Reason.TOO_MANY_REQUESTS

        async def spent() -> bool:
            s = await _status(api, namespace)
            return (s.get("currentHealthy"), s.get("disruptionsAllowed")) == (2, 0)

        await wait_for(spent, timeout=10, what="the controller to count the eviction")
