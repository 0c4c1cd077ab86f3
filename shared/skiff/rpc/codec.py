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


def encode_batch(parts: list[bytes]) -> bytes:
    """A msgpack array of already-encoded values: the header, then the parts as they are,
    so values encoded once (a watch event shared by every watcher) are not encoded again."""
    count = len(parts)
    if count < 16:
        header = bytes((0x90 | count,))
    elif count < 1 << 16:
        header = b"\xdc" + count.to_bytes(2, "big")
    else:
        header = b"\xdd" + count.to_bytes(4, "big")
    return header + b"".join(parts)


def decode_maps(data: bytes) -> list[dict[str, Any]]:
    """A message that is one map, or an array of maps (`encode_batch`), as a list."""
    value = decode(data)
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return value
    raise CodecError(f"payload must be a map or an array of maps, got {type(value).__name__}")


async def decoded_maps(stream: AsyncIterator[bytes]) -> AsyncIterator[dict[str, Any]]:
    """The maps of a client's request stream (exec, attach, port-forward); a message that
    does not decode is skipped, as a relay has nobody to answer it to."""
    async for raw in stream:
        try:
            yield decode_map(raw)
        except CodecError:
            continue
