"""`/openapi/v2` in protobuf (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`),
the encoding kubectl asks for first (SPEC AX5).

kubectl 1.32 reads the v2 document for `kubectl explain --output=plaintext-openapiv2` and,
when a kind's v3 document gives no strategic-merge metadata, for client-side apply/diff
patches. The body is gnostic's `openapi.v2.Document` message. As for the request bodies in
`endpoints.protobuf`, no maintained package ships its Python bindings, so Skiff lists the
field names and numbers of gnostic's public `OpenAPIv2.proto` in a table below (only the
messages and fields a Kubernetes document uses), builds descriptors from it, and fills the
messages from the JSON document (`openapi.v2_document`) with the maintained `protobuf`
runtime. Vendor extensions (`x-kubernetes-*`), defaults and enums are `Any` messages holding
YAML text; JSON is YAML, so they carry the value's JSON.
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory
from google.protobuf.descriptor import FieldDescriptor

MEDIA_TYPE = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
_PACKAGE = "openapi.v2"

# message -> fields as (proto name, number, type); "[]" marks a repeated field. A oneof of
# gnostic (AdditionalPropertiesItem, ParametersItem, ...) is listed as plain fields: exactly
# one of them is ever set, which is the same bytes on the wire.
_PARAM_COMMON = [("required", 1, "bool"), ("in", 2, "string"), ("description", 3, "string"),
                 ("name", 4, "string")]
_MESSAGES: dict[str, list[tuple[str, int, str]]] = {
    "Any": [("yaml", 2, "string")],
    "NamedAny": [("name", 1, "string"), ("value", 2, "Any")],
    "Info": [("title", 1, "string"), ("version", 2, "string"), ("description", 3, "string"),
             ("vendor_extension", 7, "[]NamedAny")],
    "Document": [("swagger", 1, "string"), ("info", 2, "Info"), ("host", 3, "string"),
                 ("base_path", 4, "string"), ("schemes", 5, "[]string"),
                 ("consumes", 6, "[]string"), ("produces", 7, "[]string"),
                 ("paths", 8, "Paths"), ("definitions", 9, "Definitions"),
                 ("vendor_extension", 16, "[]NamedAny")],
    "Definitions": [("additional_properties", 1, "[]NamedSchema")],
    "Properties": [("additional_properties", 1, "[]NamedSchema")],
    "NamedSchema": [("name", 1, "string"), ("value", 2, "Schema")],
    "TypeItem": [("value", 1, "[]string")],
    "ItemsItem": [("schema", 1, "[]Schema")],
    "AdditionalPropertiesItem": [("schema", 1, "Schema"), ("boolean", 2, "bool")],
    "Schema": [("_ref", 1, "string"), ("format", 2, "string"), ("title", 3, "string"),
               ("description", 4, "string"), ("default", 5, "Any"),
               ("multiple_of", 6, "double"), ("maximum", 7, "double"),
               ("exclusive_maximum", 8, "bool"), ("minimum", 9, "double"),
               ("exclusive_minimum", 10, "bool"), ("max_length", 11, "int64"),
               ("min_length", 12, "int64"), ("pattern", 13, "string"),
               ("max_items", 14, "int64"), ("min_items", 15, "int64"),
               ("unique_items", 16, "bool"), ("max_properties", 17, "int64"),
               ("min_properties", 18, "int64"), ("required", 19, "[]string"),
               ("enum", 20, "[]Any"), ("additional_properties", 21, "AdditionalPropertiesItem"),
               ("type", 22, "TypeItem"), ("items", 23, "ItemsItem"),
               ("all_of", 24, "[]Schema"), ("properties", 25, "Properties"),
               ("discriminator", 26, "string"), ("read_only", 27, "bool"),
               ("example", 30, "Any"), ("vendor_extension", 31, "[]NamedAny")],
    "Paths": [("vendor_extension", 1, "[]NamedAny"), ("path", 2, "[]NamedPathItem")],
    "NamedPathItem": [("name", 1, "string"), ("value", 2, "PathItem")],
    "PathItem": [("_ref", 1, "string"), ("get", 2, "Operation"), ("put", 3, "Operation"),
                 ("post", 4, "Operation"), ("delete", 5, "Operation"),
                 ("options", 6, "Operation"), ("head", 7, "Operation"),
                 ("patch", 8, "Operation"), ("parameters", 9, "[]ParametersItem"),
                 ("vendor_extension", 10, "[]NamedAny")],
    "Operation": [("tags", 1, "[]string"), ("summary", 2, "string"),
                  ("description", 3, "string"), ("operation_id", 5, "string"),
                  ("produces", 6, "[]string"), ("consumes", 7, "[]string"),
                  ("parameters", 8, "[]ParametersItem"), ("responses", 9, "Responses"),
                  ("schemes", 10, "[]string"), ("deprecated", 11, "bool"),
                  ("vendor_extension", 13, "[]NamedAny")],
    "ParametersItem": [("parameter", 1, "Parameter"), ("json_reference", 2, "JsonReference")],
    "JsonReference": [("_ref", 1, "string"), ("description", 2, "string")],
    "Parameter": [("body_parameter", 1, "BodyParameter"),
                  ("non_body_parameter", 2, "NonBodyParameter")],
    "BodyParameter": [("description", 1, "string"), ("name", 2, "string"),
                      ("in", 3, "string"), ("required", 4, "bool"), ("schema", 5, "Schema"),
                      ("vendor_extension", 6, "[]NamedAny")],
    "NonBodyParameter": [("query_parameter_sub_schema", 3, "QueryParameterSubSchema"),
                         ("path_parameter_sub_schema", 4, "PathParameterSubSchema")],
    "QueryParameterSubSchema": [*_PARAM_COMMON, ("allow_empty_value", 5, "bool"),
                                ("type", 6, "string"), ("format", 7, "string"),
                                ("collection_format", 9, "string"),
                                ("unique_items", 20, "bool"),
                                ("vendor_extension", 23, "[]NamedAny")],
    "PathParameterSubSchema": [*_PARAM_COMMON, ("type", 5, "string"), ("format", 6, "string"),
                               ("collection_format", 8, "string"),
                               ("unique_items", 19, "bool"),
                               ("vendor_extension", 22, "[]NamedAny")],
    "Responses": [("response_code", 1, "[]NamedResponseValue"),
                  ("vendor_extension", 2, "[]NamedAny")],
    "NamedResponseValue": [("name", 1, "string"), ("value", 2, "ResponseValue")],
    "ResponseValue": [("response", 1, "Response"), ("json_reference", 2, "JsonReference")],
    "Response": [("description", 1, "string"), ("schema", 2, "SchemaItem"),
                 ("vendor_extension", 5, "[]NamedAny")],
    "SchemaItem": [("schema", 1, "Schema")],
}

_SCALARS = {"string": FieldDescriptor.TYPE_STRING, "int64": FieldDescriptor.TYPE_INT64,
            "bool": FieldDescriptor.TYPE_BOOL, "double": FieldDescriptor.TYPE_DOUBLE}


def _build_pool() -> descriptor_pool.DescriptorPool:
    file = descriptor_pb2.FileDescriptorProto(name="skiff_openapiv2.proto",
                                              package=_PACKAGE, syntax="proto3")
    for name, fields in _MESSAGES.items():
        msg = file.message_type.add(name=name)
        for field_name, number, type_name in fields:
            f = msg.field.add(name=field_name, number=number)
            repeated = type_name.startswith("[]")
            type_name = type_name.removeprefix("[]")
            f.label = (FieldDescriptor.LABEL_REPEATED if repeated
                       else FieldDescriptor.LABEL_OPTIONAL)
            if type_name in _SCALARS:
                f.type = _SCALARS[type_name]
            else:
                f.type = FieldDescriptor.TYPE_MESSAGE
                f.type_name = f".{_PACKAGE}.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return pool


_POOL = _build_pool()
_CLASSES = {name: message_factory.GetMessageClass(
    _POOL.FindMessageTypeByName(f"{_PACKAGE}.{name}")) for name in _MESSAGES}


def _new(name: str) -> message.Message:
    return _CLASSES[name]()


def _json_key(field_name: str) -> str:
    """`operation_id` -> `operationId`, `_ref` -> `$ref`."""
    if field_name == "_ref":
        return "$ref"
    head, *rest = field_name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _any(value: Any) -> message.Message:
    out = _new("Any")
    setattr(out, "yaml", json.dumps(value, separators=(",", ":")))  # noqa: B010
    return out


def _named(kind: str, items: dict[str, Any]) -> list[message.Message]:
    """A JSON object as gnostic's repeated `Named<kind>` (name/value pairs, in order)."""
    out = []
    for key, value in items.items():
        named = _new(f"Named{kind}")
        setattr(named, "name", key)  # noqa: B010
        getattr(named, "value").CopyFrom(_convert(kind, value))  # noqa: B009
        out.append(named)
    return out


