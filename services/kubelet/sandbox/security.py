"""A container's `securityContext` as the process it becomes (SPEC AU8).

The pod's and the container's `securityContext` merge (the container's fields win, as
Kubernetes' DetermineEffectiveSecurityContext): `runAsUser`/`runAsGroup`/
`supplementalGroups`/`fsGroup` become the process's uid, gid and groups; the capability
sets start from containerd's default set with `capabilities.add`/`drop` applied (`ALL`
first, as containerd does); `privileged` gives every capability; `allowPrivilegeEscalation:
false` sets no_new_privs. `SecurityPlan.apply()` runs in the container's child before exec
(after its root filesystem is built, which needs root), and in every process that enters
a running container (`kubectl exec`, probes, hooks). `run_as_non_root_error` is the
kubelet's refusal of a uid-0 container under `runAsNonRoot`, and `fs_group_volumes` gives
volumes to the `fsGroup` as the kubelet's SetVolumeOwnership does.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skiff.api.types import Obj
from skiff.kubelet.sandbox.linux import capset, prctl

__all__ = ["DEFAULT_CAPABILITIES", "SecurityPlan", "effective_security_context",
           "fs_group_volumes", "open_empty_dirs", "plan_security", "run_as_non_root_error"]

CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL",
                "SETGID", "SETUID", "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE",
                "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
                "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
                "SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME",
                "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP",
                "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND",
                "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE")
_NUMBER = {name: i for i, name in enumerate(CAPABILITIES)}

# containerd's default set for a container that is not privileged
DEFAULT_CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW",
                        "SETGID", "SETUID", "SETFCAP", "SETPCAP", "NET_BIND_SERVICE",
                        "SYS_CHROOT", "KILL", "AUDIT_WRITE")

PR_SET_KEEPCAPS = 8
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_RAISE = 2


def _last_cap() -> int:
    try:
        return int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        return len(CAPABILITIES) - 1


def _own_capabilities() -> int:
    """The kubelet's permitted set: a container can get no capability the kubelet lacks
    (a node that is itself a container may not have them all)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapPrm:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return (1 << (_last_cap() + 1)) - 1


def _mask(names: list[str] | tuple[str, ...]) -> int:
    mask = 0
    for name in names:
        number = _NUMBER.get(str(name).upper().removeprefix("CAP_"))
        if number is not None:
            mask |= 1 << number
    return mask


def effective_security_context(pod: Obj, container: Obj) -> Obj:
    """The pod's securityContext overlaid with the container's (the container wins)."""
    pod_sc = (pod.get("spec") or {}).get("securityContext") or {}
    merged: Obj = {k: pod_sc[k] for k in ("runAsUser", "runAsGroup", "runAsNonRoot",
                                          "supplementalGroups", "fsGroup") if k in pod_sc}
    merged.update({k: v for k, v in (container.get("securityContext") or {}).items()
                   if v is not None})
    return merged


@dataclass(frozen=True)
class SecurityPlan:
    uid: int
    gid: int
    groups: tuple[int, ...]
    capabilities: int  # bounding, permitted, effective and inheritable
    ambient: int  # added capabilities of a non-root user (so they survive exec)
    no_new_privs: bool
    privileged: bool
    read_only_root: bool

    @property
    def home(self) -> str:
        """HOME as a runtime sets it from the (minimal) /etc/passwd."""
        return {0: "/root", 65534: "/nonexistent"}.get(self.uid, "/")

    def apply(self) -> None:
        """In the container's child, as root, last thing before exec."""
        last = _last_cap()
        for cap in range(last + 1):
            if not self.capabilities & (1 << cap):
                prctl(PR_CAPBSET_DROP, cap)
        if self.uid != 0:
            prctl(PR_SET_KEEPCAPS, 1)
        os.setgroups(list(self.groups))
        os.setgid(self.gid)
        os.setuid(self.uid)
        capset(effective=self.capabilities, permitted=self.capabilities,
               inheritable=self.capabilities)
        for cap in range(last + 1):
            if self.ambient & (1 << cap):
                prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap)
        if self.no_new_privs:
            prctl(PR_SET_NO_NEW_PRIVS, 1)


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def plan_security(pod: Obj, container: Obj) -> SecurityPlan:
    """What the container's process is: the image's user is root (there are no images)."""
    sc = effective_security_context(pod, container)
    privileged = sc.get("privileged") is True
    uid = _int(sc.get("runAsUser"), 0)
    gid = _int(sc.get("runAsGroup"), 0)
    groups: list[int] = [gid] if gid else []
    for extra in sc.get("supplementalGroups") or []:
        if isinstance(extra, int) and extra not in groups:
            groups.append(extra)
    fs_group = sc.get("fsGroup")
    if isinstance(fs_group, int) and fs_group not in groups:
        groups.append(fs_group)
    caps = sc.get("capabilities") or {}
    add = [str(c).upper().removeprefix("CAP_") for c in caps.get("add") or []]
    drop = [str(c).upper().removeprefix("CAP_") for c in caps.get("drop") or []]
    every = _own_capabilities()
    if privileged:
        mask = every
    else:
        mask = _mask(DEFAULT_CAPABILITIES)
        if "ALL" in add:
            mask = every
        if "ALL" in drop:
            mask = 0
        mask = (mask | _mask(add)) & ~_mask(drop) & every
    ambient = mask & _mask(add) if uid != 0 and not privileged else 0
    return SecurityPlan(uid=uid, gid=gid, groups=tuple(groups), capabilities=mask,
                        ambient=ambient,
                        no_new_privs=sc.get("allowPrivilegeEscalation") is False
                        and not privileged,
                        privileged=privileged,
                        read_only_root=sc.get("readOnlyRootFilesystem") is True)


