"""ConfigMaps and Secrets reach a pod's environment and volume files."""

from __future__ import annotations

from tests.integration.workloads.conftest import Kube
from tests.integration.workloads.test_deployment import _wait

MANIFEST = """apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {greeting: hello, color: blue}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {password: s3cret}
---
apiVersion: v1
kind: Pod
metadata: {name: reader}
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - {name: cfg, configMap: {name: settings}}
  - {name: sec, secret: {secretName: creds, items: [{key: password, path: pw.txt}]}}
  containers:
  - name: main
    image: busybox
    command: [sh, -c, 'echo "env=$GREETING pw=$PASSWORD from=$CFG_color"; while true; do
      echo "file=$(cat etc/config/greeting) secret=$(cat etc/creds/pw.txt)"; sleep 0.5; done']
    env:
    - {name: GREETING, valueFrom: {configMapKeyRef: {name: settings, key: greeting}}}
    - {name: PASSWORD, valueFrom: {secretKeyRef: {name: creds, key: password}}}
    envFrom: [{prefix: CFG_, configMapRef: {name: settings}}]
    volumeMounts: [{name: cfg, mountPath: /etc/config}, {name: sec, mountPath: /etc/creds}]
"""


def test_configmap_and_secret_values_in_env_and_volume_and_updates_reach_the_file(
        kube: Kube) -> None:
    kube("apply", "-f", "-", stdin=MANIFEST)
    assert kube("get", "configmap", "settings").stdout.splitlines()[1].split()[:2] == [
        "settings", "2"]
    assert kube("get", "secret", "creds").stdout.splitlines()[1].split()[:3] == [
        "creds", "Opaque", "1"]
    logs = _wait(lambda: (out := kube("logs", "reader", check=False).stdout)
                 and "file=hello" in out and out, what="the pod's output")
    assert "env=hello pw=s3cret from=blue" in logs
    assert "secret=s3cret" in logs
    kube("patch", "configmap", "settings", "--type=merge", "-p", '{"data":{"greeting":"bye"}}')
    _wait(lambda: "file=bye" in kube("logs", "reader", check=False).stdout,
          what="the updated ConfigMap in the volume file")
    kube("delete", "pod", "reader", "--wait=false")


def test_missing_configmap_is_create_container_config_error(kube: Kube) -> None:
    # the pod also mounts `settings` and `creds`: make them whatever ran first (random order)
    kube("apply", "-f", "-", stdin="---".join(MANIFEST.split("---")[:2]))
    kube("apply", "-f", "-", stdin=MANIFEST.split("---")[-1].replace("reader", "waiting")
         .replace("name: settings, key: greeting", "name: absent, key: greeting"))
    _wait(lambda: "CreateContainerConfigError" in kube("get", "pod", "waiting").stdout,
          what="CreateContainerConfigError")
    kube("create", "configmap", "absent", "--from-literal=greeting=late")
    _wait(lambda: "env=late" in kube("logs", "waiting", check=False).stdout,
          what="the pod to start once the ConfigMap exists")
    kube("delete", "pod", "waiting", "--wait=false")


EXPANSION = """apiVersion: v1
kind: Pod
metadata: {name: expander}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: python
    command: [python3, -c, "import os, sys; print(sys.argv[1:], os.environ['T_DEP'],
      os.environ['CPU_M'], os.environ['MEM'])", "$(T_POD)", "$$(T_POD)", "$(NOPE)"]
    resources: {limits: {cpu: 500m, memory: 64Mi}}
    env:
    - {name: T_POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: T_DEP, value: "pod-$(T_POD)-$$(T_NS)"}
    - {name: CPU_M, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: 1m}}}
    - {name: MEM, valueFrom: {resourceFieldRef: {resource: limits.memory}}}
"""


def test_dollar_references_expand_in_command_and_env_and_resource_field_refs_resolve(
        kube: Kube) -> None:
    """The documentation's "Define a Command and Arguments" and "Expose Pod Information"
    rules: `$(VAR)` expands in command/args and env values, `$$` escapes it, an unknown
    reference stays; resourceFieldRef gives limits in divisor units (they were literal
    text and empty)."""
    kube("apply", "-f", "-", stdin=EXPANSION)
    log = _wait(lambda: kube("logs", "expander", check=False).stdout.strip(),
                what="the expander's output")
    assert log == "['expander', '$(T_POD)', '$(NOPE)'] pod-expander-$(T_NS) 500 67108864"


MOUNTS_ABSENT = """apiVersion: v1
kind: Pod
metadata: {name: mounter}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: v, configMap: {name: nope}}]
  containers:
  - {name: main, image: busybox, command: [sh, -c, "cat /etc/v/k; sleep 300"],
     volumeMounts: [{name: v, mountPath: /etc/v}]}
"""


def test_wl5_missing_configmap_volume_waits_in_container_creating_with_failed_mount(
        kube: Kube) -> None:
    """A volume's missing ConfigMap is a mount failure, as Kubernetes reports it: the pod
    stays ContainerCreating with a FailedMount event (it said CreateContainerConfigError)."""
    kube("apply", "-f", "-", stdin=MOUNTS_ABSENT)
    _wait(lambda: 'MountVolume.SetUp failed for volume "v" : configmap "nope" not found' in kube(
        "get", "events", "--field-selector", "involvedObject.name=mounter,reason=FailedMount",
        check=False).stdout, what="the FailedMount event")
    assert kube("get", "pod", "mounter").stdout.splitlines()[1].split()[2] == (
        "ContainerCreating")
    kube("create", "configmap", "nope", "--from-literal=k=here")
    _wait(lambda: "here" in kube("logs", "mounter", check=False).stdout,
          what="the pod to start once the ConfigMap exists")
    kube("delete", "pod", "mounter", "--wait=false")
