"""What one attempt of a container is started with: the kubelet's half of CRI's CreateContainer.

As kuberuntime's generateContainerConfig (with kubelet_pods.go's makeEnvironmentVariables
and makeMounts, and the DNS configurer), `ContainerConfigs` turns a pod's container spec
into the `ContainerConfig` the runtime starts: the environment (the runtime's PATH, HOME
and HOSTNAME, the node's base variables, Service links, `envFrom`, `env` with the downward
API and `$(VAR)` references), the command, the working directory, the log file, and in a
pod sandbox the container's own root with its volumes at their `mountPath`, the managed
/etc/hosts, /etc/hostname and /etc/resolv.conf, its termination-log file, and the identity,
capabilities and Landlock confinement its securityContext asks for (SPEC SB3, AU8).
It also says why a container is refused before it is created
(CreateContainerConfigError) and reads an exited attempt's termination message.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pwd
import socket
from pathlib import Path

from skiff.api.errors import ApiError
from skiff.api.types import Obj
from skiff.kubelet.configsources import refresh_config_volumes, resolve_env
from skiff.kubelet.dnsconfig import (
    MISSING_CLUSTER_DNS,
    ResolvConf,
    parse_resolv_conf,
    pod_resolv_conf,
)
from skiff.kubelet.handlers import POD_IP
from skiff.kubelet.pod_environment import PodEnvironment
from skiff.kubelet.pod_events import EventSink
from skiff.kubelet.poddir import PodDir, container_env, field_ref_value, write_downward_api
from skiff.kubelet.records import ContainerRecord
from skiff.kubelet.runtime import ContainerConfig
from skiff.kubelet.runtime.images import container_command
from skiff.kubelet.runtime.process import STANDARD_PATH
from skiff.kubelet.sandbox import Sandbox
from skiff.kubelet.sandbox.landlock import plan_landlock
from skiff.kubelet.sandbox.mounts import BindMount, SubPathError, etc_host_mounts, plan_mounts
from skiff.kubelet.sandbox.rootfs import RootView, system_entries
from skiff.kubelet.sandbox.security import (
    fs_group_volumes,
    open_empty_dirs,
    plan_security,
    run_as_non_root_error,
)
from skiff.kubelet.servicelinks import service_env
from skiff.kubelet.termination import (
    falls_back_to_logs,
    termination_message,
    termination_message_path,
)

__all__ = ["ContainerConfigs"]

log = logging.getLogger(__name__)

class ContainerConfigs:
    """The container configs of one pod. `sandbox`: the pod's sandbox once the runtime
    made it (None: the pod shares the node)."""

    def __init__(self, *, env: PodEnvironment, pod_dir: PodDir, uid: str, namespace: str,
                 name: str, event: EventSink) -> None:
        self.env = env
        self.dir = pod_dir
        self.uid = uid
        self.namespace = namespace
        self.name = name
        self._event = event
        self.sandbox: Sandbox | None = None
        self._config_env: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
        self._service_env: dict[str, dict[str, str]] = {}
        self._dns_reported = False  # MissingClusterDNS / DNSConfigForming said once

    @property
    def pod_ip(self) -> str:
        return self.sandbox.ip if self.sandbox is not None else POD_IP

    # -- before the container is created ---------------------------------------------------

    async def resolve_sources(self, pod: Obj, r: ContainerRecord) -> None:
        """Read the ConfigMaps, Secrets and Services the container's environment and
        volumes come from. Raises configsources.VolumeError (the volume waits),
        ConfigError or ApiError (CreateContainerConfigError) while one is missing."""
        await refresh_config_volumes(self.env.api, pod, self.dir.volume_path)
        self._config_env[r.name] = await resolve_env(self.env.api, pod, r.spec)
        self._service_env[r.name] = await self._services_env(pod)

    async def _services_env(self, pod: Obj) -> dict[str, str]:
        """AX7: the Service variables; a pod outside a sandbox cannot reach cluster IPs (the
        service proxy serves them in the pod network), so it keeps the `kubernetes`
        Service's variables that name the apiserver's own address (--kube-api-address)."""
        services = await self.env.api.list("services", namespace=self.namespace)
        try:
            kubernetes: Obj | None = await self.env.api.get("services", "kubernetes",
                                                            namespace="default")
        except ApiError:
            kubernetes = None
        env = service_env(pod, list(services.get("items") or []), kubernetes)
        if self.sandbox is None or self.sandbox.host_network:
            env = {k: v for k, v in env.items() if not k.startswith("KUBERNETES_")}
        return env

    def refused(self, pod: Obj, r: ContainerRecord) -> str | None:
        """AU8: why the kubelet will not create this container (its waiting reason is
        CreateContainerConfigError): runAsNonRoot with a root user, a subPath that leaves
        its volume."""
        image_uid = 0 if self.sandbox is not None else os.geteuid()
        refused = run_as_non_root_error(pod, r.spec, image_uid=image_uid)
        if refused is None and self.sandbox is not None:
            try:
                plan_mounts(r.spec, self.dir.volume_path)
            except SubPathError as err:
                refused = str(err)
        return refused

    def prepare(self, pod: Obj, r: ContainerRecord) -> None:
        """In a sandbox: the volumes' permissions for the pod's users (fsGroup), and this
        attempt's termination-log file."""
        if self.sandbox is None:
            return
        open_empty_dirs(pod, self.dir.volume_path)
        fs_group_volumes(pod, self.dir.volume_path)
        self._create_termination_log(r)

    # -- the config ------------------------------------------------------------------------

    def build(self, pod: Obj, r: ContainerRecord) -> ContainerConfig:
        """The config of `r`'s next (or current) attempt."""
        spec = r.spec
        env_from, keyed = self._config_env.get(r.name, ({}, {}))
        services = self._service_env.get(r.name, {})
        base = {**self._runtime_env(pod, spec),
                **{k: v for k, v in self.env.base_env.items()
                   if "KUBERNETES_SERVICE_HOST" not in services
                   or not k.startswith("KUBERNETES_")},
                **services, **env_from}
        env = container_env(pod, spec, node_name=self.env.node_name, base=base,
                            allocatable=self.env.allocatable or None)
        env.update(keyed)
        env = self._with_pod_ip(spec, env)
        sandbox = self._container_sandbox(pod, r)
        return ContainerConfig(
            pod_uid=self.uid, namespace=self.namespace, pod_name=self.name, name=r.name,
            # `$(VAR)` in command and args from the container's final environment
            command=container_command(spec, self.env.image_commands, env=env),
            env=env,
            # AU8: in its own root a container starts in `workingDir` or "/"; sharing the
            # host, in the pod's directory (where its volumes are linked)
            working_dir=Path(str(spec.get("workingDir") or "/")) if sandbox is not None
            else self.dir.working_dir(spec),
            log_path=self.dir.log_path(r.name, r.restart_count),
            image=str(spec.get("image", "")), sandbox=sandbox,
            stdin=bool(spec.get("stdin")), stdin_once=bool(spec.get("stdinOnce")),
            tty=bool(spec.get("tty")))

    def in_cgroup(self, pod: Obj, r: ContainerRecord,
                  config: ContainerConfig) -> ContainerConfig:
        """AU8: a command run in running container `r` (exec, a probe, a hook) joins its
        cgroup, as it would run inside a real container."""
        if self.env.cgroups is None or not r.running:
            return config
        return dataclasses.replace(config, join_cgroup=self.env.cgroups.container(
            pod, r.name).join(strict=False))

    def _runtime_env(self, pod: Obj, container: Obj) -> dict[str, str]:
        """AU8: what a container runtime adds before the pod's variables: PATH, HOSTNAME and
        HOME (the user's, from the container's minimal /etc/passwd). A pod sharing the
        host keeps the node's PATH (its programs are the node's) and the node's hostname."""
        if self.sandbox is None:
            try:
                home = pwd.getpwuid(os.geteuid()).pw_dir
            except KeyError:
                home = "/"
            return {"PATH": os.environ.get("PATH") or STANDARD_PATH,
                    "HOSTNAME": socket.gethostname(), "HOME": home}
        plan = plan_security(pod, container)
        return {"PATH": STANDARD_PATH, "HOSTNAME": self.sandbox.hostname, "HOME": plan.home}

    def _with_pod_ip(self, container: Obj, env: dict[str, str]) -> dict[str, str]:
        """`valueFrom.fieldRef` status.podIP/podIPs is the sandbox's address (SB1)."""
        if self.sandbox is None:
            return env
        for item in container.get("env") or []:
            ref = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
            if ref in ("status.podIP", "status.podIPs"):
                env[str(item.get("name", ""))] = self.sandbox.ip
        return env

    def _container_sandbox(self, pod: Obj, r: ContainerRecord) -> Sandbox | None:
        """SB3: the sandbox with this container's volumes at their mountPath, and its
        termination-log file at its terminationMessagePath (mounted last, as kuberuntime
        does)."""
        if self.sandbox is None:
            return None
        container = r.spec
        for volume in pod["spec"].get("volumes") or []:
            if "downwardAPI" in volume:
                write_downward_api(self.dir.volume_path(str(volume["name"])), volume, pod,
                                   lambda path: field_ref_value(pod, path, self.env.node_name,
                                                                pod_ip=self.pod_ip),
                                   allocatable=self.env.allocatable or None)
        security = plan_security(pod, container)
        etc = etc_host_mounts(
            self.dir.path, pod, container, ip=self.sandbox.ip,
            hostname=self.sandbox.hostname, domain=self.env.cluster_domain,
            resolv_conf=self._resolv_conf(pod))
        if self.sandbox.host_network:  # the node's own /etc/hosts and /etc/hostname
            etc = tuple(BindMount(m.target, m.target, read_only=True)
                        if m.target in ("/etc/hosts", "/etc/hostname") else m for m in etc
                        if m.target == "/etc/resolv.conf" or Path(m.target).is_file())
        mounts = plan_mounts(container, self.dir.volume_path) + etc + \
            self._termination_log_mount(r)
        # AU8: the container's own root filesystem, made on a directory of the pod's
        root = RootView(mount_point=str(self.dir.path / "rootfs"), mounts=mounts,
                        working_dir=str(container.get("workingDir") or "/"),
                        read_only=security.read_only_root, privileged=security.privileged,
                        entries=system_entries())
        return self.sandbox.for_container(root=root, security=security,
                                          landlock=plan_landlock(
                                              pod, privileged=security.privileged))

    def _resolv_conf(self, pod: Obj) -> str:
        """The pod's /etc/resolv.conf (dnsconfig.py); the kubelet's warnings about it go
        on the pod once, as Kubernetes' MissingClusterDNS and DNSConfigForming events."""
        try:
            host = parse_resolv_conf(Path(self.env.resolv_conf).read_text())
        except OSError:
            host = ResolvConf()
        conf, fell_back = pod_resolv_conf(pod, cluster_dns=list(self.env.cluster_dns),
                                          cluster_domain=self.env.cluster_domain, host=host)
        if not self._dns_reported:
            self._dns_reported = True
            if fell_back:
                self._event("Warning", "MissingClusterDNS", MISSING_CLUSTER_DNS)
            for note in conf.notes:
                self._event("Warning", "DNSConfigForming", note)
        return conf.render()

    # -- the termination-log file ----------------------------------------------------------

    def _termination_log(self, r: ContainerRecord) -> Path:
        """This attempt's termination-log file in the pod's directory (kuberuntime makes
        one per container instance under the pod's containers directory)."""
        return self.dir.path / "termination-logs" / r.name / str(r.restart_count)

    def _create_termination_log(self, r: ContainerRecord) -> None:
        """Before a sandboxed container starts: an empty termination-log file, writable by
        anyone (0666, as kuberuntime), and its mount point on the node if missing."""
        target = termination_message_path(r.spec)
        if target is None:
            return
        path = self._termination_log(r)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")
            path.chmod(0o666)
        except OSError as err:
            log.warning("cannot make the container's termination-log file", extra={
                "pod": f"{self.namespace}/{self.name}", "container": r.name,
                "path": target, "error": str(err)})

    def _termination_log_mount(self, r: ContainerRecord) -> tuple[BindMount, ...]:
        """The bind mount of this attempt's termination-log file at terminationMessagePath
        (none when the file or a non-directory mount point is missing)."""
        target = termination_message_path(r.spec)
        path = self._termination_log(r)
        if target is None or not path.is_file():
            return ()
        return (BindMount(str(path), target),)

    def termination_message(self, r: ContainerRecord, code: int, reason: str) -> str:
        """What the exited attempt left at its terminationMessagePath (only a sandboxed
        container has a file of its own there), or with FallbackToLogsOnError the tail of
        its log when that is empty and it failed."""
        message_file: Path | None = None
        if termination_message_path(r.spec) is not None:
            candidate = self._termination_log(r)
            message_file = candidate if candidate.is_file() else None
        return termination_message(
            message_file, self.dir.log_path(r.name, r.restart_count),
            fallback_to_logs=falls_back_to_logs(r.spec, code, reason))
