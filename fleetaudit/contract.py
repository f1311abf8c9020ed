"""The versioned JSON documents of SPEC (what scripts read).

Each document carries ``"schema": "fleetaudit.<command>/1"``; a change that
breaks a reader bumps the number. Extra keys may be added without a bump.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from fleetaudit.times import iso

# Type names only: a command loads the engine it runs, not all of them (compaction_api
# and harvest_api also import this module to record their runs).
if TYPE_CHECKING:
    from fleetaudit.api import RejectsResult
    from fleetaudit.compaction import Snapshot
    from fleetaudit.compaction_api import CompactionReport
    from fleetaudit.harvest_api import HarvestingResult
    from fleetaudit.paper_api import PaperResult
    from fleetaudit.placement_api import PlacementResult
    from fleetaudit.report_api import ReportResult
    from fleetaudit.shapes_api import ShapeReport, ShapesResult

REJECTS_SCHEMA = "fleetaudit.rejects/1"
SHAPES_SCHEMA = "fleetaudit.shapes/1"
PLACEMENT_SCHEMA = "fleetaudit.placement/1"


def shape_entry(report: ShapeReport) -> dict[str, Any]:
    """One element of ``shapes`` (SPEC §3)."""
    entry: dict[str, Any] = {
        "shape": report.evaluation.shape.as_json(),
        "queued": report.queued,
        "instances": report.instances,
        "gpus": report.evaluation.ledger.as_json(),
        "reclaimable": None if report.reclaim is None else report.reclaim.as_json(),
        "history": None if report.history is None else report.history.as_json(),
    }
    if report.capped:
        entry["capped"] = True
    if report.calibration is not None:
        entry["calibration"] = report.calibration.as_json()
    return entry


def shapes_document(result: ShapesResult) -> dict[str, Any]:
    """The ``fleetaudit shapes --json`` document."""
    return {
        "schema": SHAPES_SCHEMA,
        "at": iso(result.at),
        "scenario": result.scenario,
        "shapes": [shape_entry(r) for r in result.shapes],
        "notes": list(result.notes),
    }


def placement_document(result: PlacementResult) -> dict[str, Any]:
    """The ``fleetaudit whatif placement --json`` document (SPEC §5).

    Fill mode: each curve point is keyed by arrived_pct. By-time mode: by
    instant_pct (of the window) and instant, with queued and started counts.
    """
    keys = (
        ("arrived_pct", "allocated_pct", "fragmented_pct", "failed")
        if result.mode == "fill"
        else ("instant_pct", "allocated_pct", "fragmented_pct", "queued", "started", "failed")
    )

    def point(row: dict[str, Any]) -> dict[str, Any]:
        entry: dict[str, Any] = {k: round(float(row[k]), 6) for k in keys}
        if "instant" in row:
            entry["instant"] = iso(row["instant"])
        return entry

    document: dict[str, Any] = {
        "schema": PLACEMENT_SCHEMA,
        "mode": result.mode,
        "fill_pct": result.fill_pct,
        "seeds": result.seeds,
        "gpus": result.gpus,
        "policies": [
            {"policy": policy, "curve": [point(r) for r in curve.iter_rows(named=True)]}
            for policy, curve in result.curves.items()
        ],
        "saved_as": result.saved,
        "saved_policy": result.saved_policy,
    }
    if result.mode == "time":
        document["window"] = {"start": iso(result.start), "end": iso(result.at)}
        document["queue"] = result.queue
        document["empty"] = result.empty
    return document


# -- report (SPEC §7) --------------------------------------------------------------------


def _rounded(value: Any) -> Any:
    """Floats to 6 decimals (sampled sums carry float noise), recursively."""
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def report_document(result: ReportResult) -> dict[str, Any]:
    """The ``fleetaudit report --json PATH`` document (SPEC §7, schema fleetaudit.report/1).

    Beyond SPEC's keys: schedulable.stranded_gpu_hours.unqueued (idle GPUs no
    queued whole-GPU shape may use) and unhealthy_gpu_hours; productive
    allocated_gpu_hours, coverage and per-workload detail; tenants, shapes,
    cpu_neighbour, telemetry provenance, recoverable, trend and notes.
    """
    from fleetaudit.api import WHATIF_KINDS
    from fleetaudit.report_api import REPORT_SCHEMA, recoverable_summary

    return _rounded(
        {
            "schema": REPORT_SCHEMA,
            "generated_at": iso(result.generated_at),
            "window": {
                "start": iso(result.start),
                "end": iso(result.end),
                "step_s": result.step_s,
                "instants": result.steps["instant"].n_unique(),
            },
            "scenario": result.scenario,
            "fleet": result.fleet,
            "models": result.models,
            "tenants": result.tenants,
            "shapes": [
                {**s.as_json(), "usable_gpu_hours_as_best": s.usable_gpu_hours}
                for s in result.shapes
            ],
            "shapes_left_out": result.shapes_left_out,
            "demand": result.demand,
            "rejects": result.rejects,
            "cpu_memory_bound": {"at": iso(result.end), "models": result.bound},
            "cpu_neighbour": result.neighbour,
            "telemetry": result.telemetry,
            "recoverable": {
                kind: None if run is None else {**recoverable_summary(run), "kind": kind}
                for kind, run in ((k, result.whatifs.get(k)) for k in WHATIF_KINDS)
            },
            "trend": {
                "previous": None
                if result.previous is None
                else {
                    "created_at": iso(result.previous["created_at"]),
                    "at": iso(result.previous["at"]),
                },
                "figures": list(result.trend),
                "history": [
                    {
                        "created_at": iso(h["created_at"]),
                        "at": iso(h["at"]),
                        "figures": h["figures"],
                    }
                    for h in result.history
                ],
            },
            "stranded_places": {
                "sampled_instants": result.places_instants,
                "domains": result.places.to_dicts(),
            },
            "notes": list(result.notes),
        }
    )


COMPACTION_SCHEMA = "fleetaudit.compaction/1"
BOUND_METHOD = (
    "per partition: nodes - nodes pinned by immovable GPU work - the fewest other nodes "
    "whose capacity, largest first, covers the movable GPUs, CPUs and memory that the "
    "pinned nodes' room cannot (shares as fractions, gangs unconstrained)"
)


def compaction_document(report: CompactionReport) -> dict[str, Any]:
    """The ``fleetaudit whatif compaction --json`` document (SPEC §4).

    Beyond the SPEC keys: the options, the migration cost, the partitions that
    hit a budget, every partition's counts, and with ``--exact`` the ILP's
    optimum and the heuristic's gap to it over the partitions it solved.
    """
    from fleetaudit.compaction_over_time import over_time_json

    result = report.result

    def snapshot(s: Snapshot) -> dict[str, Any]:
        return {
            "partial_nodes": s.partial_nodes,
            "free_nodes": s.free_nodes,
            "instances": [
                {"shape": shape.as_json(), "queued": queued, "instances": n}
                for (shape, n), queued in zip(s.instances, report.queued, strict=True)
            ],
        }

    exact = None
    if report.options.exact:
        solved = [p for p in result.partitions if p.exact_status in ("optimal", "bound")]
        optimum = sum(p.exact_free or 0 for p in solved)
        heuristic = sum(p.after_free for p in solved)
        exact = {
            "partitions_solved": len(solved),
            "free_nodes": optimum,
            "heuristic_free_nodes": heuristic,
            "gap": optimum - heuristic,
            "seconds": round(sum(p.exact_seconds or 0.0 for p in result.partitions), 4),
            "unsolved": [
                {"partition": p.index, "status": p.exact_status}
                for p in result.partitions
                if p.exact_status not in ("optimal", "bound")
            ],
        }
    return {
        "schema": COMPACTION_SCHEMA,
        "at": iso(report.at),
        "scenario": report.scenario,
        "partitions": len(result.partitions),
        "seconds": round(report.seconds, 3),
        "moves": [m.as_json() for m in result.moves],
        "before": snapshot(result.before),
        "after": snapshot(result.after),
        "bound": {"free_nodes": result.bound_free_nodes, "method": BOUND_METHOD},
        "budgets_hit": [
            {"partition": p.index, "gpu_model": p.gpu_model, "budgets": list(p.budgets_hit)}
            for p in result.budgets_hit
        ],
        "migration": result.migration.as_json(),
        "exact": exact,
        "by_partition": [p.as_json() for p in result.partitions],
        "options": {**asdict(report.options)},
        "saved_as": report.saved,
        "notes": list(report.notes),
        "over_time": None
        if report.over_time is None or report.over_time_options is None
        else over_time_json(report.over_time, report.over_s or 0.0, report.over_time_options),
    }


HARVESTING_SCHEMA = "fleetaudit.harvesting/1"


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(float(value), digits)


def harvesting_document(result: HarvestingResult) -> dict[str, Any]:
    """The ``fleetaudit whatif harvesting --json`` document (SPEC §6).

    Per policy the SPEC's keys, plus: evictions (the preemptions a waking
    lender caused, already in ``preemptions``), jobs and unfinished_open
    (open-ended jobs, which cannot finish in the window), the GPU-hours behind
    the rates, and ``overcommitted`` (events where recorded work alone
    exceeded a node), ``search_budget_hits`` (node searches cut by the scan
    budget).
    """
    policies = []
    for r in result.policies:
        completion = r.completion_s()
        jobs = r.jobs
        policies.append(
            {
                "policy": r.policy,
                "allocation_rate_high": _round(r.allocation_rate_high),
                "allocation_rate": _round(r.allocation_rate),
                "standby_gpu_hours": _round(r.standby_gpu_hours, 3),
                "harvested_share": _round(r.harvested_share),
                "lp_completion_s": {k: _round(v, 1) for k, v in completion.items()},
                "preemptions": r.preemptions,
                "forced_kills": r.forced_kills,
                "lost_gpu_hours": _round(r.lost_gpu_hours, 3),
                "unfinished": r.unfinished,
                "evictions": r.evictions,
                "harvested_gpu_hours": _round(r.harvested_gpu_hours, 3),
                "healthy_gpu_hours": _round(r.healthy_gpu_hours, 3),
                "allocated_high_gpu_hours": _round(r.allocated_high_gpu_hours, 3),
                "allocated_gpu_hours": _round(r.allocated_gpu_hours, 3),
                "lp_gpu_hours": _round(r.lp_gpu_hours, 3),
                "jobs": jobs.height,
                "jobs_in_window": int(jobs["in_window"].sum()),
                "unfinished_open": int(jobs["need_s"].null_count()),
                "overcommitted": r.overcommitted,
                "search_budget_hits": r.budget_hits,
            }
        )
    return {
        "schema": HARVESTING_SCHEMA,
        "window": {"start": iso(result.start), "end": iso(result.end)},
        "scenario": result.scenario,
        "telemetry": {"samples": result.telemetry_samples, "sleeps": result.sleeps},
        "options": result.run.as_json(),
        "policies": policies,
        "notes": list(result.notes),
    }


def rejects_document(result: RejectsResult) -> dict[str, Any]:
    """``fleetaudit rejects --json``: one ingest call's rejected rows."""
    return {
        "schema": REJECTS_SCHEMA,
        "ingest_id": result.ingest_id,
        "total": result.total,
        "shown": result.rejects.height,
        "rejects": [
            {k: r[k] for k in ("file", "table", "row", "column", "value", "reason")}
            for r in result.rejects.iter_rows(named=True)
        ],
    }


