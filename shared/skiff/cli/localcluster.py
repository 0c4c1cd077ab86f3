"""`skiff up`, `skiff down`, `skiff status`: a whole cluster as local processes.

etcd, the apiserver and every other service that is installed (scheduler,
controller-manager, one kubelet per node) run as child processes on free loopback ports,
each with its log under `<data-dir>/logs/`. The cluster's state (PIDs, addresses) is
written to `<data-dir>/cluster.json`, which is how `skiff down` stops each process by PID
and how every other command finds the apiserver.

The fence agent (when installed) runs in local mode over the same data dir: it may kill a
node's kubelet and pods (power fencing, `<data-dir>/fenced/<node>` marks the node) and start
the kubelet again on unfence, recording the new PID in cluster.json. So a fenced kubelet's
exit is expected, and stopping the cluster also stops kubelets the fence agent started.
Every kubelet gets the shared `--volume-root <data-dir>/volumes` and the node annotation
`skiff.io/fence-agent=power`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import signal
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from skiff.api.serviceips import DEFAULT_SERVICE_CIDR, dns_service_ip
from skiff.cgroupfs import remove_recorded
from skiff.cli.config import ClusterConfig
from skiff.cli.podgroups import end_pod_groups, kubelet_root_dirs, summary
from skiff.cli.processes import (
    Process,
    StartError,
    etcd_process,
    find_etcd,
    free_port,
    service_process,
    wait_etcd_healthy,
    wait_grpc_healthy,
)
from skiff.cli.sandboxes import isolation_warning, pod_network_namespace, remove_sandboxes
from skiff.cli.security import ClusterSecurity, prepare

STATE_FILE = "cluster.json"
FENCE_AGENT_ANNOTATION = "skiff.io/fence-agent"
ZONES = ("zone-a", "zone-b", "zone-c")
# The nodeipam controller runs in every cluster `skiff up` makes: a pod created before its
# Node has a podCIDR waits for one (ContainerCreating) rather than run without a sandbox.
POD_CIDR_WAIT = "30s"


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
    restarts: int = 0  # times the supervisor (cli/supervisor.py) started it again


@dataclass
class ClusterState:
    api: str
    data_dir: str
    components: list[Component]
    started: float
    netns: dict[str, Any] | None = None  # `skiff up --netns`: its namespaces (cli/netns.py)
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


def service_available(module: str) -> bool:
    """Whether `python -m module` exists in this installation (services land over time)."""
    try:
        return importlib.util.find_spec(f"{module}.__main__") is not None
    except ModuleNotFoundError:
        return False


@dataclass
class LocalCluster:
    data_dir: Path
    nodes: int = 3
    config: ClusterConfig = field(default_factory=ClusterConfig)
    processes: list[Process] = field(default_factory=list)
    components: list[Component] = field(default_factory=list)
    insecure: bool = False  # `skiff up --insecure`: the old plaintext mode (warned)
    apiserver_processes: int = 1  # > 1: `--processes`, sharing the ports (SO_REUSEPORT)
    # Seconds from the start of `start()` until each component answered its health check.
    start_seconds: dict[str, float] = field(default_factory=dict)

    def _record(self, proc: Process, address: str, health: str) -> None:
        assert proc.pid is not None
        self.processes.append(proc)
        self.components.append(Component(proc.name, proc.pid, address, health,
                                         str(proc.log_path), proc.argv, env=proc.env))

    def start(self, *, echo: Any = print) -> ClusterState:
        running = ClusterState.load(self.data_dir)
        if running and any(pid_alive(c.pid) for c in running.components):
            raise StartError(f"a cluster is already running from {self.data_dir} (API "
                             f"{running.api}); stop it with `skiff down` first")
        find_etcd()
        warning = isolation_warning(self.config.sections.get("kubelet", {}))
        if warning:
            echo(warning)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        logs = self.data_dir / "logs"
        config_dir = self.data_dir / "config"
        env = {"SKIFF_LOG_FORMAT": "json"}
        sec = self._sec = self.security(echo)
        starting: list[tuple[Process, str]] = []
        etcd: Process | None = None
        apiserver: Process | None = None
        try:
            etcd_port, peer_port = free_port(), free_port()
            etcd_url = f"{sec.scheme}://127.0.0.1:{etcd_port}"
            etcd = etcd_process(self.data_dir, client_port=etcd_port, peer_port=peer_port,
                                tls=sec.etcd_tls())
            # Independent starts overlap (issue 15): the apiserver's interpreter loads while
            # etcd comes up (it retries etcd), and every other component while both do.
            began = time.monotonic()
            etcd.start()
            api_port, http_port = free_port(), free_port()
            api_target = f"127.0.0.1:{api_port}"
            apiserver = service_process(
                "apiserver", "skiff.apiserver",
                ["--etcd-servers", etcd_url,
                 "--secure-port", str(api_port), "--http-port", str(http_port),
                 *sec.apiserver_args(),
                 "--service-account-signing-key-file",
                 str(self.data_dir / "pki" / "service-account.key"),
                 *(["--processes", str(self.apiserver_processes)]
                   if self.apiserver_processes > 1 else []),
                 *self.config.flags("apiserver", config_dir)],
                log_dir=logs, env=env)
            apiserver.start()
            self.kube_api_address = f"127.0.0.1:{http_port}"
            # Pods' ServiceAccount volume carries the CA, so in-cluster clients verify HTTPS.
            self.root_ca_file = str(sec.pki.ca) if sec.pki is not None else ""
            for name, module, extra in self._services():
                if not service_available(module):
                    continue
                health_port = free_port()
                proc = service_process(name, module, [
                    "--apiserver", api_target, "--health-port", str(health_port), *extra],
                    log_dir=logs, env={**env, **sec.component_env(name)})
                proc.start()
                starting.append((proc, f"127.0.0.1:{health_port}"))
            wait_etcd_healthy(etcd, etcd_port, tls=sec.etcd_tls())
            self._record(etcd, etcd_url, "")
            echo(_line("etcd", etcd, etcd_url))
            self.start_seconds["etcd"] = time.monotonic() - began
            wait_grpc_healthy(apiserver, api_target, credentials=sec.credentials())
            self._record(apiserver, api_target, api_target)
            echo(_line("apiserver", apiserver, api_target))
            self.start_seconds["apiserver"] = time.monotonic() - began
            kubeconfig = write_kubeconfig(self.data_dir,
                                          f"{sec.scheme}://127.0.0.1:{http_port}",
                                          security=sec)
            echo(f"{'kubectl':<22} {'':<12} {sec.scheme}://127.0.0.1:{http_port:<8}   "
                 f"export KUBECONFIG={kubeconfig}")
            if sec.pki is not None:
                echo(f"{'credentials':<22} {'':<12} {sec.pki.directory}   (CA, admin "
                     f"certificate in system:masters; files 0600)")
            for proc, health in starting:
                wait_grpc_healthy(proc, health)
                self._record(proc, health, health)
                echo(_line(proc.name, proc, health))
                self.start_seconds[proc.name] = time.monotonic() - began
        except BaseException:
            self.stop()
            for left in [etcd, apiserver, *(p for p, _ in starting)]:
                if left is not None and left not in self.processes:  # started, not recorded
                    left.stop()
            raise
        state = ClusterState(api=api_target, data_dir=str(self.data_dir),
                             components=self.components, started=time.time())
        state.save(self.data_dir)
        return state

    def security(self, echo: Any = print, *, hosts: tuple[str, ...] = ()) -> ClusterSecurity:
        """The PKI (made once, in <data-dir>/pki) or the announced insecure mode."""
        return prepare(self.data_dir, insecure=self.insecure,
                       nodes=[*(f"node-{i}" for i in range(1, self.nodes + 1)),
                              *self.control_plane_nodes()], hosts=hosts,
                       echo=echo, service_cidr=self._service_cidr())

    def control_plane_nodes(self) -> list[str]:
        """The Nodes the control plane's mirror pods are on (cli/controlplane)."""
        from skiff.cli.controlplane.mirror import node_names

        return node_names(1)

    def _control_plane_agent(self) -> tuple[str, str, list[str]]:
        """The control-plane node agent: the Nodes, mirror pods and logs of kube-system's
        control plane; with a PKI each Node's kubelet serving certificate for its logs."""
        nodes = self.control_plane_nodes()
        args = ["--data-dir", str(self.data_dir), "--nodes", ",".join(nodes)]
        sec: ClusterSecurity | None = getattr(self, "_sec", None)
        if sec is not None and sec.pki is not None:
            args += ["--client-ca-file", str(sec.pki.ca)]
            for node in nodes:
                pair = sec.pki.kubelet_serving[node]
                args += ["--serving-certificate", f"{node}={pair.cert},{pair.key}"]
        return ("control-plane", "skiff.cli.controlplane",
                [*args, *self.config.flags("controlPlane", self.data_dir / "config")])

    def _service_cidr(self) -> str:
        return str(self.config.sections.get("apiserver", {}).get("serviceClusterIPRange")
                   or DEFAULT_SERVICE_CIDR)

    def _services(self) -> list[tuple[str, str, list[str]]]:
        config_dir = self.data_dir / "config"
        services = [
            ("scheduler", "skiff.scheduler", [*self.config.flags("scheduler", config_dir),
                                              "--leader-elect-identity", "scheduler"]),
            ("controller-manager", "skiff.controller_manager",
             [*self.config.flags("controllerManager", config_dir),
              "--local-volume-root", str(self.data_dir / "volumes"),
              "--leader-elect-identity", "controller-manager"]),
        ]
        for i in range(1, self.nodes + 1):
            node = f"node-{i}"
            labels = f"topology.kubernetes.io/zone={ZONES[(i - 1) % len(ZONES)]}"
            services.append((f"kubelet-{node}", "skiff.kubelet", [
                "--node-name", node, "--root-dir", str(self.data_dir / "nodes" / node),
                "--node-labels", labels,
                "--node-annotations", f"{FENCE_AGENT_ANNOTATION}=power",
                "--volume-root", str(self.data_dir / "volumes"),
                *(["--kube-api-address", self.kube_api_address]
                  if getattr(self, "kube_api_address", "") else []),
                *(["--root-ca-file", self.root_ca_file]
                  if getattr(self, "root_ca_file", "") else []),
                "--pod-network-namespace", pod_network_namespace(self.data_dir),
                "--pod-cidr-wait", POD_CIDR_WAIT,  # nodeipam runs: pods wait for a podCIDR
                "--cluster-dns", dns_service_ip(self._service_cidr()),  # kube-dns's address
                *self.config.flags("kubelet", config_dir)]))
        services.append(self._control_plane_agent())
        services.append(("fence-agent", "skiff.fence_agent",
                         ["--mode", "local", "--data-dir", str(self.data_dir)]))
        return services

    def _stop_adopted(self, timeout: float = 10.0) -> None:
        """Stop the kubelets the fence agent started again (recorded in cluster.json, not
        our children), each only if its /proc cmdline is still its recorded argv."""
        state = ClusterState.load(self.data_dir)
        ours = {p.pid for p in self.processes}
        for comp in [c for c in state.components if c.pid not in ours] if state else []:
            stop_component(comp, timeout=timeout)

    def stop(self) -> str:
        """Stop every service, then end the pods' process groups (the kubelets leave them
        running when they stop); returns how many pod groups were ended, as one line."""
        state = ClusterState.load(self.data_dir)
        roots = kubelet_root_dirs(self.data_dir, [
            c.argv for c in (state.components if state else self.components)
            if c.name.startswith("kubelet-")])
        for proc in reversed(self.processes):
            proc.stop()
        self._stop_adopted()
        ended = end_pod_groups(roots)
        remove_sandboxes(roots, pod_network_namespace(self.data_dir))
        remove_recorded(roots)  # the pods' cgroups (AU8)
        with contextlib.suppress(OSError):
            (self.data_dir / STATE_FILE).unlink()
        return summary(ended)


