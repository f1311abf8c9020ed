"""The by-time replay's queue disciplines, holds and preemption, on hand-worked queues.

Every figure below is worked by hand in the comments (minutes from T0); the fleets
are the small ones of ``test_placement``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl
import pytest

from fleetaudit.whatif.placement import DISCIPLINES, QUEUES, PlacementOptions, simulate_replay
from tests.test_placement import NO_ALLOCATIONS, PAIR, T0, WINDOW, make_nodes, recorded

ONE = make_nodes(("a", "T4", 2, 16.0, None, "s1"))


def requests(*rows: tuple) -> pl.DataFrame:
    """rows of (gpus, submit minute, duration minutes or None, priority, extra columns)."""
    frame = pl.DataFrame(
        {
            "request_id": [f"r{i + 1}" for i in range(len(rows))],
            "gpus": [float(r[0]) for r in rows],
            "cpus": [1.0] * len(rows),
            "submit_time": [T0 + timedelta(minutes=r[1]) for r in rows],
            "duration_s": [None if r[2] is None else r[2] * 60.0 for r in rows],
            "priority": [r[3] if len(r) > 3 else "high" for r in rows],
        },
        schema_overrides={"duration_s": pl.Float64},
    )
    for name in {k for r in rows if len(r) > 4 for k in r[4]}:
        values = [r[4].get(name) if len(r) > 4 else None for r in rows]
        frame = frame.with_columns(pl.Series(name, values))
    return frame


def run(reqs, queue, allocations=NO_ALLOCATIONS, nodes=PAIR, **kw):
    return simulate_replay(
        nodes, allocations, reqs, PlacementOptions(policy="best-fit"), *WINDOW, False, queue, **kw
    )


def waits(result) -> dict[str, float | None]:
    return {k: (None if v is None else v / 60) for k, v in result.waits.select(
        "request_id", "wait_s").iter_rows()}  # fmt: skip


def minute(m: float) -> datetime:
    return T0 + timedelta(minutes=m)


@pytest.mark.parametrize("queue", QUEUES)
def test_a_gang_no_empty_fleet_holds_is_never_and_blocks_nobody(queue: str) -> None:
    # r1: 4 pods of 2 GPUs in one switch: the pair (two 2-GPU nodes) never holds it,
    # even empty. It leaves the queue at once, listed; r2 (2 GPUs) behind it starts
    # at once under every discipline, strict ones included.
    reqs = requests((8, 0, 10), (2, 1, 10)).with_columns(
        gpus_per_pod=pl.Series([2.0, 2.0]), locality=pl.Series(["switch", "node"])
    )
    result = run(reqs, queue)
    assert result.never == ("r1",)
    assert waits(result) == {"r1": None, "r2": 0.0}
    assert (result.rejected, result.waiting, result.started) == (1, 0, 1)


@pytest.mark.parametrize("queue", ["kubernetes", "slurm-backfill", "kueue-best-effort-fifo"])
def test_a_high_priority_arrival_evicts_the_low_priority_work_it_needs(queue: str) -> None:
    # One node of 2 GPUs. r1 (low, 2 GPUs, 60 min, a checkpoint every 4 min) starts at 0.
    # r2 (high, 1 GPU, 20 min) arrives at 10: nothing is free, so r1 is evicted. r1 loses
    # the 10 % 4 = 2 minutes since its last checkpoint (2 GPUs x 2 min = 1/15 GPU-hour),
    # keeps 8 minutes of work and waits again: r2 leaves at 30 and r1 runs its last
    # 52 minutes from 30, to 82.
    reqs = requests(
        (2, 0, 60, "low", {"checkpoint_s": 240.0}), (1, 10, 20, "high", {"checkpoint_s": None})
    )
    result = run(reqs, queue, nodes=ONE)
    assert result.preempt
    assert waits(result) == {"r1": 0.0, "r2": 0.0}
    assert result.preemptions.rows() == [("r1", minute(10), "r2", pytest.approx(2 * 2 / 60))]
    assert result.lost_gpu_hours == pytest.approx(1 / 15)
    r1 = result.allocations.filter(pl.col("request_id") == "r1").sort("start_time")
    assert r1.select("start_time", "end_time").rows() == [
        (minute(0), minute(10)),
        (minute(30), minute(82)),
    ]
    assert result.started == 2  # a restart is not a second start


def test_the_victim_is_the_work_that_loses_least() -> None:
    # Two low-priority 1-GPU pods on the node: r1 from 0 with a checkpoint every 5 min,
    # r2 from 8 without checkpoints. At 10, high-priority r3 needs one GPU: evicting r1
    # loses 1 x (10 % 5) = 0, r2 1 x 2 minutes: r1 goes, though it is the older.
    reqs = requests(
        (1, 0, 60, "low", {"checkpoint_s": 300.0}),
        (1, 8, 60, "low", {"checkpoint_s": None}),
        (1, 10, 5, "high", {"checkpoint_s": None}),
    )
    result = run(reqs, "kubernetes", nodes=ONE)
    assert result.preemptions.select("request_id", "by", "lost_gpu_hours").rows() == [
        ("r1", "r3", 0.0)
    ]


def test_without_preemption_the_high_priority_request_waits() -> None:
    reqs = requests((2, 0, 60, "low"), (1, 10, 20, "high"))
    result = run(reqs, "kubernetes", nodes=ONE, preempt=False)
    assert not result.preempt and result.preemptions.height == 0
    assert waits(result) == {"r1": 0.0, "r2": 50.0}


def test_priority_orders_the_queue_before_age() -> None:
    # The node is full until 10. r2 (low, minute 1) and r3 (high, minute 2) wait for its
    # 2 GPUs; at 10 the high-priority one starts first though it came later.
    reqs = requests((2, 0, 10), (2, 1, 10, "low"), (2, 2, 10))
    result = run(reqs, "kubernetes", nodes=ONE, preempt=False)
    assert waits(result) == {"r1": 0.0, "r2": 19.0, "r3": 8.0}
    fifo = run(reqs, "backfill", nodes=ONE)  # the plain queues know no priority
    assert waits(fifo) == {"r1": 0.0, "r2": 9.0, "r3": 18.0}


# The reservation: a holds 2 GPUs until 30, b 1 GPU until 20 (recorded).
HELD = recorded(("x", "a", 2.0, -60, 30), ("y", "b", 1.0, -60, 20))


def test_backfill_may_not_delay_the_heads_reservation() -> None:
    # r1 (2 GPUs, minute 1) fits nowhere: a is full until 30, b has one GPU free until y
    # leaves at 20. Its reservation: b, from 20. r2 (1 GPU, limit 30 min, minute 2) fits
    # b now but would hold it until 32: it may not, and waits. r3 (1 GPU, limit 10 min,
    # minute 3) ends by 13, before 20: it backfills b at once. At 20 r1 starts on b; r2
    # waits for a (30).
    reqs = requests((2, 1, 10), (1, 2, 30), (1, 3, 10))
    slurm = run(reqs, "slurm-backfill", HELD)
    assert waits(slurm) == {"r1": 19.0, "r2": 28.0, "r3": 0.0}
    starts = dict(slurm.allocations.filter(~pl.col("recorded")).select(
        "request_id", "node_id").iter_rows())  # fmt: skip
    assert starts == {"r1": "b", "r2": "a", "r3": "b"}
    assert slurm.reservations >= 1
    # Without a reservation (kubernetes) r2 takes b's free GPU at once, r3 waits for y
    # (20), and the head r1 waits until a frees at 30: r2 delayed it.
    kube = run(reqs, "kubernetes", HELD)
    assert waits(kube) == {"r1": 29.0, "r2": 0.0, "r3": 17.0}


def test_kueue_strict_blocks_behind_the_head_and_best_effort_does_not() -> None:
    # Quota: the pair's 4 GPUs; x holds 2 of them (on a) until 30. r1 asks 4 GPUs (two
    # 2-GPU pods, any node) at 1: the quota cannot admit it until 30. r2 (1 GPU, 10 min)
    # at 2: best effort admits it at once (b); strict keeps it behind r1, which is
    # admitted and starts at 30 (10 min), then r2 at 40.
    reqs = requests((4, 1, 10), (1, 2, 10)).with_columns(
        gpus_per_pod=pl.Series([2.0, 1.0]), locality=pl.Series(["any", "node"])
    )
    allocations = recorded(("x", "a", 2.0, -60, 30))
    best = run(reqs, "kueue-best-effort-fifo", allocations)
    strict = run(reqs, "kueue-strict-fifo", allocations)
    assert waits(best) == {"r1": 29.0, "r2": 0.0}
    assert waits(strict) == {"r1": 29.0, "r2": 38.0}


def test_kueue_requeues_an_admitted_request_whose_pods_find_no_nodes() -> None:
    # x and y hold one GPU each of a and b: the quota (4) has 2 free. r1 asks two 1-GPU
    # pods on one node at 1: the quota admits it, but no node has both GPUs free. After
    # Kueue's 5 minutes (waitForPodsReady) it gives the quota back and is admitted again
    # after a backoff of 1, 2, 4, then 8 minutes: admitted at 1, 7, 14, 23 and 36 (each
    # time out 5 minutes later). y left b at 30, so at 36 r1 starts there.
    reqs = requests((2, 1, 10)).with_columns(
        gpus_per_pod=pl.Series([1.0]), locality=pl.Series(["node"])
    )
    allocations = recorded(("x", "a", 1.0, -60, None), ("y", "b", 1.0, -60, 30))
    result = run(reqs, "kueue-best-effort-fifo", allocations)
    assert waits(result) == {"r1": 35.0}
    assert result.allocations.filter(pl.col("request_id") == "r1")["node_id"].to_list() == ["b", "b"]


def test_a_request_that_finds_room_is_held_until_its_recorded_start() -> None:
    # Holds decided by the record: r1 (2 GPUs, minute 0) finds room but the record
    # started it at 7, so it is held until 7; r2 and r3 (minute 1) are held until 2 and
    # 3 and take a and b. At 7 r1 finds no room and waits for capacity. r4 (minute 4)
    # finds no room on arrival: its wait is for capacity, so it is not held though the
    # record started it at 20; it came before r1 was ready, and takes a when r2 leaves
    # at 12; r1 takes b at 13.
    reqs = requests(
        (2, 0, 10, "high", {"start_time": minute(7)}),
        (2, 1, 10, "high", {"start_time": minute(2)}),
        (2, 1, 10, "high", {"start_time": minute(3)}),
        (2, 4, 10, "high", {"start_time": minute(20)}),
    )
    result = run(reqs, "kubernetes", hold="record")
    assert waits(result) == {"r1": 13.0, "r2": 1.0, "r3": 2.0, "r4": 8.0}
    us = {k: round((v - T0.timestamp() * 1e6) / 60e6, 6) for k, v in result.holds.items()}
    assert us == {"r1": 7.0, "r2": 2.0, "r3": 3.0}
    # A what-if reuses the baseline's holds: on a fleet with a third node, r4 is still
    # not held (it starts at once on c), r1 is held to 7 and then waits for a (12).
    three = PAIR.vstack(make_nodes(("c", "T4", 2, 16.0, None, "s1")))
    again = run(reqs, "kubernetes", nodes=three, hold=result.holds)
    assert waits(again) == {"r1": 12.0, "r2": 1.0, "r3": 2.0, "r4": 0.0}
    # and the empty edit gives the baseline back, start for start
    same = run(reqs, "kubernetes", hold=result.holds)
    assert same.allocations.equals(result.allocations) and same.waits.equals(result.waits)


def test_a_request_waiting_at_the_windows_start_joins_the_queue_then() -> None:
    # r0 was submitted 30 minutes before the window and the record had not started it
    # by the window's start: it joins the queue at the start, and its wait counts from
    # its submit time. r00 had started before the window: it is not replayed.
    reqs = requests((2, -30, 10, "high", {"start_time": None}),
                    (2, -40, 10, "high", {"start_time": minute(-5)}))  # fmt: skip
    result = run(reqs, "kubernetes")
    assert waits(result) == {"r1": 30.0}
    assert result.arrived == 1


def test_named_disciplines_are_the_operators() -> None:
    assert DISCIPLINES == ("kubernetes", "kueue-best-effort-fifo", "kueue-strict-fifo",
                           "slurm-backfill")  # fmt: skip
    assert QUEUES[-2:] == ("fifo", "backfill")


# -- the generated fleet: its recorded scheduler is what the default replay reproduces -------


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A generated fleet of 300 nodes over 4 days, and the demand of its last 2 days."""
    from fleetaudit.api import StoreOptions, ingest_paths, load_frames, reading, resolve_at
    from fleetaudit.inputs.generate import GenerateOptions, generate_fleet
    from fleetaudit.whatif.placement import window_demand

    out = tmp_path_factory.mktemp("generated")
    generate_fleet(out / "data", GenerateOptions(nodes=300, days=4.0, telemetry_days=0, seed=3))
    ingest_paths(StoreOptions(out / "store.duckdb"), [out / "data"])
    with reading(StoreOptions(out / "store.duckdb")) as store:
        at = resolve_at(store, None)
        nodes, allocations = load_frames(store, at - timedelta(days=2), at)
        requests = store.query("requests_all")
    return nodes, window_demand(nodes, allocations, requests, at - timedelta(days=2), at)


