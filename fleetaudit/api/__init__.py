"""The library surface the command line calls.

Each function opens the store, reads what it needs as polars frames, hands
them to the pure algorithm modules and returns a frozen result. Nothing here
prints; :mod:`fleetaudit.outputs.console` renders results.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from fleetaudit.core.errors import UsageError
from fleetaudit.core.fsutil import write_output
from fleetaudit.core.options import DEFAULT_LOCK_TIMEOUT, REJECTS_LIMIT
from fleetaudit.core.resources import resource_dir
from fleetaudit.core.sanitize import csv_safe
from fleetaudit.core.times import iso, to_utc
from fleetaudit.model import occupancy
from fleetaudit.model.capacity import Health, health_of, no_health, whole_window_health
from fleetaudit.model.store import Store, open_store

if TYPE_CHECKING:  # imported where used: a read-only command loads no ingest or generator
    from fleetaudit.inputs import generate as generator
    from fleetaudit.inputs import generate_slurm
    from fleetaudit.inputs.generate_asi import AsiReleaseOptions, AsiReleaseResult
    from fleetaudit.inputs.ingest import IngestOptions, IngestResult



@dataclass(frozen=True)
class StoreOptions:
    """Where the store is and how long to wait for another writer's lock."""

    db: Path
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    # told once, after a second of waiting, that another process holds the lock
    on_wait: Callable[[str], None] | None = field(default=None, compare=False)


@contextmanager
def writing(options: StoreOptions) -> Iterator[Store]:
    """The store opened for writing; a store this call created is removed if the call fails."""
    store = open_store(options.db, lock_timeout=options.lock_timeout, on_wait=options.on_wait)
    try:
        yield store
    except BaseException:
        store.close()
        if store.created:
            _remove_store_files(options.db)
        raise
    store.close()


@contextmanager
def reading(options: StoreOptions, *, checked: bool = True) -> Iterator[Store]:
    """The store opened for reading (it must exist). ``checked``: fail, naming the table,
    row and column, where an input table holds a value that ingest refuses today (a NaN
    an older version stored: :meth:`Store.check_finite`); a command that reads only the
    store's bookkeeping (its rejects, its ingests) need not."""
    store = open_store(
        options.db, read_only=True, lock_timeout=options.lock_timeout, on_wait=options.on_wait
    )
    try:
        if checked:
            store.check_finite()
        yield store
    finally:
        store.close()


def _remove_store_files(db: Path) -> None:
    for path in (db, db.with_name(db.name + ".wal")):
        if path.exists():
            os.remove(path)


# -- ingest ----------------------------------------------------------------------------


def ingest_paths(
    options: StoreOptions,
    paths: Sequence[Path],
    ingest_options: IngestOptions | None = None,
    progress: Callable[[str], None] | None = None,
) -> IngestResult:
    """Ingest ``paths`` into the store in one transaction (see :mod:`fleetaudit.inputs.ingest`),
    with the exports the format's collector fetched first where ``ingest_options.collect`` asks
    for them (fetched before the store is opened: a long fetch holds no lock)."""
    from fleetaudit.inputs.ingest import IngestOptions, collected, ingest

    ingest_options = ingest_options or IngestOptions()
    with collected(ingest_options, progress) as fetched, writing(options) as store:
        return ingest(store, [*paths, *fetched], ingest_options, progress)


# -- what the store holds --------------------------------------------------------------


@dataclass(frozen=True)
class StoreSummary:
    """What a store holds: rows per table, capacity per model, the export time."""

    db: Path
    tables: pl.DataFrame  # table, rows, first, last
    models: pl.DataFrame  # gpu_model, nodes, gpus, healthy_gpus, domains
    export_time: datetime | None
    export_time_from: str | None  # where the export time came from
    queued: int
    scenarios: pl.DataFrame  # name, created_at, command, at, base, options
    domains: int  # switch domains of the whole fleet (one holding two models counts once)


