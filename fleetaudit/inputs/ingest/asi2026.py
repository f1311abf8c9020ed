"""``--format alibaba-gpu-v2026``: the ASI GPU trace of 2026 (OSDI'26), streamed by day.

ROOT is the release's data folder (``asi_opensource_pod_hourly/day=D/hour=HH/
*.parquet`` and ``asi_opensource_server_hourly/...``). Before the ingest
transaction, the release is reduced one day at a time, reading only the
columns the mapping needs, into staged Parquet files beside the store:

- ``nodes`` from ``server_hourly`` (each server's last observed hour);
- ``allocations``: consecutive pod-hours of one pod on one server with the same
  request, priority, job type and Standby flag collapse into one run; runs still
  going at a day's last hour are carried into the next day;
- ``telemetry``: one row per GPU and hour from ``avg_gpu_sm_util``, on GPU
  indices synthesised per node (:class:`_Colouring`);
- the side tables ``asi_pod_hourly`` (GPU pod-hours, pruned) and
  ``asi_server_hourly`` (server-hours with the HP CPU-only pods' totals), which
  ``fleetaudit paper`` reads.

The staged files then load in the one ingest transaction like native files, so
the validation, the rejects and the idempotent re-ingest are the native ones.
docs/formats/alibaba-gpu-v2026.md states every mapping rule.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from fleetaudit.core.errors import InputError, QueryError
from fleetaudit.core.options import ASI_ROLLED_MANIFEST, ASI_TRACE_START
from fleetaudit.core.resources import load_sql
from fleetaudit.inputs import asi_trace
from fleetaudit.inputs.asi_trace import FORMAT, POD_TABLE, SERVER_TABLE
from fleetaudit.inputs.ingest.labels import asi_bucket
from fleetaudit.inputs.ingest.sources import Source
from fleetaudit.model import schema
from fleetaudit.model.store import Store, quote_literal

__all__ = ["FORMAT", "DEFAULT_TRACE_START", "Staged", "stage_release", "parse_days"]

DEFAULT_TRACE_START = ASI_TRACE_START  # a Thursday: day 109 is Monday 2026-04-20
_EPS = 1e-9
STAGING_MEMORY = "2048MB"  # DuckDB's limit while the release is reduced (spills beyond it)

Progress = Callable[[str], None]

# physical Parquet types each read column may have
_STRING = {"BYTE_ARRAY"}
_NUMBER = {"DOUBLE", "FLOAT", "INT32", "INT64"}
_BOOL = {"BOOLEAN", "BYTE_ARRAY", "INT32", "INT64"}

def _physical_types(schema: pa.Schema, columns: Sequence[str]) -> dict[str, set[str]]:
    """The Parquet physical types each read column may have, from the release's schema."""
    kinds: dict[str, set[str]] = {}
    for name in columns:
        kind = schema.field(name).type
        kinds[name] = (
            _STRING if pa.types.is_string(kind) else _BOOL if pa.types.is_boolean(kind) else _NUMBER
        )
    return kinds


# the columns the adapter reads: asi_trace names them once, its schemas type them
_POD_TYPES = _physical_types(asi_trace.POD_SCHEMA, asi_trace.POD_COLUMNS)
# the sanity bounds of a server-hour's capacity, as ingest checks a node's (asi_server_rows)
_SERVER_BOUNDS = {"max_gpus": schema.MAX_GPUS_PER_NODE, "max_cpus": schema.MAX_CPUS}
_SERVER_TYPES = _physical_types(
    asi_trace.SERVER_SCHEMA,
    ("server_id", "cluster_id", "asw_id", "gpu_spec_public", "gpu_count", "cpu_capacity_cores"),
)


def parse_days(text: str | None) -> tuple[int, int] | None:
    """``--days``: ``109-115``, or one day ``109``; None means every day.

    >>> parse_days("109-115"), parse_days("7"), parse_days(None)
    ((109, 115), (7, 7), None)
    """
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if m is None:
        raise InputError("--days", f"expected A-B or A (day numbers), got {text!r}")
    first = int(m.group(1))
    last = int(m.group(2)) if m.group(2) is not None else first
    if last < first:
        raise InputError("--days", f"the range {text!r} ends before it starts")
    return first, last


@dataclass(frozen=True)
class Release:
    """The partitions of a release folder within the --days window."""

    root: Path
    pods: dict[tuple[int, int], list[Path]]
    servers: dict[tuple[int, int], list[Path]]

    @property
    def days(self) -> list[int]:
        return sorted({d for d, _ in self.servers} | {d for d, _ in self.pods})

    @property
    def hours(self) -> list[int]:
        keys = set(self.servers) | set(self.pods)
        return sorted(asi_trace.hour_index(d, h) for d, h in keys)


def find_release(paths: list[Path], days: tuple[int, int] | None) -> Release:
    """The release under the one ROOT given; fails with what was expected."""
    if len(paths) != 1:
        raise InputError(
            ", ".join(str(p) for p in paths),
            f"{FORMAT} takes one folder: the release's data folder",
        )
    root = paths[0]
    expected = (
        f"expected the {FORMAT} release's data folder, holding "
        f"{POD_TABLE}/day=D/hour=HH/*.parquet and {SERVER_TABLE}/day=D/hour=HH/*.parquet"
    )
    if not root.is_dir():
        raise InputError(str(root), f"no such folder; {expected}")
    if not (root / SERVER_TABLE).is_dir() and (root / "data" / SERVER_TABLE).is_dir():
        root = root / "data"
    if not (root / SERVER_TABLE).is_dir() or not (root / POD_TABLE).is_dir():
        raise InputError(str(root), f"not the release layout; {expected}")
    pods = asi_trace.list_partitions(root, POD_TABLE)
    servers = asi_trace.list_partitions(root, SERVER_TABLE)
    if not servers:
        raise InputError(
            str(root / SERVER_TABLE), f"no day=D/hour=HH/*.parquet partition; {expected}"
        )
    if days is not None:
        lo, hi = days
        pods = {k: v for k, v in pods.items() if lo <= k[0] <= hi}
        servers = {k: v for k, v in servers.items() if lo <= k[0] <= hi}
        if not servers:
            raise InputError(str(root), f"no server_hourly partition within --days {lo}-{hi}")
    return Release(root, pods, servers)


@dataclass
class Staged:
    """The reduced release, staged as Parquet; what the transaction loads."""

    root: Path
    folder: Path
    trace_start: datetime
    t_first: int
    t_last: int
    sources: list[Source] = field(default_factory=list)
    pod_hours: list[str] = field(default_factory=list)
    server_hours: list[str] = field(default_factory=list)
    rejects: list[str] = field(default_factory=list)  # staged files of rejects ("table", file, ...)
    rejected: dict[str, int] = field(default_factory=dict)  # table -> rows rejected while staged
    summary: list[str] = field(default_factory=list)
    pod_rows: int = 0  # the pod-hours read

    def load_side_tables(self, store: Store, ingest_id: int) -> None:
        """Inside the ingest transaction: the side tables and the rejects of the release's
        rows (pod-hours and server-hours the mapping cannot take)."""
        store.run(load_sql("asi_create_side_tables"))
        window = {"lo": self.t_first, "hi": self.t_last}
        for table, files in (
            ("asi_pod_hourly", self.pod_hours),
            ("asi_server_hourly", self.server_hours),
        ):
            store.run(f"DELETE FROM {table} WHERE t BETWEEN $lo AND $hi", window)
            if files:
                store.run(
                    f"INSERT INTO {table} SELECT *, $id FROM read_parquet($files)",
                    {"files": files, "id": ingest_id},
                )
        store.run("DELETE FROM asi_trace")
        store.run(
            "INSERT INTO asi_trace VALUES ($start, $lo, $hi, $id)",
            {"start": self.trace_start, **window, "id": ingest_id},
        )
        if self.rejects:
            store.run(
                "INSERT INTO rejects SELECT $id, file, \"table\", \"row\", \"column\", value, "
                "reason FROM read_parquet($files)",
                {"files": self.rejects, "id": ingest_id},
            )


