"""SPEC AX1, AX2, AX5, AX6: the API surface real tools use, with the real
`kubectl` and the official Python client against a real apiserver and etcd: JSON patch,
server-side apply with field managers and conflicts, `kubectl diff` / dry run, watch
`timeoutSeconds`, deletecollection with a label selector, OpenAPI (`kubectl explain`),
access reviews (`kubectl auth can-i|whoami`) and Status bodies on the wire."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kubernetes import client, config, watch

from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.cluster.kubeconfig import write_kubeconfig
from skiff.cluster.processes import free_port
from tests.integration.cluster import Cluster
from tests.integration.officialclient import labels_of, name_of

POD = """apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {{app: {app}{extra}}}}}
spec:
  containers: [{{name: main, image: {image}, command: [sleep, "3600"]}}]
"""


class Api:
    def __init__(self, config_path: Path, url: str, target: str) -> None:
        self.config, self.url, self.target = config_path, url, target

    def kubectl(self, *args: str, stdin: str | None = None
                ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kubectl", "--kubeconfig", str(self.config), *args],
                              input=stdin, capture_output=True, text=True, timeout=60)

    def get(self, name: str) -> Obj:
        result = self.kubectl("get", "pod", name, "-o", "json")
        assert result.returncode == 0, result.stderr
        return dict(json.loads(result.stdout))


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    assert shutil.which("kubectl"), "kubectl is not installed"
    root = tmp_path_factory.mktemp("api-surface")
    port = free_port()
    cluster = Cluster(root, apiserver_args=["--http-port", str(port)]).start()
    try:
        url = f"http://127.0.0.1:{port}"
        yield Api(write_kubeconfig(root, url), url, cluster.api_target)
    finally:
        cluster.stop()


@pytest.fixture
async def api_grpc(api: Api) -> AsyncIterator[ApiClient]:
    async with ApiClient(api.target, retry_seconds=20) as grpc_client:
        yield grpc_client


@pytest.fixture(scope="module")
def core(api: Api) -> Iterator[client.CoreV1Api]:
    api_client = config.new_client_from_config(config_file=str(api.config))
    with api_client:
        yield client.CoreV1Api(api_client)


def test_AX1_kubectl_patch_type_json_adds_a_label(api: Api, core: client.CoreV1Api) -> None:
    assert api.kubectl("create", "-f", "-", stdin=POD.format(
        name="jp", app="jp", extra="", image="busybox")).returncode == 0
    patched = api.kubectl("patch", "pod", "jp", "--type=json", "-p",
                          '[{"op":"add","path":"/metadata/labels/tier","value":"front"}]')
    assert patched.returncode == 0, patched.stderr
    assert api.get("jp")["metadata"]["labels"] == {"app": "jp", "tier": "front"}
    # the official client sends a list body as application/json-patch+json
    core.patch_namespaced_pod("jp", "default", [
        {"op": "replace", "path": "/metadata/labels/tier", "value": "back"}])
    assert labels_of(core.read_namespaced_pod("jp", "default"))["tier"] == "back"


def test_AX1_server_side_apply_creates_updates_and_reports_a_conflict(api: Api) -> None:
    first = api.kubectl("apply", "--server-side", "--field-manager=alice", "-f", "-",
                        stdin=POD.format(name="ssa", app="ssa", extra=", tier: a",
                                         image="busybox"))
    assert first.returncode == 0, first.stderr
    assert "pod/ssa serverside-applied" in first.stdout
    updated = api.kubectl("apply", "--server-side", "--field-manager=alice", "-f", "-",
                          stdin=POD.format(name="ssa", app="ssa", extra=", tier: b",
                                           image="busybox"))
    assert updated.returncode == 0, updated.stderr
    pod = api.get("ssa")
    assert pod["metadata"]["labels"]["tier"] == "b"
    shown = api.kubectl("get", "pod", "ssa", "-o", "yaml", "--show-managed-fields")
    assert "manager: alice" in shown.stdout and "operation: Apply" in shown.stdout
    conflict = api.kubectl("apply", "--server-side", "--field-manager=bob", "-f", "-",
                           stdin=POD.format(name="ssa", app="ssa", extra=", tier: c",
                                            image="busybox"))
    assert conflict.returncode != 0
    assert 'conflict with "alice": .metadata.labels.tier' in conflict.stderr, conflict.stderr
    forced = api.kubectl("apply", "--server-side", "--field-manager=bob", "--force-conflicts",
                         "-f", "-", stdin=POD.format(name="ssa", app="ssa", extra=", tier: c",
                                                     image="busybox"))
    assert forced.returncode == 0, forced.stderr
    assert api.get("ssa")["metadata"]["labels"]["tier"] == "c"


def test_AX2_kubectl_diff_and_server_dry_run_store_nothing(api: Api) -> None:
    assert api.kubectl("apply", "-f", "-", stdin=POD.format(
        name="dr", app="dr", extra="", image="busybox")).returncode == 0
    before = api.get("dr")["metadata"]["resourceVersion"]
    changed = POD.format(name="dr", app="dr", extra=", tier: new", image="busybox")
    diff = api.kubectl("diff", "-f", "-", stdin=changed)
    assert diff.returncode == 1, diff.stderr  # 1: differences found
    assert "+    tier: new" in diff.stdout, diff.stdout
    dry = api.kubectl("apply", "--dry-run=server", "-f", "-", stdin=changed)
    assert dry.returncode == 0 and "(server dry run)" in dry.stdout, dry.stderr
    created = api.kubectl("create", "--dry-run=server", "-f", "-", stdin=POD.format(
        name="dr-new", app="dr", extra="", image="busybox"))
    assert created.returncode == 0, created.stderr
    deleted = api.kubectl("delete", "pod", "dr", "--dry-run=server")
    assert deleted.returncode == 0, deleted.stderr
    after = api.get("dr")
    assert after["metadata"]["resourceVersion"] == before
    assert "tier" not in after["metadata"]["labels"]
    assert "deletionTimestamp" not in after["metadata"]
    assert api.kubectl("get", "pod", "dr-new").returncode != 0


def test_AX2_watch_timeout_seconds_ends_the_watch(core: client.CoreV1Api) -> None:
    started = time.monotonic()
    events = list(watch.Watch().stream(core.list_namespaced_pod, "default",
                                       timeout_seconds=2))
    assert time.monotonic() - started < 10, "the watch outlived timeoutSeconds=2"
    assert all(e["type"] == "ADDED" for e in events)


def test_AX2_deletecollection_with_label_selector_deletes_only_matching(
        core: client.CoreV1Api, api: Api) -> None:
    for name, app in (("dc-a", "doomed"), ("dc-b", "doomed"), ("dc-c", "kept")):
        assert api.kubectl("create", "-f", "-", stdin=POD.format(
            name=name, app=app, extra="", image="busybox")).returncode == 0
    core.delete_collection_namespaced_pod("default", label_selector="app=doomed")
    left = {name_of(p) for p in core.list_namespaced_pod("default").items}
    assert "dc-c" in left and not {"dc-a", "dc-b"} & left


def test_AX5_kubectl_explain_prints_kubernetes_field_docs(api: Api) -> None:
    explained = api.kubectl("explain", "pod.spec.containers")
    assert explained.returncode == 0, explained.stderr
    assert "List of containers belonging to the pod" in explained.stdout
    assert "imagePullPolicy" in explained.stdout
    fence = api.kubectl("explain", "fences.spec")
    assert fence.returncode == 0 and "nodeName" in fence.stdout, fence.stderr


def test_AX5_kubectl_auth_can_i_and_whoami_answer(api: Api) -> None:
    can = api.kubectl("auth", "can-i", "create", "pods")
    assert can.returncode == 0 and can.stdout.strip() == "yes", can.stdout + can.stderr
    why = api.kubectl("auth", "can-i", "create", "pods", "-v=8")
    assert "every request is allowed" in why.stderr
    listed = api.kubectl("auth", "can-i", "--list")
    assert listed.returncode == 0 and "*.*" in listed.stdout, listed.stdout + listed.stderr
    whoami = api.kubectl("auth", "whoami")
    assert whoami.returncode == 0 and "skiff-admin" in whoami.stdout, whoami.stderr


def test_AX6_not_found_status_on_the_wire(api: Api) -> None:
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{api.url}/api/v1/namespaces/default/pods/nope", timeout=30)
    assert err.value.read() == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"pods \\"nope\\" not found","reason":"NotFound","details":{"name":"nope",'
        b'"kind":"pods"},"code":404}\n')


async def test_AX2_grpc_watch_timeout_seconds_ends_the_stream(api_grpc: ApiClient) -> None:
    started = time.monotonic()
    async for _ in api_grpc.watch("pods", "default", timeout_seconds=2):
        pass  # the stream ends by itself; no exception
    assert time.monotonic() - started < 10, "the gRPC watch outlived timeoutSeconds=2"


def test_AX2_send_initial_events_ends_with_the_initial_events_end_bookmark(api: Api) -> None:
    assert api.kubectl("create", "-f", "-", stdin=POD.format(
        name="ie", app="ie", extra="", image="busybox")).returncode == 0
    url = (f"{api.url}/api/v1/namespaces/default/pods?watch=true&sendInitialEvents=true"
           "&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&labelSelector=app%3Die"
           "&timeoutSeconds=2")
    with urllib.request.urlopen(url, timeout=30) as stream:
        events = [json.loads(line) for line in stream.read().splitlines()]
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    assert events[1]["object"]["metadata"]["annotations"] == {
        "k8s.io/initial-events-end": "true"}
