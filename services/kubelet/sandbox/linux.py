"""The few Linux calls Python 3.11's `os` lacks (setns, unshare, mount, pivot_root, prctl,
capset), via libc.

They act on the calling thread (setns of a network namespace) or process (in a forked
child before exec), and raise OSError with errno like the `os` functions do. ctypes on libc
rather than a PyPI package: the capability packages (python-prctl, cap-ng's bindings) are
C extensions that need libcap headers to build, and these are six small system calls.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

__all__ = ["CLONE_NEWNET", "CLONE_NEWNS", "CLONE_NEWUTS", "MS_BIND", "MS_NODEV", "MS_NOEXEC",
           "MS_NOSUID", "MS_RDONLY", "MS_REC", "MS_REMOUNT", "MS_SLAVE", "capset", "mount",
           "pivot_root", "prctl", "setns_path", "umount", "unshare"]

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
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


_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(os.uname().machine, 155)


def pivot_root(new_root: str, put_old: str) -> None:
    _check(_libc.syscall(ctypes.c_long(_SYS_PIVOT_ROOT), new_root.encode(), put_old.encode()),
           f"pivot_root {new_root}")


def prctl(option: int, arg2: int = 0, arg3: int = 0) -> None:
    _check(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(arg3),
                       ctypes.c_ulong(0), ctypes.c_ulong(0)), f"prctl {option}")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


_CAPABILITY_VERSION_3 = 0x20080522


def capset(*, effective: int, permitted: int, inheritable: int) -> None:
    """Set the calling thread's capability sets (bit masks of capability numbers)."""
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    for i in range(2):
        shift = 32 * i
        data[i].effective = (effective >> shift) & 0xFFFFFFFF
        data[i].permitted = (permitted >> shift) & 0xFFFFFFFF
        data[i].inheritable = (inheritable >> shift) & 0xFFFFFFFF
    _check(_libc.capset(ctypes.byref(header), data), "capset")
