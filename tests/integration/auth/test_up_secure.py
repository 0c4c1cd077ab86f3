"""`skiff up` is secure by default (SPEC AU1-AU4), as a user meets it: a PKI in the data
dir with files 0600, a kubeconfig carrying the CA and the admin certificate that the real
kubectl uses over HTTPS, each component with its own identity, and `--insecure` only when
asked for, with a warning."""

from __future__ import annotations

import json
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from skiff.cluster.state import ClusterState
from tests.integration.skiffcli import skiff
from tests.integration.waiting import until


def kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), *args], text=True,
                          capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def secure_up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    data_dir = tmp_path_factory.mktemp("secure-up")
    up = skiff(data_dir, "up", "--detach", "--nodes", "1")
    try:
        assert up.returncode == 0, up.stderr
        assert "--insecure" not in up.stdout + up.stderr
        assert str(data_dir / "pki") in up.stdout  # says where the credentials are
        yield data_dir
    finally:
        skiff(data_dir, "down")


def test_AU1_up_writes_pki_0600_and_a_tls_kubeconfig(secure_up: Path) -> None:
    files = [p for p in (secure_up / "pki").rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"ca.crt", "ca.key", "admin.crt", "admin.key",
                                       "kubelet-node-1.crt", "scheduler.crt",
                                       "controller-manager.crt", "fence-agent.crt"}
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)
    config = json.loads((secure_up / "kubeconfig").read_text())
    cluster = config["clusters"][0]["cluster"]
    assert cluster["server"].startswith("https://")
    assert Path(cluster["certificate-authority"]) == secure_up / "pki" / "ca.crt"
    assert Path(config["users"][0]["user"]["client-certificate"]) == \
        secure_up / "pki" / "admin.crt"


def test_AU1_kubectl_works_with_the_kubeconfig_and_not_with_bad_credentials(
        secure_up: Path, tmp_path: Path) -> None:
    kubeconfig = secure_up / "kubeconfig"
    nodes = kubectl(kubeconfig, "get", "nodes", "-o", "name")
    assert nodes.returncode == 0, nodes.stderr
    # node-1's kubelet, and the control plane's Node (cli/controlplane: kind's control-plane Node)
    assert nodes.stdout.split() == ["node/node-1", "node/skiff-control-plane"]
    anonymous = json.loads(kubeconfig.read_text())
    anonymous["users"][0]["user"] = {"token": "not-a-token"}
    (tmp_path / "anon").write_text(json.dumps(anonymous))
    denied = kubectl(tmp_path / "anon", "run", "x", "--image=busybox", "--", "true")
    assert denied.returncode != 0
    assert "Unauthorized" in denied.stderr
    assert "x" not in kubectl(kubeconfig, "get", "pods", "-o", "name").stdout.split("/")


def test_AU2_components_run_with_their_own_identities_and_etcd_only_trusts_apiservers(
        secure_up: Path) -> None:
    state = ClusterState.load(secure_up)
    assert state is not None
    by_name = {c.name: c for c in state.components}
    assert by_name["kubelet-node-1"].env["SKIFF_CLIENT_CERT_FILE"].endswith(
        "kubelet-node-1.crt")
    assert by_name["scheduler"].env["SKIFF_CLIENT_CERT_FILE"].endswith("scheduler.crt")
    assert "--client-cert-auth" in by_name["etcd"].argv
    assert by_name["etcd"].address.startswith("https://")
    # Every component works under its identity: the node registered and is Ready.
    ready = kubectl(secure_up / "kubeconfig", "get", "node", "node-1", "-o",
                    "jsonpath={.status.conditions[?(@.type=='Ready')].status}")
    assert ready.stdout == "True", ready.stderr


def test_AU1_insecure_only_by_flag_and_warned(tmp_path: Path) -> None:
    up = skiff(tmp_path, "up", "--detach", "--nodes", "0", "--insecure")
    try:
        assert up.returncode == 0, up.stderr
        assert "WARNING: --insecure" in up.stdout + up.stderr
        config = json.loads((tmp_path / "kubeconfig").read_text())
        assert config["clusters"][0]["cluster"]["server"].startswith("http://")
        assert skiff(tmp_path, "get", "nodes").returncode == 0
    finally:
        skiff(tmp_path, "down")


