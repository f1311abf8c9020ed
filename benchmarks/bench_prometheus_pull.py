"""``ingest --format prometheus --url`` against the documented curl loop, on a real Prometheus;
and one query_range file of about 1 GB.

    python -m benchmarks.bench_prometheus_pull [--nodes 250] [--days 7] [--work DIR]
                                               [--big-gib 1.0] [--skip-pull] [--skip-big]

Pull: a local Prometheus (Debian's package, tests/promserver.py) holds ``--days`` of
DCGM_FI_PROF_SM_ACTIVE at one sample a minute for ``--nodes`` x 8 GPUs (2,000 at the
default), backfilled day by day with ``promtool tsdb create-blocks-from openmetrics``
(kept in ``--work`` for the next run). Then, each timed as its own processes:

- the loop of docs/formats/prometheus.md: ``curl`` per metric (6) and day, then
  ``fleetaudit ingest --format prometheus`` of the files;
- ``fleetaudit ingest --format prometheus --url ... --since 7d --until END`` (which also
  asks count_over_time for the activities and the XID and row-remap gauges).

Target: the pull within 2x the time of the loop plus its ingest, under 2 GiB.

Big file: one ``query_range`` response of about ``--big-gib`` GiB (SM_ACTIVE of as many
GPUs as it takes, over ``--days`` at 60 s), ingested alone. Target: under 2 GiB of RSS.

Printed: wall seconds, CPU seconds (user + system of the client processes; the
server's own CPU is not counted), peak RSS, the rows loaded, the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

_METRICS = (
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_RESERVED",
)
_DAY = 86_400


def _label_map(node: int, gpu: int) -> dict[str, str]:
    """A dcgm-exporter series as a Prometheus stores it (its scrape adds instance, job)."""
    return {
        "gpu": str(gpu),
        "UUID": f"GPU-{node:05d}{gpu:03d}-a1b2-c3d4",
        "pci_bus_id": f"00000000:{0x18 + gpu:02X}:00.0",
        "device": f"nvidia{gpu}",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": f"node-{node:04d}",
        "DCGM_FI_DRIVER_VERSION": "580.95.05",
        "container": "main",
        "namespace": f"team-{node % 40:02d}",
        "pod": f"job-{node:04d}-{gpu}",
        "instance": f"10.0.{node // 250}.{node % 250}:9400",
        "job": "dcgm",
    }


def _labels(node: int, gpu: int) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in _label_map(node, gpu).items()) + "}"


def _value(node: int, gpu: int, minute: int) -> str:
    return f"{((node * 7919 + gpu * 104729 + minute * 31) % 1000) / 1000:g}"


def _history(work: Path, nodes: int, days: int, end: int) -> Path:
    """Blocks of ``days`` days ending at ``end`` (epoch s), one OpenMetrics file a day."""
    data = work / f"data-{nodes}n-{days}d-{end}"
    if (data / "complete").exists():
        return data
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    start = end - days * _DAY
    for day in range(days):
        started = time.perf_counter()
        om = work / "day.om"
        first = start + day * _DAY
        with open(om, "w") as out:
            out.write("# HELP DCGM_FI_PROF_SM_ACTIVE The ratio of cycles an SM has at least 1 warp assigned.\n")
            out.write("# TYPE DCGM_FI_PROF_SM_ACTIVE gauge\n")
            minutes = range(first // 60, (first + _DAY) // 60)
            for node in range(nodes):
                for gpu in range(8):
                    head = "DCGM_FI_PROF_SM_ACTIVE" + _labels(node, gpu) + " "
                    out.write(
                        "".join(f"{head}{_value(node, gpu, m)} {m * 60}\n" for m in minutes)
                    )
            out.write("# EOF\n")
        subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", "--quiet", str(om), str(data)],
            check=True,
        )
        om.unlink()
        print(f"  backfilled day {day + 1}/{days} in {time.perf_counter() - started:.0f} s", flush=True)
    (data / "complete").write_text("")
    return data


def _run(args: list[str], env: dict[str, str] | None = None) -> dict[str, float]:
    """Run a command; its wall and CPU seconds and peak RSS (MiB), from wait4."""
    started = time.perf_counter()
    child = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    err = child.stderr.read().decode() if child.stderr else ""
    if status != 0:
        raise RuntimeError(f"{' '.join(args[:4])}... failed ({status}): {err[-2000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss / 1024}


def _store(path: Path, nodes: int) -> None:
    """A store holding the nodes (not timed)."""
    from fleetaudit.inputs.ingest import ingest
    from fleetaudit.model.store import open_store

    path.unlink(missing_ok=True)
    folder = path.with_suffix(".nodes")
    folder.mkdir(exist_ok=True)
    csv = folder / "nodes.csv"
    csv.write_text(
        "node_id,gpu_model,gpus,cpus\n" + "".join(f"node-{n:04d},H100,8,64\n" for n in range(nodes))
    )
    with open_store(path) as store:
        ingest(store, [csv])


def _rows(db: Path) -> int:
    from fleetaudit.model.store import open_store

    with open_store(db, read_only=True) as store:
        return store.row_count("telemetry")


def _pull(args: argparse.Namespace, fleetaudit: str) -> None:
    from tests import promserver as ps

    end = int(datetime(2026, 11, 30, tzinfo=timezone.utc).timestamp())
    data = _history(args.work, args.nodes, args.days, end)
    server = ps.Prometheus(
        args.work / "server", [], extra=("--storage.tsdb.max-block-duration=2h",)
    )
    shutil.rmtree(server.folder, ignore_errors=True)
    server.folder.mkdir(parents=True)
    server.data.symlink_to(data.resolve(), target_is_directory=True)
    server.start(timeout=600)
    try:
        loop_dir = args.work / "dcgm"
        shutil.rmtree(loop_dir, ignore_errors=True)
        loop_dir.mkdir()
        # the documented loop: one call per metric and day (the range 1 ms short of the
        # step, as the docs ask for a Prometheus before 3.0)
        script = "\n".join(
            f'curl -sf --data-urlencode "query=avg_over_time({m}[59999ms])" '
            f'--data-urlencode "start={end - (args.days - d) * _DAY}" '
            f'--data-urlencode "end={end - (args.days - d - 1) * _DAY - 60}" '
            f'--data-urlencode "step=60s" -o "{loop_dir}/{m}.{d}.json" "{server.url}/api/v1/query_range"'
            for d in range(args.days)
            for m in _METRICS
        )
        load = os.getloadavg()[0]
        curl = _run(["bash", "-ec", script])
        loop_db = args.work / "loop.duckdb"
        _store(loop_db, args.nodes)
        loop_ingest = _run([fleetaudit, "ingest", "-q", "--db", str(loop_db), "--format", "prometheus", str(loop_dir)])
        pull_db = args.work / "pull.duckdb"
        _store(pull_db, args.nodes)
        pull = _run(
            [fleetaudit, "ingest", "-q", "--db", str(pull_db), "--format", "prometheus", "--url", server.url,
             "--since", f"{args.days}d", "--until", str(end - 60)]
        )  # fmt: skip
        load_after = os.getloadavg()[0]
    finally:
        server.stop()
    size = sum(p.stat().st_size for p in loop_dir.iterdir())
    loop_wall = curl["wall"] + loop_ingest["wall"]
    print(f"pull: {args.nodes * 8:,} GPUs x {args.days} days at 60 s ({args.nodes * 8 * args.days * 1440:,} samples)")
    print(f"  curl loop: {len(_METRICS) * args.days} calls, {size / 2**20:,.0f} MiB, {curl['wall']:.1f} s wall, {curl['cpu']:.1f} s CPU")
    print(
        f"  its ingest: {loop_ingest['wall']:.1f} s wall, {loop_ingest['cpu']:.1f} s CPU, "
        f"peak RSS {loop_ingest['rss']:,.0f} MiB, {_rows(loop_db):,} rows"
    )
    print(
        f"  ingest --url: {pull['wall']:.1f} s wall, {pull['cpu']:.1f} s CPU, peak RSS "
        f"{pull['rss']:,.0f} MiB, {_rows(pull_db):,} rows; {pull['wall'] / loop_wall:.2f}x the "
        f"loop plus its ingest ({loop_wall:.1f} s)"
    )
    print(f"  load average (1 min) before/after: {load:.1f} / {load_after:.1f} on {os.cpu_count()} cores")


def _big(args: argparse.Namespace, fleetaudit: str) -> None:
    """One query_range file of about --big-gib GiB, ingested alone."""
    target = args.big_gib * 2**30
    points = args.days * 1440
    path = args.work / "DCGM_FI_PROF_SM_ACTIVE.big.json"
    if not path.exists() or abs(path.stat().st_size - target) > target * 0.2:
        per_series = len(json.dumps({"metric": {}, "values": [[1796000000, "0.123"]] * points}))
        series = max(1, int(target / (per_series + 300)))
        nodes = -(-series // 8)
        start = 1796000000 - points * 60
        with open(path, "w") as out:
            out.write('{"status":"success","data":{"resultType":"matrix","result":[')
            for s in range(series):
                node, gpu = divmod(s, 8)
                labels = _label_map(node, gpu)
                values = ",".join(f'[{start + m * 60},"{_value(node, gpu, m)}"]' for m in range(points))
                out.write(("," if s else "") + json.dumps({"metric": labels}, separators=(",", ":"))[:-1])
                out.write(f',"values":[{values}]}}')
            out.write("]}}")
    nodes = -(-_series_in(path) // 8)  # 8 GPUs a node
    db = args.work / "big.duckdb"
    _store(db, nodes)
    load = os.getloadavg()[0]
    figures = _run([fleetaudit, "ingest", "-q", "--db", str(db), "--format", "prometheus", str(path)])
    print(
        f"big file: {path.stat().st_size / 2**30:.2f} GiB, {_rows(db):,} rows: {figures['wall']:.1f} s wall, "
        f"{figures['cpu']:.1f} s CPU, peak RSS {figures['rss']:,.0f} MiB (load {load:.1f} -> "
        f"{os.getloadavg()[0]:.1f})"
    )


def _series_in(path: Path) -> int:
    count = 0
    with open(path) as fh:
        while chunk := fh.read(1 << 24):
            count += chunk.count('"metric"')
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=250)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--work", type=Path, default=Path("bench-out/prometheus-pull"))
    parser.add_argument("--big-gib", type=float, default=1.0)
    parser.add_argument("--skip-pull", action="store_true")
    parser.add_argument("--skip-big", action="store_true")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    fleetaudit = shutil.which("fleetaudit") or sys.exit("fleetaudit is not on PATH")
    if not args.skip_pull:
        from tests import promserver as ps

        reason = ps.missing()
        if reason is not None:
            sys.exit(reason)
        _pull(args, fleetaudit)
    if not args.skip_big:
        _big(args, fleetaudit)


if __name__ == "__main__":
    main()
