"""PodSecurity admission in the apiserver (SPEC AU7), as Kubernetes' PodSecurity plugin.

Pods are checked against their namespace's `enforce` level on create and on updates that
can change what the checks see (a Forbidden error), and against `warn` (HTTP `Warning`
headers: `would violate PodSecurity "baseline:latest": ...`) and `audit`. Workloads with a
pod template (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob,
ReplicationController, PodTemplate) get only `warn` and `audit`: their pods are enforced
when they are created. Namespaces: invalid `pod-security.kubernetes.io/*` labels are a 422,
and tightening `enforce` warns about the existing pods that would violate it.

The namespace is read from the registry's watch-fed lookup (as Kubernetes' plugin reads its
informer). Skiff has no audit log: an `audit` violation is written to the apiserver's log as
a structured line with Kubernetes' audit annotation text. The policy logic is pure and lives
in `skiff.api.podsecurity`; the cluster default and exemptions come from a
PodSecurityConfiguration in `--admission-control-config-file`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from skiff.api import ApiError, KindInfo, lookup
from skiff.api.kinds import storage_prefix
from skiff.api.podsecurity import (
    PRIVILEGED,
    ConfigError,
    Evaluation,
    LevelVersion,
    PodSecurityConfig,
    Policy,
    compare_levels,
    config_from_object,
    evaluate,
    pod_template,
    policy_from_labels,
    significant_pod_update,
)
from skiff.api.types import Obj
from skiff.apiserver.admission.interface import Attributes, Plugin
from skiff.apiserver.auth.context import current_user
from skiff.apiserver.storage.interface import Storage
from skiff.apiserver.storage.lookups import Lookup

log = logging.getLogger(__name__)


PLUGIN = "PodSecurity"
# Kubernetes' limits on checking existing pods when a namespace's enforce level changes
NAMESPACE_MAX_PODS_TO_CHECK = 3000
NAMESPACE_POD_CHECK_TIMEOUT = 1.0
# Pod subresources whose writes cannot change what the checks see.
_IGNORED_POD_SUBRESOURCES = frozenset(("exec", "attach", "binding", "eviction", "log",
                                       "portforward", "proxy", "status"))
ADMISSION_API_VERSIONS = ("apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1alpha1",
                          "apiserver.k8s.io/v1alpha1")


class PodSecurityAdmission:
    """Checks one write; `admit` returns the warnings for the response or raises the
    Forbidden/Invalid error."""

    def __init__(self, *, config: PodSecurityConfig, namespaces: Lookup,
                 storage: Storage,
                 max_pods_to_check: int = NAMESPACE_MAX_PODS_TO_CHECK,
                 pod_check_timeout: float = NAMESPACE_POD_CHECK_TIMEOUT) -> None:
        self.config = config
        self._namespaces = namespaces
        self._storage = storage
        self._max_pods = max_pods_to_check
        self._pod_timeout = pod_check_timeout

    async def admit(self, info: KindInfo, obj: Obj, old: Obj | None = None, *,
                    subresource: str = "") -> list[str]:
        if info.kind == "Namespace":
            return await self._admit_namespace(obj, old, subresource)
        if info.kind == "Pod":
            if subresource in _IGNORED_POD_SUBRESOURCES:
                return []
            if old is not None and not significant_pod_update(obj, old):
                return []
            meta = obj.get("metadata") or {}
            return await self._admit_pod_spec(meta.get("namespace") or "", obj, meta,
                                              obj.get("spec"), enforce=True)
        template = pod_template(info.kind, obj)
        if template is None or subresource:
            return []
        namespace = (obj.get("metadata") or {}).get("namespace") or ""
        return await self._admit_pod_spec(namespace, obj, *template, enforce=False)

    # -- pods and templates --------------------------------------------------------------

    def _exempt(self, namespace: str) -> bool:
        exemptions = self.config.exemptions
        user = current_user.get()
        return (bool(namespace) and namespace in exemptions.namespaces) or (
            user is not None and bool(user.name) and user.name in exemptions.usernames)

    async def _policy(self, namespace: str) -> tuple[Policy, bool]:
        """The namespace's policy and whether its labels parsed."""
        ns = await self._namespaces.get(namespace)
        labels = ((ns or {}).get("metadata") or {}).get("labels")
        policy, errors = policy_from_labels(labels, self.config.defaults)
        return policy, not errors

    async def _admit_pod_spec(self, namespace: str, obj: Obj, meta: Any, spec: Any, *,
                              enforce: bool) -> list[str]:
        if self._exempt(namespace):
            return []
        policy, valid = await self._policy(namespace)
        modes = ((policy.enforce, policy.warn, policy.audit) if enforce
                 else (policy.warn, policy.audit))
        if valid and all(lv.level == PRIVILEGED for lv in modes):
            return []
        runtime_class = (spec or {}).get("runtimeClassName") if isinstance(spec, dict) else None
        if runtime_class and runtime_class in self.config.exemptions.runtime_classes:
            return []
        results: dict[LevelVersion, Evaluation] = {}

        def result(lv: LevelVersion) -> Evaluation:
            if lv not in results:
                results[lv] = evaluate(lv, meta, spec)
            return results[lv]

        meta_of = obj.get("metadata") or {}
        if enforce:
            enforced = result(policy.enforce)
            if not enforced.allowed:
                self._audit(policy, result, namespace, obj)
                raise ApiError.forbidden(
                    "pods", str(meta_of.get("name", "")),
                    f'violates PodSecurity "{policy.enforce}": {enforced.detail()}')
        self._audit(policy, result, namespace, obj)
        warned = result(policy.warn)
        if warned.allowed:
            return []
        return [f'would violate PodSecurity "{policy.warn}": {warned.detail()}']

    @staticmethod
    def _audit(policy: Policy, result: Callable[[LevelVersion], Evaluation], namespace: str,
               obj: Obj) -> None:
        audited: Evaluation = result(policy.audit)
        if not audited.allowed:
            log.info("pod security audit", extra={
                "annotation": "pod-security.kubernetes.io/audit-violations",
                "value": f'would violate PodSecurity "{policy.audit}": {audited.detail()}',
                "object_kind": obj.get("kind", ""), "object_namespace": namespace,
                "object_name": (obj.get("metadata") or {}).get("name", "")})

    # -- namespaces ----------------------------------------------------------------------

    async def _admit_namespace(self, ns: Obj, old: Obj | None, subresource: str) -> list[str]:
        if subresource:
            return []
        name = str((ns.get("metadata") or {}).get("name", ""))
        policy, errors = policy_from_labels((ns.get("metadata") or {}).get("labels"),
                                            self.config.defaults)
        if old is None:
            if errors:
                raise ApiError.invalid("Namespace", name, errors)
            return []
        old_policy, old_errors = policy_from_labels(
            (old.get("metadata") or {}).get("labels"), self.config.defaults)
        if errors and (not old_errors or [str(e) for e in errors] != [str(e)
                                                                       for e in old_errors]):
            raise ApiError.invalid("Namespace", name, errors)
        new, before = policy.enforce, old_policy.enforce
        if new == before or new.level == PRIVILEGED:
            return []
        if new.minor == before.minor and compare_levels(new.level, before.level) < 1:
            return []
        if name in self.config.exemptions.namespaces:
            return []
        return await self._check_existing_pods(name, new)

    async def _check_existing_pods(self, namespace: str, enforce: LevelVersion) -> list[str]:
        """Kubernetes' EvaluatePodsInNamespace: warnings naming the existing pods that the
        new enforce level would refuse, grouped by reason."""
        deadline = time.monotonic() + self._pod_timeout
        try:
            async with asyncio.timeout(self._pod_timeout):
                kvs, _ = await self._storage.list(storage_prefix(lookup("pods"), namespace))
        except (TimeoutError, ApiError):
            return ["failed to list pods while checking new PodSecurity enforce level"]
        pods = [kv.obj for kv in kvs if kv.obj is not None]
        total, checked = len(pods), min(len(pods), self._max_pods)
        first: dict[str, str] = {}
        counts: dict[str, int] = {}
        for i, pod in enumerate(pods[:checked]):
            spec = pod.get("spec") or {}
            runtime_class = spec.get("runtimeClassName")
            if not (runtime_class and runtime_class in self.config.exemptions.runtime_classes):
                found = evaluate(enforce, pod.get("metadata"), spec)
                if not found.allowed:
                    reason = found.reason()
                    pod_name = str(pod["metadata"].get("name", ""))
                    if reason not in first or pod_name < first[reason]:
                        first[reason] = pod_name
                    counts[reason] = counts.get(reason, 0) + 1
            if time.monotonic() > deadline:
                checked = i + 1
                break
        warnings = []
        if checked < total:
            warnings.append("new PodSecurity enforce level only checked against the first "
                            f"{checked} of {total} existing pods")
        if first:
            warnings.append(f'existing pods in namespace "{namespace}" violate the new '
                            f'PodSecurity enforce level "{enforce}"')
        decorated = []
        for reason, pod_name in first.items():
            others = counts[reason] - 1
            if others == 0:
                decorated.append(f"{pod_name}: {reason}")
            elif others == 1:
                decorated.append(f"{pod_name} (and 1 other pod): {reason}")
            else:
                decorated.append(f"{pod_name} (and {others} other pods): {reason}")
        return warnings + sorted(decorated)


