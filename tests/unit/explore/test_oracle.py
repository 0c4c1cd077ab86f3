"""The oracle of `skiff explore` (SPEC CT2): two runs that made the same decisions compare
equal although their UIDs, resourceVersions, timestamps and generated names differ; random
data learned from fault-free runs is ignored; what a fault changed is reported as missing,
extra (with counts for generated names) or changed (with the field paths)."""

from __future__ import annotations

import itertools
from typing import Any

from skiff.api.names import generate_name
from skiff.api.types import Obj
from skiff.explore.oracle import (
    Difference,
    Mask,
    counts,
    diff,
    learn_mask,
    normalize,
    normalize_snapshot,
)
from skiff.explore.snapshot import Snapshot

_serial = itertools.count(1)
NO_MASK = Mask(frozenset())


def cm(name: str, *, generate: str = "", ns: str = "demo", data: dict[str, Any] | None = None,
       labels: dict[str, str] | None = None, **meta: Any) -> Obj:
    """A ConfigMap as the apiserver returns it: with its bookkeeping filled in."""
    n = next(_serial)
    metadata: Obj = {"name": name, "namespace": ns, "uid": f"uid-{n}",
                     "resourceVersion": str(100 + n), "creationTimestamp":
                     f"2026-11-28T18:{n % 60:02d}:00Z", **meta}
    if generate:
        metadata["generateName"] = generate
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
            "data": data or {}}


def db(status: dict[str, Any], **spec: Any) -> Obj:
    n = next(_serial)
    return {"apiVersion": "examples.skiff.io/v1", "kind": "Database",
            "metadata": {"name": "db", "namespace": "demo", "uid": f"db-uid-{n}",
                         "generation": n, "resourceVersion": str(n)},
            "spec": {"replicas": 1, **spec}, "status": status}


