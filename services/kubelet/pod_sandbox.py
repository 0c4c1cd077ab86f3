"""A pod's sandbox step, as kuberuntime's createPodSandbox and killPod use it (SB1, SB4).

Before any container of the pod starts, the runtime makes the pod's sandbox
(`ContainerRuntime.run_pod_sandbox`, CRI's RunPodSandbox); while it cannot yet (no podCIDR
so far, a failing network set-up) the pod's containers wait in ContainerCreating with one
FailedCreatePodSandBox event per distinct reason, and the step is retried. A pod the
runtime leaves sharing the node is told so (SandboxNotIsolated), never silently. Memory-
backed emptyDirs are mounted once the sandbox exists; once the pod's last process is gone
the pod directory's mounts are undone and the runtime stops and removes the sandbox (with
the pod's cgroups).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from skiff.api.types import Obj
from skiff.client import WARNING
from skiff.kubelet.pod_environment import PodEnvironment
from skiff.kubelet.pod_events import EventSink
from skiff.kubelet.poddir import PodDir, unmount_volumes
from skiff.kubelet.records import ContainerRecord
from skiff.kubelet.runtime import PodSandboxConfig
from skiff.kubelet.sandbox import Sandbox, SandboxError

__all__ = ["PodSandboxStep"]

log = logging.getLogger(__name__)


class PodSandboxStep:
    """`pod()`: the pod as its worker knows it now; `changed()`: the status is stale."""

    def __init__(self, *, env: PodEnvironment, pod_dir: PodDir, pod: Callable[[], Obj],
                 event: EventSink, changed: Callable[[], None]) -> None:
        self.env = env
        self.dir = pod_dir
        self._pod = pod
        self._event = event
        self._changed = changed
        self.sandbox: Sandbox | None = None  # None: not made yet, or the pod shares the node
        self._done = False
        self._message: str | None = None  # the last FailedCreatePodSandBox said
        self._not_isolated = False

    async def ensure(self, records: Sequence[ContainerRecord]) -> bool:
        """True once the pod may start containers: its sandbox exists, or it shares the
        node; False (containers waiting, retry later) while it cannot be made yet."""
        if self._done:
            return True
        pod = self._pod()
        try:
            made = await self.env.runtime.run_pod_sandbox(PodSandboxConfig(
                pod=pod, holders=tuple(r.handle.pid for r in records
                                       if r.handle is not None)))
        except SandboxError as err:
            message = str(err)
            for r in records:
                if not r.has_run():
                    r.state = {"waiting": {"reason": "ContainerCreating", "message": message}}
            if message != self._message:
                self._message = message
                self._event(WARNING, "FailedCreatePodSandBox", message)
                self._changed()
            return False
        self._done = True
        if made.sandbox is None:
            if made.not_isolated:  # never a silent difference: say what is shared
                self._not_isolated = True
                self._event(WARNING, "SandboxNotIsolated", made.not_isolated)
            return True
        self.sandbox = made.sandbox
        try:
            self.dir.mount_memory_volumes(pod)
        except OSError as err:
            meta = pod["metadata"]
            log.warning("cannot mount a memory-backed emptyDir", extra={
                "pod": f"{meta.get('namespace', 'default')}/{meta['name']}",
                "error": str(err)})
            self._event(WARNING, "FailedMount", f"emptyDir medium Memory: {err}")
        self._message = None
        self._changed()
        return True

    async def remove(self, uid: str) -> None:
        """SB4: the sandbox goes once the pod's last process is gone (also one an earlier
        kubelet made): the volume mounts made for it, then the runtime's StopPodSandbox
        (its network) and RemovePodSandbox (what is left: the pod's cgroups, AU8)."""
        if not self._not_isolated and self.env.mount_volumes:
            unmount_volumes(self.dir.path)
        try:
            await self.env.runtime.stop_pod_sandbox(uid)
        except OSError as err:
            log.warning("could not remove the pod's sandbox", extra={
                "uid": uid, "error": str(err)})
        await self.env.runtime.remove_pod_sandbox(uid)
