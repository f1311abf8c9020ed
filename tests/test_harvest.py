"""Harvesting what-if (SPEC §6): hand-worked timelines per victim policy, invariants, the CLI."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fleetaudit import api
from fleetaudit.api.harvest_api import HarvestRun, whatif_harvesting
from fleetaudit.cli import app
from fleetaudit.model import occupancy
from fleetaudit.model.store import open_store
from fleetaudit.whatif import harvest
from fleetaudit.whatif.harvest import HarvestOptions, replay_harvest, sleep_intervals
from tests.conftest import ALLOC_SCHEMA, NODE_SCHEMA, write

T0 = datetime(2026, 1, 1)
runner = CliRunner()

SLEEP_SCHEMA = {
    "alloc_id": pl.String,
    "sleep_start": pl.Datetime("us"),
    "sleep_end": pl.Datetime("us"),
}


def h(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def nodes(*rows: tuple[str, int, str | None]) -> pl.DataFrame:
    """(node_id, gpus, switch_id): H20 nodes with 64 CPUs, memory unbounded."""
    return pl.DataFrame(
        [(n, "H20", g, 64.0, None, sw, "healthy") for n, g, sw in rows],
        schema=NODE_SCHEMA,
        orient="row",
    )


def alloc(
    alloc_id: str,
    node: str,
    gpus: float,
    priority: str,
    start: float,
    end: float | None,
    *,
    job: str | None = None,
    ckpt: float | None = None,
    sleepable: bool = False,
) -> tuple[object, ...]:
    return (alloc_id, job, node, gpus, gpus, None, priority, h(start),
            None if end is None else h(end), ckpt, sleepable)  # fmt: skip


def allocations(*rows: tuple[object, ...]) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=ALLOC_SCHEMA, orient="row")


def sleeps(*rows: tuple[str, float, float]) -> pl.DataFrame:
    return pl.DataFrame([(a, h(s), h(e)) for a, s, e in rows], schema=SLEEP_SCHEMA, orient="row")


NO_SLEEPS = sleeps()


def run(fleet, allocs, sleeping=NO_SLEEPS, end=12.0, **options) -> harvest.HarvestResult:
    return replay_harvest(fleet, allocs, sleeping, HarvestOptions(**options), h(0), h(end))


def finishes(result: harvest.HarvestResult) -> dict[str, float | None]:
    return {
        job: None if f is None else (f - T0).total_seconds() / 3600
        for job, f in result.jobs.select("job_id", "finish").iter_rows()
    }


def victims(result: harvest.HarvestResult) -> list[tuple[str, float, str, float]]:
    """(job, hour, reason, lost GPU-hours rounded)."""
    return [
        (j, (t - T0).total_seconds() / 3600, r, round(g, 6))
        for j, t, r, g in result.victims.select(
            "job_id", "time", "reason", "lost_gpu_hours"
        ).iter_rows()
    ]


# --------------------------------------------------------------- hand-worked timelines

# One 8-GPU node full of low-priority work when a 4-GPU high-priority allocation
# starts at 3h15 (and runs to 5h). Every job needs 4 h of work:
#   A: 3 GPUs from 0h, checkpoint every 1 h   -> 0.25 h since its checkpoint: 0.75 GPU-h
#   B: 1 GPU  from 1h, no checkpoint          -> 2.25 h:                      2.25 GPU-h
#   C: 3 GPUs from 2h, no checkpoint          -> 1.25 h:                      3.75 GPU-h
#   D: 1 GPU  from 2h30, checkpoint every 30m -> 0.25 h:                      0.25 GPU-h
ONE_NODE = nodes(("n1", 8, "sw1"))
FULL = allocations(
    alloc("A", "n1", 3, "low", 0, 4, ckpt=3600),
    alloc("B", "n1", 1, "low", 1, 5),
    alloc("C", "n1", 3, "low", 2, 6),
    alloc("D", "n1", 1, "low", 2.5, 6.5, ckpt=1800),
    alloc("hp", "n1", 4, "high", 3.25, 5),
)


def test_spotgpu_evicts_the_least_lost_work() -> None:
    # D (0.25) then A (0.75) free 4 GPUs; they keep 0.5 h and 3 h of work.
    # At 5h (B done, hp gone) A restarts for its last hour (done 6h), D for 3.5 h (8.5h).
    result = run(ONE_NODE, FULL, policy="spotgpu")
    assert victims(result) == [("A", 3.25, "preempt", 0.75), ("D", 3.25, "preempt", 0.25)]
    assert finishes(result) == {"A": 6.0, "B": 5.0, "C": 6.0, "D": 8.5}
    assert result.lost_gpu_hours == pytest.approx(1.0)
    assert result.preemptions == 2 and result.evictions == 0
    assert result.completion_s() == {"mean": 5.0 * 3600, "p50": 4 * 3600.0, "p90": 6 * 3600.0}


def test_newest_evicts_the_latest_started() -> None:
    # D (started 2h30) then C (2h): 1 + 3 GPUs, losing 0.25 + 3.75 GPU-h.
    # A's end at 4h frees 3 GPUs: C (queued first) restarts from scratch (done 8h);
    # D restarts at 5h (B done, hp gone) for its last 3.5 h (8.5h).
    result = run(ONE_NODE, FULL, policy="newest")
    assert victims(result) == [("C", 3.25, "preempt", 3.75), ("D", 3.25, "preempt", 0.25)]
    assert finishes(result) == {"A": 4.0, "B": 5.0, "C": 8.0, "D": 8.5}
    assert result.lost_gpu_hours == pytest.approx(4.0)


def test_smallest_evicts_the_fewest_gpus_first() -> None:
    # D and B (1 GPU each, newest first), then of A and C (3 GPUs) the newer C:
    # 5 GPUs for a 4-GPU start, so B (queued first) restarts at once on the spare
    # GPU, from scratch (done 7h15). C restarts when A ends (4h, done 8h), D at 5h.
    result = run(ONE_NODE, FULL, policy="smallest")
    assert victims(result) == [
        ("B", 3.25, "preempt", 2.25),
        ("C", 3.25, "preempt", 3.75),
        ("D", 3.25, "preempt", 0.25),
    ]
    assert finishes(result) == {"A": 4.0, "B": 7.25, "C": 8.0, "D": 8.5}


def test_random_is_seeded_and_frees_enough() -> None:
    first = run(ONE_NODE, FULL, policy="random", seed=3)
    again = run(ONE_NODE, FULL, policy="random", seed=3)
    assert victims(first) == victims(again)
    freed = sum({"A": 3, "B": 1, "C": 3, "D": 1}[j] for j, *_ in victims(first))
    assert freed >= 4
    assert {r for *_, r, _ in [(v[0], v[1], v[2], v[3]) for v in victims(first)]} == {"preempt"}


def test_a_victim_restarts_at_once_where_capacity_is_free() -> None:
    # Node n2 is free: the evicted job moves there at the same instant.
    fleet = nodes(("n1", 8, "sw1"), ("n2", 8, "sw1"))
    allocs = allocations(
        alloc("L", "n1", 8, "low", 0, 4),
        alloc("hp", "n1", 8, "high", 1, 3),
    )
    result = run(fleet, allocs)
    segments = result.segments.select(
        "node_id", pl.col("start_time").dt.hour(), pl.col("end_time").dt.hour()
    ).rows()
    assert segments == [("n1", 0, 1), ("n2", 1, 5)]
    assert finishes(result) == {"L": 5.0}  # no checkpoint: the first hour is lost
    assert victims(result) == [("L", 1.0, "preempt", 8.0)]


def test_a_sleeping_allocation_lends_its_gpus_until_it_wakes() -> None:
    # hp sleeps 2h-6h; L (8 GPUs, 30-min checkpoints) waits from 1h, runs on the
    # lent GPUs from 2h and is evicted a drawn delay after the 6h wake; it loses
    # exactly that delay (4 h is a whole number of checkpoints).
    allocs = allocations(
        alloc("hp", "n1", 8, "high", 0, 10, sleepable=True),
        alloc("L", "n1", 8, "low", 1, 11, ckpt=1800),
    )
    result = run(ONE_NODE, allocs, sleeps(("hp", 2, 6)))
    ((job, at, reason, lost_s, forced),) = result.victims.drop("lost_gpu_hours").rows()
    delay = (at - h(6)).total_seconds()
    assert (job, reason, forced) == ("L", "wake", False)
    assert 0 < delay <= 60
    assert lost_s == pytest.approx(delay)
    assert result.preemptions == result.evictions == 1
    standby = 8 * (4 + delay / 3600)
    assert result.standby_gpu_hours == pytest.approx(standby)
    assert result.harvested_gpu_hours == pytest.approx(standby)
    assert result.harvested_share == pytest.approx(1.0)
    assert result.allocation_rate_high == pytest.approx(10 / 12)
    # the waking allocation holds its GPUs again when the borrower is out
    assert result.lending.select("start_time", "end_time").rows() == [(h(2), at)]
    assert result.unfinished == 1  # L needs 10 h; it ran 4 h before 6h and waits again


def test_a_borrower_past_the_kill_deadline_is_killed() -> None:
    allocs = allocations(
        alloc("hp", "n1", 8, "high", 0, 10, sleepable=True),
        alloc("L", "n1", 8, "low", 1, 11, ckpt=1800),
    )
    result = run(ONE_NODE, allocs, sleeps(("hp", 2, 6)), kill_after_s=0.5)
    ((_, at, _, lost_s, forced),) = result.victims.drop("lost_gpu_hours").rows()
    assert forced and result.forced_kills == 1
    assert at == h(6) + timedelta(seconds=0.5) and lost_s == pytest.approx(0.5)


def test_eviction_delays_have_the_asked_mean_and_p95() -> None:
    sigma = harvest.delay_sigma(13, 48)
    mu = math.log(13) - sigma**2 / 2
    assert math.exp(mu + sigma**2 / 2) == pytest.approx(13)
    assert math.exp(mu + 1.6448536269514722 * sigma) == pytest.approx(48)
    with pytest.raises(harvest.UsageError, match="at most"):
        harvest.delay_sigma(13, 600)


def test_gangs_wait_for_one_switch_domain_and_are_evicted_whole() -> None:
    # Two 8-GPU pods recorded in one domain: at 1h only one node of each domain is
    # free, so the gang waits until n2 frees at 2h and runs on n1+n2 (sw1).
    # A high-priority start on n2 at 3h evicts the whole gang, on both nodes.
    fleet = nodes(("n1", 8, "sw1"), ("n2", 8, "sw1"), ("n3", 8, "sw2"), ("n4", 8, "sw2"))
    allocs = allocations(
        alloc("g/0", "n1", 8, "low", 1, 3, job="G"),
        alloc("g/1", "n2", 8, "low", 1, 3, job="G"),
        alloc("busy2", "n2", 8, "high", 0, 2),
        alloc("busy4", "n4", 8, "high", 0, 12),
        alloc("hp", "n2", 8, "high", 3, 12),
    )
    result = run(fleet, allocs)
    first = result.segments.filter(pl.col("start_time") == h(2))
    assert sorted(first["node_id"]) == ["n1", "n2"]
    assert victims(result) == [("G", 3.0, "preempt", 16.0)]
    assert result.segments.filter(pl.col("end_time") == h(3)).height == 2
    assert finishes(result) == {"G": None}  # both free nodes of one domain never come back


def test_fixed_work_is_never_moved_or_delayed() -> None:
    result = run(ONE_NODE, FULL)
    assert result.high.rows() == [("hp", "n1", h(3.25), h(5))]


def test_without_sleeps_nothing_is_standby() -> None:
    result = run(ONE_NODE, FULL)
    assert result.standby_gpu_hours == 0 and result.harvested_share is None
    assert result.sleeps == 0


def test_errors_name_the_option() -> None:
    with pytest.raises(harvest.UsageError, match="--policy"):
        run(ONE_NODE, FULL, policy="oldest")
    with pytest.raises(harvest.UsageError, match="empty"):
        replay_harvest(ONE_NODE, FULL, NO_SLEEPS, HarvestOptions(), h(2), h(2))



# --------------------------------------------------------------- sleeps from telemetry


def test_sleep_needs_idle_for_and_ends_at_the_first_busy_sample() -> None:
    ts = [h(i / 4) for i in range(12)]  # every 15 min
    sm = [0.5, 0.0, 0.01, 0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 0.04, 0.02, 0.0]
    samples = pl.DataFrame({"alloc_id": ["s"] * 12, "ts": ts, "sm_active": sm})
    allocs = allocations(
        alloc("s", "n1", 8, "high", 0, None, sleepable=True),
        alloc("x", "n1", 0, "high", 0, None),
    )
    found = sleep_intervals(samples, allocs, h(0), h(3), 0.05, 1800)
    # idle from 0h15 to the busy 1h15 sample: asleep 0h45-1h15; idle from 1h30 to
    # the last sample (2h45) and one more step: asleep 2h00-3h00
    assert found.select("sleep_start", "sleep_end").rows() == [(h(0.75), h(1.25)), (h(2), h(3))]
    # not sleepable: ignored
    samples_x = samples.with_columns(pl.lit("x").alias("alloc_id"))
    assert sleep_intervals(samples_x, allocs, h(0), h(3)).is_empty()


def test_sleeps_from_rows_in_any_order_with_several_gpus_per_time() -> None:
    """Rows of two GPUs per sample time, in no order: the busiest GPU decides, as when
    the store gives one row per allocation and time in order."""
    ts = [h(i / 4) for i in range(6)]  # every 15 min
    busy = [0.5, 0.0, 0.0, 0.0, 0.4, 0.0]  # the busier GPU; the other idles throughout
    rows = [("s", t, b) for t, b in zip(ts, busy)] + [("s", t, 0.0) for t in ts]
    rows += [("t", h(0), 0.0), ("t", h(1.5), 0.9)]
    samples = pl.DataFrame(rows[::-1], schema=["alloc_id", "ts", "sm_active"], orient="row")
    allocs = allocations(
        alloc("s", "n1", 8, "high", 0, None, sleepable=True),
        alloc("t", "n2", 8, "high", 0, None, sleepable=True),
    )
    found = sleep_intervals(samples, allocs, h(0), h(3), 0.05, 1800)
    # s idle from 0h15 to the busy 1h00 sample: asleep 0h45-1h00; idle again at 1h15 to
    # its last sample and one step: 1h15-1h30, shorter than 30 min. t idle 0h00-1h30:
    # asleep 0h30-1h30.
    assert found.rows() == [("s", h(0.75), h(1)), ("t", h(0.5), h(1.5))]
    one_per_time = samples.group_by("alloc_id", "ts").agg(pl.col("sm_active").max())
    assert harvest._one_per_alloc_and_time(one_per_time.sort("alloc_id", "ts"))
    assert not harvest._one_per_alloc_and_time(samples.sort("alloc_id", "ts"))  # two per ts
    assert not harvest._one_per_alloc_and_time(one_per_time.sort("ts"))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "z"]),
            st.integers(0, 12),
            st.sampled_from([0.0, 0.01, 0.04, 0.2, 0.9]),
        ),
        max_size=40,
    ),
    st.sampled_from([0, 900, 1800]),
)
def test_sleeps_do_not_depend_on_the_rows_order_or_grouping(rows, idle_for) -> None:
    """The same sleeps whether the samples come one row per allocation and time in
    order (as the store's query gives them) or several rows per time, shuffled."""
    samples = pl.DataFrame(
        [(a, h(t / 4), sm) for a, t, sm in rows],
        schema={"alloc_id": pl.String, "ts": pl.Datetime("us"), "sm_active": pl.Float64},
        orient="row",
    )
    allocs = allocations(
        alloc("a", "n1", 8, "high", 0, None, sleepable=True),
        alloc("b", "n1", 4, "high", 0.5, 2.5, sleepable=True),
        alloc("c", "n2", 8, "high", 0, None),  # not sleepable
    )
    grouped = samples.group_by("alloc_id", "ts").agg(pl.col("sm_active").max())
    ordered = grouped.sort("alloc_id", "ts")
    expected = sleep_intervals(ordered, allocs, h(0), h(3), 0.05, idle_for)
    for frame in (samples, samples.reverse(), grouped.reverse()):
        assert sleep_intervals(frame, allocs, h(0), h(3), 0.05, idle_for).equals(expected)


# --------------------------------------------------------------- invariants as properties

LP_GPUS = st.sampled_from([0.25, 0.5, 1.0, 2.0, 2.5, 4.0, 8.0])


@st.composite
def fleets(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """2-4 nodes in 1-2 domains; high priority laid out in lanes (so it fits alone);
    low-priority jobs and gangs anywhere; sleeps on sleepable high-priority work."""
    n = draw(st.integers(2, 4))
    fleet = nodes(*[(f"n{i}", 8, f"sw{i % 2}") for i in range(n)])
    rows: list[tuple[object, ...]] = []
    sleeping: list[tuple[str, float, float]] = []
    k = 0
    for i in range(n):
        left = 8
        while left and draw(st.booleans()):
            size = draw(st.sampled_from([s for s in (1, 2, 4, 8) if s <= left]))
            left -= size
            t = draw(st.sampled_from([-1.0, 0.0, 0.5, 1.0]))
            while t < 10:
                length = draw(st.sampled_from([0.5, 1.0, 2.0, 3.0]))
                sleepable = draw(st.booleans())
                rows.append(alloc(f"h{k}", f"n{i}", size, "high", t, t + length,
                                  sleepable=sleepable))  # fmt: skip
                if sleepable and length >= 1 and draw(st.booleans()):
                    s = t + draw(st.sampled_from([0.0, 0.25, 0.5]))
                    sleeping.append((f"h{k}", s, t + length - draw(st.sampled_from([0.0, 0.25]))))
                k += 1
                t += length + draw(st.sampled_from([0.0, 0.25, 1.0]))
    for j in range(draw(st.integers(1, 8))):
        start = draw(st.sampled_from([-0.5, 0.0, 0.25, 1.0, 2.5, 4.0, 6.0]))
        length = draw(st.sampled_from([0.5, 1.0, 2.0, 5.0]))
        ckpt = draw(st.sampled_from([None, 900.0, 3600.0]))
        pods = draw(st.sampled_from([1, 1, 2]))
        gpus = draw(LP_GPUS)
        for p in range(pods):
            rows.append(alloc(f"l{j}/{p}", f"n{p % n}", gpus, "low", start, start + length,
                              job=f"L{j}", ckpt=ckpt))  # fmt: skip
    return fleet, allocations(*rows), sleeps(*[s for s in sleeping if s[2] > s[1]])


def _awake(allocs: pl.DataFrame, result: harvest.HarvestResult) -> pl.DataFrame:
    """Fixed work as replayed, minus the replayed lending intervals."""
    pieces = []
    lent = result.lending
    for alloc_id, _node_id, start, end in result.high.iter_rows():
        row = allocs.filter(pl.col("alloc_id") == alloc_id)
        cuts = sorted(
            lent.filter(pl.col("alloc_id") == alloc_id).select("start_time", "end_time").rows()
        )
        t = start
        for s, e in [*cuts, (end, end)]:
            if s > t:
                pieces.append(row.with_columns(
                    pl.lit(t).alias("start_time"), pl.lit(s).alias("end_time")))  # fmt: skip
            t = max(t, e)
    return pl.concat(pieces) if pieces else allocs.clear()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets(), st.sampled_from(harvest.POLICIES), st.integers(0, 3))
def test_invariants(case, policy: str, seed: int) -> None:
    fleet, allocs, sleeping = case
    result = replay_harvest(fleet, allocs, sleeping, HarvestOptions(policy=policy, seed=seed),
                            h(0), h(12))  # fmt: skip
    high = allocs.filter(pl.col("priority") == "high")

    # high-priority work runs exactly as recorded (clipped to the window), on its node
    expected = high.filter((pl.col("end_time") > h(0)) & (pl.col("start_time") < h(12))).select(
        "alloc_id", "node_id",
        pl.max_horizontal("start_time", pl.lit(h(0))).alias("start_time"),
        pl.min_horizontal("end_time", pl.lit(h(12))).alias("end_time"),
    ).sort("alloc_id")  # fmt: skip
    assert result.high.rows() == expected.rows()

    # capacity is never exceeded: awake fixed work plus every low-priority run
    runs = result.segments.select(
        pl.col("job_id").alias("alloc_id"), "node_id", "gpus", "cpus", "memory_gib",
        pl.lit("low").alias("priority"), "start_time", "end_time",
    )  # fmt: skip
    held = pl.concat([_awake(allocs, result).select(runs.columns), runs])
    if held.height:
        peaks = occupancy.peak_occupancy(fleet, held, h(0), h(12))
        assert (peaks["gpus_peak"] <= 8).all()

    # each job finishes with exactly its run time of work, or is reported unfinished
    worked = (
        result.segments.unique(["job_id", "start_time", "end_time"])  # one row per run
        .group_by("job_id")
        .agg(((pl.col("end_time") - pl.col("start_time")).dt.total_microseconds() / 1e6)
             .sum().alias("ran_s"))
    )  # fmt: skip
    lost = result.victims.group_by("job_id").agg(pl.col("lost_s").sum())
    jobs = result.jobs.join(worked, on="job_id", how="left").join(lost, on="job_id", how="left")
    for job_id, arrival, finish, need, done, ran, lost_s, resumed in jobs.select(
        "job_id", "arrival", "finish", "need_s", "done_s", "ran_s", "lost_s", "resumed"
    ).iter_rows():
        # work done before the window counts if the job went on from there
        before = max(0.0, (h(0) - arrival).total_seconds()) if resumed else 0.0
        kept = (ran or 0.0) + before - (lost_s or 0.0)
        if finish is not None:
            assert kept == pytest.approx(need, abs=1e-3), job_id
        else:
            assert kept <= need + 1e-3 and done == pytest.approx(kept, abs=1e-3), job_id

    # GPU-hours add up
    lp = (result.segments["gpus"] * (result.segments["end_time"] - result.segments["start_time"])
          .dt.total_microseconds() / 3.6e9).sum()  # fmt: skip
    assert result.lp_gpu_hours == pytest.approx(lp, abs=1e-6)
    if (allocs["gpus"] % 1 == 0).all():  # shares occupy whole GPUs: no plain sum then
        assert result.allocated_gpu_hours == pytest.approx(
            result.allocated_high_gpu_hours + result.lp_gpu_hours - result.harvested_gpu_hours,
            abs=1e-6,
        )
    assert result.harvested_gpu_hours <= result.standby_gpu_hours + 1e-9
    assert result.allocated_gpu_hours <= result.healthy_gpu_hours + 1e-9
    physical = occupancy.occupied_gpu_seconds(fleet, high, h(0), h(12))
    assert result.allocated_high_gpu_hours == pytest.approx(
        physical["gpu_seconds_high"].sum() / 3600, abs=1e-6
    )
    assert result.preemptions == result.victims.height
    assert result.overcommitted == 0


# --------------------------------------------------------------- the store and the CLI

TELEMETRY_CSV = "ts,node_id,gpu_index,sm_active,mem_used,alloc_id\n" + "".join(
    f"2026-01-01T{q // 4:02d}:{q % 4 * 15:02d}:00Z,n2,{g},{0.4 if q < 32 else 0.001},0.5,"
    f"{'a4' if g < 6 else ''}\n"
    for q in range(48)
    for g in range(8)
)


def test_cli_json_document_and_recorded_run(tmp_path: Path, tiny_dir: Path) -> None:
    db = tmp_path / "fleet.duckdb"
    assert runner.invoke(app, ["ingest", str(tiny_dir), "--db", str(db)]).exit_code == 0
    result = runner.invoke(app, ["whatif", "harvesting", "--db", str(db), "--json",
                                 "--policy", "spotgpu", "--policy", "newest"])  # fmt: skip
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["schema"] == "fleetaudit.harvesting/1"
    assert set(document["window"]) == {"start", "end", "data", "shortened_from_s", "note"}
    spec_keys = {"policy", "allocation_rate_high", "allocation_rate", "standby_gpu_hours",
                 "harvested_share", "lp_completion_s", "preemptions", "forced_kills",
                 "lost_gpu_hours", "unfinished"}  # fmt: skip
    assert [p["policy"] for p in document["policies"]] == ["spotgpu", "newest"]
    for entry in document["policies"]:
        assert spec_keys <= set(entry)
        assert set(entry["lp_completion_s"]) == {"mean", "p50", "p90"}
        assert entry["standby_gpu_hours"] == 0.0
    # the tiny fleet has no telemetry: nothing sleeps, and the document says so
    assert document["telemetry"] == {"samples": 0, "sleeps": 0}
    assert "nothing sleeps" in document["notes"][0]
    with open_store(db, read_only=True) as store:
        runs = api.latest_whatif_runs(store)
    assert runs["harvesting"].document == document
    assert runs["harvesting"].options["policies"] == ["spotgpu", "newest"]


def test_cli_table_records_the_run_too(tmp_path: Path, tiny_dir: Path) -> None:
    db = tmp_path / "fleet.duckdb"
    write(tmp_path / "in" / "telemetry.csv", TELEMETRY_CSV)
    runner.invoke(app, ["ingest", str(tiny_dir), "--db", str(db)])
    assert runner.invoke(app, ["ingest", str(tmp_path / "in"), "--db", str(db)]).exit_code == 0
    result = runner.invoke(app, ["whatif", "harvesting", "--db", str(db), "--since", "12h",
                                 "--at", "2026-01-01T12:00:00Z"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "spotgpu" in result.stdout and "random" in result.stdout
    assert "nothing sleeps" not in result.stderr
    with open_store(db, read_only=True) as store:
        recorded = api.latest_whatif_runs(store)["harvesting"]
    assert len(recorded.document["policies"]) == 4
    # a4 (6 GPUs, sleepable, on n2 from 06:00) idles from 08:00 to its last sample
    # (11:45) and one step: asleep 08:30-12:00. Rows are attributed by alloc_id
    # (GPUs 0-5) and by node (GPUs 6-7, no alloc_id).
    assert recorded.document["telemetry"]["sleeps"] == 1
    assert recorded.document["policies"][0]["standby_gpu_hours"] == pytest.approx(6 * 3.5)


def test_whatif_harvesting_api_on_a_window_without_telemetry(
    tmp_path: Path, tiny_dir: Path
) -> None:
    options = api.StoreOptions(tmp_path / "fleet.duckdb")
    api.ingest_paths(options, [tiny_dir])
    result = whatif_harvesting(options, HarvestRun(policies=("smallest",), record=False))
    assert result.sleeps == 0 and result.notes
    with open_store(options.db, read_only=True) as store:
        assert "harvesting" not in api.latest_whatif_runs(store)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "oldest"], "--policy: unknown 'oldest'"),
        (["--since", "soon"], "--since: 'soon' is not a duration"),
        (["--eviction-delay-p95", "5s"], "--eviction-delay-p95 must be at least the mean"),
        (["--idle-sm", "2"], "--idle-sm: give an SM-active level between 0 and 1"),
        (["--scenario", "nope"], "--scenario: no scenario named 'nope'"),
    ],
)
def test_cli_errors_are_one_line_exit_2(tmp_path: Path, tiny_dir: Path, args, message) -> None:
    db = tmp_path / "fleet.duckdb"
    runner.invoke(app, ["ingest", str(tiny_dir), "--db", str(db)])
    result = runner.invoke(app, ["whatif", "harvesting", "--db", str(db), *args])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith(f"fleetaudit: error: {message}")
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("start", "end", "has_a3"),
    [
        (datetime(2025, 12, 1), datetime(2026, 2, 1), True),
        (datetime(2026, 1, 1, 18), datetime(2026, 1, 1, 20), False),  # a3 ends at 18:00
        (datetime(2026, 1, 1, 0), datetime(2026, 1, 1, 11), False),  # a3 starts at 11:00
    ],
)
def test_the_harvest_read_is_the_overlapping_allocations_less_workload_and_tenant(
    tmp_path: Path, tiny_dir: Path, start: datetime, end: datetime, has_a3: bool
) -> None:
    """harvest_allocations.sql copies allocations_overlapping.sql but for two columns:
    the same rows, window for window, so that the copies cannot drift apart."""
    options = api.StoreOptions(tmp_path / "fleet.duckdb")
    api.ingest_paths(options, [tiny_dir])
    with api.reading(options) as store:
        read = {
            name: store.query(name, start=start, end=end, scenario=None)
            for name in ("harvest_allocations", "allocations_overlapping")
        }
    harvested, overlapping = read["harvest_allocations"], read["allocations_overlapping"]
    assert harvested.columns == [c for c in overlapping.columns if c not in ("workload", "tenant")]
    assert not harvested.is_empty()
    less = overlapping.drop("workload", "tenant")
    assert harvested.sort("alloc_id").equals(less.sort("alloc_id"))
    assert ("a3" in harvested["alloc_id"].to_list()) == has_a3


