"""Object validation with Kubernetes' rules and field paths (SPEC AS7, LC7, PP1, PS2).

The apiserver calls `validate(obj, old=...)` after defaulting and before anything is
stored; an empty list means the object may be written. Each check follows the matching
function of `pkg/apis/*/validation` so that a user sees the same
`spec.containers[0].name: Required value` they would from Kubernetes.
"""

from __future__ import annotations

import copy
import ipaddress
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard

from skiff.api import (
    accountkinds,
    autoscaling,
    cronjobs,
    limitranges,
    networking,
    quotas,
    rbac,
    storagecapacity,
    volumepaths,
)
from skiff.api.errors import (
    FieldError,
    duplicate,
    forbidden,
    go_value,
    invalid,
    not_found,
    not_supported,
    required,
    too_long,
)
from skiff.api.kinds import KINDS
from skiff.api.quantity import parse_quantity
from skiff.api.selectors import (
    LabelSelector,
    dns1123_label_problems,
    dns1123_subdomain_problems,
    label_value_problems,
    qualified_name_problems,
    validate_label_key,
    validate_label_selector,
    validate_labels,
)

Obj = Mapping[str, Any]
NameCheck = Callable[[str], list[str]]

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_PRIORITY_CLASSES = {
    "system-cluster-critical": 2_000_000_000,
    "system-node-critical": 2_000_001_000,
}
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
IMMUTABLE = "field is immutable"

_KIND_INFO = {info.kind: info for info in KINDS}

# --- small helpers -----------------------------------------------------------------------


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# The longest grace period Kubernetes can turn into a deadline: seconds that still fit a Go
# time.Duration (int64 nanoseconds), about 292 years. Longer ones cannot be served.
MAX_GRACE_SECONDS = INT64_MAX // 10**9


def _int(obj: Obj, key: str, path: str, *, minimum: int | None = None,
         maximum: int = INT64_MAX, detail: str | None = None) -> list[FieldError]:
    """An optional integer field: an int (not bool, not str) in [`minimum`, `maximum`]; every
    integer field of the API is an int64 at most."""
    if key not in obj or obj[key] is None:
        return []
    value = obj[key]
    if not _is_int(value):
        return [invalid(path, value, "must be an integer")]
    if minimum is not None and value < minimum:
        return [invalid(path, value, detail or f"must be greater than or equal to {minimum}")]
    if value < INT64_MIN:
        return [invalid(path, value, "must fit in a 64-bit signed integer")]
    if value > maximum:
        return [invalid(path, value, "must fit in a 64-bit signed integer"
                        if maximum == INT64_MAX else f"must be less than or equal to {maximum}")]
    return []


def grace_period_problem(value: int) -> str | None:
    """Why a requested deletion grace period cannot be served, or None."""
    if value > MAX_GRACE_SECONDS:
        return f"must be less than or equal to {MAX_GRACE_SECONDS}"
    if value < INT64_MIN:
        return "must fit in a 64-bit signed integer"
    return None


def revision_problem(value: int) -> str | None:
    """Why a resourceVersion/revision number cannot name an etcd revision, or None."""
    if value < 0 or value > INT64_MAX:
        return f"must be between 0 and {INT64_MAX}"
    return None


def _str(obj: Obj, key: str, path: str) -> list[FieldError]:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        return [invalid(path, value, "must be a string")]
    return []


def _enum(obj: Obj, key: str, path: str, allowed: list[str], *,
          is_required: bool = False) -> list[FieldError]:
    value = obj.get(key)
    if value is None or value == "":
        return [required(path)] if is_required else []
    if value not in allowed:
        return [not_supported(path, value, allowed)]
    return []


def _dict(value: Any, path: str) -> tuple[Obj, list[FieldError]]:
    """`value` as a mapping ({} when missing) and an error when it is something else."""
    if value is None:
        return {}, []
    if isinstance(value, Mapping):
        return value, []
    return {}, [invalid(path, value, "must be an object")]


def _list(value: Any, path: str) -> tuple[list[Any], list[FieldError]]:
    if value is None:
        return [], []
    if isinstance(value, list):
        return value, []
    return [], [invalid(path, value, "must be a list")]


def _strings(value: Any, path: str) -> list[FieldError]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return [invalid(path, value, "must be a list of strings")]
    return []


def _name(value: Any, path: str, check: NameCheck) -> list[FieldError]:
    if not isinstance(value, str):
        return [invalid(path, value, "must be a string")]
    return [invalid(path, value, p) for p in check(value)]


def _immutable(new: Any, old: Any, path: str) -> list[FieldError]:
    return [] if new == old else [invalid(path, new, IMMUTABLE)]


def _port(value: Any, path: str, *, allow_name: bool) -> list[FieldError]:
    if value is None or value == "":
        return [required(path)]
    if _is_int(value):
        if not 1 <= value <= 65535:
            return [invalid(path, value, "must be between 1 and 65535, inclusive")]
        return []
    if allow_name and isinstance(value, str):
        return [invalid(path, value, p) for p in _iana_svc_name_problems(value)]
    return [invalid(path, value, "must be an integer between 1 and 65535")]


_IANA_SVC_NAME = re.compile(r"^[-a-z0-9]+$")


def _iana_svc_name_problems(value: str) -> list[str]:
    problems = []
    if len(value) > 15:
        problems.append("must be no more than 15 characters")
    if not _IANA_SVC_NAME.match(value):
        problems.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if "--" in value:
        problems.append("must not contain consecutive hyphens")
    if not re.search("[a-z]", value):
        problems.append("must contain at least one letter (a-z)")
    if value.startswith("-") or value.endswith("-"):
        problems.append("must not begin or end with a hyphen")
    return problems


def _int_or_percent(value: Any, path: str) -> list[FieldError]:
    """`minAvailable`, `maxUnavailable`: an int ≥ 0 or "N%" with 0 ≤ N ≤ 100."""
    if _is_int(value):
        if value < 0:
            return [invalid(path, value, "must be greater than or equal to 0")]
        return []
    if isinstance(value, str):
        match = re.fullmatch(r"([0-9]+)%", value)
        if match is None:
            return [invalid(path, value, "a valid percent string must be a numeric string "
                                         "followed by an ending '%' (e.g. '1%',  or '93%')")]
        if int(match.group(1)) > 100:
            return [invalid(path, value, "must not be greater than 100%")]
        return []
    return [invalid(path, value, "must be an integer or a percentage string like '50%'")]


# --- metadata (ValidateObjectMeta / ValidateObjectMetaUpdate) ---------------------------


