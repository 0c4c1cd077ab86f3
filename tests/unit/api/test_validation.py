"""Validation rejects what Kubernetes rejects and names the field path (AS7, LC7, PP1, PS2)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from skiff.api import apply_defaults, validate
from skiff.api.testing import DO_NOT_SCHEDULE, SCHEDULE_ANYWAY, make_node, make_pod
from tests.unit.api.objpaths import MISSING, paths, with_

POD = make_pod("web").container("c", command=["sleep", "1"]).obj()
NODE = make_node("n1").obj()
PC = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
      "metadata": {"name": "high"}, "value": 1000, "description": "high"}
PDB = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
       "metadata": {"name": "web", "namespace": "default"},
       "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}
RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
      "metadata": {"name": "web", "namespace": "default"},
      "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
               "template": {"metadata": {"labels": {"app": "web"}},
                            "spec": {"containers": [{"name": "c", "command": ["sleep", "9"]}]}}}}
STS = with_(with_(RS, "kind", "StatefulSet"), "spec.serviceName", "web")
LEASE = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
         "metadata": {"name": "n1", "namespace": "kube-node-lease"},
         "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40}}
EVENT = {"apiVersion": "v1", "kind": "Event",
         "metadata": {"name": "web.17a", "namespace": "default"},
         "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"},
         "reason": "Scheduled", "message": "assigned", "type": "Normal", "count": 1}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod"}}
PROBE = {"exec": {"command": ["true"]}, "periodSeconds": 10}


@pytest.mark.parametrize("obj", [
    pytest.param(POD, id="pod"),
    pytest.param(NODE, id="node"),
    pytest.param(PC, id="priorityclass"),
    pytest.param(PDB, id="pdb"),
    pytest.param(RS, id="replicaset"),
    pytest.param(STS, id="statefulset"),
    pytest.param(LEASE, id="lease"),
    pytest.param(EVENT, id="event"),
    pytest.param(NAMESPACE, id="namespace"),
    pytest.param(make_pod("full").label("app.kubernetes.io/name", "web")
                 .annotation("example.com/note", "x").owner("ReplicaSet", "web")
                 .finalizer("example.com/keep").volume("data")
                 .container("app", image="nginx:1.25", ports=[80],
                            requests={"cpu": "100m", "memory": "128Mi"},
                            limits={"cpu": "0.5", "memory": "1G"})
                 .probe("livenessProbe", {"httpGet": {"port": 80, "path": "/healthz"},
                                          "successThreshold": 1})
                 .probe("readinessProbe", {"tcpSocket": {"port": "http"}, "successThreshold": 2})
                 .probe("startupProbe", {"grpc": {"port": 9000}, "failureThreshold": 30,
                                         "terminationGracePeriodSeconds": 5})
                 .lifecycle("preStop", {"sleep": {"seconds": 5}})
                 .lifecycle("postStart", {"exec": {"command": ["true"]}})
                 .init_container("setup", command=["true"])
                 .init_container("proxy", command=["sleep", "inf"], restart_policy="Always")
                 .toleration("node.kubernetes.io/unreachable", operator="Exists",
                             effect="NoExecute", seconds=300)
                 .toleration(operator="Exists")
                 .spread(1, "zone", DO_NOT_SCHEDULE, {"matchLabels": {"app": "web"}})
                 .spread(2, "kubernetes.io/hostname", SCHEDULE_ANYWAY, None)
                 .node_selector({"disk": "ssd"}).scheduling_gate("example.com/wait")
                 .readiness_gate("example.com/ready").priority_class("high").obj(),
                 id="pod-with-everything"),
])
def test_as7_valid_objects_have_no_errors(obj: dict[str, Any]) -> None:
    assert validate(obj) == []
    defaulted = copy.deepcopy(obj)
    apply_defaults(defaulted)
    assert validate(defaulted) == []


@pytest.mark.parametrize(("obj", "expected"), [
    # metadata
    pytest.param(with_(POD, "metadata.name"), ("metadata.name", "Required value"),
                 id="name-required"),
    pytest.param(with_(POD, "metadata.name", "Web_1"), ("metadata.name", "Invalid value"),
                 id="name-not-dns-subdomain"),
    pytest.param(with_(POD, "metadata.name", "a" * 254), ("metadata.name", "Invalid value"),
                 id="name-too-long"),
    pytest.param(with_(NAMESPACE, "metadata.name", "a.b"), ("metadata.name", "Invalid value"),
                 id="namespace-name-is-a-dns-label"),
    pytest.param(with_(POD, "metadata.namespace"), ("metadata.namespace", "Required value"),
                 id="namespace-required"),
    pytest.param(with_(POD, "metadata.namespace", "a.b"),
                 ("metadata.namespace", "Invalid value"), id="namespace-is-a-dns-label"),
    pytest.param(with_(NODE, "metadata.namespace", "default"),
                 ("metadata.namespace", "Forbidden"), id="cluster-scoped-namespace"),
    pytest.param(with_(POD, "metadata.labels", {"a": "-b"}),
                 ("metadata.labels", "Invalid value"), id="bad-label-value"),
    pytest.param(with_(POD, "metadata.annotations", {"a b": "x"}),
                 ("metadata.annotations", "Invalid value"), id="bad-annotation-key"),
    pytest.param(with_(POD, "metadata.annotations", {"a": "x" * (256 * 1024)}),
                 ("metadata.annotations", "Too long"), id="annotations-too-large"),
    pytest.param(with_(POD, "metadata.ownerReferences", [{"apiVersion": "apps/v1",
                                                          "kind": "ReplicaSet", "name": "x"}]),
                 ("metadata.ownerReferences[0].uid", "Required value"), id="owner-uid"),
    pytest.param(with_(POD, "metadata.finalizers", ["bad finalizer"]),
                 ("metadata.finalizers[0]", "Invalid value"), id="bad-finalizer"),
    pytest.param(with_(POD, "kind", "Widget"), ("kind", "Unsupported value"), id="bad-kind"),
    pytest.param(with_(POD, "apiVersion", "v2"), ("apiVersion", "Unsupported value"),
                 id="bad-api-version"),
    # containers
    pytest.param(with_(POD, "spec.containers", []), ("spec.containers", "Required value"),
                 id="containers-required"),
    pytest.param(with_(POD, "spec.containers[0].name"),
                 ("spec.containers[0].name", "Required value"), id="container-name-required"),
    pytest.param(with_(POD, "spec.containers[0].name", "C_1"),
                 ("spec.containers[0].name", "Invalid value"), id="container-name-dns-label"),
    pytest.param(with_(POD, "spec.initContainers", [{"name": "c", "command": ["true"]}]),
                 ("spec.containers[0].name", "Duplicate value"), id="container-name-unique"),
    pytest.param(with_(POD, "spec.containers[0].command"),
                 ("spec.containers[0].image", "Required value"), id="command-or-image"),
    pytest.param(with_(POD, "spec.containers[0].command", "sleep 1"),
                 ("spec.containers[0].command", "Invalid value"), id="command-is-a-list"),
    pytest.param(with_(POD, "spec.containers[0].ports", [{"containerPort": 0}]),
                 ("spec.containers[0].ports[0].containerPort", "Invalid value"),
                 id="port-zero"),
    pytest.param(with_(POD, "spec.containers[0].ports", [{"containerPort": 65536}]),
                 ("spec.containers[0].ports[0].containerPort", "Invalid value"),
                 id="port-too-big"),
    pytest.param(with_(POD, "spec.containers[0].ports", [{"containerPort": "80"}]),
                 ("spec.containers[0].ports[0].containerPort", "Invalid value"),
                 id="port-is-a-string"),
    pytest.param(with_(POD, "spec.containers[0].ports", [{"containerPort": 80,
                                                          "protocol": "HTTP"}]),
                 ("spec.containers[0].ports[0].protocol", "Unsupported value"),
                 id="port-protocol"),
    pytest.param(with_(POD, "spec.containers[0].resources", {"requests": {"cpu": "lots"}}),
                 ("spec.containers[0].resources.requests[cpu]", "Invalid value"),
                 id="cpu-quantity"),
    pytest.param(with_(POD, "spec.containers[0].resources", {"limits": {"memory": "1Gb"}}),
                 ("spec.containers[0].resources.limits[memory]", "Invalid value"),
                 id="memory-quantity"),
    pytest.param(with_(POD, "spec.containers[0].resources", {"requests": {"cpu": "-1"}}),
                 ("spec.containers[0].resources.requests[cpu]", "Invalid value"),
                 id="negative-quantity"),
    pytest.param(with_(POD, "spec.containers[0].resources", {"requests": {"cpu": "2"},
                                                             "limits": {"cpu": "1"}}),
                 ("spec.containers[0].resources.requests[cpu]", "Invalid value"),
                 id="request-above-limit"),
    pytest.param(with_(POD, "spec.containers[0].env", [{"value": "x"}]),
                 ("spec.containers[0].env[0].name", "Required value"), id="env-name"),
    pytest.param(with_(POD, "spec.containers[0].volumeMounts", [{"name": "data",
                                                                 "mountPath": "/d"}]),
                 ("spec.containers[0].volumeMounts[0].name", "Not found"),
                 id="volume-mount-unknown-volume"),
    pytest.param(with_(POD, "spec.volumes", [{"name": "v", "emptyDir": {}},
                                             {"name": "v", "emptyDir": {}}]),
                 ("spec.volumes[1].name", "Duplicate value"), id="volume-names-unique"),
    pytest.param(with_(POD, "spec.volumes", [{"name": "V", "emptyDir": {}}]),
                 ("spec.volumes[0].name", "Invalid value"), id="volume-name-dns-label"),
    pytest.param(with_(POD, "spec.containers[0].restartPolicy", "Always"),
                 ("spec.containers[0].restartPolicy", "Forbidden"),
                 id="app-container-restart-policy"),
    pytest.param(with_(POD, "spec.initContainers", [{"name": "i", "command": ["true"],
                                                     "restartPolicy": "OnFailure"}]),
                 ("spec.initContainers[0].restartPolicy", "Unsupported value"),
                 id="init-container-restart-policy-only-always"),
    pytest.param(with_(POD, "spec.initContainers", [{"name": "i", "command": ["true"],
                                                     "livenessProbe": PROBE}]),
                 ("spec.initContainers[0].livenessProbe", "Forbidden"),
                 id="init-container-probe-needs-sidecar"),
    pytest.param(with_(POD, "spec.containers[0].imagePullPolicy", "Sometimes"),
                 ("spec.containers[0].imagePullPolicy", "Unsupported value"),
                 id="image-pull-policy"),
    # probes (LC7)
    pytest.param(with_(POD, "spec.containers[0].livenessProbe", {"periodSeconds": 10}),
                 ("spec.containers[0].livenessProbe", "Required value"), id="probe-no-handler"),
    pytest.param(with_(POD, "spec.containers[0].livenessProbe",
                       {**PROBE, "httpGet": {"port": 80}}),
                 ("spec.containers[0].livenessProbe.httpGet", "Forbidden"),
                 id="probe-two-handlers"),
    pytest.param(with_(POD, "spec.containers[0].livenessProbe", {**PROBE, "periodSeconds": 0}),
                 ("spec.containers[0].livenessProbe.periodSeconds", "Invalid value"),
                 id="probe-period"),
    pytest.param(with_(POD, "spec.containers[0].readinessProbe",
                       {**PROBE, "timeoutSeconds": 0}),
                 ("spec.containers[0].readinessProbe.timeoutSeconds", "Invalid value"),
                 id="probe-timeout"),
    pytest.param(with_(POD, "spec.containers[0].readinessProbe",
                       {**PROBE, "failureThreshold": 0}),
                 ("spec.containers[0].readinessProbe.failureThreshold", "Invalid value"),
                 id="probe-failure-threshold"),
    pytest.param(with_(POD, "spec.containers[0].readinessProbe",
                       {**PROBE, "initialDelaySeconds": -1}),
                 ("spec.containers[0].readinessProbe.initialDelaySeconds", "Invalid value"),
                 id="probe-initial-delay"),
    pytest.param(with_(POD, "spec.containers[0].livenessProbe",
                       {**PROBE, "successThreshold": 2}),
                 ("spec.containers[0].livenessProbe.successThreshold", "Invalid value"),
                 id="liveness-success-threshold-must-be-1"),
    pytest.param(with_(POD, "spec.containers[0].startupProbe",
                       {**PROBE, "successThreshold": 3}),
                 ("spec.containers[0].startupProbe.successThreshold", "Invalid value"),
                 id="startup-success-threshold-must-be-1"),
    pytest.param(with_(POD, "spec.containers[0].readinessProbe",
                       {**PROBE, "terminationGracePeriodSeconds": 5}),
                 ("spec.containers[0].readinessProbe.terminationGracePeriodSeconds",
                  "Invalid value"), id="readiness-probe-grace-not-allowed"),
    pytest.param(with_(POD, "spec.containers[0].livenessProbe",
                       {**PROBE, "terminationGracePeriodSeconds": 0}),
                 ("spec.containers[0].livenessProbe.terminationGracePeriodSeconds",
                  "Invalid value"), id="liveness-probe-grace-positive"),
    pytest.param(with_(POD, "spec.containers[0].livenessProbe", {**PROBE, "periodSeconds": "10"}),
                 ("spec.containers[0].livenessProbe.periodSeconds", "Invalid value"),
                 id="probe-period-string"),
    pytest.param(with_(POD, "spec.containers[0].livenessProbe", {**PROBE, "periodSeconds": True}),
                 ("spec.containers[0].livenessProbe.periodSeconds", "Invalid value"),
                 id="probe-period-bool"),
    pytest.param(with_(POD, "spec.containers[0].livenessProbe", {"httpGet": {"path": "/"}}),
                 ("spec.containers[0].livenessProbe.httpGet.port", "Required value"),
                 id="http-get-port"),
    pytest.param(with_(POD, "spec.containers[0].livenessProbe", {"exec": {}}),
                 ("spec.containers[0].livenessProbe.exec.command", "Required value"),
                 id="exec-command"),
    pytest.param(with_(POD, "spec.containers[0].livenessProbe", {"grpc": {"port": "grpc"}}),
                 ("spec.containers[0].livenessProbe.grpc.port", "Invalid value"),
                 id="grpc-port-is-a-number"),
    # lifecycle hooks (LC8, GT)
    pytest.param(with_(POD, "spec.containers[0].lifecycle", {"preStop": {}}),
                 ("spec.containers[0].lifecycle.preStop", "Required value"),
                 id="prestop-no-handler"),
    pytest.param(with_(POD, "spec.containers[0].lifecycle",
                       {"postStart": {"exec": {"command": ["a"]}, "sleep": {"seconds": 1}}}),
                 ("spec.containers[0].lifecycle.postStart.sleep", "Forbidden"),
                 id="poststart-two-handlers"),
    pytest.param(with_(with_(POD, "spec.terminationGracePeriodSeconds", 10),
                       "spec.containers[0].lifecycle", {"preStop": {"sleep": {"seconds": 20}}}),
                 ("spec.containers[0].lifecycle.preStop.sleep.seconds", "Invalid value"),
                 id="prestop-sleep-beyond-grace"),
    # pod spec
    pytest.param(with_(POD, "spec.restartPolicy", "Sometimes"),
                 ("spec.restartPolicy", "Unsupported value"), id="restart-policy"),
    pytest.param(with_(POD, "spec.terminationGracePeriodSeconds", -1),
                 ("spec.terminationGracePeriodSeconds", "Invalid value"), id="negative-grace"),
    pytest.param(with_(POD, "spec.activeDeadlineSeconds", 0),
                 ("spec.activeDeadlineSeconds", "Invalid value"), id="active-deadline"),
    pytest.param(with_(POD, "spec.nodeSelector", {"disk": "-ssd"}),
                 ("spec.nodeSelector", "Invalid value"), id="node-selector"),
    pytest.param(with_(POD, "spec.tolerations", [{"key": "k", "operator": "Is"}]),
                 ("spec.tolerations[0].operator", "Unsupported value"),
                 id="toleration-operator"),
    pytest.param(with_(POD, "spec.tolerations", [{"key": "k", "effect": "NoRun"}]),
                 ("spec.tolerations[0].effect", "Unsupported value"), id="toleration-effect"),
    pytest.param(with_(POD, "spec.tolerations", [{"key": "k", "effect": "NoSchedule",
                                                  "tolerationSeconds": 5}]),
                 ("spec.tolerations[0].effect", "Invalid value"),
                 id="toleration-seconds-need-no-execute"),
    pytest.param(with_(POD, "spec.tolerations", [{"operator": "Equal", "value": "x"}]),
                 ("spec.tolerations[0].operator", "Invalid value"),
                 id="toleration-empty-key-needs-exists"),
    pytest.param(with_(POD, "spec.tolerations", [{"key": "k", "operator": "Exists",
                                                  "value": "x"}]),
                 ("spec.tolerations[0].operator", "Invalid value"),
                 id="toleration-exists-without-value"),
    pytest.param(make_pod().spread(0, "zone", DO_NOT_SCHEDULE, None).obj(),
                 ("spec.topologySpreadConstraints[0].maxSkew", "Invalid value"),
                 id="spread-max-skew"),
    pytest.param(make_pod().spread(1, "", DO_NOT_SCHEDULE, None).obj(),
                 ("spec.topologySpreadConstraints[0].topologyKey", "Required value"),
                 id="spread-topology-key"),
    pytest.param(make_pod().spread(1, "zone", "Sometimes", None).obj(),
                 ("spec.topologySpreadConstraints[0].whenUnsatisfiable", "Unsupported value"),
                 id="spread-when-unsatisfiable"),
    pytest.param(make_pod().spread(1, "zone", DO_NOT_SCHEDULE, None)
                 .spread(2, "zone", DO_NOT_SCHEDULE, None).obj(),
                 ("spec.topologySpreadConstraints[1].{topologyKey, whenUnsatisfiable}",
                  "Duplicate value"), id="spread-duplicate"),
    pytest.param(make_pod().spread(1, "zone", DO_NOT_SCHEDULE, {"matchExpressions": [
        {"key": "app", "operator": "Has"}]}).obj(),
                 ("spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0]"
                  ".operator", "Unsupported value"), id="spread-label-selector"),
    pytest.param(make_pod().spread(1, "zone", SCHEDULE_ANYWAY, None, min_domains=2).obj(),
                 ("spec.topologySpreadConstraints[0].minDomains", "Invalid value"),
                 id="spread-min-domains-needs-do-not-schedule"),
    pytest.param(make_pod().scheduling_gate("a").scheduling_gate("a").obj(),
                 ("spec.schedulingGates[1].name", "Duplicate value"),
                 id="scheduling-gates-unique"),
    pytest.param(with_(POD, "status.phase", "Done"), ("status.phase", "Unsupported value"),
                 id="pod-phase"),
    pytest.param(with_(POD, "spec.dnsPolicy", "None"), ("spec.dnsConfig", "Required value"),
                 id="dns-none-needs-dns-config"),
    pytest.param(with_(with_(POD, "spec.dnsPolicy", "None"), "spec.dnsConfig",
                       {"searches": ["a.example"]}),
                 ("spec.dnsConfig.nameservers", "Required value"), id="dns-none-nameserver"),
    pytest.param(with_(POD, "spec.dnsConfig", {"nameservers": ["1.1.1.1", "1.0.0.1",
                                                               "8.8.8.8", "8.8.4.4"]}),
                 ("spec.dnsConfig.nameservers", "Invalid value"), id="dns-four-nameservers"),
    pytest.param(with_(POD, "spec.dnsConfig", {"nameservers": ["ten.one"]}),
                 ("spec.dnsConfig.nameservers[0]", "Invalid value"), id="dns-nameserver-ip"),
    pytest.param(with_(POD, "spec.dnsConfig", {"searches": ["ok.example", "Not Valid"]}),
                 ("spec.dnsConfig.searches[1]", "Invalid value"), id="dns-search"),
    pytest.param(with_(POD, "spec.dnsConfig", {"searches": [f"s{i}.example"
                                                            for i in range(33)]}),
                 ("spec.dnsConfig.searches", "Invalid value"), id="dns-33-searches"),
    pytest.param(with_(POD, "spec.dnsConfig", {"options": [{"value": "2"}]}),
                 ("spec.dnsConfig.options[0]", "Required value"), id="dns-option-name"),
])
def test_as7_invalid_object_names_the_field_path(obj: dict[str, Any],
                                                 expected: tuple[str, str]) -> None:
    assert paths(obj) == [expected]


def test_as7_invalid_container_name_names_the_field_path() -> None:
    pod = make_pod("p").container("ok").container("").obj()
    errors = validate(pod)
    assert [str(e) for e in errors] == ["spec.containers[1].name: Required value"]


def test_as7_errors_are_collected_not_first_only() -> None:
    pod = with_(with_(POD, "metadata.name", "Bad!"), "spec.containers[0].name")
    assert [p for p, _ in paths(pod)] == ["metadata.name", "spec.containers[0].name"]


def test_as7_garbage_shapes_report_errors_instead_of_raising() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": "x", "spec": [1]}
    assert paths(pod) == [("metadata", "Invalid value"), ("metadata.name", "Required value"),
                          ("metadata.namespace", "Required value"), ("spec", "Invalid value")]
    assert validate(with_(POD, "spec.containers", [None, 3, {"name": {}}])) != []


def test_as7_generate_name_replaces_name() -> None:
    pod = with_(with_(POD, "metadata.name"), "metadata.generateName", "web-")
    assert validate(pod) == []


@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param(with_(NODE, "spec.taints", [{"key": "node.kubernetes.io/unreachable"}]),
                 ("spec.taints[0].effect", "Required value"), id="taint-effect-required"),
    pytest.param(with_(NODE, "spec.taints", [{"key": "k", "effect": "NoWay"}]),
                 ("spec.taints[0].effect", "Unsupported value"), id="taint-effect-valid"),
    pytest.param(with_(NODE, "spec.taints", [{"key": "bad key", "effect": "NoSchedule"}]),
                 ("spec.taints[0].key", "Invalid value"), id="taint-key-qualified"),
    pytest.param(with_(NODE, "spec.taints", [{"key": "k", "effect": "NoExecute"},
                                             {"key": "k", "effect": "NoExecute"}]),
                 ("spec.taints[1]", "Duplicate value"), id="taint-duplicate"),
])
def test_ps2_node_taints_are_validated(obj: dict[str, Any], expected: tuple[str, str]) -> None:
    assert paths(obj) == [expected]


def test_ps2_unreachable_taints_are_valid() -> None:
    node = make_node("n1").taint("node.kubernetes.io/unreachable", "NoSchedule") \
        .taint("node.kubernetes.io/unreachable", "NoExecute").obj()
    assert validate(node) == []


@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param(with_(PC, "value"), ("value", "Required value"), id="value-required"),
    pytest.param(with_(PC, "value", "1000"), ("value", "Invalid value"), id="value-int"),
    pytest.param(with_(PC, "value", 1_000_000_001), ("value", "Forbidden"),
                 id="user-value-above-one-billion"),
    pytest.param(with_(PC, "metadata.name", "system-mine"), ("metadata.name", "Forbidden"),
                 id="system-prefix-reserved"),
    pytest.param(with_(with_(PC, "metadata.name", "system-node-critical"), "value", 5),
                 ("metadata.name", "Forbidden"), id="system-class-value-fixed"),
    pytest.param(with_(PC, "preemptionPolicy", "Sometimes"),
                 ("preemptionPolicy", "Unsupported value"), id="preemption-policy"),
    pytest.param(with_(PC, "value", 2**31), ("value", "Invalid value"), id="int32"),
])
def test_pp1_priority_class_rules(obj: dict[str, Any], expected: tuple[str, str]) -> None:
    assert paths(obj) == [expected]


@pytest.mark.parametrize(("name", "value"), [
    pytest.param("user-max", 1_000_000_000, id="user-max"),
    pytest.param("negative", -5, id="negative"),
    pytest.param("system-cluster-critical", 2_000_000_000, id="system-cluster-critical"),
    pytest.param("system-node-critical", 2_000_001_000, id="system-node-critical"),
])
def test_pp1_priority_class_accepted_values(name: str, value: int) -> None:
    assert validate(with_(with_(PC, "metadata.name", name), "value", value)) == []


def test_pp1_priority_class_value_and_policy_are_immutable() -> None:
    new = with_(with_(PC, "value", 5), "preemptionPolicy", "Never")
    assert paths(new, PC) == [("value", "Forbidden"), ("preemptionPolicy", "Invalid value")]
    assert validate(with_(PC, "description", "changed"), old=PC) == []


@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param(with_(PDB, "spec.maxUnavailable", 1), ("spec", "Invalid value"), id="both"),
    pytest.param(with_(PDB, "spec.minAvailable"), ("spec.minAvailable", "Required value"),
                 id="neither"),
    pytest.param(with_(PDB, "spec.minAvailable", -1), ("spec.minAvailable", "Invalid value"),
                 id="negative"),
    pytest.param(with_(PDB, "spec.minAvailable", "50"), ("spec.minAvailable", "Invalid value"),
                 id="string-without-percent"),
    pytest.param(with_(PDB, "spec.minAvailable", "150%"),
                 ("spec.minAvailable", "Invalid value"), id="percent-over-100"),
    pytest.param(with_(PDB, "spec.selector", {"matchLabels": {"-a": "b"}}),
                 ("spec.selector.matchLabels", "Invalid value"), id="selector"),
])
def test_as7_pdb_rules(obj: dict[str, Any], expected: tuple[str, str]) -> None:
    assert paths(obj) == [expected]


def test_as7_pdb_percent_is_accepted() -> None:
    assert validate(with_(with_(PDB, "spec.minAvailable"), "spec.maxUnavailable", "25%")) == []


@pytest.mark.parametrize("base", [pytest.param(RS, id="replicaset"),
                                  pytest.param(STS, id="statefulset")])
@pytest.mark.parametrize(("path", "value", "expected"), [
    pytest.param("spec.replicas", -1, ("spec.replicas", "Invalid value"), id="replicas"),
    pytest.param("spec.replicas", 1.5, ("spec.replicas", "Invalid value"), id="replicas-int"),
    pytest.param("spec.selector", MISSING, ("spec.selector", "Required value"),
                 id="selector-required"),
    pytest.param("spec.selector", {}, ("spec.selector", "Invalid value"),
                 id="selector-not-empty"),
    pytest.param("spec.template.metadata.labels", {"app": "db"},
                 ("spec.template.metadata.labels", "Invalid value"),
                 id="selector-does-not-match-template"),
    pytest.param("spec.template.spec.containers[0].name", "Bad",
                 ("spec.template.spec.containers[0].name", "Invalid value"),
                 id="template-pod-spec"),
    pytest.param("spec.template.spec.restartPolicy", "Never",
                 ("spec.template.spec.restartPolicy", "Unsupported value"),
                 id="template-restart-policy-always"),
])
def test_as7_workload_rules(base: dict[str, Any], path: str, value: Any,
                            expected: tuple[str, str]) -> None:
    assert paths(with_(base, path, value)) == [expected]


def test_as7_selector_mismatch_says_so() -> None:
    errors = validate(with_(RS, "spec.template.metadata.labels", {"app": "db"}))
    assert "does not match" in str(errors[0])


@pytest.mark.parametrize(("path", "value", "expected"), [
    pytest.param("spec.podManagementPolicy", "Random",
                 ("spec.podManagementPolicy", "Unsupported value"), id="pod-management"),
    pytest.param("spec.updateStrategy", {"type": "Rolling"},
                 ("spec.updateStrategy.type", "Unsupported value"), id="update-strategy"),
    pytest.param("spec.updateStrategy", {"type": "RollingUpdate",
                                         "rollingUpdate": {"partition": -1}},
                 ("spec.updateStrategy.rollingUpdate.partition", "Invalid value"),
                 id="partition"),
])
def test_statefulset_validation_rules(path: str, value: Any, expected: tuple[str, str]) -> None:
    assert paths(with_(STS, path, value)) == [expected]


def test_statefulset_selector_is_immutable() -> None:
    new = with_(with_(STS, "spec.selector.matchLabels.tier", "x"),
                "spec.template.metadata.labels.tier", "x")
    assert paths(new, STS) == [("spec", "Forbidden")]
    assert "spec.selector" in str(validate(new, old=STS)[0])
    assert validate(with_(STS, "spec.replicas", 5), old=STS) == []
    # the template may change; the controller rolls the pods to it
    image = with_(STS, "spec.template.spec.containers[0].image", "busybox:2")
    assert validate(image, old=STS) == []


def test_sc1_statefulset_container_may_mount_a_volume_claim_template() -> None:
    mounts = [{"name": "data", "mountPath": "/data"}]
    claim = [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]
    mounting = with_(STS, "spec.template.spec.containers[0].volumeMounts", mounts)
    assert validate(with_(mounting, "spec.volumeClaimTemplates", claim)) == []
    assert paths(mounting) == [("spec.template.spec.containers[0].volumeMounts[0].name",
                                "Not found")]


def test_as7_replicaset_selector_is_immutable() -> None:
    new = with_(with_(RS, "spec.selector.matchLabels.tier", "x"),
                "spec.template.metadata.labels.tier", "x")
    assert paths(new, RS) == [("spec.selector", "Invalid value")]


@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param(with_(LEASE, "spec.leaseDurationSeconds", 0),
                 ("spec.leaseDurationSeconds", "Invalid value"), id="lease-duration"),
    pytest.param(with_(LEASE, "spec.holderIdentity", 7),
                 ("spec.holderIdentity", "Invalid value"), id="lease-holder"),
    pytest.param(with_(EVENT, "involvedObject"), ("involvedObject", "Required value"),
                 id="event-involved-object"),
    pytest.param(with_(EVENT, "count", -1), ("count", "Invalid value"), id="event-count"),
])
def test_lease_and_event_validation_rules(obj: dict[str, Any], expected: tuple[str, str]) -> None:
    assert paths(obj) == [expected]
