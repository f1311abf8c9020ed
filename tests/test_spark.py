"""The Spark parity suite: ``--engine spark`` gives DuckDB's rollup and the local pool's ledger.

Skipped when pyspark (the ``spark`` extra) or Java is absent. One local Spark
session (``local[2]``) serves the whole module; starting it costs about 10 s.
"""

from __future__ import annotations

import importlib
import math
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark", reason="pyspark comes with the spark extra: pip install '.[spark]'")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("Spark needs Java 17 or 21 (no java on PATH, no JAVA_HOME)", allow_module_level=True)

from fleetaudit import api
from fleetaudit.api import compaction_api
from fleetaudit.api.compaction_api import CompactionRun
from fleetaudit.api.rollup_api import ROLLED_TELEMETRY, RollupOptions, rollup
from fleetaudit.inputs.generate import GenerateOptions
from fleetaudit.model.schema import MAX_CPUS, MAX_GPUS_PER_NODE
from fleetaudit.whatif.compaction import CompactionOptions
from tests.test_rollup import RAW_TYPES, expected, raw_parquet, read_csv, rows_sorted

pytestmark = pytest.mark.spark
MASTER = "local[2]"


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    from fleetaudit.model.spark_store import SparkEngine
    from tests.spark_cluster import QUICK_JVM

    # this process's JVM (the driver and, on local[2], the executors) starts as the
    # cluster suite's do: this module and test_spark_sql took 22 s of CPU instead of 38 s
    # (25-34 s wall instead of 39-47 s, load 4-5)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYSPARK_SUBMIT_ARGS", f"--driver-java-options '{QUICK_JVM}' pyspark-shell")
        engine = SparkEngine(MASTER)
    # tiny inputs: compiling whole-stage code costs more than it saves
    engine.spark.conf.set("spark.sql.codegen.wholeStage", "false")
    yield engine
    engine.close()
    engine.spark.stop()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("spark") / "fleet"
    options = GenerateOptions(nodes=64, days=3, telemetry_days=1.0, telemetry_step_s=300)
    api.generate_fleet(out, options)
    return out


def _spark_rollup(paths: list[Path], out: Path, interval_s: int = 3600) -> object:
    return rollup(paths, out, RollupOptions(interval_s, engine="spark", master=MASTER))


def _same_rows(a: pa.Table, b: pa.Table) -> None:
    """Row for row after sorting: keys, counts and times exact; means to 1e-12 relative."""
    assert a.schema == b.schema == ROLLED_TELEMETRY
    assert a.num_rows == b.num_rows
    for x, y in zip(rows_sorted(a), rows_sorted(b), strict=True):
        for column, value in x.items():
            if isinstance(value, float):
                assert math.isclose(value, y[column], rel_tol=1e-12), (column, x, y)
            else:
                assert value == y[column], (column, x, y)


@pytest.mark.parametrize(("interval", "seconds"), [("1h", 3600), ("2h", 7200)])
def test_spark_rollup_by_hand(spark: object, tmp_path: Path, interval: str, seconds: int) -> None:
    result = _spark_rollup([raw_parquet(tmp_path / "raw")], tmp_path / "out", seconds)
    got = pq.read_table(tmp_path / "out" / "telemetry.parquet")
    assert got.to_pylist() == expected(interval).to_pylist()
    assert (result.engine, result.rows, result.skipped) == ("spark", 11, 3)


def test_spark_rollup_reads_hive_partitioned_folders(spark: object, tmp_path: Path) -> None:
    raw = read_csv(Path(__file__).parent / "data" / "rollup" / "raw_telemetry.csv", RAW_TYPES)
    for node in ("n1", "n2"):
        folder = tmp_path / "lake" / f"node_id={node}"
        folder.mkdir(parents=True)
        part = raw.filter(pa.compute.equal(raw["node_id"], node)).drop(["node_id"])
        pq.write_table(part, folder / "part-0.parquet")
    _spark_rollup([tmp_path / "lake"], tmp_path / "out")
    got = pq.read_table(tmp_path / "out" / "telemetry.parquet")
    assert rows_sorted(got) == rows_sorted(expected("1h"))


