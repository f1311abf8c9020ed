"""The compiled harvesting replay's own parts: its heaps, its share packing, its threads."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from functools import partial

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from fleetaudit.api import harvest_api
from fleetaudit.core.options import VICTIM_POLICIES
from fleetaudit.model import occupancy
from fleetaudit.whatif import harvest, harvest_kernel

U = occupancy.SHARE_UNITS


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(-5, 5), st.integers(0, 3), st.integers(0, 1000)),
        unique=True,
        max_size=80,
    ),
    st.lists(st.booleans(), max_size=200),
)
def test_heaps_give_their_items_back_smallest_first(items, pops) -> None:
    """Pushes and pops interleaved at random on two heaps sharing one array of rows, past
    their moves and the array's growth: each always gives back its minimum."""
    heaps = harvest_kernel.new_heaps(2, 3)
    sizes = np.zeros(2, np.int64)
    mirrors: list[list[tuple[int, int, int]]] = [[], []]
    todo = list(items)
    for step, pop in enumerate([*pops, *([False] * len(items)), *([True] * 2 * len(items))]):
        k = step % 2
        mirror = mirrors[k]
        if pop:
            if not mirror:
                continue
            top = tuple(int(harvest_kernel.htop(heaps, k, c)) for c in range(3))
            assert top == min(mirror)
            mirror.remove(top)
            harvest_kernel.hpop(heaps, sizes, k)
        elif todo:
            item = todo.pop()
            harvest_kernel.hpush(heaps, sizes, k, item)
            mirror.append(item)
        assert sizes[0] == len(mirrors[0]) and sizes[1] == len(mirrors[1])
    assert not mirrors[0] and not mirrors[1]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from([500_000, 250_000, 125_000, 300_000, 700_000, 999_999]), max_size=12),
    st.sampled_from([-1, 0, 1, 2]),
    st.sampled_from([0, 1, 64]),
)
def test_share_packing_is_first_fit_decreasing(shares, add, scratch) -> None:
    """The kernel packs a node's share counts exactly as the occupancy module packs shares,
    in its scratch row or, where that is too short, in a row of its own."""
    fv = np.array(sorted({500_000, 250_000, 125_000, 300_000, 700_000, 999_999}, reverse=True))
    row = np.array([shares.count(int(v)) for v in fv], dtype=np.int64)
    packed = shares + ([int(fv[add])] if add >= 0 else [])
    fills = occupancy.first_fit_decreasing(packed)
    gpus, smallest = harvest_kernel._ffd(row, fv, add, np.full(scratch, -7, np.int64))
    assert gpus == len(fills)
    assert smallest == (min(fills) if fills else U)


def test_a_prepared_replay_serves_every_policy() -> None:
    t0 = datetime(2026, 1, 1)
    h = lambda x: t0 + timedelta(hours=x)  # noqa: E731
    nodes = pl.DataFrame({"node_id": ["n1", "n2"], "gpu_model": ["H20", "H20"], "gpus": [8, 8],
                          "cpus": [64.0, 64.0]})  # fmt: skip
    allocs = pl.DataFrame({
        "alloc_id": ["hp", "a", "b"], "node_id": ["n1", "n1", "n2"], "gpus": [8.0, 4.0, 8.0],
        "cpus": [8.0, 4.0, 8.0], "priority": ["high", "low", "low"],
        "start_time": [h(2), h(0), h(0.5)], "end_time": [h(4), h(3), h(5)],
        "checkpoint_interval_s": [None, 600.0, None],
    })  # fmt: skip
    sleeps = pl.DataFrame(schema={"alloc_id": pl.String, "sleep_start": pl.Datetime("us"),
                                  "sleep_end": pl.Datetime("us")})  # fmt: skip
    prepared = harvest.prepare_replay(nodes, allocs, sleeps, harvest.HarvestOptions(), h(0), h(6))
    for policy in harvest.POLICIES:
        once = harvest.run_replay(prepared, policy)
        alone = harvest.replay_harvest(
            nodes, allocs, sleeps, harvest.HarvestOptions(policy=policy), h(0), h(6)
        )
        assert once.policy == policy
        assert once.lost_gpu_hours == alone.lost_gpu_hours
        assert_frame_equal(once.victims, alone.victims)
        assert_frame_equal(once.jobs, alone.jobs)
    with pytest.raises(harvest.UsageError, match="--policy"):
        harvest.run_replay(prepared, "oldest")


