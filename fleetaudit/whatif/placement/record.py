"""What the record says of a replay window: each request's recorded run, and the record's own figures.

A by-time replay (:mod:`fleetaudit.whatif.placement.replay`) first has to replay what
really happened; this module reads that from the stored frames:

- :func:`link_runs`: each request's run as the record shows it. A request is linked
  to the allocations of its job: those whose ``job_id`` is the request's ``job_id``
  column where the requests carry one, else its ``request_id`` (an allocation
  without job_id is its own job). The run time is the job's latest end minus its
  earliest start (unknown while any allocation still runs), its checkpoint interval
  is its allocations' smallest, and a job of one allocation names its node.
- :func:`arrivals`: which requests a window's replay feeds, and when: those
  submitted in it, and those already waiting at its start (submitted before it and
  started, in the record, at or after it, or never), which join at the start.
- :func:`record_figures`: the record's own figures over those arrivals, to set a
  replay's beside (:class:`QueueFigures`).

Pure functions over polars frames; nothing is mutated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import polars as pl

from fleetaudit.core.times import epoch_us
from fleetaudit.model import occupancy
from fleetaudit.model.capacity import optional_column, usable_expr
from fleetaudit.model.history import nearest_rank

RUN_COLUMNS = ("run_s", "checkpoint_s", "recorded_node")
"""The columns :func:`link_runs` adds to the requests."""


def link_runs(allocations: pl.DataFrame, requests: pl.DataFrame) -> pl.DataFrame:
    """The requests with their recorded run: ``run_s``, ``checkpoint_s``, ``recorded_node``.

    Args:
        allocations: the recorded allocations (alloc_id, node_id, start_time,
            end_time; job_id and checkpoint_interval_s optional).
        requests: the requests frame (request_id; job_id optional).

    Returns:
        ``requests`` (same rows, same order) plus run_s (Float64: the job's latest
        end minus its earliest start; null when the request has no recorded job or
        the job still runs), checkpoint_s (Float64, null without one) and
        recorded_node (String: the node of a job of one allocation, else null).

    Example:
        >>> from datetime import datetime
        >>> t = datetime(2026, 1, 1)
        >>> allocations = pl.DataFrame({"alloc_id": ["a1", "a2", "a3"],
        ...     "job_id": ["r1", "r2", "r2"], "node_id": ["n1", "n1", "n2"],
        ...     "start_time": [t, t, t], "end_time": [datetime(2026, 1, 1, 1), None, t]})
        >>> requests = pl.DataFrame({"request_id": ["r1", "r2", "r3"]})
        >>> link_runs(allocations, requests).rows()
        [('r1', 3600.0, None, 'n1'), ('r2', None, None, None), ('r3', None, None, None)]
    """
    frame = requests.drop([c for c in RUN_COLUMNS if c in requests.columns])
    if "job_id" in frame.columns:
        key = pl.coalesce(pl.col("job_id").cast(pl.String), pl.col("request_id").cast(pl.String))
    else:
        key = pl.col("request_id").cast(pl.String)
    if allocations.is_empty():
        return frame.with_columns(
            pl.lit(None, dtype=pl.Float64).alias("run_s"),
            pl.lit(None, dtype=pl.Float64).alias("checkpoint_s"),
            pl.lit(None, dtype=pl.String).alias("recorded_node"),
        )
    alloc_id = pl.col("alloc_id").cast(pl.String)
    job = optional_column(allocations, "job_id", pl.String, None)
    jobs = (
        allocations.select(
            pl.coalesce(job, alloc_id).alias("_link"),
            pl.col("node_id").cast(pl.String),
            pl.col("start_time").cast(pl.Datetime("us")),
            pl.col("end_time").cast(pl.Datetime("us")),
            optional_column(allocations, "checkpoint_interval_s", pl.Float64, None).alias("ckpt"),
        )
        .group_by("_link")
        .agg(
            pl.when(pl.col("end_time").null_count() == 0)
            .then((pl.col("end_time").max() - pl.col("start_time").min()).dt.total_microseconds())
            .alias("_run_us"),
            pl.col("ckpt").filter(pl.col("ckpt") > 0).min().alias("checkpoint_s"),
            pl.when(pl.len() == 1).then(pl.col("node_id").first()).alias("recorded_node"),
        )
        .select(
            "_link",
            (pl.col("_run_us").cast(pl.Float64) / 1e6).alias("run_s"),
            "checkpoint_s",
            "recorded_node",
        )
    )
    return (
        frame.with_columns(key.alias("_link"))
        .join(jobs, on="_link", how="left", maintain_order="left")
        .drop("_link")
    )


def arrivals(requests: pl.DataFrame, start: datetime, end: datetime) -> pl.Series:
    """Which requests a replay of [start, end) feeds (a Boolean mask over ``requests``).

    Those submitted in the window, and those waiting at its start: submitted
    before it, and started (by the record's start_time) at or after it, or never.
    A waiting one joins the replay's queue at the window's start.
    """
    start_us, end_us = epoch_us(start), epoch_us(end)
    submit = pl.col("submit_time").dt.epoch("us")
    began = optional_column(requests, "start_time", pl.Datetime("us"), None).dt.epoch("us")
    return requests.select(
        (
            submit.is_not_null()
            & (submit < end_us)
            & ((submit >= start_us) | began.is_null() | (began >= start_us))
        ).alias("arrives")
    ).to_series()


@dataclass(frozen=True)
class QueueFigures:
    """What a queue did over a window, as a replay or the record shows it.

    Attributes:
        arrived: requests fed (see :func:`arrivals`).
        started: those that started in the window (a restart after a preemption
            counts once).
        waiting: those still waiting at the window's end (held ones included).
        never: those that fit no node even of an empty fleet (the record: 0).
        wait_p50_s, wait_p90_s: nearest-rank percentiles of the started ones'
            waits (start minus submit), None when none started.
        instants: the curve's instants; allocated_pct: the allocated GPUs of the
            healthy nodes at each, as a % of their GPUs.
    """

    arrived: int
    started: int
    waiting: int
    never: int
    wait_p50_s: float | None
    wait_p90_s: float | None
    instants: tuple[datetime, ...]
    allocated_pct: tuple[float, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "arrived": self.arrived,
            "started": self.started,
            "waiting_at_end": self.waiting,
            "never": self.never,
            "wait_p50_s": _rounded(self.wait_p50_s),
            "wait_p90_s": _rounded(self.wait_p90_s),
            "allocated_pct": [round(x, 2) for x in self.allocated_pct],
        }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def wait_figures(waits: pl.Series) -> tuple[float | None, float | None]:
    """(p50, p90) by nearest rank (the ceil(q x n)-th smallest) of the non-null waits (seconds).

    >>> wait_figures(pl.Series([5.0, 1.0, None, 3.0, 2.0]))
    (2.0, 5.0)
    """
    values: list[float | None] = list(waits.drop_nulls().to_list())
    return nearest_rank(values, 50, 100), nearest_rank(values, 90, 100)


def record_figures(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    requests: pl.DataFrame,
    start: datetime,
    end: datetime,
    instants: Sequence[datetime],
) -> QueueFigures:
    """The record's own :class:`QueueFigures` over the window's arrivals.

    A request started when its recorded start_time is before ``end``; its wait is
    start_time minus submit_time. The allocation at an instant is the recorded
    occupancy (whole GPUs plus shares packed first-fit-decreasing, at most each
    node's GPUs) of the healthy nodes, as a % of their GPUs.

    Example:
        >>> from datetime import datetime, timedelta
        >>> t = datetime(2026, 1, 1)
        >>> nodes = pl.DataFrame({"node_id": ["n1"], "gpus": [2], "cpus": [8.0]})
        >>> allocations = pl.DataFrame({"alloc_id": ["a"], "node_id": ["n1"], "gpus": [1.0],
        ...     "cpus": [1.0], "start_time": [t], "end_time": [t + timedelta(hours=1)]})
        >>> requests = pl.DataFrame({"request_id": ["r1", "r2"],
        ...     "submit_time": [t, t + timedelta(minutes=5)],
        ...     "start_time": [t + timedelta(seconds=30), None]})
        >>> f = record_figures(nodes, allocations, requests, t, t + timedelta(hours=2),
        ...                    [t, t + timedelta(hours=1)])
        >>> (f.arrived, f.started, f.waiting, f.wait_p50_s, f.allocated_pct)
        (2, 1, 1, 30.0, (50.0, 0.0))
    """
    fed = requests.filter(arrivals(requests, start, end))
    began = optional_column(fed, "start_time", pl.Datetime("us"), None)
    started = began.is_not_null() & (began < end)
    waits = pl.select(
        pl.when(started)
        .then((began - fed["submit_time"].cast(pl.Datetime("us"))).dt.total_microseconds() / 1e6)
        .alias("w")
    ).to_series()
    p50, p90 = wait_figures(waits)
    n_started = int(started.sum())
    return QueueFigures(
        arrived=fed.height,
        started=n_started,
        waiting=fed.height - n_started,
        never=0,
        wait_p50_s=p50,
        wait_p90_s=p90,
        instants=tuple(instants),
        allocated_pct=recorded_allocation(nodes, allocations, instants),
    )


def recorded_allocation(
    nodes: pl.DataFrame, allocations: pl.DataFrame, instants: Sequence[datetime]
) -> tuple[float, ...]:
    """The healthy nodes' occupied GPUs at each instant, as a % of their GPUs."""
    healthy = nodes.filter(usable_expr(nodes))
    total = float(healthy["gpus"].cast(pl.Float64).fill_null(0.0).sum())
    if not total or not instants:
        return tuple(0.0 for _ in instants)
    capacity = healthy.select(pl.col("node_id").cast(pl.String), pl.col("gpus").cast(pl.Int64))
    allocations = allocations.with_columns(
        optional_column(allocations, column, dtype, None).alias(column)
        for column, dtype in (("priority", pl.String), ("memory_gib", pl.Float64))
    )
    out: list[float] = []
    for at in instants:
        used = (
            occupancy.occupancy_at(healthy, allocations, at)
            .select(pl.col("node_id").cast(pl.String), "gpus_used")
            .join(capacity, on="node_id", how="inner")
            .select(pl.min_horizontal("gpus_used", "gpus").sum())
            .item()
        )
        out.append(100.0 * float(used or 0) / total)
    return tuple(out)


def as_array(values: pl.Series, none: int) -> np.ndarray:
    """A Datetime or Float64 seconds series as int64 µs (null -> ``none``)."""
    if values.dtype == pl.Float64 or values.dtype == pl.Int64:
        seconds = values.cast(pl.Float64).to_numpy()
        return np.where(np.isnan(seconds), none, np.round(np.nan_to_num(seconds) * 1e6)).astype(
            np.int64
        )
    return values.dt.epoch("us").fill_null(none).to_numpy().astype(np.int64)
