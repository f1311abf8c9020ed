"""``fleetaudit rollup`` on DuckDB: hand-worked rollups, and the report's figures from rolled rows."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fleetaudit import api
from fleetaudit.api.report_api import ReportOptions, build_report
from fleetaudit.api.rollup_api import ROLLED_TELEMETRY, RollupOptions, rollup
from fleetaudit.cli import app
from fleetaudit.inputs.generate import GenerateOptions
from fleetaudit.model import engines

DATA = Path(__file__).parent / "data" / "rollup"
RAW_TYPES = {
    "ts": pa.timestamp("us"),
    "node_id": pa.string(),
    "gpu_index": pa.int64(),
    "sm_active": pa.float64(),
    "mem_used": pa.float64(),
    "alloc_id": pa.string(),
}
runner = CliRunner()


def read_csv(path: Path, types: dict[str, pa.DataType]) -> pa.Table:
    """A fixture CSV with its column types (an empty field is null)."""
    options = pacsv.ConvertOptions(column_types=types, strings_can_be_null=True)
    return pacsv.read_csv(path, convert_options=options)


def raw_parquet(folder: Path) -> Path:
    """The hand-made raw telemetry as one Parquet file."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "raw.parquet"
    pq.write_table(read_csv(DATA / "raw_telemetry.csv", RAW_TYPES), path)
    return path


def expected(interval: str) -> pa.Table:
    types = {f.name: f.type for f in ROLLED_TELEMETRY}
    return read_csv(DATA / f"expected_{interval}.csv", types).select(ROLLED_TELEMETRY.names)


def rows_sorted(table: pa.Table) -> list[dict]:
    keys = [("ts", "ascending"), ("node_id", "ascending"), ("gpu_index", "ascending")]
    return table.sort_by(keys).to_pylist()


@pytest.mark.parametrize(("interval", "seconds"), [("1h", 3600), ("2h", 7200)])
def test_rollup_by_hand(tmp_path: Path, interval: str, seconds: int) -> None:
    result = rollup([raw_parquet(tmp_path / "raw")], tmp_path / "out", RollupOptions(seconds))
    got = pq.read_table(tmp_path / "out" / "telemetry.parquet")
    assert got.schema == ROLLED_TELEMETRY
    assert got.to_pylist() == expected(interval).to_pylist()  # values are exact in binary
    assert (result.rows, result.skipped, result.files) == (11, 3, 1)
    assert result.written["telemetry"][1] == expected(interval).num_rows


@pytest.mark.parametrize("absent", [["mem_used"], ["alloc_id"], ["mem_used", "alloc_id"]])
def test_rollup_without_the_optional_columns(tmp_path: Path, absent: list[str]) -> None:
    """mem_used and alloc_id are optional telemetry columns: a raw export without them
    rolls up (they read empty), as it ingests, instead of failing on a column not found."""
    raw = tmp_path / "raw"
    raw.mkdir()
    table = read_csv(DATA / "raw_telemetry.csv", RAW_TYPES).drop(absent)
    pq.write_table(table, raw / "raw.parquet")
    rollup([raw], tmp_path / "out", RollupOptions(3600))
    got = pq.read_table(tmp_path / "out" / "telemetry.parquet")
    assert got.schema == ROLLED_TELEMETRY
    want = expected("1h")
    if "alloc_id" in absent:  # the rows of one GPU and hour merge whatever their allocation
        assert got.column("alloc_id").null_count == got.num_rows
        assert sum(got.column("samples").to_pylist()) == sum(want.column("samples").to_pylist())
    else:
        assert got.num_rows == want.num_rows
        assert got.column("sm_active").to_pylist() == want.column("sm_active").to_pylist()
    if "mem_used" in absent:
        assert got.column("mem_used").null_count == got.num_rows