def capacity_by_model(
    nodes: pl.DataFrame, health: Health | None = None, at: datetime | None = None
) -> tuple[pl.DataFrame, int]:
    """Installed capacity per GPU model (nodes, GPUs, healthy GPUs, switch domains), most
    GPUs first, and the fleet's switch domains: health and the domain key are the
    capacity model's (a null health is healthy; a node without a switch is a domain by
    itself, never one with a switch of its name). With ``health`` and ``at``, healthy
    GPUs leave out those the health intervals put out of service at ``at``."""
    from fleetaudit.core.times import epoch_us
    from fleetaudit.model.capacity import SWITCH_DOMAIN, gpus_out_at, node_index

    index = node_index(nodes)
    out = pl.lit(0, dtype=pl.Int64)
    if health is not None and at is not None and not health.empty:
        index = index.join(
            gpus_out_at(health, epoch_us(at)).select("node_id", "gpus_out"),
            on="node_id",
            how="left",
        )
        out = pl.min_horizontal(pl.col("gpus_out").fill_null(0), "gpus")
    models = (
        index.group_by("gpu_model")
        .agg(
            pl.len().cast(pl.Int64).alias("nodes"),
            pl.col("gpus").sum().alias("gpus"),
            (pl.col("gpus") - out).filter(pl.col("usable")).sum().alias("healthy_gpus"),
            pl.col(SWITCH_DOMAIN).n_unique().cast(pl.Int64).alias("domains"),
        )
        .sort(["gpus", "gpu_model"], descending=[True, False])
    )
    return models, index[SWITCH_DOMAIN].n_unique()


def summarize(options: StoreOptions) -> StoreSummary:
    """Summarise the store at ``options.db``."""
    with reading(options) as store:
        at, how = export_time_of(store)
        queued = 0 if at is None else store.query("queued_requests_at", at=at).height
        nodes, health = store.query("nodes"), None
        if at is not None:
            nodes, health = load_health(store, nodes, at, at + timedelta(microseconds=1))
        models, domains = capacity_by_model(nodes, health, at)
        return StoreSummary(
            db=options.db,
            tables=store.query("store_tables"),
            models=models,
            export_time=at,
            export_time_from=how,
            queued=queued,
            scenarios=store.query("scenario_names"),
            domains=domains,
        )


@dataclass(frozen=True)
class RejectsResult:
    """The rows one ingest call rejected (``fleetaudit rejects``)."""

    db: Path
    ingest_id: int | None  # None: the store has had no ingest
    total: int  # rejects of that ingest
    rejects: pl.DataFrame  # ingest_id, file, table, row, column, value, reason (at most limit)


def list_rejects(
    options: StoreOptions, ingest_id: int | None = None, limit: int | None = REJECTS_LIMIT
) -> RejectsResult:
    """The rejects of ingest call ``ingest_id`` (default: the newest), at most ``limit``."""
    if limit is not None and limit < 0:
        raise UsageError("--limit: must be 0 (all) or more")
    with reading(options, checked=False) as store:
        counts = store.query("rejects_count", ingest_id=ingest_id).row(0, named=True)
        if ingest_id is not None and not counts["found"]:
            raise UsageError(
                f"--ingest: {options.db} has no ingest #{ingest_id} "
                f"(the newest is #{counts['latest'] or 0})"
            )
        chosen = ingest_id if ingest_id is not None else counts["latest"]
        frame = store.query("rejects_of_ingest", ingest_id=chosen, limit=limit or None)
    return RejectsResult(
        db=options.db,
        ingest_id=None if chosen is None else int(chosen),
        total=int(counts["total"]),
        rejects=frame,
    )


def export_time(store: Store, scenario: str | None = None) -> datetime | None:
    """The instant the data was exported (:func:`export_time_of`), or None for an empty store."""
    return export_time_of(store, scenario)[0]


