"""Volumes at their `mountPath` (SPEC SB3), in each container's mount namespace.

Every container of a sandboxed pod gets its own mount namespace (a slave of the node's, so
the rest of the host's filesystem stays visible, as there are no images) in which each of
its `volumeMounts` is bind-mounted at its absolute `mountPath` — with `subPath` and
`readOnly` honoured — before the command runs. All containers of a pod bind the same
volume directories, so they share their contents. A mount point that does not exist on the
node is created (an empty directory or file) so it can be mounted over.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skiff.api.quantity import bytes_
from skiff.kubelet.sandbox.linux import (
    CLONE_NEWNS,
    MS_BIND,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    MS_SLAVE,
    mount,
    umount,
    unshare,
)

__all__ = ["BindMount", "enter_mounts", "etc_host_mounts", "mount_memory_volumes",
           "plan_mounts", "unmount_memory_volumes"]

Obj = dict[str, Any]


@dataclass(frozen=True)
class BindMount:
    source: str
    target: str
    read_only: bool = False


def plan_mounts(container: Obj, volume_dir: Any) -> tuple[BindMount, ...]:
    """The container's bind mounts; `volume_dir(name)` is the volume's directory on the
    node. Creates subPath directories and missing mount points."""
    mounts: list[BindMount] = []
    for m in container.get("volumeMounts") or []:
        target = str(m.get("mountPath") or "")
        if not target.startswith("/"):
            continue
        source = Path(os.path.realpath(volume_dir(str(m.get("name", "")))))
        if m.get("subPath"):
            source = source / str(m["subPath"]).lstrip("/")
            if not source.exists():
                source.mkdir(parents=True, exist_ok=True)
        if not source.exists():
            source.mkdir(parents=True, exist_ok=True)
        point = Path(target)
        if not point.exists():
            if source.is_dir():
                point.mkdir(parents=True, exist_ok=True)
            else:
                point.parent.mkdir(parents=True, exist_ok=True)
                point.touch()
        mounts.append(BindMount(str(source), target, bool(m.get("readOnly"))))
    return tuple(mounts)


_MANAGED_HOSTS = """# Kubernetes-managed hosts file.
127.0.0.1\tlocalhost
::1\tlocalhost ip6-localhost ip6-loopback
fe00::0\tip6-localnet
fe00::0\tip6-mcastprefix
fe00::1\tip6-allnodes
fe00::2\tip6-allrouters
"""
def managed_hosts(pod: Obj, ip: str, hostname: str, domain: str = "cluster.local") -> str:
    """The kubelet's managed /etc/hosts: loopback names, the pod's own IP and hostname (its
    FQDN first when it has a `subdomain`), then `hostAliases`."""
    spec = pod.get("spec") or {}
    content = _MANAGED_HOSTS
    subdomain = spec.get("subdomain")
    if subdomain:
        namespace = (pod.get("metadata") or {}).get("namespace") or "default"
        content += f"{ip}\t{hostname}.{subdomain}.{namespace}.svc.{domain}\t{hostname}\n"
    else:
        content += f"{ip}\t{hostname}\n"
    aliases = spec.get("hostAliases") or []
    if aliases:
        content += "\n# Entries added by HostAliases.\n"
        for alias in aliases:
            content += f"{alias.get('ip', '')}\t{chr(9).join(alias.get('hostnames') or [])}\n"
    return content


def etc_host_mounts(pod_dir: Path, pod: Obj, container: Obj, *, ip: str, hostname: str,
                    domain: str = "cluster.local",
                    resolv_conf: str | None = None) -> tuple[BindMount, ...]:
    """/etc/hosts, /etc/hostname and /etc/resolv.conf (when given) of a sandboxed
    container, as the kubelet and the container runtime give them: files in the pod's
    directory (shared by its containers), unless the container mounts a volume there
    itself."""
    taken = {str(m.get("mountPath") or "").rstrip("/") for m in
             container.get("volumeMounts") or []}
    files = {"/etc/hosts": ("etc-hosts", managed_hosts(pod, ip, hostname, domain)),
             "/etc/hostname": ("etc-hostname", f"{hostname}\n")}
    if resolv_conf is not None:
        files["/etc/resolv.conf"] = ("resolv.conf", resolv_conf)
    mounts: list[BindMount] = []
    for target, (name, content) in files.items():
        if target in taken or not Path(target).is_file():
            continue
        path = pod_dir / name
        if not path.exists() or path.read_text() != content:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            path.chmod(0o644)
        mounts.append(BindMount(str(path), target))
    return tuple(mounts)


def enter_mounts(mounts: tuple[BindMount, ...]) -> None:
    """In the container's child before exec: a private view with the volumes mounted."""
    if not mounts:
        return
    cwd = os.getcwd()
    unshare(CLONE_NEWNS)
    mount(None, "/", None, MS_REC | MS_SLAVE)  # nothing here propagates to the node
    for m in mounts:
        mount(m.source, m.target, None, MS_BIND | MS_REC)
        if m.read_only:
            mount(None, m.target, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
    os.chdir(cwd)  # a working dir under a mount point now sees the volume


def mount_memory_volumes(pod: Obj, volume_dir: Any) -> None:
    """emptyDir `medium: Memory`: a tmpfs (of `sizeLimit`) on the volume's directory, in
    the node's mount namespace under the kubelet's root dir, so every container binds it."""
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        empty = volume.get("emptyDir")
        if not isinstance(empty, dict) or empty.get("medium") != "Memory":
            continue
        path = Path(volume_dir(str(volume["name"])))
        path.mkdir(parents=True, exist_ok=True)
        if os.path.ismount(path):
            continue
        size = empty.get("sizeLimit")
        options = f"size={bytes_(str(size))}" if size else None
        mount("tmpfs", str(path), "tmpfs", 0, options)


def unmount_memory_volumes(pod_dir: Path) -> None:
    """Undo `mount_memory_volumes` once the pod's processes are gone."""
    volumes = pod_dir / "volumes"
    if not volumes.is_dir():
        return
    for path in volumes.iterdir():
        if not path.is_symlink() and os.path.ismount(path):
            umount(str(path))
