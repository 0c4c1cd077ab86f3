"""`python -m skiff.cluster.controlplane`: the control-plane node agent, what the kubelet
of a kind control-plane node does for it.

`skiff up` starts it as the `control-plane` component (the supervisor restarts it like any
other; `skiff down` stops it). It runs the Nodes' heartbeat and the mirror-pod sync
(`node`) and serves the components' logs on each Node's kubelet endpoint (`logs`).
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from skiff.client import ApiClient
from skiff.cluster.controlplane import mirror
from skiff.cluster.controlplane.logs import ComponentLogs, Usage, start_log_servers
from skiff.cluster.controlplane.node import NodeAgent
from skiff.cluster.controlplane.probes import Probes
from skiff.cluster.controlplane.settings import Serving, Settings
from skiff.service import Service, run_service
from skiff.settings import parse_duration


async def run(settings: Settings, service: Service, usage: Usage) -> None:
    servers, ports = ([], {}) if not settings.serving else \
        await start_log_servers(settings, usage)
    try:
        async with ApiClient(settings.apiserver, user_agent="skiff-control-plane") as api:
            agent = NodeAgent(settings, api, ports, usage=usage,
                              probes=Probes(period=settings.probe_period))
            await agent.register_all()
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


def _seconds(text: str) -> float:
    """A period as `skiff up --config` gives it (`10s`, `500ms`) or in seconds; more than
    zero (a zero period would make the sync loop spin)."""
    try:
        seconds = parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a period: give more than 0 "
                                         "(e.g. 1s, 500ms)")
    return seconds


def parse_settings(argv: list[str] | None = None) -> tuple[Settings, str]:
    """The agent's Settings and log level from its flags (exits with usage on bad ones)."""
    parser = argparse.ArgumentParser(prog="python -m skiff.cluster.controlplane",
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
    parser.add_argument("--sync-period", type=_seconds, default=1.0, metavar="DURATION")
    parser.add_argument("--probe-period", type=_seconds, default=10.0, metavar="DURATION",
                        help="how often a healthy etcd, scheduler or controller-manager is "
                             "checked again (kubeadm's livenessProbe period); an apiserver's "
                             "readiness is checked at every sync")
    parser.add_argument("--node-lease-duration-seconds", type=int, default=40)
    parser.add_argument("--node-status-update-frequency", type=_seconds, default=10.0,
                        metavar="DURATION")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    if args.serving_certificate and not args.client_ca_file:
        parser.error("--serving-certificate needs --client-ca-file")
    settings = Settings(
        apiserver=args.apiserver, data_dir=args.data_dir,
        nodes=[n for n in args.nodes.split(",") if n], health_port=args.health_port,
        node_ip=args.node_ip, serving=args.serving_certificate,
        client_ca_file=args.client_ca_file, sync_period=args.sync_period,
        probe_period=args.probe_period,
        node_lease_duration_seconds=args.node_lease_duration_seconds,
        node_status_update_frequency=args.node_status_update_frequency)
    return settings, str(args.log_level)


def main(argv: list[str] | None = None) -> None:
    settings, log_level = parse_settings(argv)
    # --insecure: the logs are on the health port, as the kubelets' are.
    usage = Usage()
    handlers = [] if settings.serving else [
        ComponentLogs(settings.data_dir, usage=usage).handler()]

    async def body(service: Service) -> None:
        await run(settings, service, usage)

    run_service("control-plane", body, health_address=f"127.0.0.1:{settings.health_port}",
                log_level=log_level, handlers=handlers)
