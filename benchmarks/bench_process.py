"""Commands as a user times them: whole processes, each paired with its physical floor.

    python -m benchmarks.bench_process [--nodes 19400] [--days 90] [--repeat 3]
        [--rows help,ingest,shapes,report,harvest,harvest-first] [--work bench-out/process]
        [--wheel dist/fleetaudit-....whl]

The engine benchmarks time work inside one Python process; a user times the command,
start-up and imports included. Each row here runs a `fleetaudit` command as a
subprocess and, alternately with it, the cheapest process that does the same work, so
both see the same machine load. It prints the median of each and their ratio:

| row | fleetaudit | floor |
|---|---|---|
| help | `fleetaudit --help` | `python -c "import typer, rich"` |
| ingest | `fleetaudit ingest nodes.parquet allocations.parquet` into an empty store | DuckDB `CREATE TABLE ... AS SELECT * FROM read_parquet(...)` of both files |
| shapes | `fleetaudit shapes --json` (every shape queued at the export time) | a process that reads the active allocations, the nodes and the queued requests at that instant into Arrow |
| report | `fleetaudit report --since 7d --html --json` | none: wall time and peak RSS |
| harvest | `fleetaudit whatif harvesting --since 30d` | none: wall time and peak RSS (the compiled replay is loaded once before timing) |
| harvest-first | `fleetaudit whatif harvesting --since 1d`, the first run of a fresh install of `--wheel` | the second run of that install (the replay's cache loaded) |

The package's modules are compiled to bytecode before the runs, as installing it does
(pip compiles at install): run from a checkout with PYTHONDONTWRITEBYTECODE set, every
timed run would otherwise compile fleetaudit's sources anew (about 0.2 s of CPU), a cost
no installed command pays and no floor (whose modules are installed) pays either.

Peak RSS and CPU time (user + system) are the child's own (``os.wait4``), not the
benchmark's: a small launcher process starts each command and reports its figures,
since Linux counts the memory of the process a child is forked from (here the
benchmark, which may hold a generated fleet) in the child's peak RSS. On a shared machine the wall times stretch with the load (a process
gets a slice of a core), the CPU times much less: the ratio of CPU times is the
steadier figure, and both are printed.

`harvest-first` (only with ``--wheel``, a wheel built by ``pip wheel .``) installs the
wheel into an empty folder before each pair, so its first run is a fresh install's:
a ratio near 1 says it compiled nothing (a wheel built with FLEETAUDIT_PREBUILT_JIT=0
shows the cost of compiling the replay).

`help` has a second floor, `help-typer`: a one-command typer program printing its
`--help`, the cost of typer's own help rendering (it imports rich's markdown and
tables), which `import typer, rich` alone does not pay.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.fleets import generated_store
from fleetaudit.inputs.generate import GenerateOptions

PYTHON = sys.executable
FLEETAUDIT = [PYTHON, "-m", "fleetaudit"]

# The floor of `shapes`: the inputs of the predicate at the export time, read with DuckDB
# into Arrow, exactly the rows the command needs and nothing else.
_SHAPES_FLOOR = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
at = con.execute("SELECT max(t) FROM (SELECT max(start_time) AS t FROM allocations UNION ALL "
             "SELECT max(end_time) FROM allocations UNION ALL SELECT max(submit_time) FROM requests)").fetchone()[0]
con.execute("SELECT * FROM nodes").to_arrow_table()
con.execute("SELECT * FROM allocations WHERE start_time <= $at AND (end_time IS NULL OR end_time > $at)",
            {"at": at}).to_arrow_table()
con.execute("SELECT * FROM requests WHERE submit_time <= $at AND (start_time IS NULL OR start_time > $at)",
            {"at": at}).to_arrow_table()
"""

# The floor of any typer program's --help: one command, one option, rendered by typer.
_TYPER_HELP_FLOOR = """
import typer
app = typer.Typer(add_completion=False)
@app.command()
def main(db: str = typer.Option("x", help="The store.")) -> None:
    "Do one thing."
@app.command()
def other() -> None:
    "Do another."
app(["--help"], prog_name="floor")
"""