def _pct(value: float | None) -> float | None:
    return None if value is None else _round(100 * value, 4)


def paper_document(result: PaperResult) -> dict[str, Any]:
    """``fleetaudit paper --json`` (fleetaudit.paper/1; docs/paper.md)."""
    from fleetaudit.paper import DIFFERENCES
    from fleetaudit.paper_api import PAPER_SCHEMA

    f = result.figures
    by_model: dict[str, Any] = {}
    for row in f.allocation.iter_rows(named=True):
        mine = result.fleet_allocation.get(row["gpu_model"])
        by_model[row["gpu_model"]] = {
            "hp_pct": _pct(row["hp"]),
            "hp_lp_pct": _pct(row["hp_lp"]),
            "samples": row["samples"],
            "fleetaudit": None
            if mine is None
            else {
                "allocation_rate_high_pct": _pct(mine["allocation_rate_high"]),
                "allocation_rate_pct": _pct(mine["allocation_rate"]),
            },
        }
    shapes = []
    for row in f.idle.iter_rows(named=True):
        total = row["total_idle"]
        mine = result.fleet_idle.get((row["gpus"], row["cpus"]))
        shapes.append(
            {
                "gpus": row["gpus"],
                "cpus": row["cpus"],
                **{k: _round(row[k]) for k in ("fractional", "stranded", "insufficient_cpu")},
                "total_idle": _round(total),
                **{
                    f"{k}_pct": _pct(row[k] / total) if total else None
                    for k in ("fractional", "stranded", "insufficient_cpu")
                },
                "fleetaudit": None if mine is None else {k: _round(v) for k, v in mine.items()},
            }
        )
    gangs = []
    for row in f.slots.iter_rows(named=True):
        mine = result.fleet_gangs.get((row["gpu_model"], row["gang"]))
        gangs.append(
            {
                "gpu_model": row["gpu_model"],
                "gang": row["gang"],
                "slots": _round(row["slots"]),
                "across_cluster": _round(row["across_cluster"]),
                "within_asw": _round(row["within_asw"]),
                "snapshots": row["snapshots"],
                "fleetaudit": None
                if mine is None
                else {"any": _round(mine["any"]), "switch": _round(mine["switch"])},
            }
        )
    s = f.standby
    return {
        "schema": PAPER_SCHEMA,
        "trace_start": iso(result.trace_start),
        "days": list(result.days),
        "hours": {"first": result.t_first, "last": result.t_last},
        "start": iso(result.start),
        "end": iso(result.end),
        "allocation": {
            "sampled_hours": "even hours and hour 23",
            "by_model": by_model,
            "difference": DIFFERENCES["allocation"],
        },
        "idle": {
            "sampled_hours": "even hours",
            "shapes": shapes,
            "difference": DIFFERENCES["idle"],
        },
        "asw_slots": {
            "sampled_hours": "hour 10",
            "cpus_per_gpu": 12,
            "gangs": gangs,
            "difference": DIFFERENCES["asw_slots"],
        },
        "standby": {
            "gpu_hours": _round(s["gpu_hours"]),
            "harvested_gpu_hours": _round(s["harvested_gpu_hours"]),
            "harvested_share": _round(s["harvested_share"]),
            "paper_ratio": _round(s["paper_ratio"]),
            "hours_with_standby": s["hours_with_standby"],
            "difference": DIFFERENCES["standby"],
        },
        "cpu_gpu_ratio": f.cpu_gpu_ratio,
        "fleetaudit_instants": [iso(t) for t in result.fleet_instants],
        "notes": list(result.notes),
    }
