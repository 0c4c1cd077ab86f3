"""`skiff explore`'s workload and oracle against a real cluster (SPEC CT2): a workload with
every step kind runs over the example Database CRD (a custom resource the client process
learns from the cluster, waiting for it to be established), and the oracle finds no
difference between two snapshots of the same end state, then exactly one `extra` after one
more object is created."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from skiff.api.errors import ApiError, Reason
from skiff.client import ApiClient
from skiff.client.credentials import Credentials
from skiff.cluster.kubeconfig import cli_credentials
from skiff.cluster.state import ClusterState
from skiff.explore.oracle import Difference, Mask, diff
from skiff.explore.snapshot import take_snapshot
from skiff.explore.steps import StepError, run_step
from skiff.explore.workload import load_workload
from tests.integration.skiffcli import skiff_up

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "operators"
NS = "demo"
COMPARE = ["configmaps", "databases.examples.skiff.io", "namespaces"]

DB = """\
apiVersion: examples.skiff.io/v1
kind: Database
metadata: {name: db}
spec: {replicas: 1}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, labels: {app: demo}}
data: {size: small}
"""

WORKLOAD = f"""\
namespace: {NS}
setup:
  - apply: {EXAMPLES / "database.yaml"}
steps:
  - apply: db.yaml
  - wait: {{resource: customresourcedefinitions, name: databases.examples.skiff.io,
           condition: Established, timeout: 20}}
  - apply: {{manifest: {{apiVersion: v1, kind: ConfigMap, metadata: {{name: settings}},
                         data: {{size: large}}}}}}
  - create: {{apiVersion: v1, kind: ConfigMap, metadata: {{generateName: db-,
              labels: {{examples.skiff.io/database: db}}}}}}
  - create: {{apiVersion: v1, kind: ConfigMap, metadata: {{generateName: db-,
              labels: {{examples.skiff.io/database: db}}}}}}
  - wait: {{resource: configmaps, selector: "examples.skiff.io/database=db", count: 2,
           timeout: 10}}
  - patch: {{resource: databases.examples.skiff.io, name: db, patch: {{spec: {{replicas: 3}}}}}}
  - wait: {{resource: databases.examples.skiff.io, name: db, jsonpath: "{{.spec.replicas}}",
           value: "3", timeout: 10}}
  - patch: {{resource: databases, name: db,
             patch: {{status: {{conditions: [{{type: Ready, status: "True"}}]}}}}}}
  - wait: {{resource: databases.examples.skiff.io, name: db, condition: Ready, timeout: 10}}
  - create: {{apiVersion: apps/v1, kind: Deployment, metadata: {{name: web}},
              spec: {{replicas: 0, selector: {{matchLabels: {{app: web}}}},
                      template: {{metadata: {{labels: {{app: web}}}},
                                 spec: {{containers: [{{name: web, image: nginx}}]}}}}}}}}
  - scale: {{resource: deployments.apps, name: web, replicas: 2}}
  - wait: {{resource: deployments.apps, name: web, jsonpath: "{{.spec.replicas}}", value: "2"}}
  - create: {{apiVersion: v1, kind: ConfigMap, metadata: {{name: doomed}}}}
  - delete: {{resource: configmaps, name: doomed}}
  - wait: {{resource: configmaps, name: doomed, exists: false, timeout: 10}}
  - apply: {{manifest: {{apiVersion: v1, kind: Namespace, metadata: {{name: side}}}}}}
  - sleep: 0.2
"""


@dataclass(frozen=True)
class Cluster:
    target: str
    credentials: Credentials

    def client(self) -> ApiClient:
        return ApiClient(self.target, retry_seconds=20, credentials=self.credentials)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """`skiff up --detach --nodes 0`, reached with the admin credentials of its kubeconfig
    (as the CLI finds them)."""
    data_dir = tmp_path_factory.mktemp("explore")
    with skiff_up(data_dir, nodes=0):
        state = ClusterState.load(data_dir)
        assert state is not None
        yield Cluster(state.api, cli_credentials(data_dir / "kubeconfig"))


async def test_ct2_a_workload_of_every_step_kind_runs_on_a_real_cluster(
        cluster: Cluster, tmp_path: Path) -> None:
    async with cluster.client() as api:
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        await _run_and_compare(api, tmp_path)


async def _run_and_compare(api: ApiClient, tmp_path: Path) -> None:
    (tmp_path / "db.yaml").write_text(DB)
    (tmp_path / "workload.yaml").write_text(WORKLOAD)
    workload = load_workload(tmp_path / "workload.yaml")
    for step in (*workload.setup, *workload.steps):
        await run_step(api, step, namespace=workload.namespace)

    db = await api.get("databases.examples.skiff.io", "db", NS)
    assert db["spec"] == {"replicas": 3}
    assert db["status"] == {"conditions": [{"type": "Ready", "status": "True"}]}
    settings = await api.get("configmaps", "settings", NS)
    assert settings["data"] == {"size": "large"}
    assert settings["metadata"]["labels"] == {"app": "demo"}
    assert (await api.get("deployments", "web", NS))["spec"]["replicas"] == 2
    with pytest.raises(ApiError) as gone:
        await api.get("configmaps", "doomed", NS)
    assert gone.value.reason == Reason.NOT_FOUND
    assert "namespace" not in (await api.get("namespaces", "side"))["metadata"]

    # a wait that cannot hold names its step and what it saw
    (tmp_path / "late.yaml").write_text(
        f"namespace: {NS}\nsteps:\n  - sleep: 0\n  - wait: {{resource: databases.examples."
        "skiff.io, name: db, jsonpath: '{.spec.replicas}', value: '5', timeout: 0.5}\n")
    late = load_workload(tmp_path / "late.yaml").steps[1]
    with pytest.raises(StepError, match=r'^steps\[1\] wait: databases.examples.skiff.io '
                                        r'demo/db \{.spec.replicas\} is "3" after 0.5s'):
        await run_step(api, late, namespace=NS)

    # the oracle: the same end state read twice is no difference; one more object is one
    reference = await take_snapshot(api, COMPARE, namespaces=[NS])
    assert len([c for c in reference["configmaps"]
                if c["metadata"]["name"].startswith("db-")]) == 2
    assert [d["metadata"]["name"] for d in reference["databases.examples.skiff.io"]] == ["db"]
    assert "side" in [n["metadata"]["name"] for n in reference["namespaces"]]
    again = await take_snapshot(api, COMPARE, namespaces=[NS])
    assert diff(reference, again, mask=Mask(frozenset())) == []

    await api.create({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"generateName": "db-", "namespace": NS,
                                   "labels": {"examples.skiff.io/database": "db"}}})
    after = await take_snapshot(api, COMPARE, namespaces=[NS])
    assert diff(reference, after, mask=Mask(frozenset())) == [
        Difference("configmaps", f"{NS}/db-*", "extra", (),
                   f"extra configmaps {NS}/db-* (2 in the reference run, 3 here)")]


async def test_ct2_a_snapshot_of_a_resource_not_served_is_empty(cluster: Cluster) -> None:
    async with cluster.client() as api:
        snapshot = await take_snapshot(api, ["frobs.examples.skiff.io", "configmaps"],
                                       namespaces=[NS, "nowhere"])
    assert snapshot["frobs.examples.skiff.io"] == []
    assert all(c["metadata"]["namespace"] == NS for c in snapshot["configmaps"])
