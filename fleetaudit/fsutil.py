"""Files written whole or not at all: a temp file in the same folder, then a rename."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from fleetaudit.errors import UsageError


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path``; renamed over it when the block succeeds.

    The folder is created if missing. On failure the temporary file is removed
    and ``path`` is left as it was; a path that cannot be written (a folder, no
    permission, a full disk) raises :class:`UsageError` naming it.
    """
    if path.is_dir():
        raise UsageError(f"{path}: is a folder; give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write here: {exc.strerror or exc}") from exc
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {exc.strerror or exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