def _check_schemas(
    store: Store, files: list[Path], wanted: dict[str, set[str]], required: tuple[str, ...]
) -> None:
    """Every file has the columns read, with a usable type; else name the file."""
    try:
        rows = store.sql(
            "SELECT file_name, name, type FROM parquet_schema($files)",
            {"files": [str(f) for f in files]},
        )
    except QueryError as exc:
        raise InputError(str(files[0].parent), f"cannot read: {exc.message}") from exc
    by_file: dict[str, dict[str, str | None]] = {str(f): {} for f in files}
    for file_name, name, kind in rows.iter_rows():
        by_file.setdefault(file_name, {})[name] = kind
    for file_name, columns in by_file.items():
        for name, allowed in wanted.items():
            if name not in columns:
                reason = (
                    "required column missing"
                    if name in required
                    else "column missing (the release's schema has it)"
                )
                raise InputError(file_name, f"wrong schema: {reason}", column=name)
            if columns[name] not in allowed:
                kind = "a string" if allowed is _STRING else "a number"
                kind = "a boolean" if allowed is _BOOL else kind
                raise InputError(
                    file_name,
                    f"wrong schema: type {columns[name]} where the release has {kind}",
                    column=name,
                )


ASI_SPARK_QUERIES = (
    "asi_pod_rows", "asi_server_rows", "asi_limits", "asi_load_day", "asi_pod_rejects",
    "asi_mark_runs", "asi_runs", "asi_run_strings", "asi_mark_repeats", "asi_pod_repeats",
    "asi_closed_allocations", "asi_server_day", "asi_server_rejects", "asi_side_pod_hours",
    "asi_gpu_runs", "asi_gpu_hours",
)  # fmt: skip
"""The queries of the reduction that both engines run as written (DuckDB in
:func:`stage_release`, Spark in :func:`stage_release_spark`): the rows of the release's tables and their faults, the run rule, the
repeats rule, the allocation rows, the server-hours, the side table and the GPU pod-hours."""

ROLLED_MANIFEST = ASI_ROLLED_MANIFEST  # names the staged files, in load order, and what was found


def write_rolled(staged: Staged, out: Path) -> list[Path]:
    """Move the staged files into the folder ``out`` and write the manifest last (a
    temporary file, then a rename), so that ``ingest OUT`` loads them as
    :func:`stage_release` left them; the files written, manifest included."""
    moved: dict[str, str] = {}

    def keep(path: str) -> str:
        if path not in moved:
            target = out / Path(path).name
            os.replace(path, target)
            moved[path] = target.name
        return moved[path]

    sources = []
    for source in staged.sources:
        files = source.params["path"]
        sources.append(
            {"table": source.table, "file": source.file, "paths": [keep(f) for f in files]}
        )
    manifest = {
        "format": FORMAT,
        "release": str(staged.root),
        "trace_start": staged.trace_start.isoformat(),
        "t_first": staged.t_first,
        "t_last": staged.t_last,
        "sources": sources,
        "pod_hours": [keep(f) for f in staged.pod_hours],
        "server_hours": [keep(f) for f in staged.server_hours],
        "rejects": [keep(f) for f in staged.rejects],
        "rejected": staged.rejected,
        "summary": staged.summary,
    }
    tmp = out / f".{ROLLED_MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    os.replace(tmp, out / ROLLED_MANIFEST)
    return [out / name for name in moved.values()] + [out / ROLLED_MANIFEST]


def read_rolled(folder: Path) -> Staged:
    """The :class:`Staged` a rolled-up release folder holds (its manifest's files)."""
    path = folder / ROLLED_MANIFEST
    try:
        manifest = json.loads(path.read_text())
        if manifest.get("format") != FORMAT:
            raise ValueError(f"format {manifest.get('format')!r}, not {FORMAT}")
        named = manifest["pod_hours"] + manifest["server_hours"] + manifest["rejects"]
        named += [n for source in manifest["sources"] for n in source["paths"]]
        rejected = {str(t): int(n) for t, n in manifest["rejected"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(str(path), f"not a rolled-up {FORMAT} release: {exc}") from exc
    for name in named:
        if not (folder / name).is_file():
            raise InputError(
                str(folder / name), f"missing: {ROLLED_MANIFEST} names it; roll the release up again"
            )
    return Staged(
        root=Path(manifest["release"]),
        folder=folder,
        trace_start=datetime.fromisoformat(manifest["trace_start"]),
        t_first=int(manifest["t_first"]),
        t_last=int(manifest["t_last"]),
        sources=[
            _staged_source([folder / n for n in s["paths"]], s["table"], s["file"])
            for s in manifest["sources"]
        ],
        pod_hours=[str(folder / n) for n in manifest["pod_hours"]],
        server_hours=[str(folder / n) for n in manifest["server_hours"]],
        rejects=[str(folder / n) for n in manifest["rejects"]],
        rejected=rejected,
        summary=[str(line) for line in manifest["summary"]],
    )


@contextmanager
def staging_folder(store: Store) -> Iterator[Path]:
    """A scratch folder beside the store (the staged days can be large), removed after.

    Folders left by an earlier call on the same store that was killed are removed
    first: the caller holds the store's write lock, so no other call is using them.
    """
    db = store.path.resolve()
    prefix = f".{db.name}.asi-staging-"
    for stale in db.parent.glob(prefix + "*"):
        shutil.rmtree(stale, ignore_errors=True)
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=db.parent))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def stage_release(
    store: Store,
    paths: list[Path],
    folder: Path,
    *,
    trace_start: datetime,
    days: tuple[int, int] | None,
    progress: Progress | None = None,
) -> Staged:
    """Reduce the release day by day into ``folder``; the sources and side tables to load."""
    say = progress or (lambda _m: None)
    release = find_release(paths, days)
    store.run("SET enable_progress_bar = false")
    store.run("SET preserve_insertion_order = false")
    try:
        return _stage(store, release, folder, trace_start, say)
    finally:
        store.run("RESET preserve_insertion_order")


@contextmanager
def bounded_memory(store: Store) -> Iterator[None]:
    """DuckDB at STAGING_MEMORY for the whole call (staging and loading), then as before.

    Python's frames of one day need room beside DuckDB's buffers; DuckDB spills beyond.
    """
    limit = store.scalar("SELECT current_setting('memory_limit')")
    store.run(f"SET memory_limit = '{STAGING_MEMORY}'")
    try:
        yield
    finally:
        store.run(f"SET memory_limit = '{limit}'")


