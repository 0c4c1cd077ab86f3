"""The scheduler process: settings → config file → `Scheduler` under `run_service`
(structured logs, tracing, gRPC health).

With `--leader-elect` (the default, as kube-scheduler) the process campaigns for the Lease
kube-system/kube-scheduler and schedules only while it leads, with fresh caches each term;
health is SERVING once started, leader or standby. Without it, health is SERVING once the
informers have synced."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from typing import Any

from skiff.client import ApiClient
from skiff.client.batch import batching
from skiff.client.leaderelection import LeaderElectionConfig, LeaderElector, election_client
from skiff.scheduler.config import ConfigError, load_config
from skiff.scheduler.scheduler import Scheduler
from skiff.scheduler.settings import DEFAULTS, SchedulerSettings, parse_settings
from skiff.service import Service, run_service


def effective_settings(settings: SchedulerSettings, *, initial: float | None,
                       maximum: float | None) -> SchedulerSettings:
    """The config file's backoffs apply where the flags were left at their defaults."""
    changes: dict[str, Any] = {}
    if initial is not None and (settings.pod_initial_backoff_seconds
                                == DEFAULTS.pod_initial_backoff_seconds):
        changes["pod_initial_backoff_seconds"] = initial
    if maximum is not None and (settings.pod_max_backoff_seconds
                                == DEFAULTS.pod_max_backoff_seconds):
        changes["pod_max_backoff_seconds"] = maximum
    return dataclasses.replace(settings, **changes) if changes else settings


def main(argv: list[str] | None = None) -> int:
    settings = parse_settings(argv)
    try:
        config = load_config(settings.config, default_scheduler_name=settings.scheduler_name)
    except ConfigError as err:
        print(f"skiff-scheduler: {err}", file=sys.stderr)
        return 2
    settings = effective_settings(settings, initial=config.pod_initial_backoff_seconds,
                                  maximum=config.pod_max_backoff_seconds)

    try:
        election = LeaderElectionConfig(
            namespace=settings.leader_elect_resource_namespace,
            name=settings.leader_elect_resource_name, identity=settings.identity,
            lease_duration=settings.leader_elect_lease_duration,
            renew_deadline=settings.leader_elect_renew_deadline,
            retry_period=settings.leader_elect_retry_period)
    except ValueError as err:
        print(f"skiff-scheduler: {err}", file=sys.stderr)
        return 2

    async def body(service: Service) -> None:
        async with ApiClient(settings.apiserver, user_agent="skiff-scheduler",
                             **batching(settings.write_batch_size,
                                        settings.write_batch_delay)) as client:
            if not settings.leader_elect:
                scheduler = Scheduler(client=client, settings=settings, config=config)
                await scheduler.run(service.stop, on_ready=service.ready)
                return

            async def lead() -> None:
                # A fresh scheduler (caches, queue) per term; cancelled when the term ends.
                term = Scheduler(client=client, settings=settings, config=config)
                await term.run(asyncio.Event())

            await service.ready()
            async with election_client(settings.apiserver, election,
                                       user_agent="skiff-scheduler") as lease:
                await LeaderElector(client=lease, config=election, fenced=[client]).run(
                    lead=lead, stop=service.stop)

    health = f"{settings.bind_address}:{settings.health_port}" if settings.health_port else ""
    run_service("scheduler", body, health_address=health, log_level=settings.log_level)
    return 0
