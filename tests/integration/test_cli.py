"""The `skiff` command as a user runs it: real subprocesses against a real local cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from skiff.cluster.state import ClusterState, pid_alive
from tests.integration.skiffcli import skiff

POD = """apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  nodeName: node-x
  terminationGracePeriodSeconds: 30
  containers:
  - name: main
    image: busybox
    command: ["sleep", "3600"]
    madeUpField: 1
"""


@pytest.fixture(scope="module")
def cluster_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    data_dir = tmp_path_factory.mktemp("skiff-cli")
    # The module's pods are bound to node-x, which does not exist: PodGC deletes every pod
    # on it once its quarantine (40 s) has run from the first such pod it saw, which in a
    # random order can fall in the middle of a later test. PodGC is not what these test.
    config = data_dir / "config.yaml"
    config.write_text("controllerManager: {podGcQuarantineTime: 3600s}\n")
    up = skiff(data_dir, "up", "--detach", "--nodes", "0", "--config", str(config))
    assert up.returncode == 0, up.stderr
    yield data_dir
    skiff(data_dir, "down")


def test_up_prints_one_line_per_component_and_status_lists_them(cluster_dir: Path) -> None:
    status = skiff(cluster_dir, "status")
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert lines[0].split() == ["NAME", "PID", "ADDRESS", "HEALTH", "ROLE", "RESTARTS",
                                "LOG"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows["etcd"][3] == "healthy" and rows["apiserver"][3] == "healthy"


def test_apply_get_label_history_and_time_travel(cluster_dir: Path) -> None:
    applied = skiff(cluster_dir, "apply", "-f", "-", stdin=POD)
    assert applied.returncode == 0, applied.stderr
    assert "pod/web created" in applied.stdout
    assert 'Warning: unknown field "spec.containers[0].madeUpField"' in applied.stdout
    again = skiff(cluster_dir, "apply", "-f", "-", stdin=POD)
    assert "pod/web unchanged" in again.stdout

    table = skiff(cluster_dir, "get", "pods")
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "NODE"]
    # Other tests in this module (any order) may have made pods of their own.
    row = next(r for r in rows if r.split()[0] == "web")
    assert row.split()[:3] == ["web", "0/1", "Pending"]
    first_rv = json.loads(skiff(cluster_dir, "get", "pod", "web", "-o", "json").stdout)[
        "metadata"]["resourceVersion"]

    assert skiff(cluster_dir, "label", "pod", "web", "tier=front").returncode == 0
    clash = skiff(cluster_dir, "label", "pod", "web", "app=db")
    assert clash.returncode != 0
    assert "already has a value (web), and --overwrite is false" in clash.stderr
    assert skiff(cluster_dir, "label", "pod", "web", "app=db", "--overwrite").returncode == 0

    history = skiff(cluster_dir, "history", "pod", "web").stdout
    assert '+ metadata.labels.tier: "front"' in history
    assert '~ metadata.labels.app: "web" → "db"' in history
    old = skiff(cluster_dir, "get", "pod", "web", "-o", "yaml", "--at-revision", first_rv)
    assert "app: web" in old.stdout and "tier" not in old.stdout


def test_gt3_grace_period_zero_needs_force_and_warns(cluster_dir: Path) -> None:
    skiff(cluster_dir, "apply", "-f", "-", stdin=POD.replace("name: web", "name: victim"))
    refused = skiff(cluster_dir, "delete", "pod", "victim", "--grace-period=0")
    assert refused.returncode != 0
    assert "Force deleting a pod does not wait for the pod to terminate" in refused.stderr
    assert "--force" in refused.stderr
    assert skiff(cluster_dir, "get", "pod", "victim").returncode == 0

    graceful = skiff(cluster_dir, "delete", "pod", "victim")
    assert graceful.returncode == 0
    assert "Terminating" in skiff(cluster_dir, "get", "pods").stdout

    forced = skiff(cluster_dir, "delete", "pod", "victim", "--grace-period=0", "--force")
    assert forced.returncode == 0
    assert 'pod "victim" force deleted' in forced.stdout
    assert "Immediate deletion does not wait" in forced.stderr
    gone = skiff(cluster_dir, "get", "pod", "victim")
    assert gone.returncode != 0
    assert 'Error from server (NotFound): pods "victim" not found' in gone.stderr


def test_errors_are_one_line_without_a_traceback(cluster_dir: Path) -> None:
    cases = [
        skiff(cluster_dir, "get", "frobnicators"),
        skiff(cluster_dir, "apply", "-f", "-", stdin="kind: Pod\nmetadata: {name: Bad_Name}\n"),
        skiff(cluster_dir, "apply", "-f", "/no/such/file.yaml"),
        skiff(cluster_dir, "apply", "-f", "-", stdin="a: [\n"),
        skiff(cluster_dir, "get", "pods", "-l", "app in (x"),
    ]
    for result in cases:
        assert result.returncode != 0
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "metadata.name" in cases[1].stderr


def test_no_cluster_says_how_to_start_one(tmp_path: Path) -> None:
    result = skiff(tmp_path, "get", "pods")
    assert result.returncode != 0
    assert "start one with `skiff up`" in result.stderr


def test_missing_etcd_says_how_to_install_it(tmp_path: Path) -> None:
    result = skiff(tmp_path, "up", "--detach", "--nodes", "0",
                   env={"SKIFF_ETCD_BINARY": str(tmp_path / "no-etcd-here")})
    assert result.returncode != 0
    assert "apt-get install etcd-server" in result.stderr
    assert "Traceback" not in result.stderr


def test_down_stops_every_process_by_pid(tmp_path: Path) -> None:
    up = skiff(tmp_path, "up", "--detach", "--nodes", "0")
    assert up.returncode == 0, up.stderr
    state = ClusterState.load(tmp_path)
    assert state is not None
    pids = [c.pid for c in state.components]
    assert all(pid_alive(p) for p in pids)
    down = skiff(tmp_path, "down")
    assert down.returncode == 0
    assert not any(pid_alive(p) for p in pids)
    assert ClusterState.load(tmp_path) is None


# -- CLI consistency: --data-dir anywhere, a subcommand's own usage on its errors ---------


def test_defect11_data_dir_works_after_every_subcommand(cluster_dir: Path,
                                                        tmp_path: Path) -> None:
    away = {"SKIFF_DATA_DIR": str(tmp_path / "no-cluster-here")}
    at = ("--data-dir", str(cluster_dir))
    pod = POD.replace("name: web", "name: datadir").replace("    madeUpField: 1\n", "")
    runs = [
        skiff(cluster_dir, "apply", "-f", "-", *at, stdin=pod, env=away),
        skiff(cluster_dir, "get", "pods", *at, env=away),
        skiff(cluster_dir, "describe", "pod", "datadir", *at, env=away),
        skiff(cluster_dir, "label", "pod", "datadir", "x=y", *at, env=away),
        skiff(cluster_dir, "history", "pod", "datadir", *at, env=away),
        skiff(cluster_dir, "delete", "pod", "datadir", "--grace-period=0", "--force", *at,
              env=away),
        skiff(cluster_dir, "status", *at, env=away),
    ]
    for run in runs:
        assert run.returncode == 0, run.args[3:] + [run.stderr]


def test_defect11_a_subcommand_error_prints_that_subcommands_usage(tmp_path: Path) -> None:
    for args, usage in [(["get", "pods", "--bogus"], "usage: skiff get"),
                        (["apply", "-f", "x.yaml", "--nope"], "usage: skiff apply"),
                        (["delete", "pod", "x", "--frob"], "usage: skiff delete")]:
        result = skiff(tmp_path, *args)
        assert result.returncode == 2
        assert result.stderr.startswith(usage), result.stderr
        assert "unrecognized arguments" in result.stderr


def test_defect11_get_takes_comma_lists_and_short_names(cluster_dir: Path) -> None:
    objects = """apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: defect11-high}
