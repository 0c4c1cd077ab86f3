"""Running one step of a `skiff explore` workload against a cluster (SPEC CT2), as the user
who wrote it would with kubectl: `apply` creates or updates (the manifest merged onto the
stored object), `create` creates, `patch` applies a JSON merge patch (RFC 7386) by get,
merge and update (its `status` part through the status subresource), retried on Conflict,
`scale` patches `spec.replicas`, `delete` deletes, `wait` polls until the cluster shows
what it asks (or fails naming the step and what it saw), `sleep` sleeps. Objects without a
namespace get the workload's when their kind is namespaced. Any failure is a `StepError`
whose message names the step (`steps[3] wait: 1 of 2 configmaps matching
examples.skiff.io/database=db after 20s`).
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Awaitable, Callable
from typing import TypeVar

from skiff.api.errors import ApiError, Reason
from skiff.api.jsonpath import find
from skiff.api.kinds import KindInfo
from skiff.api.mergepatch import merge_patch
from skiff.api.types import Obj, ObjView
from skiff.client.interface import Client
from skiff.explore.kinds import kind_of, resource_info
from skiff.explore.workload import Step, wait_goal

__all__ = ["POLL_SECONDS", "StepError", "merge_patch", "run_step"]

POLL_SECONDS = 0.1
T = TypeVar("T")


class StepError(RuntimeError):
    """A step that failed; the message names it (`steps[2] patch: ...`)."""


async def run_step(client: Client, step: Step, *, namespace: str) -> None:
    """Run one step; raises StepError naming it when it cannot be done (or a wait times
    out)."""
    try:
        await _RUNNERS[step.kind](client, step, namespace)
    except ApiError as err:
        raise StepError(f"{step.label} {step.kind}: {err.message}") from None


# -- placing objects -----------------------------------------------------------------------


async def _placed(client: Client, step: Step, obj: ObjView,
                  namespace: str) -> tuple[KindInfo, Obj]:
    """A copy of `obj` with the workload's namespace when its kind is namespaced and it
    names none."""
    info = await kind_of(client, api_version=str(obj["apiVersion"]), kind=str(obj["kind"]),
                         wait=step.timeout)
    if info is None:
        raise StepError(f'{step.label} {step.kind}: no kind "{obj["kind"]}" is served in '
                        f'"{obj["apiVersion"]}" (is its CRD in the setup?)')
    placed = copy.deepcopy(dict(obj))
    meta = placed.setdefault("metadata", {})
    if info.namespaced and not meta.get("namespace"):
        meta["namespace"] = namespace
    elif not info.namespaced:
        meta.pop("namespace", None)
    return info, placed


async def _target(client: Client, step: Step, namespace: str) -> tuple[KindInfo, str | None]:
    """The kind a step's `resource` names and the namespace it addresses (None when the
    kind is cluster-scoped)."""
    resource = str(step.body["resource"])
    info = await resource_info(client, resource, wait=step.timeout)
    if info is None:
        raise StepError(f'{step.label} {step.kind}: the server doesn\'t have a resource type '
                        f'"{resource}"')
    return info, (str(step.body.get("namespace") or namespace) if info.namespaced else None)


def _where(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


async def _until_no_conflict(step: Step, attempt: Callable[[], Awaitable[T]]) -> T:
    """`attempt()`, again after a Conflict until the step's timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + step.timeout
    while True:
        try:
            return await attempt()
        except ApiError as err:
            if err.reason != Reason.CONFLICT or loop.time() >= deadline:
                raise
        await asyncio.sleep(POLL_SECONDS / 2)


# -- the step kinds ------------------------------------------------------------------------


async def _apply(client: Client, step: Step, namespace: str) -> None:
    for manifest in step.body["objects"]:
        info, obj = await _placed(client, step, manifest, namespace)
        await _until_no_conflict(step, _applier(client, info, obj))


def _applier(client: Client, info: KindInfo, obj: Obj) -> Callable[[], Awaitable[None]]:
    """One attempt at applying `obj`: create it, or merge it onto the stored object."""
    async def attempt() -> None:
        meta = obj["metadata"]
        try:
            stored = await client.get(info.ref, str(meta["name"]), meta.get("namespace"))
        except ApiError as err:
            if err.reason != Reason.NOT_FOUND:
                raise
            await client.create(obj)
            return
        merged = merge_patch(stored, obj)
        merged["metadata"]["resourceVersion"] = stored["metadata"].get("resourceVersion")
        await client.update(merged)
    return attempt


async def _create(client: Client, step: Step, namespace: str) -> None:
    _, obj = await _placed(client, step, step.body, namespace)
    await client.create(obj)


