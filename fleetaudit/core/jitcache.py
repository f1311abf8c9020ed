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

A wheel carries the replay compiled when it was built (``hatch_build.py`` runs
:func:`build` into the wheel's ``fleetaudit/whatif/_jitcache``): :func:`choose_cache_dir`
copies it into the chosen folder where that folder holds no current cache of the
source, so the first run of a fresh install loads the replay instead of compiling
it. numba keys a cache by the source's content (SHA-256), its own version, the
Python version and the CPU it compiled for; the kernel compiles for a generic CPU of
the machine's architecture (:data:`CPU_NAME`), so a cache built on one machine of
that architecture loads on another. Where any key differs (another numba, another
Python), the run compiles as before and caches its own.

No numba here: this module runs before it is imported.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import tempfile
from importlib import metadata
from pathlib import Path

ENV = "NUMBA_CACHE_DIR"
CPU_ENV = "NUMBA_CPU_NAME"
CPU_NAME = "generic"  # the architecture's baseline: a cache that loads on any CPU of it
PREBUILT = "_jitcache"  # the wheel's folder of caches compiled at build time, beside the source


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
    """Set ``NUMBA_CACHE_DIR`` where ``source``'s ``__pycache__`` cannot be written, and
    copy the wheel's prebuilt cache there where it holds none of this source (:func:`seed`).

    Returns the folder numba will cache into (None: it cannot cache at all, and
    compiles on every run).
    """
    chosen = _choose(source)
    if chosen is not None:
        seed(source)
    return chosen


def _choose(source: Path) -> Path | None:
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


def numba_version() -> str | None:
    """The installed numba's version, read without importing it."""
    try:
        return metadata.version("numba")
    except metadata.PackageNotFoundError:
        return None


def _current(index: Path, digest: bytes, version: str | None) -> bool:
    """Whether numba would read the cache index ``index`` for a source of SHA-256
    ``digest``: numba's index file is the pickled numba version, then the pickled
    ``(source stamp, entries)``, the stamp being that digest."""
    try:
        with index.open("rb") as f:
            written = pickle.load(f)  # a str: numba's version
            rest = f.read()
    except (OSError, pickle.UnpicklingError, EOFError, ValueError):
        return False
    return written == version and digest in rest


def _indexes(folder: Path, source: Path) -> list[Path]:
    try:
        return sorted(folder.glob(f"{source.stem}.*.nbi"))
    except OSError:
        return []


def is_cached(source: Path) -> bool:
    """Whether a cache of ``source``'s current text, by this numba, is there (else the
    next run compiles); indexes of earlier texts beside it (numba names a function's
    files by its line, so an edit leaves them) do not count. A hint for the
    "compiling" notice, not a guarantee: numba also recompiles for another Python or CPU."""
    try:
        digest = hashlib.sha256(source.read_bytes()).digest()
    except OSError:
        return False
    version = numba_version()
    return any(_current(p, digest, version) for p in _indexes(cache_folder(source), source))


def seed(source: Path) -> int:
    """Copy the caches compiled at build time (``PREBUILT`` beside ``source``) into the
    folder numba reads, for each function whose cache there is missing or not current
    (another source text, another numba). Returns the files copied.

    A build for another numba or source copies nothing: the run compiles as before.
    """
    prebuilt = source.parent / PREBUILT
    shipped = _indexes(prebuilt, source)
    if not shipped:
        return 0
    try:
        digest = hashlib.sha256(source.read_bytes()).digest()
    except OSError:
        return 0
    version = numba_version()
    folder = cache_folder(source)
    copied = 0
    for index in shipped:
        if not _current(index, digest, version) or _current(folder / index.name, digest, version):
            continue
        # the index names its data files <function>.<python>.<n>.nbc
        data = sorted(prebuilt.glob(f"{index.name[: -len('.nbi')]}.*.nbc"))
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for path in [*data, index]:  # the index last: it makes the data visible
                shutil.copyfile(path, folder / path.name)
                copied += 1
        except OSError:
            break  # a folder numba can read but not this process write: compile as before
    return copied


_WARM = "from fleetaudit.whatif import harvest; harvest.warm_up()"


def build(
    out: Path, code: str = _WARM, stem: str = "harvest_kernel", path: tuple[str, ...] = ()
) -> list[Path]:
    """Compile the harvesting replay into ``out`` as a wheel ships it: every function's
    cache index and data files, named as numba names them beside the source.

    Runs ``code`` (the replay once: polars, numpy, numba) in a fresh interpreter that
    imports this fleetaudit (and ``path``) and caches into a scratch folder for the
    generic CPU; keeps the files of the module ``stem``.
    """
    import subprocess
    import sys

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        # the folder that holds this fleetaudit package (not an installed one), at any depth
        root = str(Path(__file__).resolve().parents[len(__name__.split(".")) - 1])
        search = os.pathsep.join(p for p in (*path, root, os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, ENV: scratch, CPU_ENV: CPU_NAME, "PYTHONPATH": search}
        env.pop("NUMBA_CPU_FEATURES", None)
        subprocess.run([sys.executable, "-c", code], env=env, check=True)
        written = [p for p in Path(scratch).rglob(f"{stem}.*") if p.suffix in (".nbi", ".nbc")]
        if not written:
            raise RuntimeError(f"compiling {stem} wrote no cache files")
        for file in written:
            shutil.copyfile(file, out / file.name)
    return sorted(out.iterdir())


def portable_cpu() -> None:
    """Compile for the architecture's generic CPU (unless the user chose one), so that
    caches, the wheel's among them, load on any machine of that architecture. Before
    numba is imported; once it is, its code generator has its CPU already."""
    import sys

    if CPU_ENV not in os.environ and "numba" not in sys.modules:
        os.environ[CPU_ENV] = CPU_NAME
