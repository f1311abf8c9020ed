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
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fleetaudit import __version__, api
from fleetaudit.cli import app
from fleetaudit.model.store import open_store
from tests.conftest import write

runner = CliRunner()


def invoke(*args: str | Path) -> object:
    return runner.invoke(app, [str(a) for a in args])


def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"fleetaudit {__version__}"


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
            ["ingest", "--format", "lsf", "x.csv"],
            "unknown --format 'lsf'; use native or alibaba-gpu-v2023",
        ),
        (["generate", "out", "--nodes", "0"], "--nodes: must be"),
        (["shapes", "--gpus", "1e999999"], "--gpus: give a finite number of 0 or more, not inf"),
        (["shapes", "--gpus", "-8"], "--gpus: give a finite number of 0 or more, not -8"),
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


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--nodes", "0"), "fleetaudit: error: --nodes: must be an integer >= 1, got 0\n"),
        (("--harvested-nights", "1.5"),
         "fleetaudit: error: --harvested-nights: must be in [0, 1], got 1.5\n"),
    ],
)  # fmt: skip
def test_generate_errors_name_the_flag(tmp_path: Path, args, message) -> None:
    result = invoke("generate", tmp_path / "fleet", *args)
    assert result.exit_code == 2 and result.stderr == message
    assert not (tmp_path / "fleet").exists()


def test_generate_into_an_unwritable_folder_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    out = tmp_path / "file" / "fleet"
    result = invoke("generate", out, "--nodes", "4", "--days", "1", "--format", "csv")
    assert result.exit_code == 2
    assert result.stderr == f"fleetaudit: error: {out}: cannot write the fleet: Not a directory\n"


def test_demo_in_process(tmp_path: Path) -> None:
    result = invoke("demo", "--db", tmp_path / "demo.duckdb")
    assert result.exit_code == 0, result.output
    assert "capacity by GPU model" in result.stdout
    assert "GPUs at 2026-05-01T00:00:00Z" in result.stdout
    # the demo ends with the report: its one-screen summary, then the details
    assert "physical: allocated / healthy" in result.stdout
    lines = result.stdout.rstrip().splitlines()
    assert lines[-4].startswith("harvesting: ")
    assert lines[-3].startswith("remedies: not run on this database yet")
    # then the report's page, written beside the store
    page = tmp_path / "demo-report.html"
    assert lines[-2:] == ["the report as a page, to open in a browser:", str(page)]
    assert '<b id="fleet-allocation-rate-high">' in page.read_text(encoding="utf-8")


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
    assert "H20 256 GPU (32x8)" in done.stdout  # the queued shapes, then the report
    assert "physical: allocated / healthy" in done.stdout
    assert all(line.startswith("note: ") for line in done.stderr.splitlines()), done.stderr


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


def _hostile_files(folder: Path) -> dict[str, Path]:
    """Inputs that once slipped past the one-line rule (review of issue 2)."""
    import gzip as gz

    import duckdb

    files: dict[str, Path] = {}
    files["binary csv"] = folder / "binary" / "nodes.csv"
    files["binary csv"].parent.mkdir(parents=True)
    files["binary csv"].write_bytes(bytes(range(256)) * 20)
    files["truncated gzip"] = folder / "gz" / "nodes.csv.gz"
    files["truncated gzip"].parent.mkdir()
    files["truncated gzip"].write_bytes(
        gz.compress(b"node_id,gpu_model,gpus,cpus\nn1,H20,8,64\n" * 50)[:40]
    )
    files["bom"] = write(
        folder / "bom" / "nodes.csv", "\ufeffnode_id,gpu_model,gpus,cpus\nn1,H20,8,64\n"
    )
    files["mixed jsonl"] = write(
        folder / "json" / "nodes.jsonl",
        '{"node_id": "n1", "gpu_model": "H20", "gpus": 8, "cpus": 64}\n'
        '{"node_id": 2, "gpu_model": "H20", "gpus": "8", "cpus": 64}\n',
    )
    files["markup"] = write(
        folder / "markup" / "nodes.csv",
        'node_id,gpu_model,gpus,cpus,switch_id\n"[/bad]",[b]H20,8,64,[/x]\n',
    )
    files["infinite time"] = write(
        folder / "inf" / "allocations.csv",
        "alloc_id,node_id,gpus,cpus,priority,start_time\na1,n1,1,1,high,infinity\na2,n1,1,1,high,99999-01-01\n",
    )
    files["huge numbers"] = write(
        folder / "huge" / "nodes.csv",
        "node_id,gpu_model,gpus,cpus,memory_gib\nn9,H20,100000000000000,1e300,1e20\n",
    )
    files["reserved column"] = write(
        folder / "res" / "nodes.csv", "node_id,gpu_model,gpus,cpus,_ingest_id\nn1,H20,8,64,3\n"
    )
    files["newline value"] = write(
        folder / "nl" / "allocations.csv",
        'alloc_id,node_id,gpus,cpus,priority,start_time\n"a\nb",n1,x,1,high,2026-01-01\n',
    )
    wide = folder / "wide" / "nodes.parquet"
    wide.parent.mkdir()
    duckdb.connect().execute(
        f"COPY (SELECT 'n1' AS node_id, 'H20' AS gpu_model, 18446744073709551615::UBIGINT AS gpus, "
        f"64 AS cpus) TO '{wide}'"
    )
    files["ubigint parquet"] = wide
    return files


