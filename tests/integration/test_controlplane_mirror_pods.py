"""The control plane in `kube-system`, as kind and kubeadm show it.

A real `skiff up --detach` and the real kubectl: a control-plane Node with kubeadm's role
label and NoSchedule taint, one mirror pod per component with the kubelet's annotations
and kubeadm's labels, its phase and restarts from the supervisor, `kubectl logs` of the
component's log file, and a deleted mirror pod that comes back while the component runs on.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from skiff.cluster.state import ClusterState, pid_alive, same_process
from tests.integration.skiffcli import skiff

pytestmark = pytest.mark.integration

NODE = "skiff-control-plane"
COMPONENTS = {"etcd": "etcd", "apiserver": "kube-apiserver", "scheduler": "kube-scheduler",
              "controller-manager": "kube-controller-manager"}
# Node lifecycle compressed (grace 4 s) with the agent's Lease renewed every second: the
# control-plane Node must stay Ready and its pods must stay, as with a real kubelet.
CONFIG = """\
controllerManager: {nodeMonitorGracePeriod: 4s, podGcQuarantineTime: 1s}
controlPlane: {nodeLeaseDurationSeconds: 4, nodeStatusUpdateFrequency: 1, syncPeriod: 0.5}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    assert shutil.which("kubectl"), "kubectl is not installed (Debian's kubernetes-client)"
    data_dir = tmp_path_factory.mktemp("mirror")
    (data_dir / "config.yaml").write_text(CONFIG)
    up = skiff(data_dir, "up", "--detach", "--nodes", "0", "--restart-backoff", "0.5",
               "--config", str(data_dir / "config.yaml"))
    assert up.returncode == 0, up.stderr + up.stdout
    try:
        yield data_dir
    finally:
        state = ClusterState.load(data_dir)
        skiff(data_dir, "down")
        # `skiff down` leaves nothing running, the control-plane agent included.
        left = [c.name for c in (state.components if state else []) if same_process(c)]
        assert not left, f"still running after skiff down: {left}"
        assert state is None or not pid_alive(state.supervisor_pid)


def kubectl(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", str(data_dir / "kubeconfig"), *args],
                          capture_output=True, text=True, timeout=60)


