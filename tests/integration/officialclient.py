"""The official Python client's objects as the tests read them. Its models type every
field optional, even those a server always fills (metadata, a Pod's spec, a name); these
say "this one is there" and fail the test where it is not, so that a test reads as the plain
attribute chain it checks (`present(pod.status).phase`, `name_of(node)`). And the RBAC
grant the in-cluster client tests give their namespace's default ServiceAccount."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, TypeVar

from kubernetes import client
from kubernetes.client import V1ObjectMeta

T = TypeVar("T")


class HasMetadata(Protocol):
    @property
    def metadata(self) -> V1ObjectMeta | None: ...


def present(value: T | None) -> T:
    """`value`, which the server was to fill in."""
    assert value is not None, "a field the server fills in is missing"
    return value


def meta(obj: HasMetadata) -> V1ObjectMeta:
    return present(obj.metadata)


def name_of(obj: HasMetadata) -> str:
    return present(meta(obj).name)


def labels_of(obj: HasMetadata) -> dict[str, str]:
    return present(meta(obj).labels)


class Phased(Protocol):
    @property
    def phase(self) -> str | None: ...


class HasPhase(Protocol):
    """A Pod, a PersistentVolumeClaim or a PersistentVolume: a status with a phase."""

    @property
    def status(self) -> Phased | None: ...


def phase_of(obj: HasPhase) -> str | None:
    return present(obj.status).phase


def let_default_account_list_pods(core: client.CoreV1Api, namespace: str) -> None:
    """As on Kubernetes, a ServiceAccount may do nothing until RBAC grants it something:
    a Role `pod-reader` (list pods) bound to the namespace's `default` account."""
    rbac = client.RbacAuthorizationV1Api(core.api_client)
    rbac.create_namespaced_role(namespace, client.V1Role(
        metadata=client.V1ObjectMeta(name="pod-reader"),
        rules=[client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["list"])]))
    rbac.create_namespaced_role_binding(namespace, client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name="default-reads-pods"),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role",
                                  name="pod-reader"),
        subjects=[client.RbacV1Subject(kind="ServiceAccount", name="default",
                                       namespace=namespace)]))


# A pod sees its own root, not the node's (AU8): the official client reaches its python3
# as an image would carry it, here through a read-only hostPath of the installed packages.
PACKAGES = str(Path(client.__file__).parents[2])


def python_pod(name: str, script: str, *, labels: dict[str, str] | None = None,
               restart: str = "Never") -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1PodSpec(
            termination_grace_period_seconds=1, restart_policy=restart,
            volumes=[client.V1Volume(name="packages", host_path=client.V1HostPathVolumeSource(
                path=PACKAGES))],
            containers=[client.V1Container(
                name="main", image="python", command=["python3", "-c", script],
                env=[client.V1EnvVar(name="PYTHONPATH", value="/opt/python-packages")],
                volume_mounts=[client.V1VolumeMount(name="packages", read_only=True,
                                                    mount_path="/opt/python-packages")])]))
