"""SPEC GT5 with an httpGet preStop hook against a real HTTP endpoint: the hook runs before
the stop signal and its run time comes out of the period; a failing hook (HTTP 500) is
reported, not retried, and does not hold termination up."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from skiff.client import ApiClient
from tests.integration.kubelet.conftest import (
    RECORDER,
    Node,
    killing_started,
    pod_manifest,
    recorder,
    wait_file,
    wait_gone,
    wait_phase,
)
from tests.integration.waiting import events, recorded


class Endpoint:
    """A preStop endpoint: records each request's time; answers `status` after `delay`."""

    def __init__(self, status: int, delay: float) -> None:
        self.status, self.delay = status, delay
        self.hits: list[float] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                endpoint.hits.append(time.time())
                time.sleep(endpoint.delay)
                self.send_response(endpoint.status)
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Endpoint:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def ok_endpoint() -> Iterator[Endpoint]:
    with Endpoint(200, 2.0) as endpoint:
        yield endpoint


@pytest.fixture
def failing_endpoint() -> Iterator[Endpoint]:
    with Endpoint(500, 0.0) as endpoint:
        yield endpoint


async def _run(api: ApiClient, namespace: str, node: Node, path: Path, port: int) -> None:
    # The endpoint listens on the node's loopback, and a hook's httpGet goes to the pod's
    # IP: the pod uses the node's network (hostNetwork), as a sandboxed pod (SPEC SB1, when
    # the node has a podCIDR) is reached at its own IP in its own network namespace.
    # With sandboxes on, even a hostNetwork pod has its own root (AU8): the recorder, the
    # node's python3 and the file it writes reach it as hostPath volumes.
    scripts, out = str(Path(RECORDER).parent), str(path.parent)
    await api.create(pod_manifest("p", namespace, node.name, [{
        "name": "main", "command": ["python3", *recorder(path)[1:]],
        "volumeMounts": [{"name": "scripts", "mountPath": scripts, "readOnly": True},
                         {"name": "out", "mountPath": out}],
        "lifecycle": {"preStop": {"httpGet": {"path": "/stop", "port": port}}}}], grace=8,
        hostNetwork=True, volumes=[{"name": "scripts", "hostPath": {"path": scripts}},
                                   {"name": "out", "hostPath": {"path": out}}]))
    await wait_phase(api, namespace, "p", "Running")
    await wait_file(path, "start")


async def test_gt5_http_prestop_runs_before_the_stop_signal_within_the_period(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path,
        ok_endpoint: Endpoint) -> None:
    path = tmp_path / "signals"
    await _run(api, namespace, node, path, ok_endpoint.port)
    await api.delete("pods", "p", namespace)
    t0 = await killing_started(api, namespace)
    sigterm = await wait_file(path, "SIGTERM")
    dead = await wait_file(path, "dead")
    assert len(ok_endpoint.hits) == 1
    # The hook ran first and took its 2 s; SIGTERM followed it.
    assert ok_endpoint.hits[0] <= sigterm and sigterm - ok_endpoint.hits[0] >= 1.9
    # The period (8 s) counts from the start of the kill: SIGKILL ~8 s after it, not 2 + 8.
    assert 7.9 <= dead - t0 <= 9.5, f"SIGKILL {dead - t0:.2f}s after the kill began"
    await wait_gone(api, namespace, "p")
    assert not await events(api, namespace, reason="FailedPreStopHook")


async def test_gt5_failing_http_prestop_is_reported_and_not_retried(
        api: ApiClient, namespace: str, node: Node, tmp_path: Path,
        failing_endpoint: Endpoint) -> None:
    path = tmp_path / "signals"
    await _run(api, namespace, node, path, failing_endpoint.port)
    await api.delete("pods", "p", namespace)
    t0 = await killing_started(api, namespace)
    sigterm = await wait_file(path, "SIGTERM")
    assert sigterm - t0 <= 2.0, "a failed hook must not hold the stop signal back"
    [failed] = await recorded(api, namespace, reason="FailedPreStopHook", name="p")
    assert "500" in failed["message"], failed["message"]
    await wait_file(path, "dead")
    await wait_gone(api, namespace, "p")
    # Termination is over and the hook was called exactly once.
    assert len(failing_endpoint.hits) == 1, failing_endpoint.hits
