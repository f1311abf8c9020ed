"""Terminal rendering (rich). With :mod:`fleetaudit.cli`, the only rich importer.

Data goes to stdout, notes and progress to stderr. Colour only on a terminal;
rich honours ``NO_COLOR`` and plain pipes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import polars as pl
from rich.console import Console
from rich.table import Table
from rich.text import Text

from fleetaudit.api import StoreSummary
from fleetaudit.compaction_api import CompactionReport
from fleetaudit.compaction_over_time import PAPER_PARTIAL_REDUCTION_PCT
from fleetaudit.denominators import SPLIT
from fleetaudit.generate import GenerateResult
from fleetaudit.harvest_api import HarvestingResult
from fleetaudit.ingest import IngestResult
from fleetaudit.placement_api import PlacementResult
from fleetaudit.report_api import ReportResult, recoverable_summary
from fleetaudit.shapes_api import ShapeReport, ShapesResult
from fleetaudit.times import iso

# Off a terminal (cron, pipes) rich would wrap tables at 80 columns; plain text
# wider than that is easier to read in a log than wrapped headers.
# markup=False: ids and models from the data may hold [brackets].
out = Console(highlight=False, markup=False, width=None if sys.stdout.isatty() else 120)
err = Console(stderr=True, highlight=False, markup=False)


def _int(value: object) -> str:
    return "-" if value is None else f"{int(value):,}"  # type: ignore[call-overload]


def print_json(document: object) -> None:
    """A JSON document on stdout, nothing else (scripts parse it)."""
    sys.stdout.write(json.dumps(document, indent=1) + "\n")
    sys.stdout.flush()


@contextmanager
def progress_status(first: str) -> Iterator[Callable[[str], None]]:
    """A spinner on stderr (only on a terminal) whose text the callback updates."""
    if not err.is_terminal:
        yield lambda _msg: None
        return
    with err.status(first) as status:
        yield lambda msg: status.update(msg)


def render_ingest(result: IngestResult) -> None:
    table = Table(
        title=f"ingest #{result.ingest_id}: {len(result.files)} file(s)", title_justify="left"
    )
    for column in ("table", "files", "read", "new", "replaced", "superseded", "rejected"):
        table.add_column(column, justify="left" if column == "table" else "right")
    for t in result.tables:
        table.add_row(
            t.table,
            _int(t.files),
            _int(t.read),
            _int(t.new),
            _int(t.replaced),
            _int(t.superseded),
            _int(t.rejected),
        )
    out.print(table)
    if result.rejected:
        out.print(
            f"{result.rejected:,} row(s) rejected; the first of them below, all in the "
            "store's rejects table (file, row, column, value, reason)."
        )
        rejects = Table(show_edge=False)
        for column in ("file", "row", "column", "value", "reason"):
            rejects.add_column(column)
        for r in result.rejects.head(10).iter_rows(named=True):
            rejects.add_row(
                *(
                    Text("" if r[c] is None else str(r[c]))
                    for c in ("file", "row", "column", "value", "reason")
                )
            )
        out.print(rejects)


def render_summary(summary: StoreSummary) -> None:
    out.print(
        f"store {summary.db}: export time {iso(summary.export_time) or '-'}, "
        f"{summary.queued:,} request(s) queued"
    )
    tables = Table(title="tables", title_justify="left")
    for column in ("table", "rows", "first", "last"):
        tables.add_column(column, justify="right" if column == "rows" else "left")
    for r in summary.tables.iter_rows(named=True):
        tables.add_row(r["table"], _int(r["rows"]), iso(r["first"]) or "", iso(r["last"]) or "")
    out.print(tables)
    render_models(summary.models)
    if summary.scenarios.height:
        scen = Table(title="scenarios", title_justify="left")
        for column in ("name", "command", "at", "created"):
            scen.add_column(column)
        for r in summary.scenarios.iter_rows(named=True):
            scen.add_row(r["name"], r["command"], iso(r["at"]) or "", iso(r["created_at"]) or "")
        out.print(scen)


def render_models(models: pl.DataFrame) -> None:
    table = Table(title="capacity by GPU model", title_justify="left")
    for column in ("gpu_model", "nodes", "gpus", "healthy_gpus", "domains"):
        table.add_column(column, justify="left" if column == "gpu_model" else "right")
    for r in models.iter_rows(named=True):
        table.add_row(
            str(r["gpu_model"]),
            _int(r["nodes"]),
            _int(r["gpus"]),
            _int(r["healthy_gpus"]),
            _int(r["domains"]),
        )
    if models.height:
        table.add_row(
            "all",
            _int(models["nodes"].sum()),
            _int(models["gpus"].sum()),
            _int(models["healthy_gpus"].sum()),
            _int(models["domains"].sum()),
            style="bold",
        )
    out.print(table)


def render_state(state: pl.DataFrame, at: str, window: str | None = None) -> None:
    """The state at an instant per GPU model: GPUs by status, free and partial nodes.

    With a window, also the GPUs idle over all of it (the free interval).
    """
    healthy = pl.col("health") == "healthy"
    # capped at the node's GPUs, so the identity holds on over-committed nodes too
    used = pl.min_horizontal("gpus_used", "gpus")
    high = pl.min_horizontal("gpus_used_high", used)
    per_model = (
        state.group_by("gpu_model")
        .agg(
            pl.col("gpus").sum().alias("installed"),
            pl.col("gpus").filter(~healthy).sum().alias("unhealthy"),
            high.filter(healthy).sum().alias("high"),
            (used - high).filter(healthy).sum().alias("low"),
            pl.col("free_gpus").filter(healthy).sum().alias("idle"),
            pl.col("free_gpus_window").filter(healthy).sum().alias("idle_window"),
            (healthy & (pl.col("gpus_used") == 0)).sum().alias("free_nodes"),
            (pl.col("gpus_used") > pl.col("gpus")).sum().alias("overcommitted"),
            (healthy & (pl.col("gpus_used") > 0) & (pl.col("gpus_used") < pl.col("gpus")))
            .sum()
            .alias("partial_nodes"),
        )
        .sort("installed", "gpu_model", descending=[True, False])
    )
    table = Table(title=f"GPUs at {at}", title_justify="left")
    headers = {
        "gpu_model": "model",
        "installed": "installed",
        "unhealthy": "unhealthy",
        "high": "alloc high",
        "low": "alloc low",
        "idle": "idle",
        **({"idle_window": f"idle for {window}"} if window else {}),
        "free_nodes": "free nodes",
        "partial_nodes": "partial nodes",
    }
    for column, header in headers.items():
        table.add_column(header, justify="left" if column == "gpu_model" else "right", no_wrap=True)
    for r in per_model.iter_rows(named=True):
        table.add_row(str(r["gpu_model"]), *(_int(r[c]) for c in list(headers)[1:]))
    out.print(table)
    out.print(
        "installed = unhealthy + alloc high + alloc low + idle; alloc high is high-priority "
        "work alone; shares count the GPUs they fill when packed first-fit-decreasing."
    )
    over = int(per_model["overcommitted"].sum())
    if over:
        err.print(
            f"note: {over} node(s) hold more GPUs of allocations than they have; "
            "their allocations are counted up to the node's GPUs"
        )


def render_generate(result: GenerateResult) -> None:
    table = Table(
        title=f"generated fleet in {result.out} ({result.gpus:,} GPUs)", title_justify="left"
    )
    table.add_column("table")
    table.add_column("rows", justify="right")
    table.add_column("file")
    for name, path in result.files.items():
        table.add_row(name, _int(result.rows.get(name, 0)), str(path))
    out.print(table)


_CAUSE_STYLE = {
    "interval": "yellow",
    "fragment": "red",
    "cpu_memory": "magenta",
    "topology": "blue",
}
_CAUSE_CHAR = {"interval": "i", "fragment": "f", "cpu_memory": "c", "topology": "t"}


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if value >= size:
            return f"{value / size:.1f}{unit}"
    return f"{value:.0f}s"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def stranded_bar(stranded: dict[str, float] | None, idle: float, width: int = 16) -> Text:
    """A stacked bar of stranded GPUs by cause, scaled to the idle GPUs."""
    if stranded is None:
        return Text("(share shape)", style="dim")
    bar = Text()
    if idle <= 0:
        return bar
    for cause, style in _CAUSE_STYLE.items():
        cells = round(width * stranded[cause] / idle)
        if stranded[cause] > 0 and cells == 0:
            cells = 1
        bar.append(_CAUSE_CHAR[cause] * cells, style=f"bold {style}")
    bar.append(
        " " + " ".join(f"{_CAUSE_CHAR[c]}{_num(stranded[c])}" for c in _CAUSE_STYLE if stranded[c])
    )
    return bar


def render_shapes(result: ShapesResult) -> None:
    """One row per shape: instances, usable GPUs, stranded by cause; reclaim and history if asked."""
    reports = result.shapes
    title = f"shapes at {iso(result.at)}" + (
        f" (scenario {result.scenario})" if result.scenario else ""
    )
    table = Table(title=title, title_justify="left")
    table.add_column("shape", no_wrap=True)
    for header in ("queued", "instances", "usable GPUs", "idle GPUs"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("stranded GPUs by cause", no_wrap=True)
    for r in reports:
        ledger = r.evaluation.ledger
        table.add_row(
            Text(r.evaluation.shape.label()),
            _int(r.queued),
            f"{_int(r.instances)}{'+' if r.capped else ''}",
            _num(ledger.usable),
            _num(ledger.idle),
            stranded_bar(ledger.stranded, ledger.idle),
        )
    out.print(table)
    if not reports:
        out.print(
            "no GPU request is queued at this instant; give a shape with --model/--gpus or --shapes"
        )
        return
    out.print(
        "stranded: i interval (busy during the duration), f fragment (less than a pod), "
        "c cpu_memory (GPUs without CPUs or memory), t topology (slots no whole instance can use)"
        + ("; + capped by --max" if any(r.capped for r in reports) else "")
    )
    _render_outlook(reports)
    for r in reports:
        if r.misses is not None:
            render_misses(r)
    for note in result.notes:
        err.print(f"note: {note}")


def _render_outlook(reports: tuple[ShapeReport, ...]) -> None:
    """Reclaimable capacity, start probability, waits and their calibration, where asked."""
    with_reclaim = any(r.reclaim is not None for r in reports)
    with_history = any(r.history is not None for r in reports)
    if not (with_reclaim or with_history):
        return
    table = Table(title="reclaim and start outlook", title_justify="left")
    table.add_column("shape", no_wrap=True)
    if with_reclaim:
        table.add_column("+evict", justify="right", no_wrap=True)
        table.add_column("lost GPU-h", justify="right", no_wrap=True)
    if with_history:
        for header in ("p_start", "wait p50/p90", "in deadline", "started", "real p50/p90"):
            table.add_column(header, justify="right", no_wrap=True)
    for r in reports:
        row: list[str | Text] = [Text(r.evaluation.shape.label())]
        if with_reclaim:
            rc = r.reclaim
            row += ["-", "-"] if rc is None else [_int(rc.instances), f"{rc.lost_gpu_hours:,.2f}"]
        if with_history:
            h, cal = r.history, r.calibration
            row += ["-"] * 3 if h is None else [
                _pct(h.p_start), f"{_seconds(h.wait_p50_s)}/{_seconds(h.wait_p90_s)}", _pct(h.p_within_deadline),
            ]  # fmt: skip
            if cal is None or cal.started == 0:
                row += ["0", "-"]
            else:
                row += [
                    _int(cal.started),
                    f"{_seconds(cal.actual_wait_p50_s)}/{_seconds(cal.actual_wait_p90_s)} "
                    f"(pred. {_seconds(cal.predicted_wait_p50_s)}/{_seconds(cal.predicted_wait_p90_s)})",
                ]
        table.add_row(*row)
    out.print(table)
    if with_history:
        out.print(
            "+evict: instances that evicting low-priority and sleepable work would add, losing "
            "lost GPU-h. waits: time to the first step with an instance, '-' censored (none in "
            "the window). started: requests of the shape submitted in the window that started; "
            "their real waits beside the predicted ones."
        )


def render_misses(report: ShapeReport) -> None:
    """The groups that lack least to host one more instance, and what their nodes lack."""
    misses = report.misses
    assert misses is not None
    table = Table(title=f"nearest misses: {report.evaluation.shape.label()}", title_justify="left")
    for header in (
        "group",
        "missing pods",
        "node",
        "lacks GPUs",
        "lacks CPUs",
        "lacks GiB",
        "busy in window",
    ):
        table.add_column(
            header, justify="left" if header in ("group", "node") else "right", no_wrap=True
        )
    for m in misses.iter_rows(named=True):
        table.add_row(
            str(m["group"]),
            _int(m["missing_pods"]),
            str(m["node_id"]),
            _num(m["lacks_gpus"]),
            _num(m["lacks_cpus"]),
            _num(m["lacks_memory_gib"]),
            _num(m["busy_in_window_gpus"]),
        )
    if misses.is_empty():
        out.print(f"nearest misses: {report.evaluation.shape.label()}: no eligible node")
    else:
        out.print(table)


_SPARK = "▁▂▃▄▅▆▇█"


def _spark(values: list[float], top: float = 100.0) -> str:
    return "".join(_SPARK[min(len(_SPARK) - 1, max(0, int(v / top * len(_SPARK))))] for v in values)


def render_placement(result: PlacementResult) -> None:
    """Policies side by side: allocated %/fragmented % along the run, failures, a small curve."""
    if result.mode == "time":
        key, steps = "instant_pct", [0.0, 25.0, 50.0, 75.0, 100.0]
        title = (
            f"placement what-if by time, {iso(result.start)} .. {iso(result.at)}, {result.queue} queue"
            f"{', from an empty fleet' if result.empty else ''}, {result.gpus:,} GPUs: "
            "allocated %/fragmented % at % of the window"
        )
    else:
        fill = float(result.fill_pct or 0)
        key, steps = (
            "arrived_pct",
            [s for s in (50.0, 70.0, 90.0, 100.0, 110.0, 130.0) if s <= fill] or [fill],
        )
        title = (
            f"placement what-if, fill to {fill:g}% of {result.gpus:,} GPUs, "
            f"mean of {result.seeds} seed(s): allocated %/fragmented % at arrival %"
        )
    table = Table(title=title, title_justify="left")
    table.add_column("policy", no_wrap=True)
    for s in steps:
        table.add_column(f"{s:g}%", justify="right", no_wrap=True)
    if result.mode == "time":
        table.add_column("started", justify="right", no_wrap=True)
        table.add_column("queued at end", justify="right", no_wrap=True)
    table.add_column("failed", justify="right", no_wrap=True)
    table.add_column("allocated (10% steps)", no_wrap=True)
    for policy, curve in result.curves.items():
        by = {round(r[key], 6): r for r in curve.iter_rows(named=True)}
        cells = []
        for s in steps:
            r = by.get(round(s, 6))
            cells.append(
                "-" if r is None else f"{r['allocated_pct']:.1f}/{r['fragmented_pct']:.1f}"
            )
        last = curve.row(-1, named=True) if curve.height else None
        if result.mode == "time":
            cells += (
                ["-", "-"]
                if last is None
                else [f"{last['started']:,.0f}", f"{last['queued']:,.0f}"]
            )
        table.add_row(
            policy,
            *cells,
            "-" if last is None else f"{last['failed']:,.0f}",
            _spark(curve["allocated_pct"].to_list()[::2]),  # every 10%
        )
    out.print(table)
    out.print(
        "fragmented: idle GPU capacity the workload's request shapes, weighted by how often "
        "they occur, cannot use (the FGD paper's measure); failed: requests that found no node"
        + (
            " (by time: fit no node at all, or still waiting at the end)."
            if result.mode == "time"
            else "."
        )
    )
    if result.saved:
        out.print(
            f"saved the final {result.saved_policy} placement as scenario {result.saved!r} "
            f"(at {iso(result.at)}); read it with --scenario {result.saved}"
        )


# -- report (SPEC §7) --------------------------------------------------------------------

_BAR_WIDTH = 24
_TENANTS_SHOWN = 10


def _gh(value: float | None) -> str:
    """GPU-hours, whole."""
    return "-" if value is None else f"{value:,.0f}"


def _gh1(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _pct1(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _share_bar(parts: list[tuple[float, str]], total: float, width: int = _BAR_WIDTH) -> Text:
    """A bar of ``width`` cells: each part's share of ``total`` (largest remainder), then the rest."""
    values = [max(v, 0.0) for v, _ in parts]
    rest = max(total - sum(values), 0.0)
    exact = [v / total * width if total > 0 else 0.0 for v in [*values, rest]]
    cells = [int(e) for e in exact]
    for i in sorted(range(len(exact)), key=lambda i: exact[i] - cells[i], reverse=True):
        if sum(cells) >= width or total <= 0 or exact[i] == cells[i]:
            break
        cells[i] += 1
    text = Text()
    for i, (_, style) in enumerate(parts):
        text.append(("█" if i == 0 else "▒") * cells[i], style=style)
    text.append("·" * (width - sum(cells[:-1])), style="dim")
    return text


