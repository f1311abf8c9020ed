"""The demand of a report's window: which request shapes the schedulable figures evaluate.

Pure functions over the requests frame (the store's columns); nothing here reads
the store. Three ways to read a window's demand (``--demand``):

- ``waited``: the requests that waited at some instant of the window
  ``[start, end]`` (their wait ``[submit_time, start_time)``, open-ended when still
  queued, overlaps the window), and those still queued at ``end``. Each weighs the
  GPU-hours it waited within the window: gpus x the overlap.
- ``submitted``: the requests submitted in ``[start, end]``, each weighing the
  GPU-hours it asked for: gpus x duration_s, or, without a duration, gpus x the
  time from its submission to the window's end (what it could have used of it).
- ``queued``: the requests queued at ``end`` (submitted by then, not started by
  then), each weighing 1: the shapes most queued first.

Without a choice, ``waited``, or ``submitted`` where no GPU request waited (a
fleet whose requests start within seconds). Requests are grouped into shapes
with their duration rounded up to its class (:func:`fleetaudit.model.shapes.duration_class`),
and the shapes ranked by their summed weight, heaviest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import polars as pl

from fleetaudit.core.errors import UsageError
from fleetaudit.core.options import DEMAND_DEFAULT_SHAPES, DEMAND_PER_MODEL_SHAPES
from fleetaudit.model.shapes import SHAPE_COLUMNS, Shape, duration_class_expr, make_shape

__all__ = [
    "DEFAULT_SHAPES", "DEMAND_MODES", "PER_MODEL_SHAPES", "DemandShape", "WindowDemand",
    "window_demand",
]  # fmt: skip

DEMAND_MODES = ("waited", "submitted", "queued")
WEIGHTS = {
    "waited": "GPU-hours waited in the window",
    "submitted": "GPU-hours requested",
    "queued": "requests queued at the window's end",
}
"""What a shape's weight counts, per mode."""
DEFAULT_SHAPES = DEMAND_DEFAULT_SHAPES  # the budget's default (report --shapes)
PER_MODEL_SHAPES = DEMAND_PER_MODEL_SHAPES


@dataclass(frozen=True)
class DemandShape:
    """One shape of the demand: how many requests it stands for, and their weight."""

    shape: Shape
    requests: int  # requests of the demand with this shape
    queued: int  # of them, queued at the window's end
    weight: float  # see WEIGHTS[mode]


@dataclass(frozen=True)
class WindowDemand:
    """The demand of a window, its shapes heaviest first."""

    mode: str  # the mode used
    asked: str | None  # the mode asked for (None: the default)
    shapes: tuple[DemandShape, ...]
    requests: int  # GPU requests of the demand
    no_gpu: int  # requests of the demand that ask for no GPU (not shapes)

    @property
    def weight(self) -> float:
        return float(sum(s.weight for s in self.shapes))

    def left_out_share(self, chosen: Sequence[DemandShape]) -> float | None:
        """The share of the demand's weight carried by the shapes not ``chosen``."""
        total = self.weight
        left = [s for s in self.shapes if s not in chosen]
        if total <= 0:
            return None if left else 0.0
        return float(sum(s.weight for s in left)) / total

    def chosen(self, budget: int | None, models: Sequence[str]) -> tuple[DemandShape, ...]:
        """The shapes a report evaluates, heaviest first: the ``budget`` heaviest; by
        default (None) the :data:`DEFAULT_SHAPES` heaviest and, for every GPU model of
        ``models``, its :data:`PER_MODEL_SHAPES` heaviest (the shapes that may run on
        it), so that no model's demand goes unevaluated behind the others'.

        >>> from fleetaudit.model.shapes import make_shape
        >>> d = WindowDemand("queued", None, tuple(
        ...     DemandShape(make_shape(m, g), 1, 1, w) for m, g, w in
        ...     [("H20", 8, 9.0), ("H20", 4, 8.0), ("H20|A10", 2, 7.0), ("A10", 1, 1.0)]), 4, 0)
        >>> [s.shape.label() for s in d.chosen(1, ["A10", "H20"])]
        ['H20 8 GPU node']
        >>> [s.weight for s in d.chosen(None, ["A10", "H20"])]
        [9.0, 8.0, 7.0, 1.0]
        """
        if budget is not None:
            if budget < 0:
                raise UsageError("--shapes: give 0 or more shapes")
            return self.shapes[:budget]
        keep = set(range(min(DEFAULT_SHAPES, len(self.shapes))))
        for model in models:
            on_model = [
                i for i, s in enumerate(self.shapes)
                if s.shape.models is None or model in s.shape.models
            ]  # fmt: skip
            keep.update(on_model[:PER_MODEL_SHAPES])
        return tuple(self.shapes[i] for i in sorted(keep))


