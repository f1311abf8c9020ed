"""``fleetaudit ingest --format kubernetes`` of one large kubectl snapshot.

    python -m benchmarks.bench_kubernetes [--nodes 2000] [--days 4.4] [--work DIR]

Writes the generated fleet as one kubectl JSON snapshot (``fleetaudit generate
--format kubernetes``: 2,000 nodes and about 60,000 pods at the defaults, most
of them finished pods of the last days, the rest running or pending), then, in
a child process, ingests it into an empty store (target: under 15 s) and
ingests it again (every row replaced). Prints wall and CPU seconds (DuckDB's
threads included), peak RSS, the object counts and the load average, which
matters on a shared machine.
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


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _ingest(db: str, snapshot: str, priority_map: str, q: Any) -> None:
    from fleetaudit.inputs.ingest import IngestOptions, ingest
    from fleetaudit.model.store import open_store

    store = open_store(Path(db))
    options = IngestOptions(format="kubernetes", priority_map=Path(priority_map))
    figures: dict[str, Any] = {}
    for label in ("first", "again"):
        started, cpu = time.perf_counter(), time.process_time()
        result = ingest(store, [Path(snapshot)], options)
        figures[label] = {
            "seconds": round(time.perf_counter() - started, 2),
            "cpu_seconds": round(time.process_time() - cpu, 2),
            "rows": {t.table: t.read for t in result.tables},
            "rejected": result.rejected,
        }
    store.close()
    figures["rss_mib"] = round(_peak_rss_mib())
    q.put(figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--days", type=float, default=4.4)
    parser.add_argument("--work", type=Path, default=Path("bench-out/kubernetes"))
    args = parser.parse_args()

    from fleetaudit.inputs.generate import GenerateOptions
    from fleetaudit.inputs.generate_kubernetes import write_kubectl

    shutil.rmtree(args.work, ignore_errors=True)
    started = time.perf_counter()
    written = write_kubectl(
        args.work / "snapshot", GenerateOptions(nodes=args.nodes, days=args.days)
    )
    generated_s = time.perf_counter() - started
    snapshot = written.files["pods"]
    load_before = os.getloadavg()

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    db = args.work / "fleet.duckdb"
    child = ctx.Process(
        target=_ingest, args=(str(db), str(snapshot), str(written.files["priority map"]), q)
    )
    child.start()
    figures = q.get()
    child.join()
    report = {
        "nodes": written.rows["nodes"],
        "pods": written.rows["pods"] + written.rows["pending pods"],
        "snapshot_mib": round(snapshot.stat().st_size / 2**20, 1),
        "generate_s": round(generated_s, 2),
        "ingest": figures,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
