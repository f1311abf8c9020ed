"""``fleetaudit ingest --format slurm`` of a generated sacct history: target < 30 s and < 2 GiB.

    python -m benchmarks.bench_slurm_ingest [--nodes 2000] [--jobs 1000000] [--work DIR]

Generates (once) a Slurm cluster with ``fleetaudit generate --format slurm``: an
sacct --parsable2 history of ``--jobs`` jobs on ``--nodes`` nodes, the matching
``scontrol -d -o show node`` list and topology.conf. Then, in a child process, so
that its peak RSS is its own, ingests all three into an empty store and prints the
wall and CPU seconds, the rows per table, the peak RSS and the load average.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import shutil
import time
from pathlib import Path
from typing import Any


def _ingest(db: str, folder: str, q: Any) -> None:
    from fleetaudit.inputs.ingest import IngestOptions, ingest
    from fleetaudit.model.store import open_store

    store = open_store(Path(db))
    started, cpu = time.perf_counter(), time.process_time()
    result = ingest(store, [Path(folder)], IngestOptions(format="slurm"))
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    store.close()
    q.put(
        {
            "seconds": round(seconds, 2),
            # CPU seconds of every thread: on a shared machine the wall time mostly
            # measures the queue for the two cores; this is what the ingest costs
            "cpu_seconds": round(cpu, 2),
            "rows": {t.table: t.read for t in result.tables},
            "rejected": result.rejected,
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2_000)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--days", type=float, default=60.0)
    parser.add_argument("--work", type=Path, default=Path("bench-out/slurm"))
    args = parser.parse_args()

    from fleetaudit.inputs.generate_slurm import SlurmGenerateOptions, generate_slurm

    folder = args.work / f"cluster-{args.nodes}-{args.jobs}"
    if not (folder / "sacct.psv").is_file():
        started = time.perf_counter()
        generate_slurm(
            folder, SlurmGenerateOptions(nodes=args.nodes, jobs=args.jobs, days=args.days)
        )
        print(f"generated {folder} in {time.perf_counter() - started:.1f} s")
    size = (folder / "sacct.psv").stat().st_size
    db = args.work / "slurm.duckdb"
    for path in (db, Path(f"{db}.wal")):
        if path.exists():
            path.unlink()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    load = os.getloadavg()
    child = ctx.Process(target=_ingest, args=(str(db), str(folder), q))
    child.start()
    figures = q.get()
    child.join()
    figures.update(
        {
            "nodes": args.nodes,
            "jobs": args.jobs,
            "sacct_mib": round(size / 2**20),
            "loadavg_before": [round(x, 2) for x in load],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
            "target": "seconds < 30 and peak_rss_mib < 2048",
        }
    )
    print(json.dumps(figures, indent=1))
    shutil.rmtree(db, ignore_errors=True) if db.is_dir() else db.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
