"""Tests for fleetaudit.model.history: the tiny golden, hand-worked waits and percentiles,
the sweep against per-instant evaluation (hypothesis), calibration, and the
occupancy timeline it is built on."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fleetaudit.model.history
from fleetaudit.core.errors import UsageError
from fleetaudit.model.history import (
    History,
    calibrate,
    evaluate_history,
    evaluate_history_naive,
    nearest_rank,
)
from fleetaudit.model.occupancy import occupancy_at, occupancy_timeline
from fleetaudit.model.shapes import make_shape
from tests.conftest import NODE_SCHEMA

TINY = Path(__file__).parent / "data" / "tiny"
DAY = datetime(2026, 1, 1)
H = timedelta(hours=1)
M = timedelta(minutes=1)

ALLOC_SCHEMA = {
    "alloc_id": pl.String,
    "node_id": pl.String,
    "gpus": pl.Float64,
    "cpus": pl.Float64,
    "memory_gib": pl.Float64,
    "priority": pl.String,
    "start_time": pl.Datetime("us"),
    "end_time": pl.Datetime("us"),
}


def hour(h: float) -> datetime:
    return DAY + timedelta(hours=h)


def read_tiny() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """nodes, allocations, requests of the tiny fleet, times as naive UTC."""
    iso = "%Y-%m-%dT%H:%M:%SZ"
    nodes = pl.read_csv(TINY / "nodes.csv", infer_schema=False).with_columns(
        pl.col("gpus").cast(pl.Int64), pl.col("cpus", "memory_gib").cast(pl.Float64)
    )
    allocations = pl.read_csv(TINY / "allocations.csv", infer_schema=False).with_columns(
        pl.col("gpus", "cpus", "memory_gib", "checkpoint_interval_s").cast(pl.Float64),
        pl.col("start_time", "end_time").str.to_datetime(iso, time_unit="us"),
        (pl.col("sleepable") == "true").alias("sleepable"),
    )
    requests = pl.read_csv(TINY / "requests.csv", infer_schema=False).with_columns(
        pl.col("submit_time", "start_time").str.to_datetime(iso, time_unit="us"),
        pl.col("gpus", "gpus_per_pod", "cpus_per_gpu", "memory_gib_per_gpu").cast(pl.Float64),
    )
    return nodes, allocations, requests


def one_node(gpus: int = 8, cpus: float = 64.0) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                "node_id": "n1",
                "gpu_model": "H20",
                "gpus": gpus,
                "cpus": cpus,
                "memory_gib": None,
                "switch_id": None,
                "health": "healthy",
            }
        ],
        schema=NODE_SCHEMA,
    )


def allocs(rows: list[tuple[str, float, datetime, datetime | None]], cpus: float = 0.0):
    """Allocations (node_id, gpus, start, end), high priority, no memory."""
    return pl.DataFrame(
        [
            {
                "alloc_id": f"a{i}",
                "node_id": node,
                "gpus": gpus,
                "cpus": cpus,
                "memory_gib": None,
                "priority": "high",
                "start_time": start,
                "end_time": end,
            }
            for i, (node, gpus, start, end) in enumerate(rows)
        ],
        schema=ALLOC_SCHEMA,
    )


def pattern_fleet(pattern: list[int]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One 8-GPU node that can host one 8-GPU instance exactly at the hours where pattern is 1."""
    busy = [("n1", 1.0, hour(i), hour(i + 1)) for i, up in enumerate(pattern) if not up]
    return one_node(), allocs(busy)


EIGHT = make_shape("H20", 8)


def pattern_history(pattern: list[int], deadline: timedelta | None = None) -> History:
    nodes, allocations = pattern_fleet(pattern)
    span = (len(pattern) - 1) * H
    fast = evaluate_history(nodes, allocations, EIGHT, hour(len(pattern) - 1), span, H, deadline)
    assert fast.series["instances"].to_list() == pattern
    return fast


# ------------------------------------------------------------------- golden: tiny


