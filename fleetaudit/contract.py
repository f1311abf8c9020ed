"""The versioned JSON documents of SPEC (what scripts read).

Each document carries ``"schema": "fleetaudit.<command>/1"``; a change that
breaks a reader bumps the number. Extra keys may be added without a bump.
"""

from __future__ import annotations

from typing import Any

from fleetaudit.api import WHATIF_KINDS
from fleetaudit.placement_api import PlacementResult
from fleetaudit.report_api import REPORT_SCHEMA, ReportResult, recoverable_summary
from fleetaudit.shapes_api import ShapeReport, ShapesResult
from fleetaudit.times import iso

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
            },
            "notes": list(result.notes),
        }
    )
