"""Ingest: validation, rejects, idempotent upsert, transactions, formats, the 2023 trace."""

from __future__ import annotations

import gzip
import json
from datetime import datetime
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetaudit.core.errors import InputError, UsageError
from fleetaudit.core.options import INGEST_FORMAT_SPECS
from fleetaudit.inputs.ingest import ADAPTERS, FORMATS, IngestOptions, ingest
from fleetaudit.model.store import Store, open_store
from tests.conftest import DATA, write

NODES = """
node_id,gpu_model,gpus,cpus,memory_gib,switch_id,health
n1,H20,8,64,1024,sw-a,healthy
n2,H20,8,64,1024,sw-a,
n3,A10,4,32,256,,cordoned
"""

ALLOC_HEADER = (
    "alloc_id,job_id,node_id,gpus,cpus,memory_gib,priority,workload,tenant,"
    "start_time,end_time,checkpoint_interval_s,sleepable\n"
)


def counts(store: Store) -> dict[str, int]:
    return {
        t: store.row_count(t) for t in ("nodes", "allocations", "requests", "telemetry", "rejects")
    }


def rejects(store: Store) -> list[tuple[object, ...]]:
    frame = store.sql('SELECT "row", "column", value, reason FROM rejects ORDER BY file, "row"')
    return [tuple(r) for r in frame.iter_rows()]


def test_tiny_fleet_loads(store: Store, tiny_dir: Path) -> None:
    result = ingest(store, [tiny_dir])
    assert [(t.table, t.read, t.new, t.rejected) for t in result.tables] == [
        ("nodes", 7, 7, 0),
        ("allocations", 9, 9, 0),
        ("requests", 5, 5, 0),
    ]
    row = store.sql("SELECT * FROM allocations WHERE alloc_id = 'a3'").row(0, named=True)
    assert row["gpus"] == 0.25
    assert row["start_time"] == datetime(2026, 1, 1, 11, 0)
    assert row["end_time"] == datetime(2026, 1, 1, 18, 0)
    assert row["sleepable"] is False
    # an empty health means healthy; an empty switch_id stays empty (a domain by itself)
    n6 = store.sql("SELECT health, switch_id FROM nodes WHERE node_id = 'n6'").row(0)
    assert n6 == ("healthy", None)


def test_defaults_are_resolved(store: Store, tmp_path: Path) -> None:
    write(tmp_path / "nodes.csv", NODES)
    write(
        tmp_path / "allocations.csv",
        ALLOC_HEADER + "a1,,n1,2,16,,HIGH,,,2026-01-01T00:00:00Z,,,\n",
    )
    write(
        tmp_path / "requests.csv",
        "request_id,submit_time,gpus,gpus_per_pod,cpus_per_gpu,locality\n"
        "r1,2026-01-01T00:00:00Z,16,,,\n"
        "r2,2026-01-01T00:00:00Z,4,,,\n"
        "r3,2026-01-01T00:00:00Z,0.5,,,\n"
        "r4,2026-01-01T00:00:00Z,16,8,,any\n",
    )
    result = ingest(store, [tmp_path])
    assert result.rejected == 0
    a1 = store.sql("SELECT job_id, priority, sleepable FROM allocations").row(0)
    assert a1 == ("a1", "high", False)  # job_id defaults to alloc_id; enums are case-insensitive
    got = store.sql(
        "SELECT request_id, gpus_per_pod, cpus_per_gpu, memory_gib_per_gpu, locality "
        "FROM requests ORDER BY request_id"
    ).rows()
    assert got == [
        ("r1", 8.0, 0.0, 0.0, "switch"),  # gpus_per_pod min(gpus, 8); 2 pods -> switch
        ("r2", 4.0, 0.0, 0.0, "node"),
        ("r3", 0.5, 0.0, 0.0, "node"),  # a share is its own pod
        ("r4", 8.0, 0.0, 0.0, "any"),
    ]


# Every reject reason, each worked by hand: (row, column, value, reason).
REJECT_CASES = {
    "missing": (
        "a1,,n1,,16,,high,,,2026-01-01T00:00:00Z,,,\n",
        (1, "gpus", None, "missing required value"),
    ),
    "unparsable": (
        "a1,,n1,two,16,,high,,,2026-01-01T00:00:00Z,,,\n",
        (1, "gpus", "two", "two is not a number"),
    ),
    "bad time": (
        "a1,,n1,1,16,,high,,,yesterday,,,\n",
        (1, "start_time", "yesterday", "yesterday is not a time (ISO 8601 or epoch seconds)"),
    ),
    "bad bool": (
        "a1,,n1,1,16,,high,,,2026-01-01T00:00:00Z,,,maybe\n",
        (1, "sleepable", "maybe", "maybe is not a boolean (true/false)"),
    ),
    "negative": (
        "a1,,n1,1,-4,,high,,,2026-01-01T00:00:00Z,,,\n",
        (1, "cpus", "-4", "-4 is negative"),
    ),
    "not finite": (
        "a1,,n1,1,inf,,high,,,2026-01-01T00:00:00Z,,,\n",
        (1, "cpus", "inf", "inf is not a finite number"),
    ),
    "enum": (
        "a1,,n1,1,4,,urgent,,,2026-01-01T00:00:00Z,,,\n",
        (1, "priority", "urgent", "unknown value urgent (expected high, low)"),
    ),
    "unknown node": (
        "a1,,n9,1,4,,high,,,2026-01-01T00:00:00Z,,,\n",
        (1, "node_id", "n9", "unknown node n9"),
    ),
    "above node": (
        "a1,,n3,6,4,,high,,,2026-01-01T00:00:00Z,,,\n",
        (1, "gpus", "6", "6 is above its node's 4 GPUs"),
    ),
    "end before start": (
        "a1,,n1,1,4,,high,,,2026-01-01T10:00:00Z,2026-01-01T09:00:00Z,,\n",
        (1, "end_time", "2026-01-01T09:00:00Z", "end_time is before start_time"),
    ),
}