def get_json(data_dir: Path, *args: str) -> Any:
    out = kubectl(data_dir, "get", *args, "-o", "json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def eventually(check: Callable[[], Any], *, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
            if result:
                return result
        except (AssertionError, subprocess.SubprocessError, ValueError):
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {check}")
        time.sleep(0.3)


def pods_by_name(data_dir: Path) -> dict[str, Any]:
    return {p["metadata"]["name"]: p
            for p in get_json(data_dir, "pods", "-n", "kube-system")["items"]}


def component(data_dir: Path, name: str) -> Any:
    state = ClusterState.load(data_dir)
    assert state is not None
    return next(c for c in state.components if c.name == name)


def running_pod(data_dir: Path, name: str) -> Any:
    pod = pods_by_name(data_dir).get(name)
    return pod if pod and pod["status"].get("phase") == "Running" and \
        pod["status"]["containerStatuses"][0]["ready"] else None


def test_defect10_kubectl_get_pods_in_kube_system_shows_the_control_plane(
        cluster: Path) -> None:
    names = {f"{kubeadm}-{NODE}" for kubeadm in COMPONENTS.values()}
    pods = eventually(lambda: (p := pods_by_name(cluster)) and names <= set(p) and
                      all(p[n]["status"].get("phase") == "Running" for n in names) and p)
    node = get_json(cluster, "node", NODE)
    assert node["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] == ""
    assert {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"} in \
        node["spec"]["taints"]
    for skiff_name, kubeadm in COMPONENTS.items():
        pod = pods[f"{kubeadm}-{NODE}"]
        meta, spec, status = pod["metadata"], pod["spec"], pod["status"]
        assert meta["labels"] == {"component": kubeadm, "tier": "control-plane"}
        annotations = meta["annotations"]
        assert annotations["kubernetes.io/config.source"] == "file"
        assert annotations["kubernetes.io/config.mirror"] == \
            annotations["kubernetes.io/config.hash"] != ""
        assert meta["ownerReferences"] == [{
            "apiVersion": "v1", "kind": "Node", "name": NODE,
            "uid": node["metadata"]["uid"], "controller": True}]
        assert spec["nodeName"] == NODE
        assert spec["containers"][0]["command"] == component(cluster, skiff_name).argv
        container = status["containerStatuses"][0]
        assert container["ready"] is True and "running" in container["state"]
        # the supervisor's count (another test may have restarted a component)
        assert container["restartCount"] == component(cluster, skiff_name).restarts
    table = kubectl(cluster, "get", "pods", "-n", "kube-system", "-o", "wide")
    assert table.returncode == 0, table.stderr
    rows = {line.split()[0]: line.split() for line in table.stdout.splitlines()[1:]}
    assert rows[f"kube-apiserver-{NODE}"][1:3] == ["1/1", "Running"]
    assert rows[f"kube-apiserver-{NODE}"][6] == NODE
    nodes = kubectl(cluster, "get", "nodes")
    assert nodes.stdout.splitlines()[1].split()[:3] == [NODE, "Ready", "control-plane"]


def test_defect10_the_scheduler_never_places_a_user_pod_on_the_control_plane(
        cluster: Path) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "wants-cp"},
           "spec": {"nodeSelector": {"kubernetes.io/hostname": NODE},
                    "containers": [{"name": "c", "image": "busybox"}]}}
    created = subprocess.run(
        ["kubectl", "--kubeconfig", str(cluster / "kubeconfig"), "apply", "-f", "-"],
        input=json.dumps(pod), capture_output=True, text=True, timeout=60)
    assert created.returncode == 0, created.stderr

    def unschedulable() -> Any:
        got = get_json(cluster, "pod", "wants-cp")
        conditions = {c["type"]: c for c in got["status"].get("conditions") or []}
        scheduled = conditions.get("PodScheduled") or {}
        return scheduled.get("reason") == "Unschedulable" and scheduled

    condition = eventually(unschedulable)
    assert "node-role.kubernetes.io/control-plane" in condition["message"]
    assert not get_json(cluster, "pod", "wants-cp")["spec"].get("nodeName")
    kubectl(cluster, "delete", "pod", "wants-cp", "--wait=false")


def test_defect10_deleting_a_mirror_pod_recreates_it_and_never_stops_the_component(
        cluster: Path) -> None:
    name = f"kube-scheduler-{NODE}"
    before = eventually(lambda: running_pod(cluster, name))
    pid, restarts = component(cluster, "scheduler").pid, component(cluster, "scheduler").restarts
    # no client-side wait: what counts is that a new pod (new uid) comes back, and on a
    # loaded machine kubectl's own wait for the old uid once outlasted its timeout
    deleted = kubectl(cluster, "delete", "pod", "-n", "kube-system", name, "--wait=false")
    assert deleted.returncode == 0, deleted.stderr
    again = eventually(lambda: (p := running_pod(cluster, name)) and
                       p["metadata"]["uid"] != before["metadata"]["uid"] and p)
    assert again["metadata"]["annotations"]["kubernetes.io/config.mirror"] == \
        before["metadata"]["annotations"]["kubernetes.io/config.mirror"]
    now = component(cluster, "scheduler")
    assert now.pid == pid and same_process(now) and now.restarts == restarts
    assert again["status"]["containerStatuses"][0]["restartCount"] == restarts


def test_defect10_kubectl_logs_of_a_mirror_pod_reads_the_components_log(
        cluster: Path) -> None:
    eventually(lambda: running_pod(cluster, f"kube-apiserver-{NODE}"))
    logs = kubectl(cluster, "logs", "-n", "kube-system", f"kube-apiserver-{NODE}")
    assert logs.returncode == 0, logs.stderr
    log_file = Path(component(cluster, "apiserver").log).read_text()
    assert logs.stdout and log_file.startswith(logs.stdout[:200])
    assert '"component": "apiserver"' in logs.stdout
    tail = kubectl(cluster, "logs", "-n", "kube-system", f"etcd-{NODE}", "--tail", "1")
    assert tail.returncode == 0, tail.stderr
    assert len(tail.stdout.splitlines()) == 1
    wrong = kubectl(cluster, "logs", "-n", "kube-system", f"etcd-{NODE}", "-c", "nope")
    assert wrong.returncode != 0
    assert f"container nope is not valid for pod etcd-{NODE}" in wrong.stderr


def test_defect10_a_killed_component_is_restarted_and_its_restarts_counted(
        cluster: Path) -> None:
    name = f"kube-controller-manager-{NODE}"
    eventually(lambda: running_pod(cluster, name))
    killed = skiff(cluster, "chaos", "kill", "controller-manager")
    assert killed.returncode == 0, killed.stderr

    def restarted() -> Any:
        pod = running_pod(cluster, name)
        return pod and pod["status"]["containerStatuses"][0]["restartCount"] >= 1 and pod

    pod = eventually(restarted)
    assert pod["status"]["containerStatuses"][0]["restartCount"] == \
        component(cluster, "controller-manager").restarts
    rows = {line.split()[0]: line.split() for line in kubectl(
        cluster, "get", "pods", "-n", "kube-system").stdout.splitlines()[1:]}
    assert rows[name][3] == str(component(cluster, "controller-manager").restarts)


def test_defect10_a_stopped_component_is_failed_and_node_lifecycle_keeps_the_pods(
        cluster: Path) -> None:
    name = f"kube-scheduler-{NODE}"
    before = eventually(lambda: running_pod(cluster, name))
    uids = {n: p["metadata"]["uid"] for n, p in pods_by_name(cluster).items()}
    stopped = skiff(cluster, "chaos", "stop", "scheduler")
    assert stopped.returncode == 0, stopped.stderr
    try:
        failed = eventually(lambda: (p := pods_by_name(cluster).get(name)) and
                            p["status"]["phase"] == "Failed" and p)
        assert "terminated" in failed["status"]["containerStatuses"][0]["state"]
        assert failed["metadata"]["uid"] == before["metadata"]["uid"]
    finally:
        started = skiff(cluster, "chaos", "start", "scheduler")
        assert started.returncode == 0, started.stderr
    eventually(lambda: running_pod(cluster, name))
    # Well past the compressed node-monitor grace period and PodGC's quarantine: the
    # Node is Ready and no mirror pod was deleted behind the agent's back.
    time.sleep(5)
    node = get_json(cluster, "node", NODE)
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    assert {n: p["metadata"]["uid"] for n, p in pods_by_name(cluster).items()} == uids


def test_defect10_the_official_client_reads_the_control_plane_node_and_pods(
        cluster: Path) -> None:
    from kubernetes import client, config

    from tests.integration.officialclient import labels_of, present

    eventually(lambda: running_pod(cluster, f"etcd-{NODE}"))
    api = config.new_client_from_config(config_file=str(cluster / "kubeconfig"))
    core = client.CoreV1Api(api)
    try:
        node = core.read_node(NODE)  # every nodeInfo field the client requires
        info = present(present(node.status).node_info)
        assert info.boot_id and info.machine_id
        pods = core.list_namespaced_pod("kube-system",
                                        label_selector="tier=control-plane").items
        assert {labels_of(p)["component"] for p in pods} == set(COMPONENTS.values())
        assert all(present(present(p.status).container_statuses)[0].restart_count >= 0
                   for p in pods)
    finally:
        api.close()


def test_defect10_up_netns_shows_the_control_plane_on_the_hosts_it_runs_on(
        tmp_path: Path) -> None:
    """`skiff up --netns`: the agent has a network host of its own (the Node's address);
    each mirror pod's IP is its component's host."""
    up = skiff(tmp_path, "up", "--netns", "--detach", "--nodes", "0")
    assert up.returncode == 0, up.stderr + up.stdout
    try:
        state = ClusterState.load(tmp_path)
        assert state is not None and state.netns is not None
        hosts = state.netns["hosts"]
        name = f"kube-apiserver-{NODE}"
        pod = eventually(lambda: running_pod(tmp_path, name), timeout=30)
        assert pod["status"]["podIP"] == hosts["apiserver"]["ip"]
        assert pod["status"]["hostIP"] == hosts["control-plane"]["ip"]
        node = get_json(tmp_path, "node", NODE)
        assert {"type": "InternalIP", "address": hosts["control-plane"]["ip"]} in \
            node["status"]["addresses"]
        logs = kubectl(tmp_path, "logs", "-n", "kube-system", name, "--tail", "1")
        assert logs.returncode == 0, logs.stderr
        assert logs.stdout.strip() in Path(component(tmp_path, "apiserver").log).read_text()
    finally:
        down = skiff(tmp_path, "down")
        assert down.returncode == 0, down.stderr
    assert not [c.name for c in state.components if same_process(c)]


def test_defect10_kubectl_top_shows_the_control_plane_pods_and_node(cluster: Path) -> None:
    names = {f"{kubeadm}-{NODE}" for kubeadm in COMPONENTS.values()}

    def top_pods() -> Any:
        out = kubectl(cluster, "top", "pods", "-n", "kube-system")
        rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[1:]}
        return out.returncode == 0 and names <= set(rows) and rows

    rows = eventually(top_pods, timeout=30)
    for name in names:  # CPU in millicores, memory in Mi, as metrics-server reports
        assert rows[name][1].endswith("m") and rows[name][2].endswith("Mi")
        assert int(rows[name][2].removesuffix("Mi")) > 0
    node = kubectl(cluster, "top", "node", NODE)
    assert node.returncode == 0, node.stderr
    assert node.stdout.splitlines()[1].split()[0] == NODE


