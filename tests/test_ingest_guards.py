"""An ingest does not count telemetry twice or merge another fleet without a word."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from fleetaudit.cli import app
from tests.conftest import DATA, write

runner = CliRunner()


def invoke(*args: str | Path) -> object:
    return runner.invoke(app, [str(a) for a in args])


def _telemetry(db: Path) -> tuple[int, int, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        columns = {r[0] for r in con.execute("DESCRIBE telemetry").fetchall()}
        if "samples" not in columns:  # raw rows alone
            (rows,) = con.execute("SELECT count(*) FROM telemetry").fetchone()
            return int(rows), int(rows), int(rows)
        rows, samples, raw = con.execute(
            "SELECT count(*), sum(coalesce(samples, 1)), count(*) FILTER (samples IS NULL) "
            "FROM telemetry"
        ).fetchone()
    finally:
        con.close()
    return int(rows), int(samples), int(raw)


@pytest.fixture
def raw_store(tmp_path: Path) -> tuple[Path, Path]:
    """n1's 8 raw samples of tests/data/rollup (n1/0: a1 00:00, 00:20; a3 00:40 .. 01:40;
    n1/1: two), in a store, and as the Parquet file `rollup` reads."""
    raw = tmp_path / "raw"
    raw.mkdir()
    table = pacsv.read_csv(DATA / "rollup" / "raw_telemetry.csv")
    table = table.filter(pc.equal(table["node_id"], "n1"))
    pq.write_table(table, raw / "telemetry.parquet")
    write(tmp_path / "nodes" / "nodes.csv", "node_id,gpu_model,gpus,cpus\nn1,H20,8,64\n")
    db = tmp_path / "fleet.duckdb"
    for source in (tmp_path / "nodes", raw):
        assert invoke("ingest", source, "--db", db, "-q").exit_code == 0
    assert _telemetry(db) == (8, 8, 8)
    return db, raw


def test_rolled_rows_replace_the_raw_rows_they_cover(raw_store: tuple[Path, Path], tmp_path: Path) -> None:
    """Rolled up per hour, n1's samples are 4 rows (a1 hour 0, a3 hours 0 and 1, n1/1),
    each keyed at its first sample: 4 raw rows go by key, and the other 4 (00:20, 01:20,
    01:40 and n1/1's second) lie within a rolled row and are replaced too, said in a
    note. The store counts 8 samples, not 16 (the report's 'covers 100%' of doubled
    telemetry)."""
    db, raw = raw_store
    assert invoke("rollup", raw, "--out", tmp_path / "rolled", "-q").exit_code == 0
    result = invoke("ingest", tmp_path / "rolled", "--db", db)
    assert result.exit_code == 0, result.output
    assert "the rolled-up rows replaced 4 raw row(s) of the same GPUs and times" in " ".join(
        result.stderr.split()
    )
    assert _telemetry(db) == (4, 8, 0)


def test_raw_rows_within_rolled_rows_are_refused(raw_store: tuple[Path, Path], tmp_path: Path) -> None:
    """After the rollup, a raw sample of n1/0 at 01:20 lies within a3's rolled hour
    (01:00 to 01:40): ingesting it would count it twice; exit 2, nothing written."""
    db, raw = raw_store
    assert invoke("rollup", raw, "--out", tmp_path / "rolled", "-q").exit_code == 0
    assert invoke("ingest", tmp_path / "rolled", "--db", db, "-q").exit_code == 0
    write(tmp_path / "late" / "telemetry.csv",
          "ts,node_id,gpu_index,sm_active,alloc_id\n2026-03-01T01:20:00,n1,0,0.5,a3\n")  # fmt: skip
    result = invoke("ingest", tmp_path / "late", "--db", db)
    assert result.exit_code == 2
    assert result.stderr == (
        "fleetaudit: error: telemetry: 1 raw row(s) of this call fall within rolled-up rows "
        "(fleetaudit rollup) of the same GPUs, which already count those samples: ingest "
        "raw telemetry into a store without its rollup, or roll it up too\n"
    )
    assert _telemetry(db) == (4, 8, 0)


def test_rolled_rows_over_raw_ones_with_strict_are_refused(
    raw_store: tuple[Path, Path], tmp_path: Path
) -> None:
    db, raw = raw_store
    assert invoke("rollup", raw, "--out", tmp_path / "rolled", "-q").exit_code == 0
    result = invoke("ingest", tmp_path / "rolled", "--db", db, "--strict")
    assert result.exit_code == 2 and "would replace (--strict writes nothing)" in result.stderr
    assert _telemetry(db) == (8, 8, 8)


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    write(tmp_path / "a" / "nodes.csv", "node_id,gpu_model,gpus,cpus,switch_id\n"
          "n1,H20,8,64,sw-a\nn2,H20,8,64,sw-a\nn3,H20,8,64,sw-b\nn4,H20,8,64,sw-b\n")  # fmt: skip
    db = tmp_path / "fleet.duckdb"
    assert invoke("ingest", tmp_path / "a", "--db", db, "-q").exit_code == 0
    return db


def test_nodes_replaced_by_another_model_are_said(fleet: Path, tmp_path: Path) -> None:
    """3 stored nodes come back as A100: all the call replaces, a note; --strict refuses.
    (A generated fleet ingested into the demo store replaced 50 of its 128 nodes, most of
    them by another model, without a word.)"""
    write(tmp_path / "b" / "nodes.csv", "node_id,gpu_model,gpus,cpus,switch_id\n"
          "n1,A100,8,64,sw-a\nn2,A100,8,64,sw-a\nn3,A100,8,64,sw-b\n")  # fmt: skip
    strict = invoke("ingest", tmp_path / "b", "--db", fleet, "--strict")
    assert strict.exit_code == 2
    assert strict.stderr.startswith("fleetaudit: error: nodes: 3 of the 3 stored nodes this")
    result = invoke("ingest", tmp_path / "b", "--db", fleet)
    assert result.exit_code == 0
    assert (
        "note: nodes: 3 of the 3 stored nodes this call replaces (the store held 4) are now "
        "of another GPU model (n1: H20 -> A100, n2: H20 -> A100, n3: H20 -> A100, ...): is "
        "this export of the same fleet?"
    ) in result.stderr


def test_one_node_of_another_model_is_a_swap_not_another_fleet(fleet: Path, tmp_path: Path) -> None:
    write(tmp_path / "swap" / "nodes.csv", "node_id,gpu_model,gpus,cpus,switch_id\nn4,A100,8,64,sw-b\n")
    result = invoke("ingest", tmp_path / "swap", "--db", fleet, "--strict")
    assert result.exit_code == 0 and "note:" not in result.stderr


def test_a_disjoint_fleet_is_said_and_a_grown_one_is_not(fleet: Path, tmp_path: Path) -> None:
    write(tmp_path / "other" / "nodes.csv", "node_id,gpu_model,gpus,cpus,switch_id\n"
          "node-00001,L20,8,64,sw-0001\nnode-00002,L20,8,64,sw-0001\n")  # fmt: skip
    strict = invoke("ingest", tmp_path / "other", "--db", fleet, "--strict")
    assert strict.exit_code == 2 and "share no node and no switch" in strict.stderr
    merged = invoke("ingest", tmp_path / "other", "--db", fleet)
    assert merged.exit_code == 0
    assert (
        "note: nodes: this call's 2 nodes share no node and no switch with the 4 the store "
        "holds: another fleet is being merged into this one (ingest it into a store of its "
        "own with --db), unless this one grew by them"
    ) in merged.stderr
    write(tmp_path / "grown" / "nodes.csv",
          "node_id,gpu_model,gpus,cpus,switch_id\nn5,H20,8,64,sw-b\n")  # fmt: skip
    grown = invoke("ingest", tmp_path / "grown", "--db", fleet, "--strict")
    assert grown.exit_code == 0 and "note:" not in grown.stderr


@pytest.mark.parametrize(
    ("ts", "refused"),
    [
        ("2026-03-01T01:00:00", True),  # the rolled row's own instant (its own key)
        ("2026-03-01T01:40:00", True),  # its last sample: 01:00 + (3 - 1) x 20 min
        ("2026-03-01T01:40:01", False),  # after it: a sample the rollup never counted
        ("2026-03-01T00:39:59", False),  # between a1's last (00:20) and a3's first (00:40)
    ],
)
def test_a_rolled_row_covers_its_first_to_its_last_sample(
    raw_store: tuple[Path, Path], tmp_path: Path, ts: str, refused: bool
) -> None:
    """The hand-worked edges of what a rolled row stands for: a3's row of hour 1 on n1/0
    (samples 01:00, 01:20, 01:40: 3 samples 1200 s apart) covers 01:00 to 01:40 inclusive;
    a1's row of hour 0 (00:00, 00:20) ends at 00:20."""
    db, raw = raw_store
    assert invoke("rollup", raw, "--out", tmp_path / "rolled", "-q").exit_code == 0
    assert invoke("ingest", tmp_path / "rolled", "--db", db, "-q").exit_code == 0
    write(tmp_path / "late" / "telemetry.csv",
          f"ts,node_id,gpu_index,sm_active,alloc_id\n{ts},n1,0,0.5,a3\n")  # fmt: skip
    result = invoke("ingest", tmp_path / "late", "--db", db, "-q")
    assert result.exit_code == (2 if refused else 0), result.stderr
    assert _telemetry(db) == ((4, 8, 0) if refused else (5, 9, 1))
