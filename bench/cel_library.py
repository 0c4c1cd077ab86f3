"""Which CEL library Skiff evaluates `x-kubernetes-validations` with: the measurement.

The store evaluates every CRD rule on every write, so a rule's evaluation time is paid per
request. This bench compiles and evaluates the same kube-style rules with each candidate
PyPI library that is installed, and prints microseconds per evaluation (compiled once) and
per compile, with the ratio against the fastest candidate:

- `cel-expr-python` (`cel_expr_python`): CEL's own C++ runtime and type checker, wrapped;
- `common-expression-language` (`cel`): the Rust cel-interpreter crate, wrapped (no checker);
- `cel-python` (`celpy`): a pure-Python interpreter on lark.

A candidate that is not installed is skipped; a rule a candidate cannot run (a function it
lacks) is reported as such rather than timed. Last, what Skiff's own `validate_rules` costs a
write of a typical custom object (three rules, one a transition rule) on the chosen library.
Run: `.venv/bin/python bench/cel_library.py [--evals 10000]`.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections.abc import Callable
from typing import Any

RULES = [
    "self.replicas <= self.maxReplicas",
    "self.items.all(x, x.size() < 10)",
    "has(self.name) && self.name.startsWith('web') && self.name.endsWith('1')",
    "self.name.matches('^[a-z0-9-]+$') && self.name.contains('b')",
    "self.name.lowerAscii() == self.name",
    "self.items.exists(x, x == 'bb') && self.items.map(x, x.size()).size() == 2",
]
SELF: dict[str, Any] = {"replicas": 3, "maxReplicas": 5, "name": "web-b1",
                        "items": ["a", "bb", "ccc"]}

Compiled = Callable[[], Any]


def cel_expr_python(rule: str) -> tuple[Compiled, Callable[[], Any]]:
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_strings

    env = cel.NewEnv(variables={"self": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)},
                     extensions=[ext_strings.ExtStrings()])
    program = env.compile(rule)
    data = {"self": SELF}
    return (lambda: program.eval(data=data).value()), (lambda: env.compile(rule))


def common_expression_language(rule: str) -> tuple[Compiled, Callable[[], Any]]:
    import cel  # type: ignore[import-not-found]

    program = cel.compile(rule)
    data = {"self": SELF}
    return (lambda: program.execute(data)), (lambda: cel.compile(rule))


def cel_python(rule: str) -> tuple[Compiled, Callable[[], Any]]:
    import celpy  # type: ignore[import-not-found]

    env = celpy.Environment()
    program = env.program(env.compile(rule))
    data = {"self": celpy.json_to_cel(SELF)}
    return (lambda: program.evaluate(data)), (lambda: env.program(env.compile(rule)))


CANDIDATES = {
    "cel-expr-python": ("cel_expr_python", cel_expr_python),
    "common-expression-language": ("cel", common_expression_language),
    "cel-python": ("celpy", cel_python),
}


def per_call_us(fn: Callable[[], Any], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evals", type=int, default=10_000)
    args = parser.parse_args()
    timings: dict[str, dict[str, tuple[float, float]]] = {}
    for name, (module, make) in CANDIDATES.items():
        if importlib.util.find_spec(module) is None:
            print(f"{name}: not installed, skipped")
            continue
        timings[name] = {}
        for rule in RULES:
            try:
                run, compile_again = make(rule)
                result = run()
            except Exception as err:  # a candidate lacking a function: reported, not timed
                print(f"{name}: cannot run {rule!r}: {str(err).splitlines()[0][:100]}")
                continue
            ev = per_call_us(run, args.evals)
            co = per_call_us(compile_again, max(args.evals // 20, 50))
            timings[name][rule] = (ev, co)
            print(f"{name:28} eval {ev:9.1f} us  compile {co:9.1f} us  -> {result!r:6}  {rule}")
    if not timings:
        return
    common = [r for r in RULES if all(r in t for t in timings.values())]
    totals = {name: (sum(t[r][0] for r in common), sum(t[r][1] for r in common))
              for name, t in timings.items()}
    best_eval = min(t[0] for t in totals.values())
    best_compile = min(t[1] for t in totals.values())
    print(f"\nsum over the {len(common)} rules every candidate ran (ratio against the fastest):")
    for name, (ev, co) in totals.items():
        print(f"{name:28} eval {ev:9.1f} us (x{ev / best_eval:6.1f})  "
              f"compile {co:9.1f} us (x{co / best_compile:6.1f})")
    skiff_per_write(max(args.evals // 5, 100))


def skiff_per_write(n: int) -> None:
    try:
        from skiff.api.apiextensions.cel import validate_rules
    except ImportError:
        return
    spec = {"type": "object", "x-kubernetes-validations": [
        {"rule": "self.replicas <= self.maxReplicas"},
        {"rule": "self.items.all(x, x.size() < 10)"}],
        "properties": {"replicas": {"type": "integer"}, "maxReplicas": {"type": "integer"},
                       "items": {"type": "array", "items": {"type": "string"}},
                       "name": {"type": "string", "x-kubernetes-validations": [
                           {"rule": "self == oldSelf"}]}}}
    schema = {"type": "object", "properties": {"spec": spec}}
    obj = {"apiVersion": "example.com/v1", "kind": "Web", "metadata": {"name": "w"},
           "spec": dict(SELF, items=["a", "bb", "ccc"])}
    us = per_call_us(lambda: validate_rules(schema, obj, obj), n)
    print(f"\nskiff validate_rules, 3 rules, per update: {us:.1f} us")


if __name__ == "__main__":
    main()
