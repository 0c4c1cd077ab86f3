"""A pod worker that fails is started again after Kubernetes'
back-off (backOffPeriod, jittered by up to half), with the newest pod the informer
delivered meanwhile; resyncs during the back-off do not restart it in a tight loop."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from skiff.api.types import Obj
from skiff.kubelet import kubelet as kubelet_module
from skiff.kubelet.kubelet import Kubelet

BACKOFF = 0.2


class FakeWorker:
    """Stands in for PodWorker: its first run fails, as a sync that raised would."""

    runs: list[tuple[float, Obj]] = []

    def __init__(self, *, env: Any, pod: Obj, rejection: Any = None) -> None:
        self.pod = pod
        self.uid = pod["metadata"]["uid"]
        self.namespace = pod["metadata"]["namespace"]
        self.name = pod["metadata"]["name"]
        self.removed_from_api = False
        self.orphan = False
        self.task: asyncio.Task[None] | None = None
        self.done = asyncio.Event()

    def update(self, pod: Obj) -> None:
        self.pod = pod

    def removed(self, *, orphan: bool = False) -> None:
        self.removed_from_api = True
        self.orphan = orphan

    async def run(self) -> None:
        FakeWorker.runs.append((time.monotonic(), self.pod))
        if len(FakeWorker.runs) == 1:
            raise RuntimeError("the sync failed")
        await self.done.wait()


def pod(rv: str) -> Obj:
    return {"metadata": {"uid": "u1", "namespace": "default", "name": "web",
                         "resourceVersion": rv},
            "spec": {"nodeName": "node-1"}}


@pytest.fixture
def kubelet(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Kubelet:
    FakeWorker.runs = []
    monkeypatch.setattr(kubelet_module, "PodWorker", FakeWorker)
    env: Any = type("Env", (), {"node_name": "node-1", "root_dir": tmp_path})()
    return Kubelet(env=env, worker_backoff=BACKOFF)


async def _until(check: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_defect8_b_a_failed_pod_worker_starts_again_after_its_backoff(
        kubelet: Kubelet) -> None:
    kubelet.on_pod(pod("1"))
    await _until(lambda: "u1" not in kubelet.workers)  # the first run failed
    failed_at = FakeWorker.runs[0][0]
    for rv in ("2", "3", "4"):  # resyncs and updates during the back-off
        kubelet.on_pod(pod(rv))
        await asyncio.sleep(0.01)
        assert "u1" not in kubelet.workers and len(FakeWorker.runs) == 1
    await _until(lambda: len(FakeWorker.runs) == 2)
    again_at, again_pod = FakeWorker.runs[1]
    assert BACKOFF <= again_at - failed_at <= BACKOFF * 1.5 + 0.2
    assert again_pod["metadata"]["resourceVersion"] == "4"  # the newest pod
    assert "u1" in kubelet.workers
    await kubelet.shutdown()


async def test_defect8_b_a_pod_deleted_during_the_backoff_gets_a_worker_that_removes_it(
        kubelet: Kubelet) -> None:
    kubelet.on_pod(pod("1"))
    await _until(lambda: "u1" not in kubelet.workers)
    kubelet.on_pod_deleted(pod("2"))
    await _until(lambda: len(FakeWorker.runs) == 2)
    worker = kubelet.workers["u1"]
    assert isinstance(worker, FakeWorker) and worker.removed_from_api
    await kubelet.shutdown()


async def test_defect8_b_shutdown_cancels_a_pending_worker_restart(kubelet: Kubelet) -> None:
    kubelet.on_pod(pod("1"))
    await _until(lambda: "u1" not in kubelet.workers)
    await kubelet.shutdown()
    await asyncio.sleep(BACKOFF * 1.5 + 0.1)
    assert len(FakeWorker.runs) == 1 and kubelet.workers == {}
