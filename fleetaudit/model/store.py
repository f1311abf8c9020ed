"""The DuckDB store: the only module that imports duckdb.

It owns the schema (created from :mod:`fleetaudit.model.schema`), the write lock
(a second writer waits up to a timeout, then gets :class:`StoreBusyError`),
transactions (one ``ingest`` call is one transaction), and running the SQL in
``queries/`` by name with ``$named`` parameters. Results leave as polars frames.

Tables besides the four input tables:

- ``rejects(ingest_id, file, row, column, value, reason)``: rows that broke the schema;
- ``ingests(ingest_id, at, files, summary)``: one row per ingest call;
- ``exports(ingest_id, file, export_time, how)``: the instant a call's exports were
  taken, where an export says it itself (or ``ingest --export-time`` does);
- ``meta(key, value)``: the store's schema version;
- ``scenarios(name, created_at, command, options, at, base)`` and
  ``scenario_allocations``: allocation states saved by a what-if (``--save-as``);
  ``base`` is ``recorded`` (the rows override recorded allocations by alloc_id)
  or ``empty`` (the rows are the whole state).
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import polars as pl

from fleetaudit.core.errors import QueryError, StoreBusyError, StoreError, no_space
from fleetaudit.core.resources import load_sql
from fleetaudit.model import schema

if TYPE_CHECKING:  # the rollup's scans stream Arrow batches; a store's reads need no pyarrow
    import pyarrow as pa

SCHEMA_VERSION = 1
_DEFAULT_MEMORY_LIMIT = "3GB"  # DuckDB's, unless $FLEETAUDIT_MEMORY_LIMIT says otherwise
_MEMORY = re.compile(r"\d+(\.\d+)?\s*[KMGT]i?B")


def _bound_memory(con: duckdb.DuckDBPyConnection) -> None:
    """DuckDB spills to disk beyond $FLEETAUDIT_MEMORY_LIMIT (default 3GB): RSS <= 4 GiB."""
    limit = os.environ.get("FLEETAUDIT_MEMORY_LIMIT", _DEFAULT_MEMORY_LIMIT)
    if _MEMORY.fullmatch(limit):
        con.execute(f"SET memory_limit = '{limit}'")


# DuckDB types whose polars type :meth:`Store.small_frame` spells as ``.pl()`` would.
_PLAIN_TYPES: dict[str, Any] = {
    "VARCHAR": pl.String,
    "BIGINT": pl.Int64,
    "INTEGER": pl.Int32,
    "DOUBLE": pl.Float64,
    "BOOLEAN": pl.Boolean,
}


def quote_identifier(name: str) -> str:
    """A DuckDB identifier, quoted (the only way names enter generated SQL)."""
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str) -> str:
    """A SQL string literal of a fixed text (a message, a path): never of data values,
    which enter statements as parameters."""
    return "'" + text.replace("'", "''") + "'"


def _interrupted(exc: BaseException) -> bool:
    """Whether DuckDB stopped a statement because of Ctrl-C (SIGINT)."""
    return isinstance(exc, duckdb.InterruptException) or (
        isinstance(exc, RuntimeError) and str(exc).startswith("Query interrupted")
    )


@contextmanager
def _statement() -> Iterator[None]:
    """DuckDB's failures as :class:`QueryError`; its Ctrl-C as KeyboardInterrupt."""
    try:
        yield
    except (duckdb.Error, RuntimeError) as exc:
        if _interrupted(exc):
            raise KeyboardInterrupt from exc
        full = no_space(exc)  # the disk, not the statement or its input
        if full is not None:
            raise full from exc
        if isinstance(exc, duckdb.Error):
            raise _query_error(exc) from exc
        raise


def _query_error(exc: duckdb.Error) -> QueryError:
    return QueryError(_first_line(exc), out_of_memory=isinstance(exc, duckdb.OutOfMemoryException))


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text


