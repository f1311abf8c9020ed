"""Every table of every command, at 80 and 60 columns, and as CSV.

The commands are enumerated from the CLI itself (:func:`tests.conftest.command_paths`):
a new command fails :func:`test_every_command_is_rendered_here` until it has an
invocation below. The tables are whatever the command shows through
:func:`fleetaudit.outputs.console.show`, captured as it lays them out, so a new table
of an existing command (a new report section) is checked without being named here.

At each width: no line of stdout is wider; every column of every table is printed
(a table too wide is stacked, never cut), every cell of it whole (a label folds onto
lines at its spaces, so its words are checked); and ``--csv`` holds a table of each
name shown.
"""

from __future__ import annotations

import copy
import json
import io
import re
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console
from rich.table import Table
from rich.text import Text
from typer.testing import CliRunner

from fleetaudit.cli import app
from fleetaudit.outputs import console
from tests.asi_fixture import write_fixture
from tests.conftest import DATA, REPO, command_paths

runner = CliRunner()

WIDTHS = (80, 60)
Shown = tuple[Table, list[Table], tuple[str, ...]]  # as built, as printed, its folding columns


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sample store (with one ingest of rejected rows and a saved what-if), an ASI store."""
    base = tmp_path_factory.mktemp("tables")
    sample = base / "sample.duckdb"
    for args in (
        ["ingest", str(REPO / "sample_data")],
        ["ingest", str(DATA / "short_lines" / "nodes.csv")],  # rejects to list
        ["ingest", str(REPO / "sample_data")],  # the sample's nodes back
        ["whatif", "compaction", "--model", "H20", "--gpus", "8", "--save-as", "packed",
         "--jobs", "1"],
    ):  # fmt: skip
        done = runner.invoke(app, [*args, "--db", str(sample), "--quiet"])
        assert done.exit_code == 0, done.output
    asi = base / "asi.duckdb"
    done = runner.invoke(
        app,
        ["ingest", "--format", "alibaba-gpu-v2026", str(write_fixture(base / "asi")),
         "--db", str(asi), "--quiet"],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    return {"sample": sample, "asi": asi, "base": base}


def invocations(stores: dict[str, Path]) -> dict[tuple[str, ...], list[list[str]]]:
    """Per command path: argument lists that together show every table it has."""
    sample, asi, base = str(stores["sample"]), str(stores["asi"]), stores["base"]
    raw = base / "raw"
    if not raw.exists():
        raw.mkdir()
        pl.read_parquet(REPO / "sample_data" / "telemetry.parquet").head(2000).write_parquet(
            raw / "telemetry.parquet"
        )
    db = ["--db", sample]
    prices = base / "prices.csv"
    prices.write_text("resource,name,unit,price\ngpu,H20,gpu_hour,2\ncpu,,core_hour,0.01\n")
    return {
        ("demo",): [["demo", "--db", str(base / "demo.duckdb")]],
        ("generate",): [["generate", str(base / "generated"), "--nodes", "6", "--days", "1"]],
        ("ingest",): [
            ["ingest", str(DATA / "short_lines" / "nodes.csv"), "--db", str(base / "ingest.duckdb")]
        ],
        ("paper",): [["paper", "--db", asi]],
        ("rejects",): [["rejects", "--ingest", "2", *db]],
        ("report",): [["report", "--since", "2d", "--step", "1h", *db]],
        ("rollup",): [["rollup", str(raw), "--out", str(base / "rolled")]],
        ("shapes",): [
            ["shapes", "--reclaim", "--history", "6h", "--step", "1h", *db],
            ["shapes", "--model", "H20", "--gpus", "8", "--explain", *db],
        ],
        ("state",): [["state", "--duration", "6h", *db]],
        ("status",): [["status", *db]],
        ("whatif", "compaction"): [
            ["whatif", "compaction", "--jobs", "1", "--partition-nodes", "20", *db],
            ["whatif", "compaction", "--model", "H20", "--gpus", "8", "--jobs", "1",
             "--over", "6h", "--every", "1h", *db],
        ],
        ("whatif", "harvesting"): [
            ["whatif", "harvesting", "--since", "6h", "--policy", "spotgpu", *db]
        ],
        ("whatif", "placement"): [
            ["whatif", "placement", "--since", "6h", *db],
            ["whatif", "placement", "--fill", "60", "--policy", "best-fit", *db],
        ],
        ("whatif", "remedies"): [
            ["whatif", "remedies", "--since", "6h", "--step", "1h", "--add", "H20:2", "--cpus",
             "H20:+32", "--together", "--prices", str(prices), *db],
            ["whatif", "remedies", "--since", "6h", "--step", "1h", "--target", "p_start=0.9",
             "--model", "H20", "--gpus", "8", "--max-add", "2", *db],
        ],
    }


def test_every_command_is_rendered_here(stores: dict[str, Path]) -> None:
    assert sorted(invocations(stores)) == sorted(command_paths(leaves_only=True))


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Shown]]:
    """Every table a command shows, as built and as laid out (its parts)."""
    seen: list[Shown] = []
    fit = console.fit

    def recording(table: Table, fold: tuple[str, ...] = ()) -> list[Table]:
        before = copy.deepcopy(table)
        parts = fit(table, fold)
        seen.append((before, parts, fold))
        return parts

    monkeypatch.setattr(console, "fit", recording)
    yield seen


def _text(part: Table, width: int) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None, highlight=False).print(part)
    return buffer.getvalue()


def _plain(cell: object) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _column_lines(text: str, part: Table, index: int) -> list[str]:
    """The printed lines of column ``index`` of ``part`` (its header's and its cells')."""
    lines = []
    for line in text.splitlines():
        fields = re.split(r"[│┃]", line)
        if len(fields) < 2:
            continue  # a title, a rule
        if part.show_edge:
            fields = fields[1:-1]
        if index < len(fields):
            lines.append(fields[index].strip())
    return lines


def _missing(table: Table, parts: list[Table], fold: tuple[str, ...], width: int) -> list[str]:
    """What of ``table`` its printed ``parts`` lack: columns, cells (each on its own
    line, whole, or for a label or ``fold`` column folded onto several), lines wider
    than ``width``."""
    problems = []
    texts = [_text(part, width) for part in parts]
    for text in texts:
        problems += [f"too wide: {line!r}" for line in text.splitlines() if len(line) > width]
    printed = {
        str(c.header): (i, k) for i, part in enumerate(parts) for k, c in enumerate(part.columns)
    }
    for index, column in enumerate(table.columns):
        header = str(column.header)
        if header not in printed:
            problems.append(f"column {header!r} left out")
            continue
        i, k = printed[header]
        lines = _column_lines(texts[i], parts[i], k)
        stream = "".join("".join(lines).split())
        folds = index == 0 or header in fold
        for cell in column._cells:
            value = _plain(cell).strip()
            if not value:
                continue
            if folds and "".join(value.split()) not in stream:
                problems.append(f"{header}: {value!r} not printed")
            elif not folds and value not in lines:
                problems.append(f"{header}: {value!r} not printed whole on a line")
    return problems


@pytest.mark.parametrize("width", WIDTHS)
def test_every_table_keeps_every_column(
    width: int,
    stores: dict[str, Path],
    captured: list[Shown],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    problems: dict[str, list[str]] = {}
    for path, runs in invocations(stores).items():
        for args in runs:
            captured.clear()
            done = runner.invoke(app, args)
            assert done.exit_code == 0, (args, done.output)
            name = " ".join(args[:3])
            # a line that is one path stays whole, so that it can be copied
            wide = [line for line in done.stdout.splitlines() if len(line) > width and " " in line]
            if wide:
                problems.setdefault(name, []).extend(f"too wide: {w!r}" for w in wide)
            assert captured or path in NO_TABLE, f"{name} showed no table"
            for table, parts, fold in captured:
                found = _missing(table, parts, fold, width)
                if found:
                    title = _plain(table.title or table.columns[0].header)
                    problems.setdefault(f"{name}: {title}", []).extend(found)
            assert "left out at" not in done.stdout
    assert not problems, "\n".join(f"{k}: {v[:5]}" for k, v in problems.items())


NO_TABLE: frozenset[tuple[str, ...]] = frozenset()
"""Commands that may show no table at all."""


def test_csv_holds_a_table_of_each_name_shown(
    stores: dict[str, Path], captured: list[Shown]
) -> None:
    """``--csv`` of every command that has it: one table per name, a ``table`` column
    when there are several, the same tables in a folder, one file each."""
    del captured
    for path, runs in invocations(stores).items():
        for args in runs:
            if path in (("demo",), ("generate",), ("rollup",)):
                continue  # no --csv: they write files or show several commands
            folder = stores["base"] / "csv" / "-".join(args[:4]).replace("/", "_")
            done = runner.invoke(app, [*args, "--csv", f"{folder}/"])
            assert done.exit_code == 0, (args, done.output)
            names = sorted(p.stem for p in folder.iterdir())
            assert names and len(names) == len(set(names))
            again = runner.invoke(app, [*args, "--csv"])
            assert again.exit_code == 0 and again.stdout, (args, again.output)
            text = again.stdout
            header = text.splitlines()[0].split(",")
            if len(names) > 1:
                assert header[0] == "table"
                tables = pl.read_csv(io.StringIO(text), infer_schema=False)["table"]
                with_rows = [n for n in names if len((folder / f"{n}.csv").read_text().splitlines()) > 1]
                assert sorted(tables.unique()) == with_rows  # an empty table has no row here
            else:
                assert header == (folder / f"{names[0]}.csv").read_text().splitlines()[0].split(",")


# -- the output options: one meaning everywhere ---------------------------------------------


def test_json_takes_a_path_or_none_or_dash_in_every_command(
    stores: dict[str, Path], tmp_path: Path
) -> None:
    """shapes, like report: --json alone and --json - print the document alone; --json PATH
    writes it (whole) and the terminal still gets its tables; {date} expands."""
    db = ["--db", str(stores["sample"])]
    alone = runner.invoke(app, ["shapes", "--json", *db])
    dash = runner.invoke(app, ["shapes", *db, "--json", "-"])
    assert json.loads(alone.stdout) == json.loads(dash.stdout)
    assert alone.stdout.startswith("{")
    written = runner.invoke(app, ["shapes", *db, "--json", f"{tmp_path}/s-{{date}}.json"])
    assert written.exit_code == 0, written.output
    (path,) = tmp_path.glob("s-*.json")
    assert re.fullmatch(r"s-\d{4}-\d{2}-\d{2}\.json", path.name)
    assert json.loads(path.read_text()) == json.loads(alone.stdout)
    assert written.stdout.startswith("shapes at ") and f"wrote {path}" in written.stderr
    page = runner.invoke(app, ["report", "--since", "1d", "--step", "1h", *db, "--html"])
    assert page.exit_code == 0 and page.stdout.startswith("<!DOCTYPE html>")
    both = runner.invoke(app, ["shapes", *db, "--json", "--csv"])
    assert both.exit_code == 2
    assert "--json and --csv: only one output can go to stdout (-)" in both.stderr


def test_csv_and_json_together_to_a_file_and_stdout(stores: dict[str, Path], tmp_path: Path) -> None:
    db = ["--db", str(stores["sample"])]
    done = runner.invoke(app, ["whatif", "placement", "--since", "6h", "--policy", "best-fit",
                               *db, "--json", str(tmp_path / "p.json"), "--csv"])  # fmt: skip
    assert done.exit_code == 0, done.output
    header = done.stdout.splitlines()[0]  # stdout: the CSV alone (the baseline, the policies)
    assert header.startswith("table,replay,") and ",policy,instant_pct," in header
    assert json.loads((tmp_path / "p.json").read_text())["schema"] == "fleetaudit.placement/1"


def test_notes_wrap_to_a_terminal_and_stay_one_line_on_a_pipe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    message = "a note " * 20
    for terminal, lines in ((True, 4), (False, 1)):
        buffer = io.StringIO()
        err = Console(file=buffer, width=40, force_terminal=terminal, color_system=None)
        monkeypatch.setattr(console, "err", err)
        console.note(message)
        assert len(buffer.getvalue().splitlines()) == lines, buffer.getvalue()
