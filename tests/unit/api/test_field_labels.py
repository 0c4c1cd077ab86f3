"""Field selectors accept only each kind's field labels and read them as kube-apiserver
does (AS7): an unsupported label is 400 `field label not supported: ...`, and a field an
object leaves out compares as its zero value or default (`spec.hostNetwork=false`)."""

from __future__ import annotations

import pytest

from skiff.api import ApiError, FieldSelector, Reason
from skiff.api.fieldlabels import field_labels
from skiff.api.types import Obj
from skiff.apiserver.registry.store import Registry, RegistryConfig
from skiff.apiserver.storage.memory import MemoryStorage
from skiff.apiserver.storage.watchcache import WatchCache

POD: Obj = {"metadata": {"name": "web-1", "namespace": "team", "labels": {"app": "web"}},
            "spec": {"nodeName": "n1", "restartPolicy": "Always",
                     "schedulerName": "default-scheduler", "serviceAccountName": "default",
                     "containers": [{"name": "c", "image": "nginx"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.5",
                       "podIPs": [{"ip": "10.0.0.5"}]}}
HOST_POD: Obj = {"metadata": {"name": "agent", "namespace": "kube-system"},
                 "spec": {"hostNetwork": True}}
BARE_POD: Obj = {"metadata": {"name": "bare", "namespace": "team"}, "spec": {}}
NODE: Obj = {"metadata": {"name": "n1"}, "spec": {}}
CORDONED: Obj = {"metadata": {"name": "n2"}, "spec": {"unschedulable": True}}
EVENT: Obj = {"metadata": {"name": "web-1.17", "namespace": "team"},
              "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "team",
                                 "uid": "u-1", "apiVersion": "v1"},
              "reason": "Scheduled", "type": "Normal",
              "source": {"component": "default-scheduler"}}
NEW_EVENT: Obj = {"metadata": {"name": "e2", "namespace": "team"},
                  "involvedObject": {"kind": "Pod", "name": "web-1"},
                  "reason": "Killing", "reportingComponent": "kubelet"}


@pytest.mark.parametrize(("kind", "text", "message"), [
    pytest.param("Pod", "spec.foo=bar", "field label not supported: spec.foo",
                 id="pod-unknown"),
    pytest.param("Pod", "metadata.labels.app=web",
                 "field label not supported: metadata.labels.app", id="pod-labels"),
    pytest.param("Node", "metadata.namespace=x",
                 "field label not supported: metadata.namespace", id="node-namespace"),
    pytest.param("Event", "spec.nodeName=n1", "field label not supported: spec.nodeName",
                 id="event-other-kind-field"),
    pytest.param("Secret", "data.key=x", "field label not supported: data.key",
                 id="secret"),
    pytest.param("Deployment", "spec.replicas=1",
                 '"spec.replicas" is not a known field selector: only "metadata.name", '
                 '"metadata.namespace"', id="default-conversion"),
    pytest.param("ReplicaSet", "status.replicas=0",
                 '"status.replicas" is not a known field selector: only "metadata.name", '
                 '"metadata.namespace"', id="apps-v1-replicaset"),
    pytest.param("Pod", "metadata.name=a,spec.nope!=b", "field label not supported: spec.nope",
                 id="second-term"),
])
def test_as7_unsupported_field_label_is_bad_request(kind: str, text: str,
                                                    message: str) -> None:
    with pytest.raises(ApiError) as caught:
        FieldSelector.parse(text, kind=kind)
    assert caught.value.reason == Reason.BAD_REQUEST
    assert caught.value.message == message


@pytest.mark.parametrize(("kind", "label"), [
    *[pytest.param("Pod", label, id=f"pod-{label}") for label in (
        "metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy",
        "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
        "status.podIP", "status.podIPs", "status.nominatedNodeName")],
    pytest.param("Node", "spec.unschedulable", id="node-unschedulable"),
    pytest.param("Node", "metadata.name", id="node-name"),
    *[pytest.param("Event", label, id=f"event-{label}") for label in (
        "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
        "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
        "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type")],
    pytest.param("Secret", "type", id="secret-type"),
    pytest.param("Namespace", "status.phase", id="namespace-phase"),
    pytest.param("Job", "status.successful", id="job-successful"),
    pytest.param("Service", "spec.clusterIP", id="service-cluster-ip"),
    pytest.param("Service", "spec.type", id="service-type"),
    pytest.param("Deployment", "metadata.namespace", id="default-namespace"),
    pytest.param("PersistentVolume", "metadata.namespace", id="default-cluster-scoped"),
    pytest.param("Fence", "metadata.name", id="skiff-kind"),
])
def test_as7_supported_field_labels(kind: str, label: str) -> None:
    assert FieldSelector.parse(f"{label}=x", kind=kind).requirements[0].path == label


@pytest.mark.parametrize(("kind", "text", "obj", "matches"), [
    pytest.param("Pod", "spec.hostNetwork=false", POD, True, id="absent-hostnetwork-false"),
    pytest.param("Pod", "spec.hostNetwork=false", HOST_POD, False, id="hostnetwork-true"),
    pytest.param("Pod", "spec.hostNetwork=true", HOST_POD, True, id="hostnetwork-true-match"),
    pytest.param("Pod", "spec.hostNetwork!=true", BARE_POD, True, id="absent-not-true"),
    pytest.param("Pod", "spec.restartPolicy=Always", BARE_POD, True,
                 id="absent-restart-policy-default"),
    pytest.param("Pod", "spec.schedulerName=default-scheduler", BARE_POD, True,
                 id="absent-scheduler-default"),
    pytest.param("Pod", "spec.nodeName=", BARE_POD, True, id="absent-node-name-empty"),
    pytest.param("Pod", "spec.nodeName=n1", POD, True, id="node-name"),
    pytest.param("Pod", "spec.host=n1", POD, True, id="spec-host-alias"),
    pytest.param("Pod", "status.podIP=10.0.0.5", POD, True, id="pod-ip"),
    pytest.param("Pod", "status.podIPs=10.0.0.5", POD, False, id="pod-ips-never-set"),
    pytest.param("Pod", "status.phase!=Running,metadata.namespace=team", POD, False,
                 id="two-terms"),
    pytest.param("Pod", "spec.serviceAccountName=old",
                 {"metadata": {"name": "p"}, "spec": {"serviceAccount": "old"}}, True,
                 id="deprecated-service-account"),
    pytest.param("Node", "spec.unschedulable=false", NODE, True, id="uncordoned"),
    pytest.param("Node", "spec.unschedulable=false", CORDONED, False, id="cordoned"),
    pytest.param("Node", "spec.unschedulable=true", CORDONED, True, id="cordoned-true"),
    pytest.param("Event", "involvedObject.uid=u-1,reason=Scheduled", EVENT, True,
                 id="event-object"),
    pytest.param("Event", "source=default-scheduler", EVENT, True, id="event-source"),
    pytest.param("Event", "source=kubelet", NEW_EVENT, True,
                 id="event-source-from-reporting-component"),
    pytest.param("Event", "reportingComponent=kubelet", NEW_EVENT, True,
                 id="event-reporting-component"),
    pytest.param("Secret", "type=Opaque", {"metadata": {"name": "s"}}, True,
                 id="secret-default-type"),
    pytest.param("Service", "spec.type=ClusterIP", {"metadata": {"name": "s"}, "spec": {}},
                 True, id="service-default-type"),
    pytest.param("Namespace", "status.phase=Active", {"metadata": {"name": "ns"}}, True,
                 id="namespace-default-phase"),
    pytest.param("Job", "status.successful=0", {"metadata": {"name": "j"}, "status": {}},
                 True, id="job-none-succeeded"),
    pytest.param("Job", "status.successful=2",
                 {"metadata": {"name": "j"}, "status": {"succeeded": 2}}, True,
                 id="job-succeeded"),
    pytest.param("PersistentVolume", "metadata.namespace=x", {"metadata": {"name": "pv"}},
                 False, id="cluster-scoped-has-no-namespace"),
])
def test_as7_field_selector_reads_fields_like_kubernetes(kind: str, text: str, obj: Obj,
                                                         matches: bool) -> None:
    assert FieldSelector.parse(text, kind=kind).matches(obj) is matches


def test_as7_field_labels_table_lookups() -> None:
    assert field_labels("Pod").value(HOST_POD, "spec.hostNetwork") == "true"
    assert field_labels("Node").value(NODE, "spec.unschedulable") == "false"
    assert field_labels("Unknown").canonical("metadata.name") == "metadata.name"


def test_as7_skiff_components_field_selectors_stay_supported() -> None:
    # the kubelet's informer and the Node authorizer (pods on a node), `skiff describe`
    # (events of an object): they must keep working
    assert FieldSelector.parse("spec.nodeName=n1", kind="Pod").matches(POD)
    assert FieldSelector.parse("involvedObject.uid=u-1", kind="Event").matches(EVENT)


async def _registry(objects: list[Obj]) -> Registry:
    """The apiserver's Registry over in-memory storage, holding `objects` (Nodes)."""
    store = MemoryStorage()
    registry = Registry(store, WatchCache(store), config=RegistryConfig(pod_security=None))
    for obj in objects:
        await registry.ensure({"apiVersion": "v1", "kind": "Node", **obj})
    return registry


async def test_as7_registry_list_checks_and_reads_field_labels() -> None:
    registry = await _registry([NODE, CORDONED])
    listed = await registry.list("nodes", None, field_selector="spec.unschedulable=false")
    assert [n["metadata"]["name"] for n in listed["items"]] == ["n1"]
    with pytest.raises(ApiError) as caught:
        await registry.list("nodes", None, field_selector="spec.foo=bar")
    assert (caught.value.reason, caught.value.message) == (
        Reason.BAD_REQUEST, "field label not supported: spec.foo")


async def test_as7_registry_watch_refuses_an_unsupported_label() -> None:
    registry = await _registry([])
    with pytest.raises(ApiError) as caught:
        await anext(registry.watch_batches("pods", "team",
                                           field_selector="metadata.labels.app=web"))
    assert caught.value.message == "field label not supported: metadata.labels.app"
