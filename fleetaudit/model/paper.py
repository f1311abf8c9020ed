"""``fleetaudit paper``: the ASI paper's figures, computed as its released scripts compute them.

Input is the per-server-hour record of the window (one row per server in
``server_hourly`` per hour, with its pods' sums; :func:`server_hour_record`'s
columns), built from the ``asi_pod_hourly`` and ``asi_server_hourly`` tables
that ``ingest --format alibaba-gpu-v2026`` keeps. Every figure follows the
paper's ``build_aggregates.py`` (docs/paper.md):

- a server-hour's ``residual`` is the HP standby GPU-hours LP work did not
  backfill: ``max(hp_standby - lp_alloc, 0)``; ``Other`` priority counts nowhere;
- allocation: even hours and hour 23; per server ``(hp_active + residual) / gpus``
  (HP) and ``(min(hp_lp_active, gpus) + residual) / gpus`` (HP+LP); the mean over
  servers per (hour, model), then over hours;
- idle fragmentation: even hours, no 16-GPU servers; the three classes per shape;
- ASW slots: hour 10; servers with an HP pod row, an ASW, a model in
  ``ASW_MODELS`` and not 16 GPUs; a slot is one GPU with 12 vCPU;
- standby: every hour; GPU-hours, and the paper's unweighted, uncapped mean of
  LP / standby per server beside fleetaudit's weighted, capped harvested share.

Pure: frames in, dataclasses out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

REFERENCE_SHAPES: tuple[tuple[int, int], ...] = (
    (1, 8), (1, 12), (4, 32), (4, 48), (4, 64), (8, 64), (8, 96), (8, 128),
)  # fmt: skip
"""The paper's eight reference shapes: (GPUs, vCPUs) of one pod."""
GANGS = (128, 256)
ASW_MODELS = ("A100", "H20", "L20", "XPU-A")
HETEROGENEOUS = "heterogenous"  # the scripts' spelling: the four models pooled
CPU_PER_SLOT = 12.0
SLOT_HOURS = (10,)
JOB_TYPES = ("training", "online_inference", "offline_inference", "dev")

RECORD_COLUMNS = (
    "t", "server_id", "cluster_id", "asw_id", "gpu_model", "gpu_count", "cpu_capacity_cores",
    "hp_active", "hp_standby", "lp_alloc", "hp_lp_active", "requested_cpu_hp",
    "requested_gpu_hp", "hp_pod_rows",
)  # fmt: skip
"""The per-server-hour record (the paper's ``server_period`` frame)."""


def allocation_hours(t: pl.Expr) -> pl.Expr:
    """Even hours and hour 23 of each day."""
    h = t % 24
    return (h % 2 == 0) | (h == 23)


def idle_hours(t: pl.Expr) -> pl.Expr:
    """Even hours of each day."""
    return t % 24 % 2 == 0


def _with_residual(record: pl.DataFrame) -> pl.DataFrame:
    return record.with_columns(
        (pl.col("hp_standby") - pl.col("lp_alloc")).clip(lower_bound=0).alias("residual")
    )


def allocation(record: pl.DataFrame, hours: pl.Expr | None = None) -> pl.DataFrame:
    """HP and HP+LP allocation per model: gpu_model, hp, hp_lp (fractions), samples.

    ``hours`` selects the sampled hours (default: even hours and hour 23).
    """
    return allocation_from_means(allocation_means(record, hours))


def allocation_means(record: pl.DataFrame, hours: pl.Expr | None = None) -> pl.DataFrame:
    """The per-hour part of :func:`allocation`: t, gpu_model, hp, hp_lp (means over servers)."""
    rows = _with_residual(record).filter(
        (pl.col("gpu_count") > 0) & (allocation_hours(pl.col("t")) if hours is None else hours)
    )
    per_server = rows.select(
        "t",
        "gpu_model",
        ((pl.col("hp_active") + pl.col("residual")) / pl.col("gpu_count")).round(6).alias("hp"),
        (
            (pl.min_horizontal("hp_lp_active", "gpu_count") + pl.col("residual"))
            / pl.col("gpu_count")
        )
        .round(6)
        .alias("hp_lp"),
    )
    return per_server.group_by("t", "gpu_model").agg(pl.col("hp").mean(), pl.col("hp_lp").mean())


