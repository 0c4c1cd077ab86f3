"""ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding (SPEC EX7): their v1
defaults and validation (`pkg/apis/admissionregistration/validation`), with Kubernetes'
messages and field paths. Every CEL expression of a policy is compiled here, at write time,
with the variables Kubernetes declares for it, so a policy that cannot compile is refused
with `compilation failed: ...` at the expression's path. `skiff.api.groups.
admissionregistration` registers both kinds; the apiserver's ValidatingAdmissionPolicy
plugin (`skiff.apiserver.admission.policy`) evaluates the objects this lets through.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from skiff.api.errors import (
    ApiError,
    FieldError,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
)
from skiff.api.fieldchecks import as_dict, as_list
from skiff.api.fielddefaults import set_if_none
from skiff.api.groups.webhookconfigs import (
    FAILURE_POLICIES,
    MATCH_POLICIES,
    _validate_match_conditions,
    validate_rule,
)
from skiff.api.names import dns1035_label_problems
from skiff.api.selectors import (
    LabelSelector,
    dns1123_subdomain_problems,
    qualified_name_problems,
    validate_label_selector,
)
from skiff.api.types import Obj, ObjView

VALIDATION_ACTIONS = ["Audit", "Deny", "Warn"]
PARAMETER_NOT_FOUND_ACTIONS = ["Deny", "Allow"]
VALIDATION_REASONS = ["Forbidden", "Invalid", "RequestEntityTooLarge"]
MAX_AUDIT_ANNOTATIONS = 20
MAX_VALUE_EXPRESSION_LENGTH = 5 * 1024

_CEL_IDENTIFIER = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")
_CEL_RESERVED = frozenset({"true", "false", "null", "in", "as", "break", "const", "continue",
                           "else", "for", "function", "if", "import", "let", "loop",
                           "package", "namespace", "return", "var", "void", "while"})
_CEL_TYPE_NAMES = {"null": "null_type"}  # skiff.api.cel's result type -> cel-go's name


# -- the CEL variables of each kind of expression (Kubernetes' OptionalVariableDeclarations)

def expression_variables(*, params: bool, authorizer: bool, composition: bool
                         ) -> tuple[str, ...]:
    """The top-level names a policy expression is compiled with: `object`, `oldObject`,
    `request`, `namespaceObject`, and `params` (the policy has a paramKind), `authorizer`
    (declared as Kubernetes declares it; Skiff gives it no value, so an expression that
    calls it fails to evaluate and failurePolicy decides), `variables` (the policy has
    some)."""
    names = ["object", "oldObject", "request", "namespaceObject"]
    if params:
        names.append("params")
    if authorizer:
        names.append("authorizer")
    if composition:
        names.append("variables")
    return tuple(names)


def compile_problem(expression: str, *, variables: tuple[str, ...],
                    returns: tuple[str, ...] = (),
                    variable_types: Mapping[str, str] | None = None) -> str | None:
    """Why `expression` cannot be used (cel-go's `compilation failed: ...`, or the type it
    evaluates to is not one of `returns`), or None. `variable_types` are the types of the
    policy's `variables.<name>` (Kubernetes types each by its expression)."""
    from skiff.api import cel  # CEL's native runtime loads only when a policy is written
    try:
        program = cel.compile_expression(expression, variables=variables)
    except cel.CelCompileError as err:
        return f"compilation failed: {err}"
    result_type = program.result_type
    if returns and result_type not in returns and variable_types:
        result_type = typed_result(expression, variables=variables,
                                   variable_types=variable_types) or result_type
    if returns and result_type not in returns:
        shown = [_CEL_TYPE_NAMES.get(r, r) for r in returns]
        wanted = shown[0] if len(shown) == 1 else "[" + " ".join(shown) + "]"
        one_of = "" if len(returns) == 1 else "one of "
        return f"must evaluate to {one_of}{wanted} but got {result_type}"
    return None


# `variables.<name>` in an expression (the names it reads)
VARIABLE_REFERENCE = re.compile(r"(?<![\w.])variables\s*\.\s*([_a-zA-Z][_a-zA-Z0-9]*)")
_SCALARS = frozenset({"bool", "int", "uint", "double", "string", "bytes", "timestamp",
                      "duration"})


