"""The wheel carries queries/, templates/ and sample_data/; every query prepares and is used."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import zipfile
from datetime import datetime
from pathlib import Path

import pytest

from fleetaudit.core.resources import resource_dir
from fleetaudit.model.store import Store

REPO = Path(__file__).resolve().parents[1]
QUERIES = sorted((REPO / "queries").glob("*.sql"))


def test_wheel_holds_the_data_folders(tmp_path: Path) -> None:
    pytest.importorskip("hatchling")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(REPO),
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        # without compiling the harvesting replay into it (minutes): test_jitcache builds
        # a prebuilt cache as the hook does
        env={**os.environ, "FLEETAUDIT_PREBUILT_JIT": "0"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("fleetaudit-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for sql in QUERIES:
        assert f"fleetaudit/queries/{sql.name}" in names
    templates = sorted((REPO / "templates").glob("*.html"))
    assert templates, "templates/ holds the report's HTML templates"
    for template in templates:
        assert f"fleetaudit/templates/{template.name}" in names
    for sample in (REPO / "sample_data").iterdir():
        assert f"fleetaudit/sample_data/{sample.name}" in names
    assert not [n for n in names if n.startswith("fleetaudit/") and "__pycache__" in n]
    assert not [n for n in names if "_jitcache" in n]  # asked not to compile


SAMPLE_PARAMS = {
    "at": datetime(2026, 1, 1),
    "start": datetime(2026, 1, 1),
    "end": datetime(2026, 1, 2),
    "scenario": None,
    "name": "s",
    "command": "test",
    "options": "{}",
    "base": "recorded",
    "kind": "compaction",
    "document": "{}",
    "generated_at": datetime(2026, 1, 2),
    "step_s": 900.0,
    "span_s": 86400.0,
    "figures": "{}",
    "demand": "waited",
    "shapes": "default",
    "exported": datetime(2026, 1, 1),
    "interval_us": 3_600_000_000,
    "ingest_id": 1,
    "limit": 10,
    "upper": ["DCGM_FI_DEV_GPU_UTIL"],
}

# Queries that read more than the store's tables: the raw telemetry that `rollup`
# registers (raw_telemetry), and a store's telemetry that holds rolled-up rows.
QUERY_SETUP = {
    "rollup_": "CREATE TEMP VIEW raw_telemetry AS SELECT * FROM telemetry",
    "telemetry_": "ALTER TABLE telemetry ADD COLUMN IF NOT EXISTS samples BIGINT; "
    "ALTER TABLE telemetry ADD COLUMN IF NOT EXISTS sample_interval_s DOUBLE",
}


# The alibaba-gpu-v2026 adapter's queries read its scratch tables and the release's files,
# which an empty store lacks; tests/test_ingest_asi2026.py and tests/test_paper.py run them all.
ASI_QUERIES = {p.stem for p in QUERIES if p.stem.startswith(("asi_", "paper_"))}


@pytest.mark.parametrize("path", QUERIES, ids=[p.stem for p in QUERIES])
def test_query_binds_against_the_schema(store: Store, path: Path) -> None:
    """Every query binds against an empty store: no syntax error, no column typo."""
    if path.stem in ASI_QUERIES:
        pytest.skip("run on the ASI fixture by tests/test_ingest_asi2026.py and test_paper.py")
    text = path.read_text()
    names = set(re.findall(r"\$(\w+)", text))
    statements = [s for s in text.split(";") if s.strip() and not _only_comments(s)]
    if len(statements) > 1 or names - SAMPLE_PARAMS.keys():
        assert not names, f"{path.name}: a multi-statement file cannot take parameters"
        return  # DDL, run at every store open (the store fixture ran it)
    for prefix, setup in QUERY_SETUP.items():
        if path.stem.startswith(prefix) and path.stem.endswith(
            ("_rolled", "_skipped", "_telemetry", "_metrics")
        ):
            store.run(setup)
    if path.stem == "snapshot_export_time":  # reads the column kubernetes ingest adds
        store.run("ALTER TABLE nodes ADD COLUMN IF NOT EXISTS snapshot_time TIMESTAMP")
    store.sql(f"EXPLAIN {text}", {n: SAMPLE_PARAMS[n] for n in names})


def _only_comments(text: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in text.splitlines())


def test_every_query_file_is_used_and_every_used_query_exists() -> None:
    source = "\n".join(p.read_text() for p in (REPO / "fleetaudit").rglob("*.py"))
    used = set(re.findall(r'(?:query|execute|load_sql)\(\s*"([a-z_]+)"', source))
    used |= set(re.findall(r'\b(?:query|counts)="([a-z_]+)"', source))  # rollup sources
    files = {p.stem for p in QUERIES}
    assert used - files == set(), "queries called but missing"
    assert files - used == set(), "query files nothing calls"


def test_resources_resolve() -> None:
    assert (resource_dir("queries") / "nodes.sql").is_file()
    assert resource_dir("sample_data").is_dir()
    assert (resource_dir("templates") / "report.html").is_file()


def test_import_contracts_hold() -> None:
    """The architecture of pyproject.toml's import-linter contracts (STYLE.md 7.2)."""
    # run by this Python (its `lint-imports` script may be in no folder on PATH: a venv
    # used without activating it, or one that sees the system's packages)
    assert importlib.util.find_spec("importlinter"), "a test dependency: pip install '.[test]'"
    entry = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    done = subprocess.run(
        [sys.executable, "-c", entry, "--config", str(REPO / "pyproject.toml")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
