"""``fleetaudit whatif compaction --over``: a week of hourly rounds at ASI scale.

    python -m benchmarks.bench_compaction_over_time [--nodes 19400] [--days 30]
        [--over-days 7] [--every-hours 1] [--moves-per-hour 0.1%] [--queue kubernetes]
        [--work DIR]

Generates the fleet once (Parquet, no telemetry) into a store in --work, then
times one over-time run ending at the export time (target < 10 min for 7 days
of hourly rounds at ASI scale). It prints the time split into the two replays'
rounds (the searches) and the rest, the rounds, moves, the time-averaged partial
nodes with and without compaction, the CPU time and the peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import time
from dataclasses import replace
from pathlib import Path

from benchmarks.fleets import bare_fleet_store, peak_rss_mib
from fleetaudit.api.compaction_api import CompactionRun, whatif_compaction
from fleetaudit.core.options import parse_budget
from fleetaudit.whatif import compaction
from fleetaudit.whatif.compaction_over_time import OverTimeOptions


def _cpu_s() -> float:
    """User + system seconds of this process and its finished worker processes."""
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usage)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=19_400)
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--over-days", type=float, default=7.0)
    parser.add_argument("--every-hours", type=float, default=1.0)
    parser.add_argument("--moves-per-hour", default="0.1%", help="GPUs, or a share (0.1%%)")
    parser.add_argument("--queue", default="kubernetes")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path("bench-out/overtime"))
    args = parser.parse_args()
    store = bare_fleet_store(args.work, args.nodes, args.days)
    budget, unit = parse_budget(args.moves_per_hour)
    searched = [0.0, 0]
    original = compaction.compact

    def timed(*a, **k):  # the rounds' searches (and the one-instant search at the end)
        t = time.perf_counter()
        try:
            return original(*a, **k)
        finally:
            searched[0] += time.perf_counter() - t
            searched[1] += 1

    compaction.compact = timed  # type: ignore[assignment]
    run = CompactionRun(
        over_s=args.over_days * 86400,
        jobs=args.jobs,
        over_time=replace(
            OverTimeOptions(), every_s=args.every_hours * 3600,
            moves_per_hour=budget, budget_unit=unit, queue=args.queue,
        ),  # fmt: skip
    )
    cpu_before = _cpu_s()
    started = time.perf_counter()
    report = whatif_compaction(store, run)
    seconds = time.perf_counter() - started
    over = report.over_time
    assert over is not None
    moves = sum(len(t.moves) for t in over.ticks)
    print(
        f"{args.nodes:,} nodes, {args.over_days:g} days, a round every {args.every_hours:g} h, "
        f"{args.moves_per_hour} moved per hour, queue {args.queue}: {seconds:.1f} s "
        "(target < 600 s)"
    )
    print(
        f"  searches {searched[0]:.1f} s over {searched[1]} calls; the rest (two replays, "
        f"observing, reading the store) {seconds - searched[0]:.1f} s"
    )
    reduction = over.partial_reduction_pct
    print(
        f"  {len(over.ticks)} rounds, {moves:,} moves, {over.migration.gpus_moved:,.1f} GPUs moved; "
        f"partial nodes {over.partial_without:,.1f} -> {over.partial_with:,.1f} "
        f"({'-' if reduction is None else f'{reduction:+.1f}%'}, paper -20.2%); "
        f"arrived {over.arrived:,}, started {over.started[0]:,} / {over.started[1]:,}"
    )
    cpu = _cpu_s() - cpu_before
    peak = peak_rss_mib()
    print(f"  CPU (user + sys, worker processes included) {cpu:.1f} s; peak RSS {peak:,.0f} MiB")


if __name__ == "__main__":
    main()