def _denominator_bars(figures: dict[str, object]) -> tuple[Text, Text, Text]:
    ph = figures["physical"]
    sc = figures["schedulable"]
    pr = figures["productive"]
    assert isinstance(ph, dict) and isinstance(sc, dict) and isinstance(pr, dict)
    physical = _share_bar(
        [
            (ph["allocated_high_gpu_hours"], "blue"),
            (ph["allocated_gpu_hours"] - ph["allocated_high_gpu_hours"], "cyan"),
        ],
        ph["healthy_gpu_hours"],
    )
    schedulable = _share_bar([(sc["usable_gpu_hours"], "green")], sc["idle_gpu_hours"])
    productive = _share_bar([(pr["sm_active_gpu_hours"], "green")], pr["telemetry_gpu_hours"])
    return physical, schedulable, productive


def _pct_of(part: float, whole: float) -> str:
    return "-" if whole <= 0 else f"{100 * part / whole:5.1f}%"


def render_report(result: ReportResult) -> None:
    """The one-screen summary (three denominators per model as aligned bars), then details."""
    title = f"report {iso(result.start)} .. {iso(result.end)}, step {_seconds(result.step_s)}"
    if result.scenario:
        title += f" (scenario {result.scenario})"
    table = Table(title=title, title_justify="left", show_edge=False)
    table.add_column("model", no_wrap=True)
    for header in (
        "physical: allocated / healthy",
        "schedulable: usable / idle",
        "productive: SM-active / sampled allocated",
    ):
        table.add_column(header, no_wrap=True)
    rows = [("fleet", result.fleet), *result.models.items()]
    for name, figures in rows:
        ph, sc, pr = figures["physical"], figures["schedulable"], figures["productive"]
        bars = _denominator_bars(figures)
        table.add_row(
            Text(name, style="bold" if name == "fleet" else ""),
            bars[0] + Text(f" {_pct_of(ph['allocated_gpu_hours'], ph['healthy_gpu_hours'])}"),
            bars[1] + Text(f" {_pct_of(sc['usable_gpu_hours'], sc['idle_gpu_hours'])}"),
            bars[2] + Text(f" {_pct_of(pr['sm_active_gpu_hours'], pr['telemetry_gpu_hours'])}"),
        )
    out.print(table)
    fleet = result.fleet["physical"]
    out.print(
        f"allocation rate: high {_pct1(fleet['allocation_rate_high'])}, "
        f"high + low {_pct1(fleet['allocation_rate'])} of healthy GPU-hours; "
        f"bars: █ high/usable/SM-active, ▒ low priority, · the rest"
    )
    _render_trend(result)
    out.print()
    _render_physical(rows)
    _render_schedulable(rows, result)
    _render_productive(rows, result)
    _render_recoverable(result)
    for note in result.notes:
        err.print(f"note: {note}", soft_wrap=True)


