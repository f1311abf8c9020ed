"""Input files as DuckDB sources: which table a file feeds and how to scan it.

A :class:`Source` is a SELECT that DuckDB streams (never a Python loop per
row), plus a second form that numbers the rows, used only to report rejects.
CSV and JSON Lines are read as text and parsed by the validation; Parquet keeps
its types.
"""

from __future__ import annotations

import csv
import gzip
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from fleetaudit.core.errors import InputError, QueryError
from fleetaudit.model import schema

_SUFFIXES: dict[str, str] = {
    ".csv": "csv",
    ".csv.gz": "csv",
    ".parquet": "parquet",
    ".jsonl": "jsonl",
    ".jsonl.gz": "jsonl",
    ".ndjson": "jsonl",
    ".ndjson.gz": "jsonl",
}

# Columns come from the header (read here), so DuckDB never guesses; lines with
# the wrong number of fields are kept aside in CSV_ERRORS (store_rejects) on the
# loading scan, and skipped on the numbered scan, which counts them back in.
CSV_ERRORS = "_fa_csv_errors"
CSV_BAD_ROWS = "_fa_csv_bad_rows"
_CSV_OPTIONS = (
    "columns = $columns, auto_detect = false, header = true, delim = ',', quote = '\"', "
    "escape = '\"', strict_mode = true, compression = 'auto'"
)
_CSV = (
    f"read_csv($path, {_CSV_OPTIONS}, store_rejects = true, "
    f"rejects_table = '{CSV_ERRORS}', rejects_scan = '{CSV_ERRORS}_scans')"
)
_CSV_SKIPPING = f"read_csv($path, {_CSV_OPTIONS}, ignore_errors = true)"
# A CSV file's data rows with _row, the row's number in the file (1: the first after the
# header). Loading scan: lines with a wrong field count land in CSV_ERRORS, and _row
# counts the good rows. Numbered scan: those lines are skipped and counted back in
# (data row = good-row rank + the bad lines before it; CSV_BAD_ROWS: e, k).
CSV_ROWS = f"(SELECT *, row_number() OVER () AS _row FROM {_CSV})"
CSV_NUMBERED_ROWS = (
    f"(SELECT * EXCLUDE (_r), _r + (SELECT count(*) FROM {CSV_BAD_ROWS} AS b "
    f"WHERE b.e - b.k < s._r) AS _row "
    f"FROM (SELECT *, row_number() OVER () AS _r FROM {_CSV_SKIPPING}) AS s)"
)
_PARQUET = "read_parquet($path)"
_PARQUET_NUMBERED = "read_parquet($path, file_row_number = true)"
_JSONL = (
    "read_json($path, format = 'newline_delimited', records = true, sample_size = -1, "
    "compression = 'auto')"
)


@dataclass(frozen=True)
class Source:
    """A scan of one input file for one table.

    ``select`` yields the file's columns; ``numbered`` yields them plus ``_row``
    (1-based data row: the header is not counted). ``params`` binds both.
    """

    file: str
    table: str
    select: str
    numbered: str
    params: Mapping[str, Any] = field(default_factory=dict)
    csv: bool = False  # lines with a wrong field count land in CSV_ERRORS
    adapter_rejects: bool = False  # the scan's _reject_* columns reject rows (validate.py)

    notes: tuple[str, ...] = ()  # what an adapter decided, shown after the ingest
    superseded: int = 0  # rows an adapter merged before the scan (an object listed twice)
    # (file, instant, how it is known) of the exports of the call that say when they were
    # taken; an adapter may attach those of files that feed no table (sdiag) to any source
    exported: tuple[tuple[str, datetime, str], ...] = ()


def read_failure(memory_limit: str, exc: QueryError) -> str:
    """Why DuckDB could not read a file: its own words; where it ran out of memory, that,
    with the setting that raises the limit (``memory_limit``: the one it had). A full disk
    never gets here: the store raises it as :class:`~fleetaudit.core.errors.NoSpaceError`
    (exit 74) before any :class:`QueryError` (``no_space`` in ``model/store.py``).

    >>> read_failure("1GB", QueryError("Binder Error: no column x"))
    'cannot read: Binder Error: no column x'
    >>> read_failure("1GB", QueryError("Out of Memory Error", out_of_memory=True))[:40]
    'out of memory: the ingest may use 1GB (D'
    """
    if exc.out_of_memory:
        return (
            f"out of memory: the ingest may use {memory_limit} (DuckDB's limit, beyond which "
            "it spills to disk) and needed more; set FLEETAUDIT_MEMORY_LIMIT (for example "
            "FLEETAUDIT_MEMORY_LIMIT=4GB) to raise it"
        )
    return f"cannot read: {exc.message}"


def split_suffix(path: Path) -> tuple[str, str | None]:
    """A file's stem and its format, from its suffix (``nodes.csv.gz`` -> nodes, csv)."""
    name = path.name
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)], _SUFFIXES[suffix]
    return path.stem, None


def is_table_file(path: Path) -> bool:
    """Whether ``path`` has the suffix of a readable table file."""
    return path.is_file() and split_suffix(path)[1] is not None


