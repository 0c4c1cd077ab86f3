"""The kinds Skiff serves (SPEC AS2) and how each maps to a resource and an etcd key.

Everything that needs "which resource is this kind, is it namespaced, where is it stored"
asks this table, so adding a kind is one entry here plus its validation and defaults.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from skiff.api.errors import ApiError, Reason


@dataclass(frozen=True)
class KindInfo:
    kind: str
    api_version: str
    resource: str  # plural, lower case: "pods"
    namespaced: bool
    short_names: tuple[str, ...] = ()
    has_status: bool = True
    # Further versions the HTTP API serves the kind in, converted to and from `api_version`
    # (the one stored and spoken over gRPC) by skiff.api.conversion.
    also_served: tuple[str, ...] = ()
    # A custom resource (SPEC EX2): served while its CustomResourceDefinition is, stored
    # under `/registry/<group>/<resource>/` as kube-apiserver stores it, and addressed by
    # its qualified name (`ref`) since its plural may be a built-in's (Knative `services`).
    custom: bool = False
    categories: tuple[str, ...] = ()  # `kubectl get all` and the CRD's own categories
    subresources: tuple[str, ...] = ()  # a custom resource's (`status`, `scale`)

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def ref(self) -> str:
        """The name `lookup` resolves to this kind and no other: the plural, qualified by
        the group for a custom resource (`certificates.cert-manager.io`)."""
        return f"{self.resource}.{self.group}" if self.custom else self.resource

    @property
    def singular(self) -> str:
        return self.kind.lower()

    def served(self) -> list[KindInfo]:
        """This kind in every version the HTTP API serves it in, the stored one first."""
        return [self, *(dataclasses.replace(self, api_version=v, also_served=())
                        for v in self.also_served)]


# Kinds whose metadata.generation counts spec changes (their registry strategies set it to 1
# on create and add 1 when the spec changes); every other kind (ConfigMap, Service, Node ...)
# has none, as in Kubernetes. Pods have one since Kubernetes 1.33 (KEP-5067), in every
# release still supported.
GENERATION_KINDS = frozenset({"Pod", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet",
                              "Job", "CronJob", "PodDisruptionBudget",
                              "ReplicationController", "CustomResourceDefinition",
                              "ValidatingAdmissionPolicy"})


KINDS: tuple[KindInfo, ...] = (
    KindInfo("Namespace", "v1", "namespaces", False, ("ns",)),
    KindInfo("Node", "v1", "nodes", False, ("no",)),
    KindInfo("Pod", "v1", "pods", True, ("po",)),
    # stored as core v1; events.k8s.io/v1 converted (skiff.api.groups.events)
    KindInfo("Event", "v1", "events", True, ("ev",), has_status=False,
             also_served=("events.k8s.io/v1",)),
    KindInfo("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", False, ("pc",),
             has_status=False),
    KindInfo("PodDisruptionBudget", "policy/v1", "poddisruptionbudgets", True, ("pdb",)),
    KindInfo("ReplicaSet", "apps/v1", "replicasets", True, ("rs",)),
    # the ReplicaSet's predecessor, run by the same controller (an equality selector)
    KindInfo("ReplicationController", "v1", "replicationcontrollers", True, ("rc",)),
    KindInfo("StatefulSet", "apps/v1", "statefulsets", True, ("sts",)),
    KindInfo("Lease", "coordination.k8s.io/v1", "leases", True, (), has_status=False),
    # Storage safety (SPEC SC1): an RWO claim is one volume; a VolumeAttachment named after
    # the volume binds it to exactly one node (creating it is the compare-and-swap).
    KindInfo("PersistentVolumeClaim", "v1", "persistentvolumeclaims", True, ("pvc",)),
    KindInfo("VolumeAttachment", "storage.k8s.io/v1", "volumeattachments", False, ("va",)),
    # Skiff's own (SPEC FN1): one Fence per fenced node, with its state and reason.
    KindInfo("Fence", "skiff.io/v1", "fences", False, ("fence",)),
    # Skiff's own (controller testing): what the apiserver does to one client's view.
    KindInfo("Perturbation", "skiff.io/v1", "perturbations", False, ("pert",)),
    # Identity and access (SPEC AU3): RBAC, evaluated by the apiserver (skiff.auth).
    KindInfo("Role", "rbac.authorization.k8s.io/v1", "roles", True, (), has_status=False),
    KindInfo("ClusterRole", "rbac.authorization.k8s.io/v1", "clusterroles", False, (),
             has_status=False),
    KindInfo("RoleBinding", "rbac.authorization.k8s.io/v1", "rolebindings", True, (),
             has_status=False),
    KindInfo("ClusterRoleBinding", "rbac.authorization.k8s.io/v1", "clusterrolebindings",
             False, (), has_status=False),
    # SPEC AX3, AX4 (skiff.api.groups.core.config, core.volumes, storage).
    KindInfo("ServiceAccount", "v1", "serviceaccounts", True, ("sa",), has_status=False),
    KindInfo("PersistentVolume", "v1", "persistentvolumes", False, ("pv",)),
    KindInfo("StorageClass", "storage.k8s.io/v1", "storageclasses", False, ("sc",),
             has_status=False),
    # served empty: Skiff has no CSI drivers to report capacity (skiff.api.groups.storage)
    KindInfo("CSIStorageCapacity", "storage.k8s.io/v1", "csistoragecapacities", True, (),
             has_status=False),
    # the kinds real manifests bring; their rules are their API groups' (skiff.api.groups)
    KindInfo("Deployment", "apps/v1", "deployments", True, ("deploy",)),
    KindInfo("DaemonSet", "apps/v1", "daemonsets", True, ("ds",)),
    KindInfo("ControllerRevision", "apps/v1", "controllerrevisions", True, (),
             has_status=False),
    KindInfo("Job", "batch/v1", "jobs", True, ()),
    KindInfo("CronJob", "batch/v1", "cronjobs", True, ("cj",)),
    # autoscaling/v2 stored; autoscaling/v1 (what `kubectl autoscale` writes) converted.
    KindInfo("HorizontalPodAutoscaler", "autoscaling/v2", "horizontalpodautoscalers", True,
             ("hpa",), also_served=("autoscaling/v1",)),
    KindInfo("Service", "v1", "services", True, ("svc",)),
    KindInfo("EndpointSlice", "discovery.k8s.io/v1", "endpointslices", True, (),
             has_status=False),
    KindInfo("Endpoints", "v1", "endpoints", True, ("ep",), has_status=False),
    KindInfo("LimitRange", "v1", "limitranges", True, ("limits",), has_status=False),
    KindInfo("ResourceQuota", "v1", "resourcequotas", True, ("quota",)),
    KindInfo("Ingress", "networking.k8s.io/v1", "ingresses", True, ("ing",)),
    KindInfo("IngressClass", "networking.k8s.io/v1", "ingressclasses", False, (),
             has_status=False),
    KindInfo("NetworkPolicy", "networking.k8s.io/v1", "networkpolicies", True, ("netpol",),
             has_status=False),
    KindInfo("ConfigMap", "v1", "configmaps", True, ("cm",), has_status=False),
    # The extension API (SPEC EX1, EX6, EX7): CRDs, admission webhooks and policies.
    KindInfo("CustomResourceDefinition", "apiextensions.k8s.io/v1",
             "customresourcedefinitions", False, ("crd", "crds")),
    KindInfo("MutatingWebhookConfiguration", "admissionregistration.k8s.io/v1",
             "mutatingwebhookconfigurations", False, (), has_status=False),
    KindInfo("ValidatingWebhookConfiguration", "admissionregistration.k8s.io/v1",
             "validatingwebhookconfigurations", False, (), has_status=False),
    KindInfo("ValidatingAdmissionPolicy", "admissionregistration.k8s.io/v1",
             "validatingadmissionpolicies", False, ()),
    KindInfo("ValidatingAdmissionPolicyBinding", "admissionregistration.k8s.io/v1",
             "validatingadmissionpolicybindings", False, (), has_status=False),
    # The aggregation layer (SPEC EX8): an extension apiserver per group/version.
    KindInfo("APIService", "apiregistration.k8s.io/v1", "apiservices", False, ()),
    KindInfo("Secret", "v1", "secrets", True, (), has_status=False),
    # TLS bootstrapping (SPEC JN2): a certificate asked of a signer, approved, then issued.
    KindInfo("CertificateSigningRequest", "certificates.k8s.io/v1",
             "certificatesigningrequests", False, ("csr",)),
)

_BY_NAME: dict[str, KindInfo] = {}
for _info in KINDS:
    for _alias in (_info.kind.lower(), _info.resource, _info.resource.rstrip("s"),
                   *_info.short_names):
        _BY_NAME[_alias] = _info

# The custom resources this process serves now (SPEC EX1), by `ref`; the apiserver's
# CRD controller registers and removes them as CustomResourceDefinitions come and go.
_CUSTOM: dict[str, KindInfo] = {}
_CUSTOM_VERSIONS: dict[str, tuple[KindInfo, ...]] = {}  # by ref: the versions served
# Their unqualified names (kind, plural, singular, short names) where no built-in kind
# has the name and exactly one custom resource does, for `skiff get <name>`.
_CUSTOM_ALIASES: dict[str, KindInfo] = {}
_generation = 0


def register_custom(stored: KindInfo, served: list[KindInfo]) -> None:
    """Serve one custom resource, stored in `stored`'s version and served over HTTP in
    `served`'s, replacing what was registered under its `ref` before."""
    global _generation
    _CUSTOM[stored.ref] = stored
    _CUSTOM_VERSIONS[stored.ref] = tuple(served)
    _generation += 1
    _reindex_aliases()


