"""Fixtures for integration tests: a real etcd and apiserver, and an API client."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from skiff.client import ApiClient
from tests.integration.cluster import Cluster


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
