"""msgpack on the wire: the one place that turns Python values into bytes and back.

gRPC carries opaque bytes (generic method handlers); every payload is a msgpack map whose
objects are Kubernetes-shaped dicts. Decoding never raises anything but `CodecError`, so a
server can answer garbage with a clear BadRequest instead of a crash.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgpack


class CodecError(ValueError):
    """The bytes are not a msgpack map."""


def encode(value: Any) -> bytes:
    data: bytes = msgpack.packb(value, use_bin_type=True)
    return data


def decode(data: bytes) -> Any:
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as err:  # msgpack raises several unrelated types on bad input
        raise CodecError(f"payload is not valid msgpack: {err}") from None


def decode_map(data: bytes) -> dict[str, Any]:
    value = decode(data)
    if not isinstance(value, dict):
        raise CodecError(f"payload must be a map, got {type(value).__name__}")
    return value


async def decoded_maps(stream: AsyncIterator[bytes]) -> AsyncIterator[dict[str, Any]]:
    """The maps of a client's request stream (exec, attach, port-forward); a message that
    does not decode is skipped, as a relay has nobody to answer it to."""
    async for raw in stream:
        try:
            yield decode_map(raw)
        except CodecError:
            continue