def test_the_default_replay_reproduces_a_generated_fleets_record(generated) -> None:
    from fleetaudit.whatif.placement import calibrate

    nodes, demand = generated
    record = demand.record
    assert record.arrived > 3000 and record.started > 0.98 * record.arrived
    calibration = calibrate(nodes, demand, keep_results=True)
    best = calibration.fit(calibration.best)
    assert best.within_tolerance, best.notes
    # the figures, spelt out: starts within 2%, waits within a factor 2
    replay = best.replay
    assert abs(replay.started - record.started) <= 0.02 * record.started
    assert record.wait_p50_s is not None and record.wait_p90_s is not None
    assert replay.wait_p50_s is not None and replay.wait_p90_s is not None
    assert record.wait_p50_s / 2 <= replay.wait_p50_s <= 2 * record.wait_p50_s
    assert record.wait_p90_s / 2 <= replay.wait_p90_s <= 2 * record.wait_p90_s
    # the plain FIFO queue, which drains the fleet behind a large gang, does not
    fifo = compare_queue(nodes, demand, "fifo")
    assert not fifo.within_tolerance
    # a what-if on the same fleet with the baseline's holds gives the baseline back
    from fleetaudit.whatif.placement import replay_demand

    result = calibration.results[calibration.best]
    again = replay_demand(nodes, demand, calibration.best, hold=result.holds)
    assert again.allocations.equals(result.allocations) and again.waits.equals(result.waits)
    # only the replays that could be chosen are kept (the others are let go as they lose)
    lowest = min(f.score for f in calibration.fits)
    kept = {f.discipline for f in calibration.fits if f.score <= lowest + 0.05}
    assert set(calibration.results) == kept and len(kept) < len(calibration.fits)


