"""Compaction replayed through a window with a migration budget (issue 19).

Pure functions over the store's ``nodes``, ``allocations`` and ``requests``
frames. Two by-time replays (:func:`fleetaudit.whatif.placement.simulate_replay`) run
on the same arrivals, the same policy and the same queue: one without
compaction, one where the one-instant search (:func:`fleetaudit.whatif.compaction.compact`)
runs on the current state at every tick and the longest affordable prefix of
its ledger is applied. Both are observed at the same ticks.

- Ticks: ``start + k * every`` inside [start, end); a tick runs after that
  instant's departures and arrivals. After a tick's moves the queue is retried
  on the nodes the moves emptied, so waiting work can start earlier.
- The replays: the window's demand as the record shows it
  (:func:`fleetaudit.whatif.placement.window_demand`: each request runs its recorded
  run time), under the queue discipline the store's calibration chose. The replay
  without compaction is the baseline: it holds the requests that find room on arrival
  until their recorded start, and the replay with compaction holds the same ones, so
  that the two differ by the moves alone.
- Budget: ``moves_per_hour`` counts GPUs moved (a share counts as its fraction),
  given as GPUs per hour or as a % of the fleet's healthy GPUs per hour;
  ``GPUs per hour * every / 1h`` per tick; an unused budget is not carried over.
  A sweep replays several budgets against the one baseline.
- Cut: the applied prefix is the longest prefix within the budget that ends
  where a node has just been emptied of GPU work or just filled (or the whole
  ledger). A prefix that stops half-way through emptying a node pays moves for
  nothing, so it is not applied. Every prefix of a ledger is valid.
- A move the engine's per-GPU layout cannot take (shares sit on GPUs in the
  engine, packed first-fit-decreasing in the search) ends the tick's prefix.
- Placement of arrivals: ``recorded`` (the default) puts a single-pod request
  on the node its recorded allocation (job_id = request_id) ran on when that
  node still has room, and best-fit otherwise (and for gangs); any policy of
  ``whatif placement`` can be given instead.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from fleetaudit.core.options import (
    PAPER_PARTIAL_REDUCTION_PCT,
    OverTimeOptions,
    budget_text,
    gpus_per_hour,
)
from fleetaudit.core.times import epoch_us, from_epoch_us
from fleetaudit.model import occupancy
from fleetaudit.model.capacity import Health, usable_expr
from fleetaudit.model.shapes import Shape, group_slots, json_number, node_slots, request_shape
from fleetaudit.whatif import compaction, placement
from fleetaudit.whatif.compaction import CompactionOptions, Migration, Move

__all__ = [
    "PAPER_PARTIAL_REDUCTION_PCT",
    "BudgetRun",
    "OverTimeOptions",
    "OverTimeResult",
    "Tick",
    "affordable_prefix",
    "compact_over_time",
]


@dataclass(frozen=True)
class Side:
    """The fleet at a tick: free and partial nodes, the shapes' instances, waiting requests."""

    free_nodes: int
    partial_nodes: int
    instances: tuple[int, ...]  # per shape, at the tick, without durations
    queued: int

    def as_json(self) -> dict[str, Any]:
        return {
            "free_nodes": self.free_nodes,
            "partial_nodes": self.partial_nodes,
            "instances": list(self.instances),
            "queued": self.queued,
        }


@dataclass(frozen=True)
class Tick:
    """One compaction round: the fleet without compaction, and with it before and after the moves."""

    at: datetime
    without: Side
    before: Side  # with compaction, as churn left it since the last round
    after: Side  # with compaction, after this round's moves
    ledger_moves: int  # moves the search proposed (it stops once past the budget)
    ledger_gpus: float
    moves: tuple[Move, ...]  # the applied prefix
    cut: str  # whole, node, budget (nothing affordable), refused (the engine refused a move), empty
    frame: pl.DataFrame | None = field(default=None, repr=False, compare=False)  # keep_frames

    @property
    def gpus_moved(self) -> float:
        return sum(m.gpus for m in self.moves)


