"""Wiring of the kubelet process: settings → API client, runtime, nodes, informer, workers.

One process normally serves one node. With `--runtime fake --hollow-nodes N` it serves N
hollow nodes named `<node-name>-0` … `<node-name>-(N-1)` from one shared pod informer (one
watch for all of them) and one API connection, for scale tests of the control plane.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import random
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from skiff.api.quantity import bytes_
from skiff.api.types import Obj
from skiff.client import ApiClient, EventRecorder, Informer
from skiff.client.backoff import Backoff
from skiff.client.batch import batching
from skiff.clock import REAL_CLOCK
from skiff.kubelet.admission import Admission
from skiff.kubelet.certmanager import manage_certificates
from skiff.kubelet.cgroups import (
    NOT_ENFORCED_MESSAGE,
    CgroupLayout,
    CgroupManager,
    detect_node,
)
from skiff.kubelet.crashing import KillService
from skiff.kubelet.dnsconfig import ResolvConf, parse_resolv_conf
from skiff.kubelet.eviction import EvictionManager, parse_thresholds
from skiff.kubelet.kubelet import Kubelet
from skiff.kubelet.logs import LogRotation, LogService, running_logs
from skiff.kubelet.metrics import ResourceMetrics, running_containers
from skiff.kubelet.node import NodeAgent, heartbeat_client
from skiff.kubelet.noderoutes import NodeRoutes, bind_node_netns
from skiff.kubelet.pod_environment import PodEnvironment
from skiff.kubelet.poddir import private_dir
from skiff.kubelet.projected import kubernetes_service_env
from skiff.kubelet.runtime import ContainerRuntime
from skiff.kubelet.runtime.fake import FakeRuntime
from skiff.kubelet.runtime.images import load_image_commands
from skiff.kubelet.runtime.process import ProcessRuntime, base_environment
from skiff.kubelet.sandbox import (
    NOT_ISOLATED_MESSAGE,
    PodNetwork,
    SandboxManager,
    sandbox_supported,
)
from skiff.kubelet.sandbox.landlock import NO_LANDLOCK_MESSAGE
from skiff.kubelet.sandbox.landlock import abi_version as landlock_abi
from skiff.kubelet.serviceproxy import ServiceProxy
from skiff.kubelet.serving import KubeletTls, start_kubelet_server
from skiff.kubelet.settings import (
    KubeletSettings,
    parse_grace_periods,
    parse_labels,
    parse_settings,
    parse_taints,
)
from skiff.kubelet.streaming import ExecService
from skiff.kubelet.volumes import VolumeManager
from skiff.service import Service, run_service
from skiff.tasks import cancel_tasks
from skiff.tracing import tracer

__all__ = ["main", "run_kubelet"]

log = logging.getLogger(__name__)


def sandbox_manager(settings: KubeletSettings, *, api: ApiClient, node_name: str,
                    root: Path) -> SandboxManager | None:
    """SB1: pod sandboxes when running as root (and not `--sandbox=none`); else say once
    that pods are not isolated (each pod also gets an event)."""
    if settings.runtime == "fake":
        return None
    if not sandbox_supported(settings.sandbox):
        log.warning(NOT_ISOLATED_MESSAGE, extra={"node": node_name})
        return None
    abi = landlock_abi()
    if abi < 1:  # AU8: said once, the sandboxes go on without it
        log.warning(NO_LANDLOCK_MESSAGE, extra={"node": node_name})
    else:
        log.info("containers are confined by Landlock", extra={"node": node_name,
                                                               "landlockABI": abi})
    if settings.pod_network == "node":  # JN1: the node's own netns holds its pod bridge
        bind_node_netns(settings.pod_network_namespace)
    return SandboxManager(api=api, node_name=node_name, network=PodNetwork(
        namespace=settings.pod_network_namespace, ipam_dir=root / "ipam"),
        pod_cidr_wait=settings.pod_cidr_wait)


def node_cgroups(settings: KubeletSettings, *, layout_found: CgroupLayout | None,
                 node_name: str, root: Path) -> CgroupManager | None:
    """AU8: the node's cgroups when the kubelet may use them; else one line says why."""
    if settings.runtime == "fake":
        return None
    if os.geteuid() != 0:
        reason = "the kubelet is not running as root"
        manager = None
    else:
        manager, reason = CgroupManager.create(layout=layout_found, node_name=node_name,
                                               root_dir=root)
    if manager is None:
        log.warning(NOT_ENFORCED_MESSAGE.format(reason=reason), extra={"node": node_name})
    else:
        log.info("containers run in cgroups", extra={
            "node": node_name, "cgroupVersion": manager.layout.version,
            "parent": str(next(iter(manager.layout.bases.values())) / manager.node_dir)})
    return manager


