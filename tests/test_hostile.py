"""The hostile corpus: every input a hostile or careless user tried that once broke
fleetaudit (issue 32 and after), each with what it must do now.

A case is small generated input (never a copy of real data), named for what it tries,
in the section of the issue point it belongs to. The rule they all hold: no input ends
in anything but a result, a reject row (file, row, column, value, reason) or one line
``fleetaudit: error: ...`` with a documented exit code, and a failed call leaves the
store as it was. tests/test_fuzz.py searches for new cases; a case it finds goes here.
docs/development.md ("The hostile corpus") says how to add one.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner, Result

from fleetaudit import api
from fleetaudit.cli import app
from fleetaudit.core.errors import InputError
from fleetaudit.inputs.asi_trace import (
    POD_SCHEMA,
    POD_TABLE,
    SERVER_SCHEMA,
    SERVER_TABLE,
    table_of,
    write_partition,
)
from fleetaudit.inputs.ingest import IngestOptions, ingest
from fleetaudit.model import schema
from fleetaudit.model.store import open_store
from tests.asi_fixture import pod_rows, server_rows, write_fixture
from tests.conftest import REPO, write
from tests.fuzzing import NODE_N1, VALID_ROWS

runner = CliRunner()
SAMPLE = REPO / "sample_data"
ASI = IngestOptions(format="alibaba-gpu-v2026", trace_start=datetime(2026, 1, 1))


def invoke(*args: str | Path) -> Result:
    return runner.invoke(app, [str(a) for a in args])


def counts(db: Path) -> dict[str, int]:
    with open_store(db, read_only=True) as store:
        return {t: store.row_count(t) for t in [*schema.TABLES, "rejects", "ingests"]}


def one_line_error(result: Result, code: int = 2) -> str:
    """The error line of a failed command (asserting its exit code and its one line)."""
    assert result.exit_code == code, result.output
    stderr = result.stderr
    assert stderr.startswith("fleetaudit: error: ") and stderr.count("\n") == 1, stderr
    return stderr


def _table(db: Path, sql: str) -> list[tuple[object, ...]]:
    with open_store(db, read_only=True) as store:
        return store.sql(sql).rows()


OPENB_NODES = "sn,cpu_milli,memory_mib,gpu,model\nopenb-node-0000,64000,262144,8,V100M16\n"
OPENB_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)


# -- 1. An output path equal to the store destroys it --------------------------------------


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("sample") / "s.duckdb"
    assert invoke("ingest", "-q", SAMPLE, "--db", db).exit_code == 0
    return db


@pytest.mark.parametrize(
    ("command", "spelled", "says"),
    [
        (["report", "--since", "1d", "--json"], "{db}", "is the store (--db"),
        (["report", "--since", "1d", "--html"], "./{name}", "is the store (--db"),
        (["report", "--since", "1d", "--json"], "{absolute}", "is the store (--db"),
        (["report", "--since", "1d", "--json"], "{link}", "is the store (--db"),
        (["report", "--since", "1d", "--html"], "{db}.wal", "is the store's write-ahead log"),
        (["state", "--out"], "{db}", "is the store (--db"),
    ],
)
def test_an_output_that_is_the_store_is_refused(
    sample_store: Path, tmp_path: Path, command: list[str], spelled: str, says: str
) -> None:
    """`report --json s.duckdb` exited 0 ("wrote s.duckdb") and the store was JSON: the
    same with --html, ./, the absolute path, a symlink to it and `state --out`."""
    link = tmp_path / "link.duckdb"
    link.symlink_to(sample_store)
    path = spelled.format(
        db=sample_store, name=sample_store.name, absolute=sample_store.resolve(), link=link
    )
    before = sample_store.read_bytes()
    cwd = os.getcwd()
    os.chdir(sample_store.parent)  # ./s.duckdb
    try:
        line = one_line_error(invoke(*command, path, "--db", sample_store, "-q"))
    finally:
        os.chdir(cwd)
    assert says in line and "writing it would destroy the store; give another path" in line
    assert sample_store.read_bytes() == before


def test_two_outputs_of_one_call_naming_one_file_are_refused(sample_store: Path, tmp_path: Path) -> None:
    """`--html X --json X` silently overwrote one with the other (also once `{date}` is
    filled in)."""
    for path in (tmp_path / "x.out", tmp_path / "{date}.out"):
        line = one_line_error(
            invoke("report", "--since", "1d", "--html", path, "--json", path, "--db", sample_store)
        )
        assert "--json and --html: both name" in line and "one would overwrite the other" in line
    assert list(tmp_path.iterdir()) == []


def test_an_output_over_an_input_of_the_call_is_refused(tmp_path: Path) -> None:
    """`rollup raw/telemetry.parquet --out raw/` would replace the raw file it reads."""
    raw = tmp_path / "raw" / "telemetry.parquet"
    raw.parent.mkdir()
    pq.write_table(
        pa.table({
            "ts": pa.array([datetime(2026, 1, 1)], type=pa.timestamp("us")), "node_id": ["n1"],
            "gpu_index": [0], "sm_active": [0.5],
        }),
        raw,
    )  # fmt: skip
    before = raw.read_bytes()
    line = one_line_error(invoke("rollup", raw, "--out", raw.parent))
    assert f"is an input this call reads ({raw})" in line
    assert raw.read_bytes() == before


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_db_naming_a_fifo_or_a_device_is_refused(tmp_path: Path, kind: str) -> None:
    """`--db FIFO` waited forever for a writer."""
    db = tmp_path / "fifo"
    if kind == "fifo":
        os.mkfifo(db)
    else:
        db = Path(os.devnull)
    for command in (["status"], ["ingest", str(SAMPLE)]):
        done = subprocess.run(  # a process, with a timeout: a hang fails the test
            [sys.executable, "-m", "fleetaudit", *command, "--db", str(db)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert ("a FIFO (named pipe)" if kind == "fifo" else "a device") in done.stderr


# -- 2. One NaN poisons the store -----------------------------------------------------------

NUMERIC = (schema.Kind.FLOAT, schema.Kind.INT, schema.Kind.TIME)
BAD_NUMBERS = (float("nan"), float("inf"), float("-inf"))
BAD_TEXT = ("NaN", "inf", "-Infinity")


def _one_bad_value_per_row(table: schema.Table) -> list[tuple[str, int]]:
    """(column, which bad value) for every numeric or time column of ``table``."""
    return [
        (c.name, i % 3) for i, c in enumerate(c for c in table.columns if c.kind in NUMERIC)
    ]


def _write_bad_rows(folder: Path, table: schema.Table, fmt: str) -> list[str]:
    """A file of ``table``: one valid row, then one row per numeric or time column with a
    NaN or an infinity in that column alone (typed as a number where the format has
    types); returns the columns, in row order from row 2."""
    valid = VALID_ROWS[table.name]
    bad = _one_bad_value_per_row(table)
    key = table.key[0] if table.key[0] != "node_id" else None
    rows: list[dict[str, object]] = []
    for i, (column, which) in enumerate([("", -1), *bad]):
        row: dict[str, object] = dict.fromkeys(table.column_names)
        row.update(valid)
        if key is not None:
            row[key] = f"{valid[key]}-{i}"
        if column:
            row[column] = BAD_NUMBERS[which] if fmt == "parquet" else BAD_TEXT[which]
        rows.append(row)
    path = folder / f"{table.name}.{fmt}"
    if fmt == "parquet":
        pq.write_table(
            pa.table({c.name: _parquet_column(c, [r[c.name] for r in rows]) for c in table.columns}),
            path,
        )
    elif fmt == "csv":
        lines = [",".join(table.column_names)]
        lines += [",".join("" if r[n] is None else str(r[n]) for n in table.column_names) for r in rows]
        path.write_text("\n".join(lines) + "\n")
    else:
        path.write_text(
            "".join(json.dumps({k: v for k, v in r.items() if v is not None}) + "\n" for r in rows)
        )
    return [column for column, _ in bad]


def _parquet_column(column: schema.Column, values: list[object]) -> pa.Array:
    """A typed column: numbers and times (as epoch seconds) as DOUBLE, the rest as text."""
    if column.kind not in NUMERIC:
        return pa.array(values, type=pa.string())
    epoch = (datetime(2026, 1, 1) - datetime(1970, 1, 1)).total_seconds()
    return pa.array(
        [
            v if isinstance(v, float) or v is None
            else epoch if column.kind is schema.Kind.TIME else float(str(v))
            for v in values
        ],
        type=pa.float64(),
    )  # fmt: skip


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
def test_a_nan_or_infinity_in_any_numeric_column_is_a_reject(tmp_path: Path, fmt: str) -> None:
    """Every numeric and time column of every table, in each native format: a NaN or an
    infinity among finite values is a reject naming its row and column. In Parquet, the
    column's statistics (which leave NaN out) once let DuckDB skip the bound, and a lone
    NaN was stored; every command then failed 'conversion from f64 to i64 failed'."""
    write(tmp_path / "base" / "nodes.csv", NODE_N1)
    db = tmp_path / "fleet.duckdb"
    assert invoke("ingest", "-q", tmp_path / "base", "--db", db).exit_code == 0
    for table in schema.TABLES.values():
        folder = tmp_path / table.name
        folder.mkdir()
        expected = _write_bad_rows(folder, table, fmt)
        with open_store(db) as store:
            result = ingest(store, [folder])
            got = store.sql(
                'SELECT "row", "column", reason FROM rejects WHERE ingest_id = $id ORDER BY "row"',
                {"id": result.ingest_id},
            ).rows()
            store.check_finite()
        assert [(r, c) for r, c, _ in got] == [(i + 2, c) for i, c in enumerate(expected)], table.name
        assert all(("nan" in why.lower() or "inf" in why.lower()) for _, _, why in got)
    for command in ("status", "state", "shapes"):
        assert invoke(command, "--db", db).exit_code == 0, command


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"jobs": [{"job_id": 1, "priority": NaN}]}', "row 1, column priority: nan is not a number"),
        # found by mutating a real sacct --json: the constant, then JSON broken after it
        ('{"jobs": [{"job_id": 1, "qos": NaNenger", "x": 1}]}', "cannot read the JSON: Expecting"),
    ],
)
def test_slurm_json_with_a_nan_literal_is_one_line(tmp_path: Path, text: str, says: str) -> None:
    """The reader refuses NaN and Infinity literals and reads the file again to name the
    job; a file broken after the literal made that second read an internal error."""
    path = tmp_path / "sacct.json"
    path.write_text(text)
    result = invoke("ingest", path, "--format", "slurm", "--db", tmp_path / "f.duckdb")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"fleetaudit: error: {path}") and says in result.stderr
    assert result.stderr.count("\n") == 1 and "internal error" not in result.stderr


def test_a_store_holding_a_nan_names_table_row_and_column(tmp_path: Path) -> None:
    """A store an older version wrote with a NaN still opens: the commands that read the
    tables fail in one line naming the table, the row's key and the column (not exit 1,
    'conversion from f64 to i64 failed'); rejects still lists, and ingesting the row
    again repairs it."""
    db = tmp_path / "fleet.duckdb"
    assert invoke("ingest", "-q", SAMPLE, "--db", db).exit_code == 0
    con = duckdb.connect(str(db))
    node = con.execute("SELECT min(node_id) FROM nodes").fetchall()[0][0]
    con.execute("UPDATE nodes SET cpus = 'nan'::DOUBLE WHERE node_id = ?", [node])
    con.close()
    for command in ("status", "state", "shapes"):
        line = one_line_error(invoke(command, "--db", db))
        assert f"table nodes, row node_id '{node}', column cpus: nan is not a finite number" in line
    assert invoke("rejects", "--db", db).exit_code == 0
    write(tmp_path / "fix" / "nodes.csv", f"node_id,gpu_model,gpus,cpus\n{node},H800,8,96\n")
    assert invoke("ingest", "-q", tmp_path / "fix", "--db", db).exit_code == 0
    assert invoke("status", "--db", db).exit_code == 0


def test_asi_non_finite_and_impossible_values_are_rejects(tmp_path: Path) -> None:
    """The ASI release's numbers: a pod's gpu_request of NaN (exit 1, ValueError), a
    server's gpu_count of 1e30 (exit 1, OverflowError), a NaN cpu_capacity_cores (a NaN
    node stored) are rejects by partition file and row; nothing non-finite is stored."""
    root = write_fixture(tmp_path / "data")
    nan = float("nan")
    pods = pod_rows(22)
    pods[0] = {**pods[0], "gpu_request": nan}
    pods[1] = {**pods[1], "cpu_request_cores": float("inf")}
    pods[2] = {**pods[2], "used_gpu_hours": nan}
    write_partition(root, POD_TABLE, 0, 22, table_of(pods, POD_SCHEMA))
    servers = server_rows(22)
    servers[0] = {**servers[0], "gpu_count": 1e30}
    servers[1] = {**servers[1], "cpu_capacity_cores": nan}
    write_partition(root, SERVER_TABLE, 0, 22, table_of(servers, SERVER_SCHEMA))
    db = tmp_path / "fleet.duckdb"
    result = api.ingest_paths(api.StoreOptions(db), [root], ASI)
    got = set(result.rejects.select("table", "row", "column").rows())
    assert got == {
        ("allocations", 1, "gpu_request"),
        ("allocations", 2, "cpu_request_cores"),
        ("allocations", 3, "used_gpu_hours"),
        ("nodes", 1, "gpu_count"),
        ("nodes", 2, "cpu_capacity_cores"),
    }
    assert all(f.endswith("day=0/hour=22/part-000.parquet") for f in result.rejects["file"])
    with open_store(db, read_only=True) as store:
        store.check_finite()
        assert store.sql("SELECT count(*) FROM nodes").item() == 4  # s1, s2 from their other hours


def test_alibaba_v2023_non_finite_numbers_are_rejects_naming_the_trace_column(tmp_path: Path) -> None:
    """The 2023 trace's numbers: a NaN gpu_milli was read as one whole GPU (NaN is below
    no bound); a NaN or an infinity in any number column is a reject naming the trace's
    column, before any mapping."""
    nodes = write(
        tmp_path / "openb_node_list_gpu_node.csv",
        OPENB_NODES + "node-1,NaN,262144,8,P100\nnode-2,64000,inf,8,P100\nnode-3,64000,262144,NaN,P100\n",
    )
    pods = write(
        tmp_path / "openb_pod_list_default.csv",
        OPENB_HEADER
        + "p0,NaN,16384,1,1000,,LS,Running,0,100,0\np1,1000,inf,1,1000,,LS,Running,0,100,0\n"
        + "p2,1000,16384,NaN,1000,,LS,Running,0,100,0\np3,1000,16384,1,nan,,LS,Running,0,100,0\n"
        + "p4,1000,16384,1,500,,LS,Running,NaN,100,0\np5,1000,16384,1,500,,LS,Running,0,-inf,0\n"
        + "p6,1000,16384,1,500,,LS,Running,0,100,0\n",
    )
    with open_store(tmp_path / "f.duckdb") as store:
        ingest(store, [nodes, pods], IngestOptions(format="alibaba-gpu-v2023"))
        got = store.sql('SELECT "table", "row", "column" FROM rejects ORDER BY 1 DESC, 2').rows()
        assert store.sql("SELECT request_id FROM requests").rows() == [("p6",)]
        store.check_finite()
    assert got == [
        ("requests", 1, "cpu_milli"), ("requests", 2, "memory_mib"), ("requests", 3, "num_gpu"),
        ("requests", 4, "gpu_milli"), ("requests", 5, "creation_time"),
        ("requests", 6, "deletion_time"),
        ("nodes", 2, "cpu_milli"), ("nodes", 3, "memory_mib"), ("nodes", 4, "gpu"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("day=99999999", "day=99999999 is not a day of the trace (0-36524: 100 years)"),
        ("day=١", "a day partition whose day is not a number (day=D)"),
    ],
)
def test_asi_day_beyond_any_trace_names_the_folder(tmp_path: Path, name: str, says: str) -> None:
    """day=99999999 said "Overflow in multiplication of INT32"; a day in another script's
    digits passed str.isdigit() and failed in SQL."""
    root = write_fixture(tmp_path / "data")
    (root / POD_TABLE / "day=1").rename(root / POD_TABLE / name)
    with pytest.raises(InputError) as caught:
        api.ingest_paths(api.StoreOptions(tmp_path / "f.duckdb"), [root], ASI)
    assert caught.value.file == str(root / POD_TABLE / name)
    assert says in caught.value.message
    assert not (tmp_path / "f.duckdb").exists()


# -- 3. A long value hangs the ingest after its commit -------------------------------------

LONG = 1_900_000  # characters: within DuckDB's longest CSV line (2 MiB)


def test_a_long_value_is_shown_cut_and_kept_whole(tmp_path: Path) -> None:
    """A 1.9 MB value rejected by ingest: drawing the rejects table took seconds of CPU
    per MB, superlinear (47 s for 4 MB), even under -q. Now the table shows its start
    and end and its length, the output stays small, -q prints nothing, and `rejects
    --json` has it whole."""
    value = "x" * LONG
    write(tmp_path / "in" / "nodes.csv", NODE_N1)
    write(
        tmp_path / "in" / "allocations.csv",
        f"alloc_id,node_id,gpus,cpus,priority,start_time\na1,n1,{value},1,high,2026-01-01\n"
        "a2,n1,1,1,high,2026-01-01\n",  # one row loads: not every row rejected (exit 65)
    )
    db = tmp_path / "fleet.duckdb"
    result = invoke("ingest", tmp_path / "in", "--db", db)
    assert result.exit_code == 0
    assert len(result.output) < 10_000
    assert f"({LONG:,}" in result.output  # the cell's "… (1,900,000 characters) …"
    quiet = invoke("ingest", tmp_path / "in", "--db", db, "-q")
    assert quiet.exit_code == 0 and quiet.output == ""
    document = json.loads(invoke("rejects", "--db", db, "--json").stdout)
    assert document["rejects"][0]["value"] == value


# -- 4. Duplicate data counted twice --------------------------------------------------------

ASI_TABLES = (
    "SELECT * EXCLUDE (_ingest_id) FROM nodes ORDER BY node_id",
    "SELECT * EXCLUDE (_ingest_id) FROM allocations ORDER BY alloc_id",
    "SELECT * EXCLUDE (_ingest_id) FROM telemetry ORDER BY ts, node_id, gpu_index",
    "SELECT * EXCLUDE (_ingest_id) FROM asi_pod_hourly ORDER BY t, pod_id",
    "SELECT * EXCLUDE (_ingest_id) FROM asi_server_hourly ORDER BY t, server_id",
)


def test_asi_copied_part_files_count_once(tmp_path: Path) -> None:
    """'part-000 (1).parquet' beside its original (pods at t = 23, servers at t = 24)
    doubled pod-hours (allocation rate 76.1% -> 90.8%): now every table is the fixture's,
    and each copied row is a reject naming the row it repeats."""
    reference = tmp_path / "ref.duckdb"
    api.ingest_paths(api.StoreOptions(reference), [write_fixture(tmp_path / "ref")], ASI)
    root = write_fixture(tmp_path / "data")
    pods = root / POD_TABLE / "day=0" / "hour=23"
    shutil.copy(pods / "part-000.parquet", pods / "part-000 (1).parquet")
    servers = root / SERVER_TABLE / "day=1" / "hour=00"
    shutil.copy(servers / "part-000.parquet", servers / "part-000 (1).parquet")
    db = tmp_path / "fleet.duckdb"
    result = api.ingest_paths(api.StoreOptions(db), [root], ASI)
    for sql in ASI_TABLES:
        assert _table(db, sql) == _table(reference, sql), sql
    assert result.rejected == len(pod_rows(23)) + len(server_rows(24))
    assert result.rejects["reason"].str.ends_with("counted once").all()
    # the first of two identical rows is the one of the file that sorts first
    pod = result.rejects.filter(result.rejects["table"] == "allocations").row(0, named=True)
    assert (pod["file"], pod["row"], pod["column"]) == (str(pods / "part-000.parquet"), 1, "pod_id")
    assert f"(the first: row 1 of {pods / 'part-000 (1).parquet'})" in pod["reason"]


@pytest.mark.parametrize(
    ("first", "second", "link", "says"),
    [
        ("day=0/hour=22", "day=0/hour=022", False, "two folders of one partition (day 0, hour 22)"),
        ("day=1", "day=01", False, "two folders of one partition (day 1, hour 00)"),
        ("day=1", "day=01", True, "one folder reached by two names (a link)"),
        ("day=1", "day=2", True, "one folder reached by two names (a link)"),
    ],
)
def test_asi_a_partition_given_twice_fails_naming_both(
    tmp_path: Path, first: str, second: str, link: bool, says: str
) -> None:
    """hour=5 beside hour=05 and a symlinked day folder doubled pod-hours silently."""
    root = write_fixture(tmp_path / "data")
    base = root / POD_TABLE
    if link:
        os.symlink(base / first, base / second)
    else:
        shutil.copytree(base / first, base / second)
    db = tmp_path / "f.duckdb"
    line = one_line_error(invoke("ingest", root, "--format", "alibaba-gpu-v2026", "--db", db))
    assert says in line and "its rows would count twice; remove one" in line
    assert str(base / first.split("/")[0]) in line and str(base / second) in line
    assert not db.exists()


# -- 5. Terminal and spreadsheet injection --------------------------------------------------

TITLE_AND_CLEAR = "\x1b]0;pwned\x07\x1b[2J"
FORGED = "H20\nfleetaudit: error: forged"
BIDI = "\u202eH20"
FORMULAS = ("=HYPERLINK(\"http://x\",\"y\")", "+cmd|' /C calc'!A0", "@SUM(1+1)")


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny fleet with three more nodes and requests whose models would set the
    terminal's title and clear its screen, forge an error line, reverse the text; and
    switch ids that a spreadsheet would run."""
    folder = tmp_path_factory.mktemp("hostile")
    tiny = REPO / "tests" / "data" / "tiny"
    for name in ("allocations.csv", "requests.csv"):
        shutil.copy(tiny / name, folder / name)
    nodes = (tiny / "nodes.csv").read_text()
    requests = (folder / "requests.csv").read_text()
    for i, (model, switch) in enumerate(zip((TITLE_AND_CLEAR, FORGED, BIDI), FORMULAS, strict=True)):
        quoted = '"' + model.replace('"', '""') + '"'
        nodes += f'h{i},{quoted},8,64,1024,"{switch.replace(chr(34), chr(34) * 2)}",healthy\n'
        requests += f"q{i},2026-01-01T11:00:00Z,,{quoted},1,1,0,0,node,,,high,x\n"
    (folder / "nodes.csv").write_text(nodes)
    (folder / "requests.csv").write_text(requests)
    db = folder / "fleet.duckdb"
    assert invoke("ingest", "-q", folder, "--db", db).exit_code == 0
    return db