class _Rounds:
    """Time-averaged figures over a run's ticks (mixed into the results below)."""

    ticks: tuple[Tick, ...]

    @property
    def partial_without(self) -> float:
        return _mean([t.without.partial_nodes for t in self.ticks])

    @property
    def partial_with(self) -> float:
        """Time-averaged: each round counts its state before and after the moves equally."""
        return _mean([(t.before.partial_nodes + t.after.partial_nodes) / 2 for t in self.ticks])

    @property
    def partial_reduction_pct(self) -> float | None:
        base = self.partial_without
        if not self.ticks or base == 0:
            return None
        return 100.0 * (self.partial_with - base) / base

    @property
    def free_without(self) -> float:
        return _mean([t.without.free_nodes for t in self.ticks])

    @property
    def free_with(self) -> float:
        return _mean([(t.before.free_nodes + t.after.free_nodes) / 2 for t in self.ticks])


@dataclass(frozen=True)
class BudgetRun(_Rounds):
    """The replay with compaction under one budget, observed at every tick.

    ``value`` and ``unit`` are the budget as given (``pct``: a % of the fleet's healthy
    GPUs per hour; ``gpus``: GPUs per hour); ``gpus_per_hour`` and ``pct_per_hour``
    state it both ways.
    """

    value: float
    unit: str
    gpus_per_hour: float
    pct_per_hour: float
    ticks: tuple[Tick, ...]
    migration: Migration
    started: int
    failed: int
    result: placement.ReplayResult = field(repr=False, compare=False)
    final: pl.DataFrame = field(repr=False, compare=False)

    @property
    def given(self) -> str:
        return budget_text(self.value, self.unit)

    @property
    def gpus_moved(self) -> float:
        return sum(t.gpus_moved for t in self.ticks)

    def budget_json(self) -> dict[str, Any]:
        return {
            "given": self.given,
            "gpus_per_hour": round(self.gpus_per_hour, 4),
            "pct_of_gpus_per_hour": round(self.pct_per_hour, 5),
        }


@dataclass(frozen=True)
class OverTimeResult(_Rounds):
    """Both replays observed at every tick, and what compaction changed.

    ``base`` is the replay without compaction (the baseline: ``discipline``, the
    record's holds); ``runs`` the replays with compaction, one per budget (a sweep
    holds several), ``run`` the one reported in full (a sweep's nearest to its
    target), whose ticks, moves and counts the other fields repeat.
    """

    start: datetime
    end: datetime
    shapes: tuple[Shape, ...]
    ticks: tuple[Tick, ...]
    migration: Migration  # over every applied move (freed_gpus: not tracked over time, 0)
    start_probability: tuple[tuple[float | None, float | None, int], ...]  # without, with, arrived
    earlier: dict[str, Any]
    arrived: int
    recorded_node: int  # arrivals with a recorded node (policy ``recorded``)
    started: tuple[int, int]  # without, with
    failed: tuple[int, int]
    seconds: float
    final: pl.DataFrame = field(repr=False)  # the work active at the window's end, with compaction
    discipline: str = "kubernetes"
    fleet_gpus: int = 0
    base: placement.ReplayResult | None = field(default=None, repr=False, compare=False)
    runs: tuple[BudgetRun, ...] = field(default=(), repr=False, compare=False)
    run: BudgetRun | None = field(default=None, repr=False, compare=False)
    target_reduction_pct: float = PAPER_PARTIAL_REDUCTION_PCT


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


# ------------------------------------------------------------------ the prefix


