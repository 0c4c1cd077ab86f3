"""Authentication, authorization and NodeRestriction for both fronts (SPEC AU1-AU3).

The gRPC and HTTPS fronts authenticate each request (`Authenticator`: a client certificate
signed by the cluster CA, or a bearer token from `--token-auth-file`), put the user in
`current_user` for the request's task and ask `ApiAuthorizer.check(attrs)` before the
registry runs: `system:masters` bypasses, then the Node authorizer (kubelets), then RBAC.
The registry calls `node_restriction` on every create/update, where the objects are known.

Without `--tls-cert-file` the apiserver runs in the insecure mode (`current_user` stays
None): nothing is checked, as before this module existed.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from skiff.api import ApiError, Reason
from skiff.api.kinds import KindInfo
from skiff.apiserver.satoken import GetObject, TokenAuthority
from skiff.auth import (
    AUTHENTICATED_GROUP,
    MASTERS_GROUP,
    NODES_GROUP,
    READ_VERBS,
    UNAUTHENTICATED_GROUP,
    Attributes,
    AuthorizationResult,
    Decision,
    RbacRules,
    UserInfo,
    forbidden,
    load_token_file,
    node_identity,
)
from skiff.certtoken import (
    LEEWAY_SECONDS,
    MAX_LIFETIME_SECONDS,
    presented_certificate,
    signed_by,
)
from skiff.pki import (
    CONTROLLER_MANAGER_USER,
    FENCE_AGENT_USER,
    SCHEDULER_USER,
    identity_of,
)

if TYPE_CHECKING:
    from skiff.apiserver.registry import Registry

log = logging.getLogger(__name__)

Obj = dict[str, Any]

# The authenticated user of the request this task serves; None in the insecure mode.
current_user: ContextVar[UserInfo | None] = ContextVar("skiff_current_user", default=None)

NODE_LEASE_NAMESPACE = "kube-node-lease"
RBAC_GROUP = "rbac.authorization.k8s.io"


# -- authentication --------------------------------------------------------------------------


class Authenticator:
    """Client certificates (verified against the cluster CA), static bearer tokens and
    ServiceAccount tokens, each checked in full on every request (SPEC AU9).

    A certificate, presented in the TLS handshake (HTTPS) or proved by a certificate token
    (gRPC, skiff.certtoken), counts as Kubernetes' x509 authenticator counts it: issued by
    the cluster CA, within its validity period *now* (a long-lived connection or a cached
    token does not outlive it) and usable for client authentication (an extended key usage
    that names clientAuth or any usage, or none at all, as Go's verifier allows; a
    serving-only certificate is no identity). Certificate tokens may live at most
    `certificate_token_max_age` seconds. A ServiceAccount token must still be bound to
    live objects (`TokenAuthority.validate` with `bound_objects`)."""

    def __init__(self, *, client_ca_file: Path, token_auth_file: Path | None = None,
                 service_accounts: TokenAuthority | None = None,
                 bound_objects: GetObject | None = None,
                 certificate_token_max_age: float = MAX_LIFETIME_SECONDS) -> None:
        if service_accounts is not None and bound_objects is None:
            raise ValueError("ServiceAccount tokens need the objects they are bound to")
        self._ca = x509.load_pem_x509_certificate(client_ca_file.read_bytes())
        self._tokens = load_token_file(token_auth_file) if token_auth_file else {}
        self._service_accounts = service_accounts
        self._bound_objects = bound_objects
        self._certificate_token_max_age = certificate_token_max_age
        # DER -> the certificate's user and validity once its signature and usage are
        # verified (None: they are not); the validity period is checked on every use.
        self._verified: dict[bytes, _Verified | None] = {}
        # certificate token -> (its certificate, its expiry) once its signature is checked
        self._tokens_seen: dict[str, tuple[bytes, float] | None] = {}

    def _verify(self, cert: x509.Certificate) -> _Verified | None:
        """What does not change with time: the CA's signature, the clientAuth usage (of the
        certificate and the CA, as Go checks a chain) and a user name."""
        try:
            cert.verify_directly_issued_by(self._ca)
        except (ValueError, TypeError, Exception):
            return None
        if not (_client_auth_allowed(cert) and _client_auth_allowed(self._ca)):
            return None
        ident = identity_of(cert.public_bytes(serialization.Encoding.PEM))
        if not ident.user:
            return None
        start = max(cert.not_valid_before_utc, self._ca.not_valid_before_utc)
        end = min(cert.not_valid_after_utc, self._ca.not_valid_after_utc)
        return _Verified(UserInfo(ident.user, groups=ident.groups).with_authenticated(),
                         start.timestamp(), end.timestamp())

    def from_certificate(self, cert: x509.Certificate) -> UserInfo | None:
        """The user a certificate names, if the cluster CA issued it for client
        authentication and it is current."""
        return self.from_der(cert.public_bytes(serialization.Encoding.DER))

    def from_der(self, der: bytes) -> UserInfo | None:
        if der not in self._verified:
            if len(self._verified) > 1024:
                self._verified.clear()
            try:
                cert = x509.load_der_x509_certificate(der)
            except ValueError:
                self._verified[der] = None
            else:
                self._verified[der] = self._verify(cert)
        verified = self._verified[der]
        if verified is None or not verified.not_before <= time.time() <= verified.not_after:
            return None
        return verified.user

    def from_pem(self, pem: bytes) -> UserInfo | None:
        try:
            cert = x509.load_pem_x509_certificate(pem)
        except ValueError:
            return None
        return self.from_certificate(cert)

    async def from_authorization(self, header: str) -> UserInfo | None:
        """`Bearer <token>`: a certificate token (skiff.certtoken: the certificate's user,
        if the cluster CA issued it and its key signed the token), from the static token
        file, else a ServiceAccount token this cluster signed
        (system:serviceaccount:<namespace>:<name>) whose bound objects still stand."""
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        token = token.strip()
        if token.count(".") == 2:  # a JWT: a certificate token, or a ServiceAccount's
            certificate_token, user = self._certificate_token_user(token)
            if certificate_token:
                return user
        user = self._tokens.get(token)
        if user is None and self._service_accounts is not None \
                and self._bound_objects is not None:
            user = await self._service_accounts.validate(token, self._bound_objects)
        return user.with_authenticated() if user else None

    def _certificate_token_user(self, token: str) -> tuple[bool, UserInfo | None]:
        """(is it a certificate token, its user if it proves a current certificate). The
        token's signature is checked once (a client re-signs every few minutes) and
        remembered; its expiry and its certificate's validity on every use."""
        if token not in self._tokens_seen:
            der = presented_certificate(token)
            if der is None:
                return False, None
            if len(self._tokens_seen) > 4096:
                self._tokens_seen.clear()
            expires = signed_by(token, der, max_age=self._certificate_token_max_age)
            self._tokens_seen[token] = (der, expires) if expires is not None else None
        seen = self._tokens_seen[token]
        if seen is None or time.time() > seen[1] + LEEWAY_SECONDS:
            return True, None
        return True, self.from_der(seen[0])


