"""``fleetaudit ingest``: load input files into the store, all or nothing.

One call is one transaction. Tables load in :data:`schema.INGEST_ORDER` so
allocations and telemetry see the nodes of the same call. Each file streams
through DuckDB once (:mod:`fleetaudit.inputs.ingest.validate`); rows that break the
schema go to ``rejects`` with file, row, column and reason. Then, per table,
rows of this call supersede earlier rows of this call with the same key (the
last one wins) and replace stored rows with the same key (idempotent re-ingest).
"""

from __future__ import annotations

import csv
import json
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from fleetaudit.core.errors import InputError, QueryError, UsageError
from fleetaudit.core.lazy import LazyModule
from fleetaudit.core.options import ASI_ROLLED_MANIFEST, INGEST_FORMATS
from fleetaudit.inputs.ingest import guards
from fleetaudit.inputs.ingest.labels import PriorityMap
from fleetaudit.inputs.ingest.sources import (
    CSV_BAD_ROWS,
    CSV_ERRORS,
    Source,
    expand_paths,
    native_source,
    read_failure,
)
from fleetaudit.inputs.ingest.topology import (
    TopologySummary,
    apply_topology,
    read_topology,
    reapply_topology,
)
from fleetaudit.inputs.ingest.validate import plan_load, q
from fleetaudit.model import schema
from fleetaudit.model.store import Store

# Each format's adapter loads when a call reads that format (pyarrow, the JSON and
# text parsers), so a native ingest pays for none of them.
if TYPE_CHECKING:
    from fleetaudit.inputs.ingest import (
        alibaba,
        asi2026,
        kubectl,
        kubernetes,
        prometheus,
        prometheus_pull,
        slurm,
        slurm_collect,
    )
else:
    kubectl = LazyModule("fleetaudit.inputs.ingest.kubectl")
    alibaba = LazyModule("fleetaudit.inputs.ingest.alibaba")
    asi2026 = LazyModule("fleetaudit.inputs.ingest.asi2026")
    kubernetes = LazyModule("fleetaudit.inputs.ingest.kubernetes")
    prometheus = LazyModule("fleetaudit.inputs.ingest.prometheus")
    prometheus_pull = LazyModule("fleetaudit.inputs.ingest.prometheus_pull")
    slurm = LazyModule("fleetaudit.inputs.ingest.slurm")
    slurm_collect = LazyModule("fleetaudit.inputs.ingest.slurm_collect")

FORMATS = (
    INGEST_FORMATS  # native, alibaba-gpu-v2023, alibaba-gpu-v2026, kubernetes, prometheus, slurm
)

Progress = Callable[[str], None]


@dataclass(frozen=True)
class IngestOptions:
    """Options of one ingest call (defaults are the command line's)."""

    table: str | None = None
    format: str = "native"
    strict: bool = False
    trace_start: datetime | None = None  # None: the format's default
    topology: Path | None = None
    timezone: str = "UTC"  # slurm: the zone of sacct's local times
    priority_map: Path | None = None  # kubernetes, slurm: site priorities -> high|low
    snapshot_time: datetime | None = None  # kubernetes: the time of every file of the call
    tenant_label: str | None = None  # kubernetes: the pod label naming the tenant
    allow_mixed: bool = False  # kubernetes: load documents of several clusters together
    days: tuple[int, int] | None = None  # alibaba-gpu-v2026: the days read (None: all)
    percent: tuple[str, ...] = ()  # fraction columns given in percent: scaled by 1/100
    collect: object | None = None  # the settings of the format's collector (see collected())
    export_time: datetime | None = None  # when the files were exported, as the user says it


@dataclass(frozen=True)
class TableSummary:
    """What one ingest call did to one table."""

    table: str
    files: int = 0
    read: int = 0  # rows read from the files
    new: int = 0  # keys the store did not hold
    replaced: int = 0  # stored rows replaced by a row with the same key
    superseded: int = 0  # rows of this call overtaken by a later row with the same key
    # (for kubectl JSON: objects listed again within one snapshot)
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
    topology: TopologySummary | None = None  # what --topology did to the call's nodes
    notes: tuple[str, ...] = ()  # what the adapter decided (snapshot times, objects ignored)
    # the instant the call's exports were taken and how it is known, where they say it
    export_time: tuple[datetime, str] | None = None

    @property
    def rejected(self) -> int:
        return sum(t.rejected for t in self.tables)


