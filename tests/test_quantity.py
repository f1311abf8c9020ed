"""Kubernetes quantities: k8s.io/apimachinery's own test vectors, the grammar worked by hand,
and a fuzz pass (marker ``fuzz``)."""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetaudit.inputs.ingest.quantity import (
    MAX,
    QuantityError,
    QuantityTooLarge,
    is_whole,
    parse_quantity,
)
from tests.fuzzing import FUZZ

VECTORS = Path(__file__).parent / "data" / "quantity" / "apimachinery.csv"


def _vectors() -> list[tuple[str, str, str, str]]:
    with VECTORS.open(newline="") as fh:
        lines = [line for line in fh if not line.startswith("#")]
    return [(r["input"], r["value"], r["table"], r["ours"]) for r in csv.DictReader(lines)]


@pytest.mark.parametrize(("text", "value", "table", "ours"), _vectors())
def test_upstream_vectors(text: str, value: str, table: str, ours: str) -> None:
    """Every input of upstream's tables reads as upstream reads it, but where ``ours``
    names the documented difference (a magnitude above 2^63-1 is refused)."""
    if ours.startswith("refused") or value == "error":
        with pytest.raises(QuantityError) as caught:
            parse_quantity(text)
        # only a magnitude above 2^63-1 is "too large": a reader names that one
        assert isinstance(caught.value, QuantityTooLarge) == ours.startswith("refused"), text
    else:
        assert parse_quantity(text) == Decimal(value), table


def test_the_vector_table_is_whole() -> None:
    vectors = _vectors()
    assert len(vectors) > 350
    refused = [v for v in vectors if v[3].startswith("refused")]
    assert {v[0] for v in refused} >= {"9Ei", "12E", "1e21", "-9Ei", "+12E"}
    assert len(refused) == 15  # the 2^63-1 difference and nothing else


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100500u", "0.1005"),  # the API server prints a sub-milli CPU request so
        ("250n", "0.00000025"),
        ("95500m", "95.5"),
        ("16Gi", "17179869184"),  # 16 * 1024^3
        ("2113484476Ki", "2164208103424"),
        ("1E", "1000000000000000000"),  # exa, not an exponent
        ("0.1m", "0.0001"),  # kept: precision goes down to the nano
        ("0.1n", "0.000000001"),  # below the nano: rounded up to it
        ("-0.1n", "-0.000000001"),  # away from zero
        ("1.0000000000000000000000000000001", "1.000000001"),  # 32 digits keep their round-up
        ("0." + "0" * 5000 + "1", "0.000000001"),
        ("1e-1000000", "0.000000001"),
        ("7Ei", "8070450532247928832"),  # 7 * 2^60, below 2^63 - 1
        ("9223372036854775807", "9223372036854775807"),
        ("-", "0"),  # a sign alone is zero upstream
        (".", "0"),
        ("\u00a01\u3000", "1"),  # Go's TrimSpace trims Unicode spaces of a quoted value
    ],
)
def test_worked_values(text: str, value: str) -> None:
    assert parse_quantity(text) == Decimal(value)


@pytest.mark.parametrize(
    "text",
    [
        "1ki", "1K", "1.5.5", "", " ", "1 Gi", "0x10", "1Ki2", "1e", "1e+", "Gi1",
        "１２Gi",  # Unicode digits: Go reads ASCII 0-9 only
        "1\x1f",  # Python would strip \x1f; Go's TrimSpace does not
        "8Ei",  # 2^63: upstream caps it, we refuse it (documented)
        "9223372036854775808",
        "1e1000000",  # refused by its size, never built
        "1e" + "9" * 5000,
    ],
)  # fmt: skip
def test_refused(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_json_numbers_and_other_values() -> None:
    assert parse_quantity(8) == 8  # a bare JSON number
    assert parse_quantity(Decimal("1.5")) == Decimal("1.5")  # a JSON number read exactly
    assert parse_quantity(Decimal("1E+3")) == 1000
    for bad in (None, True, 1.5, [], {}):
        with pytest.raises(QuantityError):
            parse_quantity(bad)


def test_an_error_shows_a_bounded_value() -> None:
    with pytest.raises(QuantityError) as caught:
        parse_quantity("x" * 1_000_000)
    assert len(str(caught.value)) < 120


def test_whole() -> None:
    assert is_whole(parse_quantity("2")) and is_whole(parse_quantity("2000m"))
    assert not is_whole(parse_quantity("1.5")) and not is_whole(parse_quantity("1500m"))


@given(st.integers(min_value=0, max_value=2**32), st.sampled_from(["", "k", "M", "G"]))
def test_decimal_suffixes_scale_by_1000(n: int, suffix: str) -> None:
    power = {"": 0, "k": 1, "M": 2, "G": 3}[suffix]
    assert parse_quantity(f"{n}{suffix}") == n * 1000**power


@given(st.integers(min_value=0, max_value=2**30), st.sampled_from(["Ki", "Mi", "Gi"]))
def test_binary_suffixes_scale_by_1024(n: int, suffix: str) -> None:
    power = {"Ki": 1, "Mi": 2, "Gi": 3}[suffix]
    assert parse_quantity(f"{n}{suffix}") == n * 1024**power


@given(st.integers(min_value=0, max_value=10**12), st.sampled_from(["m", "u", "n"]))
def test_sub_units_are_exact(n: int, suffix: str) -> None:
    power = {"m": 3, "u": 6, "n": 9}[suffix]
    assert parse_quantity(f"{n}{suffix}") == Decimal(n) / 10**power


_ALPHABET = "0123456789.+-eEKMGTPimunk \u00a0１"


@pytest.mark.fuzz
@FUZZ
@given(st.one_of(st.text(alphabet=_ALPHABET, max_size=40), st.text(max_size=20)))
def test_fuzz_any_text_is_a_value_or_a_refusal(text: str) -> None:
    """No text ends in anything but a value within 2^63-1, exact to the nano, or a
    QuantityError."""
    try:
        value = parse_quantity(text)
    except QuantityError:
        return
    assert abs(value) <= MAX
    assert value == value.quantize(Decimal("1E-9"))


@pytest.mark.fuzz
@FUZZ
@given(
    st.integers(min_value=-(10**20), max_value=10**20),
    st.integers(min_value=0, max_value=12),
    st.sampled_from(["", "n", "u", "m", "k", "M", "G", "Ki", "Mi", "e3", "e-4", "E+2"]),
)
def test_fuzz_values_match_exact_arithmetic(mantissa: int, places: int, suffix: str) -> None:
    """A number with ``places`` decimals and a suffix reads as the exact product, rounded
    away from zero to the nano (upstream's rule), or is refused above 2^63-1."""
    sign = "-" if mantissa < 0 else ""
    digits = str(abs(mantissa)).rjust(places + 1, "0")
    text = f"{sign}{digits[: len(digits) - places]}.{digits[len(digits) - places:]}{suffix}"
    factor = {"": 1, "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
              "k": 1000, "M": 10**6, "G": 10**9, "Ki": 1024, "Mi": 1024**2,
              "e3": 1000, "e-4": Decimal("1e-4"), "E+2": 100}[suffix]  # fmt: skip
    from decimal import ROUND_UP, localcontext

    with localcontext() as ctx:
        ctx.prec = 80
        exact = (Decimal(mantissa).scaleb(-places) * factor).quantize(
            Decimal("1E-9"), rounding=ROUND_UP
        )
    if abs(exact) > MAX:
        with pytest.raises(QuantityError):
            parse_quantity(text)
    else:
        assert parse_quantity(text) == exact
