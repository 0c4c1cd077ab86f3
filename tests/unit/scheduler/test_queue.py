"""SPEC PP3 and LC9: the scheduling queue's order, backoff, event-driven retries and
scheduling gates, on a fake clock."""

from __future__ import annotations

import pytest

from skiff.api.testing import make_pod
from skiff.clock import FakeClock
from skiff.scheduler.framework import ClusterEvent
from skiff.scheduler.podinfo import PodInfo
from skiff.scheduler.queue import QueuedPodInfo, SchedulingQueue


def _pod(name: str, priority: int = 0, *, gates: tuple[str, ...] = ()) -> PodInfo:
    builder = make_pod(name).uid(name).priority(priority)
    for gate in gates:
        builder.scheduling_gate(gate)
    return PodInfo.from_pod(builder.obj())


def _events(qpi: QueuedPodInfo) -> frozenset[ClusterEvent]:
    if "NodeResourcesFit" in qpi.unschedulable_plugins:
        return frozenset({ClusterEvent.ASSIGNED_POD_DELETE, ClusterEvent.NODE_ADD})
    return frozenset({ClusterEvent.NODE_ADD})


def _queue(clock: FakeClock) -> SchedulingQueue:
    return SchedulingQueue(initial_backoff=1.0, max_backoff=10.0, clock=clock,
                           events_for=_events)


async def _fail(q: SchedulingQueue, plugins: set[str]) -> QueuedPodInfo:
    qpi = await q.pop()
    assert qpi is not None
    qpi.unschedulable_plugins = plugins
    q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle)
    return qpi


async def test_pp3_pops_higher_priority_first_then_older() -> None:
    clock = FakeClock()
    q = _queue(clock)
    for name, prio in (("old-low", 0), ("old-high", 10)):
        q.add(_pod(name, prio))
    clock.advance(1)
    q.add(_pod("new-high", 10))
    q.add(_pod("new-top", 1000))
    order = []
    for _ in range(4):
        qpi = await q.pop()
        assert qpi is not None
        order.append(qpi.key)
    assert order == ["default/new-top", "default/old-high", "default/new-high",
                     "default/old-low"]


@pytest.mark.parametrize(("attempts", "backoff"), [
    pytest.param(1, 1.0, id="first-1s"), pytest.param(2, 2.0, id="doubles"),
    pytest.param(4, 8.0, id="8s"), pytest.param(5, 10.0, id="capped-at-10s"),
    pytest.param(9, 10.0, id="stays-capped"),
])
def test_pp3_backoff_doubles_to_the_maximum(attempts: int, backoff: float) -> None:
    q = _queue(FakeClock())
    qpi = QueuedPodInfo(_pod("p"), 0.0, attempts=attempts)
    assert q.backoff_duration(qpi) == backoff


async def test_pp3_failed_pod_waits_in_backoff_when_the_cluster_changed_meanwhile() -> None:
    clock = FakeClock()
    q = _queue(clock)
    q.add(_pod("p"))
    qpi = await q.pop()
    assert qpi is not None
    q.move_all_to_active_or_backoff(ClusterEvent.NODE_ADD)  # during the attempt
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle)
    assert q.backoff_keys() == ["default/p"]
    clock.advance(0.5)
    assert q.flush_backoff_completed() == 0
    clock.advance(0.6)
    assert q.flush_backoff_completed() == 1
    assert q.active_keys() == ["default/p"]


async def test_pp3_unschedulable_pods_retry_only_on_relevant_events() -> None:
    clock = FakeClock()
    q = _queue(clock)
    q.add(_pod("p"))
    await _fail(q, {"NodeAffinity"})
    assert q.unschedulable_keys() == ["default/p"]
    clock.advance(5)
    q.move_all_to_active_or_backoff(ClusterEvent.ASSIGNED_POD_DELETE)  # cannot help
    assert q.unschedulable_keys() == ["default/p"]
    q.move_all_to_active_or_backoff(ClusterEvent.NODE_ADD)
    assert q.active_keys() == ["default/p"]


async def test_pp3_event_during_backoff_goes_to_backoff_queue() -> None:
    clock = FakeClock()
    q = _queue(clock)
    q.add(_pod("p"))
    await _fail(q, {"NodeResourcesFit"})
    q.move_all_to_active_or_backoff(ClusterEvent.ASSIGNED_POD_DELETE)
    assert q.backoff_keys() == ["default/p"]


