"""SPEC AU10: hostile request bodies and connections get
Kubernetes' answers, bounded in size and time, and leave no traceback in the apiserver log.

Against a real etcd + apiserver (insecure mode, Kubernetes REST port and gRPC): a YAML
alias bomb, JSON/YAML nested past any decoder's depth, a client that sends its headers
slowly, a request line over the limit, and body fields of the wrong JSON type.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from skiff.api import ApiError
from skiff.client import ApiClient
from skiff.cluster.processes import free_port
from tests.integration.cluster import Cluster
from tests.integration.rawsocket import read_until_closed

pytestmark = pytest.mark.integration

HEADER_TIMEOUT = 1.0  # --http-read-header-timeout, compressed from Kubernetes' 32 s


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, int]]:
    root = tmp_path_factory.mktemp("au10-hygiene")
    port = free_port()
    cluster = Cluster(root, apiserver_args=[
        "--http-port", str(port), "--http-read-header-timeout", f"{HEADER_TIMEOUT}s"]).start()
    try:
        yield cluster, port
    finally:
        cluster.stop()


@pytest.fixture
async def api(front: tuple[Cluster, int]) -> AsyncIterator[ApiClient]:
    async with ApiClient(front[0].api_target, retry_seconds=20) as client:
        yield client


def _log(cluster: Cluster) -> Path:
    return Path(cluster.apiserver.log_path)


def request(port: int, method: str, path: str, body: bytes | None = None, *,
            content_type: str = "application/json") -> tuple[int, bytes, float]:
    """(status, body, seconds) of one HTTP request."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method,
                                 headers={"Content-Type": content_type})
    started = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read(), time.monotonic() - started
    except urllib.error.HTTPError as err:
        return err.code, err.read(), time.monotonic() - started


class LogWatch:
    """What the apiserver log gains during a block: asserts it holds no traceback."""

    def __init__(self, cluster: Cluster) -> None:
        self.path = _log(cluster)

    def __enter__(self) -> LogWatch:
        self.start = self.path.stat().st_size
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(0.2)  # the log line of the request is flushed
        with self.path.open("rb") as f:
            f.seek(self.start)
            self.gained = f.read()

    def assert_no_traceback(self, *, at_most: int = 4096) -> None:
        assert b"Traceback" not in self.gained, self.gained[-2000:]
        assert len(self.gained) <= at_most, f"{len(self.gained)} bytes of log"


def status_of(body: bytes) -> dict[str, Any]:
    status: dict[str, Any] = json.loads(body)
    assert status["kind"] == "Status", status
    return status


def alias_bomb(levels: int = 6) -> bytes:
    """A ConfigMap in YAML whose aliases expand to 10**levels leaves (about 400 bytes)."""
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata: {name: bomb}", "data:",
             '  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        name, prev = "abcdefghij"[i], "abcdefghij"[i - 1]
        lines.append(f"  {name}: &{name} [" + ",".join([f"*{prev}"] * 10) + "]")
    return ("\n".join(lines) + "\n").encode()


def test_au10_yaml_alias_bomb_is_400_excessive_aliasing(front: tuple[Cluster, int]) -> None:
    cluster, port = front
    body = alias_bomb()
    assert len(body) < 500
    with LogWatch(cluster) as watch:
        code, answer, seconds = request(port, "POST", "/api/v1/namespaces/default/configmaps",
                                        body, content_type="application/yaml")
        # the event loop was not stalled: another request is answered at once
        version, _, version_seconds = request(port, "GET", "/version")
    status = status_of(answer)
    assert (code, status["reason"]) == (400, "BadRequest"), status
    assert "yaml: document contains excessive aliasing" in status["message"]
    assert status["message"].startswith("the object provided is unrecognized (must be of "
                                        "type ConfigMap)")
    assert len(answer) < 2048 and seconds < 2.0
    assert version == 200 and version_seconds < 2.0
    watch.assert_no_traceback()


def test_au10_large_yaml_alias_bomb_is_decoded_off_the_loop_and_still_400(
        front: tuple[Cluster, int]) -> None:
    """A body over 64 KiB is decoded in a worker thread: the same answer, the loop free."""
    cluster, port = front
    body = alias_bomb(7).replace(b"metadata: {name: bomb}",
                                 b"metadata: {name: bomb, annotations: {pad: '"
                                 + b"x" * 100_000 + b"'}}")
    with LogWatch(cluster) as watch:
        code, answer, seconds = request(port, "POST", "/api/v1/namespaces/default/configmaps",
                                        body, content_type="application/yaml")
    status = status_of(answer)
    assert (code, status["reason"]) == (400, "BadRequest"), status
    assert status["message"].startswith("the object provided is unrecognized (must be of "
                                        "type ConfigMap): yaml: document contains excessive "
                                        "aliasing")
    assert len(answer) < 2048 and seconds < 2.0
    watch.assert_no_traceback()


