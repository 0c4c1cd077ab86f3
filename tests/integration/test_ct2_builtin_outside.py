"""CT2 (issue 35): one of Skiff's own built-in controllers — the ReplicaSet controller — run
outside the controller-manager as a controller under test, the way `skiff explore` runs one.

A real `skiff up --detach --nodes 0` with examples/explore/replicaset/cluster.yaml (the
cluster's controller-manager runs every controller but `replicaset`); the command in
examples/explore/replicaset/controller.txt (`python -m skiff.controller_manager
--controllers replicaset --leader-elect false --kubeconfig {kubeconfig}`), `{kubeconfig}`
filled and `python` this interpreter, started as a subprocess with the environment `skiff
explore` gives it: KUBECONFIG (a client certificate of `skiff-explore:controller`,
system:masters) and SKIFF_DATA_DIR (where it finds the apiserver's gRPC address, as the
skiff CLI does), no SKIFF_CA_FILE / SKIFF_CLIENT_*. The workload's steps run by hand with
the official Python client as the admin.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest
import yaml
from kubernetes import client, config

from skiff.pki import issue_client
from tests.integration.skiffcli import skiff_up

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "explore" / "replicaset"
USER = "skiff-explore:controller"
COMMAND = (EXAMPLE / "controller.txt").read_text().strip()
T = TypeVar("T")


def until(predicate: Callable[[], T | None], what: str, timeout: float = 20.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


class Cluster:
    """The running cluster: its data dir, the admin's API, the controller's kubeconfig."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.admin = config.new_client_from_config(config_file=str(data_dir / "kubeconfig"))
        self.core = client.CoreV1Api(self.admin)
        self.apps = client.AppsV1Api(self.admin)
        self.custom = client.CustomObjectsApi(self.admin)
        self.kubeconfig = self._controller_kubeconfig()

    def _controller_kubeconfig(self) -> Path:
        """The admin kubeconfig's cluster, the user a client certificate of USER."""
        pki = self.data_dir / "pki"
        pair = issue_client(pki, "explore-controller", user=USER, groups=["system:masters"])
        admin = yaml.safe_load((self.data_dir / "kubeconfig").read_text())
        server = admin["clusters"][0]["cluster"]["server"]
        path = self.data_dir / "controller.kubeconfig"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "controller",
            "clusters": [{"name": "skiff", "cluster": {
                "server": server, "certificate-authority": str(pki / "ca.crt")}}],
            "users": [{"name": USER, "user": {"client-certificate": str(pair.cert),
                                              "client-key": str(pair.key)}}],
            "contexts": [{"name": "controller",
                          "context": {"cluster": "skiff", "user": USER}}]}))
        return path

    def start_controller(self, log: Path) -> subprocess.Popen[bytes]:
        """The command line as `skiff explore --controller` gets it, with only KUBECONFIG
        (no SKIFF_CA_FILE / SKIFF_CLIENT_*) to authenticate by and SKIFF_DATA_DIR to find
        the apiserver by."""
        argv = [a.replace("{kubeconfig}", str(self.kubeconfig)) for a in shlex.split(COMMAND)]
        assert argv[0] == "python"
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SKIFF_CLIENT_", "SKIFF_CA_FILE", "SKIFF_TOKEN"))}
        env.update(KUBECONFIG=str(self.kubeconfig), SKIFF_DATA_DIR=str(self.data_dir),
                   SKIFF_SERVER="")
        with open(log, "ab") as out:
            return subprocess.Popen([sys.executable, *argv[1:]], stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env)

    def namespace(self, name: str) -> str:
        self.core.create_namespace(client.V1Namespace(
            metadata=client.V1ObjectMeta(name=name)))
        return name

    def pods(self, namespace: str, selector: str) -> list[Any]:
        return list(self.core.list_namespaced_pod(namespace, label_selector=selector).items)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    data_dir = tmp_path_factory.mktemp("ct2-builtin")
    with skiff_up(data_dir, nodes=0, config=(EXAMPLE / "cluster.yaml").read_text()):
        yield Cluster(data_dir)


@pytest.fixture
def controller(cluster: Cluster, tmp_path: Path) -> Iterator[Callable[[],
                                                                      subprocess.Popen[bytes]]]:
    """Start the outside controller (again); every process started is killed after."""
    procs: list[subprocess.Popen[bytes]] = []
    log = tmp_path / "controller.log"

    def start() -> subprocess.Popen[bytes]:
        procs.append(cluster.start_controller(log))
        return procs[-1]
    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    print(log.read_text(errors="replace")[-4000:] if log.exists() else "")


def counted(cluster: Cluster, namespace: str, wait: dict[str, Any]
            ) -> Callable[[], list[Any] | None]:
    """A wait step's test: the matching pods once there are exactly `count` of them."""
    def pods() -> list[Any] | None:
        got = cluster.pods(namespace, wait["selector"])
        return got if len(got) == wait["count"] else None
    return pods


def run_steps(cluster: Cluster, namespace: str, steps: list[dict[str, Any]],
              check: Callable[[list[Any]], None]) -> None:
    """The workload's steps (create, patch, wait) with the official client; `check` sees
    the pods each wait ended on."""
    for step in steps:
        (kind, body), = step.items()
        if kind == "create":
            cluster.apps.create_namespaced_replica_set(namespace, body)
        elif kind == "patch":
            assert body["resource"] == "replicasets.apps"
            cluster.apps.patch_namespaced_replica_set(body["name"], namespace, body["patch"])
        else:
            assert kind == "wait", step
            check(until(counted(cluster, namespace, body),
                        f"{body['count']} pods matching {body['selector']}", body["timeout"]))