def plan_sources(
    store: Store,
    paths: Sequence[Path],
    options: IngestOptions,
    progress: Progress | None = None,
    staged: asi2026.Staged | None = None,
) -> list[Source]:
    """The sources an ingest call reads, in load order; fails before anything is written.

    For alibaba-gpu-v2026 they are the files ``staged`` (:func:`asi2026.stage_release`).
    """
    adapter = _adapter(options, paths)
    if options.table is not None and options.table not in schema.TABLES:
        raise InputError(
            "--table", f"no table named {options.table!r}; use one of {', '.join(schema.TABLES)}"
        )
    fractions = sorted({c.name for t in schema.TABLES.values() for c in t.columns if c.at_most_one})
    for column in options.percent:
        if column not in fractions:
            raise InputError(
                "--percent",
                f"{column!r} is not a fraction column; use one of {', '.join(fractions)}",
            )
    sources = adapter.sources(store, paths, options, progress, staged)
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
    if options.format == "native" and _rolled_release(paths) is not None:
        options = replace(options, format="alibaba-gpu-v2026")  # a rolled-up release
    with ExitStack() as stack:
        prepare = _adapter(options, paths).prepare
        staged = prepare(store, paths, options, say, stack) if prepare is not None else None
        return _ingest(store, paths, options, say, staged)


@contextmanager
def collected(options: IngestOptions, progress: Progress | None = None) -> Iterator[list[Path]]:
    """The exports the format's collector fetches itself (``options.collect`` holds its
    settings), in a temporary folder that is removed when the block ends; ``[]`` when the
    call names its files. Collect before the store is opened for writing, so that a long
    fetch does not hold the store's lock.

    Raises:
        UsageError: the format has no collector.
    """
    if options.collect is None:
        yield []
        return
    adapter = _adapter(options, ())
    if adapter.collect is None:
        raise UsageError(
            f"--format {options.format} cannot fetch its exports itself; name its files"
        )
    with tempfile.TemporaryDirectory(prefix="fleetaudit-collect-") as folder:
        yield adapter.collect(options.collect, Path(folder), progress or (lambda _msg: None))


def _adapter(options: IngestOptions, paths: Sequence[Path]) -> Adapter:
    adapter = ADAPTERS.get(options.format)
    if adapter is None:
        raise InputError(
            ", ".join(str(p) for p in paths) or "--format",
            f"unknown --format {options.format!r}; use {' or '.join(FORMATS)}",
        )
    return adapter


