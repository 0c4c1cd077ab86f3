"""The test workload of `skiff explore` (SPEC CT2): a YAML file a user writes in minutes —
the namespace, the setup applied before the controller starts (its CRDs), the steps run
against the controller in order (apply, create, patch, scale, delete, wait, sleep), the
kinds the oracle compares and the user's invariants.

`load_workload` reads and checks the whole file before anything runs: every problem is a
`WorkloadError` naming the field as Kubernetes names one (`steps[2].patch.name: Required
value`); manifests an `apply` names are loaded then (paths relative to the workload file).
Running a step is steps.py's business.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from skiff.api.errors import FieldError, invalid, not_supported, required
from skiff.api.jsonpath import JsonPathError, parse
from skiff.api.selectors import dns1123_label_problems
from skiff.api.types import Obj

__all__ = ["DEFAULT_NAMESPACE", "DEFAULT_TIMEOUT", "STEP_KINDS", "Invariant", "Step",
           "Workload", "WorkloadError", "load_workload"]

DEFAULT_NAMESPACE = "explore"
DEFAULT_TIMEOUT = 30.0
STEP_KINDS = ("apply", "create", "patch", "scale", "delete", "wait", "sleep")
MUTATING = frozenset({"apply", "create", "patch", "scale", "delete"})
_TOP_FIELDS = ("namespace", "setup", "steps", "compare", "invariants")


class WorkloadError(ValueError):
    """A workload file that cannot run: `path` is the file, `problem` the field's error."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


@dataclass(frozen=True)
class Step:
    index: int  # position in steps; setup steps are -1 - i
    kind: str  # one of STEP_KINDS
    body: Obj  # the step's value; for apply the loaded objects under "objects"

    @property
    def mutating(self) -> bool:
        return self.kind in MUTATING

    @property
    def label(self) -> str:
        """Where the step is in the file: `steps[3]` or `setup[0]`."""
        return f"steps[{self.index}]" if self.index >= 0 else f"setup[{-1 - self.index}]"

    @property
    def timeout(self) -> float:
        """How long the step may take (`timeout`, 30 s by default; a sleep its length and
        a second more)."""
        if self.kind == "sleep":
            return float(self.body["seconds"]) + 1.0
        if self.kind == "create":  # its body is the object itself
            return DEFAULT_TIMEOUT
        return float(self.body.get("timeout", DEFAULT_TIMEOUT))

    def describe(self) -> str:
        """One line: `patch databases.examples.skiff.io/db {spec: {replicas: 3}}`."""
        body = self.body
        if self.kind == "apply":
            objects = ", ".join(_object_ref(o) for o in body["objects"])
            return f"apply {Path(body['file']).name} ({objects})" if body.get("file") \
                else f"apply {objects}"
        if self.kind == "create":
            return f"create {_object_ref(body)}"
        if self.kind == "sleep":
            return f"sleep {body['seconds']:g}s"
        target = f"{body['resource']}/{body['name']}" if body.get("name") else body["resource"]
        if self.kind == "patch":
            return f"patch {target} {flow(body['patch'])}"
        if self.kind == "scale":
            return f"scale {target} to {body['replicas']}"
        if self.kind == "delete":
            return f"delete {target}"
        return f"wait {target} {wait_goal(body)}"


@dataclass(frozen=True)
class Invariant:
    name: str
    cel: str = ""
    command: str = ""


@dataclass(frozen=True)
class Workload:
    path: Path
    namespace: str
    setup: tuple[Step, ...]
    steps: tuple[Step, ...]
    compare: tuple[str, ...]
    invariants: tuple[Invariant, ...]


