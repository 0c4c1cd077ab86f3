"""Kubernetes resource quantities (`100m`, `0.5`, `128Mi`, `1e3`) as exact numbers.

Requests and limits are strings in objects; the scheduler, the kubelet and validation all
need the same parse, so it lives here once. Values are `Fraction`s so `0.1` cpu is exactly
100 millicores and nothing rounds until a caller asks for an integer unit.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
# Kubernetes: <signedNumber><suffix>, suffix one of the SI/binary units or e<signedInt>.
_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)$")
_EXPONENT = re.compile(r"^[eE]([+-]?[0-9]+)$")


def parse_quantity(text: str | int | float) -> Fraction:
    """Parse a Kubernetes `resource.Quantity`; raises ValueError naming the bad text."""
    if isinstance(text, bool):
        raise ValueError(f"quantity must be a number or a string, not {text!r}")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise ValueError(f"quantity {text!r} is not finite")
        return Fraction(str(text))
    if not isinstance(text, str):
        raise ValueError(f"quantity must be a number or a string, not {text!r}")
    return _parse_text(text)


# Objects repeat a handful of quantity strings ("100m", "500Mi"), and every pod the
# scheduler sees is parsed (Fraction arithmetic) more than once: remember recent answers.
# Fractions are immutable, so sharing one is safe; a bad text raises and is not cached.
@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> Fraction:
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise ValueError(f"quantities must match the regular expression "
                         f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}")
    number, suffix = Fraction(match.group(1)), match.group(2)
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    exponent = _EXPONENT.match(suffix)
    if exponent is not None:
        return number * Fraction(10) ** int(exponent.group(1))
    raise ValueError(f"unable to parse quantity's suffix {suffix!r} in {text!r}")


def cpu_millis(quantity: str | int | float | Fraction) -> int:
    """CPU in millicores, rounded up as Kubernetes' `MilliValue()` does (`"0.5"` → 500)."""
    if isinstance(quantity, str):
        return _millis_of_text(quantity)
    value = quantity if isinstance(quantity, Fraction) else parse_quantity(quantity)
    return math.ceil(value * 1000)


def bytes_(quantity: str | int | float | Fraction) -> int:
    """A byte count (memory, storage), rounded up as Kubernetes' `Value()` does."""
    if isinstance(quantity, str):
        return _bytes_of_text(quantity)
    value = quantity if isinstance(quantity, Fraction) else parse_quantity(quantity)
    return math.ceil(value)


@functools.lru_cache(maxsize=4096)
def _millis_of_text(text: str) -> int:
    return math.ceil(_parse_text(text) * 1000)


@functools.lru_cache(maxsize=4096)
def _bytes_of_text(text: str) -> int:
    return math.ceil(_parse_text(text))


_DECIMAL_SUFFIXES = [(-9, "n"), (-6, "u"), (-3, "m"), (0, ""), (3, "k"), (6, "M"), (9, "G"),
                     (12, "T"), (15, "P"), (18, "E")]


def canonical(text: str | int | float | Fraction, *, binary: bool | None = None) -> str:
    """The quantity as Kubernetes writes it back (`Quantity.String()`): `1.5` is `1500m`,
    `0.5Gi` is `512Mi`, `2000m` is `2`: a binary suffix stays binary while the value is a
    whole number of bytes, and the largest suffix that keeps an integer is chosen. A
    computed value (a Fraction: a sum of requests) says by `binary` which format it has."""
    value = text if isinstance(text, Fraction) else parse_quantity(text)
    if binary is None:
        binary = isinstance(text, str) and text.strip().endswith("i")
    if binary and value.denominator == 1:
        number = value.numerator
        for suffix, size in reversed(list(_BINARY.items())):
            if number and number % size == 0:
                return f"{number // size}{suffix}"
        return str(number)
    if value == 0:
        return "0"
    for exponent, suffix in reversed(_DECIMAL_SUFFIXES):
        scaled = value / Fraction(10) ** exponent
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    return f"{math.ceil(value * 10**9)}n"  # finer than a nano: rounded up, as Kubernetes