def test_rollup_parity_on_a_generated_fleet(spark: object, fleet: Path, tmp_path: Path) -> None:
    """Both engines give the same Parquet, row for row after sorting."""
    interval_s = 3600
    local = rollup([fleet], tmp_path / "duckdb", RollupOptions(interval_s))
    remote = _spark_rollup([fleet], tmp_path / "spark", interval_s)
    assert local.rows == remote.rows > 100_000
    assert local.written["telemetry"][1] == remote.written["telemetry"][1]
    _same_rows(
        pq.read_table(tmp_path / "duckdb" / "telemetry.parquet"),
        pq.read_table(tmp_path / "spark" / "telemetry.parquet"),
    )


def test_compaction_on_spark_gives_the_local_ledger(
    spark: object, fleet: Path, tmp_path: Path
) -> None:
    db = tmp_path / "fleet.duckdb"
    api.ingest_paths(api.StoreOptions(db=db), [fleet])
    options = CompactionOptions(partition_nodes=8, exact=True, exact_nodes=8)
    runs = {
        engine: compaction_api.whatif_compaction(
            api.StoreOptions(db=db),
            CompactionRun(jobs=1, options=options, engine=engine,
                          master=MASTER if engine == "spark" else None),
        ).result
        for engine in ("local", "spark")
    }  # fmt: skip
    local, remote = runs["local"], runs["spark"]
    assert len(local.partitions) > 4 and local.moves
    assert local.moves == remote.moves
    assert local.before == remote.before and local.after == remote.after
    assert local.bound_free_nodes == remote.bound_free_nodes
    assert local.migration == remote.migration
    seconds = {"seconds", "exact_seconds"}
    for a, b in zip(local.partitions, remote.partitions, strict=True):
        assert {k: v for k, v in a.__dict__.items() if k not in seconds} == {
            k: v for k, v in b.__dict__.items() if k not in seconds
        }
    assert any(p.exact_status is not None for p in remote.partitions)
    assert local.allocations.equals(remote.allocations)


def test_prometheus_rollup_on_spark_gives_duckdbs_file(spark: object, tmp_path: Path) -> None:
    """The dumps are parsed by the ingest's reader on this machine, and the engine rolls
    the parsed rows up: the same file from both engines."""
    from tests.test_rollup_sources import _prom_files

    files = _prom_files()
    rollup(files, tmp_path / "duckdb", RollupOptions(3600, format="prometheus"))
    rollup(files, tmp_path / "spark", RollupOptions(3600, engine="spark", master=MASTER, format="prometheus"))
    assert (tmp_path / "duckdb" / "telemetry.parquet").read_bytes() == (
        tmp_path / "spark" / "telemetry.parquet"
    ).read_bytes()


def test_rollup_parity_is_byte_for_byte(spark: object, fleet: Path, tmp_path: Path) -> None:
    """The means are taken in fixed point, the row groups are cut at fixed rows: the
    engines write the same bytes."""
    rollup([fleet], tmp_path / "duckdb", RollupOptions(7200))
    _spark_rollup([fleet], tmp_path / "spark", 7200)
    assert (tmp_path / "duckdb" / "telemetry.parquet").read_bytes() == (
        tmp_path / "spark" / "telemetry.parquet"
    ).read_bytes()


def test_arg_min_and_max_give_duckdbs_values_on_spark(spark: object) -> None:
    """NULL values and NULL orderings: the first and last value that is not NULL on both
    engines (Spark's MIN_BY alone would give the NULL of the first hour); the _null
    variants keep a NULL value on both."""
    import duckdb

    from fleetaudit.model.spark_sql import translate

    text = (
        "SELECT k, arg_min(x, t) AS a, arg_max(x, t) AS b, min_by(x, t) AS c, "
        "arg_min_null(x, t) AS d, arg_max_null(x, t) AS e FROM v GROUP BY k ORDER BY k"
    )
    values = "VALUES (1, NULL, 1), (1, 5, 2), (1, 7, 3), (1, NULL, 4), (1, 9, NULL), (2, NULL, 1)"
    on_duckdb = duckdb.sql(f"WITH v(k, x, t) AS ({values}) {text}").fetchall()
    assert on_duckdb == [(1, 5, 7, 5, None, None), (2, None, None, None, None, None)]
    session = spark.spark  # type: ignore[attr-defined]
    session.sql(f"SELECT * FROM {values} AS v(k, x, t)").createOrReplaceTempView("v")
    assert [tuple(r) for r in session.sql(translate(text)).collect()] == on_duckdb