@pytest.mark.parametrize("case", list(REJECT_CASES), ids=list(REJECT_CASES))
def test_each_reject_reason(store: Store, tmp_path: Path, case: str) -> None:
    line, expected = REJECT_CASES[case]
    write(tmp_path / "nodes.csv", NODES)
    good = "a0,,n2,1,4,,low,,,2026-01-01T00:00:00Z,,,\n"
    write(tmp_path / "allocations.csv", ALLOC_HEADER + good + line)
    result = ingest(store, [tmp_path])
    allocations = result.tables[1]
    assert (allocations.read, allocations.new, allocations.rejected) == (2, 1, 1)
    row, column, value, reason = expected
    assert rejects(store) == [(row + 1, column, value, reason)]
    assert store.sql("SELECT alloc_id FROM allocations").rows() == [("a0",)]


def test_request_and_node_and_telemetry_rejects(store: Store, tmp_path: Path) -> None:
    write(
        tmp_path / "nodes.csv",
        NODES + "n4,H20,7.5,64,,,healthy\nn5,H20,8,64,,,broken\n",
    )
    write(
        tmp_path / "requests.csv",
        "request_id,submit_time,start_time,gpus,gpus_per_pod,locality\n"
        "r1,2026-01-01T00:00:00Z,,12,,\n"
        "r2,2026-01-01T00:00:00Z,,16,8,node\n"
        "r3,2026-01-01T02:00:00Z,2026-01-01T01:00:00Z,8,8,\n"
        "r4,2026-01-01T00:00:00Z,,0.5,1,\n",
    )
    write(
        tmp_path / "telemetry.csv",
        "ts,node_id,gpu_index,sm_active\n"
        "2026-01-01T00:00:00Z,n1,8,0.5\n"
        "2026-01-01T00:00:00Z,n1,0,150\n"
        "2026-01-01T00:00:00Z,n1,1,0.25\n",
    )
    result = ingest(store, [tmp_path])
    assert {t.table: t.rejected for t in result.tables} == {
        "nodes": 2,
        "requests": 4,
        "telemetry": 2,
    }
    got = store.sql(
        'SELECT "table", "row", "column", reason FROM rejects ORDER BY "table", "row"'
    ).rows()
    assert got == [
        ("nodes", 4, "gpus", "7.5 is not an integer"),
        ("nodes", 5, "health", "unknown value broken (expected healthy, degraded, cordoned, down)"),
        (
            "requests",
            1,
            "gpus",
            "12 is not a multiple of gpus_per_pod 8.0 (the default min(gpus, 8)); give gpus_per_pod",
        ),
        ("requests", 2, "locality", "node locality with 2.0 pods; use switch or any"),
        ("requests", 3, "start_time", "start_time is before submit_time"),
        ("requests", 4, "gpus", "0.5 is not a multiple of gpus_per_pod 1.0"),
        ("telemetry", 1, "gpu_index", "8 is not below its node's 8 GPUs"),
        ("telemetry", 2, "sm_active", "150 is above 1"),
    ]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("99999999999999999999999", "99999999999999999999999 is above the maximum 1024"),
        ("1e16", "1e16 is above the maximum 1024"),
        ("7.5", "7.5 is not an integer"),
        ("eight", "eight is not an integer"),
    ],
)
def test_an_integer_too_large_to_parse_says_so(
    store: Store, tmp_path: Path, value: str, reason: str
) -> None:
    """A whole number beyond what an integer column holds is above the column's bound,
    not "not an integer" (which reads as a typo of a fraction or a word)."""
    write(tmp_path / "nodes.csv", f"node_id,gpu_model,gpus,cpus\nn1,H20,{value},64\n")
    ingest(store, [tmp_path])
    assert store.sql('SELECT "column", reason FROM rejects').rows() == [("gpus", reason)]


def test_strict_writes_nothing(store: Store, tmp_path: Path) -> None:
    write(tmp_path / "nodes.csv", NODES)
    write(
        tmp_path / "allocations.csv", ALLOC_HEADER + "a1,,n1,x,4,,high,,,2026-01-01T00:00:00Z,,,\n"
    )
    with pytest.raises(InputError) as err:
        ingest(store, [tmp_path], IngestOptions(strict=True))
    assert str(err.value) == (
        f"{tmp_path / 'allocations.csv'} row 1, column gpus: x is not a number "
        "(1 row(s) rejected; --strict writes nothing)"
    )
    assert counts(store) == {
        "nodes": 0,
        "allocations": 0,
        "requests": 0,
        "telemetry": 0,
        "rejects": 0,
    }


def test_missing_required_column_fails_whole_call(store: Store, tmp_path: Path) -> None:
    write(tmp_path / "nodes.csv", NODES)
    write(
        tmp_path / "allocations.csv",
        "alloc_id,node_id,gpus,cpus,start_time\na1,n1,1,1,2026-01-01\n",
    )
    with pytest.raises(InputError) as err:
        ingest(store, [tmp_path])
    assert (
        str(err.value) == f"{tmp_path / 'allocations.csv'} column priority: required column missing"
    )
    assert store.row_count("nodes") == 0  # the nodes file of the same call did not land


