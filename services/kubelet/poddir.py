"""A pod's directory on the node: its working directory, emptyDir volumes, logs and state.

Each volume is a directory `<root>/pods/<uid>/volumes/<name>` (secret and projected ones
on a tmpfs of their own when the kubelet can mount): in a sandbox it is bind-mounted at its
`mountPath` inside the container's own root (skiff.kubelet.sandbox); without one (shared-host
mode) each `volumeMount` becomes a symlink `<pod dir>/<mountPath without its leading />` →
the volume, and containers start in the pod directory, so `mountPath: /data` is reachable
as `data/`. `hostPath` volumes are symlinks to the host path. A `persistentVolumeClaim`
volume is a symlink to its shared directory `<volume-root>/pvc-<claim uid>`, made only once
the volume is attached to this node (see `volumes`). A `downwardAPI` volume's files are
written when the directory is prepared. Container logs are `logs/<container>/<restartCount>.log`.

It also holds what Kubernetes computes from a pod for its containers: `container_env` (the
`env` list: `value` with `$(VAR)` references, `valueFrom.fieldRef` and
`valueFrom.resourceFieldRef`), `expand_references` (Kubernetes' `$(VAR)` expansion, shared
with `command`/`args` in `runtime.images`), and the downward API's values for volumes
(`downward_api_files`, shared by `downwardAPI` and `projected` volumes).
"""

from __future__ import annotations

import functools
import logging
import math
import os
import posixpath
import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from skiff.api.quantity import bytes_, parse_quantity
from skiff.api.types import ObjView
from skiff.kubelet.sandbox import linux
from skiff.kubelet.settings import KubeletSettings

__all__ = ["PRIVATE_DIR_MODE", "PodDir", "container_env", "downward_api_files",
           "expand_references", "field_ref_value", "node_allocatable", "private_dir",
           "resource_field_value", "unmount_volumes", "write_downward_api",
           "write_file_atomic"]

log = logging.getLogger(__name__)


# Kubernetes' /var/lib/kubelet/pods is 0750 root: a local user of the node cannot walk into
# a pod's volumes, tokens or logs (SPEC AU11).
PRIVATE_DIR_MODE = 0o750
# Volumes whose files are credentials live in memory, never on the node's disk (AU11).
_TMPFS_VOLUMES = ("secret", "projected")


