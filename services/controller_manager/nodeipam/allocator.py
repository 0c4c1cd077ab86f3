"""The CIDR set behind node IPAM: which `/node-cidr-mask-size` blocks of the cluster CIDR
are taken (Kubernetes' `cidrset`, the range allocator's bookkeeping).

Pure logic: the controller marks the blocks nodes already hold, asks for the next free one
for a node without, and releases a deleted node's block.
"""

from __future__ import annotations

import ipaddress

__all__ = ["CidrSet", "CidrSetFull"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class CidrSetFull(Exception):
    """Every block of the cluster CIDR is allocated."""


class CidrSet:
    def __init__(self, cluster_cidr: str, node_mask_size: int) -> None:
        self.cluster = ipaddress.ip_network(cluster_cidr, strict=False)
        if not self.cluster.prefixlen <= node_mask_size <= self.cluster.max_prefixlen:
            raise ValueError(f"--node-cidr-mask-size {node_mask_size} must be between the "
                             f"cluster CIDR's prefix ({self.cluster.prefixlen}) and "
                             f"{self.cluster.max_prefixlen}")
        self.mask = node_mask_size
        self.size = 1 << (node_mask_size - self.cluster.prefixlen)
        self._used: set[int] = set()
        self._next = 0

    def _index(self, cidr: str) -> int | None:
        try:
            net = ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            return None
        if net.version != self.cluster.version or net.prefixlen != self.mask:
            return None
        if not net.subnet_of(self.cluster):  # type: ignore[arg-type]
            return None
        return (int(net.network_address) - int(self.cluster.network_address)) >> (
            self.cluster.max_prefixlen - self.mask)

    def _block(self, index: int) -> Network:
        step = 1 << (self.cluster.max_prefixlen - self.mask)
        base = int(self.cluster.network_address) + index * step
        return ipaddress.ip_network((base, self.mask))

    def occupy(self, cidr: str) -> bool:
        """Mark a block a node already holds; False if it is not one of this set's blocks."""
        index = self._index(cidr)
        if index is None:
            return False
        self._used.add(index)
        return True

    def release(self, cidr: str) -> None:
        index = self._index(cidr)
        if index is not None:
            self._used.discard(index)

    def allocate_next(self) -> str:
        """The next free block, round robin from the last one handed out."""
        for offset in range(self.size):
            index = (self._next + offset) % self.size
            if index not in self._used:
                self._used.add(index)
                self._next = (index + 1) % self.size
                return str(self._block(index))
        raise CidrSetFull(f"the cluster CIDR {self.cluster} has no free /{self.mask} left")