def export_time_of(
    store: Store, scenario: str | None = None
) -> tuple[datetime | None, str | None]:
    """The export time and where it came from.

    The newest of: the instants the exports said they were taken at (``exports``: sdiag,
    a running job's elapsed time, ``--export-time``), the Kubernetes snapshot times, and
    the newest time in the rows of the ingest calls whose exports said nothing (SPEC §2:
    the latest timestamp in the data). A row's time after its own export's time lies in
    that export's future and is never the export time; an eligible time is no event.
    """
    candidates: list[tuple[datetime, str]] = []
    stamp = _stamp(store)
    if stamp is not None:
        where = "" if stamp["file"] == "--export-time" else f": {stamp['file']}"
        candidates.append(
            (to_utc(stamp["at"]), f"{stamp['how']}{where}, ingest #{stamp['ingest_id']}")
        )
        value = store.query("export_time_unstamped")["at"][0]
    else:
        value = store.query("export_time", scenario=scenario)["at"][0]
    if value is not None:
        candidates.append((to_utc(value), "the newest start, end, submit or sample in the data"))
    if "snapshot_time" in store.column_types("nodes"):
        # a snapshot is an export of its own moment, later than its last event
        snapshot = store.query("snapshot_export_time")["at"][0]
        if snapshot is not None:
            candidates.append((to_utc(snapshot), "the newest Kubernetes snapshot time"))
    if not candidates:
        return None, None
    # on a tie the export's own word is the better source
    at, how = max(candidates, key=lambda c: c[0])
    return at, how


def _stamp(store: Store) -> dict[str, Any] | None:
    """The newest row of ``exports`` (a store older than the table has none)."""
    if "exports" not in store.table_names():
        return None
    stamp = store.query("newest_export_stamp")
    return stamp.row(0, named=True) if stamp.height else None


def _span(value: timedelta) -> str:
    hours = value.total_seconds() / 3600
    return f"{hours / 24:.1f} days" if hours >= 48 else f"{hours:.1f} h"


@dataclass(frozen=True)
class DataSpan:
    """The first and last instant of the data (allocations of the state read, requests,
    telemetry; the export time too, which a snapshot sets after its last event), and
    whether the state holds any allocation."""

    first: datetime | None
    last: datetime | None
    allocations: int

    def text(self) -> str:
        return f"the data runs from {iso(self.first)} to {iso(self.last)}"


def data_span(store: Store, scenario: str | None = None) -> DataSpan:
    """What the data covers (:class:`DataSpan`)."""
    span = store.query("data_span", scenario=scenario).row(0, named=True)
    if span["first"] is None:
        return DataSpan(None, None, int(span["allocations"] or 0))
    last = to_utc(span["last"])
    exported = export_time(store, scenario)
    return DataSpan(
        to_utc(span["first"]),
        last if exported is None else max(last, exported),
        int(span["allocations"] or 0),
    )


@dataclass(frozen=True)
class Window:
    """A window [start, end) as a command resolved it, and how it covers the data.

    ``shortened_from``: the default length, when the window is shorter because the data
    begins later (None: not shortened). ``cover``: one line on a window that is longer
    than the data or reaches beyond it (None: within the data)."""

    start: datetime
    end: datetime
    span: DataSpan
    shortened_from: timedelta | None = None
    cover: str | None = None

    @property
    def length(self) -> timedelta:
        return self.end - self.start

    def headline(self) -> str | None:
        """What a command's title says about the window beside its bounds (None: nothing)."""
        if self.shortened_from is not None:
            return (
                f"shortened to the data, which begins {iso(self.span.first)}: "
                f"{_span(self.length)}, not the default {_span(self.shortened_from)}"
            )
        return self.cover

    def as_json(self) -> dict[str, Any]:
        """The window's ``data`` and ``shortened_from_s`` and ``note`` keys."""
        return {
            "data": {"start": iso(self.span.first), "end": iso(self.span.last)},
            "shortened_from_s": None
            if self.shortened_from is None
            else self.shortened_from.total_seconds(),
            "note": self.headline(),
        }