@pytest.mark.parametrize(
    "command",
    [
        ["status"], ["state"], ["shapes"], ["report", "--since", "12h"], ["rejects"],
        ["whatif", "compaction"], ["whatif", "placement"], ["whatif", "harvesting", "--since", "4h"],
    ],
    ids=lambda c: " ".join(c),
)  # fmt: skip
def test_terminal_control_characters_are_escaped(hostile_store: Path, command: list[str]) -> None:
    """An ESC sequence in a model set the terminal's title and cleared the screen through
    every command (rich strips BEL, not ESC); a bidi override reversed what followed."""
    result = invoke(*command, "--db", hostile_store)
    assert result.exit_code == 0, result.output
    for stream in (result.stdout, result.stderr):
        assert not set(stream) & {"\x1b", "\x07", "\u202e", "\r"}, stream
    if command[0] in ("status", "state"):
        assert "\\x1b]0;pwned\\x07\\x1b[2J" in result.stdout
        assert "\\u202eH20" in result.stdout and "H20\\nfleetaudit: error: forged" in result.stdout


def test_the_ingest_summary_and_the_error_line_escape_them(tmp_path: Path) -> None:
    """A newline in a value forged a stderr line of its own."""
    write(tmp_path / "in" / "nodes.csv", f'node_id,gpu_model,gpus,cpus\nn1,H20,"{FORGED}",64\n')
    db = tmp_path / "fleet.duckdb"
    summary = invoke("ingest", tmp_path / "in", "--db", db)
    assert "\x1b" not in summary.output and "fleetaudit: error: forged" not in summary.output.splitlines()
    line = one_line_error(invoke("ingest", tmp_path / "in", "--db", db, "--strict"))
    assert "H20\\nfleetaudit: error: forged" in line


