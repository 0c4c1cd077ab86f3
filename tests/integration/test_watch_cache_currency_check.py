"""Why a cut apiserver kept serving: the watch cache's currency check outlived an etcd
client that another request's failover closed under its quorum read.

grpc.aio cancels the calls of a closed channel, and the awaiting coroutine gets a
CancelledError nobody asked its task for. The check caught `Exception` only, so it ended
for good, and the apiserver stayed "current" (gRPC health SERVING, watches open) through
any later loss of etcd. Real etcd; its first `--etcd-servers` entry goes through a loopback
proxy that is cut (bytes dropped, no reset) as a partition would.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skiff.apiserver.storage.etcd import EtcdStorage
from skiff.apiserver.storage.watchcache import WatchCache
from skiff.cluster.processes import Process, etcd_process, free_port, wait_etcd_healthy
from skiff.tasks import cancel_tasks
from tests.integration.blackhole import Blackhole
from tests.integration.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

REQUEST_TIMEOUT = 2.0  # --etcd-request-timeout: the failing request fails over after this
CHECK_INTERVAL = 0.5  # --watch-quorum-check-interval
READYCHECK_TIMEOUT = 6.0  # --etcd-readycheck-timeout: longer than the request's, so the
# request's failover closes the client while the check's read is still waiting on it


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[Process]:
    port = free_port()
    proc = etcd_process(tmp_path, client_port=port, peer_port=free_port())
    proc.start()
    try:
        wait_etcd_healthy(proc, port)
        yield proc
    finally:
        proc.signal(signal.SIGCONT)
        proc.stop()


async def test_defect13_the_currency_check_survives_its_etcd_client_closed_under_it(
        etcd: Process) -> None:
    port = _client_port(etcd)
    verdicts: list[tuple[float, bool]] = []

    async def on_currency(current: bool) -> None:
        verdicts.append((time.monotonic(), current))

    async with Blackhole(port) as cut_member:
        storage = EtcdStorage(f"http://{cut_member.target},http://127.0.0.1:{port}",
                              request_timeout=REQUEST_TIMEOUT, retry_seconds=10)
        await storage.connect()
        cache = WatchCache(storage, quorum_check_interval=CHECK_INTERVAL,
                           quorum_check_timeout=READYCHECK_TIMEOUT, on_currency=on_currency)
        tasks = [asyncio.create_task(cache.run()), asyncio.create_task(cache.monitor())]
        try:
            await wait_for(lambda: _verdict(verdicts, True), timeout=20,
                           what="a first current verdict")
            # Right after a check: the next one starts a full interval after the request
            # below, so the request's failover comes while the check's read is waiting.
            count = len(verdicts)
            await wait_for(lambda: _more(verdicts, count), timeout=10, what="a check")
            cut_member.cut()
            request = asyncio.create_task(storage.get("/registry/namespaces/default"))
            await asyncio.sleep(REQUEST_TIMEOUT + CHECK_INTERVAL)
            await request  # answered by the second member after its failover
            assert not any(t.done() for t in tasks), [t for t in tasks if t.done()]
            # The check goes on: a current verdict from the second member, then, with etcd
            # frozen, a not-current one within the bound.
            since = time.monotonic()
            await wait_for(lambda: _verdict(verdicts, True, since), timeout=10,
                           what="a current verdict after the failover")
            etcd.signal(signal.SIGSTOP)
            frozen = time.monotonic()
            await wait_for(lambda: _verdict(verdicts, False, frozen),
                           timeout=CHECK_INTERVAL + READYCHECK_TIMEOUT + 5,
                           what="a not-current verdict once etcd is frozen")
            assert cache.unavailable is not None
        finally:
            etcd.signal(signal.SIGCONT)
            await cancel_tasks(*tasks)
            await storage.close()


def _client_port(proc: Process) -> int:
    urls = proc.argv[proc.argv.index("--listen-client-urls") + 1]
    return int(urls.split(",")[0].rsplit(":", 1)[1])


async def _verdict(verdicts: list[tuple[float, bool]], current: bool,
                   since: float = 0.0) -> bool:
    return any(c == current and t >= since for t, c in verdicts)


async def _more(verdicts: list[tuple[float, bool]], count: int) -> bool:
    return len(verdicts) > count


async def test_as5_writes_outside_the_registry_keep_the_cache_current(
        etcd: Process) -> None:
    """CI once saw both apiservers of a fresh HA cluster NOT_SERVING for a minute: the
    only writes were their endpoint records (`/skiff/apiserver-endpoints/`), outside
    `/registry/`, so etcd's revision moved past every revision the cache had seen and
    each currency check found it behind. The cache watches every key now and counts them."""
    storage = EtcdStorage(f"http://127.0.0.1:{_client_port(etcd)}", request_timeout=2.0)
    await storage.connect()
    cache = WatchCache(storage, quorum_check_interval=3600, too_large_wait=1.0)
    task = asyncio.create_task(cache.run())
    try:
        await cache.ready()
        await storage.create("/registry/namespaces/one",
                             {"kind": "Namespace", "metadata": {"name": "one"}})
        assert await cache.check_currency()
        for i in range(3):
            written = await storage.create(f"/skiff/apiserver-endpoints/10.0.0.{i}:8080",
                                           {"kind": "ApiserverEndpoint", "metadata": {}})
            revision = int(written["metadata"]["resourceVersion"])
            assert await cache.check_currency(), (
                f"the cache stayed at {cache.revision}, etcd at {revision}")
        assert cache.revision >= revision
        assert cache.recent("/skiff/apiserver-endpoints/10.0.0.0:8080") is None
        assert cache.recent("/registry/namespaces/one") is not None
    finally:
        await cancel_tasks(task)
        await storage.close()
