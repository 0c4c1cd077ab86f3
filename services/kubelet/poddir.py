"""A pod's directory on the node: its working directory, emptyDir volumes, logs and state.

A process cannot mount anything, so Skiff's volumes are directories: each `emptyDir` is
`<root>/pods/<uid>/volumes/<name>`, exported to every container as the env var
`SKIFF_VOLUME_<NAME>` (upper case, `-` → `_`), and each `volumeMount` becomes a symlink
`<pod dir>/<mountPath without its leading />` → the volume. Containers run in the pod
directory by default, so `mountPath: /data` is reachable as `data/`. `hostPath` volumes are
symlinks to the host path. A `persistentVolumeClaim` volume is a symlink to its shared
directory `<volume-root>/pvc-<claim uid>`, made only once the volume is attached to this
node (see `volumes`). Container logs are `logs/<container>/<restartCount>.log`.
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["PodDir", "container_env"]

log = logging.getLogger(__name__)

Obj = Mapping[str, Any]

_VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def _env_name(volume: str) -> str:
    return "SKIFF_VOLUME_" + re.sub(r"[^A-Za-z0-9]", "_", volume).upper()


class PodDir:
    def __init__(self, root: Path, uid: str) -> None:
        self.path = root / "pods" / uid

    def volume_path(self, name: str) -> Path:
        return self.path / "volumes" / name

    def log_path(self, container: str, restart_count: int) -> Path:
        return self.path / "logs" / container / f"{restart_count}.log"

    def prepare(self, pod: Obj) -> None:
        """Create the directory, the volumes and the mount symlinks (idempotent)."""
        self.path.mkdir(parents=True, exist_ok=True)
        spec = pod.get("spec") or {}
        for volume in spec.get("volumes") or []:
            name = volume.get("name", "")
            if "hostPath" in volume:
                target = self.volume_path(name)
                target.parent.mkdir(parents=True, exist_ok=True)
                if not target.is_symlink():
                    target.symlink_to(str((volume["hostPath"] or {}).get("path", "/")))
            elif "persistentVolumeClaim" in volume:
                continue  # linked by link_claim once attached to this node
            else:
                if not {"emptyDir", "projected", "configMap", "secret"} & set(volume):
                    log.warning("volume type not supported; using an empty directory",
                                extra={"volume": name})
                self.volume_path(name).mkdir(parents=True, exist_ok=True)
        for container in list(spec.get("initContainers") or []) + list(
                spec.get("containers") or []):
            for mount in container.get("volumeMounts") or []:
                link = self.path / str(mount.get("mountPath", "")).lstrip("/")
                if link == self.path or link.exists() or link.is_symlink():
                    continue
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(self.volume_path(str(mount.get("name", ""))))

    def link_claim(self, name: str, target: Path) -> None:
        """Point volume `name` at its persistent directory (created if new; idempotent)."""
        target.mkdir(parents=True, exist_ok=True)
        link = self.volume_path(name)
        if link.is_symlink() and Path(link.readlink()) == target:
            return
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)

    def working_dir(self, container: Obj) -> Path:
        wd = container.get("workingDir")
        if not wd:
            return self.path
        path = Path(wd)
        return path if path.is_absolute() else self.path / path

    def volume_env(self, pod: Obj) -> dict[str, str]:
        return {_env_name(v.get("name", "")): str(self.volume_path(v.get("name", "")))
                for v in (pod.get("spec") or {}).get("volumes") or []}

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _field_ref(pod: Obj, path: str, node_name: str) -> str:
    meta = pod.get("metadata") or {}
    simple = {
        "metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"), "spec.nodeName": node_name,
        "spec.serviceAccountName": (pod.get("spec") or {}).get("serviceAccountName"),
        "status.podIP": "127.0.0.1", "status.hostIP": "127.0.0.1",
    }
    if path in simple:
        return str(simple[path] or "")
    match = re.fullmatch(r"metadata\.(labels|annotations)\['([^']*)'\]", path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    return ""


def container_env(pod: Obj, container: Obj, *, node_name: str,
                  base: Mapping[str, str]) -> dict[str, str]:
    """`env` with `value` (and `$(VAR)` references) or `valueFrom.fieldRef`."""
    env = dict(base)
    env.setdefault("HOSTNAME", str((pod.get("metadata") or {}).get("name", "")))
    for item in container.get("env") or []:
        name = str(item.get("name", ""))
        if "value" in item:
            env[name] = _VAR_REF.sub(lambda m: env.get(m.group(1), m.group(0)),
                                     str(item.get("value") or ""))
        elif "valueFrom" in item:
            ref = (item["valueFrom"] or {}).get("fieldRef") or {}
            env[name] = _field_ref(pod, str(ref.get("fieldPath", "")), node_name)
    return env
