"""SPEC SC1 via StatefulSet volumeClaimTemplates: each identity has its own claims, and its
pod (and every replacement of it) mounts them."""

from __future__ import annotations

from skiff.api.types import Obj
from skiff.controller_manager.statefulset import stateful_pod
from skiff.controller_manager.statefulset.controller import stateful_claims

SET: Obj = {
    "apiVersion": "apps/v1", "kind": "StatefulSet",
    "metadata": {"name": "db", "namespace": "ns", "uid": "s1"},
    "spec": {"replicas": 2, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
             "template": {"metadata": {"labels": {"app": "db"}},
                          "spec": {"containers": [{"name": "m", "image": "x"}],
                                   "volumes": [{"name": "data", "emptyDir": {}},
                                               {"name": "scratch", "emptyDir": {}}]}},
             "volumeClaimTemplates": [
                 {"metadata": {"name": "data", "labels": {"tier": "db"}},
                  "spec": {"accessModes": ["ReadWriteOnce"],
                           "resources": {"requests": {"storage": "1Gi"}}}}]},
}


def test_sc1_each_identity_gets_its_own_claims_owned_by_the_set_only_when_deleted_with_it(
        ) -> None:
    [claim] = stateful_claims(SET, 1)
    assert claim["metadata"]["name"] == "data-db-1"
    assert claim["metadata"]["namespace"] == "ns"
    assert claim["metadata"]["labels"] == {"tier": "db", "app": "db"}
    # whenDeleted Retain (the default): no owner, so the garbage collector keeps the data
    assert "ownerReferences" not in claim["metadata"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    deleting = {**SET, "spec": {**SET["spec"], "persistentVolumeClaimRetentionPolicy": {
        "whenDeleted": "Delete", "whenScaled": "Retain"}}}
    [ref] = stateful_claims(deleting, 1)[0]["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["uid"]) == ("StatefulSet", "db", "s1")


def test_sc1_the_pod_mounts_its_identitys_claim_in_place_of_a_same_named_volume() -> None:
    pod = stateful_pod(SET, 1)
    assert pod["spec"]["volumes"] == [
        {"name": "scratch", "emptyDir": {}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-1"}}]


def test_sc1_a_set_without_templates_has_no_claims() -> None:
    plain = {**SET, "spec": {k: v for k, v in SET["spec"].items()
                             if k != "volumeClaimTemplates"}}
    assert stateful_claims(plain, 0) == []
    assert [v["name"] for v in stateful_pod(plain, 0)["spec"]["volumes"]] == ["data", "scratch"]
