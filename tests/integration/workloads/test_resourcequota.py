"""ResourceQuota: admission charges and refuses, the resourcequota controller counts, and a
ReplicaSet held back by a quota says so (ReplicaFailure), with the real kubectl and the
documentation's "Configure Memory and CPU Quotas for a Namespace" example."""

from __future__ import annotations

import json

from skiff.api.types import Obj
from tests.integration.workloads.conftest import Kube
from tests.integration.workloads.test_deployment import _items, _wait

QUOTA = """apiVersion: v1
kind: ResourceQuota
metadata: {name: mem-cpu-demo}
spec:
  hard: {requests.cpu: "1", requests.memory: 1Gi, limits.cpu: "2", limits.memory: 2Gi}
"""


def _pod(name: str, requests: str, limits: str) -> str:
    return f"""apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers:
  - name: {name}-ctr
    image: nginx
    resources:
      limits: {limits}
      requests: {requests}
"""


def _quota(kube: Kube, namespace: str, name: str) -> Obj:
    return dict(json.loads(kube("get", "resourcequota", name, "-n", namespace,
                                "-o", "json").stdout))


def test_ax6_resourcequota_charges_pods_and_refuses_one_over_the_quota(kube: Kube) -> None:
    ns = "quota-mem-cpu-example"
    kube("create", "namespace", ns)
    kube("apply", "-n", ns, "-f", "-", stdin=QUOTA)
    _wait(lambda: (_quota(kube, ns, "mem-cpu-demo").get("status") or {}).get("used") == {
        "limits.cpu": "0", "limits.memory": "0", "requests.cpu": "0",
        "requests.memory": "0"}, what="the quota counted by the resourcequota controller")
    kube("apply", "-n", ns, "-f", "-", stdin=_pod(
        "quota-mem-cpu-demo", '{memory: "600Mi", cpu: "400m"}',
        '{memory: "800Mi", cpu: "800m"}'))
    used = _quota(kube, ns, "mem-cpu-demo")["status"]["used"]
    assert used == {"limits.cpu": "800m", "limits.memory": "800Mi", "requests.cpu": "400m",
                    "requests.memory": "600Mi"}  # charged by admission, before the write
    over = kube("apply", "-n", ns, "-f", "-", check=False, stdin=_pod(
        "quota-mem-cpu-demo-2", '{memory: "700Mi", cpu: "400m"}',
        '{memory: "1Gi", cpu: "800m"}'))
    assert over.returncode != 0
    assert ('pods "quota-mem-cpu-demo-2" is forbidden: exceeded quota: mem-cpu-demo, '
            "requested: requests.memory=700Mi, used: requests.memory=600Mi, limited: "
            "requests.memory=1Gi") in over.stderr
    plain = kube("run", "plain", "-n", ns, "--image=busybox", check=False)
    assert ('pods "plain" is forbidden: failed quota: mem-cpu-demo: must specify limits.cpu '
            "for: plain; limits.memory for: plain; requests.cpu for: plain; requests.memory "
            "for: plain") in plain.stderr
    table = kube("get", "quota", "-n", ns).stdout.splitlines()
    assert table[0].split()[:3] == ["NAME", "AGE", "REQUEST"]
    assert "requests.memory: 600Mi/1Gi" in table[1]
    kube("delete", "pod", "quota-mem-cpu-demo", "-n", ns, "--grace-period=0", "--force")
    _wait(lambda: _quota(kube, ns, "mem-cpu-demo")["status"]["used"]["requests.cpu"] == "0",
          what="the deleted pod's share given back")
    kube("delete", "namespace", ns, "--wait=false")


