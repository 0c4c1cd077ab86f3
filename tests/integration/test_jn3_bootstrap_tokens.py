"""SPEC JN3 on a real `skiff up --detach --nodes 0` cluster: `skiff token create|list|delete`,
the bootstrap token authenticator (the real kubectl with `--token`), the tokencleaner, and
the signed `cluster-info` read without credentials over the real TLS front."""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from skiff.bootstraptoken import generate_token, parse_token, verify_detached
from tests.integration.skiffcli import skiff, skiff_up

pytestmark = pytest.mark.integration

CLUSTER_INFO = "/api/v1/namespaces/kube-public/configmaps/cluster-info"


# cluster-info as an anonymous client saw it right after `skiff up`, before any token
AT_UP: dict[str, tuple[int, dict[str, object]]] = {}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with skiff_up(tmp_path_factory.mktemp("jn3"), nodes=0) as data_dir:
        AT_UP["cluster-info"] = _anonymous_get(data_dir, CLUSTER_INFO)
        yield data_dir


def _server(data_dir: Path) -> str:
    config = json.loads((data_dir / "kubeconfig").read_text())
    return str(config["clusters"][0]["cluster"]["server"])


def _create(data_dir: Path, *args: str) -> str:
    made = skiff(data_dir, "token", "create", *args)
    assert made.returncode == 0, made.stderr + made.stdout
    return made.stdout.strip()


