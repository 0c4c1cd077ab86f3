"""ConfigMaps and Secrets in a pod (issue 16): `env.valueFrom`, `envFrom`, and volumes.

Before a container starts the kubelet reads the ConfigMaps and Secrets it names (Kubernetes'
`makeEnvironmentVariables`): `envFrom` sources first (with `prefix`), then `env` entries
with `configMapKeyRef` / `secretKeyRef`. A missing object or key that is not `optional` is a
`CreateContainerConfigError`, retried until it appears.

A `configMap` / `secret` volume is a directory of one file per key (or per `items` entry,
at its `path`), written by `write_config_volume`: each file is replaced atomically, keys that
went away are removed, and the pod worker calls it again periodically so updates to the
object reach the files (as the kubelet's volume manager does). The sandbox (issue 18) mounts
the same directory at the container's `mountPath`.
"""

from __future__ import annotations

import base64
import contextlib
import os
from pathlib import Path
from typing import Any

from skiff.api import ApiError, Reason
from skiff.client import ApiClient

Obj = dict[str, Any]

_MANAGED = ".skiff-keys"  # the keys written last time, so removed keys are removed


class ConfigError(Exception):
    """A container's configuration cannot be built yet (CreateContainerConfigError)."""


async def _get(api: ApiClient, resource: str, namespace: str, name: str) -> Obj | None:
    try:
        return await api.get(resource, name, namespace)
    except ApiError as err:
        if err.reason == Reason.NOT_FOUND:
            return None
        raise


def _values(obj: Obj, resource: str) -> dict[str, str]:
    if resource == "secrets":
        return {k: base64.b64decode(v).decode(errors="replace")
                for k, v in (obj.get("data") or {}).items()}
    values = dict(obj.get("data") or {})
    for k, v in (obj.get("binaryData") or {}).items():
        values[k] = base64.b64decode(v).decode(errors="replace")
    return values


async def resolve_env(api: ApiClient, pod: Obj, container: Obj) -> tuple[
        dict[str, str], dict[str, str]]:
    """(variables from `envFrom`, values of `env` entries with a ConfigMap/Secret key)."""
    namespace = str(pod["metadata"].get("namespace") or "default")
    cache: dict[tuple[str, str], Obj | None] = {}

    async def source(resource: str, name: str) -> Obj | None:
        if (resource, name) not in cache:
            cache[(resource, name)] = await _get(api, resource, namespace, name)
        return cache[(resource, name)]

    from_sources: dict[str, str] = {}
    for item in container.get("envFrom") or []:
        for key, resource, kind in (("configMapRef", "configmaps", "configmap"),
                                    ("secretRef", "secrets", "secret")):
            ref = item.get(key)
            if not ref:
                continue
            obj = await source(resource, str(ref.get("name", "")))
            if obj is None:
                if ref.get("optional"):
                    continue
                raise ConfigError(f'{kind} "{ref.get("name")}" not found')
            prefix = str(item.get("prefix") or "")
            for k, v in _values(obj, resource).items():
                from_sources[prefix + k] = v
    keyed: dict[str, str] = {}
    for item in container.get("env") or []:
        value_from = item.get("valueFrom") or {}
        for key, resource, kind in (("configMapKeyRef", "configmaps", "configmap"),
                                    ("secretKeyRef", "secrets", "secret")):
            ref = value_from.get(key)
            if not ref:
                continue
            obj = await source(resource, str(ref.get("name", "")))
            values = _values(obj, resource) if obj is not None else {}
            wanted = str(ref.get("key", ""))
            if wanted in values:
                keyed[str(item.get("name"))] = values[wanted]
            elif not ref.get("optional"):
                if obj is None:
                    raise ConfigError(f'{kind} "{ref.get("name")}" not found')
                raise ConfigError(f"couldn't find key {wanted} in {kind} "
                                  f"{namespace}/{ref.get('name')}")
    return from_sources, keyed


def config_volumes(pod: Obj) -> list[Obj]:
    return [v for v in (pod.get("spec") or {}).get("volumes") or []
            if isinstance(v, dict) and (v.get("configMap") or v.get("secret"))]


async def refresh_config_volumes(api: ApiClient, pod: Obj, volume_path: Any) -> None:
    """Write every configMap/secret volume of `pod` into `volume_path(name)`; a missing
    non-optional source is a ConfigError (the containers wait for it)."""
    namespace = str(pod["metadata"].get("namespace") or "default")
    for volume in config_volumes(pod):
        if volume.get("configMap"):
            source, resource = volume["configMap"], "configmaps"
            name, kind = str(source.get("name", "")), "configmap"
        else:
            source, resource = volume["secret"], "secrets"
            name, kind = str(source.get("secretName", "")), "secret"
        obj = await _get(api, resource, namespace, name)
        if obj is None and not source.get("optional"):
            raise ConfigError(f'{kind} "{name}" not found (volume {volume.get("name")})')
        write_config_volume(Path(volume_path(str(volume.get("name", "")))),
                            _values(obj, resource) if obj else {}, source.get("items"),
                            mode=int(source.get("defaultMode") or 0o644))


def write_config_volume(directory: Path, values: dict[str, str], items: Any, *,
                        mode: int = 0o644) -> None:
    """Make `directory` hold one file per key (or per `items` entry at its `path`), each
    replaced atomically; files of keys that are gone are removed."""
    directory.mkdir(parents=True, exist_ok=True)
    files: dict[str, tuple[str, int]] = {}
    if items:
        for item in items:
            if item.get("key") in values:
                files[str(item.get("path") or item["key"])] = (
                    values[item["key"]], int(item.get("mode") or mode))
    else:
        files = {k: (v, mode) for k, v in values.items()}
    for rel, (content, file_mode) in files.items():
        target = directory / rel
        if directory.resolve() not in target.resolve().parents:
            continue  # a path escaping the volume is ignored (validation refuses `..`)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists() and target.read_text(errors="replace") == content:
            continue
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(content)
        os.chmod(tmp, file_mode)
        os.replace(tmp, target)
    managed = directory / _MANAGED
    previous = managed.read_text().splitlines() if managed.exists() else []
    for rel in previous:
        if rel not in files:
            with contextlib.suppress(FileNotFoundError):
                (directory / rel).unlink()
    managed.write_text("\n".join(sorted(files)))
