"""The versioned JSON documents of SPEC (what scripts read).

Each document carries ``"schema": "fleetaudit.<command>/1"``; a change that
breaks a reader bumps the number. Extra keys may be added without a bump.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fleetaudit.core.times import iso

# Type names only: a command loads the engine it runs, not all of them. The what-ifs'
# documents (compaction_api.compaction_document, harvest_api.harvesting_document) sit
# with the runs that record them, so that nothing below this module imports it.
if TYPE_CHECKING:
    from fleetaudit.api import RejectsResult
    from fleetaudit.api.paper_api import PaperResult
    from fleetaudit.api.placement_api import PlacementResult
    from fleetaudit.api.report_api import ReportResult
    from fleetaudit.api.shapes_api import ShapeReport, ShapesResult

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
    if result.mode == "time" and result.recorded is not None:
        document["recorded"] = {
            "curve": [
                {k: (None if r[k] is None else round(float(r[k]), 6)) for k in r}
                for r in result.recorded.iter_rows(named=True)
            ]
        }
    if result.mode == "time":
        document["window"] = {
            "start": iso(result.start),
            "end": iso(result.at),
            **({} if result.window is None else result.window.as_json()),
        }
        document["queue"] = result.queue
        document["empty"] = result.empty
        if result.baseline is not None:
            document["calibration"] = result.baseline.as_json()
            document["notes"] = list(result.baseline.notes)
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
    cpu_neighbour, telemetry provenance, recoverable, trend, failures (what
    failures cost: docs/report.md) and notes.
    """
    from fleetaudit.api import WHATIF_KINDS
    from fleetaudit.api.report_api import REPORT_SCHEMA, recoverable_summary

    return _rounded(
        {
            "schema": REPORT_SCHEMA,
            "generated_at": iso(result.generated_at),
            "window": {
                "start": iso(result.start),
                "end": iso(result.end),
                "step_s": result.step_s,
                "instants": result.steps["instant"].n_unique(),
                **({} if result.window is None else result.window.as_json()),
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
                "key": result.trend_key,
                "previous": None
                if result.previous is None
                else {
                    k: iso(result.previous[k]) for k in ("created_at", "at", "start", "end")
                },
                "figures": list(result.trend),
                "history": [
                    {
                        **{k: iso(h[k]) for k in ("created_at", "at", "start", "end")},
                        "figures": h["figures"],
                    }
                    for h in result.history
                ],
                "stale": None
                if result.stale is None
                else {
                    "recorded_at": iso(result.stale["recorded_at"]),
                    "export_time": iso(result.stale["export_time"]),
                },
            },
            "stranded_places": {
                "sampled_instants": result.places_instants,
                "domains": result.places.to_dicts(),
            },
            "failures": result.failures,
            "notes": list(result.notes),
        }
        | ({} if result.money is None else {"money": result.money})
        | ({} if result.remedies is None else {"remedies": result.remedies})
    )


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(float(value), digits)


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
    from fleetaudit.api.paper_api import PAPER_SCHEMA
    from fleetaudit.model.paper import DIFFERENCES

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