value: 1000
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: defect11-pdb}
spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}
---
""" + POD.replace("name: web", "name: defect11-po").replace("    madeUpField: 1\n", "")
    # Its own pod, so that it does not depend on another test's `web`.
    applied = skiff(cluster_dir, "apply", "-f", "-", stdin=objects)
    assert applied.returncode == 0, applied.stderr
    both = skiff(cluster_dir, "get", "pc,pdb")
    assert both.returncode == 0, both.stderr
    tables = both.stdout.split("\n\n")
    assert len(tables) == 2, both.stdout
    assert tables[0].splitlines()[0].split()[:2] == ["NAME", "VALUE"]
    assert "priorityclass.scheduling.k8s.io/defect11-high" in tables[0]
    assert "poddisruptionbudget.policy/defect11-pdb" in tables[1]
    for short, name in [("po", "defect11-po"), ("pc", "defect11-high"),
                        ("pdb", "defect11-pdb")]:
        assert name in skiff(cluster_dir, "get", short).stdout


def test_defect11_watch_rows_are_aligned_to_the_first_batch(cluster_dir: Path) -> None:
    ns = "defect11-watch"
    first = f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n---\n" + POD.replace(
        "name: web", "name: a-pod-with-a-rather-long-name").replace("    madeUpField: 1\n", "")
    assert skiff(cluster_dir, "apply", "-f", "-", "-n", ns, stdin=first).returncode == 0
    watch = subprocess.Popen(
        [sys.executable, "-m", "skiff.cli.main", "get", "pods", "-n", ns, "-w"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "SKIFF_DATA_DIR": str(cluster_dir), "SKIFF_SERVER": ""})
    try:
        assert watch.stdout is not None
        header = watch.stdout.readline()
        assert watch.stdout.readline().startswith("a-pod-with-a-rather-long-name")
        short = POD.replace("name: web", "name: p1").replace("    madeUpField: 1\n", "")
        assert skiff(cluster_dir, "apply", "-f", "-", "-n", ns, stdin=short).returncode == 0
        row = watch.stdout.readline()
    finally:
        watch.kill()
        watch.communicate()
    assert row.startswith("p1 "), row
    assert row.index("0/1") == header.index("READY")
    assert row.index("Pending") == header.index("STATUS")


def test_defect11_apply_continues_past_a_failing_document(cluster_dir: Path) -> None:
    docs = "\n---\n".join(
        POD.replace("name: web", f"name: {name}").replace("    madeUpField: 1\n", "")
        for name in ("defect11-first", "Bad_Name", "defect11-third"))
    result = skiff(cluster_dir, "apply", "-f", "-", stdin=docs)
    assert result.returncode != 0
    assert "pod/defect11-first created" in result.stdout
    assert "pod/defect11-third created" in result.stdout
    assert "Error from server (Invalid)" in result.stderr and "Bad_Name" in result.stderr
    assert "Traceback" not in result.stderr
