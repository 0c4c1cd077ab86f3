"""Ending the pod processes of a local cluster when the whole cluster stops.

A kubelet that stops leaves its containers running (as Kubernetes' does), so a restarted
kubelet can adopt them. Stopping the *cluster* (`skiff down`, Ctrl-C on `skiff up`) must
end them too. Each kubelet records its containers in `<root-dir>/pods/<uid>/state.json`
(PID, process group, /proc start time in clock ticks); this module reads those files and
ends each container's process group whose identity is confirmed:

- the recorded PID is alive with the recorded start time and still leads the group, or
- the leader is gone but members of the group survive (Linux never hands out a PID while
  a process group of that number exists, so the group is still the container's), each
  member started no earlier than the recorded leader.

A PID that was reused by another program (different start time) is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from skiff.podstate import load_state
from skiff.procfs import group_members, read_stat

__all__ = ["PodGroup", "end_pod_groups", "kubelet_root_dirs", "pod_groups", "summary"]


@dataclass(frozen=True)
class PodGroup:
    """One container's live process group; `what` names it for messages."""

    pgid: int
    pids: tuple[int, ...]
    what: str


def kubelet_root_dirs(data_dir: Path, argvs: Iterable[list[str]] = ()) -> list[Path]:
    """`<data-dir>/nodes/*` (where `skiff up` puts each kubelet's `--root-dir`) and any
    other `--root-dir` in the given kubelet command lines."""
    roots = {p for p in (data_dir / "nodes").glob("*") if p.is_dir()}
    for argv in argvs:
        for i, arg in enumerate(argv):
            if arg == "--root-dir" and i + 1 < len(argv):
                roots.add(Path(argv[i + 1]))
            elif arg.startswith("--root-dir="):
                roots.add(Path(arg.split("=", 1)[1]))
    return sorted(roots)


def pod_groups(roots: Iterable[Path]) -> list[PodGroup]:
    """Every live, confirmed container process group recorded under these kubelet roots."""
    found: dict[int, PodGroup] = {}
    for root in roots:
        for state_file in sorted(root.glob("pods/*/state.json")):
            state = load_state(state_file.parent) or {}
            pod = f"{state.get('namespace')}/{state.get('name')}"
            containers = state.get("containers")
            for container, entry in (containers if isinstance(containers, dict) else {}).items():
                if not isinstance(entry, dict):
                    continue
                try:
                    pid, pgid = int(entry.get("pid") or 0), int(entry.get("pgid") or 0)
                    ticks = int(entry.get("startTicks") or 0)
                except (TypeError, ValueError):
                    continue
                if pid <= 0 or pgid <= 0 or pgid in found:
                    continue
                leader = read_stat(pid)
                if leader is not None and not leader.alive:
                    leader = None  # a zombie is gone
                if leader is not None and (leader.start_ticks != ticks or leader.pgrp != pgid):
                    continue  # a reused PID (or it left the group): not this container
                members = [m for m in group_members(pgid) if m.start_ticks >= ticks]
                if leader is None and not members:
                    continue
                pids = tuple(sorted({m.pid for m in members} | ({pid} if leader else set())))
                found[pgid] = PodGroup(pgid, pids, f"pod {pod} container {container}")
    return list(found.values())


def end_pod_groups(roots: Iterable[Path], *, grace: float = 3.0) -> list[PodGroup]:
    """SIGTERM each confirmed group, SIGKILL what is left after `grace` seconds; returns
    the groups that were ended."""
    roots = list(roots)
    groups = pod_groups(roots)
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group.pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and pod_groups(roots):
        time.sleep(0.05)
    # Re-confirm before SIGKILL: only groups that are still the recorded containers.
    for group in pod_groups(roots):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group.pgid, signal.SIGKILL)
    return groups


def summary(groups: list[PodGroup]) -> str:
    processes = sum(len(g.pids) for g in groups)
    return (f"{'pods':<22} ended {len(groups)} container process group"
            f"{'' if len(groups) == 1 else 's'} ({processes} process"
            f"{'' if processes == 1 else 'es'})")