def _stage(
    store: Store, release: Release, folder: Path, trace_start: datetime, say: Progress
) -> Staged:
    hours = release.hours
    staged = Staged(release.root, folder, trace_start, hours[0], hours[-1])
    store.run("CREATE OR REPLACE TEMP TABLE _asi_limits AS\n" + load_sql("asi_limits"), _SERVER_BOUNDS)
    store.run(load_sql("asi_create_open_runs"))
    holders = _Colouring()
    servers: pl.DataFrame | None = None
    listed = {asi_trace.hour_index(d, h) for d, h in release.servers}  # hours with a server file
    absences: list[pl.DataFrame] = []
    day_list = release.days
    totals = {"pod_rows": 0, "runs": 0, "telemetry": 0, "used": 0.0, "interval": 0.0, "over": 0}
    blocks, _rows = _blocks(store, release)
    day_files: dict[str, list[Path]] = {"allocations": [], "telemetry": []}
    for b, (i, day, first_hour, last_hour) in enumerate(blocks):
        hours_of = range(first_hour, last_hour + 1)
        block = f"day {day} ({i + 1}/{len(day_list)})"
        if (first_hour, last_hour) != (0, 23):
            block += f", hours {first_hour:02d}-{last_hour:02d}"
        say(f"{FORMAT}: {block}: reading{_peak_memory()}")
        pod_files = [
            f for (d, h), fs in sorted(release.pods.items()) if d == day and h in hours_of
            for f in fs
        ]  # fmt: skip
        server_files = [
            f for (d, h), fs in sorted(release.servers.items()) if d == day and h in hours_of
            for f in fs
        ]  # fmt: skip
        last_day = b == len(blocks) - 1
        day_end = asi_trace.hour_index(day, last_hour)  # the block's end: runs there carry on
        if b == 0 or blocks[b - 1][1] != day:
            # GPU capacities: each server's last of the whole day, as the colouring uses
            # (this checks the schemas of all the day's server files, the block's among them)
            holders.capacity.update(_day_capacity(store, release, day))
        tag = f"{day}-{first_hour:02d}"
        if pod_files:
            _check_schemas(store, pod_files, _POD_TYPES, asi_trace.POD_REQUIRED)
            register_rows(store, "pod", pod_files)
            _run(store, "CREATE OR REPLACE TEMP TABLE _asi_day AS\n" + load_sql("asi_load_day"), {}, pod_files[0])
        else:
            store.run(load_sql("asi_create_empty_day"))
        loaded = int(store.scalar("SELECT count(*) FROM _asi_day"))
        totals["pod_rows"] += loaded
        if pod_files and loaded < _file_rows(store, pod_files):  # rows the mapping cannot take
            rejected = store.sql(load_sql("asi_pod_rejects"))
            _reject(staged, rejected, folder / f"rejects-{tag}.parquet")
        day_dir = release.root / POD_TABLE / f"day={day}"
        _run(store, "CREATE OR REPLACE TEMP VIEW _asi_rows AS\n" + load_sql("asi_mark_runs"), {}, day_dir)
        _day_runs(store, day_dir, staged, folder / f"repeats-{tag}.parquet")
        params = {
            "trace_start": trace_start,
            "t_first": staged.t_first,
            "t_last": staged.t_last,
            "day_end": day_end,
            "last_day": last_day,
        }
        # DuckDB writes the day's allocations itself: no frame of millions of rows in Python
        path = folder / f"allocations-{day}-{first_hour:02d}.parquet"
        _copy(store, load_sql("asi_closed_allocations"), params, path, ordered=True)
        if count_allocations(store, staged, [path], totals):
            day_files["allocations"].append(path)
        else:
            path.unlink()

        # servers: the day's hours for the side table, and the running last-seen facts
        if server_files:
            register_rows(store, "server", server_files)
            server_day = store.sql(load_sql("asi_server_day"))
            if server_day.height < _file_rows(store, server_files):
                _reject(
                    staged,
                    store.sql(load_sql("asi_server_rejects")),
                    folder / f"server-rejects-{tag}.parquet",
                )
            path = folder / f"server-hours-{day}-{first_hour:02d}.parquet"
            servers = take_servers(staged, servers, server_day, path, listed, absences, totals)
            del server_day

        # telemetry: colour the day's GPU runs, then one row per GPU-hour
        say(f"{FORMAT}: {block}: telemetry{_peak_memory()}")
        path = folder / f"pod-hours-{day}-{first_hour:02d}.parquet"
        _copy(store, load_sql("asi_side_pod_hours"), {}, path)
        if store.scalar("SELECT count(*) FROM read_parquet($path)", {"path": str(path)}):
            staged.pod_hours.append(str(path))
        else:
            path.unlink()
        runs = store.sql(load_sql("asi_gpu_runs"))
        gpu_hours = store.sql(load_sql("asi_gpu_hours"))
        store.run(load_sql("asi_carry_open_runs"), {"day_end": day_end, "last_day": last_day})
        store.run("DROP VIEW IF EXISTS _asi_rows")
        for scratch in ("_asi_day", "_asi_runs"):  # frees DuckDB's memory for the colouring
            store.run(f"DROP TABLE IF EXISTS {scratch}")
        where = holders.place_day(runs, day_end)
        del runs
        path = folder / f"telemetry-{day}-{first_hour:02d}.parquet"
        written = _write_telemetry(path, gpu_hours, where, trace_start)
        del gpu_hours, where
        totals["telemetry"] += written
        if written:
            day_files["telemetry"].append(path)
        if last_hour == 23 or last_day or blocks[b + 1][1] != day:
            # the day's blocks load as one file per table: the rejects name the day's folder
            for table, paths in day_files.items():
                if paths:
                    staged.sources.append(_staged_source(paths, table, str(day_dir)))
            day_files = {"allocations": [], "telemetry": []}

    for name in ("_asi_runs", "_asi_open"):
        store.run(f"DROP TABLE IF EXISTS {name}")
    return finish(staged, release, servers, absences, totals)


def count_allocations(
    store: Store, staged: Staged, paths: Sequence[Path], totals: dict[str, float]
) -> int:
    """Add the staged allocation files' runs, GPU-hours used and GPU-hours requested over
    their intervals to ``totals`` (the summary's reconciliation); their runs."""
    trace_end = staged.trace_start + timedelta(hours=staged.t_last + 1)
    runs, used, interval = store.sql(
        "SELECT count(*), sum(gpu_hours), "
        "sum(gpus * date_diff('second', start_time, COALESCE(end_time, $end)) / 3600) "
        "FROM read_parquet($path)",
        {"path": [str(p) for p in paths], "end": trace_end},
    ).row(0)
    totals["runs"] += int(runs)
    totals["used"] += float(used or 0.0)
    totals["interval"] += float(interval or 0.0)
    return int(runs)


def finish(
    staged: Staged,
    release: Release,
    servers: pl.DataFrame | None,
    absences: list[pl.DataFrame],
    totals: Mapping[str, float],
) -> Staged:
    """The release's nodes, their health intervals and the summary, from the servers
    known after the last block (each engine's reduction ends here)."""
    folder, trace_start, day_list = staged.folder, staged.trace_start, release.days
    if servers is None or servers.height == 0:
        raise InputError(str(release.root / SERVER_TABLE), "the server partitions hold no server")
    nodes = _nodes(servers, staged.t_last, trace_start)
    path = folder / "nodes.parquet"
    nodes.write_parquet(path)
    staged.sources.insert(0, _staged_source(path, "nodes", str(release.root / SERVER_TABLE)))
    staged.pod_rows = int(totals["pod_rows"])
    events = _node_events(absences, servers, staged.t_last, trace_start)
    if events.height:
        path = folder / "node_events.parquet"
        events.write_parquet(path)
        staged.sources.append(
            _staged_source(path, "node_events", str(release.root / SERVER_TABLE))
        )
    changed = int(servers.filter(pl.col("changes") > 0).height)
    staged.summary = [
        f"{FORMAT}: days {day_list[0]}-{day_list[-1]}, hours t={staged.t_first}..{staged.t_last} "
        f"cover {_iso(trace_start, staged.t_first)} to {_iso(trace_start, staged.t_last + 1)} "
        f"(export time {_iso(trace_start, staged.t_last)})",
        f"{FORMAT}: {totals['pod_rows']:,} pod-hours -> {totals['runs']:,} allocation runs, "
        f"{totals['telemetry']:,} telemetry rows; {nodes.height:,} servers"
        + (f" ({changed} changed model, GPUs or ASW: the last value is kept)" if changed else ""),
        f"{FORMAT}: {totals['over']:,} server-hours request more GPUs than the server has "
        "(low-priority work on a sleeping pod's GPUs); kept as recorded",
        f"{FORMAT}: reconciliation: {totals['used']:,.1f} GPU-hours used (used_gpu_hours) vs "
        f"{totals['interval']:,.1f} requested over whole hours (the allocations' intervals)",
    ]
    return staged


