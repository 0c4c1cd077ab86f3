"""A policy's status as Kubernetes' type-checking controller leaves it: once the apiserver
has seen a generation of a ValidatingAdmissionPolicy, `status.observedGeneration` says so
(with `status.typeChecking: {}` — Skiff's expressions are all `dyn`-typed, so there are no
type warnings to report). It runs in every apiserver; a write that loses a race to another
apiserver's is simply done again from the next copy.
"""

from __future__ import annotations

import asyncio
import copy
import logging

from skiff.api.errors import ApiError
from skiff.api.kinds import storage_key
from skiff.api.types import Obj
from skiff.apiserver.storage.interface import Storage
from skiff.apiserver.storage.lookups import Lookup

log = logging.getLogger(__name__)


def needs_status(obj: Obj) -> bool:
    generation = obj["metadata"].get("generation")
    status = obj.get("status") or {}
    return generation is not None and status.get("observedGeneration") != generation


class PolicyStatus:
    """Writes `status.observedGeneration` of the policies in `policies` that lack it."""

    def __init__(self, storage: Storage, policies: Lookup, *, period: float = 0.2) -> None:
        self._storage = storage
        self._policies = policies
        self._period = period

    async def run(self) -> None:
        while True:
            for obj in [o for o in self._policies.items.values() if needs_status(o)]:
                try:
                    await self.observe(str(obj["metadata"]["name"]))
                except ApiError as err:  # a conflict, or storage away: next round
                    log.debug("policy status not written", extra={"error": err.message})
            await asyncio.sleep(self._period)

    async def observe(self, name: str) -> None:
        """Set the stored policy's observedGeneration to its generation."""
        key = storage_key(self._policies.info, None, name)
        kv, _ = await self._storage.get(key)
        if kv is None or kv.obj is None or not needs_status(kv.obj):
            return
        policy = copy.deepcopy(kv.obj)
        raw = policy.get("status")
        status: Obj = raw if isinstance(raw, dict) else {}
        policy["status"] = {**status, "observedGeneration": policy["metadata"]["generation"],
                            "typeChecking": status.get("typeChecking") or {}}
        await self._storage.update(key, policy, expected_revision=kv.mod_revision)
