"""What a running cluster is, as `<data-dir>/cluster.json` records it, and how healthy it is.

The launchers (`local`, `netns.cluster`) write it; `skiff down`, `skiff status`, the
supervisor, the control-plane agent and the fence agent (local mode: it kills and starts a
node's kubelet and records the new PID) read it. One small module with no launcher in it,
so every reader imports only this.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import ssl
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from skiff.client.credentials import Credentials

STATE_FILE = "cluster.json"


def default_data_dir() -> Path:
    return Path(os.environ.get("SKIFF_DATA_DIR") or Path.home() / ".skiff")


@dataclass
class Component:
    name: str
    pid: int
    address: str
    health: str  # gRPC health target ("" for etcd: HTTP /health)
    log: str
    argv: list[str] = field(default_factory=list)
    netns: str = ""  # the network namespace it runs in (`skiff up --netns`); "" = the host's
    env: dict[str, str] = field(default_factory=dict)  # what it runs with besides os.environ
    restarts: int = 0  # times the supervisor (cluster/supervisor.py) started it again


@dataclass
class ClusterState:
    api: str
    data_dir: str
    components: list[Component]
    started: float
    netns: dict[str, Any] | None = None  # `skiff up --netns`: its namespaces (cluster/netns)
    supervisor_pid: int = 0  # `skiff up --detach`: the process restarting what dies

    def save(self, data_dir: Path) -> None:
        path = data_dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(path)

    @classmethod
    def load(cls, data_dir: Path) -> ClusterState | None:
        try:
            raw = json.loads((data_dir / STATE_FILE).read_text())
        except (OSError, ValueError):
            return None
        return cls(api=raw["api"], data_dir=raw["data_dir"],
                   components=[Component(**c) for c in raw["components"]],
                   started=raw["started"], netns=raw.get("netns"),
                   supervisor_pid=int(raw.get("supervisor_pid") or 0))


def remove_state(data_dir: Path) -> None:
    """The cluster is gone: nothing left for `skiff down` or the supervisor to find."""
    with contextlib.suppress(OSError):
        (data_dir / STATE_FILE).unlink()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); check its state.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def running_elsewhere(data_dir: Path) -> ClusterState | None:
    """The cluster recorded in `data_dir`, if any of its processes still runs."""
    running = ClusterState.load(data_dir)
    if running and any(pid_alive(c.pid) for c in running.components):
        return running
    return None


def same_process(comp: Component) -> bool:
    """Whether `comp.pid` is alive and still runs the component's recorded argv (a reused
    PID is never signalled). Components recorded without argv are trusted by PID."""
    if not pid_alive(comp.pid):
        return False
    if not comp.argv:
        return True
    try:
        raw = Path(f"/proc/{comp.pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc here: fall back to the PID alone
    return [p.decode(errors="replace") for p in raw.split(b"\0")[:-1]] == comp.argv


def stop_component(comp: Component, *, timeout: float) -> None:
    """SIGTERM, then SIGKILL after `timeout`, only while it is still the same process."""
    if not same_process(comp):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(comp.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while same_process(comp) and time.monotonic() < deadline:
        time.sleep(0.05)
    if same_process(comp):
        with contextlib.suppress(ProcessLookupError):
            os.kill(comp.pid, signal.SIGKILL)


def flag_of(comp: Component, flag: str) -> str:
    """The value after `flag` in the component's recorded argv ("" without one)."""
    with contextlib.suppress(ValueError, IndexError):
        return comp.argv[comp.argv.index(flag) + 1]
    return ""


async def health_of(comp: Component) -> str:
    if not pid_alive(comp.pid):
        return "exited"
    if not comp.health:
        context = None
        if comp.address.startswith("https://"):  # etcd with TLS: its own files prove us
            context = ssl.create_default_context(cafile=flag_of(comp, "--trusted-ca-file"))
            context.load_cert_chain(flag_of(comp, "--cert-file"),
                                    flag_of(comp, "--key-file"))
        try:
            with urllib.request.urlopen(f"{comp.address}/health", timeout=1,
                                        context=context) as resp:
                return "healthy" if b'"health":"true"' in resp.read() else "unhealthy"
        except OSError:
            return "unreachable"
    async with health_channel(comp) as channel:
        return await grpc_health(channel)


def health_channel(comp: Component) -> grpc.aio.Channel:
    """A channel of its own to the component's gRPC health service: mutual TLS with the
    credentials of the environment for an apiserver's port (or a --netns gateway's, whose
    health is the apiserver's), plaintext for the other components' health ports."""
    creds = Credentials.from_env()
    secure = creds.secure and ("--tls-cert-file" in comp.argv or comp.name == "gateway")
    # Its own connection: grpc shares one between channels to the same target, with the
    # reconnect backoff of an earlier process that listened there.
    options = [("grpc.use_local_subchannel_pool", 1)]
    return (grpc.aio.secure_channel(comp.health, creds.grpc_credentials(), options=options)
            if secure else grpc.aio.insecure_channel(comp.health, options=options))


async def grpc_health(channel: grpc.aio.Channel) -> str:
    """One grpc.health.v1 Check over `channel`: healthy, not-serving or unreachable."""
    try:
        resp = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=1.0)
    except grpc.aio.AioRpcError:
        return "unreachable"
    # NOT_SERVING: starting, or (an apiserver) unable to confirm its data is current.
    return "healthy" if resp.status == health_pb2.HealthCheckResponse.SERVING else "not-serving"
