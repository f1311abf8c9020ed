"""Compaction over time: rounds through a replayed window under a migration budget."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fleetaudit.cli import app
from fleetaudit.core.errors import UsageError
from fleetaudit.core.times import epoch_us
from fleetaudit.model.shapes import make_shape
from fleetaudit.whatif import compaction_over_time as cot
from fleetaudit.whatif.compaction import CompactionOptions, Move, compact
from fleetaudit.whatif.compaction_over_time import (
    OverTimeOptions,
    OverTimeResult,
    affordable_prefix,
    compact_over_time,
)
from fleetaudit.whatif.compaction_replay import replay_ledger
from tests.test_compaction import T, fleets, make_allocations, make_nodes

DATA = Path(__file__).parent / "data" / "overtime"
T0 = datetime(2026, 1, 1)
H = timedelta(hours=1)
REQUEST_SCHEMA = {"request_id": pl.String, "submit_time": pl.Datetime("us"),
                  "gpus": pl.Float64, "cpus": pl.Float64, "duration_s": pl.Float64}


def read(name: str) -> pl.DataFrame:
    frame = pl.read_csv(DATA / f"{name}.csv", try_parse_dates=True)
    casts = {c: pl.Float64 for c in ("memory_gib", "gpus", "cpus", "duration_s", "cpus_per_gpu")
             if c in frame.columns}  # fmt: skip
    for c in ("start_time", "end_time", "submit_time"):
        if c in frame.columns:
            casts[c] = pl.Datetime("us")
    return frame.with_columns(pl.col(c).cast(t) for c, t in casts.items())


def over(nodes: pl.DataFrame, allocations: pl.DataFrame, requests: pl.DataFrame, hours: int,
         **ot: Any) -> OverTimeResult:  # fmt: skip
    # budgets in GPUs and the plain fifo queue, as the hand-worked figures below count
    return compact_over_time(
        nodes, allocations, requests, T0, T0 + hours * H, (), CompactionOptions(),
        OverTimeOptions(**{"budget_unit": "gpus", "queue": "fifo", **ot}), keep_frames=True,
    )  # fmt: skip


def checked(result: OverTimeResult, nodes: pl.DataFrame, budget: float) -> None:
    """Every round stays within its budget, and its applied moves replay independently."""
    for tick in result.ticks:
        assert tick.gpus_moved <= budget + 1e-9
        assert tick.frame is not None
        replay = replay_ledger(
            nodes, tick.frame, tick.at, [m.as_json() for m in tick.moves],
            min_remaining_s=CompactionOptions().min_remaining_s,
        )  # fmt: skip
        assert replay.before.free_nodes == tick.before.free_nodes
        assert replay.before.partial_nodes == tick.before.partial_nodes
        assert (replay.after.free_nodes, replay.after.partial_nodes) == (
            tick.after.free_nodes, tick.after.partial_nodes,
        )  # fmt: skip


def moves(tick: Any) -> list[tuple[str, str, str]]:
    return [(m.alloc_id, m.source, m.destination) for m in tick.moves]


# ------------------------------------------------------------------ hand-worked

# tests/data/overtime: five 8-GPU nodes in one switch, 2 GPUs of budget per round.
# 00:00  n1 a1(2) | n2 a2(6, ends 00:30) | n3 a3(2) | n4 a4(6) | n5 free.
#        The search empties n1 (a1 -> n2) then n3 (a3 -> n4): 4 GPUs. The budget
#        affords a1 only; the cut falls where n1 is empty. free 1 -> 2, partial 4 -> 2.
# 00:30  a2 ends: n2 holds a1 alone (partial again).
# 00:40  r1 (1 GPU) arrives and goes to its recorded node n1, which has room:
#        churn re-fragments the fleet (n1 partial again).
# 01:00  n1 r1(1) | n2 a1(2) | n3 a3(2) | n4 a4(6) | n5: free 1, partial 4.
#        The search: r1 -> n4 (n1 empty), a1 -> n3 (n2 empty): 3 GPUs; the budget
#        affords r1 only. free 2, partial 3.
# 02:00  no churn: a1 -> n3 (2 GPUs) fits whole. free 3, partial 2.
# Without compaction: 00:00 free 1 partial 4; 01:00 and 02:00 n1 a1+r1, n2 free:
# free 2, partial 3.
def test_churn_refragments_between_rounds_and_the_budget_binds() -> None:
    nodes, allocations, requests = read("nodes"), read("allocations"), read("requests")
    result = over(nodes, allocations, requests, 3, moves_per_hour=2)
    checked(result, nodes, 2)
    t1, t2, t3 = result.ticks
    assert [t.at for t in result.ticks] == [T0, T0 + H, T0 + 2 * H]
    assert (t1.ledger_moves, moves(t1), t1.cut) == (2, [("a1", "n1", "n2")], "node")
    assert (t1.before.free_nodes, t1.before.partial_nodes) == (1, 4)
    assert (t1.after.free_nodes, t1.after.partial_nodes) == (2, 2)
    assert (t2.ledger_moves, moves(t2), t2.cut) == (2, [("replay/r1", "n1", "n4")], "node")
    assert (t2.before.free_nodes, t2.before.partial_nodes) == (1, 4)
    assert (t2.after.free_nodes, t2.after.partial_nodes) == (2, 3)
    assert (moves(t3), t3.cut) == ([("a1", "n2", "n3")], "whole")
    assert (t3.after.free_nodes, t3.after.partial_nodes) == (3, 2)
    assert [(t.without.free_nodes, t.without.partial_nodes) for t in result.ticks] == [
        (1, 4), (2, 3), (2, 3),
    ]  # fmt: skip
    # time-averaged partial nodes: without (4 + 3 + 3) / 3; with the mean of
    # (before + after) / 2 per round: (3 + 3.5 + 2.5) / 3 = 3
    assert result.partial_without == pytest.approx(10 / 3)
    assert result.partial_with == pytest.approx(3.0)
    assert result.partial_reduction_pct == pytest.approx(-10.0)
    # free nodes likewise: without (1 + 2 + 2) / 3; with 02:00 starting where 01:00
    # ended (free 2, partial 3): ((1 + 2) / 2 + (1 + 2) / 2 + (2 + 3) / 2) / 3 = 11 / 6
    assert (t3.before.free_nodes, t3.before.partial_nodes) == (2, 3)
    assert result.free_without == pytest.approx(5 / 3)
    assert result.free_with == pytest.approx(11 / 6)
    # 5 GPUs moved in 3 moves; a move pauses GPUs x (80 GiB x GPUs at 100 Gbit/s + 60 s)
    gib_bits = 8 * 1024**3 / 1e9
    pause = sum(g * (80 * g * gib_bits / 100 + 60) for g in (2, 1, 2))
    assert (result.migration.moves, result.migration.gpus_moved) == (3, 5.0)
    assert result.migration.pause_gpu_hours == pytest.approx(pause / 3600)
    assert result.started == (1, 1)
    final = dict(result.final.select("alloc_id", "node_id").iter_rows())
    assert final == {"a1": "n3", "a3": "n3", "a4": "n4", "replay/r1": "n4"}


# 8-GPU nodes a, b, c: x a(4), y b(4), z c(4, ends 02:00). r1 (8 GPUs, 1 h) arrives
# at 00:30. The 00:00 round moves x to b and frees a, so r1 starts on arrival;
# without compaction it waits for z to end at 02:00: it starts 1.5 h earlier.
def test_a_freed_node_starts_a_queued_request_earlier() -> None:
    nodes = make_nodes(("a", 8, "s"), ("b", 8, "s"), ("c", 8, "s"))
    allocations = make_allocations(
        ("x", "a", 4), ("y", "b", 4), ("z", "c", 4, T0 + 2 * H)
    ).with_columns(pl.lit(T0 - H).alias("start_time"))
    requests = pl.DataFrame(
        {"request_id": ["r1"], "submit_time": [T0 + H / 2], "gpus": [8.0], "cpus": [1.0],
         "duration_s": [3600.0]},
        schema_overrides={"submit_time": pl.Datetime("us")},
    )  # fmt: skip
    result = over(nodes, allocations, requests, 3, moves_per_hour=8, policy="best-fit")
    checked(result, nodes, 8)
    assert moves(result.ticks[0]) == [("x", "a", "b")]
    assert result.earlier["requests"] == 1
    assert result.earlier["hours_total"] == pytest.approx(1.5)
    assert result.earlier["only_with_compaction"] == 0
    assert [t.without.queued for t in result.ticks] == [0, 1, 0]
    assert [t.before.queued for t in result.ticks] == [0, 0, 0]


# ------------------------------------------------------------------ the cut


def _move(step: int, alloc: str, source: str, destination: str, gpus: float) -> Move:
    return Move(step, alloc, source, destination, gpus, 1.0, None, 0)


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        (0, (0, "budget")),
        (1, (0, "budget")),  # e1 alone leaves n1 holding e2: paid for nothing
        (3, (2, "node")),  # n1 is empty after e1 and e2
        (4, (2, "node")),
        (7, (3, "whole")),
    ],
)
def test_the_prefix_ends_where_a_node_is_emptied(budget: float, expected: tuple[int, str]) -> None:
    nodes = make_nodes(("n1", 8), ("n2", 8), ("n3", 8))
    allocations = make_allocations(("e1", "n1", 1), ("e2", "n1", 2), ("f", "n2", 4), ("g", "n3", 4))
    ledger = [_move(1, "e1", "n1", "n2", 1), _move(2, "e2", "n1", "n2", 2),
              _move(3, "g", "n3", "n2", 4)]  # fmt: skip
    # after e1, e2 n2 holds 7 GPUs; g would need 4 (a made-up ledger: only the cut counts)
    assert affordable_prefix(ledger, budget, allocations, nodes) == expected


def test_a_move_that_fills_a_node_is_a_boundary() -> None:
    nodes = make_nodes(("n1", 8), ("n2", 8))
    allocations = make_allocations(("e1", "n1", 2), ("e2", "n1", 2), ("f", "n2", 6))
    ledger = [_move(1, "e1", "n1", "n2", 2), _move(2, "e2", "n1", "n2", 2)]
    assert affordable_prefix(ledger, 2, allocations, nodes) == (1, "node")


# ------------------------------------------------------------------ properties


@pytest.mark.parametrize("seed", range(6))
def test_one_round_without_arrivals_equals_the_one_instant_search(seed: int) -> None:
    import random

    rng = random.Random(seed)
    node_rows = [(f"n{i}", 8, f"s{i % 2}") for i in range(rng.randint(3, 8))]
    alloc_rows: list[tuple[Any, ...]] = []
    for node_id, gpus, _ in node_rows:
        left = gpus
        for j in range(rng.randint(0, 3)):
            size = rng.choice([1, 2, 2, 4])
            if size <= left:
                left -= size
                alloc_rows.append((f"{node_id}_{j}", node_id, size, None, None, 4.0))
    nodes = make_nodes(*node_rows)
    allocations = make_allocations(*(alloc_rows or [("z", "n0", 1)])).with_columns(
        pl.lit(T0 - H).alias("start_time")
    )
    no_requests = pl.DataFrame(schema=REQUEST_SCHEMA)
    result = over(nodes, allocations, no_requests, 1, moves_per_hour=1000)
    checked(result, nodes, 1000)
    one = compact(nodes, allocations, T0, (), CompactionOptions())
    (tick,) = result.ticks
    assert moves(tick) == [(m.alloc_id, m.source, m.destination) for m in one.moves]
    assert (tick.after.free_nodes, tick.after.partial_nodes) == (
        one.after.free_nodes, one.after.partial_nodes,
    )  # fmt: skip
    assert (tick.before.free_nodes, tick.before.partial_nodes) == (
        one.before.free_nodes, one.before.partial_nodes,
    )  # fmt: skip


@st.composite
def arrivals(
    draw: st.DrawFn,
    most: int = 6,
    gpus: tuple[float, ...] = (1, 2, 4, 8),
    lengths: tuple[float | None, ...] = (1800.0, 3600.0, 7200.0),
) -> pl.DataFrame:
    """Up to ``most`` requests within the first three hours, of ``gpus`` and ``lengths``."""
    rows = []
    for i in range(draw(st.integers(0, most))):
        rows.append((
            f"q{i}", T0 + timedelta(minutes=draw(st.integers(0, 179))),
            float(draw(st.sampled_from(gpus))), 1.0, draw(st.sampled_from(lengths)),
        ))  # fmt: skip
    return pl.DataFrame(rows, schema=REQUEST_SCHEMA, orient="row")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets(max_nodes=6), arrivals(), st.sampled_from([0, 1, 2, 3, 5, 8]),
       st.sampled_from(["fifo", "backfill"]))  # fmt: skip
def test_the_budget_is_never_exceeded_and_every_applied_move_replays(
    fleet, requests, budget, queue
) -> None:
    nodes, allocations = fleet
    assume(nodes.filter(pl.col("health") == "healthy")["gpus"].sum() > 0)  # else: a usage error
    allocations = allocations.with_columns(pl.lit(T0 - H).alias("start_time"))
    result = compact_over_time(
        nodes, allocations, requests, T0, T0 + 3 * H, (), CompactionOptions(),
        OverTimeOptions(every_s=1800, moves_per_hour=budget, budget_unit="gpus", queue=queue,
                        policy="best-fit"),
        keep_frames=True,
    )  # fmt: skip
    checked(result, nodes, budget / 2)
    assert len(result.ticks) == 6


def test_options_out_of_range_are_refused() -> None:
    for options in (OverTimeOptions(every_s=0), OverTimeOptions(moves_per_hour=-1),
                    OverTimeOptions(policy="nearest"), OverTimeOptions(queue="lifo")):  # fmt: skip
        with pytest.raises(UsageError):
            options.check()


# ------------------------------------------------------------------ command line


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def overtime_db(tmp_path):
    db = tmp_path / "store.duckdb"
    result = _invoke("ingest", str(DATA), "--db", str(db))
    assert result.exit_code == 0, result.output
    return db


def test_cli_json_over_time_save_as_and_report(overtime_db) -> None:
    db = str(overtime_db)
    args = ("whatif", "compaction", "--db", db, "--at", "2026-01-01T03:00:00", "--over", "3h",
            "--every", "1h", "--moves-per-hour", "2")  # fmt: skip
    result = _invoke(*args, "--json", "--save-as", "week")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["schema"] == "fleetaudit.compaction/1"
    o = doc["over_time"]
    assert [t["moves"] for t in o["ticks"]] == [1, 1, 1]
    assert [t["after"]["partial_nodes"] for t in o["ticks"]] == [2, 3, 2]
    assert o["partial_nodes"]["reduction_pct"] == -10.0
    assert o["partial_nodes"]["paper_reduction_pct"] == -20.2
    assert [(m["alloc_id"], m["to"]) for m in o["moves"]] == [
        ("a1", "n2"), ("replay/r1", "n4"), ("a1", "n3"),
    ]  # fmt: skip
    assert o["migration"]["gpus_moved"] == 5
    state = _invoke("state", "--db", db, "--scenario", "week", "--at", "2026-01-01T03:00:00",
                    "--out", str(overtime_db.parent / "week.csv"))  # fmt: skip
    assert state.exit_code == 0, state.output
    week = pl.read_csv(overtime_db.parent / "week.csv")
    assert dict(week.select("node_id", "gpus_used").iter_rows()) == {
        "n1": 0, "n2": 0, "n3": 4, "n4": 7, "n5": 0,
    }  # fmt: skip
    text = _invoke(*args)
    assert text.exit_code == 0
    assert "-20.2%" in text.output and "-10.0%" in text.output
    report = _invoke("report", "--db", db, "--at", "2026-01-01T03:00:00", "--since", "3h")
    assert report.exit_code == 0, report.output
    assert "over time, 2026-01-01T00:00:00" in report.output
    # a later one-instant run does not hide the stored over-time run
    _invoke("whatif", "compaction", "--db", db, "--json")
    report = _invoke("report", "--db", db, "--at", "2026-01-01T03:00:00", "--since", "3h")
    assert "over time, 2026-01-01T00:00:00" in report.output
    assert "-10.0%" in report.output


def test_cli_budget_as_a_share_of_the_fleets_gpus_and_a_sweep(overtime_db) -> None:
    # The fleet holds 5 x 8 = 40 GPUs: 5% an hour is the 2 GPUs of the hand-worked run.
    db = str(overtime_db)
    args = ("whatif", "compaction", "--db", db, "--at", "2026-01-01T03:00:00", "--over", "3h",
            "--every", "1h", "--queue", "fifo")  # fmt: skip
    count = json.loads(_invoke(*args, "--moves-per-hour", "2", "--json").output)["over_time"]
    share = json.loads(_invoke(*args, "--moves-per-hour", "5%", "--json").output)["over_time"]
    assert share["budget"] == {"given": "5%", "gpus_per_hour": 2.0, "pct_of_gpus_per_hour": 5.0}
    assert count["budget"] == {"given": "2", "gpus_per_hour": 2.0, "pct_of_gpus_per_hour": 5.0}
    assert share["moves_per_hour"] == 2.0 and share["fleet_gpus"] == 40
    assert share["ticks"] == count["ticks"] and share["moves"] == count["moves"]
    assert share["sweep"] is None
    # the baseline beside the record, in every over-time document
    calibration = share["calibration"]
    assert calibration["discipline"] == "fifo" and calibration["chosen_by"] == "--queue"
    assert calibration["record"]["arrived"] == share["requests"]["arrived"]
    # a sweep replays the budgets on one baseline and reports the one nearest the target
    # in full: 2 GPUs an hour gives the hand-worked -10%; 40 an hour (100%) more
    swept = json.loads(_invoke(*args, "--sweep-budget", "100%,2", "--target-reduction", "-10",
                               "--json").output)["over_time"]  # fmt: skip
    sweep = swept["sweep"]
    assert sweep["nearest"] == "2" and sweep["target_reduction_pct"] == -10.0
    assert [b["given"] for b in sweep["budgets"]] == ["100%", "2"]
    assert sweep["budgets"][1]["partial_nodes"]["reduction_pct"] == -10.0
    assert sweep["budgets"][0]["gpus_per_hour"] == 40.0
    assert swept["ticks"] == count["ticks"]  # the nearest, reported in full
    assert swept["requests"]["started"]["without"] == count["requests"]["started"]["without"]
    text = _invoke(*args, "--sweep-budget", "100%,2", "--target-reduction", "-10")
    assert "budgets replayed on the one baseline" in text.output
    assert "the budget nearest the target: 2" in text.output


def test_cli_report_labels_a_one_instant_run(overtime_db) -> None:
    db = str(overtime_db)
    assert _invoke("whatif", "compaction", "--db", db, "--json").exit_code == 0
    report = _invoke("report", "--db", db, "--at", "2026-01-01T03:00:00", "--since", "3h")
    assert "one instant at " in report.output and "over time" not in report.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--over", "0s"), "--over"),
        (("--over", "3h", "--every", "0s"), "--every"),
        (("--over", "3h", "--moves-per-hour", "-1"), "--moves-per-hour"),
        (("--over", "3h", "--moves-per-hour", "5x"), "--moves-per-hour: give GPUs per hour"),
        (("--over", "3h", "--moves-per-hour", "150%"), "--moves-per-hour"),
        (("--over", "3h", "--sweep-budget", ","), "--sweep-budget"),
        (("--over", "3h", "--sweep-budget", "0.1%,x"), "--sweep-budget"),
        (("--over", "3h", "--queue", "lifo"), "--queue"),
        (("--over", "3h", "--policy", "nearest"), "--policy"),
    ],
)
def test_cli_over_time_errors_are_one_line_and_exit_2(overtime_db, args, message) -> None:
    result = CliRunner().invoke(app, ["whatif", "compaction", "--db", str(overtime_db), *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets(max_nodes=7), st.sampled_from([0, 0.5, 1, 2, 3, 5, 8]))
def test_a_search_stopped_past_the_budget_has_the_full_searchs_prefix(fleet, budget) -> None:
    nodes, allocations = fleet
    full = compact(nodes, allocations, T, (), CompactionOptions(partition_nodes=3))
    stopped = compact(
        nodes, allocations, T, (), CompactionOptions(partition_nodes=3, stop_after_gpus=budget)
    )
    assert len(stopped.moves) <= len(full.moves)
    n_full, _ = affordable_prefix(full.moves, budget, allocations, nodes)
    n_stopped, _ = affordable_prefix(stopped.moves, budget, allocations, nodes)
    assert n_full == n_stopped
    assert [m.as_json() for m in full.moves[:n_full]] == [
        m.as_json() for m in stopped.moves[:n_stopped]
    ]


def test_only_an_arrival_linked_to_its_allocation_has_a_recorded_node() -> None:
    nodes, allocations, requests = read("nodes"), read("allocations"), read("requests")
    assert over(nodes, allocations, requests, 3, moves_per_hour=2).recorded_node == 1
    unlinked = requests.with_columns(pl.lit("x1").alias("request_id"))
    result = over(nodes, allocations, unlinked, 3, moves_per_hour=2)
    assert result.recorded_node == 0
    # best-fit puts x1 on n4 (2 GPUs free, the fewest) instead of n1
    assert dict(result.final.select("alloc_id", "node_id").iter_rows())["replay/x1"] == "n4"


# a, y: 2-GPU nodes. m (1 GPU) on a. On y: p 0.75 and c 0.25 share GPU 0, b 0.5 sits
# on GPU 1 (first-fit-decreasing). p ends at 00:30: c and b are then spread over both
# GPUs, while the search packs them on one. At 01:00 it moves m to y's other GPU; the
# replay lays y's shares out the same way first (else no whole GPU is free), so the
# move is applied and a is free.
def test_a_destinations_shares_are_packed_before_a_whole_gpu_moves_in() -> None:
    nodes = make_nodes(("a", 2, "s"), ("y", 2, "s"))
    allocations = make_allocations(
        ("m", "a", 1), ("p", "y", 0.75, T0 + H / 2), ("b", "y", 0.5), ("c", "y", 0.25)
    ).with_columns(pl.lit(T0 - H).alias("start_time"))
    no_requests = pl.DataFrame(schema=REQUEST_SCHEMA)
    result = over(nodes, allocations, no_requests, 2, moves_per_hour=8)
    checked(result, nodes, 8)
    tick = result.ticks[1]
    assert (moves(tick), tick.cut) == ([("m", "a", "y")], "whole")
    assert (tick.after.free_nodes, tick.after.partial_nodes) == (1, 0)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets(max_nodes=6), arrivals(), st.sampled_from([1, 2, 5, 8]),
       st.sampled_from(["fifo", "backfill"]))  # fmt: skip
def test_a_rounds_state_after_its_moves_is_the_replays_own(fleet, requests, budget, queue) -> None:
    """The state observed after a round's moves (the round's frame with the moved rows on
    their destinations) is the frame the replay's view builds after them, row for row."""
    nodes, allocations = fleet
    assume(nodes.filter(pl.col("health") == "healthy")["gpus"].sum() > 0)
    allocations = allocations.with_columns(pl.lit(T0 - H).alias("start_time"))
    side = cot._side
    seen = []

    def checked_side(nodes, view, frame, at, shapes):  # type: ignore[no-untyped-def]
        rebuilt = view.allocations(epoch_us(at))
        assert frame.equals(rebuilt), (frame, rebuilt)
        seen.append(frame)
        return side(nodes, view, frame, at, shapes)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cot, "_side", checked_side)
        result = compact_over_time(
            nodes, allocations, requests, T0, T0 + 3 * H, (make_shape(None, 1),),
            CompactionOptions(),
            OverTimeOptions(every_s=1800, moves_per_hour=budget, budget_unit="gpus", queue=queue,
                        policy="best-fit"),
        )  # fmt: skip
    applied = sum(1 for t in result.ticks if t.moves)
    assert len(seen) == 2 * len(result.ticks) + applied  # without, before, and after moves


