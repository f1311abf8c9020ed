"""The window's demand (fleetaudit.model.demand) and the report's use of it, worked by hand.

tests/data/demand/README.md says what each request is for; the window is
[2026-01-01T00:00Z, 2026-01-02T00:00Z].
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from fleetaudit import api
from fleetaudit.api.report_api import ReportOptions, build_report
from fleetaudit.cli import app
from fleetaudit.core.errors import UsageError
from fleetaudit.model.demand import window_demand
from fleetaudit.model.shapes import duration_class
from fleetaudit.model.store import open_store

from .conftest import DATA

START = datetime(2026, 1, 1, tzinfo=timezone.utc)
END = datetime(2026, 1, 2, tzinfo=timezone.utc)
runner = CliRunner()


@pytest.fixture(scope="module")
def requests(tmp_path_factory: pytest.TempPathFactory) -> pl.DataFrame:
    db = tmp_path_factory.mktemp("demand") / "d.duckdb"
    api.ingest_paths(
        api.StoreOptions(db),
        [DATA / "report_hand" / "nodes.csv", DATA / "demand" / "requests.csv"],
    )
    store = open_store(db)
    try:
        return store.query("requests_in_window", start=START, end=END)
    finally:
        store.close()


def _table(demand: Any) -> list[tuple[str | None, float, float | None, int, int, float]]:
    return [
        (
            d.shape.gpu_model, d.shape.gpus, d.shape.duration_s, d.requests, d.queued,
            round(d.weight, 6),
        )
        for d in demand.shapes
    ]  # fmt: skip


def test_waited_demand_by_hand(requests: pl.DataFrame) -> None:
    """w1 waits 00:00-02:00 of the window x 8 GPUs = 16; w2 3 h + w3 4 h x 1 GPU = 7
    (one 1h class); w7 1 h x 0.5 = 0.5; w8 is queued at the end with 0 h waited;
    w4 never waited, w6 waited before the window, w5 asks for no GPU."""
    demand = window_demand(requests, START, END)
    assert demand.mode == "waited" and demand.asked is None
    assert _table(demand) == [
        ("H20", 8.0, None, 1, 0, 16.0),
        ("H20", 1.0, 3600.0, 2, 1, 7.0),
        ("A10", 0.5, None, 1, 1, 0.5),
        ("H20", 4.0, 3600.0, 1, 1, 0.0),
    ]
    assert (demand.requests, demand.no_gpu) == (5, 1)
    assert demand.left_out_share(demand.chosen(2, [])) == pytest.approx(0.5 / 23.5)
    assert demand.left_out_share(demand.chosen(4, [])) == 0.0


def test_submitted_demand_by_hand(requests: pl.DataFrame) -> None:
    """Submitted in the window: w2 and w3 ask 3435 s and 3437 s (1h class, 1.908889 GPU-h),
    w4 2 h (2h class), w7 0.5 GPU until the window's end (1 h: 0.5), w8 4 GPUs x 1 h."""
    demand = window_demand(requests, START, END, "submitted")
    assert _table(demand) == [
        ("H20", 4.0, 3600.0, 1, 1, 4.0),
        ("H20", 1.0, 7200.0, 1, 0, 2.0),
        ("H20", 1.0, 3600.0, 2, 1, round((3435 + 3437) / 3600, 6)),
        ("A10", 0.5, None, 1, 1, 0.5),
    ]
    assert (demand.requests, demand.no_gpu) == (5, 1)


def test_queued_demand_is_the_queue_at_the_end(requests: pl.DataFrame) -> None:
    demand = window_demand(requests, START, END, "queued")
    assert _table(demand) == [
        ("H20", 4.0, 3600.0, 1, 1, 1.0),
        ("H20", 1.0, 3600.0, 1, 1, 1.0),
        ("A10", 0.5, None, 1, 1, 1.0),
    ]


def test_nothing_waited_falls_back_to_submitted(requests: pl.DataFrame) -> None:
    only_w4 = requests.filter(pl.col("request_id") == "w4")
    demand = window_demand(only_w4, START, END)
    assert demand.mode == "submitted" and demand.asked is None
    assert _table(demand) == [("H20", 1.0, 7200.0, 1, 0, 2.0)]
    asked = window_demand(only_w4, START, END, "waited")
    assert asked.mode == "waited" and asked.shapes == ()