def resolve_window(
    store: Store,
    end: datetime,
    length: timedelta | None,
    default: timedelta,
    scenario: str | None = None,
    least: timedelta = timedelta(0),
) -> Window:
    """The window of ``length`` ending at ``end``; with no length given, of the
    ``default`` length but starting no earlier than the data (and at least ``least``
    long, a step), so the time before the first record does not count as idle."""
    span = data_span(store, scenario)
    if length is not None:
        start = end - length
        return Window(start, end, span, None, _cover(span, start, end))
    start = end - default
    if span.first is not None and span.first > start:
        start = min(span.first, end - least)
        if start > end - default:
            return Window(start, end, span, default, None)
    return Window(start, end, span, None, _cover(span, start, end))


def _cover(span: DataSpan, start: datetime, end: datetime) -> str | None:
    """One line on a window [start, end) that is not within the data, or None."""
    if span.first is None or span.last is None:
        return None
    first, last, data = span.first, span.last, span.text()
    if end <= first:
        return f"the window lies before all of the data ({data}): its figures are empty"
    if start >= last:
        return (
            f"the window lies after all of the data ({data}): the last recorded allocations "
            "are carried on, and no request or telemetry is recorded in it"
        )
    if start < first and end >= last:
        return (
            f"the window ({_span(end - start)}) is longer than the data ({_span(last - first)}; "
            f"{data}): its rates count the time without data"
        )
    if start < first:
        return (
            f"the window starts {_span(first - start)} before the data ({data}): "
            "its rates count the time without data"
        )
    if end > last:
        return (
            f"the window ends {_span(end - last)} after the data ({data}): the last "
            "recorded allocations are carried on"
        )
    return None


def data_notes(
    store: Store,
    start: datetime,
    end: datetime,
    scenario: str | None = None,
    at_given: bool = True,
    window: Window | None = None,
) -> list[str]:
    """Sanity notes on what the data covers: an inventory-only store, a window (or an
    instant, when ``start == end``) before, after or longer than the data.

    An instant the user did not give (the export time, a scenario's saved instant) is
    within the data by definition and gets no note; ``window``, when given, has said its
    cover already (its headline), and it is repeated here as a note."""
    span = window.span if window is not None else data_span(store, scenario)
    notes = []
    if not span.allocations:
        notes.append(
            "the store holds no allocations: every GPU reads free, and --at gives a snapshot "
            "of the inventory"
        )
    if span.first is None or span.last is None:
        return notes
    if start == end:
        if not at_given:
            return notes
        if end < span.first:
            notes.append(f"--at {iso(end)} is before all of the data ({span.text()})")
        elif end > span.last:
            notes.append(
                f"--at {iso(end)} is after all of the data ({span.text()}): the last recorded "
                "allocations are carried on"
            )
        return notes
    cover = window.cover if window is not None else _cover(span, start, end)
    if cover is not None:
        notes.append(cover)
    return notes


def ineligible_note(store: Store, at: datetime) -> str | None:
    """How many requests waiting at ``at`` are left out of the queued demand because they may
    not start yet for reasons of their own, and why (None: none)."""
    counts = store.query("ineligible_requests_at", at=at)
    if not counts.height:
        return None
    total = int(counts["requests"].sum())
    why = ", ".join(
        f"{int(n):,} {reason}" for reason, n in counts.select("ineligible_reason", "requests").rows()
    )
    return (
        f"{total:,} request(s) submitted by {iso(at)} are not queued demand: they may not start "
        f"yet for reasons of their own ({why})"
    )


def holds_requests(store: Store) -> bool:
    """Whether the store holds any request."""
    return store.row_count("requests") > 0


# -- the time model over the store -------------------------------------------------------


def resolve_at(store: Store, at: datetime | None, scenario: str | None = None) -> datetime:
    """``--at`` or, by default, the instant ``scenario`` was saved at, else the export
    time (a saved state's rows can end after it: work that runs on)."""
    if at is not None:
        return to_utc(at)
    found = saved_at(store, scenario) if scenario is not None else None
    if found is None:
        found = export_time(store, scenario)
    if found is None:
        raise UsageError(
            f"{store.path}: the store holds no allocations, requests or telemetry yet; "
            "give --at TIME for a snapshot of the inventory"
        )
    return found


