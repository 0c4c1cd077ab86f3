"""The stored ValidatingAdmissionPolicies and their bindings as the plugin uses them
(Kubernetes' `policy/generic` policy source): each policy with the bindings that name it,
parsed again only when one of them changed, and the param objects a binding refers to
(`ParamSource`), read from a watch-fed lookup per param kind started on first use — the
informer Kubernetes starts per paramKind — with a live read when the copy has not seen the
object (yet), as Kubernetes' dispatcher falls back to the API.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skiff.api.errors import ApiError
from skiff.api.kinds import KindInfo, lookup_kind, served_versions, storage_prefix
from skiff.api.selectors import LabelSelector
from skiff.api.types import Obj, ObjView
from skiff.apiserver.storage.interface import Storage
from skiff.apiserver.storage.lookups import Lookup
from skiff.apiserver.storage.watchcache import WatchCache

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Validation:
    expression: str
    message: str = ""
    message_expression: str = ""
    reason: str = ""


@dataclass(frozen=True)
class Policy:
    """One ValidatingAdmissionPolicy with v1 defaults applied."""

    name: str
    failure_policy: str
    match_constraints: ObjView
    param_kind: tuple[str, str] | None  # (apiVersion, kind)
    validations: tuple[Validation, ...]
    match_conditions: tuple[tuple[str, str], ...]  # (name, expression)
    variables: tuple[tuple[str, str], ...]  # (name, expression), in order
    audit_annotations: tuple[tuple[str, str], ...]  # (key, valueExpression)

    @property
    def ignores_failures(self) -> bool:
        return self.failure_policy == "Ignore"


@dataclass(frozen=True)
class Binding:
    """One ValidatingAdmissionPolicyBinding."""

    name: str
    policy_name: str
    actions: tuple[str, ...]
    match_resources: ObjView | None
    param_ref: ObjView | None


@dataclass(frozen=True)
class PolicyHook:
    """A policy and its bindings (by name), in Kubernetes' order."""

    policy: Policy
    bindings: tuple[Binding, ...]


def _pairs(items: Any, first: str, second: str) -> tuple[tuple[str, str], ...]:
    return tuple((str(i.get(first) or ""), str(i.get(second) or ""))
                 for i in items or [] if isinstance(i, Mapping))


def policy_of(obj: ObjView) -> Policy:
    spec: ObjView = obj.get("spec") or {}
    kind = spec.get("paramKind")
    return Policy(
        name=str(obj["metadata"]["name"]),
        failure_policy=str(spec.get("failurePolicy") or "Fail"),
        match_constraints=spec.get("matchConstraints") or {},
        param_kind=(str(kind.get("apiVersion") or ""), str(kind.get("kind") or ""))
        if isinstance(kind, Mapping) else None,
        validations=tuple(
            Validation(str(v.get("expression") or ""), str(v.get("message") or ""),
                       str(v.get("messageExpression") or ""), str(v.get("reason") or ""))
            for v in spec.get("validations") or [] if isinstance(v, Mapping)),
        match_conditions=_pairs(spec.get("matchConditions"), "name", "expression"),
        variables=_pairs(spec.get("variables"), "name", "expression"),
        audit_annotations=_pairs(spec.get("auditAnnotations"), "key", "valueExpression"))


def binding_of(obj: ObjView) -> Binding:
    spec: ObjView = obj.get("spec") or {}
    match, ref = spec.get("matchResources"), spec.get("paramRef")
    return Binding(
        name=str(obj["metadata"]["name"]), policy_name=str(spec.get("policyName") or ""),
        actions=tuple(str(a) for a in spec.get("validationActions") or []),
        match_resources=match if isinstance(match, Mapping) else None,
        param_ref=ref if isinstance(ref, Mapping) else None)


