"""SPEC FN1–FN3 and DO2 in the compose cluster: partitions heal, and fencing recovers pets.

Real containers, real network cuts (`docker network disconnect`), the dockerized fence agent
reaching the engine through its mounted socket — with timings compressed by an override file
(a node is Unknown 6 s after its last lease renewal, fenced 3 s later). Two stories:

* a node with no opted-in pod is cut off, goes Unknown, is healed and is Ready again within
  20 s — and nobody fences it (the regression test for healed clients staying silent);
* the node running the StatefulSet pet `db-0` is cut off: the fencing controller requests a
  Fence, the fence agent kills the node's container through the Engine API and confirms it,
  only then is `db-0` force-deleted and started on another node; the node stays down after
  the network heals (the restart policy does not revive a fenced container) until
  `skiff unfence` starts it again, Ready and uncordoned — with the identity it joined with
  (SPEC JN3: `skiff join` finds its valid credentials in its volume; no second CSR).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from skiff.api import ApiError, Reason
from skiff.api.groups.certificates import KUBE_APISERVER_CLIENT_KUBELET
from skiff.client import ApiClient
from skiff.cluster.chaos import docker as chaos
from tests.integration.compose.conftest import (
    ComposeProject,
    log,
    node_condition,
    node_csrs,
    node_ready,
    run,
    wait_for,
)

# Docker tests never run at once (one engine, heavy): pytest-xdist --dist loadgroup.
pytestmark = pytest.mark.xdist_group("docker")

NODES = ["node-1", "node-2", "node-3"]
SERVICES = ["etcd", "apiserver", "scheduler", "controller-manager", "fence-agent", *NODES]
HEAL_READY_SECONDS = 20.0
# The taint-based eviction must not be what moves the pet: its toleration outlasts the test.
OVERRIDE = {
    "services": {
        "apiserver": {"environment": {
            "SKIFF_APISERVER_DEFAULT_UNREACHABLE_TOLERATION_SECONDS": "600"}},
        "controller-manager": {"environment": {
            "SKIFF_CONTROLLER_MANAGER_NODE_MONITOR_GRACE_PERIOD": "6s",
            "SKIFF_CONTROLLER_MANAGER_NODE_MONITOR_PERIOD": "1s",
            "SKIFF_CONTROLLER_MANAGER_FENCING_DELAY": "3s"}},
        "fence-agent": {"environment": {"SKIFF_FENCE_AGENT_RESYNC_PERIOD": "2s"}},
        **{node: {"environment": {"SKIFF_KUBELET_NODE_LEASE_DURATION_SECONDS": "4"}}
           for node in NODES},
    },
}


def stateful_set(name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 1, "serviceName": name,
                     "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"terminationGracePeriodSeconds": 5,
                                           "containers": [{"name": "main", "image": "busybox",
                                                           "command": ["sleep", "3600"]}]}}}}


def skiff(project: ComposeProject, *args: str, timeout: float = 90) -> str:
    skiff_bin = Path(sys.executable).with_name("skiff")
    cmd = [str(skiff_bin)] if skiff_bin.exists() else [sys.executable, "-m", "skiff.cli.main"]
    return run([*cmd, "--server", f"127.0.0.1:{project.api_port}", *args],
               timeout=timeout).stdout


async def get_or_none(api: ApiClient, resource: str, name: str,
                      namespace: str | None = None) -> dict[str, Any] | None:
    try:
        return await api.get(resource, name, namespace)
    except ApiError as err:
        if err.reason == Reason.NOT_FOUND:
            return None
        raise


async def node_in(api: ApiClient, name: str, status: str) -> dict[str, Any] | None:
    node = await api.get("nodes", name)
    return node if node_condition(node) == status else None


async def running_pod(api: ApiClient, name: str) -> dict[str, Any] | None:
    pod = await get_or_none(api, "pods", name, "default")
    if pod and pod.get("status", {}).get("phase") == "Running" and \
            not pod["metadata"].get("deletionTimestamp"):
        return pod
    return None


@pytest.mark.timeout(600)
def test_fn1_fn3_compose_partitions_heal_and_fencing_moves_the_pet(
        compose_project: ComposeProject, tmp_path: Path) -> None:
    project = compose_project
    project.override = tmp_path / "compose.override.json"  # JSON is YAML
    project.override.write_text(json.dumps(OVERRIDE))
    t0 = time.monotonic()
    project.compose("up", "-d", "--no-build", *SERVICES, timeout=300)
    project.wait_healthy(SERVICES, timeout=180)
    log(f"{len(SERVICES)} services healthy in {time.monotonic() - t0:.1f}s")
    asyncio.run(scenario(project, tmp_path))
    log(f"partition, heal, fence and unfence done in {time.monotonic() - t0:.1f}s")


async def scenario(project: ComposeProject, tmp_path: Path) -> None:
    async with ApiClient(f"127.0.0.1:{project.api_port}", retry_seconds=30) as api:
        async def all_ready(c: ApiClient) -> list[str]:
            nodes = (await c.list("nodes"))["items"]
            names = sorted(n["metadata"]["name"] for n in nodes if node_ready(n))
            return names if names == NODES else []
        await wait_for(api, "node-1..3 Ready", all_ready, timeout=90)
        for name in NODES:  # the compose file opts every node into power fencing
            node = await api.get("nodes", name)
            assert node["metadata"]["annotations"]["skiff.io/fence-agent"] == "power", name

        manifest = tmp_path / "db.json"
        manifest.write_text(json.dumps(stateful_set("db")))
        skiff(project, "apply", "-f", str(manifest))
        pet = await wait_for(api, "db-0 Running", lambda c: running_pod(c, "db-0"), timeout=90)
        pet_node = str(pet["spec"]["nodeName"])
        log(f"db-0 runs on {pet_node}")

        bystander = next(n for n in NODES if n != pet_node)
        await partition_and_heal_a_node_without_pets(api, project, bystander)
        await fence_the_node_of_the_pet(api, project, pet_node, pet)


async def partition_and_heal_a_node_without_pets(api: ApiClient, project: ComposeProject,
                                                  node: str) -> None:
    """Unknown while cut, Ready within HEAL_READY_SECONDS of the heal, never fenced."""
    t0 = time.monotonic()
    log(await asyncio.to_thread(chaos.partition, node, project=project.name))
    await wait_for(api, f"{node} NodeReady Unknown", lambda c: node_in(c, node, "Unknown"),
                   timeout=45)
    log(f"{node} Unknown {time.monotonic() - t0:.1f}s after the cut")
    await asyncio.sleep(5)  # past the 3 s fencing delay: no pet, so no Fence
    assert await get_or_none(api, "fences", node) is None, \
        f"{node} was fenced though it runs no pod that opted in"
    assert project.running(node)

    log(await asyncio.to_thread(chaos.heal, node, project=project.name))
    t_heal = time.monotonic()
    await wait_for(api, f"{node} Ready again after the heal (a healed node must reconnect "
                        "on its own)", lambda c: node_in(c, node, "True"),
                   timeout=HEAL_READY_SECONDS, interval=0.5)
    log(f"{node} Ready {time.monotonic() - t_heal:.1f}s after the heal")


async def fence_the_node_of_the_pet(api: ApiClient, project: ComposeProject, node: str,
                                    pet: dict[str, Any]) -> None:
    t0 = time.monotonic()
    log(await asyncio.to_thread(chaos.partition, node, project=project.name))
    await wait_for(api, f"{node} NodeReady Unknown", lambda c: node_in(c, node, "Unknown"),
                   timeout=45)
    log(f"{node} Unknown {time.monotonic() - t0:.1f}s after the cut")

    async def fenced(c: ApiClient) -> dict[str, Any] | None:
        fence = await get_or_none(c, "fences", node)
        phase = (fence or {}).get("status", {}).get("phase")
        assert phase != "Failed", f"the fence of {node} failed: {fence}"
        return fence if phase == "Fenced" else None
    fence = await wait_for(api, f"Fence {node} Fenced by the dockerized agent", fenced,
                           timeout=60, interval=0.5)
    log(f"{node} fenced {time.monotonic() - t0:.1f}s after the cut: "
        f"{fence['status']['message']}")
    assert fence["spec"]["agent"] == "power"
    assert fence["status"]["confirmedAt"]
    assert "killed container" in fence["status"]["message"]
    assert not project.running(node), f"{node}'s container runs though its Fence is Fenced"

    async def replaced(c: ApiClient) -> dict[str, Any] | None:
        pod = await running_pod(c, "db-0")
        if pod and pod["metadata"]["uid"] != pet["metadata"]["uid"]:
            return pod
        return None
    new_pet = await wait_for(api, "db-0 recreated and Running on another node", replaced,
                             timeout=90, interval=0.5)
    assert new_pet["spec"]["nodeName"] != node
    log(f"db-0 Running on {new_pet['spec']['nodeName']} {time.monotonic() - t0:.1f}s after "
        f"the cut of {node}")
    assert (await api.get("nodes", node))["spec"].get("unschedulable"), \
        f"fenced {node} is not cordoned"

    # The network comes back while the node is powered off: it stays off (keep-down), the
    # restart policy does not revive it, and the Fence holds.
    log(await asyncio.to_thread(chaos.heal, node, project=project.name))
    await asyncio.sleep(6)  # > the agent's 2 s resync and the engine's restart backoff
    assert not project.running(node), f"fenced {node} came back by itself"
    assert node_condition(await api.get("nodes", node)) != "True"
    still = await api.get("fences", node)
    assert still["status"]["phase"] == "Fenced", still["status"]

    t_unfence = time.monotonic()
    log(skiff(project, "unfence", node).strip())
    assert await get_or_none(api, "fences", node) is None
    assert project.running(node), f"{node}'s container is not running after unfence"

    async def back(c: ApiClient) -> dict[str, Any] | None:
        n = await c.get("nodes", node)
        return n if node_ready(n) and not n["spec"].get("unschedulable") else None
    await wait_for(api, f"{node} Ready and uncordoned after unfence", back, timeout=60,
                   interval=0.5)
    log(f"{node} Ready and uncordoned {time.monotonic() - t_unfence:.1f}s after unfence")
    made = (await node_csrs(api, KUBE_APISERVER_CLIENT_KUBELET)).get(node, [])
    assert len(made) == 1, f"{node} came back with a new client CSR: {made}"
    assert (await running_pod(api, "db-0") or {}).get("metadata", {}).get("uid") == \
        new_pet["metadata"]["uid"], "the pet moved again after unfence"