def test_unreadable_files(store: Store, tmp_path: Path) -> None:
    bad = tmp_path / "nodes.parquet"
    bad.write_bytes(b"not a parquet file at all")
    with pytest.raises(InputError) as err:
        ingest(store, [bad])
    assert str(err.value).startswith(f"{bad}: cannot read: ")
    assert "\n" not in str(err.value)

    other = write(tmp_path / "nodes.txt", "x")
    with pytest.raises(InputError, match=r"nodes.txt: unknown format; use .csv"):
        ingest(store, [other])
    with pytest.raises(InputError, match=r"no such file or folder"):
        ingest(store, [tmp_path / "missing.csv"])
    unknown = write(tmp_path / "sub" / "gpus.csv", "a\n1\n")
    with pytest.raises(InputError, match=r"no table named 'gpus'; name the file after a table"):
        ingest(store, [unknown])
    empty = write(tmp_path / "e" / "nodes.csv", "")
    with pytest.raises(InputError, match=r"nodes.csv: cannot read: no header line"):
        ingest(store, [empty])
    assert counts(store)["nodes"] == 0


def test_lines_with_a_wrong_field_count_are_rejects(store: Store, tmp_path: Path) -> None:
    """Rows after a broken line keep their true row numbers."""
    write(
        tmp_path / "nodes.csv",
        "node_id,gpu_model,gpus,cpus\nn1,H20,8,64\nn2,H20,8\nn3,H20,8,64,extra\nn4,H20,-8,64\nn5,H20,8,64\n",
    )
    result = ingest(store, [tmp_path])
    assert (result.tables[0].read, result.tables[0].new, result.tables[0].rejected) == (5, 2, 3)
    assert [r[:2] for r in rejects(store)] == [(2, "cpus"), (3, None), (4, "gpus")]
    assert rejects(store)[1][3] == "the line has 5 field(s); the header has 4"
    assert rejects(store)[2][3] == "-8 is negative"


def test_a_line_short_by_several_fields_is_one_reject(store: Store) -> None:
    """12 data rows: 4 lines with a wrong field count (short by 3, 4, 1; long by 2) and one
    negative gpus. Each bad line is one reject, read counts 12, row 12 stays row 12."""
    result = ingest(store, [DATA / "short_lines" / "nodes.csv"])
    table = result.tables[0]
    assert (table.read, table.new, table.rejected) == (12, 7, 5)
    assert [(r[0], r[1], r[3]) for r in rejects(store)] == [
        (2, "memory_gib", "the line has 4 field(s); the header has 7"),
        (4, "cpus", "the line has 3 field(s); the header has 7"),
        (5, None, "the line has 9 field(s); the header has 7"),
        (8, "health", "the line has 6 field(s); the header has 7"),
        (12, "gpus", "-8 is negative"),
    ]


def test_reingest_is_idempotent_and_replaces(store: Store, tiny_dir: Path, tmp_path: Path) -> None:
    ingest(store, [tiny_dir])
    before = counts(store)
    second = ingest(store, [tiny_dir])
    assert counts(store) == before
    assert [(t.new, t.replaced) for t in second.tables] == [(0, 7), (0, 9), (0, 5)]
    # a later export fills in a1's end_time: the row is replaced, not duplicated
    text = (
        (tiny_dir / "allocations.csv")
        .read_text()
        .replace("2026-01-01T08:00:00Z,,3600", "2026-01-01T08:00:00Z,2026-01-01T20:00:00Z,3600")
    )
    write(tmp_path / "allocations.csv", text)
    third = ingest(store, [tmp_path / "allocations.csv"])
    assert (third.tables[0].new, third.tables[0].replaced) == (0, 9)
    assert store.row_count("allocations") == 9
    end = store.scalar("SELECT end_time FROM allocations WHERE alloc_id = 'a1'")
    assert end == datetime(2026, 1, 1, 20, 0)


def test_last_row_of_a_call_wins(store: Store, tmp_path: Path) -> None:
    write(tmp_path / "a" / "nodes.csv", NODES)
    write(
        tmp_path / "b" / "nodes.csv", "node_id,gpu_model,gpus,cpus\nn1,H800,8,96\nn1,H800,8,128\n"
    )
    result = ingest(store, [tmp_path / "a" / "nodes.csv", tmp_path / "b" / "nodes.csv"])
    assert (result.tables[0].read, result.tables[0].new, result.tables[0].superseded) == (5, 3, 2)
    assert store.sql("SELECT gpu_model, cpus FROM nodes WHERE node_id = 'n1'").rows() == [
        ("H800", 128.0)
    ]


TELEMETRY_HEADER = "node_id,gpu_index,ts,sm_active\n"