def test_tiny_history_r1_at_20_matches_golden():
    nodes, allocations, _ = read_tiny()
    expected = json.loads((TINY / "expected_history_r1_at_20.json").read_text())
    entry = expected["shapes"][0]
    spec = entry["shape"]
    shape = make_shape(
        spec["gpu_model"],
        spec["gpus"],
        spec["gpus_per_pod"],
        spec["cpus_per_gpu"],
        spec["memory_gib_per_gpu"],
        spec["locality"],
        spec["duration_s"],
    )
    at = datetime.fromisoformat(expected["at"].replace("Z", "+00:00"))
    nodes_before, allocations_before = nodes.clone(), allocations.clone()

    history = evaluate_history(nodes, allocations, shape, at, 12 * H, H, deadline=H)

    assert history.as_json() == entry["history"]
    assert history.instants == 13
    assert history.series["instances"].to_list() == [3, 2, 2, 2, 1] + [0] * 8
    assert history.series["instant"].to_list() == [hour(8 + i) for i in range(13)]
    assert history.series["wait_s"].to_list() == [0.0] * 5 + [None] * 8
    reference = evaluate_history_naive(nodes, allocations, shape, at, 12 * H, H, deadline=H)
    assert history == reference
    assert history.series.equals(reference.series)
    assert nodes.equals(nodes_before)
    assert allocations.equals(allocations_before)


def test_tiny_queued_shapes_history_equals_reference_at_fine_steps():
    """The README's r2-r5 (switch, duration, share, small node shape) at 20-minute steps."""
    nodes, allocations, _ = read_tiny()
    shapes = [
        make_shape("H20", 16, 8, 4, 0, "switch"),
        make_shape("H20", 4, 4, 16, 0, "node", 7200),
        make_shape("H20", 0.5, None, 8),
        make_shape("H20", 2, 2, 2),
    ]
    for shape in shapes:
        args = (nodes, allocations, shape, hour(14), 4 * H, 20 * M, H)
        fast, reference = evaluate_history(*args), evaluate_history_naive(*args)
        assert fast.series.equals(reference.series), shape.label()
        assert fast == reference
    at_noon = evaluate_history(nodes, allocations, shapes[2], hour(12), timedelta(0), H)
    assert at_noon.series["instances"].to_list() == [51]  # README: r4 holds 51 pods at 12:00


# ------------------------------------------------------------ waits and percentiles


def test_waits_and_nearest_rank_by_hand():
    history = pattern_history([0, 1, 0, 0, 1, 0, 0], deadline=H)
    # waits: 1h, 0, 2h, 1h, 0, then no start before the window ends
    assert history.series["wait_s"].to_list() == [3600.0, 0.0, 7200.0, 3600.0, 0.0, None, None]
    assert history.p_start == 2 / 7
    assert history.wait_p50_s == 3600.0  # ceil(3.5) = 4th of 0, 0, 1h, 1h, 2h, inf, inf
    assert history.wait_p90_s is None  # ceil(6.3) = 7th: censored
    assert history.p_within_deadline == 4 / 7
    assert pattern_history([0, 1, 0, 0, 1, 0, 0], deadline=timedelta(0)).p_within_deadline == 2 / 7
    assert pattern_history([0, 1, 0, 0, 1, 0, 0]).p_within_deadline is None


def test_all_start_and_none_start():
    up = pattern_history([1, 1, 1], deadline=timedelta(0))
    assert (up.p_start, up.wait_p50_s, up.wait_p90_s, up.p_within_deadline) == (1.0, 0.0, 0.0, 1.0)
    down = pattern_history([0, 0, 0], deadline=24 * H)
    assert down.as_json() == {
        "p_start": 0.0,
        "wait_p50_s": None,
        "wait_p90_s": None,
        "p_within_deadline": 0.0,
    }
    assert down.series["wait_s"].null_count() == 3


def test_percentiles_of_ten_instants():
    # p90 of ten waits is the 9th smallest (ceil(0.9 x 10)), the last finite one here
    history = pattern_history([0, 0, 0, 0, 0, 0, 0, 0, 1, 0])
    waits = history.series["wait_s"].to_list()
    assert waits == [
        28800.0,
        25200.0,
        21600.0,
        18000.0,
        14400.0,
        10800.0,
        7200.0,
        3600.0,
        0.0,
        None,
    ]
    assert history.wait_p90_s == 28800.0
    assert history.wait_p50_s == 14400.0  # the 5th smallest