def run_as_non_root_error(pod: Obj, container: Obj, *, image_uid: int) -> str | None:
    """Kubernetes' verifyRunAsNonRoot: why a container under `runAsNonRoot: true` may not
    start (its waiting reason is CreateContainerConfigError), or None. `image_uid` is who
    the process runs as without `runAsUser`: root in a sandbox."""
    sc = effective_security_context(pod, container)
    if sc.get("runAsNonRoot") is not True:
        return None
    meta = pod.get("metadata") or {}
    where = (f"pod: \"{meta.get('name')}_{meta.get('namespace')}({meta.get('uid')})\", "
             f"container: {container.get('name')}")
    user = sc.get("runAsUser")
    if isinstance(user, int):
        return f"container's runAsUser breaks non-root policy ({where})" if user == 0 else None
    if image_uid == 0:
        return f"container has runAsNonRoot and image will run as root ({where})"
    return None


_OWNED_VOLUMES = ("emptyDir", "secret", "configMap", "projected", "downwardAPI",
                  "persistentVolumeClaim")
_READ_ONLY_VOLUMES = ("secret", "configMap", "projected", "downwardAPI")


def fs_group_volumes(pod: Obj, volume_dir: Callable[[str], Path]) -> None:
    """`fsGroup`: every file of the pod's volumes (not hostPath) belongs to the group,
    readable and writable by it (read-only volumes: readable), directories setgid so new
    files inherit the group — the kubelet's SetVolumeOwnership."""
    fs_group = ((pod.get("spec") or {}).get("securityContext") or {}).get("fsGroup")
    if not isinstance(fs_group, int) or isinstance(fs_group, bool):
        return
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        kind = next((k for k in _OWNED_VOLUMES if k in volume), None)
        if kind is None:
            continue
        read_only = kind in _READ_ONLY_VOLUMES
        top = Path(volume_dir(str(volume.get("name", ""))))
        if not top.exists():
            continue
        root = Path(os.path.realpath(top))
        for path in [root, *root.rglob("*")]:
            try:
                info = path.lstat()
                if stat.S_ISLNK(info.st_mode):
                    continue
                os.lchown(path, -1, fs_group)
                mask = 0o440 if read_only else 0o660
                if stat.S_ISDIR(info.st_mode):
                    mask |= stat.S_ISGID | 0o110
                os.chmod(path, stat.S_IMODE(info.st_mode) | mask)
            except OSError:
                continue


def open_empty_dirs(pod: Obj, volume_dir: Callable[[str], Path]) -> None:
    """An emptyDir's directory is 0777, as the kubelet makes it (its setupDir), so a
    container of any `runAsUser` can write there; the pod's directory above it stays
    closed to the node's other users."""
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        if "emptyDir" not in volume:
            continue
        path = Path(volume_dir(str(volume.get("name", ""))))
        try:
            if path.is_dir() and stat.S_IMODE(path.stat().st_mode) & 0o777 != 0o777:
                path.chmod(stat.S_IMODE(path.stat().st_mode) | 0o777)
        except OSError:
            continue
