"""SPEC FN1 and FN3: the fencing decision (delay, agent, opt-in, priority, PDBs) and the
fencing cordon, as tables over a fake clock."""

from __future__ import annotations

import pytest

from skiff.api.testing import make_node, make_pod
from skiff.api.types import Obj
from skiff.api.wellknown import CORDONED_BY_FENCING_ANNOTATION as CORDONED_ANNOTATION
from skiff.api.wellknown import UNFENCED_AT_ANNOTATION
from skiff.clock import FakeClock, rfc3339
from skiff.controller_manager.fencing import TAINT_FENCED, FencingPolicy, cordoned, decide
from skiff.controller_manager.fencing.cordon import uncordoned
from skiff.controller_manager.fencing.policy import fence_agent, opts_in
from skiff.controller_manager.settings import parse_settings
from skiff.settings import SettingsError

CLOCK = FakeClock()
T0 = CLOCK.now()
POLICY = FencingPolicy(delay=60, default_agent="none", min_priority=0)


def node(ready: str = "Unknown", *, since: float = T0, agent: str | None = "power",
         unfenced_at: float | None = None) -> Obj:
    obj = make_node("n1").obj()
    obj["status"]["conditions"] = [{"type": "Ready", "status": ready,
                                    "lastTransitionTime": rfc3339(since)}]
    annotations = obj["metadata"].setdefault("annotations", {})
    if agent is not None:
        annotations["skiff.io/fence-agent"] = agent
    if unfenced_at is not None:
        annotations[UNFENCED_AT_ANNOTATION] = rfc3339(unfenced_at)
    return obj


def sts_pod(name: str = "web-0", *, priority: int = 0, fencing: str | None = None) -> Obj:
    builder = make_pod(name).namespace("ns").node("n1").label("app", "web").priority(
        priority).owner("StatefulSet", "web", uid="u1")
    if fencing is not None:
        builder = builder.annotation("skiff.io/fencing", fencing)
    return builder.obj()


def rs_pod(name: str = "front-x", *, fencing: str | None = None) -> Obj:
    builder = make_pod(name).namespace("ns").node("n1").owner("ReplicaSet", "front", uid="u2")
    if fencing is not None:
        builder = builder.annotation("skiff.io/fencing", fencing)
    return builder.obj()


@pytest.mark.parametrize(("the_node", "pods", "after", "policy", "fence", "why"), [
    pytest.param(node(), [sts_pod()], 61, POLICY, True, "NodeReady Unknown since",
                 id="statefulset-pod-after-the-delay"),
    pytest.param(node(), [sts_pod()], 59, POLICY, False, "partitioned for 59.0s of 60s",
                 id="statefulset-pod-before-the-delay"),
    pytest.param(node("True"), [sts_pod()], 600, POLICY, False, "not partitioned",
                 id="ready-node"),
    pytest.param(node("False"), [sts_pod()], 600, POLICY, False, "not partitioned",
                 id="not-ready-is-a-report-not-a-partition"),
    pytest.param(node(agent="none"), [sts_pod()], 600, POLICY, False, "fence agent is none",
                 id="agent-none"),
    pytest.param(node(agent=None), [sts_pod()], 600, POLICY, False, "fence agent is none",
                 id="no-annotation-default-none"),
    pytest.param(node(agent=None), [sts_pod()], 600,
                 FencingPolicy(delay=60, default_agent="network"), True, "NodeReady",
                 id="no-annotation-default-network"),
    pytest.param(node(agent="bmc"), [sts_pod()], 600, POLICY, False, "fence agent is none",
                 id="unknown-agent-is-none"),
    pytest.param(node(), [rs_pod()], 600, POLICY, False, "no pod on the node opts in",
                 id="replicaset-pod-does-not-opt-in"),
    pytest.param(node(), [rs_pod(fencing="true")], 600, POLICY, True, "NodeReady",
                 id="annotated-pod-opts-in"),
    pytest.param(node(), [sts_pod(fencing="false")], 600, POLICY, False, "opts in",
                 id="statefulset-pod-opts-out"),
    pytest.param(node(), [], 600, POLICY, False, "opts in", id="empty-node"),
    pytest.param(node(), [sts_pod(priority=5)], 600,
                 FencingPolicy(delay=60, min_priority=10), False, "priority >= 10",
                 id="below-min-priority"),
    pytest.param(node(), [sts_pod(priority=5), sts_pod("web-1", priority=10)], 600,
                 FencingPolicy(delay=60, min_priority=10), True, "NodeReady",
                 id="one-pod-at-min-priority"),
    pytest.param(node(unfenced_at=T0 + 30), [sts_pod()], 61, POLICY, False, "31.0s of 60s",
                 id="unfencing-restarts-the-delay"),
])
def test_fn1_fencing_decision(the_node: Obj, pods: list[Obj], after: float,
                              policy: FencingPolicy, fence: bool, why: str) -> None:
    verdict = decide(node=the_node, pods=pods, policy=policy, now=T0 + after)
    assert verdict.fence is fence
    assert why in verdict.why


