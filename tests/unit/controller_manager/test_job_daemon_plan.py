"""Job podFailurePolicy and DaemonSet eligibility, as pure functions."""

from __future__ import annotations

import pytest

from skiff.api.types import Obj
from skiff.controller_manager.daemonset import plan as daemon
from skiff.controller_manager.job.policy import (
    format_indexes,
    match_failure_policy,
    parse_indexes,
)

POLICY = {"rules": [
    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In",
                                          "values": [42]}},
    {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [1]}},
]}


def failed_pod(code: int, *, disrupted: bool = False) -> Obj:
    conditions = [{"type": "DisruptionTarget", "status": "True"}] if disrupted else []
    return {"status": {"phase": "Failed", "conditions": conditions, "containerStatuses": [
        {"name": "main", "state": {"terminated": {"exitCode": code}}}]}}


@pytest.mark.parametrize(("pod", "action"), [
    pytest.param(failed_pod(143, disrupted=True), "Ignore", id="preempted-ignored"),
    pytest.param(failed_pod(42), "FailJob", id="exit-42-fails-the-job"),
    pytest.param(failed_pod(7), "Count", id="not-in-1-counts"),
    pytest.param(failed_pod(1), "Count", id="no-rule-counts"),
])
def test_pod_failure_policy_first_matching_rule(pod: Obj, action: str) -> None:
    assert match_failure_policy(POLICY, pod)[0] == action


def test_completed_indexes_notation() -> None:
    # Kubernetes' orderedIntervals.String: two neighbours are listed, not a range
    assert format_indexes([0, 1, 2, 5, 7, 8]) == "0-2,5,7,8"
    assert parse_indexes("0-2,5,7-8") == {0, 1, 2, 5, 7, 8}


def node(name: str, labels: dict[str, str] | None = None, taints: list[Obj] | None = None
         ) -> Obj:
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"taints": taints or []}}


UNREACHABLE = [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
               {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]


@pytest.mark.parametrize(("spec", "n", "new", "running"), [
    pytest.param({}, node("a"), True, True, id="plain-node"),
    pytest.param({"nodeSelector": {"disk": "ssd"}}, node("a"), False, False,
                 id="selector-mismatch"),
    pytest.param({}, node("a", taints=UNREACHABLE), False, True,
                 id="unreachable-keeps-the-running-pod"),
    pytest.param({}, node("a", taints=[{"key": "gpu", "effect": "NoSchedule"}]), False,
                 True, id="untolerated-noschedule"),
    pytest.param({"tolerations": [{"key": "gpu", "operator": "Exists"}]},
                 node("a", taints=[{"key": "gpu", "effect": "NoExecute"}]), True, True,
                 id="tolerated"),
])
def test_daemon_pod_eligibility(spec: Obj, n: Obj, new: bool, running: bool) -> None:
    assert daemon.node_eligible(spec, n) is new
    assert daemon.node_eligible(spec, n, running=True) is running


def test_daemon_tolerations_have_no_toleration_seconds() -> None:
    tolerations = daemon.daemon_tolerations({"tolerations": [
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300}]})
    unreachable = [t for t in tolerations if t["key"] == "node.kubernetes.io/unreachable"]
    assert unreachable == [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                            "effect": "NoExecute"}]
