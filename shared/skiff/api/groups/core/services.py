"""Services and Endpoints (core/v1): defaults (protocol, targetPort, the ClusterIP family
fields), validation (ports, node ports, addresses), kubectl's columns and known fields."""

from __future__ import annotations

from typing import Any

from skiff.api.columns import age_column, meta, selector_text, spec_of
from skiff.api.errors import FieldError, duplicate, forbidden, invalid, required
from skiff.api.fieldchecks import as_dict, as_list, enum_field, int_field, is_ip, port_field
from skiff.api.fielddefaults import ensure_child, set_if_none
from skiff.api.fieldschema import CONDITIONS, OBJECT_META, TOP, ListOf, fields
from skiff.api.grouprules import GroupRules
from skiff.api.selectors import validate_labels
from skiff.api.types import Obj, ObjView


def _default_service(obj: Obj) -> None:
    spec = ensure_child(obj, "spec")
    set_if_none(spec, "type", "ClusterIP")
    set_if_none(spec, "sessionAffinity", "None")
    set_if_none(spec, "internalTrafficPolicy", "Cluster")
    set_if_none(spec, "ipFamilyPolicy", "SingleStack")
    set_if_none(spec, "ipFamilies", ["IPv4"])
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            set_if_none(port, "protocol", "TCP")
            if port.get("targetPort") is None and port.get("port") is not None:
                port["targetPort"] = port["port"]
    ensure_child(obj, "status").setdefault("loadBalancer", {})


def default_port_protocols(obj: Obj) -> None:
    """Each of `obj["ports"]` gets `protocol: TCP` (EndpointSlices, Endpoints subsets)."""
    for port in obj.get("ports") or []:
        if isinstance(port, dict):
            set_if_none(port, "protocol", "TCP")


def _default_endpoints(obj: Obj) -> None:
    for subset in obj.get("subsets") or []:
        if isinstance(subset, dict):
            default_port_protocols(subset)


