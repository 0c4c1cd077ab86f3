"""SPEC EX7: ValidatingAdmissionPolicy end to end — the real `kubectl` applies the Kubernetes
documentation's example policies against a real apiserver and etcd: the "replicas ≤ 5"
Deployment policy with a binding scoped by a namespace label, a policy whose params are a
ConfigMap, Warn against Deny actions, and a policy whose expression does not compile. Each
test works in namespaces of its own, so one test's bindings never touch another's objects;
every change is waited for (it takes effect within about a second)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.kubectl import http_front, kubectl

DEMO_POLICY = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: "demo-policy.example.com"
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups:   ["apps"]
      apiVersions: ["v1"]
      operations:  ["CREATE", "UPDATE"]
      resources:   ["deployments"]
  validations:
    - expression: "object.spec.replicas <= 5"
"""

DEMO_BINDING = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: "demo-binding-test.example.com"
spec:
  policyName: "demo-policy.example.com"
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        environment: test
"""


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with http_front(tmp_path_factory.mktemp("policies") / "cluster") as (_, _, kubeconfig):
        yield kubeconfig


def _ok(config: Path, *args: str, stdin: str | None = None) -> str:
    done = kubectl(config, *args, stdin=stdin)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _namespace(config: Path, name: str, **labels: str) -> None:
    _ok(config, "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": labels}}))


def _deployment(config: Path, namespace: str, replicas: int, *, name: str = "nginx",
                dry_run: bool = True) -> subprocess.CompletedProcess[str]:
    args = ["create", "deployment", name, "--image=nginx", f"--replicas={replicas}",
            "-n", namespace]
    return kubectl(config, *args, *(["--dry-run=server"] if dry_run else []))


def _until(check: Callable[[], bool], what: str, *, seconds: float = 5) -> None:
    """Policies, bindings and params apply within about a second (the apiserver reads them
    from its watch-fed copies)."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_ex7_replica_limit_policy_scoped_by_a_namespace_label(config: Path) -> None:
    _namespace(config, "ex7-test", environment="test")
    _namespace(config, "ex7-prod", environment="prod")
    _ok(config, "apply", "-f", "-", stdin=DEMO_POLICY + "---" + DEMO_BINDING)
    stored = json.loads(_ok(config, "get", "validatingadmissionpolicy",
                            "demo-policy.example.com", "-o", "json"))
    assert stored["spec"]["matchConstraints"]["matchPolicy"] == "Equivalent"
    _until(lambda: json.loads(_ok(config, "get", "validatingadmissionpolicy",
                                  "demo-policy.example.com", "-o", "json")).get("status")
           == {"observedGeneration": 1, "typeChecking": {}}, "status observed")
    _until(lambda: _deployment(config, "ex7-test", 6).returncode != 0, "policy in effect")
    denial = ("ValidatingAdmissionPolicy 'demo-policy.example.com' with binding "
              "'demo-binding-test.example.com' denied request: failed expression: "
              "object.spec.replicas <= 5")
    refused = _deployment(config, "ex7-test", 6, dry_run=False)
    assert refused.returncode != 0
    assert refused.stderr.strip() == ("error: failed to create deployment: deployments.apps "
                                      f'"nginx" is forbidden: {denial}')
    # from a manifest kubectl reads the Invalid status' cause, as the documentation shows
    manifest = _ok(config, "create", "deployment", "nginx", "--image=nginx",
                   "--replicas=6", "-n", "ex7-test", "--dry-run=client", "-o", "yaml")
    created = kubectl(config, "create", "-f", "-", stdin=manifest)
    assert created.returncode != 0
    assert created.stderr.strip() == f'The deployments "nginx" is invalid: : {denial}'

    _ok(config, "create", "deployment", "nginx", "--image=nginx", "--replicas=5",
        "-n", "ex7-test")
    # an update is checked too; a namespace the binding does not select is not
    scaled = kubectl(config, "scale", "deployment", "nginx", "--replicas=7", "-n", "ex7-test")
    assert scaled.returncode != 0 and "denied request" in scaled.stderr
    _ok(config, "create", "deployment", "nginx", "--image=nginx", "--replicas=6",
        "-n", "ex7-prod")
    table = _ok(config, "get", "validatingadmissionpolicybindings")
    assert table.split("\n")[0].split() == ["NAME", "POLICYNAME", "PARAMREF", "AGE"]
    # (the columns' widths depend on the other tests' bindings in this module's cluster)
    rows = {line.split()[0]: line.split()[1:] for line in table.splitlines()[1:]}
    assert rows["demo-binding-test.example.com"][:2] == ["demo-policy.example.com", "<unset>"]
    # deleting the binding lifts the limit within about a second
    _ok(config, "delete", "validatingadmissionpolicybinding", "demo-binding-test.example.com")
    _until(lambda: _deployment(config, "ex7-test", 6, name="after").returncode == 0,
           "binding gone")
    # a change of the spec is a new generation, observed in the status
    _ok(config, "apply", "-f", "-", stdin=DEMO_POLICY + '      message: "at most 5"\n')
    _until(lambda: json.loads(_ok(config, "get", "validatingadmissionpolicy",
                                  "demo-policy.example.com", "-o", "json"))["status"]
           ["observedGeneration"] == 2, "generation 2 observed")


