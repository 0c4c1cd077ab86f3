"""Probe failures are reported one by one, as Kubernetes' prober records an `Unhealthy`
Event per failed probe ("Readiness probe failed: ...", "Liveness probe failed: ..."), the
event recorder counting the repeats; the kill comes only at the failureThreshold."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from skiff.clock import RealClock
from skiff.kubelet.handlers import HandlerResult
from skiff.kubelet.probes import LIVENESS, READINESS, ProbeWorker
from skiff.kubelet.records import APP, ContainerRecord
from skiff.kubelet.runtime import ContainerConfig
from skiff.kubelet.runtime.fake import FakeRuntime
from skiff.kubelet.termination import KillReason


async def _running(spec: dict[str, Any]) -> ContainerRecord:
    record = ContainerRecord(spec=spec, kind=APP)
    record.handle = await FakeRuntime().start(ContainerConfig(
        pod_uid="u", namespace="ns", pod_name="p", name=spec["name"], command=["run"],
        env={}, working_dir=Path("."), log_path=Path("log")))  # runs until signalled
    record.attempts = 1
    return record


async def _failing(probe: dict[str, Any], kind: str, probes: int
                   ) -> tuple[list[str], list[tuple[KillReason, str]], ProbeWorker]:
    record = await _running({"name": "c", kind: probe})
    unhealthy: list[str] = []
    failures: list[tuple[KillReason, str]] = []
    started = asyncio.Event()
    started.set()

    async def run(_probe: dict[str, Any], _timeout: float) -> HandlerResult:
        return HandlerResult(False, "HTTP probe failed with statuscode: 500")

    worker = ProbeWorker(
        record=record, kind=kind, run=run, on_change=lambda: None,
        on_failure=lambda _r, reason, message: failures.append((reason, message)),
        on_unhealthy=lambda _r, message: unhealthy.append(message), started=started,
        clock=RealClock())
    task = asyncio.create_task(worker.run())
    deadline = asyncio.get_running_loop().time() + 10
    while len(worker.results) < probes and not task.done():
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.02)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return unhealthy, failures, worker


async def test_lc7_every_failed_readiness_probe_reports_readiness_probe_failed() -> None:
    unhealthy, failures, worker = await _failing(
        {"httpGet": {"port": 80}, "periodSeconds": 1, "failureThreshold": 3}, READINESS, 2)
    assert worker.results[:2] == [False, False]
    assert unhealthy[:2] == ["Readiness probe failed: HTTP probe failed with statuscode: "
                             "500"] * 2
    assert failures == []  # readiness never kills
    assert not worker.record.ready


async def test_lc7_every_failed_liveness_probe_reports_before_the_kill_at_the_threshold() -> None:
    unhealthy, failures, worker = await _failing(
        {"httpGet": {"port": 80}, "periodSeconds": 1, "failureThreshold": 2}, LIVENESS, 2)
    message = "Liveness probe failed: HTTP probe failed with statuscode: 500"
    assert unhealthy == [message, message]  # one per failed probe, not one at kill time
    assert failures == [(KillReason.LIVENESS_PROBE, message)]
    assert len(worker.results) == 2  # the worker stops once it asked for the kill