@pytest.mark.parametrize(
    "command", [["status"], ["state"], ["report", "--since", "12h"]], ids=lambda c: c[0]
)
def test_csv_cells_a_spreadsheet_would_run_are_neutralised(
    hostile_store: Path, command: list[str]
) -> None:
    """`--csv` wrote =HYPERLINK(...), +cmd|... and @SUM(...) as they were: now with an
    apostrophe first, control characters escaped; --csv-raw writes them as they are."""
    safe = invoke(*command, "--db", hostile_store, "--csv")
    assert safe.exit_code == 0, safe.output
    cells = _cells(safe.stdout)
    assert not [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r")]
    assert "\x1b" not in safe.stdout
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in safe.stdout or command[0] == "report"
    raw = invoke(*command, "--db", hostile_store, "--csv", "--csv-raw")
    assert raw.exit_code == 0
    if command[0] != "report":
        assert TITLE_AND_CLEAR in raw.stdout


def _cells(text: str) -> list[str]:
    return [c for row in csv.reader(io.StringIO(text)) for c in row]


def test_state_out_csv_is_neutralised(hostile_store: Path, tmp_path: Path) -> None:
    """`state --out FILE.csv`, the per-node state, holds the switch ids."""
    out = tmp_path / "state.csv"
    assert invoke("state", "--db", hostile_store, "--out", out, "-q").exit_code == 0
    cells = _cells(out.read_text())
    assert "'=HYPERLINK(\"http://x\",\"y\")" in cells and "'@SUM(1+1)" in cells
    assert invoke("state", "--db", hostile_store, "--out", out, "-q", "--csv-raw").exit_code == 0
    assert FORMULAS[0] in _cells(out.read_text())


# -- 6. Errors that name their cause --------------------------------------------------------

@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"p0,12000,16384,1,1000,,LS,Running,0,100,0,extra", "12 field(s); the header has 11"),
        (b"p0,12000,16384,1,1000,,LS,Running,0,100", "10 field(s); the header has 11"),
        (b"p\xff0,12000,16384,1,1000,,LS,Running,0,100,0", "(invalid encoding)"),
    ],
)
def test_alibaba_v2023_line_duckdb_cannot_split_is_a_reject(
    tmp_path: Path, line: bytes, reason: str
) -> None:
    """A 2023-trace pod line with a field too many failed the whole file with DuckDB's
    "Error when sniffing file": now it is a reject naming its row, as in a native CSV."""
    nodes = write(tmp_path / "openb_node_list_gpu_node.csv", OPENB_NODES)
    pods = tmp_path / "openb_pod_list_default.csv"
    good = b"p1,6000,12288,1,460,,BE,Pending,10,,"
    pods.write_bytes(OPENB_HEADER.encode() + line + b"\n" + good + b"\n")
    with open_store(tmp_path / "f.duckdb") as store:
        result = ingest(store, [nodes, pods], IngestOptions(format="alibaba-gpu-v2023"))
        assert result.rejected == 1
        assert store.sql("SELECT request_id, trace_order FROM requests").rows() == [("p1", 1)]
        got = store.sql('SELECT file, "row", reason FROM rejects').row(0)
    assert got[:2] == (str(pods), 1) and reason in got[2]