PARAM_POLICY = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: "replica-limit-cm.example.com"
spec:
  failurePolicy: Fail
  paramKind:
    apiVersion: v1
    kind: ConfigMap
  matchConstraints:
    resourceRules:
    - apiGroups:   ["apps"]
      apiVersions: ["v1"]
      operations:  ["CREATE", "UPDATE"]
      resources:   ["deployments"]
  validations:
    - expression: "object.spec.replicas <= int(params.data.maxReplicas)"
      messageExpression: "'object.spec.replicas must be no greater than ' + params.data.maxReplicas"
      reason: Invalid
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: "replica-limit-test.example.com"
spec:
  policyName: "replica-limit-cm.example.com"
  validationActions: [Deny]
  paramRef:
    name: "replica-limit-test.example.com"
    namespace: "ex7-params-config"
    parameterNotFoundAction: Deny
  matchResources:
    namespaceSelector:
      matchLabels:
        ex7: params
"""


def test_ex7_params_from_a_config_map(config: Path) -> None:
    _namespace(config, "ex7-params", ex7="params")
    _namespace(config, "ex7-params-config")
    _ok(config, "apply", "-f", "-", stdin=PARAM_POLICY)
    _until(lambda: "no params found" in _deployment(config, "ex7-params", 1).stderr,
           "a missing param refuses (parameterNotFoundAction: Deny)")
    assert ("ValidatingAdmissionPolicy 'replica-limit-cm.example.com' with binding "
            "'replica-limit-test.example.com' denied request: failed to configure binding: "
            "no params found for policy binding with `Deny` parameterNotFoundAction"
            ) in _deployment(config, "ex7-params", 1).stderr
    _ok(config, "create", "configmap", "replica-limit-test.example.com",
        "-n", "ex7-params-config", "--from-literal=maxReplicas=3")
    _until(lambda: _deployment(config, "ex7-params", 3).returncode == 0, "param found")
    refused = _deployment(config, "ex7-params", 4)
    assert refused.returncode != 0
    assert refused.stderr.strip().endswith(
        "denied request: object.spec.replicas must be no greater than 3")
    # a change of the param applies to the next requests
    _ok(config, "patch", "configmap", "replica-limit-test.example.com", "-n",
        "ex7-params-config", "--type=merge", "-p", '{"data": {"maxReplicas": "10"}}')
    _until(lambda: _deployment(config, "ex7-params", 4).returncode == 0, "param updated")


WARN_POLICY = DEMO_POLICY.replace("demo-policy.example.com", "warn-policy.example.com")
WARN_BINDING = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: "warn-binding.example.com"
spec:
  policyName: "warn-policy.example.com"
  validationActions: [{actions}]
  matchResources:
    namespaceSelector:
      matchLabels:
        ex7: warn
"""


