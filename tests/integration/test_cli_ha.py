"""`skiff up --ha` as a user meets it: a three-member etcd cluster, two of every
control-plane service, roles and restarts in `skiff status`, `skiff chaos kill/stop/start`
and a `skiff down` that leaves nothing behind. Back-off and kubelet timings are compressed.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from skiff.cluster.state import ClusterState, pid_alive
from skiff.etcdtls import EtcdTls, TlsEtcdClient
from tests.integration.skiffcli import skiff

CONFIG = """kubelet:
  nodeStatusUpdateFrequency: 1s
"""
POD = """apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers: [{{name: main, image: busybox, command: [sleep, "3600"]}}]
"""
# A test may first bring the shared cluster up again (see `ha`), inside its own time limit.
pytestmark = pytest.mark.timeout(300)
UP = ("up", "--ha", "--detach", "--nodes", "1", "--restart-backoff", "1",
      "--restart-backoff-max", "2", "--ready-timeout", "120")


def _wait(predicate: Callable[[], object], timeout: float = 90.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what or 'condition'}"
        time.sleep(0.3)


def status(data_dir: Path) -> dict[str, dict[str, str]]:
    """`skiff status` as {NAME: {column: value}}."""
    done = skiff(data_dir, "status")
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    columns = header.split()
    return {row.split()[0]: dict(zip(columns, row.split(), strict=True)) for row in rows}


def _all_healthy(data_dir: Path) -> bool:
    return all(r["HEALTH"] == "healthy" for r in status(data_dir).values())


def _up_ha(data_dir: Path) -> Path:
    config = data_dir / "config.yaml"
    config.write_text(CONFIG)
    up = skiff(data_dir, *UP, "--config", str(config))
    assert up.returncode == 0, up.stderr + up.stdout
    return data_dir


# The tests share one HA cluster and run in any order (pytest-randomly): the members a
# chaos test restarted on purpose, and the cluster's directory, which moves to a fresh one
# when a test (`skiff down`) has taken the cluster away.
_RESTARTED: set[str] = set()


@pytest.fixture(scope="module")
def _ha_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Path]]:
    current = [_up_ha(tmp_path_factory.mktemp("skiff-ha"))]
    _RESTARTED.clear()
    yield current
    skiff(current[0], "down")


@pytest.fixture
def ha(_ha_cluster: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared HA cluster, brought up again (in a new directory) if a test ended it."""
    if ClusterState.load(_ha_cluster[0]) is None:
        _ha_cluster[0] = _up_ha(tmp_path_factory.mktemp("skiff-ha"))
        _RESTARTED.clear()
    return _ha_cluster[0]


@pytest.mark.timeout(300)
def test_issue11_up_ha_status_lists_three_etcd_members_one_leader_two_of_each(
        ha: Path) -> None:
    _wait(lambda: [r["ROLE"] for n, r in status(ha).items()
                   if n.startswith("etcd-")].count("leader") == 1, what="one etcd leader")
    rows = status(ha)
    etcd = {n: r for n, r in rows.items() if n.startswith("etcd-")}
    assert sorted(etcd) == ["etcd-1", "etcd-2", "etcd-3"]
    assert sorted(r["ROLE"] for r in etcd.values()) == ["follower", "follower", "leader"]
    for service in ("apiserver", "scheduler", "controller-manager"):
        assert {n for n in rows if n.rstrip("12") == f"{service}-"} == \
            {f"{service}-1", f"{service}-2"}
    assert "kubelet-node-1" in rows
    # Nothing restarts by itself (a chaos test that ran first restarted its member).
    assert all(r["RESTARTS"] == "0" for n, r in rows.items() if n not in _RESTARTED)
    # The controller-managers elect one leader through their Lease.
    _wait(lambda: sorted(r["ROLE"] for n, r in status(ha).items()
                         if n.startswith("controller-manager-")) == ["leader", "standby"],
          what="one controller-manager leader")


