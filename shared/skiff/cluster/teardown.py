"""Stopping a whole cluster, whichever launcher started it: the recorded processes in
reverse start order, then the pods (the kubelets leave them running when they stop, so
that a restarted kubelet adopts them; the cluster does not), then what the pods had — their
network namespaces (SB4) and cgroups (AU8) — and last cluster.json itself."""

from __future__ import annotations

from pathlib import Path

from skiff.cgroupfs import remove_recorded
from skiff.cluster.podgroups import end_pod_groups, kubelet_root_dirs, summary
from skiff.cluster.sandboxes import remove_sandboxes
from skiff.cluster.state import Component, remove_state, stop_component

__all__ = ["end_pods", "forget", "pod_roots", "stop_recorded"]


def pod_roots(data_dir: Path, components: list[Component]) -> list[Path]:
    """The kubelets' root dirs, where each records its pods."""
    return kubelet_root_dirs(data_dir, [c.argv for c in components
                                        if c.name.startswith("kubelet-")])


def stop_recorded(components: list[Component], *, timeout: float) -> list[str]:
    """Each component, last started first (SIGTERM, SIGKILL after `timeout`), so a service
    can still reach the apiserver while it shuts down; one line each."""
    lines = []
    for comp in reversed(components):
        stop_component(comp, timeout=timeout)
        lines.append(f"{comp.name:<22} pid {comp.pid:<8} stopped")
    return lines


def end_pods(roots: list[Path]) -> str:
    """End the pods' process groups; how many, as one line."""
    return summary(end_pod_groups(roots))


def forget(data_dir: Path, roots: list[Path], *, pod_network: str) -> None:
    """Once the pods' processes are gone: their namespaces (and the cluster's pod network
    namespace `pod_network`, if any), their cgroups, and cluster.json."""
    remove_sandboxes(roots, pod_network)
    remove_recorded(roots)
    remove_state(data_dir)
