"""`kubectl apply --server-side` (what Helm 4 does on every upgrade)
changing keyed list items and filling maps it applied empty, against a real apiserver.

Kubernetes (structured-merge-diff) identifies a keyed list item by its keys (Service ports
by `port`+`protocol`, containers and env vars by `name`) and removes a whole item a manager
stopped applying when no other manager owns it; an applied empty map is owned and later
filled, never dropped.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.integration.kubectl import kubectl

pytestmark = pytest.mark.integration


def apply(config: Path, manifest: dict[str, Any], manager: str = "helm",
          *extra: str) -> subprocess.CompletedProcess[str]:
    return kubectl(config, "apply", "--server-side", f"--field-manager={manager}", *extra,
                   "-f", "-", stdin=json.dumps(manifest))


def get(config: Path, kind: str, name: str) -> dict[str, Any]:
    done = kubectl(config, "get", kind, name, "-o", "json", "--show-managed-fields")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def service(name: str, ports: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"app": name}, "ports": ports}}


def deployment(name: str, containers: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": containers}}}}


def ports_of(obj: dict[str, Any]) -> list[tuple[str, int, str]]:
    return [(p.get("name", ""), p["port"], p.get("protocol", ""))
            for p in obj["spec"]["ports"]]


def test_defect6_service_port_renumbered_under_the_same_name(kubeconfig: Path) -> None:
    first = apply(kubeconfig, service("renumber", [{"name": "http", "port": 80}]))
    assert first.returncode == 0, first.stderr
    second = apply(kubeconfig, service("renumber", [{"name": "http", "port": 8080}]))
    assert second.returncode == 0, second.stderr  # was 422 Duplicate value: "http"
    live = get(kubeconfig, "service", "renumber")
    assert ports_of(live) == [("http", 8080, "TCP")]
    assert live["spec"]["ports"][0]["targetPort"] == 8080
    helm = next(e for e in live["metadata"]["managedFields"] if e["manager"] == "helm")
    assert list(helm["fieldsV1"]["f:spec"]["f:ports"]) == ['k:{"port":8080,"protocol":"TCP"}']


def test_defect6_service_port_renamed_leaves_no_partial_item(kubeconfig: Path) -> None:
    ports = [{"name": "http", "port": 80, "targetPort": 8080},
             {"name": "metrics", "port": 9090}]
    assert apply(kubeconfig, service("rename", ports)).returncode == 0
    renamed = apply(kubeconfig, service("rename", [
        {"name": "web", "port": 81, "targetPort": 8080}, {"name": "metrics", "port": 9090}]))
    assert renamed.returncode == 0, renamed.stderr
    live = get(kubeconfig, "service", "rename")
    assert ports_of(live) == [("web", 81, "TCP"), ("metrics", 9090, "TCP")]
    same_port = apply(kubeconfig, service("rename", [
        {"name": "www", "port": 81, "targetPort": 8080}, {"name": "metrics", "port": 9090}]))
    assert same_port.returncode == 0, same_port.stderr
    assert ports_of(get(kubeconfig, "service", "rename")) == [("www", 81, "TCP"),
                                                              ("metrics", 9090, "TCP")]


def test_defect6_env_var_and_sidecar_dropped_other_managers_items_stay(
        kubeconfig: Path) -> None:
    main = {"name": "main", "image": "busybox",
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
    sidecar = {"name": "sidecar", "image": "busybox"}
    assert apply(kubeconfig, deployment("env", [main, sidecar])).returncode == 0
    # another manager adds its own env var and container (a mutating tool, kubectl patch)
    patch = {"spec": {"template": {"spec": {"containers": [
        {"name": "main", "env": [{"name": "INJECTED", "value": "x"}]},
        {"name": "agent", "image": "busybox"}]}}}}
    patched = kubectl(kubeconfig, "patch", "deployment", "env", "--field-manager=injector",
                      "-p", json.dumps(patch))
    assert patched.returncode == 0, patched.stderr
    slim = {"name": "main", "image": "busybox", "env": [{"name": "A", "value": "1"}]}
    second = apply(kubeconfig, deployment("env", [slim]))
    assert second.returncode == 0, second.stderr  # was 422 env[1].name: Required value
    live = get(kubeconfig, "deployment", "env")
    containers = {c["name"]: c for c in live["spec"]["template"]["spec"]["containers"]}
    assert sorted(containers) == ["agent", "main"]
    assert [e["name"] for e in containers["main"]["env"]] == ["A", "INJECTED"]


def test_defect6_applied_empty_map_is_kept_and_then_filled(kubeconfig: Path) -> None:
    config: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "filled", "namespace": "default",
                                           "labels": {}},
                              "data": {}}
    assert apply(kubeconfig, config).returncode == 0
    config["data"] = {"key1": "v"}
    config["metadata"]["labels"] = {"app": "x"}
    second = apply(kubeconfig, config)
    assert second.returncode == 0, second.stderr
    live = get(kubeconfig, "configmap", "filled")
    assert live["data"] == {"key1": "v"}
    assert live["metadata"]["labels"] == {"app": "x"}
    helm = next(e for e in live["metadata"]["managedFields"] if e["manager"] == "helm")
    assert helm["fieldsV1"]["f:data"] == {"f:key1": {}}


def test_defect6_conflict_is_still_409_with_kubernetes_message(kubeconfig: Path) -> None:
    assert apply(kubeconfig, service("owned", [{"name": "http", "port": 80}])).returncode == 0
    other = apply(kubeconfig, service("owned", [{"name": "web", "port": 80}]), "argo")
    assert other.returncode != 0
    assert ('Apply failed with 1 conflict: conflict with "helm": '
            '.spec.ports[port=80,protocol="TCP"].name') in other.stderr
    forced = apply(kubeconfig, service("owned", [{"name": "web", "port": 80}]), "argo",
                   "--force-conflicts")
    assert forced.returncode == 0, forced.stderr
    assert ports_of(get(kubeconfig, "service", "owned")) == [("web", 80, "TCP")]