def test_fn1_decision_rechecks_when_the_delay_ends_and_names_the_pods() -> None:
    waiting = decide(node=node(), pods=[sts_pod()], policy=POLICY, now=T0 + 45)
    assert (waiting.fence, waiting.recheck_in, waiting.pods) == (False, 15, ("ns/web-0",))
    not_candidate = decide(node=node(agent="none"), pods=[sts_pod()], policy=POLICY,
                           now=T0 + 45)
    assert not_candidate.recheck_in is None


def test_fn1_terminal_pods_do_not_count() -> None:
    done = make_pod("web-0").namespace("ns").node("n1").owner("StatefulSet", "web").phase(
        "Failed").obj()
    assert not decide(node=node(), pods=[done], policy=POLICY, now=T0 + 600).fence


def test_fn1_pdbs_do_not_block_fencing_but_are_counted() -> None:
    pdb = {"metadata": {"name": "web", "namespace": "ns"},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}
    other_ns = {"metadata": {"name": "web", "namespace": "other"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}
    verdict = decide(node=node(), pods=[sts_pod(), rs_pod()], pdbs=[pdb, other_ns],
                     policy=POLICY, now=T0 + 61)
    assert verdict.fence and verdict.pdb_covered == 1


@pytest.mark.parametrize(("annotation", "default", "agent"), [
    pytest.param("power", "none", "power", id="annotation-wins"),
    pytest.param(None, "storage", "storage", id="default"),
    pytest.param("none", "power", "none", id="annotation-none-beats-default"),
])
def test_fn2_fence_agent_per_node(annotation: str | None, default: str, agent: str) -> None:
    assert fence_agent(node(agent=annotation), default=default) == agent


def test_fn1_opt_in_rules() -> None:
    assert opts_in(sts_pod()) and not opts_in(sts_pod(fencing="false"))
    assert opts_in(rs_pod(fencing="true")) and not opts_in(rs_pod())


def test_fn3_cordon_is_idempotent_and_lifted_only_by_unfencing() -> None:
    ready = node("True")
    fenced = cordoned(ready, now=T0)
    assert fenced is not None and fenced["spec"]["unschedulable"] is True
    assert [t["key"] for t in fenced["spec"]["taints"]] == [TAINT_FENCED]
    assert fenced["spec"]["taints"][0]["effect"] == "NoExecute"
    assert "taints" not in ready["spec"], "the cached node is not mutated"
    assert cordoned(fenced, now=T0 + 1) is None
    lifted = uncordoned(fenced, now=T0 + 5)
    assert lifted is not None and lifted["spec"]["unschedulable"] is False
    assert lifted["spec"]["taints"] == []
    assert CORDONED_ANNOTATION not in lifted["metadata"]["annotations"]
    assert lifted["metadata"]["annotations"][UNFENCED_AT_ANNOTATION] == rfc3339(T0 + 5)
    assert uncordoned(lifted, now=T0 + 6) is None


def test_fn3_unfencing_keeps_an_administrators_cordon() -> None:
    admin = node("True")
    admin["spec"]["unschedulable"] = True
    fenced = cordoned(admin, now=T0)
    assert fenced is not None
    lifted = uncordoned(fenced, now=T0 + 1)
    assert lifted is not None and lifted["spec"]["unschedulable"] is True


def test_fn1_fencing_flags_and_their_defaults() -> None:
    defaults = parse_settings([])
    assert (defaults.fencing_delay, defaults.default_fence_agent,
            defaults.fencing_min_priority) == (60.0, "none", 0)
    fast = parse_settings(["--fencing-delay", "2s", "--default-fence-agent", "power",
                           "--fencing-min-priority", "1000"])
    assert (fast.fencing_delay, fast.default_fence_agent, fast.fencing_min_priority) == (
        2.0, "power", 1000)
    fast.check()


def test_fn2_an_unknown_default_fence_agent_is_refused() -> None:
    with pytest.raises(SettingsError, match="--default-fence-agent: 'bmc'"):
        parse_settings(["--default-fence-agent", "bmc"]).check()
