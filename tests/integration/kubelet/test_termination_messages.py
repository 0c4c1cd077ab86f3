"""Termination messages with real kubelets: the docs' termination-demo pod writes "Sleep
expired" to /dev/termination-log and `.state.terminated.message` (then, after a restart,
`.lastState.terminated.message`) carries it. A sandboxed container writes to a file of its
own bound there (the node's /dev/termination-log is untouched); without a sandbox there is
no private file, but FallbackToLogsOnError still reports the tail of a failed container's
log."""

from __future__ import annotations

from pathlib import Path

from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.kubelet.conftest import (
    Node,
    container_status,
    get_pod,
    pod_manifest,
    wait_phase,
    wait_until,
)
from tests.integration.sandbox import conftest as sandbox
from tests.integration.sandbox.conftest import SandboxCluster

# The sandbox package's cluster (node IPAM, kubelets as root): only a sandboxed container has
# a mount namespace in which its terminationMessagePath can be a file of its own.
sandbox_cluster = sandbox.sandbox_cluster
sb_api = sandbox.sb_api
sb_namespace = sandbox.sb_namespace


async def test_lc2_fallback_to_logs_on_error_reports_the_log_tail_without_a_sandbox(
        api: ApiClient, namespace: str, node: Node) -> None:
    await api.create(pod_manifest("p", namespace, node.name, [{
        "name": "c", "command": ["sh", "-c", "echo starting; echo 'panic: boom'; exit 3"],
        "terminationMessagePolicy": "FallbackToLogsOnError"}], grace=1,
        restartPolicy="Never"))
    pod = await wait_phase(api, namespace, "p", "Failed", timeout=30)
    terminated = container_status(pod, "c")["state"]["terminated"]
    assert terminated["exitCode"] == 3
    assert terminated["message"] == "starting\npanic: boom\n"
    await api.delete("pods", "p", namespace, grace_period_seconds=1)


async def test_lc2_sandboxed_termination_demo_reports_sleep_expired_as_the_message(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster,
        tmp_path: Path) -> None:
    ns, node = sb_namespace, sandbox_cluster.nodes[0]
    custom = tmp_path / "msg"  # a path in the container's own root (AU8), not the node's
    host_log = Path("/dev/termination-log")
    before = host_log.read_bytes() if host_log.is_file() else b""
    await sb_api.create(pod_manifest("demo", ns, node.name, [{
        "name": "termination-demo-container", "image": "debian",
        "command": ["/bin/sh", "-c", "sleep 1; echo Sleep expired > /dev/termination-log; "
                                     "exit 2"]},
        {"name": "custom", "command": ["/bin/sh", "-c", f"printf done > {custom}; "
                                                        "sleep 3600"],
         "terminationMessagePath": str(custom)}], grace=1))

    async def restarted() -> Obj | None:
        pod = await get_pod(sb_api, ns, "demo")
        if pod is None or not pod["status"].get("containerStatuses"):
            return None
        last = container_status(pod, "termination-demo-container")["lastState"]
        return pod if last.get("terminated") else None

    pod = await wait_until(restarted, timeout=60, what="termination-demo restarted")
    last = container_status(pod, "termination-demo-container")["lastState"]["terminated"]
    assert last["exitCode"] == 2
    assert last["message"] == "Sleep expired\n"

    async def crashed_again() -> bool:
        current = await get_pod(sb_api, ns, "demo")
        if current is None:
            return False
        status = container_status(current, "termination-demo-container")
        waiting = status["state"].get("waiting") or {}
        return bool(status["state"].get("terminated")) or (
            waiting.get("reason") == "CrashLoopBackOff" and status["restartCount"] >= 1)

    await wait_until(crashed_again, timeout=60, what="the second termination")
    pod = await get_pod(sb_api, ns, "demo") or {}
    status = container_status(pod, "termination-demo-container")
    shown = status["state"].get("terminated") or status["lastState"]["terminated"]
    assert shown["message"] == "Sleep expired\n"
    # the text went to the container's own file, not to the node's /dev/termination-log
    assert (host_log.read_bytes() if host_log.is_file() else b"") == before
    assert not custom.exists()  # its mount point was made in the container's root

    await sb_api.delete("pods", "demo", ns, grace_period_seconds=1)
