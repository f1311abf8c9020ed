"""The calibrated replay at ASI scale: how close each queue discipline comes to the record, how fast.

    python -m benchmarks.bench_calibration [--nodes 19400] [--days 9] [--since-days 7]
        [--discipline kubernetes ...] [--work DIR]

Generates the fleet once (Parquet, no telemetry; ``generate``'s recorded scheduler is
what the replay must reproduce) and ingests it into a store in --work. Then, for each
discipline, in a child process of its own (so that its peak RSS is its own): reads the
window's frames from the store, reads the window's demand off the record
(``window_demand``) and replays it on the recorded fleet (``replay_demand``: the
baseline's placement and holds). It prints wall and CPU time (target: under 60 s and
4 GiB for 7 days at ASI scale), the load average before and after, and the replay's
figures beside the record's: started (within 2%), wait p50 and p90 (within a factor 2),
the allocation curve's mean gap, preemptions and reservations.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from benchmarks.fleets import bare_fleet_store, peak_rss_mib
from fleetaudit.core.options import QUEUE_DISCIPLINES


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _one(db: Path, since_days: float, discipline: str) -> None:
    """In the child: one discipline's calibrated replay, its figures as one JSON line."""
    from fleetaudit.api import StoreOptions, load_frames, reading, resolve_at
    from fleetaudit.whatif import placement

    wall, cpu = time.perf_counter(), _cpu()
    with reading(StoreOptions(db)) as store:
        at = resolve_at(store, None)
        start = at - timedelta(days=since_days)
        nodes, allocations = load_frames(store, start, at)
        requests = store.query("requests_all")
    read = time.perf_counter() - wall
    demand = placement.window_demand(nodes, allocations, requests, start, at)
    prepared = time.perf_counter() - wall
    result = placement.replay_demand(nodes, demand, discipline)
    fit = placement.compare(discipline, result.figures(), demand.record)
    print(json.dumps({
        "discipline": discipline, "wall_s": time.perf_counter() - wall, "cpu_s": _cpu() - cpu,
        "read_s": read, "demand_s": prepared - read, "rss_mib": peak_rss_mib(),
        "fit": fit.as_json(), "record": demand.record.as_json(),
        "preemptions": result.preemptions.height, "lost_gpu_hours": result.lost_gpu_hours,
        "reservations": result.reservations, "held": result.held,
    }))  # fmt: skip


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.2f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=19_400)
    parser.add_argument("--days", type=float, default=9.0)
    parser.add_argument("--since-days", type=float, default=7.0)
    parser.add_argument("--discipline", nargs="*", default=list(QUEUE_DISCIPLINES))
    parser.add_argument("--work", type=Path, default=Path("bench-out/calibration"))
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child's discipline
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        _one(args.db, args.since_days, args.one)
        return
    store = bare_fleet_store(args.work, args.nodes, args.days)
    print(f"{args.nodes:,} nodes, the last {args.since_days:g} of {args.days:g} days", flush=True)
    for discipline in args.discipline:
        load = os.getloadavg()[0]
        child = subprocess.run(
            [sys.executable, "-m", "benchmarks.bench_calibration", "--one", discipline,
             "--db", str(store.db), "--since-days", str(args.since_days)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        row = json.loads(child.stdout.strip().splitlines()[-1])
        fit, record = row["fit"], row["record"]
        replay = fit["replay"]
        print(
            f"{discipline}: wall {row['wall_s']:.1f} s (read {row['read_s']:.1f}, demand "
            f"{row['demand_s']:.1f}), CPU {row['cpu_s']:.1f} s, peak RSS "
            f"{row['rss_mib'] / 1024:.2f} GiB, load {load:.1f} -> {os.getloadavg()[0]:.1f}; "
            f"started {replay['started']:,} of {record['arrived']:,} (record "
            f"{record['started']:,}, {_pct(fit['started_gap_pct'])}), wait p50 "
            f"{replay['wait_p50_s']} s (record {record['wait_p50_s']} s), p90 "
            f"{replay['wait_p90_s']} s (record {record['wait_p90_s']} s), allocation gap "
            f"{fit['allocation_gap_pts']:.2f} pts, within tolerance {fit['within_tolerance']}; "
            f"{row['preemptions']:,} preemptions ({row['lost_gpu_hours']:,.0f} GPU-h lost), "
            f"{row['reservations']:,} reservations, {row['held']:,} held at the end",
            flush=True,
        )


if __name__ == "__main__":
    main()
