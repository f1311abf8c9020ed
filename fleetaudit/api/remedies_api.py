"""``fleetaudit whatif remedies``: every remedy judged on the same demand as the recorded fleet.

Orchestration only: it reads the store, makes the calibrated baseline
(:func:`fleetaudit.api.placement_api.make_baseline`), and evaluates each fleet edit
(:mod:`fleetaudit.whatif.remedies`) with the same engines as the recorded fleet:
the report's schedulable denominator and the calibrated replay with the baseline's
holds. Compaction is one more remedy (:func:`fleetaudit.whatif.compaction.compact` at
sampled instants, :func:`fleetaudit.whatif.compaction_over_time.compact_over_time`
over the window). Sizing bisects replays; prices turn the rows into money.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from fleetaudit.api import (
    StoreOptions,
    data_notes,
    load_frames,
    load_health,
    reading,
    record_whatif_run,
    resolve_at,
    save_scenario,
    writing,
)
from fleetaudit.api.placement_api import (
    Baseline,
    make_baseline,
    recorded_discipline,
    replay_gpus,
    suggested_discipline,
)
from fleetaudit.api.prices_api import read_prices
from fleetaudit.api.report_api import place_picks
from fleetaudit.core.errors import UsageError
from fleetaudit.core.options import (
    HOURS_PER_MONTH,
    REMEDIES_MAX_ADD_FACTOR,
    RemediesRun,
)
from fleetaudit.core.parallel import map_processes
from fleetaudit.core.times import iso
from fleetaudit.model import denominators as den
from fleetaudit.model import occupancy
from fleetaudit.model.capacity import Health, usable_expr
from fleetaudit.model.demand import window_demand as demand_shapes
from fleetaudit.model.money import Prices, fleet_cost
from fleetaudit.model.shapes import CAUSES, Shape
from fleetaudit.whatif import compaction, placement
from fleetaudit.whatif import remedies as rm
from fleetaudit.whatif.compaction_over_time import compact_over_time

_PARALLEL_NODES = 1_000  # below this, worker processes cost more than they save


@dataclass(frozen=True)
class RemedyRow:
    """One remedy evaluated: its edits, the fleet it made, its snapshot and replay.

    ``snapshot_base`` is the baseline's snapshot at the same instants when this row's
    snapshot samples fewer of them (compaction), else None (the baseline row's).
    """

    name: str
    kind: str  # baseline, edit, compaction, together
    edits: tuple[rm.Edit, ...]
    snapshot: rm.Snapshot
    replay: rm.ReplayFigures
    changes: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    snapshot_base: rm.Snapshot | None = None
    compaction: dict[str, Any] | None = None
    cost: dict[str, Any] | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class Sizing:
    """A sizing search: the smallest edit of ``kind`` reaching ``target`` for ``shape``."""

    kind: str  # add or cpus
    model: str
    shape: Shape
    target: float
    criterion: str  # replay: the shape's arrivals; snapshot: its instants
    bound: float
    grain: float
    found: float | None
    steps: tuple[rm.SizingStep, ...]
    cause: str | None = None  # at the bound, the cause that strands the shape most
    notes: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "model": self.model,
            "shape": self.shape.as_json(),
            "target": self.target,
            "criterion": self.criterion,
            "bound": self.bound,
            "step": self.grain,
            "found": self.found,
            "steps": [s.as_json() for s in self.steps],
            "stranded_by": self.cause,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class RemediesResult:
    """What ``whatif remedies`` found (see :func:`whatif_remedies`)."""

    at: datetime
    start: datetime
    step_s: float
    deadline_s: float | None
    demand: dict[str, Any]
    shapes: tuple[Shape, ...]
    shown: int
    baseline: Baseline
    rows: tuple[RemedyRow, ...]  # the baseline first
    sizing: tuple[Sizing, ...]
    prices: Prices | None
    saved: str | None
    notes: tuple[str, ...]
    seconds: float
    fleet_gpus: int

    @property
    def hours(self) -> float:
        return (self.at - self.start) / timedelta(hours=1)


def read_node_list(path: Path) -> list[str]:
    """The node ids of a ``--remove`` file: one a line, or a CSV whose header names node_id."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--remove: cannot read {path}: {exc}") from exc
    header = [c.strip() for c in lines[0].split(",")] if lines else []
    if "node_id" in header:
        column = header.index("node_id")
        ids = [line.split(",")[column].strip() for line in lines[1:] if line.strip()]
    else:
        ids = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    if not ids:
        raise UsageError(f"{path}: no node ids (one a line, or a CSV with a node_id column)")
    return ids


