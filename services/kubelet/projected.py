"""Projected volumes (SPEC AX3), as the kubelet's `projected` volume plugin fills them, all
sources into the one directory with `defaultMode` (or an item's `mode`):

- `serviceAccountToken`: a TokenRequest bound to the pod, e.g. the `token` of the
  `kube-api-access-*` volume that ServiceAccount admission adds;
- `configMap` `kube-root-ca.crt`: its `ca.crt` is the cluster's root CA, the kubelet's
  `--root-ca-file` (when the node has one), the bundle that ConfigMap publishes;
- `downwardAPI`: `fieldRef` and `resourceFieldRef` items (`poddir.downward_api_files`);
- any other `configMap` and `secret` (with `items`, `optional`): written, kept current and
  waited for (a missing one is a CreateContainerConfigError) with the pod's configMap and
  secret volumes, by `configsources.refresh_config_volumes`.

The volume is the pod's volume directory (see `poddir`): bind-mounted at its `mountPath`
in a sandbox, reachable through the `volumeMount` symlink (e.g.
`var/run/secrets/kubernetes.io/serviceaccount`) in the pod directory without one.

Tokens are requested again when 80% of their lifetime has passed (`refresh_due`), as the
kubelet's token manager does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime
from pathlib import Path

from skiff.api.errors import ApiError
from skiff.api.types import ObjView
from skiff.client import Client
from skiff.kubelet.poddir import downward_api_files, field_ref_value, write_file_atomic

log = logging.getLogger(__name__)


async def write_projected_volumes(pod: ObjView, volume_dir: Path, api: Client, *,
                                  root_ca_file: str = "") -> float | None:
    """Fill every projected volume of `pod`; returns when its tokens need refreshing (unix
    time), or None when it has none. Raises ApiError when a token cannot be had."""
    refresh: float | None = None
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    for volume in spec.get("volumes") or []:
        projected = volume.get("projected")
        if not isinstance(projected, dict):
            continue
        target = volume_dir / str(volume.get("name", ""))
        mode = int(projected.get("defaultMode", 0o644))
        for source in projected.get("sources") or []:
            if "serviceAccountToken" in source:
                sat = source["serviceAccountToken"]
                audience = sat.get("audience")
                answer = await api.create_token(
                    str(meta.get("namespace", "default")),
                    str(spec.get("serviceAccountName") or "default"),
                    {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                     "spec": {"audiences": [audience] if audience else [],
                              "expirationSeconds": int(sat.get("expirationSeconds", 3607)),
                              "boundObjectRef": {"kind": "Pod", "apiVersion": "v1",
                                                 "name": meta.get("name", ""),
                                                 "uid": meta.get("uid", "")}}})
                write_file_atomic(target / str(sat.get("path", "token")),
                       str(answer["status"]["token"]).encode(), mode)
                expires = datetime.fromisoformat(
                    str(answer["status"]["expirationTimestamp"]).replace("Z", "+00:00"))
                now = time.time()
                due = now + 0.8 * (expires.timestamp() - now)
                refresh = due if refresh is None else min(refresh, due)
            elif "configMap" in source:
                config_map = source["configMap"]
                if config_map.get("name") != "kube-root-ca.crt" or not root_ca_file:
                    continue  # others: configsources.refresh_config_volumes
                for item in config_map.get("items") or [{"key": "ca.crt", "path": "ca.crt"}]:
                    if item.get("key") == "ca.crt":
                        write_file_atomic(target / str(item.get("path", "ca.crt")),
                               Path(root_ca_file).read_bytes(), mode)
            elif "downwardAPI" in source:
                for path, content, file_mode in downward_api_files(
                        pod, (source["downwardAPI"] or {}).get("items"), mode,
                        lambda field_path: field_ref_value(
                            pod, field_path, str(spec.get("nodeName") or ""))):
                    write_file_atomic(target / path, content.encode(), file_mode)
    return refresh


RETRY_SECONDS = 5.0


async def keep_projected_volumes(pod: ObjView, volume_dir: Path, api: Client, *,
                                 root_ca_file: str, first_due: float) -> None:
    """Refresh the pod's tokens at 80% of their lifetime until cancelled (with the pod)."""
    due: float | None = first_due
    while due is not None:
        await asyncio.sleep(max(1.0, due - time.time()))
        try:
            due = await write_projected_volumes(pod, volume_dir, api,
                                                root_ca_file=root_ca_file)
        except ApiError as err:
            log.warning("cannot refresh the pod's ServiceAccount token",
                        extra={"pod": f"{(pod.get('metadata') or {}).get('namespace')}/"
                                      f"{(pod.get('metadata') or {}).get('name')}",
                               "error": err.message})
            due = time.time() + RETRY_SECONDS


def has_projected_volumes(pod: ObjView) -> bool:
    return any(isinstance(v.get("projected"), dict)
               for v in (pod.get("spec") or {}).get("volumes") or [])


def kubernetes_service_env(address: str) -> dict[str, str]:
    """The `kubernetes` Service's variables every container gets (docker-link style, as
    the kubelet makes them), from `--kube-api-address host:port`; none when unset."""
    if not address:
        return {}
    host, _, port = address.rpartition(":")
    return {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port,
            "KUBERNETES_SERVICE_PORT_HTTPS": port,
            "KUBERNETES_PORT": f"tcp://{host}:{port}",
            f"KUBERNETES_PORT_{port}_TCP": f"tcp://{host}:{port}",
            f"KUBERNETES_PORT_{port}_TCP_PROTO": "tcp",
            f"KUBERNETES_PORT_{port}_TCP_PORT": port,
            f"KUBERNETES_PORT_{port}_TCP_ADDR": host}
