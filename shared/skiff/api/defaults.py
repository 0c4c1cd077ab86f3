"""Kubernetes' defaulting (`pkg/apis/*/v1/defaults.go`) for the kinds Skiff serves.

The apiserver applies defaults to a fresh copy of every incoming object before it
validates and stores it, so what is read back is what Kubernetes would have stored
(`restartPolicy: Always`, probe `periodSeconds: 10`, ...). Like Kubernetes, a field that
is missing or holds the zero value gets the default.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from skiff.api import accountkinds, autoscaling, cronjobs, limitranges

Obj = dict[str, Any]

PROBE_DEFAULTS = {"periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1,
                  "failureThreshold": 3}
DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS = 30
DEFAULT_SCHEDULER_NAME = "default-scheduler"


def _child(obj: Obj, key: str) -> Obj:
    """`obj[key]` as a dict, created when missing (and left alone when it is not a dict)."""
    value = obj.get(key)
    if value is None:
        value = obj[key] = {}
    return value if isinstance(value, dict) else {}


def _set_default(obj: Obj, key: str, value: Any) -> None:
    if obj.get(key) in (None, "", 0):
        obj[key] = value


def image_pull_policy(image: str | None) -> str:
    """`Always` for `:latest` or untagged images, else `IfNotPresent` (as Kubernetes)."""
    if not image:
        return "IfNotPresent"
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return "Always"
    return "Always" if last.rsplit(":", 1)[1] == "latest" else "IfNotPresent"


def _default_http_get(handler: Any) -> None:
    if isinstance(handler, dict) and isinstance(handler.get("httpGet"), dict):
        http_get = handler["httpGet"]
        _set_default(http_get, "path", "/")
        _set_default(http_get, "scheme", "HTTP")


def _default_container(container: Any, *, pod: bool) -> None:
    if not isinstance(container, dict):
        return
    _set_default(container, "terminationMessagePath", "/dev/termination-log")
    _set_default(container, "terminationMessagePolicy", "File")
    _set_default(container, "imagePullPolicy", image_pull_policy(container.get("image")))
    for port in container.get("ports") or []:
        if isinstance(port, dict):
            _set_default(port, "protocol", "TCP")
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = container.get(key)
        if isinstance(probe, dict):
            for field, value in PROBE_DEFAULTS.items():
                _set_default(probe, field, value)
            _default_http_get(probe)
    lifecycle = container.get("lifecycle")
    if isinstance(lifecycle, dict):
        for hook in ("postStart", "preStop"):
            _default_http_get(lifecycle.get(hook))
    resources = container.get("resources")
    if pod and isinstance(resources, dict) and isinstance(resources.get("limits"), dict):
        # SetDefaults_Pod: requests default to limits for resources with only a limit —
        # on pods only, not in a workload's template (kubectl get deploy -o yaml)
        requests = _child(resources, "requests")
        for resource, amount in resources["limits"].items():
            requests.setdefault(resource, amount)


def default_pod_spec(spec: Obj, *, pod: bool = False) -> None:
    """Defaults of a pod spec; also used for workload templates (`pod=False`: without the
    pod-only ones, as Kubernetes' SetDefaults_PodSpec vs SetDefaults_Pod)."""
    _set_default(spec, "restartPolicy", "Always")
    if spec.get("terminationGracePeriodSeconds") is None:
        spec["terminationGracePeriodSeconds"] = DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS
    _set_default(spec, "dnsPolicy", "ClusterFirst")
    _set_default(spec, "schedulerName", DEFAULT_SCHEDULER_NAME)
    if spec.get("securityContext") is None:
        spec["securityContext"] = {}
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            _default_container(container, pod=pod)
    for volume in spec.get("volumes") or []:
        if isinstance(volume, dict) and set(volume) <= {"name"}:
            volume["emptyDir"] = {}


def _default_template(obj: Obj) -> None:
    template = _child(_child(obj, "spec"), "template")
    default_pod_spec(_child(template, "spec"))


def _default_pod(obj: Obj) -> None:
    default_pod_spec(_child(obj, "spec"), pod=True)
    if obj.get("status") is None:
        obj["status"] = {"phase": "Pending"}
    elif isinstance(obj["status"], dict):
        _set_default(obj["status"], "phase", "Pending")


def _default_replica_set(obj: Obj) -> None:
    spec = _child(obj, "spec")
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    _default_template(obj)


def _default_replication_controller(obj: Obj) -> None:
    """SetDefaults_ReplicationController: the selector and the controller's own labels
    default to the template's labels, replicas to 1."""
    spec = _child(obj, "spec")
    template = spec.get("template")
    labels = ((template.get("metadata") or {}).get("labels")
              if isinstance(template, dict) else None)
    if isinstance(labels, dict) and labels:
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        meta = _child(obj, "metadata")
        if not meta.get("labels"):
            meta["labels"] = dict(labels)
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    if isinstance(template, dict):
        _default_template(obj)


def _default_stateful_set(obj: Obj) -> None:
    spec = _child(obj, "spec")
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    _set_default(spec, "podManagementPolicy", "OrderedReady")
    strategy = _child(spec, "updateStrategy")
    _set_default(strategy, "type", "RollingUpdate")
    if strategy.get("type") == "RollingUpdate":
        rolling = _child(strategy, "rollingUpdate")
        if rolling.get("partition") is None:
            rolling["partition"] = 0
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10
    retention = _child(spec, "persistentVolumeClaimRetentionPolicy")
    _set_default(retention, "whenDeleted", "Retain")
    _set_default(retention, "whenScaled", "Retain")
    _default_template(obj)


def _default_priority_class(obj: Obj) -> None:
    _set_default(obj, "preemptionPolicy", "PreemptLowerPriority")
    if obj.get("globalDefault") is None:
        obj["globalDefault"] = False


def _default_node(obj: Obj) -> None:
    _child(obj, "spec")


def _default_namespace(obj: Obj) -> None:
    _set_default(_child(obj, "status"), "phase", "Active")
    name = (obj.get("metadata") or {}).get("name")
    if isinstance(name, str) and name:
        # kube-apiserver keeps this label equal to the name (namespaceSelectors match on it)
        _child(_child(obj, "metadata"), "labels")["kubernetes.io/metadata.name"] = name
    if not (obj.get("metadata") or {}).get("deletionTimestamp"):
        # the namespace controller's finalizer: deletion completes once it emptied it
        _set_default(_child(obj, "spec"), "finalizers", ["kubernetes"])


def _default_pvc(obj: Obj) -> None:
    _set_default(_child(obj, "spec"), "volumeMode", "Filesystem")
    _set_default(_child(obj, "status"), "phase", "Pending")


def _default_fence(obj: Obj) -> None:
    _set_default(_child(obj, "status"), "phase", "Pending")


_DEFAULTERS: dict[str, Callable[[Obj], None]] = {
    "PersistentVolumeClaim": _default_pvc,
    "Fence": _default_fence,
    "Pod": _default_pod,
    "ReplicaSet": _default_replica_set,
    "ReplicationController": _default_replication_controller,
    "StatefulSet": _default_stateful_set,
    "PriorityClass": _default_priority_class,
    "Node": _default_node,
    "Namespace": _default_namespace,
    **accountkinds.DEFAULTERS,
    **limitranges.DEFAULTERS,
    **cronjobs.DEFAULTERS,
    **autoscaling.DEFAULTERS,
}


def apply_defaults(obj: Obj) -> None:
    """Fill in Kubernetes' defaults in place; the caller passes a copy it owns."""
    kind = obj.get("kind")
    defaulter = _DEFAULTERS.get(kind) if isinstance(kind, str) else None
    if defaulter is not None:
        defaulter(obj)


# What a workload's `status` is from its first write (its strategy's PrepareForCreate: the
# type's zero status, as the v1 JSON encodes it: fields without `omitempty` stay as 0), so a
# client reading `.status.replicas` before any controller ran gets 0, not a KeyError.
_INITIAL_STATUS: dict[str, dict[str, Any]] = {
    "Deployment": {},
    "Job": {},
    "CronJob": {},
    "ReplicaSet": {"replicas": 0},
    "ReplicationController": {"replicas": 0},
    "StatefulSet": {"replicas": 0, "availableReplicas": 0},
    "DaemonSet": {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                  "desiredNumberScheduled": 0, "numberReady": 0},
}


def initial_status(kind: str) -> dict[str, Any] | None:
    """The status a `kind` is created with (whatever the client sent), or None when the
    client's status is kept or dropped by other rules."""
    status = _INITIAL_STATUS.get(kind)
    return dict(status) if status is not None else None
