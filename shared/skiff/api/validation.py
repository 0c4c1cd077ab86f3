"""Object validation with Kubernetes' rules and field paths (SPEC AS7, LC7, PP1, PS2).

The apiserver calls `validate(obj, old=...)` after defaulting and before anything is
stored; an empty list means the object may be written. This module checks what every kind
shares (its apiVersion, its metadata) and hands the rest to the kind's API group
(`skiff.api.groups`), whose checks follow the matching function of `pkg/apis/*/validation`
so that a user sees the same `spec.containers[0].name: Required value` they would from
Kubernetes.
"""

from __future__ import annotations

from skiff.api.catalog import VALIDATORS
from skiff.api.errors import FieldError, not_supported
from skiff.api.fieldchecks import MAX_GRACE_SECONDS, grace_period_problem, revision_problem
from skiff.api.groups.apiregistration import path_segment_name_problems
from skiff.api.groups.core.pods import validate_ephemeral_containers_update
from skiff.api.groups.core.podspec import MAX_DNS_NAMESERVERS, MAX_DNS_SEARCH_PATHS
from skiff.api.kinds import KINDS
from skiff.api.objectmeta import validate_metadata, validate_metadata_update
from skiff.api.selectors import dns1123_label_problems, dns1123_subdomain_problems
from skiff.api.types import ObjView

# the limits and checks other packages apply to requests before any object exists
__all__ = ["MAX_DNS_NAMESERVERS", "MAX_DNS_SEARCH_PATHS", "MAX_GRACE_SECONDS",
           "grace_period_problem", "revision_problem", "validate",
           "validate_ephemeral_containers_update"]

_KIND_INFO = {info.kind: info for info in KINDS}
# kinds whose names are not DNS subdomains: APIServices only need a URL path segment
# (`v1.`), as kube-aggregator's name check
# Names checked otherwise than as DNS subdomains: RBAC's (`system:controller:x`) and an
# APIService's (`v1.`) need only be path segments, as in Kubernetes (ValidateRBACName).
_NAME_CHECKS = {"Namespace": dns1123_label_problems,
                "APIService": path_segment_name_problems,
                **dict.fromkeys(("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"),
                                path_segment_name_problems)}


def validate(obj: ObjView, *, old: ObjView | None = None) -> list[FieldError]:
    """All field errors of `obj` (a create when `old` is None, else an update of `old`)."""
    kind = obj.get("kind")
    info = _KIND_INFO.get(kind) if isinstance(kind, str) else None
    if info is None:
        return [not_supported("kind", kind, sorted(_KIND_INFO))]
    errors: list[FieldError] = []
    api_version = obj.get("apiVersion")
    if api_version is not None and api_version != info.api_version:
        errors.append(not_supported("apiVersion", api_version, [info.api_version]))
    name_check = _NAME_CHECKS.get(info.kind, dns1123_subdomain_problems)
    errors += validate_metadata(obj, info.kind, "metadata", namespaced=info.namespaced,
                                name_check=name_check)
    if old is not None:
        errors += validate_metadata_update(obj, old)
    errors += VALIDATORS[info.kind](obj, old)
    return errors
