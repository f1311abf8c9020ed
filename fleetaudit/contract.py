"""The versioned JSON documents of SPEC (what scripts read).

Each document carries ``"schema": "fleetaudit.<command>/1"``; a change that
breaks a reader bumps the number. Extra keys may be added without a bump.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fleetaudit.placement_api import PlacementResult
from fleetaudit.shapes_api import ShapeReport, ShapesResult
from fleetaudit.times import iso

if TYPE_CHECKING:  # harvest_api imports this module to record its runs
    from fleetaudit.harvest_api import HarvestingResult

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
