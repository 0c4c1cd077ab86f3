"""The example operators of examples/operators/ (issue 35, "example operators in the repo"):
each has a known bug that only a fault reveals, and a fixed version. Each runs as its own
process with its own client-certificate identity against a real TLS apiserver; the matching
Perturbation names that identity:

- database.py, stale view: its cached lists pinned before its replicas exist, the buggy
  version keeps making replicas (duplicates); the fixed one makes exactly `replicas`.
- claim.py, missed DELETED events: the buggy version never frees a deleted Claim's lock
  (a leak); the fixed one frees it at its next resync.
- backup.py, a crash right after creating the child (the crash-on-write perturbation: the
  apiserver SIGKILLs it once its first ConfigMap create commits): on restart the buggy
  version makes a second child; the fixed one adopts the first.

And each buggy version, without the fault, ends right: the fault, not the code alone,
reveals the bug."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes import client

from tests.integration.auth.conftest import SecureCluster, start_secure_cluster
from tests.integration.exampleoperators import (
    GROUP,
    api_client,
    heal,
    install_crds,
    kubeconfig,
    operator,
    perturb,
    until,
)
from tests.integration.officialclient import name_of

pytestmark = pytest.mark.integration


@dataclass
class Env:
    cluster: SecureCluster
    core: client.CoreV1Api
    custom: client.CustomObjectsApi


@dataclass
class Case:
    env: Env
    ns: str
    user: str
    config: Path
    cached: client.CustomObjectsApi  # the operator's identity, for probing its view


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with start_secure_cluster(tmp_path_factory.mktemp("examples")) as cluster, \
            api_client(cluster, "examples-admin") as api:
        install_crds(api)
        yield Env(cluster, client.CoreV1Api(api), client.CustomObjectsApi(api))


@pytest.fixture
def c(env: Env) -> Iterator[Case]:
    suffix = uuid.uuid4().hex[:6]
    ns, user = f"ex-{suffix}", f"operator-{suffix}"
    env.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    with api_client(env.cluster, user) as api:
        yield Case(env, ns, user, kubeconfig(env.cluster, user), client.CustomObjectsApi(api))
    listed = cast(dict[str, Any], env.custom.list_cluster_custom_object(
        "skiff.io", "v1", "perturbations"))
    for item in listed["items"]:
        if item["spec"]["subject"].get("user") == user:
            heal(env.custom, item["metadata"]["name"])
    env.core.delete_namespace(ns)


def _create(c: Case, plural: str, kind: str, name: str, spec: dict[str, Any]) -> Any:
    return c.env.custom.create_namespaced_custom_object(GROUP, "v1", c.ns, plural, {
        "apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": {"name": name},
        "spec": spec})


def _children(c: Case, label: str) -> list[str]:
    items = c.env.core.list_namespaced_config_map(c.ns, label_selector=label).items
    return sorted(name_of(cm) for cm in items)


# -- database.py: stale view ---------------------------------------------------------

def _pin_before_replicas(c: Case) -> None:
    """A Database, then the operator's view pinned at its revision (no replica yet)."""
    made = _create(c, "databases", "Database", "db", {"replicas": 2})
    revision = int(made["metadata"]["resourceVersion"])
    perturb(c.env.custom, f"stale-{c.ns}", c.user, staleView={"revision": revision})

    def pinned() -> bool:
        listed = cast(dict[str, Any], c.cached.list_namespaced_custom_object(
            GROUP, "v1", c.ns, "databases", resource_version="0"))
        return int(listed["metadata"]["resourceVersion"]) == revision
    until(pinned, "the stale view to be applied")


def test_ct1_example_database_duplicates_replicas_under_a_stale_view(c: Case) -> None:
    _pin_before_replicas(c)
    with operator("database", c.ns, c.config, fixed=False):
        # each resync's cached list still shows no replica: two more every time
        until(lambda: len(_children(c, "examples.skiff.io/database=db")) >= 4,
              "the buggy operator to duplicate replicas")
    made = _children(c, "examples.skiff.io/database=db")
    assert len(made) >= 4 and all(name.startswith("db-") for name in made), made


def test_ct1_example_database_fixed_makes_exactly_its_replicas_under_a_stale_view(
        c: Case) -> None:
    _pin_before_replicas(c)
    with operator("database", c.ns, c.config, fixed=True):
        until(lambda: len(_children(c, "examples.skiff.io/database=db")) == 2,
              "the fixed operator to make the replicas")
        time.sleep(2.5)  # two more resyncs through the stale cache
    assert _children(c, "examples.skiff.io/database=db") == ["db-0", "db-1"]


