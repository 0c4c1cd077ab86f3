"""An in-memory `Client` for unit tests (client-go's `fake.Clientset`).

`FakeClient` keeps objects by resource, namespace and name with resourceVersions from one
counter, and answers as the apiserver does where controllers depend on it: NotFound,
AlreadyExists, Conflict on a stale resourceVersion or a failed delete precondition; update
keeps the status of kinds with a status subresource and `update_status` changes only the
status; a delete of an object with finalizers (or of a scheduled pod with a grace period)
marks it terminating, and it goes once its finalizers are gone (a pod: once deleted with
grace 0, as its kubelet does); `generateName`; label and
field selectors on list and watch; a watch that replays from a resourceVersion, then
follows. Every call is recorded in `actions` (the verb, what it named, what it sent), and
a reactor (`prepend_reactor`) can answer a verb instead of the store or fail it, as
client-go's `PrependReactor`.
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import itertools
from collections.abc import AsyncGenerator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from skiff.api import KINDS, ApiError, FieldSelector, LabelSelector, lookup
from skiff.api.types import Obj
from skiff.client.credentials import Credentials
from skiff.client.interface import Client, WatchEvent
from skiff.clock import REAL_CLOCK, Clock, rfc3339
from skiff.rpc.epoch import LeaderEpoch

__all__ = ["Action", "FakeClient", "FakeStore", "Reactor", "conflicting", "fail_with"]

P = ParamSpec("P")
R = TypeVar("R")
Key = tuple[str, str | None, str]  # resource, namespace (None if cluster-scoped), name


@dataclass
class Action:
    """One call: `verb` is the method's name ("create", "update_status", "bind", ...);
    `error` is what it failed with, if it did."""

    verb: str
    resource: str
    namespace: str | None = None
    name: str = ""
    object: Obj | None = None  # a copy of what was sent (create, update, bind, ...)
    options: dict[str, Any] = field(default_factory=dict)
    error: ApiError | None = None


# Answers an action instead of the store (returns the reply), fails it (raises), or lets the
# store answer (returns None).
Reactor = Callable[[Action], Obj | None]


def _noting_errors(verb: Callable[Concatenate[FakeClient, P], Coroutine[Any, Any, R]]
                   ) -> Callable[Concatenate[FakeClient, P], Coroutine[Any, Any, R]]:
    """Set the recorded action's `error` when the verb fails."""
    async def noted(self: FakeClient, /, *args: P.args, **kwargs: P.kwargs) -> R:
        first = len(self.actions)
        try:
            return await verb(self, *args, **kwargs)
        except ApiError as err:
            if len(self.actions) > first:
                self.actions[first].error = err
            raise
    return noted


@dataclass(frozen=True)
class _Event:
    revision: int
    resource: str
    type: str
    object: Obj


class FakeStore:
    """The apiserver's state: what one or more `FakeClient`s read and write."""

    def __init__(self) -> None:
        self.objects: dict[Key, Obj] = {}
        self.revision = 0
        self.log: list[_Event] = []  # every change, for watches and history
        self.changed = asyncio.Event()
        self.names = itertools.count(1)


