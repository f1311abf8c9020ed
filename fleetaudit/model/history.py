"""History of the schedulability predicate (SPEC §3 ``--history``): start probability and waits.

Contract:

- The instants are ``end - j x step`` for j = 0, 1, ... while not before
  ``end - span``, in ascending order: the window's end is always an instant,
  and when ``span`` is a multiple of ``step`` the first one is ``end - span``
  (12h at 1h steps: 13 instants, both ends included).
- Each instant t is evaluated exactly as ``shapes.evaluate(node_state(nodes,
  allocations, t, D), shape)`` would, D being the shape's duration: free
  capacity over the window [t, t + D) (or {t} without a duration).
- p_start = share of instants with instances >= 1. The wait at an instant is the
  time to the first instant, itself included, with instances >= 1; none within
  the window: censored, longer than any deadline. Wait p50/p90 by nearest
  rank (the ceil(q x n)-th smallest wait, censored waits sorting last); a
  percentile that lands on a censored wait is None. p_within_deadline = share
  of instants whose wait is at most the deadline (None without a deadline).
- :func:`calibrate` compares those predicted waits with the real waits of
  requests of the shape that were submitted within the window and started.

How :func:`evaluate_history` gets there without evaluating every instant from
scratch (:func:`evaluate_history_naive` does that, and is the reference the
tests compare against, series for series):

1. Only nodes eligible for the shape matter; :func:`shapes.node_slots` on an
   idle fleet names them, so the rule cannot drift from the predicate's.
2. :func:`occupancy.occupancy_timeline` sweeps the allocations' starts and ends
   once and gives each node's occupancy (FFD of shares included, and the share
   fills for a share shape) on every constant segment of the whole span.
3. Segments become changes at sample indices: the occupancy at instant i is the
   segment holding t_i; the largest occupancy over [t_i, t_i + D) is a range
   maximum over the segments that window meets, which is a contiguous run of
   a node's segments whose ends move forward with i. The maxima are evaluated
   only where that run changes, by a sparse-table range maximum processed one
   level at a time (O(segments) memory).
4. Each (node, sample index where its state changes) gets its slots from the
   capacity model the predicate uses (:func:`fleetaudit.model.capacity.slots_array`,
   the array form of the rule :func:`shapes.node_slots` applies to frames):
   slots = min(GPU, CPU, memory slots) over the free capacity in W; a share
   shape's partly filled GPUs count by :func:`fleetaudit.model.capacity.share_room`
   of the fills at t (computed once per distinct fills), only where nothing
   starts in W and the node is not over-committed.
5. Slot deltas are summed per group (:func:`shapes.group_key`: domain and model
   for ``switch``, block domain and model for ``block``, model for ``any``, node
   for ``node``) with a cumulative sum;
   instances per group are floor(slots / k); their deltas summed per sample
   index and cumulated give the fleet's instances at every instant.

Every path is exact and vectorised, shares and durations included; the only
Python loop is occupancy's FFD over the fractional parts. Node ids are assumed
unique in ``nodes`` (the store's key).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from fleetaudit.core.errors import UsageError
from fleetaudit.core.times import epoch_us, from_epoch_us
from fleetaudit.model.capacity import (
    SHARE_UNITS,
    Health,
    Pod,
    free_array,
    micro_units,
    node_index,
    room_counts,
    share_room,
    slots_array,
)
from fleetaudit.model.occupancy import block_domains, node_state, occupancy_timeline, switch_domains
from fleetaudit.model.shapes import Shape, evaluate, group_key, node_slots

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

__all__ = [
    "MAX_INSTANTS",
    "Calibration",
    "History",
    "calibrate",
    "evaluate_history",
    "evaluate_history_naive",
    "nearest_rank",
]

_ONE_US = timedelta(microseconds=1)
_MICRO = 1_000_000
_QUANTILES = ((50, 100), (90, 100))  # p50, p90 as exact fractions for ceil(q x n)
_POWERS_OF_TWO = 1 << np.arange(62, dtype=np.int64)
MAX_INSTANTS = 10_000_000
"""A budget: more instants than this is a usage error (a step far too short for the span)."""
_SERIES_SCHEMA: dict[str, PolarsDataType] = {
    "instant": pl.Datetime("us"),
    "instances": pl.Int64,
    "wait_s": pl.Float64,
}


# ------------------------------------------------------------------------- results


@dataclass(frozen=True)
class History:
    """The predicate of one shape over a window of instants (SPEC §3).

    Attributes:
        instants: how many instants were evaluated.
        p_start: share of instants with instances >= 1.
        wait_p50_s, wait_p90_s: nearest-rank wait percentiles in seconds;
            None where the percentile falls on a censored wait.
        p_within_deadline: share of instants whose wait is at most the
            deadline; None without a deadline.
        series: instant (Datetime("us"), naive UTC), instances (Int64),
            wait_s (Float64; null = censored), one row per instant, ascending.
            Left out of ``==`` (compare it with ``DataFrame.equals``).
    """

    instants: int
    p_start: float
    wait_p50_s: float | None
    wait_p90_s: float | None
    p_within_deadline: float | None
    series: pl.DataFrame = field(repr=False, compare=False)

    def as_json(self) -> dict[str, Any]:
        """The ``history`` object of SPEC §3's JSON."""
        return {
            "p_start": self.p_start,
            "wait_p50_s": self.wait_p50_s,
            "wait_p90_s": self.wait_p90_s,
            "p_within_deadline": self.p_within_deadline,
        }


