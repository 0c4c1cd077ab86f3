"""Issue 35 item 1, crash on write: a Perturbation's `spec.crashOnWrite` validation
messages and field paths, and its known fields."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api import prune_unknown_fields, validate
from skiff.api.types import Obj


def _pert(crash: Any) -> Obj:
    return {"apiVersion": "skiff.io/v1", "kind": "Perturbation",
            "metadata": {"name": "op-crash"},
            "spec": {"subject": {"user": "system:serviceaccount:shop:op"},
                     "crashOnWrite": crash}}


def _messages(crash: Any) -> list[str]:
    return [str(e) for e in validate(_pert(crash))]


@pytest.mark.parametrize("target", [
    pytest.param({"pid": 4242}, id="pid"),
    pytest.param({"pod": {"namespace": "shop", "name": "op-0", "container": "main"}},
                 id="pod"),
])
def test_ct1_crash_on_write_with_a_pid_or_pod_target_is_valid_and_known(target: Obj) -> None:
    obj = _pert({"after": 3, "resources": ["configmaps"], "verbs": ["create", "patch"],
                 "names": ["shop/cm-3"], "target": target})
    assert [str(e) for e in validate(obj)] == []
    assert prune_unknown_fields(obj) == []


@pytest.mark.parametrize(("crash", "message"), [
    pytest.param({"target": {"pid": 10}}, "spec.crashOnWrite.after: Required value",
                 id="no-after"),
    pytest.param({"after": 0, "target": {"pid": 10}},
                 "spec.crashOnWrite.after: Invalid value: 0: must be greater than 0",
                 id="after-zero"),
    pytest.param({"after": 1, "verbs": ["get"], "target": {"pid": 10}},
                 'spec.crashOnWrite.verbs[0]: Unsupported value: "get": supported values: '
                 '"create", "update", "patch", "delete"', id="read-verb"),
    pytest.param({"after": 1, "verbs": ["create", "create"], "target": {"pid": 10}},
                 'spec.crashOnWrite.verbs[1]: Duplicate value: "create"', id="dup-verb"),
    pytest.param({"after": 1, "resources": [""], "target": {"pid": 10}},
                 "spec.crashOnWrite.resources[0]: Required value", id="empty-resource"),
    pytest.param({"after": 1}, "spec.crashOnWrite.target: Required value: must specify "
                               "one of: `pod`, `pid`", id="no-target"),
    pytest.param({"after": 1, "target": {}}, "spec.crashOnWrite.target: Required value: "
                                             "must specify one of: `pod`, `pid`",
                 id="empty-target"),
    pytest.param({"after": 1, "target": {"pid": 5, "pod": {"namespace": "a", "name": "b"}}},
                 "spec.crashOnWrite.target.pid: Forbidden: may not specify more than one "
                 "of: `pod`, `pid`", id="two-targets"),
    pytest.param({"after": 1, "target": {"pid": 1}},
                 "spec.crashOnWrite.target.pid: Invalid value: 1: must be greater than 1",
                 id="init"),
    pytest.param({"after": 1, "target": {"pod": {"name": "op-0"}}},
                 "spec.crashOnWrite.target.pod.namespace: Required value", id="pod-no-ns"),
    pytest.param({"after": 1, "target": {"pod": {"namespace": "shop", "name": "op-0",
                                                  "container": 3}}},
                 "spec.crashOnWrite.target.pod.container: Invalid value: 3: must be a string",
                 id="container-not-string"),
    pytest.param("now", 'spec.crashOnWrite: Invalid value: "now": must be an object',
                 id="not-an-object"),
])
def test_ct1_crash_on_write_fields_are_checked(crash: Any, message: str) -> None:
    assert message in _messages(crash)


def test_ct1_crash_on_write_unknown_fields_are_named() -> None:
    obj = _pert({"after": 1, "target": {"pid": 5, "signal": "TERM"}, "every": True})
    assert sorted(prune_unknown_fields(obj)) == ["spec.crashOnWrite.every",
                                                 "spec.crashOnWrite.target.signal"]
