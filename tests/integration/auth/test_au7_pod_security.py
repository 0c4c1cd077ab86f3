"""SPEC AU7: Pod Security admission against a real TLS apiserver,
driven with the real kubectl where its output is what users see.

The apiserver runs with an AdmissionConfiguration whose PodSecurityConfiguration sets the
cluster default to `baseline` and exempts user `ops`, runtimeClass `kata` and namespace
`ps-exempt`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from skiff.pki import CertPair, ClusterPki, issue_client
from tests.integration.auth.conftest import start_secure_cluster
from tests.integration.kubectl import kubectl

pytestmark = pytest.mark.integration

ADMISSION_CONFIG = """\
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: baseline
    exemptions:
      usernames: [ops]
      runtimeClasses: [kata]
      namespaces: [ps-exempt]
"""

RESTRICTED_LABELS = {"pod-security.kubernetes.io/enforce": "restricted",
                     "pod-security.kubernetes.io/enforce-version": "latest"}
RESTRICTED_CONTEXT = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                      "runAsNonRoot": True, "runAsUser": 1000,
                      "seccompProfile": {"type": "RuntimeDefault"}}
ALL_RESTRICTED = ('allowPrivilegeEscalation != false (container "c" must set '
                  "securityContext.allowPrivilegeEscalation=false), unrestricted capabilities "
                  '(container "c" must set securityContext.capabilities.drop=["ALL"]), '
                  'runAsNonRoot != true (pod or container "c" must set '
                  "securityContext.runAsNonRoot=true), seccompProfile (pod or container \"c\" "
                  'must set securityContext.seccompProfile.type to "RuntimeDefault" or '
                  '"Localhost")')


@dataclass
class Cluster:
    root: Path
    pki: ClusterPki
    https: str

    def kubeconfig(self, name: str, pair: CertPair) -> Path:
        path = self.root / f"kubeconfig-{name}"
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": self.https,
                                                   "certificate-authority": str(self.pki.ca)}}],
            "users": [{"name": "u", "user": {"client-certificate": str(pair.cert),
                                             "client-key": str(pair.key)}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
        return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    assert shutil.which("kubectl"), "kubectl is not installed"
    root = tmp_path_factory.mktemp("podsecurity")
    config = root / "admission.yaml"
    config.write_text(ADMISSION_CONFIG)
    with start_secure_cluster(root, nodes=("node-1",), apiserver_args=(
            "--admission-control-config-file", str(config))) as secure:
        yield Cluster(root, secure.pki, secure.https)


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> Path:
    return cluster.kubeconfig("admin", cluster.pki.admin)


def apply(config: Path, *objects: dict[str, object]) -> subprocess.CompletedProcess[str]:
    return kubectl(config, "create", "-f", "-",
                   stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                     "items": list(objects)}))


def namespace(name: str, labels: dict[str, str]) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": labels}}


def pod(name: str, ns: str, *, context: dict[str, object] | None = None,
        **spec: object) -> dict[str, object]:
    c: dict[str, object] = {"name": "c", "image": "busybox", "command": ["sleep", "1"]}
    if context is not None:
        c["securityContext"] = context
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [c], **spec}}


def test_au7_enforce_restricted_refuses_hostpath_hostnetwork_and_privileged_pods(
        admin: Path) -> None:
    made = apply(admin, namespace("ps-restricted", RESTRICTED_LABELS))
    assert made.returncode == 0, made.stderr
    host_root = pod("host-root", "ps-restricted",
                    volumes=[{"name": "root", "hostPath": {"path": "/"}}])
    host_net = pod("host-net", "ps-restricted", context=RESTRICTED_CONTEXT, hostNetwork=True)
    privileged = pod("priv", "ps-restricted", context={**RESTRICTED_CONTEXT,
                                                       "privileged": True})
    out = apply(admin, host_root, host_net, privileged)
    assert out.returncode != 0
    prefix = 'Error from server (Forbidden): error when creating "STDIN": pods'
    assert (f'{prefix} "host-root" is forbidden: violates PodSecurity "restricted:latest": '
            + ALL_RESTRICTED.replace("runAsNonRoot", 'restricted volume types (volume "root" '
                                     'uses restricted volume type "hostPath"), runAsNonRoot',
                                     1)) in out.stderr
    assert (f'{prefix} "host-net" is forbidden: violates PodSecurity "restricted:latest": '
            "host namespaces (hostNetwork=true)") in out.stderr
    assert (f'{prefix} "priv" is forbidden: violates PodSecurity "restricted:latest": '
            'privileged (container "c" must not set securityContext.privileged=true)'
            ) in out.stderr
    listed = kubectl(admin, "get", "pods", "-n", "ps-restricted", "-o", "name")
    assert listed.stdout.strip() == ""


def test_au7_restricted_compliant_pod_is_admitted(admin: Path) -> None:
    apply(admin, namespace("ps-restricted-ok", RESTRICTED_LABELS))
    out = apply(admin, pod("fine", "ps-restricted-ok", context=RESTRICTED_CONTEXT))
    assert out.returncode == 0, out.stderr
    assert "pod/fine created" in out.stdout
    assert "Warning" not in out.stderr
    # one field short of restricted is one violation, named alone
    lacking = {k: v for k, v in RESTRICTED_CONTEXT.items() if k != "seccompProfile"}
    out = apply(admin, pod("almost", "ps-restricted-ok", context=lacking))
    assert out.returncode != 0
    assert ('pods "almost" is forbidden: violates PodSecurity "restricted:latest": '
            'seccompProfile (pod or container "c" must set securityContext.seccompProfile.type '
            'to "RuntimeDefault" or "Localhost")\n') in out.stderr


def test_au7_warn_baseline_prints_kubectls_warning_and_admits(admin: Path) -> None:
    apply(admin, namespace("ps-warn", {"pod-security.kubernetes.io/enforce": "privileged",
                                       "pod-security.kubernetes.io/warn": "baseline"}))
    out = apply(admin, pod("loud", "ps-warn", hostNetwork=True))
    assert out.returncode == 0, out.stderr
    assert ('Warning: would violate PodSecurity "baseline:latest": host namespaces '
            "(hostNetwork=true)") in out.stderr
    assert "pod/loud created" in out.stdout


def test_au7_deployment_with_violating_template_is_admitted_with_a_warning(
        admin: Path) -> None:
    apply(admin, namespace("ps-deploy", {**RESTRICTED_LABELS,
                                         "pod-security.kubernetes.io/warn": "restricted"}))
    template = pod("x", "ps-deploy")
    deployment: dict[str, object] = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ps-deploy"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": template["spec"]}}}
    out = apply(admin, deployment)
    assert out.returncode == 0, out.stderr
    assert f'Warning: would violate PodSecurity "restricted:latest": {ALL_RESTRICTED}' \
        in out.stderr
    assert "deployment.apps/web created" in out.stdout


def test_au7_cluster_default_from_the_admission_configuration_enforces(admin: Path) -> None:
    apply(admin, namespace("ps-unlabelled", {}))
    out = apply(admin, pod("priv", "ps-unlabelled", context={"privileged": True}))
    assert out.returncode != 0
    assert ('pods "priv" is forbidden: violates PodSecurity "baseline:latest": privileged '
            '(container "c" must not set securityContext.privileged=true)') in out.stderr


def test_au7_exempt_namespace_and_user_are_not_checked(cluster: Cluster, admin: Path) -> None:
    apply(admin, namespace("ps-exempt", RESTRICTED_LABELS),
          namespace("ps-for-ops", RESTRICTED_LABELS))
    out = apply(admin, pod("host", "ps-exempt", hostNetwork=True))
    assert out.returncode == 0, out.stderr
    refused = apply(admin, pod("host", "ps-for-ops", hostNetwork=True))
    assert "violates PodSecurity" in refused.stderr
    ops = cluster.kubeconfig("ops", issue_client(cluster.pki.directory, "user-ops",
                                                 user="ops", groups=("system:masters",)))
    out = apply(ops, pod("host", "ps-for-ops", hostNetwork=True))
    assert out.returncode == 0, out.stderr
    assert "pod/host created" in out.stdout
    out = apply(admin, pod("sandboxed", "ps-for-ops", hostNetwork=True,
                           runtimeClassName="kata"))
    assert out.returncode == 0, out.stderr


def test_au7_invalid_namespace_labels_are_refused(admin: Path) -> None:
    out = apply(admin, namespace("ps-bad", {"pod-security.kubernetes.io/enforce": "strict"}))
    assert out.returncode != 0
    assert ('The Namespace "ps-bad" is invalid: metadata.labels[pod-security.kubernetes.io/'
            'enforce]: Invalid value: "strict": must be one of privileged, baseline, '
            "restricted") in out.stderr
    apply(admin, namespace("ps-bad-version", {}))
    out = kubectl(admin, "label", "namespace", "ps-bad-version",
                  "pod-security.kubernetes.io/warn-version=1.25")
    assert out.returncode != 0
    assert 'must be "latest" or "v1.x"' in out.stderr


def test_au7_enforcing_on_a_namespace_warns_about_existing_pods(admin: Path) -> None:
    apply(admin, namespace("ps-existing", {}))
    made = apply(admin, pod("a", "ps-existing"), pod("b", "ps-existing"),
                 pod("fine", "ps-existing", context=RESTRICTED_CONTEXT))
    assert made.returncode == 0, made.stderr
    out = kubectl(admin, "label", "namespace", "ps-existing",
                  "pod-security.kubernetes.io/enforce=restricted")
    assert out.returncode == 0, out.stderr
    assert ('Warning: existing pods in namespace "ps-existing" violate the new PodSecurity '
            'enforce level "restricted:latest"') in out.stderr
    assert ("Warning: a (and 1 other pod): allowPrivilegeEscalation != false, unrestricted "
            "capabilities, runAsNonRoot != true, seccompProfile") in out.stderr
    assert "fine" not in out.stderr


def test_au7_pod_updates_are_enforced_when_they_change_what_is_checked(admin: Path) -> None:
    """As Kubernetes: an existing violating pod may still be relabelled, but a new image
    (or an added ephemeral container) is checked against the enforce level."""
    apply(admin, namespace("ps-update", {}))
    assert apply(admin, pod("old", "ps-update")).returncode == 0
    labelled = kubectl(admin, "label", "namespace", "ps-update",
                       "pod-security.kubernetes.io/enforce=restricted")
    assert labelled.returncode == 0, labelled.stderr
    relabel = kubectl(admin, "label", "pod", "old", "-n", "ps-update", "tier=web")
    assert relabel.returncode == 0, relabel.stderr
    image = kubectl(admin, "set", "image", "pod/old", "-n", "ps-update", "c=busybox:1.36")
    assert image.returncode != 0
    assert f'pods "old" is forbidden: violates PodSecurity "restricted:latest": ' \
           f"{ALL_RESTRICTED}" in image.stderr


def test_au7_audit_mode_admits_and_records_the_violation_in_the_log(cluster: Cluster,
                                                                     admin: Path) -> None:
    """Skiff has no audit log: the audit annotation Kubernetes would add is logged."""
    apply(admin, namespace("ps-audit", {"pod-security.kubernetes.io/enforce": "privileged",
                                        "pod-security.kubernetes.io/audit": "baseline"}))
    out = apply(admin, pod("audited", "ps-audit", hostNetwork=True))
    assert out.returncode == 0, out.stderr
    assert "Warning" not in out.stderr
    lines = [json.loads(line) for line in
             (cluster.root / "logs" / "apiserver.log").read_text().splitlines()
             if "pod security audit" in line]
    assert any(line.get("value") == 'would violate PodSecurity "baseline:latest": host '
               "namespaces (hostNetwork=true)" and line.get("object_name") == "audited"
               for line in lines), lines