def _render_trend(result: ReportResult) -> None:
    if result.previous is None:
        out.print("trend: no earlier report of this database")
        return
    parts = []
    for f in result.trend:
        change = f["change"]
        if change is None:
            text = "-"
        elif "rate" in f["figure"]:
            text = f"{100 * change:+.1f} pt"
        else:
            text = f"{change:+,.0f}"
        parts.append(f"{f['label']} {text}")
    out.print(f"since the report of {iso(result.previous['created_at'])}:")
    for part in parts:
        out.print(f"  {part}")


def _render_physical(rows: list[tuple[str, dict[str, Any]]]) -> None:
    table = Table(title="physical GPU-hours (exact)", title_justify="left")
    table.add_column("model", no_wrap=True)
    for header in ("installed", "healthy", "alloc high", "alloc all", "rate high", "rate all"):
        table.add_column(header, justify="right", no_wrap=True)
    for name, figures in rows:
        p = figures["physical"]
        table.add_row(
            Text(name),
            _gh(p["installed_gpu_hours"]),
            _gh(p["healthy_gpu_hours"]),
            _gh(p["allocated_high_gpu_hours"]),
            _gh(p["allocated_gpu_hours"]),
            _pct1(p["allocation_rate_high"]),
            _pct1(p["allocation_rate"]),
        )
    out.print(table)