def typed_result(expression: str, *, variables: tuple[str, ...],
                 variable_types: Mapping[str, str]) -> str | None:
    """The result type of `expression` with each `variables.<name>` read as a value of
    its variable's type (None when that does not compile)."""
    from skiff.api import cel
    names = {name: "dyn" for name in variables if name != "variables"}
    names["variables"] = "map"

    def rename(match: re.Match[str]) -> str:
        names[f"__variables_{match[1]}"] = variable_types.get(match[1], "dyn")
        return f"__variables_{match[1]}"
    rewritten = VARIABLE_REFERENCE.sub(rename, expression)
    try:
        return cel.compile_expression(rewritten, variables=names).result_type
    except (cel.CelCompileError, ValueError):
        return None


def variable_types(variables: list[tuple[str, str]], *, names: tuple[str, ...]
                   ) -> dict[str, str]:
    """The type of each (name, expression) variable, in order (each may use the ones
    before it): a scalar CEL type, or dyn."""
    types: dict[str, str] = {}
    for name, expression in variables:
        found = typed_result(expression, variables=names, variable_types=types)
        types[name] = found if found in _SCALARS else "dyn"
    return types


# -- defaults ------------------------------------------------------------------------------

def _default_match_resources(match: Any) -> None:
    if not isinstance(match, dict):
        return
    set_if_none(match, "matchPolicy", "Equivalent")
    set_if_none(match, "namespaceSelector", {})
    set_if_none(match, "objectSelector", {})
    for key in ("resourceRules", "excludeResourceRules"):
        for rule in match.get(key) or []:
            if isinstance(rule, dict):
                set_if_none(rule, "scope", "*")


def default_policy(obj: Obj) -> None:
    """`SetObjectDefaults_ValidatingAdmissionPolicy`: failurePolicy Fail, matchConstraints'
    matchPolicy Equivalent, empty selectors, rules' scope `*`."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    set_if_none(spec, "failurePolicy", "Fail")
    _default_match_resources(spec.get("matchConstraints"))


def default_binding(obj: Obj) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict):
        _default_match_resources(spec.get("matchResources"))


# -- the policy ----------------------------------------------------------------------------

def _group_version_problems(api_version: str, path: str) -> list[FieldError]:
    if api_version in ("", "/"):
        group, version = "", ""
    elif api_version.count("/") > 1:
        return [invalid(path, api_version, f"unexpected GroupVersion string: {api_version}")]
    else:
        group, _, version = api_version.rpartition("/")
    errors = []
    if group:
        problems = dns1123_subdomain_problems(group)
        if problems:
            errors.append(invalid(path, group, ",".join(problems)))
    if not version:
        errors.append(invalid(path, api_version, "version must be specified"))
    else:
        problems = dns1035_label_problems(version)
        if problems:
            errors.append(invalid(path, version, ",".join(problems)))
    return errors


def _validate_param_kind(kind: ObjView, path: str) -> list[FieldError]:
    api_version, name = kind.get("apiVersion"), kind.get("kind")
    errors = []
    if not api_version:
        errors.append(required(f"{path}.apiVersion"))
    else:
        errors += _group_version_problems(str(api_version), f"{path}.apiVersion")
    if not name:
        errors.append(required(f"{path}.kind"))
    else:
        problems = dns1035_label_problems(str(name).lower())
        if problems:
            errors.append(invalid(f"{path}.kind", name, "may have mixed case, but should "
                                  "otherwise match: " + ",".join(problems)))
    return errors


def _path_segment_problems(name: str) -> list[str]:
    """`path.ValidatePathSegmentName`."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def validate_match_resources(match: ObjView, path: str) -> list[FieldError]:
    """`validateMatchResources` (matchConstraints of a policy, matchResources of a
    binding)."""
    errors = []
    policy = match.get("matchPolicy")
    if policy is None:
        errors.append(required(f"{path}.matchPolicy"))
    elif policy not in MATCH_POLICIES:
        errors.append(not_supported(f"{path}.matchPolicy", policy, sorted(MATCH_POLICIES)))
    for key in ("namespaceSelector", "objectSelector"):
        if match.get(key) is None:
            errors.append(required(f"{path}.{key}"))
        else:
            errors += validate_label_selector(match[key], f"{path}.{key}")
    for key in ("resourceRules", "excludeResourceRules"):
        rules, errs = as_list(match.get(key), f"{path}.{key}")
        errors += errs
        for i, raw in enumerate(rules):
            rule, errs = as_dict(raw, f"{path}.{key}[{i}]")
            errors += errs + _validate_named_rule(rule, f"{path}.{key}[{i}]")
    return errors