def test_moved_puts_each_moved_row_on_its_last_destination() -> None:
    frame = pl.DataFrame({"alloc_id": ["a1", "a2", "a3"], "node_id": ["n1", "n1", "n2"]})
    got = cot.moved(frame, [_move(1, "a1", "n1", "n2", 1.0), _move(2, "a3", "n2", "n3", 1.0),
                            _move(3, "a1", "n2", "n4", 1.0)])  # fmt: skip
    assert got["node_id"].to_list() == ["n4", "n1", "n3"]
    assert cot.moved(frame, []) is frame


# ------------------------------------------------------------------ the view's per-node state


def _scan_live(view: Any) -> tuple[list[int], list[int]]:
    """The live records and groups, by a scan of everything the replay started (the rule
    the view applied before it kept per-node state)."""
    t = view._t
    records = [i for i, rec in enumerate(view._records) if t is None or rec.end_us > t]
    groups = []
    for g in range(len(view._groups)):
        if g >= view._groups_seen or t is None or view._group_end[g] > t:
            groups.append(g)
    return records, groups


def _scan_gpu_use(view: Any) -> tuple[int, int]:
    """:meth:`ReplayView.gpu_use` by a full scan of the live work."""
    from fleetaudit.model.capacity import SHARE_UNITS as U
    from fleetaudit.model.capacity import first_fit_decreasing

    fleet, state, w = view._run.fleet, view._run.state, view._run.workload
    records, groups = _scan_live(view)
    shares: dict[int, list[int]] = {}
    whole: dict[int, int] = {}
    for i in records:
        rec = view._records[i]
        for units in rec.units:
            if units < U:
                shares.setdefault(rec.node, []).append(units)
            else:
                whole[rec.node] = whole.get(rec.node, 0) + 1
    for g in groups:
        r, pods = view._groups[g]
        for _, n, used in pods:
            if w.count[r] and w.share[r] < U:
                shares.setdefault(n, []).append(int(w.share[r]))
            elif w.count[r]:
                whole[n] = whole.get(n, 0) + len(used)
    used_gpus = fleet.gpus - (state.free == U).sum(axis=1)
    for n, node_shares in shares.items():
        used_gpus[n] = whole.get(n, 0) + len(first_fit_decreasing(node_shares))
    has = fleet.gpus > 0
    return int((has & (used_gpus == 0)).sum()), int(
        (has & (used_gpus > 0) & (used_gpus < fleet.gpus)).sum()
    )


