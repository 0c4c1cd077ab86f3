"""A pod that reaches a sandboxing kubelet before the nodeipam controller has given its Node
a podCIDR waits for one (ContainerCreating, as a real node's pods wait for the network
plugin), instead of running in the node's network with IP 127.0.0.1 (SB1/SB2: `skiff up`
then `apply` at once raced the controller). Without node IPAM it stops waiting."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from skiff.client.fake import FakeClient
from skiff.kubelet.sandbox import SandboxError, SandboxManager
from skiff.kubelet.sandbox.network import PodNetwork

POD = {"metadata": {"uid": "u-1", "name": "p", "namespace": "default"}, "spec": {}}


def _manager(tmp_path: Path, wait: float) -> SandboxManager:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"},
            "spec": {}}  # no podCIDR yet
    return SandboxManager(api=FakeClient(node), node_name="node-1",
                          network=PodNetwork(namespace="unused", ipam_dir=tmp_path),
                          pod_cidr_wait=wait)


def test_sb1_a_pod_waits_for_the_nodes_pod_cidr_while_nodeipam_is_expected(
        tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="no spec.podCIDR yet"):
        asyncio.run(_manager(tmp_path, 30.0).ensure(POD))


def test_sb1_without_node_ipam_the_pod_runs_unsandboxed_at_once(tmp_path: Path) -> None:
    assert asyncio.run(_manager(tmp_path, 0.0).ensure(POD)) is None
