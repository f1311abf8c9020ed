"""Harvesting what-if of SPEC §6: sleeping inference lends GPUs, low-priority work backfills.

A discrete-event replay of the window ``[start, end)``. Pure: it takes the
store's ``nodes`` and ``allocations`` frames (extra columns ignored, neither
mutated), the sleep intervals derived from telemetry
(:func:`sleep_intervals`) and a frozen :class:`HarvestOptions`, and returns a
:class:`HarvestResult`. One run is deterministic in its seed.

Model (docs/harvesting.md):

- Capacity is SPEC §2's occupancy, per node: whole GPUs plus the GPUs that the
  fractional parts fill when packed first-fit-decreasing
  (:func:`fleetaudit.model.capacity.first_fit_decreasing`), CPUs and memory plainly.
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
- GPUs out of service (health intervals, :class:`fleetaudit.model.capacity.Health`)
  are held while the interval lasts, as recorded high-priority work would be: no
  low-priority work lands on them, and at the interval's start the low-priority work
  that no longer fits the node is preempted (whatever the state: the replay's
  low-priority work is preemptible, and draining a node is when it moves). Work on
  them is not allocated, and healthy GPU-hours leave out those no work holds.
- A victim loses the work since its last checkpoint (every
  ``checkpoint_interval_s`` of run time since its current run began; none:
  everything since it began), keeps the rest and waits again in its original
  place in the queue.

Victim policies pick, among the low-priority jobs on the node, one at a time
until the work fits: ``spotgpu`` the least lost work (job GPUs x time since its
last checkpoint: :mod:`fleetaudit.whatif.victims`, the definition the by-time
placement replay's preemption shares), ``newest`` the latest (re)started,
``smallest`` the fewest GPUs, ``random`` a seeded draw; ties go to the newest,
then the job order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent import futures
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import polars as pl

from fleetaudit.core.errors import UsageError
from fleetaudit.core.options import VICTIM_POLICIES, HarvestRun
from fleetaudit.core.times import epoch_us, to_utc
from fleetaudit.model.capacity import (
    FOREVER_US,
    SHARE_UNITS,
    Health,
    micro_units,
    node_arrays,
    optional_column,
)

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

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

POLICIES = VICTIM_POLICIES
_POLICY_CODES = {p: i for i, p in enumerate(POLICIES)}  # harvest_kernel's SPOTGPU .. RANDOM

_U = SHARE_UNITS
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

    # the defaults are the command's (fleetaudit.core.options.HarvestRun), in seconds
    policy: str = VICTIM_POLICIES[0]
    seed: int = HarvestRun.seed
    idle_sm: float = HarvestRun.idle_sm
    idle_for_s: float = HarvestRun.idle_for.total_seconds()
    eviction_delay_mean_s: float = HarvestRun.eviction_delay_mean.total_seconds()
    eviction_delay_p95_s: float = HarvestRun.eviction_delay_p95.total_seconds()
    kill_after_s: float = HarvestRun.kill_after.total_seconds()

    @classmethod
    def of_run(cls, run: HarvestRun, policy: str) -> HarvestOptions:
        """The replay options of ``policy`` in the command's run ``run``."""
        return cls(
            policy=policy,
            seed=run.seed,
            idle_sm=run.idle_sm,
            idle_for_s=run.idle_for.total_seconds(),
            eviction_delay_mean_s=run.eviction_delay_mean.total_seconds(),
            eviction_delay_p95_s=run.eviction_delay_p95.total_seconds(),
            kill_after_s=run.kill_after.total_seconds(),
        )


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
    rows: _Rows = field(repr=False, compare=False)  # segments .. lending, built when read
    overcommitted: int = 0
    budget_hits: int = 0

    # The command reads the jobs alone: the other frames (millions of rows on a month of
    # a large fleet, ids gathered and sorted) are built from the rows on first use, once.

    @cached_property
    def segments(self) -> pl.DataFrame:
        static, out = self.rows.static, self.rows.out
        seg_job = out["seg_job"]
        pod = static["j_pod_off"][seg_job] + out["seg_pod"]
        segments = pl.DataFrame(
            {
                "job_id": self.rows.job_ids.gather(seg_job),
                "node_id": self.rows.node_ids.gather(out["seg_node"]),
                "gpus": (static["p_whole"][pod] * _U + static["p_frac"][pod]) / _U,
                "cpus": static["p_cpu"][pod] / _U,
                "memory_gib": static["p_mem"][pod] / _U,
                "start_time": _times(out["seg_start"]),
                "end_time": _times(out["seg_end"]),
            },
            schema={"job_id": pl.String, "node_id": pl.String, "gpus": pl.Float64,
                    "cpus": pl.Float64, "memory_gib": pl.Float64,
                    "start_time": pl.Datetime("us"), "end_time": pl.Datetime("us")},
        )  # fmt: skip
        return segments.sort("start_time", "job_id", "node_id")

    @cached_property
    def victims(self) -> pl.DataFrame:
        from fleetaudit.whatif import harvest_kernel as kernel

        out = self.rows.out
        v_job, v_lost = out["v_job"], out["v_lost"]
        victims = pl.DataFrame(
            {
                "job_id": self.rows.job_ids.gather(v_job),
                "time": _times(out["v_t"]),
                "reason": pl.Series(out["v_reason"]).replace_strict(
                    {kernel.PREEMPT: "preempt", kernel.WAKE_REASON: "wake"}, return_dtype=pl.String
                ),
                "lost_s": v_lost,
                "lost_gpu_hours": v_lost * self.rows.static["j_gpus_u"][v_job] / _U / 3600,
                "forced": out["v_forced"].astype(np.bool_),
            },
            schema={"job_id": pl.String, "time": pl.Datetime("us"), "reason": pl.String,
                    "lost_s": pl.Float64, "lost_gpu_hours": pl.Float64, "forced": pl.Boolean},
        )  # fmt: skip
        return victims.sort("time", "job_id")

    @cached_property
    def high(self) -> pl.DataFrame:
        out = self.rows.out
        # the allocations replayed (not the GPUs out of service, the last fixed items)
        seen = np.flatnonzero((out["f_seen_start"] >= 0) & ~self.rows.static["f_out"])
        high = pl.DataFrame(
            {
                "alloc_id": self.rows.fixed_ids.gather(seen),
                "node_id": self.rows.node_ids.gather(self.rows.static["f_node"][seen]),
                "start_time": _times(out["f_seen_start"][seen], none=-1),
                "end_time": _times(out["f_seen_end"][seen], none=-1),
            },
            schema={"alloc_id": pl.String, "node_id": pl.String,
                    "start_time": pl.Datetime("us"), "end_time": pl.Datetime("us")},
        )  # fmt: skip
        return high.sort("alloc_id")

    @cached_property
    def lending(self) -> pl.DataFrame:
        out = self.rows.out
        lent_items = out["l_item"]
        lending = pl.DataFrame(
            {
                "alloc_id": self.rows.fixed_ids.gather(lent_items),
                "node_id": self.rows.node_ids.gather(self.rows.static["f_node"][lent_items]),
                "start_time": _times(out["l_start"]),
                "end_time": _times(out["l_end"]),
            },
            schema={"alloc_id": pl.String, "node_id": pl.String,
                    "start_time": pl.Datetime("us"), "end_time": pl.Datetime("us")},
        )  # fmt: skip
        return lending.sort("alloc_id", "start_time")

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
    out_schema: dict[str, PolarsDataType] = {
        "alloc_id": pl.String, "sleep_start": pl.Datetime("us"), "sleep_end": pl.Datetime("us")
    }
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
    lo, hi = to_utc(start), to_utc(end)
    frame = samples.select(
        pl.col("alloc_id").cast(pl.String),
        pl.col("ts").cast(pl.Datetime("us")),
        pl.col("sm_active").cast(pl.Float64),
    )
    if not _one_per_alloc_and_time(frame):  # the store's query already gives them so
        frame = frame.group_by("alloc_id", "ts").agg(pl.col("sm_active").max())
        frame = frame.sort("alloc_id", "ts")
    frame = (
        frame.join(sleepers, on="alloc_id", how="inner", maintain_order="left")
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


_T = TypeVar("_T")


def awaited(future: Future[_T]) -> _T:
    """``future.result()`` on the main thread, waited for in short steps so that Ctrl-C
    is heard meanwhile: a wait without a timeout blocks in a lock that the signal does
    not wake, and the KeyboardInterrupt came only once the other thread was done."""
    while True:
        try:
            return future.result(timeout=0.1)
        except futures.TimeoutError:
            continue


def _one_per_alloc_and_time(frame: pl.DataFrame) -> bool:
    """Whether ``frame`` holds one row per (alloc_id, ts), in that order, none null: then
    grouping and sorting it would give it back as it is."""
    ids, ts = frame["alloc_id"], frame["ts"]
    if ids.null_count() or ts.null_count() or not ids.is_sorted():
        return False
    same = ids.slice(1).eq_missing(ids.slice(0, max(ids.len() - 1, 0)))
    back = ts.slice(1) <= ts.slice(0, max(ts.len() - 1, 0))
    return not (same & back).any()


# ------------------------------------------------------------------ helpers


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
    if not epoch_us(end) > epoch_us(start):
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
    return micro_units(column).fill_null(0)


def _ints(values: object) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def _offsets(counts: list[int] | np.ndarray) -> np.ndarray:
    off = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=off[1:])
    return off