# ----------------------------------------------------------------- the rows


@dataclass(frozen=True)
class _Context:
    """What every row is evaluated against (picklable: rows may run in worker processes)."""

    nodes: pl.DataFrame
    allocations: pl.DataFrame  # the window's, and the shapes' durations after it
    demand: placement.Demand
    pairs: tuple[tuple[Shape, int], ...]
    instants: tuple[datetime, ...]
    since: timedelta
    step: timedelta
    discipline: str
    holds: Any
    preempt: bool
    kinds: pl.DataFrame
    start: datetime
    end: datetime


def _evaluate(ctx: _Context, edits: tuple[rm.Edit, ...]) -> tuple[rm.EditedFleet, rm.Snapshot, rm.ReplayFigures, float]:
    """A fleet edit's snapshot and replay (the empty edit: the baseline's)."""
    began = time.perf_counter()
    edited = rm.edit_fleet(ctx.nodes, ctx.allocations, ctx.start, ctx.end, edits)
    pairs = [(rm.port_shape(s, edited.ports), q) for s, q in ctx.pairs]
    snap = rm.snapshot(edited.nodes, ctx.allocations, pairs, ctx.instants, ctx.since, ctx.step,
                       ctx.demand.health)  # fmt: skip
    demand = ctx.demand
    if edited.ports:
        ported, _ = rm.port_requests(demand.requests, edited.ports)
        demand = replace(demand, requests=ported)
    result = placement.replay_demand(
        edited.nodes, demand, ctx.discipline, hold=ctx.holds, preempt=ctx.preempt
    )
    figures = rm.replay_figures(result, ctx.kinds, len(ctx.pairs), ctx.start, ctx.end)
    return edited, snap, figures, time.perf_counter() - began


def _evaluate_task(args: tuple[_Context, tuple[rm.Edit, ...]]) -> Any:
    return _evaluate(*args)


def _row(
    name: str, kind: str, edits: tuple[rm.Edit, ...], evaluated: Any, ctx: _Context
) -> RemedyRow:
    edited, snap, figures, seconds = evaluated
    changes = dict(edited.changes)
    if edited.ports:
        _, count = rm.port_requests(ctx.demand.requests.filter(
            placement.record.arrivals(ctx.demand.requests, ctx.start, ctx.end)), edited.ports)
        changes["requests_ported"] = count
    return RemedyRow(name, kind, edits, snap, figures, changes, edited.notes, seconds=seconds)


