"""Plugin registry and profile assembly: names → factories, and a `Framework` built from
a KubeSchedulerConfiguration profile (defaults, then multiPoint, then per-point
enable/disable, score weights, pluginConfig args)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from skiff.scheduler.config import ConfigError, Profile
from skiff.scheduler.framework.interface import (
    ClusterEvent,
    EnqueueExtensions,
    FilterPlugin,
    PostFilterPlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueingHintPlugin,
    ScorePlugin,
)
from skiff.scheduler.framework.runtime import Framework


@dataclass
class Handle:
    """What plugins may use besides the pod: the cache and listers, the nominator, the
    API actions of preemption, a random source and the clock (Kubernetes' Handle)."""

    cache: Any
    nominator: Any
    owners: Any = None
    namespaces: Any = None
    claims: Any = None  # PersistentVolumeClaims: get_claim(namespace, name)
    pdbs: Any = None
    actions: Any = None
    rng: Any = None
    now: Callable[[], float] = field(default=lambda: 0.0)


PluginFactory = Callable[[Mapping[str, Any], Handle, Framework], object]

# Kubernetes' (1.32) default plugins in their default order, with default score weights.
DEFAULT_PLUGINS: tuple[tuple[str, int], ...] = (
    ("NodeUnschedulable", 0),
    ("NodeName", 0),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", 0),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 0),
    ("VolumeBinding", 0),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
)

_POINTS: dict[str, type] = {
    "preFilter": PreFilterPlugin, "filter": FilterPlugin, "postFilter": PostFilterPlugin,
    "preScore": PreScorePlugin, "score": ScorePlugin,
}


def build_framework(profile: Profile, *, registry: Mapping[str, PluginFactory],
                    handle: Handle, disable_preemption: bool = False) -> Framework:
    fwk = Framework(scheduler_name=profile.scheduler_name,
                    percentage_of_nodes_to_score=profile.percentage_of_nodes_to_score,
                    nominator=handle.nominator)
    multi = profile.plugin_set("multiPoint")
    names = [] if multi.disables("*") else [n for n, _ in DEFAULT_PLUGINS
                                           if not multi.disables(n)]
    weights = dict(DEFAULT_PLUGINS)
    for ref in multi.enabled:
        if ref.name not in names:
            names.append(ref.name)
        if ref.weight:
            weights[ref.name] = ref.weight
    score_set = profile.plugin_set("score")
    for ref in score_set.enabled:
        if ref.weight:
            weights[ref.name] = ref.weight
    instances: dict[str, object] = {}

    def instance(name: str) -> object:
        if name not in instances:
            factory = registry.get(name)
            if factory is None:
                raise ConfigError(f"profile {profile.scheduler_name!r}: plugin {name!r} is "
                                  f"not registered (known: {', '.join(sorted(registry))})")
            instances[name] = factory(profile.plugin_config.get(name, {}), handle, fwk)
        return instances[name]

    chosen: dict[str, list[object]] = {}
    for point, proto in _POINTS.items():
        plugin_set = profile.plugin_set(point)
        order = [] if plugin_set.disables("*") else [n for n in names
                                                     if not plugin_set.disables(n)]
        for ref in plugin_set.enabled:
            if ref.name not in order:
                order.append(ref.name)
        if point == "postFilter" and disable_preemption:
            order = [n for n in order if n != "DefaultPreemption"]
        explicit = {r.name for r in plugin_set.enabled}
        selected = []
        for name in order:
            plugin = instance(name)
            if isinstance(plugin, proto):
                selected.append(plugin)
            elif name in explicit:
                raise ConfigError(f"profile {profile.scheduler_name!r}: plugin {name!r} "
                                  f"does not implement the {point} extension point")
        chosen[point] = selected
    fwk.pre_filter_plugins = chosen["preFilter"]  # type: ignore[assignment]
    fwk.filter_plugins = chosen["filter"]  # type: ignore[assignment]
    fwk.post_filter_plugins = chosen["postFilter"]  # type: ignore[assignment]
    fwk.pre_score_plugins = chosen["preScore"]  # type: ignore[assignment]
    fwk.score_plugins = [(p, max(weights.get(p.name, 1), 1))
                         for p in chosen["score"] if isinstance(p, ScorePlugin)]
    for name, plugin in instances.items():
        if isinstance(plugin, EnqueueExtensions):
            fwk.events[name] = plugin.events_to_register()
        else:
            fwk.events[name] = frozenset(ClusterEvent)
        if isinstance(plugin, QueueingHintPlugin):
            fwk.pod_hints[name] = plugin
    return fwk
