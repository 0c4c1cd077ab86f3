"""Resource quantities parse like Kubernetes' resource.Quantity (AS7, TS5)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from skiff.api.quantity import bytes_, cpu_millis, parse_quantity


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("100m", Fraction(1, 10), id="milli"),
    pytest.param("0.5", Fraction(1, 2), id="decimal"),
    pytest.param("2", Fraction(2), id="integer-string"),
    pytest.param(3, Fraction(3), id="int"),
    pytest.param(0.25, Fraction(1, 4), id="float"),
    pytest.param("128Mi", Fraction(128 * 2**20), id="mebi"),
    pytest.param("1Gi", Fraction(2**30), id="gibi"),
    pytest.param("1Ki", Fraction(1024), id="kibi"),
    pytest.param("1G", Fraction(10**9), id="giga"),
    pytest.param("1k", Fraction(1000), id="kilo"),
    pytest.param("1e3", Fraction(1000), id="exponent"),
    pytest.param("1E3", Fraction(1000), id="upper-exponent"),
    pytest.param("1E", Fraction(10**18), id="exa"),
    pytest.param("5n", Fraction(5, 10**9), id="nano"),
    pytest.param("5u", Fraction(5, 10**6), id="micro"),
    pytest.param("-1", Fraction(-1), id="negative"),
    pytest.param(".5", Fraction(1, 2), id="leading-dot"),
])
def test_as7_quantity_parses_kubernetes_suffixes(text: str | int | float,
                                                 expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("text", [
    pytest.param("", id="empty"),
    pytest.param("abc", id="letters"),
    pytest.param("1Xi", id="unknown-suffix"),
    pytest.param("1e", id="bare-e"),
    pytest.param("5m5", id="junk-after-suffix"),
    pytest.param("1 Gi", id="space"),
    pytest.param(True, id="bool"),
    pytest.param(float("inf"), id="infinite"),
])
def test_as7_bad_quantity_raises_value_error(text: str | int | float) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text)


@pytest.mark.parametrize(("text", "millis"), [
    pytest.param("100m", 100, id="milli"),
    pytest.param("0.5", 500, id="half"),
    pytest.param("2", 2000, id="two"),
    pytest.param("1n", 1, id="rounds-up"),
])
def test_ts5_cpu_millis(text: str, millis: int) -> None:
    assert cpu_millis(text) == millis


@pytest.mark.parametrize(("text", "count"), [
    pytest.param("128Mi", 128 * 1024 * 1024, id="mebi"),
    pytest.param("1G", 10**9, id="giga"),
    pytest.param("1e3", 1000, id="exponent"),
    pytest.param("1500m", 2, id="rounds-up"),
])
def test_ts5_bytes(text: str, count: int) -> None:
    assert bytes_(text) == count
