"""Pod Security Standards (SPEC AU7): the checks Kubernetes' PodSecurity admission runs.

A namespace names a level (`privileged`, `baseline`, `restricted`) and a policy version
(`latest` or `v1.x`) per mode (`enforce`, `audit`, `warn`) in its
`pod-security.kubernetes.io/<mode>[-version]` labels; unset modes take the cluster default
(a PodSecurityConfiguration, `privileged:latest` unless configured). Evaluating a pod (or a
workload's pod template) at a level runs that level's checks, each a small function from
the pod's metadata and spec to a forbidden reason and detail, and joins the failures into
Kubernetes' wording: `allowPrivilegeEscalation != false (container "c" must set ...), ...`.

The checks, their order and their messages follow k8s.io/pod-security-admission/policy
(baseline checks first, then the restricted ones; checks the stricter level replaces are
run only at baseline). Versioned differences are kept where they change the outcome: the
restricted checks that exist only from v1.19 (seccomp), v1.22 (capabilities), v1.23
(runAsUser), the Windows-pod exemptions from v1.25 and the probe/lifecycle host check and
user-namespace relaxation from v1.34. Pure logic: no I/O (the apiserver's
`skiff.apiserver.podsecurity` reads namespaces and calls this).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from skiff.api.errors import FieldError, invalid

Obj = dict[str, Any]

PRIVILEGED, BASELINE, RESTRICTED = "privileged", "baseline", "restricted"
LEVELS = (PRIVILEGED, BASELINE, RESTRICTED)
MODES = ("enforce", "audit", "warn")
LABEL_PREFIX = "pod-security.kubernetes.io/"
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


# -- helpers as Kubernetes words them -------------------------------------------------------


def _join_quote(items: list[str]) -> str:
    return ", ".join(f'"{i}"' for i in items)


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _go_quote(text: str) -> str:
    """Go's %q of a string, as the seccomp and AppArmor annotation details print it."""
    return json.dumps(text, ensure_ascii=False)


def _items(value: Any) -> list[Obj]:
    """The maps of a list field (anything else in it, or a non-list, is nothing)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _containers(spec: Obj) -> Iterator[Obj]:
    """Init containers, containers, then ephemeral containers (visitContainers)."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from _items(spec.get(key))


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _sc(obj: Obj) -> Obj:
    context = obj.get("securityContext")
    return context if isinstance(context, dict) else {}


def _name(container: Obj) -> str:
    return str(container.get("name", ""))


def _windows(spec: Obj) -> bool:
    return ((spec.get("os") or {}).get("name")) == "windows"


def _user_namespaced(spec: Obj) -> bool:
    return spec.get("hostUsers") is False


def _setters(pod_bad: bool, containers: list[str]) -> list[str]:
    setters = ["pod"] if pod_bad else []
    if containers:
        setters.append(f"{_plural('container', 'containers', len(containers))} "
                       f"{_join_quote(containers)}")
    return setters


Result = tuple[str, str] | None  # (forbidden reason, detail) when the check fails
CheckFn = Callable[[Obj, Obj, int], Result]  # (pod metadata, pod spec, policy minor)


# -- baseline -------------------------------------------------------------------------------


_APPARMOR_PREFIX = "container.apparmor.security.beta.kubernetes.io/"


def _check_apparmor(meta: Obj, spec: Obj, _minor: int) -> Result:
    def bad(profile: Any) -> str | None:
        if isinstance(profile, dict) and profile.get("type") not in ("RuntimeDefault",
                                                                     "Localhost"):
            return str(profile.get("type", ""))
        return None

    values: set[str] = set()
    pod_value = bad(_sc(spec).get("appArmorProfile"))
    if pod_value is not None:
        values.add(pod_value)
    containers = []
    for c in _containers(spec):
        value = bad(_sc(c).get("appArmorProfile"))
        if value is not None:
            containers.append(_name(c))
            values.add(value)
    setters = _setters(pod_value is not None, containers)
    annotations = sorted(
        f"{k}={_go_quote(str(v))}" for k, v in (meta.get("annotations") or {}).items()
        if k.startswith(_APPARMOR_PREFIX)
        and not (not v or v == "runtime/default" or str(v).startswith("localhost/")))
    listed = sorted(values) + annotations
    if annotations:
        setters.append(_plural("annotation", "annotations", len(annotations)))
    if not setters:
        return None
    return (_plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(listed)),
            f"{' and '.join(setters)} must not set AppArmor profile type to "
            f"{_join_quote(listed)}")