def _compaction_row(
    ctx: _Context, run: RemediesRun, edits: tuple[rm.Edit, ...], name: str, kind: str,
    base_started: int,
) -> RemedyRow:
    """Compaction on the (edited) fleet: the one-instant search at sampled instants of the
    window (its snapshot, beside the fleet without it at the same instants), and compaction
    over time (its replay, a round every --every within the migration budget)."""
    began = time.perf_counter()
    edited = rm.edit_fleet(ctx.nodes, ctx.allocations, ctx.start, ctx.end, edits)
    pairs = [(rm.port_shape(s, edited.ports), q) for s, q in ctx.pairs]
    shapes = [s for s, _ in pairs]
    demand = ctx.demand
    if edited.ports:
        demand = replace(demand, requests=rm.port_requests(demand.requests, edited.ports)[0])
    options = replace(run.compaction_options, jobs=1)
    picks = [ctx.instants[i] for i in place_picks(len(ctx.instants), edited.nodes.height)]
    plain: list[tuple[datetime, pl.DataFrame]] = []
    packed: list[tuple[datetime, pl.DataFrame]] = []
    ledger: compaction.CompactionResult | None = None
    for t in picks:
        frame, result = _compacted(edited.nodes, ctx.allocations, t, shapes, options, demand.health)
        plain.append((t, frame))
        packed.append((t, result.allocations))
        ledger = result
    after = rm.snapshot_at(edited.nodes, packed, pairs, ctx.since, demand.health)
    before = rm.snapshot_at(edited.nodes, plain, pairs, ctx.since, demand.health)
    over = compact_over_time(
        edited.nodes, ctx.allocations.filter(pl.col("start_time") < ctx.end),
        demand.requests, ctx.start, ctx.end, shapes, options,
        replace(run.over_time, queue=ctx.discipline, preempt=ctx.preempt), demand=demand,
        hold=ctx.holds,
    )  # fmt: skip
    assert over.run is not None
    figures = rm.replay_figures(over.run.result, ctx.kinds, len(ctx.pairs), ctx.start, ctx.end)
    info = {
        "snapshot_instants": len(picks),
        "ledger_at": iso(picks[-1]) if picks else None,
        "ledger": None if ledger is None else {
            "moves": len(ledger.moves),
            "gpus_moved": round(sum(m.gpus for m in ledger.moves), 3),
            "migration": ledger.migration.as_json(),
            "partial_nodes": [ledger.before.partial_nodes, ledger.after.partial_nodes],
            "free_nodes": [ledger.before.free_nodes, ledger.after.free_nodes],
        },
        "over_time": {
            "every_s": run.over_time.every_s,
            "budget_gpus_per_hour": round(over.run.gpus_per_hour, 4),
            "rounds": len(over.ticks),
            "moves": over.migration.moves,
            "gpus_moved": round(over.migration.gpus_moved, 3),
            "pause_gpu_hours": round(over.migration.pause_gpu_hours, 4),
            "partial_nodes_reduction_pct": None if over.partial_reduction_pct is None
            else round(over.partial_reduction_pct, 2),
            "baseline_started": over.started[0],
        },
    }  # fmt: skip
    notes = list(edited.notes)
    if not edits and over.started[0] != base_started:  # the same replay: a check
        notes.append(
            f"compaction over time replayed its own baseline: {over.started[0]:,} started "
            f"against {base_started:,}"
        )
    return RemedyRow(
        name, kind, edits, after, figures, dict(edited.changes), tuple(notes),
        snapshot_base=before, compaction=info, seconds=time.perf_counter() - began,
    )  # fmt: skip


def _compacted(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    t: datetime,
    shapes: Sequence[Shape],
    options: compaction.CompactionOptions,
    health: Health | None,
) -> tuple[pl.DataFrame, compaction.CompactionResult]:
    """The one-instant search at ``t`` as the compaction row runs it (and ``--save-as``
    saves it): on the allocations that run at t or start within the longest shape's
    duration, the nodes out of service at t out of its scope (as in whatif compaction).
    The allocations searched, and the result."""
    longest = max((s.duration_s or 0.0 for s in shapes), default=0.0)
    horizon = t + timedelta(seconds=longest) + timedelta(microseconds=1)
    frame = allocations.filter(
        (pl.col("start_time") < horizon) & (pl.col("end_time").is_null() | (pl.col("end_time") > t))
    )
    standing = occupancy.nodes_at(nodes, frame, t, health)
    return frame, compaction.compact(standing, frame, t, list(shapes), options)


# ------------------------------------------------------------------- sizing


