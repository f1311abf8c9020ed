"""A generated fleet's telemetry as a dcgm-exporter dump of Prometheus ``query_range`` files.

`write_query_range(out, nodes, telemetry)` turns the native telemetry that
:mod:`fleetaudit.inputs.generate` wrote into what an operator exports with the PromQL
of docs/formats/prometheus.md: one ``query_range`` response per
metric and day, ``<metric>.<YYYY-MM-DD>.json`` in ``out``, series without
``__name__`` as ``avg_over_time`` returns them. Every GPU of every node
reports at every step, as dcgm-exporter does: a GPU without an allocation
reports an idle value (SM activity 0, 0.4% of the framebuffer) without pod labels
(dcgm-exporter writes them empty, and Prometheus drops empty labels); an allocated
one carries the ``pod``, ``namespace`` and ``pod_uid`` labels of its allocation
(``pod_uid`` = alloc_id). Metrics: SM_ACTIVE and
FB_USED / FB_FREE of an 80 GiB GPU (81,559 MiB).

Text is built by polars per sample (no Python loop per sample) and each file is
moved into place whole. Only polars, pyarrow and the standard library.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

FB_TOTAL_MIB = 81_559
IDLE_MEM = 0.004
METRICS = ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE")
_DAY = 86_400


def write_query_range(
    out: Path,
    nodes_file: Path,
    telemetry_file: Path,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[Path], int]:
    """Write the dump into ``out``; returns (files written, samples written)."""
    out.mkdir(parents=True, exist_ok=True)
    nodes = pl.read_parquet(nodes_file, columns=["node_id", "gpus", "gpu_model"])
    gpus = (
        nodes.filter(pl.col("gpus") > 0)
        .with_columns(pl.int_ranges(0, pl.col("gpus")).alias("gpu_index"))
        .explode("gpu_index")
        .select("node_id", pl.col("gpu_index").cast(pl.Int64), "gpu_model")
    )
    tel = pl.scan_parquet(telemetry_file).select(
        (pl.col("ts").dt.epoch("s")).alias("t"),
        "node_id",
        pl.col("gpu_index").cast(pl.Int64),
        "sm_active",
        "mem_used",
        "alloc_id",
    )
    steps = tel.select("t").unique().sort("t").collect()["t"]
    files: list[Path] = []
    samples = 0
    if steps.is_empty():
        return files, samples
    days = steps // _DAY
    for day in days.unique().sort().to_list():
        ts = steps.filter(days == day)
        grid = gpus.join(pl.DataFrame({"t": ts}), how="cross")
        chunk = tel.filter(pl.col("t").is_between(ts.min(), ts.max()))
        frame = (
            grid.join(chunk.collect(), on=["t", "node_id", "gpu_index"], how="left")
            .with_columns(
                pl.col("sm_active").fill_null(0.0),
                pl.col("mem_used").fill_null(IDLE_MEM),
                pl.col("alloc_id").fill_null(""),
            )
            .sort("node_id", "gpu_index", "t")
        )
        label = _day_label(day)
        used = (pl.col("mem_used") * FB_TOTAL_MIB).round(0).cast(pl.Int64)
        values = {
            "DCGM_FI_PROF_SM_ACTIVE": pl.col("sm_active").round(3),
            "DCGM_FI_DEV_FB_USED": used,
            "DCGM_FI_DEV_FB_FREE": FB_TOTAL_MIB - used,
        }
        for metric in METRICS:
            path = out / f"{metric}.{label}.json"
            if progress is not None:
                progress(f"writing {path.name}")
            samples += _write_file(path, frame, values[metric])
            files.append(path)
    return files, samples


def _day_label(day: int) -> str:
    return datetime.fromtimestamp(day * _DAY, tz=timezone.utc).strftime("%Y-%m-%d")


def _write_file(path: Path, frame: pl.DataFrame, value: pl.Expr) -> int:
    series = (
        frame.with_columns(
            pl.concat_str(
                pl.lit("["),
                pl.col("t").cast(pl.Utf8),
                pl.lit(',"'),
                value.cast(pl.Utf8),
                pl.lit('"]'),
            ).alias("sample"),
            # a new series where the pod on a GPU changes (dcgm-exporter's labels do)
            (pl.col("alloc_id") != pl.col("alloc_id").shift(1))
            .over("node_id", "gpu_index")
            .fill_null(True)
            .cum_sum()
            .alias("run"),
        )
        .group_by("node_id", "gpu_index", "run", maintain_order=True)
        .agg(
            pl.col("gpu_model").first(),
            pl.col("alloc_id").first(),
            pl.col("sample").str.join(","),
        )
        .with_columns(
            pl.concat_str(
                pl.lit('{"metric":{"gpu":"'),
                pl.col("gpu_index").cast(pl.Utf8),
                pl.lit('","UUID":"GPU-'),
                "node_id",
                pl.lit("-"),
                pl.col("gpu_index").cast(pl.Utf8),
                pl.lit('","hostname":"'),
                "node_id",
                pl.lit('","modelName":"'),
                "gpu_model",
                # the pod's labels only while a pod holds the GPU: Prometheus drops the
                # empty labels dcgm-exporter writes on an idle one
                pl.when(pl.col("alloc_id") == "")
                .then(pl.lit(""))
                .otherwise(
                    pl.concat_str(
                        pl.lit('","namespace":"fleet","pod":"'),
                        "alloc_id",
                        pl.lit('","pod_uid":"'),
                        "alloc_id",
                    )
                ),
                pl.lit('","instance":"'),
                "node_id",
                pl.lit(':9400","job":"dcgm"},"values":['),
                "sample",
                pl.lit("]}"),
            ).alias("line")
        )
    )
    temp = path.with_name(f".{path.name}.partial")
    try:
        with open(temp, "w", encoding="utf-8") as fh:
            fh.write('{"status":"success","data":{"resultType":"matrix","result":[\n')
            fh.write(",\n".join(series["line"].to_list()))
            fh.write("\n]}}\n")
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    return frame.height