def affordable_prefix(moves: Sequence[Move], budget: float, allocations: pl.DataFrame,
                      nodes: pl.DataFrame) -> tuple[int, str]:  # fmt: skip
    """How many leading moves of a ledger to apply within ``budget`` GPUs, and why it stops.

    The longest prefix whose GPUs fit the budget and that ends where a node has
    just been emptied of GPU work, or just filled (its allocations' GPUs reach
    its GPUs), or at the ledger's end. Returns (count, cut): ``whole`` when the
    ledger fits, ``node`` when cut at such a boundary, ``budget`` when no
    boundary is affordable (count 0), ``empty`` for an empty ledger.
    """
    if not moves:
        return 0, "empty"
    capacity = dict(
        zip(
            nodes["node_id"].cast(pl.String).to_list(),
            nodes["gpus"].cast(pl.Float64).fill_null(0.0).to_list(),
            strict=True,
        )
    )
    held: dict[str, list[float]] = {}  # node -> [GPU-holding allocations, GPUs]
    for node_id, gpus in allocations.select(
        pl.col("node_id").cast(pl.String), pl.col("gpus").cast(pl.Float64).fill_null(0.0)
    ).iter_rows():
        if gpus > 0:
            entry = held.setdefault(node_id, [0, 0.0])
            entry[0] += 1
            entry[1] += gpus
    spent = 0.0
    best = 0
    for i, m in enumerate(moves):
        spent += m.gpus
        if spent > budget + 1e-9:
            break
        source = held.setdefault(m.source, [0, 0.0])
        target = held.setdefault(m.destination, [0, 0.0])
        source[0] -= 1
        source[1] -= m.gpus
        target[0] += 1
        target[1] += m.gpus
        emptied = source[0] == 0
        filled = target[1] >= capacity.get(m.destination, math.inf) - 1e-9
        if emptied or filled or i == len(moves) - 1:
            best = i + 1
    if best == len(moves):
        return best, "whole"
    return best, ("node" if best else "budget")


# ------------------------------------------------------------------ observing


def _side(nodes: pl.DataFrame, view: placement.ReplayView, frame: pl.DataFrame, at: datetime,
          shapes: Sequence[Shape]) -> Side:  # fmt: skip
    free, partial = view.gpu_use()
    instances: tuple[int, ...] = ()
    if shapes:
        state = occupancy.node_state(nodes, frame, at)
        instances = tuple(_instances(state, s) for s in shapes)
    return Side(free, partial, instances, view.queued)


def _instances(state: pl.DataFrame, shape: Shape) -> int:
    """:func:`fleetaudit.model.shapes.evaluate`'s instances, without the GPU ledger it adds."""
    return int(group_slots(node_slots(state, shape), shape)["instances"].sum())


def moved(frame: pl.DataFrame, moves: Sequence[Move]) -> pl.DataFrame:
    """``frame`` (a replay's work at a tick) after ``moves``: each moved row on its last
    destination. The replay's view lists the same rows, in the same order, after the
    moves (a move changes where work runs, not its GPUs, CPUs or memory), so this
    spares building the frame from the replay's state again."""
    if not moves:
        return frame
    where = {m.alloc_id: m.destination for m in moves}
    return frame.with_columns(
        pl.col("alloc_id").replace_strict(where, default=pl.col("node_id"), return_dtype=pl.String)
        .alias("node_id")
    )  # fmt: skip


# ------------------------------------------------------------------ the replay


