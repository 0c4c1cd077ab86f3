"""The scheduler's settings: Kubernetes' kube-scheduler flag names, `SKIFF_SCHEDULER_*`
environment variables, and an optional KubeSchedulerConfiguration file (`--config`)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from skiff.settings import duration, load_settings, setting


@dataclass(frozen=True)
class SchedulerSettings:
    apiserver: str = setting("127.0.0.1:6443", help="apiserver gRPC address, or several "
                                                    "comma-separated to fail over between")
    health_port: int = setting(10259, help="gRPC health port (0 = no health server)")
    bind_address: str = setting("127.0.0.1", help="address the health server listens on")
    log_level: str = setting("INFO")
    write_batch_size: int = setting(
        100, help="at most this many writes (bindings, status updates, Events, Leases) "
                  "share one Batch call; 0 = a call of its own for each")
    write_batch_delay: float = duration(
        0.01, help="the longest a write waits for others to share its Batch call")
    # The scheduler's cache is assume-based (its own bindings count at once), so a pod or
    # node event a tick late costs it at most that tick; its streams are the busiest.
    coalesced_watches: bool = setting(
        True, help="ask the apiserver to coalesce this scheduler's busy watch streams "
                   "(events up to one --watch-coalesce tick late, in fewer messages)")
    config: str = setting("", help="path to a KubeSchedulerConfiguration YAML file")
    scheduler_name: str = setting("default-scheduler",
                                  help="schedule only pods with this spec.schedulerName "
                                       "(the profile name when --config sets none)")
    pod_initial_backoff_seconds: float = duration(1.0, help="first backoff of a pod that "
                                                           "failed to schedule")
    pod_max_backoff_seconds: float = duration(10.0, help="longest backoff")
    pod_max_in_unschedulable_pods_duration: float = duration(
        300.0, help="retry an unschedulable pod at least this often")
    percentage_of_nodes_to_score: int = setting(
        0, help="stop filtering after this % of nodes fit (0 = Kubernetes' adaptive default)")
    # Kubernetes binds every pod in its own goroutine; with 16 in flight a bind's round trip
    # (~0.2 s on a loaded machine) capped scheduling at ~80 pods/s.
    parallel_binds: int = setting(256, help="bindings in flight at once")
    # Leader election, as kube-scheduler's flags and defaults.
    leader_elect: bool = setting(True, help="schedule only while holding the Lease")
    leader_elect_lease_duration: float = duration(15.0)
    leader_elect_renew_deadline: float = duration(10.0)
    leader_elect_retry_period: float = duration(2.0)
    leader_elect_identity: str = setting("", help="holder identity (default hostname_pid)")
    leader_elect_resource_name: str = setting("kube-scheduler")
    leader_elect_resource_namespace: str = setting("kube-system")

    @property
    def identity(self) -> str:
        return self.leader_elect_identity or f"{socket.gethostname()}_{os.getpid()}"


DEFAULTS = SchedulerSettings()


def parse_settings(argv: list[str] | None = None) -> SchedulerSettings:
    return load_settings(SchedulerSettings, argv, prog="skiff-scheduler",
                         env_prefix="SKIFF_SCHEDULER_",
                         description="Skiff's scheduler: binds pending pods to nodes.")
