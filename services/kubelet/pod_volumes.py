"""Setting up and tearing down a pod's volume contents around its containers' lives.

The pod directory (`poddir`) holds the volumes; claims wait for their attachment
(`volumes`); this module is what the pod worker does with them over time, as the
kubelet's volume manager: the projected ServiceAccount token written before any container
starts and kept fresh (AX3), containers started only while every claim's volume is
attached to this node (SC1, `ClaimsStep`), mounted ConfigMaps and Secrets rewritten
periodically so updates reach the files, and a terminated pod's emptyDir data removed
(AU10).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections.abc import Callable, Sequence

from skiff.api.errors import ApiError
from skiff.api.types import Obj
from skiff.client import WARNING
from skiff.kubelet.configsources import ConfigError, refresh_config_volumes
from skiff.kubelet.pod_environment import PodEnvironment
from skiff.kubelet.pod_events import EventSink
from skiff.kubelet.poddir import PodDir
from skiff.kubelet.projected import (
    has_projected_volumes,
    keep_projected_volumes,
    write_projected_volumes,
)
from skiff.kubelet.records import ContainerRecord
from skiff.kubelet.volumes import PodVolumes

__all__ = ["ClaimsStep", "project_volumes", "refresh_config_volumes_forever",
           "tear_down_empty_dirs"]

log = logging.getLogger(__name__)

_TOKEN_RETRY_SECONDS = 5.0  # a token that could not be written is tried again this soon


async def project_volumes(pod: Obj, pod_dir: PodDir, *, env: PodEnvironment,
                          event: EventSink) -> asyncio.Task[None] | None:
    """AX3: write the projected token volume before any container starts; the task that
    keeps its token fresh in the background (None: nothing to refresh)."""
    if not has_projected_volumes(pod):
        return None
    volume_dir = pod_dir.path / "volumes"
    try:
        due = await write_projected_volumes(pod, volume_dir, env.api,
                                            root_ca_file=env.root_ca_file)
    except ApiError as err:
        event(WARNING, "FailedMount", "MountVolume.SetUp failed for the "
              f"ServiceAccount token volume: {err.message}")
        due = env.clock.now() + _TOKEN_RETRY_SECONDS
    if due is None:
        return None
    uid = pod["metadata"]["uid"]
    return asyncio.create_task(keep_projected_volumes(
        pod, volume_dir, env.api, root_ca_file=env.root_ca_file, first_due=due),
        name=f"projected:{uid}")


async def refresh_config_volumes_forever(pod: Callable[[], Obj], pod_dir: PodDir, *,
                                         env: PodEnvironment) -> None:
    """Updates of a mounted ConfigMap/Secret reach the files (the volume manager's
    periodic remount); `pod()` is the pod as its worker knows it now."""
    while True:
        await asyncio.sleep(env.config_volume_refresh_seconds)
        current = pod()
        try:
            await refresh_config_volumes(env.api, current, pod_dir.volume_path)
        except (ConfigError, ApiError) as err:
            meta = current["metadata"]
            log.info("config volume not refreshed", extra={
                "pod": f"{meta.get('namespace', 'default')}/{meta['name']}",
                "error": str(err)})


def tear_down_empty_dirs(pod: Obj, pod_dir: PodDir) -> None:
    """AU10: as the kubelet tears down a terminated pod's volumes, its emptyDir data
    goes (what a DiskPressure eviction reclaims); its logs stay for `kubectl logs`."""
    for volume in pod["spec"].get("volumes") or []:
        if "emptyDir" in volume:
            path = pod_dir.volume_path(str(volume.get("name", "")))
            if not os.path.ismount(path):
                shutil.rmtree(path, ignore_errors=True)


class ClaimsStep:
    """SC1: a pod's containers start only while every claim's volume is attached to this
    node; until then they wait in ContainerCreating (one FailedAttachVolume event per
    distinct reason). `retry()`: check again soon; `changed()`: the status is stale."""

    def __init__(self, *, env: PodEnvironment, pod_dir: PodDir, claims: PodVolumes,
                 pod_name: str, event: EventSink, changed: Callable[[], None],
                 retry: Callable[[], None]) -> None:
        self.env = env
        self.dir = pod_dir
        self.claims = claims
        self._pod_name = pod_name
        self._event = event
        self._changed = changed
        self._retry = retry
        self._message: str | None = None

    async def ensure(self, records: Sequence[ContainerRecord], *,
                     active: bool) -> tuple[bool, str | None]:
        """(ready, lost): `lost` says why a running pod (`active`) lost its storage: the
        pod worker kills it."""
        try:
            readiness = await self.claims.check(node_name=self.env.node_name)
        except ApiError as err:
            log.warning(f"cannot check the pod's volumes: {err.message}",
                        extra={"pod": self._pod_name})
            self._retry()
            return False, None
        if readiness.ready:
            for name, path in readiness.paths.items():
                self.dir.link_claim(name, path)
            self._message = None
            return True, None
        if active:
            message = (f"{readiness.message}; the pod was using it, so it is killed: it lost "
                       "its storage")
            self._event(WARNING, "VolumeDetached", message)
            log.warning("volume taken away from a running pod; killing it",
                        extra={"pod": self._pod_name, "detail": message})
            return False, message
        for r in records:
            if not r.has_run():
                r.state = {"waiting": {"reason": "ContainerCreating",
                                       "message": readiness.message}}
        if readiness.message != self._message:
            self._message = readiness.message
            self._event(WARNING, "FailedAttachVolume", readiness.message)
            self._changed()
        if readiness.message.startswith("persistentvolumeclaim"):
            self._retry()
        return False, None