def test_wl1_resourcequota_holds_a_replicaset_back_with_a_replica_failure(kube: Kube) -> None:
    ns = "quota-pods"
    kube("create", "namespace", ns)
    kube("create", "quota", "pods-quota", "-n", ns,
         "--hard=pods=2,count/configmaps=1,services=0")
    _wait(lambda: (_quota(kube, ns, "pods-quota").get("status") or {}).get("used"),
          what="the quota counted")
    kube("create", "deployment", "web", "-n", ns, "--image=nginx", "--replicas=3")

    def failure() -> Obj | None:
        sets = _items(kube, "rs", "-n", ns)
        conditions = sets[0].get("status", {}).get("conditions") or [] if sets else []
        return next((c for c in conditions if c["type"] == "ReplicaFailure"), None)

    cond = _wait(failure, what="the ReplicaSet's ReplicaFailure condition")
    assert cond["reason"] == "FailedCreate"
    assert "exceeded quota: pods-quota, requested: pods=1, used: pods=2, limited: pods=2" \
        in cond["message"]
    assert len(_items(kube, "pods", "-n", ns)) == 2
    deploy = json.loads(kube("get", "deploy", "web", "-n", ns, "-o", "json").stdout)
    assert any(c["type"] == "ReplicaFailure" and c["reason"] == "FailedCreate"
               for c in deploy["status"]["conditions"])
    kube("scale", "deployment", "web", "-n", ns, "--replicas=2")
    _wait(lambda: failure() is None, what="the condition removed by a sync that succeeds")

    kube("create", "configmap", "a", "-n", ns, "--from-literal=x=1")
    second = kube("create", "configmap", "b", "-n", ns, "--from-literal=x=1", check=False)
    assert "exceeded quota: pods-quota, requested: count/configmaps=1, used: " \
           "count/configmaps=1, limited: count/configmaps=1" in second.stderr
    service = kube("create", "service", "clusterip", "s", "-n", ns, "--tcp=80:80",
                   check=False)
    assert 'services "s" is forbidden: exceeded quota: pods-quota' in service.stderr
    kube("delete", "namespace", ns, "--wait=false")


OBJECT_QUOTA = """apiVersion: v1
kind: ResourceQuota
metadata: {name: object-quota-demo}
spec:
  hard: {persistentvolumeclaims: "1", services.loadbalancers: "2", services.nodeports: "0"}
"""


def test_ax6_resourcequota_on_node_ports_refuses_a_node_port_create_and_update(
        kube: Kube) -> None:
    """The documentation's "Configure Quotas for API Objects": no node ports allowed, so a
    NodePort Service is refused, and so is turning a ClusterIP Service into one."""
    ns = "quota-object-example"
    kube("create", "namespace", ns)
    kube("apply", "-n", ns, "-f", "-", stdin=OBJECT_QUOTA)
    _wait(lambda: (_quota(kube, ns, "object-quota-demo").get("status") or {}).get("used") == {
        "persistentvolumeclaims": "0", "services.loadbalancers": "0",
        "services.nodeports": "0"}, what="the quota counted by the resourcequota controller")
    refused = kube("create", "service", "nodeport", "np", "-n", ns, "--tcp=80:8080",
                   check=False)
    assert ('services "np" is forbidden: exceeded quota: object-quota-demo, requested: '
            "services.nodeports=1, used: services.nodeports=0, limited: services.nodeports=0"
            ) in refused.stderr, refused.stderr
    assert kube("create", "service", "clusterip", "web", "-n", ns,
                "--tcp=80:8080").returncode == 0
    patched = kube("patch", "service", "web", "-n", ns, "-p", '{"spec":{"type":"NodePort"}}',
                   check=False)
    assert ('services "web" is forbidden: exceeded quota: object-quota-demo, requested: '
            "services.nodeports=1") in patched.stderr, patched.stderr
    web = json.loads(kube("get", "service", "web", "-n", ns, "-o", "json").stdout)
    assert web["spec"]["type"] == "ClusterIP"
    balancer = kube("create", "service", "loadbalancer", "lb", "-n", ns, "--tcp=80:8080",
                    check=False)
    assert "services.nodeports=1" in balancer.stderr  # a LoadBalancer needs node ports too
    kube("delete", "namespace", ns, "--wait=false")