def compact_over_time(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    requests: pl.DataFrame,
    start: datetime,
    end: datetime,
    shapes: Sequence[Shape] = (),
    options: CompactionOptions | None = None,
    over_time: OverTimeOptions | None = None,
    keep_frames: bool = False,
    demand: placement.Demand | None = None,
    hold: Mapping[str, int] | None = None,
    health: Health | None = None,
) -> OverTimeResult:
    """Replay [start, end) without compaction and with compaction rounds, on the same arrivals.

    Args:
        nodes, allocations, requests: the store's frames (allocations: at least
            those active in the window; requests: all, those submitted in the
            window arrive).
        start, end: the window (naive = UTC).
        shapes: the objective's shapes (also observed at every tick).
        options: the one-instant search's options (used at every tick).
        over_time: ticks, budget (or budgets to sweep), policy and queue discipline.
        keep_frames: keep each round's input state (``Tick.frame``: the work
            active at the tick, before its moves), to check the applied moves.
        demand: the window's demand, when the caller read it already
            (:func:`fleetaudit.whatif.placement.window_demand`).
        hold: the holds both replays use (a baseline's on another fleet, so that an
            edited fleet is compared like for like); None: the replay without
            compaction decides them, as a baseline does.
        health: the fleet's health over time: both replays follow it (see
            :class:`fleetaudit.whatif.placement.Demand`), and each round and each
            observation sees the nodes as they stand at its tick
            (:func:`fleetaudit.model.occupancy.nodes_at`); None: the demand's.

    Returns:
        The :class:`OverTimeResult`.
    """
    started = time.perf_counter()
    options = options or CompactionOptions()
    ot = over_time or OverTimeOptions()
    ot.check()
    shapes = tuple(shapes)
    if demand is None:
        demand = placement.window_demand(nodes, allocations, requests, start, end, health=health)
    elif demand.health is None and health is not None:
        demand = replace(demand, health=health)
    health = demand.health
    discipline = ot.queue or placement.DISCIPLINES[0]
    start_us, end_us = epoch_us(start), epoch_us(end)
    every_us = round(ot.every_s * 1e6)
    ticks = list(range(start_us, end_us, every_us))
    fleet_gpus = int(nodes.filter(usable_expr(nodes))["gpus"].cast(pl.Int64).fill_null(0).sum())
    observed = shapes[: ot.observe_shapes]
    # A round applies at most the budget, and the search's ledger within it is the
    # full search's: it may stop past it. Rounds run in this process (a round is
    # short, and starting worker processes every round costs more than it saves).
    base_round = replace(options, jobs=1, count_instances=False)

    without: dict[int, Side] = {}

    def observe(view: placement.ReplayView, t: int) -> None:
        at = from_epoch_us(t)
        frame = view.allocations(t)
        without[t] = _side(occupancy.nodes_at(nodes, frame, at, health), view, frame, at, observed)

    def replay(on_tick: Any, hold: Any) -> placement.ReplayResult:
        return placement.replay_demand(
            nodes, demand, discipline, policy=ot.policy, hold=hold, preempt=ot.preempt,
            seed=ot.seed, step_pct=5.0, on_tick=on_tick, ticks=ticks,
        )  # fmt: skip

    base = replay(observe, "record" if hold is None else hold)
    runs: list[BudgetRun] = []
    for value, unit in ot.budgets():
        per_hour = gpus_per_hour(value, unit, fleet_gpus)
        budget = per_hour * ot.every_s / 3600.0
        per_round = replace(base_round, stop_after_gpus=budget)
        rounds: list[Tick] = []
        last: list[placement.ReplayView] = []

        def compact_tick(view: placement.ReplayView, t: int, budget: float = budget,
                         per_round: CompactionOptions = per_round, rounds: list[Tick] = rounds,
                         last: list[placement.ReplayView] = last) -> None:  # fmt: skip
            if not last:
                last.append(view)
            at = from_epoch_us(t)
            frame = view.allocations(t)
            standing = occupancy.nodes_at(nodes, frame, at, health)  # out of service: out of scope
            before = _side(standing, view, frame, at, observed)
            result = compaction.compact(standing, frame, at, shapes, per_round)
            count, cut = affordable_prefix(result.moves, budget, frame, standing)
            applied: list[Move] = []
            for m in result.moves[:count]:
                if not view.move(m.alloc_id, m.destination):
                    cut = "refused"
                    break
                applied.append(m)
            after = before
            if applied:
                after = _side(standing, view, moved(frame, applied), at, observed)
            rounds.append(
                Tick(
                    at,
                    before,
                    before,
                    after,
                    len(result.moves),
                    sum(m.gpus for m in result.moves),
                    tuple(applied),
                    cut,
                    frame if keep_frames else None,
                )  # fmt: skip
            )

        comp = replay(compact_tick, base.holds if hold is None else hold)
        full = tuple(
            Tick(
                r.at,
                without[epoch_us(r.at)],
                r.before,
                r.after,
                r.ledger_moves,
                r.ledger_gpus,
                r.moves,
                r.cut,
                r.frame,
            )  # fmt: skip
            for r in rounds
        )
        runs.append(
            BudgetRun(
                value=value,
                unit=unit,
                gpus_per_hour=per_hour,
                pct_per_hour=100.0 * per_hour / fleet_gpus if fleet_gpus else 0.0,
                ticks=full,
                migration=compaction._migration([m for r in full for m in r.moves], 0, options),
                started=comp.started,
                failed=comp.failed,
                result=comp,
                final=last[0].allocations(end_us) if last else allocations.head(0),
            )  # fmt: skip
        )
    run = _nearest(runs, ot.target_reduction_pct) if ot.sweep else runs[0]
    prefer = demand.recorded_nodes if ot.policy == "recorded" else {}
    return OverTimeResult(
        start=start,
        end=end,
        shapes=shapes,
        ticks=run.ticks,
        migration=run.migration,
        start_probability=_start_probability(requests, start, end, shapes, base, run.result),
        earlier=_earlier(base.waits, run.result.waits),
        arrived=base.arrived,
        recorded_node=sum(1 for rid in base.waits["request_id"].to_list() if rid in prefer),
        started=(base.started, run.started),
        failed=(base.failed, run.failed),
        seconds=time.perf_counter() - started,
        final=run.final,
        discipline=discipline,
        fleet_gpus=fleet_gpus,
        base=base,
        runs=tuple(runs),
        run=run,
        target_reduction_pct=ot.target_reduction_pct,
    )


