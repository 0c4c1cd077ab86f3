"""The control-plane node agent: what the kubelet of a kind control-plane node does for it.

`skiff up` starts it as the `control-plane` component (the supervisor restarts it like any
other; `skiff down` stops it). It

- registers the control-plane Node(s) of `mirror.node_names` with kubeadm's role label and
  `node-role.kubernetes.io/control-plane:NoSchedule` taint (the scheduler places no user pod
  there), posts their Ready status and renews their `kube-node-lease` Leases, so the node
  lifecycle controller and PodGC leave them and their pods alone;
- every `--sync-period` reconciles the mirror pods from cluster.json, as the kubelet's
  syncPod does (`pkg/kubelet/kubelet.go`): a missing one is created; one being deleted
  (`kubectl delete pod`), or whose hash or owning Node no longer matches, is deleted at once
  with its UID as precondition and created again; one whose component is gone is deleted;
  the status follows the process as the supervisor sees it. Deleting a mirror pod never
  touches the component;
- serves `/skiff.v1.Kubelet/Logs` and `LogsFollow` (skiff.client.logs) for those pods from
  the components' log files on each Node's kubelet endpoint: mutual TLS with that Node's
  kubelet serving certificate, open only to the apiserver's kubelet client and
  system:masters as the kubelets are (services/kubelet/serving.py), or, in an `--insecure`
  cluster, on the health port. So `kubectl logs -n kube-system kube-apiserver-<node>` reads
  the apiserver's log.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import platform
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

import skiff
from skiff.api.errors import ApiError, Reason
from skiff.cli.controlplane import mirror
from skiff.cli.localcluster import ClusterState, Component, health_of, same_process
from skiff.cli.supervisor import held_down, restartable
from skiff.client import ApiClient
from skiff.client.logs import SERVICE
from skiff.client.metrics import METRICS_METHOD_NAME
from skiff.clock import rfc3339, rfc3339_micro
from skiff.pki import APISERVER_KUBELET_CLIENT, MASTERS_GROUP, identity_of
from skiff.procfs import read_stat
from skiff.rpc.codec import CodecError, decode_map, encode
from skiff.rpc.errors import to_grpc
from skiff.service import Service, run_service

log = logging.getLogger(__name__)

Obj = dict[str, Any]
LEASE_NAMESPACE = "kube-node-lease"
FOLLOW_POLL_SECONDS = 0.2


@dataclass(frozen=True)
class Serving:
    """A Node's kubelet serving certificate (`--serving-certificate NODE=CERT,KEY`)."""

    node: str
    cert: Path
    key: Path


@dataclass
class Settings:
    apiserver: str
    data_dir: Path
    nodes: list[str]
    health_port: int = 0
    node_ip: str = "127.0.0.1"
    serving: list[Serving] = field(default_factory=list)
    client_ca_file: str = ""
    # The kubelet's PLEG notices a container change within its 1 s relist.
    sync_period: float = 1.0
    node_lease_duration_seconds: int = 40  # --node-lease-duration-seconds
    node_status_update_frequency: float = 10.0  # --node-status-update-frequency


# -- the supervisor's view of a component ---------------------------------------------------


def _boot_time() -> float:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    return 0.0


_BOOT = _boot_time()
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def started_at(pid: int) -> str:
    stat = read_stat(pid)
    if stat is None or not _BOOT:
        return ""
    return rfc3339(_BOOT + stat.start_ticks / _TICKS)


def view_of(data_dir: Path, comp: Component, *, healthy: bool = True
            ) -> mirror.ProcessView:
    running = same_process(comp)
    return mirror.ProcessView(
        running=running, held_down=held_down(data_dir, comp) or not restartable(comp),
        started_at=started_at(comp.pid) if running else "", restarts=comp.restarts,
        healthy=healthy)


async def healthy(comp: Component) -> bool:
    """The readiness probe: the component's health check as `skiff status` makes it
    (an apiserver that cannot confirm its data is current is not ready). A `--netns`
    component's recorded address is the gateway's, which the agent on its own host does
    not reach: there the running process is taken as ready."""
    if comp.netns or not same_process(comp):
        return same_process(comp)
    if not comp.health:  # etcd: its HTTP /health, a blocking call
        result = await asyncio.to_thread(lambda: asyncio.run(health_of(comp)))
    else:
        result = await health_of(comp)
    return result == "healthy"


# -- logs -----------------------------------------------------------------------------------


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
                nanocores = int((ticks - last[1]) / _TICKS / window * 1e9)
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