_PROM_LINE = b'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="n1"} 1 1767225600000\n'
NOT_UTF8 = [
    # format, file, its bytes, the row (line) of the first byte that is not UTF-8, that byte
    ("prometheus", "gpu.prom",
     b"# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n" + _PROM_LINE.replace(b"n1", b"n\xff1"), 2, 0xFF),
    # past the first MiB the reader decodes: the line is counted across blocks
    ("prometheus", "long.prom",
     b"# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n" + _PROM_LINE * 30_000 + b"n\xe9\n", 30_002, 0xE9),
    ("prometheus", "gpu.json",
     b'{"status": "success",\n"data": {"resultType": "matrix", "result": [{"metric": '
     b'{"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "n\xff"}, "values": []}]}}', 2, 0xFF),
    ("kubernetes", "nodes.json",
     b'{"kind": "List",\n "items": [{"kind": "Node", "metadata": {"name": "n\xff"}}]}', 2, 0xFF),
    ("slurm", "sacct.json", b'{"jobs": [\n\n{"job_id": "\xc3"}]}', 3, 0xC3),
    # a byte-order mark counts for no line; a file that ends inside a character
    ("prometheus", "bom.prom",
     b"\xef\xbb\xbf# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n" + _PROM_LINE + b"n1\xe2\x82", 3, 0xE2),
    # the line of the gunzipped text, as the reader read it
    ("prometheus", "gpu.prom.gz",
     gzip.compress(b"# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n" + _PROM_LINE * 3 + b"\xff\n"), 5, 0xFF),
    ("native", "nodes.csv", b"node_id,gpu_model,gpus,cpus,sw\xe9tch_id\nn1,H20,8,64,s1\n", 1, 0xE9),
]  # fmt: skip


