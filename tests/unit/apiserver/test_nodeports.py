"""SPEC AX7 node port rules that need no etcd: the range flag, the static band random
picks avoid, what an update keeps or clears, and ValidateService's node port checks (the
allocation itself, across two apiservers, is in tests/integration/test_node_ports.py)."""

from __future__ import annotations

import pytest

from skiff.api.types import Obj
from skiff.api.validation import validate
from skiff.apiserver.registry.service.nodeports import PortRange, _pick, prepare_update


def svc(type_: str = "NodePort", *ports: Obj) -> Obj:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"type": type_, "ports": list(ports) or [{"name": "http", "port": 80}]}}


@pytest.mark.parametrize(("text", "base", "last"), [
    ("30000-32767", 30000, 32767), ("30000+10", 30000, 30010), ("8080", 8080, 8080)])
def test_ax7_node_port_range_reads_like_kubernetes(text: str, base: int, last: int) -> None:
    span = PortRange.parse(text)
    assert (span.base, span.last) == (base, last)


@pytest.mark.parametrize("text", ["", "a-b", "0-10", "30000-70000", "200-100"])
def test_ax7_bad_node_port_range_names_the_flag(text: str) -> None:
    with pytest.raises(ValueError, match="--service-node-port-range"):
        PortRange.parse(text)


def test_ax7_random_node_ports_come_from_above_the_static_band_first() -> None:
    span = PortRange.parse("30000-32767")
    assert span.static_band == 86  # min(max(16, 2768/32), 128)
    picks = {_pick(span, set()) for _ in range(300)}
    assert all(p is not None and p >= 30086 for p in picks)
    upper = set(range(30086, 32768))
    assert _pick(span, upper) in range(30000, 30086)  # the band once the rest is full
    assert _pick(span, upper | set(range(30000, 30086))) is None


def test_ax7_update_without_node_port_keeps_the_old_one() -> None:
    new = svc("NodePort", {"name": "http", "port": 80})
    prepare_update(svc("NodePort", {"name": "http", "port": 80, "nodePort": 30500}), new)
    assert new["spec"]["ports"][0]["nodePort"] == 30500


def test_ax7_type_change_to_cluster_ip_clears_unchanged_node_ports() -> None:
    new = svc("ClusterIP", {"name": "http", "port": 80, "nodePort": 30500})
    prepare_update(svc("NodePort", {"name": "http", "port": 80, "nodePort": 30500}), new)
    assert "nodePort" not in new["spec"]["ports"][0]


def test_ax7_node_port_on_cluster_ip_is_forbidden_and_duplicates_refused() -> None:
    errors = validate(svc("ClusterIP", {"name": "a", "port": 80, "nodePort": 30500}))
    assert [str(e) for e in errors] == [
        "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]
    errors = validate(svc("NodePort", {"name": "a", "port": 80, "nodePort": 30500},
                          {"name": "b", "port": 81, "nodePort": 30500}))
    assert [str(e) for e in errors] == ["spec.ports[1].nodePort: Duplicate value: 30500"]
    assert not validate(svc("NodePort", {"name": "a", "port": 53, "nodePort": 30500},
                            {"name": "b", "port": 53, "protocol": "UDP",
                             "nodePort": 30500}))
