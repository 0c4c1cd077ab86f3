"""The StatefulSet's next actions (SPEC PS4), as a pure function of the set and its pods.

Identities are `<set>-<ordinal>`. The at-most-one rule is structural: a slot whose pod
object still exists — Running, Terminating, anything — is never filled again; a replacement
is planned only once the old object is gone from the API (and the apiserver's
AlreadyExists backs this up). `OrderedReady` creates the next ordinal only when every lower
one is Running and Ready (and, with `minReadySeconds`, available), and removes the highest
surplus ordinal first, one at a time, waiting for each to be gone; `Parallel` does all of
it at once. A failed or succeeded pod is deleted so it can be recreated.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from skiff.api import is_pod_terminal, is_terminating
from skiff.api.types import Obj
from skiff.controller_manager.podutil import is_available, is_running_and_ready

ORDERED_READY, PARALLEL = "OrderedReady", "Parallel"


class Verb(enum.Enum):
    CREATE = "create"
    DELETE = "delete"


@dataclass(frozen=True)
class Action:
    verb: Verb
    ordinal: int


@dataclass(frozen=True)
class Plan:
    actions: tuple[Action, ...]
    waiting_for: str = ""  # why an OrderedReady set stopped, for logs


def ordinal_of(set_name: str, pod: Mapping[str, Any]) -> int | None:
    """The ordinal of `<set>-<n>`, or None for a pod not named like one of the set's."""
    match = re.fullmatch(rf"{re.escape(set_name)}-(\d+)", str(pod["metadata"]["name"]))
    return int(match.group(1)) if match else None


def pods_by_ordinal(set_name: str, pods: Iterable[Obj]) -> dict[int, Obj]:
    found: dict[int, Obj] = {}
    for pod in pods:
        ordinal = ordinal_of(set_name, pod)
        if ordinal is not None:
            found[ordinal] = pod
    return found


def plan(*, replicas: int, policy: str, pods: Mapping[int, Obj], start: int = 0,
         min_ready_seconds: int = 0, now: float = 0.0) -> Plan:
    """What to do next; OrderedReady plans at most one action, and goes past a pod only
    once it is Running and available (Ready for `min_ready_seconds`)."""
    ordered = policy != PARALLEL
    actions: list[Action] = []
    wanted = range(start, start + replicas)
    for ordinal in wanted:
        pod = pods.get(ordinal)
        if pod is None:
            actions.append(Action(Verb.CREATE, ordinal))
            if ordered:
                return Plan(tuple(actions), f"pod {ordinal} to be Running and Ready")
            continue
        if is_terminating(pod):
            if ordered:
                return Plan(tuple(actions), f"pod {ordinal} to be gone (Terminating)")
            continue
        if is_pod_terminal(pod):
            actions.append(Action(Verb.DELETE, ordinal))
            if ordered:
                return Plan(tuple(actions), f"failed pod {ordinal} to be gone")
            continue
        if ordered and not (is_running_and_ready(pod) and is_available(
                pod, min_ready_seconds=min_ready_seconds, now=now)):
            return Plan(tuple(actions), f"pod {ordinal} to be Running and available")
    condemned = sorted((o for o in pods if o not in wanted), reverse=True)
    for ordinal in condemned:
        pod = pods[ordinal]
        if is_terminating(pod):
            if ordered:
                return Plan(tuple(actions), f"pod {ordinal} to be gone (scaling down)")
            continue
        actions.append(Action(Verb.DELETE, ordinal))
        if ordered:
            return Plan(tuple(actions), f"pod {ordinal} to be gone (scaling down)")
    return Plan(tuple(actions))
