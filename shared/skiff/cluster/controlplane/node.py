"""The control-plane Nodes and their mirror pods, as a kind node's kubelet keeps them.

Registers the control-plane Node(s) of `mirror.node_names` with kubeadm's role label and
`node-role.kubernetes.io/control-plane:NoSchedule` taint (the scheduler places no user pod
there), posts their Ready status and renews their `kube-node-lease` Leases, so the node
lifecycle controller and PodGC leave them and their pods alone; and every `--sync-period`
reconciles the mirror pods from cluster.json, as the kubelet's syncPod does
(`pkg/kubelet/kubelet.go`): a missing one is created; one being deleted (`kubectl delete
pod`), or whose hash or owning Node no longer matches, is deleted at once with its UID as
precondition and created again; one whose component is gone is deleted; the status follows
the process as the supervisor sees it. Deleting a mirror pod never touches the component.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import platform
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import skiff
from skiff.api import wellknown
from skiff.api.errors import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import ApiClient, Informer
from skiff.clock import rfc3339, rfc3339_micro
from skiff.cluster.controlplane import mirror
from skiff.cluster.controlplane.logs import CLOCK_TICKS, Usage
from skiff.cluster.controlplane.probes import Probes
from skiff.cluster.controlplane.settings import Settings
from skiff.cluster.state import ClusterState, Component, same_process
from skiff.cluster.supervisor import held_down, restartable
from skiff.procfs import read_stat

log = logging.getLogger(__name__)

LEASE_NAMESPACE = "kube-node-lease"


# -- the supervisor's view of a component ---------------------------------------------------


def _boot_time() -> float:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    return 0.0


_BOOT = _boot_time()


def started_at(pid: int) -> str:
    stat = read_stat(pid)
    if stat is None or not _BOOT:
        return ""
    return rfc3339(_BOOT + stat.start_ticks / CLOCK_TICKS)


def view_of(data_dir: Path, comp: Component, *, healthy: bool = True
            ) -> mirror.ProcessView:
    running = same_process(comp)
    return mirror.ProcessView(
        running=running, held_down=held_down(data_dir, comp) or not restartable(comp),
        started_at=started_at(comp.pid) if running else "", restarts=comp.restarts,
        healthy=healthy)


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
    probes: Probes = field(default_factory=Probes)
    # Each control-plane Node's pods, watched as a kubelet watches its own (set by
    # run_pods), and the mirror pods this agent wrote last, newer than the watch may be yet.
    pods: dict[str, Informer] = field(default_factory=dict)
    _written: dict[str, Obj] = field(default_factory=dict)
    _deleted: set[str] = field(default_factory=set)  # uids deleted, maybe still watched
    _ready_since: str = field(default_factory=lambda: rfc3339(time.time()))

    def _labels(self, node: str) -> dict[str, str]:
        return {wellknown.LABEL_HOSTNAME: node, wellknown.LABEL_OS: "linux",
                wellknown.LABEL_ARCH: {"x86_64": "amd64", "aarch64": "arm64"}.get(
                    platform.machine(), platform.machine()),
                wellknown.LABEL_CONTROL_PLANE_ROLE: "",
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
            "nodeInfo": system_info(self._labels(node)[wellknown.LABEL_ARCH]),
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
            if not any(t.get("key") == wellknown.LABEL_CONTROL_PLANE_ROLE for t in taints):
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

    async def register_all(self) -> None:
        """Register every control-plane Node now (before the agent reports ready, so
        `skiff up` returns with them listed, as kind's does); one that fails is left to
        the heartbeat's next round."""
        for node in self.settings.nodes:
            try:
                await self.register(node)
            except ApiError as err:
                log.warning("control-plane node registration failed; the heartbeat retries",
                            extra={"node": node, "error": err.message})

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
        pods = mirror.static_pods(state.components)
        self.usage.sample([comp.pid for _, comp in pods if same_process(comp)])
        health = dict(zip([c.name for _, c in pods], await asyncio.gather(
            *(self.probes.ready(pod, c) for pod, c in pods)), strict=True))
        desired: dict[str, list[tuple[mirror.StaticPod, Component]]] = {}
        for pod, comp in pods:
            desired.setdefault(pod.node, []).append((pod, comp))
        for node in self.settings.nodes:
            if node not in self.uids:
                continue  # not registered (yet): its pods come once it is
            existing = {p["metadata"]["name"]: p for p in self._node_pods(node)
                        if wellknown.MIRROR_POD_ANNOTATION
                        in (p["metadata"].get("annotations") or {})}
            for pod, comp in desired.get(node, []):
                try:
                    await self._sync_one(pod, comp, existing.pop(pod.name, None), start_time,
                                         healthy=health.get(comp.name, True))
                except ApiError as err:
                    log.warning("mirror pod sync failed", extra={
                        "pod": pod.name, "error": err.message})
            for orphan in existing.values():  # its component is gone
                await self._delete(orphan)

    def _node_pods(self, node: str) -> list[Obj]:
        """The Node's pods as its watch has them, each replaced by the copy this agent
        wrote last where that is newer: its own writes come back through the watch a moment
        later, and acting on the older copy meanwhile would write it again (a conflict, or
        a second create)."""
        informer = self.pods[node]
        watched = _revision(informer.resource_version)
        listed = informer.store.list()
        self._deleted &= {str(p["metadata"].get("uid")) for p in listed}  # seen gone: done
        pods = {p["metadata"]["name"]: p for p in listed
                if str(p["metadata"].get("uid")) not in self._deleted}
        for name, mine in list(self._written.items()):
            if mine["spec"].get("nodeName") != node:
                continue
            if _revision(mine["metadata"].get("resourceVersion")) <= watched:
                del self._written[name]  # the watch has caught up with it
                continue
            theirs = pods.get(name)
            if theirs is None or _revision(theirs["metadata"].get("resourceVersion")) < \
                    _revision(mine["metadata"].get("resourceVersion")):
                pods[name] = mine
        return list(pods.values())

    async def _delete(self, pod: Obj) -> None:
        meta = pod["metadata"]
        self._written.pop(meta["name"], None)
        with contextlib.suppress(ApiError):
            await self.api.delete("pods", meta["name"], meta["namespace"],
                                  grace_period_seconds=0, uid=meta.get("uid"))
            log.info("mirror pod deleted", extra={"pod": meta["name"]})
        self._deleted.add(str(meta.get("uid")))

    async def _sync_one(self, pod: mirror.StaticPod, comp: Component, current: Obj | None,
                        start_time: str, *, healthy: bool = True) -> None:
        digest = pod.config_hash(comp)
        if current is not None:
            meta = current["metadata"]
            owners = meta.get("ownerReferences") or []
            mirror_of = (meta.get("annotations") or {}).get(wellknown.MIRROR_POD_ANNOTATION)
            if meta.get("deletionTimestamp") or mirror_of != digest or \
                    not any(o.get("uid") == self.uids[pod.node] for o in owners):
                await self._delete(current)  # the kubelet recreates a deleted mirror pod
                current = None
        now = rfc3339(time.time())
        if current is None:
            current = self._written[pod.name] = await self.api.create(mirror.mirror_pod(
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
            self._written[pod.name] = await self.api.update_status(body)

    async def run_pods(self) -> None:
        """Watch each control-plane Node's pods (as a kubelet watches its own: no list
        each sync) and reconcile the mirror pods every `sync_period`."""
        state = ClusterState.load(self.settings.data_dir)
        start_time = rfc3339(state.started if state else time.time())
        self.pods = {node: Informer(self.api, "pods", field_selector=f"spec.nodeName={node}")
                     for node in self.settings.nodes}
        watches = [asyncio.create_task(i.run(), name=f"pods-{node}")
                   for node, i in self.pods.items()]
        try:
            for informer in self.pods.values():
                await informer.wait_synced()
            while True:
                try:
                    await self.sync_pods(start_time)
                except ApiError as err:
                    log.warning("mirror pod sync failed", extra={"error": err.message})
                await asyncio.sleep(self.settings.sync_period)
        finally:
            for task in watches:
                task.cancel()
            await asyncio.gather(*watches, return_exceptions=True)
            await self.probes.close()


def _revision(resource_version: object) -> int:
    try:
        return int(str(resource_version or 0))
    except ValueError:
        return 0
