"""SPEC PS2 and PP2 admission as pure functions, with Kubernetes' rules:
DefaultTolerationSeconds (plugin/pkg/admission/defaulttolerationseconds) and priority
admission's preemptionPolicy check (plugin/pkg/admission/priority)."""

from __future__ import annotations

import pytest

from skiff.api import ApiError, Reason
from skiff.api.testing import make_pod
from skiff.api.types import Obj
from skiff.api.wellknown import TAINT_NOT_READY, TAINT_UNREACHABLE
from skiff.apiserver.admission.priority import admit_priority
from skiff.apiserver.admission.tolerations import (
    AdmissionConfig,
    admit_default_tolerations,
)


def _defaulted_keys(*tolerations: Obj) -> list[str]:
    """The keys DefaultTolerationSeconds added (with its 300 s) to a pod with `tolerations`."""
    pod = make_pod("p").obj()
    pod["spec"]["tolerations"] = [dict(t) for t in tolerations]
    admit_default_tolerations(pod, AdmissionConfig())
    added = pod["spec"]["tolerations"][len(tolerations):]
    assert all(t["effect"] == "NoExecute" and t["tolerationSeconds"] == 300 for t in added)
    return [t["key"] for t in added]


@pytest.mark.parametrize(("tolerations", "added"), [
    pytest.param([], [TAINT_NOT_READY, TAINT_UNREACHABLE], id="none"),
    pytest.param([{"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}],
                 [TAINT_NOT_READY], id="unreachable-NoExecute"),
    pytest.param([{"key": TAINT_NOT_READY, "operator": "Exists"}],
                 [TAINT_UNREACHABLE], id="not-ready-any-effect"),
    pytest.param([{"key": TAINT_NOT_READY, "operator": "Exists", "effect": "NoSchedule"}],
                 [TAINT_NOT_READY, TAINT_UNREACHABLE], id="not-ready-NoSchedule-only"),
    pytest.param([{"operator": "Exists"}], [], id="every-key-every-effect"),
    pytest.param([{"operator": "Exists", "effect": "NoExecute"}], [],
                 id="every-key-NoExecute"),
    pytest.param([{"operator": "Exists", "effect": "NoSchedule"}],
                 [TAINT_NOT_READY, TAINT_UNREACHABLE], id="every-key-NoSchedule-only"),
    pytest.param([{"operator": "Exists", "effect": "PreferNoSchedule"}],
                 [TAINT_NOT_READY, TAINT_UNREACHABLE], id="every-key-PreferNoSchedule"),
    pytest.param([{"key": "example.com/other", "operator": "Exists"}],
                 [TAINT_NOT_READY, TAINT_UNREACHABLE], id="other-key"),
])
def test_ps2_default_toleration_seconds_skip_only_a_covered_key(
        tolerations: list[Obj], added: list[str]) -> None:
    assert _defaulted_keys(*tolerations) == added


def _class(name: str, value: int, policy: str, *, default: bool = False) -> Obj:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, "preemptionPolicy": policy,
            "globalDefault": default}


CLASSES = [_class("polite", 100, "Never"), _class("pushy", 200, "PreemptLowerPriority")]


@pytest.mark.parametrize(("class_name", "asked", "expected"), [
    pytest.param("polite", None, "Never", id="from-class-Never"),
    pytest.param("polite", "Never", "Never", id="repeats-class"),
    pytest.param("pushy", None, "PreemptLowerPriority", id="from-class-Preempt"),
    pytest.param(None, None, "PreemptLowerPriority", id="no-class"),
    pytest.param(None, "PreemptLowerPriority", "PreemptLowerPriority",
                 id="no-class-repeats-default"),
])
def test_pp2_preemption_policy_comes_from_the_class(
        class_name: str | None, asked: str | None, expected: str) -> None:
    pod = make_pod("p").obj()
    if class_name:
        pod["spec"]["priorityClassName"] = class_name
    if asked:
        pod["spec"]["preemptionPolicy"] = asked
    admit_priority(pod, CLASSES)
    assert pod["spec"]["preemptionPolicy"] == expected


@pytest.mark.parametrize(("classes", "class_name", "asked", "computed"), [
    pytest.param(CLASSES, "polite", "PreemptLowerPriority", "Never", id="contradicts-Never"),
    pytest.param(CLASSES, "pushy", "Never", "PreemptLowerPriority",
                 id="contradicts-Preempt"),
    pytest.param(CLASSES, None, "Never", "PreemptLowerPriority", id="no-class-Never"),
    pytest.param([_class("dflt", 5, "PreemptLowerPriority", default=True)], None, "Never",
                 "PreemptLowerPriority", id="global-default-contradicted"),
])
def test_pp2_a_pod_may_not_contradict_its_classes_preemption_policy(
        classes: list[Obj], class_name: str | None, asked: str, computed: str) -> None:
    pod = make_pod("p").obj()
    if class_name:
        pod["spec"]["priorityClassName"] = class_name
    pod["spec"]["preemptionPolicy"] = asked
    with pytest.raises(ApiError) as err:
        admit_priority(pod, classes)
    assert err.value.reason == Reason.FORBIDDEN
    assert f"PreemptionPolicy ({asked}) must not be provided in pod spec" in err.value.message
    assert f"computed {computed}" in err.value.message
