"""SPEC SB1 with real processes: node IPAM gives each Node a pod CIDR of the cluster CIDR."""

from __future__ import annotations

import ipaddress

from skiff.client import ApiClient
from tests.integration.controller_manager.conftest import StartControllerManager
from tests.integration.controller_manager.kubelet_double import wait_for


async def test_sb1_each_node_gets_a_distinct_pod_cidr_from_the_cluster_cidr(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager) -> None:
    names = [f"ipam-{i}-{namespace}" for i in range(2)]
    kept = f"ipam-kept-{namespace}"
    for name in names:
        await api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    await api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": kept},
                      "spec": {"podCIDR": "10.77.200.0/24", "podCIDRs": ["10.77.200.0/24"]}})
    controller_manager("--controllers", "nodeipam", "--cluster-cidr", "10.77.0.0/16",
                       "--node-cidr-mask-size", "24")

    async def cidrs() -> list[str] | None:
        got = [(await api.get("nodes", n))["spec"].get("podCIDR") for n in names]
        return [str(c) for c in got] if all(got) else None

    allocated = await wait_for(cidrs, timeout=20, what="both nodes to get a podCIDR")
    assert len(set(allocated)) == 2
    cluster = ipaddress.ip_network("10.77.0.0/16")
    for cidr in allocated:
        net = ipaddress.ip_network(cidr)
        assert net.prefixlen == 24 and net.subnet_of(cluster)
        assert cidr != "10.77.200.0/24"  # a block some node holds is never handed out
    for name in names:
        node = await api.get("nodes", name)
        assert node["spec"]["podCIDRs"] == [node["spec"]["podCIDR"]]
    assert (await api.get("nodes", kept))["spec"]["podCIDR"] == "10.77.200.0/24"
    for name in [*names, kept]:
        await api.delete("nodes", name)
