"""Config volumes, the kubelet's side, with real kubelets as root: a ConfigMap's
`binaryData` and a Secret's `data` reach a volume as their exact bytes, and a volume the
kubelet cannot build is a FailedMount, after which the pod still goes cleanly."""

from __future__ import annotations

import base64
import uuid

import aetcd

from skiff.api.kinds import lookup, storage_key
from skiff.client import ApiClient
from skiff.rpc import encode
from tests.integration.sandbox.conftest import SandboxCluster, skiff_namespaces
from tests.integration.sandbox.test_pod_network import _pod, _ready
from tests.integration.waiting import recorded, wait_for

BINARY = bytes(range(256))  # no valid UTF-8: a text round trip would change it


def _sleeper(**extra: object) -> dict[str, object]:
    return {"name": "main", "image": "busybox", "command": ["sleep", "3600"], **extra}


async def test_defect4_binary_config_and_secret_values_reach_the_volume_byte_for_byte(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    ns, node = sb_namespace, sandbox_cluster.nodes[0]
    encoded = base64.b64encode(BINARY).decode()
    await sb_api.create({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "blob", "namespace": ns},
                         "binaryData": {"blob.bin": encoded}})
    await sb_api.create({"apiVersion": "v1", "kind": "Secret",
                         "metadata": {"name": "keystore", "namespace": ns},
                         "data": {"store.p12": encoded}})
    body = _pod("bytes", ns, node.name, [_sleeper(volumeMounts=[
        {"name": "blob", "mountPath": "/etc/blob"},
        {"name": "store", "mountPath": "/etc/store"}])])
    body["spec"]["volumes"] = [{"name": "blob", "configMap": {"name": "blob"}},
                               {"name": "store", "secret": {"secretName": "keystore"}}]
    await sb_api.create(body)
    pod = await _ready(sb_api, ns, "bytes")
    volumes = node.root / "pods" / pod["metadata"]["uid"] / "volumes"
    assert (volumes / "blob" / "blob.bin").read_bytes() == BINARY
    assert (volumes / "store" / "store.p12").read_bytes() == BINARY
    got = sandbox_cluster.kubectl("exec", "-n", ns, "bytes", "--", "sh", "-c",
                                  "cat /etc/blob/blob.bin | od -An -tx1 | wc -w")
    assert got.stdout.strip() == "256", got.stderr
    await sb_api.delete("pods", "bytes", ns)


async def test_defect4_a_volume_that_cannot_be_built_is_failed_mount_and_the_pod_still_goes(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    """A ConfigMap whose binaryData is not base64 (stored before the apiserver checked it,
    here written straight into etcd): the pod waits in ContainerCreating with a FailedMount
    event, and deleting it leaves no sandbox behind."""
    ns, node = sb_namespace, sandbox_cluster.nodes[0]
    bad = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "not-base64", "namespace": ns, "uid": str(uuid.uuid4()),
                        "creationTimestamp": "2026-01-01T00:00:00Z"},
           "binaryData": {"k": "not base64!"}}
    async with aetcd.Client(port=sandbox_cluster.cluster.etcd_port) as etcd:
        await etcd.put(storage_key(lookup("configmaps"), ns, "not-base64").encode(),
                       encode(bad))
    body = _pod("mounts-bad", ns, node.name, [_sleeper(volumeMounts=[
        {"name": "cfg", "mountPath": "/etc/cfg"}])])
    body["spec"]["volumes"] = [{"name": "cfg", "configMap": {"name": "not-base64"}}]
    created = await sb_api.create(body)
    uid = created["metadata"]["uid"]
    events = await recorded(sb_api, ns, reason="FailedMount", name="mounts-bad")
    assert any('MountVolume.SetUp failed for volume "cfg"' in e["message"]
               and "illegal base64" in e["message"] for e in events), events
    pod = await sb_api.get("pods", "mounts-bad", ns)
    waiting = pod["status"]["containerStatuses"][0]["state"].get("waiting") or {}
    assert waiting.get("reason") == "ContainerCreating", pod["status"]
    await sb_api.delete("pods", "mounts-bad", ns)

    async def cleaned_up() -> bool:
        gone = not (node.root / "pods" / uid).exists()
        return gone and f"skiff-pod-{uid}" not in skiff_namespaces(sandbox_cluster.pod_network)

    await wait_for(cleaned_up, timeout=30, what="the pod's directory and sandbox removed")