def _render_schedulable(rows: list[tuple[str, dict[str, Any]]], result: ReportResult) -> None:
    instants = result.steps["instant"].n_unique()
    table = Table(
        title=f"schedulable GPU-hours (sampled at {instants:,} instants)", title_justify="left"
    )
    table.add_column("model", no_wrap=True)
    for header in ("idle", "usable", *SPLIT, "unhealthy"):
        table.add_column(header, justify="right", no_wrap=True)
    for name, figures in rows:
        s = figures["schedulable"]
        table.add_row(
            Text(name),
            _gh(s["idle_gpu_hours"]),
            _gh(s["usable_gpu_hours"]),
            *(_gh(s["stranded_gpu_hours"][c]) for c in SPLIT),
            _gh(s["unhealthy_gpu_hours"]),
        )
    out.print(table)
    shapes = Table(title="queued shapes over the window", title_justify="left")
    shapes.add_column("shape", no_wrap=True)
    for header in ("queued", "p_start", "wait p50", "wait p90", "usable GPU-h as best"):
        shapes.add_column(header, justify="right", no_wrap=True)
    for s in result.shapes:
        shapes.add_row(
            Text(s.shape.label() + (" (share)" if s.shape.is_share else "")),
            _int(s.queued),
            _pct1(s.p_start),
            _seconds(s.wait_p50_s),
            _seconds(s.wait_p90_s),
            _gh(s.usable_gpu_hours),
        )
    if result.shapes:
        out.print(shapes)
    else:
        out.print("no GPU request is queued at the window's end: all idle GPUs are unqueued")


