"""Benchmark one shape's history (SPEC §3 ``--history``) at ASI scale, and the sweep vs the naive evaluator.

Run from the repository root:

    python -m benchmarks.bench_history [--nodes 19400] [--days 90] [--step 5m] [--work DIR]

It generates the fleet once with ``fleetaudit.inputs.generate`` (Parquet, no
telemetry) and caches it under ``--work`` (default ``bench-out/history``).
The shapes are the ones an operator would audit on the biggest model (most
installed GPUs): the most common queued 8-GPU x 16-CPU node shape and the most
common queued 256-GPU switch gang, each as queued (with its duration) and
without a duration; when none is queued, a plain one is built.

Each shape's history over the whole span at ``--step`` (90 days at 5 minutes:
25,921 instants, both ends included) runs in its own child process, which
loads nodes and allocations with polars, converted to the store's column types
(naive UTC timestamps, Float64 quantities), times ``evaluate_history`` and
reports the peak RSS of the process (data included) from getrusage. Then it
calibrates the prediction against the requests of that shape that started.

Finally, on a smaller fleet (``--small-nodes`` 1,000, ``--small-days`` 7,
``--small-step`` 1h), the naive evaluator (``node_state`` + ``shapes.evaluate``
at every instant) and the sweep run the same shapes; their series must be
equal, and the ratio of their times is printed. The naive evaluator's time per
instant at full scale is also measured on a few instants and extrapolated.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from fleetaudit.core.errors import UsageError
from fleetaudit.core.times import parse_duration, to_utc
from fleetaudit.inputs.generate import GenerateOptions, generate_fleet
from fleetaudit.model.history import calibrate, evaluate_history, evaluate_history_naive
from fleetaudit.model.occupancy import node_state
from fleetaudit.model.schema import TABLES, Kind
from fleetaudit.model.shapes import Shape, evaluate, make_shape

_POLARS_TYPES = {
    Kind.TEXT: pl.String,
    Kind.INT: pl.Int64,
    Kind.FLOAT: pl.Float64,
    Kind.BOOL: pl.Boolean,
}
_SHAPE_COLUMNS = (
    "gpu_model",
    "gpus",
    "gpus_per_pod",
    "cpus_per_gpu",
    "memory_gib_per_gpu",
    "locality",
    "duration_s",
)


def _peak_rss_mib() -> float:
    # ru_maxrss is KiB on Linux and bytes on macOS.
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


# ------------------------------------------------------------------------- data


def _fleet(work: Path, nodes: int, days: float) -> Path:
    """The generated fleet's folder, generated on first use."""
    folder = work / f"fleet-{nodes}n-{days:g}d"
    if not all((folder / f"{t}.parquet").exists() for t in ("nodes", "allocations", "requests")):
        started = time.perf_counter()
        generate_fleet(
            folder, GenerateOptions(nodes=nodes, days=days, format="parquet", telemetry_days=0)
        )
        print(f"generated {nodes:,} nodes x {days:g} days in {time.perf_counter() - started:.1f} s")
    return folder


def _store_types(frame: pl.DataFrame, table: str) -> pl.DataFrame:
    """The frame with the store's column types: naive UTC timestamps, Float64 quantities."""
    casts = []
    for column in TABLES[table].columns:
        if column.name not in frame.columns:
            continue
        if column.kind is Kind.TIME:
            dtype = frame.schema[column.name]
            expr = pl.col(column.name)
            if isinstance(dtype, pl.Datetime) and dtype.time_zone is not None:
                expr = expr.dt.convert_time_zone("UTC").dt.replace_time_zone(None)
            casts.append(expr.cast(pl.Datetime("us")))
        else:
            casts.append(pl.col(column.name).cast(_POLARS_TYPES[column.kind]))
    return frame.with_columns(casts)


def _load(folder: Path, table: str) -> pl.DataFrame:
    return _store_types(pl.read_parquet(folder / f"{table}.parquet"), table)


def _export_time(folder: Path) -> datetime:
    """The latest timestamp of the allocations (SPEC §2's export time; no telemetry here)."""
    latest = (
        pl.scan_parquet(folder / "allocations.parquet")
        .select(pl.max_horizontal(pl.col("start_time").max(), pl.col("end_time").max()))
        .collect()
        .item()
    )
    return to_utc(latest)


# ------------------------------------------------------------------------ shapes


