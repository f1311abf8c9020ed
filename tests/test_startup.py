"""Start-up: the command line imports its engines only when a command runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from fleetaudit.api.harvest_api import HarvestRun
from fleetaudit.core.options import HARVEST_SINCE
from fleetaudit.api.rollup_api import SOURCES
from fleetaudit.core import options
from fleetaudit.inputs.generate import GenerateOptions
from fleetaudit.inputs.generate_slurm import SlurmGenerateOptions
from fleetaudit.inputs.ingest import FORMATS
from fleetaudit.inputs.ingest.alibaba import DEFAULT_TRACE_START
from fleetaudit.inputs.ingest.asi2026 import DEFAULT_TRACE_START as ASI_TRACE_START
from fleetaudit.whatif.compaction import CompactionOptions
from fleetaudit.whatif.harvest import POLICIES as VICTIM_POLICIES
from fleetaudit.whatif.harvest import HarvestOptions
from fleetaudit.whatif.placement import POLICIES, QUEUES

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("polars", "numpy", "duckdb", "numba", "pyarrow", "jinja2", "scipy")


def _modules_after(code: str) -> set[str]:
    """The top-level packages loaded by a fresh interpreter that runs ``code``."""
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=REPO, check=False
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "code",
    [
        "import fleetaudit.cli",
        "import fleetaudit.core.options",
        # --help of the program and of a command: typer exits 0 after printing
        "import sys, io, contextlib\nimport fleetaudit.cli as c\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        c.app(['--help'], prog_name='fleetaudit')\n"
        "    except SystemExit:\n        pass\n"
        "    try:\n        c.app(['whatif', 'harvesting', '--help'], prog_name='fleetaudit')\n"
        "    except SystemExit:\n        pass",
    ],
    ids=["import-cli", "import-options", "help"],
)
def test_start_up_imports_no_engine(code: str) -> None:
    loaded = _modules_after(code)
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_a_command_still_imports_its_engine() -> None:
    """The probe can fail: running a command does load polars."""
    code = (
        "import fleetaudit.cli as c, io, contextlib\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        c.app(['status', '--db', '/nonexistent/x.duckdb'], prog_name='fleetaudit')\n"
        "    except SystemExit:\n        pass"
    )
    assert "polars" in _modules_after(code)


def test_the_light_names_are_the_engines_names() -> None:
    """The command line declares from fleetaudit.core.options what the engines accept."""
    assert options.INGEST_FORMATS == FORMATS
    assert options.ALIBABA_TRACE_START == DEFAULT_TRACE_START
    assert options.PLACEMENT_POLICIES == POLICIES
    assert options.VICTIM_POLICIES == VICTIM_POLICIES
    assert options.ROLLUP_SOURCES == tuple(SOURCES)
    assert options.PLACEMENT_QUEUES == QUEUES
    assert options.ASI_TRACE_START == ASI_TRACE_START
    assert options.CompactionOptions is CompactionOptions
    assert options.GenerateOptions is GenerateOptions
    assert options.SlurmGenerateOptions is SlurmGenerateOptions
    assert options.HarvestRun is HarvestRun


def test_harvest_run_defaults_are_the_engines() -> None:
    """HarvestRun spells the engine's defaults as durations; they must not drift apart."""
    run = HarvestRun()
    for policy in VICTIM_POLICIES:
        assert HarvestOptions.of_run(run, policy) == HarvestOptions(policy=policy)
    assert run.since is None  # the default: HARVEST_SINCE, from the data's first record on
    assert HARVEST_SINCE == timedelta(days=7)


@pytest.mark.parametrize("files", [["nodes.csv", "allocations.csv"], ["."]], ids=["tiny", "sample"])
def test_ingest_loads_no_arrow(tmp_path: Path, files: list[str]) -> None:
    """Ingest reads its few result rows without Arrow: pyarrow and numpy stay unloaded
    (the sample's telemetry too, whose fraction columns are counted for the percent check)."""
    folder = REPO / ("tests/data/tiny" if files != ["."] else "sample_data")
    paths = [str(folder / f) for f in files]
    code = (
        "import io, contextlib, fleetaudit.cli as c\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    c.app(['ingest', *{paths!r}, "
        f"'--db', {str(tmp_path / 's.duckdb')!r}], prog_name='fleetaudit', standalone_mode=False)"
    )
    loaded = _modules_after(code)
    assert "duckdb" in loaded
    assert not loaded & {"pyarrow", "numpy"}, sorted(loaded & {"pyarrow", "numpy"})


