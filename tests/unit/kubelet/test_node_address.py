"""In `--netns` mode each Node reports its own namespace address as InternalIP
(kubelet `--node-ip`), not 127.0.0.1 for every node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skiff.client.fake import FakeClient
from skiff.clock import FakeClock
from skiff.cluster.netns.cluster import NetnsCluster
from skiff.cluster.netns.hosts import Host, Network
from skiff.cluster.topology import HA, SINGLE, Topology
from skiff.kubelet.node import NodeAgent
from skiff.kubelet.settings import parse_settings


async def test_node_ip_flag_is_the_nodes_internal_ip() -> None:
    settings = parse_settings(["--node-name", "node-2", "--node-ip", "10.231.0.102"])
    api = FakeClient({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-2"},
                      "status": {}})
    agent = NodeAgent(api=api, clock=FakeClock(), node_name="node-2",
                      labels={}, taints=[], capacity={"cpu": "1"}, health_port=10248,
                      node_ip=settings.node_ip, lease_duration=40, renew_interval=10,
                      status_update_frequency=10, status_report_frequency=300)
    await agent._write_status(await api.get("nodes", "node-2"))
    node = api.stored("nodes", "node-2")
    assert node is not None
    addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert addresses == {"InternalIP": "10.231.0.102", "Hostname": "node-2"}


def test_node_ip_defaults_to_loopback() -> None:
    assert parse_settings(["--node-name", "node-1"]).node_ip == "127.0.0.1"


@pytest.mark.parametrize("shape", [SINGLE, HA], ids=["netns", "ha-netns"])
def test_netns_cluster_gives_each_kubelet_its_namespace_address(
        tmp_path: Path, shape: Topology) -> None:
    """Both `--netns` and `--ha --netns`: each kubelet's InternalIP is its host's address and
    its pods' sandboxes join the cluster's own bridge namespace (SB2), never the kubelet's
    machine-wide default (the --ha variant once left both out)."""
    network = Network("c0ffee", "skiff-c0ffee-net")
    for i in (1, 2):
        network.hosts[f"node-{i}"] = Host(f"node-{i}", f"skiff-c0ffee-node-{i}",
                                          f"10.231.0.{100 + i}", f"v{100 + i}")
    cluster = NetnsCluster(data_dir=tmp_path, nodes=2, topology=shape, network=network)
    node_ips, pod_networks = {}, set()
    for _name, host, module, args in cluster._services():
        if module == "skiff.kubelet":
            node_ips[host] = args[args.index("--node-ip") + 1]
            pod_networks.add(args[args.index("--pod-network-namespace") + 1])
    assert node_ips == {"node-1": "10.231.0.101", "node-2": "10.231.0.102"}
    assert pod_networks == {"skiff-c0ffee-net"}


def test_node_ip_auto_is_the_address_the_host_name_resolves_to(monkeypatch: Any) -> None:
    """Compose nodes (`--node-ip auto`): Kubernetes' kubelet without --node-ip takes the
    address its host name resolves to; one that does not resolve is a clear start error."""
    import socket

    import pytest

    from skiff.settings import SettingsError

    monkeypatch.setattr(socket, "gethostname", lambda: "node-7")
    monkeypatch.setattr(socket, "gethostbyname",
                        lambda name: "172.18.0.7" if name == "node-7" else "")
    assert parse_settings(["--node-ip", "auto"]).node_ip == "172.18.0.7"

    def unknown(name: str) -> str:
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "gethostbyname", unknown)
    with pytest.raises(SettingsError, match="--node-ip auto: the host name 'node-7' does not "
                                            "resolve"):
        parse_settings(["--node-ip", "auto"])
