"""Kubelet behaviours checked against Kubernetes 1.32 with a real kubelet and real processes:
lastState after every crash (LC2), a shortened grace period during termination (GT7),
force deletion (GT3), probe timing (LC7), activeDeadlineSeconds (LC1) and a container
lost across a kubelet restart while its volume is not attached (SC1).

Times are measured from what the processes themselves recorded (signal_recorder.py, date
written by the container) or from the versions etcd kept, never from tight wall-clock
windows.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.cluster.processes import wait_grpc_healthy
from tests.integration.cluster import Cluster
from tests.integration.kubelet.conftest import (
    Node,
    container_status,
    events_of,
    first,
    get_pod,
    pod_manifest,
    recorder,
    start_kubelet,
    stop_kubelet,
    wait_file,
    wait_gone,
    wait_phase,
    wait_until,
)


def _times(path: Path) -> list[float]:
    try:
        return [float(t) for t in path.read_text().split()]
    except FileNotFoundError:
        return []


async def _statuses(api: ApiClient, namespace: str, name: str, container: str) -> list[Obj]:
    """Every container status of `container` that etcd still holds, oldest first."""
    out = []
    for version in await api.history("pods", name, namespace):
        obj = version.get("object") or {}
        for cs in (obj.get("status") or {}).get("containerStatuses") or []:
            if cs.get("name") == container:
                out.append(cs)
    return out


async def test_lc2_last_state_holds_the_latest_termination(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    script = (f'n=$(cat {counter} 2>/dev/null | wc -l); echo run >> {counter}; '
              'case $n in 0) exit 83;; 1) exit 85;; 2) exit 97;; *) exec sleep 3600;; esac')
    await api.create(pod_manifest("p", namespace, node.name, [
        {"name": "main", "command": ["sh", "-c", script]}]))

    async def fourth_run() -> Obj | None:
        pod = await get_pod(api, namespace, "p")
        if not pod or not pod.get("status", {}).get("containerStatuses"):
            return None
        cs = container_status(pod, "main")
        return cs if cs["restartCount"] >= 3 and cs["state"].get("running") else None

    cs = await wait_until(fourth_run, timeout=30, what="the fourth run")
    last = cs["lastState"]["terminated"]
    assert last["exitCode"] == 97, f"lastState is not the latest termination: {last}"
    assert last["reason"] == "Error"

    history = await _statuses(api, namespace, "p", "main")
    terminated = [h["state"]["terminated"] for h in history if h["state"].get("terminated")]
    codes = [t["exitCode"] for t in terminated]
    # Every crash was published as state.terminated before the restart replaced it.
    for code in (83, 85, 97):
        assert code in codes, f"state.terminated {code} never published: {codes}"
    for t in terminated:
        assert t["reason"] == "Error" and t.get("startedAt") and t.get("finishedAt")
    by_code = {t["exitCode"]: t for t in terminated}
    assert last["finishedAt"] == by_code[97]["finishedAt"]
    # lastState followed the crashes in order, never stuck at the first one.
    seen: list[int] = []
    for h in history:
        code = (h.get("lastState") or {}).get("terminated", {}).get("exitCode")
        if code is not None and (not seen or seen[-1] != code):
            seen.append(code)
    assert seen == [83, 85, 97], f"lastState sequence {seen}"
    # During a back-off the container waits in CrashLoopBackOff with the latest crash.
    assert any(h["state"].get("waiting", {}).get("reason") == "CrashLoopBackOff"
               and h["lastState"]["terminated"]["exitCode"] in (85, 97) for h in history)
    await api.delete("pods", "p", namespace, grace_period_seconds=1)


async def test_gt7_a_shorter_grace_period_during_termination_restarts_the_kill(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path) -> None:
    path = tmp_path / "signals"
    await api.create(pod_manifest("p", namespace, node.name, [
        {"name": "main", "command": recorder(path)}], grace=60))
    await wait_phase(api, namespace, "p", "Running")
    await wait_file(path, "start")
    await api.delete("pods", "p", namespace)  # 60 s
    first_term = await wait_file(path, "SIGTERM")
    now = time.time()
    await api.delete("pods", "p", namespace, grace_period_seconds=1)  # kubectl delete --now
    dead = await wait_file(path, "dead", timeout=20)
    terms = [t for name, t in events_of(path) if name == "SIGTERM"]
    assert len(terms) == 2, f"the kill was not restarted with the new period: {terms}"
    assert terms[1] >= now
    # The new period is 1 s; the 2 s minimum applies last (GT6): killed ~2 s after the
    # second stop signal, not 60 s after the first.
    assert dead - terms[1] <= 4.0, f"killed {dead - terms[1]:.2f}s after the 2nd SIGTERM"
    assert dead - first_term < 30
    await wait_gone(api, namespace, "p")
    events = (await api.list("events", namespace))["items"]
    assert any(e["reason"] == "Killing" and "shorter grace period" in e["message"]
               for e in events)


async def test_gt3_force_deleted_pod_is_stopped_with_its_spec_period_and_prestop(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path) -> None:
    """Kubernetes 1.32's kubelet sees a force-deleted pod as a kill with no usable period
    (0 counts as none: calculateEffectiveGracePeriod), so it runs preStop and allows the
    spec's terminationGracePeriodSeconds (kubernetes#115819, #120449, #123408)."""
    path = tmp_path / "signals"
    hook = tmp_path / "prestop"
    await api.create(pod_manifest("p", namespace, node.name, [{
        "name": "main", "command": recorder(path),
        "lifecycle": {"preStop": {"exec": {"command": [
            "sh", "-c", f"date +%s.%N >> {hook}; sleep 1"]}}}}], grace=4))
    await wait_phase(api, namespace, "p", "Running")
    await wait_file(path, "start")
    result = await api.delete("pods", "p", namespace, grace_period_seconds=0)
    assert result["deleted"] is True  # GT3: gone from the API at once
    dead = await wait_file(path, "dead", timeout=20)
    sigterm = first(path, "SIGTERM")
    hooks = _times(hook)
    assert hooks, "preStop did not run for the force-deleted pod"
    assert sigterm is not None and sigterm >= hooks[0] + 0.9, "SIGTERM before preStop ended"
    # 4 s period: preStop ~1 s, then the remaining ~3 s before SIGKILL.
    assert 3.0 <= dead - hooks[0] <= 6.5, f"killed {dead - hooks[0]:.2f}s after preStop"


