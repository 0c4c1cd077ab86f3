"""Persistent volumes on the node: a pod starts only when its volume is attached here (SC1).

A pod volume `persistentVolumeClaim: {claimName}` is the directory of the claim's bound
PersistentVolume (SPEC AX4): a `hostPath`/`local` volume's path, else (the local
provisioner's volumes) `<volume-root>/<volume name>`, shared by every kubelet of the host
(local mode). Before any container of the pod starts, the kubelet requires the
VolumeAttachment named like the volume
to exist, to name this node in `spec.nodeName`, to say `status.attached: true` and not to be
being deleted; the attach/detach controller creates it with a compare-and-swap, so at most
one node holds it. The kubelet watches attachments (one informer per process), so a pod
waiting for its volume starts as soon as the attachment lands, and a running pod whose
attachment disappears or moves is killed: it lost its storage (the storage fence).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from skiff.api.errors import ApiError, Reason
from skiff.api.types import ObjView
from skiff.client import ApiClient, Informer

__all__ = ["PodVolumes", "VolumeManager", "VolumeReadiness", "attachment_problem",
           "claim_volumes", "volume_name"]


def claim_volumes(pod: ObjView) -> dict[str, str]:
    """The pod's PVC volumes: volume name → claim name."""
    out: dict[str, str] = {}
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, dict) and claim.get("claimName"):
            out[str(volume.get("name", ""))] = str(claim["claimName"])
    return out


def volume_name(claim_uid: str) -> str:
    """The volume (and VolumeAttachment) of a claim, as the attach/detach controller names
    it."""
    return f"pvc-{claim_uid}"


def attachment_problem(attachment: ObjView | None, *, volume: str, node_name: str) -> str | None:
    """Why `volume` may not be used on `node_name` now, or None when it may."""
    waiting = f"waiting for volume {volume} to be attached to this node"
    if attachment is None:
        return waiting
    if (attachment.get("metadata") or {}).get("deletionTimestamp"):
        return f"{waiting}: its attachment is being deleted (detach)"
    holder = (attachment.get("spec") or {}).get("nodeName")
    if holder != node_name:
        return f"{waiting}: it is attached to node {holder}"
    if (attachment.get("status") or {}).get("attached") is not True:
        return f"{waiting}: the attachment is not confirmed yet (status.attached)"
    return None


@dataclass(frozen=True)
class VolumeReadiness:
    ready: bool
    message: str = ""
    paths: dict[str, Path] = field(default_factory=dict)  # volume name → directory


class VolumeManager:
    """One per kubelet process: the attachment informer and the shared volume root."""

    def __init__(self, *, api: ApiClient, volume_root: Path) -> None:
        self.api = api
        self.volume_root = volume_root
        self.informer = Informer(api, "volumeattachments")

    def for_pod(self, pod: ObjView) -> PodVolumes:
        return PodVolumes(manager=self, pod=pod)


class PodVolumes:
    """One pod's claims; the claim UIDs are looked up once (a pod's claim cannot change)."""

    def __init__(self, *, manager: VolumeManager, pod: ObjView) -> None:
        self.manager = manager
        meta = pod.get("metadata") or {}
        self.namespace = str(meta.get("namespace") or "default")
        self.claims = claim_volumes(pod)
        self._volumes: dict[str, tuple[str, Path]] = {}  # claim → (volume, directory)

    async def check(self, *, node_name: str) -> VolumeReadiness:
        if not self.claims:
            return VolumeReadiness(ready=True)
        await self.manager.informer.wait_synced()
        paths: dict[str, Path] = {}
        for name, claim in self.claims.items():
            bound = self._volumes.get(claim)
            if bound is None:
                try:
                    pvc = await self.manager.api.get("persistentvolumeclaims", claim,
                                                     self.namespace)
                except ApiError as err:
                    if err.reason != Reason.NOT_FOUND:
                        raise
                    return VolumeReadiness(ready=False, message=(
                        f'persistentvolumeclaim "{claim}" not found (volume {name})'))
                volume = (pvc.get("spec") or {}).get("volumeName")
                if volume:
                    bound = self._volumes[claim] = (str(volume),
                                                    await self._path(str(volume)))
                else:
                    # Not bound yet: only the local provisioner's name can be attached
                    # (the attach/detach controller waits for the binding), so the pod
                    # waits below unless that volume is already attached here.
                    unbound = volume_name(str(pvc["metadata"]["uid"]))
                    bound = (unbound, self.manager.volume_root / unbound)
            volume, path = bound
            problem = attachment_problem(self.manager.informer.store.get(volume),
                                         volume=volume, node_name=node_name)
            if problem is not None:
                return VolumeReadiness(ready=False, message=problem)
            paths[name] = path
        return VolumeReadiness(ready=True, paths=paths)

    async def _path(self, volume: str) -> Path:
        """Where a PersistentVolume's data is on this host (SPEC AX4): a `hostPath` or
        `local` volume's own path; otherwise (the local provisioner's `skiff.io/local`)
        the directory named like the volume under the volume root."""
        try:
            pv = await self.manager.api.get("persistentvolumes", volume)
        except ApiError as err:
            if err.reason != Reason.NOT_FOUND:
                raise
            return self.manager.volume_root / volume
        spec = pv.get("spec") or {}
        for source in ("hostPath", "local"):
            path = (spec.get(source) or {}).get("path")
            if path:
                return Path(str(path))
        return self.manager.volume_root / volume
