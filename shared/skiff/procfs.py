"""Reading /proc: process start times (to tell a re-adopted PID from a reused one, GT8),
the live members of a process group (PS1: "confirmed gone") and their resident memory."""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["ProcStat", "container_group", "exited", "group_members", "read_stat"]

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
    return _read_stat_file(f"/proc/{pid}/stat", pid)


def _read_stat_file(path: str, pid: int) -> ProcStat | None:
    try:
        with open(path, "rb") as f:
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


def exited(pid: int, start_ticks: int) -> bool:
    """Whether the process that had `pid` and `start_ticks` has finished exiting: no such
    process, another one (a reused PID), or a zombie none of whose threads still runs.

    A killed multi-threaded process is not gone when its leader is: the leader's stat reads
    Z (and its cmdline empty) while its other threads are still being torn down, and only
    then can its parent reap it."""
    stat = read_stat(pid)
    if stat is None or stat.start_ticks != start_ticks:
        return True
    if stat.alive:
        return False
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for tid in tids:
        task = _read_stat_file(f"/proc/{pid}/task/{tid}/stat", pid)
        if task is not None and task.alive:
            return False
    return True


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
