"""Running `skiff explore` workload steps (SPEC CT2) against the in-memory client: apply
creates then merges, objects land in the workload's namespace, patches merge (RFC 7386) and
survive a Conflict, waits succeed when the cluster shows what they ask and otherwise fail
naming the step and what they saw."""

from __future__ import annotations

from pathlib import Path

import pytest

from skiff.client.fake import FakeClient, conflicting
from skiff.explore.steps import StepError, merge_patch, run_step
from skiff.explore.workload import Step, load_workload

NS = "demo"


def steps(tmp_path: Path, text: str) -> tuple[Step, ...]:
    path = tmp_path / "w.yaml"
    path.write_text(f"namespace: {NS}\nsteps:\n{text}")
    return load_workload(path).steps


async def run_all(client: FakeClient, tmp_path: Path, text: str) -> None:
    for step in steps(tmp_path, text):
        await run_step(client, step, namespace=NS)


def test_ct2_merge_patch_is_rfc7386() -> None:
    target = {"a": {"b": 1, "c": [1, 2]}, "d": "x"}
    assert merge_patch(target, {"a": {"b": None, "c": [3]}, "e": {"f": 1}}) == {
        "a": {"c": [3]}, "d": "x", "e": {"f": 1}}
    assert target == {"a": {"b": 1, "c": [1, 2]}, "d": "x"}
    assert merge_patch({"a": 1}, "text") == "text"


async def test_ct2_apply_creates_then_merges_onto_the_stored_object(tmp_path: Path) -> None:
    client = FakeClient()
    await run_all(client, tmp_path, (
        "  - apply: {manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: c, labels:"
        " {a: '1'}}, data: {x: '1'}}}\n"
        "  - apply: {manifest: {apiVersion: v1, kind: ConfigMap, metadata: {name: c}, "
        "data: {y: '2'}}}\n"
        "  - apply: {manifest: {apiVersion: v1, kind: Namespace, metadata: {name: other}}}\n"))
    stored = await client.get("configmaps", "c", NS)
    assert stored["data"] == {"x": "1", "y": "2"}
    assert stored["metadata"]["labels"] == {"a": "1"}
    assert [a.verb for a in client.calls("create")] == ["create", "create"]
    assert len(client.calls("update", "configmaps")) == 1
    assert (await client.get("namespaces", "other"))["metadata"].get("namespace") is None


async def test_ct2_create_patch_scale_delete(tmp_path: Path) -> None:
    client = FakeClient()
    await run_all(client, tmp_path, (
        "  - create: {apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {a: '1'}}\n"
        "  - create: {apiVersion: v1, kind: ConfigMap, metadata: {generateName: job-}}\n"
        "  - patch: {resource: configmaps, name: c, patch: {data: {a: null, b: '2'}}}\n"
        "  - create: {apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: "
        "{replicas: 1, selector: {matchLabels: {app: web}}, template: {metadata: {labels: "
        "{app: web}}, spec: {containers: [{name: c, image: nginx}]}}}}\n"
        "  - scale: {resource: deployments.apps, name: web, replicas: 3}\n"
        "  - delete: {resource: configmaps, name: c}\n"))
    names = [o["metadata"]["name"] for o in (await client.list("configmaps", NS))["items"]]
    assert len(names) == 1 and names[0].startswith("job-")
    assert (await client.get("deployments", "web", NS))["spec"]["replicas"] == 3
    patched = [a.object for a in client.calls("update", "configmaps")]
    assert patched and patched[0] is not None and patched[0]["data"] == {"b": "2"}


async def test_ct2_patch_is_retried_on_conflict(tmp_path: Path) -> None:
    client = FakeClient({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "c", "namespace": NS}, "data": {}})
    client.prepend_reactor("update", "configmaps", conflicting(client, times=2))
    await run_all(client, tmp_path,
                  "  - patch: {resource: configmaps, name: c, patch: {data: {a: '1'}}}\n")
    assert (await client.get("configmaps", "c", NS))["data"] == {"a": "1"}
    assert len(client.calls("update", "configmaps", failed=True)) == 2


