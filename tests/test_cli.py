"""The command line: help texts, exit codes, one-line errors, the store left unchanged."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from fleetaudit import __version__, api
from fleetaudit.cli import app
from fleetaudit.store import open_store
from tests.conftest import write

runner = CliRunner()
COMMANDS = ["ingest", "status", "state", "generate", "demo"]


def invoke(*args: str | Path) -> object:
    return runner.invoke(app, [str(a) for a in args])


def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"fleetaudit {__version__}"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str) -> None:
    result = invoke(command, "--help")
    assert result.exit_code == 0, result.output
    assert "--db" in result.stdout or command == "generate"
    # the first help line says what the command computes
    doc = app.registered_commands[
        [c.name or c.callback.__name__ for c in app.registered_commands].index(command)
    ]
    assert doc.callback.__doc__ and len(doc.callback.__doc__.strip()) > 40


def test_ingest_then_state_on_the_tiny_fleet(tmp_path: Path, tiny_dir: Path) -> None:
    db = tmp_path / "fleet.duckdb"
    result = invoke("ingest", tiny_dir, "--db", db)
    assert result.exit_code == 0, result.output
    assert "allocations" in result.stdout and result.stderr == ""
    out = tmp_path / "state.csv"
    result = invoke("state", "--db", db, "--at", "2026-01-01T12:00:00Z", "--out", out)
    assert result.exit_code == 0, result.output
    # H20: installed 48 = unhealthy 8 + high 11 + low 2 + idle 27 (the tiny README's ledger)
    assert "│ H20   │        48 │         8 │         11 │         2 │   27 │" in result.stdout
    frame = pl.read_csv(out)
    assert frame.filter(pl.col("node_id") == "n1")["free_gpus"].item() == 4


def test_db_from_environment(
    tmp_path: Path, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "env.duckdb"
    monkeypatch.setenv("FLEETAUDIT_DB", str(db))
    assert invoke("ingest", tiny_dir).exit_code == 0
    assert db.exists()
    result = invoke("status")
    assert result.exit_code == 0
    assert "export time 2026-01-02T01:00:00Z" in result.stdout


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "fleet.duckdb"
    bad = write(tmp_path / "in" / "allocations.csv", "alloc_id,node_id\na1,n1\n")
    result = invoke("ingest", bad, "--db", db)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == f"fleetaudit: error: {bad} column gpus: required column missing\n"
    assert not db.exists()  # a store this call created is removed again


def test_failed_ingest_leaves_the_store_unchanged(tmp_path: Path, tiny_dir: Path) -> None:
    db = tmp_path / "fleet.duckdb"
    assert invoke("ingest", tiny_dir, "--db", db).exit_code == 0
    with open_store(db) as s:
        before = s.sql("SELECT * EXCLUDE (_ingest_id) FROM allocations ORDER BY alloc_id")
    changed = write(
        tmp_path / "in" / "allocations.csv",
        (tiny_dir / "allocations.csv").read_text().replace("a1,j1,n1,3", "a1,j1,n1,x"),
    )
    result = invoke("ingest", changed, tmp_path / "in" / "nodes.parquet", "--db", db, "--strict")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    with open_store(db) as s:
        assert s.sql("SELECT * EXCLUDE (_ingest_id) FROM allocations ORDER BY alloc_id").equals(
            before
        )
    result = invoke("ingest", changed, "--db", db, "--strict")
    assert result.exit_code == 2
    assert result.stderr == (
        f"fleetaudit: error: {changed} row 1, column gpus: x is not a number "
        "(1 row(s) rejected; --strict writes nothing)\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["state", "--at", "tomorrow"], "--at: 'tomorrow' is not a time; write ISO 8601"),
        (
            ["state", "--duration", "6 hours"],
            "--duration: '6 hours' is not a duration; write e.g. 90s",
        ),
        (
            ["state", "--scenario", "nope"],
            "--scenario: no scenario named 'nope'; scenarios: none saved yet",
        ),
        (["state", "--out", "x.txt"], "--out: x.txt must end in .csv or .parquet"),
        (
            ["ingest", "--format", "slurm", "x.csv"],
            "unknown --format 'slurm'; use native or alibaba-gpu-v2023",
        ),
        (["generate", "out", "--nodes", "0"], "nodes must be"),
    ],
)
def test_usage_errors(tmp_path: Path, tiny_dir: Path, args: list[str], message: str) -> None:
    db = tmp_path / "fleet.duckdb"
    assert invoke("ingest", tiny_dir, "--db", db).exit_code == 0
    result = invoke(*args, "--db", db) if args[0] != "generate" else invoke(*args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("fleetaudit: error: ")
    assert message in result.stderr
    assert result.stderr.count("\n") == 1


def test_missing_store_is_a_clear_error(tmp_path: Path) -> None:
    result = invoke("status", "--db", tmp_path / "none.duckdb")
    assert result.exit_code == 2
    assert "no fleetaudit store here; run `fleetaudit ingest` first" in result.stderr


def test_scenario_round_trip(tmp_path: Path, tiny_dir: Path) -> None:
    """A saved state is what --scenario reads: here a1 moved from n1 to n3."""
    db = tmp_path / "fleet.duckdb"
    assert invoke("ingest", tiny_dir, "--db", db).exit_code == 0
    options = api.StoreOptions(db)
    at = datetime(2026, 1, 1, 12)
    with api.writing(options) as store:
        moved = store.sql("SELECT * EXCLUDE (_ingest_id) FROM allocations WHERE alloc_id = 'a1'")
        moved = moved.with_columns(pl.lit("n3").alias("node_id"))
        api.save_scenario(store, "moved", moved, base="recorded", command="test", options={}, at=at)
    recorded = api.node_state(options, at).state
    scenario = api.node_state(options, at, scenario="moved").state
    free = {
        name: dict(zip(frame["node_id"], frame["free_gpus"], strict=True))
        for name, frame in (("recorded", recorded), ("scenario", scenario))
    }
    assert (free["recorded"]["n1"], free["recorded"]["n3"]) == (4, 8)
    assert (free["scenario"]["n1"], free["scenario"]["n3"]) == (7, 5)
    result = invoke("status", "--db", db)
    assert "moved" in result.stdout


def test_generate_writes_a_fleet_that_ingests(tmp_path: Path) -> None:
    out = tmp_path / "fleet"
    result = invoke("generate", out, "--nodes", "24", "--days", "2", "--format", "csv")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [
        "allocations.csv",
        "nodes.csv",
        "requests.csv",
        "telemetry.csv",
    ]
    result = invoke("ingest", out, "--db", tmp_path / "g.duckdb", "--strict")
    assert result.exit_code == 0, result.output


def test_demo_in_process(tmp_path: Path) -> None:
    result = invoke("demo", "--db", tmp_path / "demo.duckdb")
    assert result.exit_code == 0, result.output
    assert "capacity by GPU model" in result.stdout
    assert "GPUs at 2026-05-01T00:00:00Z" in result.stdout


def test_installed_console_script_runs_the_demo_from_another_folder(tmp_path: Path) -> None:
    """The installed `fleetaudit` (pip install .) finds its sample data from any folder."""
    exe = shutil.which("fleetaudit")
    if exe is None:
        pytest.skip("fleetaudit is not installed as a console script (pip install . first)")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}
    done = subprocess.run(
        [exe, "demo"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "fleetaudit.duckdb").exists()
    assert "capacity by GPU model" in done.stdout
    assert done.stderr == ""


def test_python_dash_m(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fleetaudit", "--version"],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.returncode == 0
    assert done.stdout.strip() == f"fleetaudit {__version__}"