def _sizing(
    ctx: _Context, run: RemediesRun, base_nodes: pl.DataFrame, baseline: placement.ReplayResult
) -> tuple[Sizing, ...]:
    """The two searches of --target (nodes to add, CPUs per node), side by side in two
    worker processes on a large fleet; the step at 0 is the baseline's, made once."""
    shape: Shape = run.target_shape
    target = float(run.target or 0.0)
    models = shape.models
    if not models or len(models) != 1:
        raise UsageError("--target: the shape names one GPU model (--model M), the one to buy")
    model = models[0]
    rm._check_model(base_nodes, model, "--model")
    kinds = rm.request_shapes(ctx.demand.requests, [shape], ctx.start, ctx.end,
                              _deadline(run), match=rm.same_but_duration)  # fmt: skip
    arrived = int((kinds["shape"] == 0).sum())
    criterion = "replay" if arrived else "snapshot"
    notes: list[str] = []
    if not arrived:
        notes.append(
            "no request of this shape arrived in the window: the search reads its snapshot start "
            "probability (share of the sampled instants with an instance), not the replay's"
        )
    installed = base_nodes.filter(pl.col("gpu_model") == model)
    bound_add = float(run.max_add if run.max_add is not None
                      else max(1, round(installed.height * REMEDIES_MAX_ADD_FACTOR)))  # fmt: skip
    node_cpus = float(installed["cpus"].cast(pl.Float64).max() or 0.0)
    node_gpus = float(installed["gpus"].cast(pl.Float64).max() or 0.0)
    need = shape.cpus_per_gpu * node_gpus
    bound_cpus = max(run.cpu_step, need - float(installed["cpus"].cast(pl.Float64).min() or 0.0), node_cpus)
    base = _SizingSearch(ctx, "add", model, shape, target, 0.0, 1.0, arrived, kinds)
    first = _size_step(base, 0.0, baseline)
    searches = [
        _SizingSearch(ctx, "add", model, shape, target, bound_add, 1.0, arrived, kinds, first),
        _SizingSearch(ctx, "cpus", model, shape, target, bound_cpus, run.cpu_step, arrived, kinds,
                      first),
    ]  # fmt: skip
    workers = run.workers or (2 if ctx.nodes.height >= _PARALLEL_NODES else 1)
    out: list[Sizing] = []
    for search, (found, steps) in zip(
        searches, map_processes(_search_task, searches, workers), strict=True
    ):
        cause = None
        if found is None:
            last = steps[-1].figures.get("stranded_gpu_hours", {})
            worst = max(last.items(), key=lambda kv: kv[1], default=(None, 0.0))
            cause = worst[0] if worst[1] > 0 else None
        out.append(Sizing(search.kind, model, shape, target, criterion, search.bound, search.grain,
                          found, steps, cause, tuple(notes)))  # fmt: skip
    return tuple(out)


@dataclass(frozen=True)
class _SizingSearch:
    """One sizing search, picklable: it may run in a worker process beside the other."""

    ctx: _Context
    kind: str  # add or cpus
    model: str
    shape: Shape
    target: float
    bound: float
    grain: float
    arrived: int  # the shape's arrivals in the window (0: the snapshot is the criterion)
    kinds: pl.DataFrame
    first: rm.SizingStep | None = None  # the step at 0 (the baseline), made once

    def edits(self, value: float) -> tuple[rm.Edit, ...]:
        if value == 0:
            return ()
        if self.kind == "add":
            return (rm.parse_add(f"{self.model}:{int(value)}"),)
        return (rm.parse_delta("cpus", f"{self.model}:+{value:g}"),)


