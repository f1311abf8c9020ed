"""What a year of health intervals costs: the 7-day report and ``shapes --history 90d``
at ASI scale, with and without ``node_events``.

    python -m benchmarks.bench_health [--nodes 19400] [--rate 15] [--runs 3]
                                      [--only report|history] [--work DIR]

Two fleets are generated once (Parquet) with ``--node-events RATE`` (health intervals per
node and year over the year before the export: about 280,000 at ASI scale and 15): the
report's (8 days of allocations, 7 days of telemetry every 15 minutes, as
``bench_report``) and the history's (90 days, no telemetry, as ``bench_history``). The
other tables do not depend on the option, so each fleet is ingested twice: into a store
without its node_events file, and into a copy of that store that then ingests it.

Each run is a child process of its own (the store read included), the two stores taken
in turn, ``--runs`` times: ``build_report --since 7d --step 15m``, and ``evaluate_shapes``
of the 8-GPU x 16-CPU node shape on H20 with ``--history 90d --step 5m``. It prints
every run's wall and CPU seconds (user + system, all threads), the best and the median
of each store and the overhead of the intervals (target: under 10%). On a shared
machine the CPU seconds are the steadier figure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from benchmarks.fleets import peak_rss_mib
from fleetaudit.api import StoreOptions, ingest_paths
from fleetaudit.inputs.generate import EVENTS, GenerateOptions, generate_fleet


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _measure(kind: str, db: Path) -> None:
    """In the child: one timed run on ``db``, printed as one JSON line."""
    started, cpu = time.perf_counter(), _cpu()
    if kind == "report":
        from fleetaudit.api.report_api import ReportOptions, build_report

        result = build_report(
            StoreOptions(db), ReportOptions(since=timedelta(days=7), step=timedelta(minutes=15))
        )
        detail = {
            "intervals": result.failures.get("intervals", 0),
            "unhealthy_gpu_hours": result.failures["fleet"]["unhealthy_gpu_hours"],
            "allocation_rate": result.fleet["physical"]["allocation_rate"],
        }
    else:
        from fleetaudit.api.shapes_api import ShapesOptions, evaluate_shapes
        from fleetaudit.model.shapes import make_shape

        shape = make_shape("H20", 8, cpus_per_gpu=16)
        shapes = evaluate_shapes(
            StoreOptions(db),
            ShapesOptions(shapes=(shape,), history=timedelta(days=90), step=timedelta(minutes=5)),
        )
        history = shapes.shapes[0].history
        assert history is not None
        detail = {"p_start": history.p_start, "instants": history.instants}
    print(
        json.dumps(
            {"wall_s": time.perf_counter() - started, "cpu_s": _cpu() - cpu,
             "peak_rss_mib": peak_rss_mib(), **detail}
        )
    )  # fmt: skip


def _stores(work: Path, name: str, options: GenerateOptions) -> tuple[Path, Path]:
    """The fleet's stores without and with its node_events, made once."""
    data = work / name
    plain, events = work / f"{name}.duckdb", work / f"{name}-events.duckdb"
    if not events.exists():
        if not (data / f"{EVENTS}.parquet").exists():
            started = time.perf_counter()
            generate_fleet(data, options)
            print(f"generated {name} in {time.perf_counter() - started:.1f} s")
        tables = sorted(p for p in data.glob("*.parquet") if p.stem != EVENTS)
        plain.unlink(missing_ok=True)
        started = time.perf_counter()
        ingest_paths(StoreOptions(plain), tables)
        print(f"ingested {name} without node_events in {time.perf_counter() - started:.1f} s")
        partial = events.with_name(events.name + ".partial")
        shutil.copyfile(plain, partial)
        result = ingest_paths(StoreOptions(partial), [data / f"{EVENTS}.parquet"])
        print(f"  and its {result.tables[0].new:,} node_events into a copy")
        partial.rename(events)
    return plain, events


def _compare(kind: str, plain: Path, events: Path, runs: int) -> None:
    rows: dict[str, list[dict[str, float]]] = {"without": [], "with": []}
    for _ in range(runs):
        for label, db in (("without", plain), ("with", events)):
            child = [sys.executable, "-m", "benchmarks.bench_health", "--measure", kind, str(db)]
            done = subprocess.run(child, capture_output=True, text=True, check=True)
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            rows[label].append(figures)
            print(
                f"  {kind} {label:<7} node_events: {figures['wall_s']:6.1f} s wall, "
                f"{figures['cpu_s']:6.1f} s CPU, peak RSS {figures['peak_rss_mib']:,.0f} MiB, "
                f"load {os.getloadavg()[0]:.1f}; "
                + ", ".join(
                    f"{k} {v:,.4g}" if isinstance(v, float) else f"{k} {v:,}"
                    for k, v in figures.items()
                    if k not in ("wall_s", "cpu_s", "peak_rss_mib")
                )
            )
    for figure in ("wall_s", "cpu_s"):
        best = {label: min(r[figure] for r in runs_) for label, runs_ in rows.items()}
        median = {
            label: statistics.median(r[figure] for r in runs_) for label, runs_ in rows.items()
        }
        print(
            f"{kind} {figure[:-2]}: best {best['without']:.1f} s without, {best['with']:.1f} s "
            f"with ({100 * (best['with'] / best['without'] - 1):+.1f}%); median "
            f"{median['without']:.1f} s without, {median['with']:.1f} s with "
            f"({100 * (median['with'] / median['without'] - 1):+.1f}%; target < +10%)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=19_400)
    parser.add_argument("--rate", type=float, default=15.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", choices=("report", "history"))
    parser.add_argument("--work", type=Path, default=Path("bench-out/health"))
    parser.add_argument("--measure", nargs=2, help=argparse.SUPPRESS)  # the child's mode
    args = parser.parse_args()
    if args.measure is not None:
        _measure(args.measure[0], Path(args.measure[1]))
        return
    args.work.mkdir(parents=True, exist_ok=True)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
    if args.only in (None, "report"):
        plain, events = _stores(
            args.work,
            f"report-{args.nodes}-rate{args.rate:g}",
            GenerateOptions(nodes=args.nodes, days=8, telemetry_days=7, telemetry_step_s=900,
                            node_events=args.rate),
        )  # fmt: skip
        _compare("report", plain, events, args.runs)
    if args.only in (None, "history"):
        plain, events = _stores(
            args.work,
            f"history-{args.nodes}-rate{args.rate:g}",
            GenerateOptions(nodes=args.nodes, days=90, telemetry_days=0, node_events=args.rate),
        )
        _compare("history", plain, events, args.runs)
    print(f"machine: load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
