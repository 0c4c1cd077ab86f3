"""Defaults are Kubernetes' own (LC3, LC7, PP1, GT): what is read back is what it stores."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from skiff.api import apply_defaults
from skiff.api.groups.core.podtemplate import image_pull_policy
from skiff.api.testing import make_pod


def defaulted(obj: dict[str, Any]) -> dict[str, Any]:
    result = copy.deepcopy(obj)
    apply_defaults(result)
    return result


def test_lc3_pod_spec_defaults() -> None:
    pod = defaulted(make_pod("p").container("c", command=["sleep", "1"]).obj())
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Always"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["securityContext"] == {}
    assert pod["status"] == {"phase": "Pending"}
    container = spec["containers"][0]
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert container["terminationMessagePolicy"] == "File"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert "labels" not in pod["metadata"]


def test_lc3_explicit_values_are_kept() -> None:
    pod = make_pod("p").restart_policy("Never").termination_grace_period(0).obj()
    pod["status"] = {"phase": "Running"}
    result = defaulted(pod)
    assert result["spec"]["restartPolicy"] == "Never"
    assert result["spec"]["terminationGracePeriodSeconds"] == 0
    assert result["status"] == {"phase": "Running"}


@pytest.mark.parametrize(("image", "policy"), [
    pytest.param("nginx", "Always", id="untagged"),
    pytest.param("nginx:latest", "Always", id="latest"),
    pytest.param("nginx:1.25", "IfNotPresent", id="tagged"),
    pytest.param("registry:5000/nginx", "Always", id="registry-port-untagged"),
    pytest.param("registry:5000/nginx:1.0", "IfNotPresent", id="registry-port-tagged"),
    pytest.param("nginx@sha256:abcd", "IfNotPresent", id="digest"),
    pytest.param(None, "IfNotPresent", id="command-only"),
])
def test_image_pull_policy_defaults_from_the_tag(image: str | None, policy: str) -> None:
    assert image_pull_policy(image) == policy


def test_lc7_probe_defaults() -> None:
    pod = make_pod("p").container("c", command=["x"]) \
        .probe("livenessProbe", {"httpGet": {"port": 8080}}) \
        .probe("readinessProbe", {"exec": {"command": ["true"]}, "periodSeconds": 2}) \
        .probe("startupProbe", {"tcpSocket": {"port": 80}, "failureThreshold": 0}).obj()
    container = defaulted(pod)["spec"]["containers"][0]
    assert container["livenessProbe"] == {
        "httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"}, "periodSeconds": 10,
        "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3}
    assert container["readinessProbe"]["periodSeconds"] == 2
    assert container["startupProbe"]["failureThreshold"] == 3  # zero means "unset"


def test_lc8_lifecycle_http_get_defaults() -> None:
    pod = make_pod("p").container("c", command=["x"]) \
        .lifecycle("preStop", {"httpGet": {"port": 80}}).obj()
    hook = defaulted(pod)["spec"]["containers"][0]["lifecycle"]["preStop"]
    assert hook == {"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}}


def test_ts5_requests_default_to_limits() -> None:
    pod = make_pod("p").container("c", command=["x"], requests={"cpu": "100m"},
                                  limits={"cpu": "1", "memory": "1Gi"}).obj()
    resources = defaulted(pod)["spec"]["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": "100m", "memory": "1Gi"}


def test_lc4_init_containers_and_ports_are_defaulted() -> None:
    pod = make_pod("p").container("c", command=["x"], ports=[80]) \
        .init_container("i", command=["true"]).obj()
    spec = defaulted(pod)["spec"]
    assert spec["containers"][0]["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert spec["initContainers"][0]["terminationMessagePolicy"] == "File"


def test_ps4_statefulset_defaults() -> None:
    sts: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "StatefulSet",
                           "metadata": {"name": "web", "namespace": "default"},
                           "spec": {"selector": {"matchLabels": {"app": "web"}},
                                    "template": {"spec": {"containers": [{"name": "c"}]}}}}
    spec = defaulted(sts)["spec"]
    assert spec["replicas"] == 1
    assert spec["podManagementPolicy"] == "OrderedReady"
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert spec["revisionHistoryLimit"] == 10
    assert spec["template"]["spec"]["restartPolicy"] == "Always"
    assert "status" not in spec["template"]


def test_ps4_statefulset_on_delete_has_no_rolling_update() -> None:
    sts: dict[str, Any] = {"kind": "StatefulSet",
                           "spec": {"updateStrategy": {"type": "OnDelete"}, "replicas": 0}}
    spec = defaulted(sts)["spec"]
    assert spec["updateStrategy"] == {"type": "OnDelete"}
    assert spec["replicas"] == 0


def test_ps4_replicaset_defaults() -> None:
    rs: dict[str, Any] = {"kind": "ReplicaSet", "spec": {"template": {"spec": {
        "containers": [{"name": "c", "image": "nginx"}]}}}}
    spec = defaulted(rs)["spec"]
    assert spec["replicas"] == 1
    assert spec["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    assert spec["template"]["spec"]["terminationGracePeriodSeconds"] == 30


def test_pp1_priority_class_defaults() -> None:
    pc = defaulted({"kind": "PriorityClass", "metadata": {"name": "x"}, "value": 5})
    assert pc["preemptionPolicy"] == "PreemptLowerPriority"
    assert pc["globalDefault"] is False
    kept = defaulted({"kind": "PriorityClass", "value": 5, "preemptionPolicy": "Never",
                      "globalDefault": True})
    assert kept["preemptionPolicy"] == "Never" and kept["globalDefault"] is True


def test_as2_other_kind_defaults() -> None:
    assert defaulted({"kind": "Namespace", "metadata": {"name": "n"}})["status"] == {
        "phase": "Active"}
    assert defaulted({"kind": "Node", "metadata": {"name": "n"}})["spec"] == {}
    lease = {"kind": "Lease", "spec": {"holderIdentity": "n1"}}
    assert defaulted(lease) == lease


def test_as1_defaulting_is_idempotent() -> None:
    pod = defaulted(make_pod("p").container("c", image="nginx")
                    .probe("livenessProbe", {"httpGet": {"port": 80}}).obj())
    assert defaulted(pod) == pod


def test_requests_default_to_limits_on_pods_not_in_workload_templates() -> None:
    """SetDefaults_Pod copies a limit-only resource into requests; a Deployment's template
    keeps what was written (SetDefaults_PodSpec has no such rule), so `kubectl get deploy
    -o yaml` shows no requests the user did not write."""
    container = {"name": "c", "image": "nginx", "resources": {"limits": {"cpu": "500m"}}}
    pod = defaulted({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": "p", "namespace": "default"},
                     "spec": {"containers": [copy.deepcopy(container)]}})
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m"}
    deployment = defaulted({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
            "metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [copy.deepcopy(container)]}}}})
    assert deployment["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "500m"}}
