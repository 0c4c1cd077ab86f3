"""SPEC AU7: the Pod Security Standards checks, as tables of pods and the violations
Kubernetes' PodSecurity admission reports for them (reason and detail text)."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api.podsecurity import (
    BASELINE,
    PRIVILEGED,
    RESTRICTED,
    ConfigError,
    LevelVersion,
    Policy,
    config_from_object,
    evaluate,
    pod_template,
    policy_from_labels,
    significant_pod_update,
)
from skiff.api.types import Obj

LATEST_RESTRICTED = LevelVersion(RESTRICTED)
LATEST_BASELINE = LevelVersion(BASELINE)

# A pod that passes restricted:latest; each case below changes one thing.
GOOD_CONTEXT: Obj = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def pod(*containers: Obj, **spec: Any) -> Obj:
    return {"containers": list(containers) or [container("c")],
            "securityContext": {"runAsNonRoot": True,
                                "seccompProfile": {"type": "RuntimeDefault"}}, **spec}


def container(name: str, **context: Any) -> Obj:
    return {"name": name, "image": "busybox", "securityContext": {**GOOD_CONTEXT, **context}}


BASELINE_CASES = [
    pytest.param(pod(hostNetwork=True), "host namespaces (hostNetwork=true)", id="hostNetwork"),
    pytest.param(pod(hostNetwork=True, hostPID=True, hostIPC=True),
                 "host namespaces (hostNetwork=true, hostPID=true, hostIPC=true)",
                 id="all-host-namespaces"),
    pytest.param(pod(volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
                 'hostPath volumes (volume "root")', id="hostPath"),
    pytest.param(pod(volumes=[{"name": "a", "hostPath": {"path": "/"}},
                              {"name": "b", "hostPath": {"path": "/etc"}}]),
                 'hostPath volumes (volumes "a", "b")', id="hostPath-two"),
    pytest.param(pod(container("c", privileged=True)),
                 'privileged (container "c" must not set securityContext.privileged=true)',
                 id="privileged"),
    pytest.param(pod(container("a", privileged=True), container("b", privileged=True)),
                 'privileged (containers "a", "b" must not set '
                 "securityContext.privileged=true)", id="privileged-two"),
    pytest.param(pod(container("c", capabilities={"add": ["NET_ADMIN", "CHOWN", "SYS_ADMIN"],
                                                  "drop": ["ALL"]})),
                 'non-default capabilities (container "c" must not include "NET_ADMIN", '
                 '"SYS_ADMIN" in securityContext.capabilities.add)', id="capabilities"),
    pytest.param(pod({**container("c"), "ports": [{"containerPort": 80, "hostPort": 8080},
                                                  {"containerPort": 90, "hostPort": 9090}]}),
                 'hostPort (container "c" uses hostPorts 8080, 9090)', id="hostPorts"),
    pytest.param(pod(container("c", procMount="Unmasked")),
                 'procMount (container "c" must not set securityContext.procMount to '
                 '"Unmasked")', id="procMount"),
    pytest.param(pod(container("c", seLinuxOptions={"type": "spc_t", "user": "root"})),
                 'seLinuxOptions (container "c" set forbidden securityContext.seLinuxOptions: '
                 'type "spc_t"; user may not be set)', id="seLinux"),
    pytest.param(pod(container("c", seccompProfile={"type": "Unconfined"})),
                 'seccompProfile (container "c" must not set '
                 'securityContext.seccompProfile.type to "Unconfined")', id="seccomp"),
    pytest.param(pod(securityContext={"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}),
                 "forbidden sysctls (kernel.msgmax)", id="sysctls"),
    pytest.param(pod(container("c", appArmorProfile={"type": "Unconfined"})),
                 'forbidden AppArmor profile (container "c" must not set AppArmor profile '
                 'type to "Unconfined")', id="appArmor"),
    pytest.param(pod(container("c", windowsOptions={"hostProcess": True})),
                 'hostProcess (container "c" must not set '
                 "securityContext.windowsOptions.hostProcess=true)", id="hostProcess"),
    pytest.param(pod({**container("c"), "livenessProbe": {"httpGet": {"host": "10.0.0.1",
                                                                      "port": 80}}}),
                 'probe or lifecycle host (container "c" uses probe or lifecycle host '
                 '"10.0.0.1")', id="probe-host"),
]


@pytest.mark.parametrize(("spec", "expected"), BASELINE_CASES)
def test_au7_baseline_checks_name_the_violation_as_kubernetes(spec: Obj, expected: str) -> None:
    assert evaluate(LATEST_BASELINE, {}, spec).detail() == expected


def test_au7_a_restricted_pod_passes_every_level() -> None:
    for level in (PRIVILEGED, BASELINE, RESTRICTED):
        assert evaluate(LevelVersion(level), {}, pod()).allowed


def test_au7_privileged_checks_nothing() -> None:
    spec = pod(container("c", privileged=True), hostNetwork=True)
    assert evaluate(LevelVersion(PRIVILEGED), {}, spec).allowed


RESTRICTED_CASES = [
    pytest.param(
        {"containers": [{"name": "c", "image": "busybox"}]},
        'allowPrivilegeEscalation != false (container "c" must set '
        "securityContext.allowPrivilegeEscalation=false), unrestricted capabilities "
        '(container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != '
        'true (pod or container "c" must set securityContext.runAsNonRoot=true), '
        'seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to '
        '"RuntimeDefault" or "Localhost")', id="plain-pod"),
    pytest.param(
        pod(volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
        'restricted volume types (volume "root" uses restricted volume type "hostPath")',
        id="hostPath-is-a-restricted-volume-type"),
    pytest.param(
        pod(volumes=[{"name": "ok", "emptyDir": {}}, {"name": "n", "nfs": {"path": "/"}},
                     {"name": "h", "hostPath": {"path": "/"}}]),
        'restricted volume types (volumes "n", "h" use restricted volume types "hostPath", '
        '"nfs")', id="two-restricted-volumes"),
    pytest.param(
        pod(container("c", privileged=True, allowPrivilegeEscalation=True), hostNetwork=True),
        'host namespaces (hostNetwork=true), privileged (container "c" must not set '
        'securityContext.privileged=true), allowPrivilegeEscalation != false (container "c" '
        "must set securityContext.allowPrivilegeEscalation=false)",
        id="baseline-first-then-restricted"),
    pytest.param(
        pod(container("c", capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE",
                                                                  "SYS_TIME"]})),
        'unrestricted capabilities (container "c" must not include "SYS_TIME" in '
        "securityContext.capabilities.add)", id="capabilities-add"),
    pytest.param(
        pod(container("c", runAsNonRoot=False)),
        'runAsNonRoot != true (container "c" must not set securityContext.runAsNonRoot=false)',
        id="runAsNonRoot-false"),
    pytest.param(
        pod(container("c", runAsUser=0)),
        'runAsUser=0 (container "c" must not set runAsUser=0)', id="runAsUser-0"),
    pytest.param(
        {**pod(), "securityContext": {"runAsNonRoot": True, "runAsUser": 0,
                                      "seccompProfile": {"type": "Unconfined"}}},
        'runAsUser=0 (pod must not set runAsUser=0), seccompProfile (pod must not set '
        'securityContext.seccompProfile.type to "Unconfined")', id="pod-level"),
]


@pytest.mark.parametrize(("spec", "expected"), RESTRICTED_CASES)
def test_au7_restricted_checks_name_the_violation_as_kubernetes(spec: Obj,
                                                                expected: str) -> None:
    assert evaluate(LATEST_RESTRICTED, {}, spec).detail() == expected


def test_au7_baseline_does_not_run_restricted_checks() -> None:
    assert evaluate(LATEST_BASELINE, {}, {"containers": [{"name": "c"}]}).allowed


def test_au7_init_and_ephemeral_containers_are_checked() -> None:
    spec = pod(initContainers=[container("init", privileged=True)],
               ephemeralContainers=[container("debug", privileged=True)])
    assert evaluate(LATEST_BASELINE, {}, spec).detail() == (
        'privileged (containers "init", "debug" must not set securityContext.privileged=true)')


VERSION_CASES = [
    # runAsUser=0 is a restricted violation from v1.23
    pytest.param(pod(container("c", runAsUser=0)), 22, True, id="runAsUser-before-1.23"),
    pytest.param(pod(container("c", runAsUser=0)), 23, False, id="runAsUser-from-1.23"),
    # drop ALL is required from v1.22
    pytest.param(pod(container("c", capabilities={})), 21, True, id="drop-all-before-1.22"),
    pytest.param(pod(container("c", capabilities={})), 22, False, id="drop-all-from-1.22"),
    # probe hosts are forbidden from v1.34
    pytest.param(pod({**container("c"), "readinessProbe": {"tcpSocket": {"host": "h",
                                                                         "port": 1}}}),
                 33, True, id="probe-host-before-1.34"),
]


@pytest.mark.parametrize(("spec", "minor", "allowed"), VERSION_CASES)
def test_au7_policy_versions_apply_the_checks_of_their_version(spec: Obj, minor: int,
                                                               allowed: bool) -> None:
    assert evaluate(LevelVersion(RESTRICTED, minor), {}, spec).allowed is allowed


def test_au7_windows_pods_skip_linux_only_restricted_checks_from_1_25() -> None:
    spec = {"os": {"name": "windows"}, "containers": [{"name": "c"}],
            "securityContext": {"runAsNonRoot": True}}
    assert evaluate(LATEST_RESTRICTED, {}, spec).allowed
    assert not evaluate(LevelVersion(RESTRICTED, 24), {}, spec).allowed


LABEL_CASES = [
    pytest.param({}, Policy(), [], id="no-labels-take-the-default"),
    pytest.param({"pod-security.kubernetes.io/enforce": "restricted"},
                 Policy(enforce=LevelVersion(RESTRICTED)), [], id="enforce"),
    pytest.param({"pod-security.kubernetes.io/warn": "baseline",
                  "pod-security.kubernetes.io/warn-version": "v1.25"},
                 Policy(warn=LevelVersion(BASELINE, 25)), [], id="warn-versioned"),
    pytest.param({"pod-security.kubernetes.io/enforce": "strict"},
                 Policy(enforce=LevelVersion(RESTRICTED)),
                 ['metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: '
                  '"strict": must be one of privileged, baseline, restricted'],
                 id="invalid-enforce-level-enforces-restricted"),
    pytest.param({"pod-security.kubernetes.io/audit": "x",
                  "pod-security.kubernetes.io/audit-version": "1.2"},
                 Policy(),
                 ['metadata.labels[pod-security.kubernetes.io/audit]: Invalid value: "x": '
                  "must be one of privileged, baseline, restricted",
                  'metadata.labels[pod-security.kubernetes.io/audit-version]: Invalid value: '
                  '"1.2": must be "latest" or "v1.x"'],
                 id="invalid-audit-fails-open"),
]


@pytest.mark.parametrize(("labels", "policy", "errors"), LABEL_CASES)
def test_au7_namespace_labels_resolve_to_a_policy(labels: dict[str, str], policy: Policy,
                                                  errors: list[str]) -> None:
    got, problems = policy_from_labels(labels, Policy())
    assert got == policy
    assert [str(p) for p in problems] == errors


def test_au7_level_version_prints_as_kubernetes() -> None:
    assert str(LevelVersion(RESTRICTED)) == "restricted:latest"
    assert str(LevelVersion(BASELINE, 25)) == "baseline:v1.25"


TEMPLATE_CASES = [
    pytest.param("Deployment", {"spec": {"template": {"spec": {"hostNetwork": True}}}},
                 id="deployment"),
    pytest.param("CronJob", {"spec": {"jobTemplate": {"spec": {"template": {
        "spec": {"hostNetwork": True}}}}}}, id="cronjob"),
    pytest.param("PodTemplate", {"template": {"spec": {"hostNetwork": True}}},
                 id="podtemplate"),
]


@pytest.mark.parametrize(("kind", "obj"), TEMPLATE_CASES)
def test_au7_workload_templates_are_found(kind: str, obj: Obj) -> None:
    found = pod_template(kind, obj)
    assert found is not None and found[1] == {"hostNetwork": True}


def test_au7_objects_without_template_are_not_checked() -> None:
    assert pod_template("ConfigMap", {"data": {}}) is None
    assert pod_template("ReplicationController", {"spec": {}}) is None


def test_au7_only_image_and_seccomp_changes_are_significant_pod_updates() -> None:
    old: Obj = {"metadata": {"labels": {"a": "1"}}, "spec": {"containers": [container("c")]}}
    relabelled = {"metadata": {"labels": {"a": "2"}}, "spec": old["spec"]}
    new_image = {"metadata": {}, "spec": {"containers": [{**container("c"), "image": "x"}]}}
    debug = {"metadata": {}, "spec": {**old["spec"],
                                      "ephemeralContainers": [container("dbg")]}}
    assert not significant_pod_update(relabelled, old)
    assert significant_pod_update(new_image, old)
    assert significant_pod_update(debug, old)


def test_au7_configuration_defaults_to_privileged_and_reads_exemptions() -> None:
    config = config_from_object({
        "apiVersion": "pod-security.admission.config.k8s.io/v1",
        "kind": "PodSecurityConfiguration",
        "defaults": {"enforce": "baseline", "warn": "restricted", "warn-version": "v1.30"},
        "exemptions": {"usernames": ["ops"], "namespaces": ["kube-system"]}})
    assert config.defaults == Policy(enforce=LevelVersion(BASELINE),
                                     warn=LevelVersion(RESTRICTED, 30))
    assert config.exemptions.usernames == ("ops",)
    assert config.exemptions.namespaces == ("kube-system",)


@pytest.mark.parametrize("bad", [
    pytest.param({"defaults": {"enforce": "strict"}}, id="level"),
    pytest.param({"defaults": {"audit-version": "2"}}, id="version"),
    pytest.param({"exemptions": {"usernames": ["a", "a"]}}, id="duplicate"),
])
def test_au7_invalid_configuration_is_refused(bad: Obj) -> None:
    with pytest.raises(ConfigError):
        config_from_object({"apiVersion": "pod-security.admission.config.k8s.io/v1",
                            "kind": "PodSecurityConfiguration", **bad})


@pytest.mark.parametrize("spec", [
    pytest.param({"containers": "c"}, id="containers-not-a-list"),
    pytest.param({"containers": [{"name": "c", "ports": 80,
                                  "securityContext": {"capabilities": {"drop": "ALL",
                                                                       "add": None}}}]},
                 id="ports-and-capabilities-not-lists"),
    pytest.param({"volumes": {"a": 1}, "securityContext": {"sysctls": "x"}},
                 id="volumes-and-sysctls-not-lists"),
])
def test_au7_malformed_specs_are_evaluated_without_failing(spec: Obj) -> None:
    for level in (BASELINE, RESTRICTED):
        evaluate(LevelVersion(level), {"annotations": ["x"]}, spec)
