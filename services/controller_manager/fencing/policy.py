"""Whether a node should be fenced now (SPEC FN1), as a pure function of the cached objects.

Fencing's three steps are detect, decide, fence; this module is the first two. A node is
*partitioned* once its NodeReady condition is Unknown (node lifecycle sets it when the
kubelet stops renewing its Lease); the partition is counted from that condition's
`lastTransitionTime` — or from the node's last unfencing, if later — so the decision is the
same after a controller-manager restart or a leader change. It is fenced when the partition
has lasted `fencing-delay`, its fence agent (annotation `skiff.io/fence-agent`, else
`--default-fence-agent`) is not `none`, and it runs at least one pod that opts in
(annotation `skiff.io/fencing: "true"`, or StatefulSet membership unless `"false"`) with a
priority of at least `--fencing-min-priority`.

PodDisruptionBudgets never block a fence: fencing is recovery from a failure that already
happened, not a voluntary disruption — the pods on a partitioned node are unavailable
whatever we do. The verdict counts the pods a budget covers so the Fence can say so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from skiff.api import LabelSelector, get_condition, is_pod_terminal
from skiff.api.wellknown import FENCE_AGENT_ANNOTATION, FENCING_ANNOTATION, UNFENCED_AT_ANNOTATION
from skiff.clock import parse_rfc3339, rfc3339
from skiff.controller_manager.informers import controller_ref

NO_AGENT = "none"
AGENTS = ("power", "network", "storage")


@dataclass(frozen=True)
class FencingPolicy:
    """The policy knobs, from the controller-manager's settings."""

    delay: float
    default_agent: str = NO_AGENT
    min_priority: int = 0


@dataclass(frozen=True)
class Verdict:
    """`fence` says what to do; `why` says why (logs, Events, the Fence's reason);
    `recheck_in` is set while only the delay is missing."""

    fence: bool
    why: str
    agent: str = ""
    partitioned_since: float | None = None
    recheck_in: float | None = None
    pods: tuple[str, ...] = ()
    pdb_covered: int = 0


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _annotation(obj: Mapping[str, Any], key: str) -> str | None:
    value = (_meta(obj).get("annotations") or {}).get(key)
    return None if value is None else str(value)


def fence_agent(node: Mapping[str, Any], *, default: str) -> str:
    """The node's agent: its annotation, else the default; anything unknown is `none`
    (a typo must never power a node off with an agent nobody configured)."""
    agent = (_annotation(node, FENCE_AGENT_ANNOTATION) or default).strip()
    return agent if agent in AGENTS else NO_AGENT


def opts_in(pod: Mapping[str, Any]) -> bool:
    """`skiff.io/fencing: "true"` opts in, `"false"` opts out; StatefulSet pods are in by
    default (at-most-one identities are what fencing is for)."""
    value = _annotation(pod, FENCING_ANNOTATION)
    if value is not None:
        return value.strip().lower() == "true"
    ref = controller_ref(dict(pod))
    return ref is not None and ref.get("kind") == "StatefulSet"


def priority(pod: Mapping[str, Any]) -> int:
    return int((pod.get("spec") or {}).get("priority") or 0)


def partitioned_since(node: Mapping[str, Any]) -> float | None:
    """Epoch seconds from which the node counts as partitioned, or None if it is not:
    NodeReady Unknown since its last transition, restarted by an unfencing."""
    ready = get_condition(node, "Ready")
    if ready is None or ready.get("status") != "Unknown":
        return None
    stamp = ready.get("lastTransitionTime")
    since = parse_rfc3339(str(stamp)) if stamp else 0.0
    unfenced = _annotation(node, UNFENCED_AT_ANNOTATION)
    if unfenced:
        since = max(since, parse_rfc3339(unfenced))
    return since


def pdb_covered(pods: Iterable[Mapping[str, Any]], pdbs: Iterable[Mapping[str, Any]]) -> int:
    """How many of `pods` some PodDisruptionBudget of their namespace selects."""
    selectors = [(_meta(b).get("namespace"),
                  LabelSelector.from_dict((b.get("spec") or {}).get("selector")))
                 for b in pdbs]
    count = 0
    for pod in pods:
        ns, labels = _meta(pod).get("namespace"), _meta(pod).get("labels") or {}
        if any(ns == sel_ns and not sel.empty and sel.matches(labels)
               for sel_ns, sel in selectors):
            count += 1
    return count


def decide(*, node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]],
           pdbs: Iterable[Mapping[str, Any]] = (), policy: FencingPolicy,
           now: float) -> Verdict:
    """Should `node` (with `pods` bound to it) be fenced at `now`?"""
    since = partitioned_since(node)
    if since is None:
        return Verdict(False, "node is not partitioned (NodeReady is not Unknown)")
    agent = fence_agent(node, default=policy.default_agent)
    if agent == NO_AGENT:
        return Verdict(False, "fence agent is none", partitioned_since=since)
    live = [p for p in pods if not is_pod_terminal(p)]
    opted = [p for p in live if opts_in(p)]
    if not opted:
        return Verdict(False, "no pod on the node opts in to fencing", agent=agent,
                       partitioned_since=since)
    eligible = [p for p in opted if priority(p) >= policy.min_priority]
    if not eligible:
        return Verdict(False, f"no opted-in pod has priority >= {policy.min_priority}",
                       agent=agent, partitioned_since=since)
    names = tuple(sorted(f"{_meta(p).get('namespace')}/{_meta(p).get('name')}"
                         for p in eligible))
    waited = now - since
    if waited < policy.delay:
        return Verdict(False, f"partitioned for {waited:.1f}s of {policy.delay:g}s",
                       agent=agent, partitioned_since=since,
                       recheck_in=policy.delay - waited, pods=names)
    return Verdict(True, f"NodeReady Unknown since {rfc3339(since)} (partitioned)",
                   agent=agent, partitioned_since=since, pods=names,
                   pdb_covered=pdb_covered(live, pdbs))
