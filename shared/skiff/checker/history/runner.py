"""The workload of `skiff check history`: concurrent compare-and-set updates, consistent and
`resourceVersion=0` reads and resumed watches of a few ConfigMaps, through every apiserver,
recorded as a `History` for the checker.

Each worker and each watcher talks to one apiserver (worker i to the i-th modulo their
number) over its own connection with no client-side retries, so an operation's outcome is
what that one attempt got: Conflict/NotFound/refusals are failures, a timeout, a 504 or a
lost connection leaves a write's outcome unknown. Watchers resume from the last revision
they delivered after any break and re-list only after 410 Gone (a `RESTART` mark). After
the run the watchers get `drain_seconds` to catch up with a final consistent list.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import secrets
import time
from collections.abc import Callable
from typing import Any

from skiff.api.errors import ApiError, Reason
from skiff.api.types import Obj
from skiff.checker.history.model import (
    CACHED_READ,
    FAIL,
    OK,
    READ,
    UNKNOWN,
    WRITE,
    History,
    Observation,
    Op,
    WatchRecord,
)
from skiff.client import ApiClient, Credentials

__all__ = ["LABEL", "run_workload"]

LABEL = "skiff.io/check-history"
# What a failed attempt certainly did not apply; anything else leaves a write unknown.
_DEFINITE = frozenset({Reason.CONFLICT, Reason.NOT_FOUND, Reason.BAD_REQUEST, Reason.INVALID,
                       Reason.FORBIDDEN, Reason.UNAUTHORIZED, Reason.TOO_MANY_REQUESTS})


def _rv(obj: Obj) -> int:
    return int(obj.get("metadata", {}).get("resourceVersion") or 0)


def _value(obj: Obj) -> str | None:
    data = obj.get("data") or {}
    value = data.get("value") if isinstance(data, dict) else None
    return str(value) if value is not None else None


class _Run:
    def __init__(self, *, namespace: str, keys: list[str], selector: str) -> None:
        self.namespace = namespace
        self.keys = keys
        self.selector = selector
        self.history = History()

    async def get(self, api: ApiClient, process: int, key: str, *, cached: bool) -> Op:
        options: Obj = {"resourceVersion": "0"} if cached else {}
        invoke = time.time()
        kind = CACHED_READ if cached else READ
        try:
            obj = (await api.call("Get", {"resource": "configmaps", "namespace":
                                          self.namespace, "name": key, "options": options},
                                  retry=False))["object"]
        except Exception as err:  # noqa: BLE001 - every failure is recorded, none ends the run
            op = Op(process, kind, key, invoke, time.time(), self._outcome(err),
                    server=api.target, error=str(err)[:200])
        else:
            op = Op(process, kind, key, invoke, time.time(), OK, value=_value(obj),
                    rv=_rv(obj), server=api.target)
        self.history.ops.append(op)
        return op

    async def cas(self, api: ApiClient, process: int, key: str, value: str) -> Op:
        """A consistent read, then an update of what it read (the write's precondition)."""
        read = await self.get(api, process, key, cached=False)
        if read.outcome != OK or read.rv is None:
            return read
        obj: Obj = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": key, "namespace": self.namespace,
                                 "labels": {LABEL: self.selector.split("=", 1)[1]},
                                 "resourceVersion": str(read.rv)},
                    "data": {"value": value}}
        invoke = time.time()
        try:
            resp = await api.call("Update", {"resource": "configmaps", "namespace":
                                             self.namespace, "object": obj, "options": {}},
                                  retry=False)
        except Exception as err:  # noqa: BLE001
            op = Op(process, WRITE, key, invoke, time.time(), self._outcome(err), value=value,
                    prev_rv=read.rv, server=api.target, error=str(err)[:200])
        else:
            op = Op(process, WRITE, key, invoke, time.time(), OK, value=value,
                    rv=_rv(resp["object"]), prev_rv=read.rv, server=api.target)
        self.history.ops.append(op)
        return op

    @staticmethod
    def _outcome(err: BaseException) -> str:
        return FAIL if isinstance(err, ApiError) and err.reason in _DEFINITE else UNKNOWN

    async def worker(self, api: ApiClient, process: int, deadline: float, seed: int) -> None:
        rng = random.Random(seed)
        n = 0
        while time.monotonic() < deadline:
            key = rng.choice(self.keys)
            roll = rng.random()
            if roll < 0.5:
                n += 1
                op = await self.cas(api, process, key, f"p{process}-{n}")
            else:
                op = await self.get(api, process, key, cached=roll >= 0.75)
            if op.outcome == UNKNOWN or (op.outcome == FAIL and op.kind != WRITE):
                await asyncio.sleep(rng.uniform(0.05, 0.2))  # the server may be down

    async def watcher(self, api: ApiClient, wid: int, last: dict[int, int]) -> None:
        rv: int | None = None
        while True:
            if rv is None:
                try:
                    listed = await api.call("List", {
                        "resource": "configmaps", "namespace": self.namespace,
                        "options": {"labelSelector": self.selector}}, retry=False)
                except Exception:  # noqa: BLE001
                    await asyncio.sleep(0.2)
                    continue
                rv = last[wid] = _rv(listed)
                self.history.watch.append(WatchRecord(wid, "RESTART", "", rv, None,
                                                      time.time(), api.target))
            try:
                async for event in api.watch("configmaps", self.namespace,
                                             resource_version=str(rv),
                                             label_selector=self.selector):
                    obj = event.object
                    rv = last[wid] = _rv(obj)
                    self.history.watch.append(WatchRecord(
                        wid, event.type, str(obj.get("metadata", {}).get("name", "")),
                        rv, _value(obj), time.time(), api.target))
            except ApiError as err:
                if err.reason == Reason.GONE:
                    rv = None
            except Exception:  # noqa: BLE001 - resume from the last revision
                pass
            await asyncio.sleep(0.1)


