"""Paths inside volumes never leave them (SPEC AU11), checked where Kubernetes checks them.

The kubelet runs as root and creates files and bind mounts from these paths, so a `..`
or an absolute path in a `subPath` or in a configMap/secret/downwardAPI/projected
`items[].path` would let a pod write anywhere on the node. kube-apiserver refuses them at
validation (`validateLocalDescendingPath`, `validateLocalNonReservedPath`,
`validateKeyToPath`, `validatePathNoBacksteps` in pkg/apis/core/validation); this module
holds the same rules and messages. The kubelet checks again when it resolves a subPath
(symlinks included), since a path can be fine as text and still lead out through a link.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skiff.api.errors import FieldError, invalid, required

FILE_MODE_ERROR = "must be a number between 0 and 0777 (octal), both inclusive"


def _parts(target: str) -> list[str]:
    return target.replace("\\", "/").split("/")


def no_backsteps(target: str, path: str) -> list[FieldError]:
    """`validatePathNoBacksteps`: no `..` element anywhere."""
    if ".." in _parts(target):
        return [invalid(path, target, "must not contain '..'")]
    return []


def local_descending(target: str, path: str) -> list[FieldError]:
    """`validateLocalDescendingPath`: relative, and no `..` element."""
    errors: list[FieldError] = []
    if target.startswith("/"):
        errors.append(invalid(path, target, "must be a relative path"))
    return errors + no_backsteps(target, path)


def local_non_reserved(target: str, path: str) -> list[FieldError]:
    """`validateLocalNonReservedPath`: a local descending path that does not start with
    `..` either (`..data` is where the atomic writer keeps its payload)."""
    errors = local_descending(target, path)
    if target.startswith("..") and not target.startswith("../"):
        errors.append(invalid(path, target, "must not start with '..'"))
    return errors


def _mode(body: Mapping[str, Any], key: str, path: str) -> list[FieldError]:
    mode = body.get(key)
    if mode is None:
        return []
    if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o777:
        return [invalid(f"{path}.{key}", mode, FILE_MODE_ERROR)]
    return []


def _text(body: Mapping[str, Any], key: str) -> str:
    value = body.get(key)
    return value if isinstance(value, str) else ""


def _key_to_paths(items: Any, path: str) -> list[FieldError]:
    """`validateKeyToPath` for each of a configMap's or secret's `items`."""
    errors: list[FieldError] = []
    for i, item in enumerate(items if isinstance(items, list) else []):
        ipath = f"{path}.items[{i}]"
        if not isinstance(item, Mapping):
            continue  # the schema check reports the type
        if not _text(item, "key"):
            errors.append(required(f"{ipath}.key"))
        target = _text(item, "path")
        if not target:
            errors.append(required(f"{ipath}.path"))
        errors += local_non_reserved(target, f"{ipath}.path")
        errors += _mode(item, "mode", ipath)
    return errors


def _downward_files(items: Any, path: str) -> list[FieldError]:
    """`validateDownwardAPIVolumeFile` for each item."""
    errors: list[FieldError] = []
    for i, item in enumerate(items if isinstance(items, list) else []):
        ipath = f"{path}.items[{i}]"
        if not isinstance(item, Mapping):
            continue
        target = _text(item, "path")
        if not target:
            errors.append(required(f"{ipath}.path"))
        errors += local_non_reserved(target, f"{ipath}.path")
        errors += _mode(item, "mode", ipath)
    return errors


def _projected(body: Mapping[str, Any], path: str) -> list[FieldError]:
    errors = _mode(body, "defaultMode", path)
    sources = body.get("sources")
    for i, source in enumerate(sources if isinstance(sources, list) else []):
        spath = f"{path}.sources[{i}]"
        if not isinstance(source, Mapping):
            continue
        for kind in ("configMap", "secret"):
            part = source.get(kind)
            if isinstance(part, Mapping):
                errors += _key_to_paths(part.get("items"), f"{spath}.{kind}")
        downward = source.get("downwardAPI")
        if isinstance(downward, Mapping):
            errors += _downward_files(downward.get("items"), f"{spath}.downwardAPI")
        for kind in ("serviceAccountToken", "clusterTrustBundle"):
            part = source.get(kind)
            if isinstance(part, Mapping):
                target = _text(part, "path")
                if not target:
                    errors.append(required(f"{spath}.{kind}.path"))
                errors += local_non_reserved(target, f"{spath}.{kind}.path")
    return errors


def validate_volume_source(volume: Mapping[str, Any], path: str) -> list[FieldError]:
    """The path-bearing fields of one `spec.volumes[i]`."""
    errors: list[FieldError] = []
    for kind in ("configMap", "secret"):
        body = volume.get(kind)
        if isinstance(body, Mapping):
            errors += _mode(body, "defaultMode", f"{path}.{kind}")
            errors += _key_to_paths(body.get("items"), f"{path}.{kind}")
    downward = volume.get("downwardAPI")
    if isinstance(downward, Mapping):
        errors += _mode(downward, "defaultMode", f"{path}.downwardAPI")
        errors += _downward_files(downward.get("items"), f"{path}.downwardAPI")
    projected = volume.get("projected")
    if isinstance(projected, Mapping):
        errors += _projected(projected, f"{path}.projected")
    host_path = volume.get("hostPath")
    if isinstance(host_path, Mapping):
        errors += no_backsteps(_text(host_path, "path"), f"{path}.hostPath.path")
    return errors


def validate_mount_subpaths(mount: Mapping[str, Any], index_path: str,
                            list_path: str) -> list[FieldError]:
    """`ValidateVolumeMounts`' subPath rules. Kubernetes reports the two path checks
    under the list's path (`...volumeMounts.subPath`) and the exclusivity under the
    item's; kept as it is so messages match kube-apiserver's."""
    errors: list[FieldError] = []
    sub_path = _text(mount, "subPath")
    expr = _text(mount, "subPathExpr")
    if sub_path:
        errors += local_descending(sub_path, f"{list_path}.subPath")
    if expr:
        if sub_path:
            errors.append(invalid(f"{index_path}.subPathExpr", expr,
                                  "subPathExpr and subPath are mutually exclusive"))
        errors += local_descending(expr, f"{list_path}.subPathExpr")
    return errors