def allocation_from_means(means: pl.DataFrame) -> pl.DataFrame:
    """:func:`allocation` from the :func:`allocation_means` of all its hours."""
    return (
        means.group_by("gpu_model")
        .agg(pl.col("hp").mean(), pl.col("hp_lp").mean(), pl.len().alias("samples"))
        .sort("hp", "gpu_model", descending=[True, False])
    )


def idle_classes(
    record: pl.DataFrame,
    shapes: Sequence[tuple[int, int]] = REFERENCE_SHAPES,
    hours: pl.Expr | None = None,
) -> pl.DataFrame:
    """Idle-GPU classes per shape: gpus, cpus, fractional, stranded, insufficient_cpu, total_idle.

    Each is the sum over servers per sampled hour (default: even hours), then the
    mean over those hours. 16-GPU servers are left out, as the scripts do.
    """
    return idle_from_sums(idle_sums(record, shapes, hours), shapes)


_IDLE_CLASSES = ("fractional", "stranded", "insufficient_cpu", "total_idle")
_IDLE_SUMS_SCHEMA = {
    "gpus": pl.Int64, "cpus": pl.Int64, "t": pl.Int64,
    **dict.fromkeys(_IDLE_CLASSES, pl.Float64),
}  # fmt: skip


def idle_sums(
    record: pl.DataFrame,
    shapes: Sequence[tuple[int, int]] = REFERENCE_SHAPES,
    hours: pl.Expr | None = None,
) -> pl.DataFrame:
    """The per-hour part of :func:`idle_classes`: gpus, cpus, t and each class's sum."""
    rows = _with_residual(record).filter(
        (pl.col("gpu_count") > 0)
        & (pl.col("gpu_count") != 16)
        & (idle_hours(pl.col("t")) if hours is None else hours)
    )
    idle = (pl.col("gpu_count") - (pl.col("hp_active") + pl.col("residual"))).clip(lower_bound=0)
    cpus = (pl.col("cpu_capacity_cores") - pl.col("requested_cpu_hp")).clip(lower_bound=0)
    rows = rows.select("t", idle.alias("idle"), cpus.alias("idle_cpus")).with_columns(
        pl.col("idle").floor().alias("f")
    )
    out = [pl.DataFrame(schema=_IDLE_SUMS_SCHEMA)]
    for g, c in shapes:
        fits_cpu = pl.col("idle_cpus") >= c
        frac = pl.col("idle") - pl.col("f")
        classes = rows.select(
            "t",
            pl.when(fits_cpu & (pl.col("idle") >= g) & (frac > 0) & (pl.col("f") >= g))
            .then(frac)
            .otherwise(0.0)
            .alias("fractional"),
            pl.when(fits_cpu & (pl.col("f") > 0) & (pl.col("f") < g))
            .then(pl.col("f"))
            .otherwise(0.0)
            .alias("stranded"),
            pl.when(~fits_cpu & (pl.col("idle") >= g))
            .then(pl.lit(float(g)))
            .when(~fits_cpu & (pl.col("idle") > 0))
            .then(pl.col("idle"))
            .otherwise(0.0)
            .alias("insufficient_cpu"),
            pl.col("idle").alias("total_idle"),
        )
        sums = classes.group_by("t").agg(pl.all().sum())
        out.append(
            sums.select(pl.lit(g).alias("gpus"), pl.lit(c).alias("cpus"), pl.all()).cast(
                _IDLE_SUMS_SCHEMA  # type: ignore[arg-type]
            )
        )
    return pl.concat(out, how="vertical")


