"""`skiff chaos kill|stop|start MEMBER`: crash a member, or hold it down and let it back.

A kill is a crash (SIGKILL): the supervisor starts it again after its back-off. A stop
writes the supervisor's hold-down marker first (`supervisor.stopped_marker`), so it stays
down until `start` removes the marker and waits for the supervisor to bring it back.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from skiff.cluster.state import ClusterState, Component, same_process, stop_component
from skiff.cluster.supervisor import TICK_SECONDS, stopped_marker

__all__ = ["MEMBER_COMMANDS", "MemberError", "kill_member", "start_member", "stop_member"]


class MemberError(RuntimeError):
    """A `skiff chaos kill/stop/start` that cannot be done; the message says why."""


def find_member(state: ClusterState, name: str) -> Component:
    """The component `name` as `skiff status` shows it (`node-2` also names its kubelet)."""
    for comp in state.components:
        if comp.name in (name, f"kubelet-{name}"):
            return comp
    names = ", ".join(c.name for c in state.components)
    raise MemberError(f"no member {name!r} in this cluster; members: {names}")


def _load(data_dir: Path) -> ClusterState:
    state = ClusterState.load(data_dir)
    if state is None:
        raise MemberError(f"no cluster in {data_dir}; start one with `skiff up`")
    return state


def kill_member(data_dir: Path, name: str) -> str:
    """SIGKILL, as a crash: the supervisor starts it again after its back-off."""
    comp = find_member(_load(data_dir), name)
    if stopped_marker(data_dir, comp.name).exists():
        raise MemberError(f"{comp.name} is stopped (`skiff chaos stop`); "
                          f"`skiff chaos start {name}` brings it back")
    if not same_process(comp):
        raise MemberError(f"{comp.name} is not running (pid {comp.pid} is gone); the "
                          f"supervisor is starting it again, see `skiff status`")
    with contextlib.suppress(ProcessLookupError):
        os.kill(comp.pid, signal.SIGKILL)
    return (f"killed {comp.name} (pid {comp.pid}) with SIGKILL; the supervisor starts it "
            f"again (see RESTARTS in `skiff status`)")


def stop_member(data_dir: Path, name: str, *, timeout: float = 10.0) -> str:
    """Stop it (SIGTERM, then SIGKILL) and keep it down until `skiff chaos start`."""
    comp = find_member(_load(data_dir), name)
    marker = stopped_marker(data_dir, comp.name)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(f"{time.time()}\n")
    stop_component(comp, timeout=timeout)
    return (f"stopped {comp.name} (pid {comp.pid}); it stays down until "
            f"`skiff chaos start {name}`")


def start_member(data_dir: Path, name: str, *, timeout: float = 30.0) -> str:
    """Let the supervisor start it again, and wait until it runs."""
    comp = find_member(_load(data_dir), name)
    marker = stopped_marker(data_dir, comp.name)
    if not marker.exists() and same_process(comp):
        return f"{comp.name} is already running (pid {comp.pid})"
    marker.unlink(missing_ok=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = ClusterState.load(data_dir)
        now = next((c for c in state.components if c.name == comp.name), None) \
            if state else None
        if now is not None and now.pid != comp.pid and same_process(now):
            return f"started {comp.name}: pid {now.pid}"
        time.sleep(TICK_SECONDS)
    raise MemberError(f"{comp.name} did not start within {timeout:.0f}s: is the `skiff up` "
                      f"that supervises it still running? see its log {comp.log}")


MEMBER_COMMANDS: dict[str, Callable[[Path, str], str]] = {
    "kill": kill_member, "stop": stop_member, "start": start_member}

