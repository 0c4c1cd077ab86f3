"""The name rules a CustomResourceDefinition's names follow (SPEC EX1): apimachinery's
`IsDNS1035Label` (skiff.api.names) joined as one field error's detail, and the mixed-case
form kinds use. Shared by the CRD
validator and the embedded-resource check of custom objects."""

from __future__ import annotations

from skiff.api.names import dns1035_label_problems


def dns1035_label_detail(value: str) -> str:
    """The problems joined as kube joins them in one field error (",")."""
    return ",".join(dns1035_label_problems(value))


def kind_problems(kind: str) -> list[str]:
    """A Kind (or ListKind): a DNS-1035 label once lower-cased."""
    problems = dns1035_label_problems(kind.lower())
    if not problems:
        return []
    return ["may have mixed case, but should otherwise match: " + ",".join(problems)]
