"""Mutating and Validating webhook configurations (SPEC EX6): their v1 defaults
(`pkg/apis/admissionregistration/v1/defaults.go`) and validation
(`pkg/apis/admissionregistration/validation`), with Kubernetes' messages and field paths.
`skiff.api.groups.admissionregistration` registers them; the apiserver's webhook admission
plugins (`skiff.apiserver.admission.webhook`) read the objects they let through.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from typing import Any

from skiff.api.errors import (
    FieldError,
    duplicate,
    invalid,
    not_supported,
    required,
)
from skiff.api.fieldchecks import as_dict, as_list, is_int
from skiff.api.fielddefaults import child, set_if_none
from skiff.api.names import dns1035_label_problems
from skiff.api.selectors import (
    dns1123_subdomain_problems,
    qualified_name_problems,
    validate_label_selector,
)
from skiff.api.types import Obj, ObjView
from skiff.api.webhookclient import validate_webhook_service, validate_webhook_url

FAILURE_POLICIES = ["Fail", "Ignore"]
MATCH_POLICIES = ["Equivalent", "Exact"]
SIDE_EFFECTS = ["None", "NoneOnDryRun", "Some", "Unknown"]
NO_SIDE_EFFECTS = ["None", "NoneOnDryRun"]
OPERATIONS = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"]
REINVOCATION_POLICIES = ["IfNeeded", "Never"]
SCOPES = ["*", "Cluster", "Namespaced"]
ACCEPTED_REVIEW_VERSIONS = ["v1", "v1beta1"]
MAX_MATCH_CONDITIONS = 64

# the variables a matchConditions expression may use (CEL: skiff.api.cel); `authorizer` is
# declared as Kubernetes declares it, though Skiff gives it no value (an expression that
# uses it fails to evaluate, and failurePolicy decides)
MATCH_CONDITION_VARIABLES = ("object", "oldObject", "request", "authorizer")
CompileCheck = Callable[[str], str | None]


def _compile_problem(expression: str) -> str | None:
    """Why `expression` cannot be a match condition (it does not compile, or does not
    evaluate to a bool), or None."""
    from skiff.api import cel  # CEL's native runtime loads only when a condition exists
    try:
        program = cel.compile_expression(expression, variables=MATCH_CONDITION_VARIABLES)
    except cel.CelCompileError as err:
        return f"compilation failed: {err}"
    if program.result_type != "bool":
        return "must evaluate to bool"
    return None


# -- defaults ------------------------------------------------------------------------------

def _default_webhook(hook: Obj, *, mutating: bool) -> None:
    set_if_none(hook, "failurePolicy", "Fail")
    set_if_none(hook, "matchPolicy", "Equivalent")
    set_if_none(hook, "namespaceSelector", {})
    set_if_none(hook, "objectSelector", {})
    set_if_none(hook, "timeoutSeconds", 10)
    if mutating:
        set_if_none(hook, "reinvocationPolicy", "Never")
    for rule in hook.get("rules") or []:
        if isinstance(rule, dict):
            set_if_none(rule, "scope", "*")
    config = hook.get("clientConfig")
    if isinstance(config, dict) and isinstance(config.get("service"), dict):
        set_if_none(child(config, "service"), "port", 443)


def default_mutating(obj: Obj) -> None:
    for hook in obj.get("webhooks") or []:
        if isinstance(hook, dict):
            _default_webhook(hook, mutating=True)


def default_validating(obj: Obj) -> None:
    for hook in obj.get("webhooks") or []:
        if isinstance(hook, dict):
            _default_webhook(hook, mutating=False)


# -- rules ---------------------------------------------------------------------------------

def _strings(value: Any, path: str) -> tuple[list[str], list[FieldError]]:
    items, errors = as_list(value, path)
    if any(not isinstance(v, str) for v in items):
        return [], [invalid(path, value, "must be a list of strings")]
    return items, errors


def _validate_resources(resources: list[str], path: str) -> list[FieldError]:
    errors = [] if resources else [required(path)]
    with_any_sub: set[str] = set()  # x/*
    any_with_sub: set[str] = set()  # */x
    single_wildcard = plain_resource = False
    for i, res_sub in enumerate(resources):
        if res_sub == "":
            errors.append(required(f"{path}[{i}]"))
            continue
        single_wildcard |= res_sub == "*"
        res, slash, sub = res_sub.partition("/")
        if not slash:
            plain_resource = res_sub != "*"
            continue
        if res in with_any_sub:
            errors.append(invalid(f"{path}[{i}]", res_sub,
                                  f"if '{res}/*' is present, must not specify {res_sub}"))
        if sub in any_with_sub:
            errors.append(invalid(f"{path}[{i}]", res_sub,
                                  f"if '*/{sub}' is present, must not specify {res_sub}"))
        if sub == "*":
            with_any_sub.add(res)
        if res == "*":
            any_with_sub.add(sub)
    if len(resources) > 1 and "*/*" in resources:
        errors.append(invalid(path, resources,
                              "if '*/*' is present, must not specify other resources"))
    if single_wildcard and plain_resource:
        errors.append(invalid(path, resources, "if '*' is present, must not specify other "
                                               "resources without subresources"))
    return errors


def validate_rule(rule: ObjView, path: str) -> list[FieldError]:
    """`validateRuleWithOperations`: one of a webhook's `rules`."""
    operations, errors = _strings(rule.get("operations"), f"{path}.operations")
    if not operations:
        errors.append(required(f"{path}.operations"))
    if len(operations) > 1 and "*" in operations:
        errors.append(invalid(f"{path}.operations", operations,
                              "if '*' is present, must not specify other operations"))
    for i, op in enumerate(operations):
        if op not in OPERATIONS:
            errors.append(not_supported(f"{path}.operations[{i}]", op, OPERATIONS))
    groups, errs = _strings(rule.get("apiGroups"), f"{path}.apiGroups")
    errors += errs
    if not groups:
        errors.append(required(f"{path}.apiGroups"))
    if len(groups) > 1 and "*" in groups:
        errors.append(invalid(f"{path}.apiGroups", groups,
                              "if '*' is present, must not specify other API groups"))
    versions, errs = _strings(rule.get("apiVersions"), f"{path}.apiVersions")
    errors += errs
    if not versions:
        errors.append(required(f"{path}.apiVersions"))
    if len(versions) > 1 and "*" in versions:
        errors.append(invalid(f"{path}.apiVersions", versions,
                              "if '*' is present, must not specify other API versions"))
    errors += [required(f"{path}.apiVersions[{i}]") for i, v in enumerate(versions) if v == ""]
    resources, errs = _strings(rule.get("resources"), f"{path}.resources")
    errors += errs + _validate_resources(resources, f"{path}.resources")
    scope = rule.get("scope")
    if scope is not None and scope not in SCOPES:
        errors.append(not_supported(f"{path}.scope", scope, SCOPES))
    return errors


