"""SPEC AU3 against a real etcd and apiserver: a restarted apiserver reconciles the
bootstrap RBAC policy it finds in etcd, as kube-apiserver's RBAC post-start hook does —
a `view` role an older Skiff stored (every resource readable, Secrets too) is corrected,
and roles already up to date are not rewritten."""

from __future__ import annotations

from skiff.client import ApiClient
from tests.integration.cluster import Cluster

_EVERYTHING = {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}


async def test_AU3_restarted_apiserver_reconciles_an_old_view_role(
        fresh_cluster: Cluster) -> None:
    fresh_cluster.start()
    async with ApiClient(fresh_cluster.api_target, retry_seconds=20) as api:
        view = await api.get("clusterroles", "view")
        assert _EVERYTHING not in view["rules"]
        view["rules"] = [_EVERYTHING]
        view["metadata"]["annotations"].pop("rbac.authorization.kubernetes.io/autoupdate")
        await api.update(view)
        basic = await api.get("clusterroles", "system:basic-user")
        await api.delete("clusterroles", "edit")

    fresh_cluster.apiserver.stop()
    fresh_cluster.start_apiserver()
    async with ApiClient(fresh_cluster.api_target, retry_seconds=20) as api:
        view = await api.get("clusterroles", "view")
        assert _EVERYTHING not in view["rules"], "the stored view role was not reconciled"
        assert {"apiGroups": [""], "resources": ["secrets"],
                "verbs": ["get", "list", "watch"]} not in view["rules"]
        assert any("pods" in rule.get("resources", []) for rule in view["rules"])
        again = await api.get("clusterroles", "system:basic-user")
        assert again["metadata"]["resourceVersion"] == \
            basic["metadata"]["resourceVersion"], "an up-to-date role was rewritten"
        edit = await api.get("clusterroles", "edit")  # re-created where missing
        assert edit["rules"]


async def test_AU3_autoupdate_false_keeps_an_edited_role(fresh_cluster: Cluster) -> None:
    fresh_cluster.start()
    async with ApiClient(fresh_cluster.api_target, retry_seconds=20) as api:
        view = await api.get("clusterroles", "view")
        view["rules"] = [_EVERYTHING]
        view["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] = \
            "false"
        await api.update(view)
    fresh_cluster.apiserver.stop()
    fresh_cluster.start_apiserver()
    async with ApiClient(fresh_cluster.api_target, retry_seconds=20) as api:
        view = await api.get("clusterroles", "view")
        assert view["rules"] == [_EVERYTHING]