def test_issue11_etcd_member_list_shows_three_and_apiservers_use_all(ha: Path) -> None:
    state = ClusterState.load(ha)
    assert state is not None
    urls = [c.address for c in state.components if c.name.startswith("etcd-")]
    pki = ha / "pki" / "etcd"  # etcd is TLS with client certificates (SPEC AU4)

    async def names() -> list[str]:
        host, _, port = urls[0].removeprefix("https://").rpartition(":")
        tls = EtcdTls(pki / "ca.crt", pki / "apiserver-etcd-client.crt",
                      pki / "apiserver-etcd-client.key")
        async with TlsEtcdClient(tls=tls, host=host, port=int(port)) as client:
            return sorted([m.name async for m in client.members()])

    assert asyncio.run(names()) == ["etcd-1", "etcd-2", "etcd-3"]
    for comp in (c for c in state.components if c.name.startswith("apiserver-")):
        listed = comp.argv[comp.argv.index("--etcd-servers") + 1].split(",")
        assert sorted(listed) == sorted(urls)


def test_issue11_pod_created_through_the_cli_runs(ha: Path) -> None:
    applied = skiff(ha, "apply", "-f", "-", stdin=POD.format(name="ha-pod"))
    assert applied.returncode == 0, applied.stderr
    _wait(lambda: "Running" in skiff(ha, "get", "pod", "ha-pod").stdout, what="pod Running")


def test_issue11_kubeconfig_has_one_context_per_apiserver(ha: Path) -> None:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is not installed: .ci/run installs Debian's kubernetes-client"
    applied = skiff(ha, "apply", "-f", "-", stdin=POD.format(name="ha-pod"))
    assert applied.returncode == 0, applied.stderr
    _wait(lambda: _all_healthy(ha), what="every member healthy")
    for context in ("skiff", "skiff-apiserver-2"):
        done = subprocess.run([kubectl, "--kubeconfig", str(ha / "kubeconfig"), "--context",
                               context, "get", "pod", "ha-pod"], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "ha-pod" in done.stdout


@pytest.mark.timeout(300)
def test_issue11_chaos_kill_apiserver_1_comes_back_and_apiserver_2_serves(ha: Path) -> None:
    _wait(lambda: _all_healthy(ha), what="every member healthy")
    before = status(ha)["apiserver-1"]
    _RESTARTED.add("apiserver-1")
    killed = skiff(ha, "chaos", "kill", "apiserver-1")
    assert killed.returncode == 0, killed.stderr
    _wait(lambda: not pid_alive(int(before["PID"])), what="apiserver-1 dead")
    # The CLI keeps working meanwhile: it moves to apiserver-2.
    listed = skiff(ha, "get", "nodes")
    assert listed.returncode == 0, listed.stderr
    assert "node-1" in listed.stdout
    restarts = str(int(before["RESTARTS"]) + 1)
    _wait(lambda: status(ha)["apiserver-1"]["HEALTH"] == "healthy" and
          status(ha)["apiserver-1"]["RESTARTS"] == restarts,
          what=f"apiserver-1 back, RESTARTS {restarts}")
    assert status(ha)["apiserver-1"]["PID"] != before["PID"]


@pytest.mark.timeout(300)
def test_issue11_chaos_stop_keeps_a_member_down_until_start(ha: Path) -> None:
    _wait(lambda: _all_healthy(ha), what="every member healthy")
    restarts = int(status(ha)["apiserver-1"]["RESTARTS"])
    _RESTARTED.add("apiserver-1")
    stopped = skiff(ha, "chaos", "stop", "apiserver-1")
    assert stopped.returncode == 0, stopped.stderr
    try:
        # Longer than the whole back-off: the supervisor leaves it down.
        time.sleep(4)
        assert status(ha)["apiserver-1"]["HEALTH"] == "stopped"
        # The cluster serves through apiserver-2 alone.
        created = skiff(ha, "apply", "-f", "-", stdin=POD.format(name="while-stopped"))
        assert created.returncode == 0, created.stderr
        _wait(lambda: "Running" in skiff(ha, "get", "pod", "while-stopped").stdout,
              what="a pod created while apiserver-1 is stopped Running")
    finally:  # the other tests share this cluster
        started = skiff(ha, "chaos", "start", "apiserver-1")
    assert started.returncode == 0, started.stderr
    _wait(lambda: status(ha)["apiserver-1"]["HEALTH"] == "healthy", what="apiserver-1 back")
    assert int(status(ha)["apiserver-1"]["RESTARTS"]) == restarts + 1


@pytest.mark.timeout(300)
def test_issue11_chaos_kill_the_etcd_leader_it_rejoins_under_one_leader(ha: Path) -> None:
    def leaders() -> list[str]:
        return [n for n, r in status(ha).items() if n.startswith("etcd-") and
                r["ROLE"] == "leader"]

    _wait(lambda: len(leaders()) == 1, what="one etcd leader")
    old = leaders()[0]
    restarts = str(int(status(ha)[old]["RESTARTS"]) + 1)
    _RESTARTED.add(old)
    killed = skiff(ha, "chaos", "kill", old)
    assert killed.returncode == 0, killed.stderr
    # Back as a follower of a leader the others elected; writes go on.
    _wait(lambda: (rows := status(ha))[old]["RESTARTS"] == restarts and
          rows[old]["HEALTH"] == "healthy" and
          sorted(r["ROLE"] for n, r in rows.items() if n.startswith("etcd-")) ==
          ["follower", "follower", "leader"], what=f"{old} back in a cluster with a leader")
    created = skiff(ha, "apply", "-f", "-", stdin=POD.format(name="after-etcd-kill"))
    assert created.returncode == 0, created.stderr


def test_issue11_chaos_names_an_unknown_member_clearly(ha: Path) -> None:
    done = skiff(ha, "chaos", "kill", "etcd-9")
    assert done.returncode != 0
    assert "no member 'etcd-9'" in done.stderr and "etcd-1" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.timeout(300)
def test_defect10_up_ha_shows_each_replica_on_its_own_control_plane_node(ha: Path) -> None:
    """Kind's HA naming, one control-plane Node per replica number,
    each serving its own components' logs (through either apiserver)."""
    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kubectl", "--kubeconfig", str(ha / "kubeconfig"), *args],
                              capture_output=True, text=True, timeout=60)

    expected = {f"etcd-skiff-control-plane{s}" for s in ("", "2", "3")} | {
        f"{c}-skiff-control-plane{s}" for c in ("kube-apiserver", "kube-scheduler",
                                                 "kube-controller-manager") for s in ("", "2")}

    def rows() -> dict[str, list[str]]:
        out = kubectl("get", "pods", "-n", "kube-system", "-o", "wide").stdout
        return {line.split()[0]: line.split() for line in out.splitlines()[1:]}

    _wait(lambda: expected <= {n for n, r in rows().items() if r[2] == "Running"},
          what="a Running mirror pod per control-plane member")
    assert rows()["etcd-skiff-control-plane3"][6] == "skiff-control-plane3"
    nodes = kubectl("get", "nodes").stdout
    for node in ("skiff-control-plane", "skiff-control-plane2", "skiff-control-plane3"):
        assert any(line.split()[:3] == [node, "Ready", "control-plane"]
                   for line in nodes.splitlines()), nodes
    logs = kubectl("--context", "skiff-apiserver-2", "logs", "-n", "kube-system",
                   "etcd-skiff-control-plane2", "--tail", "1")
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.strip() and logs.stdout.strip() in \
        (ha / "logs" / "etcd-2.log").read_text()


