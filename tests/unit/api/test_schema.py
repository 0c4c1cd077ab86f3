"""Unknown fields are pruned and named; real manifests prune to nothing (AS1)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from skiff.api import apply_defaults, prune_unknown_fields, validate
from skiff.api.testing import make_pod

# As `kubectl get pod -o yaml` prints a running pod of a Deployment (Kubernetes 1.31).
REAL_POD = """
apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubectl.kubernetes.io/restartedAt: "2024-05-01T10:00:00Z"
  creationTimestamp: "2024-05-01T10:00:05Z"
  generateName: web-7d9c8b6f5-
  labels:
    app: web
    pod-template-hash: 7d9c8b6f5
  name: web-7d9c8b6f5-x2k4q
  namespace: default
  ownerReferences:
  - apiVersion: apps/v1
    blockOwnerDeletion: true
    controller: true
    kind: ReplicaSet
    name: web-7d9c8b6f5
    uid: 0b5e8f9a-1111-2222-3333-444455556666
  resourceVersion: "123456"
  uid: 9f1c2d3e-aaaa-bbbb-cccc-ddddeeeeffff
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    fieldsV1:
      f:metadata:
        f:labels: {}
    manager: kube-controller-manager
    operation: Update
    time: "2024-05-01T10:00:05Z"
spec:
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          labelSelector:
            matchLabels: {app: web}
          topologyKey: kubernetes.io/hostname
  containers:
  - name: web
    image: nginx:1.25
    imagePullPolicy: IfNotPresent
    command: ["nginx"]
    args: ["-g", "daemon off;"]
    workingDir: /usr/share/nginx
    ports:
    - containerPort: 80
      name: http
      protocol: TCP
    env:
    - name: POD_NAME
      valueFrom:
        fieldRef: {apiVersion: v1, fieldPath: metadata.name}
    - name: MODE
      value: prod
    envFrom:
    - configMapRef: {name: web-config}
      prefix: CFG_
    resources:
      limits: {cpu: 500m, memory: 256Mi}
      requests: {cpu: 100m, memory: 128Mi}
    resizePolicy:
    - resourceName: cpu
      restartPolicy: NotRequired
    livenessProbe:
      failureThreshold: 3
      httpGet:
        path: /healthz
        port: http
        scheme: HTTP
        httpHeaders:
        - name: X-Probe
          value: liveness
      initialDelaySeconds: 5
      periodSeconds: 10
      successThreshold: 1
      timeoutSeconds: 1
      terminationGracePeriodSeconds: 10
    readinessProbe:
      tcpSocket: {port: 80}
      periodSeconds: 5
    startupProbe:
      grpc: {port: 9090, service: health}
      failureThreshold: 30
    lifecycle:
      postStart:
        exec: {command: ["sh", "-c", "echo started"]}
      preStop:
        sleep: {seconds: 5}
    securityContext:
      runAsNonRoot: true
      capabilities: {drop: ["ALL"]}
    stdin: false
    stdinOnce: false
    tty: false
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
    volumeMounts:
    - mountPath: /var/cache/nginx
      name: cache
    - mountPath: /var/run/secrets/kubernetes.io/serviceaccount
      name: kube-api-access-abcde
      readOnly: true
  initContainers:
  - name: init
    image: busybox:1.36
    command: ["sh", "-c", "true"]
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
  - name: log-shipper
    image: fluent-bit:3
    restartPolicy: Always
  dnsPolicy: ClusterFirst
  enableServiceLinks: true
  nodeName: node-1
  nodeSelector:
    kubernetes.io/os: linux
  preemptionPolicy: PreemptLowerPriority
  priority: 1000
  priorityClassName: high
  readinessGates:
  - conditionType: example.com/feature-1
  restartPolicy: Always
  schedulerName: default-scheduler
  securityContext:
    fsGroup: 101
  serviceAccount: default
  serviceAccountName: default
  terminationGracePeriodSeconds: 30
  hostname: web
  subdomain: web-svc
  hostAliases:
  - ip: 127.0.0.1
    hostnames: [foo.local]
  dnsConfig:
    nameservers: [1.1.1.1]
    options:
    - name: ndots
      value: "2"
  imagePullSecrets:
  - name: regcred
  os: {name: linux}
  tolerations:
  - effect: NoExecute
    key: node.kubernetes.io/not-ready
    operator: Exists
    tolerationSeconds: 300
  - effect: NoExecute
    key: node.kubernetes.io/unreachable
    operator: Exists
    tolerationSeconds: 300
  topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
    labelSelector:
      matchLabels: {app: web}
    matchLabelKeys: [pod-template-hash]
    nodeAffinityPolicy: Honor
    nodeTaintsPolicy: Ignore
  volumes:
  - name: cache
    emptyDir: {sizeLimit: 1Gi}
  - name: kube-api-access-abcde
    projected:
      defaultMode: 420
      sources:
      - serviceAccountToken: {expirationSeconds: 3607, path: token}
