"""``fleetaudit paper``: read the ASI side tables, compute the paper's figures and fleetaudit's own.

Orchestration only: the paper's figures are :mod:`fleetaudit.model.paper`, fleetaudit's
are :mod:`fleetaudit.model.denominators` (physical GPU-hours) and :mod:`fleetaudit.model.shapes`
(the reference shapes and the 128/256-GPU gangs), on the native tables that the
same ingest wrote. The JSON document is :func:`fleetaudit.outputs.contract.paper_document`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from fleetaudit.api import StoreOptions, load_health, reading
from fleetaudit.core.errors import UsageError
from fleetaudit.inputs.asi_trace import FORMAT, PAPER_DAYS
from fleetaudit.model import denominators as den
from fleetaudit.model import occupancy
from fleetaudit.model import paper as paper_mod
from fleetaudit.model.capacity import Health
from fleetaudit.model.shapes import evaluate, make_shape
from fleetaudit.model.store import Store

PAPER_SCHEMA = "fleetaudit.paper/1"
_PART_HOURS = 6  # the record and the allocations are read this many trace hours at a time
_LEDGER_KEYS = ("idle", "usable", "fragment", "cpu_memory", "other")


@dataclass(frozen=True)
class PaperOptions:
    """What ``fleetaudit paper`` covers.

    ``days``: the trace days (inclusive); None is the paper week 109-115 where
    the store holds any of it, else every day it holds. ``fleet``: also compute
    fleetaudit's own figures (the native ledgers) for the same window.
    """

    days: tuple[int, int] | None = None
    fleet: bool = True


@dataclass(frozen=True)
class PaperResult:
    """The paper's figures and fleetaudit's beside them, over one window."""

    trace_start: datetime
    days: tuple[int, int]
    t_first: int
    t_last: int
    figures: paper_mod.PaperFigures
    fleet_allocation: dict[str, dict[str, Any]]  # model -> allocation_rate_high, allocation_rate
    fleet_instants: tuple[datetime, ...]  # where the shapes were evaluated
    fleet_idle: dict[tuple[int, int], dict[str, float]]  # shape -> ledger means
    fleet_gangs: dict[tuple[str, int], dict[str, float]]  # (model, gang) -> instances means
    notes: tuple[str, ...]

    @property
    def start(self) -> datetime:
        return self.trace_start + timedelta(hours=self.t_first)

    @property
    def end(self) -> datetime:
        return self.trace_start + timedelta(hours=self.t_last + 1)


def _window(
    trace: dict[str, Any], days: tuple[int, int] | None
) -> tuple[tuple[int, int], int, int]:
    t_min, t_max = int(trace["t_min"]), int(trace["t_max"])
    if days is None:
        week = (PAPER_DAYS[0] * 24, PAPER_DAYS[1] * 24 + 23)
        if week[0] <= t_max and week[1] >= t_min:
            days = PAPER_DAYS
        else:
            days = (t_min // 24, t_max // 24)
    lo, hi = max(days[0] * 24, t_min), min(days[1] * 24 + 23, t_max)
    if lo > hi:
        raise UsageError(
            f"--days {days[0]}-{days[1]}: the store holds trace days "
            f"{t_min // 24}-{t_max // 24} only"
        )
    return days, lo, hi


def build_paper(store_options: StoreOptions, options: PaperOptions = PaperOptions()) -> PaperResult:
    """The paper view over the window of ``options``."""
    with reading(store_options) as store:
        if "asi_trace" not in store.table_names():
            raise UsageError(
                f"{store_options.db}: the store holds no {FORMAT} trace; "
                f"run `fleetaudit ingest --format {FORMAT} ROOT` first"
            )
        rows = store.query("asi_trace_window")
        if rows.height == 0 or rows["t_min"][0] is None:
            raise UsageError(f"{store_options.db}: the {FORMAT} ingest holds no server-hour")
        trace = rows.row(0, named=True)
        days, lo, hi = _window(trace, options.days)
        # a few trace hours at a time (never across a day), so that memory holds one
        # part's server-hours and allocations whatever the window's length (every figure
        # sums per hour)
        parts = _parts(lo, hi)
        records = (store.query("paper_server_hours", lo=a, hi=b) for a, b in parts)
        histogram = store.query("paper_cpu_gpu_ratio", lo=lo, hi=hi)
        figures = paper_mod.paper_figures_by_parts(records, histogram, lo, hi)
        trace_start: datetime = trace["trace_start"]
        notes: list[str] = []
        fleet_allocation: dict[str, dict[str, Any]] = {}
        instants: list[datetime] = []
        idle: dict[tuple[int, int], dict[str, float]] = {}
        gangs: dict[tuple[str, int], dict[str, float]] = {}
        nodes = store.query("nodes") if options.fleet else None
        health = None
        if nodes is not None:
            nodes, health = load_health(
                store, nodes, trace_start + timedelta(hours=lo), trace_start + timedelta(hours=hi + 1)
            )
        if nodes is not None and nodes.height:
            snapshot_hours = [
                t for t in range(lo, hi + 1) if t % 24 in paper_mod.SLOT_HOURS
            ] or [hi]
            if snapshot_hours == [hi]:
                notes.append(
                    "the window has no hour 10: fleetaudit's shapes are evaluated at its last hour"
                )
            instants = [trace_start + timedelta(hours=t) for t in snapshot_hours]
            fleet_allocation, idle, gangs = _fleet_figures(
                store, nodes, trace_start, parts, snapshot_hours, health
            )
    return PaperResult(
        trace_start=trace_start,
        days=(lo // 24, hi // 24),
        t_first=lo,
        t_last=hi,
        figures=figures,
        fleet_allocation=fleet_allocation,
        fleet_instants=tuple(instants),
        fleet_idle=idle,
        fleet_gangs=gangs,
        notes=tuple(notes),
    )


def _parts(lo: int, hi: int) -> list[tuple[int, int]]:
    """Trace hours ``[lo, hi]`` as parts ``[a, b]`` of at most _PART_HOURS within one day.

    >>> _parts(20, 33)
    [(20, 23), (24, 29), (30, 33)]
    """
    return [
        (h, min(h + _PART_HOURS - 1, day_end))
        for day in range(lo // 24, hi // 24 + 1)
        for day_end in [min(hi, day * 24 + 23)]
        for h in range(max(lo, day * 24), day_end + 1, _PART_HOURS)
    ]


def _fleet_figures(
    store: Store,
    nodes: pl.DataFrame,
    trace_start: datetime,
    parts: list[tuple[int, int]],
    snapshot_hours: list[int],
    health: Health | None = None,
) -> tuple[
    dict[str, dict[str, Any]],
    dict[tuple[int, int], dict[str, float]],
    dict[tuple[str, int], dict[str, float]],
]:
    """fleetaudit's allocation rates per model over the window, and :func:`_fleet_shapes` at
    ``snapshot_hours``, from the native tables, one part of the window (trace hours
    ``[a, b]``) at a time: the GPU-hours add up over the parts, and each snapshot is
    evaluated on the allocations of the part holding it."""
    totals: dict[str, list[float]] = {}  # model -> healthy, allocated high, allocated
    idle: dict[tuple[int, int], dict[str, float]] = {}
    gangs: dict[tuple[str, int], dict[str, float]] = {}
    for a, b in parts:
        start = trace_start + timedelta(hours=a)
        end = trace_start + timedelta(hours=b + 1)
        # in the store's order: the physical GPU-hours are whole GPU-microseconds summed
        # in int64, which no order changes; each snapshot reads its own allocations, in
        # alloc_id order (sorting only those is much cheaper than the part's)
        allocations = store.query("paper_allocations_window", start=start, end=end, scenario=None)
        physical = den.physical(nodes, allocations, start, end, health=health)
        for row in physical.iter_rows(named=True):
            acc = totals.setdefault(row["gpu_model"], [0.0, 0.0, 0.0])
            acc[0] += row["healthy_gpu_hours"]
            acc[1] += row["allocated_high_gpu_hours"]
            acc[2] += row["allocated_gpu_hours"]
        del allocations  # before the snapshot's, and the next part's
        for t in snapshot_hours:
            if a <= t <= b:
                at = trace_start + timedelta(hours=t)
                active = store.query("paper_allocations_at", at=at, scenario=None)
                _fleet_shapes(nodes, active, at, len(snapshot_hours), idle, gangs, health)
    fleet_allocation = {
        model: {
            "allocation_rate_high": high / healthy if healthy else None,
            "allocation_rate": every / healthy if healthy else None,
        }
        for model, (healthy, high, every) in totals.items()
    }
    return fleet_allocation, idle, gangs


def _fleet_shapes(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    at: datetime,
    n_instants: int,
    idle: dict[tuple[int, int], dict[str, float]],
    gangs: dict[tuple[str, int], dict[str, float]],
    health: Health | None = None,
) -> None:
    """Adds to ``idle`` fleetaudit's ledger of each reference shape and to ``gangs`` the
    gangs' instances at ``at``, each divided by ``n_instants`` (the mean over all the
    window's instants, of which this is one)."""
    pooled = "|".join(paper_mod.ASW_MODELS)
    state = occupancy.node_state(nodes, allocations, at, health=health)
    for g, c in paper_mod.REFERENCE_SHAPES:
        ledger = evaluate(state, make_shape(None, g, g, c / g, 0.0, "node")).ledger
        acc = idle.setdefault((g, c), dict.fromkeys(_LEDGER_KEYS, 0.0))
        stranded = ledger.stranded or {}
        acc["idle"] += ledger.idle / n_instants
        acc["usable"] += ledger.usable / n_instants
        acc["fragment"] += stranded.get("fragment", 0.0) / n_instants
        acc["cpu_memory"] += stranded.get("cpu_memory", 0.0) / n_instants
        acc["other"] += (
            stranded.get("interval", 0.0) + stranded.get("topology", 0.0)
        ) / n_instants
    for model in (*paper_mod.ASW_MODELS, paper_mod.HETEROGENEOUS):
        models = pooled if model == paper_mod.HETEROGENEOUS else model
        if not state.filter(pl.col("gpu_model").is_in(models.split("|"))).height:
            continue
        for size in paper_mod.GANGS:
            acc = gangs.setdefault((model, size), {"switch": 0.0, "any": 0.0})
            for locality in ("switch", "any"):
                shape = make_shape(models, size, 1, paper_mod.CPU_PER_SLOT, 0.0, locality)
                acc[locality] += evaluate(state, shape).instances / n_instants
