"""SPEC AU6 against a real apiserver and etcd over TLS: a user who may write Roles and
RoleBindings in one namespace does not become cluster admin through them.
bob (token `token-bob`, groups developers and system:authenticated) binds himself to
cluster-admin and writes a Role granting everything over HTTPS (POST, PUT, PATCH,
server-side apply), gRPC and the real kubectl, and is refused with Kubernetes' message,
unless he holds what he grants or has the `bind` / `escalate` verbs."""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.auth.conftest import SecureCluster

pytestmark = pytest.mark.integration

RBAC = "rbac.authorization.k8s.io"
BOB_TOKEN = "token-bob"
NOT_HELD = ('user "bob" (groups=["developers" "system:authenticated"]) is attempting to '
            "grant RBAC permissions not currently held:\n")
EVERYTHING = '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}'
EVERY_URL = '{NonResourceURLs:["*"], Verbs:["*"]}'
# what `admin` grants on Roles and RoleBindings: not `*`, which includes escalate and bind
WRITE = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]


def _rule(verbs: list[str], resources: list[str], groups: list[str] | None = None,
          names: list[str] | None = None) -> Obj:
    rule: Obj = {"apiGroups": groups if groups is not None else [""],
                 "resources": resources, "verbs": verbs}
    if names:
        rule["resourceNames"] = names
    return rule


def _role(name: str, namespace: str, rules: list[Obj]) -> Obj:
    return {"apiVersion": f"{RBAC}/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": namespace}, "rules": rules}


def _binding(name: str, namespace: str, kind: str, role: str, user: str = "bob") -> Obj:
    return {"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": RBAC, "kind": kind, "name": role},
            "subjects": [{"apiGroup": RBAC, "kind": "User", "name": user}]}


