"""CEL `x-kubernetes-validations` for custom resources (SPEC EX3): checking a CRD's rules
when the CRD is written (`check_schema_rules`: each rule's fields, then each rule and
messageExpression compiled) and evaluating them against a custom object on every write
(`validate_rules`), with `oldSelf` for transition rules, with Kubernetes' messages and
field paths (`spec: Invalid value: "object": failed rule: self.a < self.b`).

The CEL environment itself (shared with admission matchConditions and policies) is
`skiff.api.cel`; how a schema types `self` is `skiff.api.cel.schematypes`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from skiff.api.cel import CelCompileError, CelEvalError, Program, compile_expression
from skiff.api.cel import evaluate as cel_evaluate
from skiff.api.cel.checked import undefined_fields
from skiff.api.cel.env import references
from skiff.api.cel.schematypes import (
    cel_type,
    fits,
    normalize_field_path,
    to_cel_value,
    zero_value,
)
from skiff.api.errors import (
    FieldError,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
)
from skiff.api.types import ObjView

# Re-exported: the general CEL API, for callers that import it from here.
__all__ = ["CelCompileError", "CelEvalError", "Program", "check_schema_rules",
           "compile_expression", "evaluate", "validate_rules"]

evaluate = cel_evaluate

_REASONS = ["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid",
            "FieldValueRequired"]
_NEWLINES = re.compile(r"[\n\r]+")
_MAX_MESSAGE_BYTES = 5 * 1024
# oldSelf of an `optionalOldSelf` rule is an optional: the rule runs inside a binding made
# from these two hidden variables (on a line of its own, so error positions stay the rule's)
_OLD_PRESENT = "__oldSelfPresent"
_OLD_VALUE = "__oldSelfValue"
_ROOT = "<nil>"  # Kubernetes' name for the root of a custom object in a field error


def _child(path: str, name: str) -> str:
    return name if path == _ROOT else f"{path}.{name}"


def _rules(node: ObjView) -> list[Mapping[str, Any]]:
    rules = node.get("x-kubernetes-validations")
    if not isinstance(rules, list):
        return []
    return [r if isinstance(r, Mapping) else {} for r in rules]


def _variables(node: ObjView, rule: Mapping[str, Any]) -> dict[str, str]:
    kind = cel_type(node) or "dyn"
    if rule.get("optionalOldSelf") is True:
        return {"self": kind, _OLD_PRESENT: "bool", _OLD_VALUE: kind}
    return {"self": kind, "oldSelf": kind}


def _source(rule: Mapping[str, Any], text: str) -> str:
    if rule.get("optionalOldSelf") is True:
        return (f"cel.bind(oldSelf, {_OLD_PRESENT} ? optional.of({_OLD_VALUE}) : "
                f"optional.none(),\n{text}\n)")
    return text


def _compile(node: ObjView, rule: Mapping[str, Any], text: str, *,
             check_fields: bool = False, resource_root: bool = False) -> Program:
    """The rule's program; with `check_fields` (when the CRD is written) a field the
    schema does not declare is a compile error too, as in Kubernetes' typed environment."""
    try:
        program = compile_expression(_source(rule, text), variables=_variables(node, rule))
        if check_fields:
            roots = {"self": node} if rule.get("optionalOldSelf") is True else \
                {"self": node, "oldSelf": node}
            undefined = undefined_fields(program, roots=roots, resource_root=resource_root)
            if undefined:
                raise CelCompileError(undefined)
        return program
    except CelCompileError as err:
        if rule.get("optionalOldSelf") is True:  # the binding's line is not the user's
            message = re.sub(r"<input>:(\d+):",
                             lambda m: f"<input>:{int(m.group(1)) - 1}:", str(err))
            raise CelCompileError(message) from None
        raise


# --- the CRD's rules, checked when the CRD is written -----------------------------------
def _go_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _go_rule(rule: Mapping[str, Any]) -> str:
    """The rule as Kubernetes prints it in a CRD's field error (Go's `%#v`)."""
    reason = ("(*apiextensions.FieldValueErrorReason)(nil)" if rule.get("reason") is None
              else "(*apiextensions.FieldValueErrorReason)(0xc000a1b2c0)")
    optional = ("(*bool)(nil)" if rule.get("optionalOldSelf") is None
                else "(*bool)(0xc000a1b2c8)")
    return (f"apiextensions.ValidationRule{{Rule:{_go_string(str(rule.get('rule') or ''))}, "
            f"Message:{_go_string(str(rule.get('message') or ''))}, "
            f"MessageExpression:{_go_string(str(rule.get('messageExpression') or ''))}, "
            f"Reason:{reason}, FieldPath:{_go_string(str(rule.get('fieldPath') or ''))}, "
            f"OptionalOldSelf:{optional}}}")


