"""SPEC AU8 (containers that are containers) with real kubelets as
root: without a PID namespace every pod's processes are in the node's /proc, and a
container whose process has the same uid and capabilities as another's (two default root
pods) could read that pod's Secret volume through `/proc/<pid>/root`, list its working
directory through `/proc/<pid>/cwd` and signal it. Each container, and each `kubectl exec`
session, is confined by Landlock to its own root and (with ABI 6) its own signals; a
pod's own files stay reachable from inside it, `/proc/<pid>/root` included; a
`shareProcessNamespace` pod keeps the filesystem confinement (its containers may signal
each other: test_share_process_namespace)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.kubelet.sandbox.landlock import abi_version
from tests.integration.sandbox.conftest import SandboxCluster
from tests.integration.sandbox.test_pod_network import _log, _pod, _ready
from tests.integration.waiting import get_or_none, wait_for

pytestmark = pytest.mark.integration

SECRET = "hunter2-landlock"


def _sh(name: str, script: str, *args: str, **extra: Any) -> Obj:
    return {"name": name, "image": "busybox", "command": ["sh", "-c", script, *args],
            **extra}


def _attack(marker: str) -> str:
    """Find the victim's process by the marker in its command line (`[m]arker` keeps
    pgrep off the attacker's own shell) and try its root, its cwd, its environment (which
    holds its Secret too) and a signal."""
    pattern = f"[{marker[0]}]{marker[1:]}"
    return (f"pid=$(pgrep -f '{pattern}' | head -n 1); echo \"found=${{pid:+yes}}\"; "
            f'echo "read=$(cat /proc/$pid/root/secret/password 2>/dev/null || echo refused)";'
            f' ls /proc/$pid/cwd/ >/dev/null 2>&1 && echo cwd=listed || echo cwd=refused; '
            f"grep -q PASSWORD= /proc/$pid/environ 2>/dev/null && echo environ=read || "
            f"echo environ=refused; "
            f"kill -0 $pid 2>/dev/null && echo kill=sent || echo kill=refused")


def _lines(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


@pytest.fixture
async def other_namespace(sb_api: ApiClient, sb_namespace: str) -> AsyncIterator[str]:
    """A second tenant's namespace; both namespaces' pods are gone after the test."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    await sb_api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    for ns in (sb_namespace, name):
        for pod in (await sb_api.list("pods", namespace=ns))["items"]:
            await sb_api.delete("pods", pod["metadata"]["name"], ns, grace_period_seconds=0)

    async def gone() -> bool:
        for ns in (sb_namespace, name):
            if (await sb_api.list("pods", namespace=ns))["items"]:
                return False
        return True
    await wait_for(gone, timeout=40, what="the test's pods to go")
    await sb_api.delete("namespaces", name)


async def _victim(api: ApiClient, ns: str, node: str, marker: str) -> Obj:
    """Pod A: a default root container with a Secret at /secret, which makes the attack
    on itself (through its own /proc/<pid>/root and cwd, signalling itself), then waits."""
    await api.create({"apiVersion": "v1", "kind": "Secret",
                      "metadata": {"name": "theirs", "namespace": ns},
                      "stringData": {"password": SECRET}})
    body = _pod("victim", ns, node, [_sh(
        "main", _attack(marker) + "; while :; do sleep 1; done", marker,
        env=[{"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "theirs",
                                                                 "key": "password"}}}],
        volumeMounts=[{"name": "s", "mountPath": "/secret"}])])
    body["spec"]["volumes"] = [{"name": "s", "secret": {"secretName": "theirs"}}]
    await api.create(body)
    return await _ready(api, ns, "victim")


async def _finished(api: ApiClient, ns: str, name: str) -> Obj:
    async def done() -> Obj | None:
        pod = await get_or_none(api, "pods", name, ns)
        return pod if (pod or {}).get("status", {}).get("phase") in (
            "Succeeded", "Failed") else None
    got: Obj = await wait_for(done, timeout=40, what=f"pod {name} to finish")
    return got


async def _own_reads(cluster: SandboxCluster, victim: Obj) -> dict[str, str]:
    node = cluster.nodes[0]
    uid = victim["metadata"]["uid"]

    async def logged() -> str | None:
        text = _log(node.root, uid, "main")
        return text if "kill=" in text else None
    try:
        return _lines(await wait_for(logged, timeout=20, what="the victim's own reads"))
    except AssertionError:
        raise AssertionError(_log(node.root, uid, "main")) from None


