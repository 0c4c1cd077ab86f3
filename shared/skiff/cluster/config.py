"""`skiff up --config FILE`: one YAML file with a section per component.

Sections `apiserver`, `scheduler`, `controllerManager`, `kubelet`, and `controlPlane` (the
node agent of kube-system's mirror pods, cluster/controlplane); keys are Kubernetes'
component-config / flag names in camelCase (`nodeMonitorGracePeriod: 4s`). A scalar becomes
the flag (`--node-monitor-grace-period 4s`); nested values (a scheduler's `profiles`) are
written to `<data-dir>/config/<component>.yaml` and passed as `--config`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from skiff.settings import camel_to_field, flag_name

SECTIONS = ("apiserver", "scheduler", "controllerManager", "kubelet", "controlPlane")


class ConfigError(ValueError):
    """The config file is unusable; the message names the file and the key."""


def yaml_problem(err: yaml.YAMLError) -> str:
    """One line: what is wrong and where (`line 2, column 1: expected ...`)."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{problem}"


def to_flag(key: str) -> str:
    """`nodeMonitorGracePeriod` → `--node-monitor-grace-period` (acronyms kept whole)."""
    return flag_name(camel_to_field(key))


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


@dataclass
class ClusterConfig:
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> ClusterConfig:
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except OSError as err:
            raise ConfigError(f"{path}: cannot read: {err.strerror}") from None
        except yaml.YAMLError as err:
            raise ConfigError(f"{path}: not valid YAML: {yaml_problem(err)}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: must be a map with sections {', '.join(SECTIONS)}")
        unknown = sorted(set(raw) - set(SECTIONS))
        if unknown:
            raise ConfigError(f"{path}: unknown section(s) {', '.join(unknown)}; use "
                              f"{', '.join(SECTIONS)}")
        for name, body in raw.items():
            if body is not None and not isinstance(body, dict):
                raise ConfigError(f"{path}: section {name} must be a map of settings")
        return cls({k: dict(v or {}) for k, v in raw.items()})

    def flags(self, section: str, config_dir: Path) -> list[str]:
        body = self.sections.get(section, {})
        flags: list[str] = []
        nested: dict[str, Any] = {}
        for key, value in body.items():
            # Lists of maps and maps of maps are structure (scheduler profiles), not flags.
            if isinstance(value, list) and any(isinstance(v, dict) for v in value) or (
                    isinstance(value, dict) and any(isinstance(v, (dict, list))
                                                    for v in value.values())):
                nested[key] = value
            else:
                flags += [to_flag(key), _scalar(value)]
        if nested:
            config_dir.mkdir(parents=True, exist_ok=True)
            path = config_dir / f"{section}.yaml"
            path.write_text(yaml.safe_dump(nested, sort_keys=False))
            flags += ["--config", str(path)]
        return flags
