"""RBAC escalation prevention (SPEC AU6): nobody grants a permission he does not hold.

Kubernetes' RBAC storage refuses a Role or ClusterRole write whose rules the writer does
not hold himself, and a RoleBinding or ClusterRoleBinding whose role's rules he does not
hold, so that rights over Roles and RoleBindings in one namespace do not become rights over
the cluster. The registry calls `EscalationCheck.admit` on every create and update of the
four RBAC kinds (every route: HTTP POST/PUT/PATCH and server-side apply, gRPC); it asks,
in Kubernetes' order:

- `system:masters` (and the apiserver itself, writing its bootstrap policy without a
  request user) may write anything;
- an update that changes only what the garbage collector changes (ownerReferences,
  finalizers) is not checked;
- a Role/ClusterRole write is allowed with the `escalate` verb on `roles`/`clusterroles`
  (the object's name on an update, no name on a create, as Kubernetes' request info has
  it); a binding write with the `bind` verb on the role it references, in the binding's
  namespace (`resourceNames` may name the role);
- otherwise every rule granted must be covered by the rules the writer holds through RBAC
  in the object's namespace (cluster-wide for the cluster-scoped kinds), else 403 with
  Kubernetes' message listing what is missing; a binding to a role that does not exist is
  404; a ClusterRole with an `aggregationRule` needs `*` on everything.

The pure part (`covers`, `compact_rules`, `compact_string`, `not_held`) is Kubernetes'
rule-covering logic over plain PolicyRule dicts; the rules held come from the RBAC
authorizer's snapshot, re-read when it would refuse, as the authorizer does for denials.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from skiff.api import ApiError
from skiff.api.kinds import KindInfo
from skiff.api.types import Obj
from skiff.apiserver.auth.bootstrappolicy import RBAC_GROUP
from skiff.apiserver.auth.context import current_user
from skiff.auth import MASTERS_GROUP, Attributes, Authorizer, RbacRules, UserInfo

# What a ClusterRole's aggregationRule may gather: anything (Kubernetes' fullAuthority).
FULL_AUTHORITY: list[Obj] = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                             {"nonResourceURLs": ["*"], "verbs": ["*"]}]
AGGREGATION_RULE_MESSAGE = "must have cluster-admin privileges to use the aggregationRule"
_ROLE_KINDS = frozenset({"Role", "ClusterRole"})
_BINDING_KINDS = frozenset({"RoleBinding", "ClusterRoleBinding"})
# Fields the garbage collector writes; an update changing only these is never checked.
_GC_FIELDS = ("ownerReferences", "finalizers", "selfLink", "resourceVersion")


# -- covering: Kubernetes' rbac/validation Covers, pure ---------------------------------------


def _strings(rule: Obj, key: str) -> list[str]:
    return [str(v) for v in rule.get(key) or ()]


def breakdown_rule(rule: Obj) -> list[Obj]:
    """`rule` as rules of one group, one resource, one verb and at most one resource name
    each, then one per non-resource URL and verb (Kubernetes' BreakdownRule)."""
    verbs, names = _strings(rule, "verbs"), _strings(rule, "resourceNames")
    subrules: list[Obj] = []
    for group in _strings(rule, "apiGroups"):
        for resource in _strings(rule, "resources"):
            for verb in verbs:
                base: Obj = {"apiGroups": [group], "resources": [resource], "verbs": [verb]}
                subrules += ([{**base, "resourceNames": [name]} for name in names] if names
                             else [base])
    subrules += [{"nonResourceURLs": [url], "verbs": [verb]}
                 for url in _strings(rule, "nonResourceURLs") for verb in verbs]
    return subrules


def _resources_cover(held: Sequence[str], wanted: Sequence[str]) -> bool:
    if "*" in held or set(wanted) <= set(held):
        return True
    for resource in wanted:
        if resource in held:
            continue
        if "/" not in resource:
            return False
        if "*/" + resource.split("/", 1)[1] not in held:
            return False
    return True


def _url_covers(held: str, wanted: str) -> bool:
    return held == wanted or (held.endswith("*") and wanted.startswith(held.rstrip("*")))


def rule_covers(owner: Obj, subrule: Obj) -> bool:
    """Whether `owner` allows everything `subrule` (one of `breakdown_rule`'s) does."""
    verbs, groups = _strings(owner, "verbs"), _strings(owner, "apiGroups")
    owner_names = _strings(owner, "resourceNames")
    wanted_names = _strings(subrule, "resourceNames")
    owner_urls = _strings(owner, "nonResourceURLs")
    return (("*" in verbs or set(_strings(subrule, "verbs")) <= set(verbs))
            and ("*" in groups or set(_strings(subrule, "apiGroups")) <= set(groups))
            and _resources_cover(_strings(owner, "resources"), _strings(subrule, "resources"))
            and (not owner_names or (bool(wanted_names)
                                     and set(wanted_names) <= set(owner_names)))
            and all(any(_url_covers(held, url) for held in owner_urls)
                    for url in _strings(subrule, "nonResourceURLs")))


def covers(owner_rules: Iterable[Obj], servant_rules: Iterable[Obj]) -> tuple[bool, list[Obj]]:
    """Whether `owner_rules` allow everything `servant_rules` do, and the broken-down rules
    they do not (Kubernetes' Covers)."""
    owners = list(owner_rules)
    missing = [sub for rule in servant_rules for sub in breakdown_rule(rule)
               if not any(rule_covers(owner, sub) for owner in owners)]
    return not missing, missing


def compact_rules(rules: Iterable[Obj]) -> list[Obj]:
    """Rules of one group and one resource (and at most one name) merged into one rule
    with all their verbs; others kept as they are (Kubernetes' CompactRules)."""
    compacted: list[Obj] = []
    simple: dict[tuple[str, str, tuple[str, ...]], Obj] = {}
    for rule in rules:
        groups, resources = _strings(rule, "apiGroups"), _strings(rule, "resources")
        names = _strings(rule, "resourceNames")
        if (len(groups) != 1 or len(resources) != 1 or len(names) > 1
                or set(rule) - {"apiGroups", "resources", "verbs", "resourceNames"}):
            compacted.append(rule)
            continue
        key = (groups[0], resources[0], tuple(names))
        if key not in simple:
            simple[key] = {**rule, "verbs": _strings(rule, "verbs")}
            continue
        verbs = simple[key]["verbs"]
        verbs += [v for v in _strings(rule, "verbs") if v not in verbs]
    return compacted + list(simple.values())


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
               "\v": "\\v", '"': '\\"', "\\": "\\\\"}


