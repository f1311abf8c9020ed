"""``fleetaudit report``: read the store, compute the three denominators, return a result.

Orchestration only: the figures are :mod:`fleetaudit.model.denominators`; the HTML is
:mod:`fleetaudit.outputs.report`, the JSON :mod:`fleetaudit.outputs.contract`, the terminal
:mod:`fleetaudit.outputs.console`. The store is opened for reading; recording the
report's headline figures for the next report's trend (:func:`record_report`)
opens it for writing afterwards, once the files are written.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from fleetaudit.api import (
    StoreOptions,
    WhatifRun,
    Window,
    check_scenario,
    data_notes,
    export_time,
    holds_requests,
    ineligible_note,
    latest_whatif_runs,
    load_frames,
    load_health,
    reading,
    resolve_at,
    resolve_window,
    writing,
)
from fleetaudit.api.prices_api import read_prices
from fleetaudit.core.errors import StaleExportError, StoreError, UsageError
from fleetaudit.core.options import (
    REPORT_INTERRUPTED_WITHIN,
    REPORT_QUARANTINE,
    REPORT_SINCE,
    REPORT_STEP,
)
from fleetaudit.core.times import iso, seconds_text, to_utc
from fleetaudit.model import denominators as den
from fleetaudit.model import occupancy
from fleetaudit.model.capacity import SHARE_UNITS, UNBOUNDED, Health, usable_expr
from fleetaudit.model.demand import (
    DEFAULT_SHAPES,
    PER_MODEL_SHAPES,
    WEIGHTS,
    DemandShape,
    WindowDemand,
    window_demand,
)
from fleetaudit.model.failures import Failures, failures
from fleetaudit.model.history import MAX_INSTANTS, evaluate_history
from fleetaudit.model.money import Prices, report_money
from fleetaudit.model.shapes import (
    SHAPE_COLUMNS,
    Shape,
    beyond_fleet_all,
    duration_class_expr,
    group_key,
    group_slots,
    make_shape,
    node_slots,
    request_shape,
)
from fleetaudit.model.store import Store, open_store

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

REPORT_SCHEMA = "fleetaudit.report/1"

HEADLINES: tuple[tuple[str, str, str], ...] = (
    ("physical", "allocation_rate_high", "allocation rate, high priority"),
    ("physical", "allocation_rate", "allocation rate, high + low"),
    ("physical", "healthy_gpu_hours_per_hour", "healthy GPU-hours per hour"),
    ("schedulable", "idle_gpu_hours_per_hour", "idle GPU-hours per hour"),
    ("schedulable", "usable_gpu_hours_per_hour", "usable GPU-hours per hour"),
    ("schedulable", "stranded_total_gpu_hours_per_hour", "stranded GPU-hours per hour"),
    ("productive", "productive_rate", "SM-active rate"),
)
"""(denominator, key, label) of the fleet figures whose change the trend shows."""


@dataclass(frozen=True)
class ReportOptions:
    """What ``fleetaudit report`` covers (defaults are the command line's)."""

    at: datetime | None = None
    since: timedelta | None = None  # None: REPORT_SINCE, from the data's first record on
    step: timedelta = REPORT_STEP
    scenario: str | None = None
    # budget: the demand shapes evaluated at every step, heaviest first (None: the
    # DEFAULT_SHAPES heaviest and every GPU model's PER_MODEL_SHAPES heaviest)
    max_shapes: int | None = None
    demand: str | None = None  # waited | submitted | queued; None: waited, else submitted
    generated_at: datetime | None = None  # the clock, injectable for tests
    fail_if_stale: bool = False  # raise StaleExportError when the export time has not moved
    quarantine: int = REPORT_QUARANTINE  # failures in the window: a quarantine candidate
    interrupted_within: timedelta = REPORT_INTERRUPTED_WITHIN  # an end this close to a failure
    prices: Path | None = None  # a prices file: the denominators and a showback in money


@dataclass(frozen=True)
class ReportResult:
    """Every figure of one report (SPEC §7); the three renderers read only this."""

    generated_at: datetime
    start: datetime
    end: datetime
    step_s: float
    scenario: str | None
    fleet: dict[str, Any]
    models: dict[str, dict[str, Any]]
    tenants: dict[str, dict[str, Any]]
    shapes: tuple[den.ShapeOutlook, ...]
    shapes_left_out: int
    neighbour: dict[str, Any]
    telemetry: dict[str, Any]
    whatifs: dict[str, WhatifRun]
    previous: dict[str, Any] | None
    trend: tuple[dict[str, Any], ...]
    notes: tuple[str, ...]
    steps: pl.DataFrame = field(repr=False)  # instant, gpu_model, ledger GPUs, best
    domains: pl.DataFrame = field(repr=False)  # domain, gpu_model, nodes, gpus, free_gpus at t
    demand: dict[str, Any] = field(default_factory=dict)  # which demand, see _demand_summary
    rejects: dict[str, int] = field(default_factory=dict)  # rows rejected at ingest, per table
    bound: dict[str, dict[str, int]] = field(default_factory=dict)  # per model, at the end
    # every recorded report of the same scenario, window length and step, oldest first:
    # created_at, at, figures (the headline keys); the trend chart adds this one last
    history: tuple[dict[str, Any], ...] = ()
    # domain, gpu_model, the stranded causes' GPU-hours and their total, largest first,
    # estimated from up to PLACE_SAMPLES of the window's instants (see stranded_places)
    places: pl.DataFrame = field(default_factory=pl.DataFrame, repr=False)
    places_instants: int = 0
    # instant, gpu_model (null: any model), queued_gpus: the GPUs of the requests waiting
    # at each instant (submitted by it, not started), for the over-time charts
    queued: pl.DataFrame = field(default_factory=pl.DataFrame, repr=False)
    # the denominators and a per-tenant showback in money (report --prices), else None
    money: dict[str, Any] | None = None
    # the latest whatif remedies run (remedies_summary), else None
    remedies: dict[str, Any] | None = None
    window: Window | None = None  # how the window covers the data, and why it is as long
    # what defines the figures, which the trend compares like for like: scenario, span_s,
    # step_s, demand (the mode used), shapes (the budget)
    trend_key: dict[str, Any] = field(default_factory=dict)
    # the export time has not moved since the last recorded report: recorded_at,
    # export_time, note (None: it has, or no report was recorded with it)
    stale: dict[str, Any] | None = None
    # what failures cost in the window (failures_section: the JSON ``failures`` object)
    failures: dict[str, Any] = field(default_factory=dict)
    # bucket, state, gpu_hours: the unhealthy GPU-hours over the window, for the chart
    failures_over_time: pl.DataFrame = field(default_factory=pl.DataFrame, repr=False)

    def headline(self) -> dict[str, float | None]:
        """The fleet's headline figures (recorded for the next report's trend): rates, and
        GPU-hours per hour of the window, so windows of other lengths compare like for like."""
        hours = (self.end - self.start) / timedelta(hours=1)
        return {
            f"{part}.{key}": _get(self.fleet[part], key, hours) for part, key, _label in HEADLINES
        }


def _get(figures: dict[str, Any], key: str, hours: float) -> float | None:
    if key.endswith("_per_hour"):
        total = _get(figures, key.removesuffix("_per_hour"), hours)
        return None if total is None or hours <= 0 else total / hours
    if key == "stranded_total_gpu_hours":
        return float(sum(figures["stranded_gpu_hours"].values()))
    value = figures.get(key)
    return None if value is None else float(value)


def _rate(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


def _physical(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "installed_gpu_hours": row["installed_gpu_hours"],
        "healthy_gpu_hours": row["healthy_gpu_hours"],
        "allocated_high_gpu_hours": row["allocated_high_gpu_hours"],
        "allocated_gpu_hours": row["allocated_gpu_hours"],
        "allocation_rate_high": _rate(row["allocated_high_gpu_hours"], row["healthy_gpu_hours"]),
        "allocation_rate": _rate(row["allocated_gpu_hours"], row["healthy_gpu_hours"]),
    }


def _schedulable(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "idle_gpu_hours": row["idle_gpu_hours"],
        "usable_gpu_hours": row["usable_gpu_hours"],
        "stranded_gpu_hours": {c: row[f"{c}_gpu_hours"] for c in den.SPLIT},
        "unhealthy_gpu_hours": row["unhealthy_gpu_hours"],
        "allocated_gpu_hours": row["allocated_high_gpu_hours"] + row["allocated_low_gpu_hours"],
    }


def _sum_rows(frame: pl.DataFrame) -> dict[str, Any]:
    numeric = [c for c, t in frame.schema.items() if t.is_numeric()]
    return frame.select(pl.col(numeric).sum()).row(0, named=True)


# Columns of rolled-up telemetry (fleetaudit rollup): a row stands for `samples` raw samples.
ROLLED_COLUMNS = frozenset({"samples", "sample_interval_s"})


def _telemetry(
    store: Store, start: datetime, end: datetime
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any], pl.DataFrame]:
    """Telemetry per allocation, per node and instant, the seconds of one sample, and
    the samples per source series.

    A store that holds rolled-up rows weighs each row by its ``samples``; the
    raw cadence comes from their ``sample_interval_s`` (docs/rollup.md). Raw rows
    are counted per allocation and per series in one scan.
    """
    rolled = {c.lower() for c in store.column_types("telemetry")} >= ROLLED_COLUMNS
    cadence = None
    upper = list(den.UPPER_BOUND_METRICS)
    if rolled:
        by_alloc = store.query("telemetry_by_alloc_rolled", start=start, end=end, upper=upper)
        by_node = store.query("telemetry_by_node_rolled", start=start, end=end, upper=upper)
        cadence = store.query("telemetry_interval_rolled", start=start, end=end).row(0, named=True)
        metrics = store.query("telemetry_metrics", start=start, end=end)
    else:
        parts = store.query("telemetry_by_alloc_and_metric", start=start, end=end, upper=upper)
        by_alloc = parts.filter(pl.col("per_alloc") & pl.col("alloc_id").is_not_null()).select(
            "alloc_id", "samples", "sm_active_sum", "upper_samples"
        )
        metrics = parts.filter(~pl.col("per_alloc")).select("metric", "samples")
        by_node = store.query("telemetry_by_node", start=start, end=end, upper=upper)
    if cadence is None or cadence["interval_s"] is None:
        cadence = store.query("telemetry_interval", start=start, end=end).row(0, named=True)
    return by_alloc, by_node, cadence, metrics


@dataclass(frozen=True)
class _WindowTelemetry:
    """What the productive figures read from the telemetry of the window."""

    by_alloc: pl.DataFrame
    by_node: pl.DataFrame
    cadence: dict[str, Any]
    sources: list[dict[str, Any]]


def _read_telemetry(store: Store, start: datetime, end: datetime) -> _WindowTelemetry:
    """The window's telemetry, read on ``store`` (a connection of its own), then closed."""
    with store:
        by_alloc, by_node, cadence, metrics = _telemetry(store, start, end)
    return _WindowTelemetry(by_alloc, by_node, cadence, den.metric_sources(metrics))


class _Aside:
    """``function(*args)`` run in a thread of its own while the caller goes on.

    The telemetry scans are DuckDB's work, which runs without the GIL: read aside,
    they take the second core while the caller computes the ledger in Python (a
    fifth of the report's CPU time on a fleet with telemetry). :meth:`result`
    waits, then returns the value or raises the exception.
    """

    def __init__(self, function: Callable[..., Any], *args: Any) -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(function, args), name="fleetaudit-aside", daemon=True
        )
        self._thread.start()

    def _run(self, function: Callable[..., Any], args: tuple[Any, ...]) -> None:
        try:
            self._value = function(*args)
        except BaseException as exc:  # handed to the caller by result()
            self._error = exc

    def wait(self) -> None:
        self._thread.join()

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