def unregister_custom(ref: str) -> None:
    global _generation
    if _CUSTOM.pop(ref, None) is not None:
        _CUSTOM_VERSIONS.pop(ref, None)
        _generation += 1
        _reindex_aliases()



def _reindex_aliases() -> None:
    counts: dict[str, list[KindInfo]] = {}
    for info in _CUSTOM.values():
        for alias in {info.kind.lower(), info.resource, info.singular, *info.short_names}:
            counts.setdefault(alias, []).append(info)
    _CUSTOM_ALIASES.clear()
    _CUSTOM_ALIASES.update({alias: infos[0] for alias, infos in counts.items()
                            if len(infos) == 1 and alias not in _BY_NAME})


def kinds_generation() -> int:
    """A number that changes whenever the set of served kinds does (caches key on it)."""
    return _generation


def all_kinds() -> list[KindInfo]:
    """Every kind served now: the built-in ones, then the custom resources."""
    return [*KINDS, *_CUSTOM.values()]


def served_versions(info: KindInfo) -> list[KindInfo]:
    """`info` in every version the HTTP API serves it in, the stored one first."""
    if info.custom:
        return list(_CUSTOM_VERSIONS.get(info.ref, (info,)))
    return info.served()


def lookup_kind(api_version: str, kind: str) -> KindInfo:
    """The kind an object or an ownerReference names by apiVersion and kind (any served
    version of its group), built-in or custom; NotFound when none is served."""
    group = api_version.rpartition("/")[0]
    for info in all_kinds():
        if info.kind == kind and info.group == group:
            return info
    raise ApiError(Reason.NOT_FOUND, f'no kind "{kind}" is served in "{api_version}"')


