"""What a CustomResourceDefinition must be (SPEC EX1): kube-apiserver's
`apiextensions/validation` for `apiextensions.k8s.io/v1` — its name, group, names, scope,
versions (exactly one storage version, unique DNS-1035 names, a structural
`openAPIV3Schema` each), subresources, printer columns, selectable fields, conversion and
the update rules — and the v1 defaults. Field paths are Kubernetes' own, including its
internal names where it prints them (`conversion.webhookClientConfig`, `JSONPath`).
Per-version accessors live in `crdversions` and are re-exported here."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from skiff.api.apiextensions.crdschema import validate_version_schema
from skiff.api.apiextensions.crdversions import (
    printer_columns_of,
    schema_of,
    selectable_fields_of,
    served_versions,
    storage_version,
    subresources_of,
    version_entry,
)
from skiff.api.apiextensions.names import dns1035_label_detail, kind_problems
from skiff.api.apiextensions.values import too_many
from skiff.api.errors import FieldError, duplicate, forbidden, invalid, not_supported, required
from skiff.api.fieldchecks import IMMUTABLE, as_dict, as_list
from skiff.api.selectors import dns1123_subdomain_problems
from skiff.api.types import Obj, ObjView
from skiff.api.webhookclient import validate_webhook_service, validate_webhook_url

__all__ = ["default_crd", "printer_columns_of", "schema_of", "selectable_fields_of",
           "served_versions", "storage_version", "stored_versions_after_update",
           "subresources_of", "validate_crd", "version_entry"]

SCOPES = ["Cluster", "Namespaced"]
PRINTER_COLUMN_TYPES = ["boolean", "date", "integer", "number", "string"]
PRINTER_COLUMN_FORMATS = ["byte", "date", "date-time", "double", "float", "int32", "int64",
                          "password"]
CONVERSION_REVIEW_VERSIONS = ["v1", "v1beta1"]
MAX_SELECTABLE_FIELDS = 8


def default_crd(obj: Obj) -> None:
    """The v1 defaults: names.singular and names.listKind from the kind, conversion
    strategy None, a conversion service's port 443, storedVersions from the storage version.
    Defaults written inside schemas are applied to custom objects, never to the CRD."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    names = spec.get("names")
    if isinstance(names, dict) and isinstance(names.get("kind"), str):
        if not names.get("singular"):
            names["singular"] = names["kind"].lower()
        if not names.get("listKind") and names["kind"]:
            names["listKind"] = names["kind"] + "List"
    conversion = spec.get("conversion")
    if conversion is None:
        spec["conversion"] = {"strategy": "None"}
    elif isinstance(conversion, dict):
        webhook = conversion.get("webhook")
        config = webhook.get("clientConfig") if isinstance(webhook, dict) else None
        service = config.get("service") if isinstance(config, dict) else None
        if isinstance(service, dict) and service.get("port") is None:
            service["port"] = 443
    status = obj.get("status")
    if status is None or (isinstance(status, dict) and not status.get("storedVersions")):
        storage = [v.get("name") for v in spec.get("versions") or []
                   if isinstance(v, dict) and v.get("storage") is True]
        if storage:
            status = obj.setdefault("status", {}) if status is None else status
            status["storedVersions"] = storage[:1]