@pytest.mark.parametrize("check", ["group-by", "hashed", "hash-collision"])
@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        # (read, new, superseded) of the telemetry table; its key is node_id, gpu_index, ts
        (["n1,0,2026-01-01T00:00:00Z,0.5", "n1,1,2026-01-01T00:00:00Z,0.5"], (2, 2, 0)),
        (
            [
                "n1,0,2026-01-01T00:00:00Z,0.1",
                "n1,0,2026-01-01T00:05:00Z,0.2",
                "n2,0,2026-01-01T00:00:00Z,0.3",
                "n1,0,2026-01-01T00:00:00Z,0.4",  # n1/0 at 00:00 again: supersedes the first
            ],
            (4, 3, 1),
        ),
    ],
    ids=["distinct", "one-key-twice"],
)
def test_key_check_counts_superseded_rows_alike(
    store: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    check: str,
    rows: list[str],
    expected: tuple[int, int, int],
) -> None:
    """The hashed check of a call's keys (large calls) counts as the GROUP BY does, also
    when two distinct keys share a hash (simulated: the hashes' count comes out short)."""
    from fleetaudit.inputs import ingest as ingest_module

    if check != "group-by":
        monkeypatch.setattr(ingest_module, "HASHED_KEYS_ROWS", (1, 1000))
    real = Store.distinct_count
    short = 1 if check == "hash-collision" else 0
    hashed: list[int] = []  # the hashes' counts, one per call that took the hashed check

    def counted(self: Store, text: str, params: dict[str, int] | None = None) -> int:
        hashed.append(real(self, text, params))
        return hashed[-1] - short

    monkeypatch.setattr(Store, "distinct_count", counted)
    write(tmp_path / "nodes.csv", NODES)
    write(tmp_path / "telemetry.csv", TELEMETRY_HEADER + "\n".join(rows) + "\n")
    result = ingest(store, [tmp_path / "nodes.csv", tmp_path / "telemetry.csv"])
    telemetry = result.tables[1]
    assert (telemetry.read, telemetry.new, telemetry.superseded) == expected
    assert store.row_count("telemetry") == expected[1]
    # the hashed check ran (the telemetry's last: its distinct keys) or, below its rows, did not
    assert hashed[-1:] == ([] if check == "group-by" else [expected[1]])
    if expected[2]:  # the last row of the call wins
        util = store.scalar(
            "SELECT sm_active FROM telemetry WHERE node_id = 'n1' AND gpu_index = 0 "
            "AND ts = TIMESTAMP '2026-01-01 00:00:00'"
        )
        assert util == 0.4


def test_distinct_count_counts_hashes(store: Store) -> None:
    assert store.distinct_count("SELECT hash(i % 3) FROM range(10) AS t(i)") == 3
    assert store.distinct_count("SELECT hash(i, 'x') FROM range(10) AS t(i)") == 10
    assert store.distinct_count("SELECT hash(i) FROM range(0) AS t(i)") == 0


def test_formats_agree(store: Store, tmp_path: Path, tiny_dir: Path) -> None:
    """CSV, gzipped CSV, Parquet and JSON Lines of the same rows load the same."""
    frame = pl.read_csv(tiny_dir / "allocations.csv", infer_schema=False)
    (tmp_path / "gz").mkdir()
    with gzip.open(tmp_path / "gz" / "allocations.csv.gz", "wt") as fh:
        fh.write((tiny_dir / "allocations.csv").read_text())
    typed = frame.with_columns(
        pl.col("gpus", "cpus", "memory_gib", "checkpoint_interval_s").cast(pl.Float64),
        pl.col("start_time", "end_time").str.to_datetime(time_zone="UTC"),
        pl.col("sleepable") == "true",
    )
    typed.write_parquet(tmp_path / "allocations.parquet")
    with open(tmp_path / "allocations.jsonl", "w") as fh:
        for row in frame.iter_rows(named=True):
            fh.write(json.dumps({k: v for k, v in row.items() if v is not None}) + "\n")
    ingest(store, [tiny_dir / "nodes.csv"])
    seen = []
    for path in (
        tiny_dir / "allocations.csv",
        tmp_path / "gz" / "allocations.csv.gz",
        tmp_path / "allocations.parquet",
        tmp_path / "allocations.jsonl",
    ):
        result = ingest(store, [path])
        assert result.rejected == 0, path
        seen.append(store.sql("SELECT * EXCLUDE (_ingest_id) FROM allocations ORDER BY alloc_id"))
    for frame_ in seen[1:]:
        assert frame_.equals(seen[0])


def test_timestamps_and_extra_columns(store: Store, tmp_path: Path) -> None:
    write(tmp_path / "nodes.csv", "node_id,gpu_model,gpus,cpus,rack\nn1,H20,8,64,r7\n")
    write(
        tmp_path / "allocations.csv",
        ALLOC_HEADER
        + "a1,,n1,1,4,,high,,,1767225600,,,\n"  # epoch seconds
        + "a2,,n1,1,4,,high,,,2026-01-01T02:00:00+02:00,,,\n"  # an offset
        + "a3,,n1,1,4,,high,,,2026-01-01 00:00:00,,,\n",  # no zone: UTC
    )
    ingest(store, [tmp_path])
    starts = store.sql("SELECT start_time FROM allocations ORDER BY alloc_id")[
        "start_time"
    ].to_list()
    assert starts == [datetime(2026, 1, 1)] * 3
    assert store.sql("SELECT rack FROM nodes WHERE node_id = 'n1'").rows() == [("r7",)]


MALFORMED = st.one_of(
    st.sampled_from(
        ["", "-1", "nan", "inf", "1e400", "x", "9" * 40, "0x10", "1,5", "true", "2026-13-45", "-"]
    ),
    st.text(
        alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
        max_size=12,
    ),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    values=st.lists(
        st.tuples(MALFORMED, MALFORMED, MALFORMED, MALFORMED, MALFORMED), min_size=1, max_size=6
    )
)
def test_malformed_rows_never_raise(
    tmp_path_factory: pytest.TempPathFactory, values: list[tuple[str, ...]]
) -> None:
    """Whatever the values, ingest never raises: each row loads or lands in rejects with a reason."""
    folder = tmp_path_factory.mktemp("malformed")
    write(folder / "nodes.csv", NODES)
    frame = pl.DataFrame(
        {
            "alloc_id": [f"a{i}" for i in range(len(values))],
            "node_id": ["n1"] * len(values),
            "gpus": [v[0] for v in values],
            "cpus": [v[1] for v in values],
            "priority": [v[2] for v in values],
            "start_time": [v[3] for v in values],
            "end_time": [v[4] for v in values],
        }
    )
    frame.write_csv(folder / "allocations.csv")
    with open_store(folder / "db.duckdb") as s:
        result = ingest(s, [folder])
        loaded = s.row_count("allocations")
        got = s.sql('SELECT "row", "column", reason FROM rejects')
        assert loaded + result.tables[1].rejected == len(values)
        assert got.height == result.tables[1].rejected
        assert got["reason"].null_count() == 0 and got["column"].null_count() == 0
        assert sorted(got["row"].to_list()) == sorted(set(got["row"].to_list()))


