"""SPEC AX1, AX5: what the real kubectl 1.32 reads and writes against a
cluster whose own components (kubelet, controller-manager, scheduler) write over gRPC:
- the OpenAPI v2 document in protobuf, which `kubectl explain --output=plaintext-openapiv2`
  reads (it found no kind in the stub Skiff served before);
- the OpenAPI v3 patch operations, from which kubectl's client-side apply takes its strategic
  merge metadata (before, it fell back to asking for v2);
- managedFields of gRPC writes under the names Kubernetes' components have, so server-side
  apply reports a conflict with "kubelet" or "kube-controller-manager" where Kubernetes does.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from skiff.client import ApiClient
from skiff.cluster.kubeconfig import write_kubeconfig
from skiff.cluster.processes import free_port
from tests.integration.cluster import Cluster
from tests.integration.waiting import get_or_none, wait_for

NODE = "n1"


@dataclass
class Kube:
    config: Path
    target: str

    def kubectl(self, *args: str, stdin: str | None = None
                ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kubectl", "--kubeconfig", str(self.config), *args],
                              input=stdin, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    assert shutil.which("kubectl"), "kubectl is not installed"
    root = tmp_path_factory.mktemp("api-surface-c")
    port = free_port()
    cluster = Cluster(root, apiserver_args=["--http-port", str(port)]).start()
    try:
        cluster.add_service("scheduler", "skiff.scheduler", [])
        cluster.add_service("controller-manager", "skiff.controller_manager", [
            "--leader-elect-resource-name", f"cm-{uuid.uuid4().hex[:6]}"])
        cluster.add_service("kubelet-n1", "skiff.kubelet", [
            "--node-name", NODE, "--root-dir", str(root / NODE),
            "--node-status-update-frequency", "1s"])
        yield Kube(write_kubeconfig(root, f"http://127.0.0.1:{port}"), cluster.api_target)
    finally:
        cluster.stop()


@pytest.fixture
async def api(kube: Kube) -> AsyncIterator[ApiClient]:
    async with ApiClient(kube.target, retry_seconds=20) as client:
        yield client


def _entries(obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(e["manager"], e["operation"], e.get("subresource", ""))
            for e in obj["metadata"].get("managedFields") or []]


def test_AX5_kubectl_explain_reads_the_openapi_v2_protobuf_document(kube: Kube) -> None:
    explained = kube.kubectl("explain", "pod.spec.containers.image",
                             "--output=plaintext-openapiv2")
    assert explained.returncode == 0, explained.stderr  # was: couldn't find resource for Pod
    assert "FIELD:    image <string>" in explained.stdout
    assert "Container image name." in explained.stdout
    deployment = kube.kubectl("explain", "deployment.spec.strategy",
                              "--output=plaintext-openapiv2")
    assert deployment.returncode == 0, deployment.stderr
    assert "VERSION:  apps/v1" in deployment.stdout
    assert "rollingUpdate" in deployment.stdout


def test_AX5_client_side_apply_takes_patch_metadata_from_openapi_v3(kube: Kube) -> None:
    manifest = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: csa\n"
                "  labels: {{tier: {tier}}}\ndata: {{k: v}}\n")
    created = kube.kubectl("apply", "-f", "-", stdin=manifest.format(tier="a"))
    assert created.returncode == 0, created.stderr
    changed = kube.kubectl("apply", "-f", "-", "-v=6", stdin=manifest.format(tier="b"))
    assert changed.returncode == 0, changed.stderr
    assert "configmap/csa configured" in changed.stdout
    # kubectl found `application/strategic-merge-patch+json` in the v3 patch operation, as
    # against kube-apiserver: no fallback to the v2 document
    assert "does not support strategic merge patch" not in changed.stderr
    assert "/openapi/v2" not in changed.stderr
    got = kube.kubectl("get", "configmap", "csa", "-o", "jsonpath={.metadata.labels.tier}")
    assert got.stdout == "b"


async def test_AX1_grpc_writers_are_recorded_under_kubernetes_manager_names(
        kube: Kube, api: ApiClient) -> None:
    node = await wait_for(lambda: get_or_none(api, "nodes", NODE), timeout=60,
                          what="the kubelet to register its node")

    async def status_recorded() -> dict[str, Any] | None:
        got = await api.get("nodes", NODE)
        return got if ("kubelet", "Update", "status") in _entries(got) else None

    node = await wait_for(status_recorded, timeout=60, what="the kubelet's status entry")
    entries = {(m, o, s): e for e, (m, o, s) in zip(
        node["metadata"]["managedFields"], _entries(node), strict=True)}
    main = entries[("kubelet", "Update", "")]
    assert main["apiVersion"] == "v1" and main["fieldsType"] == "FieldsV1"
    assert "f:kubernetes.io/hostname" in main["fieldsV1"]["f:metadata"]["f:labels"]
    status = entries[("kubelet", "Update", "status")]
    assert set(status["fieldsV1"]) == {"f:status"}
    assert 'k:{"type":"Ready"}' in status["fieldsV1"]["f:status"]["f:conditions"]

    created = kube.kubectl("create", "deployment", "mf", "--image=busybox", "--replicas=1",
                           "--", "sleep", "3600")
    assert created.returncode == 0, created.stderr

    async def replica_set() -> dict[str, Any] | None:
        items = (await api.list("replicasets", "default"))["items"]
        return next((rs for rs in items if rs["metadata"]["name"].startswith("mf-")), None)

    rs = await wait_for(replica_set, timeout=60, what="the Deployment's ReplicaSet")
    assert ("kube-controller-manager", "Update", "") in _entries(rs)
    deployment = await api.get("deployments", "mf", "default")
    assert ("kubectl-create", "Update", "") in _entries(deployment)


async def test_AX1_server_side_apply_conflicts_with_the_kubelet_and_controller_manager(
        kube: Kube, api: ApiClient) -> None:
    await wait_for(lambda: get_or_none(api, "nodes", NODE), timeout=60,
                   what="the kubelet to register its node")
    label = {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": NODE, "labels": {"kubernetes.io/hostname": "elsewhere"}}}
    refused = kube.kubectl("apply", "--server-side", "--field-manager=alice", "-f", "-",
                           stdin=json.dumps(label))
    assert refused.returncode == 1
    assert ('Apply failed with 1 conflict: conflict with "kubelet" using v1: '
            ".metadata.labels.kubernetes.io/hostname") in refused.stderr
    assert (await api.get("nodes", NODE))["metadata"]["labels"][
        "kubernetes.io/hostname"] == NODE

    assert kube.kubectl("create", "deployment", "ssa", "--image=busybox", "--replicas=1",
                        "--", "sleep", "3600").returncode == 0

    async def replica_set() -> dict[str, Any] | None:
        items = (await api.list("replicasets", "default"))["items"]
        return next((rs for rs in items if rs["metadata"]["name"].startswith("ssa-")), None)

    rs = await wait_for(replica_set, timeout=60, what="the Deployment's ReplicaSet")
    scale = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
             "metadata": {"name": rs["metadata"]["name"]}, "spec": {"replicas": 4}}
    refused = kube.kubectl("apply", "--server-side", "--field-manager=alice", "-f", "-",
                           stdin=json.dumps(scale))
    assert refused.returncode == 1
    assert ('Apply failed with 1 conflict: conflict with "kube-controller-manager" using '
            "apps/v1: .spec.replicas") in refused.stderr
    forced = kube.kubectl("apply", "--server-side", "--field-manager=alice",
                          "--force-conflicts", "-f", "-", stdin=json.dumps(scale))
    assert forced.returncode == 0, forced.stderr
    assert "serverside-applied" in forced.stdout


def _header(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    return [c.strip() for c in result.stdout.splitlines()[0].split("  ") if c.strip()]


async def test_sweep_kubectl_get_prints_kubernetes_columns(kube: Kube, api: ApiClient) -> None:
    """kubectl 1.32's printers: pods without NODE unless -o wide; the -o wide columns of
    nodes, ReplicaSets and Jobs; PVC, Role and RoleBinding columns."""
    await wait_for(lambda: get_or_none(api, "nodes", NODE), timeout=60,
                   what="the kubelet to register its node")
    pod = ("apiVersion: v1\nkind: Pod\nmetadata: {name: cols}\n"
           "spec: {containers: [{name: main, image: busybox, command: [sleep, '3600']}]}\n")
    assert kube.kubectl("apply", "-f", "-", stdin=pod).returncode == 0
    assert _header(kube.kubectl("get", "pods")) == ["NAME", "READY", "STATUS", "RESTARTS",
                                                    "AGE"]
    assert _header(kube.kubectl("get", "pods", "-o", "wide")) == [
        "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE",
        "READINESS GATES"]
    assert _header(kube.kubectl("get", "nodes", "-o", "wide")) == [
        "NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP",
        "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"]
    assert kube.kubectl("create", "deployment", "cols", "--image=busybox", "--",
                        "sleep", "3600").returncode == 0
    assert kube.kubectl("create", "job", "cols", "--image=busybox", "--",
                        "true").returncode == 0
    rs = await wait_for(lambda: _first(api, "replicasets", "cols-"), timeout=60,
                        what="the Deployment's ReplicaSet")
    wide_rs = kube.kubectl("get", "rs", rs["metadata"]["name"], "-o", "wide")
    assert _header(wide_rs) == ["NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS",
                                "IMAGES", "SELECTOR"]
    assert wide_rs.stdout.splitlines()[1].split()[-3:] == [
        "busybox", "busybox",
        f"app=cols,pod-template-hash={rs['metadata']['labels']['pod-template-hash']}"]
    assert _header(kube.kubectl("get", "job", "cols", "-o", "wide")) == [
        "NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE", "CONTAINERS", "IMAGES",
        "SELECTOR"]
    claim = ("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: cols}\n"
             "spec: {accessModes: [ReadWriteOnce], storageClassName: manual,\n"
             "       resources: {requests: {storage: 1Gi}}}\n")
    assert kube.kubectl("apply", "-f", "-", stdin=claim).returncode == 0
    pvc = kube.kubectl("get", "pvc", "cols")
    assert _header(pvc) == ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES",
                            "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "AGE"]
    assert pvc.stdout.splitlines()[1].split()[:4] == ["cols", "Pending", "manual", "<unset>"]
    assert kube.kubectl("create", "role", "cols", "--verb=get",
                        "--resource=pods").returncode == 0
    assert kube.kubectl("create", "rolebinding", "cols", "--role=cols", "--user=bob",
                        "--serviceaccount=default:default").returncode == 0
    assert _header(kube.kubectl("get", "role", "cols")) == ["NAME", "CREATED AT"]
    binding = kube.kubectl("get", "rolebinding", "cols", "-o", "wide")
    assert _header(binding) == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    row = binding.stdout.splitlines()[1].split()
    assert row[1] == "Role/cols" and row[3:] == ["bob", "default/default"]


async def _first(api: ApiClient, resource: str, prefix: str) -> dict[str, Any] | None:
    items = (await api.list(resource, "default"))["items"]
    return next((o for o in items if o["metadata"]["name"].startswith(prefix)), None)


async def test_sweep_kubectl_get_all_lists_the_workload_kinds(kube: Kube, api: ApiClient) -> None:
    """`kubectl get all` (the `all` category): it said `the server doesn't have a resource
    type "all"`. Kinds print in discovery order, Deployments before ReplicaSets."""
    assert kube.kubectl("create", "deployment", "every", "--image=busybox", "--",
                        "sleep", "3600").returncode == 0
    await wait_for(lambda: _first(api, "replicasets", "every-"), timeout=60,
                   what="the Deployment's ReplicaSet")
    listed = kube.kubectl("get", "all")
    assert listed.returncode == 0, listed.stderr
    kinds = [line.split()[0].split("/")[0] for line in listed.stdout.splitlines()
             if "/" in line.split(" ", 1)[0]]
    assert "deployment.apps" in kinds and "replicaset.apps" in kinds
    assert kinds.index("deployment.apps") < kinds.index("replicaset.apps")
    assert "deployment.apps/every" in listed.stdout


def test_sweep_namespaces_carry_the_metadata_name_label(kube: Kube) -> None:
    """`kubernetes.io/metadata.name`, which namespaceSelectors match on, as in 1.32."""
    assert kube.kubectl("create", "namespace", "labelled").returncode == 0
    shown = kube.kubectl("get", "namespace", "labelled", "default", "--show-labels")
    assert shown.returncode == 0, shown.stderr
    rows = {line.split()[0]: line.split()[-1] for line in shown.stdout.splitlines()[1:]}
    assert rows == {"labelled": "kubernetes.io/metadata.name=labelled",
                    "default": "kubernetes.io/metadata.name=default"}
    selected = kube.kubectl("get", "namespaces", "-l", "kubernetes.io/metadata.name=labelled",
                            "-o", "name")
    assert selected.stdout.split() == ["namespace/labelled"]


async def test_AX1_status_writes_over_http_are_status_entries(kube: Kube,
                                                              api: ApiClient) -> None:
    """`kubectl patch --subresource=status` is recorded like the kubelet's status writes:
    its own entry, `subresource: status`, owning the fields it set."""
    assert kube.kubectl("create", "service", "clusterip", "lb", "--tcp=80:80").returncode == 0
    patched = kube.kubectl("patch", "service", "lb", "--subresource=status", "--type=merge",
                           "-p", '{"status":{"loadBalancer":{"ingress":[{"ip":"10.9.9.9"}]}}}')
    assert patched.returncode == 0, patched.stderr
    service = await api.get("services", "lb", "default")
    entries = {(e["manager"], e["operation"], e.get("subresource", "")): e["fieldsV1"]
               for e in service["metadata"]["managedFields"]}
    assert entries[("kubectl-patch", "Update", "status")] == {
        "f:status": {"f:loadBalancer": {"f:ingress": {}}}}
    assert ("kubectl-create", "Update", "") in entries
