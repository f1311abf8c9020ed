"""Terminal rendering (rich). With :mod:`fleetaudit.cli`, the only rich importer.

Data goes to stdout, notes and progress to stderr. Colour only on a terminal;
rich honours ``NO_COLOR`` and plain pipes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import polars as pl
from rich.console import Console
from rich.table import Table
from rich.text import Text

from fleetaudit.api import StoreSummary
from fleetaudit.generate import GenerateResult
from fleetaudit.harvest_api import HarvestingResult
from fleetaudit.ingest import IngestResult
from fleetaudit.placement_api import PlacementResult
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