@dataclass
class _Names:
    """What turns the kernel's indices back into the store's ids."""

    node_ids: list[str]
    fixed_ids: pl.Series  # alloc_id, String
    job_ids: pl.Series  # job_id, String
    early: np.ndarray  # jobs running at the window's start
    in_window: np.ndarray  # per job: it arrived in the window
    n_classes: int
    n_models: int
    n_fixed: int
    n_wakes: int
    n_pods: int
    seq: int  # recorded events numbered so far
    sleeps: int


@dataclass(frozen=True)
class PreparedReplay:
    """One window's replay in the kernel's arrays, prepared once for every policy.

    The replays only read it, so threads can replay several policies on one; it is
    picklable too (arrays, lists and strings).
    """

    fixed: dict[str, Any]  # the fields of harvest_kernel.Static (its policy is replaced)
    names: _Names
    options: HarvestOptions  # the seed and delays (its policy is replaced)
    start: datetime
    end: datetime


def prepare_replay(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    sleeps: pl.DataFrame | Future[pl.DataFrame],
    options: HarvestOptions,
    start: datetime,
    end: datetime,
    health: Health | None = None,
) -> PreparedReplay:
    """What :func:`run_replay` needs, for any policy (arguments as :func:`replay_harvest`):
    the fields of the kernel's :class:`~fleetaudit.whatif.harvest_kernel.Static` and the ids
    to read its outcome with.

    ``sleeps`` may be a future of the frame (derived on another thread): the nodes, the
    allocations and the jobs are prepared first and the sleeps waited for last.
    """
    from fleetaudit.whatif import harvest_kernel as kernel  # numba: imported when a replay runs

    check_options(options, start, end)

    lo, hi = epoch_us(start), epoch_us(end)
    # ---- nodes, sorted by node_id: the capacity model's node index
    fleet = node_arrays(nodes)
    node_ids: list[str] = fleet.node_id
    n = len(node_ids)
    models = [m or "" for m in fleet.gpu_model]
    model_names = sorted(set(models))
    model_index = {m: i for i, m in enumerate(model_names)}
    model = [model_index[m] for m in models]
    healthy = fleet.usable.tolist()
    domain = fleet.domain
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
            optional_column(allocations, "job_id", pl.String, None).alias("job_id"),
            pl.col("node_id").cast(pl.String),
            pl.col("gpus").cast(pl.Float64).fill_null(0.0),
            pl.col("priority").cast(pl.String),
            pl.col("start_time").dt.epoch("us").alias("s"),
            pl.col("end_time").dt.epoch("us").alias("e"),
            optional_column(allocations, "checkpoint_interval_s", pl.Float64, None).alias("ckpt"),
            _unit_expr(allocations, "gpus").alias("units"),
            _unit_expr(allocations, "cpus").alias("cpu"),
            _unit_expr(allocations, "memory_gib").alias("mem"),
        )
        .filter(
            (pl.col("s") < hi)
            & (pl.col("e").is_null() | ((pl.col("e") > lo) & (pl.col("e") > pl.col("s"))))
            & pl.col("node_id").is_in(node_ids)
        )
    )
    if not alloc["alloc_id"].is_sorted():  # the command's read is already in alloc_id order
        alloc = alloc.sort("alloc_id")
    is_job = (pl.col("priority") == "low") & (pl.col("gpus") > 0)
    fixed = alloc.filter(~is_job)
    lp = alloc.filter(is_job)
    # GPUs out of service (health steps) are fixed items too: whole GPUs held while the
    # step lasts, taken back from low-priority work at its start, counted as no work
    out_rows = _out_of_service(health, node_ids, lo, hi)
    n_work = fixed.height
    if out_rows.height:
        fixed = pl.concat([fixed, out_rows.cast(fixed.schema)])
    # node indexes and switch domains of the allocations
    node_frame = pl.DataFrame(
        {"node_id": node_ids, "node": np.arange(n, dtype=np.int64), "domain": domain},
        schema={"node_id": pl.String, "node": pl.Int64, "domain": pl.String},
    )
    fixed = fixed.join(node_frame, on="node_id", how="left", maintain_order="left")
    lp = lp.join(node_frame, on="node_id", how="left", maintain_order="left")
    # distinct share sizes, largest first
    fracs = pl.concat([fixed["units"], lp["units"]]) % _U
    fv = np.sort(fracs.filter(fracs > 0).unique().to_numpy().astype(np.int64))[::-1].copy()

    def share_index(units: np.ndarray) -> np.ndarray:
        """Index of each unit count's share size in fv (-1: no share)."""
        frac = units % _U
        found = np.searchsorted(-fv, -frac)  # fv is descending
        return np.where(frac > 0, found, -1).astype(np.int64)

    # ---- low-priority jobs: one per job_id (null: the alloc_id), in order of arrival
    # (then job id); their pods largest first (then alloc_id)
    lp = lp.with_columns(pl.coalesce("job_id", "alloc_id").alias("job"))
    jobs = (
        lp.group_by("job")
        .agg(
            pl.col("s").min().alias("arrival"),
            pl.col("e").max().alias("e"),
            pl.col("e").is_null().any().alias("open"),
            pl.col("ckpt").max().alias("ckpt"),
            (pl.col("domain").n_unique() == 1).alias("local"),
            pl.len().alias("n_pods"),
            pl.col("units").sum().alias("gpus_u"),
        )
        .sort("arrival", "job")
        .with_row_index("j")
    )
    pods = (
        lp.join(jobs.select("job", "j"), on="job")
        .sort("j", pl.col("units"), "alloc_id", descending=[False, True, False])
        .with_columns(
            (pl.col("units") // _U).alias("whole"),
            (pl.col("units") % _U).alias("frac"),
        )
    )
    first_pod = pods.group_by("j", maintain_order=True).first()
    model_of_node = np.asarray(model, dtype=np.int64)
    j_model = model_of_node[first_pod["node"].to_numpy()]
    n_pods = jobs["n_pods"].to_numpy().astype(np.int64)
    local = jobs["local"].to_numpy()
    gang = local & (n_pods > 1)
    # classes: jobs of one model, locality and pod list, numbered in order of arrival
    need_pod = pl.col("whole") + ((pl.col("whole") > 0) & (pl.col("frac") > 0)).cast(pl.Int64)
    per_job = (
        pods.group_by("j", maintain_order=True)
        .agg(
            pl.format("{}:{}:{}:{}", "whole", "frac", "cpu", "mem").str.join(";").alias("pods"),
            pl.col("whole").sum().alias("gang_need"),
            need_pod.max().alias("pod_need"),
        )
        .with_columns(
            pl.Series("model", j_model),
            pl.Series("gang", gang),
        )
        .with_columns(
            pl.format("{}|{}|{}", "model", "gang", "pods").alias("key"),
            pl.when(pl.col("gang")).then("gang_need").otherwise("pod_need").alias("need"),
        )
    )
    keys = per_job.select("key", "model", "gang", "need").unique("key", maintain_order=True)
    keys = keys.with_row_index("klass")
    klass = per_job.join(keys.select("key", "klass"), on="key", maintain_order="left")["klass"]
    arrival = jobs["arrival"].to_numpy().astype(np.int64)
    in_window = arrival >= lo
    ckpt = jobs["ckpt"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    need = np.where(
        jobs["open"].to_numpy(), np.inf, (jobs["e"].fill_null(0) - jobs["arrival"]).to_numpy()
    ).astype(np.float64)
    job_ids = jobs["job"].alias("job_id")
    pu = pods["units"].to_numpy().astype(np.int64)
    arrivals = np.flatnonzero(in_window).astype(np.int64)
    early = np.flatnonzero(~in_window).astype(np.int64)

    # ---- fixed work (high priority, and low priority without GPUs) and its events.
    # Events are numbered (seq) in the order: each allocation's start then its end,
    # allocation by allocation, then each sleep then its wake, sleep by sleep.
    fixed_ids = fixed["alloc_id"]
    f_units = fixed["units"].to_numpy().astype(np.int64)
    f_start = fixed["s"].to_numpy().astype(np.int64)
    f_end = fixed["e"].fill_null(kernel.BIG).to_numpy().astype(np.int64)
    f_high = (fixed["priority"] == "high").to_numpy()
    items = np.arange(fixed.height, dtype=np.int64)
    ends = f_end < hi
    start_seq = items + np.cumsum(ends) - ends  # ends before this allocation's start
    seq = fixed.height + int(ends.sum())
    # sleeps of high-priority allocations, clipped to the allocation and the window
    if isinstance(sleeps, Future):
        sleeps = awaited(sleeps)
    slept = sleeps.select(
        pl.col("alloc_id").cast(pl.String),
        pl.col("sleep_start").dt.epoch("us").alias("s"),
        pl.col("sleep_end").dt.epoch("us").alias("e"),
    ).join(
        fixed.select("alloc_id").with_row_index("item").with_columns(pl.col("item").cast(pl.Int64)),
        on="alloc_id",
        how="inner",
        maintain_order="left",
    )
    s_item = slept["item"].to_numpy().astype(np.int64)
    s_from = np.maximum(np.maximum(slept["s"].to_numpy(), lo), f_start[s_item]).astype(np.int64)
    s_to = np.minimum(slept["e"].to_numpy(), hi).astype(np.int64)
    ok = f_high[s_item] & (s_to > s_from) & (s_from < f_end[s_item])
    s_item, s_from, s_to = s_item[ok], s_from[ok], s_to[ok]
    wakes = (s_to < hi) & (s_to < f_end[s_item])
    sleep_seq = seq + np.arange(s_item.size, dtype=np.int64) + np.cumsum(wakes) - wakes
    wake_item = s_item[wakes]
    parts = [
        (np.maximum(f_start, lo), 2, start_seq, kernel.HP_START, items),
        (f_end[ends], 0, start_seq[ends] + 1, kernel.HP_END, items[ends]),
        (s_from, 0, sleep_seq, kernel.SLEEP, s_item),
        (s_to[wakes], 2, sleep_seq[wakes] + 1, kernel.WAKE, np.arange(wake_item.size)),
    ]
    ev_t, ev_o, ev_seq, ev_kind, ev_item = (
        np.concatenate([np.broadcast_to(np.asarray(p[k], np.int64), p[0].shape) for p in parts])
        for k in range(5)
    )
    order = np.lexsort((ev_seq, ev_o, ev_t))

    # eviction delays, one per wake, the same draws for every policy
    sigma = delay_sigma(options.eviction_delay_mean_s, options.eviction_delay_p95_s)
    mean = options.eviction_delay_mean_s
    draws = np.random.default_rng([options.seed, 7]).standard_normal(wake_item.size)
    mu = math.log(mean) - sigma * sigma / 2 if mean > 0 else 0.0
    delays = [0 if mean <= 0 else round(math.exp(mu + sigma * z) * 1e6) for z in draws.tolist()]
    # A delay or kill deadline past the window's length acts as that length (the
    # eviction falls after the end either way), and stays within int64.
    beyond = hi - lo + 1
    kill = min(round(options.kill_after_s * 1e6), beyond)
    delays = [min(d, beyond) for d in delays]

    static = dict(  # noqa: C408 (the kernel constructor's keywords)
        model=_ints(model),
        gpus=fleet.gpus,
        cpus=fleet.cpus,
        mem=fleet.memory,
        healthy=fleet.usable,
        group=_ints(group),
        group_off=_offsets([len(x) for x in group_members]),
        group_nodes=_ints([i for x in group_members for i in x]),
        model_off=_offsets([len(x) for x in model_members]),
        model_groups=_ints([g for x in model_members for g in x]),
        fv=fv,
        f_node=fixed["node"].to_numpy().astype(np.int64),
        f_whole=f_units // _U,
        f_fi=share_index(f_units),
        f_cpu=fixed["cpu"].to_numpy().astype(np.int64),
        f_mem=fixed["mem"].to_numpy().astype(np.int64),
        f_high=f_high.astype(np.bool_),
        f_out=np.arange(fixed.height) >= n_work,
        ev_t=ev_t[order],
        ev_o=ev_o[order],
        ev_seq=ev_seq[order],
        ev_kind=ev_kind[order],
        ev_item=ev_item[order],
        wake_item=wake_item.astype(np.int64),
        delays=_ints(delays),
        j_arrival=arrival,
        j_need=need,
        j_pod_off=_offsets(n_pods),
        j_gpus_u=jobs["gpus_u"].to_numpy().astype(np.int64),
        j_model=j_model,
        j_local=local.astype(np.bool_),
        j_ckpt=np.where(np.isnan(ckpt) | (ckpt <= 0), 0, np.round(ckpt * 1e6)).astype(np.int64),
        j_klass=klass.to_numpy().astype(np.int64),
        p_whole=pu // _U,
        p_frac=pu % _U,
        p_fi=share_index(pu),
        p_cpu=pods["cpu"].to_numpy().astype(np.int64),
        p_mem=pods["mem"].to_numpy().astype(np.int64),
        p_rec=pods["node"].to_numpy().astype(np.int64),
        arrivals=arrivals,
        c_model=keys["model"].to_numpy().astype(np.int64),
        c_gang=keys["gang"].to_numpy().astype(np.bool_),
        c_need=keys["need"].to_numpy().astype(np.int64),
        lo=lo,
        hi=hi,
        kill=kill,
        policy=_POLICY_CODES[options.policy],
    )
    names = _Names(
        node_ids=node_ids,
        fixed_ids=fixed_ids,
        job_ids=job_ids,
        early=early,
        in_window=in_window,
        n_classes=keys.height,
        n_models=len(model_names),
        n_fixed=fixed.height,
        n_wakes=int(wake_item.size),
        n_pods=int(pu.size),
        seq=seq + int(s_item.size + wakes.sum()),
        sleeps=int(s_item.size),
    )
    return PreparedReplay(static, names, options, start, end)


def _out_of_service(health: Health | None, node_ids: list[str], lo: int, hi: int) -> pl.DataFrame:
    """The health steps meeting [lo, hi) as fixed rows (the allocations' columns): low
    priority, whole GPUs, no CPU or memory; alloc_id ``out-of-service node@start``."""
    schema: dict[str, Any] = {
        "alloc_id": pl.String, "job_id": pl.String, "node_id": pl.String, "gpus": pl.Float64,
        "priority": pl.String, "s": pl.Int64, "e": pl.Int64, "ckpt": pl.Float64,
        "units": pl.Int64, "cpu": pl.Int64, "mem": pl.Int64,
    }  # fmt: skip
    if health is None or health.empty:
        return pl.DataFrame(schema=schema)
    from fleetaudit.whatif import harvest_kernel as kernel

    steps = health.steps_between(lo, hi).filter(pl.col("node_id").is_in(node_ids))
    return steps.select(
        pl.format("out-of-service {}@{}", "node_id", "start_us").alias("alloc_id"),
        pl.lit(None, dtype=pl.String).alias("job_id"),
        "node_id",
        pl.col("gpus_out").cast(pl.Float64).alias("gpus"),
        pl.lit("low").alias("priority"),
        pl.col("start_us").alias("s"),
        pl.when(pl.col("end_us") >= FOREVER_US)
        .then(pl.lit(kernel.BIG, dtype=pl.Int64))
        .otherwise(pl.col("end_us"))
        .alias("e"),
        pl.lit(None, dtype=pl.Float64).alias("ckpt"),
        (pl.col("gpus_out") * _U).alias("units"),
        pl.lit(0, dtype=pl.Int64).alias("cpu"),
        pl.lit(0, dtype=pl.Int64).alias("mem"),
    ).cast(schema)  # type: ignore[arg-type]


def _state(static: dict[str, Any], names: _Names) -> dict[str, Any]:
    """The fields of a fresh :class:`~fleetaudit.whatif.harvest_kernel.State`: every node
    empty and free, nothing running or waiting."""
    from fleetaudit.whatif import harvest_kernel as kernel

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
        lent=zeros(n), out=zeros(n), locked=zeros(n), lp_on=lp_on, lp_n=zeros(n), free_ver=zeros(n), bucket_of=full(n, -1),
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
        freed=zeros(n), freed_mark=zeros(n, np.bool_), dirty=zeros(names.n_classes),
        dirty_mark=zeros(names.n_classes, np.bool_), heap=heap, heap_n=zeros(1),
        at_start=ints(), w_forced=zeros(names.n_wakes, np.bool_),
        w_victims=zeros((names.n_wakes, 2)), victim_store=ints(),
        seg_job=ints(), seg_node=ints(), seg_start=ints(), seg_end=ints(), seg_pod=ints(),
        v_job=ints(), v_t=ints(), v_reason=ints(), v_lost=floats(), v_forced=ints(),
        l_item=ints(), l_start=ints(), l_end=ints(), cnt=cnt, lost=zeros(1, np.float64),
        bins=zeros(64), awake=zeros(d),
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
    health: Health | None = None,
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
        health: the fleet's health over time (GPUs out of service), or None.

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
    prepared = prepare_replay(nodes, allocations, sleeps, options, start, end, health)
    return run_replay(prepared, options.policy, progress)


def run_replay(
    prepared: PreparedReplay,
    policy: str,
    progress: Callable[[float], None] | None = None,
) -> HarvestResult:
    """Replay a prepared window under one victim policy (see :func:`replay_harvest`)."""
    from fleetaudit.whatif import harvest_kernel as kernel

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

    Running one tiny replay here, before several replays start, loads (or compiles) it
    once, before the first of them.
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


def _times(us: np.ndarray, none: int | None = None) -> pl.Series:
    """µs since the epoch as a naive Datetime("us") column; the value ``none`` (the
    kernel's -1 for "not yet") becomes null."""
    values = pl.Series(np.asarray(us, dtype=np.int64), dtype=pl.Int64)
    if none is not None:
        values = values.set(values == none, None)
    return values.cast(pl.Datetime("us"))


@dataclass(frozen=True)
class _Rows:
    """A replay's outcome as the kernel left it (indices into the ids), from which
    :class:`HarvestResult` builds its frames other than the jobs when one is read."""

    static: dict[str, Any]  # the prepared replay's arrays (shared, only read)
    out: dict[str, np.ndarray]  # the kernel's output lists as arrays, and per fixed allocation
    job_ids: pl.Series
    node_ids: pl.Series
    fixed_ids: pl.Series


def cnt_out(state: dict[str, Any]) -> int:
    """GPU-µs out of service that no work held (health intervals) in a finished replay."""
    from fleetaudit.whatif import harvest_kernel as kernel

    return int(state["cnt"][kernel.C_OUT])


def _result(
    static: dict[str, Any],
    state: dict[str, Any],
    names: _Names,
    options: HarvestOptions,
    start: datetime,
    end: datetime,
) -> HarvestResult:
    from fleetaudit.whatif import harvest_kernel as kernel

    hours = 1e6 * 3600
    window = static["hi"] - static["lo"]
    healthy = int(static["gpus"][static["healthy"]].sum()) * window - int(cnt_out(state))
    job_ids = names.job_ids.alias("job_id")
    node_ids = pl.Series("node_id", names.node_ids, dtype=pl.String)
    fixed_ids = names.fixed_ids.alias("alloc_id")
    need = static["j_need"]
    job_frame = pl.DataFrame(
        {
            "job_id": job_ids,
            "arrival": _times(static["j_arrival"]),
            "finish": _times(state["j_finish"], none=-1),
            "need_s": pl.Series(np.where(np.isinf(need), np.nan, need / 1e6)).fill_nan(None),
            "done_s": np.minimum(state["j_done"], need) / 1e6,
            "runs": state["j_runs"],
            "preempted": state["j_preempted"],
            "in_window": names.in_window,
            "resumed": state["j_resumed"],
        },
        schema={"job_id": pl.String, "arrival": pl.Datetime("us"), "finish": pl.Datetime("us"),
                "need_s": pl.Float64, "done_s": pl.Float64, "runs": pl.Int64,
                "preempted": pl.Int64, "in_window": pl.Boolean, "resumed": pl.Boolean},
    )  # fmt: skip
    lists = ("seg_job", "seg_pod", "seg_node", "seg_start", "seg_end", "v_job", "v_t",
             "v_reason", "v_forced", "l_item", "l_start", "l_end")  # fmt: skip
    out = {name: kernel.int_array(state[name]) for name in lists}
    out["v_lost"] = kernel.float_array(state["v_lost"])
    out["f_seen_start"], out["f_seen_end"] = state["f_seen_start"], state["f_seen_end"]
    rows = _Rows(static, out, job_ids, node_ids, fixed_ids)
    cnt = state["cnt"]
    return HarvestResult(
        policy=options.policy,
        seed=options.seed,
        start=to_utc(start),
        end=to_utc(end),
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
        rows=rows,
        overcommitted=int(cnt[kernel.C_OVER]),
        budget_hits=int(cnt[kernel.C_BUDGET]),
    )
