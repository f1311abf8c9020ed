"""Health over time: intervals from every source, read by every engine (issue 28).

The fixture ``tests/data/health/`` is three 8-GPU H20 nodes in one switch over
2026-05-01 00:00-12:00, worked by hand:

- n1 runs j1 (4 GPUs, high) all day and is drained 04:00-08:00 (a drain in the
  middle of a running job): its 4 other GPUs are unhealthy for 4 h (16 GPU-h), j1
  still counts as allocated.
- n2 runs j2 (8 GPUs, low, checkpoints hourly) until 06:02, and flaps: down
  06:00-07:00 (kubernetes) and 06:05-07:10 (slurm, another reason: overlapping
  sources, one outage 06:00-07:10), 08:00-08:30, and from 10:00 on (open: it dates
  the recorded health ``down``, so n2 is healthy before). Unhealthy: 06:02-07:10
  8 x 68 min, 08:00-08:30 4, 10:00-12:00 16: 29 1/15 GPU-h. Three failures: a
  quarantine candidate at the default threshold of 3. j2 ended 2 min after its node
  went down: interrupted, losing 8 GPUs x 2 min since its last checkpoint.
- n3 runs j3 (2 GPUs, high) and loses GPU 5 to an XID 02:00-05:00 (one of 8 GPUs):
  1 GPU unhealthy for 3 h.

Physical: installed 288, unhealthy 16 + 29 1/15 + 3 = 48 1/15, healthy 239 14/15,
allocated 48 + 48 4/15 + 24 = 120 4/15 (high 72).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from fleetaudit import api
from fleetaudit.api.report_api import ReportOptions, build_report
from fleetaudit.cli import app
from fleetaudit.core.times import epoch_us
from fleetaudit.model import denominators as den
from fleetaudit.model import occupancy
from fleetaudit.model.capacity import (
    FOREVER_US,
    gpus_out_at,
    health_of,
    health_pieces,
    no_health,
    whole_window_health,
)
from fleetaudit.model.history import evaluate_history, evaluate_history_naive
from fleetaudit.model.shapes import evaluate, make_shape
from fleetaudit.whatif import compaction
from fleetaudit.whatif.harvest import HarvestOptions, replay_harvest

from .conftest import DATA, NODE_SCHEMA, REPO

FIXTURE = DATA / "health"
T0 = datetime(2026, 5, 1)
runner = CliRunner()


def h(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("health") / "health.duckdb"
    result = runner.invoke(app, ["ingest", str(FIXTURE), "--db", str(path), "--quiet"])
    assert result.exit_code == 0, result.output
    return path


@pytest.fixture(scope="module")
def frames(db: Path) -> tuple[pl.DataFrame, pl.DataFrame, Any]:
    """The whole-window nodes, the allocations and the health, as the commands load them."""
    with api.reading(api.StoreOptions(db)) as store:
        nodes, allocations = api.load_frames(store, h(0), h(24))
        nodes, health = api.load_health(store, nodes, h(0), h(24))
    return nodes, allocations, health


def test_intervals_merge_into_spans_and_date_the_recorded_health(frames: Any) -> None:
    nodes, _, health = frames
    spans = [
        (n, g, (s - epoch_us(T0)) / 36e8, None if e >= FOREVER_US else (e - epoch_us(T0)) / 36e8)
        for n, g, s, e in health.spans.rows()
    ]
    assert spans == [
        ("n1", None, 4.0, 8.0),
        # two sources' overlapping outages are one span: 06:00-07:10
        ("n2", None, 6.0, 7 + 10 / 60),
        ("n2", None, 8.0, 8.5),
        ("n2", None, 10.0, None),
        ("n3", 5, 2.0, 5.0),
    ]
    # the open interval dates n2's recorded "down": healthy before it began
    assert health.dated == ("n2",)
    assert nodes.sort("node_id")["health"].to_list() == ["healthy", "healthy", "healthy"]
    out = gpus_out_at(health, epoch_us(h(6.5))).sort("node_id").rows()
    assert out == [("n1", 8, True), ("n2", 8, True)]
    assert gpus_out_at(health, epoch_us(h(3))).rows() == [("n3", 1, False)]


def test_pieces_keep_every_moment_once_under_its_leading_interval(frames: Any) -> None:
    _, _, health = frames
    pieces = health_pieces(health, epoch_us(h(0)), epoch_us(h(12)))
    n2 = [
        ((s - epoch_us(T0)) / 6e7, (e - epoch_us(T0)) / 6e7, reason, source)
        for _, _, s, e, _, reason, source in pieces.filter(pl.col("node_id") == "n2").rows()
    ]
    # minutes: the kubernetes outage leads (it began first), the slurm one ends it
    assert n2 == [
        (360.0, 420.0, "node not ready", "kubernetes:condition"),
        (420.0, 430.0, "node lost", "slurm:sacctmgr"),
        (480.0, 510.0, "node not ready", "kubernetes:condition"),
        (600.0, 720.0, "node not ready", "kubernetes:condition"),
    ]


def test_physical_figures_worked_by_hand(frames: Any) -> None:
    nodes, allocations, health = frames
    timelines = den.window_timelines(nodes, allocations, h(0), h(12), h(12), health)
    row = den.physical(nodes, allocations, h(0), h(12), timelines).row(0, named=True)
    assert row["installed_gpu_hours"] == 288
    assert row["healthy_gpu_hours"] == pytest.approx(3599 / 15)
    assert row["allocated_gpu_hours"] == pytest.approx(1804 / 15)
    assert row["allocated_high_gpu_hours"] == pytest.approx(72)
    # without intervals n2's recorded "down" would hold all day, and j2 on it not count
    recorded = nodes.with_columns(
        pl.when(pl.col("node_id") == "n2").then(pl.lit("down")).otherwise("health").alias("health")
    )
    plain = den.physical(recorded, allocations, h(0), h(12)).row(0, named=True)
    assert (plain["healthy_gpu_hours"], plain["allocated_gpu_hours"]) == (192, 72)


def test_schedulable_sweep_reads_health_at_each_instant(frames: Any) -> None:
    nodes, allocations, health = frames
    instants = den.window_instants(h(12), timedelta(hours=12), timedelta(hours=1))
    shape = make_shape("H20", 4, locality="node")
    sched = den.schedulable(nodes, allocations, [(shape, 1)], instants, timedelta(hours=12),
                            timelines=den.window_timelines(nodes, allocations, h(0), h(12),
                                                           h(12), health))  # fmt: skip
    steps = sched.steps.sort("instant")
    # 05:00 n1 drained (4 free GPUs out); 07:00 n2 down as well (slurm, until 07:10)
    assert steps["unhealthy"].to_list() == [0, 0, 1, 1, 5, 4, 4, 12, 8, 0, 8, 8, 8]
    for row in steps.iter_rows(named=True):
        assert row["installed"] == (
            row["unhealthy"] + row["allocated_high"] + row["allocated_low"] + row["idle"]
        )
    # the work keeps counting while its node is drained (j1 ends at 12:00)
    assert steps["allocated_high"].to_list() == [6] * 12 + [2]
    assert steps["usable"].to_list()[4] == 4  # 04:00: n3 only (n1 drained, n2 full)


def test_state_at_seven_worked_by_hand(db: Path) -> None:
    state = api.node_state(api.StoreOptions(db), at=h(7)).state.sort("node_id")
    assert state.select(
        "node_id", "gpus_used", "gpus_out", "gpus_unhealthy", "health_at", "free_gpus"
    ).rows() == [
        ("n1", 4, 8, 4, "drain", 0),
        ("n2", 0, 8, 8, "down", 0),
        ("n3", 2, 0, 0, "healthy", 6),
    ]


def test_shape_ledger_at_three_with_a_window_worked_by_hand(frames: Any) -> None:
    nodes, allocations, health = frames
    state = occupancy.node_state(nodes, allocations, h(3), timedelta(hours=2), health)
    e = evaluate(state, make_shape("H20", 4, duration_s=7200))
    # n1's drain begins within the window; n3's failed GPU is one of its free ones
    assert e.instances == 1
    assert e.ledger.as_json() == {
        "installed": 24, "unhealthy": 1, "allocated_high": 6, "allocated_low": 8, "idle": 9,
        "usable": 4, "stranded": {"interval": 4, "fragment": 1, "cpu_memory": 0, "topology": 0},
    }  # fmt: skip


def test_history_worked_by_hand_and_equal_to_the_naive_evaluator(frames: Any) -> None:
    nodes, allocations, health = frames
    shape = make_shape("H20", 4, locality="node")
    args = (nodes, allocations, shape, h(12), timedelta(hours=12), timedelta(hours=1))
    swept = evaluate_history(*args, health=health)
    assert swept.series["instances"].to_list() == [2, 2, 2, 2, 1, 1, 1, 1, 2, 4, 2, 2, 3]
    assert swept.series.equals(evaluate_history_naive(*args, health=health).series)


def test_compaction_takes_drained_nodes_out_of_scope(frames: Any) -> None:
    nodes, allocations, health = frames
    # 05:00: n1 drained, n2 full: j3 has nowhere to go (without health it would go to n1)
    standing = occupancy.nodes_at(nodes, allocations, h(5), health)
    assert compaction.compact(standing, allocations, h(5)).moves == ()
    assert len(compaction.compact(nodes, allocations, h(5)).moves) == 1
    # 03:00: n3 has 7 healthy GPUs; j3 moves to n1 and frees it
    standing = occupancy.nodes_at(nodes, allocations, h(3), health)
    assert standing.sort("node_id")["gpus"].to_list() == [8, 8, 7]
    result = compaction.compact(standing, allocations, h(3))
    assert [(m.alloc_id, m.source, m.destination) for m in result.moves] == [("j3", "n3", "n1")]
    assert result.after.free_nodes == 1


def test_report_failures_section_worked_by_hand(db: Path, tmp_path: Path) -> None:
    result = build_report(
        api.StoreOptions(db),
        ReportOptions(at=h(12), since=timedelta(hours=12), step=timedelta(hours=1)),
    )
    physical = result.fleet["physical"]
    assert physical["installed_gpu_hours"] - physical["healthy_gpu_hours"] == pytest.approx(
        721 / 15
    )
    f = result.failures
    fleet = f["fleet"]
    assert fleet["unhealthy_gpu_hours"] == pytest.approx(721 / 15)
    assert fleet["recorded_gpu_hours"] == 0
    assert fleet["by_state"] == pytest.approx({"drain": 16, "down": 29 + 1 / 15, "unhealthy": 3})
    reasons = {(r["state"], r["reason"]): r["gpu_hours"] for r in fleet["by_reason"]}
    assert reasons == pytest.approx(
        {("down", "node not ready"): 416 / 15, ("drain", "maintenance"): 16,
         ("unhealthy", "xid 79"): 3, ("down", "node lost"): 4 / 3}
    )  # fmt: skip
    assert (fleet["failures"], fleet["failed_nodes"]) == (5, 3)
    assert fleet["in_service_node_hours"] == pytest.approx(8 + 25 / 3 + 12)
    assert fleet["mtbf_hours"] == pytest.approx((8 + 25 / 3 + 12) / 5)
    assert f["quarantine"] == ["n2"]
    assert [(n["node_id"], n["failures"]) for n in f["nodes"]] == [("n2", 3), ("n1", 1), ("n3", 1)]
    assert fleet["interrupted"] == pytest.approx(
        {"allocations": 1, "lost_gpu_hours": 8 * 120 / 3600, "without_checkpoint": 0,
         "lost_gpu_hours_without_checkpoint": 0.0}
    )  # fmt: skip
    assert f["sources"] == ["dcgm:xid", "kubernetes:condition", "slurm:sacctmgr"]
    # the chart's 48 buckets of 15 min: n3's GPU 5 from 02:00 (1 x 0.25 h); 06:00-06:15
    # n2 down from 06:02 (8 x 13 min) and n1's drain (4 x 0.25 h); 07:00-07:15 n2 down to
    # 07:10 (8 x 10 min); 11:45 n2 down (8 x 0.25 h); each state's buckets add to by_state
    over = f["over_time"]
    assert over["bucket_s"] == 900.0
    buckets = {b["start"][11:16]: b["by_state"] for b in over["buckets"]}
    assert buckets["02:00"] == pytest.approx({"unhealthy": 0.25})
    assert buckets["06:00"] == pytest.approx({"down": 8 * 13 / 60, "drain": 1.0})
    assert buckets["07:00"] == pytest.approx({"down": 8 * 10 / 60, "drain": 1.0})
    assert buckets["11:45"] == pytest.approx({"down": 2.0})
    assert "01:45" not in buckets and "09:45" not in buckets  # nothing unhealthy then
    states = {s for b in buckets.values() for s in b}
    assert {s: sum(b.get(s, 0) for b in buckets.values()) for s in states} == pytest.approx(
        fleet["by_state"]
    )
    # the JSON document validates, and the section is the report's
    path = tmp_path / "report.json"
    out = runner.invoke(
        app, ["report", "--db", str(db), "--at", "2026-05-01T12:00:00Z", "--since", "12h",
              "--step", "1h", "--json", str(path), "--quarantine", "4"],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    document = json.loads(path.read_text(encoding="utf-8"))
    schema = json.loads((REPO / "docs/schemas/report.schema.json").read_text(encoding="utf-8"))
    assert not list(Draft202012Validator(schema).iter_errors(document))
    assert document["failures"]["quarantine"] == []
    assert document["failures"]["over_time"]["buckets"][0]["start"] == "2026-05-01T02:00:00Z"


def test_report_terminal_and_html_show_the_failures(db: Path, tmp_path: Path) -> None:
    html = tmp_path / "report.html"
    out = runner.invoke(
        app, ["report", "--db", str(db), "--at", "2026-05-01T12:00:00Z", "--since", "12h",
              "--step", "1h", "--html", str(html)],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "what failures cost" in out.output
    assert "n2 *" in out.output  # a quarantine candidate
    page = html.read_text(encoding="utf-8")
    assert 'id="failures-section"' in page
    assert 'aria-label="unhealthy GPUs over time by state"' in page
    assert "xid 79" in page


def test_harvesting_takes_out_of_service_gpus_back() -> None:
    nodes = pl.DataFrame(
        {"node_id": ["n1"], "gpu_model": ["H20"], "gpus": [8], "cpus": [64.0]}
    )
    allocations = pl.DataFrame(
        {"alloc_id": ["lp"], "node_id": ["n1"], "gpus": [8.0], "cpus": [8.0],
         "priority": ["low"], "start_time": [h(0)], "end_time": [h(4)],
         "checkpoint_interval_s": [3600.0]}
    )  # fmt: skip
    events = pl.DataFrame(
        {"node_id": ["n1"], "gpu_index": [None], "start_time": [h(2.5)],
         "end_time": [h(3.5)], "state": ["drain"]}, schema_overrides={"gpu_index": pl.Int64},
    )  # fmt: skip
    sleeps = pl.DataFrame(schema={"alloc_id": pl.String, "sleep_start": pl.Datetime("us"),
                                  "sleep_end": pl.Datetime("us")})  # fmt: skip
    health = health_of(nodes, events)
    r = replay_harvest(nodes, allocations, sleeps, HarvestOptions(), h(0), h(6), health=health)
    # evicted at 02:30 (30 min since its checkpoint lost), back at 03:30 with 2 h done,
    # finished at 05:30; 8 GPUs out of service for an hour that no work held
    assert r.preemptions == 1
    assert r.lost_gpu_hours == pytest.approx(4.0)
    assert r.jobs["finish"].to_list() == [h(5.5)]
    assert r.healthy_gpu_hours == pytest.approx(40.0)
    assert r.allocated_gpu_hours == pytest.approx(36.0)
    assert r.overcommitted == 0
    assert r.high.height == 0  # the GPUs out of service are not work


def test_an_empty_health_changes_nothing_and_no_events_leave_the_nodes_as_they_are() -> None:
    nodes = pl.DataFrame({"node_id": ["a"], "gpus": [8], "health": ["down"]})
    assert whole_window_health(nodes, health_of(nodes, None)).equals(nodes)
    assert health_of(nodes, None).empty


def _fleet(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame]:
    n = draw(st.integers(1, 4))
    nodes = pl.DataFrame(
        {
            "node_id": [f"n{i}" for i in range(n)],
            "gpu_model": ["H20"] * n,
            "gpus": [8] * n,
            "cpus": [64.0] * n,
            "memory_gib": [None] * n,
            "switch_id": [draw(st.sampled_from(["s1", "s2", None])) for _ in range(n)],
            "health": [draw(st.sampled_from(["healthy", None, "down"])) for _ in range(n)],
        },
        schema=NODE_SCHEMA,
    )
    rows = []
    for k in range(draw(st.integers(0, 8))):
        start = draw(st.integers(0, 11))
        length = draw(st.integers(1, 8))
        rows.append(
            (f"a{k}", f"n{draw(st.integers(0, n - 1))}",
             draw(st.sampled_from([0.5, 1.0, 2.0, 4.0, 8.0])), 4.0,
             draw(st.sampled_from(["high", "low"])), h(start),
             None if draw(st.booleans()) else h(start + length))
        )  # fmt: skip
    allocations = pl.DataFrame(
        rows,
        schema={"alloc_id": pl.String, "node_id": pl.String, "gpus": pl.Float64,
                "cpus": pl.Float64, "priority": pl.String, "start_time": pl.Datetime("us"),
                "end_time": pl.Datetime("us")},
        orient="row",
    ).with_columns(pl.lit(None, dtype=pl.Float64).alias("memory_gib"))  # fmt: skip
    return nodes, allocations


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_without_intervals_every_figure_is_as_before(data: st.DataObject) -> None:
    nodes, allocations = data.draw(st.composite(_fleet)())
    empty = no_health()
    at = h(data.draw(st.integers(0, 12)))
    window = timedelta(hours=data.draw(st.integers(0, 3))) or None
    plain = occupancy.node_state(nodes, allocations, at, window)
    with_health = occupancy.node_state(nodes, allocations, at, window, empty)
    assert with_health.drop("gpus_out", "gpus_unhealthy", "health_at").equals(plain)
    for shape in (make_shape("H20", 4), make_shape("H20", 0.5), make_shape("H20", 8)):
        assert evaluate(with_health, shape).ledger == evaluate(plain, shape).ledger
        args = (nodes, allocations, shape, h(12), timedelta(hours=12), timedelta(hours=1))
        assert evaluate_history(*args, health=empty).series.equals(
            evaluate_history(*args).series
        )
    timelines = den.window_timelines(nodes, allocations, h(0), h(12), h(12), empty)
    assert den.physical(nodes, allocations, h(0), h(12), timelines).equals(
        den.physical(nodes, allocations, h(0), h(12))
    )
    assert occupancy.nodes_at(nodes, allocations, at, empty).equals(nodes)


# -- placement by time ------------------------------------------------------------------


def _placement(events: list[tuple[Any, ...]], checkpoint_s: float | None = None) -> Any:
    """Two 8-GPU nodes; n1 runs a recorded 4-GPU allocation (GPUs 0-3) throughout; r1 (8
    GPUs, 3 h, a checkpoint every ``checkpoint_s``) arrives at 01:00 and r2 (4 GPUs, 1 h)
    at 01:30; best-fit, backfill."""
    from fleetaudit.whatif.placement import PlacementOptions, simulate_replay

    nodes = pl.DataFrame({"node_id": ["n1", "n2"], "gpu_model": ["H20"] * 2, "gpus": [8, 8],
                          "cpus": [64.0, 64.0], "switch_id": ["s", "s"]})  # fmt: skip
    allocations = pl.DataFrame(
        {"alloc_id": ["rec"], "node_id": ["n1"], "gpus": [4.0], "cpus": [4.0],
         "start_time": [h(-1)], "end_time": [None]},
        schema_overrides={"end_time": pl.Datetime("us")},
    )  # fmt: skip
    requests = pl.DataFrame(
        {"request_id": ["r1", "r2"], "gpus": [8.0, 4.0], "cpus": [1.0, 1.0],
         "submit_time": [h(1), h(1.5)], "duration_s": [3 * 3600.0, 3600.0],
         "checkpoint_s": [checkpoint_s, None]},
        schema_overrides={"checkpoint_s": pl.Float64},
    )  # fmt: skip
    frame = pl.DataFrame(
        events,
        schema={"node_id": pl.String, "gpu_index": pl.Int64, "start_time": pl.Datetime("us"),
                "end_time": pl.Datetime("us"), "state": pl.String},
        orient="row",
    )  # fmt: skip
    return simulate_replay(
        nodes, allocations, requests, PlacementOptions(policy="best-fit"), h(0), h(6),
        empty=False, queue="backfill", health=health_of(nodes, frame),
    )  # fmt: skip


def _runs(result: Any) -> list[tuple[str, str, float, float | None]]:
    rows = result.allocations.sort("start_time", "alloc_id").rows(named=True)
    return [
        (r["alloc_id"], r["node_id"], (r["start_time"] - T0) / timedelta(hours=1),
         None if r["end_time"] is None else (r["end_time"] - T0) / timedelta(hours=1))
        for r in rows
    ]  # fmt: skip


def test_placement_a_node_going_down_evicts_its_work_and_comes_back() -> None:
    """n2 down 02:00-03:00: r1 (on n2 since 01:00) stops at 02:00 and waits again, as an
    evicted request does; without a checkpoint interval it lost its hour and runs its 3 h
    again; r2 runs on n1 01:30-02:30; n1's 4 free GPUs cannot take r1, so it restarts on
    n2 at 03:00. A wait is to the first start (r1 waited 0 s); the failure is counted as
    an interruption, not as waiting."""
    result = _placement([("n2", None, h(2), h(3), "down")])
    assert _runs(result) == [
        ("rec", "n1", -1.0, None),
        ("replay/r1", "n2", 1.0, 2.0),
        ("replay/r2", "n1", 1.5, 2.5),
        ("replay/r1", "n2", 3.0, 6.0),
    ]
    waits = dict(result.waits.select("request_id", "wait_s").rows())
    assert waits == {"r1": 0.0, "r2": 0.0}
    assert (result.started, result.failed) == (2, 0)


def test_placement_a_node_going_down_keeps_the_work_up_to_the_last_checkpoint() -> None:
    """As above, r1 checkpointing every 40 min: at 02:00 it has run 60 min, 20 of them
    since its checkpoint at 01:40; it keeps 40 min of its 3 h and runs the 2 h 20 min
    left on n2 from 03:00 to 05:20."""
    result = _placement([("n2", None, h(2), h(3), "down")], checkpoint_s=2400.0)
    assert _runs(result) == [
        ("rec", "n1", -1.0, None),
        ("replay/r1", "n2", 1.0, 2.0),
        ("replay/r2", "n1", 1.5, 2.5),
        ("replay/r1", "n2", 3.0, pytest.approx(5 + 20 / 60)),
    ]


def test_placement_a_drain_keeps_the_work_and_takes_the_free_gpus() -> None:
    """n1 drained 00:30-01:45: its recorded work runs on, its 4 free GPUs take nothing, so
    r2 (n2 is r1's) waits until 01:45."""
    result = _placement([("n1", None, h(0.5), h(1.75), "drain")])
    assert _runs(result) == [
        ("rec", "n1", -1.0, None),
        ("replay/r1", "n2", 1.0, 4.0),
        ("replay/r2", "n1", 1.75, 2.75),
    ]
    # at 01:30 the fleet's 16 GPUs: 4 recorded + 8 of r1 allocated, n1's 4 out of service
    at = result.curve.filter(pl.col("instant") == h(1.5))
    assert at["allocated_pct"].to_list() == [75.0]


def test_placement_an_xid_on_one_gpu_takes_that_gpu_only() -> None:
    """GPU 5 of n1 fails 00:30-02:00 (the recorded work holds GPUs 0-3): n1 has 3 free
    GPUs, too few for r2 until 02:00. A GPU failing under work ends that work: GPU 2
    failing at 04:00 ends the recorded allocation then."""
    result = _placement([("n1", 5, h(0.5), h(2), "unhealthy"),
                         ("n1", 2, h(4), h(4.5), "unhealthy")])  # fmt: skip
    assert _runs(result) == [
        ("rec", "n1", -1.0, 4.0),
        ("replay/r1", "n2", 1.0, 4.0),
        ("replay/r2", "n1", 2.0, 3.0),
    ]


def test_status_counts_healthy_gpus_at_the_export(db: Path, frames: Any) -> None:
    nodes, _, health = frames
    # the export (12:00): n2 down since 10:00, its recorded health dated by that interval
    summary = api.summarize(api.StoreOptions(db))
    assert summary.models.select("gpus", "healthy_gpus").rows() == [(24, 16)]
    # at 03:00 n2 was in service and n3 had one GPU out
    models, _ = api.capacity_by_model(nodes, health, h(3))
    assert models.select("gpus", "healthy_gpus").rows() == [(24, 23)]
