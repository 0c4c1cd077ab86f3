"""The DaemonSet controller (pkg/controller/daemon): one daemon pod per eligible node.

Reconcile maps the set's pods to nodes; creates the missing pod of each eligible node,
deletes pods of nodes that are no longer eligible, duplicates and failed pods (which are
then replaced), and rolls a template change node by node (`RollingUpdate`: an old pod is
deleted only while fewer than `maxUnavailable` daemon pods are unavailable; `OnDelete`:
only pods the user deletes are replaced). Orphan pods matching the selector are
adopted, owned pods that stop matching are released (`RefManager`). The daemon
tolerations (see `plan`) keep a pod on a node that goes not-ready or unreachable.
"""

from __future__ import annotations

import logging

from skiff.api import ApiError, Reason, is_pod_terminal, is_terminating
from skiff.api.types import Obj
from skiff.client import BY_NAMESPACE, object_key
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.daemonset import plan
from skiff.controller_manager.informers import BY_CONTROLLER_UID
from skiff.controller_manager.podcontrol import PodControl
from skiff.controller_manager.podutil import is_available, is_pod_ready
from skiff.controller_manager.refmanager import (
    RefManager,
    claim_revisions,
    make_revision_newest,
)
from skiff.controller_manager.workload import (
    owned_pods,
    owner_reference,
    pod_from_template,
    write_status_if_changed,
)

log = logging.getLogger(__name__)

KIND = "DaemonSet"