def lookup(name: str) -> KindInfo:
    """Resolve a kind, resource, singular or short name (`Pod`, `pods`, `po`), or a custom
    resource's qualified name (`certificates.cert-manager.io`)."""
    lowered = name.lower()
    info = _BY_NAME.get(lowered) or _CUSTOM.get(lowered) or _CUSTOM_ALIASES.get(lowered)
    if info is None:
        known = ", ".join(k.resource for k in KINDS)
        raise ApiError(Reason.NOT_FOUND,
                       f'the server doesn\'t have a resource type "{name}" (known: {known})')
    return info


def by_resource(resource: str) -> KindInfo:
    return lookup(resource)


REGISTRY_PREFIX = "/registry/"


def _resource_prefix(info: KindInfo) -> str:
    if info.custom:
        return f"{REGISTRY_PREFIX}{info.group}/{info.resource}/"
    return f"{REGISTRY_PREFIX}{info.resource}/"


def storage_key(info: KindInfo, namespace: str | None, name: str) -> str:
    """`/registry/<resource>/<namespace>/<name>`, or without namespace when cluster-scoped
    (`/registry/<group>/<resource>/...` for a custom resource)."""
    if info.namespaced:
        return f"{_resource_prefix(info)}{namespace}/{name}"
    return f"{_resource_prefix(info)}{name}"


def storage_prefix(info: KindInfo, namespace: str | None = None) -> str:
    """The key prefix of one resource, or of one namespace of it."""
    if info.namespaced and namespace:
        return f"{_resource_prefix(info)}{namespace}/"
    return _resource_prefix(info)


def parse_key(key: str) -> tuple[KindInfo, str | None, str] | None:
    """Inverse of `storage_key`; None for keys that are not objects of a known kind."""
    if not key.startswith(REGISTRY_PREFIX):
        return None
    parts = key[len(REGISTRY_PREFIX):].split("/")
    if "." in parts[0] and len(parts) > 1:  # a custom resource's group (it has a dot)
        info = _CUSTOM.get(f"{parts[1]}.{parts[0]}")
        if info is None:
            return None
        parts = parts[1:]
    else:
        info = _BY_NAME.get(parts[0])
    if info is None or info.resource != parts[0]:
        return None
    if info.namespaced and len(parts) == 3:
        return info, parts[1], parts[2]
    if not info.namespaced and len(parts) == 2:
        return info, None, parts[1]
    return None
