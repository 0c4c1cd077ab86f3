"""The disruption controller: keeps each PodDisruptionBudget's status current, so the
apiserver's eviction subresource (AS8) and the scheduler's preemption can honour it.

Reconcile a PDB key: its pods from the pod cache (same namespace, selector match), the
controllers' scale when the budget is relative, the evictions still pending in
`disruptedPods`, then status currentHealthy, desiredHealthy, disruptionsAllowed,
expectedPods, observedGeneration and the DisruptionAllowed condition. A pod whose
controller is another kind (a custom resource, SPEC EX4) counts that controller's scale,
read through `skiff.client.scale` as kube's `getScaleController` reads `<resource>/scale`
(the CRD's scale paths from the CRD informer). Any change to a
matching pod, to the PDB, or to a ReplicaSet / StatefulSet / ReplicationController in its
namespace requeues it.
"""

from __future__ import annotations

import copy
import logging

from skiff.api import ApiError, LabelSelector, Reason
from skiff.api.types import Obj
from skiff.client import BY_NAMESPACE, NORMAL, WARNING, object_key
from skiff.client.scale import ScaleError, get_scale, group_of, resolve
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.disruption.budget import (
    BudgetStatus,
    compute,
    live_disruptions,
    needs_controller_scale,
)
from skiff.controller_manager.informers import controller_ref
from skiff.controller_manager.podutil import set_condition

log = logging.getLogger(__name__)

SCALABLE = {"ReplicaSet": "replicasets", "StatefulSet": "statefulsets",
            "ReplicationController": "replicationcontrollers"}
SCALABLE_GROUPS = {"ReplicaSet": "apps", "StatefulSet": "apps", "ReplicationController": ""}


