"""Label selectors, field selectors and the label key/value rules they rest on.

Every list and watch filter (`-l app=web`, `--field-selector spec.nodeName=n1`), every
ReplicaSet/StatefulSet/PDB `spec.selector` and every topology spread constraint matches
labels the same way, so the parsing and the Kubernetes semantics live here once:
`metav1.LabelSelectorAsSelector` (a missing selector matches nothing, an empty one
everything) and `labels.Parse` / `fields.ParseSelector` for the string forms.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from skiff.api.errors import ApiError, FieldError, Reason, invalid, not_supported, required
from skiff.api.fieldlabels import KindFieldLabels, field_labels, read

# --- label keys and values (apimachinery/pkg/util/validation) -------------------------

QUALIFIED_NAME_MAX_LENGTH = 63
LABEL_VALUE_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
DNS1123_LABEL_MAX_LENGTH = 63

_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME = re.compile(f"^{_QUALIFIED_NAME_FMT}$")
_LABEL_VALUE = re.compile(f"^({_QUALIFIED_NAME_FMT})?$")
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(f"^{_DNS1123_LABEL_FMT}$")
_DNS1123_SUBDOMAIN = re.compile(f"^{_DNS1123_LABEL_FMT}(\\.{_DNS1123_LABEL_FMT})*$")

_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    f"used for validation is '{_QUALIFIED_NAME_FMT}')"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    f"'my_value',  or '12345', regex used for validation is '({_QUALIFIED_NAME_FMT})?')"
)
DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    f"regex used for validation is '{_DNS1123_LABEL_FMT}')"
)
DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character (e.g. "
    f"'example.com', regex used for validation is '{_DNS1123_LABEL_FMT}"
    f"(\\.{_DNS1123_LABEL_FMT})*')"
)


def dns1123_label_problems(value: str) -> list[str]:
    """Kubernetes' `IsDNS1123Label`: the reasons `value` is not one (empty when it is)."""
    problems = []
    if len(value) > DNS1123_LABEL_MAX_LENGTH:
        problems.append(f"must be no more than {DNS1123_LABEL_MAX_LENGTH} characters")
    if not _DNS1123_LABEL.match(value):
        problems.append(DNS1123_LABEL_MSG)
    return problems


def dns1123_subdomain_problems(value: str) -> list[str]:
    """Kubernetes' `IsDNS1123Subdomain`: the reasons `value` is not one."""
    problems = []
    if len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        problems.append(f"must be no more than {DNS1123_SUBDOMAIN_MAX_LENGTH} characters")
    if not _DNS1123_SUBDOMAIN.match(value):
        problems.append(DNS1123_SUBDOMAIN_MSG)
    return problems


def qualified_name_problems(value: str) -> list[str]:
    """Kubernetes' `IsQualifiedName`: `[prefix/]name` with a DNS-1123 subdomain prefix."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
        problems = [f"prefix part {p}" for p in dns1123_subdomain_problems(prefix)]
        if problems:
            return problems
    else:
        return [f"a qualified name {_QUALIFIED_NAME_MSG} with an optional DNS subdomain "
                "prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        return ["name part must be non-empty"]
    problems = []
    if len(name) > QUALIFIED_NAME_MAX_LENGTH:
        problems.append(f"name part must be no more than {QUALIFIED_NAME_MAX_LENGTH} characters")
    if not _QUALIFIED_NAME.match(name):
        problems.append(f"name part {_QUALIFIED_NAME_MSG}")
    return problems


def label_value_problems(value: str) -> list[str]:
    """Kubernetes' `IsValidLabelValue`: at most 63 characters, may be empty."""
    problems = []
    if len(value) > LABEL_VALUE_MAX_LENGTH:
        problems.append(f"must be no more than {LABEL_VALUE_MAX_LENGTH} characters")
    if not _LABEL_VALUE.match(value):
        problems.append(_LABEL_VALUE_MSG)
    return problems