def _scan_frame(view: Any, t: int) -> pl.DataFrame:
    """:meth:`ReplayView.allocations` row by row from the replay's records and groups."""
    from fleetaudit.model.capacity import SHARE_UNITS as U

    fleet, w = view._run.fleet, view._run.workload
    rows = []
    for rec in view._records:
        if rec.start_us <= t < rec.end_us:
            rows.append((rec.alloc_id, rec.job_id or rec.alloc_id, fleet.node_ids[rec.node],
                         sum(rec.units) / U, rec.cpu / U, rec.memory / U, rec.start_us,
                         None if rec.end_us == cot.placement.replay._NEVER else rec.end_us))  # fmt: skip
    for g, (r, pods) in enumerate(view._groups):
        begin, end = view._group_start[g], view._group_end[g]
        if end <= t:
            continue
        rid = w.request_ids[r]
        for pod, n, _ in pods:
            rows.append((f"replay/{rid}" if w.pods[r] == 1 else f"replay/{rid}/{pod}", rid,
                         fleet.node_ids[n], int(w.share[r]) * int(w.count[r]) / U,
                         int(w.cpu[r]) / U, int(w.memory[r]) / U, begin,
                         None if end == cot.placement.replay._NEVER else end))  # fmt: skip
    return pl.DataFrame(
        rows,
        schema={"alloc_id": pl.String, "job_id": pl.String, "node_id": pl.String,
                "gpus": pl.Float64, "cpus": pl.Float64, "memory_gib": pl.Float64,
                "start_time": pl.Int64, "end_time": pl.Int64},
        orient="row",
    ).with_columns(
        pl.col("start_time").cast(pl.Datetime("us")),
        pl.col("end_time").cast(pl.Datetime("us")),
        pl.lit("high").alias("priority"),
    )  # fmt: skip


