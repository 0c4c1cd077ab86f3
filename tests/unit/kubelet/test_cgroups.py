"""SPEC AU8, pure logic of the kubelet's cgroups: which hierarchy a node has (v1, hybrid,
v2, none) and what the kubelet writes for a pod's limits, over a fake cgroup tree."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from skiff.api.types import Obj
from skiff.kubelet.cgroups import (
    CgroupLayout,
    CgroupManager,
    ContainerCgroup,
    cpu_shares,
    cpu_weight,
    detect,
    node_cgroup_name,
)

HYBRID_MOUNTINFO = """\
30 25 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
33 30 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu
34 30 0:30 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct
35 30 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
36 30 0:32 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
37 30 0:33 / /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer
"""
HYBRID_SELF = """\
8:pids:/
6:freezer:/
4:memory:/process_api/e6b9
2:cpuacct:/
1:cpu:/
0::/
"""
LEGACY_MOUNTINFO = """\
33 30 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
35 30 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
"""
LEGACY_SELF = "4:memory:/kubelet.slice\n2:cpu,cpuacct:/kubelet.slice\n"


def test_au8_hybrid_v1_is_detected_with_the_tree_inside_the_kubelets_own_cgroup() -> None:
    layout = detect(mountinfo=HYBRID_MOUNTINFO, proc_cgroup=HYBRID_SELF)
    assert layout is not None and layout.version == 1
    assert layout.bases["memory"] == Path("/sys/fs/cgroup/memory/process_api/e6b9/skiff")
    assert layout.bases["cpu"] == Path("/sys/fs/cgroup/cpu/skiff")
    assert layout.bases["freezer"] == Path("/sys/fs/cgroup/freezer/skiff")


def test_au8_legacy_v1_with_joined_cpu_cpuacct_and_an_explicit_cgroup_root() -> None:
    layout = detect(mountinfo=LEGACY_MOUNTINFO, proc_cgroup=LEGACY_SELF, cgroup_root="/pods")
    assert layout is not None and layout.version == 1
    assert layout.bases["cpu"] == layout.bases["cpuacct"] == \
        Path("/sys/fs/cgroup/cpu,cpuacct/pods/skiff")
    assert layout.bases["memory"] == Path("/sys/fs/cgroup/memory/pods/skiff")
    assert "pids" not in layout.bases


def test_au8_unified_v2_is_detected_from_its_controllers(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    mountinfo = f"31 25 0:27 / {tmp_path} rw - cgroup2 cgroup2 rw,nsdelegate\n"
    layout = detect(mountinfo=mountinfo, proc_cgroup="0::/user.slice/session-1.scope\n")
    assert layout == CgroupLayout(version=2, bases={"unified": tmp_path / "skiff"})


def test_au8_no_usable_hierarchy_means_no_cgroups(tmp_path: Path) -> None:
    # hybrid without v1 memory, and a v2 mount without controllers (they are bound to v1)
    (tmp_path / "cgroup.controllers").write_text("")
    mountinfo = (f"31 25 0:27 / {tmp_path} rw - cgroup2 cgroup2 rw\n"
                 "33 30 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n")
    assert detect(mountinfo=mountinfo, proc_cgroup="0::/\n") is None


def test_au8_cpu_conversions_are_kubernetes() -> None:
    assert [cpu_shares(m) for m in (0, 1, 100, 1000, 2500)] == [2, 2, 102, 1024, 2560]
    assert [cpu_weight(s) for s in (2, 1024, 262144)] == [1, 39, 10000]


def _pod(uid: str, containers: list[Obj]) -> Obj:
    return {"metadata": {"uid": uid}, "spec": {"containers": containers}}


def _fake_v2(tmp_path: Path) -> CgroupManager:
    root = tmp_path / "cgroup"
    root.mkdir()
    layout = CgroupLayout(version=2, bases={"unified": root / "skiff"})
    manager = CgroupManager(layout=layout, node_name="n1", root_dir=tmp_path / "kubelet")
    manager.setup()
    return manager


def test_au8_v2_writes_limits_on_the_pod_and_container_and_enables_controllers(
        tmp_path: Path) -> None:
    manager = _fake_v2(tmp_path)
    root = tmp_path / "cgroup"
    assert (root / "cgroup.subtree_control").read_text() == "+memory +cpu +pids"
    node = str(manager.node_dir)
    assert node == node_cgroup_name("n1", tmp_path / "kubelet") and node.startswith("n1-")
    assert (root / "skiff" / node / "cgroup.subtree_control").exists()
    pod = _pod("u1", [{"name": "app", "resources": {
        "limits": {"memory": "32Mi", "cpu": "100m"}, "requests": {"cpu": "50m"}}}])
    container = root / "skiff" / node / "burstable" / "podu1" / "app"
    (container.parent).mkdir(parents=True)
    (container).mkdir()
    (container / "memory.swap.max").write_text("max\n")  # what the kernel provides
    (container / "memory.oom.group").write_text("0\n")
    cgroup = manager.prepare(pod, pod["spec"]["containers"][0])
    assert cgroup.dirs == {"unified": container}
    assert (container / "memory.max").read_text() == str(32 << 20)
    assert (container / "memory.swap.max").read_text() == "0"
    assert (container / "memory.oom.group").read_text() == "1"
    assert (container / "cpu.max").read_text() == "10000 100000"
    assert (container / "cpu.weight").read_text() == str(cpu_weight(cpu_shares(50)))
    # the pod's cgroup has the sum of its containers' limits; a leaf enables nothing
    assert (container.parent / "memory.max").read_text() == str(32 << 20)
    assert (container.parent / "cgroup.subtree_control").exists()
    assert not (container / "cgroup.subtree_control").exists()


_rmdir = os.rmdir


def _cgroupfs_rmdir(path: str | Path) -> None:
    """rmdir as on a cgroup filesystem: the interface files go with their directory (a
    child cgroup still makes it fail)."""
    for entry in Path(path).iterdir():
        if entry.is_file():
            entry.unlink()
    _rmdir(path)


def test_au8_v1_writes_each_controllers_files_and_a_guaranteed_pod_sits_under_the_node(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "rmdir", _cgroupfs_rmdir)  # the os module cgroups calls
    bases = {c: tmp_path / c / "skiff" for c in ("memory", "cpu", "cpuacct", "pids")}
    for base in bases.values():
        base.parent.mkdir()
    manager = CgroupManager(layout=CgroupLayout(version=1, bases=bases), node_name="n1",
                             root_dir=tmp_path / "kubelet")
    node = str(manager.node_dir)
    manager.setup()
    spec: Obj = {"name": "app", "resources": {"limits": {"memory": "64Mi", "cpu": "250m"}}}
    cgroup = manager.prepare(_pod("u2", [spec]), spec)
    memory = tmp_path / "memory" / "skiff" / node / "podu2" / "app"
    cpu = tmp_path / "cpu" / "skiff" / node / "podu2" / "app"
    assert cgroup.memory_dir == memory
    assert (memory / "memory.limit_in_bytes").read_text() == str(64 << 20)
    assert (cpu / "cpu.cfs_quota_us").read_text() == "25000"
    assert (cpu / "cpu.cfs_period_us").read_text() == "100000"
    assert (cpu / "cpu.shares").read_text() == "256"
    assert (tmp_path / "cpu" / "skiff" / node / "besteffort" / "cpu.shares").read_text() == "2"
    # a pod without limits on every container has none of its own
    assert not (memory.parent.parent / "podu3").exists()
    manager.remove_pod("u2")
    assert not memory.parent.exists() and not cpu.parent.exists()
    manager.remove_node()
    assert not any(base.exists() for base in bases.values())


@pytest.mark.parametrize(("version", "files", "before", "expected"), [
    (2, {"memory.events": "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n"}, 0, True),
    (2, {"memory.events": "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n"}, 1, False),
    (1, {"memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"}, 1, True),
    (1, {"memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
         "memory.failcnt": "12\n"}, 0, False),
])
def test_au8_oom_killed_only_when_the_cgroups_oom_kill_counter_rose(
        tmp_path: Path, version: int, files: dict[str, str], before: int,
        expected: bool) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    cgroup = ContainerCgroup(version=version, dirs={
        "unified" if version == 2 else "memory": tmp_path}, oom_kills_before=before)
    assert cgroup.oom_killed(exit_code=137, kubelet_killed=False) is expected


def test_au8_old_v1_kernels_without_the_counter_need_the_limit_hit_and_a_foreign_sigkill(
        tmp_path: Path) -> None:
    (tmp_path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\n")
    (tmp_path / "memory.failcnt").write_text("3\n")
    cgroup = ContainerCgroup(version=1, dirs={"memory": tmp_path})
    assert cgroup.oom_killed(exit_code=137, kubelet_killed=False)
    assert not cgroup.oom_killed(exit_code=137, kubelet_killed=True)
    assert not cgroup.oom_killed(exit_code=1, kubelet_killed=False)


def test_au8_usage_is_the_working_set_and_cpu_from_the_cgroup(tmp_path: Path) -> None:
    (tmp_path / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    (tmp_path / "memory.current").write_text(str(100 << 20))
    (tmp_path / "memory.stat").write_text(f"anon 1\ninactive_file {30 << 20}\n")
    usage = ContainerCgroup(version=2, dirs={"unified": tmp_path}).usage()
    assert usage is not None
    assert (usage.cpu_seconds, usage.working_set) == (2.5, 70 << 20)


def test_au8_an_unusable_cgroup_tree_means_today_s_behaviour_with_a_reason(
        tmp_path: Path) -> None:
    (tmp_path / "not-a-cgroup").write_text("")  # e.g. a cgroup filesystem we cannot use
    unusable = CgroupLayout(version=1, bases={"memory": tmp_path / "not-a-cgroup" / "skiff",
                                              "cpu": tmp_path / "not-a-cgroup" / "skiff"})
    manager, reason = CgroupManager.create(layout=unusable, node_name="n1",
                                           root_dir=tmp_path / "kubelet")
    assert manager is None and "cannot create skiff/n1-" in reason, reason
    assert CgroupManager.create(layout=None, node_name="n1", root_dir=tmp_path) == (
        None, "no cgroup v1 memory and cpu hierarchies or cgroup v2 controllers")
