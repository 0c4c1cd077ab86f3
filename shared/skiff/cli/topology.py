"""`skiff up --ha`: a replicated control plane as local processes, and who leads in it.

Three etcd members form one cluster on loopback (real peer URLs, one initial-cluster token);
two apiservers, each a full replica with `--etcd-servers` listing all three members (its own
member first); two schedulers and two controller-managers that elect a leader through a
Lease; then the kubelets and the fence agent. Every service gets
`--apiserver 127.0.0.1:P1,127.0.0.1:P2`, both apiservers, in an order that spreads them.

kubectl gets one kubeconfig cluster and context per apiserver (`skiff` = apiserver-1,
`skiff-apiserver-2`): kubectl has no failover of its own, and a front proxy would be one more
process that can die or be cut off, hiding exactly the failures this topology exists to show.

`skiff status` asks each etcd member whom it follows (etcd's maintenance Status) and reads
the scheduler's and controller-manager's Leases (kube-system) for the holder.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from skiff.cli.localcluster import (
    ClusterState,
    Component,
    LocalCluster,
    _line,
    pid_alive,
)
from skiff.cli.processes import (
    Process,
    StartError,
    etcd_process,
    free_port,
    service_process,
    wait_etcd_healthy,
    wait_grpc_healthy,
)
from skiff.cli.security import ClusterSecurity

ETCD_MEMBERS = 3
APISERVERS = 2
REPLICAS = 2  # schedulers and controller-managers
CLUSTER_TOKEN = "skiff-ha"
# Where each leader-elected service keeps its Lease (kube-system), newest name first.
LEASES = {"scheduler": ("kube-scheduler",),
          "controller-manager": ("kube-controller-manager", "skiff-controller-manager")}


def rotated(items: list[str], by: int) -> list[str]:
    by %= len(items)
    return items[by:] + items[:by]


class HaCluster(LocalCluster):
    """`skiff up --ha`; stopped, supervised and listed like any local cluster."""

    def start(self, *, echo: Any = print) -> ClusterState:
        running = ClusterState.load(self.data_dir)
        if running and any(pid_alive(c.pid) for c in running.components):
            raise StartError(f"a cluster is already running from {self.data_dir} (API "
                             f"{running.api}); stop it with `skiff down` first")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._sec = self.security(echo)
        try:
            etcd_urls = self._start_etcd(echo)
            api_targets, http_urls = self._start_apiservers(etcd_urls, echo)
            kubeconfig = write_ha_kubeconfig(self.data_dir, http_urls, security=self._sec)
            echo(f"{'kubectl':<22} {'':<12} {', '.join(http_urls)}   "
                 f"export KUBECONFIG={kubeconfig}  (context skiff-apiserver-2 for the other)")
            self._start_services(api_targets, echo)
        except BaseException:
            self.stop()
            raise
        state = ClusterState(api=",".join(api_targets), data_dir=str(self.data_dir),
                             components=self.components, started=time.time())
        state.save(self.data_dir)
        return state

    def control_plane_nodes(self) -> list[str]:
        """One control-plane Node per replica number (kind's HA names)."""
        from skiff.cli.controlplane.mirror import node_names

        return node_names(max(ETCD_MEMBERS, APISERVERS, REPLICAS))

    def _start_etcd(self, echo: Any) -> list[str]:
        ports = [(free_port(), free_port()) for _ in range(ETCD_MEMBERS)]
        scheme, tls = self._sec.scheme, self._sec.etcd_tls()
        initial = ",".join(f"etcd-{i}={scheme}://127.0.0.1:{peer}"
                           for i, (_, peer) in enumerate(ports, 1))
        members: list[tuple[Process, int]] = []
        for i, (client, peer) in enumerate(ports, 1):
            proc = etcd_process(self.data_dir, client_port=client, peer_port=peer,
                                name=f"etcd-{i}", member=f"etcd-{i}",
                                initial_cluster=initial, cluster_token=CLUSTER_TOKEN,
                                tls=tls)
            proc.start()  # all at once: a member waits for a quorum before it is healthy
            members.append((proc, client))
        urls = []
        for proc, client in members:
            wait_etcd_healthy(proc, client, timeout=60.0, tls=tls)
            url = f"{scheme}://127.0.0.1:{client}"
            self._record(proc, url, "")
            echo(_line(proc.name, proc, url))
            urls.append(url)
        return urls

    def _start_apiservers(self, etcd_urls: list[str],
                          echo: Any) -> tuple[list[str], list[str]]:
        env = {"SKIFF_LOG_FORMAT": "json"}
        config_dir = self.data_dir / "config"
        targets, http_urls = [], []
        for i in range(1, APISERVERS + 1):
            api_port, http_port = free_port(), free_port()
            target = f"127.0.0.1:{api_port}"
            proc = service_process(f"apiserver-{i}", "skiff.apiserver", [
                "--etcd-servers", ",".join(rotated(etcd_urls, i - 1)),
                "--secure-port", str(api_port), "--http-port", str(http_port),
                *self._sec.apiserver_args(),
                # One key for both: a token one apiserver issued verifies at the other.
                "--service-account-signing-key-file",
                str(self.data_dir / "pki" / "service-account.key"),
                *self.config.flags("apiserver", config_dir)],
                log_dir=self.data_dir / "logs", env=env)
            proc.start()
            wait_grpc_healthy(proc, target, timeout=60.0, credentials=self._sec.credentials())
            self._record(proc, target, target)
            echo(_line(proc.name, proc, target))
            targets.append(target)
            http_urls.append(f"{self._sec.scheme}://127.0.0.1:{http_port}")
        return targets, http_urls

    def _start_services(self, api_targets: list[str], echo: Any) -> None:
        from skiff.cli.localcluster import service_available

        env = {"SKIFF_LOG_FORMAT": "json"}
        spread = 0
        for name, module, extra in self._replicated_services():
            if not service_available(module):
                continue
            health_port = free_port()
            proc = service_process(name, module, [
                "--apiserver", ",".join(rotated(api_targets, spread)),
                "--health-port", str(health_port), *extra],
                log_dir=self.data_dir / "logs", env={**env, **self._sec.component_env(name)})
            spread += 1
            proc.start()
            health = f"127.0.0.1:{health_port}"
            wait_grpc_healthy(proc, health, timeout=60.0)
            self._record(proc, health, health)
            echo(_line(name, proc, health))

    def _replicated_services(self) -> list[tuple[str, str, list[str]]]:
        services = []
        for name, module, extra in self._services():
            if name in LEASES:
                # A stable identity per replica: a restarted member takes its own Lease
                # back at once instead of waiting out a pid-named predecessor's.
                services += [(f"{name}-{i}", module, [*_without_identity(extra),
                                                       "--leader-elect-identity", f"{name}-{i}"])
                             for i in range(1, REPLICAS + 1)]
            else:
                services.append((name, module, extra))
        return services


def _without_identity(args: list[str]) -> list[str]:
    if "--leader-elect-identity" not in args:
        return args
    at = args.index("--leader-elect-identity")
    return args[:at] + args[at + 2:]


def write_ha_kubeconfig(data_dir: Path, servers: list[str], *,
                        security: ClusterSecurity | None = None) -> Path:
    """One cluster and context per apiserver; the current context is apiserver-1's."""
    sec = security or ClusterSecurity(None)
    names = ["skiff"] + [f"skiff-apiserver-{i}" for i in range(2, len(servers) + 1)]
    path = data_dir / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "skiff",
        "clusters": [{"name": n, "cluster": sec.kubeconfig_cluster(s)}
                     for n, s in zip(names, servers, strict=True)],
        "users": [{"name": "skiff", "user": sec.kubeconfig_user()}],
        "contexts": [{"name": n, "context": {"cluster": n, "user": "skiff",
                                             "namespace": "default"}} for n in names],
    }, indent=2))
    return path


