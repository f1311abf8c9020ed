"""``fleetaudit rollup``: raw telemetry in Parquet rolled up into compact native tables.

A fleet's raw per-minute telemetry is far larger than what fleetaudit's engines
need. ``rollup`` scans it where it lies, on DuckDB (the default) or on Spark
(``--engine spark``), and writes per (node, GPU, allocation, interval) one row
with the means of ``sm_active`` and ``mem_used`` and the number of samples, as
native Parquet that ``fleetaudit ingest FOLDER`` loads. ``report`` then computes
the productive denominator from those rows as it does from the raw samples.

The formats rollup reads are :class:`RollupSource` entries of :data:`SOURCES`:
a logical table the queries read, the columns its files must have, and the
queries (in ``queries/``, run on both engines) that write each native table.
Another raw format plugs in as another entry.
"""

from __future__ import annotations

import contextlib
import functools
import math
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from fleetaudit.core.errors import InputError, UsageError
from fleetaudit.core.fsutil import atomic_path, check_outputs
from fleetaudit.core.options import ROLLUP_INTERVAL_S, SCAN_ENGINES
from fleetaudit.model.engines import check_engine, open_engine

__all__ = [
    "ROLLED_TELEMETRY",
    "SOURCES",
    "RollupOptions",
    "RollupOutput",
    "RollupResult",
    "RollupSource",
    "rollup",
]

DEFAULT_INTERVAL_S = ROLLUP_INTERVAL_S

# The rolled-up telemetry table: the native telemetry columns plus two the report reads.
ROLLED_TELEMETRY = pa.schema(
    [
        ("ts", pa.timestamp("us")),
        ("node_id", pa.string()),
        ("gpu_index", pa.int64()),
        ("alloc_id", pa.string()),
        ("sm_active", pa.float64()),
        ("mem_used", pa.float64()),
        ("samples", pa.int64()),
        ("sample_interval_s", pa.float64()),
    ]
)


@dataclass(frozen=True)
class RollupOutput:
    """One native table a source rolls up into: ``<table>.parquet`` from ``query``."""

    table: str
    query: str
    schema: pa.Schema


@dataclass(frozen=True)
class RollupSource:
    """A raw format that ``rollup`` reads.

    ``view`` is the logical table its queries read; ``required`` the columns its
    files must hold (a hive partition key counts); ``counts`` a query giving one
    row of ``rows`` and ``skipped`` (rows the outputs leave out).
    """

    name: str
    view: str
    required: tuple[str, ...]
    timestamps: tuple[str, ...]
    numbers: tuple[str, ...]
    outputs: tuple[RollupOutput, ...]
    counts: str
    optional: tuple[tuple[str, str], ...] = ()  # (column, SQL type): NULL where no file has it
    reader: str = "parquet"  # parquet: the files as given; prometheus: parsed first; asi: below


_NATIVE = RollupSource(
    name="native",
    view="raw_telemetry",
    required=("ts", "node_id", "gpu_index", "sm_active"),
    timestamps=("ts",),
    numbers=("gpu_index", "sm_active", "mem_used"),
    outputs=(RollupOutput(table="telemetry", query="rollup_telemetry", schema=ROLLED_TELEMETRY),),
    counts="rollup_telemetry_skipped",
    optional=(("alloc_id", "STRING"), ("mem_used", "DOUBLE")),
)
ASI_FORMAT = "alibaba-gpu-v2026"

SOURCES: dict[str, RollupSource] = {
    "native": _NATIVE,
    # query_range dumps: parsed and merged by the ingest's own reader (DuckDB, on this
    # machine, whatever the engine) into raw native rows, which the engine then rolls
    # up as native ones
    "prometheus": replace(_NATIVE, name="prometheus", reader="prometheus"),
    # the ASI release: the ingest's own staging (DuckDB, or its queries on Spark), written
    # as a folder that `ingest` loads as it would the release (asi2026.write_rolled)
    ASI_FORMAT: replace(_NATIVE, name=ASI_FORMAT, outputs=(), reader="asi"),
}


@dataclass(frozen=True)
class RollupOptions:
    """What ``rollup`` runs (defaults are the command line's)."""

    interval_s: float = DEFAULT_INTERVAL_S
    engine: str = SCAN_ENGINES[0]
    master: str | None = None
    format: str = "native"
    days: str | None = None  # alibaba-gpu-v2026: the release's days to roll up (A-B or A)

    def check(self) -> None:
        check_engine(self.engine, self.master)
        if self.format not in SOURCES:
            raise UsageError(f"--format: {self.format!r} is not one of {', '.join(SOURCES)}")
        if self.days is not None and self.format != ASI_FORMAT:
            raise UsageError(f"--days: only with --format {ASI_FORMAT}")
        if not (math.isfinite(self.interval_s) and self.interval_s >= 1) or self.interval_s != int(
            self.interval_s
        ):
            raise UsageError("--interval: must be a whole number of seconds, 1s or more")