def mixed_arrivals() -> st.SearchStrategy[pl.DataFrame]:
    """Arrivals of shares, whole GPUs and two-pod gangs (16 GPUs: two pods of 8)."""
    return arrivals(10, (0.25, 0.5, 1, 2, 4, 16), (1800.0, 3600.0, 7200.0, None))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets(max_nodes=6), mixed_arrivals(), st.sampled_from([1, 2, 5, 8]),
       st.sampled_from(["fifo", "backfill"]))  # fmt: skip
def test_the_views_per_node_state_equals_a_full_scan(fleet, requests, budget, queue) -> None:
    """At every observation (each round, before and after its moves, and without
    compaction) the view's frame, its free and partial node counts and each node's
    live work, kept up to date as work starts, ends and moves, equal a scan of all the
    work the replay started."""
    nodes, allocations = fleet
    assume(nodes.filter(pl.col("health") == "healthy")["gpus"].sum() > 0)
    allocations = allocations.with_columns(pl.lit(T0 - H).alias("start_time"))
    side = cot._side
    checks = [0]

    def checked_side(nodes, view, frame, at, shapes):  # type: ignore[no-untyped-def]
        t = epoch_us(at)
        assert view.gpu_use() == _scan_gpu_use(view)
        assert view.allocations(t).equals(_scan_frame(view, t))
        records, groups = _scan_live(view)
        for n in range(len(view._run.fleet.node_ids)):
            on = [i for i in records if view._records[i].node == n]
            held = [g for g in groups if any(m == n for _, m, _ in view._groups[g][1])]
            assert view._on_node(n) == (on, held)
        checks[0] += 1
        return side(nodes, view, frame, at, shapes)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cot, "_side", checked_side)
        result = compact_over_time(
            nodes, allocations, requests, T0, T0 + 3 * H, (make_shape(None, 1),),
            CompactionOptions(),
            OverTimeOptions(every_s=1800, moves_per_hour=budget, budget_unit="gpus", queue=queue,
                        policy="best-fit"),
        )  # fmt: skip
    assert checks[0] == 2 * len(result.ticks) + sum(1 for t in result.ticks if t.moves)
