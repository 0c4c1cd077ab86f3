"""Graceful termination by a real kubelet of real processes (SPEC GT4–GT10, GT12, PS1).

Each container is `signal_recorder.py`: it appends the signals it receives with their
times to a file, and a witness appends when it died, so the tests measure SIGTERM and
SIGKILL times from the process's own point of view.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from skiff.client import ApiClient
from skiff.cluster.processes import wait_grpc_healthy
from tests.integration.cluster import Cluster
from tests.integration.kubelet.conftest import (
    Node,
    condition,
    container_status,
    events_of,
    first,
    get_pod,
    killing_started,
    pod_manifest,
    recorder,
    start_kubelet,
    stop_kubelet,
    wait_file,
    wait_gone,
    wait_phase,
    wait_until,
)
from tests.integration.waiting import recorded


def _sleep_hook(seconds: float) -> dict[str, object]:
    return {"preStop": {"exec": {"command": ["sleep", str(seconds)]}}}


async def _run(api: ApiClient, namespace: str, node: Node, path: Path, *, grace: int,
               lifecycle: dict[str, object] | None = None, flags: tuple[str, ...] = (),
               name: str = "p") -> None:
    container: dict[str, object] = {"name": "main", "command": recorder(path, *flags)}
    if lifecycle:
        container["lifecycle"] = lifecycle
    await api.create(pod_manifest(name, namespace, node.name, [container], grace=grace))
    await wait_phase(api, namespace, name, "Running")
    await wait_file(path, "start")


async def test_gt5_prestop_time_is_subtracted_from_the_period(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path) -> None:
    path = tmp_path / "signals"
    await _run(api, namespace, node, path, grace=5, lifecycle=_sleep_hook(3))
    await api.delete("pods", "p", namespace)
    t0 = await killing_started(api, namespace)
    sigterm = await wait_file(path, "SIGTERM") - t0
    dead = await wait_file(path, "dead") - t0
    # Lower bounds are the rule; upper ones allow a loaded machine's latency, but stay
    # below what a period restarted after preStop would give (SIGKILL at 3 + 5 s).
    assert 2.9 <= sigterm <= 4.9, f"SIGTERM after {sigterm:.2f}s, expected ~3s (after preStop)"
    assert 4.9 <= dead <= 7.5, f"SIGKILL after {dead:.2f}s, expected ~5s (the whole period)"
    await wait_gone(api, namespace, "p")


async def test_gt5_hanging_prestop_does_not_block_termination(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path) -> None:
    path = tmp_path / "signals"
    await _run(api, namespace, node, path, grace=6, lifecycle=_sleep_hook(1000))
    await api.delete("pods", "p", namespace)
    t0 = await killing_started(api, namespace)
    sigterm = await wait_file(path, "SIGTERM") - t0
    dead = await wait_file(path, "dead") - t0
    # The hook is abandoned when the period ends; the container still gets 2 s (GT5/GT6),
    # not the whole 6 s period again.
    assert 5.9 <= sigterm <= 7.9, f"SIGTERM after {sigterm:.2f}s"
    assert 1.9 <= dead - sigterm <= 4.5, f"SIGKILL {dead - sigterm:.2f}s after SIGTERM"
    await wait_gone(api, namespace, "p")
    assert await recorded(api, namespace, reason="FailedPreStopHook", name="p")


async def test_gt6_stop_signal_gets_at_least_two_seconds_before_sigkill(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path) -> None:
    path = tmp_path / "signals"
    # preStop takes 4 of the 5 s: 1 s would be left, the minimum of 2 s applies instead.
    await _run(api, namespace, node, path, grace=5,
               lifecycle={**_sleep_hook(4), "stopSignal": "SIGUSR1"})
    await api.delete("pods", "p", namespace)
    t0 = await killing_started(api, namespace)
    stop = await wait_file(path, "SIGUSR1") - t0  # the configured stop signal, not SIGTERM
    dead = await wait_file(path, "dead") - t0
    assert 3.9 <= stop <= 6.0, f"stop signal after {stop:.2f}s"
    # The point: 2 s, not the 1 s left of the period (and not the whole period, 5 s, again).
    assert 1.9 <= dead - stop <= 4.0, f"SIGKILL {dead - stop:.2f}s after the stop signal"
    assert first(path, "SIGTERM") is None


async def test_gt4_deletion_grace_period_replaces_the_spec_period(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path) -> None:
    path = tmp_path / "signals"
    await _run(api, namespace, node, path, grace=30)
    await api.delete("pods", "p", namespace, grace_period_seconds=3)
    t0 = await killing_started(api, namespace)
    sigterm = await wait_file(path, "SIGTERM") - t0
    dead = await wait_file(path, "dead") - t0
    assert sigterm <= 3.0, f"SIGTERM {sigterm:.2f}s after the kubelet began killing"
    assert 2.4 <= dead - sigterm <= 15.0, (
        f"SIGKILL {dead - sigterm:.2f}s after SIGTERM, expected the DELETE's 3 s, not 30 s")


async def test_gt4_liveness_failure_uses_the_probes_own_grace_period(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path) -> None:
    path = tmp_path / "signals"
    await api.create(pod_manifest("p", namespace, node.name, [{
        "name": "main", "command": recorder(path),
        "livenessProbe": {"exec": {"command": ["test", "-f", str(tmp_path / "healthy")]},
                          "initialDelaySeconds": 1, "periodSeconds": 1,
                          "failureThreshold": 1, "terminationGracePeriodSeconds": 3}}],
        grace=30))
    sigterm = await wait_file(path, "SIGTERM")
    dead = await wait_file(path, "dead")
    assert 2.8 <= dead - sigterm <= 15.0, (
        f"killed {dead - sigterm:.2f}s after SIGTERM; expected the probe's 3 s, not 30 s")

    async def restarted() -> bool:
        pod = await get_pod(api, namespace, "p")
        return pod is not None and container_status(pod, "main")["restartCount"] >= 1

    await wait_until(restarted, what="the container to be restarted")
    assert await recorded(api, namespace, reason="Unhealthy", name="p")
    await api.delete("pods", "p", namespace, grace_period_seconds=1)


async def test_gt9_sidecars_stop_after_main_containers_in_reverse_order(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path) -> None:
    files = {n: tmp_path / n for n in ("s1", "s2", "main")}
    await api.create(pod_manifest("p", namespace, node.name, [{
        "name": "main", "command": recorder(files["main"], "--exit-on-term"),
        "lifecycle": _sleep_hook(1)}], grace=10, initContainers=[
        {"name": n, "restartPolicy": "Always",
         "command": recorder(files[n], "--exit-on-term")} for n in ("s1", "s2")]))
    await wait_phase(api, namespace, "p", "Running")
    for path in files.values():
        await wait_file(path, "start")
    await api.delete("pods", "p", namespace)
    await wait_gone(api, namespace, "p")
    term = {n: first(p, "SIGTERM") for n, p in files.items()}
    # `exiting` is each process's own last line, written just before it exits: the kubelet
    # cannot have seen an exit earlier (the witness's `dead` may be stamped late under load).
    exiting = {n: first(p, "exiting") for n, p in files.items()}
    assert all(term.values()) and all(exiting.values()), (term, exiting)
    stopped = {n: t for n, t in term.items() if t is not None}  # every one, as asserted
    exited = {n: t for n, t in exiting.items() if t is not None}
    assert stopped["s2"] >= exited["main"], "a sidecar was stopped before the main container exited"
    assert stopped["s1"] >= exited["s2"], "sidecars were not stopped in reverse order"


async def test_gt10_terminal_phase_is_written_then_the_pod_is_deleted(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path) -> None:
    path = tmp_path / "signals"
    # It takes 2 s to exit after SIGTERM: a kubelet deleting the object without waiting
    # for the process would leave it alive when the object is gone.
    await _run(api, namespace, node, path, grace=5, flags=("--exit-on-term", "--linger", "2"))
    pid = first(path, "pid")
    assert pid is not None
    await api.delete("pods", "p", namespace)
    await wait_gone(api, namespace, "p")
    assert not Path(f"/proc/{int(pid)}").exists()  # PS1: processes gone before the object
    versions = await api.history("pods", "p", namespace)
    assert versions[-1]["type"] == "DELETED"
    last = versions[-2]["object"]
    assert last["metadata"]["deletionTimestamp"]
    assert last["status"]["phase"] == "Succeeded"  # exited 0 on SIGTERM
    phases = [v["object"]["status"].get("phase") for v in versions[:-1]]
    assert "Unknown" not in phases


async def test_gt12_readiness_is_probed_while_the_pod_terminates(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path) -> None:
    path, ready_file = tmp_path / "signals", tmp_path / "ready"
    ready_file.write_text("yes")
    await api.create(pod_manifest("p", namespace, node.name, [{
        "name": "main", "command": recorder(path),
        "readinessProbe": {"exec": {"command": ["test", "-f", str(ready_file)]},
                           "periodSeconds": 1, "failureThreshold": 1}}], grace=20))

    async def ready_is(value: str) -> bool:
        pod = await get_pod(api, namespace, "p")
        return pod is not None and condition(pod, "Ready") == value

    await wait_until(lambda: ready_is("True"), what="Ready")
    await wait_file(path, "start")  # Ready comes from the file; the recorder may still start
    await api.delete("pods", "p", namespace)
    await wait_file(path, "SIGTERM")
    ready_file.unlink()
    await wait_until(lambda: ready_is("False"), timeout=8, what="Ready=False while terminating")
    ready_file.write_text("yes")
    await wait_until(lambda: ready_is("True"), timeout=8, what="Ready=True while terminating")
    pod = await get_pod(api, namespace, "p")
    assert pod is not None and pod["metadata"]["deletionTimestamp"]
    await wait_gone(api, namespace, "p", timeout=40)


async def test_gt8_kubelet_killed_during_termination_restarts_the_full_period(
        api: ApiClient, namespace: str, shared_cluster: Cluster, tmp_path: Path) -> None:
    node = start_kubelet(shared_cluster, tmp_path)
    try:
        path = tmp_path / "signals"
        await _run(api, namespace, node, path, grace=5)
        t0 = time.time()
        await api.delete("pods", "p", namespace)
        await wait_file(path, "SIGTERM")
        await wait_until(lambda: _sleep_true(1.5), what="termination in progress")
        node.process.kill()  # SIGKILL the kubelet 1.5 s into a 5 s period
        restarted = time.time()
        node.process.start()
        wait_grpc_healthy(node.process, node.health_target)
        dead = await wait_file(path, "dead", timeout=15)
        terms = [t for name, t in events_of(path) if name == "SIGTERM"]
        starts = [t for name, t in events_of(path) if name == "start"]
        assert len(starts) == 1, "the container was started again instead of re-adopted"
        assert len(terms) == 2, f"expected a second SIGTERM from the new kubelet: {terms}"
        assert terms[1] >= restarted
        assert 4.8 <= dead - terms[1] <= 6.5, (
            f"SIGKILL {dead - terms[1]:.2f}s after the new SIGTERM; expected the full 5 s")
        assert dead - t0 >= 6.0, "the first period was not restarted"
        await wait_gone(api, namespace, "p")
    finally:
        await stop_kubelet(node)


async def _sleep_true(seconds: float) -> bool:
    await asyncio.sleep(seconds)
    return True


async def test_gt8_restarted_kubelet_kills_processes_of_pods_force_deleted_meanwhile(
        api: ApiClient, namespace: str, shared_cluster: Cluster, tmp_path: Path) -> None:
    node = start_kubelet(shared_cluster, tmp_path)
    try:
        path = tmp_path / "signals"
        await _run(api, namespace, node, path, grace=30)
        node.process.kill()
        await api.delete("pods", "p", namespace, grace_period_seconds=0)
        await asyncio.sleep(0.5)
        assert first(path, "dead") is None  # nobody on the node knows yet
        restarted = time.time()
        node.process.start()
        wait_grpc_healthy(node.process, node.health_target)
        dead = await wait_file(path, "dead", timeout=10)
        # Promptly after the kubelet is back (its start-up included), not after 30 s.
        assert dead - restarted <= 10.0, "the orphaned process was not killed promptly"

        async def cleaned_up() -> bool:
            return not list((node.root / "pods").glob("*/state.json"))

        await wait_until(cleaned_up, timeout=5, what="the orphan's pod directory removed")
    finally:
        await stop_kubelet(node)
