"""Fixtures for integration tests: a real etcd and apiserver, and an API client."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from skiff.client import ApiClient
from tests.integration.cluster import Cluster
from tests.integration.kubectl import http_front


def _live_etcd_data_dirs() -> set[Path]:
    live: set[Path] = set()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:  # the process ended while we looked
            continue
        if b"--data-dir" in argv[:-1]:
            live.add(Path(argv[argv.index(b"--data-dir") + 1].decode()).resolve())
    return live


@pytest.fixture(scope="module", autouse=True)
def _drop_stopped_etcd_data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """After each module, delete the data of the etcd members it stopped: each keeps a
    64 MB preallocated WAL, and a full run starts a few hundred (about 7 GB left on disk
    otherwise). Logs are kept; members still running (the session cluster) are not touched."""
    yield
    base = tmp_path_factory.getbasetemp()
    live = _live_etcd_data_dirs()
    # os.walk, not Path.rglob: a kubelet of a cluster still running elsewhere in the base
    # removes pod directories while we walk, and rglob raises on one that vanished.
    for root, dirs, _ in os.walk(base):
        member = Path(root) / "member"
        if "member" in dirs and (member / "wal").is_dir() and Path(root).resolve() not in live:
            shutil.rmtree(member, ignore_errors=True)
            dirs.remove("member")


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


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A kubeconfig for the real kubectl, against an apiserver's HTTP front of the module's
    own cluster."""
    with http_front(tmp_path_factory.mktemp("kubectl")) as (_, _, config):
        yield config


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
