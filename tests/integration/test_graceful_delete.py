"""SPEC GT1–GT3: the apiserver's side of graceful deletion, against real etcd."""

from __future__ import annotations

import asyncio
import time

import pytest

from skiff.api import ApiError, Reason
from skiff.client import ApiClient
from skiff.clock import parse_rfc3339
from tests.integration.objects import pod


async def _gone(api: ApiClient, name: str, namespace: str) -> bool:
    try:
        await api.get("pods", name, namespace)
    except ApiError as err:
        return err.reason == Reason.NOT_FOUND
    return False


async def test_gt1_delete_uses_the_specs_grace_period_by_default(api: ApiClient,
                                                                 namespace: str) -> None:
    await api.create(pod("p", namespace, node="node-1", grace=45))
    before = time.time()
    result = await api.delete("pods", "p", namespace)
    meta = result["object"]["metadata"]
    assert result["deleted"] is False
    assert meta["deletionGracePeriodSeconds"] == 45
    deadline = parse_rfc3339(meta["deletionTimestamp"])
    assert before + 44 <= deadline <= time.time() + 46


async def test_gt1_default_period_is_30_seconds(api: ApiClient, namespace: str) -> None:
    await api.create(pod("p", namespace, node="node-1"))
    result = await api.delete("pods", "p", namespace)
    assert result["object"]["metadata"]["deletionGracePeriodSeconds"] == 30


async def test_gt1_request_grace_period_overrides_the_spec(api: ApiClient,
                                                           namespace: str) -> None:
    await api.create(pod("p", namespace, node="node-1", grace=45))
    result = await api.delete("pods", "p", namespace, grace_period_seconds=7)
    assert result["object"]["metadata"]["deletionGracePeriodSeconds"] == 7


async def test_gt1_unscheduled_pod_is_deleted_immediately(api: ApiClient,
                                                          namespace: str) -> None:
    await api.create(pod("p", namespace, grace=45))
    result = await api.delete("pods", "p", namespace)
    assert result["deleted"] is True
    assert await _gone(api, "p", namespace)


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
async def test_gt1_terminal_pod_is_deleted_immediately(api: ApiClient, namespace: str,
                                                       phase: str) -> None:
    created = await api.create(pod("p", namespace, node="node-1", grace=45))
    created["status"] = {"phase": phase}
    await api.update_status(created)
    result = await api.delete("pods", "p", namespace)
    assert result["deleted"] is True
    assert await _gone(api, "p", namespace)


async def test_gt1_negative_grace_period_becomes_one_second(api: ApiClient,
                                                            namespace: str) -> None:
    await api.create(pod("p", namespace, node="node-1"))
    result = await api.delete("pods", "p", namespace, grace_period_seconds=-5)
    assert result["object"]["metadata"]["deletionGracePeriodSeconds"] == 1


async def test_gt2_graceful_delete_marks_the_pod_and_it_stays(api: ApiClient,
                                                              namespace: str) -> None:
    await api.create(pod("p", namespace, node="node-1"))
    await api.delete("pods", "p", namespace, grace_period_seconds=20)
    stored = await api.get("pods", "p", namespace)
    assert stored["metadata"]["deletionTimestamp"]
    assert stored["metadata"]["deletionGracePeriodSeconds"] == 20


async def test_gt2_a_later_delete_may_only_shorten_the_period(api: ApiClient,
                                                              namespace: str) -> None:
    await api.create(pod("p", namespace, node="node-1"))
    first = await api.delete("pods", "p", namespace, grace_period_seconds=20)
    longer = await api.delete("pods", "p", namespace, grace_period_seconds=60)
    assert longer["object"]["metadata"]["deletionGracePeriodSeconds"] == 20
    assert (longer["object"]["metadata"]["deletionTimestamp"]
            == first["object"]["metadata"]["deletionTimestamp"])
    shorter = await api.delete("pods", "p", namespace, grace_period_seconds=5)
    assert shorter["object"]["metadata"]["deletionGracePeriodSeconds"] == 5
    assert parse_rfc3339(shorter["object"]["metadata"]["deletionTimestamp"]) < parse_rfc3339(
        first["object"]["metadata"]["deletionTimestamp"])


async def test_gt2_a_later_delete_without_grace_period_leaves_the_pending_deletion(
        api: ApiClient, namespace: str) -> None:
    """Kubernetes' BeforeDelete: a second DELETE naming no gracePeriodSeconds is a no-op,
    even when the pod's own terminationGracePeriodSeconds is shorter."""
    await api.create(pod("p", namespace, node="node-1", grace=5))
    first = (await api.delete("pods", "p", namespace, grace_period_seconds=20))["object"]
    again = (await api.delete("pods", "p", namespace))["object"]
    assert again["metadata"]["deletionGracePeriodSeconds"] == 20
    assert again["metadata"]["deletionTimestamp"] == first["metadata"]["deletionTimestamp"]
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


async def test_gt2_a_shorter_delete_counts_from_the_original_start(
        api: ApiClient, namespace: str) -> None:
    """The new deletionTimestamp is the original start plus the new period, not now plus
    the new period (Kubernetes' BeforeDelete)."""
    await api.create(pod("p", namespace, node="node-1"))
    first = (await api.delete("pods", "p", namespace, grace_period_seconds=20))["object"]
    started = parse_rfc3339(first["metadata"]["deletionTimestamp"]) - 20
    await asyncio.sleep(1.5)  # a later DELETE, measurably after the first
    shorter = (await api.delete("pods", "p", namespace, grace_period_seconds=5))["object"]
    assert shorter["metadata"]["deletionGracePeriodSeconds"] == 5
    assert parse_rfc3339(shorter["metadata"]["deletionTimestamp"]) == started + 5


async def test_gt3_grace_period_zero_removes_the_object_from_etcd_at_once(
        api: ApiClient, namespace: str) -> None:
    await api.create(pod("p", namespace, node="node-1"))
    await api.delete("pods", "p", namespace)  # graceful first: terminating
    result = await api.delete("pods", "p", namespace, grace_period_seconds=0)
    assert result["deleted"] is True
    assert await _gone(api, "p", namespace)


async def test_gt10_final_delete_with_uid_precondition_refuses_a_new_pod(
        api: ApiClient, namespace: str) -> None:
    old = await api.create(pod("p", namespace, node="node-1"))
    await api.delete("pods", "p", namespace, grace_period_seconds=0)
    await api.create(pod("p", namespace, node="node-1"))
    with pytest.raises(ApiError) as err:
        await api.delete("pods", "p", namespace, grace_period_seconds=0,
                         uid=old["metadata"]["uid"])
    assert err.value.reason == Reason.CONFLICT
    assert "Precondition failed: UID" in err.value.message