def _validate_service(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    spec, errors = as_dict(obj.get("spec"), "spec")
    errors += enum_field(spec, "type", "spec.type",
                         ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"])
    errors += enum_field(spec, "sessionAffinity", "spec.sessionAffinity",
                         ["None", "ClientIP"])
    ports, errs = as_list(spec.get("ports"), "spec.ports")
    errors += errs
    if not ports and spec.get("type") != "ExternalName" and spec.get("clusterIP") != "None":
        errors.append(required("spec.ports"))
    names: set[str] = set()
    for i, port in enumerate(ports):
        ppath = f"spec.ports[{i}]"
        port_obj, errs = as_dict(port, ppath)
        errors += errs
        if len(ports) > 1 and not port_obj.get("name"):
            errors.append(required(f"{ppath}.name"))
        name = port_obj.get("name")
        if isinstance(name, str) and name:
            if name in names:
                errors.append(duplicate(f"{ppath}.name", name))
            names.add(name)
        if port_obj.get("port") is None:
            errors.append(required(f"{ppath}.port"))
        else:
            errors += port_field(port_obj["port"], f"{ppath}.port", allow_name=False)
        if port_obj.get("targetPort") is not None:
            errors += port_field(port_obj["targetPort"], f"{ppath}.targetPort",
                                 allow_name=True)
        errors += enum_field(port_obj, "protocol", f"{ppath}.protocol",
                             ["TCP", "UDP", "SCTP"])
    errors += _validate_node_ports(spec, ports)
    errors += validate_labels(spec.get("selector"), "spec.selector")
    return errors


def _validate_node_ports(spec: ObjView, ports: list[Any]) -> list[FieldError]:
    """ValidateService's node port rules: none on a ClusterIP Service, and no node port
    twice for one protocol (the range and whether it is free are the allocator's)."""
    errors: list[FieldError] = []
    seen: set[tuple[str, int]] = set()
    for i, port in enumerate(ports):
        number = port.get("nodePort") if isinstance(port, dict) else None
        if not isinstance(number, int) or isinstance(number, bool) or number == 0:
            continue
        path = f"spec.ports[{i}].nodePort"
        if (spec.get("type") or "ClusterIP") == "ClusterIP":
            errors.append(forbidden(path, "may not be used when `type` is 'ClusterIP'"))
        key = (str(port.get("protocol") or "TCP"), number)
        if key in seen:
            errors.append(duplicate(path, number))
        seen.add(key)
    return errors


def _validate_endpoints(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    """ValidateEndpoints: every address an IP, every port in range with a protocol, and
    the ports of a subset named when there are several."""
    subsets, errors = as_list(obj.get("subsets"), "subsets")
    for i, raw in enumerate(subsets):
        subset, errs = as_dict(raw, f"subsets[{i}]")
        errors += errs
        for field in ("addresses", "notReadyAddresses"):
            addresses, errs = as_list(subset.get(field), f"subsets[{i}].{field}")
            errors += errs
            for j, raw_address in enumerate(addresses):
                path = f"subsets[{i}].{field}[{j}]"
                address, errs = as_dict(raw_address, path)
                errors += errs
                ip = address.get("ip")
                if not ip:
                    errors.append(required(f"{path}.ip"))
                elif not is_ip(ip):
                    errors.append(invalid(f"{path}.ip", ip, "must be a valid IP address"))
        ports, errs = as_list(subset.get("ports"), f"subsets[{i}].ports")
        errors += errs
        for j, raw_port in enumerate(ports):
            path = f"subsets[{i}].ports[{j}]"
            port, errs = as_dict(raw_port, path)
            errors += errs
            if port.get("port") is None:
                errors.append(required(f"{path}.port"))
            errors += int_field(port, "port", f"{path}.port", minimum=1, maximum=65535)
            errors += enum_field(port, "protocol", f"{path}.protocol",
                                 ["TCP", "UDP", "SCTP"], is_required=True)
            if len(ports) > 1 and not port.get("name"):
                errors.append(required(f"{path}.name"))
    return errors


def _service_ports(svc: Obj) -> str:
    parts = []
    for p in spec_of(svc).get("ports") or []:
        text = f"{p.get('port')}"
        if p.get("nodePort"):
            text += f":{p['nodePort']}"
        parts.append(f"{text}/{p.get('protocol', 'TCP')}")
    return ",".join(parts) or "<none>"


def _endpoints_column(ep: Obj) -> str:
    """kubectl's formatEndpoints: `ip:port` for each ready address and port, three at most."""
    shown: list[str] = []
    total = 0
    for subset in ep.get("subsets") or []:
        ports = [p.get("port") for p in subset.get("ports") or []]
        for address in subset.get("addresses") or []:
            for port in ports or [None]:
                total += 1
                if len(shown) < 3:
                    ip = address.get("ip", "")
                    shown.append(ip if port is None else f"{ip}:{port}")
    if not shown:
        return "<none>"
    return ",".join(shown) + (f" + {total - 3} more..." if total > 3 else "")


RULES = GroupRules(
    defaulters={"Service": _default_service, "Endpoints": _default_endpoints},
    validators={"Service": _validate_service, "Endpoints": _validate_endpoints},
    columns={
        "Service": [
            ("NAME", meta("name")),
            ("TYPE", lambda o: str(spec_of(o).get("type", "ClusterIP"))),
            ("CLUSTER-IP", lambda o: str(spec_of(o).get("clusterIP") or "<none>")),
            ("EXTERNAL-IP", lambda o: ",".join(spec_of(o).get("externalIPs") or []) or "<none>"),
            ("PORT(S)", _service_ports), ("AGE", age_column)],
        "Endpoints": [
            ("NAME", meta("name")), ("ENDPOINTS", _endpoints_column),
            ("AGE", age_column)],
    },
    wide={
        "Service": [("SELECTOR", lambda o: selector_text(spec_of(o).get("selector")))],
    },
    schemas={
        "Service": fields(
            *TOP, metadata=OBJECT_META,
            spec=fields(
                "selector", "clusterIP", "clusterIPs", "type", "externalIPs", "sessionAffinity",
                "loadBalancerIP", "loadBalancerSourceRanges", "externalName",
                "externalTrafficPolicy", "healthCheckNodePort", "publishNotReadyAddresses",
                "sessionAffinityConfig", "ipFamilies", "ipFamilyPolicy",
                "allocateLoadBalancerNodePorts", "loadBalancerClass", "internalTrafficPolicy",
                "trafficDistribution",
                ports=ListOf(fields("name", "protocol", "appProtocol", "port",
                                                  "targetPort", "nodePort"))),
            status=fields("loadBalancer", conditions=CONDITIONS),
        ),
        "Endpoints": fields(*TOP, metadata=OBJECT_META, subsets=ListOf(
            fields("addresses", "notReadyAddresses", "ports"))),
    },
)
