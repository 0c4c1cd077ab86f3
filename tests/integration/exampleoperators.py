"""Running the example operators of examples/operators/ against a real secure apiserver,
each as its own process under its own client-certificate identity (a kubeconfig of its
own), so that a Perturbation naming that identity changes only that operator's view."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes import client

from tests.integration.auth.conftest import SecureCluster

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "operators"
GROUP = "examples.skiff.io"
T = TypeVar("T")


def kubeconfig(cluster: SecureCluster, user: str) -> Path:
    """A kubeconfig for `user` (a client certificate in system:masters)."""
    pair = cluster.user(user, "system:masters")
    path = cluster.root / f"kubeconfig-{user}"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "op",
        "clusters": [{"name": "skiff", "cluster": {
            "server": cluster.https, "certificate-authority": str(cluster.pki.ca)}}],
        "users": [{"name": user, "user": {"client-certificate": str(pair.cert),
                                          "client-key": str(pair.key)}}],
        "contexts": [{"name": "op", "context": {"cluster": "skiff", "user": user}}]}))
    return path


def api_client(cluster: SecureCluster, user: str) -> client.ApiClient:
    pair = cluster.user(user, "system:masters")
    cfg = client.Configuration()
    cfg.host = cluster.https
    cfg.ssl_ca_cert = str(cluster.pki.ca)
    cfg.cert_file, cfg.key_file = str(pair.cert), str(pair.key)
    return client.ApiClient(cfg)


def install_crds(api: client.ApiClient) -> None:
    """Create the examples' CRDs and wait until each is served."""
    ext, custom = client.ApiextensionsV1Api(api), client.CustomObjectsApi(api)
    for name in ("database", "claim", "backup"):
        crd = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
        ext.create_custom_resource_definition(crd)

    def served() -> bool:
        try:
            for plural in ("databases", "claims", "backups"):
                custom.list_cluster_custom_object(GROUP, "v1", plural)
        except client.ApiException as err:
            if err.status == 404:
                return False
            raise
        return True
    until(served, "the examples' CRDs to be served")


def until(predicate: Callable[[], T], what: str, timeout: float = 30.0) -> T:
    """Poll until `predicate` holds. Every wait here is for something that must happen
    (never for something that must not), so the timeout only bounds a failure: 30 s, as an
    operator process that imports the official client on a loaded 2-core CI machine took
    more than 8 s to take a lock or to crash (CI, twice)."""
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@dataclass
class Running:
    """An operator process; `output` is what it printed, once it has been stopped."""

    proc: subprocess.Popen[str]
    output: str = ""


@contextmanager
def operator(name: str, namespace: str, config: Path, *, fixed: bool,
             env: dict[str, str] | None = None) -> Iterator[Running]:
    """`python examples/operators/<name>.py NAMESPACE [--fixed] --resync 1` with KUBECONFIG
    set, stopped (killed) on leaving."""
    args = [sys.executable, str(EXAMPLES / f"{name}.py"), namespace, "--resync", "1"]
    proc = subprocess.Popen(
        args + (["--fixed"] if fixed else []), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")},
             "KUBECONFIG": str(config), **(env or {})})
    run = Running(proc)
    try:
        yield run
    finally:
        if proc.poll() is None:
            proc.kill()
        run.output = proc.communicate()[0]


def perturb(custom: client.CustomObjectsApi, name: str, user: str, **spec: Any) -> str:
    custom.create_cluster_custom_object(GROUP_SKIFF, "v1", "perturbations", {
        "apiVersion": f"{GROUP_SKIFF}/v1", "kind": "Perturbation", "metadata": {"name": name},
        "spec": {"subject": {"user": user}, **spec}})
    return name


def heal(custom: client.CustomObjectsApi, name: str) -> None:
    custom.delete_cluster_custom_object(GROUP_SKIFF, "v1", "perturbations", name)


GROUP_SKIFF = "skiff.io"
