"""The PersistentVolumeClaim annotations the scheduler and the PersistentVolume controller
agree on (Kubernetes' `volume.kubernetes.io/...` and `pv.kubernetes.io/...` names), kept in
one place because both services read and write them."""

from __future__ import annotations

# The scheduler names the node it chose on a WaitForFirstConsumer claim (VolumeBinding
# PreBind); the controller provisions the volume for that node.
SELECTED_NODE = "volume.kubernetes.io/selected-node"
# The controller finished binding: with `spec.volumeName`, the claim is fully bound.
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
# A StorageClass's volumeBindingMode that leaves binding until a pod is scheduled.
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