def rs_of(cluster: Cluster, namespace: str) -> Any:
    return cluster.apps.read_namespaced_replica_set("web", namespace)


def test_ct2_builtin_replicaset_controller_outside_runs_the_workload(
        cluster: Cluster, controller: Callable[[], subprocess.Popen[bytes]]) -> None:
    """The workload's pods are made and removed by the outside controller (its Events name
    its process), and the cluster's own controller-manager does nothing for ReplicaSets."""
    workload = yaml.safe_load((EXAMPLE / "workload.yaml").read_text())
    namespace = cluster.namespace(workload["namespace"])
    proc = controller()

    def owned_by_web(pods: list[Any]) -> None:
        uid = rs_of(cluster, namespace).metadata.uid
        for pod in pods:
            refs = [(r.kind, r.name, r.uid, r.controller)
                    for r in pod.metadata.owner_references or []]
            assert refs == [("ReplicaSet", "web", uid, True)], pod.metadata.name
            assert pod.spec.node_name is None and pod.status.phase == "Pending"

    run_steps(cluster, namespace, workload["steps"], owned_by_web)

    def status() -> tuple[Any, Any]:
        rs = rs_of(cluster, namespace)
        return rs.status.replicas, rs.status.observed_generation
    # the status follows the pods (a conflicting status write is retried with backoff)
    until(lambda: status() == (1, 3), "status.replicas 1 at observedGeneration 3", 15)
    # Each create and delete was recorded by the ReplicaSet controller of *that* process.
    events = cluster.core.list_namespaced_event(namespace).items
    mine: list[Any] = [e for e in events if e.involved_object.kind == "ReplicaSet"]
    assert sorted(e.reason for e in mine) == ["SuccessfulCreate"] * 3 \
        + ["SuccessfulDelete"] * 2, [(e.reason, e.message) for e in mine]
    instance = f"{socket.gethostname()}_{proc.pid}"
    assert {(e.source.component, e.reporting_instance) for e in mine} == {
        ("replicaset-controller", instance)}

    # With the outside controller stopped nothing scales the set: the cluster's own
    # controller-manager runs no ReplicaSet controller (it would act within ~0.1 s).
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    cluster.apps.patch_namespaced_replica_set("web", namespace, {"spec": {"replicas": 3}})
    time.sleep(3)
    assert len(cluster.pods(namespace, "app=web")) == 1
    # Started again, it catches up.
    controller()
    until(lambda: len(cluster.pods(namespace, "app=web")) == 3, "3 pods after the restart")


def test_ct2_builtin_replicaset_controller_outside_is_seen_as_its_identity(
        cluster: Cluster, controller: Callable[[], subprocess.Popen[bytes]]) -> None:
    """The apiserver attributes the outside controller's writes to skiff-explore:controller:
    a crash on write for that user (every create) SIGKILLs it right after its first pod
    create — not after the admin's ReplicaSet create — and restarted it converges."""
    namespace = cluster.namespace("explore-identity")
    proc = controller()
    name = f"ct2-builtin-{proc.pid}"
    cluster.custom.create_cluster_custom_object("skiff.io", "v1", "perturbations", {
        "apiVersion": "skiff.io/v1", "kind": "Perturbation", "metadata": {"name": name},
        "spec": {"subject": {"user": USER}, "crashOnWrite": {
            "after": 1, "verbs": ["create"], "target": {"pid": proc.pid}}}})
    try:
        time.sleep(1)  # the apiserver applies stored Perturbations from its watch
        workload = yaml.safe_load((EXAMPLE / "workload.yaml").read_text())
        cluster.apps.create_namespaced_replica_set(namespace, workload["steps"][0]["create"])
        assert until(lambda: proc.poll() is not None, "the controller to be killed",
                     timeout=15)
        assert proc.returncode == -signal.SIGKILL
        def crashes_recorded() -> list[dict[str, Any]]:
            got = cast(dict[str, Any], cluster.custom.get_cluster_custom_object(
                "skiff.io", "v1", "perturbations", name))
            return list(got.get("status", {}).get("crashes") or [])
        crashes = until(crashes_recorded, "the crash in the Perturbation's status")
        assert len(crashes) == 1 and crashes[0]["killed"] is True
        assert f"after {USER}'s write #1" in crashes[0]["message"]
        created = cluster.pods(namespace, "app=web")
        assert 1 <= len(created) <= 2  # killed after its first create (a second in flight)
    finally:
        cluster.custom.delete_cluster_custom_object("skiff.io", "v1", "perturbations", name)
    controller()  # as a supervisor restarts it (the crash fires once)
    until(lambda: len(cluster.pods(namespace, "app=web")) == 2, "2 pods after the restart")
    time.sleep(1)
    assert len(cluster.pods(namespace, "app=web")) == 2


def test_ct2_builtin_controller_kubeconfig_that_is_missing_is_named() -> None:
    """--kubeconfig names a file that is not there: the controller-manager says so and
    exits, rather than falling back to other credentials."""
    done = subprocess.run([sys.executable, "-m", "skiff.controller_manager",
                           "--controllers", "replicaset", "--kubeconfig", "/nonexistent/kc"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "skiff-controller-manager: --kubeconfig: /nonexistent/kc: no such file" \
        in done.stderr