@pytest.mark.parametrize(("fmt", "name", "data", "row", "byte"), NOT_UTF8, ids=[c[1] for c in NOT_UTF8])
def test_text_that_is_not_utf8_names_its_line(
    tmp_path: Path, fmt: str, name: str, data: bytes, row: int, byte: int
) -> None:
    """A byte that is not UTF-8 in a text export named the decoder's position in the block
    it was reading ("position 74"), not where it is in the file: now its line."""
    path = tmp_path / name
    path.write_bytes(data)
    result = invoke("ingest", path, "--format", fmt, "--db", tmp_path / "f.duckdb")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"fleetaudit: error: {path} row {row}: cannot read")
    assert f"not UTF-8 text (byte 0x{byte:02x}); save it as UTF-8\n" in result.stderr
    assert result.stderr.count("\n") == 1
    assert not (tmp_path / "f.duckdb").exists()


@pytest.mark.parametrize("option", ["--topology", "--priority-map"])
def test_an_option_file_that_is_not_utf8_names_its_line(tmp_path: Path, option: str) -> None:
    bad = tmp_path / "side.txt"
    bad.write_bytes(b"# written by hand\n\nline \xff three\n")
    listed = tmp_path / "nodes.json"  # --priority-map goes with kubernetes (or slurm)
    listed.write_text('{"kind": "List", "items": []}')
    inputs = [SAMPLE] if option == "--topology" else [listed, "--format", "kubernetes"]
    result = invoke("ingest", *inputs, option, bad, "--db", tmp_path / "f.duckdb")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"fleetaudit: error: {bad} row 3: cannot read the ")
    assert result.stderr.endswith("not UTF-8 text (byte 0xff); save it as UTF-8\n")
    assert not (tmp_path / "f.duckdb").exists()


