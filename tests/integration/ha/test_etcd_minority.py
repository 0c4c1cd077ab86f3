"""An apiserver whose etcd member is cut off from the quorum serves no stale
data: writes and consistent reads fail with a clear ServiceUnavailable (or Timeout), and it
catches up once the member rejoins. A real three-member etcd cluster on loopback."""

from __future__ import annotations

import asyncio
import signal
import uuid

import pytest

from skiff.api import ApiError, Reason
from skiff.apiserver.storage.values import MAY_STILL_BE_PROCESSING
from skiff.client import ApiClient, Informer, WatchEvent
from tests.integration.ha.conftest import HaCluster
from tests.integration.waiting import freeze, get_or_none, wait_for

UNAVAILABLE = (Reason.SERVICE_UNAVAILABLE, Reason.TIMEOUT)


def _lease(name: str, namespace: str) -> dict[str, object]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"holderIdentity": name}}


def _clean(err: ApiError) -> None:
    assert err.reason in UNAVAILABLE, err
    # a write etcd did not answer may still be committed: kube-apiserver's 504 Timeout
    assert "etcd" in err.message or err.message == MAY_STILL_BE_PROCESSING, err.message
    assert "Traceback" not in err.message and "Error(" not in err.message, err.message


async def test_issue11_apiserver_on_an_etcd_minority_refuses_writes_and_consistent_reads(
        ha_cluster: HaCluster) -> None:
    ha_cluster.start_etcd_cluster(3)
    ha_cluster.add_apiserver(etcd_member=0)  # talks to etcd-1 only
    ns = f"t-{uuid.uuid4().hex[:8]}"
    async with ApiClient(ha_cluster.api_target(0), retry_seconds=1, timeout=20) as api, \
            ApiClient(ha_cluster.api_target(0), retry_seconds=30, timeout=20) as watcher:
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        await api.create(_lease("before", ns))
        informer = Informer(watcher, "leases", namespace=ns, watch_idle_timeout=30)
        seen: list[str] = []
        informer.add_handler(on_add=lambda o: seen.append(o["metadata"]["name"]))
        task = asyncio.create_task(informer.run())
        try:
            await informer.wait_synced(30)
            # Cut etcd-1 off from the quorum: the other two members stop answering.
            for member in ha_cluster.etcd[1:]:
                freeze(member)
            try:
                with pytest.raises(ApiError) as write:
                    await api.create(_lease("during", ns))
                _clean(write.value)
                with pytest.raises(ApiError) as get:
                    await api.get("leases", "before", ns)
                _clean(get.value)
                with pytest.raises(ApiError) as listing:
                    await api.list("leases", ns)
                _clean(listing.value)
                assert seen == ["before"], "a watcher saw an event the quorum did not commit"
            finally:
                for member in ha_cluster.etcd[1:]:
                    member.signal(signal.SIGCONT)

            # Healed: etcd-1 rejoins, the apiserver writes and reads again, and its watch
            # cache follows (the informer sees the new object).
            async def write_after() -> bool:
                try:
                    await api.create(_lease("after", ns))
                except ApiError as err:
                    if err.reason == Reason.ALREADY_EXISTS:
                        return True
                    if err.reason in UNAVAILABLE:
                        return False
                    raise
                return True

            await wait_for(write_after, timeout=60, interval=0.5,
                           what="writes through the healed member")
            names = sorted(o["metadata"]["name"] for o in
                           (await api.list("leases", ns))["items"])
            assert "during" not in names or await get_or_none(api, "leases", "during", ns)
            assert {"before", "after"} <= set(names)
            await wait_for(lambda: _seen(seen, "after"), timeout=30,
                           what="the watch cache to catch up")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _seen(seen: list[str], name: str) -> bool:
    return name in seen


async def _first_event(api: ApiClient, resource: str, namespace: str, rv: str) -> WatchEvent:
    """The first event of a watch from `rv`, watching again after ServiceUnavailable."""
    while True:
        stream = api.watch(resource, namespace, resource_version=rv)
        try:
            return await anext(stream)
        except ApiError as err:
            if err.reason != Reason.SERVICE_UNAVAILABLE:
                raise
        finally:
            await stream.aclose()
        await asyncio.sleep(0.2)


async def test_issue11_apiserver_with_every_etcd_member_moves_off_a_frozen_one(
        ha_cluster: HaCluster) -> None:
    """`--etcd-servers a,b,c`: when the member in use stops answering, the apiserver's
    requests go to another member of the quorum and succeed."""
    ha_cluster.start_etcd_cluster(3)
    members = ",".join(ha_cluster.etcd_endpoint(i) for i in range(3))
    ha_cluster.add_apiserver(args=["--etcd-servers", members])
    ns = f"t-{uuid.uuid4().hex[:8]}"
    async with ApiClient(ha_cluster.api_target(0), retry_seconds=60, timeout=20) as api:
        created = await api.create({"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": ns}})
        freeze(ha_cluster.etcd[0])  # the first member, the one in use
        try:
            await api.create(_lease("while-etcd-1-frozen", ns))
            # The watch cache follows the new member too. While the remaining members elect
            # a leader (the frozen one may have led) the cache cannot confirm it is current
            # and refuses watches with ServiceUnavailable: a client watches again, as an
            # informer does, from the same resourceVersion.
            ev = await asyncio.wait_for(
                _first_event(api, "leases", ns, created["metadata"]["resourceVersion"]), 60)
            assert (ev.type, ev.object["metadata"]["name"]) == ("ADDED", "while-etcd-1-frozen")
            got = await api.get("leases", "while-etcd-1-frozen", ns)
            assert got["spec"]["holderIdentity"] == "while-etcd-1-frozen"
            items = (await api.list("leases", ns))["items"]
            assert [o["metadata"]["name"] for o in items] == ["while-etcd-1-frozen"]
        finally:
            ha_cluster.etcd[0].signal(signal.SIGCONT)