@dataclass(frozen=True)
class RollupResult:
    """What a rollup read and wrote."""

    engine: str
    format: str
    interval_s: float
    files: int  # raw Parquet files read
    rows: int  # raw rows
    skipped: int  # raw rows left out (native ingest would reject them)
    written: dict[str, tuple[Path, int]] = field(default_factory=dict)  # table -> (file, rows)
    seconds: float = 0.0


# Tables of a native export folder that are not telemetry: a folder's top-level
# nodes/allocations/requests.parquet are not read as raw telemetry.
_OTHER_TABLES = frozenset({"nodes", "allocations", "requests", "rejects"})


def find_parquet(paths: list[Path]) -> tuple[list[Path], bool]:
    """The Parquet files under ``paths``, and whether they sit in hive partition folders.

    A folder is searched recursively; names starting with ``.`` or ``_`` (Spark's
    ``_SUCCESS``, temporary files) and the other native tables at its top are skipped.
    """
    files: list[Path] = []
    hive = False
    for path in paths:
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            found = sorted(
                p for p in path.rglob("*.parquet")
                if p.is_file() and not any(part.startswith((".", "_")) for part in p.relative_to(path).parts)
                and not (p.parent == path and p.stem.lower() in _OTHER_TABLES)
            )  # fmt: skip
            if not found:
                raise InputError(str(path), "holds no .parquet files")
            hive = hive or any(
                "=" in part for f in found for part in f.relative_to(path).parts[:-1]
            )
            files.extend(found)
        else:
            raise InputError(str(path), "no such file or folder")
    return files, hive


def _hive_keys(file: Path) -> set[str]:
    return {part.split("=", 1)[0] for part in file.parts[:-1] if "=" in part}


def check_files(files: list[Path], source: RollupSource) -> None:
    """Each file is Parquet and holds the source's required columns, timestamps as timestamps."""
    for file in files:
        try:
            found = pq.read_schema(file)
        except (OSError, pa.ArrowException) as exc:
            raise InputError(str(file), f"not a readable Parquet file: {exc}") from exc
        names = {n.lower(): n for n in found.names}
        for column in source.required:
            if column not in names and column not in _hive_keys(file):
                raise InputError(str(file), "missing required column", column=column)
        for column in source.timestamps:
            if column in names and not pa.types.is_timestamp(found.field(names[column]).type):
                raise InputError(
                    str(file),
                    f"must be a Parquet timestamp, not {found.field(names[column]).type}",
                    column=column,
                )
        for column in source.numbers:
            kind = found.field(names[column]).type if column in names else None
            if kind is not None and not (
                pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_null(kind)
            ):
                raise InputError(str(file), f"must be a number, not {kind}", column=column)


def rollup(
    paths: list[Path],
    out: Path,
    options: RollupOptions,
    progress: Callable[[str], None] | None = None,
) -> RollupResult:
    """Roll the raw telemetry under ``paths`` up into native tables in the folder ``out``.

    Every output file is written whole or not at all (a temporary file, then a rename),
    and a folder this call creates is left only with its tables in it.
    """
    started = time.perf_counter()
    options.check()
    source = SOURCES[options.format]
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out: {out} is a file; give a folder")
    files, hive = find_parquet(paths) if source.reader == "parquet" else (list(paths), False)
    if source.reader == "parquet":
        check_files(files, source)
    # a table written over a raw file this call reads would lose it
    check_outputs(
        {f"--out ({o.table})": out / f"{o.table}.parquet" for o in source.outputs}, inputs=files
    )
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        # the Spark executors write their part files here, beside the tables (a folder
        # they see whenever they can write --out), and the tables are made from them
        scratch = Path(tempfile.mkdtemp(prefix=".fleetaudit-rollup-", dir=out))
    except OSError as exc:
        raise UsageError(f"--out: {out}: cannot write here: {exc.strerror or exc}") from exc
    try:
        if source.reader == "asi":
            written, counts = _run_asi(paths, out, scratch, options, progress)
        else:
            read = files
            if source.reader == "prometheus":
                parsed, read = _parse_prometheus(paths, scratch, progress)
                files = [parsed]
            written, counts = _run(files, hive, out, scratch, source, options)
            files = read
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()
        raise
    shutil.rmtree(scratch, ignore_errors=True)
    return RollupResult(
        engine=options.engine,
        format=options.format,
        interval_s=options.interval_s,
        files=len(files),
        rows=int(counts["rows"] or 0),
        skipped=int(counts["skipped"] or 0),
        written=written,
        seconds=time.perf_counter() - started,
    )