def test_ct1_example_database_buggy_is_right_without_the_fault(c: Case) -> None:
    _create(c, "databases", "Database", "db", {"replicas": 2})
    with operator("database", c.ns, c.config, fixed=False):
        until(lambda: len(_children(c, "examples.skiff.io/database=db")) == 2,
              "the operator to make the replicas")
        time.sleep(2.5)
    assert len(_children(c, "examples.skiff.io/database=db")) == 2


# -- claim.py: missed DELETED events ---------------------------------------------------

def _lock(c: Case) -> list[str]:
    return _children(c, "examples.skiff.io/claim=gpu")


def _claim_then_delete(c: Case) -> None:
    _create(c, "claims", "Claim", "gpu", {"resource": "gpu-0"})
    until(lambda: _lock(c) == ["claim-gpu"], "the operator to take the lock")
    c.env.custom.delete_namespaced_custom_object(GROUP, "v1", c.ns, "claims", "gpu")


def _miss_deletes(c: Case) -> None:
    perturb(c.env.custom, f"missed-{c.ns}", c.user, missedEvents={
        "resources": [f"claims.{GROUP}"], "types": ["DELETED"]})
    time.sleep(0.5)  # the apiserver's table follows the write; the operator starts after


@pytest.mark.parametrize("fixed", [False, True], ids=["buggy", "fixed"])
def test_ct1_example_claim_lock_under_missed_deleted_events(c: Case, fixed: bool) -> None:
    _miss_deletes(c)
    with operator("claim", c.ns, c.config, fixed=fixed) as run:
        _claim_then_delete(c)
        if fixed:
            until(lambda: _lock(c) == [], "the fixed operator's resync to free the lock")
            return
        time.sleep(3.0)  # three resyncs: none looks at the lock again
        assert _lock(c) == ["claim-gpu"], "the lock leaks"
    assert "acquired gpu" in run.output and "released" not in run.output


def test_ct1_example_claim_buggy_is_right_without_the_fault(c: Case) -> None:
    with operator("claim", c.ns, c.config, fixed=False):
        _claim_then_delete(c)
        until(lambda: _lock(c) == [], "the DELETED event to free the lock")


# -- backup.py: a crash between creating the child and recording it -----------------------

def _job(c: Case) -> str | None:
    got = cast(dict[str, Any], c.env.custom.get_namespaced_custom_object(
        GROUP, "v1", c.ns, "backups", "nightly"))
    return cast(str | None, (got.get("status") or {}).get("job"))


def _jobs(c: Case) -> list[str]:
    return _children(c, "examples.skiff.io/backup=nightly")


@pytest.mark.parametrize("fixed", [False, True], ids=["buggy", "fixed"])
def test_ct1_example_backup_children_after_a_crash_past_the_create(c: Case,
                                                                  fixed: bool) -> None:
    _create(c, "backups", "Backup", "nightly", {"target": "db"})
    with operator("backup", c.ns, c.config, fixed=fixed) as crashing:
        # the crash-on-write perturbation: killed right after its first ConfigMap create
        # commits (set while the interpreter still imports, before any write)
        perturb(c.env.custom, f"crash-{c.ns}", c.user, crashOnWrite={
            "after": 1, "resources": ["configmaps"], "verbs": ["create"],
            "target": {"pid": crashing.proc.pid}})
        until(lambda: crashing.proc.poll() is not None, "the operator to crash")
    assert crashing.proc.returncode == -9, crashing.output
    assert (len(_jobs(c)), _job(c)) == (1, None)  # a child nobody recorded
    with operator("backup", c.ns, c.config, fixed=fixed):
        job = until(lambda: _job(c), "the restarted operator to record a job")
        time.sleep(1.5)
    if fixed:
        assert _jobs(c) == [job] == ["nightly-job"]  # adopted
    else:
        assert len(_jobs(c)) == 2 and job in _jobs(c)  # a second child


def test_ct1_example_backup_buggy_is_right_without_the_fault(c: Case) -> None:
    _create(c, "backups", "Backup", "nightly", {"target": "db"})
    with operator("backup", c.ns, c.config, fixed=False):
        job = until(lambda: _job(c), "the operator to record a job")
        time.sleep(1.5)
    assert _jobs(c) == [job]