def _extensions(obj: dict[str, Any]) -> list[message.Message]:
    return _named("Any", {k: v for k, v in obj.items() if k.startswith("x-")})


def _convert(name: str, value: Any) -> message.Message:
    """One JSON value of the document as the gnostic message `name`."""
    if name == "Any":
        return _any(value)
    special = _SPECIAL.get(name)
    if special is not None:
        return special(value)
    msg = _new(name)
    if not isinstance(value, dict):
        return msg
    for field in msg.DESCRIPTOR.fields:
        if field.name == "vendor_extension":
            getattr(msg, field.name).extend(_extensions(value))
            continue
        key = _json_key(field.name)
        if key not in value or value[key] is None:
            continue
        _set(msg, field, value[key])
    return msg


def _set(msg: message.Message, field: FieldDescriptor, value: Any) -> None:
    target = getattr(msg, field.name)
    repeated = _repeated(field)
    if field.message_type is None:
        if repeated:
            target.extend(value if isinstance(value, list) else [value])
        elif field.type == FieldDescriptor.TYPE_DOUBLE:
            setattr(msg, field.name, float(value))
        else:
            setattr(msg, field.name, value)
        return
    kind = field.message_type.name
    if repeated:
        target.extend(_convert(kind, v) for v in value)
    else:
        target.CopyFrom(_convert(kind, value))