def _validate_metadata(obj: Obj, kind: str, path: str, *, namespaced: bool,
                       name_check: NameCheck, top_level: bool = True) -> list[FieldError]:
    meta, errors = _dict(obj.get("metadata"), path)
    name, generate_name = meta.get("name"), meta.get("generateName")
    if top_level and not name and not generate_name:
        errors.append(required(f"{path}.name", "name or generateName is required"))
    if name:
        errors += _name(name, f"{path}.name", name_check)
    if generate_name:
        if isinstance(generate_name, str):
            # A prefix may end in '-'; the random suffix makes it a name.
            errors += [invalid(f"{path}.generateName", generate_name, p)
                       for p in name_check(generate_name.rstrip("-") or "a")]
        else:
            errors.append(invalid(f"{path}.generateName", generate_name, "must be a string"))
    namespace = meta.get("namespace")
    if top_level and namespaced:
        if not namespace:
            errors.append(required(f"{path}.namespace"))
        else:
            errors += _name(namespace, f"{path}.namespace", dns1123_label_problems)
    elif top_level and namespace:
        errors.append(forbidden(f"{path}.namespace", f"not allowed on this type ({kind} is "
                                                     "cluster-scoped)"))
    errors += validate_labels(meta.get("labels"), f"{path}.labels")
    errors += _validate_annotations(meta.get("annotations"), f"{path}.annotations")
    errors += _validate_owner_references(meta.get("ownerReferences"),
                                         f"{path}.ownerReferences")
    finalizers, errs = _list(meta.get("finalizers"), f"{path}.finalizers")
    errors += errs
    for i, finalizer in enumerate(finalizers):
        fpath = f"{path}.finalizers[{i}]"
        if not isinstance(finalizer, str):
            errors.append(invalid(fpath, finalizer, "must be a string"))
        else:
            errors += [invalid(fpath, finalizer, p) for p in qualified_name_problems(finalizer)]
    errors += _int(meta, "deletionGracePeriodSeconds", f"{path}.deletionGracePeriodSeconds",
                   minimum=0, maximum=MAX_GRACE_SECONDS)
    errors += _int(meta, "generation", f"{path}.generation", minimum=0)
    return errors


def _validate_annotations(annotations: Any, path: str) -> list[FieldError]:
    if annotations is None:
        return []
    if not isinstance(annotations, Mapping):
        return [invalid(path, annotations, "must be a map of string keys to string values")]
    errors: list[FieldError] = []
    total = 0
    for key, value in annotations.items():
        if not isinstance(key, str):
            errors.append(invalid(path, key, "annotation keys must be strings"))
            continue
        errors += [invalid(path, key, p) for p in qualified_name_problems(key.lower())]
        if not isinstance(value, str):
            errors.append(invalid(f"{path}[{key}]", value, "annotation values must be strings"))
            continue
        total += len(key.encode()) + len(value.encode())
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        errors.append(too_long(path, "", TOTAL_ANNOTATION_SIZE_LIMIT))
    return errors


def _validate_owner_references(refs: Any, path: str) -> list[FieldError]:
    items, errors = _list(refs, path)
    controllers = []
    for i, ref in enumerate(items):
        rpath = f"{path}[{i}]"
        ref_obj, errs = _dict(ref, rpath)
        errors += errs
        for key in ("apiVersion", "kind", "name", "uid"):
            if not ref_obj.get(key):
                errors.append(required(f"{rpath}.{key}", f"{key} must not be empty"))
            else:
                errors += _str(ref_obj, key, f"{rpath}.{key}")
        if ref_obj.get("controller") is True:
            controllers.append(f"{ref_obj.get('kind')}/{ref_obj.get('name')}")
    if len(controllers) > 1:
        errors.append(invalid(path, refs, "Only one reference can have Controller set to "
                                          f"true. Found \"true\" in references for "
                                          f"{' and '.join(controllers)}"))
    return errors


def _validate_metadata_update(obj: Obj, old: Obj) -> list[FieldError]:
    meta, _ = _dict(obj.get("metadata"), "metadata")
    old_meta, _ = _dict(old.get("metadata"), "metadata")
    errors: list[FieldError] = []
    for key in ("name", "namespace", "uid", "creationTimestamp"):
        errors += _immutable(meta.get(key), old_meta.get(key), f"metadata.{key}")
    if old_meta.get("deletionTimestamp"):
        old_finalizers = set(old_meta.get("finalizers") or [])
        added = [f for f in meta.get("finalizers") or [] if f not in old_finalizers]
        if added:
            errors.append(forbidden("metadata.finalizers",
                                    "no new finalizers can be added if the object is being "
                                    f"deleted, found new finalizers {added}"))
    return errors


# --- pods (pkg/apis/core/validation) -----------------------------------------------------

RESTART_POLICIES = ["Always", "OnFailure", "Never"]
PULL_POLICIES = ["Always", "IfNotPresent", "Never"]
TERMINATION_MESSAGE_POLICIES = ["File", "FallbackToLogsOnError"]
DNS_POLICIES = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"]
PROTOCOLS = ["TCP", "UDP", "SCTP"]
TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
TOLERATION_OPERATORS = ["Exists", "Equal"]
WHEN_UNSATISFIABLE = ["DoNotSchedule", "ScheduleAnyway"]
NODE_INCLUSION_POLICIES = ["Ignore", "Honor"]
PROBE_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
LIFECYCLE_HANDLERS = ("exec", "httpGet", "tcpSocket", "sleep")


def validate_pod_spec(spec_value: Any, path: str) -> list[FieldError]:
    """`ValidatePodSpec`: containers, volumes, scheduling fields; `path` is `spec` or
    `spec.template.spec`."""
    spec, errors = _dict(spec_value, path)
    if errors:
        return errors
    volumes, errs = _list(spec.get("volumes"), f"{path}.volumes")
    errors += errs
    volume_names: set[str] = set()
    for i, volume in enumerate(volumes):
        vpath = f"{path}.volumes[{i}]"
        vol, errs = _dict(volume, vpath)
        errors += errs
        vname = vol.get("name")
        if not vname:
            errors.append(required(f"{vpath}.name"))
            continue
        errors += _name(vname, f"{vpath}.name", dns1123_label_problems)
        errors += volumepaths.validate_volume_source(vol, vpath)
        if isinstance(vname, str):
            if vname in volume_names:
                errors.append(duplicate(f"{vpath}.name", vname))
            volume_names.add(vname)

    grace = spec.get("terminationGracePeriodSeconds")
    errors += _int(spec, "terminationGracePeriodSeconds",
                   f"{path}.terminationGracePeriodSeconds", minimum=0,
                   maximum=MAX_GRACE_SECONDS)
    pod_grace = grace if _is_int(grace) and grace >= 0 else None

    containers, errs = _list(spec.get("containers"), f"{path}.containers")
    errors += errs
    if not containers and not errs:
        errors.append(required(f"{path}.containers"))
    init_containers, errs = _list(spec.get("initContainers"), f"{path}.initContainers")
    errors += errs
    names: set[str] = set()
    for i, container in enumerate(init_containers):
        errors += _validate_container(container, f"{path}.initContainers[{i}]", names,
                                      volume_names, pod_grace, init=True)
    for i, container in enumerate(containers):
        errors += _validate_container(container, f"{path}.containers[{i}]", names,
                                      volume_names, pod_grace, init=False)

    errors += _enum(spec, "restartPolicy", f"{path}.restartPolicy", RESTART_POLICIES)
    errors += _enum(spec, "dnsPolicy", f"{path}.dnsPolicy", DNS_POLICIES)
    errors += _dns_config(spec, f"{path}.dnsConfig")
    errors += _int(spec, "activeDeadlineSeconds", f"{path}.activeDeadlineSeconds", minimum=1,
                   detail="must be between 1 and 2147483647, inclusive")
    errors += validate_labels(spec.get("nodeSelector"), f"{path}.nodeSelector")
    for key, check in (("nodeName", dns1123_subdomain_problems),
                       ("serviceAccountName", dns1123_subdomain_problems),
                       ("priorityClassName", dns1123_subdomain_problems),
                       ("schedulerName", dns1123_subdomain_problems),
                       ("hostname", dns1123_label_problems),
                       ("subdomain", dns1123_label_problems)):
        if spec.get(key):
            errors += _name(spec[key], f"{path}.{key}", check)
    errors += _validate_tolerations(spec.get("tolerations"), f"{path}.tolerations")
    errors += _validate_spread(spec.get("topologySpreadConstraints"),
                               f"{path}.topologySpreadConstraints")
    errors += _validate_unique_names(spec.get("schedulingGates"), f"{path}.schedulingGates",
                                     "name", qualified_name_problems)
    gates, errs = _list(spec.get("readinessGates"), f"{path}.readinessGates")
    errors += errs
    for i, gate in enumerate(gates):
        gpath = f"{path}.readinessGates[{i}].conditionType"
        gate_obj, errs = _dict(gate, f"{path}.readinessGates[{i}]")
        errors += errs
        if not gate_obj.get("conditionType"):
            errors.append(required(gpath))
        else:
            errors += _name(gate_obj["conditionType"], gpath, qualified_name_problems)
    for key in ("hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace",
                "automountServiceAccountToken", "enableServiceLinks", "setHostnameAsFQDN",
                "hostUsers"):
        value = spec.get(key)
        if value is not None and not isinstance(value, bool):
            errors.append(invalid(f"{path}.{key}", value, "must be a boolean"))
    return errors


