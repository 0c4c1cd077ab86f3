"""Strategies of the kinds whose status a controller or the kubelet owns, so the status a
client sends on create is dropped, as their PrepareForCreate does: the workload
controllers' ReplicaSets, ReplicationControllers and StatefulSets, PodDisruptionBudgets
(the disruption controller), HorizontalPodAutoscalers, the volume kinds
(PersistentVolumes, PersistentVolumeClaims, VolumeAttachments) and Fences.
"""

from __future__ import annotations

from skiff.apiserver.registry.strategy import Strategy


class ControllerOwnedStatus(Strategy):
    """A kind whose status is written only through its status subresource, by its
    controller: a created object starts without the client's status."""

    reset_status_on_create = True


# The kinds this module serves (strategies/catalog.py lists them).
KINDS = ("ReplicaSet", "ReplicationController", "StatefulSet", "PodDisruptionBudget",
         "HorizontalPodAutoscaler", "PersistentVolumeClaim", "VolumeAttachment", "Fence",
         "PersistentVolume")