# -- roles ---------------------------------------------------------------------------------


def _flag(comp: Component, flag: str) -> str:
    with contextlib.suppress(ValueError, IndexError):
        return comp.argv[comp.argv.index(flag) + 1]
    return ""


async def etcd_role(comp: Component) -> str:
    """`leader` or `follower`, as the member itself reports (etcd's maintenance Status)."""
    import aetcd

    from skiff.etcdtls import EtcdTls, TlsEtcdClient

    host, _, port = comp.address.removeprefix("http://").removeprefix(
        "https://").rpartition(":")
    try:
        client_of = (TlsEtcdClient(tls=EtcdTls(
            Path(_flag(comp, "--trusted-ca-file")), Path(_flag(comp, "--cert-file")),
            Path(_flag(comp, "--key-file"))), host=host, port=int(port), timeout=2,
            connect_wait_timeout=2) if comp.address.startswith("https://")
            else aetcd.Client(host=host, port=int(port), timeout=2, connect_wait_timeout=2))
        async with client_of as client:
            status = await asyncio.wait_for(client.status(), timeout=3.0)
    except (aetcd.exceptions.ClientError, OSError, TimeoutError, ValueError):
        return ""
    if status.leader is None:
        return "no-leader"  # cut off from a quorum, or electing
    return "leader" if status.leader.name == _flag(comp, "--name") else "follower"


def _lease_valid(spec: dict[str, Any]) -> bool:
    renewed = str(spec.get("renewTime") or "")
    try:
        at = datetime.fromisoformat(renewed.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return True  # no renew time to judge by: trust the holder
    return time.time() <= at + float(spec.get("leaseDurationSeconds") or 15)


async def lease_holders(api_target: str) -> dict[str, str]:
    """`scheduler` / `controller-manager` → holderIdentity of a Lease still in force."""
    from skiff.api import ApiError
    from skiff.client import ApiClient

    holders: dict[str, str] = {}
    try:
        async with ApiClient(api_target, timeout=2.0, retry_seconds=2.0) as api:
            for service, names in LEASES.items():
                for name in names:
                    try:
                        lease = await api.get("leases", name, "kube-system")
                    except ApiError:
                        continue
                    spec = lease.get("spec") or {}
                    if spec.get("holderIdentity") and _lease_valid(spec):
                        holders[service] = str(spec["holderIdentity"])
                    break
    except (ApiError, OSError, TimeoutError):
        pass
    return holders


def _holds(comp: Component, holder: str) -> bool:
    """client-go identities are `<hostname>_<unique>`; Skiff's unique part is the PID."""
    return holder in (comp.name, str(comp.pid)) or holder.endswith(f"_{comp.pid}")


async def roles(state: ClusterState) -> dict[str, str]:
    """Each component's role: etcd leader/follower; scheduler and controller-manager
    leader/standby when their Lease exists; empty for the others."""
    etcd = [c for c in state.components if c.name.startswith("etcd") and not c.health]
    etcd_roles, holders = await asyncio.gather(
        asyncio.gather(*(etcd_role(c) for c in etcd)), lease_holders(state.api))
    out: dict[str, str] = {c.name: role for c, role in zip(etcd, etcd_roles, strict=True)}
    for comp in state.components:
        service = comp.name.rstrip("0123456789").rstrip("-")
        if service in LEASES and service in holders:
            out[comp.name] = "leader" if _holds(comp, holders[service]) else "standby"
    return out
