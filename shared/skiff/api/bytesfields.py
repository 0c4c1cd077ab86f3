"""Fields Kubernetes types as `[]byte`: a Secret's `data` and a ConfigMap's `binaryData`.

In JSON they are base64, and kube-apiserver decodes them with Go's `encoding/base64`
while reading the body: line breaks (`\\r`, `\\n`) are skipped, so the wrapped base64 of the
documentation's TLS Secret example is fine, and anything else that is not base64 makes the
whole body undecodable (400 `... cannot be handled as a Secret: illegal base64 data at input
byte N`), before validation ever runs. Stored and served again, a value is the canonical
base64 of its bytes.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

_BYTES_FIELDS = {"Secret": "data", "ConfigMap": "binaryData"}
_ALPHABET = re.compile(r"[A-Za-z0-9+/=]")


def _illegal_at(text: str) -> int:
    """Where Go's StdEncoding reports the first problem: the first byte outside the
    alphabet, else the start of the quantum left incomplete."""
    for index, char in enumerate(text):
        if char not in "\r\n" and not _ALPHABET.fullmatch(char):
            return index
    data = [i for i, char in enumerate(text) if char not in "\r\n"]
    whole = len(data) - len(data) % 4
    return data[whole] if whole < len(data) else max(len(text) - 1, 0)


def decode_bytes_fields(obj: dict[str, Any]) -> str | None:
    """Canonicalise `obj`'s base64 fields in place; the decoding error, if one is not
    base64 (the caller answers 400 with it)."""
    field = _BYTES_FIELDS.get(str(obj.get("kind") or ""))
    data = obj.get(field) if field else None
    if not isinstance(data, dict):
        return None
    for key, value in data.items():
        if not isinstance(value, str):
            continue  # validation names the field and its type
        try:
            raw = base64.b64decode(value.replace("\r", "").replace("\n", ""), validate=True)
        except (binascii.Error, ValueError):
            return f"illegal base64 data at input byte {_illegal_at(value)}"
        data[key] = base64.b64encode(raw).decode()
    return None


def decode_bytes(value: Any) -> bytes:
    """One `[]byte` field's bytes (base64 in JSON: a CSR's request, a caBundle); b"" when
    absent or not base64 (validation says why, where the field is checked)."""
    if not isinstance(value, str) or not value:
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return b""
