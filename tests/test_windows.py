"""Windows that fit the data, and instants that do not warn about themselves.

The fleet: one 8-GPU node; the data is four hours long (an allocation of 4 GPUs from
00:00, a request submitted at 00:00 and started at 01:00, and the export time 04:00,
set by a snapshot time on the nodes, as a kubectl export sets it). A default window of
7 days would count 164 hours without data as idle.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetaudit.cli import app
from tests.conftest import write

runner = CliRunner()


@pytest.fixture
def four_hours(tmp_path: Path) -> Path:
    folder = tmp_path / "export"
    write(folder / "nodes.csv", """
node_id,gpu_model,gpus,cpus,memory_gib,switch_id,health,snapshot_time
n1,H20,8,64,512,sw-a,healthy,2026-05-01T04:00:00Z
""")
    write(folder / "allocations.csv", """
alloc_id,node_id,gpus,cpus,memory_gib,priority,workload,start_time,end_time
a1,n1,4,16,64,high,training,2026-05-01T00:00:00Z,
""")
    write(folder / "requests.csv", """
request_id,submit_time,start_time,gpu_model,gpus,cpus_per_gpu,memory_gib_per_gpu,duration_s,priority
r1,2026-05-01T00:00:00Z,2026-05-01T01:00:00Z,H20,2,4,16,3600,high
r2,2026-05-01T02:00:00Z,,H20,8,4,16,,high
""")
    db = tmp_path / "fleet.duckdb"
    done = runner.invoke(app, ["ingest", str(folder), "--db", str(db), "--quiet"])
    assert done.exit_code == 0, done.output
    return db


def _report(db: Path, *args: str) -> tuple[dict, str, str]:
    done = runner.invoke(app, ["report", "--db", str(db), "--step", "1h", *args, "--json", "-"])
    assert done.exit_code == 0, done.output
    terminal = runner.invoke(app, ["report", "--db", str(db), "--step", "1h", *args])
    return json.loads(done.stdout), terminal.stdout, terminal.stderr


def test_the_default_report_window_starts_with_the_data(four_hours: Path) -> None:
    """[00:00, 04:00): 32 healthy GPU-hours, 16 allocated (a1's 4 GPUs for 4 h): 50%.
    Over the 7 days before 04:00 it would read 16 of 1,344: 1.2%."""
    doc, terminal, stderr = _report(four_hours)
    window = doc["window"]
    assert (window["start"], window["end"]) == ("2026-05-01T00:00:00Z", "2026-05-01T04:00:00Z")
    assert window["shortened_from_s"] == 7 * 86400
    assert window["data"] == {"start": "2026-05-01T00:00:00Z", "end": "2026-05-01T04:00:00Z"}
    assert window["note"] == (
        "shortened to the data, which begins 2026-05-01T00:00:00Z: 4.0 h, not the default 7.0 days"
    )
    physical = doc["fleet"]["physical"]
    assert (physical["healthy_gpu_hours"], physical["allocated_gpu_hours"]) == (32, 16)
    assert physical["allocation_rate"] == 0.5
    assert "shortened to the data" in " ".join(terminal.split())  # the title says it
    assert "after all of the data" not in stderr  # the default --at is the export time


def test_a_window_longer_than_the_data_says_so_in_its_headline(four_hours: Path) -> None:
    """--since 7d given: the window is 7 days, 16 of 1,344 GPU-hours (1.19%), and the
    title, the JSON and a note say the window is longer than the data."""
    doc, terminal, stderr = _report(four_hours, "--since", "7d")
    window = doc["window"]
    assert window["start"] == "2026-04-24T04:00:00Z"
    assert window["shortened_from_s"] is None
    expected = (
        "the window (7.0 days) is longer than the data (4.0 h; the data runs from "
        "2026-05-01T00:00:00Z to 2026-05-01T04:00:00Z): its rates count the time without data"
    )
    assert window["note"] == expected
    assert doc["fleet"]["physical"]["allocation_rate"] == round(16 / 1344, 6)  # 6 decimals
    assert expected in " ".join(terminal.split())
    assert expected in stderr


def test_the_default_instant_never_warns(four_hours: Path) -> None:
    """The export time (04:00, the snapshot's) lies after the last event (01:00): the
    default --at is within the data all the same; a given --at after it is said."""
    for command in (["shapes"], ["state"]):
        done = runner.invoke(app, [*command, "--db", str(four_hours)])
        assert done.exit_code == 0, done.output
        assert "after all of the data" not in done.stderr
        later = runner.invoke(app, [*command, "--db", str(four_hours), "--at", "2026-05-02"])
        assert "--at 2026-05-02T00:00:00Z is after all of the data" in later.stderr


def test_a_pending_request_is_not_read_against_empty_days(four_hours: Path) -> None:
    """r2 needs the whole node (8 GPUs), which never fits while a1 holds 4 of them:
    p_start 0 at each of the window's hourly instants. The 7 days before 04:00 give it
    the empty node of the 164 hours without data: 164 of 169 instants."""
    assert json.loads(
        runner.invoke(app, ["shapes", "--db", str(four_hours), "--json"]).stdout
    )["shapes"][0]["instances"] == 0

    def p_start(doc: dict) -> float:
        (outlook,) = [s for s in doc["shapes"] if s["shape"]["gpus"] == 8]
        return float(outlook["p_start"])

    doc, _, _ = _report(four_hours)
    assert doc["window"]["instants"] == 5
    assert p_start(doc) == 0.0
    week, _, _ = _report(four_hours, "--since", "7d")
    assert week["window"]["instants"] == 169
    assert p_start(week) == round(164 / 169, 6)


def test_the_default_placement_window_starts_with_the_data(four_hours: Path) -> None:
    done = runner.invoke(
        app, ["whatif", "placement", "--db", str(four_hours), "--policy", "best-fit", "--json"]
    )
    assert done.exit_code == 0, done.output
    window = json.loads(done.stdout)["window"]
    assert (window["start"], window["shortened_from_s"]) == ("2026-05-01T00:00:00Z", 86400)
    given = runner.invoke(
        app, ["whatif", "placement", "--db", str(four_hours), "--policy", "best-fit",
              "--since", "1d", "--json"],
    )  # fmt: skip
    window = json.loads(given.stdout)["window"]
    assert (window["start"], window["shortened_from_s"]) == ("2026-04-30T04:00:00Z", None)
    assert window["note"].startswith("the window (24.0 h) is longer than the data (4.0 h;")


def test_the_default_harvesting_window_starts_with_the_data(four_hours: Path) -> None:
    done = runner.invoke(
        app, ["whatif", "harvesting", "--db", str(four_hours), "--policy", "spotgpu", "--json"]
    )
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)
    assert document["window"]["start"] == "2026-05-01T00:00:00Z"
    assert document["window"]["shortened_from_s"] == 7 * 86400
    assert document["options"]["since_s"] == 4 * 3600