ROW_GROUP_ROWS = 1 << 17
"""Rows per row group of a rolled table, whatever batches the engine yields: the
same rows give the same file on either engine."""


def write_rows(path: Path, schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> int:
    """Write ``batches`` (cast to ``schema``) to the Parquet file ``path`` in row groups
    of :data:`ROW_GROUP_ROWS`; the rows written."""
    rows = 0
    pending: list[pa.Table] = []
    held = 0
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for batch in batches:
            table = pa.Table.from_batches([batch]).select(schema.names).cast(schema)
            pending.append(table)
            held += table.num_rows
            while held >= ROW_GROUP_ROWS:
                whole = pa.concat_tables(pending)
                writer.write_table(whole.slice(0, ROW_GROUP_ROWS), row_group_size=ROW_GROUP_ROWS)
                pending, held = [whole.slice(ROW_GROUP_ROWS)], whole.num_rows - ROW_GROUP_ROWS
                rows += ROW_GROUP_ROWS
        if held:
            writer.write_table(pa.concat_tables(pending), row_group_size=ROW_GROUP_ROWS)
            rows += held
    return rows


def _run(
    files: list[Path],
    hive: bool,
    out: Path,
    scratch: Path,
    source: RollupSource,
    options: RollupOptions,
) -> tuple[dict[str, tuple[Path, int]], dict[str, int]]:
    interval_us = int(options.interval_s * 1_000_000)
    written: dict[str, tuple[Path, int]] = {}
    with open_engine(options.engine, options.master) as engine:
        engine.register_parquet(source.view, files, hive, dict(source.optional))
        counts = pa.Table.from_batches(list(engine.batches(source.counts))).to_pylist()[0]
        with contextlib.ExitStack() as renames:  # every table lands, or none
            for output in source.outputs:
                target = out / f"{output.table}.parquet"
                tmp = renames.enter_context(atomic_path(target))
                batches = engine.batches(
                    output.query, scratch=scratch / output.table, interval_us=interval_us
                )
                written[output.table] = (target, write_rows(tmp, output.schema, batches))
    return written, counts


def _parse_prometheus(
    paths: list[Path], scratch: Path, progress: Callable[[str], None] | None
) -> tuple[Path, list[Path]]:
    """The query_range dumps under ``paths`` as one Parquet file of raw native rows,
    parsed and merged by ``ingest --format prometheus``'s own reader; and the files read."""
    from fleetaudit.inputs.ingest import prometheus
    from fleetaudit.model.store import open_store

    target = scratch / "prometheus-telemetry.parquet"
    with (
        open_store(scratch / "parse.duckdb") as store,
        store.memory_capped(prometheus.MEMORY_LIMIT),
    ):
        try:
            inputs, _merged = prometheus.parse_files(store, paths, progress)
            store.copy_to_parquet(prometheus.merged_rows_select(), target)
        finally:
            prometheus.drop_staging(store)
    return target, [item.path for item in inputs]


def _run_asi(
    paths: list[Path],
    out: Path,
    scratch: Path,
    options: RollupOptions,
    progress: Callable[[str], None] | None,
) -> tuple[dict[str, tuple[Path, int]], dict[str, int]]:
    """The release staged by ``ingest --format alibaba-gpu-v2026``'s own code (on Spark:
    its queries on the executors, asi2026.stage_release_spark), moved into ``out`` with
    the manifest that makes ``ingest OUT`` load it as staged."""
    from fleetaudit.inputs.ingest import asi2026
    from fleetaudit.model.store import open_store

    days = asi2026.parse_days(options.days)
    folder = scratch / "staged"
    folder.mkdir()
    with (
        open_store(scratch / "stage.duckdb") as store,
        asi2026.bounded_memory(store),
        contextlib.ExitStack() as stack,
    ):
        stage: Callable[..., asi2026.Staged] = functools.partial(asi2026.stage_release, store)
        if options.engine == "spark":  # the executors reduce it; this store reads footers
            engine = stack.enter_context(open_engine(options.engine, options.master))
            stage = functools.partial(asi2026.stage_release_spark, engine, store)
        staged = stage(
            paths, folder, trace_start=asi2026.DEFAULT_TRACE_START, days=days, progress=progress
        )
    written: dict[str, tuple[Path, int]] = {}
    for file in asi2026.write_rolled(staged, out):
        rows = pq.read_metadata(file).num_rows if file.suffix == ".parquet" else 0
        written[file.name] = (file, rows)
    # the pod-hours the release's mapping rejects (a bad server-hour is a nodes reject)
    return written, {"rows": staged.pod_rows, "skipped": staged.rejected.get("allocations", 0)}
