"""Running pods as real processes: start, logs, env and volumes, init containers, hooks."""

from __future__ import annotations

import asyncio
import ipaddress
import os
from pathlib import Path

import pytest

from skiff.api import ApiError, Reason
from skiff.client import ApiClient
from skiff.kubelet.logs import fetch_logs
from tests.integration.kubelet.conftest import (
    Node,
    condition,
    container_status,
    pod_manifest,
    wait_phase,
    wait_until,
)


async def test_pod_runs_as_a_process_and_reports_running(api: ApiClient, namespace: str,
                                                         node: Node) -> None:
    await api.create(pod_manifest("p", namespace, node.name, [
        {"name": "main", "image": "busybox:1.36", "command": ["sleep", "3600"]}]))
    pod = await wait_phase(api, namespace, "p", "Running")
    cs = container_status(pod, "main")
    assert cs["state"]["running"]["startedAt"]
    assert cs["image"] == "busybox:1.36"
    assert cs["ready"] is True and cs["restartCount"] == 0
    pid = int(cs["containerID"].removeprefix("process://"))
    assert Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"3600"]
    for cond in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready"):
        assert condition(pod, cond) == "True", cond
    # A sandbox (SPEC SB1, as root once the node has a podCIDR) gives the pod an IP of the
    # node's range; without one the pod shares the node's network.
    cidr = ((await api.get("nodes", node.name)).get("spec") or {}).get("podCIDR")
    if cidr and os.geteuid() == 0:
        assert ipaddress.ip_address(pod["status"]["podIP"]) in ipaddress.ip_network(cidr)
    else:
        assert pod["status"]["podIP"] == "127.0.0.1"
    await api.delete("pods", "p", namespace, grace_period_seconds=1)


async def test_logs_env_and_volumes(api: ApiClient, namespace: str, node: Node) -> None:
    script = ('echo "name=$POD_NAME ns=$POD_NS greeting=$GREETING"; echo shared > data/f; '
              'cat data/f; echo to-stderr >&2; sleep 3600')
    await api.create(pod_manifest("p", namespace, node.name, [{
        "name": "main", "image": "busybox", "command": ["sh", "-c", script],
        "env": [{"name": "GREETING", "value": "hello"},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "POD_NS",
                 "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
        "volumeMounts": [{"name": "scratch", "mountPath": "/data"}]}],
        volumes=[{"name": "scratch", "emptyDir": {}}]))
    await wait_phase(api, namespace, "p", "Running")

    async def logged() -> str:
        text = await fetch_logs(node.health_target, namespace, "p")
        return text if "to-stderr" in text else ""

    text = await wait_until(logged, what="the container's output")
    assert f"name=p ns={namespace} greeting=hello" in text
    assert "shared" in text
    assert await fetch_logs(node.health_target, namespace, "p", tail_lines=1) == "to-stderr\n"
    with pytest.raises(ApiError) as err:
        await fetch_logs(node.health_target, namespace, "nope")
    assert err.value.reason == Reason.NOT_FOUND
    await api.delete("pods", "p", namespace, grace_period_seconds=1)


async def test_lc4_init_containers_run_in_order_before_app_containers(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path) -> None:
    log = tmp_path / "order"
    await api.create(pod_manifest("p", namespace, node.name, [
        {"name": "app", "command": ["sh", "-c", f"echo app >> {log}; sleep 3600"]}],
        initContainers=[
            {"name": "first", "command": ["sh", "-c", f"sleep 0.5; echo first >> {log}"]},
            {"name": "second", "command": ["sh", "-c", f"echo second >> {log}"]}]))
    pod = await wait_phase(api, namespace, "p", "Running")
    assert log.read_text().split() == ["first", "second", "app"]
    assert condition(pod, "Initialized") == "True"
    assert container_status(pod, "first")["state"]["terminated"]["exitCode"] == 0
    await api.delete("pods", "p", namespace, grace_period_seconds=1)


async def test_lc4_failing_init_container_with_restart_never_fails_the_pod(
        api: ApiClient, namespace: str, node: Node) -> None:
    await api.create(pod_manifest("p", namespace, node.name, [
        {"name": "app", "command": ["sleep", "3600"]}], restartPolicy="Never",
        initContainers=[{"name": "init", "command": ["sh", "-c", "exit 3"]}]))
    pod = await wait_phase(api, namespace, "p", "Failed")
    assert container_status(pod, "init")["state"]["terminated"]["exitCode"] == 3
    assert "running" not in container_status(pod, "app")["state"]


async def test_lc8_post_start_runs_before_the_container_is_running(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path) -> None:
    marker, gate = tmp_path / "post-start", tmp_path / "gate"
    # The hook runs until the test opens the gate: no race with a fixed sleep.
    await api.create(pod_manifest("p", namespace, node.name, [{
        "name": "main", "command": ["sleep", "3600"],
        "lifecycle": {"postStart": {"exec": {"command": [
            "sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.1; done; echo done > {marker}"]}}}}]))

    async def creating() -> bool:
        pod = await api.get("pods", "p", namespace)
        statuses = pod.get("status", {}).get("containerStatuses") or []
        return bool(statuses) and "waiting" in statuses[0]["state"]

    await wait_until(creating, timeout=30, what="the container waiting for its postStart hook")
    await asyncio.sleep(1)  # the kubelet had time to report Running, were it not waiting
    pod = await api.get("pods", "p", namespace)
    assert "waiting" in container_status(pod, "main")["state"]
    assert pod["status"]["phase"] == "Pending"
    assert not marker.exists()
    gate.touch()
    await wait_phase(api, namespace, "p", "Running")
    pod = await api.get("pods", "p", namespace)
    assert "running" in container_status(pod, "main")["state"]
    assert marker.read_text() == "done\n"
    await api.delete("pods", "p", namespace, grace_period_seconds=1)


async def test_restart_never_pod_succeeds(api: ApiClient, namespace: str, node: Node) -> None:
    await api.create(pod_manifest("p", namespace, node.name, [
        {"name": "main", "command": ["true"]}], restartPolicy="Never"))
    pod = await wait_phase(api, namespace, "p", "Succeeded")
    terminated = container_status(pod, "main")["state"]["terminated"]
    assert terminated["exitCode"] == 0 and terminated["reason"] == "Completed"
