"""``fleetaudit rollup`` on DuckDB and on Spark as raw telemetry grows.

    python -m benchmarks.bench_rollup [--rows 10,30,100] [--engines duckdb,spark,cluster1,cluster2]
        [--work DIR]

Writes synthetic raw telemetry once per size (millions of rows): per-minute
samples of 8-GPU nodes, an allocation per GPU and 4 hours, as a hive-partitioned
folder (``day=N/``) of zstd Parquet, the shape of a data lake's history. Then
rolls each size up per hour with ``fleetaudit rollup --engine E`` in a child
process and prints the wall time (Spark's includes starting its session), the
raw rows per second and the rolled rows. Spark runs ``local[2]``: on the 2 cores
of the development machine, the same cores DuckDB uses. ``clusterN`` runs it on
a standalone cluster of N workers started from the extra's own scripts on
127.0.0.1 (tests/spark_cluster.py), one executor of one core and 512 MiB per
worker, the driver in the child process (``--master spark://127.0.0.1:PORT``, its
settings in the cluster's spark-defaults.conf): the executors read the files and
write the rolled table. Needs the ``spark`` extra for the Spark rows.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

GPUS_PER_NODE = 8
MINUTES = 1440  # one day of per-minute samples per GPU per partition


def write_raw(folder: Path, millions: int) -> int:
    """About ``millions`` M rows of raw telemetry under ``folder`` (day=N partitions)."""
    import duckdb

    days = max(1, round(millions * 1_000_000 / (1000 * GPUS_PER_NODE * MINUTES)))
    nodes = round(millions * 1_000_000 / (days * GPUS_PER_NODE * MINUTES))
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"SET temp_directory = '{folder.parent / 'duckdb-tmp'}'")
    for day in range(days):
        target = folder / f"day={day}"
        target.mkdir(parents=True, exist_ok=True)
        con.execute(
            f"""
            COPY (
                SELECT TIMESTAMP '2026-03-01' + to_minutes(CAST({day} * {MINUTES} + m AS BIGINT)) AS ts,
                       'node-' || lpad(CAST(n AS VARCHAR), 5, '0') AS node_id,
                       g AS gpu_index,
                       round(random(), 3) AS sm_active,
                       round(random(), 3) AS mem_used,
                       'a-' || n || '-' || g || '-' || (({day} * {MINUTES} + m) // 240) AS alloc_id
                FROM range({nodes}) AS r(n), range({GPUS_PER_NODE}) AS s(g),
                     range({MINUTES}) AS t(m)
            ) TO '{target / "part-0.parquet"}' (FORMAT parquet, COMPRESSION zstd)
            """
        )
    rows = con.execute(
        f"SELECT count(*) FROM read_parquet('{folder}/*/*.parquet')"
    ).fetchone()[0]
    con.close()
    return int(rows)


def run(engine: str, raw: Path, out: Path, work: Path) -> tuple[float, str]:
    cmd = [sys.executable, "-m", "fleetaudit", "rollup", str(raw), "--out", str(out),
           "--engine", engine, "--interval", "1h"]  # fmt: skip
    if engine == "spark":
        cmd += ["--master", "local[2]"]
    if engine.startswith("cluster"):
        return _on_cluster(int(engine[len("cluster"):]), cmd, work)
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{engine}: {done.stderr.strip().splitlines()[-1]}")
    return seconds, done.stdout


def _on_cluster(workers: int, cmd: list[str], work: Path) -> tuple[float, str]:
    """``cmd`` with --engine spark on a fresh standalone cluster of ``workers`` workers
    (its start is not timed; the driver's and executors' start is)."""
    from tests.spark_cluster import standalone

    folder = work / f"cluster-{workers}"
    shutil.rmtree(folder, ignore_errors=True)
    with standalone(folder, workers=workers) as cluster:
        conf = {
            **cluster.driver_conf(),
            "spark.cores.max": str(workers),
            "spark.pyspark.python": sys.executable,
        }
        (folder / "conf" / "spark-defaults.conf").write_text(
            "".join(f"{k} {v}\n" for k, v in conf.items())
        )
        cmd = [*cmd[: cmd.index("--engine")], "--engine", "spark", "--master", cluster.master]
        env = {**cluster.env(), "PYSPARK_PYTHON": sys.executable}
        started = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"cluster{workers}: {done.stderr.strip().splitlines()[-1]}")
    return seconds, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="10,30,100", help="sizes in millions of raw rows")
    parser.add_argument("--engines", default="duckdb,spark", help="duckdb, spark, clusterN")
    parser.add_argument("--work", type=Path, default=Path("bench-out/rollup"))
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f} (2 cores)")
    print(f"{'raw rows':>12} {'engine':>7} {'seconds':>8} {'M rows/s':>9} {'rolled rows':>12}")
    for millions in (int(x) for x in args.rows.split(",")):
        raw = args.work / f"raw-{millions}m"
        if not raw.is_dir():
            started = time.perf_counter()
            rows = write_raw(raw, millions)
            print(f"(wrote {rows:,} raw rows in {time.perf_counter() - started:.0f} s)")
        import pyarrow.parquet as pq

        rows = sum(pq.ParquetFile(f).metadata.num_rows for f in raw.rglob("*.parquet"))
        for engine in args.engines.split(","):
            out = args.work / f"out-{millions}m-{engine}"
            seconds, _ = run(engine, raw, out, args.work)
            rolled = pq.ParquetFile(out / "telemetry.parquet").metadata.num_rows
            print(
                f"{rows:>12,} {engine:>7} {seconds:>8.1f} {rows / seconds / 1e6:>9.2f} "
                f"{rolled:>12,}  (load {os.getloadavg()[0]:.1f})",
                flush=True,
            )
            shutil.rmtree(out)


if __name__ == "__main__":
    main()
