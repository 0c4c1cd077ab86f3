"""The SPDY/3.1 framer kubectl's port-forward needs (SPEC SB4): frames round-trip, header
blocks share one zlib context per direction, partial input waits for the rest."""

from __future__ import annotations

import struct
import zlib

import pytest

from skiff.apiserver.endpoints.streaming import spdy


def test_sb4_syn_streams_decode_across_one_compression_context_per_direction() -> None:
    client, server = spdy.HeaderCodec(), spdy.HeaderCodec()
    first = spdy.syn_stream_frame(client, 1, {"streamType": "error", "port": "8080",
                                              "requestID": "0"})
    second = spdy.syn_stream_frame(client, 3, {"streamType": "data", "port": "8080",
                                               "requestID": "0"})
    wire = first + second
    frames = spdy.Parser(server).feed(wire)
    assert [(f.type, f.stream_id, f.headers) for f in frames] == [
        (spdy.SYN_STREAM, 1, {"streamtype": "error", "port": "8080", "requestid": "0"}),
        (spdy.SYN_STREAM, 3, {"streamtype": "data", "port": "8080", "requestid": "0"})]
    # the second block leans on the first one's zlib state: alone it does not decode
    with pytest.raises(spdy.SpdyError):
        spdy.Parser(spdy.HeaderCodec()).feed(second)


def test_sb4_the_header_block_is_zlib_with_the_spdy3_dictionary() -> None:
    block = spdy.HeaderCodec().encode({"port": "80"})
    assert len(spdy.DICTIONARY) == 1423 and spdy.DICTIONARY.startswith(b"\0\0\0\x07options")
    inflated = zlib.decompressobj(zdict=spdy.DICTIONARY).decompress(block)
    assert inflated == struct.pack(">I", 1) + b"\0\0\0\x04port\0\0\0\x0280"


def test_sb4_data_ping_rst_and_partial_frames() -> None:
    codec = spdy.HeaderCodec()
    parser = spdy.Parser(codec)
    wire = (spdy.data_frame(3, b"GET / HTTP/1.0\r\n\r\n") + spdy.data_frame(3, b"", fin=True)
            + spdy.ping_frame(7) + spdy.rst_stream_frame(3, 5)
            + spdy.syn_reply_frame(spdy.HeaderCodec(), 1))
    frames = parser.feed(wire[:5])
    assert frames == []  # not even a whole header yet
    frames = parser.feed(wire[5:])
    data, fin, ping, rst, reply = frames
    assert (data.control, data.stream_id, data.data, data.fin) == (
        False, 3, b"GET / HTTP/1.0\r\n\r\n", False)
    assert (fin.data, fin.fin) == (b"", True)
    assert (ping.type, ping.value) == (spdy.PING, 7)
    assert (rst.type, rst.stream_id, rst.value) == (spdy.RST_STREAM, 3, 5)
    assert (reply.type, reply.stream_id, reply.headers) == (spdy.SYN_REPLY, 1, {})


def test_sb4_a_frame_of_another_spdy_version_is_refused() -> None:
    frame = struct.pack(">HHI", 0x8000 | 2, spdy.PING, 4) + struct.pack(">I", 1)
    with pytest.raises(spdy.SpdyError, match="version 2"):
        spdy.Parser(spdy.HeaderCodec()).feed(frame)