def take_servers(
    staged: Staged,
    servers: pl.DataFrame | None,
    server_day: pl.DataFrame,
    path: Path,
    listed: set[int],
    absences: list[pl.DataFrame],
    totals: dict[str, float],
) -> pl.DataFrame:
    """The server-hours of a block (asi_server_day) taken in: written as the side table
    ``asi_server_hourly`` to ``path``, their absences, the servers' facts merged and the
    server-hours above their GPUs counted; the servers known after them."""
    side = server_day.with_columns(_bucket_of("gpu_spec_public", server_day)).select(
        "t", "server_id", "cluster_id", "asw_id", "gpu_spec_public", "gpu_model",
        "gpu_count", "cpu_capacity_cores", "cpu_only_hp_cpu",
        pl.col("cpu_only_hp_rows").cast(pl.Int64),
    )  # fmt: skip
    side.write_parquet(path)
    staged.server_hours.append(str(path))
    absences.append(_absences(servers, server_day, listed))
    totals["over"] += server_day.filter(
        pl.col("requested_gpus") > pl.col("gpu_count") + _EPS
    ).height
    return _merge_servers(servers, server_day.drop("requested_gpus"))


def stage_release_spark(
    engine: Any,
    store: Store,
    paths: list[Path],
    folder: Path,
    *,
    trace_start: datetime,
    days: tuple[int, int] | None,
    progress: Progress | None = None,
) -> Staged:
    """Reduce the release on Spark (``engine``: a SparkEngine) into ``folder``, as
    :func:`stage_release` does on DuckDB, with the same queries; ``store`` (DuckDB, on this
    machine) reads only the files' footers and the staged allocations' totals.

    The executors read the release and write every step's rows as Parquet under
    ``folder/.spark`` (which they must see), as DuckDB keeps temporary tables:

    - the whole --days range is one block: the run rule finds runs across days as well as
      within one, so nothing is carried (``_asi_open`` is empty) and each run comes out
      whole; its rows are numbered by a column ``rowid`` (monotonically_increasing_id);
    - allocations are written into the day of the block that DuckDB's loop closes them in
      (their rejects name that day's folder), GPU pod-hours by their day;
    - this machine reads back only reduced rows: the server-hours (the side table, the
      nodes, their absences and capacities), the GPU runs, which it colours block by block
      as DuckDB's loop does (:class:`_Colouring`), and each block's GPU pod-hours, which it
      joins to their GPUs (:func:`telemetry_rows`); the rejects.
    """
    say = progress or (lambda _m: None)
    release = find_release(paths, days)
    hours = release.hours
    staged = Staged(release.root, folder, trace_start, hours[0], hours[-1])
    work = folder / ".spark"
    pod_files = [f for _k, fs in sorted(release.pods.items()) for f in fs]
    server_files = [f for _k, fs in sorted(release.servers.items()) for f in fs]
    # the schemas, here, from the files' footers (the executors read the pages)
    if pod_files:
        _check_schemas(store, pod_files, _POD_TYPES, asi_trace.POD_REQUIRED)
    _check_schemas(store, server_files, _SERVER_TYPES, asi_trace.SERVER_REQUIRED)
    # DuckDB's blocks (where runs close, how they are coloured) and the pod-hours
    blocks, pod_rows = _blocks(store, release)
    totals = {"pod_rows": 0, "runs": 0, "telemetry": 0, "used": 0.0, "interval": 0.0, "over": 0}
    last_day = blocks[-1][1]

    say(f"{FORMAT}: days {release.days[0]}-{release.days[-1]} on Spark: reading")
    # a shuffle partition per SPARK_PARTITION_ROWS pod-hours at least (a full-density day
    # in local mode's two partitions failed: its tasks could not get memory for the joins)
    engine.at_least_partitions(-(-pod_rows // SPARK_PARTITION_ROWS))
    if pod_files:
        engine.register_rows("_asi_pod_files", pod_files, release.root / POD_TABLE)
        engine.view("_asi_pod_rows", "asi_pod_rows")
        loaded = engine.keep("_asi_day", work / "day", "asi_load_day", row_ids="rowid")
        if loaded < pod_rows:
            rejects = _read(engine.write("asi_pod_rejects", work / "pod-rejects"))
            _reject(staged, rejects, folder / "rejects.parquet")
    else:
        engine.empty_view("_asi_day", "asi_create_empty_day", rowid="BIGINT")
        loaded = 0
    totals["pod_rows"] = loaded
    engine.empty_view("_asi_open", "asi_create_open_runs", rowid="BIGINT")
    say(f"{FORMAT}: runs on Spark")
    _spark_runs(engine, work, "runs")
    if engine.count("SELECT count(*) FROM _asi_runs WHERE repeated"):
        if engine.keep("_asi_repeated", work / "repeated", "asi_mark_repeats"):
            rejects = _read(engine.write("asi_pod_repeats", work / "repeat-rejects"))
            _reject(staged, rejects, folder / "repeats.parquet")
            engine.keep(
                "_asi_day", work / "day-once",
                sql="SELECT * FROM _asi_day WHERE rowid NOT IN (SELECT rid FROM _asi_repeated)",
            )  # fmt: skip
            _spark_runs(engine, work, "runs-once")

    # allocations: each in the day whose block closes it in DuckDB's loop (the first block
    # ending after its last hour, or the last block; an open run has no end_time)
    ends = " ".join(
        f"WHEN end_time <= TIMESTAMP '{trace_start + timedelta(hours=day * 24 + last):%Y-%m-%d %H:%M:%S}' "
        f"THEN {day}"
        for _i, day, _first, last in blocks[:-1]
    )  # fmt: skip
    close_day = f"CASE WHEN end_time IS NULL THEN {last_day} {ends} ELSE {last_day} END"
    params = {
        "trace_start": trace_start, "t_first": staged.t_first, "t_last": staged.t_last,
        "day_end": staged.t_last, "last_day": True,
    }  # fmt: skip
    allocations = _by_day(
        engine.write(
            "asi_closed_allocations", work / "allocations", partition=("_day", close_day), **params
        )
    )
    pod_hours = engine.write("asi_side_pod_hours", work / "pod-hours")
    staged.pod_hours = _move(pod_hours, folder, "pod-hours")

    say(f"{FORMAT}: servers on Spark")
    engine.register_rows("_asi_server_files", server_files, release.root / SERVER_TABLE)
    engine.view("_asi_limits", "asi_limits", **_SERVER_BOUNDS)
    engine.view("_asi_server_rows", "asi_server_rows")
    server_day = _read(engine.write("asi_server_day", work / "server-day"))
    if server_day.height < _file_rows(store, server_files):
        rejects = _read(engine.write("asi_server_rejects", work / "server-rejects"))
        _reject(staged, rejects, folder / "server-rejects.parquet")
    listed = {asi_trace.hour_index(d, h) for d, h in release.servers}
    absences: list[pl.DataFrame] = []
    servers = None
    capacity: dict[int, dict[str, float]] = {}
    if server_day.height:
        servers = take_servers(
            staged, None, server_day, folder / "server-hours.parquet", listed, absences, totals
        )
        by_day = server_day.select("t", "server_id", "gpu_count").with_columns(
            (pl.col("t") // 24).alias("day")
        )
        capacity = {
            int(day[0]): last_gpus(rows.drop("day"))
            for day, rows in by_day.partition_by("day", as_dict=True).items()
        }

    say(f"{FORMAT}: telemetry on Spark{_peak_memory()}")
    runs = _read(engine.write("asi_gpu_runs", work / "gpu-runs"))
    gpu_hours = _by_day(
        engine.write("asi_gpu_hours", work / "gpu-hours", partition=("_day", "CAST(FLOOR(t / 24) AS INT)"))
    )
    holders = _Colouring()
    telemetry: dict[int, list[Path]] = {}
    day_hours = pl.DataFrame()
    for b, (_i, day, first_hour, last_hour) in enumerate(blocks):
        start, day_end = asi_trace.hour_index(day, first_hour), asi_trace.hour_index(day, last_hour)
        if b == 0 or blocks[b - 1][1] != day:
            holders.capacity.update(capacity.get(day, {}))
            day_hours = _read(gpu_hours.get(day, []))
        # the block's runs as DuckDB's loop sees them: those carried into it (holding the
        # last hour of the block before) and those starting in it, up to its last hour
        carried = asi_trace.hour_index(blocks[b - 1][1], blocks[b - 1][3]) if b else start
        block_runs = runs.filter(
            (pl.col("t_start") <= day_end) & (pl.col("t_last") >= carried)
        ).with_columns(pl.min_horizontal("t_last", pl.lit(day_end)).alias("t_last"))
        where = holders.place_day(block_runs, day_end)
        hours_of = day_hours.filter(pl.col("t").is_between(start, day_end)) if day_hours.height else day_hours
        path = folder / f"telemetry-{day}-{first_hour:02d}.parquet"
        written = _write_telemetry(path, hours_of, where, trace_start) if hours_of.height else 0
        totals["telemetry"] += written
        if written:
            telemetry.setdefault(day, []).append(path)

    for day in release.days:  # as DuckDB's loop stages them: a day's allocations, telemetry
        day_dir = str(release.root / POD_TABLE / f"day={day}")
        files = _move(allocations.get(day, []), folder, f"allocations-{day}")
        if files and count_allocations(store, staged, [Path(f) for f in files], totals):
            staged.sources.append(_staged_source([Path(f) for f in files], "allocations", day_dir))
        if day in telemetry:
            staged.sources.append(_staged_source(telemetry[day], "telemetry", day_dir))
    shutil.rmtree(work, ignore_errors=True)
    return finish(staged, release, servers, absences, totals)


SPARK_PARTITION_ROWS = 1_000_000
"""Pod-hours per shuffle partition, at least, of the reduction on Spark."""


def _spark_runs(engine: Any, work: Path, name: str) -> None:
    """Spark's _asi_runs from _asi_day: the view _asi_rows (asi_mark_runs, read anew: a view
    holds the _asi_day it was made on), then the run rule's two queries, each kept."""
    engine.view("_asi_rows", "asi_mark_runs")
    engine.keep("_asi_keyed_runs", work / f"keyed-{name}", "asi_runs")
    engine.keep("_asi_runs", work / name, "asi_run_strings")


def _read(files: Sequence[Path]) -> pl.DataFrame:
    """The rows of Parquet part files the executors wrote (empty without any)."""
    files = [f for f in files if pq.read_metadata(f).num_rows]
    return pl.read_parquet(files) if files else pl.DataFrame()


# the release's numeric columns: a reject quoting one quotes a number
_NUMERIC = [k for types in (_POD_TYPES, _SERVER_TYPES) for k, kind in types.items() if kind is _NUMBER]


def _spelled_as_duckdb(rejects: pl.DataFrame) -> pl.DataFrame:
    """``rejects``, the numbers they quote (``value`` and the reason's start) spelled as
    DuckDB and Python spell them: Spark casts a double to text in Java's form (``NaN``,
    ``Infinity``, ``1.0E20``, ``1.0E7``), DuckDB as ``repr`` does (``nan``, ``inf``,
    ``1e+20``, ``10000000.0``; unchanged here). Both engines run one query; this keeps
    their rolled folders' rejects equal.

    >>> frame = pl.DataFrame({"column": ["gpu_count", "server_id"], "value": ["1.0E7", "1.0E7"],
    ...                       "reason": ["1.0E7 is not a whole number", "a second row"]})
    >>> _spelled_as_duckdb(frame).rows()
    [('gpu_count', '10000000.0', '10000000.0 is not a whole number'), ('server_id', '1.0E7', 'a second row')]
    """
    if rejects.is_empty():
        return rejects
    numeric = pl.col("column").is_in(_NUMERIC) & pl.col("value").is_not_null()
    spellings = {}
    for text in rejects.filter(numeric)["value"].unique().to_list():
        try:
            spellings[text] = repr(float(text))
        except ValueError:  # not a number's text: quoted as it is
            pass
    spelled = pl.col("value").replace_strict(spellings, default=pl.col("value"))
    quoted = numeric & pl.col("reason").str.starts_with(pl.col("value"))
    return rejects.with_columns(
        reason=pl.when(quoted)
        .then(spelled + pl.col("reason").str.slice(pl.col("value").str.len_chars()))
        .otherwise(pl.col("reason")),
    ).with_columns(value=pl.when(numeric).then(spelled).otherwise(pl.col("value")))


def _by_day(files: Sequence[Path]) -> dict[int, list[Path]]:
    """Part files written by day (``_day=D/part-*``), by day."""
    days: dict[int, list[Path]] = {}
    for f in files:
        key, _, value = f.parent.name.partition("=")
        if key == "_day" and value.lstrip("-").isdigit():
            days.setdefault(int(value), []).append(f)
    return days


def _move(files: Sequence[Path], folder: Path, stem: str) -> list[str]:
    """The part files that hold rows, moved into ``folder`` as ``<stem>-<k>.parquet``."""
    moved: list[str] = []
    for f in files:
        if pq.read_metadata(f).num_rows:
            target = folder / f"{stem}-{len(moved):05d}.parquet"
            os.replace(f, target)
            moved.append(str(target))
    return moved


TELEMETRY_CHUNKS = 8  # the day's GPU-hours are joined to their GPUs in this many node groups


def _write_telemetry(
    path: Path, gpu_hours: pl.DataFrame, where: pl.DataFrame, trace_start: datetime
) -> int:
    """Write the day's telemetry, one node group at a time (bounded memory); rows written."""
    if gpu_hours.height == 0 or where.height == 0:
        return 0
    group = pl.col("node_id").hash(seed=7) % TELEMETRY_CHUNKS
    written = 0
    writer: pq.ParquetWriter | None = None
    try:
        for k in range(TELEMETRY_CHUNKS):
            chunk = telemetry_rows(
                gpu_hours.filter(group == k), where.filter(group == k), trace_start
            )
            if chunk.height == 0:
                continue
            table = chunk.to_arrow()
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
            written += chunk.height
    finally:
        if writer is not None:
            writer.close()
    return written


BLOCK_ROWS = 10_000_000
"""Pod-hours reduced at a time: a day of the full release (29 M rows) is read in blocks
of whole hours of about this many rows (8 hours), whose working set stays near DuckDB's
memory limit (a whole day spilled several GB to disk); runs going at a block's last hour
carry into the next block as they do across days. Every block re-reads the ~1.2 M runs
carried into it, so fewer blocks cost less CPU: 3 blocks of 8 hours take ~9% less CPU
per full day than 6 of 4 hours, for ~50 MiB more peak memory (12 hours: 1-2% less
again, for ~300 MiB more)."""


def _file_rows(store: Store, files: Sequence[Path | str]) -> int:
    """The rows the Parquet ``files`` hold, from their footers; fails naming their folder."""
    if not files:
        return 0
    try:
        return int(store.scalar(
            "SELECT COALESCE(sum(num_rows), 0) FROM parquet_file_metadata($files)",
            {"files": [str(f) for f in files]},
        ))  # fmt: skip
    except QueryError as exc:
        raise InputError(str(Path(files[0]).parent.parent), f"cannot read: {exc.message}") from exc


def _reject(staged: Staged, rejects: pl.DataFrame, path: Path) -> None:
    """Stage ``rejects`` ("table", file, row, column, value, reason) for the transaction,
    the numbers they quote spelled as DuckDB spells them whichever engine found them
    (:func:`_spelled_as_duckdb`)."""
    if rejects.height == 0:
        return
    _spelled_as_duckdb(rejects).write_parquet(path)
    staged.rejects.append(str(path))
    for table, count in rejects.group_by("table").len().iter_rows():
        staged.rejected[table] = staged.rejected.get(table, 0) + count


def _blocks(store: Store, release: Release) -> tuple[list[tuple[int, int, int, int]], int]:
    """(day's position, day, first hour, last hour) of each block, in order (blocks
    without a partition are left out), and the pod-hours the release's files hold, from
    their footers (read once, here)."""
    blocks = []
    total = 0
    for i, day in enumerate(release.days):
        files = [f for (d, _h), fs in release.pods.items() if d == day for f in fs]
        rows = _file_rows(store, files)
        total += rows
        hours = {h for d, h in list(release.pods) + list(release.servers) if d == day}
        span = 24 if rows <= BLOCK_ROWS else max(1, 24 * BLOCK_ROWS // rows)
        for first in range(0, 24, span):
            last = min(first + span, 24) - 1
            if any(first <= h <= last for h in hours):
                blocks.append((i, day, first, last))
    return blocks, total


def _day_capacity(store: Store, release: Release, day: int) -> dict[str, float]:
    """Each server's GPU count in its last hour of ``day`` (none without a value)."""
    files = [str(f) for (d, _h), fs in sorted(release.servers.items()) if d == day for f in fs]
    if not files:
        return {}
    _check_schemas(store, [Path(f) for f in files], _SERVER_TYPES, asi_trace.SERVER_REQUIRED)
    try:
        register_rows(store, "server", files)
        rows = store.sql(load_sql("asi_server_gpus"))
    except QueryError as exc:
        raise InputError(str(Path(files[0]).parent.parent), f"cannot read: {exc.message}") from exc
    return last_gpus(rows)


def last_gpus(rows: pl.DataFrame) -> dict[str, float]:
    """Each server's GPU count in its last hour of ``rows`` (t, server_id, gpu_count; the
    server-hours the mapping takes), none without a value: the colouring's capacities."""
    last = rows.sort("t").group_by("server_id").agg(pl.col("gpu_count").last())
    gpus_now = dict(last.iter_rows())
    return {k: v for k, v in gpus_now.items() if v is not None}


_READ_OPTIONS = (
    "hive_partitioning = true, hive_types_autocast = false, union_by_name = true, "
    "filename = true, file_row_number = true"
)


def register_rows(store: Store, kind: str, files: Sequence[Path | str]) -> None:
    """On DuckDB, the release's ``kind`` ("pod" or "server") table in ``files`` as the views
    ``_asi_<kind>_files`` (the files' rows with their file name, row number and partition
    keys: DuckDB reads the name and number only for a query that selects them) and
    ``_asi_<kind>_rows`` (asi_pod_rows / asi_server_rows, which the queries read; Spark
    registers the same two views in :func:`stage_release_spark`)."""
    listed = ", ".join(quote_literal(str(f)) for f in files)
    store.run(
        f"CREATE OR REPLACE TEMP VIEW _asi_{kind}_files AS "
        f"SELECT * FROM read_parquet([{listed}], {_READ_OPTIONS})"
    )
    rows = load_sql("asi_pod_rows") if kind == "pod" else load_sql("asi_server_rows")
    store.run(f"CREATE OR REPLACE TEMP VIEW _asi_{kind}_rows AS\n{rows}")


def _copy(
    store: Store, sql: str, params: Mapping[str, object], path: Path, ordered: bool = False
) -> None:
    """Write a query's rows to the Parquet file ``path`` (in the query's order if ``ordered``)."""
    if ordered:
        store.run("SET preserve_insertion_order = true")
    try:
        store.copy_to_parquet(sql, path, params)
    finally:
        if ordered:
            store.run("SET preserve_insertion_order = false")


def _day_runs(store: Store, where: Path, staged: Staged, rejects: Path) -> None:
    """The block's runs (table _asi_runs): the run rule (asi_runs, the portable SQL both
    engines run) over the block's rows and the carried runs (_asi_rows, asi_mark_runs),
    then the runs' strings (asi_run_strings).

    A pod-hour given twice (the same run keys at the same hour: a copied part file) counts
    once: a run that holds an hour twice is ``repeated``, and only then are the repeats
    found (asi_mark_repeats), staged as rejects (the block's files, _asi_pod_rows, read again
    for their file and row) and removed, and the runs found again.
    """
    _find_runs(store, where)
    if store.scalar("SELECT count(*) FROM _asi_runs WHERE repeated"):
        store.run("CREATE OR REPLACE TEMP TABLE _asi_repeated AS\n" + load_sql("asi_mark_repeats"))
        if store.scalar("SELECT count(*) FROM _asi_repeated"):
            try:
                _reject(staged, store.sql(load_sql("asi_pod_repeats")), rejects)
            except QueryError as exc:
                raise InputError(str(where), f"cannot read: {exc.message}") from exc
            store.run("DELETE FROM _asi_day WHERE rowid IN (SELECT rid FROM _asi_repeated)")
            _find_runs(store, where)
        store.run("DROP TABLE _asi_repeated")


def _find_runs(store: Store, where: Path) -> None:
    """_asi_runs from _asi_rows: the two portable queries of the run rule, kept as tables."""
    keyed, strings = load_sql("asi_runs"), load_sql("asi_run_strings")
    _run(store, f"CREATE OR REPLACE TEMP TABLE _asi_keyed_runs AS\n{keyed}", {}, where)
    _run(store, f"CREATE OR REPLACE TEMP TABLE _asi_runs AS\n{strings}", {}, where)
    store.run("DROP TABLE _asi_keyed_runs")


def _peak_memory() -> str:
    """`` (peak memory 2.1 GiB)``: the process's peak RSS so far, for the progress; empty
    where the platform does not tell."""
    try:
        import resource
    except ImportError:  # not on Windows
        return ""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    gib = peak / 2**30 if sys.platform == "darwin" else peak / 2**20
    return f" (peak memory {gib:.1f} GiB)"


def _run(store: Store, sql: str, params: Mapping[str, object], where: Path) -> None:
    try:
        store.run(sql, params)
    except QueryError as exc:
        raise InputError(str(where), f"cannot read: {exc.message}") from exc


def _bucket_of(column: str, frame: pl.DataFrame) -> pl.Expr:
    """``gpu_model``: the model bucket of each spelling (mapped once per distinct spelling)."""
    spellings = frame[column].unique().to_list()
    mapping = {raw: asi_bucket(raw) for raw in spellings if raw is not None}
    return pl.col(column).replace_strict(mapping, default=None, return_dtype=pl.String).alias(
        "gpu_model"
    )


def _iso(trace_start: datetime, t: int) -> str:
    return (trace_start + timedelta(hours=t)).strftime("%Y-%m-%dT%H:%MZ")


def _staged_source(path: Path | list[Path], table: str, reported: str) -> Source:
    """A staged file (or the files of one day's blocks) as a source; rejects name
    ``reported`` (the release folder).

    A staged file with a ``_row`` column (allocations: the run's first hour t)
    numbers its rows by it; the others by their position in their file.
    """
    paths = path if isinstance(path, list) else [path]
    select = "SELECT * FROM read_parquet($path)"
    param = {"path": [str(p) for p in paths]}
    if "_row" in pl.read_parquet_schema(paths[0]):
        return Source(reported, table, select, select, param)
    numbered = (
        "SELECT * EXCLUDE (file_row_number), file_row_number + 1 AS _row "
        "FROM read_parquet($path, file_row_number = true)"
    )
    return Source(reported, table, select, numbered, param)


def _merge_servers(known: pl.DataFrame | None, day: pl.DataFrame) -> pl.DataFrame:
    """Each server's last observed facts, first and last hour, and attribute changes."""
    facts = ["cluster_id", "asw_id", "gpu_spec_public", "gpu_count", "cpu_capacity_cores"]
    day = day.sort("t")
    per = day.group_by("server_id").agg(
        pl.col("t").min().alias("first_t"),
        pl.col("t").max().alias("last_t"),
        *[pl.col(c).last() for c in facts],
        *[pl.col(c).first().alias(f"first_{c}") for c in facts],
        (pl.struct(facts).n_unique() - 1).alias("changes"),
    )
    if known is None:
        return per.drop([f"first_{c}" for c in facts])
    joined = known.join(per, on="server_id", how="full", coalesce=True, suffix="_new")
    differs = pl.any_horizontal(
        *[pl.col(c).ne_missing(pl.col(f"first_{c}")) for c in facts]
    ) & pl.col("first_t_new").is_not_null() & pl.col("first_t").is_not_null()
    return joined.select(
        "server_id",
        pl.min_horizontal("first_t", "first_t_new").alias("first_t"),
        pl.max_horizontal("last_t", "last_t_new").alias("last_t"),
        *[
            pl.when(pl.col("last_t_new").is_not_null())
            .then(pl.col(f"{c}_new"))
            .otherwise(pl.col(c))
            .alias(c)
            for c in facts
        ],
        (
            pl.col("changes").fill_null(0)
            + pl.col("changes_new").fill_null(0)
            + differs.cast(pl.Int64)
        ).alias("changes"),
    )


ABSENT = "absent from server_hourly"
"""The reason of a health interval the release's server table implies."""


def _absences(known: pl.DataFrame | None, day: pl.DataFrame, listed: set[int]) -> pl.DataFrame:
    """server_id, from_t, to_t: the hours [from_t, to_t) a server missed between two
    hours it was listed in (the block's, or its last before the block), counted only
    where every missed hour has a server file (a missing partition is no absence)."""
    hours = day.select("server_id", "t").unique()
    if known is not None:
        hours = pl.concat(
            [known.select("server_id", pl.col("last_t").alias("t")).join(
                hours.select("server_id").unique(), on="server_id", how="semi"
            ), hours]
        )  # fmt: skip
    gaps = (
        hours.unique()
        .sort("server_id", "t")
        .with_columns(pl.col("t").shift(1).over("server_id").alias("prev"))
        .filter(pl.col("t") - pl.col("prev") > 1)
        .select("server_id", (pl.col("prev") + 1).alias("from_t"), pl.col("t").alias("to_t"))
    )
    keep = [all(t in listed for t in range(a, b)) for a, b in zip(gaps["from_t"], gaps["to_t"])]
    return gaps.filter(pl.Series(keep, dtype=pl.Boolean))


def _node_events(
    absences: list[pl.DataFrame], servers: pl.DataFrame, t_last: int, trace_start: datetime
) -> pl.DataFrame:
    """Health intervals the server table implies: ``down`` while a server was absent
    between two hours it was listed in, and from the end of its last hour on (open) for a
    server gone before the last hour read."""
    gone = servers.filter(pl.col("last_t") < t_last).select(
        "server_id", (pl.col("last_t") + 1).alias("from_t"), pl.lit(None, dtype=pl.Int64).alias("to_t")
    )
    frames = [a.cast({"from_t": pl.Int64, "to_t": pl.Int64}) for a in absences if a.height]
    every = pl.concat([*frames, gone.cast({"from_t": pl.Int64, "to_t": pl.Int64})])
    start = pl.lit(trace_start)
    return every.sort("server_id", "from_t").select(
        pl.col("server_id").alias("node_id"),
        pl.lit(None, dtype=pl.Int64).alias("gpu_index"),
        (start + pl.duration(hours=pl.col("from_t"))).alias("start_time"),
        (start + pl.duration(hours=pl.col("to_t"))).alias("end_time"),
        pl.lit("down").alias("state"),
        pl.lit(ABSENT).alias("reason"),
        pl.lit(f"{FORMAT}:server_hourly").alias("source"),
    )


def _nodes(servers: pl.DataFrame, t_last: int, trace_start: datetime) -> pl.DataFrame:
    start = pl.lit(trace_start)
    return (
        servers.sort("server_id")
        .with_columns(_bucket_of("gpu_spec_public", servers).alias("model"))
        .select(
            pl.col("server_id").alias("node_id"),
            pl.col("model").alias("gpu_model"),
            pl.col("gpu_count").fill_null(0.0).alias("gpus"),
            pl.col("cpu_capacity_cores").alias("cpus"),
            pl.lit(None, dtype=pl.Float64).alias("memory_gib"),
            pl.when(pl.col("asw_id").is_not_null())
            .then(pl.format("{}/{}", pl.col("cluster_id").fill_null(""), "asw_id"))
            .alias("switch_id"),
            pl.when(pl.col("last_t") == t_last)
            .then(pl.lit("healthy"))
            .otherwise(pl.lit("down"))
            .alias("health"),
            pl.when(pl.col("gpu_spec_public") != pl.col("model"))
            .then(pl.col("gpu_spec_public"))
            .alias("gpu_spec_public"),
            "cluster_id",
            "asw_id",
            (start + pl.duration(hours=pl.col("first_t"))).alias("first_seen"),
            (start + pl.duration(hours=pl.col("last_t"))).alias("last_seen"),
            pl.lit("server_hourly").alias("source"),
        )
    )


class _Colouring:
    """GPU indices per node, kept across days (synthesised GPU indices: see
    docs/formats/alibaba-gpu-v2026.md).

    Allocations are placed at their start in order of (GPUs descending,
    alloc_id), after the allocations ending then are released: whole GPUs take
    the lowest free indices; a fractional part goes first-fit into a GPU already
    shared, else the lowest free one. When too few are free (standby lending:
    LP work on a sleeping container's GPUs), indices held only by sleepable
    allocations are borrowed, then any others, lowest load first.
    """

    def __init__(self) -> None:
        self.capacity: dict[str, float] = {}
        self.load: dict[str, list[float]] = {}
        self.holders: dict[str, list[list[str]]] = {}
        self.sleepy: dict[str, bool] = {}
        self.held: dict[str, tuple[str, list[tuple[int, float]]]] = {}
        self.placed: dict[str, list[tuple[int, float]]] = {}  # the day's placements

    def _release(self, alloc_id: str) -> None:
        node, places = self.held.pop(alloc_id)
        for index, share in places:
            self.load[node][index] -= share
            self.holders[node][index].remove(alloc_id)
        self.sleepy.pop(alloc_id, None)

    def _place(self, node: str, alloc_id: str, gpus: float, sleepable: bool) -> None:
        cap = self.capacity.get(node)
        if cap is None or not math.isfinite(cap) or gpus > cap + _EPS or cap < 1:
            return  # unknown node or above the node: the allocation is a reject
        n = int(cap)
        load = self.load.setdefault(node, [0.0] * n)
        holders = self.holders.setdefault(node, [[] for _ in range(n)])
        if len(load) < n:
            load.extend([0.0] * (n - len(load)))
            holders.extend([] for _ in range(n - len(holders)))
        whole = int(math.floor(gpus + _EPS))
        frac = gpus - whole if gpus - whole > _EPS else 0.0
        chosen: list[int] = []

        def pick(count: int) -> None:
            free = [i for i in range(n) if load[i] <= _EPS and i not in chosen]
            got = free[:count]
            if len(got) < count:
                lent = [
                    i
                    for i in range(n)
                    if i not in chosen
                    and i not in got
                    and holders[i]
                    and all(self.sleepy.get(a, False) for a in holders[i])
                ]
                got += lent[: count - len(got)]
            if len(got) < count:
                rest = sorted(
                    (i for i in range(n) if i not in chosen and i not in got),
                    key=lambda i: (load[i], i),
                )
                got += rest[: count - len(got)]
            chosen.extend(got)

        pick(whole)
        places = [(i, 1.0) for i in chosen]
        if frac:
            shared = [
                i
                for i in range(n)
                if i not in chosen and _EPS < load[i] < 1 - _EPS and load[i] + frac <= 1 + _EPS
            ]
            if shared:
                chosen.append(shared[0])
            else:
                pick(1)
            places.append((chosen[-1], frac))
        for index, share in places:
            load[index] += share
            holders[index].append(alloc_id)
        self.held[alloc_id] = (node, places)
        self.sleepy[alloc_id] = sleepable
        self.placed[alloc_id] = places

    def place_day(self, runs: pl.DataFrame, day_end: int) -> pl.DataFrame:
        """Place the day's runs in time order; where each run of the day sits.

        Returns node_id, alloc_id, gpu_index, share, sleepable, gpus: one row per GPU a
        run of the day holds (whole GPUs share 1).
        """
        self.placed = {}
        events: dict[int, tuple[list[str], list[tuple[str, str, float, bool]]]] = {}
        gpus_of: dict[str, float] = {}
        columns: dict[str, list[object]] = {
            k: [] for k in ("node_id", "alloc_id", "gpu_index", "share", "sleepable", "gpus")
        }

        def keep(alloc_id: str) -> None:
            node, places = self.held[alloc_id]
            for index, share in places:
                columns["node_id"].append(node)
                columns["alloc_id"].append(alloc_id)
                columns["gpu_index"].append(index)
                columns["share"].append(share)
                columns["sleepable"].append(self.sleepy[alloc_id])
                columns["gpus"].append(gpus_of[alloc_id])

        for node, alloc_id, t_start, t_last, gpus, sleepable in runs.iter_rows():
            gpus_of[alloc_id] = gpus
            if alloc_id not in self.held:
                events.setdefault(t_start, ([], []))[1].append((node, alloc_id, gpus, sleepable))
            if t_last < day_end:
                events.setdefault(t_last + 1, ([], []))[0].append(alloc_id)
        # runs held from an earlier day that no longer appear ended at the day's start
        for alloc_id in [a for a in self.held if a not in gpus_of]:
            self._release(alloc_id)
        for t in sorted(events):
            ending, starting = events[t]
            for alloc_id in ending:
                if alloc_id in self.held and alloc_id in gpus_of:
                    keep(alloc_id)  # before the release: its telemetry rows are before t
                    self._release(alloc_id)
            for node, alloc_id, gpus, sleepable in starting:
                self._place(node, alloc_id, gpus, sleepable)
        for alloc_id in self.held:
            if alloc_id in gpus_of:
                keep(alloc_id)
        return pl.DataFrame(columns, schema=_WHERE_SCHEMA)

    def telemetry(
        self, runs: pl.DataFrame, gpu_hours: pl.DataFrame, day_end: int, trace_start: datetime
    ) -> pl.DataFrame:
        """Place the day's runs in time order; the day's telemetry rows."""
        return telemetry_rows(gpu_hours, self.place_day(runs, day_end), trace_start)


_WHERE_SCHEMA = {
    "node_id": pl.String,
    "alloc_id": pl.String,
    "gpu_index": pl.Int64,
    "share": pl.Float64,
    "sleepable": pl.Boolean,
    "gpus": pl.Float64,
}


def telemetry_rows(
    gpu_hours: pl.DataFrame, where: pl.DataFrame, trace_start: datetime
) -> pl.DataFrame:
    """One row per GPU and hour from the pod-hours' SM (node_id, t, alloc_id, ratio)."""
    if where.height == 0 or gpu_hours.height == 0:
        return _EMPTY_TELEMETRY
    rows = gpu_hours.join(where.drop("node_id"), on="alloc_id", how="inner").with_columns(
        pl.len().over("node_id", "gpu_index", "t").alias("n")
    )
    alone = rows.filter(pl.col("n") == 1).select(
        "node_id", "gpu_index", "t", pl.col("ratio").alias("sm_active"), "alloc_id"
    )
    # a GPU several allocations hold in one hour: one row, sm = min(1, sum of share x ratio),
    # attributed to the largest non-sleepable holder
    shared = (
        rows.filter(pl.col("n") > 1)
        .sort(["sleepable", "gpus", "alloc_id"], descending=[False, True, False])
        .group_by("node_id", "gpu_index", "t", maintain_order=True)
        .agg(
            pl.min_horizontal(pl.lit(1.0), (pl.col("share") * pl.col("ratio")).sum()).alias(
                "sm_active"
            ),
            pl.col("alloc_id").first(),
        )
    )
    return pl.concat([alone, shared], how="vertical").select(
        (pl.lit(trace_start) + pl.duration(hours=pl.col("t"))).alias("ts"),
        "node_id",
        "gpu_index",
        "sm_active",
        pl.lit(None, dtype=pl.Float64).alias("mem_used"),
        "alloc_id",
        pl.lit(3600, dtype=pl.Int64).alias("interval_s"),
    )


_EMPTY_TELEMETRY = pl.DataFrame(
    schema={
        "ts": pl.Datetime("us"),
        "node_id": pl.String,
        "gpu_index": pl.Int64,
        "sm_active": pl.Float64,
        "mem_used": pl.Float64,
        "alloc_id": pl.String,
        "interval_s": pl.Int64,
    }
)
