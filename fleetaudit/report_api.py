"""``fleetaudit report``: read the store, compute the three denominators, return a result.

Orchestration only: the figures are :mod:`fleetaudit.denominators`; the HTML is
:mod:`fleetaudit.report`, the JSON :mod:`fleetaudit.contract`, the terminal
:mod:`fleetaudit.console`. The store is opened for reading; recording the
report's headline figures for the next report's trend (:func:`record_report`)
opens it for writing afterwards, once the files are written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any

import polars as pl

from fleetaudit import denominators as den
from fleetaudit import occupancy
from fleetaudit.api import (
    StoreOptions,
    WhatifRun,
    check_scenario,
    latest_whatif_runs,
    load_frames,
    reading,
    resolve_at,
    writing,
)
from fleetaudit.errors import UsageError
from fleetaudit.history import MAX_INSTANTS, evaluate_history
from fleetaudit.shapes_api import queued_shapes
from fleetaudit.store import Store
from fleetaudit.times import iso, to_utc

REPORT_SCHEMA = "fleetaudit.report/1"

HEADLINES: tuple[tuple[str, str, str], ...] = (
    ("physical", "allocation_rate_high", "allocation rate, high priority"),
    ("physical", "allocation_rate", "allocation rate, high + low"),
    ("physical", "healthy_gpu_hours", "healthy GPU-hours"),
    ("schedulable", "idle_gpu_hours", "idle GPU-hours"),
    ("schedulable", "usable_gpu_hours", "usable GPU-hours"),
    ("schedulable", "stranded_total_gpu_hours", "stranded GPU-hours"),
    ("productive", "productive_rate", "SM-active rate"),
)
"""(denominator, key, label) of the fleet figures whose change the trend shows."""


@dataclass(frozen=True)
class ReportOptions:
    """What ``fleetaudit report`` covers (defaults are the command line's)."""

    at: datetime | None = None
    since: timedelta = timedelta(days=7)
    step: timedelta = timedelta(minutes=15)
    scenario: str | None = None
    max_shapes: int = 20  # budget: queued shapes evaluated at every step, most queued first
    generated_at: datetime | None = None  # the clock, injectable for tests


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

    def headline(self) -> dict[str, float | None]:
        """The fleet's headline figures (recorded for the next report's trend)."""
        return {f"{part}.{key}": _get(self.fleet[part], key) for part, key, _label in HEADLINES}


def _get(figures: dict[str, Any], key: str) -> float | None:
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


def build_report(store_options: StoreOptions, options: ReportOptions) -> ReportResult:
    """Compute the report over ``[at - since, at)`` (sampled at ``step``)."""
    if options.step <= timedelta(0):
        raise UsageError("--step: must be longer than 0s")
    if options.since <= timedelta(0):
        raise UsageError("--since: must be longer than 0s")
    if options.since // options.step + 1 > MAX_INSTANTS:
        raise UsageError(f"--step: {options.step} over {options.since} gives too many instants")
    notes: list[str] = []
    with reading(store_options) as store:
        check_scenario(store, options.scenario)
        end = resolve_at(store, options.at, options.scenario)
        start = end - options.since
        queued = store.query("queued_requests_at", at=end)
        pairs, cpu_only = queued_shapes(queued)
        if cpu_only:
            notes.append(f"{cpu_only} queued request(s) ask for no GPU and are not GPU shapes")
        left_out = max(len(pairs) - options.max_shapes, 0)
        if left_out:
            notes.append(
                f"{left_out} less-queued shape(s) beyond the budget of {options.max_shapes} "
                "are not evaluated at every step"
            )
            pairs = pairs[: options.max_shapes]
        longest = max((s.duration_s or 0.0 for s, _ in pairs), default=0.0)
        horizon = end + timedelta(seconds=longest) + timedelta(microseconds=1)
        nodes, allocations = load_frames(store, start, horizon, options.scenario)
        by_alloc = store.query("telemetry_by_alloc", start=start, end=end)
        by_node = store.query("telemetry_by_node", start=start, end=end)
        cadence = store.query("telemetry_interval", start=start, end=end).row(0, named=True)
        whatifs = latest_whatif_runs(store)
        # The recoverable-capacity section reads the latest over-time compaction run
        # when there is one, else the one-instant run.
        over_time_run = whatifs.pop("compaction_over_time", None)
        if over_time_run is not None:
            whatifs["compaction"] = replace(over_time_run, kind="compaction")
        previous = _previous(store, options.scenario)
    if nodes.height == 0:
        raise UsageError(f"{store_options.db}: the store holds no nodes; ingest a nodes table")
    instants = den.window_instants(end, options.since, options.step)
    share_outlook = {}
    for i, (shape, _count) in enumerate(pairs):
        if shape.is_share:
            h = evaluate_history(nodes, allocations, shape, end, options.since, options.step)
            share_outlook[i] = (h.p_start, h.wait_p50_s, h.wait_p90_s)
    timelines = den.window_timelines(nodes, allocations, start, end, horizon)
    sched = den.schedulable(
        nodes, allocations, pairs, instants, options.since, share_outlook, timelines
    )
    physical = den.physical(nodes, allocations, start, end, timelines)
    del timelines
    sampled = den.sampled_hours(sched.steps, options.since, ["gpu_model"])
    interval = cadence["interval_s"]
    samples = int(by_alloc["samples"].sum() or 0) + int(by_node["samples"].sum() or 0)
    if interval is None and samples > 0:
        interval = options.step.total_seconds()
        notes.append(
            "no GPU has two telemetry samples in the window; each sample counts as one --step"
        )
    prod = den.productive(nodes, allocations, start, end, by_alloc, by_node, interval)
    models = {}
    by_model = den.productive_by(prod.allocations, "gpu_model")
    for row in physical.join(sampled, on="gpu_model", how="left").iter_rows(named=True):
        model = row["gpu_model"]
        models[model] = {
            "physical": _physical(row),
            "schedulable": _schedulable(row),
            "productive": by_model.get(model) or den.productive_figures(prod.allocations.clear()),
        }
    fleet = {
        "physical": _physical(_sum_rows(physical)),
        "schedulable": _schedulable(_sum_rows(sampled.drop("gpu_model"))),
        "productive": den.productive_figures(prod.allocations),
    }
    tenants = _tenants(nodes, allocations, start, end, prod, fleet)
    coverage = fleet["productive"]["coverage"]
    telemetry = {
        "metric": den.PRODUCTIVE_METRIC,
        "column": "telemetry.sm_active",
        "interval_s": interval,
        "samples": prod.samples,
        "interval_from_gpus": int(cadence["series"] or 0),
        "coverage": coverage,
        "unattributed_gpu_hours": prod.unattributed_gpu_s / 3600,
    }
    if prod.samples == 0:
        notes.append("no telemetry in the window: the productive figures are empty")
    generated = to_utc(options.generated_at or datetime.now(timezone.utc)).replace(microsecond=0)
    result = ReportResult(
        generated_at=generated,
        start=start,
        end=end,
        step_s=options.step.total_seconds(),
        scenario=options.scenario,
        fleet=fleet,
        models=models,
        tenants=tenants,
        shapes=sched.shapes,
        shapes_left_out=left_out,
        neighbour=den.neighbour_indicator(prod.allocations),
        telemetry=telemetry,
        whatifs=whatifs,
        previous=previous,
        trend=(),
        notes=tuple(notes),
        steps=sched.steps,
        domains=_domains(nodes, allocations, end),
    )
    return _with_trend(result)


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


def _domains(nodes: pl.DataFrame, allocations: pl.DataFrame, at: datetime) -> pl.DataFrame:
    """Free GPUs per switch domain at ``at`` (healthy nodes), for the heatmap."""
    state = occupancy.node_state(nodes, allocations, at)
    healthy = pl.col("health") == "healthy"
    return (
        state.group_by("domain")
        .agg(
            pl.col("gpu_model").unique().sort().str.join("|").alias("gpu_model"),
            pl.len().alias("nodes"),
            pl.col("gpus").sum().alias("gpus"),
            pl.col("gpus").filter(~healthy).sum().alias("unhealthy_gpus"),
            pl.col("free_gpus").filter(healthy).sum().alias("free_gpus"),
        )
        .sort("gpu_model", "domain")
    )


def _previous(store: Store, scenario: str | None) -> dict[str, Any] | None:
    if "reports" not in store.table_names():  # a store written before reports were kept
        return None
    rows = store.query("previous_report", scenario=scenario)
    if rows.height == 0:
        return None
    row = rows.row(0, named=True)
    return {
        "created_at": to_utc(row["created_at"]),
        "at": to_utc(row["at"]),
        "start": to_utc(row["start"]),
        "end": to_utc(row["end"]),
        "figures": json.loads(row["figures"]),
    }


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


def record_report(store_options: StoreOptions, result: ReportResult) -> None:
    """Keep the report's headline figures in the store, for the next report's trend."""
    with writing(store_options) as store:
        store.execute(
            "insert_report",
            generated_at=result.generated_at,
            at=result.end,
            start=result.start,
            end=result.end,
            step_s=result.step_s,
            scenario=result.scenario,
            figures=json.dumps(result.headline(), sort_keys=True),
        )


def describe_run(run: WhatifRun) -> str:
    """When and with which options a what-if ran, in one line."""
    options = ", ".join(f"{k}={v}" for k, v in sorted(run.options.items()) if v is not None)
    text = f"ran {iso(run.created_at.replace(microsecond=0))} at {iso(run.at)}"
    if run.scenario:
        text += f" on scenario {run.scenario}"
    if options:
        text += f" with {options}"
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
    moves, label (``over time`` or ``one instant``) and, for an over-time run,
    over_time (the window's time-averaged figures); for harvesting the window and one row per policy.
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
                out[side] = {k: part[k] for k in ("partial_nodes", "free_nodes") if k in part}
        bound = doc.get("bound")
        if isinstance(bound, dict) and "free_nodes" in bound:
            out["bound_free_nodes"] = bound["free_nodes"]
        if isinstance(doc.get("moves"), list):
            out["moves"] = len(doc["moves"])
        over = doc.get("over_time")
        out["label"] = "one instant"
        if isinstance(over, dict):
            out["label"] = "over time"
            partial = over.get("partial_nodes") if isinstance(over.get("partial_nodes"), dict) else {}
            migration = over.get("migration") if isinstance(over.get("migration"), dict) else {}
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