def test_AU3_kubectl_manages_rbac_objects(secure_up: Path) -> None:
    kubeconfig = secure_up / "kubeconfig"
    role = kubectl(kubeconfig, "create", "role", "pod-reader", "--verb=get,list",
                   "--resource=pods", "-n", "default")
    assert role.returncode == 0, role.stderr
    binding = kubectl(kubeconfig, "create", "rolebinding", "read-pods", "--role=pod-reader",
                      "--user=carol", "-n", "default")
    assert binding.returncode == 0, binding.stderr
    got = kubectl(kubeconfig, "get", "rolebinding", "read-pods", "-n", "default", "-o",
                  "jsonpath={.roleRef.name}/{.subjects[0].name}")
    assert got.stdout == "pod-reader/carol", got.stderr
    bootstrap = kubectl(kubeconfig, "get", "clusterrolebinding", "system:kube-scheduler",
                        "-o", "jsonpath={.subjects[0].name}")
    assert bootstrap.stdout == "system:kube-scheduler", bootstrap.stderr


def test_AX3_every_namespace_gets_the_cluster_ca_as_kube_root_ca_crt(secure_up: Path) -> None:
    """The root-ca-cert-publisher: kube-root-ca.crt in each namespace, new ones too, carrying
    the cluster CA that the kube-api-access volume of every pod names; a deleted one comes
    back."""
    config = secure_up / "kubeconfig"
    ca = (secure_up / "pki" / "ca.crt").read_text()
    assert kubectl(config, "create", "namespace", "root-ca").returncode == 0

    def published(namespace: str) -> str:
        got = kubectl(config, "get", "configmap", "kube-root-ca.crt", "-n", namespace,
                      "-o", "jsonpath={.data.ca\\.crt}")
        return got.stdout if got.returncode == 0 else ""

    until(lambda: all(published(ns) == ca for ns in ("default", "kube-system", "root-ca")),
          "kube-root-ca.crt in default, kube-system and a new namespace", timeout=30)
    assert kubectl(config, "delete", "configmap", "kube-root-ca.crt", "-n",
                   "root-ca").returncode == 0
    until(lambda: published("root-ca") == ca, "kube-root-ca.crt published again", timeout=30)


