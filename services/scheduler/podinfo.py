"""Pods and nodes parsed once into what scheduling reads, so a cycle over 5,000 nodes does
not re-parse quantities, labels or tolerations from dicts on every Filter call.

`PodInfo.from_pod` / `NodeFacts.from_node` never mutate the informer's dicts; they keep a
reference to them (`.pod`, `.node`) for writing back through the API.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from skiff.api import ApiError, LabelSelector, is_terminating, parse_quantity
from skiff.api.resources import Resource, pod_requests
from skiff.api.types import ObjView
from skiff.clock import parse_rfc3339

PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPT_NEVER = "Never"


@dataclass(slots=True, frozen=True, eq=False)
class AffinityTerm:
    """A parsed `podAffinityTerm` (Kubernetes' `framework.AffinityTerm`): it matches a pod
    in one of `namespaces` — or in a namespace whose labels `namespace_selector` matches —
    whose labels `selector` matches. `weight` is 0 for required terms."""

    namespaces: frozenset[str]
    selector: LabelSelector
    topology_key: str
    namespace_selector: LabelSelector
    weight: int = 0

    def matches(self, pod: PodInfo, namespace_labels: Mapping[str, str] | None) -> bool:
        if pod.namespace in self.namespaces or self.namespace_selector.matches(
                namespace_labels):
            return self.selector.matches(pod.labels)
        return False

    def with_namespaces(self, extra: frozenset[str]) -> AffinityTerm:
        """The namespaceSelector resolved into names (`mergeAffinityTermNamespaces`)."""
        return dataclasses.replace(self, namespaces=self.namespaces | extra,
                                   namespace_selector=LabelSelector.none())


def _selector(raw: Mapping[str, Any] | None) -> LabelSelector:
    try:
        return LabelSelector.from_dict(raw)
    except ApiError:
        return LabelSelector.none()  # the apiserver validates; never match on garbage


def _affinity_term(namespace: str, labels: Mapping[str, str], term: Mapping[str, Any],
                   weight: int = 0) -> AffinityTerm:
    """Kubernetes' `newAffinityTerm`. No namespaces and no namespaceSelector means the
    pod's own namespace; matchLabelKeys / mismatchLabelKeys add `key in (value)` /
    `key notin (value)` of the pod's own labels to the selector, as the apiserver does
    at creation (doing it twice changes nothing)."""
    raw_selector = term.get("labelSelector")
    match_keys = [k for k in term.get("matchLabelKeys") or () if k in labels]
    mismatch_keys = [k for k in term.get("mismatchLabelKeys") or () if k in labels]
    if raw_selector is not None and (match_keys or mismatch_keys):
        expressions = list(raw_selector.get("matchExpressions") or [])
        expressions += [{"key": k, "operator": "In", "values": [labels[k]]}
                        for k in match_keys]
        expressions += [{"key": k, "operator": "NotIn", "values": [labels[k]]}
                        for k in mismatch_keys]
        raw_selector = {**raw_selector, "matchExpressions": expressions}
    namespaces = term.get("namespaces") or []
    raw_ns_selector = term.get("namespaceSelector")
    if not namespaces and raw_ns_selector is None:
        namespaces = [namespace]
    return AffinityTerm(frozenset(str(n) for n in namespaces), _selector(raw_selector),
                        str(term.get("topologyKey") or ""), _selector(raw_ns_selector),
                        weight)


AffinityTerms = tuple[AffinityTerm, ...]
_NO_TERMS: AffinityTerms = ()


def _pod_affinity_terms(namespace: str, labels: Mapping[str, str], affinity: Mapping[str, Any]
                        ) -> tuple[AffinityTerms, AffinityTerms, AffinityTerms, AffinityTerms]:
    """(required affinity, required anti-affinity, preferred affinity, preferred
    anti-affinity) terms of a pod."""
    out: list[AffinityTerms] = []
    for kind in ("podAffinity", "podAntiAffinity"):
        section = affinity.get(kind) or {}
        out.append(tuple(_affinity_term(namespace, labels, t) for t in
                         section.get("requiredDuringSchedulingIgnoredDuringExecution") or ()))
    for kind in ("podAffinity", "podAntiAffinity"):
        section = affinity.get(kind) or {}
        out.append(tuple(
            _affinity_term(namespace, labels, w.get("podAffinityTerm") or {},
                           int(w.get("weight") or 0))
            for w in section.get("preferredDuringSchedulingIgnoredDuringExecution") or ()))
    return out[0], out[1], out[2], out[3]


@dataclass(slots=True, frozen=True)
class HostPort:
    """A container port bound on the node: (hostIP, protocol, hostPort)."""

    ip: str
    protocol: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        """Kubernetes' `HostPortInfo`: same protocol and port, and the same IP or either
        on every address (0.0.0.0)."""
        return (self.port == other.port and self.protocol == other.protocol
                and (self.ip == other.ip or DEFAULT_BIND_ALL_HOST_IP in (self.ip, other.ip)))


DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"


def _host_ports(spec: ObjView) -> tuple[HostPort, ...]:
    """Kubernetes' `getContainerPorts`: the app containers' ports with a hostPort (for a
    hostNetwork pod the containerPort, as the API defaults hostPort to it)."""
    host_network = bool(spec.get("hostNetwork"))
    out = []
    for container in spec.get("containers") or ():
        for port in container.get("ports") or ():
            number = int(port.get("hostPort") or 0)
            if number <= 0 and host_network:
                number = int(port.get("containerPort") or 0)
            if number > 0:
                out.append(HostPort(str(port.get("hostIP") or DEFAULT_BIND_ALL_HOST_IP),
                                    str(port.get("protocol") or "TCP"), number))
    return tuple(out)


@dataclass(slots=True, eq=False)
class PodInfo:
    """One version of a pod, parsed. `pod` is the informer's dict: never mutate it."""

    pod: ObjView
    key: str
    uid: str
    namespace: str
    name: str
    labels: Mapping[str, str]
    label_set: frozenset[tuple[str, str]]
    priority: int
    preemption_policy: str
    requests: Resource
    non_zero_requests: Resource
    node_name: str
    nominated_node_name: str
    terminating: bool
    start_time: float | None
    creation_time: float
    scheduler_name: str
    scheduling_gates: tuple[str, ...]
    tolerations: tuple[Mapping[str, Any], ...]
    node_selector: Mapping[str, str]
    affinity: Mapping[str, Any]
    spread_constraints: tuple[Mapping[str, Any], ...]
    controller_ref: Mapping[str, Any] | None
    extra: dict[str, Any] = field(default_factory=dict)
    required_affinity_terms: AffinityTerms = _NO_TERMS
    required_anti_affinity_terms: AffinityTerms = _NO_TERMS
    preferred_affinity_terms: AffinityTerms = _NO_TERMS
    preferred_anti_affinity_terms: AffinityTerms = _NO_TERMS
    host_ports: tuple[HostPort, ...] = ()
    pvc_names: tuple[str, ...] = ()  # `persistentVolumeClaim.claimName` of its volumes

    @property
    def has_pod_affinity(self) -> bool:
        """Any pod (anti-)affinity at all (Kubernetes' `PodsWithAffinity`)."""
        return bool(self.required_affinity_terms or self.required_anti_affinity_terms
                    or self.preferred_affinity_terms or self.preferred_anti_affinity_terms)

    @classmethod
    def from_pod(cls, pod: ObjView) -> PodInfo:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        status = pod.get("status") or {}
        labels = meta.get("labels") or {}
        requests, non_zero = pod_requests(spec)
        start = status.get("startTime")
        created = meta.get("creationTimestamp")
        controller = next((ref for ref in meta.get("ownerReferences") or []
                           if ref.get("controller")), None)
        namespace = str(meta.get("namespace") or "default")
        name = str(meta.get("name") or "")
        affinity = spec.get("affinity") or {}
        terms = (_pod_affinity_terms(namespace, labels, affinity)
                 if "podAffinity" in affinity or "podAntiAffinity" in affinity
                 else (_NO_TERMS, _NO_TERMS, _NO_TERMS, _NO_TERMS))
        return cls(
            pod=pod, key=f"{namespace}/{name}", uid=str(meta.get("uid") or ""),
            namespace=namespace, name=name, labels=labels,
            label_set=frozenset(labels.items()),
            priority=int(spec.get("priority") or 0),
            preemption_policy=str(spec.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY),
            requests=requests, non_zero_requests=non_zero,
            node_name=str(spec.get("nodeName") or ""),
            nominated_node_name=str(status.get("nominatedNodeName") or ""),
            terminating=is_terminating(pod),
            start_time=parse_rfc3339(start) if start else None,
            creation_time=parse_rfc3339(created) if created else 0.0,
            scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
            scheduling_gates=tuple(str(g.get("name", "")) for g in
                                   spec.get("schedulingGates") or []),
            tolerations=tuple(spec.get("tolerations") or ()),
            node_selector=spec.get("nodeSelector") or {},
            affinity=affinity,
            spread_constraints=tuple(spec.get("topologySpreadConstraints") or ()),
            controller_ref=controller,
            required_affinity_terms=terms[0], required_anti_affinity_terms=terms[1],
            preferred_affinity_terms=terms[2], preferred_anti_affinity_terms=terms[3],
            host_ports=_host_ports(spec),
            pvc_names=tuple(str(v["persistentVolumeClaim"].get("claimName") or "")
                            for v in spec.get("volumes") or ()
                            if isinstance(v.get("persistentVolumeClaim"), dict)),
        )

    def with_node(self, node_name: str) -> PodInfo:
        """A copy assumed onto `node_name` (the scheduler's own view until bound)."""
        meta = dict(self.pod.get("metadata") or {})
        spec = dict(self.pod.get("spec") or {})
        spec["nodeName"] = node_name
        # Everything parsed stays the same but the node: no re-parsing of quantities.
        return dataclasses.replace(self, pod={**self.pod, "metadata": meta, "spec": spec},
                                   node_name=node_name, extra={})


@dataclass(slots=True, frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(slots=True, eq=False)
class NodeFacts:
    """One version of a node, parsed. `node` is the informer's dict: never mutate it."""

    node: ObjView
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    allocatable: Resource
    allowed_pod_number: int
    # image name (normalized with a tag) → size in bytes, from `status.images`
    images: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_node(cls, node: ObjView) -> NodeFacts:
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        alloc = status.get("allocatable") or status.get("capacity") or {}
        return cls(
            node=node, name=str(meta.get("name") or ""), labels=meta.get("labels") or {},
            taints=tuple(Taint(str(t.get("key", "")), str(t.get("value") or ""),
                               str(t.get("effect", ""))) for t in spec.get("taints") or []),
            unschedulable=bool(spec.get("unschedulable")),
            allocatable=Resource.from_list(alloc),
            allowed_pod_number=int(parse_quantity(alloc["pods"])) if "pods" in alloc else 0,
            images=_node_images(status.get("images") or ()),
        )


def normalized_image_name(name: str) -> str:
    """Kubernetes' `normalizedImageName`: an untagged image is `:latest`."""
    if name.rfind(":") <= name.rfind("/"):
        name += ":latest"
    return name


def _node_images(images: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for image in images:
        size = int(image.get("sizeBytes") or 0)
        for name in image.get("names") or ():
            out[normalized_image_name(str(name))] = size
    return out
