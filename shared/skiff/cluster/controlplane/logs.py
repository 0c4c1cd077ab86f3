"""The control-plane Nodes' kubelet endpoint: the components' logs and usage.

Serves `/skiff.v1.Kubelet/Logs` and `LogsFollow` (skiff.client.logs) for the mirror pods from
the components' log files, on each Node's kubelet endpoint: mutual TLS with that Node's
kubelet serving certificate, open only to the apiserver's kubelet client and
system:masters as the kubelets are (services/kubelet/serving.py), or, in an `--insecure`
cluster, on the health port. So `kubectl logs -n kube-system kube-apiserver-<node>` reads
the apiserver's log. `kubectl top` reads each Node's usage: its components' CPU and memory.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from skiff.api.errors import ApiError, Reason
from skiff.api.types import Obj
from skiff.client.logs import SERVICE
from skiff.client.metrics import METRICS_METHOD_NAME
from skiff.clock import rfc3339
from skiff.cluster.controlplane import mirror
from skiff.cluster.controlplane.settings import Settings
from skiff.cluster.state import ClusterState, Component, same_process
from skiff.pki import APISERVER_KUBELET_CLIENT, MASTERS_GROUP, identity_of
from skiff.procfs import read_stat
from skiff.rpc.codec import CodecError, decode_map, encode
from skiff.rpc.errors import to_grpc

log = logging.getLogger(__name__)

FOLLOW_POLL_SECONDS = 0.2
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _read_to_end(path: Path, tail_lines: int | None) -> tuple[str, int]:
    """The log (its last `tail_lines` lines), and the offset where it ended."""
    try:
        with open(path, "rb") as f:
            lines = f.readlines() if tail_lines is None else \
                list(deque(f, maxlen=max(0, tail_lines)))
            return b"".join(lines).decode(errors="replace"), f.tell()
    except FileNotFoundError:
        return "", 0


def _read(path: Path, tail_lines: int | None) -> str:
    return _read_to_end(path, tail_lines)[0]


def check_caller(context: grpc.aio.ServicerContext[Any, Any], *,
                 subresource: str = "proxy") -> None:
    """Only the apiserver's kubelet client and system:masters, as at a kubelet."""
    user, groups = "system:anonymous", tuple[str, ...]()
    for pem in context.auth_context().get("x509_pem_cert") or []:
        identity = identity_of(bytes(pem))
        user, groups = identity.user, identity.groups
    if user != APISERVER_KUBELET_CLIENT and MASTERS_GROUP not in groups:
        verb = "get" if subresource == "metrics" else "create"
        raise ApiError(Reason.FORBIDDEN, f"Forbidden (user={user}, verb={verb}, "
                                         f"resource=nodes, subresource={subresource})")


def _cpu_ticks(pid: int) -> int | None:
    """utime + stime of `/proc/<pid>/stat`, in clock ticks."""
    try:
        data = Path(f"/proc/{pid}/stat").read_text(errors="replace")
        rest = data[data.rfind(")") + 2:].split()
        return int(rest[11]) + int(rest[12])
    except (OSError, IndexError, ValueError):
        return None


@dataclass
class Usage:
    """The components' CPU and memory, sampled every sync period (cAdvisor's part for
    the kubelet): nanocores over the last interval, resident memory in bytes."""

    _last: dict[int, tuple[float, int]] = field(default_factory=dict)  # pid → (t, ticks)
    rates: dict[int, tuple[int, float, int]] = field(default_factory=dict)

    def sample(self, pids: list[int]) -> None:
        now = time.monotonic()
        for pid in pids:
            ticks, stat = _cpu_ticks(pid), read_stat(pid)
            if ticks is None or stat is None:
                continue
            last = self._last.get(pid)
            if last is not None and now > last[0]:
                window = now - last[0]
                nanocores = int((ticks - last[1]) / CLOCK_TICKS / window * 1e9)
                self.rates[pid] = (max(0, nanocores), window, stat.rss_bytes)
            self._last[pid] = (now, ticks)
        for gone in set(self._last) - set(pids):
            self._last.pop(gone, None)
            self.rates.pop(gone, None)


