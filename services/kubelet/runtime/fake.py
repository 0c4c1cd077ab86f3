"""A runtime that runs nothing, for hollow nodes: one process can host hundreds of nodes.

Containers "run" on a schedule read from their command, so scale tests still see pods
start, complete and fail: `["sleep", "N"]` exits 0 after N seconds, `["true"]` exits 0 and
`["false"]` exits 1 at once; anything else runs until it is signalled. The stop signal ends
a container at once (exit 128 + signal); there are no processes, logs or memory. Pod
sandboxes are only recorded (`sandboxes`: pod UID → READY / NOTREADY, as CRI's sandbox
states): a hollow node's pods share its (pretend) network, as they are told.
"""

from __future__ import annotations

import asyncio
import itertools
import time

from skiff.kubelet.runtime import (
    ContainerConfig,
    ContainerHandle,
    ExecResult,
    PodSandbox,
    PodSandboxConfig,
)
from skiff.kubelet.sandbox import NOT_ISOLATED_MESSAGE

__all__ = ["FakeRuntime"]


def _schedule(command: list[str]) -> tuple[float | None, int]:
    """(seconds until exit or None for "until signalled", exit code)."""
    if command[:1] == ["true"]:
        return 0.0, 0
    if command[:1] == ["false"]:
        return 0.0, 1
    if len(command) == 2 and command[0] == "sleep":
        try:
            return float(command[1]), 0
        except ValueError:
            pass
    return None, 0


class FakeRuntime:
    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self.sandboxes: dict[str, str] = {}

    async def run_pod_sandbox(self, config: PodSandboxConfig) -> PodSandbox:
        self.sandboxes[config.uid] = "READY"
        return PodSandbox(None, "" if config.host_network else NOT_ISOLATED_MESSAGE)

    async def stop_pod_sandbox(self, pod_uid: str) -> None:
        if pod_uid in self.sandboxes:
            self.sandboxes[pod_uid] = "NOTREADY"

    async def remove_pod_sandbox(self, pod_uid: str) -> None:
        self.sandboxes.pop(pod_uid, None)

    async def start(self, config: ContainerConfig) -> ContainerHandle:
        loop = asyncio.get_running_loop()
        fake_pid = next(self._ids)
        handle = ContainerHandle(id=f"fake://{fake_pid}", pid=fake_pid, pgid=fake_pid,
                                 start_ticks=0, started_at=time.time(),
                                 exited=loop.create_future())
        after, code = _schedule(list(config.command))
        if after is not None:
            self._timers[fake_pid] = loop.call_later(after, self._exit, handle, code)
        return handle

    def _exit(self, handle: ContainerHandle, code: int) -> None:
        timer = self._timers.pop(handle.pid, None)
        if timer is not None:
            timer.cancel()
        if not handle.exited.done():
            handle.exited.set_result(code)

    def signal(self, handle: ContainerHandle, sig: int) -> None:
        handle.signals_sent.append(sig)
        self._exit(handle, 128 + sig)

    def gone(self, handle: ContainerHandle) -> bool:
        return handle.exited.done()

    def adopt(self, *, pid: int, pgid: int, start_ticks: int,
              started_at: float) -> ContainerHandle | None:
        return None  # nothing survives the process that faked it

    async def exec(self, handle: ContainerHandle | None, config: ContainerConfig,
                   command: list[str], *, timeout: float) -> ExecResult:
        return ExecResult(exit_code=0, output="")

    def memory_bytes(self, handle: ContainerHandle) -> int:
        return 0