async def _first_ok(clients: list[ApiClient], call: Callable[[ApiClient], Any],
                    *, seconds: float) -> Any:
    """`call` on the first apiserver that answers, retried for `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        for api in clients:
            try:
                return await call(api)
            except ApiError as err:
                if err.reason in _DEFINITE or time.monotonic() > deadline:
                    raise
        await asyncio.sleep(0.2)


def _creator(obj: Obj) -> Callable[[ApiClient], Any]:
    """Create `obj`; AlreadyExists is success (an earlier attempt that timed out made it)."""
    async def create(api: ApiClient) -> None:
        try:
            await api.create(obj)
        except ApiError as err:
            if err.reason != Reason.ALREADY_EXISTS:
                raise
    return create


async def run_workload(*, targets: list[str], duration: float, keys: int = 5,
                       workers: int = 4, namespace: str = "default", timeout: float = 5.0,
                       drain_seconds: float = 3.0,
                       credentials: Credentials | None = None) -> History:
    """Run the workload against every apiserver in `targets` for `duration` seconds."""
    run_id = secrets.token_hex(3)
    names = [f"history-{run_id}-{i}" for i in range(keys)]
    run = _Run(namespace=namespace, keys=names, selector=f"{LABEL}={run_id}")
    stack = contextlib.AsyncExitStack()
    async with stack:
        def client() -> list[ApiClient]:
            return [ApiClient(t, timeout=timeout, retry_seconds=0, credentials=credentials,
                              user_agent="skiff-check-history") for t in targets]
        ops_clients, watch_clients = client(), client()
        for api in (*ops_clients, *watch_clients):
            stack.push_async_callback(api.close)
        for name in names:
            cm: Obj = {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "namespace": namespace,
                                    "labels": {LABEL: run_id}}, "data": {"value": "init"}}
            await _first_ok(ops_clients, _creator(cm), seconds=30)
        last: dict[int, int] = {}
        watchers = [asyncio.ensure_future(run.watcher(api, wid, last))
                    for wid, api in enumerate(watch_clients)]
        try:
            listed_by = time.monotonic() + 10  # so that each watcher sees every write
            while len(last) < len(watchers) and time.monotonic() < listed_by:
                await asyncio.sleep(0.05)
            deadline = time.monotonic() + duration
            await asyncio.gather(*(run.worker(ops_clients[p % len(ops_clients)], p, deadline,
                                              seed=hash((run_id, p)))
                                   for p in range(workers)))
            listed = await _first_ok(ops_clients, lambda api: api.call("List", {
                "resource": "configmaps", "namespace": namespace,
                "options": {"labelSelector": run.selector}}, retry=False), seconds=30)
            run.history.final = [Observation(str(i["metadata"]["name"]), _rv(i), _value(i))
                                 for i in listed["items"]]
            head = max((o.rv for o in run.history.final), default=0)
            until = time.monotonic() + drain_seconds
            while time.monotonic() < until and (
                    len(last) < len(watchers) or min(last.values()) < head):
                await asyncio.sleep(0.1)
        finally:
            for task in watchers:
                task.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
        for name in names:  # best effort: the run leaves nothing behind
            with contextlib.suppress(Exception):
                await ops_clients[0].delete("configmaps", name, namespace)
    return run.history