def _render_productive(rows: list[tuple[str, dict[str, Any]]], result: ReportResult) -> None:
    t = result.telemetry
    out.print(
        f"productive: metric {t['metric']} from {t['column']}, {t['samples']:,} samples, "
        f"each {_seconds(t['interval_s'])} of one GPU (the median gap of "
        f"{t['interval_from_gpus']:,} GPUs); telemetry covers "
        f"{_pct1(t['coverage'])} of allocated GPU-hours"
        + (
            f"; {t['unattributed_gpu_hours']:,.1f} sampled GPU-hours matched no allocation"
            if t["unattributed_gpu_hours"]
            else ""
        )
    )
    table = Table(title="productive GPU-hours (telemetry)", title_justify="left")
    table.add_column("workload / model / tenant", no_wrap=True)
    for header in ("allocated", "with telemetry", "SM-active", "SM-active rate"):
        table.add_column(header, justify="right", no_wrap=True)

    def add(name: str, p: dict[str, Any]) -> None:
        table.add_row(
            Text(name),
            _gh(p["allocated_gpu_hours"]),
            _pct1(p["coverage"]),
            _gh(p["sm_active_gpu_hours"]),
            _pct1(p["productive_rate"]),
        )

    for workload, p in result.fleet["productive"]["workloads"].items():
        add(workload, p)
    for name, figures in rows:
        add(f"model {name}" if name != "fleet" else "all", figures["productive"])
    by_size = sorted(result.tenants.items(), key=lambda t: -t[1]["physical"]["allocated_gpu_hours"])
    for tenant, figures in by_size[:_TENANTS_SHOWN]:
        add(f"tenant {tenant}", figures["productive"])
    out.print(table)
    if len(by_size) > _TENANTS_SHOWN:
        out.print(
            f"{len(by_size) - _TENANTS_SHOWN} smaller tenant(s) more in the HTML and JSON reports"
        )
    nb = result.neighbour
    drop = "" if nb["drop"] is None else f": a drop of {_pct1(nb['drop'])}"
    out.print(
        f"CPU-neighbour indicator: training SM-active {_pct1(nb['with_cpu_neighbour'])} with a "
        f"CPU-only allocation on its node, {_pct1(nb['without_cpu_neighbour'])} without{drop}"
    )


