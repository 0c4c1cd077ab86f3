"""Component settings: one frozen dataclass per service, set by flag, env var or config file.

Kubernetes' own names, so a user who knows `--node-monitor-grace-period` or the
component-config key `nodeMonitorGracePeriod` finds it: a field `node_monitor_grace_period`
is the flag `--node-monitor-grace-period`, the env var `SKIFF_<COMPONENT>_NODE_MONITOR_GRACE_PERIOD`
and the `skiff up --config` key `nodeMonitorGracePeriod`. Durations take Kubernetes' forms
("40s", "500ms", "1m30s") or plain seconds. Bad values fail with the flag's name.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import typing
from typing import Any, TypeVar

T = TypeVar("T")

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class SettingsError(ValueError):
    """A setting has a value that cannot be used; the message names the setting."""


def duration(default: float, *, help: str = "") -> Any:
    """A dataclass field holding seconds that also accepts "40s", "500ms", "1m"."""
    return dataclasses.field(default=default, metadata={"duration": True, "help": help})


def setting(default: Any, *, help: str = "") -> Any:
    return dataclasses.field(default=default, metadata={"help": help})


def parse_duration(text: str | float | int) -> float:
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    value = str(text).strip()
    try:
        return float(value)
    except ValueError:
        pass
    pos, total = 0, 0.0
    for match in _DURATION.finditer(value):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(value) or not value:
        raise ValueError(f"{text!r} is not a duration (use e.g. 40s, 500ms, 1m30s)")
    return total


def parse_bool(text: str | bool) -> bool:
    if isinstance(text, bool):
        return text
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{text!r} is not a boolean (use true or false)")


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


_WORD_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def camel_to_field(key: str) -> str:
    """`nodeMonitorGracePeriod` → `node_monitor_grace_period`; acronyms stay one word
    (`terminatedPodGCThreshold` → `terminated_pod_gc_threshold`)."""
    return _WORD_BOUNDARY.sub("_", key).lower()


def _converter(field: dataclasses.Field[Any], kind: Any) -> Any:
    if field.metadata.get("duration"):
        return parse_duration
    if kind is bool:
        return parse_bool
    if kind in (int, float, str):
        return kind
    origin = typing.get_origin(kind)
    if origin is tuple:
        return lambda text: tuple(p for p in str(text).split(",") if p)
    raise TypeError(f"unsupported setting type {kind!r} for {field.name}")


def load_settings(cls: type[T], argv: list[str] | None, *, prog: str, env_prefix: str,
                  description: str = "") -> T:
    """Parse flags (then env vars, then the dataclass defaults) into `cls`."""
    hints = typing.get_type_hints(cls)
    parser = argparse.ArgumentParser(prog=prog, description=description)
    converters: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        convert = _converter(f, hints[f.name])
        converters[f.name] = convert
        env = f"{env_prefix}{f.name.upper()}"
        helptext = f.metadata.get("help", "")
        default = f.default if f.default is not dataclasses.MISSING else None
        text = f"{helptext} (env {env}; default {default!r})".strip()
        parser.add_argument(flag_name(f.name), dest=f.name, default=None,
                            metavar=f.name.upper(),
                            help=text.replace("%", "%%"))  # argparse %-formats help
    ns = parser.parse_args(argv)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        raw = getattr(ns, f.name)
        source = flag_name(f.name)
        if raw is None:
            raw = os.environ.get(f"{env_prefix}{f.name.upper()}")
            source = f"{env_prefix}{f.name.upper()}"
        if raw is None:
            continue
        try:
            values[f.name] = converters[f.name](raw)
        except ValueError as err:
            parser.error(f"{source}: {err}")
    return cls(**values)