def _validate_named_rule(rule: ObjView, path: str) -> list[FieldError]:
    errors = []
    names, errs = as_list(rule.get("resourceNames"), f"{path}.resourceNames")
    errors += errs
    seen: set[str] = set()
    for i, name in enumerate(names):
        errors += [invalid(f"{path}.resourceNames[{i}]", name, p)
                   for p in _path_segment_problems(str(name))]
        if name in seen:
            errors.append(duplicate(f"{path}.resourceNames[{i}]", name))
        seen.add(str(name))
    return errors + validate_rule(rule, path)


def _validate_variable(var: ObjView, path: str, names: tuple[str, ...]) -> list[FieldError]:
    errors = []
    name, expression = var.get("name"), var.get("expression")
    if not isinstance(name, str) or not name.strip():
        errors.append(required(f"{path}.name", "name is not specified"))
    elif not _CEL_IDENTIFIER.match(name) or name in _CEL_RESERVED:
        errors.append(invalid(f"{path}.name", name, "name is not a valid CEL identifier"))
    if not isinstance(expression, str) or not expression.strip():
        errors.append(required(f"{path}.expression", "expression is not specified"))
    else:
        problem = compile_problem(expression, variables=names)
        if problem:
            errors.append(invalid(f"{path}.expression", expression, problem))
    return errors


def _validate_validation(rule: ObjView, path: str, *, names: tuple[str, ...],
                         message_names: tuple[str, ...], types: Mapping[str, str]
                         ) -> list[FieldError]:
    errors = []
    expression = rule.get("expression")
    if not isinstance(expression, str) or not expression.strip():
        errors.append(required(f"{path}.expression", "expression is not specified"))
    else:
        problem = compile_problem(expression, variables=names, returns=("bool",),
                                  variable_types=types)
        if problem:
            errors.append(invalid(f"{path}.expression", expression, problem))
    message_expression = rule.get("messageExpression")
    if isinstance(message_expression, str) and message_expression:
        if not message_expression.strip():
            errors.append(invalid(f"{path}.messageExpression", message_expression,
                                  "must be non-empty if specified"))
        else:
            problem = compile_problem(message_expression, variables=message_names,
                                      returns=("string",), variable_types=types)
            if problem:
                errors.append(invalid(f"{path}.messageExpression", message_expression,
                                      problem))
    message = rule.get("message")
    if isinstance(message, str) and message:
        if not message.strip():
            errors.append(invalid(f"{path}.message", message,
                                  "message must be non-empty if specified"))
        elif re.search(r"[\n\r]", message.strip()):
            errors.append(invalid(f"{path}.message", message,
                                  "message must not contain line breaks"))
    reason = rule.get("reason")
    if reason is not None and reason not in VALIDATION_REASONS:
        errors.append(not_supported(f"{path}.reason", reason, VALIDATION_REASONS))
    return errors


def _validate_audit_annotation(annotation: ObjView, path: str, *, policy_name: str,
                               names: tuple[str, ...], types: Mapping[str, str]
                               ) -> list[FieldError]:
    errors = []
    key = str(annotation.get("key") or "")
    if policy_name:
        errors += [invalid(f"{path}.key", f"{policy_name}/{key}", p)
                   for p in qualified_name_problems(f"{policy_name}/{key}")]
    else:
        errors.append(invalid(f"{path}.key", key, "requires metadata.name be non-empty"))
    value = annotation.get("valueExpression")
    trimmed = value.strip() if isinstance(value, str) else ""
    if not trimmed:
        errors.append(required(f"{path}.valueExpression", "valueExpression is not specified"))
    elif len(trimmed) > MAX_VALUE_EXPRESSION_LENGTH:
        errors.append(required(f"{path}.valueExpression", "must not exceed "
                               f"{MAX_VALUE_EXPRESSION_LENGTH} bytes in length"))
    else:
        problem = compile_problem(trimmed, variables=names, returns=("string", "null"),
                                  variable_types=types)
        if problem:
            errors.append(invalid(f"{path}.valueExpression", value, problem))
    return errors


