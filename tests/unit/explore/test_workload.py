"""Loading a `skiff explore` workload file (SPEC CT2): what a user writes becomes steps, and
each mistake is reported before anything runs, naming its field as Kubernetes would."""

from __future__ import annotations

from pathlib import Path

import pytest

from skiff.explore.workload import DEFAULT_NAMESPACE, Invariant, WorkloadError, load_workload

DB = """\
apiVersion: examples.skiff.io/v1
kind: Database
metadata: {name: db}
spec: {replicas: 1}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {a: "1"}
"""

FULL = """\
namespace: demo
setup:
  - apply: crd/database.yaml
steps:
  - apply: db.yaml
  - apply: {manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: inline}}}
  - create: {apiVersion: v1, kind: ConfigMap, metadata: {generateName: job-}}
  - patch: {resource: databases.examples.skiff.io, name: db, patch: {spec: {replicas: 3}}}
  - scale: {resource: deployments.apps, name: web, replicas: 3}
  - delete: {resource: claims.examples.skiff.io, name: c1, namespace: other}
  - wait: {resource: configmaps, selector: "examples.skiff.io/database=db", count: 2, timeout: 20}
  - wait: {resource: databases.examples.skiff.io, name: db, exists: false, timeout: 10}
  - wait: {resource: databases.examples.skiff.io, name: db, jsonpath: "{.status.job}",
           value: "", not: true}
  - wait: {resource: databases.examples.skiff.io, name: db, condition: Ready}
  - sleep: 2
compare: [configmaps, databases.examples.skiff.io]
invariants:
  - {name: at most two, cel: "objects['configmaps'].size() <= 2"}
  - {name: my check, command: python check.py}
"""


def write(tmp_path: Path, text: str, *, manifests: bool = True) -> Path:
    if manifests:
        (tmp_path / "db.yaml").write_text(DB)
        (tmp_path / "crd").mkdir(exist_ok=True)
        (tmp_path / "crd" / "database.yaml").write_text(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
            "metadata: {name: databases.examples.skiff.io}\nspec: {}\n")
    path = tmp_path / "workload.yaml"
    path.write_text(text)
    return path


def test_ct2_workload_every_step_kind_loads(tmp_path: Path) -> None:
    workload = load_workload(write(tmp_path, FULL))
    assert workload.namespace == "demo"
    assert [s.kind for s in workload.steps] == [
        "apply", "apply", "create", "patch", "scale", "delete", "wait", "wait", "wait",
        "wait", "sleep"]
    assert [s.index for s in workload.steps] == list(range(11))
    assert [s.index for s in workload.setup] == [-1]
    assert workload.setup[0].body["objects"][0]["kind"] == "CustomResourceDefinition"
    apply = workload.steps[0]
    assert [o["metadata"]["name"] for o in apply.body["objects"]] == ["db", "settings"]
    assert apply.body["file"] == str(tmp_path / "db.yaml")
    assert workload.compare == ("configmaps", "databases.examples.skiff.io")
    assert workload.invariants == (
        Invariant(name="at most two", cel="objects['configmaps'].size() <= 2"),
        Invariant(name="my check", command="python check.py"))
    assert [s.mutating for s in workload.steps] == [True] * 6 + [False] * 5
    assert workload.steps[6].timeout == 20.0 and workload.steps[3].timeout == 30.0
    assert workload.steps[10].body == {"seconds": 2.0}


def test_ct2_workload_steps_describe_themselves_in_one_line(tmp_path: Path) -> None:
    steps = load_workload(write(tmp_path, FULL)).steps
    assert [s.describe() for s in steps] == [
        "apply db.yaml (Database db, ConfigMap settings)",
        "apply ConfigMap inline",
        "create ConfigMap job-*",
        "patch databases.examples.skiff.io/db {spec: {replicas: 3}}",
        "scale deployments.apps/web to 3",
        "delete claims.examples.skiff.io/c1",
        "wait configmaps matching examples.skiff.io/database=db count 2",
        "wait databases.examples.skiff.io/db gone",
        'wait databases.examples.skiff.io/db {.status.job} != ""',
        "wait databases.examples.skiff.io/db condition Ready",
        "sleep 2s",
    ]
    assert steps[0].label == "steps[0]"


def test_ct2_workload_defaults(tmp_path: Path) -> None:
    workload = load_workload(write(tmp_path, "steps:\n  - sleep: 0.5\n"))
    assert workload.namespace == DEFAULT_NAMESPACE == "explore"
    assert workload.setup == () and workload.compare == () and workload.invariants == ()