def _nearest(runs: Sequence[BudgetRun], target: float) -> BudgetRun:
    """The run whose reduction of partial nodes is nearest ``target`` (ties: the smaller budget,
    as given first)."""

    def distance(run: BudgetRun) -> float:
        reduction = run.partial_reduction_pct
        return math.inf if reduction is None else abs(reduction - target)

    return min(runs, key=distance)


def _start_probability(
    requests: pl.DataFrame,
    start: datetime,
    end: datetime,
    shapes: Sequence[Shape],
    base: placement.ReplayResult,
    comp: placement.ReplayResult,
) -> tuple[tuple[float | None, float | None, int], ...]:
    """Per shape: the share of its requests arriving in the window that started in it."""
    if not shapes:
        return ()
    arrived = requests.filter(
        (pl.col("submit_time") >= start) & (pl.col("submit_time") < end)
    ).with_columns(pl.col("request_id").cast(pl.String))
    kinds = [request_shape(row) for row in arrived.iter_rows(named=True)]
    ids = arrived["request_id"].to_list()
    began = {
        name: set(w.filter(pl.col("start_time").is_not_null())["request_id"].to_list())
        for name, w in (("base", base.waits), ("comp", comp.waits))
    }
    by_shape: dict[Shape, list[str]] = {}
    for rid, kind in zip(ids, kinds, strict=True):
        if kind is not None:
            by_shape.setdefault(kind, []).append(rid)
    out: list[tuple[float | None, float | None, int]] = []
    for shape in shapes:
        mine = by_shape.get(shape, [])
        if not mine:
            out.append((None, None, 0))
            continue
        out.append(
            (
                sum(rid in began["base"] for rid in mine) / len(mine),
                sum(rid in began["comp"] for rid in mine) / len(mine),
                len(mine),
            )
        )
    return tuple(out)


def _earlier(base: pl.DataFrame, comp: pl.DataFrame) -> dict[str, Any]:
    """Requests that started earlier (or only) with compaction, later, and by how much."""
    both = base.select("request_id", pl.col("start_time").alias("b")).join(
        comp.select("request_id", pl.col("start_time").alias("c")), on="request_id", how="inner"
    )
    delta = (pl.col("b") - pl.col("c")).dt.total_microseconds() / 3.6e9
    started = both.filter(pl.col("b").is_not_null() & pl.col("c").is_not_null()).with_columns(
        delta.alias("h")
    )
    earlier = started.filter(pl.col("h") > 0)["h"]
    later = started.filter(pl.col("h") < 0)["h"]
    return {
        "requests": earlier.len(),
        "hours_total": round(float(earlier.sum()), 4),
        "hours_mean": None if earlier.is_empty() else round(float(earlier.mean()), 4),  # type: ignore[arg-type]
        "hours_max": None if earlier.is_empty() else round(float(earlier.max()), 4),  # type: ignore[arg-type]
        "only_with_compaction": both.filter(
            pl.col("b").is_null() & pl.col("c").is_not_null()
        ).height,
        "later_requests": later.len(),
        "later_hours_total": round(abs(float(later.sum())), 4),
        "only_without_compaction": both.filter(
            pl.col("b").is_not_null() & pl.col("c").is_null()
        ).height,
    }