# -- the public 2023 trace ------------------------------------------------------------------


@pytest.mark.trace
def test_alibaba_trace_default_list(store: Store, traces: Path) -> None:
    trace = traces / "alibaba-gpu-v2023"
    result = ingest(
        store,
        [trace],
        IngestOptions(
            format="alibaba-gpu-v2023", topology=traces / "alibaba-crux-topology-2023" / "topo.csv"
        ),
    )
    assert result.rejected == 0
    assert store.scalar("SELECT count(*) FROM nodes") == 1213
    assert store.scalar("SELECT sum(gpus) FROM nodes") == 6212
    assert store.scalar("SELECT count(*) FROM requests") == 8152
    # 119 PSW+ASW domains in topo.csv; every node is dealt into one
    assert store.scalar("SELECT count(DISTINCT switch_id) FROM nodes") == 119
    assert store.scalar("SELECT count(*) FROM nodes WHERE switch_id IS NULL") == 0
    # an empty scheduled_time is a pod that never started: still queued
    queued = store.scalar("SELECT count(*) FROM requests WHERE start_time IS NULL")
    assert queued == 897  # exactly the pods in phase Pending (441 BE + 454 LS + 2 Burstable)
    assert store.scalar("SELECT count(*) FROM requests WHERE pod_phase = 'Pending'") == 897
    share = store.sql(
        "SELECT gpus, gpus_per_pod, priority, cpus FROM requests WHERE request_id = 'openb-pod-0001'"
    ).row(0)
    assert share == (0.46, 0.46, "high", 6.0)  # gpu_milli 460 of one GPU; qos LS -> high


@pytest.mark.trace
def test_alibaba_trace_variants(store: Store, traces: Path) -> None:
    trace = traces / "alibaba-gpu-v2023"
    nodes = trace / "openb_node_list_gpu_node.csv"
    result = ingest(
        store,
        [nodes, trace / "openb_pod_list_multigpu50.csv"],
        IngestOptions(format="alibaba-gpu-v2023"),
    )
    assert result.rejected == 0
    # the 5-column multigpu lists have no times: submitted at --trace-start, queued
    assert store.scalar("SELECT count(*) FROM requests WHERE start_time IS NOT NULL") == 0
    assert store.scalar("SELECT count(*) FROM nodes WHERE switch_id IS NOT NULL") == 0
    ingest(
        store,
        [nodes, trace / "openb_pod_list_gpuspec33.csv"],
        IngestOptions(format="alibaba-gpu-v2023"),
    )
    # duplicated gpu_spec entries collapse: V100M16|V100M32|V100M32 -> V100M16|V100M32
    models = store.sql("SELECT DISTINCT gpu_model FROM requests WHERE gpu_model LIKE '%|%'")[
        "gpu_model"
    ].to_list()
    assert models and all(len(m.split("|")) == len(set(m.split("|"))) for m in models)


@pytest.mark.trace
def test_alibaba_topology_is_deterministic(tmp_path: Path, traces: Path) -> None:
    trace = traces / "alibaba-gpu-v2023"
    topo = traces / "alibaba-crux-topology-2023" / "topo.csv"
    seen = []
    for i in range(2):
        with open_store(tmp_path / f"{i}.duckdb") as s:
            ingest(
                s,
                [trace / "openb_node_list_gpu_node.csv"],
                IngestOptions(format="alibaba-gpu-v2023", topology=topo),
            )
            seen.append(s.sql("SELECT node_id, switch_id FROM nodes ORDER BY node_id"))
    assert seen[0].equals(seen[1])
    # a domain holds one GPU model except where two models meet in the dealing order
    mixed = (
        seen[0]
        .join(
            pl.read_csv(trace / "openb_node_list_gpu_node.csv").select(node_id="sn", model="model"),
            on="node_id",
        )
        .group_by("switch_id")
        .agg(pl.col("model").n_unique().alias("models"))
    )
    assert mixed.filter(pl.col("models") > 1).height <= 7  # at most one boundary per model change


OPENB_NODES = "sn,cpu_milli,memory_mib,gpu,model\nopenb-node-0000,64000,262144,8,V100M16\n"
OPENB_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)
# a pod field the mapping cannot read is a reject naming the trace's column, not a
# silently empty value: (pod line, column, value, reason)
OPENB_BAD_PODS = [
    ("p0,twelve,16384,1,1000,,LS,Running,0,100,0", "cpu_milli", "twelve", "twelve is not a number"),
    ("p0,12000,lots,1,1000,,LS,Running,0,100,0", "memory_mib", "lots", "lots is not a number"),
    ("p0,12000,16384,1,1000,,WHAT,Running,0,100,0", "qos", "WHAT", "unknown qos WHAT"),
    ("p0,12000,16384,1,1000,,LS,Running,noon,100,0", "creation_time", "noon", "not a trace time"),
    (
        "p0,12000,16384,1,1000,,LS,Running,0,99999999999999999,0",
        "deletion_time",
        "99999999999999999",
        "not a trace time",
    ),
]


