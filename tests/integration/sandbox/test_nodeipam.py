"""SPEC SB1 with real processes: node IPAM gives each Node a pod CIDR of the cluster CIDR."""

from __future__ import annotations

import ipaddress

from skiff.client import ApiClient
from tests.integration.sandbox.conftest import CLUSTER_CIDR, SandboxCluster
from tests.integration.waiting import wait_for


async def test_sb1_each_node_gets_a_distinct_pod_cidr_from_the_cluster_cidr(
        sb_api: ApiClient, sandbox_cluster: SandboxCluster) -> None:
    names = [n.name for n in sandbox_cluster.nodes] + ["ipam-extra"]
    await sb_api.create({"apiVersion": "v1", "kind": "Node",
                         "metadata": {"name": "ipam-extra"}})
    await sb_api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ipam-kept"},
                         "spec": {"podCIDR": "10.123.200.0/24",
                                  "podCIDRs": ["10.123.200.0/24"]}})

    async def cidrs() -> list[str] | None:
        got = [(await sb_api.get("nodes", n))["spec"].get("podCIDR") for n in names]
        return [str(c) for c in got] if all(got) else None

    allocated = await wait_for(cidrs, timeout=20, what="every node to get a podCIDR")
    assert len(set(allocated)) == len(names)
    for cidr in allocated:
        net = ipaddress.IPv4Network(cidr)
        assert net.prefixlen == 24 and net.subnet_of(ipaddress.IPv4Network(CLUSTER_CIDR))
        assert cidr != "10.123.200.0/24"  # a block some node holds is never handed out
    for name in names:
        node = await sb_api.get("nodes", name)
        assert node["spec"]["podCIDRs"] == [node["spec"]["podCIDR"]]
    assert (await sb_api.get("nodes", "ipam-kept"))["spec"]["podCIDR"] == "10.123.200.0/24"
    for name in ("ipam-extra", "ipam-kept"):
        await sb_api.delete("nodes", name)
