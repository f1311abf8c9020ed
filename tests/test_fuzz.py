"""Fuzzing of the generic parsers (marker ``fuzz``; budget: tests/fuzzing.py).

Whatever the input, each ends in a result, a reject row or a one-line error (InputError
or UsageError, exit 2 on the command line), never another exception; a failed ingest
leaves the store as it was, and nothing a call stores is a NaN or an infinity. The
parsers: native CSV, JSON Lines and Parquet rows through ingest (every column of every
table, with values that are numbers, times, text, control characters and nonsense), the
command line's instants and durations, the ASI release's partition folder names, and the
Prometheus, kubectl and Slurm exports with a few bytes changed.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetaudit.core.errors import InputError, UsageError
from fleetaudit.core.times import parse_duration, parse_instant
from fleetaudit.inputs import asi_trace
from fleetaudit.inputs.ingest import IngestOptions, ingest
from fleetaudit.model import schema
from fleetaudit.model.store import Store, open_store
from tests.fuzzing import FUZZ, NODE_N1, VALID_ROWS

pytestmark = pytest.mark.fuzz

# Values as an export might spell them, well or badly: numbers at and past their limits,
# the spellings of NaN and infinity, times, and text with quotes, separators, line
# breaks, control characters, bidi overrides and other scripts' digits.
SPELLINGS = [
    "", "0", "-0", "1", "8", "-1", "0.5", "1.5", "1e400", "-1e400", "1e-400", "9" * 40,
    "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "-Infinity", "infinity", "0x10", "1_000",
    "1,5", "١٢", "²", "true", "false", "null", "None", "high", "low", "healthy", "down",
    "2026-01-01", "2026-01-01T00:00:00Z", "2026-01-01 00:00:00+02:00", "2026-13-45",
    "1767225600", "1767225600.5", "99999999999", "-62135596800", "9999-12-31T23:59:59Z",
    "0001-01-01", "not-a-time", "n1", "H20", "H20|H800", "switch", "node", "any",
    '"', '""', ",", "\n", "\r\n", "\t", "\x00", "\x1b]0;pwned\x07\x1b[2J", "\u202e", "=1+1",
]  # fmt: skip
VALUES = st.one_of(
    st.sampled_from(SPELLINGS),
    st.text(max_size=12),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats().map(repr),
)

assert set(VALID_ROWS) == set(schema.TABLES)


@pytest.fixture(scope="module")
def fuzzed_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, Path]]:
    """One store for all examples (a node n1 of 8 GPUs to refer to), and a scratch folder."""
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "base").mkdir()
    (folder / "base" / "nodes.csv").write_text(NODE_N1)
    with open_store(folder / "fuzz.duckdb") as store:
        ingest(store, [folder / "base"])
        yield store, folder


def _counts(store: Store) -> dict[str, int]:
    return {name: store.row_count(name) for name in [*schema.TABLES, "rejects", "ingests"]}


def _ingest_ends_well(store: Store, path: Path, rows: int | None) -> None:
    """The one property: a result whose counts add up and store nothing non-finite, or a
    one-line InputError that leaves the store as it was."""
    before = _counts(store)
    try:
        result = ingest(store, [path])
    except InputError as exc:
        assert "\n" not in exc.message, exc.message
        assert _counts(store) == before
        return
    (table,) = result.tables
    assert table.read == table.new + table.replaced + table.superseded + table.rejected
    if rows is not None:
        assert table.read == rows
    reasons = store.sql(
        'SELECT "row", reason FROM rejects WHERE ingest_id = $id', {"id": result.ingest_id}
    )
    assert reasons.height == table.rejected
    assert reasons["reason"].null_count() == 0
    store.check_finite()  # no NaN, no infinity, no time outside 1900..2200 was stored


@st.composite
def table_rows(draw: st.DrawFn) -> tuple[str, list[str], list[dict[str, str]]]:
    """A table, its header (the valid row's columns, up to four fuzzed ones, maybe an
    extra column) and one to four rows of fuzzed values over the valid row."""
    name = draw(st.sampled_from(sorted(schema.TABLES)))
    columns = list(schema.table(name).column_names)
    fuzzed = draw(st.lists(st.sampled_from(columns), unique=True, max_size=4))
    extra = draw(st.sampled_from([[], ["note"]]))
    count = draw(st.integers(min_value=1, max_value=4))
    rows = []
    for _ in range(count):
        row = {**VALID_ROWS[name]}
        for column in fuzzed + extra:
            row[column] = draw(VALUES)
        rows.append(row)
    header = list(dict.fromkeys([*VALID_ROWS[name], *fuzzed, *extra]))
    return name, header, rows


@FUZZ
@given(data=st.data())
def test_native_csv_rows(fuzzed_store: tuple[Store, Path], data: st.DataObject) -> None:
    store, folder = fuzzed_store
    name, header, rows = data.draw(table_rows())
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path = folder / f"{name}.csv"
    path.write_text(text.getvalue(), encoding="utf-8")
    _ingest_ends_well(store, path, None)  # a value with a NUL or a line break may split a row


@FUZZ
@given(data=st.data())
def test_native_csv_lines(fuzzed_store: tuple[Store, Path], data: st.DataObject) -> None:
    """Lines as they come, not as a CSV writer quotes them: fields too many or too few,
    stray quotes, bytes that are not UTF-8."""
    store, folder = fuzzed_store
    name = data.draw(st.sampled_from(sorted(schema.TABLES)))
    header = ",".join(VALID_ROWS[name]).encode()
    lines = data.draw(
        st.lists(
            st.one_of(
                st.just(",".join(VALID_ROWS[name].values()).encode()),
                st.binary(max_size=40).filter(lambda b: b"\n" not in b and b"\r" not in b),
                st.lists(st.sampled_from(SPELLINGS[:48]), max_size=8).map(
                    lambda vs: ",".join(vs).encode()
                ),
            ),
            min_size=1,
            max_size=5,
        )
    )
    path = folder / f"{name}.csv"
    path.write_bytes(header + b"\n" + b"\n".join(lines) + b"\n")
    _ingest_ends_well(store, path, None)


JSON_VALUES = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False), VALUES,
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=6,
)  # fmt: skip


@FUZZ
@given(data=st.data())
def test_native_jsonl_rows(fuzzed_store: tuple[Store, Path], data: st.DataObject) -> None:
    store, folder = fuzzed_store
    name, header, rows = data.draw(table_rows())
    typed = [
        {k: (data.draw(JSON_VALUES) if data.draw(st.booleans()) else v) for k, v in row.items()}
        for row in rows
    ]
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in typed), encoding="utf-8")
    _ingest_ends_well(store, path, len(rows))


EPOCH_2026 = 1767225600.0


@st.composite
def parquet_column(draw: st.DrawFn, kind: schema.Kind, valid: str, count: int) -> pa.Array:
    """A column of ``count`` values as Parquet may type it: the valid value first, then
    (for a fuzzed column) doubles with NaN and the infinities among them, 64-bit integers
    at their limits, timestamps of any year, or text."""
    fuzzed = draw(st.booleans())
    rest = count - 1
    if kind in (schema.Kind.FLOAT, schema.Kind.INT, schema.Kind.TIME):
        first = EPOCH_2026 if kind is schema.Kind.TIME else float(valid)
        how = draw(st.sampled_from(["double", "int", "time", "text"]))
        if how == "double" or not fuzzed:
            more = draw(st.lists(st.floats(), min_size=rest, max_size=rest)) if fuzzed else [first] * rest
            return pa.array([first, *more], type=pa.float64())
        if how == "int":
            limits = st.integers(min_value=-(2**63), max_value=2**63 - 1)
            return pa.array([int(first), *draw(st.lists(limits, min_size=rest, max_size=rest))], type=pa.int64())
        if how == "time":
            times = st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31))
            start = datetime(2026, 1, 1)
            return pa.array([start, *draw(st.lists(times, min_size=rest, max_size=rest))], type=pa.timestamp("us"))
    values = [valid] * count
    if fuzzed:
        values[1:] = draw(st.lists(VALUES, min_size=rest, max_size=rest))
    return pa.array(values, type=pa.string())


@FUZZ
@given(data=st.data())
def test_native_parquet_rows(fuzzed_store: tuple[Store, Path], data: st.DataObject) -> None:
    """Typed Parquet columns: one NaN or infinity among finite values (whose statistics
    DuckDB may use to skip a bound) is a reject, never a stored value."""
    store, folder = fuzzed_store
    name = data.draw(st.sampled_from(sorted(schema.TABLES)))
    table = schema.table(name)
    count = data.draw(st.integers(min_value=2, max_value=6))
    columns = {
        column: data.draw(parquet_column(table.column(column).kind, valid, count))
        for column, valid in VALID_ROWS[name].items()
    }
    path = folder / f"{name}.parquet"
    pq.write_table(pa.table(columns), path)
    _ingest_ends_well(store, path, count)


@FUZZ
@given(text=st.one_of(st.sampled_from(SPELLINGS), st.text(max_size=40)))
def test_instants_and_durations(text: str) -> None:
    """--at, --since, --step and their kin: a value, or one line naming the option."""
    for parse, kind in ((parse_instant, datetime), (parse_duration, object)):
        try:
            value = parse(text, option="--x")
        except UsageError as exc:
            assert exc.message.startswith("--x: ") and "\n" not in exc.message.replace(text, "")
            continue
        assert isinstance(value, kind)
        if isinstance(value, datetime):
            assert 1900 <= value.year < 2200
        else:
            assert math.isfinite(value.total_seconds()) and value.total_seconds() >= 0


NAMES = st.one_of(
    st.sampled_from(["day=0", "day=109", "day=0109", "day=36524", "day=36525", "day=99999999",
                     "day=", "day=-1", "day=1.5", "day=１", "day=١٠٩", "hour=00", "hour=5",
                     "hour=05", "hour=23", "hour=24", "hour=99", "hour=", "hour=x", "other"]),
    st.text(max_size=12).map(lambda t: "day=" + t),
    st.text(max_size=6).map(lambda t: "hour=" + t),
).filter(lambda n: "/" not in n and "\x00" not in n and n not in (".", "..") and len(n.encode()) < 200)  # fmt: skip


@FUZZ
@given(tree=st.lists(st.tuples(NAMES, NAMES), min_size=1, max_size=4))
def test_asi_partition_names(tmp_path_factory: pytest.TempPathFactory, tree: list[tuple[str, str]]) -> None:
    """The release's day=D/hour=HH folders: a listing whose every key is a real partition,
    or one line naming a folder."""
    root = tmp_path_factory.mktemp("release")
    for day_name, hour_name in tree:
        folder = root / asi_trace.POD_TABLE / day_name / hour_name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "part-000.parquet").write_bytes(b"")
    try:
        found = asi_trace.list_partitions(root, asi_trace.POD_TABLE)
    except InputError as exc:
        assert "\n" not in exc.message.replace(exc.file, "")
        return
    for (day, hour), files in found.items():
        assert 0 <= day <= asi_trace.MAX_DAY and 0 <= hour <= 23
        (folder,) = {f.parent for f in files}  # one folder per partition
        assert int(folder.name[5:]) == hour and int(folder.parent.name[4:]) == day


# -- the real systems' readers: exports with a few bytes changed ------------------------------

# Valid exports of each real-system format (the repository's own fixtures, written from
# the tools' documented output), each with the native tables its ingest may need first.
_DATA = Path(__file__).parent / "data"
_PROM_BASE = [_DATA / "prometheus" / "nodes.csv", _DATA / "prometheus" / "allocations.csv"]
EXPORTS = [
    ("prometheus", _DATA / "prometheus" / "DCGM_FI_PROF_SM_ACTIVE.json", _PROM_BASE),
    ("prometheus", _DATA / "prometheus" / "mig.prom", _PROM_BASE),
    ("prometheus", _DATA / "prometheus" / "shared.om", _PROM_BASE),
    ("kubernetes", _DATA / "kubernetes" / "snap1.json", []),
    ("slurm", _DATA / "slurm" / "sacct.psv", []),
    ("slurm", _DATA / "slurm" / "nodes.txt", []),
    ("slurm", _DATA / "slurm_json" / "sacct.json", []),
    ("slurm", _DATA / "slurm_json" / "squeue.json", []),
    ("slurm", _DATA / "slurm_json24" / "sacct.json", []),
]
# what an edit puts in: bytes that end or open a structure, separators, numbers past their
# limits, JSON's missing constants, bytes that are not UTF-8
TOKENS = [
    b"", b"\x00", b"\xff", b"\xc3", b"-", b"9" * 30, b"1e999", b"NaN", b"Infinity", b'"',
    b"{", b"}", b"[", b"]", b",", b"\n", b"|", b"=", b":", b"null", b"true", b"-1", b"0",
    b"\\", b" ",
]  # fmt: skip
EDITS = st.lists(
    st.tuples(
        st.sampled_from(["delete", "insert", "replace", "repeat"]),
        st.floats(0, 1),  # where, as a fraction of the file
        st.integers(1, 200),  # how many bytes it spans
        st.sampled_from(TOKENS),
    ),
    min_size=1,
    max_size=4,
)


def _edited(data: bytes, edits: list[tuple[str, float, int, bytes]]) -> bytes:
    out = bytearray(data)
    for kind, where, span, token in edits:
        i = min(len(out), int(where * len(out)))
        j = min(len(out), i + span)
        if kind == "delete":
            del out[i:j]
        elif kind == "insert":
            out[i:i] = token
        elif kind == "replace":
            out[i:j] = token
        else:
            out[i:i] = out[i:j]
    return bytes(out)


@FUZZ
@given(case=st.sampled_from(EXPORTS), edits=EDITS)
def test_real_system_exports_with_bytes_changed(
    tmp_path_factory: pytest.TempPathFactory,
    case: tuple[str, Path, list[Path]],
    edits: list[tuple[str, float, int, bytes]],
) -> None:
    """An export of Prometheus, kubectl or Slurm with a few bytes deleted, inserted,
    replaced or repeated: a result or one error naming the file, never another exception,
    and a failed call leaves the store as it was. (Mutating a real sacct --json this way
    found a NaN followed by broken JSON ending in an internal error.)"""
    fmt, export, base = case
    folder = tmp_path_factory.mktemp("edited")
    path = folder / export.name
    path.write_bytes(_edited(export.read_bytes(), edits))
    with open_store(folder / "fleet.duckdb") as store:
        if base:
            ingest(store, base)
        before = {t: store.row_count(t) for t in [*schema.TABLES, "rejects"]}
        try:
            ingest(store, [path], IngestOptions(format=fmt))
        except (InputError, UsageError):
            assert {t: store.row_count(t) for t in before} == before
        store.check_finite()
