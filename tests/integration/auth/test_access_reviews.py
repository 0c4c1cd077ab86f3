"""The read-only kinds clients discover.

On the real secure apiserver, with the official Python client and the real kubectl:
TokenReview is answered by the apiserver's own authenticator (static tokens, ServiceAccount
tokens with their audiences, garbage), SubjectAccessReview and LocalSubjectAccessReview by
its own authorizer (RBAC reasons, non-resource URLs, the namespace rule), creating either is
authorized by RBAC (the bootstrap ClusterRole `system:auth-delegator`), and
CSIStorageCapacity is served, empty, in discovery."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from skiff.pki import CertPair
from tests.integration.auth.conftest import SecureCluster
from tests.integration.officialclient import meta, name_of, present

pytestmark = pytest.mark.integration

ISSUER = "https://kubernetes.default.svc.cluster.local"  # the apiserver's default
RBAC_GROUP = "rbac.authorization.k8s.io"


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _api(cluster: SecureCluster, pair: CertPair | None = None, *,
         token: str = "") -> client.ApiClient:
    cfg = client.Configuration()
    cfg.host = cluster.https
    cfg.ssl_ca_cert = str(cluster.pki.ca)
    if pair is not None:
        cfg.cert_file, cfg.key_file = str(pair.cert), str(pair.key)
    if token:
        cfg.api_key = {"authorization": f"Bearer {token}"}
    return client.ApiClient(cfg)


@pytest.fixture
def admin_api(secure_cluster: SecureCluster) -> Iterator[client.ApiClient]:
    with _api(secure_cluster, secure_cluster.pki.admin) as api:
        yield api


def _namespace(api: client.ApiClient) -> str:
    name = _name("d11")
    client.CoreV1Api(api).create_namespace(client.V1Namespace(
        metadata=client.V1ObjectMeta(name=name)))
    return name


def _message(err: ApiException) -> str:
    """The message of the Status an error answer carries."""
    return str(json.loads(present(err.body))["message"])


def _token_review(api: client.ApiClient, token: str,
                  audiences: list[str] | None = None) -> client.V1TokenReviewStatus:
    answer = client.AuthenticationV1Api(api).create_token_review(client.V1TokenReview(
        spec=client.V1TokenReviewSpec(token=token, audiences=audiences)))
    assert answer.kind == "TokenReview"
    status: client.V1TokenReviewStatus = present(answer.status)
    return status


def _service_account_token(api: client.ApiClient, namespace: str, name: str,
                           audiences: list[str]) -> tuple[str, str]:
    core = client.CoreV1Api(api)
    sa = core.create_namespaced_service_account(namespace, client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name=name)))
    answer = core.create_namespaced_service_account_token(
        name, namespace, client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=audiences, expiration_seconds=600)))
    return present(present(answer.status).token), present(meta(sa).uid)


def test_defect11_token_review_of_a_static_token_names_its_user(
        admin_api: client.ApiClient) -> None:
    status = _token_review(admin_api, "token-bob")
    assert status.authenticated is True
    user = present(status.user)
    assert user.username == "bob"
    assert user.uid == "1001"
    assert user.groups == ["developers", "system:authenticated"]
    assert status.audiences == [ISSUER]  # no audiences asked: the API's
    assert status.error is None
    # a static token is valid for the API's audiences only
    other = _token_review(admin_api, "token-bob", ["vault"])
    assert other.authenticated is False
    assert other.error == "invalid bearer token"


def test_defect11_token_review_of_a_service_account_token_with_its_audiences(
        admin_api: client.ApiClient) -> None:
    ns = _namespace(admin_api)
    token, uid = _service_account_token(admin_api, ns, "robot", [ISSUER])
    status = _token_review(admin_api, token)
    assert status.authenticated is True
    user = present(status.user)
    assert user.username == f"system:serviceaccount:{ns}:robot"
    assert user.uid == uid
    assert user.groups == ["system:serviceaccounts", f"system:serviceaccounts:{ns}",
                           "system:authenticated"]
    assert present(user.extra)["authentication.kubernetes.io/credential-id"][0].startswith(
        "JTI=")
    assert status.audiences == [ISSUER]

    vault, _ = _service_account_token(admin_api, ns, "vault-client", ["vault", "other"])
    answer = _token_review(admin_api, vault, ["vault"])
    assert (answer.authenticated, answer.audiences) == (True, ["vault"])
    assert present(answer.user).username == f"system:serviceaccount:{ns}:vault-client"
    refused = _token_review(admin_api, vault)  # not meant for the apiserver
    assert refused.authenticated is False
    assert refused.error == (f'token audiences ["vault" "other"] is invalid for the target '
                             f'audiences ["{ISSUER}"]')

    # the token dies with its ServiceAccount, in a review as on a request
    client.CoreV1Api(admin_api).delete_namespaced_service_account("robot", ns)
    gone = _token_review(admin_api, token)
    assert (gone.authenticated, gone.error) == (False, "invalid bearer token")


def test_defect11_token_review_of_a_garbage_token_is_not_authenticated(
        admin_api: client.ApiClient) -> None:
    for token in ("not-a-token", "eyJhbGciOiJSUzI1NiJ9.e30.c2lnbmF0dXJl"):
        status = _token_review(admin_api, token)
        assert status.authenticated is False
        assert status.error == "invalid bearer token"
        assert not status.user or not status.user.username
    with pytest.raises(ApiException) as empty:
        _token_review(admin_api, "")
    assert empty.value.status == 400
    assert _message(empty.value) == "token is required for TokenReview in authentication"


def _access_review(api: client.ApiClient, *, user: str, groups: list[str] | None = None,
                   resource: client.V1ResourceAttributes | None = None,
                   non_resource: client.V1NonResourceAttributes | None = None
                   ) -> client.V1SubjectAccessReviewStatus:
    answer = client.AuthorizationV1Api(api).create_subject_access_review(
        client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
            user=user, groups=groups, resource_attributes=resource,
            non_resource_attributes=non_resource)))
    assert answer.kind == "SubjectAccessReview"
    status: client.V1SubjectAccessReviewStatus = present(answer.status)
    return status


def test_defect11_subject_access_review_answers_for_another_user(
        admin_api: client.ApiClient) -> None:
    ns = _namespace(admin_api)
    carol = _name("carol")
    client.RbacAuthorizationV1Api(admin_api).create_namespaced_role_binding(
        ns, client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="carol-edits"),
            role_ref=client.V1RoleRef(api_group=RBAC_GROUP, kind="ClusterRole", name="edit"),
            subjects=[client.RbacV1Subject(kind="User", name=carol, api_group=RBAC_GROUP)]))
    create_pods = client.V1ResourceAttributes(namespace=ns, verb="create", resource="pods")
    allowed = _access_review(admin_api, user=carol, resource=create_pods)
    assert allowed.allowed is True
    assert allowed.reason == (f'RBAC: allowed by RoleBinding "carol-edits/{ns}" of '
                              f'ClusterRole "edit" to User "{carol}"')
    # elsewhere, and for someone unbound, nothing allows it
    denied = _access_review(admin_api, user=carol, resource=client.V1ResourceAttributes(
        namespace="default", verb="create", resource="pods"))
    assert denied.allowed is False
    assert not denied.denied
    assert _access_review(admin_api, user=_name("dave"),
                          resource=create_pods).allowed is False
    # non-resource URLs, through a group binding
    healthz = _access_review(admin_api, user="dave", groups=["system:authenticated"],
                             non_resource=client.V1NonResourceAttributes(
                                 path="/healthz", verb="get"))
    assert healthz.allowed is True
    assert present(healthz.reason).startswith('RBAC: allowed by ClusterRoleBinding "system:')
    assert present(healthz.reason).endswith('to Group "system:authenticated"')
    metrics = _access_review(admin_api, user="dave", groups=["system:authenticated"],
                             non_resource=client.V1NonResourceAttributes(
                                 path="/metrics", verb="get"))
    assert metrics.allowed is False
    # Kubernetes' validation: someone to ask about
    with pytest.raises(ApiException) as nobody:
        _access_review(admin_api, user="", resource=create_pods)
    assert nobody.value.status == 422
    assert _message(nobody.value) == (
        'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.user: Invalid value: '
        '"": at least one of user or group must be specified')


def test_defect11_local_subject_access_review_must_stay_in_its_namespace(
        admin_api: client.ApiClient) -> None:
    ns = _namespace(admin_api)
    authz = client.AuthorizationV1Api(admin_api)

    def local(*, meta_namespace: str | None, spec_namespace: str
              ) -> client.V1LocalSubjectAccessReview:
        return authz.create_namespaced_local_subject_access_review(
            ns, client.V1LocalSubjectAccessReview(
                metadata=client.V1ObjectMeta(namespace=meta_namespace),
                spec=client.V1SubjectAccessReviewSpec(
                    user="system:admin", groups=["system:masters"],
                    resource_attributes=client.V1ResourceAttributes(
                        namespace=spec_namespace, verb="get", resource="pods"))))

    answer = local(meta_namespace=None, spec_namespace=ns)
    assert answer.kind == "LocalSubjectAccessReview"
    assert meta(answer).namespace == ns
    assert present(answer.status).allowed is True
    with pytest.raises(ApiException) as other_object:
        local(meta_namespace="default", spec_namespace="default")
    assert other_object.value.status == 400
    assert _message(other_object.value) == (
        "the namespace of the provided object does not match the namespace sent on the "
        "request")
    with pytest.raises(ApiException) as other_spec:
        local(meta_namespace=None, spec_namespace="default")
    assert other_spec.value.status == 422
    assert _message(other_spec.value) == (
        'LocalSubjectAccessReview.authorization.k8s.io "" is invalid: '
        'spec.resourceAttributes.namespace: Invalid value: "default": must match '
        "metadata.namespace")


def test_defect11_only_an_auth_delegator_may_create_reviews(
        secure_cluster: SecureCluster, admin_api: client.ApiClient) -> None:
    role = client.RbacAuthorizationV1Api(admin_api).read_cluster_role("system:auth-delegator")
    assert [(r.api_groups, r.resources, r.verbs) for r in present(role.rules)] == [
        (["authentication.k8s.io"], ["tokenreviews"], ["create"]),
        (["authorization.k8s.io"], ["subjectaccessreviews"], ["create"])]
    delegate, stranger = _name("proxy"), _name("stranger")
    client.RbacAuthorizationV1Api(admin_api).create_cluster_role_binding(
        client.V1ClusterRoleBinding(
            metadata=client.V1ObjectMeta(name=delegate),
            role_ref=client.V1RoleRef(api_group=RBAC_GROUP, kind="ClusterRole",
                                      name="system:auth-delegator"),
            subjects=[client.RbacV1Subject(kind="User", name=delegate,
                                           api_group=RBAC_GROUP)]))
    ask = client.V1ResourceAttributes(namespace="default", verb="list", resource="pods")
    with _api(secure_cluster, secure_cluster.user(delegate)) as api:
        assert present(_token_review(api, "token-bob").user).username == "bob"
        assert _access_review(api, user="bob", resource=ask).allowed is False
    with _api(secure_cluster, secure_cluster.user(stranger)) as api:
        for call, resource, group in (
                (lambda: _token_review(api, "token-bob"), "tokenreviews",
                 "authentication.k8s.io"),
                (lambda: _access_review(api, user="bob", resource=ask),
                 "subjectaccessreviews", "authorization.k8s.io")):
            with pytest.raises(ApiException) as refused:
                call()
            assert refused.value.status == 403
            assert _message(refused.value) == (
                f'{resource}.{group} is forbidden: User "{stranger}" cannot create resource '
                f'"{resource}" in API group "{group}" at the cluster scope')


def _kubeconfig(cluster: SecureCluster) -> Path:
    path = cluster.root / "kubeconfig-defect11"
    pki = cluster.pki
    path.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: skiff
  cluster: {{server: "{cluster.https}", certificate-authority: "{pki.ca}"}}
users:
- name: admin
  user: {{client-certificate: "{pki.admin.cert}", client-key: "{pki.admin.key}"}}
contexts:
- name: skiff
  context: {{cluster: skiff, user: admin}}
current-context: skiff
""")
    return path