def saved_at(store: Store, scenario: str) -> datetime | None:
    """The instant scenario ``scenario`` holds the state of (None: not saved, or no instant)."""
    saved = store.query("scenario_names").filter(pl.col("name") == scenario)
    value = saved["at"][0] if saved.height else None
    return None if value is None else to_utc(value)


def check_scenario(store: Store, scenario: str | None) -> None:
    """Fail with the names on offer when ``scenario`` is not saved."""
    if scenario is None:
        return
    names = store.query("scenario_names")["name"].to_list()
    if scenario not in names:
        offer = ", ".join(names) if names else "none saved yet (a what-if saves one with --save-as)"
        raise UsageError(f"--scenario: no scenario named {scenario!r}; scenarios: {offer}")


def fleet_nodes(store: Store, scenario: str | None = None) -> pl.DataFrame:
    """The fleet's nodes: the recorded ones, or those a scenario saved with its edited
    fleet (``whatif remedies --save-as``; a scenario of allocations alone reads the
    recorded nodes). A store without any fails (exit 2): every command that reads
    capacity would read an empty fleet ("every GPU reads free" of none), so all of them
    refuse it, as one rule."""
    nodes = None
    if scenario is not None and "scenario_nodes" in store.table_names():
        saved = store.query("scenario_nodes", scenario=scenario)
        if saved.height:
            nodes = saved
    if nodes is None:
        nodes = store.query("nodes")
    if nodes.height == 0:
        raise UsageError(
            f"{store.path}: the store holds no nodes; ingest a nodes table first "
            "(`fleetaudit status` lists what it holds)"
        )
    return nodes


