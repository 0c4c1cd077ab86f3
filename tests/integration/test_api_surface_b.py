"""The API surface against a whole `skiff up` cluster, with the real kubectl and the
official Python client: ServiceAccounts and tokens (SPEC AX3), PersistentVolumes and
StorageClasses (AX4), metrics.k8s.io (AX5)."""

from __future__ import annotations

import base64
import functools
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client import ApiException

from tests.integration.officialclient import (
    let_default_account_list_pods,
    meta,
    name_of,
    phase_of,
    present,
)
from tests.integration.skiffcli import skiff_up
from tests.integration.waiting import until

CONFIG = """kubelet:
  nodeStatusUpdateFrequency: 1s
  metricsResolution: 1s
"""


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with skiff_up(tmp_path_factory.mktemp("surface-b"), config=CONFIG) as data_dir:
        yield data_dir


@pytest.fixture(scope="module")
def api_client(data_dir: Path) -> Iterator[client.ApiClient]:
    with config.new_client_from_config(config_file=str(data_dir / "kubeconfig")) as api:
        yield api


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


def kubectl(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", str(data_dir / "kubeconfig"), *args],
                          text=True, capture_output=True, timeout=60)


def new_namespace(core: client.CoreV1Api) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


PACKAGES = "/opt/python-packages"


def pod(name: str, command: list[str], *, mounts: dict[str, str] | None = None,
        **spec: Any) -> client.V1Pod:
    """A one-container pod; `mounts` maps volume names to mount paths."""
    return client.V1Pod(metadata=client.V1ObjectMeta(name=name), spec=client.V1PodSpec(
        termination_grace_period_seconds=1,
        containers=[client.V1Container(
            name="main", image="busybox", command=command,
            volume_mounts=[client.V1VolumeMount(name=v, mount_path=p)
                           for v, p in (mounts or {}).items()] or None)],
        **spec))


def jwt_claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    padded = payload + "=" * (-len(payload) % 4)
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(padded))
    return decoded


# -- AX3 ServiceAccounts ----------------------------------------------------------------

def test_AX3_new_namespace_gets_default_service_account_and_pod_gets_it(
        core: client.CoreV1Api, data_dir: Path) -> None:
    ns = new_namespace(core)
    # Created at once: admission waits briefly for the controller's `default` account.
    created = core.create_namespaced_pod(ns, pod("p", ["sleep", "60"]))
    assert present(created.spec).service_account_name == "default"
    accounts = core.list_namespaced_service_account(ns)
    assert [name_of(a) for a in accounts.items] == ["default"]
    got = kubectl(data_dir, "get", "sa", "-n", ns)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split("\n")[0].split() == ["NAME", "SECRETS", "AGE"]
    assert got.stdout.split("\n")[1].split()[0] == "default"


def test_AX3_pod_whose_service_account_is_missing_is_refused(
        core: client.CoreV1Api) -> None:
    ns = new_namespace(core)
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod(ns, pod("p", ["true"], service_account_name="robot"))
    assert refused.value.status == 403
    body = json.loads(present(refused.value.body))
    assert body["message"] == (f'pods "p" is forbidden: error looking up service account '
                               f'{ns}/robot: serviceaccount "robot" not found')
    core.create_namespaced_service_account(ns, client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name="robot")))
    accepted = core.create_namespaced_pod(ns, pod("p", ["true"], service_account_name="robot"))
    assert present(accepted.spec).service_account_name == "robot"


def test_AX3_token_request_issues_a_token_for_the_service_account(
        core: client.CoreV1Api) -> None:
    ns = new_namespace(core)
    until(lambda: core.list_namespaced_service_account(ns).items, "the default account")
    answer = core.create_namespaced_service_account_token("default", ns,
                                                          client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=["skiff-test"], expiration_seconds=3600)))
    status = present(answer.status)
    claims = jwt_claims(present(status.token))
    assert claims["sub"] == f"system:serviceaccount:{ns}:default"
    assert claims["aud"] == ["skiff-test"]
    assert claims["exp"] - claims["iat"] == 3600
    assert status.expiration_timestamp is not None
    with pytest.raises(ApiException) as missing:
        core.create_namespaced_service_account_token("nobody", ns,
                                                     client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[])))
    assert missing.value.status == 404


