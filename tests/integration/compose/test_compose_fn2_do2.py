"""SPEC FN2 and DO2/DO3 in the compose cluster, on one TLS cluster started
with the tracing profile.

* DO2: `COMPOSE_PROFILES=tracing` with `SKIFF_OTLP_ENDPOINT=http://jaeger:4317`: the profile's
  `jaeger` service is replaced by an OTLP receiver in the Skiff image (Jaeger's image cannot
  be pulled here) that prints every span it gets; one pod's life — the create, its etcd
  write, scheduling, the binding, the kubelet's start — arrives there from four containers
  under one trace id.
* FN2: a Fence with the `network` agent: the dockerized fence agent cuts the node's container
  from every network of the project through the Engine API (the container keeps running:
  not a power fence), the node really cannot reach the apiserver and goes NodeReady Unknown;
  a reconnect behind the agent's back is undone (keep-down); `skiff unfence` puts it back on
  the network with its service alias, and it is Ready again.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skiff.client import ApiClient
from skiff.tracing import TRACE_ANNOTATION
from tests.integration.compose.conftest import (
    REPO,
    ComposeProject,
    Engine,
    log,
    node_condition,
    node_ready,
    run,
    wait_for,
)
from tests.integration.otlp_receiver import ReceivedSpan, span_from_json

# Docker tests never run at once (one engine, heavy): pytest-xdist --dist loadgroup.
pytestmark = pytest.mark.xdist_group("docker")

NODES = ["node-1", "node-2", "node-3"]
SERVICES = ["etcd", "apiserver", "scheduler", "controller-manager", "fence-agent", *NODES,
            "jaeger"]
FENCED_NODE = "node-3"
RECEIVER = "/otlp/otlp_receiver.py"


def override(image: str) -> dict[str, Any]:
    """The receiver in place of Jaeger, and compressed node timings."""
    return {"services": {
        "jaeger": {
            "image": image, "pull_policy": "never",
            "command": ["python3", RECEIVER, "--listen", "0.0.0.0:4317"],
            "volumes": [f"{REPO / 'tests' / 'integration' / 'otlp_receiver.py'}:{RECEIVER}:ro"],
            "healthcheck": {"test": ["CMD", "python3", "-c",
                                     "import socket; socket.create_connection("
                                     "('127.0.0.1', 4317), timeout=2).close()"]}},
        "controller-manager": {"environment": {
            "SKIFF_CONTROLLER_MANAGER_NODE_MONITOR_GRACE_PERIOD": "8s",
            "SKIFF_CONTROLLER_MANAGER_NODE_MONITOR_PERIOD": "1s"}},
        "fence-agent": {"environment": {"SKIFF_FENCE_AGENT_RESYNC_PERIOD": "2s"}},
        **{node: {"environment": {"SKIFF_KUBELET_NODE_LEASE_DURATION_SECONDS": "4"}}
           for node in NODES},
    }}


class TracedProject(ComposeProject):
    """compose.yaml with the tracing profile on, as its header comment says to start it."""

    ui_port: int = 0

    def env(self) -> dict[str, str]:
        from skiff.cluster.processes import free_port

        self.ui_port = self.ui_port or free_port()
        return {**super().env(), "COMPOSE_PROFILES": "tracing",
                "SKIFF_OTLP_ENDPOINT": "http://jaeger:4317",
                "SKIFF_JAEGER_UI_PORT": str(self.ui_port)}

    def spans(self) -> list[ReceivedSpan]:
        """Every span the receiver container has printed so far."""
        out = self.docker("logs", self.container("jaeger")).stdout
        return [span_from_json(line) for line in out.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def cluster(docker_engine: Engine, skiff_image: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[TracedProject]:
    project = TracedProject(engine=docker_engine, image=skiff_image)
    project.override = tmp_path_factory.mktemp("fn2-do2") / "compose.override.json"
    project.override.write_text(json.dumps(override(skiff_image)))  # JSON is YAML
    monkeypatch = pytest.MonkeyPatch()
    project.use_admin(monkeypatch)
    try:
        t0 = time.monotonic()
        project.compose("up", "-d", "--no-build", *SERVICES, timeout=300)
        project.wait_healthy(SERVICES, timeout=240)
        log(f"{len(SERVICES)} services (tracing profile) healthy in "
            f"{time.monotonic() - t0:.1f}s")

        async def all_ready() -> None:
            async with ApiClient(f"127.0.0.1:{project.api_port}") as api:
                async def ready(c: ApiClient) -> list[str]:
                    names = sorted(n["metadata"]["name"]
                                   for n in (await c.list("nodes"))["items"] if node_ready(n))
                    return names if names == NODES else []
                await wait_for(api, "node-1..3 Ready", ready, timeout=120)

        asyncio.run(all_ready())
        yield project
    finally:
        try:
            project.down()
        finally:
            monkeypatch.undo()


def traced_pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": "node-1"},
                     "containers": [{"name": "main", "image": "busybox",
                                     "command": ["sleep", "3600"]}]}}


@pytest.mark.timeout(900)
def test_do2_spans_of_one_pods_life_reach_the_otlp_receiver_in_the_compose_network(
        cluster: TracedProject) -> None:
    project = cluster
    expected = {("skiff-apiserver", "/skiff.v1.Api/Create"),
                ("skiff-apiserver", "/etcdserverpb.KV/Txn"),
                ("skiff-scheduler", "scheduler.schedule"),
                ("skiff-scheduler", "scheduler.bind"),
                ("skiff-apiserver", "/skiff.v1.Api/Bind"),
                ("skiff-kubelet", "kubelet.start_pod")}

    async def life() -> str:
        async with ApiClient(f"127.0.0.1:{project.api_port}") as api:
            created = await api.create(traced_pod("traced"))
            trace = str(created["metadata"]["annotations"][TRACE_ANNOTATION].split("-")[1])

            async def running(c: ApiClient) -> bool:
                pod = await c.get("pods", "traced", "default")
                return (pod.get("status") or {}).get("phase") == "Running"
            await wait_for(api, "the traced pod Running on node-1", running, timeout=120)
            return trace

    trace = asyncio.run(life())
    # The exporters batch (5 s by default): wait for every expected span of this trace.
    deadline = time.monotonic() + 90
    got: set[tuple[str, str]] = set()
    while time.monotonic() < deadline:
        got = {(s.service_name, s.name) for s in project.spans() if s.trace_id == trace}
        if expected <= got:
            break
        time.sleep(2)
    assert expected <= got, (f"trace {trace}: missing {sorted(expected - got)}; "
                             f"got {sorted(got)}")
    log(f"trace {trace}: {len(got)} distinct spans from "
        f"{sorted({service for service, _ in got})}")


def _networks(project: ComposeProject, service: str) -> dict[str, Any]:
    found: dict[str, Any] = project.inspect(service)["NetworkSettings"]["Networks"] or {}
    return found


def _eventually(check: Any, what: str, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}", pytrace=False)
        time.sleep(1)


@pytest.mark.timeout(900)
def test_fn2_network_agent_cuts_the_node_from_the_cluster_until_unfenced(
        cluster: TracedProject) -> None:
    project = cluster
    node = FENCED_NODE
    apiserver_ip = project.address("apiserver")
    network = next(iter(_networks(project, node)))
    assert project.can_connect(node, apiserver_ip, 6443), f"{node} cannot reach the apiserver"

    async def fence() -> dict[str, Any]:
        async with ApiClient(f"127.0.0.1:{project.api_port}") as api:
            await api.create({"apiVersion": "skiff.io/v1", "kind": "Fence",
                              "metadata": {"name": node},
                              "spec": {"nodeName": node, "agent": "network",
                                       "reason": "FN2: network agent in the compose cluster"}})

            async def fenced(c: ApiClient) -> dict[str, Any] | None:
                f = await c.get("fences", node)
                return f if (f.get("status") or {}).get("phase") == "Fenced" else None
            done: dict[str, Any] = await wait_for(api, f"Fence {node} Fenced", fenced,
                                                  timeout=90)

            async def unknown(c: ApiClient) -> bool:
                # The kubelet cannot renew its Lease any more: the cluster sees the cut.
                return node_condition(await c.get("nodes", node)) == "Unknown"
            await wait_for(api, f"{node} NodeReady Unknown after the cut", unknown,
                           timeout=90)
            return done

    done = asyncio.run(fence())
    status = done["status"]
    assert status.get("confirmedAt"), status
    assert network in status["message"], status["message"]
    # The observable cut: on no network, no traffic to the apiserver — and still running
    # (the network agent leaves the node's processes alone; power would have killed them).
    assert _networks(project, node) == {}, _networks(project, node)
    assert project.running(node), f"the network agent stopped {node}'s container"
    assert not project.can_connect(node, apiserver_ip, 6443), \
        f"{node} still reaches the apiserver although fenced"
    log(f"{node} fenced by the network agent: {status['message']}")

    # Keep-down: reconnected behind the agent's back, it is cut again at the next resync.
    # (`docker network connect` exits 0 only once the container is on the network; the
    # agent resyncs every 2 s, so reading the networks back here would race its next cut)
    project.docker("network", "connect", "--alias", node, network, project.container(node))
    _eventually(lambda: _networks(project, node) == {},
                f"the agent to cut {node} again after a reconnect", timeout=60)
    log(f"{node} reconnected by hand and cut again by the agent")

    # `skiff unfence`: back on the project's network with its alias, and Ready again.
    skiff = Path(sys.executable).with_name("skiff")
    out = run([str(skiff), "--server", f"127.0.0.1:{project.api_port}", "unfence", node,
               "--timeout", "90"], timeout=150).stdout
    log(out.strip())
    networks = _networks(project, node)
    assert list(networks) == [network], networks
    assert node in (networks[network].get("Aliases") or []), networks
    _eventually(lambda: project.can_connect(node, "apiserver", 6443),
                f"{node} reaching the apiserver by name after unfence", timeout=60)

    async def ready_again() -> None:
        async with ApiClient(f"127.0.0.1:{project.api_port}") as api:
            async def ready(c: ApiClient) -> bool:
                return node_ready(await c.get("nodes", node))
            await wait_for(api, f"{node} Ready after unfence", ready, timeout=120)
            fences = [f["metadata"]["name"] for f in (await api.list("fences"))["items"]]
            assert node not in fences, fences

    asyncio.run(ready_again())
