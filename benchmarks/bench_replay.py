"""``fleetaudit whatif placement`` by time at ASI scale: a 30-day window, per policy and queue.

    python -m benchmarks.bench_replay [--nodes 19400] [--days 90] [--since-days 30]
        [--policy best-fit ...] [--queue fifo backfill] [--work DIR]

Generates the fleet once (Parquet, no telemetry) and ingests it into a store in
--work (the same one as ``bench_shapes``), then times each (policy, queue)
replay of the window ending at the export time, from the recorded state, one
at a time in this process (target < 5 min for 30 days), and prints what
started, the allocation at the start and the end of the window, and the peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import time
from datetime import timedelta
from pathlib import Path

from benchmarks.fleets import generated_store
from fleetaudit.generate import GenerateOptions
from fleetaudit.placement_api import PlacementRun, whatif_placement


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=19_400)
    parser.add_argument("--days", type=float, default=90.0)
    parser.add_argument("--since-days", type=float, default=30.0)
    parser.add_argument("--policy", nargs="*", default=["best-fit"])
    parser.add_argument("--queue", nargs="*", default=["fifo", "backfill"])
    parser.add_argument("--work", type=Path, default=Path("bench-out/shapes"))
    args = parser.parse_args()
    store = generated_store(
        args.work,
        f"fleet-{args.nodes}-{args.days:g}",
        GenerateOptions(nodes=args.nodes, days=args.days, telemetry_days=0),
    )
    for policy in args.policy:
        for queue in args.queue:
            run = PlacementRun(
                policies=(policy,), queue=queue, since=timedelta(days=args.since_days)
            )
            started = time.perf_counter()
            result = whatif_placement(store, run)
            seconds = time.perf_counter() - started
            curve = result.curves[policy]
            first, last = curve.row(0, named=True), curve.row(-1, named=True)
            print(
                f"{policy} {queue} {args.since_days:g} days: {seconds:.1f} s (target < 300 s); "
                f"allocated {first['allocated_pct']:.1f}% -> {last['allocated_pct']:.1f}%, "
                f"started {int(last['started']):,}, failed or waiting {int(last['failed']):,}"
            )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:,.0f} MiB")


if __name__ == "__main__":
    main()