def load_frames(
    store: Store, start: datetime, end: datetime, scenario: str | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Nodes and the allocations active at some instant of [start, end)."""
    check_scenario(store, scenario)
    nodes = fleet_nodes(store, scenario)
    frames = [store.query("allocations_overlapping", start=start, end=end, scenario=scenario)]
    return nodes, by_alloc_id(frames)


def load_health(
    store: Store, nodes: pl.DataFrame, start: datetime, end: datetime
) -> tuple[pl.DataFrame, Health]:
    """The fleet's health over [start, end): the health intervals that meet it (and every
    open one), merged (:func:`fleetaudit.model.capacity.health_of`), and ``nodes`` with the
    health that holds over all the time (:func:`fleetaudit.model.capacity.whole_window_health`).
    A store without intervals (or made before they existed) gives ``nodes`` unchanged."""
    if "node_events" not in store.table_names():
        return nodes, no_health()
    health = health_of(nodes, store.query("node_events_overlapping", start=start, end=end))
    return whole_window_health(nodes, health), health


def by_alloc_id(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """The allocations frame ``frames`` holds, in alloc_id order (rows sharing an
    alloc_id: by all their columns), so that no figure depends on the order in which
    the store returned its rows; it is taken out of ``frames``.

    The query leaves the order open: sorting 9.4 M rows in DuckDB, or with
    ``DataFrame.sort`` (which gathers every column at once), peaks at about twice
    the frame. Here the permutation and the columns gathered so far are extra, and
    the frame is released as it goes (hence the list: no caller keeps a reference).
    """
    allocations = frames.pop()
    if allocations.height < 2:
        return allocations
    order = allocations["alloc_id"].arg_sort(nulls_last=True)
    ids = allocations["alloc_id"].gather(order)
    if ids.slice(1).eq_missing(ids.slice(0, ids.len() - 1)).any():
        order = allocations.select(
            pl.arg_sort_by(allocations.columns, nulls_last=True, maintain_order=True)
        ).to_series()
    elif order.equals(pl.int_range(allocations.height, eager=True).cast(order.dtype)):
        return allocations
    del ids
    columns = []
    for name in allocations.columns:  # the store's buffers go with the last column
        columns.append(allocations.get_column(name).gather(order))
        allocations = allocations.drop(name)
    return pl.DataFrame(columns)
    order = allocations["alloc_id"].arg_sort(nulls_last=True)
    if order.equals(pl.Series(range(allocations.height), dtype=order.dtype)):
        return allocations
    columns = []
    for name in allocations.columns:  # each column freed once gathered
        columns.append(allocations.get_column(name).gather(order))
        allocations = allocations.drop(name)
    return pl.DataFrame(columns)


def state_at(
    store: Store,
    at: datetime | None = None,
    duration: timedelta | None = None,
    scenario: str | None = None,
) -> pl.DataFrame:
    """The state of every node at ``at`` (and its free capacity over [at, at + duration))."""
    instant = resolve_at(store, at, scenario)
    end = instant + (duration or timedelta(0)) + timedelta(microseconds=1)
    nodes, allocations = load_frames(store, instant, end, scenario)
    nodes, health = load_health(store, nodes, instant, end)
    return occupancy.node_state(nodes, allocations, instant, duration, health)


@dataclass(frozen=True)
class StateResult:
    """The per-node state at an instant (:func:`fleetaudit.model.occupancy.node_state`)."""

    at: datetime
    duration: timedelta | None
    scenario: str | None
    state: pl.DataFrame
    notes: tuple[str, ...] = ()


def node_state(
    options: StoreOptions,
    at: datetime | None = None,
    duration: timedelta | None = None,
    scenario: str | None = None,
    out: Path | None = None,
    out_format: str | None = None,
    csv_raw: bool = False,
) -> StateResult:
    """The state of every node at ``at``; also written to ``out`` if given.

    ``out_format`` is ``csv`` or ``parquet``; by default the suffix of ``out``
    says which (``-``, a device or a FIFO need it given). A CSV's text cells that a
    spreadsheet would run are neutralised unless ``csv_raw`` (:func:`sanitize.csv_safe`).
    """
    fmt = None if out is None else output_format(out, out_format)
    with reading(options) as store:
        instant = resolve_at(store, at, scenario)
        frame = state_at(store, instant, duration, scenario)
        notes = tuple(data_notes(store, instant, instant, scenario, at_given=at is not None))
    if out is not None:
        buffer = io.BytesIO()
        if fmt == "csv":
            joined = frame.with_columns(
                pl.col(pl.List(pl.Float64)).list.eval(pl.element().cast(pl.Utf8)).list.join("|")
            )
            csv_safe(joined, raw=csv_raw).write_csv(buffer)
        else:
            frame.write_parquet(buffer)
        write_output(out, buffer.getvalue())
    return StateResult(at=instant, duration=duration, scenario=scenario, state=frame, notes=notes)


def output_format(out: Path, given: str | None) -> str:
    """The format of an ``--out`` file: ``given``, else the file's suffix (.csv, .parquet)."""
    if given is not None:
        if given.lower() not in ("csv", "parquet"):
            raise UsageError(f"--out-format: {given!r} is not csv or parquet")
        return given.lower()
    suffix = Path(str(out)).suffix.lower()
    if suffix in (".csv", ".parquet"):
        return suffix[1:]
    raise UsageError(f"--out: {out} must end in .csv or .parquet, or give --out-format")


