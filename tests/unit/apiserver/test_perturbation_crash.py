"""Issue 35 item 1, crash on write: which committed writes of the targeted identity count,
that the target is killed once right after the k-th, and that the Perturbation's status and
an Event say when (the store's hooks over a memory store, a real child process killed)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

from skiff.api import lookup
from skiff.api.types import Obj
from skiff.apiserver.auth.context import current_user
from skiff.apiserver.perturbation.crash import Counter, CrashOnWrite, parse_crash
from skiff.apiserver.perturbation.rules import parse
from skiff.apiserver.registry.store import Registry, RegistryConfig
from skiff.apiserver.storage.memory import MemoryStorage
from skiff.apiserver.storage.watchcache import WatchCache
from skiff.auth import UserInfo

CONFIGMAPS = lookup("configmaps")
SECRETS = lookup("secrets")


def _cm(name: str, namespace: str = "default") -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": {"v": "1"}}


def _pert(name: str = "crash", **crash: Any) -> Obj:
    return {"apiVersion": "skiff.io/v1", "kind": "Perturbation", "metadata": {"name": name},
            "spec": {"subject": {"user": "op"}, "crashOnWrite": crash}}


def test_pert_crash_matches_verbs_resources_and_names() -> None:
    crash = CrashOnWrite(after=1, resources=("configmaps",), verbs=("create",),
                         names=("cm-1", "shop/cm-2"), pid=99)
    assert crash.matches(CONFIGMAPS, "create", _cm("cm-1"))
    assert crash.matches(CONFIGMAPS, "create", _cm("cm-2", "shop"))
    assert not crash.matches(CONFIGMAPS, "create", _cm("cm-2"))  # another namespace
    assert not crash.matches(CONFIGMAPS, "update", _cm("cm-1"))
    assert not crash.matches(SECRETS, "create", _cm("cm-1"))
    everything = CrashOnWrite(after=1, pid=99)
    assert all(everything.matches(SECRETS, verb, _cm("x"))
               for verb in ("create", "update", "delete"))
    patches = CrashOnWrite(after=1, verbs=("patch",), pid=99)
    assert patches.matches(CONFIGMAPS, "update", _cm("x"))  # a PATCH is an update below
    assert not patches.matches(CONFIGMAPS, "delete", _cm("x"))


def test_pert_crash_counter_fires_once_at_the_kth_per_uid() -> None:
    crash = CrashOnWrite(after=3, pid=99)
    counter = Counter()
    assert [counter.count("u1", crash) for _ in range(5)] == [False, False, True, False,
                                                              False]
    assert counter.count("u2", crash) is False  # a recreated Perturbation counts anew
    counter.forget({"u1"})
    assert "u2" not in counter.counts


def test_pert_crash_parse_reads_pid_and_pod_targets_and_status() -> None:
    assert parse_crash({"crashOnWrite": {"after": 2, "target": {"pid": 1234}}}) == \
        CrashOnWrite(after=2, pid=1234)
    pod = parse_crash({"crashOnWrite": {"after": 1, "target": {
        "pod": {"namespace": "shop", "name": "op-0"}}}})
    assert pod is not None and pod.pod == ("shop", "op-0", "")
    assert parse_crash({"crashOnWrite": {"after": 0, "target": {"pid": 5}}}) is None
    obj = _pert(after=1, target={"pid": 5})
    obj["status"] = {"crashes": [{"revision": 3}]}
    rule = parse(obj)
    assert rule is not None and rule.crashed  # a stored crash: never fires again


async def test_pert_crash_kills_the_pid_after_the_third_create_of_that_identity() -> None:
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    store = MemoryStorage()
    cache = WatchCache(store)
    registry = Registry(store, cache, config=RegistryConfig(pod_security=None))
    await registry.ensure_system_objects()
    tasks = [asyncio.create_task(cache.run()),
             asyncio.create_task(registry.perturbations.run())]
    try:
        await cache.ready()
        await registry.create("perturbations", None, _pert(
            after=3, resources=["configmaps"], verbs=["create"],
            target={"pid": victim.pid}))
        async with asyncio.timeout(3):
            while not registry.perturbations:
                await asyncio.sleep(0.01)
        current_user.set(UserInfo("someone-else"))
        for i in range(5):
            await registry.create("configmaps", "default", _cm(f"other-{i}"))
        current_user.set(UserInfo("op"))
        await registry.create("configmaps", "default", _cm("cm-1"))
        await registry.update("configmaps", "default", {**_cm("cm-1"), "data": {"v": "2"}})
        await registry.create("configmaps", "default", _cm("cm-2"))
        await asyncio.sleep(0.2)
        assert victim.poll() is None  # two creates of op's, five of another's: alive
        third = await registry.create("configmaps", "default", _cm("cm-3"))
        # Killed before the write was answered: waited for without yielding to the loop,
        # so no task spawned by the write has run (a writer on a loaded machine must not
        # get its answer, and write again, before it dies).
        assert victim.wait(5) == -9  # SIGKILL
        async with asyncio.timeout(3):
            while not (await registry.get("perturbations", None, "crash")).get("status"):
                await asyncio.sleep(0.02)
        status = (await registry.get("perturbations", None, "crash"))["status"]
        (crash,) = status["crashes"]
        assert crash["revision"] == int(third.object["metadata"]["resourceVersion"])
        assert crash["killed"] is True and crash["time"]
        events = (await registry.list("events", "default"))["items"]
        (event,) = [e for e in events if e["reason"] == "PerturbationCrash"]
        assert event["involvedObject"]["name"] == "crash"
        assert f"process {victim.pid}" in event["message"]
        again = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        try:  # only once: later writes kill nothing (even a process with the same pid)
            for i in range(4, 8):
                await registry.create("configmaps", "default", _cm(f"cm-{i}"))
            await asyncio.sleep(0.2)
            assert again.poll() is None
            assert len((await registry.get("perturbations", None, "crash"))["status"][
                "crashes"]) == 1
        finally:
            again.kill()
            again.wait()
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_pert_crash_of_a_missing_pid_kills_nothing_and_says_why() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    store = MemoryStorage()
    cache = WatchCache(store)
    registry = Registry(store, cache, config=RegistryConfig(pod_security=None))
    await registry.ensure_system_objects()
    tasks = [asyncio.create_task(cache.run()),
             asyncio.create_task(registry.perturbations.run())]
    try:
        await cache.ready()
        await registry.create("perturbations", None, _pert(after=1, target={"pid": gone.pid}))
        async with asyncio.timeout(3):
            while not registry.perturbations:
                await asyncio.sleep(0.01)
        current_user.set(UserInfo("op"))
        await registry.create("configmaps", "default", _cm("cm-1"))
        async with asyncio.timeout(3):
            while not (await registry.get("perturbations", None, "crash")).get("status"):
                await asyncio.sleep(0.02)
        (crash,) = (await registry.get("perturbations", None, "crash"))["status"]["crashes"]
        assert crash["killed"] is False
        assert f"no process {gone.pid} on the apiserver's host" in crash["message"]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
