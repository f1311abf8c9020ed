"""The three denominators of SPEC §7 over a window: physical, schedulable, productive.

Pure functions over polars frames (the store's columns); nothing here reads the
store or prints. :mod:`fleetaudit.report_api` loads the frames and calls them.

Physical (exact, not sampled): per node, the integral over ``[start, end)`` of
its occupied GPUs (SPEC §2, FFD of shares on every constant segment, capped at
the node's GPUs), and of its high-priority allocations' occupancy alone; only
healthy nodes count as allocated. Installed GPU-hours are GPUs x window hours;
healthy GPU-hours the same over healthy nodes (health is the node's current
value: the nodes table holds no health history).

Schedulable (sampled): the instants are those of ``shapes --history`` (``end -
j x step`` while not before ``start``, ascending, both ends when the span is a
multiple of the step). At every instant each queued whole-GPU shape is
evaluated exactly as :func:`fleetaudit.shapes.evaluate` would (a differential
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

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import polars as pl

from fleetaudit.history import _range_max as range_max  # the sweep's sparse-table maximum
from fleetaudit.history import nearest_rank
from fleetaudit.occupancy import SHARE_UNITS, occupancy_timeline
from fleetaudit.shapes import CAUSES, Shape

__all__ = [
    "SPLIT",
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
_EPOCH = datetime(1970, 1, 1)
_ONE_US = timedelta(microseconds=1)
_BIG = 1 << 40  # "unbounded" slots, as shapes.node_slots
_QUANTILES = ((50, 100), (90, 100))


def _us(at: datetime) -> int:
    return (at - _EPOCH) // _ONE_US


def window_instants(end: datetime, span: timedelta, step: timedelta) -> list[datetime]:
    """The sampled instants: ``end - j x step`` while not before ``end - span``, ascending.

    >>> [t.hour for t in window_instants(datetime(2026, 1, 1, 12), timedelta(hours=3),
    ...                                  timedelta(hours=1))]
    [9, 10, 11, 12]
    """
    count = span // step + 1
    return [end - step * j for j in range(count - 1, -1, -1)]


# ---------------------------------------------------------------------------- physical


def _segments(
    nodes: pl.DataFrame, allocations: pl.DataFrame, start: datetime, end: datetime
) -> pl.DataFrame:
    """occupancy_timeline with each segment's end (µs) and the node's GPUs."""
    timeline = occupancy_timeline(nodes, allocations, start, end)
    hi = _us(end)
    return timeline.with_columns(
        pl.col("node_id").cast(pl.String),
        pl.col("time").dt.epoch("us").alias("t0"),
        pl.col("time").dt.epoch("us").shift(-1).over("node_id").fill_null(hi).alias("t1"),
    )


def physical(
    nodes: pl.DataFrame, allocations: pl.DataFrame, start: datetime, end: datetime
) -> pl.DataFrame:
    """Exact GPU-hours per GPU model over ``[start, end)``.

    Returns:
        gpu_model, installed_gpu_hours, healthy_gpu_hours,
        allocated_high_gpu_hours, allocated_gpu_hours (Float64), sorted by model.
        Allocated figures count healthy nodes only, capped at the node's GPUs
        on every segment (an over-committed node is full, not more).

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
    lo, hi = _us(start), _us(end)
    caps = nodes.select(pl.col("node_id").cast(pl.String), pl.col("gpus").cast(pl.Int64))

    def integral(rows: pl.DataFrame, name: str) -> pl.DataFrame:
        if hi == lo:
            return caps.select("node_id", pl.lit(0.0).alias(name))
        seg = _segments(nodes, rows, start, end).join(caps, on="node_id")
        length = pl.min_horizontal("t1", pl.lit(hi)) - pl.max_horizontal("t0", pl.lit(lo))
        return seg.group_by("node_id").agg(
            (pl.min_horizontal("gpus_used", "gpus") * length.clip(lower_bound=0)).sum().alias(name)
        )

    high = allocations.filter(pl.col("priority") == "high")
    per_node = (
        nodes.select(
            pl.col("node_id").cast(pl.String), "gpu_model", pl.col("gpus").cast(pl.Int64), "health"
        )
        .join(integral(allocations, "all_us"), on="node_id", how="left")
        .join(integral(high, "high_us"), on="node_id", how="left")
        .with_columns(pl.col("all_us", "high_us").fill_null(0))
    )
    healthy = pl.col("health") == "healthy"
    return (
        per_node.group_by("gpu_model")
        .agg(
            (pl.col("gpus").sum() * hours).cast(pl.Float64).alias("installed_gpu_hours"),
            (pl.col("gpus").filter(healthy).sum() * hours)
            .cast(pl.Float64)
            .alias("healthy_gpu_hours"),
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
        .filter(pl.col("health") == "healthy")
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

    def as_json(self) -> dict[str, Any]:
        return {
            "shape": self.shape.as_json(),
            "queued": self.queued,
            "p_start": self.p_start,
            "wait_p50_s": self.wait_p50_s,
            "wait_p90_s": self.wait_p90_s,
            "splits_idle": not self.shape.is_share,
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


def _waits(instances: np.ndarray, step_s: float) -> tuple[float, float | None, float | None]:
    """p_start and nearest-rank wait p50/p90 (history's definition; censored sorts last)."""
    n = len(instances)
    if n == 0:
        return 0.0, None, None
    position = np.arange(n)
    starts_at = np.where(instances >= 1, position, n)
    next_start = np.minimum.accumulate(starts_at[::-1])[::-1]
    waits: list[float | None] = [
        None if s == n else float((s - i) * step_s) for i, s in enumerate(next_start.tolist())
    ]
    return (
        int(np.sum(instances >= 1)) / n,
        nearest_rank(waits, *_QUANTILES[0]),
        nearest_rank(waits, *_QUANTILES[1]),
    )


def _onehot(labels: np.ndarray, width: int) -> np.ndarray:
    out = np.zeros((len(labels), width), dtype=np.float64)
    out[np.arange(len(labels)), labels] = 1.0
    return out


def _per_model(values: np.ndarray, onehot: np.ndarray) -> np.ndarray:
    """Sums of (instants, nodes) values per model: (instants, models); exact for counts."""
    return values.astype(np.float64) @ onehot


def _eligible_mask(shape: Shape, models: list[str], model_of: np.ndarray) -> np.ndarray:
    if shape.models is None:
        return np.ones(len(model_of), dtype=bool)
    allowed = [models.index(m) for m in shape.models if m in models]
    return np.isin(model_of, allowed)


def _shape_ledger(
    shape: Shape,
    models: list[str],
    model_of: np.ndarray,
    domain: pl.Series,
    node_ids: pl.Series,
    healthy: np.ndarray,
    free_now: np.ndarray,
    free_w: np.ndarray,
) -> dict[str, np.ndarray]:
    """A whole-GPU shape at every instant: instances, and per model usable and causes.

    The arithmetic of :func:`fleetaudit.shapes.node_slots` and
    :func:`fleetaudit.shapes.group_slots`, on (instants, nodes) arrays.
    """
    n = free_now.shape[0]
    width = len(models)
    eligible = np.flatnonzero(healthy & _eligible_mask(shape, models, model_of))
    zeros = np.zeros((n, width))
    if len(eligible) == 0:
        return {"instances": np.zeros(n, dtype=np.int64), "usable": zeros} | dict.fromkeys(
            CAUSES, zeros
        )
    p = round(shape.gpus_per_pod)
    k = shape.pods
    fg = free_w[:, eligible, 0]
    gpu_slots = fg // p

    def bound(free: np.ndarray, need: float, unbounded: np.ndarray | None = None) -> np.ndarray:
        need_u = round(need * SHARE_UNITS)
        if need_u <= 0:
            return np.full(free.shape, _BIG, dtype=np.int64)
        slots = free // need_u
        return slots if unbounded is None else np.where(unbounded, _BIG, slots)

    cpu_slots = bound(free_w[:, eligible, 1], p * shape.cpus_per_gpu)
    mem = free_w[:, eligible, 2]
    mem_slots = bound(np.maximum(mem, 0), p * shape.memory_gib_per_gpu, mem < 0)
    slots = np.minimum(gpu_slots, np.minimum(cpu_slots, mem_slots))
    node_models = _onehot(model_of[eligible], width)
    causes = {
        "interval": _per_model(free_now[:, eligible] - fg, node_models),
        "fragment": _per_model(fg - gpu_slots * p, node_models),
        "cpu_memory": _per_model((gpu_slots - slots) * p, node_models),
    }
    key = pl.DataFrame(
        {
            "model": model_of[eligible],
            "domain": domain.gather(eligible),
            "node_id": node_ids.gather(eligible),
        }
    )
    columns = {"switch": ["model", "domain"], "any": ["model"], "node": ["node_id"]}[shape.locality]
    group = key.select(pl.struct(columns).rank("dense").cast(pl.Int64) - 1).to_series().to_numpy()
    groups = int(group.max()) + 1
    # slots per group: the nodes in group order, summed over each group's run
    order = np.argsort(group, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(group[order]) != 0])
    group_slots = np.add.reduceat(slots[:, order], starts, axis=1)
    instances = group_slots // k
    group_model = np.zeros(groups, dtype=np.int64)
    group_model[group] = model_of[eligible]
    group_models = _onehot(group_model, width)
    causes["topology"] = _per_model((group_slots - instances * k) * p, group_models)
    return {
        "instances": instances.sum(axis=1),
        "usable": _per_model(instances, group_models) * shape.gpus,
        **causes,
    }


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


def schedulable(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    shapes: list[tuple[Shape, int]],
    instants: list[datetime],
    span: timedelta,
    share_outlook: dict[int, tuple[float, float | None, float | None]] | None = None,
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
            index, from :func:`fleetaudit.history.evaluate_history` (share
            shapes are not vectorised here; a missing one reads as never startable).
    """
    nodes = nodes.with_columns(pl.col("node_id").cast(pl.String)).sort("node_id")
    n, count = len(instants), nodes.height
    step_s = (instants[1] - instants[0]).total_seconds() if n > 1 else 0.0
    models = sorted(set(nodes["gpu_model"].to_list()))
    model_of = np.searchsorted(np.asarray(models, dtype=object), nodes["gpu_model"].to_numpy())
    model_of = model_of.astype(np.int64)
    gpus = nodes["gpus"].cast(pl.Int64).to_numpy()
    cpus_u = (nodes["cpus"].cast(pl.Float64) * SHARE_UNITS).round().cast(pl.Int64).to_numpy()
    mem = (nodes["memory_gib"].cast(pl.Float64) * SHARE_UNITS).round().cast(pl.Int64)
    mem_known = mem.is_not_null().to_numpy()
    mem_u = mem.fill_null(0).to_numpy()
    healthy = (nodes["health"] == "healthy").to_numpy()
    node_ids = nodes["node_id"]
    domain = nodes.select(pl.coalesce(pl.col("switch_id").cast(pl.String), "node_id")).to_series()
    whole = [i for i, (s, _) in enumerate(shapes) if not s.is_share]
    longest = max((shapes[i][0].duration_s or 0.0 for i in whole), default=0.0)
    t0 = _us(instants[0])
    offsets = np.asarray([_us(t) - t0 for t in instants], dtype=np.int64)
    hi = instants[-1] + max(timedelta(seconds=longest), _ONE_US)
    stride = _us(hi) - t0 + 1  # keys: node rank x stride + µs since the first instant
    base_keys = np.arange(count, dtype=np.int64) * stride

    def lookup(rows: pl.DataFrame, end: datetime) -> tuple[np.ndarray, np.ndarray]:
        timeline = occupancy_timeline(nodes, rows, instants[0], end)
        rank = timeline["node_id"].to_physical().cast(pl.Int64).to_numpy()
        time = timeline["time"].dt.epoch("us").to_numpy() - t0
        occupied = np.stack(
            [
                timeline["gpus_used"].to_numpy(),
                (timeline["cpus_used"] * SHARE_UNITS).round().cast(pl.Int64).to_numpy(),
                (timeline["memory_used"] * SHARE_UNITS).round().cast(pl.Int64).to_numpy(),
            ],
            axis=1,
        ).astype(np.int64)
        return rank * stride + time, occupied

    def at(keys: np.ndarray, shift: int = 0) -> np.ndarray:
        """Row of the segment holding each (instant + shift, node): (instants, nodes)."""
        query = base_keys[None, :] + (offsets + shift)[:, None]
        return np.searchsorted(keys, query, side="right") - 1

    keys, occupied = lookup(allocations, hi)
    now = at(keys)
    used_now = np.minimum(occupied[now, 0], gpus[None, :])
    hkeys, hoccupied = lookup(allocations.filter(pl.col("priority") == "high"), hi)
    high_now = np.minimum(hoccupied[at(hkeys), 0], used_now)
    del hkeys, hoccupied
    healthy_row = healthy[None, :]
    free_now = np.where(healthy_row, gpus[None, :] - used_now, 0)
    onehot = _onehot(model_of, len(models))
    base = {
        "installed": _per_model(np.broadcast_to(gpus, (n, count)), onehot),
        "unhealthy": _per_model(np.broadcast_to(np.where(healthy, 0, gpus), (n, count)), onehot),
        "allocated_high": _per_model(np.where(healthy_row, high_now, 0), onehot),
        "allocated_low": _per_model(np.where(healthy_row, used_now - high_now, 0), onehot),
        "idle": _per_model(free_now, onehot),
    }
    per_shape: dict[int, dict[str, np.ndarray]] = {}
    outlooks: dict[int, tuple[float, float | None, float | None]] = dict(share_outlook or {})
    by_duration: dict[float | None, list[int]] = {}
    for i in whole:
        by_duration.setdefault(shapes[i][0].duration_s, []).append(i)
    for duration, members in by_duration.items():
        if duration:
            last = at(keys, round(duration * SHARE_UNITS) - 1)
            peak = range_max(occupied, now.ravel(), last.ravel()).reshape(n, count, 3)
            del last
        else:
            peak = occupied[now]
        free_w = np.stack(
            [
                np.maximum(gpus[None, :] - peak[:, :, 0], 0),
                np.maximum(cpus_u[None, :] - peak[:, :, 1], 0),
                np.where(mem_known[None, :], np.maximum(mem_u[None, :] - peak[:, :, 2], 0), -1),
            ],
            axis=2,
        )
        del peak
        for i in members:
            per_shape[i] = _shape_ledger(
                shapes[i][0], models, model_of, domain, node_ids, healthy, free_now, free_w
            )
            outlooks[i] = _waits(per_shape[i]["instances"], step_s)
        del free_w
    steps = _split(base, per_shape, shapes, instants, models)
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
            )
        )
    return Schedulable(instants=tuple(instants), steps=steps, shapes=tuple(outs))


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


@dataclass(frozen=True)
class Productive:
    """Telemetry attributed to the allocations of the window.

    Attributes:
        interval_s: the seconds each telemetry sample stands for.
        allocations: one row per allocation overlapping the window: alloc_id,
            node_id, gpu_model, workload, tenant, priority, alloc_gpu_s (gpus x
            overlap), telemetry_gpu_s, sm_active_gpu_s, cpu_neighbour (training
            only: a cpu_only allocation shared its node at some time of its run
            in the window; null for other workloads).
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
    alloc_id goes to that allocation. A sample without one goes to the GPU
    allocations active on its node at its ts, shared by their gpus (an export
    that samples only allocated GPUs, as ASI's does, makes that exact).

    Args:
        by_alloc: alloc_id, samples, sm_active_sum (samples with an alloc_id).
        by_node: node_id, ts, samples, sm_active_sum (samples without one).
        interval_s: seconds per sample (None: no telemetry).
    """
    dt = interval_s or 0.0
    window = _overlap(allocations, start, end).join(
        nodes.select(pl.col("node_id").cast(pl.String), "gpu_model"), on="node_id", how="left"
    )
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


def productive_figures(rows: pl.DataFrame) -> dict[str, Any]:
    """The productive object of SPEC §7 for a set of :attr:`Productive.allocations` rows.

    productive_rate = SM-active GPU-hours / telemetry GPU-hours: the SM-active
    share of the allocated GPU-hours that had telemetry; coverage = telemetry
    GPU-hours / allocated GPU-hours says how much of the allocated time that is.
    """

    def figures(frame: pl.DataFrame) -> dict[str, Any]:
        allocated = float(frame["alloc_gpu_s"].sum() or 0) / 3600
        telemetry = float(frame["telemetry_gpu_s"].sum() or 0) / 3600
        active = float(frame["sm_active_gpu_s"].sum() or 0) / 3600
        return {
            "allocated_gpu_hours": allocated,
            "telemetry_gpu_hours": telemetry,
            "sm_active_gpu_hours": active,
            "productive_rate": active / telemetry if telemetry > 0 else None,
            "coverage": min(telemetry / allocated, 1.0) if allocated > 0 else None,
        }

    workloads = sorted({w for w in rows["workload"].to_list() if w is not None})
    detail = {w: figures(rows.filter(pl.col("workload") == w)) for w in workloads}
    fleet = figures(rows)
    return {
        "metric": PRODUCTIVE_METRIC,
        **fleet,
        "by_workload": {w: detail[w]["productive_rate"] for w in workloads},
        "workloads": detail,
    }


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
