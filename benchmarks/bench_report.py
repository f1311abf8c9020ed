"""``fleetaudit report`` at ASI scale: a 7-day report on a generated fleet.

    python -m benchmarks.bench_report [--nodes 19400] [--days 8] [--telemetry-days 7]
                                      [--telemetry-step 15m] [--since 7d] [--step 15m]
                                      [--work DIR]

Generates the fleet once (Parquet), ingests it into a store in --work, then runs
the report in a child process of its own (so its peak RSS is the report's, not
the ingest's): build_report, the HTML and the JSON document, each timed, and
the whole ``fleetaudit report --html --json`` command. Target: < 60 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.fleets import generated_store, peak_rss_mib
from fleetaudit.api import StoreOptions
from fleetaudit.core.times import parse_duration
from fleetaudit.inputs.generate import GenerateOptions


def _measure(db: Path, since: str, step: str) -> None:
    """In the child: time the report's stages on ``db`` and print one JSON line."""
    from fleetaudit.api.report_api import ReportOptions, build_report
    from fleetaudit.outputs.contract import report_document
    from fleetaudit.outputs.report import render_html

    options = ReportOptions(since=parse_duration(since), step=parse_duration(step))
    started = time.perf_counter()
    result = build_report(StoreOptions(db), options)
    built = time.perf_counter()
    page = render_html(result)
    rendered = time.perf_counter()
    document = json.dumps(report_document(result))
    done = time.perf_counter()
    print(
        json.dumps(
            {
                "build_s": built - started,
                "html_s": rendered - built,
                "json_s": done - rendered,
                "html_kib": len(page.encode()) / 1024,
                "json_kib": len(document.encode()) / 1024,
                "instants": result.steps["instant"].n_unique(),
                "shapes": len(result.shapes),
                "shapes_left_out": result.shapes_left_out,
                "telemetry_samples": result.telemetry["samples"],
                "peak_rss_mib": peak_rss_mib(),
                # CPU seconds (user + system, DuckDB's threads included): steadier than
                # wall time on a shared machine
                "cpu_s": resource.getrusage(resource.RUSAGE_SELF).ru_utime
                + resource.getrusage(resource.RUSAGE_SELF).ru_stime,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=19_400)
    parser.add_argument("--days", type=float, default=8.0)
    parser.add_argument("--telemetry-days", type=float, default=7.0)
    parser.add_argument("--telemetry-step", default="15m")
    parser.add_argument("--since", default="7d")
    parser.add_argument("--step", default="15m")
    parser.add_argument("--work", type=Path, default=Path("bench-out/report"))
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # the child's mode
    args = parser.parse_args()
    if args.measure is not None:
        _measure(args.measure, args.since, args.step)
        return
    step_s = int(parse_duration(args.telemetry_step).total_seconds())
    name = f"fleet-{args.nodes}-{args.days:g}d-tel{args.telemetry_days:g}d-{step_s}s"
    db = generated_store(
        args.work,
        name,
        GenerateOptions(
            nodes=args.nodes,
            days=args.days,
            telemetry_days=args.telemetry_days,
            telemetry_step_s=step_s,
        ),
    ).db
    child = [sys.executable, "-m", "benchmarks.bench_report", "--measure", str(db)]
    child += ["--since", args.since, "--step", args.step]
    done = subprocess.run(child, capture_output=True, text=True, check=True)
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    total = figures["build_s"] + figures["html_s"] + figures["json_s"]
    print(
        f"report --since {args.since} --step {args.step} on {args.nodes:,} nodes: "
        f"{figures['instants']:,} instants, {figures['shapes']} shapes "
        f"({figures['shapes_left_out']} beyond the budget), "
        f"{figures['telemetry_samples']:,} telemetry samples"
    )
    print(
        f"  build_report {figures['build_s']:.1f} s, HTML {figures['html_s']:.2f} s "
        f"({figures['html_kib']:,.0f} KiB), JSON {figures['json_s']:.2f} s "
        f"({figures['json_kib']:,.0f} KiB): {total:.1f} s (target < 60 s); "
        f"peak RSS {figures['peak_rss_mib']:,.0f} MiB; CPU {figures['cpu_s']:.1f} s"
    )
    print(f"  machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
    out = args.work / "out"
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "fleetaudit", "report", "--db", str(db), "--since", args.since,
         "--step", args.step, "--html", str(out / "report.html"), "--json", str(out / "report.json")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    print(
        f"  the whole command (store open, files, trend recorded): {time.perf_counter() - started:.1f} s"
    )


if __name__ == "__main__":
    main()
