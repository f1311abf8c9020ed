"""``fleetaudit paper`` on the worked fixture (tests/asi_fixture.py), every figure by hand."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from fleetaudit import api
from fleetaudit.api.paper_api import PaperOptions, build_paper
from fleetaudit.core.errors import UsageError
from fleetaudit.inputs.ingest import IngestOptions
from fleetaudit.model import paper as paper_mod
from fleetaudit.model.store import open_store
from fleetaudit.outputs.contract import paper_document
from tests.asi_fixture import write_fixture

OPTIONS = IngestOptions(format="alibaba-gpu-v2026")


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("paper")
    path = base / "fleet.duckdb"
    api.ingest_paths(api.StoreOptions(path), [write_fixture(base / "data")], OPTIONS)
    return path


@pytest.fixture(scope="module")
def record(db: Path) -> pl.DataFrame:
    with open_store(db, read_only=True) as store:
        return store.query("paper_server_hours", lo=0, hi=10_000)


def _at(t: int) -> pl.Expr:
    return pl.col("t") == t


ALLOCATION = {
    22: {"H20": (0.78125, 0.78125), "A100": (0.625, 0.625), "XPU-A": (0.0, 0.0)},
    23: {"H20": (0.75, 0.75), "A100": (0.0625, 0.0625), "XPU-A": (0.25, 0.25)},
    24: {"H20": (0.640625, 0.765625), "A100": (0.0, 0.0), "XPU-A": (0.25, 0.25)},
    25: {"H20": (0.5, 0.8125), "A100": (0.0, 0.0)},
}


@pytest.mark.parametrize("t", sorted(ALLOCATION))
def test_allocation_per_hour(record: pl.DataFrame, t: int) -> None:
    got = paper_mod.allocation(record, _at(t))
    assert {r[0]: (r[1], r[2]) for r in got.rows()} == ALLOCATION[t]


def test_allocation_window(record: pl.DataFrame) -> None:
    """Hours 22, 23 and 00 (t = 24) are sampled; t = 25 (hour 01) is not."""
    rows = paper_mod.allocation(record).rows()
    got = {r[0]: (round(r[1], 6), round(r[2], 6), r[3]) for r in rows}
    assert got == {
        "H20": (0.723958, 0.765625, 3),
        "A100": (0.229167, 0.229167, 3),
        "XPU-A": (0.166667, 0.166667, 3),
    }


# t -> total idle; per shape (fractional, stranded, insufficient_cpu)
IDLE = {
    22: (6.5, {(1, 8): (0.5, 0, 0), (4, 32): (0, 6, 0), (8, 96): (0, 3, 3), (8, 128): (0, 3, 3)}),
    23: (11.5, {(1, 8): (0.5, 0, 0), (4, 32): (0.5, 0, 0), (8, 96): (0, 11, 0), (8, 128): (0, 4, 7.5)}),
    24: (13.75, {(1, 8): (0.75, 0, 0), (4, 32): (0.75, 0, 0), (8, 96): (0, 5, 0), (8, 128): (0, 5, 0)}),
    25: (16.0, {(1, 8): (0, 0, 0), (4, 32): (0, 0, 0), (8, 96): (0, 0, 0), (8, 128): (0, 0, 8)}),
}  # fmt: skip


@pytest.mark.parametrize("t", sorted(IDLE))
def test_idle_classes_per_hour(record: pl.DataFrame, t: int) -> None:
    total, want = IDLE[t]
    got = paper_mod.idle_classes(record, list(want), _at(t))
    for row in got.iter_rows(named=True):
        assert row["total_idle"] == total
        shape = (row["gpus"], row["cpus"])
        assert (row["fractional"], row["stranded"], row["insufficient_cpu"]) == want[shape]


def test_idle_classes_window(record: pl.DataFrame) -> None:
    got = paper_mod.idle_classes(record, [(1, 8), (4, 32), (8, 64), (8, 96)])
    rows = {(r[0], r[1]): tuple(r[2:6]) for r in got.rows()}
    assert rows == {
        (1, 8): (0.625, 0, 0, 10.125),
        (4, 32): (0.375, 3, 0, 10.125),
        (8, 64): (0, 5.5, 0, 10.125),
        (8, 96): (0, 4, 1.5, 10.125),
    }


# t -> slots of H20, A100; hetero (across cluster, within ASW) for gangs of 4 and of 7
SLOTS = {
    22: (4, 3, {4: (1, 1), 7: (1, 0)}),
    23: (4, 7, {4: (2, 2), 7: (1, 1)}),
    24: (4, 0, {4: (1, 1), 7: (0, 0)}),
    25: (4, 7, {4: (2, 2), 7: (1, 1)}),
}


@pytest.mark.parametrize("t", sorted(SLOTS))
def test_asw_slots_per_hour(record: pl.DataFrame, t: int) -> None:
    h20, a100, hetero = SLOTS[t]
    got = paper_mod.asw_slots(record, (4, 7), _at(t))
    by = {(r["gpu_model"], r["gang"]): r for r in got.iter_rows(named=True)}
    assert by[("H20", 4)]["slots"] == h20
    assert by[("A100", 4)]["slots"] == a100
    assert by[("XPU-A", 4)]["slots"] == 0  # s4: no ASW and 16 GPUs
    for gang, (across, within) in hetero.items():
        row = by[(paper_mod.HETEROGENEOUS, gang)]
        assert (row["across_cluster"], row["within_asw"]) == (across, within)


def test_standby(record: pl.DataFrame) -> None:
    assert paper_mod.standby(record.filter(_at(24)))["paper_ratio"] == 0.5
    assert paper_mod.standby(record.filter(_at(25)))["paper_ratio"] == 1.25  # uncapped
    s = paper_mod.standby(record)
    assert s["gpu_hours"] == 8.0
    assert s["harvested_gpu_hours"] == 6.0  # min(2, 4) at 24 + min(5, 4) at 25
    assert s["harvested_share"] == 0.75
    assert s["paper_ratio"] == 0.875


def _figures_as_dict(f: paper_mod.PaperFigures) -> dict[str, object]:
    rounded = lambda frame: sorted(  # noqa: E731
        tuple(round(v, 9) if isinstance(v, float) else v for v in row) for row in frame.rows()
    )
    return {
        "allocation": rounded(f.allocation),
        "idle": rounded(f.idle),
        "slots": rounded(f.slots),
        "standby": {k: v if v is None else round(v, 9) for k, v in f.standby.items()},
    }


@pytest.mark.parametrize(
    "cuts",
    [[], [24], [23, 24, 25], [22, 23, 24, 25, 26]],
    ids=["whole", "by-day", "by-hour", "with-empty-parts"],
)
def test_figures_by_parts_are_the_whole(record: pl.DataFrame, cuts: list[int]) -> None:
    """The window's record in parts (hours [22, 24) and [24, 26), one hour each, ...)
    gives the figures of the whole record, hand-worked above."""
    bounds = [0, *cuts, 10_000]
    parts = [record.filter(pl.col("t").is_between(a, b - 1)) for a, b in zip(bounds, bounds[1:])]
    histogram = pl.DataFrame(schema={"job_type": pl.String, "ratio": pl.Float64, "n": pl.Int64})
    got = paper_mod.paper_figures_by_parts(iter(parts), histogram, 22, 25)
    want = paper_mod.paper_figures(record, histogram, 22, 25)
    assert _figures_as_dict(got) == _figures_as_dict(want)
    assert got.standby["paper_ratio"] == 0.875
    hp = {r[0]: round(r[1], 6) for r in got.allocation.rows()}
    assert hp["H20"] == 0.723958 and hp["A100"] == 0.229167
    assert got.idle["hours"].to_list() == [2] * len(paper_mod.REFERENCE_SHAPES)  # t = 22, 24


def test_paper_view(db: Path) -> None:
    """No paper week in the fixture: the window is every stored day (t = 22..25)."""
    result = build_paper(api.StoreOptions(db), PaperOptions())
    assert (result.days, result.t_first, result.t_last) == ((0, 1), 22, 25)
    ratio = result.figures.cpu_gpu_ratio
    assert ratio["training"] == {"median": 12.0, "p90": 12.0, "pod_hours": 4}
    assert ratio["online_inference"] == {"median": 4.0, "p90": 8.0, "pod_hours": 4}
    assert ratio["offline_inference"]["median"] == 8.0
    # fleetaudit's physical allocation over [22, 26): H20 = s1 + s2, 64 healthy GPU-hours;
    # high: s1 32 + s2 (4 + 1 share GPU, 4, 4 + 1, 4) = 50; all: s1 32 + s2 (5, 4, 7, 8 capped) = 56
    h20 = result.fleet_allocation["H20"]
    assert h20["allocation_rate_high"] == pytest.approx(50 / 64)
    assert h20["allocation_rate"] == pytest.approx(56 / 64)
    doc = paper_document(result)
    assert doc["schema"] == "fleetaudit.paper/1"
    assert doc["allocation"]["by_model"]["H20"]["hp_pct"] == pytest.approx(72.3958, abs=1e-4)
    assert doc["allocation"]["by_model"]["H20"]["hp_lp_pct"] == pytest.approx(76.5625)
    assert doc["standby"]["gpu_hours"] == 8.0
    assert doc["standby"]["harvested_gpu_hours"] == 6.0
    assert result.fleet_instants  # evaluated at the last hour: the window has no hour 10
    # fleetaudit's shapes at t = 25 (01:00 of day 1): s4 has no server row then; s1 and s2
    # are full (p-train-1 8; p-infer-1 4 + p-lp-1 2 + p-lp-2 3); s3 (8 GPUs, 128 CPUs)
    # holds p-pend-1 (1 GPU, 8 CPUs) and p-cpu-1 (8 CPUs), p-dev-1 ended at 00:00: 7 idle
    # GPUs and 112 free CPUs, which no shape runs out of, so a shape of g GPUs uses
    # g * (7 // g) of them and the rest is fragment
    assert list(result.fleet_instants) == [result.trace_start + timedelta(hours=25)]
    usable = {1: 7.0, 4: 4.0, 8: 0.0}
    assert result.fleet_idle == {
        (g, c): {"idle": 7.0, "usable": usable[g], "fragment": 7.0 - usable[g],
                 "cpu_memory": 0.0, "other": 0.0}
        for g, c in paper_mod.REFERENCE_SHAPES
    }  # fmt: skip
    assert any("no hour 10" in n for n in doc["notes"])


def test_days_outside_the_store(db: Path) -> None:
    with pytest.raises(UsageError, match="holds trace days 0-1"):
        build_paper(api.StoreOptions(db), PaperOptions(days=(109, 115)))


def test_store_without_the_trace(tmp_path: Path, tiny_dir: Path) -> None:
    db = tmp_path / "native.duckdb"
    api.ingest_paths(api.StoreOptions(db), [tiny_dir])
    with pytest.raises(UsageError, match="no alibaba-gpu-v2026 trace"):
        build_paper(api.StoreOptions(db), PaperOptions())


# -- the command line ------------------------------------------------------------------


def _invoke(*args: object) -> object:
    from typer.testing import CliRunner

    from fleetaudit.cli import app

    return CliRunner().invoke(app, [str(a) for a in args])


def test_cli_generate_ingest_paper(tmp_path: Path) -> None:
    out = tmp_path / "release"
    fmt = ("--format", "alibaba-gpu-v2026")
    result = _invoke("generate", out, *fmt, "--nodes", "40", "--days", "1")
    assert result.exit_code == 0, result.output
    hour = out / "asi_opensource_pod_hourly" / "day=109" / "hour=05"
    assert (hour / "part-000.parquet").is_file()
    assert (out / "asi_opensource_job_execution_summary" / "part-000.parquet").is_file()
    db = tmp_path / "g.duckdb"
    result = _invoke("ingest", *fmt, out, "--db", db, "--days", "109-115")
    assert result.exit_code == 0, result.output
    assert "export time 2026-04-20T23:00Z" in result.stderr
    result = _invoke("paper", "--db", db, "--json")
    assert result.exit_code == 0, result.output
    import json

    doc = json.loads(result.stdout)
    assert doc["schema"] == "fleetaudit.paper/1" and doc["days"] == [109, 109]
    assert set(doc["allocation"]["by_model"]) >= {"H20", "A100", "XPU-A"}
    result = _invoke("paper", "--db", db)
    assert result.exit_code == 0 and "allocation rate" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ingest", "--format", "alibaba-gpu-v2026", "{tmp}", "--days", "115-109"], "--days: the range"),
        (["ingest", "--format", "alibaba-gpu-v2026", "{tmp}"], "not the release layout"),
        (["ingest", "{tmp}", "--days", "1-2"], "--days applies to --format alibaba-gpu-v2026 only"),
        (["paper", "--days", "x"], "--days: expected A-B"),
        (["generate", "{tmp}/r", "--format", "alibaba-gpu-v2026", "--days", "1.5"], "--days: 1.5 is not a whole"),
    ],
)  # fmt: skip
def test_cli_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = _invoke(*[a.replace("{tmp}", str(tmp_path)) for a in args], *(
        [] if args[0] == "generate" else ["--db", tmp_path / "x.duckdb"]
    ))  # fmt: skip
    assert result.exit_code == 2, result.output
    assert message in result.stderr and result.stderr.count("\n") == 1


def test_cli_paper_help() -> None:
    result = _invoke("paper", "--help")
    assert result.exit_code == 0 and "--days" in result.stdout and "--json" in result.stdout
