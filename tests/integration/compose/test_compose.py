"""DO2: `docker compose up` of deploy/compose gives a working cluster that chaos can cut.

One test walks the whole path a user takes: the offline image, the cluster up and healthy, a
pod created through the published apiserver port, a node partitioned (really unable to reach
the apiserver) and healed (reachable again, still found by its service name), a partition
from one component only, and everything torn down with its networks and volumes.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from skiff.cli import chaos
from skiff.client import ApiClient
from tests.integration.compose.conftest import ComposeProject, log, node_ready, run, wait_for

NODES = ["node-1", "node-2", "node-3"]
def pod_manifest(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "compose"}},
            "spec": {"containers": [{"name": "main", "image": "busybox",
                                     "command": ["sleep", "3600"]}]}}


def create_pod(project: ComposeProject, name: str, tmp_path: Path) -> None:
    """Through the `skiff` CLI, as a user would (installed with the package)."""
    manifest = tmp_path / "pod.json"  # JSON is YAML
    manifest.write_text(json.dumps(pod_manifest(name)))
    skiff = Path(sys.executable).with_name("skiff")
    assert skiff.exists(), f"the skiff CLI is not installed next to {sys.executable}"
    run([str(skiff), "--server", f"127.0.0.1:{project.api_port}", "apply", "-f",
         str(manifest)], timeout=60)


def eventually(check: Any, *, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(1)
    return bool(check())


@pytest.mark.timeout(900)
def test_do2_compose_cluster_partition_and_heal(compose_project: ComposeProject,
                                                 tmp_path: Path) -> None:
    project = compose_project
    t0 = time.monotonic()
    services = ["etcd", "apiserver", "scheduler", "controller-manager", *NODES]

    # --no-build: the image was built above from local material; nothing may be pulled.
    project.compose("up", "-d", "--no-build", *services, timeout=300)
    project.wait_healthy(services, timeout=180)
    log(f"{len(services)} services healthy in {time.monotonic() - t0:.1f}s")

    create_pod(project, "compose-demo", tmp_path)
    log("pod created through the skiff CLI")

    async def check_cluster() -> None:
        async with ApiClient(f"127.0.0.1:{project.api_port}", retry_seconds=30) as api:
            pod = await api.get("pods", "compose-demo", "default")
            assert pod["metadata"]["uid"]
            async def all_ready(c: ApiClient) -> list[str]:
                nodes = (await c.list("nodes"))["items"]
                names = sorted(n["metadata"]["name"] for n in nodes if node_ready(n))
                return names if names == NODES else []
            await wait_for(api, "node-1..3 Ready", all_ready, timeout=90)

            async def running(c: ApiClient) -> str:
                p = await c.get("pods", "compose-demo", "default")
                phase = (p.get("status") or {}).get("phase")
                return str(p["spec"].get("nodeName") or "") if phase == "Running" else ""
            # Bound and started by the node's kubelet: the whole path, not just scheduling.
            node = await wait_for(api, "the pod to be Running", running, timeout=120)
            assert node in NODES

    asyncio.run(check_cluster())

    apiserver_ip = project.address("apiserver")
    etcd_ip = project.address("etcd")
    assert project.can_connect("node-1", apiserver_ip, 6443), "node-1 cannot reach the apiserver"

    # A full partition: node-1 is cut from every network of the project.
    message = chaos.partition("node-1", from_component=None, project=project.name)
    log(message)
    assert "node-1" in message
    assert not project.can_connect("node-1", apiserver_ip, 6443), \
        "node-1 still reaches the apiserver after `chaos partition node-1`"
    assert not project.can_connect("node-1", etcd_ip, 2379)
    assert project.can_connect("node-2", apiserver_ip, 6443), "node-2 was cut too"

    message = chaos.heal("node-1", project=project.name)
    log(message)
    assert "node-1" in message
    assert eventually(lambda: project.can_connect("node-1", apiserver_ip, 6443)), \
        "node-1 cannot reach the apiserver after `chaos heal node-1`"
    assert project.can_connect("node-1", "apiserver", 6443), "apiserver name lost after heal"
    # Its service alias is back, so the rest of the cluster finds it by name again.
    aliases = project.inspect("node-1")["NetworkSettings"]["Networks"]
    assert any("node-1" in (n.get("Aliases") or []) for n in aliases.values()), aliases

    # A partition from one component only: node-2 loses the apiserver but keeps etcd.
    message = chaos.partition("node-2", from_component="apiserver", project=project.name)
    log(message)
    assert not project.can_connect("node-2", apiserver_ip, 6443), \
        "node-2 still reaches the apiserver after `chaos partition node-2 --from apiserver`"
    assert project.can_connect("node-2", etcd_ip, 2379), "--from apiserver also cut etcd"
    assert project.can_connect("node-3", apiserver_ip, 6443), "node-3 was cut too"

    message = chaos.heal(None, project=project.name)
    log(message)
    assert "node-2" in message
    assert eventually(lambda: project.can_connect("node-2", apiserver_ip, 6443)), \
        "node-2 cannot reach the apiserver after `chaos heal`"
    assert "nothing to heal" in chaos.heal(None, project=project.name)

    with pytest.raises(chaos.ChaosError, match="no component 'node-9'"):
        chaos.partition("node-9", from_component=None, project=project.name)
    with pytest.raises(chaos.ChaosError, match="no containers of compose project"):
        chaos.heal(None, project=f"{project.name}-absent")
    log(f"cluster, pod, partitions and heals done in {time.monotonic() - t0:.1f}s")