def save_scenario(
    store: Store,
    name: str,
    allocations: pl.DataFrame,
    *,
    base: str,
    command: str,
    options: dict[str, Any],
    at: datetime,
    nodes: pl.DataFrame | None = None,
) -> None:
    """Save an allocation state as scenario ``name`` (replacing one of that name).

    Args:
        allocations: rows in the allocations columns, plus ``removed`` (bool) on
            base ``recorded``; they override recorded rows by alloc_id.
        base: ``recorded`` or ``empty`` (the rows are the whole state).
        nodes: the scenario's own fleet (an edited nodes frame), which every command
            reading the scenario then reads instead of the recorded nodes.
    """
    if base not in ("recorded", "empty"):
        raise ValueError(f"unknown scenario base {base!r}")
    frame = allocations
    if "removed" not in frame.columns:
        frame = frame.with_columns(pl.lit(False).alias("removed"))
    frame = frame.select(
        pl.lit(name).alias("scenario"),
        "removed",
        "alloc_id",
        "job_id",
        "node_id",
        "gpus",
        "cpus",
        "memory_gib",
        "priority",
        "workload",
        "tenant",
        "start_time",
        "end_time",
        "checkpoint_interval_s",
        "sleepable",
    )
    with store.transaction():
        store.execute("delete_scenario_rows", name=name)
        store.execute("delete_scenario_nodes", name=name)
        store.execute("delete_scenario", name=name)
        store.execute(
            "insert_scenario",
            name=name,
            command=command,
            options=json.dumps(options, default=str, sort_keys=True),
            at=at,
            base=base,
        )
        store.register_frame("_fa_scenario_rows", frame)
        store.run("INSERT INTO scenario_allocations SELECT * FROM _fa_scenario_rows")
        if nodes is not None:
            from fleetaudit.model.capacity import optional_column

            fleet = nodes.select(
                pl.lit(name).alias("scenario"),
                *(optional_column(nodes, c, t, None).alias(c) for c, t in (
                    ("node_id", pl.String), ("gpu_model", pl.String), ("gpus", pl.Int64),
                    ("cpus", pl.Float64), ("memory_gib", pl.Float64), ("switch_id", pl.String),
                    ("health", pl.String), ("block_id", pl.String))),
            )  # fmt: skip
            store.register_frame("_fa_scenario_nodes", fleet)
            store.run("INSERT INTO scenario_nodes SELECT * FROM _fa_scenario_nodes")


# -- recorded what-if runs -------------------------------------------------------------

WHATIF_KINDS = ("compaction", "harvesting")


def record_whatif_run(
    options: StoreOptions,
    kind: str,
    *,
    at: datetime,
    scenario: str | None,
    run_options: dict[str, Any],
    document: dict[str, Any],
) -> None:
    """Keep a what-if's ``--json`` document in the store, so ``report`` can show it.

    Args:
        kind: one of :data:`WHATIF_KINDS`, ``compaction_over_time``, ``remedies`` or ``calibration``
            (the queue discipline a replay calibration chose, which later replays reuse).
        run_options: the options it ran with (JSON-serialisable; datetimes become text).
        document: the SPEC document the run printed.
    """
    if kind not in (*WHATIF_KINDS, "compaction_over_time", "remedies", "calibration"):
        raise ValueError(f"unknown what-if kind {kind!r}")
    with writing(options) as store:
        store.execute(
            "insert_whatif_run",
            kind=kind,
            at=at,
            scenario=scenario,
            options=json.dumps(run_options, default=str, sort_keys=True),
            document=json.dumps(document, default=str),
        )


@dataclass(frozen=True)
class WhatifRun:
    """The newest recorded run of one what-if kind."""

    kind: str
    created_at: datetime
    at: datetime
    scenario: str | None
    options: dict[str, Any]
    document: dict[str, Any]
    stale: bool  # an ingest landed after the run


def latest_whatif_runs(store: Store) -> dict[str, WhatifRun]:
    """The newest run of each what-if kind recorded in ``store`` (kind -> run)."""
    if "whatif_runs" not in store.table_names():  # a store written before runs were kept
        return {}
    return {
        row["kind"]: WhatifRun(
            kind=row["kind"],
            created_at=to_utc(row["created_at"]),
            at=to_utc(row["at"]),
            scenario=row["scenario"],
            options=json.loads(row["options"]),
            document=json.loads(row["document"]),
            stale=bool(row["stale"]),
        )
        for row in store.query("latest_whatif_runs").iter_rows(named=True)
    }


# -- generator and demo ------------------------------------------------------------------


def _generate_prometheus(
    out: Path,
    options: generator.GenerateOptions,
    progress: Callable[[str, float], None] | None,
) -> generator.GenerateResult:
    from fleetaudit.inputs import generate as generator
    from fleetaudit.inputs import generate_prometheus as prometheus_dump

    native = generator.generate_fleet(out, replace(options, format="parquet"), progress=progress)
    dump = out / "prometheus"
    say = (lambda msg: progress(msg, 1.0)) if progress is not None else None
    _files, samples = prometheus_dump.write_query_range(
        dump, native.files["nodes"], native.files["telemetry"], say
    )
    native.files["telemetry"].unlink()
    return replace(
        native,
        files={**native.files, "telemetry": dump},
        rows={**native.rows, "telemetry": samples},
    )