def test_au10_yaml_with_a_few_aliases_is_still_accepted(front: tuple[Cluster, int]) -> None:
    _, port = front
    body = (b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: aliased\n"
            b"  labels: &l {app: web}\n  annotations: *l\ndata: {a: &v one, b: *v}\n")
    code, answer, _ = request(port, "POST", "/api/v1/namespaces/default/configmaps", body,
                              content_type="application/yaml")
    assert code == 201, answer
    created = json.loads(answer)
    assert created["metadata"]["annotations"] == {"app": "web"}
    assert created["data"] == {"a": "one", "b": "one"}


def _deep_json(depth: int) -> bytes:
    return (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep"},"data":'
            + b"[" * depth + b"]" * depth + b"}")


def test_au10_json_nested_past_10000_levels_is_400_exceeded_max_depth(
        front: tuple[Cluster, int]) -> None:
    cluster, port = front
    with LogWatch(cluster) as watch:
        code, answer, seconds = request(port, "POST", "/api/v1/namespaces/default/configmaps",
                                        _deep_json(10_001))
    status = status_of(answer)
    assert (code, status["reason"]) == (400, "BadRequest"), status
    assert ("couldn't get version/kind; json parse error: invalid character '[' exceeded "
            "max depth") in status["message"]
    assert len(answer) < 2048 and seconds < 2.0
    watch.assert_no_traceback()


def test_au10_json_nested_3000_levels_is_400_without_traceback(
        front: tuple[Cluster, int]) -> None:
    """Within Kubernetes' 10,000 levels but past what Python walks: still a client error."""
    cluster, port = front
    with LogWatch(cluster) as watch:
        code, answer, _ = request(port, "POST", "/api/v1/namespaces/default/configmaps",
                                  _deep_json(3_000))
    status = status_of(answer)
    assert (code, status["reason"]) == (400, "BadRequest"), status
    assert "nested more deeply than this apiserver can process" in status["message"]
    watch.assert_no_traceback()


def test_au10_yaml_nested_deeply_is_400_exceeded_max_depth_without_traceback(
        front: tuple[Cluster, int]) -> None:
    """The 5.5 KB request that wrote 164 KB of traceback per request into the log."""
    cluster, port = front
    body = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\ndata:\n  x: " + (
        b"[" * 5500)
    with LogWatch(cluster) as watch:
        for _ in range(3):
            code, answer, _ = request(port, "POST", "/api/v1/namespaces/default/configmaps",
                                      body, content_type="application/yaml")
            status = status_of(answer)
            assert (code, status["reason"]) == (400, "BadRequest"), status
            assert "yaml: exceeded max depth" in status["message"]
    watch.assert_no_traceback()


def test_au10_slow_header_client_is_disconnected_after_the_header_timeout(
        front: tuple[Cluster, int]) -> None:
    _, port = front
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n")  # the headers never end
        data, seconds = read_until_closed(sock, 10 * HEADER_TIMEOUT)
    assert data == b"" and seconds < HEADER_TIMEOUT + 2.0, (data, seconds)

    # a keep-alive connection: the first request is answered, a slow second one is cut
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        time.sleep(HEADER_TIMEOUT + 0.5)  # idle between requests is not the header timeout
        sock.sendall(b"GET /version HTTP/1.1\r\n")
        data, seconds = read_until_closed(sock, 10 * HEADER_TIMEOUT)
    assert data == b"" and seconds < HEADER_TIMEOUT + 2.0, (data, seconds)

    # a client that sends its headers in time is served
    code, _, _ = request(port, "GET", "/version")
    assert code == 200


def test_au10_long_request_line_is_414_status(front: tuple[Cluster, int]) -> None:
    cluster, port = front
    path = b"/api/v1/namespaces/default/configmaps?labelSelector=" + b"a" * (1 << 20)
    with LogWatch(cluster) as watch, socket.create_connection(("127.0.0.1", port),
                                                              timeout=10) as sock:
        sock.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        data, _ = read_until_closed(sock, 10)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.split(b" ", 2)[1] == b"414", head
    status = status_of(body)
    assert status["code"] == 414 and "request URI is too long" in status["message"]
    assert b"aaaa" not in data and b"bytearray" not in data and len(data) < 2048
    watch.assert_no_traceback()
    # a long label selector under Kubernetes' 1 MiB header limit is served
    selector = "app+in+(" + ",".join(f"v{i}" for i in range(2_000)) + ")"
    assert len(selector) > 8190  # aiohttp's own request-line limit
    code, answer, _ = request(port, "GET", "/api/v1/namespaces/default/configmaps?"
                              f"labelSelector={selector}")
    assert code == 200, answer


