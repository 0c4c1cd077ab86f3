"""SPEC EX1/EX6: the real Helm CLI (the official v4 binary a PyPI package ships) installs,
upgrades and uninstalls charts that depend on the extension API, against `skiff up`:

- a chart that ships prometheus-operator's ten real CRDs in its `crds/` folder and, in its
  templates, a ServiceMonitor and a PrometheusRule: Helm creates the CRDs, waits for them to
  be Established, rediscovers the API and creates the objects of the new kinds; an upgrade
  changes an object and leaves `crds/` alone; an uninstall deletes the objects and, as Helm
  documents, keeps the CRDs.
- a chart with a ValidatingWebhookConfiguration pointing at an HTTPS webhook server the test
  runs (certificate from a test CA, passed as the chart's caBundle value): the API server
  asks it and refuses what it refuses; an upgrade widens the rules; an uninstall lifts them.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.thirdparty import HERE, helm_binary
from tests.integration.kubectl import kubectl
from tests.integration.webhookserver import WebhookServer

pytestmark = [pytest.mark.integration]

CHARTS = HERE / "charts"
MONITORING_CRDS = sorted(
    f"{path.stem.split('_', 1)[1]}.{path.stem.split('_', 1)[0]}"
    for path in (CHARTS / "monitoring-crds" / "crds").glob("*.yaml"))


class Helm:
    """The helm binary with its own home directories and the cluster's kubeconfig."""

    def __init__(self, kubeconfig: Path, home: Path) -> None:
        self.binary = helm_binary()
        self.kubeconfig = kubeconfig
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig),
                    "HELM_CACHE_HOME": str(home / "cache"),
                    "HELM_CONFIG_HOME": str(home / "config"),
                    "HELM_DATA_HOME": str(home / "data")}

    def __call__(self, *args: str, timeout: float = 180) -> str:
        done = subprocess.run([str(self.binary), *args], capture_output=True, text=True,
                              env=self.env, timeout=timeout)
        assert done.returncode == 0, f"helm {' '.join(args)}:\n{done.stderr}{done.stdout}"
        return done.stdout

    def releases(self) -> dict[str, dict[str, Any]]:
        listed: list[dict[str, Any]] = json.loads(self("list", "--output", "json"))
        return {r["name"]: r for r in listed}


@pytest.fixture(scope="module")
def helm(skiff_kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(skiff_kubeconfig, tmp_path_factory.mktemp("helm"))


@pytest.fixture
def webhook(tmp_path: Path) -> Iterator[WebhookServer]:
    server = WebhookServer(tmp_path).start()
    try:
        yield server
    finally:
        server.stop()


def _get(config: Path, *args: str) -> dict[str, Any]:
    done = kubectl(config, "get", *args, "-o", "json")
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def _absent(config: Path, *args: str) -> bool:
    done = kubectl(config, "get", *args)
    return done.returncode != 0 and "NotFound" in done.stderr


@pytest.mark.timeout(300)
def test_ex1_helm_installs_upgrades_and_uninstalls_a_chart_shipping_crds(helm: Helm) -> None:
    config = helm.kubeconfig
    helm("install", "mon", str(CHARTS / "monitoring-crds"), "--wait", "--timeout", "120s")
    crds = _get(config, "customresourcedefinitions")["items"]
    established = {c["metadata"]["name"] for c in crds
                   if any(cond["type"] == "Established" and cond["status"] == "True"
                          for cond in c.get("status", {}).get("conditions", []))}
    assert established >= set(MONITORING_CRDS), established
    monitor = _get(config, "servicemonitor", "mon-apiserver")
    assert monitor["spec"]["endpoints"][0]["interval"] == "30s"
    rule = _get(config, "prometheusrules.monitoring.coreos.com", "mon-rules")
    assert rule["spec"]["groups"][0]["rules"][0]["alert"] == "SkiffApiserverDown"

    helm("upgrade", "mon", str(CHARTS / "monitoring-crds"), "--set", "interval=15s",
         "--wait", "--timeout", "120s")
    assert helm.releases()["mon"]["revision"] == "2"
    assert _get(config, "servicemonitor", "mon-apiserver")["spec"]["endpoints"][0][
        "interval"] == "15s"

    helm("uninstall", "mon", "--wait", "--timeout", "120s")
    assert "mon" not in helm.releases()
    assert _absent(config, "servicemonitor", "mon-apiserver")
    assert _absent(config, "prometheusrule", "mon-rules")
    # Helm never deletes what a chart's crds/ created (it would delete every user's objects).
    kept = {c["metadata"]["name"] for c in _get(config, "customresourcedefinitions")["items"]}
    assert kept >= set(MONITORING_CRDS)


@pytest.mark.timeout(300)
def test_ex6_helm_installs_upgrades_and_uninstalls_a_validating_webhook_chart(
        helm: Helm, webhook: WebhookServer) -> None:
    config = helm.kubeconfig
    chart = str(CHARTS / "validating-webhook")
    values = ["--set", f"url={webhook.url('/deny')}", "--set", f"caBundle={webhook.ca_bundle}"]
    helm("install", "policy", chart, *values, "--wait", "--timeout", "60s")
    refused = kubectl(config, "create", "configmap", "refused-1")
    assert refused.returncode != 0
    assert ('admission webhook "names.policy.skiff.test" denied the request: '
            "objects named refused-* are not welcome") in refused.stderr
    assert kubectl(config, "create", "configmap", "welcome-1").returncode == 0
    # Secrets are not in the rules yet.
    assert kubectl(config, "create", "secret", "generic", "refused-s1").returncode == 0

    helm("upgrade", "policy", chart, *values, "--set", "resources={configmaps,secrets}",
         "--wait", "--timeout", "60s")
    assert helm.releases()["policy"]["revision"] == "2"
    webhooks = _get(config, "validatingwebhookconfiguration", "policy-names")["webhooks"]
    assert webhooks[0]["rules"][0]["resources"] == ["configmaps", "secrets"]
    refused = kubectl(config, "create", "secret", "generic", "refused-s2")
    assert refused.returncode != 0 and "objects named refused-* are not welcome" in refused.stderr

    helm("uninstall", "policy", "--wait", "--timeout", "60s")
    assert "policy" not in helm.releases()
    assert _absent(config, "validatingwebhookconfiguration", "policy-names")
    assert kubectl(config, "create", "configmap", "refused-2").returncode == 0