def _rule_invalid(path: str, rule: Mapping[str, Any], detail: str) -> FieldError:
    # Kubernetes shows the whole rule struct as the bad value: kept in the detail, since
    # FieldError prints values as JSON.
    return FieldError(path, "Invalid value", f"{_go_rule(rule)}: {detail}")


def _static_checks(node: ObjView, rule: Mapping[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    text = str(rule.get("rule") or "")
    message = rule.get("message")
    message_text = str(message or "")
    if not text.strip():
        errs.append(required(f"{path}.rule", "rule is not specified"))
    elif message_text and not message_text.strip():
        errs.append(invalid(f"{path}.message", message_text,
                            "message must be non-empty if specified"))
    elif _NEWLINES.search(message_text.strip()):
        errs.append(invalid(f"{path}.message", message_text,
                            "message must not contain line breaks"))
    elif _NEWLINES.search(text.strip()) and not message_text.strip():
        errs.append(required(f"{path}.message",
                             "message must be specified if rule contains line breaks"))
    expression = str(rule.get("messageExpression") or "")
    if expression and not expression.strip():
        errs.append(required(f"{path}.messageExpression",
                             "messageExpression must be non-empty if specified"))
    reason = rule.get("reason")
    if reason is not None and reason not in _REASONS:
        errs.append(not_supported(f"{path}.reason", reason, _REASONS))
    field_path = rule.get("fieldPath")
    if field_path is not None and field_path != "":
        field_text = str(field_path)
        if not field_text.strip():
            errs.append(invalid(f"{path}.fieldPath", field_text,
                                "fieldPath must be non-empty if specified"))
        if _NEWLINES.search(field_text):
            errs.append(invalid(f"{path}.fieldPath", field_text,
                                "fieldPath must not contain line breaks"))
        try:
            normalize_field_path(field_text, node)
        except ValueError:
            errs.append(invalid(f"{path}.fieldPath", field_text,
                                "fieldPath must be a valid path"))
    return errs


def _compile_checks(node: ObjView, rule: Mapping[str, Any], path: str,
                    uncorrelatable: str | None, resource_root: bool) -> list[FieldError]:
    errs: list[FieldError] = []
    text = str(rule.get("rule") or "")
    try:
        program = _compile(node, rule, text, check_fields=True, resource_root=resource_root)
    except CelCompileError as err:
        errs.append(_rule_invalid(f"{path}.rule", rule, f"compilation failed: {err}"))
    else:
        if program.result_type not in ("bool", "dyn"):
            errs.append(_rule_invalid(f"{path}.rule", rule,
                                      "cel expression must evaluate to a bool"))
    expression = str(rule.get("messageExpression") or "")
    if expression.strip() and not errs:  # Kubernetes compiles it only after a good rule
        try:
            message = _compile(node, {}, expression, check_fields=True,
                               resource_root=resource_root)
        except CelCompileError as err:
            errs.append(_rule_invalid(f"{path}.messageExpression", rule,
                                      f"messageExpression compilation failed: {err}"))
        else:
            if message.result_type not in ("string", "dyn"):
                errs.append(_rule_invalid(f"{path}.messageExpression", rule,
                                          "messageExpression must evaluate to a string"))
    if references(text, "oldSelf"):
        if uncorrelatable is not None:
            errs.append(invalid(f"{path}.rule", text, "oldSelf cannot be used on the "
                                f"uncorrelatable portion of the schema within {uncorrelatable}"))
    elif rule.get("optionalOldSelf") is not None:
        errs.append(invalid(f"{path}.optionalOldSelf", rule.get("optionalOldSelf"),
                            "may not be set if oldSelf is not used in rule"))
    return errs


def _check_node(node: ObjView, path: str, uncorrelatable: str | None,
                compile_rules: bool, resource_root: bool = False) -> Iterator[FieldError]:
    rules = _rules(node)
    resource_root = resource_root or bool(node.get("x-kubernetes-embedded-resource"))
    if rules:
        static: list[FieldError] = []
        for i, rule in enumerate(rules):
            static.extend(_static_checks(node, rule, f"{path}.x-kubernetes-validations[{i}]"))
        yield from static
        if compile_rules and not static:
            if cel_type(node) is None:
                yield FieldError(
                    f"{path}.x-kubernetes-validations", "Internal error",
                    "rule declared on schema that does not support validation rules type: "
                    f"'{node.get('type') or ''}' x-kubernetes-preserve-unknown-fields: "
                    f"'{'true' if node.get('x-kubernetes-preserve-unknown-fields') else 'false'}'")
            else:
                for i, rule in enumerate(rules):
                    yield from _compile_checks(
                        node, rule, f"{path}.x-kubernetes-validations[{i}]", uncorrelatable,
                        resource_root)
    extra = node.get("additionalProperties")
    if isinstance(extra, Mapping):
        yield from _check_node(extra, f"{path}.additionalProperties", uncorrelatable,
                               compile_rules)
    props = node.get("properties")
    if isinstance(props, Mapping):
        for name in sorted(props):
            if isinstance(props[name], Mapping):
                yield from _check_node(props[name], f"{path}.properties[{name}]",
                                       uncorrelatable, compile_rules)
    for keyword in ("allOf", "anyOf", "oneOf"):
        subs = node.get(keyword)
        if isinstance(subs, list):
            for i, sub in enumerate(subs):
                if isinstance(sub, Mapping):  # Kubernetes compiles no rule in these
                    yield from _check_node(sub, f"{path}.{keyword}[{i}]", uncorrelatable,
                                           False)
    if isinstance(node.get("not"), Mapping):
        yield from _check_node(node["not"], f"{path}.not", uncorrelatable, False)
    items = node.get("items")
    if isinstance(items, Mapping):
        # only the items of a list-type map correlate with their old values
        inner = uncorrelatable
        if inner is None and node.get("x-kubernetes-list-type") != "map":
            inner = path
        yield from _check_node(items, f"{path}.items", inner, compile_rules)


def check_schema_rules(schema: ObjView, *, path: str) -> list[FieldError]:
    """Check every x-kubernetes-validations rule of a CRD version's openAPIV3Schema, as
    Kubernetes does when the CRD is written: each rule's own fields (rule required,
    message, messageExpression, reason, fieldPath, optionalOldSelf), then each rule and
    messageExpression compiled. `path` is the schema's own path
    (`spec.versions[0].schema.openAPIV3Schema`); a rule that does not compile is
    `<path>.properties[spec].x-kubernetes-validations[0].rule: Invalid value:
    apiextensions.ValidationRule{...}: compilation failed: ERROR: <input>:1:6: ...`.
    Call it only for a schema with no structural errors (Kubernetes compiles none then)."""
    return list(_check_node(schema, path, None, True, True))


# --- a custom object checked against the rules, on every write --------------------------
def validate_rules(schema: ObjView, obj: ObjView, old: ObjView | None) -> list[FieldError]:
    """Evaluate every rule of the schema against obj (`self`) and, for transition rules
    (those referring to `oldSelf`), against old where an old value corresponds (an
    object's fields by name, a list-type map's items by key; never on create), as
    Kubernetes does. A rule on the object's root reports at `<nil>`, as Kubernetes
    prints it. On an update, a failing rule that does not use oldSelf is not an error
    where the value it checks is unchanged (Kubernetes' validation ratcheting), so
    tightening a CRD's rules does not lock existing objects."""
    errs: list[FieldError] = []
    _validate(schema, obj, old, _ROOT, True, False, errs)
    return errs


def _validate(node: ObjView, value: Any, old: Any, path: str, resource_root: bool,
              parent_unchanged: bool, errs: list[FieldError]) -> None:
    if value is None:
        return
    # ratcheting: unchanged when equal to its correlated old value; with none (an item of
    # an atomic list), as unchanged as the nearest parent that has one
    unchanged = (old == value) if old is not None else parent_unchanged
    _validate_expressions(node, value, old, path, resource_root, unchanged, errs)
    for sub in node.get("allOf") or []:
        if isinstance(sub, Mapping):
            _validate_expressions({**node, "x-kubernetes-validations":
                                   sub.get("x-kubernetes-validations")},
                                  value, old, path, resource_root, unchanged, errs)
    if isinstance(value, list):
        items = node.get("items")
        if isinstance(items, Mapping):
            old_items = _correlate(node, old)
            for i, item in enumerate(value):
                _validate(items, item, old_items(item), f"{path}[{i}]",
                          bool(items.get("x-kubernetes-embedded-resource")), unchanged, errs)
    elif isinstance(value, Mapping):
        old_map = old if isinstance(old, Mapping) else {}
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping):
            for key, item in value.items():
                _validate(extra, item, old_map.get(key), f"{path}[{key}]",
                          bool(extra.get("x-kubernetes-embedded-resource")), False, errs)
        props = node.get("properties")
        if isinstance(props, Mapping):
            for key, item in value.items():
                sub = props.get(key)
                if isinstance(sub, Mapping):
                    _validate(sub, item, old_map.get(key), _child(path, key),
                              bool(sub.get("x-kubernetes-embedded-resource")), False, errs)


def _correlate(node: ObjView, old: Any) -> Any:
    """item -> its old item: by the map keys of a list-type map; nothing otherwise."""
    keys = node.get("x-kubernetes-list-map-keys")
    if node.get("x-kubernetes-list-type") != "map" or not isinstance(old, list) or not keys:
        return lambda item: None

    def key_of(item: Any) -> Any:
        if not isinstance(item, Mapping):
            return None
        return tuple(json.dumps(item.get(k), sort_keys=True) for k in keys)

    by_key = {key_of(item): item for item in old if isinstance(item, Mapping)}
    return lambda item: by_key.get(key_of(item))


def _rule_string(rule: Mapping[str, Any]) -> str:
    message = str(rule.get("message") or "").strip()
    return message or str(rule.get("rule") or "").strip()


def _validate_expressions(node: ObjView, value: Any, old: Any, path: str,
                          resource_root: bool, unchanged: bool,
                          errs: list[FieldError]) -> None:
    rules = _rules(node)
    if not rules or not fits(cel_type(node) or "dyn", value):
        return
    type_name = str(node.get("type") or "")
    self_value = to_cel_value(node, value, resource_root=resource_root)
    old_value = zero_value(cel_type(node) or "dyn") if old is None else \
        to_cel_value(node, old, resource_root=resource_root)
    for rule in rules:
        text = str(rule.get("rule") or "")
        if not text.strip():
            continue
        optional_old = rule.get("optionalOldSelf") is True
        if old is None and not optional_old and references(text, "oldSelf"):
            continue  # a transition rule runs only where an old value corresponds
        try:
            program = _compile(node, rule, text)
        except CelCompileError as err:
            errs.append(invalid(path, type_name, f"rule compile error: {err}"))
            continue
        activation = _activation(rule, self_value, old_value, old is not None)
        try:
            result = cel_evaluate(program, activation)
        except CelEvalError as err:
            errs.append(invalid(path, type_name, _eval_detail(str(err), rule)))
            continue
        if result is True or (unchanged and not references(text, "oldSelf")):
            continue  # kube warns of a ratcheted failure; Skiff has no warning path here
        if result is not False:
            errs.append(invalid(path, type_name, f"'no such overload': call arguments did not "
                                f"match a supported operator, function or macro signature "
                                f"for rule: {_rule_string(rule)}"))
            continue
        errs.append(_failure(node, rule, path, type_name,
                             _activation({}, self_value, old_value, old is not None)))


def _activation(rule: Mapping[str, Any], self_value: Any, old_value: Any,
                has_old: bool) -> dict[str, Any]:
    if rule.get("optionalOldSelf") is True:
        return {"self": self_value, _OLD_PRESENT: has_old, _OLD_VALUE: old_value}
    activation = {"self": self_value}
    if has_old:
        activation["oldSelf"] = old_value
    return activation


def _eval_detail(message: str, rule: Mapping[str, Any]) -> str:
    if message.startswith("no such overload"):
        return (f"'{message}': call arguments did not match a supported operator, function "
                f"or macro signature for rule: {_rule_string(rule)}")
    return f"{message} evaluating rule: {_rule_string(rule)}"


def _failure(node: ObjView, rule: Mapping[str, Any], path: str, type_name: str,
             activation: dict[str, Any]) -> FieldError:
    where = path
    field_path = str(rule.get("fieldPath") or "")
    if field_path:
        try:
            where = _child(path, normalize_field_path(field_path, node))
        except ValueError:
            pass
    detail = _message_expression(node, rule, activation)
    if detail is None:
        message = str(rule.get("message") or "").strip()
        detail = message or f"failed rule: {_rule_string(rule)}"
    reason = rule.get("reason")
    if reason == "FieldValueForbidden":
        return forbidden(where, detail)
    if reason == "FieldValueRequired":
        return required(where, detail)
    if reason == "FieldValueDuplicate":
        return duplicate(where, type_name)
    return invalid(where, type_name, detail)


def _message_expression(node: ObjView, rule: Mapping[str, Any],
                        activation: dict[str, Any]) -> str | None:
    """The messageExpression's text; None (so the message is used) where it fails, is
    not a string, is empty, too long or has line breaks, as in Kubernetes."""
    expression = str(rule.get("messageExpression") or "")
    if not expression.strip():
        return None
    try:
        result = cel_evaluate(_compile(node, {}, expression), activation)
    except (CelCompileError, CelEvalError):
        return None
    if not isinstance(result, str):
        return None
    text = result.strip()
    if not text or len(text.encode()) > _MAX_MESSAGE_BYTES or _NEWLINES.search(text):
        return None
    return text
