"""What the official Python client and other client libraries hit, against a real
etcd + apiserver through the HTTP front."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from skiff.cli import resources
from skiff.client import ApiClient
from skiff.cluster.processes import free_port
from tests.integration.cluster import Cluster
from tests.integration.officialclient import meta, name_of, present

pytestmark = pytest.mark.integration

# The TLS Secret example of the Kubernetes documentation wraps its base64 at 64 columns.
PEM = b"-----BEGIN CERTIFICATE-----\n" + b"A" * 120 + b"\n-----END CERTIFICATE-----\n"
WRAPPED = "\n".join(base64.b64encode(PEM).decode()[i:i + 64]
                    for i in range(0, len(base64.b64encode(PEM)), 64))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, str]]:
    port = free_port()
    started = Cluster(tmp_path_factory.mktemp("client-defects"),
                      apiserver_args=["--http-port", str(port)]).start()
    try:
        yield started, f"http://127.0.0.1:{port}"
    finally:
        started.stop()


@pytest.fixture(scope="module")
def front(cluster: tuple[Cluster, str]) -> str:
    return cluster[1]


@pytest.fixture(scope="module")
def core(front: str) -> Iterator[client.CoreV1Api]:
    configuration = client.Configuration(host=front)
    with client.ApiClient(configuration) as api_client:
        yield client.CoreV1Api(api_client)


@pytest.fixture(scope="module")
def apps(front: str) -> Iterator[client.AppsV1Api]:
    with client.ApiClient(client.Configuration(host=front)) as api_client:
        yield client.AppsV1Api(api_client)


def _post(front: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(f"{front}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_defect3_a_field_selector_with_an_empty_term_is_read_as_kubernetes_reads_it(
        core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="sel-x"), data={"k": "v"}))
    core.create_namespaced_config_map("default", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="sel-y"), data={"k": "v"}))
    listed = core.list_namespaced_config_map("default", field_selector="metadata.name=sel-x,")
    assert [name_of(cm) for cm in listed.items] == ["sel-x"]
    both = core.list_namespaced_config_map("default", field_selector=",metadata.name!=sel-y,,")
    assert "sel-x" in [name_of(cm) for cm in both.items]


def test_defect2_a_resource_version_that_is_not_a_revision_is_dropped_on_create(
        core: client.CoreV1Api) -> None:
    for name, version in (("rv-word", "v1"), ("rv-zero", "0")):
        made = core.create_namespaced_config_map("default", client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=name, resource_version=version)))
        assert meta(made).resource_version not in (None, "", version)
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("default", client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="rv-real", resource_version="12")))
    assert err.value.status == 400
    assert "resourceVersion should not be set on objects to be created" in present(
        err.value.body)


def test_defect4_secret_data_in_wrapped_base64_is_accepted_and_served_canonical(
        core: client.CoreV1Api) -> None:
    made = core.create_namespaced_secret("default", client.V1Secret(
        metadata=client.V1ObjectMeta(name="tls-wrapped"), type="kubernetes.io/tls",
        data={"tls.crt": WRAPPED, "tls.key": WRAPPED}))
    assert base64.b64decode(present(made.data)["tls.crt"]) == PEM
    read = core.read_namespaced_secret("tls-wrapped", "default")
    assert present(read.data)["tls.crt"] == base64.b64encode(PEM).decode()


@pytest.mark.parametrize(("kind", "path", "field"), [
    pytest.param("Secret", "secrets", "data", id="secret-data"),
    pytest.param("ConfigMap", "configmaps", "binaryData", id="configmap-binary-data"),
])
def test_defect4_bytes_that_are_not_base64_are_400_as_kubernetes_decodes_them(
        front: str, kind: str, path: str, field: str) -> None:
    status, body = _post(front, f"/api/v1/namespaces/default/{path}", {
        "apiVersion": "v1", "kind": kind, "metadata": {"name": f"bad-{path}"},
        field: {"blob": "not base64!"}})
    assert status == 400, body
    assert body["reason"] == "BadRequest"
    assert body["message"] == (f'{kind} in version "v1" cannot be handled as a {kind}: '
                               "illegal base64 data at input byte 3")


@pytest.mark.parametrize(("create", "kind", "zero"), [
    pytest.param("create_namespaced_deployment", "Deployment", {}, id="deployment"),
    pytest.param("create_namespaced_replica_set", "ReplicaSet", {"replicas": 0},
                 id="replicaset"),
    pytest.param("create_namespaced_stateful_set", "StatefulSet",
                 {"replicas": 0, "availableReplicas": 0}, id="statefulset"),
    pytest.param("create_namespaced_daemon_set", "DaemonSet",
                 {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                  "desiredNumberScheduled": 0, "numberReady": 0}, id="daemonset"),
])
def test_defect5_workloads_have_their_zero_status_from_the_first_write(
        front: str, apps: client.AppsV1Api, create: str, kind: str,
        zero: dict[str, int]) -> None:
    name = f"zero-{kind.lower()}"
    labels = {"app": name}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [
        {"name": "main", "image": "busybox", "command": ["sleep", "3600"]}]}}
    spec: dict[str, Any] = {"selector": {"matchLabels": labels}, "template": template}
    if kind == "StatefulSet":
        spec["serviceName"] = name
    body = {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name},
            "spec": spec, "status": {"replicas": 7}}
    status, made = _post(front, f"/apis/apps/v1/namespaces/default/{kind.lower()}s", body)
    assert status == 201, made
    assert made["status"] == zero  # whatever the client sent, as PrepareForCreate does
    # the official client reads it without a missing-key surprise
    read = getattr(apps, create.replace("create_", "read_"))(name, "default")
    assert read.status is not None
    if kind != "Deployment":
        assert read.status.to_dict().get("replicas", 0) == 0


def test_defect5_a_job_has_an_empty_status_from_the_first_write(front: str) -> None:
    status, made = _post(front, "/apis/batch/v1/namespaces/default/jobs", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "zero-job"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "main", "image": "busybox", "command": ["true"]}]}}}})
    assert status == 201, made
    assert made["status"] == {}


async def test_defect7_skiff_label_never_fails_on_a_concurrent_status_write(
        cluster: tuple[Cluster, str]) -> None:
    """A kubelet's heartbeat between `skiff label`'s read and its write made it a 409;
    kubectl's patch never conflicts, and neither does the CLI now."""
    async with ApiClient(cluster[0].api_target) as api:
        await api.create({"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": "racy"}, "status": {}})
        stop = asyncio.Event()

        async def heartbeat() -> int:
            beats = 0
            while not stop.is_set():
                node = await api.get("nodes", "racy")
                node["status"]["conditions"] = [{"type": "Ready", "status": "True",
                                                 "reason": f"beat-{beats}"}]
                del node["metadata"]["resourceVersion"]  # as the kubelet's status patch
                await api.update_status(node)
                beats += 1
                await asyncio.sleep(0.02)  # a heartbeat far faster than a kubelet's
            return beats

        beating = asyncio.create_task(heartbeat())
        printed: list[str] = []
        try:
            for i in range(15):
                await resources.label(api, "node", "racy", [f"k=v{i}"], namespace=None,
                                      overwrite=True, out=printed.append)
        finally:
            stop.set()
            beats = await beating
        assert printed == ["node/racy labeled"] * 15
        assert beats > 0  # the status writes ran while the labels were made
        assert (await api.get("nodes", "racy"))["metadata"]["labels"]["k"] == "v14"


