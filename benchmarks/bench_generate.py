"""Benchmark the synthetic fleet generator at ASI scale.

Run from the repository root:

    python -m benchmarks.bench_generate [--nodes N] [--days D] [--out DIR] [--format csv]

It writes the fleet into DIR (a temporary folder, removed afterwards, when
--out is not given) and prints wall seconds, peak resident memory (this process
and its children, from getrusage) and the rows and size of every table.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

from fleetaudit.inputs.generate import TABLES, GenerateOptions, GenerateResult, generate_fleet


def _peak_mib(who: int) -> float:
    # ru_maxrss is KiB on Linux and bytes on macOS.
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(who).ru_maxrss * scale / 2**20


def _report(result: GenerateResult, seconds: float) -> None:
    print(f"fleet: {result.rows['nodes']:,} nodes, {result.gpus:,} GPUs in {result.out}")
    print(f"wall: {seconds:.1f} s")
    print(
        f"peak RSS: {_peak_mib(resource.RUSAGE_SELF):,.0f} MiB (self), "
        f"{_peak_mib(resource.RUSAGE_CHILDREN):,.0f} MiB (children)"
    )
    print(f"{'table':<12} {'rows':>14} {'MiB':>10}")
    for table in TABLES:
        size = result.files[table].stat().st_size / 2**20
        print(f"{table:<12} {result.rows[table]:>14,} {size:>10,.1f}")
    total = sum(result.files[t].stat().st_size for t in TABLES) / 2**20
    print(f"{'total':<12} {sum(result.rows.values()):>14,} {total:>10,.1f}")


def main(argv: list[str] | None = None) -> None:
    defaults = GenerateOptions()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=defaults.nodes)
    parser.add_argument("--days", type=float, default=defaults.days)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--format", default=defaults.format, choices=("parquet", "csv"))
    parser.add_argument("--telemetry-days", type=float, default=defaults.telemetry_days)
    parser.add_argument("--out", type=Path, default=None, help="folder to keep the files in")
    args = parser.parse_args(argv)
    options = GenerateOptions(
        nodes=args.nodes,
        days=args.days,
        seed=args.seed,
        format=args.format,
        telemetry_days=args.telemetry_days,
    )
    with tempfile.TemporaryDirectory(prefix="fleetaudit-bench-") as tmp:
        out = args.out if args.out is not None else Path(tmp)
        t0 = time.perf_counter()
        result = generate_fleet(out, options)
        _report(result, time.perf_counter() - t0)


if __name__ == "__main__":
    main()