@pytest.mark.parametrize(("text", "problem"), [
    pytest.param("namespace: demo\n", "steps: Required value", id="no steps"),
    pytest.param("steps: {a: 1}\n", 'steps: Invalid value: "{a: 1}": must be a list',
                 id="steps not a list"),
    pytest.param("namespace: Demo_1\nsteps: []\n", 'namespace: Invalid value: "Demo_1"',
                 id="bad namespace"),
    pytest.param("stepz: []\n", 'stepz: Unsupported value: "stepz"', id="unknown field"),
    pytest.param("steps:\n  - frobnicate: 1\n",
                 'steps[0].frobnicate: Unsupported value: "frobnicate"', id="unknown step"),
    pytest.param("steps:\n  - sleep: 1\n    wait: {}\n", "steps[0]: Invalid value",
                 id="two kinds in one step"),
    pytest.param("steps:\n  - sleep: 1\n  - sleep: 1\n  - patch: {resource: configmaps, "
                 "patch: {data: {a: b}}}\n", "steps[2].patch.name: Required value",
                 id="patch without name"),
    pytest.param("steps:\n  - patch: {resource: configmaps, name: x}\n",
                 "steps[0].patch.patch: Required value", id="patch without patch"),
    pytest.param("steps:\n  - patch: {name: x, patch: {}}\n",
                 "steps[0].patch.resource: Required value", id="patch without resource"),
    pytest.param("steps:\n  - scale: {resource: deployments, name: w, replicas: -1}\n",
                 "steps[0].scale.replicas: Invalid value: -1", id="negative replicas"),
    pytest.param("steps:\n  - delete: {resource: configmaps, name: x, grace: 1}\n",
                 'steps[0].delete.grace: Unsupported value: "grace"', id="unknown delete field"),
    pytest.param("steps:\n  - wait: {resource: configmaps, name: x, timeout: soon}\n",
                 'steps[0].wait.timeout: Invalid value: "soon"', id="timeout not a number"),
    pytest.param("steps:\n  - wait: {resource: configmaps, name: x, count: 2}\n",
                 "steps[0].wait.count: Invalid value: 2", id="count with name"),
    pytest.param("steps:\n  - wait: {resource: configmaps, jsonpath: '{.data.a}'}\n",
                 "steps[0].wait.name: Required value", id="jsonpath without name"),
    pytest.param("steps:\n  - wait: {resource: configmaps, name: x, jsonpath: 'data'}\n",
                 'steps[0].wait.jsonpath: Invalid value: "data"', id="bad jsonpath"),
    pytest.param("steps:\n  - wait: {resource: configmaps, name: x, value: a}\n",
                 "steps[0].wait.jsonpath: Required value", id="value without jsonpath"),
    pytest.param("steps:\n  - wait: {resource: configmaps, name: x, exists: maybe}\n",
                 'steps[0].wait.exists: Invalid value: "maybe"', id="exists not a bool"),
    pytest.param("steps:\n  - sleep: -1\n", "steps[0].sleep: Invalid value: -1",
                 id="negative sleep"),
    pytest.param("steps:\n  - create: {apiVersion: v1, kind: ConfigMap, metadata: {}}\n",
                 "steps[0].create.metadata.name: Required value", id="create without name"),
    pytest.param("steps:\n  - create: {kind: ConfigMap, metadata: {name: a}}\n",
                 "steps[0].create.apiVersion: Required value", id="create without apiVersion"),
    pytest.param("steps:\n  - apply: {manifest: {apiVersion: v1, metadata: {name: a}}}\n",
                 "steps[0].apply.manifest.kind: Required value", id="manifest without kind"),
    pytest.param("steps:\n  - apply: missing.yaml\n",
                 'steps[0].apply: Invalid value: "missing.yaml": cannot read',
                 id="apply of a missing file"),
    pytest.param("setup:\n  - apply: empty.yaml\nsteps: []\n",
                 'setup[0].apply: Invalid value: "empty.yaml": holds no object',
                 id="apply of an empty file"),
    pytest.param("steps:\n  - apply: {}\n", "steps[0].apply: Required value",
                 id="apply of nothing"),
    pytest.param("steps: []\ncompare: [configmaps, 3]\n",
                 "compare[1]: Invalid value: 3: must be a string", id="compare not strings"),
    pytest.param("steps: []\ninvariants:\n  - {name: x}\n",
                 "invariants[0].cel: Required value: one of `cel` or `command`",
                 id="invariant without a check"),
    pytest.param("steps: []\ninvariants:\n  - {cel: 'true'}\n",
                 "invariants[0].name: Required value", id="invariant without a name"),
    pytest.param("steps: []\ninvariants:\n  - {name: x, cel: 'true'}\n  - {name: x, "
                 "command: 'true'}\n", 'invariants[1].name: Duplicate value: "x"',
                 id="invariants with one name"),
    pytest.param("steps: [\n", "not YAML", id="not yaml"),
])
def test_ct2_workload_errors_name_the_field(tmp_path: Path, text: str, problem: str) -> None:
    (tmp_path / "empty.yaml").write_text("---\n")
    path = write(tmp_path, text)
    with pytest.raises(WorkloadError) as caught:
        load_workload(path)
    assert caught.value.problem.startswith(problem), caught.value.problem
    assert caught.value.path == str(path)
    assert str(caught.value) == f"{path}: {caught.value.problem}"


def test_ct2_workload_missing_file_is_a_workload_error(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="cannot read the workload file"):
        load_workload(tmp_path / "nope.yaml")


def test_ct2_workload_apply_reads_a_list_kind_and_a_manifest_list(tmp_path: Path) -> None:
    (tmp_path / "list.yaml").write_text(
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n"
        "- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n")
    workload = load_workload(write(tmp_path, (
        "steps:\n  - apply: {file: list.yaml, timeout: 5}\n"
        "  - apply: {manifest: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]}\n"),
        manifests=False))
    first, second = workload.steps
    assert [o["metadata"]["name"] for o in first.body["objects"]] == ["a", "b"]
    assert first.timeout == 5.0
    assert [o["metadata"]["name"] for o in second.body["objects"]] == ["c"]


def test_ct2_workload_step_timeouts(tmp_path: Path) -> None:
    steps = load_workload(write(tmp_path, (
        "steps:\n  - sleep: 40\n"
        "  - create: {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n"
        "  - delete: {resource: configmaps, name: a, timeout: 2.5}\n"))).steps
    assert [s.timeout for s in steps] == [41.0, 30.0, 2.5]
