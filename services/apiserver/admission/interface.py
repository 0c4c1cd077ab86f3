"""What an admission plugin is, as `k8s.io/apiserver/pkg/admission` has it: the attributes
of the request being admitted and a `Plugin` with a mutating hook (`admit`) and a
validating one (`validate`). chain.py runs the plugins in order, every `admit` first, then
every `validate`. Webhooks are plugins too (webhook/), and read the requesting user from
`skiff.apiserver.auth.context.current_user`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar

from skiff.api.kinds import KindInfo
from skiff.api.types import Obj


class Operation(StrEnum):
    """Kubernetes' admission operations (the registry admits creates and updates, and
    deletes where it admits them: `obj` is then empty and `old` the object)."""

    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    CONNECT = "CONNECT"


def _valid(_obj: Obj) -> None:
    """No further validation (a plugin calls `Attributes.revalidate` after changing obj)."""


@dataclass
class Attributes:
    """One write being admitted: the object as it will be stored (plugins mutate it in
    `admit`), the stored one for an update, and how the write was asked for."""

    info: KindInfo
    obj: Obj
    old: Obj | None
    operation: Operation
    subresource: str = ""
    dry_run: bool = False
    # The registry's validation of `obj`, for a plugin that changed it (LimitRanger).
    revalidate: Callable[[Obj], None] = field(default=_valid)


class Plugin:
    """An admission plugin: `admit` may change `attrs.obj`, `validate` may only refuse.
    Either raises ApiError to refuse the write, or returns warnings for the response."""

    name: ClassVar[str] = ""
    # the operations the plugin is asked about (Kubernetes' `Handles`); the chain skips it
    # for the others (the built-in plugins know creates and updates only)
    operations: ClassVar[frozenset[Operation]] = frozenset({Operation.CREATE,
                                                            Operation.UPDATE})

    async def admit(self, attrs: Attributes) -> list[str]:
        """The mutating hook (none by default)."""
        return []

    async def validate(self, attrs: Attributes) -> list[str]:
        """The validating hook (none by default)."""
        return []


class DefaultingPlugin(Plugin):
    """A mutating plugin that acts on the creation of objects of `kinds` only (as the
    defaulting plugins: ServiceAccount, DefaultStorageClass, DefaultTolerationSeconds...)."""

    kinds: ClassVar[frozenset[str]] = frozenset()

    async def admit(self, attrs: Attributes) -> list[str]:
        if attrs.operation is Operation.CREATE and attrs.info.kind in self.kinds:
            await self.admit_create(attrs)
        return []

    async def admit_create(self, attrs: Attributes) -> None:
        """Change the object being created."""
