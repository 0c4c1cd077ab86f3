"""Container cgroups (SPEC AU8): what makes `resources.limits` real.

Kubernetes' kubelet puts every pod in a cgroup of its own under the node's `kubepods`
cgroup (by QoS class: Guaranteed pods directly, `burstable/` and `besteffort/` below) and the
runtime puts each container in a cgroup under its pod's. Skiff does the same, named after
itself: `skiff/<node>-<root dir hash>/[burstable|besteffort/]pod<uid>/<container>`:

- `limits.memory` → `memory.max` (v2) / `memory.limit_in_bytes` (v1), without swap; a
  container over it is killed by the kernel's OOM killer, and the kubelet reports
  `OOMKilled` only when the cgroup's own counter says so (`oom_kill` in `memory.events`
  (v2) or `memory.oom_control` (v1)), never for any SIGKILL;
- `limits.cpu` → a CFS quota (`cpu.max` / `cpu.cfs_quota_us`, period 100 ms),
  `requests.cpu` → `cpu.weight` / `cpu.shares`, as Kubernetes converts them;
- the pod's cgroup gets the sum of its containers' limits when every container has one;
- usage (CPU seconds, working set = usage − inactive file pages) is read back from the
  cgroup, for metrics.k8s.io and the eviction manager.

The kubelet detects the hierarchy at start: cgroup v2 (unified: `/sys/fs/cgroup` is a
cgroup2 mount) or v1 (legacy or hybrid: one mount per controller). The container's process
joins its cgroup in the child between fork and exec (`ContainerCgroup.join`, before it enters
its sandbox), so nothing it allocates is ever outside the limit. On v1 the tree is made
inside the kubelet's own cgroup of each hierarchy (whatever bounds a node's kubelet bounds its
pods); on v2 under the root of the kubelet's cgroup namespace (a non-root v2 cgroup that
holds processes cannot have limited children). `--cgroup-root` chooses another parent.
Without root or a writable cgroup filesystem the kubelet runs pods as before and says so.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from skiff.api.quantity import bytes_, cpu_millis
from skiff.api.types import Obj
from skiff.cgroupfs import record_node_dirs, remove_tree
from skiff.kubelet.status import qos_class  # the kubelet's own QoS rule

__all__ = ["CgroupError", "CgroupLayout", "CgroupManager", "ContainerCgroup", "Usage",
           "detect_node", "node_cgroup_name",
           "cpu_shares", "cpu_weight", "detect"]

log = logging.getLogger(__name__)

CGROUP_MOUNT = Path("/sys/fs/cgroup")
PARENT = "skiff"
# The controllers Skiff sets or reads (v1 hierarchies; v2 enables them for its subtree).
V1_CONTROLLERS = ("memory", "cpu", "cpuacct", "pids", "freezer")
V2_CONTROLLERS = ("memory", "cpu", "pids")
CFS_PERIOD_US = 100_000  # Kubernetes' default cpuCFSQuotaPeriod
MIN_QUOTA_US = 1_000  # kernel minimum; Kubernetes' MinQuotaPeriod
MIN_SHARES, MAX_SHARES = 2, 262_144
NOT_ENFORCED_MESSAGE = ("resource limits are not enforced on this node: {reason}; "
                        "containers run without cgroups")


class CgroupError(OSError):
    """The cgroup filesystem cannot be used (not mounted, read-only, no permission)."""


def cpu_shares(millis: int) -> int:
    """Kubernetes' MilliCPUToShares: 1024 shares per core, at least 2."""
    if millis <= 0:
        return MIN_SHARES
    return max(MIN_SHARES, min(MAX_SHARES, millis * 1024 // 1000))


def cpu_weight(shares: int) -> int:
    """Kubernetes' (and runc's) conversion of v1 shares to a v2 weight in [1, 10000]."""
    return 1 + ((shares - 2) * 9999) // 262_142


def cpu_quota(millis: int) -> int:
    """Kubernetes' MilliCPUToQuota over the 100 ms period (at least 1 ms)."""
    return max(MIN_QUOTA_US, millis * CFS_PERIOD_US // 1000)


@dataclass(frozen=True)
class CgroupLayout:
    """Where the node's tree lives: one base directory per controller (v1), or one (v2)."""

    version: int
    bases: dict[str, Path]  # controller → the directory under which `skiff/` is made

    def dirs(self, relative: Path) -> dict[str, Path]:
        """controller → directory of `relative` (v2: one directory, under "unified")."""
        return {c: base / relative for c, base in self.bases.items()}


def _mounts(mountinfo: str) -> list[tuple[str, str, str, set[str]]]:
    """(fstype, mount point, mount root, super options) of every cgroup mount."""
    found = []
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        found.append((tail[0], fields[4].replace("\\040", " "), fields[3],
                      set(tail[2].split(","))))
    return found


def _own_paths(proc_cgroup: str) -> dict[str, str]:
    """controller → this process's cgroup path ("" for the v2 entry `0::/path`)."""
    paths: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(",") if parts[1] else [""]:
            paths[controller] = parts[2]
    return paths


def _inside(mount_point: str, mount_root: str, path: str) -> Path:
    """The directory of cgroup `path` seen through a mount of `mount_root`."""
    rel = os.path.relpath(path, mount_root) if path.startswith(mount_root) else "."
    return Path(mount_point) / ("" if rel == "." else rel)


def detect(*, mountinfo: str, proc_cgroup: str, cgroup_root: str = "") -> CgroupLayout | None:
    """The node's cgroup version and base directories, or None without cgroups.

    v2 when a cgroup2 mount carries the controllers (a unified `/sys/fs/cgroup`); v1 when
    the memory and cpu controllers are on v1 mounts (legacy, or hybrid with an empty
    `/sys/fs/cgroup/unified`). `cgroup_root` "" = automatic (see the module docstring)."""
    mounts = _mounts(mountinfo)
    own = _own_paths(proc_cgroup)
    v1: dict[str, tuple[str, str]] = {}
    for fstype, point, root, options in mounts:
        if fstype == "cgroup":
            for controller in V1_CONTROLLERS:
                if controller in options and controller not in v1:
                    v1[controller] = (point, root)
    if "memory" in v1 and "cpu" in v1:
        bases = {}
        for controller, (point, root) in v1.items():
            where = cgroup_root or own.get(controller, "/")
            bases[controller] = _inside(point, root, where) / PARENT
        return CgroupLayout(version=1, bases=bases)
    for fstype, point, root, _options in mounts:
        if fstype != "cgroup2":
            continue
        try:
            available = Path(point, "cgroup.controllers").read_text().split()
        except OSError:
            continue
        if "memory" in available and "cpu" in available:
            return CgroupLayout(version=2, bases={
                "unified": _inside(point, root, cgroup_root or root) / PARENT})
    return None


def detect_node(cgroup_root: str = "") -> CgroupLayout | None:
    """This node's layout, from the kubelet's own mounts and cgroups."""
    try:
        return detect(mountinfo=Path("/proc/self/mountinfo").read_text(),
                      proc_cgroup=Path("/proc/self/cgroup").read_text(),
                      cgroup_root=cgroup_root)
    except OSError:
        return None


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _keyed(text: str) -> dict[str, int]:
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):
            values[key] = int(value.strip())
    return values


@dataclass(frozen=True)
class Usage:
    cpu_seconds: float
    working_set: int


@dataclass
class ContainerCgroup:
    """One container attempt's cgroup: its directories (one per v1 hierarchy)."""

    version: int
    dirs: dict[str, Path]
    oom_kills_before: int = 0
    procs: list[str] = field(default_factory=list)

    @property
    def memory_dir(self) -> Path:
        return self.dirs["memory" if self.version == 1 else "unified"]

    def join(self, *, strict: bool = True) -> Callable[[], None]:
        """The child's pre-exec step: move itself into every hierarchy's cgroup. Paths are
        resolved now (in the kubelet), the writes happen in the child before exec. Not
        `strict` (a command run in a container: exec, a probe, a hook): a cgroup that is
        gone with its container is skipped rather than failing the command."""
        targets = [str(d / "cgroup.procs") for d in self.dirs.values()]

        def enter() -> None:
            pid = str(os.getpid()).encode()
            for target in targets:
                try:
                    fd = os.open(target, os.O_WRONLY)
                except FileNotFoundError:
                    if strict:
                        raise
                    continue
                try:
                    os.write(fd, pid)
                finally:
                    os.close(fd)
        return enter

    def oom_kills(self) -> int | None:
        """The kernel's count of processes of this cgroup killed by the OOM killer (None
        if the kernel does not keep one: v1 before Linux 4.13)."""
        if self.version == 2:
            return _keyed(_read(self.memory_dir / "memory.events")).get("oom_kill")
        return _keyed(_read(self.memory_dir / "memory.oom_control")).get("oom_kill")

    def oom_killed(self, *, exit_code: int | None, kubelet_killed: bool) -> bool:
        """Whether this attempt ended by the OOM killer: its cgroup's oom_kill counter rose
        (containerd's rule: an OOM event in the container makes the reason OOMKilled). A
        v1 kernel without the counter: killed by SIGKILL that the kubelet did not send,
        after the cgroup hit its limit (memory.failcnt)."""
        count = self.oom_kills()
        if count is not None:
            return count > self.oom_kills_before
        failcnt = _keyed("x " + _read(self.memory_dir / "memory.failcnt").strip()).get("x", 0)
        return exit_code == 128 + signal.SIGKILL and not kubelet_killed and failcnt > 0

    def usage(self) -> Usage | None:
        return _usage(self.version, self.dirs)

    def freeze(self, *, timeout: float = 1.0) -> bool:
        """Stop every process of the container where it stands (the freezer: `cgroup.freeze`
        on v2, `freezer.state` on v1), e.g. while its log file is rotated. True once they
        all are; False (and thawed) if they were not within `timeout` or cannot be."""
        if self.version == 2:
            control, done = self.dirs["unified"] / "cgroup.freeze", "1"
        elif "freezer" in self.dirs:
            control, done = self.dirs["freezer"] / "freezer.state", "FROZEN"
        else:
            return False
        try:
            _write(control, "1" if self.version == 2 else "FROZEN")
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.version == 2:
                    state = str(_keyed(_read(self.dirs["unified"] / "cgroup.events"))
                                .get("frozen", 0))
                else:
                    state = _read(control).strip()
                if state == done:
                    return True
                time.sleep(0.001)
        except OSError:
            pass
        self.thaw()
        return False

    def thaw(self) -> None:
        with contextlib.suppress(OSError):
            if self.version == 2:
                _write(self.dirs["unified"] / "cgroup.freeze", "0")
            elif "freezer" in self.dirs:
                _write(self.dirs["freezer"] / "freezer.state", "THAWED")


def _usage(version: int, dirs: dict[str, Path]) -> Usage | None:
    try:
        if version == 2:
            base = dirs["unified"]
            cpu = _keyed((base / "cpu.stat").read_text()).get("usage_usec", 0) / 1e6
            current = int((base / "memory.current").read_text())
            inactive = _keyed(_read(base / "memory.stat")).get("inactive_file", 0)
        else:
            cpu = int((dirs["cpuacct"] / "cpuacct.usage").read_text()) / 1e9
            current = int((dirs["memory"] / "memory.usage_in_bytes").read_text())
            inactive = _keyed(_read(dirs["memory"] / "memory.stat")).get(
                "total_inactive_file", 0)
    except (OSError, ValueError, KeyError):
        return None
    return Usage(cpu_seconds=cpu, working_set=max(0, current - inactive))


def _limits(container: Obj) -> tuple[int | None, int | None, int | None]:
    """(memory limit bytes, cpu limit millis, cpu request millis) of a container spec."""
    resources = container.get("resources") or {}
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    memory = bytes_(limits["memory"]) if "memory" in limits else None
    cpu = cpu_millis(limits["cpu"]) if "cpu" in limits else None
    request = cpu_millis(requests["cpu"]) if "cpu" in requests else cpu
    return memory, cpu, request


def _pod_total(pod: Obj, index: int) -> int | None:
    """The pod-level limit: Kubernetes' rule (sum over app and sidecar containers, at least
    the largest init container's), or None when any container has no such limit."""
    spec = pod.get("spec") or {}
    total = 0
    for c in spec.get("containers") or []:
        value = _limits(c)[index]
        if value is None:
            return None
        total += value
    for c in spec.get("initContainers") or []:
        value = _limits(c)[index]
        if value is None:
            return None
        if c.get("restartPolicy") == "Always":
            total += value
        else:
            total = max(total, value)
    return total


class CgroupManager:
    """The cgroups of one node's pods (one per kubelet of the process)."""

    def __init__(self, *, layout: CgroupLayout, node_name: str, root_dir: Path) -> None:
        self.layout = layout
        self.node_name = node_name
        self.node_dir = Path(node_cgroup_name(node_name, root_dir))

    @classmethod
    def create(cls, *, layout: CgroupLayout | None, node_name: str, root_dir: Path
               ) -> tuple[CgroupManager | None, str]:
        """The node's manager, or None and why cgroups cannot be used here."""
        if layout is None:
            return None, "no cgroup v1 memory and cpu hierarchies or cgroup v2 controllers"
        manager = cls(layout=layout, node_name=node_name, root_dir=root_dir)
        for attempt in range(3):
            try:
                manager.setup()
                break
            except OSError as err:
                # FileNotFoundError: `skiff/` may have been removed meanwhile by another
                # cluster's clean-up; try again
                if attempt == 2 or not isinstance(err, FileNotFoundError):
                    return None, f"cannot create {PARENT}/{manager.node_dir} cgroups " \
                                 f"({err.strerror or err})"
        manager.record(root_dir)
        return manager, ""

    def setup(self) -> None:
        """The node's parent cgroup (`skiff/<node>` and its QoS children), controllers
        enabled for the subtree on v2."""
        for relative in (Path("."), self.node_dir, self.node_dir / "burstable",
                         self.node_dir / "besteffort"):
            self._make(relative)
        for qos in ("besteffort",):  # Kubernetes gives BestEffort pods the minimum share
            self._cpu_weight(self.node_dir / qos, MIN_SHARES)

    def _make(self, relative: Path, *, leaf: bool = False) -> dict[str, Path]:
        """mkdir; on v2 the controllers are enabled for the children of every inner cgroup
        (a leaf, which holds the processes, must not have them enabled)."""
        dirs = self.layout.dirs(relative)
        if self.layout.version == 2:
            base = dirs["unified"]
            if relative == Path("."):  # from the parent of skiff/ down
                self._enable(base.parent)
            base.mkdir(exist_ok=True)
            if not leaf:
                self._enable(base)
        else:
            for directory in dirs.values():
                directory.mkdir(parents=relative == Path("."), exist_ok=True)
        return dirs

    def _enable(self, directory: Path) -> None:
        control = directory / "cgroup.subtree_control"
        enabled = set(_read(control).split())
        available = _read(directory / "cgroup.controllers").split()
        missing = [c for c in V2_CONTROLLERS if c not in enabled
                   and (c in available or not available)]
        if missing:
            _write(control, " ".join(f"+{c}" for c in missing))

    def _cpu_weight(self, relative: Path, shares: int) -> None:
        if self.layout.version == 2:
            _write(self.layout.dirs(relative)["unified"] / "cpu.weight",
                   str(cpu_weight(shares)))
        else:
            _write(self.layout.dirs(relative)["cpu"] / "cpu.shares", str(shares))

    def _set_limits(self, relative: Path, *, memory: int | None, cpu: int | None,
                    request: int | None, group_oom: bool) -> None:
        dirs = self.layout.dirs(relative)
        if self.layout.version == 2:
            base = dirs["unified"]
            if memory is not None:
                _write(base / "memory.max", str(memory))
                if (base / "memory.swap.max").exists():
                    _write(base / "memory.swap.max", "0")
            if group_oom and (base / "memory.oom.group").exists():
                # Kubernetes ≥ 1.32 on v2: the whole container dies when one process is
                # chosen (singleProcessOOMKill false)
                _write(base / "memory.oom.group", "1")
            if cpu is not None:
                _write(base / "cpu.max", f"{cpu_quota(cpu)} {CFS_PERIOD_US}")
        else:
            if memory is not None:
                _write(dirs["memory"] / "memory.limit_in_bytes", str(memory))
                swap = dirs["memory"] / "memory.memsw.limit_in_bytes"
                if swap.exists():
                    with contextlib.suppress(OSError):
                        _write(swap, str(memory))
            if cpu is not None:
                _write(dirs["cpu"] / "cpu.cfs_period_us", str(CFS_PERIOD_US))
                _write(dirs["cpu"] / "cpu.cfs_quota_us", str(cpu_quota(cpu)))
        if request is not None:
            self._cpu_weight(relative, cpu_shares(request))

    # -- pods and containers ---------------------------------------------------------------

    def pod_relative(self, pod: Obj) -> Path:

        uid = str((pod.get("metadata") or {}).get("uid", ""))
        qos = qos_class(pod)
        if qos == "Guaranteed":
            return self.node_dir / f"pod{uid}"
        return self.node_dir / qos.lower() / f"pod{uid}"

    def _pod_candidates(self, uid: str) -> list[Path]:
        return [self.node_dir / f"pod{uid}", self.node_dir / "burstable" / f"pod{uid}",
                self.node_dir / "besteffort" / f"pod{uid}"]

    def prepare(self, pod: Obj, container: Obj) -> ContainerCgroup:
        """The cgroup of a new attempt of `container` (a fresh one: the previous attempt's
        is removed first), with the pod's cgroup and its limits. Raises OSError."""
        pod_rel = self.pod_relative(pod)
        for parent in reversed(pod_rel.parents[:-1]):  # skiff/, the node, its QoS class:
            self._make(parent)  # made again if anything removed them meanwhile
        self._make(pod_rel)
        self._set_limits(pod_rel, memory=_pod_total(pod, 0), cpu=_pod_total(pod, 1),
                         request=None, group_oom=False)
        relative = pod_rel / str(container.get("name", ""))
        for directory in self.layout.dirs(relative).values():
            remove_tree(directory, kill=False, wait=0.0)
        dirs = self._make(relative, leaf=True)
        memory, cpu, request = _limits(container)
        self._set_limits(relative, memory=memory, cpu=cpu, request=request, group_oom=True)
        cgroup = ContainerCgroup(version=self.layout.version, dirs=dirs)
        cgroup.oom_kills_before = cgroup.oom_kills() or 0
        return cgroup

    def container(self, pod: Obj, name: str) -> ContainerCgroup:
        """The (existing) cgroup of container `name` of `pod`."""
        return ContainerCgroup(version=self.layout.version,
                               dirs=self.layout.dirs(self.pod_relative(pod) / name))

    def pod_usage(self, pod: Obj) -> Usage | None:
        return _usage(self.layout.version, self.layout.dirs(self.pod_relative(pod)))

    def remove_pod(self, uid: str) -> bool:
        """Remove the pod's cgroups (killing any process left in them). True if gone."""
        gone = True
        for relative in self._pod_candidates(uid):
            for directory in self.layout.dirs(relative).values():
                gone = remove_tree(directory) and gone
        return gone

    def remove_orphans(self, keep: Iterable[str]) -> None:
        """Remove the cgroups of pods this kubelet no longer knows (left by a kubelet that
        stopped before cleaning up); `keep` are the uids of its pods."""
        wanted = {f"pod{uid}" for uid in keep}
        for relative in (self.node_dir, self.node_dir / "burstable",
                         self.node_dir / "besteffort"):
            for directory in self.layout.dirs(relative).values():
                if not directory.is_dir():
                    continue
                for child in directory.iterdir():
                    if child.is_dir() and child.name.startswith("pod") and \
                            child.name not in wanted:
                        remove_tree(child)

    def record(self, root_dir: Path) -> None:
        """Write where the node's cgroups are into the kubelet's root directory, for
        `skiff down` (which may run in other cgroups than the kubelet)."""
        record_node_dirs(root_dir, list(self.layout.dirs(self.node_dir).values()))

    def remove_node(self) -> None:
        """`skiff down` / tests: the node's whole tree, and `skiff/` once empty."""
        for directory in self.layout.dirs(self.node_dir).values():
            remove_tree(directory)
        for directory in self.layout.bases.values():
            with contextlib.suppress(OSError):
                os.rmdir(directory)


def node_cgroup_name(node_name: str, root_dir: Path) -> str:
    """`<node>-<8 hex digits of the kubelet's root directory>`: clusters sharing a host
    (tests, two `skiff up`) may name their nodes alike; their cgroups never mix."""
    digest = hashlib.sha1(str(root_dir.resolve()).encode()).hexdigest()[:8]
    return f"{node_name}-{digest}"
