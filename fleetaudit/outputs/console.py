"""Terminal rendering (rich). With :mod:`fleetaudit.cli`, the only rich importer.

Data goes to stdout, notes and progress to stderr. Colour only on a terminal;
rich honours ``NO_COLOR`` and plain pipes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from copy import copy
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from fleetaudit.core import sanitize
from fleetaudit.core.fsutil import is_stdout, stream_fd, write_output
from fleetaudit.core.lazy import LazyModule
from fleetaudit.core.options import CALIBRATION_STARTS_TOLERANCE_PCT, CALIBRATION_WAIT_FACTOR
from fleetaudit.core.times import iso, seconds_text
from fleetaudit.outputs.charts import sparkline

# The engines and polars load when a command renders their results, not when the
# command line starts (``fleetaudit --help`` stays fast).
if TYPE_CHECKING:
    import polars as pl

    from fleetaudit.api import RejectsResult, StoreSummary, Window, report_api
    from fleetaudit.api.compaction_api import CompactionReport
    from fleetaudit.api.harvest_api import HarvestingResult
    from fleetaudit.api.paper_api import PaperResult
    from fleetaudit.api.placement_api import Baseline, PlacementResult
    from fleetaudit.api.remedies_api import RemediesResult, RemedyRow, Sizing
    from fleetaudit.api.report_api import ReportResult
    from fleetaudit.api.rollup_api import RollupResult
    from fleetaudit.api.shapes_api import ShapeReport, ShapesResult
    from fleetaudit.inputs.generate import GenerateResult
    from fleetaudit.inputs.generate_asi import AsiReleaseResult
    from fleetaudit.inputs.ingest import IngestResult
    from fleetaudit.model import capacity, denominators, occupancy, paper
    from fleetaudit.model import history as history_model
    from fleetaudit.model import shapes as shapes_model
    from fleetaudit.whatif import compaction_over_time
    from fleetaudit.whatif.placement.record import QueueFigures
else:
    pl = LazyModule("polars")
    capacity = LazyModule("fleetaudit.model.capacity")
    compaction_over_time = LazyModule("fleetaudit.whatif.compaction_over_time")
    denominators = LazyModule("fleetaudit.model.denominators")
    occupancy = LazyModule("fleetaudit.model.occupancy")
    paper = LazyModule("fleetaudit.model.paper")
    shapes_model = LazyModule("fleetaudit.model.shapes")
    history_model = LazyModule("fleetaudit.model.history")
    report_api = LazyModule("fleetaudit.api.report_api")

PIPED_WIDTH = 120


def output_width(environ: dict[str, str] | None = None, is_tty: bool | None = None) -> int | None:
    """The width tables are laid out for: ``COLUMNS`` when set, else the terminal's
    (None: rich asks it), else 120 (cron, pipes: a log reads better wide than wrapped).

    >>> output_width({"COLUMNS": "80"}, False), output_width({}, False), output_width({}, True)
    (80, 120, None)
    """
    env = os.environ if environ is None else environ
    columns = env.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    tty = sys.stdout.isatty() if is_tty is None else is_tty
    return None if tty else PIPED_WIDTH


class _Terminal(Console):
    """A rich console that shows the data's text safely and draws nothing when quiet.

    Every string, Text and table it prints passes :func:`safe` first (control
    characters escaped, long values cut: :mod:`fleetaudit.core.sanitize`), before rich
    lays anything out; quiet, it returns before rich renders (rich would lay a table out
    only to throw it away, minutes for a table holding one 4 MB value).
    """

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if self.quiet:
            return
        super().print(*(safe(o) for o in objects), **kwargs)


# markup=False: ids and models from the data may hold [brackets].
out = _Terminal(highlight=False, markup=False, width=output_width())
err = _Terminal(stderr=True, highlight=False, markup=False)
_csv_raw = False  # --csv-raw: CSV cells as they are (configure)


def configure(*, quiet: bool = False, data: bool = False, csv_raw: bool = False) -> None:
    """Set up the output of one command: its width (``COLUMNS`` as it is now);
    ``quiet``: print nothing but errors (which the CLI writes itself); ``data``: the
    command prints machine-readable data only, so its tables stay off stdout;
    ``csv_raw``: its CSV cells are written as they are (:func:`sanitize.csv_safe`).
    The tables the command shows from here on are kept for ``--csv``."""
    global _csv_raw
    width = output_width()
    if width is not None:
        out.width = width
    out.quiet = quiet or data
    err.quiet = quiet
    _shown.clear()
    _csv_raw = csv_raw


def safe(renderable: Any) -> Any:
    """A renderable with the data's text made safe to show (:func:`sanitize.shown`):
    a string or a Text as a line, a table's title, caption, headers and cells (cells
    cut at :data:`sanitize.CELL_CHARS`); anything else as it is. A table is changed in
    place; what this returns it returns unchanged."""
    if isinstance(renderable, str):
        return sanitize.shown(renderable)
    if isinstance(renderable, Text):
        return _safe_text(renderable, sanitize.LINE_CHARS)
    if isinstance(renderable, Table):
        for attribute in ("title", "caption"):
            value = getattr(renderable, attribute)
            if isinstance(value, (str, Text)):
                setattr(renderable, attribute, safe(value))
        for column in renderable.columns:
            if isinstance(column.header, (str, Text)):
                column.header = safe(column.header)
            column._cells = [
                sanitize.cell(c) if isinstance(c, str)
                else _safe_text(c, sanitize.CELL_CHARS) if isinstance(c, Text) else c
                for c in column._cells
            ]  # fmt: skip
    return renderable


def _safe_text(text: Text, limit: int) -> Text:
    plain = text.plain
    shown = sanitize.shown(plain, limit)
    if shown == plain:
        return text  # its styles kept
    return Text(shown, style=text.style, justify=text.justify, overflow=text.overflow)


def note(message: str) -> None:
    """A note on stderr (not under --quiet): wrapped to the width of a terminal, one
    line on a pipe or in a log (where a line per note is what grep reads)."""
    err.print(Text(f"note: {message}"), soft_wrap=not err.is_terminal)


def wrote(path: object) -> None:
    """Say on stderr that a file was written (not for stdout, not under --quiet)."""
    if stream_fd(str(path)) is None:
        err.print(f"wrote {path}", soft_wrap=True)


def _cell_width(cell: object) -> int:
    text = _plain(cell)
    return max((cell_len(line) for line in text.splitlines()), default=0)


def _table_width(widths: list[int], table: Table) -> int:
    """The width rich needs for columns this wide: padding and one rule between columns,
    and the outer edges when shown."""
    return sum(widths) + 3 * len(widths) - 1 + (2 if table.show_edge else 0)


FOLD_LABEL = 24
"""A label column folds its cells onto lines this wide (at spaces; a longer word is cut)
when its table does not fit the width."""


def _need(column: Any, folds: bool) -> int:
    """The narrowest a column may be: its widest cell (numbers and names stay whole) and
    its header's longest word; a folding column, at most FOLD_LABEL."""
    head = str(column.header)
    words = max((cell_len(w) for w in head.split()), default=0)
    if folds:
        return min(_natural(column), FOLD_LABEL)
    return max(max((_cell_width(c) for c in column._cells), default=0), words)


def fit(table: Table, fold: Sequence[str] = ()) -> list[Table]:
    """Lay a table out for the output width (``COLUMNS``, the terminal's, or 120 on a pipe),
    never leaving a column out.

    A table that fits is printed as it is. Otherwise every column keeps its cells whole
    (numbers, model names) and folds its header onto more lines, and the label column
    (the first) and the ``fold`` columns (free text) fold their cells onto lines
    (:data:`FOLD_LABEL`). When that is still too wide, the table is stacked: parts one
    under another, each with the label column and as many of the other columns, in
    their order, as fit.
    """
    width = out.width
    columns = table.columns
    natural = [_natural(c) for c in columns]
    if not columns or _table_width(natural, table) <= width:
        return [table]
    folding = {0} | {i for i, c in enumerate(columns) if str(c.header) in fold}
    needs = [_need(c, i in folding) for i, c in enumerate(columns)]
    # the label as wide as leaves the fewest parts (down to FOLD_LABEL_MIN)
    options = [_stacked(table, [w, *needs[1:]], width) for w in _label_widths(columns[0], needs[0])]
    needs[0], groups = min(options, key=lambda o: len(o[1]))
    parts = []
    for n, group in enumerate(groups):
        chosen = [0, *group]
        part = copy(table)
        part.columns = [replace(columns[j], _index=k) for k, j in enumerate(chosen)]
        if n:
            part.title = "(continued)" if table.title else None
        if n < len(groups) - 1:
            part.caption = None
        parts.append(
            _widths(part, [needs[j] for j in chosen], [j in folding for j in chosen], width)
        )
    return parts


FOLD_LABEL_MIN = 16
"""A stacked table's label column narrows down to this (from FOLD_LABEL) where that
leaves fewer parts."""


def _label_widths(column: Any, need: int) -> list[int]:
    """The widths a label column may take when its table is stacked, widest first."""
    words = max((cell_len(w) for c in column._cells for w in _plain(c).split()), default=0)
    return list(range(need, min(need, max(FOLD_LABEL_MIN, words)) - 1, -1))


def _stacked(table: Table, needs: list[int], width: int) -> tuple[int, list[list[int]]]:
    """The label's width and the other columns in parts that fit beside it, in order."""
    groups: list[list[int]] = [[]]
    for i in range(1, len(needs)):
        trial = [0, *groups[-1], i]
        if groups[-1] and _table_width([needs[j] for j in trial], table) > width:
            groups.append([])
        groups[-1].append(i)
    return needs[0], groups


def _widths(table: Table, needs: list[int], folds: list[bool], width: int) -> Table:
    """Exact column widths (rich's own squeezing would cut numbers and names short):
    headers unfold while there is room, then the folding columns widen, evenly."""
    spare = max(0, width - _table_width(needs, table))
    widths = list(needs)
    for i, column in enumerate(table.columns):
        extra = min(spare, max(0, cell_len(str(column.header)) - widths[i]))
        widths[i] += extra
        spare -= extra
    texts = [i for i, f in enumerate(folds) if f]
    while spare > 0 and texts:
        wanting = [i for i in texts if widths[i] < _natural(table.columns[i])]
        if not wanting:
            break
        for i in wanting[:spare]:
            widths[i] += 1
            spare -= 1
    for column, column_width in zip(table.columns, widths, strict=True):
        column.width = column_width
        column.no_wrap = False
        column.overflow = "fold"
    return table


def _natural(column: Any) -> int:
    """A column's width with nothing folded."""
    cells = max((_cell_width(c) for c in column._cells), default=0)
    return max(cells, cell_len(str(column.header)))


def _plain(cell: object) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


_shown: list[tuple[str, pl.DataFrame]] = []
"""The tables a command showed, by name, with their figures (for ``--csv``)."""


def show(table: Table, name: str, csv: pl.DataFrame | None, fold: Sequence[str] = ()) -> None:
    """Print a table fitted to the output width (:func:`fit`), its text made safe first
    (:func:`safe`: fitted to the values shown, not to a 4 MB one), and keep its figures
    for ``--csv`` as table ``name``.

    ``csv`` holds every figure of the table in machine column names and unrounded
    values, every row (a table on the terminal may list the largest rows only); None
    where the figures are those of another table of the command (named there).
    Tables shown under one name are one table of the CSV.
    """
    if csv is not None:
        _shown.append((name, csv))
    if out.quiet:
        return
    for part in fit(safe(table), fold):
        if part.title:  # a line of its own, as wide as the terminal, not the table
            out.print(Text(str(part.title), style="italic"))
            part.title = None
        out.print(part)


