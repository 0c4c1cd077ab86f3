"""A control-plane component's mirror pod, as the kubelet writes one for a static pod.

Each etcd member, apiserver, scheduler and controller-manager `skiff up` started is a static
pod of a control-plane Node named as kind names them (`skiff-control-plane`, then
`skiff-control-plane2`, ... for the second replica of each in `--ha`). Its mirror pod carries
kubeadm's name (`kube-apiserver-<node>`, `etcd-<node>`) and labels (`component`, `tier:
control-plane`), the kubelet's static-pod annotations (`kubernetes.io/config.source: file`,
`config.hash`, `config.seen`) plus `kubernetes.io/config.mirror` (the hash), and the Node as
its controlling owner, as `pkg/kubelet/pod/mirror_client.go` does. Its status is the
supervisor's view of the process (cluster/supervisor.py): Running while the recorded process
runs (Ready while its health check answers, as with kubeadm's readiness probes),
CrashLoopBackOff while the supervisor waits to start it again, Failed while `skiff chaos
stop` holds it down; `restartCount` is the supervisor's count of restarts.

Pure functions of cluster.json's components; the node agent (`agent`) writes the results.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from skiff.api.types import Obj
from skiff.api.wellknown import (
    CONFIG_HASH_ANNOTATION,
    CONFIG_SEEN_ANNOTATION,
    CONFIG_SOURCE_ANNOTATION,
    LABEL_CONTROL_PLANE_ROLE,
    MIRROR_POD_ANNOTATION,
)
from skiff.cluster.state import Component

NAMESPACE = "kube-system"
CLUSTER_NAME = "skiff"  # kind names its control-plane nodes `<cluster>-control-plane`
CONTROL_PLANE_TAINT = {"key": LABEL_CONTROL_PLANE_ROLE, "effect": "NoSchedule"}
# Skiff's component (its cluster.json name without the replica number) → kubeadm's name.
KUBEADM_NAMES = {"etcd": "etcd", "apiserver": "kube-apiserver",
                 "scheduler": "kube-scheduler", "controller-manager": "kube-controller-manager"}
# kubeadm's annotations naming where a member is reached.
_ENDPOINT_ANNOTATIONS = {
    "kube-apiserver": "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint",
    "etcd": "kubeadm.kubernetes.io/etcd.advertise-client-urls"}
_REPLICA = re.compile(r"(.+?)(?:-(\d+))?")


def node_name(index: int) -> str:
    """kind's names: `skiff-control-plane`, `skiff-control-plane2`, ..."""
    return f"{CLUSTER_NAME}-control-plane" + (str(index) if index > 1 else "")


def node_names(count: int) -> list[str]:
    return [node_name(i) for i in range(1, count + 1)]


@dataclass(frozen=True)
class StaticPod:
    """A component seen as the static pod the kubelet of `node` would run."""

    component: str  # its name in cluster.json (`apiserver-2`)
    kubeadm: str  # kubeadm's component name (`kube-apiserver`)
    node: str

    @property
    def name(self) -> str:
        return f"{self.kubeadm}-{self.node}"

    def config_hash(self, comp: Component) -> str:
        """The static pod's hash (the kubelet hashes the manifest): its command and node."""
        manifest = json.dumps([self.kubeadm, self.node, comp.argv], sort_keys=True)
        return hashlib.md5(manifest.encode(), usedforsecurity=False).hexdigest()


def static_pod_of(comp: Component) -> StaticPod | None:
    """The static pod a component is, or None (kubelets, the fence agent, the gateway)."""
    match = _REPLICA.fullmatch(comp.name)
    if match is None or match.group(1) not in KUBEADM_NAMES:
        return None
    index = int(match.group(2) or 1)
    return StaticPod(comp.name, KUBEADM_NAMES[match.group(1)], node_name(index))


def nodes_for(component_names: list[str]) -> list[str]:
    """The control-plane Nodes the named components' mirror pods are on."""
    pods = [static_pod_of(Component(name, 0, "", "", "")) for name in component_names]
    return sorted({pod.node for pod in pods if pod is not None})


def static_pods(components: list[Component]) -> list[tuple[StaticPod, Component]]:
    return [(pod, comp) for comp in components if (pod := static_pod_of(comp)) is not None]


