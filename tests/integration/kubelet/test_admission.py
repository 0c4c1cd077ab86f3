"""Kubelet admission with a real kubelet: a pod bound past the scheduler (`spec.nodeName`)
to a node that cannot hold it is refused as Kubernetes' kubelet refuses it — Failed,
OutOfcpu, never started — and the node goes on admitting pods that fit."""

from __future__ import annotations

import time
from pathlib import Path

from skiff.client import ApiClient
from tests.integration.kubelet.conftest import (
    Node,
    pod_manifest,
    recorder,
    wait_file,
    wait_gone,
    wait_phase,
)
from tests.integration.waiting import recorded


def _requesting(cpu: str) -> dict[str, dict[str, str]]:
    return {"requests": {"cpu": cpu}}


async def test_pod_bound_to_a_node_without_room_fails_out_of_cpu_and_never_starts(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path) -> None:
    big_path, small_path = tmp_path / "big", tmp_path / "small"
    # The node fixture advertises 8 CPUs; this pod asks for 9.
    await api.create(pod_manifest("big", namespace, node.name, [
        {"name": "main", "command": recorder(big_path), "resources": _requesting("9")}],
        grace=30))
    big = await wait_phase(api, namespace, "big", "Failed")
    assert big["status"]["reason"] == "OutOfcpu"
    message = big["status"]["message"]
    assert message.startswith(
        "Pod was rejected: Node didn't have enough resource: cpu, requested: 9000, used: ")
    assert message.endswith(", capacity: 8000"), message
    [event] = await recorded(api, namespace, reason="OutOfcpu", name="big")
    assert event["type"] == "Warning"
    assert event["message"] == message.removeprefix("Pod was rejected: ")
    assert not big_path.exists(), "a rejected pod was started"

    # A pod that fits still runs beside it.
    await api.create(pod_manifest("small", namespace, node.name, [
        {"name": "main", "command": recorder(small_path), "resources": _requesting("100m")}],
        grace=30))
    await wait_phase(api, namespace, "small", "Running")
    await wait_file(small_path, "start")

    # Nothing of the rejected pod runs, so its graceful deletion completes at once.
    started = time.monotonic()
    await api.delete("pods", "big", namespace)
    await wait_gone(api, namespace, "big")
    assert time.monotonic() - started < 10, "the rejected pod waited out its grace period"
    await api.delete("pods", "small", namespace, grace_period_seconds=1)
    await wait_gone(api, namespace, "small")