def validate_crd(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    """All field errors of a CRD (a create when `old` is None, else an update of `old`).
    The generic ObjectMeta rules are the caller's; this adds the CRD's name rule."""
    spec, errors = as_dict(obj.get("spec"), "spec")
    names, errs = as_dict(spec.get("names"), "spec.names")
    errors += errs
    meta, errs = as_dict(obj.get("metadata"), "metadata")
    required_name = f"{names.get('plural', '')}.{spec.get('group', '')}"
    for key in ("name", "generateName"):
        given = meta.get(key)
        if given:
            if given != required_name:
                errors.append(invalid(f"metadata.{key}", given,
                                      'must be spec.names.plural+"."+spec.group'))
            break
    errors += _validate_spec(spec, names)
    errors += _validate_api_approval(obj, old)
    if spec.get("preserveUnknownFields") is True and not (
            old is not None and (old.get("spec") or {}).get("preserveUnknownFields") is True):
        errors.append(invalid("spec.preserveUnknownFields", True, "cannot set to true, set "
                              "x-kubernetes-preserve-unknown-fields to true in "
                              "spec.versions[*].schema instead"))
    status, errs = as_dict(obj.get("status"), "status")
    errors += errs
    accepted, errs = as_dict(status.get("acceptedNames"), "status.acceptedNames")
    errors += errs + _validate_names(accepted, "status.acceptedNames")
    stored = status.get("storedVersions")
    if old is not None:
        errors += _validate_update(spec, old)
        stored = stored_versions_after_update(obj, old)
    if stored or old is not None:
        errors += _validate_stored_versions(stored or [], spec.get("versions"),
                                            "status.storedVersions")
    return errors


def stored_versions_after_update(obj: ObjView, old: ObjView) -> list[str]:
    """status.storedVersions once a spec update is applied, as kube's CRD strategy sets it:
    the old list (status is not written through the main resource) plus the new storage
    version. The apiserver's strategy should store this list."""
    old_status = old.get("status")
    stored = old_status.get("storedVersions") if isinstance(old_status, Mapping) else None
    result = [v for v in stored if isinstance(v, str)] if isinstance(stored, list) else []
    current = storage_version(obj)
    if current and current not in result:
        result.append(current)
    return result


def _validate_spec(spec: ObjView, names: ObjView) -> list[FieldError]:
    errors: list[FieldError] = []
    group = spec.get("group")
    if not group:
        errors.append(required("spec.group"))
    elif not isinstance(group, str):
        errors.append(invalid("spec.group", group, "must be a string"))
    elif problems := dns1123_subdomain_problems(group):
        errors.append(invalid("spec.group", group, ",".join(problems)))
    elif "." not in group:
        errors.append(invalid("spec.group", group, "should be a domain with at least one dot"))
    scope = spec.get("scope")
    if not scope:
        errors.append(required("spec.scope"))
    elif scope not in SCOPES:
        errors.append(not_supported("spec.scope", scope, SCOPES))
    errors += _validate_versions(spec)
    for key in ("plural", "singular", "kind", "listKind"):
        if not names.get(key):
            errors.append(required(f"spec.names.{key}"))
    errors += _validate_names(names, "spec.names")
    conversion, errs = as_dict(spec.get("conversion"), "spec.conversion")
    if spec.get("conversion") is not None:
        errors += errs + _validate_conversion(conversion, "spec.conversion")
    return errors


def _validate_versions(spec: ObjView) -> list[FieldError]:
    versions, errors = as_list(spec.get("versions"), "spec.versions")
    storage_count, seen, unique = 0, set(), True
    for i, version in enumerate(versions):
        path = f"spec.versions[{i}]"
        if not isinstance(version, Mapping):
            errors.append(invalid(path, version, "must be an object"))
            continue
        storage_count += version.get("storage") is True
        vname = version.get("name")
        if not isinstance(vname, str):
            errors.append(invalid(f"{path}.name", vname, "must be a string"))
        else:
            unique = unique and vname not in seen
            seen.add(vname)
            if detail := dns1035_label_detail(vname):
                errors.append(invalid(f"{path}.name", vname, detail))
        errors += _validate_version(version, path)
    if not unique:
        errors.append(invalid("spec.versions", versions, "must contain unique version names"))
    if storage_count != 1:
        errors.append(invalid("spec.versions", versions,
                              "must have exactly one version marked as storage version"))
    return errors


def _validate_version(version: ObjView, path: str) -> list[FieldError]:
    errors = _deprecation_errors(version, path)
    subresources, errs = as_dict(version.get("subresources"), f"{path}.subresources")
    errors += errs
    container, errs = as_dict(version.get("schema"), f"{path}.schema")
    errors += errs
    schema = container.get("openAPIV3Schema")
    schema_path = f"{path}.schema.openAPIV3Schema"
    if schema is None:
        errors.append(required(schema_path))
    else:
        status_enabled = subresources.get("status") is not None
        schema_errors = validate_version_schema(schema, schema_path,
                                                status_enabled=status_enabled)
        errors += schema_errors
        if not schema_errors and isinstance(schema, Mapping):
            # CEL's runtime is loaded on first use: most processes never run a rule
            from skiff.api.apiextensions import cel
            errors += cel.check_schema_rules(schema, path=schema_path)
    errors += _validate_subresources(subresources, f"{path}.subresources")
    columns, errs = as_list(version.get("additionalPrinterColumns"),
                            f"{path}.additionalPrinterColumns")
    errors += errs
    for i, column in enumerate(columns):
        errors += _validate_column(column, f"{path}.additionalPrinterColumns[{i}]")
    fields, errs = as_list(version.get("selectableFields"), f"{path}.selectableFields")
    errors += errs
    if fields:
        if not isinstance(schema, Mapping):
            errors.append(invalid(f"{path}.selectableFields", "", "may only be set when "
                                  "`version.schema.openAPIV3Schema` is not included"))
        else:
            errors += _validate_selectable_fields(fields, schema, f"{path}.selectableFields")
    return errors


def _deprecation_errors(version: ObjView, path: str) -> list[FieldError]:
    warning = version.get("deprecationWarning")
    if warning is None:
        return []
    where = f"{path}.deprecationWarning"
    if version.get("deprecated") is not True:
        return [invalid(where, warning, "can only be set for deprecated versions")]
    if not isinstance(warning, str):
        return [invalid(where, warning, "must be a string")]
    problems = []
    if len(warning.encode()) > 256:
        problems.append("must be <= 256 characters long")
    if not warning:
        problems.append("must not be an empty string")
    for i, char in enumerate(warning):
        if unicodedata.category(char).startswith("C"):
            problems.append("must only contain printable UTF-8 characters; control character "
                            f"found at index {len(warning[:i].encode())}")
            break
    return [invalid(where, warning, p) for p in problems]


def _validate_names(names: ObjView, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    for key in ("plural", "singular"):
        value = names.get(key)
        if isinstance(value, str) and value and (detail := dns1035_label_detail(value)):
            errors.append(invalid(f"{path}.{key}", value, detail))
        elif value is not None and not isinstance(value, str):
            errors.append(invalid(f"{path}.{key}", value, "must be a string"))
    for key in ("kind", "listKind"):
        value = names.get(key)
        if isinstance(value, str) and value:
            errors += [invalid(f"{path}.{key}", value, p) for p in kind_problems(value)]
        elif value is not None and not isinstance(value, str):
            errors.append(invalid(f"{path}.{key}", value, "must be a string"))
    for key in ("shortNames", "categories"):
        values, errs = as_list(names.get(key), f"{path}.{key}")
        errors += errs
        for i, value in enumerate(values):
            detail = dns1035_label_detail(value) if isinstance(value, str) else "must be a string"
            if detail:
                errors.append(invalid(f"{path}.{key}[{i}]", value, detail))
    kind = names.get("kind")
    if kind and kind == names.get("listKind"):
        errors.append(invalid(f"{path}.listKind", kind, "kind and listKind may not be the same"))
    return errors


def _simple_json_path(value: Any, path: str) -> list[FieldError]:
    if not isinstance(value, str):
        return [invalid(path, value, "must be a string")]
    if not value:
        return [invalid(path, value, "must not be empty")]
    if not value.startswith("."):
        return [invalid(path, value, "must be a simple json path starting with .")]
    return []


def _validate_subresources(subresources: ObjView, path: str) -> list[FieldError]:
    scale = subresources.get("scale")
    if scale is None:
        return []
    if not isinstance(scale, Mapping):
        return [invalid(f"{path}.scale", scale, "must be an object")]
    errors: list[FieldError] = []
    for key, under in (("specReplicasPath", ".spec."), ("statusReplicasPath", ".status.")):
        where, value = f"{path}.scale.{key}", scale.get(key)
        if not value:
            errors.append(required(where))
        elif errs := _simple_json_path(value, where):
            errors += errs
        elif not value.startswith(under):
            errors.append(invalid(where, value, f"should be a json path under {under[:-1]}"))
    selector = scale.get("labelSelectorPath")
    if selector:
        where = f"{path}.scale.labelSelectorPath"
        if errs := _simple_json_path(selector, where):
            errors += errs
        elif not selector.startswith((".spec.", ".status.")):
            errors.append(invalid(where, selector,
                                  "should be a json path under either .spec or .status"))
    return errors


def _validate_column(column: Any, path: str) -> list[FieldError]:
    if not isinstance(column, Mapping):
        return [invalid(path, column, "must be an object")]
    errors: list[FieldError] = []
    if not column.get("name"):
        errors.append(required(f"{path}.name"))
    kind, types = column.get("type"), ",".join(PRINTER_COLUMN_TYPES)
    if not kind:
        errors.append(required(f"{path}.type", f"must be one of {types}"))
    elif kind not in PRINTER_COLUMN_TYPES:
        errors.append(invalid(f"{path}.type", kind, f"must be one of {types}"))
    fmt = column.get("format")
    if fmt and fmt not in PRINTER_COLUMN_FORMATS:
        errors.append(invalid(f"{path}.format", fmt,
                              f"must be one of {','.join(PRINTER_COLUMN_FORMATS)}"))
    json_path = column.get("jsonPath")
    if not json_path:
        errors.append(required(f"{path}.JSONPath"))
    else:
        errors += _simple_json_path(json_path, f"{path}.JSONPath")
    return errors


def _resolve_field(schema: ObjView, json_path: str) -> tuple[ObjView | None, str]:
    """The schema a selectable field's `.a.b` path names, or None and why not."""
    if not json_path.startswith(".") or "[" in json_path:
        return None, "must be a simple path of dot-separated field names starting with '.'"
    node: ObjView | None = schema
    for step in json_path[1:].split("."):
        properties = node.get("properties") if node is not None else None
        sub = properties.get(step) if isinstance(properties, Mapping) else None
        if not isinstance(sub, Mapping):
            return None, f"does not refer to a valid field: {json_path}"
        node = sub
    return node, ""


def _validate_selectable_fields(fields: list[Any], schema: ObjView,
                                path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, entry in enumerate(fields):
        where = f"{path}[{i}].jsonPath"
        json_path = entry.get("jsonPath") if isinstance(entry, Mapping) else None
        if not json_path or not isinstance(json_path, str):
            errors.append(required(where))
            continue
        found, why = _resolve_field(schema, json_path)
        if found is None:
            errors.append(invalid(where, json_path, f"is an invalid path: {why}"))
            continue
        if json_path.split(".")[1] == "metadata":
            errors.append(invalid(where, json_path, "must not point to fields in metadata"))
        if found.get("type") not in ("string", "boolean", "integer"):
            errors.append(invalid(where, json_path, "must point to a field of type string, "
                                  "boolean or integer. Enum string fields and strings with "
                                  "formats are allowed."))
        if json_path in seen:
            errors.append(duplicate(where, json_path))
        seen.add(json_path)
    if len(seen) > MAX_SELECTABLE_FIELDS:
        errors.append(too_many(path, len(seen), MAX_SELECTABLE_FIELDS))
    return errors


def _validate_conversion(conversion: ObjView, path: str) -> list[FieldError]:
    strategy = conversion.get("strategy")
    errors: list[FieldError] = []
    if not strategy:
        errors.append(required(f"{path}.strategy"))
    elif strategy not in ("None", "Webhook"):
        errors.append(not_supported(f"{path}.strategy", strategy, ["None", "Webhook"]))
    webhook, errs = as_dict(conversion.get("webhook"), f"{path}.webhook")
    errors += errs
    config, review_versions = webhook.get("clientConfig"), webhook.get("conversionReviewVersions")
    if strategy != "Webhook":
        if config is not None:
            errors.append(forbidden(f"{path}.webhookClientConfig",
                                    "should not be set when strategy is not set to Webhook"))
        if review_versions:
            errors.append(forbidden(f"{path}.conversionReviewVersions",
                                    "should not be set when strategy is not set to Webhook"))
        return errors
    if not isinstance(config, Mapping):
        errors.append(required(f"{path}.webhookClientConfig",
                               "required when strategy is set to Webhook"))
    else:
        errors += _validate_client_config(config, f"{path}.webhookClientConfig")
    errors += _validate_review_versions(review_versions, f"{path}.conversionReviewVersions")
    return errors


def _validate_client_config(config: ObjView, path: str) -> list[FieldError]:
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        return [required(path, "exactly one of url or service is required")]
    if url is not None:
        return validate_webhook_url(url, f"{path}.url")
    svc, errors = as_dict(service, f"{path}.service")
    return errors + validate_webhook_service(svc, f"{path}.service")


def _validate_review_versions(versions: Any, path: str) -> list[FieldError]:
    if not versions:
        return [required(path)]
    if not isinstance(versions, list):
        return [invalid(path, versions, "must be a list of strings")]
    errors: list[FieldError] = []
    seen: set[str] = set()
    for i, version in enumerate(versions):
        if version in seen:
            errors.append(invalid(f"{path}[{i}]", version, "duplicate version"))
            continue
        seen.add(version)
        text = version if isinstance(version, str) else str(version)
        errors += [invalid(f"{path}[{i}]", version, p)
                   for p in dns1035_label_detail(text).split(",") if p]
    if not seen & set(CONVERSION_REVIEW_VERSIONS):
        errors.append(invalid(path, versions, "must include at least one of "
                                              f"{', '.join(CONVERSION_REVIEW_VERSIONS)}"))
    return errors


API_APPROVED = "api-approved.kubernetes.io"
_APPROVAL_HELP = "see https://github.com/kubernetes/enhancements/pull/1111"


def _approval_state(crd: ObjView) -> str:
    annotations = (crd.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(API_APPROVED) if isinstance(annotations, Mapping) else None
    if not value:
        return "missing"
    if isinstance(value, str) and value.startswith("unapproved"):
        return "bypassed"
    parts = urlsplit(value) if isinstance(value, str) else None
    return "approved" if parts is not None and parts.scheme and parts.netloc else "invalid"


def _validate_api_approval(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    """CRDs in the community's groups (`*.k8s.io`, `*.kubernetes.io`) name their approval."""
    group = str((obj.get("spec") or {}).get("group") or "")
    if not any(group == g or group.endswith("." + g) for g in ("k8s.io", "kubernetes.io")):
        return []
    state = _approval_state(obj)
    if (old is not None and _approval_state(old) == state) or state in ("approved", "bypassed"):
        return []
    path = f"metadata.annotations[{API_APPROVED}]"
    if state == "missing":
        return [required(path, f'protected groups must have approval annotation "{API_APPROVED}"'
                               f", {_APPROVAL_HELP}")]
    value = (obj.get("metadata") or {}).get("annotations", {}).get(API_APPROVED)
    return [invalid(path, value, f'protected groups must have approval annotation '
                                 f'"{API_APPROVED}" with either a URL or a reason starting with '
                                 f'"unapproved", {_APPROVAL_HELP}')]


def _is_established(crd: ObjView) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(isinstance(c, Mapping) and c.get("type") == "Established"
               and c.get("status") == "True" for c in conditions)


def _validate_update(spec: ObjView, old: ObjView) -> list[FieldError]:
    old_spec = as_dict(old.get("spec"), "spec")[0]
    names = as_dict(spec.get("names"), "spec.names")[0]
    old_names = as_dict(old_spec.get("names"), "spec.names")[0]
    pairs = [("spec.group", spec.get("group"), old_spec.get("group")),
             ("spec.names.plural", names.get("plural"), old_names.get("plural"))]
    if _is_established(old):
        pairs += [("spec.scope", spec.get("scope"), old_spec.get("scope")),
                  ("spec.names.kind", names.get("kind"), old_names.get("kind"))]
    return [invalid(path, new, IMMUTABLE) for path, new, was in pairs if new != was]


def _validate_stored_versions(stored: Any, versions: Any, path: str) -> list[FieldError]:
    if not isinstance(stored, list) or not stored:
        return [invalid(path, stored if isinstance(stored, list) else [],
                        "must have at least one stored version")]
    errors: list[FieldError] = []
    remaining = {v: i for i, v in enumerate(stored)}
    for version in versions if isinstance(versions, list) else []:
        if not isinstance(version, Mapping):
            continue
        vname = version.get("name")
        if version.get("storage") is True and vname not in remaining:
            errors.append(invalid(path, stored, f"must have the storage version {vname}"))
        remaining.pop(vname, None)
    for vname, i in sorted(remaining.items(), key=lambda item: item[1]):
        errors.append(invalid(f"{path}[{i}]", vname, (
            f"missing from spec.versions; {vname} was previously a storage version, and must "
            f"remain in spec.versions until a storage migration ensures no data remains "
            f"persisted in {vname} and removes {vname} from status.storedVersions")))
    return errors
