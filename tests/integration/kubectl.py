"""The real `kubectl` as the tests run it, and the cluster it talks to: an etcd and an
apiserver with its Kubernetes HTTP front, and a kubeconfig for that front. The kubectl
tests, server-side apply's and the HTTP front's share them (the `kubeconfig` fixture of
tests/integration/conftest.py is one such cluster a module)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from skiff.cluster.kubeconfig import write_kubeconfig
from skiff.cluster.processes import free_port
from tests.integration.cluster import Cluster


def kubectl(config: Path, *args: str, stdin: str | None = None
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", str(config), *args], input=stdin,
                          capture_output=True, text=True, timeout=60)


@contextlib.contextmanager
def http_front(root: Path) -> Iterator[tuple[Cluster, int, Path]]:
    """An etcd and an apiserver in `root` serving HTTP on a port of their own: the cluster,
    that port and a kubeconfig for it; stopped on the way out."""
    assert shutil.which("kubectl"), (
        "kubectl is not installed: .ci/run installs Debian's kubernetes-client")
    port = free_port()
    cluster = Cluster(root, apiserver_args=["--http-port", str(port)]).start()
    try:
        yield cluster, port, write_kubeconfig(root, f"http://127.0.0.1:{port}")
    finally:
        cluster.stop()
