"""The watch stream's batched messages (skiff.rpc.encode_batch / decode_maps): an array
built from already-encoded events must decode to exactly those events, in order, for
every msgpack array header size."""

from __future__ import annotations

import msgpack
import pytest

from skiff.rpc import CodecError, decode_maps, encode, encode_batch


@pytest.mark.parametrize("count", [1, 2, 15, 16, 255, 65535, 65536])
def test_a_batch_decodes_to_its_events_in_order(count: int) -> None:
    events = [{"type": "ADDED", "object": {"metadata": {"resourceVersion": str(i)}}}
              for i in range(count)]
    data = encode_batch([encode(e) for e in events])
    assert decode_maps(data) == events
    assert msgpack.unpackb(data) == events  # plain msgpack: any client can read it


def test_a_single_event_message_is_a_list_of_one() -> None:
    assert decode_maps(encode({"type": "DELETED"})) == [{"type": "DELETED"}]


@pytest.mark.parametrize("payload", [encode([1, 2]), encode("x"), b"\xc1"])
def test_anything_but_maps_is_a_codec_error(payload: bytes) -> None:
    with pytest.raises(CodecError):
        decode_maps(payload)
