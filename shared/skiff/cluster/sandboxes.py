"""The CLI's side of pod sandboxes (SPEC SB1, SB4): which pod network namespace a local
cluster's kubelets share, the warning at `skiff up` when pods will not be isolated, and
removing every sandbox of the cluster at `skiff down`.

The kubelets make one network namespace per pod (`skiff-pod-<uid>`, listed in each
kubelet's `<root-dir>/ipam/<podCIDR>/<ip>` files) and attach them to a bridge in the
cluster's pod network namespace. Stopping a kubelet leaves its pods running (so a restarted
kubelet adopts them); stopping the cluster removes their namespaces (their veths go with
them) and then the pod network namespace itself (with its bridge).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import hashlib
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["NOT_ISOLATED_WARNING", "isolation_warning", "pod_network_namespace",
           "remove_sandboxes"]

NOT_ISOLATED_WARNING = (
    "warning: pods are NOT isolated ({why}): they share the host's network (pod IP "
    "127.0.0.1, ports collide between pods), hostname and mounts; run `sudo skiff up` for "
    "a network namespace and IP per pod")


def pod_network_namespace(data_dir: Path) -> str:
    """One pod network namespace per cluster, named after its data directory."""
    digest = hashlib.sha1(str(data_dir.resolve()).encode()).hexdigest()[:8]
    return f"skiff-podnet-{digest}"


def isolation_warning(kubelet_config: Mapping[str, Any], *,
                      env: Mapping[str, str] | None = None) -> str | None:
    """The line `skiff up` prints when the kubelets will not sandbox pods, else None."""
    env = os.environ if env is None else env
    mode = str(kubelet_config.get("sandbox") or env.get("SKIFF_KUBELET_SANDBOX") or "auto")
    if mode == "none":
        return NOT_ISOLATED_WARNING.format(why="kubelet sandbox: none")
    if os.geteuid() != 0:
        return NOT_ISOLATED_WARNING.format(why="not running as root")
    return None


def _pod_uids(root: Path) -> set[str]:
    uids: set[str] = set()
    for entry in root.glob("ipam/*/*"):
        with contextlib.suppress(OSError):
            uids.add(entry.read_text().strip())
    return uids


_MNT_DETACH = 2


def _unmount_under(root: Path) -> None:
    """Memory-backed emptyDirs (tmpfs) the kubelet under `root` left mounted."""
    prefix = str(root.resolve()) + "/"
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text()
              .splitlines() if line.split()[4].startswith(prefix)]
    if not points:
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    for point in sorted(points, reverse=True):
        libc.umount2(point.encode(), _MNT_DETACH)


def remove_sandboxes(roots: Iterable[Path], pod_network: str) -> int:
    """Remove the pod namespaces the kubelets under `roots` recorded and the cluster's pod
    network namespace; returns how many namespaces went. Only names Skiff made are
    touched."""
    # pyroute2 here, not at the top: importing it is ~0.1 s of CPU, and every `skiff`
    # command imports this module (through `skiff token` and the chaos commands).
    from pyroute2 import netns

    existing = set(netns.listnetns())
    removed = 0
    for root in roots:
        for uid in _pod_uids(root):
            name = f"skiff-pod-{uid}"
            if name in existing:
                with contextlib.suppress(OSError):
                    netns.remove(name)
                    removed += 1
        shutil.rmtree(root / "ipam", ignore_errors=True)
        _unmount_under(root)
    if pod_network in existing:
        with contextlib.suppress(OSError):
            netns.remove(pod_network)
            removed += 1
    return removed
