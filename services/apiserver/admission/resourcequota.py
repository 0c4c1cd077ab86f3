"""ResourceQuota admission (plugin/pkg/admission/resourcequota), the last admission step.

An object created in a namespace with quotas is charged to every quota that covers it
(scopes) and limits something it uses: a pod whose quota limits cpu or memory must state
that request or limit in each container ("failed quota: NAME: must specify requests.cpu
for: main"); a quota whose controller has not yet counted what it limits refuses the
write ("status unknown for quota"); one that would go over refuses it with Kubernetes' words
("exceeded quota: NAME, requested: pods=1, used: pods=2, limited: pods=2"). Otherwise each
charged quota's `status.used` is raised with a compare-and-swap on its etcd revision before
the object is stored, so concurrent creates through several apiservers cannot both take
the last unit; the resourcequota controller recounts later (a create that then failed is
given back there). A Service update is charged what it adds (a change to NodePort adds
`services.nodeports`). Dry runs check without charging.
"""

from __future__ import annotations

import time
from fractions import Fraction

from skiff.api import ApiError, Reason, lookup
from skiff.api.kinds import KindInfo, storage_key
from skiff.api.quantity import canonical, parse_quantity
from skiff.api.quotas import COUNTED_KINDS, binary_keys, pretty, quota_covers, usage
from skiff.api.types import Obj
from skiff.apiserver.admission.interface import Attributes, Operation, Plugin
from skiff.apiserver.storage.interface import Storage
from skiff.apiserver.storage.lookups import Lookup
from skiff.apiserver.storage.watchcache import WatchCache

ATTEMPTS = 5
# the resources for which a pod's containers must each state a request or limit
_MUST_SPECIFY = ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu",
                 "limits.memory")


def _refuse(info: KindInfo, name: str, message: str) -> ApiError:
    return ApiError(Reason.FORBIDDEN, f'{info.resource} "{name}" is forbidden: {message}')


def missing_requests(pod: Obj, limited: set[str]) -> str:
    """podEvaluator.Constraints: which limited compute resources a container leaves unset,
    as "limits.cpu for: a,b; requests.cpu for: a" (empty when none)."""
    required = limited & set(_MUST_SPECIFY)
    missing: dict[str, set[str]] = {}
    spec = pod.get("spec") or {}
    for field in ("containers", "initContainers"):
        for container in spec.get(field) or []:
            resources = container.get("resources") or {}
            has = {f"limits.{k}" for k in resources.get("limits") or {}}
            for key in resources.get("requests") or {}:
                has |= {key, f"requests.{key}"}
            for name in required - has:
                missing.setdefault(name, set()).add(str(container.get("name", "")))
    return "; ".join(f"{name} for: {','.join(sorted(missing[name]))}"
                     for name in sorted(missing))


class QuotaAdmission:
    def __init__(self, storage: Storage, cache: WatchCache) -> None:
        self.storage = storage
        self.quotas = Lookup("resourcequotas", storage, cache)
        self._info = lookup("resourcequotas")

    async def admit(self, info: KindInfo, obj: Obj, *, dry_run: bool = False) -> None:
        if info.kind not in COUNTED_KINDS:
            return
        namespace = str(obj["metadata"].get("namespace"))
        quotas = await self.quotas.in_namespace(namespace)
        if not quotas:
            return
        delta = usage(info, obj, time.time())
        if not delta:
            return
        for cached in quotas:
            if not quota_covers(cached, info, obj):
                continue
            await self._charge(info, obj, cached, delta, dry_run)

    async def admit_update(self, info: KindInfo, old: Obj, new: Obj, *,
                           dry_run: bool = False) -> None:
        """An update is charged what it adds (Kubernetes' quota admission handles updates of
        Services, whose type may change): the increase of each resource, nothing for what
        falls."""
        if info.kind != "Service":
            return
        now = time.time()
        before = usage(info, old, now)
        delta = {k: v - before.get(k, Fraction(0)) for k, v in usage(info, new, now).items()}
        delta = {k: v for k, v in delta.items() if v > 0}
        if not delta:
            return
        namespace = str(new["metadata"].get("namespace"))
        for cached in await self.quotas.in_namespace(namespace):
            if quota_covers(cached, info, new):
                await self._charge(info, new, cached, delta, dry_run)

    async def _charge(self, info: KindInfo, obj: Obj, cached: Obj, delta: dict[str, Fraction],
                      dry_run: bool) -> None:
        name = str(obj["metadata"].get("name", ""))
        meta = cached["metadata"]
        key = storage_key(self._info, meta.get("namespace"), meta["name"])
        for _ in range(ATTEMPTS):
            kv, _ = await self.storage.get(key)
            if kv is None or kv.obj is None:
                return  # deleted meanwhile
            quota = kv.obj
            spec_hard = (quota.get("spec") or {}).get("hard") or {}
            # what the quota limits of this object's use, and, for a pod, the compute
            # resources each container must state
            limited = set(spec_hard) & (set(delta) | (set(_MUST_SPECIFY)
                                                       if info.kind == "Pod" else set()))
            if not limited:
                return
            if info.kind == "Pod":
                missing = missing_requests(obj, limited)
                if missing:
                    raise _refuse(info, name, f"failed quota: {meta['name']}: must specify "
                                              f"{missing}")
            status = quota.get("status") or {}
            hard, used = status.get("hard") or {}, status.get("used") or {}
            charged = sorted(k for k in limited if k in delta)
            unknown = [k for k in sorted(limited) if k not in hard or k not in used]
            if unknown:
                raise _refuse(info, name, f"status unknown for quota: {meta['name']}, "
                                          f"resources: {', '.join(unknown)}")
            after = {k: parse_quantity(used[k]) + delta[k] for k in charged}
            over = [k for k in charged if after[k] > parse_quantity(hard[k])]
            if over:
                raise _refuse(info, name, (
                    f"exceeded quota: {meta['name']}, "
                    f"requested: {pretty({k: delta[k] for k in over}, binary_keys(info, obj))}, "
                    f"used: {pretty({k: used[k] for k in over})}, "
                    f"limited: {pretty({k: hard[k] for k in over})}"))
            if dry_run or not charged:
                return
            quota["status"] = {**status, "used": {
                **used, **{k: canonical(v, binary=str(hard[k]).endswith("i"))
                           for k, v in after.items()}}}
            try:
                await self.storage.update(key, quota, expected_revision=kv.mod_revision)
                return
            except ApiError as err:
                if err.reason != Reason.CONFLICT:
                    raise
        raise ApiError(Reason.CONFLICT, f"Operation cannot be fulfilled on resourcequotas "
                                        f'"{meta["name"]}": the object has been modified; '
                                        "please apply your changes to the latest version and "
                                        "try again")


class ResourceQuota(Plugin):
    """Charges a create (and a Service update) to the namespace's quotas; the last plugin,
    as in Kubernetes."""

    name = "ResourceQuota"

    def __init__(self, quota: QuotaAdmission) -> None:
        self.quota = quota

    async def validate(self, attrs: Attributes) -> list[str]:
        if attrs.operation is Operation.CREATE:
            await self.quota.admit(attrs.info, attrs.obj, dry_run=attrs.dry_run)
        elif attrs.old is not None and attrs.subresource == "":
            await self.quota.admit_update(attrs.info, attrs.old, attrs.obj,
                                          dry_run=attrs.dry_run)
        return []