def hooks_of(policies: list[Obj], bindings: list[Obj]) -> list[PolicyHook]:
    """Every policy that has bindings, by name, each with its bindings by name (a binding
    of a policy that does not exist does nothing)."""
    by_policy: dict[str, list[Binding]] = {}
    for raw in sorted(bindings, key=lambda b: str(b["metadata"]["name"])):
        binding = binding_of(raw)
        by_policy.setdefault(binding.policy_name, []).append(binding)
    hooks = []
    for raw in sorted(policies, key=lambda p: str(p["metadata"]["name"])):
        policy = policy_of(raw)
        if policy.name in by_policy:
            hooks.append(PolicyHook(policy, tuple(by_policy[policy.name])))
    return hooks


def _version_key(objects: list[Obj]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(o["metadata"]["name"]),
                         str(o["metadata"].get("resourceVersion", ""))) for o in objects))


class PolicySource:
    """The policy hooks from the watch-fed lookups of policies and bindings (a policy or
    binding written a moment ago applies to the next request)."""

    def __init__(self, policies: Lookup, bindings: Lookup) -> None:
        self._policies = policies
        self._bindings = bindings
        self._key: tuple[Any, ...] = ()
        self._hooks: list[PolicyHook] = []

    async def hooks(self) -> list[PolicyHook]:
        policies = await self._policies.values()
        bindings = await self._bindings.values() if policies else []
        key = (_version_key(policies), _version_key(bindings))
        if key != self._key:
            self._hooks = hooks_of(policies, bindings)
            self._key = key
        return self._hooks


class ParamKindUnknown(Exception):
    """A paramKind no served resource has: `failed to find resource referenced by
    paramKind: '<group/version>, Kind=<kind>'`."""

    def __init__(self, api_version: str, kind: str) -> None:
        group, _, version = api_version.rpartition("/")
        super().__init__("failed to find resource referenced by paramKind: "
                         f"'{group}/{version}, Kind={kind}'")


class ParamSource:
    """The param objects of every paramKind in use, each kind's copy kept by a `Lookup`
    started the first time a binding needs it; `run` keeps them current."""

    def __init__(self, storage: Storage, cache: WatchCache) -> None:
        self._storage = storage
        self._cache = cache
        self._lookups: dict[str, Lookup] = {}
        self._started: asyncio.Queue[Lookup] = asyncio.Queue()

    def resolve(self, api_version: str, kind: str) -> KindInfo:
        """The resource of a paramKind; ParamKindUnknown when none serves it."""
        try:
            info = lookup_kind(api_version, kind)
        except ApiError:
            raise ParamKindUnknown(api_version, kind) from None
        if all(v.api_version != api_version for v in served_versions(info)):
            raise ParamKindUnknown(api_version, kind)
        return info

    def _lookup(self, info: KindInfo) -> Lookup:
        found = self._lookups.get(info.ref)
        if found is None or found.info != info:
            found = self._lookups[info.ref] = Lookup(info.ref, self._storage, self._cache)
            self._started.put_nowait(found)
        return found

    async def get(self, info: KindInfo, namespace: str, name: str) -> Obj | None:
        key = f"{namespace}/{name}" if info.namespaced else name
        return await self._lookup(info).get(key)

    async def select(self, info: KindInfo, namespace: str, selector: LabelSelector
                     ) -> list[Obj]:
        """The objects of `info` (in `namespace`, when namespaced) whose labels match."""
        source = self._lookup(info)
        if source.synced:
            objects = list(source.items.values())
        else:
            kvs, _ = await self._storage.list(storage_prefix(info, namespace or None))
            objects = [kv.obj for kv in kvs if kv.obj]
        return sorted((o for o in objects
                       if (not info.namespaced or o["metadata"].get("namespace") == namespace)
                       and selector.matches(o["metadata"].get("labels") or {})),
                      key=lambda o: str(o["metadata"]["name"]))

    async def run(self) -> None:
        """Run each param kind's lookup from the moment it is first asked for."""
        async with asyncio.TaskGroup() as tg:
            while True:
                source = await self._started.get()
                tg.create_task(source.run(), name=f"lookup-params-{source.info.ref}")
