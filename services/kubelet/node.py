"""The node's side of the API: register the Node, renew its Lease, report its status.

As Kubernetes' kubelet with NodeLease: the Lease `kube-node-lease/<node>` is renewed every
quarter of its duration (10 s of 40 s) and is the heartbeat the node lifecycle controller
watches (PS2); node status is computed every `nodeStatusUpdateFrequency` but written only
when it changed or `nodeStatusReportFrequency` passed, so a quiet node costs one write per
renew interval. Every API call is retried with backoff (the client retries UNAVAILABLE).
"""

from __future__ import annotations

import asyncio
import logging
import os
import platform
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import skiff
from skiff.api.errors import ApiError, Reason
from skiff.api.objcopy import deep_copy
from skiff.api.types import Obj
from skiff.api.wellknown import LABEL_ARCH, LABEL_HOSTNAME, LABEL_OS
from skiff.client import ApiClient, Client
from skiff.client.batch import batching
from skiff.clock import Clock, rfc3339, rfc3339_micro
from skiff.kubelet.settings import KubeletSettings

__all__ = ["NodeAgent", "node_arch", "system_info"]

log = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-node-lease"


def node_arch() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}.get(machine, machine)


def _first_line(*paths: str) -> str:
    for path in paths:
        try:
            line = Path(path).read_text().strip().splitlines()[0].strip()
        except (OSError, IndexError):
            continue
        if line:
            return line
    return ""


def _os_image() -> str:
    """PRETTY_NAME of /etc/os-release (what Kubernetes' kubelet reports as osImage)."""
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            lines = Path(path).read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            key, _, value = line.partition("=")
            if key.strip() == "PRETTY_NAME":
                return value.strip().strip('"').strip("'")
    return f"{platform.system()} {platform.release()}".strip()


def system_info() -> Obj:
    """`status.nodeInfo` with true values for this host, every field Kubernetes sets.

    machineID is /etc/machine-id; systemUUID is the firmware's
    /sys/class/dmi/id/product_uuid when readable (usually root only, absent in many VMs and
    containers), else a UUID derived from the machine id (stable for the host, but not the
    firmware's). Skiff runs containers as processes, so the runtime is `skiff://<version>`.
    kubeProxyVersion is the kubelet's own version, as Kubernetes 1.32's kubelet reports it
    (the field is deprecated, KEP-4004; it never described a running kube-proxy)."""
    machine_id = _first_line("/etc/machine-id", "/var/lib/dbus/machine-id")
    system_uuid = _first_line("/sys/class/dmi/id/product_uuid").lower()
    if not system_uuid:
        system_uuid = str(uuid.uuid5(uuid.NAMESPACE_OID,
                                     f"skiff-system-uuid:{machine_id or platform.node()}"))
    return {
        "machineID": machine_id,
        "systemUUID": system_uuid,
        "bootID": _first_line("/proc/sys/kernel/random/boot_id"),
        "kernelVersion": platform.release(),
        "osImage": _os_image(),
        "containerRuntimeVersion": f"skiff://{skiff.__version__}",
        "kubeletVersion": f"skiff-{skiff.__version__}",
        "kubeProxyVersion": f"skiff-{skiff.__version__}",
        "operatingSystem": os.uname().sysname.lower(),
        "architecture": node_arch(),
    }


def heartbeat_client(settings: KubeletSettings) -> ApiClient:
    """The connection Lease renewals and status writes use: its own (a reconnect after a
    timed-out heartbeat leaves the pod watches alone) with a short timeout (see
    `KubeletSettings.heartbeat_timeout`), retried only as long again; the renewal loop
    tries again on its own schedule, on the next apiserver when there are several."""
    timeout = settings.heartbeat_timeout
    return ApiClient(settings.apiserver, user_agent="skiff-kubelet", timeout=timeout,
                     retry_seconds=timeout,
                     **batching(settings.write_batch_size, settings.write_batch_delay))