async def _tenant(admin: ApiClient, *extra_rules: Obj) -> str:
    """A namespace where bob may do anything to Roles and RoleBindings, and nothing else
    (plus `extra_rules`)."""
    namespace = f"au6-{uuid.uuid4().hex[:8]}"
    await admin.create({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": namespace}})
    await admin.create(_role("rbac-writer", namespace, [
        _rule(WRITE, ["roles", "rolebindings"], [RBAC]), *extra_rules]))
    await admin.create(_binding("bob-rbac-writer", namespace, "Role", "rbac-writer"))
    return namespace


@pytest.fixture
async def bob(secure_cluster: SecureCluster) -> AsyncIterator[ApiClient]:
    async with secure_cluster.client(token=BOB_TOKEN) as client:
        yield client


def _https(cluster: SecureCluster, method: str, path: str, body: Obj | str | None = None,
           content_type: str = "application/json") -> tuple[int, Obj]:
    data = None if body is None else (body if isinstance(body, str)
                                      else json.dumps(body)).encode()
    request = urllib.request.Request(
        f"{cluster.https}{path}", method=method, data=data,
        headers={"Content-Type": content_type, "Authorization": f"Bearer {BOB_TOKEN}"})
    context = ssl.create_default_context(cafile=str(cluster.pki.ca))
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as resp:
            return int(resp.status), json.loads(resp.read())
    except urllib.error.HTTPError as err:
        with err:
            return int(err.code), json.loads(err.read())


async def _as_bob(cluster: SecureCluster, method: str, path: str, body: Obj | str | None = None,
                  content_type: str = "application/json") -> tuple[int, Obj]:
    return await asyncio.to_thread(_https, cluster, method, path, body, content_type)


def _refused(answer: tuple[int, Obj], message: str) -> None:
    code, status = answer
    assert (code, status.get("reason"), status.get("message")) == (403, "Forbidden", message)


async def test_au6_rbac_writer_cannot_bind_himself_to_cluster_admin(
        secure_cluster: SecureCluster, admin: ApiClient, bob: ApiClient) -> None:
    ns = await _tenant(admin)
    refusal = (f'rolebindings.{RBAC} "bob-admin" is forbidden: {NOT_HELD}{EVERYTHING}\n'
               f"{EVERY_URL}")
    binding = _binding("bob-admin", ns, "ClusterRole", "cluster-admin")
    _refused(await _as_bob(secure_cluster, "POST",
                           f"/apis/{RBAC}/v1/namespaces/{ns}/rolebindings", binding), refusal)
    with pytest.raises(ApiError) as err:
        await bob.create(binding)
    assert (err.value.reason, err.value.message) == (Reason.FORBIDDEN, refusal)
    # the same through server-side apply (a create by PATCH)
    _refused(await _as_bob(
        secure_cluster, "PATCH",
        f"/apis/{RBAC}/v1/namespaces/{ns}/rolebindings/bob-admin?fieldManager=bob",
        binding, "application/apply-patch+yaml"), refusal)
    # nor cluster-wide, where bob holds nothing
    code, status = await _as_bob(secure_cluster, "POST", f"/apis/{RBAC}/v1/clusterrolebindings",
                                 {**binding, "kind": "ClusterRoleBinding",
                                  "metadata": {"name": f"bob-{ns}"}})
    assert code == 403 and status["message"].startswith(
        f'clusterrolebindings.{RBAC} is forbidden: User "bob" cannot create')
    with pytest.raises(ApiError) as missing:
        await admin.get("rolebindings", "bob-admin", ns)
    assert missing.value.reason == Reason.NOT_FOUND
    # a binding to a role bob holds is his to give
    code, _ = await _as_bob(secure_cluster, "POST",
                            f"/apis/{RBAC}/v1/namespaces/{ns}/rolebindings",
                            _binding("carol-rbac", ns, "Role", "rbac-writer", user="carol"))
    assert code == 201


async def test_au6_rbac_writer_cannot_write_a_role_granting_what_he_lacks(
        secure_cluster: SecureCluster, admin: ApiClient, bob: ApiClient) -> None:
    ns = await _tenant(admin)
    roles = f"/apis/{RBAC}/v1/namespaces/{ns}/roles"
    everything = _role("everything", ns, [_rule(["*"], ["*"], ["*"])])
    _refused(await _as_bob(secure_cluster, "POST", roles, everything),
             f'roles.{RBAC} "everything" is forbidden: {NOT_HELD}{EVERYTHING}')
    with pytest.raises(ApiError) as err:
        await bob.create(everything)
    assert err.value.reason == Reason.FORBIDDEN
    _refused(await _as_bob(secure_cluster, "POST", roles,
                           _role("pod-reader", ns, [_rule(["get"], ["pods"])])),
             f'roles.{RBAC} "pod-reader" is forbidden: {NOT_HELD}'
             '{APIGroups:[""], Resources:["pods"], Verbs:["get"]}')
    # what bob holds he may grant: created, then every route of update is checked
    code, created = await _as_bob(secure_cluster, "POST", roles,
                                  _role("readers", ns, [_rule(["get", "list"], ["roles"],
                                                              [RBAC])]))
    assert code == 201, created
    escalated = {**created, "rules": [*created["rules"], _rule(["get"], ["secrets"])]}
    refusal = (f'roles.{RBAC} "readers" is forbidden: {NOT_HELD}'
               '{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}')
    _refused(await _as_bob(secure_cluster, "PUT", f"{roles}/readers", escalated), refusal)
    _refused(await _as_bob(secure_cluster, "PATCH", f"{roles}/readers",
                           {"rules": escalated["rules"]}, "application/merge-patch+json"),
             refusal)
    _refused(await _as_bob(secure_cluster, "PATCH", f"{roles}/readers?fieldManager=bob&force=true",
                           _role("readers", ns, escalated["rules"]),
                           "application/apply-patch+yaml"), refusal)
    with pytest.raises(ApiError) as err:
        await bob.update(escalated)
    assert (err.value.reason, err.value.message) == (Reason.FORBIDDEN, refusal)
    assert (await admin.get("roles", "readers", ns))["rules"] == created["rules"]
    # labels are bob's to change on a role he could write
    code, _ = await _as_bob(secure_cluster, "PATCH", f"{roles}/readers",
                            {"metadata": {"labels": {"team": "a"}}},
                            "application/merge-patch+json")
    assert code == 200


async def test_au6_bind_and_escalate_verbs_allow_what_is_not_held(
        secure_cluster: SecureCluster, admin: ApiClient, bob: ApiClient) -> None:
    ns = await _tenant(admin, _rule(["bind"], ["clusterroles"], [RBAC], ["cluster-admin"]),
                       _rule(["escalate"], ["roles"], [RBAC]))
    # `bind` names cluster-admin only: binding `edit` still needs its permissions
    with pytest.raises(ApiError) as err:
        await bob.create(_binding("bob-edit", ns, "ClusterRole", "edit"))
    assert err.value.reason == Reason.FORBIDDEN
    bound = await bob.create(_binding("bob-admin", ns, "ClusterRole", "cluster-admin"))
    assert bound["roleRef"]["name"] == "cluster-admin"
    # (bob now is cluster-admin in `ns` through the binding, so a second namespace)
    other = await _tenant(admin, _rule(["escalate"], ["roles"], [RBAC]))
    created = await bob.create(_role("everything", other, [_rule(["*"], ["*"], ["*"])]))
    assert created["rules"] == [_rule(["*"], ["*"], ["*"])]


async def test_au6_escalate_with_resource_names_allows_updates_of_that_role_only(
        secure_cluster: SecureCluster, admin: ApiClient, bob: ApiClient) -> None:
    """Kubernetes asks for `escalate` with the request's name, which a create has not."""
    ns = await _tenant(admin, _rule(["escalate"], ["roles"], [RBAC], ["open"]))
    with pytest.raises(ApiError) as err:
        await bob.create(_role("open", ns, [_rule(["*"], ["*"], ["*"])]))
    assert err.value.reason == Reason.FORBIDDEN
    # a server-side apply that creates names the role on its URL: allowed
    code, created = await _as_bob(
        secure_cluster, "PATCH", f"/apis/{RBAC}/v1/namespaces/{ns}/roles/open?fieldManager=bob",
        _role("open", ns, [_rule(["list"], ["secrets"])]), "application/apply-patch+yaml")
    assert code == 201, created
    await admin.create(_role("closed", ns, []))
    opened = await bob.update({**await bob.get("roles", "open", ns),
                               "rules": [_rule(["get"], ["secrets"])]})
    assert opened["rules"] == [_rule(["get"], ["secrets"])]
    with pytest.raises(ApiError) as err:
        await bob.update({**await bob.get("roles", "closed", ns),
                          "rules": [_rule(["get"], ["secrets"])]})
    assert err.value.reason == Reason.FORBIDDEN


def _kubeconfig(cluster: SecureCluster, path: Path) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "bob",
        "clusters": [{"name": "skiff", "cluster": {
            "server": cluster.https, "certificate-authority": str(cluster.pki.ca)}}],
        "users": [{"name": "bob", "user": {"token": BOB_TOKEN}}],
        "contexts": [{"name": "bob", "context": {"cluster": "skiff", "user": "bob"}}]}))
    return path