def validate_label_key(key: Any, path: str) -> list[FieldError]:
    if not isinstance(key, str):
        return [invalid(path, key, "label keys must be strings")]
    return [invalid(path, key, p) for p in qualified_name_problems(key)]


def validate_label_value(value: Any, path: str) -> list[FieldError]:
    if not isinstance(value, str):
        return [invalid(path, value, "label values must be strings")]
    return [invalid(path, value, p) for p in label_value_problems(value)]


def validate_labels(labels: Any, path: str) -> list[FieldError]:
    """`metadata.labels`, `spec.nodeSelector`, `matchLabels`: a map of key → value."""
    if labels is None:
        return []
    if not isinstance(labels, Mapping):
        return [invalid(path, labels, "must be a map of string keys to string values")]
    errors: list[FieldError] = []
    for key, value in labels.items():
        errors += validate_label_key(key, path)
        errors += validate_label_value(value, path)
    return errors


# --- label selectors -------------------------------------------------------------------

IN, NOT_IN, EXISTS, DOES_NOT_EXIST = "In", "NotIn", "Exists", "DoesNotExist"
EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GT, LT = "=", "==", "!=", "Gt", "Lt"
_SELECTOR_OPERATORS = [IN, NOT_IN, EXISTS, DOES_NOT_EXIST]


@dataclass(frozen=True)
class Requirement:
    """One `key op values` term of a label selector (`labels.Requirement`)."""

    key: str
    operator: str  # one of =, ==, !=, In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator in (IN, EQUALS, DOUBLE_EQUALS):
            return present and labels[self.key] in self.values
        if self.operator in (NOT_IN, NOT_EQUALS):
            return not present or labels[self.key] not in self.values
        if self.operator == EXISTS:
            return present
        if self.operator == DOES_NOT_EXIST:
            return not present
        if self.operator in (GT, LT) and present:
            try:
                have, want = int(labels[self.key]), int(self.values[0])
            except ValueError:
                return False
            return have > want if self.operator == GT else have < want
        return False

    def __str__(self) -> str:
        if self.operator == EXISTS:
            return self.key
        if self.operator == DOES_NOT_EXIST:
            return f"!{self.key}"
        if self.operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
            return f"{self.key}{self.operator}{self.values[0]}"
        if self.operator in (GT, LT):
            return f"{self.key}{'>' if self.operator == GT else '<'}{self.values[0]}"
        word = "in" if self.operator == IN else "notin"
        return f"{self.key} {word} ({','.join(sorted(self.values))})"


def _new_requirement(key: str, operator: str, values: Iterable[str]) -> Requirement:
    """`labels.NewRequirement`: checks the key, the values and their count per operator."""
    vals = tuple(values)
    problems = qualified_name_problems(key)
    if problems:
        raise ApiError(Reason.BAD_REQUEST, f"invalid label key {key!r}: {'; '.join(problems)}")
    if operator in (IN, NOT_IN) and not vals:
        raise ApiError(Reason.BAD_REQUEST,
                       f"for 'in', 'notin' operators, values set can't be empty (key {key!r})")
    if operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GT, LT) and len(vals) != 1:
        raise ApiError(Reason.BAD_REQUEST,
                       f"exact-match compatibility requires one single value (key {key!r})")
    if operator in (EXISTS, DOES_NOT_EXIST) and vals:
        raise ApiError(Reason.BAD_REQUEST,
                       f"values set must be empty for exists and does not exist (key {key!r})")
    if operator in (GT, LT):
        try:
            int(vals[0])
        except ValueError:
            raise ApiError(Reason.BAD_REQUEST,
                           f"for 'Gt', 'Lt' operators, the value must be an integer "
                           f"(key {key!r}, value {vals[0]!r})") from None
    else:
        for value in vals:
            problems = label_value_problems(value)
            if problems:
                raise ApiError(Reason.BAD_REQUEST, f"invalid label value {value!r} for key "
                                                   f"{key!r}: {'; '.join(problems)}")
    return Requirement(key, operator, vals)


_TOKEN = re.compile(r"\s*(!=|==|=|!|\(|\)|,|>|<|[^\s!=(),<>]+)")


