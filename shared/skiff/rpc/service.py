"""The gRPC surface of the apiserver: one service, its methods and their shapes.

Requests and responses are msgpack maps (see `codec`). Keeping the method table here lets
the server register generic handlers and the client build stubs from the same names.

Request fields: `resource` (plural, `pods`), `namespace`, `name`, `object`, and per method
`options` (e.g. `gracePeriodSeconds`, `preconditions`, `labelSelector`, `fieldSelector`,
`resourceVersion`, `revision`, `fieldValidation`, `allowWatchBookmarks`).
Unary responses: `{"object": {...}, "warnings": [...]}` or `{"items": [...],
"resourceVersion": "R"}`. Watch streams `{"type": ADDED|MODIFIED|DELETED|BOOKMARK,
"object": {...}}`.
`Batch` carries several writes, each its own request and result (the apiserver's
endpoints.batch; the client's skiff.client.batch).
"""

from __future__ import annotations

from typing import Final

SERVICE: Final = "skiff.v1.Api"

UNARY_METHODS: Final = (
    "Create",
    "Get",
    "List",
    "Update",
    "UpdateStatus",
    "Delete",
    "Bind",
    "Evict",
    "History",
    "Discovery",
    "Batch",
)
STREAM_METHODS: Final = ("Watch",)

# Kubernetes' etcd request limit: objects larger than this are refused.
MAX_OBJECT_BYTES: Final = 1536 * 1024
# gRPC messages may be much larger (an unpaged list of 50,000 pods); the server rejects
# oversized objects itself, and clients that want bounded replies list in pages.
MAX_MESSAGE_BYTES: Final = 1024 * 1024 * 1024

STATUS_TRAILER: Final = "skiff-status-bin"


def method_path(name: str) -> str:
    return f"/{SERVICE}/{name}"