def mirror_pod(pod: StaticPod, comp: Component, *, node_uid: str, seen: str) -> Obj:
    """The mirror pod to create (the apiserver defaults the rest)."""
    digest = pod.config_hash(comp)
    annotations = {CONFIG_SOURCE_ANNOTATION: "file", CONFIG_HASH_ANNOTATION: digest,
                   CONFIG_SEEN_ANNOTATION: seen, MIRROR_POD_ANNOTATION: digest}
    if pod.kubeadm in _ENDPOINT_ANNOTATIONS and comp.address:
        annotations[_ENDPOINT_ANNOTATIONS[pod.kubeadm]] = comp.address
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": pod.name, "namespace": NAMESPACE,
            "labels": {"component": pod.kubeadm, "tier": "control-plane"},
            "annotations": annotations,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": pod.node,
                                 "uid": node_uid, "controller": True}]},
        "spec": {
            "nodeName": pod.node, "hostNetwork": True,
            "priorityClassName": "system-node-critical",
            "restartPolicy": "Always",
            # the kubelet gives every static pod this toleration (config/common.go)
            "tolerations": [{"operator": "Exists", "effect": "NoExecute"}],
            "containers": [{"name": pod.kubeadm, "image": f"skiff/{pod.kubeadm}",
                            "command": list(comp.argv)}]},
    }


@dataclass(frozen=True)
class ProcessView:
    """What the supervisor knows of a component right now."""

    running: bool
    held_down: bool  # `skiff chaos stop`: it stays down until `skiff chaos start`
    started_at: str  # when the current process started (RFC 3339), "" if unknown
    restarts: int
    healthy: bool = True  # its health check answers (the readiness probe kubeadm sets)


def container_state(view: ProcessView) -> Obj:
    if view.running:
        return {"running": {"startedAt": view.started_at}} if view.started_at \
            else {"running": {}}
    if view.held_down:
        return {"terminated": {
            "exitCode": 137, "reason": "ContainerStatusUnknown",
            "message": "held down by `skiff chaos stop`; its exit status is not recorded"}}
    return {"waiting": {"reason": "CrashLoopBackOff",
                        "message": "the supervisor starts it again after its back-off"}}


def phase(view: ProcessView) -> str:
    """Running unless held down (Failed): a crashed component is being restarted."""
    return "Failed" if view.held_down and not view.running else "Running"


def pod_status(pod: StaticPod, comp: Component, view: ProcessView, *, host_ip: str,
               start_time: str, now: str, previous: Obj | None = None,
               pod_ip: str = "") -> Obj:
    """The mirror pod's status; conditions keep their transition times while unchanged.
    `pod_ip`: the component's own address when it runs on a network host of its own
    (`skiff up --netns`), else the Node's (a host-network pod)."""
    pod_ip = pod_ip or host_ip
    ready = view.running and view.healthy
    old = {c.get("type"): c for c in ((previous or {}).get("conditions") or [])}

    def condition(kind: str, status: bool) -> Obj:
        value = "True" if status else "False"
        was = old.get(kind) or {}
        since = was.get("lastTransitionTime") if was.get("status") == value else None
        return {"type": kind, "status": value, "lastProbeTime": None,
                "lastTransitionTime": since or now}

    return {
        "phase": phase(view),
        "conditions": [condition("PodReadyToStartContainers", True),
                       condition("Initialized", True), condition("Ready", ready),
                       condition("ContainersReady", ready), condition("PodScheduled", True)],
        "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
        "startTime": start_time, "qosClass": "BestEffort",
        "containerStatuses": [{
            "name": pod.kubeadm, "image": f"skiff/{pod.kubeadm}", "imageID": "",
            "containerID": f"skiff://{comp.pid}" if view.running else "",
            "ready": ready, "started": view.running, "restartCount": view.restarts,
            "state": container_state(view)}],
    }


def status_fingerprint(status: Obj) -> tuple[Any, ...]:
    """What a status write would change (timestamps aside)."""
    statuses = status.get("containerStatuses") or []
    return (status.get("phase"), status.get("hostIP"), status.get("podIP"), tuple(
        (s.get("ready"), s.get("restartCount"), s.get("containerID"),
         tuple(sorted((s.get("state") or {}).keys()))) for s in statuses))
