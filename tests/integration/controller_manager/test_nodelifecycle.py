"""SPEC PS1, PS2, PS5 with real processes: a node whose kubelet stops renewing its Lease.

The test plays the kubelet (see kubelet_double.py): it stops renewing to simulate a kubelet
that is cut off or SIGSTOPped, and later comes back and finishes the termination itself.
"""

from __future__ import annotations

import asyncio

from skiff.api import get_condition
from skiff.client import ApiClient
from skiff.clock import parse_rfc3339
from tests.integration.controller_manager.conftest import StartControllerManager
from tests.integration.controller_manager.kubelet_double import (
    KubeletDouble,
    get_or_none,
    recorded,
    wait_for,
)
from tests.integration.objects import pod

GRACE, MONITOR = 3.0, 0.5
UNREACHABLE = "node.kubernetes.io/unreachable"


def _tolerate_unreachable(seconds: int | None) -> list[dict[str, object]]:
    toleration: dict[str, object] = {"key": UNREACHABLE, "operator": "Exists",
                                     "effect": "NoExecute"}
    if seconds is not None:
        toleration["tolerationSeconds"] = seconds
    return [toleration]


async def test_ps2_silent_node_goes_unknown_tainted_and_pods_evicted_gracefully(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager) -> None:
    async with KubeletDouble(api, f"nl-{namespace}") as kubelet:
        await api.create(pod("evicted", namespace, tolerations=_tolerate_unreachable(2)))
        await api.create(pod("tolerant", namespace, tolerations=_tolerate_unreachable(None)))
        for name in ("evicted", "tolerant"):
            await kubelet.run_pod(namespace, name)
        controller_manager()  # every controller: none of them may force delete
        await asyncio.sleep(GRACE + 1)
        node = await api.get("nodes", kubelet.name)
        assert (get_condition(node, "Ready") or {}).get("status") == "True"

        await kubelet.cut()

        async def unknown() -> dict[str, object] | None:
            n = await api.get("nodes", kubelet.name)
            ready = get_condition(n, "Ready") or {}
            return n if ready.get("status") == "Unknown" else None

        node = await wait_for(unknown, timeout=GRACE + MONITOR + 15, interval=0.1,
                              what="NodeReady Unknown")
        ready = get_condition(node, "Ready") or {}
        # Timed from the system's own records: the Lease's last renewTime to the condition's
        # lastTransitionTime (one-second resolution): after the grace, within a few periods.
        lease = await api.get("leases", kubelet.name, "kube-node-lease")
        silent = (parse_rfc3339(ready["lastTransitionTime"])
                  - parse_rfc3339(lease["spec"]["renewTime"]))
        assert GRACE - 1 <= silent <= GRACE + 4 * MONITOR + 2, (
            f"NodeReady went Unknown {silent:.1f}s after the last renewal")
        assert ready["reason"] == "NodeStatusUnknown"
        assert ready["message"] == "Kubelet stopped posting node status."

        async def tainted() -> list[dict[str, object]] | None:
            n = await api.get("nodes", kubelet.name)
            taints = n["spec"].get("taints") or []
            effects = {t["effect"] for t in taints if t["key"] == UNREACHABLE}
            return taints if effects == {"NoSchedule", "NoExecute"} else None

        taints = await wait_for(tainted, timeout=10, what="the unreachable taints")
        no_execute = next(t for t in taints if t["effect"] == "NoExecute")
        added = parse_rfc3339(str(no_execute["timeAdded"]))

        async def not_ready() -> bool:
            p = await api.get("pods", "tolerant", namespace)
            return (get_condition(p, "Ready") or {}).get("status") == "False"

        await wait_for(not_ready, timeout=10, what="pods on the node to be marked not Ready")

        async def terminating() -> dict[str, object] | None:
            p = await api.get("pods", "evicted", namespace)
            return p if p["metadata"].get("deletionTimestamp") else None

        evicted = await wait_for(terminating, timeout=20, what="the taint eviction")
        # Evicted no earlier than its tolerationSeconds (2) after the taint, as recorded:
        # the deletion started at deletionTimestamp - period (both one-second resolution).
        deleted_at = (parse_rfc3339(evicted["metadata"]["deletionTimestamp"])
                      - evicted["metadata"]["deletionGracePeriodSeconds"])
        assert deleted_at - added >= 2 - 1
        cond = get_condition(evicted, "DisruptionTarget") or {}
        assert cond.get("reason") == "DeletionByTaintManager"
        assert evicted["metadata"]["deletionGracePeriodSeconds"] == 30  # graceful, PS5
        assert await recorded(api, namespace, reason="TaintManagerEviction", name="evicted")
        assert await recorded(api, "default", reason="NodeNotReady", name=kubelet.name)

        # While the kubelet is away nobody force deletes: the object stays Terminating.
        await asyncio.sleep(3)
        still = await api.get("pods", "evicted", namespace)
        assert still["metadata"]["uid"] == evicted["metadata"]["uid"]
        tolerant = await api.get("pods", "tolerant", namespace)
        assert not tolerant["metadata"].get("deletionTimestamp")

        # The kubelet comes back: Ready again, taints lifted, and it finishes termination.
        kubelet.resume()
        await kubelet.report_ready()

        async def healed() -> bool:
            n = await api.get("nodes", kubelet.name)
            return not any(t["key"] == UNREACHABLE for t in n["spec"].get("taints") or [])

        await wait_for(healed, timeout=5, what="the taints to be lifted")
        await kubelet.finish_termination(namespace, "evicted")
        assert await get_or_none(api, "pods", "evicted", namespace) is None
        assert await get_or_none(api, "pods", "tolerant", namespace) is not None


async def test_lc1_pod_on_an_unreachable_node_keeps_its_phase_and_is_marked_not_ready(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager) -> None:
    """Kubernetes 1.32: nothing rewrites the phase of a pod whose node went silent (the node
    lifecycle controller only marks it not Ready); it never goes back to Pending, and only
    its kubelet could move it on."""
    async with KubeletDouble(api, f"lc1-{namespace}") as kubelet:
        await api.create(pod("away", namespace, tolerations=_tolerate_unreachable(None)))
        await kubelet.run_pod(namespace, "away")
        controller_manager()
        await kubelet.cut()

        async def marked_not_ready() -> bool:
            p = await api.get("pods", "away", namespace)
            return (get_condition(p, "Ready") or {}).get("status") == "False"

        await wait_for(marked_not_ready, timeout=GRACE + MONITOR + 15,
                       what="the pod on the silent node to be marked not Ready")
        await asyncio.sleep(2 * GRACE)  # several more monitor passes
        versions = [v["object"] for v in await api.history("pods", "away", namespace)
                    if v["object"]]
        phases = [v["status"].get("phase") for v in versions]
        assert phases[-1] == "Running", phases
        running_from = phases.index("Running")
        assert all(p == "Running" for p in phases[running_from:]), phases
        node = await api.get("nodes", kubelet.name)
        assert (get_condition(node, "Ready") or {}).get("status") == "Unknown"
