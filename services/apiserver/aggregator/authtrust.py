"""How extension apiservers learn to trust this apiserver's front proxy (kube's
cluster-authentication-trust controller): the ConfigMap
`kube-system/extension-apiserver-authentication` holds the client CA (`--client-ca-file`)
and, when `--requestheader-client-ca-file` is given, the front-proxy CA with the
`--requestheader-*` settings (header names and allowed common names as JSON string lists),
which metrics-server and every apiserver built on k8s.io/apiserver read at start. The
Role kube bootstraps beside it, `kube-system/extension-apiserver-authentication-reader`
(read that one ConfigMap), is made too: extension apiservers' manifests bind their
ServiceAccount to it.

Each apiserver writes what it was started with (kube merges several apiservers' values;
Skiff's apiservers of one cluster share one configuration, so the last writer's is
everyone's).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.apiserver.registry.store import Registry

NAMESPACE, NAME = "kube-system", "extension-apiserver-authentication"
READER_ROLE: Obj = {
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
    "metadata": {"name": "extension-apiserver-authentication-reader", "namespace": NAMESPACE,
                 "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                 "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
    "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"],
               "resourceNames": [NAME]}]}


@dataclass(frozen=True)
class AuthenticationTrust:
    """The settings published (file paths as given on the command line; "" for none)."""

    client_ca_file: str = ""
    requestheader_client_ca_file: str = ""
    requestheader_allowed_names: tuple[str, ...] = ()
    requestheader_username_headers: tuple[str, ...] = ()
    requestheader_group_headers: tuple[str, ...] = ()
    requestheader_extra_headers_prefix: tuple[str, ...] = ()


def comma_list(value: str) -> tuple[str, ...]:
    """A comma-separated setting as a list (kube's string-slice flags)."""
    return tuple(part.strip() for part in value.split(",") if part.strip())


def configmap_data(trust: AuthenticationTrust) -> dict[str, str]:
    """The ConfigMap's data, as kube writes it."""
    data: dict[str, str] = {}
    if trust.client_ca_file:
        data["client-ca-file"] = Path(trust.client_ca_file).read_text()
    if not trust.requestheader_client_ca_file:
        return data
    data.update({
        "requestheader-username-headers": json.dumps(
            list(trust.requestheader_username_headers), separators=(",", ":")),
        "requestheader-uid-headers": "[]",
        "requestheader-group-headers": json.dumps(
            list(trust.requestheader_group_headers), separators=(",", ":")),
        "requestheader-extra-headers-prefix": json.dumps(
            list(trust.requestheader_extra_headers_prefix), separators=(",", ":")),
        "requestheader-client-ca-file": Path(trust.requestheader_client_ca_file).read_text(),
        "requestheader-allowed-names": json.dumps(
            list(trust.requestheader_allowed_names), separators=(",", ":")),
    })
    return data


async def publish(registry: Registry, trust: AuthenticationTrust) -> None:
    """Make the reader Role, and write the ConfigMap unless it already says the same."""
    await registry.ensure(READER_ROLE)
    data = configmap_data(trust)
    if not data:
        return
    current = await registry.get_or_none("configmaps", NAMESPACE, NAME)
    if current is None:
        body: Obj = {"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": NAME, "namespace": NAMESPACE}, "data": data}
        try:
            await registry.create("configmaps", NAMESPACE, body)
        except ApiError as err:
            if err.reason != Reason.ALREADY_EXISTS:
                raise
        return
    if current.get("data") == data:
        return
    await registry.update("configmaps", NAMESPACE, {**current, "data": data})
