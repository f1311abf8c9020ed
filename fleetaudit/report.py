"""The HTML report: a typed context from a :class:`ReportResult`, rendered by jinja2.

The only jinja2 importer. Templates are package files (``templates/``, found by
:func:`fleetaudit.resources.resource_dir`) loaded by name, with autoescaping on
and StrictUndefined, so every string from the data is escaped and a missing
field fails loudly. The page is self-contained: inline CSS and SVG, no script,
no font or image from the network, readable when printed. Chart geometry is
computed here; the templates only place it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
import polars as pl

from fleetaudit.denominators import SPLIT
from fleetaudit.fsutil import write_output
from fleetaudit.report_api import ReportResult, describe_demand, recoverable_summary
from fleetaudit.resources import resource_dir
from fleetaudit.times import iso

COLOURS = {
    "allocated_high": "#1f5fa8",
    "allocated_low": "#6fa8dc",
    "idle": "#d9d9d9",
    "unhealthy": "#7f7f7f",
    "usable": "#2e8b57",
    "interval": "#e69f00",
    "fragment": "#d55e00",
    "cpu_memory": "#cc79a7",
    "topology": "#8e6bb0",
    "unqueued": "#bdbdbd",
    "sm_active": "#2e8b57",
    "not_active": "#f0c27b",
    "no_telemetry": "#d9d9d9",
}
"""Fill colours by segment (colour-blind-safe where it matters; printed as greys they stay apart by order)."""


@dataclass(frozen=True)
class Segment:
    """One part of a stacked bar: label, GPU-hours, share of the bar (0..1), x offset (0..1)."""

    key: str
    label: str
    value: float
    share: float
    offset: float
    colour: str


@dataclass(frozen=True)
class Bar:
    """A stacked bar: its denominator's name and total, and its segments."""

    name: str
    total: float
    segments: tuple[Segment, ...]


@dataclass(frozen=True)
class ModelRow:
    """One GPU model (or the fleet): three stacked bars and their headline rates."""

    name: str
    physical: Bar
    schedulable: Bar
    productive: Bar
    figures: dict[str, Any]


@dataclass(frozen=True)
class Line:
    """A polyline of a time chart: label, colour, SVG points text."""

    label: str
    colour: str
    points: str


@dataclass(frozen=True)
class Cell:
    """A heatmap cell: a switch domain with its free GPUs at t."""

    x: int
    y: int
    domain: str
    model: str
    free_gpus: int
    gpus: int
    shade: str


@dataclass(frozen=True)
class ReportContext:
    """Everything report.html shows; one variable (``report``) of the template."""

    title: str
    generated_at: str
    at: str
    window: str
    scenario: str | None
    rows: tuple[ModelRow, ...]
    allocation_lines: tuple[Line, ...]
    time_labels: tuple[tuple[float, str, str], ...]
    stranded: Bar
    heatmap: tuple[Cell, ...]
    heatmap_height: int
    shapes: tuple[dict[str, Any], ...]
    shapes_left_out: int
    demand: str
    bound: tuple[dict[str, Any], ...]
    workloads: tuple[dict[str, Any], ...]
    tenants: tuple[dict[str, Any], ...]
    neighbour: dict[str, Any]
    telemetry: dict[str, Any]
    recoverable: tuple[dict[str, Any], ...]
    trend: tuple[dict[str, Any], ...]
    previous: str | None
    notes: tuple[str, ...]


def _bar(name: str, parts: list[tuple[str, str, float]]) -> Bar:
    total = sum(max(v, 0.0) for _, _, v in parts)
    segments, offset = [], 0.0
    for key, label, value in parts:
        share = max(value, 0.0) / total if total > 0 else 0.0
        segments.append(Segment(key, label, value, share, offset, COLOURS[key]))
        offset += share
    return Bar(name, total, tuple(segments))