def _validate_policy_spec(spec: ObjView, old_spec: ObjView | None, *, name: str
                          ) -> list[FieldError]:
    errors = []
    failure = spec.get("failurePolicy")
    if failure is None:
        errors.append(required("spec.failurePolicy"))
    elif failure not in FAILURE_POLICIES:
        errors.append(not_supported("spec.failurePolicy", failure, sorted(FAILURE_POLICIES)))
    param_kind = spec.get("paramKind")
    has_params = param_kind is not None
    if has_params:
        kind, errs = as_dict(param_kind, "spec.paramKind")
        errors += errs + _validate_param_kind(kind, "spec.paramKind")
    if spec.get("matchConstraints") is None:
        errors.append(required("spec.matchConstraints"))
    else:
        match, errs = as_dict(spec["matchConstraints"], "spec.matchConstraints")
        errors += errs + validate_match_resources(match, "spec.matchConstraints")
        if not match.get("resourceRules"):
            errors.append(required("spec.matchConstraints.resourceRules"))
    # unchanged match conditions (and paramKind) are not compiled again (ratcheting)
    same_conditions = old_spec is not None and \
        old_spec.get("paramKind") == param_kind and \
        old_spec.get("matchConditions") == spec.get("matchConditions")
    conditions, errs = as_list(spec.get("matchConditions"), "spec.matchConditions")
    condition_names = expression_variables(params=has_params, authorizer=True,
                                            composition=False)
    errors += errs + _validate_match_conditions(
        conditions, "spec.matchConditions",
        check=(lambda _e: None) if same_conditions else
        (lambda e: compile_problem(e, variables=condition_names, returns=("bool",))))
    variables, errs = as_list(spec.get("variables"), "spec.variables")
    errors += errs
    composition = bool(variables)
    names = expression_variables(params=has_params, authorizer=True, composition=composition)
    for i, raw in enumerate(variables):
        var, errs = as_dict(raw, f"spec.variables[{i}]")
        errors += errs + _validate_variable(var, f"spec.variables[{i}]", names)
    types = variable_types([(str(v.get("name")), str(v.get("expression")))
                            for v in variables if isinstance(v, Mapping)
                            and isinstance(v.get("expression"), str)], names=names)
    validations, errs = as_list(spec.get("validations"), "spec.validations")
    annotations, errs2 = as_list(spec.get("auditAnnotations"), "spec.auditAnnotations")
    errors += errs + errs2
    if not validations and not annotations:
        detail = "validations or auditAnnotations must contain at least one item"
        return errors + [required("spec.validations", detail),
                         required("spec.auditAnnotations", detail)]
    message_names = expression_variables(params=has_params, authorizer=False,
                                         composition=composition)
    for i, raw in enumerate(validations):
        rule, errs = as_dict(raw, f"spec.validations[{i}]")
        errors += errs + _validate_validation(rule, f"spec.validations[{i}]", names=names,
                                              message_names=message_names, types=types)
    if len(annotations) > MAX_AUDIT_ANNOTATIONS:
        errors.append(invalid("spec.auditAnnotations", annotations,
                              f"must not have more than {MAX_AUDIT_ANNOTATIONS} "
                              "auditAnnotations"))
    keys: set[str] = set()
    for i, raw in enumerate(annotations):
        annotation, errs = as_dict(raw, f"spec.auditAnnotations[{i}]")
        errors += errs + _validate_audit_annotation(
            annotation, f"spec.auditAnnotations[{i}]", policy_name=name, names=names,
            types=types)
        key = str(annotation.get("key") or "")
        if key in keys:
            errors.append(duplicate(f"spec.auditAnnotations[{i}].key", key))
        keys.add(key)
    return errors


