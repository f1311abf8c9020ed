"""The Slurm parsers held to their upstreams and fuzzed: hostlists, TRES strings, Slurm times.

The hostlist table (tests/data/hostlist/upstream_vectors.tsv) holds inputs and results
from SchedMD's, PySlurm's and python-hostlist's own tests and documentation. The fuzz
tests (marker ``fuzz``, budget ``$FLEETAUDIT_FUZZ_EXAMPLES``, default 200) feed each
parser arbitrary text: every input must end in a result or the parser's own error,
never another exception.
"""

from __future__ import annotations

import tracemalloc
from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetaudit.inputs.ingest.hostlist import (
    MAX_HOSTS,
    HostlistError,
    expand_hostlist,
    hostlist_size,
)
from fleetaudit.inputs.ingest.slurm_times import SlurmTimeError, parse_slurm_time
from fleetaudit.inputs.ingest.tres import TresError, parse_count, parse_gres, parse_tres
from tests.conftest import DATA
from tests.fuzzing import FUZZ


def _vectors() -> list[tuple[str, str, str]]:
    rows = []
    for line in (DATA / "hostlist" / "upstream_vectors.tsv").read_text().splitlines():
        if line and not line.startswith("#"):
            source, expression, names = line.split("\t")
            rows.append((source, expression, names))
    return rows


@pytest.mark.parametrize(("source", "expression", "names"), _vectors())
def test_hostlist_upstream_vectors(source: str, expression: str, names: str) -> None:
    if names == "ERROR":
        with pytest.raises(HostlistError):
            expand_hostlist(expression)
        return
    assert expand_hostlist(expression) == names.split(" ")
    assert hostlist_size(expression) == len(names.split(" "))


def test_hostlist_table_covers_the_three_upstreams() -> None:
    sources = [source for source, _, _ in _vectors()]
    assert {s: sources.count(s) for s in set(sources)} == {
        "slurm": 12,
        "pyslurm": 7,
        "python-hostlist": 16,
    }


def test_hostlist_size_is_checked_before_anything_is_expanded() -> None:
    # a typo in a topology.conf: ten million names would take about 800 MiB
    tracemalloc.start()
    try:
        with pytest.raises(HostlistError, match="more than 1,000,000 nodes"):
            expand_hostlist("n[1-100][1-100][1-1000]")
        with pytest.raises(HostlistError, match="more than 1,000,000 nodes"):
            expand_hostlist("a[1-600000],b[1-600000]")  # two items, each below the limit
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000
    assert hostlist_size("n[1-100][1-100][1-1000]") == 10_000_000
    assert len(expand_hostlist(f"n[1-{MAX_HOSTS}]")) == MAX_HOSTS


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ("n1 n2", ["n1", "n2"]),  # Slurm's separators: space, tab, newline and comma
        ("n1\tn[2-3]\nn4", ["n1", "n2", "n3", "n4"]),
        ("n1,,n2, ", ["n1", "n2"]),  # empty items are skipped
        ("n[1, 3]", ["n1", "n3"]),  # spaces inside brackets belong to the ranges
    ],
)
def test_hostlist_separators(expression: str, names: list[str]) -> None:
    assert expand_hostlist(expression) == names


@pytest.mark.parametrize(
    "expression",
    [
        "n[\u0661-\u0663]",  # Arabic-Indic digits
        "n[\uff11-\uff13]",  # full-width digits
        "n[1-\u00b2]",  # superscript two
        "n[\U0001d7ce-\U0001d7cf]",  # mathematical bold digits
    ],
)
def test_hostlist_ranges_take_ascii_digits_only(expression: str) -> None:
    with pytest.raises(HostlistError, match="bad range"):
        expand_hostlist(expression)


def test_hostlist_error_shortens_a_huge_expression() -> None:
    with pytest.raises(HostlistError) as exc:
        expand_hostlist("n[" + "x" * 1_000_000 + "]")
    assert len(str(exc.value)) < 200


_HOSTLIST_ALPHABET = st.sampled_from(list("nab019-,[] \t/:\u0661\uff11x"))


