"""Status objects shaped and worded like apimachinery's."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api import ApiError
from skiff.api.errors import FieldError, duplicate, forbidden, invalid, required, too_long


@pytest.mark.parametrize(("error", "reason", "body"), [
    pytest.param(invalid("metadata.name", "Bad_Name", "must be lower case"),
                 "FieldValueInvalid", 'Invalid value: "Bad_Name": must be lower case',
                 id="invalid-string-quoted"),
    pytest.param(invalid("spec.replicas", -1, "must be >= 0"), "FieldValueInvalid",
                 "Invalid value: -1: must be >= 0", id="invalid-number-bare"),
    pytest.param(invalid("spec.paused", True, "no"), "FieldValueInvalid",
                 "Invalid value: true: no", id="invalid-bool-go"),
    pytest.param(required("spec.containers"), "FieldValueRequired", "Required value",
                 id="required"),
    pytest.param(too_long("metadata.annotations", "x", 262144), "FieldValueTooLong",
                 "Too long: may not be more than 262144 bytes", id="too-long"),
    pytest.param(forbidden("spec.template", "no"), "FieldValueForbidden", "Forbidden: no",
                 id="forbidden"),
    pytest.param(duplicate("spec.volumes[1].name", "data"), "FieldValueDuplicate",
                 'Duplicate value: "data"', id="duplicate"),
    pytest.param(FieldError("spec.x", "Not found", "", "y"), "FieldValueNotFound",
                 'Not found: "y"', id="not-found"),
    pytest.param(FieldError("spec.x", "Too many", "", 5), "FieldValueTooMany",
                 "Too many: 5", id="too-many"),
])
def test_defect9_cause_reason_and_message_without_the_field(
        error: FieldError, reason: str, body: str) -> None:
    [cause] = ApiError.invalid("Pod", "p", [error]).to_status()["details"]["causes"]
    assert cause == {"reason": reason, "message": body, "field": error.path}


def test_defect9_invalid_status_has_details_and_kubernetes_message() -> None:
    one = invalid("metadata.name", "Bad_Name", "bad")
    status: dict[str, Any] = ApiError.invalid("PriorityClass", "Bad_Name", [one],
                                              group="scheduling.k8s.io").to_status()
    assert status["message"] == ('PriorityClass.scheduling.k8s.io "Bad_Name" is invalid: '
                                 'metadata.name: Invalid value: "Bad_Name": bad')
    assert {k: status["details"][k] for k in ("name", "group", "kind")} == {
        "name": "Bad_Name", "group": "scheduling.k8s.io", "kind": "PriorityClass"}
    two = ApiError.invalid("Pod", "p", [one, required("spec.containers")])
    assert two.message == ('Pod "p" is invalid: [metadata.name: Invalid value: "Bad_Name": '
                           'bad, spec.containers: Required value]')


def test_defect9_status_round_trips_through_the_wire() -> None:
    err = ApiError.invalid("Pod", "p", [invalid("metadata.name", "Bad_Name", "bad")])
    back = ApiError.from_status(err.to_status())
    assert back.to_status() == err.to_status()
    gone = ApiError.not_found("priorityclasses", "x", group="scheduling.k8s.io")
    assert gone.message == 'priorityclasses.scheduling.k8s.io "x" not found'
    assert ApiError.from_status(gone.to_status()).to_status() == gone.to_status()