def _size_step(
    search: _SizingSearch, value: float, baseline: placement.ReplayResult | None = None
) -> rm.SizingStep:
    """The shape's start probability with the edit of ``value`` (the baseline's own replay
    at 0, when given: the empty edit gives it back)."""
    ctx = search.ctx
    edited = rm.edit_fleet(ctx.nodes, ctx.allocations, ctx.start, ctx.end, search.edits(value))
    snap = rm.snapshot(edited.nodes, ctx.allocations, [(search.shape, 0)], ctx.instants,
                       ctx.since, ctx.step, ctx.demand.health)  # fmt: skip
    p_snap = snap.shapes[0][0]
    figures: dict[str, Any] = {"snapshot_p_start": None if p_snap is None else round(p_snap, 4)}
    p = p_snap
    if search.arrived:
        result = baseline if baseline is not None and value == 0 else placement.replay_demand(
            edited.nodes, ctx.demand, ctx.discipline, hold=ctx.holds, preempt=ctx.preempt
        )  # fmt: skip
        f = rm.replay_figures(result, search.kinds, 1, ctx.start, ctx.end)
        p = f.p_start[0]
        figures |= {"arrived": search.arrived, "started": f.started,
                    "served_gpu_hours": round(f.served_gpu_hours, 3)}  # fmt: skip
    figures["stranded_gpu_hours"] = {c: round(snap.hours[c], 3) for c in CAUSES}
    return rm.SizingStep(value, p, p is not None and p >= search.target, figures)


def _search_task(search: _SizingSearch) -> tuple[float | None, tuple[rm.SizingStep, ...]]:
    def step(value: float) -> rm.SizingStep:
        if value == 0 and search.first is not None:
            return search.first
        return _size_step(search, value)

    return rm.bisect(step, search.bound, search.grain)


def _deadline(run: RemediesRun) -> float | None:
    return None if run.deadline is None else run.deadline.total_seconds()


# -------------------------------------------------------------------- money


def _costs(rows: list[RemedyRow], prices: Prices, nodes: pl.DataFrame, ctx: _Context,
           hours: float) -> list[RemedyRow]:  # fmt: skip
    """Each row's cost a month, its extra GPU-hours served a month, and their ratio."""
    base = rows[0]
    node_gpus = {
        m: float(g)
        for m, g in nodes.group_by("gpu_model").agg(pl.col("gpus").cast(pl.Float64).median()).rows()
    }
    fleet_price = _fleet_gpu_price(prices, nodes, node_gpus)
    out = [rows[0]]
    for row in rows[1:]:
        notes: list[str] = []
        edited = rm.edit_fleet(ctx.nodes, ctx.allocations, ctx.start, ctx.end, row.edits)
        cost, missing = fleet_cost(prices, nodes, edited.nodes)
        notes += missing
        for edit in row.edits:
            if edit.kind in ("merge-level", "port"):
                if edit.kind in prices.remedies:
                    cost = None if cost is None else cost + prices.remedies[edit.kind]
                else:
                    notes.append(f"{edit.option} buys no hardware and the prices give no "
                                 f"'remedy,{edit.kind}' row: counted at 0")  # fmt: skip
        if row.compaction is not None:
            pause = float(row.compaction["over_time"]["pause_gpu_hours"])
            paid = None if fleet_price is None else pause * fleet_price * HOURS_PER_MONTH / hours
            if paid is None:
                notes.append("no GPU price for the fleet: the pause of compaction is not priced")
            if cost is not None:
                cost = None if paid is None else cost + paid
            if cost is not None and "compaction" in prices.remedies:
                cost += prices.remedies["compaction"]
        extra = (row.replay.served_gpu_hours - base.replay.served_gpu_hours) * HOURS_PER_MONTH / hours
        per = None if cost is None or extra <= 0 else max(cost, 0.0) / extra
        out.append(replace(row, cost={
            "per_month": None if cost is None else round(cost, 2),
            "extra_gpu_hours_per_month": round(extra, 3),
            "per_extra_gpu_hour": None if per is None else round(per, 4),
            "rank": None,
            "notes": notes,
        }))  # fmt: skip
    ranked = sorted(
        (r for r in out[1:] if r.cost and r.cost["per_extra_gpu_hour"] is not None),
        key=lambda r: (r.cost["per_extra_gpu_hour"], -r.cost["extra_gpu_hours_per_month"]),  # type: ignore[index]
    )
    ranks = {id(r): i for i, r in enumerate(ranked, start=1)}
    return [out[0]] + [
        replace(r, cost={**r.cost, "rank": ranks.get(id(r))}) if r.cost else r for r in out[1:]
    ]