def _as_token(data_dir: Path, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The real kubectl with only the server, the CA and `--token`."""
    return subprocess.run(["kubectl", "--kubeconfig", "/dev/null", "--server",
                           _server(data_dir), "--certificate-authority",
                           str(data_dir / "pki" / "ca.crt"), "--token", token, *args],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def _admin(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", str(data_dir / "kubeconfig"), *args],
                          capture_output=True, text=True, timeout=60)


def _anonymous_get(data_dir: Path, path: str) -> tuple[int, dict[str, object]]:
    context = ssl.create_default_context(cafile=str(data_dir / "pki" / "ca.crt"))
    try:
        with urllib.request.urlopen(_server(data_dir) + path, context=context,
                                    timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_jn3_token_authenticates_as_bootstrap_user_until_deleted(data_dir: Path) -> None:
    token = parse_token(_create(data_dir))
    whoami = _as_token(data_dir, str(token), "auth", "whoami", "-o", "json")
    assert whoami.returncode == 0, whoami.stderr
    user = json.loads(whoami.stdout)["status"]["userInfo"]
    assert user["username"] == f"system:bootstrap:{token.id}"
    assert user["groups"] == ["system:bootstrappers",
                              "system:bootstrappers:skiff:default-node-token",
                              "system:authenticated"]
    refused = _as_token(data_dir, str(token), "get", "pods")
    assert f'User "system:bootstrap:{token.id}" cannot list resource "pods"' in refused.stderr

    wrong = _as_token(data_dir, f"{token.id}.{'0' * 16}", "auth", "whoami")
    assert wrong.returncode != 0 and "Unauthorized" in wrong.stderr

    listed = skiff(data_dir, "token", "list")
    assert listed.returncode == 0 and str(token) in listed.stdout
    deleted = skiff(data_dir, "token", "delete", token.id)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.strip() == f'bootstrap token "{token.id}" deleted'
    assert str(token) not in skiff(data_dir, "token", "list").stdout
    gone = _as_token(data_dir, str(token), "auth", "whoami")
    assert gone.returncode != 0 and "Unauthorized" in gone.stderr
    again = skiff(data_dir, "token", "delete", token.id)
    assert again.returncode == 1 and "not found" in again.stderr


def test_jn3_authentication_usage_and_groups_come_from_the_secret(data_dir: Path) -> None:
    signing_only = parse_token(_create(data_dir, "--usages", "signing"))
    refused = _as_token(data_dir, str(signing_only), "auth", "whoami")
    assert refused.returncode != 0 and "Unauthorized" in refused.stderr
    grouped = parse_token(_create(data_dir, "--groups", "system:bootstrappers:a,"
                                                        "system:bootstrappers:b"))
    whoami = _as_token(data_dir, str(grouped), "auth", "whoami", "-o", "json")
    assert json.loads(whoami.stdout)["status"]["userInfo"]["groups"] == [
        "system:bootstrappers", "system:bootstrappers:a", "system:bootstrappers:b",
        "system:authenticated"]
    bad = skiff(data_dir, "token", "create", "--groups", "system:masters")
    assert bad.returncode == 1
    assert "bootstrap group 'system:masters' is invalid" in bad.stderr


def test_jn3_expired_token_is_cleaned_and_refused(data_dir: Path) -> None:
    token = parse_token(_create(data_dir, "--ttl", "4s"))
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        got = _admin(data_dir, "get", "secret", "-n", "kube-system",
                     f"bootstrap-token-{token.id}")
        if got.returncode != 0:
            break
        time.sleep(0.5)
    assert "NotFound" in got.stderr, "the tokencleaner did not delete the expired token"
    refused = _as_token(data_dir, str(token), "auth", "whoami")
    assert refused.returncode != 0 and "Unauthorized" in refused.stderr


def test_jn3_cluster_info_is_anonymous_and_signed_per_token(data_dir: Path) -> None:
    token = parse_token(_create(data_dir))
    deadline = time.monotonic() + 30
    data: dict[str, str] = {}
    while time.monotonic() < deadline:
        status, body = _anonymous_get(data_dir, CLUSTER_INFO)
        assert status == 200, body
        data = body["data"]  # type: ignore[assignment]
        if f"jws-kubeconfig-{token.id}" in data:
            break
        time.sleep(0.5)
    signature = data[f"jws-kubeconfig-{token.id}"]
    kubeconfig = data["kubeconfig"]
    assert verify_detached(signature, kubeconfig, token)
    assert not verify_detached(signature, kubeconfig, generate_token())
    assert not verify_detached(signature, kubeconfig + "\n", token)
    cluster = yaml.safe_load(kubeconfig)["clusters"][0]["cluster"]
    assert cluster["server"] == _server(data_dir)
    import base64

    assert base64.b64decode(cluster["certificate-authority-data"]) == \
        (data_dir / "pki" / "ca.crt").read_bytes()
    # only cluster-info: the rest of kube-public still needs credentials
    status, _ = _anonymous_get(data_dir, "/api/v1/namespaces/kube-public/configmaps")
    assert status == 401
    status, _ = _anonymous_get(data_dir,
                               "/api/v1/namespaces/kube-public/configmaps/kube-root-ca.crt")
    assert status == 401


def test_jn3_print_join_command_pins_the_ca(data_dir: Path) -> None:
    line = _create(data_dir, "--print-join-command", "--ttl", "1h")
    match = re.fullmatch(r"skiff join (\S+) --token (\S+) "
                         r"--discovery-token-ca-cert-hash sha256:([0-9a-f]{64})", line)
    assert match is not None, line
    parse_token(match.group(2))
    ca = data_dir / "pki" / "ca.crt"
    openssl = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"openssl x509 -pubkey -noout -in {ca} | "
                                         "openssl pkey -pubin -outform der | sha256sum"],
        capture_output=True, text=True, check=True)
    assert match.group(3) == openssl.stdout.split()[0]
    state = skiff(data_dir, "status")
    assert match.group(1) in state.stdout


def test_jn3_skiff_up_publishes_cluster_info_before_any_token(data_dir: Path) -> None:
    status, body = AT_UP["cluster-info"]
    assert status == 200, body
    data = body["data"]
    assert isinstance(data, dict)
    assert not [k for k in data if k.startswith("jws-kubeconfig-")]
    cluster = yaml.safe_load(data["kubeconfig"])["clusters"][0]["cluster"]
    assert cluster["server"] == _server(data_dir)
