"""SPEC EX2 with real processes: custom objects take part in garbage collection and in
namespace deletion as built-in ones do (what operators rely on: kopf's `adopt`, a
controller-runtime `SetControllerReference`). A real apiserver serves the CRD; a real
controller-manager runs the garbage collector and the namespace controller, which learn the
custom kind from the CRD."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from skiff.api import ApiError, Reason
from skiff.api.apiextensions.crdversions import kind_infos
from skiff.api.kinds import register_custom, unregister_custom
from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.client.customkinds import established
from tests.integration.controller_manager.conftest import StartControllerManager

pytestmark = pytest.mark.integration


def _crd(group: str) -> Obj:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"crontabs.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": "crontabs", "singular": "crontab",
                               "kind": "CronTab"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]}}


async def _until(check: Callable[[], Awaitable[bool]], *, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.1)


async def _gone(api: ApiClient, resource: str, name: str, namespace: str | None) -> bool:
    try:
        await api.get(resource, name, namespace)
    except ApiError as err:
        if err.reason == Reason.NOT_FOUND:
            return True
        raise
    return False


@pytest.fixture
async def crontabs(api: ApiClient) -> AsyncIterator[str]:
    """A CronTab CRD of a group of this test's own, established; its `<plural>.<group>`.
    This process learns the kind as the controller-manager does (to create its objects)."""
    group = f"g{uuid.uuid4().hex[:8]}.example.com"
    crd = await api.create(_crd(group))
    ref = f"crontabs.{group}"

    async def is_established() -> bool:
        nonlocal crd
        crd = await api.get("customresourcedefinitions", ref)
        return established(crd)

    await _until(is_established)
    register_custom(*kind_infos(crd))
    try:
        yield ref
    finally:
        with contextlib.suppress(ApiError):
            await api.delete("customresourcedefinitions", ref)
        unregister_custom(ref)


async def _release(api: ApiClient, resource: str, name: str, namespace: str) -> None:
    """Remove an object's finalizers (the garbage collector may write it meanwhile)."""
    for _ in range(10):
        obj = await api.get(resource, name, namespace)
        obj["metadata"]["finalizers"] = []
        try:
            await api.update(obj)
            return
        except ApiError as err:
            if err.reason != Reason.CONFLICT:
                raise
    raise AssertionError(f"could not remove the finalizers of {resource}/{name}")


def _crontab(ref: str, name: str, namespace: str, **meta: object) -> Obj:
    group = ref.partition(".")[2]
    return {"apiVersion": f"{group}/v1", "kind": "CronTab",
            "metadata": {"name": name, "namespace": namespace, **meta},
            "spec": {"cronSpec": "* * * * */5"}}


def _owned_by(owner: Obj, **extra: object) -> list[Obj]:
    return [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
             "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"], **extra}]


def _pod(name: str, namespace: str, owners: list[Obj]) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": owners},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


async def test_ex2_dependents_of_a_custom_object_are_collected_when_it_is_deleted(
        api: ApiClient, namespace: str, crontabs: str,
        controller_manager: StartControllerManager) -> None:
    controller_manager("--controllers", "garbagecollector,namespace")
    owner = await api.create(_crontab(crontabs, "owner", namespace))
    await api.create(_pod("adopted", namespace, _owned_by(owner, controller=True,
                                                         blockOwnerDeletion=True)))
    await api.create({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "settings", "namespace": namespace,
                                   "ownerReferences": _owned_by(owner)}})
    # a custom dependent of a custom owner
    await api.create(_crontab(crontabs, "child", namespace, ownerReferences=_owned_by(owner)))
    await asyncio.sleep(1.0)
    assert not await _gone(api, "configmaps", "settings", namespace)  # owner alive: kept

    await api.delete(crontabs, "owner", namespace)
    await _until(lambda: _gone(api, "pods", "adopted", namespace))
    await _until(lambda: _gone(api, "configmaps", "settings", namespace))
    await _until(lambda: _gone(api, crontabs, "child", namespace))