class FakeClient:
    """`FakeClient(pod, node, ...)`: a store holding those objects; see the module doc.
    `FakeClient(store=other.store)` is a second client of the same apiserver state."""

    def __init__(self, *objects: Obj, clock: Clock = REAL_CLOCK,
                 store: FakeStore | None = None) -> None:
        self.clock = clock
        self.store = store if store is not None else FakeStore()
        self.credentials = Credentials()
        self.leader_epoch: LeaderEpoch | None = None
        self.actions: list[Action] = []
        self.metrics: list[Obj] = []  # PodMetrics that `pod_metrics` answers from
        self.reconnects = 0
        self._reactors: list[tuple[str, str, Reactor]] = []
        self.add(*objects)

    # -- what tests use besides the Client verbs -------------------------------------------

    def add(self, *objects: Obj) -> list[Obj]:
        """Store objects as they are, or in place of the stored ones (no action recorded);
        returns what is stored (with its new resourceVersion)."""
        return [self._put(key, copy.deepcopy(obj),
                          "MODIFIED" if key in self.store.objects else "ADDED")
                for obj in objects for key in [self._key_of(obj)]]

    def stored(self, resource: str, name: str, namespace: str | None = None) -> Obj | None:
        """The stored object itself (not a copy), or None."""
        return self.store.objects.get(self._key(resource, namespace, name))

    def objects(self, resource: str, namespace: str | None = None) -> builtins.list[Obj]:
        """The stored objects of a resource (in one namespace if given), in creation order."""
        resource = lookup(resource).resource
        return [obj for (res, ns, _), obj in self.store.objects.items()
                if res == resource and (namespace is None or ns == namespace)]

    def prepend_reactor(self, verb: str, resource: str, reactor: Reactor) -> None:
        """Let `reactor` see `verb` calls on `resource` first ("*" matches any)."""
        self._reactors.insert(0, (verb, resource, reactor))

    def calls(self, verb: str, resource: str = "*", *,
              failed: bool | None = None) -> builtins.list[Action]:
        """The recorded actions of one verb (on one resource; only those that failed, or
        only those that did not)."""
        return [a for a in self.actions
                if a.verb == verb and resource in ("*", a.resource)
                and (failed is None or failed == (a.error is not None))]

    # -- the Client protocol ---------------------------------------------------------------

    @property
    def generation(self) -> int:
        return self.reconnects

    async def reconnect(self, *, generation: int | None = None) -> None:
        if generation is None or generation == self.reconnects:
            self.reconnects += 1

    @_noting_errors
    async def create(self, obj: Obj, *, namespace: str | None = None,
                     field_validation: str = "Warn") -> Obj:
        info = lookup(str(obj.get("kind", "")))
        body = copy.deepcopy(obj)
        meta = body.setdefault("metadata", {})
        if info.namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{next(self.store.names):05x}"
        action = Action("create", info.resource, meta.get("namespace"),
                        str(meta.get("name", "")), copy.deepcopy(body))
        if (reply := self._react(action)) is not None:
            return reply
        key = self._key_of(body)
        if key in self.store.objects:
            raise ApiError.already_exists(info.resource, key[2])
        meta.setdefault("uid", f"uid-{next(self.store.names)}")
        meta.setdefault("creationTimestamp", rfc3339(self.clock.now()))
        return copy.deepcopy(self._put(key, body, "ADDED"))

    @_noting_errors
    async def get(self, resource: str, name: str, namespace: str | None = None, *,
                  revision: int = 0) -> Obj:
        action = Action("get", resource, namespace, name)
        if (reply := self._react(action)) is not None:
            return reply
        return copy.deepcopy(self._current(resource, namespace, name))

    @_noting_errors
    async def list(self, resource: str, namespace: str | None = None, *,
                   label_selector: str = "", field_selector: str = "",
                   revision: int = 0, limit: int = 0, continue_token: str = "") -> Obj:
        action = Action("list", resource, namespace, options={
            "label_selector": label_selector, "field_selector": field_selector})
        if (reply := self._react(action)) is not None:
            return reply
        info = lookup(resource)
        matches = self._matcher(info.kind, label_selector, field_selector)
        ns = namespace if info.namespaced else None
        items = [copy.deepcopy(o) for o in self.objects(info.resource, ns) if matches(o)]
        return {"apiVersion": info.api_version, "kind": f"{info.kind}List",
                "metadata": {"resourceVersion": str(self.store.revision)}, "items": items}

    async def list_pages(self, resource: str, namespace: str | None = None, *,
                         label_selector: str = "", field_selector: str = "",
                         page_size: int = 500) -> Obj:
        return await self.list(resource, namespace, label_selector=label_selector,
                               field_selector=field_selector)

    @_noting_errors
    async def update(self, obj: Obj, *, field_validation: str = "Warn") -> Obj:
        return await self._write("update", obj)

    @_noting_errors
    async def update_status(self, obj: Obj) -> Obj:
        return await self._write("update_status", obj)

    @_noting_errors
    async def delete(self, resource: str, name: str, namespace: str | None = None, *,
                     grace_period_seconds: int | None = None, uid: str | None = None,
                     resource_version: str | None = None,
                     propagation_policy: str | None = None) -> Obj:
        action = Action("delete", resource, namespace, name, options={
            "grace_period_seconds": grace_period_seconds, "uid": uid,
            "resource_version": resource_version, "propagation_policy": propagation_policy})
        if (reply := self._react(action)) is not None:
            return reply
        current = self._current(resource, namespace, name)
        meta = current["metadata"]
        for given, have, what in ((uid, meta.get("uid"), "UID"),
                                  (resource_version, meta.get("resourceVersion"),
                                   "ResourceVersion")):
            if given and given != have:
                raise ApiError.conflict(resource, name, f"Precondition failed: {what} in "
                                        f"precondition: {given}, {what} in object meta: {have}")
        is_pod = lookup(resource).resource == "pods"
        graceful = bool(is_pod and current.get("spec", {}).get("nodeName")
                        and grace_period_seconds != 0)
        if not meta.get("finalizers") and not graceful:
            self._remove(self._key_of(current))
            return {"object": copy.deepcopy(current), "deleted": True}
        body = copy.deepcopy(current)
        body["metadata"].setdefault("deletionTimestamp", rfc3339(self.clock.now()))
        if is_pod:  # its kubelet deletes it again with grace 0 once its containers stopped
            grace = 0
            if graceful:
                grace = grace_period_seconds if grace_period_seconds is not None else int(
                    current["spec"].get("terminationGracePeriodSeconds", 30))
            body["metadata"]["deletionGracePeriodSeconds"] = min(
                grace, meta.get("deletionGracePeriodSeconds", grace))
        if body != current:
            current = self._put(self._key_of(body), body, "MODIFIED")
        return {"object": copy.deepcopy(current), "deleted": False}

    @_noting_errors
    async def bind(self, namespace: str, name: str, node_name: str, *,
                   uid: str | None = None) -> Obj:
        binding: Obj = {"apiVersion": "v1", "kind": "Binding",
                        "metadata": {"name": name, "namespace": namespace},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
        action = Action("bind", "pods", namespace, name, binding, {"uid": uid})
        if (reply := self._react(action)) is not None:
            return reply
        pod = copy.deepcopy(self._current("pods", namespace, name))
        if uid and pod["metadata"].get("uid") != uid:
            raise ApiError.conflict("pods", name, "the pod's UID does not match the binding")
        if pod["spec"].get("nodeName"):
            raise ApiError.conflict("pods/binding", name, f"pod {name} is already assigned "
                                    f'to node "{pod["spec"]["nodeName"]}"')
        pod["spec"]["nodeName"] = node_name
        return copy.deepcopy(self._put(self._key_of(pod), pod, "MODIFIED"))

    @_noting_errors
    async def evict(self, namespace: str, name: str, *,
                    grace_period_seconds: int | None = None) -> Obj:
        action = Action("evict", "pods", namespace, name,
                        options={"grace_period_seconds": grace_period_seconds})
        if (reply := self._react(action)) is not None:
            return reply
        return await self.delete("pods", name, namespace,
                                 grace_period_seconds=grace_period_seconds)

    @_noting_errors
    async def history(self, resource: str, name: str,
                      namespace: str | None = None) -> builtins.list[Obj]:
        if (reply := self._react(Action("history", resource, namespace, name))) is not None:
            return list(reply["items"])
        key = self._key(resource, namespace, name)
        return [{"revision": e.revision, "type": e.type, "object": copy.deepcopy(e.object)}
                for e in self.store.log if self._key_of(e.object) == key]

    @_noting_errors
    async def create_token(self, namespace: str, name: str, request: Obj) -> Obj:
        action = Action("create_token", "serviceaccounts", namespace, name,
                        copy.deepcopy(request))
        if (reply := self._react(action)) is not None:
            return reply
        self._current("serviceaccounts", namespace, name)
        seconds = int(request.get("spec", {}).get("expirationSeconds") or 3600)
        return {**copy.deepcopy(request), "status": {
            "token": f"token-{namespace}-{name}-{next(self.store.names)}",
            "expirationTimestamp": rfc3339(self.clock.now() + seconds)}}

    @_noting_errors
    async def pod_metrics(self, namespace: str, *,
                          label_selector: str = "") -> builtins.list[Obj]:
        action = Action("pod_metrics", "pods", namespace,
                        options={"label_selector": label_selector})
        if (reply := self._react(action)) is not None:
            return list(reply["items"])
        selector = LabelSelector.parse(label_selector)
        return [copy.deepcopy(m) for m in self.metrics
                if m["metadata"].get("namespace") == namespace
                and selector.matches(m["metadata"].get("labels") or {})]

    async def discovery(self) -> builtins.list[Obj]:
        return [{"kind": k.kind, "apiVersion": k.api_version, "name": k.resource,
                 "namespaced": k.namespaced, "shortNames": list(k.short_names)}
                for k in KINDS]

    async def watch(self, resource: str, namespace: str | None = None, *,
                    resource_version: str = "", label_selector: str = "",
                    field_selector: str = "", name: str = "",
                    allow_bookmarks: bool = True, timeout_seconds: int | None = None,
                    coalesce: bool = False) -> AsyncGenerator[WatchEvent, None]:
        self.actions.append(Action("watch", resource, namespace, name, options={
            "resource_version": resource_version, "label_selector": label_selector,
            "field_selector": field_selector, "coalesce": coalesce}))
        info = lookup(resource)
        matches = self._matcher(info.kind, label_selector, field_selector)
        ns = namespace if info.namespaced else None

        def wanted(obj: Obj) -> bool:
            meta = obj["metadata"]
            return ((ns is None or meta.get("namespace") == ns)
                    and (not name or meta.get("name") == name) and matches(obj))

        if resource_version in ("", "0"):  # the current state first, as synthetic ADDEDs
            for obj in self.objects(info.resource, ns):
                if wanted(obj):
                    yield WatchEvent("ADDED", copy.deepcopy(obj))
            since = self.store.revision
        else:
            since = int(resource_version)
        async with asyncio.timeout(timeout_seconds):
            while True:
                event = next((e for e in self.store.log if e.revision > since), None)
                if event is None:
                    self.store.changed.clear()
                    await self.store.changed.wait()
                    continue
                since = event.revision
                if event.resource == info.resource and wanted(event.object):
                    yield WatchEvent(event.type, copy.deepcopy(event.object))

    # -- the store -------------------------------------------------------------------------

    def _react(self, action: Action) -> Obj | None:
        self.actions.append(action)
        for verb, resource, reactor in self._reactors:
            if verb in ("*", action.verb) and resource in ("*", action.resource):
                reply = reactor(action)
                if reply is not None:
                    return reply
        return None

    @staticmethod
    def _key(resource: str, namespace: str | None, name: str) -> Key:
        info = lookup(resource)
        return info.resource, (namespace or "default") if info.namespaced else None, name

    def _key_of(self, obj: Obj) -> Key:
        meta = obj.get("metadata", {})
        return self._key(lookup(str(obj.get("kind", ""))).resource, meta.get("namespace"),
                         str(meta.get("name", "")))

    def _current(self, resource: str, namespace: str | None, name: str) -> Obj:
        obj = self.store.objects.get(self._key(resource, namespace, name))
        if obj is None:
            raise ApiError.not_found(lookup(resource).resource, name)
        return obj

    def _matcher(self, kind: str, label_selector: str,
                 field_selector: str) -> Callable[[Obj], bool]:
        labels = LabelSelector.parse(label_selector)
        fields = FieldSelector.parse(field_selector, kind=kind)
        return lambda obj: (labels.matches(obj["metadata"].get("labels") or {})
                            and fields.matches(obj))

    async def _write(self, verb: str, obj: Obj) -> Obj:
        info = lookup(str(obj.get("kind", "")))
        meta = obj.get("metadata", {})
        action = Action(verb, info.resource, meta.get("namespace"), str(meta.get("name", "")),
                        copy.deepcopy(obj))
        if (reply := self._react(action)) is not None:
            return reply
        current = self._current(info.resource, meta.get("namespace"), str(meta.get("name")))
        sent = meta.get("resourceVersion")
        if sent and sent != current["metadata"].get("resourceVersion"):
            raise ApiError.conflict(info.resource, str(meta.get("name")), "the object has "
                                    "been modified; please apply your changes to the latest "
                                    "version and try again")
        if verb == "update_status":
            body = {**copy.deepcopy(current), "status": copy.deepcopy(obj.get("status", {}))}
        else:
            body = copy.deepcopy(obj)
            if info.has_status:
                body.pop("status", None)
                if "status" in current:
                    body["status"] = copy.deepcopy(current["status"])
            for kept in ("uid", "creationTimestamp", "deletionTimestamp",
                         "deletionGracePeriodSeconds"):
                if kept in current["metadata"]:
                    body["metadata"][kept] = current["metadata"][kept]
        key = self._key_of(body)
        gone = body["metadata"].get("deletionTimestamp") and not body["metadata"].get(
            "finalizers") and body["metadata"].get("deletionGracePeriodSeconds", 0) == 0
        if gone:  # the last finalizer went (a pod that is not still stopping)
            self._remove(key)
            return copy.deepcopy(body)
        return copy.deepcopy(self._put(key, body, "MODIFIED"))

    def _put(self, key: Key, obj: Obj, type_: str) -> Obj:
        """Store `obj` (owned by the store from now on) at the next revision."""
        self.store.revision += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.store.revision)
        self.store.objects[key] = obj
        self._record(key[0], type_, obj)
        return obj

    def _remove(self, key: Key) -> None:
        obj = self.store.objects.pop(key)
        self.store.revision += 1
        gone = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.store.revision)}}
        self._record(key[0], "DELETED", gone)

    def _record(self, resource: str, type_: str, obj: Obj) -> None:
        self.store.log.append(_Event(self.store.revision, resource, type_, copy.deepcopy(obj)))
        self.store.changed.set()



def fail_with(error: ApiError) -> Reactor:
    """A reactor that fails every call it sees with `error` (an apiserver that is down:
    `fail_with(ApiError(Reason.SERVICE_UNAVAILABLE, ...))`)."""
    def react(_action: Action) -> Obj | None:
        raise error
    return react



def conflicting(client: FakeClient, *, times: int = 1) -> Reactor:
    """A reactor: the next `times` writes it sees fail with Conflict, as if someone else
    wrote the object just before (its stored resourceVersion moves on)."""
    left = [times]

    def react(action: Action) -> Obj | None:
        if not left[0]:
            return None
        left[0] -= 1
        current = client.stored(action.resource, action.name, action.namespace)
        if current is not None:
            client.add(current)
        raise ApiError.conflict(action.resource, action.name, "the object has been modified; "
                                "please apply your changes to the latest version and try "
                                "again")
    return react

if TYPE_CHECKING:
    # mypy checks here that the fake has every verb of the protocol, as declared.
    _SATISFIES_CLIENT: type[Client] = FakeClient
