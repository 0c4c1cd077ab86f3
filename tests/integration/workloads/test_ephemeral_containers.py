"""Ephemeral containers (`kubectl debug POD`), with the real kubectl and real kubelets: the
`pods/ephemeralcontainers` subresource adds a container to a running pod, the kubelet starts
it once in the pod's sandbox and reports it in `ephemeralContainerStatuses`, `kubectl debug
-i` attaches to it, it never makes the pod unready, it stops with the pod; and the
subresource's rules (added, never changed or removed; no ports, probes or resources; not on
create) as kube-apiserver's ValidatePodEphemeralContainersUpdate."""

from __future__ import annotations

import json
import os
from typing import Any

from skiff.api.types import Obj
from tests.integration.workloads.conftest import Kube
from tests.integration.workloads.test_deployment import _ready, _wait


def _pod(kube: Kube, ns: str, name: str) -> Obj:
    return dict(json.loads(kube("get", "pod", name, "-n", ns, "-o", "json").stdout))


def _ephemeral_state(kube: Kube, ns: str, pod: str, container: str) -> Obj:
    statuses = _pod(kube, ns, pod).get("status", {}).get("ephemeralContainerStatuses") or []
    return next((s for s in statuses if s["name"] == container), {})


def _start(kube: Kube, ns: str, name: str) -> None:
    kube("create", "namespace", ns)
    kube("run", name, "-n", ns, "--image=busybox", "--", "sleep", "3600")
    _wait(lambda: _ready(_pod(kube, ns, name)), what=f"pod {name} Ready")


def test_SB4_kubectl_debug_runs_an_ephemeral_container_in_the_pod(kube: Kube) -> None:
    ns = "debug-run"
    _start(kube, ns, "web")
    attached = kube("debug", "-i", "web", "-n", ns, "--image=busybox", "-c", "shell",
                    "--target=web", "--", "sh", stdin="echo inside-$((6*7)); exit\n")
    assert "inside-42" in attached.stdout, attached.stdout + attached.stderr
    _wait(lambda: "terminated" in _ephemeral_state(kube, ns, "web", "shell").get("state", {}),
          what="the shell's exit reported")
    state = _ephemeral_state(kube, ns, "web", "shell")
    assert state["state"]["terminated"]["exitCode"] == 0
    assert (state["ready"], state["restartCount"]) == (False, 0)  # never restarted
    assert "inside-42" in kube("logs", "web", "-n", ns, "-c", "shell").stdout
    described = kube("describe", "pod", "web", "-n", ns).stdout
    assert "Ephemeral Containers:\n  shell:" in described

    # a long-running one: the pod stays Ready, and it stops with the pod
    kube("debug", "web", "-n", ns, "--image=busybox", "-c", "sleeper", "--", "sleep", "3600")
    _wait(lambda: "running" in _ephemeral_state(kube, ns, "web", "sleeper").get("state", {}),
          what="the sleeper running")
    assert _ready(_pod(kube, ns, "web"))
    pid = int(_ephemeral_state(kube, ns, "web", "sleeper")["containerID"].split("//")[1])
    os.kill(pid, 0)  # a real process
    kube("delete", "pod", "web", "-n", ns, "--grace-period=1")

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    _wait(gone, timeout=30, what="the ephemeral container's process to end with its pod")
    kube("delete", "namespace", ns, "--wait=false")


def test_AX6_ephemeral_containers_subresource_rules(kube: Kube) -> None:
    ns = "debug-rules"
    _start(kube, ns, "app")
    path = f"/api/v1/namespaces/{ns}/pods/app/ephemeralcontainers"

    def put(containers: list[Obj]) -> Any:
        pod = json.loads(kube("get", "--raw", path).stdout)
        pod["spec"]["ephemeralContainers"] = containers
        # unconditional (pods allow it): the kubelet may write the status in between
        pod["metadata"].pop("resourceVersion", None)
        return kube("replace", "--raw", path, "-f", "-", stdin=json.dumps(pod), check=False)

    base = {"name": "dbg", "image": "busybox", "command": ["sleep", "60"]}
    refused = put([{**base, "ports": [{"containerPort": 80}],
                    "readinessProbe": {"exec": {"command": ["true"]}},
                    "targetContainerName": "nope"}])
    assert refused.returncode != 0
    for message in ("spec.ephemeralContainers[0].ports: Forbidden: cannot be set for an "
                    "Ephemeral Container",
                    "spec.ephemeralContainers[0].readinessProbe: Forbidden: cannot be set for "
                    "an Ephemeral Container",
                    'spec.ephemeralContainers[0].targetContainerName: Not found: "nope"'):
        assert message in refused.stderr, refused.stderr
    clash = put([{**base, "name": "app"}])
    assert 'spec.ephemeralContainers[0].name: Duplicate value: "app"' in clash.stderr
    assert put([base]).returncode == 0
    changed = put([{**base, "command": ["sleep", "61"]}])
    assert ('spec.ephemeralContainers: Forbidden: existing ephemeral containers "dbg" may '
            "not be changed") in changed.stderr, changed.stderr
    removed = put([])
    assert ('spec.ephemeralContainers: Forbidden: existing ephemeral containers "dbg" may '
            "not be removed") in removed.stderr, removed.stderr
    # the pod itself cannot change them, nor be created with them
    edited = _pod(kube, ns, "app")
    edited["spec"]["ephemeralContainers"] = []
    edited["metadata"].pop("resourceVersion", None)
    direct = kube("replace", "-f", "-", stdin=json.dumps(edited), check=False)
    assert "pod updates may not change fields" in direct.stderr, direct.stderr
    fresh = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "born", "namespace": ns},
             "spec": {"containers": [{"name": "c", "image": "busybox"}],
                      "ephemeralContainers": [base]}}
    born = kube("create", "-f", "-", stdin=json.dumps(fresh), check=False)
    assert "spec.ephemeralContainers: Forbidden: cannot be set on create" in born.stderr, \
        born.stderr
    kube("delete", "namespace", ns, "--wait=false")