def _render_recoverable(result: ReportResult) -> None:
    for kind in ("compaction", "harvesting"):
        run = result.whatifs.get(kind)
        if run is None:
            out.print(f"{kind}: not run on this database yet (fleetaudit whatif {kind})")
            continue
        summary = recoverable_summary(run)
        out.print(f"{kind}: {summary['ran']}")
        if kind == "compaction" and isinstance(summary.get("over_time"), dict):
            o = summary["over_time"]
            reduction = o.get("reduction_pct")
            out.print(
                f"  over time, {o.get('start')} .. {o.get('end')}: partially occupied nodes "
                f"{o.get('partial_nodes_without', '-')} without, {o.get('partial_nodes_with', '-')} "
                f"with compaction, time-averaged "
                f"({'-' if reduction is None else f'{reduction:+.1f}%'}; the ASI paper reports "
                f"{o.get('paper_reduction_pct', PAPER_PARTIAL_REDUCTION_PCT)}%); "
                f"migration {_gh1(o.get('migration_gpu_hours'))} GPU-h"
            )
        if kind == "compaction":
            parts = []
            for side in ("before", "after"):
                if side in summary:
                    s = summary[side]
                    parts.append(
                        f"{side}: {s.get('partial_nodes', '-')} partial, "
                        f"{s.get('free_nodes', '-')} free nodes"
                    )
            if "bound_free_nodes" in summary:
                parts.append(f"bound: {summary['bound_free_nodes']} free nodes")
            instant = f"one instant at {summary['at']}: " if parts else ""
            out.print("  " + instant + ("; ".join(parts) or "no figures in its document"))
        else:
            for p in summary.get("policies", []):
                out.print(
                    f"  {p.get('policy', '-')}: allocation rate high "
                    f"{_pct1(p.get('allocation_rate_high'))}, all {_pct1(p.get('allocation_rate'))}, "
                    f"standby {_gh(p.get('standby_gpu_hours'))} GPU-h, harvested "
                    f"{_pct1(p.get('harvested_share'))}, preemptions {p.get('preemptions', '-')}, "
                    f"lost {_gh1(p.get('lost_gpu_hours'))} GPU-h, unfinished {p.get('unfinished', '-')}"
                )
            if not summary.get("policies"):
                out.print("  no policy figures in its document")