def test_ex7_warn_admits_with_a_warning_and_deny_refuses(config: Path) -> None:
    _namespace(config, "ex7-warn", ex7="warn")
    _ok(config, "apply", "-f", "-",
        stdin=WARN_POLICY + "---" + WARN_BINDING.format(actions="Warn, Audit"))
    warning = ("Warning: Validation failed for ValidatingAdmissionPolicy "
               "'warn-policy.example.com' with binding 'warn-binding.example.com': failed "
               "expression: object.spec.replicas <= 5")
    _until(lambda: warning in _deployment(config, "ex7-warn", 6).stderr, "warning given")
    created = _deployment(config, "ex7-warn", 6, dry_run=False)
    assert created.returncode == 0 and warning in created.stderr
    _ok(config, "apply", "-f", "-", stdin=WARN_BINDING.format(actions="Deny"))
    _until(lambda: _deployment(config, "ex7-warn", 6, name="other").returncode != 0,
           "Deny in effect")


def test_ex7_a_policy_that_does_not_compile_is_refused(config: Path) -> None:
    done = kubectl(config, "apply", "-f", "-", stdin=DEMO_POLICY.replace(
        "name: \"demo-policy.example.com\"", "name: broken.example.com").replace(
        "object.spec.replicas <= 5", "object.spec.replicas <="))
    assert done.returncode != 0
    assert ('spec.validations[0].expression: Invalid value: "object.spec.replicas <=": '
            "compilation failed: ERROR: <input>:1:24: Syntax error: ") in done.stderr
    binding = kubectl(config, "apply", "-f", "-",
                      stdin=WARN_BINDING.format(actions="Deny, Warn").replace(
                          "warn-binding", "both-binding"))
    assert binding.returncode != 0
    assert "spec.validationActions: Invalid value: " in binding.stderr
    assert "must not contain both Deny and Warn" in binding.stderr


REPLICA_LIMIT_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: replicalimits.rules.example.com
spec:
  group: rules.example.com
  scope: Namespaced
  names: {plural: replicalimits, singular: replicalimit, kind: ReplicaLimit}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          maxReplicas: {type: integer}
"""

CRD_PARAM_POLICY = """
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: "replicalimit-policy.example.com"
spec:
  failurePolicy: Fail
  paramKind:
    apiVersion: rules.example.com/v1
    kind: ReplicaLimit
  matchConstraints:
    resourceRules:
    - apiGroups:   ["apps"]
      apiVersions: ["v1"]
      operations:  ["CREATE", "UPDATE"]
      resources:   ["deployments"]
  validations:
    - expression: "object.spec.replicas <= params.maxReplicas"
      reason: Invalid
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: "replicalimit-binding-test.example.com"
spec:
  policyName: "replicalimit-policy.example.com"
  validationActions: [Deny]
  paramRef:
    name: "replica-limit-test.example.com"
    namespace: "ex7-crd"
    parameterNotFoundAction: Deny
  matchResources:
    namespaceSelector:
      matchLabels:
        ex7: crd
"""


def test_ex7_params_from_a_custom_resource(config: Path) -> None:
    """The documentation's ReplicaLimit example: before its CRD exists the policy cannot
    be configured (failurePolicy Fail refuses); then the custom object is the param."""
    _namespace(config, "ex7-crd", ex7="crd")
    _ok(config, "apply", "-f", "-", stdin=CRD_PARAM_POLICY)
    _until(lambda: "failed to find resource referenced by paramKind: 'rules.example.com/v1, "
           "Kind=ReplicaLimit'" in _deployment(config, "ex7-crd", 1).stderr,
           "an unknown paramKind refuses")
    _ok(config, "apply", "-f", "-", stdin=REPLICA_LIMIT_CRD)
    _ok(config, "wait", "--for=condition=Established", "--timeout=10s",
        "crd/replicalimits.rules.example.com")
    limit = json.dumps({"apiVersion": "rules.example.com/v1", "kind": "ReplicaLimit",
                        "metadata": {"name": "replica-limit-test.example.com",
                                     "namespace": "ex7-crd"}, "maxReplicas": 3})
    _until(lambda: kubectl(config, "apply", "-f", "-", stdin=limit).returncode == 0,
           "ReplicaLimit served")
    _until(lambda: _deployment(config, "ex7-crd", 3).returncode == 0, "param in use")
    refused = _deployment(config, "ex7-crd", 4)
    assert refused.returncode != 0
    assert refused.stderr.strip().endswith(
        "'replicalimit-binding-test.example.com' denied request: failed expression: "
        "object.spec.replicas <= params.maxReplicas")
