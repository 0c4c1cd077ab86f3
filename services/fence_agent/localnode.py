"""Finding every process of one local node: its kubelet and its pods' process groups.

In `skiff up`'s local mode a "node" is a kubelet process (component `kubelet-<node>` in
`<data-dir>/cluster.json`, with its PID and argv) plus the process groups of the pods it
started, which the kubelet records in `<root-dir>/pods/<uid>/state.json` (PID, process
group, /proc start time). A PID is only ever trusted after checking it is still the same
process: a kubelet's /proc cmdline must equal the recorded argv (which also finds a kubelet
of the node that was started again by hand), and a container's /proc
start time must equal the recorded one, so a reused PID is never signalled. A container
group whose leader already exited is still found through its surviving members: Linux does
not hand out a PID while a process group of that number exists.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path

from skiff.cluster.state import ClusterState, Component
from skiff.podstate import load_state
from skiff.procfs import group_members, read_stat

__all__ = ["NodeProcess", "kubelet_component", "kubelet_root_dir", "node_processes",
           "kill_group", "cmdline"]

DEFAULT_KUBELET_ROOT_DIR = "/tmp/skiff/kubelet"


@dataclass(frozen=True)
class NodeProcess:
    """A live process group of the node; `what` names it for messages."""

    pgid: int
    pids: tuple[int, ...]
    what: str


def kubelet_component(state: ClusterState, node: str) -> Component | None:
    return next((c for c in state.components if c.name == f"kubelet-{node}"), None)


def kubelet_root_dir(argv: list[str]) -> Path:
    """The `--root-dir` a kubelet was started with (the kubelet's default otherwise)."""
    for i, arg in enumerate(argv):
        if arg == "--root-dir" and i + 1 < len(argv):
            return Path(argv[i + 1])
        if arg.startswith("--root-dir="):
            return Path(arg.split("=", 1)[1])
    return Path(DEFAULT_KUBELET_ROOT_DIR)


def cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0")[:-1]]


def _kubelet_groups(component: Component) -> list[NodeProcess]:
    """The node's kubelet: the recorded PID, and any process running the very same argv
    (same node name, root dir and ports: somebody started it again by hand)."""
    pids = {component.pid}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            pids.add(int(entry))
    groups: list[NodeProcess] = []
    for pid in sorted(pids):
        stat = read_stat(pid)
        if stat is None or not stat.alive or cmdline(pid) != component.argv:
            continue  # gone, a zombie, or another program (a reused PID)
        leads = stat.pgrp == pid
        members = group_members(pid) if leads else [stat]
        groups.append(NodeProcess(pgid=pid if leads else 0,
                                  pids=tuple(sorted({m.pid for m in members} | {pid})),
                                  what=f"kubelet (pid {pid})"))
    return groups


def _pod_groups(root: Path) -> list[NodeProcess]:
    found: dict[int, NodeProcess] = {}
    for state_file in sorted(root.glob("pods/*/state.json")):
        state = load_state(state_file.parent) or {}
        pod = f"{state.get('namespace')}/{state.get('name')}"
        for container, entry in (state.get("containers") or {}).items():
            pid, pgid = int(entry.get("pid") or 0), int(entry.get("pgid") or 0)
            if pid <= 0 or pgid <= 0 or pgid in found:
                continue
            leader = read_stat(pid)
            same = (leader is not None and leader.alive
                    and leader.start_ticks == entry.get("startTicks") and leader.pgrp == pgid)
            members = group_members(pgid)
            if not same and (leader is not None and leader.alive and leader.pgrp == pgid):
                continue  # the PID was reused by a process that took this group: not ours
            if same or members:
                pids = tuple(sorted({m.pid for m in members} | ({pid} if same else set())))
                found[pgid] = NodeProcess(pgid=pgid, pids=pids,
                                          what=f"pod {pod} container {container}")
    return list(found.values())


def node_processes(state: ClusterState, node: str) -> list[NodeProcess]:
    """Every live process group of `node`, the kubelet's first."""
    component = kubelet_component(state, node)
    if component is None:
        return []
    groups: list[NodeProcess] = []
    groups += _kubelet_groups(component)
    groups += _pod_groups(kubelet_root_dir(component.argv))
    return groups


def kill_group(group: NodeProcess) -> None:
    """SIGKILL the whole group (or, for a kubelet not leading its group, its PIDs)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group.pgid > 0:
            os.killpg(group.pgid, signal.SIGKILL)
            return
        for pid in group.pids:
            os.kill(pid, signal.SIGKILL)
