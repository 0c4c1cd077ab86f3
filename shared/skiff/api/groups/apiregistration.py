"""The apiregistration.k8s.io/v1 group (SPEC EX8): APIServices, which register an extension
apiserver for a group/version (the aggregation layer) — their v1 defaults, validation with
kube-aggregator's messages and field paths (`pkg/apis/apiregistration/validation`), and
kubectl's columns. The apiserver's aggregator (`skiff.apiserver.aggregator`) serves what
they register.
"""

from __future__ import annotations

from typing import Any

from skiff.api.bytesfields import decode_bytes
from skiff.api.columns import age_column, meta
from skiff.api.errors import FieldError, invalid, not_supported, required
from skiff.api.fieldchecks import as_dict, as_list, is_int
from skiff.api.fielddefaults import child, set_if_none
from skiff.api.fieldschema import OBJECT_META, TOP, fields
from skiff.api.grouprules import GroupRules
from skiff.api.names import dns1035_label_problems
from skiff.api.selectors import dns1123_subdomain_problems
from skiff.api.types import Obj, ObjView

DEFAULT_SERVICE_PORT = 443
MAX_GROUP_PRIORITY = 20000
MAX_VERSION_PRIORITY = 1000
CONDITION_STATUSES = ["True", "False", "Unknown"]


def path_segment_name_problems(name: str) -> list[str]:
    """apimachinery's `IsValidPathSegmentName`: an APIService's name (`v1.` included) need
    only be usable as one URL path segment."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def ca_bundle_bytes(spec: ObjView) -> bytes:
    """`spec.caBundle` decoded (base64 in JSON); b"" when absent or not base64."""
    return decode_bytes(spec.get("caBundle"))


def _default_api_service(obj: Obj) -> None:
    """v1's defaults: a service reference's port is 443."""
    spec = child(obj, "spec")
    service = spec.get("service")
    if isinstance(service, dict):
        set_if_none(service, "port", DEFAULT_SERVICE_PORT)


def _priority(spec: ObjView, key: str, limit: int) -> list[FieldError]:
    value: Any = spec.get(key, 0)
    if is_int(value) and 0 < value <= limit:
        return []
    return [invalid(f"spec.{key}", value if value is not None else 0,
                    f"must be positive and less than {limit}")]


def _validate_spec(spec: ObjView) -> list[FieldError]:
    errors: list[FieldError] = []
    group, version = spec.get("group") or "", spec.get("version") or ""
    if not group and version != "v1":
        errors.append(required("spec.group",
                               "only v1 may have an empty group and it better be legacy kube"))
    if group:
        errors += [invalid("spec.group", group, p)
                   for p in dns1123_subdomain_problems(str(group))]
    errors += [invalid("spec.version", version, p)
               for p in dns1035_label_problems(str(version))]
    errors += _priority(spec, "groupPriorityMinimum", MAX_GROUP_PRIORITY)
    errors += _priority(spec, "versionPriority", MAX_VERSION_PRIORITY)
    insecure = spec.get("insecureSkipTLSVerify") is True
    bundle = spec.get("caBundle")
    if bundle is not None and not isinstance(bundle, str):
        errors.append(invalid("spec.caBundle", bundle, "must be a base64-encoded string"))
    elif isinstance(bundle, str) and bundle and not ca_bundle_bytes(spec):
        errors.append(invalid("spec.caBundle", bundle, "illegal base64 data"))
    service, service_errors = as_dict(spec.get("service"), "spec.service")
    errors += service_errors
    if spec.get("service") is None:
        size = len(ca_bundle_bytes(spec))
        if size:
            errors.append(invalid("spec.caBundle", f"{size} bytes",
                                  "local APIServices may not have a caBundle"))
        if insecure:
            errors.append(invalid("spec.insecureSkipTLSVerify", True,
                                  "local APIServices may not have insecureSkipTLSVerify"))
        return errors
    if not service.get("namespace"):
        errors.append(required("spec.service.namespace"))
    if not service.get("name"):
        errors.append(required("spec.service.name"))
    port = service.get("port")
    if port is not None and not (is_int(port) and 1 <= port <= 65535):
        # the v1 type's port is an int32; kube checks the range with IsValidPortNum
        errors.append(invalid("spec.service.port", port,
                              "must be between 1 and 65535, inclusive"))
    if insecure and ca_bundle_bytes(spec):
        errors.append(invalid("spec.insecureSkipTLSVerify", True,
                              "may not be true if caBundle is present"))
    return errors


def _validate_status(status: ObjView) -> list[FieldError]:
    conditions, errors = as_list(status.get("conditions"), "status.conditions")
    for i, condition in enumerate(conditions):
        value = condition.get("status") if isinstance(condition, dict) else None
        if value not in CONDITION_STATUSES:
            errors.append(not_supported(f"status.conditions[{i}].status", value,
                                        CONDITION_STATUSES))
    return errors


def _validate_api_service(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    spec, errors = as_dict(obj.get("spec"), "spec")
    name = (obj.get("metadata") or {}).get("name")
    wanted = f"{spec.get('version') or ''}.{spec.get('group') or ''}"
    if isinstance(name, str) and name and not path_segment_name_problems(name) \
            and name != wanted:
        errors.append(invalid("metadata.name", name,
                              f'must be `spec.version+"."+spec.group`: "{wanted}"'))
    errors += _validate_spec(spec)
    status, status_errors = as_dict(obj.get("status"), "status")
    return errors + status_errors + _validate_status(status)


def available_column(obj: ObjView) -> str:
    """kubectl's AVAILABLE: the Available condition's status, with its reason when not
    True (`False (FailedDiscoveryCheck)`)."""
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "Available":
            status = str(condition.get("status", "Unknown"))
            reason = condition.get("reason")
            return status if status == "True" or not reason else f"{status} ({reason})"
    return "Unknown"


def service_column(obj: ObjView) -> str:
    service = (obj.get("spec") or {}).get("service")
    if not isinstance(service, dict):
        return "Local"
    return f"{service.get('namespace', '')}/{service.get('name', '')}"


RULES = GroupRules(
    defaulters={"APIService": _default_api_service},
    validators={"APIService": _validate_api_service},
    columns={
        "APIService": [("NAME", meta("name")), ("SERVICE", service_column),
                       ("AVAILABLE", available_column), ("AGE", age_column)],
    },
    schemas={"APIService": fields(*TOP, "spec", "status", metadata=OBJECT_META)},
    initial_status={"APIService": {}},  # `status: {}` until a controller reports
)