@dataclass(frozen=True)
class _Verified:
    user: UserInfo
    not_before: float  # epoch seconds, of the certificate and its CA
    not_after: float


def _client_auth_allowed(cert: x509.Certificate) -> bool:
    """Go's x509 rule for ExtKeyUsageClientAuth: no extended key usage at all, or one
    that lists clientAuth or anyExtendedKeyUsage."""
    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return True
    return (ExtendedKeyUsageOID.CLIENT_AUTH in usages
            or ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE in usages)


# -- authorization ---------------------------------------------------------------------------


_NODE_READABLE = frozenset({"nodes", "pods", "leases", "volumeattachments", "fences",
                            "namespaces", "services", "endpoints", "priorityclasses",
                            "events", "csinodes", "storageclasses",
                            "endpointslices"})  # the service proxy (kube-proxy's reads)
_NODE_REFERENCED = frozenset({"persistentvolumeclaims", "configmaps", "secrets",
                              "persistentvolumes"})


def _pod_references(pod: Obj, resource: str, name: str) -> bool:
    spec = pod.get("spec") or {}
    if resource in ("configmaps", "secrets") and name in _env_references(spec, resource):
        return True  # env valueFrom / envFrom, as in the node authorizer's graph
    for volume in spec.get("volumes") or ():
        for source in ((volume.get("projected") or {}).get("sources") or ()):
            if resource == "configmaps" and (source.get("configMap") or {}).get(
                    "name") == name:
                return True
            if resource == "secrets" and (source.get("secret") or {}).get("name") == name:
                return True
        if resource == "persistentvolumeclaims" and (
                (volume.get("persistentVolumeClaim") or {}).get("claimName") == name):
            return True
        if resource == "configmaps" and (volume.get("configMap") or {}).get("name") == name:
            return True
        if resource == "secrets" and (volume.get("secret") or {}).get("secretName") == name:
            return True
    return False


