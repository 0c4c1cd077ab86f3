"""InterPodAffinity's queueing hint (Kubernetes' isSchedulableAfterPodChange): a pod it
rejected is retried when an assigned pod that matches its affinity arrives or is
relabelled into a match, or one that its anti-affinity (or whose own anti-affinity)
kept it away leaves; unrelated pod changes leave it waiting."""

from __future__ import annotations

import pytest

from skiff.api.testing import make_node, make_pod
from skiff.api.types import Obj
from skiff.clock import FakeClock
from skiff.scheduler.framework import ClusterEvent
from skiff.scheduler.podinfo import PodInfo
from skiff.scheduler.queue import QueuedPodInfo, SchedulingQueue
from tests.unit.scheduler.helpers import affinity_pod, make_env

DB = {"matchLabels": {"app": "db"}}
ADD, UPDATE, DELETE = (ClusterEvent.ASSIGNED_POD_ADD, ClusterEvent.ASSIGNED_POD_UPDATE,
                       ClusterEvent.ASSIGNED_POD_DELETE)


def _assigned(labels: dict[str, str], *, node: str = "n1", anti: bool = False) -> PodInfo:
    builder = affinity_pod("other").labels(labels)
    if node:
        builder.node(node)
    if anti:
        builder.pod_anti_affinity("zone", {"matchLabels": {"app": "web"}})
    return PodInfo.from_pod(builder.obj())


WANTS_DB = affinity_pod("web").label("app", "web").pod_affinity("zone", DB).obj()
AVOIDS_DB = affinity_pod("web").label("app", "web").pod_anti_affinity("zone", DB).obj()
PLAIN = make_pod("web").label("app", "web").obj()


@pytest.mark.parametrize(("pod", "event", "old", "new", "retried"), [
    pytest.param(WANTS_DB, ADD, None, _assigned({"app": "db"}), True, id="matching-pod-added"),
    pytest.param(WANTS_DB, ADD, None, _assigned({"app": "cache"}), False,
                 id="unrelated-pod-added"),
    pytest.param(WANTS_DB, ADD, None, _assigned({"app": "db"}, node=""), False,
                 id="unassigned-pod"),
    pytest.param(WANTS_DB, UPDATE, _assigned({"app": "cache"}), _assigned({"app": "db"}),
                 True, id="relabelled-into-a-match"),
    pytest.param(WANTS_DB, UPDATE, _assigned({"app": "db"}), _assigned({"app": "db", "x": "y"}),
                 False, id="still-matching-relabel-changes-nothing"),
    pytest.param(AVOIDS_DB, DELETE, _assigned({"app": "db"}), None, True,
                 id="repelling-pod-deleted"),
    pytest.param(AVOIDS_DB, DELETE, _assigned({"app": "cache"}), None, False,
                 id="unrelated-pod-deleted"),
    pytest.param(AVOIDS_DB, UPDATE, _assigned({"app": "db"}), _assigned({"app": "cache"}),
                 True, id="relabelled-out-of-the-anti-affinity"),
    pytest.param(PLAIN, DELETE, _assigned({"app": "x"}, anti=True), None, True,
                 id="pod-with-anti-affinity-deleted-symmetry"),
    pytest.param(PLAIN, ClusterEvent.NODE_ADD, None, None, True, id="node-added"),
])
async def test_inter_pod_affinity_queueing_hint(pod: Obj, event: ClusterEvent,
                                                old: PodInfo | None, new: PodInfo | None,
                                                retried: bool) -> None:
    env = make_env([make_node("n1").label("zone", "a").obj()])
    queue = SchedulingQueue(
        clock=FakeClock(),
        hint=lambda qpi, ev, o, n: env.fwk.worth_retrying(qpi.unschedulable_plugins, ev,
                                                          qpi.pod, o, n))
    queue.add(PodInfo.from_pod(pod))
    qpi = await queue.pop()
    assert isinstance(qpi, QueuedPodInfo)
    qpi.unschedulable_plugins = {"InterPodAffinity"}
    queue.add_unschedulable_if_not_present(qpi, queue.scheduling_cycle)
    assert queue.unschedulable_keys() == ["default/web"]
    queue.move_all_to_active_or_backoff(event, old=old, new=new)
    assert (queue.unschedulable_keys() == []) is retried
