"""HorizontalPodAutoscalers on a whole `skiff up` cluster, as the Kubernetes documentation's
HPA walkthrough drives them: `kubectl autoscale` (autoscaling/v1, protobuf), `kubectl get
hpa` (v2 Table), the official client in both versions, and the controller scaling a busy
Deployment up and an idle one down from the kubelets' CPU measurements."""

from __future__ import annotations

import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config
from kubernetes.client import ApiException

from tests.integration.officialclient import meta, present
from tests.integration.skiffcli import skiff_up
from tests.integration.waiting import until

CONFIG = """kubelet:
  nodeStatusUpdateFrequency: 1s
  metricsResolution: 1s
controllerManager:
  horizontalPodAutoscalerSyncPeriod: 1s
  horizontalPodAutoscalerCpuInitializationPeriod: 2s
  horizontalPodAutoscalerInitialReadinessDelay: 1s
  horizontalPodAutoscalerDownscaleStabilization: 2s
"""
# a few ms of shell arithmetic every 0.2 s: tens of millicores, far above a 5m request
BUSY = "while :; do i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; sleep 0.2; done"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with skiff_up(tmp_path_factory.mktemp("autoscaling"), config=CONFIG) as data_dir:
        yield data_dir


@pytest.fixture(scope="module")
def api_client(data_dir: Path) -> Iterator[client.ApiClient]:
    with config.new_client_from_config(config_file=str(data_dir / "kubeconfig")) as api:
        yield api


@pytest.fixture
def ns(api_client: client.ApiClient) -> str:
    name = f"hpa-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(api_client).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


def kubectl(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", str(data_dir / "kubeconfig"), *args],
                          text=True, capture_output=True, timeout=60)


def deployment(name: str, command: str, *, replicas: int, cpu: str) -> client.V1Deployment:
    labels = {"app": name}
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1DeploymentSpec(
            replicas=replicas, selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(termination_grace_period_seconds=1, containers=[
                    client.V1Container(name="main", image="busybox",
                                       command=["sh", "-c", command],
                                       resources=client.V1ResourceRequirements(
                                           requests={"cpu": cpu}))]))))


def replicas(apps: client.AppsV1Api, ns: str, name: str) -> int:
    return int(present(present(apps.read_namespaced_deployment(name, ns).spec).replicas))


def test_kubectl_autoscale_scales_a_busy_deployment_up_and_shows_it(
        data_dir: Path, api_client: client.ApiClient, ns: str) -> None:
    apps = client.AppsV1Api(api_client)
    apps.create_namespaced_deployment(ns, deployment("busy", BUSY, replicas=1, cpu="5m"))
    made = kubectl(data_dir, "autoscale", "deployment", "busy", "-n", ns,
                   "--cpu-percent=50", "--min=1", "--max=3")
    assert made.returncode == 0, made.stderr  # was: 404 (no HorizontalPodAutoscalers)
    assert made.stdout.strip() == "horizontalpodautoscaler.autoscaling/busy autoscaled"

    until(lambda: replicas(apps, ns, "busy") == 3, "the HPA to scale busy to --max=3",
          timeout=120)
    row = kubectl(data_dir, "get", "hpa", "busy", "-n", ns, "--no-headers").stdout.split()
    assert row[:2] == ["busy", "Deployment/busy"], row
    assert re.fullmatch(r"\d+%/50%", row[3]), row  # TARGETS "cpu: 430%/50%"
    assert row[4:6] == ["1", "3"], row

    v1 = client.AutoscalingV1Api(api_client).read_namespaced_horizontal_pod_autoscaler(
        "busy", ns)
    assert v1.spec.target_cpu_utilization_percentage == 50
    assert present(present(v1.status).current_cpu_utilization_percentage) > 50
    v2 = client.AutoscalingV2Api(api_client).read_namespaced_horizontal_pod_autoscaler(
        "busy", ns)
    conditions = {c.type: c for c in present(present(v2.status).conditions)}
    assert conditions["ScalingActive"].status == "True"
    assert conditions["ScalingLimited"].reason == "TooManyReplicas"
    events = client.CoreV1Api(api_client).list_namespaced_event(
        ns, field_selector="involvedObject.name=busy,reason=SuccessfulRescale").items
    assert any(e.involved_object.kind == "HorizontalPodAutoscaler"
               and present(e.message).startswith("New size: ") for e in events), events
    everything = kubectl(data_dir, "get", "all", "-n", ns)
    assert "horizontalpodautoscaler.autoscaling/busy" in everything.stdout  # category all
    apps.delete_namespaced_deployment("busy", ns)