def test_au10_delete_preconditions_as_a_string_is_400(front: tuple[Cluster, int]) -> None:
    cluster, port = front
    code, _, _ = request(port, "POST", "/api/v1/namespaces/default/configmaps", json.dumps({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "keep"}}).encode())
    assert code == 201
    with LogWatch(cluster) as watch:
        code, answer, _ = request(port, "DELETE", "/api/v1/namespaces/default/configmaps/keep",
                                  json.dumps({"preconditions": "uid"}).encode())
    status = status_of(answer)
    assert (code, status["reason"]) == (400, "BadRequest"), status
    assert status["message"] == (
        'DeleteOptions in version "v1" cannot be handled as a DeleteOptions: json: cannot '
        "unmarshal string into Go struct field DeleteOptions.preconditions of type "
        "v1.Preconditions")
    watch.assert_no_traceback()
    assert request(port, "GET", "/api/v1/namespaces/default/configmaps/keep")[0] == 200


def test_au10_http_bind_with_a_string_target_is_400(front: tuple[Cluster, int]) -> None:
    cluster, port = front
    code, answer, _ = request(port, "POST", "/api/v1/namespaces/default/pods", json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "unbound"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}).encode())
    assert code == 201, answer
    with LogWatch(cluster) as watch:
        code, answer, _ = request(
            port, "POST", "/api/v1/namespaces/default/pods/unbound/binding",
            json.dumps({"apiVersion": "v1", "kind": "Binding",
                        "metadata": {"name": "unbound"}, "target": "node-1"}).encode())
    status = status_of(answer)
    assert (code, status["reason"]) == (400, "BadRequest"), status
    assert "cannot unmarshal string into Go struct field Binding.target of type " \
           "v1.ObjectReference" in status["message"]
    watch.assert_no_traceback()


async def test_au10_grpc_bind_with_a_string_target_is_400(
        front: tuple[Cluster, int], api: ApiClient) -> None:
    cluster, _ = front
    await api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "unbound2"},
                      "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                     namespace="default")
    with LogWatch(cluster) as watch, pytest.raises(ApiError) as caught:
        await api.call("Bind", {"namespace": "default", "name": "unbound2", "object": {
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "unbound2"},
            "target": "node-1"}}, retry=False)
    assert caught.value.code == 400, caught.value.message
    assert "Binding.target of type v1.ObjectReference" in caught.value.message
    watch.assert_no_traceback()


async def test_au10_grpc_configmap_data_as_raw_bytes_is_400(
        front: tuple[Cluster, int], api: ApiClient) -> None:
    cluster, _ = front
    with LogWatch(cluster) as watch, pytest.raises(ApiError) as caught:
        await api.call("Create", {"resource": "configmaps", "namespace": "default",
                                  "object": {"apiVersion": "v1", "kind": "ConfigMap",
                                             "metadata": {"name": "raw"},
                                             "data": {"k": b"\x00\xffraw"}}}, retry=False)
    assert caught.value.code == 400, caught.value.message
    assert caught.value.message.startswith("object.data.k: Invalid value: binary data")
    watch.assert_no_traceback()


async def test_au10_create_token_with_bound_object_ref_as_a_list_is_400(
        front: tuple[Cluster, int], api: ApiClient) -> None:
    cluster, port = front
    await api.create({"apiVersion": "v1", "kind": "ServiceAccount",
                      "metadata": {"name": "robot"}}, namespace="default")
    request_body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                    "spec": {"audiences": ["x"], "boundObjectRef": ["Pod", "p"]}}
    with LogWatch(cluster) as watch:
        with pytest.raises(ApiError) as caught:
            await api.call("CreateToken", {"namespace": "default", "name": "robot",
                                           "object": request_body}, retry=False)
        code, answer, _ = request(
            port, "POST", "/api/v1/namespaces/default/serviceaccounts/robot/token",
            json.dumps(request_body).encode())
    assert caught.value.code == 400, caught.value.message
    status = status_of(answer)
    assert (code, status["reason"]) == (400, "BadRequest"), status
    for message in (caught.value.message, status["message"]):
        assert "cannot unmarshal array into Go struct field" in message
        assert "boundObjectRef" in message
    watch.assert_no_traceback()


