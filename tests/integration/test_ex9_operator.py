"""The operator path end to end (issue 34 item 9) on a whole `skiff up` cluster: an operator
written with the official Python client, unchanged, runs *as a pod* (in-cluster config, its
ServiceAccount allowed by a Role on the custom resource, its status subresource, ConfigMaps
and Leases), takes leadership through a Lease, and reconciles CronTabs into ConfigMaps it
owns and into their status. The same operator started outside the cluster with a kubeconfig
waits as a follower, and takes over when the pod is deleted and its Lease expires. Deleting
a CronTab garbage-collects the ConfigMap it owns (SPEC EX2)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from tests.integration import waiting
from tests.integration.crontabs import crontab_crd
from tests.integration.kubectl import kubectl
from tests.integration.officialclient import python_pod
from tests.integration.skiffcli import skiff_up

CONFIG = """kubelet:
  nodeStatusUpdateFrequency: 1s
controllerManager:
  gcResyncPeriod: 2s
"""
GROUP = "operators.example.com"

# The operator: a Lease-based leader election (a renewing thread), then a watch of CronTabs
# that makes one owned ConfigMap per CronTab and reports the replicas in its status.
OPERATOR = """
import datetime, json, os, sys, threading, time
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
if os.environ.get("KUBERNETES_SERVICE_HOST"):
    config.load_incluster_config()
else:
    config.load_kube_config()
NS, GROUP, ME = os.environ["WATCH_NAMESPACE"], os.environ["GROUP"], os.environ["IDENTITY"]
leases, custom, core = (client.CoordinationV1Api(), client.CustomObjectsApi(),
                        client.CoreV1Api())
DURATION = 3

def now():
    return datetime.datetime.now(datetime.timezone.utc)

def try_acquire():
    try:
        lease = leases.read_namespaced_lease("crontab-operator", NS)
    except ApiException as err:
        if err.status != 404:
            raise
        body = client.V1Lease(metadata=client.V1ObjectMeta(name="crontab-operator"),
                              spec=client.V1LeaseSpec(holder_identity=ME,
                                                      lease_duration_seconds=DURATION,
                                                      acquire_time=now(), renew_time=now()))
        try:
            leases.create_namespaced_lease(NS, body)
            return True
        except ApiException as err:
            if err.status == 409:
                return False
            raise
    spec = lease.spec
    expired = spec.renew_time + datetime.timedelta(seconds=spec.lease_duration_seconds) < now()
    if spec.holder_identity != ME and not expired:
        return False
    if spec.holder_identity != ME:
        spec.lease_transitions = (spec.lease_transitions or 0) + 1
        spec.acquire_time = now()
    spec.holder_identity, spec.renew_time = ME, now()
    try:
        leases.replace_namespaced_lease("crontab-operator", NS, lease)
        return True
    except ApiException as err:
        if err.status == 409:
            return False
        raise

while not try_acquire():
    time.sleep(0.5)
print("leader", ME, flush=True)

def renew():
    while True:
        time.sleep(1)
        if not try_acquire():
            os._exit(1)  # lost the lease: stop acting at once
threading.Thread(target=renew, daemon=True).start()

while True:
    stream = watch.Watch().stream(custom.list_namespaced_custom_object, GROUP, "v1", NS,
                                  "crontabs", timeout_seconds=60)
    for event in stream:
        tab = event["object"]
        if event["type"] == "DELETED" or tab["metadata"].get("deletionTimestamp"):
            continue
        name = tab["metadata"]["name"]
        owner = client.V1OwnerReference(api_version=tab["apiVersion"], kind=tab["kind"],
                                        name=name, uid=tab["metadata"]["uid"],
                                        controller=True)
        schedule = client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=name + "-schedule", owner_references=[owner]),
            data={"cronSpec": tab["spec"]["cronSpec"], "by": ME})
        try:
            core.create_namespaced_config_map(NS, schedule)
        except ApiException as err:
            if err.status != 409:
                raise
        custom.patch_namespaced_custom_object_status(
            GROUP, "v1", NS, "crontabs", name,
            {"status": {"replicas": tab["spec"].get("replicas", 1)}})
        print("reconciled", name, flush=True)
