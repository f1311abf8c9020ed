"""Ingest throughput against DuckDB's own CREATE TABLE AS, at ASI scale.

    python -m benchmarks.bench_ingest [--nodes 19400] [--days 100] [--work DIR]

Generates an ASI-scale fleet (>= 10 M allocation rows at the defaults) once in
Parquet and CSV, then for each format, in the same run:

- DuckDB's ``CREATE TABLE allocations AS SELECT * FROM read_parquet/read_csv``
  into an empty database file (the reference),
- ``fleetaudit ingest`` of nodes + allocations into an empty store (the first
  ingest; only the allocations file is timed),
- the same ingest again (idempotent replace of every row),

and prints seconds, the ratio reference / ours (target >= 0.7), and peak RSS
of each step, measured in a child process so the figures do not mix.
Also times the state at one instant over the loaded store.
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


def _reference(db: str, file: str, fmt: str, q: Any) -> None:
    import duckdb

    con = duckdb.connect(db)
    started = time.perf_counter()
    con.execute(f"CREATE TABLE allocations AS SELECT * FROM read_{fmt}($f)", {"f": file})
    con.close()
    q.put({"seconds": time.perf_counter() - started, "rss_mib": _peak_rss_mib()})


def _ours(db: str, nodes: str, file: str, q: Any) -> None:
    from fleetaudit.inputs.ingest import ingest
    from fleetaudit.model.store import open_store

    store = open_store(Path(db))
    ingest(store, [Path(nodes)])
    figures = {}
    for label in ("first", "again"):
        started = time.perf_counter()
        result = ingest(store, [Path(file)])
        figures[label] = {
            "seconds": time.perf_counter() - started,
            "summary": [vars(t) for t in result.tables],
        }
    store.close()
    figures["rss_mib"] = _peak_rss_mib()
    q.put(figures)


def _state(db: str, q: Any) -> None:
    from fleetaudit.api import StoreOptions, reading, resolve_at, state_at

    with reading(StoreOptions(Path(db))) as store:
        at = resolve_at(store, None)
        timings = []
        for _ in range(3):
            started = time.perf_counter()
            frame = state_at(store, at)
            timings.append(time.perf_counter() - started)
    q.put(
        {
            "seconds_best": min(timings),
            "seconds_first": timings[0],
            "nodes": frame.height,
            "rss_mib": _peak_rss_mib(),
        }
    )


def _child(target: Any, *args: Any) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, q))
    proc.start()
    result = q.get()
    proc.join()
    return dict(result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=19_400)
    parser.add_argument("--days", type=float, default=100.0)
    parser.add_argument("--work", type=Path, default=Path("bench-out/ingest"))
    parser.add_argument("--formats", default="parquet,csv")
    args = parser.parse_args()

    from fleetaudit.inputs.generate import GenerateOptions, generate_fleet

    work: Path = args.work
    report: dict[str, Any] = {"nodes": args.nodes, "days": args.days, "cpus": os.cpu_count()}
    for fmt in args.formats.split(","):
        data = work / f"fleet-{fmt}"
        if not (data / f"allocations.{fmt}").exists():
            started = time.perf_counter()
            generate_fleet(
                data,
                GenerateOptions(nodes=args.nodes, days=args.days, format=fmt, telemetry_days=0),
            )
            print(f"generated {fmt} in {time.perf_counter() - started:.1f} s")
        for name in ("ref.duckdb", "ours.duckdb"):
            for suffix in ("", ".wal"):
                path = work / f"{fmt}-{name}{suffix}"
                if path.exists():
                    path.unlink()
        alloc = str(data / f"allocations.{fmt}")
        ref = _child(_reference, str(work / f"{fmt}-ref.duckdb"), alloc, fmt)
        ours = _child(_ours, str(work / f"{fmt}-ours.duckdb"), str(data / f"nodes.{fmt}"), alloc)
        rows = ours["first"]["summary"][0]["read"]
        ratio = ref["seconds"] / ours["first"]["seconds"]
        print(
            f"{fmt:8s} rows {rows:,}: CREATE TABLE AS {ref['seconds']:.2f} s "
            f"(RSS {ref['rss_mib']:.0f} MiB); fleetaudit ingest {ours['first']['seconds']:.2f} s, "
            f"ratio {ratio:.2f} (target >= 0.7); re-ingest {ours['again']['seconds']:.2f} s "
            f"(replaced {ours['again']['summary'][0]['replaced']:,}); peak RSS {ours['rss_mib']:.0f} MiB"
        )
        report[fmt] = {"reference": ref, "ingest": ours, "ratio": ratio, "rows": rows}
        if fmt == args.formats.split(",")[0]:
            state = _child(_state, str(work / f"{fmt}-ours.duckdb"))
            print(
                f"state at one instant over {state['nodes']:,} nodes: best {state['seconds_best']:.3f} s, "
                f"first {state['seconds_first']:.3f} s (loads the active allocations from the store)"
            )
            report["state"] = state
    (work / "report.json").write_text(json.dumps(report, indent=1, default=str))
    if os.environ.get("FLEETAUDIT_BENCH_CLEAN"):
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
