"""Landlock (SPEC AU8): a container's processes reach only their own root, and signal and
ptrace only their own kind.

Without a PID namespace every pod's processes are visible in the node's /proc, and a
container whose process has the same uid and at least the capabilities of another's (two
default root pods) could read that container's files — its Secret volumes too — through
`/proc/<pid>/root`, `/proc/<pid>/cwd` or `/proc/<pid>/fd/*`, ptrace it and signal it (with
CAP_KILL, any process of the node). So each container's process, and every process that
enters a running container (`kubectl exec`, exec probes, lifecycle hooks), restricts
itself, after its root is built or joined and before it drops its capabilities, to a
Landlock domain of its own:

- every filesystem access right the running kernel knows is handled, and one rule grants
  them all beneath the container's "/": its binds of the node's /usr, its volumes, /proc,
  /dev and /tmp stay reachable, while a file reached through another container's (or the
  node's) root lies in a mount tree with none of the rule's inodes above it and is denied;
- Landlock itself refuses ptrace (and the /proc files that need ptrace access: root, cwd,
  fd, environ, mem) of any process outside the domain or domains nested in it;
- with ABI 6 and later, `LANDLOCK_SCOPE_SIGNAL` refuses signals to processes outside it
  (not for `shareProcessNamespace` pods: their containers signal each other, as
  Kubernetes lets them), and for `hostNetwork` pods `LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET`
  keeps them off the node's abstract sockets (a pod's own network namespace already holds
  only its own).

A `privileged` container gets no domain: it has the node's devices and every capability,
and it may mount filesystems, which no process in a Landlock domain may.

The calls are ctypes on libc's `syscall`, as `linux` does for the other calls the `os`
module lacks: the PyPI binding `landlock` (1.0.0.dev5, a pre-release) knows neither scopes
nor ABI versions past 5. `confine` runs in a forked child before exec (no imports, no
logging): the plan, with the kernel's ABI version, is computed by the kubelet beforehand.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from dataclasses import dataclass
from typing import Any

from skiff.api.types import Obj

__all__ = ["NO_LANDLOCK_MESSAGE", "LandlockPlan", "abi_version", "confine", "plan_landlock"]

NO_LANDLOCK_MESSAGE = (
    "the kernel has no Landlock (older than 5.13, or Landlock not among its enabled LSMs): "
    "containers still get a root filesystem of their own, but one whose process has the "
    "same uid and at least the capabilities of another's can reach that container's files "
    "through /proc/<pid>/root and signal or ptrace it")

# <linux/landlock.h>; the system call numbers are the generic table's (x86_64, aarch64)
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_O_PATH = getattr(os, "O_PATH", 0o10000000)

# filesystem access rights by the ABI version that introduced them
_FS_RIGHTS = {1: (1 << 13) - 1,  # EXECUTE ... MAKE_SYM
              2: 1 << 13,  # REFER
              3: 1 << 14,  # TRUNCATE
              5: 1 << 15}  # IOCTL_DEV
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6
_SCOPES_ABI = 6


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64),
                ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the kernel's header
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _syscall(number: int, *args: Any) -> int:
    result = int(_libc.syscall(ctypes.c_long(number), *args))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock: {os.strerror(err)}")
    return result


@functools.cache
def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when it has none (too old, or Landlock is not
    among the enabled LSMs: `lsm=` on the kernel's command line)."""
    try:
        return _syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0),
                        ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except OSError:  # ENOSYS, EOPNOTSUPP (disabled), or a seccomp filter refusing it
        return 0


def handled_fs_rights(abi: int) -> int:
    """Every filesystem access right ABI `abi` knows."""
    return sum(bits for version, bits in _FS_RIGHTS.items() if version <= abi)


@dataclass(frozen=True)
class LandlockPlan:
    """What `confine` restricts: `abi` is the kernel's version (it decides which rights
    and scopes exist)."""

    abi: int
    signals: bool = True  # LANDLOCK_SCOPE_SIGNAL
    abstract_sockets: bool = False  # LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET

    @property
    def scoped(self) -> int:
        if self.abi < _SCOPES_ABI:
            return 0
        return ((SCOPE_SIGNAL if self.signals else 0)
                | (SCOPE_ABSTRACT_UNIX_SOCKET if self.abstract_sockets else 0))


def plan_landlock(pod: Obj, *, privileged: bool) -> LandlockPlan | None:
    """A container's confinement, or None: when the kernel has no Landlock, and for a
    `privileged` container, which holds every capability and the node's devices anyway
    and may mount filesystems, which a Landlock domain never may."""
    abi = abi_version()
    if abi < 1 or privileged:
        return None
    spec = pod.get("spec") or {}
    return LandlockPlan(abi=abi, signals=spec.get("shareProcessNamespace") is not True,
                        abstract_sockets=spec.get("hostNetwork") is True)


def confine(plan: LandlockPlan) -> None:
    """In a forked child, once "/" is the container's root and while it still has
    CAP_SYS_ADMIN (or after no_new_privs): a new Landlock domain allowing every filesystem
    access beneath "/" only, with the plan's scopes. Raises OSError."""
    rights = handled_fs_rights(plan.abi)
    attr = _RulesetAttr(handled_access_fs=rights, handled_access_net=0, scoped=plan.scoped)
    # ABI 1-3 know only the first field, 4-5 the first two: pass just what they know
    size = ctypes.sizeof(ctypes.c_uint64) * (3 if plan.abi >= _SCOPES_ABI else
                                              2 if plan.abi >= 4 else 1)
    ruleset = _syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                       ctypes.c_uint32(0))
    try:
        root = os.open("/", _O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            rule = _PathBeneathAttr(allowed_access=rights, parent_fd=root)
            _syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                     ctypes.byref(rule), ctypes.c_uint32(0))
        finally:
            os.close(root)
        _syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