def _status_subresource(info: KindInfo) -> bool:
    return "status" in info.subresources if info.custom else info.has_status


async def _patch_object(client: Client, step: Step, namespace: str, patch: Obj) -> None:
    """Merge `patch` onto the stored object; a `status` part of it goes through the status
    subresource when the kind has one (as `kubectl patch --subresource=status`)."""
    info, ns = await _target(client, step, namespace)
    name = str(step.body["name"])
    status = patch.get("status") if _status_subresource(info) else None
    rest = {k: v for k, v in patch.items() if k != "status"} if status is not None else patch

    def patching(part: Obj, write: Callable[[Obj], Awaitable[Obj]]) -> Callable[
            [], Awaitable[None]]:
        async def attempt() -> None:
            stored = await client.get(info.ref, name, ns)
            merged = merge_patch(stored, part)
            merged["metadata"]["resourceVersion"] = stored["metadata"].get("resourceVersion")
            await write(merged)
        return attempt

    if rest or status is None:
        await _until_no_conflict(step, patching(rest, client.update))
    if status is not None:
        await _until_no_conflict(step, patching({"status": status}, client.update_status))


async def _patch(client: Client, step: Step, namespace: str) -> None:
    await _patch_object(client, step, namespace, step.body["patch"])


async def _scale(client: Client, step: Step, namespace: str) -> None:
    await _patch_object(client, step, namespace,
                        {"spec": {"replicas": step.body["replicas"]}})


async def _delete(client: Client, step: Step, namespace: str) -> None:
    info, ns = await _target(client, step, namespace)
    await client.delete(info.ref, str(step.body["name"]), ns)


async def _sleep(client: Client, step: Step, namespace: str) -> None:
    await asyncio.sleep(float(step.body["seconds"]))


async def _wait(client: Client, step: Step, namespace: str) -> None:
    info, ns = await _target(client, step, namespace)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + step.timeout
    while True:
        done, seen = await _check(client, step.body, info, ns)
        if done:
            return
        if loop.time() >= deadline:
            raise StepError(f"{step.label} wait: {seen} after {step.timeout:g}s "
                            f"(waiting for {wait_goal(step.body)})")
        await asyncio.sleep(POLL_SECONDS)


async def _check(client: Client, body: ObjView, info: KindInfo,
                 ns: str | None) -> tuple[bool, str]:
    """Whether the cluster shows what a wait step asks for, and what it shows, in words."""
    resource = str(body["resource"])
    if "name" not in body:
        items = (await client.list_pages(info.ref, ns,
                                         label_selector=str(body.get("selector", ""))))["items"]
        count = body.get("count")
        done = len(items) >= 1 if count is None else len(items) == count
        matching = f" matching {body['selector']}" if body.get("selector") else ""
        place = f" in {ns}" if ns else ""
        wanted = "at least 1" if count is None else str(count)
        return done, f"{len(items)} of {wanted} {resource}{matching}{place}"
    name = _where(ns, str(body["name"]))
    try:
        obj: Obj | None = await client.get(info.ref, str(body["name"]), ns)
    except ApiError as err:
        if err.reason != Reason.NOT_FOUND:
            raise
        obj = None
    if body.get("exists") is False:
        return obj is None, f"{resource} {name} still exists"
    if obj is None:
        return False, f"{resource} {name} does not exist"
    if "jsonpath" in body:
        text = jsonpath_text(obj, str(body["jsonpath"]))
        holds = text == body["value"] if "value" in body else text != ""
        return holds != bool(body.get("not")), \
            f"{resource} {name} {body['jsonpath']} is {json.dumps(text)}"
    if "condition" in body:
        status = condition_status(obj, str(body["condition"]))
        return status == "True", \
            f"{resource} {name} condition {body['condition']} is {status or 'absent'}"
    return True, f"{resource} {name} exists"


def jsonpath_text(obj: ObjView, path: str) -> str:
    """What `kubectl get -o jsonpath=PATH` prints for one object: the values found,
    space-separated, strings bare, everything else as JSON."""
    return " ".join(v if isinstance(v, str) else json.dumps(v) for v in find(obj, path))


def condition_status(obj: ObjView, condition: str) -> str:
    """The status ("True", "False", "Unknown") of `status.conditions[type=condition]`, or
    "" when there is none."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == condition:
            return str(cond.get("status", ""))
    return ""


_RUNNERS: dict[str, Callable[[Client, Step, str], Awaitable[None]]] = {
    "apply": _apply, "create": _create, "patch": _patch, "scale": _scale,
    "delete": _delete, "wait": _wait, "sleep": _sleep}
