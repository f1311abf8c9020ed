"""Tests for fleetaudit.model.occupancy: the hand-worked tiny fleet, FFD cases, window
edges, and a differential check against a per-node pure-Python reference."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from itertools import pairwise
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from fleetaudit.model.occupancy import (
    SHARE_UNITS,
    active_at,
    first_fit_decreasing,
    node_state,
    node_states,
    occupancy_at,
    occupied_gpu_seconds,
    pack_shares,
    peak_occupancy,
)
from tests.conftest import NODE_SCHEMA

TINY = Path(__file__).parent / "data" / "tiny"
DAY = datetime(2026, 1, 1)


def hour(h: float) -> datetime:
    return DAY + timedelta(hours=h)


# ----------------------------------------------------------------- frame builders

ALLOC_SCHEMA = {
    "alloc_id": pl.String,
    "job_id": pl.String,
    "node_id": pl.String,
    "gpus": pl.Float64,
    "cpus": pl.Float64,
    "memory_gib": pl.Float64,
    "priority": pl.String,
    "workload": pl.String,
    "tenant": pl.String,
    "start_time": pl.Datetime("us"),
    "end_time": pl.Datetime("us"),
    "checkpoint_interval_s": pl.Float64,
    "sleepable": pl.Boolean,
}


def make_nodes(*rows: tuple[str, int, float, float | None]) -> pl.DataFrame:
    """Nodes (node_id, gpus, cpus, memory_gib), all healthy H20 without a switch."""
    return pl.DataFrame(
        [
            {
                "node_id": n,
                "gpu_model": "H20",
                "gpus": g,
                "cpus": c,
                "memory_gib": m,
                "switch_id": None,
                "health": "healthy",
            }
            for n, g, c, m in rows
        ],
        schema=NODE_SCHEMA,
    )


def make_allocs(rows: list[dict[str, object]]) -> pl.DataFrame:
    """Allocations from partial rows; defaults fill the rest."""
    defaults: dict[str, object] = {
        "job_id": None,
        "cpus": 0.0,
        "memory_gib": None,
        "priority": "high",
        "workload": "other",
        "tenant": None,
        "end_time": None,
        "checkpoint_interval_s": None,
        "sleepable": None,
    }
    full = [{**defaults, **row} for row in rows]
    for i, row in enumerate(full):
        row.setdefault("alloc_id", f"a{i}")
    return pl.DataFrame(full, schema=ALLOC_SCHEMA)


def read_tiny() -> tuple[pl.DataFrame, pl.DataFrame]:
    nodes = pl.read_csv(TINY / "nodes.csv", infer_schema=False).with_columns(
        pl.col("gpus").cast(pl.Int64), pl.col("cpus", "memory_gib").cast(pl.Float64)
    )
    allocations = pl.read_csv(TINY / "allocations.csv", infer_schema=False).with_columns(
        pl.col("gpus", "cpus", "memory_gib", "checkpoint_interval_s").cast(pl.Float64),
        pl.col("start_time", "end_time").str.to_datetime("%Y-%m-%dT%H:%M:%SZ", time_unit="us"),
        (pl.col("sleepable") == "true").alias("sleepable"),
    )
    return nodes, allocations


@pytest.fixture
def tiny() -> tuple[pl.DataFrame, pl.DataFrame]:
    return read_tiny()


def by_node(frame: pl.DataFrame, *columns: str) -> dict[str, tuple[object, ...]]:
    return {row[0]: tuple(row[1:]) for row in frame.select("node_id", *columns).rows()}


# ------------------------------------------------------------- golden: tiny fleet


def test_tiny_state_at_noon_matches_readme_table(tiny):
    nodes, allocations = tiny
    nodes_before, allocations_before = nodes.clone(), allocations.clone()
    state = node_state(nodes, allocations, hour(12))
    got = by_node(state, "gpus_used", "free_gpus", "free_cpus")
    expected = {
        "n1": (4, 4, 32.0),
        "n2": (6, 2, 4.0),
        "n3": (0, 8, 64.0),
        "n4": (2, 6, 112.0),
        "n6": (1, 7, 88.0),
    }
    assert {n: got[n] for n in expected} == expected
    assert state["node_id"].to_list() == [f"n{i}" for i in range(1, 8)]
    assert by_node(state, "domain")["n6"] == ("node n6",)
    assert by_node(state, "domain")["n1"] == ("switch sw-a",)
    assert by_node(state, "share_fills")["n1"] == ([0.75],)
    # without a duration the window is {t}
    assert state["free_gpus_window"].to_list() == state["free_gpus"].to_list()
    assert state["free_cpus_window"].to_list() == state["free_cpus"].to_list()
    assert nodes.equals(nodes_before) and allocations.equals(allocations_before)


@pytest.mark.parametrize(
    ("at", "high", "low"), [(hour(12), 11, 2), (hour(20), 18, 3)], ids=["12:00", "20:00"]
)
def test_tiny_ledger_allocated_high_and_low(tiny, at, high, low):
    nodes, allocations = tiny
    state = node_state(nodes, allocations, at).filter(
        (pl.col("gpu_model") == "H20") & (pl.col("health") == "healthy")
    )
    assert state["gpus_used_high"].sum() == high
    assert state["gpus_used"].sum() - state["gpus_used_high"].sum() == low


def test_tiny_window_sees_a5_take_n3(tiny):
    nodes, allocations = tiny
    state = node_state(nodes, allocations, hour(12), timedelta(hours=2))
    window = by_node(state, "free_gpus", "free_gpus_window", "free_cpus_window")
    assert window["n3"] == (8, 0, 32.0)
    assert window["n1"] == (4, 4, 32.0)
    assert window["n4"] == (6, 6, 112.0)


def test_tiny_physical_gpu_hours_00_to_12(tiny):
    nodes, allocations = tiny
    expected = json.loads((TINY / "expected_physical_00_12.json").read_text())
    seconds = occupied_gpu_seconds(nodes, allocations, hour(0), hour(12)).join(
        nodes.select("node_id", "gpus", "health"), on="node_id"
    )
    healthy = seconds.filter(pl.col("health") == "healthy")
    assert seconds["gpus"].sum() * 12 == expected["installed_gpu_hours"]
    assert healthy["gpus"].sum() * 12 == expected["healthy_gpu_hours"]
    assert healthy["gpu_seconds"].sum() / 3600 == pytest.approx(expected["allocated_gpu_hours"])
    assert healthy["gpu_seconds_high"].sum() / 3600 == pytest.approx(
        expected["allocated_high_gpu_hours"]
    )
    # n1: a1 3 x 4 h, the shared GPU 10:00-12:00; high alone: a3's GPU 11:00-12:00
    assert by_node(seconds, "gpu_seconds", "gpu_seconds_high")["n1"] == (14 * 3600.0, 13 * 3600.0)


# -------------------------------------------------------------------------- FFD


@pytest.mark.parametrize(
    ("shares", "fills"),
    [
        ([0.6, 0.5, 0.5, 0.4], [1.0, 1.0]),  # 0.6 | 0.5 -> new | 0.5 -> 2nd | 0.4 -> 1st
        ([0.7, 0.7, 0.3], [1.0, 0.7]),  # 0.3 fills the first GPU opened
        ([0.5, 0.25], [0.75]),  # tiny n1
        ([0.1] * 10, [1.0]),  # float sum 0.9999999999999999 must still be one GPU
        ([0.3, 0.3, 0.3, 0.3], [0.9, 0.3]),
        ([0.45, 0.45, 0.45, 0.35, 0.3], [0.9, 0.8, 0.3]),  # FFD, not optimal (needs 3 anyway)
        ([2.5, 1.5], [1.0]),  # fractional parts of multi-GPU allocations
        ([1.0, 3.0], []),  # no fractional part: nothing to pack
    ],
)
def test_pack_shares_cases(shares, fills):
    frame = pl.DataFrame(
        {
            "node_id": ["n"] * len(shares),
            "alloc_id": [f"a{i}" for i in range(len(shares))],
            "gpus": shares,
        }
    )
    packed = pack_shares(frame)
    if not fills:
        assert packed.height == 0
    else:
        assert packed.rows() == [("n", len(fills), fills)]


def test_first_fit_decreasing_keeps_opening_order():
    assert first_fit_decreasing([300_000, 700_000, 700_000]) == [SHARE_UNITS, 700_000]
    assert first_fit_decreasing([]) == []


def test_pack_shares_is_per_node_and_sorted():
    frame = pl.DataFrame(
        {
            "node_id": ["b", "a", "b", "a"],
            "alloc_id": ["1", "2", "3", "4"],
            "gpus": [0.5, 0.6, 0.5, 0.6],
        }
    )
    assert pack_shares(frame).rows() == [("a", 2, [0.6, 0.6]), ("b", 1, [1.0])]


# ------------------------------------------------------------- instants and edges


def test_active_at_half_open():
    allocations = make_allocs(
        [
            {"alloc_id": "starts", "node_id": "n", "gpus": 1.0, "start_time": hour(12)},
            {
                "alloc_id": "ends",
                "node_id": "n",
                "gpus": 1.0,
                "start_time": hour(10),
                "end_time": hour(12),
            },
            {"alloc_id": "later", "node_id": "n", "gpus": 1.0, "start_time": hour(13)},
            {
                "alloc_id": "zero",
                "node_id": "n",
                "gpus": 1.0,
                "start_time": hour(12),
                "end_time": hour(12),
            },
        ]
    )
    assert active_at(allocations, hour(12))["alloc_id"].to_list() == ["starts"]
    assert active_at(allocations, hour(12) - timedelta(microseconds=1))["alloc_id"].to_list() == [
        "ends"
    ]
    occupancy = occupancy_at(make_nodes(("n", 8, 8.0, None)), allocations, hour(12))
    assert occupancy["gpus_used"].to_list() == [1]


def test_aware_instant_is_converted_to_utc():
    allocations = make_allocs([{"node_id": "n", "gpus": 1.0, "start_time": hour(12)}])
    nodes = make_nodes(("n", 8, 8.0, None))
    aware = datetime(2026, 1, 1, 13, 0, tzinfo=timezone(timedelta(hours=1)))  # 12:00 UTC
    assert occupancy_at(nodes, allocations, aware)["gpus_used"].to_list() == [1]


def test_epoch_microseconds_by_hand():
    """The one conversion every engine uses (fleetaudit.core.times)."""
    from fleetaudit.core.times import epoch_us, from_epoch_us

    assert epoch_us(datetime(1970, 1, 1, 0, 0, 1, 5)) == 1_000_005
    assert epoch_us(datetime(1969, 12, 31, 23, 59, 59)) == -1_000_000
    aware = datetime(1970, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=1)))  # midnight UTC
    assert epoch_us(aware) == 0
    assert from_epoch_us(86_400_000_000 + 7) == datetime(1970, 1, 2, 0, 0, 0, 7)
    t = datetime(2026, 5, 1, 12, 34, 56, 789)
    assert from_epoch_us(epoch_us(t)) == t


def test_no_allocations_gives_every_node_zero():
    nodes = make_nodes(("b", 8, 16.0, 100.0), ("a", 4, 8.0, None))
    state = node_state(nodes, make_allocs([]), hour(0), timedelta(hours=1))
    assert state["node_id"].to_list() == ["a", "b"]
    assert state["gpus_used"].to_list() == [0, 0]
    assert state["share_fills"].to_list() == [[], []]
    assert state["free_gpus_window"].to_list() == [4, 8]
    assert state["free_memory_gib"].to_list() == [math.inf, 100.0]
    seconds = occupied_gpu_seconds(nodes, make_allocs([]), hour(0), hour(1))
    assert seconds["gpu_seconds"].to_list() == [0.0, 0.0]


def test_node_without_allocations_and_unknown_node():
    nodes = make_nodes(("n1", 8, 16.0, 100.0), ("n2", 8, 16.0, 100.0))
    allocations = make_allocs(
        [
            {"node_id": "n1", "gpus": 2.0, "cpus": 4.0, "memory_gib": 10.0, "start_time": hour(0)},
            {"node_id": "ghost", "gpus": 2.0, "start_time": hour(0)},
        ]
    )
    state = node_state(nodes, allocations, hour(1))
    assert by_node(state, "gpus_used", "free_cpus", "free_memory_gib") == {
        "n1": (2, 12.0, 90.0),
        "n2": (0, 16.0, 100.0),
    }


def test_high_alone_packs_separately_and_low_is_the_difference():
    nodes = make_nodes(("n", 8, 64.0, None))
    allocations = make_allocs(
        [
            {"node_id": "n", "gpus": 0.5, "priority": "high", "start_time": hour(0)},
            {"node_id": "n", "gpus": 0.5, "priority": "high", "start_time": hour(0)},
            {"node_id": "n", "gpus": 0.6, "priority": "low", "start_time": hour(0)},
            {"node_id": "n", "gpus": 0.3, "priority": "low", "start_time": hour(0)},
        ]
    )
    occupancy = occupancy_at(nodes, allocations, hour(1))
    # all: 0.6+0.3 | 0.5+0.5 -> 2 GPUs; high alone: 0.5+0.5 -> 1
    assert occupancy.select("gpus_used", "gpus_used_high", "share_fills").rows() == [
        (2, 1, [1.0, 0.9])
    ]


def test_over_committed_node_has_nothing_free():
    nodes = make_nodes(("n", 2, 4.0, 10.0))
    allocations = make_allocs(
        [
            {"node_id": "n", "gpus": 2.0, "cpus": 4.0, "memory_gib": 8.0, "start_time": hour(0)},
            {"node_id": "n", "gpus": 1.0, "cpus": 1.0, "memory_gib": 8.0, "start_time": hour(0)},
        ]
    )
    state = node_state(nodes, allocations, hour(1))
    assert state.select("gpus_used", "free_gpus", "free_cpus", "free_memory_gib").rows() == [
        (3, 0, 0.0, 0.0)
    ]


def test_quantities_are_exact_decimals():
    nodes = make_nodes(("n", 1, 32.0, 1.0))
    allocations = make_allocs(
        [{"node_id": "n", "gpus": 0.3, "cpus": 0.1, "memory_gib": 0.1, "start_time": hour(0)}] * 3
    )
    state = node_state(nodes, allocations, hour(1), timedelta(hours=1))
    assert state.select(
        "share_fills", "cpus_used", "free_cpus", "free_memory_gib", "free_cpus_window"
    ).rows() == [([0.9], 0.3, 31.7, 0.7, 31.7)]


def test_invalid_windows_raise():
    nodes, allocations = make_nodes(("n", 8, 8.0, None)), make_allocs([])
    with pytest.raises(ValueError, match="negative"):
        node_state(nodes, allocations, hour(1), timedelta(hours=-1))
    with pytest.raises(ValueError, match="empty"):
        peak_occupancy(nodes, allocations, hour(1), hour(1))
    with pytest.raises(ValueError, match="before"):
        occupied_gpu_seconds(nodes, allocations, hour(2), hour(1))


# ------------------------------------------------------------------ window maxima


def test_window_maxima_with_starts_and_ends_inside():
    nodes = make_nodes(("n", 8, 64.0, 100.0))
    allocations = make_allocs(
        [
            # ends at 13:00 exactly when the next starts: never both at once
            {
                "node_id": "n",
                "gpus": 3.0,
                "cpus": 10.0,
                "start_time": hour(11),
                "end_time": hour(13),
            },
            {
                "node_id": "n",
                "gpus": 2.0,
                "cpus": 30.0,
                "start_time": hour(13),
                "end_time": hour(15),
            },
            # memory peaks at a different instant than GPUs
            {
                "node_id": "n",
                "gpus": 0.0,
                "memory_gib": 60.0,
                "start_time": hour(15),
                "end_time": hour(16),
            },
            # starts at the window's end: outside W
            {"node_id": "n", "gpus": 8.0, "start_time": hour(16)},
            # two shares that only overlap inside W
            {"node_id": "n", "gpus": 0.6, "start_time": hour(12), "end_time": hour(14)},
            {"node_id": "n", "gpus": 0.6, "start_time": hour(13), "end_time": hour(17)},
        ]
    )
    peaks = peak_occupancy(nodes, allocations, hour(12), hour(16))
    # 13:00-14:00: 2 whole + two 0.6 shares on two GPUs = 4 (3 + 1 at 12:00)
    assert peaks.rows() == [("n", 4, 30.0, 60.0)]
    state = node_state(nodes, allocations, hour(12), timedelta(hours=4))
    assert state.select(
        "free_gpus", "free_gpus_window", "free_cpus_window", "free_memory_gib_window"
    ).rows() == [(4, 4, 34.0, 40.0)]


def test_back_to_back_shares_do_not_stack():
    nodes = make_nodes(("n", 1, 8.0, None))
    allocations = make_allocs(
        [
            {"node_id": "n", "gpus": 0.7, "start_time": hour(0), "end_time": hour(1)},
            {"node_id": "n", "gpus": 0.7, "start_time": hour(1), "end_time": hour(2)},
        ]
    )
    assert peak_occupancy(nodes, allocations, hour(0), hour(2))["gpus_peak"].to_list() == [1]
    seconds = occupied_gpu_seconds(nodes, allocations, hour(0) + timedelta(minutes=30), hour(3))
    assert seconds["gpu_seconds"].to_list() == [90 * 60.0]


def test_gpu_seconds_counts_only_the_overlap():
    nodes = make_nodes(("n", 8, 8.0, None))
    allocations = make_allocs(
        [
            {"node_id": "n", "gpus": 2.0, "start_time": hour(-5), "end_time": hour(1)},
            {"node_id": "n", "gpus": 1.0, "priority": "low", "start_time": hour(2)},
        ]
    )
    seconds = occupied_gpu_seconds(nodes, allocations, hour(0), hour(4))
    assert seconds.select("gpu_seconds", "gpu_seconds_high").rows() == [(4 * 3600.0, 2 * 3600.0)]


# ------------------------------------------------- differential: per-node reference


@dataclass(frozen=True)
class RefAlloc:
    node: str
    start: int  # minutes after DAY
    end: int | None
    gpus: float
    cpus: float
    memory: float | None
    high: bool


def ref_ffd_count(gpus: list[float]) -> int:
    fracs = sorted((round(g * SHARE_UNITS) % SHARE_UNITS for g in gpus), reverse=True)
    room: list[int] = []
    for f in (f for f in fracs if f):
        j = next((j for j, r in enumerate(room) if r >= f), None)
        if j is None:
            room.append(SHARE_UNITS - f)
        else:
            room[j] -= f
    return len(room)


def ref_occupancy(allocs: list[RefAlloc], t: int, high_only: bool) -> tuple[int, float, float]:
    act = [
        a
        for a in allocs
        if a.start <= t and (a.end is None or t < a.end) and (a.high or not high_only)
    ]
    whole = sum(round(a.gpus * SHARE_UNITS) // SHARE_UNITS for a in act)
    return (
        whole + ref_ffd_count([a.gpus for a in act]),
        sum(a.cpus for a in act),
        sum(a.memory or 0.0 for a in act),
    )


def ref_peak(allocs: list[RefAlloc], lo: int, hi: int) -> tuple[int, float, float]:
    # Every instant where the active set changes, ends included: CPUs and memory
    # only rise at a start, but FFD is not monotone in its items.
    instants = {lo} | {x for a in allocs for x in (a.start, a.end) if x is not None and lo < x < hi}
    values = [ref_occupancy(allocs, t, False) for t in instants]
    return (max(v[0] for v in values), max(v[1] for v in values), max(v[2] for v in values))


def ref_gpu_seconds(allocs: list[RefAlloc], lo: int, hi: int, high_only: bool) -> float:
    cuts = sorted(
        {lo, hi} | {x for a in allocs for x in (a.start, a.end) if x is not None and lo < x < hi}
    )
    return sum(ref_occupancy(allocs, a, high_only)[0] * (b - a) * 60.0 for a, b in pairwise(cuts))


ref_allocs = st.lists(
    st.builds(
        lambda node, start, length, gpus, cpus, memory, high: RefAlloc(
            node, start, None if length is None else start + length, gpus, cpus, memory, high
        ),
        node=st.sampled_from(["n1", "n2", "n3"]),
        start=st.integers(0, 40),
        length=st.none() | st.integers(0, 20),
        gpus=st.sampled_from([0.0, 0.1, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 1.0, 1.5, 2.0, 2.75, 3.0]),
        cpus=st.sampled_from([0.0, 0.5, 1.0, 2.0, 8.0]),
        memory=st.none() | st.sampled_from([1.0, 2.5, 16.0]),
        high=st.booleans(),
    ),
    max_size=14,
)
NODES3 = make_nodes(("n1", 8, 64.0, 256.0), ("n2", 4, 32.0, None), ("n3", 8, 16.0, 64.0))


def to_frame(allocs: list[RefAlloc]) -> pl.DataFrame:
    def at(m: int | None) -> datetime | None:
        return None if m is None else DAY + timedelta(minutes=m)

    return make_allocs(
        [
            {
                "node_id": a.node,
                "gpus": a.gpus,
                "cpus": a.cpus,
                "memory_gib": a.memory,
                "priority": "high" if a.high else "low",
                "start_time": at(a.start),
                "end_time": at(a.end),
            }
            for a in allocs
        ]
    )


def on(allocs: list[RefAlloc], node: str) -> list[RefAlloc]:
    return [a for a in allocs if a.node == node]


@settings(max_examples=150, deadline=None)
@given(allocs=ref_allocs, t=st.integers(0, 60))
def test_occupancy_at_matches_reference(allocs, t):
    occupancy = occupancy_at(NODES3, to_frame(allocs), DAY + timedelta(minutes=t))
    for row in occupancy.iter_rows(named=True):
        mine = on(allocs, row["node_id"])
        gpus, cpus, memory = ref_occupancy(mine, t, False)
        gpus_h, cpus_h, memory_h = ref_occupancy(mine, t, True)
        assert (row["gpus_used"], row["gpus_used_high"]) == (gpus, gpus_h)
        assert (row["cpus_used"], row["cpus_used_high"]) == pytest.approx((cpus, cpus_h))
        assert (row["memory_used"], row["memory_used_high"]) == pytest.approx((memory, memory_h))
        assert 0 <= row["gpus_used_high"] <= row["gpus_used"]
        assert row["gpus_used"] - len(row["share_fills"]) >= 0
        assert all(0 < f <= 1 for f in row["share_fills"])
        assert row["share_fills"] == sorted(row["share_fills"], reverse=True)


@settings(max_examples=150, deadline=None)
@given(allocs=ref_allocs, lo=st.integers(0, 50), length=st.integers(1, 30))
def test_peak_occupancy_matches_reference(allocs, lo, length):
    start = DAY + timedelta(minutes=lo)
    peaks = peak_occupancy(NODES3, to_frame(allocs), start, start + timedelta(minutes=length))
    for node, gpus, cpus, memory in peaks.rows():
        ref = ref_peak(on(allocs, node), lo, lo + length)
        assert gpus == ref[0]
        assert (cpus, memory) == pytest.approx(ref[1:])
        assert min(gpus, cpus, memory) >= 0


@settings(max_examples=150, deadline=None)
@given(allocs=ref_allocs, lo=st.integers(0, 50), length=st.integers(0, 40))
def test_occupied_gpu_seconds_matches_reference(allocs, lo, length):
    start = DAY + timedelta(minutes=lo)
    seconds = occupied_gpu_seconds(
        NODES3, to_frame(allocs), start, start + timedelta(minutes=length)
    )
    for node, total, high in seconds.rows():
        mine = on(allocs, node)
        assert total == ref_gpu_seconds(mine, lo, lo + length, False)
        assert high == ref_gpu_seconds(mine, lo, lo + length, True)
        assert 0 <= high <= total


@settings(max_examples=60, deadline=None)
@given(allocs=ref_allocs, t=st.integers(0, 50), length=st.none() | st.integers(1, 30))
def test_node_state_window_is_never_freer_than_the_instant(allocs, t, length):
    duration = None if length is None else timedelta(minutes=length)
    state = node_state(NODES3, to_frame(allocs), DAY + timedelta(minutes=t), duration)
    for name in ("gpus", "cpus", "memory_gib"):
        assert (state[f"free_{name}_window"] <= state[f"free_{name}"]).all()
        assert (state[f"free_{name}_window"] >= 0).all()
    if duration is None:
        assert state["free_gpus_window"].equals(state["free_gpus"])


def test_cpu_and_memory_bound_nodes_in_state_and_report(tmp_path: Path) -> None:
    """tests/data/bound: c1 is CPU-bound (8 idle GPUs), c2 memory-bound (6 idle GPUs)."""
    from typer.testing import CliRunner

    from fleetaudit import api
    from fleetaudit.cli import app
    from fleetaudit.model import occupancy

    bound = Path(__file__).parent / "data" / "bound"
    db = tmp_path / "bound.duckdb"
    api.ingest_paths(api.StoreOptions(db), [bound])
    at = datetime(2026, 1, 1, 12, tzinfo=timezone.utc)
    state = api.node_state(api.StoreOptions(db), at).state
    assert occupancy.bound_nodes(state).rows() == [("H20", 2, 1, 1, 14)]
    runner = CliRunner()
    shown = runner.invoke(app, ["state", "--db", str(db), "--at", "2026-01-01T12:00:00Z"])
    assert shown.exit_code == 0, shown.output
    assert "H20: 2 node(s) with idle GPUs have every CPU (1) or all memory (1) in use; their 14 idle GPUs" in " ".join(shown.stdout.split())
    out = tmp_path / "r.json"
    report = runner.invoke(
        app, ["report", "--db", str(db), "--at", "2026-01-01T12:00:00Z", "--since", "6h",
              "--step", "1h", "--json", str(out)],
    )  # fmt: skip
    assert report.exit_code == 0, report.output
    assert json.loads(out.read_text())["cpu_memory_bound"] == {
        "at": "2026-01-01T12:00:00Z",
        "models": {"H20": {"nodes": 2, "cpu_bound_nodes": 1, "memory_bound_nodes": 1, "idle_gpus": 14}},
    }


def test_timeline_counts_light_and_packed_share_nodes_alike() -> None:
    """n1's shares never add up to more than one GPU (counted in bulk: one share GPU
    while any runs); n3's 0.6 + 0.6 need two GPUs from 01:00 to 02:00 (packed one by one)."""
    from fleetaudit.model.occupancy import occupancy_timeline

    allocs = [
        RefAlloc("n1", 0, 120, 0.25, 1.0, None, True),
        RefAlloc("n1", 60, 90, 0.5, 1.0, None, False),
        RefAlloc("n1", 150, None, 1.25, 1.0, None, False),
        RefAlloc("n3", 0, 120, 0.6, 1.0, None, True),
        RefAlloc("n3", 60, 180, 0.6, 1.0, None, False),
    ]
    timeline = occupancy_timeline(NODES3, to_frame(allocs), DAY, DAY + timedelta(hours=4))
    steps = [(n, int((t - DAY).total_seconds() // 60), g) for n, t, g, *_ in timeline.rows()]
    # hand-worked: the GPUs used on each constant segment (minutes after midnight)
    assert [(m, g) for n, m, g in steps if n == "n1"] == [(0, 1), (60, 1), (90, 1), (120, 0), (150, 2)]
    assert [(m, g) for n, m, g in steps if n == "n2"] == [(0, 0)]
    assert [(m, g) for n, m, g in steps if n == "n3"] == [(0, 1), (60, 2), (120, 1), (180, 0)]


@settings(max_examples=80, deadline=None)
@given(
    allocs=ref_allocs,
    t=st.integers(0, 50),
    lengths=st.lists(st.none() | st.integers(0, 30), min_size=1, max_size=4),
)
def test_node_states_of_several_durations_are_each_durations_state(allocs, t, lengths):
    """One sweep over the longest window gives each shorter window's state: the same frame
    as node_state of that duration alone, and its peaks are the reference's."""
    frame = to_frame(allocs)
    at = DAY + timedelta(minutes=t)
    durations = [None if n is None else timedelta(minutes=n) for n in lengths]
    states = node_states(NODES3, frame, at, durations)
    assert len(states) == len(durations)
    for duration, state in zip(durations, states, strict=True):
        assert_frame_equal(state, node_state(NODES3, frame, at, duration))
        if duration:
            capacity = {"n1": 8, "n2": 4, "n3": 8}
            for node, free in state.select("node_id", "free_gpus_window").rows():
                peak = ref_peak(on(allocs, node), t, t + duration.seconds // 60)[0]
                assert free == max(capacity[node] - peak, 0)


def test_node_states_by_hand() -> None:
    """n1 (8 GPUs): 2 GPUs from 0h on, 4 more from 1h to 3h, 6 more from 5h: free over
    1h, 4h and 6h windows from 0h is 6, 2, 0, and the instant (no duration) is 6."""
    nodes = make_nodes(("n1", 8, 64.0, None))
    allocations = make_allocs(
        [
            {"node_id": "n1", "gpus": 2.0, "start_time": hour(0), "end_time": None},
            {"node_id": "n1", "gpus": 4.0, "start_time": hour(1), "end_time": hour(3)},
            {"node_id": "n1", "gpus": 6.0, "start_time": hour(5), "end_time": hour(7)},
        ]
    )
    hours = [1, 4, None, 6, 4]
    states = node_states(
        nodes, allocations, hour(0), [None if h is None else timedelta(hours=h) for h in hours]
    )
    assert [s["free_gpus_window"][0] for s in states] == [6, 2, 6, 0, 2]
    assert [s["free_gpus"][0] for s in states] == [6] * 5
    with pytest.raises(ValueError, match="negative"):
        node_states(nodes, allocations, hour(0), [timedelta(hours=1), timedelta(hours=-1)])


@given(
    st.lists(st.one_of(st.none(), st.integers(-(2**60), 2**60)), max_size=40),
    st.sampled_from([1_000_000, 3, 7, 10]),
)
def test_divided_is_correctly_rounded_and_keeps_nulls(values: list[int | None], divisor: int) -> None:
    """Micro-units back to quantities: each value the correctly rounded quotient (as
    Python's float division), a null kept null; polars' scalar division would not be."""
    from fleetaudit.model.occupancy import _divided

    frame = pl.DataFrame({"v": values, "w": values}, schema={"v": pl.Int64, "w": pl.Int64})
    got = _divided(frame, ["v"], divisor)
    assert got.schema == {"v": pl.Float64, "w": pl.Int64}
    assert got["v"].to_list() == [None if v is None else float(v) / divisor for v in values]
    assert got["w"].to_list() == values


def test_divided_by_a_million_gives_the_decimal() -> None:
    from fleetaudit.model.occupancy import _divided

    frame = pl.DataFrame({"cpus": [900_000, 100_000, 300_000]})
    assert _divided(frame, ["cpus"], 1_000_000)["cpus"].to_list() == [0.9, 0.1, 0.3]
