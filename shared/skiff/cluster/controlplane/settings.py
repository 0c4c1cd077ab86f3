"""The control-plane node agent's settings (its flags), shared by its log service and its
Node and mirror-pod loops."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


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
    probe_period: float = 10.0  # a live etcd, scheduler or controller-manager's next check
    node_lease_duration_seconds: int = 40  # --node-lease-duration-seconds
    node_status_update_frequency: float = 10.0  # --node-status-update-frequency
