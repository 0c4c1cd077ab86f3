"""Well-known labels, annotations, taints and finalizers: the keys Kubernetes (and Skiff's
Fence) give a meaning, spelled once so that the apiserver, the controllers, the scheduler,
the kubelet, the fence agent and the CLI agree (Kubernetes' `k8s.io/api/core/v1`
`well_known_labels.go`, `well_known_taints.go` and `annotation_key_constants.go`)."""

from __future__ import annotations

# -- node labels -------------------------------------------------------------------------
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_OS = "kubernetes.io/os"
LABEL_ARCH = "kubernetes.io/arch"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_ZONE_BETA = "failure-domain.beta.kubernetes.io/zone"
LABEL_REGION_BETA = "failure-domain.beta.kubernetes.io/region"
LABEL_EXCLUDE_DISRUPTION = "node.kubernetes.io/exclude-disruption"
# `node-role.kubernetes.io/<role>` labels, and the older `kubernetes.io/role: <role>`
NODE_ROLE_LABEL_PREFIX = "node-role.kubernetes.io/"
LABEL_NODE_ROLE = "kubernetes.io/role"
LABEL_CONTROL_PLANE_ROLE = NODE_ROLE_LABEL_PREFIX + "control-plane"
# a namespace's own name, as a label namespaceSelectors match on
LABEL_METADATA_NAME = "kubernetes.io/metadata.name"

# -- node taints (the node lifecycle controller's and the kubelet's) ---------------------
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
TAINT_OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
TAINT_MEMORY_PRESSURE = "node.kubernetes.io/memory-pressure"
TAINT_DISK_PRESSURE = "node.kubernetes.io/disk-pressure"
TAINT_PID_PRESSURE = "node.kubernetes.io/pid-pressure"
TAINT_NETWORK_UNAVAILABLE = "node.kubernetes.io/network-unavailable"

# -- static and mirror pods (the kubelet's config sources) -------------------------------
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"
CONFIG_HASH_ANNOTATION = "kubernetes.io/config.hash"
CONFIG_SEEN_ANNOTATION = "kubernetes.io/config.seen"

# -- Fence (skiff.io) --------------------------------------------------------------------
# a node's annotation naming the agent that can fence it (`power`, `network`, `storage`)
FENCE_AGENT_ANNOTATION = "skiff.io/fence-agent"
# a Fence's finalizer, removed by the fence agent once it unfenced the node
FENCE_FINALIZER = "skiff.io/fence-agent"
# the taint on a node its Fence cut off, and the node annotations of the fencing controller
TAINT_FENCED = "skiff.io/fenced"
FENCING_ANNOTATION = "skiff.io/fencing"
UNFENCED_AT_ANNOTATION = "skiff.io/unfenced-at"
CORDONED_BY_FENCING_ANNOTATION = "skiff.io/cordoned-by-fencing"

# -- workloads ---------------------------------------------------------------------------
JOB_CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
JOB_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
CRONJOB_SCHEDULED_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"

# -- storage -----------------------------------------------------------------------------
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
# the scheduler names the node it chose on a WaitForFirstConsumer claim (VolumeBinding
# PreBind); the PersistentVolume controller provisions the volume for that node
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
# the PersistentVolume controller finished binding: with `spec.volumeName`, fully bound
BIND_COMPLETED_ANNOTATION = "pv.kubernetes.io/bind-completed"
# Skiff's local volumes: their provisioner and attacher name
LOCAL_VOLUME_PLUGIN = "skiff.io/local"

# -- security ----------------------------------------------------------------------------
# the annotations Pod Security still reads (Kubernetes moved them to securityContext fields)
SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
SECCOMP_CONTAINER_ANNOTATION_PREFIX = "container.seccomp.security.alpha.kubernetes.io/"
APPARMOR_CONTAINER_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
POD_SECURITY_LABEL_PREFIX = "pod-security.kubernetes.io/"
