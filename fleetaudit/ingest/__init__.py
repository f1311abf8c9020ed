"""``fleetaudit ingest``: load input files into the store, all or nothing.

One call is one transaction. Tables load in :data:`schema.INGEST_ORDER` so
allocations and telemetry see the nodes of the same call. Each file streams
through DuckDB once (:mod:`fleetaudit.ingest.validate`); rows that break the
schema go to ``rejects`` with file, row, column and reason. Then, per table,
rows of this call supersede earlier rows of this call with the same key (the
last one wins) and replace stored rows with the same key (idempotent re-ingest).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from fleetaudit import schema
from fleetaudit.errors import InputError, QueryError
from fleetaudit.ingest import alibaba, asi2026
from fleetaudit.ingest.sources import CSV_BAD_ROWS, CSV_ERRORS, Source, expand_paths, native_source
from fleetaudit.ingest.validate import plan_load, q
from fleetaudit.store import Store

FORMATS = ("native", alibaba.FORMAT, asi2026.FORMAT)

Progress = Callable[[str], None]


@dataclass(frozen=True)
class IngestOptions:
    """Options of one ingest call (defaults are the command line's)."""

    table: str | None = None
    format: str = "native"
    strict: bool = False
    trace_start: datetime | None = None  # None: the format's default
    topology: Path | None = None
    days: tuple[int, int] | None = None  # alibaba-gpu-v2026: the days read (None: all)


@dataclass(frozen=True)
class TableSummary:
    """What one ingest call did to one table."""

    table: str
    files: int = 0
    read: int = 0  # rows read from the files
    new: int = 0  # keys the store did not hold
    replaced: int = 0  # stored rows replaced by a row with the same key
    superseded: int = 0  # rows of this call overtaken by a later row with the same key
    rejected: int = 0


@dataclass(frozen=True)
class IngestResult:
    """The outcome of a committed ingest call."""

    ingest_id: int
    files: tuple[str, ...]
    tables: tuple[TableSummary, ...]
    rejects: pl.DataFrame = field(
        repr=False
    )  # the first rejects (file, row, column, value, reason)
    notes: tuple[str, ...] = ()  # what a trace adapter says about its input

    @property
    def rejected(self) -> int:
        return sum(t.rejected for t in self.tables)


def plan_sources(
    store: Store,
    paths: Sequence[Path],
    options: IngestOptions,
    staged: asi2026.Staged | None = None,
) -> list[Source]:
    """The sources an ingest call reads, in load order; fails before anything is written.

    For alibaba-gpu-v2026 they are the files ``staged`` (:func:`asi2026.stage_release`).
    """
    if options.format not in FORMATS:
        raise InputError(
            ", ".join(str(p) for p in paths),
            f"unknown --format {options.format!r}; use {' or '.join(FORMATS)}",
        )
    if options.table is not None and options.table not in schema.TABLES:
        raise InputError(
            "--table", f"no table named {options.table!r}; use one of {', '.join(schema.TABLES)}"
        )
    if options.format == alibaba.FORMAT:
        sources = alibaba.trace_sources(
            store,
            list(paths),
            trace_start=options.trace_start or alibaba.DEFAULT_TRACE_START,
            topology=options.topology,
        )
    elif options.format == asi2026.FORMAT:
        if staged is None:
            raise ValueError("alibaba-gpu-v2026 sources are the staged files; stage them first")
        sources = list(staged.sources)
    else:
        sources = [native_source(p, options.table) for p in expand_paths(list(paths))]
    order = {name: i for i, name in enumerate(schema.INGEST_ORDER)}
    return sorted(sources, key=lambda s: order[s.table])  # stable: file order within a table


def ingest(
    store: Store,
    paths: Sequence[Path],
    options: IngestOptions = IngestOptions(),
    progress: Progress | None = None,
) -> IngestResult:
    """Load ``paths`` into ``store`` in one transaction.

    Raises:
        InputError: a file cannot be read, a required column is missing, or
            (with ``options.strict``) a row was rejected. Nothing is written.
    """
    say = progress or (lambda _msg: None)
    with ExitStack() as stack:
        staged = None
        if options.format == asi2026.FORMAT:
            stack.enter_context(asi2026.bounded_memory(store))
            staged = asi2026.stage_release(
                store,
                list(paths),
                stack.enter_context(asi2026.staging_folder(store)),
                trace_start=options.trace_start or asi2026.DEFAULT_TRACE_START,
                days=options.days,
                progress=say,
            )
        return _ingest(store, paths, options, say, staged)


def _ingest(
    store: Store,
    paths: Sequence[Path],
    options: IngestOptions,
    say: Progress,
    staged: asi2026.Staged | None,
) -> IngestResult:
    sources = plan_sources(store, paths, options, staged)
    started = _utc_now()
    # DuckDB cannot estimate a CSV's rows and may build the node lookup's hash
    # table on the 10 M-row file side instead of the nodes (3x slower, GiBs).
    with store.optimizer_disabled("build_side_probe_side"), store.transaction():
        ingest_id = int(store.scalar("SELECT COALESCE(max(ingest_id), 0) + 1 FROM ingests"))
        summaries: list[TableSummary] = []
        for table_name in schema.INGEST_ORDER:
            mine = [s for s in sources if s.table == table_name]
            if mine:
                summaries.append(_load_table(store, schema.table(table_name), mine, ingest_id, say))
        if staged is not None:
            say(f"{asi2026.FORMAT}: side tables")
            staged.load_side_tables(store, ingest_id)
            summaries = [
                replace(s, read=s.read + staged.pod_rejects, rejected=s.rejected + staged.pod_rejects)
                if s.table == "allocations"
                else s
                for s in summaries
            ]
        rejects = store.sql(
            'SELECT file, "table", "row", "column", value, reason FROM rejects '
            "WHERE ingest_id = $id ORDER BY rowid LIMIT 20",  # load order
            {"id": ingest_id},
        )
        total_rejected = sum(s.rejected for s in summaries)
        if options.strict and total_rejected:
            first = rejects.row(0, named=True)
            raise InputError(
                str(first["file"]),
                f"{first['reason']} ({total_rejected} row(s) rejected; --strict writes nothing)",
                row=int(first["row"]),
                column=str(first["column"]),
            )
        store.run(
            "INSERT INTO ingests VALUES ($id, $started, $finished, $format, $files, $summary)",
            {
                "id": ingest_id,
                "started": started,
                "finished": _utc_now(),
                "format": options.format,
                "files": json.dumps([s.file for s in sources]),
                "summary": json.dumps([asdict(s) for s in summaries]),
            },
        )
    return IngestResult(
        ingest_id=ingest_id,
        files=tuple(s.file for s in sources),
        tables=tuple(summaries),
        rejects=rejects,
        notes=tuple(staged.summary) if staged is not None else (),
    )


def _utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _load_table(
    store: Store, table: schema.Table, sources: list[Source], ingest_id: int, say: Progress
) -> TableSummary:
    name = q(table.name)
    had_rows = store.row_count(table.name) > 0
    read = rejected = 0
    for i, source in enumerate(sources, 1):
        say(f"{table.name}: reading {source.file} ({i}/{len(sources)})")
        read_, rejected_ = _load_file(store, table, source, ingest_id)
        read += read_
        rejected += rejected_

    say(f"{table.name}: merging")
    keys = ", ".join(q(k) for k in table.key)
    params = {"id": ingest_id}
    loaded = int(store.scalar(f"SELECT count(*) FROM {name} WHERE _ingest_id = $id", params))
    # GROUP BY beats count(DISTINCT ...) and hashing in DuckDB for string keys
    distinct = int(
        store.scalar(
            f"SELECT count(*) FROM (SELECT {keys} FROM {name} WHERE _ingest_id = $id GROUP BY {keys})",
            params,
        )
    )
    superseded = loaded - distinct
    if superseded:
        # the last row of the call wins: row ids grow in load order
        store.run(
            f"DELETE FROM {name} WHERE _ingest_id = $id AND rowid NOT IN "
            f"(SELECT max(rowid) FROM {name} WHERE _ingest_id = $id GROUP BY {keys})",
            params,
        )
    replaced = 0
    if had_rows:
        match = " AND ".join(f"{name}.{q(k)} = fresh.{q(k)}" for k in table.key)
        replaced = int(
            store.scalar(
                f"SELECT count(*) FROM {name} JOIN (SELECT {keys} FROM {name} WHERE _ingest_id = $id) "
                f"AS fresh ON {match} WHERE {name}._ingest_id <> $id",
                params,
            )
        )
        if replaced:
            store.run(
                f"DELETE FROM {name} USING (SELECT {keys} FROM {name} WHERE _ingest_id = $id) "
                f"AS fresh WHERE {match} AND {name}._ingest_id <> $id",
                params,
            )
    return TableSummary(
        table=table.name,
        files=len(sources),
        read=read,
        new=distinct - replaced,
        replaced=replaced,
        superseded=superseded,
        rejected=rejected,
    )


def _load_file(
    store: Store, table: schema.Table, source: Source, ingest_id: int
) -> tuple[int, int]:
    """Load one file; returns (rows read, rows rejected)."""
    try:
        columns = store.describe(source.select, source.params)
    except QueryError as exc:
        raise InputError(source.file, f"cannot read: {exc.message}") from exc
    plan = plan_load(
        table, source.file, source.select, source.numbered, columns, store.column_types(table.name)
    )
    for name, sql_type in plan.new_columns:
        store.add_column(table.name, name, sql_type)
    params = {**source.params, "ingest_id": ingest_id}
    tagged = {"ingest_id": ingest_id}
    try:
        if source.csv:
            store.run(f"DROP TABLE IF EXISTS {CSV_ERRORS}")
            store.run(f"DROP TABLE IF EXISTS {CSV_ERRORS}_scans")
        read = store.run(plan.load, params) or 0
        bad_lines = _csv_line_rejects(store, table, source, ingest_id) if source.csv else 0
        rejected = int(
            store.scalar(
                f"SELECT count(*) FROM {q(table.name)} WHERE _ingest_id = -$ingest_id", tagged
            )
        )
        if rejected:
            store.run(plan.rejects, {**params, "file": source.file})
            store.run(f"DELETE FROM {q(table.name)} WHERE _ingest_id = -$ingest_id", tagged)
    except QueryError as exc:
        raise InputError(source.file, f"cannot read: {exc.message}") from exc
    return read + bad_lines, rejected + bad_lines


def _csv_line_rejects(store: Store, table: schema.Table, source: Source, ingest_id: int) -> int:
    """Record the lines DuckDB's CSV reader could not split; returns how many.

    Also fills CSV_BAD_ROWS (e: the bad data row, k: its rank), which the
    numbered scan uses to count skipped lines back into row numbers.
    """
    store.run(
        f"CREATE OR REPLACE TEMP TABLE {CSV_BAD_ROWS} AS "
        f"SELECT line - 1 AS e, row_number() OVER (ORDER BY line) AS k FROM {CSV_ERRORS}"
    )
    bad = int(store.scalar(f"SELECT count(*) FROM {CSV_BAD_ROWS}"))
    if bad:
        store.run(
            f"INSERT INTO rejects SELECT $ingest_id, $file, $table, line - 1, column_name, "
            f"csv_line, lower(error_type) || ': ' || error_message FROM {CSV_ERRORS} ORDER BY line",
            {"ingest_id": ingest_id, "file": source.file, "table": table.name},
        )
    return bad
