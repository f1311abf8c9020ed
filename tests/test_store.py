"""The store under faults: a second writer, a SIGKILL mid-ingest, scenarios."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest

from fleetaudit.core.errors import StoreBusyError, StoreError
from fleetaudit.inputs.ingest import ingest
from fleetaudit.model.store import open_store

REPO = Path(__file__).resolve().parents[1]


def _python(code: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def test_second_writer_waits_then_gives_up(db_path: Path, tiny_dir: Path) -> None:
    with open_store(db_path) as s:
        ingest(s, [tiny_dir])
    holder = _python(
        """
        import sys, time, duckdb
        con = duckdb.connect(sys.argv[1])
        print("locked", flush=True)
        time.sleep(30)
        """,
        str(db_path),
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        with pytest.raises(StoreBusyError) as err:
            open_store(db_path, lock_timeout=1.0)
        waited = time.monotonic() - started
        assert 0.9 <= waited < 10
        assert str(err.value) == (
            f"{db_path}: the store is locked by another fleetaudit process; "
            "gave up after 1 s (raise --lock-timeout or retry later)"
        )
        assert int(err.value.exit_code) == 75
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()  # type: ignore[union-attr]
    # once the holder is gone the writer gets in
    with open_store(db_path, lock_timeout=5) as s:
        assert s.row_count("nodes") == 7


def test_sigkill_during_ingest_keeps_the_committed_state(
    db_path: Path, tiny_dir: Path, tmp_path: Path
) -> None:
    with open_store(db_path) as s:
        ingest(s, [tiny_dir])
        before = {t: s.row_count(t) for t in ("nodes", "allocations", "requests")}
    big = tmp_path / "big" / "allocations.csv"
    big.parent.mkdir()
    con = duckdb.connect()
    con.execute(
        "COPY (SELECT 'x' || i AS alloc_id, 'n1' AS node_id, 1 AS gpus, 1 AS cpus, 'low' AS priority, "
        "'2026-01-01T00:00:00Z' AS start_time FROM range(3000000) t(i)) TO "
        f"'{big}' (HEADER)"
    )
    con.close()
    writer = _python(
        """
        import sys
        from pathlib import Path
        from fleetaudit.model.store import open_store
        from fleetaudit.inputs.ingest import ingest
        s = open_store(Path(sys.argv[1]))
        ingest(s, [Path(sys.argv[2])], progress=lambda msg: print(msg, flush=True))
        print("finished", flush=True)
        """,
        str(db_path),
        str(big),
    )
    assert writer.stdout is not None
    # the progress line is printed inside the transaction, just before the 3 M-row load
    assert writer.stdout.readline().startswith("allocations: reading")
    time.sleep(0.3)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    writer.stdout.close()
    assert writer.returncode == -signal.SIGKILL
    with open_store(db_path) as s:
        after = {t: s.row_count(t) for t in ("nodes", "allocations", "requests")}
        assert s.scalar("SELECT count(*) FROM ingests") == 1
    assert after == before


def test_read_only_store_must_exist(tmp_path: Path) -> None:
    with pytest.raises(
        StoreError, match=r"no fleetaudit store here; run `fleetaudit ingest` first"
    ):
        open_store(tmp_path / "none.duckdb", read_only=True)
    assert not (tmp_path / "none.duckdb").exists()


@pytest.mark.parametrize(
    ("content", "what"),
    [
        (b"this is not a database" * 100, "not a DuckDB file"),
        (b"SQLite format 3\x00" + bytes(200), "a SQLite database"),
        (b"", "an empty file"),
    ],
)
@pytest.mark.parametrize("read_only", [False, True])
def test_not_a_store(tmp_path: Path, content: bytes, what: str, read_only: bool) -> None:
    junk = tmp_path / "junk.duckdb"
    junk.write_bytes(content)
    with pytest.raises(StoreError, match=rf"junk.duckdb: {what}, not a fleetaudit store"):
        open_store(junk, read_only=read_only)
    assert junk.read_bytes() == content  # left as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junk.duckdb"]  # no log beside it


@pytest.mark.parametrize("read_only", [False, True])
def test_another_programs_duckdb_is_refused_and_left_alone(tmp_path: Path, read_only: bool) -> None:
    other = tmp_path / "other.duckdb"
    with duckdb.connect(str(other)) as con:
        con.execute("CREATE TABLE sales (id INTEGER)")
    with pytest.raises(
        StoreError, match=r"a DuckDB database of another program \(tables sales\)"
    ):
        open_store(other, read_only=read_only)
    with duckdb.connect(str(other), read_only=True) as con:
        assert con.execute("SHOW TABLES").fetchall() == [("sales",)]  # no table added


def test_an_empty_duckdb_database_becomes_a_store(tmp_path: Path) -> None:
    empty = tmp_path / "empty.duckdb"
    duckdb.connect(str(empty)).close()
    with pytest.raises(StoreError, match=r"an empty DuckDB database, no fleetaudit store yet"):
        open_store(empty, read_only=True)  # a reader is told to ingest first
    with open_store(empty) as s:
        assert s.row_count("nodes") == 0


def test_whatif_runs_keep_the_newest_per_kind_and_go_stale_on_ingest(
    db_path: Path, tiny_dir: Path
) -> None:
    from datetime import datetime, timezone

    from fleetaudit import api

    options = api.StoreOptions(db_path)
    api.ingest_paths(options, [tiny_dir])
    at = datetime(2026, 5, 1, tzinfo=timezone.utc)
    for depth in (2, 3):
        api.record_whatif_run(
            options,
            "compaction",
            at=at,
            scenario=None,
            run_options={"depth": depth, "at": at},
            document={"schema": "fleetaudit.compaction/1", "depth": depth},
        )
    with api.reading(options) as s:
        runs = api.latest_whatif_runs(s)
    assert set(runs) == {"compaction"}
    assert runs["compaction"].options["depth"] == 3
    assert runs["compaction"].document["depth"] == 3
    assert not runs["compaction"].stale
    api.ingest_paths(options, [tiny_dir])
    with api.reading(options) as s:
        assert api.latest_whatif_runs(s)["compaction"].stale
    with pytest.raises(ValueError):
        api.record_whatif_run(
            options, "nonsense", at=at, scenario=None, run_options={}, document={}
        )


def test_a_store_without_the_runs_table_has_no_runs(db_path: Path) -> None:
    from fleetaudit import api

    duckdb.connect(str(db_path)).close()
    with open_store(db_path) as s:
        s.run("DROP TABLE whatif_runs")
        assert api.latest_whatif_runs(s) == {}


def test_a_store_made_before_an_optional_column_gets_it(db_path: Path) -> None:
    """telemetry.metric came later: opening an older store for writing adds it."""
    with open_store(db_path) as s:
        s.run("ALTER TABLE telemetry DROP COLUMN metric")
    with open_store(db_path) as s:
        assert "metric" in s.column_types("telemetry")


def test_a_store_lacking_a_table_and_a_column_gains_both_once(db_path: Path) -> None:
    """The one transaction that upgrades a store creates a table it lacks and adds a column
    another lacks, keeps the rows it has, and a second open changes nothing."""
    from fleetaudit.model import schema

    with open_store(db_path) as s:
        s.run("INSERT INTO telemetry (ts, node_id) VALUES (TIMESTAMP '2026-01-01', 'n1')")
        s.run("ALTER TABLE telemetry DROP COLUMN metric")
        s.run("DROP TABLE requests")
        before = {t: s.column_types(t) for t in schema.TABLES if t != "requests"}
    for _ in range(2):
        with open_store(db_path) as s:
            assert "metric" in s.column_types("telemetry")
            assert list(s.column_types("requests")) == [
                *schema.TABLES["requests"].column_names, schema.INGEST_ID
            ]
            assert s.row_count("telemetry") == 1
            assert s.sql("SELECT count(*) FROM meta WHERE key = 'schema_version'").item() == 1
    with open_store(db_path) as s:
        after = {t: s.column_types(t) for t in schema.TABLES if t != "requests"}
    assert after == {**before, "telemetry": {**before["telemetry"], "metric": "VARCHAR"}}


def test_export_time_and_data_span_read_every_column_and_the_scenario(db_path: Path) -> None:
    """Hand-worked: the latest timestamp may be an end_time, a request's start_time, a
    telemetry sample or a saved scenario's row; the first an allocation's start."""
    from datetime import datetime

    from fleetaudit.api import data_notes, export_time

    def day(hour: int) -> datetime:
        return datetime(2026, 1, 1, hour)

    with open_store(db_path) as store:
        store.run(
            "INSERT INTO allocations (alloc_id, node_id, gpus, start_time, end_time) VALUES "
            "('a1', 'n1', 1, $t0, $t6), ('a2', 'n1', 1, $t2, NULL)",
            {"t0": day(0), "t6": day(6), "t2": day(2)},
        )
        store.run(
            "INSERT INTO requests (request_id, submit_time, start_time, gpus) "
            "VALUES ('r1', $t1, $t7, 1)",
            {"t1": day(1), "t7": day(7)},
        )
        span = store.query("data_span", scenario=None).row(0)
        assert (export_time(store), span) == (day(7), (day(0), day(7), 2, 1))
        store.run("INSERT INTO telemetry (ts, node_id) VALUES ($t8, 'n1')", {"t8": day(8)})
        assert export_time(store) == day(8)
        # 'later' moves a1's end to 09:00; 'alone' holds one allocation from 2025-12-31 22:00
        store.run(
            "INSERT INTO scenarios VALUES ('later', now()::TIMESTAMP, '', '', $t0, 'recorded'), "
            "('alone', now()::TIMESTAMP, '', '', $t0, 'empty')",
            {"t0": day(0)},
        )
        store.run(
            "INSERT INTO scenario_allocations (scenario, removed, alloc_id, node_id, gpus, "
            "start_time, end_time) VALUES ('later', false, 'a1', 'n1', 1, $t0, $t9), "
            "('alone', false, 'b1', 'n1', 1, $eve, $t3)",
            {"t0": day(0), "t9": day(9), "eve": datetime(2025, 12, 31, 22), "t3": day(3)},
        )
        assert export_time(store, "later") == day(9)
        assert export_time(store, "alone") == day(8)  # the telemetry's sample
        assert store.query("data_span", scenario="later").row(0) == (day(0), day(9), 2, 1)
        assert store.query("data_span", scenario="alone").row(0) == (
            datetime(2025, 12, 31, 22), day(8), 1, 1
        )
        assert data_notes(store, day(9), day(10), "later") == [
            "the window lies after all of the data (the data runs from 2026-01-01T00:00:00Z "
            "to 2026-01-01T09:00:00Z): the last recorded allocations are carried on, and no "
            "request or telemetry is recorded in it"
        ]


class _CommitInterrupted:
    """A connection whose COMMIT is hit by Ctrl-C, as DuckDB reports it."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con

    def execute(self, text: str, *args: object) -> object:
        if text == "COMMIT":
            raise RuntimeError("Query interrupted")
        return self._con.execute(text, *args)

    def __getattr__(self, name: str) -> object:
        return getattr(self._con, name)


def test_ctrl_c_during_commit_is_an_interrupt_not_an_internal_error(db_path: Path) -> None:
    """A SIGINT that lands on COMMIT surfaced as RuntimeError: exit 1 'internal error'."""
    with open_store(db_path) as s:
        s.con = _CommitInterrupted(s.con)  # type: ignore[assignment]
        with pytest.raises(KeyboardInterrupt), s.transaction():
            s.con.execute("CREATE TABLE t (x INTEGER)")