def _validate_unique_names(value: Any, path: str, key: str,
                           check: NameCheck) -> list[FieldError]:
    items, errors = _list(value, path)
    seen: set[str] = set()
    for i, item in enumerate(items):
        ipath = f"{path}[{i}]"
        item_obj, errs = _dict(item, ipath)
        errors += errs
        name = item_obj.get(key)
        if not name:
            errors.append(required(f"{ipath}.{key}"))
            continue
        errors += _name(name, f"{ipath}.{key}", check)
        if isinstance(name, str):
            if name in seen:
                errors.append(duplicate(f"{ipath}.{key}", name))
            seen.add(name)
    return errors


MAX_DNS_NAMESERVERS, MAX_DNS_SEARCH_PATHS, MAX_DNS_SEARCH_LIST_CHARS = 3, 32, 2048


def _dns_config(spec: Obj, path: str) -> list[FieldError]:
    """`dnsConfig`, and `dnsPolicy: None` needing one with a nameserver (Kubernetes'
    validatePodDNSConfig: libc's limits of 3 nameservers and 32 search paths)."""
    config = spec.get("dnsConfig")
    if spec.get("dnsPolicy") == "None":
        if not isinstance(config, dict):
            return [required(path, "must provide `dnsConfig` when `dnsPolicy` is None")]
        if not config.get("nameservers"):
            return [required(f"{path}.nameservers", "must provide at least one DNS "
                                                    "nameserver when `dnsPolicy` is None")]
    if not isinstance(config, dict):
        return []
    errors: list[FieldError] = []
    nameservers = [str(n) for n in config.get("nameservers") or []]
    if len(nameservers) > MAX_DNS_NAMESERVERS:
        errors.append(invalid(f"{path}.nameservers", nameservers,
                              f"must not have more than {MAX_DNS_NAMESERVERS} nameservers"))
    for i, nameserver in enumerate(nameservers):
        try:
            ipaddress.ip_address(nameserver)
        except ValueError:
            errors.append(invalid(f"{path}.nameservers[{i}]", nameserver,
                                  "must be a valid IP address, (e.g. 10.9.8.7 or "
                                  "2001:db8::ffff)"))
    searches = [str(s) for s in config.get("searches") or []]
    if len(searches) > MAX_DNS_SEARCH_PATHS:
        errors.append(invalid(f"{path}.searches", searches,
                              f"must not have more than {MAX_DNS_SEARCH_PATHS} search paths"))
    if len(" ".join(searches)) > MAX_DNS_SEARCH_LIST_CHARS:
        errors.append(invalid(f"{path}.searches", searches, "must not have more than "
                              f"{MAX_DNS_SEARCH_LIST_CHARS} characters (including spaces) "
                              "in the search list"))
    for i, search in enumerate(searches):
        if search == ".":
            continue  # the root domain
        # Kubernetes' relaxed search validation (RelaxedDNSSearchValidation, on by default
        # since 1.33): a DNS-1123 subdomain that may also hold underscores
        for problem in dns1123_subdomain_problems(search.removesuffix(".").replace("_", "a")):
            errors.append(invalid(f"{path}.searches[{i}]", search, problem))
    for i, option in enumerate(config.get("options") or []):
        if not isinstance(option, dict) or not option.get("name"):
            errors.append(required(f"{path}.options[{i}]", "Option.Name must not be empty"))
    return errors


def _validate_container(value: Any, path: str, names: set[str], volume_names: set[str],
                        pod_grace: int | None, *, init: bool) -> list[FieldError]:
    container, errors = _dict(value, path)
    if errors:
        return errors
    name = container.get("name")
    if not name:
        errors.append(required(f"{path}.name"))
    else:
        errors += _name(name, f"{path}.name", dns1123_label_problems)
        if isinstance(name, str):
            if name in names:
                errors.append(duplicate(f"{path}.name", name))
            names.add(name)
    if not container.get("image") and not container.get("command"):
        errors.append(required(f"{path}.image", "a container needs an image or a command "
                                                "(Skiff runs `command` + `args`)"))
    errors += _str(container, "image", f"{path}.image")
    errors += _strings(container.get("command"), f"{path}.command")
    errors += _strings(container.get("args"), f"{path}.args")
    errors += _str(container, "workingDir", f"{path}.workingDir")
    errors += _enum(container, "imagePullPolicy", f"{path}.imagePullPolicy", PULL_POLICIES)
    errors += _enum(container, "terminationMessagePolicy", f"{path}.terminationMessagePolicy",
                    TERMINATION_MESSAGE_POLICIES)
    errors += _validate_ports(container.get("ports"), f"{path}.ports")
    errors += _validate_env(container.get("env"), f"{path}.env")
    errors += _validate_resources(container.get("resources"), f"{path}.resources")
    errors += _validate_volume_mounts(container.get("volumeMounts"), f"{path}.volumeMounts",
                                      volume_names)

    restart_policy = container.get("restartPolicy")
    sidecar = init and restart_policy == "Always"
    if restart_policy is not None:
        if not init:
            errors.append(forbidden(f"{path}.restartPolicy",
                                    "may not be set for non-init containers"))
        elif restart_policy != "Always":
            errors.append(not_supported(f"{path}.restartPolicy", restart_policy, ["Always"]))
    if init and not sidecar:
        for key in ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe"):
            if container.get(key) is not None:
                errors.append(forbidden(f"{path}.{key}", "may not be set for init containers "
                                                        "without restartPolicy=Always"))
        return errors
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        if container.get(key) is not None:
            errors += _validate_probe(container[key], f"{path}.{key}", key)
    lifecycle, errs = _dict(container.get("lifecycle"), f"{path}.lifecycle")
    errors += errs
    for hook in ("postStart", "preStop"):
        if lifecycle.get(hook) is not None:
            errors += _validate_handler(lifecycle[hook], f"{path}.lifecycle.{hook}",
                                        LIFECYCLE_HANDLERS, pod_grace)
    return errors


