"""The three denominators of SPEC §7 over a window: physical, schedulable, productive.

Pure functions over polars frames (the store's columns); nothing here reads the
store or prints. :mod:`fleetaudit.api.report_api` loads the frames and calls them.

Physical (exact, not sampled): per node, the integral over ``[start, end)`` of
its occupied GPUs (SPEC §2, FFD of shares on every constant segment, capped at
the node's GPUs), and of its high-priority allocations' occupancy alone; only
healthy nodes count as allocated. Installed GPU-hours are GPUs x window hours;
healthy GPU-hours the same over healthy nodes, less the integral of the GPUs that
health intervals put out of service and no work holds (a node's recorded health,
where no interval dates it, holds over the whole window:
:func:`fleetaudit.model.capacity.whole_window_health`).

Schedulable (sampled): the instants are those of ``shapes --history`` (``end -
j x step`` while not before ``start``, ascending, both ends when the span is a
multiple of the step). At every instant each queued whole-GPU shape is
evaluated exactly as :func:`fleetaudit.model.shapes.evaluate` would (a differential
test holds them equal), vectorised over instants and nodes. The GPU ledger of
model M at an instant adds up exactly::

    installed = unhealthy + allocated_high + allocated_low + idle
    idle      = usable + interval + fragment + cpu_memory + topology + unqueued

Several shapes can draw on the same idle GPUs, so the idle GPUs of M are split
by one shape per instant: the *best* shape for M there, the queued whole-GPU
shape eligible for M with the most usable GPUs on M (ties: the most queued,
then the first listed). Its usable GPUs and stranded causes on M are M's; each
idle GPU is counted once. ``unqueued`` holds the idle GPUs of a model that no
queued whole-GPU shape may use. Share shapes (gpus < 1) fill partly used GPUs,
which are not idle, so they do not split idle; they have their start
probability and waits like every shape. GPU-hours of a sampled figure are its
mean over the instants times the window's hours.

Productive: see :func:`productive`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from fleetaudit.core.times import epoch_us
from fleetaudit.model.capacity import (
    BLOCK_DOMAIN,
    SHARE_UNITS,
    Health,
    Pod,
    free_array,
    gang_instances,
    micro_units,
    node_index,
    slots_array,
    usable_expr,
)
from fleetaudit.model.history import (  # waits and percentiles; the sweep's sparse-table maximum
    history_of,
    range_max,
)
from fleetaudit.model.occupancy import occupancy_timeline
from fleetaudit.model.shapes import CAUSES, Shape

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

__all__ = [
    "SPLIT",
    "FreeAt",
    "Schedulable",
    "ShapeOutlook",
    "physical",
    "productive",
    "schedulable",
    "window_instants",
]

SPLIT = (*CAUSES, "unqueued")
"""The stranded causes of the report's idle split (SPEC §3's four, plus unqueued)."""
LEDGER = ("installed", "unhealthy", "allocated_high", "allocated_low", "idle", "usable", *SPLIT)
_ONE_US = timedelta(microseconds=1)
_CHUNK_CELLS = 4_000_000
"""(node, instant) cells of one chunk of the schedulable sweep: its working arrays
(a few dozen bytes per cell) stay within a few hundred MiB whatever the window."""


def window_instants(end: datetime, span: timedelta, step: timedelta) -> list[datetime]:
    """The sampled instants: ``end - j x step`` while not before ``end - span``, ascending.

    >>> [t.hour for t in window_instants(datetime(2026, 1, 1, 12), timedelta(hours=3),
    ...                                  timedelta(hours=1))]
    [9, 10, 11, 12]
    """
    count = span // step + 1
    return [end - step * j for j in range(count - 1, -1, -1)]


# ---------------------------------------------------------------------------- physical


def _integral(
    timeline: pl.DataFrame,
    caps: pl.DataFrame,
    lo: int,
    hi: int,
    name: str,
    unhealthy: str | None = None,
) -> pl.DataFrame:
    """Per node: the integral over [lo, hi) µs of its occupied GPUs, capped at its GPUs
    (a node without a GPU count is not capped); with ``unhealthy`` (a column name), in
    the same pass, that of its GPUs out of service that no work holds: its GPUs occupied
    or out of service (gpus_held) capped, less its occupied GPUs capped.

    On the timeline's arrays (rows by node rank, then time, each node's a contiguous
    run): each segment runs to the node's next one or to ``hi``; whole GPU-microseconds,
    summed per run in int64.
    """
    columns = [name] if unhealthy is None else [name, unhealthy]
    schema: dict[str, PolarsDataType] = {"node_id": pl.String, **dict.fromkeys(columns, pl.Int64)}
    if timeline.height == 0:
        return pl.DataFrame(schema=schema)
    ids = timeline["node_id"]
    rank = ids.to_physical().cast(pl.Int64).to_numpy()
    start = timeline["time"].dt.epoch("us").to_numpy()
    same = rank[1:] == rank[:-1]
    end = np.full(len(start), hi, dtype=np.int64)  # a node's last segment runs to the end
    end[:-1][same] = start[1:][same]
    length = np.clip(np.minimum(end, hi) - np.maximum(start, lo), 0, None)
    enum = ids.dtype  # occupancy_timeline's node_id: an Enum over the sorted node ids
    if not isinstance(enum, pl.Enum):
        raise TypeError(f"a timeline's node_id is an Enum, not {enum}")
    names = pl.Series("node_id", enum.categories, dtype=pl.String)
    cap = (
        pl.DataFrame({"node_id": names})
        .join(caps, on="node_id", how="left", maintain_order="left")["gpus"]
        .cast(pl.Float64)
        .to_numpy()[rank]
    )
    used = timeline["gpus_used"].to_numpy()
    capped = np.where(np.isnan(cap), used, np.minimum(used, cap)).astype(np.int64)
    runs = np.flatnonzero(np.r_[True, ~same])
    values = {name: np.add.reduceat(capped * length, runs)}
    if unhealthy is not None:
        held = timeline["gpus_held"].to_numpy()
        out = np.where(np.isnan(cap), held, np.minimum(held, cap)).astype(np.int64) - capped
        values[unhealthy] = np.add.reduceat(out * length, runs)
    return pl.DataFrame({"node_id": names.gather(rank[runs]), **values}, schema=schema)


def physical(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    start: datetime,
    end: datetime,
    timelines: tuple[pl.DataFrame, pl.DataFrame] | None = None,
    health: Health | None = None,
) -> pl.DataFrame:
    """Exact GPU-hours per GPU model over ``[start, end)``.

    ``timelines`` (:func:`window_timelines`, covering the window) spares the sweeps;
    without them, they are swept here, with ``health``.

    Returns:
        gpu_model, installed_gpu_hours, healthy_gpu_hours,
        allocated_high_gpu_hours, allocated_gpu_hours (Float64), sorted by model.
        Allocated figures count healthy nodes only, capped at the node's GPUs
        on every segment (an over-committed node is full, not more). A node whose
        ``health`` is not healthy (over all the time) is unhealthy throughout; on
        the others, health intervals (a timeline with gpus_held,
        :func:`window_timelines` with ``health``) take out of the healthy GPU-hours
        the integral of their GPUs out of service that no work holds, while work on
        them counts as allocated.

    >>> nodes = pl.DataFrame({"node_id": ["n1"], "gpu_model": ["H20"], "gpus": [8],
    ...     "health": ["healthy"]})
    >>> t0 = datetime(2026, 1, 1)
    >>> allocations = pl.DataFrame({"alloc_id": ["a"], "node_id": ["n1"], "gpus": [2.0],
    ...     "cpus": [1.0], "memory_gib": [None], "priority": ["low"],
    ...     "start_time": [t0 - timedelta(hours=1)], "end_time": [t0 + timedelta(hours=1)]},
    ...     schema_overrides={"memory_gib": pl.Float64})
    >>> physical(nodes, allocations, t0, t0 + timedelta(hours=2)).row(0)
    ('H20', 16.0, 16.0, 0.0, 2.0)
    """
    hours = (end - start) / timedelta(hours=1)
    lo, hi = epoch_us(start), epoch_us(end)
    caps = nodes.select(pl.col("node_id").cast(pl.String), pl.col("gpus").cast(pl.Int64))

    held = False
    if hi == lo:
        zero = caps.select("node_id", pl.lit(0.0).alias("all_us"))
        every, high = zero, zero.rename({"all_us": "high_us"})
    else:
        if timelines is None:
            timelines = window_timelines(nodes, allocations, start, end, end, health)
        # the sweeps end at or after the window's end; _integral clips them there
        held = "gpus_held" in timelines[0].columns
        every = _integral(timelines[0], caps, lo, hi, "all_us", "out_us" if held else None)
        high = _integral(timelines[1], caps, lo, hi, "high_us")
    per_node = (
        nodes.select(
            pl.col("node_id").cast(pl.String), "gpu_model", pl.col("gpus").cast(pl.Int64), "health"
        )
        .join(every, on="node_id", how="left")
        .join(high, on="node_id", how="left")
        .with_columns(pl.col("all_us", "high_us").fill_null(0))
    )
    healthy = usable_expr(per_node)
    healthy_hours = pl.col("gpus").filter(healthy).sum() * hours
    if held:
        healthy_hours = healthy_hours - pl.col("out_us").fill_null(0).filter(healthy).sum() / 3.6e9
    return (
        per_node.group_by("gpu_model")
        .agg(
            (pl.col("gpus").sum() * hours).cast(pl.Float64).alias("installed_gpu_hours"),
            healthy_hours.cast(pl.Float64).alias("healthy_gpu_hours"),
            (pl.min_horizontal("high_us", "all_us").filter(healthy).sum() / 3.6e9)
            .cast(pl.Float64)
            .alias("allocated_high_gpu_hours"),
            (pl.col("all_us").filter(healthy).sum() / 3.6e9)
            .cast(pl.Float64)
            .alias("allocated_gpu_hours"),
        )
        .sort("gpu_model")
    )


def tenant_hours(
    allocations: pl.DataFrame, nodes: pl.DataFrame, start: datetime, end: datetime
) -> pl.DataFrame:
    """Allocated GPU-hours per tenant over ``[start, end)`` (healthy nodes).

    Shares count their fraction (gpus x overlap): FFD packs tenants' shares onto
    the same GPUs, so a packed GPU has no single tenant.

    Returns:
        tenant (null: unknown), allocated_high_gpu_hours, allocated_gpu_hours, by tenant.
    """
    return (
        _overlap(allocations, start, end)
        .join(nodes.select(pl.col("node_id").cast(pl.String), "health"), on="node_id")
        .filter(usable_expr())
        .group_by("tenant")
        .agg(
            (pl.col("alloc_gpu_s").filter(pl.col("priority") == "high").sum() / 3600).alias(
                "allocated_high_gpu_hours"
            ),
            (pl.col("alloc_gpu_s").sum() / 3600).alias("allocated_gpu_hours"),
        )
        .sort("tenant", nulls_last=True)
    )


def _overlap(allocations: pl.DataFrame, start: datetime, end: datetime) -> pl.DataFrame:
    """Allocations with overlap_s (seconds within the window) and alloc_gpu_s = gpus x overlap."""
    lo = pl.lit(start, dtype=pl.Datetime("us"))
    hi = pl.lit(end, dtype=pl.Datetime("us"))
    first = pl.max_horizontal(pl.col("start_time").cast(pl.Datetime("us")), lo)
    last = pl.min_horizontal(pl.col("end_time").cast(pl.Datetime("us")).fill_null(hi), hi)
    seconds = ((last - first).dt.total_microseconds() / 1e6).clip(lower_bound=0)
    return allocations.with_columns(
        pl.col("node_id").cast(pl.String),
        seconds.alias("overlap_s"),
        (seconds * pl.col("gpus").fill_null(0)).alias("alloc_gpu_s"),
    )


# ------------------------------------------------------------------------ schedulable


@dataclass(frozen=True)
class ShapeOutlook:
    """One queued shape over the window's instants (SPEC §3 history semantics)."""

    shape: Shape
    queued: int
    instants: int
    p_start: float
    wait_p50_s: float | None
    wait_p90_s: float | None
    best_instants: int  # (instant, model) pairs where it split the idle GPUs
    usable_gpu_hours: float  # its usable GPUs where it was the best shape
    requests: int | None = None  # requests of the window's demand it stands for
    demand_weight: float | None = None  # their weight (fleetaudit.model.demand.WEIGHTS)
    instances_mean: float | None = None  # its instances, mean over the instants (whole-GPU shapes)

    def as_json(self) -> dict[str, Any]:
        return {
            "shape": self.shape.as_json(),
            "queued": self.queued,
            "requests": self.requests,
            "demand_weight": self.demand_weight,
            "p_start": self.p_start,
            "wait_p50_s": self.wait_p50_s,
            "wait_p90_s": self.wait_p90_s,
            "splits_idle": not self.shape.is_share,
            "best_instants": self.best_instants,
        }