def _shape_of(row: dict[str, Any]) -> Shape:
    return make_shape(
        row["gpu_model"],
        row["gpus"],
        row["gpus_per_pod"],
        row["cpus_per_gpu"],
        row["memory_gib_per_gpu"],
        row["locality"],
        row["duration_s"],
    )


def _pick_shapes(folder: Path, at: datetime) -> list[tuple[str, Shape]]:
    """Queued 8 x 16 node shape and 256-GPU switch gang of the biggest model, with and without duration."""
    nodes = _load(folder, "nodes")
    model = (
        nodes.group_by("gpu_model")
        .agg(pl.col("gpus").sum())
        .sort(["gpus", "gpu_model"], descending=[True, False])
        .item(0, "gpu_model")
    )
    queued = _store_types(
        pl.scan_parquet(folder / "requests.parquet")
        .filter(pl.col("gpu_model") == model)
        .select(*_SHAPE_COLUMNS, "submit_time", "start_time")
        .collect(),
        "requests",
    ).filter(
        (pl.col("submit_time") <= at)
        & (pl.col("start_time").is_null() | (pl.col("start_time") > at))
    )

    def most_common(candidates: pl.DataFrame, fallback: Shape) -> Shape:
        if candidates.height == 0:
            return fallback
        counted = candidates.group_by(_SHAPE_COLUMNS).len()
        return _shape_of(
            counted.sort(["len", *_SHAPE_COLUMNS], descending=True, nulls_last=True).row(
                0, named=True
            )
        )

    node = most_common(
        queued.filter(
            (pl.col("gpus") == 8) & (pl.col("cpus_per_gpu") == 16) & (pl.col("locality") == "node")
        ),
        make_shape(model, 8, 8, 16, locality="node"),
    )
    gang = most_common(
        queued.filter((pl.col("gpus") == 256) & (pl.col("locality") == "switch")),
        make_shape(model, 256, 8, 8, locality="switch"),
    )
    shapes = []
    for name, shape in (("node 8x16", node), ("gang 256", gang)):
        shapes.append((f"{name} queued", shape))
        if shape.duration_s:
            shapes.append(
                (f"{name} no duration", make_shape(**{**_fields(shape), "duration_s": None}))
            )
    return shapes


def _fields(shape: Shape) -> dict[str, Any]:
    return {c: getattr(shape, c) for c in _SHAPE_COLUMNS}


def _requests_of(folder: Path, shape: Shape) -> pl.DataFrame:
    """Requests of exactly this shape, defaults resolved as make_shape resolves them."""
    candidates = _store_types(
        pl.scan_parquet(folder / "requests.parquet")
        .filter((pl.col("gpu_model") == shape.gpu_model) & (pl.col("gpus") == shape.gpus))
        .select(*_SHAPE_COLUMNS, "submit_time", "start_time")
        .collect(),
        "requests",
    )
    same = []
    for row in candidates.select(_SHAPE_COLUMNS).unique().iter_rows(named=True):
        try:
            if _shape_of(row) == shape:
                same.append(row)
        except UsageError:  # a request no shape can describe is no evidence either way
            continue
    kinds = pl.DataFrame(same, schema=candidates.select(_SHAPE_COLUMNS).schema)
    return candidates.join(kinds, on=list(_SHAPE_COLUMNS), nulls_equal=True)


# ----------------------------------------------------------------- measurements


def _full_scale(
    folder: str, shape_fields: dict[str, Any], at: datetime, days: float, step_s: float, q: Any
) -> None:
    """Child process: load, time one history, calibrate, time a few naive instants."""
    data = Path(folder)
    shape = make_shape(**shape_fields)
    started = time.perf_counter()
    nodes, allocations = _load(data, "nodes"), _load(data, "allocations")
    load_s = time.perf_counter() - started
    rss_loaded = _peak_rss_mib()
    started = time.perf_counter()
    history = evaluate_history(
        nodes, allocations, shape, at, timedelta(days=days), timedelta(seconds=step_s)
    )
    seconds = time.perf_counter() - started
    rss = _peak_rss_mib()
    calibration = calibrate(history, _requests_of(data, shape))
    duration = timedelta(seconds=shape.duration_s) if shape.duration_s else None
    naive = []
    for back in (0, 1, 2):
        started = time.perf_counter()
        instant = at - timedelta(days=back * days / 3)
        evaluate(node_state(nodes, allocations, instant, duration), shape)
        naive.append(time.perf_counter() - started)
    q.put(
        {
            "load_s": load_s,
            "seconds": seconds,
            "instants": history.instants,
            "rss_loaded_mib": rss_loaded,
            "rss_peak_mib": rss,
            "history": history.as_json(),
            "calibration": calibration.as_json(),
            "naive_per_instant_s": sum(naive) / len(naive),
            "allocations": allocations.height,
        }
    )


