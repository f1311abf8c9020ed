"""What failures cost the fleet over a window: the ``failures`` section of ``report``.

Pure functions over the nodes frame (with the health that holds over all the time,
:func:`fleetaudit.model.capacity.whole_window_health`), the allocations, the fleet's
:class:`~fleetaudit.model.capacity.Health` and the window's occupancy timeline with
the GPUs out of service (``gpus_held``, :func:`fleetaudit.model.occupancy.occupancy_timeline`).

- **Unhealthy GPU-hours** are the physical denominator's (installed - healthy),
  split by state and reason, exactly: on every stretch of time where a node's
  occupancy and its pieces of out-of-service time
  (:func:`fleetaudit.model.capacity.health_pieces`) are constant, its unhealthy GPUs
  are its GPUs out of service that no work holds. A whole-node piece names them all;
  GPU pieces share them equally (which GPUs the work holds is not recorded). A node
  whose recorded health holds over the whole window (no interval dates it) is
  unhealthy throughout under its recorded state, with no reason.
- **Failures** are spans (the union of a node's, or one GPU's, intervals from every
  source) that begin in the window: a node that flaps fails once per span.
- **Mean time between failures** per GPU model: the node-hours of its nodes in the
  window that no whole-node span covers (nor their recorded health), divided by
  its failures.
- **Quarantine candidates**: nodes with at least ``quarantine`` failures in the window.
- **Interrupted allocations**: allocations that ended within ``within`` of the start
  of a whole-node interval in state ``down`` or ``unhealthy`` on their node (before
  or after it: the export may see the work end or the node fail first), having
  started before it. Each lost the work since its last checkpoint, gpus x ((end -
  start) mod checkpoint_interval_s) (SpotGPU's measure); without a checkpoint
  interval, all of it since its start, an upper bound counted apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from fleetaudit.core.times import epoch_us
from fleetaudit.model.capacity import (
    FAILING_STATES,
    FOREVER_US,
    HEALTHY,
    Health,
    health_pieces,
    optional_column,
    usable_expr,
)

__all__ = ["Failures", "failures"]

_US_PER_HOUR = 3_600_000_000
_SEGMENT_SCHEMA: dict[str, Any] = {
    "node_id": pl.String,
    "time": pl.Int64,
    "length": pl.Int64,
    "state": pl.String,
    "reason": pl.String,
    "gpus": pl.Float64,
}


@dataclass(frozen=True)
class Failures:
    """What failures cost over ``[start, end)`` (module doc).

    Attributes:
        unhealthy: node_id, gpu_model, state, reason, recorded (the node's recorded
            health, no interval), gpu_hours: the unhealthy GPU-hours, split exactly.
        over_time: bucket (its start), state, gpu_hours: the same per bucket of
            ``bucket`` length from the window's start.
        nodes: node_id, gpu_model, failures, unhealthy_gpu_hours, interrupted,
            lost_gpu_hours, quarantine; every node with a failure, unhealthy time or
            an interrupted allocation, ranked by failures, then unhealthy
            GPU-hours, then lost GPU-hours, then node_id.
        models: gpu_model, nodes, failures, failed_nodes, in_service_node_hours,
            mtbf_hours (null without a failure), unhealthy_gpu_hours.
        interrupted: alloc_id, node_id, gpu_model, gpus, start_time, end_time,
            outage_start, checkpoint_interval_s, lost_gpu_hours, upper_bound (no
            checkpoint interval: all the work since start).
        intervals: the health intervals that meet the window.
        sources: their distinct sources (null left out).
    """

    start: datetime
    end: datetime
    quarantine: int
    within: timedelta
    bucket: timedelta
    unhealthy: pl.DataFrame = field(repr=False)
    over_time: pl.DataFrame = field(repr=False)
    nodes: pl.DataFrame = field(repr=False)
    models: pl.DataFrame = field(repr=False)
    interrupted: pl.DataFrame = field(repr=False)
    intervals: int = 0
    sources: tuple[str, ...] = ()


def failures(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    health: Health,
    timeline: pl.DataFrame,
    start: datetime,
    end: datetime,
    *,
    quarantine: int,
    within: timedelta,
    buckets: int = 48,
) -> Failures:
    """What failures cost the fleet over ``[start, end)`` (module doc).

    Args:
        nodes: the nodes frame (node_id, gpu_model, gpus, health), with the health that
            holds over all the time.
        allocations: the allocations overlapping the window.
        health: the health intervals meeting the window.
        timeline: :func:`fleetaudit.model.occupancy.occupancy_timeline` of the
            allocations from ``start`` (at least to ``end``), with ``health``.
        start, end: the window.
        quarantine: failures in the window that make a node a quarantine candidate.
        within: how close to a node's failure an allocation's end makes it interrupted.
        buckets: how many buckets ``over_time`` has (at most).
    """
    lo, hi = epoch_us(start), epoch_us(end)
    span = max(hi - lo, 1)
    bucket_us = -(-span // max(buckets, 1))
    per_node = nodes.select(
        pl.col("node_id").cast(pl.String),
        pl.col("gpu_model").cast(pl.String),
        pl.col("gpus").cast(pl.Int64).fill_null(0),
        usable_expr(nodes).alias("_usable"),
        optional_column(nodes, "health", pl.String, None).alias("_recorded"),
    )
    segments = pl.concat(
        [_interval_segments(per_node, health, timeline, lo, hi, bucket_us),
         _recorded_segments(per_node, lo, hi, bucket_us)],
    )  # fmt: skip
    segments = segments.join(per_node.select("node_id", "gpu_model"), on="node_id", how="left")
    hours = pl.col("gpus") * pl.col("length") / _US_PER_HOUR
    unhealthy = (
        segments.group_by("node_id", "gpu_model", "state", "reason", "recorded")
        .agg(hours.sum().alias("gpu_hours"))
        .filter(pl.col("gpu_hours") > 0)
        .sort("node_id", "state", "reason", nulls_last=True)
    )
    over_time = (
        segments.with_columns((lo + (pl.col("time") - lo) // bucket_us * bucket_us).alias("bucket"))
        .group_by("bucket", "state")
        .agg(hours.sum().alias("gpu_hours"))
        .filter(pl.col("gpu_hours") > 0)
        .sort("bucket", "state")
        .with_columns(pl.col("bucket").cast(pl.Datetime("us")))
    )
    spans = health.spans.filter((pl.col("start_us") >= lo) & (pl.col("start_us") < hi))
    counts = spans.group_by("node_id").agg(pl.len().cast(pl.Int64).alias("failures"))
    interrupted = _interrupted(per_node, allocations, health, lo, hi, within)
    lost = interrupted.group_by("node_id").agg(
        pl.len().cast(pl.Int64).alias("interrupted"),
        pl.col("lost_gpu_hours").sum(),
    )
    by_node = (
        per_node.select("node_id", "gpu_model")
        .join(counts, on="node_id", how="left")
        .join(
            unhealthy.group_by("node_id").agg(pl.col("gpu_hours").sum().alias("unhealthy_gpu_hours")),
            on="node_id",
            how="left",
        )
        .join(lost, on="node_id", how="left")
        .with_columns(
            pl.col("failures", "interrupted").fill_null(0),
            pl.col("unhealthy_gpu_hours", "lost_gpu_hours").fill_null(0.0),
        )
    )
    ranked = (
        by_node.filter(
            (pl.col("failures") > 0)
            | (pl.col("unhealthy_gpu_hours") > 0)
            | (pl.col("interrupted") > 0)
        )
        .with_columns((pl.col("failures") >= quarantine).alias("quarantine"))
        .sort(
            ["failures", "unhealthy_gpu_hours", "lost_gpu_hours", "node_id"],
            descending=[True, True, True, False],
        )
    )
    meeting = health.events.filter((pl.col("start_us") < hi) & (pl.col("end_us") > lo))
    return Failures(
        start=start,
        end=end,
        quarantine=quarantine,
        within=within,
        bucket=timedelta(microseconds=bucket_us),
        unhealthy=unhealthy,
        over_time=over_time,
        nodes=ranked,
        models=_models(per_node, by_node, health, lo, hi),
        interrupted=interrupted,
        intervals=meeting.height,
        sources=tuple(sorted(meeting["source"].drop_nulls().unique().to_list())),
    )


def _recorded_segments(per_node: pl.DataFrame, lo: int, hi: int, bucket_us: int) -> pl.DataFrame:
    """Nodes whose recorded health holds over the window: all their GPUs, every bucket."""
    out = per_node.filter(~pl.col("_usable") & (pl.col("gpus") > 0))
    if out.height == 0 or hi <= lo:
        return pl.DataFrame(schema={**_SEGMENT_SCHEMA, "recorded": pl.Boolean})
    starts = list(range(lo, hi, bucket_us))
    grid = pl.DataFrame(
        {"time": starts, "length": [min(s + bucket_us, hi) - s for s in starts]},
        schema={"time": pl.Int64, "length": pl.Int64},
    )
    return out.join(grid, how="cross").select(
        "node_id",
        "time",
        "length",
        pl.col("_recorded").fill_null(HEALTHY).alias("state"),
        pl.lit(None, dtype=pl.String).alias("reason"),
        pl.col("gpus").cast(pl.Float64),
        pl.lit(True).alias("recorded"),
    )


def _interval_segments(
    per_node: pl.DataFrame,
    health: Health,
    timeline: pl.DataFrame,
    lo: int,
    hi: int,
    bucket_us: int,
) -> pl.DataFrame:
    """Each node's unhealthy GPUs from its health pieces, on stretches where they and
    its occupancy are constant (cut at every bucket's start too): node_id, time,
    length, state, reason, gpus (Float64: a GPU piece's share), recorded (false)."""
    empty = pl.DataFrame(schema={**_SEGMENT_SCHEMA, "recorded": pl.Boolean})
    if health.empty or hi <= lo:
        return empty
    usable = per_node.filter(pl.col("_usable")).select("node_id", "gpus")
    pieces = health_pieces(health, lo, hi).join(usable.select("node_id"), on="node_id", how="semi")
    if pieces.height == 0:
        return empty
    mine = pieces.select("node_id").unique()
    occupied = (
        timeline.select(
            pl.col("node_id").cast(pl.String),
            pl.col("time").dt.epoch("us").alias("time"),
            "gpus_used",
        )
        .join(mine, on="node_id", how="semi")
        .filter(pl.col("time") < hi)
    )
    grid = pl.DataFrame({"time": list(range(lo, hi, bucket_us))}, schema={"time": pl.Int64})
    cuts = (
        pl.concat(
            [
                occupied.select("node_id", "time"),
                pieces.select("node_id", pl.col("start_us").alias("time")),
                pieces.select("node_id", pl.col("end_us").alias("time")),
                mine.join(grid, how="cross"),
            ]
        )
        .filter((pl.col("time") >= lo) & (pl.col("time") < hi))
        .unique()
        .sort("node_id", "time")
    )
    same_node_next = pl.col("node_id") == pl.col("node_id").shift(-1)
    stretches = cuts.with_columns(
        (pl.when(same_node_next).then(pl.col("time").shift(-1)).otherwise(hi) - pl.col("time"))
        .alias("length")
    )
    whole = pieces.filter(pl.col("gpu_index").is_null()).sort("node_id", "start_us")
    gpu = pieces.filter(pl.col("gpu_index").is_not_null())
    counts = (
        pl.concat(
            [gpu.select("node_id", pl.col("start_us").alias("time"), pl.lit(1).alias("d")),
             gpu.select("node_id", pl.col("end_us").alias("time"), pl.lit(-1).alias("d"))]
        )  # fmt: skip
        .group_by("node_id", "time")
        .agg(pl.col("d").sum())
        .sort("node_id", "time")
        .with_columns(pl.col("d").cum_sum().over("node_id").alias("failed"))
        .select("node_id", "time", "failed")
    )
    stretches = (
        stretches.sort("node_id", "time")
        .join_asof(
            occupied.sort("node_id", "time"),
            on="time",
            by="node_id",
            strategy="backward",
            check_sortedness=False,
        )
        .join_asof(
            whole.select(
                "node_id",
                pl.col("start_us").alias("time"),
                pl.col("end_us").alias("_whole_end"),
                pl.col("state").alias("_whole_state"),
                pl.col("reason").alias("_whole_reason"),
            ),
            on="time",
            by="node_id",
            strategy="backward",
            check_sortedness=False,  # sorted by node, then time: polars cannot check per group
        )
        .join_asof(
            counts, on="time", by="node_id", strategy="backward", check_sortedness=False
        )
        .join(usable, on="node_id")
        .with_columns(
            pl.col("gpus_used").fill_null(0),
            pl.col("failed").fill_null(0),
            (pl.col("_whole_end").fill_null(lo) > pl.col("time")).alias("_whole"),
        )
        .with_columns(
            (pl.col("gpus") - pl.min_horizontal("gpus_used", "gpus")).clip(lower_bound=0).alias("_free")
        )
        .with_columns(
            pl.when(pl.col("_whole"))
            .then(pl.col("_free"))
            .otherwise(pl.min_horizontal("failed", "_free"))
            .alias("_unhealthy")
        )
        .filter(pl.col("_unhealthy") > 0)
    )
    by_whole = stretches.filter(pl.col("_whole")).select(
        "node_id",
        "time",
        "length",
        pl.col("_whole_state").alias("state"),
        pl.col("_whole_reason").alias("reason"),
        pl.col("_unhealthy").cast(pl.Float64).alias("gpus"),
    )
    by_gpu = (
        stretches.filter(~pl.col("_whole"))
        .select("node_id", "time", "length", "_unhealthy", "failed")
        .join(gpu.select("node_id", "start_us", "end_us", "state", "reason"), on="node_id")
        .filter((pl.col("start_us") <= pl.col("time")) & (pl.col("end_us") > pl.col("time")))
        .select(
            "node_id",
            "time",
            "length",
            "state",
            "reason",
            (pl.col("_unhealthy") / pl.col("failed")).alias("gpus"),
        )
    )
    return pl.concat([by_whole.cast(_SEGMENT_SCHEMA), by_gpu.cast(_SEGMENT_SCHEMA)]).with_columns(  # type: ignore[arg-type]
        pl.lit(False).alias("recorded")
    )


def _interrupted(
    per_node: pl.DataFrame,
    allocations: pl.DataFrame,
    health: Health,
    lo: int,
    hi: int,
    within: timedelta,
) -> pl.DataFrame:
    """Allocations that ended within ``within`` of their node's failure (module doc)."""
    slack = within // timedelta(microseconds=1)
    schema: dict[str, Any] = {
        "alloc_id": pl.String, "node_id": pl.String, "gpu_model": pl.String,
        "gpus": pl.Float64, "start_time": pl.Datetime("us"), "end_time": pl.Datetime("us"),
        "outage_start": pl.Datetime("us"), "checkpoint_interval_s": pl.Float64,
        "lost_gpu_hours": pl.Float64, "upper_bound": pl.Boolean,
    }  # fmt: skip
    outages = health.events.filter(
        pl.col("gpu_index").is_null()
        & pl.col("state").is_in(list(FAILING_STATES))
        & (pl.col("start_us") >= lo)
        & (pl.col("start_us") < hi)
    ).select("node_id", pl.col("start_us").alias("outage_us"))
    if outages.height == 0 or allocations.height == 0:
        return pl.DataFrame(schema=schema)
    ckpt = optional_column(allocations, "checkpoint_interval_s", pl.Float64, None)
    ended = allocations.select(
        pl.col("alloc_id").cast(pl.String),
        pl.col("node_id").cast(pl.String),
        pl.col("gpus").cast(pl.Float64).fill_null(0.0),
        pl.col("start_time").cast(pl.Datetime("us")),
        pl.col("end_time").cast(pl.Datetime("us")),
        ckpt.alias("checkpoint_interval_s"),
    ).filter(pl.col("end_time").is_not_null() & (pl.col("gpus") > 0))
    start_us = pl.col("start_time").dt.epoch("us")
    end_us = pl.col("end_time").dt.epoch("us")
    matched = (
        ended.join(outages, on="node_id")
        .filter(
            (start_us < pl.col("outage_us"))
            & ((end_us - pl.col("outage_us")).abs() <= slack)
        )
        .group_by("alloc_id", maintain_order=True)
        .agg(pl.all().exclude("outage_us").first(), pl.col("outage_us").min())
    )
    run_s = (end_us - start_us) / 1e6
    interval = pl.col("checkpoint_interval_s")
    known = interval.is_not_null() & (interval > 0)
    since = pl.when(known).then(run_s % interval).otherwise(run_s)
    return (
        matched.join(per_node.select("node_id", "gpu_model"), on="node_id", how="left")
        .select(
            "alloc_id",
            "node_id",
            "gpu_model",
            "gpus",
            "start_time",
            "end_time",
            pl.col("outage_us").cast(pl.Datetime("us")).alias("outage_start"),
            "checkpoint_interval_s",
            (pl.col("gpus") * since / 3600).alias("lost_gpu_hours"),
            (~known).alias("upper_bound"),
        )
        .sort("end_time", "alloc_id")
        .cast(schema)  # type: ignore[arg-type]
    )


def _models(
    per_node: pl.DataFrame, by_node: pl.DataFrame, health: Health, lo: int, hi: int
) -> pl.DataFrame:
    """Per GPU model: nodes, failures, failed nodes, node-hours in service, MTBF and
    unhealthy GPU-hours."""
    whole = health.spans.filter(pl.col("gpu_index").is_null()).select(
        "node_id",
        (
            pl.min_horizontal(pl.col("end_us"), pl.lit(min(hi, FOREVER_US)))
            - pl.max_horizontal(pl.col("start_us"), pl.lit(lo))
        )
        .clip(lower_bound=0)
        .alias("out_us"),
    )
    down = whole.group_by("node_id").agg(pl.col("out_us").sum())
    window_us = max(hi - lo, 0)
    return (
        per_node.select("node_id", "gpu_model", "_usable")
        .join(down, on="node_id", how="left")
        .join(by_node.select("node_id", "failures", "unhealthy_gpu_hours"), on="node_id")
        .with_columns(
            pl.when(pl.col("_usable"))
            .then(window_us - pl.col("out_us").fill_null(0))
            .otherwise(0)
            .alias("in_us")
        )
        .group_by("gpu_model")
        .agg(
            pl.len().cast(pl.Int64).alias("nodes"),
            pl.col("failures").sum().cast(pl.Int64),
            (pl.col("failures") > 0).sum().cast(pl.Int64).alias("failed_nodes"),
            (pl.col("in_us").sum() / _US_PER_HOUR).alias("in_service_node_hours"),
            pl.col("unhealthy_gpu_hours").sum(),
        )
        .with_columns(
            pl.when(pl.col("failures") > 0)
            .then(pl.col("in_service_node_hours") / pl.col("failures"))
            .alias("mtbf_hours")
        )
        .sort("gpu_model")
    )