def _small_filesystem() -> list[str]:
    """The command that runs a shell where a small tmpfs can be mounted (a user and mount
    namespace: root is not needed); skips where the system does not allow one."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("a full disk is tested on a small tmpfs, mounted with unshare (util-linux)")
    probe = subprocess.run([unshare, "-rm", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare -rm is not allowed here: {probe.stderr.decode().strip()}")
    return [unshare, "-rm", sys.executable, "-c"]


# Runs inside the namespace: mounts a tmpfs of SIZE at MOUNT, then for each KEEP (KiB),
# copies the store in, fills the disk but KEEP, runs the ingest, frees the disk and
# reports the exit code, stderr and the store's counts before and after (JSON lines).
_FILL = r"""
import json, os, shutil, subprocess, sys
mount, size, store, args, keeps = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), json.loads(sys.argv[5])
subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", mount], check=True)
def counts(db):
    import duckdb
    con = duckdb.connect(db, read_only=True)
    try:
        return [con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in ("nodes", "allocations", "requests", "telemetry", "rejects", "ingests")]
    finally:
        con.close()
for keep in keeps:
    for name in os.listdir(mount):
        path = os.path.join(mount, name)
        shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    db = os.path.join(mount, "fleet.duckdb")
    if store:
        shutil.copy(store, db)
    before = counts(db) if store else None
    st = os.statvfs(mount)
    free = st.f_bavail * st.f_frsize - keep * 1024
    with open(os.path.join(mount, "filler"), "wb") as fh:
        fh.truncate(0)
        os.posix_fallocate(fh.fileno(), 0, max(free, 1))
    done = subprocess.run([sys.executable, "-m", "fleetaudit", "ingest", "-q", "--db", db, *args], capture_output=True, text=True)
    os.remove(os.path.join(mount, "filler"))
    after = counts(db) if os.path.exists(db) else None
    print(json.dumps({"keep": keep, "code": done.returncode, "stderr": done.stderr, "before": before, "after": after, "db": os.path.exists(db)}), flush=True)
