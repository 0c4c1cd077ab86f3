"""Issue 19 part B against a whole `skiff up` cluster, with the real kubectl and the
official Python client: ServiceAccounts and tokens (SPEC AX3), PersistentVolumes and
StorageClasses (AX4), metrics.k8s.io (AX5)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

CONFIG = """kubelet:
  nodeStatusUpdateFrequency: 1s
"""


def skiff(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "skiff.cli.main", *args], text=True,
                          capture_output=True, timeout=180,
                          env={**os.environ, "SKIFF_DATA_DIR": str(data_dir),
                               "SKIFF_SERVER": ""})


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    data_dir = tmp_path_factory.mktemp("surface-b")
    (data_dir / "config.yaml").write_text(CONFIG)
    up = skiff(data_dir, "up", "--detach", "--nodes", "1", "--config",
               str(data_dir / "config.yaml"))
    try:
        assert up.returncode == 0, up.stderr + up.stdout
        yield data_dir
    finally:
        skiff(data_dir, "down")


@pytest.fixture(scope="module")
def api_client(data_dir: Path) -> Iterator[client.ApiClient]:
    with config.new_client_from_config(config_file=str(data_dir / "kubeconfig")) as api:
        yield api


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


def kubectl(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", "--kubeconfig", str(data_dir / "kubeconfig"), *args],
                          text=True, capture_output=True, timeout=60)


def until(predicate: Any, what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def new_namespace(core: client.CoreV1Api) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    return name


def pod(name: str, command: list[str], **spec: Any) -> client.V1Pod:
    return client.V1Pod(metadata=client.V1ObjectMeta(name=name), spec=client.V1PodSpec(
        termination_grace_period_seconds=1,
        containers=[client.V1Container(name="main", image="busybox", command=command)],
        **spec))


def jwt_claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    padded = payload + "=" * (-len(payload) % 4)
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(padded))
    return decoded


# -- AX3 ServiceAccounts ----------------------------------------------------------------

def test_AX3_new_namespace_gets_default_service_account_and_pod_gets_it(
        core: client.CoreV1Api, data_dir: Path) -> None:
    ns = new_namespace(core)
    # Created at once: admission waits briefly for the controller's `default` account.
    created = core.create_namespaced_pod(ns, pod("p", ["sleep", "60"]))
    assert created.spec.service_account_name == "default"
    accounts = core.list_namespaced_service_account(ns)
    assert [a.metadata.name for a in accounts.items] == ["default"]
    got = kubectl(data_dir, "get", "sa", "-n", ns)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split("\n")[0].split() == ["NAME", "SECRETS", "AGE"]
    assert got.stdout.split("\n")[1].split()[0] == "default"


def test_AX3_pod_whose_service_account_is_missing_is_refused(
        core: client.CoreV1Api) -> None:
    ns = new_namespace(core)
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod(ns, pod("p", ["true"], service_account_name="robot"))
    assert refused.value.status == 403
    body = json.loads(refused.value.body)
    assert body["message"] == (f'pods "p" is forbidden: error looking up service account '
                               f'{ns}/robot: serviceaccount "robot" not found')
    core.create_namespaced_service_account(ns, client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name="robot")))
    accepted = core.create_namespaced_pod(ns, pod("p", ["true"], service_account_name="robot"))
    assert accepted.spec.service_account_name == "robot"


def test_AX3_token_request_issues_a_token_for_the_service_account(
        core: client.CoreV1Api) -> None:
    ns = new_namespace(core)
    until(lambda: core.list_namespaced_service_account(ns).items, "the default account")
    answer = core.create_namespaced_service_account_token("default", ns,
                                                          client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=["skiff-test"], expiration_seconds=3600)))
    claims = jwt_claims(answer.status.token)
    assert claims["sub"] == f"system:serviceaccount:{ns}:default"
    assert claims["aud"] == ["skiff-test"]
    assert claims["exp"] - claims["iat"] == 3600
    assert answer.status.expiration_timestamp is not None
    with pytest.raises(ApiException) as missing:
        core.create_namespaced_service_account_token("nobody", ns,
                                                     client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[])))
    assert missing.value.status == 404


IN_CLUSTER = """
import os
from kubernetes import client
sa = "var/run/secrets/kubernetes.io/serviceaccount"  # the mount, relative to the pod dir
token = open(os.path.join(sa, "token")).read()
namespace = open(os.path.join(sa, "namespace")).read()
cfg = client.Configuration()
# Skiff's REST front is plain HTTP (no serving certificate yet), so the scheme is http.
cfg.host = "http://%s:%s" % (os.environ["KUBERNETES_SERVICE_HOST"],
                             os.environ["KUBERNETES_SERVICE_PORT"])
cfg.api_key = {"authorization": "Bearer " + token}
with client.ApiClient(cfg) as api:
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace)
print("namespace=%s pods=%s" % (namespace, ",".join(sorted(p.metadata.name for p in pods.items))))
"""


def test_AX3_pod_with_the_official_client_lists_pods_with_its_token(
        core: client.CoreV1Api) -> None:
    ns = new_namespace(core)
    created = core.create_namespaced_pod(ns, pod("lister", [sys.executable, "-c", IN_CLUSTER],
                                                 restart_policy="Never"))
    volumes = [v for v in created.spec.volumes if v.name.startswith("kube-api-access-")]
    assert len(volumes) == 1 and volumes[0].projected is not None
    mounts = created.spec.containers[0].volume_mounts
    assert [(m.mount_path, m.read_only) for m in mounts] == [
        ("/var/run/secrets/kubernetes.io/serviceaccount", True)]
    phase = until(lambda: core.read_namespaced_pod("lister", ns).status.phase
                  in ("Succeeded", "Failed") and core.read_namespaced_pod("lister", ns),
                  "the in-cluster pod to finish", timeout=90).status.phase
    log = core.read_namespaced_pod_log("lister", ns)
    assert phase == "Succeeded", log
    assert log == f"namespace={ns} pods=lister\n"