@contextmanager
def silenced() -> Iterator[None]:
    """Nothing printed within (tables, lines, notes): the tables shown are kept alone."""
    quiet = out.quiet, err.quiet
    out.quiet = err.quiet = True
    _shown.clear()
    try:
        yield
    finally:
        out.quiet, err.quiet = quiet


def keep(name: str, csv: pl.DataFrame) -> None:
    """Keep a table's figures for ``--csv`` where the terminal shows no table (none to list)."""
    _shown.append((name, csv))


def shown_tables() -> list[tuple[str, pl.DataFrame]]:
    """The tables the command showed (:func:`show`), in order; those of one name joined."""
    merged: dict[str, list[pl.DataFrame]] = {}
    for name, frame in _shown:
        merged.setdefault(name, []).append(frame)
    return [(name, _concat(frames)) for name, frames in merged.items()]


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame:
    frames = [_flat(f) for f in frames]
    if len(frames) == 1:
        return frames[0]
    try:
        return pl.concat(frames, how="diagonal_relaxed")
    except pl.exceptions.PolarsError:  # a column of one name and two kinds: as text
        return pl.concat([f.cast(pl.String) for f in frames], how="diagonal_relaxed")


def _flat(frame: pl.DataFrame) -> pl.DataFrame:
    """List columns joined by ``|`` (CSV holds no lists)."""
    lists = [name for name, dtype in frame.schema.items() if isinstance(dtype, pl.List)]
    if not lists:
        return frame
    return frame.with_columns(
        pl.col(name).list.eval(pl.element().cast(pl.Utf8)).list.join("|") for name in lists
    )


def tables_csv(tables: list[tuple[str, pl.DataFrame]]) -> str:
    """One CSV text of the tables: a single table as it is; several, each row led by
    its table's name (column ``table``) under the union of their columns."""
    if not tables:
        return ""
    if len(tables) == 1:
        return _csv_text(tables[0][1])
    clash = [name for name, frame in tables if "table" in frame.columns]
    assert not clash, f"tables {clash} hold a column named table, which leads the CSV"
    named = [frame.select(pl.lit(name).alias("table"), pl.all()) for name, frame in tables]
    return _csv_text(_concat(named))


def _csv_text(frame: pl.DataFrame) -> str:
    """A table's CSV, its cells a spreadsheet would run neutralised unless --csv-raw
    (:func:`sanitize.csv_safe`)."""
    return sanitize.csv_safe(frame, raw=_csv_raw).write_csv()


def put(path: Path, text: str) -> None:
    """An output document to ``path``: ``-`` (or /dev/stdout) is this process's stdout,
    alone; anything else is written by :func:`fleetaudit.core.fsutil.write_output`."""
    if is_stdout(path):
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        write_output(path, text)
        wrote(path)


def write_tables(path: str) -> None:
    """``--csv PATH``: the tables the command showed, as CSV (:func:`tables_csv`); a
    folder (one that exists, or a path ending in ``/``) gets one file per table,
    ``NAME.csv``, each written whole."""
    tables = shown_tables()
    if not is_stdout(path) and (path.endswith("/") or Path(path).is_dir()):
        for name, frame in tables:
            put(Path(path) / f"{name}.csv", _csv_text(frame))
        return
    put(Path(path), tables_csv(tables))


def _int(value: object) -> str:
    return "-" if value is None else f"{int(value):,}"  # type: ignore[call-overload]


@contextmanager
def progress_status(first: str) -> Iterator[Callable[[str], None]]:
    """A spinner on stderr (only on a terminal) whose text the callback updates."""
    if not err.is_terminal or err.quiet:
        yield lambda _msg: None
        return
    with err.status(sanitize.shown(first)) as status:
        yield lambda msg: status.update(sanitize.shown(msg))


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
    show(table, "ingest", ingest_frame(result))
    topo = result.topology
    if topo is not None:
        line = (
            f"topology ({topo.kind}) {topo.file}: {topo.placed:,} node(s) placed in "
            f"{topo.switches:,} switch(es) and {topo.blocks:,} block(s)"
        )
        if topo.missing:
            line += f"; {topo.missing:,} node(s) not in the file keep their own domain"
        if topo.unknown:
            line += f"; {topo.unknown:,} node(s) of the file are not among this call's nodes"
            if topo.unknown_names:
                more = ", ..." if topo.unknown > len(topo.unknown_names) else ""
                line += f" ({', '.join(topo.unknown_names)}{more})"
        if topo.duplicates:
            line += f"; {topo.duplicates:,} node(s) named twice (the first kept)"
        out.print(Text(line))
    for text in result.notes:  # what the adapter decided: a message, not data
        note(text)
    if result.rejected:
        out.print(
            f"{result.rejected:,} row(s) rejected; the first of them below, all in the "
            "store's rejects table (file, row, column, value, reason)."
        )
        # the first of them: `fleetaudit rejects --csv` lists them all
        show(_rejects_table(result.rejects.head(10)), "rejects", None, fold=_REJECT_TEXT)
        if result.rejected > 10:
            out.print(f"all of them: fleetaudit rejects --ingest {result.ingest_id}")


_REJECT_TEXT = ("file", "value", "reason")


def _rejects_table(frame: pl.DataFrame) -> Table:
    table = Table(show_edge=False)
    for column in ("file", "row", "column", "value", "reason"):
        # the value (a whole bad line) folds first on a narrow terminal
        table.add_column(
            column,
            justify="right" if column == "row" else "left",
            overflow="fold",
            ratio=2 if column in ("value", "reason") else None,
        )
    for r in frame.iter_rows(named=True):
        table.add_row(
            *(
                Text("" if r[c] is None else str(r[c]))
                for c in ("file", "row", "column", "value", "reason")
            )
        )
    return table


def render_rejects(result: RejectsResult) -> None:
    """``fleetaudit rejects``: one ingest call's rejected rows."""
    if result.ingest_id is None:
        out.print(f"store {result.db}: no ingest yet")
        return
    shown = result.rejects.height
    more = f", the first {shown:,} below" if shown < result.total else ""
    out.print(f"ingest #{result.ingest_id}: {result.total:,} row(s) rejected{more}")
    frame = result.rejects.drop("ingest_id")
    if shown:
        show(_rejects_table(result.rejects), "rejects", frame, fold=_REJECT_TEXT)
    else:
        keep("rejects", frame)


def render_summary(summary: StoreSummary) -> None:
    source = f" (from {summary.export_time_from})" if summary.export_time_from else ""
    out.print(
        f"store {summary.db}: export time {iso(summary.export_time) or '-'}{source}, "
        f"{summary.queued:,} request(s) queued"
    )
    tables = Table(title="tables", title_justify="left")
    for column in ("table", "rows", "first", "last"):
        tables.add_column(column, justify="right" if column == "rows" else "left")
    for r in summary.tables.iter_rows(named=True):
        tables.add_row(r["table"], _int(r["rows"]), iso(r["first"]) or "", iso(r["last"]) or "")
    show(tables, "tables", summary.tables.rename({"table": "name"}))
    render_models(summary.models, summary.domains)
    if summary.scenarios.height:
        scen = Table(title="scenarios", title_justify="left")
        for column in ("name", "command", "at", "created"):
            scen.add_column(column)
        for r in summary.scenarios.iter_rows(named=True):
            scen.add_row(r["name"], r["command"], iso(r["at"]) or "", iso(r["created_at"]) or "")
        show(scen, "scenarios", summary.scenarios)


def render_models(models: pl.DataFrame, domains: int) -> None:
    """Capacity by GPU model and the fleet's row; ``domains`` is the fleet's switch
    domains (a domain holding two models counts once)."""
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
            _int(domains),
            style="bold",
        )
    show(table, "capacity", models)


def bound_lines(bound: pl.DataFrame) -> list[str]:
    """One line per model with CPU- or memory-bound nodes (their idle GPUs cannot take work)."""
    return [
        f"cpu/memory-bound: {r['gpu_model']}: {r['nodes']:,} node(s) with idle GPUs have every "
        f"CPU ({r['cpu_bound_nodes']:,}) or all memory ({r['memory_bound_nodes']:,}) in use; "
        f"their {r['idle_gpus']:,} idle GPUs cannot take work"
        for r in bound.iter_rows(named=True)
    ]


def render_state(state: pl.DataFrame, at: str, window: str | None = None) -> None:
    """The state at an instant per GPU model: GPUs by status, free and partial nodes.

    With a window, also the GPUs idle over all of it (the free interval).
    """
    per_model = state_by_model(state)
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
    show(table, "state", per_model.select(list(headers)))
    out.print(
        "installed = unhealthy + alloc high + alloc low + idle; alloc high is high-priority "
        "work alone; shares count the GPUs they fill when packed first-fit-decreasing."
    )
    for line in bound_lines(occupancy.bound_nodes(state)):
        out.print(Text(line))
    over = int(per_model["overcommitted"].sum())
    if over:
        note(
            f"{over} node(s) hold more GPUs of allocations than they have; "
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
    frame = pl.DataFrame(
        [(n, result.rows.get(n, 0), str(p)) for n, p in result.files.items()],
        schema={"table": pl.String, "rows": pl.Int64, "file": pl.String}, orient="row",
    )  # fmt: skip
    show(table, "generated", frame, fold=("file",))


def render_rollup(result: RollupResult) -> None:
    if result.format == "alibaba-gpu-v2026":
        out.print(
            f"rolled up {result.rows:,} pod-hours of the release into {len(result.written):,} "
            f"file(s) on {result.engine} in {result.seconds:.1f} s; `fleetaudit ingest` of the "
            "folder loads them as it would the release",
            soft_wrap=True,
        )
        if result.skipped:
            err.print(
                f"note: {result.skipped:,} pod-hour(s) kept as rejects (without a pod or server "
                "id, a value that is no finite number, or an hour given twice): ingest stores "
                "each with its reason"
            )
        return
    seconds = int(result.interval_s)
    unit = next(
        u for u, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)) if seconds % size == 0
    )
    size = {"d": 86400, "h": 3600, "m": 60, "s": 1}[unit]
    out.print(
        f"rolled up {result.rows:,} raw rows of {result.files:,} file(s) per "
        f"{seconds // size}{unit} on {result.engine} in {result.seconds:.1f} s"
    )
    table = Table()
    table.add_column("table")
    table.add_column("rows", justify="right")
    table.add_column("file")
    for name, (path, rows) in result.written.items():
        table.add_row(name, _int(rows), str(path))
    frame = pl.DataFrame(
        [(n, rows, str(p)) for n, (p, rows) in result.written.items()],
        schema={"table": pl.String, "rows": pl.Int64, "file": pl.String}, orient="row",
    )  # fmt: skip
    show(table, "rollup", frame, fold=("file",))
    if result.skipped:
        note(
            f"{result.skipped:,} raw row(s) left out: ingest would reject them "
            "(a required value missing, a fraction outside 0..1, a negative gpu_index)"
        )


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
    show(table, "shapes", shapes_frame(result))
    if not reports:
        out.print(
            "no GPU request is queued at this instant; give a shape with --model/--gpus or --shapes"
        )
        for text in result.notes:
            note(text)
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
    for text in result.notes:
        note(text)


