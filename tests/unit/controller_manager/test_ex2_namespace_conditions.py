"""The conditions of a Terminating namespace (kube's namespace deleter): what remains named
`<plural>.<group>`, the finalizers holding it, the "ok" variants, and no rewrite when
nothing changed."""

from __future__ import annotations

from skiff.controller_manager.namespace.conditions import deletion_conditions

T0, T1 = "2026-01-01T00:00:00Z", "2026-01-01T00:00:05Z"


def by_type(conditions: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    return {c["type"]: c for c in conditions}


def test_ex2_remaining_custom_and_core_objects_and_their_finalizers_are_named() -> None:
    conditions = deletion_conditions(
        [], remaining={"crontabs.stable.example.com": 2, "pods.": 1},
        finalizers={"example.com/hold": 2}, now=T0)
    assert conditions is not None
    got = by_type(conditions)
    assert got["NamespaceContentRemaining"] == {
        "type": "NamespaceContentRemaining", "status": "True", "lastTransitionTime": T0,
        "reason": "SomeResourcesRemain",
        "message": "Some resources are remaining: crontabs.stable.example.com has 2 "
                   "resource instances, pods. has 1 resource instances"}
    assert got["NamespaceFinalizersRemaining"]["reason"] == "SomeFinalizerRemain"
    assert got["NamespaceFinalizersRemaining"]["message"] == (
        "Some finalizers are remaining: example.com/hold in 2 resource instances")
    assert got["NamespaceDeletionContentFailure"] == {
        "type": "NamespaceDeletionContentFailure", "status": "False",
        "lastTransitionTime": T0, "reason": "ContentDeleted",
        "message": "All content successfully deleted, may be waiting on finalization"}
    assert len(conditions) == 5


def test_ex2_an_unchanged_state_writes_nothing_and_emptied_content_flips_to_ok() -> None:
    first = deletion_conditions([], remaining={"configmaps.": 1}, finalizers={}, now=T0)
    assert first is not None
    assert deletion_conditions(first, remaining={"configmaps.": 1}, finalizers={},
                               now=T1) is None
    done = deletion_conditions(first, remaining={}, finalizers={}, now=T1)
    assert done is not None
    content = by_type(done)["NamespaceContentRemaining"]
    assert (content["status"], content["reason"], content["message"],
            content["lastTransitionTime"]) == (
        "False", "ContentRemoved", "All content successfully removed", T1)
    # a condition that did not change status keeps its transition time
    assert by_type(done)["NamespaceDeletionDiscoveryFailure"]["lastTransitionTime"] == T0
