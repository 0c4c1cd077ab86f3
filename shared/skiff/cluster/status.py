"""`skiff status`: each component's health and role in a running cluster.

Health is `state.health_of` (the process, then its health check); the role is who leads:
each etcd member says whom it follows (etcd's maintenance Status), and the scheduler's and
controller-manager's Leases (kube-system) name their holders. A component `skiff chaos
stop` holds down is `stopped`.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import aetcd

from skiff.api import ApiError
from skiff.client import ApiClient
from skiff.cluster.state import ClusterState, Component, flag_of, health_of
from skiff.cluster.supervisor import stopped_marker
from skiff.cluster.topology import LEASES
from skiff.etcdtls import EtcdTls, TlsEtcdClient

STATUS_COLUMNS = ["NAME", "PID", "ADDRESS", "HEALTH", "ROLE", "RESTARTS", "LOG"]


async def etcd_role(comp: Component) -> str:
    """`leader` or `follower`, as the member itself reports (etcd's maintenance Status)."""
    host, _, port = comp.address.removeprefix("http://").removeprefix(
        "https://").rpartition(":")
    try:
        client_of = (TlsEtcdClient(tls=EtcdTls(
            Path(flag_of(comp, "--trusted-ca-file")), Path(flag_of(comp, "--cert-file")),
            Path(flag_of(comp, "--key-file"))), host=host, port=int(port), timeout=2,
            connect_wait_timeout=2) if comp.address.startswith("https://")
            else aetcd.Client(host=host, port=int(port), timeout=2, connect_wait_timeout=2))
        async with client_of as client:
            status = await asyncio.wait_for(client.status(), timeout=3.0)
    except (aetcd.exceptions.ClientError, OSError, TimeoutError, ValueError):
        return ""
    if status.leader is None:
        return "no-leader"  # cut off from a quorum, or electing
    return "leader" if status.leader.name == flag_of(comp, "--name") else "follower"


def _lease_valid(spec: dict[str, Any]) -> bool:
    renewed = str(spec.get("renewTime") or "")
    try:
        at = datetime.fromisoformat(renewed.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return True  # no renew time to judge by: trust the holder
    return time.time() <= at + float(spec.get("leaseDurationSeconds") or 15)


async def lease_holders(api_target: str) -> dict[str, str]:
    """`scheduler` / `controller-manager` → holderIdentity of a Lease still in force."""
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


def status_rows(state: ClusterState) -> list[list[str]]:
    """One row per component (STATUS_COLUMNS)."""

    async def collect() -> tuple[list[str], dict[str, str]]:
        healths = asyncio.gather(*(health_of(c) for c in state.components))
        return list(await healths), await roles(state)

    healths, role_of = asyncio.run(collect())
    data_dir = Path(state.data_dir)
    return [[c.name, str(c.pid), c.address,
             "stopped" if h == "exited" and stopped_marker(data_dir, c.name).exists() else h,
             role_of.get(c.name, "") or "-", str(c.restarts), c.log]
            for c, h in zip(state.components, healths, strict=True)]