status:
  conditions:
  - lastProbeTime: null
    lastTransitionTime: "2024-05-01T10:00:07Z"
    status: "True"
    type: Ready
  containerStatuses:
  - containerID: containerd://abc
    image: docker.io/library/nginx:1.25
    imageID: docker.io/library/nginx@sha256:abc
    lastState: {}
    name: web
    ready: true
    restartCount: 0
    started: true
    state:
      running: {startedAt: "2024-05-01T10:00:06Z"}
  hostIP: 10.0.0.11
  hostIPs:
  - ip: 10.0.0.11
  phase: Running
  podIP: 10.244.1.5
  podIPs:
  - ip: 10.244.1.5
  qosClass: Burstable
  startTime: "2024-05-01T10:00:05Z"
"""

REAL_STATEFULSET = """
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
  namespace: default
spec:
  selector:
    matchLabels:
      app: nginx
  serviceName: "nginx"
  replicas: 3
  minReadySeconds: 10
  podManagementPolicy: OrderedReady
  revisionHistoryLimit: 10
  persistentVolumeClaimRetentionPolicy:
    whenDeleted: Retain
    whenScaled: Delete
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      partition: 0
  ordinals:
    start: 0
  template:
    metadata:
      labels:
        app: nginx
    spec:
      terminationGracePeriodSeconds: 10
      containers:
      - name: nginx
        image: registry.k8s.io/nginx-slim:0.24
        ports:
        - containerPort: 80
          name: web
        volumeMounts:
        - name: www
          mountPath: /usr/share/nginx/html
      volumes:
      - name: www
        emptyDir: {}
  volumeClaimTemplates:
  - metadata:
      name: www
    spec:
      accessModes: [ "ReadWriteOnce" ]
      storageClassName: "my-storage-class"
      resources:
        requests:
          storage: 1Gi
status:
  availableReplicas: 3
  collisionCount: 0
  currentReplicas: 3
  currentRevision: web-6b8f9d8d7c
  observedGeneration: 1
  readyReplicas: 3
  replicas: 3
  updateRevision: web-6b8f9d8d7c
  updatedReplicas: 3
"""

REAL_REPLICASET = """
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: frontend
  namespace: default
  labels:
    app: guestbook
    tier: frontend
spec:
  replicas: 3
  selector:
    matchLabels:
      tier: frontend
    matchExpressions:
    - {key: app, operator: In, values: [guestbook]}
  template:
    metadata:
      labels:
        app: guestbook
        tier: frontend
    spec:
      containers:
      - name: php-redis
        image: us-docker.pkg.dev/google-samples/containers/gke/gb-frontend:v5
status:
  availableReplicas: 3
  fullyLabeledReplicas: 3
  observedGeneration: 1
  readyReplicas: 3
  replicas: 3
"""

REAL_OTHERS = """
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: high-priority
value: 1000000
globalDefault: false
preemptionPolicy: PreemptLowerPriority
description: "This priority class should be used for XYZ service pods only."
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: zk-pdb
  namespace: default
spec:
  maxUnavailable: 1
  unhealthyPodEvictionPolicy: AlwaysAllow
  selector:
    matchLabels:
      app: zookeeper
status:
  currentHealthy: 3
  desiredHealthy: 2
  disruptionsAllowed: 1
  expectedPods: 3
  observedGeneration: 1
  conditions:
  - lastTransitionTime: "2024-05-01T10:00:00Z"
    message: ""
    observedGeneration: 1
    reason: SufficientPods
    status: "True"
    type: DisruptionAllowed
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: node-1
  namespace: kube-node-lease
  ownerReferences:
  - apiVersion: v1
    kind: Node
    name: node-1
    uid: 1a2b3c4d-0000-0000-0000-000000000001
spec:
  holderIdentity: node-1
  leaseDurationSeconds: 40
  renewTime: "2024-05-01T10:00:10.123456Z"
---
apiVersion: v1
kind: Node
metadata:
  name: node-1
  labels:
    kubernetes.io/hostname: node-1
    topology.kubernetes.io/zone: zone-a
  annotations:
    node.alpha.kubernetes.io/ttl: "0"
spec:
  podCIDR: 10.244.1.0/24
  podCIDRs: [10.244.1.0/24]
  providerID: kind://docker/kind/node-1
  taints:
  - effect: NoSchedule
    key: node.kubernetes.io/unreachable
    timeAdded: "2024-05-01T10:00:00Z"
