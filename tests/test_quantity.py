"""Kubernetes quantities: the grammar's test vectors, worked by hand."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetaudit.inputs.ingest.quantity import QuantityError, parse_quantity, try_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", "0.5"),
        ("95500m", "95.5"),
        ("16Gi", "17179869184"),  # 16 * 1024^3
        ("16G", "16000000000"),
        ("2113484476Ki", "2164208103424"),  # 2113484476 * 1024
        ("1e3", "1000"),
        ("1E3", "1000"),
        ("12e6", "12000000"),
        ("1E", "1000000000000000000"),  # exa, not an exponent
        ("1k", "1000"),
        ("1Ki", "1024"),
        (".5", "0.5"),
        ("5.", "5"),
        ("+1", "1"),
        ("-2", "-2"),
        ("0.1m", "0.001"),  # rounded up to the milli, as the API server does
        ("1.5Gi", "1610612736"),
        ("8", "8"),
        ("1e-3", "0.001"),
        ("1Mi", "1048576"),  # 1024^2
        ("2Ti", "2199023255552"),  # 2 * 1024^4
        ("1Pi", "1125899906842624"),  # 1024^5
        ("7Ei", "8070450532247928832"),  # 7 * 2^60, below 2^63 - 1
        ("3T", "3000000000000"),
        ("1P", "1000000000000000"),
    ],
)
def test_vectors(text: str, value: str) -> None:
    assert parse_quantity(text) == Decimal(value)


@pytest.mark.parametrize(
    "text",
    [
        "1ki",
        "1K",
        "1.5.5",
        "",
        " ",
        "1n",
        "1u",
        "Gi",
        "1e",
        "1 Gi",
        "0x10",
        "1Ki2",
        "9e20",
        "9223372037G",
        "8Ei",  # 2^63, one above the largest quantity
    ],
)
def test_rejects_what_kubernetes_rejects(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)
    assert try_quantity(text) is None


def test_non_text_values() -> None:
    assert parse_quantity(8) == 8  # a bare JSON number
    for bad in (None, True, 1.5, [], {}):
        assert try_quantity(bad) is None


@given(st.integers(min_value=0, max_value=2**32), st.sampled_from(["", "k", "M", "G"]))
def test_decimal_suffixes_scale_by_1000(n: int, suffix: str) -> None:
    power = {"": 0, "k": 1, "M": 2, "G": 3}[suffix]
    assert parse_quantity(f"{n}{suffix}") == n * 1000**power


@given(st.integers(min_value=0, max_value=2**30), st.sampled_from(["Ki", "Mi", "Gi"]))
def test_binary_suffixes_scale_by_1024(n: int, suffix: str) -> None:
    power = {"Ki": 1, "Mi": 2, "Gi": 3}[suffix]
    assert parse_quantity(f"{n}{suffix}") == n * 1024**power


@given(st.integers(min_value=0, max_value=10**9))
def test_millis_are_exact(m: int) -> None:
    assert parse_quantity(f"{m}m") == Decimal(m) / 1000
