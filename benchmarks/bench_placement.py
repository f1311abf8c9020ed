"""Placement fill mode on the Alibaba 2023 GPU trace: the FGD paper's curves and their speed.

    python -m benchmarks.bench_placement [--seeds 10] [--max-pct 130] [--workers 2]

Reads the GPU-node inventory and the pod lists straight from the public trace
($FLEETAUDIT_TRACES, else ../shared/traces beside the repository; nothing is
copied into the repository), runs every policy in fill mode, and prints one
markdown table per pod list: allocated % / fragmented % / failed requests per
policy at arrival 50..max %, mean over the seeds. The default pod list is timed
as a whole (target: 5 policies x 10 seeds up to 130% in < 60 s on 2 cores).

The frame builders follow the alibaba adapter (docs/formats/alibaba-gpu-v2023.md): a
pod with num_gpu 1 and gpu_milli < 1000 asks for a gpu_milli / 1000 share, any other pod for
num_gpu whole GPUs; gpu_spec is the allowed model set; cpus and memory_gib are
the pod's totals; the list's row order is the arrival order.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import polars as pl

from fleetaudit.whatif.placement import POLICIES, PlacementOptions, fill_curves

TRACE = "alibaba-gpu-v2023"
VARIANTS = ("default", "gpushare40", "multigpu50", "gpuspec33")


def traces_dir() -> Path | None:
    """The folder holding alibaba-gpu-v2023/, or None when the traces are absent."""
    env = os.environ.get("FLEETAUDIT_TRACES")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[2] / "shared" / "traces")
    for candidate in candidates:
        if (candidate / TRACE / "openb_node_list_gpu_node.csv").is_file():
            return candidate
    return None


def openb_nodes(frame: pl.DataFrame) -> pl.DataFrame:
    """openb_node_list_*.csv (sn, cpu_milli, memory_mib, gpu, model) as a nodes frame."""
    return frame.select(
        pl.col("sn").alias("node_id"),
        pl.col("model").fill_null("CPU").alias("gpu_model"),
        pl.col("gpu").cast(pl.Int64).alias("gpus"),
        (pl.col("cpu_milli") / 1000).alias("cpus"),
        (pl.col("memory_mib") / 1024).alias("memory_gib"),
        pl.lit(None, dtype=pl.String).alias("switch_id"),
        pl.lit("healthy").alias("health"),
    )


def openb_requests(frame: pl.DataFrame) -> pl.DataFrame:
    """openb_pod_list_*.csv as a requests frame, one single-pod request per pod.

    The multigpu lists have only name, cpu_milli, memory_mib, num_gpu, gpu_milli.
    """
    share = (pl.col("num_gpu") == 1) & (pl.col("gpu_milli") < 1000)
    spec = pl.col("gpu_spec") if "gpu_spec" in frame.columns else pl.lit(None, dtype=pl.String)
    return frame.with_row_index("trace_order").select(
        pl.col("name").alias("request_id"),
        "trace_order",
        spec.cast(pl.String).alias("gpu_model"),
        pl.when(share)
        .then(pl.col("gpu_milli") / 1000)
        .otherwise(pl.col("num_gpu").cast(pl.Float64))
        .alias("gpus"),
        (pl.col("cpu_milli") / 1000).alias("cpus"),
        (pl.col("memory_mib") / 1024).alias("memory_gib"),
        pl.lit("node").alias("locality"),
    )


def load(traces: Path, variant: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    folder = traces / TRACE
    nodes = openb_nodes(pl.read_csv(folder / "openb_node_list_gpu_node.csv"))
    pods = pl.read_csv(folder / f"openb_pod_list_{variant}.csv", infer_schema_length=None)
    return nodes, openb_requests(pods)


def table(curves: dict[str, pl.DataFrame], marks: list[float]) -> str:
    lines = [
        "| policy | " + " | ".join(f"{m:g}%" for m in marks) + " |",
        "|---|" + "---:|" * len(marks),
    ]
    for policy, curve in curves.items():
        cells = []
        for mark in marks:
            row = curve.filter(pl.col("arrived_pct") == mark)
            if row.height == 0:
                cells.append("-")
                continue
            a, f, x = row.select("allocated_pct", "fragmented_pct", "failed").row(0)
            cells.append(f"{a:.1f} / {f:.1f} / {x:.0f}")
        lines.append(f"| {policy} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--max-pct", type=float, default=130.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS))
    parser.add_argument(
        "--shuffle",
        action="store_true",
        help="feed the pod list in a seeded order, as the FGD authors' simulator does",
    )
    args = parser.parse_args()
    traces = traces_dir()
    if traces is None:
        raise SystemExit("the public traces are absent: set FLEETAUDIT_TRACES")
    options = PlacementOptions(
        fill_pct=args.max_pct, seeds=args.seeds, workers=args.workers, shuffle=args.shuffle
    )
    marks = list(range(50, int(args.max_pct) + 1, 10))
    for variant in args.variants:
        nodes, requests = load(traces, variant)
        started = time.perf_counter()
        curves = fill_curves(nodes, requests, options, POLICIES)
        seconds = time.perf_counter() - started
        print(
            f"\n### openb_pod_list_{variant}: allocated % / fragmented % / failed requests, "
            f"mean of {args.seeds} seeds ({len(POLICIES)} policies in {seconds:.1f} s, "
            f"{args.workers} workers, {'shuffled' if args.shuffle else 'list'} order)\n"
        )
        print(table(curves, [float(m) for m in marks]))


if __name__ == "__main__":
    main()
