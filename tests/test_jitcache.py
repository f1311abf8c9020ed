"""The compiled replay's cache where the package folder is read-only (point 8 of issue 16).

A small numba module stands in for the harvesting kernel (which takes a minute or
more to compile): it chooses its cache folder exactly as ``harvest_kernel`` does,
from a package folder made read-only for real (a read-only bind mount when the
tests run as root, who may write anywhere else; chmod otherwise).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fleetaudit.core import jitcache

REPO = Path(__file__).resolve().parents[1]

KERNEL = """
from pathlib import Path
from fleetaudit.core.jitcache import choose_cache_dir, is_cached, portable_cpu
SOURCE = Path(__file__)
CACHE = choose_cache_dir(SOURCE)
portable_cpu()
BEFORE = is_cached(SOURCE)
from numba import njit

@njit(cache=True)
def twice(x):
    return 2 * x
"""
RUN = (
    "import os, sys; sys.path.insert(0, sys.argv[1]); import kernelpkg.kernel as k; "
    "k.twice(21); print(k.CACHE, k.BEFORE, sum(k.twice.stats.cache_hits.values()), "
    "os.environ.get('NUMBA_CACHE_DIR'))"
)


def _read_only_runner(folder: Path) -> list[str]:
    """A command prefix under which ``folder`` is read-only for real."""
    if os.getuid() != 0:
        for path in (folder, *folder.iterdir()):
            if path.is_dir():
                path.chmod(0o555)
        return []
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("running as root without unshare: cannot make a folder read-only")
    probe = subprocess.run(
        [unshare, "-m", "mount", "--bind", "-o", "ro", str(folder), str(folder)],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(f"running as root and cannot bind-mount read-only: {probe.stderr!r}")
    script = 'mount --bind -o ro "$0" "$0" && shift && exec "$@"'
    return [unshare, "-m", "sh", "-c", script, str(folder), "--"]


@pytest.fixture
def package(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    (root / "kernelpkg").mkdir(parents=True)
    (root / "kernelpkg" / "__init__.py").write_text("")
    (root / "kernelpkg" / "kernel.py").write_text(KERNEL)
    return root


def _run(prefix: list[str], root: Path, env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        [*prefix, sys.executable, "-c", RUN, str(root)],
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_read_only_package_caches_in_the_users_cache_folder(package: Path, tmp_path: Path) -> None:
    prefix = _read_only_runner(package / "kernelpkg")
    cache_home = tmp_path / "xdg"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(cache_home)}
    first = _run(prefix, package, env)
    assert first == [str(cache_home / "fleetaudit"), "False", "0", str(cache_home / "fleetaudit")]
    second = _run(prefix, package, env)
    assert second == [str(cache_home / "fleetaudit"), "True", "1", str(cache_home / "fleetaudit")]
    assert not (package / "kernelpkg" / "__pycache__").exists() or not list(
        (package / "kernelpkg" / "__pycache__").glob("*.nbi")
    )


def test_without_a_usable_home_the_cache_goes_to_a_private_temporary_folder(
    package: Path, tmp_path: Path
) -> None:
    prefix = _read_only_runner(package / "kernelpkg")
    temp = tmp_path / "tmp"
    temp.mkdir()
    # HOME inside the read-only folder: unusable even for root
    env = {"PATH": "/usr/bin:/bin", "HOME": str(package / "kernelpkg" / "home"), "TMPDIR": str(temp)}
    expected = temp / f"fleetaudit-{os.getuid()}"
    first = _run(prefix, package, env)
    assert first[:3] == [str(expected), "False", "0"]
    assert _run(prefix, package, env)[:3] == [str(expected), "True", "1"]
    assert (expected.stat().st_mode & 0o777) == 0o700


def test_a_given_numba_cache_dir_is_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(jitcache.ENV, str(tmp_path / "mine"))
    assert jitcache.choose_cache_dir(tmp_path / "k.py") == tmp_path / "mine"


def test_a_writable_package_folder_keeps_numbas_own_place(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(jitcache.ENV, raising=False)
    assert jitcache.choose_cache_dir(tmp_path / "k.py") == tmp_path / "__pycache__"
    assert jitcache.ENV not in os.environ


# --------------------------------------------------------------- the wheel's prebuilt cache


def _prebuilt(package: Path, tmp_path: Path) -> list[Path]:
    """The tiny kernel compiled as the wheel's build hook compiles the replay, placed where
    the wheel puts it (kernelpkg/_jitcache)."""
    built = jitcache.build(
        tmp_path / "built",
        code="import kernelpkg.kernel as k; k.twice(21)",
        stem="kernel",
        path=(str(package),),
    )
    shipped = package / "kernelpkg" / jitcache.PREBUILT
    shipped.mkdir()
    for path in built:
        shutil.copyfile(path, shipped / path.name)
    return built


def test_a_prebuilt_cache_is_loaded_on_the_first_run(package: Path, tmp_path: Path) -> None:
    built = _prebuilt(package, tmp_path)
    assert sorted(p.suffix for p in built) == [".nbc", ".nbi"]
    in_tree = package / "kernelpkg" / "__pycache__"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    # cached before numba loads, and loaded (a hit), not compiled
    assert _run([], package, env) == [str(in_tree), "True", "1", "None"]
    assert {p.name for p in built} <= {p.name for p in in_tree.iterdir()}


def test_a_read_only_install_copies_it_into_the_users_cache(package: Path, tmp_path: Path) -> None:
    _prebuilt(package, tmp_path)
    prefix = _read_only_runner(package / "kernelpkg")
    cache_home = tmp_path / "xdg"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(cache_home)}
    folder = str(cache_home / "fleetaudit")
    assert _run(prefix, package, env) == [folder, "True", "1", folder]


def test_a_prebuilt_cache_of_another_source_is_not_used(package: Path, tmp_path: Path) -> None:
    _prebuilt(package, tmp_path)
    kernel = package / "kernelpkg" / "kernel.py"
    kernel.write_text(kernel.read_text().replace("2 * x", "x + x"))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    first = _run([], package, env)
    assert first[1:3] == ["False", "0"]  # compiled: the shipped cache is of the old text
    assert _run([], package, env)[1:3] == ["True", "1"]  # and cached its own


def test_a_touched_source_of_the_same_text_is_still_cached(package: Path, tmp_path: Path) -> None:
    """numba keys its cache by the source's text, not its time: neither does the notice."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    _run([], package, env)
    kernel = package / "kernelpkg" / "kernel.py"
    later = kernel.stat().st_mtime + 3600
    os.utime(kernel, (later, later))
    assert _run([], package, env)[1:3] == ["True", "1"]


