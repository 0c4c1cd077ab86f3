"""The Deployment controller (pkg/controller/deployment): owns ReplicaSets and rolls them.

Reconcile claims the Deployment's ReplicaSets (adopting orphans its selector matches,
releasing owned ones that stop matching: `RefManager`), picks the new one by
template (creating `<name>-<pod-template-hash>` when none matches, with the next
`deployment.kubernetes.io/revision`), then either scales (paused, or nothing to roll),
rolls (`RollingUpdate`: new set up within `maxSurge`, old sets down within
`maxUnavailable`) or recreates (`Recreate`: old sets to 0 and their pods gone first), prunes
old sets beyond `revisionHistoryLimit`, and writes the status with the Available and
Progressing conditions that `kubectl rollout status` reads. Every write carries the cached
resourceVersion, so a stale cache costs a Conflict and a retry, never a double action.
"""

from __future__ import annotations

import copy
import logging

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.api.wellknown import POD_TEMPLATE_HASH_LABEL, REVISION_ANNOTATION
from skiff.client import BY_NAMESPACE, NORMAL, object_key
from skiff.clock import parse_rfc3339, rfc3339
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.deployment import plan
from skiff.controller_manager.informers import BY_CONTROLLER_UID, controller_ref
from skiff.controller_manager.refmanager import RefManager, orphan_owner_keys
from skiff.controller_manager.workload import owner_reference

log = logging.getLogger(__name__)

KIND = "Deployment"
# Annotations of the Deployment that are not copied onto its ReplicaSets.
_SKIP_ANNOTATIONS = {REVISION_ANNOTATION, "kubectl.kubernetes.io/last-applied-configuration",
                     "deployment.kubernetes.io/revision-history",
                     "deployment.kubernetes.io/desired-replicas",
                     "deployment.kubernetes.io/max-replicas"}


