"""Skiff's controller-manager: independent controllers in one process behind a Lease.

PodGC, node lifecycle (with taint eviction), StatefulSet, ReplicaSet and disruption (PDB
status) controllers, each following the informer → key → workqueue → reconcile recipe of
`controller.py`, run only while this process holds the leader Lease
(`kube-system/skiff-controller-manager`), so several instances can run and one acts.
"""

from skiff.controller_manager.app import ControllerManager
from skiff.controller_manager.settings import ControllerManagerSettings, parse_settings

__all__ = ["ControllerManager", "ControllerManagerSettings", "parse_settings"]
