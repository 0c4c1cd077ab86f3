"""A kubelet never signals a process group number that has passed to another program.

A container's process group empties when its last process exits; Linux may then hand the
leader's PID to a new process, and a daemon that calls setsid(2) leads a group of that same
number. A kubelet that still held the old container (a pod being deleted, a finished
container waited on) sent SIGTERM and SIGKILL to "its" group, whatever program now led
it. Real processes; the reuse is shown by a live session leader whose start time is not
the container's."""

from __future__ import annotations

import asyncio
import signal
import subprocess

from skiff.kubelet.runtime import ContainerHandle
from skiff.kubelet.runtime.process import ProcessRuntime
from skiff.procfs import container_group, read_stat


async def test_defect_the_kubelet_leaves_alone_a_group_whose_number_was_reused() -> None:
    # Another program leading a group whose number is the old container's leader PID.
    daemon = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        stat = read_stat(daemon.pid)
        assert stat is not None
        ours = container_group(daemon.pid, daemon.pid, stat.start_ticks)
        assert [m.pid for m in ours] == [daemon.pid]  # the real container's group: found
        earlier = stat.start_ticks - 100  # the container that had this PID before
        assert container_group(daemon.pid, daemon.pid, earlier) == []

        exited: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        exited.set_result(0)
        old = ContainerHandle(id=f"process://{daemon.pid}", pid=daemon.pid,
                              pgid=daemon.pid, start_ticks=earlier, started_at=0.0,
                              exited=exited)
        runtime = ProcessRuntime()
        assert runtime.gone(old)  # nothing of the old container is left
        runtime.signal(old, signal.SIGTERM)
        runtime.signal(old, signal.SIGKILL)
        await asyncio.sleep(0.2)
        assert daemon.poll() is None, "the kubelet signalled a group it does not own"
    finally:
        daemon.kill()
        daemon.wait()