class DeploymentController(Controller):
    name = "deployment"

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context,
                         workers=context.settings.concurrent_deployment_syncs)
        self.deployments = context.informers.resource("deployments")
        self.sets = context.informers.replica_sets()
        self.pods = context.informers.pods()
        self.recorder = context.recorder("deployment-controller")
        self.deployments.add_handler(on_add=self._on_deployment,
                                     on_update=lambda _o, n: self._on_deployment(n),
                                     on_delete=self._on_deployment)
        self.sets.add_handler(on_add=self._on_set, on_update=self._on_set_update,
                              on_delete=self._on_set)
        self.pods.add_handler(on_delete=self._on_pod_delete)

    def _on_pod_delete(self, pod: Obj) -> None:
        """Recreate waits for the old pods to be gone: a pod's removal may unblock it."""
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return
        rs = self.sets.store.get(f"{pod['metadata'].get('namespace')}/{ref['name']}")
        if rs is not None:
            self._on_set(rs)

    def _on_deployment(self, d: Obj) -> None:
        self.enqueue(object_key(d))

    def _on_set(self, rs: Obj) -> None:
        ref = controller_ref(rs)
        if ref and ref.get("kind") == KIND:
            self.enqueue(f"{rs['metadata'].get('namespace')}/{ref['name']}")
        elif ref is None:
            for key in orphan_owner_keys(self.deployments, rs):
                self.enqueue(key)

    def _on_set_update(self, old: Obj, new: Obj) -> None:
        self._on_set(old)
        self._on_set(new)

    async def _owned_sets(self, d: Obj) -> list[Obj]:
        """The ReplicaSets the Deployment controls, after adopting matching orphans and
        releasing those that no longer match (`ClaimReplicaSets`)."""
        uid = d["metadata"].get("uid")
        in_namespace = self.sets.store.by_index(BY_NAMESPACE, d["metadata"]["namespace"])
        refs = RefManager(self.client, d, "replicasets")
        owned = [rs for rs in in_namespace if (controller_ref(rs) or {}).get("uid") == uid]
        return await refs.claim(owned + await refs.orphans(in_namespace, self.deployments))

    async def reconcile(self, key: str) -> float | None:
        d = self.deployments.store.get(key)
        if d is None or d["metadata"].get("deletionTimestamp"):
            return None
        sets = await self._owned_sets(d)
        new = plan.find_new(d, sets)
        old = [rs for rs in sets if new is None or rs["metadata"]["uid"] != new[
            "metadata"]["uid"]]
        spec = d["spec"]
        if spec.get("paused"):
            if new is not None and not any(plan.replicas_of(rs) for rs in old):
                await self._scale(new, int(spec.get("replicas", 1)), d)
            return await self.sync_status(d, new, old, paused=True)
        if new is None:
            new = await self.create_new_set(d, old)
            if new is None:
                return 1.0
        elif plan.revision(new) <= max((plan.revision(rs) for rs in old), default=0):
            await self._bump_revision(new, plan.next_revision(old), d)
            return None  # the update comes back through the informer
        if (d["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION) != str(
                plan.revision(new)):
            await self._annotate_deployment(d, plan.revision(new))
            return None
        if await self._copy_annotations(new, d):
            return None  # the update comes back through the informer
        if (spec.get("strategy") or {}).get("type") == "Recreate":
            await self.rollout_recreate(d, new, old)
        else:
            await self.rollout_rolling(d, new, old)
        await self.cleanup(d, old)
        return await self.sync_status(d, new, old, paused=False)

    # -- steps -----------------------------------------------------------------------------

    async def create_new_set(self, d: Obj, old: list[Obj]) -> Obj | None:
        spec, meta = d["spec"], d["metadata"]
        collisions = int((d.get("status") or {}).get("collisionCount") or 0)
        template = copy.deepcopy(spec.get("template") or {})
        pod_hash = plan.template_hash(template, collisions)
        template.setdefault("metadata", {}).setdefault("labels", {})[
            POD_TEMPLATE_HASH_LABEL] = pod_hash
        selector = copy.deepcopy(spec.get("selector") or {})
        selector.setdefault("matchLabels", {})[POD_TEMPLATE_HASH_LABEL] = pod_hash
        annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                       if k not in _SKIP_ANNOTATIONS}
        annotations[REVISION_ANNOTATION] = str(plan.next_revision(old))
        replicas = int(spec.get("replicas", 1))
        annotations["deployment.kubernetes.io/desired-replicas"] = str(replicas)
        surge, _ = plan.surge_and_unavailable(d)
        annotations["deployment.kubernetes.io/max-replicas"] = str(replicas + surge)
        rs: Obj = {
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"{meta['name']}-{pod_hash}", "namespace": meta["namespace"],
                         "labels": dict(template["metadata"].get("labels") or {}),
                         "annotations": annotations,
                         "ownerReferences": [owner_reference(d)]},
            "spec": {"replicas": 0, "minReadySeconds": int(spec.get("minReadySeconds") or 0),
                     "selector": selector, "template": template},
        }
        strategy = (spec.get("strategy") or {}).get("type")
        if not any(plan.replicas_of(o) for o in old) or strategy != "Recreate":
            rs["spec"]["replicas"] = plan.new_replicas_target(d, rs, [*old, rs]) \
                if strategy != "Recreate" else replicas
        try:
            created = await self.client.create(rs)
        except ApiError as err:
            if err.reason == Reason.ALREADY_EXISTS:
                # Another template hashed the same: Kubernetes bumps collisionCount.
                existing = self.sets.store.get(f"{meta['namespace']}/{rs['metadata']['name']}")
                if existing is None or (controller_ref(existing) or {}).get(
                        "uid") != meta["uid"] or not plan.equal_ignore_hash(
                        existing["spec"].get("template") or {}, spec.get("template") or {}):
                    await self._bump_collisions(d, collisions + 1)
                return None
            await self.recorder.event(d, "Warning", "FailedCreate", err.message)
            raise
        await self.recorder.event(d, NORMAL, "ScalingReplicaSet",
                                  f"Scaled up replica set {created['metadata']['name']} "
                                  f"from 0 to {created['spec']['replicas']}")
        return created

    async def rollout_rolling(self, d: Obj, new: Obj, old: list[Obj]) -> None:
        target = plan.new_replicas_target(d, new, [*old, new])
        if target != plan.replicas_of(new):
            await self._scale(new, target, d)
            return
        for rs in old:
            name = rs["metadata"]["name"]
            wanted = plan.old_scale_downs(d, new, old).get(name)
            if wanted is not None and wanted != plan.replicas_of(rs):
                await self._scale(rs, wanted, d)
                return

    async def rollout_recreate(self, d: Obj, new: Obj, old: list[Obj]) -> None:
        active_old = [rs for rs in old if plan.replicas_of(rs)]
        for rs in active_old:
            await self._scale(rs, 0, d)
        if active_old or any(self._old_pods_running(rs) for rs in old):
            return  # the new pods wait until every old pod is gone (terminating ones too)
        replicas = int(d["spec"].get("replicas", 1))
        if plan.replicas_of(new) != replicas:
            await self._scale(new, replicas, d)

    def _old_pods_running(self, rs: Obj) -> bool:
        """`oldPodsRunning`: a pod of the set that has not reached a terminal phase."""
        return any((p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                   for p in self.pods.store.by_index(BY_CONTROLLER_UID,
                                                     str(rs["metadata"].get("uid"))))

    async def cleanup(self, d: Obj, old: list[Obj]) -> None:
        limit = d["spec"].get("revisionHistoryLimit")
        if limit is None:
            return
        idle = [rs for rs in old if plan.replicas_of(rs) == 0 and not int(
            (rs.get("status") or {}).get("replicas") or 0)
            and not rs["metadata"].get("deletionTimestamp")]
        idle.sort(key=plan.revision)
        for rs in idle[:max(0, len(idle) - int(limit))]:
            meta = rs["metadata"]
            try:
                await self.client.delete("replicasets", meta["name"], meta["namespace"],
                                         uid=meta["uid"])
            except ApiError as err:
                if err.reason not in (Reason.NOT_FOUND, Reason.CONFLICT):
                    raise

    async def sync_status(self, d: Obj, new: Obj | None, old: list[Obj], *,
                          paused: bool) -> float | None:
        sets = [*old, *([new] if new else [])]

        def total(field: str) -> int:
            return sum(int((rs.get("status") or {}).get(field) or 0) for rs in sets)

        replicas = int(d["spec"].get("replicas", 1))
        _, max_unavailable = plan.surge_and_unavailable(d)
        available = total("availableReplicas")
        status: Obj = {
            "observedGeneration": int(d["metadata"].get("generation") or 1),
            "replicas": total("replicas"),
            "updatedReplicas": int((new or {}).get("status", {}).get("replicas") or 0)
            if new else 0,
            "readyReplicas": total("readyReplicas"),
            "availableReplicas": available,
            "unavailableReplicas": max(replicas - available, 0),
        }
        if (d.get("status") or {}).get("collisionCount"):
            status["collisionCount"] = d["status"]["collisionCount"]
        now = self.clock.now()
        conditions = [dict(c) for c in (d.get("status") or {}).get("conditions") or []]
        if available >= replicas - max_unavailable:
            _set_condition(conditions, "Available", "True", "MinimumReplicasAvailable",
                           "Deployment has minimum availability.", now)
        else:
            _set_condition(conditions, "Available", "False", "MinimumReplicasUnavailable",
                           "Deployment does not have minimum availability.", now)
        _copy_replica_failure(conditions, new, old)
        after: float | None = None
        new_name = new["metadata"]["name"] if new else ""
        deadline = d["spec"].get("progressDeadlineSeconds")
        if paused:
            _set_condition(conditions, "Progressing", "Unknown", "DeploymentPaused",
                           "Deployment is paused", now)
        elif new is not None and plan.deployment_complete(d, status):
            _set_condition(conditions, "Progressing", "True", "NewReplicaSetAvailable",
                           f'ReplicaSet "{new_name}" has successfully progressed.', now)
        elif new is not None:
            current = _get_condition(conditions, "Progressing")
            progressed = _progressed(d.get("status") or {}, status)
            if current is None or progressed or current.get("reason") in (
                    "NewReplicaSetAvailable", "DeploymentPaused", "DeploymentResumed"):
                _set_condition(conditions, "Progressing", "True", "ReplicaSetUpdated",
                               f'ReplicaSet "{new_name}" is progressing.', now,
                               force_update=True)
                after = float(deadline) if deadline else None
            elif deadline is not None and current.get("reason") != "ProgressDeadlineExceeded":
                since = parse_rfc3339(current.get("lastUpdateTime") or rfc3339(now))
                if now - since > float(deadline):
                    _set_condition(conditions, "Progressing", "False",
                                   "ProgressDeadlineExceeded",
                                   f'ReplicaSet "{new_name}" has timed out progressing.', now)
                else:
                    after = float(deadline) - (now - since) + 0.5
        status["conditions"] = conditions
        current_status = d.get("status") or {}
        if any(current_status.get(k) != v for k, v in status.items()):
            updated = copy.deepcopy(d)
            updated["status"] = {**current_status, **status}
            try:
                await self.client.update_status(updated)
            except ApiError as err:
                if err.reason != Reason.NOT_FOUND:
                    raise
        return after

    # -- writes ----------------------------------------------------------------------------

    async def _scale(self, rs: Obj, replicas: int, d: Obj) -> None:
        before = plan.replicas_of(rs)
        if before == replicas:
            return
        updated = copy.deepcopy(rs)
        updated["spec"]["replicas"] = replicas
        annotations = updated["metadata"].setdefault("annotations", {})
        annotations["deployment.kubernetes.io/desired-replicas"] = str(
            d["spec"].get("replicas", 1))
        surge, _ = plan.surge_and_unavailable(d)
        annotations["deployment.kubernetes.io/max-replicas"] = str(
            int(d["spec"].get("replicas", 1)) + surge)
        await self.client.update(updated)
        direction = "up" if replicas > before else "down"
        await self.recorder.event(d, NORMAL, "ScalingReplicaSet",
                                  f"Scaled {direction} replica set {rs['metadata']['name']} "
                                  f"from {before} to {replicas}")

    async def _bump_revision(self, rs: Obj, rev: int, d: Obj) -> None:
        """A rollback (`kubectl rollout undo`) made an old set new again: it gets the next
        revision, and the Deployment's annotations (change-cause) with it."""
        updated = copy.deepcopy(rs)
        annotations = updated["metadata"].setdefault("annotations", {})
        for k, v in (d["metadata"].get("annotations") or {}).items():
            if k not in _SKIP_ANNOTATIONS:
                annotations[k] = v
        annotations[REVISION_ANNOTATION] = str(rev)
        await self.client.update(updated)
        await self._annotate_deployment(d, rev)

    async def _copy_annotations(self, rs: Obj, d: Obj) -> bool:
        """The Deployment's annotations on its new set on every sync, as Kubernetes'
        SetNewReplicaSetAnnotations: `kubectl annotate deploy/x kubernetes.io/change-cause=…`
        after `kubectl set image` shows in `rollout history`. True when it wrote."""
        have = rs["metadata"].get("annotations") or {}
        missing = {k: v for k, v in (d["metadata"].get("annotations") or {}).items()
                   if k not in _SKIP_ANNOTATIONS and have.get(k) != v}
        if not missing:
            return False
        updated = copy.deepcopy(rs)
        updated["metadata"].setdefault("annotations", {}).update(missing)
        await self.client.update(updated)
        return True

    async def _annotate_deployment(self, d: Obj, rev: int) -> None:
        if (d["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION) == str(rev):
            return
        updated = copy.deepcopy(d)
        updated["metadata"].setdefault("annotations", {})[REVISION_ANNOTATION] = str(rev)
        await self.client.update(updated)

    async def _bump_collisions(self, d: Obj, count: int) -> None:
        updated = copy.deepcopy(d)
        updated.setdefault("status", {})["collisionCount"] = count
        await self.client.update_status(updated)


def _copy_replica_failure(conditions: list[Obj], new: Obj | None, old: list[Obj]) -> None:
    """getReplicaFailures: the new ReplicaSet's ReplicaFailure condition (else an old
    one's) becomes the Deployment's, which goes when no set has one."""
    failure = None
    for rs in ([new] if new else []) + old:
        failure = _get_condition(list((rs.get("status") or {}).get("conditions") or []),
                                 "ReplicaFailure")
        if failure is not None:
            break
    current = _get_condition(conditions, "ReplicaFailure")
    if failure is None:
        if current is not None:
            conditions.remove(current)
        return
    copied = {"type": "ReplicaFailure", "status": failure.get("status"),
              "lastUpdateTime": failure.get("lastTransitionTime"),
              "lastTransitionTime": failure.get("lastTransitionTime"),
              "reason": failure.get("reason"), "message": failure.get("message")}
    if current is None:
        conditions.append(copied)
    else:
        current.update(copied)


def _get_condition(conditions: list[Obj], type_: str) -> Obj | None:
    return next((c for c in conditions if c.get("type") == type_), None)


def _set_condition(conditions: list[Obj], type_: str, status: str, reason: str, message: str,
                   now: float, *, force_update: bool = False) -> None:
    current = _get_condition(conditions, type_)
    stamp = rfc3339(now)
    if current is None:
        conditions.append({"type": type_, "status": status, "lastUpdateTime": stamp,
                           "lastTransitionTime": stamp, "reason": reason, "message": message})
        return
    if current.get("status") == status and current.get("reason") == reason and \
            current.get("message") == message and not force_update:
        return
    if current.get("status") != status:
        current["lastTransitionTime"] = stamp
    current.update(status=status, reason=reason, message=message, lastUpdateTime=stamp)


def _progressed(old: Obj, new: Obj) -> bool:
    """`util.DeploymentProgressing`: more updated, ready or available pods, or fewer old."""
    def old_pods(s: Obj) -> int:
        return int(s.get("replicas") or 0) - int(s.get("updatedReplicas") or 0)
    return (int(new.get("updatedReplicas") or 0) > int(old.get("updatedReplicas") or 0)
            or int(new.get("readyReplicas") or 0) > int(old.get("readyReplicas") or 0)
            or int(new.get("availableReplicas") or 0) > int(old.get("availableReplicas") or 0)
            or old_pods(new) < old_pods(old))