@dataclass(frozen=True)
class Calibration:
    """Predicted waits against the real waits of requests that started (issue 3, item 5).

    Attributes:
        started: requests of the shape submitted within the history's window
            (first to last instant, inclusive) that have a start_time.
        actual_wait_p50_s, actual_wait_p90_s: nearest-rank percentiles of
            start_time - submit_time, in seconds (None when nothing started).
        predicted_wait_p50_s, predicted_wait_p90_s: nearest-rank percentiles
            of the history's wait at each such request's submit time (the wait
            at the first instant at or after it); None where the percentile
            falls on a censored wait, or when nothing started.
    """

    started: int
    actual_wait_p50_s: float | None
    actual_wait_p90_s: float | None
    predicted_wait_p50_s: float | None
    predicted_wait_p90_s: float | None
    # requests of the shape the sample leaves out, by reason (see LEFT_OUT)
    left_out: dict[str, int] = field(default_factory=dict)
    # the duration classes whose requests the sample holds, each predicted under its own
    durations: tuple[float | None, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "started": self.started,
            "actual_wait_p50_s": self.actual_wait_p50_s,
            "actual_wait_p90_s": self.actual_wait_p90_s,
            "predicted_wait_p50_s": self.predicted_wait_p50_s,
            "predicted_wait_p90_s": self.predicted_wait_p90_s,
            "left_out": dict(self.left_out),
            "durations_s": list(self.durations),
        }

    def left_out_text(self) -> str:
        """The requests left out, with why, in one phrase ('' when none are)."""
        return ", ".join(f"{n:,} {LEFT_OUT[why]}" for why, n in self.left_out.items() if n)


LEFT_OUT = {
    "not_started": "still queued at the end (no real wait yet)",
    "other_duration": "of other duration classes (their own shapes)",
    "outside_window": "submitted outside the history's instants",
}
"""Why a request of the shape submitted in the history's window is not in the sample."""


# ------------------------------------------------------------------ public: entry