def _delta(before: float, after: float) -> str:
    change = after - before
    return "0" if change == 0 else f"{change:+,.0f}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def render_compaction(report: CompactionReport, worst: int = 5) -> None:
    """Before/after, instances per shape, moves and their cost, the worst partitions."""
    result = report.result
    migration = result.migration
    for note in report.notes:
        err.print(f"note: {note}")
    table = Table(
        title=(
            f"compaction what-if at {iso(report.at)}"
            + (f" on scenario {report.scenario}" if report.scenario else "")
            + f": {len(result.partitions)} partition(s), {migration.moves:,} move(s), "
            f"{migration.gpus_moved:,.4g} GPUs moved, {report.seconds:.1f} s"
        ),
        title_justify="left",
    )
    for column in ("", "before", "after", "change"):
        table.add_column(column, justify="left" if not column else "right", no_wrap=not column)
    before, after = result.before, result.after
    table.add_row("free nodes", _int(before.free_nodes), _int(after.free_nodes),
                  _delta(before.free_nodes, after.free_nodes))  # fmt: skip
    table.add_row("partially occupied nodes", _int(before.partial_nodes),
                  _int(after.partial_nodes), _delta(before.partial_nodes, after.partial_nodes))  # fmt: skip
    table.add_row("free nodes: upper bound", "", _int(result.bound_free_nodes), "")
    for (shape, was), (_, now), queued in zip(
        before.instances, after.instances, report.queued, strict=True
    ):
        table.add_row(f"instances: {shape.label()} ({queued:,} queued)", _int(was), _int(now),
                      _delta(was, now))  # fmt: skip
    out.print(table)
    if migration.moves:
        out.print(
            f"migration: {migration.state_gib:,.0f} GiB of state, {migration.transfer_s:,.0f} s "
            f"of transfer; pause {migration.pause_gpu_hours:,.2f} GPU-hours against "
            f"{migration.freed_gpus:,} GPUs freed (pays back after {_duration(migration.payback_s)} "
            "of use)"
        )
    else:
        out.print("no move improves on the state at t: the ledger is empty.")
    hit = result.budgets_hit
    if hit:
        counts: dict[str, int] = {}
        for p in hit:
            for budget in p.budgets_hit:
                counts[budget] = counts.get(budget, 0) + 1
        out.print(
            f"{len(hit)} partition(s) hit a search budget: "
            + ", ".join(f"{b} ({n})" for b, n in sorted(counts.items()))
        )
    solved = [p for p in result.partitions if p.exact_status in ("optimal", "bound")]
    if report.options.exact:
        optimum = sum(p.exact_free or 0 for p in solved)
        heuristic = sum(p.after_free for p in solved)
        out.print(
            f"exact (ILP) on {len(solved)} of {len(result.partitions)} partition(s): "
            f"{optimum:,} free nodes at best, the search found {heuristic:,} "
            f"(gap {optimum - heuristic:,}), "
            f"{sum(p.exact_seconds or 0.0 for p in result.partitions):.1f} s"
        )
    ranked = sorted(
        result.partitions,
        key=lambda p: (-(p.bound_free - p.after_free), -p.after_partial, p.index),
    )[:worst]
    if ranked and len(result.partitions) > 1:
        parts = Table(title="partitions furthest from their bound", title_justify="left")
        for column in ("partition", "model", "nodes", "free", "bound", "partial", "moves",
                       "budgets hit", "s"):  # fmt: skip
            parts.add_column(
                column, justify="left" if column in ("model", "budgets hit") else "right"
            )
        for p in ranked:
            parts.add_row(
                str(p.index), p.gpu_model, _int(p.nodes), f"{p.before_free:,} → {p.after_free:,}",
                _int(p.bound_free), f"{p.before_partial:,} → {p.after_partial:,}", _int(p.moves),
                ", ".join(p.budgets_hit) or "-", f"{p.seconds:.2f}",
            )  # fmt: skip
        out.print(parts)
    if report.over_time is not None:
        _render_over_time(report)
    if report.saved:
        out.print(
            f"saved the compacted state as scenario {report.saved!r}; "
            f"see what it unlocks with: fleetaudit shapes --scenario {report.saved}"
        )