def test_issue11_down_stops_the_supervisor_and_leaves_no_process(ha: Path) -> None:
    _wait(lambda: _all_healthy(ha), what="every member healthy")
    state = ClusterState.load(ha)
    assert state is not None and state.supervisor_pid
    pids = [state.supervisor_pid, *(c.pid for c in state.components)]
    down = skiff(ha, "down")
    assert down.returncode == 0, down.stderr
    assert down.stdout.splitlines()[0].startswith("supervisor")
    assert [p for p in pids if pid_alive(p)] == []
    time.sleep(3)  # nothing comes back behind `skiff down`'s back
    assert not any(pid_alive(p) for p in pids)
    assert not (ha / "cluster.json").exists()


@pytest.mark.timeout(300)
def test_issue11_plain_up_restarts_a_killed_apiserver(tmp_path: Path) -> None:
    """The single-member default is supervised too: a kill -9 no longer leaves the
    apiserver `exited` for good."""
    up = skiff(tmp_path, "up", "--detach", "--nodes", "0")
    assert up.returncode == 0, up.stderr
    try:
        rows = status(tmp_path)
        assert rows["etcd"]["ROLE"] == "leader"
        killed = skiff(tmp_path, "chaos", "kill", "apiserver")
        assert killed.returncode == 0, killed.stderr
        _wait(lambda: status(tmp_path)["apiserver"]["RESTARTS"] == "1" and
              status(tmp_path)["apiserver"]["HEALTH"] == "healthy",
              what="apiserver restarted")
        assert status(tmp_path)["apiserver"]["PID"] != rows["apiserver"]["PID"]
        assert skiff(tmp_path, "get", "pods").returncode == 0
    finally:
        down = skiff(tmp_path, "down")
    assert down.returncode == 0, down.stderr