class Store:
    """An open fleetaudit database.

    Use :func:`open_store`; close it (or use it as a context manager) to release
    the lock.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path, created: bool) -> None:
        self.con = con
        self.path = path
        self.created = created
        self._capped: str | None = None  # the limit memory_capped set, while it lasts

    # -- lifecycle -----------------------------------------------------------------
    def close(self) -> None:
        # a connection DuckDB invalidated (a write that failed: a full disk) may refuse to
        # close; what it held is discarded either way, and the error that caused it counts
        with suppress(duckdb.Error):
            self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All statements inside land together or not at all."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            # after Ctrl-C DuckDB may refuse; closing the connection discards it anyway
            with suppress(duckdb.Error, RuntimeError):
                self.con.execute("ROLLBACK")
            raise
        try:
            self.con.execute("COMMIT")
        except (duckdb.Error, RuntimeError) as exc:
            if not _interrupted(exc):
                with suppress(duckdb.Error, RuntimeError):
                    self.con.execute("ROLLBACK")
                full = no_space(exc)  # the log could not be written: nothing of it committed
                if full is not None:
                    raise full from exc
                raise
            # Ctrl-C during the commit (DuckDB raises a bare RuntimeError): the commit
            # landed whole or not at all, so the store holds its last committed state
            with suppress(duckdb.Error, RuntimeError):
                self.con.execute("ROLLBACK")
            raise KeyboardInterrupt from exc

    # -- running SQL ---------------------------------------------------------------
    def query(self, query_name: str, /, **params: Any) -> pl.DataFrame:
        """Run ``queries/<query_name>.sql`` and return its result as a polars frame."""
        return self.sql(load_sql(query_name), params)

    def execute(self, query_name: str, /, **params: Any) -> None:
        """Run ``queries/<query_name>.sql`` for its effect."""
        self.run(load_sql(query_name), params)

    def _execute(self, text: str, params: Mapping[str, Any] | None) -> duckdb.DuckDBPyConnection:
        with _statement():
            return self.con.execute(text, dict(params or {}))

    def sql(self, text: str, params: Mapping[str, Any] | None = None) -> pl.DataFrame:
        """Run SQL text (generated from the schema, values only as parameters)."""
        with _statement():
            return self.con.sql(text, params=dict(params or {})).pl()

    def small_frame(self, text: str, params: Mapping[str, Any] | None = None) -> pl.DataFrame:
        """Like :meth:`sql`, for a result of a few rows: built from Python rows, not Arrow.

        Converting through Arrow imports pyarrow and numpy (a third of a second of
        CPU); a command that reads nothing larger, such as ingest, then never loads them.
        Column types outside a few plain ones fall back to :meth:`sql`.
        """
        try:
            relation = self.con.sql(text, params=dict(params or {}))
            dtypes = [_PLAIN_TYPES.get(str(t)) for t in relation.types]
            if any(d is None for d in dtypes):
                return relation.pl()
            rows = relation.fetchall()
        except duckdb.Error as exc:
            raise no_space(exc) or _query_error(exc) from exc
        return pl.DataFrame(rows, schema=list(zip(relation.columns, dtypes)), orient="row")

    def run(self, text: str, params: Mapping[str, Any] | None = None) -> int | None:
        """Run SQL text for its effect; the row count of an INSERT/DELETE, if any."""
        rows = self._fetchall(text, params)
        if len(rows) != 1 or len(rows[0]) != 1 or not isinstance(rows[0][0], int):
            return None
        return int(rows[0][0])

    def copy_to_parquet(
        self, sql: str, path: Path, params: Mapping[str, Any] | None = None
    ) -> None:
        """Write the rows of the SELECT ``sql`` to the Parquet file ``path`` (DuckDB writes
        it: the rows never become a frame in Python)."""
        self.run(f"COPY ({sql}\n) TO {quote_literal(str(path))} (FORMAT parquet)", params)

    def scalar(self, text: str, params: Mapping[str, Any] | None = None) -> Any:
        rows = self._fetchall(text, params)
        return rows[0][0] if rows else None

    def _fetchall(self, text: str, params: Mapping[str, Any] | None) -> list[tuple[Any, ...]]:
        cursor = self._execute(text, params)
        with _statement():
            return cursor.fetchall()

    def describe(
        self, source_sql: str, params: Mapping[str, Any] | None = None
    ) -> list[tuple[str, str]]:
        """Column names and DuckDB types of a SELECT, without running it."""
        rows = self._fetchall(f"DESCRIBE {source_sql}", params)
        return [(str(r[0]), str(r[1])) for r in rows]

    def register_frame(self, name: str, frame: pl.DataFrame) -> None:
        """Make a polars frame readable as the temporary view ``name``."""
        self.con.register(name, frame.to_arrow())

    def unregister(self, name: str) -> None:
        """Drop a view made by :meth:`register_frame`."""
        self.con.unregister(name)

    # -- schema ----------------------------------------------------------------------
    def column_types(self, table: str) -> dict[str, str]:
        """The table's columns, name -> DuckDB type, in table order."""
        rows = self._fetchall(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_name = $t AND table_schema = 'main' ORDER BY ordinal_position",
            {"t": table},
        )
        return {str(r[0]): str(r[1]) for r in rows}

    def add_column(self, table: str, name: str, sql_type: str) -> None:
        self.run(
            f"ALTER TABLE {quote_identifier(table)} ADD COLUMN {quote_identifier(name)} {sql_type}"
        )

    def memory_limit(self) -> str:
        """DuckDB's memory limit on this connection as it was set (``"1GB"``), without a
        query: a failed statement may have aborted the transaction."""
        limit = os.environ.get("FLEETAUDIT_MEMORY_LIMIT", "")
        return self._capped or (limit if _MEMORY.fullmatch(limit) else _DEFAULT_MEMORY_LIMIT)

    @contextmanager
    def memory_capped(self, limit: str) -> Iterator[None]:
        """Run the block with DuckDB's memory limit at ``limit`` (a constant such as
        ``"1GB"``; DuckDB spills beyond it), unless $FLEETAUDIT_MEMORY_LIMIT sets one."""
        if os.environ.get("FLEETAUDIT_MEMORY_LIMIT") or not _MEMORY.fullmatch(limit):
            yield
            return
        self.run(f"SET memory_limit = '{limit}'")
        self._capped = limit
        try:
            yield
        finally:
            self._capped = None
            self.con.execute(f"SET memory_limit = '{_DEFAULT_MEMORY_LIMIT}'")

    @contextmanager
    def optimizer_disabled(self, name: str) -> Iterator[None]:
        """Run the block without DuckDB optimizer ``name`` (ignored where DuckDB lacks it)."""
        try:
            self.run(f"SET disabled_optimizers = '{name}'")
        except QueryError:
            yield
            return
        try:
            yield
        finally:
            self.con.execute("RESET disabled_optimizers")

    def row_count(self, table: str) -> int:
        return int(self.scalar(f"SELECT count(*) FROM {quote_identifier(table)}"))

    def distinct_count(self, text: str, params: Mapping[str, Any] | None = None) -> int:
        """How many distinct values the one integer column of a SELECT holds.

        For millions of 64-bit hashes: DuckDB computes the column in parallel and
        hands it over as one numpy array (no pyarrow), sorted in place and counted
        where it changes; a GROUP BY of the same values in DuckDB takes about three
        times the CPU.
        """
        import numpy as np

        cursor = self._execute(text, params)
        with _statement():
            arrays = cursor.fetchnumpy()
        (column,) = arrays.values()
        values = np.asarray(column)
        if values.size == 0:
            return 0
        values.sort()
        return int(np.count_nonzero(values[1:] != values[:-1])) + 1

    def check_finite(self) -> None:
        """Fail, naming the table, the row (its key) and the column, where an input table
        holds a NaN, an infinity or a time outside ``schema.TIME_RANGE`` in a column of the
        schema: ingest refuses them, but a store written by an older version may hold one,
        and every engine that meets it would fail without a word of where.

        DuckDB's statistics of each table say which columns may hold one (NaN sorts above
        every number, so a column holding one has NaN as its maximum); only those are
        scanned. A clean store pays one statistics read per table.

        Raises:
            StoreError: the first such value found.
        """
        low, high = schema.TIME_RANGE
        held: dict[str, dict[str, str]] = {}  # table -> column -> DuckDB type, in one read
        for table, column, sql_type in self._fetchall(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() "
            "WHERE database_name = current_database() AND schema_name = 'main' "
            "ORDER BY table_name, column_index",
            None,
        ):
            held.setdefault(str(table), {})[str(column)] = str(sql_type)
        checked = [
            (t.name, t.key, {c.name: c.kind for c in t.columns}) for t in schema.TABLES.values()
        ] + [(name, key, None) for name, key in _SIDE_TABLES.items()]
        for table, key, kinds in checked:
            present = held.get(table, {})
            columns = [
                (column, schema.Kind.TIME if sql_type == "TIMESTAMP" else schema.Kind.FLOAT)
                for column, sql_type in present.items()
                if sql_type in ("DOUBLE", "FLOAT", "TIMESTAMP")
                and (kinds is None or kinds.get(column) in (schema.Kind.FLOAT, schema.Kind.TIME))
            ]  # a column the files added beside the schema's is theirs: not checked
            if not columns:
                continue
            name = quote_identifier(table)
            stats = self._fetchall(
                f"SELECT {', '.join(f'stats({quote_identifier(c)})' for c, _ in columns)} "
                f"FROM {name} LIMIT 1",
                None,
            )
            if not stats:
                continue  # an empty table
            for (column, kind), found in zip(columns, stats[0], strict=True):
                if not _may_hold_bad_values(found, kind):
                    continue
                c = quote_identifier(column)
                bad = (
                    f"NOT isfinite({c})"
                    if kind is schema.Kind.FLOAT
                    else f"NOT isfinite({c}) OR {c} < TIMESTAMP '{low}' OR {c} >= TIMESTAMP '{high}'"
                )
                keys = [k for k in key if k in present]
                row = self._fetchall(
                    f"SELECT CAST({c} AS VARCHAR), "
                    + "".join(f"CAST({quote_identifier(k)} AS VARCHAR), " for k in keys)
                    + f"{'_ingest_id' if schema.INGEST_ID in present else 'NULL'} "
                    f"FROM {name} WHERE {bad} LIMIT 1",
                    None,
                )
                if not row:
                    continue  # the statistics remember a row since deleted
                value, *key_values, ingest_id = row[0]
                where = ", ".join(f"{k} {v!r}" for k, v in zip(keys, key_values, strict=True))
                what = (
                    "is not a finite number"
                    if kind is schema.Kind.FLOAT
                    else f"is outside {low[:4]}..{high[:4]}"
                )
                by = f"ingest #{ingest_id}" if ingest_id is not None else "an older version"
                raise StoreError(
                    f"{self.path}: table {table}, row {where or '?'}, column {column}: "
                    f"{value} {what} (stored by {by}, before ingest refused such values); "
                    "ingest that row again with a valid value: its key replaces it"
                )

    def table_names(self) -> set[str]:
        """The tables of the store's main schema."""
        return {
            row[0]
            for row in self._fetchall(
                "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'", None
            )
        }


