"""ConfigMaps and Secrets in a pod: `env.valueFrom`, `envFrom`, and volumes.

Before a container starts the kubelet reads the ConfigMaps and Secrets it names (Kubernetes'
`makeEnvironmentVariables`): `envFrom` sources first (with `prefix`), then `env` entries
with `configMapKeyRef` / `secretKeyRef`. A missing object or key that is not `optional` is a
`CreateContainerConfigError`, retried until it appears; so is a `resourceFieldRef` that
cannot be resolved (an unknown resource or container, a bad divisor).

A `configMap` / `secret` volume is a directory of one file per key (or per `items` entry,
at its `path`, with its `mode`), written by `write_config_volume`: each file is replaced
atomically, keys that went away are removed, and the pod worker calls it again periodically
so updates to the object reach the files (as the kubelet's volume manager does). The
`configMap` and `secret` sources of a `projected` volume are written the same way, all into
the one directory (`projected.defaultMode`, each item's `mode`), next to the token,
`kube-root-ca.crt` and downwardAPI files that `projected.write_projected_volumes` writes. A
missing object or an `items` key it lacks, unless `optional`, is a ConfigError. The sandbox
mounts the same directory at the container's `mountPath`.
"""

from __future__ import annotations

import base64
import contextlib
from pathlib import Path
from typing import Any

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import Client
from skiff.kubelet.poddir import resource_field_value, write_file_atomic

_MANAGED = ".skiff-keys"  # the keys written last time, so removed keys are removed


class ConfigError(Exception):
    """A container's configuration cannot be built yet (CreateContainerConfigError)."""


class VolumeError(ConfigError):
    """A configMap/secret volume cannot be set up yet: Kubernetes keeps the pod in
    ContainerCreating with a FailedMount event "MountVolume.SetUp failed for volume ..."."""

    def __init__(self, volume: str, reason: str) -> None:
        super().__init__(f'MountVolume.SetUp failed for volume "{volume}" : {reason}')
        self.volume = volume


async def _get(api: Client, resource: str, namespace: str, name: str) -> Obj | None:
    try:
        return await api.get(resource, name, namespace)
    except ApiError as err:
        if err.reason == Reason.NOT_FOUND:
            return None
        raise


def _decoded(value: Any, resource: str, key: str) -> bytes:
    """A base64 value of a Secret's `data` or a ConfigMap's `binaryData`, as its bytes; one
    that is not base64 (stored before the apiserver checked it) is a ConfigError, so the
    pod gets a FailedMount/Failed event instead of a dead pod worker."""
    try:
        return base64.b64decode(str(value), validate=True)
    except ValueError:  # binascii.Error
        raise ConfigError(f"{resource} key {key}: illegal base64 data") from None


def _bytes(obj: Obj, resource: str) -> dict[str, bytes]:
    """Each key's content as the files of a volume hold it: the bytes, never re-decoded."""
    if resource == "secrets":
        return {k: _decoded(v, resource, k) for k, v in (obj.get("data") or {}).items()}
    values = {k: str(v).encode() for k, v in (obj.get("data") or {}).items()}
    for k, v in (obj.get("binaryData") or {}).items():
        values[k] = _decoded(v, resource, k)
    return values


def _values(obj: Obj, resource: str) -> dict[str, str]:
    """Each key's content as an environment variable (text)."""
    return {k: v.decode(errors="replace") for k, v in _bytes(obj, resource).items()}