def go_quote(text: str) -> str:
    """`text` as Go's %q prints a string."""
    out = []
    for ch in text:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def go_quote_list(values: Iterable[str]) -> str:
    """A list of strings as Go's %q prints a []string: `["a" "b"]`."""
    return "[" + " ".join(go_quote(v) for v in values) + "]"


def compact_string(rule: Obj) -> str:
    """A rule as Kubernetes' escalation messages print it:
    `{APIGroups:[""], Resources:["pods"], Verbs:["get"]}`."""
    parts = [f"{label}:{go_quote_list(_strings(rule, key))}"
             for label, key in (("APIGroups", "apiGroups"), ("Resources", "resources"),
                                ("NonResourceURLs", "nonResourceURLs"),
                                ("ResourceNames", "resourceNames"), ("Verbs", "verbs"))
             if rule.get(key)]
    return "{" + ", ".join(parts) + "}"


# -- the rules a user holds, and what he may not grant ---------------------------------------


def role_not_found(ref: Obj) -> ApiError:
    """A roleRef's role that does not exist, as Kubernetes' registry says it."""
    resource = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
    return ApiError.not_found(resource, str(ref.get("name", "")), group=RBAC_GROUP)


def _resolution_errors(rbac: RbacRules, user: UserInfo, namespace: str) -> list[str]:
    errors: list[str] = []
    for ref in rbac.unresolved_role_refs(user, namespace):
        kind = ref.get("kind")
        text = (role_not_found(ref).message if kind in _ROLE_KINDS
                else f"unsupported role reference kind: {go_quote(str(kind or ''))}")
        if text not in errors:
            errors.append(text)
    return errors


def not_held(rbac: RbacRules, user: UserInfo, namespace: str,
             rules: Iterable[Obj]) -> str | None:
    """None when the rules `user` holds through RBAC in `namespace` ("" for cluster-wide)
    cover `rules`; else Kubernetes' ConfirmNoEscalation message naming what is missing."""
    held = rbac.rules_for(user, namespace)
    covered, missing = covers(held, rules)
    if covered:
        return None
    lines = sorted({compact_string(rule) for rule in compact_rules(missing)})
    message = (f"user {go_quote(user.name)} (groups={go_quote_list(user.groups)}) is "
               "attempting to grant RBAC permissions not currently held:\n" + "\n".join(lines))
    errors = _resolution_errors(rbac, user, namespace)
    if errors:  # Go's %v of a []error holding one aggregate error
        joined = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        message += f"; resolution errors: [{joined}]"
    return message


def _has_aggregation_rule(role: Obj | None) -> bool:
    return bool(((role or {}).get("aggregationRule") or {}).get("clusterRoleSelectors"))


def _namespace(info: KindInfo, obj: Obj) -> str:
    return str(obj["metadata"].get("namespace") or "") if info.namespaced else ""


