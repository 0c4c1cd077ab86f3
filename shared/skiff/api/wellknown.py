"""Well-known labels, annotations and taints: the keys Kubernetes (and Skiff's Fence) give a
meaning, spelled once so that the apiserver, the controllers, the scheduler, the kubelet and
the fence agent agree (Kubernetes' `k8s.io/api/core/v1/well_known_labels.go`,
`well_known_taints.go` and `annotation_key_constants.go`)."""

from __future__ import annotations

# -- workloads ---------------------------------------------------------------------------
JOB_CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
JOB_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
CRONJOB_SCHEDULED_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"

# -- storage -----------------------------------------------------------------------------
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"

# -- security ----------------------------------------------------------------------------
# the annotations Pod Security still reads (Kubernetes moved them to securityContext fields)
SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
SECCOMP_CONTAINER_ANNOTATION_PREFIX = "container.seccomp.security.alpha.kubernetes.io/"
APPARMOR_CONTAINER_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
POD_SECURITY_LABEL_PREFIX = "pod-security.kubernetes.io/"
