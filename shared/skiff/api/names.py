"""Generated names and name-safe hashes, spelled as Kubernetes spells them.

Kubernetes draws every random name suffix (`generateName`) and spells every template hash
(`pod-template-hash`, `controller-revision-hash`) in one alphabet without vowels or the
look-alike digits 0, 1 and 3, so generated names never form words and read unambiguously
(k8s.io/apimachinery/pkg/util/rand). A `generateName` base is cut so the name with its
5-character suffix still fits 63 characters (apiserver/pkg/storage/names). And
apimachinery's `IsDNS1035Label`, with its message, which CRD names, API versions, review
versions and CEL's format library check.
"""

from __future__ import annotations

import json
import re
import secrets
from typing import Any

SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SUFFIX_LENGTH = 5
_MAX_NAME_LENGTH = 63
_MAX_BASE_LENGTH = _MAX_NAME_LENGTH - _SUFFIX_LENGTH


def generate_name(base: str) -> str:
    """`generateName` plus a random 5-character suffix, the base cut to 58 characters."""
    suffix = "".join(secrets.choice(SAFE_ALPHABET) for _ in range(_SUFFIX_LENGTH))
    return f"{base[:_MAX_BASE_LENGTH]}{suffix}"


def safe_encode(text: str) -> str:
    """Each character of `text` mapped into the safe alphabet (rand.SafeEncodeString)."""
    return "".join(SAFE_ALPHABET[ord(c) % len(SAFE_ALPHABET)] for c in text)


def fnv32a(data: bytes) -> int:
    """FNV-1a, 32 bits: the hash Kubernetes' controllers take of a pod template."""
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def object_hash(value: Any, salt: bytes = b"") -> str:
    """A short, label-safe hash of a JSON-shaped value (canonical JSON, FNV-1a, the decimal
    digits safe-encoded), `salt` appended before hashing (a Deployment's collisionCount)."""
    data = json.dumps(value, sort_keys=True, separators=(",", ":")).encode() + salt
    return safe_encode(str(fnv32a(data)))


DNS1035_LABEL_MAX_LENGTH = 63
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL = re.compile(f"^{_DNS1035_LABEL_FMT}$")
DNS1035_LABEL_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
    "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    f"'abc-123', regex used for validation is '{_DNS1035_LABEL_FMT}')"
)


def dns1035_label_problems(value: str) -> list[str]:
    """apimachinery's `IsDNS1035Label`: the reasons `value` is not one (empty when it is)."""
    problems = []
    if len(value) > DNS1035_LABEL_MAX_LENGTH:
        problems.append(f"must be no more than {DNS1035_LABEL_MAX_LENGTH} characters")
    if not _DNS1035_LABEL.match(value):
        problems.append(DNS1035_LABEL_MSG)
    return problems
