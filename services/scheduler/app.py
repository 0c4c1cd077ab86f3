"""The scheduler process: settings → config file → `Scheduler` under `run_service`
(structured logs, tracing, gRPC health SERVING once the informers have synced)."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from skiff.client import ApiClient
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

    async def body(service: Service) -> None:
        async with ApiClient(settings.apiserver, user_agent="skiff-scheduler") as client:
            scheduler = Scheduler(client=client, settings=settings, config=config)
            await scheduler.run(service.stop, on_ready=service.ready)

    health = f"{settings.bind_address}:{settings.health_port}" if settings.health_port else ""
    run_service("scheduler", body, health_address=health, log_level=settings.log_level)
    return 0
