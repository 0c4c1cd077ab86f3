"""A Job-style pod (restartPolicy Never) with a native sidecar: once the main container
completes the kubelet stops the sidecar (SIGTERM, exit 143), and the pod ends Succeeded
with Initialized=True reason PodCompleted, as Kubernetes reports it (`kubectl get pods`
shows Completed, not Init:Error)."""

from __future__ import annotations

from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.kubelet.conftest import (
    Node,
    container_status,
    get_pod,
    pod_manifest,
    wait_until,
)


async def test_lc5_job_pod_with_a_sidecar_ends_initialized_pod_completed(
        api: ApiClient, namespace: str, node: Node) -> None:
    await api.create(pod_manifest("p", namespace, node.name, [{
        "name": "main", "command": ["sh", "-c", "sleep 1"]}], grace=5,
        restartPolicy="Never",
        initContainers=[{"name": "proxy", "restartPolicy": "Always",
                         "command": ["sleep", "3600"]}]))

    async def finished() -> Obj | None:
        pod = await get_pod(api, namespace, "p")
        if pod is None or pod["status"].get("phase") != "Succeeded":
            return None
        sidecar = container_status(pod, "proxy")
        return pod if sidecar["state"].get("terminated") else None

    pod = await wait_until(finished, timeout=30, what="Succeeded with the sidecar stopped")
    conditions = {c["type"]: c for c in pod["status"]["conditions"]}
    assert conditions["Initialized"]["status"] == "True", conditions
    assert conditions["Initialized"].get("reason") == "PodCompleted"
    for kind in ("ContainersReady", "Ready"):
        assert conditions[kind]["status"] == "False"
        assert conditions[kind].get("reason") == "PodCompleted"
    assert container_status(pod, "main")["state"]["terminated"]["reason"] == "Completed"
    await api.delete("pods", "p", namespace, grace_period_seconds=1)
