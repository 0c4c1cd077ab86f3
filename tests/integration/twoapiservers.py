"""Two real apiservers over one real etcd, for the allocators that must never hand out a
value twice whichever apiserver is asked (cluster IPs, node ports)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from skiff.client import ApiClient
from skiff.cluster.processes import Process, free_port, service_process, wait_grpc_healthy
from tests.integration.cluster import Cluster


@dataclass
class TwoApiservers:
    cluster: Cluster  # etcd and the first apiserver
    second: Process
    second_target: str
    http_ports: tuple[int, int] = (0, 0)


@contextmanager
def two_apiservers(root: Path, first_args: list[str], second_args: list[str], *,
                   http_ports: tuple[int, int] = (0, 0)) -> Iterator[TwoApiservers]:
    """Start etcd and two apiservers (each with its own extra flags); stop them after."""
    grpc2 = free_port()
    cluster = Cluster(root, apiserver_args=first_args)
    second = service_process("apiserver-2", "skiff.apiserver", [
        "--etcd-servers", cluster.etcd_endpoint, "--secure-port", str(grpc2),
        "--etcd-retry-seconds", "2", "--disable-admission-plugins", "ServiceAccount",
        *second_args], log_dir=root / "logs", env={"SKIFF_LOG_FORMAT": "json"})
    try:
        cluster.start()
        second.start()
        wait_grpc_healthy(second, f"127.0.0.1:{grpc2}")
        yield TwoApiservers(cluster, second, f"127.0.0.1:{grpc2}", http_ports)
    finally:
        second.stop()
        cluster.stop()


@asynccontextmanager
async def clients_of(two: TwoApiservers) -> AsyncIterator[tuple[ApiClient, ApiClient]]:
    """A client of each apiserver."""
    async with ApiClient(two.cluster.api_target, retry_seconds=20) as a, \
            ApiClient(two.second_target, retry_seconds=20) as b:
        yield a, b
