"""One error hierarchy and the exit codes of the command line.

Core code raises these; only :mod:`fleetaudit.cli` turns them into a line on
stderr and an exit code. Every message is one line that names the thing that is
wrong and, where there is one, the remedy.
"""

from __future__ import annotations

import errno
from enum import IntEnum


class ExitCode(IntEnum):
    """Exit codes of ``fleetaudit`` (docs/operations.md, "Exit codes")."""

    OK = 0
    INTERNAL = 1
    INPUT = 2  # bad input file, bad option or usage
    REJECTED = 65  # EX_DATAERR: an ingest loaded no row of a table it read: all rejected
    STALE = 66  # EX_NOINPUT: report --fail-if-stale, and the export time has not moved
    NO_SPACE = 74  # EX_IOERR: the disk (or the store's folder) is full; nothing was written
    BUSY = 75  # EX_TEMPFAIL: the store is locked by another writer; retry later
    INTERRUPT = 130  # Ctrl-C (128 + SIGINT)
    PIPE = 141  # the reader of stdout left (128 + SIGPIPE), as a shell reports it


class FleetAuditError(Exception):
    """Base of every error fleetaudit reports to the user."""

    exit_code: ExitCode = ExitCode.INPUT

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(FleetAuditError):
    """An option or argument that cannot be used as given."""


class InputError(FleetAuditError):
    """An input file that cannot be read: names the file, and row and column where known."""

    def __init__(
        self,
        file: str,
        reason: str,
        *,
        row: int | None = None,
        column: str | None = None,
    ) -> None:
        self.file = file
        self.row = row
        self.column = column
        self.reason = reason
        where = file
        if row is not None:
            where += f" row {row}"
        if column is not None:
            where += f"{',' if row is not None else ''} column {column}"
        super().__init__(f"{where}: {reason}")


class StoreBusyError(FleetAuditError):
    """Another process holds the store's write lock for longer than the timeout."""

    exit_code = ExitCode.BUSY


class StoreError(FleetAuditError):
    """The store cannot be opened or is not a fleetaudit database."""


class QueryError(FleetAuditError):
    """DuckDB refused or failed a statement (a file it cannot read, a value it cannot cast).

    ``out_of_memory``: DuckDB stopped because the statement needed more memory than its
    limit allows (the caller can name the setting that raises it).
    """

    def __init__(self, message: str, *, out_of_memory: bool = False) -> None:
        super().__init__(message)
        self.out_of_memory = out_of_memory


class AllRejectedError(FleetAuditError):
    """An ingest read rows of a table and rejected every one of them (committed: the
    rejects are kept for ``fleetaudit rejects``)."""

    exit_code = ExitCode.REJECTED


class StaleExportError(FleetAuditError):
    """``report --fail-if-stale``: the export time has not moved since the last recorded
    report."""

    exit_code = ExitCode.STALE


class NoSpaceError(FleetAuditError):
    """The disk ran full while writing (the store, its log, a staged file or an output)."""

    exit_code = ExitCode.NO_SPACE


_NO_SPACE_TEXT = "no space left on device"


def no_space(exc: BaseException) -> NoSpaceError | None:
    """The :class:`NoSpaceError` an exception stands for, if it (or one it was raised
    from) says the disk is full (ENOSPC, or DuckDB's and polars' text of it); else None.

    >>> no_space(OSError(28, "No space left on device", "out.json")).message
    'no space left on device (writing out.json); nothing was written (a store keeps its last committed state): free some space and run the command again'
    >>> no_space(ValueError("bad")) is None
    True
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, NoSpaceError):
            return current
        text = str(current)
        if (isinstance(current, OSError) and current.errno == errno.ENOSPC) or (
            _NO_SPACE_TEXT in text.lower()
        ):
            where = getattr(current, "filename", None)
            if where is None:
                quoted = text.split('"')
                where = quoted[1] if len(quoted) >= 3 else None
            return NoSpaceError(
                "no space left on device"
                + (f" (writing {where})" if where else "")
                + "; nothing was written (a store keeps its last committed state): "
                "free some space and run the command again"
            )
        current = current.__cause__ or current.__context__
    return None