# -- the Nodes ------------------------------------------------------------------------------


def _capacity() -> dict[str, str]:
    memory = 0
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = int(line.split()[1])
    return {"cpu": str(os.cpu_count() or 1), "memory": f"{memory}Ki", "pods": "110"}


def _first_line(*paths: str) -> str:
    for path in paths:
        with contextlib.suppress(OSError, IndexError):
            line = Path(path).read_text().strip().splitlines()[0].strip()
            if line:
                return line
    return ""


def _os_image() -> str:
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        with contextlib.suppress(OSError):
            for line in Path(path).read_text().splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "PRETTY_NAME":
                    return value.strip().strip('"').strip("'")
    return f"{platform.system()} {platform.release()}".strip()


def system_info(arch: str) -> Obj:
    """Every `status.nodeInfo` field a kubelet reports, true for this host (clients such
    as the official Python client require them all); the control plane runs as the
    supervisor's processes, hence its runtime `skiff-supervisor://<version>`."""
    machine_id = _first_line("/etc/machine-id", "/var/lib/dbus/machine-id")
    system_uuid = _first_line("/sys/class/dmi/id/product_uuid").lower() or str(
        uuid.uuid5(uuid.NAMESPACE_OID, f"skiff-system-uuid:{machine_id or platform.node()}"))
    return {"machineID": machine_id, "systemUUID": system_uuid,
            "bootID": _first_line("/proc/sys/kernel/random/boot_id"),
            "kernelVersion": platform.release(), "osImage": _os_image(),
            "containerRuntimeVersion": f"skiff-supervisor://{skiff.__version__}",
            "kubeletVersion": f"skiff-{skiff.__version__}",
            "kubeProxyVersion": f"skiff-{skiff.__version__}",
            "operatingSystem": os.uname().sysname.lower(), "architecture": arch}