async def test_ex2_custom_dependents_of_a_builtin_owner_are_collected(
        api: ApiClient, namespace: str, crontabs: str,
        controller_manager: StartControllerManager) -> None:
    controller_manager("--controllers", "garbagecollector")
    owner = await api.create({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": "owner", "namespace": namespace}})
    await api.create(_crontab(crontabs, "dependent", namespace,
                              ownerReferences=_owned_by(owner)))
    await api.delete("configmaps", "owner", namespace)
    await _until(lambda: _gone(api, crontabs, "dependent", namespace))


async def test_ex2_foreground_deletion_of_a_custom_owner(
        api: ApiClient, namespace: str, crontabs: str,
        controller_manager: StartControllerManager) -> None:
    controller_manager("--controllers", "garbagecollector")
    owner = await api.create(_crontab(crontabs, "fg-owner", namespace))
    await api.create({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "blocking", "namespace": namespace,
                                   "finalizers": ["example.com/hold"],
                                   "ownerReferences": _owned_by(owner,
                                                                blockOwnerDeletion=True)}})
    await api.delete(crontabs, "fg-owner", namespace, propagation_policy="Foreground")

    async def dependent_terminating() -> bool:
        cm = await api.get("configmaps", "blocking", namespace)
        return bool(cm["metadata"].get("deletionTimestamp"))

    await _until(dependent_terminating)
    # the owner waits for its blocking dependent
    waiting = await api.get(crontabs, "fg-owner", namespace)
    assert "foregroundDeletion" in waiting["metadata"].get("finalizers", [])
    await _release(api, "configmaps", "blocking", namespace)
    await _until(lambda: _gone(api, crontabs, "fg-owner", namespace))


async def test_ex2_orphan_deletion_of_a_custom_owner_keeps_its_dependents(
        api: ApiClient, namespace: str, crontabs: str,
        controller_manager: StartControllerManager) -> None:
    controller_manager("--controllers", "garbagecollector")
    owner = await api.create(_crontab(crontabs, "orphaning", namespace))
    await api.create({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "kept", "namespace": namespace,
                                   "ownerReferences": _owned_by(owner)}})
    await api.delete(crontabs, "orphaning", namespace, propagation_policy="Orphan")
    await _until(lambda: _gone(api, crontabs, "orphaning", namespace))
    kept = await api.get("configmaps", "kept", namespace)
    assert not kept["metadata"].get("ownerReferences")


async def test_ex2_deleting_a_namespace_deletes_its_custom_objects(
        api: ApiClient, crontabs: str, controller_manager: StartControllerManager) -> None:
    controller_manager("--controllers", "garbagecollector,namespace")
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    await api.create(_crontab(crontabs, "plain", namespace))
    await api.create(_crontab(crontabs, "held", namespace, finalizers=["example.com/hold"]))
    await api.delete("namespaces", namespace)

    async def reported() -> bool:
        ns = await api.get("namespaces", namespace)
        messages = {c.get("type"): c.get("message")
                    for c in ns.get("status", {}).get("conditions") or []}
        return messages.get("NamespaceContentRemaining") == (
            f"Some resources are remaining: {crontabs} has 1 resource instances") and \
            messages.get("NamespaceFinalizersRemaining") == (
                "Some finalizers are remaining: example.com/hold in 1 resource instances")

    await _until(lambda: _gone(api, crontabs, "plain", namespace))
    await _until(reported)
    held = await api.get(crontabs, "held", namespace)
    assert held["metadata"].get("deletionTimestamp")
    await _release(api, crontabs, "held", namespace)
    await _until(lambda: _gone(api, "namespaces", namespace, None))


async def test_ex2_owners_are_told_apart_by_api_version_when_two_crds_share_a_kind(
        api: ApiClient, namespace: str, controller_manager: StartControllerManager) -> None:
    # Two groups serve a kind named CronTab, each with an object named "same": deleting one
    # collects its dependents only.
    refs = []
    for _ in range(2):
        group = f"g{uuid.uuid4().hex[:8]}.example.com"
        crd = await api.create(_crd(group))
        refs.append(crd["metadata"]["name"])
    try:
        for ref in refs:
            async def is_established(ref: str = ref) -> bool:
                return established(await api.get("customresourcedefinitions", ref))

            await _until(is_established)
            register_custom(*kind_infos(await api.get("customresourcedefinitions", ref)))
        controller_manager("--controllers", "garbagecollector")
        owners = [await api.create(_crontab(ref, "same", namespace)) for ref in refs]
        for i, owner in enumerate(owners):
            await api.create({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": f"dep-{i}", "namespace": namespace,
                                           "ownerReferences": _owned_by(owner)}})
        await api.delete(refs[0], "same", namespace)
        await _until(lambda: _gone(api, "configmaps", "dep-0", namespace))
        await asyncio.sleep(1.0)
        assert not await _gone(api, "configmaps", "dep-1", namespace)
    finally:
        for ref in refs:
            with contextlib.suppress(ApiError):
                await api.delete("customresourcedefinitions", ref)
            unregister_custom(ref)