@pytest.mark.slow
def test_threads_replay_as_one_thread_does(tmp_path) -> None:
    """A generated fleet with telemetry: every frame the same when 2 threads replay the
    policies side by side on one prepared replay as when one replays them in turn."""
    from fleetaudit.inputs.generate import GenerateOptions, generate_fleet

    out = tmp_path / "fleet"
    generate_fleet(out, GenerateOptions(nodes=150, days=3.0, telemetry_days=1.0,
                                        telemetry_step_s=900))  # fmt: skip
    nodes = pl.read_parquet(out / "nodes.parquet")
    allocations = pl.read_parquet(out / "allocations.parquet").with_columns(
        pl.col("start_time", "end_time").dt.replace_time_zone(None)
    )
    telemetry = pl.read_parquet(out / "telemetry.parquet")
    samples = telemetry.select(
        "alloc_id", pl.col("ts").dt.replace_time_zone(None), "sm_active"
    ).filter(pl.col("alloc_id").is_not_null())
    end = datetime(2026, 5, 1)
    start = end - timedelta(days=1)
    sleeps = harvest.sleep_intervals(samples, allocations, start, end)
    assert sleeps.height > 0
    harvest.warm_up()
    prepared = harvest.prepare_replay(
        nodes, allocations, sleeps, harvest.HarvestOptions(), start, end
    )
    policies = ("spotgpu", "random", "newest")
    with ThreadPoolExecutor(2) as threads:  # one thread replays two
        apart = list(threads.map(partial(harvest.run_replay, prepared), policies))
    for policy, other in zip(policies, apart, strict=True):
        here = harvest.run_replay(prepared, policy)
        assert here.preemptions > 0 and here.standby_gpu_hours > 0
        for frame in ("jobs", "segments", "victims", "high", "lending"):
            assert_frame_equal(getattr(here, frame), getattr(other, frame))
        assert (here.lost_gpu_hours, here.harvested_gpu_hours) == (
            other.lost_gpu_hours, other.harvested_gpu_hours,
        )  # fmt: skip


def test_policy_codes_follow_the_policies() -> None:
    codes = [harvest_kernel.SPOTGPU, harvest_kernel.NEWEST, harvest_kernel.SMALLEST,
             harvest_kernel.RANDOM]  # fmt: skip
    assert [harvest._POLICY_CODES[p] for p in harvest.POLICIES] == codes


@pytest.mark.parametrize("gpus", [1.9, 0.95, 3.999999])
def test_gpu_hours_stay_exact_over_long_windows(gpus: float) -> None:
    """A share held for 200 days: GPU-µs x share units pass 2^63, the integral must not."""
    t0 = datetime(2025, 1, 1)
    end = t0 + timedelta(days=200)
    nodes = pl.DataFrame({"node_id": ["n"], "gpu_model": ["m"], "gpus": [4], "cpus": [8.0]})
    allocs = pl.DataFrame({"alloc_id": ["lp"], "node_id": ["n"], "gpus": [gpus], "cpus": [1.0],
                           "priority": ["low"], "start_time": [t0], "end_time": [None]},
                          schema_overrides={"end_time": pl.Datetime("us")})  # fmt: skip
    sleeps = pl.DataFrame(schema={"alloc_id": pl.String, "sleep_start": pl.Datetime("us"),
                                  "sleep_end": pl.Datetime("us")})  # fmt: skip
    result = harvest.replay_harvest(nodes, allocs, sleeps, harvest.HarvestOptions(), t0, end)
    assert result.lp_gpu_hours == pytest.approx(gpus * 200 * 24, rel=1e-12)
    assert result.jobs["arrival"].to_list() == [t0] and result.unfinished == 1