def evaluate_history(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    shape: Shape,
    end: datetime,
    span: timedelta,
    step: timedelta,
    deadline: timedelta | None = None,
    health: Health | None = None,
) -> History:
    """The shape's instances at every step of the window ending at ``end``, and its waits.

    Args:
        nodes: the nodes frame (node_id, gpu_model, gpus, cpus, memory_gib,
            switch_id, health).
        allocations: the allocations frame (as :mod:`fleetaudit.model.occupancy` reads it).
        shape: the shape (its duration, if any, sets each instant's window).
        end: the last instant (naive = UTC), usually ``--at``.
        span: the window's length (``--history``), >= 0.
        step: the time between instants (``--step``), > 0.
        deadline: ``--deadline``, or None.
        health: the fleet's health over time: GPUs out of service at an instant take
            no work then (:func:`fleetaudit.model.occupancy.node_state`), or None.

    Returns:
        The :class:`History`; equal, series included, to
        :func:`evaluate_history_naive` on the same arguments.

    Raises:
        UsageError: when ``step`` is not positive or ``span``/``deadline`` is negative.

    Example:
        >>> from fleetaudit.model.shapes import make_shape
        >>> nodes = pl.DataFrame({"node_id": ["n1"], "gpu_model": ["H20"], "gpus": [8],
        ...     "cpus": [64.0], "memory_gib": [None], "switch_id": [None], "health": ["healthy"]},
        ...     schema_overrides={"memory_gib": pl.Float64, "switch_id": pl.String})
        >>> t0 = datetime(2026, 1, 1)
        >>> allocations = pl.DataFrame({"alloc_id": ["a"], "node_id": ["n1"], "gpus": [4.0],
        ...     "cpus": [8.0], "memory_gib": [None], "priority": ["high"],
        ...     "start_time": [t0 + timedelta(hours=1)], "end_time": [t0 + timedelta(hours=3)]},
        ...     schema_overrides={"memory_gib": pl.Float64})
        >>> h = evaluate_history(nodes, allocations, make_shape("H20", 8), t0 + timedelta(hours=4),
        ...     timedelta(hours=4), timedelta(hours=1), deadline=timedelta(hours=1))
        >>> h.series["instances"].to_list(), h.series["wait_s"].to_list()
        ([1, 0, 0, 1, 1], [0.0, 7200.0, 3600.0, 0.0, 0.0])
        >>> h.as_json()
        {'p_start': 0.6, 'wait_p50_s': 0.0, 'wait_p90_s': 7200.0, 'p_within_deadline': 0.8}
    """
    grid, step_us = _instants(end, span, step, deadline)
    instances = _swept_instances(nodes, allocations, shape, grid, step_us, health)
    return history_of(grid, step_us, instances, deadline)


def evaluate_history_naive(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    shape: Shape,
    end: datetime,
    span: timedelta,
    step: timedelta,
    deadline: timedelta | None = None,
    health: Health | None = None,
) -> History:
    """The reference for :func:`evaluate_history`: ``node_state`` and ``shapes.evaluate`` per instant.

    Same arguments and result; one full snapshot per instant, so only for
    small fleets and tests.
    """
    grid, step_us = _instants(end, span, step, deadline)
    duration = _duration(shape)
    counts = [
        evaluate(node_state(nodes, allocations, from_epoch_us(t), duration, health), shape).instances
        for t in grid.tolist()
    ]
    return history_of(grid, step_us, np.asarray(counts, dtype=np.int64), deadline)


def calibrate(
    history: History, requests: pl.DataFrame, left_out: dict[str, int] | None = None
) -> Calibration:
    """Compare the history's predicted waits with the real waits of requests that started.

    Args:
        history: the shape's :class:`History`.
        requests: requests of that shape only (the caller filters), with
            submit_time and start_time (Datetime; naive = UTC; a null
            start_time is still queued and is left out, and counted).
        left_out: requests the caller left out already, by reason (:data:`LEFT_OUT`).

    Returns:
        The :class:`Calibration`. A start_time before its submit_time counts
        as a wait of 0.

    Example:
        >>> t0 = datetime(2026, 1, 1)
        >>> series = pl.DataFrame({"instant": [t0, t0 + timedelta(hours=1)],
        ...     "instances": [0, 1], "wait_s": [3600.0, 0.0]},
        ...     schema_overrides={"instant": pl.Datetime("us")})
        >>> history = History(2, 0.5, 0.0, 3600.0, None, series)
        >>> requests = pl.DataFrame({"submit_time": [t0, t0 + timedelta(minutes=30)],
        ...     "start_time": [t0 + timedelta(hours=2), t0 + timedelta(hours=1)]})
        >>> calibrate(history, requests).as_json()  # doctest: +NORMALIZE_WHITESPACE
        {'started': 2, 'actual_wait_p50_s': 1800.0, 'actual_wait_p90_s': 7200.0,
         'predicted_wait_p50_s': 0.0, 'predicted_wait_p90_s': 3600.0,
         'left_out': {'not_started': 0, 'outside_window': 0}, 'durations_s': []}
    """
    return replace(calibrate_classes([(None, history, requests)], left_out), durations=())