def _tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if match is None:  # pragma: no cover - every non-space character forms a token
            raise ApiError(Reason.BAD_REQUEST, f"unable to parse label selector {text!r}")
        tokens.append(match.group(1))
        pos = match.end()
    return tokens


_SPECIAL = {"!=", "==", "=", "!", "(", ")", ",", ">", "<"}


class _Parser:
    """A recursive-descent parser for the `labels.Parse` grammar."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.pos = 0

    def fail(self, what: str) -> ApiError:
        return ApiError(Reason.BAD_REQUEST,
                        f"unable to parse label selector {self.text!r}: {what}")

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str | None:
        token = self.peek()
        self.pos += 1
        return token

    def identifier(self, what: str) -> str:
        token = self.take()
        if token is None or token in _SPECIAL:
            raise self.fail(f"found {token or 'end of string'!r}, expected {what}")
        return token

    def requirements(self) -> list[Requirement]:
        result: list[Requirement] = []
        if self.peek() is None:
            return result
        while True:
            result.append(self.requirement())
            token = self.take()
            if token is None:
                return result
            if token != ",":
                raise self.fail(f"found {token!r}, expected ','")
            if self.peek() is None:
                raise self.fail("found end of string, expected a requirement after ','")

    def requirement(self) -> Requirement:
        if self.peek() == "!":
            self.take()
            key = self.identifier("a label key after '!'")
            self._end_of_term(key)
            return _new_requirement(key, DOES_NOT_EXIST, ())
        key = self.identifier("a label key")
        op = self.peek()
        if op is None or op == ",":
            return _new_requirement(key, EXISTS, ())
        self.take()
        if op in ("=", "==", "!="):
            value = self.peek()
            if value is None or value == ",":
                return _new_requirement(key, op, ("",))
            value = self.identifier(f"a value after {key}{op}")
            return _new_requirement(key, op, (value,))
        if op in (">", "<"):
            value = self.identifier(f"an integer after {key}{op}")
            return _new_requirement(key, GT if op == ">" else LT, (value,))
        if op in ("in", "notin"):
            return _new_requirement(key, IN if op == "in" else NOT_IN, self.value_set(key, op))
        raise self.fail(f"found {op!r}, expected one of '=', '==', '!=', 'in', 'notin', "
                        f"'>', '<', ',' after key {key!r}")

    def _end_of_term(self, key: str) -> None:
        token = self.peek()
        if token is not None and token != ",":
            raise self.fail(f"found {token!r}, expected ',' or end of string after '!{key}'")

    def value_set(self, key: str, op: str) -> list[str]:
        if self.take() != "(":
            raise self.fail(f"expected '(' after {key!r} {op}")
        values: list[str] = []
        expect_value = True
        while True:
            token = self.take()
            if token is None:
                raise self.fail(f"found end of string, expected ')' to close {key} {op} (...)")
            if token == ")":
                if values and expect_value:
                    values.append("")  # `a in (x,)` has an empty value, as in Kubernetes
                return values
            if token == ",":
                if expect_value:
                    values.append("")
                expect_value = True
                continue
            if token in _SPECIAL or not expect_value:
                raise self.fail(f"found {token!r} inside the value set of {key!r}")
            values.append(token)
            expect_value = False


class LabelSelector:
    """A set of requirements that all must hold, or "nothing" for a missing selector.

    `LabelSelector.parse("")` and `from_dict({})` match everything; `from_dict(None)`
    matches nothing, exactly like `metav1.LabelSelectorAsSelector`.
    """

    def __init__(self, requirements: Iterable[Requirement] = (), *, nothing: bool = False):
        normalized = (Requirement(r.key, r.operator, tuple(sorted(set(r.values))))
                      if r.operator in (IN, NOT_IN) else r for r in requirements)
        self.requirements: tuple[Requirement, ...] = tuple(
            sorted(normalized, key=lambda r: r.key))
        self.nothing = nothing

    @classmethod
    def everything(cls) -> LabelSelector:
        return cls()

    @classmethod
    def none(cls) -> LabelSelector:
        return cls(nothing=True)

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        """The string form: `a=b,c!=d,e in (x,y),f notin (z),g,!h`."""
        return cls(_Parser(text).requirements())

    @classmethod
    def from_dict(cls, sel: Mapping[str, Any] | None, *, path: str = "selector"
                  ) -> LabelSelector:
        """A `metav1.LabelSelector` (`matchLabels`, `matchExpressions`).

        Input that `validate_label_selector` would reject raises ApiError(BAD_REQUEST)
        whose message names the field path.
        """
        if sel is None:
            return cls.none()
        errors = validate_label_selector(sel, path)
        if errors:
            raise ApiError(Reason.BAD_REQUEST,
                           "invalid label selector: " + ", ".join(str(e) for e in errors),
                           errors)
        reqs = [Requirement(k, EQUALS, (v,)) for k, v in (sel.get("matchLabels") or {}).items()]
        for expr in sel.get("matchExpressions") or []:
            reqs.append(Requirement(expr["key"], expr["operator"],
                                    tuple(expr.get("values") or ())))
        return cls(reqs)

    @property
    def empty(self) -> bool:
        """True when the selector matches everything (no requirements)."""
        return not self.nothing and not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.nothing:
            return False
        have = labels or {}
        return all(r.matches(have) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        return "LabelSelector(<nothing>)" if self.nothing else f"LabelSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, LabelSelector) and self.nothing == other.nothing
                and self.requirements == other.requirements)

    def __hash__(self) -> int:
        return hash((self.nothing, self.requirements))


def validate_label_selector(sel: Any, path: str) -> list[FieldError]:
    """`unversionedvalidation.ValidateLabelSelector` with Kubernetes' field paths."""
    if sel is None:
        return []
    if not isinstance(sel, Mapping):
        return [invalid(path, sel, "must be an object with matchLabels and/or "
                                   "matchExpressions")]
    errors = validate_labels(sel.get("matchLabels"), f"{path}.matchLabels")
    exprs = sel.get("matchExpressions")
    if exprs is None:
        return errors
    if not isinstance(exprs, list):
        return errors + [invalid(f"{path}.matchExpressions", exprs, "must be a list")]
    for i, expr in enumerate(exprs):
        p = f"{path}.matchExpressions[{i}]"
        if not isinstance(expr, Mapping):
            errors.append(invalid(p, expr, "must be an object with key, operator and values"))
            continue
        op, values = expr.get("operator"), expr.get("values")
        if values is not None and (not isinstance(values, list)
                                   or not all(isinstance(v, str) for v in values)):
            errors.append(invalid(f"{p}.values", values, "must be a list of strings"))
            values = []
        values = values or []
        if not op:
            errors.append(required(f"{p}.operator"))
        elif op in (IN, NOT_IN):
            if not values:
                errors.append(required(f"{p}.values",
                                       "must be specified when `operator` is 'In' or 'NotIn'"))
        elif op in (EXISTS, DOES_NOT_EXIST):
            if values:
                errors.append(FieldError(f"{p}.values", "Forbidden",
                                         "may not be specified when `operator` is 'Exists' "
                                         "or 'DoesNotExist'"))
        else:
            errors.append(not_supported(f"{p}.operator", op, _SELECTOR_OPERATORS))
        if "key" not in expr or expr.get("key") in (None, ""):
            errors.append(required(f"{p}.key"))
        else:
            errors += validate_label_key(expr["key"], f"{p}.key")
        for j, value in enumerate(values):
            errors += validate_label_value(value, f"{p}.values[{j}]")
    return errors


