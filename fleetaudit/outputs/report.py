"""The HTML report: a typed context from a :class:`ReportResult`, rendered by jinja2.

The only jinja2 importer. Templates are package files (``templates/``, found by
:func:`fleetaudit.core.resources.resource_dir`) loaded by name, with autoescaping on
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

from fleetaudit.api.report_api import (
    ReportResult,
    allocated_kinds,
    describe_demand,
    describe_trend,
    failure_buckets,
    recoverable_summary,
    recoverable_view,
    trend_rates,
    trend_series,
)
from fleetaudit.core.fsutil import write_output
from fleetaudit.core.resources import resource_dir
from fleetaudit.core.times import iso, seconds_text
from fleetaudit.model.denominators import SPLIT, coverage
from fleetaudit.outputs import charts

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
    "sm_active": "#762a83",  # not usable's green: the two bars stand side by side
    "not_active": "#f0c27b",
    "no_telemetry": "#d9d9d9",
    "queued": "#111111",
    "never": "#9e9e9e",
    "usable_share": "#2e8b57",
    "productive_rate": "#d55e00",
    # health states (what failures cost), most severe darkest
    "down": "#67001f",
    "state unhealthy": "#b2182b",
    "drain": "#2166ac",
    "cordoned": "#4393c3",
    "degraded": "#f4a582",
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
    """One GPU model (or the fleet): three stacked bars and their headline rates
    (``evaluated``: False when none of the model's demand was among the shapes
    evaluated, so its schedulable split is not known)."""

    name: str
    physical: Bar
    schedulable: Bar
    productive: Bar
    figures: dict[str, Any]
    evaluated: bool = True


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
    label: str = ""  # the domain's name as it fits the cell (cell_label)
    lone: bool = False  # a node without a switch: its own domain


@dataclass(frozen=True)
class AreaChart:
    """Idle GPUs over the window, usable then stranded by cause, stacked, with the queued
    GPUs as a line on the same axis (GPUs at each instant; the area is GPU-hours), and
    apart, dashed, the GPUs of requests that can never start on the fleet (clipped at
    the axis' top, which the idle GPUs and the startable queue set)."""

    name: str
    bands: tuple[charts.Band, ...]
    queued: str  # polyline points ("" without requests)
    top: float
    y_ticks: tuple[tuple[float, str], ...]  # (y, label)
    never: str = ""  # polyline points of the never-startable requests' GPUs ("": none)
    never_most: float = 0.0  # their most GPUs waiting at once (above top: clipped)


@dataclass(frozen=True)
class FailuresView:
    """What failures cost (the report's ``failures`` object) as the HTML shows it."""

    section: dict[str, Any]  # the JSON object
    states: tuple[str, ...]  # the states in the window, most severe first
    colours: dict[str, str]  # by state
    bands: tuple[charts.Band, ...]  # mean unhealthy GPUs per bucket, stacked by state
    top: float
    y_ticks: tuple[tuple[float, str], ...]
    labels: tuple[tuple[float, str, str], ...]
    reasons: tuple[dict[str, Any], ...]
    nodes: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class TrendChart:
    """The headline rates over every recorded report of the same window length and step."""

    lines: tuple[Line, ...]
    labels: tuple[tuple[float, str, str], ...]  # (x, text, anchor)
    points: int


TENANTS_SHOWN = 20
"""Tenants listed by name in the HTML (by allocated GPU-hours); the rest are summed."""

CHART_W, CHART_H = 600.0, 160.0
CHART_POINTS = 200
"""At most this many points per over-time chart: longer windows average runs of
consecutive instants (3 px a point at the chart's width)."""


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
    trend_kind: str
    notes: tuple[str, ...]
    headlines: tuple[dict[str, Any], ...] = ()
    over_time: tuple[AreaChart, ...] = ()
    over_time_labels: tuple[tuple[float, str, str], ...] = ()
    trend_chart: TrendChart | None = None
    tenants_rest: dict[str, Any] | None = None
    heat_legend: tuple[tuple[str, str], ...] = ()
    allocated_kinds: str = ""
    places: tuple[dict[str, Any], ...] = ()
    places_rest: dict[str, Any] | None = None
    places_instants: int = 0
    places_of: int = 0
    money: dict[str, Any] | None = None  # report --prices
    remedies: dict[str, Any] | None = None  # the latest whatif remedies run, with its chart
    failures: FailuresView | None = None


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
    return ModelRow(
        name, physical, schedulable, productive, figures, bool(sc.get("evaluated", True))
    )


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


HEAT_COLUMNS, HEAT_W, HEAT_H, HEAT_LABEL = 8, 75, 34, 18


def _shade(share: float | None) -> str:
    """White (nothing free) to green (all free); grey for no healthy GPU (None)."""
    if share is None:
        return "#9e9e9e"
    return f"rgb({int(255 - 209 * share)},{int(255 - 116 * share)},{int(255 - 168 * share)})"


HEAT_LEGEND = (
    *((f"{int(100 * f)}% free", _shade(f)) for f in (0, 0.25, 0.5, 0.75, 1.0)),
    ("no healthy GPU", _shade(None)),
)


HEAT_LABEL_CHARS, HEAT_LABEL_TAIL = 12, 8


def cell_label(domain: str) -> tuple[str, bool]:
    """A switch domain's name as its heat-map cell shows it, and whether it is a lone node.

    The level (``switch `` or ``node ``) is dropped: the heading says the cells are
    switch domains, and a node without a switch is set in italics instead. A name
    longer than the cell keeps its head and its last characters, where numbered
    names differ (the tooltip holds the whole key).

    >>> cell_label("switch sw-0011"), cell_label("switch cluster-east-leaf-0101")
    (('sw-0011', False), ('clu…eaf-0101', False))
    >>> cell_label("node n4")
    ('n4', True)
    """
    level, _, name = domain.partition(" ")
    if len(name) > HEAT_LABEL_CHARS:
        head = HEAT_LABEL_CHARS - 1 - HEAT_LABEL_TAIL
        name = name[:head] + "…" + name[-HEAT_LABEL_TAIL:]
    return name, level == "node"


def _heatmap(domains: pl.DataFrame, columns: int = HEAT_COLUMNS) -> tuple[tuple[Cell, ...], int]:
    """Cells in pixels: each model starts a new row under its name (a label row)."""
    cells: list[Cell] = []
    y = 0
    for (model,), group in domains.group_by(["gpu_model"], maintain_order=True):
        cells.append(Cell(0, y, "", str(model), 0, 0, ""))  # the model's label row
        y += HEAT_LABEL
        for i, row in enumerate(group.iter_rows(named=True)):
            healthy = row["gpus"] - row["unhealthy_gpus"]
            share = row["free_gpus"] / healthy if healthy else None
            label, lone = cell_label(row["domain"])
            cells.append(
                Cell(
                    x=(i % columns) * (HEAT_W + 2),
                    y=y + (i // columns) * (HEAT_H + 2),
                    domain=row["domain"],
                    model=row["gpu_model"],
                    free_gpus=int(row["free_gpus"]),
                    gpus=int(row["gpus"]),
                    shade=_shade(share),
                    label=label,
                    lone=lone,
                )
            )
        y += ((group.height + columns - 1) // columns) * (HEAT_H + 2) + 6
    return tuple(cells), y


def _instants_axis(instants: list[datetime], width: float) -> tuple[tuple[float, str, str], ...]:
    n = len(instants)
    if n == 0:
        return ()
    ticks = sorted({0, n // 2, n - 1})
    return tuple(
        (
            0.0 if n == 1 else width * i / (n - 1),
            (iso(instants[i]) or "")[:16].replace("T", " "),
            _anchor(i, n),
        )
        for i in ticks
    )


def _over_time(
    result: ReportResult,
) -> tuple[tuple[AreaChart, ...], tuple[tuple[float, str, str], ...]]:
    """One stacked area chart for the fleet, then one per model: idle GPUs at each instant
    split into usable and the stranded causes, and the queued GPUs on the same axis."""
    steps = result.steps
    if steps.height == 0:
        return (), ()
    columns = ["usable", *SPLIT]
    instants = steps["instant"].unique().sort()
    frame = pl.DataFrame({"instant": instants})
    size = -(-len(instants) // CHART_POINTS)  # instants per point
    queued = result.queued
    out = []
    models: list[str | None] = [None, *sorted(steps["gpu_model"].unique().to_list())]
    for model in models:
        rows = steps if model is None else steps.filter(pl.col("gpu_model") == model)
        per = (
            frame.join(
                rows.group_by("instant").agg(pl.col(columns).sum()), on="instant", how="left"
            )
            .fill_null(0.0)
            .sort("instant")
        )
        q_values = _queued_series(frame, queued, model, never=False, size=size)
        n_values = _queued_series(frame, queued, model, never=True, size=size)
        layers = [
            (
                c,
                "usable" if c == "usable" else f"stranded: {c}",
                COLOURS[c],
                charts.bucket_means(per[c].to_list(), size),
            )
            for c in columns
        ]
        idle_top = max(
            (sum(v) for v in zip(*(layer[3] for layer in layers), strict=True)), default=0.0
        )
        top = charts.nice_top(max([idle_top, *q_values]))
        out.append(
            AreaChart(
                name="fleet" if model is None else model,
                bands=charts.stacked_bands(layers, CHART_W, CHART_H, top),
                queued=charts.polyline(q_values, CHART_W, CHART_H, top) if q_values else "",
                top=top,
                y_ticks=tuple(
                    (CHART_H - CHART_H * v / top, _num(v, 1 if top < 5 else 0))
                    for v in charts.nice_ticks(top)
                ),
                never=charts.polyline([min(v, top) for v in n_values], CHART_W, CHART_H, top)
                if any(n_values)
                else "",
                never_most=max(n_values, default=0.0),
            )
        )
    return tuple(out), _instants_axis(instants.to_list()[::size], CHART_W)


def _queued_series(
    frame: pl.DataFrame, queued: pl.DataFrame, model: str | None, never: bool, size: int
) -> list[float]:
    """The queued GPUs at each instant (of ``model``; None: the fleet), startable or
    never-startable, as means of runs of ``size`` instants ([] without requests)."""
    if not queued.height:
        return []
    q = queued if model is None else queued.filter(pl.col("gpu_model") == model)
    if "never" in q.columns:
        q = q.filter(pl.col("never") == never)
    elif never:
        return []
    values = (
        frame.join(q.group_by("instant").agg(pl.col("queued_gpus").sum()), on="instant", how="left")
        .sort("instant")["queued_gpus"]
        .fill_null(0.0)
        .to_list()
    )
    return charts.bucket_means(values, size)


FAILING_NODES_SHOWN = 20
REASONS_SHOWN = 10


def _state_colour(state: str) -> str:
    key = "state unhealthy" if state == "unhealthy" else state
    return COLOURS.get(key, "#7f7f7f")


def failures_view(result: ReportResult) -> FailuresView | None:
    """The failures section's tables and its chart: the mean unhealthy GPUs of each bucket
    of the window (its unhealthy GPU-hours over its hours), stacked by state."""
    from fleetaudit.model.capacity import SEVERITY

    section = result.failures
    if not section:
        return None
    fleet = section["fleet"]
    seen = set(fleet["by_state"])
    states = tuple(
        sorted(seen, key=lambda s: (SEVERITY.index(s) if s in SEVERITY else len(SEVERITY), s))
    )
    size = section["over_time"]["bucket_s"]
    starts = failure_buckets(result)
    by_start = {b["start"]: b["by_state"] for b in section["over_time"]["buckets"]}
    hours = size / 3600 if size > 0 else 1.0
    layers = [
        (
            state,
            state,
            _state_colour(state),
            [by_start.get(iso(t), {}).get(state, 0.0) / hours for t in starts],
        )
        for state in states
    ]
    top = charts.nice_top(
        max((sum(v) for v in zip(*(layer[3] for layer in layers), strict=True)), default=0.0)
    )
    return FailuresView(
        section=section,
        states=states,
        colours={state: _state_colour(state) for state in states},
        bands=charts.stacked_bands(layers, CHART_W, CHART_H, top) if starts else (),
        top=top,
        y_ticks=tuple((CHART_H - CHART_H * f, _num(top * f)) for f in (0, 0.5, 1)),
        labels=_instants_axis(starts, CHART_W),
        reasons=tuple(fleet["by_reason"][:REASONS_SHOWN]),
        nodes=tuple(n for n in section["nodes"] if n["failures"] or n["interrupted"])[
            :FAILING_NODES_SHOWN
        ],
    )


TREND_COLOURS = ("allocated_high", "allocated_low", "usable_share", "productive_rate")


def trend_chart(result: ReportResult) -> TrendChart | None:
    """The four headline rates across every recorded report and this one (0..100%)."""
    series = trend_series(result)
    if len(series) < 2:
        return None
    lines = tuple(
        Line(label, COLOURS[colour], charts.polyline(values, CHART_W, CHART_H, 1.0))
        for (_key, label, values), colour in zip(trend_rates(result), TREND_COLOURS, strict=True)
    )
    return TrendChart(lines, _instants_axis([p["at"] for p in series], CHART_W), len(series))


def _tenant_rows(result: ReportResult) -> tuple[tuple[dict[str, Any], ...], dict[str, Any] | None]:
    """The TENANTS_SHOWN largest tenants by allocated GPU-hours, and the rest summed."""
    rows = sorted(
        (
            {
                "tenant": t,
                **f["physical"],
                **{f"productive_{k}": v for k, v in f["productive"].items()},
            }
            for t, f in result.tenants.items()
        ),
        key=lambda r: (-r["allocated_gpu_hours"], r["tenant"]),
    )
    shown, rest = rows[:TENANTS_SHOWN], rows[TENANTS_SHOWN:]
    if not rest:
        return tuple(shown), None

    def total(key: str) -> float:
        return float(sum(r.get(key) or 0.0 for r in rest))

    telemetry = total("productive_telemetry_gpu_hours")
    allocated = total("productive_allocated_gpu_hours")
    summed = {
        "tenants": len(rest),
        "allocated_high_gpu_hours": total("allocated_high_gpu_hours"),
        "allocated_gpu_hours": total("allocated_gpu_hours"),
        "share_of_allocated": total("share_of_allocated"),
        "productive_productive_rate": total("productive_sm_active_gpu_hours") / telemetry
        if telemetry > 0
        else None,
        "productive_coverage": coverage(telemetry, allocated),
        "productive_upper_bound": any(r.get("productive_upper_bound") for r in rest),
    }
    return tuple(shown), summed


PLACES_SHOWN = 20
"""Switch domains listed by name in "where it strands"; the rest are summed."""


def stranded_places_view(
    result: ReportResult, shown: int = PLACES_SHOWN
) -> tuple[tuple[dict[str, Any], ...], dict[str, Any] | None]:
    """The domains that strand most GPU-hours (with model and causes), and the rest summed."""
    places = result.places
    if places.height == 0:
        return (), None
    rows = tuple(places.head(shown).iter_rows(named=True))
    rest = places.slice(shown)
    if rest.height == 0:
        return rows, None
    causes = [*SPLIT, "stranded_gpu_hours"]
    summed = rest.select(pl.col(causes).sum()).row(0, named=True)
    return rows, {"domains": rest.height, **summed}


def _headlines(result: ReportResult) -> tuple[dict[str, Any], ...]:
    """The four headline figures, each with what it is out of and the section explaining it."""
    ph, sc, pr = (result.fleet[k] for k in ("physical", "schedulable", "productive"))
    idle = sc["idle_gpu_hours"]
    return (
        {
            "id": "fleet-allocation-rate-high",
            "label": "allocation rate, high priority",
            "value": _pct(ph["allocation_rate_high"]),
            "detail": f"of {_num(ph['healthy_gpu_hours'])} healthy GPU-hours",
            "href": "#physical-section",
        },
        {
            "id": "fleet-allocation-rate",
            "label": "allocation rate, high + low",
            "value": _pct(ph["allocation_rate"]),
            "detail": f"{_num(ph['allocated_gpu_hours'])} GPU-hours allocated",
            "href": "#physical-section",
        },
        {
            "id": "fleet-usable-gpu-hours",
            "label": "idle GPU-hours usable by the queue",
            "value": _num(sc["usable_gpu_hours"]),
            "detail": f"{_pct(sc['usable_gpu_hours'] / idle if idle > 0 else None)} of "
            f"{_num(idle)} idle GPU-hours",
            "href": "#schedulable-section",
        },
        {
            "id": "fleet-productive-rate",
            "label": "SM-active share of allocated GPU-hours with telemetry",
            "value": _pct(pr["productive_rate"]),
            "detail": f"telemetry covers {_pct(pr['coverage'])} of allocated GPU-hours",
            "href": "#productive-section",
        },
    )


def build_context(result: ReportResult) -> ReportContext:
    """The template's context from a report result."""
    rows = [_row("fleet", result.fleet)] + [_row(m, f) for m, f in result.models.items()]
    lines, labels = _time_chart(result)
    stranded = result.fleet["schedulable"]["stranded_gpu_hours"]
    cells, heat_rows = _heatmap(result.domains)
    workloads = tuple(
        {"workload": w, **f} for w, f in result.fleet["productive"]["workloads"].items()
    )
    tenants, tenants_rest = _tenant_rows(result)
    places, places_rest = stranded_places_view(result)
    over_time, over_time_labels = _over_time(result)
    recoverable = []
    for kind in ("compaction", "harvesting"):
        run = result.whatifs.get(kind)
        summary = None if run is None else recoverable_summary(run)
        recoverable.append(
            {
                "kind": kind,
                "run": summary,
                "view": None
                if summary is None or kind != "compaction"
                else recoverable_view(summary),
            }
        )
    window = f"{iso(result.start)} to {iso(result.end)}, sampled every {_duration(result.step_s)}"
    headline = None if result.window is None else result.window.headline()
    if headline:
        window += f" ({headline})"
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
        else f"{iso(result.previous['start'])} to {iso(result.previous['end'])} (recorded "
        f"{iso(result.previous['created_at'])})",
        trend_kind=describe_trend(result),
        notes=result.notes,
        headlines=_headlines(result),
        over_time=over_time,
        over_time_labels=over_time_labels,
        trend_chart=trend_chart(result),
        tenants_rest=tenants_rest,
        places=places,
        places_rest=places_rest,
        places_instants=result.places_instants,
        places_of=result.steps["instant"].n_unique(),
        heat_legend=HEAT_LEGEND,
        allocated_kinds=allocated_kinds(result),
        failures=failures_view(result),
        money=result.money,
        remedies=_remedies_chart(result.remedies),
    )


def _remedies_chart(remedies: dict[str, Any] | None) -> dict[str, Any] | None:
    """The remedies section with, per shape, a bar per remedy of its start probability
    (``width_pct`` of the bar's full width: 100%)."""
    if remedies is None:
        return None
    charts = []
    for i, label in enumerate(remedies["shapes"]):
        bars = []
        for row in remedies["rows"]:
            value = row["p_start"][i] if i < len(row["p_start"]) else None
            bars.append({"name": row["name"], "value": value,
                         "width_pct": 0.0 if value is None else round(100 * value, 1)})  # fmt: skip
        charts.append({"shape": f"S{i + 1}: {label}", "bars": bars})
    return {**remedies, "charts": charts}


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _wait(seconds: float | None) -> str:
    """A wait in the largest unit it reaches, to one decimal; None is a censored wait."""
    return seconds_text(seconds, missing="never in the window")


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _bounded(
    figures: dict[str, Any], rate: str = "productive_rate", upper: str = "upper_bound"
) -> str:
    """A productive rate as a percent, marked ``≤`` where it is an upper bound."""
    value = figures.get(rate)
    return ("≤ " if value is not None and figures.get(upper) else "") + _pct(value)


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
    env.filters.update(
        num=_num, pct=_pct, duration=_duration, signed=_signed, wait=_wait, bounded=_bounded
    )
    return env


def render_html(result: ReportResult) -> str:
    """The report as one self-contained HTML page."""
    return environment().get_template("report.html").render(report=build_context(result))


def write_html(result: ReportResult, path: Path) -> None:
    """Write the HTML report to ``path`` (``-``: stdout; a file: whole or not at all)."""
    write_output(path, render_html(result))