def test_isfinite_and_to_hours_give_duckdbs_values_on_spark(spark: object) -> None:
    """By hand: a number is finite, NaN and the infinities are not, NULL stays NULL (the
    ASI queries' fault test reads NULL as no fault); to_hours(3) is three hours."""
    from fleetaudit.model.spark_sql import translate

    text = (
        "SELECT k, isfinite(x) AS f, TIMESTAMP '2026-01-01 00:00:00' + to_hours(CAST(k AS BIGINT)) "
        "AS t FROM v ORDER BY k"
    )
    values = (
        "VALUES (1, CAST(1.5 AS DOUBLE)), (2, CAST('NaN' AS DOUBLE)), "
        "(3, CAST('Infinity' AS DOUBLE)), (4, CAST('-Infinity' AS DOUBLE)), (5, CAST(NULL AS DOUBLE))"
    )
    session = spark.spark  # type: ignore[attr-defined]
    session.sql(f"SELECT * FROM {values} AS v(k, x)").createOrReplaceTempView("v")
    got = [(r[0], r[1], r[2].hour) for r in session.sql(translate(text)).collect()]
    assert got == [(1, True, 1), (2, False, 2), (3, False, 3), (4, False, 4), (5, None, 5)]


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (  # py4j's wrapper, then the task's failure under "Caused by"
            "An error occurred while calling o54.getResult.\n"
            ": org.apache.spark.SparkException: Exception thrown in awaitResult: \n"
            "\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:53)\n"
            "Caused by: org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered "
            "error while reading file file:///lake/p.parquet.  SQLSTATE: KD001",
            "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file file:///lake/p.parquet.",
        ),
        (  # a job aborted after the task's retries
            "Job aborted due to stage failure: Task 0 in stage 3.0 failed 4 times, most recent "
            "failure: Lost task 0.3 in stage 3.0 (TID 12) (127.0.0.1 executor 1): "
            "org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while "
            "reading file file:///a.parquet.  SQLSTATE: KD001",
            "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file file:///a.parquet.",
        ),
        (  # an executor's Python without a module: that line, whatever wraps it
            "Job aborted due to stage failure: Python worker failed\nTraceback (most recent call last):\n"
            "  File \"<frozen importlib._bootstrap>\", line 1140\n"
            "ModuleNotFoundError: No module named 'fleetaudit'",
            "ModuleNotFoundError: No module named 'fleetaudit'",
        ),
    ],
)
def test_a_spark_failure_is_its_useful_line(text: str, line: str) -> None:
    from fleetaudit.model.spark_store import _reason

    assert _reason(Exception(text)) == line


def test_an_address_nothing_answers_on_is_one_line() -> None:
    from fleetaudit.core.errors import FleetAuditError
    from fleetaudit.model.spark_store import check_reachable
    from tests.spark_cluster import free_port

    port = free_port()
    with pytest.raises(FleetAuditError) as caught:
        check_reachable(f"spark://127.0.0.1:{port},127.0.0.1:{port}")
    assert str(caught.value) == (
        f"spark://127.0.0.1:{port},127.0.0.1:{port}: cannot reach the Spark master "
        f"(127.0.0.1:{port}: Connection refused; 127.0.0.1:{port}: Connection refused); "
        "is it running, and are its host and port right?"
    )
    check_reachable("local[2]")  # not an address: Spark itself checks it


RUN_KEYS = ["pod_id", "server_id", "gpu_request", "cpu_request_cores", "priority_class",
            "job_type_public", "standby"]  # fmt: skip


