"""Custom resources through the real kubectl (SPEC EX1–EX5): a CRD is established and
discovered, its objects are validated, pruned, defaulted, patched, scaled, printed with the
CRD's columns and watched, several versions are served, and deleting the CRD deletes its
objects. The CRD is the Kubernetes documentation's CronTab example, grown a little."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch

from tests.integration.crontabs import crontab, crontab_crd
from tests.integration.kubectl import kubectl


def _dict(value: object) -> dict[str, Any]:
    """The official client's custom-object answers are typed `object`: a dict here."""
    assert isinstance(value, dict), value
    return value


def _ok(result: Any) -> str:
    assert result.returncode == 0, result.stderr
    return str(result.stdout)


def _established(config: Path, group: str) -> None:
    _ok(kubectl(config, "wait", "--for=condition=Established", "--timeout=30s",
                f"crd/crontabs.{group}"))


def _setup(config: Path) -> tuple[str, str]:
    group = f"g{uuid.uuid4().hex[:8]}.example.com"
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    _ok(kubectl(config, "apply", "-f", "-", stdin=crontab_crd(group)))
    _ok(kubectl(config, "create", "namespace", namespace))
    _established(config, group)
    return group, namespace


def test_ex1_crd_is_established_named_and_discovered(kubeconfig: Path) -> None:
    group, _ = _setup(kubeconfig)
    crd = json.loads(_ok(kubectl(kubeconfig, "get", f"crd/crontabs.{group}", "-o", "json")))
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert crd["status"]["acceptedNames"]["shortNames"] == ["ct"]
    assert crd["status"]["storedVersions"] == ["v1"]
    resources = _ok(kubectl(kubeconfig, "api-resources", f"--api-group={group}"))
    assert "crontabs" in resources and "ct" in resources and "CronTab" in resources
    versions = _ok(kubectl(kubeconfig, "api-versions"))
    assert f"{group}/v1" in versions and f"{group}/v2" in versions


def test_ex2_custom_objects_are_created_patched_and_deleted_by_kubectl(
        kubeconfig: Path) -> None:
    group, ns = _setup(kubeconfig)
    _ok(kubectl(kubeconfig, "apply", "-f", "-",
                stdin=crontab("nightly", ns, group=group, cronSpec="* * * * */5",
                              image="my-cron-image")))
    got = json.loads(_ok(kubectl(kubeconfig, "get", f"crontabs.{group}", "nightly", "-n", ns,
                                 "-o", "json")))
    assert got["spec"]["replicas"] == 1  # the schema's default
    assert got["metadata"]["generation"] == 1
    _ok(kubectl(kubeconfig, "patch", f"crontabs.{group}", "nightly", "-n", ns,
                "--type=merge", "-p", '{"spec":{"image":"v2"}}'))
    patched = json.loads(_ok(kubectl(kubeconfig, "get", f"crontabs.{group}", "nightly",
                                     "-n", ns, "-o", "json")))
    assert patched["spec"]["image"] == "v2" and patched["metadata"]["generation"] == 2
    smp = kubectl(kubeconfig, "patch", f"crontabs.{group}", "nightly", "-n", ns,
                  "--type=strategic", "-p", '{"spec":{"image":"v3"}}')
    assert smp.returncode != 0 and "UnsupportedMediaType" in smp.stderr or (
        "unknown format" in smp.stderr), smp.stderr
    _ok(kubectl(kubeconfig, "delete", f"crontabs.{group}", "nightly", "-n", ns))
    assert "No resources found" in _ok(kubectl(kubeconfig, "get", f"crontabs.{group}",
                                               "-n", ns)) + kubectl(
        kubeconfig, "get", f"crontabs.{group}", "-n", ns).stderr


