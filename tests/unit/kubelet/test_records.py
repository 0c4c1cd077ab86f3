"""SPEC LC4/LC3: a container whose process has just exited is not taken for one that can be
started again until the kubelet has recorded how it ended (the exit callback runs on a
later loop turn than the exit itself)."""

from __future__ import annotations

import asyncio

from skiff.kubelet.records import INIT, ContainerRecord
from skiff.kubelet.runtime import ContainerHandle


async def test_lc4_a_just_exited_init_container_is_not_startable_before_its_exit_is_recorded(
) -> None:
    exited: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
    handle = ContainerHandle(id="process://1", pid=1, pgid=1, start_ticks=0, started_at=0.0,
                             exited=exited)
    r = ContainerRecord(spec={"name": "init-2"}, kind=INIT, handle=handle, attempts=1)
    assert r.running
    exited.set_result(0)  # the process is gone; the kubelet's callback has not run yet
    assert r.running and not r.succeeded, "an unrecorded exit would start init-2 again"
    r.exit_code, r.finished_at = 0, 1.0  # what the exit callback records
    assert not r.running and r.succeeded


def test_lc2_new_pod_without_init_containers_shows_container_creating() -> None:
    """kubectl's STATUS of a pod whose containers have not started: ContainerCreating (it
    said PodInitializing, which Kubernetes shows only while init containers run)."""
    from skiff.kubelet.records import pod_records
    plain = pod_records({"containers": [{"name": "a"}, {"name": "b"}]})
    assert [r.state for r in plain] == [{"waiting": {"reason": "ContainerCreating"}}] * 2
    with_init = pod_records({"initContainers": [{"name": "i"},
                                                {"name": "s", "restartPolicy": "Always"}],
                             "containers": [{"name": "a"}]})
    assert [(r.kind, r.state["waiting"]["reason"]) for r in with_init] == [
        ("init", "PodInitializing"), ("sidecar", "PodInitializing"), ("app", "PodInitializing")]
