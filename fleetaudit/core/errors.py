"""One error hierarchy and the exit codes of the command line.

Core code raises these; only :mod:`fleetaudit.cli` turns them into a line on
stderr and an exit code. Every message is one line that names the thing that is
wrong and, where there is one, the remedy.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Exit codes of ``fleetaudit`` (docs/operations.md, "Exit codes")."""

    OK = 0
    INTERNAL = 1
    INPUT = 2  # bad input file, bad option or usage
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
