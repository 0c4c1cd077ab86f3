"""Ingress, IngressClass and NetworkPolicy (networking.k8s.io/v1): stored, validated and
listed, so an application's manifests apply as they are.

Kubernetes itself only stores these: an ingress controller (nginx, Traefik …) acts on
Ingresses and the network plugin enforces NetworkPolicies. Skiff runs neither, as a cluster
without them does: Ingresses get no address and NetworkPolicies restrict nothing (the
README says so). Validation follows Kubernetes' for the fields users get wrong: an
Ingress's rules (host, path and pathType, a backend naming a service and a port by number
or name), an IngressClass's controller, and a NetworkPolicy's selectors, ports and
policyTypes.
"""

from __future__ import annotations

from typing import Any

from skiff.api.columns import age_column, meta
from skiff.api.errors import FieldError, invalid, not_supported, required
from skiff.api.fieldschema import OBJECT_META, TOP, fields
from skiff.api.grouprules import GroupRules
from skiff.api.selectors import (
    dns1123_subdomain_problems,
    qualified_name_problems,
    validate_label_selector,
)
from skiff.api.types import Obj, ObjView

PATH_TYPES = ["Exact", "ImplementationSpecific", "Prefix"]
POLICY_TYPES = ["Egress", "Ingress"]
PROTOCOLS = ["SCTP", "TCP", "UDP"]


def _backend(backend: Any, path: str) -> list[FieldError]:
    if not isinstance(backend, dict):
        return [required(path)]
    service, resource = backend.get("service"), backend.get("resource")
    if service and resource:
        return [invalid(path, "", "cannot set both service and resource backends")]
    if not service and not resource:
        return [required(path, "one backend (`service` or `resource`) must be specified")]
    if resource or not isinstance(service, dict):
        return []
    errors: list[FieldError] = []
    if not service.get("name"):
        errors.append(required(f"{path}.service.name"))
    port = service.get("port") or {}
    if port.get("name") and port.get("number"):
        errors.append(invalid(f"{path}.service.port", port,
                              "cannot set both port name & port number"))
    elif not port.get("name") and not port.get("number"):
        errors.append(required(f"{path}.service.port", "port name or number is required"))
    elif port.get("number") is not None and not 0 < int(port["number"]) < 65536:
        errors.append(invalid(f"{path}.service.port.number", port["number"],
                              "must be between 1 and 65535, inclusive"))
    return errors