def _validate_ports(value: Any, path: str) -> list[FieldError]:
    ports, errors = _list(value, path)
    seen_names: set[str] = set()
    for i, port_value in enumerate(ports):
        ppath = f"{path}[{i}]"
        port, errs = _dict(port_value, ppath)
        errors += errs
        errors += _port(port.get("containerPort"), f"{ppath}.containerPort", allow_name=False)
        if port.get("hostPort") not in (None, 0):
            errors += _port(port.get("hostPort"), f"{ppath}.hostPort", allow_name=False)
        errors += _enum(port, "protocol", f"{ppath}.protocol", PROTOCOLS)
        pname = port.get("name")
        if pname:
            errors += _name(pname, f"{ppath}.name", _iana_svc_name_problems)
            if isinstance(pname, str):
                if pname in seen_names:
                    errors.append(duplicate(f"{ppath}.name", pname))
                seen_names.add(pname)
    return errors


def _validate_env(value: Any, path: str) -> list[FieldError]:
    items, errors = _list(value, path)
    for i, item in enumerate(items):
        epath = f"{path}[{i}]"
        env, errs = _dict(item, epath)
        errors += errs
        name = env.get("name")
        if not name:
            errors.append(required(f"{epath}.name"))
        elif not isinstance(name, str) or "=" in name or not name.isprintable():
            errors.append(invalid(f"{epath}.name", name, "a valid environment variable name "
                                                         "must consist only of printable "
                                                         "ASCII characters other than '='"))
        errors += _str(env, "value", f"{epath}.value")
        if env.get("value") and env.get("valueFrom") is not None:
            errors.append(invalid(f"{epath}.valueFrom", "", "may not be specified when "
                                                            "`value` is not empty"))
    return errors


def _validate_resources(value: Any, path: str) -> list[FieldError]:
    resources, errors = _dict(value, path)
    parsed: dict[str, dict[str, Any]] = {}
    for part in ("limits", "requests"):
        amounts, errs = _dict(resources.get(part), f"{path}.{part}")
        errors += errs
        parsed[part] = {}
        for resource, amount in amounts.items():
            rpath = f"{path}.{part}[{resource}]"
            errors += [invalid(rpath, resource, p)
                       for p in qualified_name_problems(str(resource))]
            try:
                quantity = parse_quantity(amount)
            except ValueError as exc:
                errors.append(invalid(rpath, amount, str(exc)))
                continue
            if quantity < 0:
                errors.append(invalid(rpath, amount, "must be greater than or equal to 0"))
                continue
            parsed[part][resource] = quantity
    for resource, request in parsed["requests"].items():
        limit = parsed["limits"].get(resource)
        if limit is not None and request > limit:
            errors.append(invalid(f"{path}.requests[{resource}]",
                                  resources["requests"][resource],
                                  f"must be less than or equal to {resource} limit of "
                                  f"{resources['limits'][resource]}"))
    return errors


def _validate_volume_mounts(value: Any, path: str, volume_names: set[str]) -> list[FieldError]:
    mounts, errors = _list(value, path)
    seen_paths: set[str] = set()
    for i, item in enumerate(mounts):
        mpath = f"{path}[{i}]"
        mount, errs = _dict(item, mpath)
        errors += errs
        name = mount.get("name")
        if not name:
            errors.append(required(f"{mpath}.name"))
        elif not isinstance(name, str) or name not in volume_names:
            errors.append(FieldError(f"{mpath}.name", "Not found",
                                     f"no volume named {name!r} in the pod's volumes", name))
        mount_path = mount.get("mountPath")
        if not mount_path:
            errors.append(required(f"{mpath}.mountPath"))
        elif isinstance(mount_path, str):
            if mount_path in seen_paths:
                errors.append(invalid(f"{mpath}.mountPath", mount_path, "must be unique"))
            seen_paths.add(mount_path)
        errors += volumepaths.validate_mount_subpaths(mount, mpath, path)
    return errors


def _validate_handler(value: Any, path: str, handlers: tuple[str, ...],
                      pod_grace: int | None) -> list[FieldError]:
    """Exactly one handler (`validateHandler` / `validateLifecycleHandler`)."""
    handler, errors = _dict(value, path)
    if errors:
        return errors
    present = [h for h in handlers if handler.get(h) is not None]
    if not present:
        return [required(path, "must specify a handler type")]
    for extra in present[1:]:
        errors.append(forbidden(f"{path}.{extra}", "may not specify more than 1 handler type"))
    for kind in present:
        hpath = f"{path}.{kind}"
        body, errs = _dict(handler[kind], hpath)
        errors += errs
        if errs:
            continue
        if kind == "exec":
            if not body.get("command"):
                errors.append(required(f"{hpath}.command"))
            else:
                errors += _strings(body.get("command"), f"{hpath}.command")
        elif kind == "httpGet":
            errors += _port(body.get("port"), f"{hpath}.port", allow_name=True)
            errors += _enum(body, "scheme", f"{hpath}.scheme", ["HTTP", "HTTPS"])
            errors += _str(body, "path", f"{hpath}.path")
            headers, errs = _list(body.get("httpHeaders"), f"{hpath}.httpHeaders")
            errors += errs
            for j, header in enumerate(headers):
                if not isinstance(header, Mapping) or not header.get("name"):
                    errors.append(required(f"{hpath}.httpHeaders[{j}].name"))
        elif kind == "tcpSocket":
            errors += _port(body.get("port"), f"{hpath}.port", allow_name=True)
        elif kind == "grpc":
            errors += _port(body.get("port"), f"{hpath}.port", allow_name=False)
            errors += _str(body, "service", f"{hpath}.service")
        elif kind == "sleep":
            seconds = body.get("seconds")
            spath = f"{hpath}.seconds"
            if seconds is None:
                errors.append(required(spath))
            elif not _is_int(seconds):
                errors.append(invalid(spath, seconds, "must be an integer"))
            elif seconds < 0 or (pod_grace is not None and seconds > pod_grace):
                limit = "" if pod_grace is None else (
                    f" and at most terminationGracePeriodSeconds ({pod_grace})")
                errors.append(invalid(spath, seconds, f"must be non-negative{limit}"))
    return errors