def test_defect10_a_deleted_control_plane_node_registers_again_with_its_pods(
        cluster: Path) -> None:
    name = f"etcd-{NODE}"
    eventually(lambda: running_pod(cluster, name))
    old_uid = get_json(cluster, "node", NODE)["metadata"]["uid"]
    deleted = kubectl(cluster, "delete", "node", NODE)
    assert deleted.returncode == 0, deleted.stderr

    def back() -> Any:
        node = get_json(cluster, "node", NODE)
        pod = running_pod(cluster, name)
        return node["metadata"]["uid"] != old_uid and pod and \
            pod["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"] and pod

    eventually(back, timeout=40)
    assert same_process(component(cluster, "etcd"))


def test_defect10_kubectl_logs_follow_streams_what_the_log_file_gets(cluster: Path) -> None:
    name = f"kube-scheduler-{NODE}"
    eventually(lambda: running_pod(cluster, name))
    follow = subprocess.Popen(
        ["kubectl", "--kubeconfig", str(cluster / "kubeconfig"), "logs", "-f", "-n",
         "kube-system", name, "--tail", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)  # following
        line = f'{{"msg": "written after the follow began {time.time()}"}}\n'
        with open(component(cluster, "scheduler").log, "a") as log:
            log.write(line)
        assert follow.stdout is not None
        assert follow.stdout.readline() == line
    finally:
        follow.kill()
        follow.communicate(timeout=10)
