"""An apiserver cut off from every etcd member closes its watches and
reports gRPC NOT_SERVING within its currency bound, under a client load, and serves again
after the heal (README, "A replicated control plane": `skiff chaos partition apiserver-1
--from etcd`).

One real `skiff up --ha --netns` cluster (3 etcd members, 2 apiservers, schedulers and
controller-managers on their own network hosts; no nodes), real nftables cuts. While cut,
apiserver-1 gets a light load through its own client (creates and lists, which time out
and move its etcd client from member to member) and three watchers on another client.
Before the fix the failover closed the etcd client under the watch cache's currency check;
grpc.aio raised CancelledError in it, which the check did not catch, and the check ended
for good: no watch was ever closed and health stayed SERVING for the whole cut, while the
watchers got bookmarks at a frozen resourceVersion.

The currency bound is --watch-quorum-check-interval (compressed to 1 s here) plus
--etcd-readycheck-timeout (kube-apiserver's default, 2 s); the assertions allow 3 s more
for a loaded two-core machine (CI, four workers on two cores, once saw a watch closed 5.6 s
into a cut). Without the fix nothing closes for the whole cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import time
import uuid
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.client.credentials import Credentials
from skiff.cluster.netns.cluster import NetnsCluster
from skiff.cluster.topology import HA
from tests.integration.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]

CHECK_INTERVAL = 1.0  # --watch-quorum-check-interval
READYCHECK_TIMEOUT = 2.0  # --etcd-readycheck-timeout (kube-apiserver's default)
BOUND = CHECK_INTERVAL + READYCHECK_TIMEOUT
SLACK = 3.0  # scheduling on a busy two-core machine
CUTS = 2
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.fixture(scope="module")
def ha(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NetnsCluster]:
    missing = [t for t in ("ip", "nft", "etcd") if shutil.which(t) is None]
    if os.geteuid() != 0 or missing:  # never skip: say why the machine cannot run it
        pytest.fail(f"defect 13 needs real network cuts (root, ip, nft, etcd): "
                    f"euid {os.geteuid()}, missing {missing}", pytrace=False)
    cluster = NetnsCluster(tmp_path_factory.mktemp("d13") / "cluster", topology=HA, nodes=0,
                           fence_agent=False, extra_args={"apiserver": [
                               "--watch-quorum-check-interval", f"{CHECK_INTERVAL:g}s",
                               "--watch-bookmark-interval", "1s"]})
    try:
        cluster.start(echo=lambda _line: None)
        yield cluster
    finally:
        cluster.stop()


async def _health(target: str, credentials: Credentials) -> int:
    channel = (grpc.aio.secure_channel(target, credentials.grpc_credentials())
               if credentials.secure else grpc.aio.insecure_channel(target))
    async with channel:
        try:
            resp = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=1.0)
        except grpc.aio.AioRpcError:
            return -1
    return int(resp.status)


def _config_map(name: str, ns: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns}, "data": {"k": "v"}}


class Watcher:
    """One watch on apiserver-1, resumed after each close, recording when and why the
    server closed it and the bookmarks it sent."""

    def __init__(self, client: ApiClient, ns: str) -> None:
        self.client, self.ns = client, ns
        self.since = 0.0  # the cut's start (monotonic); 0 before any cut
        self.closed: list[tuple[float, ApiError]] = []
        self.bookmarks: list[tuple[float, str]] = []
        self.last = ""
        self.task = asyncio.create_task(self.run())

    async def run(self) -> None:
        while True:
            try:
                async for ev in self.client.watch("configmaps", self.ns,
                                                  resource_version=self.last):
                    self.last = str(ev.object["metadata"]["resourceVersion"])
                    if ev.type == "BOOKMARK" and self.since:
                        self.bookmarks.append((time.monotonic() - self.since, self.last))
            except ApiError as err:
                if self.since:
                    self.closed.append((time.monotonic() - self.since, err))
            await asyncio.sleep(0.1)

    def reset(self, since: float) -> None:
        self.since, self.closed, self.bookmarks = since, [], []

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def _load(client: ApiClient, ns: str, stop: asyncio.Event) -> None:
    """A light client load on apiserver-1: creates and lists; failures are expected."""
    n = 0
    while not stop.is_set():
        n += 1
        with contextlib.suppress(ApiError):
            await client.create(_config_map(f"load-{n}", ns))
        with contextlib.suppress(ApiError):
            await client.list("configmaps", ns)
        await asyncio.sleep(0.05)


async def test_defect13_a_cut_apiserver_closes_watches_and_reports_not_serving_under_load(
        ha: NetnsCluster) -> None:
    api1 = ha.component("apiserver-1").address
    creds = ha.admin
    async with ApiClient(ha.api, retry_seconds=30, timeout=10, credentials=creds) as api, \
            ApiClient(api1, retry_seconds=1, timeout=3, credentials=creds) as loaded, \
            ApiClient(api1, retry_seconds=1, timeout=3, credentials=creds) as watching:
        ns = f"d13-{uuid.uuid4().hex[:6]}"
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        watchers = [Watcher(watching, ns) for _ in range(3)]
        try:
            for cut in range(CUTS):
                stop = asyncio.Event()
                load = asyncio.create_task(_load(loaded, ns, stop))
                await wait_for(lambda: _health_is(api1, creds, SERVING), timeout=30,
                               what=f"apiserver-1 SERVING before cut {cut + 1}")
                await asyncio.sleep(2)  # the load and the watches under way
                ha.partition("apiserver-1", "etcd")
                cut_at = time.monotonic()
                for w in watchers:
                    w.reset(cut_at)
                try:
                    await wait_for(lambda: _health_is(api1, creds, NOT_SERVING),
                                   timeout=BOUND + 15, interval=0.1,
                                   what=f"apiserver-1 NOT_SERVING in cut {cut + 1}")
                    not_serving = time.monotonic() - cut_at
                    await wait_for(lambda: _all_closed(watchers), timeout=BOUND + 15,
                                   what=f"every watch on apiserver-1 closed in cut {cut + 1}")
                    # a watch opened while cut is refused at once, not fed bookmarks
                    with pytest.raises(ApiError) as refused:
                        async with asyncio.timeout(5):
                            async for _ev in watching.watch("configmaps", ns,
                                                            resource_version=watchers[0].last):
                                pass
                    assert refused.value.reason == Reason.SERVICE_UNAVAILABLE
                finally:
                    ha.heal("apiserver-1")
                    stop.set()
                    await load
                for i, w in enumerate(watchers):
                    when, err = w.closed[0]
                    assert err.reason == Reason.SERVICE_UNAVAILABLE, (i, err)
                    assert "cannot confirm its watch cache is current" in err.message, err
                    assert when <= BOUND + SLACK, (
                        f"cut {cut + 1}: watch {i} closed {when:.1f}s into the cut "
                        f"(bound {BOUND:g}s)")
                    assert not [b for b in w.bookmarks if b[0] > BOUND + SLACK], (
                        f"cut {cut + 1}: watch {i} fed bookmarks while cut: {w.bookmarks}")
                assert not_serving <= BOUND + SLACK, (
                    f"cut {cut + 1}: NOT_SERVING only {not_serving:.1f}s into the cut "
                    f"(bound {BOUND:g}s)")
                # healed: SERVING again, and its watches deliver a new write
                await wait_for(lambda: _health_is(api1, creds, SERVING), timeout=30,
                               what=f"apiserver-1 SERVING after heal {cut + 1}")
                made = await api.create(_config_map(f"after-{cut}", ns))
                rv = int(made["metadata"]["resourceVersion"])
                await wait_for(functools.partial(_all_at, watchers, rv), timeout=30,
                               what=f"the watches on apiserver-1 to see a write after heal "
                                    f"{cut + 1}")
        finally:
            for w in watchers:
                await w.stop()


async def _health_is(target: str, credentials: Credentials, status: int) -> bool:
    return await _health(target, credentials) == status


async def _all_closed(watchers: list[Watcher]) -> bool:
    return all(w.closed for w in watchers)


async def _all_at(watchers: list[Watcher], rv: int) -> bool:
    return all(w.last and int(w.last) >= rv for w in watchers)