def test_seeding_without_a_prebuilt_folder_copies_nothing(tmp_path: Path) -> None:
    source = tmp_path / "k.py"
    source.write_text("x = 1\n")
    assert jitcache.seed(source) == 0


def _index(path: Path, version: str | None, text: bytes) -> None:
    """A cache index as numba writes it: its version, then (source digest, entries)."""
    digest = hashlib.sha256(text).digest()
    path.write_bytes(pickle.dumps(version) + pickle.dumps((digest, {})))


@pytest.mark.parametrize(
    ("indexes", "cached"),
    [
        ([], False),
        ([("k.f-3.py311.nbi", "current", "x = 1\n")], True),
        ([("k.f-3.py311.nbi", "current", "x = 2\n")], False),  # another text
        ([("k.f-3.py311.nbi", "0.0.1", "x = 1\n")], False),  # another numba
        # an edit moved the function: the old line's index stays beside the new one
        ([("k.f-3.py311.nbi", "current", "x = 2\n"), ("k.f-4.py311.nbi", "current", "x = 1\n")], True),
    ],
)
def test_is_cached_reads_the_indexes_as_numba_does(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, indexes: list[tuple[str, str, str]], cached: bool
) -> None:
    monkeypatch.delenv(jitcache.ENV, raising=False)
    source = tmp_path / "k.py"
    source.write_text("x = 1\n")
    (tmp_path / "__pycache__").mkdir()
    for name, version, text in indexes:
        numba = jitcache.numba_version() if version == "current" else version
        _index(tmp_path / "__pycache__" / name, numba, text.encode())
    assert jitcache.is_cached(source) is cached