def idle_from_sums(
    sums: pl.DataFrame, shapes: Sequence[tuple[int, int]] = REFERENCE_SHAPES
) -> pl.DataFrame:
    """:func:`idle_classes` from the :func:`idle_sums` of all its hours."""
    n_hours = sums["t"].n_unique()
    out = []
    for g, c in shapes:
        mine = sums.filter((pl.col("gpus") == g) & (pl.col("cpus") == c))
        mean = {k: (float(mine[k].sum()) / n_hours if n_hours else 0.0) for k in _IDLE_CLASSES}
        out.append({"gpus": g, "cpus": c, **mean, "hours": n_hours})
    return pl.DataFrame(
        out,
        schema={
            "gpus": pl.Int64, "cpus": pl.Int64, "fractional": pl.Float64,
            "stranded": pl.Float64, "insufficient_cpu": pl.Float64,
            "total_idle": pl.Float64, "hours": pl.Int64,
        },
    )  # fmt: skip


def asw_slots(
    record: pl.DataFrame,
    gangs: Sequence[int] = GANGS,
    hours: pl.Expr | None = None,
) -> pl.DataFrame:
    """Gangs of S one-GPU, 12-vCPU slots: gpu_model, gang, slots, across_cluster, within_asw.

    Per snapshot (default: hour 10 of each day): ``across_cluster`` is the sum
    over clusters of floor(slots in the cluster / S), ``within_asw`` the same
    over ASWs; then the mean over the snapshots. ``slots`` is the mean total.
    """
    return slots_from_sums(slot_sums(record, gangs, hours), gangs)


