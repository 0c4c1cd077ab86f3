"""Field names a rule selects, checked against the schema at compile time, as Kubernetes'
typed CEL environment does (`undefined field 'replicaz'` when the CRD is written, not a
`no such key` on every later write).

The runtime declares objects as maps, so its checker cannot know their fields; this module
reads the checked expression the runtime serialises (a `cel.expr.CheckedExpr` in an `Any`,
decoded here from protobuf's wire format: only the few fields needed) and follows each
field selection from `self`/`oldSelf` through the schema, into list items and map values,
comprehension variables included.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from skiff.api.cel.env import Program
from skiff.api.cel.schematypes import escape
from skiff.api.types import ObjView

# metadata of a resource as a rule sees it (Kubernetes' WithTypeAndObjectMeta)
_RESOURCE_META: dict[str, Any] = {"type": "object", "properties": {
    "name": {"type": "string"}, "generateName": {"type": "string"}}}
_MISSING: dict[str, Any] = {}


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = buf[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, i
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, Any]]:
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 2:
            size, i = _varint(buf, i)
            value, i = buf[i:i + size], i + size
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, value


@dataclass
class _Expr:
    id: int = 0
    kind: str = ""
    name: str = ""  # ident name, select field, call function
    test_only: bool = False
    children: list[_Expr] = field(default_factory=list)  # select operand; call target+args
    target: bool = False
    comprehension: dict[str, Any] = field(default_factory=dict)


def _expr(buf: bytes) -> _Expr:
    node = _Expr()
    for number, value in _fields(buf):
        if number == 2:
            node.id = value
        elif number == 3:
            node.kind = "const"
        elif number == 4:
            node.kind = "ident"
            node.name = next((v.decode() for n, v in _fields(value) if n == 1), "")
        elif number == 5:
            node.kind = "select"
            for n, v in _fields(value):
                if n == 1:
                    node.children.append(_expr(v))
                elif n == 2:
                    node.name = v.decode()
                elif n == 3:
                    node.test_only = bool(v)
        elif number == 6:
            node.kind = "call"
            target: list[_Expr] = []
            for n, v in _fields(value):
                if n == 1:
                    target.append(_expr(v))
                elif n == 2:
                    node.name = v.decode()
                elif n == 3:
                    node.children.append(_expr(v))
            node.target = bool(target)
            node.children = target + node.children
        elif number == 7:
            node.kind = "list"
            node.children = [_expr(v) for n, v in _fields(value) if n == 1]
        elif number == 8:
            node.kind = "struct"
            for n, entry in _fields(value):
                if n == 2:
                    node.children += [_expr(v) for m, v in _fields(entry) if m in (3, 4)]
        elif number == 9:
            node.kind = "comprehension"
            for n, v in _fields(value):
                node.comprehension[{1: "iter_var", 2: "iter_range", 3: "accu_var",
                                    4: "accu_init", 5: "loop_condition", 6: "loop_step",
                                    7: "result"}.get(n, str(n))] = (
                    v.decode() if n in (1, 3) else _expr(v))
    return node


def _decode(program: Program) -> tuple[_Expr | None, dict[int, int]]:
    payload = b""
    for number, value in _fields(program._compiled.serialize()):
        if number == 2:  # google.protobuf.Any.value
            payload = value
    root: _Expr | None = None
    positions: dict[int, int] = {}
    for number, value in _fields(payload):
        if number == 4:
            root = _expr(value)
        elif number == 5:
            for n, entry in _fields(value):
                if n == 4:
                    pair = dict(_fields(entry))
                    positions[pair.get(1, 0)] = pair.get(2, 0)
    return root, positions


def _field(node: ObjView, name: str, resource_root: bool) -> ObjView | None:
    """The schema under `node.name`; None when unknown (dyn), _MISSING when undefined."""
    if resource_root and name == "metadata":
        return _RESOURCE_META
    extra = node.get("additionalProperties")
    if isinstance(extra, Mapping):
        return extra
    props = node.get("properties")
    if not isinstance(props, Mapping) or not props:
        return None
    for key, sub in props.items():
        if escape(key) == name and isinstance(sub, Mapping):
            return sub
    if resource_root and name in ("apiVersion", "kind"):
        return {"type": "string"}
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return None
    return _MISSING


def _element(node: ObjView | None) -> ObjView | None:
    if node is None:
        return None
    items = node.get("items")
    if isinstance(items, Mapping):
        return items
    extra = node.get("additionalProperties")
    return extra if isinstance(extra, Mapping) else None


@dataclass
class _Walk:
    roots: Mapping[str, ObjView]
    resource_root: bool
    errors: list[tuple[int, str]] = field(default_factory=list)

    def type_of(self, e: _Expr, scope: Mapping[str, ObjView | None]) -> ObjView | None:
        if e.kind == "ident":
            return scope.get(e.name)
        if e.kind == "select":
            operand = e.children[0] if e.children else None
            parent = self.type_of(operand, scope) if operand else None
            if parent is None:
                return None
            is_root = operand is not None and operand.kind == "ident" and \
                operand.name in self.roots and scope.get(operand.name) is \
                self.roots[operand.name]
            resource = (self.resource_root and is_root) or bool(
                parent.get("x-kubernetes-embedded-resource"))
            sub = _field(parent, e.name, resource)
            if sub is _MISSING:
                self.errors.append((e.id, f"undefined field '{e.name}'"))
                return None
            return sub
        if e.kind == "call":
            types = [self.type_of(child, scope) for child in e.children]
            if e.name == "_[_]" and len(types) == 2:
                return _element(types[0])
            return None
        if e.kind == "comprehension":
            c = e.comprehension
            iter_range = self.type_of(c["iter_range"], scope) if "iter_range" in c else None
            if "accu_init" in c:
                self.type_of(c["accu_init"], scope)
            item = iter_range.get("items") if iter_range is not None else None
            inner = dict(scope)
            inner[c.get("iter_var", "")] = item if isinstance(item, Mapping) else None
            inner[c.get("accu_var", "")] = None
            for part in ("loop_condition", "loop_step", "result"):
                if part in c:
                    self.type_of(c[part], inner if part != "result" else
                                 {**scope, c.get("accu_var", ""): None})
            return None
        for child in e.children:
            self.type_of(child, scope)
        return None


def undefined_fields(program: Program, *, roots: Mapping[str, ObjView],
                     resource_root: bool) -> str | None:
    """cel-go's compile error for each field the expression selects that the schema does
    not declare (`ERROR: <input>:1:5: undefined field 'x'` with its caret lines), or None.
    `roots` maps a variable (`self`, `oldSelf`) to its schema node."""
    try:
        tree, positions = _decode(program)
    except (ValueError, IndexError, UnicodeDecodeError):
        return None  # an encoding this reader does not know: the check is skipped
    if tree is None:
        return None
    walk = _Walk(roots, resource_root)
    walk.type_of(tree, dict(roots))
    if not walk.errors:
        return None
    return "\n".join(_located(program.expression, positions.get(node_id, 0), message)
                     for node_id, message in walk.errors)


def _located(source: str, offset: int, message: str) -> str:
    line_no, start = 1, 0
    for i, char in enumerate(source[:offset]):
        if char == "\n":
            line_no, start = line_no + 1, i + 1
    end = source.find("\n", start)
    line = source[start:] if end < 0 else source[start:end]
    column = offset - start
    return f"ERROR: <input>:{line_no}:{column + 1}: {message}\n | {line}\n | {'.' * column}^"
