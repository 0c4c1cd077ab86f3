"""Removing cgroups, shared by the kubelet (a pod's cgroups when it goes) and `skiff down`
(a node's whole tree, SPEC AU8): a cgroup directory is removed with rmdir once it has no
child cgroup and no process, so the tree is removed deepest first and processes still in it
(a container's forks that left its process group) are killed first.

A kubelet records its node's cgroup directories (one per hierarchy) in `<root-dir>/cgroups`,
so `skiff down` finds them whatever cgroups it runs in itself.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

__all__ = ["RECORD_FILE", "record_node_dirs", "remove_recorded", "remove_tree"]

log = logging.getLogger(__name__)

RECORD_FILE = "cgroups"


def remove_tree(path: Path, *, kill: bool = True, wait: float = 2.0) -> bool:
    """rmdir a cgroup and its children, deepest first; SIGKILL processes still inside
    when `kill`. True if it is gone."""
    if not path.is_dir():
        return True
    for child in sorted((p for p in path.iterdir() if p.is_dir()), reverse=True):
        remove_tree(child, kill=kill, wait=wait)
    deadline = time.monotonic() + wait
    while True:
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError as err:
            if err.errno != errno.EBUSY or time.monotonic() >= deadline:
                log.warning("cannot remove cgroup", extra={"path": str(path),
                                                          "error": err.strerror})
                return False
        try:
            pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            pids = []
        if kill:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def record_node_dirs(root_dir: Path, dirs: list[Path]) -> None:
    root_dir.mkdir(parents=True, exist_ok=True)
    (root_dir / RECORD_FILE).write_text("".join(f"{d}\n" for d in dirs))


def remove_recorded(roots: Iterable[Path]) -> int:
    """`skiff down`: remove the node cgroups the kubelets under `roots` recorded, then their
    `skiff` parents if nothing else is left in them; how many trees went."""
    removed = 0
    for root in roots:
        try:
            dirs = [Path(line) for line in (root / RECORD_FILE).read_text().splitlines()
                    if line.strip()]
        except OSError:
            continue
        for directory in dirs:
            if directory.is_dir() and remove_tree(directory):
                removed += 1
            with contextlib.suppress(OSError):
                os.rmdir(directory.parent)  # `skiff/`, once no other node uses it
    return removed
