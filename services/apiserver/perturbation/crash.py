"""Crash on write (issue 35, item 1's third perturbation), the pure part: which of one
identity's committed writes a Perturbation's `crashOnWrite` counts, and when the k-th has
come. The table counts per Perturbation (by uid, so a recreated one starts again) and
fires once; crasher.py does the killing and the recording.

No I/O: unit-tested with plain dicts.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from skiff.api.kinds import KindInfo
from skiff.api.types import ObjView

# The store sees a PATCH as an update of the merged object: both verbs match either.
_SAME_WRITE = {"update": ("update", "patch"), "patch": ("update", "patch")}


@dataclass(frozen=True)
class CrashOnWrite:
    """After the `after`-th matching write commits, kill `pid` (or the pod's container)."""

    after: int
    resources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    pid: int = 0
    pod: tuple[str, str, str] = ("", "", "")  # namespace, name, container ("" = all)

    def matches(self, info: KindInfo, verb: str, obj: ObjView) -> bool:
        """Whether a committed `verb` write of `obj` (a resource of `info`) counts."""
        if self.verbs and not any(v in self.verbs for v in _SAME_WRITE.get(verb, (verb,))):
            return False
        if self.resources and info.resource not in self.resources and (
                not info.group or f"{info.resource}.{info.group}" not in self.resources):
            return False
        if self.names:
            meta = obj.get("metadata") or {}
            name = str(meta.get("name") or "")
            if name not in self.names and \
                    f"{meta.get('namespace') or ''}/{name}" not in self.names:
                return False
        return True

    def describe(self) -> str:
        if self.pid:
            return f"pid {self.pid}"
        namespace, name, container = self.pod
        return f"pod {namespace}/{name}" + (f" container {container}" if container else "")


def _strings(value: object) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def parse_crash(spec: ObjView) -> CrashOnWrite | None:
    """`spec.crashOnWrite` of a stored Perturbation (None: absent or unusable)."""
    crash = spec.get("crashOnWrite")
    if not isinstance(crash, dict):
        return None
    after, target = crash.get("after"), crash.get("target") or {}
    if not isinstance(after, int) or isinstance(after, bool) or after < 1:
        return None
    pid = target.get("pid") if isinstance(target, dict) else None
    pod = target.get("pod") if isinstance(target, dict) else None
    base = CrashOnWrite(after=after, resources=_strings(crash.get("resources")),
                        verbs=_strings(crash.get("verbs")), names=_strings(crash.get("names")))
    if isinstance(pid, int) and not isinstance(pid, bool) and pid > 1:
        return dataclasses.replace(base, pid=pid)
    if isinstance(pod, dict) and pod.get("namespace") and pod.get("name"):
        return dataclasses.replace(base, pod=(str(pod["namespace"]), str(pod["name"]),
                                              str(pod.get("container") or "")))
    return None


@dataclass
class Counter:
    """Matching committed writes per Perturbation uid, and the uids that already fired."""

    counts: dict[str, int] = field(default_factory=dict)
    fired: set[str] = field(default_factory=set)

    def count(self, uid: str, crash: CrashOnWrite) -> bool:
        """One more matching write for `uid`; True exactly when it is the `after`-th (and
        `uid` never fired before)."""
        if uid in self.fired:
            return False
        n = self.counts.get(uid, 0) + 1
        self.counts[uid] = n
        if n >= crash.after:
            self.fired.add(uid)
            return True
        return False

    def forget(self, live: set[str]) -> None:
        """Drop the counts of Perturbations no longer stored."""
        for uid in [u for u in self.counts if u not in live]:
            del self.counts[uid]
