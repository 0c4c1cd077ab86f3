"""Skiff's kubelet: the node agent that runs the pods bound to its node as real processes.

It registers its Node (standard labels, capacity, NodeReady), renews its Lease, and gives
each pod a worker that runs init containers, sidecars and app containers, restarts them
with CrashLoopBackOff, probes them, runs their hooks and terminates them exactly as
Kubernetes does (SPEC LC1–LC8, GT4–GT12, PS1).

What a "container" is in Skiff: `command` + `args` run as a local process in its own
process group (the image is recorded in the status but never pulled or run), with its
`env`, volumes as directories of the pod's (see `poddir`), stdout/stderr in log files
served to `skiff logs`, and the configured stop signal (`lifecycle.stopSignal`, default
SIGTERM). The runtime (`runtime`, CRI's shape) first makes the pod's sandbox (its network
namespace, address and hostname, `sandbox`) when it may; otherwise the pod shares the
node (pod IP 127.0.0.1) and is told so.

A pod's way through: `kubelet` (routing, admission) → `pod_worker` (the per-pod state
machine) → `pod_sandbox` → `container_config` → `container_lifecycle` → `runtime`;
`pod_status` writes what happened.
"""

import os

# A container that joins its pod's sandbox is started with a preexec_fn, so subprocess must
# fork() (not vfork) the kubelet, which runs gRPC's pthread_atfork handlers in the child.
# With watch streams in flight those handlers are skipped in the parent yet the child
# sometimes died of SIGSEGV before exec (the container "exited 139" at once, with an empty
# log: Jobs failed, Deployments crash-looped). The kubelet never forks to run gRPC in the
# child, so gRPC's fork support is off here, before grpc is first imported.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from skiff.kubelet.kubelet import Kubelet  # noqa: E402
from skiff.kubelet.logs import LogService, fetch_logs  # noqa: E402
from skiff.kubelet.node import NodeAgent  # noqa: E402
from skiff.kubelet.pod_environment import PodEnvironment  # noqa: E402
from skiff.kubelet.pod_worker import PodWorker  # noqa: E402
from skiff.kubelet.runtime import ContainerConfig, ContainerHandle, ContainerRuntime  # noqa: E402
from skiff.kubelet.runtime.fake import FakeRuntime  # noqa: E402
from skiff.kubelet.runtime.process import ProcessRuntime  # noqa: E402
from skiff.kubelet.settings import KubeletSettings, parse_settings  # noqa: E402
from skiff.kubelet.termination import (  # noqa: E402
    MINIMUM_GRACE_PERIOD_SECONDS,
    KillReason,
    container_grace_period,
    effective_grace_period,
    grace_after_prestop,
)

__all__ = [
    "MINIMUM_GRACE_PERIOD_SECONDS", "ContainerConfig", "ContainerHandle", "ContainerRuntime",
    "FakeRuntime", "KillReason", "Kubelet", "KubeletSettings", "LogService", "NodeAgent",
    "PodEnvironment", "PodWorker", "ProcessRuntime", "container_grace_period",
    "effective_grace_period", "fetch_logs", "grace_after_prestop", "parse_settings",
]