@dataclass(frozen=True)
class Schedulable:
    """The sampled ledger per instant and model, and the outlook of each shape.

    Attributes:
        steps: instant, gpu_model, the :data:`LEDGER` columns (GPUs, Float64)
            and best (the index of the shape that split the idle GPUs, null:
            none), sorted by instant then model.
        shapes: one outlook per shape, in the order given.
    """

    instants: tuple[datetime, ...]
    steps: pl.DataFrame
    shapes: tuple[ShapeOutlook, ...]
    # the free capacity of every node at the instants the caller asked to keep, by index
    kept: dict[int, FreeAt] = field(default_factory=dict)


@dataclass(frozen=True)
class FreeAt:
    """Free capacity of every node at one instant of the sweep, in node_id order.

    ``now``: free GPUs at the instant (0 on an unhealthy node). ``window``: per shape
    duration (``Shape.duration_s``, None: the instant alone), the free capacity over
    ``[t, t + duration)`` of the dimensions the shapes of that duration need: gpus (0
    on an unhealthy node), cpus and memory in micro-units (capacity.UNBOUNDED: not
    declared). The same arrays the ledger counts slots on.
    """

    now: np.ndarray
    window: dict[float | None, dict[str, np.ndarray]]


def _waits(instances: np.ndarray, step_us: int) -> tuple[float, float | None, float | None]:
    """p_start and nearest-rank wait p50/p90: history's own (censored sorts last)."""
    outlook = history_of(np.zeros(len(instances), dtype=np.int64), step_us, instances, None)
    return outlook.p_start, outlook.wait_p50_s, outlook.wait_p90_s