async def test_pp3_leftover_unschedulable_pods_are_retried_after_the_maximum_wait() -> None:
    clock = FakeClock()
    q = SchedulingQueue(clock=clock, max_in_unschedulable=300, events_for=_events)
    q.add(_pod("p"))
    await _fail(q, {"NodeAffinity"})
    clock.advance(299)
    assert q.flush_unschedulable_leftover() == 0
    clock.advance(2)
    assert q.flush_unschedulable_leftover() == 1


async def test_pp3_status_only_updates_do_not_requeue() -> None:
    clock = FakeClock()
    q = _queue(clock)
    q.add(_pod("p"))
    qpi = await _fail(q, {"NodeAffinity"})
    new = make_pod("p").uid("p").priority(0).condition("PodScheduled", "False").obj()
    q.update(qpi.pod.pod, PodInfo.from_pod(new))
    assert q.unschedulable_keys() == ["default/p"]
    relabelled = make_pod("p").uid("p").priority(0).label("x", "y").obj()
    q.update(new, PodInfo.from_pod(relabelled))
    assert q.unschedulable_keys() == [] and q.backoff_keys() == ["default/p"]


async def test_lc9_gated_pod_is_held_until_its_gates_are_removed() -> None:
    clock = FakeClock()
    q = _queue(clock)
    gated = _pod("p", gates=("example.com/wait",))
    q.add(gated)
    assert q.gated_keys() == ["default/p"] and q.active_keys() == []
    q.move_all_to_active_or_backoff(ClusterEvent.NODE_ADD)
    assert q.gated_keys() == ["default/p"]
    clock.advance(400)
    assert q.flush_unschedulable_leftover() == 0
    q.update(gated.pod, _pod("p"))
    assert q.gated_keys() == [] and q.active_keys() == ["default/p"]


async def test_deleted_pods_leave_the_queue_and_their_nomination() -> None:
    q = _queue(FakeClock())
    pod = PodInfo.from_pod(make_pod("p").uid("p").nominated_node_name("n1").obj())
    q.add(pod)
    assert [p.key for p in q.nominator.nominated_pods_for_node("n1")] == ["default/p"]
    q.delete("default/p")
    assert len(q) == 0 and q.nominator.nominated_pods_for_node("n1") == []


async def test_pop_waits_for_a_pod_and_close_releases_it() -> None:
    q = _queue(FakeClock())
    import asyncio
    waiter = asyncio.create_task(q.pop())
    await asyncio.sleep(0)
    assert not waiter.done()
    q.add(_pod("p"))
    got = await waiter
    assert got is not None and got.key == "default/p"
    closing = asyncio.create_task(q.pop())
    await asyncio.sleep(0)
    q.close()
    assert await closing is None


def _as(pod: dict[str, object], **meta: object) -> dict[str, object]:
    out = dict(pod)
    out["metadata"] = {**pod["metadata"], **meta}  # type: ignore[dict-item]
    return out


@pytest.mark.parametrize(("change", "requeued"), [
    pytest.param({"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                       "name": "rs", "uid": "u", "controller": True}]},
                 True, id="owner-reference-added"),
    pytest.param({"deletionGracePeriodSeconds": 30}, True, id="other-metadata"),
    pytest.param({"resourceVersion": "99", "generation": 3}, False, id="bookkeeping"),
    pytest.param({"managedFields": [{"manager": "kubectl"}]}, False, id="managedFields"),
    pytest.param({"finalizers": ["example.com/hold"]}, False, id="finalizers"),
])
async def test_pp3_pod_updated_compares_all_but_status_and_bookkeeping(
        change: dict[str, object], requeued: bool) -> None:
    """Kubernetes' isPodUpdated: everything but status, resourceVersion, generation,
    managedFields and finalizers counts as an update that retries an unschedulable pod."""
    clock = FakeClock()
    q = _queue(clock)
    q.add(_pod("p"))
    qpi = await _fail(q, {"NodeAffinity"})
    old = qpi.pod.pod
    q.update(old, PodInfo.from_pod(_as(dict(old), **change)))
    assert (q.unschedulable_keys() == []) is requeued