@pytest.mark.parametrize(("line", "column", "value", "reason"), OPENB_BAD_PODS)
def test_alibaba_v2023_unreadable_pod_field_is_a_reject(
    store: Store, tmp_path: Path, line: str, column: str, value: str, reason: str
) -> None:
    nodes = write(tmp_path / "openb_node_list_gpu_node.csv", OPENB_NODES)
    good = "p1,6000,12288,1,460,,BE,Pending,10,,"
    pods = write(tmp_path / "openb_pod_list_default.csv", f"{OPENB_HEADER}{good}\n{line}\n")
    result = ingest(store, [nodes, pods], IngestOptions(format="alibaba-gpu-v2023"))
    assert result.rejected == 1
    assert store.sql("SELECT request_id FROM requests")["request_id"].to_list() == ["p1"]
    got = store.sql('SELECT "row", "column", value, reason FROM rejects').row(0)
    assert got[:3] == (2, column, value)
    assert reason in got[3]


def test_alibaba_v2023_unreadable_node_number_is_a_reject(store: Store, tmp_path: Path) -> None:
    nodes = write(
        tmp_path / "openb_node_list_gpu_node.csv",
        OPENB_NODES + "openb-node-0001,many,262144,2,P100\n",
    )
    result = ingest(store, [nodes], IngestOptions(format="alibaba-gpu-v2023"))
    assert result.rejected == 1
    got = store.sql('SELECT "row", "column", value, reason FROM rejects').row(0)
    assert got == (2, "cpu_milli", "many", "many is not a number")


def test_free_text_workload_labels_are_kept_and_mapped(store: Store) -> None:
    """An export's own labels load (no reject): the label is kept, the category derived."""
    result = ingest(store, [DATA / "workload_labels"])
    assert result.rejected == 0
    rows = store.sql(
        "SELECT alloc_id, workload, workload_label FROM allocations ORDER BY alloc_id"
    ).rows()  # polars rows
    assert rows == [
        ("a1", "online_inference", "LLM Serving"),
        ("a2", "training", "Fine-Tuning"),
        ("a3", "other", "spark-etl"),
        ("a4", None, None),
        ("a5", "cpu_only", "CPU"),
        ("a6", "online_inference", "online_inference"),
    ]


def test_an_older_store_gains_the_label_column(tmp_path: Path, tiny_dir: Path) -> None:
    """A store written before workload_label existed gets the column when opened to write."""
    db = tmp_path / "old.duckdb"
    with open_store(db) as old:
        old.run("ALTER TABLE allocations DROP COLUMN workload_label")
    with open_store(db) as reopened:
        ingest(reopened, [tiny_dir])
        assert "workload_label" in reopened.column_types("allocations")
        assert reopened.row_count("allocations") > 0

PERCENT = Path(__file__).parent / "data" / "percent"


def test_a_fraction_column_in_percent_fails_the_file_and_names_the_option(
    db_path: Path,
) -> None:
    """tests/data/percent: 11 of its 14 sm_active values lie in (1, 100]: a percent file."""
    from typer.testing import CliRunner

    from fleetaudit.cli import app

    result = CliRunner().invoke(app, ["ingest", str(PERCENT), "--db", str(db_path)])
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in result.output
    assert "telemetry.csv" in line and "sm_active" in line
    assert "11 of 14 values lie above 1 and within 100" in line and "--percent sm_active" in line
    store = open_store(db_path)
    try:  # one transaction: the nodes of the same call did not land either
        assert store.row_count("nodes") == 0 and store.row_count("telemetry") == 0
    finally:
        store.close()


def test_percent_scales_the_column(store: Store) -> None:
    result = ingest(store, [PERCENT], IngestOptions(percent=("sm_active",)))
    assert result.rejected == 0
    assert store.scalar("SELECT round(sum(sm_active), 6) FROM telemetry") == pytest.approx(2.137)
    assert store.scalar("SELECT max(sm_active) FROM telemetry") == pytest.approx(0.65)


def test_percent_names_a_fraction_column(store: Store) -> None:
    with pytest.raises(InputError, match="'gpus' is not a fraction column; use one of mem_used, sm_active"):
        ingest(store, [PERCENT], IngestOptions(percent=("gpus",)))


def test_one_value_in_percent_range_fails_the_file(store: Store, tmp_path: Path) -> None:
    """A low-duty percent export: 1 of 20 values above 1 (1.2%), the other 19 idle below
    1%. Read as fractions the busy sample was a reject and the idle ones read 100 times
    too high; now the file is refused, naming --percent."""
    write(tmp_path / "nodes.csv", (PERCENT / "nodes.csv").read_text())
    rows = ["ts,node_id,gpu_index,sm_active"] + [
        f"2026-01-01T00:{i:02d}:00Z,g1,0,{1.2 if i == 0 else 0.4}" for i in range(20)
    ]
    write(tmp_path / "telemetry.csv", "\n".join(rows) + "\n")
    with pytest.raises(InputError, match="1 of 20 values lie above 1 and within 100"):
        ingest(store, [tmp_path])
    assert store.row_count("telemetry") == 0
    result = ingest(store, [tmp_path], IngestOptions(percent=("sm_active",)))
    assert result.rejected == 0
    # (1.2 + 19 x 0.4) / 100 = 0.088, read as the fraction of one GPU's samples
    assert store.scalar("SELECT round(sum(sm_active), 6) FROM telemetry") == pytest.approx(0.088)


