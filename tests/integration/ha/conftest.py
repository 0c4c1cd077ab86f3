"""A replicated control plane for the HA tests: one real etcd (or a real three-member etcd
cluster) and several real apiserver processes on loopback, killed and stopped by PID."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from skiff.cluster.processes import (
    Process,
    etcd_process,
    find_etcd,
    free_port,
    service_process,
    wait_etcd_healthy,
    wait_grpc_healthy,
)


@dataclass
class HaCluster:
    """`apiservers` share the etcd endpoints; `targets` is the comma list clients take."""

    root: Path
    etcd: list[Process] = field(default_factory=list)
    etcd_ports: list[int] = field(default_factory=list)
    apiservers: list[Process] = field(default_factory=list)
    api_ports: list[int] = field(default_factory=list)
    services: list[Process] = field(default_factory=list)

    def start_single_etcd(self) -> None:
        client, peer = free_port(), free_port()
        proc = etcd_process(self.root, client_port=client, peer_port=peer)
        self.etcd.append(proc)
        self.etcd_ports.append(client)
        proc.start()
        wait_etcd_healthy(proc, client)

    def start_etcd_cluster(self, members: int = 3) -> None:
        """A real `members`-member etcd cluster, every peer URL on loopback."""
        names = [f"etcd-{i + 1}" for i in range(members)]
        clients = [free_port() for _ in names]
        peers = [free_port() for _ in names]
        initial = ",".join(f"{n}=http://127.0.0.1:{p}" for n, p in zip(names, peers, strict=True))
        for name, client, peer in zip(names, clients, peers, strict=True):
            c, p = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
            self.etcd.append(Process(name, [
                find_etcd(), "--name", name, "--data-dir", str(self.root / name),
                "--listen-client-urls", c, "--advertise-client-urls", c,
                "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
                "--initial-cluster", initial, "--initial-cluster-state", "new",
                "--initial-cluster-token", "skiff-ha-test",
                "--heartbeat-interval", "100", "--election-timeout", "1000",
                "--logger", "zap", "--log-outputs", "stderr",
            ], self.root / "logs" / f"{name}.log"))
            self.etcd_ports.append(client)
        for proc in self.etcd:
            proc.start()
        for proc, port in zip(self.etcd, self.etcd_ports, strict=True):
            wait_etcd_healthy(proc, port, timeout=60)

    def etcd_endpoint(self, member: int = 0) -> str:
        return f"http://127.0.0.1:{self.etcd_ports[member]}"

    def add_apiserver(self, *, etcd_member: int = 0, args: list[str] | None = None
                      ) -> Process:
        port = free_port()
        name = f"apiserver-{len(self.apiservers) + 1}"
        proc = service_process(name, "skiff.apiserver", [
            "--etcd-servers", self.etcd_endpoint(etcd_member), "--secure-port", str(port),
            "--etcd-retry-seconds", "2", "--etcd-request-timeout", "2",
            "--watch-bookmark-interval", "1", "--watch-quorum-check-interval", "1",
            *(args or [])],
            log_dir=self.root / "logs", env={"SKIFF_LOG_FORMAT": "json"})
        self.apiservers.append(proc)
        self.api_ports.append(port)
        proc.start()
        wait_grpc_healthy(proc, self.api_target(len(self.apiservers) - 1), timeout=60)
        return proc

    def api_target(self, index: int) -> str:
        return f"127.0.0.1:{self.api_ports[index]}"

    @property
    def targets(self) -> str:
        return ",".join(self.api_target(i) for i in range(len(self.apiservers)))

    def add_service(self, name: str, module: str, args: list[str]) -> Process:
        health = free_port()
        proc = service_process(name, module, [
            "--apiserver", self.targets, "--health-port", str(health), *args],
            log_dir=self.root / "logs", env={"SKIFF_LOG_FORMAT": "json"})
        self.services.append(proc)
        proc.start()
        wait_grpc_healthy(proc, f"127.0.0.1:{health}", timeout=60)
        return proc

    def stop(self) -> None:
        for proc in [*reversed(self.services), *reversed(self.apiservers),
                     *reversed(self.etcd)]:
            proc.signal(signal.SIGCONT)  # a SIGSTOPped process cannot handle SIGTERM
            proc.stop()


@pytest.fixture
def ha_cluster(tmp_path: Path) -> Iterator[HaCluster]:
    cluster = HaCluster(tmp_path)
    try:
        yield cluster
    finally:
        cluster.stop()
