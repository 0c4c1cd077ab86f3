"""The real `kubectl` against Skiff's HTTP front (DESIGN: kubectl just works)."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.integration.kubectl import kubectl

MANIFEST = """apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  nodeName: node-x
  containers: [{name: main, image: busybox, command: [sleep, "3600"]}]
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: gold}
value: 1000
"""


def test_kubectl_apply_get_label_describe_and_force_delete(kubeconfig: Path) -> None:
    applied = kubectl(kubeconfig, "apply", "-f", "-", stdin=MANIFEST)
    assert applied.returncode == 0, applied.stderr
    assert "pod/web created" in applied.stdout
    assert "priorityclass.scheduling.k8s.io/gold created" in applied.stdout
    again = kubectl(kubeconfig, "apply", "-f", "-", stdin=MANIFEST)
    assert "pod/web unchanged" in again.stdout, again.stdout + again.stderr

    table = kubectl(kubeconfig, "get", "pods")
    assert table.stdout.splitlines()[0].split()[:5] == ["NAME", "READY", "STATUS",
                                                         "RESTARTS", "AGE"]
    assert table.stdout.splitlines()[1].split()[:3] == ["web", "0/1", "Pending"]
    pod = json.loads(kubectl(kubeconfig, "get", "pod", "web", "-o", "json").stdout)
    assert pod["spec"]["terminationGracePeriodSeconds"] == 30

    assert kubectl(kubeconfig, "label", "pod", "web", "tier=front").returncode == 0
    labels = kubectl(kubeconfig, "get", "pod", "web", "-o", "jsonpath={.metadata.labels}")
    assert json.loads(labels.stdout) == {"app": "web", "tier": "front"}
    assert "Labels:" in kubectl(kubeconfig, "describe", "pod", "web").stdout

    graceful = kubectl(kubeconfig, "delete", "pod", "web", "--wait=false")
    assert graceful.returncode == 0, graceful.stderr
    assert "Terminating" in kubectl(kubeconfig, "get", "pods").stdout
    forced = kubectl(kubeconfig, "delete", "pod", "web", "--grace-period=0", "--force")
    assert forced.returncode == 0, forced.stderr
    gone = kubectl(kubeconfig, "get", "pod", "web")
    assert gone.returncode != 0 and 'pods "web" not found' in gone.stderr


def test_kubectl_sees_strict_field_validation_and_discovery(kubeconfig: Path) -> None:
    bad = MANIFEST.split("---")[0].replace("image: busybox", "image: busybox, imagex: 1")
    result = kubectl(kubeconfig, "apply", "-f", "-", stdin=bad)
    # kubectl >= 1.25 asks for Strict (rejected); older ones get the server's Warn warning.
    assert 'unknown field "spec.containers[0].imagex"' in result.stderr
    if result.returncode == 0:
        assert "Warning" in result.stderr
    resources = kubectl(kubeconfig, "api-resources").stdout
    for kind in ("Pod", "Node", "StatefulSet", "ReplicaSet", "PriorityClass",
                 "PodDisruptionBudget", "Lease"):
        assert kind in resources


EVENTS = "\n---\n".join(f"""apiVersion: v1
kind: Event
metadata: {{name: {name}, namespace: default}}
involvedObject: {{kind: Pod, name: web, namespace: default}}
reason: Test
message: {name}
type: Normal
firstTimestamp: "2026-01-01T00:00:0{second}Z"
lastTimestamp: "2026-01-01T00:00:0{second}Z"
""" for name, second in (("a-last", 3), ("b-first", 1), ("c-middle", 2)))


def test_defect_kubectl_sort_by_outside_metadata_printed_no_resources(kubeconfig: Path) -> None:
    """`kubectl get events --sort-by=.lastTimestamp` (and any --sort-by outside metadata)
    asks for Table rows with `includeObject=Object`; rows that carried only metadata made
    kubectl print "No resources found"."""
    applied = kubectl(kubeconfig, "apply", "-f", "-", stdin=EVENTS)
    assert applied.returncode == 0, applied.stderr
    listed = kubectl(kubeconfig, "get", "events", "--sort-by=.lastTimestamp",
                     "--field-selector", "reason=Test", "-o",
                     "custom-columns=NAME:.metadata.name", "--no-headers")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["b-first", "c-middle", "a-last"]
    table = kubectl(kubeconfig, "get", "events", "--sort-by=.lastTimestamp",
                    "--field-selector", "reason=Test")
    rows = [line.split() for line in table.stdout.splitlines()[1:]]
    assert [row[-1] for row in rows] == ["b-first", "c-middle", "a-last"], table.stdout

    server = kubectl(kubeconfig, "config", "view", "-o",
                     "jsonpath={.clusters[0].cluster.server}").stdout
    accept = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}

    def rows_of(include: str) -> list[Any]:
        url = (f"{server}/api/v1/namespaces/default/events?fieldSelector=reason%3DTest"
               f"&includeObject={include}")
        with urllib.request.urlopen(urllib.request.Request(url, headers=accept)) as resp:
            return list(json.load(resp)["rows"])

    assert {r["object"]["kind"] for r in rows_of("Object")} == {"Event"}
    assert rows_of("Object")[0]["object"]["lastTimestamp"].startswith("2026-01-01")
    assert {r["object"]["kind"] for r in rows_of("Metadata")} == {"PartialObjectMetadata"}
    assert {r["object"] for r in rows_of("None")} == {None}
    with pytest.raises(urllib.error.HTTPError) as bad:
        rows_of("Everything")
    assert bad.value.code == 400
    assert 'includeObject: Unsupported value: "Everything"' in json.load(bad.value)["message"]


def _pod_in_namespace(name: str, namespace: str) -> str:
    """The manifest's pod under another name, in a namespace of its own (with the namespace),
    so the other tests' `kubectl get pods` in default do not see it."""
    pod = MANIFEST.split("---")[0].replace("name: web", f"name: {name}, namespace: {namespace}")
    return f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {namespace}}}\n---\n{pod}"


