"""SPDY/3.1 framing, the part kubectl's port-forward speaks (SPEC SB4).

kubectl 1.32 tunnels SPDY/3.1 over a WebSocket (`SPDY/3.1+portforward.k8s.io`): each binary
message carries bytes of one SPDY connection, on which kubectl opens two streams per
forwarded connection (SYN_STREAM with `streamType: error|data`, `port`, `requestID`).
No maintained Python SPDY library exists (`spdylay`'s binding is from 2012, `spdy-py` had
one release in 2021), so this is a small sans-IO framer: `Parser.feed(bytes)` yields
frames, the `*_frame` functions build them. Header blocks are zlib-compressed with the
SPDY/3 dictionary, one compression context per direction for the whole connection.
Flow control is not enforced: kubectl's SPDY library (moby/spdystream) does not send
WINDOW_UPDATE either.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

__all__ = ["DATA_FIN", "Frame", "GOAWAY", "HEADERS", "HeaderCodec", "PING", "Parser",
           "RST_STREAM", "SETTINGS", "SYN_REPLY", "SYN_STREAM", "SpdyError", "VERSION",
           "WINDOW_UPDATE", "data_frame", "goaway_frame", "ping_frame", "rst_stream_frame",
           "syn_reply_frame", "syn_stream_frame"]

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS = 1, 2, 3, 4
PING, GOAWAY, HEADERS, WINDOW_UPDATE = 6, 7, 8, 9
DATA_FIN = 0x01  # FLAG_FIN, on data and control frames alike
MAX_FRAME = 1 << 24

# The SPDY/3 header compression dictionary (draft-mbelshe-httpbis-spdy-00, 2.6.10.1).
DICTIONARY = (
    b'\x00\x00\x00\x07options\x00\x00\x00\x04head\x00\x00\x00\x04post\x00\x00\x00\x03put\x00'
    b'\x00\x00\x06delete\x00\x00\x00\x05trace\x00\x00\x00\x06accept\x00\x00\x00\x0eaccept-char'
    b'set\x00\x00\x00\x0faccept-encoding\x00\x00\x00\x0faccept-language\x00\x00\x00\raccept-ra'
    b'nges\x00\x00\x00\x03age\x00\x00\x00\x05allow\x00\x00\x00\rauthorization\x00\x00\x00\rcac'
    b'he-control\x00\x00\x00\nconnection\x00\x00\x00\x0ccontent-base\x00\x00\x00\x10content-en'
    b'coding\x00\x00\x00\x10content-language\x00\x00\x00\x0econtent-length\x00\x00\x00\x10cont'
    b'ent-location\x00\x00\x00\x0bcontent-md5\x00\x00\x00\rcontent-range\x00\x00\x00\x0cconten'
    b't-type\x00\x00\x00\x04date\x00\x00\x00\x04etag\x00\x00\x00\x06expect\x00\x00\x00\x07expi'
    b'res\x00\x00\x00\x04from\x00\x00\x00\x04host\x00\x00\x00\x08if-match\x00\x00\x00\x11if-mo'
    b'dified-since\x00\x00\x00\rif-none-match\x00\x00\x00\x08if-range\x00\x00\x00\x13if-unmodi'
    b'fied-since\x00\x00\x00\rlast-modified\x00\x00\x00\x08location\x00\x00\x00\x0cmax-forward'
    b's\x00\x00\x00\x06pragma\x00\x00\x00\x12proxy-authenticate\x00\x00\x00\x13proxy-authoriza'
    b'tion\x00\x00\x00\x05range\x00\x00\x00\x07referer\x00\x00\x00\x0bretry-after\x00\x00\x00'
    b'\x06server\x00\x00\x00\x02te\x00\x00\x00\x07trailer\x00\x00\x00\x11transfer-encoding\x00'
    b'\x00\x00\x07upgrade\x00\x00\x00\nuser-agent\x00\x00\x00\x04vary\x00\x00\x00\x03via\x00'
    b'\x00\x00\x07warning\x00\x00\x00\x10www-authenticate\x00\x00\x00\x06method\x00\x00\x00'
    b'\x03get\x00\x00\x00\x06status\x00\x00\x00\x06200 OK\x00\x00\x00\x07version\x00\x00\x00'
    b'\x08HTTP/1.1\x00\x00\x00\x03url\x00\x00\x00\x06public\x00\x00\x00\nset-cookie\x00\x00'
    b'\x00\nkeep-alive\x00\x00\x00\x06origin10010120120220520630030230330430530630740240540640'
    b'7408409410411412413414415416417502504505203 Non-Authoritative Information204 No Content3'
    b'01 Moved Permanently400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 Interna'
    b'l Server Error501 Not Implemented503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug '
    b'Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/'
    b'png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,text/javascript'
    b',publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.')


class SpdyError(Exception):
    """The peer broke the framing (the connection cannot go on)."""


@dataclass
class Frame:
    """One frame: `control` with `type` (and `stream_id`/`headers`/`value` when it has
    them), or a data frame of `stream_id` with `data`."""

    control: bool
    flags: int
    type: int = 0
    stream_id: int = 0
    data: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    value: int = 0  # PING id, RST_STREAM / GOAWAY status, WINDOW_UPDATE delta

    @property
    def fin(self) -> bool:
        return bool(self.flags & DATA_FIN)


class HeaderCodec:
    """Header blocks of one connection: a compressor for what we send, a decompressor
    for what we read (each keeps its zlib state across frames, as SPDY requires)."""

    def __init__(self) -> None:
        self._out = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 15,
                                     zdict=DICTIONARY)
        self._in = zlib.decompressobj(zdict=DICTIONARY)

    def encode(self, headers: dict[str, str]) -> bytes:
        block = struct.pack(">I", len(headers))
        for name, value in headers.items():
            raw_name, raw_value = name.lower().encode(), value.encode()
            block += struct.pack(">I", len(raw_name)) + raw_name
            block += struct.pack(">I", len(raw_value)) + raw_value
        return self._out.compress(block) + self._out.flush(zlib.Z_SYNC_FLUSH)

    def decode(self, compressed: bytes) -> dict[str, str]:
        try:
            block = self._in.decompress(compressed)
        except zlib.error as err:
            raise SpdyError(f"bad SPDY header block: {err}") from None
        headers: dict[str, str] = {}
        try:
            (count,), pos = struct.unpack_from(">I", block), 4
            for _ in range(count):
                (size,) = struct.unpack_from(">I", block, pos)
                name = block[pos + 4:pos + 4 + size].decode()
                pos += 4 + size
                (size,) = struct.unpack_from(">I", block, pos)
                value = block[pos + 4:pos + 4 + size].decode()
                pos += 4 + size
                # a repeated header's values are NUL-separated; the first is enough here
                headers[name.lower()] = value.split("\x00")[0]
        except (struct.error, UnicodeDecodeError):
            raise SpdyError("malformed SPDY header block") from None
        return headers


class Parser:
    """Bytes in (`feed`), frames out; partial frames wait for more bytes."""

    def __init__(self, codec: HeaderCodec) -> None:
        self.codec = codec
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames: list[Frame] = []
        while len(self._buffer) >= 8:
            first, second = struct.unpack_from(">II", self._buffer)
            flags, length = second >> 24, second & 0xFFFFFF
            if len(self._buffer) < 8 + length:
                break
            payload = bytes(self._buffer[8:8 + length])
            del self._buffer[:8 + length]
            if first & 0x80000000:
                version, kind = (first >> 16) & 0x7FFF, first & 0xFFFF
                if version != VERSION:
                    raise SpdyError(f"unsupported SPDY version {version}")
                frames.append(self._control(kind, flags, payload))
            else:
                frames.append(Frame(control=False, flags=flags, stream_id=first,
                                    data=payload))
        return frames

    def _control(self, kind: int, flags: int, payload: bytes) -> Frame:
        frame = Frame(control=True, flags=flags, type=kind)
        try:
            if kind == SYN_STREAM:
                frame.stream_id = struct.unpack_from(">I", payload)[0] & 0x7FFFFFFF
                frame.headers = self.codec.decode(payload[10:])
            elif kind in (SYN_REPLY, HEADERS):
                frame.stream_id = struct.unpack_from(">I", payload)[0] & 0x7FFFFFFF
                frame.headers = self.codec.decode(payload[4:])
            elif kind in (RST_STREAM, WINDOW_UPDATE):
                stream_id, value = struct.unpack_from(">II", payload)
                frame.stream_id, frame.value = stream_id & 0x7FFFFFFF, value
            elif kind == PING:
                frame.value = struct.unpack_from(">I", payload)[0]
            elif kind == GOAWAY:
                frame.stream_id, frame.value = struct.unpack_from(">II", payload)
        except struct.error:
            raise SpdyError(f"short SPDY control frame (type {kind})") from None
        return frame


def _control(kind: int, flags: int, payload: bytes) -> bytes:
    if len(payload) >= MAX_FRAME:
        raise ValueError("SPDY frame too large")
    return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload


def syn_stream_frame(codec: HeaderCodec, stream_id: int, headers: dict[str, str], *,
                     fin: bool = False) -> bytes:
    """What a client sends to open a stream (used by tests, as kubectl does)."""
    return _control(SYN_STREAM, DATA_FIN if fin else 0,
                    struct.pack(">IIH", stream_id, 0, 0) + codec.encode(headers))


def syn_reply_frame(codec: HeaderCodec, stream_id: int, headers: dict[str, str] | None = None,
                    *, fin: bool = False) -> bytes:
    return _control(SYN_REPLY, DATA_FIN if fin else 0,
                    struct.pack(">I", stream_id) + codec.encode(headers or {}))


def rst_stream_frame(stream_id: int, status: int) -> bytes:
    return _control(RST_STREAM, 0, struct.pack(">II", stream_id, status))


def ping_frame(ping_id: int) -> bytes:
    return _control(PING, 0, struct.pack(">I", ping_id))


def goaway_frame(last_stream_id: int, status: int = 0) -> bytes:
    return _control(GOAWAY, 0, struct.pack(">II", last_stream_id, status))


def data_frame(stream_id: int, data: bytes, *, fin: bool = False) -> bytes:
    if len(data) >= MAX_FRAME:
        raise ValueError("SPDY frame too large")
    return struct.pack(">II", stream_id & 0x7FFFFFFF,
                       ((DATA_FIN if fin else 0) << 24) | len(data)) + data
