"""`skiff apply` over an existing object: what the server added itself is kept."""

from __future__ import annotations

from skiff.api.types import Obj
from skiff.cli.resources import _merge_for_apply

MANIFEST = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
            "spec": {"containers": [{"name": "main", "image": "busybox",
                                     "command": ["sleep", "3600"]}]}}


def test_reapplying_keeps_server_set_fields_of_named_list_items() -> None:
    token = {"name": "kube-api-access-x", "mountPath": "/var/run/secrets", "readOnly": True}
    live: Obj = {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": "web", "resourceVersion": "7"},
                 "spec": {"serviceAccountName": "default",
                          "volumes": [{"name": "kube-api-access-x", "projected": {}}],
                          "containers": [{"name": "main", "image": "busybox",
                                          "command": ["sleep", "60"],
                                          "volumeMounts": [token]}]}}
    merged = _merge_for_apply(live, MANIFEST)
    assert merged["spec"]["containers"] == [{"name": "main", "image": "busybox",
                                             "command": ["sleep", "3600"],
                                             "volumeMounts": [token]}]
    assert merged["spec"]["volumes"] == live["spec"]["volumes"]
    assert merged["metadata"]["resourceVersion"] == "7"


def test_a_named_item_left_out_of_the_manifest_goes() -> None:
    live = {"kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x"},
                                                          {"name": "b", "image": "y"}]}}}}
    desired = {"kind": "Deployment", "metadata": {"name": "d"},
               "spec": {"template": {"spec": {"containers": [{"name": "b", "image": "z"}]}}}}
    merged = _merge_for_apply(live, desired)
    assert merged["spec"]["template"]["spec"]["containers"] == [{"name": "b", "image": "z"}]
