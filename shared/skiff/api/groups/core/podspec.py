"""`ValidatePodSpec` (pkg/apis/core/validation, SPEC PS2, LC7): containers, ports, env,
resources, volume mounts, probes and lifecycle handlers, tolerations, topology spread and DNS.

Pods, every workload's template and a CronJob's job template are checked with
`validate_pod_spec`, with `path` naming where the spec sits.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from skiff.api import volumepaths
from skiff.api.errors import FieldError, duplicate, forbidden, invalid, not_supported, required
from skiff.api.fieldchecks import (
    MAX_GRACE_SECONDS,
    NameCheck,
    as_dict,
    as_list,
    enum_field,
    iana_svc_name_problems,
    int_field,
    is_int,
    name_field,
    port_field,
    str_field,
    string_list,
)
from skiff.api.quantity import parse_quantity
from skiff.api.selectors import (
    dns1123_label_problems,
    dns1123_subdomain_problems,
    label_value_problems,
    qualified_name_problems,
    validate_label_key,
    validate_label_selector,
    validate_labels,
)
from skiff.api.types import ObjView

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
    spec, errors = as_dict(spec_value, path)
    if errors:
        return errors
    volumes, errs = as_list(spec.get("volumes"), f"{path}.volumes")
    errors += errs
    volume_names: set[str] = set()
    for i, volume in enumerate(volumes):
        vpath = f"{path}.volumes[{i}]"
        vol, errs = as_dict(volume, vpath)
        errors += errs
        vname = vol.get("name")
        if not vname:
            errors.append(required(f"{vpath}.name"))
            continue
        errors += name_field(vname, f"{vpath}.name", dns1123_label_problems)
        errors += volumepaths.validate_volume_source(vol, vpath)
        if isinstance(vname, str):
            if vname in volume_names:
                errors.append(duplicate(f"{vpath}.name", vname))
            volume_names.add(vname)

    grace = spec.get("terminationGracePeriodSeconds")
    errors += int_field(spec, "terminationGracePeriodSeconds",
                   f"{path}.terminationGracePeriodSeconds", minimum=0,
                   maximum=MAX_GRACE_SECONDS)
    pod_grace = grace if is_int(grace) and grace >= 0 else None

    containers, errs = as_list(spec.get("containers"), f"{path}.containers")
    errors += errs
    if not containers and not errs:
        errors.append(required(f"{path}.containers"))
    init_containers, errs = as_list(spec.get("initContainers"), f"{path}.initContainers")
    errors += errs
    names: set[str] = set()
    for i, container in enumerate(init_containers):
        errors += validate_container(container, f"{path}.initContainers[{i}]", names,
                                     volume_names, pod_grace, init=True)
    for i, container in enumerate(containers):
        errors += validate_container(container, f"{path}.containers[{i}]", names,
                                     volume_names, pod_grace, init=False)

    errors += enum_field(spec, "restartPolicy", f"{path}.restartPolicy", RESTART_POLICIES)
    errors += enum_field(spec, "dnsPolicy", f"{path}.dnsPolicy", DNS_POLICIES)
    errors += _dns_config(spec, f"{path}.dnsConfig")
    errors += int_field(spec, "activeDeadlineSeconds", f"{path}.activeDeadlineSeconds", minimum=1,
                        detail="must be between 1 and 2147483647, inclusive")
    errors += validate_labels(spec.get("nodeSelector"), f"{path}.nodeSelector")
    for key, check in (("nodeName", dns1123_subdomain_problems),
                       ("serviceAccountName", dns1123_subdomain_problems),
                       ("priorityClassName", dns1123_subdomain_problems),
                       ("schedulerName", dns1123_subdomain_problems),
                       ("hostname", dns1123_label_problems),
                       ("subdomain", dns1123_label_problems)):
        if spec.get(key):
            errors += name_field(spec[key], f"{path}.{key}", check)
    errors += _validate_tolerations(spec.get("tolerations"), f"{path}.tolerations")
    errors += _validate_spread(spec.get("topologySpreadConstraints"),
                               f"{path}.topologySpreadConstraints")
    errors += _validate_unique_names(spec.get("schedulingGates"), f"{path}.schedulingGates",
                                     "name", qualified_name_problems)
    gates, errs = as_list(spec.get("readinessGates"), f"{path}.readinessGates")
    errors += errs
    for i, gate in enumerate(gates):
        gpath = f"{path}.readinessGates[{i}].conditionType"
        gate_obj, errs = as_dict(gate, f"{path}.readinessGates[{i}]")
        errors += errs
        if not gate_obj.get("conditionType"):
            errors.append(required(gpath))
        else:
            errors += name_field(gate_obj["conditionType"], gpath, qualified_name_problems)
    for key in ("hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace",
                "automountServiceAccountToken", "enableServiceLinks", "setHostnameAsFQDN",
                "hostUsers"):
        value = spec.get(key)
        if value is not None and not isinstance(value, bool):
            errors.append(invalid(f"{path}.{key}", value, "must be a boolean"))
    return errors


def _validate_unique_names(value: Any, path: str, key: str,
                           check: NameCheck) -> list[FieldError]:
    items, errors = as_list(value, path)
    seen: set[str] = set()
    for i, item in enumerate(items):
        ipath = f"{path}[{i}]"
        item_obj, errs = as_dict(item, ipath)
        errors += errs
        name = item_obj.get(key)
        if not name:
            errors.append(required(f"{ipath}.{key}"))
            continue
        errors += name_field(name, f"{ipath}.{key}", check)
        if isinstance(name, str):
            if name in seen:
                errors.append(duplicate(f"{ipath}.{key}", name))
            seen.add(name)
    return errors


MAX_DNS_NAMESERVERS, MAX_DNS_SEARCH_PATHS, MAX_DNS_SEARCH_LIST_CHARS = 3, 32, 2048


def _dns_config(spec: ObjView, path: str) -> list[FieldError]:
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


def validate_container(value: Any, path: str, names: set[str], volume_names: set[str],
                       pod_grace: int | None, *, init: bool) -> list[FieldError]:
    container, errors = as_dict(value, path)
    if errors:
        return errors
    name = container.get("name")
    if not name:
        errors.append(required(f"{path}.name"))
    else:
        errors += name_field(name, f"{path}.name", dns1123_label_problems)
        if isinstance(name, str):
            if name in names:
                errors.append(duplicate(f"{path}.name", name))
            names.add(name)
    if not container.get("image") and not container.get("command"):
        errors.append(required(f"{path}.image", "a container needs an image or a command "
                                                "(Skiff runs `command` + `args`)"))
    errors += str_field(container, "image", f"{path}.image")
    errors += string_list(container.get("command"), f"{path}.command")
    errors += string_list(container.get("args"), f"{path}.args")
    errors += str_field(container, "workingDir", f"{path}.workingDir")
    errors += enum_field(container, "imagePullPolicy", f"{path}.imagePullPolicy", PULL_POLICIES)
    errors += enum_field(container, "terminationMessagePolicy", f"{path}.terminationMessagePolicy",
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
    lifecycle, errs = as_dict(container.get("lifecycle"), f"{path}.lifecycle")
    errors += errs
    for hook in ("postStart", "preStop"):
        if lifecycle.get(hook) is not None:
            errors += _validate_handler(lifecycle[hook], f"{path}.lifecycle.{hook}",
                                        LIFECYCLE_HANDLERS, pod_grace)
    return errors


def _validate_ports(value: Any, path: str) -> list[FieldError]:
    ports, errors = as_list(value, path)
    seen_names: set[str] = set()
    for i, port_value in enumerate(ports):
        ppath = f"{path}[{i}]"
        port, errs = as_dict(port_value, ppath)
        errors += errs
        errors += port_field(port.get("containerPort"), f"{ppath}.containerPort", allow_name=False)
        if port.get("hostPort") not in (None, 0):
            errors += port_field(port.get("hostPort"), f"{ppath}.hostPort", allow_name=False)
        errors += enum_field(port, "protocol", f"{ppath}.protocol", PROTOCOLS)
        pname = port.get("name")
        if pname:
            errors += name_field(pname, f"{ppath}.name", iana_svc_name_problems)
            if isinstance(pname, str):
                if pname in seen_names:
                    errors.append(duplicate(f"{ppath}.name", pname))
                seen_names.add(pname)
    return errors


def _validate_env(value: Any, path: str) -> list[FieldError]:
    items, errors = as_list(value, path)
    for i, item in enumerate(items):
        epath = f"{path}[{i}]"
        env, errs = as_dict(item, epath)
        errors += errs
        name = env.get("name")
        if not name:
            errors.append(required(f"{epath}.name"))
        elif not isinstance(name, str) or "=" in name or not name.isprintable():
            errors.append(invalid(f"{epath}.name", name, "a valid environment variable name "
                                                         "must consist only of printable "
                                                         "ASCII characters other than '='"))
        errors += str_field(env, "value", f"{epath}.value")
        if env.get("value") and env.get("valueFrom") is not None:
            errors.append(invalid(f"{epath}.valueFrom", "", "may not be specified when "
                                                            "`value` is not empty"))
    return errors


def _validate_resources(value: Any, path: str) -> list[FieldError]:
    resources, errors = as_dict(value, path)
    parsed: dict[str, dict[str, Any]] = {}
    for part in ("limits", "requests"):
        amounts, errs = as_dict(resources.get(part), f"{path}.{part}")
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
    mounts, errors = as_list(value, path)
    seen_paths: set[str] = set()
    for i, item in enumerate(mounts):
        mpath = f"{path}[{i}]"
        mount, errs = as_dict(item, mpath)
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
    handler, errors = as_dict(value, path)
    if errors:
        return errors
    present = [h for h in handlers if handler.get(h) is not None]
    if not present:
        return [required(path, "must specify a handler type")]
    for extra in present[1:]:
        errors.append(forbidden(f"{path}.{extra}", "may not specify more than 1 handler type"))
    for kind in present:
        hpath = f"{path}.{kind}"
        body, errs = as_dict(handler[kind], hpath)
        errors += errs
        if errs:
            continue
        if kind == "exec":
            if not body.get("command"):
                errors.append(required(f"{hpath}.command"))
            else:
                errors += string_list(body.get("command"), f"{hpath}.command")
        elif kind == "httpGet":
            errors += port_field(body.get("port"), f"{hpath}.port", allow_name=True)
            errors += enum_field(body, "scheme", f"{hpath}.scheme", ["HTTP", "HTTPS"])
            errors += str_field(body, "path", f"{hpath}.path")
            headers, errs = as_list(body.get("httpHeaders"), f"{hpath}.httpHeaders")
            errors += errs
            for j, header in enumerate(headers):
                if not isinstance(header, Mapping) or not header.get("name"):
                    errors.append(required(f"{hpath}.httpHeaders[{j}].name"))
        elif kind == "tcpSocket":
            errors += port_field(body.get("port"), f"{hpath}.port", allow_name=True)
        elif kind == "grpc":
            errors += port_field(body.get("port"), f"{hpath}.port", allow_name=False)
            errors += str_field(body, "service", f"{hpath}.service")
        elif kind == "sleep":
            seconds = body.get("seconds")
            spath = f"{hpath}.seconds"
            if seconds is None:
                errors.append(required(spath))
            elif not is_int(seconds):
                errors.append(invalid(spath, seconds, "must be an integer"))
            elif seconds < 0 or (pod_grace is not None and seconds > pod_grace):
                limit = "" if pod_grace is None else (
                    f" and at most terminationGracePeriodSeconds ({pod_grace})")
                errors.append(invalid(spath, seconds, f"must be non-negative{limit}"))
    return errors


def _validate_probe(value: Any, path: str, which: str) -> list[FieldError]:
    probe, errors = as_dict(value, path)
    if errors:
        return errors
    errors += _validate_handler(probe, path, PROBE_HANDLERS, None)
    errors += int_field(probe, "initialDelaySeconds", f"{path}.initialDelaySeconds", minimum=0)
    for key in ("periodSeconds", "timeoutSeconds", "successThreshold", "failureThreshold"):
        errors += int_field(probe, key, f"{path}.{key}", minimum=1)
    success = probe.get("successThreshold")
    if which in ("livenessProbe", "startupProbe") and is_int(success) and success != 1:
        errors.append(invalid(f"{path}.successThreshold", success, "must be 1"))
    if probe.get("terminationGracePeriodSeconds") is not None:
        tpath = f"{path}.terminationGracePeriodSeconds"
        if which == "readinessProbe":
            errors.append(invalid(tpath, probe["terminationGracePeriodSeconds"],
                                  "must not be set for readinessProbes"))
        else:
            errors += int_field(probe, "terminationGracePeriodSeconds", tpath, minimum=1,
                                maximum=MAX_GRACE_SECONDS, detail="must be greater than 0")
    return errors


def _validate_tolerations(value: Any, path: str) -> list[FieldError]:
    items, errors = as_list(value, path)
    for i, item in enumerate(items):
        tpath = f"{path}[{i}]"
        toleration, errs = as_dict(item, tpath)
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
            errors += int_field(toleration, "tolerationSeconds", f"{tpath}.tolerationSeconds")
            if effect != "NoExecute":
                errors.append(invalid(f"{tpath}.effect", effect,
                                      "effect must be 'NoExecute' when `tolerationSeconds` "
                                      "is set"))
    return errors


def _validate_spread(value: Any, path: str) -> list[FieldError]:
    items, errors = as_list(value, path)
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(items):
        cpath = f"{path}[{i}]"
        constraint, errs = as_dict(item, cpath)
        errors += errs
        if constraint.get("maxSkew") is None:
            errors.append(required(f"{cpath}.maxSkew"))
        else:
            errors += int_field(constraint, "maxSkew", f"{cpath}.maxSkew", minimum=1,
                                detail="must be greater than zero")
        key = constraint.get("topologyKey")
        if not key:
            errors.append(required(f"{cpath}.topologyKey", "can not be empty"))
        else:
            errors += validate_label_key(key, f"{cpath}.topologyKey")
        when = constraint.get("whenUnsatisfiable")
        errors += enum_field(constraint, "whenUnsatisfiable", f"{cpath}.whenUnsatisfiable",
                             WHEN_UNSATISFIABLE, is_required=True)
        if isinstance(key, str) and isinstance(when, str):
            if (key, when) in seen:
                errors.append(duplicate(f"{cpath}.{{topologyKey, whenUnsatisfiable}}",
                                        f"{{{key}, {when}}}"))
            seen.add((key, when))
        if constraint.get("minDomains") is not None:
            errors += int_field(constraint, "minDomains", f"{cpath}.minDomains", minimum=1,
                                detail="must be greater than 0")
            if when != "DoNotSchedule":
                errors.append(invalid(f"{cpath}.minDomains", constraint["minDomains"],
                                      "can only use minDomains if whenUnsatisfiable="
                                      "DoNotSchedule, not " + str(when)))
        errors += validate_label_selector(constraint.get("labelSelector"),
                                          f"{cpath}.labelSelector")
        errors += enum_field(constraint, "nodeAffinityPolicy", f"{cpath}.nodeAffinityPolicy",
                             NODE_INCLUSION_POLICIES)
        errors += enum_field(constraint, "nodeTaintsPolicy", f"{cpath}.nodeTaintsPolicy",
                             NODE_INCLUSION_POLICIES)
        label_keys, errs = as_list(constraint.get("matchLabelKeys"), f"{cpath}.matchLabelKeys")
        errors += errs
        for j, label_key in enumerate(label_keys):
            errors += validate_label_key(label_key, f"{cpath}.matchLabelKeys[{j}]")
    return errors

