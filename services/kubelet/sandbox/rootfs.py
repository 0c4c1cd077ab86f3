"""A container's own root filesystem (SPEC AU8): what a sandboxed container can see.

There are no images, so a container's root is made, in the container's own mount
namespace, just before its command runs: a fresh tmpfs (the container's writable layer,
gone with it) holding read-only binds of the node's system directories (/usr and the
/bin, /sbin, /lib* links or directories, whatever the node has), a minimal /etc (passwd and
group with root and nobody, the kubelet-managed hosts/hostname/resolv.conf, read-only binds
of what programs read: the dynamic linker's cache, certificates, time zone, alternatives),
a fresh /dev (null, zero, full, random, urandom, tty, a private devpts, /dev/shm), a new
/proc (read-only /proc/sys and friends), a read-only /sys, a private /tmp, and the pod's
volumes at their mountPath (nodev, `readOnly` honoured). Then `pivot_root` makes it "/" and
the node's tree is detached: Skiff's data dir, the PKI, etcd's data, other pods'
directories, /root, /home and the kubelet's Python do not exist in it. `privileged` gets
the node's /dev and a writable /sys; `readOnlyRootFilesystem` makes "/" read-only (volumes
keep their own `readOnly`).

`build_root` runs in the container's forked child (no imports, no logging, no locks): the
plan is computed by the kubelet beforehand.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
from dataclasses import dataclass

from skiff.kubelet.sandbox.linux import (
    CLONE_NEWNS,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    MS_SLAVE,
    mount,
    pivot_root,
    umount,
    unshare,
)
from skiff.kubelet.sandbox.mounts import BindMount

__all__ = ["RootView", "build_root", "system_entries"]

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What programs read from /etc; never shadow files, ssh keys, sudoers or private keys.
ETC_ENTRIES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone",
               "alternatives", "ssl/certs", "ssl/openssl.cnf", "ca-certificates",
               "ca-certificates.conf", "nsswitch.conf", "host.conf", "gai.conf", "protocols",
               "services", "networks", "mime.types", "os-release", "debian_version",
               "bash.bashrc", "profile", "inputrc", "terminfo", "magic", "magic.mime",
               "python3", "python3.11", "pki/tls/certs", "pki/ca-trust", "mtab")
_PASSWD = ("root:x:0:0:root:/root:/bin/sh\n"
           "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
_GROUP = "root:x:0:\ntty:x:5:\nnobody:x:65534:\n"
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
_DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
              "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2", "ptmx": "pts/ptmx"}
# read-only or hidden in /proc, as container runtimes do (host sysctls, kernel memory)
_PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")
_PROC_MASKED = ("kcore", "keys", "timer_list", "sched_debug", "latency_stats", "acpi",
                "scsi")


@dataclass(frozen=True)
class Entry:
    path: str  # absolute, on the node and in the container
    kind: str  # "dir", "file" or "link"
    link: str = ""


@functools.cache
def system_entries() -> tuple[Entry, ...]:
    """The node's system directories and /etc entries a container gets (read once)."""
    entries: list[Entry] = []
    for path in SYSTEM_DIRS + tuple(f"/etc/{e}" for e in ETC_ENTRIES):
        if os.path.islink(path):
            entries.append(Entry(path, "link", os.readlink(path)))
        elif os.path.isdir(path):
            entries.append(Entry(path, "dir"))
        elif os.path.isfile(path):
            entries.append(Entry(path, "file"))
    return tuple(entries)


@dataclass(frozen=True)
class RootView:
    """One container's root: `mount_point` is any directory of the node (each container
    mounts its own tmpfs there, in its own mount namespace)."""

    mount_point: str
    mounts: tuple[BindMount, ...]
    working_dir: str = "/"
    read_only: bool = False
    privileged: bool = False
    entries: tuple[Entry, ...] = ()


def _make(path: str, *, directory: bool, mode: int = 0o755) -> None:
    if os.path.lexists(path):
        return
    parent = os.path.dirname(path)
    if parent and not os.path.isdir(parent):
        os.makedirs(parent, exist_ok=True)
    if directory:
        os.mkdir(path, mode)
    else:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))


def _bind(source: str, target: str, *, read_only: bool, flags: int = 0) -> None:
    mount(source, target, None, MS_BIND | MS_REC)
    if read_only or flags:
        mount(None, target, None,
              MS_BIND | MS_REMOUNT | flags | (MS_RDONLY if read_only else 0))


