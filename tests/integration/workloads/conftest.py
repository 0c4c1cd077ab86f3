"""A whole cluster for the real-manifest tests: etcd, an apiserver with its HTTP front, a
scheduler, a controller-manager with every default controller and three real kubelets,
driven with the real `kubectl`."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from skiff.cluster.kubeconfig import write_kubeconfig
from skiff.cluster.processes import free_port
from tests.integration.cluster import Cluster

NODES = ("wl-a", "wl-b", "wl-c")


@dataclass
class Kube:
    """The real kubectl against the cluster."""

    config: Path
    cluster: Cluster

    def __call__(self, *args: str, stdin: str | None = None,
                 check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["kubectl", "--kubeconfig", str(self.config), *args],
                              input=stdin, capture_output=True, text=True, timeout=90)
        if check:
            assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done


@pytest.fixture(scope="package")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    assert shutil.which("kubectl"), "kubectl is not installed"
    root = tmp_path_factory.mktemp("workloads")
    port = free_port()
    cluster = Cluster(root, apiserver_args=["--http-port", str(port)]).start()
    try:
        cluster.add_service("scheduler", "skiff.scheduler", [])
        cluster.add_service("controller-manager", "skiff.controller_manager", [
            "--node-monitor-period", "500ms", "--node-monitor-grace-period", "4s",
            "--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s",
            "--leader-elect-retry-period", "250ms", "--gc-resync-period", "2s",
            "--job-pod-failure-backoff", "1s"])
        for node in NODES:
            cluster.add_service(f"kubelet-{node}", "skiff.kubelet", [
                "--node-name", node, "--root-dir", str(root / node),
                "--node-status-update-frequency", "1s",
                "--node-lease-renew-interval", "500ms"])
        yield Kube(write_kubeconfig(root, f"http://127.0.0.1:{port}"), cluster)
    finally:
        cluster.stop()