@pytest.mark.parametrize(("value", "watching"), [
    pytest.param("True", True, id="python-True"), pytest.param("true", True, id="true"),
    pytest.param("1", True, id="1"), pytest.param("", True, id="empty"),
    pytest.param("False", False, id="python-False"), pytest.param("0", False, id="0"),
])
def test_defect1_boolean_query_parameters_are_read_as_kubernetes_reads_them(
        front: str, core: client.CoreV1Api, value: str, watching: bool) -> None:
    """Every value but `false`/`0` (any case) is true: `?watch=True` (clients that format
    Python booleans) is a watch, not a list."""
    with contextlib.suppress(ApiException):  # one object for every parameter case
        core.create_namespaced_config_map("default", client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="bool-watched"), data={"k": "v"}))
    url = (f"{front}/api/v1/namespaces/default/configmaps?watch={value}"
           "&timeoutSeconds=1&fieldSelector=metadata.name%3Dbool-watched")
    with urllib.request.urlopen(url, timeout=30) as answer:
        body = answer.read().decode()
    if watching:
        events = [json.loads(line) for line in body.splitlines() if line]
        assert events and all(e["type"] in ("ADDED", "BOOKMARK") for e in events), body
    else:
        assert json.loads(body)["kind"] == "ConfigMapList"


def test_au5_a_namespaced_object_is_never_addressed_without_its_namespace(
        front: str, core: client.CoreV1Api) -> None:
    """/api/v1/configmaps serves the all-namespaces list; /api/v1/configmaps/x is no path
    of Kubernetes' (404), and a write there is 405 — it never reads or writes default/x."""
    core.create_namespaced_config_map("default", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="scoped-x"), data={"k": "v"}))
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{front}/api/v1/configmaps/scoped-x", timeout=30)
    err.value.close()
    assert err.value.code == 404
    status, body = _post(front, "/api/v1/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nowhere"}})
    assert (status, body["reason"]) == (405, "MethodNotAllowed")
    with urllib.request.urlopen(f"{front}/api/v1/configmaps", timeout=30) as answer:
        assert "scoped-x" in {i["metadata"]["name"] for i in json.loads(answer.read())["items"]}