"""


def _fill_points(tmp_path: Path, store: Path | None, args: list[str], keeps: list[int]) -> list[dict]:
    mount = tmp_path / "small"
    mount.mkdir(parents=True)
    done = subprocess.run(
        [*_small_filesystem(), _FILL, str(mount), "40m", str(store or ""), json.dumps(args), json.dumps(keeps)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _full(point: dict) -> bool:
    """A call the full disk stopped: exit 74, one line, the store as it was."""
    if point["code"] == 0:
        return False
    assert point["code"] == 74, point
    line = point["stderr"]
    assert line.startswith("fleetaudit: error: no space left on device") and line.count("\n") == 1, line
    assert "a store keeps its last committed state" in line
    assert point["after"] == point["before"], point  # None == None: a new store was removed
    return True


def test_a_full_disk_during_an_ingest_exits_74_and_leaves_the_store(tmp_path: Path) -> None:
    """On a 40 MB filesystem filled to a few KiB to 9 MiB of its end, the sample's
    telemetry and requests ingested into a store of its nodes and allocations: wherever
    the disk fills (the store's blocks, the write-ahead log at COMMIT), exit 74 "no space
    left on device" naming the file written, never the input, and the store's counts as
    before. (A full disk once blamed the input file with exit 2, or exited 1 with
    "database has been invalidated".) Then a new store on a full disk: none is left."""
    base = tmp_path / "base"
    base.mkdir()
    for name in ("nodes.parquet", "allocations.parquet"):
        shutil.copy(SAMPLE / name, base / name)
    store = tmp_path / "fleet.duckdb"
    assert invoke("ingest", "-q", base, "--db", store).exit_code == 0
    inputs = [str(SAMPLE / "telemetry.parquet"), str(SAMPLE / "requests.parquet")]
    points = _fill_points(tmp_path, store, inputs, [64, 2048, 6144, 8192, 40_000])
    stopped = [p for p in points if _full(p)]
    assert len(stopped) >= 3, points
    assert points[-1]["code"] == 0  # with room, the same call lands
    named = {p["stderr"].split("(writing ")[1].split(")")[0] for p in stopped if "(writing " in p["stderr"]}
    assert named <= {str(tmp_path / "small" / "fleet.duckdb"), str(tmp_path / "small" / "fleet.duckdb.wal")}
    new = _fill_points(tmp_path / "new", None, [str(SAMPLE)], [64])
    assert _full(new[0]) and not new[0]["db"]


def test_a_full_disk_during_an_asi_ingest_exits_74(tmp_path: Path) -> None:
    """The ASI ingest stages its days beside the store (polars and pyarrow write them):
    a full disk there is exit 74 too, not an internal error."""
    store = tmp_path / "fleet.duckdb"
    write(tmp_path / "base" / "nodes.csv", NODE_N1)
    assert invoke("ingest", "-q", tmp_path / "base", "--db", store).exit_code == 0
    root = write_fixture(tmp_path / "data")
    args = ["--format", "alibaba-gpu-v2026", str(root)]
    points = _fill_points(tmp_path, store, args, [16, 48, 40_000])
    assert [p for p in points if _full(p)], points
    assert points[-1]["code"] == 0


@pytest.mark.parametrize(("option", "value"), [("--since", "١٢h"), ("--at", "١٧٦٧٢٢٥٦٠٠")])
def test_times_in_other_scripts_digits_are_refused(sample_store: Path, option: str, value: str) -> None:
    """Python's float() and re's \\d read Arabic-Indic digits as numbers; an option's time
    or duration is ASCII digits, as every other reader of it takes them."""
    line = one_line_error(invoke("report", option, value, "--db", sample_store))
    assert line.startswith(f"fleetaudit: error: {option}: '{value}' is not a")
