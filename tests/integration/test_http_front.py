"""The Kubernetes HTTP front as kubectl and raw HTTP clients meet it, against a real
etcd + apiserver and the real `kubectl`."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from skiff.api import ApiError
from skiff.client import ApiClient
from tests.integration.cluster import Cluster
from tests.integration.kubectl import http_front, kubectl

STATEFULSET = """apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 1
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: main, image: busybox, command: [sleep, "3600"]}]
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: front}
spec:
  replicas: 1
  selector: {matchLabels: {app: front}}
  template:
    metadata: {labels: {app: front}}
    spec:
      containers: [{name: main, image: busybox, command: [sleep, "3600"]}]
"""


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, int, Path]]:
    with http_front(tmp_path_factory.mktemp("http-front")) as front:
        yield front


def exchange(port: int, data: bytes, *, responses: int = 1) -> list[tuple[int, bytes]]:
    """Send raw bytes on one connection; read `responses` HTTP responses (Content-Length
    framed) back as (status, body)."""
    out: list[tuple[int, bytes]] = []
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        buf = b""
        while len(out) < responses:
            while b"\r\n\r\n" not in buf:
                chunk = sock.recv(65536)
                if not chunk:
                    return out
                buf += chunk
            head, _, buf = buf.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split()[1])
            length = next(int(v) for k, _, v in (h.partition(":") for h in lines[1:])
                          if k.lower() == "content-length")
            while len(buf) < length:
                buf += sock.recv(65536)
            out.append((status, buf[:length]))
            buf = buf[length:]
    return out


def test_defect6_chunked_body_is_read_and_the_next_request_is_not_desynced(
        front: tuple[Cluster, int, Path]) -> None:
    _, port, _ = front
    body = json.dumps({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": "chunked"}}).encode()
    half = len(body) // 2
    chunks = b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n"
                      for p in (body[:half], body[half:])) + b"0\r\n\r\n"
    request = (b"POST /api/v1/namespaces HTTP/1.1\r\nHost: x\r\n"
               b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
               + chunks + b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
    (created, created_body), (version, version_body) = exchange(port, request, responses=2)
    assert created == 201, created_body
    assert json.loads(created_body)["metadata"]["name"] == "chunked"
    assert version == 200 and json.loads(version_body)["major"] == "1"


def test_defect6_oversized_body_is_413_request_entity_too_large(
        front: tuple[Cluster, int, Path]) -> None:
    _, port, _ = front
    body = b"{" + b" " * (4 * 1024 * 1024) + b"}"
    request = (b"POST /api/v1/namespaces HTTP/1.1\r\nHost: x\r\n"
               b"Content-Type: application/json\r\n"
               + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    [(status, raw)] = exchange(port, request)
    assert status == 413
    answer = json.loads(raw)
    assert (answer["kind"], answer["reason"], answer["code"]) == (
        "Status", "RequestEntityTooLarge", 413)


def test_defect6_garbage_on_the_port_never_crashes_the_front(
        front: tuple[Cluster, int, Path]) -> None:
    _, port, config = front
    for garbage in (b"\x00\xff\x16\x03\x01garbage\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n",
                    b"POST /api/v1/namespaces HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                    b"POST /api/v1/namespaces HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                    b"zz\r\nnope\r\n"):
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(garbage)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass
    [(status, _)] = exchange(port, b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200
    assert kubectl(config, "get", "namespaces").returncode == 0


def test_defect4_kubectl_create_namespace_pdb_priorityclass_send_protobuf(
        front: tuple[Cluster, int, Path]) -> None:
    _, _, config = front
    ns = kubectl(config, "create", "namespace", "proto-ns")
    assert ns.returncode == 0, ns.stderr
    assert ns.stdout.strip() == "namespace/proto-ns created"
    pdb = kubectl(config, "create", "pdb", "guard", "-n", "proto-ns", "--selector=app=web,tier",
                  "--min-available=2")
    assert pdb.returncode == 0, pdb.stderr
    pc = kubectl(config, "create", "priorityclass", "silver", "--value=700",
                 "--description=second tier", "--preemption-policy=Never")
    assert pc.returncode == 0, pc.stderr

    got_ns = json.loads(kubectl(config, "get", "namespace", "proto-ns", "-o", "json").stdout)
    assert got_ns["metadata"]["name"] == "proto-ns"
    got_pdb = json.loads(kubectl(config, "get", "pdb", "guard", "-n", "proto-ns",
                                 "-o", "json").stdout)
    assert got_pdb["spec"]["minAvailable"] == 2
    assert got_pdb["spec"]["selector"]["matchLabels"] == {"app": "web"}
    assert got_pdb["spec"]["selector"]["matchExpressions"] == [
        {"key": "tier", "operator": "Exists"}]
    got_pc = json.loads(kubectl(config, "get", "priorityclass", "silver", "-o", "json").stdout)
    assert (got_pc["value"], got_pc["description"], got_pc["preemptionPolicy"]) == (
        700, "second tier", "Never")
    percent = kubectl(config, "create", "pdb", "half", "-n", "proto-ns",
                      "--selector=app=web", "--max-unavailable=50%")
    assert percent.returncode == 0, percent.stderr
    got = json.loads(kubectl(config, "get", "pdb", "half", "-n", "proto-ns", "-o",
                             "json").stdout)
    assert got["spec"]["maxUnavailable"] == "50%"


def test_as8_kubectl_drain_evicts_through_pods_eviction_and_honours_a_pdb(
        front: tuple[Cluster, int, Path]) -> None:
    """kubectl drain evicts (a protobuf Eviction) only when discovery lists `pods/eviction`
    as kind Eviction in policy/v1; otherwise it deletes the pods past every budget. With no
    disruption controller here the budget's status is never observed, so it blocks a Running
    pod."""
    _, _, config = front
    node = '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-1"}}'
    pod = ('{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "victim", "labels": '
           '{"app": "victim"}}, "spec": {"nodeName": "worker-1", "containers": '
           '[{"name": "main", "image": "busybox"}]}}')
    for manifest in (node, pod):
        assert kubectl(config, "apply", "-f", "-", stdin=manifest).returncode == 0
    # a Pending pod is evicted past any budget (Kubernetes' canIgnorePDB): make it Running
    assert kubectl(config, "patch", "pod", "victim", "--subresource=status", "-p",
                   '{"status": {"phase": "Running"}}').returncode == 0
    assert kubectl(config, "create", "pdb", "keep-victim", "--selector=app=victim",
                   "--min-available=1").returncode == 0
    blocked = kubectl(config, "drain", "worker-1", "--force", "--grace-period=0",
                      "--timeout=3s")
    assert blocked.returncode != 0
    assert "evicting pod default/victim" in blocked.stdout
    assert "disruption budget" in blocked.stderr, blocked.stderr
    assert kubectl(config, "get", "pod", "victim").returncode == 0
    assert kubectl(config, "delete", "pdb", "keep-victim").returncode == 0
    drained = kubectl(config, "drain", "worker-1", "--force", "--grace-period=0",
                      "--timeout=60s")
    assert drained.returncode == 0, drained.stderr
    assert "pod/victim evicted" in drained.stdout
    assert "node/worker-1 drained" in drained.stdout
    assert kubectl(config, "get", "pod", "victim").returncode != 0


def test_as8_kubectl_discovers_each_group_and_the_kinds_of_pod_subresources(
        front: tuple[Cluster, int, Path]) -> None:
    _, _, config = front
    group = json.loads(kubectl(config, "get", "--raw", "/apis/policy").stdout)
    assert group["kind"] == "APIGroup"
    assert group["preferredVersion"] == {"groupVersion": "policy/v1", "version": "v1"}
    missing = kubectl(config, "get", "--raw", "/apis/no.such.group")
    assert missing.returncode != 0 and "NotFound" in missing.stderr
    core = json.loads(kubectl(config, "get", "--raw", "/api/v1").stdout)
    kinds = {r["name"]: (r.get("group", ""), r.get("version", ""), r["kind"], r["verbs"])
             for r in core["resources"] if r["name"].startswith("pods/")}
    assert kinds["pods/eviction"] == ("policy", "v1", "Eviction", ["create"])
    assert kinds["pods/binding"] == ("", "", "Binding", ["create"])
    assert kinds["pods/exec"] == ("", "", "PodExecOptions", ["create", "get"])
    assert kinds["pods/portforward"] == ("", "", "PodPortForwardOptions", ["create", "get"])
    assert kinds["pods/log"] == ("", "", "Pod", ["get"])


def test_defect9_kubectl_prints_an_invalid_name_like_kubernetes(
        front: tuple[Cluster, int, Path]) -> None:
    _, port, config = front
    pc = ('{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", '
          '"metadata": {"name": "Bad_Name"}, "value": 1}')
    result = kubectl(config, "create", "-f", "-", stdin=pc)
    assert result.returncode != 0
    expected = ('The PriorityClass "Bad_Name" is invalid: metadata.name: Invalid value: '
                '"Bad_Name": ')
    assert result.stderr.startswith(expected), result.stderr
    assert result.stderr.count("metadata.name") == 1

    request = (b"POST /apis/scheduling.k8s.io/v1/priorityclasses HTTP/1.1\r\nHost: x\r\n"
               b"Content-Type: application/json\r\n"
               + f"Content-Length: {len(pc)}\r\n\r\n".encode() + pc.encode())
    [(status, raw)] = exchange(port, request)
    answer = json.loads(raw)
    assert status == 422 and answer["reason"] == "Invalid"
    assert answer["message"].startswith(
        'PriorityClass.scheduling.k8s.io "Bad_Name" is invalid: metadata.name: Invalid value')
    details = answer["details"]
    assert (details["name"], details["group"], details["kind"]) == (
        "Bad_Name", "scheduling.k8s.io", "PriorityClass")
    [cause] = details["causes"]
    assert cause["reason"] == "FieldValueInvalid" and cause["field"] == "metadata.name"
    assert cause["message"].startswith('Invalid value: "Bad_Name": ')


def test_defect9_kubectl_prints_a_too_long_value_like_kubernetes(
        front: tuple[Cluster, int, Path]) -> None:
    _, _, config = front
    big = "x" * (256 * 1024 + 1)
    pc = json.dumps({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                     "metadata": {"name": "huge", "annotations": {"a": big}}, "value": 1})
    result = kubectl(config, "create", "-f", "-", stdin=pc)
    assert result.returncode != 0
    assert result.stderr.strip() == ('The PriorityClass "huge" is invalid: '
                                     'metadata.annotations: Too long: may not be more than '
                                     '262144 bytes')


def test_defect9_unknown_field_strict_create_and_patch_answer_like_kubernetes(
        front: tuple[Cluster, int, Path]) -> None:
    _, port, config = front
    pc = ('{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", '
          '"metadata": {"name": "strict"}, "value": 1, "valuex": 2}')
    created = kubectl(config, "create", "-f", "-", stdin=pc)
    assert created.returncode != 0
    assert created.stderr.strip() == (
        'Error from server (BadRequest): error when creating "STDIN": PriorityClass in version '
        '"v1" cannot be handled as a PriorityClass: strict decoding error: unknown field '
        '"valuex"')

    assert kubectl(config, "create", "priorityclass", "bronze", "--value=5").returncode == 0
    patch = b'{"valuex": 6}'
    request = (b"PATCH /apis/scheduling.k8s.io/v1/priorityclasses/bronze"
               b"?fieldValidation=Strict HTTP/1.1\r\nHost: x\r\n"
               b"Content-Type: application/merge-patch+json\r\n"
               + f"Content-Length: {len(patch)}\r\n\r\n".encode() + patch)
    [(status, raw)] = exchange(port, request)
    answer = json.loads(raw)
    assert (status, answer["reason"]) == (422, "Invalid")
    assert answer["message"].startswith(' "" is invalid: patch: Invalid value: "{')
    assert answer["message"].endswith('": strict decoding error: unknown field "valuex"')
    [cause] = answer["details"]["causes"]
    assert (cause["field"], cause["reason"]) == ("patch", "FieldValueInvalid")
    assert '\\"valuex\\":6' in cause["message"]
    # kubectl patch sends no fieldValidation: Kubernetes' default (Warn) applies
    warned = kubectl(config, "patch", "priorityclass", "bronze", "--type=merge",
                     "-p", '{"valuex": 6}')
    assert warned.returncode == 0, warned.stderr
    assert 'Warning: unknown field "valuex"' in warned.stderr


async def test_defect7_out_of_range_numbers_are_rejected_with_clear_messages(
        front: tuple[Cluster, int, Path]) -> None:
    cluster, port, config = front
    for grace in (1000000000000, 2**63 - 1):
        pod = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "slow"},
                          "spec": {"terminationGracePeriodSeconds": grace, "containers": [
                              {"name": "main", "image": "busybox"}]}})
        result = kubectl(config, "create", "-f", "-", stdin=pod)
        assert result.returncode != 0
        assert ('spec.terminationGracePeriodSeconds: Invalid value: '
                f'{grace}: must be less than or equal to 9223372036') in result.stderr
    assert kubectl(config, "create", "priorityclass", "keep", "--value=1").returncode == 0
    delete = (b"DELETE /apis/scheduling.k8s.io/v1/priorityclasses/keep?gracePeriodSeconds="
              + str(2**63).encode() + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    [(status, raw)] = exchange(port, delete)
    assert status == 400 and "gracePeriodSeconds" in json.loads(raw)["message"]
    watch = (b"GET /api/v1/namespaces?watch=true&resourceVersion=" + str(2**63).encode()
             + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    [(status, raw)] = exchange(port, watch)
    assert status == 400
    assert json.loads(raw)["message"].startswith(f"resourceVersion: Invalid value: {2**63}")
    async with ApiClient(cluster.api_target) as api:
        with pytest.raises(ApiError) as err:
            await api.get("priorityclasses", "keep", revision=2**63)
    assert err.value.code == 400
    assert str(err.value) == (f"revision: Invalid value: {2**63}: must be between 0 and "
                              f"{2**63 - 1}")


def test_defect10_kubectl_scale_statefulset_and_replicaset(
        front: tuple[Cluster, int, Path]) -> None:
    _, _, config = front
    applied = kubectl(config, "apply", "-f", "-", stdin=STATEFULSET)
    assert applied.returncode == 0, applied.stderr
    scaled = kubectl(config, "scale", "statefulset", "db", "--replicas=3")
    assert scaled.returncode == 0, scaled.stderr
    assert scaled.stdout.strip() == "statefulset.apps/db scaled"
    assert kubectl(config, "get", "sts", "db", "-o",
                   "jsonpath={.spec.replicas}").stdout == "3"
    scaled = kubectl(config, "scale", "replicaset", "front", "--replicas=2")
    assert scaled.returncode == 0, scaled.stderr
    assert kubectl(config, "get", "rs", "front", "-o",
                   "jsonpath={.spec.replicas}").stdout == "2"
    scale = json.loads(kubectl(config, "get", "--raw",
                               "/apis/apps/v1/namespaces/default/statefulsets/db/scale").stdout)
    assert (scale["kind"], scale["apiVersion"], scale["spec"]["replicas"],
            scale["status"]["selector"]) == ("Scale", "autoscaling/v1", 3, "app=db")


def test_defect10_rollout_restart_statefulset_changes_the_template_to_roll(
        front: tuple[Cluster, int, Path]) -> None:
    """StatefulSet updates roll (tests/integration/workloads/
    test_statefulset_update.py shows the pods restarting), so the restart is accepted."""
    _, _, config = front
    assert kubectl(config, "apply", "-f", "-", stdin=STATEFULSET).returncode == 0
    restart = kubectl(config, "rollout", "restart", "statefulset", "db")
    assert restart.returncode == 0, restart.stderr
    after = json.loads(kubectl(config, "get", "sts", "db", "-o", "json").stdout)
    assert "kubectl.kubernetes.io/restartedAt" in after["spec"]["template"]["metadata"][
        "annotations"]


def test_defect6_kubectl_watch_still_streams_events(front: tuple[Cluster, int, Path]) -> None:
    _, _, config = front
    with subprocess.Popen(["kubectl", "--kubeconfig", str(config), "get", "namespaces",
                           "-w", "--output-watch-events"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as watch:
        try:
            assert watch.stdout is not None
            header = watch.stdout.readline()
            assert header.split()[:2] == ["EVENT", "NAME"], header
            while "kube-system" not in watch.stdout.readline():
                pass  # the initial ADDED rows
            created = kubectl(config, "create", "namespace", "watched")
            assert created.returncode == 0, created.stderr
            while True:
                line = watch.stdout.readline()
                assert line, "the watch ended early"
                if "watched" in line:
                    assert line.split()[:2] == ["ADDED", "watched"]
                    break
        finally:
            watch.kill()
