"""Pod Security Standards (SPEC AU7): levels, versions, namespace labels, the cluster's
PodSecurityConfiguration and the evaluation Kubernetes' PodSecurity admission runs.

A namespace names a level (`privileged`, `baseline`, `restricted`) and a policy version
(`latest` or `v1.x`) per mode (`enforce`, `audit`, `warn`) in its
`pod-security.kubernetes.io/<mode>[-version]` labels; unset modes take the cluster default
(a PodSecurityConfiguration, `privileged:latest` unless configured). Evaluating a pod (or a
workload's pod template) at a level runs that level's checks (`skiff.api.podsecuritychecks`,
baseline ones first, then the restricted ones; checks the stricter level replaces run only
at baseline) and joins the failures into Kubernetes' wording:
`allowPrivilegeEscalation != false (container "c" must set ...), ...`. Pure logic: no I/O
(the apiserver's PodSecurity admission plugin reads namespaces and calls this).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from skiff.api.errors import FieldError, invalid
from skiff.api.podsecuritychecks import (
    BASELINE,
    CHECKS,
    PRIVILEGED,
    RESTRICTED,
    container_name,
    maps_of,
)
from skiff.api.types import Obj
from skiff.api.wellknown import (
    POD_SECURITY_LABEL_PREFIX,
    SECCOMP_CONTAINER_ANNOTATION_PREFIX,
    SECCOMP_POD_ANNOTATION,
)

__all__ = ["BASELINE", "CHECKS", "LATEST", "LEVELS", "MODES", "PRIVILEGED", "RESTRICTED",
           "ConfigError", "Evaluation", "Exemptions", "LevelVersion", "PodSecurityConfig",
           "Policy", "compare_levels", "config_from_object", "evaluate", "level_label",
           "parse_level", "parse_version", "pod_template", "policy_from_labels",
           "significant_pod_update", "version_label"]

LEVELS = (PRIVILEGED, BASELINE, RESTRICTED)
MODES = ("enforce", "audit", "warn")
LABEL_PREFIX = POD_SECURITY_LABEL_PREFIX
LATEST = "latest"
# The newest policy version a check was introduced in; newer versions evaluate as it.
NEWEST_CHECK_MINOR = 34

_VERSION = re.compile(r"^v1\.(0|[1-9][0-9]*)$")


def level_label(mode: str) -> str:
    return f"{LABEL_PREFIX}{mode}"


def version_label(mode: str) -> str:
    return f"{LABEL_PREFIX}{mode}-version"


@dataclass(frozen=True)
class LevelVersion:
    """A level at a policy version; `minor` None is `latest`."""

    level: str = PRIVILEGED
    minor: int | None = None

    def __str__(self) -> str:
        return f"{self.level}:{LATEST if self.minor is None else f'v1.{self.minor}'}"

    def effective_minor(self) -> int:
        return NEWEST_CHECK_MINOR if self.minor is None else min(self.minor,
                                                                 NEWEST_CHECK_MINOR)


@dataclass(frozen=True)
class Policy:
    enforce: LevelVersion = LevelVersion()
    audit: LevelVersion = LevelVersion()
    warn: LevelVersion = LevelVersion()

    def mode(self, name: str) -> LevelVersion:
        return {"enforce": self.enforce, "audit": self.audit, "warn": self.warn}[name]


@dataclass(frozen=True)
class Exemptions:
    usernames: tuple[str, ...] = ()
    runtime_classes: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()


@dataclass(frozen=True)
class PodSecurityConfig:
    """Kubernetes' PodSecurityConfiguration: the defaults for unlabelled modes and who or
    what is never checked."""

    defaults: Policy = Policy()
    exemptions: Exemptions = Exemptions()


def parse_level(value: str) -> tuple[str, str]:
    """(level, problem): an invalid level evaluates as restricted (ParseLevel)."""
    if value in LEVELS:
        return value, ""
    return RESTRICTED, "must be one of " + ", ".join(LEVELS)


def parse_version(value: str) -> tuple[int | None, str]:
    """(minor or None for latest, problem): an invalid version evaluates as latest."""
    if value == LATEST:
        return None, ""
    match = _VERSION.match(value)
    if match is None:
        return None, 'must be "latest" or "v1.x"'
    return int(match.group(1)), ""


def policy_from_labels(labels: Mapping[str, str] | None, defaults: Policy
                       ) -> tuple[Policy, list[FieldError]]:
    """The namespace's policy (defaults for unset labels) and the invalid labels. An invalid
    enforce level enforces restricted; an invalid audit or warn level fails open."""
    labels = labels or {}
    errors: list[FieldError] = []
    modes: dict[str, LevelVersion] = {}
    for mode in MODES:
        current = defaults.mode(mode)
        level, minor = current.level, current.minor
        if (raw := labels.get(level_label(mode))) is not None:
            level, problem = parse_level(raw)
            if problem:
                errors.append(invalid(f"metadata.labels[{level_label(mode)}]", raw, problem))
                if mode != "enforce":
                    level = PRIVILEGED
        if (raw := labels.get(version_label(mode))) is not None:
            minor, problem = parse_version(raw)
            if problem:
                errors.append(invalid(f"metadata.labels[{version_label(mode)}]", raw,
                                      problem))
        modes[mode] = LevelVersion(level, minor)
    return Policy(**modes), errors


def compare_levels(a: str, b: str) -> int:
    """-1, 0 or 1 as `a` is less, as or more strict than `b`."""
    rank = {PRIVILEGED: 0, BASELINE: 1, RESTRICTED: 2}
    return (rank.get(a, 0) > rank.get(b, 0)) - (rank.get(a, 0) < rank.get(b, 0))



@dataclass
class Evaluation:
    """The failed checks of one pod at one level: (reason, detail) in Kubernetes' order."""

    failures: list[tuple[str, str]] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.failures

    def reason(self) -> str:
        """`host namespaces, privileged` (the namespace-label warnings)."""
        return ", ".join(r for r, _ in self.failures)

    def detail(self) -> str:
        """`host namespaces (hostNetwork=true), privileged (container "c" must ...)`."""
        return ", ".join(f"{r} ({d})" if d else r for r, d in self.failures)