class NodeAgent:
    def __init__(self, *, api: Client, clock: Clock, node_name: str,
                 heartbeat: Client | None = None,
                 labels: dict[str, str], taints: list[dict[str, str]],
                 annotations: dict[str, str] | None = None,
                 capacity: dict[str, str], health_port: int, node_ip: str = "127.0.0.1",
                 lease_duration: int,
                 renew_interval: float, status_update_frequency: float,
                 status_report_frequency: float,
                 extra_conditions: Callable[[], list[Obj]] | None = None,
                 cached_node: Callable[[str], Obj | None] | None = None) -> None:
        self.api = api
        # Lease renewals and status writes: a client with a short timeout (see
        # KubeletSettings.heartbeat_timeout); registration keeps the patient one.
        self.heartbeat = heartbeat or api
        self.clock = clock
        self.node_name = node_name
        self.labels = {LABEL_HOSTNAME: node_name, LABEL_OS: "linux",
                       LABEL_ARCH: node_arch(), **labels}
        self.taints = taints
        self.annotations = dict(annotations or {})
        self.capacity = capacity
        self.health_port = health_port
        self.node_ip = node_ip
        self.lease_duration = lease_duration
        self.renew_interval = renew_interval
        self.status_update_frequency = status_update_frequency
        self.status_report_frequency = status_report_frequency
        self.extra_conditions = extra_conditions or (list)
        # Hollow nodes: the stored Node from the process's one Node informer instead of a
        # GET per node every status interval (10,000 nodes: 1,000 GETs/s, issue 37).
        self.cached_node = cached_node
        self.writes = 0  # API writes this agent made (bench: write rate)
        self._last_status: Obj | None = None
        self._last_report = 0.0
        self._ready_since = rfc3339(clock.now())
        self._system_info = system_info()

    # -- registration ----------------------------------------------------------------------

    def _status(self) -> Obj:
        now = rfc3339(self.clock.now())
        conditions = [{
            "type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "kubelet is posting ready status", "lastHeartbeatTime": now,
            "lastTransitionTime": self._ready_since}]
        conditions += self.extra_conditions()
        return {
            "capacity": dict(self.capacity), "allocatable": dict(self.capacity),
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": self.node_ip},
                          {"type": "Hostname", "address": self.node_name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.health_port}},
            "nodeInfo": dict(self._system_info),
        }

    async def register(self) -> None:
        """Create the Node with its status (as Kubernetes' kubelet's initial node: no
        client ever sees this node without one), or adopt an existing one (labels merged,
        status refreshed)."""
        delay = 0.2
        while True:
            node: Obj = {"apiVersion": "v1", "kind": "Node",
                         "metadata": {"name": self.node_name, "labels": dict(self.labels),
                                      "annotations": dict(self.annotations)},
                         "spec": {"taints": list(self.taints)} if self.taints else {},
                         "status": self._status()}
            try:
                try:
                    await self.api.create(node)
                    self.writes += 1
                    # Nothing is recorded as reported: the first status check writes the
                    # status through its subresource, as Kubernetes' kubelet's first sync
                    # after registering does (its last report time starts at zero).
                except ApiError as err:
                    if err.reason != Reason.ALREADY_EXISTS:
                        raise
                    created = await self.api.get("nodes", self.node_name)
                    labels = created["metadata"].setdefault("labels", {})
                    annotations = created["metadata"].setdefault("annotations", {})
                    if any(labels.get(k) != v for k, v in self.labels.items()) or any(
                            annotations.get(k) != v for k, v in self.annotations.items()):
                        labels.update(self.labels)
                        annotations.update(self.annotations)
                        created = await self.api.update(created)
                        self.writes += 1
                    await self._write_status(created)
                log.info("node registered", extra={"node": self.node_name})
                return
            except ApiError as err:
                log.warning("node registration failed; retrying",
                            extra={"node": self.node_name, "error": err.message})
                await self.clock.sleep(delay)
                delay = min(delay * 2, 7.0)

    async def _write_status(self, node: Obj | None = None) -> None:
        status = self._status()
        for _ in range(5):
            if node is None:
                node = await self.heartbeat.get("nodes", self.node_name)
            body = deep_copy(node)
            body["status"] = status
            try:
                await self.heartbeat.update_status(body)
                self.writes += 1
                self._last_status = status
                self._last_report = self.clock.monotonic()
                return
            except ApiError as err:
                if err.reason != Reason.CONFLICT:
                    raise
                node = None

    # -- loops -----------------------------------------------------------------------------

    async def run_status(self) -> None:
        """Every update interval: write the status when it is due, when it changed, or when
        the stored Node disagrees with it — as Kubernetes' kubelet, which diffs against the
        Node it GETs: the node lifecycle controller sets Ready Unknown while this kubelet is
        cut off, and after the partition heals only this write makes the node Ready again
        (waiting for the report frequency would leave it Unknown for minutes)."""
        while True:
            await self.clock.sleep(self.status_update_frequency)
            due = self.clock.monotonic() - self._last_report >= self.status_report_frequency
            try:
                stored = await self._stored_node()
            except ApiError as err:
                if err.reason == Reason.NOT_FOUND:
                    await self.register()  # the Node was deleted: register again
                else:
                    log.warning("node status check failed", extra={
                        "node": self.node_name, "error": err.message})
                continue
            status = self._status()
            mine = _condition_statuses(status)
            theirs = _condition_statuses(stored.get("status"))
            overwritten = any(theirs.get(kind) != value for kind, value in mine.items())
            if due or overwritten or _differs_beyond_heartbeats(status, self._last_status):
                try:
                    await self._write_status(stored)
                except ApiError as err:
                    if err.reason == Reason.NOT_FOUND:
                        await self.register()  # the Node was deleted: register again
                    else:
                        log.warning("node status update failed", extra={
                            "node": self.node_name, "error": err.message})

    async def _stored_node(self) -> Obj:
        """The Node as stored: the informer's copy when there is one (a write based on a
        stale copy gets a conflict and `_write_status` GETs it), else a GET."""
        cached = self.cached_node(self.node_name) if self.cached_node is not None else None
        if cached is not None:
            return cached
        return await self.heartbeat.get("nodes", self.node_name)

    async def run_lease(self) -> None:
        """Renew `kube-node-lease/<node>` every renew interval (create it when missing).

        After two or more renewals in a row failed, the first that succeeds also replaces
        the pod watches' connection (Kubernetes' kubelet closes all its connections on
        repeated heartbeat failures): a watch stream cut by a partition can otherwise stay
        silent after the network heals until TCP retransmits or a keepalive gives up on it,
        while the pods it should deliver wait."""
        lease: Obj | None = None
        delay = 0.2
        failures = 0
        generation = self.api.generation
        while True:
            try:
                lease = await self._renew(lease)
                if failures >= 2 and self.heartbeat is not self.api:
                    log.info("apiserver reachable again; reconnecting the pod watches",
                             extra={"node": self.node_name, "failed_renewals": failures})
                    await self.api.reconnect(generation=generation)
                failures, delay = 0, 0.2
                await self.clock.sleep(self.renew_interval)
            except ApiError as err:
                log.warning("lease renewal failed; retrying",
                            extra={"node": self.node_name, "error": err.message})
                if failures == 0:  # replaced since by its own failure: not again
                    generation = self.api.generation
                failures += 1
                lease = None
                await self.clock.sleep(delay)
                delay = min(delay * 2, self.renew_interval)

    async def _renew(self, lease: Obj | None) -> Obj:
        now = rfc3339_micro(self.clock.now())
        if lease is None:
            try:
                lease = await self.heartbeat.get("leases", self.node_name, LEASE_NAMESPACE)
            except ApiError as err:
                if err.reason != Reason.NOT_FOUND:
                    raise
                created = await self.heartbeat.create({
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.node_name, "namespace": LEASE_NAMESPACE},
                    "spec": {"holderIdentity": self.node_name,
                             "leaseDurationSeconds": self.lease_duration,
                             "acquireTime": now, "renewTime": now}})
                self.writes += 1
                return created
        body = deep_copy(lease)
        body["spec"].update(holderIdentity=self.node_name,
                            leaseDurationSeconds=self.lease_duration, renewTime=now)
        updated = await self.heartbeat.update(body)
        self.writes += 1
        return updated

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.run_lease(), name=f"lease:{self.node_name}")
            tg.create_task(self.run_status(), name=f"node-status:{self.node_name}")


def _condition_statuses(status: Obj | None) -> dict[str, str]:
    """type → status of each condition this kubelet reports: what another writer changes."""
    return {str(c.get("type")): str(c.get("status"))
            for c in (status or {}).get("conditions") or []}


def _differs_beyond_heartbeats(status: Obj | None, last: Obj | None) -> bool:
    """Whether two node statuses differ in more than their conditions' heartbeat times
    (compared in place: deep copies of both were 11 % of a hollow kubelet's CPU)."""
    if status is None or last is None:
        return status is not last
    return status.keys() != last.keys() or any(
        _beyond_heartbeats(key, value) != _beyond_heartbeats(key, last[key])
        for key, value in status.items())


def _beyond_heartbeats(key: str, value: Any) -> Any:
    """A status field as compared: conditions without their heartbeat times."""
    if key != "conditions" or not isinstance(value, list):
        return value
    return [{k: v for k, v in c.items() if k != "lastHeartbeatTime"}
            if isinstance(c, dict) else c for c in value]
