"""The StatefulSet controller (SPEC PS4): stable identities, at most one pod per identity.

Reconcile reads the set and its pods from the caches, asks `plan` what to do next, creates
pods named `<set>-<ordinal>` (label `statefulset.kubernetes.io/pod-name`, hostname and
subdomain, a controller ownerReference) or deletes them gracefully — it never force deletes
(PS5) — with SuccessfulCreate / SuccessfulDelete Events, then writes `status`. A create
that meets AlreadyExists means an object with that name is still there, so it waits.

Before a pod is created, each of its `volumeClaimTemplates` becomes the claim
`<template>-<set>-<ordinal>` (owned by the set, created once, never deleted here: the
retention policy is Retain), and the pod's volume `<template>` points at it — so the
replacement of an identity gets the same volume (SPEC SC1).
"""

from __future__ import annotations

import copy
import logging

from skiff.api import ApiError, Reason, is_terminating
from skiff.api.types import Obj
from skiff.client import BY_NAMESPACE, NORMAL, WARNING, object_key
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.informers import BY_CONTROLLER_UID
from skiff.controller_manager.podutil import (
    available_in,
    is_available,
    is_running_and_ready,
)
from skiff.controller_manager.refmanager import (
    RefManager,
    claim_revisions,
    make_revision_newest,
    orphan_owner_keys,
)
from skiff.controller_manager.statefulset import revisions
from skiff.controller_manager.statefulset.plan import (
    Action,
    Verb,
    plan,
    pods_by_ordinal,
)
from skiff.controller_manager.workload import (
    owned_pods,
    owner_key,
    owner_reference,
    pod_from_template,
    write_status_if_changed,
)

log = logging.getLogger(__name__)

KIND = "StatefulSet"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def stateful_pod(sts: Obj, ordinal: int, *, template: Obj | None = None,
                 revision: str = "") -> Obj:
    """`newStatefulSetPod`: the pod for one identity of the set (from `template`, the
    revision's, when given)."""
    name = f"{sts['metadata']['name']}-{ordinal}"
    source = sts if template is None else {**sts, "spec": {**sts["spec"],
                                                           "template": template}}
    pod = pod_from_template(source)
    if revision:
        pod["metadata"]["labels"][revisions.REVISION_LABEL] = revision
    pod["metadata"]["name"] = name
    pod["metadata"]["labels"].update({POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal)})
    pod["spec"]["hostname"] = name
    if sts["spec"].get("serviceName"):
        pod["spec"]["subdomain"] = sts["spec"]["serviceName"]
    claims = {str(t["metadata"]["name"]): str(c["metadata"]["name"])
              for t, c in zip(claim_templates(sts), stateful_claims(sts, ordinal), strict=True)}
    volumes = [v for v in pod["spec"].get("volumes") or [] if v.get("name") not in claims]
    volumes += [{"name": template, "persistentVolumeClaim": {"claimName": claim}}
                for template, claim in claims.items()]
    if volumes:
        pod["spec"]["volumes"] = volumes
    return pod


def claim_templates(sts: Obj) -> list[Obj]:
    return [t for t in (sts.get("spec") or {}).get("volumeClaimTemplates") or []
            if isinstance(t, dict) and (t.get("metadata") or {}).get("name")]