def _env_references(spec: Obj, resource: str) -> set[str]:
    """The ConfigMaps or Secrets a pod's containers read into their environment."""
    key_ref, from_ref = (("configMapKeyRef", "configMapRef") if resource == "configmaps"
                         else ("secretKeyRef", "secretRef"))
    names: set[str] = set()
    for container in [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]:
        for env in container.get("env") or ():
            ref = (env.get("valueFrom") or {}).get(key_ref) or {}
            if ref.get("name"):
                names.add(str(ref["name"]))
        for source in container.get("envFrom") or ():
            ref = source.get(from_ref) or {}
            if ref.get("name"):
                names.add(str(ref["name"]))
    return names


class NodeAuthorizer:
    """Kubernetes' Node authorizer, by lookup instead of a graph: a kubelet
    (`system:node:<name>` in `system:nodes`) reads what its pods need and writes its own
    Node, its own Lease, its pods' status and their deletion, and events."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    async def authorize(self, attrs: Attributes) -> AuthorizationResult:
        node = node_identity(attrs.user)
        if node is None or not attrs.is_resource_request:
            return AuthorizationResult(Decision.NO_OPINION)
        r, verb = attrs.resource, attrs.verb
        if r in _NODE_REFERENCED:
            if verb == "get" and await self._referenced(node, attrs):
                return AuthorizationResult(Decision.ALLOW)
            return _deny(f"no relationship found between node '{node}' and this object")
        if verb in READ_VERBS:
            return AuthorizationResult(
                Decision.ALLOW if r in _NODE_READABLE else Decision.NO_OPINION)
        if r == "nodes":
            if verb == "create" or (verb in ("update", "patch", "delete")
                                    and attrs.name == node):
                return AuthorizationResult(Decision.ALLOW)
            return _deny(f"node '{node}' cannot modify node '{attrs.name}'")
        if r == "leases" and attrs.api_group == "coordination.k8s.io":
            if attrs.namespace == NODE_LEASE_NAMESPACE and (
                    verb == "create" or attrs.name == node):
                return AuthorizationResult(Decision.ALLOW)
            return _deny(f"node '{node}' can only modify its own Lease "
                         f"'{NODE_LEASE_NAMESPACE}/{node}'")
        if r == "events" and verb in ("create", "update", "patch"):
            return AuthorizationResult(Decision.ALLOW)
        if r == "serviceaccounts" and attrs.subresource == "token" and verb == "create":
            # the projected token of a pod bound here (Kubernetes' node authorizer graph)
            if await self._runs_service_account(node, attrs.namespace, attrs.name):
                return AuthorizationResult(Decision.ALLOW)
            return _deny(f"no relationship found between node '{node}' and this object")
        if r == "pods" and ((attrs.subresource == "status" and verb in ("update", "patch"))
                            or (attrs.subresource == "" and verb == "delete")):
            if await self._bound_here(node, attrs.namespace, attrs.name):
                return AuthorizationResult(Decision.ALLOW)
            return _deny(f"node '{node}' can only {verb} pods bound to it")
        return AuthorizationResult(Decision.NO_OPINION)

    async def _bound_here(self, node: str, namespace: str, name: str) -> bool:
        try:
            pod = await self.registry.get("pods", namespace, name)
        except ApiError:
            return False
        return bool((pod.get("spec") or {}).get("nodeName") == node)

    async def _pods_here(self, node: str, namespace: str | None) -> list[Obj]:
        pods = await self.registry.list("pods", namespace,
                                        field_selector=f"spec.nodeName={node}")
        return list(pods["items"])

    async def _referenced(self, node: str, attrs: Attributes) -> bool:
        if attrs.resource == "persistentvolumes":  # pod -> claim -> volume
            return await self._volume_of_a_claim_here(node, attrs.name)
        if not attrs.namespace:
            return False
        pods = await self._pods_here(node, attrs.namespace)
        return any(_pod_references(p, attrs.resource, attrs.name) for p in pods)

    async def _volume_of_a_claim_here(self, node: str, volume: str) -> bool:
        for pod in await self._pods_here(node, None):
            namespace = pod["metadata"].get("namespace")
            for v in (pod.get("spec") or {}).get("volumes") or ():
                claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
                if not claim:
                    continue
                try:
                    pvc = await self.registry.get("persistentvolumeclaims", namespace, claim)
                except ApiError:
                    continue
                if (pvc.get("spec") or {}).get("volumeName") == volume:
                    return True
        return False

    async def _runs_service_account(self, node: str, namespace: str, name: str) -> bool:
        return any((p.get("spec") or {}).get("serviceAccountName", "default") == name
                   for p in await self._pods_here(node, namespace))


def _deny(reason: str) -> AuthorizationResult:
    return AuthorizationResult(Decision.DENY, reason)


class RbacAuthorizer:
    """RBAC over the Role/ClusterRole/RoleBinding/ClusterRoleBinding objects in etcd,
    re-read at most every `refresh_seconds` (Kubernetes' informers lag a little too)."""

    def __init__(self, registry: Registry, *, refresh_seconds: float = 1.0) -> None:
        self.registry = registry
        self.refresh_seconds = refresh_seconds
        self._rules: RbacRules | None = None
        self._read_at = 0.0
        self._lock = asyncio.Lock()

    async def snapshot(self, *, newer_than: float | None = None) -> RbacRules:
        """The RBAC objects as last read, re-read when older than `refresh_seconds` or,
        with `newer_than` (a time.monotonic()), when read before then."""
        async with self._lock:
            if self._rules is None or time.monotonic() - self._read_at > self.refresh_seconds \
                    or (newer_than is not None and self._read_at <= newer_than):
                listed = [(await self.registry.list(r, None))["items"]
                          for r in ("roles", "clusterroles", "rolebindings",
                                    "clusterrolebindings")]
                self._rules = RbacRules.from_objects(
                    roles=listed[0], cluster_roles=listed[1], role_bindings=listed[2],
                    cluster_role_bindings=listed[3])
                self._read_at = time.monotonic()
            return self._rules

    async def rules_for(self, user: UserInfo, namespace: str) -> list[Obj]:
        return (await self.snapshot()).rules_for(user, namespace)

    async def authorize(self, attrs: Attributes) -> AuthorizationResult:
        asked = time.monotonic()
        result = (await self.snapshot()).authorize(attrs)
        if result.decision is Decision.ALLOW:
            return result
        # A denial is answered from rules read after the request arrived, so a binding made
        # just before is never missed (denials are rare; grants stay cached).
        return (await self.snapshot(newer_than=asked)).authorize(attrs)


class ApiAuthorizer:
    """The apiserver's authorizer chain: system:masters, Node, RBAC; the first ALLOW or
    DENY decides, no opinion from all is a denial. This is the API issue 19's
    SelfSubjectAccessReview uses: `await authorizer.authorize(attrs)`."""

    def __init__(self, registry: Registry) -> None:
        self.node = NodeAuthorizer(registry)
        self.rbac = RbacAuthorizer(registry)

    async def authorize(self, attrs: Attributes) -> AuthorizationResult:
        if MASTERS_GROUP in attrs.user.groups:
            return AuthorizationResult(Decision.ALLOW, "system:masters")
        for authorizer in (self.node, self.rbac):
            result = await authorizer.authorize(attrs)
            if result.decision is not Decision.NO_OPINION:
                return result
        return AuthorizationResult(Decision.DENY)

    async def rules_for(self, user: UserInfo, namespace: str) -> Obj:
        """What `user` may do in `namespace` as a SubjectRulesReviewStatus (`kubectl auth
        can-i --list`): the union of the chain's answers, as kube-apiserver's. system:masters
        may do everything; the Node authorizer cannot enumerate a kubelet's rights, so a
        node's list is incomplete; RBAC lists each rule of the user's bindings."""
        resource_rules: list[Obj] = []
        non_resource_rules: list[Obj] = []
        errors: list[str] = []
        if MASTERS_GROUP in user.groups:
            resource_rules.append({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})
            non_resource_rules.append({"verbs": ["*"], "nonResourceURLs": ["*"]})
        if node_identity(user) is not None:
            errors.append("node authorizer does not support user rule resolution")
        for rule in await self.rbac.rules_for(user, namespace):
            if rule.get("nonResourceURLs"):
                non_resource_rules.append({"verbs": list(rule.get("verbs") or []),
                                           "nonResourceURLs": list(rule["nonResourceURLs"])})
                continue
            entry: Obj = {key: list(rule.get(key) or [])
                          for key in ("verbs", "apiGroups", "resources")}
            if rule.get("resourceNames"):
                entry["resourceNames"] = list(rule["resourceNames"])
            resource_rules.append(entry)
        status: Obj = {"resourceRules": resource_rules, "nonResourceRules": non_resource_rules,
                       "incomplete": bool(errors)}
        if errors:
            status["evaluationError"] = ", ".join(errors)
        return status

    async def check(self, attrs: Attributes) -> None:
        """Raise Kubernetes' 403 unless `attrs` is allowed."""
        result = await self.authorize(attrs)
        if not result.allowed:
            raise forbidden(attrs, result.reason)


# -- NodeRestriction admission ---------------------------------------------------------------

_NODE_LABEL_DOMAINS = ("kubernetes.io", "k8s.io")
_NODE_LABELS_ALLOWED = frozenset({
    "kubernetes.io/hostname", "kubernetes.io/arch", "kubernetes.io/os",
    "beta.kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type", "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone"})
_NODE_LABEL_PREFIXES_ALLOWED = ("kubelet.kubernetes.io/", "node.kubernetes.io/")


def _restricted_label(key: str) -> bool:
    """Labels a kubelet may not set on itself (NodeRestriction's rules)."""
    domain = key.partition("/")[0] if "/" in key else ""
    if domain == "node-restriction.kubernetes.io" or domain.endswith(
            ".node-restriction.kubernetes.io"):
        return True
    if key in _NODE_LABELS_ALLOWED or key.startswith(_NODE_LABEL_PREFIXES_ALLOWED):
        return False
    return any(domain == d or domain.endswith("." + d) for d in _NODE_LABEL_DOMAINS)


def _changed_labels(new: Obj, old: Obj | None) -> Iterable[str]:
    new_labels = (new.get("metadata") or {}).get("labels") or {}
    old_labels = ((old or {}).get("metadata") or {}).get("labels") or {}
    for key in set(new_labels) | set(old_labels):
        if new_labels.get(key) != old_labels.get(key):
            yield key


def node_restriction(info: KindInfo, obj: Obj, old: Obj | None) -> None:
    """Kubernetes' NodeRestriction for the current user if it is a kubelet: its own Node
    and Lease only, no own taint changes, no restricted labels, no pods of its own."""
    user = current_user.get()
    node = node_identity(user) if user is not None else None
    if user is None or node is None:
        return
    name = (obj.get("metadata") or {}).get("name", "")
    verb = "create" if old is None else "update"
    if info.kind == "Node":
        if name != node:
            raise _admission(info, name, f"node '{node}' is not allowed to modify node '{name}'")
        if old is not None and ((obj.get("spec") or {}).get("taints") or []) != (
                (old.get("spec") or {}).get("taints") or []):
            raise _admission(info, name, f"node '{node}' is not allowed to modify taints")
        restricted = sorted(k for k in _changed_labels(obj, old) if _restricted_label(k))
        if restricted:
            raise _admission(info, name, f"node '{node}' is not allowed to modify labels: "
                             f"{', '.join(restricted)}")
    elif info.kind == "Lease" and (obj.get("metadata") or {}).get(
            "namespace") == NODE_LEASE_NAMESPACE:
        if name != node:
            raise _admission(info, name, f"node '{node}' is not allowed to {verb} lease '{name}'")
    elif info.kind == "Pod":
        if old is None:
            raise _admission(info, name, f"node '{node}' is not allowed to create pods")
        if (obj.get("spec") or {}).get("nodeName") != node:
            raise _admission(info, name, f"node '{node}' can only update pods bound to it")


def _admission(info: KindInfo, name: str, message: str) -> ApiError:
    return ApiError.forbidden(info.resource, name, message, group=info.group)


# -- bootstrap policy ------------------------------------------------------------------------


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> Obj:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


_READ = ["get", "list", "watch"]
_WRITE = ["create", "update", "patch", "delete", "deletecollection"]
_READ_WRITE = [*_READ, *_WRITE]
VOLUME_SCHEDULER_ROLE = "system:volume-scheduler"
MONITORING_ROLE = "system:monitoring"  # a ClusterRole and the group it is bound to
AUTOUPDATE_ANNOTATION = "rbac.authorization.kubernetes.io/autoupdate"
_AGGREGATE_TO = "rbac.authorization.k8s.io/aggregate-to-"

# The user-facing roles' rules as Kubernetes 1.32 aggregates them (bootstrappolicy's
# system:aggregate-to-view/-edit/-admin, plus metrics-server's
# system:aggregated-metrics-reader in view). Read-only `view` leaves out Secrets and the
# pods/exec family (they escalate); `edit` writes workloads but not RBAC; `admin` adds
# Roles and RoleBindings.
_AGGREGATE_TO_VIEW = [
    _rule([""], ["configmaps", "endpoints", "persistentvolumeclaims",
                 "persistentvolumeclaims/status", "pods", "replicationcontrollers",
                 "replicationcontrollers/scale", "serviceaccounts", "services",
                 "services/status"], _READ),
    _rule([""], ["bindings", "events", "limitranges", "namespaces/status", "pods/log",
                 "pods/status", "replicationcontrollers/status", "resourcequotas",
                 "resourcequotas/status"], _READ),
    _rule([""], ["namespaces"], _READ),
    _rule(["discovery.k8s.io"], ["endpointslices"], _READ),
    _rule(["apps"], ["controllerrevisions", "daemonsets", "daemonsets/status", "deployments",
                     "deployments/scale", "deployments/status", "replicasets",
                     "replicasets/scale", "replicasets/status", "statefulsets",
                     "statefulsets/scale", "statefulsets/status"], _READ),
    _rule(["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"],
          _READ),
    _rule(["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"], _READ),
    _rule(["extensions"], ["daemonsets", "daemonsets/status", "deployments",
                           "deployments/scale", "deployments/status", "ingresses",
                           "ingresses/status", "networkpolicies", "replicasets",
                           "replicasets/scale", "replicasets/status",
                           "replicationcontrollers/scale"], _READ),
    _rule(["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"], _READ),
    _rule(["networking.k8s.io"], ["ingresses", "ingresses/status", "networkpolicies"],
          _READ),
]
_AGGREGATED_METRICS_READER = [_rule(["metrics.k8s.io"], ["pods", "nodes"], _READ)]
_AGGREGATE_TO_EDIT = [
    _rule([""], ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets",
                 "services/proxy"], _READ),
    _rule([""], ["serviceaccounts"], ["impersonate"]),
    _rule([""], ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"],
          _WRITE),
    _rule([""], ["pods/eviction"], ["create"]),
    _rule([""], ["configmaps", "events", "persistentvolumeclaims", "replicationcontrollers",
                 "replicationcontrollers/scale", "secrets", "serviceaccounts", "services",
                 "services/proxy"], _WRITE),
    _rule([""], ["serviceaccounts/token"], ["create"]),
    _rule(["apps"], ["daemonsets", "deployments", "deployments/rollback", "deployments/scale",
                     "replicasets", "replicasets/scale", "statefulsets",
                     "statefulsets/scale"], _WRITE),
    _rule(["autoscaling"], ["horizontalpodautoscalers"], _WRITE),
    _rule(["batch"], ["cronjobs", "jobs"], _WRITE),
    _rule(["extensions"], ["daemonsets", "deployments", "deployments/rollback",
                           "deployments/scale", "ingresses", "networkpolicies", "replicasets",
                           "replicasets/scale", "replicationcontrollers/scale"], _WRITE),
    _rule(["policy"], ["poddisruptionbudgets"], _WRITE),
    _rule(["networking.k8s.io"], ["ingresses", "networkpolicies"], _WRITE),
    _rule(["coordination.k8s.io"], ["leases"], _READ_WRITE),
]
_AGGREGATE_TO_ADMIN = [
    _rule(["authorization.k8s.io"], ["localsubjectaccessreviews"], ["create"]),
    _rule([RBAC_GROUP], ["rolebindings", "roles"], _READ_WRITE),
]
_VIEW = [*_AGGREGATE_TO_VIEW, *_AGGREGATED_METRICS_READER]
_EDIT = [*_AGGREGATE_TO_EDIT, *_VIEW]
_ADMIN = [*_AGGREGATE_TO_ADMIN, *_EDIT]
# Kubernetes computes these three by aggregation; Skiff has no aggregation controller, so
# their rules are written out and replaced whole when the apiserver reconciles them.
_AGGREGATED_ROLES = frozenset({"admin", "edit", "view"})