def test_au10_resource_version_abc_on_get_and_list_is_400(front: tuple[Cluster, int]) -> None:
    cluster, port = front
    request(port, "POST", "/api/v1/namespaces/default/configmaps", json.dumps({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rv"}}).encode())
    with LogWatch(cluster) as watch:
        for path in ("/api/v1/namespaces/default/configmaps/rv?resourceVersion=abc",
                     "/api/v1/namespaces/default/configmaps?resourceVersion=abc",
                     "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=abc"):
            code, answer, _ = request(port, "GET", path)
            status = status_of(answer)
            assert (code, status["reason"]) == (400, "BadRequest"), (path, status)
            assert status["message"] == ('resourceVersion: Invalid value: "abc": '
                                         'strconv.ParseUint: parsing "abc": invalid syntax')
    watch.assert_no_traceback()


def test_au10_path_below_a_subresource_is_404(front: tuple[Cluster, int]) -> None:
    _, port = front
    request(port, "POST", "/api/v1/namespaces/default/configmaps", json.dumps({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}).encode())
    code, answer, _ = request(port, "GET",
                              "/api/v1/namespaces/default/configmaps/x/status/extra/parts")
    status = status_of(answer)
    assert (code, status["reason"]) == (404, "NotFound"), status
    assert status["message"] == "the server could not find the requested resource"


@pytest.mark.parametrize(("metadata", "message"), [
    ("x", 'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot '
          "unmarshal string into Go struct field ConfigMap.metadata of type v1.ObjectMeta"),
    ({"name": ["e"]}, 'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: '
                      "cannot unmarshal array into Go struct field ObjectMeta.metadata.name "
                      "of type string"),
    ({"name": "l", "labels": {"a": 1}},
     'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal '
     "number into Go struct field ObjectMeta.metadata.labels of type string"),
], ids=["metadata-string", "name-list", "label-number"])
async def test_au10_metadata_of_the_wrong_json_type_is_400_on_both_fronts(
        front: tuple[Cluster, int], api: ApiClient, metadata: Any, message: str) -> None:
    cluster, port = front
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}
    with LogWatch(cluster) as watch:
        code, answer, _ = request(port, "POST", "/api/v1/namespaces/default/configmaps",
                                  json.dumps(obj).encode())
        with pytest.raises(ApiError) as caught:
            await api.call("Create", {"resource": "configmaps", "namespace": "default",
                                      "object": obj}, retry=False)
    status = status_of(answer)
    assert (code, status["reason"], status["message"]) == (400, "BadRequest", message)
    assert (caught.value.code, caught.value.message) == (400, message)
    watch.assert_no_traceback()


async def test_au10_integer_parameters_are_parsed_as_go_parses_them(
        front: tuple[Cluster, int], api: ApiClient) -> None:
    """No Python repr in the answer, and no Python leniency ('1_0' and ' 5' are not
    integers to Go's strconv.ParseInt, which kube-apiserver's query decoding uses)."""
    _, port = front
    cms = "/api/v1/namespaces/default/configmaps"
    for query, message in [
            ("limit=abc", 'limit: strconv.ParseInt: parsing "abc": invalid syntax'),
            ("limit=1_0", 'limit: strconv.ParseInt: parsing "1_0": invalid syntax'),
            ("limit=%205", 'limit: strconv.ParseInt: parsing " 5": invalid syntax'),
            ("watch=1&timeoutSeconds=abc",
             'timeoutSeconds: strconv.ParseInt: parsing "abc": invalid syntax'),
            ("limit=99999999999999999999",
             'limit: strconv.ParseInt: parsing "99999999999999999999": value out of range')]:
        code, answer, _ = request(port, "GET", f"{cms}?{query}")
        status = status_of(answer)
        assert (code, status["reason"], status["message"]) == (400, "BadRequest", message)
    with pytest.raises(ApiError) as caught:
        await api.call("List", {"resource": "configmaps", "namespace": "default",
                                "options": {"limit": "1_0"}}, retry=False)
    assert (caught.value.code, caught.value.message) == (
        400, 'limit: strconv.ParseInt: parsing "1_0": invalid syntax')
    with pytest.raises(ApiError) as caught:
        await api.call("Create", {"resource": "configmaps", "namespace": "default",
                                  "object": {"apiVersion": "v1", "kind": "ConfigMap",
                                             "metadata": {"name": "fv"}},
                                  "options": {"fieldValidation": "Bogus"}}, retry=False)
    assert (caught.value.code, caught.value.message) == (
        400, 'fieldValidation: Unsupported value: "Bogus": supported values: "Ignore", '
             '"Warn", "Strict"')