_DEFAULT_CAPABILITIES = frozenset((
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"))


def _added(container: Obj) -> list[str]:
    caps = _sc(container).get("capabilities")
    return _strings(caps.get("add")) if isinstance(caps, dict) else []


def _check_capabilities_baseline(_meta: Obj, spec: Obj, _minor: int) -> Result:
    bad: list[str] = []
    extra: set[str] = set()
    for c in _containers(spec):
        beyond = [cap for cap in _added(c) if cap not in _DEFAULT_CAPABILITIES]
        if beyond:
            bad.append(_name(c))
            extra.update(beyond)
    if not bad:
        return None
    return ("non-default capabilities",
            f"{_plural('container', 'containers', len(bad))} {_join_quote(bad)} must not "
            f"include {_join_quote(sorted(extra))} in securityContext.capabilities.add")


def _check_host_namespaces(_meta: Obj, spec: Obj, _minor: int) -> Result:
    shared = [f"{key}=true" for key in ("hostNetwork", "hostPID", "hostIPC")
              if spec.get(key) is True]
    return ("host namespaces", ", ".join(shared)) if shared else None


def _check_host_path_volumes(_meta: Obj, spec: Obj, _minor: int) -> Result:
    names = [str(v.get("name", "")) for v in _items(spec.get("volumes"))
             if v.get("hostPath") is not None]
    if not names:
        return None
    return "hostPath volumes", f"{_plural('volume', 'volumes', len(names))} {_join_quote(names)}"


def _check_host_ports(_meta: Obj, spec: Obj, _minor: int) -> Result:
    bad: list[str] = []
    ports: set[str] = set()
    for c in _containers(spec):
        used = [str(p["hostPort"]) for p in _items(c.get("ports")) if p.get("hostPort")]
        if used:
            bad.append(_name(c))
            ports.update(used)
    if not bad:
        return None
    listed = sorted(ports)  # Go sorts them as strings
    return ("hostPort",
            f"{_plural('container', 'containers', len(bad))} {_join_quote(bad)} "
            f"{_plural('uses', 'use', len(bad))} {_plural('hostPort', 'hostPorts', len(ports))} "
            f"{', '.join(listed)}")


def _hosts(handler: Any) -> list[str]:
    if not isinstance(handler, dict):
        return []
    return [str(action["host"]) for key in ("httpGet", "tcpSocket")
            if isinstance(action := handler.get(key), dict) and action.get("host")]


def _check_probe_hosts(_meta: Obj, spec: Obj, _minor: int) -> Result:
    bad: set[str] = set()
    hosts: set[str] = set()
    for c in _containers(spec):
        lifecycle: Obj = c["lifecycle"] if isinstance(c.get("lifecycle"), dict) else {}
        found = [h for handler in (c.get("livenessProbe"), c.get("readinessProbe"),
                                   c.get("startupProbe"), lifecycle.get("postStart"),
                                   lifecycle.get("preStop"))
                 for h in _hosts(handler)]
        if found:
            bad.add(_name(c))
            hosts.update(found)
    if not bad:
        return None
    return ("probe or lifecycle host",
            f"{_plural('container', 'containers', len(bad))} {_join_quote(sorted(bad))} "
            f"{_plural('uses', 'use', len(bad))} "
            f"{_plural('probe or lifecycle host', 'probe or lifecycle hosts', len(hosts))} "
            f"{_join_quote(sorted(hosts))}")


def _check_privileged(_meta: Obj, spec: Obj, _minor: int) -> Result:
    bad = [_name(c) for c in _containers(spec) if _sc(c).get("privileged") is True]
    if not bad:
        return None
    return ("privileged", f"{_plural('container', 'containers', len(bad))} {_join_quote(bad)} "
                          "must not set securityContext.privileged=true")


def _check_proc_mount(_meta: Obj, spec: Obj, minor: int) -> Result:
    if minor >= 34 and _user_namespaced(spec):
        return None
    bad: list[str] = []
    types: set[str] = set()
    for c in _containers(spec):
        mount = _sc(c).get("procMount")
        if mount is not None and mount != "Default":
            bad.append(_name(c))
            types.add(str(mount))
    if not bad:
        return None
    return ("procMount", f"{_plural('container', 'containers', len(bad))} {_join_quote(bad)} "
                         f"must not set securityContext.procMount to {_join_quote(sorted(types))}")


_SELINUX_TYPES = frozenset(("", "container_t", "container_init_t", "container_kvm_t"))


def _check_selinux(_meta: Obj, spec: Obj, _minor: int) -> Result:
    bad_types: set[str] = set()
    user = role = False

    def valid(options: Any) -> bool:
        nonlocal user, role
        if not isinstance(options, dict):
            return True
        ok = True
        if str(options.get("type") or "") not in _SELINUX_TYPES:
            ok = False
            bad_types.add(str(options.get("type")))
        if options.get("user"):
            ok, user = False, True
        if options.get("role"):
            ok, role = False, True
        return ok

    pod_bad = not valid(_sc(spec).get("seLinuxOptions"))
    containers = [_name(c) for c in _containers(spec) if not valid(_sc(c).get("seLinuxOptions"))]
    setters = _setters(pod_bad, containers)
    if not setters:
        return None
    data = []
    if bad_types:  # as Kubernetes: user and role are named only beside a bad type
        data.append(f"{_plural('type', 'types', len(bad_types))} "
                    f"{_join_quote(sorted(bad_types))}")
        if user:
            data.append("user may not be set")
        if role:
            data.append("role may not be set")
    return ("seLinuxOptions", f"{' and '.join(setters)} set forbidden "
                              f"securityContext.seLinuxOptions: {'; '.join(data)}")


_SECCOMP_OK = ("RuntimeDefault", "Localhost")
_SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
_SECCOMP_CONTAINER_ANNOTATION = "container.seccomp.security.alpha.kubernetes.io/"


def _seccomp_type(obj: Obj) -> tuple[bool, str]:
    """(set?, type) of a pod's or container's securityContext.seccompProfile."""
    profile = _sc(obj).get("seccompProfile")
    if not isinstance(profile, dict):
        return False, ""
    return True, str(profile.get("type", ""))


def _check_seccomp_baseline(meta: Obj, spec: Obj, minor: int) -> Result:
    if minor < 19:
        annotations = meta.get("annotations") or {}

        def allowed(value: str) -> bool:
            return value in ("runtime/default", "docker/default") or value.startswith(
                "localhost/")

        keys = [_SECCOMP_POD_ANNOTATION,
                *(_SECCOMP_CONTAINER_ANNOTATION + _name(c) for c in _containers(spec))]
        bad = sorted({f"{k}={_go_quote(str(annotations[k]))}" for k in keys
                      if k in annotations and not allowed(str(annotations[k]))})
        if not bad:
            return None
        return ("seccompProfile", f"forbidden {_plural('annotation', 'annotations', len(bad))} "
                                  f"{', '.join(bad)}")
    values: set[str] = set()
    pod_set, pod_type = _seccomp_type(spec)
    pod_bad = pod_set and pod_type not in _SECCOMP_OK
    if pod_bad:
        values.add(pod_type)
    containers = []
    for c in _containers(spec):
        is_set, kind = _seccomp_type(c)
        if is_set and kind not in _SECCOMP_OK:
            containers.append(_name(c))
            values.add(kind)
    setters = _setters(pod_bad, containers)
    if not setters:
        return None
    return ("seccompProfile", f"{' and '.join(setters)} must not set "
                              f"securityContext.seccompProfile.type to "
                              f"{_join_quote(sorted(values))}")


_SAFE_SYSCTLS = frozenset(("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
                           "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
                           "net.ipv4.ip_unprivileged_port_start"))
# added to the safe set in later policy versions
_SAFE_SYSCTLS_1_27 = frozenset(("net.ipv4.ip_local_reserved_ports",))
_SAFE_SYSCTLS_1_29 = frozenset(("net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                                "net.ipv4.tcp_keepalive_intvl",
                                "net.ipv4.tcp_keepalive_probes"))
_SAFE_SYSCTLS_1_32 = frozenset(("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"))


def _check_sysctls(_meta: Obj, spec: Obj, minor: int) -> Result:
    safe = set(_SAFE_SYSCTLS)
    for since, extra in ((27, _SAFE_SYSCTLS_1_27), (29, _SAFE_SYSCTLS_1_29),
                         (32, _SAFE_SYSCTLS_1_32)):
        if minor >= since:
            safe |= extra
    bad = [str(s.get("name", "")) for s in _items(_sc(spec).get("sysctls"))
           if s.get("name") not in safe]
    return ("forbidden sysctls", ", ".join(bad)) if bad else None


def _host_process(obj: Obj) -> bool:
    options = _sc(obj).get("windowsOptions")
    return isinstance(options, dict) and options.get("hostProcess") is True


def _check_windows_host_process(_meta: Obj, spec: Obj, _minor: int) -> Result:
    setters = _setters(_host_process(spec),
                       [_name(c) for c in _containers(spec) if _host_process(c)])
    if not setters:
        return None
    return ("hostProcess", f"{' and '.join(setters)} must not set "
                           "securityContext.windowsOptions.hostProcess=true")


# -- restricted -----------------------------------------------------------------------------


def _check_allow_privilege_escalation(_meta: Obj, spec: Obj, minor: int) -> Result:
    if minor >= 25 and _windows(spec):
        return None
    bad = [_name(c) for c in _containers(spec)
           if _sc(c).get("allowPrivilegeEscalation") is not False]
    if not bad:
        return None
    return ("allowPrivilegeEscalation != false",
            f"{_plural('container', 'containers', len(bad))} {_join_quote(bad)} must set "
            "securityContext.allowPrivilegeEscalation=false")


def _check_capabilities_restricted(_meta: Obj, spec: Obj, minor: int) -> Result:
    if minor >= 25 and _windows(spec):
        return None
    missing_drop: list[str] = []
    adding: list[str] = []
    forbidden_caps: set[str] = set()
    for c in _containers(spec):
        caps = _sc(c).get("capabilities")
        if not isinstance(caps, dict):
            missing_drop.append(_name(c))
            continue
        if "ALL" not in _strings(caps.get("drop")):
            missing_drop.append(_name(c))
        beyond = [cap for cap in _strings(caps.get("add")) if cap != "NET_BIND_SERVICE"]
        if beyond:
            adding.append(_name(c))
            forbidden_caps.update(beyond)
    details = []
    if missing_drop:
        details.append(f"{_plural('container', 'containers', len(missing_drop))} "
                       f"{_join_quote(missing_drop)} must set "
                       'securityContext.capabilities.drop=["ALL"]')
    if adding:
        details.append(f"{_plural('container', 'containers', len(adding))} "
                       f"{_join_quote(adding)} must not include "
                       f"{_join_quote(sorted(forbidden_caps))} in "
                       "securityContext.capabilities.add")
    return ("unrestricted capabilities", "; ".join(details)) if details else None


_ALLOWED_VOLUME_TYPES = ("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                         "persistentVolumeClaim", "projected", "secret")


def _check_restricted_volumes(_meta: Obj, spec: Obj, _minor: int) -> Result:
    names: list[str] = []
    types: set[str] = set()
    for volume in _items(spec.get("volumes")):
        sources = [k for k, v in volume.items() if k != "name" and v is not None]
        if any(k in _ALLOWED_VOLUME_TYPES for k in sources):
            continue
        names.append(str(volume.get("name", "")))
        types.update(sources or ["unknown"])
    if not names:
        return None
    return ("restricted volume types",
            f"{_plural('volume', 'volumes', len(names))} {_join_quote(names)} "
            f"{_plural('uses', 'use', len(names))} "
            f"{_plural('restricted volume type', 'restricted volume types', len(types))} "
            f"{_join_quote(sorted(types))}")


def _check_run_as_non_root(_meta: Obj, spec: Obj, minor: int) -> Result:
    if minor >= 34 and _user_namespaced(spec):
        return None
    pod_value = _sc(spec).get("runAsNonRoot")
    explicit: list[str] = []
    implicit: list[str] = []
    for c in _containers(spec):
        value = _sc(c).get("runAsNonRoot")
        if value is not None:
            if value is not True:
                explicit.append(_name(c))
        elif pod_value is not True:
            implicit.append(_name(c))
    setters = _setters(pod_value is not None and pod_value is not True, explicit)
    if setters:
        return ("runAsNonRoot != true",
                f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false")
    if implicit:
        return ("runAsNonRoot != true",
                f"pod or {_plural('container', 'containers', len(implicit))} "
                f"{_join_quote(implicit)} must set securityContext.runAsNonRoot=true")
    return None


def _check_run_as_user(_meta: Obj, spec: Obj, _minor: int) -> Result:
    setters = _setters(_sc(spec).get("runAsUser") == 0,
                       [_name(c) for c in _containers(spec) if _sc(c).get("runAsUser") == 0])
    if not setters:
        return None
    return "runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0"


def _check_seccomp_restricted(_meta: Obj, spec: Obj, minor: int) -> Result:
    if minor >= 25 and _windows(spec):
        return None
    values: set[str] = set()
    pod_set, pod_type = _seccomp_type(spec)
    pod_bad = pod_set and pod_type not in _SECCOMP_OK
    if pod_bad:
        values.add(pod_type)
    pod_ok = pod_set and not pod_bad
    explicit: list[str] = []
    implicit: list[str] = []
    for c in _containers(spec):
        is_set, kind = _seccomp_type(c)
        if is_set:
            if kind not in _SECCOMP_OK:
                explicit.append(_name(c))
                values.add(kind)
        elif not pod_ok:
            implicit.append(_name(c))
    setters = _setters(pod_bad, explicit)
    if setters:
        return ("seccompProfile", f"{' and '.join(setters)} must not set "
                                  "securityContext.seccompProfile.type to "
                                  f"{_join_quote(sorted(values))}")
    if implicit:
        return ("seccompProfile",
                f"pod or {_plural('container', 'containers', len(implicit))} "
                f"{_join_quote(implicit)} must set securityContext.seccompProfile.type to "
                '"RuntimeDefault" or "Localhost"')
    return None


@dataclass(frozen=True)
class Check:
    id: str
    level: str
    fn: CheckFn
    since: int = 0  # the first policy minor version (v1.<since>) the check applies to
    # a baseline check that a restricted check replaces (run at baseline only)
    overlap: bool = False


# Kubernetes' order (its checks register in file-name order); baseline ones run first.
CHECKS: tuple[Check, ...] = (
    Check("allowPrivilegeEscalation", RESTRICTED, _check_allow_privilege_escalation, 8),
    Check("appArmorProfile", BASELINE, _check_apparmor),
    Check("capabilities_baseline", BASELINE, _check_capabilities_baseline, overlap=True),
    Check("capabilities_restricted", RESTRICTED, _check_capabilities_restricted, 22),
    Check("hostNamespaces", BASELINE, _check_host_namespaces),
    Check("hostPathVolumes", BASELINE, _check_host_path_volumes, overlap=True),
    Check("hostPorts", BASELINE, _check_host_ports),
    Check("hostProbesAndHostLifecycle", BASELINE, _check_probe_hosts, 34),
    Check("privileged", BASELINE, _check_privileged),
    Check("procMount", BASELINE, _check_proc_mount),
    Check("restrictedVolumes", RESTRICTED, _check_restricted_volumes),
    Check("runAsNonRoot", RESTRICTED, _check_run_as_non_root),
    Check("runAsUser", RESTRICTED, _check_run_as_user, 23),
    Check("seLinuxOptions", BASELINE, _check_selinux),
    Check("seccompProfile_baseline", BASELINE, _check_seccomp_baseline, overlap=True),
    Check("seccompProfile_restricted", RESTRICTED, _check_seccomp_restricted, 19),
    Check("sysctls", BASELINE, _check_sysctls),
    Check("windowsHostProcess", BASELINE, _check_windows_host_process),
)


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
    if new_ann.get(_SECCOMP_POD_ANNOTATION) != old_ann.get(_SECCOMP_POD_ANNOTATION):
        return True
    new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}

    def changed(c: Obj, o: Obj) -> bool:
        key = _SECCOMP_CONTAINER_ANNOTATION + _name(c)
        return c.get("image") != o.get("image") or new_ann.get(key) != old_ann.get(key)

    for key in ("containers", "initContainers"):
        mine, theirs = _items(new_spec.get(key)), _items(old_spec.get(key))
        if len(mine) != len(theirs) or any(changed(c, o) for c, o in zip(mine, theirs,
                                                                          strict=True)):
            return True
    old_ephemeral = {_name(c): c for c in _items(old_spec.get("ephemeralContainers"))}
    return any(_name(c) not in old_ephemeral or changed(c, old_ephemeral[_name(c)])
               for c in _items(new_spec.get("ephemeralContainers")))


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