def _validate_probe(value: Any, path: str, which: str) -> list[FieldError]:
    probe, errors = _dict(value, path)
    if errors:
        return errors
    errors += _validate_handler(probe, path, PROBE_HANDLERS, None)
    errors += _int(probe, "initialDelaySeconds", f"{path}.initialDelaySeconds", minimum=0)
    for key in ("periodSeconds", "timeoutSeconds", "successThreshold", "failureThreshold"):
        errors += _int(probe, key, f"{path}.{key}", minimum=1)
    success = probe.get("successThreshold")
    if which in ("livenessProbe", "startupProbe") and _is_int(success) and success != 1:
        errors.append(invalid(f"{path}.successThreshold", success, "must be 1"))
    if probe.get("terminationGracePeriodSeconds") is not None:
        tpath = f"{path}.terminationGracePeriodSeconds"
        if which == "readinessProbe":
            errors.append(invalid(tpath, probe["terminationGracePeriodSeconds"],
                                  "must not be set for readinessProbes"))
        else:
            errors += _int(probe, "terminationGracePeriodSeconds", tpath, minimum=1,
                           maximum=MAX_GRACE_SECONDS, detail="must be greater than 0")
    return errors


def _validate_tolerations(value: Any, path: str) -> list[FieldError]:
    items, errors = _list(value, path)
    for i, item in enumerate(items):
        tpath = f"{path}[{i}]"
        toleration, errs = _dict(item, tpath)
        errors += errs
        key = toleration.get("key") or ""
        operator = toleration.get("operator") or "Equal"
        if key:
            errors += validate_label_key(key, f"{tpath}.key")
        elif operator != "Exists":
            errors.append(invalid(f"{tpath}.operator", operator,
                                  "operator must be Exists when `key` is empty, which means "
                                  "\"match all values and all keys\""))
        if operator not in TOLERATION_OPERATORS:
            errors.append(not_supported(f"{tpath}.operator", operator, TOLERATION_OPERATORS))
        value_ = toleration.get("value") or ""
        if operator == "Exists" and value_:
            errors.append(invalid(f"{tpath}.operator", toleration.get("value"),
                                  "value must be empty when `operator` is 'Exists'"))
        elif operator == "Equal":
            errors += [invalid(f"{tpath}.value", value_, p)
                       for p in label_value_problems(str(value_))]
        effect = toleration.get("effect") or ""
        if effect and effect not in TAINT_EFFECTS:
            errors.append(not_supported(f"{tpath}.effect", effect, TAINT_EFFECTS))
        if toleration.get("tolerationSeconds") is not None:
            errors += _int(toleration, "tolerationSeconds", f"{tpath}.tolerationSeconds")
            if effect != "NoExecute":
                errors.append(invalid(f"{tpath}.effect", effect,
                                      "effect must be 'NoExecute' when `tolerationSeconds` "
                                      "is set"))
    return errors


def _validate_spread(value: Any, path: str) -> list[FieldError]:
    items, errors = _list(value, path)
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(items):
        cpath = f"{path}[{i}]"
        constraint, errs = _dict(item, cpath)
        errors += errs
        if constraint.get("maxSkew") is None:
            errors.append(required(f"{cpath}.maxSkew"))
        else:
            errors += _int(constraint, "maxSkew", f"{cpath}.maxSkew", minimum=1,
                           detail="must be greater than zero")
        key = constraint.get("topologyKey")
        if not key:
            errors.append(required(f"{cpath}.topologyKey", "can not be empty"))
        else:
            errors += validate_label_key(key, f"{cpath}.topologyKey")
        when = constraint.get("whenUnsatisfiable")
        errors += _enum(constraint, "whenUnsatisfiable", f"{cpath}.whenUnsatisfiable",
                        WHEN_UNSATISFIABLE, is_required=True)
        if isinstance(key, str) and isinstance(when, str):
            if (key, when) in seen:
                errors.append(duplicate(f"{cpath}.{{topologyKey, whenUnsatisfiable}}",
                                        f"{{{key}, {when}}}"))
            seen.add((key, when))
        if constraint.get("minDomains") is not None:
            errors += _int(constraint, "minDomains", f"{cpath}.minDomains", minimum=1,
                           detail="must be greater than 0")
            if when != "DoNotSchedule":
                errors.append(invalid(f"{cpath}.minDomains", constraint["minDomains"],
                                      "can only use minDomains if whenUnsatisfiable="
                                      "DoNotSchedule, not " + str(when)))
        errors += validate_label_selector(constraint.get("labelSelector"),
                                          f"{cpath}.labelSelector")
        errors += _enum(constraint, "nodeAffinityPolicy", f"{cpath}.nodeAffinityPolicy",
                        NODE_INCLUSION_POLICIES)
        errors += _enum(constraint, "nodeTaintsPolicy", f"{cpath}.nodeTaintsPolicy",
                        NODE_INCLUSION_POLICIES)
        label_keys, errs = _list(constraint.get("matchLabelKeys"), f"{cpath}.matchLabelKeys")
        errors += errs
        for j, label_key in enumerate(label_keys):
            errors += validate_label_key(label_key, f"{cpath}.matchLabelKeys[{j}]")
    return errors


POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it "
    "to be set to 1 if it was previously negative),`spec.schedulingGates` (only removals)"
)


def _validate_pod_update(obj: Obj, old: Obj) -> list[FieldError]:
    """`ValidatePodUpdate`: the spec is immutable except for a few fields."""
    spec, errors = _dict(obj.get("spec"), "spec")
    old_spec, _ = _dict(old.get("spec"), "spec")
    munged = copy.deepcopy(dict(spec))
    for key in ("containers", "initContainers"):
        new_list, old_list = munged.get(key), old_spec.get(key)
        if isinstance(new_list, list) and isinstance(old_list, list) and (
                len(new_list) == len(old_list)):
            for new_c, old_c in zip(new_list, old_list, strict=True):
                if isinstance(new_c, dict) and isinstance(old_c, Mapping):
                    if old_c.get("image") is None:
                        new_c.pop("image", None)
                    else:
                        new_c["image"] = old_c["image"]

    new_deadline, old_deadline = spec.get("activeDeadlineSeconds"), old_spec.get(
        "activeDeadlineSeconds")
    if old_deadline is not None and new_deadline is None:
        errors.append(invalid("spec.activeDeadlineSeconds", new_deadline,
                              "must not update from a positive integer to nil value"))
    elif (_is_int(old_deadline) and _is_int(new_deadline)
          and new_deadline > old_deadline):
        errors.append(invalid("spec.activeDeadlineSeconds", new_deadline,
                              "must be less than or equal to previous value"))
    _set_or_drop(munged, "activeDeadlineSeconds", old_spec)

    new_tolerations = spec.get("tolerations") or []
    for old_t in old_spec.get("tolerations") or []:
        if not any(_same_toleration(old_t, t) for t in new_tolerations):
            # Kubernetes' words, once for the first toleration missing
            errors.append(forbidden("spec.tolerations",
                                    "existing toleration can not be modified except its "
                                    "tolerationSeconds"))
            break
    _set_or_drop(munged, "tolerations", old_spec)

    old_gates = {g.get("name") for g in old_spec.get("schedulingGates") or []
                 if isinstance(g, Mapping)}
    for gate in spec.get("schedulingGates") or []:
        name = gate.get("name") if isinstance(gate, Mapping) else gate
        if not isinstance(name, str) or name not in old_gates:
            errors.append(forbidden("spec.schedulingGates",
                                    f"only deletion is allowed, but found new scheduling gate "
                                    f"{name!r}"))
    _set_or_drop(munged, "schedulingGates", old_spec)

    new_grace, old_grace = spec.get("terminationGracePeriodSeconds"), old_spec.get(
        "terminationGracePeriodSeconds")
    if _is_int(old_grace) and old_grace < 0 and new_grace == 1:
        _set_or_drop(munged, "terminationGracePeriodSeconds", old_spec)

    if munged != dict(old_spec):
        changed = sorted(k for k in set(munged) | set(old_spec)
                         if munged.get(k) != old_spec.get(k))
        errors.append(forbidden("spec", POD_UPDATE_FORBIDDEN + "; changed: " +
                                ", ".join(f"spec.{k}" for k in changed)))
    return errors


