"""The versioned JSON documents of SPEC (what scripts read).

Each document carries ``"schema": "fleetaudit.<command>/1"``; a change that
breaks a reader bumps the number. Extra keys may be added without a bump.
"""

from __future__ import annotations

from typing import Any

from fleetaudit.placement_api import PlacementResult
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