IN_CLUSTER = """
import os
from kubernetes import client
sa = "var/run/secrets/kubernetes.io/serviceaccount"  # the mount, relative to the pod dir
token = open(os.path.join(sa, "token")).read()
namespace = open(os.path.join(sa, "namespace")).read()
cfg = client.Configuration()
cfg.host = "https://%s:%s" % (os.environ["KUBERNETES_SERVICE_HOST"],
                              os.environ["KUBERNETES_SERVICE_PORT"])
cfg.ssl_ca_cert = os.path.join(sa, "ca.crt")  # the cluster CA: the apiserver is verified
cfg.api_key = {"authorization": "Bearer " + token}
with client.ApiClient(cfg) as api:
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace)
print("namespace=%s pods=%s" % (namespace, ",".join(sorted(p.metadata.name for p in pods.items))))
"""


def test_AX3_pod_with_the_official_client_lists_pods_with_its_token(
        core: client.CoreV1Api) -> None:
    ns = new_namespace(core)
    let_default_account_list_pods(core, ns)
    # hostNetwork: the apiserver listens on the node's loopback, which a sandboxed pod's
    # own network namespace cannot reach yet (README, pod sandboxes).
    # Its own root (AU8): the official client reaches the container's python3 as an image
    # would carry it, here through a read-only hostPath of the installed packages.
    lister = pod("lister", ["python3", "-c", IN_CLUSTER], mounts={"packages": PACKAGES},
                 restart_policy="Never", host_network=True, volumes=[client.V1Volume(
                     name="packages", host_path=client.V1HostPathVolumeSource(
                         path=str(Path(client.__file__).parents[2])))])
    container = present(lister.spec).containers[0]
    container.env = [client.V1EnvVar(name="PYTHONPATH", value=PACKAGES)]
    present(container.volume_mounts)[0].read_only = True
    created = core.create_namespaced_pod(ns, lister)
    spec = present(created.spec)
    volumes = [v for v in present(spec.volumes) if v.name.startswith("kube-api-access-")]
    assert len(volumes) == 1 and volumes[0].projected is not None
    mounts = present(spec.containers[0].volume_mounts)
    assert [(m.mount_path, m.read_only) for m in mounts if m.name != "packages"] == [
        ("/var/run/secrets/kubernetes.io/serviceaccount", True)]
    phase = until(lambda: phase_of(core.read_namespaced_pod("lister", ns))
                  in ("Succeeded", "Failed") and core.read_namespaced_pod("lister", ns),
                  "the in-cluster pod to finish", timeout=90).status.phase
    log = core.read_namespaced_pod_log("lister", ns)
    assert phase == "Succeeded", log
    assert log == f"namespace={ns} pods=lister\n"


# -- AX4 PersistentVolumes and StorageClasses -----------------------------------------------

def claim(name: str, size: str, *, storage_class: str | None = None,
          modes: tuple[str, ...] = ("ReadWriteOnce",)) -> client.V1PersistentVolumeClaim:
    return client.V1PersistentVolumeClaim(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PersistentVolumeClaimSpec(
            access_modes=list(modes), storage_class_name=storage_class,
            resources=client.V1VolumeResourceRequirements(requests={"storage": size})))


def volume(name: str, size: str, path: Path, *, storage_class: str,
           modes: tuple[str, ...] = ("ReadWriteOnce",)) -> client.V1PersistentVolume:
    return client.V1PersistentVolume(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PersistentVolumeSpec(
            capacity={"storage": size}, access_modes=list(modes),
            storage_class_name=storage_class, persistent_volume_reclaim_policy="Retain",
            host_path=client.V1HostPathVolumeSource(path=str(path))))