def test_huge_delays_and_deadlines_act_as_the_window() -> None:
    t0 = datetime(2026, 1, 1)
    nodes = pl.DataFrame({"node_id": ["n"], "gpu_model": ["m"], "gpus": [8], "cpus": [64.0]})
    allocs = pl.DataFrame({
        "alloc_id": ["hp", "lp"], "node_id": ["n", "n"], "gpus": [8.0, 8.0],
        "cpus": [8.0, 8.0], "priority": ["high", "low"], "sleepable": [True, False],
        "start_time": [t0, t0 + timedelta(hours=1)],
        "end_time": [t0 + timedelta(hours=6), t0 + timedelta(hours=5)],
    })  # fmt: skip
    sleeps = pl.DataFrame({"alloc_id": ["hp"], "sleep_start": [t0 + timedelta(hours=1)],
                           "sleep_end": [t0 + timedelta(hours=2)]})  # fmt: skip
    options = harvest.HarvestOptions(eviction_delay_mean_s=1e12, eviction_delay_p95_s=2e12,
                                     kill_after_s=1e13)  # fmt: skip
    result = harvest.replay_harvest(nodes, allocs, sleeps, options, t0, t0 + timedelta(hours=6))
    # the waking container never gets its GPUs back within the window: nothing is evicted
    assert result.evictions == 0 and result.forced_kills == 0
    assert result.jobs["finish"].to_list() == [t0 + timedelta(hours=5)]


@pytest.mark.slow
def test_the_command_replays_side_by_side_as_it_does_in_turn(tmp_path, monkeypatch) -> None:
    """The parallel path (two threads replay the policies side by side) gives every
    figure and frame of the policies replayed in turn."""
    from dataclasses import replace
    from pathlib import Path

    from fleetaudit.api import StoreOptions, ingest_paths
    from fleetaudit.core.options import HarvestRun

    options = StoreOptions(tmp_path / "fleet.duckdb")
    ingest_paths(options, [Path(__file__).parents[1] / "sample_data"])
    run = HarvestRun(since=timedelta(days=2), record=False)
    alone = harvest_api.whatif_harvesting(options, replace(run, workers=1))
    monkeypatch.setattr(harvest_api, "_PARALLEL_FROM_ROWS", 0)  # the sample is small
    beside = harvest_api.whatif_harvesting(options, replace(run, workers=2))
    assert harvest_api.harvesting_document(beside) == harvest_api.harvesting_document(alone)
    assert [r.policy for r in beside.policies] == list(run.policies)
    assert alone.sleeps > 0 and sum(r.preemptions for r in alone.policies) > 0
    for here, there in zip(alone.policies, beside.policies, strict=True):
        for frame in ("jobs", "segments", "victims", "high", "lending"):
            assert_frame_equal(getattr(here, frame), getattr(there, frame))


@pytest.mark.parametrize(
    ("policies", "starts"),
    [
        (("spotgpu", "newest", "smallest", "random"), [3, 2, 0, 1]),
        (("newest", "random"), [1, 0]),
        (("newest", "spotgpu"), [1, 0]),
        (("smallest",), [0]),
    ],
)
def test_threads_start_the_longest_replays_first(policies, starts) -> None:
    """random's replay is the longest, then smallest, spotgpu, newest: the threads start
    them in that order, whatever order the policies were asked in."""
    assert harvest_api._longest_first(policies) == starts


def test_the_start_order_ranks_every_victim_policy() -> None:
    """A policy added to VICTIM_POLICIES is measured and ranked, not started last unseen."""
    assert sorted(harvest_api._LONGEST_FIRST) == sorted(VICTIM_POLICIES)
    assert harvest_api._longest_first(("newest", "future")) == [0, 1]