# Tables of the alibaba-gpu-v2026 ingest besides the input tables (queries/
# asi_create_side_tables.sql), by key: every number and time of theirs is checked too.
_SIDE_TABLES: dict[str, tuple[str, ...]] = {
    "asi_pod_hourly": ("t", "pod_id", "server_id"),
    "asi_server_hourly": ("t", "server_id"),
}


def _may_hold_bad_values(stats: object, kind: schema.Kind) -> bool:
    """Whether a column's DuckDB statistics (``stats(column)``: a dict in DuckDB 1.1 and
    later, a string before) leave room for a NaN, an infinity or a time outside
    ``schema.TIME_RANGE``; when they say nothing clear, they do.

    >>> _may_hold_bad_values({"min": 1.0, "max": float("nan"), "has_null": False}, schema.Kind.FLOAT)
    True
    >>> _may_hold_bad_values({"min": 1.0, "max": 64.0}, schema.Kind.FLOAT)
    False
    >>> _may_hold_bad_values({"has_null": True, "has_no_null": False}, schema.Kind.FLOAT)
    False
    """
    if not isinstance(stats, dict):
        return True
    if "min" not in stats or "max" not in stats:
        return stats.get("has_no_null") is not False  # no bounds: only an all-null column is clear
    bounds = (stats["min"], stats["max"])
    if kind is schema.Kind.FLOAT:
        return not all(isinstance(v, (int, float)) and math.isfinite(v) for v in bounds)
    low, high = (datetime.fromisoformat(t) for t in schema.TIME_RANGE)
    return not all(isinstance(v, datetime) and low <= v < high for v in bounds)