def test_rollup_reads_hive_partitioned_folders(tmp_path: Path) -> None:
    """node_id as a hive partition key and two files per partition: the same rows."""
    raw = read_csv(DATA / "raw_telemetry.csv", RAW_TYPES)
    for i, node in enumerate(("n1", "n2")):
        part = raw.filter(pa.compute.equal(raw["node_id"], node)).drop(["node_id"])
        folder = tmp_path / "lake" / f"node_id={node}"
        folder.mkdir(parents=True)
        half = part.num_rows // 2
        pq.write_table(part.slice(0, half), folder / f"a{i}.parquet")
        pq.write_table(part.slice(half), folder / f"b{i}.parquet")
    (tmp_path / "lake" / "_SUCCESS").write_text("")
    result = rollup([tmp_path / "lake"], tmp_path / "out", RollupOptions(3600))
    assert result.files == 4
    got = pq.read_table(tmp_path / "out" / "telemetry.parquet")
    assert rows_sorted(got) == rows_sorted(expected("1h"))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    samples=st.lists(
        st.tuples(
            st.integers(0, 2),  # node
            st.integers(0, 1),  # gpu
            st.integers(0, 3 * 3600 - 1),  # second
            st.integers(0, 1000),  # sm_active in thousandths
            st.sampled_from([None, "a", "b"]),
        ),
        min_size=1,
        max_size=60,
        unique_by=lambda s: (s[0], s[1], s[2]),
    ),
    interval=st.sampled_from([60, 900, 3600, 7200]),
)
def test_rollup_keeps_every_sample_and_its_sm_active(
    tmp_path_factory: pytest.TempPathFactory, samples: list[tuple], interval: int
) -> None:
    """Rolled rows hold every raw sample once: counts, SM-active sums, keys, intervals."""
    folder = tmp_path_factory.mktemp("prop")
    t0 = datetime(2026, 3, 1)
    raw = pa.table(
        {
            "ts": [t0 + timedelta(seconds=s[2]) for s in samples],
            "node_id": [f"n{s[0]}" for s in samples],
            "gpu_index": [s[1] for s in samples],
            "sm_active": [s[3] / 1000 for s in samples],
            "mem_used": [None] * len(samples),
            "alloc_id": [s[4] for s in samples],
        },
        schema=pa.schema(RAW_TYPES.items()),
    )
    pq.write_table(raw, folder / "raw.parquet")
    rollup([folder / "raw.parquet"], folder / "out", RollupOptions(interval))
    got = pl.read_parquet(folder / "out" / "telemetry.parquet")
    assert got["samples"].sum() == len(samples)
    assert math.isclose(
        (got["sm_active"] * got["samples"]).sum(), sum(s[3] for s in samples) / 1000, abs_tol=1e-9
    )
    assert got.select("node_id", "gpu_index", "ts").is_unique().all()  # the telemetry key
    # one row per (node, GPU, allocation, interval); t0 is on a 2h boundary of the epoch
    expect = {(f"n{s[0]}", s[1], s[4], s[2] // interval) for s in samples}
    first = (got["ts"] - t0).dt.total_seconds()
    bucket = (first // interval).cast(pl.Int64)
    keys = zip(got["node_id"], got["gpu_index"], got["alloc_id"], bucket, strict=True)
    assert sorted(keys, key=str) == sorted(expect, key=str)


def _generated(tmp_path: Path) -> Path:
    out = tmp_path / "fleet"
    options = GenerateOptions(nodes=24, days=2, telemetry_days=1.0, telemetry_step_s=300)
    api.generate_fleet(out, options)
    return out


def _report(db: Path, at: datetime, since: timedelta) -> dict:
    result = build_report(
        api.StoreOptions(db=db), ReportOptions(at=at, since=since, step=timedelta(hours=1))
    )
    return {"fleet": result.fleet, "models": result.models, "telemetry": result.telemetry}


def _close(a: object, b: object) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


@pytest.fixture(scope="module")
def raw_and_rolled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, datetime]:
    """A generated fleet ingested raw, and with its telemetry rolled up per hour."""
    tmp = tmp_path_factory.mktemp("rolled")
    fleet = _generated(tmp)
    rollup([fleet / "telemetry.parquet"], tmp / "rolled", RollupOptions(3600))
    raw_db, rolled_db = tmp / "raw.duckdb", tmp / "rolled.duckdb"
    api.ingest_paths(api.StoreOptions(db=raw_db), [fleet])
    tables = [fleet / f"{t}.parquet" for t in ("nodes", "allocations", "requests")]
    api.ingest_paths(api.StoreOptions(db=rolled_db), [*tables, tmp / "rolled"])
    end = pl.read_parquet(fleet / "telemetry.parquet")["ts"].max().replace(tzinfo=None)
    return raw_db, rolled_db, end.replace(minute=0, second=0, microsecond=0)


def test_report_from_rolled_telemetry_equals_raw(raw_and_rolled) -> None:
    """Hour-aligned window: the productive figures are those of the raw samples."""
    raw_db, rolled_db, at = raw_and_rolled
    raw = _report(raw_db, at, timedelta(hours=12))
    rolled = _report(rolled_db, at, timedelta(hours=12))
    assert raw["telemetry"]["samples"] > 1000 and raw["telemetry"]["interval_s"] == 300.0
    assert raw["fleet"]["productive"]["telemetry_gpu_hours"] > 0
    assert _close(raw["fleet"]["productive"], rolled["fleet"]["productive"])
    for model in raw["models"]:
        assert _close(raw["models"][model]["productive"], rolled["models"][model]["productive"])
    assert raw["telemetry"]["samples"] == rolled["telemetry"]["samples"]
    assert raw["telemetry"]["interval_s"] == rolled["telemetry"]["interval_s"]


def test_report_from_rolled_telemetry_off_the_hour_is_within_one_interval(raw_and_rolled) -> None:
    """A window that cuts intervals counts each cut interval whole or not at all."""
    raw_db, rolled_db, at = raw_and_rolled
    at = at - timedelta(minutes=25)
    raw = _report(raw_db, at, timedelta(hours=12))["fleet"]["productive"]
    rolled = _report(rolled_db, at, timedelta(hours=12))["fleet"]["productive"]
    gpus = pl.read_parquet(raw_db.parent / "rolled" / "telemetry.parquet").select(
        "node_id", "gpu_index"
    ).n_unique()
    # at most one hour per GPU at each end of the window
    assert abs(raw["telemetry_gpu_hours"] - rolled["telemetry_gpu_hours"]) <= 2 * gpus
    assert raw["telemetry_gpu_hours"] != rolled["telemetry_gpu_hours"]


def test_cli_rollup_then_ingest(tmp_path: Path) -> None:
    raw = raw_parquet(tmp_path / "raw")
    result = runner.invoke(app, ["rollup", str(raw), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "rolled up 11 raw rows of 1 file(s) per 1h on duckdb" in result.stdout
    assert "3 raw row(s) left out" in result.stderr
    nodes = tmp_path / "out" / "nodes.csv"
    nodes.write_text("node_id,gpu_model,gpus,cpus\nn1,H20,8,64\n")
    db = tmp_path / "fleet.duckdb"
    result = runner.invoke(app, ["ingest", str(tmp_path / "out"), "--db", str(db)])
    assert result.exit_code == 0, result.output
    tables = api.summarize(api.StoreOptions(db=db)).tables
    # n1's four rolled rows (expected_1h.csv) load; none of n2's rows reached the rollup
    assert tables.filter(pl.col("table") == "telemetry")["rows"].item() == 4
    assert tables.filter(pl.col("table") == "rejects")["rows"].item() == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--interval", "0s"], "--interval: must be a whole number of seconds, 1s or more"),
        (["--interval", "1.5s"], "--interval: must be a whole number of seconds, 1s or more"),
        (["--engine", "polars"], "--engine: 'polars' is not one of duckdb, spark"),
        (["--master", "local[2]"], "--master: only with --engine spark"),
        (["--format", "csv"], "--format: 'csv' is not one of native, prometheus, alibaba-gpu-v2026"),
    ],
)
def test_cli_rollup_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    raw = raw_parquet(tmp_path / "raw")
    out = tmp_path / "out"
    result = runner.invoke(app, ["rollup", str(raw), "--out", str(out), *args])
    assert result.exit_code == 2
    assert result.stderr == f"fleetaudit: error: {message}\n"
    assert not out.exists()


def test_cli_rollup_bad_files_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "no_sm.parquet"
    pq.write_table(read_csv(DATA / "raw_telemetry.csv", RAW_TYPES).drop(["sm_active"]), missing)
    not_parquet = tmp_path / "junk.parquet"
    not_parquet.write_text("ts,node_id\n")
    text_ts = tmp_path / "text_ts.parquet"
    pq.write_table(pacsv.read_csv(DATA / "raw_telemetry.csv"), text_ts)
    cases = [
        (missing, f"{missing} column sm_active: missing required column"),
        (not_parquet, f"{not_parquet}: not a readable Parquet file"),
        (tmp_path / "absent", f"{tmp_path / 'absent'}: no such file or folder"),
    ]
    for path, message in cases:
        result = runner.invoke(app, ["rollup", str(path), "--out", str(tmp_path / "out")])
        assert result.exit_code == 2, result.output
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_engine_spark_without_the_extra_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A missing pyspark (or Java-less machine's missing extra) is one line naming the extra."""
    monkeypatch.setitem(__import__("sys").modules, "fleetaudit.model.spark_store", None)
    raw = raw_parquet(tmp_path / "raw")
    result = runner.invoke(
        app, ["rollup", str(raw), "--out", str(tmp_path / "out"), "--engine", "spark"]
    )
    assert result.exit_code == 2
    assert result.stderr.strip() == f"fleetaudit: error: {engines.SPARK_EXTRA}"
    result = runner.invoke(app, ["whatif", "compaction", "--engine", "spark", "--db", str(tmp_path / "x.duckdb")])
    assert result.exit_code == 2
    assert "pip install 'fleetaudit[spark]'" in result.stderr


def test_cli_rollup_help_names_the_engines() -> None:
    result = runner.invoke(app, ["rollup", "--help"])
    assert result.exit_code == 0
    assert "--engine" in result.stdout and "--master" in result.stdout
    assert "fleetaudit[spark]" in result.stdout
    result = runner.invoke(app, ["whatif", "compaction", "--help"])
    assert "--engine" in result.stdout and "local" in result.stdout


def test_a_failed_rollup_leaves_nothing(tmp_path: Path) -> None:
    """A file whose sm_active is text: exit 2 naming it, no folder, no file."""
    (tmp_path / "raw").mkdir()
    good = read_csv(DATA / "raw_telemetry.csv", RAW_TYPES)
    pq.write_table(good, tmp_path / "raw" / "a.parquet")
    text = good.set_column(3, "sm_active", pa.array(["busy"] * good.num_rows))
    pq.write_table(text, tmp_path / "raw" / "b.parquet")
    out = tmp_path / "out"
    result = runner.invoke(app, ["rollup", str(tmp_path / "raw"), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert f"{tmp_path / 'raw' / 'b.parquet'} column sm_active: must be a number" in result.stderr
    assert not out.exists()


@pytest.mark.parametrize("interval", [math.inf, math.nan, 0.5, 90.5, 0.0])
def test_an_interval_that_is_not_whole_seconds_is_a_usage_error(interval: float) -> None:
    """Through the Python API too: an infinite interval once raised OverflowError."""
    from fleetaudit.core.errors import UsageError

    with pytest.raises(UsageError, match=r"^--interval: must be a whole number of seconds, 1s or more$"):
        RollupOptions(interval_s=interval).check()
