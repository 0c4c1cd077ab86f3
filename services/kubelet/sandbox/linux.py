"""The few Linux namespace calls Python 3.11's `os` lacks (setns, unshare, mount), via libc.

They act on the calling thread (setns of a network namespace) or process (in a forked
child before exec), and raise OSError with errno like the `os` functions do.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

__all__ = ["CLONE_NEWNET", "CLONE_NEWNS", "CLONE_NEWUTS", "MS_BIND", "MS_RDONLY", "MS_REC",
           "MS_REMOUNT", "MS_SLAVE", "mount", "setns_path", "umount", "unshare"]

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_SLAVE = 1 << 19

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def setns_path(path: str, nstype: int) -> None:
    """Join the namespace bound at `path` (e.g. /run/netns/<name>)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        _check(_libc.setns(fd, nstype), f"setns {path}")
    finally:
        os.close(fd)


MNT_DETACH = 2


def umount(target: str) -> None:
    """Lazily unmount `target` (gone once nothing uses it)."""
    _check(_libc.umount2(target.encode(), MNT_DETACH), f"umount {target}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int,
          data: str | None = None) -> None:
    _check(_libc.mount(source.encode() if source else None, target.encode(),
                       fstype.encode() if fstype else None, ctypes.c_ulong(flags),
                       data.encode() if data else None), f"mount {target}")