@pytest.mark.fuzz
@FUZZ
@given(st.text(_HOSTLIST_ALPHABET, max_size=40))
def test_fuzz_hostlist_ends_in_names_or_its_error(text: str) -> None:
    try:
        size = hostlist_size(text)
    except HostlistError:
        size = None
    try:
        names = expand_hostlist(text)
    except HostlistError:
        return
    assert size == len(names) <= MAX_HOSTS
    assert all(names) and not any(c in name for name in names for c in "[], \t\n")


@st.composite
def _ranged(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A hostlist of a few items and the names a reference expansion gives."""
    items, names = [], []
    for _ in range(draw(st.integers(1, 3))):
        prefix = draw(st.text("abgpu-", min_size=1, max_size=4))
        ranges = draw(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 5)), min_size=1, max_size=3))
        width = draw(st.integers(1, 3))
        texts, values = [], []
        for low, span in ranges:
            texts.append(f"{low:0{width}d}" + (f"-{low + span}" if span else ""))
            values += [f"{n:0{width}d}" for n in range(low, low + span + 1)]
        items.append(f"{prefix}[{','.join(texts)}]")
        names += [prefix + v for v in values]
    return ",".join(items), names


@pytest.mark.fuzz
@FUZZ
@given(_ranged())
def test_fuzz_hostlist_agrees_with_a_reference_expansion(case: tuple[str, list[str]]) -> None:
    expression, names = case
    assert expand_hostlist(expression) == names


# -- TRES -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("gres/gpu=-1", "count '-1' is negative"),
        ("cpu=4,gres/gpu=-3", "count '-3' is negative"),
        ("gres/gpu=NaN", "count 'NaN' is not a number"),
        ("gres/gpu=inf", "count 'inf' is not a number"),
        ("gres/gpu=1e400", "count '1e400' is not a number"),
    ],
)
def test_tres_refuses_negative_and_non_finite_counts(text: str, reason: str) -> None:
    with pytest.raises(TresError, match=reason):
        parse_tres(text)


@pytest.mark.fuzz
@FUZZ
@given(st.text(st.sampled_from(list("cpumegrs/=,:0123456789.KMGTP-NaNi\u0661 ")), max_size=40))
def test_fuzz_tres_ends_in_counts_or_its_error(text: str) -> None:
    try:
        tres = parse_tres(text)
    except TresError:
        return
    for value in tres.counts.values():
        assert value >= 0 and value == value and value != float("inf")


@pytest.mark.fuzz
@FUZZ
@given(st.text(max_size=30))
def test_fuzz_gres_and_counts_end_in_values_or_their_error(text: str) -> None:
    for parse in (parse_gres, lambda t: parse_count(t, memory=True)):
        try:
            parse(text)
        except TresError:
            pass


# -- Slurm times -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "zone", "expected"),
    [
        ("1796435909", "UTC", datetime(2026, 12, 5, 1, 58, 29)),
        ("2026-12-05T01:58:29", "UTC", datetime(2026, 12, 5, 1, 58, 29)),
        ("2026-12-05T02:58:29", "Europe/Berlin", datetime(2026, 12, 5, 1, 58, 29)),
        ("2026-01-14 13:48:23.UTC", "Europe/Berlin", datetime(2026, 1, 14, 13, 48, 23)),
        ("Unknown", "UTC", None),
        ("None", "UTC", None),
        ("", "UTC", None),
    ],
)
def test_slurm_time(text: str, zone: str, expected: datetime | None) -> None:
    assert parse_slurm_time(text, zone) == expected


@pytest.mark.parametrize("text", ["yesterday", "NaN", "2026-13-01T00:00:00", "99999999999999", "-5"])
def test_slurm_time_refuses(text: str) -> None:
    with pytest.raises(SlurmTimeError):
        parse_slurm_time(text, "UTC")


@pytest.mark.fuzz
@FUZZ
@given(
    st.one_of(
        st.text(max_size=30),
        st.integers(-(2**70), 2**70).map(str),
        st.datetimes().map(lambda d: d.isoformat(timespec="seconds")),
    )
)
def test_fuzz_slurm_time_ends_in_an_instant_or_its_error(text: str) -> None:
    try:
        value = parse_slurm_time(text, "Europe/Berlin")
    except SlurmTimeError:
        return
    if value is not None:
        assert datetime(1900, 1, 1) <= value < datetime(2200, 1, 1)
        assert value.tzinfo is None
