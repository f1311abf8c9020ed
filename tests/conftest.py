"""Shared fixtures: tiny hand-readable fleets, stores under tmp_path, the public traces."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from hypothesis import settings

from fleetaudit.model.store import Store, open_store

DATA = Path(__file__).parent / "data"

# No per-example deadline for any property test: on a loaded 2-core machine an example
# takes several times its idle time, and speed is measured by benchmarks/, not here.
settings.register_profile("fleetaudit", deadline=None)
settings.load_profile("fleetaudit")

# The Spark cluster helper imports pyspark at the top; without the extra (the main
# test run), --doctest-modules must not import it (its tests skip on their own).
collect_ignore = [] if importlib.util.find_spec("pyspark") else ["spark_cluster.py"]
REPO = Path(__file__).resolve().parents[1]


def traces_dir() -> Path | None:
    """The public traces: $FLEETAUDIT_TRACES, else ../shared/traces beside the repository."""
    env = os.environ.get("FLEETAUDIT_TRACES")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "traces")
    for candidate in candidates:
        if (candidate / "alibaba-gpu-v2023" / "openb_node_list_gpu_node.csv").is_file():
            return candidate
    return None


@pytest.fixture(autouse=True)
def _no_inherited_terminal_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables are laid out as on a pipe (120 columns) unless a test sets ``COLUMNS``
    itself: the size of the terminal pytest runs in, or the 80 columns pytest-xdist
    gives its workers, must not change what a test sees."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture
def traces() -> Path:
    found = traces_dir()
    if found is None:
        pytest.skip(
            "the public traces are absent (set FLEETAUDIT_TRACES or place ../shared/traces)"
        )
    return found


@pytest.fixture
def tiny_dir() -> Path:
    return DATA / "tiny"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "fleet.duckdb"


@pytest.fixture
def store(db_path: Path) -> Iterator[Store]:
    s = open_store(db_path)
    try:
        yield s
    finally:
        s.close()


def write(path: Path, text: str) -> Path:
    """Write a small input file (dedented by the caller) and return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.lstrip("\n"), encoding="utf-8")
    return path


# The nodes frame as the store hands it to the algorithms (fleetaudit.model.schema NODES).
NODE_SCHEMA = {
    "node_id": pl.String,
    "gpu_model": pl.String,
    "gpus": pl.Int64,
    "cpus": pl.Float64,
    "memory_gib": pl.Float64,
    "switch_id": pl.String,
    "health": pl.String,
}

# Allocation frames of the eviction what-ifs (reclaim, harvest): no workload or tenant.
ALLOC_SCHEMA = {
    "alloc_id": pl.String,
    "job_id": pl.String,
    "node_id": pl.String,
    "gpus": pl.Float64,
    "cpus": pl.Float64,
    "memory_gib": pl.Float64,
    "priority": pl.String,
    "start_time": pl.Datetime("us"),
    "end_time": pl.Datetime("us"),
    "checkpoint_interval_s": pl.Float64,
    "sleepable": pl.Boolean,
}


def command_paths(leaves_only: bool = False) -> list[tuple[str, ...]]:
    """Every command path the CLI registers (groups too, unless ``leaves_only``), sorted.

    Tests of help texts are built from this, so a new command is checked without
    anyone adding it to a list.
    """
    import typer

    from fleetaudit.cli import app

    paths: list[tuple[str, ...]] = []

    def walk(command: object, path: tuple[str, ...]) -> None:
        subs = getattr(command, "commands", {})
        if path and not (leaves_only and subs):
            paths.append(path)
        for name, sub in sorted(subs.items()):
            if not getattr(sub, "hidden", False):
                walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return paths

