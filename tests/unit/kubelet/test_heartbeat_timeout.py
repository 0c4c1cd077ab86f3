"""PS2 / node heartbeats: one Lease renewal stuck on a sick apiserver must not hold the
next one. Kubernetes' kubelet gives its heartbeat client a timeout of the status update
frequency (capped at the lease duration); before Skiff did, a renewal that an apiserver
never answered waited the client's 30 s, longer than a node-monitor grace, and a healthy
node was marked Unknown (and fenced) in the HA scenarios."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from skiff.clock import REAL_CLOCK
from skiff.kubelet.node import NodeAgent, heartbeat_client
from skiff.kubelet.settings import parse_settings


class Unanswered(grpc.GenericRpcHandler):  # type: ignore[misc]  # grpc has no types
    """An apiserver that accepts every call and never answers it."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        async def hang(_request: bytes, _context: Any) -> bytes:
            self.calls.append(details.method)
            await asyncio.Event().wait()
            return b""

        return grpc.unary_unary_rpc_method_handler(hang)


@contextlib.asynccontextmanager
async def sick_apiserver() -> AsyncIterator[tuple[str, Unanswered]]:
    handler = Unanswered()
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}", handler
    finally:
        await server.stop(grace=None)


def test_heartbeat_timeout_is_the_status_update_frequency_capped_at_the_lease() -> None:
    assert parse_settings([]).heartbeat_timeout == 10.0
    assert parse_settings(["--node-status-update-frequency", "1s"]).heartbeat_timeout == 1.0
    assert parse_settings(["--node-status-update-frequency", "90s",
                           "--node-lease-duration-seconds", "40"]).heartbeat_timeout == 40.0


async def test_ps2_a_renewal_the_apiserver_never_answers_does_not_hold_the_next(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SKIFF_CA_FILE", "SKIFF_CLIENT_CERT_FILE", "SKIFF_CLIENT_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)
    async with sick_apiserver() as (address, server):
        settings = parse_settings(["--apiserver", address,
                                   "--node-status-update-frequency", "300ms",
                                   "--node-lease-renew-interval", "200ms"])
        async with heartbeat_client(settings) as heartbeat:
            agent = NodeAgent(api=heartbeat, heartbeat=heartbeat, clock=REAL_CLOCK,
                              node_name="node-1", labels={}, taints=[],
                              capacity={"cpu": "1"}, health_port=10248, lease_duration=40,
                              renew_interval=settings.lease_renew_interval,
                              status_update_frequency=settings.node_status_update_frequency,
                              status_report_frequency=300)
            renewals = asyncio.create_task(agent.run_lease())
            try:
                await asyncio.sleep(3.0)
            finally:
                renewals.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await renewals
    # Each attempt gives up after 0.3 s (and its retries after as long again); with the
    # old 30 s client the loop would still be in its first call.
    assert len(server.calls) >= 3, server.calls