def _set_or_drop(munged: dict[str, Any], key: str, old_spec: Obj) -> None:
    if key in old_spec:
        munged[key] = copy.deepcopy(old_spec[key])
    else:
        munged.pop(key, None)


def _same_toleration(old: Any, new: Any) -> bool:
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return bool(old == new)
    fields = ("key", "operator", "value", "effect")
    return all((old.get(f) or "") == (new.get(f) or "") for f in fields)


# What an ephemeral container may not have (validateEphemeralContainers): it is never
# restarted, probed, given resources or exposed.
_EPHEMERAL_FORBIDDEN = ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe",
                        "ports", "resizePolicy", "restartPolicy")


def validate_ephemeral_containers_update(obj: Obj, old: Obj) -> list[FieldError]:
    """`ValidatePodEphemeralContainersUpdate` (the `pods/ephemeralcontainers` subresource):
    ephemeral containers may be added, never changed or removed; each new one is a
    container without ports, probes, lifecycle or resources whose name no other container
    of the pod has, and whose `targetContainerName` names one of the pod's containers."""
    spec, errors = _dict(obj.get("spec"), "spec")
    old_spec, _ = _dict(old.get("spec"), "spec")
    items, errs = _list(spec.get("ephemeralContainers"), "spec.ephemeralContainers")
    errors += errs
    before = {str(c.get("name")): c for c in old_spec.get("ephemeralContainers") or []
              if isinstance(c, Mapping)}
    now = {str(c.get("name")): c for c in items if isinstance(c, Mapping)}
    for name in before:
        if name not in now:
            errors.append(forbidden("spec.ephemeralContainers",
                                    f"existing ephemeral containers {go_value(name)} may not "
                                    "be removed"))
    targets = {str(c.get("name")) for key in ("containers", "initContainers")
               for c in old_spec.get(key) or [] if isinstance(c, Mapping)}
    names = set(targets)
    volume_names = {str(v.get("name")) for v in old_spec.get("volumes") or []
                    if isinstance(v, Mapping)}
    for i, item in enumerate(items):
        path = f"spec.ephemeralContainers[{i}]"
        known = str(item.get("name")) if isinstance(item, Mapping) else None
        if known is not None and known in before:
            if item != before[known]:
                errors.append(forbidden("spec.ephemeralContainers",
                                        f"existing ephemeral containers {go_value(known)} may "
                                        "not be changed"))
            names.add(known)
            continue
        errors += _validate_container(item, path, names, volume_names, None, init=False)
        if not isinstance(item, Mapping):
            continue
        for key in _EPHEMERAL_FORBIDDEN:
            if item.get(key) not in (None, [], {}):
                errors.append(forbidden(f"{path}.{key}",
                                        "cannot be set for an Ephemeral Container"))
        if (item.get("resources") or {}) not in ({}, {"limits": {}, "requests": {}}):
            errors.append(forbidden(f"{path}.resources",
                                    "cannot be set for an Ephemeral Container"))
        target = item.get("targetContainerName")
        if target and (not isinstance(target, str) or target not in targets):
            errors.append(not_found(f"{path}.targetContainerName", target))
    return errors


def _validate_pod(obj: Obj, old: Obj | None) -> list[FieldError]:
    errors = validate_pod_spec(obj.get("spec"), "spec")
    spec = obj.get("spec")
    if old is None and isinstance(spec, Mapping) and spec.get("ephemeralContainers"):
        errors.append(forbidden("spec.ephemeralContainers", "cannot be set on create"))
    status, errs = _dict(obj.get("status"), "status")
    errors += errs
    errors += _enum(status, "phase", "status.phase",
                    ["Pending", "Running", "Succeeded", "Failed", "Unknown"])
    if old is not None:
        errors += _validate_pod_update(obj, old)
    return errors


# --- other kinds ---------------------------------------------------------------------------


def _validate_node(obj: Obj, old: Obj | None) -> list[FieldError]:
    spec, errors = _dict(obj.get("spec"), "spec")
    taints, errs = _list(spec.get("taints"), "spec.taints")
    errors += errs
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(taints):
        tpath = f"spec.taints[{i}]"
        taint, errs = _dict(item, tpath)
        errors += errs
        key, effect = taint.get("key"), taint.get("effect")
        if not key:
            errors.append(required(f"{tpath}.key"))
        else:
            errors += validate_label_key(key, f"{tpath}.key")
        if taint.get("value"):
            errors += [invalid(f"{tpath}.value", taint["value"], p)
                       for p in label_value_problems(str(taint["value"]))]
        errors += _enum(taint, "effect", f"{tpath}.effect", TAINT_EFFECTS, is_required=True)
        if isinstance(key, str) and isinstance(effect, str):
            if (key, effect) in seen:
                errors.append(duplicate(tpath, f"{key}:{effect}"))
            seen.add((key, effect))
    unschedulable = spec.get("unschedulable")
    if unschedulable is not None and not isinstance(unschedulable, bool):
        errors.append(invalid("spec.unschedulable", unschedulable, "must be a boolean"))
    return errors


def _validate_priority_class(obj: Obj, old: Obj | None) -> list[FieldError]:
    errors: list[FieldError] = []
    meta, _ = _dict(obj.get("metadata"), "metadata")
    name = meta.get("name") or ""
    value = obj.get("value")
    if value is None:
        errors.append(required("value"))
    elif not _is_int(value):
        errors.append(invalid("value", value, "must be an integer"))
    elif not INT32_MIN <= value <= INT32_MAX:
        errors.append(invalid("value", value, f"must be between {INT32_MIN} and {INT32_MAX}"))
        value = None
    global_default = obj.get("globalDefault")
    if global_default is not None and not isinstance(global_default, bool):
        errors.append(invalid("globalDefault", global_default, "must be a boolean"))
    errors += _str(obj, "description", "description")
    errors += _enum(obj, "preemptionPolicy", "preemptionPolicy",
                    ["PreemptLowerPriority", "Never"])
    if isinstance(name, str) and name.startswith("system-"):
        problem = None
        if name not in SYSTEM_PRIORITY_CLASSES:
            problem = f"{name} is not a known system priority class"
        elif value != SYSTEM_PRIORITY_CLASSES[name]:
            problem = f"value of {name} PriorityClass must be {SYSTEM_PRIORITY_CLASSES[name]}"
        elif global_default:
            problem = f"globalDefault of {name} PriorityClass must be false"
        if problem:
            errors.append(forbidden("metadata.name", "priority class names with 'system-' "
                                                     "prefix are reserved for system use "
                                                     f"only. error: {problem}"))
    elif _is_int(value) and value > HIGHEST_USER_DEFINABLE_PRIORITY:
        errors.append(forbidden("value", "maximum allowed value of a user defined priority "
                                         f"is {HIGHEST_USER_DEFINABLE_PRIORITY}"))
    if old is not None:
        if obj.get("value") != old.get("value"):
            errors.append(forbidden("value", "may not be changed in an update."))
        errors += _immutable(obj.get("preemptionPolicy"), old.get("preemptionPolicy"),
                             "preemptionPolicy")
    return errors


