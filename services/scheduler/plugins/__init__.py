"""Skiff's in-tree plugins and the registry that builds them from pluginConfig args."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skiff.scheduler.framework.registry import Handle, PluginFactory
from skiff.scheduler.framework.runtime import Framework
from skiff.scheduler.plugins.defaultpreemption import DefaultPreemption
from skiff.scheduler.plugins.imagelocality import ImageLocality
from skiff.scheduler.plugins.interpodaffinity import InterPodAffinity, InterPodAffinityArgs
from skiff.scheduler.plugins.nodeaffinity import NodeAffinity
from skiff.scheduler.plugins.nodename import NodeName
from skiff.scheduler.plugins.nodeports import NodePorts
from skiff.scheduler.plugins.noderesources import (
    NodeResourcesBalancedAllocation,
    NodeResourcesFit,
    NodeResourcesFitArgs,
)
from skiff.scheduler.plugins.nodeunschedulable import NodeUnschedulable
from skiff.scheduler.plugins.podtopologyspread import PodTopologySpread, PodTopologySpreadArgs
from skiff.scheduler.plugins.tainttoleration import TaintToleration
from skiff.scheduler.plugins.volumebinding import VolumeBinding
from skiff.scheduler.plugins.volumerestrictions import VolumeRestrictions
from skiff.scheduler.preemption import Evaluator, PreemptionArgs


def _preemption(args: Mapping[str, Any], handle: Handle, fwk: Framework) -> DefaultPreemption:
    evaluator = Evaluator(fwk=fwk, cache=handle.cache, pdbs=handle.pdbs,
                          actions=handle.actions, nominator=handle.nominator,
                          args=PreemptionArgs.from_dict(args), now=handle.now)
    if handle.rng is not None:
        evaluator.rng = handle.rng
    return DefaultPreemption(evaluator=evaluator)


def in_tree_registry() -> dict[str, PluginFactory]:
    return {
        "NodeUnschedulable": lambda args, handle, fwk: NodeUnschedulable(),
        "NodeName": lambda args, handle, fwk: NodeName(),
        "TaintToleration": lambda args, handle, fwk: TaintToleration(),
        "NodeAffinity": lambda args, handle, fwk: NodeAffinity(),
        "NodeResourcesFit": lambda args, handle, fwk: NodeResourcesFit(
            args=NodeResourcesFitArgs.from_dict(args)),
        "PodTopologySpread": lambda args, handle, fwk: PodTopologySpread(
            cache=handle.cache, args=PodTopologySpreadArgs.from_dict(args),
            owners=handle.owners),
        "InterPodAffinity": lambda args, handle, fwk: InterPodAffinity(
            cache=handle.cache, namespaces=handle.namespaces,
            args=InterPodAffinityArgs.from_dict(args)),
        "NodePorts": lambda args, handle, fwk: NodePorts(),
        "NodeResourcesBalancedAllocation":
            lambda args, handle, fwk: NodeResourcesBalancedAllocation(),
        "ImageLocality": lambda args, handle, fwk: ImageLocality(cache=handle.cache),
        "VolumeRestrictions": lambda args, handle, fwk: VolumeRestrictions(
            cache=handle.cache, claims=handle.claims),
        "VolumeBinding": lambda args, handle, fwk: VolumeBinding(claims=handle.claims),
        "DefaultPreemption": _preemption,
    }


__all__ = ["DefaultPreemption", "ImageLocality", "InterPodAffinity", "NodeAffinity",
           "NodeName", "NodePorts", "NodeResourcesBalancedAllocation", "NodeResourcesFit",
           "NodeUnschedulable", "PodTopologySpread", "TaintToleration", "VolumeBinding",
           "VolumeRestrictions", "in_tree_registry"]
