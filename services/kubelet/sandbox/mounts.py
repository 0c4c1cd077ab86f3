"""Volumes at their `mountPath` (SPEC SB3, AU8), in each container's own root.

Every container of a sandboxed pod gets its own mount namespace and root filesystem
(`rootfs`) in which each of its `volumeMounts` is bind-mounted at its absolute `mountPath`
— with `subPath` and `readOnly` honoured — before the command runs. All containers of a
pod bind the same volume directories, so they share their contents. A `subPath` that
resolves outside its volume (`..`, an absolute path, a symlink on the way) is refused, as
the kubelet refuses it. Also here: the kubelet-managed /etc/hosts. (The volume
directories themselves, and their tmpfs mounts, are the pod directory's: `poddir`.)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skiff.api.types import Obj

__all__ = ["BindMount", "SubPathError", "etc_host_mounts", "plan_mounts"]


@dataclass(frozen=True)
class BindMount:
    source: str
    target: str
    read_only: bool = False


class SubPathError(Exception):
    """A `subPath` the kubelet refuses (it resolves outside its volume)."""


def _safe_subpath(volume: Path, sub: str, *, mount_name: str, container: str) -> Path:
    """`volume/sub`, its missing directories created one at a time; refused when it (or a
    symlink on the way) resolves outside the volume, as Kubernetes' subpath preparation
    refuses it (the message gives nothing of the node's filesystem away)."""
    refused = SubPathError(f"failed to prepare subPath for volumeMount {mount_name!r} of "
                           f"container {container!r}".replace("'", '"'))
    if sub.startswith("/") or ".." in Path(sub).parts:
        raise refused
    current = volume
    for part in Path(sub).parts:
        current = current / part
        if not current.exists() and not current.is_symlink():
            current.mkdir(mode=0o750)
        real = Path(os.path.realpath(current))
        if real != volume and volume not in real.parents:
            raise refused
    return Path(os.path.realpath(current))


def plan_mounts(container: Obj, volume_dir: Any) -> tuple[BindMount, ...]:
    """The container's bind mounts; `volume_dir(name)` is the volume's directory on the
    node. Creates subPath directories inside their volume; raises SubPathError for a
    subPath that leaves it."""
    mounts: list[BindMount] = []
    for m in container.get("volumeMounts") or []:
        target = str(m.get("mountPath") or "")
        if not target.startswith("/"):
            continue
        volume = Path(os.path.realpath(volume_dir(str(m.get("name", "")))))
        if not volume.exists():
            volume.mkdir(parents=True, exist_ok=True)
        source = volume
        if m.get("subPath"):
            source = _safe_subpath(volume, str(m["subPath"]), mount_name=str(m.get("name")),
                                   container=str(container.get("name")))
        mounts.append(BindMount(str(source), os.path.normpath(target),
                                bool(m.get("readOnly"))))
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
        if target in taken:
            continue
        path = pod_dir / name
        if not path.exists() or path.read_text() != content:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            path.chmod(0o644)
        mounts.append(BindMount(str(path), target))
    return tuple(mounts)