# --- field selectors ---------------------------------------------------------------------

class FieldRequirement(NamedTuple):
    """One `path op value` term; a plain tuple, so `(path, op, value) = req` works."""

    path: str  # dotted: "spec.nodeName"
    op: str  # "=" or "!="
    value: str


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, current, escaped = [], "", False
    for ch in text:
        if escaped:
            current += "\\" + ch
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            parts.append(current)
            current = ""
        else:
            current += ch
    if escaped:
        current += "\\"
    parts.append(current)
    return parts


def _unescape(text: str) -> str:
    out, escaped = "", False
    for ch in text:
        if escaped:
            if ch not in "\\,=":
                raise ApiError(Reason.BAD_REQUEST,
                               f"invalid field selector value {text!r}: unsupported escape "
                               f"'\\{ch}'")
            out += ch
            escaped = False
        elif ch == "\\":
            escaped = True
        else:
            out += ch
    if escaped:
        raise ApiError(Reason.BAD_REQUEST, f"invalid field selector value {text!r}: trailing \\")
    return out


def workload_selector(obj: Mapping[str, Any]) -> Any:
    """A workload's `spec.selector` as a `metav1.LabelSelector`: a ReplicationController's
    is a plain label map (an equality selector), every other kind's is one already."""
    selector = (obj.get("spec") or {}).get("selector")
    if obj.get("kind") == "ReplicationController" and isinstance(selector, Mapping):
        return {"matchLabels": dict(selector)} if selector else None
    return selector