def _comparison(
    folder: str, shape_fields: dict[str, Any], at: datetime, days: float, step_s: float, q: Any
) -> None:
    """Child process: the naive evaluator and the sweep on the same (small) fleet."""
    data = Path(folder)
    shape = make_shape(**shape_fields)
    nodes, allocations = _load(data, "nodes"), _load(data, "allocations")
    args = (nodes, allocations, shape, at, timedelta(days=days), timedelta(seconds=step_s))
    started = time.perf_counter()
    fast = evaluate_history(*args)
    fast_s = time.perf_counter() - started
    started = time.perf_counter()
    naive = evaluate_history_naive(*args)
    naive_s = time.perf_counter() - started
    q.put(
        {
            "sweep_s": fast_s,
            "naive_s": naive_s,
            "instants": fast.instants,
            "equal": fast == naive and fast.series.equals(naive.series),
            "p_start": fast.p_start,
            "max_instances": int(fast.series["instances"].max() or 0),
            "allocations": allocations.height,
        }
    )


def _child(target: Any, *args: Any) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, q))
    proc.start()
    result = q.get()
    proc.join()
    return dict(result)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=19_400)
    parser.add_argument("--days", type=float, default=90.0)
    parser.add_argument("--step", default="5m")
    parser.add_argument("--work", type=Path, default=Path("bench-out/history"))
    parser.add_argument("--small-nodes", type=int, default=1_000)
    parser.add_argument("--small-days", type=float, default=7.0)
    parser.add_argument("--small-step", default="1h")
    args = parser.parse_args(argv)
    step_s = parse_duration(args.step, option="--step").total_seconds()
    small_step_s = parse_duration(args.small_step, option="--small-step").total_seconds()

    big = _fleet(args.work, args.nodes, args.days)
    at = _export_time(big)
    report: dict[str, Any] = {"nodes": args.nodes, "days": args.days, "step_s": step_s, "at": at}
    print(
        f"fleet {args.nodes:,} nodes, {args.days:g} days to {at:%Y-%m-%d %H:%M}, step {args.step}"
    )
    shapes = _pick_shapes(big, at)
    for name, shape in shapes:
        figures = _child(_full_scale, str(big), _fields(shape), at, args.days, step_s)
        extrapolated = figures["naive_per_instant_s"] * figures["instants"]
        print(
            f"{name:22s} {shape.label()}: {figures['instants']:,} instants in "
            f"{figures['seconds']:.1f} s (target < 30 s), peak RSS "
            f"{figures['rss_peak_mib'] / 1024:.2f} GiB (after loading "
            f"{figures['allocations']:,} allocations in {figures['load_s']:.1f} s: "
            f"{figures['rss_loaded_mib'] / 1024:.2f} GiB; target <= 4 GiB)"
        )
        print(
            f"{'':22s} history {json.dumps(figures['history'])}; calibration "
            f"{json.dumps(figures['calibration'])}"
        )
        print(
            f"{'':22s} naive: {figures['naive_per_instant_s']:.2f} s per instant, about "
            f"{extrapolated / 3600:.1f} h for all ({extrapolated / figures['seconds']:,.0f}x)"
        )
        report[name] = {"shape": shape.as_json(), **figures}

    small = _fleet(args.work, args.small_nodes, args.small_days)
    small_at = _export_time(small)
    for name, shape in shapes:
        figures = _child(
            _comparison, str(small), _fields(shape), small_at, args.small_days, small_step_s
        )
        ratio = figures["naive_s"] / figures["sweep_s"]
        print(
            f"{name:22s} {args.small_nodes:,} nodes x {args.small_days:g} days at "
            f"{args.small_step} ({figures['instants']} instants, {figures['allocations']:,} "
            f"allocations): naive {figures['naive_s']:.1f} s, sweep {figures['sweep_s']:.2f} s, "
            f"ratio {ratio:.0f}x, series equal: {figures['equal']} (p_start "
            f"{figures['p_start']:.3f}, up to {figures['max_instances']} instances)"
        )
        report[f"{name} small"] = {**figures, "ratio": ratio}
        if not figures["equal"]:
            raise SystemExit(f"{name}: the sweep and the naive evaluator disagree")
    (args.work / "report.json").write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
