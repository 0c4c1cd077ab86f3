"""SPEC AU8 with sandboxed pods: a container (root inside, default capabilities) is in its
own cgroup and cannot move itself out of it, so its limits hold."""

from __future__ import annotations

from skiff.client import ApiClient
from tests.integration.sandbox.conftest import SandboxCluster
from tests.integration.sandbox.test_pod_network import _pod, _ready


async def test_au8_a_sandboxed_container_cannot_leave_its_cgroup(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    ns, node = sb_namespace, sandbox_cluster.nodes[0]
    await sb_api.create(_pod("boxed", ns, node.name, [{
        "name": "c", "command": ["sleep", "3600"],
        "resources": {"limits": {"memory": "64Mi", "cpu": "200m"}}}]))
    pod = await _ready(sb_api, ns, "boxed")

    def run(script: str) -> tuple[int, str]:
        got = sandbox_cluster.kubectl("exec", "-n", ns, "boxed", "--", "sh", "-c", script)
        return got.returncode, got.stdout + got.stderr

    code, out = run("cat /proc/self/cgroup")
    assert code == 0 and f"pod{pod['metadata']['uid']}/c" in out, out
    # every way out: the cgroup filesystem as the node mounts it, or mounted anew
    code, out = run("for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/*/cgroup.procs; do "
                    "echo $$ > $f 2>/dev/null && echo escaped $f; done; "
                    "mkdir -p /tmp/cg && mount -t cgroup -o memory none /tmp/cg 2>/dev/null "
                    "&& echo mounted; mount -t cgroup2 none /tmp/cg 2>/dev/null && echo mounted; "
                    "cat /proc/self/cgroup")
    assert "escaped" not in out and "mounted" not in out, out
    assert f"pod{pod['metadata']['uid']}/c" in out, out
    await sb_api.delete("pods", "boxed", ns)
