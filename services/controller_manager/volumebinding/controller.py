"""The persistent volume binder, reduced to what SPEC SC1 needs: every claim gets its own
volume, named `pvc-<claim uid>` (the local attacher makes it a directory or a named docker
volume on first attach). A Pending claim gets `spec.volumeName` (a spec write) and then
`status.phase: Bound` (a status write). There are no PersistentVolume objects, so there is
nothing to match, provision or reclaim.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from skiff.api import ApiError, Reason, is_terminating
from skiff.client import NORMAL, object_key
from skiff.controller_manager.attachdetach.plan import volume_name
from skiff.controller_manager.controller import Controller, ControllerContext

log = logging.getLogger(__name__)

Obj = dict[str, Any]

BOUND = "Bound"


class VolumeBindingController(Controller):
    name = "persistentvolume-binder"

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context, workers=2)
        self.claims = context.informers.persistent_volume_claims()
        self.recorder = context.recorder("persistentvolume-controller")
        self.claims.add_handler(on_add=self._on_claim,
                                on_update=lambda _o, n: self._on_claim(n))

    def _on_claim(self, claim: Obj) -> None:
        if (claim.get("status") or {}).get("phase") != BOUND:
            self.enqueue(object_key(claim))

    async def reconcile(self, key: str) -> float | None:
        claim = self.claims.store.get(key)
        if claim is None or is_terminating(claim):
            return None
        if (claim.get("status") or {}).get("phase") == BOUND:
            return None
        volume = volume_name(claim)
        try:
            if (claim.get("spec") or {}).get("volumeName") != volume:
                updated = copy.deepcopy(claim)
                updated["spec"]["volumeName"] = volume
                claim = await self.client.update(updated)
            bound = copy.deepcopy(claim)
            bound["status"] = {**(claim.get("status") or {}), "phase": BOUND,
                               "accessModes": list(claim["spec"].get("accessModes") or [])}
            await self.client.update_status(bound)
        except ApiError as err:
            if err.reason == Reason.NOT_FOUND:
                return None
            raise
        log.info("bound claim", extra={"claim": key, "volume": volume})
        await self.recorder.event(claim, NORMAL, "ProvisioningSucceeded",
                                  f"Successfully provisioned volume {volume}")
        return None