def _seconds(expr: pl.Expr) -> pl.Expr:
    return expr.dt.total_microseconds().cast(pl.Float64) / 1e6


def _weighted(requests: pl.DataFrame, start: datetime, end: datetime, mode: str) -> pl.DataFrame:
    """The requests of ``mode``'s demand with a ``weight`` and a ``queued_at_end`` flag."""
    us = pl.Datetime("us", "UTC")
    lo, hi = pl.lit(start).cast(us), pl.lit(end).cast(us)
    submit = pl.col("submit_time").cast(us)
    started = pl.col("start_time").cast(us)
    queued_at_end = (submit <= hi) & (started.is_null() | (started > hi))
    frame = requests.with_columns(queued_at_end.alias("queued_at_end"))
    if mode == "queued":
        return frame.filter("queued_at_end").with_columns(pl.lit(1.0).alias("weight"))
    gpus = pl.col("gpus").cast(pl.Float64)
    if mode == "waited":
        first = pl.max_horizontal(submit, lo)
        last = pl.min_horizontal(started.fill_null(hi), hi)
        waited = _seconds(last - first).clip(lower_bound=0)
        return (
            frame.with_columns((gpus * waited / 3600).alias("weight"), waited.alias("_waited"))
            .filter((pl.col("_waited") > 0) | pl.col("queued_at_end"))
            .drop("_waited")
        )
    asked = pl.col("duration_s").cast(pl.Float64)
    until_end = _seconds(hi - submit)
    return frame.filter((submit >= lo) & (submit <= hi)).with_columns(
        (gpus * pl.when(asked > 0).then(asked).otherwise(until_end) / 3600).alias("weight")
    )


def _shapes(frame: pl.DataFrame, mode: str) -> tuple[DemandShape, ...]:
    groups = (
        frame.with_columns(duration_class_expr("duration_s"))
        .group_by(SHAPE_COLUMNS, maintain_order=True)
        .agg(
            pl.len().alias("requests"),
            pl.col("queued_at_end").sum().alias("queued"),
            pl.col("weight").sum().alias("weight"),
        )
    )
    rank = ["requests", "gpus", "gpu_model"]
    if mode != "queued":
        rank.insert(0, "weight")
    groups = groups.sort(rank, descending=[True] * (len(rank) - 1) + [False], nulls_last=True)
    return tuple(
        DemandShape(
            shape=make_shape(
                r["gpu_model"], r["gpus"], r["gpus_per_pod"], r["cpus_per_gpu"],
                r["memory_gib_per_gpu"], r["locality"], r["duration_s"],
            ),
            requests=int(r["requests"]),
            queued=int(r["queued"]),
            weight=float(r["weight"]),
        )
        for r in groups.iter_rows(named=True)
    )  # fmt: skip


def window_demand(
    requests: pl.DataFrame, start: datetime, end: datetime, mode: str | None = None
) -> WindowDemand:
    """The demand of ``[start, end]`` read as ``mode`` (None: waited, else submitted).

    Args:
        requests: at least the requests that were queued at some instant of the
            window or submitted in it, with at least the requests table's
            submit_time, start_time and shape columns (SPEC defaults applied).
    """
    if mode is not None and mode not in DEMAND_MODES:
        raise UsageError(f"--demand: unknown value {mode!r} (expected {', '.join(DEMAND_MODES)})")
    used = mode or "waited"
    frame = _weighted(requests, start, end, used)
    gpu = pl.col("gpus") > 0
    if mode is None and frame.filter(gpu).height == 0:
        used = "submitted"
        frame = _weighted(requests, start, end, used)
    with_gpus = frame.filter(gpu)
    return WindowDemand(
        mode=used,
        asked=mode,
        shapes=_shapes(with_gpus, used),
        requests=with_gpus.height,
        no_gpu=frame.height - with_gpus.height,
    )
