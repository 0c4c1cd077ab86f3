"""SPEC AX7 for node ports, with real etcd and two real apiservers: NodePort and
LoadBalancer Services get a node port from `--service-node-port-range`, held with a
compare-and-swap in etcd (never the same port twice, whichever apiserver is asked),
honoured when explicit, kept on updates that leave it out, freed on delete and when the
type changes to ClusterIP; a node port on a ClusterIP Service is 422 Forbidden."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aetcd
import pytest

from skiff.api import ApiError
from skiff.api.types import Obj
from skiff.apiserver.storage.values import encode_value
from skiff.client import ApiClient
from tests.integration.twoapiservers import TwoApiservers, clients_of, two_apiservers
from tests.integration.waiting import wait_for

PORTS = "30100-30109"  # ten ports: small enough to fill


@pytest.fixture
def two(tmp_path: Path) -> Iterator[TwoApiservers]:
    args = ["--service-node-port-range", PORTS, "--http-port", "-1",
            "--service-ip-repair-interval", "0.5s"]
    with two_apiservers(tmp_path, args, args) as both:
        yield both


@pytest.fixture
async def clients(two: TwoApiservers) -> AsyncIterator[tuple[ApiClient, ApiClient]]:
    async with clients_of(two) as both:
        yield both


def service(name: str, *, type_: str = "NodePort", node_port: int | None = None,
            **spec: object) -> Obj:
    port: Obj = {"name": "http", "port": 80, "targetPort": 8080}
    if node_port is not None:
        port["nodePort"] = node_port
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"type": type_, "ports": [port], "selector": {"app": name}, **spec}}


def node_port(svc: Obj) -> int:
    return int(svc["spec"]["ports"][0]["nodePort"])


async def test_ax7_two_apiservers_never_hand_out_the_same_node_port(
        clients: tuple[ApiClient, ApiClient]) -> None:
    a, b = clients
    created = await asyncio.gather(*(
        (a if i % 2 else b).create(service(f"s{i}")) for i in range(10)))
    ports = [node_port(s) for s in created]
    assert sorted(ports) == list(range(30100, 30110))
    with pytest.raises(ApiError) as full:
        await a.create(service("one-too-many", type_="LoadBalancer"))
    assert full.value.code == 500
    assert "failed to allocate a nodePort: range is full" in full.value.message
    await b.delete("services", "s3", "default")
    again = await a.create(service("after-delete"))
    assert node_port(again) == ports[3]


async def test_ax7_explicit_node_ports_out_of_range_taken_and_on_cluster_ip(
        clients: tuple[ApiClient, ApiClient]) -> None:
    a, b = clients
    explicit = await a.create(service("explicit", node_port=30105))
    assert node_port(explicit) == 30105
    with pytest.raises(ApiError) as taken:  # through the other apiserver
        await b.create(service("same", node_port=30105))
    assert taken.value.code == 422
    assert taken.value.message == (
        'Service "same" is invalid: spec.ports[0].nodePort: Invalid value: 30105: '
        "provided port is already allocated")
    with pytest.raises(ApiError) as outside:
        await a.create(service("outside", node_port=31000))
    assert outside.value.code == 422
    assert ("provided port is not in the valid range. The range of valid ports is "
            "30100-30109") in outside.value.message
    with pytest.raises(ApiError) as forbidden:
        await a.create(service("clusterip", type_="ClusterIP", node_port=30101))
    assert forbidden.value.code == 422
    assert ("spec.ports[0].nodePort: Forbidden: may not be used when `type` is "
            "'ClusterIP'") in forbidden.value.message
    # nothing was held by the refused creates: the ports are still free
    assert node_port(await b.create(service("free", node_port=30101))) == 30101


async def test_ax7_updates_keep_node_ports_and_a_type_change_frees_them(
        clients: tuple[ApiClient, ApiClient]) -> None:
    a, b = clients
    web = await a.create(service("web"))
    number = node_port(web)
    # `kubectl replace` of the original manifest: no nodePort, the allocated one stays
    replaced = service("web")
    replaced["metadata"]["resourceVersion"] = web["metadata"]["resourceVersion"]
    kept = await b.update(replaced)
    assert node_port(kept) == number
    # to ClusterIP (as `kubectl apply` of a manifest that drops the type sends it, the
    # node port still in the object): the node port is cleared and free for others
    as_cluster_ip = {**kept, "spec": {**kept["spec"], "type": "ClusterIP"}}
    plain = await a.update(as_cluster_ip)
    assert "nodePort" not in plain["spec"]["ports"][0]
    other = await b.create(service("other", node_port=number))
    assert node_port(other) == number
    # back to NodePort: a new port, not the one the other Service holds now
    back = await a.update({**plain, "spec": {**plain["spec"], "type": "NodePort"}})
    assert node_port(back) != number
    with pytest.raises(ApiError) as clash:
        await b.update({**back, "spec": {**back["spec"], "ports": [
            {**back["spec"]["ports"][0], "nodePort": number}]}})
    assert clash.value.code == 422 and "provided port is already allocated" in \
        clash.value.message


async def test_ax7_repair_frees_node_ports_and_cluster_ips_no_service_holds(
        two: TwoApiservers, clients: tuple[ApiClient, ApiClient]) -> None:
    """An apiserver that died between holding a port (or address) and storing its Service
    leaves it held in etcd; the repair loops free it once two passes saw it unowned."""
    a, _ = clients
    held = await a.create(service("held", node_port=30102))
    async with aetcd.Client(port=two.cluster.etcd_port) as etcd:
        await etcd.put(b"/skiff/servicenodeports/30107", encode_value(
            {"kind": "ServiceNodePort", "service": "default/gone", "uid": "dead"}))
        await etcd.put(b"/skiff/serviceips/10.96.0.77", encode_value(
            {"kind": "IPAddress", "service": "default/gone", "uid": "dead"}))

    async def created() -> Obj | None:
        try:
            return await a.create(service("late", node_port=30107, clusterIP="10.96.0.77"))
        except ApiError as err:
            assert "already allocated" in err.message, err.message
            return None

    late = await wait_for(created, timeout=30, what="the stray holds to be freed")
    assert node_port(late) == 30107 and late["spec"]["clusterIP"] == "10.96.0.77"
    # the port a live Service holds is never freed
    with pytest.raises(ApiError) as taken:
        await a.create(service("thief", node_port=node_port(held)))
    assert "provided port is already allocated" in taken.value.message