def _validate_pdb(obj: Obj, old: Obj | None) -> list[FieldError]:
    spec, errors = _dict(obj.get("spec"), "spec")
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    if min_available is not None and max_unavailable is not None:
        errors.append(invalid("spec", "", "minAvailable and maxUnavailable cannot be both set"))
    elif min_available is None and max_unavailable is None:
        errors.append(required("spec.minAvailable", "one of minAvailable or maxUnavailable "
                                                    "is required"))
    if min_available is not None:
        errors += _int_or_percent(min_available, "spec.minAvailable")
    if max_unavailable is not None:
        errors += _int_or_percent(max_unavailable, "spec.maxUnavailable")
    errors += validate_label_selector(spec.get("selector"), "spec.selector")
    errors += _enum(spec, "unhealthyPodEvictionPolicy", "spec.unhealthyPodEvictionPolicy",
                    ["IfHealthyBudget", "AlwaysAllow"])
    return errors


def _validate_workload_template(spec: Obj, *, kind: str = "ReplicaSet"
                                ) -> list[FieldError]:
    """Selector and pod template shared by ReplicaSet, StatefulSet and (with its label map
    for a selector) ReplicationController."""
    errors = _int(spec, "replicas", "spec.replicas", minimum=0)
    errors += _int(spec, "minReadySeconds", "spec.minReadySeconds", minimum=0)
    selector = spec.get("selector")
    selector_errors: list[FieldError] = []
    if kind == "ReplicationController":  # ValidateNonEmptySelector, then the labels
        if not selector:
            selector_errors.append(required("spec.selector"))
        else:
            selector_errors += validate_labels(selector, "spec.selector")
        selector = {"matchLabels": selector} if not selector_errors else selector
    elif selector is None:
        selector_errors.append(required("spec.selector"))
    else:
        selector_errors += validate_label_selector(selector, "spec.selector")
        if isinstance(selector, Mapping) and not (selector.get("matchLabels")
                                                  or selector.get("matchExpressions")):
            selector_errors.append(invalid("spec.selector", selector,
                                           "empty selector is invalid for deployment"))
    errors += selector_errors
    template, errs = _dict(spec.get("template"), "spec.template")
    errors += errs
    if not template and not errs:
        errors.append(required("spec.template"))
        return errors
    errors += _validate_metadata(template, "Pod", "spec.template.metadata", namespaced=True,
                                 name_check=dns1123_subdomain_problems, top_level=False)
    labels = (template.get("metadata") or {}).get("labels")
    if not selector_errors:
        parsed = LabelSelector.from_dict(selector, path="spec.selector")
        if not parsed.empty and not parsed.matches(labels if isinstance(labels, dict) else {}):
            errors.append(invalid("spec.template.metadata.labels", labels,
                                  "`selector` does not match template `labels`"))
    errors += validate_pod_spec(template.get("spec"), "spec.template.spec")
    template_spec, _ = _dict(template.get("spec"), "spec.template.spec")
    restart = template_spec.get("restartPolicy")
    if restart is not None and restart != "Always":
        errors.append(not_supported("spec.template.spec.restartPolicy", restart, ["Always"]))
    if template_spec.get("activeDeadlineSeconds") is not None:
        errors.append(forbidden("spec.template.spec.activeDeadlineSeconds",
                                f"activeDeadlineSeconds in {kind} is not Supported"))
    return errors


def _validate_replication_controller(obj: Obj, old: Obj | None) -> list[FieldError]:
    """ValidateReplicationController: unlike a ReplicaSet's, its selector may change."""
    spec, errors = _dict(obj.get("spec"), "spec")
    return errors + _validate_workload_template(spec, kind="ReplicationController")


def _validate_replica_set(obj: Obj, old: Obj | None) -> list[FieldError]:
    spec, errors = _dict(obj.get("spec"), "spec")
    errors += _validate_workload_template(spec)
    if old is not None:
        errors += _immutable(spec.get("selector"), (old.get("spec") or {}).get("selector"),
                             "spec.selector")
    return errors


STATEFULSET_UPDATABLE = ("replicas", "ordinals", "template", "updateStrategy",
                         "revisionHistoryLimit", "persistentVolumeClaimRetentionPolicy",
                         "minReadySeconds")


def _with_claim_volumes(spec: Obj) -> Obj:
    """The spec as its pods will be: each volumeClaimTemplate a volume of the template (the
    controller adds them), so a container may mount a claim template by name."""
    claims = spec.get("volumeClaimTemplates")
    template = spec.get("template")
    if not isinstance(claims, list) or not isinstance(template, Mapping) or \
            not isinstance(template.get("spec"), Mapping):
        return spec
    volumes = template["spec"].get("volumes")
    if volumes is not None and not isinstance(volumes, list):
        return spec
    have = {v.get("name") for v in volumes or [] if isinstance(v, Mapping)}
    extra = [{"name": name, "persistentVolumeClaim": {"claimName": name}}
             for c in claims if isinstance(c, Mapping)
             and isinstance(name := (c.get("metadata") or {}).get("name"), str)
             and name not in have]
    if not extra:
        return spec
    return {**spec, "template": {**template, "spec": {**template["spec"],
                                                      "volumes": [*(volumes or []), *extra]}}}


def _validate_stateful_set(obj: Obj, old: Obj | None) -> list[FieldError]:
    spec, errors = _dict(obj.get("spec"), "spec")
    errors += _validate_workload_template(_with_claim_volumes(spec))
    errors += _str(spec, "serviceName", "spec.serviceName")
    errors += _enum(spec, "podManagementPolicy", "spec.podManagementPolicy",
                    ["OrderedReady", "Parallel"])
    errors += _int(spec, "revisionHistoryLimit", "spec.revisionHistoryLimit", minimum=0)
    strategy, errs = _dict(spec.get("updateStrategy"), "spec.updateStrategy")
    errors += errs
    errors += _enum(strategy, "type", "spec.updateStrategy.type", ["RollingUpdate", "OnDelete"])
    rolling, errs = _dict(strategy.get("rollingUpdate"), "spec.updateStrategy.rollingUpdate")
    errors += errs
    if strategy.get("type") == "OnDelete" and strategy.get("rollingUpdate") is not None:
        errors.append(invalid("spec.updateStrategy.rollingUpdate", strategy["rollingUpdate"],
                              "only allowed for updateStrategy 'RollingUpdate'"))
    errors += _int(rolling, "partition", "spec.updateStrategy.rollingUpdate.partition",
                   minimum=0)
    if rolling.get("maxUnavailable") is not None:
        max_unavailable = rolling["maxUnavailable"]
        mpath = "spec.updateStrategy.rollingUpdate.maxUnavailable"
        errors += _int_or_percent(max_unavailable, mpath)
        if max_unavailable in (0, "0%"):
            errors.append(invalid(mpath, max_unavailable, "must be greater than 0"))
    retention, errs = _dict(spec.get("persistentVolumeClaimRetentionPolicy"),
                            "spec.persistentVolumeClaimRetentionPolicy")
    errors += errs
    for key in ("whenDeleted", "whenScaled"):
        errors += _enum(retention, key, f"spec.persistentVolumeClaimRetentionPolicy.{key}",
                        ["Retain", "Delete"])
    ordinals, errs = _dict(spec.get("ordinals"), "spec.ordinals")
    errors += errs
    errors += _int(ordinals, "start", "spec.ordinals.start", minimum=0)
    if old is not None:
        old_spec, _ = _dict(old.get("spec"), "spec")
        changed = sorted(k for k in set(spec) | set(old_spec)
                         if k not in STATEFULSET_UPDATABLE and spec.get(k) != old_spec.get(k))
        if changed:
            errors.append(forbidden(
                "spec", "updates to statefulset spec for fields other than 'replicas', "
                "'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', "
                "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden; "
                "changed: " + ", ".join(f"spec.{k}" for k in changed)))
    return errors


