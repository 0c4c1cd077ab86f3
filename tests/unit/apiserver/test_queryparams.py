"""Boolean query parameters as Kubernetes' Convert_Slice_string_To_bool."""

from __future__ import annotations

import pytest

from skiff.apiserver.endpoints.handlers.queryparams import query_bool


@pytest.mark.parametrize(("query", "expected"), [
    pytest.param({}, False, id="absent"),
    pytest.param({"watch": "true"}, True, id="true"),
    pytest.param({"watch": "True"}, True, id="Python-True"),
    pytest.param({"watch": "TRUE"}, True, id="upper"),
    pytest.param({"watch": "1"}, True, id="one"),
    pytest.param({"watch": ""}, True, id="empty-value"),
    pytest.param({"watch": "yes"}, True, id="anything-else"),
    pytest.param({"watch": "false"}, False, id="false"),
    pytest.param({"watch": "False"}, False, id="Python-False"),
    pytest.param({"watch": "0"}, False, id="zero"),
])
def test_every_value_but_false_and_0_is_true(query: dict[str, str],
                                                     expected: bool) -> None:
    assert query_bool(query, "watch") is expected