def _render_over_time(report: CompactionReport, rows: int = 12) -> None:
    """The window's rounds (a sample of at most ``rows``), then what compaction changed."""
    over, ot = report.over_time, report.over_time_options
    if over is None or ot is None:
        return
    ticks = over.ticks
    table = Table(
        title=(
            f"compaction over time, {iso(over.start)} .. {iso(over.end)}: a round every "
            f"{_duration(ot.every_s)}, at most {ot.moves_per_hour:,.4g} GPUs moved per hour, "
            f"arrivals placed {ot.policy}, queue {ot.queue}"
        ),
        title_justify="left",
    )
    for column in ("round at", "partial without", "partial with", "free without", "free with",
                   "queued without", "queued with", "moves", "GPUs moved", "cut"):  # fmt: skip
        table.add_column(column, justify="left" if column in ("round at", "cut") else "right")
    stride = max(1, -(-len(ticks) // rows))
    for t in ticks[::stride]:
        table.add_row(
            t.at.strftime("%Y-%m-%d %H:%M"), _int(t.without.partial_nodes),
            f"{t.before.partial_nodes:,} → {t.after.partial_nodes:,}",
            _int(t.without.free_nodes), f"{t.before.free_nodes:,} → {t.after.free_nodes:,}",
            _int(t.without.queued), _int(t.before.queued), _int(len(t.moves)),
            f"{t.gpus_moved:,.4g}", t.cut,
        )  # fmt: skip
    out.print(table)
    if stride > 1:
        out.print(f"(one round in {stride} of {len(ticks):,} shown; --json has them all)")
    reduction = over.partial_reduction_pct
    out.print(
        f"partially occupied nodes, time-averaged: {over.partial_without:,.1f} without, "
        f"{over.partial_with:,.1f} with compaction "
        f"({'-' if reduction is None else f'{reduction:+.1f}%'}; "
        f"the ASI paper reports {PAPER_PARTIAL_REDUCTION_PCT:+.1f}% in production)"
    )
    out.print(
        f"free nodes, time-averaged: {over.free_without:,.1f} without, {over.free_with:,.1f} with"
    )
    for shape, (without, with_, arrived) in zip(over.shapes, over.start_probability, strict=True):
        if arrived:
            out.print(
                f"start probability {shape.label()}: {_pct(without)} without, {_pct(with_)} with "
                f"({arrived:,} arrived)"
            )
    e = over.earlier
    if ot.policy == "recorded":
        out.print(
            f"{over.recorded_node:,} of {over.arrived:,} arriving requests have a recorded node "
            "(an allocation whose job_id is the request_id); the others were placed best-fit"
        )
    out.print(
        f"requests: {over.arrived:,} arrived; started {over.started[0]:,} without, "
        f"{over.started[1]:,} with; {e['requests']:,} started earlier by "
        f"{e['hours_total']:,.1f} h in all (mean {_hours(e['hours_mean'])}), "
        f"{e['only_with_compaction']:,} started only with compaction; "
        f"{e['later_requests']:,} started later by {e['later_hours_total']:,.1f} h, "
        f"{e['only_without_compaction']:,} only without"
    )
    m = over.migration
    out.print(
        f"migration paid: {m.moves:,} moves, {m.gpus_moved:,.4g} GPUs moved, "
        f"{m.pause_gpu_hours:,.2f} GPU-hours of pause; {over.seconds:.1f} s"
    )
    out.print("the one-instant figures above are for the state at the window's end")


def _hours(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f} h"


def render_harvesting(result: HarvestingResult) -> None:
    """Victim policies side by side: rates, standby harvested, completion times, losses."""
    title = (
        f"harvesting what-if, {iso(result.start)} .. {iso(result.end)}"
        + (f" (scenario {result.scenario})" if result.scenario else "")
        + f": {result.sleeps:,} sleeps from {result.telemetry_samples:,} telemetry rows"
    )
    table = Table(title=title, title_justify="left")
    table.add_column("policy", no_wrap=True)
    for header in (
        "HP",
        "HP+LP",
        "standby GPU-h",
        "harv.",
        "LP done mean/p50/p90",
        "preempt",
        "forced",
        "lost GPU-h",
        "unfin.",
    ):
        table.add_column(header, justify="right", no_wrap=True)
    for r in result.policies:
        c = r.completion_s()
        table.add_row(
            r.policy,
            _pct(r.allocation_rate_high),
            _pct(r.allocation_rate),
            f"{r.standby_gpu_hours:,.1f}",
            _pct(r.harvested_share),
            f"{_seconds(c['mean'])}/{_seconds(c['p50'])}/{_seconds(c['p90'])}",
            _int(r.preemptions),
            _int(r.forced_kills),
            f"{r.lost_gpu_hours:,.1f}",
            _int(r.unfinished),
        )
    out.print(table)
    out.print(
        "HP, HP+LP: allocated / healthy GPU-hours, high priority alone and with low priority. "
        "standby: GPU-hours lent by sleeping allocations; harv.: the share of them "
        "low-priority work used. LP done: completion time of the low-priority jobs that "
        "arrived in the window. preempt: evictions for high-priority starts and waking "
        "lenders; forced: evictions past the kill deadline; unfin.: jobs not done at "
        "the window's end."
    )
    for note in result.notes:
        err.print(f"note: {note}")
