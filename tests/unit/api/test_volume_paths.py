"""SPEC AU11: paths inside volumes never leave them — kube-apiserver's validation messages."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api import apply_defaults, validate


def pod(*, volumes: list[dict[str, Any]], mounts: list[dict[str, Any]] | None = None
        ) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
        "spec": {"volumes": volumes, "containers": [
            {"name": "c", "image": "busybox", "volumeMounts": mounts or []}]}}
    apply_defaults(obj)
    return obj


def errors(obj: dict[str, Any]) -> list[str]:
    return [str(e) for e in validate(obj)]


EMPTY = [{"name": "v", "emptyDir": {}}]


@pytest.mark.parametrize(("mount", "expected"), [
    pytest.param({"subPath": "../../etc"},
                 'spec.containers[0].volumeMounts.subPath: Invalid value: "../../etc": '
                 "must not contain '..'", id="subpath-backstep"),
    pytest.param({"subPath": "a/../../b"},
                 'spec.containers[0].volumeMounts.subPath: Invalid value: "a/../../b": '
                 "must not contain '..'", id="subpath-inner-backstep"),
    pytest.param({"subPath": "/etc"},
                 'spec.containers[0].volumeMounts.subPath: Invalid value: "/etc": '
                 "must be a relative path", id="subpath-absolute"),
    pytest.param({"subPathExpr": "$(POD_NAME)/../.."},
                 "spec.containers[0].volumeMounts.subPathExpr: Invalid value: "
                 '"$(POD_NAME)/../..": must not contain \'..\'', id="subpathexpr-backstep"),
    pytest.param({"subPath": "a", "subPathExpr": "b"},
                 'spec.containers[0].volumeMounts[0].subPathExpr: Invalid value: "b": '
                 "subPathExpr and subPath are mutually exclusive", id="both"),
])
def test_au11_subpath_may_not_leave_its_volume(mount: dict[str, Any], expected: str) -> None:
    obj = pod(volumes=EMPTY, mounts=[{"name": "v", "mountPath": "/data", **mount}])
    assert errors(obj) == [expected]


@pytest.mark.parametrize(("volume", "expected"), [
    pytest.param({"configMap": {"name": "cm", "items": [{"key": "k", "path": "../../x"}]}},
                 'spec.volumes[0].configMap.items[0].path: Invalid value: "../../x": '
                 "must not contain '..'", id="configmap-backstep"),
    pytest.param({"secret": {"secretName": "s", "items": [{"key": "k", "path": "/etc/x"}]}},
                 'spec.volumes[0].secret.items[0].path: Invalid value: "/etc/x": '
                 "must be a relative path", id="secret-absolute"),
    pytest.param({"secret": {"secretName": "s", "items": [{"key": "k", "path": "..data"}]}},
                 'spec.volumes[0].secret.items[0].path: Invalid value: "..data": '
                 "must not start with '..'", id="secret-reserved"),
    pytest.param({"configMap": {"name": "cm", "items": [{"key": "k"}]}},
                 "spec.volumes[0].configMap.items[0].path: Required value", id="item-path"),
    pytest.param({"downwardAPI": {"items": [
                    {"path": "../labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}},
                 'spec.volumes[0].downwardAPI.items[0].path: Invalid value: "../labels": '
                 "must not contain '..'", id="downward-backstep"),
    pytest.param({"projected": {"sources": [
                    {"serviceAccountToken": {"path": "../token"}}]}},
                 "spec.volumes[0].projected.sources[0].serviceAccountToken.path: "
                 "Invalid value: \"../token\": must not contain '..'", id="projected-token"),
    pytest.param({"projected": {"sources": [{"configMap": {
                    "name": "cm", "items": [{"key": "k", "path": "/abs"}]}}]}},
                 "spec.volumes[0].projected.sources[0].configMap.items[0].path: "
                 'Invalid value: "/abs": must be a relative path', id="projected-configmap"),
    pytest.param({"secret": {"secretName": "s", "defaultMode": 0o1777}},
                 "spec.volumes[0].secret.defaultMode: Invalid value: 1023: must be a number "
                 "between 0 and 0777 (octal), both inclusive", id="mode"),
    pytest.param({"hostPath": {"path": "/var/../etc"}},
                 'spec.volumes[0].hostPath.path: Invalid value: "/var/../etc": '
                 "must not contain '..'", id="hostpath-backstep"),
])
def test_au11_volume_item_paths_stay_inside_the_volume(volume: dict[str, Any],
                                                      expected: str) -> None:
    assert errors(pod(volumes=[{"name": "v", **volume}])) == [expected]


@pytest.mark.parametrize("volume", [
    pytest.param({"configMap": {"name": "cm", "items": [{"key": "k", "path": "a/b.conf"}]}},
                 id="nested"),
    pytest.param({"secret": {"secretName": "s", "items": [{"key": "k", "path": "a..b"}]}},
                 id="dots-inside-a-name"),
    pytest.param({"hostPath": {"path": "/var/log"}}, id="hostpath"),
])
def test_au11_paths_inside_the_volume_are_accepted(volume: dict[str, Any]) -> None:
    assert errors(pod(volumes=[{"name": "v", **volume}])) == []
