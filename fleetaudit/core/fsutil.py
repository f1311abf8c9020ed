"""Output files: ``-`` is stdout, devices and FIFOs are written in place, regular files whole.

Every output option of the command line (``--json``, ``--html``, ``--out``) is checked
by :func:`check_outputs` (never the store, another output or an input of the call) and
goes through :func:`write_output`:

- ``-`` (and ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``) writes to that
  open stream of the process, never to a file of that name;
- a path that exists and is not a regular file (a device such as ``/dev/null``,
  a FIFO) is opened and written in place, never replaced;
- a regular file (or a missing one) is written whole or not at all: a temporary
  file in the same folder, then a rename. Missing parent folders are created.
  The file gets the mode ``cp`` would give it: the replaced file's mode when it
  existed (a symlink's target is replaced, the link kept), else 0666 less the
  umask.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path

from fleetaudit.core.errors import UsageError, no_space

_FD_PATH = re.compile(r"/(?:dev/fd|proc/self/fd)/(\d+)")
_STREAM_FDS = {"-": 1, "/dev/stdout": 1, "/dev/stderr": 2}


def stream_fd(path: Path | str) -> int | None:
    """The file descriptor a path names as an open stream of this process, else None.

    >>> stream_fd("-"), stream_fd("/dev/fd/3"), stream_fd("out.json")
    (1, 3, None)
    """
    text = str(path)
    if text in _STREAM_FDS:
        return _STREAM_FDS[text]
    match = _FD_PATH.fullmatch(text)
    return int(match.group(1)) if match else None


def is_stdout(path: Path | str | None) -> bool:
    """Whether an output option names this process's stdout (``-`` or ``/dev/stdout``)."""
    return path is not None and stream_fd(path) == 1


def _real(path: Path | str) -> str:
    """The path a write would land on: symlinks and ``..`` resolved, relative to here."""
    return os.path.realpath(os.path.abspath(os.fspath(path)))


def store_files(store: Path) -> tuple[Path, ...]:
    """The files of a DuckDB store that an output must never replace: the store, its
    write-ahead log and its spill folder."""
    return (store, store.with_name(store.name + ".wal"), store.with_name(store.name + ".tmp"))


def check_outputs(
    outputs: Mapping[str, Path | str | None],
    *,
    store: Path | None = None,
    inputs: Iterable[Path] = (),
) -> bool:
    """Refuse outputs that would destroy what the call reads or writes: one that resolves
    (through ``./``, an absolute path, a symlink) to the store, its write-ahead log or its
    spill folder, to another output of the call, or to an input of the call (or into a
    folder the call reads); and more than one output on stdout. Returns whether one output
    is stdout. Every command checks its outputs here before it starts, and
    :func:`write_output` checks a path whose ``{date}``/``{time}`` expanded late.

    Args:
        outputs: option name (``--json``) -> the path given (None: not given).
        store: the store (``--db``) the call opens.
        inputs: the files and folders the call reads.

    Raises:
        UsageError: naming the option, the path and what it would overwrite.

    >>> check_outputs({"--html": Path("r.html"), "--json": Path("-")}, store=Path("s.duckdb"))
    True
    >>> check_outputs({"--json": Path("./s.duckdb")}, store=Path("s.duckdb"))
    Traceback (most recent call last):
    ...
    fleetaudit.core.errors.UsageError: --json s.duckdb: is the store (--db s.duckdb); writing it would destroy the store; give another path
    """
    given = {name: path for name, path in outputs.items() if path is not None}
    to_stdout = [name for name, path in given.items() if is_stdout(path)]
    if len(to_stdout) > 1:
        raise UsageError(f"{' and '.join(to_stdout)}: only one output can go to stdout (-)")
    protected: dict[str, str] = {}  # real path -> what it is
    if store is not None:
        kinds = ("", "'s write-ahead log", "'s spill folder")
        for part, what in zip(store_files(store), kinds, strict=True):
            protected[_real(part)] = (
                f"is the store{what} (--db {store}); writing it would destroy the store"
            )
    readable = [(_real(p), p) for p in inputs]
    seen: dict[str, str] = {}  # real path -> the option that writes it
    for name, path in given.items():
        if stream_fd(path) is not None:
            continue  # an open stream of the process, never a file of that name
        real = _real(path)
        if real in protected:
            raise UsageError(f"{name} {path}: {protected[real]}; give another path")
        if real in seen:
            raise UsageError(
                f"{seen[real]} and {name}: both name {path}; one would overwrite the other; "
                "give each its own path"
            )
        for read, shown in readable:
            if real == read or real.startswith(read.rstrip(os.sep) + os.sep):
                what = "is an input" if real == read else "lies in a folder"
                raise UsageError(
                    f"{name} {path}: {what} this call reads ({shown}); give another path"
                )
        seen[real] = name
    return bool(to_stdout)


def current_umask() -> int:
    """The process's umask (read without changing it where /proc tells it)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write_fd(fd: int, data: bytes, path: Path | str) -> None:
    if fd == 1:
        sys.stdout.flush()
    elif fd == 2:
        sys.stderr.flush()
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except BrokenPipeError:
        raise  # the reader left (`| head`): the command line ends quietly
    except OSError as exc:
        raise no_space(exc) or UsageError(f"{path}: cannot write: {exc.strerror or exc}") from exc


def write_output(path: Path | str, data: bytes | str) -> None:
    """Write ``data`` to an output path (see the module's rules)."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd = stream_fd(path)
    if fd is not None:
        _write_fd(fd, payload, path)
        return
    target = Path(path)
    try:
        st = os.stat(target)  # follows a symlink
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UsageError(f"{target}: cannot write here: {exc.strerror or exc}") from exc
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{target}: is a folder; give a file name")
    if st is not None and not stat.S_ISREG(st.st_mode):
        # a device or a FIFO: written in place, never replaced by a regular file
        try:
            out = os.open(target, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise UsageError(f"{target}: cannot write: {exc.strerror or exc}") from exc
        try:
            _write_fd(out, payload, target)
        finally:
            os.close(out)
        return
    with atomic_path(target) as tmp:
        tmp.write_bytes(payload)


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path``; renamed over it when the block succeeds.

    The folder is created if missing. On failure the temporary file is removed
    and ``path`` is left as it was; a path that cannot be written (a folder, no
    permission, a full disk) raises :class:`UsageError` naming it. The result
    keeps the replaced file's mode, or gets 0666 less the umask. A symlink is
    kept: its target is replaced.
    """
    if path.is_dir():
        raise UsageError(f"{path}: is a folder; give a file name")
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = 0o666 & ~current_umask()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
    except OSError as exc:
        raise no_space(exc) or UsageError(f"{path}: cannot write here: {exc.strerror or exc}") from exc
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, mode)
        os.replace(tmp_path, path)
    except OSError as exc:
        raise no_space(exc) or UsageError(f"{path}: cannot write: {exc.strerror or exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()


def expand_path(template: Path, when: datetime) -> Path:
    """``{date}`` and ``{time}`` in an output path become ``when``'s date and time (UTC);
    a stream (``-``, ``/dev/stdout``) stays as it is.

    >>> expand_path(Path("reports/{date}-{time}.html"), datetime(2026, 5, 1, 6, 30))
    PosixPath('reports/2026-05-01-063000.html')
    """
    if stream_fd(template) is not None:
        return template
    text = str(template).replace("{date}", when.strftime("%Y-%m-%d"))
    return Path(text.replace("{time}", when.strftime("%H%M%S")))
