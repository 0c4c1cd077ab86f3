"""The controller recipe: keys → workqueue → reconcile, rate-limited retries, requeue-after,
and a drain of in-flight work on stop — on a fake clock."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from skiff.client.fake import FakeClient
from skiff.clock import FakeClock
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.informers import SharedInformers
from skiff.controller_manager.registry import select_controllers
from skiff.controller_manager.settings import ControllerManagerSettings, parse_settings
from skiff.settings import SettingsError, camel_to_field, flag_name


class Recording(Controller):
    name = "recording"

    def __init__(self, *, context: ControllerContext, fail_first: int = 0,
                 requeue_after: float | None = None) -> None:
        super().__init__(context=context, workers=2)
        self.calls: list[str] = []
        self.fail_first = fail_first
        self.requeue_after = requeue_after
        self.release = asyncio.Event()
        self.release.set()

    async def reconcile(self, key: str) -> float | None:
        self.calls.append(key)
        await self.release.wait()
        if len(self.calls) <= self.fail_first:
            raise RuntimeError("boom")
        return self.requeue_after


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def context(clock: FakeClock) -> ControllerContext:
    client = FakeClient()
    return ControllerContext(client=client, informers=SharedInformers(client),
                             settings=ControllerManagerSettings(), clock=clock)


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_failed_reconcile_is_retried_with_backoff(clock: FakeClock,
                                                        context: ControllerContext) -> None:
    controller = Recording(context=context, fail_first=2)
    task = asyncio.create_task(controller.run())
    controller.enqueue("ns/a")
    await _settle()
    assert controller.calls == ["ns/a"]
    clock.advance(0.005)  # first retry after 5 ms
    await _settle()
    assert controller.calls == ["ns/a"] * 2
    clock.advance(0.005)  # the second waits 10 ms
    await _settle()
    assert controller.calls == ["ns/a"] * 2
    clock.advance(0.005)
    await _settle()
    assert controller.calls == ["ns/a"] * 3
    assert controller.queue.num_requeues("ns/a") == 0  # success forgets the failures
    await _stop(task)


async def test_reconcile_can_ask_to_be_called_again_later(clock: FakeClock,
                                                          context: ControllerContext) -> None:
    controller = Recording(context=context, requeue_after=30)
    task = asyncio.create_task(controller.run())
    controller.enqueue("ns/a")
    await _settle()
    clock.advance(29)
    await _settle()
    assert controller.calls == ["ns/a"]
    clock.advance(1)
    await _settle()
    assert controller.calls == ["ns/a"] * 2
    await _stop(task)


async def test_stopping_lets_an_in_flight_reconcile_finish(context: ControllerContext) -> None:
    controller = Recording(context=context)
    controller.release.clear()
    task = asyncio.create_task(controller.run())
    controller.enqueue("ns/a")
    await _settle()
    task.cancel()
    await _settle()
    assert not task.done()  # draining: the reconcile is still running
    controller.release.set()
    await asyncio.gather(task, return_exceptions=True)
    assert controller.calls == ["ns/a"] and task.done()


@pytest.mark.parametrize(("flag", "names"), [
    pytest.param("*", ["podgc", "nodelifecycle", "replicaset", "replicationcontroller",
                       "deployment", "garbagecollector",
                       "endpoint", "endpointslice", "daemonset", "job", "cronjob", "namespace",
                       "statefulset",
                       "disruption", "fencing", "attachdetach", "nodeipam",
                       "persistentvolume-binder", "serviceaccount", "resourcequota",
                       "root-ca-cert-publisher", "horizontalpodautoscaling",
                       "csrsigning", "csrapproving", "csrcleaner"],
                 id="all"),
    pytest.param("podgc", ["podgc"], id="one"),
    pytest.param("*,-statefulset", ["podgc", "nodelifecycle", "replicaset",
                                    "replicationcontroller", "deployment",
                                    "garbagecollector", "endpoint", "endpointslice", "daemonset",
                                    "job", "cronjob", "namespace", "disruption", "fencing",
                                    "attachdetach", "nodeipam", "persistentvolume-binder",
                                    "serviceaccount", "resourcequota",
                                    "root-ca-cert-publisher", "horizontalpodautoscaling",
                                    "csrsigning", "csrapproving", "csrcleaner"],
                 id="all-but-one"),
])
def test_controllers_flag(flag: str, names: list[str]) -> None:
    settings = parse_settings(["--controllers", flag])
    assert [s.name for s in select_controllers(settings.controllers)] == names


def test_unknown_controller_is_refused_with_the_known_names() -> None:
    with pytest.raises(SettingsError, match="unknown controller.*known: podgc"):
        select_controllers(("podgcc",))


def test_kubernetes_defaults_and_flag_names() -> None:
    defaults = parse_settings([])
    assert (defaults.node_monitor_period, defaults.node_monitor_grace_period,
            defaults.terminated_pod_gc_threshold, defaults.pod_gc_period,
            defaults.pod_gc_quarantine_time, defaults.leader_elect,
            defaults.leader_elect_lease_duration, defaults.leader_elect_renew_deadline,
            defaults.leader_elect_retry_period) == (5, 50, 12500, 20, 40, True, 15, 10, 2)
    fast = parse_settings(["--node-monitor-grace-period", "4s", "--leader-elect", "false",
                           "--concurrent-replicaset-syncs", "2"])
    assert (fast.node_monitor_grace_period, fast.leader_elect,
            fast.concurrent_replicaset_syncs) == (4, False, 2)


@pytest.mark.parametrize(("key", "flag"), [
    pytest.param("terminatedPodGCThreshold", "--terminated-pod-gc-threshold", id="gc-acronym"),
    pytest.param("podGCPeriod", "--pod-gc-period", id="pod-gc-period"),
    pytest.param("podGCQuarantineTime", "--pod-gc-quarantine-time", id="quarantine"),
    pytest.param("nodeMonitorGracePeriod", "--node-monitor-grace-period", id="plain"),
    pytest.param("leaderElectLeaseDuration", "--leader-elect-lease-duration", id="leader"),
])
def test_config_keys_map_to_flags(key: str, flag: str) -> None:
    """`skiff up --config`'s `controllerManager:` keys are the component-config names."""
    field = camel_to_field(key)
    assert flag_name(field) == flag
    assert field in {f.name for f in dataclasses.fields(ControllerManagerSettings)}
