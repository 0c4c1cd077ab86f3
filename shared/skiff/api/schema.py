"""The known fields of each kind, for `fieldValidation=Warn|Strict` (SPEC AS1).

Kubernetes drops fields its OpenAPI schema does not know and warns about each one; a
real manifest prunes to nothing. The schema here is the set of real Kubernetes field
names per kind, nested where Skiff reads the structure, and `ANY` for open-ended
sub-trees (labels, resources, affinity, securityContext, volume sources, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union


class _AnyType:
    """Marks a sub-tree whose content is not checked."""

    def __repr__(self) -> str:
        return "ANY"


ANY = _AnyType()


@dataclass(frozen=True)
class ListOf:
    item: Field


Field = Union[_AnyType, "Fields", ListOf]
Fields = dict[str, Field]


def fields(*names: str, **nested: Field) -> Fields:
    """A schema object: `names` are leaves (or open sub-trees), `nested` have structure."""
    result: Fields = dict.fromkeys(names, ANY)
    result.update(nested)
    return result


OWNER_REFERENCE = fields("apiVersion", "kind", "name", "uid", "controller",
                         "blockOwnerDeletion")
OBJECT_META = fields(
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "finalizers", "managedFields", "clusterName",
    ownerReferences=ListOf(OWNER_REFERENCE),
)
LABEL_SELECTOR = fields(
    "matchLabels", matchExpressions=ListOf(fields("key", "operator", "values")))

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
CONDITION = fields("type", "status", "lastProbeTime", "lastHeartbeatTime",
                   "lastTransitionTime", "lastUpdateTime", "reason", "message",
                   "observedGeneration")
POD_STATUS = fields(
    "phase", "message", "reason", "nominatedNodeName", "hostIP", "hostIPs", "podIP", "podIPs",
    "startTime", "initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses",
    "qosClass", "resize", "resourceClaimStatuses", "observedGeneration",
    "extendedResourceClaimStatus",
    conditions=ListOf(CONDITION),
)
POD_TEMPLATE = fields(metadata=OBJECT_META, spec=POD_SPEC)

_TOP = ("apiVersion", "kind")

SCHEMAS: dict[str, Fields] = {
    "Namespace": fields(*_TOP, metadata=OBJECT_META, spec=fields("finalizers"),
                        status=fields("phase", conditions=ListOf(CONDITION))),
    "Node": fields(
        *_TOP, metadata=OBJECT_META,
        spec=fields("podCIDR", "podCIDRs", "providerID", "unschedulable", "configSource",
                    "externalID",
                    taints=ListOf(fields("key", "value", "effect", "timeAdded"))),
        status=fields("capacity", "allocatable", "phase", "addresses", "daemonEndpoints",
                      "nodeInfo", "images", "volumesInUse", "volumesAttached", "config",
                      "runtimeHandlers", "features", "declaredFeatures",
                      conditions=ListOf(CONDITION)),
    ),
    "Pod": fields(*_TOP, metadata=OBJECT_META, spec=POD_SPEC, status=POD_STATUS),
    "Event": fields(
        *_TOP, "reason", "message", "firstTimestamp", "lastTimestamp", "count", "type",
        "eventTime", "series", "action", "related", "reportingComponent", "reportingInstance",
        metadata=OBJECT_META,
        involvedObject=fields("kind", "namespace", "name", "uid", "apiVersion",
                              "resourceVersion", "fieldPath"),
        source=fields("component", "host"),
    ),
    "PriorityClass": fields(*_TOP, "value", "globalDefault", "description",
                            "preemptionPolicy", metadata=OBJECT_META),
    "PodDisruptionBudget": fields(
        *_TOP, metadata=OBJECT_META,
        spec=fields("minAvailable", "maxUnavailable", "unhealthyPodEvictionPolicy",
                    selector=LABEL_SELECTOR),
        status=fields("observedGeneration", "disruptedPods", "disruptionsAllowed",
                      "currentHealthy", "desiredHealthy", "expectedPods",
                      conditions=ListOf(CONDITION)),
    ),
    "ReplicaSet": fields(
        *_TOP, metadata=OBJECT_META,
        spec=fields("replicas", "minReadySeconds", selector=LABEL_SELECTOR,
                    template=POD_TEMPLATE),
        status=fields("replicas", "fullyLabeledReplicas", "readyReplicas",
                      "availableReplicas", "terminatingReplicas", "observedGeneration",
                      conditions=ListOf(CONDITION)),
    ),
    "ReplicationController": fields(
        *_TOP, metadata=OBJECT_META,
        spec=fields("replicas", "minReadySeconds", "selector", template=POD_TEMPLATE),
        status=fields("replicas", "fullyLabeledReplicas", "readyReplicas",
                      "availableReplicas", "observedGeneration",
                      conditions=ListOf(CONDITION)),
    ),
    "StatefulSet": fields(
        *_TOP, metadata=OBJECT_META,
        spec=fields(
            "replicas", "volumeClaimTemplates", "serviceName", "podManagementPolicy",
            "revisionHistoryLimit", "minReadySeconds",
            selector=LABEL_SELECTOR, template=POD_TEMPLATE,
            updateStrategy=fields("type",
                                  rollingUpdate=fields("partition", "maxUnavailable")),
            persistentVolumeClaimRetentionPolicy=fields("whenDeleted", "whenScaled"),
            ordinals=fields("start"),
        ),
        status=fields("observedGeneration", "replicas", "readyReplicas", "currentReplicas",
                      "updatedReplicas", "currentRevision", "updateRevision",
                      "collisionCount", "availableReplicas", conditions=ListOf(CONDITION)),
    ),
    "Lease": fields(
        *_TOP, metadata=OBJECT_META,
        spec=fields("holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime",
                    "leaseTransitions", "strategy", "preferredHolder"),
    ),
    "PersistentVolumeClaim": fields(
        *_TOP, metadata=OBJECT_META,
        spec=fields("accessModes", "resources", "storageClassName", "volumeName",
                    "volumeMode", "selector", "dataSource", "dataSourceRef",
                    "volumeAttributesClassName"),
        status=fields("phase", "accessModes", "capacity", "allocatedResources",
                      "currentVolumeAttributesClassName", conditions=ListOf(CONDITION)),
    ),
    "LimitRange": fields(*_TOP, metadata=OBJECT_META, spec=fields(limits=ListOf(fields(
        "type", "max", "min", "default", "defaultRequest", "maxLimitRequestRatio")))),
    "ResourceQuota": fields(*_TOP, metadata=OBJECT_META,
                            spec=fields("hard", "scopes", "scopeSelector"),
                            status=fields("hard", "used")),
    "Ingress": fields(*_TOP, metadata=OBJECT_META,
                      spec=fields("ingressClassName", "defaultBackend", "tls", "rules"),
                      status=fields("loadBalancer")),
    "IngressClass": fields(*_TOP, metadata=OBJECT_META,
                           spec=fields("controller", "parameters")),
    "HorizontalPodAutoscaler": fields(
        *_TOP, metadata=OBJECT_META,
        spec=fields("minReplicas", "maxReplicas", "metrics", "behavior",
                    scaleTargetRef=fields("apiVersion", "kind", "name")),
        status=fields("observedGeneration", "lastScaleTime", "currentReplicas",
                      "desiredReplicas", "currentMetrics", conditions=ListOf(CONDITION))),
    "NetworkPolicy": fields(*_TOP, metadata=OBJECT_META,
                            spec=fields("podSelector", "ingress", "egress", "policyTypes")),
    "CSIStorageCapacity": fields(*_TOP, "storageClassName", "capacity", "maximumVolumeSize",
                                 metadata=OBJECT_META, nodeTopology=LABEL_SELECTOR),
    "VolumeAttachment": fields(
        *_TOP, metadata=OBJECT_META,
        spec=fields("attacher", "nodeName", source=fields("persistentVolumeName",
                                                          "inlineVolumeSpec")),
        status=fields("attached", "attachmentMetadata", "attachError", "detachError"),
    ),
    "Fence": fields(
        *_TOP, metadata=OBJECT_META,
        spec=fields("nodeName", "agent", "reason", "requestedBy"),
        status=fields("phase", "message", "confirmedAt", "podsDeleted",
                      conditions=ListOf(CONDITION)),
    ),
}


def _prune(value: Any, schema: Field, path: str, unknown: list[str]) -> None:
    if isinstance(schema, ListOf):
        if isinstance(value, list):
            for i, item in enumerate(value):
                _prune(item, schema.item, f"{path}[{i}]", unknown)
        return
    if isinstance(schema, _AnyType) or not isinstance(value, dict):
        return
    for key in list(value):
        child = f"{path}.{key}" if path else str(key)
        if key not in schema:
            del value[key]
            unknown.append(child)
        else:
            _prune(value[key], schema[key], child, unknown)


# Kinds also served in another version whose fields differ from the stored one's, by
# (apiVersion, kind): a request in that version is pruned against these before conversion.
VERSION_SCHEMAS: dict[tuple[str, str], Fields] = {
    ("events.k8s.io/v1", "Event"): fields(
        *_TOP, "eventTime", "series", "reportingController", "reportingInstance", "action",
        "reason", "note", "type", "related", "deprecatedFirstTimestamp",
        "deprecatedLastTimestamp", "deprecatedCount", metadata=OBJECT_META,
        regarding=fields("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion",
                         "fieldPath"),
        deprecatedSource=fields("component", "host")),
    ("autoscaling/v1", "HorizontalPodAutoscaler"): fields(
        *_TOP, metadata=OBJECT_META,
        spec=fields("minReplicas", "maxReplicas", "targetCPUUtilizationPercentage",
                    scaleTargetRef=fields("apiVersion", "kind", "name")),
        status=fields("observedGeneration", "lastScaleTime", "currentReplicas",
                      "desiredReplicas", "currentCPUUtilizationPercentage")),
}


def prune_unknown_fields(obj: dict[str, Any]) -> list[str]:
    """Drop the fields `obj`'s kind (in its apiVersion) does not have and return their
    paths, in order.

    Objects of kinds without a schema here are left alone.
    """
    kind = obj.get("kind")
    version = obj.get("apiVersion")
    schema = None
    if isinstance(kind, str):
        schema = (VERSION_SCHEMAS.get((version, kind)) if isinstance(version, str)
                  else None) or SCHEMAS.get(kind)
    unknown: list[str] = []
    if schema is not None:
        _prune(obj, schema, "", unknown)
    return unknown


def known_kind(kind: str) -> bool:
    return kind in SCHEMAS