@dataclass(frozen=True)
class _Figures:
    """The physical figures, what failures cost and the telemetry's productive figures
    of the window."""

    physical: pl.DataFrame
    failures: Failures
    productive: den.Productive
    telemetry: _WindowTelemetry
    interval_s: float | None  # the seconds of one telemetry sample
    step_interval: bool  # no GPU had two samples: each counts as one --step


def _physical_and_productive(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    start: datetime,
    end: datetime,
    timelines: tuple[pl.DataFrame, pl.DataFrame],
    telemetry_aside: _Aside,
    step: timedelta,
    health: Health,
    options: ReportOptions,
) -> _Figures:
    """:func:`fleetaudit.model.denominators.physical` and
    :func:`fleetaudit.model.failures.failures`, then, once the telemetry is read,
    :func:`fleetaudit.model.denominators.productive`."""
    physical = den.physical(nodes, allocations, start, end, timelines)
    cost = failures(
        nodes,
        allocations,
        health,
        timelines[0],
        start,
        end,
        quarantine=options.quarantine,
        within=options.interrupted_within,
    )
    del timelines
    telemetry: _WindowTelemetry = telemetry_aside.result()
    by_alloc, by_node = telemetry.by_alloc, telemetry.by_node
    interval = telemetry.cadence["interval_s"]
    samples = int(by_alloc["samples"].sum() or 0) + int(by_node["samples"].sum() or 0)
    step_interval = interval is None and samples > 0
    if step_interval:
        interval = step.total_seconds()
    prod = den.productive(nodes, allocations, start, end, by_alloc, by_node, interval)
    return _Figures(physical, cost, prod, telemetry, interval, step_interval)


def build_report(store_options: StoreOptions, options: ReportOptions) -> ReportResult:
    """Compute the report over ``[at - since, at)`` (sampled at ``step``)."""
    asides: list[_Aside] = []
    try:
        return _build_report(store_options, options, asides)
    except Exception:
        for aside in asides:  # no reader of the store outlives the call
            aside.wait()
        raise