def _ingest(
    store: Store,
    paths: Sequence[Path],
    options: IngestOptions,
    say: Progress,
    staged: asi2026.Staged | None,
) -> IngestResult:
    sources = plan_sources(store, paths, options, say, staged)
    topology = read_topology(options.topology) if options.topology is not None else None
    topology_summary: TopologySummary | None = None
    started = _utc_now()
    # DuckDB cannot estimate a CSV's rows and may build the node lookup's hash
    # table on the 10 M-row file side instead of the nodes (3x slower, GiBs).
    with store.optimizer_disabled("build_side_probe_side"), store.transaction():
        ingest_id = int(store.scalar("SELECT COALESCE(max(ingest_id), 0) + 1 FROM ingests"))
        summaries: list[TableSummary] = []
        guarded: list[str] = []  # a second fleet, telemetry counted twice (guards)
        for table_name in schema.INGEST_ORDER:
            mine = [s for s in sources if s.table == table_name]
            if mine:
                summaries.append(
                    _load_table(
                        store,
                        schema.table(table_name),
                        mine,
                        ingest_id,
                        say,
                        options.percent,
                        guarded,
                        options.strict,
                    )
                )
            if table_name == "nodes" and mine:
                # nodes an earlier --topology placed keep its levels (unless this one moves them)
                reapply_topology(store, ingest_id)
            if table_name == "nodes" and topology is not None:
                # one place for every format: the call's nodes, as loaded and validated
                say(f"nodes: applying the topology of {topology.file}")
                topology_summary = apply_topology(store, topology, ingest_id)
        if staged is not None:
            say("alibaba-gpu-v2026: side tables")
            staged.load_side_tables(store, ingest_id)
            summaries = [
                replace(
                    s,
                    read=s.read + staged.rejected.get(s.table, 0),
                    rejected=s.rejected + staged.rejected.get(s.table, 0),
                )
                for s in summaries
            ]
        rejects = store.small_frame(
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
        stamps = _export_stamps(sources, options)
        for file, instant, how in stamps:
            store.run(
                "INSERT INTO exports VALUES ($id, $file, $at, $how)",
                {"id": ingest_id, "file": file, "at": instant, "how": how},
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
    newest = max(stamps, key=lambda stamp: stamp[1], default=None)
    return IngestResult(
        ingest_id=ingest_id,
        export_time=None if newest is None else (newest[1], f"{newest[2]}, {newest[0]}"),
        files=tuple(dict.fromkeys(s.file for s in sources)),
        tables=tuple(summaries),
        rejects=rejects,
        topology=topology_summary,
        notes=tuple(
            dict.fromkeys(
                [
                    *(n for s in sources for n in s.notes),
                    *(staged.summary if staged else ()),
                    *guarded,
                ]
            )
        ),
    )


def _export_stamps(
    sources: Sequence[Source], options: IngestOptions
) -> list[tuple[str, datetime, str]]:
    """(file, instant, how) of every file that says when it was exported; ``--export-time``
    stands for all of them."""
    if options.export_time is not None:
        return [("--export-time", options.export_time, "given with --export-time")]
    return list(dict.fromkeys(stamp for s in sources for stamp in s.exported))


def _utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _load_table(
    store: Store,
    table: schema.Table,
    sources: list[Source],
    ingest_id: int,
    say: Progress,
    percent: Sequence[str] = (),
    notes: list[str] | None = None,
    strict: bool = False,
) -> TableSummary:
    """Load a table's files of one call, merge them with the stored rows by key, and
    guard against a second fleet or telemetry counted twice (:mod:`.guards`), whose
    notes go to ``notes``."""
    found = [] if notes is None else notes
    name = q(table.name)
    had_rows = store.row_count(table.name) > 0
    read = rejected = 0
    for i, source in enumerate(sources, 1):
        say(f"{table.name}: reading {source.file} ({i}/{len(sources)})")
        read_, rejected_ = _load_file(store, table, source, ingest_id, percent)
        read += read_
        rejected += rejected_

    say(f"{table.name}: merging")
    keys = ", ".join(q(k) for k in table.key)
    params = {"id": ingest_id}
    loaded = int(store.scalar(f"SELECT count(*) FROM {name} WHERE _ingest_id = $id", params))
    distinct = _distinct_keys(store, name, keys, loaded, params)
    superseded = loaded - distinct
    merged = sum(s.superseded for s in sources)  # merged by the adapter before the load
    if superseded:
        # the last row of the call wins: row ids grow in load order
        store.run(
            f"DELETE FROM {name} WHERE _ingest_id = $id AND rowid NOT IN "
            f"(SELECT max(rowid) FROM {name} WHERE _ingest_id = $id GROUP BY {keys})",
            params,
        )
    if had_rows and table.name == "nodes":
        found.extend(guards.fleet_changes(store, ingest_id, strict))
    mixed = had_rows and table.name == "telemetry" and guards.mixed(store)
    if mixed:
        guards.raw_within_rolled(store, ingest_id)  # before a raw row replaces a rolled one
    replaced = 0
    if had_rows:
        # a key column that may be empty (node_events' gpu_index) matches null to null
        match = " AND ".join(
            f"{name}.{q(k)} {'=' if table.column(k).required else 'IS NOT DISTINCT FROM'} "
            f"fresh.{q(k)}"
            for k in table.key
        )
        # one pass over the stored rows, which grow with the history: the delete counts
        replaced = int(
            store.run(
                f"DELETE FROM {name} USING (SELECT {keys} FROM {name} WHERE _ingest_id = $id) "
                f"AS fresh WHERE {match} AND {name}._ingest_id <> $id",
                params,
            )
            or 0
        )
    if mixed:
        found.extend(guards.telemetry_overlap(store, ingest_id, strict))
    return TableSummary(
        table=table.name,
        files=len(sources),
        read=read + merged,
        new=distinct - replaced,
        replaced=replaced,
        superseded=superseded + merged,
        rejected=rejected,
    )


HASHED_KEYS_ROWS = (1_000_000, 20_000_000)
"""Calls that load this many rows into a table (from, up to) check their keys by hash:
from a million rows on, the hashes save most of a GROUP BY's CPU; the array of hashes
(8 bytes a row, held outside DuckDB's memory limit) stays below 160 MB."""


def _distinct_keys(store: Store, name: str, keys: str, loaded: int, params: dict[str, int]) -> int:
    """The distinct keys among the ``loaded`` rows of this call in table ``name``.

    Most calls hold no key twice. Between :data:`HASHED_KEYS_ROWS` rows, distinct 64-bit
    hashes of the keys prove it (equal keys have equal hashes) for a third of the CPU of a
    GROUP BY of the keys; only when two hashes are equal (a key given twice, or,
    less than once in 300,000 calls of 10 M rows, two keys with one hash) does the GROUP BY
    count them.
    """
    low, high = HASHED_KEYS_ROWS
    where = f"FROM {name} WHERE _ingest_id = $id"
    if low <= loaded <= high:
        if store.distinct_count(f"SELECT hash({keys}) {where}", params) == loaded:
            return loaded
    # GROUP BY beats count(DISTINCT ...) in DuckDB for string keys
    return int(
        store.scalar(f"SELECT count(*) FROM (SELECT {keys} {where} GROUP BY {keys})", params)
    )


def _load_file(
    store: Store, table: schema.Table, source: Source, ingest_id: int, percent: Sequence[str] = ()
) -> tuple[int, int]:
    """Load one file; returns (rows read, rows rejected)."""
    # every fraction column is checked for its unit: as given (in percent with --percent)
    fractions = {c.name: c.name in percent for c in table.columns if c.at_most_one}
    before = _fraction_stats(store, table, fractions, ingest_id, rejected_too=False)
    try:
        columns = store.describe(source.select, source.params)
    except QueryError as exc:
        raise InputError(source.file, read_failure(store.memory_limit(), exc)) from exc
    plan = plan_load(
        table,
        source.file,
        source.select,
        source.numbered,
        columns,
        store.column_types(table.name),
        adapter_rejects=source.adapter_rejects,
        percent=frozenset(percent),
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
        after = _fraction_stats(store, table, fractions, ingest_id, rejected_too=True)
        _check_units(source.file, fractions, before, after)
        rejected = int(
            store.scalar(
                f"SELECT count(*) FROM {q(table.name)} WHERE _ingest_id = -$ingest_id", tagged
            )
        )
        if rejected:
            store.run(plan.rejects, {**params, "file": source.file})
            store.run(f"DELETE FROM {q(table.name)} WHERE _ingest_id = -$ingest_id", tagged)
    except QueryError as exc:
        raise InputError(source.file, read_failure(store.memory_limit(), exc)) from exc
    return read + bad_lines, rejected + bad_lines


def _fraction_stats(
    store: Store, table: schema.Table, columns: dict[str, bool], ingest_id: int, rejected_too: bool
) -> dict[str, tuple[int, int, int]]:
    """Per fraction column (True: given in percent, stored / 100): (values, values in
    (1, 100], values above 1) as the file gave them, among this call's rows, with its
    rejected rows (tagged -ingest_id until deleted) if asked."""
    if not columns:
        return {}
    parts = []
    for column, in_percent in columns.items():
        given = f"({q(column)} * 100.0)" if in_percent else q(column)
        parts.append(
            f"count({q(column)}), count(*) FILTER ({given} > 1 AND {given} <= 100), "
            f"count(*) FILTER ({given} > 1)"
        )
    row = store.small_frame(
        f"SELECT {', '.join(parts)} FROM {q(table.name)} WHERE _ingest_id IN ($id, $tagged)",
        {"id": ingest_id, "tagged": -ingest_id if rejected_too else ingest_id},
    ).row(0)
    return {c: (int(row[3 * i] or 0), int(row[3 * i + 1] or 0), int(row[3 * i + 2] or 0))
            for i, c in enumerate(columns)}  # fmt: skip


def _check_units(
    file: str,
    columns: dict[str, bool],
    before: dict[str, tuple[int, int, int]],
    after: dict[str, tuple[int, int, int]],
) -> None:
    """Fail the file when a fraction column's unit is not the one it was read in.

    A fraction holds no value above 1: one value in (1, 100] makes the column a percent
    column, refused without ``--percent``. With ``--percent``, a column whose values all
    lie within 0..1 is a fraction column, refused: divided by 100 it would read 100
    times too low. (A value above 100 is neither: a reject of its row.)
    """
    for column, in_percent in columns.items():
        values, percent_like, above_one = (
            a - b for a, b in zip(after[column], before[column], strict=True)
        )
        if not in_percent and percent_like:
            raise InputError(
                file,
                f"{percent_like:,} of {values:,} values lie above 1 and within 100; a fraction "
                f"holds none above 1, so the column is in percent: give --percent {column} "
                "to scale it to 0..1",
                column=column,
            )
        if in_percent and values and not above_one:
            raise InputError(
                file,
                f"--percent {column}: all {values:,} values lie within 0..1, as fractions do, "
                f"and would read 100 times too low; drop --percent {column} for this file",
                column=column,
            )


def _csv_line_rejects(store: Store, table: schema.Table, source: Source, ingest_id: int) -> int:
    """Record the lines DuckDB's CSV reader could not split, one reject per line; returns
    how many.

    DuckDB reports a line short by several fields once per missing field; they are
    one bad line here, with the reason in docs/ingest.md's words. Also fills
    CSV_BAD_ROWS (e: the bad data row, k: its rank), which the numbered scan uses
    to count skipped lines back into row numbers.
    """
    store.run(
        f"CREATE OR REPLACE TEMP TABLE {CSV_BAD_ROWS} AS SELECT e, row_number() OVER (ORDER BY e) "
        f"AS k FROM (SELECT DISTINCT line - 1 AS e FROM {CSV_ERRORS}) AS bad"
    )
    bad = int(store.scalar(f"SELECT count(*) FROM {CSV_BAD_ROWS}"))
    if bad:
        lines = store.sql(
            f"SELECT line - 1 AS row, any_value(csv_line) AS value, "
            f"list(DISTINCT lower(error_type)) AS kinds FROM {CSV_ERRORS} GROUP BY line ORDER BY line"
        )
        header = list(source.params.get("columns", {}))
        rows = [
            _bad_line(header, r["row"], r["value"], r["kinds"]) for r in lines.iter_rows(named=True)
        ]
        frame = pl.DataFrame(
            rows,
            schema={"row": pl.Int64, "column": pl.String, "value": pl.String, "reason": pl.String},
            orient="row",
        )
        store.register_frame("_fa_bad_lines", frame)
        store.run(
            'INSERT INTO rejects SELECT $ingest_id, $file, $table, "row", "column", value, '
            'reason FROM _fa_bad_lines ORDER BY "row"',
            {"ingest_id": ingest_id, "file": source.file, "table": table.name},
        )
        store.unregister("_fa_bad_lines")
    return bad


def _bad_line(
    header: list[str], row: int, text: str | None, kinds: list[str]
) -> tuple[int, str | None, str | None, str]:
    """One reject for a line that cannot be split: (row, column, value, reason).

    >>> _bad_line(["a", "b", "c"], 4, "1", ["missing columns"])
    (4, 'b', '1', 'the line has 1 field(s); the header has 3')
    >>> _bad_line(["a"], 2, '1,"x,y",3', ["too many columns"])
    (2, None, '1,"x,y",3', 'the line has 3 field(s); the header has 1')
    """
    fields = None
    if text is not None:
        try:
            fields = len(next(csv.reader([text]), []))
        except csv.Error:
            fields = None
    if (
        fields is not None
        and fields != len(header)
        and ("missing columns" in kinds or "too many columns" in kinds)
    ):
        column = header[fields] if fields < len(header) else None
        return row, column, text, f"the line has {fields} field(s); the header has {len(header)}"
    kind = " and ".join(sorted(kinds)) or "unreadable"
    return row, None, text, f"the line cannot be split into fields ({kind})"


# -- the format adapters: name -> its sources, and what a call of it sets up first ----------------


def _native_sources(
    store: Store, paths: Sequence[Path], options: IngestOptions, progress: Progress | None,
    staged: asi2026.Staged | None,
) -> list[Source]:  # fmt: skip
    return [native_source(p, options.table) for p in expand_paths(list(paths))]


def _alibaba_sources(
    store: Store, paths: Sequence[Path], options: IngestOptions, progress: Progress | None,
    staged: asi2026.Staged | None,
) -> list[Source]:  # fmt: skip
    return alibaba.trace_sources(
        list(paths), trace_start=options.trace_start or alibaba.DEFAULT_TRACE_START
    )


def _asi2026_sources(
    store: Store, paths: Sequence[Path], options: IngestOptions, progress: Progress | None,
    staged: asi2026.Staged | None,
) -> list[Source]:  # fmt: skip
    if staged is None:
        raise ValueError("alibaba-gpu-v2026 sources are the staged files; stage them first")
    return list(staged.sources)


def _slurm_sources(
    store: Store, paths: Sequence[Path], options: IngestOptions, progress: Progress | None,
    staged: asi2026.Staged | None,
) -> list[Source]:  # fmt: skip
    return slurm.slurm_sources(
        store,
        list(paths),
        timezone=options.timezone,
        priority_map=PriorityMap.read(options.priority_map),
        strict=options.strict,
    )


def _kubernetes_sources(
    store: Store, paths: Sequence[Path], options: IngestOptions, progress: Progress | None,
    staged: asi2026.Staged | None,
) -> list[Source]:  # fmt: skip
    return kubernetes.snapshot_sources(
        store,
        list(paths),
        kubernetes.KubernetesOptions(
            snapshot_time=options.snapshot_time,
            priority_map=PriorityMap.read(options.priority_map),
            tenant_label=options.tenant_label,
            allow_mixed=options.allow_mixed,
        ),
    )


def _prometheus_sources(
    store: Store, paths: Sequence[Path], options: IngestOptions, progress: Progress | None,
    staged: asi2026.Staged | None,
) -> list[Source]:  # fmt: skip
    return prometheus.telemetry_sources(store, list(paths), progress)


def _prepare_prometheus(
    store: Store, paths: Sequence[Path], options: IngestOptions, say: Progress, stack: ExitStack
) -> asi2026.Staged | None:
    stack.enter_context(store.memory_capped(prometheus.MEMORY_LIMIT))
    stack.callback(prometheus.drop_staging, store)  # its staged samples
    return None


def _collect_prometheus(settings: object, folder: Path, progress: Progress) -> list[Path]:
    return prometheus_pull.collect(settings, folder, progress)


def _prepare_slurm(
    store: Store, paths: Sequence[Path], options: IngestOptions, say: Progress, stack: ExitStack
) -> asi2026.Staged | None:
    stack.callback(slurm.release, store)  # its temporary copies of the exports
    return None


def _rolled_release(paths: Sequence[Path]) -> Path | None:
    """The one folder of ``paths`` when it is a rolled-up ASI release, else None."""
    if len(paths) == 1 and (paths[0] / ASI_ROLLED_MANIFEST).is_file():
        return paths[0]
    return None


def _collect_slurm(settings: object, folder: Path, progress: Progress) -> list[Path]:
    return slurm_collect.collect(settings, folder, progress)


def _prepare_asi2026(
    store: Store, paths: Sequence[Path], options: IngestOptions, say: Progress, stack: ExitStack
) -> asi2026.Staged | None:
    stack.enter_context(asi2026.bounded_memory(store))
    rolled = _rolled_release(paths)
    if rolled is not None and (options.days is not None or options.trace_start is not None):
        raise InputError(
            str(rolled),
            "a rolled-up release holds the days and trace start it was rolled up with: "
            "give --days to rollup, not to ingest",
        )
    if rolled is not None:  # `rollup --format alibaba-gpu-v2026` staged it already
        return asi2026.read_rolled(rolled)
    return asi2026.stage_release(
        store,
        list(paths),
        stack.enter_context(asi2026.staging_folder(store)),
        trace_start=options.trace_start or asi2026.DEFAULT_TRACE_START,
        days=options.days,
        progress=say,
    )


@dataclass(frozen=True)
class Adapter:
    """How ingest reads one ``--format``: its ``sources`` (the files as sources of the input
    tables), what a call sets up first (``prepare``: staging, memory caps, clean-ups on the
    call's ExitStack) and its ``collect``or, where the format can fetch its exports itself
    (``collect(settings, folder, progress)`` writes them into ``folder`` and returns their
    paths; the call then reads them as if they had been named, see :func:`collected`)."""

    sources: Callable[..., list[Source]]
    prepare: Callable[..., asi2026.Staged | None] | None = None
    collect: Callable[[object, Path, Progress], list[Path]] | None = None


# one entry per --format, keyed as core.options.INGEST_FORMAT_SPECS (a test holds them equal)
ADAPTERS: dict[str, Adapter] = {
    "native": Adapter(_native_sources),
    "alibaba-gpu-v2023": Adapter(_alibaba_sources),
    "alibaba-gpu-v2026": Adapter(_asi2026_sources, prepare=_prepare_asi2026),
    "kubernetes": Adapter(_kubernetes_sources, collect=lambda s, f, p: kubectl.collect(s, f, p)),
    "prometheus": Adapter(
        _prometheus_sources, prepare=_prepare_prometheus, collect=_collect_prometheus
    ),
    "slurm": Adapter(_slurm_sources, prepare=_prepare_slurm, collect=_collect_slurm),
}
