"""Kubernetes' protobuf request bodies (`application/vnd.kubernetes.protobuf`), as JSON objects.

kubectl's imperative commands (`create namespace`, `create pdb`, `create priorityclass`, ...)
send built-in kinds in Kubernetes' protobuf encoding: the 4 bytes `k8s\\0`, then a
`runtime.Unknown` envelope (apiVersion, kind, raw bytes), the raw bytes being the kind's
message from its `generated.proto`.

No maintained package on PyPI, npm or Debian ships Python bindings for those messages
(PyPI `k8s-proto` stopped in 2019 with core/v1 only, and its generated code needs a
protobuf runtime older than 4.21), and Skiff may not vendor Kubernetes' .proto files. So
Skiff declares, in its own compact table below, the field numbers of the messages it serves
(the public wire contract, as `kubectl explain` documents the field names), builds protobuf
descriptors from that table, and lets the maintained `protobuf` runtime do the decoding.
A kind not in the table, or a body with a field the table does not declare, is answered
with 415, which tells the client to send JSON: nothing the client sent is silently dropped.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message,
    message_factory,
    unknown_fields,
)
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from skiff.api import ApiError, Reason
from skiff.apiserver.endpoints import protobufcerts

MAGIC = b"k8s\x00"
_PACKAGE = "skiff.kubewire"

# message -> fields as (json name, field number, type). A type is a scalar ("string",
# "int32", "int64", "bool", "bytes") or a message of this table; "[]" marks a repeated
# field and "map:" a map from string keys.
_MESSAGES: dict[str, list[tuple[str, int, str]]] = {
    **protobufcerts.MESSAGES,  # certificates.k8s.io/v1 (SPEC JN2)
    "TypeMeta": [("apiVersion", 1, "string"), ("kind", 2, "string")],
    "Unknown": [("typeMeta", 1, "TypeMeta"), ("raw", 2, "bytes"),
                ("contentEncoding", 3, "string"), ("contentType", 4, "string")],
    "Time": [("seconds", 1, "int64"), ("nanos", 2, "int32")],
    "IntOrString": [("type", 1, "int64"), ("intVal", 2, "int32"), ("strVal", 3, "string")],
    "OwnerReference": [("kind", 1, "string"), ("name", 3, "string"), ("uid", 4, "string"),
                       ("apiVersion", 5, "string"), ("controller", 6, "bool"),
                       ("blockOwnerDeletion", 7, "bool")],
    "ObjectMeta": [("name", 1, "string"), ("generateName", 2, "string"),
                   ("namespace", 3, "string"), ("uid", 5, "string"),
                   ("resourceVersion", 6, "string"), ("generation", 7, "int64"),
                   ("creationTimestamp", 8, "Time"), ("deletionTimestamp", 9, "Time"),
                   ("deletionGracePeriodSeconds", 10, "int64"),
                   ("labels", 11, "map:string"), ("annotations", 12, "map:string"),
                   ("ownerReferences", 13, "[]OwnerReference"),
                   ("finalizers", 14, "[]string"),
                   ("managedFields", 17, "[]ManagedFieldsEntry")],
    # what a typed client PUTs back after a GET (`kubectl certificate approve`)
    "FieldsV1": [("Raw", 1, "bytes")],
    "ManagedFieldsEntry": [("manager", 1, "string"), ("operation", 2, "string"),
                           ("apiVersion", 3, "string"), ("time", 4, "Time"),
                           ("fieldsType", 6, "string"), ("fieldsV1", 7, "FieldsV1"),
                           ("subresource", 8, "string")],
    "LabelSelectorRequirement": [("key", 1, "string"), ("operator", 2, "string"),
                                 ("values", 3, "[]string")],
    "LabelSelector": [("matchLabels", 1, "map:string"),
                      ("matchExpressions", 2, "[]LabelSelectorRequirement")],
    "Preconditions": [("uid", 1, "string"), ("resourceVersion", 2, "string")],
    "DeleteOptions": [("gracePeriodSeconds", 1, "int64"), ("preconditions", 2, "Preconditions"),
                      ("orphanDependents", 3, "bool"), ("propagationPolicy", 4, "string"),
                      ("dryRun", 5, "[]string")],
    # core/v1
    "NamespaceSpec": [("finalizers", 1, "[]string")],
    "Namespace": [("metadata", 1, "ObjectMeta"), ("spec", 2, "NamespaceSpec")],
    # policy/v1
    "PodDisruptionBudgetSpec": [("minAvailable", 1, "IntOrString"),
                                ("selector", 2, "LabelSelector"),
                                ("maxUnavailable", 3, "IntOrString"),
                                ("unhealthyPodEvictionPolicy", 4, "string")],
    "PodDisruptionBudget": [("metadata", 1, "ObjectMeta"),
                            ("spec", 2, "PodDisruptionBudgetSpec")],
    "Eviction": [("metadata", 1, "ObjectMeta"), ("deleteOptions", 2, "DeleteOptions")],
    # scheduling/v1
    "PriorityClass": [("metadata", 1, "ObjectMeta"), ("value", 2, "int32"),
                      ("globalDefault", 3, "bool"), ("description", 4, "string"),
                      ("preemptionPolicy", 5, "string")],
    # authorization/v1 and authentication/v1 (`kubectl auth can-i|whoami`)
    "ResourceAttributes": [("namespace", 1, "string"), ("verb", 2, "string"),
                           ("group", 3, "string"), ("version", 4, "string"),
                           ("resource", 5, "string"), ("subresource", 6, "string"),
                           ("name", 7, "string")],
    "NonResourceAttributes": [("path", 1, "string"), ("verb", 2, "string")],
    "SelfSubjectAccessReviewSpec": [("resourceAttributes", 1, "ResourceAttributes"),
                                    ("nonResourceAttributes", 2, "NonResourceAttributes")],
    "SelfSubjectAccessReview": [("metadata", 1, "ObjectMeta"),
                                ("spec", 2, "SelfSubjectAccessReviewSpec")],
    "SelfSubjectRulesReviewSpec": [("namespace", 1, "string")],
    "SelfSubjectRulesReview": [("metadata", 1, "ObjectMeta"),
                               ("spec", 2, "SelfSubjectRulesReviewSpec")],
    "SelfSubjectReview": [("metadata", 1, "ObjectMeta")],
    # rbac.authorization.k8s.io/v1 (kubectl create role/clusterrole/rolebinding/...)
    "PolicyRule": [("verbs", 1, "[]string"), ("apiGroups", 2, "[]string"),
                   ("resources", 3, "[]string"), ("resourceNames", 4, "[]string"),
                   ("nonResourceURLs", 5, "[]string")],
    "Role": [("metadata", 1, "ObjectMeta"), ("rules", 2, "[]PolicyRule")],
    "RoleRef": [("apiGroup", 1, "string"), ("kind", 2, "string"), ("name", 3, "string")],
    "Subject": [("kind", 1, "string"), ("apiGroup", 2, "string"), ("name", 3, "string"),
                ("namespace", 4, "string")],
    "RoleBinding": [("metadata", 1, "ObjectMeta"), ("subjects", 2, "[]Subject"),
                    ("roleRef", 3, "RoleRef")],
    # core/v1 pod templates, for `kubectl create deployment|job`. A field named
    # `inline...` is embedded in Go: its fields appear in the parent's JSON.
    "Quantity": [("string", 1, "string")],
    "LocalObjectReference": [("name", 1, "string")],
    "KeyToPath": [("key", 1, "string"), ("path", 2, "string"), ("mode", 3, "int32")],
    "ConfigMapVolumeSource": [("inlineRef", 1, "LocalObjectReference"),
                              ("items", 2, "[]KeyToPath"), ("defaultMode", 3, "int32"),
                              ("optional", 4, "bool")],
    "SecretVolumeSource": [("secretName", 1, "string"), ("items", 2, "[]KeyToPath"),
                           ("defaultMode", 3, "int32"), ("optional", 4, "bool")],
    "ResourceFieldSelector": [("containerName", 1, "string"), ("resource", 2, "string"),
                              ("divisor", 3, "Quantity")],
    "DownwardAPIVolumeFile": [("path", 1, "string"), ("fieldRef", 2, "ObjectFieldSelector"),
                              ("resourceFieldRef", 3, "ResourceFieldSelector"),
                              ("mode", 4, "int32")],
    "DownwardAPIVolumeSource": [("items", 1, "[]DownwardAPIVolumeFile"),
                                ("defaultMode", 2, "int32")],
    # the kube-api-access volume every pod gets (`kubectl debug --copy-to` sends it back)
    "ObjectProjection": [("inlineRef", 1, "LocalObjectReference"), ("items", 2, "[]KeyToPath"),
                         ("optional", 4, "bool")],
    "DownwardAPIProjection": [("items", 1, "[]DownwardAPIVolumeFile")],
    "ServiceAccountTokenProjection": [("audience", 1, "string"),
                                      ("expirationSeconds", 2, "int64"),
                                      ("path", 3, "string")],
    "VolumeProjection": [("secret", 1, "ObjectProjection"),
                         ("downwardAPI", 2, "DownwardAPIProjection"),
                         ("configMap", 3, "ObjectProjection"),
                         ("serviceAccountToken", 4, "ServiceAccountTokenProjection")],
    "ProjectedVolumeSource": [("sources", 1, "[]VolumeProjection"),
                              ("defaultMode", 2, "int32")],
    "EmptyDirVolumeSource": [("medium", 1, "string"), ("sizeLimit", 2, "Quantity")],
    "HostPathVolumeSource": [("path", 1, "string"), ("type", 2, "string")],
    "PersistentVolumeClaimVolumeSource": [("claimName", 1, "string"), ("readOnly", 2, "bool")],
    "VolumeSource": [("hostPath", 1, "HostPathVolumeSource"),
                     ("emptyDir", 2, "EmptyDirVolumeSource"),
                     ("secret", 6, "SecretVolumeSource"),
                     ("persistentVolumeClaim", 10, "PersistentVolumeClaimVolumeSource"),
                     ("downwardAPI", 16, "DownwardAPIVolumeSource"),
                     ("configMap", 19, "ConfigMapVolumeSource"),
                     ("projected", 26, "ProjectedVolumeSource")],
    "Volume": [("name", 1, "string"), ("inlineSource", 2, "VolumeSource")],
    "ContainerPort": [("name", 1, "string"), ("hostPort", 2, "int32"),
                      ("containerPort", 3, "int32"), ("protocol", 4, "string"),
                      ("hostIP", 5, "string")],
    "KeySelector": [("inlineRef", 1, "LocalObjectReference"), ("key", 2, "string"),
                    ("optional", 3, "bool")],
    "ObjectFieldSelector": [("apiVersion", 1, "string"), ("fieldPath", 2, "string")],
    "EnvVarSource": [("fieldRef", 1, "ObjectFieldSelector"),
                     ("resourceFieldRef", 2, "ResourceFieldSelector"),
                     ("configMapKeyRef", 3, "KeySelector"), ("secretKeyRef", 4, "KeySelector")],
    "EnvVar": [("name", 1, "string"), ("value", 2, "string"), ("valueFrom", 3, "EnvVarSource")],
    "EnvSource": [("inlineRef", 1, "LocalObjectReference"), ("optional", 2, "bool")],
    "EnvFromSource": [("prefix", 1, "string"), ("configMapRef", 2, "EnvSource"),
                      ("secretRef", 3, "EnvSource")],
    "ResourceRequirements": [("limits", 1, "map:Quantity"), ("requests", 2, "map:Quantity")],
    "VolumeMount": [("name", 1, "string"), ("readOnly", 2, "bool"), ("mountPath", 3, "string"),
                    ("subPath", 4, "string")],
    "ExecAction": [("command", 1, "[]string")],
    "HTTPGetAction": [("path", 1, "string"), ("port", 2, "IntOrString"),
                      ("host", 3, "string"), ("scheme", 4, "string")],
    "TCPSocketAction": [("port", 1, "IntOrString"), ("host", 2, "string")],
    "ProbeHandler": [("exec", 1, "ExecAction"), ("httpGet", 2, "HTTPGetAction"),
                     ("tcpSocket", 3, "TCPSocketAction")],
    "SleepAction": [("seconds", 1, "int64")],
    "LifecycleHandler": [("exec", 1, "ExecAction"), ("httpGet", 2, "HTTPGetAction"),
                         ("tcpSocket", 3, "TCPSocketAction"), ("sleep", 4, "SleepAction")],
    "Lifecycle": [("postStart", 1, "LifecycleHandler"), ("preStop", 2, "LifecycleHandler")],
    "Capabilities": [("add", 1, "[]string"), ("drop", 2, "[]string")],
    "SeccompProfile": [("type", 1, "string"), ("localhostProfile", 2, "string")],
    "SecurityContext": [("capabilities", 1, "Capabilities"), ("privileged", 2, "pbool"),
                        ("runAsUser", 4, "int64"), ("runAsNonRoot", 5, "pbool"),
                        ("readOnlyRootFilesystem", 6, "pbool"),
                        ("allowPrivilegeEscalation", 7, "pbool"), ("runAsGroup", 8, "int64"),
                        ("seccompProfile", 11, "SeccompProfile")],
    "PodSecurityContext": [("runAsUser", 2, "int64"), ("runAsNonRoot", 3, "pbool"),
                           ("supplementalGroups", 4, "[]int64"), ("fsGroup", 5, "int64"),
                           ("runAsGroup", 6, "int64"), ("seccompProfile", 10, "SeccompProfile")],
    "Probe": [("inlineHandler", 1, "ProbeHandler"), ("initialDelaySeconds", 2, "int32"),
              ("timeoutSeconds", 3, "int32"), ("periodSeconds", 4, "int32"),
              ("successThreshold", 5, "int32"), ("failureThreshold", 6, "int32")],
    "Container": [("name", 1, "string"), ("image", 2, "string"), ("command", 3, "[]string"),
                  ("args", 4, "[]string"), ("workingDir", 5, "string"),
                  ("ports", 6, "[]ContainerPort"), ("env", 7, "[]EnvVar"),
                  ("resources", 8, "ResourceRequirements"),
                  ("volumeMounts", 9, "[]VolumeMount"), ("livenessProbe", 10, "Probe"),
                  ("readinessProbe", 11, "Probe"), ("lifecycle", 12, "Lifecycle"),
                  ("terminationMessagePath", 13, "string"),
                  ("imagePullPolicy", 14, "string"), ("securityContext", 15, "SecurityContext"),
                  ("stdin", 16, "bool"), ("stdinOnce", 17, "bool"), ("tty", 18, "bool"),
                  ("envFrom", 19, "[]EnvFromSource"),
                  ("terminationMessagePolicy", 20, "string"), ("startupProbe", 22, "Probe"),
                  ("restartPolicy", 24, "string")],
    "Toleration": [("key", 1, "string"), ("operator", 2, "string"), ("value", 3, "string"),
                   ("effect", 4, "string"), ("tolerationSeconds", 5, "int64")],
    "PodSpec": [("volumes", 1, "[]Volume"), ("containers", 2, "[]Container"),
                ("restartPolicy", 3, "string"), ("terminationGracePeriodSeconds", 4, "int64"),
                ("activeDeadlineSeconds", 5, "int64"), ("dnsPolicy", 6, "string"),
                ("nodeSelector", 7, "map:string"), ("serviceAccountName", 8, "string"),
                ("serviceAccount", 9, "string"), ("nodeName", 10, "string"),
                ("hostNetwork", 11, "bool"), ("hostPID", 12, "bool"), ("hostIPC", 13, "bool"),
                ("securityContext", 14, "PodSecurityContext"),
                ("imagePullSecrets", 15, "[]LocalObjectReference"),
                ("hostname", 16, "string"), ("subdomain", 17, "string"),
                ("schedulerName", 19, "string"), ("initContainers", 20, "[]Container"),
                ("automountServiceAccountToken", 21, "pbool"),
                ("tolerations", 22, "[]Toleration"), ("priorityClassName", 24, "string"),
                ("priority", 25, "int32"), ("shareProcessNamespace", 27, "pbool"),
                ("runtimeClassName", 29, "string"), ("enableServiceLinks", 30, "pbool"),
                ("preemptionPolicy", 31, "string")],
    "Pod": [("metadata", 1, "ObjectMeta"), ("spec", 2, "PodSpec")],
    "Empty": [],  # to look inside an undeclared field (`_zero`)
    "PodTemplateSpec": [("metadata", 1, "ObjectMeta"), ("spec", 2, "PodSpec")],
    # apps/v1
    "RollingUpdateDeployment": [("maxUnavailable", 1, "IntOrString"),
                                ("maxSurge", 2, "IntOrString")],
    "DeploymentStrategy": [("type", 1, "string"),
                           ("rollingUpdate", 2, "RollingUpdateDeployment")],
    "DeploymentSpec": [("replicas", 1, "int32"), ("selector", 2, "LabelSelector"),
                       ("template", 3, "PodTemplateSpec"), ("strategy", 4, "DeploymentStrategy"),
                       ("minReadySeconds", 5, "int32"), ("revisionHistoryLimit", 6, "int32"),
                       ("paused", 7, "bool"), ("progressDeadlineSeconds", 9, "int32")],
    "Deployment": [("metadata", 1, "ObjectMeta"), ("spec", 2, "DeploymentSpec")],
    "RollingUpdateDaemonSet": [("maxUnavailable", 1, "IntOrString"),
                               ("maxSurge", 2, "IntOrString")],
    "DaemonSetUpdateStrategy": [("type", 1, "string"),
                                ("rollingUpdate", 2, "RollingUpdateDaemonSet")],
    "DaemonSetSpec": [("selector", 1, "LabelSelector"), ("template", 2, "PodTemplateSpec"),
                      ("updateStrategy", 3, "DaemonSetUpdateStrategy"),
                      ("minReadySeconds", 4, "int32"), ("revisionHistoryLimit", 6, "int32")],
    "DaemonSet": [("metadata", 1, "ObjectMeta"), ("spec", 2, "DaemonSetSpec")],
    "VolumeResourceRequirements": [("limits", 1, "map:Quantity"),
                                   ("requests", 2, "map:Quantity")],
    "PersistentVolumeClaimSpec": [("accessModes", 1, "[]string"),
                                  ("resources", 2, "VolumeResourceRequirements"),
                                  ("volumeName", 3, "string"), ("selector", 4, "LabelSelector"),
                                  ("storageClassName", 5, "string"),
                                  ("volumeMode", 6, "string")],
    "PersistentVolumeClaim": [("metadata", 1, "ObjectMeta"),
                              ("spec", 2, "PersistentVolumeClaimSpec")],
    "RollingUpdateStatefulSetStrategy": [("partition", 1, "int32"),
                                         ("maxUnavailable", 2, "IntOrString")],
    "StatefulSetUpdateStrategy": [("type", 1, "string"),
                                  ("rollingUpdate", 2, "RollingUpdateStatefulSetStrategy")],
    "StatefulSetPersistentVolumeClaimRetentionPolicy": [("whenDeleted", 1, "string"),
                                                        ("whenScaled", 2, "string")],
    "StatefulSetOrdinals": [("start", 1, "int32")],
    "StatefulSetSpec": [("replicas", 1, "int32"), ("selector", 2, "LabelSelector"),
                        ("template", 3, "PodTemplateSpec"),
                        ("volumeClaimTemplates", 4, "[]PersistentVolumeClaim"),
                        ("serviceName", 5, "string"), ("podManagementPolicy", 6, "string"),
                        ("updateStrategy", 7, "StatefulSetUpdateStrategy"),
                        ("revisionHistoryLimit", 8, "int32"), ("minReadySeconds", 9, "int32"),
                        ("persistentVolumeClaimRetentionPolicy", 10,
                         "StatefulSetPersistentVolumeClaimRetentionPolicy"),
                        ("ordinals", 11, "StatefulSetOrdinals")],
    "StatefulSet": [("metadata", 1, "ObjectMeta"), ("spec", 2, "StatefulSetSpec")],
    # batch/v1
    "JobSpec": [("parallelism", 1, "int32"), ("completions", 2, "int32"),
                ("activeDeadlineSeconds", 3, "int64"), ("selector", 4, "LabelSelector"),
                ("manualSelector", 5, "bool"), ("template", 6, "PodTemplateSpec"),
                ("backoffLimit", 7, "int32"), ("ttlSecondsAfterFinished", 8, "int32"),
                ("completionMode", 9, "string"), ("suspend", 10, "bool")],
    "Job": [("metadata", 1, "ObjectMeta"), ("spec", 2, "JobSpec")],
    # core/v1 configuration and services
    "ConfigMap": [("metadata", 1, "ObjectMeta"), ("data", 2, "map:string"),
                  ("binaryData", 3, "map:bytes"), ("immutable", 4, "bool")],
    "Secret": [("metadata", 1, "ObjectMeta"), ("data", 2, "map:bytes"), ("type", 3, "string"),
               ("stringData", 4, "map:string"), ("immutable", 5, "bool")],
    "ServicePort": [("name", 1, "string"), ("protocol", 2, "string"), ("port", 3, "int32"),
                    ("targetPort", 4, "IntOrString"), ("nodePort", 5, "int32"),
                    ("appProtocol", 6, "string")],
    "ServiceSpec": [("ports", 1, "[]ServicePort"), ("selector", 2, "map:string"),
                    ("clusterIP", 3, "string"), ("type", 4, "string"),
                    ("externalIPs", 5, "[]string"), ("sessionAffinity", 7, "string"),
                    ("externalName", 10, "string"), ("publishNotReadyAddresses", 13, "bool"),
                    ("ipFamilyPolicy", 17, "string"), ("clusterIPs", 18, "[]string"),
                    ("ipFamilies", 19, "[]string"), ("internalTrafficPolicy", 22, "string")],
    "Service": [("metadata", 1, "ObjectMeta"), ("spec", 2, "ServiceSpec")],
    # `kubectl create serviceaccount` and `kubectl create token`
    "ObjectReference": [("kind", 1, "string"), ("namespace", 2, "string"),
                        ("name", 3, "string"), ("uid", 4, "string"),
                        ("apiVersion", 5, "string"), ("resourceVersion", 6, "string"),
                        ("fieldPath", 7, "string")],
    "ServiceAccount": [("metadata", 1, "ObjectMeta"), ("secrets", 2, "[]ObjectReference"),
                       ("imagePullSecrets", 3, "[]LocalObjectReference"),
                       ("automountServiceAccountToken", 4, "pbool")],
    "BoundObjectReference": [("kind", 1, "string"), ("apiVersion", 2, "string"),
                             ("name", 3, "string"), ("uid", 4, "string")],
    "TokenRequestSpec": [("audiences", 1, "[]string"),
                         ("boundObjectRef", 3, "BoundObjectReference"),
                         ("expirationSeconds", 4, "int64")],
    "TokenRequest": [("metadata", 1, "ObjectMeta"), ("spec", 2, "TokenRequestSpec")],
    # kubectl create quota
    "ScopedResourceSelectorRequirement": [("scopeName", 1, "string"),
                                          ("operator", 2, "string"),
                                          ("values", 3, "[]string")],
    "ScopeSelector": [("matchExpressions", 1, "[]ScopedResourceSelectorRequirement")],
    "ResourceQuotaSpec": [("hard", 1, "map:Quantity"), ("scopes", 2, "[]string"),
                          ("scopeSelector", 3, "ScopeSelector")],
    "ResourceQuotaStatus": [("hard", 1, "map:Quantity"), ("used", 2, "map:Quantity")],
    "ResourceQuota": [("metadata", 1, "ObjectMeta"), ("spec", 2, "ResourceQuotaSpec"),
                      ("status", 3, "ResourceQuotaStatus")],
    "LimitRangeItem": [("type", 1, "string"), ("max", 2, "map:Quantity"),
                       ("min", 3, "map:Quantity"), ("default", 4, "map:Quantity"),
                       ("defaultRequest", 5, "map:Quantity"),
                       ("maxLimitRequestRatio", 6, "map:Quantity")],
    "LimitRangeSpec": [("limits", 1, "[]LimitRangeItem")],
    "LimitRange": [("metadata", 1, "ObjectMeta"), ("spec", 2, "LimitRangeSpec")],
    # kubectl create cronjob
    "JobTemplateSpec": [("metadata", 1, "ObjectMeta"), ("spec", 2, "JobSpec")],
    "CronJobSpec": [("schedule", 1, "string"), ("startingDeadlineSeconds", 2, "int64"),
                    ("concurrencyPolicy", 3, "string"), ("suspend", 4, "pbool"),
                    ("jobTemplate", 5, "JobTemplateSpec"),
                    ("successfulJobsHistoryLimit", 6, "int32"),
                    ("failedJobsHistoryLimit", 7, "int32"), ("timeZone", 8, "string")],
    "CronJobStatus": [("active", 1, "[]ObjectReference"), ("lastScheduleTime", 4, "Time"),
                      ("lastSuccessfulTime", 5, "Time")],
    "CronJob": [("metadata", 1, "ObjectMeta"), ("spec", 2, "CronJobSpec"),
                ("status", 3, "CronJobStatus")],
    # kubectl autoscale (autoscaling/v1)
    "CrossVersionObjectReference": [("kind", 1, "string"), ("name", 2, "string"),
                                    ("apiVersion", 3, "string")],
    "HorizontalPodAutoscalerSpecV1": [("scaleTargetRef", 1, "CrossVersionObjectReference"),
                                      ("minReplicas", 2, "int32"), ("maxReplicas", 3, "int32"),
                                      ("targetCPUUtilizationPercentage", 4, "int32")],
    "HorizontalPodAutoscalerStatusV1": [("observedGeneration", 1, "int64"),
                                        ("lastScaleTime", 2, "Time"),
                                        ("currentReplicas", 3, "int32"),
                                        ("desiredReplicas", 4, "int32"),
                                        ("currentCPUUtilizationPercentage", 5, "int32")],
    "HorizontalPodAutoscalerV1": [("metadata", 1, "ObjectMeta"),
                                  ("spec", 2, "HorizontalPodAutoscalerSpecV1"),
                                  ("status", 3, "HorizontalPodAutoscalerStatusV1")],
    # kubectl create ingress
    "TypedLocalObjectReference": [("apiGroup", 1, "string"), ("kind", 2, "string"),
                                  ("name", 3, "string")],
    "ServiceBackendPort": [("name", 1, "string"), ("number", 2, "int32")],
    "IngressServiceBackend": [("name", 1, "string"), ("port", 2, "ServiceBackendPort")],
    "IngressBackend": [("resource", 3, "TypedLocalObjectReference"),
                       ("service", 4, "IngressServiceBackend")],
    "HTTPIngressPath": [("path", 1, "string"), ("backend", 2, "IngressBackend"),
                        ("pathType", 3, "string")],
    "HTTPIngressRuleValue": [("paths", 1, "[]HTTPIngressPath")],
    "IngressRuleValue": [("http", 1, "HTTPIngressRuleValue")],
    "IngressRule": [("host", 1, "string"), ("inlineRuleValue", 2, "IngressRuleValue")],
    "IngressTLS": [("hosts", 1, "[]string"), ("secretName", 2, "string")],
    "IngressSpec": [("defaultBackend", 1, "IngressBackend"), ("tls", 2, "[]IngressTLS"),
                    ("rules", 3, "[]IngressRule"), ("ingressClassName", 4, "string")],
    "Ingress": [("metadata", 1, "ObjectMeta"), ("spec", 2, "IngressSpec")],
}

# (apiVersion, kind) -> the message of its body
KINDS: dict[tuple[str, str], str] = {
    ("v1", "Namespace"): "Namespace",
    ("policy/v1", "PodDisruptionBudget"): "PodDisruptionBudget",
    ("policy/v1", "Eviction"): "Eviction",  # kubectl drain
    ("v1", "DeleteOptions"): "DeleteOptions",  # typed clients' DELETE bodies
    ("meta.k8s.io/v1", "DeleteOptions"): "DeleteOptions",
    ("scheduling.k8s.io/v1", "PriorityClass"): "PriorityClass",
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): "SelfSubjectAccessReview",
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): "SelfSubjectRulesReview",
    ("authentication.k8s.io/v1", "SelfSubjectReview"): "SelfSubjectReview",
    ("rbac.authorization.k8s.io/v1", "Role"): "Role",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "Role",  # + aggregationRule (unused)
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "RoleBinding",
    ("apps/v1", "Deployment"): "Deployment",
    ("apps/v1", "DaemonSet"): "DaemonSet",
    ("apps/v1", "StatefulSet"): "StatefulSet",
    ("v1", "PersistentVolumeClaim"): "PersistentVolumeClaim",
    ("batch/v1", "Job"): "Job",
    ("v1", "ConfigMap"): "ConfigMap",
    ("v1", "Secret"): "Secret",
    ("certificates.k8s.io/v1", "CertificateSigningRequest"): "CertificateSigningRequest",
    ("v1", "Service"): "Service",
    ("v1", "Pod"): "Pod",  # kubectl debug --copy-to
    ("v1", "ServiceAccount"): "ServiceAccount",
    ("authentication.k8s.io/v1", "TokenRequest"): "TokenRequest",
    ("v1", "ResourceQuota"): "ResourceQuota",
    ("v1", "LimitRange"): "LimitRange",
    ("batch/v1", "CronJob"): "CronJob",
    ("networking.k8s.io/v1", "Ingress"): "Ingress",
    ("autoscaling/v1", "HorizontalPodAutoscaler"): "HorizontalPodAutoscalerV1",
}

# "pbool" is a Go *bool: its false is meaningful (`automountServiceAccountToken: false`) and
# kept, where a plain Go bool's false is its zero value and left out (see `_go_zero`).
_SCALARS = {"string": FieldDescriptor.TYPE_STRING, "int32": FieldDescriptor.TYPE_INT32,
            "int64": FieldDescriptor.TYPE_INT64, "bool": FieldDescriptor.TYPE_BOOL,
            "pbool": FieldDescriptor.TYPE_BOOL, "bytes": FieldDescriptor.TYPE_BYTES}
_POINTER_BOOLS = {(name, json_name) for name, fields in _MESSAGES.items()
                  for json_name, _, type_name in fields if type_name == "pbool"}


def _set_type(f: descriptor_pb2.FieldDescriptorProto, type_name: str) -> None:
    if type_name in _SCALARS:
        f.type = _SCALARS[type_name]
    else:
        f.type = FieldDescriptor.TYPE_MESSAGE
        f.type_name = f".{_PACKAGE}.{type_name}"


def _build_pool() -> descriptor_pool.DescriptorPool:
    file = descriptor_pb2.FileDescriptorProto(name="skiff_kubewire.proto", package=_PACKAGE,
                                              syntax="proto2")
    for name, fields in _MESSAGES.items():
        msg = file.message_type.add(name=name)
        for json_name, number, type_name in fields:
            f = msg.field.add(name=json_name, number=number, json_name=json_name)
            f.label = FieldDescriptor.LABEL_OPTIONAL
            if type_name.startswith("map:"):
                entry_name = json_name[0].upper() + json_name[1:] + "Entry"
                entry = msg.nested_type.add(name=entry_name)
                entry.options.map_entry = True
                key = entry.field.add(name="key", number=1, json_name="key")
                key.label = FieldDescriptor.LABEL_OPTIONAL
                key.type = FieldDescriptor.TYPE_STRING
                value = entry.field.add(name="value", number=2, json_name="value")
                value.label = FieldDescriptor.LABEL_OPTIONAL
                _set_type(value, type_name.removeprefix("map:"))
                f.label = FieldDescriptor.LABEL_REPEATED
                f.type = FieldDescriptor.TYPE_MESSAGE
                f.type_name = f".{_PACKAGE}.{name}.{entry_name}"
            elif type_name.startswith("[]"):
                f.label = FieldDescriptor.LABEL_REPEATED
                _set_type(f, type_name.removeprefix("[]"))
            else:
                _set_type(f, type_name)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return pool


_POOL = _build_pool()
_LENGTH_DELIMITED = 2  # protobuf wire type of strings, bytes and messages


def _message(name: str) -> message.Message:
    cls = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
    return cls()


def _repeated(field: FieldDescriptor) -> bool:
    flag = getattr(field, "is_repeated", None)  # protobuf >= 5.29; `label` before
    if flag is not None:
        return bool(flag)
    return bool(field.label == FieldDescriptor.LABEL_REPEATED)


def _to_json(msg: message.Message) -> Any:
    """A decoded message as Kubernetes' JSON: the special wire types (Time, IntOrString)
    become their JSON forms, and int64 stays a number."""
    desc: Descriptor = msg.DESCRIPTOR
    if desc.name == "Time":
        seconds = getattr(msg, "seconds")  # noqa: B009
        return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if desc.name == "IntOrString":
        return getattr(msg, "strVal") if getattr(msg, "type") == 1 \
            else getattr(msg, "intVal")  # noqa: B009
    if desc.name == "Quantity":
        return getattr(msg, "string")  # noqa: B009
    if desc.name == "FieldsV1":  # raw JSON in protobuf, the object itself in JSON
        return json.loads(getattr(msg, "Raw") or b"{}")  # noqa: B009
    if desc.name == "ExtraValue":  # a user's extra values: a list in JSON
        return list(getattr(msg, "items"))  # noqa: B009
    out: dict[str, Any] = {}
    for field, value in msg.ListFields():
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            out[field.name] = {k: _to_json(v) if value_field.message_type else _scalar(
                value_field, v) for k, v in value.items()}
        elif _repeated(field):
            out[field.name] = [_to_json(v) if field.message_type else _scalar(field, v)
                               for v in value]
        elif field.message_type is not None and field.name.startswith("inline"):
            out.update(_to_json(value))  # embedded in Go: fields belong to the parent
        elif field.message_type is not None:
            if field.message_type.name == "Time" and not getattr(value, "seconds"):  # noqa: B009
                continue  # Go's zero time is `null`, i.e. not set
            out[field.name] = _to_json(value)
        elif _go_zero(field, value):
            continue
        else:
            out[field.name] = _scalar(field, value)
    return out


def _go_zero(field: FieldDescriptor, value: Any) -> bool:
    """Go writes its non-pointer fields even when empty (`type: ""`, `hostNetwork: false`,
    `generation: 0`); in JSON they are omitted, and Skiff's defaults must see them missing.
    Numbers other than `generation` are kept: a pointer's 0 (`replicas: 0`,
    `backoffLimit: 0`) is meaningful, as is a pointer bool's false ("pbool")."""
    if value is False:
        return (field.containing_type.name, field.name) not in _POINTER_BOOLS
    if value == "":
        return True
    return bool(field.name == "generation" and value == 0)