class FieldSelector:
    """`fields.ParseSelector`: `metadata.name=x,spec.nodeName!=n1`; all terms must hold.

    Parsed for a kind (`parse(text, kind="Pod")`, and `api_version` when it is served in a
    version other than the stored one), a selector accepts only that kind's field labels and
    reads each as kube-apiserver does (skiff.api.fieldlabels); without a kind it compares
    the value at each dotted path.
    """

    def __init__(self, requirements: Iterable[FieldRequirement] = (), *,
                 labels: KindFieldLabels | None = None) -> None:
        self.requirements: tuple[FieldRequirement, ...] = tuple(requirements)
        self._labels = labels

    @classmethod
    def parse(cls, text: str, *, kind: str | None = None, api_version: str = "",
              labels: KindFieldLabels | None = None) -> FieldSelector:
        """The string form; with `kind` (or its `labels`, a custom resource's), a label the
        kind does not support is 400."""
        reqs: list[FieldRequirement] = []
        if labels is None and kind is not None:
            labels = field_labels(kind, api_version)
        if not text.strip():
            return cls(labels=labels)
        for term in _split_unescaped(text, ","):
            term = term.strip()
            if not term:
                continue  # `metadata.name=x,`: Kubernetes' parseSelector skips empty terms
            for op in ("!=", "==", "="):
                index = term.find(op)
                if index > 0:
                    path, value = term[:index].strip(), term[index + len(op):]
                    break
            else:
                raise ApiError(Reason.BAD_REQUEST,
                               f"invalid field selector {text!r}: term {term!r} is not "
                               "'<field>=<value>', '<field>==<value>' or '<field>!=<value>'")
            if not re.fullmatch(r"[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*", path):
                raise ApiError(Reason.BAD_REQUEST,
                               f"invalid field selector {text!r}: {path!r} is not a dotted "
                               "field path like 'spec.nodeName'")
            if labels is not None:
                path = labels.canonical(path)
            reqs.append(FieldRequirement(path, "!=" if op == "!=" else "=", _unescape(value)))
        return cls(reqs, labels=labels)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def value(self, obj: Mapping[str, Any], path: str) -> str:
        """What `path` compares as on `obj`."""
        if self._labels is not None:
            return self._labels.value(obj, path)
        return read(obj, path)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        for req in self.requirements:
            equal = self.value(obj, req.path) == req.value
            if equal != (req.op == "="):
                return False
        return True

    def exact(self, path: str) -> str | None:
        """The value required by a `path=value` term, for an index lookup; else None."""
        for req in self.requirements:
            if req.path == path and req.op == "=":
                return req.value
        return None

    def __str__(self) -> str:
        def esc(v: str) -> str:
            return v.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")
        return ",".join(f"{r.path}{r.op}{esc(r.value)}" for r in self.requirements)

    def __repr__(self) -> str:
        return f"FieldSelector({str(self)!r})"