def stateful_claims(sts: Obj, ordinal: int) -> list[Obj]:
    """`getPersistentVolumeClaims`: the claims `<template>-<set>-<ordinal>` of one identity,
    labelled with the set's selector labels. Owned by the set only when its
    `persistentVolumeClaimRetentionPolicy.whenDeleted` is Delete: under Retain (the default)
    the garbage collector must never delete a claim with the set."""
    retention = (sts.get("spec") or {}).get("persistentVolumeClaimRetentionPolicy") or {}
    owned = retention.get("whenDeleted") == "Delete"
    set_name = sts["metadata"]["name"]
    selector = ((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    claims = []
    for template in claim_templates(sts):
        tmeta = template["metadata"]
        claims.append({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": f"{tmeta['name']}-{set_name}-{ordinal}",
                         "namespace": sts["metadata"].get("namespace"),
                         "labels": {**(tmeta.get("labels") or {}), **selector},
                         **({"ownerReferences": [owner_reference(sts)]} if owned else {})},
            "spec": copy.deepcopy(template.get("spec") or {})})
    return claims


def _member_of(sts: Obj, pod: Obj) -> bool:
    """`isMemberOf`: the pod's name is `<set>-<ordinal>`."""
    parent, _, ordinal = str(pod["metadata"].get("name")).rpartition("-")
    return parent == sts["metadata"]["name"] and ordinal.isdigit()


class StatefulSetController(Controller):
    name = "statefulset"

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context,
                         workers=context.settings.concurrent_statefulset_syncs)
        self.sets = context.informers.stateful_sets()
        self.pods = context.informers.pods()
        self.claims = context.informers.persistent_volume_claims()
        self.revisions = context.informers.resource("controllerrevisions")
        self.recorder = context.recorder("statefulset-controller")
        self.sets.add_handler(on_add=self._on_set, on_update=lambda _o, n: self._on_set(n),
                              on_delete=self._on_set)
        self.pods.add_handler(on_add=self._on_pod, on_update=self._on_pod_update,
                              on_delete=self._on_pod)

    def _on_set(self, sts: Obj) -> None:
        self.enqueue(object_key(sts))

    def _on_pod(self, pod: Obj) -> None:
        key = owner_key(pod, KIND)
        if key is not None:
            self.enqueue(key)
            return
        for owner in orphan_owner_keys(self.sets, pod):
            self.enqueue(owner)

    def _on_pod_update(self, old: Obj, new: Obj) -> None:
        self._on_pod(old)
        self._on_pod(new)

    async def reconcile(self, key: str) -> float | None:
        sts = self.sets.store.get(key)
        if sts is None or is_terminating(sts):
            return None
        name = sts["metadata"]["name"]
        uid = str(sts["metadata"].get("uid"))
        owned = owned_pods(self.pods.store.by_index(BY_CONTROLLER_UID, uid), sts)
        refs = RefManager(self.client, sts, "pods", member=lambda p: _member_of(sts, p))
        orphans = await refs.orphans(self.pods.store.by_index(
            BY_NAMESPACE, str(sts["metadata"].get("namespace"))), self.sets)
        pods = await refs.claim(owned + orphans)
        spec = sts["spec"]
        decided = plan(replicas=int(spec.get("replicas", 1)),
                       policy=str(spec.get("podManagementPolicy") or "OrderedReady"),
                       pods=pods_by_ordinal(name, pods),
                       start=int((spec.get("ordinals") or {}).get("start") or 0),
                       min_ready_seconds=int(spec.get("minReadySeconds") or 0),
                       now=self.clock.now())
        if decided.waiting_for:
            log.debug("statefulset waiting", extra={"statefulset": key,
                                                    "for": decided.waiting_for})
        update, current = await self.sync_revisions(sts, pods)
        for action in decided.actions:
            await self.apply(sts, action, pods, update=update, current=current)
        if not decided.actions and not decided.waiting_for:
            victim = revisions.rolling_victim(sts, pods, update["metadata"]["name"])
            if victim is not None:
                ordinal = int(victim["metadata"]["name"].rsplit("-", 1)[1])
                await self.apply(sts, Action(Verb.DELETE, ordinal), pods)
        return await self.update_status(sts, pods, update=update, current=current)

    async def sync_revisions(self, sts: Obj, pods: list[Obj]) -> tuple[Obj, Obj]:
        """(update revision, current revision): the template's ControllerRevision (created
        when new, renumbered as the newest when the template went back to it, as
        `getStatefulSetRevisions` does) and the revision the pods had before, from
        `status.currentRevision`."""
        namespace = sts["metadata"].get("namespace")
        owned = await claim_revisions(self.client, sts, self.revisions)
        name = revisions.revision_name(sts)
        update = next((r for r in owned if r["metadata"]["name"] == name), None)
        if update is not None:  # back to an earlier template (rollout undo): newest again
            update = await make_revision_newest(self.client, update, owned)
        else:
            number = max((int(r.get("revision") or 0) for r in owned), default=0) + 1
            wanted = revisions.new_revision(sts, number)
            try:
                update = await self.client.create(wanted)
            except ApiError as err:
                if err.reason != Reason.ALREADY_EXISTS:
                    raise
                update = await self.client.get("controllerrevisions", name, namespace)
        current_name = (sts.get("status") or {}).get("currentRevision")
        current = next((r for r in owned if r["metadata"]["name"] == current_name), update)
        return update, current

    async def apply(self, sts: Obj, action: Action, pods: list[Obj], *,
                    update: Obj | None = None, current: Obj | None = None) -> None:
        set_name = sts["metadata"]["name"]
        pod_name = f"{set_name}-{action.ordinal}"
        if action.verb is Verb.CREATE:
            await self.create_claims(sts, action.ordinal)
            revision = update
            if current is not None and action.ordinal < revisions.partition_of(sts):
                revision = current  # below the partition identities keep the old template
            try:
                await self.client.create(stateful_pod(
                    sts, action.ordinal,
                    template=revisions.template_of(revision) if revision else None,
                    revision=revision["metadata"]["name"] if revision else ""))
            except ApiError as err:
                if err.reason == Reason.ALREADY_EXISTS:
                    return  # the old object is still there: at most one, so wait
                await self.recorder.event(sts, WARNING, "FailedCreate",
                                          f"create Pod {pod_name} in StatefulSet {set_name} "
                                          f"failed error: {err.message}")
                raise
            await self.recorder.event(sts, NORMAL, "SuccessfulCreate",
                                      f"create Pod {pod_name} in StatefulSet {set_name} "
                                      "successful")
            return
        pod = next(p for p in pods if p["metadata"]["name"] == pod_name)
        try:
            await self.client.delete("pods", pod_name, sts["metadata"].get("namespace"),
                                     uid=pod["metadata"].get("uid"))
        except ApiError as err:
            if err.reason in (Reason.NOT_FOUND, Reason.CONFLICT):
                return
            await self.recorder.event(sts, WARNING, "FailedDelete",
                                      f"delete Pod {pod_name} in StatefulSet {set_name} "
                                      f"failed error: {err.message}")
            raise
        await self.recorder.event(sts, NORMAL, "SuccessfulDelete",
                                  f"delete Pod {pod_name} in StatefulSet {set_name} "
                                  "successful")

    async def create_claims(self, sts: Obj, ordinal: int) -> None:
        """`createPersistentVolumeClaims`: the identity's claims, unless they exist."""
        set_name = sts["metadata"]["name"]
        for claim in stateful_claims(sts, ordinal):
            claim_name = claim["metadata"]["name"]
            if self.claims.store.get(f"{claim['metadata']['namespace']}/{claim_name}"):
                continue
            try:
                await self.client.create(claim)
            except ApiError as err:
                if err.reason == Reason.ALREADY_EXISTS:
                    continue  # kept from an earlier pod of this identity (Retain)
                await self.recorder.event(sts, WARNING, "FailedCreate",
                                          f"create Claim {claim_name} for Pod "
                                          f"{set_name}-{ordinal} in StatefulSet {set_name} "
                                          f"failed error: {err.message}")
                raise
            await self.recorder.event(sts, NORMAL, "SuccessfulCreate",
                                      f"create Claim {claim_name} for Pod {set_name}-{ordinal} "
                                      f"in StatefulSet {set_name} success")

    async def update_status(self, sts: Obj, pods: list[Obj], *, update: Obj,
                            current: Obj) -> float | None:
        """Write the status; returns when to look again for a ready pod that becomes
        available (`minReadySeconds`)."""
        update_name, current_name = update["metadata"]["name"], current["metadata"]["name"]
        ready = [p for p in pods if is_running_and_ready(p)]
        alive = [p for p in pods if not is_terminating(p)]
        min_ready = int(sts["spec"].get("minReadySeconds") or 0)
        now = self.clock.now()
        status: Obj = {
            "replicas": len(pods),
            "readyReplicas": len(ready),
            "availableReplicas": sum(1 for p in ready if is_available(
                p, min_ready_seconds=min_ready, now=now)),
            "currentReplicas": sum(1 for p in alive
                                   if revisions.pod_revision(p) == current_name),
            "updatedReplicas": sum(1 for p in alive
                                   if revisions.pod_revision(p) == update_name),
            "observedGeneration": int(sts["metadata"].get("generation") or 1),
            "updateRevision": update_name,
            "currentRevision": current_name,
        }
        replicas = int(sts["spec"].get("replicas", 1))
        if status["updatedReplicas"] >= replicas and len(alive) == replicas:
            status["currentRevision"] = update_name  # the update is complete
            status["currentReplicas"] = status["updatedReplicas"]
        await write_status_if_changed(self.client, sts, status)
        return available_in(ready, min_ready_seconds=min_ready, now=now)