def test_ex3_schema_refuses_invalid_objects_with_kubernetes_messages(kubeconfig: Path) -> None:
    group, ns = _setup(kubeconfig)
    bad = kubectl(kubeconfig, "apply", "-f", "-",
                  stdin=crontab("bad", ns, group=group, cronSpec="every minute", replicas=20))
    assert bad.returncode != 0
    assert "spec.cronSpec" in bad.stderr and "should match" in bad.stderr, bad.stderr
    assert "spec.replicas" in bad.stderr and "less than or equal to 10" in bad.stderr
    missing = kubectl(kubeconfig, "apply", "-f", "-",
                      stdin=crontab("missing", ns, group=group, image="x"))
    assert missing.returncode != 0 and "spec.cronSpec: Required value" in missing.stderr
    # an unknown field: kubectl's default (Strict) refuses it; Warn stores without it
    unknown = crontab("unknown", ns, group=group, cronSpec="* * * * *", colour="red")
    strict = kubectl(kubeconfig, "apply", "-f", "-", stdin=unknown)
    assert strict.returncode != 0 and 'unknown field "spec.colour"' in strict.stderr
    warned = kubectl(kubeconfig, "apply", "--validate=warn", "-f", "-", stdin=unknown)
    assert warned.returncode == 0 and 'unknown field "spec.colour"' in warned.stderr
    stored = json.loads(_ok(kubectl(kubeconfig, "get", f"crontabs.{group}", "unknown",
                                    "-n", ns, "-o", "json")))
    assert "colour" not in stored["spec"]


def test_ex4_scale_status_and_printer_columns(kubeconfig: Path) -> None:
    group, ns = _setup(kubeconfig)
    _ok(kubectl(kubeconfig, "apply", "-f", "-",
                stdin=crontab("scaled", ns, group=group, cronSpec="*/5 * * * *")))
    _ok(kubectl(kubeconfig, "scale", f"crontabs.{group}/scaled", "-n", ns, "--replicas=3"))
    table = _ok(kubectl(kubeconfig, "get", f"crontabs.{group}", "-n", ns))
    header, row = table.splitlines()[:2]
    assert header.split() == ["NAME", "SPEC", "REPLICAS", "AGE"], header
    assert row.split()[:2] == ["scaled", "*/5"] and row.split()[-2] == "3", row
    # status only through the status subresource
    _ok(kubectl(kubeconfig, "patch", f"crontabs.{group}", "scaled", "-n", ns,
                "--subresource=status", "--type=merge", "-p",
                '{"status":{"replicas":3,"labelSelector":"app=cron"}}'))
    _ok(kubectl(kubeconfig, "patch", f"crontabs.{group}", "scaled", "-n", ns, "--type=merge",
                "-p", '{"status":{"replicas":99}}'))
    got = json.loads(_ok(kubectl(kubeconfig, "get", f"crontabs.{group}", "scaled", "-n", ns,
                                 "-o", "json")))
    assert got["status"] == {"replicas": 3, "labelSelector": "app=cron"}
    scale = json.loads(_ok(kubectl(kubeconfig, "get", "--raw",
                                   f"/apis/{group}/v1/namespaces/{ns}/crontabs/scaled/scale")))
    assert scale["spec"]["replicas"] == 3 and scale["status"]["selector"] == "app=cron"
    # `kubectl get all` lists the CRD's category
    assert "scaled" in _ok(kubectl(kubeconfig, "get", "all", "-n", ns))


def test_ex5_a_second_version_is_served_with_its_api_version(kubeconfig: Path) -> None:
    group, ns = _setup(kubeconfig)
    _ok(kubectl(kubeconfig, "apply", "-f", "-",
                stdin=crontab("versions", ns, group=group, cronSpec="* * * * *")))
    v2 = json.loads(_ok(kubectl(kubeconfig, "get", "--raw",
                                f"/apis/{group}/v2/namespaces/{ns}/crontabs/versions")))
    assert v2["apiVersion"] == f"{group}/v2" and v2["spec"]["cronSpec"] == "* * * * *"
    v1 = json.loads(_ok(kubectl(kubeconfig, "get", "--raw",
                                f"/apis/{group}/v1/namespaces/{ns}/crontabs/versions")))
    assert v1["apiVersion"] == f"{group}/v1"


def test_ex1_deleting_the_crd_deletes_its_objects(kubeconfig: Path) -> None:
    group, ns = _setup(kubeconfig)
    for name in ("a", "b"):
        _ok(kubectl(kubeconfig, "apply", "-f", "-",
                    stdin=crontab(name, ns, group=group, cronSpec="* * * * *")))
    _ok(kubectl(kubeconfig, "delete", f"crd/crontabs.{group}", "--timeout=60s"))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if kubectl(kubeconfig, "get", f"crd/crontabs.{group}").returncode != 0:
            break
        time.sleep(0.5)
    assert kubectl(kubeconfig, "get", f"crd/crontabs.{group}").returncode != 0
    gone = kubectl(kubeconfig, "get", "--raw", f"/apis/{group}/v1/namespaces/{ns}/crontabs")
    assert gone.returncode != 0 and "NotFound" in gone.stderr or "not found" in gone.stderr
    # re-created, the resource starts empty: the objects were deleted, not hidden
    _ok(kubectl(kubeconfig, "apply", "-f", "-", stdin=crontab_crd(group)))
    _established(kubeconfig, group)
    listed = json.loads(_ok(kubectl(kubeconfig, "get", f"crontabs.{group}", "-n", ns,
                                    "-o", "json")))
    assert listed["items"] == []


