"""What every long-running Skiff service shares: logs, tracing, health, SIGTERM.

`run_service` sets up structured logging and tracing, serves the standard gRPC health
service on the component's health port (NOT_SERVING until the body says it is ready), and
turns SIGTERM/SIGINT into the `stop` event the body waits on, so shutdown is always clean.
A body told to stop before it reported ready — still registering, or waiting for an
apiserver that does not answer — is cancelled at once: it has nothing to drain yet, and its
start-up's retries must not hold a SIGTERM for a minute (Kubernetes' components exit on it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from skiff.gctuning import tune_gc
from skiff.logs import setup_logging
from skiff.tracing import setup_tracing, shutdown_tracing

log = logging.getLogger(__name__)


@dataclass
class Service:
    """Handed to a service body: `stop` to wait on, `ready()` to report SERVING."""

    component: str
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    started: bool = False  # the body reported ready once: it handles `stop` itself
    _health: health.aio.HealthServicer | None = None

    async def ready(self, serving: bool = True) -> None:
        self.started = self.started or serving
        if self._health is not None:
            status = (health_pb2.HealthCheckResponse.SERVING if serving
                      else health_pb2.HealthCheckResponse.NOT_SERVING)
            await self._health.set("", status)


async def serve(component: str, body: Callable[[Service], Awaitable[None]], *,
                health_address: str = "",
                handlers: Sequence[grpc.GenericRpcHandler] = ()) -> None:
    """Run `body` with a health server until it returns or the process is told to stop.

    `handlers` are served on the same port as health (e.g. the kubelet's log service).
    """
    service = Service(component)
    server: grpc.aio.Server | None = None
    if health_address:
        server = grpc.aio.server()
        if handlers:
            server.add_generic_rpc_handlers(tuple(handlers))
        service._health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(service._health, server)
        for address in health_address.split(","):  # "a:port,b:port": several addresses
            if server.add_insecure_port(address) == 0:
                raise OSError(f"{component}: cannot bind the health port {address}")
        await service.ready(False)
        await server.start()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, service.stop.set)
    task = asyncio.create_task(_run_body(body, service), name=component)
    stopping = asyncio.create_task(service.stop.wait(), name="stop")
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done() and not service.started:
            log.info("told to stop while starting; stopping now")
            task.cancel()
        await task
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        stopping.cancel()
        if not task.done():  # serve itself was cancelled
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if server is not None:
            await service.ready(False)
            await server.stop(1)


async def _run_body(body: Callable[[Service], Awaitable[None]], service: Service) -> None:
    """The body, ending quietly when `serve` cancels it because it was told to stop while
    starting."""
    try:
        await body(service)
    except asyncio.CancelledError:
        if not service.stop.is_set():
            raise


def run_service(component: str, body: Callable[[Service], Awaitable[None]], *,
                health_address: str = "", log_level: str = "INFO",
                handlers: Sequence[grpc.GenericRpcHandler] = ()) -> None:
    """The `main()` of a service process."""
    setup_logging(component, log_level)
    setup_tracing(f"skiff-{component}")
    tune_gc()
    try:
        asyncio.run(serve(component, body, health_address=health_address,
                          handlers=handlers))
    except KeyboardInterrupt:
        pass
    finally:
        with contextlib.suppress(Exception):
            shutdown_tracing()