def test_unknown_demand_is_a_usage_error(requests: pl.DataFrame) -> None:
    with pytest.raises(UsageError, match="--demand"):
        window_demand(requests, START, END, "pending")


@given(st.floats(min_value=1, max_value=1e8, allow_nan=False))
def test_a_duration_class_is_the_smallest_rung_not_below_it(seconds: float) -> None:
    rung = duration_class(seconds)
    assert rung is not None and rung >= seconds
    assert duration_class(rung) == rung  # a rung is its own class
    if seconds > 604800:
        assert rung % 604800 == 0 and rung - seconds < 604800


@pytest.fixture(scope="module")
def started_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("started")
    for name in ("nodes.csv", "allocations.csv"):
        shutil.copy(DATA / "report_hand" / name, folder / name)
    shutil.copy(DATA / "demand_started" / "requests.csv", folder / "requests.csv")
    db = folder / "s.duckdb"
    api.ingest_paths(api.StoreOptions(db), [folder / n for n in ("nodes.csv", "allocations.csv", "requests.csv")])
    return db


def test_report_evaluates_what_waited_when_nothing_is_queued(started_db: Path) -> None:
    """n4 (A10, 4 GPUs) has whole GPUs free at the 25 hourly instants: 3 from 00 to 17
    (a5, a6 pack onto one GPU), 4 at 18, 3 at 19 (a11), 4 from 20 to 24: 81 GPUs,
    x 24/25 h = 77.76 GPU-hours, all usable by s1's 1-GPU node shape. Queued at the end:
    nothing, so all of them are unqueued."""
    store = api.StoreOptions(started_db)
    window = {"at": END, "since": END - START, "step": timedelta(hours=1)}
    waited = build_report(store, ReportOptions(**window))
    a10 = waited.models["A10"]["schedulable"]
    assert a10["idle_gpu_hours"] == pytest.approx(77.76)
    assert a10["usable_gpu_hours"] == pytest.approx(77.76)
    assert a10["stranded_gpu_hours"]["unqueued"] == pytest.approx(0)
    assert waited.demand["mode"] == "waited"
    assert waited.demand["requests"] == 1
    assert [(s.shape.gpu_model, s.requests, s.queued, s.demand_weight) for s in waited.shapes] == [
        ("A10", 1, 0, 4.0)
    ]
    queued = build_report(store, ReportOptions(**window, demand="queued"))
    a10 = queued.models["A10"]["schedulable"]
    assert a10["usable_gpu_hours"] == 0
    assert a10["stranded_gpu_hours"]["unqueued"] == pytest.approx(77.76)
    assert queued.shapes == ()


