"""Issue 35 item 1 from the command line, the pid target: `skiff chaos crash-on-write
--pid` on a real local cluster (etcd, apiserver, TLS). A local program writing ConfigMaps
through its own ServiceAccount token (cm-1, cm-2, ... a second apart) is SIGKILLed by the
apiserver right after its 3rd create commits; restarted (as its supervisor would), it goes
on and is not killed again. Bad flags say which flag is wrong."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from tests.integration import waiting
from tests.integration.officialclient import meta, present
from tests.integration.skiffcli import skiff, skiff_up

pytestmark = pytest.mark.integration

WRITER = """
import os, time
from kubernetes import client
conf = client.Configuration()
conf.host, conf.ssl_ca_cert = os.environ["HOST"], os.environ["CA"]
conf.api_key = {"authorization": "Bearer " + os.environ["TOKEN"]}
core, ns = client.CoreV1Api(client.ApiClient(conf)), os.environ["NS"]
while not os.path.exists(os.environ["GO"]):  # the perturbation exists: start writing
    time.sleep(0.05)
have = {c.metadata.name for c in core.list_namespaced_config_map(ns).items}
for n in range(1, 6):
    if "cm-%d" % n not in have:
        core.create_namespaced_config_map(ns, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name="cm-%d" % n)))
        time.sleep(1)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with skiff_up(tmp_path_factory.mktemp("skiff-crash"), nodes=0) as data_dir:
        yield data_dir


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr + result.stdout
    return result.stdout


def _writer_env(cluster: Path, core: client.CoreV1Api, ns: str) -> dict[str, str]:
    """The environment of a writer authenticated as `ns`'s default ServiceAccount."""
    token = core.create_namespaced_service_account_token("default", ns,
                                                         client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)))
    conf = client.Configuration.get_default_copy()
    config.load_kube_config(config_file=str(cluster / "kubeconfig"),
                            client_configuration=conf)
    return {**os.environ, "HOST": conf.host, "CA": str(conf.ssl_ca_cert), "NS": ns,
            "TOKEN": str(present(token.status).token)}


def _has_default(core: client.CoreV1Api, ns: str) -> bool:
    try:
        core.read_namespaced_service_account("default", ns)
    except client.ApiException:
        return False
    return True


def test_ct1_crash_on_write_pid_is_killed_after_the_third_create(cluster: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    with config.new_client_from_config(config_file=str(cluster / "kubeconfig")) as api:
        core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
        rbac.create_namespaced_role_binding(ns, client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="edit"),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io",
                                      kind="ClusterRole", name="edit"),
            subjects=[client.RbacV1Subject(kind="ServiceAccount", name="default",
                                           namespace=ns)]))
        waiting.until(lambda: _has_default(core, ns), "the default ServiceAccount", 20)
        # The writer waits for `go`: under load the CLI's start-up took longer than the
        # writer's first three creates, so the count began after them (cm-4 landed).
        go = cluster / f"go-{ns}"
        env = {**_writer_env(cluster, core, ns), "GO": str(go)}
        writer = subprocess.Popen([sys.executable, "-c", WRITER], env=env)
        try:
            made = _ok(skiff(cluster, "chaos", "crash-on-write", "--user",
                             f"system:serviceaccount:{ns}:default", "--after", "3",
                             "--verb", "create", "--resource", "configmaps",
                             "--pid", str(writer.pid), "--name", f"crash-{ns}"))
            assert made.startswith(f"perturbation.skiff.io/crash-{ns} created: process "
                                   f"{writer.pid} is killed right after")
            go.touch()
            assert writer.wait(timeout=20) == -signal.SIGKILL
        finally:
            if writer.poll() is None:
                writer.kill()
                writer.wait()
        names = {str(meta(c).name) for c in core.list_namespaced_config_map(ns).items}
        assert {"cm-1", "cm-2", "cm-3"} <= names and "cm-4" not in names
        obj = json.loads(_ok(skiff(cluster, "get", "perturbation", f"crash-{ns}", "-o",
                                   "json")))
        (crash,) = obj["status"]["crashes"]
        assert crash["killed"] is True
        assert crash["revision"] == int(str(meta(core.read_namespaced_config_map(
            "cm-3", ns)).resource_version))
        again = subprocess.run([sys.executable, "-c", WRITER], env=env, timeout=30,
                               check=False)
        assert again.returncode == 0  # restarted, it finishes: the crash came only once
        names = {str(meta(c).name) for c in core.list_namespaced_config_map(ns).items}
        assert {f"cm-{i}" for i in range(1, 6)} <= names
        _ok(skiff(cluster, "chaos", "heal", "--perturbation", f"crash-{ns}"))


@pytest.mark.parametrize(("flags", "message"), [
    pytest.param(["--after", "0", "--pid", "4242"], "--after: must be a whole number",
                 id="after-zero"),
    pytest.param(["--after", "1", "--pod", "nonamespace"], "--pod: 'nonamespace' is not "
                                                           "NAMESPACE/NAME[:CONTAINER]",
                 id="bad-pod"),
    pytest.param(["--after", "1", "--verb", "get", "--pid", "4242"],
                 "--verb: 'get' is not a write verb", id="read-verb"),
])
def test_ct1_crash_on_write_bad_flags_name_the_flag(cluster: Path, flags: list[str],
                                                    message: str) -> None:
    result = skiff(cluster, "chaos", "crash-on-write", "--user", "someone", *flags)
    assert result.returncode != 0, result.stdout
    assert message in result.stderr and "Traceback" not in result.stderr