def test_nearest_rank_function():
    assert nearest_rank([], 50, 100) is None
    assert nearest_rank([5.0], 90, 100) == 5.0
    assert nearest_rank([4.0, 1.0, 3.0, 2.0], 50, 100) == 2.0
    assert nearest_rank([4.0, 1.0, 3.0, 2.0], 90, 100) == 4.0
    assert nearest_rank([None, 1.0, None, 2.0], 50, 100) == 2.0
    assert nearest_rank([None, 1.0, None, 2.0], 90, 100) is None


# ------------------------------------------------------------------- the instants


def test_instants_are_anchored_at_end_and_inclusive():
    nodes, allocations = pattern_fleet([1])
    history = evaluate_history(nodes, allocations, EIGHT, hour(12), 12 * H, H)
    assert history.instants == 13
    uneven = evaluate_history(nodes, allocations, EIGHT, hour(12), 150 * M, H)
    assert uneven.series["instant"].to_list() == [hour(10), hour(11), hour(12)]
    single = evaluate_history(nodes, allocations, EIGHT, hour(12), timedelta(0), H)
    assert single.instants == 1
    aware = evaluate_history(
        nodes, allocations, EIGHT, hour(12).replace(tzinfo=timezone.utc), 2 * H, H
    )
    assert aware.series["instant"].to_list() == [hour(10), hour(11), hour(12)]


@pytest.mark.parametrize(
    ("span", "step", "deadline", "message"),
    [
        (H, timedelta(0), None, "--step"),
        (H, -H, None, "--step"),
        (-H, H, None, "--history"),
        (H, H, -H, "--deadline"),
        (timedelta(days=365), timedelta(seconds=1), None, "more than 10,000,000"),
    ],
)
def test_bad_window_is_a_usage_error(span, step, deadline, message):
    nodes, allocations = pattern_fleet([1])
    for evaluator in (evaluate_history, evaluate_history_naive):
        with pytest.raises(UsageError, match=message):
            evaluator(nodes, allocations, EIGHT, hour(3), span, step, deadline)


def test_no_eligible_node_gives_zero_instances():
    nodes, allocations = pattern_fleet([1, 1])
    history = evaluate_history(nodes, allocations, make_shape("A10", 1), hour(1), H, H)
    assert history.series["instances"].to_list() == [0, 0]
    assert history.p_start == 0.0


# ------------------------------------------------------------ window edges by hand


def test_duration_window_edges():
    """[t, t + D): an allocation starting at t + D is outside, one ending at t is gone."""
    nodes = one_node()
    shape = make_shape("H20", 8, duration_s=3600)
    cases = [
        # (allocation start, end) -> instances at 10:00, 11:00, 12:00
        ((hour(12), None), [1, 1, 0]),  # starts at 11:00 + 1h: outside the 11:00 window
        ((hour(9), hour(11)), [0, 1, 1]),  # ends at 11:00: free from 11:00
        ((hour(10.5), hour(10.75)), [0, 1, 1]),  # between instants, inside the 10:00 window
        ((hour(11) - M, hour(11)), [0, 1, 1]),
        ((hour(11) + timedelta(minutes=59), hour(11) + H), [1, 0, 1]),
    ]
    for (start, end), expected in cases:
        allocations = allocs([("n1", 1.0, start, end)])
        args = (nodes, allocations, shape, hour(12), 2 * H, H)
        fast = evaluate_history(*args)
        assert fast.series["instances"].to_list() == expected, (start, end)
        assert fast.series.equals(evaluate_history_naive(*args).series)


def test_blip_between_instants_is_invisible_without_duration():
    nodes = one_node()
    allocations = allocs([("n1", 1.0, hour(10) + M, hour(11) - M)])
    args = (nodes, allocations, EIGHT, hour(12), 2 * H, H)
    assert evaluate_history(*args).series["instances"].to_list() == [1, 1, 1]
    assert evaluate_history_naive(*args).series["instances"].to_list() == [1, 1, 1]


def test_share_fill_change_at_equal_gpu_count():
    """0.5 + 0.25 -> 0.5 + 0.5 on one GPU: same GPU count, fewer 0.25 pods."""
    nodes = one_node(gpus=1, cpus=64.0)
    allocations = allocs(
        [
            ("n1", 0.5, hour(0), None),
            ("n1", 0.25, hour(0), hour(1)),
            ("n1", 0.5, hour(1), None),
        ]
    )
    shape = make_shape("H20", 0.25)
    args = (nodes, allocations, shape, hour(2), 2 * H, H)
    fast = evaluate_history(*args)
    assert fast.series["instances"].to_list() == [1, 0, 0]
    assert fast.series.equals(evaluate_history_naive(*args).series)


