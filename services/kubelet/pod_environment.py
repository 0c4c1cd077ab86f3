"""What every pod worker of one node shares: the API, the runtime, the node's settings.

Kubernetes' pod workers reach these through the Kubelet struct; Skiff passes them to each
worker as one `PodEnvironment`, so the worker and its helpers (container config, status,
probes) depend on this small module rather than on each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from opentelemetry.trace import Tracer

from skiff.client import ApiClient, EventRecorder
from skiff.client.backoff import Backoff
from skiff.clock import Clock
from skiff.kubelet.cgroups import CgroupManager
from skiff.kubelet.runtime import ContainerRuntime
from skiff.kubelet.runtime.images import ImageCommands
from skiff.kubelet.volumes import VolumeManager

__all__ = ["PodEnvironment"]


@dataclass
class PodEnvironment:
    """What every pod worker of one node shares."""

    api: ApiClient
    recorder: EventRecorder
    # Runs the pods' sandboxes (SPEC SB1) and containers; the process runtime isolates
    # pods when it may, else pods share the node's network and are told so.
    runtime: ContainerRuntime
    root_dir: Path
    node_name: str
    backoff: Backoff[tuple[str, str]]
    clock: Clock
    tracer: Tracer
    base_env: dict[str, str]
    volumes: VolumeManager
    root_ca_file: str = ""  # SPEC AX3: the ca.crt of projected token volumes
    # The kubelet may mount (root with CAP_SYS_ADMIN, where the runtime makes pod
    # sandboxes): credential volumes on a tmpfs of their own, emptyDir medium Memory.
    mount_volumes: bool = False
    image_commands: ImageCommands = field(default_factory=dict)
    config_volume_refresh_seconds: float = 2.0
    # the node's allocatable cpu/memory: a resourceFieldRef's value for an unset limit
    allocatable: dict[str, str] = field(default_factory=dict)
    # Pod DNS (dnsconfig.py): --cluster-dns, --cluster-domain, --resolv-conf
    cluster_dns: tuple[str, ...] = ()
    cluster_domain: str = "cluster.local"
    resolv_conf: str = "/etc/resolv.conf"
    # AU8: the node's pod and container cgroups, which the process runtime makes and
    # removes; the kubelet reads them (usage, OOM of re-adopted containers, exec joins its
    # container's). None: not enforced on this node
    cgroups: CgroupManager | None = None
