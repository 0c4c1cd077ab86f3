"""Helpers for the control-plane failure scenarios (tests/integration/ha/
test_scenarios.py and bench/ha_recovery.py): watchers that record every event they get and
resume from their last resourceVersion, etcd's own revision log to compare them with, a
writer that records which writes were acknowledged, and etcd member status read from the
member itself."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import time
import urllib.request
from dataclasses import dataclass, field

from skiff.api import ApiError, Reason
from skiff.api.kinds import REGISTRY_PREFIX
from skiff.api.types import Obj
from skiff.apiserver.storage.etcd import EtcdStorage
from skiff.client import ApiClient
from skiff.cluster.processes import EtcdTlsFiles
from skiff.etcdtls import EtcdTls

Seen = tuple[str, str, int]  # (event type, object name, resourceVersion)
UNAVAILABLE = (Reason.SERVICE_UNAVAILABLE, Reason.TIMEOUT, Reason.INTERNAL_ERROR)


def lease(name: str, namespace: str) -> Obj:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"holderIdentity": name}}


def gated_pod(name: str, namespace: str) -> Obj:
    """A pod that stays Pending without work for the scheduler (a scheduling gate)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"schedulingGates": [{"name": "skiff.io/ha-scenario"}],
                     "containers": [{"name": "main", "image": "busybox",
                                     "command": ["sleep", "3600"]}]}}


def clean_error(err: ApiError) -> bool:
    """A failure a user can read: unavailable/timeout, naming no Python internals."""
    return (err.reason in UNAVAILABLE and "Traceback" not in err.message
            and "Error(" not in err.message)


@dataclass
class Recorder:
    """One watcher: every event of `resource` in `namespace` after `since`, in order,
    resumed from the last resourceVersion after any failure (as an informer does)."""

    client: ApiClient
    resource: str
    namespace: str
    since: int
    seen: list[Seen] = field(default_factory=list)
    failures: int = 0
    last: int = 0

    async def run(self) -> None:
        self.last = self.since
        while True:
            try:
                async for ev in self.client.watch(self.resource, self.namespace,
                                                  resource_version=str(self.last)):
                    rv = int(ev.object["metadata"]["resourceVersion"])
                    if ev.type != "BOOKMARK":
                        self.seen.append((ev.type, str(ev.object["metadata"]["name"]), rv))
                    self.last = max(self.last, rv)
            except ApiError as err:
                if err.reason == Reason.GONE:
                    raise  # a relist would hide lost events: fail the scenario
                self.failures += 1
            await asyncio.sleep(0.2)


class Watchers:
    """`count` recorders over `clients` (round robin), run as tasks until `stop()`."""

    def __init__(self, clients: list[ApiClient], resource: str, namespace: str, since: int,
                 count: int) -> None:
        self.recorders = [Recorder(clients[i % len(clients)], resource, namespace, since)
                          for i in range(count)]
        self.tasks = [asyncio.create_task(r.run()) for r in self.recorders]

    async def reached(self, revision: int) -> bool:
        for task in self.tasks:
            if task.done():
                task.result()  # raises what ended it
        return all(r.last >= revision for r in self.recorders)

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def etcd_log(endpoint: str, resource: str, namespace: str, since: int, upto: int, *,
                   tls: EtcdTlsFiles | None = None) -> list[Seen]:
    """What etcd committed under the resource's namespace prefix in (since, upto], read
    from etcd's own revision log (a watch from since+1), as watch events would name it."""
    storage = EtcdStorage(endpoint, request_timeout=5, retry_seconds=10, tls=None if tls is None
                          else EtcdTls(tls.ca, tls.client_cert, tls.client_key))
    await storage.connect()
    out: list[Seen] = []
    prefix = f"{REGISTRY_PREFIX}{resource}/{namespace}/"
    try:
        async with asyncio.timeout(30):
            async for raw in storage.watch(prefix, start_revision=since + 1):
                name = raw.key.rsplit("/", 1)[1]
                kind = ("DELETED" if raw.type == "DELETE" else
                        "ADDED" if raw.created or raw.prev is None else "MODIFIED")
                out.append((kind, name, raw.revision))
                if raw.revision >= upto:
                    break
    finally:
        await storage.close()
    return out


def member_status(endpoint: str, *, tls: EtcdTlsFiles | None = None) -> Obj:
    """etcd's Maintenance/Status of that one member (its own view, no quorum needed); with
    `tls` as the apiservers (etcd trusts only their client certificate)."""
    req = urllib.request.Request(f"{endpoint}/v3/maintenance/status", data=b"{}",
                                 method="POST", headers={"Content-Type": "application/json"})
    context = None
    if tls is not None:
        context = ssl.create_default_context(cafile=str(tls.ca))
        context.load_cert_chain(str(tls.client_cert), str(tls.client_key))
    with urllib.request.urlopen(req, timeout=3, context=context) as resp:
        status: Obj = json.loads(resp.read())
    return status


def member_revision(endpoint: str, *, tls: EtcdTlsFiles | None = None) -> int:
    try:
        return int(member_status(endpoint, tls=tls)["header"]["revision"])
    except (OSError, KeyError, ValueError):
        return -1


def member_leader(endpoint: str, *, tls: EtcdTlsFiles | None = None) -> str:
    """The leader's member id as this member sees it ("" when it has none/answers not)."""
    try:
        status = member_status(endpoint, tls=tls)
    except (OSError, ValueError):
        return ""
    return str(status.get("leader") or "")


def member_is_leader(endpoint: str, *, tls: EtcdTlsFiles | None = None) -> bool:
    try:
        status = member_status(endpoint, tls=tls)
    except (OSError, ValueError):
        return False
    return bool(status.get("leader")) and status.get("leader") == \
        status.get("header", {}).get("member_id")


@dataclass
class Writes:
    """Outcome of every write a scenario made: acknowledged names (with their rv), clean
    failures, and anything else (a defect)."""

    acked: dict[str, int] = field(default_factory=dict)
    clean_failures: list[str] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)
    first_ack_after: float | None = None  # monotonic time of the first ack after `mark`
    mark: float | None = None

    async def create(self, client: ApiClient, obj: Obj) -> None:
        name = str(obj["metadata"]["name"])
        try:
            created = await client.create(obj)
        except ApiError as err:
            if err.reason == Reason.ALREADY_EXISTS:
                return  # an earlier attempt of a retried call made it: not acknowledged
            (self.clean_failures if clean_error(err) else self.bad).append(
                f"{name}: {err.reason}: {err.message}")
            return
        self.acked[name] = int(created["metadata"]["resourceVersion"])
        now = time.monotonic()
        if self.mark is not None and self.first_ack_after is None and now >= self.mark:
            self.first_ack_after = now


async def write_until(stop: asyncio.Event, writes: Writes, client: ApiClient, prefix: str,
                      namespace: str, *, interval: float = 0.1) -> None:
    """Create leases `prefix-0`, `prefix-1`, ... one after another until `stop`."""
    i = 0
    while not stop.is_set():
        await writes.create(client, lease(f"{prefix}-{i}", namespace))
        i += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)
