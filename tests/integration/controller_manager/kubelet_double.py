"""The test plays the kubelet: registers a Node, renews its Lease, reports pod status, and
finishes termination with a grace-0 delete, so node lifecycle can be tested without a real
kubelet process (and a cut-off kubelet is simply one that stops renewing)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.clock import rfc3339, rfc3339_micro
from tests.integration.waiting import events as events
from tests.integration.waiting import get_or_none as get_or_none
from tests.integration.waiting import recorded as recorded
from tests.integration.waiting import wait_for as wait_for


def ready_condition(status: str = "True") -> Obj:
    now = rfc3339(time.time())
    return {"type": "Ready", "status": status, "reason": "KubeletReady",
            "message": "kubelet is posting ready status", "lastHeartbeatTime": now,
            "lastTransitionTime": now}


class KubeletDouble:
    """`async with KubeletDouble(api, "n1") as node:` registers and renews until `cut()`."""

    def __init__(self, api: ApiClient, name: str, *, renew_interval: float = 0.3) -> None:
        self.api = api
        self.name = name
        self.renew_interval = renew_interval
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> KubeletDouble:
        await self.api.create({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": self.name, "labels": {"kubernetes.io/hostname": self.name}},
            "status": {"conditions": [ready_condition()],
                       "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
        await self.api.create({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": self.name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": self.name, "leaseDurationSeconds": 40,
                     "renewTime": rfc3339_micro(time.time())}})
        self.resume()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.cut()
        with contextlib.suppress(ApiError):
            await self.api.delete("nodes", self.name)

    async def renew(self) -> None:
        lease = await self.api.get("leases", self.name, "kube-node-lease")
        lease["spec"]["renewTime"] = rfc3339_micro(time.time())
        await self.api.update(lease)

    async def _renew_forever(self) -> None:
        while True:
            with contextlib.suppress(ApiError):
                await self.renew()
            await asyncio.sleep(self.renew_interval)

    def resume(self) -> None:
        """The kubelet is (back) on the network: renew the Lease periodically."""
        if self._task is None:
            self._task = asyncio.create_task(self._renew_forever(),
                                             name=f"kubelet-double-{self.name}")

    async def cut(self) -> None:
        """The kubelet is cut off (or SIGSTOPped): no more renewals."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _write_status(self, resource: str, name: str, namespace: str | None,
                            mutate: Callable[[Obj], None]) -> Obj:
        """Read, change and write a status, re-reading on Conflict as a kubelet does:
        controllers (node lifecycle, taint eviction) write the same objects concurrently."""
        for _ in range(10):
            obj = await self.api.get(resource, name, namespace)
            mutate(obj)
            try:
                return await self.api.update_status(obj)
            except ApiError as err:
                if err.reason != Reason.CONFLICT:
                    raise
        raise AssertionError(f"status of {resource}/{name}: conflicts kept coming")

    async def report_ready(self) -> None:
        def ready(node: Obj) -> None:
            node["status"]["conditions"] = [
                c for c in node["status"].get("conditions", [])
                if c.get("type") != "Ready"] + [ready_condition()]

        await self._write_status("nodes", self.name, None, ready)

    async def run_pod(self, namespace: str, name: str, *, bind: bool = True) -> Obj:
        """Bind the pod here (if it is not yet) and report it Running and Ready."""
        pod = await self.api.get("pods", name, namespace)
        if bind and not pod["spec"].get("nodeName"):
            await self.api.bind(namespace, name, self.name, uid=pod["metadata"]["uid"])
        now = rfc3339(time.time())

        def running(p: Obj) -> None:
            p["status"].update(phase="Running", conditions=[
                {"type": "Ready", "status": "True", "lastTransitionTime": now},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": now}])

        return await self._write_status("pods", name, namespace, running)

    async def finish_termination(self, namespace: str, name: str) -> None:
        """GT10: containers exited → terminal phase, then delete with grace 0."""
        def failed(p: Obj) -> None:
            p["status"]["phase"] = "Failed"

        pod = await self._write_status("pods", name, namespace, failed)
        await self.api.delete("pods", name, namespace, grace_period_seconds=0,
                              uid=pod["metadata"]["uid"])

