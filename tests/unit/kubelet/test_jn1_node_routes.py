"""SPEC JN1: the routes kind's layout keeps (kubelet --pod-network=node): one per other
Node's podCIDR via its InternalIP, nothing for itself, for a Node without either, or for a
podCIDR that would take this node's own pods."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.kubelet.noderoutes import RoutePlan, desired_routes, plan_routes
from skiff.kubelet.settings import parse_settings
from skiff.settings import SettingsError


def node(name: str, cidr: str | None, ip: str | None) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": name}, "spec": {}, "status": {}}
    if cidr:
        obj["spec"]["podCIDR"] = cidr
    if ip:
        obj["status"]["addresses"] = [{"type": "Hostname", "address": name},
                                      {"type": "InternalIP", "address": ip}]
    return obj


def test_jn1_a_route_per_other_nodes_pod_cidr_via_its_internal_ip() -> None:
    nodes = [node("node-1", "10.244.1.0/24", "172.20.0.5"),
             node("node-2", "10.244.2.0/24", "172.20.0.6"),
             node("node-3", "10.244.3.0/24", "172.20.0.7"),
             node("new", None, "172.20.0.8"),          # no podCIDR yet
             node("unknown", "10.244.9.0/24", None)]   # no address yet
    assert desired_routes(nodes, own="node-1") == {"10.244.2.0/24": "172.20.0.6",
                                                   "10.244.3.0/24": "172.20.0.7"}
    assert desired_routes(nodes, own="node-3") == {"10.244.1.0/24": "172.20.0.5",
                                                   "10.244.2.0/24": "172.20.0.6"}


def test_jn1_no_route_that_would_take_this_nodes_pods_or_loop_back() -> None:
    nodes = [node("node-1", "10.244.1.0/24", "172.20.0.5"),
             node("evil", "10.244.1.0/25", "172.20.0.9"),       # overlaps node-1's own
             node("local", "10.244.4.0/24", "127.0.0.1"),       # a loopback gateway
             node("bad", "not-a-cidr", "172.20.0.10"),
             node("v6", "fd00::/64", "172.20.0.11")]
    assert desired_routes(nodes, own="node-1") == {}


def test_jn1_changes_are_replacements_and_deletions_of_own_routes_only() -> None:
    present = {"10.244.2.0/24": "172.20.0.6", "10.244.3.0/24": "172.20.0.7",
               "10.244.4.0/24": "172.20.0.8"}
    wanted = {"10.244.2.0/24": "172.20.0.6",       # unchanged
              "10.244.3.0/24": "172.20.0.17",      # the node got a new address
              "10.244.5.0/24": "172.20.0.9"}       # a node joined
    assert plan_routes(present, wanted) == RoutePlan(
        replace={"10.244.3.0/24": "172.20.0.17", "10.244.5.0/24": "172.20.0.9"},
        delete=["10.244.4.0/24"])                 # its node left
    assert plan_routes(wanted, wanted) == RoutePlan(replace={}, delete=[])


def test_jn1_pod_network_setting_is_shared_or_node() -> None:
    assert parse_settings(["--pod-network=node"]).pod_network == "node"
    assert parse_settings([]).pod_network == "shared"
    with pytest.raises(SettingsError, match="--pod-network: 'kind' is not shared or node"):
        parse_settings(["--pod-network=kind"])