def test_hostile_inputs_give_one_line_or_rejects(tmp_path: Path, tiny_dir: Path) -> None:
    db = tmp_path / "fleet.duckdb"
    assert invoke("ingest", tiny_dir, "--db", db).exit_code == 0
    for name, path in _hostile_files(tmp_path / "in").items():
        for strict in ((), ("--strict",)):
            result = invoke("ingest", path, "--db", db, *strict)
            assert result.exit_code in (0, 2, 65), (name, result.output)  # 65: all rejected
            if result.exit_code in (2, 65):
                assert result.stderr.startswith("fleetaudit: error: "), name
                assert result.stderr.count("\n") == 1, (name, result.stderr)
                assert "Traceback" not in result.stderr
        # whatever was loaded, reading the store still works
        for command in ("status", "state"):
            result = invoke(command, "--db", db)
            assert result.exit_code == 0, (name, command, result.output)
    with open_store(db) as s:
        reasons = dict(
            s.sql(
                "SELECT value, reason FROM rejects WHERE \"column\" IN ('start_time', 'gpus', 'cpus')"
            ).rows()
        )
        assert reasons["infinity"] == "infinity is outside 1900..2200"
        assert reasons["100000000000000"] == "100000000000000 is above the maximum 1024"
        # mixed JSON types are read as text without quotes
        assert s.sql("SELECT node_id FROM nodes WHERE node_id IN ('2', '\"2\"')").rows() == [("2",)]
        assert s.sql("SELECT gpu_model FROM nodes WHERE node_id = '[/bad]'").rows() == [("[b]H20",)]


def test_busy_store_exits_75_with_one_line(tmp_path: Path, tiny_dir: Path) -> None:
    db = tmp_path / "fleet.duckdb"
    assert invoke("ingest", tiny_dir, "--db", db).exit_code == 0
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, duckdb; c = duckdb.connect(sys.argv[1]); print('locked', flush=True); time.sleep(30)",
            str(db),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        result = invoke("ingest", tiny_dir, "--db", db, "--lock-timeout", "0.5")
        assert result.exit_code == 75
        assert result.stderr == (
            f"fleetaudit: error: {db}: the store is locked by another fleetaudit process; "
            "gave up after 0.5 s (raise --lock-timeout or retry later)\n"
        )
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()  # type: ignore[union-attr]


def test_demo_refuses_a_store_with_other_data(tmp_path: Path, tiny_dir: Path) -> None:
    db = tmp_path / "fleet.duckdb"
    assert invoke("ingest", tiny_dir, "--db", db).exit_code == 0
    result = invoke("demo", "--db", db)
    assert result.exit_code == 2
    assert "holds other data than the sample fleet" in result.stderr


def test_options_that_do_not_apply_are_errors(tmp_path: Path, tiny_dir: Path) -> None:
    result = invoke("ingest", tiny_dir, "--db", tmp_path / "x.duckdb", "--trace-start", "0")
    assert result.exit_code == 2
    assert (
        "--trace-start applies to --format alibaba-gpu-v2023 or alibaba-gpu-v2026 only"
        in result.stderr
    )
    # --topology applies to every format; a missing file is named
    result = invoke("ingest", tiny_dir, "--db", tmp_path / "x.duckdb", "--topology", "topo.csv")
    assert result.exit_code == 2
    assert "topo.csv" in result.stderr and not (tmp_path / "x.duckdb").exists()


