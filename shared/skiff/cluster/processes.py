"""Local processes of a cluster: etcd and the Skiff services, started and stopped by PID.

`skiff up` and the integration tests both run the real binaries through this module: each
process gets its own log file, a fixed loopback port (so a restart comes back at the same
address), a health wait, and stop = SIGTERM, then SIGKILL after a timeout.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from skiff.client.credentials import Credentials

ETCD_INSTALL_HINT = (
    "etcd is not installed: install it with `sudo apt-get install etcd-server` "
    "(Debian/Ubuntu), or put an etcd 3.4+ binary on PATH"
)


class StartError(RuntimeError):
    """A component did not start; the message names it and points at its log."""


PORT_RANGE_ENV = "SKIFF_PORT_RANGE"


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on now, for a process about to be started on it.

    By default the kernel picks one. With `SKIFF_PORT_RANGE=LOW-HIGH` (the test suite sets
    a disjoint range per parallel worker) ports come from that range only, in order from a
    random start, so concurrent test runs never hand out the same port to two clusters.
    """
    span = os.environ.get(PORT_RANGE_ENV, "")
    if not span:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            return int(s.getsockname()[1])
    low, high = port_range(span)
    for _ in range(high - low):
        port = _next_in_range(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise StartError(f"no free port left in {PORT_RANGE_ENV}={span}; widen the range")


_cursor: dict[tuple[int, int], int] = {}


def port_range(span: str) -> tuple[int, int]:
    try:
        low_text, high_text = span.split("-", 1)
        low, high = int(low_text), int(high_text)
    except ValueError:
        raise StartError(f"{PORT_RANGE_ENV}={span!r} is not LOW-HIGH "
                         "(e.g. 20000-25000, HIGH excluded)") from None
    if not 1024 <= low < high <= 65535:
        raise StartError(f"{PORT_RANGE_ENV}={span!r}: need 1024 <= LOW < HIGH <= 65535")
    return low, high


def _next_in_range(low: int, high: int) -> int:
    """Ports of one process go round the range from a random start: two calls of one process
    never return the same port while unused ones are left."""
    key = (low, high)
    if key not in _cursor:
        _cursor[key] = low + int.from_bytes(os.urandom(2), "big") % (high - low)
    port = _cursor[key]
    _cursor[key] = low + (port + 1 - low) % (high - low)
    return port


def find_etcd() -> str:
    """`SKIFF_ETCD_BINARY` if set (and then only it), else etcd on PATH or Debian's path."""
    explicit = os.environ.get("SKIFF_ETCD_BINARY", "")
    candidates = [explicit] if explicit else ["etcd", "/usr/bin/etcd", "/usr/local/bin/etcd"]
    for candidate in candidates:
        if path := shutil.which(candidate):
            return path
    if explicit:
        raise StartError(f"SKIFF_ETCD_BINARY={explicit} is not an executable etcd; "
                         f"{ETCD_INSTALL_HINT}")
    raise StartError(ETCD_INSTALL_HINT)


@dataclass
class Process:
    """One child process with a log file; `start()` again restarts it the same way."""

    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        try:
            self.popen = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, **self.env}, start_new_session=True)
        finally:
            log.close()

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def signal(self, sig: int) -> None:
        if self.popen is not None and self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, sig)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        self.signal(signal.SIGKILL)
        if self.popen is not None:
            self.popen.wait(10)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `timeout`."""
        if self.popen is None:
            return
        self.signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass(frozen=True)
class EtcdTlsFiles:
    """etcd's TLS (SPEC AU4): serving and peer certificates, and the CA whose client
    certificates it accepts (`--client-cert-auth`); see `skiff.pki`."""

    ca: Path
    server_cert: Path
    server_key: Path
    peer_cert: Path
    peer_key: Path
    # For our own health probe only (the apiservers' client certificate).
    client_cert: Path
    client_key: Path

    def args(self) -> list[str]:
        return ["--client-cert-auth", "--trusted-ca-file", str(self.ca),
                "--cert-file", str(self.server_cert), "--key-file", str(self.server_key),
                "--peer-client-cert-auth", "--peer-trusted-ca-file", str(self.ca),
                "--peer-cert-file", str(self.peer_cert),
                "--peer-key-file", str(self.peer_key)]


def etcd_process(data_dir: Path, *, client_port: int, peer_port: int,
                 name: str = "etcd", member: str = "skiff", initial_cluster: str = "",
                 cluster_token: str = "", tls: EtcdTlsFiles | None = None) -> Process:
    """One etcd member; alone by default, or one of `initial_cluster` (`name=peerURL,...`,
    `skiff up --ha`), keeping its data in `<data_dir>/<name>` then. With `tls` its client
    and peer URLs are https and it accepts only clients with a certificate."""
    scheme = "https" if tls is not None else "http"
    client = f"{scheme}://127.0.0.1:{client_port}"
    peer = f"{scheme}://127.0.0.1:{peer_port}"
    # Pre-vote (etcd 3.5's default): a member back from a partition does not depose the
    # leader with the terms it ran up alone.
    clustered = ["--initial-cluster-token", cluster_token, "--pre-vote"] \
        if cluster_token else []
    return Process(name, [
        find_etcd(), "--name", member,
        "--data-dir", str(data_dir / (name if initial_cluster else "etcd")),
        "--listen-client-urls", client, "--advertise-client-urls", client,
        "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
        "--initial-cluster", initial_cluster or f"{member}={peer}",
        "--initial-cluster-state", "new", *clustered,
        "--logger", "zap", "--log-outputs", "stderr",
        "--quota-backend-bytes", str(2 * 1024**3),
        *(tls.args() if tls is not None else []),
    ], data_dir / "logs" / f"{name}.log")


def python_module(module: str) -> list[str]:
    """argv that runs `module` with this interpreter. `-P`: the working directory is not put
    first on sys.path, so a folder named `skiff` where the user runs `skiff up` (a checkout's
    parent, or a data dir) cannot shadow the installed package."""
    return [sys.executable, "-P", "-m", module]


def service_process(name: str, module: str, args: list[str], *, log_dir: Path,
                    env: dict[str, str] | None = None) -> Process:
    return Process(name, [*python_module(module), *args], log_dir / f"{name}.log",
                   env=dict(env or {}))


def wait_grpc_healthy(proc: Process, target: str, *, timeout: float = 30.0,
                      credentials: Credentials | None = None) -> None:
    """Wait until `target` answers the gRPC health check with SERVING (over mutual TLS
    with secure `credentials`: the apiserver's secure port)."""
    deadline = time.monotonic() + timeout
    channel_of = (grpc.secure_channel(target, credentials.grpc_credentials())
                  if credentials is not None and credentials.secure
                  else grpc.insecure_channel(target))
    with channel_of as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            if not proc.alive():
                raise StartError(f"{proc.name} exited while starting; its log "
                                 f"({proc.log_path}) ends with:\n{proc.tail()}")
            try:
                resp = stub.Check(health_pb2.HealthCheckRequest(), timeout=1.0)
                if resp.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.05)
    raise StartError(f"{proc.name} did not become healthy at {target} within {timeout:.0f}s; "
                     f"see {proc.log_path}:\n{proc.tail()}")


def wait_etcd_healthy(proc: Process, client_port: int, *, timeout: float = 30.0,
                      tls: EtcdTlsFiles | None = None) -> None:
    context = None
    if tls is not None:
        context = ssl.create_default_context(cafile=str(tls.ca))
        context.load_cert_chain(str(tls.client_cert), str(tls.client_key))
    scheme = "https" if tls is not None else "http"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.alive():
            raise StartError(f"etcd exited while starting; its log ({proc.log_path}) "
                             f"ends with:\n{proc.tail()}")
        try:
            with urllib.request.urlopen(f"{scheme}://127.0.0.1:{client_port}/health",
                                        timeout=1, context=context) as resp:
                if b'"health":"true"' in resp.read():
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise StartError(f"etcd did not become healthy within {timeout:.0f}s; see "
                     f"{proc.log_path}:\n{proc.tail()}")