def _render_outlook(reports: tuple[ShapeReport, ...]) -> None:
    """Reclaimable capacity, start probability, waits and their calibration, where asked."""
    with_reclaim = any(r.reclaim is not None for r in reports)
    with_history = any(r.history is not None for r in reports)
    if not (with_reclaim or with_history):
        return
    title = " and ".join(
        t for t, on in (("reclaim", with_reclaim), ("start outlook", with_history)) if on
    )
    table = Table(title=title, title_justify="left")
    table.add_column("shape", no_wrap=True)
    if with_reclaim:
        table.add_column("+evict", justify="right", no_wrap=True)
        table.add_column("lost GPU-h", justify="right", no_wrap=True)
    if with_history:
        for header in ("p_start", "wait p50/p90", "in deadline", "started", "real p50/p90",
                       "left out"):  # fmt: skip
            table.add_column(header, justify="right", no_wrap=True)
    for r in reports:
        row: list[str | Text] = [Text(r.evaluation.shape.label())]
        if with_reclaim:
            rc = r.reclaim
            row += ["-", "-"] if rc is None else [_int(rc.instances), f"{rc.lost_gpu_hours:,.2f}"]
        if with_history:
            h, cal = r.history, r.calibration
            row += ["-"] * 3 if h is None else [
                _pct(h.p_start), f"{seconds_text(h.wait_p50_s)}/{seconds_text(h.wait_p90_s)}", _pct(h.p_within_deadline),
            ]  # fmt: skip
            if cal is None or cal.started == 0:
                row += ["0", "-"]
            else:
                row += [
                    _int(cal.started),
                    f"{seconds_text(cal.actual_wait_p50_s)}/{seconds_text(cal.actual_wait_p90_s)} "
                    f"(pred. {seconds_text(cal.predicted_wait_p50_s)}/{seconds_text(cal.predicted_wait_p90_s)})",
                ]
            row.append("-" if cal is None else _int(sum(cal.left_out.values())))
        table.add_row(*row)
    show(table, "shapes", None)  # its figures are columns of the shapes table's CSV
    legend = []
    if with_reclaim:
        legend.append(
            "+evict: instances that evicting low-priority and sleepable work would add, losing "
            "lost GPU-h."
        )
    if with_history:
        legend.append(
            "waits: time to the first step with an instance, '-' censored (none in the "
            "window). started: requests of the shape submitted in the window that started; "
            "their real waits beside the predicted ones; left out: the shape's other "
            "requests of the window, below."
        )
    out.print(" ".join(legend))
    for r in reports:
        cal = r.calibration
        if cal is None:
            continue
        classes = [seconds_text(d) if d else "none" for d in cal.durations]
        text = f"calibration of {r.evaluation.shape.label()}: {cal.started:,} started"
        if len(classes) > 1 or (classes and classes != ["none"]):
            text += f" (durations {', '.join(classes)}, each against its own duration's history)"
        text += f"; left out: {cal.left_out_text() or 'none'}"
        out.print(Text(text))


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
    frame = misses.select(pl.lit(report.evaluation.shape.label()).alias("shape"), pl.all())
    if misses.is_empty():
        out.print(f"nearest misses: {report.evaluation.shape.label()}: no eligible node")
        keep("misses", frame)
    else:
        show(table, "misses", frame)


_SPARK = "▁▂▃▄▅▆▇█"


def _spark(values: list[float], top: float = 100.0) -> str:
    return "".join(_SPARK[min(len(_SPARK) - 1, max(0, int(v / top * len(_SPARK))))] for v in values)


def _one_pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def render_calibration(baseline: Baseline) -> None:
    """The baseline replay beside the record (every replay-based what-if prints it), with
    every discipline's when a calibration ran; a note where it misses the record."""
    fit = baseline.fit
    table = Table(
        title=f"baseline: the recorded fleet replayed under {baseline.discipline} "
        f"({baseline.chosen_by}), beside the record",
        title_justify="left",
    )
    for name in ("", "started", "waiting", "never", "wait p50", "wait p90", "alloc gap"):
        table.add_column(name, justify="left" if not name else "right", no_wrap=True)

    def row(label: str, f: QueueFigures, gap: str) -> None:
        table.add_row(label, f"{f.started:,}", f"{f.waiting:,}", f"{f.never:,}",
                      _duration(f.wait_p50_s), _duration(f.wait_p90_s), gap)  # fmt: skip

    row("record", fit.record, "")
    fits = baseline.calibration.fits if baseline.calibration is not None else (fit,)
    for f in fits:
        mark = "*" if f.discipline == baseline.discipline else ""
        ok = "" if f.within_tolerance else " !"
        row(f"{f.discipline}{mark}{ok}", f.replay, f"{f.allocation_gap_pts:.1f} pts")
    show(table, "calibration", calibration_frame(baseline))
    tol = (
        f"within {CALIBRATION_STARTS_TOLERANCE_PCT:g}% of the record's starts and a factor "
        f"{CALIBRATION_WAIT_FACTOR:g} of its waits"
    )
    result = baseline.result
    out.print(
        f"{fit.record.arrived:,} requests arrived; * the baseline, ! outside the tolerance "
        f"({tol}); waits of the started requests; alloc gap: mean distance of the allocation "
        f"curves. Baseline: {result.held:,} held to their recorded start at the end, "
        f"{result.preemptions.height:,} preemptions ({result.lost_gpu_hours:,.1f} GPU-hours "
        f"lost), {len(result.never):,} fit no node even empty."
    )
    for text in baseline.notes:
        note(text)