def _dev(new: str, privileged: bool) -> None:
    dev = new + "/dev"
    _make(dev, directory=True)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID, "mode=755,size=65536k")
    if privileged:
        for name in os.listdir("/dev"):
            source, target = "/dev/" + name, dev + "/" + name
            if os.path.islink(source):
                os.symlink(os.readlink(source), target)
                continue
            is_dir = os.path.isdir(source)
            _make(target, directory=is_dir)
            mount(source, target, None, MS_BIND | (MS_REC if is_dir else 0))
        return
    for name in _DEVICES:
        if os.path.exists("/dev/" + name):
            _make(f"{dev}/{name}", directory=False)
            mount("/dev/" + name, f"{dev}/{name}", None, MS_BIND)
    _make(dev + "/pts", directory=True)
    mount("devpts", dev + "/pts", "devpts", MS_NOSUID | MS_NOEXEC,
          "newinstance,ptmxmode=0666,mode=0620,gid=5")
    for name, target in _DEV_LINKS.items():
        os.symlink(target, f"{dev}/{name}")
    _make(dev + "/shm", directory=True, mode=0o1777)
    mount("shm", dev + "/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
          "mode=1777,size=65536k")


def _proc(new: str, privileged: bool) -> None:
    proc = new + "/proc"
    _make(proc, directory=True, mode=0o555)
    try:
        mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError:  # e.g. a node that is itself an unprivileged container
        mount("/proc", proc, None, MS_BIND | MS_REC)
    if privileged:
        return
    for name in _PROC_READ_ONLY:
        path = f"{proc}/{name}"
        if os.path.exists(path):
            with contextlib.suppress(OSError):
                _bind(path, path, read_only=True)
    for name in _PROC_MASKED:
        path = f"{proc}/{name}"
        with contextlib.suppress(OSError):
            if os.path.isdir(path):
                mount("tmpfs", path, "tmpfs", MS_RDONLY, "size=0")
            elif os.path.exists(path):
                mount("/dev/null", path, None, MS_BIND)


def _sys(new: str, privileged: bool) -> None:
    target = new + "/sys"
    _make(target, directory=True, mode=0o555)
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    try:
        # sysfs has one superblock per network namespace, shared by the pod's containers:
        # read-only is this mount's flag, never the superblock's (a privileged container
        # of the pod still gets it writable)
        mount("sysfs", target, "sysfs", flags)
        if not privileged:
            mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | flags)
    except OSError:
        _bind("/sys", target, read_only=not privileged)


def build_root(view: RootView) -> None:
    """In the container's child before exec: the container's root filesystem, then
    pivot_root into it and chdir to its working directory. Raises OSError."""
    unshare(CLONE_NEWNS)
    mount(None, "/", None, MS_REC | MS_SLAVE)  # nothing here propagates to the node
    new = view.mount_point
    mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755")
    for entry in view.entries:
        target = new + entry.path
        if entry.kind == "link":
            _make(os.path.dirname(target), directory=True)
            os.symlink(entry.link, target)
        else:
            _make(target, directory=entry.kind == "dir")
            _bind(entry.path, target, read_only=True, flags=MS_NODEV)
    for path, content in (("/etc/passwd", _PASSWD), ("/etc/group", _GROUP)):
        fd = os.open(new + path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        os.write(fd, content.encode())
        os.close(fd)
    for path, mode in (("/tmp", 0o1777), ("/var/tmp", 0o1777), ("/root", 0o700),
                       ("/run", 0o755), ("/home", 0o755)):
        _make(new + path, directory=True)
        os.chmod(new + path, mode)
    _dev(new, view.privileged)
    _proc(new, view.privileged)
    _sys(new, view.privileged)
    for m in view.mounts:
        target = new + m.target
        try:
            _make(target, directory=os.path.isdir(m.source))
        except OSError as err:
            raise OSError(err.errno, f"cannot create the mount point {m.target} in the "
                          f"container's root: {err.strerror}") from None
        _bind(m.source, target, read_only=m.read_only,
              flags=0 if view.privileged else MS_NODEV)
    os.chdir(new)
    pivot_root(".", ".")  # the node's root is now stacked on top of ours: detach it
    umount(".")
    os.chdir("/")
    if view.read_only:
        mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    try:
        os.chdir(view.working_dir)
    except FileNotFoundError:
        try:
            os.makedirs(view.working_dir, exist_ok=True)
        except OSError as err:
            raise OSError(errno.ENOENT, f"cannot create the working directory "
                          f"{view.working_dir}: {err.strerror}") from None
        os.chdir(view.working_dir)
