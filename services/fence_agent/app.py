"""Wiring of the fence-agent process: settings → API client, agents per mode, controller."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from pathlib import Path

from skiff.client import ApiClient, Client, EventRecorder
from skiff.clock import REAL_CLOCK
from skiff.fence_agent.agent import FenceAgent, FenceError
from skiff.fence_agent.controller import FenceController
from skiff.fence_agent.docker import DockerEngine, resolve_docker_host
from skiff.fence_agent.network import DockerNetworkAgent, local_network_agent
from skiff.fence_agent.power import DockerPowerAgent, LocalPowerAgent
from skiff.fence_agent.settings import FenceAgentSettings, parse_settings
from skiff.fence_agent.storage import StorageAgent
from skiff.service import Service, run_service
from skiff.settings import SettingsError

__all__ = ["build_agents", "check_engine", "main", "run_fence_agent"]

log = logging.getLogger(__name__)


def build_agents(settings: FenceAgentSettings, api: Client) -> dict[str, FenceAgent]:
    """The agents of this mode, by the names `spec.agent` uses."""
    storage = StorageAgent(api=api, confirm_timeout=settings.confirm_timeout)
    if settings.mode == "docker":
        docker = DockerEngine(project=settings.compose_project,
                              host=resolve_docker_host(settings.docker_host))
        return {"power": DockerPowerAgent(docker=docker,
                                          confirm_timeout=settings.confirm_timeout),
                "network": DockerNetworkAgent(docker=docker), "storage": storage}
    return {"power": LocalPowerAgent(data_dir=Path(settings.data_dir),
                                     confirm_timeout=settings.confirm_timeout),
            "network": local_network_agent(), "storage": storage}


async def check_engine(docker: DockerEngine) -> None:
    """Say at startup which engine and compose project docker mode fences through, or why
    it cannot: a missing socket mount shows in the log, not only on the first Fence."""
    try:
        project = await docker.project()
        await docker.networks()
    except FenceError as err:
        log.warning("the Docker engine is not usable yet; fences will fail until it is",
                    extra={"error": str(err)})
        return
    log.info("fencing through the Docker engine",
             extra={"docker_host": docker.transport.host, "compose_project": project})


async def run_fence_agent(settings: FenceAgentSettings, service: Service) -> None:
    async with ApiClient(settings.apiserver, user_agent="skiff-fence-agent",
                         retry_seconds=60) as api:
        agents = build_agents(settings, api)
        power = agents["power"]
        if isinstance(power, DockerPowerAgent):
            await check_engine(power.docker)
        controller = FenceController(
            api=api, agents=agents,
            recorder=EventRecorder(api, component="fence-agent"), clock=REAL_CLOCK,
            resync_period=settings.resync_period)
        task = asyncio.create_task(controller.run(), name="fence-controller")
        try:
            await controller.wait_synced()
            log.info("fence agent ready", extra={"mode": settings.mode})
            await service.ready()
            stop = asyncio.create_task(service.stop.wait(), name="stop")
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            if task.done():
                task.result()
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def main(argv: list[str] | None = None) -> None:
    try:
        settings = parse_settings(argv)
    except SettingsError as err:
        sys.exit(f"skiff-fence-agent: {err}")
    address = f"127.0.0.1:{settings.health_port}" if settings.health_port else ""

    async def body(service: Service) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await run_fence_agent(settings, service)

    run_service("fence-agent", body, health_address=address, log_level=settings.log_level)