async def run_kubelet(settings: KubeletSettings, service: Service, logs: LogService,
                      metrics: ResourceMetrics | None = None,
                      streams: ExecService | None = None, *, kubelet_port: int = 0) -> None:
    """`kubelet_port`: the port of logs, exec and metrics the Node publishes (default:
    the health port, which serves them in the insecure mode)."""
    fake = FakeRuntime() if settings.runtime == "fake" else None  # one for all hollow nodes
    root = Path(settings.root_dir)
    private_dir(root)  # pods, volumes and claims below it are no local user's (AU11)
    names = settings.node_names()
    capacity = {"cpu": settings.cpu_capacity(), "memory": settings.memory_capacity(),
                "pods": str(settings.max_pods)}
    async with ApiClient(settings.apiserver, user_agent="skiff-kubelet", retry_seconds=60,
                         **batching(settings.write_batch_size, settings.write_batch_delay)
                         ) as api, contextlib.AsyncExitStack() as stack:
        heartbeats = [await stack.enter_async_context(heartbeat_client(settings))
                      for _ in range(heartbeat_connections(len(names),
                                                  settings.hollow_nodes_per_connection))]
        kubelets: list[Kubelet] = []
        agents: list[NodeAgent] = []
        evictions: list[EvictionManager] = []
        # Hollow nodes check their stored Node in one shared informer, not a GET each; it
        # and the pod informer keep only this process's nodes and their pods.
        own = frozenset(names)
        nodes = (Informer(api, "nodes", keep=lambda n: n["metadata"].get("name") in own)
                 if len(names) > 1 else None)
        volumes = VolumeManager(api=api, volume_root=Path(settings.volume_root)
                                if settings.volume_root else root / "volumes")
        image_commands = load_image_commands(settings.image_commands)
        cgroup_layout = detect_node(settings.cgroup_root) if settings.runtime == "process" \
            else None
        for index, name in enumerate(names):
            cgroups = node_cgroups(settings, layout_found=cgroup_layout, node_name=name,
                                   root=root / name if len(names) > 1 else root)
            sandboxes = sandbox_manager(settings, api=api, node_name=name,
                                        root=root / name if len(names) > 1 else root)
            # SB1, AU8: the process runtime makes this node's pod sandboxes and cgroups
            # (when it may)
            runtime: ContainerRuntime = fake or ProcessRuntime(sandboxes=sandboxes,
                                                               cgroups=cgroups)
            env = PodEnvironment(
                api=api, recorder=EventRecorder(api, component="kubelet", host=name),
                runtime=runtime, root_dir=root / name if len(names) > 1 else root,
                node_name=name, clock=REAL_CLOCK, tracer=tracer("skiff.kubelet"),
                backoff=Backoff(initial=settings.container_restart_backoff_base,
                                maximum=settings.container_restart_backoff_max,
                                clock=REAL_CLOCK),
                base_env={**base_environment(),
                          **kubernetes_service_env(settings.kube_api_address)},
                volumes=volumes, root_ca_file=settings.root_ca_file,
                mount_volumes=sandboxes is not None,
                image_commands=image_commands,
                allocatable={"cpu": capacity["cpu"], "memory": capacity["memory"]},
                cluster_dns=tuple(settings.cluster_dns_addresses()),
                cluster_domain=settings.cluster_domain, resolv_conf=settings.resolv_conf,
                cgroups=cgroups)
            kubelet = Kubelet(env=env, worker_backoff=settings.pod_worker_backoff_period)
            eviction = EvictionManager(
                kubelet=kubelet, memory_capacity=bytes_(capacity["memory"]),
                hard=parse_thresholds(settings.eviction_hard, flag="--eviction-hard"),
                soft=parse_thresholds(settings.eviction_soft, flag="--eviction-soft"),
                soft_grace_periods=parse_grace_periods(settings.eviction_soft_grace_period),
                max_pod_grace_period=settings.eviction_max_pod_grace_period,
                pressure_transition_period=settings.eviction_pressure_transition_period,
                interval=settings.eviction_monitoring_interval, clock=REAL_CLOCK,
                nodefs=env.root_dir if settings.runtime == "process" else None)
            kubelet.admission = Admission(allocatable=capacity,
                                          memory_pressure=eviction.under_pressure,
                                          disk_pressure=eviction.under_disk_pressure)
            agent = NodeAgent(
                api=api, heartbeat=heartbeats[index % len(heartbeats)], clock=REAL_CLOCK,
                node_name=name,
                labels=parse_labels(settings.node_labels),
                annotations=parse_labels(settings.node_annotations, flag="--node-annotations"),
                taints=parse_taints(settings.register_with_taints), capacity=capacity,
                health_port=kubelet_port or settings.health_port, node_ip=settings.node_ip,
                lease_duration=settings.node_lease_duration_seconds,
                renew_interval=settings.lease_renew_interval,
                status_update_frequency=settings.node_status_update_frequency,
                status_report_frequency=settings.node_status_report_frequency,
                extra_conditions=eviction.node_conditions,
                cached_node=nodes.store.get if nodes is not None else None)
            kubelets.append(kubelet)
            agents.append(agent)
            evictions.append(eviction)
        by_node = {k.node_name: k for k in kubelets}
        logs.locators = [k.log_path for k in kubelets]
        if metrics is not None:
            metrics.nodes = [k.node_name for k in kubelets]
            metrics.listers = [functools.partial(running_containers, k) for k in kubelets]
        if streams is not None:
            streams.locators = [k.exec_config for k in kubelets]
            streams.forwards.locators = [k.pod_sandbox for k in kubelets]
            streams.attach_locators = [k.attach_target for k in kubelets]

        def route(pod: Obj) -> None:
            kubelet = by_node.get(_node_of(pod))
            if kubelet is not None:
                kubelet.on_pod(pod)

        def route_delete(pod: Obj) -> None:
            kubelet = by_node.get(_node_of(pod))
            for each in [kubelet] if kubelet is not None else kubelets:
                each.on_pod_deleted(pod)

        selector = f"spec.nodeName={names[0]}" if len(names) == 1 else ""
        # The resync re-delivers every pod to its worker each sync frequency (Kubernetes'
        # --sync-frequency), so a worker re-checks its pod even without changes.
        informer = Informer(api, "pods", field_selector=selector,
                            resync_period=settings.sync_frequency,
                            keep=_on_nodes(own) if len(names) > 1 else None)
        informer.add_handler(on_add=route, on_update=lambda _old, new: route(new),
                             on_delete=route_delete)

        def route_attachment(attachment: dict[str, object]) -> None:
            for kubelet in kubelets:
                kubelet.on_volume_attachment(attachment)

        volumes.informer.add_handler(on_add=route_attachment,
                                     on_update=lambda _old, new: route_attachment(new),
                                     on_delete=route_attachment)
        tasks: list[asyncio.Task[None]] = []
        try:
            await asyncio.gather(*(a.register() for a in agents))
            if nodes is not None:
                tasks.append(asyncio.create_task(nodes.run(), name="node-informer"))
            for agent in agents:
                # Spread the renewals of many hollow nodes over the interval.
                delay = random.uniform(0, agent.renew_interval) if len(agents) > 1 else 0.0
                tasks.append(asyncio.create_task(_delayed(agent.run(), delay),
                                                 name=f"node:{agent.node_name}"))
            tasks.append(asyncio.create_task(volumes.informer.run(),
                                             name="volumeattachment-informer"))
            tasks.append(asyncio.create_task(informer.run(), name="pod-informer"))
            await informer.wait_synced()
            for kubelet in kubelets:
                kubelet.kill_orphans()
                if kubelet.env.cgroups is not None:  # left by a kubelet that was stopped
                    kubelet.env.cgroups.remove_orphans(keep=list(kubelet.workers))
            if settings.runtime == "process":
                if metrics is not None:
                    tasks.append(asyncio.create_task(metrics.sample_forever(),
                                                     name="resource-metrics"))
                tasks += [asyncio.create_task(e.run(), name=f"eviction:{e.kubelet.node_name}")
                          for e in evictions]
                rotation = LogRotation(max_size=bytes_(settings.container_log_max_size),
                                       max_files=settings.container_log_max_files,
                                       interval=settings.container_log_monitor_interval)
                rotation.listers = [functools.partial(running_logs, k) for k in kubelets]
                tasks.append(asyncio.create_task(rotation.run(), name="container-logs"))
            if (settings.runtime == "process" and settings.service_proxy
                    and sandbox_supported(settings.sandbox)):
                # AX7: cluster IPs and the cluster DNS, served in the pod network namespace
                dns = settings.cluster_dns_addresses()
                tasks.append(asyncio.create_task(ServiceProxy(
                    api, namespace=settings.pod_network_namespace,
                    dns_address=dns[0] if dns else None,
                    cluster_domain=settings.cluster_domain,
                    upstreams=list(_host_resolver(settings.resolv_conf).nameservers)).run(),
                    name="service-proxy"))
            if (settings.runtime == "process" and settings.pod_network == "node"
                    and sandbox_supported(settings.sandbox)):
                # JN1: routes to the other nodes' podCIDRs, as kindnet keeps them
                tasks.append(asyncio.create_task(NodeRoutes(api, node_name=names[0]).run(),
                                                 name="node-routes"))
            log.info("kubelet ready", extra={"nodes": len(names), "runtime": settings.runtime})
            await service.ready()
            await service.stop.wait()
        finally:
            await cancel_tasks(*tasks)
            for kubelet in kubelets:
                await kubelet.shutdown()