def _row(name: str, figures: dict[str, Any]) -> ModelRow:
    ph, sc, pr = figures["physical"], figures["schedulable"], figures["productive"]
    physical = _bar(
        "physical",
        [
            ("allocated_high", "allocated high", ph["allocated_high_gpu_hours"]),
            (
                "allocated_low",
                "allocated low",
                ph["allocated_gpu_hours"] - ph["allocated_high_gpu_hours"],
            ),
            ("idle", "idle", ph["healthy_gpu_hours"] - ph["allocated_gpu_hours"]),
            ("unhealthy", "unhealthy", ph["installed_gpu_hours"] - ph["healthy_gpu_hours"]),
        ],
    )
    schedulable = _bar(
        "schedulable",
        [("usable", "usable", sc["usable_gpu_hours"])]
        + [(cause, f"stranded: {cause}", sc["stranded_gpu_hours"][cause]) for cause in SPLIT],
    )
    covered = pr["telemetry_gpu_hours"]
    productive = _bar(
        "productive",
        [
            ("sm_active", "SM-active", pr["sm_active_gpu_hours"]),
            ("not_active", "allocated, not SM-active", covered - pr["sm_active_gpu_hours"]),
            (
                "no_telemetry",
                "allocated, no telemetry",
                max(pr["allocated_gpu_hours"] - covered, 0.0),
            ),
        ],
    )
    return ModelRow(name, physical, schedulable, productive, figures)


