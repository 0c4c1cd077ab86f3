"""SPEC EX6: admission webhooks end to end — the real `kubectl` creates Mutating and
Validating webhook configurations from YAML against a real apiserver and etcd, and the
apiserver calls a real HTTPS webhook server started here (its certificate signed by a test
CA, trusted through the configuration's `caBundle` only): one webhook labels objects with a
JSON patch, one refuses them, each failurePolicy against a webhook that is down, a
timeout, a certificate from another CA, a dry run. Each test selects its own namespace
(namespaceSelector), so the configurations of one test never touch another's objects."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skiff.cluster.processes import free_port
from skiff.pki import CertificateAuthority
from tests.integration.kubectl import http_front, kubectl
from tests.integration.webhookserver import SEEN_LABEL, WebhookServer


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, WebhookServer]]:
    root = tmp_path_factory.mktemp("webhooks")
    server = WebhookServer(root).start()
    try:
        with http_front(root / "cluster") as (_, _, config):
            yield config, server
    finally:
        server.stop()


def _ok(config: Path, *args: str, stdin: str | None = None) -> str:
    done = kubectl(config, *args, stdin=stdin)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _namespace(config: Path, name: str) -> None:
    _ok(config, "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {"webhook-test": name}}}))


def _webhook(name: str, namespace: str, *, url: str, ca_bundle: str, extra: str = "") -> str:
    """One webhook as a user writes it: YAML, with v1's required fields only."""
    return f"""
- name: {name}.skiff.test
  admissionReviewVersions: ["v1"]
  sideEffects: None
  clientConfig:
    url: {url}
    caBundle: {ca_bundle}
  namespaceSelector:
    matchLabels:
      webhook-test: {namespace}
  rules:
  - operations: ["CREATE"]
    apiGroups: [""]
    apiVersions: ["v1"]
    resources: ["configmaps"]
{extra}"""


def _configuration(kind: str, name: str, namespace: str, *, url: str, ca_bundle: str,
                   extra: str = "", more: str = "") -> str:
    return f"""
apiVersion: admissionregistration.k8s.io/v1
kind: {kind}
metadata:
  name: {name}
webhooks:{_webhook(name, namespace, url=url, ca_bundle=ca_bundle, extra=extra)}{more}"""


def _until_called(server: WebhookServer, path: str, config: Path, namespace: str) -> None:
    """A configuration applies to requests within about a second (the apiserver reads it
    from its watch-fed copy): dry-run creates until the webhook is first called."""
    deadline = time.monotonic() + 5
    while not any(r["path"] == path and r.get("namespace") == namespace
                  for r in server.requests):
        assert time.monotonic() < deadline, f"{path} never called"
        kubectl(config, "create", "configmap", "probe", "-n", namespace, "--dry-run=server")
        time.sleep(0.1)