def test_AX6_kubectl_debug_adds_an_ephemeral_container_and_reads_not_found_details(
        kubeconfig: Path) -> None:
    """`kubectl debug POD` patches the `pods/ephemeralcontainers` subresource (it said
    "ephemeral containers are disabled for this cluster"); a missing pod is a 404 whose
    `details.name` kubectl reads (a Status without details made kubectl panic)."""
    pod = _pod_in_namespace("debugged", "debug-ephemeral")
    assert kubectl(kubeconfig, "apply", "-f", "-", stdin=pod).returncode == 0
    debug = kubectl(kubeconfig, "debug", "-n", "debug-ephemeral", "debugged",
                    "--image=busybox", "-c", "dbg", "--", "sh")
    assert debug.returncode == 0, debug.stderr
    spec = json.loads(kubectl(kubeconfig, "get", "pod", "debugged", "-n", "debug-ephemeral",
                              "-o", "json").stdout)["spec"]
    assert [(c["name"], c["command"]) for c in spec["ephemeralContainers"]] == [
        ("dbg", ["sh"])]
    missing = kubectl(kubeconfig, "debug", "-n", "debug-ephemeral", "nope",
                      "--image=busybox", "--", "sh")
    assert missing.returncode != 0
    assert "panic" not in missing.stderr, missing.stderr
    assert 'pods "nope" not found' in missing.stderr, missing.stderr
    # a resource a served group does not serve names itself (in its namespace or not)
    templates = kubectl(kubeconfig, "get", "--raw",
                        "/api/v1/namespaces/default/podtemplates")
    assert "the server could not find the requested resource (podtemplates in v1)" \
        in templates.stderr, templates.stderr
    statuses = kubectl(kubeconfig, "get", "--raw", "/api/v1/componentstatuses")
    assert "the server could not find the requested resource (componentstatuses in v1)" \
        in statuses.stderr, statuses.stderr


def test_AX3_kubectl_create_serviceaccount_and_token_send_protobuf_bodies(kubeconfig: Path) -> None:
    """Both bodies come as protobuf (kubectl's typed clients)."""
    created = kubectl(kubeconfig, "create", "serviceaccount", "robot")
    assert created.returncode == 0, created.stderr
    assert "serviceaccount/robot created" in created.stdout
    token = kubectl(kubeconfig, "create", "token", "robot", "--duration=10m")
    assert token.returncode == 0, token.stderr
    header, payload, _ = token.stdout.strip().split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["sub"] == "system:serviceaccount:default:robot"
    assert claims["exp"] - claims["iat"] == 600


