"""`shareProcessNamespace: true`: a container sees its pod-mates' processes and can
signal them, as the Kubernetes documentation's example does (a sidecar sends SIGHUP to the
main process). Skiff makes no PID namespaces: every container's processes are in the node's
PID namespace, so this holds for every pod (see README, "Pod sandboxes")."""

from __future__ import annotations

from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.sandbox.conftest import SandboxCluster
from tests.integration.sandbox.test_pod_network import _pod
from tests.integration.waiting import get_or_none, wait_for


async def test_sb1_share_process_namespace_a_sidecar_signals_the_main_container(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    marker = f"main-of-{sb_namespace}"  # unique to this test's pod (xdist-safe pkill)
    pod = _pod("shared-pid", sb_namespace, sandbox_cluster.nodes[0].name, [
        {"name": "app", "image": "busybox",
         "command": ["sh", "-c", 'trap "echo got HUP; exit 0" HUP; echo trapping; '
                     "while :; do sleep 0.2; done", marker]},
        {"name": "sidecar", "image": "python",
         "command": ["python3", "-c", "import time; time.sleep(3600)"]}])
    pod["spec"].update(shareProcessNamespace=True, restartPolicy="Never")
    await sb_api.create(pod)

    async def both_running() -> bool:
        got = await get_or_none(sb_api, "pods", "shared-pid", sb_namespace)
        states = [c.get("state", {}) for c in (got or {}).get("status", {}).get(
            "containerStatuses") or []]
        return len(states) == 2 and all("running" in s for s in states)
    await wait_for(both_running, timeout=120, what="both containers running")

    async def trapping() -> bool:  # a HUP before the trap is set would just kill the shell
        return "trapping" in sandbox_cluster.kubectl(
            "logs", "-n", sb_namespace, "shared-pid", "-c", "app").stdout
    await wait_for(trapping, timeout=60, what="the app's trap set")

    # the sidecar finds the app's process in /proc and signals it ([m] keeps pkill from
    # matching the shell that runs it)
    pattern = f"[{marker[0]}]{marker[1:]}"
    seen = sandbox_cluster.kubectl("exec", "-n", sb_namespace, "shared-pid", "-c", "sidecar",
                                   "--", "sh", "-c", f"pgrep -f '{pattern}' && "
                                   f"pkill -HUP -f '{pattern}'")
    assert seen.returncode == 0, (seen.stdout, seen.stderr)

    async def app_ended() -> Obj | None:
        got = await get_or_none(sb_api, "pods", "shared-pid", sb_namespace)
        for status in (got or {}).get("status", {}).get("containerStatuses") or []:
            if status["name"] == "app" and "terminated" in status.get("state", {}):
                return dict(status["state"]["terminated"])
        return None
    ended = await wait_for(app_ended, timeout=90, what="the app container to end on SIGHUP")
    assert ended["exitCode"] == 0
    logs = sandbox_cluster.kubectl("logs", "-n", sb_namespace, "shared-pid", "-c", "app")
    assert "got HUP" in logs.stdout, (logs.stdout, logs.stderr)
    await sb_api.delete("pods", "shared-pid", sb_namespace)
