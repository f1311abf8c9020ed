"""Harvesting what-if (SPEC §6) on a generated ASI-like fleet: its figures and its speed.

Run from the repository root:

    python -m benchmarks.bench_harvest [--nodes 19400] [--window-days 7]
        [--telemetry-step 15m] [--policy spotgpu ...] [--workers 2] [--work bench-out/harvest]
        [--prepare-only]

It generates the fleet (window + 3 days of allocations, telemetry over the
window) and ingests it into a store under ``--work``, both cached by size, then
times ``whatif_harvesting`` over the window. It prints the load and replay
seconds, peak resident memory (this process; its worker processes), and per
policy the SPEC §6 figures, with spotgpu's lost GPU-hours and p90 completion
time relative to each other policy (the ASI paper: spotgpu -24% p90).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from datetime import timedelta
from pathlib import Path

from fleetaudit import api
from fleetaudit.api.harvest_api import HarvestRun, whatif_harvesting
from fleetaudit.core.times import parse_duration
from fleetaudit.inputs.generate import GenerateOptions
from fleetaudit.inputs.ingest import IngestOptions
from fleetaudit.whatif.harvest import POLICIES

_HISTORY_DAYS = 3.0  # allocations before the window, so it opens on a running fleet


def _peak_mib(who: int) -> float:
    # ru_maxrss is KiB on Linux and bytes on macOS.
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(who).ru_maxrss * scale / 2**20


def prepare(
    work: Path, nodes: int, window_days: float, step: timedelta, seed: int, harvested: float = 0.0
) -> Path:
    """The store of a generated fleet, generated and ingested once per size."""
    name = f"asi-{nodes}n-{window_days:g}d-{int(step.total_seconds())}s-{seed}"
    if harvested:
        name += f"-harvested{harvested:g}"
    db = work / f"{name}.duckdb"
    if db.exists():
        return db
    out = work / name
    t0 = time.perf_counter()
    generated = api.generate_fleet(
        out,
        GenerateOptions(
            nodes=nodes,
            days=window_days + _HISTORY_DAYS,
            seed=seed,
            telemetry_days=window_days,
            telemetry_step_s=int(step.total_seconds()),
            harvested_nights=harvested,
        ),
    )
    t1 = time.perf_counter()
    api.ingest_paths(api.StoreOptions(db), [out], IngestOptions())
    t2 = time.perf_counter()
    rows = ", ".join(f"{t} {n:,}" for t, n in generated.rows.items())
    print(f"generated {rows} in {t1 - t0:.1f} s; ingested in {t2 - t1:.1f} s")
    return db


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process and its finished children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=19_400)
    parser.add_argument("--window-days", type=float, default=7.0)
    parser.add_argument("--telemetry-step", default="15m")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policy", action="append", choices=POLICIES)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--harvested-nights",
        type=float,
        default=0.0,
        help="generate the record of a fleet that already harvests (ASI: 0.9); see GenerateOptions",
    )
    parser.add_argument("--work", type=Path, default=Path("bench-out/harvest"))
    parser.add_argument(
        "--prepare-only", action="store_true", help="generate and ingest, do not replay"
    )
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    step = parse_duration(args.telemetry_step, option="--telemetry-step")
    db = prepare(args.work, args.nodes, args.window_days, step, args.seed, args.harvested_nights)
    if args.prepare_only:
        return
    run = HarvestRun(
        policies=tuple(args.policy or POLICIES),
        since=timedelta(days=args.window_days),
        workers=args.workers,
        record=False,
    )
    marks: list[tuple[str, float]] = []
    cpu0 = _cpu_s()
    began = time.perf_counter()

    def progress(message: str) -> None:
        if not marks or marks[-1][0] != message:
            marks.append((message, time.perf_counter() - began))

    result = whatif_harvesting(api.StoreOptions(db), run, progress)
    total = time.perf_counter() - began
    cpu = _cpu_s() - cpu0

    def mark(prefix: str) -> float:
        return next((at for m, at in marks if m.startswith(prefix)), total)

    loading, preparing, replaying = mark("loading"), mark("preparing"), mark("replaying")
    print(
        f"fleet: {args.nodes:,} nodes, window {args.window_days:g} days "
        f"({result.start:%Y-%m-%d} .. {result.end:%Y-%m-%d}), telemetry every {args.telemetry_step}"
    )
    print(
        f"telemetry rows in the window {result.telemetry_samples:,}, sleeps {result.sleeps:,}; "
        f"jobs {result.policies[0].jobs.height:,}"
    )
    in_processes = any("processes" in m for m, _ in marks)
    print(
        f"wall: {total:.1f} s in all: reading and sleeps {loading:.1f} s, loading the compiled "
        f"replay {preparing - loading:.1f} s, preparing {replaying - preparing:.1f} s, replay of "
        f"{len(run.policies)} policies {total - replaying:.1f} s "
        f"({'in processes' if in_processes else 'in process'}); "
        f"CPU {cpu:.1f} s (this process and its workers)"
    )
    print(
        f"peak RSS: {_peak_mib(resource.RUSAGE_SELF):,.0f} MiB (self), "
        f"{_peak_mib(resource.RUSAGE_CHILDREN):,.0f} MiB (largest worker)"
    )
    print()
    print(
        "| policy | HP | HP+LP | standby GPU-h | harvested | LP mean / p50 / p90 h "
        "| preemptions (wake) | forced | lost GPU-h | unfinished |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in result.policies:
        c = r.completion_s()
        hours = [f"{(v or 0) / 3600:.1f}" for v in (c["mean"], c["p50"], c["p90"])]
        print(
            f"| {r.policy} | {r.allocation_rate_high or 0:.1%} | {r.allocation_rate or 0:.1%} "
            f"| {r.standby_gpu_hours:,.0f} | {r.harvested_share or 0:.1%} | {' / '.join(hours)} "
            f"| {r.preemptions:,} ({r.evictions:,}) | {r.forced_kills:,} "
            f"({r.forced_kills / max(r.evictions, 1):.1%}) | {r.lost_gpu_hours:,.0f} "
            f"| {r.unfinished:,} |"
        )
    by = {r.policy: r for r in result.policies}
    if "spotgpu" in by:
        spot = by["spotgpu"]
        spot_p90 = spot.completion_s()["p90"] or 0.0
        for other in result.policies:
            if other.policy == "spotgpu":
                continue
            p90 = other.completion_s()["p90"] or 0.0
            lost = other.lost_gpu_hours
            print(
                f"spotgpu vs {other.policy}: lost GPU-h {spot.lost_gpu_hours / lost - 1:+.1%}, "
                f"LP p90 {spot_p90 / p90 - 1:+.1%}"
                if lost and p90
                else f"spotgpu vs {other.policy}: nothing lost or no completion"
            )
    for note in result.notes:
        print(f"note: {note}")


if __name__ == "__main__":
    main()
