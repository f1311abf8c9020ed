"""The library surface the command line calls.

Each function opens the store, reads what it needs as polars frames, hands
them to the pure algorithm modules and returns a frozen result. Nothing here
prints; :mod:`fleetaudit.console` renders results.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from fleetaudit import generate as generator
from fleetaudit import generate_slurm, occupancy
from fleetaudit.errors import UsageError
from fleetaudit.fsutil import atomic_path
from fleetaudit.ingest import IngestOptions, IngestResult, ingest
from fleetaudit.resources import resource_dir
from fleetaudit.store import Store, open_store
from fleetaudit.times import to_utc

DEFAULT_LOCK_TIMEOUT = 30.0


@dataclass(frozen=True)
class StoreOptions:
    """Where the store is and how long to wait for another writer's lock."""

    db: Path
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT


@contextmanager
def writing(options: StoreOptions) -> Iterator[Store]:
    """The store opened for writing; a store this call created is removed if the call fails."""
    store = open_store(options.db, lock_timeout=options.lock_timeout)
    try:
        yield store
    except BaseException:
        store.close()
        if store.created:
            _remove_store_files(options.db)
        raise
    store.close()


@contextmanager
def reading(options: StoreOptions) -> Iterator[Store]:
    """The store opened for reading (it must exist)."""
    store = open_store(options.db, read_only=True, lock_timeout=options.lock_timeout)
    try:
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
    """Ingest ``paths`` into the store in one transaction (see :mod:`fleetaudit.ingest`)."""
    with writing(options) as store:
        return ingest(store, paths, ingest_options or IngestOptions(), progress)


# -- what the store holds --------------------------------------------------------------


@dataclass(frozen=True)
class StoreSummary:
    """What a store holds: rows per table, capacity per model, the export time."""

    db: Path
    tables: pl.DataFrame  # table, rows, first, last
    models: pl.DataFrame  # gpu_model, nodes, gpus, healthy_gpus, domains
    export_time: datetime | None
    queued: int
    scenarios: pl.DataFrame  # name, created_at, command, at, base, options


def summarize(options: StoreOptions) -> StoreSummary:
    """Summarise the store at ``options.db``."""
    with reading(options) as store:
        at = export_time(store)
        queued = 0 if at is None else store.query("queued_requests_at", at=at).height
        return StoreSummary(
            db=options.db,
            tables=store.query("store_tables"),
            models=store.query("fleet_by_model"),
            export_time=at,
            queued=queued,
            scenarios=store.query("scenario_names"),
        )


def export_time(store: Store, scenario: str | None = None) -> datetime | None:
    """The latest timestamp in the data (SPEC §2), or None for an empty store."""
    value = store.query("export_time", scenario=scenario)["at"][0]
    return None if value is None else to_utc(value)


# -- the time model over the store -------------------------------------------------------


def resolve_at(store: Store, at: datetime | None, scenario: str | None = None) -> datetime:
    """``--at`` or, by default, the export time."""
    if at is not None:
        return to_utc(at)
    found = export_time(store, scenario)
    if found is None:
        raise UsageError(f"{store.path}: the store holds no allocations, requests or telemetry yet")
    return found


def check_scenario(store: Store, scenario: str | None) -> None:
    """Fail with the names on offer when ``scenario`` is not saved."""
    if scenario is None:
        return
    names = store.query("scenario_names")["name"].to_list()
    if scenario not in names:
        offer = ", ".join(names) if names else "none saved yet (a what-if saves one with --save-as)"
        raise UsageError(f"--scenario: no scenario named {scenario!r}; scenarios: {offer}")


def load_frames(
    store: Store, start: datetime, end: datetime, scenario: str | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Nodes and the allocations active at some instant of [start, end)."""
    check_scenario(store, scenario)
    nodes = store.query("nodes")
    allocations = store.query("allocations_overlapping", start=start, end=end, scenario=scenario)
    return nodes, allocations


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
    return occupancy.node_state(nodes, allocations, instant, duration)


@dataclass(frozen=True)
class StateResult:
    """The per-node state at an instant (:func:`fleetaudit.occupancy.node_state`)."""

    at: datetime
    duration: timedelta | None
    scenario: str | None
    state: pl.DataFrame


def node_state(
    options: StoreOptions,
    at: datetime | None = None,
    duration: timedelta | None = None,
    scenario: str | None = None,
    out: Path | None = None,
) -> StateResult:
    """The state of every node at ``at``; also written to ``out`` (.csv or .parquet) if given."""
    if out is not None and out.suffix.lower() not in (".csv", ".parquet"):
        raise UsageError(f"--out: {out} must end in .csv or .parquet")
    with reading(options) as store:
        instant = resolve_at(store, at, scenario)
        frame = state_at(store, instant, duration, scenario)
    if out is not None:
        with atomic_path(out) as tmp:
            if out.suffix.lower() == ".csv":
                frame.with_columns(
                    pl.col(pl.List(pl.Float64)).list.eval(pl.element().cast(pl.Utf8)).list.join("|")
                ).write_csv(tmp)
            else:
                frame.write_parquet(tmp)
    return StateResult(at=instant, duration=duration, scenario=scenario, state=frame)


def save_scenario(
    store: Store,
    name: str,
    allocations: pl.DataFrame,
    *,
    base: str,
    command: str,
    options: dict[str, Any],
    at: datetime,
) -> None:
    """Save an allocation state as scenario ``name`` (replacing one of that name).

    Args:
        allocations: rows in the allocations columns, plus ``removed`` (bool) on
            base ``recorded``; they override recorded rows by alloc_id.
        base: ``recorded`` or ``empty`` (the rows are the whole state).
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
        kind: one of :data:`WHATIF_KINDS`.
        run_options: the options it ran with (JSON-serialisable; datetimes become text).
        document: the SPEC document the run printed.
    """
    if kind not in (*WHATIF_KINDS, "compaction_over_time"):
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


def generate_fleet(
    out: Path,
    options: generator.GenerateOptions,
    progress: Callable[[str, float], None] | None = None,
) -> generator.GenerateResult:
    """Write a synthetic ASI-like fleet (see :mod:`fleetaudit.generate`)."""
    try:
        return generator.generate_fleet(out, options, progress=progress)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    except OSError as exc:
        raise UsageError(f"{out}: cannot write the fleet: {exc.strerror or exc}") from exc


def generate_slurm_cluster(
    out: Path, options: generate_slurm.SlurmGenerateOptions
) -> generate_slurm.SlurmGenerateResult:
    """Write a synthetic Slurm cluster's exports (see :mod:`fleetaudit.generate_slurm`)."""
    try:
        return generate_slurm.generate_slurm(out, options)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    except OSError as exc:
        raise UsageError(f"{out}: cannot write the cluster: {exc.strerror or exc}") from exc


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
        with reading(options) as store:
            loaded = store.sql("SELECT files FROM ingests")["files"].to_list()
        names = {Path(f).name for files in loaded for f in json.loads(files)}
        sample = {p.name for p in sample_data_dir().iterdir()}
        if not names <= sample:
            raise UsageError(
                f"{options.db}: the store holds other data than the sample fleet; "
                "run the demo with --db demo.duckdb"
            )
    result = ingest_paths(options, [sample_data_dir()], IngestOptions(), progress)
    return DemoResult(ingest=result, summary=summarize(options), state=node_state(options))