def test_values_above_100_stay_row_rejects(store: Store, tmp_path: Path) -> None:
    """A value above 100 is neither a fraction nor a percent: its row is rejected."""
    write(tmp_path / "nodes.csv", (PERCENT / "nodes.csv").read_text())
    rows = ["ts,node_id,gpu_index,sm_active"] + [
        f"2026-01-01T00:{i:02d}:00Z,g1,0,{150 if i < 2 else 0.5}" for i in range(20)
    ]
    write(tmp_path / "telemetry.csv", "\n".join(rows) + "\n")
    result = ingest(store, [tmp_path])
    assert {t.table: t.rejected for t in result.tables}["telemetry"] == 2


def test_percent_on_a_fraction_file_is_refused(store: Store, tmp_path: Path) -> None:
    """--percent on a column whose values all lie in 0..1 (here 0.0703: 7.03%) would
    store 0.000703 (0.07%): refused, naming the column and the option to drop."""
    write(tmp_path / "nodes.csv", (PERCENT / "nodes.csv").read_text())
    write(tmp_path / "telemetry.csv", "ts,node_id,gpu_index,sm_active,mem_used\n"
          "2026-01-01T00:00:00Z,g1,0,0.0703,\n2026-01-01T00:30:00Z,g1,1,1.0,\n")  # fmt: skip
    with pytest.raises(InputError) as err:
        ingest(store, [tmp_path], IngestOptions(percent=("sm_active", "mem_used")))
    assert str(err.value) == (
        f"{tmp_path / 'telemetry.csv'} column sm_active: --percent sm_active: all 2 values "
        "lie within 0..1, as fractions do, and would read 100 times too low; drop "
        "--percent sm_active for this file"
    )  # mem_used holds no value: nothing to tell
    assert store.row_count("telemetry") == 0


def test_parquet_instants_and_workload_labels(store: Store, tmp_path: Path) -> None:
    """Zoned Parquet instants are stored as UTC wall time (an infinite one is out of range);
    labels that are categories, synonyms in any spelling, unknown or blank map by hand."""
    write(tmp_path / "nodes.csv", "node_id,gpu_model,gpus,cpus\nn1,H20,8,64\n")
    labels = ["training", " Fine-Tune ", "online.serving", "cpu_only", "Mystery", "", None]
    hour = 3_600_000_000  # microseconds
    start = 1_767_261_600_000_000  # 2026-01-01T10:00Z
    table = pa.table(
        {
            "alloc_id": [f"a{i}" for i in range(len(labels) + 1)],
            "node_id": ["n1"] * (len(labels) + 1),
            "gpus": [1.0] * (len(labels) + 1),
            "cpus": [4.0] * (len(labels) + 1),
            "priority": ["high"] * (len(labels) + 1),
            "workload": [*labels, "training"],
            "start_time": pa.array(
                [start] * (len(labels) + 1), pa.timestamp("us", tz="Asia/Tokyo")
            ),
            "end_time": pa.array(
                [start + hour] * len(labels) + [2**63 - 1], pa.timestamp("us", tz="UTC")
            ),
        }
    )
    pq.write_table(table, tmp_path / "allocations.parquet")
    ingest(store, [tmp_path / "nodes.csv"])
    result = ingest(store, [tmp_path / "allocations.parquet"])
    rows = store.sql(
        "SELECT alloc_id, workload, start_time, end_time FROM allocations ORDER BY alloc_id"
    ).rows()
    expected = ["training", "training", "online_inference", "cpu_only", "other", None, None]
    assert rows == [
        (f"a{i}", category, datetime(2026, 1, 1, 10), datetime(2026, 1, 1, 11))
        for i, category in enumerate(expected)
    ]
    assert result.rejected == 1
    assert rejects(store)[0][1:3] == ("end_time", "infinity")


def test_every_format_has_one_adapter() -> None:
    # a format added to INGEST_FORMATS without an adapter would fail here, not at a user's call
    assert list(ADAPTERS) == list(FORMATS) == list(INGEST_FORMAT_SPECS)
    assert {f for f, a in ADAPTERS.items() if a.prepare} == {
        "alibaba-gpu-v2026", "slurm", "prometheus"
    }


NODE_EVENTS = """
node_id,gpu_index,start_time,end_time,state,reason,source
n1,,2026-05-01T00:00:00Z,2026-05-01T02:00:00Z,drain,maintenance,slurm:sacctmgr
n1,3,2026-05-01T01:00:00Z,,unhealthy,xid 79,dcgm:xid
n2,,2026-05-01T05:00:00Z,2026-05-01T04:00:00Z,down,,
n2,9,2026-05-01T05:00:00Z,,down,,
n9,,2026-05-01T05:00:00Z,,down,,
n2,,2026-05-01T05:00:00Z,,exploded,,
"""