@dataclass(frozen=True)
class _Layout:
    """Nodes in (model, domain, node_id) order: each model, and each of its switch
    domains, is a contiguous run of rows, so per-model and per-domain sums are reduceat
    runs over (nodes, instants) arrays, and a model's rows are a view, not a copy."""

    models: list[str]
    model_start: np.ndarray  # first row of each model, and the row count at the end
    perm: np.ndarray  # row -> node rank (position in node_id order, the timeline's)
    domain_run: np.ndarray  # row -> index of its (model, domain) run
    block: np.ndarray  # row -> index of its (model, block domain): not contiguous runs
    gpus: np.ndarray
    cpus_u: np.ndarray
    mem_u: np.ndarray  # capacity.UNBOUNDED: unknown memory
    healthy: np.ndarray  # capacity.usable


def _layout(nodes: pl.DataFrame) -> _Layout:
    # the capacity model's node index: rank is the position in node_id order
    ordered = node_index(nodes).rename({"node": "rank"}).sort("gpu_model", "domain", "node_id")
    models = ordered["gpu_model"].unique(maintain_order=True).to_list()
    model_codes = ordered["gpu_model"].rle_id().to_numpy()
    starts = np.flatnonzero(np.r_[True, np.diff(model_codes) != 0])
    return _Layout(
        models=models,
        model_start=np.r_[starts, ordered.height].astype(np.int64),
        perm=ordered["rank"].cast(pl.Int64).to_numpy(),
        domain_run=ordered.select(pl.struct("gpu_model", "domain").rle_id()).to_series().to_numpy(),
        block=ordered.select(pl.struct("gpu_model", BLOCK_DOMAIN).rank("dense"))
        .to_series()
        .cast(pl.Int64)
        .to_numpy(),
        gpus=ordered["gpus"].to_numpy(),
        cpus_u=ordered["cpus_u"].to_numpy(),
        mem_u=ordered["memory_u"].to_numpy(),
        healthy=ordered["usable"].to_numpy(),
    )


def _per_model(values: np.ndarray, layout: _Layout) -> np.ndarray:
    """Sums of (nodes, instants) values per model: (instants, models)."""
    return np.add.reduceat(values, layout.model_start[:-1], axis=0).T.astype(np.float64)