def over_time_json(result: OverTimeResult, over_s: float, ot: OverTimeOptions) -> dict[str, Any]:
    """The ``over_time`` object of the ``fleetaudit.compaction/1`` document."""
    reduction = result.partial_reduction_pct
    run = result.run
    return {
        "start": from_epoch_us(epoch_us(result.start)).isoformat(),
        "end": from_epoch_us(epoch_us(result.end)).isoformat(),
        "over_s": over_s,
        "every_s": ot.every_s,
        # the budget both ways: GPUs per hour (moves_per_hour, as before), and a share
        "moves_per_hour": None if run is None else round(run.gpus_per_hour, 4),
        "budget_unit": "gpus",
        "budget": None if run is None else run.budget_json(),
        "fleet_gpus": result.fleet_gpus,
        "policy": ot.policy,
        "queue": result.discipline,
        "shapes": [s.as_json() for s in result.shapes],
        "observed_shapes": min(len(result.shapes), ot.observe_shapes),
        "ticks": [
            {
                "at": t.at.isoformat(),
                "without": t.without.as_json(),
                "before": t.before.as_json(),
                "after": t.after.as_json(),
                "ledger_moves": t.ledger_moves,
                "ledger_gpus": json_number(t.ledger_gpus),
                "moves": len(t.moves),
                "gpus_moved": json_number(t.gpus_moved),
                "cut": t.cut,
            }
            for t in result.ticks
        ],
        "partial_nodes": {
            "without": round(result.partial_without, 3),
            "with": round(result.partial_with, 3),
            "reduction_pct": None if reduction is None else round(reduction, 2),
            "paper_reduction_pct": PAPER_PARTIAL_REDUCTION_PCT,
        },
        "free_nodes": {
            "without": round(result.free_without, 3),
            "with": round(result.free_with, 3),
        },
        "start_probability": [
            {"shape": s.as_json(), "arrived": n, "without": a, "with": b}
            for s, (a, b, n) in zip(result.shapes, result.start_probability, strict=True)
        ],
        "earlier": result.earlier,
        "requests": {
            "arrived": result.arrived,
            "with_recorded_node": result.recorded_node,
            "started": {"without": result.started[0], "with": result.started[1]},
            "failed": {"without": result.failed[0], "with": result.failed[1]},
        },
        "migration": {
            **result.migration.as_json(),
            "gpu_hours": round(result.migration.pause_gpu_hours, 4),
        },
        "moves": [{**m.as_json(), "at": t.at.isoformat()} for t in result.ticks for m in t.moves],
        "sweep": None
        if not ot.sweep
        else {
            "target_reduction_pct": result.target_reduction_pct,
            "nearest": None if run is None else run.given,
            "budgets": [
                {
                    **r.budget_json(),
                    "partial_nodes": {
                        "with": round(r.partial_with, 3),
                        "reduction_pct": _round(r.partial_reduction_pct, 2),
                    },
                    "free_nodes": {"with": round(r.free_with, 3)},
                    "moves": sum(len(t.moves) for t in r.ticks),
                    "gpus_moved": json_number(r.gpus_moved),
                    "migration_gpu_hours": round(r.migration.pause_gpu_hours, 4),
                    "started": r.started,
                    "failed": r.failed,
                }
                for r in result.runs
            ],
        },
        "seconds": round(result.seconds, 3),
    }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def window(at: datetime, over_s: float) -> tuple[datetime, datetime]:
    """The window [at - over, at]."""
    return at - timedelta(seconds=over_s), at