NETNS_CONFIG = """controllerManager:
  leaderElectLeaseDuration: 3s
  leaderElectRenewDeadline: 2s
  leaderElectRetryPeriod: 0.5s
"""


def _published(data_dir: Path, name: str) -> str:
    state = ClusterState.load(data_dir)
    assert state is not None
    return next(c.address for c in state.components if c.name == name)


@pytest.mark.timeout(420)
def test_issue11_chaos_partition_inside_the_control_plane_of_up_ha_netns(
        tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(NETNS_CONFIG)
    up = skiff(tmp_path, "up", "--ha", "--netns", "--detach", "--nodes", "0", "--config",
               str(config))
    assert up.returncode == 0, up.stderr + up.stdout
    try:
        # A minority etcd member loses its leader; the other two keep theirs.
        _wait(lambda: [r["ROLE"] for n, r in status(tmp_path).items()
                       if n.startswith("etcd-")].count("leader") == 1, what="an etcd leader")
        # The minority is a follower (cutting the leader would first elect another one).
        minority = next(n for n, r in sorted(status(tmp_path).items())
                        if n.startswith("etcd-") and r["ROLE"] == "follower")
        majority = [f"etcd-{i}" for i in (1, 2, 3) if f"etcd-{i}" != minority]
        cut = skiff(tmp_path, "chaos", "partition", minority)
        assert cut.returncode == 0, cut.stderr
        _wait(lambda: (rows := status(tmp_path))[minority]["ROLE"] == "no-leader" and
              sorted(rows[n]["ROLE"] for n in majority) == ["follower", "leader"],
              what=f"{minority} without a leader, the majority with one")
        assert skiff(tmp_path, "chaos", "heal", minority).returncode == 0
        _wait(lambda: status(tmp_path)[minority]["ROLE"] == "follower",
              what=f"{minority} back as a follower")

        # apiserver-1 cut from every etcd member: writes through it fail cleanly, apiserver-2
        # serves.
        cut = skiff(tmp_path, "chaos", "partition", "apiserver-1", "--from", "etcd")
        assert cut.returncode == 0, cut.stderr
        pod = POD.format(name="cut-off")
        through_1 = skiff(tmp_path, "--server", _published(tmp_path, "apiserver-1"),
                          "--request-timeout", "5", "apply", "-f", "-", stdin=pod)
        assert through_1.returncode != 0
        assert through_1.stderr.startswith("Error from server ("), through_1.stderr
        assert "Traceback" not in through_1.stderr
        through_2 = skiff(tmp_path, "--server", _published(tmp_path, "apiserver-2"),
                          "apply", "-f", "-", stdin=pod)
        assert through_2.returncode == 0, through_2.stderr
        assert skiff(tmp_path, "chaos", "heal", "apiserver-1").returncode == 0

        # The controller-manager leader cut from both apiservers: the other takes over.
        _wait(lambda: sorted(r["ROLE"] for n, r in status(tmp_path).items()
                             if n.startswith("controller-manager-")) == ["leader", "standby"],
              what="a controller-manager leader")
        leader = next(n for n, r in status(tmp_path).items()
                      if n.startswith("controller-manager-") and r["ROLE"] == "leader")
        cut = skiff(tmp_path, "chaos", "partition", leader, "--from", "apiserver")
        assert cut.returncode == 0, cut.stderr
        _wait(lambda: status(tmp_path)[leader]["ROLE"] == "standby",
              what=f"the other controller-manager taking over from {leader}")
    finally:
        down = skiff(tmp_path, "down")
    assert down.returncode == 0, down.stderr