async def test_lc7_initial_delay_counts_from_the_container_start_and_probes_tick(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path) -> None:
    start, started, ready_runs, live_runs = (tmp_path / n for n in (
        "start", "started", "ready", "live"))
    script = f"date +%s.%N > {start}; sleep 4; touch {started}; exec sleep 3600"
    await api.create(pod_manifest("p", namespace, node.name, [{
        "name": "main", "command": ["sh", "-c", script],
        "startupProbe": {"exec": {"command": ["test", "-f", str(started)]},
                         "periodSeconds": 1, "failureThreshold": 30},
        "readinessProbe": {"exec": {"command": ["sh", "-c", f"date +%s.%N >> {ready_runs}"]},
                           "initialDelaySeconds": 6, "periodSeconds": 1},
        # A probe that takes 0.6 s of its 1 s period: ticks keep the period.
        "livenessProbe": {"exec": {"command": [
            "sh", "-c", f"date +%s.%N >> {live_runs}; sleep 0.6"]},
            "periodSeconds": 1, "timeoutSeconds": 5}}]))

    async def enough() -> bool:
        return len(_times(live_runs)) >= 7 and bool(_times(ready_runs))

    await wait_until(enough, timeout=40, what="readiness and seven liveness probes")
    t0 = _times(start)[0]
    first_ready = _times(ready_runs)[0] - t0
    # Kubernetes: initialDelaySeconds from the container's start, not from the startup
    # probe's success (~4-5 s here, so 6 s later would be >= 10 s).
    assert 5.5 <= first_ready <= 9.0, f"first readiness probe {first_ready:.2f}s after start"
    runs = _times(live_runs)
    gaps = sorted(b - a for a, b in zip(runs, runs[1:], strict=False))
    median = gaps[len(gaps) // 2]
    assert median <= 1.3, f"liveness probes every {median:.2f}s, not on 1 s ticks: {gaps}"
    pod = await wait_phase(api, namespace, "p", "Running")
    assert container_status(pod, "main")["restartCount"] == 0
    await api.delete("pods", "p", namespace, grace_period_seconds=1)


async def test_lc1_active_deadline_exceeded_fails_the_pod_and_kills_its_containers(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path) -> None:
    path = tmp_path / "signals"
    await api.create(pod_manifest("p", namespace, node.name, [
        {"name": "main", "command": recorder(path)}], grace=4, activeDeadlineSeconds=3))
    started = await wait_file(path, "start")
    pod = await wait_phase(api, namespace, "p", "Failed", timeout=20)
    assert pod["status"]["reason"] == "DeadlineExceeded"
    assert "deadline" in pod["status"]["message"]
    # Kubernetes fails the pod at once (generateAPIPodStatus), then kills its containers
    # with the pod's period (4 s here; the recorder ignores SIGTERM).
    assert first(path, "dead") is None, "Failed was published only after the kill"
    sigterm = await wait_file(path, "SIGTERM")
    dead = await wait_file(path, "dead")
    # startTime has whole seconds, so the deadline may come up to 1 s early.
    assert 1.5 <= sigterm - started <= 6.0, f"SIGTERM {sigterm - started:.2f}s after start"
    assert 3.5 <= dead - sigterm <= 6.0, f"SIGKILL {dead - sigterm:.2f}s after SIGTERM"

    async def container_terminated() -> Obj | None:
        obj = await get_pod(api, namespace, "p")
        cs = container_status(obj, "main") if obj else {}
        return obj if cs.get("state", {}).get("terminated") else None

    pod = await wait_until(container_terminated, what="the container's terminated state")
    assert pod["status"]["phase"] == "Failed"
    assert not pod["metadata"].get("deletionTimestamp")  # failed, not deleted


async def _make_claim(api: ApiClient, namespace: str, name: str) -> str:
    pvc = await api.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                            "metadata": {"name": name, "namespace": namespace},
                            "spec": {"accessModes": ["ReadWriteOnce"]}})
    return str(pvc["metadata"]["uid"])


