"""KubeSchedulerConfiguration: profiles, their plugins with weights, pluginConfig args,
`percentageOfNodesToScore`, backoff and `disablePreemption`, read from a YAML file.

The shape is Kubernetes' `kubescheduler.config.k8s.io/v1` (also accepting the older
top-level `disablePreemption` of v1alpha1, which the seed documents), so a real scheduler
config file works unchanged for the parts Skiff implements. Errors name the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

EXTENSION_POINTS = ("multiPoint", "preFilter", "filter", "postFilter", "preScore", "score")


class ConfigError(ValueError):
    """The scheduler config file is wrong; the message names the file and field."""


@dataclass(frozen=True)
class PluginRef:
    name: str
    weight: int = 0


@dataclass(frozen=True)
class PluginSet:
    enabled: tuple[PluginRef, ...] = ()
    disabled: tuple[PluginRef, ...] = ()

    def disables(self, name: str) -> bool:
        return any(p.name in ("*", name) for p in self.disabled)


@dataclass(frozen=True)
class Profile:
    scheduler_name: str = "default-scheduler"
    plugins: Mapping[str, PluginSet] = field(default_factory=dict)
    plugin_config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    percentage_of_nodes_to_score: int | None = None

    def plugin_set(self, point: str) -> PluginSet:
        return self.plugins.get(point, PluginSet())


@dataclass(frozen=True)
class SchedulerConfiguration:
    profiles: tuple[Profile, ...] = (Profile(),)
    percentage_of_nodes_to_score: int | None = None
    pod_initial_backoff_seconds: float | None = None
    pod_max_backoff_seconds: float | None = None
    disable_preemption: bool = False


def _plugin_set(raw: Any, where: str) -> PluginSet:
    if raw is None:
        return PluginSet()
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: must be a mapping with enabled/disabled lists")

    def refs(key: str) -> tuple[PluginRef, ...]:
        out = []
        for i, item in enumerate(raw.get(key) or []):
            if not isinstance(item, Mapping) or not item.get("name"):
                raise ConfigError(f"{where}.{key}[{i}].name: Required value")
            out.append(PluginRef(str(item["name"]), int(item.get("weight") or 0)))
        return tuple(out)

    return PluginSet(refs("enabled"), refs("disabled"))


def _percentage(raw: Any, where: str) -> int | None:
    if raw is None:
        return None
    value = int(raw)
    if not 0 <= value <= 100:
        raise ConfigError(f"{where}: Invalid value: {value}: not in valid range [0-100]")
    return value


def parse_config(doc: Mapping[str, Any], *, default_scheduler_name: str = "default-scheduler",
                 source: str = "config") -> SchedulerConfiguration:
    kind = doc.get("kind", "KubeSchedulerConfiguration")
    if kind != "KubeSchedulerConfiguration":
        raise ConfigError(f"{source}: kind: Invalid value: {kind!r}: expected "
                          "KubeSchedulerConfiguration")
    profiles = []
    for i, raw in enumerate(doc.get("profiles") or [{}]):
        where = f"{source}: profiles[{i}]"
        plugins_raw = raw.get("plugins") or {}
        unknown = set(plugins_raw) - set(EXTENSION_POINTS)
        for point in sorted(unknown):
            if point not in ("queueSort", "reserve", "permit", "preBind", "bind", "postBind",
                             "preEnqueue"):
                raise ConfigError(f"{where}.plugins.{point}: Unsupported value")
        plugins = {p: _plugin_set(plugins_raw.get(p), f"{where}.plugins.{p}")
                   for p in EXTENSION_POINTS}
        plugin_config = {}
        for j, pc in enumerate(raw.get("pluginConfig") or []):
            if not pc.get("name"):
                raise ConfigError(f"{where}.pluginConfig[{j}].name: Required value")
            plugin_config[str(pc["name"])] = dict(pc.get("args") or {})
        profiles.append(Profile(
            scheduler_name=str(raw.get("schedulerName") or default_scheduler_name),
            plugins=plugins, plugin_config=plugin_config,
            percentage_of_nodes_to_score=_percentage(
                raw.get("percentageOfNodesToScore"), f"{where}.percentageOfNodesToScore")))
    names = [p.scheduler_name for p in profiles]
    if len(set(names)) != len(names):
        raise ConfigError(f"{source}: profiles: Duplicate value: schedulerName must be unique")

    def seconds(key: str) -> float | None:
        return float(doc[key]) if doc.get(key) is not None else None

    return SchedulerConfiguration(
        profiles=tuple(profiles),
        percentage_of_nodes_to_score=_percentage(doc.get("percentageOfNodesToScore"),
                                                 f"{source}: percentageOfNodesToScore"),
        pod_initial_backoff_seconds=seconds("podInitialBackoffSeconds"),
        pod_max_backoff_seconds=seconds("podMaxBackoffSeconds"),
        disable_preemption=bool(doc.get("disablePreemption", False)))


def load_config(path: str, *, default_scheduler_name: str = "default-scheduler"
                ) -> SchedulerConfiguration:
    if not path:
        return SchedulerConfiguration(profiles=(Profile(scheduler_name=default_scheduler_name),))
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as err:
        raise ConfigError(f"--config {path}: cannot read it: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"--config {path}: not valid YAML: {err}") from None
    if not isinstance(doc, Mapping):
        raise ConfigError(f"--config {path}: expected a KubeSchedulerConfiguration mapping")
    return parse_config(doc, default_scheduler_name=default_scheduler_name, source=path)