_INGEST_FLOOR = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("CREATE TABLE nodes AS SELECT * FROM read_parquet($f)", {"f": sys.argv[2]})
con.execute("CREATE TABLE allocations AS SELECT * FROM read_parquet($f)", {"f": sys.argv[3]})
con.close()
"""


# Starts argv[1:], waits, prints [exit code, wall s, peak RSS KiB, CPU s] on stdout.
_LAUNCHER = """
import json, os, subprocess, sys, time
started = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
seconds = time.perf_counter() - started
print(json.dumps([os.waitstatus_to_exitcode(status), seconds, usage.ru_maxrss,
                  usage.ru_utime + usage.ru_stime]))
"""


@dataclass(frozen=True)
class Run:
    seconds: float
    rss_mib: float
    cpu_seconds: float


def run(argv: Sequence[str], before: Callable[[], None] | None = None) -> Run:
    """Run ``argv`` to completion; its wall time and its own peak RSS."""
    if before is not None:
        before()
    done = subprocess.run(
        [PYTHON, "-c", _LAUNCHER, *argv], capture_output=True, text=True, check=False
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise SystemExit(f"launcher of {' '.join(argv)} failed: {done.stderr.strip()[-400:]}")
    code, seconds, rss_kib, cpu_seconds = json.loads(done.stdout.strip().splitlines()[-1])
    if code != 0:
        raise SystemExit(f"{' '.join(argv)} exited {code}: {done.stderr.strip()[-400:]}")
    return Run(seconds, rss_kib / 1024, cpu_seconds)


def pair(
    label: str,
    ours: Sequence[str],
    floor: Sequence[str] | None,
    repeat: int,
    before: Callable[[], None] | None = None,
) -> dict[str, float]:
    """Alternate ours and the floor ``repeat`` times; print and return the medians."""
    mine: list[Run] = []
    base: list[Run] = []
    for _ in range(repeat):
        mine.append(run(ours, before))
        if floor is not None:
            base.append(run(floor, before))
    figures = {
        "seconds": statistics.median(r.seconds for r in mine),
        "cpu_seconds": statistics.median(r.cpu_seconds for r in mine),
        "rss_mib": max(r.rss_mib for r in mine),
    }
    line = (
        f"{label:10s} fleetaudit {figures['seconds']:7.2f} s, CPU {figures['cpu_seconds']:6.2f} s "
        f"(peak RSS {figures['rss_mib']:,.0f} MiB)"
    )
    if base:
        figures["floor_seconds"] = statistics.median(r.seconds for r in base)
        figures["floor_cpu_seconds"] = statistics.median(r.cpu_seconds for r in base)
        figures["ratio"] = figures["seconds"] / figures["floor_seconds"]
        figures["cpu_ratio"] = figures["cpu_seconds"] / max(figures["floor_cpu_seconds"], 1e-3)
        line += (
            f"   floor {figures['floor_seconds']:6.2f} s, CPU {figures['floor_cpu_seconds']:6.2f} s   "
            f"fleetaudit / floor {figures['ratio']:.2f}x wall, {figures['cpu_ratio']:.2f}x CPU"
        )
    print(line, flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=19_400)
    parser.add_argument("--days", type=float, default=90.0)
    parser.add_argument("--telemetry-days", type=float, default=30.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rows", default="help,ingest,shapes,report,harvest")
    parser.add_argument("--work", type=Path, default=Path("bench-out/process"))
    parser.add_argument("--wheel", type=Path, default=None, help="harvest-first: the wheel")
    args = parser.parse_args()
    rows = args.rows.split(",")

    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    options = GenerateOptions(
        nodes=args.nodes,
        days=args.days,
        telemetry_days=args.telemetry_days,
        telemetry_step_s=900,
    )
    name = f"fleet-{args.nodes}-{args.days:g}-{args.telemetry_days:g}"
    store = generated_store(args.work, name, options)
    compile_package()
    db = str(store.db)
    data = args.work / name

    if "help" in rows:
        pair("help", [*FLEETAUDIT, "--help"], [PYTHON, "-c", "import typer, rich"], args.repeat * 3)
        pair("help-typer", [*FLEETAUDIT, "--help"], [PYTHON, "-c", _TYPER_HELP_FLOOR], args.repeat * 3)

    if "ingest" in rows:
        scratch = Path(tempfile.mkdtemp(dir=args.work))
        target = scratch / "ingest.duckdb"

        def fresh() -> None:
            for path in scratch.iterdir():
                path.unlink()

        nodes, allocations = str(data / "nodes.parquet"), str(data / "allocations.parquet")
        figures = pair(
            "ingest",
            [*FLEETAUDIT, "ingest", nodes, allocations, "--db", str(target)],
            [PYTHON, "-c", _INGEST_FLOOR, str(target), nodes, allocations],
            args.repeat,
            before=fresh,
        )
        print(
            f"           throughput: {1 / figures['ratio']:.2f}x the floor's by wall time, "
            f"{1 / figures['cpu_ratio']:.2f}x by CPU time (target >= 0.85x)"
        )
        shutil.rmtree(scratch)

    if "shapes" in rows:
        pair(
            "shapes",
            [*FLEETAUDIT, "shapes", "--json", "--db", db],
            [PYTHON, "-c", _SHAPES_FLOOR, db],
            args.repeat,
        )

    if "report" in rows:
        out = args.work / "report-out"
        out.mkdir(exist_ok=True)
        pair(
            "report",
            [
                *FLEETAUDIT,
                "report",
                "--since",
                "7d",
                "--html",
                str(out / "r.html"),
                "--json",
                str(out / "r.json"),
                "--db",
                db,
            ],
            None,
            args.repeat,
        )

    if "harvest" in rows:
        # one untimed run loads (or compiles) the replay, as every later run on the machine does
        run([*FLEETAUDIT, "whatif", "harvesting", "--since", "1d", "--db", db])
        pair(
            "harvest",
            [*FLEETAUDIT, "whatif", "harvesting", "--since", "30d", "--db", db],
            None,
            max(1, args.repeat // 3),
        )
    if "harvest-first" in rows:
        if args.wheel is None:
            print("harvest-first: skipped (give --wheel, a wheel built by pip wheel .)")
        else:
            harvest_first(args.wheel, db, args.work, max(1, args.repeat // 3))
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


def compile_package() -> None:
    """Write the bytecode of the fleetaudit the commands import, as an install does."""
    import compileall

    import fleetaudit

    package = Path(fleetaudit.__file__).parent
    if not compileall.compile_dir(package, quiet=1):
        raise SystemExit(f"could not compile {package}")
    print(f"bytecode of {package} written (as installing the package does)")


def harvest_first(wheel: Path, db: str, work: Path, repeat: int) -> None:
    """The first and the second run of a fresh install of ``wheel``, ``repeat`` times."""
    site = work / "fresh-install"
    command = ["whatif", "harvesting", "--since", "1d", "--db", db]
    first: list[Run] = []
    second: list[Run] = []
    for _ in range(repeat):
        shutil.rmtree(site, ignore_errors=True)
        subprocess.run(
            [PYTHON, "-m", "pip", "install", "--no-deps", "--quiet",
             "--target", str(site), str(wheel)],
            check=True,
        )  # fmt: skip
        # the installed package on the path (not the checkout in the current folder:
        # PYTHONSAFEPATH); its dependencies from this interpreter
        argv = ["env", "PYTHONSAFEPATH=1", f"PYTHONPATH={site}", PYTHON, "-m", "fleetaudit", *command]
        first.append(run(argv))
        second.append(run(argv))
        if not list((site / "fleetaudit" / "__pycache__").glob("harvest_kernel.*.nbi")):
            raise SystemExit(f"harvest-first: the runs did not use the install in {site}")
    shutil.rmtree(site, ignore_errors=True)
    one = statistics.median(r.seconds for r in first)
    two = statistics.median(r.seconds for r in second)
    print(
        f"harvest-first fleetaudit {one:7.2f} s, CPU {statistics.median(r.cpu_seconds for r in first):6.2f} s"
        f"   second run {two:6.2f} s, CPU {statistics.median(r.cpu_seconds for r in second):6.2f} s"
        f"   first / second {one / two:.2f}x wall",
        flush=True,
    )


if __name__ == "__main__":
    main()
