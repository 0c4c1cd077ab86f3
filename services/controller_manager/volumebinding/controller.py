"""The PersistentVolume controller (SPEC SC1, AX4), as kube-controller-manager's
`persistentvolume-binder` with rancher's local-path provisioner folded in:

- a Pending claim is bound to a matching Available PersistentVolume (`matching`): the
  volume gets `spec.claimRef` and phase Bound, the claim `spec.volumeName`, the bind
  annotations and status Bound with the volume's capacity;
- with no match and a StorageClass whose provisioner is `skiff.io/local`, a volume
  `pvc-<claim uid>` is provisioned (a directory under the nodes' volume root, which the
  kubelet and the attach/detach controller already use), at once for `Immediate` classes
  and, for `WaitForFirstConsumer`, once the scheduler has annotated the claim with
  `volume.kubernetes.io/selected-node`;
- when the claim goes away its volume is Released; `Delete` reclaims (deletes) it,
  `Retain` keeps it Released for an administrator. A `Delete` volume still attached waits
  for its detach; then its directory (under `--local-volume-root`) and the object go.

Like kind's and k3s' clusters, the embedded cluster has a default StorageClass `standard`
(provisioner `skiff.io/local`, reclaim `Delete`): the controller creates it on start when
no class is the default. Its binding mode is `Immediate` because every kubelet of a Skiff
host shares one volume root, so a local volume is usable from any node. A claim without
`storageClassName` gets the default class (Kubernetes' retroactive default assignment).

Keys are `claim/<namespace>/<name>` and `volume/<name>`.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import shutil
from pathlib import Path

from skiff.api import ApiError, Reason, is_terminating
from skiff.api.groups.storage import WAIT_FOR_FIRST_CONSUMER
from skiff.api.types import Obj
from skiff.api.wellknown import BIND_COMPLETED_ANNOTATION as BIND_COMPLETED
from skiff.api.wellknown import DEFAULT_CLASS_ANNOTATION
from skiff.api.wellknown import LOCAL_VOLUME_PLUGIN as LOCAL_PROVISIONER
from skiff.api.wellknown import SELECTED_NODE_ANNOTATION as SELECTED_NODE
from skiff.client import NORMAL, object_key
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.volumebinding.matching import (
    BOUND_BY_CONTROLLER,
    STORAGE_PROVISIONER,
    claim_class,
    claim_ref,
    default_class,
    find_matching_volume,
    is_claimed_by,
    provisioned_volume,
)

log = logging.getLogger(__name__)


BOUND = "Bound"
RELEASED = "Released"
AVAILABLE = "Available"
CLAIM, VOLUME = "claim/", "volume/"
RECLAIM_RETRY_SECONDS = 2.0
DEFAULT_CLASS_NAME = "standard"
DEFAULT_STORAGE_CLASS: Obj = {
    "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
    "metadata": {"name": DEFAULT_CLASS_NAME,
                 "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
    "provisioner": LOCAL_PROVISIONER, "reclaimPolicy": "Delete",
    "volumeBindingMode": "Immediate"}


class VolumeBindingController(Controller):
    name = "persistentvolume-binder"

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context, workers=2)
        self.claims = context.informers.persistent_volume_claims()
        self.volumes = context.informers.persistent_volumes()
        self.classes = context.informers.storage_classes()
        self.attachments = context.informers.volume_attachments()
        self.recorder = context.recorder("persistentvolume-controller")
        self.claims.add_handler(on_add=self._on_claim,
                                on_update=lambda _o, n: self._on_claim(n),
                                on_delete=self._on_claim_deleted)
        self.volumes.add_handler(on_add=self._on_volume,
                                 on_update=lambda _o, n: self._on_volume(n))
        self.classes.add_handler(on_add=lambda _c: self.resync())

    async def run(self) -> None:
        await self.context.informers.wait_synced()
        await self.ensure_default_class()
        await super().run()

    async def ensure_default_class(self) -> None:
        if (default_class(self.classes.store.list()) is not None
                or self.classes.store.get(DEFAULT_CLASS_NAME) is not None):
            return
        try:
            await self.client.create(copy.deepcopy(DEFAULT_STORAGE_CLASS))
        except ApiError as err:
            if err.reason != Reason.ALREADY_EXISTS:
                raise
        log.info("created the default StorageClass", extra={"class": DEFAULT_CLASS_NAME})

    def _on_claim(self, claim: Obj) -> None:
        if (claim.get("status") or {}).get("phase") != BOUND:
            self.enqueue(CLAIM + object_key(claim))

    def _on_claim_deleted(self, claim: Obj) -> None:
        volume = (claim.get("spec") or {}).get("volumeName")
        if volume:
            self.enqueue(VOLUME + str(volume))

    def _on_volume(self, volume: Obj) -> None:
        self.enqueue(VOLUME + volume["metadata"]["name"])
        if (volume.get("status") or {}).get("phase") != BOUND:
            # A new or freed volume may be what a Pending claim waits for.
            for claim in self.claims.store.list():
                if (claim.get("status") or {}).get("phase") != BOUND:
                    self.enqueue(CLAIM + object_key(claim))

    def resync(self) -> None:
        for claim in self.claims.store.list():
            self._on_claim(claim)
        for volume in self.volumes.store.list():
            self.enqueue(VOLUME + volume["metadata"]["name"])

    async def reconcile(self, key: str) -> float | None:
        try:
            if key.startswith(VOLUME):
                return await self.sync_volume(key.removeprefix(VOLUME))
            await self.sync_claim(key.removeprefix(CLAIM))
        except ApiError as err:
            if err.reason == Reason.NOT_FOUND:
                return None
            raise
        return None

    # -- claims --------------------------------------------------------------------------

    async def sync_claim(self, key: str) -> None:
        claim = self.claims.store.get(key)
        if claim is None or is_terminating(claim):
            return
        if (claim.get("status") or {}).get("phase") == BOUND:
            return
        if "storageClassName" not in (claim.get("spec") or {}) or claim["spec"][
                "storageClassName"] is None:
            chosen = default_class(self.classes.store.list())
            if chosen is not None:
                updated = copy.deepcopy(claim)
                updated["spec"]["storageClassName"] = chosen["metadata"]["name"]
                await self.client.update(updated)  # its update event brings it back
                return
        wanted = (claim.get("spec") or {}).get("volumeName")
        if wanted:
            volume = self.volumes.store.get(str(wanted))
            if volume is None:
                return  # pre-bound to a volume that does not exist (yet): stays Pending
            await self.bind(claim, volume)
            return
        match = find_matching_volume(claim, self.volumes.store.list())
        if match is not None:
            await self.bind(claim, dict(match))
            return
        await self.provision(claim)

    async def provision(self, claim: Obj) -> None:
        class_name = claim_class(claim)
        storage_class = self.classes.store.get(class_name) if class_name else None
        if storage_class is None:
            return  # no class, or static binding only: Pending until a volume appears
        provisioner = str(storage_class.get("provisioner", ""))
        annotations = claim["metadata"].get("annotations") or {}
        if (storage_class.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER
                and not annotations.get(SELECTED_NODE)):
            await self.recorder.event(claim, NORMAL, "WaitForFirstConsumer",
                                      "waiting for first consumer to be created before "
                                      "binding")
            return
        if provisioner != LOCAL_PROVISIONER:
            await self.recorder.event(claim, NORMAL, "ExternalProvisioning",
                                      f"Waiting for a volume to be created either by the "
                                      f"external provisioner '{provisioner}' or manually "
                                      "by the system administrator")
            return
        volume = provisioned_volume(claim, storage_class)
        try:
            volume = await self.client.create(volume)
        except ApiError as err:
            if err.reason != Reason.ALREADY_EXISTS:
                raise
            volume = await self.client.get("persistentvolumes", volume["metadata"]["name"])
        await self.recorder.event(claim, NORMAL, "ProvisioningSucceeded",
                                  f"Successfully provisioned volume "
                                  f"{volume['metadata']['name']}")
        await self.bind(claim, volume, provisioner=provisioner)

    async def bind(self, claim: Obj, volume: Obj, *, provisioner: str = "") -> None:
        """Volume first (claimRef, Bound), then the claim (volumeName, Bound), as the
        binder orders it, so a crash in between leaves a pre-bound pair to finish."""
        name = volume["metadata"]["name"]
        if not is_claimed_by(volume, claim) or not (volume["spec"].get("claimRef") or {}).get(
                "uid"):
            updated = copy.deepcopy(volume)
            updated["spec"]["claimRef"] = claim_ref(claim)
            updated.setdefault("metadata", {}).setdefault("annotations", {})[
                BOUND_BY_CONTROLLER] = "yes"
            volume = await self.client.update(updated)
        if (volume.get("status") or {}).get("phase") != BOUND:
            updated = copy.deepcopy(volume)
            updated["status"] = {**(volume.get("status") or {}), "phase": BOUND}
            volume = await self.client.update_status(updated)
        if (claim.get("spec") or {}).get("volumeName") != name or not (
                claim["metadata"].get("annotations") or {}).get(BIND_COMPLETED):
            updated = copy.deepcopy(claim)
            updated["spec"]["volumeName"] = name
            annotations = updated["metadata"].setdefault("annotations", {})
            annotations[BIND_COMPLETED] = "yes"
            annotations[BOUND_BY_CONTROLLER] = "yes"
            if provisioner:
                annotations[STORAGE_PROVISIONER] = provisioner
            claim = await self.client.update(updated)
        bound = copy.deepcopy(claim)
        bound["status"] = {**(claim.get("status") or {}), "phase": BOUND,
                           "accessModes": list(volume["spec"].get("accessModes") or []),
                           "capacity": dict(volume["spec"].get("capacity") or {})}
        await self.client.update_status(bound)
        log.info("bound claim", extra={"claim": object_key(claim), "volume": name})

    # -- volumes -------------------------------------------------------------------------

    async def sync_volume(self, name: str) -> float | None:
        volume = self.volumes.store.get(name)
        if volume is None or is_terminating(volume):
            return None
        ref = volume["spec"].get("claimRef")
        phase = (volume.get("status") or {}).get("phase")
        if not ref:
            if phase != AVAILABLE:
                await self._set_phase(volume, AVAILABLE)
            return None
        claim = self.claims.store.get(f"{ref.get('namespace')}/{ref.get('name')}")
        if claim is not None and (not ref.get("uid")
                                  or claim["metadata"].get("uid") == ref.get("uid")):
            return None  # pre-bound or bound: the claim's sync finishes the pair
        if claim is None and not ref.get("uid"):
            return None  # pre-bound to a claim that is yet to come
        # The claim is gone: reclaim.
        policy = volume["spec"].get("persistentVolumeReclaimPolicy", "Retain")
        if policy == "Delete":
            if self.attachments.store.get(name) is not None:
                # Still attached (a pod may be writing): delete once it is detached.
                return RECLAIM_RETRY_SECONDS
            await self.delete_local_data(volume)
            await self.client.delete("persistentvolumes", name,
                                     uid=volume["metadata"].get("uid"))
            log.info("deleted released volume", extra={"volume": name})
            return None
        if phase != RELEASED:
            await self._set_phase(volume, RELEASED)
        return None

    async def delete_local_data(self, volume: Obj) -> None:
        """The local provisioner's part of `Delete`: remove the volume's directory under
        `--local-volume-root` (only for volumes it provisioned)."""
        root = self.context.settings.local_volume_root
        csi = volume["spec"].get("csi") or {}
        handle = str(csi.get("volumeHandle") or "")
        if (not root or csi.get("driver") != LOCAL_PROVISIONER or not handle
                or "/" in handle or handle in (".", "..")):
            return
        await asyncio.to_thread(shutil.rmtree, Path(root) / handle, ignore_errors=True)

    async def _set_phase(self, volume: Obj, phase: str) -> None:
        updated = copy.deepcopy(volume)
        updated["status"] = {**(volume.get("status") or {}), "phase": phase}
        await self.client.update_status(updated)
