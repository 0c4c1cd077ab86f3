"""SPEC JN1: the node-routes controller's kernel side (kubelet --pod-network=node), in a
network namespace of this test's own: routes to other nodes' podCIDRs are added, replaced
and removed, a route whose gateway is unreachable now is skipped (and tried again), and
routes this controller did not make are never touched."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import TypeVar

import pytest
from pyroute2 import IPRoute

from skiff.kubelet.noderoutes import ROUTE_PROTOCOL, RoutePlan, apply_routes
from skiff.kubelet.sandbox.linux import CLONE_NEWNET, unshare

pytestmark = pytest.mark.integration

T = TypeVar("T")


def in_fresh_netns(fn: Callable[[], T]) -> T:
    """`fn()` on a thread of its own in a new network namespace (gone with the thread)."""
    out: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            unshare(CLONE_NEWNET)
            out.append(fn())
        except BaseException as err:  # handed to the test
            errors.append(err)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return out[0]


def routes(ipr: IPRoute) -> dict[str, tuple[str, int]]:
    return {f"{r.get_attr('RTA_DST')}/{r['dst_len']}": (str(r.get_attr("RTA_GATEWAY")),
                                                        r["proto"])
            for r in ipr.get_routes(family=socket.AF_INET, table=254)
            if r.get_attr("RTA_GATEWAY")}


def scenario() -> list[object]:
    seen: list[object] = []
    with IPRoute() as ipr:  # eth0-like: the node's address on the compose network
        ipr.link("add", ifname="n0", kind="veth", peer="n1")
        n0 = ipr.link_lookup(ifname="n0")[0]
        ipr.addr("add", index=n0, address="172.30.0.5", prefixlen=24)
        for name in ("n0", "n1"):
            ipr.link("set", index=ipr.link_lookup(ifname=name)[0], state="up")
        ipr.route("add", dst="10.99.0.0/16", gateway="172.30.0.1")  # someone else's
    seen.append(apply_routes({"10.244.2.0/24": "172.30.0.6", "10.244.3.0/24": "172.30.0.7",
                              "10.244.4.0/24": "192.0.2.9"}))  # not on any link now
    with IPRoute() as ipr:
        seen.append(routes(ipr))
    seen.append(apply_routes({"10.244.2.0/24": "172.30.0.16"}))
    with IPRoute() as ipr:
        seen.append(routes(ipr))
    return seen


def test_jn1_routes_follow_the_nodes_and_leave_other_routes_alone() -> None:
    first, after_first, second, after_second = in_fresh_netns(scenario)
    assert first == RoutePlan(replace={"10.244.2.0/24": "172.30.0.6",
                                       "10.244.3.0/24": "172.30.0.7"}, delete=[])
    assert after_first == {"10.244.2.0/24": ("172.30.0.6", ROUTE_PROTOCOL),
                           "10.244.3.0/24": ("172.30.0.7", ROUTE_PROTOCOL),
                           "10.99.0.0/16": ("172.30.0.1", 4)}  # RTPROT_STATIC: untouched
    assert second == RoutePlan(replace={"10.244.2.0/24": "172.30.0.16"},
                               delete=["10.244.3.0/24"])
    assert after_second == {"10.244.2.0/24": ("172.30.0.16", ROUTE_PROTOCOL),
                            "10.99.0.0/16": ("172.30.0.1", 4)}
