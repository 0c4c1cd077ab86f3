"""kubectl's imperative commands (protobuf bodies) and Deployment scale/pause/Recreate."""

from __future__ import annotations

import base64
import json
import time

from tests.integration.workloads.conftest import Kube
from tests.integration.workloads.test_deployment import _items, _ready, _wait


def test_kubectl_create_job_service_secret_configmap_send_protobuf_and_work(
        kube: Kube) -> None:
    out = kube("create", "job", "once", "--image=busybox", "--", "sh", "-c", "echo done")
    assert "job.batch/once created" in out.stdout
    out = kube("create", "service", "clusterip", "front", "--tcp=80:8080")
    assert "service/front created" in out.stdout
    svc = json.loads(kube("get", "service", "front", "-o", "json").stdout)
    assert svc["spec"]["ports"][0]["targetPort"] == 8080
    assert svc["spec"]["selector"] == {"app": "front"}
    out = kube("create", "secret", "generic", "token", "--from-literal=key=v4lue")
    assert "secret/token created" in out.stdout
    data = json.loads(kube("get", "secret", "token", "-o", "json").stdout)["data"]
    assert base64.b64decode(data["key"]) == b"v4lue"
    out = kube("create", "configmap", "plain", "--from-literal=k=v")
    assert "configmap/plain created" in out.stdout
    _wait(lambda: json.loads(kube("get", "job", "once", "-o", "json").stdout)
          .get("status", {}).get("succeeded") == 1, what="the job to succeed")
    assert "done" in kube("logs", "job/once").stdout


def test_deployment_scale_subresource_pause_resume_and_recreate(kube: Kube) -> None:
    kube("create", "deployment", "scaled", "--image=nginx", "--replicas=1")
    kube("scale", "deployment", "scaled", "--replicas=3")
    kube("rollout", "status", "deployment/scaled", "--timeout=120s")
    assert len(_items(kube, "pods", "-l", "app=scaled")) == 3

    kube("rollout", "pause", "deployment/scaled")
    kube("set", "image", "deployment/scaled", "nginx=nginx:2")
    time.sleep(3)  # a paused Deployment does not roll
    assert len(_items(kube, "replicasets", "-l", "app=scaled")) == 1
    kube("rollout", "resume", "deployment/scaled")
    kube("rollout", "status", "deployment/scaled", "--timeout=120s")
    assert {p["spec"]["containers"][0]["image"] for p in _items(
        kube, "pods", "-l", "app=scaled") if not p["metadata"].get("deletionTimestamp")
            } == {"nginx:2"}

    kube("patch", "deployment", "scaled", "--type=merge", "-p",
         '{"spec":{"strategy":{"type":"Recreate","rollingUpdate":null}}}')
    kube("set", "image", "deployment/scaled", "nginx=nginx:3")
    mixed = False
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        pods = _items(kube, "pods", "-l", "app=scaled")
        images = {p["spec"]["containers"][0]["image"] for p in pods}
        # Kubernetes' oldPodsRunning: an old pod that reached a terminal phase does not
        # hold the new ones back, though its object may linger until the kubelet removes it.
        running = {p["spec"]["containers"][0]["image"] for p in pods
                   if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")}
        mixed |= "nginx:3" in images and len(running - {"nginx:3"}) > 0
        if images == {"nginx:3"} and len(pods) == 3 and all(_ready(p) for p in pods):
            break
        time.sleep(0.3)
    assert not mixed, "Recreate ran old and new pods at the same time"
    kube("delete", "deployment", "scaled")


def test_kubectl_logs_limit_bytes_cuts_the_log_and_the_follow_stream(kube: Kube) -> None:
    """`kubectl logs --limit-bytes` (it printed the whole log)."""
    kube("run", "chatty", "--image=busybox", "--restart=Never", "--", "sh", "-c",
         "echo 0123456789abcdef; echo second line; sleep 30")
    _wait(lambda: "second line" in kube("logs", "chatty", check=False).stdout,
          what="chatty's two lines")
    assert kube("logs", "chatty", "--limit-bytes=10").stdout == "0123456789"
    assert kube("logs", "chatty", "-f", "--limit-bytes=20").stdout == "0123456789abcdef\nsec"
    kube("delete", "pod", "chatty", "--grace-period=0", "--force")