def _aggregate_to(*roles: str) -> dict[str, str]:
    return {f"{_AGGREGATE_TO}{role}": "true" for role in roles}


def bootstrap_policy() -> list[Obj]:
    """The ClusterRoles and ClusterRoleBindings every cluster starts with, so each
    component works (Kubernetes' bootstrappolicy, cut to what Skiff's components do),
    and the user-facing `view`, `edit` and `admin` roles as Kubernetes grants them."""
    roles: dict[str, list[Obj]] = {
        "cluster-admin": [_rule(["*"], ["*"], ["*"]),
                          {"nonResourceURLs": ["*"], "verbs": ["*"]}],
        "admin": _ADMIN,
        "edit": _EDIT,
        "view": _VIEW,
        "system:aggregate-to-admin": _AGGREGATE_TO_ADMIN,
        "system:aggregate-to-edit": _AGGREGATE_TO_EDIT,
        "system:aggregate-to-view": _AGGREGATE_TO_VIEW,
        "system:aggregated-metrics-reader": _AGGREGATED_METRICS_READER,
        # what every user may ask about itself and the server (kubectl auth can-i / whoami)
        "system:basic-user": [
            _rule(["authorization.k8s.io"],
                  ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], ["create"]),
            _rule(["authentication.k8s.io"], ["selfsubjectreviews"], ["create"])],
        # delegated authentication and authorization (kube-rbac-proxy, metrics-server,
        # aggregated apiservers): TokenReviews and SubjectAccessReviews, bound to no one
        "system:auth-delegator": [
            _rule(["authentication.k8s.io"], ["tokenreviews"], ["create"]),
            _rule(["authorization.k8s.io"], ["subjectaccessreviews"], ["create"])],
        "system:discovery": [{"nonResourceURLs": [
            "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
            "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"]}],
        "system:public-info-viewer": [{"nonResourceURLs": [
            "/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}],
        SCHEDULER_USER: [
            _rule(["*"], ["*"], _READ),
            _rule([""], ["pods/binding", "bindings"], ["create"]),
            _rule([""], ["pods/status"], ["update", "patch"]),
            _rule([""], ["pods"], ["delete", "update", "patch"]),
            _rule([""], ["events"], ["create", "update", "patch"]),
            _rule(["coordination.k8s.io"], ["leases"], ["create", "update", "patch"]),
        ],
        # The VolumeBinding PreBind annotates WaitForFirstConsumer claims with the chosen
        # node (SPEC AX4); Kubernetes grants that through this role, bound to the scheduler.
        VOLUME_SCHEDULER_ROLE: [
            _rule([""], ["persistentvolumes", "persistentvolumeclaims"],
                  [*_READ, "update", "patch"]),
            _rule(["storage.k8s.io"], ["storageclasses"], _READ),
        ],
        # Kubernetes splits this over one ServiceAccount per controller; Skiff's
        # controller-manager runs them all under one identity (and may create Fences).
        CONTROLLER_MANAGER_USER: [_rule(["*"], ["*"], ["*"])],
        # Prometheus and monitoring agents: kube-apiserver's health and metrics endpoints
        MONITORING_ROLE: [{"nonResourceURLs": ["/healthz", "/healthz/*", "/livez",
                                               "/livez/*", "/readyz", "/readyz/*",
                                               "/metrics", "/metrics/slis"],
                           "verbs": ["get"]}],
        FENCE_AGENT_USER: [
            _rule(["*"], ["*"], _READ),
            _rule(["skiff.io"], ["fences", "fences/status"], ["update", "patch"]),
            _rule(["storage.k8s.io"], ["volumeattachments"], ["delete"]),
            _rule([""], ["events"], ["create", "update", "patch"]),
        ],
    }
    role_labels: dict[str, dict[str, str]] = {
        "edit": _aggregate_to("admin"),
        "view": _aggregate_to("edit"),
        "system:aggregate-to-admin": _aggregate_to("admin"),
        "system:aggregate-to-edit": _aggregate_to("edit"),
        "system:aggregate-to-view": _aggregate_to("view"),
        "system:aggregated-metrics-reader": _aggregate_to("view", "edit", "admin"),
    }
    subjects: dict[str, list[Obj]] = {
        "cluster-admin": [{"kind": "Group", "name": MASTERS_GROUP}],
        "system:basic-user": [{"kind": "Group", "name": AUTHENTICATED_GROUP}],
        "system:discovery": [{"kind": "Group", "name": AUTHENTICATED_GROUP}],
        "system:public-info-viewer": [{"kind": "Group", "name": AUTHENTICATED_GROUP},
                                      {"kind": "Group", "name": UNAUTHENTICATED_GROUP}],
        SCHEDULER_USER: [{"kind": "User", "name": SCHEDULER_USER}],
        VOLUME_SCHEDULER_ROLE: [{"kind": "User", "name": SCHEDULER_USER}],
        CONTROLLER_MANAGER_USER: [{"kind": "User", "name": CONTROLLER_MANAGER_USER}],
        FENCE_AGENT_USER: [{"kind": "User", "name": FENCE_AGENT_USER}],
        MONITORING_ROLE: [{"kind": "Group", "name": MONITORING_ROLE}],
    }
    api_version = f"{RBAC_GROUP}/v1"

    def meta(name: str, extra_labels: dict[str, str] | None = None) -> Obj:
        return {"name": name,
                "labels": {"kubernetes.io/bootstrapping": "rbac-defaults",
                           **(extra_labels or {})},
                "annotations": {AUTOUPDATE_ANNOTATION: "true"}}

    objs: list[Obj] = [{"apiVersion": api_version, "kind": "ClusterRole",
                        "metadata": meta(name, role_labels.get(name)),
                        "rules": copy.deepcopy(rules)}
                       for name, rules in roles.items()]
    objs += [{"apiVersion": api_version, "kind": "ClusterRoleBinding",
              "metadata": meta(name),
              "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
              "subjects": [{**subject, "apiGroup": RBAC_GROUP} for subject in group]}
             for name, group in subjects.items()]
    return objs


def reconciled(current: Obj, wanted: Obj) -> Obj | None:
    """`current` brought up to date with the bootstrap object `wanted`, or None when it
    already is or its owner opted out (`rbac.authorization.kubernetes.io/autoupdate:
    "false"`), as kube-apiserver reconciles its bootstrap policy at start: wanted labels,
    annotations, rules and subjects are added, none are removed, except that the rules of
    the aggregated roles (admin, edit, view) are replaced whole, as Kubernetes' aggregation
    controller recomputes them."""
    meta = current.get("metadata") or {}
    if (meta.get("annotations") or {}).get(AUTOUPDATE_ANNOTATION) == "false":
        return None
    updated = copy.deepcopy(current)
    new_meta = updated["metadata"]
    for key in ("labels", "annotations"):
        new_meta[key] = {**(meta.get(key) or {}), **wanted["metadata"][key]}
    name = wanted["metadata"]["name"]
    if wanted["kind"] == "ClusterRole":
        have = list(current.get("rules") or [])
        updated["rules"] = (copy.deepcopy(wanted["rules"]) if name in _AGGREGATED_ROLES
                            else have + [r for r in wanted["rules"] if r not in have])
    else:
        have = list(current.get("subjects") or [])
        updated["subjects"] = have + [s for s in wanted["subjects"] if s not in have]
    return None if updated == current else updated


async def reconcile_bootstrap_policy(registry: Registry) -> None:
    """Create the bootstrap policy's missing objects and reconcile the existing ones
    (`reconciled`), so a restarted apiserver corrects roles an older Skiff wrote."""
    for wanted in bootstrap_policy():
        resource = "clusterroles" if wanted["kind"] == "ClusterRole" else "clusterrolebindings"
        for _ in range(5):  # another apiserver process may reconcile at the same time
            try:
                current = await registry.get(resource, None, wanted["metadata"]["name"])
            except ApiError as err:
                if err.reason != Reason.NOT_FOUND:
                    raise
                await registry.ensure(wanted)  # created as wanted (or by another apiserver)
                break
            updated = reconciled(current, wanted)
            if updated is None:
                break
            try:
                await registry.update(resource, None, updated)
            except ApiError as err:
                if err.reason != Reason.CONFLICT:
                    raise
                continue
            log.info("reconciled bootstrap RBAC object",
                     extra={"kind": wanted["kind"], "object": wanted["metadata"]["name"]})
            break


__all__ = ["NODES_GROUP", "ApiAuthorizer", "Authenticator", "NodeAuthorizer",
           "RbacAuthorizer", "bootstrap_policy", "current_user", "node_restriction",
           "reconcile_bootstrap_policy", "reconciled"]
