"""Perturbations from Python: a stale view, missed watch events or a crash on write for one
client identity, declared as skiff.io/v1 Perturbation objects (what `skiff chaos
stale-view|miss-events|crash-on-write|heal` run, and what a controller's tests call).

The apiserver applies a stored Perturbation to that identity's cached reads and watches
(issue 35); this module only writes and deletes the objects, through any `skiff.client`
`Client`. Bad arguments raise `PerturbationError` naming the parameter before anything is
sent; the apiserver's own validation (skiff.api.groups.perturbations) stands behind it.

    name = await stale_view(client, user="system:serviceaccount:shop:operator",
                            lag_revisions=20)
    ...
    await heal(client, name)   # or heal(client): every Perturbation

With `record=True` (or `record_spec` alone) the apiserver also journals the identity's
requests; `record(client, name)` reads that journal back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from skiff.api import ApiError, Reason
from skiff.api.groups.perturbations import EVENT_TYPES, WRITE_VERBS
from skiff.api.types import Obj
from skiff.client import ApiClient, Client

__all__ = ["PerturbationError", "crash_on_write", "heal", "missed_events", "perturbation",
           "record", "record_spec", "stale_view"]

RESOURCE = "perturbations"
API_VERSION = "skiff.io/v1"


class PerturbationError(ValueError):
    """An argument that cannot make a Perturbation: `param` names it, `problem` says why."""

    def __init__(self, param: str, problem: str) -> None:
        super().__init__(f"{param}: {problem}")
        self.param = param
        self.problem = problem


def _subject(user: str | None, group: str | None) -> Obj:
    if (user is None) == (group is None):
        raise PerturbationError("user", "give exactly one of user or group (the identity "
                                        "whose view is perturbed, as RBAC names it)")
    key, value = ("user", user) if user is not None else ("group", group)
    if not value or not value.strip():
        raise PerturbationError(key, "must not be empty")
    return {key: value}


def _positive(param: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or value <= 0):
        raise PerturbationError(param, f"must be a whole number greater than 0, not {value}")


def perturbation(spec: Obj, *, name: str | None, prefix: str) -> Obj:
    """The Perturbation object for `spec`: named `name`, or `<prefix>-<random>` by the
    apiserver (metadata.generateName)."""
    meta: Obj = {"name": name} if name else {"generateName": f"{prefix}-"}
    return {"apiVersion": API_VERSION, "kind": "Perturbation", "metadata": meta,
            "spec": spec}


def _recorded(spec: Obj, record: bool) -> Obj:
    return {**spec, "record": True} if record else spec


def stale_view_spec(*, user: str | None = None, group: str | None = None,
                    revision: int | None = None, lag_revisions: int | None = None,
                    lag_seconds: int | None = None, from_write: int | None = None,
                    record: bool = False) -> Obj:
    """The spec of a stale view: pinned at `revision`, lagging the head by `lag_revisions`
    revisions or `lag_seconds` seconds, or pinned from the identity's own `from_write`-th
    committed write on (at that write's revision - 1: it no longer sees its own write);
    exactly one. `record`: also journal the identity's requests (see `record`)."""
    subject = _subject(user, group)
    choices = {"revision": revision, "lag_revisions": lag_revisions,
               "lag_seconds": lag_seconds, "from_write": from_write}
    given = [param for param, value in choices.items() if value is not None]
    if len(given) != 1:
        raise PerturbationError(given[1] if given else "revision",
                                "give exactly one of revision, lag_revisions, lag_seconds "
                                "or from_write")
    _positive(given[0], choices[given[0]])
    field = {"revision": "revision", "lag_revisions": "lagRevisions",
             "lag_seconds": "lagSeconds", "from_write": "fromWrite"}[given[0]]
    return _recorded({"subject": subject, "staleView": {field: choices[given[0]]}}, record)


def record_spec(*, user: str | None = None, group: str | None = None) -> Obj:
    """The spec of a record only: the identity's requests are journaled, nothing changes
    for it (see `record`)."""
    return {"subject": _subject(user, group), "record": True}


async def record(client: Client, name: str, *, since_seq: int = 0) -> Obj:
    """The `PerturbationRecord` of Perturbation `name` with `record: true`: what its
    identity read, was delivered (watch events and their fate) and wrote, as the apiserver
    `client` talks to served it — entries with a `seq` above `since_seq`, oldest first,
    and `dropped` (older entries no longer kept). With several apiservers (or one started
    with `--processes`) each process journals only what it served itself: ask each, or
    run one single-process apiserver. Entries are in the order that process saw them
    (a write's own watch event may come before the write's entry: order by revision).
    A failed write has `code` and `reason` and no `revision`; a PATCH is journaled as
    the `update` the store makes of it. Over gRPC this is the
    `Record` method; over HTTP `GET /apis/skiff.io/v1/perturbations/NAME/record`."""
    if not isinstance(client, ApiClient):
        raise PerturbationError("client", "the record is read through the apiserver's "
                                          "gRPC API (a skiff.client.ApiClient)")
    return dict(await client.call("Record", {"name": name,
                                             "options": {"sinceSeq": since_seq}}))


def _pattern(resources: Iterable[str], names: Iterable[str]) -> Obj:
    """The `resources` and `names` a perturbation matches (none given: every one)."""
    pattern: Obj = {}
    for param, values in (("resources", resources), ("names", names)):
        items = _unique(values)
        if any(not item.strip() for item in items):
            raise PerturbationError(param, "must not contain an empty string")
        if items:
            pattern[param] = items
    return pattern


def _choices(param: str, values: Iterable[str], allowed: Sequence[str], what: str
             ) -> list[str]:
    """`values` (each once), every one of `allowed`."""
    chosen = _unique(values)
    for value in chosen:
        if value not in allowed:
            raise PerturbationError(param, f"{value!r} is not {what}; use "
                                           f"{', '.join(allowed)}")
    return chosen


def missed_events_spec(*, user: str | None = None, group: str | None = None,
                       resources: Iterable[str] = (), types: Iterable[str] = (),
                       names: Iterable[str] = (), coalesce_seconds: int = 0,
                       record: bool = False) -> Obj:
    """The spec of missed events: the identity's watches skip events of `types` (ADDED,
    MODIFIED, DELETED; none = all) on `resources` (plural or <plural>.<group>; none = all)
    for objects `names` (name or namespace/name; none = all); with `coalesce_seconds` > 0
    they are held that long and only each object's latest state is delivered."""
    subject = _subject(user, group)
    missed = _pattern(resources, names)
    kinds = _choices("types", (t.upper() for t in types), EVENT_TYPES, "an event type")
    if kinds:
        missed["types"] = kinds
    if isinstance(coalesce_seconds, bool) or not isinstance(coalesce_seconds, int) \
            or coalesce_seconds < 0:
        raise PerturbationError("coalesce_seconds", f"must be a whole number of seconds, 0 or "
                                                    f"more, not {coalesce_seconds}")
    if coalesce_seconds:
        missed["coalesceSeconds"] = coalesce_seconds
    return _recorded({"subject": subject, "missedEvents": missed}, record)


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


async def stale_view(client: Client, *, user: str | None = None, group: str | None = None,
                     revision: int | None = None, lag_revisions: int | None = None,
                     lag_seconds: int | None = None, from_write: int | None = None,
                     name: str | None = None, record: bool = False) -> str:
    """Serve `user`'s (or `group`'s) cached reads and watches as of a past revision; returns
    the Perturbation's name (for `heal`)."""
    spec = stale_view_spec(user=user, group=group, revision=revision,
                           lag_revisions=lag_revisions, lag_seconds=lag_seconds,
                           from_write=from_write, record=record)
    created = await client.create(perturbation(spec, name=name, prefix="stale-view"),
                                  field_validation="Strict")
    return str(created["metadata"]["name"])


async def missed_events(client: Client, *, user: str | None = None,
                        group: str | None = None, resources: Iterable[str] = (),
                        types: Iterable[str] = (), names: Iterable[str] = (),
                        coalesce_seconds: int = 0, name: str | None = None) -> str:
    """Make `user`'s (or `group`'s) watches miss matching events (see
    `missed_events_spec`); returns the Perturbation's name (for `heal`)."""
    spec = missed_events_spec(user=user, group=group, resources=resources, types=types,
                              names=names, coalesce_seconds=coalesce_seconds)
    created = await client.create(perturbation(spec, name=name, prefix="missed-events"),
                                  field_validation="Strict")
    return str(created["metadata"]["name"])


def crash_on_write_spec(*, user: str | None = None, group: str | None = None, after: int,
                        resources: Iterable[str] = (), verbs: Iterable[str] = (),
                        names: Iterable[str] = (), pid: int | None = None,
                        pod: tuple[str, str, str | None] | None = None,
                        record: bool = False) -> Obj:
    """The spec of a crash on write: after the identity's `after`-th committed write of
    `verbs` (create, update, patch, delete; none = all) on `resources` for `names` (none =
    all), kill `pid` (a process on the apiserver's host) or `pod` (namespace, name,
    container or None) once."""
    subject = _subject(user, group)
    if isinstance(after, bool) or not isinstance(after, int) or after < 1:
        raise PerturbationError("after", f"must be a whole number greater than 0, not {after}")
    crash: Obj = {"after": after, **_pattern(resources, names)}
    kinds = _choices("verbs", (v.lower() for v in verbs), WRITE_VERBS, "a write verb")
    if kinds:
        crash["verbs"] = kinds
    if (pid is None) == (pod is None):
        raise PerturbationError("pid", "give exactly one of pid or pod (what is killed)")
    if pid is not None:
        if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 1:
            raise PerturbationError("pid", f"must be a process id greater than 1, not {pid}")
        crash["target"] = {"pid": pid}
    else:
        assert pod is not None
        namespace, pod_name, container = pod
        target: Obj = {"namespace": namespace, "name": pod_name}
        if container:
            target["container"] = container
        crash["target"] = {"pod": target}
    return _recorded({"subject": subject, "crashOnWrite": crash}, record)


async def crash_on_write(client: Client, *, user: str | None = None,
                         group: str | None = None, after: int,
                         resources: Iterable[str] = (), verbs: Iterable[str] = (),
                         names: Iterable[str] = (), pid: int | None = None,
                         pod: tuple[str, str, str | None] | None = None,
                         name: str | None = None) -> str:
    """Kill `pid` (or `pod`'s container) once, right after `user`'s (or `group`'s)
    `after`-th matching write commits (see `crash_on_write_spec`); returns the
    Perturbation's name. Its status.crashes says when it fired."""
    spec = crash_on_write_spec(user=user, group=group, after=after, resources=resources,
                               verbs=verbs, names=names, pid=pid, pod=pod)
    created = await client.create(perturbation(spec, name=name, prefix="crash-on-write"),
                                  field_validation="Strict")
    return str(created["metadata"]["name"])


async def heal(client: Client, name: str | None = None) -> list[str]:
    """Delete the Perturbation `name`, or every one when None; returns the names deleted.
    A `name` that does not exist raises the apiserver's NotFound; one deleted by someone
    else meanwhile (when healing all) is skipped."""
    if name is not None:
        await client.delete(RESOURCE, name)
        return [name]
    deleted: list[str] = []
    for item in (await client.list(RESOURCE))["items"]:
        item_name = str(item["metadata"]["name"])
        try:
            await client.delete(RESOURCE, item_name)
        except ApiError as err:
            if err.reason != Reason.NOT_FOUND:
                raise
            continue
        deleted.append(item_name)
    return deleted
