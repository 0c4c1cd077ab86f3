"""SPEC SC1 and FN2 (storage): a pod starts only once its volume is attached to its node, is
killed when the attachment is taken away, and the storage agent revokes a node's
attachments. The tests play the attach/detach controller (they write VolumeAttachments)."""

from __future__ import annotations

from pathlib import Path

from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.cluster.processes import Process
from tests.integration.cluster import Cluster
from tests.integration.fencing.conftest import (
    alive,
    fence_manifest,
    wait_fence_gone,
    wait_fence_phase,
)
from tests.integration.kubelet.conftest import (
    container_status,
    get_pod,
    pod_manifest,
    start_kubelet,
    stop_kubelet,
    wait_phase,
    wait_until,
)
from tests.integration.waiting import recorded


async def make_claim(api: ApiClient, namespace: str, name: str) -> str:
    pvc = await api.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                            "metadata": {"name": name, "namespace": namespace},
                            "spec": {"accessModes": ["ReadWriteOnce"]}})
    return str(pvc["metadata"]["uid"])


async def attach(api: ApiClient, volume: str, node: str, *, attached: bool = True) -> Obj:
    va = await api.create({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
                           "metadata": {"name": volume},
                           "spec": {"attacher": "skiff.io/local", "nodeName": node,
                                    "source": {"persistentVolumeName": volume}}})
    if attached:
        va["status"] = {"attached": True}
        va = await api.update_status(va)
    return va


def writer_pod(namespace: str, node: str, claim: str) -> Obj:
    script = 'echo "$POD_NAME" >> data/owner; echo hello > data/hello; ' \
             'exec sleep 3600'
    return pod_manifest("pet", namespace, node, [{
        "name": "main", "command": ["sh", "-c", script],
        "env": [{"name": "POD_NAME",
                 "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        grace=1, volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim}}])


async def waiting_message(api: ApiClient, namespace: str) -> str:
    pod = await get_pod(api, namespace, "pet")
    if not pod or not pod.get("status", {}).get("containerStatuses"):
        return ""
    waiting = container_status(pod, "main")["state"].get("waiting") or {}
    return f"{waiting.get('reason')}: {waiting.get('message')}" if waiting else ""


async def test_sc1_kubelet_starts_a_pod_only_when_its_volume_is_attached_to_its_node(
        api: ApiClient, namespace: str, shared_cluster: Cluster, tmp_path: Path) -> None:
    volume_root = tmp_path / "volumes"
    node = start_kubelet(shared_cluster, tmp_path, extra=["--volume-root", str(volume_root)])
    try:
        uid = await make_claim(api, namespace, "data")
        volume = f"pvc-{uid}"
        await api.create(writer_pod(namespace, node.name, "data"))
        want = f"ContainerCreating: waiting for volume {volume} to be attached to this node"

        async def waits_with(text: str) -> str:
            message = await waiting_message(api, namespace)
            return message if message.startswith(text) else ""

        await wait_until(lambda: waits_with(want), what="ContainerCreating, not attached")
        events = await recorded(api, namespace, reason="FailedAttachVolume", name="pet")
        assert any(volume in e["message"] for e in events)

        await attach(api, volume, "some-other-node")
        await wait_until(lambda: waits_with(f"{want}: it is attached to node some-other-node"),
                         what="waiting while attached elsewhere")
        await api.delete("volumeattachments", volume)
        va = await attach(api, volume, node.name, attached=False)
        await wait_until(lambda: waits_with(f"{want}: the attachment is not confirmed"),
                         what="waiting until status.attached")
        assert not (volume_root / volume / "hello").exists()
        pod = await get_pod(api, namespace, "pet")
        assert pod is not None and pod["status"]["phase"] == "Pending"

        va["status"] = {"attached": True}
        await api.update_status(va)
        pod = await wait_phase(api, namespace, "pet", "Running")
        await wait_until(lambda: _exists(volume_root / volume / "hello"),
                         what="the pod's write in its volume")
        assert (volume_root / volume / "owner").read_text() == "pet\n"
        pid = int(container_status(pod, "main")["containerID"].removeprefix("process://"))

        # The attachment is taken away while the pod runs: it lost its storage.
        await api.delete("volumeattachments", volume)
        pod = await wait_phase(api, namespace, "pet", "Failed", timeout=15)
        assert pod["status"]["reason"] == "VolumeDetached"
        assert not alive(pid)
        assert await recorded(api, namespace, reason="VolumeDetached", name="pet")
    finally:
        await stop_kubelet(node)


async def test_fn2_storage_agent_revokes_the_nodes_attachments(
        api: ApiClient, namespace: str, shared_cluster: Cluster, fence_agent: Process,
        tmp_path: Path) -> None:
    node = start_kubelet(shared_cluster, tmp_path,
                         extra=["--volume-root", str(tmp_path / "volumes")])
    try:
        uid = await make_claim(api, namespace, "data")
        volume = f"pvc-{uid}"
        await attach(api, volume, node.name)
        other_uid = await make_claim(api, namespace, "other")
        await attach(api, f"pvc-{other_uid}", f"{node.name}-elsewhere")
        await api.create(writer_pod(namespace, node.name, "data"))
        pod = await wait_phase(api, namespace, "pet", "Running")
        pid = int(container_status(pod, "main")["containerID"].removeprefix("process://"))

        await api.create(fence_manifest(node.name, "storage"))
        fence = await wait_fence_phase(api, node.name, "Fenced")
        assert fence["status"]["confirmedAt"]
        assert f"revoked 1 volume attachment(s) of node {node.name}: {volume}" in \
            fence["status"]["message"]
        names = [va["metadata"]["name"]
                 for va in (await api.list("volumeattachments"))["items"]]
        assert volume not in names and f"pvc-{other_uid}" in names
        # A kubelet that still hears the apiserver kills the pod that lost its storage.
        pod = await wait_phase(api, namespace, "pet", "Failed", timeout=15)
        assert pod["status"]["reason"] == "VolumeDetached" and not alive(pid)

        await api.delete("fences", node.name)
        await wait_fence_gone(api, node.name)
        await api.delete("volumeattachments", f"pvc-{other_uid}")
    finally:
        await stop_kubelet(node)


async def test_fn2_network_agent_refuses_in_local_mode_with_a_clear_message(
        api: ApiClient, fence_agent: Process) -> None:
    await api.create(fence_manifest("node-without-network", "network"))
    fence = await wait_fence_phase(api, "node-without-network", "Failed")
    assert fence["status"]["message"].startswith(
        "network fencing needs the compose cluster or network namespaces")
    assert "confirmedAt" not in fence["status"]
    await api.delete("fences", "node-without-network")
    await wait_fence_gone(api, "node-without-network")


async def _exists(path: Path) -> bool:
    return path.exists()
