"""SPEC WL4: a suspended Job (Kubernetes' job_controller.go syncJob / manageJob). It runs no
pods and says so with a `Suspended` condition (True, JobSuspended) and an event; resumed,
the condition turns False (JobResumed), an event Resumed is recorded and `startTime` starts
over, so `activeDeadlineSeconds` counts only the time the Job is active."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import pytest

from skiff.api.types import Obj
from skiff.client.fake import FakeClient
from skiff.clock import FakeClock, rfc3339
from skiff.controller_manager.controller import ControllerContext
from skiff.controller_manager.informers import SharedInformers
from skiff.controller_manager.job import JobController
from skiff.controller_manager.settings import ControllerManagerSettings

NS = "ns"
KEY = f"{NS}/batch"
TRACKING = "batch.kubernetes.io/job-tracking"


def job(*, suspend: bool, status: Obj | None = None, deadline: int | None = None,
        indexed: bool = False) -> Obj:
    spec: Obj = {"parallelism": 2, "completions": 2, "backoffLimit": 6, "suspend": suspend,
                 "selector": {"matchLabels": {"job-name": "batch"}},
                 "template": {"metadata": {"labels": {"job-name": "batch"}},
                              "spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "c", "image": "busybox"}]}}}
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    if indexed:
        spec["completionMode"] = "Indexed"
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "batch", "namespace": NS, "uid": "j-1",
                         "resourceVersion": "1"},
            "spec": spec, "status": copy.deepcopy(status or {})}


def running_pod(name: str, index: int | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": NS, "uid": f"u-{name}",
                 "labels": {"job-name": "batch"}, "finalizers": [TRACKING],
                 "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                      "name": "batch", "uid": "j-1", "controller": True}]}
    if index is not None:
        meta["annotations"] = {"batch.kubernetes.io/job-completion-index": str(index)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": "node-1"}, "status": {"phase": "Running"}}


class Harness:
    """The Job controller over FakeClient; reads back the pods it created and deleted, the
    events it recorded and the status it wrote."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.api = FakeClient(clock=self.clock)
        self.ctl = JobController(context=ControllerContext(
            client=self.api, informers=SharedInformers(self.api),
            settings=ControllerManagerSettings(), clock=self.clock))

    async def sync(self, the_job: Obj, pods: Sequence[Obj] = ()) -> Obj:
        """One sync of `the_job`; returns the status it wrote (or the one it had)."""
        for obj in (the_job, *pods):  # the apiserver and the informers agree
            stored = self.api.add(obj)[0]
            informer = self.ctl.jobs if obj is the_job else self.ctl.pods
            informer.store.put(copy.deepcopy(stored))
        before = len(self.api.actions)
        self.ctl.expectations.forget(KEY)
        await self.ctl.reconcile(KEY)
        written = [a.object for a in self.api.actions[before:]
                   if a.verb == "update_status" and a.resource == "jobs" and a.object]
        status: Obj = written[-1]["status"] if written else the_job["status"]
        return status

    @property
    def created_pods(self) -> list[Obj]:
        return [a.object for a in self.api.calls("create", "pods") if a.object is not None]

    @property
    def deleted_pods(self) -> list[str]:
        return [a.name for a in self.api.calls("delete", "pods")]

    @property
    def events(self) -> list[tuple[str, str]]:
        return [(a.object["reason"], a.object["message"])
                for a in self.api.calls("create", "events") if a.object is not None]


def suspended_condition(status: Obj) -> Obj | None:
    return next((c for c in status.get("conditions") or [] if c["type"] == "Suspended"),
                None)


@pytest.mark.parametrize("indexed", [pytest.param(False, id="non-indexed"),
                                     pytest.param(True, id="indexed")])
async def test_wl4_suspending_a_job_deletes_its_pods_and_sets_suspended(indexed: bool) -> None:
    h = Harness()
    started = {"startTime": rfc3339(h.clock.now() - 30), "active": 2}
    status = await h.sync(job(suspend=True, status=started, indexed=indexed),
                          [running_pod("batch-a", 0 if indexed else None),
                           running_pod("batch-b", 1 if indexed else None)])
    assert sorted(h.deleted_pods) == ["batch-a", "batch-b"]
    cond = suspended_condition(status)
    assert cond is not None
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True", "JobSuspended", "Job suspended")
    assert cond["lastTransitionTime"] == rfc3339(h.clock.now())
    assert ("Suspended", "Job suspended") in h.events
    assert h.created_pods == []


async def test_wl4_job_created_suspended_has_no_start_time_and_runs_nothing() -> None:
    h = Harness()
    status = await h.sync(job(suspend=True))
    assert "startTime" not in status
    assert h.created_pods == []
    cond = suspended_condition(status)
    assert cond is not None and cond["status"] == "True"


async def test_wl4_suspended_condition_is_written_once() -> None:
    h = Harness()
    first = await h.sync(job(suspend=True))
    h.clock.advance(10)
    again = await h.sync(job(suspend=True, status=first))
    assert suspended_condition(again) == suspended_condition(first)
    assert h.events.count(("Suspended", "Job suspended")) == 1


async def test_wl4_resuming_sets_suspended_false_and_resets_start_time() -> None:
    h = Harness()
    was = await h.sync(job(suspend=True, status={"startTime": rfc3339(h.clock.now())}))
    h.clock.advance(120)
    status = await h.sync(job(suspend=False, status=was))
    cond = suspended_condition(status)
    assert cond is not None
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "False", "JobResumed", "Job resumed")
    assert status["startTime"] == rfc3339(h.clock.now())
    assert ("Resumed", "Job resumed") in h.events
    assert len(h.created_pods) == 2


async def test_wl4_never_suspended_job_has_no_suspended_condition() -> None:
    h = Harness()
    status = await h.sync(job(suspend=False))
    assert suspended_condition(status) is None
    assert not any(reason == "Resumed" for reason, _ in h.events)


async def test_wl4_deadline_does_not_run_while_suspended_and_restarts_on_resume() -> None:
    h = Harness()
    started = {"startTime": rfc3339(h.clock.now())}
    was = await h.sync(job(suspend=True, status=started, deadline=60))
    h.clock.advance(300)  # far past the deadline, all of it suspended
    still = await h.sync(job(suspend=True, status=was, deadline=60))
    assert not any(c["type"] in ("FailureTarget", "Failed")
                   for c in still.get("conditions") or [])
    resumed = await h.sync(job(suspend=False, status=still, deadline=60))
    assert not any(c["type"] in ("FailureTarget", "Failed")
                   for c in resumed.get("conditions") or [])
    assert resumed["startTime"] == rfc3339(h.clock.now())
