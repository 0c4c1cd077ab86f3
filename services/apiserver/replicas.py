"""Several apiserver processes behind one address.

`--processes N` (N > 1) makes this process start N-1 more copies of itself on the same
gRPC and HTTP ports; every one binds with SO_REUSEPORT, so the kernel spreads connections
over them, and every one has its own etcd client and watch cache, as Kubernetes' apiserver
replicas do. Python runs one core per process; this is how the API uses more cores. The
copies are stopped (SIGTERM, then SIGKILL) when this process stops.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys

CHILD_ENV = "SKIFF_APISERVER_REPLICA"
_PR_SET_PDEATHSIG = 1


def is_replica() -> bool:
    return os.environ.get(CHILD_ENV) == "1"


def _die_with_parent() -> None:
    """In the child: SIGTERM when the parent dies, even by SIGKILL (Linux PR_SET_PDEATHSIG),
    so a replica never keeps the port after its parent is gone."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def start_replicas(count: int, argv: list[str]) -> list[subprocess.Popen[bytes]]:
    """`count` more apiserver processes with `argv` (which names fixed ports)."""
    env = {**os.environ, CHILD_ENV: "1"}
    return [subprocess.Popen([sys.executable, "-P", "-m", "skiff.apiserver", *argv,
                              "--processes", "1", "--reuse-port", "true"], env=env,
                             preexec_fn=_die_with_parent)  # noqa: PLW1509 - prctl only
            for _ in range(count)]


def stop_replicas(children: list[subprocess.Popen[bytes]], timeout: float = 10.0) -> None:
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signal.SIGTERM)
    for child in children:
        try:
            child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(5)
