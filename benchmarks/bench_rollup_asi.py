"""``rollup --format alibaba-gpu-v2026`` of a generated release on both engines, then ``ingest``.

    python -m benchmarks.bench_rollup_asi [--servers 37707] [--days 1,3,7]
        [--engines duckdb,spark] [--master local[2]] [--driver-memory 3g] [--work DIR] [--direct]

Writes a generated release (``generate --format alibaba-gpu-v2026``, the release's
layout; at the default 37,707 servers its density, as benchmarks/bench_asi2026.py does;
fewer servers give a thinner fleet of the same shape) of max(--days) days from day 109
once; then for each D in --days and each engine rolls days 109..109+D-1 up with
``fleetaudit rollup --format alibaba-gpu-v2026 --days A-B [--engine spark --master M]``
and ingests the rolled folder into an empty store (``fleetaudit ingest FOLDER``), each in
its own child process: wall time, CPU time and peak RSS of the child and everything it
starts (Spark's JVM: sampled every 0.2 s with psutil, so the last fraction of a second
of a process is not counted), the sizes of the release and of the rolled folder, and
the load average. Spark's driver (which in local mode holds the executors) gets
--driver-memory. ``--direct`` also times ``ingest --format alibaba-gpu-v2026`` of the
release for the same days, to compare.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil

from benchmarks.bench_asi2026 import _load, release_for
from fleetaudit.inputs.asi_trace import PAPER_DAYS


def _gib(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**30


LAST_OWN_CPU = 0.0


def _tree_child(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """Run ``python -m fleetaudit ARGS``; (wall seconds, CPU seconds of it and its
    descendants, peak of their summed RSS in MiB), sampled every 0.2 s. The CPU of the
    child's own process (Python: fleetaudit and DuckDB) is kept in ``LAST_OWN_CPU``."""
    global LAST_OWN_CPU
    started = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), **(env or {})}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleetaudit", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True,
    )  # fmt: skip
    root = psutil.Process(proc.pid)
    cpu: dict[int, float] = {}
    peak = 0.0
    while proc.poll() is None:
        rss = 0
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        for p in tree:
            try:
                times = p.cpu_times()
                cpu[p.pid] = times.user + times.system + times.children_user + times.children_system
                rss += p.memory_info().rss
            except psutil.NoSuchProcess:
                continue
        peak = max(peak, rss / 2**20)
        time.sleep(0.2)
    LAST_OWN_CPU = cpu.get(proc.pid, 0.0)
    _out, err = proc.communicate()
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {err.strip()[-800:]}")
    return seconds, sum(cpu.values()), peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=37_707)
    parser.add_argument("--days", default="1,3,7", help="comma-separated day counts")
    parser.add_argument("--engines", default="duckdb,spark", help="comma-separated engines")
    parser.add_argument("--master", default="local[2]", help="Spark's master for --engine spark")
    parser.add_argument("--driver-memory", default="3g", help="Spark's driver memory (local mode: all of it)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/fleetaudit-bench-rollup-asi"))
    parser.add_argument("--direct", action="store_true", help="also ingest the release itself")
    args = parser.parse_args()
    counts = sorted({int(d) for d in args.days.split(",")})
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    first = PAPER_DAYS[0]
    print(f"servers {args.servers:,}, days {counts}, engines {engines}, load average {_load()}", flush=True)
    release = release_for(args.work, args.servers, counts[-1])
    spark_env = {"PYSPARK_SUBMIT_ARGS": f"--driver-memory {args.driver_memory} pyspark-shell"}
    for d in counts:
        window = f"{first}-{first + d - 1}"
        for engine in engines:
            rolled = args.work / f"rolled-{d}-{engine}"
            shutil.rmtree(rolled, ignore_errors=True)
            argv = ["rollup", str(release), "--format", "alibaba-gpu-v2026", "--days", window,
                    "--out", str(rolled), "--engine", engine]  # fmt: skip
            if engine == "spark":
                argv += ["--master", args.master]
            seconds, cpu, rss = _tree_child(argv, spark_env if engine == "spark" else None)
            print(
                f"rollup {d} day(s), {engine}: wall {seconds:7.1f} s, CPU {cpu:7.1f} s, "
                f"peak RSS {rss:7.0f} MiB, rolled {_gib(rolled):.2f} GiB, load {_load()}"
                + (f" (Python here {LAST_OWN_CPU:.1f} s of the CPU)" if engine == "spark" else ""),
                flush=True,
            )
            runs = [(f"ingest of the {engine}-rolled folder", [str(rolled)])]
            if args.direct and engine == engines[0]:
                runs.append(
                    ("ingest of the release",
                     [str(release), "--format", "alibaba-gpu-v2026", "--days", window])
                )  # fmt: skip
            for what, argv in runs:
                db = args.work / "store.duckdb"
                for stale in args.work.glob("store.duckdb*"):
                    shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
                seconds, cpu, rss = _tree_child(["ingest", *argv, "--db", str(db)])
                print(
                    f"{what}, {d} day(s): wall {seconds:7.1f} s, CPU {cpu:7.1f} s, "
                    f"peak RSS {rss:7.0f} MiB, load {_load()}",
                    flush=True,
                )
            shutil.rmtree(rolled, ignore_errors=True)


if __name__ == "__main__":
    main()
