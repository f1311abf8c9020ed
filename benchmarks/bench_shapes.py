"""``fleetaudit shapes`` at ASI scale: every queued shape at one instant.

    python -m benchmarks.bench_shapes [--nodes 19400] [--days 90] [--work DIR]

Generates the fleet once (Parquet, no telemetry), ingests it into a store in
--work, then times ``evaluate_shapes`` for all shapes queued at the export time
(target < 2 s), with and without --reclaim, and prints the peak RSS.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchmarks.fleets import bare_fleet_store, peak_rss_mib
from fleetaudit.api.shapes_api import ShapesOptions, evaluate_shapes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=19_400)
    parser.add_argument("--days", type=float, default=90.0)
    parser.add_argument("--work", type=Path, default=Path("bench-out/shapes"))
    args = parser.parse_args()
    store = bare_fleet_store(args.work, args.nodes, args.days)
    for label, options in (
        ("all queued shapes", ShapesOptions()),
        ("all queued shapes --reclaim", ShapesOptions(reclaim=True)),
    ):
        timings = []
        for _ in range(3):
            started = time.perf_counter()
            result = evaluate_shapes(store, options)
            timings.append(time.perf_counter() - started)
        print(
            f"{label}: {len(result.shapes)} shapes, {sum(r.queued for r in result.shapes):,} queued "
            f"requests: best {min(timings):.2f} s, first {timings[0]:.2f} s (target < 2 s)"
        )
    peak = peak_rss_mib()
    print(f"peak RSS {peak:,.0f} MiB")


if __name__ == "__main__":
    main()