def _model_block(
    shape: Shape,
    layout: _Layout,
    rows: slice,
    free_now: np.ndarray,
    free_w: dict[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """A whole-GPU shape on one model's rows at every instant: instances, usable, causes.

    The capacity model's slot count (:func:`fleetaudit.model.capacity.slots_array`)
    and :func:`fleetaudit.model.shapes.group_slots` on (nodes, instants) arrays.
    Unhealthy rows have no free GPU, so they add nothing, as ineligible nodes do.
    """
    p = round(shape.gpus_per_pod)
    k = shape.pods
    fg = free_w["gpus"][rows]
    # free_w holds only the dimensions some shape needs (slots_array reads no other)
    cpus, memory = (free_w[c][rows] if c in free_w else None for c in ("cpus", "memory"))
    counted = slots_array(Pod.of(shape), fg, cpus, memory)
    gpu_slots, slots = counted["gpu_slots"], counted["slots"]
    out = {
        "interval": (free_now[rows] - fg).sum(axis=0),
        "fragment": (fg - gpu_slots * p).sum(axis=0),
        "cpu_memory": ((gpu_slots - slots) * p).sum(axis=0),
    }
    if shape.locality == "node":
        group_slots = slots
    else:
        if shape.locality == "switch":
            runs = layout.domain_run[rows]
            starts = np.flatnonzero(np.r_[True, np.diff(runs) != 0])
            group_slots = np.add.reduceat(slots, starts, axis=0)
        elif shape.locality == "block":  # a block's rows need not be one run: sort them
            codes = layout.block[rows]
            order = np.argsort(codes, kind="stable")
            starts = np.flatnonzero(np.r_[True, np.diff(codes[order]) != 0])
            group_slots = np.add.reduceat(slots[order], starts, axis=0)
        else:  # any: the model's rows are one group
            group_slots = slots.sum(axis=0, keepdims=True)
    instances, left = gang_instances(group_slots, k)
    out["topology"] = (left * p).sum(axis=0)
    count = instances.sum(axis=0)
    out["instances"] = count
    out["usable"] = count * shape.gpus
    return out


def _shape_ledger(
    shape: Shape,
    layout: _Layout,
    free_now: np.ndarray,
    free_w: dict[str, np.ndarray],
    out: dict[str, np.ndarray],
    at: slice,
) -> None:
    """The shape at the instants of ``free_now``'s columns, written into rows ``at`` of
    ``out``: instances (n,), and usable and causes per model (n, M), zeros to start."""
    for m, model in enumerate(layout.models):
        if shape.models is not None and model not in shape.models:
            continue
        rows = slice(int(layout.model_start[m]), int(layout.model_start[m + 1]))
        block = _model_block(shape, layout, rows, free_now, free_w)
        out["instances"][at] += block["instances"].astype(np.int64)
        for name in ("usable", *CAUSES):
            out[name][at, m] = block[name]


def _split(
    base: dict[str, np.ndarray],
    per_shape: dict[int, dict[str, np.ndarray]],
    shapes: list[tuple[Shape, int]],
    instants: list[datetime],
    models: list[str],
) -> pl.DataFrame:
    """Each model's idle GPUs split by its best shape at every instant."""
    n, width = base["idle"].shape
    out = {name: np.zeros((n, width)) for name in ("usable", *SPLIT)}
    best = np.full((n, width), -1, dtype=np.int64)
    order = sorted(per_shape)  # the shapes' order: most queued first
    for m, model in enumerate(models):
        candidates = [
            i for i in order if shapes[i][0].models is None or model in (shapes[i][0].models or ())
        ]
        if not candidates:
            out["unqueued"][:, m] = base["idle"][:, m]
            continue
        usable = np.stack([per_shape[i]["usable"][:, m] for i in candidates], axis=1)
        pick = np.argmax(usable, axis=1)  # the first of equal maxima: the most queued
        rows = np.arange(n)
        best[:, m] = np.asarray(candidates)[pick]
        for name in ("usable", *CAUSES):
            stacked = np.stack([per_shape[i][name][:, m] for i in candidates], axis=1)
            out[name][:, m] = stacked[rows, pick]
    frames = []
    for m, model in enumerate(models):
        frames.append(
            pl.DataFrame(
                {
                    "instant": pl.Series(instants, dtype=pl.Datetime("us")),
                    "gpu_model": [model] * n,
                    **{name: base[name][:, m].astype(np.float64) for name in LEDGER[:5]},
                    **{name: out[name][:, m] for name in ("usable", *SPLIT)},
                    "best": pl.Series(best[:, m]).replace(-1, None),
                }
            )
        )
    return pl.concat(frames).sort("instant", "gpu_model")


class _SlidingMax:
    """Window maxima along the columns for growing widths, by doubling.

    ``level[:, i]`` holds the maximum of ``span`` columns from i; asked for
    widths in ascending order, each doubling is done once for all of them.
    """

    def __init__(self, values: np.ndarray) -> None:
        self.level, self.span = values, 1

    def of(self, width: int, n: int) -> np.ndarray:
        """out[:, i] = max(values[:, i : i + width]) for i < n (values has n + width - 1 columns)."""
        if width < self.span:
            raise ValueError("widths must be asked for in ascending order")
        while self.span * 2 <= width:
            self.level = np.maximum(self.level[:, : -self.span], self.level[:, self.span :])
            self.span *= 2
        shift = width - self.span
        return np.maximum(self.level[:, :n], self.level[:, shift : shift + n])


def _segment_rows(keys: np.ndarray, stride: int, nodes: int, points: np.ndarray) -> np.ndarray:
    """``np.searchsorted(keys, rank * stride + points, side="right") - 1`` for every node
    rank (rows) and point (columns), without a search per cell.

    ``keys`` are ascending ``rank * stride + offset`` with ``0 <= offset < stride``;
    ``points`` ascending offsets. Each key's row applies from the first point at or
    after its offset on, so a running maximum along each node's points gives the last
    key at or before every point; a node's cells before its first key read the row
    just before it, as the search does.

    >>> keys = np.array([0, 5, 10, 12, 17])  # stride 10: node 0 at 0, 5; node 1 at 0, 2, 7
    >>> _segment_rows(keys, 10, 2, np.array([0, 4, 5, 9])).tolist()
    [[0, 0, 1, 1], [2, 3, 3, 4]]
    """
    n = len(points)
    first = np.searchsorted(keys, np.arange(nodes, dtype=np.int64) * stride)
    # rows fit 32 bits on any fleet this runs on: half the memory of the (node, point) cells
    index = np.int32 if len(keys) < 2**31 - 1 else np.int64
    cells = np.repeat((first - 1).astype(index), n).reshape(nodes, n)
    if len(keys) and n:
        rank = keys // stride
        pos = np.searchsorted(points, keys - rank * stride, side="left")
        inside = pos < n
        flat = (rank * n + pos)[inside]
        rows = np.flatnonzero(inside)
        # keys are sorted, so flat is too: the last row of each cell is its largest
        last = np.flatnonzero(np.diff(flat, append=flat[-1] + 1 if len(flat) else 0) != 0)
        cells.ravel()[flat[last]] = rows[last]
        np.maximum.accumulate(cells, axis=1, out=cells)
    return cells


def _sliding_max(values: np.ndarray, width: int, n: int) -> np.ndarray:
    """out[:, i] = max(values[:, i : i + width]) for i < n (values has n + width - 1 columns)."""
    return _SlidingMax(values).of(width, n)


def window_timelines(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    start: datetime,
    end: datetime,
    hi: datetime,
    health: Health | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """occupancy_timeline of all allocations over [start, hi) and of the high ones over
    [start, end + 1 µs): computed once, read by :func:`physical` and :func:`schedulable`.
    With ``health``, the first holds the GPUs out of service too (gpus_held)."""
    return (
        occupancy_timeline(nodes, allocations, start, max(hi, end + _ONE_US), health=health),
        occupancy_timeline(
            nodes, allocations.filter(pl.col("priority") == "high"), start, end + _ONE_US
        ),
    )


def schedulable(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    shapes: list[tuple[Shape, int]],
    instants: list[datetime],
    span: timedelta,
    share_outlook: dict[int, tuple[float, float | None, float | None]] | None = None,
    timelines: tuple[pl.DataFrame, pl.DataFrame] | None = None,
    keep: Sequence[int] = (),
    health: Health | None = None,
) -> Schedulable:
    """The per-instant ledger of every model and the queued shapes' outlook.

    Args:
        nodes: the nodes frame (node_id, gpu_model, gpus, cpus, memory_gib,
            switch_id, health).
        allocations: the allocations frame, covering the instants and the
            longest shape duration after the last one.
        shapes: (shape, queued count), most queued first.
        instants: ascending, equally spaced (:func:`window_instants`), at least one.
        span: the window's length (each instant stands for span / instants).
        share_outlook: (p_start, wait p50, wait p90) of each share shape by its
            index, from :func:`fleetaudit.model.history.evaluate_history` (share
            shapes are not vectorised here; a missing one reads as never startable).
        timelines: :func:`window_timelines` from at most the first instant, if
            the caller has them.
        keep: indices of instants whose free capacity per node the result keeps
            (:attr:`Schedulable.kept`), so that a caller need not compute the node
            state there again.
    """
    nodes = nodes.with_columns(pl.col("node_id").cast(pl.String)).sort("node_id")
    n, count = len(instants), nodes.height
    layout = _layout(nodes)
    whole = [i for i, (s, _) in enumerate(shapes) if not s.is_share]
    longest = max((shapes[i][0].duration_s or 0.0 for i in whole), default=0.0)
    hi = instants[-1] + max(timedelta(seconds=longest), _ONE_US)
    if timelines is None:
        timelines = window_timelines(nodes, allocations, instants[0], instants[-1], hi, health)
    everything, high = timelines
    first: datetime = everything["time"].min() or instants[0]  # type: ignore[assignment]
    t0 = epoch_us(min(instants[0], first))
    offsets = np.asarray([epoch_us(t) - t0 for t in instants], dtype=np.int64)
    last = everything["time"].max() or hi
    stride = max(epoch_us(hi), epoch_us(last)) - t0 + 1  # type: ignore[arg-type]
    # keys: node's layout row x stride + µs since t0, sorted; a timeline's rows are put
    # in that order once, so the rows found for (node, instant) cells come in layout order

    def keys_of(timeline: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """The keys of ``timeline`` (rows sorted by node rank, then time) in layout
        order, and the permutation of its rows into that order."""
        rank = timeline["node_id"].to_physical().cast(pl.Int64).to_numpy()
        offset = timeline["time"].dt.epoch("us").to_numpy() - t0
        lengths = np.bincount(rank, minlength=count)[layout.perm]  # per layout row
        begins = np.r_[0, np.cumsum(np.bincount(rank, minlength=count))[:-1]][layout.perm]
        ends = np.cumsum(lengths)
        order = np.repeat(begins - (ends - lengths), lengths) + np.arange(len(rank))
        return np.repeat(np.arange(count, dtype=np.int64) * stride, lengths) + offset[order], order

    def at(keys: np.ndarray, shift: int = 0, grid: np.ndarray = offsets) -> np.ndarray:
        """Row of the segment holding each (node, instant + shift), in layout order."""
        return _segment_rows(keys, stride, count, grid + shift)

    keys, order = keys_of(everything)

    def units(column: str) -> np.ndarray:
        return everything.select(micro_units(column)).to_series().to_numpy()[order]

    used_gpus = everything["gpus_used"].to_numpy()[order].astype(np.int32)
    # GPUs out of service (health intervals) take no work: free capacity reads the GPUs
    # occupied or out of service, the allocated figures the occupied ones
    held_gpus = (
        everything["gpus_held"].to_numpy()[order].astype(np.int32)
        if "gpus_held" in everything.columns
        else None
    )
    high_keys, high_order = keys_of(high)
    high_used = high["gpus_used"].to_numpy()[high_order].astype(np.int32)
    del high_order
    gpus = layout.gpus[:, None].astype(np.int32)
    healthy = layout.healthy[:, None]
    outlooks: dict[int, tuple[float, float | None, float | None]] = dict(share_outlook or {})
    by_duration: dict[float | None, list[int]] = {}
    for i in whole:
        by_duration.setdefault(shapes[i][0].duration_s, []).append(i)
    occupied = {"gpus": used_gpus if held_gpus is None else held_gpus}

    def needed(members: list[int]) -> list[str]:
        columns = ["gpus"]
        if any(shapes[i][0].cpus_per_gpu > 0 for i in members):
            columns.append("cpus")
        if any(shapes[i][0].memory_gib_per_gpu > 0 for i in members):
            columns.append("memory")
        for column in columns:
            if column not in occupied:
                occupied[column] = units(f"{column}_used")
        return columns

    # A duration that is a multiple of the step: the window [t_i, t_i + D) is the
    # union of w = D / step step intervals, so its peak is a sliding maximum over
    # the step intervals' peaks (one range maximum for all such durations).
    # The instants go in chunks of about _CHUNK_CELLS (node, instant) cells, so the
    # peak memory does not grow with the number of instants: only the per-model
    # ledger and each shape's figures per instant are kept whole. A sliding maximum
    # spans its chunk plus the duration's steps, so only durations of at most a
    # chunk's steps take it; longer ones take the range maximum over the segments.
    chunk = max(1, _CHUNK_CELLS // max(count, 1))
    step_us = int(offsets[1] - offsets[0]) if n > 1 else 0
    stepped = {
        d: round(d * SHARE_UNITS) // step_us
        for d in by_duration
        if d
        and step_us
        and round(d * SHARE_UNITS) % step_us == 0
        and round(d * SHARE_UNITS) // step_us <= chunk
    }

    def window_peaks(
        columns: list[str], first: np.ndarray, last: np.ndarray
    ) -> dict[str, np.ndarray]:
        """Per column, the largest occupancy of segment rows first..last (same shapes)."""
        moving = np.flatnonzero((first != last).ravel())  # most runs are one segment
        out = {}
        if len(moving):
            values = np.stack([occupied[c] for c in columns], axis=1).astype(np.int64)
            found = range_max(values, first.ravel()[moving], last.ravel()[moving])
            del values
        for j, column in enumerate(columns):
            peak = occupied[column][first]
            if len(moving):
                peak.ravel()[moving] = found[:, j]
            out[column] = peak
        return out

    stepped_columns = needed([i for d in stepped for i in by_duration[d]]) if stepped else []
    for duration in by_duration:
        needed(by_duration[duration])  # the occupancy columns, converted once
    capacity = {"gpus": layout.gpus, "cpus": layout.cpus_u, "memory": layout.mem_u}
    durations = sorted(by_duration, key=lambda d: (d is not None, d or 0.0))

    models = len(layout.models)
    base = {name: np.zeros((n, models)) for name in LEDGER[:5]}
    per_shape = {
        i: {"instances": np.zeros(n, dtype=np.int64)}
        | {name: np.zeros((n, models)) for name in ("usable", *CAUSES)}
        for i in whole
    }
    nows: dict[int, np.ndarray] = {}
    windows: dict[int, dict[float | None, dict[str, np.ndarray]]] = {}
    for first_instant in range(0, n, chunk):
        grid_c = offsets[first_instant : first_instant + chunk]
        width = len(grid_c)
        rows_c = slice(first_instant, first_instant + width)
        interval_peaks: dict[str, _SlidingMax] = {}
        if stepped:
            grid = grid_c[0] + step_us * np.arange(
                width - 1 + max(stepped.values()), dtype=np.int64
            )
            starts = at(keys, 0, grid)
            # the instants are the grid's first points: their rows are found already
            same = np.array_equal(grid[:width], grid_c)
            now = np.ascontiguousarray(starts[:, :width]) if same else at(keys, 0, grid_c)
            peaks_of = window_peaks(stepped_columns, starts, at(keys, step_us - 1, grid))
            del starts
            interval_peaks = {c: _SlidingMax(v) for c, v in peaks_of.items()}
            del peaks_of
        else:
            now = at(keys, 0, grid_c)
        used_now = np.minimum(used_gpus[now], gpus)
        high_now = np.minimum(high_used[at(high_keys, 0, grid_c)], used_now)
        held_now = used_now if held_gpus is None else np.minimum(held_gpus[now], gpus)
        free_now = np.where(healthy, gpus - held_now, 0)
        keeping = {i: i - first_instant for i in keep if first_instant <= i < first_instant + width}
        for i, j in keeping.items():
            windows[i] = {}
            nows[i] = free_now[:, j].copy()
        # installed and unhealthy GPUs do not change over the instants: one column each
        base["installed"][rows_c] = _per_model(gpus, layout)
        base["unhealthy"][rows_c] = _per_model(
            np.where(healthy, 0, gpus) if held_gpus is None
            else np.where(healthy, held_now - used_now, gpus),
            layout,
        )  # fmt: skip
        for name, values in (
            ("allocated_high", np.where(healthy, high_now, 0)),
            ("allocated_low", np.where(healthy, used_now - high_now, 0)),
            ("idle", free_now),
        ):
            base[name][rows_c] = _per_model(values, layout)
        del high_now, used_now, held_now
        for duration in durations:  # ascending durations: each doubling is done once
            members = by_duration[duration]
            columns = needed(members)
            if duration in stepped:
                peaks = {c: interval_peaks[c].of(stepped[duration], width) for c in columns}
            elif duration:
                peaks = window_peaks(
                    columns, now, at(keys, round(duration * SHARE_UNITS) - 1, grid_c)
                )
            else:
                peaks = {c: occupied[c][now] for c in columns}
            free_w: dict[str, np.ndarray] = {}
            for column, peak in peaks.items():
                cap = capacity[column][:, None]
                if column == "gpus":
                    free = np.where(healthy, np.maximum(cap - peak, 0), 0).astype(np.int32)
                else:  # an undeclared dimension stays unbounded (capacity.UNBOUNDED)
                    free = free_array(cap, peak)
                free_w[column] = free
            del peaks
            for i, j in keeping.items():
                windows[i][duration] = {c: v[:, j].copy() for c, v in free_w.items()}
            for i in members:
                _shape_ledger(shapes[i][0], layout, free_now, free_w, per_shape[i], rows_c)
            del free_w
        del interval_peaks, now, free_now
    for i in whole:
        outlooks[i] = _waits(per_shape[i]["instances"], step_us)
    steps = _split(base, per_shape, shapes, instants, layout.models)
    hours = span / timedelta(hours=1) / n
    outs = []
    for i, (shape, queued) in enumerate(shapes):
        p_start, p50, p90 = outlooks.get(i, (0.0, None, None))
        best = steps.filter(pl.col("best") == i)
        outs.append(
            ShapeOutlook(
                shape=shape,
                queued=queued,
                instants=n,
                p_start=p_start,
                wait_p50_s=p50,
                wait_p90_s=p90,
                best_instants=best.height,
                usable_gpu_hours=float(best["usable"].sum()) * hours,
                instances_mean=float(per_shape[i]["instances"].mean()) if i in per_shape else None,
            )
        )
    kept = {
        i: FreeAt(
            now=_by_rank(nows[i], layout),
            window={
                d: {c: _by_rank(v, layout) for c, v in columns.items()}
                for d, columns in windows[i].items()
            },
        )
        for i in nows
    }
    return Schedulable(instants=tuple(instants), steps=steps, shapes=tuple(outs), kept=kept)


def _by_rank(values: np.ndarray, layout: _Layout) -> np.ndarray:
    """Per-node values in layout order, put in node_id order."""
    out = np.empty_like(values)
    out[layout.perm] = values
    return out


def sampled_hours(steps: pl.DataFrame, span: timedelta, by: list[str]) -> pl.DataFrame:
    """GPU-hours of the sampled ledger: each column's mean over the instants x the span's hours."""
    hours = span / timedelta(hours=1)
    instants = max(steps["instant"].n_unique(), 1)
    columns = list(LEDGER)
    summed = (
        steps.group_by(by).agg(pl.col(columns).sum()) if by else steps.select(pl.col(columns).sum())
    )
    return summed.with_columns((pl.col(columns) * hours / instants).name.suffix("_gpu_hours")).drop(
        columns
    )


# ------------------------------------------------------------------------- productive

PRODUCTIVE_METRIC = "sm_active"
"""The telemetry column the productive figures read (telemetry.sm_active, 0..1)."""

UPPER_BOUND_METRICS = {
    "DCGM_FI_DEV_GPU_UTIL": "the share of time any kernel ran, whatever the SMs did",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "the share of time the graphics engine was busy",
}
"""Series an ingest may have read sm_active from that are at least the SM activity."""


def metric_sources(counts: pl.DataFrame) -> list[dict[str, Any]]:
    """Provenance of the window's sm_active samples, one entry per source series.

    ``counts``: metric (None: given as sm_active), samples. Each entry: metric,
    samples, share of the samples, and upper_bound (the series overstates SM
    activity, so a productive rate computed from it is an upper bound).

    >>> metric_sources(pl.DataFrame({"metric": ["DCGM_FI_DEV_GPU_UTIL", None], "samples": [1, 3]}))
    ... # doctest: +NORMALIZE_WHITESPACE
    [{'metric': 'DCGM_FI_DEV_GPU_UTIL', 'samples': 1, 'share': 0.25, 'upper_bound': True},
     {'metric': None, 'samples': 3, 'share': 0.75, 'upper_bound': False}]
    """
    total = int(counts["samples"].sum() or 0)
    return [
        {
            "metric": row["metric"],
            "samples": int(row["samples"]),
            "share": row["samples"] / total if total else None,
            "upper_bound": row["metric"] in UPPER_BOUND_METRICS,
        }
        for row in counts.iter_rows(named=True)
    ]


@dataclass(frozen=True)
class Productive:
    """Telemetry attributed to the allocations of the window.

    Attributes:
        interval_s: the seconds each telemetry sample stands for.
        allocations: one row per allocation overlapping the window: alloc_id,
            node_id, gpu_model, workload, tenant, priority, alloc_gpu_s (gpus x
            overlap), telemetry_gpu_s, sm_active_gpu_s, upper_gpu_s (the telemetry
            GPU-seconds read from a series of UPPER_BOUND_METRICS), cpu_neighbour
            (training only: a cpu_only allocation shared its node at some time of
            its run in the window; null for other workloads).
        samples: telemetry samples in the window.
        unattributed_gpu_s: GPU-seconds of samples with no allocation to go to
            (an alloc_id that is not in the window's allocations, or no GPU
            allocation active on the node at that time).
    """

    interval_s: float | None
    allocations: pl.DataFrame
    samples: int
    unattributed_gpu_s: float


def productive(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    start: datetime,
    end: datetime,
    by_alloc: pl.DataFrame,
    by_node: pl.DataFrame,
    interval_s: float | None,
) -> Productive:
    """SM-active GPU-seconds and telemetry GPU-seconds per allocation over ``[start, end)``.

    Each sample stands for ``interval_s`` seconds of one GPU. A sample with an
    alloc_id goes to that allocation, whole (on a shared GPU, the one holder it
    names). A sample without one goes to the GPU
    allocations active on its node at its ts, shared by their gpus (an export
    that samples only allocated GPUs, as ASI's does, makes that exact).

    Args:
        by_alloc: alloc_id, samples, sm_active_sum and optionally upper_samples (samples
            with an alloc_id; upper_samples: those read from UPPER_BOUND_METRICS).
        by_node: node_id, ts, samples, sm_active_sum, optionally upper_samples
            (samples without one).
        interval_s: seconds per sample (None: no telemetry).
    """
    dt = interval_s or 0.0
    by_alloc, by_node = (
        f if "upper_samples" in f.columns else f.with_columns(pl.lit(0).alias("upper_samples"))
        for f in (by_alloc, by_node)
    )
    window = _overlap(allocations, start, end).join(
        nodes.select(pl.col("node_id").cast(pl.String), "gpu_model"), on="node_id", how="left"
    )
    # A sample naming an allocation is that allocation's whole: the telemetry key holds one
    # sample per GPU and instant, so a shared GPU's sample names one of its holders (the
    # first, or the largest, by the exporter) and carries the whole GPU's activity.
    attributed = by_alloc.join(window.select("alloc_id"), on="alloc_id", how="semi")
    unknown = by_alloc.join(window.select("alloc_id"), on="alloc_id", how="anti")
    gpu_allocs = window.filter(pl.col("gpus") > 0).select(
        "alloc_id", "node_id", "gpus", "start_time", "end_time"
    )
    shared = (
        by_node.with_columns(
            pl.col("node_id").cast(pl.String), pl.col("ts").cast(pl.Datetime("us"))
        )
        .with_row_index("sample_row")
        .join(gpu_allocs, on="node_id")
        .filter(
            (pl.col("start_time").cast(pl.Datetime("us")) <= pl.col("ts"))
            & (
                pl.col("end_time").is_null()
                | (pl.col("end_time").cast(pl.Datetime("us")) > pl.col("ts"))
            )
        )
        .with_columns((pl.col("gpus") / pl.col("gpus").sum().over("sample_row")).alias("weight"))
    )
    orphan = float(
        by_node.with_row_index("sample_row")
        .join(shared.select("sample_row").unique(), on="sample_row", how="anti")["samples"]
        .sum()
    )
    node_share = shared.group_by("alloc_id").agg(
        (pl.col("samples") * pl.col("weight")).sum().alias("node_samples"),
        (pl.col("sm_active_sum") * pl.col("weight")).sum().alias("node_sm"),
        (pl.col("upper_samples") * pl.col("weight")).sum().alias("node_upper"),
    )
    per_alloc = (
        window.join(attributed, on="alloc_id", how="left")
        .join(node_share, on="alloc_id", how="left")
        .with_columns(
            ((pl.col("samples").fill_null(0) + pl.col("node_samples").fill_null(0)) * dt).alias(
                "telemetry_gpu_s"
            ),
            ((pl.col("sm_active_sum").fill_null(0) + pl.col("node_sm").fill_null(0)) * dt).alias(
                "sm_active_gpu_s"
            ),
            (
                (pl.col("upper_samples").fill_null(0) + pl.col("node_upper").fill_null(0)) * dt
            ).alias("upper_gpu_s"),
        )
    )
    per_alloc = per_alloc.join(_neighbours(per_alloc, start, end), on="alloc_id", how="left")
    samples = int(by_alloc["samples"].sum() or 0) + int(by_node["samples"].sum() or 0)
    return Productive(
        interval_s=interval_s,
        allocations=per_alloc.select(
            "alloc_id",
            "node_id",
            "gpu_model",
            "workload",
            "tenant",
            "priority",
            "alloc_gpu_s",
            "telemetry_gpu_s",
            "sm_active_gpu_s",
            "upper_gpu_s",
            "cpu_neighbour",
        ).sort("alloc_id"),
        samples=samples,
        unattributed_gpu_s=(float(unknown["samples"].sum() or 0) + orphan) * dt,
    )


def _neighbours(window: pl.DataFrame, start: datetime, end: datetime) -> pl.DataFrame:
    """alloc_id, cpu_neighbour for training allocations: a cpu_only one overlapped it on its node."""
    lo = pl.lit(start, dtype=pl.Datetime("us"))
    hi = pl.lit(end, dtype=pl.Datetime("us"))

    def span(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.select(
            "alloc_id",
            "node_id",
            pl.max_horizontal(pl.col("start_time").cast(pl.Datetime("us")), lo).alias("a"),
            pl.min_horizontal(pl.col("end_time").cast(pl.Datetime("us")).fill_null(hi), hi).alias(
                "b"
            ),
        )

    training = span(window.filter(pl.col("workload") == "training"))
    cpu = span(window.filter(pl.col("workload") == "cpu_only")).rename(
        {"alloc_id": "cpu_id", "a": "ca", "b": "cb"}
    )
    touching = (
        training.join(cpu, on="node_id")
        .filter((pl.col("ca") < pl.col("b")) & (pl.col("cb") > pl.col("a")))
        .select("alloc_id")
        .unique()
    )
    return training.select(
        "alloc_id", pl.col("alloc_id").is_in(touching["alloc_id"].implode()).alias("cpu_neighbour")
    )


def _figures(
    allocated_s: float, telemetry_s: float, active_s: float, upper_s: float = 0.0
) -> dict[str, Any]:
    allocated, telemetry, active = allocated_s / 3600, telemetry_s / 3600, active_s / 3600
    return {
        "allocated_gpu_hours": allocated,
        "telemetry_gpu_hours": telemetry,
        "sm_active_gpu_hours": active,
        "productive_rate": active / telemetry if telemetry > 0 else None,
        "coverage": coverage(telemetry, allocated),
        "upper_bound": upper_s > 0,
        "upper_bound_share": upper_s / telemetry_s if telemetry_s > 0 else None,
    }


def coverage(telemetry_gpu_hours: float, allocated_gpu_hours: float) -> float | None:
    """Telemetry GPU-hours over allocated GPU-hours, not capped: above 1, the telemetry
    holds GPU-hours that no allocation had (see :data:`OVER_COVERAGE`).

    >>> coverage(2.93, 1.13) > 1, coverage(1.0, 0.0)
    (True, None)
    """
    return telemetry_gpu_hours / allocated_gpu_hours if allocated_gpu_hours > 0 else None


OVER_COVERAGE = 1.05
"""Coverage above this says the telemetry holds GPU-hours no allocation had (a GPU
loaded twice, an idle GPU's samples shared among its node's allocations): the report
notes it. Up to it, the samples at an allocation's two ends (each counts a whole
interval) explain the excess."""


_SUMMED = ("alloc_gpu_s", "telemetry_gpu_s", "sm_active_gpu_s", "upper_gpu_s")
_MICRO = 1e6  # productive_by sums whole micro-GPU-seconds


def productive_by(rows: pl.DataFrame, key: str | None) -> dict[Any, dict[str, Any]]:
    """The productive object of SPEC §7 per value of ``key`` (None: one, under None).

    productive_rate = SM-active GPU-hours / telemetry GPU-hours: the SM-active
    share of the allocated GPU-hours that had telemetry; coverage = telemetry
    GPU-hours / allocated GPU-hours says how much of the allocated time that is (not
    capped: above 1 the telemetry holds more than the allocations had).
    upper_bound: some of that telemetry read SM activity from a series of
    UPPER_BOUND_METRICS (upper_bound_share of its GPU-hours), so the rate is an upper
    bound. Rows are :attr:`Productive.allocations`; null keys are left out.
    """
    frame = rows if key is not None else rows.with_columns(pl.lit(None).alias("_all"))
    group = key if key is not None else "_all"
    if key is not None:
        frame = frame.filter(pl.col(key).is_not_null())
    # summed as whole micro-GPU-seconds: integer sums do not depend on the order a
    # parallel group-by adds the rows in, so a figure's last printed digit cannot flip
    frame = frame.with_columns(
        (pl.col(c).cast(pl.Float64) * _MICRO).round().cast(pl.Int64) for c in _SUMMED
    )
    sums = (
        frame.group_by(group, "workload")
        .agg(pl.col(_SUMMED).sum())
        .sort(group, "workload", nulls_last=True)
        .with_columns(pl.col(_SUMMED).cast(pl.Float64) / _MICRO)
    )
    out: dict[Any, dict[str, Any]] = {}
    for value, part in sums.group_by(group, maintain_order=True):
        detail = {
            w: _figures(a, t, s, u)
            for w, a, t, s, u in part.select("workload", *_SUMMED).iter_rows()
            if w is not None
        }
        totals = part.select(pl.col(_SUMMED).sum())
        out[value[0]] = {
            "metric": PRODUCTIVE_METRIC,
            **_figures(*(float(v or 0) for v in totals.row(0))),
            "by_workload": {w: f["productive_rate"] for w, f in detail.items()},
            "workloads": detail,
        }
    return out


def productive_figures(rows: pl.DataFrame) -> dict[str, Any]:
    """:func:`productive_by` over all ``rows`` at once."""
    found = productive_by(rows, None)
    return found.get(None) or {
        "metric": PRODUCTIVE_METRIC, **_figures(0.0, 0.0, 0.0), "by_workload": {}, "workloads": {},
    }  # fmt: skip


def neighbour_indicator(rows: pl.DataFrame) -> dict[str, Any]:
    """Training SM-active rate with and without CPU-only neighbours, and the relative drop."""

    def rate(frame: pl.DataFrame) -> tuple[float | None, float]:
        telemetry = float(frame["telemetry_gpu_s"].sum() or 0)
        active = float(frame["sm_active_gpu_s"].sum() or 0)
        return (active / telemetry if telemetry > 0 else None), telemetry / 3600

    training = rows.filter(pl.col("workload") == "training")
    with_rate, with_hours = rate(training.filter(pl.col("cpu_neighbour")))
    without_rate, without_hours = rate(training.filter(~pl.col("cpu_neighbour")))
    drop = (
        1 - with_rate / without_rate
        if with_rate is not None and without_rate is not None and without_rate > 0
        else None
    )
    return {
        "with_cpu_neighbour": with_rate,
        "without_cpu_neighbour": without_rate,
        "with_telemetry_gpu_hours": with_hours,
        "without_telemetry_gpu_hours": without_hours,
        "drop": drop,
    }