def test_AU3_kubectl_as_impersonates_and_is_itself_authorized(secure_up: Path,
                                                              tmp_path: Path) -> None:
    """`kubectl --as` (Impersonate-* headers): the request runs as the impersonated user,
    so RBAC answers for them; impersonating needs the `impersonate` verb (it was ignored,
    and every `can-i --as` said yes)."""
    kubeconfig = secure_up / "kubeconfig"
    can = kubectl(kubeconfig, "auth", "can-i", "delete", "pods", "--as=jane")
    assert (can.returncode, can.stdout.strip()) == (1, "no"), can.stderr
    who = json.loads(kubectl(kubeconfig, "auth", "whoami", "--as=jane", "-o", "json").stdout)
    assert who["status"]["userInfo"] == {"username": "jane",
                                         "groups": ["system:authenticated"]}
    denied = kubectl(kubeconfig, "get", "pods", "--as=jane")
    assert denied.returncode == 1
    assert ('pods is forbidden: User "jane" cannot list resource "pods" in API group "" in '
            'the namespace "default"') in denied.stderr
    sa = kubectl(kubeconfig, "auth", "can-i", "list", "pods",
                 "--as=system:serviceaccount:default:default")
    assert sa.stdout.strip() == "no"
    sa_who = json.loads(kubectl(kubeconfig, "auth", "whoami", "-o", "json",
                                "--as=system:serviceaccount:default:default").stdout)
    assert sa_who["status"]["userInfo"]["groups"] == [
        "system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"]
    admin = kubectl(kubeconfig, "auth", "can-i", "delete", "pods", "--as=jane",
                    "--as-group=system:masters")
    assert admin.stdout.strip() == "yes"
    # a caller without the impersonate verb (a ServiceAccount's token) is refused
    until(lambda: kubectl(kubeconfig, "get", "serviceaccount", "default").returncode == 0,
          "the default ServiceAccount", 30.0)
    token = kubectl(kubeconfig, "create", "token", "default")
    assert token.returncode == 0, token.stderr
    as_sa = json.loads(kubeconfig.read_text())
    as_sa["users"][0]["user"] = {"token": token.stdout.strip()}
    (tmp_path / "sa").write_text(json.dumps(as_sa))
    refused = kubectl(tmp_path / "sa", "--as=jane", "get", "pods")
    assert ('users "jane" is forbidden: User "system:serviceaccount:default:default" cannot '
            'impersonate resource "users" in API group "" at the cluster scope'
            ) in refused.stderr
    # the exec stream (its own route) impersonates too
    kubectl(kubeconfig, "run", "imp", "--image=busybox", "--", "sleep", "300")
    until(lambda: kubectl(kubeconfig, "get", "pod", "imp", "-o",
                          "jsonpath={.status.phase}").stdout == "Running", "pod imp", 60.0)
    assert kubectl(kubeconfig, "exec", "imp", "--", "true").returncode == 0
    kubectl(kubeconfig, "create", "rolebinding", "jane-views", "--clusterrole=view",
            "--user=jane")
    until(lambda: kubectl(kubeconfig, "get", "pod", "imp", "--as=jane").returncode == 0,
          "jane may read pods", 30.0)
    exec_denied = kubectl(kubeconfig, "exec", "imp", "--as=jane", "--", "true")
    assert ('Error from server (Forbidden): pods "imp" is forbidden: User "jane" cannot create '
            'resource "pods/exec" in API group "" in the namespace "default"'
            ) in exec_denied.stderr, exec_denied.stderr
    kubectl(kubeconfig, "delete", "pod", "imp", "--grace-period=0", "--force")


def test_AX5_kubectl_auth_can_i_list_shows_the_users_rbac_rules(secure_up: Path) -> None:
    """`kubectl auth can-i --list` lists what RBAC grants the user in the namespace (it
    listed nothing and called the list incomplete)."""
    kubeconfig = secure_up / "kubeconfig"
    assert kubectl(kubeconfig, "create", "namespace", "lister").returncode == 0
    assert kubectl(kubeconfig, "create", "rolebinding", "lister-edit", "--clusterrole=edit",
                   "--user=lister", "-n", "lister").returncode == 0

    def listed() -> str:
        got = kubectl(kubeconfig, "auth", "can-i", "--list", "-n", "lister", "--as=lister")
        return got.stdout if got.returncode == 0 and "secrets" in got.stdout else ""

    until(lambda: bool(listed()), "edit's rules in can-i --list", 30.0)
    lines = listed().splitlines()[1:]
    # Resources, Non-Resource URLs, Resource Names, Verbs: resource -> its verbs
    verbs = {line.split()[0]: line[line.rindex("["):] for line in lines
             if not line.startswith(" ")}
    assert verbs["selfsubjectaccessreviews.authorization.k8s.io"] == "[create]"
    assert verbs["deployments.apps"] == (
        "[create update patch delete deletecollection get list watch]")
    assert "create" in verbs["secrets"] and "get" in verbs["secrets"]
    assert "rolebindings.rbac.authorization.k8s.io" not in verbs  # admin's, not edit's
    assert any(line.split()[:2] == ["[/api]", "[]"] for line in lines
               if line.startswith(" "))  # system:discovery's non-resource URL
    elsewhere = kubectl(kubeconfig, "auth", "can-i", "--list", "-n", "default",
                        "--as=lister")
    assert "secrets" not in elsewhere.stdout  # the binding is the namespace's only
    node = kubectl(kubeconfig, "auth", "can-i", "--list", "--as=system:node:node-1",
                   "--as-group=system:nodes")
    assert "node authorizer does not support user rule resolution" in node.stderr + \
        node.stdout