# --------------------------------------------- property: sweep == per-instant reference

MODELS = ("H20", "A10")
SHAPES = [
    make_shape("H20", 8),
    make_shape("H20", 4, cpus_per_gpu=8),
    make_shape("H20", 2, memory_gib_per_gpu=40),
    make_shape("H20|A10", 1, cpus_per_gpu=4),
    make_shape(None, 2, cpus_per_gpu=2, duration_s=1800),
    make_shape("H20", 8, 4, locality="switch"),
    make_shape("H20", 6, 2, cpus_per_gpu=4, locality="switch", duration_s=5400),
    make_shape("H20|A10", 4, 2, locality="any"),
    make_shape("A10", 4, 1, locality="any", duration_s=3 * 3600),
    make_shape("H20", 4, duration_s=25 * 60),
    make_shape("H20", 0.5, cpus_per_gpu=8),
    make_shape("H20", 0.25, duration_s=2 * 3600),
    make_shape("A10", 0.3, memory_gib_per_gpu=100),
]

nodes_strategy = st.lists(
    st.tuples(
        st.sampled_from(MODELS),
        st.sampled_from([2, 4, 8]),
        st.sampled_from([8.0, 32.0, 64.0]),
        st.none() | st.sampled_from([128.0, 512.0]),
        st.none() | st.sampled_from(["s1", "s2"]),
        st.sampled_from(["healthy", "healthy", "healthy", "cordoned"]),
    ),
    min_size=1,
    max_size=5,
)
allocs_strategy = st.lists(
    st.tuples(
        st.integers(0, 4),  # node (modulo the node count)
        st.sampled_from([0.25, 0.5, 0.75, 0.3, 1.0, 1.0, 2.0, 3.0, 4.0, 1.5]),
        st.sampled_from([0.0, 2.0, 8.0, 16.0]),
        st.none() | st.sampled_from([20.0, 100.0]),
        st.integers(-18, 90),  # start, in 10-minute units from DAY
        st.none() | st.integers(1, 50),  # length, in 10-minute units (none: runs on)
        st.integers(0, 9),  # minutes off the 10-minute grid
    ),
    max_size=14,
)


def build_fleet(node_rows, alloc_rows) -> tuple[pl.DataFrame, pl.DataFrame]:
    nodes = pl.DataFrame(
        [
            {
                "node_id": f"n{i}",
                "gpu_model": model,
                "gpus": gpus,
                "cpus": cpus,
                "memory_gib": memory,
                "switch_id": switch,
                "health": health,
            }
            for i, (model, gpus, cpus, memory, switch, health) in enumerate(node_rows)
        ],
        schema=NODE_SCHEMA,
    )
    rows = []
    for i, (node, gpus, cpus, memory, start, length, jitter) in enumerate(alloc_rows):
        begin = DAY + start * 10 * M + jitter * M
        rows.append(
            {
                "alloc_id": f"a{i}",
                "node_id": f"n{node % len(node_rows)}",
                "gpus": gpus,
                "cpus": cpus,
                "memory_gib": memory,
                "priority": "high" if i % 3 else "low",
                "start_time": begin,
                "end_time": None if length is None else begin + length * 10 * M,
            }
        )
    return nodes, pl.DataFrame(rows, schema=ALLOC_SCHEMA)


@settings(max_examples=90, deadline=None)
@given(
    node_rows=nodes_strategy,
    alloc_rows=allocs_strategy,
    shape=st.sampled_from(SHAPES),
    end_minutes=st.integers(6 * 60, 14 * 60),
    step_minutes=st.sampled_from([7, 20, 30, 60, 95]),
    instants=st.integers(1, 10),
    deadline_minutes=st.none() | st.sampled_from([0, 30, 60, 120]),
)
def test_sweep_equals_per_instant_evaluation(
    node_rows, alloc_rows, shape, end_minutes, step_minutes, instants, deadline_minutes
):
    nodes, allocations = build_fleet(node_rows, alloc_rows)
    step = step_minutes * M
    deadline = None if deadline_minutes is None else deadline_minutes * M
    args = (nodes, allocations, shape, DAY + end_minutes * M, (instants - 1) * step, step, deadline)
    fast = evaluate_history(*args)
    reference = evaluate_history_naive(*args)
    assert fast.series.equals(reference.series)
    assert fast == reference