def _validate_ingress(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    spec = obj.get("spec") or {}
    errors: list[FieldError] = []
    if spec.get("defaultBackend") is not None:
        errors += _backend(spec["defaultBackend"], "spec.defaultBackend")
    rules = spec.get("rules") or []
    if not rules and spec.get("defaultBackend") is None:
        errors.append(invalid("spec.rules", rules, "either `defaultBackend` or `rules` must "
                                                   "be specified"))
    for i, rule in enumerate(rules):
        path = f"spec.rules[{i}]"
        host = str(rule.get("host") or "")
        if host:
            errors += [invalid(f"{path}.host", host, p)
                       for p in dns1123_subdomain_problems(host.removeprefix("*."))]
        for j, entry in enumerate((rule.get("http") or {}).get("paths") or []):
            ppath = f"{path}.http.paths[{j}]"
            kind = entry.get("pathType")
            if not kind:
                errors.append(required(f"{ppath}.pathType", "pathType must be specified"))
            elif kind not in PATH_TYPES:
                errors.append(not_supported(f"{ppath}.pathType", kind, PATH_TYPES))
            value = str(entry.get("path") or "")
            if kind in ("Exact", "Prefix") and not value.startswith("/"):
                errors.append(invalid(f"{ppath}.path", value, "must be an absolute path"))
            errors += _backend(entry.get("backend"), f"{ppath}.backend")
    return errors


def _validate_ingress_class(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    controller = (obj.get("spec") or {}).get("controller")
    if not controller:
        return [required("spec.controller")]
    errors = [invalid("spec.controller", controller, p)
              for p in qualified_name_problems(str(controller).split("/")[0] + "/x")]
    if old is not None and (old.get("spec") or {}).get("controller") != controller:
        errors.append(invalid("spec.controller", controller, "field is immutable"))
    return errors


def _validate_network_policy(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    errors = validate_label_selector(spec.get("podSelector") or {}, "spec.podSelector")
    for i, kind in enumerate(spec.get("policyTypes") or []):
        if kind not in POLICY_TYPES:
            errors.append(not_supported(f"spec.policyTypes[{i}]", kind, POLICY_TYPES))
    for direction, peers_key in (("ingress", "from"), ("egress", "to")):
        for i, rule in enumerate(spec.get(direction) or []):
            path = f"spec.{direction}[{i}]"
            for j, port in enumerate(rule.get("ports") or []):
                protocol = port.get("protocol")
                if protocol is not None and protocol not in PROTOCOLS:
                    errors.append(not_supported(f"{path}.ports[{j}].protocol", protocol,
                                                PROTOCOLS))
            for j, peer in enumerate(rule.get(peers_key) or []):
                ppath = f"{path}.{peers_key}[{j}]"
                for key in ("podSelector", "namespaceSelector"):
                    if peer.get(key) is not None:
                        errors += validate_label_selector(peer[key], f"{ppath}.{key}")
                if peer.get("ipBlock") and (peer.get("podSelector") is not None
                                            or peer.get("namespaceSelector") is not None):
                    errors.append(invalid(ppath, "", "may not specify more than 1 peer type"))
                if not peer:
                    errors.append(required(ppath, "must specify a peer"))
    return errors


def _hosts(ing: Obj) -> str:
    hosts = [str(r.get("host")) for r in (ing.get("spec") or {}).get("rules") or []
             if r.get("host")]
    if not hosts:
        return "*"
    return ",".join(hosts[:4]) + (f" + {len(hosts) - 4} more..." if len(hosts) > 4 else "")


def _address(ing: Obj) -> str:
    lb = ((ing.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return ",".join(str(e.get("ip") or e.get("hostname") or "") for e in lb)


def _ports(ing: Obj) -> str:
    return "80, 443" if (ing.get("spec") or {}).get("tls") else "80"


def _pod_selector(np: Obj) -> str:
    selector = (np.get("spec") or {}).get("podSelector") or {}
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    parts += [f"{e.get('key')} {str(e.get('operator', '')).lower()} "
              f"({','.join(e.get('values') or [])})"
              for e in selector.get("matchExpressions") or []]
    return ",".join(parts) or "<none>"


RULES = GroupRules(
    validators={"Ingress": _validate_ingress, "IngressClass": _validate_ingress_class,
                "NetworkPolicy": _validate_network_policy},
    # kubectl's printers for the three kinds
    columns={
        "Ingress": [("NAME", meta("name")),
                    ("CLASS", lambda o: str((o.get("spec") or {}).get("ingressClassName")
                                            or "<none>")),
                    ("HOSTS", _hosts), ("ADDRESS", _address), ("PORTS", _ports),
                    ("AGE", age_column)],
        "IngressClass": [("NAME", meta("name")),
                         ("CONTROLLER", lambda o: str((o.get("spec") or {}).get("controller",
                                                                               ""))),
                         ("PARAMETERS", lambda o: "<none>"
                          if not (o.get("spec") or {}).get("parameters") else
                          str(o["spec"]["parameters"].get("kind", ""))),
                         ("AGE", age_column)],
        "NetworkPolicy": [("NAME", meta("name")), ("POD-SELECTOR", _pod_selector),
                          ("AGE", age_column)],
    },
    schemas={
        "Ingress": fields(*TOP, metadata=OBJECT_META,
                          spec=fields("ingressClassName", "defaultBackend", "tls", "rules"),
                          status=fields("loadBalancer")),
        "IngressClass": fields(*TOP, metadata=OBJECT_META,
                               spec=fields("controller", "parameters")),
        "NetworkPolicy": fields(*TOP, metadata=OBJECT_META,
                                spec=fields("podSelector", "ingress", "egress", "policyTypes")),
    },
)