def native_source(path: Path, table_name: str | None) -> Source:
    """The source for a native table file; the table is ``table_name`` or the file's stem."""
    stem, fmt = split_suffix(path)
    if fmt is None:
        raise InputError(
            str(path),
            "unknown format; use .csv, .csv.gz, .parquet or .jsonl (JSON Lines)",
        )
    name = table_name or stem
    if name not in schema.TABLES:
        raise InputError(
            str(path),
            f"no table named {name!r}; name the file after a table "
            f"({', '.join(schema.TABLES)}) or pass --table",
        )
    params: dict[str, Any] = {"path": str(path)}
    if fmt == "csv":
        params = csv_params(path)
        select = f"SELECT * FROM {_CSV}"
        numbered = f"SELECT * FROM {CSV_NUMBERED_ROWS}"
        return Source(str(path), name, select, numbered, params, csv=True)
    elif fmt == "parquet":
        select = f"SELECT * FROM {_PARQUET}"
        numbered = (
            f"SELECT * EXCLUDE (file_row_number), file_row_number + 1 AS _row "
            f"FROM {_PARQUET_NUMBERED}"
        )
    else:
        select = f"SELECT * FROM {_JSONL}"
        numbered = f"SELECT *, row_number() OVER () AS _row FROM {_JSONL}"
    return Source(file=str(path), table=name, select=select, numbered=numbered, params=params)


def csv_params(path: Path) -> dict[str, Any]:
    """The parameters of :data:`CSV_ROWS` and :data:`CSV_NUMBERED_ROWS` for one CSV file
    (gzip-compressed or not): its path and its header's columns, read as text, so that
    DuckDB never guesses a type, a delimiter or a header (a line with an extra field is a
    reject, not a failed sniff of the whole file).

    Raises:
        InputError: no header, an empty or a repeated column name, a file that cannot be read.
    """
    return {"path": str(path), "columns": dict.fromkeys(_csv_header(path), "VARCHAR")}


def unreadable(
    path: Path, exc: BaseException, what: str = "cannot read", *, gzipped: bool = False
) -> InputError:
    r"""The error for a text file that could not be read (``exc``): for a byte that is not
    UTF-8, the row (line) it is on, found by reading the file again as bytes (a decoder
    names only a position in the block it was given; ``gzipped``: as the reader did,
    gunzipped); else the reason. Lines end at ``\n`` (a file whose lines end at a lone
    ``\r`` is one row here).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = Path(folder) / "nodes.txt"
    ...     _ = path.write_bytes(b"node-1\nnode-2\nn\xffde-3\n")
    ...     try:
    ...         path.read_text(encoding="utf-8")
    ...     except UnicodeDecodeError as exc:
    ...         print(unreadable(path, exc).args[0].replace(folder, "F"))
    F/nodes.txt row 3: cannot read: not UTF-8 text (byte 0xff); save it as UTF-8
    """
    if isinstance(exc, UnicodeDecodeError):
        found = _first_undecodable(path, gzipped)
        if found is not None:
            row, byte = found
            return InputError(
                str(path), f"{what}: not UTF-8 text (byte 0x{byte:02x}); save it as UTF-8", row=row
            )
    if isinstance(exc, OSError) and exc.strerror:
        reason = exc.strerror
    else:
        reason = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
    return InputError(str(path), f"{what}: {reason}")


def _first_undecodable(path: Path, gzipped: bool) -> tuple[int, int] | None:
    """(line from 1, byte) of the first byte of ``path`` (gunzipped if ``gzipped``) that
    is not UTF-8; None if there is none or the file cannot be read (a gzip stream cut
    short: up to the cut)."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    opener = gzip.open if gzipped else open
    lines = 1
    try:
        with opener(path, "rb") as fh:
            while chunk := fh.read1(1 << 20):  # what a cut gzip stream holds before the cut
                held = decoder.getstate()[0]  # a character's first bytes, from the last block
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as exc:
                    data = held + chunk
                    return lines + data.count(b"\n", 0, exc.start), data[exc.start]
                lines += chunk.count(b"\n")
            decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:  # the file ends inside a character
        return lines, exc.object[exc.start]
    except (OSError, EOFError, zlib.error):
        return None
    return None


MAX_HEADER_BYTES = 1 << 20
"""A CSV header line longer than this (a file without line breaks) is no header."""


def _csv_header(path: Path) -> list[str]:
    """The header's column names, from the first line alone: a fault further on (a byte
    that is not UTF-8, a line with an extra field) is DuckDB's to name by its line."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rb") as fh:
            line = fh.readline(MAX_HEADER_BYTES + 1)
        if len(line) > MAX_HEADER_BYTES:
            raise InputError(
                str(path), f"cannot read: the header line is longer than {MAX_HEADER_BYTES:,} bytes"
            )
        header = next(csv.reader([line.decode("utf-8-sig")]), None)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, csv.Error) as exc:
        raise unreadable(path, exc, gzipped=opener is gzip.open) from exc
    if not header or not any(h.strip() for h in header):
        raise InputError(str(path), "cannot read: no header line (an empty file?)")
    seen: set[str] = set()
    for name in header:
        if not name.strip():
            raise InputError(str(path), "cannot read: an empty column name in the header")
        if name in seen:
            raise InputError(str(path), "cannot read: the header names it twice", column=name)
        seen.add(name)
    return header


def expand_paths(
    paths: Iterable[Path],
    keep: Callable[[Path], bool] = is_table_file,
    what: str = "table file (.csv, .csv.gz, .parquet, .jsonl)",
) -> list[Path]:
    """Files named, and the files inside each folder named that ``keep`` accepts (sorted,
    hidden ones left out): one rule for every format.

    Raises:
        InputError: a path that does not exist, or a folder without such a file.
    """
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(
                p
                for p in path.iterdir()
                if p.is_file() and not p.name.startswith(".") and keep(p)
            )
            if not inside:
                raise InputError(str(path), f"folder holds no {what}")
            files.extend(inside)
        elif path.exists():
            files.append(path)
        else:
            raise InputError(str(path), "no such file or folder")
    return files
