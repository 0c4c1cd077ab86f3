"""What every launcher of a cluster shares: the services' common flags and the start line.

Local processes (`local`) and netns hosts (`netns.cluster`) start the same services with
the same node labels and annotations, print one line per started component, and refuse to
start over a cluster still running from the same data dir.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from skiff.cluster.processes import Process, StartError
from skiff.cluster.state import running_elsewhere

ZONES = ("zone-a", "zone-b", "zone-c")
# The nodeipam controller runs in every cluster `skiff up` makes: a pod created before its
# Node has a podCIDR waits for one (ContainerCreating) rather than run without a sandbox.
POD_CIDR_WAIT = "30s"
ENV = {"SKIFF_LOG_FORMAT": "json"}  # every service's environment besides os.environ


def zone_label(i: int) -> str:
    """node-i's zone label: the nodes spread over ZONES in turn."""
    return f"topology.kubernetes.io/zone={ZONES[(i - 1) % len(ZONES)]}"


def service_available(module: str) -> bool:
    """Whether `python -m module` exists in this installation (services land over time).

    Found without importing the package: a service's package imports most of the service
    (the kubelet's and the controller-manager's ~0.5 s of CPU each), and `skiff up` asks for
    every service before starting it."""
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        return False
    places = (spec.submodule_search_locations or []) if spec is not None else []
    return any((Path(place) / "__main__.py").is_file() for place in places)


def refuse_if_running(data_dir: Path) -> None:
    """A StartError when a cluster recorded in `data_dir` still runs."""
    running = running_elsewhere(data_dir)
    if running is not None:
        raise StartError(f"a cluster is already running from {data_dir} (API "
                         f"{running.api}); stop it with `skiff down` first")


def started_line(name: str, proc: Process, address: str) -> str:
    return f"{name:<22} pid {proc.pid:<8} {address:<24} log {proc.log_path}"


CONTROL_PLANE_MODULE = "skiff.cluster.controlplane"  # the control-plane node agent
