"""The controller in pods (`skiff explore --identity ... --controller-pods SELECTOR`, SPEC
CT2): which pod a crash test kills, and which container restarts are the controller's own
exits (a finding) rather than the kill a crash test made."""

from __future__ import annotations

from typing import Any

from skiff.explore.controller import Exit
from skiff.explore.target import crash_target, exit_of, pod_exits


def _pod(name: str, *, phase: str = "Running", created: str = "2026-01-01T00:00:00Z",
         deleting: bool = False, uid: str = "", restarts: int = 0,
         last: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "inpod", "uid": uid or f"uid-{name}",
                            "creationTimestamp": created}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    status: dict[str, Any] = {"name": "operator", "restartCount": restarts}
    if last is not None:
        status["lastState"] = {"terminated": last}
    return {"metadata": meta, "spec": {"nodeName": "node-1"},
            "status": {"phase": phase, "containerStatuses": [status]}}


def test_ct2_crash_target_is_the_first_running_controller_pod() -> None:
    pods = [_pod("op-c", created="2026-01-01T00:00:05Z"),
            _pod("op-b", phase="Pending", created="2026-01-01T00:00:00Z"),
            _pod("op-a", deleting=True, created="2026-01-01T00:00:00Z"),
            _pod("op-d", created="2026-01-01T00:00:02Z")]
    assert crash_target(pods) == {"pod": {"namespace": "inpod", "name": "op-d"}}
    assert crash_target([_pod("x", phase="Pending")]) is None
    assert crash_target([]) is None


KILLED = {"exitCode": 137, "reason": "Error", "finishedAt": "2026-01-01T00:00:10Z"}
OWN = {"exitCode": 1, "reason": "Error", "message": "boom",
       "finishedAt": "2026-01-01T00:00:20Z"}


def _exits(pods: list[dict[str, Any]], seen: set[tuple[str, str, int]]) -> list[Exit]:
    return [Exit(*exit_of(pod, container)) for pod, container, _ in pod_exits(pods, seen)]


def test_ct2_our_kill_is_not_an_exit_of_its_own_but_a_crash_is() -> None:
    seen: set[tuple[str, str, int]] = set()
    assert _exits([_pod("op", restarts=0)], seen) == []
    killed = _exits([_pod("op", restarts=1, last=KILLED)], seen)
    assert [e.killed for e in killed] == [True]
    # the same restart seen again is not counted twice
    assert _exits([_pod("op", restarts=1, last=KILLED)], seen) == []
    own = _exits([_pod("op", restarts=2, last=OWN)], seen)
    assert len(own) == 1 and not own[0].killed and own[0].code == 1
    assert own[0].text().startswith("the controller exited with code 1")
    assert "pod inpod/op container operator: Error boom" in own[0].text()
    assert own[0].time == 1767225620.0


def test_ct2_an_oom_kill_is_the_controllers_own_exit() -> None:
    oom = {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-01-01T00:00:10Z"}
    found = _exits([_pod("op", restarts=1, last=oom)], set())
    assert len(found) == 1 and not found[0].killed and found[0].code == 137
    assert "OOMKilled" in found[0].text()


def test_ct2_a_new_pod_of_the_controller_is_counted_apart() -> None:
    seen: set[tuple[str, str, int]] = set()
    assert len(_exits([_pod("op-1", restarts=1, last=OWN)], seen)) == 1
    assert len(_exits([_pod("op-2", restarts=1, last=OWN)], seen)) == 1
    assert _exits([_pod("op-2", restarts=1, last=OWN)], seen) == []
