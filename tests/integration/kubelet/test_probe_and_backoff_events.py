"""What `kubectl get events` shows for failing probes and crash loops, with a real kubelet:
a Warning `Unhealthy` Event per failed probe ("Readiness probe failed: ...", "Liveness
probe failed: ..."), counted on one Event; `Killing` "Container c failed liveness probe,
will be restarted"; and a Warning `BackOff` "Back-off restarting failed container c in pod
p_<ns>(<uid>)" each time the kubelet declines a restart during CrashLoopBackOff."""

from __future__ import annotations

from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.kubelet.conftest import (
    Node,
    container_status,
    get_pod,
    pod_manifest,
    wait_until,
)
from tests.integration.waiting import events


async def _counted(api: ApiClient, namespace: str, reason: str, prefix: str,
                   count: int) -> list[Obj]:
    """The Events of pod `p` with `reason` whose message starts with `prefix`, once one of
    them has counted `count` occurrences."""
    async def check() -> list[Obj] | None:
        found = [e for e in await events(api, namespace, reason=reason, name="p")
                 if str(e.get("message", "")).startswith(prefix)]
        return found if any(int(e.get("count") or 1) >= count for e in found) else None
    result: list[Obj] = await wait_until(check, timeout=30, interval=0.2,
                                         what=f"{reason} {prefix!r} x{count}")
    return result


async def test_lc7_failing_readiness_probe_records_readiness_probe_failed_events(
        api: ApiClient, namespace: str, node: Node) -> None:
    await api.create(pod_manifest("p", namespace, node.name, [{
        "name": "c", "command": ["sleep", "3600"],
        "readinessProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1}}], grace=1))
    found = await _counted(api, namespace, "Unhealthy", "Readiness probe failed: ", 3)
    assert len(found) == 1, found  # repeats are counted on one Event, not new ones
    assert found[0]["type"] == "Warning"
    # an exec probe reports its command's output (`false` prints nothing), as kubelet does
    assert found[0]["message"] == "Readiness probe failed: "
    pod = await get_pod(api, namespace, "p")
    assert pod is not None and pod["status"]["phase"] == "Running"
    assert container_status(pod, "c")["ready"] is False
    await api.delete("pods", "p", namespace, grace_period_seconds=1)


async def test_lc7_failing_liveness_probe_records_an_unhealthy_event_per_failure_then_killing(
        api: ApiClient, namespace: str, node: Node) -> None:
    await api.create(pod_manifest("p", namespace, node.name, [{
        "name": "c", "command": ["sleep", "3600"],
        "livenessProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1,
                          "failureThreshold": 3}}], grace=1))
    killing = await _counted(api, namespace, "Killing",
                             "Container c failed liveness probe, will be restarted", 1)
    assert killing[0]["type"] == "Normal"
    unhealthy = [e for e in await events(api, namespace, reason="Unhealthy", name="p")
                 if str(e["message"]).startswith("Liveness probe failed: ")]
    # three failed probes reached the failureThreshold: counted 3 before the kill
    assert len(unhealthy) == 1 and int(unhealthy[0]["count"]) >= 3, unhealthy
    assert unhealthy[0]["type"] == "Warning"
    await api.delete("pods", "p", namespace, grace_period_seconds=1)


async def test_lc3_crash_loop_records_back_off_restarting_failed_container_events(
        api: ApiClient, namespace: str, node: Node) -> None:
    pod = await api.create(pod_manifest("p", namespace, node.name, [{
        "name": "c", "command": ["sh", "-c", "exit 1"]}], grace=1))
    uid = pod["metadata"]["uid"]
    message = f"Back-off restarting failed container c in pod p_{namespace}({uid})"
    found = await _counted(api, namespace, "BackOff", "Back-off", 2)
    assert [(e["type"], e["message"]) for e in found] == [("Warning", message)]

    async def crash_looping() -> Obj | None:
        current = await get_pod(api, namespace, "p")
        waiting = (container_status(current, "c")["state"].get("waiting") or {}
                   ) if current else {}
        return current if waiting.get("reason") == "CrashLoopBackOff" else None

    await wait_until(crash_looping, timeout=30, what="CrashLoopBackOff")
    await api.delete("pods", "p", namespace, grace_period_seconds=1)


async def test_lc2_containers_record_created_started_and_stopping_events_each(
        api: ApiClient, namespace: str, node: Node) -> None:
    """`kubectl describe pod`: "Created container: a", "Started container a" per container,
    and on deletion one `Killing` "Stopping container a" per running container (Skiff wrote
    no Created and one "Stopping containers (grace period 1s)")."""
    await api.create(pod_manifest("p", namespace, node.name, [
        {"name": "a", "command": ["sleep", "3600"]},
        {"name": "b", "command": ["sleep", "3600"]}], grace=1))
    for name in ("a", "b"):
        await _counted(api, namespace, "Created", f"Created container: {name}", 1)
        await _counted(api, namespace, "Started", f"Started container {name}", 1)
    await api.delete("pods", "p", namespace, grace_period_seconds=1)
    for name in ("a", "b"):
        await _counted(api, namespace, "Killing", f"Stopping container {name}", 1)


async def test_lc2_a_changed_image_restarts_the_container_whatever_the_restart_policy(
        api: ApiClient, namespace: str, node: Node) -> None:
    """`kubectl set image pod/p c=busybox:1.37`: the kubelet kills the container ("Container
    c definition changed, will be restarted") and starts the new image, even with
    restartPolicy Never. Skiff kept the old process and image."""
    await api.create(pod_manifest("p", namespace, node.name, [
        {"name": "c", "image": "busybox:1.36", "command": ["sleep", "3600"]}], grace=1,
        restartPolicy="Never"))

    def status_of(pod: Obj | None) -> Obj:
        statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
        return next((s for s in statuses if s.get("name") == "c"), {})

    async def running() -> Obj | None:
        pod = await get_pod(api, namespace, "p")
        return pod if status_of(pod).get("state", {}).get("running") else None

    pod = await wait_until(running, timeout=30, what="container c running")
    pod["spec"]["containers"][0]["image"] = "busybox:1.37"
    await api.update(pod)
    await _counted(api, namespace, "Killing", "Container c definition changed, will be "
                   "restarted", 1)

    async def restarted() -> Obj | None:
        status = status_of(await get_pod(api, namespace, "p"))
        return status if status.get("restartCount") == 1 and status.get(
            "image") == "busybox:1.37" and "running" in status.get("state", {}) else None

    await wait_until(restarted, timeout=30, what="c restarted with busybox:1.37")
    await api.delete("pods", "p", namespace, grace_period_seconds=1)
