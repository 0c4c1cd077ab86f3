"""Partitions in a `skiff up --netns` cluster: nftables drop rules between hosts.

The rules live in the cluster's own table `inet skiff_<id>`, created inside the affected
hosts' namespaces only. A cut between hosts A and B drops, in A's input chain, everything
from B's address and, in B's input chain, everything from A's: both directions die at the
receiver, so senders see a silent black hole (connects hang, established streams stall), as
on a real partition. Each rule carries the comment `skiff-cut:<a>:<b>`; `heal` deletes
exactly those rules by handle and the table once it is empty. Pods' traffic is cut too
(`pods`). `NetnsPartitions` is this cluster kind's side of the partition seam
(`skiff.cluster.chaos.partitions`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from skiff.cluster.netns.commands import CUT_COMMENT, NetnsError, cut_rules, nft
from skiff.cluster.netns.hosts import Host, Network, existing_namespaces
from skiff.cluster.netns.pods import heal_pods, partition_pods

__all__ = ["NetnsPartitions", "heal", "partition"]


def _ensure_table(netns: str, table: str) -> None:
    nft(netns, "-f", "-", stdin=(
        f"table inet {table} {{\n"
        f"  chain input {{ type filter hook input priority -10; policy accept; }}\n"
        f"}}\n"))


def _cut_rules(netns: str, table: str) -> list[tuple[int, str]]:
    """(handle, comment) of every cut rule in the table of `netns` ([] without a table)."""
    return cut_rules(netns, "table", "inet", table, prefix=CUT_COMMENT)


def _add_cut(network: Network, here: Host, peer: Host, comment: str) -> bool:
    if any(c == comment for _, c in _cut_rules(here.netns, network.table)):
        return False
    _ensure_table(here.netns, network.table)
    nft(here.netns, "add", "rule", "inet", network.table, "input", "ip", "saddr", peer.ip,
         "drop", "comment", f'"{comment}"')
    return True


def partition(network: Network, a: str, b: str | None = None) -> str:
    """Cut host `a` from host `b`, or from every other host of the cluster."""
    here = network.host(a)
    # `--from etcd` in an --ha cluster: every replica (etcd-1, etcd-2, ...) but `a` itself.
    group = [h for n, h in network.hosts.items()
             if b is not None and b not in network.hosts and n != a and
             n.startswith(f"{b}-") and n[len(b) + 1:].isdigit()]
    peers = group or ([network.host(b)] if b is not None else
                      [h for h in network.hosts.values() if h.name != a])
    if b == a:
        raise NetnsError(f"cannot partition {a} from itself; name another component")
    added = 0
    for peer in peers:
        comment = f"{CUT_COMMENT}:{here.name}:{peer.name}"
        added += _add_cut(network, here, peer, comment)
        added += _add_cut(network, peer, here, comment)
    what = f"from {b}" if b is not None else "from every other host"
    if not added:
        return f"{a} was already partitioned {what}"
    return (f"partitioned {a} ({here.ip}) {what}: packets between them are dropped "
            f"(nft table inet {network.table}); `skiff chaos heal {a}` ends it")


def heal(network: Network, a: str | None = None) -> str:
    """Delete every cut rule that involves host `a` (every cut rule when None)."""
    if a is not None:
        network.host(a)
    removed = 0
    for host in network.hosts.values():
        if host.netns not in existing_namespaces():
            continue
        rules = _cut_rules(host.netns, network.table)
        for handle, comment in rules:
            ends = comment.split(":")[1:]
            if a is None or a in ends:
                nft(host.netns, "delete", "rule", "inet", network.table, "input",
                     "handle", str(handle))
                removed += 1
        if rules and not _cut_rules(host.netns, network.table):
            nft(host.netns, "delete", "table", "inet", network.table, check=False)
    if not removed:
        return (f"nothing to heal: {a} is not partitioned" if a is not None else
                "nothing to heal: no host of this cluster is partitioned")
    return f"healed {a or 'every partition'}: removed {removed} drop rule(s)"


@dataclass
class NetnsPartitions:
    """`skiff chaos partition|heal` in a --netns cluster: host cuts, then pod cuts."""

    network: Network
    data_dir: Path

    def partition(self, node: str, from_component: str | None = None) -> list[str]:
        lines = [partition(self.network, node, from_component)]
        pods = partition_pods(self.network, self.data_dir, node, from_component)
        return lines + ([pods] if pods else [])

    def heal(self, node: str | None = None) -> list[str]:
        line = heal(self.network, node)
        heal_pods(self.network, node)
        return [line]
