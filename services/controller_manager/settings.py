"""The controller-manager's settings, named after kube-controller-manager's flags.

A field `node_monitor_grace_period` is the flag `--node-monitor-grace-period`, the env var
`SKIFF_CONTROLLER_MANAGER_NODE_MONITOR_GRACE_PERIOD` and the `controllerManager:` key
`nodeMonitorGracePeriod` of `skiff up --config`, so tests compress time with flags while
production keeps Kubernetes' defaults.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass

from skiff.settings import SettingsError, duration, load_settings, setting

ENV_PREFIX = "SKIFF_CONTROLLER_MANAGER_"
FENCE_AGENTS = ("power", "network", "storage", "none")


def default_identity() -> str:
    """client-go's default: the hostname plus something unique to this process."""
    return f"{socket.gethostname()}_{os.getpid()}"


@dataclass(frozen=True)
class ControllerManagerSettings:
    # Empty: the one the skiff CLI talks to (SKIFF_SERVER, else the cluster.json of
    # SKIFF_DATA_DIR or ~/.skiff), else 127.0.0.1:6443 (`skiff up` always names it).
    apiserver: str = setting("", help="the apiserver's gRPC address (empty: the skiff CLI's)")
    # Run as any user (e.g. one controller outside the cluster's controller-manager, issue
    # 35): the CA and client certificate/key or token of a kubeconfig's current context,
    # instead of the SKIFF_CA_FILE/SKIFF_CLIENT_* that `skiff up` sets. Its `server` is
    # kubectl's REST port, not the gRPC one --apiserver names.
    kubeconfig: str = setting("", help="take this client's credentials from a kubeconfig")
    health_port: int = setting(0, help="gRPC health port (0: no health server)")
    health_bind_address: str = setting("127.0.0.1", help="address of the health server")
    log_level: str = setting("INFO")
    write_batch_size: int = setting(
        100, help="at most this many writes (bindings, status updates, Events, Leases) "
                  "share one Batch call; 0 = a call of its own for each")
    write_batch_delay: float = duration(
        0.01, help="the longest a write waits for others to share its Batch call")
    controllers: tuple[str, ...] = setting(
        ("*",), help="comma list of controllers to run; '*' runs all; '-name' disables one")
    leader_elect: bool = setting(True, help="run controllers only while holding the Lease")
    leader_elect_lease_duration: float = duration(15.0)
    leader_elect_renew_deadline: float = duration(10.0)
    leader_elect_retry_period: float = duration(2.0)
    leader_elect_identity: str = setting("", help="holder identity (default hostname_pid)")
    leader_elect_resource_name: str = setting("skiff-controller-manager")
    leader_elect_resource_namespace: str = setting("kube-system")
    # Node lifecycle (SPEC PS2). 50 s is Kubernetes' default since 1.32 (40 s before).
    node_monitor_period: float = duration(5.0)
    node_monitor_grace_period: float = duration(50.0)
    node_startup_grace_period: float = duration(60.0)
    # Zone disruption: NoExecute tainting rates (nodes/s) and when a zone is unhealthy.
    node_eviction_rate: float = setting(0.1, help="nodes/s tainted NoExecute in a healthy "
                                                  "zone (and one fully disrupted)")
    secondary_node_eviction_rate: float = setting(
        0.01, help="nodes/s tainted NoExecute in a partially disrupted large zone")
    large_cluster_size_threshold: int = setting(
        50, help="a partially disrupted zone this small or smaller taints nothing")
    unhealthy_zone_threshold: float = setting(
        0.55, help="share of not-ready nodes (at least 3) that makes a zone partially "
                   "disrupted")
    # The local provisioner (SPEC AX4): where its volumes' directories are, so reclaiming a
    # `Delete` volume removes its data (empty: the data is left in place).
    local_volume_root: str = setting("", help="the nodes' shared volume root (local mode)")
    # PodGC (SPEC PS3).
    terminated_pod_gc_threshold: int = setting(12500, help="0 disables gc of terminated pods")
    pod_gc_period: float = duration(20.0)
    pod_gc_quarantine_time: float = duration(40.0)
    # Disruption: how long an eviction's entry in status.disruptedPods is honoured.
    pdb_deletion_timeout: float = duration(120.0)
    # Fencing (SPEC FN1–FN3): how long NodeReady must have been Unknown before a node is
    # fenced, the agent of nodes without the `skiff.io/fence-agent` annotation, the lowest
    # pod priority worth fencing for, and how long a Failed Fence stays before it is retried.
    fencing_delay: float = duration(60.0, help="NodeReady Unknown this long → fence")
    default_fence_agent: str = setting(
        "none", help="agent for nodes without skiff.io/fence-agent: power|network|storage|none")
    fencing_min_priority: int = setting(0, help="fence only for pods of at least this priority")
    fencing_retry_backoff: float = duration(30.0, help="a Failed Fence is retried after this")
    # Attach/detach: every exclusive volume is reconciled again this often (Kubernetes'
    # --attach-detach-reconcile-sync-period, 1 min), so a missed event cannot strand one.
    attach_detach_reconcile_sync_period: float = duration(60.0)
    # Node IPAM (SPEC SB1): each Node's spec.podCIDR is a block of the cluster CIDR.
    cluster_cidr: str = setting("10.244.0.0/16", help="CIDR range of the pod network")
    node_cidr_mask_size: int = setting(24, help="prefix length of each node's pod CIDR")
    # Workers per controller.
    concurrent_replicaset_syncs: int = setting(5)
    # A Job replaces a failed pod after base × 2^(failures-1), at most the max (Kubernetes:
    # 10 s and 6 min); tests compress the base.
    job_pod_failure_backoff: float = duration(10.0, help="first delay before a Job replaces "
                                              "a failed pod")
    job_pod_failure_backoff_max: float = duration(360.0)
    concurrent_garbage_collector_syncs: int = setting(5)
    concurrent_deployment_syncs: int = setting(5)
    # The garbage collector re-checks every owned object this often (events do the rest).
    gc_resync_period: float = duration(30.0)
    # root-ca-cert-publisher: the CA bundle every namespace's kube-root-ca.crt ConfigMap
    # carries (empty: the CA this process trusts the apiserver with, as Kubernetes falls back
    # to its kubeconfig's; none at all: the controller does nothing).
    root_ca_file: str = setting("", help="CA bundle published as kube-root-ca.crt")
    # csrsigning (SPEC JN2): the CA that signs approved CertificateSigningRequests of the
    # kubernetes.io signers (none: the controller signs nothing), and the longest
    # certificate it issues (a CSR's spec.expirationSeconds may ask for less).
    cluster_signing_cert_file: str = setting("", help="PEM CA certificate that signs CSRs")
    cluster_signing_key_file: str = setting("", help="PEM key of --cluster-signing-cert-file")
    cluster_signing_duration: float = duration(365 * 24 * 3600.0)
    # ResourceQuota (kube-controller-manager's --resource-quota-sync-period): every quota is
    # recounted this often besides on each change of what it counts.
    resource_quota_sync_period: float = duration(300.0)
    # HorizontalPodAutoscaler (kube-controller-manager's --horizontal-pod-autoscaler-*): each
    # HPA is synced this often; a usage ratio within the tolerance of 1.0 changes nothing; a
    # scale-down without spec.behavior waits out the stabilization window; cpu samples of a
    # pod are ignored while it initializes (and, unready, until the readiness delay).
    horizontal_pod_autoscaler_sync_period: float = duration(15.0)
    horizontal_pod_autoscaler_tolerance: float = setting(
        0.1, help="minimum change (from 1.0) in the desired-to-actual metrics ratio to scale")
    horizontal_pod_autoscaler_downscale_stabilization: float = duration(300.0)
    horizontal_pod_autoscaler_cpu_initialization_period: float = duration(300.0)
    horizontal_pod_autoscaler_initial_readiness_delay: float = duration(30.0)
    concurrent_horizontal_pod_autoscaler_syncs: int = setting(5)
    concurrent_statefulset_syncs: int = setting(5)
    concurrent_node_syncs: int = setting(5)
    concurrent_taint_eviction_syncs: int = setting(8)
    concurrent_disruption_syncs: int = setting(2)
    concurrent_gc_syncs: int = setting(1)
    concurrent_fencing_syncs: int = setting(2)
    concurrent_attach_detach_syncs: int = setting(5)

    @property
    def identity(self) -> str:
        return self.leader_elect_identity or default_identity()

    def check(self) -> None:
        """Reject values the flags' types cannot: raises SettingsError naming the flag."""
        if self.default_fence_agent not in FENCE_AGENTS:
            raise SettingsError(f"--default-fence-agent: {self.default_fence_agent!r} is not "
                                f"one of {', '.join(FENCE_AGENTS)}")
        if self.node_eviction_rate < 0 or self.secondary_node_eviction_rate < 0:
            raise SettingsError("--node-eviction-rate and --secondary-node-eviction-rate "
                                "must be >= 0")
        if not 0 <= self.unhealthy_zone_threshold <= 1:
            raise SettingsError("--unhealthy-zone-threshold must be between 0 and 1")
        try:
            net = ipaddress.ip_network(self.cluster_cidr, strict=False)
        except ValueError:
            raise SettingsError(f"--cluster-cidr: {self.cluster_cidr!r} is not a CIDR "
                                "(e.g. 10.244.0.0/16)") from None
        if not net.prefixlen <= self.node_cidr_mask_size <= net.max_prefixlen:
            raise SettingsError(f"--node-cidr-mask-size: {self.node_cidr_mask_size} must be "
                                f"between {net.prefixlen} and {net.max_prefixlen}")
        if self.fencing_delay < 0 or self.fencing_retry_backoff < 0:
            raise SettingsError("--fencing-delay and --fencing-retry-backoff must be >= 0")
        if self.horizontal_pod_autoscaler_tolerance < 0:
            raise SettingsError("--horizontal-pod-autoscaler-tolerance must be >= 0")
        if self.horizontal_pod_autoscaler_sync_period <= 0:
            raise SettingsError("--horizontal-pod-autoscaler-sync-period must be > 0")


def parse_settings(argv: list[str] | None = None) -> ControllerManagerSettings:
    return load_settings(ControllerManagerSettings, argv, prog="skiff-controller-manager",
                         env_prefix=ENV_PREFIX,
                         description="Skiff's controller-manager: podgc, node lifecycle, "
                                     "statefulset, replicaset, disruption, fencing, "
                                     "attach/detach, volume binding, horizontal pod "
                                     "autoscaling and the other controllers.")