def _create_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create what the store lacks, in one transaction (one write to the log, not one a
    statement); a store made before a column existed gains it."""
    existing: dict[str, set[str]] = {}
    for table, column in con.execute(
        "SELECT table_name, lower(column_name) FROM duckdb_columns() "
        "WHERE database_name = current_database() AND schema_name = 'main'"
    ).fetchall():
        existing.setdefault(table, set()).add(column)
    con.execute("BEGIN TRANSACTION")
    try:
        for tbl in schema.TABLES.values():
            if tbl.name not in existing:
                cols = ", ".join(f"{quote_identifier(c.name)} {c.kind.value}" for c in tbl.columns)
                con.execute(
                    f"CREATE TABLE {quote_identifier(tbl.name)} "
                    f"({cols}, {quote_identifier(schema.INGEST_ID)} BIGINT)"
                )
                continue
            for c in tbl.columns:
                if c.name.lower() not in existing[tbl.name]:
                    con.execute(
                        f"ALTER TABLE {quote_identifier(tbl.name)} "
                        f"ADD COLUMN {quote_identifier(c.name)} {c.kind.value}"
                    )
        con.execute(load_sql("create_store_tables"))
        con.execute(
            "INSERT INTO meta SELECT 'schema_version', $v WHERE NOT EXISTS "
            "(SELECT 1 FROM meta WHERE key = 'schema_version')",
            {"v": str(SCHEMA_VERSION)},
        )
    except BaseException:
        with suppress(duckdb.Error, RuntimeError):
            con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


WAIT_NOTICE_AFTER = 1.0  # seconds of waiting for the lock before saying so


def _connect(
    path: Path,
    read_only: bool,
    lock_timeout: float,
    on_wait: Callable[[str], None] | None = None,
) -> duckdb.DuckDBPyConnection:
    started = time.monotonic()
    deadline = started + lock_timeout
    delay = 0.05
    told = on_wait is None
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.Error as exc:
            if not _is_lock_error(exc):
                raise no_space(exc) or StoreError(
                    f"{path}: cannot open the store: {_first_line(exc)}"
                ) from exc
            now = time.monotonic()
            if now >= deadline:
                raise StoreBusyError(
                    f"{path}: the store is locked by another fleetaudit process; "
                    f"gave up after {lock_timeout:g} s (raise --lock-timeout or retry later)"
                ) from exc
            notice_at = started + WAIT_NOTICE_AFTER
            if not told and now >= notice_at:
                told = True
                on_wait(  # type: ignore[misc]
                    f"{path}: the store is locked by another fleetaudit process; "
                    f"waiting up to {lock_timeout:g} s (--lock-timeout)"
                )
        wake = min(now + delay, deadline, now + 1.0 if told else notice_at)
        time.sleep(max(0.0, wake - now))
        delay = min(delay * 2, 1.0)


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines()]
    if not lines or not lines[0]:
        return type(exc).__name__
    first = lines[0]
    if "CSV Error on Line" in first:
        # DuckDB's CSV errors: the line, its text ("Original Line: ..."), then the cause
        cause = next((line for line in lines[1:] if line and "Original Line" not in line), "")
        if cause and not cause.startswith("Possible Solution"):
            first = f"{first}: {cause}"
    return first


def _check_foreign_file(path: Path) -> None:
    """Refuse a file that is not a DuckDB database before DuckDB opens it (DuckDB would
    try to download a reader for a SQLite file and write a log beside a text file, and
    wait forever on a FIFO that nothing writes)."""
    if path.is_dir():
        return  # DuckDB's own message says so
    if not path.is_file():
        kind = (
            "a FIFO (named pipe)" if path.is_fifo()
            else "a device" if path.is_char_device() or path.is_block_device()
            else "a socket" if path.is_socket()
            else "not a regular file"
        )  # fmt: skip
        raise StoreError(f"{path}: {kind}, not a fleetaudit store; pass the store with --db")
    try:
        with path.open("rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        raise StoreError(f"{path}: cannot open the store: {exc.strerror or exc}") from exc
    if head[8:12] != b"DUCK":  # a DuckDB file's magic bytes
        what = (
            "a SQLite database"
            if head.startswith(b"SQLite format 3")
            else "an empty file"
            if not head
            else "not a DuckDB file"
        )
        raise StoreError(f"{path}: {what}, not a fleetaudit store; pass the store with --db")


def _check_foreign_tables(con: duckdb.DuckDBPyConnection, path: Path, read_only: bool) -> None:
    """Refuse another program's DuckDB database: tables, none of them fleetaudit's.

    fleetaudit would otherwise add its tables to it (a write) or fail on the first
    query with a catalog error. A database without tables becomes a store when
    opened to write; a reader is told to ingest first.
    """
    tables = [
        str(name)
        for (name,) in con.execute(
            "SELECT table_name FROM duckdb_tables() "
            "WHERE database_name = current_database() ORDER BY table_name"
        ).fetchall()
    ]
    if tables and not set(tables) & (set(schema.TABLES) | {"meta"}):
        shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
        raise StoreError(
            f"{path}: a DuckDB database of another program (tables {shown}), "
            "not a fleetaudit store; pass the store with --db"
        )
    if not tables and read_only:
        raise StoreError(
            f"{path}: an empty DuckDB database, no fleetaudit store yet; "
            "run `fleetaudit ingest` first (or pass --db)"
        )


def open_store(
    path: Path,
    *,
    read_only: bool = False,
    lock_timeout: float = 30.0,
    must_exist: bool = False,
    on_wait: Callable[[str], None] | None = None,
) -> Store:
    """Open (creating when allowed) the store at ``path``.

    Args:
        path: the DuckDB file.
        read_only: open without the write lock (several readers may share it).
        lock_timeout: seconds to wait for another process's lock.
        must_exist: fail with a clear line instead of creating a new store.
        on_wait: told once, after a second, that another process holds the lock.
    """
    existed = path.exists()
    if not existed and (must_exist or read_only):
        raise StoreError(
            f"{path}: no fleetaudit store here; run `fleetaudit ingest` first (or pass --db)"
        )
    if existed:
        _check_foreign_file(path)
    con = _connect(path, read_only and existed, lock_timeout, on_wait)
    try:
        con.execute("SET TimeZone = 'UTC'")
        _bound_memory(con)
        if existed:
            _check_foreign_tables(con, path, read_only)
        if not read_only:
            _create_schema(con)
        con.execute(load_sql("create_scenario_macro"))
    except StoreError:
        con.close()
        raise
    except (duckdb.Error, RuntimeError) as exc:
        with suppress(duckdb.Error):
            con.close()
        if _interrupted(exc):
            raise KeyboardInterrupt from exc
        full = no_space(exc)
        if full is not None:
            raise full from exc
        if not isinstance(exc, duckdb.Error):
            raise
        raise StoreError(f"{path}: not a usable fleetaudit store: {_first_line(exc)}") from exc
    return Store(con, path, created=not existed)


class ScanEngine:
    """DuckDB as a scan engine over Parquet files (``rollup --engine duckdb``).

    An in-memory database, not a store: it registers Parquet files as views
    and streams the result of a query in ``queries/`` as Arrow record batches.
    :class:`fleetaudit.model.spark_store.SparkEngine` has the same methods.
    """

    name = "duckdb"

    def __init__(self) -> None:
        self.con = duckdb.connect(":memory:")
        self.con.execute("SET TimeZone = 'UTC'")
        _bound_memory(self.con)

    def close(self) -> None:
        # a connection DuckDB invalidated (a write that failed: a full disk) may refuse to
        # close; what it held is discarded either way, and the error that caused it counts
        with suppress(duckdb.Error):
            self.con.close()

    def __enter__(self) -> ScanEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def register_parquet(
        self, view: str, files: list[Path], hive: bool, optional: Mapping[str, str] | None = None
    ) -> None:
        """Make the Parquet ``files`` readable as the view ``view`` (columns united by name);
        an ``optional`` column (name -> SQL type) that no file holds reads as NULL."""
        try:
            relation = self.con.read_parquet(
                [str(f) for f in files], hive_partitioning=hive, union_by_name=True
            )
            present = {c.lower() for c in relation.columns}
            absent = [
                f"CAST(NULL AS {kind}) AS {quote_identifier(name)}"
                for name, kind in (optional or {}).items()
                if name.lower() not in present
            ]
            if absent:
                relation = relation.project(", ".join(["*", *absent]))
            relation.create_view(view, replace=True)
        except duckdb.Error as exc:
            raise QueryError(_first_line(exc)) from exc

    def columns(self, view: str) -> dict[str, str]:
        """The view's columns, name -> DuckDB type."""
        rows = self.con.execute(f"DESCRIBE {quote_identifier(view)}").fetchall()
        return {str(r[0]): str(r[1]) for r in rows}

    def batches(
        self, query_name: str, /, scratch: Path | None = None, **params: Any
    ) -> Iterator[pa.RecordBatch]:
        """Run ``queries/<query_name>.sql``; its result, streamed (``scratch``, where
        Spark's executors would write the result, is not used: DuckDB streams it)."""
        try:
            reader = self.con.sql(load_sql(query_name), params=params).to_arrow_reader(1 << 17)
            yield from reader
        except duckdb.Error as exc:
            raise QueryError(_first_line(exc)) from exc