def _validate_lease(obj: Obj, old: Obj | None) -> list[FieldError]:
    spec, errors = _dict(obj.get("spec"), "spec")
    errors += _str(spec, "holderIdentity", "spec.holderIdentity")
    errors += _int(spec, "leaseDurationSeconds", "spec.leaseDurationSeconds", minimum=1,
                   detail="must be greater than 0")
    errors += _int(spec, "leaseTransitions", "spec.leaseTransitions", minimum=0)
    for key in ("acquireTime", "renewTime"):
        errors += _str(spec, key, f"spec.{key}")
    return errors


def _validate_event(obj: Obj, old: Obj | None) -> list[FieldError]:
    involved, errors = _dict(obj.get("involvedObject"), "involvedObject")
    if obj.get("involvedObject") is None:
        errors.append(required("involvedObject"))
    elif not errors and not (involved.get("kind") or involved.get("name")):
        errors.append(required("involvedObject.name",
                               "involvedObject needs at least a kind or a name"))
    errors += _int(obj, "count", "count", minimum=0)
    for key in ("reason", "message", "type", "action", "reportingComponent",
                "reportingInstance"):
        errors += _str(obj, key, key)
    return errors


def _validate_nothing(obj: Obj, old: Obj | None) -> list[FieldError]:
    return []


ACCESS_MODES = ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"]


def _validate_pvc(obj: Obj, old: Obj | None) -> list[FieldError]:
    spec, errors = _dict(obj.get("spec"), "spec")
    modes, errs = _list(spec.get("accessModes"), "spec.accessModes")
    errors += errs
    if not modes:
        errors.append(required("spec.accessModes", "at least 1 access mode is required"))
    for i, mode in enumerate(modes):
        if mode not in ACCESS_MODES:
            errors.append(not_supported(f"spec.accessModes[{i}]", mode, ACCESS_MODES))
    if old is not None:
        for key in ("accessModes", "storageClassName", "volumeName"):
            old_value = old.get("spec", {}).get(key)
            if old_value is not None and spec.get(key) != old_value:
                errors += _immutable(spec.get(key), old_value, f"spec.{key}")
    return errors


def _validate_volume_attachment(obj: Obj, old: Obj | None) -> list[FieldError]:
    spec, errors = _dict(obj.get("spec"), "spec")
    for key in ("attacher", "nodeName"):
        if not spec.get(key):
            errors.append(required(f"spec.{key}"))
    source, errs = _dict(spec.get("source"), "spec.source")
    errors += errs
    if not source.get("persistentVolumeName"):
        errors.append(required("spec.source.persistentVolumeName"))
    if old is not None and spec != old.get("spec"):
        errors.append(forbidden("spec", "spec is immutable: a volume moves to another node "
                                        "only by deleting this attachment (detach) first"))
    return errors


FENCE_AGENTS = ["power", "network", "storage"]
FENCE_PHASES = ["Pending", "Fencing", "Fenced", "Failed", "Unfencing"]


def _validate_fence(obj: Obj, old: Obj | None) -> list[FieldError]:
    spec, errors = _dict(obj.get("spec"), "spec")
    if not spec.get("nodeName"):
        errors.append(required("spec.nodeName"))
    elif spec.get("nodeName") != obj.get("metadata", {}).get("name"):
        errors.append(invalid("spec.nodeName", spec.get("nodeName"),
                              "must equal metadata.name (one Fence per node, named after it)"))
    errors += _enum(spec, "agent", "spec.agent", FENCE_AGENTS, is_required=True)
    status, errs = _dict(obj.get("status"), "status")
    errors += errs + _enum(status, "phase", "status.phase", FENCE_PHASES)
    if old is not None:
        for key in ("nodeName", "agent"):
            if spec.get(key) != old.get("spec", {}).get(key):
                errors += _immutable(spec.get(key), old.get("spec", {}).get(key),
                                     f"spec.{key}")
    return errors


_VALIDATORS: dict[str, Callable[[Obj, Obj | None], list[FieldError]]] = {
    "Namespace": _validate_nothing,
    "Node": _validate_node,
    "Pod": _validate_pod,
    "Event": _validate_event,
    "PriorityClass": _validate_priority_class,
    "PodDisruptionBudget": _validate_pdb,
    "ReplicaSet": _validate_replica_set,
    "ReplicationController": _validate_replication_controller,
    "StatefulSet": _validate_stateful_set,
    "Lease": _validate_lease,
    "PersistentVolumeClaim": _validate_pvc,
    "VolumeAttachment": _validate_volume_attachment,
    "Fence": _validate_fence,
    "Role": rbac.validate_role,
    "ClusterRole": rbac.validate_role,
    "RoleBinding": rbac.validate_binding,
    "ClusterRoleBinding": rbac.validate_binding,
    **accountkinds.VALIDATORS,
    **limitranges.VALIDATORS,
    **quotas.VALIDATORS,
    **cronjobs.VALIDATORS,
    **autoscaling.VALIDATORS,
    **networking.VALIDATORS,
    **storagecapacity.VALIDATORS,
}


def validate(obj: Obj, *, old: Obj | None = None) -> list[FieldError]:
    """All field errors of `obj` (a create when `old` is None, else an update of `old`)."""
    kind = obj.get("kind")
    info = _KIND_INFO.get(kind) if isinstance(kind, str) else None
    if info is None:
        return [not_supported("kind", kind, sorted(_KIND_INFO))]
    errors: list[FieldError] = []
    api_version = obj.get("apiVersion")
    if api_version is not None and api_version != info.api_version:
        errors.append(not_supported("apiVersion", api_version, [info.api_version]))
    name_check = dns1123_label_problems if kind == "Namespace" else dns1123_subdomain_problems
    errors += _validate_metadata(obj, info.kind, "metadata", namespaced=info.namespaced,
                                 name_check=name_check)
    if old is not None:
        errors += _validate_metadata_update(obj, old)
    errors += _VALIDATORS[info.kind](obj, old)
    return errors