@dataclass
class NodeAgent:
    settings: Settings
    api: ApiClient
    ports: dict[str, int]
    uids: dict[str, str] = field(default_factory=dict)
    host_ips: dict[str, str] = field(default_factory=dict)  # netns → its host's address
    usage: Usage = field(default_factory=Usage)
    _ready_since: str = field(default_factory=lambda: rfc3339(time.time()))

    def _labels(self, node: str) -> dict[str, str]:
        return {"kubernetes.io/hostname": node, "kubernetes.io/os": "linux",
                "kubernetes.io/arch": {"x86_64": "amd64", "aarch64": "arm64"}.get(
                    platform.machine(), platform.machine()),
                mirror.ROLE_LABEL: "",
                "node.kubernetes.io/exclude-from-external-load-balancers": ""}

    def _status(self, node: str) -> Obj:
        now = rfc3339(time.time())

        def condition(kind: str, status: str, reason: str, message: str) -> Obj:
            return {"type": kind, "status": status, "reason": reason, "message": message,
                    "lastHeartbeatTime": now, "lastTransitionTime": self._ready_since}

        capacity = _capacity()
        return {
            "capacity": capacity, "allocatable": dict(capacity),
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                          "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                          "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID",
                          "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status")],
            "addresses": [{"type": "InternalIP", "address": self.settings.node_ip},
                          {"type": "Hostname", "address": node}],
            "daemonEndpoints": {"kubeletEndpoint": {
                "Port": self.ports.get(node, self.settings.health_port)}},
            "nodeInfo": system_info(self._labels(node)["kubernetes.io/arch"]),
        }

    async def register(self, node: str) -> None:
        """Create the Node, or adopt one left from before (labels, taint, status)."""
        body: Obj = {"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": node, "labels": self._labels(node)},
                     "spec": {"taints": [dict(mirror.CONTROL_PLANE_TAINT)]}}
        try:
            created = await self.api.create(body)
        except ApiError as err:
            if err.reason != Reason.ALREADY_EXISTS:
                raise
            created = await self.api.get("nodes", node)
            labels = created["metadata"].setdefault("labels", {})
            taints = created.setdefault("spec", {}).setdefault("taints", [])
            changed = any(labels.get(k) != v for k, v in self._labels(node).items())
            labels.update(self._labels(node))
            if not any(t.get("key") == mirror.ROLE_LABEL for t in taints):
                taints.append(dict(mirror.CONTROL_PLANE_TAINT))
                changed = True
            if changed:
                created = await self.api.update(created)
        await self.write_status(node, created)
        self.uids[node] = str(created["metadata"]["uid"])  # registered: its pods may come

    async def write_status(self, node: str, current: Obj | None = None) -> None:
        """Post the Node's status; a conflict (a controller wrote the Node meanwhile,
        e.g. nodeipam its podCIDR) is retried on a fresh copy, as the kubelet does."""
        for attempt in range(5):
            body = current if current is not None and attempt == 0 else \
                await self.api.get("nodes", node)
            body["status"] = self._status(node)
            try:
                await self.api.update_status(body)
                return
            except ApiError as err:
                if err.reason != Reason.CONFLICT or attempt == 4:
                    raise

    async def renew_lease(self, node: str) -> None:
        now = rfc3339_micro(time.time())
        spec = {"holderIdentity": node,
                "leaseDurationSeconds": self.settings.node_lease_duration_seconds,
                "renewTime": now}
        try:
            lease = await self.api.get("leases", node, LEASE_NAMESPACE)
        except ApiError as err:
            if err.reason != Reason.NOT_FOUND:
                raise
            await self.api.create({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": node, "namespace": LEASE_NAMESPACE,
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Node",
                                                  "name": node, "uid": self.uids[node]}]},
                "spec": {**spec, "acquireTime": now}})
            return
        lease["spec"].update(spec)
        await self.api.update(lease)

    async def heartbeat(self) -> None:
        lease_every = self.settings.node_lease_duration_seconds / 4
        status_every = self.settings.node_status_update_frequency
        last_lease = last_status = 0.0
        while True:
            now = time.monotonic()
            for node in self.settings.nodes:
                try:
                    if node not in self.uids:
                        await self.register(node)
                        last_status = now
                    if now - last_lease >= lease_every:
                        await self.renew_lease(node)
                    if now - last_status >= status_every:
                        await self.write_status(node)
                except ApiError as err:
                    if err.reason == Reason.NOT_FOUND:  # the Node was deleted: register
                        self.uids.pop(node, None)
                    log.warning("control-plane node heartbeat failed", extra={
                        "node": node, "error": err.message})
            if now - last_lease >= lease_every:
                last_lease = now
            if now - last_status >= status_every:
                last_status = now
            await asyncio.sleep(min(lease_every, status_every, 1.0))

    # -- mirror pods ------------------------------------------------------------------------

    async def sync_pods(self, start_time: str) -> None:
        state = ClusterState.load(self.settings.data_dir)
        if state is None:
            return
        # `skiff up --netns`: each component's own host address
        self.host_ips = {str(h.get("netns")): str(h.get("ip"))
                         for h in ((state.netns or {}).get("hosts") or {}).values()}
        self.usage.sample([comp.pid for _, comp in mirror.static_pods(state.components)
                           if same_process(comp)])
        components = [comp for _, comp in mirror.static_pods(state.components)]
        health = dict(zip([c.name for c in components], await asyncio.gather(
            *(healthy(c) for c in components)), strict=True))
        desired: dict[str, list[tuple[mirror.StaticPod, Component]]] = {}
        for pod, comp in mirror.static_pods(state.components):
            desired.setdefault(pod.node, []).append((pod, comp))
        for node in self.settings.nodes:
            if node not in self.uids:
                continue  # not registered (yet): its pods come once it is
            listed = await self.api.list("pods", None, field_selector=f"spec.nodeName={node}")
            existing = {p["metadata"]["name"]: p for p in listed["items"]
                        if mirror.CONFIG_MIRROR in (p["metadata"].get("annotations") or {})}
            for pod, comp in desired.get(node, []):
                try:
                    await self._sync_one(pod, comp, existing.pop(pod.name, None), start_time,
                                         healthy=health.get(comp.name, True))
                except ApiError as err:
                    log.warning("mirror pod sync failed", extra={
                        "pod": pod.name, "error": err.message})
            for orphan in existing.values():  # its component is gone
                await self._delete(orphan)

    async def _delete(self, pod: Obj) -> None:
        meta = pod["metadata"]
        with contextlib.suppress(ApiError):
            await self.api.delete("pods", meta["name"], meta["namespace"],
                                  grace_period_seconds=0, uid=meta.get("uid"))
            log.info("mirror pod deleted", extra={"pod": meta["name"]})

    async def _sync_one(self, pod: mirror.StaticPod, comp: Component, current: Obj | None,
                        start_time: str, *, healthy: bool = True) -> None:
        digest = pod.config_hash(comp)
        if current is not None:
            meta = current["metadata"]
            owners = meta.get("ownerReferences") or []
            if meta.get("deletionTimestamp") or \
                    (meta.get("annotations") or {}).get(mirror.CONFIG_MIRROR) != digest or \
                    not any(o.get("uid") == self.uids[pod.node] for o in owners):
                await self._delete(current)  # the kubelet recreates a deleted mirror pod
                current = None
        now = rfc3339(time.time())
        if current is None:
            current = await self.api.create(mirror.mirror_pod(
                pod, comp, node_uid=self.uids[pod.node], seen=rfc3339_micro(time.time())))
            log.info("mirror pod created", extra={"pod": pod.name})
        view = view_of(self.settings.data_dir, comp, healthy=healthy)
        status = mirror.pod_status(pod, comp, view, host_ip=self.settings.node_ip,
                                   start_time=start_time, now=now,
                                   previous=current.get("status"),
                                   pod_ip=self.host_ips.get(comp.netns, ""))
        if mirror.status_fingerprint(status) != mirror.status_fingerprint(
                current.get("status") or {}):
            body = dict(current)
            body["status"] = status
            await self.api.update_status(body)

    async def run_pods(self) -> None:
        state = ClusterState.load(self.settings.data_dir)
        start_time = rfc3339(state.started if state else time.time())
        while True:
            try:
                await self.sync_pods(start_time)
            except ApiError as err:
                log.warning("mirror pod sync failed", extra={"error": err.message})
            await asyncio.sleep(self.settings.sync_period)