async def _attach(api: ApiClient, volume: str, node: str) -> None:
    va = await api.create({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
                           "metadata": {"name": volume},
                           "spec": {"attacher": "skiff.io/local", "nodeName": node,
                                    "source": {"persistentVolumeName": volume}}})
    va["status"] = {"attached": True}
    await api.update_status(va)


async def test_sc1_container_waiting_for_its_volume_after_a_lost_run_is_container_creating(
        api: ApiClient, namespace: str, shared_cluster: Cluster, tmp_path: Path) -> None:
    """A fenced node's story: the kubelet and the pod's processes die, the volume is
    detached; the restarted kubelet shows the container waiting (ContainerCreating) with
    its lost run as lastState ContainerStatusUnknown, then runs it again once attached."""
    node = start_kubelet(shared_cluster, tmp_path, extra=[
        "--volume-root", str(tmp_path / "volumes")])
    try:
        volume = f"pvc-{await _make_claim(api, namespace, 'data')}"
        await _attach(api, volume, node.name)
        manifest = pod_manifest("p", namespace, node.name, [{
            "name": "main", "command": ["sleep", "3600"],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}])
        manifest["spec"]["volumes"] = [{"name": "data",
                                        "persistentVolumeClaim": {"claimName": "data"}}]
        await api.create(manifest)
        pod = await wait_phase(api, namespace, "p", "Running")
        pid = int(container_status(pod, "main")["containerID"].removeprefix("process://"))
        node.process.kill()
        os.killpg(os.getpgid(pid), signal.SIGKILL)  # the node lost power
        await api.delete("volumeattachments", volume)  # the controller detached it
        node.process.start()
        wait_grpc_healthy(node.process, node.health_target)

        async def waiting() -> Obj | None:
            obj = await get_pod(api, namespace, "p")
            cs = container_status(obj, "main") if obj else {}
            lost = (cs.get("lastState") or {}).get("terminated") or {}
            return cs if lost.get("reason") == "ContainerStatusUnknown" else None

        cs = await wait_until(waiting, timeout=20, what="the lost run in lastState")
        assert cs["state"].get("waiting", {}).get("reason") == "ContainerCreating", cs
        assert cs["lastState"]["terminated"]["exitCode"] == 137
        assert not cs["state"].get("terminated")

        await _attach(api, volume, node.name)

        async def running_again() -> Obj | None:
            obj = await get_pod(api, namespace, "p")
            cs = container_status(obj, "main") if obj else {}
            return cs if cs.get("state", {}).get("running") else None

        cs = await wait_until(running_again, timeout=20, what="the container running again")
        assert cs["restartCount"] >= 1
        assert cs["lastState"]["terminated"]["reason"] == "ContainerStatusUnknown"
    finally:
        await stop_kubelet(node)
