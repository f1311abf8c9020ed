"""``rollup --format prometheus`` and ``--format alibaba-gpu-v2026`` on DuckDB.

Prometheus: the query_range dumps of tests/data/prometheus, read by the ingest's
own reader, rolled up per hour (worked by hand from the rows that
tests/test_ingest_prometheus.py works out per minute); and a generated fleet's
dump rolled up as its native telemetry is. ASI: ``ingest`` of the rolled folder
equals ``ingest --format alibaba-gpu-v2026`` of the release, table for table.
"""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from fleetaudit import api
from fleetaudit.api.rollup_api import SOURCES, RollupOptions, rollup
from fleetaudit.cli import app
from fleetaudit.core.errors import InputError, UsageError
from fleetaudit.core.options import ROLLUP_SOURCES
from fleetaudit.inputs.generate import GenerateOptions
from fleetaudit.inputs.generate_asi import AsiReleaseOptions, generate_release
from fleetaudit.inputs.ingest import IngestOptions
from fleetaudit.inputs.ingest.asi2026 import parse_days
from fleetaudit.model.store import open_store
from tests.asi_fixture import write_fixture
from tests.conftest import DATA

ASI = "alibaba-gpu-v2026"
PROM = DATA / "prometheus"
STORE_TABLES = (
    "nodes", "allocations", "telemetry", "requests", "rejects",
    "asi_pod_hourly", "asi_server_hourly", "asi_trace",
)  # fmt: skip


def test_the_formats_are_the_command_lines() -> None:
    assert tuple(SOURCES) == ROLLUP_SOURCES


# ---------------------------------------------------------------- prometheus

# (node, gpu) -> (samples, sm_active, mem_used, sample_interval_s), 2026-01-01 00:00-00:02,
# from the per-minute rows of tests/test_ingest_prometheus.py's EXPECTED. Without a store
# no pod resolves by name, and no series has a pod_uid: alloc_id stays empty. The
# exporter-named host is kept (ingest rejects it, as an unknown node, when it loads).
PROM_HOURLY = {
    ("dcgm-exporter-7f9c2", 0): (1, 0.1, None, None),
    ("node-a", 0): (3, (0.5 + 0.9 + 0.75) / 3, 0.5, 60.0),
    ("node-a", 1): (1, 0.25, None, None),  # held by no pod after 00:00: not loaded
    ("node-b", 0): (3, (0.4 + 0.6 + 0.8) / 3, None, 60.0),
    ("node-b", 1): (2, (0.3 + 0.5) / 2, None, 60.0),
    ("node-m", 0): (1, 0.5, None, None),  # MIG: 0.7 x 3/7 + 0.35 x 4/7
}


def _prom_files() -> list[Path]:
    return sorted(p for p in PROM.iterdir() if p.suffix in (".json", ".prom", ".om"))


def test_prometheus_dumps_roll_up_by_hand(tmp_path: Path) -> None:
    result = rollup(_prom_files(), tmp_path / "out", RollupOptions(3600, format="prometheus"))
    assert (result.files, result.rows, result.skipped) == (5, 11, 0)  # rows: (GPU, minute)
    rows = pq.read_table(tmp_path / "out" / "telemetry.parquet").to_pylist()
    got = {(r["node_id"], r["gpu_index"]): r for r in rows}
    assert set(got) == set(PROM_HOURLY)
    for key, (samples, sm, mem, cadence) in PROM_HOURLY.items():
        row = got[key]
        assert row["ts"] == datetime(2026, 1, 1) and row["alloc_id"] is None
        assert (row["samples"], row["sample_interval_s"]) == (samples, cadence)
        assert math.isclose(row["sm_active"], sm, rel_tol=1e-12)  # fixed point: 6e-14
        assert row["mem_used"] == mem
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["telemetry.parquet"]


def test_a_generated_dump_rolls_up_as_its_native_telemetry(tmp_path: Path) -> None:
    """generate --format prometheus writes the native fleet's telemetry as query_range
    dumps (pod_uid = alloc_id); both roll up to the same rows."""
    opts = GenerateOptions(nodes=6, days=1, telemetry_days=0.2, telemetry_step_s=300, seed=3)
    api.generate_fleet(tmp_path / "native", opts)
    dumped = api.generate_fleet(
        tmp_path / "prom", GenerateOptions(**{**opts.__dict__, "format": "prometheus"})
    )
    native = rollup([tmp_path / "native"], tmp_path / "a", RollupOptions(3600))
    prom = rollup([dumped.files["telemetry"]], tmp_path / "b", RollupOptions(3600, format="prometheus"))
    assert native.rows == prom.rows > 1000
    a = pq.read_table(tmp_path / "a" / "telemetry.parquet").to_pylist()
    b = pq.read_table(tmp_path / "b" / "telemetry.parquet").to_pylist()
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        for column in ("ts", "node_id", "gpu_index", "alloc_id", "samples", "sample_interval_s"):
            assert x[column] == y[column], column
        assert abs(x["sm_active"] - y["sm_active"]) < 1e-9  # the dump's decimal text