def compare_queue(nodes, demand, queue):
    from fleetaudit.whatif.placement import compare, replay_demand

    return compare(queue, replay_demand(nodes, demand, queue).figures(), demand.record)


# -- the command line ------------------------------------------------------------------------


def test_cli_calibrate_prints_every_discipline_beside_the_record(tmp_path) -> None:
    import json
    from pathlib import Path

    from typer.testing import CliRunner

    from fleetaudit.cli import app

    runner = CliRunner()
    db = str(tmp_path / "p.duckdb")
    folder = Path(__file__).parent / "data" / "placement_priority"
    assert runner.invoke(app, ["ingest", str(folder), "--db", db]).exit_code == 0
    args = ["whatif", "placement", "--db", db, "--at", "2026-01-01T03:00:00Z", "--since", "2h",
            "--policy", "best-fit"]  # fmt: skip
    result = runner.invoke(app, [*args, "--calibrate", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    calibration = doc["calibration"]
    assert calibration["chosen_by"] == "calibrated now"
    assert [d["discipline"] for d in calibration["disciplines"]] == list(DISCIPLINES)
    # r1, r2 and r3 arrive in the window and start on arrival, as recorded
    assert calibration["record"] | {"allocated_pct": None} == {
        "arrived": 3, "started": 3, "waiting_at_end": 0, "never": 0, "wait_p50_s": 0.0,
        "wait_p90_s": 0.0, "allocated_pct": None,
    }  # fmt: skip
    assert calibration["baseline"]["within_tolerance"] and doc["notes"] == []
    assert doc["queue"] == calibration["discipline"]
    # the next run reuses the recorded choice
    again = json.loads(runner.invoke(app, [*args, "--json"]).stdout)["calibration"]
    assert again["chosen_by"] == "calibration" and again["disciplines"] is None
    text = runner.invoke(app, args)
    assert "baseline: the recorded fleet replayed under" in text.output
    # the by-time options are refused with --fill, in one line
    refused = runner.invoke(app, ["whatif", "placement", "--db", db, "--fill", "50",
                                  "--calibrate"])  # fmt: skip
    assert refused.exit_code == 2 and "--calibrate" in refused.output
    unknown = runner.invoke(app, [*args, "--queue", "lifo"])
    assert unknown.exit_code == 2 and "--queue: use one of kubernetes" in unknown.output


def test_a_fits_score_and_tolerance_by_hand() -> None:
    """compare() picks the calibration's best discipline by its score. Record: 100
    started, waits p50 59 s and p90 1,199 s, curve (85, 90) %. Replay: 99 started
    (-1%: 0.5 of the 2% tolerance), p50 119 s ((119 + 1) / (59 + 1) = 2: log2 1, still
    within a factor 2), p90 299 s ((299 + 1) / (1199 + 1) = 0.25: log2 2, beyond it),
    curve (90, 80) % (gaps 5 and 10 points, mean 7.5: 1.5 units of 5 points).
    Score 0.5 + 1 + 2 + 1.5 = 5, outside the tolerance for the p90 alone."""
    from fleetaudit.whatif.placement.calibration import compare
    from fleetaudit.whatif.placement.record import QueueFigures

    curve = (T0, T0 + timedelta(hours=1))
    record = QueueFigures(100, 100, 0, 0, 59.0, 1199.0, curve, (85.0, 90.0))
    fit = compare("fifo", QueueFigures(100, 99, 1, 0, 119.0, 299.0, curve, (90.0, 80.0)), record)
    assert fit.started_gap_pct == pytest.approx(-1.0)
    assert (fit.wait_p50_ratio, fit.wait_p90_ratio) == pytest.approx((2.0, 0.25))
    assert fit.allocation_gap_pts == pytest.approx(7.5)
    assert fit.score == pytest.approx(5.0)
    assert not fit.within_tolerance
    assert fit.notes == ("wait p90 299 s is 0.25x the record's 1,199 s (beyond a factor 2)",)
    # on every boundary (starts 2% off, each wait a factor 2) a replay is still within
    edge = compare("fifo", QueueFigures(100, 102, 0, 0, 29.0, 2399.0, curve, (85.0, 90.0)), record)
    assert edge.within_tolerance and edge.notes == ()
    assert edge.score == pytest.approx(1 + 1 + 1)