# -- client config -------------------------------------------------------------------------

def _validate_client_config(config: ObjView, path: str) -> list[FieldError]:
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        errors = [required(path, "exactly one of url or service is required")]
    elif url is not None:
        errors = validate_webhook_url(url, f"{path}.url")
    else:
        svc, errors = as_dict(service, f"{path}.service")
        errors += validate_webhook_service(svc, f"{path}.service")
    bundle = config.get("caBundle")
    if bundle is not None:
        try:
            base64.b64decode(bundle, validate=True) if isinstance(bundle, str) else None
        except (binascii.Error, ValueError):
            errors.append(invalid(f"{path}.caBundle", "<bytes>", "illegal base64 data"))
    return errors


# -- the webhook ---------------------------------------------------------------------------

def fully_qualified_name_errors(name: Any, path: str) -> list[FieldError]:
    """`utilvalidation.IsFullyQualifiedName`."""
    if not name:
        return [required(path)]
    if not isinstance(name, str):
        return [invalid(path, name, "must be a string")]
    problems = dns1123_subdomain_problems(name)
    if problems:
        return [invalid(path, name, ",".join(problems))]
    if len(name.split(".")) < 3:
        return [invalid(path, name,
                        "should be a domain with at least three segments separated by dots")]
    return []


def _validate_match_conditions(conditions: list[Any], path: str, *,
                               check: CompileCheck) -> list[FieldError]:
    errors = []
    if len(conditions) > MAX_MATCH_CONDITIONS:
        errors.append(FieldError(path, "Too many", f"must have at most {MAX_MATCH_CONDITIONS} "
                                 "items", len(conditions)))
    names: set[str] = set()
    for i, raw in enumerate(conditions):
        cond, errs = as_dict(raw, f"{path}[{i}]")
        errors += errs
        expression = cond.get("expression")
        trimmed = expression.strip() if isinstance(expression, str) else ""
        if not trimmed:
            errors.append(required(f"{path}[{i}].expression"))
        else:
            problem = check(trimmed)
            if problem:
                errors.append(invalid(f"{path}[{i}].expression", trimmed, problem))
        name = cond.get("name")
        if not name:
            errors.append(required(f"{path}[{i}].name"))
        elif not isinstance(name, str):
            errors.append(invalid(f"{path}[{i}].name", name, "must be a string"))
        else:
            errors += [invalid(f"{path}[{i}].name", name, p)
                       for p in qualified_name_problems(name)]
            if name in names:
                errors.append(duplicate(f"{path}[{i}].name", name))
            names.add(name)
    return errors