def test_a_prometheus_file_that_is_not_one_fails_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "DCGM_FI_PROF_SM_ACTIVE.json"
    bad.write_text('{"status": "error", "error": "timeout"}')
    with pytest.raises(InputError, match=r"DCGM_FI_PROF_SM_ACTIVE\.json: a Prometheus error"):
        rollup([bad], tmp_path / "out", RollupOptions(format="prometheus"))
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- the ASI release


def _tables(db: Path) -> dict[str, list[tuple]]:
    with open_store(db, read_only=True) as store:
        return {t: store.sql(f"SELECT * FROM {t} ORDER BY ALL").rows() for t in STORE_TABLES}


def _same_ingest(release: Path, tmp_path: Path, days: str | None = None) -> api.IngestResult:
    """Roll the release up, ingest the folder; ingest the release; the same store."""
    rolled = rollup([release], tmp_path / "rolled", RollupOptions(format=ASI, days=days))
    assert (tmp_path / "rolled" / "alibaba-gpu-v2026.rolled.json").is_file()
    assert set(rolled.written) == {p.name for p in (tmp_path / "rolled").iterdir()}
    direct = api.ingest_paths(
        api.StoreOptions(tmp_path / "direct.duckdb"), [release],
        IngestOptions(format=ASI, days=parse_days(days)),
    )  # fmt: skip
    loaded = api.ingest_paths(api.StoreOptions(tmp_path / "rolled.duckdb"), [tmp_path / "rolled"])
    assert loaded.tables == direct.tables and loaded.notes == direct.notes
    assert rolled.rows > 0
    same_tables(_tables(tmp_path / "direct.duckdb"), _tables(tmp_path / "rolled.duckdb"))
    return loaded


def same_tables(want: dict[str, list[tuple]], got: dict[str, list[tuple]]) -> None:
    """Every store table row for row (sorted), floats to 1e-12 relative: the staging adds
    a run's used_gpu_hours in the engine's order (DuckDB's threads, Spark's tasks), and
    two ingests of one release differ there in the last bits (1e-15)."""
    for table in STORE_TABLES:
        assert len(got[table]) == len(want[table]), table
        for a, b in zip(got[table], want[table], strict=True):
            for x, y in zip(a, b, strict=True):
                same = math.isclose(x, y, rel_tol=1e-12) if isinstance(x, float) else x == y
                assert same, (table, a, b)


def test_the_rolled_fixture_ingests_as_the_release(tmp_path: Path) -> None:
    result = _same_ingest(write_fixture(tmp_path / "data"), tmp_path)
    # node_events: the fixture's server that misses listed hours is down meanwhile
    assert {t.table: t.read for t in result.tables} == {
        "nodes": 4, "allocations": 12, "telemetry": 69, "node_events": 1
    }  # fmt: skip


def test_the_rollup_note_counts_every_pod_hour_kept_as_a_reject(tmp_path: Path) -> None:
    """The note's count is the rejected pod-hours whatever their reason: a copied hour's
    rows given twice and a pod-hour without its pod id."""
    import shutil

    import pyarrow as pa

    from fleetaudit.inputs.asi_trace import POD_TABLE, partition_dir

    release = generate_release(tmp_path / "release", AsiReleaseOptions(servers=12, days=1, cpu_pods=3))
    hour = partition_dir(release.root, POD_TABLE, AsiReleaseOptions.first_day, 5)
    shutil.copy(hour / "part-000.parquet", hour / "part-000 (1).parquet")
    copied = pq.read_metadata(hour / "part-000.parquet").num_rows
    other = partition_dir(release.root, POD_TABLE, AsiReleaseOptions.first_day, 9) / "part-000.parquet"
    rows = pq.read_table(other)
    ids = pa.array([None, *rows["pod_id"].to_pylist()[1:]], rows.schema.field("pod_id").type)
    pq.write_table(rows.set_column(rows.schema.get_field_index("pod_id"), "pod_id", ids), other)
    result = CliRunner().invoke(
        app, ["rollup", str(release.root), "--format", ASI, "--out", str(tmp_path / "rolled")]
    )
    assert result.exit_code == 0, result.output
    api.ingest_paths(api.StoreOptions(tmp_path / "s.duckdb"), [tmp_path / "rolled"])
    with open_store(tmp_path / "s.duckdb", read_only=True) as store:
        rejected = store.scalar("SELECT count(*) FROM rejects WHERE \"table\" = 'allocations'")
        repeats = store.scalar(
            "SELECT count(*) FROM rejects WHERE reason LIKE 'a second row for pod %'"
        )
        no_pod = store.scalar("SELECT count(*) FROM rejects WHERE reason LIKE '%without pod_id%'")
    assert (repeats, no_pod) == (copied, 1) and rejected >= repeats + no_pod
    assert f"note: {rejected:,} pod-hour(s) kept as rejects (without a pod or server id" in (
        " ".join(result.stderr.split())
    )


