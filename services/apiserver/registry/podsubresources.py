"""The pod subresources that are not the pod itself: `pods/binding` (the scheduler's
assignment: spec.nodeName once, and PodScheduled) and `pods/eviction` (a graceful delete
that honours PodDisruptionBudgets, 429 when none is left), as Kubernetes' BindingREST and
EvictionREST beside the pod storage. They work on the store through `PodStore`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from skiff.api import ApiError, FieldError, KindInfo, LabelSelector, Reason, lookup
from skiff.api.kinds import storage_key, storage_prefix
from skiff.api.objcopy import deep_copy
from skiff.api.pods import set_condition
from skiff.api.types import Obj
from skiff.apiserver.registry.conflicts import Retry, lost_race
from skiff.apiserver.storage.interface import Storage
from skiff.apiserver.storage.values import KeyValue
from skiff.apiserver.storage.watchcache import WatchCache
from skiff.clock import Clock, rfc3339
from skiff.tracing import inject_into_object

T = TypeVar("T")


class PodStore(Protocol):
    """What the pod subresources use of the generic store."""

    storage: Storage
    cache: WatchCache
    clock: Clock

    def pod_namespace(self, namespace: str | None) -> str: ...

    async def get_kv(self, info: KindInfo, namespace: str | None, name: str) -> KeyValue: ...

    async def retry_conflicts(self, fn: Callable[[], Awaitable[T]]) -> T: ...

    async def delete(self, resource: str, namespace: str | None, name: str, *,
                     grace_period_seconds: int | None = None,
                     preconditions: Obj | None = None, dry_run: bool = False,
                     propagation_policy: str | None = None,
                     orphan_dependents: bool | None = None) -> Obj: ...


class PodSubresources:
    """`bind` and `evict` over a `PodStore`."""

    def __init__(self, store: PodStore) -> None:
        self.store = store

    async def bind(self, namespace: str | None, name: str, binding: Obj) -> Obj:
        """pods/binding: set spec.nodeName once and PodScheduled=True (AS8)."""
        info = lookup("pods")
        namespace = self.store.pod_namespace(namespace)
        check_subresource_name(binding, name, "Binding")
        target = (binding.get("target") or {}).get("name") if isinstance(binding, dict) else None
        if not target:
            raise ApiError.invalid("Binding", name, [FieldError("target.name",
                                                                "Required value")])
        uid = (binding.get("metadata") or {}).get("uid")
        key = storage_key(info, namespace, name)
        first = [True]

        async def attempt() -> Obj:
            # First try: the watch cache's newest copy as the compare-and-swap's suggestion
            # (one etcd txn instead of a read and a txn, as Kubernetes' GuaranteedUpdate
            # does); it is only trusted where it lets the binding through, and a stale copy
            # fails the txn's compare, so both fall back to a fresh read.
            if first[0]:
                first[0] = False
                suggested = self._bind_suggestion(key, uid)
                if suggested is not None:
                    return await _swap(*suggested)
            cur = await self.store.get_kv(info, namespace, name)
            pod = cur.obj  # freshly decoded for this request, shared with nobody: no copy
            assert pod is not None
            if uid and pod["metadata"].get("uid") != uid:
                raise ApiError.conflict("pods", name, "the pod's UID does not match the "
                                        "binding; it was deleted and recreated")
            if pod["metadata"].get("deletionTimestamp"):
                raise ApiError.conflict("pods/binding", name,
                                        f"pod {name} is being deleted, cannot be assigned to "
                                        "a host")
            if pod["spec"].get("nodeName"):
                raise ApiError.conflict("pods/binding", name,
                                        f"pod {name} is already assigned to node "
                                        f'"{pod["spec"]["nodeName"]}"')
            return await _swap(pod, cur.mod_revision)

        async def _swap(pod: Obj, revision: int) -> Obj:
            pod["spec"]["nodeName"] = target
            set_condition(pod, "PodScheduled", "True", now=self.store.clock.now())
            inject_into_object(pod)
            try:
                return await self.store.storage.update(key, pod, expected_revision=revision)
            except ApiError as err:
                if lost_race(err):
                    raise Retry() from None
                raise

        return await self.store.retry_conflicts(attempt)

    def _bind_suggestion(self, key: str, uid: str | None) -> tuple[Obj, int] | None:
        """A private copy of the watch cache's newest pod at `key` and its revision, when
        that copy can be bound as it is (not deleted, terminating, bound or another uid)."""
        raw = self.store.cache.recent(key)
        if raw is None or raw.obj is None:
            return None
        meta, spec = raw.obj.get("metadata") or {}, raw.obj.get("spec") or {}
        if ((uid and meta.get("uid") != uid) or meta.get("deletionTimestamp")
                or spec.get("nodeName")):
            return None
        return _bindable_copy(raw.obj), raw.revision

    async def evict(self, namespace: str | None, name: str, eviction: Obj) -> Obj:
        """pods/eviction: a graceful delete that honours PodDisruptionBudgets (429)."""
        namespace = self.store.pod_namespace(namespace)
        check_subresource_name(eviction, name, "Eviction")
        options = (eviction.get("deleteOptions") or {}) if isinstance(eviction, dict) else {}
        grace = options.get("gracePeriodSeconds")
        cur = await self.store.get_kv(lookup("pods"), namespace, name)
        pod = cur.obj
        assert pod is not None
        phase = pod.get("status", {}).get("phase")
        unchanged_since: int | None = None
        if phase not in ("Succeeded", "Failed", "Pending") and not pod["metadata"].get(
                "deletionTimestamp"):
            if await self._take_disruption(namespace, pod):
                # An unhealthy pod evicted without using the budget: only if it has not
                # become ready since (Kubernetes' resourceVersion precondition).
                unchanged_since = cur.mod_revision
        await self._add_disruption_target(namespace, name, "EvictionByEvictionAPI",
                                          "Eviction API: evicting",
                                          unchanged_since=unchanged_since)
        return await self.store.delete("pods", namespace, name, grace_period_seconds=grace,
                                 preconditions={"uid": pod["metadata"]["uid"]})

    async def _take_disruption(self, namespace: str, pod: Obj) -> bool:
        """Take one disruption from the pod's PDB (429 when none is left). True when the
        pod may go without taking one: it is not ready and the budget's
        `unhealthyPodEvictionPolicy` is AlwaysAllow, or (IfHealthyBudget, the default)
        the budget is healthy enough (currentHealthy >= desiredHealthy > 0)."""
        info = lookup("poddisruptionbudgets")
        kvs, _ = await self.store.storage.list(storage_prefix(info, namespace))
        labels = pod.get("metadata", {}).get("labels") or {}
        matching = [kv for kv in kvs
                    if kv.obj is not None and pdb_selects(kv.obj, labels)]
        if not matching:
            return False
        if len(matching) > 1:
            raise ApiError(Reason.INTERNAL_ERROR,
                           "This pod has more than one PodDisruptionBudget, which the "
                           "eviction subresource does not support.")
        kv = matching[0]
        pdb = deep_copy(kv.obj)
        assert pdb is not None
        status = pdb.setdefault("status", {})
        pdb_name = pdb["metadata"]["name"]
        if not is_ready(pod):
            policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy")
            if policy == "AlwaysAllow":
                return True
            desired = int(status.get("desiredHealthy", 0))
            if int(status.get("currentHealthy", 0)) >= desired > 0:
                return True
        if int(status.get("observedGeneration", 0)) < int(pdb["metadata"].get("generation", 1)):
            raise ApiError(Reason.TOO_MANY_REQUESTS,
                           f"Cannot evict pod as it would violate the pod's disruption budget. "
                           f"The disruption budget {pdb_name} is still being processed by "
                           "the server.", retry_after_seconds=10)
        allowed = int(status.get("disruptionsAllowed", 0))
        if allowed <= 0:
            raise ApiError(Reason.TOO_MANY_REQUESTS,
                           "Cannot evict pod as it would violate the pod's disruption budget. "
                           f"The disruption budget {pdb_name} needs "
                           f"{status.get('desiredHealthy', 0)} healthy pods and has "
                           f"{status.get('currentHealthy', 0)} currently",
                           retry_after_seconds=10)
        status["disruptionsAllowed"] = allowed - 1
        status.setdefault("disruptedPods", {})[pod["metadata"]["name"]] = rfc3339(
            self.store.clock.now())
        try:
            await self.store.storage.update(kv.key, pdb, expected_revision=kv.mod_revision)
        except ApiError as err:
            if lost_race(err):
                raise ApiError(Reason.TOO_MANY_REQUESTS,
                               "the disruption budget changed during eviction; retry",
                               retry_after_seconds=1) from None
            raise
        return False

    async def _add_disruption_target(self, namespace: str, name: str, reason: str,
                                     message: str, *, unchanged_since: int | None = None
                                     ) -> None:
        info = lookup("pods")

        async def attempt() -> None:
            cur = await self.store.get_kv(info, namespace, name)
            pod = deep_copy(cur.obj)
            assert pod is not None
            if unchanged_since is not None and cur.mod_revision != unchanged_since:
                raise ApiError(Reason.TOO_MANY_REQUESTS,
                               "Cannot evict pod as it would violate the pod's disruption "
                               "budget. The pod changed during eviction; retry",
                               retry_after_seconds=10)
            if pod["metadata"].get("deletionTimestamp"):
                return
            set_condition(pod, "DisruptionTarget", "True", now=self.store.clock.now(),
                           reason=reason, message=message)
            try:
                await self.store.storage.update(storage_key(info, namespace, name), pod,
                                          expected_revision=cur.mod_revision)
            except ApiError as err:
                if lost_race(err):
                    raise Retry() from None
                raise

        await self.store.retry_conflicts(attempt)


def check_subresource_name(body: Any, name: str, kind: str) -> None:
    """A Binding or Eviction names the pod it is posted to (SPEC AU5): another is a 400."""
    meta = body.get("metadata") if isinstance(body, dict) else None
    named = meta.get("name") if isinstance(meta, dict) else None
    if named and named != name:
        raise ApiError.bad_request(f"name in URL does not match name in {kind} object")


def pdb_selects(pdb: Obj, labels: dict[str, str]) -> bool:
    """policy/v1: an empty selector selects every pod of the namespace, a missing one none;
    a PDB with an invalid selector selects nothing."""
    try:
        return LabelSelector.from_dict((pdb.get("spec") or {}).get("selector")).matches(labels)
    except ApiError:
        return False


def is_ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _bindable_copy(pod: Obj) -> Obj:
    """A copy of the cache's shared pod that a binding may change — spec, status
    conditions, metadata annotations (the trace) — sharing everything else, which the
    binding only reads (a full copy was a msgpack round trip of the whole pod)."""
    meta = dict(pod.get("metadata") or {})
    if isinstance(meta.get("annotations"), dict):
        meta["annotations"] = dict(meta["annotations"])
    status = dict(pod.get("status") or {})
    if isinstance(status.get("conditions"), list):
        status["conditions"] = [dict(c) if isinstance(c, dict) else c
                                for c in status["conditions"]]
    return {**pod, "metadata": meta, "spec": dict(pod.get("spec") or {}), "status": status}