# ---------------------------------------------------------------------- calibration


def test_calibrate_by_hand():
    # instances per hour 0..6: waits 1h, 0, 2h, 1h, 0, censored, censored
    history = pattern_history([0, 1, 0, 0, 1, 0, 0])
    requests = pl.DataFrame(
        {
            "submit_time": [
                hour(-1),  # before the window: left out
                hour(0),  # at an instant: predicted 1h
                hour(1) + 30 * M,  # between instants: reads 02:00, predicted 2h
                hour(3),  # predicted 1h
                hour(5) + M,  # reads 06:00: censored
                hour(4),  # still queued: left out
                hour(7),  # after the window: left out
            ],
            "start_time": [
                hour(0),
                hour(0) + 20 * M,
                hour(4),
                hour(3),
                hour(5) + 2 * M,
                None,
                hour(8),
            ],
        },
        schema={"submit_time": pl.Datetime("us"), "start_time": pl.Datetime("us")},
    )
    calibration = calibrate(history, requests)
    # actual waits: 20 min, 2.5 h, 0, 1 min; predicted: 1h, 2h, 1h, censored
    assert calibration == fleetaudit.model.history.Calibration(
        started=4,
        actual_wait_p50_s=60.0,
        actual_wait_p90_s=9000.0,
        predicted_wait_p50_s=3600.0,
        predicted_wait_p90_s=None,
        left_out={"not_started": 1, "outside_window": 2},  # said, never dropped silently
    )
    assert calibration.as_json() == {
        "started": 4,
        "actual_wait_p50_s": 60.0,
        "actual_wait_p90_s": 9000.0,
        "predicted_wait_p50_s": 3600.0,
        "predicted_wait_p90_s": None,
        "left_out": {"not_started": 1, "outside_window": 2},
        "durations_s": [],
    }
    nothing = calibrate(history, requests.head(1))
    assert nothing.as_json() == {
        "started": 0,
        "actual_wait_p50_s": None,
        "actual_wait_p90_s": None,
        "predicted_wait_p50_s": None,
        "predicted_wait_p90_s": None,
        "left_out": {"not_started": 0, "outside_window": 1},
        "durations_s": [],
    }


def test_calibrate_tiny_requests_of_r1_shape():
    nodes, allocations, requests = read_tiny()
    history = evaluate_history(nodes, allocations, make_shape("H20", 8, 8, 8), hour(20), 12 * H, H)
    r1 = requests.filter(pl.col("request_id") == "r1")
    assert calibrate(history, r1).started == 0  # r1 is still queued
    started = r1.with_columns(pl.lit(hour(12) + 30 * M).alias("start_time"))
    calibration = calibrate(history, started)
    assert calibration.started == 1
    assert calibration.actual_wait_p50_s == 3600.0
    assert calibration.predicted_wait_p50_s == 0.0  # 12:00 had an instance


# ----------------------------------------------------------- the occupancy timeline


@settings(max_examples=40, deadline=None)
@given(node_rows=nodes_strategy, alloc_rows=allocs_strategy, probe=st.integers(0, 20 * 60))
def test_timeline_reads_like_occupancy_at(node_rows, alloc_rows, probe):
    nodes, allocations = build_fleet(node_rows, alloc_rows)
    start, end = DAY, DAY + 20 * H
    at = start + probe * M
    timeline = occupancy_timeline(nodes, allocations, start, end, share_fills=True)
    assert timeline.filter(pl.col("time") == start).height == nodes.height
    read = (
        timeline.filter(pl.col("time") <= at)
        .group_by("node_id")
        .agg(pl.all().sort_by("time").last())
        .select(pl.col("node_id").cast(pl.String), pl.exclude("node_id", "time"))
        .sort("node_id")
    )
    expected = occupancy_at(nodes, allocations, at).select(read.columns)
    assert read.equals(expected)


# ---------------------------------------------------------------------- doctests