def _validate_review_versions(value: Any, path: str, *,
                              require_recognized: bool) -> list[FieldError]:
    versions, errors = _strings(value, path)
    if errors:
        return errors
    if not versions:
        return [required(path, f"must specify one of {', '.join(ACCEPTED_REVIEW_VERSIONS)}")]
    seen: set[str] = set()
    for i, version in enumerate(versions):
        if version in seen:
            errors.append(invalid(f"{path}[{i}]", version, "duplicate version"))
            continue
        seen.add(version)
        errors += [invalid(f"{path}[{i}]", version, problem)
                   for problem in dns1035_label_problems(str(version))]
    if require_recognized and not seen & set(ACCEPTED_REVIEW_VERSIONS):
        errors.append(invalid(path, versions, "must include at least one of "
                                              f"{', '.join(ACCEPTED_REVIEW_VERSIONS)}"))
    return errors


def _validate_webhook(hook: ObjView, path: str, *, mutating: bool, side_effects: list[str],
                      check: CompileCheck) -> list[FieldError]:
    errors = fully_qualified_name_errors(hook.get("name"), f"{path}.name")
    rules, errs = as_list(hook.get("rules"), f"{path}.rules")
    errors += errs
    for i, raw in enumerate(rules):
        rule, errs = as_dict(raw, f"{path}.rules[{i}]")
        errors += errs + validate_rule(rule, f"{path}.rules[{i}]")
    for key, allowed in (("failurePolicy", FAILURE_POLICIES), ("matchPolicy", MATCH_POLICIES)):
        if hook.get(key) is not None and hook[key] not in allowed:
            errors.append(not_supported(f"{path}.{key}", hook[key], allowed))
    effects = hook.get("sideEffects")
    if effects is None:
        errors.append(required(f"{path}.sideEffects",
                               f"must specify one of {', '.join(side_effects)}"))
    elif effects not in side_effects:
        errors.append(not_supported(f"{path}.sideEffects", effects, side_effects))
    timeout = hook.get("timeoutSeconds")
    if timeout is not None and (not is_int(timeout) or not 1 <= timeout <= 30):
        errors.append(invalid(f"{path}.timeoutSeconds", timeout,
                              "the timeout value must be between 1 and 30 seconds"))
    for key in ("namespaceSelector", "objectSelector"):
        errors += validate_label_selector(hook.get(key), f"{path}.{key}")
    policy = hook.get("reinvocationPolicy")
    if mutating and policy is not None and policy not in REINVOCATION_POLICIES:
        errors.append(not_supported(f"{path}.reinvocationPolicy", policy,
                                    REINVOCATION_POLICIES))
    config, errs = as_dict(hook.get("clientConfig"), f"{path}.clientConfig")
    errors += errs + _validate_client_config(config, f"{path}.clientConfig")
    conditions, errs = as_list(hook.get("matchConditions"), f"{path}.matchConditions")
    errors += errs + _validate_match_conditions(conditions, f"{path}.matchConditions",
                                                check=check)
    return errors


def _hooks(obj: ObjView | None) -> list[Mapping[str, Any]]:
    if obj is None:
        return []
    return [h for h in obj.get("webhooks") or [] if isinstance(h, Mapping)]


def validate_configuration(obj: ObjView, old: ObjView | None, *, mutating: bool,
                           check: CompileCheck = _compile_problem) -> list[FieldError]:
    """A Mutating/ValidatingWebhookConfiguration; on update, what the old object already had
    (side effects Some/Unknown, duplicate names, no recognized review version, unchanged
    match conditions) is tolerated as Kubernetes' ratcheting does."""
    old_hooks = _hooks(old)
    require_no_effects = old is None or all(
        h.get("sideEffects") in NO_SIDE_EFFECTS for h in old_hooks)
    require_recognized = old is None or all(
        not h.get("admissionReviewVersions")
        or set(h["admissionReviewVersions"]) & set(ACCEPTED_REVIEW_VERSIONS)
        for h in old_hooks)
    old_names = [h.get("name") for h in old_hooks]
    require_unique = old is None or len(old_names) == len(set(map(str, old_names)))
    hooks, errors = as_list(obj.get("webhooks"), "webhooks")
    same_conditions = old is not None and len(hooks) == len(old_hooks) and all(
        isinstance(h, Mapping) and h.get("matchConditions") == o.get("matchConditions")
        for h, o in zip(hooks, old_hooks, strict=True))
    names: set[str] = set()
    for i, raw in enumerate(hooks):
        path = f"webhooks[{i}]"
        hook, errs = as_dict(raw, path)
        errors += errs
        errors += _validate_webhook(
            hook, path, mutating=mutating,
            side_effects=NO_SIDE_EFFECTS if require_no_effects else SIDE_EFFECTS,
            check=(lambda _e: None) if same_conditions else check)
        errors += _validate_review_versions(hook.get("admissionReviewVersions"),
                                            f"{path}.admissionReviewVersions",
                                            require_recognized=require_recognized)
        name = hook.get("name")
        if require_unique and isinstance(name, str) and name:
            if name in names:
                errors.append(duplicate(f"{path}.name", name))
            names.add(name)
    return errors


def validate_mutating(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    return validate_configuration(obj, old, mutating=True)


def validate_validating(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    return validate_configuration(obj, old, mutating=False)
