"""The first harvesting run on a machine: compiling the replay, then loading it.

Run from the repository root:

    python -m benchmarks.bench_coldstart [--work bench-out/coldstart]

It ingests the bundled sample fleet into a store under ``--work``, then runs
``fleetaudit whatif harvesting --since 1d`` twice as a separate process, with
``NUMBA_CACHE_DIR`` set to an empty folder: the first run compiles the replay
(and says so on stderr), the second loads it. It prints each run's wall and CPU
seconds (user + system of the child process), whether the first run printed the
"compiling" notice, and the machine's load average, since on a shared machine the
wall time of a compile is mostly waiting for a core.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _run(args: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds and stderr of one fleetaudit process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "fleetaudit", *args],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"fleetaudit {' '.join(args)} failed: {done.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("bench-out/coldstart"))
    args = parser.parse_args()
    work: Path = args.work
    cache = work / "numba-cache"
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    db = work / "sample.duckdb"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    if not db.exists():
        _run(["ingest", str(REPO / "sample_data"), "--db", str(db), "--quiet"], env)
    replay = ["whatif", "harvesting", "--since", "1d", "--db", str(db)]
    load = os.getloadavg()
    print(f"load average before: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores")
    for label in ("first run (compiles)", "second run (loads)"):
        wall, cpu, stderr = _run(replay, env)
        said = "compiling the harvesting replay" in stderr
        print(f"{label}: {wall:.1f} s wall, {cpu:.1f} s CPU, compile notice: {said}")
    load = os.getloadavg()
    print(f"load average after: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")


if __name__ == "__main__":
    main()
