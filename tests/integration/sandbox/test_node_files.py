"""SPEC AU11 with real kubelets as root: a pod's files on the node are no local user's,
credentials live on tmpfs, and no volume path leads out of its volume."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest

from skiff.api import ApiError, Reason
from skiff.client import ApiClient
from tests.integration.sandbox.conftest import SandboxCluster
from tests.integration.sandbox.test_pod_network import _pod, _ready
from tests.integration.waiting import wait_for


def _mount_types() -> dict[str, str]:
    """Mount point → filesystem type, from the node's own mount table."""
    points: dict[str, str] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        points[fields[4]] = fields[fields.index("-") + 1]
    return points


def _sleeper(**extra: object) -> dict[str, object]:
    return {"name": "main", "image": "busybox", "command": ["sleep", "3600"], **extra}


async def test_au11_pod_directories_are_0750_and_secrets_live_on_tmpfs(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    ns, node = sb_namespace, sandbox_cluster.nodes[0]
    await sb_api.create({"apiVersion": "v1", "kind": "Secret",
                         "metadata": {"name": "db", "namespace": ns},
                         "data": {"password": base64.b64encode(b"s3cret").decode()}})
    body = _pod("holder", ns, node.name, [_sleeper(volumeMounts=[
        {"name": "creds", "mountPath": "/etc/creds", "readOnly": True}])])
    body["spec"]["volumes"] = [{"name": "creds", "secret": {"secretName": "db"}}]
    await sb_api.create(body)
    pod = await _ready(sb_api, ns, "holder")
    uid = pod["metadata"]["uid"]
    pods_dir = node.root / "pods"
    volume = pods_dir / uid / "volumes" / "creds"
    for directory in (node.root, pods_dir, pods_dir / uid, pods_dir / uid / "volumes"):
        mode = stat.S_IMODE(directory.stat().st_mode)
        assert mode & 0o007 == 0, f"{directory} is {oct(mode)}: other users may enter it"
    assert _mount_types().get(str(volume)) == "tmpfs"
    password = next(volume.rglob("password"))
    assert password.read_bytes() == b"s3cret"
    assert stat.S_IMODE(password.stat().st_mode) == 0o644
    got = sandbox_cluster.kubectl("exec", "-n", ns, "holder", "--", "cat",
                                  "/etc/creds/password")
    assert (got.returncode, got.stdout) == (0, "s3cret"), got.stderr

    await sb_api.delete("pods", "holder", ns)

    async def gone() -> bool:
        return str(volume) not in _mount_types() and not (pods_dir / uid).exists()

    await wait_for(gone, timeout=30, what="the secret's tmpfs unmounted and the pod dir gone")


@pytest.mark.parametrize(("mount", "field"), [
    pytest.param({"subPath": "../../../../etc"}, "volumeMounts.subPath", id="subpath"),
    pytest.param({"subPath": "/etc"}, "volumeMounts.subPath", id="absolute-subpath"),
    pytest.param({"subPathExpr": "$(POD)/../../.."}, "volumeMounts.subPathExpr",
                 id="subpathexpr"),
])
async def test_au11_a_subpath_out_of_its_volume_is_refused_at_validation(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster,
        mount: dict[str, str], field: str) -> None:
    node = sandbox_cluster.nodes[0]
    body = _pod("escape", sb_namespace, node.name, [_sleeper(volumeMounts=[
        {"name": "scratch", "mountPath": "/data", **mount}])])
    body["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    with pytest.raises(ApiError) as err:
        await sb_api.create(body)
    assert err.value.reason == Reason.INVALID
    assert f"spec.containers[0].{field}" in err.value.message


async def test_au11_configmap_items_may_not_write_outside_the_volume(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster,
        tmp_path: Path) -> None:
    node = sandbox_cluster.nodes[0]
    target = tmp_path / "planted"
    body = _pod("planter", sb_namespace, node.name, [_sleeper()])
    body["spec"]["volumes"] = [{"name": "cfg", "configMap": {"name": "cfg", "items": [
        {"key": "k", "path": "../" * 12 + str(target).lstrip("/")}]}}]
    with pytest.raises(ApiError) as err:
        await sb_api.create(body)
    assert err.value.reason == Reason.INVALID
    assert "spec.volumes[0].configMap.items[0].path" in err.value.message
    assert "must not contain '..'" in err.value.message
    assert not os.path.lexists(target)