def role_escalation(rbac: RbacRules, *, user: UserInfo, info: KindInfo, obj: Obj,
                    old: Obj | None) -> ApiError | None:
    """403 when `user` may not write the Role or ClusterRole `obj` (replacing `old`):
    it grants rules he does not hold, or he sets or changes an aggregationRule without
    holding everything."""
    name = str(obj["metadata"].get("name", ""))
    message = not_held(rbac, user, _namespace(info, obj), obj.get("rules") or ())
    if message is not None:
        return ApiError.forbidden(info.resource, name, message, group=info.group)
    if info.kind == "ClusterRole" and (_has_aggregation_rule(obj)
                                       or _has_aggregation_rule(old)):
        if not_held(rbac, user, "", FULL_AUTHORITY) is not None:
            return ApiError.forbidden(info.resource, name, AGGREGATION_RULE_MESSAGE,
                                      group=info.group)
    return None


def binding_escalation(rbac: RbacRules, *, user: UserInfo, info: KindInfo,
                       obj: Obj) -> ApiError | None:
    """404 when the role `obj` binds does not exist, 403 when `user` does not hold its
    rules in the binding's namespace (cluster-wide for a ClusterRoleBinding)."""
    namespace = _namespace(info, obj)
    ref = obj.get("roleRef") or {}
    rules = rbac.role_rules(ref, namespace)
    if rules is None:
        return role_not_found(ref)
    message = not_held(rbac, user, namespace, rules)
    if message is None:
        return None
    return ApiError.forbidden(info.resource, str(obj["metadata"].get("name", "")), message,
                              group=info.group)


def only_gc_fields_change(new: Obj, old: Obj) -> bool:
    """Whether an update changes nothing but what the garbage collector writes
    (Kubernetes' IsOnlyMutatingGCFields; the resourceVersion is the update's own)."""
    meta = dict(new.get("metadata") or {})
    old_meta = old.get("metadata") or {}
    for key in _GC_FIELDS:
        if key in old_meta:
            meta[key] = old_meta[key]
        else:
            meta.pop(key, None)
    return {**new, "metadata": meta} == old


# -- the registry's hook ---------------------------------------------------------------------


class RbacSnapshots(Protocol):
    """The RBAC authorizer's view of the four RBAC kinds (auth.rbac.RbacAuthorizer)."""

    async def snapshot(self, *, newer_than: float | None = None) -> RbacRules: ...


class EscalationCheck:
    """AU6 for the registry's create and update of the RBAC kinds: `await admit(info, obj,
    old)` raises Kubernetes' 403 (or the 404 of a missing role) for the request's user."""

    def __init__(self, *, authorizer: Authorizer, rbac: RbacSnapshots) -> None:
        self.authorizer = authorizer
        self.rbac = rbac

    async def admit(self, info: KindInfo, obj: Obj, old: Obj | None, *,
                    request_name: str | None = None) -> None:
        """`request_name`: the name on the request's URL (a server-side apply that creates
        has one, a POST none); by default the object's on an update, none on a create."""
        user = current_user.get()
        if (user is None or MASTERS_GROUP in user.groups
                or info.kind not in _ROLE_KINDS | _BINDING_KINDS):
            return  # insecure mode or the apiserver itself; system:masters
        if old is not None and only_gc_fields_change(obj, old):
            return
        namespace = _namespace(info, obj)
        if info.kind in _ROLE_KINDS:
            # `escalate` is asked for the request's name, so one limited by resourceNames
            # allows no POST, as in Kubernetes
            name = request_name if request_name is not None else (
                str(obj["metadata"].get("name", "")) if old is not None else "")
            if await self._allowed(user, "escalate", group=info.group,
                                   resource=info.resource, namespace=namespace, name=name):
                return
            await self._confirm(lambda rbac: role_escalation(rbac, user=user, info=info,
                                                             obj=obj, old=old))
            return
        ref = obj.get("roleRef") or {}
        if await self._allowed(
                user, "bind", group=str(ref.get("apiGroup") or RBAC_GROUP),
                resource="clusterroles" if ref.get("kind") == "ClusterRole" else "roles",
                namespace=namespace, name=str(ref.get("name", ""))):
            return
        await self._confirm(lambda rbac: binding_escalation(rbac, user=user, info=info,
                                                            obj=obj))

    async def _allowed(self, user: UserInfo, verb: str, *, group: str, resource: str,
                       namespace: str, name: str) -> bool:
        result = await self.authorizer.authorize(Attributes(
            user=user, verb=verb, api_group=group, resource=resource, namespace=namespace,
            name=name))
        return result.allowed

    async def _confirm(self, problem_in: Callable[[RbacRules], ApiError | None]) -> None:
        """Raise `problem_in`'s error unless the RBAC objects allow the write; a refusal is
        decided on objects read after the request arrived, so a Role or binding made a
        moment before (`kubectl apply` of a Role and its RoleBinding) is never missed."""
        asked = time.monotonic()
        problem = problem_in(await self.rbac.snapshot())
        if problem is not None:
            problem = problem_in(await self.rbac.snapshot(newer_than=asked))
        if problem is not None:
            raise problem
