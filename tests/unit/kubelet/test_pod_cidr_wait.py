"""A pod that reaches a sandboxing kubelet before the nodeipam controller has given its Node
a podCIDR waits for one (ContainerCreating, as a real node's pods wait for the network
plugin), instead of running in the node's network with IP 127.0.0.1 (SB1/SB2: `skiff up`
then `apply` at once raced the controller). Without node IPAM it stops waiting."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from skiff.kubelet.sandbox import SandboxError, SandboxManager
from skiff.kubelet.sandbox.network import PodNetwork

POD = {"metadata": {"uid": "u-1", "name": "p", "namespace": "default"}, "spec": {}}


class _Nodes:
    """The apiserver's answer for the Node: no podCIDR yet."""

    async def get(self, resource: str, name: str, namespace: str | None = None) -> Any:
        return {"metadata": {"name": name}, "spec": {}}


def _manager(tmp_path: Path, wait: float) -> SandboxManager:
    return SandboxManager(api=_Nodes(), node_name="node-1",  # type: ignore[arg-type]
                          network=PodNetwork(namespace="unused", ipam_dir=tmp_path),
                          pod_cidr_wait=wait)


def test_sb1_a_pod_waits_for_the_nodes_pod_cidr_while_nodeipam_is_expected(
        tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="no spec.podCIDR yet"):
        asyncio.run(_manager(tmp_path, 30.0).ensure(POD))


def test_sb1_without_node_ipam_the_pod_runs_unsandboxed_at_once(tmp_path: Path) -> None:
    assert asyncio.run(_manager(tmp_path, 0.0).ensure(POD)) is None