def test_AX4_claim_binds_to_the_smallest_matching_volume_and_is_released_on_delete(
        core: client.CoreV1Api, data_dir: Path, tmp_path: Path) -> None:
    ns = new_namespace(core)
    cls = f"manual-{uuid.uuid4().hex[:6]}"
    for name, size, modes in (("small", "1Gi", ("ReadWriteOnce",)),
                              ("big", "5Gi", ("ReadWriteOnce",)),
                              ("huge", "50Gi", ("ReadWriteOnce",)),
                              ("shared", "5Gi", ("ReadOnlyMany",))):
        core.create_persistent_volume(volume(f"{cls}-{name}", size, tmp_path / name,
                                             storage_class=cls, modes=modes))
    core.create_namespaced_persistent_volume_claim(ns, claim("data", "2Gi",
                                                             storage_class=cls))
    bound = until(lambda: phase_of(c := core.read_namespaced_persistent_volume_claim(
                  "data", ns)) == "Bound" and c, "the claim Bound")
    assert bound.spec.volume_name == f"{cls}-big"
    assert bound.status.capacity == {"storage": "5Gi"}
    pv = core.read_persistent_volume(f"{cls}-big")
    assert phase_of(pv) == "Bound"
    claim_ref = present(present(pv.spec).claim_ref)
    assert (claim_ref.namespace, claim_ref.name) == (ns, "data")
    got = kubectl(data_dir, "get", "pv", f"{cls}-big")
    assert got.returncode == 0, got.stderr
    assert got.stdout.split("\n")[1].split()[:6] == [f"{cls}-big", "5Gi", "RWO", "Retain",
                                                     "Bound", f"{ns}/data"]
    assert phase_of(core.read_persistent_volume(f"{cls}-small")) == "Available"

    # The attach/detach path works on the PV: its attachment is named after it and the
    # pod's mount is the volume's hostPath.
    core.create_namespaced_pod(ns, pod(
        "writer", ["sh", "-c", "echo static > data/f"], restart_policy="Never",
        mounts={"data": "/data"},
        volumes=[client.V1Volume(name="data", persistent_volume_claim=client.
                                 V1PersistentVolumeClaimVolumeSource(claim_name="data"))]))
    until(lambda: phase_of(core.read_namespaced_pod("writer", ns)) == "Succeeded",
          "the writer pod to succeed", timeout=90)
    assert (tmp_path / "big" / "f").read_text() == "static\n"
    attachment = client.StorageV1Api(core.api_client).read_volume_attachment(f"{cls}-big")
    assert attachment.spec.source.persistent_volume_name == f"{cls}-big"
    core.delete_namespaced_pod("writer", ns, grace_period_seconds=0)

    core.delete_namespaced_persistent_volume_claim("data", ns)
    until(lambda: phase_of(core.read_persistent_volume(f"{cls}-big")) == "Released",
          "the Retain volume Released")


