"""The checks of the Pod Security Standards' levels (SPEC AU7), as Kubernetes'
k8s.io/pod-security-admission/policy words them.

Each check is a small function from a pod's (or pod template's) metadata and spec, at a
policy minor version, to a forbidden reason and detail, or None; `CHECKS` lists them in
Kubernetes' order with the level each belongs to and the version it appeared in (seccomp
from v1.19, capabilities v1.22, runAsUser v1.23, the Windows-pod exemptions from v1.25 and
the probe/lifecycle host check and user-namespace relaxation from v1.34). A baseline check
that a restricted one replaces is marked `overlap`. `skiff.api.podsecurity` picks and runs
them; this module knows nothing of namespaces or configuration.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from skiff.api.types import Obj
from skiff.api.wellknown import (
    APPARMOR_CONTAINER_ANNOTATION_PREFIX,
    SECCOMP_CONTAINER_ANNOTATION_PREFIX,
    SECCOMP_POD_ANNOTATION,
)

PRIVILEGED, BASELINE, RESTRICTED = "privileged", "baseline", "restricted"


# -- helpers as Kubernetes words them -------------------------------------------------------


def _join_quote(items: list[str]) -> str:
    return ", ".join(f'"{i}"' for i in items)


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _go_quote(text: str) -> str:
    """Go's %q of a string, as the seccomp and AppArmor annotation details print it."""
    return json.dumps(text, ensure_ascii=False)


def maps_of(value: Any) -> list[Obj]:
    """The maps of a list field (anything else in it, or a non-list, is nothing)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _containers(spec: Obj) -> Iterator[Obj]:
    """Init containers, containers, then ephemeral containers (visitContainers)."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from maps_of(spec.get(key))


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _sc(obj: Obj) -> Obj:
    context = obj.get("securityContext")
    return context if isinstance(context, dict) else {}


def container_name(container: Obj) -> str:
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
            containers.append(container_name(c))
            values.add(value)
    setters = _setters(pod_value is not None, containers)
    annotations = sorted(
        f"{k}={_go_quote(str(v))}" for k, v in (meta.get("annotations") or {}).items()
        if k.startswith(APPARMOR_CONTAINER_ANNOTATION_PREFIX)
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
            bad.append(container_name(c))
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
    names = [str(v.get("name", "")) for v in maps_of(spec.get("volumes"))
             if v.get("hostPath") is not None]
    if not names:
        return None
    return "hostPath volumes", f"{_plural('volume', 'volumes', len(names))} {_join_quote(names)}"


def _check_host_ports(_meta: Obj, spec: Obj, _minor: int) -> Result:
    bad: list[str] = []
    ports: set[str] = set()
    for c in _containers(spec):
        used = [str(p["hostPort"]) for p in maps_of(c.get("ports")) if p.get("hostPort")]
        if used:
            bad.append(container_name(c))
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
            bad.add(container_name(c))
            hosts.update(found)
    if not bad:
        return None
    return ("probe or lifecycle host",
            f"{_plural('container', 'containers', len(bad))} {_join_quote(sorted(bad))} "
            f"{_plural('uses', 'use', len(bad))} "
            f"{_plural('probe or lifecycle host', 'probe or lifecycle hosts', len(hosts))} "
            f"{_join_quote(sorted(hosts))}")


def _check_privileged(_meta: Obj, spec: Obj, _minor: int) -> Result:
    bad = [container_name(c) for c in _containers(spec) if _sc(c).get("privileged") is True]
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
            bad.append(container_name(c))
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
    containers = [container_name(c) for c in _containers(spec)
                  if not valid(_sc(c).get("seLinuxOptions"))]
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

        keys = [SECCOMP_POD_ANNOTATION,
                *(SECCOMP_CONTAINER_ANNOTATION_PREFIX + container_name(c)
                  for c in _containers(spec))]
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
            containers.append(container_name(c))
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
    bad = [str(s.get("name", "")) for s in maps_of(_sc(spec).get("sysctls"))
           if s.get("name") not in safe]
    return ("forbidden sysctls", ", ".join(bad)) if bad else None


def _host_process(obj: Obj) -> bool:
    options = _sc(obj).get("windowsOptions")
    return isinstance(options, dict) and options.get("hostProcess") is True


def _check_windows_host_process(_meta: Obj, spec: Obj, _minor: int) -> Result:
    setters = _setters(_host_process(spec),
                       [container_name(c) for c in _containers(spec) if _host_process(c)])
    if not setters:
        return None
    return ("hostProcess", f"{' and '.join(setters)} must not set "
                           "securityContext.windowsOptions.hostProcess=true")


# -- restricted -----------------------------------------------------------------------------


def _check_allow_privilege_escalation(_meta: Obj, spec: Obj, minor: int) -> Result:
    if minor >= 25 and _windows(spec):
        return None
    bad = [container_name(c) for c in _containers(spec)
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
            missing_drop.append(container_name(c))
            continue
        if "ALL" not in _strings(caps.get("drop")):
            missing_drop.append(container_name(c))
        beyond = [cap for cap in _strings(caps.get("add")) if cap != "NET_BIND_SERVICE"]
        if beyond:
            adding.append(container_name(c))
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
    for volume in maps_of(spec.get("volumes")):
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
                explicit.append(container_name(c))
        elif pod_value is not True:
            implicit.append(container_name(c))
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
                       [container_name(c) for c in _containers(spec)
                        if _sc(c).get("runAsUser") == 0])
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
                explicit.append(container_name(c))
                values.add(kind)
        elif not pod_ok:
            implicit.append(container_name(c))
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

