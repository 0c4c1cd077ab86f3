"""AU3: the Node authorizer lets a kubelet read the ConfigMaps and Secrets its pods use,
from volumes, projected volumes, `env.valueFrom` and `envFrom` (Kubernetes' node graph).
A pod reading a ConfigMap only through its environment was refused, so it never started
(workloads/test_config.py::test_missing_configmap_is_create_container_config_error)."""

from __future__ import annotations

import pytest

from skiff.apiserver.auth.node import _pod_references

POD = {"spec": {
    "initContainers": [{"name": "init", "envFrom": [{"secretRef": {"name": "init-secret"}}]}],
    "containers": [{"name": "main",
                    "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {
                        "name": "env-cm", "key": "a"}}},
                            {"name": "B", "valueFrom": {"secretKeyRef": {
                                "name": "env-secret", "key": "b"}}}],
                    "envFrom": [{"configMapRef": {"name": "from-cm"}}]}],
    "volumes": [{"name": "v", "configMap": {"name": "vol-cm"}},
                {"name": "p", "projected": {"sources": [
                    {"configMap": {"name": "kube-root-ca.crt"}},
                    {"secret": {"name": "proj-secret"}}]}}]}}


@pytest.mark.parametrize(("resource", "name", "allowed"), [
    ("configmaps", "env-cm", True), ("configmaps", "from-cm", True),
    ("configmaps", "vol-cm", True), ("configmaps", "kube-root-ca.crt", True),
    ("secrets", "env-secret", True), ("secrets", "init-secret", True),
    ("secrets", "proj-secret", True),
    ("configmaps", "env-secret", False), ("secrets", "env-cm", False),
    ("configmaps", "other", False),
])
def test_au3_node_reads_what_its_pods_reference(resource: str, name: str,
                                                allowed: bool) -> None:
    assert _pod_references(POD, resource, name) is allowed
