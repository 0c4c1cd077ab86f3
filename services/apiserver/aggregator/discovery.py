"""Discovery with the aggregated group/versions (kube-aggregator's `apisHandler`): every
group/version an APIService sends to an extension apiserver is listed in `/apis` and
`/apis/<group>` — whether or not it is available now, as kube lists it (kubectl then reports
the one it cannot read) — its versions ordered by `versionPriority`, then by Kubernetes'
version order (GA before beta before alpha, higher numbers first), the first one preferred;
new groups follow the served ones by `groupPriorityMinimum`. `/apis/<group>/<version>`
itself is proxied like any other path of the group/version.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from skiff.api.types import Obj
from skiff.apiserver.aggregator.table import Registration

_KUBE_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")
_STABILITY = {None: 2, "beta": 1, "alpha": 0}


def version_order_key(version: str) -> tuple[int, int, int, int, str]:
    """Sorts ascending into Kubernetes' preference order (`CompareKubeAwareVersionStrings`):
    v2, v1, v1beta2, v1beta1, v1alpha1, then versions of any other form by name."""
    found = _KUBE_VERSION.match(version)
    if found is None:
        return (1, 0, 0, 0, version)
    major, stability, minor = found.groups()
    return (0, -_STABILITY[stability], -int(major), -int(minor or 0), "")


def merge_groups(served: list[Obj], registrations: Iterable[Registration]) -> list[Obj]:
    """`served` (the APIGroup entries this apiserver serves itself) with the remote
    APIServices' group/versions added."""
    remote = [r for r in registrations if not r.local and r.group]
    if not remote:
        return served
    groups = {str(g["name"]): {**g, "versions": list(g["versions"])} for g in served}
    added: dict[str, list[Registration]] = {}
    for reg in remote:
        entry = groups.get(reg.group)
        if entry is None:
            added.setdefault(reg.group, []).append(reg)
        elif all(v["version"] != reg.version for v in entry["versions"]):
            entry["versions"].append({"groupVersion": reg.group_version,
                                      "version": reg.version})
    merged = [groups[str(g["name"])] for g in served]
    for group, regs in sorted(added.items(),
                              key=lambda item: (-max(r.group_priority for r in item[1]),
                                                item[0])):
        regs.sort(key=lambda r: (-r.version_priority, version_order_key(r.version)))
        versions = [{"groupVersion": r.group_version, "version": r.version} for r in regs]
        merged.append({"name": group, "versions": versions, "preferredVersion": versions[0]})
    return merged
