"""A real etcd + apiserver pair for integration tests (no mocks of etcd or gRPC).

Each piece is a real OS process on a fixed loopback port, so tests can kill (SIGKILL) and
restart the apiserver or etcd and the clients come back at the same address.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from skiff.cgroupfs import remove_recorded
from skiff.cluster.podgroups import end_pod_groups, kubelet_root_dirs
from skiff.cluster.processes import (
    Process,
    etcd_process,
    free_port,
    service_process,
    wait_etcd_healthy,
    wait_grpc_healthy,
)
from skiff.cluster.sandboxes import pod_network_namespace, remove_sandboxes


@dataclass
class Cluster:
    root: Path
    apiserver_args: list[str] = field(default_factory=list)
    apiserver_env: dict[str, str] = field(default_factory=dict)
    services: dict[str, Process] = field(default_factory=dict)
    # each added service's gRPC health endpoint ("127.0.0.1:port"), by service name
    health_targets: dict[str, str] = field(default_factory=dict)
    # Most tests run no controller-manager, so nothing would make the `default`
    # ServiceAccount their pods need; the tests of SPEC AX3 turn the admission on.
    service_account_admission: bool = False

    def __post_init__(self) -> None:
        self.etcd_port = free_port()
        self.peer_port = free_port()
        self.api_port = free_port()
        self.etcd: Process = etcd_process(self.root, client_port=self.etcd_port,
                                          peer_port=self.peer_port)
        self.apiserver: Process = service_process(
            "apiserver", "skiff.apiserver",
            ["--etcd-servers", self.etcd_endpoint, "--secure-port", str(self.api_port),
             "--etcd-retry-seconds", "2",
             *([] if self.service_account_admission
               else ["--disable-admission-plugins", "ServiceAccount"]),
             *self.apiserver_args],
            log_dir=self.root / "logs",
            env={"SKIFF_LOG_FORMAT": "json", **self.apiserver_env})

    @property
    def etcd_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    @property
    def api_target(self) -> str:
        return f"127.0.0.1:{self.api_port}"

    def start_etcd(self) -> None:
        self.etcd.start()
        wait_etcd_healthy(self.etcd, self.etcd_port)

    def start_apiserver(self, *, wait: bool = True) -> None:
        self.apiserver.start()
        if wait:
            wait_grpc_healthy(self.apiserver, self.api_target)

    def start(self) -> Cluster:
        self.start_etcd()
        self.start_apiserver()
        return self

    def add_service(self, name: str, module: str, args: list[str], *,
                    env: dict[str, str] | None = None, start: bool = True,
                    wait: bool = True) -> Process:
        """Another Skiff service (`python -m module`) talking to this cluster's apiserver.

        It gets `--apiserver` and a `--health-port`; with `wait` the call returns once the
        service's gRPC health check says SERVING. Stopped (by PID) with the cluster.
        """
        health_port = free_port()
        if module == "skiff.kubelet":
            # This cluster's own pod network namespace, as `skiff up` gives each cluster
            # (removed by `stop`): the kubelet's default one is machine-wide, so every
            # cluster of a run shared it, service proxies included, and it outlived the run.
            args = ["--pod-network-namespace", pod_network_namespace(self.root), *args]
        proc = service_process(name, module, [
            "--apiserver", self.api_target, "--health-port", str(health_port), *args],
            log_dir=self.root / "logs", env={"SKIFF_LOG_FORMAT": "json", **(env or {})})
        self.health_targets[name] = f"127.0.0.1:{health_port}"
        self.services[name] = proc
        if start:
            proc.start()
            if wait:
                wait_grpc_healthy(proc, self.health_targets[name])
        return proc

    def stop(self) -> None:
        services = list(self.services.values())
        for proc in reversed(services):
            proc.stop()
        # As `skiff down` does: the pods' processes outlive their kubelets otherwise, and
        # their sandboxes and the pod network namespace stay.
        roots = kubelet_root_dirs(self.root, [p.argv for p in services])
        end_pod_groups(roots, grace=1.0)
        if os.geteuid() == 0:
            remove_sandboxes(roots, pod_network_namespace(self.root))
            remove_recorded(roots)  # and their cgroups (AU8)
        self.apiserver.stop()
        self.etcd.stop()


def pythonpath_env() -> dict[str, str]:
    return {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}
