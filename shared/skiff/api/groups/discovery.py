"""The discovery.k8s.io/v1 group: EndpointSlices — defaults (port protocols), validation,
kubectl's columns and known fields."""

from __future__ import annotations

from skiff.api.columns import age_column, meta
from skiff.api.errors import FieldError, required
from skiff.api.fieldchecks import as_dict, as_list, enum_field, immutable
from skiff.api.fieldschema import OBJECT_META, TOP, fields
from skiff.api.grouprules import GroupRules
from skiff.api.groups.core.services import default_port_protocols
from skiff.api.types import Obj, ObjView


def _validate_endpoint_slice(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    errors = enum_field(obj, "addressType", "addressType", ["IPv4", "IPv6", "FQDN"],
                        is_required=True)
    endpoints, errs = as_list(obj.get("endpoints"), "endpoints")
    errors += errs
    for i, endpoint in enumerate(endpoints):
        ep, errs = as_dict(endpoint, f"endpoints[{i}]")
        errors += errs
        addresses, errs = as_list(ep.get("addresses"), f"endpoints[{i}].addresses")
        errors += errs
        if not addresses:
            errors.append(required(f"endpoints[{i}].addresses"))
    if old is not None:
        errors += immutable(obj.get("addressType"), old.get("addressType"),
                                        "addressType")
    return errors


def _slice_ports(es: Obj) -> str:
    ports = [str(p.get("port")) for p in es.get("ports") or [] if p.get("port") is not None]
    return ",".join(ports) or "<unset>"


def _slice_endpoints(es: Obj) -> str:
    addresses = [a for e in es.get("endpoints") or [] for a in e.get("addresses") or []]
    if not addresses:
        return "<none>"
    shown = ",".join(addresses[:3])
    return shown + (f" + {len(addresses) - 3} more..." if len(addresses) > 3 else "")


RULES = GroupRules(
    defaulters={"EndpointSlice": default_port_protocols},
    validators={"EndpointSlice": _validate_endpoint_slice},
    columns={
        "EndpointSlice": [
            ("NAME", meta("name")),
            ("ADDRESSTYPE", lambda o: str(o.get("addressType", ""))),
            ("PORTS", _slice_ports), ("ENDPOINTS", _slice_endpoints), ("AGE", age_column)],
    },
    schemas={
        "EndpointSlice": fields(
            *TOP, "addressType", "endpoints", "ports", metadata=OBJECT_META),
    },
)