def _fleet_gpu_price(prices: Prices, nodes: pl.DataFrame, node_gpus: dict[str, float]) -> float | None:
    """The healthy fleet's mean price of a GPU-hour (None: a model has no price)."""
    healthy = nodes.filter(usable_expr(nodes) & (pl.col("gpus") > 0))
    total = value = 0.0
    for model, gpus in healthy.group_by("gpu_model").agg(pl.col("gpus").sum()).rows():
        price = prices.gpu_hour_of(str(model), node_gpus.get(str(model)))
        if price is None:
            return None
        total += float(gpus)
        value += float(gpus) * price
    return value / total if total else None


# --------------------------------------------------------------------- run


def whatif_remedies(store_options: StoreOptions, run: RemediesRun) -> RemediesResult:
    """Evaluate every remedy of ``run`` against the calibrated replay of the recorded fleet."""
    began = time.perf_counter()
    if run.since <= timedelta(0):
        raise UsageError("--since: give a positive duration (e.g. 7d)")
    if run.step <= timedelta(0):
        raise UsageError("--step: must be longer than 0s")
    if run.target is not None and not 0 < run.target <= 1:
        raise UsageError("--target: p_start is a probability above 0 and at most 1 (e.g. 0.95)")
    if run.target is not None and run.target_shape is None:
        raise UsageError("--target needs a shape: --model M --gpus G ... or --shapes FILE")
    if run.save_as is not None and len(run.edits) + run.compaction > 1 and not run.together:
        raise UsageError("--save-as saves the fleet of one edit, or of --together")
    prices = None if run.prices is None else read_prices(Path(run.prices))
    notes: list[str] = []
    with reading(store_options) as store:
        end = resolve_at(store, run.at)
        start = end - run.since
        requests_window = store.query("requests_in_window", start=start, end=end)
        demand_read = demand_shapes(requests_window, start, end, run.demand)
        pairs = tuple((d.shape, d.queued) for d in demand_read.shapes[: run.max_shapes])
        longest = max((s.duration_s or 0.0 for s, _ in pairs), default=0.0)
        horizon = end + timedelta(seconds=longest) + timedelta(microseconds=1)
        nodes, allocations = load_frames(store, start, horizon)
        nodes, health = load_health(store, nodes, start, horizon)
        requests = store.query("requests_all")
        suggested = suggested_discipline(store, requests)
        recorded = recorded_discipline(store)
        notes.extend(data_notes(store, start, end))
    fleet_gpus = replay_gpus(nodes)
    if not pairs:
        notes.append("the window's demand holds no GPU shape: the snapshot evaluates none")
    # the replay reads the window's allocations alone (those of whatif placement)
    window_allocations = allocations.filter(pl.col("start_time") < end)
    demand = placement.window_demand(nodes, window_allocations, requests, start, end, health=health)
    baseline = make_baseline(
        store_options, nodes, demand, queue=run.queue, recorded=recorded, suggested=suggested,
        calibrate=run.calibrate, at=end, preempt=run.preempt,
    )  # fmt: skip
    notes.extend(baseline.notes)
    instants = tuple(den.window_instants(end, run.since, run.step))
    shapes = tuple(s for s, _ in pairs)
    kinds = rm.request_shapes(demand.requests, shapes, start, end, _deadline(run))
    ctx = _Context(
        nodes, allocations, demand, pairs, instants, run.since, run.step, baseline.discipline,
        baseline.result.holds, baseline.result.preempt, kinds, start, end,
    )  # fmt: skip
    # the baseline row: the recorded fleet, snapshot and the baseline replay itself
    t0 = time.perf_counter()
    base_snap = rm.snapshot(nodes, allocations, pairs, instants, run.since, run.step, health)
    base_fig = rm.replay_figures(baseline.result, kinds, len(pairs), start, end)
    rows = [RemedyRow("recorded fleet (baseline)", "baseline", (), base_snap, base_fig,
                      seconds=time.perf_counter() - t0)]  # fmt: skip
    jobs: list[tuple[str, str, tuple[rm.Edit, ...]]] = [
        (e.label, "edit", (e,)) for e in run.edits
    ]
    together = run.together and len(run.edits) + run.compaction > 1
    if together and not run.compaction:
        jobs.append(("together: " + ", ".join(e.label for e in run.edits), "together", tuple(run.edits)))
    for e in run.edits:  # every edit is checked before the long replays start
        rm.edit_fleet(nodes, allocations, start, end, (e,))
    workers = run.workers or (min(os.cpu_count() or 1, 2) if nodes.height >= _PARALLEL_NODES else 1)
    evaluated = map_processes(_evaluate_task, [(ctx, edits) for _, _, edits in jobs], workers)
    rows += [_row(name, kind, edits, ev, ctx) for (name, kind, edits), ev in zip(jobs, evaluated, strict=True)]
    if run.compaction:
        rows.append(_compaction_row(ctx, run, (), "--compaction", "compaction", base_fig.started))
        if together:
            rows.append(_compaction_row(
                ctx, run, tuple(run.edits),
                "together: " + ", ".join([*(e.label for e in run.edits), "--compaction"]), "together",
                base_fig.started,
            ))  # fmt: skip
    sizing: tuple[Sizing, ...] = ()
    if run.target is not None:
        sizing = _sizing(ctx, run, nodes, baseline.result)
    hours = run.since / timedelta(hours=1)
    if prices is not None:
        rows = _costs(rows, prices, nodes, ctx, hours)
    saved = None
    if run.save_as is not None:
        saving = rows[-1] if len(rows) > 1 else None
        if saving is None:
            raise UsageError("--save-as: give an edit to save (e.g. --add H20:8)")
        _save(store_options, run.save_as, saving, ctx, end, run)
        saved = run.save_as
    result = RemediesResult(
        at=end, start=start, step_s=run.step.total_seconds(), deadline_s=_deadline(run),
        demand={"mode": demand_read.mode, "asked": demand_read.asked,
                "shapes": len(demand_read.shapes), "evaluated": len(pairs)},
        shapes=shapes, shown=min(run.shapes_shown, len(shapes)), baseline=baseline,
        rows=tuple(rows), sizing=sizing, prices=prices, saved=saved, notes=tuple(notes),
        seconds=time.perf_counter() - began,
        fleet_gpus=fleet_gpus,
    )  # fmt: skip
    record_whatif_run(
        store_options, "remedies", at=end, scenario=None,
        run_options={"since_s": run.since.total_seconds(), "edits": [e.label for e in run.edits],
                     "compaction": run.compaction, "together": run.together},
        document=remedies_document(result),
    )  # fmt: skip
    return result


