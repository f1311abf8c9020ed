"""Sanity notes instead of silence: shapes beyond the fleet, absurd shapes, windows
outside the data, stores without allocations or requests (tests/data/report_hand)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetaudit.cli import app

from .conftest import DATA

HAND = DATA / "report_hand"
runner = CliRunner()


def run(*args: str | Path) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout + result.stderr


@pytest.fixture(scope="module")
def hand_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("sanity") / "hand.duckdb"
    assert run("ingest", HAND, "--db", db)[0] == 0
    return db


@pytest.mark.parametrize(
    ("shape", "note"),
    [
        # H20: n1, n2 (sw-a) and n3 (sw-b, down): 24 GPUs installed
        (("--gpus", "32"), "asks for 32 GPUs, more than the 24 installed on its models"),
        # three 8-GPU pods in one domain: sw-a holds two, sw-b one
        (("--gpus", "24", "--locality", "switch"), "needs 3 pods in one switch domain of one model; the largest holds 2"),
        (("--gpus", "16", "--gpus-per-pod", "16", "--locality", "any"), "a pod of 16 GPUs is larger than any node of its models (8 GPUs)"),
    ],
)  # fmt: skip
def test_a_shape_beyond_the_fleet_says_it_can_never_start(
    hand_db: Path, shape: tuple[str, ...], note: str
) -> None:
    code, output = run("shapes", "--db", hand_db, "--model", "H20", *shape)
    assert code == 0, output
    assert note in " ".join(output.split()) and "it can never start" in output


def test_a_shape_that_fits_gets_no_such_note(hand_db: Path) -> None:
    code, output = run("shapes", "--db", hand_db, "--model", "H20", "--gpus", "16", "--locality", "switch")
    assert code == 0 and "never start" not in output


@pytest.mark.parametrize(
    ("option", "value"), [("--gpus", "1e30"), ("--cpus-per-gpu", "1e7"), ("--memory-gib-per-gpu", "1e10")]
)
def test_absurd_shapes_are_rejected_at_the_ingest_bounds(hand_db: Path, option: str, value: str) -> None:
    code, output = run("shapes", "--db", hand_db, "--model", "H20", "--gpus", "8", option, value)
    assert code == 2
    assert "above the sanity bound" in output and option in output
    assert "Traceback" not in output


def test_a_window_longer_than_the_data(hand_db: Path) -> None:
    """The data runs from 2025-12-25 (a3 starts) to 2026-01-02 (a10 starts): 8 days."""
    code, output = run("report", "--db", hand_db, "--since", "10d", "--step", "6h")
    assert code == 0, output
    flat = " ".join(output.split())
    assert "the window (10.0 days) is longer than the data (8.0 days;" in flat


def test_a_window_after_the_data(hand_db: Path) -> None:
    code, output = run(
        "report", "--db", hand_db, "--at", "2026-01-05T00:00:00Z", "--since", "1d", "--step", "6h"
    )
    assert code == 0, output
    assert "the window lies after all of the data" in " ".join(output.split())


def test_an_inventory_only_store(tmp_path: Path) -> None:
    db = tmp_path / "inventory.duckdb"
    assert run("ingest", HAND / "nodes.csv", "--db", db)[0] == 0
    code, output = run("shapes", "--db", db, "--model", "H20", "--gpus", "8")
    assert code == 2 and "give --at TIME for a snapshot of the inventory" in " ".join(output.split())
    code, output = run("shapes", "--db", db, "--model", "H20", "--gpus", "8", "--at", "2026-01-01T00:00:00Z")
    assert code == 0, output
    assert "the store holds no allocations: every GPU reads free" in " ".join(output.split())


def test_a_store_without_requests_says_so(tmp_path: Path) -> None:
    db = tmp_path / "norequests.duckdb"
    assert run("ingest", HAND / "nodes.csv", HAND / "allocations.csv", "--db", db)[0] == 0
    code, output = run("shapes", "--db", db)
    assert code == 0, output
    assert "the store holds no requests" in " ".join(output.split())
    code, output = run("report", "--db", db, "--since", "1d", "--step", "6h")
    assert code == 0, output
    assert "the store holds no requests: no shape is evaluated" in " ".join(output.split())


def test_fill_on_a_store_without_requests_says_so(tmp_path: Path) -> None:
    db = tmp_path / "norequests.duckdb"
    assert run("ingest", HAND / "nodes.csv", HAND / "allocations.csv", "--db", db)[0] == 0
    code, output = run("whatif", "placement", "--db", db, "--fill", "50")
    assert code == 2
    assert "the store holds no requests to feed" in " ".join(output.split())
    assert "ask for no GPUs" not in output


@pytest.mark.parametrize(
    ("at", "note"),
    [
        # the data runs from 2025-12-25 (a3 starts) to 2026-01-02 (a10 starts)
        ("2025-12-01T00:00:00Z", "--at 2025-12-01T00:00:00Z is before all of the data (the data runs from 2025-12-25"),
        ("2026-01-05T00:00:00Z", "--at 2026-01-05T00:00:00Z is after all of the data (the data runs from 2025-12-25"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("extra", [(), ("--csv",), ("--duration", "6h")])
def test_state_at_an_instant_outside_the_data_says_so(
    hand_db: Path, at: str, note: str, extra: tuple[str, ...]
) -> None:
    """The same note as shapes and report give (on stderr, so --csv stays clean)."""
    result = runner.invoke(app, ["state", "--db", str(hand_db), "--at", at, *extra])
    assert result.exit_code == 0, result.output
    assert note in " ".join(result.stderr.split())
    assert "note:" not in result.stdout


def test_state_inside_the_data_gives_no_note(hand_db: Path) -> None:
    code, output = run("state", "--db", hand_db, "--at", "2025-12-30T00:00:00Z")
    assert code == 0, output
    assert "note:" not in output
    code, output = run("state", "--db", hand_db, "--at", "2026-01-05T00:00:00Z", "--quiet")
    assert code == 0 and "note:" not in output
