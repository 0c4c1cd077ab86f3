"""SPEC WL4: a suspended Job (Kubernetes' job_controller.go syncJob / manageJob). It runs no
pods and says so with a `Suspended` condition (True, JobSuspended) and an event; resumed,
the condition turns False (JobResumed), an event Resumed is recorded and `startTime` starts
over, so `activeDeadlineSeconds` counts only the time the Job is active."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, cast

import pytest

from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.clock import FakeClock, rfc3339
from skiff.controller_manager.controller import ControllerContext
from skiff.controller_manager.informers import SharedInformers
from skiff.controller_manager.job import JobController
from skiff.controller_manager.settings import ControllerManagerSettings

NS = "ns"
KEY = f"{NS}/batch"
TRACKING = "batch.kubernetes.io/job-tracking"


class FakeCluster:
    """The verbs the Job controller uses, recording pods created and deleted, events and
    the last status written."""

    def __init__(self) -> None:
        self.created_pods: list[Obj] = []
        self.deleted_pods: list[str] = []
        self.events: list[tuple[str, str]] = []
        self.status: Obj | None = None

    async def create(self, obj: Obj) -> Obj:
        if obj.get("kind") == "Event":
            self.events.append((obj["reason"], obj["message"]))
        else:
            created = copy.deepcopy(obj)
            created["metadata"]["name"] = f"{obj['metadata'].get('generateName', '')}x"
            self.created_pods.append(created)
            return created
        return copy.deepcopy(obj)

    async def update(self, obj: Obj) -> Obj:
        return copy.deepcopy(obj)

    async def update_status(self, obj: Obj) -> Obj:
        self.status = copy.deepcopy(obj["status"])
        return copy.deepcopy(obj)

    async def delete(self, resource: str, name: str, namespace: str | None = None,
                     **_: Any) -> Obj:
        self.deleted_pods.append(name)
        return {}


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
    return {"metadata": meta, "spec": {"nodeName": "node-1"},
            "status": {"phase": "Running"}}


class Harness:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.api = FakeCluster()
        client = cast(ApiClient, self.api)
        self.ctl = JobController(context=ControllerContext(
            client=client, informers=SharedInformers(client),
            settings=ControllerManagerSettings(), clock=self.clock))

    async def sync(self, the_job: Obj, pods: Sequence[Obj] = ()) -> Obj:
        """One sync of `the_job`; returns the status it wrote (or the one it had)."""
        self.ctl.jobs.store.put(the_job)
        for pod in pods:
            self.ctl.pods.store.put(pod)
        self.api.status = None
        self.ctl.expectations.forget(KEY)
        await self.ctl.reconcile(KEY)
        written: Obj = the_job["status"] if self.api.status is None else self.api.status
        return written


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
    assert sorted(h.api.deleted_pods) == ["batch-a", "batch-b"]
    cond = suspended_condition(status)
    assert cond is not None
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True", "JobSuspended", "Job suspended")
    assert cond["lastTransitionTime"] == rfc3339(h.clock.now())
    assert ("Suspended", "Job suspended") in h.api.events
    assert h.api.created_pods == []


async def test_wl4_job_created_suspended_has_no_start_time_and_runs_nothing() -> None:
    h = Harness()
    status = await h.sync(job(suspend=True))
    assert "startTime" not in status
    assert h.api.created_pods == []
    cond = suspended_condition(status)
    assert cond is not None and cond["status"] == "True"


async def test_wl4_suspended_condition_is_written_once() -> None:
    h = Harness()
    first = await h.sync(job(suspend=True))
    h.clock.advance(10)
    again = await h.sync(job(suspend=True, status=first))
    assert suspended_condition(again) == suspended_condition(first)
    assert h.api.events.count(("Suspended", "Job suspended")) == 1


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
    assert ("Resumed", "Job resumed") in h.api.events
    assert len(h.api.created_pods) == 2


async def test_wl4_never_suspended_job_has_no_suspended_condition() -> None:
    h = Harness()
    status = await h.sync(job(suspend=False))
    assert suspended_condition(status) is None
    assert not any(reason == "Resumed" for reason, _ in h.api.events)


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