async def test_au6_kubectl_shows_kubernetes_refusal(
        secure_cluster: SecureCluster, admin: ApiClient, tmp_path: Path) -> None:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is not installed: .ci/run installs Debian's kubernetes-client"
    ns = await _tenant(admin)
    config = _kubeconfig(secure_cluster, tmp_path / "bob.kubeconfig")

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([kubectl, "--kubeconfig", str(config), "-n", ns, *args],
                              input=stdin, capture_output=True, text=True, timeout=60)

    bind = await asyncio.to_thread(run, "create", "rolebinding", "bob-admin",
                                   "--clusterrole=cluster-admin", "--user=bob")
    assert bind.returncode == 1
    assert (f'rolebindings.{RBAC} "bob-admin" is forbidden: {NOT_HELD}{EVERYTHING}\n'
            f"{EVERY_URL}\n") in bind.stderr, bind.stderr
    applied = await asyncio.to_thread(run, "apply", "-f", "-", stdin=json.dumps(
        _role("everything", ns, [_rule(["*"], ["*"], ["*"])])))
    assert applied.returncode == 1
    assert (f'roles.{RBAC} "everything" is forbidden: {NOT_HELD}{EVERYTHING}\n'
            in applied.stderr), applied.stderr
    held = await asyncio.to_thread(run, "create", "role", "role-reader", "--verb=get",
                                   f"--resource=roles.{RBAC}")
    assert held.returncode == 0, held.stderr
    assert "role.rbac.authorization.k8s.io/role-reader created" in held.stdout
