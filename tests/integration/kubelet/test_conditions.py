"""SPEC LC5 and LC4 with a real kubelet: pod conditions change lastTransitionTime only when
their status changes; init containers run in order and sidecars start in order and keep
running."""

from __future__ import annotations

import asyncio
from pathlib import Path

from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.kubelet.conftest import (
    Node,
    condition,
    container_status,
    get_pod,
    pod_manifest,
    wait_phase,
    wait_until,
)

CONDITIONS = ("PodScheduled", "PodReadyToStartContainers", "Initialized", "ContainersReady",
              "Ready")


def _conditions(pod: Obj) -> dict[str, Obj]:
    return {c["type"]: c for c in pod["status"].get("conditions") or []}


async def test_lc5_condition_transition_time_changes_only_on_a_transition(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path) -> None:
    ready_file = tmp_path / "ready"
    ready_file.write_text("yes")
    await api.create(pod_manifest("p", namespace, node.name, [{
        "name": "main", "command": ["sleep", "3600"],
        "readinessProbe": {"exec": {"command": ["test", "-f", str(ready_file)]},
                           "periodSeconds": 1, "failureThreshold": 1}}]))

    async def ready_is(value: str) -> Obj | None:
        pod = await get_pod(api, namespace, "p")
        return pod if pod and condition(pod, "Ready") == value else None

    before = _conditions(await wait_until(lambda: ready_is("True"), timeout=30,
                                          what="Ready=True"))
    # (PodScheduled comes from the scheduler's binding; this pod names its node itself.)
    assert set(before) >= set(CONDITIONS) - {"PodScheduled"}, before
    assert all(c["status"] == "True" for c in before.values()), before
    await asyncio.sleep(1.5)  # lastTransitionTime has one-second resolution

    ready_file.unlink()
    after = _conditions(await wait_until(lambda: ready_is("False"), timeout=30,
                                         what="Ready=False"))
    # Ready and ContainersReady transitioned: new times, a reason, in order.
    for kind in ("Ready", "ContainersReady"):
        assert after[kind]["status"] == "False"
        assert after[kind]["lastTransitionTime"] > before[kind]["lastTransitionTime"], kind
        assert after[kind].get("reason") == "ContainersNotReady"
    # The status was rewritten, but these did not change: their times stay.
    for kind in set(before) - {"Ready", "ContainersReady"}:
        assert after[kind] == before[kind], kind

    await asyncio.sleep(2.5)  # a few more probe periods and status writes, still not ready
    still = _conditions(await get_pod(api, namespace, "p") or {"status": {}})
    for kind in ("Ready", "ContainersReady"):
        assert still[kind]["status"] == "False"
        assert still[kind]["lastTransitionTime"] == after[kind]["lastTransitionTime"], kind
    await api.delete("pods", "p", namespace, grace_period_seconds=1)


def _stamp(log: Path, name: str, then: str) -> list[str]:
    """A container that appends `name <time>` to `log`, then runs `then` (a shell line)."""
    return ["sh", "-c", f'echo "{name} $(date +%s.%N)" >> {log}; {then}']


async def test_lc4_init_containers_in_order_then_sidecars_in_order_and_they_keep_running(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path) -> None:
    log = tmp_path / "starts"

    def sidecar(name: str) -> Obj:
        # Started (LC4's gate for what follows) only once its startupProbe sees the marker
        # it writes after its stamp, so the stamps' order is the kubelet's, not a race.
        marker = tmp_path / f"{name}-up"
        return {"name": name, "restartPolicy": "Always",
                "command": _stamp(log, name, f"sleep 0.3; touch {marker}; exec sleep 3600"),
                "startupProbe": {"exec": {"command": ["test", "-f", str(marker)]},
                                 "periodSeconds": 1, "failureThreshold": 30}}

    init = [
        {"name": "init-1", "command": _stamp(log, "init-1", "sleep 0.3")},
        sidecar("side-1"),
        {"name": "init-2", "command": _stamp(log, "init-2", "true")},
        sidecar("side-2"),
    ]
    await api.create(pod_manifest("p", namespace, node.name, [
        {"name": "app", "command": _stamp(log, "app", "exec sleep 3600")}],
        initContainers=init))
    pod = await wait_phase(api, namespace, "p", "Running", timeout=60)

    async def app_started() -> bool:
        return log.exists() and "app" in log.read_text().split()

    await wait_until(app_started, timeout=30, what="the app container to start")
    order = [line.split()[0] for line in log.read_text().splitlines()]
    assert order == ["init-1", "side-1", "init-2", "side-2", "app"], order
    await asyncio.sleep(1.0)
    pod = await get_pod(api, namespace, "p") or {}
    statuses = {s["name"]: s for s in pod["status"].get("initContainerStatuses") or []}
    for name in ("init-1", "init-2"):
        assert statuses[name]["state"]["terminated"]["exitCode"] == 0, name
        assert statuses[name]["restartCount"] == 0, f"{name} ran again after it succeeded"
    for name in ("side-1", "side-2"):
        assert "running" in statuses[name]["state"], (name, statuses[name])
        assert statuses[name]["restartCount"] == 0, name
    assert "running" in container_status(pod, "app")["state"]
    await api.delete("pods", "p", namespace, grace_period_seconds=1)
