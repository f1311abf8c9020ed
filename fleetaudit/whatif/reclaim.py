"""Reclaimable capacity of a shape (SPEC §3 ``--reclaim``): what eviction would add, and its cost.

Contract:

- Candidates are the allocations active at t (``start_time <= t < end_time``)
  that are low priority or sleepable. High-priority work that is not a
  sleepable container is never touched.
- The target is the shape's instances with *every* candidate evicted: the
  predicate of :mod:`fleetaudit.model.shapes` on :func:`fleetaudit.model.occupancy.node_state`
  of the allocations minus the candidates, over the shape's window W (a
  candidate evicted at t no longer holds its node during W either).
  ``Reclaim.instances`` = target - the instances of the evaluation's slots,
  never below 0, and reported apart from usable capacity. The baseline is
  re-derived from ``evaluation.slots`` so that a count capped for display
  (``Evaluation.with_instances``) does not inflate it.
- Eviction units: a high-priority sleepable container alone (it is put to
  sleep and loses no work); otherwise a low-priority job, i.e. every active
  low-priority allocation sharing its ``job_id``, sleepable or not (a gang
  cannot keep running with a member gone; low-priority work is preemptible
  anyway, and only high priority sleeps in ``whatif harvesting`` too). A
  unit's allocations on nodes the shape cannot use are victims too: they add
  nothing but are lost all the same.
- Lost work of an allocation, in GPU-hours: 0 when put to sleep; else
  gpus x ((t - start_time) mod checkpoint_interval_s), or gpus x (t - start_time)
  when checkpoint_interval_s is null or 0 (counted in ``without_checkpoint``).
  A unit loses the sum of its allocations'. CPU-only work loses 0 GPU-hours.
- Victims: units in increasing lost work (tie: unit id) until the target is
  reached, then each chosen unit whose removal keeps the target is released,
  most expensive first, so no victim is charged that the target does not
  need. This is a cheap sufficient set, not a proven optimum (choosing the
  cheapest covering set is a knapsack-like problem).

Everything is exact integer arithmetic (micro-GPUs, micro-cores, micro-GiB,
microseconds), as in :mod:`fleetaudit.model.occupancy`, so ties and the target
comparison carry no float error.

Scale: only eligible nodes (the shape's model, healthy) that host a candidate
can change, and a unit changes only its own nodes. So each step re-derives
the slots of those nodes alone, exactly (the FFD of the remaining shares is
re-run and W's peak is swept over the node's own events, as occupancy does)
and updates the group sums incrementally; the rest of the fleet keeps the
evaluation's slots. A node whose slots do not rise even with all its
candidates evicted cannot help, and units touching only such nodes are not
tried first; should the predicate's rare non-monotonicity (FFD, or a
partly filled GPU that a share shape counts only on a node steady over W)
leave the target unreached without them, every unit is tried.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import polars as pl

from fleetaudit.core.times import epoch_us
from fleetaudit.model.capacity import (
    SHARE_UNITS,
    Health,
    Pod,
    micro_units,
    node_index,
    node_slots_at,
    packed_fills,
)
from fleetaudit.model.shapes import Evaluation, Shape, group_key

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

__all__ = ["Reclaim", "reclaimable"]

_US_PER_HOUR = 3_600 * 1_000_000


@dataclass(frozen=True)
class Reclaim:
    """What evicting low-priority and sleepable work would add for one shape at t.

    Attributes:
        instances: instances that eviction adds to the evaluation's (never below 0).
        lost_gpu_hours: the work the victims lose (sleeping containers lose none).
        victims: alloc_ids evicted or put to sleep, sorted.
        slept: victims that are high-priority sleepable containers (put to sleep,
            nothing lost).
        without_checkpoint: low-priority victims with no checkpoint_interval_s,
            whose loss is all their work since start.
    """

    instances: int
    lost_gpu_hours: float
    victims: tuple[str, ...]
    slept: int
    without_checkpoint: int

    def as_json(self) -> dict[str, Any]:
        """SPEC §3's ``reclaimable`` object, with the victim counts beside it.

        >>> Reclaim(3, 2 / 3, ("a4", "a6", "a8"), 2, 0).as_json()
        {'instances': 3, 'lost_gpu_hours': 0.666667, 'victims': 3, 'slept': 2, 'without_checkpoint': 0}
        """
        return {
            "instances": self.instances,
            # micro-GPU-hours is far below anything an operator acts on, and a
            # rounded figure keeps golden files stable across float formatting
            "lost_gpu_hours": round(self.lost_gpu_hours, 6),
            "victims": len(self.victims),
            "slept": self.slept,
            "without_checkpoint": self.without_checkpoint,
        }


# ------------------------------------------------------------------ per-node slots


# A row is one allocation overlapping W on a node: (whole GPUs, fractional
# micro-GPUs, micro-cores, micro-GiB, unit index). Tuples keep the hot loop cheap.
_Row = tuple[int, int, int, int, int]


@dataclass(frozen=True)
class _Node:
    """An eligible node that hosts a candidate: its capacity and its allocations over W."""

    gpus: int
    cpus: int  # micro-units; capacity.UNBOUNDED when unknown
    memory: int
    now: tuple[_Row, ...]  # active at t
    events: tuple[tuple[int, int, _Row], ...]  # (time, +1 start / -1 end, row) inside (t, t_end)
    group: int


def _node_slots(node: _Node, evicted: list[bool], pod: Pod) -> int:
    """Slots of ``pod`` on ``node`` with the ``evicted`` units gone (SPEC §2-3, exact).

    The occupancy of node_state for one node (at t with the shares packed FFD,
    the peak of each dimension over W), then the capacity model's slot count
    (:func:`fleetaudit.model.capacity.node_slots_at`), as shapes.node_slots counts it.
    """
    whole = cpus = memory = 0
    fracs: list[int] = []
    for w, f, c, m, unit in node.now:
        if not evicted[unit]:
            whole += w
            cpus += c
            memory += m
            if f:
                fracs.append(f)
    fills_now = packed_fills(fracs) if fracs else ()
    used_now = whole + len(fills_now)
    peak_gpus, peak_cpus, peak_memory = used_now, cpus, memory
    events = node.events
    i, n = 0, len(events)
    while i < n:
        time = events[i][0]
        # half-open intervals: read the state only after every change at this instant
        while i < n and events[i][0] == time:
            _, sign, (w, f, c, m, unit) = events[i]
            i += 1
            if evicted[unit]:
                continue
            whole += sign * w
            cpus += sign * c
            memory += sign * m
            if f:
                if sign > 0:
                    fracs.append(f)
                else:
                    fracs.remove(f)
        used = whole + len(packed_fills(fracs)) if fracs else whole
        if used > peak_gpus:
            peak_gpus = used
        peak_cpus = max(peak_cpus, cpus)
        peak_memory = max(peak_memory, memory)
    return node_slots_at(
        pod, (node.gpus, node.cpus, node.memory), used_now,
        (peak_gpus, peak_cpus, peak_memory), fills_now,
    )  # fmt: skip


# ---------------------------------------------------------------------- preparation


def _column(frame: pl.DataFrame, name: str, default: Any, dtype: PolarsDataType) -> pl.Expr:
    """An optional column, or its default when the frame lacks it."""
    if name in frame.columns:
        return pl.col(name)
    return pl.lit(default, dtype=dtype).alias(name)


def _flag(frame: pl.DataFrame, name: str) -> pl.Expr:
    """A boolean column that may arrive as text (CSV read without a schema)."""
    if name not in frame.columns:
        return pl.lit(False)
    if frame.schema[name] == pl.Boolean:
        return pl.col(name).fill_null(False)
    text = pl.col(name).cast(pl.String).str.to_lowercase().str.strip_chars()
    return text.is_in(["true", "t", "1", "yes", "y"]).fill_null(False)


@dataclass(frozen=True)
class _Units:
    """Eviction units, in greedy order (increasing lost work, then unit id)."""

    members: tuple[tuple[str, ...], ...]
    cost: tuple[int, ...]  # micro-GPU x µs
    nodes: tuple[tuple[str, ...], ...]  # the eligible nodes each unit touches, sorted
    slept: frozenset[str]
    without_checkpoint: frozenset[str]


def _candidates(allocations: pl.DataFrame, t: int) -> pl.DataFrame:
    """Active candidates at t: alloc_id, job_id, node_id, sleepable, gpus_u, lost_us, checkpointed.

    ``sleepable`` is true for the candidates put to sleep: high-priority ones only.
    """
    start = pl.col("start_time").dt.epoch("us")
    end = pl.col("end_time").dt.epoch("us")
    low = (pl.col("priority") == "low").fill_null(False)
    # only high-priority warm containers sleep, as in whatif harvesting; low-priority
    # work is preemptible anyway: sleepable or not, it is evicted with its job
    sleepable = _flag(allocations, "sleepable") & ~low
    checkpoint = micro_units(_column(allocations, "checkpoint_interval_s", None, pl.Float64))
    checkpointed = checkpoint.fill_null(0) > 0
    since = pl.lit(t, dtype=pl.Int64) - start
    return (
        allocations.lazy()
        .filter(
            (start <= t) & (end.is_null() | (end > t)),
            low | sleepable,
        )
        .select(
            pl.col("alloc_id").cast(pl.String),
            pl.coalesce(
                _column(allocations, "job_id", None, pl.String).cast(pl.String),
                pl.col("alloc_id").cast(pl.String),
            ).alias("job_id"),
            pl.col("node_id").cast(pl.String),
            sleepable.alias("sleepable"),
            micro_units(pl.col("gpus")).fill_null(0).alias("gpus_u"),
            # work since the last checkpoint; all work since start without one
            pl.when(sleepable)
            .then(0)
            .when(checkpointed)
            .then(since % checkpoint)
            .otherwise(since)
            .alias("lost_us"),
            checkpointed.alias("checkpointed"),
        )
        .sort("alloc_id")
        .collect()
    )


def _eviction_units(candidates: pl.DataFrame, eligible: list[str]) -> _Units:
    """Group candidates into units; drop units that touch no eligible node (they add nothing)."""
    sleepable = pl.col("sleepable")
    units = (
        candidates.lazy()
        .with_columns(
            # a sleepable container sleeps alone; a low-priority job is evicted whole
            pl.when(sleepable).then(pl.col("alloc_id")).otherwise(pl.col("job_id")).alias("uid"),
            (~sleepable).cast(pl.Int8).alias("kind"),
            # Int128: micro-GPU x µs of a long job overflows Int64; exact for ties
            (pl.col("gpus_u").cast(pl.Int128) * pl.col("lost_us")).alias("cost"),
        )
        .group_by("kind", "uid")
        .agg(
            pl.col("alloc_id").sort().alias("members"),
            pl.col("cost").sum(),
            pl.col("node_id")
            .filter(pl.col("node_id").is_in(eligible))
            .unique()
            .sort()
            .alias("nodes"),
        )
        .filter(pl.col("nodes").list.len() > 0)
        .sort("cost", "uid", "kind")
        .collect()
    )
    return _Units(
        members=tuple(tuple(m) for m in units["members"].to_list()),
        cost=tuple(units["cost"].to_list()),
        nodes=tuple(tuple(n) for n in units["nodes"].to_list()),
        slept=frozenset(candidates.filter(sleepable)["alloc_id"].to_list()),
        without_checkpoint=frozenset(
            candidates.filter(~sleepable & ~pl.col("checkpointed"))["alloc_id"].to_list()
        ),
    )


def _groups(
    evaluation: Evaluation, shape: Shape
) -> tuple[dict[str, int], dict[str, int], list[int]]:
    """Per eligible node: its group and its slots in the evaluation; then slots per group.

    Groups follow shapes.group_key: a switch or block domain (within a model), a
    model, or the node itself.
    """
    key = group_key(shape)
    columns = list(dict.fromkeys(["node_id", *key]))
    positions = [columns.index(c) for c in key]
    group_ids: dict[tuple[Any, ...], int] = {}
    group_of: dict[str, int] = {}
    slots_of: dict[str, int] = {}
    sums: list[int] = []
    for row in evaluation.slots.select(*columns, "slots").iter_rows():
        node_id, slots = row[0], int(row[-1] or 0)
        g = group_ids.setdefault(tuple(row[p] for p in positions), len(group_ids))
        if g == len(sums):
            sums.append(0)
        sums[g] += slots
        group_of[node_id] = g
        slots_of[node_id] = slots
    return group_of, slots_of, sums


def _nodes(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    touched: list[str],
    unit_of: dict[str, int],
    never: int,
    group_of: dict[str, int],
    t: int,
    t_end: int,
    health: Health | None = None,
) -> dict[str, _Node]:
    """The touched nodes with their allocations overlapping W = [t, t_end), and their GPUs
    out of service (health steps) as whole-GPU rows that no eviction removes."""
    start = pl.col("start_time").dt.epoch("us")
    end = pl.col("end_time").dt.epoch("us")
    gpus_u = micro_units(pl.col("gpus")).fill_null(0)
    rows = (
        allocations.lazy()
        .filter(
            pl.col("node_id").cast(pl.String).is_in(touched),
            # as occupancy: overlapping W, and a zero-length allocation is never active
            start < t_end,
            end.is_null() | ((end > t) & (end > start)),
        )
        .select(
            pl.col("node_id").cast(pl.String),
            pl.col("alloc_id").cast(pl.String),
            start.alias("start_us"),
            end.alias("end_us"),
            (gpus_u // SHARE_UNITS).alias("whole"),
            (gpus_u % SHARE_UNITS).alias("frac"),
            micro_units(pl.col("cpus")).fill_null(0).alias("cpus_u"),
            micro_units(_column(allocations, "memory_gib", None, pl.Float64))
            .fill_null(0)
            .alias("memory_u"),
        )
        .sort("node_id", "alloc_id")
        .collect()
    )
    now: dict[str, list[_Row]] = {n: [] for n in touched}
    events: dict[str, list[tuple[int, int, _Row]]] = {n: [] for n in touched}
    for node_id, alloc_id, s, e, whole, frac, cpus_u, memory_u in rows.iter_rows():
        row: _Row = (whole, frac, cpus_u, memory_u, unit_of.get(alloc_id, never))
        if s <= t:
            now[node_id].append(row)
        else:
            events[node_id].append((s, 1, row))
        if e is not None and e < t_end:
            events[node_id].append((e, -1, row))
    if health is not None:
        steps = health.steps_between(t, t_end).filter(pl.col("node_id").is_in(touched))
        for node_id, s, e, out, _whole in steps.iter_rows():
            row = (out, 0, 0, 0, never)
            if s <= t:
                now[node_id].append(row)
            else:
                events[node_id].append((s, 1, row))
            if e < t_end:
                events[node_id].append((e, -1, row))
    # capacity in units as the capacity model reads it (unknown cpus or memory: UNBOUNDED)
    capacity = node_index(
        nodes.with_columns(pl.col("node_id").cast(pl.String))
        .filter(pl.col("node_id").is_in(touched))
        .unique("node_id", keep="first", maintain_order=True)
    ).select("node_id", "gpus", "cpus_u", "memory_u")
    return {
        node_id: _Node(
            gpus=gpus,
            cpus=cpus_u,
            memory=memory_u,
            now=tuple(now[node_id]),
            events=tuple(sorted(events[node_id], key=lambda event: (event[0], event[1]))),
            group=group_of[node_id],
        )
        for node_id, gpus, cpus_u, memory_u in capacity.iter_rows()
    }


# --------------------------------------------------------------------------- search


class _Search:
    """Per-node slots and group sums under a changing set of evicted units.

    Private working state of one reclaimable() call: it mutates only itself.
    """

    def __init__(
        self,
        nodes: dict[str, _Node],
        units: _Units,
        sums: list[int],
        slots_of: dict[str, int],
        shape: Shape,
    ) -> None:
        self.nodes = nodes
        self.units = units
        self.pod = Pod.of(shape)
        self.k = shape.pods
        self.evicted = [False] * (len(units.members) + 1)  # the last: never evicted
        self.sums = list(sums)
        self.slots: dict[str, int] = {}
        for node_id, node in nodes.items():
            # start from this engine's own baseline so every delta is self-consistent
            slots = _node_slots(node, self.evicted, self.pod)
            self.sums[node.group] += slots - slots_of[node_id]
            self.slots[node_id] = slots
        self.instances = sum(s // self.k for s in self.sums)

    def _set(self, node_id: str, slots: int) -> None:
        group = self.nodes[node_id].group
        before = self.sums[group]
        self.sums[group] = before + slots - self.slots[node_id]
        self.instances += self.sums[group] // self.k - before // self.k
        self.slots[node_id] = slots

    def toggle(self, unit: int, evicted: bool) -> list[tuple[str, int]]:
        """Evict (or release) one unit; returns what undo() needs."""
        self.evicted[unit] = evicted
        undo = []
        for node_id in self.units.nodes[unit]:
            undo.append((node_id, self.slots[node_id]))
            self._set(node_id, _node_slots(self.nodes[node_id], self.evicted, self.pod))
        return undo

    def undo(self, unit: int, evicted: bool, undo: list[tuple[str, int]]) -> None:
        self.evicted[unit] = evicted
        for node_id, slots in reversed(undo):
            self._set(node_id, slots)

    def all_evicted(self) -> tuple[int, set[str]]:
        """Instances with every unit evicted, and the nodes that gain slots then (state unchanged)."""
        evicted = [True] * len(self.units.members) + [False]
        sums = list(self.sums)
        live = set()
        for node_id, node in self.nodes.items():
            slots = _node_slots(node, evicted, self.pod)
            sums[node.group] += slots - self.slots[node_id]
            if slots > self.slots[node_id]:
                live.add(node_id)
        return sum(s // self.k for s in sums), live

    def choose(self, target: int, order: Iterable[int]) -> list[int]:
        """Greedy: evict units in ``order`` until the target is reached."""
        chosen = []
        for unit in order:
            if self.instances >= target:
                break
            if not self.evicted[unit]:
                self.toggle(unit, True)
                chosen.append(unit)
        return chosen

    def release(self, target: int, chosen: list[int]) -> list[int]:
        """Release every chosen unit the target does not need, most expensive first."""
        kept = set(chosen)
        # chosen is in greedy order, so reversed is most expensive first (tie: larger id first)
        for unit in sorted(chosen, reverse=True):
            undo = self.toggle(unit, False)
            if self.instances >= target:
                kept.discard(unit)
            else:
                self.undo(unit, True, undo)
        return sorted(kept)


def _prepare(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    at: datetime,
    shape: Shape,
    evaluation: Evaluation,
    health: Health | None = None,
) -> tuple[_Search, int]:
    """The search state with nothing evicted, and the evaluation's uncapped instances."""
    t = epoch_us(at)
    t_end = epoch_us(at + timedelta(seconds=shape.duration_s)) if shape.duration_s else t + 1
    group_of, slots_of, sums = _groups(evaluation, shape)
    # the uncapped baseline: evaluation.instances may be capped for display (--max)
    baseline = sum(s // shape.pods for s in sums)
    units = _eviction_units(_candidates(allocations, t), list(group_of))
    unit_of = {alloc_id: u for u, allocs in enumerate(units.members) for alloc_id in allocs}
    touched = sorted({node_id for unit_nodes in units.nodes for node_id in unit_nodes})
    never = len(units.members)
    search = _Search(
        _nodes(nodes, allocations, touched, unit_of, never, group_of, t, t_end, health),
        units,
        sums,
        slots_of,
        shape,
    )
    return search, baseline


# ------------------------------------------------------------------------- public


def reclaimable(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    at: datetime,
    shape: Shape,
    evaluation: Evaluation,
    health: Health | None = None,
) -> Reclaim:
    """Instances that evicting low-priority and sleepable work at ``at`` adds, and its cost.

    Args:
        nodes: the nodes frame (node_id, gpu_model, gpus, cpus, memory_gib, ...).
        allocations: the allocations frame; not modified.
        at: the instant t (naive = UTC).
        shape: the shape; its duration is the window W.
        evaluation: :func:`fleetaudit.model.shapes.evaluate` of ``shape`` on
            ``node_state(nodes, allocations, at, duration)``; its per-node
            slots are the starting point and its eligible nodes the scope.
        health: the health the evaluation's state was built with (GPUs out of
            service stay out whatever is evicted), or None.

    Returns:
        A :class:`Reclaim`: the instances added (target - baseline, >= 0), the
        GPU-hours the chosen victims lose, and the victims.
    """
    search, baseline = _prepare(nodes, allocations, at, shape, evaluation, health)
    units = search.units
    n_units = len(units.members)
    target, live = search.all_evicted()
    chosen: list[int] = []
    if target > search.instances:
        useful = [u for u in range(n_units) if any(n in live for n in units.nodes[u])]
        chosen = search.choose(target, useful)
        if search.instances < target:
            # not monotone (FFD, steady-node shares): a "dead" node may drop in a partial state
            chosen = sorted(chosen + search.choose(target, range(n_units)))
        chosen = search.release(target, chosen)
    victims = tuple(sorted(a for u in chosen for a in units.members[u]))
    lost = sum(units.cost[u] for u in chosen)
    return Reclaim(
        instances=max(target - baseline, 0),
        lost_gpu_hours=lost / (SHARE_UNITS * _US_PER_HOUR),
        victims=victims,
        slept=sum(1 for a in victims if a in units.slept),
        without_checkpoint=sum(1 for a in victims if a in units.without_checkpoint),
    )
