"""Ingest of a dcgm-exporter query_range dump: 7 days at 1-minute steps for ~2,000 GPUs.

    python -m benchmarks.bench_prometheus [--nodes 270] [--days 7] [--all-metrics] [--work DIR]

Writes a fleet with ``fleetaudit generate --format prometheus`` (once; reused
from ``--work``), loads its nodes and allocations into a store (not timed),
then times ``ingest --format prometheus`` of the SM_ACTIVE files: every GPU at
every step, about 20 M samples at the defaults (target: < 60 s, < 2 GiB).
``--all-metrics`` also reads the FB_USED and FB_FREE files (3x the samples).
The ingest runs in a child process, so its peak RSS is its own; the figures
are wall seconds, CPU seconds (user + system) and the load average around it.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import shutil
import time
from pathlib import Path
from typing import Any


def _ingest(db: str, files: list[str], q: Any) -> None:
    from fleetaudit.inputs.ingest import IngestOptions, ingest
    from fleetaudit.model.store import open_store

    store = open_store(Path(db))
    before = os.times()
    started = time.perf_counter()
    result = ingest(store, [Path(f) for f in files], IngestOptions(format="prometheus"))
    seconds = time.perf_counter() - started
    after = os.times()
    store.close()
    q.put(
        {
            "seconds": seconds,
            "cpu_seconds": (after.user - before.user) + (after.system - before.system),
            "rows": result.tables[0].new + result.tables[0].replaced,
            "rejected": result.rejected,
            "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }
    )


def _child(target: Any, *args: Any) -> dict[str, Any]:
    q: Any = mp.get_context("spawn").Queue()
    p = mp.get_context("spawn").Process(target=target, args=(*args, q))
    p.start()
    out = q.get()
    p.join()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=270)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--all-metrics", action="store_true")
    parser.add_argument("--work", type=Path, default=Path("bench-out/prometheus"))
    args = parser.parse_args()

    from fleetaudit import api
    from fleetaudit.inputs.generate import GenerateOptions
    from fleetaudit.inputs.ingest import ingest
    from fleetaudit.model.store import open_store

    fleet = args.work / f"fleet-{args.nodes}n-{args.days:g}d"
    dump = fleet / "prometheus"
    if not dump.is_dir():
        shutil.rmtree(fleet, ignore_errors=True)
        started = time.perf_counter()
        options = GenerateOptions(
            nodes=args.nodes,
            days=args.days,
            telemetry_days=args.days,
            telemetry_step_s=60,
            format="prometheus",
        )
        api.generate_fleet(fleet, options)
        print(f"generated {fleet} in {time.perf_counter() - started:.1f} s")
    files = sorted(
        str(p)
        for p in dump.iterdir()
        if args.all_metrics or p.name.startswith("DCGM_FI_PROF_SM_ACTIVE.")
    )
    size = sum(os.path.getsize(f) for f in files)
    db = args.work / "store.duckdb"
    db.unlink(missing_ok=True)
    with open_store(db) as store:
        ingest(store, [fleet])  # nodes, allocations, requests (not timed)
        gpus = int(store.scalar("SELECT sum(gpus) FROM nodes"))

    load_before = os.getloadavg()
    figures = _child(_ingest, str(db), files)
    load_after = os.getloadavg()
    steps = int(args.days * 86_400) // 60
    samples = gpus * steps * (3 if args.all_metrics else 1)  # every GPU at every step
    print(
        f"{len(files)} files, {size / 2**20:,.0f} MiB, {gpus:,} GPUs, ~{samples:,} samples "
        f"-> {figures['rows']:,} telemetry rows (GPUs that a pod holds), "
        f"{figures['rejected']:,} rejected"
    )
    print(
        f"ingest --format prometheus: {figures['seconds']:.1f} s wall, "
        f"{figures['cpu_seconds']:.1f} s CPU, peak RSS {figures['rss_mib']:,.0f} MiB"
    )
    print(
        "load average (1 min) before/after: "
        f"{load_before[0]:.1f} / {load_after[0]:.1f} on {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
