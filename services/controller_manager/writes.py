"""Optimistic writes of read-modify-write loops.

Controllers change an object they just read (a finalizer off, an owner reference on or off)
and write it back with its resourceVersion. Three outcomes matter to every such loop: the
write landed, the object is gone (nothing left to do), or someone wrote first (a Conflict:
read again and retry). `try_update` names them once; any other error is the caller's.
"""

from __future__ import annotations

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import Client


async def try_update(client: Client, obj: Obj) -> tuple[bool, Obj | None]:
    """(True, written object) once written; (True, None) if the object is gone; (False,
    None) on a Conflict, to be read again and retried. Other errors raise."""
    try:
        return True, await client.update(obj)
    except ApiError as err:
        if err.reason == Reason.NOT_FOUND:
            return True, None
        if err.reason != Reason.CONFLICT:
            raise
    return False, None