def slot_sums(
    record: pl.DataFrame,
    gangs: Sequence[int] = GANGS,
    hours: pl.Expr | None = None,
) -> tuple[pl.DataFrame, frozenset[int]]:
    """The per-snapshot part of :func:`asw_slots`: (gpu_model, gang, slots, across_cluster,
    within_asw summed over the record's snapshots; those snapshots' hours ``t``)."""
    rows = record.filter(
        (pl.col("hp_pod_rows") > 0)
        & pl.col("asw_id").is_not_null()
        & pl.col("gpu_model").is_in(list(ASW_MODELS))
        & (pl.col("gpu_count") != 16)
        & ((pl.col("t") % 24).is_in(list(SLOT_HOURS)) if hours is None else hours)
    )
    gpu_free = (pl.col("gpu_count") - pl.col("requested_gpu_hp").floor()).clip(lower_bound=0)
    cpu_free = ((pl.col("cpu_capacity_cores") - pl.col("requested_cpu_hp")) / CPU_PER_SLOT).floor()
    rows = rows.with_columns(
        pl.min_horizontal(gpu_free, cpu_free.clip(lower_bound=0)).alias("slots")
    )
    both = pl.concat(
        [rows, rows.with_columns(pl.lit(HETEROGENEOUS).alias("gpu_model"))], how="vertical"
    )
    snapshots = frozenset(record.filter(
        (pl.col("t") % 24).is_in(list(SLOT_HOURS)) if hours is None else hours
    )["t"].to_list())  # fmt: skip
    out = []
    for model in (*ASW_MODELS, HETEROGENEOUS):
        mine = both.filter(pl.col("gpu_model") == model)
        by_cluster = mine.group_by("t", "cluster_id").agg(pl.col("slots").sum())
        by_asw = mine.group_by("t", "asw_id").agg(pl.col("slots").sum())
        total = float(mine["slots"].sum())
        for size in gangs:
            out.append(
                {
                    "gpu_model": model,
                    "gang": size,
                    "slots": total,
                    "across_cluster": float((by_cluster["slots"] // size).sum()),
                    "within_asw": float((by_asw["slots"] // size).sum()),
                }
            )
    return pl.DataFrame(out, schema=_SLOT_SUMS_SCHEMA), snapshots


_SLOT_SUMS_SCHEMA = {
    "gpu_model": pl.String, "gang": pl.Int64, "slots": pl.Float64,
    "across_cluster": pl.Float64, "within_asw": pl.Float64,
}  # fmt: skip


def slots_from_sums(
    parts: tuple[pl.DataFrame, frozenset[int]], gangs: Sequence[int] = GANGS
) -> pl.DataFrame:
    """:func:`asw_slots` from the :func:`slot_sums` of all its snapshots (summed frames,
    the union of the hours)."""
    sums, snapshots = parts
    n = len(snapshots)
    out = []
    for model in (*ASW_MODELS, HETEROGENEOUS):
        for size in gangs:
            mine = sums.filter((pl.col("gpu_model") == model) & (pl.col("gang") == size))
            out.append(
                {
                    "gpu_model": model,
                    "gang": size,
                    **{
                        k: float(mine[k].sum()) / n if n else 0.0
                        for k in ("slots", "across_cluster", "within_asw")
                    },
                    "snapshots": n,
                }
            )
    return pl.DataFrame(
        out,
        schema={
            "gpu_model": pl.String, "gang": pl.Int64, "slots": pl.Float64,
            "across_cluster": pl.Float64, "within_asw": pl.Float64, "snapshots": pl.Int64,
        },
    )  # fmt: skip


def standby(record: pl.DataFrame) -> dict[str, Any]:
    """Standby GPU-hours over every hour, and how much of them LP work took.

    ``gpu_hours``: the HP standby GPU-hours; ``harvested_gpu_hours``: the sum over
    server-hours of min(LP, standby), so ``harvested_share`` is weighted and at
    most 1 (fleetaudit's figure); ``paper_ratio``: the scripts' per-hour mean over
    servers with standby of LP / standby (unweighted, uncapped), averaged over
    the hours that have standby.
    """
    return standby_from_hours(standby_hours(record))


def standby_hours(record: pl.DataFrame) -> pl.DataFrame:
    """The per-hour part of :func:`standby`, over the hours with standby: t, gpu_hours,
    harvested_gpu_hours (sums over servers), r (mean over servers of LP / standby)."""
    return (
        record.filter(pl.col("hp_standby") > 0)
        .group_by("t")
        .agg(
            pl.col("hp_standby").sum().cast(pl.Float64).alias("gpu_hours"),
            pl.min_horizontal("lp_alloc", "hp_standby")
            .sum()
            .cast(pl.Float64)
            .alias("harvested_gpu_hours"),
            (pl.col("lp_alloc") / pl.col("hp_standby")).mean().cast(pl.Float64).alias("r"),
        )
    )


def standby_from_hours(per_hour: pl.DataFrame) -> dict[str, Any]:
    """:func:`standby` from the :func:`standby_hours` of all its hours."""
    gpu_hours = float(per_hour["gpu_hours"].sum()) if per_hour.height else 0.0
    harvested = float(per_hour["harvested_gpu_hours"].sum()) if per_hour.height else 0.0
    return {
        "gpu_hours": gpu_hours,
        "harvested_gpu_hours": harvested,
        "harvested_share": harvested / gpu_hours if gpu_hours else None,
        "paper_ratio": float(per_hour["r"].mean()) if per_hour.height else None,  # type: ignore
        "hours_with_standby": per_hour.height,
    }


def ratio_summary(histogram: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """Median and p90 of ceil(cpu / ceil(gpu)) per job type from (job_type, ratio, n).

    >>> h = pl.DataFrame({"job_type": ["dev"] * 3, "ratio": [4.0, 12.0, 16.0], "n": [1, 2, 1]})
    >>> ratio_summary(h)["dev"]
    {'median': 12.0, 'p90': 16.0, 'pod_hours': 4}
    """
    out: dict[str, dict[str, Any]] = {}
    for job in JOB_TYPES:
        rows = histogram.filter(pl.col("job_type") == job).sort("ratio")
        total = int(rows["n"].sum()) if rows.height else 0
        if not total:
            out[job] = {"median": None, "p90": None, "pod_hours": 0}
            continue
        cumulative = rows["n"].cum_sum().to_list()
        ratios = rows["ratio"].to_list()

        def quantile(q: float, cumulative: list[int] = cumulative, ratios: list[float] = ratios,
                     total: int = total) -> float:  # fmt: skip
            rank = max(1, math.ceil(q * total))
            for c, r in zip(cumulative, ratios, strict=True):
                if c >= rank:
                    return float(r)
            return float(ratios[-1])

        out[job] = {"median": quantile(0.5), "p90": quantile(0.9), "pod_hours": total}
    return out


@dataclass(frozen=True)
class PaperFigures:
    """The paper's figures over one window of trace hours."""

    t_first: int
    t_last: int
    allocation: pl.DataFrame
    idle: pl.DataFrame
    slots: pl.DataFrame
    standby: dict[str, Any]
    cpu_gpu_ratio: dict[str, dict[str, Any]]


def paper_figures(
    record: pl.DataFrame, ratio_histogram: pl.DataFrame, t_first: int, t_last: int
) -> PaperFigures:
    """Every figure of the paper view from the window's record (and the ratio histogram)."""
    return paper_figures_by_parts([record], ratio_histogram, t_first, t_last)


def paper_figures_by_parts(
    records: Iterable[pl.DataFrame], ratio_histogram: pl.DataFrame, t_first: int, t_last: int
) -> PaperFigures:
    """:func:`paper_figures` from the window's record in parts that share no hour (e.g. one
    per day), taken one at a time: only each part's per-hour sums are kept, so memory
    holds one part, not the window."""
    means, idle, slots, standby_parts = [], [], [], []
    snapshots: set[int] = set()
    for record in records:
        means.append(allocation_means(record))
        idle.append(idle_sums(record))
        sums, hours = slot_sums(record)
        slots.append(sums)
        snapshots |= hours
        standby_parts.append(standby_hours(record))
        del record
    return PaperFigures(
        t_first=t_first,
        t_last=t_last,
        allocation=allocation_from_means(pl.concat(means, how="vertical_relaxed")),
        idle=idle_from_sums(pl.concat(idle, how="vertical")),
        slots=slots_from_sums((pl.concat(slots, how="vertical"), frozenset(snapshots))),
        standby=standby_from_hours(pl.concat(standby_parts, how="vertical_relaxed")),
        cpu_gpu_ratio=ratio_summary(ratio_histogram),
    )


DIFFERENCES = {
    "allocation": (
        "paper: unweighted mean over servers of sampled hours, from used GPU-hours, standby "
        "counted only where LP did not backfill it, Other ignored; fleetaudit: exact requested "
        "GPU-hours over healthy GPU-hours of the whole window, capped per node"
    ),
    "idle": (
        "paper: LP counts as idle, a partly used GPU's remainder is idle ('fractional'), one pod's "
        "CPU test, all models pooled, 16-GPU servers left out; fleetaudit: LP occupies, shares are "
        "packed, fragment = what is left after whole pods, cpu_memory = pods that fit by GPUs only"
    ),
    "asw_slots": (
        "paper: LP evicted, Standby kept, floor of the HP request, only servers with an HP pod, "
        "no 16-GPU or ASW-less server, 'across' bounded by cluster; fleetaudit: the recorded "
        "state (LP occupies), any model's node, 'any' spans the fleet, a node without ASW is "
        "its own domain"
    ),
    "standby": (
        "paper: per hour, the unweighted mean over servers of LP / standby, uncapped (an upper "
        "bound: LP on GPUs that were free anyway counts); fleetaudit: sum of min(LP, standby) "
        "over all server-hours / standby GPU-hours"
    ),
}
"""One line per figure: where the paper's method and fleetaudit's differ."""
