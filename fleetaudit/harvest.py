"""Harvesting what-if of SPEC §6: sleeping inference lends GPUs, low-priority work backfills.

A discrete-event replay of the window ``[start, end)``. Pure: it takes the
store's ``nodes`` and ``allocations`` frames (extra columns ignored, neither
mutated), the sleep intervals derived from telemetry
(:func:`sleep_intervals`) and a frozen :class:`HarvestOptions`, and returns a
:class:`HarvestResult`. One run is deterministic in its seed.

Model (README, "Harvesting"):

- Capacity is SPEC §2's occupancy, per node: whole GPUs plus the GPUs that the
  fractional parts fill when packed first-fit-decreasing
  (:func:`fleetaudit.occupancy.first_fit_decreasing`), CPUs and memory plainly.
  A null ``memory_gib`` is unbounded.
- High-priority allocations run exactly as recorded: on their node, from
  start_time to end_time. So do low-priority allocations without GPUs (they do
  not take part in harvesting).
- Low-priority allocations with GPUs become jobs (one per job_id; a null job_id
  is the alloc_id) that arrive at their earliest start_time and need their
  recorded run time (latest end minus earliest start; no end_time: more than
  the window holds). A job's pods are its allocations, on nodes of the GPU
  model they ran on; a job whose pods shared one switch domain keeps them in
  one domain. Jobs already running at ``start`` resume on their recorded nodes.
- Placement is best-fit, the rule of ``whatif placement --policy best-fit``:
  the healthy node left with the fewest free GPUs, ties to the lowest node_id;
  a gang takes the switch domain of its model left with the fewest free GPUs
  that holds it, and best-fit nodes inside it. A job that fits nowhere waits;
  waiting jobs start, in arrival order, as soon as capacity frees.
- A sleeping allocation (an interval of :func:`sleep_intervals`) lends its GPUs,
  CPUs and memory. When it wakes, the low-priority work that no longer fits is
  chosen by the victim policy and evicted after an eviction delay drawn from a
  lognormal with the given mean and p95; the waking allocation takes its
  resources back when the borrowers are out, and no new work lands on the node
  meanwhile. A delay beyond ``kill_after_s`` is cut there: a forced kill.
- A high-priority start that finds its node's capacity held by low-priority
  work preempts victims at once (high priority is never delayed).
- A victim loses the work since its last checkpoint (every
  ``checkpoint_interval_s`` of run time since its current run began; none:
  everything since it began), keeps the rest and waits again in its original
  place in the queue.

Victim policies pick, among the low-priority jobs on the node, one at a time
until the work fits: ``spotgpu`` the least lost work (job GPUs x time since its
last checkpoint), ``newest`` the latest (re)started, ``smallest`` the fewest
GPUs, ``random`` a seeded draw; ties go to the newest, then the job order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import polars as pl

from fleetaudit.errors import UsageError
from fleetaudit.occupancy import SHARE_UNITS

__all__ = [
    "POLICIES",
    "HarvestOptions",
    "HarvestResult",
    "PreparedReplay",
    "check_options",
    "delay_sigma",
    "prepare_replay",
    "replay_harvest",
    "run_replay",
    "sleep_intervals",
    "warm_up",
]

POLICIES = ("spotgpu", "newest", "smallest", "random")
_POLICY_CODES = {p: i for i, p in enumerate(POLICIES)}  # harvest_kernel's SPOTGPU .. RANDOM

_U = SHARE_UNITS
_EPOCH = datetime(1970, 1, 1)
_UNBOUNDED = 1 << 62
_Z95 = 1.6448536269514722  # the standard normal's 95th percentile
_PROGRESS_SLICES = 50  # the replay reports progress this often when asked to


@dataclass(frozen=True)
class HarvestOptions:
    """Options of one harvesting replay; the defaults are the SPEC's and the ASI paper's.

    Args:
        policy: the victim policy, one of :data:`POLICIES`.
        seed: seeds the eviction delays (the same for every policy) and ``random``.
        idle_sm: a GPU sample below this SM-active is idle.
        idle_for_s: an allocation idle this long falls asleep.
        eviction_delay_mean_s: mean of the eviction delay (ASI: 13 s).
        eviction_delay_p95_s: its 95th percentile (ASI: 48 s).
        kill_after_s: a borrower still there this long after the wake is killed.
    """

    policy: str = "spotgpu"
    seed: int = 0
    idle_sm: float = 0.05
    idle_for_s: float = 1800.0
    eviction_delay_mean_s: float = 13.0
    eviction_delay_p95_s: float = 48.0
    kill_after_s: float = 60.0


@dataclass(frozen=True)
class HarvestResult:
    """One policy's replay of the window.

    GPU-hours are over healthy nodes. ``allocated`` counts a GPU held by high-
    or low-priority work or lent by a sleeping allocation; ``standby`` is the
    integral of the GPUs that sleeping allocations lend, ``harvested`` the part
    of it low-priority work used (the node's occupancy beyond its capacity
    without the lent GPUs).

    Attributes:
        jobs: one row per low-priority job: job_id, arrival, finish (null:
            unfinished), need_s (null: open-ended), done_s (work kept at the
            end, including any before the window), runs, preempted (times),
            in_window (arrived in the window), resumed (was running at the
            window's start and went on there; one that no longer fits its
            recorded nodes waits again, from scratch).
        segments: one row per pod and run: job_id, node_id, gpus, cpus,
            memory_gib, start_time, end_time.
        victims: one row per eviction: job_id, time, reason (``preempt`` for a
            high-priority start, ``wake`` for a waking lender), lost_s,
            lost_gpu_hours, forced.
        high: one row per high-priority (or fixed) allocation as replayed:
            alloc_id, node_id, start_time, end_time (clipped to the window).
        lending: one row per sleep as replayed: alloc_id, node_id, start_time
            (it falls asleep), end_time (it holds its resources again: the wake
            plus the eviction delay, or its end).
        overcommitted: events at which recorded fixed work alone exceeded a
            node (the record's own oversubscription; low-priority work is never
            placed over capacity).
        budget_hits: node searches that stopped at the scan budget (64 fitting
            candidates per free-GPU level looked at without a fit; a deeper node
            might have held the pod).
    """

    policy: str
    seed: int
    start: datetime
    end: datetime
    healthy_gpu_hours: float
    allocated_high_gpu_hours: float
    allocated_gpu_hours: float
    standby_gpu_hours: float
    harvested_gpu_hours: float
    lp_gpu_hours: float
    lost_gpu_hours: float
    preemptions: int
    evictions: int
    forced_kills: int
    sleeps: int
    jobs: pl.DataFrame = field(repr=False)
    segments: pl.DataFrame = field(repr=False)
    victims: pl.DataFrame = field(repr=False)
    high: pl.DataFrame = field(repr=False)
    lending: pl.DataFrame = field(repr=False)
    overcommitted: int = 0
    budget_hits: int = 0

    @property
    def allocation_rate_high(self) -> float | None:
        h = self.healthy_gpu_hours
        return None if h <= 0 else self.allocated_high_gpu_hours / h

    @property
    def allocation_rate(self) -> float | None:
        h = self.healthy_gpu_hours
        return None if h <= 0 else self.allocated_gpu_hours / h

    @property
    def harvested_share(self) -> float | None:
        s = self.standby_gpu_hours
        return None if s <= 0 else self.harvested_gpu_hours / s

    @property
    def unfinished(self) -> int:
        return int(self.jobs["finish"].null_count())

    def completion_s(self) -> dict[str, float | None]:
        """Completion time (finish - arrival) of the jobs that arrived in the window and
        finished: mean, p50, p90 (nearest rank: the ceil(q n)-th smallest)."""
        done = (
            self.jobs.filter(pl.col("in_window") & pl.col("finish").is_not_null())
            .select((pl.col("finish") - pl.col("arrival")).dt.total_microseconds() / 1e6)
            .to_series()
            .sort()
            .to_list()
        )
        if not done:
            return {"mean": None, "p50": None, "p90": None}

        def rank(q: float) -> float:
            return float(done[max(math.ceil(q * len(done)), 1) - 1])

        return {"mean": sum(done) / len(done), "p50": rank(0.5), "p90": rank(0.9)}


# ----------------------------------------------------------------- sleep intervals


def sleep_intervals(
    samples: pl.DataFrame,
    allocations: pl.DataFrame,
    start: datetime,
    end: datetime,
    idle_sm: float = 0.05,
    idle_for_s: float = 1800.0,
) -> pl.DataFrame:
    """When each sleepable high-priority allocation sleeps, from its telemetry.

    A sample at ts stands for [ts, next sample of the allocation). A run of
    consecutive idle samples (sm_active < ``idle_sm`` on every GPU attributed
    to the allocation) from t0 up to the next busy sample at t1 puts the
    allocation to sleep over [t0 + idle_for, t1) when that is not empty; a run
    reaching the allocation's last sample lasts one more sampling step (the
    spacing of its last two samples). Sleeps are clipped to the allocation's
    life and to [start, end).

    Args:
        samples: alloc_id, ts, sm_active (the busiest of its GPUs at ts).
        allocations: the allocations (alloc_id, start_time, end_time, priority,
            sleepable); samples of other than sleepable high-priority ones are
            ignored.
        start, end: the window.
        idle_sm, idle_for_s: the threshold and how long it must hold.

    Returns:
        alloc_id, sleep_start, sleep_end (Datetime µs), sorted.

    Example:
        >>> t0 = datetime(2026, 1, 1)
        >>> ts = [t0 + timedelta(minutes=15 * i) for i in range(8)]
        >>> samples = pl.DataFrame({"alloc_id": ["a"] * 8, "ts": ts,
        ...     "sm_active": [0.5, 0.0, 0.0, 0.0, 0.01, 0.6, 0.0, 0.0]})
        >>> allocs = pl.DataFrame({"alloc_id": ["a"], "start_time": [t0], "end_time": [None],
        ...     "priority": ["high"], "sleepable": [True]},
        ...     schema_overrides={"end_time": pl.Datetime("us")})
        >>> [(s.minute + 60 * s.hour, e.minute + 60 * e.hour) for _, s, e in
        ...  sleep_intervals(samples, allocs, t0, t0 + timedelta(hours=3)).rows()]
        [(45, 75)]
    """
    out_schema = {"alloc_id": pl.String, "sleep_start": pl.Datetime("us"),
                  "sleep_end": pl.Datetime("us")}  # fmt: skip
    sleepers = allocations.filter(
        (pl.col("priority") == "high") & pl.col("sleepable").fill_null(False)
    ).select(
        pl.col("alloc_id").cast(pl.String),
        pl.col("start_time").cast(pl.Datetime("us")),
        pl.col("end_time").cast(pl.Datetime("us")),
    )
    if samples.is_empty() or sleepers.is_empty():
        return pl.DataFrame(schema=out_schema)
    idle_for = timedelta(seconds=idle_for_s)
    lo, hi = _naive(start), _naive(end)
    frame = (
        samples.select(
            pl.col("alloc_id").cast(pl.String),
            pl.col("ts").cast(pl.Datetime("us")),
            pl.col("sm_active").cast(pl.Float64),
        )
        .group_by("alloc_id", "ts")
        .agg(pl.col("sm_active").max())
        .join(sleepers, on="alloc_id", how="inner")
        .sort("alloc_id", "ts")
        .with_columns(
            (pl.col("sm_active") < idle_sm).alias("idle"),
            pl.col("ts").shift(-1).over("alloc_id").alias("next_ts"),
            (pl.col("ts") - pl.col("ts").shift(1).over("alloc_id")).alias("step"),
        )
        .with_columns(
            (pl.col("idle") != pl.col("idle").shift(1).over("alloc_id"))
            .fill_null(True)
            .cum_sum()
            .over("alloc_id")
            .alias("run")
        )
    )
    runs = (
        frame.filter(pl.col("idle"))
        .group_by("alloc_id", "run")
        .agg(
            pl.col("ts").min().alias("t0"),
            pl.col("next_ts").last().alias("next_ts"),
            pl.col("ts").last().alias("last_ts"),
            pl.col("step").last().alias("step"),
            pl.col("start_time").first(),
            pl.col("end_time").first(),
        )
        .with_columns(
            pl.coalesce(
                "next_ts", pl.col("last_ts") + pl.col("step").fill_null(pl.duration(seconds=0))
            ).alias("t1")
        )
        .select(
            "alloc_id",
            pl.max_horizontal(pl.col("t0") + idle_for, pl.col("start_time"), pl.lit(lo)).alias(
                "sleep_start"
            ),
            pl.min_horizontal("t1", pl.col("end_time").fill_null(pl.lit(hi)), pl.lit(hi)).alias(
                "sleep_end"
            ),
        )
        .filter(pl.col("sleep_end") > pl.col("sleep_start"))
        .sort("alloc_id", "sleep_start")
    )
    return runs.select(pl.col(c).cast(t) for c, t in out_schema.items())


# ------------------------------------------------------------------ helpers


def _naive(at: datetime) -> datetime:
    if at.tzinfo is not None:
        return at.astimezone(timezone.utc).replace(tzinfo=None)
    return at


def _us(at: datetime) -> int:
    return (_naive(at) - _EPOCH) // timedelta(microseconds=1)


def delay_sigma(mean_s: float, p95_s: float) -> float:
    """The lognormal sigma whose mean and 95th percentile are the given ones.

    ln(p95 / mean) = z95 sigma - sigma^2 / 2; the smaller root.

    >>> round(delay_sigma(13, 48), 4)
    1.3398
    """
    if mean_s <= 0:
        return 0.0
    if p95_s < mean_s:
        raise UsageError("--eviction-delay-p95 must be at least the mean")
    r = math.log(p95_s / mean_s)
    disc = _Z95 * _Z95 - 2 * r
    if disc < 0:
        top = math.exp(_Z95 * _Z95 / 2)
        raise UsageError(
            f"--eviction-delay-p95 can be at most {top:.2f} x the mean for a lognormal delay"
        )
    return _Z95 - math.sqrt(disc)


def check_options(options: HarvestOptions, start: datetime, end: datetime) -> None:
    """Raise UsageError when the options or the window cannot be replayed."""
    if options.policy not in POLICIES:
        raise UsageError(f"--policy: unknown {options.policy!r}; use {', '.join(POLICIES)}")
    if not _us(end) > _us(start):
        raise UsageError("the harvesting window is empty: its end must come after its start")
    if not 0 <= options.idle_sm <= 1:
        raise UsageError("--idle-sm: give an SM-active level between 0 and 1")
    if options.idle_for_s < 0:
        raise UsageError("--idle-for: must be 0 or more")
    if options.eviction_delay_mean_s < 0 or options.kill_after_s < 0:
        raise UsageError("eviction delays must be 0 or more seconds")
    delay_sigma(options.eviction_delay_mean_s, options.eviction_delay_p95_s)


# ------------------------------------------------------------------ preparation


def _unit_expr(frame: pl.DataFrame, column: str) -> pl.Expr:
    """A quantity column in integer micro-units (null and absent = 0)."""
    if column not in frame.columns:
        return pl.lit(0, pl.Int64)
    return (pl.col(column).cast(pl.Float64).fill_null(0.0) * _U).round().cast(pl.Int64)


def _column(frame: pl.DataFrame, column: str, dtype: pl.DataType, default: object) -> pl.Series:
    if column in frame.columns:
        return frame[column].cast(dtype)
    return pl.Series(column, [default] * frame.height, dtype=dtype)


def _ints(values: object) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def _offsets(counts: list[int]) -> np.ndarray:
    off = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=off[1:])
    return off


@dataclass
class _Names:
    """What turns the kernel's indices back into the store's ids."""

    node_ids: list[str]
    fixed_ids: list[str]
    job_ids: list[str]
    early: np.ndarray  # jobs running at the window's start
    n_classes: int
    n_models: int
    n_fixed: int
    n_wakes: int
    n_pods: int
    seq: int  # recorded events numbered so far
    sleeps: int


def _prepare(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    sleeps: pl.DataFrame,
    options: HarvestOptions,
    start: datetime,
    end: datetime,
) -> tuple[dict[str, Any], _Names]:
    """The fields of the kernel's :class:`~fleetaudit.harvest_kernel.Static` for one
    replay, and the ids to read its outcome with."""
    from fleetaudit import harvest_kernel as kernel  # numba: imported when a replay runs

    lo, hi = _us(start), _us(end)
    # ---- nodes, sorted by node_id
    frame = nodes.with_columns(pl.col("node_id").cast(pl.String)).sort("node_id")
    node_ids: list[str] = frame["node_id"].to_list()
    index = {x: i for i, x in enumerate(node_ids)}
    n = len(node_ids)
    models = frame["gpu_model"].cast(pl.String).fill_null("").to_list()
    model_names = sorted(set(models))
    model_index = {m: i for i, m in enumerate(model_names)}
    model = [model_index[m] for m in models]
    mem = _column(frame, "memory_gib", pl.Float64, None).to_list()
    health = _column(frame, "health", pl.String, "healthy").to_list()
    healthy = [h is None or h == "healthy" for h in health]
    switch = _column(frame, "switch_id", pl.String, None).to_list()
    domain = [s if s is not None else "\0" + node_ids[i] for i, s in enumerate(switch)]
    groups: dict[tuple[int, str], int] = {}
    group = [groups.setdefault((model[i], domain[i]), len(groups)) for i in range(n)]
    group_members: list[list[int]] = [[] for _ in groups]
    for i in range(n):
        if healthy[i]:
            group_members[group[i]].append(i)
    model_members: list[list[int]] = [[] for _ in model_names]
    for (m, _), g in sorted(groups.items(), key=lambda kv: kv[1]):
        model_members[m].append(g)

    # ---- allocations overlapping the window, on known nodes
    alloc = (
        allocations.select(
            pl.col("alloc_id").cast(pl.String),
            _column(allocations, "job_id", pl.String, None).alias("job_id"),
            pl.col("node_id").cast(pl.String),
            pl.col("gpus").cast(pl.Float64).fill_null(0.0),
            pl.col("priority").cast(pl.String),
            pl.col("start_time").dt.epoch("us").alias("s"),
            pl.col("end_time").dt.epoch("us").alias("e"),
            _column(allocations, "checkpoint_interval_s", pl.Float64, None).alias("ckpt"),
            _unit_expr(allocations, "gpus").alias("units"),
            _unit_expr(allocations, "cpus").alias("cpu"),
            _unit_expr(allocations, "memory_gib").alias("mem"),
        )
        .filter(
            (pl.col("s") < hi)
            & (pl.col("e").is_null() | ((pl.col("e") > lo) & (pl.col("e") > pl.col("s"))))
            & pl.col("node_id").is_in(node_ids)
        )
        .sort("alloc_id")
    )
    is_job = (pl.col("priority") == "low") & (pl.col("gpus") > 0)
    fixed = alloc.filter(~is_job)
    lp = alloc.filter(is_job)
    # distinct share sizes, largest first
    fracs = pl.concat([fixed["units"], lp["units"]]) % _U
    fv = np.sort(fracs.filter(fracs > 0).unique().to_numpy().astype(np.int64))[::-1].copy()
    frac_index = {int(v): i for i, v in enumerate(fv)}

    def share_index(units: list[int]) -> np.ndarray:
        return _ints([frac_index[u % _U] if u % _U else -1 for u in units])

    # ---- fixed work (high priority, and low priority without GPUs) and its events
    fixed_ids: list[str] = fixed["alloc_id"].to_list()
    f_units = fixed["units"].to_list()
    f_start = fixed["s"].to_list()
    f_end = [kernel.BIG if e is None else e for e in fixed["e"].to_list()]
    f_high = (fixed["priority"] == "high").to_list()
    events: list[tuple[int, int, int, int, int]] = []  # t, order, seq, kind, item
    seq = 0
    for i in range(fixed.height):
        events.append((max(f_start[i], lo), 2, seq, kernel.HP_START, i))
        seq += 1
        if f_end[i] < hi:
            events.append((f_end[i], 0, seq, kernel.HP_END, i))
            seq += 1
    fixed_index = {a: i for i, a in enumerate(fixed_ids)}
    wake_item: list[int] = []
    n_sleeps = 0
    sleep_columns = sleeps.select(
        pl.col("alloc_id").cast(pl.String),
        pl.col("sleep_start").dt.epoch("us"),
        pl.col("sleep_end").dt.epoch("us"),
    ).get_columns()
    for alloc_id, s, e in zip(*(c.to_list() for c in sleep_columns), strict=True):
        i = fixed_index.get(alloc_id)
        if i is None or not f_high[i]:
            continue
        s, e = max(s, lo, f_start[i]), min(e, hi)
        if e <= s or s >= f_end[i]:
            continue
        n_sleeps += 1
        events.append((s, 0, seq, kernel.SLEEP, i))
        seq += 1
        if e < hi and e < f_end[i]:
            events.append((e, 2, seq, kernel.WAKE, len(wake_item)))
            wake_item.append(i)
            seq += 1
    events.sort()
    ev = np.asarray(events, dtype=np.int64).reshape(-1, 5)

    # eviction delays, one per wake, the same draws for every policy
    sigma = delay_sigma(options.eviction_delay_mean_s, options.eviction_delay_p95_s)
    mean = options.eviction_delay_mean_s
    draws = np.random.default_rng([options.seed, 7]).standard_normal(len(wake_item))
    mu = math.log(mean) - sigma * sigma / 2 if mean > 0 else 0.0
    delays = [0 if mean <= 0 else round(math.exp(mu + sigma * z) * 1e6) for z in draws.tolist()]

    # ---- low-priority jobs: one per job_id (null: the alloc_id), pods largest first
    grouped = (
        lp.with_columns(pl.coalesce("job_id", "alloc_id").alias("job"))
        .group_by("job", maintain_order=True)
        .agg(
            pl.col("s").min().alias("s"),
            pl.col("e").max().alias("e"),
            pl.col("e").is_null().any().alias("open"),
            pl.col("ckpt").max().alias("ckpt"),
            "node_id",
            "units",
            "cpu",
            "mem",
        )
        .sort("s", "job")
    )
    job_ids: list[str] = []
    arrival, need, gpus_u, j_model, local, ckpts, in_window, n_pods = ([] for _ in range(8))
    p_units: list[int] = []
    p_cpu: list[int] = []
    p_mem: list[int] = []
    p_rec: list[int] = []
    klass: list[int] = []
    classes: dict[tuple[object, ...], int] = {}
    class_info: list[tuple[int, bool, int]] = []  # model, gang, need
    rows = zip(*(c.to_list() for c in grouped.get_columns()), strict=True)
    for job_id, s, e, open_, ckpt, node_list, units, cpu, mem_ in rows:
        recorded = [index[x] for x in node_list]
        order = sorted(range(len(units)), key=lambda k: -units[k])
        pods = [(units[k], cpu[k], mem_[k]) for k in order]
        recorded = [recorded[k] for k in order]
        m = model[recorded[0]]
        is_local = len({domain[x] for x in recorded}) == 1
        job_ids.append(job_id)
        arrival.append(s)
        need.append(math.inf if open_ else float(e - s))
        gpus_u.append(sum(u for u, _, _ in pods))
        j_model.append(m)
        local.append(is_local)
        ckpts.append(0 if ckpt is None or ckpt <= 0 else round(ckpt * 1e6))
        in_window.append(s >= lo)
        n_pods.append(len(pods))
        for (u, c, mm), x in zip(pods, recorded, strict=True):
            p_units.append(u)
            p_cpu.append(c)
            p_mem.append(mm)
            p_rec.append(x)
        gang = is_local and len(pods) > 1
        key = (m, gang, tuple((u // _U, u % _U, c, mm) for u, c, mm in pods))
        c = classes.get(key)
        if c is None:
            c = classes[key] = len(classes)
            wanted = (
                sum(u // _U for u, _, _ in pods)
                if gang
                else max(u // _U + (1 if u // _U and u % _U else 0) for u, _, _ in pods)
            )
            class_info.append((m, gang, wanted))
        klass.append(c)
    pu = _ints(p_units)
    arrivals = _ints([j for j, inside in enumerate(in_window) if inside])
    early = _ints([j for j, inside in enumerate(in_window) if not inside])

    f_units_a = _ints(f_units)
    static = dict(  # noqa: C408 (the kernel constructor's keywords)
        model=_ints(model),
        gpus=frame["gpus"].cast(pl.Int64).fill_null(0).to_numpy().astype(np.int64),
        cpus=_ints((_column(frame, "cpus", pl.Float64, 0.0).fill_null(0.0) * _U).round()),
        mem=_ints([_UNBOUNDED if x is None else round(x * _U) for x in mem]),
        healthy=np.asarray(healthy, dtype=np.bool_),
        group=_ints(group),
        group_off=_offsets([len(x) for x in group_members]),
        group_nodes=_ints([i for x in group_members for i in x]),
        model_off=_offsets([len(x) for x in model_members]),
        model_groups=_ints([g for x in model_members for g in x]),
        fv=fv,
        f_node=_ints([index[x] for x in fixed["node_id"].to_list()]),
        f_whole=f_units_a // _U,
        f_fi=share_index(f_units),
        f_cpu=fixed["cpu"].to_numpy().astype(np.int64),
        f_mem=fixed["mem"].to_numpy().astype(np.int64),
        f_high=np.asarray(f_high, dtype=np.bool_),
        f_end=_ints(f_end),
        ev_t=ev[:, 0].copy(),
        ev_o=ev[:, 1].copy(),
        ev_seq=ev[:, 2].copy(),
        ev_kind=ev[:, 3].copy(),
        ev_item=ev[:, 4].copy(),
        wake_item=_ints(wake_item),
        delays=_ints(delays),
        j_arrival=_ints(arrival),
        j_need=np.asarray(need, dtype=np.float64),
        j_pod_off=_offsets(n_pods),
        j_gpus_u=_ints(gpus_u),
        j_model=_ints(j_model),
        j_local=np.asarray(local, dtype=np.bool_),
        j_ckpt=_ints(ckpts),
        j_klass=_ints(klass),
        j_in_window=np.asarray(in_window, dtype=np.bool_),
        p_whole=pu // _U,
        p_frac=pu % _U,
        p_fi=share_index(p_units),
        p_cpu=_ints(p_cpu),
        p_mem=_ints(p_mem),
        p_rec=_ints(p_rec),
        arrivals=arrivals,
        c_model=_ints([m for m, _, _ in class_info]),
        c_gang=np.asarray([g for _, g, _ in class_info], dtype=np.bool_),
        c_need=_ints([w for _, _, w in class_info]),
        lo=lo,
        hi=hi,
        kill=round(options.kill_after_s * 1e6),
        policy=_POLICY_CODES[options.policy],
    )
    names = _Names(
        node_ids=node_ids,
        fixed_ids=fixed_ids,
        job_ids=job_ids,
        early=early,
        n_classes=len(classes),
        n_models=len(model_names),
        n_fixed=fixed.height,
        n_wakes=len(wake_item),
        n_pods=len(p_units),
        seq=seq,
        sleeps=n_sleeps,
    )
    return static, names


def _state(static: dict[str, Any], names: _Names) -> dict[str, Any]:
    """The fields of a fresh :class:`~fleetaudit.harvest_kernel.State`: every node
    empty and free, nothing running or waiting."""
    from fleetaudit import harvest_kernel as kernel

    n = static["gpus"].shape[0]
    d = max(static["fv"].shape[0], 1)
    jobs = static["j_arrival"].shape[0]

    def zeros(size: int | tuple[int, int], dtype: type = np.int64) -> np.ndarray:
        return np.zeros(size, dtype=dtype)

    def full(size: int, value: int) -> np.ndarray:
        return np.full(size, value, dtype=np.int64)

    lp_on, buckets, share_heaps, waiting, waiting_by_model, heap = kernel.new_containers(
        n, names.n_models, names.n_classes
    )
    ints, floats = kernel.int_list, kernel.float_list
    cnt = zeros(kernel.N_COUNTERS)
    cnt[kernel.C_SEQ] = names.seq
    return dict(  # noqa: C408 (the kernel constructor's keywords)
        whole=zeros(n), fr=zeros((n, d)), fr_n=zeros(n), cpu_used=zeros(n), mem_used=zeros(n),
        occ=zeros(n), hp_whole=zeros(n), hp_fr=zeros((n, d)), hp_fr_n=zeros(n),
        lent_whole=zeros(n), lent_fr=zeros((n, d)), lent_fr_n=zeros(n), hp_occ=zeros(n),
        lent=zeros(n), locked=zeros(n), lp_on=lp_on, free_ver=zeros(n), bucket_of=full(n, -1),
        buckets=buckets, bucket_n=zeros(names.n_models * kernel.LEVELS), share_ver=zeros(n),
        share_heaps=share_heaps, share_n=zeros(names.n_models * kernel.QUARTERS),
        group_free=zeros(int(static["group"].max(initial=-1)) + 1),
        last_t=full(n, static["lo"]),
        f_state=zeros(names.n_fixed), f_seen_start=full(names.n_fixed, -1),
        f_seen_end=full(names.n_fixed, -1), lent_open=full(names.n_fixed, -1),
        j_done=zeros(jobs, np.float64), j_run_start=full(jobs, -1), j_version=zeros(jobs),
        j_finish=full(jobs, -1), j_runs=zeros(jobs), j_preempted=zeros(jobs),
        j_resumed=zeros(jobs, np.bool_), j_seg=full(jobs, -1), p_placed=full(names.n_pods, -1),
        waiting=waiting, waiting_n=zeros(names.n_classes), waiting_by_model=waiting_by_model,
        never=full(names.n_classes, -1),
        freed=ints(), freed_mark=zeros(n, np.bool_), dirty=ints(),
        dirty_mark=zeros(names.n_classes, np.bool_), heap=heap, heap_n=zeros(1),
        at_start=ints(), w_forced=zeros(names.n_wakes, np.bool_),
        w_victims=zeros((names.n_wakes, 2)), victim_store=ints(),
        seg_job=ints(), seg_node=ints(), seg_start=ints(), seg_end=ints(), seg_pod=ints(),
        v_job=ints(), v_t=ints(), v_reason=ints(), v_lost=floats(), v_forced=ints(),
        l_item=ints(), l_start=ints(), l_end=ints(), cnt=cnt, lost=zeros(1, np.float64),
    )  # fmt: skip


# ------------------------------------------------------------------ entry point


def replay_harvest(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    sleeps: pl.DataFrame,
    options: HarvestOptions,
    start: datetime,
    end: datetime,
    progress: Callable[[float], None] | None = None,
) -> HarvestResult:
    """Replay ``[start, end)`` with sleeping lenders and low-priority backfill under one policy.

    Args:
        nodes: the nodes frame (node_id, gpu_model, gpus, cpus; memory_gib,
            switch_id, health optional; only healthy nodes take replayed work).
        allocations: the allocations overlapping the window (alloc_id, node_id,
            gpus, cpus, priority, start_time, end_time; job_id, memory_gib,
            checkpoint_interval_s, sleepable optional).
        sleeps: alloc_id, sleep_start, sleep_end (:func:`sleep_intervals`).
        options: the victim policy, seed, delays.
        start, end: the window (naive = UTC).
        progress: called with the share of the window replayed.

    Returns:
        The :class:`HarvestResult`.

    Raises:
        UsageError: unknown policy, an empty window, impossible delay figures.

    Example:
        >>> t0 = datetime(2026, 1, 1)
        >>> h = lambda x: t0 + timedelta(hours=x)
        >>> nodes = pl.DataFrame({"node_id": ["n1"], "gpu_model": ["H20"], "gpus": [8],
        ...                       "cpus": [64.0]})
        >>> allocs = pl.DataFrame({"alloc_id": ["hp", "lp"], "node_id": ["n1", "n1"],
        ...     "gpus": [8.0, 8.0], "cpus": [8.0, 8.0], "priority": ["high", "low"],
        ...     "start_time": [h(0), h(1)], "end_time": [h(4), h(2)],
        ...     "sleepable": [True, False]})
        >>> sleeps = pl.DataFrame({"alloc_id": ["hp"], "sleep_start": [h(1)],
        ...                        "sleep_end": [h(3)]})
        >>> r = replay_harvest(nodes, allocs, sleeps, HarvestOptions(), h(0), h(4))
        >>> r.standby_gpu_hours, r.harvested_gpu_hours, r.unfinished
        (16.0, 8.0, 0)
    """
    check_options(options, start, end)
    prepared = prepare_replay(nodes, allocations, sleeps, options, start, end)
    return run_replay(prepared, options.policy, progress)


@dataclass(frozen=True)
class PreparedReplay:
    """One window's replay in the kernel's arrays, prepared once for every policy.

    Picklable (arrays, lists and strings), so worker processes can replay it.
    """

    fixed: dict[str, Any]  # the fields of harvest_kernel.Static (its policy is replaced)
    names: _Names
    options: HarvestOptions  # the seed and delays (its policy is replaced)
    start: datetime
    end: datetime


def prepare_replay(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    sleeps: pl.DataFrame,
    options: HarvestOptions,
    start: datetime,
    end: datetime,
) -> PreparedReplay:
    """What :func:`run_replay` needs, for any policy (arguments as :func:`replay_harvest`)."""
    check_options(options, start, end)
    fixed, names = _prepare(nodes, allocations, sleeps, options, start, end)
    return PreparedReplay(fixed, names, options, start, end)


def run_replay(
    prepared: PreparedReplay,
    policy: str,
    progress: Callable[[float], None] | None = None,
) -> HarvestResult:
    """Replay a prepared window under one victim policy (see :func:`replay_harvest`)."""
    from fleetaudit import harvest_kernel as kernel

    options = replace(prepared.options, policy=policy)
    check_options(options, prepared.start, prepared.end)
    fixed = {**prepared.fixed, "policy": _POLICY_CODES[policy]}
    names = prepared.names
    changing = _state(fixed, names)
    static, state = kernel.new_static(**fixed), kernel.new_state(**changing)
    rng = np.random.default_rng([options.seed, 11])  # the random policy's draws
    kernel.index_all(static, state)
    kernel.begin(static, state, names.early, rng)
    lo, hi = fixed["lo"], fixed["hi"]
    # The kernel runs in slices of the window so that progress can be shown between them.
    slices = _PROGRESS_SLICES if progress is not None else 1
    for k in range(1, slices + 1):
        stop = hi if k == slices else lo + (hi - lo) * k // slices
        kernel.run_until(static, state, stop, rng)
        if progress is not None:
            progress(k / slices)
    kernel.finish(static, state)
    return _result(fixed, changing, names, options, prepared.start, prepared.end)


def warm_up() -> None:
    """Load the compiled replay: numba compiles it on a machine's first replay (about a
    minute on 2 cores) and caches it in ``__pycache__``; later loads take a second.

    Running one tiny replay here, before worker processes start, lets them load the
    cache instead of each compiling it.
    """
    t0 = datetime(2000, 1, 1)
    nodes = pl.DataFrame({"node_id": ["n"], "gpu_model": ["m"], "gpus": [1], "cpus": [1.0]})
    allocations = pl.DataFrame(
        {"alloc_id": ["a"], "node_id": ["n"], "gpus": [1.0], "cpus": [1.0],
         "priority": ["low"], "start_time": [t0], "end_time": [t0 + timedelta(hours=1)]}
    )  # fmt: skip
    sleeps = pl.DataFrame(schema={"alloc_id": pl.String, "sleep_start": pl.Datetime("us"),
                                  "sleep_end": pl.Datetime("us")})  # fmt: skip
    replay_harvest(nodes, allocations, sleeps, HarvestOptions(), t0, t0 + timedelta(hours=2))


def _times(us: object) -> pl.Series:
    """µs since the epoch (-1 or None: null) as a naive Datetime("us") column."""
    frame = pl.DataFrame({"us": np.asarray(us, dtype=np.int64)}, schema={"us": pl.Int64})
    return frame.select(
        pl.when(pl.col("us") >= 0).then(pl.col("us")).cast(pl.Datetime("us"))
    ).to_series()


def _result(
    static: dict[str, Any],
    state: dict[str, Any],
    names: _Names,
    options: HarvestOptions,
    start: datetime,
    end: datetime,
) -> HarvestResult:
    from fleetaudit import harvest_kernel as kernel

    hours = 1e6 * 3600
    window = static["hi"] - static["lo"]
    healthy = int(static["gpus"][static["healthy"]].sum()) * window
    job_ids = pl.Series("job_id", names.job_ids, dtype=pl.String)
    node_ids = pl.Series("node_id", names.node_ids, dtype=pl.String)
    fixed_ids = pl.Series("alloc_id", names.fixed_ids, dtype=pl.String)
    need = static["j_need"]
    job_frame = pl.DataFrame(
        {
            "job_id": job_ids,
            "arrival": _times(static["j_arrival"]),
            "finish": _times(state["j_finish"]),
            "need_s": pl.Series(np.where(np.isinf(need), np.nan, need / 1e6)).fill_nan(None),
            "done_s": np.minimum(state["j_done"], need) / 1e6,
            "runs": state["j_runs"],
            "preempted": state["j_preempted"],
            "in_window": static["j_in_window"],
            "resumed": state["j_resumed"],
        },
        schema={"job_id": pl.String, "arrival": pl.Datetime("us"), "finish": pl.Datetime("us"),
                "need_s": pl.Float64, "done_s": pl.Float64, "runs": pl.Int64,
                "preempted": pl.Int64, "in_window": pl.Boolean, "resumed": pl.Boolean},
    )  # fmt: skip
    seg_job = kernel.int_array(state["seg_job"])
    pod = static["j_pod_off"][seg_job] + kernel.int_array(state["seg_pod"])
    segments = pl.DataFrame(
        {
            "job_id": job_ids.gather(seg_job),
            "node_id": node_ids.gather(kernel.int_array(state["seg_node"])),
            "gpus": (static["p_whole"][pod] * _U + static["p_frac"][pod]) / _U,
            "cpus": static["p_cpu"][pod] / _U,
            "memory_gib": static["p_mem"][pod] / _U,
            "start_time": _times(kernel.int_array(state["seg_start"])),
            "end_time": _times(kernel.int_array(state["seg_end"])),
        },
        schema={"job_id": pl.String, "node_id": pl.String, "gpus": pl.Float64,
                "cpus": pl.Float64, "memory_gib": pl.Float64,
                "start_time": pl.Datetime("us"), "end_time": pl.Datetime("us")},
    )  # fmt: skip
    v_job = kernel.int_array(state["v_job"])
    v_lost = kernel.float_array(state["v_lost"])
    victims = pl.DataFrame(
        {
            "job_id": job_ids.gather(v_job),
            "time": _times(kernel.int_array(state["v_t"])),
            "reason": pl.Series(kernel.int_array(state["v_reason"])).replace_strict(
                {kernel.PREEMPT: "preempt", kernel.WAKE_REASON: "wake"}, return_dtype=pl.String
            ),
            "lost_s": v_lost,
            "lost_gpu_hours": v_lost * static["j_gpus_u"][v_job] / _U / 3600,
            "forced": kernel.int_array(state["v_forced"]).astype(np.bool_),
        },
        schema={"job_id": pl.String, "time": pl.Datetime("us"), "reason": pl.String,
                "lost_s": pl.Float64, "lost_gpu_hours": pl.Float64, "forced": pl.Boolean},
    )  # fmt: skip
    seen = np.flatnonzero(state["f_seen_start"] >= 0)
    high = pl.DataFrame(
        {
            "alloc_id": fixed_ids.gather(seen),
            "node_id": node_ids.gather(static["f_node"][seen]),
            "start_time": _times(state["f_seen_start"][seen]),
            "end_time": _times(state["f_seen_end"][seen]),
        },
        schema={"alloc_id": pl.String, "node_id": pl.String,
                "start_time": pl.Datetime("us"), "end_time": pl.Datetime("us")},
    )  # fmt: skip
    lent_items = kernel.int_array(state["l_item"])
    lending = pl.DataFrame(
        {
            "alloc_id": fixed_ids.gather(lent_items),
            "node_id": node_ids.gather(static["f_node"][lent_items]),
            "start_time": _times(kernel.int_array(state["l_start"])),
            "end_time": _times(kernel.int_array(state["l_end"])),
        },
        schema={"alloc_id": pl.String, "node_id": pl.String,
                "start_time": pl.Datetime("us"), "end_time": pl.Datetime("us")},
    )  # fmt: skip
    cnt = state["cnt"]
    return HarvestResult(
        policy=options.policy,
        seed=options.seed,
        start=_naive(start),
        end=_naive(end),
        healthy_gpu_hours=healthy / hours,
        allocated_high_gpu_hours=int(cnt[kernel.C_HIGH]) / hours,
        allocated_gpu_hours=int(cnt[kernel.C_ALLOC]) / hours,
        standby_gpu_hours=int(cnt[kernel.C_STANDBY]) / hours,
        harvested_gpu_hours=int(cnt[kernel.C_HARVEST]) / hours,
        lp_gpu_hours=int(cnt[kernel.C_LP]) / hours,
        lost_gpu_hours=float(state["lost"][0]),
        preemptions=int(cnt[kernel.C_PREEMPT] + cnt[kernel.C_EVICT]),
        evictions=int(cnt[kernel.C_EVICT]),
        forced_kills=int(cnt[kernel.C_FORCED]),
        sleeps=names.sleeps,
        jobs=job_frame.sort("arrival", "job_id"),
        segments=segments.sort("start_time", "job_id", "node_id"),
        victims=victims.sort("time", "job_id"),
        high=high.sort("alloc_id"),
        lending=lending.sort("alloc_id", "start_time"),
        overcommitted=int(cnt[kernel.C_OVER]),
        budget_hits=int(cnt[kernel.C_BUDGET]),
    )
