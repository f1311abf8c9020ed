"""``fleetaudit paper`` on an ingested ASI store, by the number of days it covers.

    python -m benchmarks.bench_paper --db STORE [--days 109-109,109-110]

Runs ``python -m fleetaudit paper --db STORE --days D --json`` once per window of
--days, each in its own child process, and prints its wall time, CPU time (user +
system, all threads) and peak RSS (from wait4), then the load average, since the
machine is shared. The store is one ``fleetaudit ingest --format alibaba-gpu-v2026``
made (``python -m benchmarks.bench_asi2026`` makes one; so does ``fleetaudit generate
--format alibaba-gpu-v2026 DIR --nodes 37707 --days 2`` then that ingest).

Target (issue 14): ``paper`` over 7 full-size days (37,707 servers) in under 2
minutes, with peak memory under 2 GiB and flat in the number of days: ``paper``
reads and computes one trace day at a time.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from benchmarks.bench_asi2026 import _child


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="an ingested ASI store")
    parser.add_argument(
        "--days", default="109-109,109-110", help="windows of trace days, comma-separated"
    )
    args = parser.parse_args()
    if not args.db.exists():
        raise SystemExit(f"{args.db}: no such store")
    for days in args.days.split(","):
        seconds, cpu, rss = _child(["paper", "--db", str(args.db), "--days", days, "--json"])
        print(
            f"paper --days {days}: wall {seconds:7.1f} s, CPU {cpu:7.1f} s, "
            f"peak RSS {rss:7.0f} MiB",
            flush=True,
        )
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} ({os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
