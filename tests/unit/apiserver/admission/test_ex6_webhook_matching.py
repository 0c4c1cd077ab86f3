"""SPEC EX6: which webhooks a request calls — rules (operations, groups, versions,
resources with wildcards and subresources, scope), namespaceSelector (a cluster-scoped
object other than a Namespace is always selected), objectSelector (new or old labels) and
matchPolicy Equivalent — as Kubernetes' webhook predicates decide."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from skiff.api import ApiError, Reason, lookup
from skiff.api.types import Obj
from skiff.apiserver.admission.webhook.hooks import Hook, hook_of
from skiff.apiserver.admission.webhook.matching import (
    Invocation,
    Request,
    matching_version,
    should_call,
)


def _hook(rules: list[Obj] | None = None, **fields: Any) -> Hook:
    raw: Obj = {"name": "h.example.com", "sideEffects": "None",
                "rules": rules if rules is not None else [_rule()], **fields}
    return hook_of("cfg", 0, raw, mutating=False)


def _rule(ops: str = "CREATE", groups: str = "", versions: str = "v1",
          resources: str = "pods", scope: str = "*") -> Obj:
    return {"operations": ops.split(","), "apiGroups": groups.split(","),
            "apiVersions": versions.split(","), "resources": resources.split(","),
            "scope": scope}


def _req(resource: str = "pods", *, op: str = "CREATE", namespace: str = "team",
         name: str = "x", labels: Mapping[str, str] | None = None,
         old_labels: Mapping[str, str] | None = None, subresource: str = "") -> Request:
    obj: Obj = {"metadata": {"name": name, "labels": dict(labels or {})}}
    old: Obj | None = ({"metadata": {"name": name, "labels": dict(old_labels)}}
                       if old_labels is not None else None)
    return Request(info=lookup(resource), operation=op, namespace=namespace, name=name,
                   obj=obj, old=old, subresource=subresource)


NAMESPACES = {"team": {"env": "prod"}, "other": {}}


async def _labels(name: str) -> Mapping[str, str] | None:
    return NAMESPACES.get(name)


def _always(_h: Hook, _i: Invocation, _r: Request) -> bool:
    return True


async def _calls(hook: Hook, req: Request) -> bool:
    return await should_call(hook, req, labels_of=_labels, conditions=_always) is not None


@pytest.mark.parametrize(("rule", "req", "called"), [
    pytest.param(_rule(), _req(), True, id="exact"),
    pytest.param(_rule(ops="UPDATE"), _req(), False, id="other-operation"),
    pytest.param(_rule(ops="*"), _req(op="DELETE"), True, id="any-operation"),
    pytest.param(_rule(groups="apps", resources="*"), _req(), False, id="other-group"),
    pytest.param(_rule(groups="*", versions="*", resources="*"), _req("deployments"), True,
                 id="wildcards"),
    pytest.param(_rule(), _req(subresource="status"), False, id="subresource-not-named"),
    pytest.param(_rule(resources="pods/status"), _req(subresource="status"), True,
                 id="subresource-named"),
    pytest.param(_rule(resources="*/status"), _req(subresource="status"), True,
                 id="any-resource-status"),
    pytest.param(_rule(resources="pods/*"), _req(), True, id="resource-any-subresource"),
    pytest.param(_rule(scope="Cluster"), _req(), False, id="namespaced-object-cluster-scope"),
    pytest.param(_rule(scope="Namespaced", resources="namespaces"),
                 _req("namespaces", namespace="", name="team"), False,
                 id="namespace-is-cluster-scoped"),
    pytest.param(_rule(scope="Cluster", resources="namespaces"),
                 _req("namespaces", namespace="", name="team"), True,
                 id="namespace-cluster-scope"),
])
async def test_ex6_rules_match_as_kubernetes(rule: Obj, req: Request, called: bool) -> None:
    assert await _calls(_hook([rule]), req) is called


@pytest.mark.parametrize(("selector", "namespace", "called"), [
    pytest.param({"matchLabels": {"env": "prod"}}, "team", True, id="labels-match"),
    pytest.param({"matchLabels": {"env": "prod"}}, "other", False, id="labels-differ"),
    pytest.param({"matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]}, "other",
                 True, id="expression"),
])
async def test_ex6_namespace_selector_reads_the_namespaces_labels(
        selector: Obj, namespace: str, called: bool) -> None:
    hook = _hook(namespaceSelector=selector)
    assert await _calls(hook, _req(namespace=namespace)) is called


async def test_ex6_namespace_selector_does_not_exempt_cluster_scoped_objects() -> None:
    hook = _hook([_rule(resources="*")], namespaceSelector={"matchLabels": {"env": "prod"}})
    assert await _calls(hook, _req("nodes", namespace=""))
    # a Namespace being created is selected by its own labels
    assert not await _calls(hook, _req("namespaces", namespace="", name="new"))
    assert await _calls(hook, _req("namespaces", namespace="", name="new",
                                   labels={"env": "prod"}))


async def test_ex6_namespace_selector_on_a_missing_namespace_is_not_found() -> None:
    hook = _hook(namespaceSelector={"matchLabels": {"env": "prod"}})
    with pytest.raises(ApiError) as err:
        await _calls(hook, _req(namespace="gone"))
    assert err.value.reason == Reason.NOT_FOUND
    assert err.value.message == 'namespaces "gone" not found'


async def test_ex6_object_selector_matches_new_or_old_labels() -> None:
    hook = _hook([_rule(ops="*")], objectSelector={"matchLabels": {"team": "a"}})
    assert await _calls(hook, _req(labels={"team": "a"}))
    assert not await _calls(hook, _req(labels={"team": "b"}))
    assert await _calls(hook, _req(op="UPDATE", labels={}, old_labels={"team": "a"}))


def test_ex6_match_policy_equivalent_matches_another_served_version() -> None:
    rule = _rule(groups="events.k8s.io", resources="events")
    req = _req("events")
    equivalent = matching_version(_hook([rule]), req)
    assert equivalent is not None and equivalent.api_version == "events.k8s.io/v1"
    assert matching_version(_hook([rule], matchPolicy="Exact"), req) is None
    hpa = _rule(groups="autoscaling", versions="v2", resources="horizontalpodautoscalers")
    found = matching_version(_hook([hpa]), _req("horizontalpodautoscalers"))
    assert found is not None and found.api_version == "autoscaling/v2"  # the stored one


def test_ex6_equivalent_webhook_is_sent_the_object_in_its_version() -> None:
    rule = _rule(groups="autoscaling", versions="v1", resources="horizontalpodautoscalers")
    req = _req("horizontalpodautoscalers")
    info = matching_version(_hook([rule]), req)
    assert info is not None and info.api_version == "autoscaling/v1"
    hpa: Obj = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "x"},
                "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d"},
                         "minReplicas": 1, "maxReplicas": 3, "metrics": []}}
    sent = Invocation(_hook([rule]), info).to_version(hpa)
    assert sent is not None and sent["apiVersion"] == "autoscaling/v1"
    assert sent["spec"]["maxReplicas"] == 3


async def test_ex6_webhook_configurations_are_never_sent_to_webhooks() -> None:
    hook = _hook([_rule(ops="*", groups="*", versions="*", resources="*")])
    req = _req("validatingwebhookconfigurations", namespace="")
    assert req.exempt
    assert await _calls(hook, req)  # the rule matches; the plugins skip exempt kinds
