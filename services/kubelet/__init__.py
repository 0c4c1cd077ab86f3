"""Skiff's kubelet: the node agent that runs the pods bound to its node as real processes.

It registers its Node (standard labels, capacity, NodeReady), renews its Lease, and gives
each pod a worker that runs init containers, sidecars and app containers, restarts them
with CrashLoopBackOff, probes them, runs their hooks and terminates them exactly as
Kubernetes does (SPEC LC1–LC8, GT4–GT12, PS1).

What a "container" is in Skiff: `command` + `args` run as a local process in its own
process group (the image is recorded in the status but never pulled or run), with its
`env`, the pod directory as default working directory, `emptyDir` volumes as directories
(see `poddir`), stdout/stderr in log files served to `skiff logs`, and the configured stop
signal (`lifecycle.stopSignal`, default SIGTERM). The pod IP is the node's 127.0.0.1.
"""

from skiff.kubelet.kubelet import Kubelet
from skiff.kubelet.logs import LogService, fetch_logs
from skiff.kubelet.node import NodeAgent
from skiff.kubelet.pod_worker import PodEnvironment, PodWorker
from skiff.kubelet.runtime import ContainerConfig, ContainerHandle, ContainerRuntime
from skiff.kubelet.runtime.fake import FakeRuntime
from skiff.kubelet.runtime.process import ProcessRuntime
from skiff.kubelet.settings import KubeletSettings, parse_settings
from skiff.kubelet.termination import (
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