def render_placement(result: PlacementResult) -> None:
    """Policies side by side: allocated %/fragmented % along the run, failures, a small curve."""
    if result.baseline is not None:
        render_calibration(result.baseline)
    if result.mode == "time":
        key, steps = "instant_pct", [0.0, 25.0, 50.0, 75.0, 100.0]
        title = (
            f"placement what-if by time, {iso(result.start)} .. {iso(result.at)}, {result.queue} queue"
            f"{', from an empty fleet' if result.empty else ''}, {result.gpus:,} GPUs: "
            "allocated %/fragmented % at % of the window" + _headline(result.window)
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
    curves = dict(result.curves)
    if result.mode == "time" and result.recorded is not None:
        curves = {"recorded": result.recorded, **curves}  # the baseline, as it happened
    for policy, curve in curves.items():
        by = {round(r[key], 6): r for r in curve.iter_rows(named=True)}
        cells = []
        for s in steps:
            r = by.get(round(s, 6))
            frag = None if r is None else r.get("fragmented_pct")
            cells.append("-" if r is None else f"{_one_pct(r['allocated_pct'])}/{_one_pct(frag)}")
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
    show(table, "placement", placement_frame(result))
    out.print(
        "fragmented: idle GPU capacity the workload's request shapes, weighted by how often "
        "they occur, cannot use (the FGD paper's measure); failed: requests that found no node"
        + (
            " (by time: fit no node at all, or still waiting at the end). recorded: the fleet "
            "as it happened (its fragmentation is not computed)."
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
_TENANTS_SHOWN = 20
_SPARK_REPORTS = 40  # the newest recorded reports a trend sparkline draws


def _gh(value: float | None) -> str:
    """GPU-hours, whole."""
    return "-" if value is None else f"{value:,.0f}"


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


def _bar_width(names: list[str]) -> int:
    """Bars as wide as fit beside the model names and three percentages (at most 24)."""
    model = max((cell_len(n) for n in names), default=5)
    room = out.width - model - 3 * (7 + 3) - 2  # " 100.0%" per bar, padding and rules
    return max(4, min(_BAR_WIDTH, room // 3))


def _denominator_bars(
    figures: dict[str, object], width: int = _BAR_WIDTH
) -> tuple[Text, Text, Text]:
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
        width,
    )
    schedulable = _share_bar([(sc["usable_gpu_hours"], "green")], sc["idle_gpu_hours"], width)
    productive = _share_bar(  # not usable's green: the bars stand side by side
        [(pr["sm_active_gpu_hours"], "magenta")], pr["telemetry_gpu_hours"], width
    )
    return physical, schedulable, productive


def _pct_of(part: float, whole: float) -> str:
    return "-" if whole <= 0 else f"{100 * part / whole:5.1f}%"


def _headline(window: Window | None) -> str:
    """What a title says about its window beside the bounds: shortened to the data, or
    longer than it (``; ...``), or nothing."""
    text = None if window is None else window.headline()
    return f"; {text}" if text else ""


def render_report(result: ReportResult) -> None:
    """The one-screen summary (three denominators per model as aligned bars), then details."""
    title = f"report {iso(result.start)} .. {iso(result.end)}, step {seconds_text(result.step_s)}"
    if result.scenario:
        title += f" (scenario {result.scenario})"
    title += _headline(result.window)
    table = Table(title=title, title_justify="left", show_edge=False)
    table.add_column("model", no_wrap=True)
    for header in (
        "physical: allocated / healthy",
        "schedulable: usable / idle",
        "productive: SM-active / sampled allocated",
    ):
        table.add_column(header, no_wrap=True)
    rows = [("fleet", result.fleet), *result.models.items()]
    bar_width = _bar_width([name for name, _ in rows])
    for name, figures in rows:
        ph, sc, pr = figures["physical"], figures["schedulable"], figures["productive"]
        bars = _denominator_bars(figures, bar_width)
        table.add_row(
            Text(name, style="bold" if name == "fleet" else ""),
            bars[0] + Text(f" {_pct_of(ph['allocated_gpu_hours'], ph['healthy_gpu_hours'])}"),
            bars[1] + Text(f" {_pct_of(sc['usable_gpu_hours'], sc['idle_gpu_hours'])}")
            if sc.get("evaluated", True)
            else Text("not evaluated", style="italic"),
            bars[2] + Text(f" {_pct_of(pr['sm_active_gpu_hours'], pr['telemetry_gpu_hours'])}"),
        )
    show(table, "summary", report_frame(result))  # the bars narrow to the width
    fleet = result.fleet["physical"]
    out.print(
        f"allocation rate: high {_pct1(fleet['allocation_rate_high'])}, "
        f"high + low {_pct1(fleet['allocation_rate'])} of healthy GPU-hours; "
        f"bars: █ high/usable/SM-active, ▒ low priority, · the rest"
    )
    pr = result.fleet["productive"]
    out.print(
        f"SM-active rate {_pct1(pr['productive_rate'])} of the allocated GPU-hours with "
        f"telemetry; telemetry covers {_pct1(pr['coverage'])} of allocated GPU-hours"
    )
    _render_trend(result)
    out.print()
    _render_physical(rows)
    _render_schedulable(rows, result)
    _render_productive(rows, result)
    _render_failures(result)
    if result.money is not None:
        _render_report_money(result.money)
    _render_recoverable(result)
    _render_report_remedies(result.remedies)
    for text in result.notes:
        note(text)


def _render_report_money(money: dict[str, Any]) -> None:
    """report --prices: the denominators in money per model and fleet, and the showback."""
    currency = money.get("currency") or ""
    unit = f" ({currency})" if currency else ""
    table = Table(title=f"in money{unit}, prices from {money['source']}", title_justify="left")
    table.add_column("model")
    for head in ("idle", "stranded", "unproductive", "allocated"):
        table.add_column(head, justify="right")
    rows = [("fleet", money["fleet"]), *money["models"].items()]
    for name, m in rows:
        stranded = [m.get(c) for c in CAUSE_HEADS]
        total = None if any(v is None for v in stranded) else sum(v or 0.0 for v in stranded)
        table.add_row(name, _money(m.get("idle"), ""), _money(total, ""),
                      _money(m.get("unproductive"), ""), _money(m.get("allocated"), ""))  # fmt: skip
    show(table, "money", pl.DataFrame(
        [
            {"model": name, **{k: m.get(k) for k in ("idle", *CAUSE_HEADS, "unqueued",
                                                     "unproductive", "allocated")}}
            for name, m in rows
        ],
        schema={"model": pl.String, **dict.fromkeys(("idle", *CAUSE_HEADS, "unqueued",
                                                      "unproductive", "allocated"), pl.Float64)},
    ))  # fmt: skip
    fleet = money["fleet"]
    out.print(
        "stranded by cause: "
        + ", ".join(f"{c} {_money(fleet.get(c), currency)}" for c in CAUSE_HEADS)
        + f"; unqueued {_money(fleet.get('unqueued'), currency)}"
    )
    tenants = list(money["tenants"].items())
    if tenants:
        showback = Table(title=f"showback{unit}: allocated cost (at the tenant's rate) and its "
                         "share of the idle cost (by its share of allocated GPU-hours)",
                         title_justify="left")  # fmt: skip
        showback.add_column("tenant")
        for head in ("GPU-hours", "rate", "allocated", "idle share", "idle"):
            showback.add_column(head, justify="right")
        for tenant, t in tenants[:_TENANTS_SHOWN]:
            showback.add_row(tenant, _gh(t["allocated_gpu_hours"]), f"{t['rate']:g}",
                             _money(t["allocated"], ""), _pct1(t["idle_share"]),
                             _money(t["idle"], ""))  # fmt: skip
        show(showback, "showback", pl.DataFrame(
            [{"tenant": tenant, **{k: t.get(k) for k in ("allocated_gpu_hours", "rate",
                                                          "allocated", "idle_share", "idle")}}
             for tenant, t in tenants],
            schema={"tenant": pl.String, **dict.fromkeys(("allocated_gpu_hours", "rate",
                                                           "allocated", "idle_share", "idle"),
                                                          pl.Float64)},
        ), fold=("tenant",))  # fmt: skip
        if len(tenants) > _TENANTS_SHOWN:
            out.print(f"the other {len(tenants) - _TENANTS_SHOWN} tenants are in --json")
    for text in money.get("notes", []):
        note(text)


def _render_report_remedies(remedies: dict[str, Any] | None) -> None:
    """The latest whatif remedies run, one line per remedy."""
    if remedies is None:
        out.print("remedies: not run on this database yet (fleetaudit whatif remedies)")
        return
    out.print(f"remedies: {remedies['ran']}, window {remedies['start']} .. {remedies['end']}, "
              f"{remedies['queue']} queue")  # fmt: skip
    for i, label in enumerate(remedies["shapes"], start=1):
        out.print(f"  S{i}: {label}")
    for row in remedies["rows"]:
        p = ", ".join(f"S{i} {_pct1(v)}" for i, v in enumerate(row["p_start"], start=1))
        change = "" if row["kind"] == "baseline" else (
            f" ({_signed(row['started_change'])} started, {_signed(row['served_change'])} GPU-hours served)"
        )  # fmt: skip
        rank = "" if row.get("rank") is None else f", rank {row['rank']} at {row['per_extra_gpu_hour']:,.2f} per extra GPU-hour"
        out.print(f"  {row['name']}: {row['started']:,} started{change}; {p or 'no shape'}{rank}")


def _render_trend(result: ReportResult) -> None:
    frame = _trend_frame(result)
    if result.previous is None:
        kind = report_api.describe_trend(result)
        out.print(f"trend: no earlier recorded window of this report's kind ({kind})")
        keep("trend", frame)
        return
    before = result.previous
    table = Table(
        title=f"trend since the window {iso(before['start'])} .. {iso(before['end'])} "
        f"(recorded {iso(before['created_at'])}); like for like: {report_api.describe_trend(result)}",
        title_justify="left",
    )
    table.add_column("figure", no_wrap=True)
    for header in ("now", "then", "change"):
        table.add_column(header, justify="right", no_wrap=True)
    for f in result.trend:
        rate = "rate" in f["figure"]
        shown = _pct1 if rate else _one
        change = f["change"]
        table.add_row(
            f["label"],
            shown(f["value"]),
            shown(f["previous"]),
            "-" if change is None else f"{100 * change:+.1f} pt" if rate else f"{change:+,.1f}",
        )
    show(table, "trend", frame)
    rates = report_api.trend_rates(result)
    count = len(rates[0][2])
    shown_points = min(count, _SPARK_REPORTS)
    out.print(
        f"over {'the last ' if shown_points < count else ''}{shown_points} recorded windows, "
        "oldest first (this one last):"
    )
    width = max(cell_len(label) for _, label, _ in rates)
    for _key, label, values in rates:
        out.print(
            Text(f"  {label:<{width}} {sparkline(values[-shown_points:])} {_pct1(values[-1])}"),
            no_wrap=True,
            overflow="ellipsis",
        )


def _one(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _trend_frame(result: ReportResult) -> pl.DataFrame:
    """The headline figures now and in the preceding window, and their change."""
    return pl.DataFrame(
        [{k: f[k] for k in ("figure", "value", "previous", "change")} for f in result.trend],
        schema={"figure": pl.String, "value": pl.Float64, "previous": pl.Float64,
                "change": pl.Float64},
    )  # fmt: skip


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
    show(table, "physical", _per_model(rows, "physical"))


def _render_schedulable(rows: list[tuple[str, dict[str, Any]]], result: ReportResult) -> None:

    instants = result.steps["instant"].n_unique()
    table = Table(
        title=f"schedulable GPU-hours (sampled at {instants:,} instants)", title_justify="left"
    )
    table.add_column("model", no_wrap=True)
    for header in ("idle", "usable", *denominators.SPLIT, "unhealthy"):
        table.add_column(header, justify="right", no_wrap=True)
    for name, figures in rows:
        s = figures["schedulable"]
        table.add_row(
            Text(name),
            _gh(s["idle_gpu_hours"]),
            _gh(s["usable_gpu_hours"]) if s.get("evaluated", True) else "not evaluated",
            *(_gh(s["stranded_gpu_hours"][c]) for c in denominators.SPLIT),
            _gh(s["unhealthy_gpu_hours"]),
        )
    show(table, "schedulable", _schedulable_frame(rows))
    _render_places(result)
    shapes = Table(title="demand shapes over the window", title_justify="left")
    shapes.add_column("shape", no_wrap=True)
    for header in ("requests", "queued", "p_start", "wait p50", "wait p90", "usable GPU-h as best"):
        shapes.add_column(header, justify="right", no_wrap=True)
    for s in result.shapes:
        shapes.add_row(
            Text(s.shape.label() + (" (share)" if s.shape.is_share else "")),
            _int(s.requests if s.requests is not None else s.queued),
            _int(s.queued),
            _pct1(s.p_start),
            seconds_text(s.wait_p50_s),
            seconds_text(s.wait_p90_s),
            _gh(s.usable_gpu_hours),
        )
    for line in bound_lines(
        pl.DataFrame(
            [{"gpu_model": m, **v} for m, v in result.bound.items()],
            schema={
                "gpu_model": pl.String,
                "nodes": pl.Int64,
                "cpu_bound_nodes": pl.Int64,
                "memory_bound_nodes": pl.Int64,
                "idle_gpus": pl.Int64,
            },
        )  # fmt: skip
    ):
        out.print(Text(f"{line} (at {iso(result.end)})"))
    if result.demand:
        out.print(Text(report_api.describe_demand(result.demand)))
    if result.shapes:
        show(shapes, "demand_shapes", _demand_shapes_frame(result))
    else:
        out.print("no GPU request is in the window's demand: all idle GPUs are unqueued")


def _per_model(rows: list[tuple[str, dict[str, Any]]], part: str) -> pl.DataFrame:
    """One denominator's figures, the fleet then each model, as a frame (for --csv)."""
    return pl.DataFrame(
        [{"model": name, **{k: v for k, v in f[part].items() if not isinstance(v, dict)}}
         for name, f in rows],
        infer_schema_length=None,
    )  # fmt: skip


def _schedulable_frame(rows: list[tuple[str, dict[str, Any]]]) -> pl.DataFrame:
    """The schedulable GPU-hours, the stranded ones by cause in their own columns."""
    return pl.DataFrame(
        [
            {"model": name, "idle_gpu_hours": s["idle_gpu_hours"],
             "usable_gpu_hours": s["usable_gpu_hours"],
             **{f"{c}_gpu_hours": s["stranded_gpu_hours"][c] for c in denominators.SPLIT},
             "unhealthy_gpu_hours": s["unhealthy_gpu_hours"]}
            for name, f in rows
            for s in [f["schedulable"]]
        ],
        infer_schema_length=None,
    )  # fmt: skip


def _demand_shapes_frame(result: ReportResult) -> pl.DataFrame:
    """Every demand shape the report evaluated, heaviest first."""
    return pl.DataFrame(
        [
            {"shape": s.shape.label(), "share": s.shape.is_share,
             "requests": s.requests if s.requests is not None else s.queued,
             "queued": s.queued, "p_start": s.p_start, "wait_p50_s": s.wait_p50_s,
             "wait_p90_s": s.wait_p90_s, "usable_gpu_hours_as_best": s.usable_gpu_hours}
            for s in result.shapes
        ],
        schema={"shape": pl.String, "share": pl.Boolean, "requests": pl.Int64,
                "queued": pl.Int64, "p_start": pl.Float64, "wait_p50_s": pl.Float64,
                "wait_p90_s": pl.Float64, "usable_gpu_hours_as_best": pl.Float64},
    )  # fmt: skip


def _productive_frame(rows: list[tuple[str, dict[str, Any]]], result: ReportResult) -> pl.DataFrame:
    """The productive figures per workload, per model (and the fleet) and per tenant, all
    of them (the terminal lists the largest tenants)."""
    keys = ("allocated_gpu_hours", "telemetry_gpu_hours", "coverage", "sm_active_gpu_hours",
            "productive_rate")  # fmt: skip
    entries = [("workload", w, p) for w, p in result.fleet["productive"]["workloads"].items()]
    entries += [("model", name, f["productive"]) for name, f in rows]
    entries += [("tenant", t, f["productive"]) for t, f in sorted(result.tenants.items())]
    return pl.DataFrame(
        [
            {"by": by, "name": name, **{k: p.get(k) for k in keys},
             "upper_bound": bool(p.get("upper_bound"))}
            for by, name, p in entries
        ],
        schema={"by": pl.String, "name": pl.String, **dict.fromkeys(keys, pl.Float64),
                "upper_bound": pl.Boolean},
    )  # fmt: skip


_PLACES_SHOWN = 20


def _render_places(result: ReportResult) -> None:
    """The switch domains that strand most GPU-hours, by cause, and the rest summed."""
    places = result.places
    if places.height == 0:
        return
    instants = result.steps["instant"].n_unique()
    table = Table(
        title=f"where it strands: stranded GPU-hours by switch domain (estimated from "
        f"{result.places_instants:,} of {instants:,} instants)",
        title_justify="left",
    )
    table.add_column("domain", no_wrap=True)
    table.add_column("model", no_wrap=True)
    for header in ("stranded", *denominators.SPLIT):
        table.add_column(header, justify="right", no_wrap=True)
    for row in places.head(_PLACES_SHOWN).iter_rows(named=True):
        table.add_row(
            Text(row["domain"]),
            Text(row["gpu_model"]),
            _gh(row["stranded_gpu_hours"]),
            *(_gh(row[c]) for c in denominators.SPLIT),
        )
    rest = places.slice(_PLACES_SHOWN)
    if rest.height:
        summed = rest.select(pl.col("stranded_gpu_hours", *denominators.SPLIT).sum()).row(
            0, named=True
        )
        table.add_row(
            Text(f"the other {rest.height:,}", style="italic"),
            "",
            _gh(summed["stranded_gpu_hours"]),
            *(_gh(summed[c]) for c in denominators.SPLIT),
        )
    show(
        table,
        "places",
        places.select("domain", "gpu_model", "stranded_gpu_hours", *denominators.SPLIT),
    )


def _render_productive(rows: list[tuple[str, dict[str, Any]]], result: ReportResult) -> None:
    t = result.telemetry
    out.print(
        f"productive: metric {t['metric']} from {t['column']}, {t['samples']:,} samples, "
        f"each {seconds_text(t['interval_s'])} of one GPU (the median gap of "
        f"{t['interval_from_gpus']:,} GPUs); telemetry covers "
        f"{_pct1(t['coverage'])} of allocated GPU-hours"
        + (
            f"; {t['unattributed_gpu_hours']:,.1f} sampled GPU-hours matched no allocation"
            if t["unattributed_gpu_hours"]
            else ""
        )
    )
    named = [src for src in t.get("sources", ()) if src["metric"] is not None]
    if named:
        out.print(
            "sm_active read from: "
            + ", ".join(
                f"{src['metric'] or 'sm_active as given'} {_pct1(src['share'])}"
                + (" (an upper bound)" if src["upper_bound"] else "")
                for src in t["sources"]
            )
        )
    table = Table(title="productive GPU-hours (telemetry)", title_justify="left")
    table.add_column("workload / model / tenant", no_wrap=True)
    for header in ("allocated", "with telemetry", "SM-active", "SM-active rate"):
        table.add_column(header, justify="right", no_wrap=True)

    bounded = False

    def add(name: str, p: dict[str, Any]) -> None:
        nonlocal bounded
        upper = bool(p.get("upper_bound")) and p["productive_rate"] is not None
        bounded = bounded or upper
        table.add_row(
            Text(name),
            _gh(p["allocated_gpu_hours"]),
            _pct1(p["coverage"]),
            _gh(p["sm_active_gpu_hours"]),
            ("≤ " if upper else "") + _pct1(p["productive_rate"]),
        )

    for workload, p in result.fleet["productive"]["workloads"].items():
        add(workload, p)
    for name, figures in rows:
        add(f"model {name}" if name != "fleet" else "all", figures["productive"])
    by_size = sorted(result.tenants.items(), key=lambda t: -t[1]["physical"]["allocated_gpu_hours"])
    for tenant, figures in by_size[:_TENANTS_SHOWN]:
        add(f"tenant {tenant}", figures["productive"])
    rest = by_size[_TENANTS_SHOWN:]
    if rest:
        summed = [f["productive"] for _, f in rest]
        allocated = sum(p["allocated_gpu_hours"] or 0.0 for p in summed)
        telemetry = sum(p["telemetry_gpu_hours"] or 0.0 for p in summed)
        active = sum(p["sm_active_gpu_hours"] or 0.0 for p in summed)
        add(
            f"the other {len(rest):,} tenants",
            {
                "allocated_gpu_hours": allocated,
                "coverage": denominators.coverage(telemetry, allocated),
                "sm_active_gpu_hours": active,
                "productive_rate": active / telemetry if telemetry > 0 else None,
                "upper_bound": any(p.get("upper_bound") for p in summed),
            },
        )
    show(table, "productive", _productive_frame(rows, result))
    out.print(report_api.allocated_kinds(result))
    if bounded:
        out.print(
            "≤: an upper bound: part of that telemetry read SM activity from "
            + " or ".join(sorted(denominators.UPPER_BOUND_METRICS))
            + ", which overstate it"
        )
    nb = result.neighbour
    drop = "" if nb["drop"] is None else f": a drop of {_pct1(nb['drop'])}"
    out.print(
        f"CPU-neighbour indicator: training SM-active {_pct1(nb['with_cpu_neighbour'])} with a "
        f"CPU-only allocation on its node, {_pct1(nb['without_cpu_neighbour'])} without{drop}"
    )


_FAILING_NODES_SHOWN = 10
_REASONS_SHOWN = 5


def _render_failures(result: ReportResult) -> None:
    """What failures cost: unhealthy GPU-hours by state, failures, MTBF and interrupted
    work per model; the leading reasons; the nodes that fail most; the time curve."""
    section = result.failures
    if not section:
        return
    fleet = section["fleet"]
    if not fleet["unhealthy_gpu_hours"] and not fleet["failures"]:
        out.print(
            "failures: no GPU out of service in the window"
            + ("" if section["intervals"] else " (the store holds no health interval for it)")
        )
        return
    states = sorted(
        {state for part in [fleet, *section["models"].values()] for state in part["by_state"]}
    )
    table = Table(title="what failures cost (unhealthy GPU-hours, exact)", title_justify="left")
    table.add_column("model", no_wrap=True)
    for header in ("total", *states, "failures", "MTBF", "interrupted", "lost GPU-h"):
        table.add_column(header, justify="right", no_wrap=True)
    for name, part in [("fleet", fleet), *section["models"].items()]:
        table.add_row(
            Text(name, style="bold" if name == "fleet" else ""),
            _gh(part["unhealthy_gpu_hours"]),
            *(_gh(part["by_state"].get(state, 0.0)) for state in states),
            _int(part["failures"]),
            _hours(part["mtbf_hours"]),
            _int(part["interrupted"]["allocations"]),
            _gh(part["interrupted"]["lost_gpu_hours"]),
        )
    cost = pl.DataFrame(
        [
            {
                "model": name, "unhealthy_gpu_hours": part["unhealthy_gpu_hours"],
                **{f"{state}_gpu_hours": part["by_state"].get(state, 0.0) for state in states},
                "failures": part["failures"], "mtbf_hours": part["mtbf_hours"],
                "interrupted": part["interrupted"]["allocations"],
                "lost_gpu_hours": part["interrupted"]["lost_gpu_hours"],
            }
            for name, part in [("fleet", fleet), *section["models"].items()]
        ],
        schema={"model": pl.String, "unhealthy_gpu_hours": pl.Float64,
                **{f"{state}_gpu_hours": pl.Float64 for state in states},
                "failures": pl.Int64, "mtbf_hours": pl.Float64, "interrupted": pl.Int64,
                "lost_gpu_hours": pl.Float64},
    )  # fmt: skip
    show(table, "failures", cost)
    if fleet["recorded_gpu_hours"]:
        out.print(
            f"{_gh(fleet['recorded_gpu_hours'])} of them on nodes whose recorded health holds "
            "over the whole window (no health interval dates it)"
        )
    reasons = [r for r in fleet["by_reason"] if r["reason"] is not None][:_REASONS_SHOWN]
    if reasons:
        out.print(
            "leading reasons: "
            + "; ".join(f"{r['state']} {r['reason']} {_gh(r['gpu_hours'])} GPU-h" for r in reasons)
        )
    interrupted = fleet["interrupted"]
    if interrupted["allocations"]:
        out.print(
            f"interrupted: {interrupted['allocations']:,} allocation(s) ended within "
            f"{seconds_text(section['interrupted_within_s'])} of their node failing, losing "
            f"{_gh(interrupted['lost_gpu_hours'])} GPU-hours since their last checkpoint"
            + (
                f" ({interrupted['without_checkpoint']:,} without a checkpoint interval: "
                f"{_gh(interrupted['lost_gpu_hours_without_checkpoint'])} since start, an upper bound)"
                if interrupted["without_checkpoint"]
                else ""
            )
        )
    nodes = [n for n in section["nodes"] if n["failures"] or n["interrupted"]]
    if nodes:
        ranked = Table(
            title=f"nodes that fail most (quarantine candidates: {section['quarantine_failures']} "
            "or more failures)",
            title_justify="left",
        )
        for header in ("node", "model", "failures", "unhealthy GPU-h", "interrupted", "lost GPU-h"):
            ranked.add_column(header, justify="left" if header in ("node", "model") else "right",
                              no_wrap=True)  # fmt: skip
        for n in nodes[:_FAILING_NODES_SHOWN]:
            ranked.add_row(
                Text(n["node_id"] + (" *" if n["quarantine"] else "")),
                Text(n["gpu_model"] or "-"),
                _int(n["failures"]),
                _gh(n["unhealthy_gpu_hours"]),
                _int(n["interrupted"]),
                _gh(n["lost_gpu_hours"]),
            )
        show(ranked, "failing_nodes", pl.DataFrame(
            [
                {"node_id": n["node_id"], "gpu_model": n["gpu_model"], "quarantine": n["quarantine"],
                 "failures": n["failures"], "unhealthy_gpu_hours": n["unhealthy_gpu_hours"],
                 "interrupted": n["interrupted"], "lost_gpu_hours": n["lost_gpu_hours"]}
                for n in nodes
            ],
            schema={"node_id": pl.String, "gpu_model": pl.String, "quarantine": pl.Boolean,
                    "failures": pl.Int64, "unhealthy_gpu_hours": pl.Float64,
                    "interrupted": pl.Int64, "lost_gpu_hours": pl.Float64},
        ))  # fmt: skip
        if section["quarantine"]:
            out.print(f"* {len(section['quarantine']):,} quarantine candidate(s)")
    buckets = section["over_time"]["buckets"]
    if buckets:
        by_start = {b["start"]: sum(b["by_state"].values()) for b in buckets}
        values = [by_start.get(iso(t), 0.0) for t in report_api.failure_buckets(result)]
        out.print(
            Text(f"unhealthy GPU-hours over the window: {sparkline(values)}"),
            no_wrap=True,
            overflow="ellipsis",
        )


def _render_recoverable(result: ReportResult) -> None:

    for kind in ("compaction", "harvesting"):
        run = result.whatifs.get(kind)
        if run is None:
            out.print(f"{kind}: not run on this database yet (fleetaudit whatif {kind})")
            continue
        summary = report_api.recoverable_summary(run)
        out.print(f"{kind}: {summary['ran']}")
        if kind == "compaction" and isinstance(summary.get("over_time"), dict):
            o = summary["over_time"]
            reduction = o.get("reduction_pct")
            out.print(
                f"  over time, {o.get('start')} .. {o.get('end')}: partially occupied nodes "
                f"{o.get('partial_nodes_without', '-')} without, {o.get('partial_nodes_with', '-')} "
                f"with compaction, time-averaged "
                f"({'-' if reduction is None else f'{reduction:+.1f}%'}; the ASI paper reports "
                f"{o.get('paper_reduction_pct', compaction_over_time.PAPER_PARTIAL_REDUCTION_PCT)}%); "
                f"migration {_gh(o.get('migration_gpu_hours'))} GPU-h"
            )
        if kind == "compaction":
            # an over-time run said its window above; a one-instant run says so here
            instant = (
                f"one instant at {summary['at']}: " if summary.get("label") == "one instant" else ""
            )
            out.print("  " + instant + compaction_outcome(summary))
            shapes = report_api.recoverable_view(summary)["instances"]
            gained = [i for i in shapes if i["gained"]]
            if gained:
                out.print(
                    "  instances gained per shape: "
                    + ", ".join(f"{i['shape']} {i['gained']:+,.0f}" for i in gained)
                    + (
                        f" (the other {len(shapes) - len(gained)} unchanged)"
                        if len(shapes) > len(gained)
                        else ""
                    )
                )
        else:
            for p in summary.get("policies", []):
                out.print(
                    f"  {p.get('policy', '-')}: allocation rate high "
                    f"{_pct1(p.get('allocation_rate_high'))}, all {_pct1(p.get('allocation_rate'))}, "
                    f"standby {_gh(p.get('standby_gpu_hours'))} GPU-h, harvested "
                    f"{_pct1(p.get('harvested_share'))}, preemptions {_count(p.get('preemptions'))}, "
                    f"lost {_gh(p.get('lost_gpu_hours'))} GPU-h, unfinished {_count(p.get('unfinished'))}"
                )
            if not summary.get("policies"):
                out.print("  no policy figures in its document")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _count(value: object) -> str:
    """A count from a stored document: thousands separators, or the value as it is."""
    if value is None:
        return "-"
    return f"{int(value):,}" if _is_number(value) else str(value)  # type: ignore[call-overload]


def compaction_outcome(summary: dict[str, Any]) -> str:
    """A stored compaction run in one line: GPUs freed, nodes before and after, the pause.

    >>> compaction_outcome({"before": {"partial_nodes": 1200, "free_nodes": 40},
    ...     "after": {"partial_nodes": 1100, "free_nodes": 52}, "bound_free_nodes": 60,
    ...     "moves": 1500, "migration": {"freed_gpus": 96, "pause_gpu_hours": 1234.5,
    ...     "payback_s": 46293.75}})
    'frees 96 GPUs: free nodes 40 → 52 (at most 60), partially occupied 1,200 → 1,100; 1,500 moves: a pause of 1,234.50 GPU-hours, repaid after 12.9 h of use'
    """
    migration = summary.get("migration", {})
    before, after = summary.get("before", {}), summary.get("after", {})
    parts = []
    if "freed_gpus" in migration:
        parts.append(f"frees {_count(migration['freed_gpus'])} GPUs")
    nodes = []
    if "free_nodes" in before or "free_nodes" in after:
        bound = summary.get("bound_free_nodes")
        nodes.append(
            f"free nodes {_count(before.get('free_nodes'))} → {_count(after.get('free_nodes'))}"
            + ("" if bound is None else f" (at most {_count(bound)})")
        )
    if "partial_nodes" in before or "partial_nodes" in after:
        nodes.append(
            f"partially occupied {_count(before.get('partial_nodes'))} → "
            f"{_count(after.get('partial_nodes'))}"
        )
    text = ": ".join([*parts[:1], ", ".join(nodes)] if nodes else parts)
    cost = []
    if "moves" in summary:
        cost.append(f"{_count(summary['moves'])} moves")
    pause = migration.get("pause_gpu_hours")
    if pause is not None:
        shown = f"{pause:,.2f}" if _is_number(pause) else str(pause)  # as whatif compaction
        cost.append(f"a pause of {shown} GPU-hours")
        if _is_number(migration.get("payback_s")):
            cost[-1] += f", repaid after {_duration(migration['payback_s'])} of use"
    if cost:
        text += ("; " if text else "") + ": ".join(cost)
    return text or "no figures in its document"


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
    for text in report.notes:
        note(text)
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
    show(table, "compaction", compaction_frame(report))
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
        frame = pl.DataFrame(
            [{**{k: v for k, v in p.as_json().items() if not isinstance(v, dict)},
              "before_free_nodes": p.before_free, "after_free_nodes": p.after_free,
              "before_partial_nodes": p.before_partial, "after_partial_nodes": p.after_partial}
             for p in result.partitions],
            infer_schema_length=None,
        )  # fmt: skip
        # the worst of them: the CSV has every partition
        show(parts, "partitions", frame)
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
    if over is None or ot is None or over.run is None:
        return
    if report.baseline is not None:
        render_calibration(report.baseline)
    ticks, run = over.ticks, over.run
    table = Table(
        title=(
            f"compaction over time, {iso(over.start)} .. {iso(over.end)}: a round every "
            f"{_duration(ot.every_s)}, at most {run.gpus_per_hour:,.4g} GPUs moved per hour "
            f"({run.pct_per_hour:.3g}% of {over.fleet_gpus:,}), arrivals placed {ot.policy}, "
            f"queue {over.discipline}"
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
    rounds = pl.DataFrame(
        [{"round_at": t.at, "partial_without": t.without.partial_nodes,
          "partial_with_before": t.before.partial_nodes, "partial_with_after": t.after.partial_nodes,
          "free_without": t.without.free_nodes, "free_with_before": t.before.free_nodes,
          "free_with_after": t.after.free_nodes, "queued_without": t.without.queued,
          "queued_with": t.before.queued, "moves": len(t.moves), "gpus_moved": t.gpus_moved,
          "cut": t.cut} for t in ticks],
        infer_schema_length=None,
    )  # fmt: skip
    show(table, "rounds", rounds)
    if stride > 1:
        out.print(
            f"(one round in {stride} of {len(ticks):,} shown; --csv and --json have them all)"
        )
    reduction = over.partial_reduction_pct
    out.print(
        f"partially occupied nodes, time-averaged: {over.partial_without:,.1f} without, "
        f"{over.partial_with:,.1f} with compaction "
        f"({'-' if reduction is None else f'{reduction:+.1f}%'}; "
        f"the ASI paper reports {compaction_over_time.PAPER_PARTIAL_REDUCTION_PCT:+.1f}% in production)"
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
    if len(over.runs) > 1 or ot.sweep:
        sweep = Table(
            title=f"budgets replayed on the one baseline (target {over.target_reduction_pct:+.1f}% "
            "partially occupied nodes)",
            title_justify="left",
        )
        for column in ("budget", "GPUs/h", "partial with", "change", "GPUs moved", "pause GPU-h"):
            sweep.add_column(column, justify="left" if column == "budget" else "right")
        for r in over.runs:
            change = r.partial_reduction_pct
            sweep.add_row(
                r.given + (" *" if r is run else ""), f"{r.gpus_per_hour:,.4g}",
                f"{r.partial_with:,.1f}", "-" if change is None else f"{change:+.1f}%",
                f"{r.gpus_moved:,.4g}", f"{r.migration.pause_gpu_hours:,.2f}",
            )  # fmt: skip
        budgets = pl.DataFrame(
            [
                {
                    "budget": r.given, "nearest_target": r is run, "gpus_per_hour": r.gpus_per_hour,
                    "partial_with": r.partial_with, "partial_change_pct": r.partial_reduction_pct,
                    "gpus_moved": r.gpus_moved, "pause_gpu_hours": r.migration.pause_gpu_hours,
                }
                for r in over.runs
            ],
            schema={"budget": pl.String, "nearest_target": pl.Boolean,
                    "gpus_per_hour": pl.Float64, "partial_with": pl.Float64,
                    "partial_change_pct": pl.Float64, "gpus_moved": pl.Float64,
                    "pause_gpu_hours": pl.Float64},
        )  # fmt: skip
        show(sweep, "budgets", budgets)
        out.print(f"* the budget nearest the target: {run.given} (reported above in full)")
    out.print("the one-instant figures above are for the state at the window's end")


def _hours(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f} h"


def render_harvesting(result: HarvestingResult) -> None:
    """Victim policies side by side: rates, standby harvested, completion times, losses."""
    title = (
        f"harvesting what-if, {iso(result.start)} .. {iso(result.end)}"
        + (f" (scenario {result.scenario})" if result.scenario else "")
        + f": {result.sleeps:,} sleeps from {result.telemetry_samples:,} telemetry rows"
        + _headline(result.window)
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
            f"{seconds_text(c['mean'])}/{seconds_text(c['p50'])}/{seconds_text(c['p90'])}",
            _int(r.preemptions),
            _int(r.forced_kills),
            f"{r.lost_gpu_hours:,.1f}",
            _int(r.unfinished),
        )
    show(table, "harvesting", harvesting_frame(result))
    out.print(
        "HP, HP+LP: allocated / healthy GPU-hours, high priority alone and with low priority. "
        "standby: GPU-hours lent by sleeping allocations; harv.: the share of them "
        "low-priority work used. LP done: completion time of the low-priority jobs that "
        "arrived in the window. preempt: evictions for high-priority starts and waking "
        "lenders; forced: evictions past the kill deadline; unfin.: jobs not done at "
        "the window's end."
    )
    for text in result.notes:
        note(text)


# -- --csv: each command's table as a frame (machine column names, raw values) ----------


def ingest_frame(result: IngestResult) -> pl.DataFrame:
    """``ingest --csv``: per table, files read and rows new, replaced, superseded, rejected."""
    columns = ("table", "files", "read", "new", "replaced", "superseded", "rejected")
    return pl.DataFrame(
        [[getattr(t, c) for c in columns] for t in result.tables],
        schema=dict.fromkeys(columns, pl.Int64) | {"table": pl.String},
        orient="row",
    )


def state_by_model(state: pl.DataFrame) -> pl.DataFrame:
    """``state``'s table (and ``state --csv``): GPUs by status per model, free and partial nodes."""
    healthy = capacity.usable_expr(state)
    # the shapes ledger's sums: allocated GPUs capped at the node's GPUs, so the
    # identity holds on over-committed nodes too
    installed, unhealthy, high, low, idle = shapes_model.ledger_exprs(state)
    over = capacity.over_committed(state)
    free_node, partial_node = capacity.node_use(state)
    return (
        state.group_by("gpu_model")
        .agg(
            installed,
            unhealthy,
            high.alias("high"),
            low.alias("low"),
            idle,
            pl.col("free_gpus_window").filter(healthy).sum().alias("idle_window"),
            free_node.sum().alias("free_nodes"),
            (pl.lit(False) if over is None else over).sum().alias("overcommitted"),
            partial_node.sum().alias("partial_nodes"),
        )
        .sort("installed", "gpu_model", descending=[True, False])
    )


def shapes_frame(result: ShapesResult) -> pl.DataFrame:
    """``shapes --csv``: per shape, queued, instances, usable and idle GPUs, stranded by
    cause; with --reclaim the reclaimable instances and the work they lose; with
    --history p_start, the waits and their calibration."""
    causes: list[str] = []
    for r in result.shapes:
        for cause in r.evaluation.ledger.stranded or {}:
            if cause not in causes:
                causes.append(cause)
    with_reclaim = any(r.reclaim is not None for r in result.shapes)
    with_history = any(r.history is not None for r in result.shapes)
    rows = []
    for r in result.shapes:
        ledger = r.evaluation.ledger
        stranded = ledger.stranded or {}
        row: list[Any] = [
            r.evaluation.shape.label(), r.queued, r.instances, bool(r.capped),
            ledger.usable, ledger.idle, *(stranded.get(c) for c in causes),
        ]  # fmt: skip
        if with_reclaim:
            rc = r.reclaim
            row += [None, None] if rc is None else [rc.instances, rc.lost_gpu_hours]
        if with_history:
            h = None if r.history is None else r.history.as_json()
            row += [None] * 4 if h is None else [h[k] for k in _HISTORY_KEYS]
            cal = None if r.calibration is None else r.calibration.as_json()
            row += [None] * 5 if cal is None else [cal[k] for k in _CALIBRATION_KEYS]
            left = {} if cal is None else cal["left_out"]
            row += [left.get(k) for k in history_model.LEFT_OUT]
        rows.append(row)
    schema: dict[str, Any] = {
        "shape": pl.String, "queued": pl.Int64, "instances": pl.Int64, "capped": pl.Boolean,
        "usable_gpus": pl.Float64, "idle_gpus": pl.Float64,
        **{f"stranded_{c}": pl.Float64 for c in causes},
    }  # fmt: skip
    if with_reclaim:
        schema |= {"reclaim_instances": pl.Int64, "reclaim_lost_gpu_hours": pl.Float64}
    if with_history:
        schema |= dict.fromkeys(_HISTORY_KEYS, pl.Float64)
        schema |= {"started": pl.Int64} | dict.fromkeys(_CALIBRATION_KEYS[1:], pl.Float64)
        schema |= {f"left_out_{k}": pl.Int64 for k in history_model.LEFT_OUT}
    return pl.DataFrame(rows, schema=schema, orient="row")


_HISTORY_KEYS = ("p_start", "wait_p50_s", "wait_p90_s", "p_within_deadline")
_CALIBRATION_KEYS = (
    "started", "actual_wait_p50_s", "actual_wait_p90_s", "predicted_wait_p50_s",
    "predicted_wait_p90_s",
)  # fmt: skip


def calibration_frame(baseline: Baseline) -> pl.DataFrame:
    """The baseline beside the record (``--csv`` table ``calibration``): the record's
    queue figures, then each discipline's replay (``baseline`` true on the one chosen),
    waits in seconds."""
    fits = baseline.calibration.fits if baseline.calibration is not None else (baseline.fit,)
    rows: list[tuple[str, bool | None, bool | None, QueueFigures, float | None]]
    rows = [("record", None, None, baseline.fit.record, None)]
    rows += [
        (f.discipline, f.discipline == baseline.discipline, f.within_tolerance, f.replay,
         f.allocation_gap_pts)
        for f in fits
    ]  # fmt: skip
    return pl.DataFrame(
        [
            {
                "replay": name, "baseline": chosen, "within_tolerance": ok,
                "started": q.started, "waiting": q.waiting, "never": q.never,
                "wait_p50_s": q.wait_p50_s, "wait_p90_s": q.wait_p90_s,
                "allocation_gap_pts": gap,
            }
            for name, chosen, ok, q, gap in rows
        ],
        schema={"replay": pl.String, "baseline": pl.Boolean, "within_tolerance": pl.Boolean,
                "started": pl.Int64, "waiting": pl.Int64, "never": pl.Int64,
                "wait_p50_s": pl.Float64, "wait_p90_s": pl.Float64,
                "allocation_gap_pts": pl.Float64},
    )  # fmt: skip


def placement_frame(result: PlacementResult) -> pl.DataFrame:
    """``whatif placement --csv``: every policy's curve, one row per step; by time, the
    recorded fleet's first (policy ``recorded``)."""
    named = dict(result.curves)
    if result.mode == "time" and result.recorded is not None and named:
        columns = next(iter(named.values())).columns  # the policies' columns, in their order
        recorded = result.recorded.with_columns(
            *(
                pl.lit(None, pl.Float64).alias(c)
                for c in columns
                if c not in result.recorded.columns
            )
        ).select(columns)
        named = {"recorded": recorded, **named}
    curves = [
        curve.select(pl.lit(policy).alias("policy"), pl.all()) for policy, curve in named.items()
    ]
    return pl.concat(curves, how="diagonal_relaxed") if curves else pl.DataFrame()


def compaction_frame(report: CompactionReport) -> pl.DataFrame:
    """``whatif compaction --csv``: the before/after table (with the queued requests of
    each shape and each figure's change)."""
    result = report.result
    before, after = result.before, result.after
    rows: list[tuple[str, float | None, float | None, int | None]] = [
        ("free_nodes", before.free_nodes, after.free_nodes, None),
        ("partial_nodes", before.partial_nodes, after.partial_nodes, None),
        ("free_nodes_upper_bound", None, result.bound_free_nodes, None),
    ]
    for (shape, was), (_, now), queued in zip(
        before.instances, after.instances, report.queued, strict=True
    ):
        rows.append((f"instances: {shape.label()}", was, now, queued))
    return pl.DataFrame(
        rows,
        schema={"figure": pl.String, "before": pl.Float64, "after": pl.Float64,
                "queued": pl.Int64},
        orient="row",
    ).with_columns((pl.col("after") - pl.col("before")).alias("change"))  # fmt: skip


def remedies_frame(result: RemediesResult) -> pl.DataFrame:
    """``whatif remedies --csv``: one row per remedy (the baseline first), every figure
    of the terminal's tables, unrounded, and the change against the baseline."""
    base = result.rows[0]
    rows = []
    for row in result.rows:
        snap, b = row.snapshot, row.snapshot_base or base.snapshot
        r, rb = row.replay, base.replay
        out: dict[str, Any] = {"remedy": row.name, "kind": row.kind}
        for name in ("idle", "usable", *denominators.SPLIT):
            out[f"{name}_gpu_hours"] = snap.hours[name]
            out[f"{name}_gpu_hours_change"] = snap.hours[name] - b.hours[name]
        out["stranded_gpu_hours"] = snap.stranded
        out["stranded_gpu_hours_change"] = snap.stranded - b.stranded
        out["snapshot_instants"] = snap.instants
        for name in ("started", "waiting", "never", "wait_p50_s", "wait_p90_s",
                     "served_gpu_hours", "waiting_gpus", "preemptions", "lost_gpu_hours"):  # fmt: skip
            value, was = getattr(r, name), getattr(rb, name)
            out[name] = value
            out[f"{name}_change"] = None if value is None or was is None else value - was
        for i in range(len(result.shapes)):
            out[f"p_start_{i + 1}"] = r.p_start[i]
            out[f"snapshot_p_start_{i + 1}"] = snap.shapes[i][0]
            out[f"instances_mean_{i + 1}"] = snap.shapes[i][1]
        cost = row.cost or {}
        out["cost_per_month"] = cost.get("per_month")
        out["extra_gpu_hours_per_month"] = cost.get("extra_gpu_hours_per_month")
        out["cost_per_extra_gpu_hour"] = cost.get("per_extra_gpu_hour")
        out["rank"] = cost.get("rank")
        rows.append(out)
    return pl.DataFrame(rows, infer_schema_length=None)


def _signed(value: float | None, digits: int = 0, unit: str = "") -> str:
    if value is None:
        return "-"
    if round(value, digits) == 0:
        return "±0" + unit
    return f"{value:+,.{digits}f}{unit}"


def _two(value: str, change: str | None) -> str:
    """A figure and, on the line below, its change against the baseline."""
    return value if change is None else f"{value}\n({change})"


def _remedies_table(title: str, heads: Sequence[str]) -> Table:
    table = Table(title=title, title_justify="left", show_lines=True)
    table.add_column("remedy")
    for head in heads:
        table.add_column(head, justify="right")
    return table


def _wait_change(value: float | None, base: float | None) -> str | None:
    if value is None or base is None:
        return None if value is None and base is None else "-"
    delta = value - base
    return "±0" if abs(delta) < 0.5 else ("+" if delta > 0 else "-") + _duration(abs(delta))


def render_remedies(result: RemediesResult) -> None:
    """The remedies side by side: the snapshot, the replay, start probability per shape,
    money; each figure of a remedy with its change against the baseline below it."""
    render_calibration(result.baseline)
    base = result.rows[0]
    window = f"{iso(result.start)} .. {iso(result.at)}"
    head = (
        f"remedies on the window {window} ({result.hours:,.0f} h), {result.baseline.discipline} "
        f"queue, {result.fleet_gpus:,} healthy GPUs; each remedy's figures with the change "
        "against the recorded fleet (baseline) below them"
    )
    out.print(head)

    def add(table: Table, row: RemedyRow, cells: list[tuple[str, str | None]]) -> None:
        first = row is base
        table.add_row(row.name, *(_two(v, None if first else c) for v, c in cells))

    snap = _remedies_table(
        f"snapshot: GPU-hours over the window's {base.snapshot.instants:,} sampled instants "
        "(the report's schedulable denominator, on the recorded allocations)",
        ["idle", "usable", "stranded", "unqueued"],
    )
    causes = _remedies_table("stranded GPU-hours by cause", list(CAUSE_HEADS))
    for row in result.rows:
        s, b = row.snapshot, row.snapshot_base or base.snapshot
        add(snap, row, [
            (_gh(s.hours["idle"]), _signed(s.hours["idle"] - b.hours["idle"])),
            (_gh(s.hours["usable"]), _signed(s.hours["usable"] - b.hours["usable"])),
            (_gh(s.stranded), _signed(s.stranded - b.stranded)),
            (_gh(s.hours["unqueued"]), _signed(s.hours["unqueued"] - b.hours["unqueued"])),
        ])  # fmt: skip
        add(causes, row, [(_gh(s.hours[c]), _signed(s.hours[c] - b.hours[c])) for c in CAUSE_HEADS])
    # every figure of the remedies' tables is a column of the one CSV table (remedies_frame)
    show(snap, "remedies", remedies_frame(result), fold=("remedy",))
    show(causes, "remedies", None, fold=("remedy",))
    partial = [r for r in result.rows if r.snapshot_base is not None]
    for row in partial:
        out.print(
            f"{row.name}: its snapshot samples {row.snapshot.instants} of the instants (a "
            "compaction search at each), beside the fleet without it at the same instants"
        )
    replay = _remedies_table(
        "replay of the window's arrivals (the baseline's holds and discipline)",
        ["started", "waiting at end", "wait p50", "wait p90"],
    )
    served = _remedies_table(
        "GPU-hours the replayed requests held in the window, and what was left",
        ["GPU-hours served", "GPUs waiting at end", "preemptions", "GPU-hours lost"],
    )
    for row in result.rows:
        r, rb = row.replay, base.replay
        add(replay, row, [
            (f"{r.started:,}", _signed(r.started - rb.started)),
            (f"{r.waiting:,}", _signed(r.waiting - rb.waiting)),
            (_duration(r.wait_p50_s), _wait_change(r.wait_p50_s, rb.wait_p50_s)),
            (_duration(r.wait_p90_s), _wait_change(r.wait_p90_s, rb.wait_p90_s)),
        ])  # fmt: skip
        add(served, row, [
            (_gh(r.served_gpu_hours), _signed(r.served_gpu_hours - rb.served_gpu_hours)),
            (_gh(r.waiting_gpus), _signed(r.waiting_gpus - rb.waiting_gpus)),
            (f"{r.preemptions:,}", _signed(r.preemptions - rb.preemptions)),
            (_gh(r.lost_gpu_hours), _signed(r.lost_gpu_hours - rb.lost_gpu_hours)),
        ])  # fmt: skip
    show(replay, "remedies", None, fold=("remedy",))
    show(served, "remedies", None, fold=("remedy",))
    if result.shown:
        deadline = (
            "their own start deadline, else " + (
                _duration(result.deadline_s) if result.deadline_s is not None
                else "the window's end"
            )
        )
        probability = _remedies_table(
            f"start probability in the replay: the share of each shape's arrivals that started "
            f"within {deadline}",
            [f"S{i + 1}" for i in range(result.shown)],
        )
        for row in result.rows:
            r, rb = row.replay, base.replay
            add(probability, row, [
                (_pct1(r.p_start[i]), None if r.p_start[i] is None or rb.p_start[i] is None
                 else _signed(100 * (r.p_start[i] - rb.p_start[i]), 1, " pts"))  # type: ignore[operator]
                for i in range(result.shown)
            ])  # fmt: skip
        show(probability, "remedies", None, fold=("remedy",))
        instances = _remedies_table(
            "snapshot per shape: its mean instances over the sampled instants",
            [f"S{i + 1}" for i in range(result.shown)],
        )
        for row in result.rows:
            s, b = row.snapshot, row.snapshot_base or base.snapshot
            cells = []
            for i in range(result.shown):
                now, was = s.shapes[i][1], b.shapes[i][1]
                cells.append((
                    "-" if now is None else f"{now:,.1f}",
                    None if now is None or was is None else _signed(now - was, 1),
                ))  # fmt: skip
            add(instances, row, cells)
        show(instances, "remedies", None, fold=("remedy",))
        for i, shape in enumerate(result.shapes[: result.shown]):
            arrived = base.replay.shape_arrivals[i]
            out.print(f"S{i + 1}: {shape.label()} ({arrived:,} arrived)")
    for row in result.rows:
        if row.compaction is not None:
            _render_remedy_compaction(row)
    if result.prices is not None:
        _render_remedy_money(result)
    for sizing in result.sizing:
        _render_sizing(sizing)
    for row in result.rows[1:]:
        for text in row.notes:
            note(f"{row.name}: {text}")
    if result.saved:
        out.print(
            f"saved the edited fleet of {result.rows[-1].name} as scenario {result.saved!r}; "
            f"read it with --scenario {result.saved}"
        )
    for text in result.notes:
        note(text)


CAUSE_HEADS = ("interval", "fragment", "cpu_memory", "topology")


def _render_remedy_compaction(row: RemedyRow) -> None:
    info = row.compaction or {}
    ledger, over = info.get("ledger") or {}, info.get("over_time") or {}
    migration = ledger.get("migration") or {}
    reduction = over.get("partial_nodes_reduction_pct")
    out.print(
        f"{row.name}: at {info.get('ledger_at')} the one-instant ledger moves "
        f"{ledger.get('moves', 0):,} allocations ({ledger.get('gpus_moved', 0):,} GPUs; pause "
        f"{migration.get('pause_gpu_hours', 0):,.1f} GPU-hours), partially occupied nodes "
        f"{ledger.get('partial_nodes', ['-', '-'])[0]} -> {ledger.get('partial_nodes', ['-', '-'])[1]}; "
        f"over the window {over.get('rounds', 0):,} rounds moved {over.get('gpus_moved', 0):,} GPUs "
        f"({over.get('budget_gpus_per_hour', 0):,} GPUs an hour at most), pause "
        f"{over.get('pause_gpu_hours', 0):,.1f} GPU-hours, partially occupied nodes "
        + ("-" if reduction is None else f"{reduction:+.1f}%")
    )


def _money(value: float | None, currency: str) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" + (f" {currency}" if currency else "")


def _render_remedy_money(result: RemediesResult) -> None:
    prices = result.prices
    assert prices is not None
    currency = prices.currency
    table = _remedies_table(
        f"money (prices from {prices.source}): the remedy's cost a month, the GPU-hours it "
        "serves beyond the baseline a month, and their ratio (rank: cheapest first)",
        ["cost a month", "extra GPU-hours a month", "per extra GPU-hour", "rank"],
    )
    for row in result.rows[1:]:
        cost = row.cost or {}
        per = cost.get("per_extra_gpu_hour")
        table.add_row(
            row.name,
            _money(cost.get("per_month"), currency),
            _signed(cost.get("extra_gpu_hours_per_month")),
            "-" if per is None else f"{per:,.2f}",
            "-" if cost.get("rank") is None else str(cost["rank"]),
        )
    show(table, "remedies", None, fold=("remedy",))
    for row in result.rows[1:]:
        for text in (row.cost or {}).get("notes", []):
            note(f"{row.name}: {text}")


def _render_sizing(sizing: Sizing) -> None:
    what = "nodes added" if sizing.kind == "add" else "CPU cores added per node"
    table = Table(
        title=f"sizing: the fewest {what} ({sizing.model}) for a start probability of "
        f"{sizing.target:.0%} of {sizing.shape.label()} (by the {sizing.criterion}; "
        f"bisection up to {sizing.bound:g})",
        title_justify="left",
    )
    for name in ("step", what, "p_start", "snapshot p_start", "reached"):
        table.add_column(name, justify="right")
    for i, step in enumerate(sizing.steps, start=1):
        table.add_row(
            str(i), f"{step.value:g}", _pct1(step.p_start),
            _pct1(step.figures.get("snapshot_p_start")), "yes" if step.reached else "no",
        )  # fmt: skip
    show(table, "sizing", pl.DataFrame(
        [{"model": sizing.model, "kind": sizing.kind, "step": i, "value": step.value,
          "p_start": step.p_start, "snapshot_p_start": step.figures.get("snapshot_p_start"),
          "reached": step.reached}
         for i, step in enumerate(sizing.steps, start=1)],
        schema={"model": pl.String, "kind": pl.String, "step": pl.Int64, "value": pl.Float64,
                "p_start": pl.Float64, "snapshot_p_start": pl.Float64, "reached": pl.Boolean},
    ))  # fmt: skip
    if sizing.found is not None:
        out.print(f"smallest: {sizing.found:g} {what} reach {sizing.target:.0%}")
    else:
        cause = f"; at the bound the shape is still stranded most by {sizing.cause}" if sizing.cause else ""
        out.print(f"no value up to {sizing.bound:g} {what} reaches {sizing.target:.0%}{cause}")
    for text in sizing.notes:
        note(text)


def harvesting_frame(result: HarvestingResult) -> pl.DataFrame:
    """``whatif harvesting --csv``: the victim policies side by side."""
    rows = []
    for r in result.policies:
        c = r.completion_s()
        rows.append(
            {"policy": r.policy, "allocation_rate_high": r.allocation_rate_high,
             "allocation_rate": r.allocation_rate, "standby_gpu_hours": r.standby_gpu_hours,
             "harvested_share": r.harvested_share, "lp_completion_mean_s": c["mean"],
             "lp_completion_p50_s": c["p50"], "lp_completion_p90_s": c["p90"],
             "preemptions": r.preemptions, "forced_kills": r.forced_kills,
             "lost_gpu_hours": r.lost_gpu_hours, "unfinished": r.unfinished}
        )  # fmt: skip
    return pl.DataFrame(rows, infer_schema_length=None)


def report_frame(result: ReportResult) -> pl.DataFrame:
    """``report --csv``: the three denominators, the fleet then each GPU model."""
    rows = []
    for name, figures in [("fleet", result.fleet), *result.models.items()]:
        ph, sc, pr = figures["physical"], figures["schedulable"], figures["productive"]
        rows.append(
            {"model": name,
             "healthy_gpu_hours": ph["healthy_gpu_hours"],
             "allocated_high_gpu_hours": ph["allocated_high_gpu_hours"],
             "allocated_gpu_hours": ph["allocated_gpu_hours"],
             "allocation_rate_high": ph["allocation_rate_high"],
             "allocation_rate": ph["allocation_rate"],
             "idle_gpu_hours": sc["idle_gpu_hours"], "usable_gpu_hours": sc["usable_gpu_hours"],
             "telemetry_gpu_hours": pr["telemetry_gpu_hours"],
             "sm_active_gpu_hours": pr["sm_active_gpu_hours"]}
        )  # fmt: skip
    return pl.DataFrame(rows, infer_schema_length=None)


def render_release(result: AsiReleaseResult) -> None:
    """``generate --format alibaba-gpu-v2026``: what the generated release holds."""
    out.print(
        f"generated {result.servers:,} servers over {result.hours:,} hours in {result.root} "
        f"(the ASI release's layout): {result.pod_rows:,} pod rows "
        f"({result.gpu_pod_rows:,} GPU pods), {result.server_rows:,} server rows, "
        f"{result.files:,} files"
    )


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _paper_frame(
    frame: pl.DataFrame, mine: dict[Any, dict[str, Any]], key: str | tuple[str, ...]
) -> pl.DataFrame:
    """A paper table's rows beside fleetaudit's figures for the same key (``fleetaudit_*``)."""
    names = sorted({k for figures in mine.values() for k in figures})
    rows = []
    for row in frame.iter_rows(named=True):
        found = mine.get(row[key] if isinstance(key, str) else tuple(row[k] for k in key)) or {}
        rows.append({**row, **{f"fleetaudit_{k}": found.get(k) for k in names}})
    return pl.DataFrame(rows, infer_schema_length=None) if rows else frame


def render_paper(result: PaperResult) -> None:
    """``fleetaudit paper``: the paper's figures beside fleetaudit's."""
    f = result.figures
    out.print(
        f"ASI paper view: days {result.days[0]}-{result.days[1]}, trace hours "
        f"{result.t_first}..{result.t_last} ({iso(result.start)} to {iso(result.end)})"
    )
    alloc = Table(title="allocation rate (paper: even hours + 23)", title_justify="left")
    for column in ("model", "paper HP", "paper HP+LP", "fleetaudit high", "fleetaudit high+low"):
        alloc.add_column(column, justify="left" if column == "model" else "right")
    for row in f.allocation.iter_rows(named=True):
        mine = result.fleet_allocation.get(row["gpu_model"]) or {}
        alloc.add_row(
            str(row["gpu_model"]),
            _pct(row["hp"]),
            _pct(row["hp_lp"]),
            _pct(mine.get("allocation_rate_high")),
            _pct(mine.get("allocation_rate")),
        )
    show(alloc, "allocation", _paper_frame(f.allocation, result.fleet_allocation, "gpu_model"))
    out.print(Text(f"  {paper.DIFFERENCES['allocation']}", style="dim"))
    idle = Table(title="idle GPUs per shape (paper: even hours; mean GPUs)", title_justify="left")
    for column in (
        "shape", "paper idle", "fractional", "stranded", "insufficient CPU",
        "fleetaudit idle", "usable", "fragment", "cpu_memory",
    ):  # fmt: skip
        idle.add_column(column, justify="left" if column == "shape" else "right")
    for row in f.idle.iter_rows(named=True):
        mine = result.fleet_idle.get((row["gpus"], row["cpus"])) or {}
        idle.add_row(
            f"{row['gpus']} GPU x {row['cpus']} vCPU",
            _num(row["total_idle"]),
            _num(row["fractional"]),
            _num(row["stranded"]),
            _num(row["insufficient_cpu"]),
            _num(mine.get("idle")),
            _num(mine.get("usable")),
            _num(mine.get("fragment")),
            _num(mine.get("cpu_memory")),
        )
    show(idle, "idle", _paper_frame(f.idle, result.fleet_idle, ("gpus", "cpus")))
    out.print(Text(f"  {paper.DIFFERENCES['idle']}", style="dim"))
    slots = Table(title="gangs of 1-GPU, 12-vCPU slots (paper: hour 10)", title_justify="left")
    for column in (
        "model", "gang", "paper slots", "across cluster", "within ASW", "fleetaudit any",
        "fleetaudit switch",
    ):  # fmt: skip
        slots.add_column(column, justify="left" if column == "model" else "right")
    for row in f.slots.iter_rows(named=True):
        mine = result.fleet_gangs.get((row["gpu_model"], row["gang"])) or {}
        slots.add_row(
            str(row["gpu_model"]),
            str(row["gang"]),
            _num(row["slots"]),
            _num(row["across_cluster"]),
            _num(row["within_asw"]),
            _num(mine.get("any")),
            _num(mine.get("switch")),
        )
    show(slots, "slots", _paper_frame(f.slots, result.fleet_gangs, ("gpu_model", "gang")))
    out.print(Text(f"  {paper.DIFFERENCES['asw_slots']}", style="dim"))
    s = f.standby
    out.print(
        f"standby: {_num(s['gpu_hours'])} GPU-hours, {_num(s['harvested_gpu_hours'])} harvested "
        f"by LP ({_pct(s['harvested_share'])}); paper's over-subscription ratio "
        f"{_pct(s['paper_ratio'])}"
    )
    out.print(Text(f"  {paper.DIFFERENCES['standby']}", style="dim"))
    ratios = ", ".join(
        f"{job} {_num(v['median'])} (p90 {_num(v['p90'])})"
        for job, v in f.cpu_gpu_ratio.items()
        if v["pod_hours"]
    )
    out.print(f"requested vCPU per GPU, median by job type: {ratios or '-'}")
    for text in result.notes:
        note(text)
