"""The wire protocol between Skiff's components: msgpack over generic gRPC methods."""

from skiff.rpc.codec import CodecError, decode, decode_map, decode_maps, encode, encode_batch
from skiff.rpc.errors import from_grpc, to_grpc
from skiff.rpc.service import (
    MAX_MESSAGE_BYTES,
    MAX_OBJECT_BYTES,
    SERVICE,
    STREAM_METHODS,
    UNARY_METHODS,
    method_path,
)

__all__ = [
    "CodecError", "decode", "decode_map", "decode_maps", "encode", "encode_batch",
    "from_grpc", "to_grpc",
    "MAX_MESSAGE_BYTES", "MAX_OBJECT_BYTES", "SERVICE", "STREAM_METHODS", "UNARY_METHODS",
    "method_path",
]