def test_ex4_kubectl_explain_and_server_side_apply_read_the_crd_schema(
        kubeconfig: Path) -> None:
    group, ns = _setup(kubeconfig)
    explained = _ok(kubectl(kubeconfig, "explain", "crontabs.spec",
                            f"--api-version={group}/v1"))
    assert "cronSpec" in explained and "replicas" in explained, explained
    manifest = crontab("applied", ns, group=group, cronSpec="* * * * *", image="one")
    _ok(kubectl(kubeconfig, "apply", "--server-side", "--field-manager=alice", "-f", "-",
                stdin=manifest))
    _ok(kubectl(kubeconfig, "apply", "--server-side", "--field-manager=alice", "-f", "-",
                stdin=manifest.replace('"one"', '"two"')))
    got = json.loads(_ok(kubectl(kubeconfig, "get", f"crontabs.{group}", "applied", "-n", ns,
                                 "-o", "json", "--show-managed-fields")))
    assert got["spec"]["image"] == "two"
    assert [m["manager"] for m in got["metadata"]["managedFields"]] == ["alice"]
    # another manager's conflicting apply is refused without --force-conflicts
    clash = kubectl(kubeconfig, "apply", "--server-side", "--field-manager=bob", "-f", "-",
                    stdin=manifest.replace('"one"', '"three"'))
    assert clash.returncode != 0 and "conflict" in clash.stderr.lower(), clash.stderr


def test_ex2_official_client_lists_watches_and_selects_custom_objects(
        kubeconfig: Path) -> None:
    group, ns = _setup(kubeconfig)
    with config.new_client_from_config(config_file=str(kubeconfig)) as api_client:
        custom = client.CustomObjectsApi(api_client)
        listed = _dict(custom.list_namespaced_custom_object(group, "v1", ns, "crontabs"))
        start = listed["metadata"]["resourceVersion"]
        for name, image in (("one", "red"), ("two", "blue")):
            body = json.loads(crontab(name, ns, group=group, cronSpec="* * * * *",
                                      image=image))
            body["metadata"]["labels"] = {"colour": image}
            custom.create_namespaced_custom_object(group, "v1", ns, "crontabs", body)
        custom.patch_namespaced_custom_object(group, "v1", ns, "crontabs", "one",
                                              {"spec": {"replicas": 2}})
        seen = []
        for ev in watch.Watch().stream(custom.list_namespaced_custom_object, group, "v1",
                                       ns, "crontabs", resource_version=start,
                                       timeout_seconds=5):
            seen.append((ev["type"], ev["object"]["metadata"]["name"]))
            if len(seen) == 3:
                break
        assert seen == [("ADDED", "one"), ("ADDED", "two"), ("MODIFIED", "one")]
        by_label = _dict(custom.list_namespaced_custom_object(
            group, "v1", ns, "crontabs", label_selector="colour=blue"))
        assert [o["metadata"]["name"] for o in by_label["items"]] == ["two"]
        by_field = _dict(custom.list_namespaced_custom_object(
            group, "v1", ns, "crontabs", field_selector="spec.image=red"))
        assert [o["metadata"]["name"] for o in by_field["items"]] == ["one"]
        by_name = _dict(custom.list_cluster_custom_object(
            group, "v1", "crontabs", field_selector="metadata.name=two"))
        assert [o["metadata"]["name"] for o in by_name["items"]] == ["two"]
        try:
            custom.list_namespaced_custom_object(group, "v1", ns, "crontabs",
                                                 field_selector="spec.cronSpec=x")
            raise AssertionError("a field that is not selectable was accepted")
        except client.ApiException as err:
            assert err.status == 400 and "spec.cronSpec" in str(err.body), err.body
