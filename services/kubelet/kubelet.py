"""One node's kubelet: routes pod events to pod workers and re-adopts what survived.

The informer feeds `on_pod` / `on_pod_deleted`; each pod (by UID) gets one `PodWorker`
task. At start-up, pod directories whose pod no longer exists in the API (force deleted
while the kubelet was down) get a worker that only kills their processes (GT8, PS1).
A worker that fails is started again after a back-off, as Kubernetes' pod workers requeue
a pod whose sync failed (`backOffPeriod`, 10 s, jittered by up to half): never left dead,
with the pod's status frozen, and never restarted in a tight loop by every resync.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from pathlib import Path

from skiff.api.errors import ApiError, Reason
from skiff.api.types import Obj
from skiff.kubelet.admission import Admission, Rejection
from skiff.kubelet.pod_environment import PodEnvironment
from skiff.kubelet.pod_worker import PodWorker
from skiff.kubelet.poddir import PodDir
from skiff.kubelet.records import load_state
from skiff.kubelet.runtime import ContainerConfig, ContainerHandle
from skiff.kubelet.sandbox import Sandbox
from skiff.tasks import cancel_tasks

__all__ = ["Kubelet"]

log = logging.getLogger(__name__)


WORKER_BACKOFF_JITTER = 0.5  # Kubernetes' workerBackOffPeriodJitterFactor


@dataclass
class _FailedWorker:
    """A pod whose worker failed, until it is started again: the newest pod seen."""

    pod: Obj
    removed: bool
    orphan: bool
    timer: asyncio.TimerHandle | None = None


class Kubelet:
    def __init__(self, *, env: PodEnvironment, worker_backoff: float = 10.0) -> None:
        self.env = env
        self.node_name = env.node_name
        self.workers: dict[str, PodWorker] = {}
        self._by_name: dict[tuple[str, str], str] = {}
        self.admission: Admission | None = None  # None: every pod is admitted
        self.worker_backoff = worker_backoff
        self._failed: dict[str, _FailedWorker] = {}  # by UID, waiting out the back-off

    # -- informer handlers -----------------------------------------------------------------

    def on_pod(self, pod: Obj) -> None:
        if pod.get("spec", {}).get("nodeName") != self.node_name:
            return
        uid = pod["metadata"]["uid"]
        worker = self.workers.get(uid)
        if worker is not None:
            worker.update(pod)
            return
        failed = self._failed.get(uid)
        if failed is not None:  # its worker starts again when the back-off is over
            failed.pod = pod
            return
        self._start_worker(pod, rejection=self._admit(pod))

    def on_pod_deleted(self, pod: Obj) -> None:
        uid = pod.get("metadata", {}).get("uid", "")
        worker = self.workers.get(uid)
        if worker is not None:
            worker.removed()
        if uid in self._failed:
            self._failed[uid].removed = True

    def on_volume_attachment(self, _attachment: Obj) -> None:
        """A VolumeAttachment was added, changed or removed: pods with claims re-check."""
        for worker in self.workers.values():
            if worker.uses_claims:
                worker.volumes_changed()

    def _admit(self, pod: Obj) -> Rejection | None:
        """Admission (skiff.kubelet.admission) for a pod this kubelet has not started yet:
        one that is past Pending, being deleted, or has a pod directory (it ran before this
        kubelet restarted) was admitted already."""
        if self.admission is None or pod.get("metadata", {}).get("deletionTimestamp"):
            return None
        if (pod.get("status") or {}).get("phase", "Pending") != "Pending":
            return None
        if PodDir(self.env.root_dir, pod["metadata"]["uid"]).path.exists():
            return None
        admitted = [w.pod for w in self.workers.values() if w.holds_resources]
        rejection = self.admission.admit(pod, admitted)
        if rejection is not None:
            log.warning("pod rejected by admission", extra={
                "pod": f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}",
                "reason": rejection.reason, "detail": rejection.message})
        return rejection

    def _start_worker(self, pod: Obj, *, rejection: Rejection | None = None) -> PodWorker:
        worker = PodWorker(env=self.env, pod=pod, rejection=rejection)
        uid = worker.uid
        self.workers[uid] = worker
        self._by_name[(worker.namespace, worker.name)] = uid
        worker.task = asyncio.create_task(worker.run(), name=f"pod-worker:{uid}")

        def done(task: asyncio.Task[None]) -> None:
            if self.workers.get(uid) is worker:
                del self.workers[uid]
            if self._by_name.get((worker.namespace, worker.name)) == uid:
                del self._by_name[(worker.namespace, worker.name)]
            if not task.cancelled() and task.exception() is not None:
                delay = self.worker_backoff * (1 + WORKER_BACKOFF_JITTER * random.random())
                log.error("pod worker failed; it starts again after a back-off",
                          exc_info=task.exception(),
                          extra={"pod": f"{worker.namespace}/{worker.name}", "uid": uid,
                                 "backoffSeconds": round(delay, 3)})
                self._restart_later(worker, delay)

        worker.task.add_done_callback(done)
        return worker

    def _restart_later(self, worker: PodWorker, delay: float) -> None:
        """Start the failed `worker`'s pod again in `delay` seconds, with the newest pod
        the informer delivered meanwhile (a new worker re-adopts what still runs)."""
        failed = _FailedWorker(pod=worker.pod, removed=worker.removed_from_api,
                               orphan=worker.orphan)
        self._failed[worker.uid] = failed

        def restart() -> None:
            if self._failed.get(worker.uid) is not failed:
                return
            del self._failed[worker.uid]
            if worker.uid in self.workers:
                return
            again = self._start_worker(failed.pod)
            if failed.removed:
                again.removed(orphan=failed.orphan)

        failed.timer = asyncio.get_running_loop().call_later(delay, restart)

    # -- start-up --------------------------------------------------------------------------

    def kill_orphans(self) -> int:
        """Pod directories with live state but no pod in the API: kill their processes."""
        pods_dir = self.env.root_dir / "pods"
        count = 0
        for entry in sorted(pods_dir.iterdir()) if pods_dir.is_dir() else []:
            if entry.name in self.workers:
                continue
            state = load_state(entry)
            if state is None or state.get("uid") != entry.name:
                continue
            pod: Obj = {"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": state.get("name") or entry.name,
                                     "namespace": state.get("namespace") or "default",
                                     "uid": entry.name, "resourceVersion": "0"},
                        "spec": {"nodeName": self.node_name,
                                 "containers": [{"name": n} for n in state.get("containers",
                                                                                  {})]}}
            log.warning("found the directory of a pod that no longer exists; killing its "
                        "processes", extra={"pod": f"{pod['metadata']['namespace']}/"
                                                   f"{pod['metadata']['name']}",
                                            "uid": entry.name})
            worker = self._start_worker(pod)
            worker.removed(orphan=True)
            count += 1
        return count

    # -- queries ---------------------------------------------------------------------------

    def log_path(self, namespace: str, name: str, container: str | None,
                 previous: bool) -> Path:
        uid = self._by_name.get((namespace, name))
        worker = self.workers.get(uid or "")
        if worker is None:
            raise ApiError(Reason.NOT_FOUND, f'pod "{name}" not found on node '
                                             f'{self.node_name}')
        names = [r.name for r in worker.records]
        if container is None:
            apps = [r.name for r in worker.records if r.kind == "app"]
            if len(apps) != 1:
                raise ApiError.bad_request(
                    f"a container name must be specified for pod {name}, choose one of: "
                    f"[{' '.join(names)}]")
            container = apps[0]
        record = next((r for r in worker.records if r.name == container), None)
        if record is None:
            raise ApiError(Reason.NOT_FOUND, f'container "{container}" is not in pod '
                                             f'"{name}"; choose one of: [{" ".join(names)}]')
        attempt = record.restart_count - (1 if previous else 0)
        if attempt < 0 or (previous and record.attempts < 2):
            raise ApiError.bad_request(f'previous terminated container "{container}" in pod '
                                       f'"{name}" not found')
        return worker.dir.log_path(container, attempt)

    def exec_config(self, namespace: str, name: str, container: str | None
                    ) -> tuple[ContainerConfig, int | None]:
        """SB4: the start config of a running container, for pods/exec (its env, working
        dir and sandbox); Kubernetes' errors for a missing or not running container."""
        uid = self._by_name.get((namespace, name))
        worker = self.workers.get(uid or "")
        if worker is None:
            raise ApiError(Reason.NOT_FOUND, f'pod "{name}" not found on node '
                                             f'{self.node_name}')
        names = [r.name for r in worker.records]
        if container is None:
            apps = [r.name for r in worker.records if r.kind == "app"]
            if len(apps) != 1:
                raise ApiError.bad_request(
                    f"a container name must be specified for pod {name}, choose one of: "
                    f"[{' '.join(names)}]")
            container = apps[0]
        record = next((r for r in worker.records if r.name == container), None)
        if record is None:
            raise ApiError.bad_request(f"container {container} is not valid for pod {name}")
        if not record.running:
            raise ApiError.bad_request(f'container not found ("{container}")')
        return worker.exec_config(record), record.handle.pid if record.handle else None

    def attach_target(self, namespace: str, name: str, container: str | None
                      ) -> tuple[ContainerConfig, ContainerHandle]:
        """SB4: a running container for pods/attach (exec's errors when there is none)."""
        config, _ = self.exec_config(namespace, name, container)
        worker = self.workers[self._by_name[(namespace, name)]]
        record = next(r for r in worker.records if r.name == config.name)
        if record.handle is None:
            raise ApiError.bad_request(f'container not found ("{config.name}")')
        return config, record.handle

    def pod_sandbox(self, namespace: str, name: str) -> Sandbox | None:
        """SB4: where pods/portforward dials the pod's ports (None: the node's network)."""
        worker = self.workers.get(self._by_name.get((namespace, name)) or "")
        if worker is None:
            raise ApiError(Reason.NOT_FOUND, f'pod "{name}" not found on node '
                                             f'{self.node_name}')
        return worker.sandbox

    async def shutdown(self) -> None:
        """Stop the workers, leaving the pods' processes running (a kubelet restart must not
        kill pods; the next kubelet re-adopts them)."""
        for failed in self._failed.values():
            if failed.timer is not None:
                failed.timer.cancel()
        self._failed.clear()
        tasks = [w.task for w in self.workers.values() if w.task is not None]
        await cancel_tasks(*tasks)