def write_kubeconfig(data_dir: Path, server: str, *,
                     security: ClusterSecurity | None = None) -> Path:
    """A kubeconfig for the real kubectl, pointing at the apiserver's HTTP front; with a
    PKI it carries the CA and the admin's client certificate (AU1)."""
    sec = security or ClusterSecurity(None)
    path = data_dir / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "skiff",
        "clusters": [{"name": "skiff", "cluster": sec.kubeconfig_cluster(server)}],
        "users": [{"name": "skiff", "user": sec.kubeconfig_user()}],
        "contexts": [{"name": "skiff", "context": {"cluster": "skiff", "user": "skiff",
                                                   "namespace": "default"}}],
    }, indent=2))
    return path


def _line(name: str, proc: Process, address: str) -> str:
    return f"{name:<22} pid {proc.pid:<8} {address:<24} log {proc.log_path}"


def stop_by_state(data_dir: Path, *, timeout: float = 10.0) -> list[str]:
    """`skiff down`: stop every recorded PID in reverse start order, each before the next
    (SIGTERM, then SIGKILL after `timeout`), so a service can still reach the apiserver
    while it shuts down (e.g. the controller-manager releasing its lease)."""
    state = ClusterState.load(data_dir)
    if state is None:
        raise StartError(f"no cluster state in {data_dir}; nothing to stop "
                         "(was it started with `skiff up --detach`?)")
    stopped = []
    if state.supervisor_pid:  # first, so that nothing stopped below is started again
        from skiff.cli.supervisor import stop_supervisor

        stopped += stop_supervisor(state.supervisor_pid, timeout=timeout,
                                   data_dir=data_dir)
        state = ClusterState.load(data_dir) or state  # with the PIDs it started last
    roots = kubelet_root_dirs(data_dir, [c.argv for c in state.components
                                         if c.name.startswith("kubelet-")])
    for comp in reversed(state.components):
        stop_component(comp, timeout=timeout)
        stopped.append(f"{comp.name:<22} pid {comp.pid:<8} stopped")
    # The kubelets leave their containers running when they stop; the cluster does not.
    stopped.append(summary(end_pod_groups(roots)))
    remove_sandboxes(roots, pod_network_namespace(data_dir))
    remove_recorded(roots)  # the pods' cgroups (AU8), once their processes are gone
    with contextlib.suppress(OSError):
        (data_dir / STATE_FILE).unlink()
    return stopped