def test_asi_runs_on_spark_are_duckdbs(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ASI release's run rule (asi_runs, then asi_run_strings: the SQL the ingest runs
    on DuckDB) run by Spark over the rows the ingest gave DuckDB, block by block, gives
    DuckDB's runs: every key, hour, flag and string equal, the GPU-hours to the last bits
    (a sum in another order). The release is generated (two days: day 110's blocks carry
    day 109's runs), with one pod-hour partition copied (its rows are repeats, so that
    block's runs are found twice: with the repeats, `repeated`, and without) and one pod's
    hour removed (its hours either side are two runs of one key group)."""
    from fleetaudit.inputs.asi_trace import POD_TABLE, partition_dir
    from fleetaudit.inputs.generate_asi import AsiReleaseOptions, generate_release
    from fleetaudit.inputs.ingest import IngestOptions

    # the module itself: the package's name for it is a lazy stand-in until first loaded
    asi2026 = importlib.import_module("fleetaudit.inputs.ingest.asi2026")

    root = tmp_path / "release"
    generate_release(root, AsiReleaseOptions(servers=12, days=2, cpu_pods=4))
    hour = partition_dir(root, POD_TABLE, 110, 5)
    shutil.copy(hour / "part-000.parquet", hour / "part-000 (1).parquet")
    hour = partition_dir(root, POD_TABLE, 109, 7)
    rows = pq.read_table(hour / "part-000.parquet")
    pq.write_table(rows.slice(1), hour / "part-000.parquet")  # one pod absent that hour

    seen: list[tuple[pa.Table, pa.Table]] = []  # (_asi_rows, _asi_runs) of each block's runs
    real = asi2026._find_runs

    def find_runs(store: object, where: Path) -> None:
        real(store, where)  # type: ignore[arg-type]
        seen.append(tuple(  # type: ignore[arg-type]
            store.sql(f"SELECT * FROM {t}").to_arrow() for t in ("_asi_rows", "_asi_runs")  # type: ignore[attr-defined]
        ))

    monkeypatch.setattr(asi2026, "_find_runs", find_runs)
    api.ingest_paths(
        api.StoreOptions(tmp_path / "f.duckdb"), [root], IngestOptions(format="alibaba-gpu-v2026")
    )
    assert len(seen) == 3  # day 109; day 110 with the repeats, then without
    order = [(k, "ascending") for k in [*RUN_KEYS, "t_start"]]
    engine = spark
    session = engine.spark  # type: ignore[attr-defined]
    split = repeated = 0
    for rows, duck in seen:
        session.createDataFrame(rows).createOrReplaceTempView("_asi_rows")
        keyed = pa.Table.from_batches(list(engine.batches("asi_runs")))  # type: ignore[attr-defined]
        session.createDataFrame(keyed).createOrReplaceTempView("_asi_keyed_runs")
        got = pa.Table.from_batches(list(engine.batches("asi_run_strings")))  # type: ignore[attr-defined]
        assert got.column_names == duck.column_names
        got, want = got.cast(duck.schema).sort_by(order), duck.sort_by(order)
        assert got.drop(["gpu_hours"]).equals(want.drop(["gpu_hours"]))
        for a, b in zip(got["gpu_hours"].to_pylist(), want["gpu_hours"].to_pylist(), strict=True):
            assert math.isclose(a, b, rel_tol=1e-12)
        keys = want.group_by(RUN_KEYS, use_threads=False).aggregate([("t_start", "count")])
        split += sum(1 for n in keys["t_start_count"].to_pylist() if n > 1)
        repeated += sum(want["repeated"].to_pylist())
    assert split > 0 and repeated > 0  # both the ranked and the repeated paths were taken


def _with_values(rows: pa.Table, values: dict[str, dict[int, float]]) -> pa.Table:
    """``rows`` with the given row's value of each named column replaced."""
    for name, at in values.items():
        column = rows[name].to_pylist()
        for i, value in at.items():
            column[i] = value
        index = rows.schema.get_field_index(name)
        rows = rows.set_column(index, name, pa.array(column, rows.schema.field(index).type))
    return rows


def _asi_release(root: Path) -> Path:
    """A generated two-day release with what the reduction must take care of: a copied
    pod-hour partition (its rows are repeats: rejects), a pod-hour without a pod id and
    one without a server id (rejects naming file and row), pod-hours with a NaN or an
    infinity and server-hours out of bounds (rejects quoting the value), a pod's hour
    removed (one key group, two runs) and a copied server-hour file (repeats: nodes
    rejects)."""
    from fleetaudit.inputs.asi_trace import POD_TABLE, SERVER_TABLE, partition_dir
    from fleetaudit.inputs.generate_asi import AsiReleaseOptions, generate_release

    generate_release(root, AsiReleaseOptions(servers=12, days=2, cpu_pods=3))
    hour = partition_dir(root, POD_TABLE, 110, 5)
    shutil.copy(hour / "part-000.parquet", hour / "part-000 (1).parquet")
    hour = partition_dir(root, POD_TABLE, 109, 7)
    rows = pq.read_table(hour / "part-000.parquet").slice(1)  # one pod absent that hour
    ids = rows["pod_id"].to_pylist()
    servers = rows["server_id"].to_pylist()
    ids[3], servers[5] = None, None
    rows = rows.set_column(rows.schema.get_field_index("pod_id"), "pod_id", pa.array(ids, pa.string()))
    rows = rows.set_column(
        rows.schema.get_field_index("server_id"), "server_id", pa.array(servers, pa.string())
    )
    # values that are no finite number: each engine's own text for them differs
    rows = _with_values(rows, {"gpu_request": {6: math.nan}, "cpu_request_cores": {7: math.inf},
                               "used_gpu_hours": {8: -math.inf}})  # fmt: skip
    pq.write_table(rows, hour / "part-000.parquet")
    hour = partition_dir(root, SERVER_TABLE, 109, 20)
    shutil.copy(hour / "part-000.parquet", hour / "part-000 (1).parquet")
    # server-hours out of bounds, spelled in Java's exponent form by Spark (1.0E7, 1.0E20)
    hour = partition_dir(root, SERVER_TABLE, 110, 3)
    rows = pq.read_table(hour / "part-000.parquet")
    rows = _with_values(rows, {"gpu_count": {1: 1e7, 2: 2.5}, "cpu_capacity_cores": {3: 1e20}})
    pq.write_table(rows, hour / "part-000.parquet")
    for h in (10, 23):  # a pod-hour on a server the server table never lists: ingest rejects its run
        hour = partition_dir(root, POD_TABLE, 109, h)
        rows = pq.read_table(hour / "part-000.parquet")
        servers = rows["server_id"].to_pylist()
        servers[0] = "ghost"
        rows = rows.set_column(
            rows.schema.get_field_index("server_id"), "server_id", pa.array(servers, pa.string())
        )
        pq.write_table(rows, hour / "part-000.parquet")
    return root


def test_asi_rollup_on_spark_ingests_as_duckdbs(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``rollup --format alibaba-gpu-v2026 --engine spark``: the executors reduce the
    release with the queries DuckDB runs; the rolled folder ingests into DuckDB's store,
    table for table (a run's gpu_hours to 1e-12: sums in another order), rejects and
    side tables included. DuckDB reads a day in three blocks of 8 hours here (runs
    carried from block to block), Spark the two days as one."""
    from fleetaudit.inputs.ingest.asi2026 import ROLLED_MANIFEST
    from tests.test_rollup_sources import _tables, same_tables

    asi2026 = importlib.import_module("fleetaudit.inputs.ingest.asi2026")
    release = _asi_release(tmp_path / "release")
    day = release / "asi_opensource_pod_hourly" / "day=109"
    rows = pq.ParquetDataset(day).read().num_rows
    monkeypatch.setattr(asi2026, "BLOCK_ROWS", rows // 3 + 1)  # 8 hours a block
    fmt = "alibaba-gpu-v2026"
    rolled = {
        engine: rollup(
            [release], tmp_path / engine,
            RollupOptions(format=fmt, engine=engine, master=MASTER if engine == "spark" else None),
        )
        for engine in ("duckdb", "spark")
    }  # fmt: skip
    assert (rolled["spark"].rows, rolled["spark"].skipped) == (
        rolled["duckdb"].rows, rolled["duckdb"].skipped
    )
    assert rolled["spark"].skipped > 2  # the two without ids, and the copied hour's rows
    assert set(rolled["spark"].written) == {p.name for p in (tmp_path / "spark").iterdir()}
    assert (tmp_path / "spark" / ROLLED_MANIFEST).is_file()
    loaded = {
        engine: api.ingest_paths(api.StoreOptions(tmp_path / f"{engine}.duckdb"), [tmp_path / engine])
        for engine in ("duckdb", "spark")
    }
    assert loaded["spark"].tables == loaded["duckdb"].tables
    assert loaded["spark"].notes == loaded["duckdb"].notes
    want = _tables(tmp_path / "duckdb.duckdb")
    same_tables(want, _tables(tmp_path / "spark.duckdb"))
    rejects = {(r[1], r[2], r[3]) for r in want["rejects"]}  # file, table, row
    hour = day / "hour=07" / "part-000.parquet"
    assert {(str(hour), "allocations", 4), (str(hour), "allocations", 6)} <= rejects
    # a value is quoted as DuckDB (and Python) spell it, whichever engine rolled it up
    quoted = {r[6] for r in want["rejects"]}
    assert {"nan is not a finite number", "inf is not a finite number",
            "-inf is not a finite number"} <= quoted  # fmt: skip
    assert {f"10000000.0 is not a whole number of GPUs within 0..{MAX_GPUS_PER_NODE}",
            f"2.5 is not a whole number of GPUs within 0..{MAX_GPUS_PER_NODE}",
            f"1e+20 is not a number of cores within 0..{MAX_CPUS}"} <= quoted  # fmt: skip
    # the ghost's runs, rejected by ingest, named by the day folder whose block closed
    # them (and their first hour): 10 ends within day 109, 23 at its last block's end, so
    # that DuckDB carries it into day 110, whose first block closes it
    ghosts = {(r[1], r[3]) for r in want["rejects"] if r[4] == "node_id"}
    assert ghosts == {(str(day), 109 * 24 + 10), (str(day.with_name("day=110")), 109 * 24 + 23)}


def test_an_asi_release_the_executors_cannot_read_is_one_line(spark: object, tmp_path: Path) -> None:
    """A pod-hour file whose pages are corrupt (its footer, which this machine reads, is
    whole): the executors fail, one line naming the session and the step, exit 2, and no
    --out folder; an unreachable master likewise."""
    from typer.testing import CliRunner

    from fleetaudit.cli import app
    from fleetaudit.inputs.asi_trace import POD_TABLE, partition_dir
    from fleetaudit.inputs.generate_asi import AsiReleaseOptions, generate_release
    from tests.spark_cluster import free_port

    root = tmp_path / "release"
    generate_release(root, AsiReleaseOptions(servers=4, days=1, cpu_pods=2))
    part = partition_dir(root, POD_TABLE, 109, 3) / "part-000.parquet"
    data = bytearray(part.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little") + 8
    for at in range(4, len(data) - footer - 16, 64):
        data[at : at + 16] = b"\xff" * 16
    part.write_bytes(bytes(data))
    out = tmp_path / "out"
    argv = ["rollup", str(root), "--format", "alibaba-gpu-v2026", "--out", str(out), "--engine", "spark"]
    result = CliRunner().invoke(app, [*argv, "--master", MASTER])
    assert result.exit_code == 2, result.output
    line = result.stderr
    assert line.count("\n") == 1 and "Traceback" not in line, line
    assert line.startswith(f"fleetaudit: error: {MASTER}: query asi_load_day"), line
    assert "part-000.parquet" in line
    assert not out.exists()
    port = free_port()
    result = CliRunner().invoke(app, [*argv, "--master", f"spark://127.0.0.1:{port}"])
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"fleetaudit: error: spark://127.0.0.1:{port}: cannot reach the Spark master"
    )
    assert not out.exists()