def test_whatif_placement_has_help() -> None:
    result = invoke("whatif", "placement", "--help")
    assert result.exit_code == 0, result.output
    assert "--fill" in result.stdout and "--save-as" in result.stdout


# -- option values: plain ones converted as typer's own conversion would -----------------


def _param(path: tuple[str, ...], name: str) -> tuple[object, object]:
    """The click parameter ``name`` of the command at ``path``, and a context for it."""
    import typer.main
    from typer._click import Context

    command = typer.main.get_command(app)
    for part in path:
        command = command.commands[part]  # type: ignore[attr-defined]
    param = next(p for p in command.params if p.name == name)
    return param, Context(command)


def _converted(coercion: object, value: object, param: object, ctx: object) -> tuple[str, object]:
    from typer._click.exceptions import BadParameter

    try:
        result = coercion.coerce(value, param=param, ctx=ctx)  # type: ignore[attr-defined]
    except BadParameter as exc:
        return "error", exc.format_message()
    return type(result).__name__, result


_OPTIONS = [
    (("shapes",), "max_instances"),  # int | None
    (("shapes",), "lock_timeout"),  # float
    (("shapes",), "step"),  # str
    (("shapes",), "db"),  # Path
    (("ingest",), "paths"),  # list[Path] argument
    (("ingest",), "percent"),  # list[str] | None
]
_TEXT = st.text(alphabet="0123456789-+._e /aix", max_size=8)


@pytest.mark.parametrize(("path", "name"), _OPTIONS, ids=[n for _, n in _OPTIONS])
@given(
    value=st.one_of(
        st.none(), _TEXT, st.integers(), st.floats(allow_nan=False),
        st.lists(_TEXT, max_size=3).map(tuple),
    )
)  # fmt: skip
@settings(max_examples=60, deadline=None)
def test_plain_values_convert_as_typer_converts_them(
    path: tuple[str, ...], name: str, value: object
) -> None:
    """Every value gives what typer's pydantic conversion gives: the same value and type,
    or the same error text."""
    from typer._coercion import build_runtime_param

    from fleetaudit.cli import _PlainCoercion

    param, ctx = _param(path, name)
    many = param.multiple or param.nargs == -1  # type: ignore[attr-defined]
    if many != isinstance(value, tuple) and value is not None:
        return  # click hands a list parameter a tuple, any other a single value
    theirs = build_runtime_param(param.type_descriptor)  # type: ignore[attr-defined]
    assert _converted(_PlainCoercion(param), value, param, ctx) == _converted(
        theirs, value, param, ctx
    )


@pytest.mark.parametrize(("value", "expected"), [("", "."), ("./a", "a"), ("a//b/", "a/b")])
def test_a_path_is_what_pathlib_makes_of_it(value: str, expected: str) -> None:
    """As typer's conversion (pydantic's Path of the text): not only paths written as
    pathlib writes them."""
    from typer._coercion import build_runtime_param

    from fleetaudit.cli import _PlainCoercion

    param, ctx = _param(("shapes",), "db")
    theirs = _converted(build_runtime_param(param.type_descriptor), value, param, ctx)  # type: ignore[attr-defined]
    mine = _PlainCoercion(param)
    assert _converted(mine, value, param, ctx) == theirs == ("PosixPath", Path(expected))
    assert mine.typer_coercion is None  # converted here: typer's (pydantic) never built