def test_an_idle_deployment_scales_down_to_min_replicas(
        api_client: client.ApiClient, ns: str) -> None:
    apps = client.AppsV1Api(api_client)
    apps.create_namespaced_deployment(ns, deployment("idle", "sleep 600", replicas=3,
                                                     cpu="50m"))
    client.AutoscalingV2Api(api_client).create_namespaced_horizontal_pod_autoscaler(
        ns, client.V2HorizontalPodAutoscaler(
            metadata=client.V1ObjectMeta(name="idle"),
            spec=client.V2HorizontalPodAutoscalerSpec(
                scale_target_ref=client.V2CrossVersionObjectReference(
                    api_version="apps/v1", kind="Deployment", name="idle"),
                min_replicas=1, max_replicas=3,
                metrics=[client.V2MetricSpec(
                    type="Resource", resource=client.V2ResourceMetricSource(
                        name="cpu", target=client.V2MetricTarget(type="Utilization",
                                                                 average_utilization=50)))],
                behavior=client.V2HorizontalPodAutoscalerBehavior(
                    scale_down=client.V2HPAScalingRules(stabilization_window_seconds=0)))))
    until(lambda: replicas(apps, ns, "idle") == 1, "the HPA to scale idle down to 1",
          timeout=120)
    apps.delete_namespaced_deployment("idle", ns)


def test_v1_clients_keep_the_metrics_only_v2_can_say(
        api_client: client.ApiClient, ns: str) -> None:
    v2api = client.AutoscalingV2Api(api_client)
    # The client sends a plain dict body as it is; its annotations name only the model.
    v2api.create_namespaced_horizontal_pod_autoscaler(ns, {  # type: ignore[arg-type]
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "both"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                    "name": "nothing"},
                 "maxReplicas": 4, "metrics": [
                     {"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization", "averageUtilization": 60}}},
                     {"type": "Resource", "resource": {"name": "memory", "target": {
                         "type": "AverageValue", "averageValue": "100Mi"}}}]}})
    v1api = client.AutoscalingV1Api(api_client)
    # The HPA controller writes this HPA's status (its target does not exist) whenever it
    # syncs, so a read-modify-write can meet a 409 Conflict, as on Kubernetes: read again.
    for _ in range(10):
        v1 = v1api.read_namespaced_horizontal_pod_autoscaler("both", ns)
        assert v1.spec.target_cpu_utilization_percentage == 60
        assert "autoscaling.alpha.kubernetes.io/metrics" in present(meta(v1).annotations)
        v1.spec.max_replicas = 6
        try:
            v1api.replace_namespaced_horizontal_pod_autoscaler("both", ns, v1)
            break
        except ApiException as err:
            if err.status != 409:
                raise
    else:
        raise AssertionError("the v1 replace met a conflict ten times")
    back = v2api.read_namespaced_horizontal_pod_autoscaler("both", ns)
    assert back.spec.max_replicas == 6
    assert [present(m.resource).name for m in present(back.spec.metrics)] == ["cpu", "memory"]
    assert meta(back).annotations is None  # the round-trip annotations are v1's only


def test_kubectl_top_needs_list_on_pods_metrics(data_dir: Path, ns: str) -> None:
    refused = kubectl(data_dir, "top", "pods", "-n", ns, "--as=jane")
    assert refused.returncode != 0
    assert ('User "jane" cannot list resource "pods" in API group "metrics.k8s.io"'
            in refused.stderr), refused.stderr  # was: answered every authenticated user
    bound = kubectl(data_dir, "create", "rolebinding", "jane-view", "--clusterrole=view",
                    "--user=jane", "-n", ns)
    assert bound.returncode == 0, bound.stderr
    allowed = kubectl(data_dir, "top", "pods", "-n", ns, "--as=jane")
    assert "Forbidden" not in allowed.stderr, allowed.stderr
