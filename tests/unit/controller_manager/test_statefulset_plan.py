"""SPEC PS4: the StatefulSet's next action — ordering, Parallel, and at most one per
identity."""

from __future__ import annotations

import pytest

from skiff.api.testing import make_pod
from skiff.api.types import Obj
from skiff.clock import parse_rfc3339
from skiff.controller_manager.statefulset import Action, Verb, plan, stateful_pod

C, D = Verb.CREATE, Verb.DELETE


def ready(i: int) -> Obj:
    return make_pod(f"web-{i}").phase("Running").condition("Ready").obj()


def pending(i: int) -> Obj:
    return make_pod(f"web-{i}").phase("Pending").obj()


def terminating(i: int) -> Obj:
    return make_pod(f"web-{i}").phase("Running").condition("Ready").terminating().obj()


def failed(i: int) -> Obj:
    return make_pod(f"web-{i}").phase("Failed").obj()


@pytest.mark.parametrize(("replicas", "policy", "pods", "expected"), [
    pytest.param(3, "OrderedReady", [], [(C, 0)], id="ordered-first"),
    pytest.param(3, "OrderedReady", [ready(0)], [(C, 1)], id="ordered-next-after-ready"),
    pytest.param(3, "OrderedReady", [pending(0)], [], id="ordered-waits-for-ready"),
    pytest.param(3, "Parallel", [], [(C, 0), (C, 1), (C, 2)], id="parallel-all"),
    pytest.param(3, "Parallel", [pending(0)], [(C, 1), (C, 2)], id="parallel-no-wait"),
    pytest.param(1, "OrderedReady", [terminating(0)], [], id="at-most-one-ordered"),
    pytest.param(1, "Parallel", [terminating(0)], [], id="at-most-one-parallel"),
    pytest.param(2, "OrderedReady", [terminating(0), ready(1)], [], id="terminating-blocks"),
    pytest.param(1, "OrderedReady", [failed(0)], [(D, 0)], id="failed-deleted-first"),
    pytest.param(1, "OrderedReady", [ready(0), ready(1), ready(2)], [(D, 2)],
                 id="scale-down-highest-first"),
    pytest.param(1, "OrderedReady", [ready(0), ready(1), terminating(2)], [],
                 id="scale-down-one-at-a-time"),
    pytest.param(1, "Parallel", [ready(0), ready(1), ready(2)], [(D, 2), (D, 1)],
                 id="parallel-scale-down"),
    pytest.param(2, "OrderedReady", [ready(0), pending(1), ready(2)], [],
                 id="no-scale-down-while-unhealthy"),
    pytest.param(2, "OrderedReady", [ready(0), ready(1)], [], id="steady"),
])
def test_ps4_statefulset_plan(replicas: int, policy: str, pods: list[Obj],
                              expected: list[tuple[Verb, int]]) -> None:
    by_ordinal = {int(p["metadata"]["name"].rsplit("-", 1)[1]): p for p in pods}
    result = plan(replicas=replicas, policy=policy, pods=by_ordinal)
    assert list(result.actions) == [Action(v, o) for v, o in expected]


def test_ps4_ordinals_start() -> None:
    result = plan(replicas=2, policy="Parallel", pods={}, start=5)
    assert list(result.actions) == [Action(C, 5), Action(C, 6)]


def test_ps4_stateful_pod_identity() -> None:
    sts: Obj = {"apiVersion": "apps/v1", "kind": "StatefulSet",
                "metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
                "spec": {"serviceName": "svc", "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c"}]}}}}
    pod = stateful_pod(sts, 3)
    assert pod["metadata"]["name"] == "web-3"
    assert pod["metadata"]["labels"] == {"app": "web",
                                         "statefulset.kubernetes.io/pod-name": "web-3",
                                         "apps.kubernetes.io/pod-index": "3"}
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("web-3", "svc")
    [ref] = pod["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["uid"], ref["controller"]) == ("StatefulSet", "u1", True)
    assert "hostname" not in sts["spec"]["template"]["spec"]  # the template is untouched


def test_ps4_ordered_ready_waits_min_ready_seconds_before_the_next_ordinal() -> None:
    """Kubernetes 1.32: OrderedReady goes past a pod once it is Running and *available*."""
    pod = make_pod("web-0").phase("Running").obj()
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True",
                                    "lastTransitionTime": "2024-01-01T00:00:00Z"}]
    ready_at = parse_rfc3339("2024-01-01T00:00:00Z")
    waiting = plan(replicas=2, policy="OrderedReady", pods={0: pod}, min_ready_seconds=10,
                   now=ready_at + 9)
    assert waiting.actions == ()
    going = plan(replicas=2, policy="OrderedReady", pods={0: pod}, min_ready_seconds=10,
                 now=ready_at + 10)
    assert going.actions == (Action(Verb.CREATE, 1),)
