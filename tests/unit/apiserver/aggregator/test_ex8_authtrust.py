"""SPEC EX8: the trust extension apiservers read from
`kube-system/extension-apiserver-authentication`, in kube's keys and encodings (CA bundles
as PEM, header lists as JSON), and the Role that lets them read it."""

from __future__ import annotations

from pathlib import Path

from skiff.apiserver.aggregator import AuthenticationTrust, comma_list
from skiff.apiserver.aggregator.authtrust import NAME, NAMESPACE, configmap_data, publish
from skiff.apiserver.registry.store import Registry, RegistryConfig
from skiff.apiserver.storage.memory import MemoryStorage
from skiff.apiserver.storage.watchcache import WatchCache

CLIENT_CA = "-----BEGIN CERTIFICATE-----\nclient\n-----END CERTIFICATE-----\n"
PROXY_CA = "-----BEGIN CERTIFICATE-----\nproxy\n-----END CERTIFICATE-----\n"


def _trust(tmp_path: Path, *, front_proxy: bool = True) -> AuthenticationTrust:
    (tmp_path / "ca.crt").write_text(CLIENT_CA)
    (tmp_path / "front-proxy-ca.crt").write_text(PROXY_CA)
    return AuthenticationTrust(
        client_ca_file=str(tmp_path / "ca.crt"),
        requestheader_client_ca_file=str(tmp_path / "front-proxy-ca.crt") if front_proxy
        else "",
        requestheader_allowed_names=comma_list("front-proxy-client, aggregator"),
        requestheader_username_headers=comma_list("X-Remote-User"),
        requestheader_group_headers=comma_list("X-Remote-Group"),
        requestheader_extra_headers_prefix=comma_list("X-Remote-Extra-"))


def test_ex8_the_front_proxy_trust_is_written_in_kubes_keys(tmp_path: Path) -> None:
    assert configmap_data(_trust(tmp_path)) == {
        "client-ca-file": CLIENT_CA,
        "requestheader-client-ca-file": PROXY_CA,
        "requestheader-allowed-names": '["front-proxy-client","aggregator"]',
        "requestheader-username-headers": '["X-Remote-User"]',
        "requestheader-uid-headers": "[]",
        "requestheader-group-headers": '["X-Remote-Group"]',
        "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]'}


def test_ex8_without_a_front_proxy_ca_only_the_client_ca_is_published(
        tmp_path: Path) -> None:
    assert configmap_data(_trust(tmp_path, front_proxy=False)) == {
        "client-ca-file": CLIENT_CA}


async def test_ex8_publishing_is_idempotent_and_follows_changed_settings(
        tmp_path: Path) -> None:
    store = MemoryStorage()
    registry = Registry(store, WatchCache(store), config=RegistryConfig(pod_security=None))
    await registry.create("namespaces", None, {"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": NAMESPACE}})
    trust = _trust(tmp_path)
    await publish(registry, trust)
    first = await registry.get("configmaps", NAMESPACE, NAME)
    await publish(registry, trust)
    again = await registry.get("configmaps", NAMESPACE, NAME)
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    await publish(registry, _trust(tmp_path, front_proxy=False))
    changed = await registry.get("configmaps", NAMESPACE, NAME)
    assert changed["data"] == {"client-ca-file": CLIENT_CA}
    role = await registry.get("roles", NAMESPACE, "extension-apiserver-authentication-reader")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"],
                              "verbs": ["get", "list", "watch"], "resourceNames": [NAME]}]
