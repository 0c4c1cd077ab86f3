"""PS2 and Kubernetes' TaintNodesByCondition with the real node lifecycle controller: a
node condition (here MemoryPressure) or `spec.unschedulable` puts its NoSchedule taint on
the node, and taking it back removes the taint."""

from __future__ import annotations

from typing import Any

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.controller_manager.conftest import StartControllerManager
from tests.integration.controller_manager.kubelet_double import KubeletDouble, wait_for

MEMORY = "node.kubernetes.io/memory-pressure"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"


async def no_schedule_keys(api: ApiClient, node: str) -> set[str]:
    got = await api.get("nodes", node)
    return {t["key"] for t in (got.get("spec") or {}).get("taints") or []
            if t.get("effect") == "NoSchedule"}


async def set_unschedulable(api: ApiClient, name: str, value: bool) -> None:
    """`kubectl cordon` / `uncordon`, re-reading on Conflict (the controller writes the
    node's taints concurrently)."""
    for _ in range(10):
        node = await api.get("nodes", name)
        node["spec"]["unschedulable"] = value
        try:
            await api.update(node)
            return
        except ApiError as err:
            if err.reason != Reason.CONFLICT:
                raise
    raise AssertionError(f"node {name}: conflicts kept coming")


async def test_ps2_conditions_and_unschedulable_taint_the_node_no_schedule(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager) -> None:
    controller_manager("--controllers", "nodelifecycle")
    async with KubeletDouble(api, f"ct-{namespace}") as kubelet:
        def pressure(status: str) -> Any:
            def mutate(node: Obj) -> None:
                node["status"]["conditions"] = [
                    c for c in node["status"].get("conditions", [])
                    if c.get("type") != "MemoryPressure"] + [
                    {"type": "MemoryPressure", "status": status}]
            return mutate

        await kubelet._write_status("nodes", kubelet.name, None, pressure("True"))

        async def tainted(keys: set[str]) -> bool:
            return await no_schedule_keys(api, kubelet.name) == keys

        await wait_for(lambda: tainted({MEMORY}), timeout=10, what="memory-pressure taint")
        await set_unschedulable(api, kubelet.name, True)
        await wait_for(lambda: tainted({MEMORY, UNSCHEDULABLE}), timeout=10,
                       what="unschedulable taint")

        await kubelet._write_status("nodes", kubelet.name, None, pressure("False"))
        await set_unschedulable(api, kubelet.name, False)
        await wait_for(lambda: tainted(set()), timeout=10, what="the taints removed")
