"""`resourceFieldRef` in env and in downwardAPI / projected volumes (Kubernetes'
ExtractContainerResourceValue): requests and limits over `divisor`, rounded up; unset
limits are the node's allocatable."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from skiff.client.fake import FakeClient
from skiff.kubelet.configsources import ConfigError, resolve_env
from skiff.kubelet.poddir import PodDir, container_env, write_downward_api
from skiff.kubelet.projected import write_projected_volumes

ALLOCATABLE = {"cpu": "4", "memory": "8Gi", "ephemeral-storage": "100Gi"}
RESOURCES = {"limits": {"cpu": "500m", "memory": "64Mi", "ephemeral-storage": "1Gi"},
             "requests": {"cpu": "250m", "memory": "32Mi", "ephemeral-storage": "1G"}}


def _pod(resources: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "default", "uid": "u1",
                         "labels": {"app": "web", "tier": "x"}},
            "spec": {"containers": [{"name": "main", "resources": resources},
                                    {"name": "side", "resources": {
                                        "limits": {"memory": "1Gi"}}}]}}


def _env(resources: dict[str, Any], resource: str, divisor: str | None = None,
         container_name: str | None = None) -> str:
    ref: dict[str, Any] = {"resource": resource}
    if divisor is not None:
        ref["divisor"] = divisor
    if container_name is not None:
        ref["containerName"] = container_name
    pod = _pod(resources)
    container = {**pod["spec"]["containers"][0],
                 "env": [{"name": "OUT", "valueFrom": {"resourceFieldRef": ref}}]}
    return container_env(pod, container, node_name="n1", base={},
                         allocatable=ALLOCATABLE)["OUT"]


@pytest.mark.parametrize(("resource", "divisor", "value"), [
    pytest.param("limits.cpu", "1m", "500", id="limits-cpu-millis"),
    pytest.param("limits.cpu", None, "1", id="limits-cpu-rounded-up"),
    pytest.param("limits.cpu", "1", "1", id="limits-cpu-divisor-1"),
    pytest.param("requests.cpu", "1m", "250", id="requests-cpu"),
    pytest.param("requests.cpu", "100m", "3", id="requests-cpu-ceil"),
    pytest.param("limits.memory", None, "67108864", id="limits-memory-bytes"),
    pytest.param("limits.memory", "1Mi", "64", id="limits-memory-mi"),
    pytest.param("requests.memory", "1Mi", "32", id="requests-memory"),
    pytest.param("requests.memory", "1M", "34", id="requests-memory-ceil"),
    pytest.param("limits.ephemeral-storage", "1Mi", "1024", id="limits-ephemeral"),
    pytest.param("requests.ephemeral-storage", None, "1000000000", id="requests-ephemeral"),
])
def test_env_resource_field_ref_divides_and_rounds_up_as_kubernetes(
        resource: str, divisor: str | None, value: str) -> None:
    assert _env(RESOURCES, resource, divisor) == value


@pytest.mark.parametrize(("resource", "divisor", "value"), [
    pytest.param("limits.cpu", "1m", "4000", id="cpu"),
    pytest.param("limits.memory", "1Mi", "8192", id="memory"),
    pytest.param("limits.ephemeral-storage", "1Gi", "100", id="ephemeral-storage"),
    pytest.param("requests.cpu", "1m", "0", id="unset-request-is-zero"),
])
def test_env_resource_field_ref_unset_limit_is_node_allocatable(
        resource: str, divisor: str, value: str) -> None:
    assert _env({}, resource, divisor) == value


def test_env_resource_field_ref_container_name_picks_another_container() -> None:
    assert _env(RESOURCES, "limits.memory", "1Mi", container_name="side") == "1024"


@pytest.mark.parametrize(("ref", "message"), [
    pytest.param({"resource": "limits.gpu"}, "unsupported container resource", id="resource"),
    pytest.param({"resource": "limits.cpu", "divisor": "lots"}, "limits.cpu", id="divisor"),
    pytest.param({"resource": "limits.cpu", "containerName": "nope"},
                 "container nope not found", id="container"),
])
def test_env_bad_resource_field_ref_is_a_config_error_with_a_message(
        ref: dict[str, Any], message: str) -> None:
    pod = _pod(RESOURCES)
    container = {**pod["spec"]["containers"][0],
                 "env": [{"name": "OUT", "valueFrom": {"resourceFieldRef": ref}}]}
    with pytest.raises(ConfigError, match=message):
        asyncio.run(resolve_env(FakeClient(), pod, container))
    # and the env itself never raises: the variable is empty
    assert container_env(pod, container, node_name="n1", base={})["OUT"] == ""


def test_sb3_downward_api_volume_writes_resource_field_ref_items(tmp_path: Path) -> None:
    volume = {"name": "podinfo", "downwardAPI": {"items": [
        {"path": "cpu_limit", "resourceFieldRef": {
            "containerName": "main", "resource": "limits.cpu", "divisor": "1m"}},
        {"path": "mem_request", "resourceFieldRef": {
            "containerName": "main", "resource": "requests.memory", "divisor": "1Mi"}},
        {"path": "no_container", "resourceFieldRef": {"resource": "limits.cpu"}},
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}}
    write_downward_api(tmp_path, volume, _pod(RESOURCES), lambda path: "p")
    assert (tmp_path / "cpu_limit").read_text() == "500"
    assert (tmp_path / "mem_request").read_text() == "32"
    assert (tmp_path / "labels").read_text() == 'app="web"\ntier="x"'
    assert (tmp_path / "name").read_text() == "p"
    assert not (tmp_path / "no_container").exists()  # containerName is required here


def test_sb3_projected_downward_api_source_writes_labels_and_resource_field_refs(
        tmp_path: Path) -> None:
    pod = _pod(RESOURCES)
    pod["spec"]["volumes"] = [{"name": "all", "projected": {"sources": [
        {"downwardAPI": {"items": [
            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
            {"path": "app", "fieldRef": {"fieldPath": "metadata.labels['app']"}},
            {"path": "cpu_limit", "mode": 0o600, "resourceFieldRef": {
                "containerName": "main", "resource": "limits.cpu", "divisor": "1m"}}]}}]}}]
    asyncio.run(write_projected_volumes(pod, tmp_path, FakeClient()))
    assert (tmp_path / "all" / "labels").read_text() == 'app="web"\ntier="x"'
    assert (tmp_path / "all" / "app").read_text() == "web"
    assert (tmp_path / "all" / "cpu_limit").read_text() == "500"
    assert (tmp_path / "all" / "cpu_limit").stat().st_mode & 0o777 == 0o600


def test_sb3_downward_api_volume_is_written_for_a_pod_outside_a_sandbox(tmp_path: Path) -> None:
    pod = _pod(RESOURCES)
    pod["metadata"]["uid"] = "u1"
    pod["spec"]["volumes"] = [{"name": "podinfo", "downwardAPI": {"items": [
        {"path": "cpu_limit", "resourceFieldRef": {
            "containerName": "main", "resource": "limits.cpu", "divisor": "1m"}},
        {"path": "mem", "resourceFieldRef": {"containerName": "main",
                                             "resource": "limits.memory"}},
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}]
    pod_dir = PodDir(tmp_path, "u1")
    pod_dir.prepare(pod)
    volume = pod_dir.volume_path("podinfo")
    assert (volume / "cpu_limit").read_text() == "500"
    assert (volume / "mem").read_text() == "67108864"
    assert (volume / "labels").read_text() == 'app="web"\ntier="x"'
    assert (volume / "ns").read_text() == "default"
