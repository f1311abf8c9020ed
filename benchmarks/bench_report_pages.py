"""What the planner's pictures cost a report: the over-time, trend and "where it strands" data.

    python -m benchmarks.bench_report_pages [--nodes 19400] [--days 8] [--telemetry-days 1]
                                            [--since 7d] [--step 15m] [--work DIR]

Generates the fleet once (Parquet) and ingests it (cached in --work), then builds the
report and times, on the same frames, the parts this page's charts add:
``stranded_places`` (the stranded GPU-hours per switch domain at sampled instants, from
the free capacity the schedulable sweep kept there, and recomputed with a node state per
instant and shape duration),
``queued_gpus`` (the queued GPUs at every instant) and the HTML page with its charts.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from datetime import timedelta
from pathlib import Path

from benchmarks.fleets import generated_store
from fleetaudit import api
from fleetaudit.api.report_api import (
    ReportOptions,
    build_report,
    place_picks,
    queued_gpus,
    stranded_places,
)
from fleetaudit.core.times import parse_duration
from fleetaudit.inputs.generate import GenerateOptions
from fleetaudit.model import denominators as den
from fleetaudit.outputs.report import render_html


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=19_400)
    parser.add_argument("--days", type=float, default=8.0)
    parser.add_argument("--telemetry-days", type=float, default=1.0)
    parser.add_argument("--since", default="7d")
    parser.add_argument("--step", default="15m")
    parser.add_argument("--work", type=Path, default=Path("bench-out/report_pages"))
    args = parser.parse_args()
    name = f"fleet-{args.nodes}-{args.days:g}d-tel{args.telemetry_days:g}d"
    store = generated_store(
        args.work,
        name,
        GenerateOptions(nodes=args.nodes, days=args.days, telemetry_days=args.telemetry_days),
    )
    since, step = parse_duration(args.since), parse_duration(args.step)
    started = time.perf_counter()
    result = build_report(store, ReportOptions(since=since, step=step))
    built = time.perf_counter() - started
    started = time.perf_counter()
    page = render_html(result)
    html = time.perf_counter() - started
    longest = max((s.shape.duration_s or 0.0 for s in result.shapes), default=0.0)
    with api.reading(store) as opened:
        horizon = result.end + timedelta(seconds=longest, microseconds=1)
        nodes, allocations = api.load_frames(opened, result.start, horizon, None)
        requests = opened.query("requests_in_window", start=result.start, end=result.end)
    shapes = [s.shape for s in result.shapes]
    # the report's way: the node states at the sampled instants from the free capacity
    # the schedulable sweep kept there; and recomputed, a node_state per instant and
    # shape duration (the way of a caller without the sweep)
    instants = den.window_instants(result.end, since, step)
    sweep = den.schedulable(
        nodes, allocations, [(s, 1) for s in shapes], instants, since,
        keep=place_picks(len(instants), nodes.height),
    )  # fmt: skip
    started = time.perf_counter()
    _places, sampled = stranded_places(
        nodes, allocations, result.steps, shapes, since, kept=sweep.kept
    )
    places = time.perf_counter() - started
    started = time.perf_counter()
    stranded_places(nodes, allocations, result.steps, shapes, since)
    recomputed = time.perf_counter() - started
    started = time.perf_counter()
    queued_gpus(requests, den.window_instants(result.end, since, step))
    queued = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        f"report --since {args.since} --step {args.step} on {args.nodes:,} nodes "
        f"({result.steps['instant'].n_unique():,} instants, {len(shapes)} shapes)"
    )
    print(
        f"  build_report {built:.1f} s, of which stranded_places {places:.2f} s "
        f"({sampled} sampled instants; {recomputed:.2f} s with a node_state each) "
        f"and queued_gpus {queued:.2f} s; "
        f"HTML {html:.2f} s ({len(page.encode()) / 1024:,.0f} KiB)"
    )
    print(
        f"  CPU {usage.ru_utime + usage.ru_stime:.1f} s (this process, the timed calls twice); "
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end"
    )


if __name__ == "__main__":
    main()
