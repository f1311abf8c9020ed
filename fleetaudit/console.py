"""Terminal rendering (rich). With :mod:`fleetaudit.cli`, the only rich importer.

Data goes to stdout, notes and progress to stderr. Colour only on a terminal;
rich honours ``NO_COLOR`` and plain pipes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import polars as pl
from rich.console import Console
from rich.table import Table

from fleetaudit.api import StoreSummary
from fleetaudit.generate import GenerateResult
from fleetaudit.ingest import IngestResult
from fleetaudit.times import iso

# Off a terminal (cron, pipes) rich would wrap tables at 80 columns; plain text
# wider than that is easier to read in a log than wrapped headers.
out = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
err = Console(stderr=True, highlight=False)


def _int(value: object) -> str:
    return "-" if value is None else f"{int(value):,}"  # type: ignore[call-overload]


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
                str(r["file"]), str(r["row"]), str(r["column"]), str(r["value"]), str(r["reason"])
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
    per_model = (
        state.group_by("gpu_model")
        .agg(
            pl.col("gpus").sum().alias("installed"),
            pl.col("gpus").filter(~healthy).sum().alias("unhealthy"),
            pl.col("gpus_used_high").filter(healthy).sum().alias("high"),
            (pl.col("gpus_used") - pl.col("gpus_used_high")).filter(healthy).sum().alias("low"),
            pl.col("free_gpus").filter(healthy).sum().alias("idle"),
            pl.col("free_gpus_window").filter(healthy).sum().alias("idle_window"),
            (healthy & (pl.col("gpus_used") == 0)).sum().alias("free_nodes"),
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