def _scalar(field: FieldDescriptor, value: Any) -> Any:
    """bytes are base64 in Kubernetes' JSON (a Secret's data)."""
    if field.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(value).decode()
    return value


def decode(body: bytes) -> dict[str, Any]:
    """One Kubernetes protobuf request body as the JSON object it stands for."""
    if not body.startswith(MAGIC):
        raise ApiError.bad_request("request body: a Kubernetes protobuf body starts with "
                                   "the bytes 'k8s\\x00'")
    envelope = _message("Unknown")
    try:
        envelope.ParseFromString(body[len(MAGIC):])
    except message.DecodeError:
        raise ApiError.bad_request("request body is not a valid Kubernetes protobuf "
                                   "envelope (runtime.Unknown)") from None
    meta = getattr(envelope, "typeMeta")  # noqa: B009
    api_version, kind = meta.apiVersion, meta.kind
    name = KINDS.get((api_version, kind))
    if name is None:
        raise ApiError(Reason.UNSUPPORTED_MEDIA_TYPE,
                       f"the body of {kind or 'an object'} ({api_version or 'no apiVersion'})"
                       " cannot be sent as application/vnd.kubernetes.protobuf; "
                       "send application/json")
    obj = _message(name)
    try:
        obj.ParseFromString(getattr(envelope, "raw"))  # noqa: B009
    except message.DecodeError:
        raise ApiError.bad_request(f"request body is not a valid {kind} in Kubernetes' "
                                   "protobuf encoding") from None
    if (unknown := _first_unknown(obj)) is not None:
        # Dropping it would store something other than what the client sent.
        where, number = unknown
        raise ApiError(Reason.UNSUPPORTED_MEDIA_TYPE,
                       f"the body of {kind} ({api_version}) has a field Skiff's protobuf "
                       f"decoder does not know (field {number} of {where}); send "
                       "application/json")
    decoded: dict[str, Any] = {"apiVersion": api_version, "kind": kind, **_to_json(obj)}
    return decoded


