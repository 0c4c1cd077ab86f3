"""The bootstrap RBAC policy as data: the ClusterRoles and ClusterRoleBindings every cluster
starts with (Kubernetes' bootstrappolicy, cut to what Skiff's components do) and the
user-facing `view`, `edit` and `admin` roles. reconcile.py writes them at start.
"""

from __future__ import annotations

import copy

from skiff.api.types import Obj
from skiff.auth import AUTHENTICATED_GROUP, MASTERS_GROUP, UNAUTHENTICATED_GROUP
from skiff.pki import CONTROLLER_MANAGER_USER, FENCE_AGENT_USER, SCHEDULER_USER

RBAC_GROUP = "rbac.authorization.k8s.io"


NODE_CLIENT_ROLE = "system:certificates.k8s.io:certificatesigningrequests:nodeclient"
SELF_NODE_CLIENT_ROLE = "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"
BOOTSTRAPPERS_GROUP = "system:bootstrappers"
GET_NODES_ROLE = "skiff:get-nodes"


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
AGGREGATED_ROLES = frozenset({"admin", "edit", "view"})


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
        # TLS bootstrapping (SPEC JN2): a joining kubelet asks for its client certificate
        # with a CSR; the csrapproving controller approves it when the requester may create
        # `nodeclient` (a bootstrap token's user) or, renewing, `selfnodeclient` (the node)
        "system:node-bootstrapper": [_rule(["certificates.k8s.io"],
                                           ["certificatesigningrequests"],
                                           ["create", "get", "list", "watch"])],
        NODE_CLIENT_ROLE: [_rule(["certificates.k8s.io"],
                                 ["certificatesigningrequests/nodeclient"], ["create"])],
        SELF_NODE_CLIENT_ROLE: [_rule(["certificates.k8s.io"],
                                      ["certificatesigningrequests/selfnodeclient"],
                                      ["create"])],
        # kubeadm's kubeadm:get-nodes: `skiff join` refuses a name a Node already has
        GET_NODES_ROLE: [_rule([""], ["nodes"], ["get"])],
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
        # kubeadm's kubelet-bootstrap and node-autoapprove bindings; nodes get CSRs here
        # too (Kubernetes' Node authorizer grants them from its static node rules)
        "system:node-bootstrapper": [{"kind": "Group", "name": BOOTSTRAPPERS_GROUP},
                                     {"kind": "Group", "name": "system:nodes"}],
        NODE_CLIENT_ROLE: [{"kind": "Group", "name": BOOTSTRAPPERS_GROUP}],
        SELF_NODE_CLIENT_ROLE: [{"kind": "Group", "name": "system:nodes"}],
        GET_NODES_ROLE: [{"kind": "Group", "name": BOOTSTRAPPERS_GROUP}],
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
