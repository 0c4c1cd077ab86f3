"""Reading /proc: process start times (to tell a re-adopted PID from a reused one, GT8),
the live members of a process group (PS1: "confirmed gone") and their resident memory."""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["ProcStat", "container_group", "group_members", "read_stat"]

_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class ProcStat:
    pid: int
    state: str
    pgrp: int
    start_ticks: int
    rss_bytes: int

    @property
    def alive(self) -> bool:
        """Zombies (Z) and dead (X) entries are gone for every purpose of the kubelet."""
        return self.state not in ("Z", "X")


def read_stat(pid: int) -> ProcStat | None:
    """`/proc/<pid>/stat`, or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode(errors="replace")
    except OSError:
        return None
    # "pid (comm) state ppid pgrp ..."; comm may hold spaces and parentheses.
    rest = data[data.rfind(")") + 2:].split()
    try:
        return ProcStat(pid=pid, state=rest[0], pgrp=int(rest[2]),
                        start_ticks=int(rest[19]), rss_bytes=int(rest[21]) * _PAGE_SIZE)
    except (IndexError, ValueError):
        return None


def group_members(pgid: int) -> list[ProcStat]:
    """Live (non-zombie) processes whose process group is `pgid`."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return []
    except PermissionError:
        pass
    members: list[ProcStat] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = read_stat(int(entry))
        if stat is not None and stat.pgrp == pgid and stat.alive:
            members.append(stat)
    return members


def container_group(pid: int, pgid: int, start_ticks: int) -> list[ProcStat]:
    """The live members of a container's process group (leader `pid`, started at
    `start_ticks`), or none once that group number is another program's.

    While any member lives, Linux hands out neither the PID nor the group number again.
    Once the group has emptied both are free: a program that later gets that PID and calls
    setsid(2) (a daemon does) leads a group of the same number. So a live process holding
    the leader's PID with another start time means the container's group is gone, and
    signalling "its" group would hit that program (a kubelet still holding the finished
    container of a pod being deleted, on a machine whose pid_max is 32768)."""
    if pgid == pid and start_ticks > 0:
        holder = read_stat(pid)
        if holder is not None and holder.alive and holder.start_ticks != start_ticks:
            return []
    return [m for m in group_members(pgid) if m.start_ticks >= start_ticks]