async def test_ct2_waits_that_hold(tmp_path: Path) -> None:
    client = FakeClient(
        {"apiVersion": "v1", "kind": "ConfigMap", "data": {"job": "j1"},
         "metadata": {"name": "a", "namespace": NS, "labels": {"db": "x"}}},
        {"apiVersion": "v1", "kind": "ConfigMap", "data": {"job": ""},
         "metadata": {"name": "b", "namespace": NS, "labels": {"db": "x"}}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w", "namespace": NS},
         "spec": {}, "status": {"conditions": [{"type": "Available", "status": "True"}]}})
    await run_all(client, tmp_path, (
        "  - wait: {resource: configmaps, selector: db=x, count: 2, timeout: 1}\n"
        "  - wait: {resource: configmaps, timeout: 1}\n"
        "  - wait: {resource: configmaps, name: a, timeout: 1}\n"
        "  - wait: {resource: configmaps, name: gone, exists: false, timeout: 1}\n"
        "  - wait: {resource: configmaps, name: a, jsonpath: '{.data.job}', value: j1}\n"
        "  - wait: {resource: configmaps, name: a, jsonpath: '{.data.job}', value: '', "
        "not: true}\n"
        "  - wait: {resource: configmaps, name: a, jsonpath: '{.data.job}'}\n"
        "  - wait: {resource: configmaps, name: b, jsonpath: '{.data.job}', not: true}\n"
        "  - wait: {resource: deployments, name: w, condition: Available}\n"))


@pytest.mark.parametrize(("step", "message"), [
    pytest.param("wait: {resource: configmaps, selector: db=x, count: 2, timeout: 0.3}",
                 "steps[0] wait: 1 of 2 configmaps matching db=x in demo after 0.3s",
                 id="count"),
    pytest.param("wait: {resource: configmaps, name: a, exists: false, timeout: 0.2}",
                 "steps[0] wait: configmaps demo/a still exists after 0.2s", id="gone"),
    pytest.param("wait: {resource: configmaps, name: z, timeout: 0.2}",
                 "steps[0] wait: configmaps demo/z does not exist after 0.2s", id="exists"),
    pytest.param("wait: {resource: configmaps, name: a, jsonpath: '{.data.job}', "
                 "value: j2, timeout: 0.2}",
                 'steps[0] wait: configmaps demo/a {.data.job} is "j1" after 0.2s',
                 id="jsonpath"),
    pytest.param("wait: {resource: configmaps, name: a, condition: Ready, timeout: 0.2}",
                 "steps[0] wait: configmaps demo/a condition Ready is absent after 0.2s",
                 id="condition"),
    pytest.param("patch: {resource: configmaps, name: z, patch: {data: {}}}",
                 'steps[0] patch: configmaps "z" not found', id="patch of nothing"),
    pytest.param("create: {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}",
                 'steps[0] create: configmaps "a" already exists', id="create twice"),
    pytest.param("delete: {resource: frobs, name: a}",
                 'steps[0] delete: the server doesn\'t have a resource type "frobs"',
                 id="unknown resource"),
    pytest.param("create: {apiVersion: x.io/v1, kind: Frob, metadata: {name: a}}",
                 'steps[0] create: no kind "Frob" is served in "x.io/v1"', id="unknown kind"),
])
async def test_ct2_a_failing_step_names_itself(tmp_path: Path, step: str, message: str) -> None:
    client = FakeClient({"apiVersion": "v1", "kind": "ConfigMap", "data": {"job": "j1"},
                         "metadata": {"name": "a", "namespace": NS, "labels": {"db": "x"}}})
    with pytest.raises(StepError) as caught:
        await run_all(client, tmp_path, f"  - {step}\n")
    assert str(caught.value).startswith(message), str(caught.value)


async def test_ct2_a_patch_of_status_goes_through_the_status_subresource(
        tmp_path: Path) -> None:
    client = FakeClient({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 1},
                         "metadata": {"name": "w", "namespace": NS}, "status": {}})
    await run_all(client, tmp_path, (
        "  - patch: {resource: deployments, name: w, patch: {spec: {replicas: 2}, "
        "status: {conditions: [{type: Available, status: 'True'}]}}}\n"
        "  - wait: {resource: deployments, name: w, condition: Available, timeout: 0.2}\n"))
    stored = await client.get("deployments", "w", NS)
    assert stored["spec"]["replicas"] == 2
    assert len(client.calls("update_status", "deployments")) == 1