def heartbeat_connections(nodes: int, per_connection: int) -> int:
    """How many heartbeat connections `nodes` hollow nodes spread their writes over."""
    return max(1, -(-nodes // per_connection))


def _node_of(pod: Obj) -> str:
    """The node a pod is bound to ("" while unbound)."""
    spec = pod.get("spec")
    return str(spec.get("nodeName") or "") if isinstance(spec, dict) else ""


def _on_nodes(names: frozenset[str]) -> Callable[[Obj], bool]:
    """Whether a pod is bound to one of `names` (a bound pod never moves)."""
    return lambda pod: _node_of(pod) in names


def _host_resolver(path: str) -> ResolvConf:
    """The node's resolver (`--resolv-conf`), whose nameservers answer other names."""
    try:
        return parse_resolv_conf(Path(path).read_text())
    except OSError as err:
        log.warning("no upstream nameservers: cannot read --resolv-conf",
                    extra={"path": path, "error": str(err)})
        return ResolvConf()


async def _delayed(coro: Coroutine[Any, Any, None], delay: float) -> None:
    try:
        await asyncio.sleep(delay)
    except asyncio.CancelledError:
        coro.close()
        raise
    await coro


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(argv)
    logs = LogService()
    metrics = ResourceMetrics(resolution=settings.metrics_resolution)
    streams = ExecService(tty_size_wait=settings.exec_tty_size_wait)
    address = f"127.0.0.1:{settings.health_port}" if settings.health_port else ""
    if address and not settings.node_ip.startswith("127."):
        # the apiserver reaches the kubelet (logs, exec) at the Node's InternalIP, as in
        # Kubernetes; in --netns mode that is the node's own namespace's address
        address += f",{settings.node_ip}:{settings.health_port}"

    handlers = [logs.handler(), metrics.handler(), streams.handler(),
                streams.forwards.handler(),
                KillService(lambda: streams.attach_locators).handler()]  # issue 35
    tls = KubeletTls.from_env()
    bootstrap = tls is not None and settings.server_tls_bootstrap
    if bootstrap and not settings.port:
        raise SystemExit("skiff-kubelet: --server-tls-bootstrap needs --port (the Node "
                         "publishes it before the serving certificate exists)")
    hosts = list(dict.fromkeys(["127.0.0.1", settings.node_ip]))

    async def body(service: Service) -> None:
        servers: list[Any] = []  # the TLS port's grpc server, once it serves
        port = settings.port

        async def start_serving() -> None:  # logs, exec, metrics on a mutual-TLS port
            nonlocal port
            assert tls is not None
            server, port = await start_kubelet_server(tls, handlers, addresses=hosts,
                                                      port=port, dynamic=bootstrap)
            servers.append(server)
            log.info("kubelet port serving with mutual TLS", extra={"port": port})

        if tls is not None and not bootstrap:
            await start_serving()
        certificates = asyncio.create_task(manage_certificates(
            settings, serving=tls, start_serving=start_serving), name="certificates") \
            if settings.rotate_certificates or bootstrap else None
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await run_kubelet(settings, service, logs, metrics, streams,
                                  kubelet_port=port)
        finally:
            await cancel_tasks(*[t for t in (certificates,) if t is not None])
            for server in servers:
                await server.stop(1)

    run_service("kubelet", body, health_address=address, log_level=settings.log_level,
                handlers=handlers if tls is None else [])