def _save(
    store_options: StoreOptions, name: str, row: RemedyRow, ctx: _Context, at: datetime,
    run: RemediesRun,
) -> None:
    """Save the row's edited fleet as scenario ``name``: its nodes, and the recorded
    allocations (those on removed nodes removed; compaction's moves at ``at`` applied)."""
    edited = rm.edit_fleet(ctx.nodes, ctx.allocations, ctx.start, ctx.end, row.edits)
    if edited.ports:
        raise UsageError(
            "--save-as: a port map changes the demand, not the fleet's nodes or allocations; "
            "there is nothing to save for it"
        )
    gone = ctx.allocations.filter(pl.col("node_id").cast(pl.String).is_in(list(edited.removed)))
    overrides = gone.with_columns(pl.lit(True).alias("removed"))
    if row.kind in ("compaction", "together") and row.compaction is not None:
        shapes = [s for s, _ in ctx.pairs]  # a port map was refused above
        options = replace(run.compaction_options, jobs=1)
        health = ctx.demand.health
        _, result = _compacted(edited.nodes, ctx.allocations, at, shapes, options, health)
        moved = {m.alloc_id for m in result.moves}
        overrides = pl.concat([
            overrides,
            result.allocations.filter(pl.col("alloc_id").is_in(list(moved)))
            .with_columns(pl.lit(False).alias("removed")),
        ], how="diagonal_relaxed")  # fmt: skip
    with writing(store_options) as store:
        save_scenario(
            store, name, overrides, base="recorded", command="whatif remedies",
            options={"remedy": row.name, "edits": [e.as_json() for e in row.edits]}, at=at,
            nodes=edited.nodes,
        )  # fmt: skip