def _build_report(
    store_options: StoreOptions, options: ReportOptions, asides: list[_Aside]
) -> ReportResult:
    if options.step <= timedelta(0):
        raise UsageError("--step: must be longer than 0s")
    if options.since is not None and options.since <= timedelta(0):
        raise UsageError("--since: must be longer than 0s")
    if (options.since or REPORT_SINCE) // options.step + 1 > MAX_INSTANTS:
        raise UsageError(
            f"--step: {options.step} over {options.since or REPORT_SINCE} gives too many instants"
        )
    if options.quarantine < 1:
        raise UsageError("--quarantine: must be 1 or more")
    if options.interrupted_within < timedelta(0):
        raise UsageError("--interrupted-within: must be 0s or more")
    notes: list[str] = []
    with reading(store_options) as store:
        check_scenario(store, options.scenario)
        stale = stale_export(store)
        if stale is not None and options.fail_if_stale:
            raise StaleExportError(f"{stale['note']} (--fail-if-stale)")
        end = resolve_at(store, options.at, options.scenario)
        window = resolve_window(
            store, end, options.since, REPORT_SINCE, options.scenario, least=options.step
        )
        start, since = window.start, window.length
        # the telemetry is read on a second connection, opened while this one holds the
        # store, so both read the same state
        reader = open_store(
            store_options.db, read_only=True, lock_timeout=store_options.lock_timeout
        )
        telemetry_aside = _Aside(_read_telemetry, reader, start, end)
        asides.append(telemetry_aside)
        notes.extend(
            data_notes(store, start, end, options.scenario, options.at is not None, window=window)
        )
        if not holds_requests(store):
            notes.append(
                "the store holds no requests: no shape is evaluated, and every idle GPU "
                "counts as unqueued"
            )
        ineligible = ineligible_note(store, end)
        if ineligible:
            notes.append(ineligible)
        requests = store.query("requests_in_window", start=start, end=end)
        demand = window_demand(requests, start, end, options.demand)
        instants = den.window_instants(end, since, options.step)
        if demand.no_gpu:
            notes.append(
                f"{demand.no_gpu} request(s) of the window's demand ask for no GPU "
                "and are not GPU shapes"
            )
        fleet_models = store.query("gpu_models")["gpu_model"].to_list()
        chosen = demand.chosen(options.max_shapes, fleet_models)
        pairs = [(d.shape, d.queued) for d in chosen]
        left_out = len(demand.shapes) - len(chosen)
        summary = _demand_summary(demand, chosen, options.max_shapes)
        coverage = model_coverage(demand, chosen, fleet_models)
        if left_out:
            share = summary["not_evaluated_share"]
            notes.append(
                f"{left_out} lighter shape(s) beyond the budget ({_budget_text(options.max_shapes)}) "
                "are not evaluated at every step"
                + ("" if share is None else f" ({share:.1%} of the demand)")
                + "; --shapes N evaluates the N heaviest"
            )
        for model, cover in coverage.items():
            if cover["requests"] and not cover["evaluated_requests"]:
                notes.append(
                    f"{model}: none of its demand's {cover['requests']:,} request(s) is among "
                    "the shapes evaluated; its schedulable figures read 'not evaluated' "
                    "(raise --shapes)"
                )
        longest = max((s.duration_s or 0.0 for s, _ in pairs), default=0.0)
        horizon = end + timedelta(seconds=longest) + timedelta(microseconds=1)
        nodes, allocations = load_frames(store, start, horizon, options.scenario)
        nodes, health = load_health(store, nodes, start, horizon)
        queued = queued_gpus(never_startable(requests, nodes), instants)
        del requests
        rejects: dict[str, int] = {}
        tables = store.table_names()  # a store written before rejects or reports were kept
        if "rejects" in tables:
            for row in store.query("rejects_by_table").iter_rows(named=True):
                rejects[row["table"]] = int(row["rejected"])
        whatifs = latest_whatif_runs(store)
        # The recoverable-capacity section reads the latest over-time compaction run
        # when there is one, else the one-instant run.
        remedies_run = whatifs.pop("remedies", None)
        over_time_run = whatifs.pop("compaction_over_time", None)
        if over_time_run is not None:
            whatifs["compaction"] = replace(over_time_run, kind="compaction")
        previous: dict[str, Any] | None = None
        history: tuple[dict[str, Any], ...] = ()
        trend_key = {
            "scenario": options.scenario,
            "span_s": since.total_seconds(),
            "step_s": options.step.total_seconds(),
            "demand": summary["mode"],
            "shapes": "default" if options.max_shapes is None else str(options.max_shapes),
        }
        if "reports" in tables:
            previous, history = _recorded(store, trend_key, end)
        if stale is not None:
            notes.append(stale["note"])
    notes.extend(n for n in beyond_fleet_all([shape for shape, _ in pairs], nodes) if n)
    share_outlook = {}
    for i, (shape, _count) in enumerate(pairs):
        if shape.is_share:
            h = evaluate_history(nodes, allocations, shape, end, since, options.step, health=health)
            share_outlook[i] = (h.p_start, h.wait_p50_s, h.wait_p90_s)
    timelines = den.window_timelines(nodes, allocations, start, end, horizon, health)
    # The physical and productive figures are polars work (no GIL): computed aside, on
    # the second core, while the schedulable sweep (numpy, one core) runs here.
    figures_aside = _Aside(
        _physical_and_productive,
        nodes, allocations, start, end, timelines, telemetry_aside, options.step, health,
        options,
    )  # fmt: skip
    asides.append(figures_aside)
    # the sweep keeps the free capacity at the instants the stranded places sample
    picks = place_picks(len(instants), nodes.height)
    sched = den.schedulable(
        nodes, allocations, pairs, instants, since, share_outlook, timelines, picks
    )
    del timelines
    places, sampled_instants = stranded_places(
        nodes,
        allocations,
        sched.steps,
        [s for s, _ in pairs],
        since,
        kept=sched.kept,
        health=health,
    )
    sampled = den.sampled_hours(sched.steps, since, ["gpu_model"])
    figures: _Figures = figures_aside.result()
    physical, prod, interval = figures.physical, figures.productive, figures.interval_s
    cadence, sources = figures.telemetry.cadence, figures.telemetry.sources
    if figures.step_interval:
        notes.append(
            "no GPU has two telemetry samples in the window; each sample counts as one --step"
        )
    models = {}
    by_model = den.productive_by(prod.allocations, "gpu_model")
    for row in physical.join(sampled, on="gpu_model", how="left").iter_rows(named=True):
        model = row["gpu_model"]
        cover = coverage.get(model, {"requests": 0, "evaluated_requests": 0,
                                     "evaluated_share": None})  # fmt: skip
        models[model] = {
            "physical": _physical(row),
            "schedulable": {
                **_schedulable(row),
                "evaluated": not (cover["requests"] and not cover["evaluated_requests"]),
                "demand": cover,
            },
            "productive": by_model.get(model) or den.productive_figures(prod.allocations.clear()),
        }
    fleet = {
        "physical": _physical(_sum_rows(physical)),
        "schedulable": {
            **_schedulable(_sum_rows(sampled.drop("gpu_model"))),
            "evaluated": bool(pairs) or not demand.requests,
            "demand": {
                "requests": demand.requests,
                "evaluated_requests": sum(d.requests for d in chosen),
                "evaluated_share": None
                if summary["not_evaluated_share"] is None
                else 1 - summary["not_evaluated_share"],
            },
        },
        "productive": den.productive_figures(prod.allocations),
    }
    tenants = _tenants(nodes, allocations, start, end, prod, fleet)
    money = None
    if options.prices is not None:
        money = _money(read_prices(options.prices), nodes, allocations, start, end, models)
    coverage = fleet["productive"]["coverage"]
    telemetry = {
        "metric": den.PRODUCTIVE_METRIC,
        "column": "telemetry.sm_active",
        "interval_s": interval,
        "samples": prod.samples,
        "interval_from_gpus": int(cadence["series"] or 0),
        "coverage": coverage,
        "unattributed_gpu_hours": prod.unattributed_gpu_s / 3600,
        "sources": sources,
        "upper_bound": any(src["upper_bound"] for src in sources),
    }
    for src in sources:
        if src["upper_bound"]:
            notes.append(
                f"{src['share']:.0%} of the telemetry samples read SM activity from "
                f"{src['metric']} ({den.UPPER_BOUND_METRICS[src['metric']]}): "
                "the productive rates are upper bounds"
            )
    notes.extend(_over_coverage(fleet, models, tenants))
    if prod.samples == 0:
        notes.append("no telemetry in the window: the productive figures are empty")
    if rejects:
        notes.append(
            f"the store's ingests rejected {sum(rejects.values()):,} row(s) ("
            + ", ".join(f"{table} {n:,}" for table, n in rejects.items())
            + "); the figures leave them out, and the rejects table says why"
        )
    end_state = occupancy.node_state(nodes, allocations, end, health=health)
    if not health.empty:
        notes.append(
            f"{figures.failures.intervals:,} health interval(s) meet the window: GPUs out of "
            "service count as unhealthy while they last, and work on them as allocated"
        )
    if health.dated:
        notes.append(
            f"{len(health.dated):,} node(s) recorded out of service have an open health "
            "interval: they count as healthy before it began"
        )
    bound = {r.pop("gpu_model"): r for r in occupancy.bound_nodes(end_state).iter_rows(named=True)}
    generated = to_utc(options.generated_at or datetime.now(timezone.utc)).replace(microsecond=0)
    outlooks = tuple(
        replace(o, requests=d.requests, demand_weight=d.weight)
        for o, d in zip(sched.shapes, chosen, strict=True)
    )
    result = ReportResult(
        generated_at=generated,
        start=start,
        end=end,
        step_s=options.step.total_seconds(),
        scenario=options.scenario,
        fleet=fleet,
        models=models,
        tenants=tenants,
        shapes=outlooks,
        shapes_left_out=left_out,
        neighbour=den.neighbour_indicator(prod.allocations),
        telemetry=telemetry,
        whatifs=whatifs,
        previous=previous,
        trend=(),
        notes=tuple(notes),
        steps=sched.steps,
        domains=_domains(end_state),
        demand=summary,
        rejects=rejects,
        bound=bound,
        history=history,
        queued=queued,
        places=places,
        places_instants=sampled_instants,
        money=money,
        remedies=None if remedies_run is None else remedies_summary(remedies_run),
        window=window,
        trend_key=trend_key,
        stale=stale,
        failures=failures_section(figures.failures),
        failures_over_time=figures.failures.over_time,
    )
    return _with_trend(result)