def flow(value: Any) -> str:
    """A value as compact flow-style YAML: `{spec: {replicas: 3}}`."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str) and (not value or value.strip() != value
                                   or any(c in value for c in ",:{}[]\"'#")):
        return '"' + value.replace('"', '\\"') + '"'
    return str(value)


def wait_goal(body: Mapping[str, Any]) -> str:
    """What a wait step waits for, in words."""
    goal = []
    if body.get("selector"):
        goal.append(f"matching {body['selector']}")
    if body.get("count") is not None:
        goal.append(f"count {body['count']}")
    if "jsonpath" in body:
        if "value" in body:
            op = "!=" if body.get("not") else "=="
            goal.append(f"{body['jsonpath']} {op} {flow(body['value'])}")
        else:
            goal.append(f"{body['jsonpath']} {'empty' if body.get('not') else 'non-empty'}")
    if "condition" in body:
        goal.append(f"condition {body['condition']}")
    if "exists" in body or not goal:
        goal.append("exists" if body.get("exists", True) else "gone")
    return " ".join(goal)


def _object_ref(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name") or f"{meta.get('generateName', '')}*"
    ns = meta.get("namespace")
    return f"{obj.get('kind')} {ns + '/' if ns else ''}{name}"


# -- loading -------------------------------------------------------------------------------


class _Invalid(Exception):
    def __init__(self, error: FieldError | str) -> None:
        super().__init__(str(error))


def load_workload(path: Path) -> Workload:
    """Read and check a workload file; WorkloadError names the first field that is wrong."""
    where = str(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise WorkloadError(where, f"cannot read the workload file: {err.strerror}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise WorkloadError(where, f"not YAML: {_yaml_problem(err)}") from None
    try:
        return _workload(path, doc)
    except _Invalid as err:
        raise WorkloadError(where, str(err)) from None


def _yaml_problem(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    return f"{problem} (line {mark.line + 1})" if mark is not None else str(problem)


def _workload(path: Path, doc: Any) -> Workload:
    if not isinstance(doc, dict):
        raise _Invalid("a workload is a mapping with `steps` (and `namespace`, `setup`, "
                       "`compare`, `invariants`)")
    for key in doc:
        if key not in _TOP_FIELDS:
            raise _Invalid(not_supported(str(key), key, list(_TOP_FIELDS)))
    namespace = doc.get("namespace", DEFAULT_NAMESPACE)
    if not isinstance(namespace, str) or not namespace:
        raise _Invalid(invalid("namespace", namespace, "must be a namespace name"))
    if problems := dns1123_label_problems(namespace):
        raise _Invalid(invalid("namespace", namespace, problems[0]))
    if "steps" not in doc:
        raise _Invalid(required("steps"))
    base = path.resolve().parent
    setup = tuple(_step(item, f"setup[{i}]", -1 - i, base)
                  for i, item in enumerate(_list(doc.get("setup") or [], "setup")))
    steps = tuple(_step(item, f"steps[{i}]", i, base)
                  for i, item in enumerate(_list(doc["steps"] or [], "steps")))
    compare = tuple(_string(item, f"compare[{i}]")
                    for i, item in enumerate(_list(doc.get("compare") or [], "compare")))
    invariants = tuple(_invariant(item, f"invariants[{i}]") for i, item in
                       enumerate(_list(doc.get("invariants") or [], "invariants")))
    names = [inv.name for inv in invariants]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise _Invalid(FieldError(f"invariants[{i}].name", "Duplicate value", "", name))
    return Workload(path=path, namespace=namespace, setup=setup, steps=steps,
                    compare=compare, invariants=invariants)


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _Invalid(invalid(where, _shown(value), "must be a list"))
    return value


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Invalid(invalid(where, _shown(value), "must be a mapping"))
    return value


def _string(value: Any, where: str, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise _Invalid(invalid(where, _shown(value), "must be a string"))
    if not value and not empty:
        raise _Invalid(required(where))
    return value


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value < 0:
        raise _Invalid(invalid(where, _shown(value), "must be a number of seconds >= 0"))
    return float(value)


def _shown(value: Any) -> Any:
    return flow(value) if isinstance(value, dict | list) else value


def _step(item: Any, where: str, index: int, base: Path) -> Step:
    if not isinstance(item, dict) or len(item) != 1:
        raise _Invalid(invalid(where, _shown(item),
                               f"a step is a mapping with one of {', '.join(STEP_KINDS)}"))
    ((kind, value),) = item.items()
    if kind not in STEP_KINDS:
        raise _Invalid(not_supported(f"{where}.{kind}", kind, list(STEP_KINDS)))
    at = f"{where}.{kind}"
    body = _BODIES[kind](value, at, base)
    return Step(index=index, kind=kind, body=body)


def _fields(value: Mapping[str, Any], at: str, allowed: tuple[str, ...]) -> None:
    for key in value:
        if key not in allowed:
            raise _Invalid(not_supported(f"{at}.{key}", key, list(allowed)))


def _timeout(value: Mapping[str, Any], at: str) -> dict[str, Any]:
    if "timeout" not in value:
        return {}
    return {"timeout": _number(value["timeout"], f"{at}.timeout")}


def _apply(value: Any, at: str, base: Path) -> Obj:
    if isinstance(value, str):
        return {"file": str(base / value), "objects": _manifests(base / value, at, value)}
    spec = _mapping(value, at)
    _fields(spec, at, ("file", "manifest", "timeout"))
    if ("file" in spec) == ("manifest" in spec):
        raise _Invalid(required(at, "a file path, `file` or `manifest`"))
    body: Obj = _timeout(spec, at)
    if "file" in spec:
        name = _string(spec["file"], f"{at}.file")
        return {**body, "file": str(base / name),
                "objects": _manifests(base / name, f"{at}.file", name)}
    manifest = spec["manifest"]
    items = manifest if isinstance(manifest, list) else [manifest]
    objects = [_object(obj, f"{at}.manifest" + (f"[{i}]" if isinstance(manifest, list)
                                                 else ""), generate=False)
               for i, obj in enumerate(items)]
    return {**body, "objects": objects}


def _manifests(file: Path, at: str, shown: str) -> list[Obj]:
    try:
        docs = list(yaml.safe_load_all(file.read_text()))
    except OSError as err:
        raise _Invalid(invalid(at, shown, f"cannot read {file}: {err.strerror}")) from None
    except yaml.YAMLError as err:
        raise _Invalid(invalid(at, shown, f"not YAML: {_yaml_problem(err)}")) from None
    objects: list[Obj] = []
    for doc in docs:
        if doc is None:
            continue
        if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") \
                and isinstance(doc.get("items"), list):
            objects.extend(doc["items"])
        else:
            objects.append(doc)
    if not objects:
        raise _Invalid(invalid(at, shown, "holds no object"))
    return [_object(obj, f"{at}[{i}]", generate=False) for i, obj in enumerate(objects)]


def _object(value: Any, at: str, *, generate: bool) -> Obj:
    obj = _mapping(value, at)
    for key in ("apiVersion", "kind"):
        _string(obj.get(key, ""), f"{at}.{key}")
    meta = _mapping(obj.get("metadata", {}), f"{at}.metadata")
    if not meta.get("name") and not (generate and meta.get("generateName")):
        raise _Invalid(required(f"{at}.metadata.name",
                                "or metadata.generateName" if generate else ""))
    return obj


def _create(value: Any, at: str, base: Path) -> Obj:
    return _object(value, at, generate=True)


_REF_FIELDS = ("resource", "name", "namespace")


def _ref(spec: Mapping[str, Any], at: str, *, name: bool = True) -> Obj:
    body: Obj = {"resource": _string(spec.get("resource", ""), f"{at}.resource")}
    if name or "name" in spec:
        body["name"] = _string(spec.get("name", ""), f"{at}.name")
    if "namespace" in spec:
        body["namespace"] = _string(spec["namespace"], f"{at}.namespace")
    return body


def _patch(value: Any, at: str, base: Path) -> Obj:
    spec = _mapping(value, at)
    _fields(spec, at, (*_REF_FIELDS, "patch", "timeout"))
    body = _ref(spec, at)
    if "patch" not in spec:
        raise _Invalid(required(f"{at}.patch"))
    return {**body, "patch": _mapping(spec["patch"], f"{at}.patch"), **_timeout(spec, at)}


def _scale(value: Any, at: str, base: Path) -> Obj:
    spec = _mapping(value, at)
    _fields(spec, at, (*_REF_FIELDS, "replicas", "timeout"))
    body = _ref(spec, at)
    if "replicas" not in spec:
        raise _Invalid(required(f"{at}.replicas"))
    replicas = spec["replicas"]
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise _Invalid(invalid(f"{at}.replicas", _shown(replicas),
                               "must be a whole number >= 0"))
    return {**body, "replicas": replicas, **_timeout(spec, at)}


def _delete(value: Any, at: str, base: Path) -> Obj:
    spec = _mapping(value, at)
    _fields(spec, at, (*_REF_FIELDS, "timeout"))
    return {**_ref(spec, at), **_timeout(spec, at)}


_WAIT_FIELDS = (*_REF_FIELDS, "selector", "count", "exists", "jsonpath", "value", "not",
                "condition", "timeout")


def _wait(value: Any, at: str, base: Path) -> Obj:
    spec = _mapping(value, at)
    _fields(spec, at, _WAIT_FIELDS)
    body = _ref(spec, at, name=False)
    if "selector" in spec:
        body["selector"] = _string(spec["selector"], f"{at}.selector", empty=True)
    if "count" in spec:
        count = spec["count"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise _Invalid(invalid(f"{at}.count", _shown(count), "must be a whole number >= 0"))
        if "name" in body:
            raise _Invalid(invalid(f"{at}.count", count, "counts objects: not with `name`"))
        body["count"] = count
    for key in ("exists", "not"):
        if key in spec:
            if not isinstance(spec[key], bool):
                raise _Invalid(invalid(f"{at}.{key}", _shown(spec[key]), "must be true or false"))
            body[key] = spec[key]
    for key in ("jsonpath", "condition"):
        if key in spec:
            body[key] = _string(spec[key], f"{at}.{key}")
            if "name" not in body:
                raise _Invalid(required(f"{at}.name", f"`{key}` reads one object"))
    if "jsonpath" in body:
        try:
            parse(body["jsonpath"])
        except JsonPathError as err:
            raise _Invalid(invalid(f"{at}.jsonpath", body["jsonpath"], str(err))) from None
    if "value" in spec:
        if "jsonpath" not in body:
            raise _Invalid(required(f"{at}.jsonpath", "`value` is the text a jsonpath reads"))
        body["value"] = spec["value"] if isinstance(spec["value"], str) else flow(spec["value"])
    if "not" in body and "jsonpath" not in body:
        raise _Invalid(required(f"{at}.jsonpath", "`not` negates a jsonpath's comparison"))
    if "name" not in body and "count" not in body:
        if "exists" in body:
            raise _Invalid(required(f"{at}.name", "`exists` is about one object"))
        body["count"] = None  # any: at least one
    return {**body, **_timeout(spec, at)}


def _sleep(value: Any, at: str, base: Path) -> Obj:
    return {"seconds": _number(value, at)}


def _invariant(item: Any, at: str) -> Invariant:
    spec = _mapping(item, at)
    _fields(spec, at, ("name", "cel", "command"))
    name = _string(spec.get("name", ""), f"{at}.name")
    if ("cel" in spec) == ("command" in spec):
        raise _Invalid(required(f"{at}.cel", "one of `cel` or `command`"))
    if "cel" in spec:
        return Invariant(name=name, cel=_string(spec["cel"], f"{at}.cel"))
    return Invariant(name=name, command=_string(spec["command"], f"{at}.command"))


_BODIES: dict[str, Callable[[Any, str, Path], Obj]] = {
    "apply": _apply, "create": _create, "patch": _patch, "scale": _scale,
    "delete": _delete, "wait": _wait, "sleep": _sleep}