status:
  addresses:
  - address: 10.0.0.11
    type: InternalIP
  allocatable: {cpu: "8", memory: 16Gi, pods: "110"}
  capacity: {cpu: "8", memory: 16Gi, pods: "110"}
  conditions:
  - lastHeartbeatTime: "2024-05-01T10:00:00Z"
    lastTransitionTime: "2024-05-01T09:00:00Z"
    message: kubelet is posting ready status
    reason: KubeletReady
    status: "True"
    type: Ready
  daemonEndpoints:
    kubeletEndpoint: {Port: 10250}
  nodeInfo:
    architecture: amd64
    kubeletVersion: v1.31.0
  images: []
---
apiVersion: v1
kind: Event
metadata:
  name: web-7d9c8b6f5-x2k4q.17cb7a5c1f2d
  namespace: default
involvedObject:
  apiVersion: v1
  kind: Pod
  name: web-7d9c8b6f5-x2k4q
  namespace: default
  uid: 9f1c2d3e-aaaa-bbbb-cccc-ddddeeeeffff
  resourceVersion: "123400"
  fieldPath: spec.containers{web}
reason: Pulled
message: Container image "nginx:1.25" already present on machine
source:
  component: kubelet
  host: node-1
firstTimestamp: "2024-05-01T10:00:06Z"
lastTimestamp: "2024-05-01T10:00:06Z"
count: 1
type: Normal
eventTime: null
reportingComponent: kubelet
reportingInstance: node-1
---
apiVersion: v1
kind: Namespace
metadata:
  name: prod
  labels:
    kubernetes.io/metadata.name: prod
spec:
  finalizers: [kubernetes]
status:
  phase: Active
"""

MANIFESTS = [yaml.safe_load(REAL_POD), yaml.safe_load(REAL_STATEFULSET),
             yaml.safe_load(REAL_REPLICASET), *yaml.safe_load_all(REAL_OTHERS)]


@pytest.mark.parametrize("manifest", [pytest.param(m, id=m["kind"]) for m in MANIFESTS])
def test_as1_real_manifest_has_no_unknown_fields(manifest: dict[str, Any]) -> None:
    obj = copy.deepcopy(manifest)
    assert prune_unknown_fields(obj) == []
    assert obj == manifest


@pytest.mark.parametrize("manifest", [pytest.param(m, id=m["kind"]) for m in MANIFESTS])
def test_as1_real_manifest_is_accepted_unchanged(manifest: dict[str, Any]) -> None:
    obj = copy.deepcopy(manifest)
    apply_defaults(obj)
    assert validate(obj) == []


@pytest.mark.parametrize(("obj", "unknown", "pruned"), [
    pytest.param(
        {**make_pod("p").obj(), "extra": 1}, ["extra"], {**make_pod("p").obj()},
        id="top-level"),
    pytest.param(
        {"kind": "Pod", "spec": {"foo": 1, "containers": [
            {"name": "c", "imagePullSecretz": [], "command": ["x"]}]}},
        ["spec.foo", "spec.containers[0].imagePullSecretz"],
        {"kind": "Pod", "spec": {"containers": [{"name": "c", "command": ["x"]}]}},
        id="nested"),
    pytest.param(
        {"kind": "Pod", "metadata": {"name": "p", "nmae": "q"}},
        ["metadata.nmae"], {"kind": "Pod", "metadata": {"name": "p"}}, id="metadata"),
    pytest.param(
        {"kind": "Pod", "spec": {"containers": [{"name": "c", "livenessProbe": {
            "exec": {"command": ["x"], "shell": True}, "period": 3}}]}},
        ["spec.containers[0].livenessProbe.exec.shell",
         "spec.containers[0].livenessProbe.period"],
        {"kind": "Pod", "spec": {"containers": [{"name": "c", "livenessProbe": {
            "exec": {"command": ["x"]}}}]}},
        id="probe"),
    pytest.param(
        {"kind": "StatefulSet", "spec": {"template": {"spec": {"containerz": []}}}},
        ["spec.template.spec.containerz"], {"kind": "StatefulSet", "spec": {"template": {
            "spec": {}}}}, id="template"),
    pytest.param(
        {"kind": "PriorityClass", "value": 1, "spec": {}}, ["spec"],
        {"kind": "PriorityClass", "value": 1}, id="priorityclass-has-no-spec"),
    pytest.param(
        {"kind": "Pod", "metadata": {"labels": {"anything": "x"}},
         "spec": {"nodeSelector": {"any": "thing"}, "affinity": {"whatever": {}}}},
        [], None, id="open-ended-subtrees"),
    pytest.param({"kind": "Frobnicator", "spec": {"anything": 1}}, [], None,
                 id="unknown-kind"),
])
def test_as1_unknown_fields_are_pruned_and_named(obj: dict[str, Any], unknown: list[str],
                                                 pruned: dict[str, Any] | None) -> None:
    original = copy.deepcopy(obj)
    assert prune_unknown_fields(obj) == unknown
    assert obj == (original if pruned is None else pruned)
