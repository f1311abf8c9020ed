"""``fleetaudit whatif placement`` by time at ASI scale: a 30-day window, per policy and queue.

    python -m benchmarks.bench_replay [--nodes 19400] [--days 90] [--since-days 30]
        [--policy best-fit ...] [--queue fifo backfill] [--work DIR] [--compare]

Generates the fleet once (Parquet, no telemetry) and ingests it into a store in
--work (the same one as ``bench_shapes``), then times each (policy, queue)
replay of the window ending at the export time, from the recorded state, one
at a time in this process (target < 5 min for 30 days), and prints the wall and
CPU time (user + system) with the load average before and after, what started,
the allocation at the start and the end of the window, and the peak RSS.

``--compare`` also runs the engine as it was before the indexed backfill
(``Replay(..., index=False)``: the retry pass's memo, one check per waiting
shape; ``--compare memo`` the engine before the memo, ``Replay(..., memo=False)``),
times it alike, and checks that both give the same replay frame by frame: every
placement (node, GPUs, start and end), every wait and failure, and the curve.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from benchmarks.fleets import bare_fleet_store, peak_rss_mib
from fleetaudit.api import load_frames, reading, resolve_at
from fleetaudit.whatif.placement import PlacementOptions, Replay, ReplayResult


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _timed(label: str, replay: Callable[[], ReplayResult]) -> ReplayResult:
    """Run ``replay`` (its preparation and its events), printing wall and CPU time."""
    load, wall, cpu = os.getloadavg()[0], time.perf_counter(), _cpu()
    result = replay()
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    curve = result.curve
    print(
        f"{label}: wall {wall:.1f} s, CPU {cpu:.1f} s (target < 300 s), load {load:.1f} -> "
        f"{os.getloadavg()[0]:.1f}; allocated {curve['allocated_pct'][0]:.1f}% -> "
        f"{curve['allocated_pct'][-1]:.1f}%, started {result.started:,}, "
        f"failed or waiting {result.failed:,}",
        flush=True,
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=19_400)
    parser.add_argument("--days", type=float, default=90.0)
    parser.add_argument("--since-days", type=float, default=30.0)
    parser.add_argument("--policy", nargs="*", default=["best-fit"])
    parser.add_argument("--queue", nargs="*", default=["fifo", "backfill"])
    parser.add_argument("--work", type=Path, default=Path("bench-out/shapes"))
    parser.add_argument("--compare", nargs="?", const="index", choices=["index", "memo"])
    args = parser.parse_args()
    store = bare_fleet_store(args.work, args.nodes, args.days)
    with reading(store) as opened:
        at = resolve_at(opened, None)
        start = at - timedelta(days=args.since_days)
        nodes, allocations = load_frames(opened, start, at)
        requests = opened.query("requests_all")
    for policy in args.policy:
        for queue in args.queue:
            label = f"{policy} {queue} {args.since_days:g} days"
            options = PlacementOptions(policy=policy)
            frames = (nodes, allocations, requests, options, start, at, False, queue)
            results = [_timed(label, lambda f=frames: Replay(*f).run())]
            if args.compare:
                before = {"index": {"index": False}, "memo": {"memo": False}}[args.compare]
                results.append(
                    _timed(
                        f"{label}, before the {args.compare}",
                        lambda f=frames, k=before: Replay(*f, **k).run(),  # type: ignore[arg-type]
                    )
                )
                after, before = results
                same = (
                    after.allocations.equals(before.allocations)
                    and after.waits.equals(before.waits)
                    and after.curve.equals(before.curve)
                    and (after.started, after.failed) == (before.started, before.failed)
                )
                print(f"{label}: the same replay frame by frame: {'yes' if same else 'NO'}")
    peak = peak_rss_mib()
    print(f"peak RSS {peak:,.0f} MiB")


if __name__ == "__main__":
    main()