@pytest.mark.parametrize("where", ["", "WHERE false"], ids=["rows", "empty"])
def test_small_frame_is_the_arrow_frame(tmp_path: Path, where: str) -> None:
    """Store.small_frame gives the frame Store.sql gives: names, types, nulls, order."""
    from fleetaudit.model.store import open_store

    with open_store(tmp_path / "s.duckdb") as store:
        text = (
            "SELECT * FROM (VALUES ('a', 1::BIGINT, 2::INTEGER, 0.5::DOUBLE, true), "
            "(NULL, NULL, NULL, NULL, NULL), ('c', -3, 4, 1e300, false)) "
            f"AS t(s, big, small, x, flag) {where}"
        )
        arrow, rows = store.sql(text), store.small_frame(text)
        assert rows.schema == arrow.schema
        assert rows.equals(arrow)
        assert rows.height == (3 if not where else 0)
        # a type outside the plain ones falls back to Arrow
        stamped = "SELECT TIMESTAMP '2026-01-01 00:00:00' AS t"
        assert store.small_frame(stamped).equals(store.sql(stamped))


def test_help_leaves_typers_markdown_and_traceback_unloaded() -> None:
    """typer's help renderer imports rich's Markdown and Traceback (markdown-it, pygments)
    at its top; the command line never renders either, so --help does not load them."""
    code = (
        "import io, contextlib\nimport fleetaudit.cli as c\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        c.app(['whatif', 'harvesting', '--help'], prog_name='fleetaudit')\n"
        "    except SystemExit:\n        pass"
    )
    loaded = _modules_after(code)
    assert not loaded & {"markdown_it", "pygments"}, sorted(loaded & {"markdown_it", "pygments"})


def test_the_deferred_classes_are_the_real_ones_when_used() -> None:
    """The stand-ins are withdrawn after typer's import: a later import gets rich's own
    module, and typer's names build and match rich's own objects."""
    code = (
        "import fleetaudit.cli, sys\nimport typer.rich_utils as r\n"
        "assert 'rich.markdown' not in sys.modules and 'rich.traceback' not in sys.modules\n"
        "m = r.Markdown('# title')\nimport rich.markdown, rich.traceback\n"
        "assert type(m) is rich.markdown.Markdown and isinstance(m, r.Markdown)\n"
        "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n"
        "    tb = r.Traceback.from_exception(type(e), e, e.__traceback__)\n"
        "assert type(tb) is rich.traceback.Traceback"
    )
    assert {"markdown_it", "pygments"} <= _modules_after(code)


def test_a_command_of_plain_options_loads_no_pydantic(tmp_path: Path) -> None:
    """typer converts option values through pydantic; the command line converts plain
    ones itself (tests/test_cli.py keeps the errors), so a command does not load it."""
    tiny = REPO / "tests" / "data" / "tiny"
    db = str(tmp_path / "s.duckdb")
    shapes = ["shapes", "--json", "--max", "3", "--lock-timeout", "2.5", "--step", "10m"]

    def run(*args: str) -> str:
        return (
            "import io, contextlib, fleetaudit.cli as c\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    c.app({list(args)!r}, prog_name='fleetaudit', standalone_mode=False)"
        )

    loaded = _modules_after(run("ingest", str(tiny), "--percent", "sm_active", "--db", db))
    assert "duckdb" in loaded and "pydantic" not in loaded
    loaded = _modules_after(run(*shapes, "--db", db))
    assert "polars" in loaded and "pydantic" not in loaded
    # the probe can fail: a value that is not plain goes to typer's own conversion
    assert "pydantic" in _modules_after(run(*shapes, "--max", " 3", "--db", db))