def _repeated(field: FieldDescriptor) -> bool:
    flag = getattr(field, "is_repeated", None)  # protobuf >= 5.29; `label` before
    if flag is not None:
        return bool(flag)
    return bool(field.label == FieldDescriptor.LABEL_REPEATED)


def _schema_map(kind: str) -> Any:
    def convert(value: Any) -> message.Message:
        msg = _new(kind)
        getattr(msg, "additional_properties").extend(_named("Schema", value or {}))  # noqa: B009
        return msg
    return convert


def _type_item(value: Any) -> message.Message:
    msg = _new("TypeItem")
    getattr(msg, "value").extend(value if isinstance(value, list) else [value])  # noqa: B009
    return msg


def _items_item(value: Any) -> message.Message:
    msg = _new("ItemsItem")
    schemas = value if isinstance(value, list) else [value]
    getattr(msg, "schema").extend(_convert("Schema", s) for s in schemas)  # noqa: B009
    return msg


def _additional_properties(value: Any) -> message.Message:
    msg = _new("AdditionalPropertiesItem")
    if isinstance(value, bool):
        setattr(msg, "boolean", value)  # noqa: B010
    else:
        getattr(msg, "schema").CopyFrom(_convert("Schema", value))  # noqa: B009
    return msg


def _paths(value: Any) -> message.Message:
    msg = _new("Paths")
    getattr(msg, "vendor_extension").extend(_extensions(value))  # noqa: B009
    getattr(msg, "path").extend(_named("PathItem", {  # noqa: B009
        k: v for k, v in value.items() if not k.startswith("x-")}))
    return msg


def _responses(value: Any) -> message.Message:
    msg = _new("Responses")
    getattr(msg, "vendor_extension").extend(_extensions(value))  # noqa: B009
    getattr(msg, "response_code").extend(_named("ResponseValue", {  # noqa: B009
        k: v for k, v in value.items() if not k.startswith("x-")}))
    return msg


def _reference_or(kind: str, field: str) -> Any:
    def convert(value: Any) -> message.Message:
        msg = _new(f"{kind}")
        if isinstance(value, dict) and "$ref" in value:
            getattr(msg, "json_reference").CopyFrom(  # noqa: B009
                _convert("JsonReference", value))
        else:
            getattr(msg, field).CopyFrom(_convert(_FIELD_KIND[field], value))
        return msg
    return convert


def _parameter(value: Any) -> message.Message:
    msg = _new("Parameter")
    where = value.get("in") if isinstance(value, dict) else None
    if where == "body":
        getattr(msg, "body_parameter").CopyFrom(_convert("BodyParameter", value))  # noqa: B009
        return msg
    non_body = getattr(msg, "non_body_parameter")  # noqa: B009
    sub = {"path": "path_parameter_sub_schema"}.get(str(where), "query_parameter_sub_schema")
    getattr(non_body, sub).CopyFrom(_convert(_FIELD_KIND[sub], value))
    return msg


def _schema_item(value: Any) -> message.Message:
    msg = _new("SchemaItem")
    getattr(msg, "schema").CopyFrom(_convert("Schema", value))  # noqa: B009
    return msg


_FIELD_KIND = {"parameter": "Parameter", "response": "Response",
               "query_parameter_sub_schema": "QueryParameterSubSchema",
               "path_parameter_sub_schema": "PathParameterSubSchema"}

_SPECIAL: dict[str, Any] = {
    "Definitions": _schema_map("Definitions"),
    "Properties": _schema_map("Properties"),
    "TypeItem": _type_item,
    "ItemsItem": _items_item,
    "AdditionalPropertiesItem": _additional_properties,
    "Paths": _paths,
    "Responses": _responses,
    "ParametersItem": _reference_or("ParametersItem", "parameter"),
    "ResponseValue": _reference_or("ResponseValue", "response"),
    "Parameter": _parameter,
    "SchemaItem": _schema_item,
}


def encode(document: dict[str, Any]) -> bytes:
    """The JSON OpenAPI v2 document as gnostic's `Document` message."""
    return bytes(_convert("Document", document).SerializeToString(deterministic=True))


def decode(body: bytes) -> message.Message:
    """A `Document` message, for tests and tools that read one back."""
    doc = _new("Document")
    doc.ParseFromString(body)
    return doc
