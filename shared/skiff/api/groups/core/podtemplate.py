"""A pod template as workloads carry it: PodSpec defaults (SetDefaults_PodSpec and its
containers and probes), the known fields of a PodSpec, and the selector-plus-template rules
shared by ReplicaSets, StatefulSets, Deployments, DaemonSets and ReplicationControllers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skiff.api.errors import FieldError, forbidden, invalid, not_supported, required
from skiff.api.fieldchecks import as_dict, int_field
from skiff.api.fielddefaults import child, set_default
from skiff.api.fieldschema import ANY, CONDITION, LABEL_SELECTOR, OBJECT_META, ListOf, fields
from skiff.api.groups.core.podspec import validate_pod_spec
from skiff.api.objectmeta import validate_metadata
from skiff.api.selectors import (
    LabelSelector,
    dns1123_subdomain_problems,
    validate_label_selector,
    validate_labels,
)
from skiff.api.types import Obj, ObjView

PROBE_DEFAULTS = {"periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1,
                  "failureThreshold": 3}
DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS = 30
DEFAULT_SCHEDULER_NAME = "default-scheduler"


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
        set_default(http_get, "path", "/")
        set_default(http_get, "scheme", "HTTP")


def _default_container(container: Any, *, pod: bool) -> None:
    if not isinstance(container, dict):
        return
    set_default(container, "terminationMessagePath", "/dev/termination-log")
    set_default(container, "terminationMessagePolicy", "File")
    set_default(container, "imagePullPolicy", image_pull_policy(container.get("image")))
    for port in container.get("ports") or []:
        if isinstance(port, dict):
            set_default(port, "protocol", "TCP")
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = container.get(key)
        if isinstance(probe, dict):
            for field, value in PROBE_DEFAULTS.items():
                set_default(probe, field, value)
            _default_http_get(probe)
    lifecycle = container.get("lifecycle")
    if isinstance(lifecycle, dict):
        for hook in ("postStart", "preStop"):
            _default_http_get(lifecycle.get(hook))
    resources = container.get("resources")
    if pod and isinstance(resources, dict) and isinstance(resources.get("limits"), dict):
        # SetDefaults_Pod: requests default to limits for resources with only a limit —
        # on pods only, not in a workload's template (kubectl get deploy -o yaml)
        requests = child(resources, "requests")
        for resource, amount in resources["limits"].items():
            requests.setdefault(resource, amount)


def default_pod_spec(spec: Obj, *, pod: bool = False) -> None:
    """Defaults of a pod spec; also used for workload templates (`pod=False`: without the
    pod-only ones, as Kubernetes' SetDefaults_PodSpec vs SetDefaults_Pod)."""
    set_default(spec, "restartPolicy", "Always")
    if spec.get("terminationGracePeriodSeconds") is None:
        spec["terminationGracePeriodSeconds"] = DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS
    set_default(spec, "dnsPolicy", "ClusterFirst")
    set_default(spec, "schedulerName", DEFAULT_SCHEDULER_NAME)
    if spec.get("securityContext") is None:
        spec["securityContext"] = {}
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            _default_container(container, pod=pod)
    for volume in spec.get("volumes") or []:
        if isinstance(volume, dict) and set(volume) <= {"name"}:
            volume["emptyDir"] = {}


def default_template(obj: Obj) -> None:
    template = child(child(obj, "spec"), "template")
    default_pod_spec(child(template, "spec"))



HTTP_GET = fields("path", "port", "host", "scheme",
                  httpHeaders=ListOf(fields("name", "value")))
EXEC = fields("command")
TCP_SOCKET = fields("port", "host")
PROBE = fields(
    "initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold",
    "failureThreshold", "terminationGracePeriodSeconds",
    exec=EXEC, httpGet=HTTP_GET, tcpSocket=TCP_SOCKET, grpc=fields("port", "service"),
)
LIFECYCLE_HANDLER = fields(exec=EXEC, httpGet=HTTP_GET, tcpSocket=TCP_SOCKET,
                           sleep=fields("seconds"))
CONTAINER = fields(
    "name", "image", "command", "args", "workingDir", "restartPolicy", "restartPolicyRules",
    "terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy",
    "securityContext", "stdin", "stdinOnce", "tty",
    ports=ListOf(fields("name", "hostPort", "containerPort", "protocol", "hostIP")),
    envFrom=ListOf(fields("prefix", "configMapRef", "secretRef")),
    env=ListOf(fields("name", "value", "valueFrom")),
    resources=fields("limits", "requests", "claims"),
    resizePolicy=ListOf(fields("resourceName", "restartPolicy")),
    volumeMounts=ListOf(fields("name", "readOnly", "recursiveReadOnly", "mountPath",
                               "subPath", "mountPropagation", "subPathExpr")),
    volumeDevices=ListOf(fields("name", "devicePath")),
    livenessProbe=PROBE, readinessProbe=PROBE, startupProbe=PROBE,
    lifecycle=fields("stopSignal", postStart=LIFECYCLE_HANDLER, preStop=LIFECYCLE_HANDLER),
)
EPHEMERAL_CONTAINER = {**CONTAINER, "targetContainerName": ANY}
VOLUME = fields(
    "name", "hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo",
    "secret", "nfs", "iscsi", "glusterfs", "persistentVolumeClaim", "rbd", "flexVolume",
    "cinder", "cephfs", "flocker", "downwardAPI", "fc", "azureFile", "configMap",
    "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "projected",
    "portworxVolume", "scaleIO", "storageos", "csi", "ephemeral", "image",
)
POD_SPEC = fields(
    "restartPolicy", "terminationGracePeriodSeconds", "activeDeadlineSeconds", "dnsPolicy",
    "nodeSelector", "serviceAccountName", "serviceAccount", "automountServiceAccountToken",
    "nodeName", "hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace",
    "securityContext", "hostname", "hostnameOverride", "subdomain", "affinity",
    "schedulerName", "priorityClassName", "priority", "runtimeClassName", "enableServiceLinks",
    "preemptionPolicy", "overhead", "setHostnameAsFQDN", "hostUsers", "resourceClaims",
    "resources",
    volumes=ListOf(VOLUME),
    initContainers=ListOf(CONTAINER),
    containers=ListOf(CONTAINER),
    ephemeralContainers=ListOf(EPHEMERAL_CONTAINER),
    imagePullSecrets=ListOf(fields("name")),
    tolerations=ListOf(fields("key", "operator", "value", "effect", "tolerationSeconds")),
    hostAliases=ListOf(fields("ip", "hostnames")),
    dnsConfig=fields("nameservers", "searches", options=ListOf(fields("name", "value"))),
    readinessGates=ListOf(fields("conditionType")),
    topologySpreadConstraints=ListOf(fields(
        "maxSkew", "topologyKey", "whenUnsatisfiable", "minDomains", "nodeAffinityPolicy",
        "nodeTaintsPolicy", "matchLabelKeys", labelSelector=LABEL_SELECTOR)),
    os=fields("name"),
    schedulingGates=ListOf(fields("name")),
)
POD_STATUS = fields(
    "phase", "message", "reason", "nominatedNodeName", "hostIP", "hostIPs", "podIP", "podIPs",
    "startTime", "initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses",
    "qosClass", "resize", "resourceClaimStatuses", "observedGeneration",
    "extendedResourceClaimStatus",
    conditions=ListOf(CONDITION),
)
POD_TEMPLATE = fields(metadata=OBJECT_META, spec=POD_SPEC)


def validate_workload_template(spec: ObjView, *, kind: str = "ReplicaSet"
                               ) -> list[FieldError]:
    """Selector and pod template shared by ReplicaSet, StatefulSet and (with its label map
    for a selector) ReplicationController."""
    errors = int_field(spec, "replicas", "spec.replicas", minimum=0)
    errors += int_field(spec, "minReadySeconds", "spec.minReadySeconds", minimum=0)
    selector = spec.get("selector")
    selector_errors: list[FieldError] = []
    if kind == "ReplicationController":  # ValidateNonEmptySelector, then the labels
        if not selector:
            selector_errors.append(required("spec.selector"))
        else:
            selector_errors += validate_labels(selector, "spec.selector")
        selector = {"matchLabels": selector} if not selector_errors else selector
    elif selector is None:
        selector_errors.append(required("spec.selector"))
    else:
        selector_errors += validate_label_selector(selector, "spec.selector")
        if isinstance(selector, Mapping) and not (selector.get("matchLabels")
                                                  or selector.get("matchExpressions")):
            selector_errors.append(invalid("spec.selector", selector,
                                           "empty selector is invalid for deployment"))
    errors += selector_errors
    template, errs = as_dict(spec.get("template"), "spec.template")
    errors += errs
    if not template and not errs:
        errors.append(required("spec.template"))
        return errors
    errors += validate_metadata(template, "Pod", "spec.template.metadata", namespaced=True,
                                name_check=dns1123_subdomain_problems, top_level=False)
    labels = (template.get("metadata") or {}).get("labels")
    if not selector_errors:
        parsed = LabelSelector.from_dict(selector, path="spec.selector")
        if not parsed.empty and not parsed.matches(labels if isinstance(labels, dict) else {}):
            errors.append(invalid("spec.template.metadata.labels", labels,
                                  "`selector` does not match template `labels`"))
    errors += validate_pod_spec(template.get("spec"), "spec.template.spec")
    template_spec, _ = as_dict(template.get("spec"), "spec.template.spec")
    restart = template_spec.get("restartPolicy")
    if restart is not None and restart != "Always":
        errors.append(not_supported("spec.template.spec.restartPolicy", restart, ["Always"]))
    if template_spec.get("activeDeadlineSeconds") is not None:
        errors.append(forbidden("spec.template.spec.activeDeadlineSeconds",
                                f"activeDeadlineSeconds in {kind} is not Supported"))
    return errors
