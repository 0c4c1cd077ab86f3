"""Fixtures for integration tests: a real etcd and apiserver, and an API client."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from skiff.client import ApiClient
from tests.integration.cluster import Cluster


def _skiff_namespaces() -> set[str]:
    if not Path("/run/netns").is_dir():
        return set()
    return {p.name for p in Path("/run/netns").iterdir()
            if p.name.startswith(("skiff-pod-", "skiff-podnet"))}


def _made_here(basetemp: Path) -> set[str]:
    """The pod namespaces the kubelets of this session's clusters recorded (their IPAM
    files under this session's temp dir), and the pod networks of its data dirs: other
    sessions (pytest-xdist workers, other checkouts) run clusters at the same time, and
    their namespaces are theirs to remove."""
    from skiff.cli.sandboxes import pod_network_namespace

    names: set[str] = set()
    for entry in basetemp.glob("**/ipam/*/*"):
        with contextlib.suppress(OSError):
            names.add(f"skiff-pod-{entry.read_text().strip()}")
    for directory in [basetemp, *basetemp.glob("*"), *basetemp.glob("*/*")]:
        if directory.is_dir():
            names.add(pod_network_namespace(directory))
    return names


@pytest.fixture(scope="session", autouse=True)
def pod_sandboxes_removed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Test clusters stop their kubelets without `skiff down`, which is what removes pod
    sandboxes: remove the pod network namespaces this session made (only those)."""
    before = _skiff_namespaces()
    yield
    leftover = (_skiff_namespaces() - before) & _made_here(tmp_path_factory.getbasetemp())
    if leftover:
        from pyroute2 import netns

        for name in sorted(leftover):
            with contextlib.suppress(OSError):
                netns.remove(name)


@pytest.fixture(scope="session")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One etcd + apiserver for the tests that do not restart anything."""
    cluster = Cluster(tmp_path_factory.mktemp("cluster")).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def fresh_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A cluster of its own, for tests that kill or restart its processes."""
    cluster = Cluster(tmp_path)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
async def api(shared_cluster: Cluster) -> AsyncIterator[ApiClient]:
    async with ApiClient(shared_cluster.api_target, retry_seconds=20) as client:
        yield client


@pytest.fixture
async def namespace(api: ApiClient) -> str:
    """A namespace of this test's own, so tests sharing a cluster do not see each other."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name
