"""The power agent (SPEC FN2): stop every process of a node and keep it down until unfenced.

Local mode (`skiff up`) plays the BMC with process groups: fencing writes the marker
`<data-dir>/fenced/<node>` first (so `skiff up` and this agent know the node must stay
down), SIGKILLs the node's kubelet and then every pod process group the kubelet recorded
(see `localnode`), and reports Fenced only after a fresh scan finds nothing of the node
alive and every process it signalled has finished exiting (all of its threads gone, not
just its leader). Unfencing starts the kubelet again with its recorded argv (same ports, same root
dir), records its new PID in `cluster.json` so `skiff down` still stops it, waits for its
health check and only then removes the marker. While fenced, `status` says "not fenced" if
anything of the node runs again, and the service re-fences it (keep-down).

Docker mode (compose) does the same to the node's container through the Docker Engine
API (`docker.DockerEngine`): kill, confirmed by inspecting it not running; start to
unfence.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import time
from pathlib import Path

from skiff.cluster.state import ClusterState, Component, health_of
from skiff.fence_agent.agent import FenceError, FenceStatus
from skiff.fence_agent.docker import DockerEngine
from skiff.fence_agent.localnode import kill_group, kubelet_component, node_processes
from skiff.procfs import exited, read_stat

__all__ = ["DockerPowerAgent", "LocalPowerAgent"]

log = logging.getLogger(__name__)


class LocalPowerAgent:
    def __init__(self, *, data_dir: Path, confirm_timeout: float = 10.0,
                 start_timeout: float = 30.0) -> None:
        self.data_dir = data_dir
        self.confirm_timeout = confirm_timeout
        self.start_timeout = start_timeout
        self._started: dict[int, subprocess.Popen[bytes]] = {}

    def marker(self, node: str) -> Path:
        return self.data_dir / "fenced" / node

    def _state(self) -> ClusterState:
        state = ClusterState.load(self.data_dir)
        if state is None:
            raise FenceError(f"no cluster state at {self.data_dir / 'cluster.json'}: the "
                             "power agent needs the data dir of the `skiff up` cluster "
                             "(--data-dir)")
        return state

    def _component(self, state: ClusterState, node: str) -> Component:
        component = kubelet_component(state, node)
        if component is None:
            known = [c.name.removeprefix("kubelet-") for c in state.components
                     if c.name.startswith("kubelet-")]
            raise FenceError(f"node {node} has no kubelet in {self.data_dir / 'cluster.json'}"
                             f" (nodes: {', '.join(known) or 'none'}); power fencing works "
                             "only on nodes of this local cluster")
        return component

    async def fence(self, node: str) -> str:
        state = self._state()
        self._component(state, node)
        marker = self.marker(node)
        marker.parent.mkdir(parents=True, exist_ok=True)
        if not marker.exists():
            marker.write_text(json.dumps({"node": node, "fencedAt": time.time()}))
        killed: list[str] = []
        signalled: dict[int, int] = {}  # pid -> start ticks: confirmed only once exited
        deadline = time.monotonic() + self.confirm_timeout
        delay = 0.02
        while True:
            self._reap()
            groups = node_processes(self._state(), node)
            exiting = [pid for pid, ticks in signalled.items() if not exited(pid, ticks)]
            if not groups and not exiting:
                break
            if time.monotonic() > deadline:
                raise FenceError(f"node {node} still has live processes "
                                 f"{self.confirm_timeout:g}s after SIGKILL: "
                                 + "; ".join([f"{g.what} pids {list(g.pids)}" for g in groups]
                                             + [f"pid {pid} still exiting" for pid in exiting]))
            for group in groups:  # the kubelet first, so it starts nothing new
                for pid in group.pids:
                    stat = read_stat(pid)
                    if stat is not None:
                        signalled.setdefault(pid, stat.start_ticks)
                kill_group(group)
                if group.what not in killed:
                    killed.append(group.what)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)
        log.info("node powered off", extra={"node": node, "killed": killed})
        if not killed:
            return f"node {node} was already down; nothing of it is alive"
        return f"killed {len(killed)} process group(s) of node {node}: {', '.join(killed)}"

    async def status(self, node: str) -> FenceStatus:
        try:
            state = self._state()
            self._component(state, node)
        except FenceError as err:
            return FenceStatus(fenced=False, message=str(err))
        self._reap()
        alive = node_processes(state, node)
        if alive:
            return FenceStatus(fenced=False, message=f"node {node} has live processes: "
                               + "; ".join(f"{g.what} pids {list(g.pids)}" for g in alive))
        if not self.marker(node).exists():
            return FenceStatus(fenced=False, message=f"node {node} is down but not marked "
                               f"fenced ({self.marker(node)} is missing)")
        return FenceStatus(fenced=True, message=f"no process of node {node} is alive")

    async def unfence(self, node: str) -> str:
        state = self._state()
        component = self._component(state, node)
        running = [g for g in node_processes(state, node) if g.what.startswith("kubelet")]
        if running:
            self.marker(node).unlink(missing_ok=True)
            return f"the kubelet of node {node} is already running (pid {component.pid})"
        log_path = Path(component.log)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        # A kubelet of a `skiff up --netns` cluster starts again inside its node's namespace
        # (`ip netns exec` execs it in place: same PID, same /proc cmdline as recorded).
        argv = (["ip", "netns", "exec", component.netns, *component.argv] if component.netns
                else component.argv)
        with open(log_path, "ab") as logf:
            popen = subprocess.Popen(
                argv, stdout=logf, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
                # its own identity (recorded with it), not the fence agent's
                env={**os.environ, "SKIFF_LOG_FORMAT": "json", **component.env})
        self._started[popen.pid] = popen
        self._record_pid(node, popen.pid)
        component.pid = popen.pid
        deadline = time.monotonic() + self.start_timeout
        while (health := await health_of(component)) != "healthy":
            if health == "exited" or time.monotonic() > deadline:
                raise FenceError(f"the kubelet of node {node} did not come back ({health}); "
                                 f"see {log_path}")
            await asyncio.sleep(0.1)
        self.marker(node).unlink(missing_ok=True)
        return f"started the kubelet of node {node} again (pid {popen.pid})"

    def _record_pid(self, node: str, pid: int) -> None:
        """Point cluster.json at the new kubelet, so `skiff down` and this agent find it."""
        state = self._state()
        component = self._component(state, node)
        component.pid = pid
        state.save(self.data_dir)

    def _reap(self) -> None:
        for pid, popen in list(self._started.items()):
            if popen.poll() is not None:
                del self._started[pid]

    def close(self) -> None:
        """Leave the kubelets this agent started running (they belong to the cluster)."""
        self._started.clear()


class DockerPowerAgent:
    """Power fencing of a compose node: its container is the machine, the engine the BMC.

    Keep-down: a kill through the API marks the container as stopped by hand, so the
    `restart: unless-stopped` policy of the compose file never starts it again (neither
    right away nor after an engine restart); only `unfence` (or a person) starts it. If
    something does start it, the fence agent's resync finds it running and kills it again.
    """

    def __init__(self, *, docker: DockerEngine, confirm_timeout: float = 30.0) -> None:
        self.docker = docker
        self.confirm_timeout = confirm_timeout

    async def fence(self, node: str) -> str:
        container = await self.docker.inspect_service(node)
        if container["State"].get("Running"):
            await self.docker.kill(container["Id"])
            what = f"killed container {self.docker.name(container)}"
        else:
            what = f"container {self.docker.name(container)} was already stopped"
        await self._wait_running(node, False)
        return f"{what}; the Docker engine confirms it is not running"

    async def unfence(self, node: str) -> str:
        container = await self.docker.inspect_service(node)
        if not container["State"].get("Running"):
            await self.docker.start(container["Id"])
        await self._wait_running(node, True)
        return f"started container {self.docker.name(container)} again"

    async def status(self, node: str) -> FenceStatus:
        try:
            container = await self.docker.inspect_service(node)
        except FenceError as err:
            return FenceStatus(fenced=False, message=str(err))
        if container["State"].get("Running"):
            return FenceStatus(fenced=False, message=f"container "
                               f"{self.docker.name(container)} is running")
        return FenceStatus(fenced=True, message=f"container {self.docker.name(container)} "
                                                "is not running")

    async def _wait_running(self, node: str, running: bool) -> None:
        deadline = time.monotonic() + self.confirm_timeout
        delay = 0.1
        while True:
            container = await self.docker.inspect_service(node)
            if bool(container["State"].get("Running")) == running:
                return
            if time.monotonic() > deadline:
                raise FenceError(f"container {self.docker.name(container)} of node {node} "
                                 f"is {'not ' if running else ''}running after "
                                 f"{self.confirm_timeout:g}s; check the Docker engine")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
