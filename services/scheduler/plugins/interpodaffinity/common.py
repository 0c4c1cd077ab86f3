"""What InterPodAffinity's filter and score share: its args, the namespace lister seam
and resolving an incoming pod's namespaceSelector into namespace names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from skiff.api import LabelSelector
from skiff.scheduler.podinfo import AffinityTerm, AffinityTerms

NAME = "InterPodAffinity"


class NamespaceLister(Protocol):
    """Namespaces' labels, for namespaceSelector (the scheduler's namespace informer)."""

    def namespace_labels(self, name: str) -> Mapping[str, str] | None: ...

    def namespaces_matching(self, selector: LabelSelector) -> frozenset[str]: ...


@dataclass(frozen=True)
class InterPodAffinityArgs:
    """pluginConfig args: `hardPodAffinityWeight` (0–100, default 1) and
    `ignorePreferredTermsOfExistingPods` (default false)."""

    hard_pod_affinity_weight: int = 1
    ignore_preferred_terms_of_existing_pods: bool = False

    @classmethod
    def from_dict(cls, args: Mapping[str, Any] | None) -> InterPodAffinityArgs:
        args = args or {}
        weight = int(args.get("hardPodAffinityWeight", 1))
        if not 0 <= weight <= 100:
            raise ValueError(f"InterPodAffinity args: hardPodAffinityWeight: Invalid value: "
                             f"{weight}: not in valid range [0-100]")
        return cls(weight, bool(args.get("ignorePreferredTermsOfExistingPods", False)))


def namespace_labels(lister: NamespaceLister | None, name: str) -> Mapping[str, str]:
    """Kubernetes' `GetNamespaceLabelsSnapshot`: the labels, or none when unknown."""
    if lister is None:
        return {}
    return lister.namespace_labels(name) or {}


def merge_namespaces(terms: AffinityTerms, lister: NamespaceLister | None) -> AffinityTerms:
    """Kubernetes' `mergeAffinityTermNamespacesIfNotEmpty` for the incoming pod's terms: a
    non-empty namespaceSelector becomes the names of the namespaces it matches; an empty
    one (`{}`) stays and matches every namespace."""
    out: list[AffinityTerm] = []
    for term in terms:
        selector = term.namespace_selector
        if selector.empty or selector.nothing:
            out.append(term)
            continue
        names = lister.namespaces_matching(selector) if lister is not None else frozenset()
        out.append(term.with_namespaces(names))
    return tuple(out)
