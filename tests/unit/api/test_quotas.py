"""What an object uses of a ResourceQuota (pkg/quota/v1/evaluator/core), scopes, and the
containers a compute quota requires to state their requests."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from skiff.api import lookup
from skiff.api.quotas import pretty, quota_covers, usage
from skiff.api.types import Obj
from skiff.apiserver.admission.resourcequota import missing_requests

POD = lookup("pods")


def _pod(*containers: Obj, init: list[Obj] | None = None, **spec: Any) -> Obj:
    return {"metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": list(containers), "initContainers": init or [], **spec},
            "status": {"phase": "Running"}}


def _c(name: str, requests: Obj | None = None, limits: Obj | None = None) -> Obj:
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    return {"name": name, "resources": resources}


def test_ax6_quota_a_pod_uses_its_containers_sum_or_its_largest_init_container() -> None:
    pod = _pod(_c("a", {"cpu": "100m", "memory": "64Mi"}, {"cpu": "200m"}),
               _c("b", {"cpu": "300m"}),
               init=[_c("init", {"cpu": "1", "memory": "32Mi"})])
    used = usage(POD, pod, now=0.0)
    assert used["pods"] == used["count/pods"] == 1
    assert used["requests.cpu"] == used["cpu"] == 1  # the init container asks more
    assert used["requests.memory"] == 64 * 2**20
    assert used["limits.cpu"] == Fraction(1, 5)


def test_ax6_quota_a_finished_or_expired_pod_uses_nothing() -> None:
    done = _pod(_c("a")) | {"status": {"phase": "Succeeded"}}
    assert usage(POD, done, now=0.0) == {}
    going = _pod(_c("a"))
    going["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z",
                             deletionGracePeriodSeconds=30)
    assert usage(POD, going, now=0.0) != {}
    assert usage(POD, going, now=4e9) == {}


def test_ax6_quota_scopes_narrow_a_quota_to_some_pods_and_no_other_kind() -> None:
    best_effort = {"spec": {"scopes": ["BestEffort"]}}
    assert quota_covers(best_effort, POD, _pod(_c("a")))
    assert not quota_covers(best_effort, POD, _pod(_c("a", {"cpu": "1"})))
    assert not quota_covers(best_effort, lookup("configmaps"), {"metadata": {}})
    by_class = {"spec": {"scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}}
    assert quota_covers(by_class, POD, _pod(_c("a"), priorityClassName="high"))
    assert not quota_covers(by_class, POD, _pod(_c("a"), priorityClassName="low"))
    terminating = {"spec": {"scopes": ["Terminating"]}}
    assert quota_covers(terminating, POD, _pod(_c("a"), activeDeadlineSeconds=60))
    assert not quota_covers(terminating, POD, _pod(_c("a")))


def test_ax6_a_compute_quota_names_each_container_that_leaves_a_resource_unset() -> None:
    pod = _pod(_c("a", {"cpu": "1"}), _c("b", limits={"cpu": "1"}))
    assert missing_requests(pod, {"requests.cpu", "limits.cpu", "pods"}) == (
        "limits.cpu for: a; requests.cpu for: b")
    assert missing_requests(pod, {"pods"}) == ""


def test_ax6_quota_pretty_prints_sorted_names_with_canonical_amounts() -> None:
    assert pretty({"pods": Fraction(1), "requests.memory": Fraction(700 * 2**20)},
                  {"requests.memory"}) == "pods=1,requests.memory=700Mi"


def test_ax6_quota_node_port_and_load_balancer_services_use_their_ports() -> None:
    service = lookup("services")

    def svc(**spec: Any) -> Obj:
        return {"metadata": {"name": "s", "namespace": "ns"},
                "spec": {"ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81}],
                         **spec}}

    plain = usage(service, svc(type="ClusterIP"), now=0.0)
    assert plain == {"services": 1, "count/services": 1}
    node_port = usage(service, svc(type="NodePort"), now=0.0)
    assert node_port["services.nodeports"] == 2 and "services.loadbalancers" not in node_port
    balancer = usage(service, svc(type="LoadBalancer"), now=0.0)
    assert balancer["services.nodeports"] == 2 and balancer["services.loadbalancers"] == 1
    named_only = usage(service, svc(type="LoadBalancer", allocateLoadBalancerNodePorts=False,
                                    ports=[{"port": 80, "nodePort": 30001}, {"port": 81}]),
                       now=0.0)
    assert named_only["services.nodeports"] == 1
