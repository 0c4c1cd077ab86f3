"""Fixtures for scheduler integration tests: a fresh etcd + apiserver + scheduler process
per test (nodes are cluster-scoped, so tests must not share them), short backoffs, and
helpers that create Nodes as a kubelet would register them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path

import pytest

from skiff.api import ApiError, Reason, get_condition
from skiff.api.testing import make_node
from skiff.api.types import Obj
from skiff.client import ApiClient
from tests.integration.cluster import Cluster
from tests.integration.waiting import wait_for as wait_for

StartScheduler = Callable[..., None]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.fixture
def start_scheduler(cluster: Cluster, tmp_path: Path) -> StartScheduler:
    def start(*, config: str = "", args: tuple[str, ...] = ()) -> None:
        extra = ["--pod-initial-backoff-seconds", "0.2", "--pod-max-backoff-seconds", "1",
                 *args]
        if config:
            path = tmp_path / "scheduler-config.yaml"
            path.write_text(config)
            extra += ["--config", str(path)]
        cluster.add_service("scheduler", "skiff.scheduler", extra)
    return start


@pytest.fixture
async def api(cluster: Cluster) -> AsyncIterator[ApiClient]:
    async with ApiClient(cluster.api_target, retry_seconds=20) as client:
        yield client


async def create_node(api: ApiClient, name: str, *, cpu: str = "4", memory: str = "8Gi",
                      labels: dict[str, str] | None = None,
                      taints: Sequence[tuple[str, str]] = ()) -> Obj:
    builder = make_node(name).capacity({"cpu": cpu, "memory": memory, "pods": "110"})
    builder.condition("Ready", "True")
    for key, value in (labels or {}).items():
        builder.label(key, value)
    for key, effect in taints:
        builder.taint(key, effect)
    return await api.create(builder.obj())


async def get_pod(api: ApiClient, name: str, namespace: str = "default") -> Obj | None:
    try:
        return await api.get("pods", name, namespace)
    except ApiError as err:
        if err.reason == Reason.NOT_FOUND:
            return None
        raise




async def wait_bound(api: ApiClient, name: str, namespace: str = "default",
                     timeout: float = 20.0) -> str:
    async def bound() -> str:
        pod = await get_pod(api, name, namespace)
        return str(((pod or {}).get("spec") or {}).get("nodeName") or "")
    node: str = await wait_for(bound, timeout=timeout, what=f"pod {name} to be bound")
    return node


async def events_for(api: ApiClient, name: str, namespace: str = "default") -> list[Obj]:
    items = (await api.list("events", namespace))["items"]
    return [e for e in items if e.get("involvedObject", {}).get("name") == name]


StartKubelet = Callable[..., None]
StartControllerManager = Callable[..., None]


@pytest.fixture
def start_kubelet(cluster: Cluster, tmp_path: Path) -> StartKubelet:
    """`start_kubelet("zone-a", nodes=2, labels={...})`: a real kubelet process with the
    fake runtime hosting `nodes` hollow nodes `zone-a-0` …; returns once they are
    registered (the kubelet reports healthy only then). Stopped with the cluster."""
    def start(name: str, *, nodes: int = 1, labels: dict[str, str] | None = None,
              cpu: str = "4", memory: str = "8Gi", taints: str = "") -> None:
        args = ["--runtime", "fake", "--hollow-nodes", str(nodes), "--node-name", name,
                "--root-dir", str(tmp_path / f"kubelet-{name}"), "--log-level", "WARNING",
                "--capacity-cpu", cpu, "--capacity-memory", memory, "--max-pods", "110",
                "--node-lease-renew-interval", "1", "--node-status-update-frequency", "1",
                "--sync-frequency", "2"]
        if labels:
            args += ["--node-labels", ",".join(f"{k}={v}" for k, v in labels.items())]
        if taints:
            args += ["--register-with-taints", taints]
        cluster.add_service(f"kubelet-{name}", "skiff.kubelet", args)
    return start


@pytest.fixture
def start_controller_manager(cluster: Cluster) -> StartControllerManager:
    """`start_controller_manager("disruption")`: the real controller-manager running only
    the named controllers, without leader election."""
    def start(*controllers: str) -> None:
        cluster.add_service("controller-manager", "skiff.controller_manager", [
            "--controllers", ",".join(controllers), "--leader-elect", "false"])
    return start


async def wait_unschedulable(api: ApiClient, name: str, *, what: str) -> str:
    """The message of the pod's PodScheduled=False condition, once its reason is
    Unschedulable."""
    async def unschedulable() -> Obj | None:
        pod = await get_pod(api, name)
        cond = get_condition(pod or {}, "PodScheduled")
        return pod if cond and cond.get("reason") == "Unschedulable" else None
    pod = await wait_for(unschedulable, what=what)
    condition = get_condition(pod, "PodScheduled")
    assert condition is not None
    return str(condition["message"])


async def wait_running(api: ApiClient, name: str, namespace: str = "default",
                       timeout: float = 20.0) -> Obj:
    """The pod once its kubelet reports it Running; returns the pod."""
    async def running() -> Obj | None:
        pod = await get_pod(api, name, namespace)
        return pod if (pod or {}).get("status", {}).get("phase") == "Running" else None
    pod: Obj = await wait_for(running, timeout=timeout, what=f"pod {name} to be Running")
    return pod


async def wait_gone(api: ApiClient, name: str, namespace: str = "default",
                    timeout: float = 20.0) -> None:
    async def gone() -> bool:
        return await get_pod(api, name, namespace) is None
    await wait_for(gone, timeout=timeout, what=f"pod {name} to be deleted")