class DisruptionController(Controller):
    name = "disruption"

    def __init__(self, *, context: ControllerContext) -> None:
        s = context.settings
        super().__init__(context=context, workers=s.concurrent_disruption_syncs)
        self.deletion_timeout = s.pdb_deletion_timeout
        self.pdbs = context.informers.pod_disruption_budgets()
        self.pods = context.informers.pods()
        self.scalable = {kind: context.informers.resource(resource)
                         for kind, resource in SCALABLE.items()}
        # The CRDs, for the scale paths of a custom controller (the informer CustomKinds
        # follows).
        self.crds = context.informers.custom_kinds().informer
        self.recorder = context.recorder("controllermanager")
        self.pdbs.add_handler(on_add=self._on_pdb, on_update=lambda _o, n: self._on_pdb(n))
        self.pods.add_handler(on_add=self._on_pod, on_update=self._on_pod_update,
                              on_delete=self._on_pod)
        for informer in self.scalable.values():
            informer.add_handler(on_update=lambda _o, n: self._on_namespace(n))

    def _on_pdb(self, pdb: Obj) -> None:
        self.enqueue(object_key(pdb))

    def _on_pod(self, pod: Obj) -> None:
        labels = pod["metadata"].get("labels") or {}
        for pdb in self.pdbs.store.by_index(BY_NAMESPACE, pod["metadata"].get("namespace")):
            if _selector(pdb).matches(labels):
                self.enqueue(object_key(pdb))

    def _on_pod_update(self, old: Obj, new: Obj) -> None:
        self._on_pod(old)
        self._on_pod(new)

    def _on_namespace(self, obj: Obj) -> None:
        for pdb in self.pdbs.store.by_index(BY_NAMESPACE, obj["metadata"].get("namespace")):
            self.enqueue(object_key(pdb))

    async def reconcile(self, key: str) -> float | None:
        pdb = self.pdbs.store.get(key)
        if pdb is None:
            return None
        ns = pdb["metadata"].get("namespace")
        selector = _selector(pdb)
        pods = [p for p in self.pods.store.by_index(BY_NAMESPACE, ns)
                if selector.matches(p["metadata"].get("labels") or {})]
        spec = pdb.get("spec") or {}
        status = pdb.get("status") or {}
        disrupted, expires_in = live_disruptions(
            status.get("disruptedPods") or {}, pods, now=self.clock.now(),
            timeout=self.deletion_timeout)
        if not pods:
            await self.recorder.event(pdb, NORMAL, "NoPods", "No matching pods found")
        scale: int | None = None
        unmanaged: list[str] = []
        failure = ""
        if needs_controller_scale(spec):
            scale, unmanaged, failure = await self.controller_scale(pods)
        if failure:
            await self.recorder.event(pdb, WARNING, "CalculateExpectedPodCountFailed",
                                      "Failed to calculate the number of expected pods: "
                                      f"{failure}")
        if unmanaged:
            await self.recorder.event(
                pdb, WARNING, "UnmanagedPods",
                f"Pods selected by this PodDisruptionBudget (selector: "
                f"{spec.get('selector')}) were found to be unmanaged. As a result, the "
                "status of the PDB cannot be calculated correctly, which may result in "
                "undefined behavior. To account for these pods please set "
                '".spec.minAvailable" field of the PDB to an integer value.')
        budget = compute(spec, pods, disrupted, controller_scale=scale)
        await self.write_status(pdb, budget, disrupted, sync_failure=failure)
        return expires_in

    async def controller_scale(self, pods: list[Obj]) -> tuple[int | None, list[str], str]:
        """`getExpectedScale`: the sum of the replicas of the pods' distinct controllers,
        the names of pods without a controller (skipped: they do not count), and why the
        scale is unknown ("" when it is known) — a controller that cannot be found, or whose
        kind has no scale subresource."""
        seen: dict[str, int] = {}
        unmanaged: list[str] = []
        for pod in pods:
            ref = controller_ref(pod)
            if ref is None:
                unmanaged.append(str(pod["metadata"]["name"]))
                continue
            if str(ref.get("uid")) in seen:
                continue
            namespace = str(pod["metadata"].get("namespace") or "")
            try:
                replicas = await self._scale_of(ref, namespace)
            except (ScaleError, ApiError) as err:
                return None, unmanaged, err.message
            if replicas is None:
                name = pod["metadata"]["name"]
                return None, unmanaged, f'found no controllers for pod "{name}"'
            seen[str(ref["uid"])] = replicas
        return sum(seen.values()), unmanaged, ""

    async def _scale_of(self, ref: Obj, namespace: str) -> int | None:
        """The replicas of a pod's controller; None when it is not there (or is another
        object of that name)."""
        kind, api_version = str(ref.get("kind") or ""), str(ref.get("apiVersion") or "")
        try:
            group = group_of(api_version)
        except ValueError as err:
            raise ScaleError(str(err)) from None
        informer = self.scalable.get(kind)
        if informer is not None and SCALABLE_GROUPS[kind] == group:
            owner = informer.store.get(f"{namespace}/{ref.get('name')}")
            if owner is None or owner["metadata"].get("uid") != ref.get("uid"):
                return None
            return int((owner.get("spec") or {}).get("replicas", 1))
        try:
            target = resolve(api_version=api_version, kind=kind, crd_of=self.crds.store.get)
        except ScaleError as err:
            if err.group_resource:
                raise ScaleError(f"{err.group_resource} does not implement the scale "
                                 "subresource") from None
            raise ScaleError(f'no matches for kind "{kind}" in version "{api_version}"'
                             ) from None
        try:
            scale = await get_scale(self.client, target, name=str(ref.get("name") or ""),
                                    namespace=namespace)
        except ApiError as err:
            if err.reason == Reason.NOT_FOUND:
                return None
            raise
        if scale.obj["metadata"].get("uid") != ref.get("uid"):
            return None
        return scale.spec_replicas

    async def write_status(self, pdb: Obj, budget: BudgetStatus, disrupted: dict[str, str],
                           *, sync_failure: str = "") -> None:
        updated = copy.deepcopy(pdb)
        status = updated.setdefault("status", {})
        before = copy.deepcopy(status)
        status.update({
            "currentHealthy": budget.current_healthy,
            "desiredHealthy": budget.desired_healthy,
            "disruptionsAllowed": budget.disruptions_allowed,
            "expectedPods": budget.expected_pods,
            "observedGeneration": int(pdb["metadata"].get("generation") or 1),
            "disruptedPods": disrupted,
        })
        allowed = budget.disruptions_allowed > 0
        reason = "SyncFailed" if sync_failure else (
            "SufficientPods" if allowed else "InsufficientPods")
        set_condition(updated, "DisruptionAllowed", "True" if allowed else "False",
                      now=self.clock.now(), reason=reason, message=sync_failure)
        if status == before:
            return
        try:
            await self.client.update_status(updated)
        except ApiError as err:
            if err.reason != Reason.NOT_FOUND:
                raise


def _selector(pdb: Obj) -> LabelSelector:
    """policy/v1: an empty selector (`{}`) selects every pod of the namespace, a missing
    one none."""
    sel = (pdb.get("spec") or {}).get("selector")
    try:
        return LabelSelector.from_dict(sel)
    except ApiError:
        return LabelSelector.none()