def test_node_events_load_reject_and_replace_null_keys(store: Store, tmp_path: Path) -> None:
    write(tmp_path / "nodes.csv", NODES)
    write(tmp_path / "node_events.csv", NODE_EVENTS)
    result = ingest(store, [tmp_path])
    events = next(t for t in result.tables if t.table == "node_events")
    assert (events.read, events.new, events.rejected) == (6, 2, 4)
    assert rejects(store) == [
        (3, "end_time", "2026-05-01T04:00:00Z", "end_time is before start_time"),
        (4, "gpu_index", "9", "9 is not below its node's 8 GPUs"),
        (5, "node_id", "n9", "unknown node n9"),
        (6, "state", "exploded",
         "unknown value exploded (expected down, drain, cordoned, degraded, unhealthy)"),
    ]  # fmt: skip
    # the open GPU interval gets its end in a later export: the key leaves the end out,
    # and the whole-node interval's empty gpu_index matches itself (null-safe)
    write(
        tmp_path / "node_events.csv",
        "node_id,gpu_index,start_time,end_time,state,reason,source\n"
        "n1,,2026-05-01T00:00:00Z,2026-05-01T02:00:00Z,drain,maintenance,slurm:sacctmgr\n"
        "n1,3,2026-05-01T01:00:00Z,2026-05-01T03:00:00Z,unhealthy,xid 79,dcgm:xid\n",
    )
    again = ingest(store, [tmp_path / "node_events.csv"])
    assert [(t.new, t.replaced) for t in again.tables] == [(0, 2)]
    rows = store.sql(
        "SELECT node_id, gpu_index, end_time FROM node_events ORDER BY gpu_index NULLS FIRST"
    ).rows()
    assert rows == [
        ("n1", None, datetime(2026, 5, 1, 2)),
        ("n1", 3, datetime(2026, 5, 1, 3)),
    ]


def test_a_collector_fetches_into_a_folder_that_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fleetaudit import api
    from fleetaudit.inputs import ingest as ingest_module

    seen: list[Path] = []

    def collect(settings: object, folder: Path, progress: object) -> list[Path]:
        assert settings == {"since": "1d"}
        assert not (tmp_path / "s.duckdb").exists()  # fetched before the store is opened
        seen.append(folder)
        write(folder / "nodes.csv", NODES)
        return [folder / "nodes.csv"]

    native = ingest_module.ADAPTERS["native"]
    monkeypatch.setitem(
        ingest_module.ADAPTERS, "native", ingest_module.Adapter(native.sources, collect=collect)
    )
    result = api.ingest_paths(
        api.StoreOptions(db=tmp_path / "s.duckdb"), [], IngestOptions(collect={"since": "1d"})
    )
    assert [(t.table, t.new) for t in result.tables] == [("nodes", 3)]
    assert seen and not seen[0].exists()
    # a format without a collector says so
    with pytest.raises(UsageError, match="cannot fetch its exports itself"):
        api.ingest_paths(
            api.StoreOptions(db=tmp_path / "s.duckdb"),
            [],
            IngestOptions(format="alibaba-gpu-v2023", collect={"since": "1d"}),
        )


def test_an_ingest_whose_every_row_of_a_table_is_rejected_exits_65(tmp_path: Path) -> None:
    """Telemetry of a node the store does not hold: 3 of 3 rows rejected. The call lands
    (its rejects are listed) and exits 65 with one line; one good row of the table: 0."""
    from typer.testing import CliRunner

    from fleetaudit.cli import app

    runner = CliRunner()
    db = tmp_path / "s.duckdb"
    write(tmp_path / "a" / "nodes.csv", "node_id,gpu_model,gpus,cpus\nn1,H20,8,64\n")
    assert runner.invoke(app, ["ingest", str(tmp_path / "a"), "--db", str(db), "-q"]).exit_code == 0
    write(tmp_path / "b" / "telemetry.csv", "ts,node_id,gpu_index,sm_active\n" + "".join(
        f"2026-01-01T00:0{i}:00Z,ghost,0,0.5\n" for i in range(3)))  # fmt: skip
    result = runner.invoke(app, ["ingest", str(tmp_path / "b"), "--db", str(db), "-q"])
    assert result.exit_code == 65
    assert result.stderr == (
        "fleetaudit: error: every row read was rejected, so nothing of telemetry (3 of 3) "
        "was loaded; `fleetaudit rejects --ingest 2` says why\n"
    )
    listed = runner.invoke(app, ["rejects", "--db", str(db), "--csv"])
    assert listed.stdout.count("unknown node ghost") == 3
    write(tmp_path / "c" / "telemetry.csv", "ts,node_id,gpu_index,sm_active\n"
          "2026-01-01T00:00:00Z,ghost,0,0.5\n2026-01-01T00:00:00Z,n1,0,0.5\n")  # fmt: skip
    assert runner.invoke(app, ["ingest", str(tmp_path / "c"), "--db", str(db), "-q"]).exit_code == 0


def test_every_command_that_reads_capacity_refuses_a_store_without_nodes(tmp_path: Path) -> None:
    """One rule: shapes said 'every GPU reads free' (exit 0) where report exited 2."""
    from typer.testing import CliRunner

    from fleetaudit.cli import app

    runner = CliRunner()
    db = tmp_path / "s.duckdb"
    write(tmp_path / "r" / "requests.csv", "request_id,submit_time,gpus\nr1,2026-01-01T00:00:00Z,8\n")
    assert runner.invoke(app, ["ingest", str(tmp_path / "r"), "--db", str(db), "-q"]).exit_code == 0
    for command in (["shapes"], ["state"], ["report"], ["whatif", "placement"],
                    ["whatif", "compaction"], ["whatif", "harvesting"]):  # fmt: skip
        result = runner.invoke(app, [*command, "--db", str(db)])
        assert result.exit_code == 2, (command, result.output)
        assert result.stderr == (
            f"fleetaudit: error: {db}: the store holds no nodes; ingest a nodes table first "
            "(`fleetaudit status` lists what it holds)\n"
        ), command
    assert runner.invoke(app, ["status", "--db", str(db)]).exit_code == 0