# ------------------------------------------------------------------ the document

REMEDIES_SCHEMA = "fleetaudit.remedies/1"


def _change(value: float | None, base: float | None, digits: int = 3) -> float | None:
    if value is None or base is None:
        return None
    return round(value - base, digits)


def _row_json(row: RemedyRow, base: RemedyRow) -> dict[str, Any]:
    snap_base = row.snapshot_base or base.snapshot
    s, b = row.snapshot, snap_base
    r, rb = row.replay, base.replay
    return {
        "name": row.name,
        "kind": row.kind,
        "edits": [e.as_json() for e in row.edits],
        "fleet": row.changes,
        "snapshot": s.as_json(),
        "replay": r.as_json(),
        "change": {
            "snapshot_against": "baseline" if row.snapshot_base is None else "baseline_at_same_instants",
            "idle_gpu_hours": _change(s.hours["idle"], b.hours["idle"]),
            "usable_gpu_hours": _change(s.hours["usable"], b.hours["usable"]),
            "stranded_gpu_hours": _change(s.stranded, b.stranded),
            "stranded_by_cause": {c: _change(s.hours[c], b.hours[c]) for c in CAUSES},
            "started": r.started - rb.started,
            "wait_p50_s": _change(r.wait_p50_s, rb.wait_p50_s),
            "wait_p90_s": _change(r.wait_p90_s, rb.wait_p90_s),
            "served_gpu_hours": _change(r.served_gpu_hours, rb.served_gpu_hours),
            "waiting_at_end": r.waiting - rb.waiting,
            "p_start": [_change(p, q, 4) for p, q in zip(r.p_start, rb.p_start, strict=True)],
        },
        "baseline_snapshot": None if row.snapshot_base is None else row.snapshot_base.as_json(),
        "compaction": row.compaction,
        "cost": row.cost,
        "notes": list(row.notes),
        "seconds": round(row.seconds, 3),
    }


def remedies_document(result: RemediesResult) -> dict[str, Any]:
    """The ``whatif remedies --json`` document (``fleetaudit.remedies/1``; docs/remedies.md)."""
    base = result.rows[0]
    return {
        "schema": REMEDIES_SCHEMA,
        "window": {
            "start": iso(result.start),
            "end": iso(result.at),
            "step_s": result.step_s,
            "instants": base.snapshot.instants,
        },
        "fleet_gpus": result.fleet_gpus,
        "deadline_s": result.deadline_s,
        "demand": result.demand,
        "shapes": [s.as_json() for s in result.shapes],
        "shapes_shown": result.shown,
        "queue": result.baseline.discipline,
        "calibration": result.baseline.as_json(),
        "baseline": _row_json(base, base),
        "remedies": [_row_json(row, base) for row in result.rows[1:]],
        "ranking": [
            row.name
            for row in sorted(
                (r for r in result.rows[1:] if r.cost and r.cost.get("rank")),
                key=lambda r: r.cost["rank"],  # type: ignore[index]
            )
        ],
        "prices": None if result.prices is None else result.prices.as_json(),
        "sizing": [s.as_json() for s in result.sizing],
        "saved_as": result.saved,
        "notes": list(result.notes),
        "seconds": round(result.seconds, 3),
    }
