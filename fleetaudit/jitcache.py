"""Where numba keeps the compiled harvesting replay, and whether it is there yet.

numba (``cache=True``) writes its cache into ``__pycache__`` beside the source.
An installed package's folder can be read-only (a system install, a cron user);
numba then falls back to ``~/.cache/numba``, and where the user has no usable
home either (``HOME`` unset or ``/nonexistent``, as for service users) it
silently compiles again on every run. :func:`choose_cache_dir` sets
``NUMBA_CACHE_DIR`` before numba is imported when the package folder is not
writable: ``$XDG_CACHE_HOME/fleetaudit`` or ``~/.cache/fleetaudit``, else a
folder of the user's own in the temporary folder. A ``NUMBA_CACHE_DIR`` the
user set is kept.

No numba here: this module runs before it is imported.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

ENV = "NUMBA_CACHE_DIR"


def _writable(folder: Path) -> bool:
    """Whether files can be created in ``folder`` (created if missing): tried, not guessed
    (root passes ``os.access`` on a read-only file system's folders too)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError:
        return False
    return True


def _own_private(folder: Path) -> bool:
    """A folder in a shared temporary folder is used only when it is ours and private."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = folder.stat()
    except OSError:
        return False
    return st.st_uid == os.getuid() and (st.st_mode & 0o077) == 0


def user_cache_candidates() -> list[Path]:
    """The user's cache folders, most preferred first."""
    found: list[Path] = []
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        found.append(Path(xdg) / "fleetaudit")
    home = os.environ.get("HOME") or os.path.expanduser("~")
    if home and os.path.isabs(home) and home != "/":
        found.append(Path(home) / ".cache" / "fleetaudit")
    return found


def choose_cache_dir(source: Path) -> Path | None:
    """Set ``NUMBA_CACHE_DIR`` where ``source``'s ``__pycache__`` cannot be written.

    Returns the folder numba will cache into (None: it cannot cache at all, and
    compiles on every run).
    """
    given = os.environ.get(ENV)
    if given:
        return Path(given)
    in_tree = source.parent / "__pycache__"
    if _writable(in_tree):
        return in_tree
    for candidate in user_cache_candidates():
        if _writable(candidate):
            os.environ[ENV] = str(candidate)
            return candidate
    fallback = Path(tempfile.gettempdir()) / f"fleetaudit-{os.getuid()}"
    if _own_private(fallback) and _writable(fallback):
        os.environ[ENV] = str(fallback)
        return fallback
    return None


def cache_folder(source: Path) -> Path:
    """The folder numba reads ``source``'s cache from (given ``NUMBA_CACHE_DIR`` or not)."""
    given = os.environ.get(ENV)
    if not given:
        return source.parent / "__pycache__"
    folder = os.path.dirname(os.path.abspath(source))  # numba's own sub-path rule
    digest = hashlib.sha1(folder.encode()).hexdigest()
    return Path(given) / f"{os.path.basename(folder)}_{digest}"


def is_cached(source: Path) -> bool:
    """Whether a cache of ``source`` newer than the source is there (else the next
    run compiles). A hint for the "compiling" notice, not a guarantee: numba also
    recompiles for another numba or CPU."""
    folder = cache_folder(source)
    try:
        stamp = source.stat().st_mtime
        indexes = list(folder.glob(f"{source.stem}.*.nbi"))
    except OSError:
        return False
    return bool(indexes) and all(p.stat().st_mtime >= stamp for p in indexes)