@pytest.mark.parametrize(
    ("path", "name", "value", "kind"),
    [
        (("shapes",), "max_instances", "9" * 5000, "error"),  # more digits than int() reads
        (("shapes",), "max_instances", "0" * 5000 + "7", "int"),
        (("shapes",), "lock_timeout", 10**400, "error"),  # beyond a float
        (("shapes",), "db", "x\x00y", "error"),  # no path holds NUL
    ],
    ids=["long-int", "long-zeros", "huge-number", "nul-path"],
)
def test_values_python_refuses_convert_as_typer_converts_them(
    path: tuple[str, ...], name: str, value: object, kind: str
) -> None:
    """What Python's own conversion refuses goes to typer's: its value or its error text,
    not a traceback."""
    from typer._coercion import build_runtime_param

    from fleetaudit.cli import _PlainCoercion

    param, ctx = _param(path, name)
    theirs = _converted(build_runtime_param(param.type_descriptor), value, param, ctx)  # type: ignore[attr-defined]
    assert theirs[0] == kind
    assert _converted(_PlainCoercion(param), value, param, ctx) == theirs


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max", "abc"], "Invalid value for '--max': Input should be a valid integer, unable to parse string as an integer"),
        (["--max", "1.5"], "Invalid value for '--max': Input should be a valid integer, unable to parse string as an integer"),
        (["--lock-timeout", "x"], "Invalid value for '--lock-timeout': Input should be a valid number, unable to parse string as a number"),
        (["--gpus", "1,5"], "Invalid value for '--gpus': Input should be a valid number, unable to parse string as a number"),
    ],
)  # fmt: skip
def test_a_value_that_is_not_plain_reads_as_typer_reads_it(
    tmp_path: Path,
    args: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """typer's own conversion reads what is not plain: its error texts, one line, exit 2."""
    from fleetaudit.cli import main

    monkeypatch.setattr(sys, "argv", ["fleetaudit", "shapes", *args, "--db", str(tmp_path / "x")])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        f"fleetaudit: error: {message} (see fleetaudit shapes --help)\n"
    )


def test_status_counts_health_and_domains_as_the_capacity_model(tmp_path: Path) -> None:
    """status's capacity by model: sw1 holds an H20 and an A10 node (one domain of the
    fleet, one of each model); the node named sw1 has no switch, so it is a domain by
    itself, not part of switch sw1; n4 is down."""
    folder = tmp_path / "fleet"
    write(folder / "nodes.csv", """
node_id,gpu_model,gpus,cpus,switch_id,health
n1,H20,8,64,sw1,healthy
n2,A10,4,32,sw1,healthy
sw1,H20,8,64,,healthy
n4,H20,8,64,,down
""")
    db = tmp_path / "s.duckdb"
    assert invoke("ingest", folder, "--db", db).exit_code == 0
    result = invoke("status", "--db", db, "--csv", f"{tmp_path}/csv/")  # a file per table
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "csv").iterdir()) == ["capacity.csv", "tables.csv"]
    assert (tmp_path / "csv" / "capacity.csv").read_text().splitlines() == [
        "gpu_model,nodes,gpus,healthy_gpus,domains",
        "H20,3,24,16,3",  # switch sw1, node sw1, node n4
        "A10,1,4,4,1",
    ]
    summary = api.summarize(api.StoreOptions(db=db))
    assert summary.domains == 3  # not 3 + 1: sw1 holds both models
    table = invoke("status", "--db", db).stdout
    (fleet,) = [line for line in table.splitlines() if " all " in line]
    assert [word for word in fleet.split() if word.isdigit()] == ["4", "28", "20", "3"]


def test_status_reads_a_null_health_as_healthy() -> None:
    nodes = pl.DataFrame({"node_id": ["a", "b"], "gpu_model": ["H20", "H20"], "gpus": [8, 8],
                          "switch_id": [None, None], "health": [None, "cordoned"]})  # fmt: skip
    models, domains = api.capacity_by_model(nodes)
    assert models.rows() == [("H20", 2, 16, 8, 2)]
    assert domains == 2


def test_state_counts_free_and_partial_nodes_among_gpu_nodes(tmp_path: Path) -> None:
    """A healthy node without GPUs is neither free nor partial, as in compaction: c1
    (CPU, 0 GPUs) idle; n1 holds 3 of 8 GPUs; n2 none; n3 is down."""
    folder = tmp_path / "fleet"
    write(folder / "nodes.csv", """
node_id,gpu_model,gpus,cpus,health
n1,H20,8,64,healthy
n2,H20,8,64,healthy
n3,H20,8,64,down
c1,CPU,0,96,healthy
""")
    write(folder / "allocations.csv", """
alloc_id,node_id,gpus,cpus,priority,start_time
a1,n1,3,8,high,2026-01-01T00:00:00Z
a2,c1,0,16,low,2026-01-01T00:00:00Z
""")
    db = tmp_path / "s.duckdb"
    assert invoke("ingest", folder, "--db", db).exit_code == 0
    result = invoke("state", "--db", db, "--csv")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "gpu_model,installed,unhealthy,high,low,idle,free_nodes,partial_nodes",
        "H20,24,8,3,0,13,1,1",
        "CPU,0,0,0,0,0,0,0",
    ]
