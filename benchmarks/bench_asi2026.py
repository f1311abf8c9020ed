"""Streamed ingest of the ASI 2026 release layout, and ``fleetaudit paper``, by days covered.

    python -m benchmarks.bench_asi2026 [--servers 37707] [--days 1,3,7] [--work DIR]

Writes a generated release (``fleetaudit generate --format alibaba-gpu-v2026``: the
release's layout, types and density, about 31 pod rows per server-hour) of
max(--days) days from day 109 once, then for each D in --days ingests days
109..109+D-1 into an empty store and, on the largest, runs ``paper`` over them.
Each step runs in its own child process, so its wall time, CPU time (user +
system, all threads) and peak RSS (from wait4) are its own: ``paper`` as
``python -m fleetaudit paper``, the ingest through the API with a progress
callback, so that each day's line shows the elapsed wall and CPU time and the
peak RSS so far (memory flat in the days: the peak stops growing after the
first carried-over day). Prints one line per step and the load average, since
the machine is shared.

Targets (issue 14): 37,707 servers x 7 days ingest in under 10 minutes with peak
memory under 4 GiB, flat in the number of days; ``paper`` over 7 days under 2
minutes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from fleetaudit.inputs.asi_trace import PAPER_DAYS
from fleetaudit.inputs.generate_asi import AsiReleaseOptions, generate_release


def _child(args: list[str], relay: bool = False) -> tuple[float, float, float]:
    """Run ``python -m fleetaudit ARGS`` (or ``python -m benchmarks.bench_asi2026 --ingest
    ...``); (wall seconds, CPU seconds, peak RSS MiB). ``relay``: print the child's
    per-day progress lines as they come."""
    started = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    module = ["benchmarks.bench_asi2026"] if args[0] == "--ingest" else ["fleetaudit"]
    proc = subprocess.Popen(
        [sys.executable, "-m", *module, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    lines: list[str] = []
    assert proc.stderr is not None
    for line in proc.stderr:  # read as it comes: a full pipe would stall the child
        lines.append(line)
        if relay and line.startswith("  "):
            print(line.rstrip(), flush=True)
    _pid, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(args)} failed: {''.join(lines[-5:]).strip()}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _ingest_child(release: Path, db: Path, days: str) -> None:
    """The ingest, in this (child) process: one stderr line per day's progress step."""
    import resource

    from fleetaudit import api
    from fleetaudit.inputs.ingest import IngestOptions
    from fleetaudit.inputs.ingest.asi2026 import parse_days

    started = time.perf_counter()

    def progress(message: str) -> None:
        if ": day " in message or "side tables" in message:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            print(
                f"  {time.perf_counter() - started:7.1f} s wall, "
                f"{usage.ru_utime + usage.ru_stime:7.1f} s CPU, "
                f"peak RSS {usage.ru_maxrss / 1024:6.0f} MiB: {message}",
                file=sys.stderr,
                flush=True,
            )

    options = IngestOptions(format="alibaba-gpu-v2026", days=parse_days(days))
    api.ingest_paths(api.StoreOptions(db), [release], options, progress)


def release_for(work: Path, servers: int, days: int) -> Path:
    """The generated release of ``servers`` x ``days`` under ``work``, written once."""
    release = work / f"release-{servers}x{days}"
    if not (release / "done").exists():
        shutil.rmtree(release, ignore_errors=True)
        started = time.perf_counter()
        written = generate_release(release, AsiReleaseOptions(servers=servers, days=days))
        (release / "done").write_text("")
        size = sum(p.stat().st_size for p in release.rglob("*.parquet")) / 2**30
        print(
            f"generated {written.pod_rows:,} pod rows ({written.gpu_pod_rows:,} GPU), "
            f"{size:.2f} GiB in {time.perf_counter() - started:.0f} s",
            flush=True,
        )
    return release


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=37_707)
    parser.add_argument("--days", default="1,3,7", help="comma-separated day counts")
    parser.add_argument("--work", type=Path, default=Path("/tmp/fleetaudit-bench-asi2026"))
    parser.add_argument("--keep", action="store_true", help="keep the release and the stores")
    parser.add_argument("--ingest", nargs=3, metavar=("RELEASE", "DB", "DAYS"), help="(child)")
    args = parser.parse_args()
    if args.ingest:
        release_dir, db_path, window = args.ingest
        _ingest_child(Path(release_dir), Path(db_path), window)
        return
    counts = sorted({int(d) for d in args.days.split(",")})
    first = PAPER_DAYS[0]
    print(f"servers {args.servers:,}, days {counts}, load average {_load()}", flush=True)
    release = release_for(args.work, args.servers, counts[-1])
    for d in counts:
        db = args.work / f"store-{d}.duckdb"
        for stale in args.work.glob(f"store-{d}.duckdb*"):
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
        seconds, cpu, rss = _child(
            ["--ingest", str(release), str(db), f"{first}-{first + d - 1}"], relay=True
        )
        print(
            f"ingest {d} day(s): wall {seconds:7.1f} s, CPU {cpu:7.1f} s, "
            f"peak RSS {rss:7.0f} MiB, load {_load()}",
            flush=True,
        )
    db = args.work / f"store-{counts[-1]}.duckdb"
    seconds, cpu, rss = _child(["paper", "--db", str(db), "--json"])
    print(
        f"paper {counts[-1]} day(s): wall {seconds:7.1f} s, CPU {cpu:7.1f} s, "
        f"peak RSS {rss:7.0f} MiB, load {_load()}",
        flush=True,
    )
    if not args.keep:
        shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
