"""The resourcequota controller (pkg/controller/resourcequota): recounts each quota.

`status.hard` is the spec's, `status.used` the sum of what the namespace's objects use of
each limited resource (`skiff.api.quotas.usage`, the same evaluators admission charges
with), counted from the informers. As in Kubernetes, creates are charged
by admission and the controller replenishes: a quota is recounted when its spec changes,
when an object of a kind it counts is deleted in its namespace or a pod there finishes, and
every `--resource-quota-sync-period` (which also gives back what admission charged for a
create that then failed).
"""

from __future__ import annotations

import copy
import time
from fractions import Fraction

from skiff.api import ApiError, Reason, lookup
from skiff.api.quantity import canonical
from skiff.api.quotas import COUNTED_KINDS, pod_counts, quota_covers, usage
from skiff.api.types import Obj
from skiff.client import BY_NAMESPACE, Informer, object_key
from skiff.controller_manager.controller import Controller, ControllerContext


class ResourceQuotaController(Controller):
    name = "resourcequota"

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context, workers=2,
                         resync_period=context.settings.resource_quota_sync_period)
        self.quotas = context.informers.resource("resourcequotas")
        self.quotas.add_handler(on_add=self._on_quota, on_update=self._on_quota_update,
                                on_delete=lambda _o: None)
        self.counted: dict[str, Informer] = {}
        for kind in COUNTED_KINDS:
            info = lookup(kind)
            informer = context.informers.pods() if kind == "Pod" else \
                context.informers.resource(info.resource)
            self.counted[kind] = informer
            # replenishment: admission charged the creates; what gives back is a delete,
            # and a pod that finished
            informer.add_handler(on_delete=self._replenish,
                                 on_update=self._on_pod_update if kind == "Pod" else None)

    def _on_quota(self, quota: Obj) -> None:
        self.enqueue(object_key(quota))

    def _on_quota_update(self, old: Obj, new: Obj) -> None:
        """A changed spec, or a status that does not count every limited resource, needs a
        count; admission raising `used` does not (recounting from informers that have not
        seen the new object yet would give a charged unit back)."""
        hard = (new.get("spec") or {}).get("hard") or {}
        status = new.get("status") or {}
        if ((old.get("spec") or {}).get("hard") != hard or status.get("hard") != hard
                or set(hard) - set(status.get("used") or {})):
            self.enqueue(object_key(new))

    def _on_pod_update(self, old: Obj, new: Obj) -> None:
        now = time.time()
        if pod_counts(old, now) and not pod_counts(new, now):
            self._replenish(new)

    def _replenish(self, obj: Obj) -> None:
        for quota in self.quotas.store.by_index(BY_NAMESPACE,
                                                str(obj["metadata"].get("namespace"))):
            self.enqueue(object_key(quota))

    def resync(self) -> None:
        for quota in self.quotas.store.list():
            self.enqueue(object_key(quota))

    def used(self, quota: Obj) -> dict[str, str]:
        """What the namespace's objects use of each resource the quota limits."""
        hard = (quota.get("spec") or {}).get("hard") or {}
        namespace = str(quota["metadata"].get("namespace"))
        total: dict[str, Fraction] = dict.fromkeys(hard, Fraction(0))
        now = time.time()
        for kind, informer in self.counted.items():
            info = lookup(kind)
            for obj in informer.store.by_index(BY_NAMESPACE, namespace):
                if not quota_covers(quota, info, obj):
                    continue
                for name, amount in usage(info, obj, now).items():
                    if name in total:
                        total[name] += amount
        return {name: canonical(amount, binary=str(hard[name]).endswith("i"))
                for name, amount in total.items()}

    async def reconcile(self, key: str) -> float | None:
        quota = self.quotas.store.get(key)
        if quota is None:
            return None
        hard = dict((quota.get("spec") or {}).get("hard") or {})
        status = {"hard": hard, "used": self.used(quota)}
        if (quota.get("status") or {}) == status:
            return None
        updated = copy.deepcopy(quota)
        updated["status"] = status
        try:
            await self.client.update_status(updated)
        except ApiError as err:
            if err.reason == Reason.CONFLICT:
                return 0.1  # admission charged it meanwhile: recount from the newer copy
            if err.reason != Reason.NOT_FOUND:
                raise
        return None