def evaluate(lv: LevelVersion, meta: Obj | None, spec: Obj | None) -> Evaluation:
    """Run `lv`'s checks on a pod's (or pod template's) metadata and spec."""
    if lv.level == PRIVILEGED:
        return Evaluation()
    minor = lv.effective_minor()
    meta = meta if isinstance(meta, dict) else {}
    if not isinstance(meta.get("annotations") or {}, dict):
        meta = {**meta, "annotations": {}}
    spec = spec if isinstance(spec, dict) else {}
    ordered = ([c for c in CHECKS if c.level == BASELINE and not c.overlap]
               + ([c for c in CHECKS if c.level == BASELINE and c.overlap]
                  if lv.level == BASELINE else
                  [c for c in CHECKS if c.level == RESTRICTED]))
    failures = []
    for check in ordered:
        if minor < check.since:
            continue
        result = check.fn(meta, spec, minor)
        if result is not None:
            failures.append((result[0] or "unknown forbidden reason", result[1]))
    return Evaluation(failures)


# -- what is checked -----------------------------------------------------------------------

# Kubernetes' kinds with a pod template (DefaultPodSpecExtractor), and where it is.
TEMPLATE_KINDS: dict[str, tuple[str, ...]] = {
    "PodTemplate": ("template",),
    "ReplicationController": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "Deployment": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}


def pod_template(kind: str, obj: Obj) -> tuple[Obj, Obj] | None:
    """(metadata, spec) of a workload's pod template; None when it has none."""
    path = TEMPLATE_KINDS.get(kind)
    if path is None:
        return None
    node: Any = obj
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        return None
    meta, spec = node.get("metadata"), node.get("spec")
    return (meta if isinstance(meta, dict) else {}, spec if isinstance(spec, dict) else {})


def _annotations(meta: Any) -> dict[str, Any]:
    found = meta.get("annotations") if isinstance(meta, dict) else None
    return found if isinstance(found, dict) else {}