def test_ex6_kubectl_creates_a_mutating_webhook_that_labels_objects(
        front: tuple[Path, WebhookServer]) -> None:
    config, server = front
    _namespace(config, "ex6-mutate")
    _ok(config, "apply", "-f", "-", stdin=_configuration(
        "MutatingWebhookConfiguration", "label", "ex6-mutate", url=server.url("/label"),
        ca_bundle=server.ca_bundle))
    stored = json.loads(_ok(config, "get", "mutatingwebhookconfiguration", "label",
                            "-o", "json"))["webhooks"][0]
    assert (stored["failurePolicy"], stored["timeoutSeconds"], stored["matchPolicy"],
            stored["reinvocationPolicy"]) == ("Fail", 10, "Equivalent", "Never")
    _until_called(server, "/label", config, "ex6-mutate")
    created = kubectl(config, "create", "configmap", "web", "-n", "ex6-mutate",
                      "--from-literal=k=v")
    assert created.returncode == 0, created.stderr
    assert "labelled by the test webhook" in created.stderr  # the webhook's warning
    labels = json.loads(_ok(config, "get", "configmap", "web", "-n", "ex6-mutate",
                            "-o", "json"))["metadata"]["labels"]
    assert labels == {SEEN_LABEL: "yes"}
    sent = [r for r in server.requests if r.get("name") == "web"][-1]
    assert sent["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert sent["operation"] == "CREATE" and sent["dryRun"] is False
    assert sent["query"] == {"timeout": "10s"}


def test_ex6_a_validating_webhook_refuses_with_its_message(
        front: tuple[Path, WebhookServer]) -> None:
    config, server = front
    _namespace(config, "ex6-deny")
    _ok(config, "apply", "-f", "-", stdin=_configuration(
        "ValidatingWebhookConfiguration", "deny", "ex6-deny", url=server.url("/deny"),
        ca_bundle=server.ca_bundle))
    _until_called(server, "/deny", config, "ex6-deny")
    refused = kubectl(config, "create", "configmap", "refused-one", "-n", "ex6-deny")
    assert refused.returncode != 0
    assert ('admission webhook "deny.skiff.test" denied the request: objects named '
            "refused-* are not welcome") in refused.stderr
    _ok(config, "create", "configmap", "welcome", "-n", "ex6-deny")
    # deleting the configuration lifts the refusal within about a second
    _ok(config, "delete", "validatingwebhookconfiguration", "deny")
    deadline = time.monotonic() + 3
    while kubectl(config, "create", "configmap", "refused-two", "-n",
                  "ex6-deny").returncode != 0:
        assert time.monotonic() < deadline
        time.sleep(0.1)


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
def test_ex6_failure_policy_against_a_webhook_that_is_down(
        front: tuple[Path, WebhookServer], policy: str) -> None:
    """A second, working webhook of the same configuration shows when the configuration
    is in effect; from then on the one that is down refuses (Fail) or is passed over
    (Ignore)."""
    config, server = front
    namespace = f"ex6-down-{policy.lower()}"
    _namespace(config, namespace)
    port = free_port()  # nothing listens there
    _ok(config, "apply", "-f", "-", stdin=_configuration(
        "ValidatingWebhookConfiguration", f"down-{policy.lower()}", namespace,
        url=f"https://127.0.0.1:{port}/check", ca_bundle=server.ca_bundle,
        extra=f"  failurePolicy: {policy}\n",
        more=_webhook(f"witness-{policy.lower()}", namespace, url=server.url("/deny"),
                      ca_bundle=server.ca_bundle)))
    _until_called(server, "/deny", config, namespace)
    done = kubectl(config, "create", "configmap", "c", "-n", namespace)
    if policy == "Ignore":
        assert done.returncode == 0, done.stderr
        return
    assert done.returncode != 0
    assert (f'Internal error occurred: failed calling webhook "down-fail.skiff.test": failed '
            f'to call webhook: Post "https://127.0.0.1:{port}/check?timeout=10s": dial tcp '
            f"127.0.0.1:{port}: connect: connection refused") in done.stderr
    assert "Traceback" not in done.stderr


def test_ex6_timeout_seconds_bounds_the_call(front: tuple[Path, WebhookServer]) -> None:
    config, server = front
    _namespace(config, "ex6-slow")
    _ok(config, "apply", "-f", "-", stdin=_configuration(
        "ValidatingWebhookConfiguration", "slow", "ex6-slow", url=server.url("/slow"),
        ca_bundle=server.ca_bundle, extra="  timeoutSeconds: 1\n"))
    deadline = time.monotonic() + 5
    while True:
        started = time.monotonic()
        done = kubectl(config, "create", "configmap", "late", "-n", "ex6-slow")
        if done.returncode != 0 or time.monotonic() > deadline:
            break
        _ok(config, "delete", "configmap", "late", "-n", "ex6-slow")
    assert done.returncode != 0
    assert time.monotonic() - started < 2.5
    assert (f'failed calling webhook "slow.skiff.test": failed to call webhook: Post '
            f'"{server.url("/slow")}?timeout=1s": context deadline exceeded') in done.stderr


def test_ex6_only_the_ca_bundle_is_trusted(front: tuple[Path, WebhookServer],
                                           tmp_path: Path) -> None:
    config, server = front
    _namespace(config, "ex6-tls")
    other = CertificateAuthority.load_or_create(tmp_path / "other-ca")
    _ok(config, "apply", "-f", "-", stdin=_configuration(
        "ValidatingWebhookConfiguration", "stranger", "ex6-tls", url=server.url("/deny"),
        ca_bundle=base64.b64encode(other.files.cert.read_bytes()).decode()))
    deadline = time.monotonic() + 3
    while (done := kubectl(config, "create", "configmap", "c", "-n", "ex6-tls",
                           "--dry-run=server")).returncode == 0:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert ("tls: failed to verify certificate: x509: certificate signed by unknown "
            "authority") in done.stderr


def test_ex6_dry_run_reaches_a_webhook_without_side_effects(
        front: tuple[Path, WebhookServer]) -> None:
    config, server = front
    _namespace(config, "ex6-dry")
    _ok(config, "apply", "-f", "-", stdin=_configuration(
        "MutatingWebhookConfiguration", "dry", "ex6-dry", url=server.url("/label"),
        ca_bundle=server.ca_bundle).replace("sideEffects: None", "sideEffects: NoneOnDryRun"))
    _until_called(server, "/label", config, "ex6-dry")
    shown = json.loads(_ok(config, "create", "configmap", "draft", "-n", "ex6-dry",
                           "--dry-run=server", "-o", "json"))
    assert shown["metadata"]["labels"] == {SEEN_LABEL: "yes"}
    sent = [r for r in server.requests if r.get("name") == "draft"][-1]
    assert sent["dryRun"] is True
    assert sent["options"]["dryRun"] == ["All"]
    assert kubectl(config, "get", "configmap", "draft", "-n", "ex6-dry").returncode != 0


def test_ex6_a_webhook_configuration_is_validated(front: tuple[Path, WebhookServer]) -> None:
    config, server = front
    bad = _configuration("ValidatingWebhookConfiguration", "bad", "x", url="http://h/x",
                         ca_bundle=server.ca_bundle).replace("  sideEffects: None\n", "")
    done = kubectl(config, "apply", "-f", "-", stdin=bad)
    assert done.returncode != 0
    assert "webhooks[0].sideEffects: Required value: must specify one of None, " \
           "NoneOnDryRun" in done.stderr
    assert "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only " \
           "allowed URL scheme" in done.stderr


def test_ex6_a_service_reference_reaches_the_webhook_through_its_endpoints(
        front: tuple[Path, WebhookServer]) -> None:
    """`clientConfig.service`: the apiserver resolves the Service's EndpointSlice to the
    address it calls, and checks the certificate against `<name>.<namespace>.svc`."""
    config, server = front
    _namespace(config, "ex6-svc")
    _ok(config, "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "webhook", "namespace": "ex6-svc"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": server.port}]}}))
    _ok(config, "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "webhook-1", "namespace": "ex6-svc",
                     "labels": {"kubernetes.io/service-name": "webhook"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
        "ports": [{"name": "https", "port": server.port, "protocol": "TCP"}]}))
    text = _configuration("MutatingWebhookConfiguration", "by-service", "ex6-svc",
                          url="x", ca_bundle=server.ca_bundle)
    text = text.replace("    url: x\n", "    service:\n      namespace: ex6-svc\n"
                        "      name: webhook\n      path: /label\n")
    _ok(config, "apply", "-f", "-", stdin=text)
    _until_called(server, "/label", config, "ex6-svc")
    created = json.loads(_ok(config, "create", "configmap", "via-service", "-n", "ex6-svc",
                             "-o", "json"))
    assert created["metadata"]["labels"] == {SEEN_LABEL: "yes"}