"""

ROLE = [client.V1PolicyRule(api_groups=[GROUP], resources=["crontabs"],
                            verbs=["get", "list", "watch"]),
        client.V1PolicyRule(api_groups=[GROUP], resources=["crontabs/status"],
                            verbs=["get", "patch", "update"]),
        client.V1PolicyRule(api_groups=[""], resources=["configmaps"],
                            verbs=["get", "create"]),
        client.V1PolicyRule(api_groups=["coordination.k8s.io"], resources=["leases"],
                            verbs=["get", "create", "update"])]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with skiff_up(tmp_path_factory.mktemp("operator"), config=CONFIG) as data_dir:
        yield data_dir


def until(predicate: Any, what: str, timeout: float = 60.0) -> Any:
    return waiting.until(predicate, what, timeout, interval=0.3)


def _crontab(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "CronTab",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"cronSpec": "*/5 * * * *", "replicas": 2}}


def _config_map(core: client.CoreV1Api, name: str, ns: str) -> client.V1ConfigMap | None:
    try:
        found: client.V1ConfigMap = core.read_namespaced_config_map(name, ns)
        return found
    except client.ApiException as err:
        if err.status == 404:
            return None
        raise


def test_ex9_an_operator_pod_and_its_outside_twin_share_one_lease(data_dir: Path) -> None:
    kubeconfig = data_dir / "kubeconfig"
    applied = kubectl(kubeconfig, "apply", "-f", "-", stdin=crontab_crd(GROUP))
    assert applied.returncode == 0, applied.stderr
    waited = kubectl(kubeconfig, "wait", "--for=condition=Established", "--timeout=30s",
                     f"crd/crontabs.{GROUP}")
    assert waited.returncode == 0, waited.stderr
    ns = f"t-{uuid.uuid4().hex[:8]}"
    with config.new_client_from_config(config_file=str(kubeconfig)) as api:
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        rbac = client.RbacAuthorizationV1Api(api)
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
        rbac.create_namespaced_role(ns, client.V1Role(
            metadata=client.V1ObjectMeta(name="crontab-operator"), rules=ROLE))
        rbac.create_namespaced_role_binding(ns, client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="crontab-operator"),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role",
                                      name="crontab-operator"),
            subjects=[client.RbacV1Subject(kind="ServiceAccount", name="default",
                                           namespace=ns)]))
        pod = python_pod("operator", OPERATOR, restart="Never")
        assert pod.spec is not None and pod.spec.containers[0].env is not None
        pod.spec.containers[0].env += [
            client.V1EnvVar(name="WATCH_NAMESPACE", value=ns),
            client.V1EnvVar(name="GROUP", value=GROUP),
            client.V1EnvVar(name="IDENTITY", value="in-cluster")]
        core.create_namespaced_pod(ns, pod)

        def log() -> str:
            try:
                return str(core.read_namespaced_pod_log("operator", ns))
            except client.ApiException:
                return ""
        until(lambda: "leader in-cluster" in log(), "the operator pod to lead")
        custom.create_namespaced_custom_object(GROUP, "v1", ns, "crontabs",
                                               _crontab("first", ns))
        made = until(lambda: _config_map(core, "first-schedule", ns),
                     "the operator pod to make the ConfigMap")
        assert made.data == {"cronSpec": "*/5 * * * *", "by": "in-cluster"}
        assert [r.kind for r in made.metadata.owner_references] == ["CronTab"]
        def status_replicas() -> Any:
            got = custom.get_namespaced_custom_object(GROUP, "v1", ns, "crontabs", "first")
            assert isinstance(got, dict)
            return (got.get("status") or {}).get("replicas")
        until(lambda: status_replicas() == 2, "the operator pod to write the status")

        # the same operator from outside, with a kubeconfig: a follower until the pod goes
        outside = subprocess.Popen(
            [sys.executable, "-c", OPERATOR], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
            env={**{k: v for k, v in os.environ.items()
                    if not k.startswith("KUBERNETES_")},
                 "KUBECONFIG": str(kubeconfig), "WATCH_NAMESPACE": ns, "GROUP": GROUP,
                 "IDENTITY": "outside"})
        try:
            core.delete_namespaced_pod("operator", ns, grace_period_seconds=0)
            custom.create_namespaced_custom_object(GROUP, "v1", ns, "crontabs",
                                                   _crontab("second", ns))
            second = until(lambda: _config_map(core, "second-schedule", ns),
                           "the outside operator to take over", timeout=90)
            assert second.data["by"] == "outside"
            lease = client.CoordinationV1Api(api).read_namespaced_lease("crontab-operator",
                                                                        ns)
            assert lease.spec is not None and lease.spec.holder_identity == "outside"
            assert lease.spec.lease_transitions == 1
        finally:
            outside.kill()
            outside.communicate()

        # the CronTab's ConfigMap goes with it (the garbage collector, background)
        custom.delete_namespaced_custom_object(GROUP, "v1", ns, "crontabs", "first")
        until(lambda: _config_map(core, "first-schedule", ns) is None,
              "the owned ConfigMap to be garbage-collected")