def calibrate_classes(
    classes: list[tuple[float | None, History, pl.DataFrame]],
    left_out: dict[str, int] | None = None,
) -> Calibration:
    """:func:`calibrate` over the requests of several duration classes at once, each
    predicted by its own class's history ``(class, history, requests)``: one sample of
    real waits, one of predicted waits, and the left-outs of all of them."""
    counts = {"not_started": 0, "outside_window": 0, **(left_out or {})}
    actual: list[float] = []
    predicted: list[float | None] = []
    durations: list[float | None] = []
    for duration, history, requests in classes:
        got = _waits(history, requests)
        counts["not_started"] += got[2]
        counts["outside_window"] += got[3]
        if got[0]:
            durations.append(duration)
        actual += got[0]
        predicted += got[1]
    actual_p50, actual_p90 = (nearest_rank(list(actual), q, d) for q, d in _QUANTILES)
    predicted_p50, predicted_p90 = (nearest_rank(predicted, q, d) for q, d in _QUANTILES)
    return Calibration(
        len(actual), actual_p50, actual_p90, predicted_p50, predicted_p90, counts,
        tuple(durations),
    )  # fmt: skip


def _waits(
    history: History, requests: pl.DataFrame
) -> tuple[list[float], list[float | None], int, int]:
    """The real and predicted waits of the requests that started within the history's
    instants; and how many were left out as not started, and as outside the instants."""
    series = history.series
    instants = series["instant"].dt.epoch("us").to_numpy()
    waits = series["wait_s"].to_numpy()  # NaN where censored
    submit = pl.col("submit_time").dt.epoch("us")
    frame = requests.select(
        submit.alias("submit_us"), pl.col("start_time").dt.epoch("us").alias("start_us")
    )
    not_started = int(frame["start_us"].null_count())
    frame = frame.filter(pl.col("start_us").is_not_null())
    if len(instants) == 0:
        return [], [], not_started, frame.height
    inside = (pl.col("submit_us") >= int(instants[0])) & (pl.col("submit_us") <= int(instants[-1]))
    started = frame.filter(inside)
    submit_us = started["submit_us"].to_numpy()
    actual = np.maximum(started["start_us"].to_numpy() - submit_us, 0) / _MICRO
    predicted = waits[np.searchsorted(instants, submit_us, side="left")]
    return actual.tolist(), _censored_as_none(predicted), not_started, frame.height - started.height


