"""`$(VAR)` references in a container's command, args and env values, as Kubernetes
expands them (third_party/forked/golang/expansion): `$$` escapes, unknown names stay."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.kubelet.poddir import container_env
from skiff.kubelet.runtime.images import container_command

POD: dict[str, Any] = {"metadata": {"name": "envtest2", "namespace": "default", "uid": "u1"},
                       "spec": {}}


def _container(**fields: Any) -> dict[str, Any]:
    return {"name": "c", "image": "python", "env": [
        {"name": "T_POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "T_NS", "value": "default"},
        {"name": "T_DEP", "value": "pod-$(T_POD)-$$(T_NS)"}], **fields}


def test_command_expands_dollar_var_references_as_kubernetes() -> None:
    container = _container(command=["python3", "-c", "print(1)", "$(T_POD)", "$$(T_POD)",
                                    "$(NOPE)"])
    env = container_env(POD, container, node_name="n1", base={})
    assert container_command(container, {}, env=env) == [
        "python3", "-c", "print(1)", "envtest2", "$(T_POD)", "$(NOPE)"]


def test_args_expand_from_the_full_env_including_later_entries() -> None:
    container = _container(command=["echo"], args=["$(T_DEP)", "x$(T_NS)y", "$$$(T_NS)"])
    env = container_env(POD, container, node_name="n1", base={"FROM_BASE": "b"})
    assert container_command(container, {}, env=env) == [
        "echo", "pod-envtest2-$(T_NS)", "xdefaulty", "$default"]


def test_args_of_an_image_command_table_entry_expand_but_the_entry_does_not() -> None:
    container = {"image": "redis", "args": ["--name", "$(N)"]}
    assert container_command(container, {"redis": ["redis-server", "$(N)"]},
                             env={"N": "r1"}) == ["redis-server", "$(N)", "--name", "r1"]


def test_env_value_dollar_dollar_escapes_a_reference() -> None:
    env = container_env(POD, _container(), node_name="n1", base={})
    assert env["T_DEP"] == "pod-envtest2-$(T_NS)"


def test_env_value_sees_only_variables_defined_before_it() -> None:
    container = {"env": [{"name": "A", "value": "$(B)-$(SVC)"}, {"name": "B", "value": "b"},
                         {"name": "C", "value": "$(B)"}]}
    env = container_env(POD, container, node_name="n1", base={"SVC": "s"})
    assert (env["A"], env["C"]) == ("$(B)-s", "b")


@pytest.mark.parametrize(("text", "expanded"), [
    pytest.param("$(V)", "v", id="reference"),
    pytest.param("$$(V)", "$(V)", id="escaped"),
    pytest.param("$$$(V)", "$v", id="escaped-dollar-then-reference"),
    pytest.param("$$", "$", id="double-dollar"),
    pytest.param("a$", "a$", id="trailing-dollar"),
    pytest.param("$x $(V", "$x $(V", id="not-references"),
    pytest.param("$(NOPE)", "$(NOPE)", id="unknown"),
    pytest.param("$()", "$()", id="empty-name"),
    pytest.param("$(V)$(V)", "vv", id="adjacent"),
])
def test_env_value_expansion_edge_cases_match_kubernetes(text: str, expanded: str) -> None:
    container = {"env": [{"name": "V", "value": "v"}, {"name": "OUT", "value": text}]}
    assert container_env(POD, container, node_name="n1", base={})["OUT"] == expanded