def _time_chart(
    result: ReportResult, width: float = 600, height: float = 160
) -> tuple[tuple[Line, ...], tuple[tuple[float, str, str], ...]]:
    """Allocation rate over time (of healthy GPUs), high alone and high plus low."""
    fleet = (
        result.steps.group_by("instant")
        .agg(pl.col("installed", "unhealthy", "allocated_high", "allocated_low").sum())
        .sort("instant")
        .with_columns((pl.col("installed") - pl.col("unhealthy")).alias("healthy"))
    )
    n = fleet.height
    if n == 0:
        return (), ()

    def x(i: int) -> float:
        return 0.0 if n == 1 else width * i / (n - 1)

    def points(values: list[float]) -> str:
        return " ".join(f"{x(i):.1f},{height - height * v:.1f}" for i, v in enumerate(values))

    healthy = fleet["healthy"].to_list()
    high = [
        h / t if t else 0.0 for h, t in zip(fleet["allocated_high"].to_list(), healthy, strict=True)
    ]
    both = [
        (h + lo) / t if t else 0.0
        for h, lo, t in zip(
            fleet["allocated_high"].to_list(),
            fleet["allocated_low"].to_list(),
            healthy,
            strict=True,
        )
    ]
    instants: list[datetime] = fleet["instant"].to_list()
    ticks = sorted({0, n // 4, n // 2, 3 * n // 4, n - 1})
    labels = tuple(
        (x(i), (iso(instants[i]) or "")[:16].replace("T", " "), _anchor(i, n)) for i in ticks
    )
    return (
        Line("high + low", COLOURS["allocated_low"], points(both)),
        Line("high alone", COLOURS["allocated_high"], points(high)),
    ), labels


def _anchor(i: int, n: int) -> str:
    return "start" if i == 0 else "end" if i == n - 1 else "middle"


def _heatmap(domains: pl.DataFrame, columns: int = 24) -> tuple[tuple[Cell, ...], int]:
    cells = []
    for i, row in enumerate(domains.iter_rows(named=True)):
        healthy = row["gpus"] - row["unhealthy_gpus"]
        share = row["free_gpus"] / healthy if healthy else 0.0
        # white (nothing free) to green (all free); grey for a domain with no healthy GPU
        shade = (
            "#9e9e9e"
            if not healthy
            else f"rgb({int(255 - 209 * share)},{int(255 - 116 * share)},{int(255 - 168 * share)})"
        )
        cells.append(
            Cell(
                x=i % columns,
                y=i // columns,
                domain=row["domain"],
                model=row["gpu_model"],
                free_gpus=int(row["free_gpus"]),
                gpus=int(row["gpus"]),
                shade=shade,
            )
        )
    rows = (len(cells) + columns - 1) // columns
    return tuple(cells), rows


def build_context(result: ReportResult) -> ReportContext:
    """The template's context from a report result."""
    rows = [_row("fleet", result.fleet)] + [_row(m, f) for m, f in result.models.items()]
    lines, labels = _time_chart(result)
    stranded = result.fleet["schedulable"]["stranded_gpu_hours"]
    cells, heat_rows = _heatmap(result.domains)
    workloads = tuple(
        {"workload": w, **f} for w, f in result.fleet["productive"]["workloads"].items()
    )
    tenants = tuple(
        {"tenant": t, **f["physical"], **{f"productive_{k}": v for k, v in f["productive"].items()}}
        for t, f in result.tenants.items()
    )
    recoverable = []
    for kind in ("compaction", "harvesting"):
        run = result.whatifs.get(kind)
        recoverable.append({"kind": kind, "run": None if run is None else recoverable_summary(run)})
    window = f"{iso(result.start)} to {iso(result.end)}, sampled every {_duration(result.step_s)}"
    return ReportContext(
        title=f"fleetaudit report {iso(result.end)}",
        generated_at=iso(result.generated_at) or "",
        at=iso(result.end) or "",
        window=window,
        scenario=result.scenario,
        rows=tuple(rows),
        allocation_lines=lines,
        time_labels=labels,
        stranded=_bar("stranded", [(c, c, stranded[c]) for c in SPLIT]),
        heatmap=cells,
        heatmap_height=heat_rows,
        shapes=tuple(
            {
                "label": s.shape.label(),
                "queued": s.queued,
                "p_start": s.p_start,
                "wait_p50_s": s.wait_p50_s,
                "wait_p90_s": s.wait_p90_s,
                "splits_idle": not s.shape.is_share,
                "usable_gpu_hours": s.usable_gpu_hours,
                "requests": s.requests if s.requests is not None else s.queued,
            }
            for s in result.shapes
        ),
        shapes_left_out=result.shapes_left_out,
        demand=describe_demand(result.demand),
        bound=tuple({"gpu_model": m, **v} for m, v in result.bound.items()),
        workloads=workloads,
        tenants=tenants,
        neighbour=result.neighbour,
        telemetry=result.telemetry,
        recoverable=tuple(recoverable),
        trend=result.trend,
        previous=None
        if result.previous is None
        else f"{iso(result.previous['created_at'])} (data to {iso(result.previous['at'])})",
        notes=result.notes,
    )


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _wait(seconds: float | None) -> str:
    """A wait in the largest unit it reaches, to one decimal; None is a censored wait."""
    if seconds is None:
        return "never in the window"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def _signed(value: float | None, figure: str = "") -> str:
    if value is None:
        return "-"
    if "rate" in figure:
        return f"{100 * value:+.1f} pt"
    return f"{value:+,.1f}"


def environment() -> jinja2.Environment:
    """The one jinja2 environment: templates by name, autoescaped, strict."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(resource_dir("templates")),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(num=_num, pct=_pct, duration=_duration, signed=_signed, wait=_wait)
    return env


def render_html(result: ReportResult) -> str:
    """The report as one self-contained HTML page."""
    return environment().get_template("report.html").render(report=build_context(result))


def write_html(result: ReportResult, path: Path) -> None:
    """Write the HTML report to ``path`` (``-``: stdout; a file: whole or not at all)."""
    write_output(path, render_html(result))


def expand_path(template: Path, when: datetime) -> Path:
    """``{date}`` and ``{time}`` in a path become the report's UTC date and time.

    >>> expand_path(Path("reports/{date}-{time}.html"), datetime(2026, 5, 1, 6, 30))
    PosixPath('reports/2026-05-01-063000.html')
    """
    if str(template) == "-":
        return template
    text = str(template).replace("{date}", when.strftime("%Y-%m-%d"))
    return Path(text.replace("{time}", when.strftime("%H%M%S")))
