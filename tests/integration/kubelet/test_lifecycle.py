"""Restarts with CrashLoopBackOff (LC3), probes of every handler type (LC7) and
readinessGates (LC6), with a real kubelet running real processes."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.cluster.processes import free_port
from tests.integration.kubelet.conftest import (
    Node,
    condition,
    container_status,
    get_pod,
    pod_manifest,
    wait_phase,
    wait_until,
)

TARGET = str(Path(__file__).with_name("probe_target.py"))


async def test_lc3_restart_delays_double_and_cap_with_crash_loop_back_off(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    # The kubelet under test runs with --container-restart-backoff-base 0.5s, -max 2s.
    await api.create(pod_manifest("p", namespace, node.name, [{
        "name": "main", "command": ["sh", "-c", f"date +%s.%N >> {starts}; exit 1"]}]))
    reasons: set[str] = set()

    async def six_starts() -> bool:
        pod = await get_pod(api, namespace, "p")
        if pod and pod.get("status", {}).get("containerStatuses"):
            state = container_status(pod, "main")["state"]
            reasons.add(state.get("waiting", {}).get("reason", ""))
        return starts.exists() and len(starts.read_text().split()) >= 6

    await wait_until(six_starts, timeout=40, interval=0.02, what="six starts")
    times = [float(t) for t in starts.read_text().split()]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)][:5]
    # Kubernetes: the first restart is immediate, then base, doubling, capped (0, .5, 1, 2, 2).
    expected = [0.0, 0.5, 1.0, 2.0, 2.0]
    # Never earlier than the backoff (the rule); later only by the time to fork and run
    # `sh` on a loaded machine, bounded below the next doubling so the cap still shows.
    for gap, want in zip(gaps, expected, strict=True):
        assert want <= gap <= want + 1.5, f"restart gaps {gaps}, expected ~{expected}"
    assert "CrashLoopBackOff" in reasons
    await wait_phase(api, namespace, "p", "Running")

    async def five_restarts_reported() -> Obj | None:
        # The sixth start is on disk before the kubelet's status write that counts it.
        pod = await get_pod(api, namespace, "p")
        cs = container_status(pod, "main") if pod else None
        return cs if cs and cs.get("restartCount", 0) >= 5 else None

    cs = await wait_until(five_restarts_reported, timeout=20, what="restartCount 5 reported")
    assert cs["lastState"]["terminated"]["exitCode"] == 1
    await api.delete("pods", "p", namespace, grace_period_seconds=1)


async def test_lc3_on_failure_does_not_restart_a_successful_container(
        api: ApiClient, namespace: str, node: Node) -> None:
    await api.create(pod_manifest("p", namespace, node.name, [
        {"name": "ok", "command": ["true"]}], restartPolicy="OnFailure"))
    pod = await wait_phase(api, namespace, "p", "Succeeded")
    assert container_status(pod, "ok")["restartCount"] == 0


async def test_lc7_probes_of_every_handler_type(api: ApiClient, namespace: str,
                                                node: Node) -> None:
    http, rpc = free_port(), free_port()
    probes: dict[str, Obj] = {
        "exec": {"exec": {"command": ["true"]}},
        "http": {"httpGet": {"path": "/healthz", "port": http}},
        "tcp": {"tcpSocket": {"port": http}},
        "grpc": {"grpc": {"port": rpc}},
        "http-500": {"httpGet": {"path": "/fail", "port": http}},
    }
    containers: list[Obj] = [{"name": "server", "command": [
        sys.executable, TARGET, "--http", str(http), "--grpc", str(rpc)]}]
    for name, handler in probes.items():
        containers.append({"name": name, "command": ["sleep", "3600"],
                           "readinessProbe": {**handler, "periodSeconds": 1}})
    await api.create(pod_manifest("p", namespace, node.name, containers))

    async def probed() -> dict[str, bool] | None:
        pod = await get_pod(api, namespace, "p")
        if not pod or len(pod.get("status", {}).get("containerStatuses") or []) < 6:
            return None
        ready = {n: container_status(pod, n)["ready"] for n in probes}
        return ready if all(ready[n] for n in ("exec", "http", "tcp", "grpc")) else None

    ready = await wait_until(probed, timeout=20, what="exec, httpGet, tcpSocket, grpc ready")
    assert ready["http-500"] is False
    pod = await get_pod(api, namespace, "p")
    assert pod is not None and condition(pod, "Ready") == "False"
    assert condition(pod, "ContainersReady") == "False"
    await api.delete("pods", "p", namespace, grace_period_seconds=1)


async def test_lc7_startup_probe_gates_liveness(api: ApiClient, namespace: str, node: Node,
                                               tmp_path: Path) -> None:
    started = tmp_path / "started"
    await api.create(pod_manifest("p", namespace, node.name, [{
        "name": "main", "command": ["sleep", "3600"],
        "startupProbe": {"exec": {"command": ["test", "-f", str(started)]},
                         "periodSeconds": 1, "failureThreshold": 30},
        # would kill the container at once if it ran before startup succeeded
        "livenessProbe": {"exec": {"command": ["test", "-f", str(started)]},
                          "periodSeconds": 1, "failureThreshold": 1}}]))
    await wait_phase(api, namespace, "p", "Running")
    await wait_until(_true_after(2.5), what="some probe periods")
    pod = await get_pod(api, namespace, "p")
    assert pod is not None
    cs = container_status(pod, "main")
    assert cs["restartCount"] == 0 and cs["started"] is False and cs["ready"] is False
    started.write_text("")

    async def is_ready() -> bool:
        pod = await get_pod(api, namespace, "p")
        return pod is not None and container_status(pod, "main")["ready"] is True

    await wait_until(is_ready, what="started and ready")
    await api.delete("pods", "p", namespace, grace_period_seconds=1)


async def test_lc6_readiness_gates_set_through_the_status_subresource(
        api: ApiClient, namespace: str, node: Node) -> None:
    gate = "example.com/load-balancer"
    await api.create(pod_manifest("p", namespace, node.name, [
        {"name": "main", "command": ["sleep", "3600"]}],
        readinessGates=[{"conditionType": gate}]))

    async def containers_ready() -> dict[str, object] | None:
        pod = await get_pod(api, namespace, "p")
        return pod if pod and condition(pod, "ContainersReady") == "True" else None

    pod = await wait_until(containers_ready, what="ContainersReady")
    assert condition(pod, "Ready") == "False"  # a missing gate condition counts as False
    pod["status"]["conditions"].append({"type": gate, "status": "True"})
    await api.update_status(pod)

    async def ready() -> bool:
        pod = await get_pod(api, namespace, "p")
        return pod is not None and condition(pod, "Ready") == "True"

    await wait_until(ready, what="Ready once the gate is True")
    pod = await get_pod(api, namespace, "p")
    assert pod is not None and condition(pod, gate) == "True"  # the kubelet keeps it
    await api.delete("pods", "p", namespace, grace_period_seconds=1)


def _true_after(seconds: float) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        await asyncio.sleep(seconds)
        return True

    return check