def test_AX4_claim_of_the_default_class_gets_a_provisioned_volume_a_pod_can_use(
        core: client.CoreV1Api, data_dir: Path) -> None:
    # The controller-manager creates the default class once its informers sync: a test that
    # runs first on a fresh cluster can get here before that.
    classes = until(lambda: (r := kubectl(data_dir, "get", "storageclass")).returncode == 0
                    and "standard" in r.stdout and r, "the default StorageClass listed")
    # other tests of the module add classes of their own (sorted by name, before or after)
    standard = next(line.split() for line in classes.stdout.splitlines()
                    if line.startswith("standard "))
    assert standard[:5] == ["standard", "(default)", "skiff.io/local", "Delete", "Immediate"]
    ns = new_namespace(core)
    created = core.create_namespaced_persistent_volume_claim(ns, claim("data", "1Gi"))
    assert present(created.spec).storage_class_name == "standard"  # DefaultStorageClass
    bound = until(lambda: phase_of(c := core.read_namespaced_persistent_volume_claim(
                  "data", ns)) == "Bound" and c, "the claim Bound")
    assert bound.spec.storage_class_name == "standard"
    assert bound.spec.volume_name == f"pvc-{meta(created).uid}"
    pv = core.read_persistent_volume(bound.spec.volume_name)
    pv_spec = present(pv.spec)
    assert present(pv_spec.csi).driver == "skiff.io/local"
    assert pv_spec.persistent_volume_reclaim_policy == "Delete"
    assert pv_spec.storage_class_name == "standard"

    core.create_namespaced_pod(ns, pod(
        "writer", ["sh", "-c", "echo written > data/f"], restart_policy="Never",
        mounts={"data": "/data"},
        volumes=[client.V1Volume(name="data", persistent_volume_claim=client.
                                 V1PersistentVolumeClaimVolumeSource(claim_name="data"))]))
    until(lambda: phase_of(core.read_namespaced_pod("writer", ns)) in ("Succeeded",
                                                                          "Failed"),
          "the writer pod to finish", timeout=90)
    assert (data_dir / "volumes" / bound.spec.volume_name / "f").read_text() == "written\n"

    core.delete_namespaced_pod("writer", ns, grace_period_seconds=0)
    core.delete_namespaced_persistent_volume_claim("data", ns)

    def volume_gone() -> bool:
        try:
            core.read_persistent_volume(bound.spec.volume_name)
        except ApiException as err:
            return bool(err.status == 404)
        return False

    until(volume_gone, "the Delete volume reclaimed", timeout=90)
    assert not (data_dir / "volumes" / bound.spec.volume_name).exists()  # its data too


def test_AX4_wait_for_first_consumer_binds_once_a_node_is_selected(
        core: client.CoreV1Api, data_dir: Path) -> None:
    cls = f"wait-{uuid.uuid4().hex[:6]}"
    client.StorageV1Api(core.api_client).create_storage_class(client.V1StorageClass(
        metadata=client.V1ObjectMeta(name=cls), provisioner="skiff.io/local",
        volume_binding_mode="WaitForFirstConsumer"))
    ns = new_namespace(core)
    core.create_namespaced_persistent_volume_claim(ns, claim("data", "1Gi",
                                                             storage_class=cls))
    until(lambda: any(e.reason == "WaitForFirstConsumer" for e in core.list_namespaced_event(
        ns).items), "the WaitForFirstConsumer event")
    assert phase_of(core.read_namespaced_persistent_volume_claim("data", ns)) == "Pending"
    core.create_namespaced_pod(ns, pod(
        "user", ["sleep", "60"], mounts={"data": "/data"},
        volumes=[client.V1Volume(name="data", persistent_volume_claim=client.
                                 V1PersistentVolumeClaimVolumeSource(claim_name="data"))]))
    bound = until(lambda: phase_of(c := core.read_namespaced_persistent_volume_claim(
                  "data", ns)) == "Bound" and c, "the claim Bound after scheduling",
                  timeout=90)
    assert bound.metadata.annotations["volume.kubernetes.io/selected-node"] == "node-1"
    until(lambda: phase_of(core.read_namespaced_pod("user", ns)) == "Running",
          "the consumer Running", timeout=90)



