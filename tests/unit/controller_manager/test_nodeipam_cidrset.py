"""SPEC SB1: the node IPAM CIDR set hands out each block once and reuses released ones."""

from __future__ import annotations

import pytest

from skiff.controller_manager.nodeipam import CidrSet, CidrSetFull


def test_sb1_blocks_are_distinct_and_skip_occupied_ones() -> None:
    cidrs = CidrSet("10.244.0.0/16", 24)
    assert cidrs.occupy("10.244.1.0/24")
    assert not cidrs.occupy("192.168.0.0/24")  # not of this cluster CIDR: ignored
    assert [cidrs.allocate_next() for _ in range(3)] == [
        "10.244.0.0/24", "10.244.2.0/24", "10.244.3.0/24"]


def test_sb1_a_full_cluster_cidr_raises_until_a_block_is_released() -> None:
    cidrs = CidrSet("10.0.0.0/30", 31)
    first, second = cidrs.allocate_next(), cidrs.allocate_next()
    assert {first, second} == {"10.0.0.0/31", "10.0.0.2/31"}
    with pytest.raises(CidrSetFull):
        cidrs.allocate_next()
    cidrs.release(first)
    assert cidrs.allocate_next() == first


def test_sb1_mask_size_outside_the_cluster_cidr_is_rejected() -> None:
    with pytest.raises(ValueError, match="node-cidr-mask-size"):
        CidrSet("10.244.0.0/16", 8)