def test_ct2_normalize_masks_the_servers_bookkeeping() -> None:
    obj = cm("c", data={"at": "2026-11-28T18:00:01.123456Z", "n": "3",
                        "ca.crt": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},
             deletionTimestamp="2026-11-28T18:05:00Z", generation=4, selfLink="/x",
             managedFields=[{"manager": "m"}],
             annotations={"restartedAt": "2026-11-28T18:00:00+01:00", "keep": "yes"},
             ownerReferences=[{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"}])
    assert normalize("configmaps", obj) == {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "demo", "terminating": True,
                     "annotations": {"keep": "yes"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p"}]},
        "data": {"at": "<time>", "n": "3", "ca.crt": "<pem>"}}
    assert obj["metadata"]["uid"].startswith("uid-"), "normalize must not change its input"


def test_ct2_normalize_masks_generated_names_and_their_references() -> None:
    child = cm("job-x7f2k", generate="job-")
    parent = db({"job": "job-x7f2k", "jobUID": child["metadata"]["uid"]})
    not_generated = cm("job-abc", generate="job-")  # the suffix is not five random letters
    snapshot = normalize_snapshot({"configmaps": [child, not_generated],
                                   "databases.examples.skiff.io": [parent]})
    assert [o["metadata"]["name"] for o in snapshot["configmaps"]] == ["job-*", "job-abc"]
    assert snapshot["databases.examples.skiff.io"][0]["status"] == {
        "job": "job-*", "jobUID": "<uid>"}
    assert normalize("configmaps", child)["metadata"]["name"] == "job-*"


def test_ct2_diff_of_two_equal_runs_is_empty() -> None:
    def run() -> Snapshot:
        return {"configmaps": [cm("settings", data={"a": "1"}),
                               cm(generate_name("job-"), generate="job-"),
                               cm(generate_name("job-"), generate="job-")],
                "databases.examples.skiff.io": [db({"phase": "Ready"})]}
    first, second = run(), run()
    assert first != second
    assert diff(first, second, mask=NO_MASK) == []


def test_ct2_diff_reports_missing_extra_and_changed() -> None:
    reference: Snapshot = {"configmaps": [cm("a", data={"x": "1"}), cm("b"),
                                          cm("c", data={"x": "1", "y": "2"})]}
    test: Snapshot = {"configmaps": [cm("a", data={"x": "2"}), cm("c", data={"x": "1"}),
                                     cm("d")]}
    found = diff(reference, test, mask=NO_MASK)
    assert found == [
        Difference("configmaps", "demo/a", "changed", ("data.x",),
                   'changed configmaps demo/a: data.x "1" in the reference run, "2" here'),
        Difference("configmaps", "demo/b", "missing", (),
                   "missing configmaps demo/b (in the reference run, not here)"),
        Difference("configmaps", "demo/c", "changed", ("data.y",),
                   'changed configmaps demo/c: data.y "2" in the reference run, absent here'),
        Difference("configmaps", "demo/d", "extra", (),
                   "extra configmaps demo/d (not in the reference run)"),
    ]


def test_ct2_diff_counts_generated_names_as_a_multiset() -> None:
    def jobs(n: int) -> list[Obj]:
        return [cm(f"db-{s}", generate="db-", labels={"examples.skiff.io/database": "db"})
                for s in ["bbbbb", "ccccc", "ddddd", "fffff", "ggggg"][:n]]
    found = diff({"configmaps": jobs(3)}, {"configmaps": jobs(5)}, mask=NO_MASK)
    assert found == [Difference("configmaps", "demo/db-*", "extra", (),
                                "extra configmaps demo/db-* (3 in the reference run, 5 here)")]
    found = diff({"configmaps": jobs(2)}, {"configmaps": jobs(1)}, mask=NO_MASK)
    assert [(d.change, d.text) for d in found] == [
        ("missing", "missing configmaps demo/db-* (2 in the reference run, 1 here)")]


def test_ct2_diff_of_generated_names_reports_which_one_changed() -> None:
    reference = {"configmaps": [cm("db-bbbbb", generate="db-", data={"n": "1"}),
                                cm("db-ccccc", generate="db-", data={"n": "2"})]}
    test = {"configmaps": [cm("db-fffff", generate="db-", data={"n": "2"}),
                           cm("db-ggggg", generate="db-", data={"n": "7"})]}
    found = diff(reference, test, mask=NO_MASK)
    assert [(d.key, d.change, d.paths) for d in found] == [
        ("demo/db-*#1", "changed", ("data.n",))]
    assert found[0].text == \
        'changed configmaps demo/db-*#1: data.n "1" in the reference run, "7" here'


def test_ct2_diff_ignores_timestamps_but_not_a_kind_that_is_gone() -> None:
    reference = {"configmaps": [cm("a", data={"t": "2026-01-01T00:00:00Z"})],
                 "databases.examples.skiff.io": [db({})]}
    test = {"configmaps": [cm("a", data={"t": "2026-11-28T18:00:00.5Z"})],
            "databases.examples.skiff.io": []}
    assert [d.text for d in diff(reference, test, mask=NO_MASK)] == [
        "missing databases.examples.skiff.io demo/db (in the reference run, not here)"]


def test_ct2_learn_mask_ignores_what_differs_between_fault_free_runs() -> None:
    def run(token: str, phase: str = "Ready") -> Snapshot:
        return {"databases.examples.skiff.io": [db({"phase": phase, "token": token})],
                "configmaps": [cm("labelled", labels={"examples.skiff.io/nonce": token})]}
    mask = learn_mask([run("r4nd0m"), run("0th3r")])
    assert mask.paths == frozenset({
        ("databases.examples.skiff.io", "status.token"),
        ("configmaps", "metadata.labels[examples.skiff.io/nonce]")})
    assert diff(run("r4nd0m"), run("third"), mask=mask) == []
    assert [(d.key, d.paths) for d in diff(run("a"), run("b", phase="Failed"), mask=mask)] \
        == [("demo/db", ("status.phase",))]
    assert diff(run("a"), run("b"), mask=NO_MASK) != []
    assert learn_mask([run("a")]) == NO_MASK


def test_ct2_counts() -> None:
    assert counts({"configmaps": [cm("a"), cm("b")], "databases": []}) == {
        "configmaps": 2, "databases": 0}


def test_ct2_learn_mask_ignores_counts_that_vary_between_fault_free_runs() -> None:
    def run(jobs: int, *, extra: bool = False) -> Snapshot:
        objects = [cm(generate_name("job-"), generate="job-") for _ in range(jobs)]
        return {"configmaps": objects + ([cm("lock")] if extra else [])}
    mask = learn_mask([run(1), run(2, extra=True)])
    assert mask.paths == frozenset({("configmaps", "#count demo/job-*"),
                                    ("configmaps", "#count demo/lock")})
    assert diff(run(1), run(3, extra=True), mask=mask) == []
    assert [d.text for d in diff(run(1), run(3), mask=NO_MASK)] == [
        "extra configmaps demo/job-* (1 in the reference run, 3 here)"]