def test_help() -> None:
    result = runner.invoke(app, ["whatif", "harvesting", "--help"])
    assert result.exit_code == 0
    for option in ("--policy", "--since", "--idle-sm", "--idle-for", "--eviction-delay",
                   "--kill-after", "--seed", "--scenario", "--json"):  # fmt: skip
        assert option in result.stdout


def test_a_failed_telemetry_read_on_the_second_thread_is_one_line_exit_2(
    tmp_path: Path, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fleetaudit.core.errors import QueryError
    from fleetaudit.model.store import Store

    db = tmp_path / "fleet.duckdb"
    runner.invoke(app, ["ingest", str(tiny_dir), "--db", str(db)])
    query = Store.query

    def failing(self: Store, name: str, /, **params: object) -> pl.DataFrame:
        if name == "sleepable_telemetry_between":
            raise QueryError("telemetry unreadable")
        return query(self, name, **params)

    monkeypatch.setattr(Store, "query", failing)
    result = runner.invoke(app, ["whatif", "harvesting", "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == "fleetaudit: error: telemetry unreadable"


def test_ctrl_c_while_preparing_stops_the_telemetry_read_before_the_store_closes(
    tmp_path: Path, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading
    import time

    from fleetaudit.api import harvest_api
    from fleetaudit.model.store import Store

    options = api.StoreOptions(tmp_path / "fleet.duckdb")
    api.ingest_paths(options, [tiny_dir])
    events: list[str] = []
    reading = threading.Event()

    def slow_read(store: Store, *_args: object) -> None:
        reading.set()
        try:  # about half a minute unless interrupted
            store.con.execute("SELECT sum(range) FROM range(20000000000)").fetchall()
            events.append("read to its end")
        except Exception:
            events.append("read interrupted")
            raise

    def interrupted_preparation(*_args: object) -> None:
        assert reading.wait(10)
        time.sleep(0.5)  # the query is under way
        raise KeyboardInterrupt

    close = Store.close

    def closing(self: Store) -> None:
        events.append("store closed")
        close(self)

    monkeypatch.setattr(harvest_api, "_read_telemetry", slow_read)
    monkeypatch.setattr(harvest, "prepare_replay", interrupted_preparation)
    monkeypatch.setattr(Store, "close", closing)
    began = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        whatif_harvesting(options, HarvestRun(policies=("smallest",), record=False))
    assert time.perf_counter() - began < 10
    assert events == ["read interrupted", "store closed"]


CTRL_C_SCRIPT = """
import sys
from fleetaudit.api import harvest_api
from fleetaudit.cli import main

def slow_read(store, *args):
    print("reading", file=sys.stderr, flush=True)
    store.con.execute("SELECT sum(range) FROM range(40000000000)").fetchall()  # ~30 s

harvest_api._read_telemetry = slow_read
sys.argv = ["fleetaudit", "whatif", "harvesting", "--db", sys.argv[1]]
main()
"""


def test_ctrl_c_is_heard_while_the_preparation_waits_for_the_sleeps(
    tmp_path: Path, tiny_dir: Path
) -> None:
    """Ctrl-C (SIGINT to the process) while the main thread waits for the second
    thread's read: the command exits 130 within seconds, not when the read is done."""
    import os
    import signal
    import subprocess
    import sys
    import time

    db = tmp_path / "fleet.duckdb"
    assert runner.invoke(app, ["ingest", str(tiny_dir), "--db", str(db)]).exit_code == 0
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    with subprocess.Popen(
        [sys.executable, "-c", CTRL_C_SCRIPT, str(db)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
    ) as proc:  # fmt: skip
        assert proc.stderr is not None
        while "reading" not in proc.stderr.readline():
            assert proc.poll() is None, "the command ended before reading"
        time.sleep(1.0)  # the main thread is waiting for the sleeps by now
        proc.send_signal(signal.SIGINT)
        began = time.perf_counter()
        _out, err = proc.communicate(timeout=60)
        assert time.perf_counter() - began < 10
    assert proc.returncode == 130
    interrupted = "fleetaudit: error: interrupted; the store keeps its last committed state"
    assert err.splitlines()[-1] == interrupted
