"""Issue 35 from the command line: `skiff chaos stale-view|miss-events` store the
Perturbation a user asked for, `skiff get perturbations` shows it, `skiff chaos heal`
removes it, and bad flags say which flag and what to do — real subprocesses against a real
local cluster (etcd, apiserver, TLS)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.skiffcli import skiff, skiff_up

USER = "system:serviceaccount:shop:operator"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with skiff_up(tmp_path_factory.mktemp("skiff-perturb"), nodes=0) as data_dir:
        yield data_dir


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr + result.stdout
    return result.stdout


def _spec(cluster: Path, name: str) -> dict[str, object]:
    obj = json.loads(_ok(skiff(cluster, "get", "perturbation", name, "-o", "json")))
    return dict(obj["spec"])


def _failed(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr
    return result.stderr


def test_ct1_stale_view_is_stored_listed_and_healed_by_name(cluster: Path) -> None:
    made = _ok(skiff(cluster, "chaos", "stale-view", "--user", USER, "--lag-revisions",
                     "20", "--name", "op-stale"))
    assert made.startswith("perturbation.skiff.io/op-stale created")
    assert "skiff chaos heal --perturbation op-stale" in made
    assert _spec(cluster, "op-stale") == {"subject": {"user": USER},
                                          "staleView": {"lagRevisions": 20}}
    header, *rows = _ok(skiff(cluster, "get", "perturbations")).splitlines()
    assert header.split()[:4] == ["NAME", "SUBJECT", "STALE", "VIEW"]
    row = next(r for r in rows if r.startswith("op-stale "))
    assert f"user={USER}" in row and "-20 rev" in row
    assert _ok(skiff(cluster, "get", "pert", "op-stale", "-o", "name")).strip() == \
        "perturbation/op-stale"

    healed = _ok(skiff(cluster, "chaos", "heal", "--perturbation", "op-stale"))
    assert healed.strip() == "perturbation.skiff.io/op-stale deleted"
    gone = skiff(cluster, "get", "perturbation", "op-stale")
    assert gone.returncode != 0 and "NotFound" in gone.stderr


def test_ct1_miss_events_flags_become_the_spec_and_heal_removes_every_one(
        cluster: Path) -> None:
    _ok(skiff(cluster, "chaos", "miss-events", "--group", "ops", "--resource", "pods",
              "--resource", "crontabs.stable.example.com", "--type", "modified,DELETED",
              "--object", "shop/web-0", "--coalesce-seconds", "3", "--name", "ops-missed"))
    assert _spec(cluster, "ops-missed") == {"subject": {"group": "ops"}, "missedEvents": {
        "resources": ["pods", "crontabs.stable.example.com"], "names": ["shop/web-0"],
        "types": ["MODIFIED", "DELETED"], "coalesceSeconds": 3}}
    generated = _ok(skiff(cluster, "chaos", "stale-view", "--user", USER, "--revision",
                          "7")).split()[0].removeprefix("perturbation.skiff.io/")
    assert generated.startswith("stale-view-")
    row = next(r for r in _ok(skiff(cluster, "get", "perturbations")).splitlines()
               if r.startswith("ops-missed "))
    assert "MODIFIED,DELETED pods,crontabs.stable.example.com/shop/web-0 (held 3s)" in row

    # A local cluster without --netns has no partitions: heal needs no Docker here.
    healed = _ok(skiff(cluster, "chaos", "heal")).splitlines()
    assert sorted(healed) == sorted([f"perturbation.skiff.io/{generated} deleted",
                                     "perturbation.skiff.io/ops-missed deleted"])
    assert "No resources found" in _ok(skiff(cluster, "get", "perturbations"))
    assert _ok(skiff(cluster, "chaos", "heal")).strip() == "nothing to heal: no perturbations"


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(["stale-view", "--revision", "5"],
                 "one of the arguments --user --group is required", id="no-subject"),
    pytest.param(["stale-view", "--user", USER, "--group", "ops", "--revision", "5"],
                 "argument --group: not allowed with argument --user", id="two-subjects"),
    pytest.param(["stale-view", "--user", USER],
                 "one of the arguments --revision --lag-revisions --lag-seconds --from-write is "
                 "required",
                 id="no-view"),
    pytest.param(["stale-view", "--user", USER, "--lag-revisions", "0"],
                 "error: --lag-revisions: must be a whole number greater than 0, not 0",
                 id="zero-lag"),
    pytest.param(["stale-view", "--user", USER, "--lag-seconds", "soon"],
                 "argument --lag-seconds: invalid int value: 'soon'", id="not-a-number"),
    pytest.param(["stale-view", "--user", "", "--revision", "5"],
                 "error: --user: must not be empty", id="empty-user"),
    pytest.param(["miss-events", "--user", USER, "--type", "UPDATED"],
                 "error: --type: 'UPDATED' is not an event type; use ADDED, MODIFIED, "
                 "DELETED", id="bad-type"),
    pytest.param(["miss-events", "--user", USER, "--coalesce-seconds", "-2"],
                 "error: --coalesce-seconds: must be a whole number of seconds, 0 or more",
                 id="negative-coalesce"),
    pytest.param(["heal", "--perturbation", "no-such"],
                 'error: perturbation "no-such" not found; `skiff get perturbations` lists '
                 "them", id="heal-unknown"),
    pytest.param(["heal", "node-1", "--perturbation", "x"],
                 "give a NODE (to heal its partitions) or --perturbation NAME, not both",
                 id="heal-both"),
])
def test_ct1_bad_chaos_flags_name_the_flag(cluster: Path, args: list[str],
                                           message: str) -> None:
    assert message in _failed(skiff(cluster, "chaos", *args))


def test_ct1_a_taken_name_says_what_to_do(cluster: Path) -> None:
    _ok(skiff(cluster, "chaos", "stale-view", "--group", "g", "--revision", "3", "--name",
              "taken"))
    try:
        again = _failed(skiff(cluster, "chaos", "miss-events", "--group", "g", "--name",
                              "taken"))
        assert ('perturbation "taken" already exists: pick another --name, or `skiff chaos '
                'heal --perturbation taken` first') in again
    finally:
        skiff(cluster, "chaos", "heal", "--perturbation", "taken")


def test_ct1_the_apiserver_rejects_an_invalid_perturbation_by_field(cluster: Path) -> None:
    bad = """apiVersion: skiff.io/v1
kind: Perturbation
metadata: {name: bad}
spec:
  subject: {user: alice, group: ops}
  staleView: {revision: 0}
  missedEvents: {types: [UPDATED]}
"""
    err = _failed(skiff(cluster, "apply", "-f", "-", stdin=bad))
    assert "spec.subject.group: Forbidden: may not specify more than one of: `user`, " \
           "`group`" in err
    assert "spec.staleView.revision: Invalid value: 0: must be greater than 0" in err
    assert 'spec.missedEvents.types[0]: Unsupported value: "UPDATED"' in err
