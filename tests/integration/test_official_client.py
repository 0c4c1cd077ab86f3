"""The official Kubernetes Python client (`kubernetes` on PyPI) drives a
pod's whole life against the kubeconfig `skiff up` writes, with a real kubelet running the
pod as a process: list nodes, create, watch from the list's resourceVersion, read the log,
patch, 409 on a stale replace, 422 on an invalid name, graceful delete."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kubernetes import client, config, watch
from kubernetes.client import ApiException

from tests.integration.officialclient import labels_of, meta, name_of, present
from tests.integration.skiffcli import skiff_up
from tests.integration.waiting import until

CONFIG = """kubelet:
  nodeStatusUpdateFrequency: 1s
"""
NAMESPACE = "default"


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory) -> Iterator[client.CoreV1Api]:
    with skiff_up(tmp_path_factory.mktemp("official-client"), config=CONFIG) as data_dir, \
            config.new_client_from_config(
                config_file=str(data_dir / "kubeconfig")) as api_client:
        yield client.CoreV1Api(api_client)


def pod_manifest(name: str, command: list[str]) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"app": "official"}),
        spec=client.V1PodSpec(
            termination_grace_period_seconds=30,
            containers=[client.V1Container(name="main", image="busybox", command=command)]))


def test_defect3_list_node_deserializes_node_info_with_true_values(
        core: client.CoreV1Api) -> None:
    nodes = core.list_node()
    # node-1's kubelet, and the control plane's Node (cli/controlplane: kind's control-plane Node)
    assert [name_of(n) for n in nodes.items] == ["node-1", "skiff-control-plane"]
    info = present(present(nodes.items[0].status).node_info)
    assert info.boot_id == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert info.machine_id == Path("/etc/machine-id").read_text().strip()
    assert info.kernel_version == os.uname().release
    assert info.operating_system == "linux"
    assert info.architecture and info.system_uuid and info.os_image
    assert present(info.container_runtime_version).startswith("skiff://")
    assert info.kubelet_version and info.kube_proxy_version == info.kubelet_version


def test_defect3_a_pods_whole_life_through_the_official_client(
        core: client.CoreV1Api) -> None:
    listed = core.list_namespaced_pod(NAMESPACE, label_selector="app=official")
    events: list[tuple[str, str, str]] = []
    stream = watch.Watch()

    failures: list[BaseException] = []

    def watch_pods() -> None:
        try:
            watch_events()
        except BaseException as err:  # reported by the test, not lost in the thread
            failures.append(err)

    def watch_events() -> None:
        for ev in stream.stream(core.list_namespaced_pod, NAMESPACE,
                                label_selector="app=official",
                                resource_version=present(listed.metadata).resource_version,
                                timeout_seconds=120):
            pod = ev["object"]
            events.append((ev["type"], pod.metadata.name, pod.status.phase or ""))
            if (ev["type"], pod.metadata.name) == ("DELETED", "life"):
                return  # the generator's close ends the request

    watcher = threading.Thread(target=watch_pods, daemon=True)
    watcher.start()
    try:
        # The container takes 5 s to stop after SIGTERM, so the read right after the delete
        # finds it Terminating (a shell that dies at once was sometimes gone already on a
        # loaded machine, run s7c).
        created = core.create_namespaced_pod(NAMESPACE, pod_manifest(
            "life", ["sh", "-c", "trap 'sleep 5; exit 0' TERM; "
                     "echo hello from the official client; sleep 3600 & wait"]))
        assert meta(created).resource_version
        until(lambda: ("ADDED", "life", "Pending") in events or
              any(e[:2] == ("ADDED", "life") for e in events), "ADDED")
        until(lambda: present(core.read_namespaced_pod("life", NAMESPACE).status).phase
              == "Running", "the pod Running")
        until(lambda: any(e[0] == "MODIFIED" and e[1] == "life" for e in events),
              "MODIFIED")

        log = until(lambda: core.read_namespaced_pod_log("life", NAMESPACE),
                    "the container's log")
        assert log == "hello from the official client\n"

        patched = core.patch_namespaced_pod("life", NAMESPACE,
                                            {"metadata": {"labels": {"tier": "front"}}})
        assert labels_of(patched) == {"app": "official", "tier": "front"}

        stale = created  # resourceVersion from before the patch
        meta(stale).labels = {"app": "official", "tier": "back"}
        with pytest.raises(ApiException) as conflict:
            core.replace_namespaced_pod("life", NAMESPACE, stale)
        assert conflict.value.status == 409

        with pytest.raises(ApiException) as invalid:
            core.create_namespaced_pod(NAMESPACE, pod_manifest("Bad_Name", ["true"]))
        assert invalid.value.status == 422

        asked = time.monotonic()
        deleted = core.delete_namespaced_pod("life", NAMESPACE)
        assert meta(deleted).deletion_timestamp is not None
        terminating = core.read_namespaced_pod("life", NAMESPACE)
        assert meta(terminating).deletion_timestamp is not None

        def gone() -> bool:
            try:
                core.read_namespaced_pod("life", NAMESPACE)
            except ApiException as err:
                return bool(err.status == 404)
            return False

        until(gone, "the pod gone after its graceful delete")
        # Gone once the container exited: its SIGTERM trap's 5 s, not the 30 s grace.
        assert 4.5 <= time.monotonic() - asked < 30, time.monotonic() - asked
        until(lambda: any(e[:2] == ("DELETED", "life") for e in events), "DELETED")
        watcher.join(30)
        assert not watcher.is_alive()
        assert failures == [], events
    finally:
        if watcher.is_alive():  # a failure above: unblock it (the client shuts the socket)
            stream.stop()
            watcher.join(30)


def test_ax6_events_v1_api_reads_and_writes_the_core_events(core: client.CoreV1Api) -> None:
    """events.k8s.io/v1 (the official client's EventsV1Api): the same Events as core v1
    under the newer names, its create rules, and field selectors in its own labels."""
    events = client.EventsV1Api(core.api_client)
    body = client.EventsV1Event(
        metadata=client.V1ObjectMeta(name="ev1-demo", namespace=NAMESPACE),
        event_time=datetime(2026, 1, 1, tzinfo=UTC),
        reporting_controller="example.com/demo", reporting_instance="demo-1",
        action="Demonstrate", reason="Demo", type="Normal", note="written through v1",
        regarding=client.V1ObjectReference(kind="Pod", name="somepod",
                                           namespace=NAMESPACE))
    created = events.create_namespaced_event(NAMESPACE, body)
    assert created.note == "written through v1" and present(created.regarding).name == "somepod"
    stored = core.read_namespaced_event("ev1-demo", NAMESPACE)
    assert (stored.message, stored.involved_object.name, stored.reporting_component) == (
        "written through v1", "somepod", "example.com/demo")
    listed = events.list_namespaced_event(
        NAMESPACE, field_selector="regarding.name=somepod,reportingController=example.com/demo")
    assert [name_of(e) for e in listed.items] == ["ev1-demo"]
    assert listed.items[0].deprecated_count is None
    bad = client.EventsV1Event(metadata=client.V1ObjectMeta(name="ev1-bad"), type="Odd",
                               event_time=datetime(2026, 1, 1, tzinfo=UTC), deprecated_count=3)
    with pytest.raises(ApiException) as refused:  # the client itself insists on eventTime
        events.create_namespaced_event(NAMESPACE, bad)
    assert refused.value.status == 422
    for message in ("type: Invalid value", "deprecatedCount: Invalid value",
                    "reportingController: Required value", "action: Required value"):
        assert message in present(refused.value.body), refused.value.body