def test_ex6_a_validating_webhook_can_refuse_a_delete(
        front: tuple[Path, WebhookServer]) -> None:
    config, server = front
    _namespace(config, "ex6-delete")
    _ok(config, "create", "configmap", "refused-keep", "-n", "ex6-delete")
    _ok(config, "create", "configmap", "probe", "-n", "ex6-delete")
    _ok(config, "apply", "-f", "-", stdin=_configuration(
        "ValidatingWebhookConfiguration", "keep", "ex6-delete", url=server.url("/deny"),
        ca_bundle=server.ca_bundle).replace('["CREATE"]', '["DELETE"]'))
    deadline = time.monotonic() + 5
    while not any(r["path"] == "/deny" and r.get("namespace") == "ex6-delete"
                  for r in server.requests):
        assert time.monotonic() < deadline, "the webhook was never called"
        kubectl(config, "delete", "configmap", "probe", "-n", "ex6-delete", "--dry-run=server")
        time.sleep(0.1)
    refused = kubectl(config, "delete", "configmap", "refused-keep", "-n", "ex6-delete")
    assert refused.returncode != 0
    assert ('admission webhook "keep.skiff.test" denied the request: objects named '
            "refused-* are not welcome") in refused.stderr
    sent = [r for r in server.requests if r.get("name") == "refused-keep"][-1]
    assert sent["operation"] == "DELETE" and sent["object"] is None
    assert sent["oldObject"]["metadata"]["name"] == "refused-keep"
    assert sent["options"]["kind"] == "DeleteOptions"
    _ok(config, "get", "configmap", "refused-keep", "-n", "ex6-delete")
    _ok(config, "delete", "configmap", "probe", "-n", "ex6-delete")
