"""The controller under test when explore did not start it (`skiff explore run --identity
USER --controller-pods SELECTOR`): one already running in the cluster's pods, deployed by
the workload's setup. Explore names it by its identity (the subject of every perturbation)
and finds its pods by a label selector in the workload's namespace.

What the process form (controller.py) does with a pid, this does with pods: a crash test's
target is the first Running pod (the apiserver has that pod's kubelet SIGKILL its
container, and the kubelet restarts it per the pod's restartPolicy), and the controller's
own exits are its containers' restarts that were not our kill — a `lastState.terminated`
whose exit code is not 137 (SIGKILL), or an OOM kill — reported as `Exit`s, as a process's
exits are. The pods' logs (and their status) end up in the run's controller.log.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from skiff.api import ApiError
from skiff.api.types import Obj, ObjView
from skiff.client import ApiClient
from skiff.client.credentials import Credentials
from skiff.client.logs import fetch_logs, kubelet_target
from skiff.explore.cluster import ExploreError
from skiff.explore.controller import Exit

__all__ = ["KILLED_EXIT_CODE", "PodController", "crash_target", "pod_exits"]

KILLED_EXIT_CODE = 137  # 128 + SIGKILL: a container the kubelet killed
SIGKILL = 9
POLL_SECONDS = 0.5
LOG_LINES = 200

# (pod uid, container name, its restartCount when the termination was seen)
Seen = set[tuple[str, str, int]]


def _started(pod: ObjView) -> str:
    return str(pod.get("metadata", {}).get("creationTimestamp") or "")


def crash_target(pods: Iterable[Obj]) -> Obj | None:
    """`{"pod": {"namespace", "name"}}` of the first Running pod (oldest first, then by
    name) that is not being deleted; None when there is none."""
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"
               and not (p.get("metadata") or {}).get("deletionTimestamp")]
    if not running:
        return None
    first = min(running, key=lambda p: (_started(p), str(p["metadata"]["name"])))
    meta = first["metadata"]
    return {"pod": {"namespace": str(meta.get("namespace") or ""), "name": str(meta["name"])}}


def _seconds(stamp: object) -> float:
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()


def pod_exits(pods: Iterable[Obj], seen: Seen) -> list[tuple[Obj, str, int]]:
    """Each container termination not seen before (`seen` is updated): the pod, the
    container's name and its restartCount. A restart is counted once, by the restartCount
    its lastState goes with."""
    found = []
    for pod in pods:
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            count = int(status.get("restartCount") or 0)
            terminated = (status.get("lastState") or {}).get("terminated")
            key = (uid, str(status.get("name")), count)
            if count < 1 or not terminated or key in seen:
                continue
            seen.add(key)
            found.append((pod, str(status.get("name")), count))
    return found


def exit_of(pod: Obj, container: str, *, tail: str = "") -> tuple[float, int, str]:
    """(time, code, tail) of `container`'s last termination as an `Exit` takes them: code
    -9 for our kill (exit code 137, not an OOM kill), the exit code otherwise."""
    where = f"pod {pod['metadata'].get('namespace')}/{pod['metadata']['name']} " \
            f"container {container}"
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") != container:
            continue
        terminated = (status.get("lastState") or {}).get("terminated") or {}
        code = int(terminated.get("exitCode") or 0)
        reason = str(terminated.get("reason") or "")
        if code == KILLED_EXIT_CODE and reason != "OOMKilled":
            return _seconds(terminated.get("finishedAt")), -SIGKILL, ""
        said = " ".join(x for x in (reason, str(terminated.get("message") or "")) if x)
        text = f"({where}{': ' + said if said else ''})"
        return _seconds(terminated.get("finishedAt")), code, \
            "\n".join(x for x in (text, tail) if x)
    return time.time(), 0, f"({where})"


@dataclass
class PodController:
    """The controller as pods matching `selector` in `namespace` (no selector: nothing to
    kill or watch). `start` begins watching its containers' restarts, `stop` ends that and
    writes their logs to `log`; `exits` then holds each restart as an Exit."""

    api: ApiClient
    namespace: str
    selector: str
    log: Path
    credentials: Credentials | None = None  # the admin's, for the kubelets' logs
    exits: list[Exit] = field(default_factory=list)
    pid: int = 0  # no process of ours
    _seen: Seen = field(default_factory=set)
    _task: asyncio.Task[None] | None = None

    async def pods(self) -> list[Obj]:
        if not self.selector:
            return []
        listed = await self.api.list("pods", self.namespace, label_selector=self.selector)
        return list(listed.get("items") or [])

    async def target(self) -> Obj:
        """The crash target: the first Running pod of the controller."""
        found = crash_target(await self.pods())
        if found is None:
            raise ExploreError(f"no Running pod matches --controller-pods {self.selector} in "
                               f"{self.namespace}: nothing for a crash test to kill")
        return found

    async def start(self) -> None:
        if self.selector:
            self._task = asyncio.get_running_loop().create_task(self._watch(),
                                                                name="explore-pods")

    async def _poll(self) -> None:
        for pod, container, _ in pod_exits(await self.pods(), self._seen):
            _, code, _ = exit_of(pod, container)
            tail = "" if code == -SIGKILL else await self._log_tail(pod, container, 12,
                                                                     previous=True)
            when, code, text = exit_of(pod, container, tail=tail)
            self.exits.append(Exit(when, code, text))

    async def _watch(self) -> None:
        while True:
            with contextlib.suppress(ApiError, OSError):
                await self._poll()
            await asyncio.sleep(POLL_SECONDS)

    async def _log_tail(self, pod: Obj, container: str, lines: int, *,
                        previous: bool = False) -> str:
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if not node:
            return ""
        try:
            target = await kubelet_target(self.api, node)
            return await fetch_logs(target, self.namespace, str(pod["metadata"]["name"]),
                                    container, lines, previous,
                                    credentials=self.credentials)
        except (ApiError, OSError) as err:
            return f"(its log could not be read: {err})"

    async def stop(self) -> None:
        """Stop watching (one last look for restarts) and write the pods' logs."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if not self.selector:
            return
        parts: list[str] = []
        with contextlib.suppress(ApiError, OSError):
            await self._poll()
            for pod in await self.pods():
                parts += await self._describe(pod)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.log.write_text("\n".join(parts) + "\n")

    async def _describe(self, pod: Obj) -> list[str]:
        name = pod["metadata"]["name"]
        phase = (pod.get("status") or {}).get("phase")
        parts = [f"--- pod {self.namespace}/{name} ({phase})"]
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            container = str(status.get("name"))
            parts.append(f"--- container {container}: restartCount "
                         f"{status.get('restartCount', 0)}")
            if status.get("restartCount"):
                parts.append(await self._log_tail(pod, container, LOG_LINES, previous=True))
                parts.append(f"--- container {container} now:")
            parts.append(await self._log_tail(pod, container, LOG_LINES))
        return parts

