"""The versioned JSON documents of SPEC (what scripts read).

Each document carries ``"schema": "fleetaudit.<command>/1"``; a change that
breaks a reader bumps the number. Extra keys may be added without a bump.
"""

from __future__ import annotations

from typing import Any

from fleetaudit.shapes_api import ShapeReport, ShapesResult
from fleetaudit.times import iso

SHAPES_SCHEMA = "fleetaudit.shapes/1"


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
