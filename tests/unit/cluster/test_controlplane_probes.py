"""The control-plane agent's probes (skiff.cluster.controlplane.probes) against a real gRPC
health service on loopback, with a fake clock: an apiserver's readiness at every sync, the
other components every probe period once healthy, a restarted process probed again at once,
a stopped one not ready without a probe, and one connection per process."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from skiff.cluster.config import ClusterConfig
from skiff.cluster.controlplane.agent import parse_settings
from skiff.cluster.controlplane.mirror import StaticPod
from skiff.cluster.controlplane.probes import Probes
from skiff.cluster.state import Component

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class CountingHealth(health.aio.HealthServicer):  # type: ignore[misc]  # grpc has no types
    """grpc.health.v1 that counts its Checks and the connections they came on."""

    def __init__(self) -> None:
        super().__init__()
        self.checks = 0
        self.peers: set[str] = set()

    async def Check(self, request: health_pb2.HealthCheckRequest,  # noqa: N802 (gRPC's name)
                    context: grpc.aio.ServicerContext) -> health_pb2.HealthCheckResponse:
        self.checks += 1
        self.peers.add(context.peer())
        return await super().Check(request, context)


@dataclass
class Served:
    health: CountingHealth
    target: str


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    server = grpc.aio.server()
    servicer = CountingHealth()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    await servicer.set("", SERVING)
    try:
        yield Served(servicer, f"127.0.0.1:{port}")
    finally:
        await server.stop(None)


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def _component(name: str, target: str, pid: int = 0) -> Component:
    # argv empty: the process is trusted by PID (this test's own)
    return Component(name, pid or os.getpid(), target, target, "")


APISERVER = StaticPod("apiserver", "kube-apiserver", "control-plane")
SCHEDULER = StaticPod("scheduler", "kube-scheduler", "control-plane")


async def test_defect10_an_apiservers_readiness_is_probed_at_every_sync(served: Served) -> None:
    probes = Probes(period=10.0, clock=Clock())
    comp = _component("apiserver", served.target)
    assert await probes.ready(APISERVER, comp)
    await served.health.set("", NOT_SERVING)  # it cannot confirm etcd's quorum
    assert not await probes.ready(APISERVER, comp)
    assert served.health.checks == 2
    await probes.close()


async def test_defect10_a_live_scheduler_is_probed_again_only_after_the_probe_period(
        served: Served) -> None:
    clock = Clock()
    probes = Probes(period=10.0, clock=clock)
    comp = _component("scheduler", served.target)
    assert await probes.ready(SCHEDULER, comp)
    await served.health.set("", NOT_SERVING)
    clock.now += 9.0
    assert await probes.ready(SCHEDULER, comp)  # its liveness probe is not due yet
    assert served.health.checks == 1
    clock.now += 1.0
    assert not await probes.ready(SCHEDULER, comp)
    clock.now += 0.5
    assert not await probes.ready(SCHEDULER, comp)  # not healthy: probed at every sync
    await served.health.set("", SERVING)
    assert await probes.ready(SCHEDULER, comp)
    assert served.health.checks == 4
    await probes.close()


async def test_defect10_a_restarted_component_is_probed_at_once_on_a_new_connection(
        served: Served) -> None:
    probes = Probes(period=10.0, clock=Clock())
    assert await probes.ready(SCHEDULER, _component("scheduler", served.target))
    assert await probes.ready(SCHEDULER, _component("scheduler", served.target))
    assert served.health.checks == 1
    restarted = _component("scheduler", served.target, pid=os.getppid())
    assert await probes.ready(SCHEDULER, restarted)
    assert served.health.checks == 2
    assert len(served.health.peers) == 2  # the old process's channel was closed
    await probes.close()


async def test_defect10_probes_of_a_running_apiserver_share_one_connection(
        served: Served) -> None:
    probes = Probes(period=10.0, clock=Clock())
    comp = _component("apiserver", served.target)
    for _ in range(5):
        assert await probes.ready(APISERVER, comp)
    assert served.health.checks == 5
    assert len(served.health.peers) == 1
    await probes.close()


async def test_defect10_a_stopped_component_is_not_ready_without_a_probe(
        served: Served) -> None:
    probes = Probes(period=10.0, clock=Clock())
    gone = _component("scheduler", served.target, pid=2**22 + 1)  # above pid_max: no process
    assert not await probes.ready(SCHEDULER, gone)
    assert served.health.checks == 0
    await probes.close()


def test_defect10_the_agents_periods_take_kubernetes_durations_from_up_config(
        tmp_path: Path) -> None:
    """`controlPlane:` in `skiff up --config` as Kubernetes writes periods (`10s`, `500ms`),
    through the flags `skiff up` passes, to the agent's settings."""
    config = tmp_path / "cluster.yaml"
    config.write_text("controlPlane: {syncPeriod: 500ms, probePeriod: 20s, "
                      "nodeStatusUpdateFrequency: 1m}\n")
    flags = ClusterConfig.load(config).flags("controlPlane", tmp_path / "config")
    settings, _ = parse_settings(["--apiserver", "127.0.0.1:6443", "--health-port", "1",
                                  "--data-dir", str(tmp_path), *flags])
    assert (settings.sync_period, settings.probe_period,
            settings.node_status_update_frequency) == (0.5, 20.0, 60.0)


def test_defect10_a_period_that_is_no_duration_names_its_flag(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_settings(["--apiserver", "127.0.0.1:6443", "--health-port", "1",
                        "--data-dir", str(tmp_path), "--probe-period", "often"])
    assert "argument --probe-period: 'often' is not a duration" in capsys.readouterr().err


@pytest.mark.parametrize("period", ["0", "0s", "-1"])
def test_defect10_a_period_of_zero_or_less_is_refused_not_spun_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], period: str) -> None:
    with pytest.raises(SystemExit):
        parse_settings(["--apiserver", "127.0.0.1:6443", "--health-port", "1",
                        "--data-dir", str(tmp_path), f"--sync-period={period}"])
    assert f"argument --sync-period: '{period}' is not a period" in capsys.readouterr().err