def nearest_rank(values: list[float | None], numerator: int, denominator: int) -> float | None:
    """The ceil(q x n)-th smallest value, q = numerator / denominator; None sorts last (censored).

    Returns None for no values, or when the rank lands on a None.

    >>> nearest_rank([30.0, None, 10.0, 20.0], 50, 100), nearest_rank([30.0, None, 10.0], 90, 100)
    (20.0, None)
    """
    n = len(values)
    if n == 0:
        return None
    rank = max(1, -(-numerator * n // denominator))  # exact ceil, no float q
    finite = sorted(v for v in values if v is not None)
    return finite[rank - 1] if rank <= len(finite) else None


# --------------------------------------------------------------- instants, summary


def _duration(shape: Shape) -> timedelta | None:
    """The window length node_state gets for the shape (timedelta rounds to 1 µs)."""
    return timedelta(seconds=shape.duration_s) if shape.duration_s else None


def _instants(
    end: datetime, span: timedelta, step: timedelta, deadline: timedelta | None
) -> tuple[np.ndarray, int]:
    """The instants in µs, ascending, anchored at ``end``; and the step in µs."""
    if step <= timedelta(0):
        raise UsageError(f"--step: {step} is not a positive duration")
    if span < timedelta(0):
        raise UsageError(f"--history: {span} is negative")
    if deadline is not None and deadline < timedelta(0):
        raise UsageError(f"--deadline: {deadline} is negative")
    step_us = step // _ONE_US
    count = span // step + 1
    if count > MAX_INSTANTS:
        raise UsageError(
            f"--step: {step} over {span} gives {count:,} instants, more than "
            f"{MAX_INSTANTS:,}; use a longer step"
        )
    end_us = epoch_us(end)
    return end_us - step_us * np.arange(count - 1, -1, -1, dtype=np.int64), step_us


def _censored_as_none(waits: np.ndarray) -> list[float | None]:
    return [None if w != w else float(w) for w in waits.tolist()]  # NaN != NaN


def history_of(
    grid: np.ndarray, step_us: int, instances: np.ndarray, deadline: timedelta | None
) -> History:
    """Waits, percentiles and shares from the instances at each instant."""
    n = len(grid)
    position = np.arange(n, dtype=np.int64)
    # the first instant at or after each one that can start an instance (n: none)
    starts_at = np.where(instances >= 1, position, n)
    next_start = np.minimum.accumulate(starts_at[::-1])[::-1]
    censored = next_start == n
    wait_us = (next_start - position) * step_us
    wait_s = np.where(censored, np.nan, wait_us / _MICRO)
    series = pl.DataFrame(
        {
            "instant": pl.Series(grid).cast(pl.Datetime("us")),
            "instances": instances.astype(np.int64),
            "wait_s": pl.Series(wait_s, nan_to_null=True),
        },
        schema=_SERIES_SCHEMA,
    )
    waits = _censored_as_none(wait_s)
    within = None
    if deadline is not None:
        within = int(np.sum(~censored & (wait_us <= deadline // _ONE_US))) / n
    return History(
        instants=n,
        p_start=int(np.sum(instances >= 1)) / n,
        wait_p50_s=nearest_rank(waits, *_QUANTILES[0]),
        wait_p90_s=nearest_rank(waits, *_QUANTILES[1]),
        p_within_deadline=within,
        series=series,
    )


# ------------------------------------------------------------------ the fast path


def _state_nodes(nodes: pl.DataFrame) -> pl.DataFrame:
    """Nodes with node_id as String and domain, as node_state gives them, and block_domain,
    as node_slots adds it, by node_id."""
    state = nodes.with_columns(
        pl.col("node_id").cast(pl.String),
        switch_domains(nodes),
    )
    return state.with_columns(block_domains(state)).sort("node_id")


def _eligible_nodes(nodes: pl.DataFrame, shape: Shape) -> pl.DataFrame:
    """The nodes the shape may use, by node_id: node_slots' own filter on an idle fleet."""
    idle = nodes.select(
        "node_id",
        "gpu_model",
        "health",
        "domain",
        pl.col("gpus").cast(pl.Int64).alias("free_gpus"),
        pl.col("gpus").cast(pl.Int64).alias("free_gpus_window"),
        pl.col("cpus").cast(pl.Float64).alias("free_cpus_window"),
        pl.col("memory_gib").cast(pl.Float64).alias("free_memory_gib_window"),
        pl.lit([], dtype=pl.List(pl.Float64)).alias("share_fills"),
    )
    keep = node_slots(idle, shape)["node_id"]
    return nodes.filter(pl.col("node_id").is_in(keep.implode()))


def _merged_unique(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The sorted distinct values of two sorted arrays.

    A stable sort merges the two runs in linear time; np.unique would hash
    (numpy 2) or fully sort tens of millions of keys.
    """
    merged = np.sort(np.concatenate([first, second]), kind="stable")
    if len(merged) == 0:
        return merged
    return merged[np.append(True, merged[1:] != merged[:-1])]


def range_max(values: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Row-wise maxima of ``values[first[q]:last[q] + 1]`` for every query q.

    A sparse table (level l holds the maxima of 2^l consecutive rows) built one
    level at a time, answering the queries of that level (two overlapping
    blocks cover any run) before the next level replaces it: O(rows) memory.
    """
    out = np.empty((len(first), values.shape[1]), dtype=values.dtype)
    if len(first) == 0:
        return out
    # floor(log2(length)), exactly, for any length
    level = np.searchsorted(_POWERS_OF_TWO, last - first + 1, side="right") - 1
    table = values
    for lvl in range(int(level.max()) + 1):
        width = 1 << lvl
        if lvl:
            table = np.maximum(table[: -(width // 2)], table[width // 2 :])
        pick = np.flatnonzero(level == lvl)
        if len(pick):
            out[pick] = np.maximum(table[first[pick]], table[last[pick] - width + 1])
    return out


def _swept_instances(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    shape: Shape,
    grid: np.ndarray,
    step_us: int,
    health: Health | None = None,
) -> np.ndarray:
    """Instances at each instant of ``grid`` (µs), by the sweep of the module docstring."""
    n = len(grid)
    t0, t_last = int(grid[0]), int(grid[-1])
    duration = _duration(shape)
    window_us = duration // _ONE_US if duration else 0
    eligible = _eligible_nodes(_state_nodes(nodes), shape)
    if eligible.height == 0:
        return np.zeros(n, dtype=np.int64)
    hi = t_last + max(window_us, 1)
    timeline = occupancy_timeline(
        eligible,
        allocations,
        from_epoch_us(t0),
        from_epoch_us(hi),
        share_fills=shape.is_share,
        health=health,
    )
    node = timeline["node_id"].to_physical().cast(pl.Int64).to_numpy()
    start = timeline["time"].dt.epoch("us").to_numpy()
    occupied = np.empty((timeline.height, 3), dtype=np.int64)
    # GPUs out of service take no work: slots read the GPUs occupied or out of service
    held = "gpus_held" if "gpus_held" in timeline.columns else "gpus_used"
    occupied[:, 0] = timeline[held].to_numpy()
    occupied[:, 1:] = timeline.select(micro_units("cpus_used"), micro_units("memory_used")).to_numpy()
    fills = timeline["share_fills"] if shape.is_share else None
    del timeline
    # (node, sample index) keys order as one int64: node x stride + index.
    stride = n + 1

    if not window_us:
        keys, now_at = _instant_changes(node, start, t0, step_us, n, stride)
        peak = occupied[now_at]
    elif fills is None:
        # whole-GPU slots read only the window (free GPUs at t feed the
        # ledger's interval, not slots), so the window's changes suffice
        keys, peak = _window_changes(node, start, occupied, t0, step_us, n, stride, window_us, hi)
        now_at = np.zeros(len(keys), dtype=np.int64)
    else:
        # a share shape also reads the free GPUs and the fills at t itself
        key_now, now_rows = _instant_changes(node, start, t0, step_us, n, stride)
        key_win, window_peak = _window_changes(
            node, start, occupied, t0, step_us, n, stride, window_us, hi
        )
        keys = _merged_unique(key_now, key_win)
        now_at = now_rows[np.searchsorted(key_now, keys, side="right") - 1]
        peak = window_peak[np.searchsorted(key_win, keys, side="right") - 1]
        del key_now, now_rows, key_win, window_peak
    used_now = occupied[now_at, 0] if fills is not None or not window_us else peak[:, 0]
    del node, start, occupied

    # A change whose state equals the node's previous one changes nothing.
    row_node = keys // stride
    compared = [row_node, used_now, peak[:, 0], peak[:, 1], peak[:, 2]]
    if fills is not None:
        compared.append(now_at)  # the fills' segment: fills may differ at equal counts
    changed = np.ones(len(keys), dtype=bool)
    for column in compared:  # column by column: numpy reduces short rows slowly
        changed[1:] |= column[1:] != column[:-1]
    del compared
    keys, row_node, now_at, used_now, peak = (
        keys[changed],
        row_node[changed],
        now_at[changed],
        used_now[changed],
        peak[changed],
    )
    slots = _slots(eligible, shape, row_node, used_now, peak, fills, now_at)
    return _fleet_instances(eligible, shape, keys, row_node, slots, stride, n)


def _instant_changes(
    node: np.ndarray, start: np.ndarray, t0: int, step_us: int, n: int, stride: int
) -> tuple[np.ndarray, np.ndarray]:
    """The keys where a node's occupancy at t_i changes, and the segment it reads there.

    Instant i reads the segment holding t_i: the last one starting at or
    before it. A segment starting after the last instant is read by none.
    """
    first_sample = np.minimum(-((t0 - start) // step_us), n)  # ceil((start - t0) / step)
    key = node * stride + first_sample
    last_of_run = np.append(key[1:] != key[:-1], True) & (first_sample < n)
    rows = np.flatnonzero(last_of_run)
    return key[rows], rows


def _window_changes(
    node: np.ndarray,
    start: np.ndarray,
    occupied: np.ndarray,
    t0: int,
    step_us: int,
    n: int,
    stride: int,
    window_us: int,
    hi: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The keys where a node's largest occupancy over [t_i, t_i + D) changes, and its value.

    Segment j, [start_j, end_j), meets the window of instant i for i in
    [lo_j, hi_j]. Both bounds rise with j within a node, so the segments one
    window meets are a run [first, last] of rows, and the run only changes at
    some lo_j or hi_j + 1: the candidate keys.
    """
    end = np.append(start[1:], hi)
    end[np.append(node[1:] != node[:-1], True)] = hi
    key_hi = node * stride + np.minimum((end - 1 - t0) // step_us, n - 1)
    del end
    key_lo = node * stride + np.maximum((start - window_us - t0) // step_us + 1, 0)
    leaves = key_hi + 1
    keys = _merged_unique(key_lo, leaves[leaves % stride < n])
    del leaves
    first = np.searchsorted(key_hi, keys, side="left")
    del key_hi
    last = np.searchsorted(key_lo, keys, side="right") - 1
    del key_lo
    return keys, range_max(occupied, first, last)


def _slots(
    eligible: pl.DataFrame,
    shape: Shape,
    row_node: np.ndarray,
    used_now: np.ndarray,
    peak: np.ndarray,
    fills: pl.Series | None,
    now_at: np.ndarray,
) -> np.ndarray:
    """Slots of each (node, change) row: the capacity model's count
    (:func:`fleetaudit.model.capacity.slots_array`) on the node's free capacity over W.

    A share shape's partly filled GPUs take pods by
    :func:`fleetaudit.model.capacity.share_room` of the fills at t, computed once per
    distinct fills (millions of rows, a few hundred distinct fills), and only
    where nothing starts in W and the node is not over-committed.
    """
    index = node_index(eligible)
    if not index["node_id"].equals(eligible["node_id"].cast(pl.String)):
        raise AssertionError("history: eligible nodes are not in node_id order")
    capacity = index["gpus"].to_numpy()[row_node]
    free_window = np.maximum(capacity - peak[:, 0], 0)
    pod = Pod.of(shape)
    room = None
    if fills is not None and pod.share:
        codes = fills.rank("dense").cast(pl.Int64).to_numpy()
        distinct = (
            pl.DataFrame({"code": codes, "fills": fills})
            .unique("code", keep="first")
            .sort("code")
        )
        room_of_code = np.zeros(int(codes.max(initial=0)) + 1, dtype=np.int64)
        for code, values in distinct.iter_rows():
            room_of_code[code] = share_room(pod.share, [round(f * SHARE_UNITS) for f in values])
        counts = room_counts(free_array(capacity, used_now), free_window, used_now, capacity)
        room = np.where(counts, room_of_code[codes[now_at]], 0)
    return slots_array(
        pod,
        free_window,
        free_array(index["cpus_u"].to_numpy()[row_node], peak[:, 1]),
        free_array(index["memory_u"].to_numpy()[row_node], peak[:, 2]),
        room,
    )["slots"]


def _fleet_instances(
    eligible: pl.DataFrame,
    shape: Shape,
    keys: np.ndarray,
    row_node: np.ndarray,
    slots: np.ndarray,
    stride: int,
    n: int,
) -> np.ndarray:
    """Fleet instances per sample from each node's slots at its change keys."""
    previous = np.zeros_like(slots)
    previous[1:] = np.where(row_node[1:] == row_node[:-1], slots[:-1], 0)
    group_of_node = (
        eligible.select(pl.struct(group_key(shape)).rank("dense").cast(pl.Int64) - 1)
        .to_series()
        .to_numpy()
    )
    sample = keys % stride
    changes = (
        pl.DataFrame(
            {"group": group_of_node[row_node], "sample": sample, "delta": slots - previous}
        )
        .filter(pl.col("delta") != 0)
        .group_by("group", "sample")
        .agg(pl.col("delta").sum())
        .sort("group", "sample")
        .with_columns(pl.col("delta").cum_sum().over("group").alias("slots"))
        .with_columns((pl.col("slots") // shape.pods).alias("instances"))
        .with_columns(
            (pl.col("instances") - pl.col("instances").shift(1, fill_value=0).over("group")).alias(
                "instance_delta"
            )
        )
        .group_by("sample")
        .agg(pl.col("instance_delta").sum())
    )
    per_sample = np.zeros(n, dtype=np.int64)
    per_sample[changes["sample"].to_numpy()] = changes["instance_delta"].to_numpy()
    return np.cumsum(per_sample)