def test_defect11_csi_storage_capacity_is_served_empty_and_discovered(
        secure_cluster: SecureCluster, admin_api: client.ApiClient) -> None:
    assert shutil.which("kubectl"), "kubectl is not installed"
    storage = client.StorageV1Api(admin_api)
    ns = _namespace(admin_api)
    assert storage.list_namespaced_csi_storage_capacity(ns).items == []
    made = storage.create_namespaced_csi_storage_capacity(ns, client.V1CSIStorageCapacity(
        metadata=client.V1ObjectMeta(name="segment-a"), storage_class_name="standard",
        capacity="10Gi", node_topology=client.V1LabelSelector(
            match_labels={"topology.kubernetes.io/zone": "a"})))
    assert (made.storage_class_name, made.capacity) == ("standard", "10Gi")
    listed = storage.list_namespaced_csi_storage_capacity(ns).items
    assert [name_of(c) for c in listed] == ["segment-a"]
    with pytest.raises(ApiException) as invalid:
        storage.create_namespaced_csi_storage_capacity(ns, client.V1CSIStorageCapacity(
            metadata=client.V1ObjectMeta(name="no-class"), storage_class_name=""))
    assert invalid.value.status == 422
    assert _message(invalid.value).startswith(
        'CSIStorageCapacity.storage.k8s.io "no-class" is invalid: storageClassName: Invalid '
        'value: "": a lowercase RFC 1123 subdomain')
    with pytest.raises(ApiException) as immutable:
        storage.patch_namespaced_csi_storage_capacity(
            "segment-a", ns, {"storageClassName": "other"})
    assert immutable.value.status == 422
    assert _message(immutable.value) == (
        'CSIStorageCapacity.storage.k8s.io "segment-a" is invalid: storageClassName: '
        'Invalid value: "other": field is immutable')
    storage.delete_namespaced_csi_storage_capacity("segment-a", ns)
    assert storage.list_namespaced_csi_storage_capacity(ns).items == []

    config = _kubeconfig(secure_cluster)
    listing = subprocess.run(["kubectl", "--kubeconfig", str(config), "api-resources",
                              "--no-headers"], capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0, listing.stderr
    rows = {line.split()[0]: line.split()[1:] for line in listing.stdout.splitlines()}
    assert rows["csistoragecapacities"] == ["storage.k8s.io/v1", "true",
                                            "CSIStorageCapacity"]
    assert rows["tokenreviews"] == ["authentication.k8s.io/v1", "false", "TokenReview"]
    assert rows["subjectaccessreviews"] == ["authorization.k8s.io/v1", "false",
                                            "SubjectAccessReview"]
    assert rows["localsubjectaccessreviews"] == ["authorization.k8s.io/v1", "true",
                                                 "LocalSubjectAccessReview"]
    listed_reviews = subprocess.run(["kubectl", "--kubeconfig", str(config), "get",
                                     "tokenreviews"], capture_output=True, text=True,
                                    timeout=60)
    assert listed_reviews.returncode != 0  # create-only, as on Kubernetes
    assert ("(MethodNotAllowed): the server does not allow this method on the requested "
            "resource") in listed_reviews.stderr
    empty = subprocess.run(["kubectl", "--kubeconfig", str(config), "get",
                            "csistoragecapacities", "-A"], capture_output=True, text=True,
                           timeout=60)
    assert empty.returncode == 0, empty.stderr
    assert "No resources found" in empty.stderr
