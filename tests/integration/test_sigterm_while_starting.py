"""Every long-running service shuts down cleanly on SIGTERM — also while it is still
starting, with no apiserver answering (skiff.service).

Before, a kubelet or fence agent started while its apiserver was down sat in its
registration or first list retries and ignored SIGTERM for 30 s and more, so whoever stopped
it had to SIGKILL it (seen stopping a 10,000-node bench after its apiservers). Real
processes, a real signal, an address nothing listens on.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from skiff.cluster.processes import Process, free_port, service_process

SERVICES = {  # name: module, arguments, whether its health serves while it waits
    "kubelet": ("skiff.kubelet", ["--node-name", "n1", "--runtime", "fake"], False),
    "hollow-kubelet": ("skiff.kubelet", ["--node-name", "h", "--runtime", "fake",
                                         "--hollow-nodes", "20"], False),
    "fence-agent": ("skiff.fence_agent", [], False),
    "scheduler": ("skiff.scheduler", [], True),
    "controller-manager": ("skiff.controller_manager", [], True),
}


def wait_starting(proc: Process, health: str, *, serving: bool,
                  timeout: float = 60) -> None:
    """Until the service's health port answers: it handles signals from then on. A
    kubelet or fence agent says NOT_SERVING until it has started, which it cannot here; a
    scheduler or controller-manager serves health at once and waits for its Lease (as
    Kubernetes' do), handling SIGTERM there itself."""
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(health) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            assert proc.alive(), f"{proc.name} exited by itself:\n{proc.tail()}"
            try:
                status = stub.Check(health_pb2.HealthCheckRequest(), timeout=1).status
            except grpc.RpcError:
                time.sleep(0.1)
                continue
            assert (status == health_pb2.HealthCheckResponse.SERVING) == serving, \
                f"{proc.name}'s health says {status} with no apiserver"
            return
    pytest.fail(f"{proc.name} never answered on its health port:\n{proc.tail()}")


@pytest.mark.parametrize("name", list(SERVICES))
def test_a_service_without_an_apiserver_exits_promptly_on_sigterm(name: str,
                                                                   tmp_path: Path) -> None:
    module, args, serving = SERVICES[name]
    extra = ["--data-dir", str(tmp_path)] if name == "fence-agent" else (
        ["--root-dir", str(tmp_path / "root")] if "kubelet" in name else [])
    health_port = free_port()
    proc = service_process(name, module, [
        "--apiserver", f"127.0.0.1:{free_port()}", "--health-port", str(health_port),
        *args, *extra], log_dir=tmp_path)
    proc.start()
    try:
        wait_starting(proc, f"127.0.0.1:{health_port}", serving=serving)
        time.sleep(1)  # into its start-up's retries
        proc.signal(signal.SIGTERM)
        assert proc.popen is not None
        started = time.monotonic()
        code = proc.popen.wait(timeout=30)
        took = time.monotonic() - started
        assert took < 5, f"{name} took {took:.1f}s to exit on SIGTERM:\n{proc.tail()}"
        assert code == 0, f"{name} exited {code} on SIGTERM:\n{proc.tail()}"
    finally:
        proc.kill()
