"""SPEC AU8 with real kubelets as root: a pod is not root on the node.

Each container gets its own root filesystem: the node's data dirs (the kubelet's, etcd's,
other pods' volumes), /root and the kubelet's Python do not exist in it; /usr is read-only,
/tmp and /etc are its own; the securityContext decides its user, groups, capabilities,
no_new_privs and a read-only root; runAsNonRoot refuses a root container as the kubelet
does; its environment is Kubernetes' (no kubelet variables) and it starts in `workingDir`
or /; a subPath that leaves its volume through a symlink is refused; exec and exec probes
run in the container's view and as its user.
"""

from __future__ import annotations

import hashlib
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.sandbox.conftest import SandboxCluster
from tests.integration.sandbox.test_pod_network import _log, _pod, _ready
from tests.integration.waiting import get_or_none, wait_for


def _sh(name: str, script: str, **extra: Any) -> Obj:
    return {"name": name, "image": "busybox", "command": ["sh", "-c", script], **extra}


async def _finished(api: ApiClient, ns: str, name: str, timeout: float = 40) -> Obj:
    async def done() -> Obj | None:
        pod = await get_or_none(api, "pods", name, ns)
        phase = (pod or {}).get("status", {}).get("phase")
        return pod if phase in ("Succeeded", "Failed") else None
    pod: Obj = await wait_for(done, timeout=timeout, what=f"pod {name} to finish")
    return pod


async def _run(api: ApiClient, cluster: SandboxCluster, ns: str, name: str,
               containers: list[Obj], **spec: Any) -> dict[str, str]:
    """Run the pod to completion on the first node; each container's log."""
    node = cluster.nodes[0]
    body = _pod(name, ns, node.name, containers)
    body["spec"].update({"restartPolicy": "Never", **spec})
    await api.create(body)
    pod = await _finished(api, ns, name)
    uid = pod["metadata"]["uid"]
    return {c["name"]: _log(node.root, uid, c["name"]) for c in containers}


@pytest.fixture(autouse=True)
async def _pods_go(sb_api: ApiClient, sb_namespace: str) -> AsyncIterator[None]:
    """Every pod of the test is gone (its veth with it) before the next test starts."""
    yield
    for pod in (await sb_api.list("pods", namespace=sb_namespace))["items"]:
        await sb_api.delete("pods", pod["metadata"]["name"], sb_namespace,
                            grace_period_seconds=0)

    async def gone() -> bool:
        return not (await sb_api.list("pods", namespace=sb_namespace))["items"]

    await wait_for(gone, timeout=40, what="the test's pods to go")