def _max_unavailable(ds: Obj, desired: int) -> int:
    rolling = ((ds["spec"].get("updateStrategy") or {}).get("rollingUpdate") or {})
    value = rolling.get("maxUnavailable", 1)
    if isinstance(value, str) and value.endswith("%"):
        return max(1, int(value[:-1]) * desired // 100)
    return max(1, int(value or 1))


class DaemonSetController(Controller):
    name = "daemonset"

    def __init__(self, *, context: ControllerContext) -> None:
        super().__init__(context=context, workers=2)
        self.sets = context.informers.resource("daemonsets")
        self.nodes = context.informers.nodes()
        self.pods = context.informers.pods()
        self.revisions = context.informers.resource("controllerrevisions")
        self.recorder = context.recorder("daemonset-controller")
        self.pod_control = PodControl(self, kind=KIND, recorder=self.recorder,
                                      pods=self.pods, owners=self.sets)
        self.expectations = self.pod_control.expectations
        self.sets.add_handler(on_add=self._on_set, on_update=lambda _o, n: self._on_set(n),
                              on_delete=self._on_set)
        self.nodes.add_handler(on_add=self._on_node, on_update=lambda _o, n: self._on_node(n),
                               on_delete=self._on_node)

    def _on_set(self, ds: Obj) -> None:
        self.enqueue(object_key(ds))

    def _on_node(self, _node: Obj) -> None:
        for ds in self.sets.store.list():
            self.enqueue(object_key(ds))

    async def reconcile(self, key: str) -> float | None:
        ds = self.sets.store.get(key)
        if ds is None:
            self.expectations.forget(key)
            return None
        uid = str(ds["metadata"].get("uid"))
        owned = owned_pods(self.pods.store.by_index(BY_CONTROLLER_UID, uid), ds)
        refs = RefManager(self.client, ds, "pods")
        orphans = await refs.orphans(self.pods.store.by_index(
            BY_NAMESPACE, str(ds["metadata"].get("namespace"))), self.sets)
        pods = await refs.claim(owned + orphans)
        template = ds["spec"].get("template") or {}
        pod_hash = plan.template_hash(template)
        nodes = {n["metadata"]["name"]: n for n in self.nodes.store.list()}
        eligible = {name for name, n in nodes.items()
                    if plan.node_eligible(template.get("spec") or {}, n)}
        keep = {name for name, n in nodes.items()
                if plan.node_eligible(template.get("spec") or {}, n, running=True)}
        by_node: dict[str, list[Obj]] = {}
        for pod in pods:
            if not is_terminating(pod):
                by_node.setdefault(plan.node_of(pod) or "", []).append(pod)
        if not is_terminating(ds):
            await self.ensure_revision(ds, pod_hash)
        if self.expectations.satisfied(key) and not is_terminating(ds):
            await self.manage(ds, key, eligible, keep, by_node, pod_hash)
        return await self.update_status(ds, eligible, by_node, pod_hash)

    async def manage(self, ds: Obj, key: str, eligible: set[str], keep: set[str],
                     by_node: dict[str, list[Obj]], pod_hash: str) -> None:
        create: list[str] = []
        delete: list[Obj] = []
        for node in sorted(eligible | (keep & set(by_node))):
            pods = by_node.get(node, [])
            failed = [p for p in pods if is_pod_terminal(p)]
            delete += failed
            alive = [p for p in pods if not is_pod_terminal(p)]
            if not alive and not failed and node in eligible:
                create.append(node)
            delete += sorted(alive, key=lambda p: p["metadata"].get("creationTimestamp", ""))[1:]
        for node, pods in by_node.items():
            if node not in keep:
                delete += pods
        if (ds["spec"].get("updateStrategy") or {}).get("type", "RollingUpdate") == \
                "RollingUpdate" and not create and not delete:
            delete += self._rolling_victims(ds, eligible, by_node, pod_hash)
        await self.pod_control.create(ds, key, [self._pod(ds, node, pod_hash)
                                                for node in create])
        await self.pod_control.delete(ds, key, delete)

    async def ensure_revision(self, ds: Obj, pod_hash: str) -> None:
        """The template's ControllerRevision `<set>-<hash>` (what `kubectl rollout
        history|undo daemonset` read), numbered after the set's earlier ones. A template
        that went back to an earlier revision (`rollout undo`) makes that revision the
        newest again, as `constructHistory` does."""
        name = f"{ds['metadata']['name']}-{pod_hash}"
        namespace = ds["metadata"].get("namespace")
        owned = await claim_revisions(self.client, ds, self.revisions)
        existing = next((r for r in owned if r["metadata"]["name"] == name), None)
        if existing is not None:
            await make_revision_newest(self.client, existing, owned)
            return
        if self.revisions.store.get(f"{namespace}/{name}") is not None:
            return
        selector = (ds["spec"].get("selector") or {}).get("matchLabels") or {}
        revision = {
            "apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {**selector, plan.REVISION_HASH_LABEL: pod_hash},
                         "ownerReferences": [owner_reference(ds)]},
            "data": {"spec": {"template": {**(ds["spec"].get("template") or {}),
                                           "$patch": "replace"}}},
            "revision": max((int(r.get("revision") or 0) for r in owned), default=0) + 1}
        try:
            await self.client.create(revision)
        except ApiError as err:
            if err.reason != Reason.ALREADY_EXISTS:
                raise

    def _rolling_victims(self, ds: Obj, eligible: set[str], by_node: dict[str, list[Obj]],
                         pod_hash: str) -> list[Obj]:
        now = self.clock.now()
        min_ready = int(ds["spec"].get("minReadySeconds") or 0)
        pods = [p for n in eligible for p in by_node.get(n, [])]
        unavailable = sum(1 for p in pods if not is_available(
            p, min_ready_seconds=min_ready, now=now)) + sum(
            1 for n in eligible if not by_node.get(n))
        budget = _max_unavailable(ds, len(eligible)) - unavailable
        old = sorted((p for p in pods if (p["metadata"].get("labels") or {}).get(
            plan.REVISION_HASH_LABEL) != pod_hash),
            key=lambda p: (is_pod_ready(p), p["metadata"]["name"]))
        return old[:max(budget, 0)]

    def _pod(self, ds: Obj, node: str, pod_hash: str) -> Obj:
        owner = {**ds, "spec": {**ds["spec"], "template": plan.daemon_pod_template(
            ds, node, pod_hash)}}
        pod = pod_from_template(owner)
        pod["metadata"]["generateName"] = f"{ds['metadata']['name']}-"
        return pod

    async def update_status(self, ds: Obj, eligible: set[str],
                            by_node: dict[str, list[Obj]], pod_hash: str) -> float | None:
        now = self.clock.now()
        min_ready = int(ds["spec"].get("minReadySeconds") or 0)
        scheduled = [n for n in eligible if by_node.get(n)]
        pods = [by_node[n][0] for n in scheduled]
        ready = [p for p in pods if is_pod_ready(p)]
        available = [p for p in ready if is_available(p, min_ready_seconds=min_ready, now=now)]
        status: Obj = {
            "desiredNumberScheduled": len(eligible),
            "currentNumberScheduled": len(scheduled),
            "numberMisscheduled": sum(1 for n, ps in by_node.items() if n not in eligible
                                      and ps),
            "numberReady": len(ready),
            "numberAvailable": len(available),
            "numberUnavailable": len(eligible) - len(available),
            "updatedNumberScheduled": sum(1 for p in pods if (p["metadata"].get(
                "labels") or {}).get(plan.REVISION_HASH_LABEL) == pod_hash),
            "observedGeneration": int(ds["metadata"].get("generation") or 1),
        }
        await write_status_if_changed(self.client, ds, status)
        return 1.0 if len(available) < len(ready) else None