async def test_issue11_watch_on_a_lagging_apiserver_fails_instead_of_hanging(
        ha_cluster: HaCluster) -> None:
    """A watcher that moves to an apiserver whose etcd member is behind the revision it
    already saw gets Timeout "Too large resource version" (and moves on), not a silent
    stream that looks current."""
    ha_cluster.start_etcd_cluster(3)
    ha_cluster.add_apiserver(etcd_member=0)
    # Its quorum monitor off: this test is about the revision check alone.
    ha_cluster.add_apiserver(etcd_member=2, args=["--watch-quorum-check-interval", "1h"])
    ns = f"t-{uuid.uuid4().hex[:8]}"
    async with ApiClient(ha_cluster.api_target(0), retry_seconds=30) as first, \
            ApiClient(ha_cluster.api_target(1), retry_seconds=1) as lagging:
        await first.create({"apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": ns}})
        await wait_for(lambda: get_or_none(lagging, "namespaces", ns),
                       what="the second apiserver to see the namespace")
        freeze(ha_cluster.etcd[2])  # apiserver-2's member stops following
        try:
            created = await first.create(_lease("newer", ns))  # committed by etcd-1 + etcd-2
            rv = created["metadata"]["resourceVersion"]
            stream = lagging.watch("leases", ns, resource_version=rv)
            with pytest.raises(ApiError) as err:
                await asyncio.wait_for(anext(stream), 30)
            await stream.aclose()
            assert err.value.reason == Reason.TIMEOUT
            assert "Too large resource version" in err.value.message
        finally:
            ha_cluster.etcd[2].signal(signal.SIGCONT)
        # Once its member has caught up, the same watch is served.
        stream = lagging.watch("leases", ns, resource_version=rv)
        await first.create(_lease("later", ns))
        ev = await asyncio.wait_for(anext(stream), 60)
        await stream.aclose()
        assert (ev.type, ev.object["metadata"]["name"]) == ("ADDED", "later")


async def test_issue11_watches_on_an_etcd_minority_are_closed_not_left_looking_current(
        ha_cluster: HaCluster) -> None:
    """A watch served by an apiserver whose etcd member lost the quorum ends with
    ServiceUnavailable (so its client moves on) instead of sending bookmarks forever; new
    watches are refused until the quorum is back, then resume from the same revision."""
    ha_cluster.start_etcd_cluster(3)
    ha_cluster.add_apiserver(etcd_member=0)
    ns = f"t-{uuid.uuid4().hex[:8]}"
    async with ApiClient(ha_cluster.api_target(0), retry_seconds=1, timeout=20) as api:
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        rv = (await api.create(_lease("before", ns)))["metadata"]["resourceVersion"]
        stream = api.watch("leases", ns, resource_version=rv)
        for member in ha_cluster.etcd[1:]:
            freeze(member)
        try:
            with pytest.raises(ApiError) as closed:
                async with asyncio.timeout(60):
                    async for ev in stream:
                        assert ev.type == "BOOKMARK", "no event the quorum did not commit"
            assert closed.value.reason == Reason.SERVICE_UNAVAILABLE
            assert "cannot confirm its watch cache is current" in closed.value.message
            with pytest.raises(ApiError) as refused:
                await anext(api.watch("leases", ns, resource_version=rv))
            assert refused.value.reason == Reason.SERVICE_UNAVAILABLE
        finally:
            for member in ha_cluster.etcd[1:]:
                member.signal(signal.SIGCONT)

        async def write_after() -> bool:
            try:
                await api.create(_lease("after", ns))
            except ApiError as err:
                if err.reason in UNAVAILABLE:
                    return False
                if err.reason != Reason.ALREADY_EXISTS:
                    raise
            return True

        async def resumed() -> bool:
            try:
                async with asyncio.timeout(5):
                    resume = api.watch("leases", ns, resource_version=rv)
                    try:
                        ev = await anext(resume)
                        while ev.type == "BOOKMARK":
                            ev = await anext(resume)
                    finally:
                        await resume.aclose()
            except (ApiError, TimeoutError):
                return False
            return bool(ev.object["metadata"]["name"] == "after")

        await wait_for(write_after, timeout=60, interval=0.5, what="writes again")
        await wait_for(resumed, timeout=60, interval=1, what="watches served again")
