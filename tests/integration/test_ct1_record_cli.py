"""CT1 from the command line (issue 35 part 2), real subprocesses on a real local cluster:
`skiff chaos stale-view --from-write K` stores a fromWrite view and `skiff get
perturbations` shows it as `from write #K` (a bad K names the flag); a Perturbation with
`record: true` for the admin's group journals `kubectl get configmaps`, read back with
`kubectl get --raw /apis/skiff.io/v1/perturbations/NAME/record`."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.kubectl import kubectl
from tests.integration.skiffcli import skiff, skiff_up

pytestmark = pytest.mark.integration

USER = "system:serviceaccount:shop:operator"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with skiff_up(tmp_path_factory.mktemp("skiff-record"), nodes=0) as data_dir:
        yield data_dir


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr + result.stdout
    return result.stdout


def test_ct1_from_write_flag_is_stored_and_shown(cluster: Path) -> None:
    made = _ok(skiff(cluster, "chaos", "stale-view", "--user", USER, "--from-write", "2",
                     "--name", "own-write"))
    assert made.startswith("perturbation.skiff.io/own-write created")
    assert "before its own write #2" in made
    obj = json.loads(_ok(skiff(cluster, "get", "perturbation", "own-write", "-o", "json")))
    assert obj["spec"] == {"subject": {"user": USER}, "staleView": {"fromWrite": 2}}
    row = next(r for r in _ok(skiff(cluster, "get", "perturbations")).splitlines()
               if r.startswith("own-write "))
    assert "from write #2" in row
    _ok(skiff(cluster, "chaos", "heal", "--perturbation", "own-write"))
    bad = skiff(cluster, "chaos", "stale-view", "--user", USER, "--from-write", "0")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "error: --from-write: must be a whole number greater than 0, not 0" in bad.stderr


def test_ct1_record_is_read_with_kubectl_get_raw(cluster: Path) -> None:
    assert shutil.which("kubectl"), "kubectl is not installed"
    config = cluster / "kubeconfig"
    name = "admins-record"
    _ok(kubectl(config, "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "skiff.io/v1", "kind": "Perturbation", "metadata": {"name": name},
        "spec": {"subject": {"group": "system:masters"}, "record": True}})))
    path = f"/apis/skiff.io/v1/perturbations/{name}/record"
    try:
        deadline = time.monotonic() + 10
        while True:  # until this apiserver follows the Perturbation
            _ok(kubectl(config, "get", "configmaps", "-n", "default"))
            record = json.loads(_ok(kubectl(config, "get", "--raw", path)))
            # the group's other members (the cluster's own components) are journaled too
            reads = [e for e in record["entries"] if e["op"] == "read"
                     and e["resource"] == "configmaps"]
            if reads or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert (record["kind"], record["metadata"]["name"]) == ("PerturbationRecord", name)
        assert (reads[0]["verb"], reads[0]["namespace"], reads[0]["resourceVersion"]) == (
            "list", "default", "")
        last = record["entries"][-1]["seq"]
        later = json.loads(_ok(kubectl(config, "get", "--raw", f"{path}?sinceSeq={last}")))
        assert all(e["seq"] > last for e in later["entries"])
        assert not [e for e in later["entries"] if e["resource"] == "perturbations"]
    finally:
        kubectl(config, "delete", "perturbation", name)
