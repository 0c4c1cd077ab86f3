"""The kubelet's settings: Kubernetes' flag names, every period compressible for tests.

`--node-labels`, `--register-with-taints` and the `--eviction-*` maps take Kubernetes' own
text formats and are parsed here, so a bad value fails at start-up naming its flag.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import socket
from dataclasses import dataclass

from skiff.api.quantity import bytes_, cpu_millis
from skiff.api.selectors import dns1123_subdomain_problems
from skiff.settings import SettingsError, duration, load_settings, parse_duration, setting

__all__ = ["KubeletSettings", "parse_labels", "parse_settings", "parse_taints",
           "parse_grace_periods"]

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True)
class KubeletSettings:
    apiserver: str = setting("127.0.0.1:6443", help="apiserver host:port")
    health_port: int = setting(10250, help="gRPC health + log service port on 127.0.0.1 "
                                           "(0 = none)")
    port: int = setting(0, help="the kubelet's own port (logs, exec, metrics) over mutual "
                                "TLS when SKIFF_KUBELET_TLS_CERT_FILE is set (0 = any free "
                                "port; the Node publishes it)")
    log_level: str = setting("INFO", help="DEBUG, INFO, WARNING or ERROR")
    write_batch_size: int = setting(
        100, help="at most this many writes (bindings, status updates, Events, Leases) "
                  "share one Batch call; 0 = a call of its own for each")
    write_batch_delay: float = duration(
        0.01, help="the longest a write waits for others to share its Batch call")
    node_name: str = setting("", help="the Node's name (default: the host name)")
    node_ip: str = setting("127.0.0.1", help="the Node's InternalIP address; auto = the "
                                             "address this host's name resolves to, as "
                                             "Kubernetes' kubelet picks one without "
                                             "--node-ip (a compose node's container address)")
    root_dir: str = setting("/tmp/skiff/kubelet",
                            help="pod directories, emptyDir volumes and container logs")
    node_labels: str = setting("", help="extra node labels, k=v,k2=v2")
    node_annotations: str = setting("", help="node annotations at registration, k=v,k2=v2 "
                                             "(e.g. skiff.io/fence-agent=power)")
    volume_root: str = setting("", help="persistent volume directories pvc-<claim uid>, "
                                        "shared by the kubelets of a host (default: "
                                        "<root-dir>/volumes)")
    register_with_taints: str = setting("", help="taints at registration, "
                                                 "key=value:Effect,...")
    kube_api_address: str = setting(
        "", help="host:port of the Kubernetes REST API that containers reach as "
                 "KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT (SPEC AX3)")
    root_ca_file: str = setting("", help="the cluster's root CA, written as ca.crt into "
                                         "ServiceAccount token volumes")
    metrics_resolution: float = duration(
        10.0, help="how often container and node resource usage is sampled (metrics.k8s.io)")
    sandbox: str = setting("auto", help="pod sandboxes (SPEC SB1): auto = a network and UTS "
                                        "namespace per pod when running as root with "
                                        "CAP_SYS_ADMIN and CAP_NET_ADMIN; none = pods "
                                        "share the node's network")
    service_proxy: bool = setting(True, help="serve Services' cluster IPs to sandboxed pods "
                                             "(a userspace proxy in the pod network "
                                             "namespace, SPEC AX7)")
    cluster_dns: str = setting(
        "10.96.0.10", help="the cluster DNS addresses pods with dnsPolicy ClusterFirst get as "
                           "nameservers, comma-separated; the kubelet answers DNS on the first "
                           "in the pod network namespace (default: the kube-dns Service's "
                           "address in the default service range; empty = no cluster DNS)")
    cluster_domain: str = setting("cluster.local", help="the cluster's DNS domain")
    resolv_conf: str = setting(
        "/etc/resolv.conf", help="the node's resolver: its nameservers answer names outside "
                                 "the cluster, and pods with dnsPolicy Default get its "
                                 "contents")
    pod_cidr_wait: float = duration(
        0.0, help="how long after the kubelet starts a pod waits (ContainerCreating) for the "
                  "Node's spec.podCIDR from the nodeipam controller before it runs without a "
                  "sandbox; 0 = run at once (clusters without node IPAM)")
    exec_tty_size_wait: float = duration(
        1.0, help="how long a `kubectl exec -t` command waits for the caller's terminal size "
                  "before it starts (kubectl sends it as soon as the stream is upgraded)")
    pod_network_namespace: str = setting(
        "skiff-podnet", help="the network namespace holding the pod network's bridge "
                             "(shared by every kubelet of the cluster)")
    pod_network: str = setting(
        "shared", help="shared = the pod network namespace's bridge joins every node's pods; "
                       "node = kind's layout (a node container): the bridge in the kubelet's "
                       "own network namespace and a route per other Node's podCIDR via its "
                       "InternalIP, kept in sync with the Nodes (SPEC JN1)")
    node_lease_duration_seconds: int = setting(40, help="the node Lease's duration")
    node_lease_renew_interval: float = duration(
        0.0, help="how often the Lease is renewed (0 = a quarter of the lease duration, "
                  "Kubernetes' nodeLeaseRenewIntervalFraction)")
    node_status_update_frequency: float = duration(
        10.0, help="how often node status is computed (written when it changed)")
    node_status_report_frequency: float = duration(
        300.0, help="node status is written at least this often even when unchanged")
    sync_frequency: float = duration(60.0, help="resync of every pod worker")
    pod_worker_backoff_period: float = duration(
        10.0, help="a pod worker that failed starts again after this long, jittered by up to "
                   "half (Kubernetes' backOffPeriod for a failed pod sync)")
    container_restart_backoff_base: float = duration(10.0, help="LC3 first restart delay")
    container_restart_backoff_max: float = duration(300.0, help="LC3 restart delay cap")
    container_log_max_size: str = setting(
        "10Mi", help="a running container's log file is rotated once it is larger than this "
                     "(Kubernetes' containerLogMaxSize)")
    container_log_max_files: int = setting(
        5, help="log files kept per container, the current one included; rotated ones but "
                "the newest are gzipped (Kubernetes' containerLogMaxFiles, at least 2)")
    container_log_monitor_interval: float = duration(
        10.0, help="how often container logs are checked for rotation "
                   "(Kubernetes' containerLogMonitorInterval)")
    eviction_hard: str = setting(
        "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%",
        help="hard eviction thresholds, signal<quantity|%,... (Kubernetes' defaults without "
             "imagefs: there are no images, imagefs.* thresholds are measured on nodefs)")
    eviction_soft: str = setting("", help="soft eviction thresholds")
    eviction_soft_grace_period: str = setting("", help="signal=duration,...")
    eviction_max_pod_grace_period: int = setting(
        0, help="grace period override for soft evictions (seconds)")
    eviction_pressure_transition_period: float = duration(
        300.0, help="how long a pressure condition stays after the threshold clears")
    eviction_monitoring_interval: float = duration(
        10.0, help="how often eviction signals are measured (housekeeping interval)")
    cgroup_root: str = setting(
        "", help="the cgroup under which the node's pod cgroups (skiff/<node>/...) are made "
                 "(Kubernetes' --cgroup-root); empty = the kubelet's own cgroup on cgroup v1, "
                 "the root of its cgroup namespace on v2")
    capacity_cpu: str = setting("", help="node cpu capacity (default: the host's cores)")
    capacity_memory: str = setting("", help="node memory capacity (default: MemTotal)")
    max_pods: int = setting(110, help="pods capacity")
    image_commands: str = setting("", help="YAML/JSON file: image name -> command list, "
                                  "for containers without `command` (default: a stand-in "
                                  "that serves the declared ports; see runtime/images.py)")
    rotate_certificates: bool = setting(
        False, help="renew the client certificate (SKIFF_CLIENT_CERT_FILE/_KEY_FILE) by a "
                    "CSR before it expires (Kubernetes' rotateCertificates; SPEC JN2)")
    server_tls_bootstrap: bool = setting(
        False, help="get the serving certificate (SKIFF_KUBELET_TLS_CERT_FILE) by a "
                    "kubernetes.io/kubelet-serving CSR once the Node is registered, and renew "
                    "it; --port must be set (Kubernetes' serverTLSBootstrap)")
    certificate_rotation_fraction: float = setting(
        0.0, help="renew once this share of a certificate's lifetime has passed (0 = a "
                  "jittered 0.7-0.9, as Kubernetes' certificate manager; tests compress it)")
    certificate_check_period: float = duration(30.0, help="how often certificates are "
                                                          "checked for renewal")
    certificate_request_timeout: float = duration(
        900.0, help="how long a CSR waits to be approved and signed before it is asked again")
    runtime: str = setting("process", help="process (real processes) or fake (hollow)")
    hollow_nodes: int = setting(0, help="with --runtime fake: host N nodes named "
                                        "<node-name>-<i> in this process")
    hollow_nodes_per_connection: int = setting(
        625, help="hollow nodes whose Lease renewals and status writes share one "
                  "connection (each real kubelet has its own: with one for thousands, the "
                  "kernel's spread of connections over `apiserver --processes` is lopsided; "
                  "with one for a few hundred, their writes batch less and cost more)")

    @property
    def heartbeat_timeout(self) -> float:
        """Each Lease renewal and status write gives up after this long, on a connection of
        its own: Kubernetes' kubelet gives its heartbeat client a timeout of the status
        update frequency, capped at the lease duration. Without it one call stuck on a
        sick apiserver held every heartbeat for the client's 30 s and the node was marked
        Unknown while its kubelet was fine and its watches flowed."""
        return min(self.node_status_update_frequency, float(self.node_lease_duration_seconds))

    @property
    def lease_renew_interval(self) -> float:
        if self.node_lease_renew_interval > 0:
            return self.node_lease_renew_interval
        return self.node_lease_duration_seconds * 0.25

    def cluster_dns_addresses(self) -> list[str]:
        return [a.strip() for a in self.cluster_dns.split(",") if a.strip()]

    def node_names(self) -> list[str]:
        base = self.node_name or socket.gethostname().split(".")[0].lower()
        if self.hollow_nodes > 0:
            return [f"{base}-{i}" for i in range(self.hollow_nodes)]
        return [base]

    def cpu_capacity(self) -> str:
        return self.capacity_cpu or str(os.cpu_count() or 1)

    def memory_capacity(self) -> str:
        if self.capacity_memory:
            return self.capacity_memory
        try:
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemTotal:"):
                        return f"{int(line.split()[1])}Ki"
        except OSError:
            pass
        return "8Gi"


def parse_labels(text: str, *, flag: str = "--node-labels") -> dict[str, str]:
    labels: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SettingsError(f"{flag}: {item!r} is not key=value")
        labels[key] = value
    return labels


def parse_taints(text: str, *, flag: str = "--register-with-taints") -> list[dict[str, str]]:
    taints: list[dict[str, str]] = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        key_value, sep, effect = item.rpartition(":")
        if not sep or effect not in TAINT_EFFECTS:
            raise SettingsError(f"{flag}: {item!r} is not key[=value]:Effect with Effect one "
                                f"of {', '.join(TAINT_EFFECTS)}")
        key, _, value = key_value.partition("=")
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        taints.append(taint)
    return taints


def parse_grace_periods(text: str, *,
                        flag: str = "--eviction-soft-grace-period") -> dict[str, float]:
    periods: dict[str, float] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        signal, sep, value = item.partition("=")
        try:
            if not sep:
                raise ValueError(f"{item!r} is not signal=duration")
            periods[signal] = parse_duration(value)
        except ValueError as err:
            raise SettingsError(f"{flag}: {err}") from None
    return periods


def host_address() -> str:
    """The IPv4 address this host's name resolves to (`--node-ip auto`)."""
    name = socket.gethostname()
    try:
        return socket.gethostbyname(name)
    except OSError as err:
        raise SettingsError(f"--node-ip auto: the host name {name!r} does not resolve "
                            f"({err.strerror or err}); pass --node-ip ADDRESS") from None


