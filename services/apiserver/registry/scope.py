"""The namespace a request reads or writes, decided once for the guard and the registry.

SPEC AU5: authorization covers exactly the scope a request reaches. Both the guard (what
is authorized) and the registry (what is read or written) turn a request's namespace into
its scope through `request_namespace`, so the two can never disagree. As in Kubernetes:

- a cluster-scoped kind has no namespace;
- a collection request (list, watch, deletecollection, PodMetrics) without a namespace is
  cluster-scoped: it reads every namespace and is authorized as such (`namespace=""` for
  the authorizer, so only a ClusterRoleBinding allows it);
- a request for one object without a namespace addresses `default` (the namespace kubectl
  and skiff.client fall back to); a write's body must then name the same namespace.

A namespace that is not a string (`0`, a list) is a 400 naming the field, never "no
namespace". `past_revision` says whether a read looks at history (SPEC AU5): such reads
need the authorization of a `list`.
"""

from __future__ import annotations

from typing import Any

from skiff.api import ApiError, FieldSelector, KindInfo

DEFAULT_NAMESPACE = "default"
# Verbs that read or act on a whole collection: without a namespace they span the cluster.
COLLECTION_VERBS = frozenset({"list", "watch", "deletecollection"})


def request_namespace(info: KindInfo, namespace: Any, *, collection: bool) -> str | None:
    """The namespace the request reaches; None when it is cluster-wide (a cluster-scoped
    kind, or a collection of every namespace). Raises 400 for a malformed namespace."""
    if namespace is not None and not isinstance(namespace, str):
        raise ApiError.bad_request(
            f"namespace: Invalid value: {_shown(namespace)}: must be a string")
    if namespace and ("/" in namespace or "%" in namespace or namespace in (".", "..")):
        raise ApiError.bad_request(
            f'namespace: Invalid value: "{namespace}": may not contain \'/\' or \'%\' and '
            "may not be '.' or '..'")
    if not info.namespaced:
        return None
    if namespace:
        return namespace
    return None if collection else DEFAULT_NAMESPACE


def authorized_namespace(scope: str | None) -> str:
    """The authorizer's namespace for a scope: "" (cluster-wide) for None."""
    return scope or ""


def past_revision(revision: Any) -> bool:
    """Whether a read asks for a past revision (a `revision` option other than 0/none).
    A malformed value counts as one; the registry then answers 400 for it."""
    return revision not in (None, "", 0, "0")


def selected_name(field_selector: str) -> str:
    """The one name a list or watch is narrowed to by `metadata.name=<name>`, which
    Kubernetes authorizes as a request for that name (RBAC `resourceNames`); else ""."""
    if "metadata.name" not in field_selector:
        return ""
    try:
        name = FieldSelector.parse(field_selector).exact("metadata.name")
    except ApiError:
        return ""  # the registry answers the malformed selector with its 400
    if not name or "/" in name or "%" in name or name in (".", ".."):
        return ""
    return name


def text_field(fields: dict[str, Any], field: str) -> str:
    """A string field of a request; absent is "", anything but a string a 400 naming it."""
    value = fields.get(field) or ""
    if not isinstance(value, str):
        raise ApiError.bad_request(f"{field}: must be a string")
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 64 else text[:61] + "..."