@dataclass
class ComponentLogs:
    """The kubelet service of the control-plane node(s) `nodes` (all of them: None): the
    components' logs and resource usage."""

    data_dir: Path
    nodes: set[str] | None = None
    authorize: bool = False
    usage: Usage = field(default_factory=Usage)

    def locate(self, req: Obj) -> tuple[Path, Component]:
        namespace = str(req.get("namespace") or "default")
        name, container = str(req.get("name")), req.get("container") or None
        state = ClusterState.load(self.data_dir)
        for pod, comp in mirror.static_pods(state.components if state else []):
            if namespace != mirror.NAMESPACE or pod.name != name or (
                    self.nodes is not None and pod.node not in self.nodes):
                continue
            if container is not None and container != pod.kubeadm:
                raise ApiError.bad_request(f"container {container} is not valid for pod "
                                           f"{name}")
            if req.get("previous") and comp.restarts == 0:
                raise ApiError.bad_request(f'previous terminated container "{pod.kubeadm}" '
                                           f'in pod "{name}" not found')
            return Path(comp.log), comp
        raise ApiError(Reason.NOT_FOUND,
                       f'pod "{name}" in namespace "{namespace}" is not on this node')

    def _request(self, request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> Obj:
        if self.authorize:
            check_caller(context)
        try:
            return decode_map(request)
        except CodecError as err:
            raise ApiError.bad_request(str(err)) from None

    async def _logs(self, request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        try:
            req = self._request(request, context)
            path, _ = self.locate(req)
            tail = req.get("tailLines")
            # The log file holds every run of the component (the supervisor appends).
            return encode({"text": _read(path, int(tail) if tail is not None else None)})
        except ApiError as err:
            code, details, trailer = to_grpc(err)
            await context.abort(code, details, trailing_metadata=trailer)
            raise AssertionError("unreachable") from None

    async def _follow(self, request: bytes,
                      context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[bytes]:
        try:
            req = self._request(request, context)
            path, _ = self.locate(req)
        except ApiError as err:
            code, details, trailer = to_grpc(err)
            await context.abort(code, details, trailing_metadata=trailer)
            return
        tail = req.get("tailLines")
        first, offset = _read_to_end(path, int(tail) if tail is not None else None)
        if first:
            yield encode({"text": first})
        while True:  # a component runs until `skiff down`: follow until the caller stops
            size = _size(path)
            if size < offset:  # truncated or replaced
                offset = 0
            if size > offset:
                with open(path, "rb") as f:
                    f.seek(offset)
                    data = f.read(size - offset)
                offset += len(data)
                yield encode({"text": data.decode(errors="replace")})
            await asyncio.sleep(FOLLOW_POLL_SECONDS)

    async def _metrics(self, request: bytes,
                       context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        """`kubectl top` (skiff.client.metrics): each Node's usage is its components'."""
        try:
            if self.authorize:
                check_caller(context, subresource="metrics")
        except ApiError as err:
            code, details, trailer = to_grpc(err)
            await context.abort(code, details, trailing_metadata=trailer)
        state = ClusterState.load(self.data_dir)
        stamp = rfc3339(time.time())
        nodes: dict[str, list[int]] = {}
        pods: list[Obj] = []
        windows: list[float] = []
        for pod, comp in mirror.static_pods(state.components if state else []):
            if self.nodes is not None and pod.node not in self.nodes:
                continue
            rate = self.usage.rates.get(comp.pid) if same_process(comp) else None
            if rate is None:
                continue
            cpu, window, memory = rate
            totals = nodes.setdefault(pod.node, [0, 0])
            totals[0] += cpu
            totals[1] += memory
            windows.append(window)
            pods.append({"node": pod.node, "namespace": mirror.NAMESPACE, "name": pod.name,
                         "timestamp": stamp, "window": window, "containers": [
                             {"name": pod.kubeadm, "cpu": cpu, "memory": memory}]})
        window = max(windows, default=1.0)
        return encode({"nodes": [{"name": n, "timestamp": stamp, "window": window,
                                  "cpu": cpu, "memory": memory}
                                 for n, (cpu, memory) in nodes.items()],
                       "pods": pods})

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(SERVICE, {
            "Logs": grpc.unary_unary_rpc_method_handler(self._logs),
            "LogsFollow": grpc.unary_stream_rpc_method_handler(self._follow),
            METRICS_METHOD_NAME: grpc.unary_unary_rpc_method_handler(self._metrics)})


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


async def start_log_servers(settings: Settings, usage: Usage
                            ) -> tuple[list[grpc.aio.Server], dict[str, int]]:
    """One mutual-TLS server per Node with its serving certificate; node → port."""
    servers, ports = [], {}
    ca = Path(settings.client_ca_file).read_bytes()
    for serving in settings.serving:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((ComponentLogs(
            settings.data_dir, {serving.node}, authorize=True, usage=usage).handler(),))
        credentials = grpc.ssl_server_credentials(
            [(serving.key.read_bytes(), serving.cert.read_bytes())], root_certificates=ca,
            require_client_auth=True)
        port = server.add_secure_port(f"{settings.node_ip}:0", credentials)
        if port == 0:
            raise OSError(f"control-plane: cannot bind a port on {settings.node_ip}")
        await server.start()
        servers.append(server)
        ports[serving.node] = port
    return servers, ports