def _lines(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


async def test_au8_a_pod_cannot_see_the_nodes_data_other_pods_secrets_or_root_home(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    ns, node = sb_namespace, sandbox_cluster.nodes[0]
    await sb_api.create({"apiVersion": "v1", "kind": "Secret",
                         "metadata": {"name": "theirs", "namespace": ns},
                         "stringData": {"password": "hunter2"}})
    victim = _pod("victim", ns, node.name, [_sh("main", "sleep 3600", volumeMounts=[
        {"name": "s", "mountPath": "/secret"}])])
    victim["spec"]["volumes"] = [{"name": "s", "secret": {"secretName": "theirs"}}]
    await sb_api.create(victim)
    victim_uid = (await _ready(sb_api, ns, "victim"))["metadata"]["uid"]
    secret_file = node.root / "pods" / victim_uid / "volumes" / "s" / "password"
    assert secret_file.read_text() == "hunter2"  # on the node, where the attacker looks
    sentinel = Path("/root") / f"skiff-au8-{uuid.uuid4().hex[:8]}"
    sentinel.write_text("root's own\n")
    cluster_root = node.root.parent  # etcd's data, the apiserver's, every kubelet's
    try:
        probes = {"secret": secret_file, "kubelet": node.root, "cluster": cluster_root,
                  "sentinel": sentinel, "venv": Path(sys.prefix)}
        script = "".join(f'if [ -e "{path}" ]; then echo {key}=visible; else echo '
                         f'{key}=absent; fi; ' for key, path in probes.items())
        script += 'echo "pwd=$(pwd)"; echo "root=$(ls -A /root | wc -l)"; ' \
                  'echo "python=$(python3 -c "print(6*7)")"'
        logs = await _run(sb_api, sandbox_cluster, ns, "attacker", [_sh("main", script)])
    finally:
        sentinel.unlink()
    seen = _lines(logs["main"])
    assert seen == {"secret": "absent", "kubelet": "absent", "cluster": "absent",
                    "sentinel": "absent", "venv": "absent", "python": "42", "pwd": "/",
                    "root": "0"}, logs


async def test_au8_writes_outside_volumes_fail_and_tmp_and_etc_are_the_containers_own(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    marker = f"skiff-au8-{uuid.uuid4().hex[:8]}"
    passwd = hashlib.sha256(Path("/etc/passwd").read_bytes()).hexdigest()
    script = (f'touch /usr/{marker} 2>/dev/null && echo usr=written || echo usr=refused; '
              f'echo mine > /tmp/{marker} && echo tmp=$(cat /tmp/{marker}); '
              f'echo "evil::0:0::/:/bin/sh" >> /etc/passwd && echo passwd=appended; '
              f'echo kept > /data/{marker} && echo volume=$(cat /data/{marker})')
    logs = await _run(sb_api, sandbox_cluster, sb_namespace, "writer", [_sh(
        "main", script, volumeMounts=[{"name": "d", "mountPath": "/data"}])],
        volumes=[{"name": "d", "emptyDir": {}}])
    assert _lines(logs["main"]) == {"usr": "refused", "tmp": "mine", "passwd": "appended",
                                    "volume": "kept"}, logs
    assert not Path(f"/usr/{marker}").exists()
    assert not Path(f"/tmp/{marker}").exists()
    assert hashlib.sha256(Path("/etc/passwd").read_bytes()).hexdigest() == passwd


async def test_au8_read_only_root_filesystem_leaves_only_writable_volumes(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    script = ('touch /x 2>/dev/null && echo root=written || echo root=refused; '
              'touch /tmp/x 2>/dev/null && echo tmp=written || echo tmp=refused; '
              'touch /data/x && echo volume=written; '
              'touch /ro/x 2>/dev/null && echo ro=written || echo ro=refused')
    logs = await _run(sb_api, sandbox_cluster, sb_namespace, "ro", [_sh(
        "main", script, securityContext={"readOnlyRootFilesystem": True},
        volumeMounts=[{"name": "d", "mountPath": "/data"},
                      {"name": "d", "mountPath": "/ro", "readOnly": True}])],
        volumes=[{"name": "d", "emptyDir": {}}])
    assert _lines(logs["main"]) == {"root": "refused", "tmp": "refused", "volume": "written",
                                    "ro": "refused"}, logs


async def test_au8_run_as_user_group_supplemental_groups_and_fs_group(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    script = ('echo "uid=$(id -u)"; echo "gid=$(id -g)"; echo "groups=$(id -G)"; '
              'echo "home=$HOME"; echo "volgroup=$(stat -c %g /data)"; '
              'touch /data/made && echo "filegroup=$(stat -c %g /data/made)"; '
              'echo "caps=$(grep CapEff /proc/self/status | cut -f2)"')
    logs = await _run(sb_api, sandbox_cluster, sb_namespace, "ids", [
        _sh("main", script, securityContext={"runAsGroup": 3000}, volumeMounts=[
            {"name": "d", "mountPath": "/data"}])],
        securityContext={"runAsUser": 1000, "runAsGroup": 1500, "supplementalGroups": [4000],
                         "fsGroup": 2000},
        volumes=[{"name": "d", "emptyDir": {}}])
    seen = _lines(logs["main"])
    groups = seen.pop("groups").split()
    assert groups[0] == "3000" and sorted(groups) == ["2000", "3000", "4000"], logs
    assert seen == {"uid": "1000", "gid": "3000", "home": "/", "volgroup": "2000",
                    "filegroup": "2000", "caps": "0000000000000000"}, logs


async def test_au8_run_as_non_root_refuses_a_root_container_with_the_kubelets_reason(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    ns, node = sb_namespace, sandbox_cluster.nodes[0]
    body = _pod("nonroot", ns, node.name, [
        _sh("root", "sleep 3600"),
        _sh("user", "sleep 3600", securityContext={"runAsUser": 1000})])
    body["spec"]["securityContext"] = {"runAsNonRoot": True}
    await sb_api.create(body)

    async def statuses() -> dict[str, Obj] | None:
        pod = await get_or_none(sb_api, "pods", "nonroot", ns)
        got = {s["name"]: s["state"] for s in
               (pod or {}).get("status", {}).get("containerStatuses") or []}
        waiting = got.get("root", {}).get("waiting") or {}
        if waiting.get("reason") == "CreateContainerConfigError" and "running" in got.get(
                "user", {}):
            return {**got, "uid": pod["metadata"]["uid"]} if pod else None
        return None

    got = await wait_for(statuses, timeout=40, what="the root container refused")
    assert got["root"]["waiting"]["message"] == (
        f'container has runAsNonRoot and image will run as root (pod: "nonroot_{ns}('
        f'{got["uid"]})", container: root)')


async def test_au8_capabilities_drop_all_add_net_bind_service_and_no_new_privs(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    chown = ('touch /tmp/f; chown 1 /tmp/f 2>/dev/null && echo chown=allowed || '
             'echo chown=refused; echo "nnp=$(grep NoNewPrivs /proc/self/status | cut -f2)"')
    bind80 = ('python3 -c "import socket; s = socket.socket(); s.bind((\'0.0.0.0\', 80)); '
              'print(\'bind80=allowed\')" 2>/dev/null || echo bind80=refused')
    disk = next(d for d in ("/dev/vda", "/dev/sda", "/dev/nvme0n1", "/dev/loop0", "/dev/null")
                if Path(d).exists())  # a device of the node that a plain /dev lacks
    node_view = ('echo "caps=$(grep CapEff /proc/self/status | cut -f2)"; '
                 "echo \"sys=$(grep ' /sys ' /proc/mounts | cut -d' ' -f4 | cut -c1-2)\"; "
                 f'[ -e {disk} ] && echo disk=seen || echo disk=hidden')
    logs = await _run(sb_api, sandbox_cluster, sb_namespace, "caps", [
        _sh("default", chown),
        _sh("dropped", chown, securityContext={"capabilities": {"drop": ["ALL"]},
                                               "allowPrivilegeEscalation": False}),
        _sh("user", bind80, securityContext={"runAsUser": 1000}),
        _sh("binder", bind80, securityContext={
            "runAsUser": 1000, "capabilities": {"drop": ["ALL"],
                                                "add": ["NET_BIND_SERVICE"]}}),
        _sh("privileged", node_view, securityContext={"privileged": True}),
        _sh("plain", node_view)])
    assert _lines(logs["default"]) == {"chown": "allowed", "nnp": "0"}, logs
    assert _lines(logs["dropped"]) == {"chown": "refused", "nnp": "1"}, logs
    assert _lines(logs["user"]) == {"bind80": "refused"}, logs
    assert _lines(logs["binder"]) == {"bind80": "allowed"}, logs
    every = next(line.split()[1] for line in Path("/proc/self/status").read_text().splitlines()
                 if line.startswith("CapPrm:"))  # all the kubelet (root, like us) has
    assert _lines(logs["privileged"]) == {"caps": every, "sys": "rw", "disk": "seen"}, logs
    assert _lines(logs["plain"]) == {"caps": "00000000a80425fb", "sys": "ro",
                                     "disk": "hidden"}, logs


async def test_au8_environment_is_kubernetes_not_the_kubelets_and_cwd_is_working_dir(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    script = 'env | sort; echo "cwd=$(pwd)"'
    logs = await _run(sb_api, sandbox_cluster, sb_namespace, "envs", [
        _sh("plain", script, env=[{"name": "MINE", "value": "yes"}]),
        _sh("worker", script, workingDir="/work/here")])
    plain = _lines(logs["plain"])
    assert not [k for k in plain if k.startswith("SKIFF_") or k in (
        "VIRTUAL_ENV", "PYTHONPATH", "LANG")], logs
    assert plain["PATH"] == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    assert (plain["HOME"], plain["HOSTNAME"], plain["MINE"], plain["cwd"]) == (
        "/root", "envs", "yes", "/")
    assert _lines(logs["worker"])["cwd"] == "/work/here"


async def test_au8_a_subpath_leaving_its_volume_through_a_symlink_is_refused(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    ns, node = sb_namespace, sandbox_cluster.nodes[0]
    body = _pod("escape", ns, node.name, [_sh("main", "cat /escaped/etc/hostname; sleep 3600",
                                              volumeMounts=[{"name": "d", "mountPath":
                                                             "/escaped", "subPath": "out"}])])
    body["spec"]["initContainers"] = [_sh("plant", "ln -s / /data/out", volumeMounts=[
        {"name": "d", "mountPath": "/data"}])]
    body["spec"]["volumes"] = [{"name": "d", "emptyDir": {}}]
    await sb_api.create(body)

    async def refused() -> Obj | None:
        pod = await get_or_none(sb_api, "pods", "escape", ns)
        for status in (pod or {}).get("status", {}).get("containerStatuses") or []:
            waiting = status["state"].get("waiting") or {}
            if waiting.get("reason") == "CreateContainerConfigError":
                return waiting
        return None

    waiting = await wait_for(refused, timeout=40, what="the subPath refused")
    assert waiting["message"] == ('failed to prepare subPath for volumeMount "d" of '
                                  'container "main"')


async def test_au8_exec_and_exec_probes_run_in_the_containers_view_as_its_user(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    ns, node = sb_namespace, sandbox_cluster.nodes[0]
    body = _pod("seen", ns, node.name, [_sh(
        "main", "echo private > /tmp/ready; sleep 3600", workingDir="/tmp",
        securityContext={"runAsUser": 1000, "allowPrivilegeEscalation": False},
        readinessProbe={"exec": {"command": ["sh", "-c", '[ "$(id -u)" = 1000 ] && '
                                             'grep -q private /tmp/ready']},
                        "periodSeconds": 1})])
    await sb_api.create(body)
    await _ready(sb_api, ns, "seen")  # the probe found the container's own /tmp file
    ran = sandbox_cluster.kubectl("exec", "-n", ns, "seen", "--", "sh", "-c",
                                  'echo "$(id -u) $(pwd) $(cat ready) '
                                  '$(grep NoNewPrivs /proc/self/status | cut -f2)"; '
                                  f'[ ! -e "{node.root}" ] || echo node-visible')
    assert (ran.returncode, ran.stdout) == (0, "1000 /tmp private 1\n"), ran.stderr


async def test_au8_an_image_without_a_command_runs_the_stand_in_inside_its_own_root(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    """The stand-in (an image Skiff has no command for) runs on the node's python3 from its
    source, since the kubelet's interpreter is not in the container; it serves its port."""
    ns, node = sb_namespace, sandbox_cluster.nodes[0]
    await sb_api.create(_pod("web", ns, node.name, [{
        "name": "nginx", "image": "nginx:1.27", "ports": [{"containerPort": 80}],
        "readinessProbe": {"httpGet": {"port": 80}, "periodSeconds": 1}}]))
    pod = await _ready(sb_api, ns, "web")
    pid = int(pod["status"]["containerStatuses"][0]["containerID"].removeprefix("process://"))
    assert Path(f"/proc/{pid}/root/usr/bin/python3").exists()
    assert not Path(f"/proc/{pid}/root{node.root}").exists()


async def test_au8_a_non_root_container_without_fs_group_writes_its_empty_dir(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    """emptyDir is 0777 as the kubelet makes it; the pod's directory on the node is not."""
    logs = await _run(sb_api, sandbox_cluster, sb_namespace, "nobody", [_sh(
        "main", 'echo hi > /cache/f && echo "wrote=$(stat -c %u /cache/f)"; '
                'echo "mode=$(stat -c %a /cache)"',
        securityContext={"runAsUser": 65534}, volumeMounts=[
            {"name": "cache", "mountPath": "/cache"}])],
        volumes=[{"name": "cache", "emptyDir": {}}])
    assert _lines(logs["main"]) == {"wrote": "65534", "mode": "777"}, logs
