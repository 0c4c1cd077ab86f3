"""Deleting a namespace deletes everything in it, then the namespace."""

from __future__ import annotations

import json

from tests.integration.workloads.conftest import Kube
from tests.integration.workloads.test_deployment import _wait


def test_namespace_deletion_is_terminating_deletes_its_content_and_completes(
        kube: Kube) -> None:
    kube("create", "namespace", "doomed")
    ns = json.loads(kube("get", "namespace", "doomed", "-o", "json").stdout)
    assert ns["spec"]["finalizers"] == ["kubernetes"]
    kube("-n", "doomed", "create", "deployment", "app", "--image=nginx", "--replicas=2")
    kube("-n", "doomed", "create", "configmap", "cfg", "--from-literal=a=b")
    kube("-n", "doomed", "rollout", "status", "deployment/app", "--timeout=120s")
    kube("delete", "namespace", "doomed", "--wait=false")
    phase = kube("get", "namespace", "doomed", check=False).stdout
    assert "Terminating" in phase or "NotFound" in kube(
        "get", "namespace", "doomed", check=False).stderr
    refused = kube("-n", "doomed", "create", "configmap", "late", "--from-literal=a=b",
                   check=False)
    assert refused.returncode != 0
    _wait(lambda: "NotFound" in kube("get", "namespace", "doomed", check=False).stderr,
          timeout=120, what="the namespace to be gone")
    assert "No resources found" in kube("get", "pods", "-n", "doomed").stderr