def test_cli_demand_reaches_the_json(started_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = runner.invoke(
        app,
        ["report", "--db", str(started_db), "--at", "2026-01-02T00:00:00Z", "--since", "1d",
         "--step", "1h", "--demand", "submitted", "--json", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    assert document["demand"]["mode"] == "submitted"
    assert document["demand"]["weight"] == "GPU-hours requested"
    # s1 asks 1 GPU from 10:00 to the window's end (14 h), s2 8 GPUs from 08:00 (16 h)
    weights = [(s["shape"]["gpu_model"], s["requests"], s["demand_weight"]) for s in document["shapes"]]
    assert weights == [("H20", 1, 128.0), ("A10", 1, 14.0)]
    assert "demand: submitted" in result.output
    bad = runner.invoke(app, ["report", "--db", str(started_db), "--demand", "pending"])
    assert bad.exit_code == 2


def _ranked(*shapes: tuple[str, float, float]) -> Any:
    from fleetaudit.model.demand import DemandShape, WindowDemand
    from fleetaudit.model.shapes import make_shape

    return WindowDemand(
        "waited", None,
        tuple(DemandShape(make_shape(m, g), 1, 1, w) for m, g, w in shapes), len(shapes), 0,
    )  # fmt: skip


def test_the_default_budget_covers_every_models_heaviest_shapes() -> None:
    """25 H20 shapes outweigh the A10 and A100 ones: the 20 heaviest are all H20, so the
    default adds A10's 3 heaviest and A100's one, and an any-model shape counts for both.
    --shapes N takes the N heaviest, whatever their model."""
    demand = _ranked(
        *(("H20", float(8 * g), 100.0 - g) for g in range(1, 26)),
        ("A10", 1.0, 5.0), ("A10", 2.0, 4.0), ("A10", 4.0, 3.0), ("A10", 8.0, 2.0),
        ("A100", 8.0, 1.0),
    )  # fmt: skip
    chosen = demand.chosen(None, ["A10", "A100", "H20"])
    labels = [d.shape.label() for d in chosen]
    assert len(chosen) == 24 and labels[:20] == [d.shape.label() for d in demand.shapes[:20]]
    assert labels[20:] == ["A10 1 GPU node", "A10 2 GPU node", "A10 4 GPU node", "A100 8 GPU node"]
    assert demand.chosen(2, ["A10"]) == demand.shapes[:2]
    # the left-out weight: H20 21..25 (79+78+77+76+75) and A10 8 (2) of 1,940 in all
    total = sum(100.0 - g for g in range(1, 26)) + 15.0
    assert demand.left_out_share(chosen) == pytest.approx((385 + 2) / total)
    anywhere = _ranked(*(("H20", float(8 * g), 100.0 - g) for g in range(1, 21)), (None, 3.0, 1.0))
    assert len(anywhere.chosen(None, ["A10", "H20"])) == 21  # A10's heaviest: the any-model one


def test_a_model_whose_demand_is_not_evaluated_reads_not_evaluated(tmp_path: Path) -> None:
    """Two models, one node each; the demand's heaviest shape asks for H20. With
    --shapes 1 nothing of A10's demand is evaluated: its schedulable split reads 'not
    evaluated' (the JSON's evaluated false), not 0%; by default A10's shape is evaluated
    and its idle GPUs split (4 idle, a 4-GPU request fits: usable 4 at every step)."""
    folder = tmp_path / "fleet"
    folder.mkdir()
    (folder / "nodes.csv").write_text("node_id,gpu_model,gpus,cpus\nh,H20,8,64\na,A10,4,32\n")
    (folder / "allocations.csv").write_text(
        "alloc_id,node_id,gpus,cpus,priority,start_time\nx,h,8,8,high,2026-01-01T00:00:00Z\n"
    )
    (folder / "requests.csv").write_text(
        "request_id,submit_time,start_time,gpu_model,gpus\n"
        "r1,2026-01-01T00:00:00Z,,H20,8\nr2,2026-01-01T12:00:00Z,,A10,4\n"
    )
    db = tmp_path / "s.duckdb"
    assert runner.invoke(app, ["ingest", str(folder), "--db", str(db), "-q"]).exit_code == 0
    args = ["report", "--db", str(db), "--at", "2026-01-02T00:00:00Z", "--since", "1d",
            "--step", "6h"]  # fmt: skip
    narrow = runner.invoke(app, [*args, "--shapes", "1", "--json", "-"])
    a10 = json.loads(narrow.stdout)["models"]["A10"]["schedulable"]
    assert (a10["evaluated"], a10["demand"]) == (
        False, {"requests": 1, "evaluated_requests": 0, "evaluated_share": 0.0},
    )  # fmt: skip
    assert any("A10: none of its demand's 1 request(s)" in n for n in json.loads(narrow.stdout)["notes"])
    terminal = runner.invoke(app, [*args, "--shapes", "1"]).stdout
    (row,) = [line for line in terminal.splitlines() if line.startswith(" A10 ")]
    assert "not evaluated" in row and "0.0%" not in row.split("│")[2]
    full = json.loads(runner.invoke(app, [*args, "--json", "-"]).stdout)
    a10 = full["models"]["A10"]["schedulable"]
    assert a10["evaluated"] is True and a10["demand"]["evaluated_requests"] == 1
    assert (a10["idle_gpu_hours"], a10["usable_gpu_hours"]) == (96.0, 96.0)  # 4 GPUs x 24 h
