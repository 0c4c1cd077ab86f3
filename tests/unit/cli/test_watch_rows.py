"""`skiff get -w` rows line up under the header the way kubectl's do:
the first batch (header + listed rows) fixes the widths; later rows are padded to them."""

from __future__ import annotations

import pytest

from skiff.cli.resources import AlignedRows, kinds_of


def test_defect11_watch_rows_are_padded_to_the_first_batchs_widths() -> None:
    rows = AlignedRows(["NAME", "READY", "STATUS"])
    first = rows.lines([["a-long-pod-name", "0/1", "Pending"]])
    later = rows.lines([["p1", "1/1", "Running"]])
    assert first == ["NAME              READY   STATUS",
                     "a-long-pod-name   0/1     Pending"]
    assert later == ["p1                1/1     Running"]


def test_defect11_a_watch_with_nothing_listed_sizes_on_its_first_event() -> None:
    rows = AlignedRows(["NAME", "STATUS"])
    assert rows.lines([["web", "Pending"]]) == ["NAME   STATUS", "web    Pending"]
    assert rows.lines([["a-longer-one", "Running"]]) == ["a-longer-one   Running"]


@pytest.mark.parametrize(("names", "kinds"), [
    pytest.param("pc,pdb", ["PriorityClass", "PodDisruptionBudget"], id="comma-list"),
    pytest.param("po,no,ns", ["Pod", "Node", "Namespace"], id="short-names"),
    pytest.param("sts,rs,pvc", ["StatefulSet", "ReplicaSet", "PersistentVolumeClaim"],
                 id="workloads"),
    pytest.param("pods", ["Pod"], id="one"),
])
def test_defect11_get_takes_kubectls_comma_lists_and_short_names(
        names: str, kinds: list[str]) -> None:
    assert [k.kind for k in kinds_of(names)] == kinds