def _spec(obj: ObjView | None) -> ObjView | None:
    if obj is None:
        return None
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def validate_policy(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    """A ValidatingAdmissionPolicy (its metadata is validated with every object's)."""
    spec, errors = as_dict(obj.get("spec"), "spec")
    name = str((obj.get("metadata") or {}).get("name") or "")
    return errors + _validate_policy_spec(spec, _spec(old), name=name)


# -- the binding ---------------------------------------------------------------------------

def _validate_param_ref(ref: ObjView, path: str) -> list[FieldError]:
    errors = []
    name, selector = ref.get("name"), ref.get("selector")
    if name:
        errors += [invalid(f"{path}.name", name, p) for p in _path_segment_problems(str(name))]
        if selector is not None:
            errors.append(forbidden(f"{path}.name", "name and selector are mutually exclusive"))
    if selector is not None:
        errors += validate_label_selector(selector, f"{path}.selector")
        if name:
            errors.append(forbidden(f"{path}.selector",
                                    "name and selector are mutually exclusive"))
    if not name and selector is None:
        errors.append(required(path, "one of name or selector must be specified"))
    action = ref.get("parameterNotFoundAction")
    if not action:
        errors.append(required(f"{path}.parameterNotFoundAction"))
    elif action not in PARAMETER_NOT_FOUND_ACTIONS:
        errors.append(not_supported(f"{path}.parameterNotFoundAction", action,
                                    PARAMETER_NOT_FOUND_ACTIONS))
    return errors


def _validate_actions(actions: list[Any], path: str) -> list[FieldError]:
    errors = []
    seen: set[str] = set()
    for i, action in enumerate(actions):
        if action not in VALIDATION_ACTIONS:
            errors.append(not_supported(f"{path}[{i}]", action, VALIDATION_ACTIONS))
        if action in seen:
            errors.append(duplicate(f"{path}[{i}]", action))
        seen.add(str(action))
    if {"Deny", "Warn"} <= seen:
        errors.append(invalid(path, actions, "must not contain both Deny and Warn (repeating "
                              "the same validation failure information in the API response "
                              "and headers serves no purpose)"))
    if not seen:
        errors.append(required(path, "at least one validation action is required"))
    return errors


def validate_binding(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    """A ValidatingAdmissionPolicyBinding; its matchResources' errors carry Kubernetes'
    own spelling of the path (`spec.matchResouces`)."""
    spec, errors = as_dict(obj.get("spec"), "spec")
    policy = spec.get("policyName")
    if not policy:
        errors.append(required("spec.policyName"))
    else:
        errors += [invalid("spec.policyName", policy, p)
                   for p in dns1123_subdomain_problems(str(policy))]
    if spec.get("paramRef") is not None:
        ref, errs = as_dict(spec["paramRef"], "spec.paramRef")
        errors += errs + _validate_param_ref(ref, "spec.paramRef")
    if spec.get("matchResources") is not None:
        match, errs = as_dict(spec["matchResources"], "spec.matchResouces")
        errors += errs + validate_match_resources(match, "spec.matchResouces")
    actions, errs = as_list(spec.get("validationActions"), "spec.validationActions")
    return errors + errs + _validate_actions(actions, "spec.validationActions")


# -- kubectl's columns ---------------------------------------------------------------------

def param_kind_column(obj: ObjView) -> str:
    kind = (obj.get("spec") or {}).get("paramKind")
    if not isinstance(kind, Mapping):
        return "<unset>"
    return f"{kind.get('apiVersion', '')}/{kind.get('kind', '')}"


def param_ref_column(obj: ObjView) -> str:
    ref = (obj.get("spec") or {}).get("paramRef")
    if not isinstance(ref, Mapping):
        return "<unset>"
    if ref.get("name"):
        return f"{ref.get('namespace') or '*'}/{ref['name']}"
    selector = ref.get("selector")
    if isinstance(selector, Mapping):
        try:
            return str(LabelSelector.from_dict(selector)) or "<none>"
        except ApiError:
            return "<error>"
    return "<unset>"
