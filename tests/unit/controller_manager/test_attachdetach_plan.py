"""SPEC SC1: where an RWO volume is attached and when it may be detached, as tables."""

from __future__ import annotations

import pytest

from skiff.api.testing import make_pod
from skiff.api.types import Obj
from skiff.controller_manager.attachdetach import may_detach, plan_attach, volume_name
from skiff.controller_manager.attachdetach.plan import (
    attachment,
    fenced_nodes,
    is_exclusive,
    pods_using,
)

CLAIM: Obj = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
              "metadata": {"name": "data-web-0", "namespace": "ns", "uid": "c1"},
              "spec": {"accessModes": ["ReadWriteOnce"]}}


def user(name: str, node: str = "", *, created: str = "2024-01-01T00:00:00Z",
         terminating: bool = False, phase: str = "Running") -> Obj:
    builder = make_pod(name).namespace("ns").phase(phase).creation_timestamp(created).volume(
        "data", {"persistentVolumeClaim": {"claimName": "data-web-0"}})
    if node:
        builder = builder.node(node)
    if terminating:
        builder = builder.terminating()
    return builder.obj()


def fence(node: str, phase: str) -> Obj:
    return {"metadata": {"name": node}, "spec": {"nodeName": node, "agent": "power"},
            "status": {"phase": phase}}


@pytest.mark.parametrize(("users", "fences", "detach"), [
    pytest.param([user("web-0", "a")], [], False, id="running-pod-on-holder"),
    pytest.param([user("web-0", "a", terminating=True)], [], False,
                 id="terminating-pod-still-holds-it"),
    pytest.param([user("web-0", "a", phase="Failed")], [], False,
                 id="terminal-pod-object-still-holds-it"),
    pytest.param([], [], True, id="old-pod-gone"),
    pytest.param([user("web-0", "b")], [], True, id="only-a-pod-on-another-node"),
    pytest.param([user("web-0", "a", terminating=True)], [fence("a", "Fenced")], True,
                 id="holder-fenced"),
    pytest.param([user("web-0", "a")], [fence("a", "Fencing")], False,
                 id="holder-fencing-not-confirmed"),
    pytest.param([user("web-0", "a")], [fence("a", "Failed")], False,
                 id="holder-fence-failed"),
    pytest.param([user("web-0", "a")], [fence("b", "Fenced")], False,
                 id="another-node-fenced"),
])
def test_sc1_detach_only_after_the_old_pod_is_gone_or_its_node_fenced(
        users: list[Obj], fences: list[Obj], detach: bool) -> None:
    assert may_detach(attached_to="a", users=users, fenced=fenced_nodes(fences)) is detach


@pytest.mark.parametrize(("holder", "users", "fencing", "node", "waiting"), [
    pytest.param("", [user("web-0", "a")], set(), "a", [], id="attach-to-the-pods-node"),
    pytest.param("", [user("web-0")], set(), "", [], id="unscheduled-pod-waits"),
    pytest.param("", [user("web-0", "a", terminating=True)], set(), "", [],
                 id="terminating-pod-gets-no-attachment"),
    pytest.param("", [user("x", "b", created="2024-01-01T00:00:02Z"),
                      user("y", "a", created="2024-01-01T00:00:01Z")], set(), "a", ["x"],
                 id="oldest-pod-wins-the-other-waits"),
    pytest.param("a", [user("web-0", "b")], set(), "a", ["web-0"],
                 id="held-elsewhere-multi-attach"),
    pytest.param("", [user("web-0", "a"), user("web-1", "b", created="2024-02-01T00:00:00Z")],
                 {"a"}, "b", [], id="no-new-attachment-to-a-fenced-node"),
])
def test_sc1_attach_plan(holder: str, users: list[Obj], fencing: set[str], node: str,
                         waiting: list[str]) -> None:
    decided = plan_attach(attached_to=holder, users=users, fencing=fencing)
    assert decided.node == node
    assert [p["metadata"]["name"] for p in decided.waiting] == waiting


def test_sc1_attachment_is_named_after_the_claims_volume() -> None:
    va = attachment(CLAIM, "a")
    assert volume_name(CLAIM) == va["metadata"]["name"] == "pvc-c1"
    assert va["spec"] == {"attacher": "skiff.io/local", "nodeName": "a",
                          "source": {"persistentVolumeName": "pvc-c1"}}


@pytest.mark.parametrize(("modes", "exclusive"), [
    pytest.param(["ReadWriteOnce"], True, id="rwo"),
    pytest.param(["ReadWriteOncePod"], True, id="rwop"),
    pytest.param(["ReadWriteMany"], False, id="rwx"),
    pytest.param(["ReadOnlyMany", "ReadWriteOnce"], True, id="mixed"),
])
def test_sc1_only_exclusive_claims_are_attached(modes: list[str], exclusive: bool) -> None:
    assert is_exclusive({"spec": {"accessModes": modes}}) is exclusive


def test_sc1_pods_using_a_claim_are_those_of_its_namespace_that_name_it() -> None:
    other_ns = make_pod("o").namespace("other").volume(
        "data", {"persistentVolumeClaim": {"claimName": "data-web-0"}}).obj()
    unrelated = make_pod("u").namespace("ns").obj()
    mine = user("web-0", "a")
    assert pods_using(CLAIM, [other_ns, unrelated, mine]) == [mine]