@pytest.mark.parametrize("mode", ["Immediate", "WaitForFirstConsumer"])
def test_AX4_pod_with_an_unbound_immediate_claim_stays_pending_until_it_binds(
        core: client.CoreV1Api, mode: str) -> None:
    """Kubernetes' VolumeBinding PreFilter: a claim whose class does not exist (the
    StatefulSet example of the Kubernetes documentation names `my-storage-class`) cannot
    bind, so its pod is not placed on a node to wait there. Once the class exists the pod
    is scheduled and runs: an Immediate claim is bound first (a claim event requeues the
    pod), a WaitForFirstConsumer one after the scheduler picks a node (the class's creation
    requeues the pod)."""
    cls = f"later-{uuid.uuid4().hex[:6]}"
    ns = new_namespace(core)
    core.create_namespaced_persistent_volume_claim(ns, claim("data", "1Gi",
                                                             storage_class=cls))
    core.create_namespaced_pod(ns, pod(
        "user", ["sleep", "60"], mounts={"data": "/data"},
        volumes=[client.V1Volume(name="data", persistent_volume_claim=client.
                                 V1PersistentVolumeClaimVolumeSource(claim_name="data"))]))

    def unschedulable() -> Any:
        conditions = present(core.read_namespaced_pod("user", ns).status).conditions or []
        return next((c for c in conditions if c.type == "PodScheduled"
                     and c.reason == "Unschedulable"), None)

    condition = until(unschedulable, "PodScheduled=False, Unschedulable")
    assert "pod has unbound immediate PersistentVolumeClaims" in condition.message
    assert not present(core.read_namespaced_pod("user", ns).spec).node_name
    assert any(e.reason == "FailedScheduling" and "unbound immediate" in present(e.message)
               for e in core.list_namespaced_event(ns).items)
    # Past any backoff a claim event may have started: from here only the class's
    # creation (WaitForFirstConsumer) or the claim's binding (Immediate) requeues the pod.
    time.sleep(3)

    client.StorageV1Api(core.api_client).create_storage_class(client.V1StorageClass(
        metadata=client.V1ObjectMeta(name=cls), provisioner="skiff.io/local",
        volume_binding_mode=mode))
    until(lambda: phase_of(core.read_namespaced_persistent_volume_claim("data", ns))
          == "Bound", "the claim Bound once its class exists", timeout=90)
    until(lambda: phase_of(core.read_namespaced_pod("user", ns)) == "Running",
          "the pod scheduled and Running", timeout=90)

# -- AX5 metrics.k8s.io ---------------------------------------------------------------------

def cpu_millis(text: str) -> float:
    if text.endswith("m"):
        return float(text[:-1])
    if text.endswith("n"):
        return float(text[:-1]) / 1e6
    return float(text) * 1000


def test_AX5_kubectl_top_pods_shows_a_busy_pod_using_more_cpu_than_an_idle_one(
        core: client.CoreV1Api, data_dir: Path) -> None:
    ns = new_namespace(core)
    core.create_namespaced_pod(ns, pod("busy", ["sh", "-c", "while :; do :; done"]))
    core.create_namespaced_pod(ns, pod("idle", ["sleep", "600"]))
    try:
        def running(name: str) -> bool:
            return phase_of(core.read_namespaced_pod(name, ns)) == "Running"

        for name in ("busy", "idle"):
            until(functools.partial(running, name), f"{name} Running", timeout=90)

        def top() -> dict[str, tuple[float, str]] | None:
            out = kubectl(data_dir, "top", "pods", "-n", ns, "--no-headers")
            if out.returncode != 0:
                return None
            rows = {line.split()[0]: (cpu_millis(line.split()[1]), line.split()[2])
                    for line in out.stdout.splitlines() if line.strip()}
            # a spinning shell: most of a core, against a sleep (the first sample's window
            # may still hold the pod's start, and a loaded machine shares its cores)
            ready = {"busy", "idle"} <= set(rows) and rows["busy"][0] > rows["idle"][0] + 100
            return rows if ready else None

        rows = until(top, "kubectl top pods to show the busy pod ahead", timeout=90)
        assert rows["idle"][0] < 50, rows
        assert rows["busy"][1].endswith("Mi") and rows["idle"][1].endswith("Mi")

        metrics = client.CustomObjectsApi(core.api_client).get_namespaced_custom_object(
            "metrics.k8s.io", "v1beta1", ns, "pods", "busy")
        assert isinstance(metrics, dict)
        assert metrics["kind"] == "PodMetrics"
        assert [c["name"] for c in metrics["containers"]] == ["main"]

        nodes = kubectl(data_dir, "top", "nodes", "--no-headers")
        assert nodes.returncode == 0, nodes.stderr
        assert nodes.stdout.split()[0] == "node-1"
    finally:
        core.delete_namespaced_pod("busy", ns, grace_period_seconds=0)