async def test_au8_a_pod_cannot_read_another_pods_secret_through_proc(
        sb_api: ApiClient, sb_namespace: str, other_namespace: str,
        sandbox_cluster: SandboxCluster) -> None:
    if abi_version() < 6:
        pytest.fail(f"this node's kernel has Landlock ABI {abi_version()}; the test needs 6+")
    node = sandbox_cluster.nodes[0]
    marker = f"victim-{uuid.uuid4().hex[:8]}"
    victim = await _victim(sb_api, sb_namespace, node.name, marker)
    body = _pod("attacker", other_namespace, node.name, [_sh("main", _attack(marker))])
    body["spec"]["restartPolicy"] = "Never"
    await sb_api.create(body)
    attacker = await _finished(sb_api, other_namespace, "attacker")
    seen = _lines(_log(node.root, attacker["metadata"]["uid"], "main"))
    assert seen == {"found": "yes", "read": "refused", "cwd": "refused",
                    "environ": "refused", "kill": "refused"}, seen
    # within the victim itself the same paths work
    assert await _own_reads(sandbox_cluster, victim) == {
        "found": "yes", "read": SECRET, "cwd": "listed", "environ": "read", "kill": "sent"}


async def test_au8_kubectl_exec_is_confined_like_the_container(
        sb_api: ApiClient, sb_namespace: str, other_namespace: str,
        sandbox_cluster: SandboxCluster) -> None:
    if abi_version() < 6:
        pytest.fail(f"this node's kernel has Landlock ABI {abi_version()}; the test needs 6+")
    node = sandbox_cluster.nodes[0]
    marker = f"victim-{uuid.uuid4().hex[:8]}"
    await _victim(sb_api, sb_namespace, node.name, marker)
    await sb_api.create(_pod("attacker", other_namespace, node.name, [
        _sh("main", "while :; do sleep 1; done")]))
    await _ready(sb_api, other_namespace, "attacker")
    ran = sandbox_cluster.kubectl("exec", "-n", other_namespace, "attacker", "--",
                                  "sh", "-c", _attack(marker))
    assert ran.returncode == 0, ran.stderr
    assert _lines(ran.stdout) == {"found": "yes", "read": "refused", "cwd": "refused",
                                  "environ": "refused", "kill": "refused"}, ran.stdout
    # an exec session in the victim reads the victim's files, /proc/self/root included
    own = sandbox_cluster.kubectl("exec", "-n", sb_namespace, "victim", "--", "sh", "-c",
                                  "cat /secret/password; echo; "
                                  "cat /proc/self/root/secret/password")
    assert (own.returncode, own.stdout) == (0, f"{SECRET}\n{SECRET}"), own.stderr


async def test_au8_share_process_namespace_pods_still_cannot_read_another_pods_secret(
        sb_api: ApiClient, sb_namespace: str, other_namespace: str,
        sandbox_cluster: SandboxCluster) -> None:
    """Its containers may signal each other (no signal scope), but the filesystem rule
    and Landlock's ptrace restriction still keep other pods' files out of reach."""
    node = sandbox_cluster.nodes[0]
    marker = f"victim-{uuid.uuid4().hex[:8]}"
    await _victim(sb_api, sb_namespace, node.name, marker)
    pattern = f"[{marker[0]}]{marker[1:]}"
    script = (f"pid=$(pgrep -f '{pattern}' | head -n 1); echo \"found=${{pid:+yes}}\"; "
              f'echo "read=$(cat /proc/$pid/root/secret/password 2>/dev/null || '
              f'echo refused)"; ls /proc/$pid/cwd/ >/dev/null 2>&1 && echo cwd=listed || '
              f"echo cwd=refused; grep -q PASSWORD= /proc/$pid/environ 2>/dev/null && "
              f"echo environ=read || echo environ=refused")
    body = _pod("attacker", other_namespace, node.name, [
        _sh("main", script), _sh("sidecar", "true")])
    body["spec"].update(restartPolicy="Never", shareProcessNamespace=True)
    await sb_api.create(body)
    attacker = await _finished(sb_api, other_namespace, "attacker")
    seen = _lines(_log(node.root, attacker["metadata"]["uid"], "main"))
    assert seen == {"found": "yes", "read": "refused", "cwd": "refused",
                    "environ": "refused"}, seen


async def test_au8_a_privileged_container_is_not_landlocked_and_mounts(
        sb_api: ApiClient, sb_namespace: str, other_namespace: str,
        sandbox_cluster: SandboxCluster) -> None:
    """`privileged` holds the node anyway; a Landlock domain would forbid it mount(2)."""
    node = sandbox_cluster.nodes[0]
    body = _pod("privileged", sb_namespace, node.name, [_sh(
        "main", "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m && echo mount=done",
        securityContext={"privileged": True})])
    body["spec"]["restartPolicy"] = "Never"
    await sb_api.create(body)
    pod = await _finished(sb_api, sb_namespace, "privileged")
    assert _lines(_log(node.root, pod["metadata"]["uid"], "main")) == {"mount": "done"}