def private_dir(path: Path) -> None:
    """`path` (and missing parents) as a directory only its owner and group may enter."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(PRIVATE_DIR_MODE)


class PodDir:
    """`tmpfs`: put secret and projected volumes on a tmpfs of their own, as Kubernetes'
    kubelet does (needs CAP_SYS_ADMIN: the kubelets that make sandboxes)."""

    def __init__(self, root: Path, uid: str, *, tmpfs: bool = False) -> None:
        self.path = root / "pods" / uid
        self.tmpfs = tmpfs

    def volume_path(self, name: str) -> Path:
        return self.path / "volumes" / name

    def log_path(self, container: str, restart_count: int) -> Path:
        return self.path / "logs" / container / f"{restart_count}.log"

    def prepare(self, pod: ObjView) -> None:
        """Create the directory, the volumes and the mount symlinks (idempotent)."""
        for directory in (self.path.parent, self.path, self.path / "volumes"):
            private_dir(directory)
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
            elif isinstance(volume.get("downwardAPI"), dict):
                self._write_downward_api(volume, pod)
            else:
                if not {"emptyDir", "projected", "configMap", "secret"} & set(volume):
                    log.warning("volume type not supported; using an empty directory",
                                extra={"volume": name})
                self.volume_path(name).mkdir(parents=True, exist_ok=True)
                if self.tmpfs and set(_TMPFS_VOLUMES) & set(volume):
                    _mount_tmpfs(self.volume_path(name))
        for container in list(spec.get("initContainers") or []) + list(
                spec.get("containers") or []):
            for mount in container.get("volumeMounts") or []:
                # As the kubelet makes a mountPath absolute: `..` stops at the container's
                # root, so the link stays inside the pod directory (AU11).
                mount_path = posixpath.normpath("/" + str(mount.get("mountPath", "")))
                link = self.path / mount_path.lstrip("/")
                if link == self.path or link.exists() or link.is_symlink():
                    continue
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(self.volume_path(str(mount.get("name", ""))))

    def _write_downward_api(self, volume: ObjView, pod: ObjView) -> None:
        """A downwardAPI volume's files at pod start; a sandboxed container's are written
        again as it starts (the pod worker), so changed labels reach it."""
        node_name = str((pod.get("spec") or {}).get("nodeName") or "")
        write_downward_api(self.volume_path(str(volume.get("name", ""))), volume, pod,
                           lambda path: field_ref_value(pod, path, node_name))

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

    def working_dir(self, container: ObjView) -> Path:
        wd = container.get("workingDir")
        if not wd:
            return self.path
        path = Path(wd)
        return path if path.is_absolute() else self.path / path

    def mount_memory_volumes(self, pod: ObjView) -> None:
        """emptyDir `medium: Memory`: a tmpfs (of `sizeLimit`) on the volume's directory, in
        the node's mount namespace under the kubelet's root dir, so every container of the
        pod binds it; undone by `unmount_volumes` when the pod's sandbox goes."""
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            empty = volume.get("emptyDir")
            if not isinstance(empty, dict) or empty.get("medium") != "Memory":
                continue
            path = self.volume_path(str(volume["name"]))
            path.mkdir(parents=True, exist_ok=True)
            if os.path.ismount(path):
                continue
            size = empty.get("sizeLimit")
            options = f"size={bytes_(str(size))}" if size else None
            linux.mount("tmpfs", str(path), "tmpfs", 0, options)

    def remove(self) -> None:
        """Unmount the pod's in-memory volumes, then delete everything (a mounted volume
        would otherwise keep its directory, and its contents in memory, for good)."""
        unmount_volumes(self.path)
        shutil.rmtree(self.path, ignore_errors=True)


def _mount_tmpfs(path: Path) -> None:
    if os.path.ismount(path):
        return  # mounted by an earlier kubelet: keep what it wrote
    try:
        linux.mount("tmpfs", str(path), "tmpfs", 0, "mode=0755")
    except OSError as err:
        log.warning("cannot put a credentials volume on tmpfs; its files stay on disk",
                    extra={"path": str(path), "error": str(err)})


def unmount_volumes(pod_dir: Path) -> None:
    """Undo every mount the kubelet made on a pod's volume directories."""
    volumes = pod_dir / "volumes"
    if not volumes.is_dir():
        return
    for path in volumes.iterdir():
        if not path.is_symlink() and os.path.ismount(path):
            try:
                linux.umount(str(path))
            except OSError as err:
                log.warning("cannot unmount a pod volume", extra={
                    "path": str(path), "error": str(err)})