def parse_settings(argv: list[str] | None) -> KubeletSettings:
    settings = load_settings(KubeletSettings, argv, prog="skiff-kubelet",
                             env_prefix="SKIFF_KUBELET_",
                             description="Skiff's node agent: runs the pods bound to a node.")
    parse_labels(settings.node_labels)
    parse_labels(settings.node_annotations, flag="--node-annotations")
    parse_taints(settings.register_with_taints)
    parse_grace_periods(settings.eviction_soft_grace_period)
    try:
        if bytes_(settings.container_log_max_size) <= 0:
            raise ValueError("must be positive")
    except ValueError as err:
        raise SettingsError(f"--container-log-max-size: {settings.container_log_max_size!r}: "
                            f"{err}") from None
    if settings.container_log_max_files < 2:
        raise SettingsError("--container-log-max-files: must be at least 2 (the current file "
                            "and one rotated), as Kubernetes requires")
    if settings.runtime not in ("process", "fake"):
        raise SettingsError(f"--runtime: {settings.runtime!r} is not process or fake")
    if settings.pod_network not in ("shared", "node"):
        raise SettingsError(f"--pod-network: {settings.pod_network!r} is not shared or node")
    if settings.hollow_nodes and settings.runtime != "fake":
        raise SettingsError("--hollow-nodes needs --runtime fake (hollow nodes run no "
                            "processes)")
    if settings.hollow_nodes_per_connection < 1:
        raise SettingsError(f"--hollow-nodes-per-connection: "
                            f"{settings.hollow_nodes_per_connection} must be at least 1")
    if settings.node_ip == "auto":
        settings = dataclasses.replace(settings, node_ip=host_address())
    for address in settings.cluster_dns_addresses():
        try:
            ipaddress.IPv4Address(address)
        except ValueError:
            raise SettingsError(f"--cluster-dns: {address!r} is not an IPv4 address") from None
    if dns1123_subdomain_problems(settings.cluster_domain.strip(".")):
        raise SettingsError(f"--cluster-domain: {settings.cluster_domain!r} is not a DNS "
                            "domain (lower-case labels separated by dots, e.g. cluster.local)")
    try:
        cpu_millis(settings.cpu_capacity())
        bytes_(settings.memory_capacity())
    except (ValueError, Exception) as err:
        raise SettingsError(f"--capacity-cpu/--capacity-memory: {err}") from None
    return settings