def test_a_rolled_generated_release_ingests_as_the_release(tmp_path: Path) -> None:
    """Two days of a generated release (runs carried across the day boundary, pod-hours
    without ids among the rejects), and a --days window of it."""
    release = generate_release(tmp_path / "release", AsiReleaseOptions(servers=12, days=2, cpu_pods=3))
    result = _same_ingest(release.root, tmp_path)
    assert {t.table for t in result.tables} == {"nodes", "allocations", "telemetry"}
    window = tmp_path / "window"
    window.mkdir()
    _same_ingest(release.root, window, days=f"{AsiReleaseOptions.first_day + 1}")


def test_days_elsewhere_are_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--days: only with --format alibaba-gpu-v2026"):
        rollup([tmp_path], tmp_path / "out", RollupOptions(days="1"))


def test_not_a_release_leaves_no_folder(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(
        app, ["rollup", str(tmp_path / "empty"), "--format", ASI, "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 2
    assert result.stderr.startswith(f"fleetaudit: error: {tmp_path / 'empty'}: not the release layout")
    assert not (tmp_path / "out").exists()


def test_a_rolled_folder_missing_a_file_fails_naming_it(tmp_path: Path) -> None:
    rollup([write_fixture(tmp_path / "data")], tmp_path / "rolled", RollupOptions(format=ASI))
    (tmp_path / "rolled" / "nodes.parquet").unlink()
    with pytest.raises(InputError, match=r"nodes\.parquet: missing: alibaba-gpu-v2026\.rolled\.json names it"):
        api.ingest_paths(api.StoreOptions(tmp_path / "x.duckdb"), [tmp_path / "rolled"])


def test_days_belong_to_the_rollup_not_to_the_ingest_of_it(tmp_path: Path) -> None:
    rollup([write_fixture(tmp_path / "data")], tmp_path / "rolled", RollupOptions(format=ASI))
    with pytest.raises(InputError, match="give --days to rollup, not to ingest"):
        api.ingest_paths(
            api.StoreOptions(tmp_path / "x.duckdb"), [tmp_path / "rolled"],
            IngestOptions(format=ASI, days=(0, 0)),
        )  # fmt: skip


def test_spark_rejects_quote_numbers_as_duckdb_spells_them() -> None:
    """Java's spellings of a double (what Spark's cast to text gives) become DuckDB's, in
    the value and where the reason quotes it; ids, nulls and reasons that do not quote
    the value are left as they are."""
    from fleetaudit.inputs.ingest.asi2026 import _spelled_as_duckdb

    rows = [
        ("gpu_request", "NaN", "NaN is not a finite number"),
        ("cpu_request_cores", "Infinity", "Infinity is not a finite number"),
        ("used_gpu_hours", "-Infinity", "-Infinity is not a finite number"),
        ("schedule_delay_sec", "1.0E20", "1.0E20 is not a whole number of seconds"),
        ("gpu_count", "2.5", "2.5 is not a whole number of GPUs within 0..1024"),
        ("gpu_count", None, " is not a whole number of GPUs within 0..1024"),
        ("cpu_capacity_cores", "1.0E7", None),
        ("server_id", "1.0E7", "a second row for server 1.0E7 at trace hour 3; counted once"),
        ("pod_id", None, "missing required value (a pod-hour without pod_id)"),
        ("gpu_request", "n/a", "n/a is not a finite number"),
    ]
    frame = pl.DataFrame(rows, schema=["column", "value", "reason"], orient="row")
    assert _spelled_as_duckdb(frame).rows() == [
        ("gpu_request", "nan", "nan is not a finite number"),
        ("cpu_request_cores", "inf", "inf is not a finite number"),
        ("used_gpu_hours", "-inf", "-inf is not a finite number"),
        ("schedule_delay_sec", "1e+20", "1e+20 is not a whole number of seconds"),
        ("gpu_count", "2.5", "2.5 is not a whole number of GPUs within 0..1024"),
        ("gpu_count", None, " is not a whole number of GPUs within 0..1024"),
        ("cpu_capacity_cores", "10000000.0", None),
        ("server_id", "1.0E7", "a second row for server 1.0E7 at trace hour 3; counted once"),
        ("pod_id", None, "missing required value (a pod-hour without pod_id)"),
        ("gpu_request", "n/a", "n/a is not a finite number"),
    ]
    ids = frame.filter(pl.col("column") == "server_id")
    assert _spelled_as_duckdb(ids).equals(ids)