@contextmanager
def _writing_out(out: Path, what: str) -> Iterator[None]:
    """Report a generator's bad option (ValueError) or unwritable ``out`` (OSError) as a UsageError."""
    try:
        yield
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    except OSError as exc:
        raise UsageError(f"{out}: cannot write the {what}: {exc.strerror or exc}") from exc


def generate_fleet(
    out: Path,
    options: generator.GenerateOptions,
    progress: Callable[[str, float], None] | None = None,
) -> generator.GenerateResult:
    """Write a synthetic ASI-like fleet (see :mod:`fleetaudit.inputs.generate`).

    ``format="kubernetes"`` writes it as one kubectl JSON snapshot
    (:mod:`fleetaudit.inputs.generate_kubernetes`); ``format="prometheus"`` writes nodes,
    allocations and requests as Parquet and the telemetry as a dcgm-exporter
    query_range dump in ``out/prometheus`` (see :mod:`fleetaudit.inputs.generate_prometheus`).
    """
    from fleetaudit.inputs import generate as generator
    from fleetaudit.inputs import generate_kubernetes

    formats = (*generator.FORMATS, "kubernetes", "prometheus")
    if options.format not in formats:
        raise UsageError(f"format must be one of {', '.join(formats)}; got {options.format!r}")
    with _writing_out(out, "fleet"):
        if options.format == "kubernetes":
            return generate_kubernetes.write_kubectl(out, options, progress=progress)
        if options.format == "prometheus":
            return _generate_prometheus(out, options, progress)
        return generator.generate_fleet(out, options, progress=progress)


def generate_slurm_cluster(
    out: Path, options: generate_slurm.SlurmGenerateOptions
) -> generate_slurm.SlurmGenerateResult:
    """Write a synthetic Slurm cluster's exports (see :mod:`fleetaudit.inputs.generate_slurm`)."""
    from fleetaudit.inputs import generate_slurm

    with _writing_out(out, "cluster"):
        return generate_slurm.generate_slurm(out, options)


def generate_release(
    out: Path,
    options: AsiReleaseOptions,
    progress: Callable[[str, float], None] | None = None,
) -> AsiReleaseResult:
    """Write a generated fleet in the ASI 2026 release's layout (:mod:`fleetaudit.inputs.generate_asi`)."""
    from fleetaudit.inputs import generate_asi

    with _writing_out(out, "release"):
        return generate_asi.generate_release(out, options, progress=progress)


def sample_data_dir() -> Path:
    """The bundled sample fleet."""
    return resource_dir("sample_data")


@dataclass(frozen=True)
class DemoResult:
    """The demo's ingest, what the store then holds, and the state at the export time."""

    ingest: IngestResult
    summary: StoreSummary
    state: StateResult


def run_demo(options: StoreOptions, progress: Callable[[str], None] | None = None) -> DemoResult:
    """Ingest the bundled sample fleet into the store and summarise it.

    Refuses a store that holds data from other files, so the sample is never
    merged into a real fleet by a stray FLEETAUDIT_DB.
    """
    if options.db.exists():
        with reading(options, checked=False) as store:
            loaded = store.sql("SELECT files FROM ingests")["files"].to_list()
        names = {Path(f).name for files in loaded for f in json.loads(files)}
        sample = {p.name for p in sample_data_dir().iterdir()}
        if not names <= sample:
            raise UsageError(
                f"{options.db}: the store holds other data than the sample fleet; "
                "run the demo with --db demo.duckdb"
            )
    result = ingest_paths(options, [sample_data_dir()], None, progress)
    return DemoResult(ingest=result, summary=summarize(options), state=node_state(options))
