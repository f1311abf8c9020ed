"""Generated fleets for the benchmarks: generated and ingested once, then reused.

    store = generated_store(Path("bench-out/shapes"), "fleet-19400-90",
                            GenerateOptions(nodes=19_400, days=90, telemetry_days=0))

The Parquet files go to ``WORK/NAME`` and the store to ``WORK/NAME.duckdb``; an
existing store is reused as it is, and existing files are ingested without
generating them again.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path

from fleetaudit.api import StoreOptions, ingest_paths
from fleetaudit.inputs.generate import GenerateOptions, generate_fleet


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far, in MiB (``ru_maxrss`` is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def generated_store(work: Path, name: str, options: GenerateOptions) -> StoreOptions:
    """The store of the fleet ``options`` generate, cached under ``work`` as ``name``."""
    data, db = work / name, work / f"{name}.duckdb"
    if not db.exists():
        if not (data / "allocations.parquet").exists():
            started = time.perf_counter()
            generate_fleet(data, options)
            print(
                f"generated {options.nodes:,} nodes, {options.days:g} days "
                f"in {time.perf_counter() - started:.1f} s"
            )
        started = time.perf_counter()
        result = ingest_paths(StoreOptions(db), [data])
        rows = ", ".join(f"{t.table} {t.read:,}" for t in result.tables)
        print(f"ingested {rows} in {time.perf_counter() - started:.1f} s")
    return StoreOptions(db)


def bare_fleet_store(work: Path, nodes: int, days: float) -> StoreOptions:
    """The store of a generated fleet without telemetry, named ``fleet-NODES-DAYS``."""
    return generated_store(
        work, f"fleet-{nodes}-{days:g}", GenerateOptions(nodes=nodes, days=days, telemetry_days=0)
    )
