"""SPEC SB3 with real kubelets as root: volumes appear at their absolute mountPath inside
the pod, shared between its containers, with readOnly enforced, subPath and downwardAPI
files; nothing is mounted in the node's own mount namespace."""

from __future__ import annotations

from pathlib import Path

from skiff.client import ApiClient
from tests.integration.sandbox.conftest import SandboxCluster
from tests.integration.sandbox.test_exec import _shell
from tests.integration.sandbox.test_pod_network import _pod, _ready
from tests.integration.waiting import wait_for


def _mounts() -> list[str]:
    """The node's mounts at the pod's mount points (there must be none)."""
    points = ("/var/log/app", "/etc/podinfo", "/srv/skiff-sb3")  # and -cache
    return [line for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if line.split()[4].startswith(points)]


async def test_sb3_two_containers_share_an_empty_dir_at_var_log_app_read_only_enforced(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    ns, node = sb_namespace, sandbox_cluster.nodes[0]
    assert _mounts() == []
    writer = _shell("writer", volumeMounts=[
        {"name": "logs", "mountPath": "/var/log/app"},
        {"name": "logs", "mountPath": "/srv/skiff-sb3/sub", "subPath": "nested"}])
    # one netns per pod: only one of its containers can listen on 8080
    reader = _shell("reader", command=["sleep", "3600"], readinessProbe=None, volumeMounts=[
        {"name": "logs", "mountPath": "/var/log/app", "readOnly": True},
        {"name": "info", "mountPath": "/etc/podinfo", "readOnly": True},
        {"name": "cache", "mountPath": "/srv/skiff-sb3-cache"}])
    body = _pod("vols", ns, node.name, [writer, reader])
    body["metadata"]["labels"] = {"app": "vols"}
    body["spec"]["volumes"] = [
        {"name": "logs", "emptyDir": {}},
        {"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}},
        {"name": "info", "downwardAPI": {"items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}}]
    await sb_api.create(body)
    await _ready(sb_api, ns, "vols")

    def run(container: str, script: str) -> tuple[int, str, str]:
        got = sandbox_cluster.kubectl("exec", "-n", ns, "vols", "-c", container, "--",
                                      "sh", "-c", script)
        return got.returncode, got.stdout, got.stderr

    assert run("writer", "echo from-writer > /var/log/app/out.log && "
                         "echo deeper > /srv/skiff-sb3/sub/x")[0] == 0
    assert run("reader", "cat /var/log/app/out.log /var/log/app/nested/x") == (
        0, "from-writer\ndeeper\n", "")
    code, _, err = run("reader", "echo no > /var/log/app/denied")
    assert code != 0 and "Read-only file system" in err
    assert run("reader", "cat /etc/podinfo/labels; echo; cat /etc/podinfo/name")[1] == \
        'app="vols"\nvols'
    assert run("reader", "stat -f -c %T /srv/skiff-sb3-cache; df -k /srv/skiff-sb3-cache "
                         "| tail -1 | awk '{print $2}'")[1] == "tmpfs\n8192\n"
    # the node's own view is unchanged: the volume is not at /var/log/app on the host
    assert not Path("/var/log/app/out.log").exists()
    assert _mounts() == []
    uid = (await sb_api.get("pods", "vols", ns))["metadata"]["uid"]
    await sb_api.delete("pods", "vols", ns)

    async def unmounted() -> bool:
        return uid not in Path("/proc/self/mountinfo").read_text()

    await wait_for(unmounted, timeout=30, what="the memory-backed emptyDir to be unmounted")




async def test_sb3_etc_hosts_and_hostname_are_the_pods_own_and_the_nodes_are_untouched(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    """The kubelet's managed /etc/hosts (loopback names, the pod IP with its hostname and
    FQDN under `subdomain`, then `hostAliases`) and the runtime's /etc/hostname, in every
    container and exec'd command; the node's files stay as they were."""
    ns, node = sb_namespace, sandbox_cluster.nodes[0]
    node_hosts, node_hostname = Path("/etc/hosts").read_text(), Path("/etc/hostname").read_text()
    body = _pod("hosts", ns, node.name, [_shell("main")])
    body["spec"].update(hostname="web-0", subdomain="web", hostAliases=[
        {"ip": "10.1.2.3", "hostnames": ["foo.local", "bar.local"]}])
    await sb_api.create(body)
    await _ready(sb_api, ns, "hosts")
    ip = (await sb_api.get("pods", "hosts", ns))["status"]["podIP"]
    got = sandbox_cluster.kubectl("exec", "-n", ns, "hosts", "--", "sh", "-c",
                                  "cat /etc/hosts; echo ---; cat /etc/hostname; hostname")
    assert got.returncode == 0, got.stderr
    hosts, _, names = got.stdout.partition("---\n")
    lines = hosts.splitlines()
    assert lines[0] == "# Kubernetes-managed hosts file."
    assert "127.0.0.1\tlocalhost" in lines
    assert f"{ip}\tweb-0.web.{ns}.svc.cluster.local\tweb-0" in lines
    assert lines[-2:] == ["# Entries added by HostAliases.", "10.1.2.3\tfoo.local\tbar.local"]
    assert names == "web-0\nweb-0\n"
    assert Path("/etc/hosts").read_text() == node_hosts
    assert Path("/etc/hostname").read_text() == node_hostname
    await sb_api.delete("pods", "hosts", ns)
