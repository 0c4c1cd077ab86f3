"""SPEC AX7 with real etcd and two real apiservers: Service cluster IPs are allocated with a
compare-and-swap in etcd (never the same address twice, whichever apiserver is asked),
honoured when explicit, immutable, freed on delete; the `kubernetes` Service lists every
live apiserver."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from skiff.api import ApiError
from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.cluster.processes import free_port
from tests.integration.twoapiservers import TwoApiservers, clients_of, two_apiservers
from tests.integration.waiting import wait_for

RANGE = "10.200.0.0/26"  # 62 addresses: the first the kubernetes Service's, the tenth kube-dns's


def _args(http_port: int) -> list[str]:
    return ["--http-port", str(http_port), "--service-cluster-ip-range", RANGE,
            "--endpoint-reconcile-interval", "1s"]


@pytest.fixture
def two(tmp_path: Path) -> Iterator[TwoApiservers]:
    http1, http2 = free_port(), free_port()
    with two_apiservers(tmp_path, _args(http1), _args(http2),
                        http_ports=(http1, http2)) as both:
        yield both


@pytest.fixture
async def clients(two: TwoApiservers) -> AsyncIterator[tuple[ApiClient, ApiClient]]:
    async with clients_of(two) as both:
        yield both


def service(name: str, namespace: str = "default", cluster_ip: str | None = None) -> Obj:
    spec: Obj = {"ports": [{"name": "http", "port": 80, "targetPort": 8080}],
                  "selector": {"app": name}}
    if cluster_ip is not None:
        spec["clusterIP"] = cluster_ip
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


async def test_ax7_two_apiservers_never_hand_out_the_same_cluster_ip(
        clients: tuple[ApiClient, ApiClient]) -> None:
    a, b = clients
    net = ipaddress.ip_network(RANGE)
    dns = await wait_for(lambda: _get(a, "services", "kube-dns", "kube-system"),
                         what="the kube-dns Service")
    assert dns["spec"]["clusterIP"] == "10.200.0.10"
    # 60 free addresses (62 usable, the kubernetes and kube-dns Services' taken): 60 created
    # at once, half through each apiserver, take every one of them, each once.
    created = await asyncio.gather(*(
        (a if i % 2 else b).create(service(f"s{i}")) for i in range(60)))
    ips = [s["spec"]["clusterIP"] for s in created]
    assert len(set(ips)) == 60
    assert all(ipaddress.ip_address(ip) in net for ip in ips)
    assert "10.200.0.1" not in ips and "10.200.0.10" not in ips
    assert all(s["spec"]["clusterIPs"] == [s["spec"]["clusterIP"]] for s in created)
    with pytest.raises(ApiError) as full:
        await a.create(service("one-too-many"))
    assert full.value.code == 500 and "range is full" in full.value.message
    # deleting one frees exactly its address, and the next Service gets it
    await b.delete("services", "s7", "default")
    again = await a.create(service("after-delete"))
    assert again["spec"]["clusterIP"] == ips[7]


async def test_ax7_explicit_headless_invalid_and_immutable_cluster_ips(
        clients: tuple[ApiClient, ApiClient]) -> None:
    a, b = clients
    explicit = await a.create(service("explicit", cluster_ip="10.200.0.20"))
    assert explicit["spec"]["clusterIPs"] == ["10.200.0.20"]
    with pytest.raises(ApiError) as taken:  # through the other apiserver
        await b.create(service("same", cluster_ip="10.200.0.20"))
    assert taken.value.code == 422
    assert taken.value.message == (
        'Service "same" is invalid: spec.clusterIPs[0]: Invalid value: "10.200.0.20": '
        "failed to allocate IP 10.200.0.20: provided IP is already allocated")
    with pytest.raises(ApiError) as outside:
        await a.create(service("outside", cluster_ip="10.0.0.5"))
    assert outside.value.code == 422 and "spec.clusterIPs[0]" in outside.value.message
    assert f"The range of valid IPs is {RANGE}" in outside.value.message
    with pytest.raises(ApiError) as garbage:
        await a.create(service("garbage", cluster_ip="ten"))
    assert garbage.value.code == 422 and "must be a valid IP address" in garbage.value.message
    headless = await b.create(service("headless", cluster_ip="None"))
    assert headless["spec"]["clusterIPs"] == ["None"]
    changed = {**explicit, "spec": {**explicit["spec"], "clusterIP": "10.200.0.21",
                                    "clusterIPs": ["10.200.0.21"]}}
    with pytest.raises(ApiError) as immutable:
        await b.update(changed)
    assert immutable.value.code == 422 and "may not change once set" in immutable.value.message
    # an update that leaves the address out keeps it
    kept = await a.update({**explicit, "spec": {
        k: v for k, v in explicit["spec"].items() if k not in ("clusterIP", "clusterIPs")}})
    assert kept["spec"]["clusterIP"] == "10.200.0.20"
    await a.delete("services", "explicit", "default")
    reused = await b.create(service("reuses", cluster_ip="10.200.0.20"))
    assert reused["spec"]["clusterIP"] == "10.200.0.20"


async def test_ax7_kubernetes_service_lists_every_live_apiserver(
        two: TwoApiservers, clients: tuple[ApiClient, ApiClient]) -> None:
    a, _ = clients
    kubernetes = await wait_for(lambda: _get(a, "services", "kubernetes"),
                                what="the kubernetes Service")
    assert kubernetes["spec"]["clusterIP"] == "10.200.0.1"
    assert [(p["name"], p["port"]) for p in kubernetes["spec"]["ports"]] == [("https", 443)]
    assert "selector" not in kubernetes["spec"]

    async def endpoints() -> set[tuple[str, int]]:
        slices = await a.list("endpointslices", namespace="default",
                              label_selector="kubernetes.io/service-name=kubernetes")
        return {(addr, port["port"]) for s in slices["items"] for port in s["ports"]
                for e in s["endpoints"] for addr in e["addresses"]
                if e["conditions"]["ready"]}

    both = {("127.0.0.1", two.http_ports[0]), ("127.0.0.1", two.http_ports[1])}
    await wait_for(lambda: _equal(endpoints, both), timeout=30,
                   what="both apiservers in the kubernetes EndpointSlices")
    two.second.stop()  # a clean shutdown withdraws its endpoint
    await wait_for(lambda: _equal(endpoints, {("127.0.0.1", two.http_ports[0])}),
                   timeout=30, what="the stopped apiserver to leave the endpoints")


async def _get(api: ApiClient, resource: str, name: str,
               namespace: str = "default") -> Obj | None:
    try:
        return await api.get(resource, name, namespace=namespace)
    except ApiError:
        return None


async def _equal(check: Callable[[], Awaitable[set[tuple[str, int]]]],
                 wanted: set[tuple[str, int]]) -> bool:
    return await check() == wanted

