"""Skiff's API objects: kinds, validation, defaults, selectors and quantities.

Objects are plain Kubernetes-shaped dicts; this package is the one place that knows
their rules, with no I/O, so the apiserver, the client and every controller agree.
"""

from skiff.api.defaults import apply_defaults
from skiff.api.errors import ApiError, FieldError, Reason
from skiff.api.kinds import KINDS, KindInfo, lookup
from skiff.api.pods import get_condition, is_pod_terminal, is_terminating, pod_key
from skiff.api.quantity import bytes_, cpu_millis, parse_quantity
from skiff.api.schema import prune_unknown_fields
from skiff.api.selectors import (
    FieldSelector,
    LabelSelector,
    validate_label_key,
    validate_label_selector,
    validate_label_value,
    validate_labels,
)
from skiff.api.validation import validate

__all__ = [
    "KINDS",
    "ApiError",
    "FieldError",
    "FieldSelector",
    "KindInfo",
    "LabelSelector",
    "Reason",
    "apply_defaults",
    "bytes_",
    "cpu_millis",
    "get_condition",
    "is_pod_terminal",
    "is_terminating",
    "lookup",
    "parse_quantity",
    "pod_key",
    "prune_unknown_fields",
    "validate",
    "validate_label_key",
    "validate_label_selector",
    "validate_label_value",
    "validate_labels",
]
