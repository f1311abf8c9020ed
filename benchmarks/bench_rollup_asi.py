"""``rollup --format alibaba-gpu-v2026`` of a generated full-density release, then ``ingest`` of it.

    python -m benchmarks.bench_rollup_asi [--servers 37707] [--days 1,3,7] [--work DIR] [--direct]

Writes a generated release (``generate --format alibaba-gpu-v2026``, the release's
layout and density, as benchmarks/bench_asi2026.py does) of max(--days) days from day
109 once; then for each D in --days rolls days 109..109+D-1 up with ``fleetaudit rollup
--format alibaba-gpu-v2026 --days A-B`` and ingests the rolled folder into an empty
store (``fleetaudit ingest FOLDER``), each in its own child process: wall time, CPU
time and peak RSS of each, and the sizes of the release and of the rolled folder.
``--direct`` also times ``ingest --format alibaba-gpu-v2026`` of the release for the
same days, to compare. Only DuckDB runs this source (``--engine spark`` refuses it:
docs/rollup.md).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from benchmarks.bench_asi2026 import _child, _load, release_for
from fleetaudit.inputs.asi_trace import PAPER_DAYS


def _gib(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=37_707)
    parser.add_argument("--days", default="1,3,7", help="comma-separated day counts")
    parser.add_argument("--work", type=Path, default=Path("/tmp/fleetaudit-bench-rollup-asi"))
    parser.add_argument("--direct", action="store_true", help="also ingest the release itself")
    args = parser.parse_args()
    counts = sorted({int(d) for d in args.days.split(",")})
    first = PAPER_DAYS[0]
    print(f"servers {args.servers:,}, days {counts}, load average {_load()}", flush=True)
    release = release_for(args.work, args.servers, counts[-1])
    for d in counts:
        window = f"{first}-{first + d - 1}"
        rolled = args.work / f"rolled-{d}"
        shutil.rmtree(rolled, ignore_errors=True)
        seconds, cpu, rss = _child(
            ["rollup", str(release), "--format", "alibaba-gpu-v2026", "--days", window,
             "--out", str(rolled)]
        )  # fmt: skip
        print(
            f"rollup {d} day(s): wall {seconds:7.1f} s, CPU {cpu:7.1f} s, peak RSS {rss:7.0f} MiB, "
            f"rolled {_gib(rolled):.2f} GiB, load {_load()}",
            flush=True,
        )
        runs = [("ingest of the rolled folder", [str(rolled)])]
        if args.direct:
            runs.append(
                ("ingest of the release", [str(release), "--format", "alibaba-gpu-v2026", "--days", window])
            )
        for what, argv in runs:
            db = args.work / "store.duckdb"
            for stale in args.work.glob("store.duckdb*"):
                shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
            seconds, cpu, rss = _child(["ingest", *argv, "--db", str(db)])
            print(
                f"{what}, {d} day(s): wall {seconds:7.1f} s, CPU {cpu:7.1f} s, "
                f"peak RSS {rss:7.0f} MiB, load {_load()}",
                flush=True,
            )
        shutil.rmtree(rolled, ignore_errors=True)


if __name__ == "__main__":
    main()