async def run(settings: Settings, service: Service, usage: Usage) -> None:
    servers, ports = ([], {}) if not settings.serving else \
        await start_log_servers(settings, usage)
    try:
        async with ApiClient(settings.apiserver, user_agent="skiff-control-plane") as api:
            agent = NodeAgent(settings, api, ports, usage=usage)
            await service.ready()
            tasks = [asyncio.create_task(agent.heartbeat()),
                     asyncio.create_task(agent.run_pods())]
            stop = asyncio.create_task(service.stop.wait())
            # Crash-only: a loop that died ends the process, which the supervisor restarts.
            done, _ = await asyncio.wait([stop, *tasks], return_when=asyncio.FIRST_COMPLETED)
            for task in [stop, *tasks]:
                task.cancel()
            await asyncio.gather(stop, *tasks, return_exceptions=True)
            for task in done:
                if task is not stop:
                    task.result()  # its exception, if any
    finally:
        for server in servers:
            await server.stop(1)


def _serving(text: str) -> Serving:
    node, _, files = text.partition("=")
    cert, _, key = files.partition(",")
    if not (node and cert and key):
        raise argparse.ArgumentTypeError(f"expected NODE=CERT,KEY, got {text!r}")
    return Serving(node, Path(cert), Path(key))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m skiff.cli.controlplane",
                                     description="the control-plane Nodes and mirror pods")
    parser.add_argument("--apiserver", required=True)
    parser.add_argument("--health-port", type=int, required=True)
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--nodes", default=mirror.node_name(1),
                        help="the control-plane Nodes, comma-separated")
    parser.add_argument("--node-ip", default="127.0.0.1")
    parser.add_argument("--serving-certificate", type=_serving, action="append", default=[],
                        metavar="NODE=CERT,KEY",
                        help="a Node's kubelet serving certificate (mutual TLS for logs)")
    parser.add_argument("--client-ca-file", default="",
                        help="the CA that signs the clients of the log service")
    parser.add_argument("--sync-period", type=float, default=1.0, metavar="SECONDS")
    parser.add_argument("--node-lease-duration-seconds", type=int, default=40)
    parser.add_argument("--node-status-update-frequency", type=float, default=10.0,
                        metavar="SECONDS")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    if args.serving_certificate and not args.client_ca_file:
        parser.error("--serving-certificate needs --client-ca-file")
    settings = Settings(
        apiserver=args.apiserver, data_dir=args.data_dir,
        nodes=[n for n in args.nodes.split(",") if n], health_port=args.health_port,
        node_ip=args.node_ip, serving=args.serving_certificate,
        client_ca_file=args.client_ca_file, sync_period=args.sync_period,
        node_lease_duration_seconds=args.node_lease_duration_seconds,
        node_status_update_frequency=args.node_status_update_frequency)
    # --insecure: the logs are on the health port, as the kubelets' are.
    usage = Usage()
    handlers = [] if settings.serving else [
        ComponentLogs(settings.data_dir, usage=usage).handler()]

    async def body(service: Service) -> None:
        await run(settings, service, usage)

    run_service("control-plane", body, health_address=f"127.0.0.1:{args.health_port}",
                log_level=args.log_level, handlers=handlers)
