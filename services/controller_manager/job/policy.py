"""A Job's `podFailurePolicy` and indexes, as pure functions (pkg/controller/job).

`match_failure_policy` reads a failed pod the way Kubernetes does: the first rule whose
`onExitCodes` (a container's terminated exit code, `In`/`NotIn`, 0 never matching) or
`onPodConditions` (a condition with that type and status, e.g. the `DisruptionTarget` that
preemption, eviction and the taint manager add) matches decides: `Ignore` (not counted
against backoffLimit), `FailJob`, `FailIndex` or `Count`. No rule matching counts it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from skiff.api.types import Obj


def _exit_codes(pod: Mapping[str, Any], container: str | None) -> list[tuple[str, int]]:
    status = pod.get("status") or {}
    codes = []
    for cs in list(status.get("initContainerStatuses") or []) + list(
            status.get("containerStatuses") or []):
        terminated = (cs.get("state") or {}).get("terminated")
        if terminated is None or (container and cs.get("name") != container):
            continue
        codes.append((str(cs.get("name")), int(terminated.get("exitCode", 0))))
    return codes


def _rule_matches(rule: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    on_codes = rule.get("onExitCodes")
    if on_codes:
        values = {int(v) for v in on_codes.get("values") or []}
        operator = on_codes.get("operator", "In")
        for _, code in _exit_codes(pod, on_codes.get("containerName")):
            if code == 0:
                continue
            if (operator == "In" and code in values) or (
                    operator == "NotIn" and code not in values):
                return True
        return False
    for pattern in rule.get("onPodConditions") or []:
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == pattern.get("type") and cond.get("status") == pattern.get(
                    "status", "True"):
                return True
    return False


def match_failure_policy(policy: Mapping[str, Any] | None, pod: Mapping[str, Any]
                         ) -> tuple[str, Obj | None]:
    """(action, rule) for a failed pod: Count when no rule matches."""
    for rule in (policy or {}).get("rules") or []:
        if _rule_matches(rule, pod):
            return str(rule.get("action", "Count")), dict(rule)
    return "Count", None


def format_indexes(indexes: Iterable[int]) -> str:
    """`1,3-5,7,8`: Kubernetes' completedIndexes notation."""
    ordered = sorted(set(indexes))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        if i == j:
            parts.append(str(ordered[i]))
        else:  # two neighbours are listed, three or more are a range (as Kubernetes)
            parts.append(f"{ordered[i]}{',' if j == i + 1 else '-'}{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def parse_indexes(text: str | None) -> set[int]:
    result: set[int] = set()
    for part in (text or "").split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        try:
            result.update(range(int(low), int(high or low) + 1))
        except ValueError:
            continue
    return result


def success_policy_rule(policy: Mapping[str, Any] | None, completed: set[int]) -> int | None:
    """The index of the first `successPolicy` rule the completed indexes meet, if any.

    A rule with `succeededIndexes` needs those indexes completed (all of them, or
    `succeededCount` of them when both are given); a rule with only `succeededCount` needs
    that many completed indexes."""
    for n, rule in enumerate((policy or {}).get("rules") or []):
        wanted = rule.get("succeededIndexes")
        count = rule.get("succeededCount")
        if wanted is not None:
            indexes = parse_indexes(str(wanted))
            done = len(indexes & completed)
            if (count is None and done == len(indexes)) or (
                    count is not None and done >= int(count)):
                return n
        elif count is not None and len(completed) >= int(count):
            return n
    return None


def failure_backoff(failures: int, *, base: float, limit: float) -> float:
    """The delay before a Job replaces a failed pod: `base × 2^(failures-1)`, capped at
    `limit`; no delay before the first failure."""
    if failures <= 0:
        return 0.0
    return float(min(limit, base * 2 ** min(failures - 1, 32)))