def _zero(entry: Any) -> bool:
    """Whether an undeclared field holds nothing: 0, empty bytes, or a message whose every
    field is zero (a new object's status as Go writes it: `observedGeneration: 0`, ...)."""
    if entry.wire_type != _LENGTH_DELIMITED:
        return bool(entry.data == 0)
    if not entry.data:
        return True
    inner = _message("Empty")
    try:
        inner.ParseFromString(entry.data)
    except message.DecodeError:
        return False  # a non-empty string or bytes
    return all(_zero(e) for e in unknown_fields.UnknownFieldSet(inner))


def _first_unknown(msg: message.Message) -> tuple[str, int] | None:
    """(message name, field number) of a field the table does not declare, if any. One
    that holds its zero value (an empty string or message, a 0) carries nothing and passes:
    Go writes every non-pointer field, e.g. each ObjectMeta's empty `selfLink`."""
    for entry in unknown_fields.UnknownFieldSet(msg):
        if not _zero(entry):
            return msg.DESCRIPTOR.name, int(entry.field_number)
    for field, value in msg.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            nested = list(value.values()) if field.message_type.fields_by_name[
                "value"].message_type is not None else []
        elif _repeated(field):
            nested = list(value)
        else:
            nested = [value]
        for item in nested:
            if (found := _first_unknown(item)) is not None:
                return found
    return None