def significant_pod_update(new: Obj, old: Obj) -> bool:
    """Whether a pod update can change what the checks see (isSignificantPodUpdate): the
    seccomp annotations, a container's image, or an ephemeral container added or changed.
    Everything else in a pod's spec is immutable."""
    new_ann = _annotations(new.get("metadata"))
    old_ann = _annotations(old.get("metadata"))
    if new_ann.get(SECCOMP_POD_ANNOTATION) != old_ann.get(SECCOMP_POD_ANNOTATION):
        return True
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}

    def changed(c: Obj, o: Obj) -> bool:
        key = SECCOMP_CONTAINER_ANNOTATION_PREFIX + container_name(c)
        return c.get("image") != o.get("image") or new_ann.get(key) != old_ann.get(key)

    for key in ("containers", "initContainers"):
        mine, theirs = maps_of(new_spec.get(key)), maps_of(old_spec.get(key))
        if len(mine) != len(theirs) or any(changed(c, o) for c, o in zip(mine, theirs,
                                                                         strict=True)):
            return True
    old_ephemeral = {container_name(c): c for c in maps_of(old_spec.get("ephemeralContainers"))}
    return any(container_name(c) not in old_ephemeral
               or changed(c, old_ephemeral[container_name(c)])
               for c in maps_of(new_spec.get("ephemeralContainers")))


# -- PodSecurityConfiguration -------------------------------------------------------------

CONFIG_API_VERSIONS = tuple(f"pod-security.admission.config.k8s.io/{v}"
                            for v in ("v1", "v1beta1", "v1alpha1"))


class ConfigError(ValueError):
    """A PodSecurityConfiguration that cannot be used; the message names the field."""


def config_from_object(obj: Any) -> PodSecurityConfig:
    """A PodSecurityConfiguration object (the PodSecurity plugin's `configuration` in an
    AdmissionConfiguration), defaulted (privileged:latest) and validated as Kubernetes
    does."""
    if not isinstance(obj, dict):
        raise ConfigError("PodSecurityConfiguration: must be a map")
    api_version = obj.get("apiVersion")
    if api_version not in CONFIG_API_VERSIONS or obj.get("kind") != "PodSecurityConfiguration":
        raise ConfigError(f"PodSecurityConfiguration: apiVersion {api_version!r} kind "
                          f"{obj.get('kind')!r} is not served; use apiVersion "
                          f"{CONFIG_API_VERSIONS[0]!r} kind 'PodSecurityConfiguration'")
    defaults = obj.get("defaults") or {}
    exemptions = obj.get("exemptions") or {}
    if not isinstance(defaults, dict) or not isinstance(exemptions, dict):
        raise ConfigError("PodSecurityConfiguration: defaults and exemptions must be maps")
    modes: dict[str, LevelVersion] = {}
    problems: list[str] = []
    for mode in MODES:
        level = str(defaults.get(mode) or PRIVILEGED)
        version = str(defaults.get(f"{mode}-version") or LATEST)
        _, level_problem = parse_level(level)
        minor, version_problem = parse_version(version)
        if level_problem:
            problems.append(f'defaults.{mode}: Invalid value: "{level}": {level_problem}')
        if version_problem:
            problems.append(f'defaults.{mode}-version: Invalid value: "{version}": '
                            f"{version_problem}")
        modes[mode] = LevelVersion(level, minor)
    lists: dict[str, tuple[str, ...]] = {}
    for key in ("usernames", "runtimeClasses", "namespaces"):
        values = exemptions.get(key) or []
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            problems.append(f"exemptions.{key}: must be a list of strings")
            values = []
        for i, value in enumerate(values):
            if not value:
                problems.append(f"exemptions.{key}[{i}]: Invalid value: \"\": must be non-empty")
            elif values.index(value) != i:
                problems.append(f'exemptions.{key}[{i}]: Duplicate value: "{value}"')
        lists[key] = tuple(values)
    if problems:
        raise ConfigError("PodSecurityConfiguration: " + "; ".join(problems))
    return PodSecurityConfig(Policy(**modes), Exemptions(
        usernames=lists["usernames"], runtime_classes=lists["runtimeClasses"],
        namespaces=lists["namespaces"]))
