"""The name rules a CustomResourceDefinition's names follow (SPEC EX1): apimachinery's
`IsDNS1035Label` with its message, and the mixed-case form kinds use. Shared by the CRD
validator and the embedded-resource check of custom objects."""

from __future__ import annotations

import re

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


def dns1035_label_detail(value: str) -> str:
    """The problems joined as kube joins them in one field error (",")."""
    return ",".join(dns1035_label_problems(value))


def kind_problems(kind: str) -> list[str]:
    """A Kind (or ListKind): a DNS-1035 label once lower-cased."""
    problems = dns1035_label_problems(kind.lower())
    if not problems:
        return []
    return ["may have mixed case, but should otherwise match: " + ",".join(problems)]