def _money(
    prices: Prices,
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    start: datetime,
    end: datetime,
    models: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """The report's figures in money (:func:`fleetaudit.model.money.report_money`): the
    tenants' allocated GPU-hours per model, as the tenants table counts them."""
    node_gpus = {
        str(m): float(g)
        for m, g in nodes.group_by("gpu_model").agg(pl.col("gpus").cast(pl.Float64).median()).rows()
    }
    per_tenant: list[tuple[str, str, float]] = []
    for model in sorted(node_gpus):
        mine = nodes.filter(pl.col("gpu_model") == model)
        on = allocations.filter(pl.col("node_id").cast(pl.String).is_in(mine["node_id"].cast(pl.String).to_list()))
        hours = den.tenant_hours(on, mine, start, end).filter(pl.col("tenant").is_not_null())
        per_tenant += [(t, model, float(h)) for t, h in hours.select("tenant", "allocated_gpu_hours").rows()]
    return report_money(prices, models, node_gpus, per_tenant)


def remedies_summary(run: WhatifRun) -> dict[str, Any]:
    """The report's remedies section from the latest ``whatif remedies`` run: its window,
    the heaviest shapes, and per remedy the change in starts and GPU-hours served, the
    start probability of those shapes, and its money where it was priced."""
    doc = run.document
    shown = int(doc.get("shapes_shown") or 0)
    shapes = [_shape_label(s) for s in (doc.get("shapes") or [])[:shown]]
    rows = []
    for row in [doc.get("baseline") or {}, *(doc.get("remedies") or [])]:
        replay, change, cost = row.get("replay") or {}, row.get("change") or {}, row.get("cost") or {}
        rows.append({
            "name": row.get("name"),
            "kind": row.get("kind"),
            "started": replay.get("started"),
            "started_change": change.get("started"),
            "served_gpu_hours": replay.get("served_gpu_hours"),
            "served_change": change.get("served_gpu_hours"),
            "usable_change": change.get("usable_gpu_hours"),
            "p_start": [s.get("p_start") for s in (replay.get("shapes") or [])[:shown]],
            "per_month": cost.get("per_month"),
            "per_extra_gpu_hour": cost.get("per_extra_gpu_hour"),
            "rank": cost.get("rank"),
        })  # fmt: skip
    window = doc.get("window") or {}
    return {
        "ran": describe_run(run),
        "start": window.get("start"),
        "end": window.get("end"),
        "queue": doc.get("queue"),
        "shapes": shapes,
        "rows": rows,
        "currency": (doc.get("prices") or {}).get("currency"),
        "stale": run.stale,
    }


def failure_buckets(result: ReportResult) -> list[datetime]:
    """The start of every stretch of the failures' curve (``failures.over_time``), from the
    window's start: those without unhealthy GPU-hours too, which the JSON leaves out."""
    size = timedelta(seconds=result.failures["over_time"]["bucket_s"]) if result.failures else None
    starts: list[datetime] = []
    at = result.start
    while size is not None and size > timedelta(0) and at < result.end:
        starts.append(at)
        at += size
    return starts


FAILURE_NODES_SHOWN = 100
"""The report lists at most this many nodes ranked by failures (every quarantine
candidate is counted, and named in ``quarantine``)."""


def _cost(frame: pl.DataFrame) -> dict[str, Any]:
    """Unhealthy GPU-hours of ``frame`` (rows of Failures.unhealthy): in all, recorded,
    by state, and by state and reason."""
    by_state = frame.group_by("state").agg(pl.col("gpu_hours").sum()).sort("state")
    by_reason = (
        frame.group_by("state", "reason")
        .agg(pl.col("gpu_hours").sum())
        .sort(["gpu_hours", "state", "reason"], descending=[True, False, False], nulls_last=True)
    )
    return {
        "unhealthy_gpu_hours": float(frame["gpu_hours"].sum() or 0.0),
        "recorded_gpu_hours": float(frame.filter(pl.col("recorded"))["gpu_hours"].sum() or 0.0),
        "by_state": dict(by_state.iter_rows()),
        "by_reason": by_reason.to_dicts(),
    }


def _interruptions(frame: pl.DataFrame) -> dict[str, Any]:
    bound = frame.filter(pl.col("upper_bound"))
    return {
        "allocations": frame.height,
        "lost_gpu_hours": float(frame["lost_gpu_hours"].sum() or 0.0),
        "without_checkpoint": bound.height,
        "lost_gpu_hours_without_checkpoint": float(bound["lost_gpu_hours"].sum() or 0.0),
    }


def failures_section(cost: Failures) -> dict[str, Any]:
    """The report's ``failures`` object (docs/report.md, What failures cost)."""
    models: dict[str, Any] = {}
    for row in cost.models.iter_rows(named=True):
        model = row["gpu_model"]
        models[model] = {
            **_cost(cost.unhealthy.filter(pl.col("gpu_model") == model)),
            "nodes": row["nodes"],
            "failures": row["failures"],
            "failed_nodes": row["failed_nodes"],
            "in_service_node_hours": row["in_service_node_hours"],
            "mtbf_hours": row["mtbf_hours"],
            "interrupted": _interruptions(cost.interrupted.filter(pl.col("gpu_model") == model)),
        }
    total_failures = int(cost.models["failures"].sum() or 0)
    in_service = float(cost.models["in_service_node_hours"].sum() or 0.0)
    quarantine = cost.nodes.filter(pl.col("quarantine"))["node_id"].to_list()
    return {
        "intervals": cost.intervals,
        "sources": list(cost.sources),
        "quarantine_failures": cost.quarantine,
        "interrupted_within_s": cost.within.total_seconds(),
        "fleet": {
            **_cost(cost.unhealthy),
            "nodes": int(cost.models["nodes"].sum() or 0),
            "failures": total_failures,
            "failed_nodes": int(cost.models["failed_nodes"].sum() or 0),
            "in_service_node_hours": in_service,
            "mtbf_hours": in_service / total_failures if total_failures else None,
            "interrupted": _interruptions(cost.interrupted),
        },
        "models": models,
        "quarantine": quarantine,
        "nodes_ranked": cost.nodes.height,
        "nodes": cost.nodes.head(FAILURE_NODES_SHOWN).to_dicts(),
        "over_time": {
            "bucket_s": cost.bucket.total_seconds(),
            "buckets": [
                {
                    "start": iso(bucket),
                    "by_state": dict(part.select("state", "gpu_hours").iter_rows()),
                }
                for (bucket,), part in cost.over_time.group_by(["bucket"], maintain_order=True)
            ],
        },
    }


PLACE_SAMPLES = 48
"""At most this many of the window's instants (evenly spread, both ends) attribute the
stranded GPUs to their switch domains; each splits every model's idle GPUs node by node
(on the free capacity the schedulable sweep kept at that instant)."""
PLACE_NODE_INSTANTS = 120_000
"""A budget of (node, sampled instant) pairs: a larger fleet gets fewer sampled instants
(19,400 nodes: 8), never fewer than PLACE_MIN_SAMPLES."""
PLACE_MIN_SAMPLES = 8


def place_samples(nodes: int) -> int:
    """Sampled instants for the stranded places of a fleet of ``nodes`` nodes.

    >>> [place_samples(n) for n in (12, 2_500, 4_000, 19_400)]
    [48, 48, 30, 8]
    """
    return max(PLACE_MIN_SAMPLES, min(PLACE_SAMPLES, PLACE_NODE_INSTANTS // max(nodes, 1)))


def place_picks(instants: int, nodes: int, samples: int | None = None) -> list[int]:
    """Indices of the instants (of ``instants``, evenly spread, both ends) that the
    stranded places of a fleet of ``nodes`` nodes sample.

    >>> place_picks(673, 19_400), place_picks(3, 12)
    ([0, 96, 192, 288, 384, 480, 576, 672], [0, 1, 2])
    """
    if instants <= 0:
        return []
    samples = place_samples(nodes) if samples is None else samples
    last = instants - 1
    return sorted({round(i) for i in np.linspace(0, last, min(samples, instants))})


PLACE_CAUSES = den.SPLIT


def stranded_places(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    steps: pl.DataFrame,
    shapes: Sequence[Shape],
    span: timedelta,
    samples: int | None = None,
    kept: dict[int, den.FreeAt] | None = None,
    health: Health | None = None,
) -> tuple[pl.DataFrame, int]:
    """Stranded GPU-hours per switch domain (a node without a switch is its own domain)
    and cause, and how many of the window's instants they are estimated from.

    At each sampled instant every model's idle GPUs are split by the shape that split
    them in ``steps`` (its ``best``), evaluated as ``shapes`` does on that model's nodes,
    so a domain's figures at an instant add up to the model's in ``steps``. A group of
    an ``any`` or ``block`` shape spans domains: its topology-stranded GPUs go to its
    domains in proportion to their pod slots. A model that no shape may use has all
    its free GPUs unqueued. GPU-hours are the mean over the sampled instants times the
    window's hours, as the schedulable figures are.

    ``kept``: the free capacity the schedulable sweep kept at the sampled instants
    (:attr:`fleetaudit.model.denominators.Schedulable.kept`, by instant index); the
    node states are built from it instead of computed again. Without it (or for an
    instant it lacks) each is :func:`fleetaudit.model.occupancy.node_state`.
    """
    columns = ["domain", "gpu_model", *PLACE_CAUSES]
    empty = pl.DataFrame(
        schema={
            **dict.fromkeys(columns, pl.Float64),
            "domain": pl.String,
            "gpu_model": pl.String,
            "stranded_gpu_hours": pl.Float64,
        }
    )
    instants = steps["instant"].unique().sort().to_list()
    if not instants or nodes.height == 0:
        return empty, 0
    picks = place_picks(len(instants), nodes.height, samples)
    base: pl.DataFrame | None = None  # node_state's node columns, for the kept arrays
    parts: list[pl.DataFrame] = []
    for index in picks:
        at = instants[index]
        free = (kept or {}).get(index)
        # node state per shape duration ("instant": the free GPUs at the instant alone)
        states: dict[float | str | None, pl.DataFrame] = {}
        for model, shape_index in (
            steps.filter(pl.col("instant") == at).select("gpu_model", "best").iter_rows()
        ):
            shape = None if shape_index is None else shapes[shape_index]
            duration: float | str | None
            if free is not None:
                duration = "instant" if shape is None else shape.duration_s
                if duration not in states:
                    if base is None:
                        base = nodes.with_columns(
                            pl.col("node_id").cast(pl.String), occupancy.switch_domains(nodes)
                        ).sort("node_id")
                    states[duration] = _kept_state(base, free, shape)
            else:
                seconds = 0.0 if shape is None else shape.duration_s or 0.0
                duration = seconds
                if duration not in states:
                    window = timedelta(seconds=seconds) if seconds else None
                    states[duration] = occupancy.node_state(nodes, allocations, at, window, health)
            on_model = states[duration].filter(pl.col("gpu_model") == model)
            part = (
                _unqueued_by_domain(on_model)
                if shape is None
                else _causes_by_domain(on_model, shape)
            )
            if part.height:
                parts.append(part.with_columns(pl.lit(model).alias("gpu_model")))
    if not parts:
        return empty, len(picks)
    hours = span / timedelta(hours=1) / len(picks)
    every = pl.concat(parts, how="diagonal_relaxed")
    every = every.with_columns(
        *(pl.lit(0.0).alias(c) for c in PLACE_CAUSES if c not in every.columns)
    )
    frame = (
        every.group_by("domain", "gpu_model")
        .agg(*(pl.col(c).fill_null(0.0).sum() * hours for c in PLACE_CAUSES))
        .select(columns)
    )
    frame = frame.with_columns(pl.sum_horizontal(*PLACE_CAUSES).alias("stranded_gpu_hours"))
    return (
        frame.filter(pl.col("stranded_gpu_hours") > 0).sort(
            ["stranded_gpu_hours", "gpu_model", "domain"], descending=[True, False, False]
        ),
        len(picks),
    )


def _kept_state(base: pl.DataFrame, free: den.FreeAt, shape: Shape | None) -> pl.DataFrame:
    """The node state columns the stranded causes read (free_gpus, and over the window
    of ``shape`` free_gpus_window, free_cpus_window, free_memory_gib_window; no shape:
    free_gpus alone) from the arrays the sweep kept: ``base`` is the nodes in node_id
    order with their domain. An unhealthy node reads 0 free GPUs (it is never
    eligible); a dimension no shape of this duration needs reads unbounded, as an
    undeclared one does."""
    columns = [pl.Series("free_gpus", free.now, dtype=pl.Int64)]
    if shape is not None:
        window = free.window[shape.duration_s]
        columns.append(pl.Series("free_gpus_window", window["gpus"], dtype=pl.Int64))
        for dimension, name in (("cpus", "free_cpus_window"), ("memory", "free_memory_gib_window")):
            units = window.get(dimension)
            if units is None:
                quantity = np.full(base.height, np.inf)
            else:  # exactly as node_state divides micro-units back into a quantity
                quantity = np.where(
                    units >= UNBOUNDED, np.inf, units.astype(np.float64) / SHARE_UNITS
                )
            columns.append(pl.Series(name, quantity, dtype=pl.Float64))
    return base.with_columns(columns)


def _unqueued_by_domain(state: pl.DataFrame) -> pl.DataFrame:
    """A model no shape may use: the free GPUs of its healthy nodes, per domain."""
    return (
        state.filter(usable_expr(state))
        .group_by("domain")
        .agg(pl.col("free_gpus").sum().cast(pl.Float64).alias("unqueued"))
    )


def _causes_by_domain(state: pl.DataFrame, shape: Shape) -> pl.DataFrame:
    """The shape's stranded GPUs on one model's nodes, per domain and cause.

    A group's topology-stranded GPUs go to its nodes by their pod slots: a node or
    switch group is one domain, so this only spreads the groups of any and block."""
    slots = node_slots(state, shape)
    if slots.height == 0:
        return pl.DataFrame()
    key = group_key(shape)
    groups = group_slots(slots, shape).select(
        *key, pl.col("slots").alias("group_slots"), "topology"
    )
    share = (
        pl.when(pl.col("group_slots") > 0)
        .then(pl.col("slots") / pl.col("group_slots"))
        .otherwise(1 / pl.len().over(key))
    )
    return (
        slots.join(groups, on=key, how="left")
        .with_columns((pl.col("topology") * share).alias("topology"))
        .group_by("domain")
        .agg(pl.col("interval", "fragment", "cpu_memory", "topology").sum().cast(pl.Float64))
    )


def queued_gpus(requests: pl.DataFrame, instants: Sequence[datetime]) -> pl.DataFrame:
    """GPUs of the requests waiting at each instant (``submit_time <= t < start_time``,
    or never started), per requested model (null: any model), and apart, those of
    requests that can never start on the fleet (column ``never``, where ``requests``
    has it; :func:`never_startable`).

    Each request adds its GPUs to the instants of its wait, by cumulative sums over the
    sorted instants (no request x instant product).
    """
    schema: dict[str, PolarsDataType] = {
        "instant": pl.Datetime("us"), "gpu_model": pl.String, "never": pl.Boolean,
        "queued_gpus": pl.Float64,
    }  # fmt: skip
    epoch = datetime(1970, 1, 1)
    times = np.array(sorted((to_utc(t) - epoch).total_seconds() for t in instants))
    frames = []
    if len(times) and requests.height:
        never = pl.col("never") if "never" in requests.columns else pl.lit(False)
        waiting = requests.filter(pl.col("gpus") > 0).select(
            "gpu_model",
            never.fill_null(False).alias("never"),
            pl.col("gpus").cast(pl.Float64),
            pl.col("submit_time").dt.epoch("us").cast(pl.Float64) / 1e6,
            pl.col("start_time").dt.epoch("us").cast(pl.Float64) / 1e6,
        )
        for (model, apart), group in waiting.group_by(["gpu_model", "never"], maintain_order=True):
            first = np.searchsorted(times, group["submit_time"].to_numpy(), side="left")
            ends = group["start_time"].fill_null(np.inf).to_numpy()
            last = np.searchsorted(times, ends, side="left")  # first instant it no longer waits
            delta = np.zeros(len(times) + 1)
            gpus = group["gpus"].to_numpy()
            np.add.at(delta, first, gpus)
            np.add.at(delta, last, -gpus)
            frames.append(
                pl.DataFrame(
                    {
                        "instant": [epoch + timedelta(seconds=float(t)) for t in times],
                        "gpu_model": [model] * len(times),
                        "never": [apart] * len(times),
                        "queued_gpus": np.cumsum(delta)[:-1],
                    },
                    schema=schema,
                )
            )
    if not frames:
        return pl.DataFrame(schema=schema)
    return pl.concat(frames).sort("instant", "gpu_model", "never", nulls_last=True)


def never_startable(requests: pl.DataFrame, nodes: pl.DataFrame) -> pl.DataFrame:
    """``requests`` with ``never``: its shape can never start on the fleet, whatever is
    free (:func:`fleetaudit.model.shapes.beyond_fleet`: a gang larger than any switch
    domain of its models holds, more GPUs than they have)."""
    columns = list(SHAPE_COLUMNS)
    if requests.height == 0 or not set(columns) <= set(requests.columns):
        return requests.with_columns(pl.lit(False).alias("never"))
    classed = requests.with_columns(duration_class_expr("duration_s").alias("_class"))
    keys = [*columns[:-1], "_class"]
    distinct = classed.filter(pl.col("gpus") > 0).select(keys).unique(maintain_order=True)
    flags = [
        request_shape({**r, "duration_s": r["_class"]}) for r in distinct.iter_rows(named=True)
    ]
    known = [s for s in flags if s is not None]
    beyond = iter(beyond_fleet_all(known, nodes))
    never = [False if s is None else next(beyond) is not None for s in flags]
    table = distinct.with_columns(pl.Series("never", never, dtype=pl.Boolean))
    return (
        classed.join(table, on=keys, how="left", nulls_equal=True)
        .with_columns(pl.col("never").fill_null(False))
        .drop("_class")
    )


def _demand_summary(
    demand: WindowDemand, chosen: Sequence[DemandShape], budget: int | None
) -> dict[str, Any]:
    """Which demand the report used, and how much of it the shape budget evaluates."""
    return {
        "mode": demand.mode,
        "asked": demand.asked,
        "weight": WEIGHTS[demand.mode],
        "requests": demand.requests,
        "no_gpu_requests": demand.no_gpu,
        "shapes": len(demand.shapes),
        "evaluated": len(chosen),
        "budget": budget,
        "not_evaluated_share": demand.left_out_share(chosen),
    }


def _budget_text(budget: int | None) -> str:
    if budget is None:
        return f"the {DEFAULT_SHAPES} heaviest and every GPU model's {PER_MODEL_SHAPES} heaviest"
    return f"--shapes {budget}"


def model_coverage(
    demand: WindowDemand, chosen: Sequence[DemandShape], models: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Per GPU model: the requests of the demand that may run on it (a shape of several
    models counts for each), and of them those of the shapes evaluated, with the share of
    the demand's weight on the model that they carry."""
    out: dict[str, dict[str, Any]] = {}
    for model in models:
        mine = [d for d in demand.shapes if d.shape.models is None or model in d.shape.models]
        evaluated = [d for d in mine if d in chosen]
        weight = sum(d.weight for d in mine)
        out[model] = {
            "requests": sum(d.requests for d in mine),
            "evaluated_requests": sum(d.requests for d in evaluated),
            "evaluated_share": None if weight <= 0 else sum(d.weight for d in evaluated) / weight,
        }
    return out


def allocated_kinds(result: ReportResult) -> str:
    """The report's three allocated GPU-hours, each named for what it counts (they differ:
    shares, unhealthy nodes, sampling)."""

    def hours(part: str) -> str:
        return f"{result.fleet[part]['allocated_gpu_hours']:,.0f}"

    return (
        f"allocated GPU-hours, three ways: {hours('productive')} productive, each "
        "allocation's own GPUs (a share as its fraction) on any node; "
        f"{hours('physical')} physical, the GPUs occupied on healthy nodes (a share fills "
        f"its GPU), exact; {hours('schedulable')} schedulable, the same occupied GPUs at "
        "the sampled instants"
    )


def describe_trend(result: ReportResult) -> str:
    """What the report's trend holds equal: window length, step, demand, shape budget and
    scenario (its key)."""
    key = result.trend_key
    if not key:
        return "the same window length and step"
    text = (
        f"windows of {seconds_text(key['span_s'])}, step {seconds_text(key['step_s'])}, "
        f"demand {key['demand']}, shape budget {key['shapes']}"
    )
    return text + (f", scenario {key['scenario']}" if key.get("scenario") else "")


def describe_demand(demand: dict[str, Any]) -> str:
    """One line: which demand the schedulable figures evaluate."""
    if not demand:
        return ""
    how = {
        "waited": "the requests that waited in the window, ranked by GPU-hours waited",
        "submitted": "the requests submitted in the window, ranked by GPU-hours requested",
        "queued": "the requests queued at the window's end, most queued first",
    }[demand["mode"]]
    text = (
        f"demand: {demand['mode']} ({how}): {demand['requests']:,} GPU request(s) "
        f"in {demand['shapes']:,} shape(s)"
    )
    if demand["asked"] is None and demand["mode"] == "submitted":
        text += "; no request waited in the window"
    if demand["shapes"] > demand["evaluated"]:
        share = demand["not_evaluated_share"]
        text += f"; {demand['evaluated']} evaluated ({_budget_text(demand.get('budget'))})"
        if share is not None:
            text += f", {share:.1%} of the demand not evaluated"
    return text


_OVER_SHOWN = 8  # figures named in the note on telemetry beyond allocation


def _over_coverage(
    fleet: dict[str, Any], models: dict[str, Any], tenants: dict[str, Any]
) -> list[str]:
    """Notes for the figures whose telemetry exceeds their allocated GPU-hours."""
    groups = [("the fleet", fleet), *((f"model {m}", f) for m, f in models.items())]
    groups += [(f"tenant {t}", f) for t, f in tenants.items()]
    over = [
        f"{name} {p['coverage']:.0%}"
        for name, figures in groups
        for p in (figures["productive"],)
        if p["coverage"] is not None and p["coverage"] > den.OVER_COVERAGE
    ]
    over += [
        f"workload {w} {p['coverage']:.0%}"
        for w, p in fleet["productive"]["workloads"].items()
        if p["coverage"] is not None and p["coverage"] > den.OVER_COVERAGE
    ]
    if not over:
        return []
    shown = ", ".join(over[:_OVER_SHOWN]) + (
        f" and {len(over) - _OVER_SHOWN:,} more" if len(over) > _OVER_SHOWN else ""
    )
    return [
        "telemetry exceeds the allocated GPU-hours (coverage " + shown + "): the "
        "store holds telemetry of GPUs no allocation held, or of one GPU loaded twice (an "
        "idle GPU's series, one GPU under two node names), or a shared GPU's samples name "
        "one of its holders (its whole GPU counts for that allocation); the SM-active rates "
        "are diluted"
    ]


def _tenants(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    start: datetime,
    end: datetime,
    prod: den.Productive,
    fleet: dict[str, Any],
) -> dict[str, dict[str, Any]]:
    """Per known tenant: allocated GPU-hours (shares as fractions), share, productive."""
    hours = den.tenant_hours(allocations, nodes, start, end)
    total = float(hours["allocated_gpu_hours"].sum() or 0)
    out = {}
    by_tenant = den.productive_by(prod.allocations, "tenant")
    empty = den.productive_figures(prod.allocations.clear())
    for row in hours.filter(pl.col("tenant").is_not_null()).iter_rows(named=True):
        tenant = row["tenant"]
        out[tenant] = {
            "physical": {
                "allocated_high_gpu_hours": row["allocated_high_gpu_hours"],
                "allocated_gpu_hours": row["allocated_gpu_hours"],
                "share_of_allocated": _rate(row["allocated_gpu_hours"], total),
            },
            "productive": by_tenant.get(tenant) or empty,
        }
    del fleet
    return out


def _domains(state: pl.DataFrame) -> pl.DataFrame:
    """Free GPUs per switch domain in the node state at the window's end (healthy nodes),
    for the heatmap."""
    healthy = usable_expr(state)
    return (
        state.group_by("domain")
        .agg(
            pl.col("gpu_model").unique().sort().str.join("|").alias("gpu_model"),
            pl.len().alias("nodes"),
            pl.col("gpus").sum().alias("gpus"),
            (
                pl.col("gpus").filter(~healthy).sum()
                + (
                    pl.col("gpus_unhealthy").filter(healthy).sum()
                    if "gpus_unhealthy" in state.columns
                    else 0
                )
            ).alias("unhealthy_gpus"),
            pl.col("free_gpus").filter(healthy).sum().alias("free_gpus"),
        )
        .sort("gpu_model", "domain")
    )


def _recorded(
    store: Store, key: dict[str, Any], end: datetime
) -> tuple[dict[str, Any] | None, tuple[dict[str, Any], ...]]:
    """The recorded reports of this report's trend (``key``: the same state, window
    length, step, demand and shape budget) whose windows end before ``end``, one per
    window, in window-end order (the trend chart), and the last of them (the trend's
    baseline: the preceding window). A report of the same window is this one's
    predecessor in the store, which recording this one replaces: no point of its own.
    A store whose reports lack the key's columns (recorded before they were kept) has
    none of this trend."""
    if not {"demand", "shapes"} <= set(store.column_types("reports")):
        return None, ()
    rows = store.query("report_history", **key, end=end).rows(named=True)
    history = tuple(
        {
            "created_at": to_utc(row["created_at"]),
            "at": to_utc(row["at"]),
            "start": to_utc(row["start"]),
            "end": to_utc(row["end"]),
            "figures": json.loads(row["figures"]),
        }
        for row in rows
        if to_utc(row["end"]) < end
    )
    return (history[-1] if history else None), history


def stale_export(store: Store) -> dict[str, Any] | None:
    """Whether the store's export time is the one the last recorded report saw (an
    export that did not move: ``exports/latest`` not refreshed): recorded_at,
    export_time and a note; None when it moved, or no report recorded it."""
    if "reports" not in store.table_names() or "exported" not in store.column_types("reports"):
        return None
    last = store.query("last_recorded_report")
    if last.height == 0 or last["exported"][0] is None:
        return None
    exported = to_utc(last["exported"][0])
    if export_time(store) != exported:
        return None
    recorded = to_utc(last["created_at"][0]).replace(microsecond=0)
    return {
        "recorded_at": recorded,
        "export_time": exported,
        "note": (
            f"the export time ({iso(exported)}) has not moved since the report recorded at "
            f"{iso(recorded)}: no data was ingested since then (is the export stale?)"
        ),
    }


def trend_series(result: ReportResult) -> list[dict[str, Any]]:
    """The headline figures of the recorded windows of this report's trend that end
    before it, then this report's: one point per window, by window end (created_at, at,
    start, end, figures)."""
    points = [dict(h) for h in result.history]
    points.append(
        {"created_at": result.generated_at, "at": result.end, "start": result.start,
         "end": result.end, "figures": result.headline()}
    )  # fmt: skip
    return points


TREND_RATES = (
    ("physical.allocation_rate_high", "allocation rate, high"),
    ("physical.allocation_rate", "allocation rate, high + low"),
    ("usable_share", "usable share of idle"),
    ("productive.productive_rate", "SM-active rate"),
)
"""The headline rates drawn across the recorded reports (usable_share: usable / idle)."""


def _rate_of(figures: dict[str, Any], key: str) -> float | None:
    if key == "usable_share":
        idle = figures.get("schedulable.idle_gpu_hours_per_hour")
        usable = figures.get("schedulable.usable_gpu_hours_per_hour")
        return None if not idle or usable is None else usable / idle
    value = figures.get(key)
    return None if value is None else float(value)


def trend_rates(result: ReportResult) -> tuple[tuple[str, str, list[float | None]], ...]:
    """(key, label, the rate at every recorded report of this window length and step and
    at this one, oldest first) for each of :data:`TREND_RATES`."""
    series = trend_series(result)
    return tuple(
        (key, label, [_rate_of(p["figures"], key) for p in series]) for key, label in TREND_RATES
    )


def _with_trend(result: ReportResult) -> ReportResult:
    if result.previous is None:
        return result
    before = result.previous["figures"]
    trend = []
    for part, key, label in HEADLINES:
        name = f"{part}.{key}"
        value = result.headline()[name]
        old = before.get(name)
        trend.append(
            {
                "figure": name,
                "label": label,
                "value": value,
                "previous": old,
                "change": None if value is None or old is None else value - old,
            }
        )
    return ReportResult(**{**result.__dict__, "trend": tuple(trend)})


def record_report(store_options: StoreOptions, result: ReportResult) -> str | None:
    """Keep the report's headline figures in the store, for the next report's trend.

    Returns None when recorded, else why not (a store this user cannot write: the
    report itself stands).
    """
    db = store_options.db
    if not os.access(db, os.W_OK) or not os.access(db.resolve().parent, os.W_OK):
        return f"{db} is read-only for this user"
    try:
        _record(store_options, result)
    except StoreError as exc:  # not StoreBusyError: a busy store is retried by the user
        return str(exc)
    return None


def _record(store_options: StoreOptions, result: ReportResult) -> None:
    """One point per window of a trend: the report replaces one recorded before it of the
    same trend and window end."""
    key = result.trend_key
    with writing(store_options) as store, store.transaction():
        store.execute("delete_report_window", **key, end=result.end)
        store.execute(
            "insert_report",
            generated_at=result.generated_at,
            at=result.end,
            start=result.start,
            end=result.end,
            step_s=key["step_s"],
            scenario=key["scenario"],
            demand=key["demand"],
            shapes=key["shapes"],
            exported=export_time(store),
            figures=json.dumps(result.headline(), sort_keys=True),
        )


def describe_run(run: WhatifRun) -> str:
    """When a what-if ran and on what, in one line (its options are in the JSON)."""
    text = f"ran {iso(run.created_at.replace(microsecond=0))} at {iso(run.at)}"
    if run.scenario:
        text += f" on scenario {run.scenario}"
    if run.stale:
        text += " (stale: data was ingested after it ran)"
    return text


_HARVEST_KEYS = (
    "policy", "allocation_rate_high", "allocation_rate", "standby_gpu_hours", "harvested_share",
    "lp_completion_s", "preemptions", "forced_kills", "lost_gpu_hours", "unfinished",
)  # fmt: skip


def recoverable_summary(run: WhatifRun) -> dict[str, Any]:
    """The figures of a stored what-if document, read defensively (absent keys stay absent).

    Returns created_at, at, scenario, options, stale, ran (one line), schema,
    and for compaction partial_nodes/free_nodes before and after, bound_free_nodes,
    moves and migration (freed_gpus, pause_gpu_hours, payback_s, gpus_moved); label
    (``over time`` or ``one instant``) and, for an over-time run, over_time (the
    window's time-averaged figures); for harvesting the window and one row per policy.
    """
    doc = run.document if isinstance(run.document, dict) else {}
    out: dict[str, Any] = {
        "created_at": iso(run.created_at),
        "at": iso(run.at),
        "scenario": run.scenario,
        "options": run.options,
        "stale": run.stale,
        "ran": describe_run(run),
        "schema": doc.get("schema"),
    }
    if run.kind == "compaction":
        for side in ("before", "after"):
            part = doc.get(side)
            if isinstance(part, dict):
                out[side] = {
                    k: part[k] for k in ("partial_nodes", "free_nodes", "instances") if k in part
                }
        bound = doc.get("bound")
        if isinstance(bound, dict) and "free_nodes" in bound:
            out["bound_free_nodes"] = bound["free_nodes"]
        if isinstance(doc.get("moves"), list):
            out["moves"] = len(doc["moves"])
        migration = doc.get("migration")
        if isinstance(migration, dict):
            keys = ("freed_gpus", "pause_gpu_hours", "payback_s", "gpus_moved")
            out["migration"] = {k: migration[k] for k in keys if k in migration}
        over = doc.get("over_time")
        out["label"] = "one instant"
        if isinstance(over, dict):
            out["label"] = "over time"
            partial = over.get("partial_nodes")
            partial = partial if isinstance(partial, dict) else {}
            migration = over.get("migration")
            migration = migration if isinstance(migration, dict) else {}
            out["over_time"] = {
                "start": over.get("start"),
                "end": over.get("end"),
                "every_s": over.get("every_s"),
                "moves_per_hour": over.get("moves_per_hour"),
                "partial_nodes_without": partial.get("without"),
                "partial_nodes_with": partial.get("with"),
                "reduction_pct": partial.get("reduction_pct"),
                "paper_reduction_pct": partial.get("paper_reduction_pct"),
                "free_nodes": over.get("free_nodes"),
                "earlier": over.get("earlier"),
                "migration_gpu_hours": migration.get("pause_gpu_hours"),
                "gpus_moved": migration.get("gpus_moved"),
                "budget": over.get("budget"),
                "queue": over.get("queue"),
                "calibration": _calibration_summary(over.get("calibration")),
            }
    else:
        if isinstance(doc.get("window"), dict):
            out["window"] = doc["window"]
        policies = doc.get("policies")
        if isinstance(policies, list):
            out["policies"] = [
                {k: p[k] for k in _HARVEST_KEYS if k in p} for p in policies if isinstance(p, dict)
            ]
    return out


def _calibration_summary(calibration: object) -> dict[str, Any] | None:
    """A stored run's baseline beside the record (started, waits), read defensively."""
    if not isinstance(calibration, dict):
        return None
    record, baseline = calibration.get("record"), calibration.get("baseline")
    if not isinstance(record, dict) or not isinstance(baseline, dict):
        return None
    found = baseline.get("replay")
    replay: dict[str, Any] = found if isinstance(found, dict) else {}
    keys = ("arrived", "started", "wait_p50_s", "wait_p90_s")
    return {
        "discipline": calibration.get("discipline"),
        "record": {k: record.get(k) for k in keys},
        "baseline": {k: replay.get(k) for k in keys},
        "within_tolerance": baseline.get("within_tolerance"),
        "notes": baseline.get("notes") or [],
    }


def _shape_label(shape: object) -> str:
    """A stored document's shape as ``shapes`` labels it; read defensively."""
    if not isinstance(shape, dict):
        return str(shape)
    keys = ("gpu_model", "gpus", "gpus_per_pod", "cpus_per_gpu", "memory_gib_per_gpu",
            "locality", "duration_s")  # fmt: skip
    try:
        return make_shape(**{k: shape[k] for k in keys if k in shape}).label()
    except (UsageError, TypeError, ValueError):
        return ", ".join(f"{k} {v}" for k, v in shape.items())


def _shape_key(shape: object) -> str:
    return json.dumps(shape, sort_keys=True, default=str)


def recoverable_view(summary: dict[str, Any]) -> dict[str, Any]:
    """What a stored compaction run recovers, in a planner's terms: GPUs and nodes freed,
    instances gained per shape, and the pause it costs. Missing figures stay None."""
    before, after = summary.get("before", {}), summary.get("after", {})
    migration = summary.get("migration", {})

    def number(value: object) -> float | None:
        return (
            float(value)
            if isinstance(value, (int, float)) and not isinstance(value, bool)
            else None
        )

    def shown(value: object) -> object:
        """A number as a float, anything else (a document's odd value) as text, or None."""
        return value if value is None or number(value) is None else number(value)

    free_before, free_after = number(before.get("free_nodes")), number(after.get("free_nodes"))
    gained = []
    then = {
        _shape_key(i.get("shape")): number(i.get("instances"))
        for i in before.get("instances", []) or []
        if isinstance(i, dict)
    }
    for item in after.get("instances", []) or []:
        if not isinstance(item, dict):
            continue
        now, was = number(item.get("instances")), then.get(_shape_key(item.get("shape")))
        gained.append(
            {
                "shape": _shape_label(item.get("shape")),
                "before": was,
                "after": now,
                "gained": None if now is None or was is None else now - was,
            }
        )
    return {
        "freed_gpus": shown(migration.get("freed_gpus")),
        "freed_nodes": None
        if free_before is None or free_after is None
        else free_after - free_before,
        "free_before": shown(before.get("free_nodes")),
        "free_after": shown(after.get("free_nodes")),
        "bound_free_nodes": shown(summary.get("bound_free_nodes")),
        "moves": shown(summary.get("moves")),
        "pause_gpu_hours": shown(migration.get("pause_gpu_hours")),
        "payback_s": number(migration.get("payback_s")),
        # the shapes that gained most first, then the document's order
        "instances": tuple(sorted(gained, key=lambda i: -(i["gained"] or 0))),
    }
