"""The official Python client's objects as the tests read them. Its models type every
field optional, even those a server always fills (metadata, a Pod's spec, a name); these
say "this one is there" and fail the test where it is not, so that a test reads as the plain
attribute chain it checks (`present(pod.status).phase`, `name_of(node)`)."""

from __future__ import annotations

from typing import Protocol, TypeVar

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