def test_defect4_kubectl_debug_copy_to_posts_a_protobuf_pod_that_is_created_whole(
        kubeconfig: Path) -> None:
    """`kubectl debug --copy-to` posts the pod's spec back as a protobuf Pod (the
    protobuf decoder): the copy is created with the debug container added and nothing dropped."""
    pod = _pod_in_namespace("original", "debug-copy")
    assert kubectl(kubeconfig, "apply", "-f", "-", stdin=pod).returncode == 0
    debug = kubectl(kubeconfig, "debug", "-n", "debug-copy", "original",
                    "--copy-to=original-copy", "--container=debugger", "--image=busybox",
                    "--", "sleep", "60")
    assert debug.returncode == 0, debug.stderr
    copy = json.loads(kubectl(kubeconfig, "get", "pod", "-n", "debug-copy", "original-copy",
                              "-o", "json").stdout)
    containers = {c["name"]: c for c in copy["spec"]["containers"]}
    assert containers["main"]["command"] == ["sleep", "3600"]
    assert containers["debugger"]["image"] == "busybox"
    assert containers["debugger"]["command"] == ["sleep", "60"]


NETWORKING = """apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx-example}
spec: {controller: k8s.io/ingress-nginx}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: minimal-ingress
  annotations: {nginx.ingress.kubernetes.io/rewrite-target: /}
spec:
  ingressClassName: nginx-example
  rules:
  - http:
      paths:
      - {path: /testpath, pathType: Prefix, backend: {service: {name: test, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: test-network-policy}
spec:
  podSelector: {matchLabels: {role: db}}
  policyTypes: [Ingress, Egress]
  ingress:
  - from:
    - ipBlock: {cidr: 172.17.0.0/16, except: [172.17.1.0/24]}
    - namespaceSelector: {matchLabels: {project: myproject}}
    - podSelector: {matchLabels: {role: frontend}}
    ports: [{protocol: TCP, port: 6379}]
  egress:
  - to: [{ipBlock: {cidr: 10.0.0.0/24}}]
    ports: [{protocol: TCP, port: 5978}]
"""


def test_as7_kubectl_applies_the_documentations_ingress_and_network_policy(
        kubeconfig: Path) -> None:
    """Stored, validated and listed as Kubernetes does (no ingress controller and no policy
    enforcement run, as in a cluster without them)."""
    applied = kubectl(kubeconfig, "apply", "-f", "-", stdin=NETWORKING)
    assert applied.returncode == 0, applied.stderr
    table = kubectl(kubeconfig, "get", "ingress").stdout.splitlines()
    assert table[0].split() == ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"]
    assert table[1].split()[:4] == ["minimal-ingress", "nginx-example", "*", "80"]
    policy = kubectl(kubeconfig, "get", "netpol").stdout.splitlines()
    assert policy[1].split()[:2] == ["test-network-policy", "role=db"]
    created = kubectl(kubeconfig, "create", "ingress", "simple", "--class=nginx-example",
                      "--rule=foo.com/bar=svc1:8080,tls=my-cert")  # a protobuf body
    assert created.returncode == 0, created.stderr
    rule = json.loads(kubectl(kubeconfig, "get", "ingress", "simple", "-o", "json").stdout)[
        "spec"]["rules"][0]
    assert rule == {"host": "foo.com", "http": {"paths": [{
        "path": "/bar", "pathType": "Exact",
        "backend": {"service": {"name": "svc1", "port": {"number": 8080}}}}]}}
    bad = kubectl(kubeconfig, "create", "ingress", "bad", "--rule=foo.com/bar=svc1:99999")
    assert "spec.rules[0].http.paths[0].backend.service.port.number: Invalid value: 99999: " \
           "must be between 1 and 65535, inclusive" in bad.stderr
    no_type = NETWORKING.split("---")[1].replace("pathType: Prefix, ", "")
    refused = kubectl(kubeconfig, "apply", "-f", "-", stdin=no_type.replace(
        "minimal-ingress", "untyped"))
    assert "spec.rules[0].http.paths[0].pathType: Required value" in refused.stderr
