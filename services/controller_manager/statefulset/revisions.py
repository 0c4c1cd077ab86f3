"""StatefulSet updates: ControllerRevisions, RollingUpdate with partition, OnDelete.

Each distinct pod template is a ControllerRevision `<set>-<hash>` (owned by the set,
labelled with its selector, `revision` numbered in order); its pods carry the
`controller-revision-hash` label. Its data is the patch `kubectl rollout undo` applies, as
Kubernetes' `getPatch` writes it: the template marked `$patch: replace`, so the undo brings
back exactly that template (not the old one merged into the new). A template that returns
to an earlier revision makes it the newest again (the controller renumbers it).
`status.updateRevision` is the template's revision, `status.currentRevision` the one every
pod had before the update (it becomes the update revision once all pods are updated).
RollingUpdate deletes, from the highest ordinal down to `partition`, one pod of an older
revision at a time, only while every pod is Running and Ready; the ordinary plan then
re-creates that identity from the update revision. Ordinals below the partition are
re-created from the current revision. OnDelete replaces only the pods the user deletes.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from skiff.api import is_terminating
from skiff.api.names import object_hash
from skiff.api.types import Obj
from skiff.controller_manager.podutil import is_running_and_ready
from skiff.controller_manager.statefulset.plan import ordinal_of
from skiff.controller_manager.workload import owner_reference

REVISION_LABEL = "controller-revision-hash"


def revision_name(sts: Mapping[str, Any]) -> str:
    return f"{sts['metadata']['name']}-{object_hash((sts.get('spec') or {}).get('template'))}"


def new_revision(sts: Mapping[str, Any], number: int) -> Obj:
    selector = ((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    name = revision_name(sts)
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": name, "namespace": sts["metadata"].get("namespace"),
                         "labels": {**selector, REVISION_LABEL: name},
                         "ownerReferences": [owner_reference(sts)]},
            "data": {"spec": {"template": {**copy.deepcopy(sts["spec"].get("template") or {}),
                                           "$patch": "replace"}}},
            "revision": number}


def template_of(revision: Mapping[str, Any]) -> Obj:
    template = copy.deepcopy(((revision.get("data") or {}).get("spec") or {}).get("template")
                             or {})
    template.pop("$patch", None)
    return template


def pod_revision(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata", {}).get("labels") or {}).get(REVISION_LABEL, ""))


def partition_of(sts: Mapping[str, Any]) -> int:
    strategy = (sts.get("spec") or {}).get("updateStrategy") or {}
    return int((strategy.get("rollingUpdate") or {}).get("partition") or 0)


def rolling_victim(sts: Mapping[str, Any], pods: list[Obj], update_revision: str
                   ) -> Obj | None:
    """The next pod RollingUpdate replaces, or None (done, waiting, or OnDelete)."""
    strategy = (sts.get("spec") or {}).get("updateStrategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return None
    name = sts["metadata"]["name"]
    if any(is_terminating(p) or not is_running_and_ready(p) for p in pods):
        return None  # one at a time, each Running and Ready before the next
    partition = partition_of(sts)
    by_ordinal = sorted(((ordinal_of(name, p), p) for p in pods
                         if ordinal_of(name, p) is not None),
                        key=lambda item: -int(item[0] or 0))
    for ordinal, pod in by_ordinal:
        if int(ordinal or 0) >= partition and pod_revision(pod) != update_revision:
            return pod
    return None
