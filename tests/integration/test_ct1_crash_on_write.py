"""Issue 35 item 1, crash on write, on a whole `skiff up` cluster: a program running as a
pod (the official Python client, in-cluster config, its namespace's default
ServiceAccount) creates ConfigMaps cm-1, cm-2, ... one after another; a Perturbation
`crashOnWrite` after that ServiceAccount's 3rd create has the pod's kubelet SIGKILL the
container right after cm-3 commits. The kubelet restarts it (restartCount 1, the pod's
`PerturbationCrash` Event, the Perturbation's status.crashes at cm-3's revision), the
program goes on from cm-4, and no later write crashes it again. Another identity's creates
(the admin's, before the pod starts) do not count."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from tests.integration import waiting
from tests.integration.officialclient import meta, present, python_pod
from tests.integration.skiffcli import skiff_up

pytestmark = pytest.mark.integration

CONFIG = """kubelet:
  nodeStatusUpdateFrequency: 1s
  containerRestartBackoffBase: 0.5s
  containerRestartBackoffMax: 1s
"""
LAST = 6

# Creates cm-<n> for the first n not yet there, up to LAST, then idles: restarted, it goes
# on where it was cut off.
WRITER = f"""
import os, sys, time
from kubernetes import client, config
config.load_incluster_config()
core, ns = client.CoreV1Api(), os.environ["NS"]
have = {{c.metadata.name for c in core.list_namespaced_config_map(ns).items}}
n = 1
while n <= {LAST}:
    if "cm-%d" % n not in have:
        core.create_namespaced_config_map(ns, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="cm-%d" % n)))
        print("created cm-%d" % n, flush=True)
        time.sleep(0.3)
    n += 1
print("done", flush=True)
time.sleep(3600)
"""

ROLE = [client.V1PolicyRule(api_groups=[""], resources=["configmaps"],
                            verbs=["get", "list", "create"])]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with skiff_up(tmp_path_factory.mktemp("crash"), config=CONFIG) as data_dir:
        yield data_dir


def until(predicate: Any, what: str, timeout: float = 30.0) -> Any:
    return waiting.until(predicate, what, timeout, interval=0.2)


def test_ct1_crash_on_write_kills_the_pod_after_its_third_create_and_it_goes_on(
        data_dir: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    user = f"system:serviceaccount:{ns}:default"
    with config.new_client_from_config(config_file=str(data_dir / "kubeconfig")) as api:
        core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
        custom = client.CustomObjectsApi(api)
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
        rbac.create_namespaced_role(ns, client.V1Role(
            metadata=client.V1ObjectMeta(name="writer"), rules=ROLE))
        rbac.create_namespaced_role_binding(ns, client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="writer"),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role",
                                      name="writer"),
            subjects=[client.RbacV1Subject(kind="ServiceAccount", name="default",
                                           namespace=ns)]))
        custom.create_cluster_custom_object("skiff.io", "v1", "perturbations", {
            "apiVersion": "skiff.io/v1", "kind": "Perturbation",
            "metadata": {"name": f"crash-{ns}"},
            "spec": {"subject": {"user": user}, "crashOnWrite": {
                "after": 3, "resources": ["configmaps"], "verbs": ["create"],
                "target": {"pod": {"namespace": ns, "name": "writer"}}}}})
        for i in range(1, 4):  # another identity's creates: not counted
            core.create_namespaced_config_map(ns, client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name=f"admin-{i}")))
        pod = python_pod("writer", WRITER, restart="Always")
        container = present(pod.spec).containers[0]
        container.env = [*(container.env or []), client.V1EnvVar(name="NS", value=ns)]
        core.create_namespaced_pod(ns, pod)

        def names() -> set[str]:
            return {str(meta(c).name) for c in core.list_namespaced_config_map(ns).items}
        until(lambda: {f"cm-{i}" for i in range(1, LAST + 1)} <= names(),
              "the restarted writer to create every ConfigMap")

        def restarts() -> int:
            statuses = present(core.read_namespaced_pod("writer", ns).status)
            return int((statuses.container_statuses or [client.V1ContainerStatus(
                name="main", image="", image_id="", ready=False, restart_count=0)])[0]
                .restart_count)
        until(lambda: restarts() >= 1, "the kubelet to restart the killed container")
        crashed = custom.get_cluster_custom_object("skiff.io", "v1", "perturbations",
                                                   f"crash-{ns}")
        assert isinstance(crashed, dict)
        (crash,) = crashed["status"]["crashes"]
        cm3 = core.read_namespaced_config_map("cm-3", ns)
        assert crash["killed"] is True, crash
        assert crash["revision"] == int(str(meta(cm3).resource_version))
        events = core.list_namespaced_event(
            ns, field_selector="involvedObject.name=writer").items
        (event,) = [e for e in events if e.reason == "PerturbationCrash"]
        assert "killed container main" in str(event.message)
        last = present(core.read_namespaced_pod("writer", ns).status).container_statuses
        assert last is not None
        terminated = present(last[0].last_state).terminated
        assert terminated is not None and terminated.exit_code == 137
        # the restarted one went on ("done" follows cm-6 by the writer's 0.3 s pause)
        logs = until(lambda: "done" in (text := str(core.read_namespaced_pod_log(
            "writer", ns))) and text, "the restarted writer to finish")
        assert "created cm-4" in logs
        assert restarts() == 1  # once: cm-4..cm-6 did not crash it again
