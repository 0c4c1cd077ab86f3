"""Pod traffic in `skiff up --netns` clusters (SPEC SB2): partitions cut pods too.

In --netns mode the kubelets attach their pods' sandboxes to a `skiff0` bridge inside the
cluster's existing bridge namespace (`skiff-<id>-net`), one gateway per node's podCIDR;
traffic between pods of different nodes is routed there. `skiff chaos partition node-1`
therefore also adds nftables rules to that namespace's forward chain (in the cluster's own
table) that drop what node-1's pods exchange with pods outside node-1's podCIDR (or only
with the named peer node's); `heal` deletes them by their `skiff-cut` comment. A node's
podCIDR is read from its kubelet's IPAM directory (`<data-dir>/nodes/<node>/ipam/`).
"""

from __future__ import annotations

from pathlib import Path

from skiff.cluster.netns.commands import CUT_COMMENT, cut_rules, nft
from skiff.cluster.netns.hosts import Network

__all__ = ["heal_pods", "node_pod_cidrs", "partition_pods"]

POD_CUT = f"{CUT_COMMENT}-pods"


def node_pod_cidrs(data_dir: Path, node: str) -> list[str]:
    ipam = data_dir / "nodes" / node / "ipam"
    return sorted(p.name.replace("_", "/") for p in ipam.iterdir()) if ipam.is_dir() else []


def _rules(network: Network) -> list[tuple[int, str]]:
    return cut_rules(network.bridge_netns, "chain", "inet", network.table, "forward",
                     prefix=POD_CUT)


def partition_pods(network: Network, data_dir: Path, a: str, b: str | None) -> str:
    """Drop pod traffic of node `a` to and from other nodes' pods (or node `b`'s only)."""
    cidrs = node_pod_cidrs(data_dir, a)
    peers = node_pod_cidrs(data_dir, b) if b is not None else []
    if not cidrs or (b is not None and not peers):
        return ""
    nft(network.bridge_netns, "-f", "-", stdin=(
        f"table inet {network.table} {{\n"
        f"  chain forward {{ type filter hook forward priority -10; policy accept; }}\n"
        f"}}\n"))
    comment = f'"{POD_CUT}:{a}:{b or "*"}"'
    for cidr in cidrs:
        others = peers or [cidr]
        op = "==" if peers else "!="
        for other in others:
            for src, dst, cmp_dst in (("saddr", "daddr", other), ("daddr", "saddr", other)):
                nft(network.bridge_netns, "add", "rule", "inet", network.table, "forward",
                     "ip", src, cidr, "ip", dst, op, cmp_dst, "drop", "comment", comment)
    return f"and cut the pod traffic of {a} ({', '.join(cidrs)})"


def heal_pods(network: Network, a: str | None) -> int:
    removed = 0
    for handle, comment in _rules(network):
        ends = comment.split(":")[1:]
        if a is None or a in ends:
            nft(network.bridge_netns, "delete", "rule", "inet", network.table, "forward",
                 "handle", str(handle))
            removed += 1
    return removed