def load_admission_config(path: Path) -> PodSecurityConfig:
    """The PodSecurity plugin's configuration from an AdmissionConfiguration file
    (`--admission-control-config-file`): inline `configuration` or a `path` relative to the
    file; Kubernetes' defaults (privileged:latest, no exemptions) without an entry."""
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(doc, dict) or doc.get("kind") != "AdmissionConfiguration" or (
            doc.get("apiVersion") not in ADMISSION_API_VERSIONS):
        raise ConfigError(f"{path}: must be an AdmissionConfiguration (apiVersion "
                          f"{ADMISSION_API_VERSIONS[0]})")
    plugins = doc.get("plugins") or []
    if not isinstance(plugins, list):
        raise ConfigError(f"{path}: plugins: must be a list")
    for plugin in plugins:
        if not isinstance(plugin, dict) or plugin.get("name") != PLUGIN:
            continue
        configuration = plugin.get("configuration")
        if configuration is None and plugin.get("path"):
            where = path.parent / str(plugin["path"])
            try:
                configuration = yaml.safe_load(where.read_text())
            except OSError as err:
                raise ConfigError(f"{where}: cannot read: {err.strerror}") from None
            except yaml.YAMLError as err:
                raise ConfigError(f"{where}: not valid YAML: "
                                  f"{str(err).splitlines()[0]}") from None
        try:
            return config_from_object(configuration)
        except ConfigError as err:
            raise ConfigError(f"{path}: plugin {PLUGIN}: {err}") from None
    return PodSecurityConfig()


class PodSecurity(Plugin):
    """The PodSecurity plugin in the chain: its warnings, or its Forbidden/Invalid."""

    name = "PodSecurity"

    def __init__(self, check: PodSecurityAdmission) -> None:
        self.check = check

    async def validate(self, attrs: Attributes) -> list[str]:
        return await self.check.admit(attrs.info, attrs.obj, attrs.old,
                                      subresource=attrs.subresource)
