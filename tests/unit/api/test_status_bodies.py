"""AX6: Status bodies byte for byte as kube-apiserver writes them (apimachinery's
pkg/api/errors constructors, encoded by Go's json.Encoder: compact, trailing newline,
`details` before `code`)."""

from __future__ import annotations

import pytest

from skiff.api import ApiError, Reason
from skiff.api.errors import required
from skiff.apiserver.endpoints.http import encode_json

HEAD = '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'


@pytest.mark.parametrize(("error", "expected"), [
    pytest.param(ApiError.not_found("pods", "web"),
                 HEAD + '"message":"pods \\"web\\" not found","reason":"NotFound",'
                 '"details":{"name":"web","kind":"pods"},"code":404}\n', id="NotFound"),
    pytest.param(ApiError.not_found("priorityclasses", "gold", group="scheduling.k8s.io"),
                 HEAD + '"message":"priorityclasses.scheduling.k8s.io \\"gold\\" not found",'
                 '"reason":"NotFound","details":{"name":"gold","group":"scheduling.k8s.io",'
                 '"kind":"priorityclasses"},"code":404}\n', id="NotFound-group"),
    pytest.param(ApiError(Reason.NOT_FOUND, "the server could not find the requested resource"),
                 HEAD + '"message":"the server could not find the requested resource",'
                 '"reason":"NotFound","details":{},"code":404}\n', id="NotFound-path"),
    pytest.param(ApiError.already_exists("pods", "web"),
                 HEAD + '"message":"pods \\"web\\" already exists","reason":"AlreadyExists",'
                 '"details":{"name":"web","kind":"pods"},"code":409}\n', id="AlreadyExists"),
    pytest.param(ApiError.conflict("pods", "web", "the object has been modified; please "
                                   "apply your changes to the latest version and try again"),
                 HEAD + '"message":"Operation cannot be fulfilled on pods \\"web\\": the '
                 'object has been modified; please apply your changes to the latest version '
                 'and try again","reason":"Conflict","details":{"name":"web","kind":"pods"},'
                 '"code":409}\n', id="Conflict"),
    pytest.param(ApiError.invalid("Pod", "web", [required("spec.containers")]),
                 HEAD + '"message":"Pod \\"web\\" is invalid: spec.containers: Required '
                 'value","reason":"Invalid","details":{"name":"web","kind":"Pod","causes":'
                 '[{"reason":"FieldValueRequired","message":"Required value","field":'
                 '"spec.containers"}]},"code":422}\n', id="Invalid"),
    pytest.param(ApiError.forbidden("pods", "", 'User "bob" cannot list resource "pods" in '
                                    'API group "" in the namespace "default"'),
                 HEAD + '"message":"pods is forbidden: User \\"bob\\" cannot list resource '
                 '\\"pods\\" in API group \\"\\" in the namespace \\"default\\"","reason":'
                 '"Forbidden","details":{"kind":"pods"},"code":403}\n', id="Forbidden"),
    pytest.param(ApiError.unauthorized("Unauthorized"),
                 HEAD + '"message":"Unauthorized","reason":"Unauthorized","code":401}\n',
                 id="Unauthorized"),
    pytest.param(ApiError.method_not_supported("pods", "update"),
                 HEAD + '"message":"update is not supported on resources of kind \\"pods\\"",'
                 '"reason":"MethodNotAllowed","details":{"kind":"pods"},"code":405}\n',
                 id="MethodNotAllowed"),
    pytest.param(ApiError.too_many_requests("Too many requests, please try again later.",
                                            1),
                 HEAD + '"message":"Too many requests, please try again later.","reason":'
                 '"TooManyRequests","details":{"retryAfterSeconds":1},"code":429}\n',
                 id="TooManyRequests"),
    pytest.param(ApiError.gone("too old resource version: 5 (10)"),
                 HEAD + '"message":"too old resource version: 5 (10)","reason":"Expired",'
                 '"code":410}\n', id="Gone"),
])
def test_AX6_status_body_matches_kubernetes_byte_for_byte(error: ApiError,
                                                          expected: str) -> None:
    assert encode_json(error.to_status()) == expected.encode()
