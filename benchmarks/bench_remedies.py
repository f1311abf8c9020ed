"""whatif remedies at ASI scale: five edits over a window, and a sizing search.

    python -m benchmarks.bench_remedies [--nodes 19400] [--days 9] [--since-days 7]
        [--work DIR] [--only edits|sizing] [--workers N]

Generates the fleet once (Parquet, no telemetry) and ingests it into a store in --work
(``benchmarks.fleets.bare_fleet_store``). Then, each in a child process of its own (so
that its peak RSS is its own), the whole ``whatif_remedies`` call as the command line
makes it, reading the store included:

- ``edits``: five edits, each one remedy row (snapshot + replay): --add H20:64,
  --remove L20:16, --cpus H800:+64, --memory H20:+512, --port H800=H20:0.8;
- ``calibrate``: first, the store's calibration (every discipline against the record,
  as ``whatif placement --calibrate``), which the two runs below then reuse, as a
  store that was calibrated once does;
- ``sizing``: --target p_start=0.95 for the heaviest shape of the edits' run that names
  one model, arrived 20 times or more and started below 95% in the baseline (any
  duration), --max-add 64 (a bisection of replays for the nodes to add, and one for the
  CPUs).

It prints wall and CPU time (targets: each under 5 minutes for 7 days at ASI scale),
peak RSS (under 6 GiB), the load average before and after, and the rows' figures.
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
from typing import Any

from benchmarks.fleets import bare_fleet_store, peak_rss_mib

EDITS = ("--add H20:64", "--remove L20:16", "--cpus H800:+64", "--memory H20:+512",
         "--port H800=H20:0.8")  # fmt: skip


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _waiting_shape(db: Path) -> Any:
    """The heaviest shape of the latest remedies run that names one model, arrived at
    least 20 times and started below 95% in the baseline (else the heaviest one)."""
    from fleetaudit.api import StoreOptions, latest_whatif_runs, reading
    from fleetaudit.model.shapes import make_shape

    with reading(StoreOptions(db)) as store:
        doc = latest_whatif_runs(store)["remedies"].document
    shapes = doc["shapes"]
    figures = doc["baseline"]["replay"]["shapes"]
    chosen = shapes[0]
    for shape, f in zip(shapes, figures, strict=True):
        one = shape["gpu_model"] and "|" not in shape["gpu_model"]
        if one and f["arrived"] >= 20 and (f["p_start"] or 0) < 0.95:
            chosen = shape
            break
    chosen = {**chosen, "duration_s": None}
    return make_shape(**chosen)


def _one(db: Path, since_days: float, what: str, workers: int | None) -> None:
    """In the child: one whatif_remedies call, its figures as one JSON line."""
    from dataclasses import replace

    from fleetaudit.api import StoreOptions
    from fleetaudit.api.remedies_api import whatif_remedies
    from fleetaudit.core.options import RemediesRun
    from fleetaudit.whatif import remedies as rm

    run = RemediesRun(since=timedelta(days=since_days), workers=workers)
    if what == "calibrate":
        run = replace(run, calibrate=True, max_shapes=0)
    elif what == "edits":
        parse = {"--add": rm.parse_add, "--remove": rm.parse_remove, "--port": rm.parse_port,
                 "--cpus": lambda t: rm.parse_delta("cpus", t),
                 "--memory": lambda t: rm.parse_delta("memory", t)}  # fmt: skip
        edits = tuple(parse[flag](value) for flag, value in (e.split(" ") for e in EDITS))
        run = replace(run, edits=edits)
    else:
        run = replace(run, target=0.95, target_shape=_waiting_shape(db), max_add=64)
    wall, cpu = time.perf_counter(), _cpu()
    result = whatif_remedies(StoreOptions(db), run)
    rows = [
        {"name": r.name, "seconds": round(r.seconds, 1), "started": r.replay.started,
         "served_gpu_hours": round(r.replay.served_gpu_hours),
         "usable_gpu_hours": round(r.snapshot.hours["usable"])}
        for r in result.rows
    ]  # fmt: skip
    sizing = [
        {"kind": s.kind, "found": s.found, "steps": len(s.steps), "criterion": s.criterion,
         "shape": s.shape.label(), "p_start": [st.p_start for st in s.steps]}
        for s in result.sizing
    ]
    print(json.dumps({
        "what": what, "wall_s": time.perf_counter() - wall, "cpu_s": _cpu() - cpu,
        "rss_mib": peak_rss_mib(), "queue": result.baseline.discipline, "rows": rows,
        "sizing": sizing, "arrived": result.rows[0].replay.arrived,
    }))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=19_400)
    parser.add_argument("--days", type=float, default=9)
    parser.add_argument("--since-days", type=float, default=7)
    parser.add_argument("--work", type=Path, default=Path("bench-out"))
    parser.add_argument("--only", choices=("calibrate", "edits", "sizing"), default=None)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--child", nargs=2, metavar=("DB", "WHAT"), default=None)
    args = parser.parse_args()
    if args.child:
        _one(Path(args.child[0]), args.since_days, args.child[1], args.workers)
        return
    args.work.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    store = bare_fleet_store(args.work, args.nodes, args.days)
    print(f"store {store.db} ready in {time.perf_counter() - began:.0f} s")
    for what in ("calibrate", "edits", "sizing") if args.only is None else (args.only,):
        load = os.getloadavg()[0]
        command = [sys.executable, "-m", "benchmarks.bench_remedies", "--since-days",
                   str(args.since_days), "--child", str(store.db), what]  # fmt: skip
        if args.workers:
            command += ["--workers", str(args.workers)]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        figures = json.loads(out.strip().splitlines()[-1])
        print(
            f"{what}: {args.nodes:,} nodes, {args.since_days:g} days, queue {figures['queue']}, "
            f"{figures['arrived']:,} arrivals: wall {figures['wall_s']:.1f} s, CPU "
            f"{figures['cpu_s']:.1f} s, peak RSS {figures['rss_mib'] / 1024:.2f} GiB, load "
            f"{load:.1f} -> {os.getloadavg()[0]:.1f}"
        )
        for row in figures["rows"]:
            print(f"  {row}")
        for sizing in figures["sizing"]:
            print(f"  sizing {sizing}")


if __name__ == "__main__":
    main()