async def health_of(comp: Component) -> str:
    if not pid_alive(comp.pid):
        return "exited"
    if not comp.health:
        import ssl
        import urllib.request
        context = None
        if comp.address.startswith("https://"):  # etcd with TLS: its own files prove us
            context = ssl.create_default_context(cafile=_flag_of(comp, "--trusted-ca-file"))
            context.load_cert_chain(_flag_of(comp, "--cert-file"),
                                    _flag_of(comp, "--key-file"))
        try:
            with urllib.request.urlopen(f"{comp.address}/health", timeout=1,
                                        context=context) as resp:
                return "healthy" if b'"health":"true"' in resp.read() else "unhealthy"
        except OSError:
            return "unreachable"
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from skiff.client.credentials import Credentials

    creds = Credentials.from_env()
    # an apiserver's mTLS port, or a --netns gateway's (its health is the apiserver's)
    secure = creds.secure and ("--tls-cert-file" in comp.argv or comp.name == "gateway")
    async with (grpc.aio.secure_channel(comp.health, creds.grpc_credentials()) if secure
                else grpc.aio.insecure_channel(comp.health)) as channel:
        try:
            resp = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=1.0)
        except grpc.aio.AioRpcError:
            return "unreachable"
    # NOT_SERVING: starting, or (an apiserver) unable to confirm its data is current.
    return "healthy" if resp.status == health_pb2.HealthCheckResponse.SERVING else "not-serving"


def _flag_of(comp: Component, flag: str) -> str:
    with contextlib.suppress(ValueError, IndexError):
        return comp.argv[comp.argv.index(flag) + 1]
    return ""


STATUS_COLUMNS = ["NAME", "PID", "ADDRESS", "HEALTH", "ROLE", "RESTARTS", "LOG"]


def status_rows(state: ClusterState) -> list[list[str]]:
    """One row per component (STATUS_COLUMNS): a component `skiff chaos stop` holds down
    is `stopped`; ROLE from skiff.cli.topology (etcd leader/follower, Lease holders)."""
    from skiff.cli.supervisor import stopped_marker
    from skiff.cli.topology import roles

    async def collect() -> tuple[list[str], dict[str, str]]:
        healths = asyncio.gather(*(health_of(c) for c in state.components))
        return list(await healths), await roles(state)

    healths, role_of = asyncio.run(collect())
    data_dir = Path(state.data_dir)
    return [[c.name, str(c.pid), c.address,
             "stopped" if h == "exited" and stopped_marker(data_dir, c.name).exists() else h,
             role_of.get(c.name, "") or "-", str(c.restarts), c.log]
            for c, h in zip(state.components, healths, strict=True)]
