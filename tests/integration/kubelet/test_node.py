"""Node registration, Lease renewal and node status, against a real kubelet process."""

from __future__ import annotations

from skiff.client import ApiClient
from skiff.clock import parse_rfc3339
from tests.integration.kubelet.conftest import Node, wait_until


async def test_node_is_registered_with_standard_labels_and_status(api: ApiClient,
                                                                  node: Node) -> None:
    obj = await api.get("nodes", node.name)
    labels = obj["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == node.name
    assert labels["kubernetes.io/os"] == "linux"
    assert labels["kubernetes.io/arch"]
    status = obj["status"]
    assert status["capacity"] == {"cpu": "8", "memory": "64Gi", "pods": "110"}
    assert status["allocatable"]["pods"] == "110"
    assert {"type": "InternalIP", "address": "127.0.0.1"} in status["addresses"]
    assert {"type": "Hostname", "address": node.name} in status["addresses"]
    port = int(node.health_target.rsplit(":", 1)[1])
    assert status["daemonEndpoints"]["kubeletEndpoint"]["Port"] == port
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"


async def test_node_lease_is_renewed(api: ApiClient, node: Node) -> None:
    lease = await api.get("leases", node.name, "kube-node-lease")
    assert lease["spec"]["holderIdentity"] == node.name
    assert lease["spec"]["leaseDurationSeconds"] == 4
    first = parse_rfc3339(lease["spec"]["renewTime"])

    async def renewed() -> bool:
        again = await api.get("leases", node.name, "kube-node-lease")
        return parse_rfc3339(again["spec"]["renewTime"]) > first

    # Renewed every quarter of the 4 s lease duration.
    await wait_until(renewed, timeout=3.0, what="a lease renewal")