def expand_references(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' variable expansion (`command`, `args`, `env[].value`): `$(NAME)` is
    NAME's value in `env`, or stays `$(NAME)` when `env` has none; `$$` is one `$`, so
    `$$(NAME)` is the literal `$(NAME)`; any other `$` (a lone one, `$x`, an unclosed
    `$(`) is kept as written."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char != "$" or i + 1 == n:
            out.append(char)
            i += 1
        elif text[i + 1] == "$":
            out.append("$")
            i += 2
        elif text[i + 1] == "(" and (close := text.find(")", i + 2)) != -1:
            name = text[i + 2:close]
            out.append(env[name] if name in env else f"$({name})")
            i = close + 1
        else:
            out.append(text[i:i + 2])
            i += 2
    return "".join(out)


@functools.cache
def node_allocatable() -> dict[str, str]:
    """This host's cpu and memory as the kubelet reports them by default (no
    `--capacity-*` flags): what a container without a limit may use."""
    settings = KubeletSettings()
    return {"cpu": settings.cpu_capacity(), "memory": settings.memory_capacity()}


_LIMITED_BY_NODE = ("cpu", "memory", "ephemeral-storage")


def resource_field_value(pod: ObjView, container: ObjView | None, ref: ObjView, *,
                         allocatable: Mapping[str, str] | None = None) -> str:
    """A `resourceFieldRef`'s value (Kubernetes' downward API): the container's request or
    limit of `resource` divided by `divisor` (default 1), rounded up to a whole number —
    cpu in millicores, memory, ephemeral-storage and hugepages in bytes. An unset limit of
    cpu, memory or ephemeral-storage is the node's allocatable, an unset request 0.
    `ref.containerName`, when set, names the container (a downwardAPI volume needs it).
    Raises ValueError with a message for the user when the reference cannot be resolved."""
    resource = str(ref.get("resource") or "")
    kind, _, name = resource.partition(".")
    if kind not in ("limits", "requests") or not (
            name in _LIMITED_BY_NODE or name.startswith("hugepages-")):
        raise ValueError(f"unsupported container resource: {resource!r} (one of limits.cpu, "
                         "limits.memory, limits.ephemeral-storage, requests.cpu, "
                         "requests.memory, requests.ephemeral-storage, "
                         "limits/requests.hugepages-<size>)")
    wanted = ref.get("containerName")
    if wanted:
        spec = pod.get("spec") or {}
        matches = [c for c in list(spec.get("containers") or []) + list(
            spec.get("initContainers") or []) if c.get("name") == wanted]
        if not matches:
            raise ValueError(f"resourceFieldRef: container {wanted} not found")
        container = matches[0]
    if container is None:
        raise ValueError(f"resourceFieldRef {resource}: containerName is required")
    divisor_text = ref.get("divisor")
    try:
        divisor = parse_quantity(divisor_text) if divisor_text not in (None, "") else 1
        values = (container.get("resources") or {}).get(kind) or {}
        raw = values.get(name)
        quantity = parse_quantity(raw) if raw not in (None, "") else 0
        if kind == "limits" and quantity == 0 and name in _LIMITED_BY_NODE:
            node = node_allocatable() if allocatable is None else allocatable
            quantity = parse_quantity(node[name]) if node.get(name) else 0
    except ValueError as err:
        raise ValueError(f"resourceFieldRef {resource}: {err}") from None
    if divisor == 0:
        divisor = 1
    if divisor < 0:
        raise ValueError(f"resourceFieldRef {resource}: divisor must be positive")
    if name == "cpu":  # Kubernetes divides whole millicores (MilliValue, rounded up)
        amount, unit = math.ceil(quantity * 1000), math.ceil(divisor * 1000)
    else:  # and whole bytes (Value, rounded up)
        amount, unit = math.ceil(quantity), math.ceil(divisor)
    return str(math.ceil(amount / unit))


def field_ref_value(pod: ObjView, path: str, node_name: str, *,
                    pod_ip: str = "127.0.0.1") -> str:
    """A `fieldRef`'s value (env, downwardAPI and projected volumes): the pod's name,
    namespace, uid, node, service account, IPs, and one label or annotation by `['key']`."""
    meta = pod.get("metadata") or {}
    simple = {
        "metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"), "spec.nodeName": node_name,
        "spec.serviceAccountName": (pod.get("spec") or {}).get("serviceAccountName"),
        "status.podIP": pod_ip, "status.hostIP": "127.0.0.1",
    }
    if path in simple:
        return str(simple[path] or "")
    match = re.fullmatch(r"metadata\.(labels|annotations)\['([^']*)'\]", path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    return ""


def container_env(pod: ObjView, container: ObjView, *, node_name: str, base: Mapping[str, str],
                  allocatable: Mapping[str, str] | None = None) -> dict[str, str]:
    """`env` in order, over `base`: `value` with its `$(VAR)` references expanded from the
    variables before it (`expand_references`), `valueFrom.fieldRef`, and
    `valueFrom.resourceFieldRef` (`resource_field_value`; `allocatable`, default this
    host's, stands in for unset limits). ConfigMap/Secret keys are resolved by
    `configsources.resolve_env`, which also refuses a bad `resourceFieldRef` with a
    message before the container is started."""
    env = dict(base)
    env.setdefault("HOSTNAME", str((pod.get("metadata") or {}).get("name", "")))
    for item in container.get("env") or []:
        name = str(item.get("name", ""))
        value_from = item.get("valueFrom") or {}
        if item.get("value") not in (None, "") or not value_from:
            env[name] = expand_references(str(item.get("value") or ""), env)
        elif value_from.get("fieldRef"):
            env[name] = field_ref_value(pod, str(value_from["fieldRef"].get("fieldPath", "")),
                                   node_name)
        elif value_from.get("resourceFieldRef"):
            try:
                env[name] = resource_field_value(pod, container,
                                                 value_from["resourceFieldRef"],
                                                 allocatable=allocatable)
            except ValueError as err:
                log.warning("env resourceFieldRef not resolved", extra={
                    "container": container.get("name"), "env": name, "error": str(err)})
                env[name] = ""
    return env


def downward_api_files(pod: ObjView, items: Any, default_mode: int,
                       field_value: Callable[[str], str], *,
                       allocatable: Mapping[str, str] | None = None) -> list[
                           tuple[str, str, int]]:
    """A downwardAPI volume's (or projection's) `items` as (path, content, mode):
    `fieldRef` (`metadata.labels` / `metadata.annotations` as sorted `key="value"` lines,
    one label or annotation by `['key']`, others from `field_value`) and
    `resourceFieldRef` (its `containerName` names the container). An item that cannot be
    resolved is left out, with a log line."""
    meta = pod.get("metadata") or {}
    files: list[tuple[str, str, int]] = []
    for item in items or []:
        path = str(item.get("path", ""))
        mode = int(item.get("mode") or default_mode)
        if item.get("fieldRef"):
            field_path = str(item["fieldRef"].get("fieldPath", ""))
            if field_path in ("metadata.labels", "metadata.annotations"):
                values = meta.get(field_path.split(".")[1]) or {}
                content = "\n".join(f'{k}="{v}"' for k, v in sorted(values.items()))
            elif field_path.startswith(("metadata.labels[", "metadata.annotations[")):
                content = field_ref_value(pod, field_path, "")
            else:
                content = field_value(field_path)
        elif item.get("resourceFieldRef"):
            try:
                content = resource_field_value(pod, None, item["resourceFieldRef"],
                                               allocatable=allocatable)
            except ValueError as err:
                log.warning("downwardAPI volume item not written", extra={
                    "pod": f"{meta.get('namespace')}/{meta.get('name')}", "path": path,
                    "error": str(err)})
                continue
        else:
            continue
        files.append((path, content, mode))
    return files


def write_file_atomic(path: Path, data: str | bytes, mode: int) -> None:
    """Replace `path` atomically with `data` and `mode` (a reader never sees half a file:
    tokens, config and downward API files are read while the kubelet rewrites them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    if isinstance(data, str):
        tmp.write_text(data)
    else:
        tmp.write_bytes(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def write_downward_api(directory: Path, volume: ObjView, pod: ObjView,
                       field_value: Callable[[str], str], *,
                       allocatable: Mapping[str, str] | None = None) -> None:
    """A downwardAPI volume's `items` as files (`downward_api_files`; fieldRefs other than
    labels and annotations from `field_value(path)`); a path escaping the directory is
    ignored (validation refuses `..`)."""
    source = volume.get("downwardAPI") or {}
    directory.mkdir(parents=True, exist_ok=True)
    for relative, content, mode in downward_api_files(
            pod, source.get("items"), int(source.get("defaultMode") or 0o644), field_value,
            allocatable=allocatable):
        target = directory / relative.lstrip("/")
        if directory.resolve() in target.resolve().parents:
            write_file_atomic(target, content, mode)