async def resolve_env(api: Client, pod: Obj, container: Obj) -> tuple[
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
        if value_from.get("resourceFieldRef"):
            try:  # computed by poddir.container_env; refused here, with a message
                resource_field_value(pod, container, value_from["resourceFieldRef"])
            except ValueError as err:
                raise ConfigError(f"env {item.get('name')}: {err}") from None
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


# A projected `kube-root-ca.crt` is the kubelet's own root CA file (projected.py), the
# bundle the root-ca-cert-publisher puts in that ConfigMap.
_ROOT_CA_CONFIGMAP = "kube-root-ca.crt"


def _projected_sources(volume: Obj) -> list[tuple[Obj, str, str, str]]:
    """A projected volume's configMap/secret sources: (source, resource, kind, name)."""
    found: list[tuple[Obj, str, str, str]] = []
    projected = volume.get("projected")
    if not isinstance(projected, dict):
        return found
    for source in projected.get("sources") or []:
        if not isinstance(source, dict):
            continue
        if isinstance(source.get("configMap"), dict) and (
                source["configMap"].get("name") != _ROOT_CA_CONFIGMAP):
            config_map = source["configMap"]
            found.append((config_map, "configmaps", "configmap",
                          str(config_map.get("name", ""))))
        elif isinstance(source.get("secret"), dict):
            secret = source["secret"]
            found.append((secret, "secrets", "secret", str(secret.get("name", ""))))
    return found


def config_volumes(pod: Obj) -> list[Obj]:
    """The pod's configMap and secret volumes, and projected volumes with such sources."""
    return [v for v in (pod.get("spec") or {}).get("volumes") or []
            if isinstance(v, dict) and (v.get("configMap") or v.get("secret")
                                        or _projected_sources(v))]


def _volume_files(obj: Obj | None, resource: str, kind: str, name: str, source: Obj,
                  mode: int) -> dict[str, tuple[str | bytes, int]]:
    """One ConfigMap/Secret's files in a volume: every key, or each `items` key at its
    `path` (and `mode`); a missing object or key is a ConfigError unless `optional`."""
    optional = bool(source.get("optional"))
    if obj is None:
        if optional:
            return {}
        raise ConfigError(f'{kind} "{name}" not found')
    values = _bytes(obj, resource)
    items = source.get("items")
    if not items:
        return {k: (v, mode) for k, v in values.items()}
    files: dict[str, tuple[str | bytes, int]] = {}
    for item in items:
        key = str(item.get("key", ""))
        if key not in values:
            if optional:
                continue
            raise ConfigError(f"{kind} {name} references non-existent {kind} key: {key}")
        files[str(item.get("path") or key)] = (values[key], int(item.get("mode") or mode))
    return files


async def refresh_config_volumes(api: Client, pod: Obj, volume_path: Any) -> None:
    """Write every configMap/secret volume of `pod`, and the configMap/secret sources of its
    projected volumes, into `volume_path(name)`; a missing non-optional object or key is a
    ConfigError (the containers wait for it)."""
    namespace = str(pod["metadata"].get("namespace") or "default")
    for volume in config_volumes(pod):
        if volume.get("configMap"):
            sources = [(volume["configMap"], "configmaps", "configmap",
                        str(volume["configMap"].get("name", "")))]
            mode = int(volume["configMap"].get("defaultMode") or 0o644)
        elif volume.get("secret"):
            sources = [(volume["secret"], "secrets", "secret",
                        str(volume["secret"].get("secretName", "")))]
            mode = int(volume["secret"].get("defaultMode") or 0o644)
        else:
            sources = _projected_sources(volume)
            mode = int(volume["projected"].get("defaultMode") or 0o644)
        files: dict[str, tuple[str | bytes, int]] = {}
        for source, resource, kind, name in sources:
            obj = await _get(api, resource, namespace, name)
            try:
                files.update(_volume_files(obj, resource, kind, name, source, mode))
            except ConfigError as err:
                raise VolumeError(str(volume.get("name")), str(err)) from None
        write_files(Path(volume_path(str(volume.get("name", "")))), files)


def write_config_volume(directory: Path, values: dict[str, str], items: Any, *,
                        mode: int = 0o644) -> None:
    """Make `directory` hold one file per key (or per `items` entry at its `path`), each
    replaced atomically; files of keys that are gone are removed."""
    files: dict[str, tuple[str | bytes, int]] = {}
    if items:
        for item in items:
            if item.get("key") in values:
                files[str(item.get("path") or item["key"])] = (
                    values[item["key"]], int(item.get("mode") or mode))
    else:
        files = {k: (v, mode) for k, v in values.items()}
    write_files(directory, files)


def write_files(directory: Path, files: dict[str, tuple[str | bytes, int]]) -> None:
    """Make `directory` hold `files` (relative path → (content, mode)), each replaced
    atomically; files this wrote before that are no longer wanted are removed (others, such
    as a projected volume's token, are left alone)."""
    directory.mkdir(parents=True, exist_ok=True)
    for rel, (content, file_mode) in files.items():
        target = directory / rel
        if directory.resolve() not in target.resolve().parents:
            continue  # a path escaping the volume is ignored (validation refuses `..`)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode() if isinstance(content, str) else content
        if target.exists() and target.read_bytes() == data:
            continue
        write_file_atomic(target, content, file_mode)
    managed = directory / _MANAGED
    previous = managed.read_text().splitlines() if managed.exists() else []
    for rel in previous:
        if rel not in files:
            with contextlib.suppress(FileNotFoundError):
                (directory / rel).unlink()
    managed.write_text("\n".join(sorted(files)))
