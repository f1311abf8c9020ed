"""Operator ergonomics: pipes, devices, FIFOs, umask, Ctrl-C, the lock wait, --quiet."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetaudit.cli import app
from fleetaudit.core.errors import UsageError
from fleetaudit.core.fsutil import atomic_path, stream_fd, write_output
from fleetaudit.model.store import open_store
from tests.conftest import command_paths

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
runner = CliRunner()


def invoke(*args: str | Path) -> object:
    return runner.invoke(app, [str(a) for a in args])


def fleetaudit(
    *args: str | Path,
    cwd: Path,
    umask: int | None = None,
    env: dict[str, str] | None = None,
    **kwargs: object,
) -> subprocess.CompletedProcess[str]:
    """The real command line in a subprocess (real pipes, real signals)."""
    env = {**(os.environ if env is None else env), "PYTHONPATH": str(REPO)}
    return subprocess.run(  # type: ignore[call-overload,no-any-return]
        [sys.executable, "-m", "fleetaudit", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        preexec_fn=None if umask is None else (lambda: os.umask(umask)),
        **kwargs,
    )


@pytest.fixture
def tiny_db(tmp_path: Path, tiny_dir: Path) -> Path:
    db = tmp_path / "fleet.duckdb"
    assert invoke("ingest", tiny_dir, "--db", db, "--quiet").exit_code == 0
    return db


@pytest.fixture
def umask_027() -> Iterator[None]:
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


# -- 1. pipes, devices, FIFOs ------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "fd"),
    [("-", 1), ("/dev/stdout", 1), ("/dev/stderr", 2), ("/dev/fd/7", 7), ("/proc/self/fd/3", 3)],
)
def test_stream_paths_name_open_streams(path: str, fd: int) -> None:
    assert stream_fd(path) == fd


@pytest.mark.parametrize("path", ["out.json", "./-", "/dev/null", "/dev/stdout2", "-x"])
def test_other_paths_are_files(path: str) -> None:
    assert stream_fd(path) is None


def test_report_json_to_a_real_pipe(tmp_path: Path, tiny_db: Path) -> None:
    """`--json -` and `--json /dev/stdout` write the document into the pipe, no file named -."""
    for target in ("-", "/dev/stdout"):
        done = fleetaudit("report", "--db", tiny_db, "--json", target, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        document = json.loads(done.stdout)  # stdout holds the document alone
        assert document["schema"] == "fleetaudit.report/1"
        assert not (tmp_path / "-").exists()
        assert "wrote" not in done.stderr
    assert os.path.islink("/dev/stdout")  # still the system's link


def test_state_csv_to_stdout_needs_a_format(tmp_path: Path, tiny_db: Path) -> None:
    done = fleetaudit("state", "--db", tiny_db, "--out", "-", "--out-format", "csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("node_id,gpu_model,gpus,")
    assert [line.split(",")[0] for line in lines[1:]] == ["n1", "n2", "n3", "n4", "n5", "n6", "n7"]
    missing = invoke("state", "--db", tiny_db, "--out", "-")
    assert missing.exit_code == 2
    assert "or give --out-format" in missing.stderr


def test_two_outputs_cannot_share_stdout(tiny_db: Path) -> None:
    result = invoke("report", "--db", tiny_db, "--json", "-", "--html", "-")
    assert result.exit_code == 2
    assert "only one output can go to stdout" in result.stderr


def test_a_fifo_is_written_in_place(tmp_path: Path) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    write_output(fifo, "through the fifo\n")
    reader.join(timeout=10)
    assert received == [b"through the fifo\n"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # not replaced by a regular file
    assert [p.name for p in tmp_path.iterdir()] == ["report.fifo"]  # no temporary left


def test_a_device_is_written_in_place(tmp_path: Path) -> None:
    write_output("/dev/null", b"x" * 10)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_symlink_keeps_its_link(tmp_path: Path) -> None:
    target = tmp_path / "2026-05-01.html"
    target.write_text("old")
    link = tmp_path / "latest.html"
    link.symlink_to(target.name)
    write_output(link, "new")
    assert link.is_symlink()
    assert target.read_text() == "new"


def test_a_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is a folder"):
        write_output(tmp_path, "x")


# -- 2. permissions -----------------------------------------------------------------------


@pytest.mark.usefixtures("umask_027")
def test_new_files_get_the_umask_mode(tmp_path: Path) -> None:
    path = tmp_path / "new.json"
    write_output(path, "{}")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # 0666 & ~027, as cp gives


@pytest.mark.usefixtures("umask_027")
def test_a_replaced_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "kept.html"
    path.write_text("old")
    path.chmod(0o604)
    with atomic_path(path) as tmp:
        tmp.write_text("new")
    assert path.read_text() == "new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o604


def test_report_files_are_readable_by_the_web_server(tmp_path: Path, tiny_db: Path) -> None:
    """A real umask (022) in a real subprocess: the nightly HTML is 0644, not 0600."""
    done = fleetaudit(
        "report", "--db", tiny_db, "--html", "out/{date}.html", "--quiet", cwd=tmp_path, umask=0o022
    )
    assert done.returncode == 0, done.stderr
    (html,) = (tmp_path / "out").iterdir()  # the missing folder was created
    assert stat.S_IMODE(html.stat().st_mode) == 0o644


# -- 3. --quiet -----------------------------------------------------------------------------


def test_quiet_prints_nothing_but_writes(tmp_path: Path, tiny_dir: Path) -> None:
    db = tmp_path / "q.duckdb"
    done = fleetaudit("ingest", tiny_dir, "--db", db, "-q", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    done = fleetaudit("report", "--db", db, "--json", "r.json", "--quiet", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert json.loads((tmp_path / "r.json").read_text())["schema"] == "fleetaudit.report/1"


def test_quiet_still_prints_errors(tmp_path: Path) -> None:
    result = invoke("status", "--db", tmp_path / "none.duckdb", "--quiet")
    assert result.exit_code == 2
    assert result.stderr.startswith("fleetaudit: error: ")
    assert result.stdout == ""


# -- 4. Ctrl-C ------------------------------------------------------------------------------


@contextlib.contextmanager
def _lock_held(db: Path) -> Iterator[None]:
    """Another process holds ``db``'s write lock for the duration of the block."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time, duckdb; c = duckdb.connect(sys.argv[1]); "
            "print('locked', flush=True); time.sleep(60)",
            str(db),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()  # type: ignore[union-attr]


def _interrupt(
    args: list[str], cwd: Path, after: float, wait_for: str | None = None
) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleetaudit", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    if wait_for is not None:  # a line on stderr says it reached the point to interrupt
        line = proc.stderr.readline()
        assert wait_for in line, line
    time.sleep(after)
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=120)
    return proc.returncode, rest


def test_ctrl_c_while_waiting_for_the_lock(tmp_path: Path, tiny_dir: Path, tiny_db: Path) -> None:
    """A real SIGINT: exit 130, one line, and the store keeps what it held."""
    before = invoke("status", "--db", tiny_db).stdout
    with _lock_held(tiny_db):
        code, stderr = _interrupt(
            ["ingest", str(tiny_dir), "--db", str(tiny_db)], tmp_path, 0.2, wait_for="waiting"
        )
    assert code == 130
    assert stderr == "fleetaudit: error: interrupted; the store keeps its last committed state\n"
    assert invoke("status", "--db", tiny_db).stdout == before


def test_ctrl_c_during_start_up_is_one_line(tmp_path: Path) -> None:
    """A SIGINT while the command line imports (polars, duckdb, rich): no traceback.

    The signal comes from a timer started just before the entry point runs, so it
    lands in the imports (a machine that imports faster gets to the missing store: 2).
    """
    script = (
        "import os, signal, sys, threading\n"
        "sys.argv = ['fleetaudit', 'status', '--db', 'none.duckdb']\n"
        "import fleetaudit.__main__ as entry\n"
        "threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGINT)).start()\n"
        "entry.main()\n"
    )
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode in (130, 2), done.stderr
        assert len(done.stderr.splitlines()) == 1, done.stderr
        assert done.stderr.startswith("fleetaudit: error: ")


def test_a_query_interrupted_by_ctrl_c_is_a_keyboard_interrupt(tmp_path: Path) -> None:
    """DuckDB's 'Query interrupted' must not become an internal error (exit 1)."""
    store = open_store(tmp_path / "s.duckdb")
    try:
        timer = threading.Timer(0.3, store.con.interrupt)
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            store.sql("SELECT count(*) FROM range(1000000000000) a WHERE a.range % 7 = 3")
        timer.join()
    finally:
        store.close()


# -- 9. the lock wait is said -------------------------------------------------------------


def test_waiting_for_the_lock_is_said_once(tiny_db: Path, tiny_dir: Path) -> None:
    with _lock_held(tiny_db):
        result = invoke("ingest", tiny_dir, "--db", tiny_db, "--lock-timeout", "1.6")
    assert result.exit_code == 75
    lines = result.stderr.splitlines()
    assert lines[0] == (
        f"note: {tiny_db}: the store is locked by another fleetaudit process; "
        "waiting up to 1.6 s (--lock-timeout)"
    )
    assert len(lines) == 2 and lines[1].startswith("fleetaudit: error: ")


def test_a_short_wait_is_not_said(tiny_db: Path, tiny_dir: Path) -> None:
    with _lock_held(tiny_db):
        result = invoke("ingest", tiny_dir, "--db", tiny_db, "--lock-timeout", "0.3")
    assert result.exit_code == 75
    assert "waiting" not in result.stderr


# -- 6. rejects you can read ----------------------------------------------------------------


@pytest.fixture
def short_lines_db(tmp_path: Path) -> Path:
    db = tmp_path / "rejects.duckdb"
    assert invoke("ingest", DATA / "tiny", "--db", db, "-q").exit_code == 0  # ingest #1: clean
    assert invoke("ingest", DATA / "short_lines" / "nodes.csv", "--db", db, "-q").exit_code == 0
    return db


def test_rejects_lists_the_newest_ingest(
    short_lines_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # the file's path is long
    result = invoke("rejects", "--db", short_lines_db, "--limit", "2")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "ingest #2: 5 row(s) rejected, the first 2 below"
    assert "memory_gib" in lines[3] and "the line has 4 field(s); the header has 7" in lines[3]


def test_rejects_csv_and_json(short_lines_db: Path) -> None:
    result = invoke("rejects", "--db", short_lines_db, "--csv")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "file,table,row,column,value,reason",
        f'{DATA / "short_lines" / "nodes.csv"},nodes,2,memory_gib,"n2,H20,8,64",'
        "the line has 4 field(s); the header has 7",
        f'{DATA / "short_lines" / "nodes.csv"},nodes,4,cpus,"n4,H20,8",'
        "the line has 3 field(s); the header has 7",
        f'{DATA / "short_lines" / "nodes.csv"},nodes,5,,"n5,H20,8,64,1024,sw-a,healthy,extra,more",'
        "the line has 9 field(s); the header has 7",
        f'{DATA / "short_lines" / "nodes.csv"},nodes,8,health,"n8,H20,8,64,1024,sw-a",'
        "the line has 6 field(s); the header has 7",
        # a text cell beginning with - would be a formula in a spreadsheet: an apostrophe
        f"{DATA / 'short_lines' / 'nodes.csv'},nodes,12,gpus,'-8,'-8 is negative",
    ]
    raw = invoke("rejects", "--db", short_lines_db, "--csv", "--csv-raw")
    assert raw.stdout.splitlines()[-1].endswith(",nodes,12,gpus,-8,-8 is negative")
    document = json.loads(
        invoke("rejects", "--db", short_lines_db, "--json", "--limit", "1").stdout
    )
    assert (document["schema"], document["ingest_id"], document["total"], document["shown"]) == (
        "fleetaudit.rejects/1", 2, 5, 1,
    )  # fmt: skip
    assert document["rejects"][0]["row"] == 2


def test_rejects_of_an_older_ingest(short_lines_db: Path) -> None:
    result = invoke("rejects", "--db", short_lines_db, "--ingest", "1")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == ["ingest #1: 0 row(s) rejected"]
    missing = invoke("rejects", "--db", short_lines_db, "--ingest", "9")
    assert missing.exit_code == 2
    assert "has no ingest #9 (the newest is #2)" in missing.stderr


# -- 5. COLUMNS -----------------------------------------------------------------------------


def test_piped_output_honours_columns(tmp_path: Path, short_lines_db: Path) -> None:
    env = {**os.environ, "COLUMNS": "60"}
    done = fleetaudit("rejects", "--db", short_lines_db, cwd=tmp_path, env=env)
    assert done.returncode == 0
    assert max(len(line) for line in done.stdout.splitlines()) <= 60
    env.pop("COLUMNS")
    done = fleetaudit("rejects", "--db", short_lines_db, cwd=tmp_path, env=env)
    assert max(len(line) for line in done.stdout.splitlines()) > 60  # piped: 120 wide


# -- 5. 80 columns: every table keeps its key columns -----------------------------------


@pytest.fixture(scope="module")
def demo_at_80(tmp_path_factory: pytest.TempPathFactory) -> str:
    db = tmp_path_factory.mktemp("demo80") / "demo.duckdb"
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "80"
    try:
        result = invoke("demo", "--db", db)
    finally:
        if old is None:
            os.environ.pop("COLUMNS")
        else:
            os.environ["COLUMNS"] = old
    assert result.exit_code == 0, result.output
    return result.stdout


def _block(text: str, title: str) -> list[str]:
    """The lines from the one starting with ``title`` down to the next bottom rule."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    block = []
    for line in lines[start:]:
        block.append(line.rstrip())
        if line.startswith("└"):
            break
    return block


def test_every_demo_line_fits_80_columns(demo_at_80: str) -> None:
    too_wide = [line for line in demo_at_80.splitlines() if len(line) > 80]
    assert too_wide == []


def test_at_80_columns_the_state_table_keeps_every_column(demo_at_80: str) -> None:
    expected = (DATA / "columns80" / "state.txt").read_text(encoding="utf-8").splitlines()
    assert _block(demo_at_80, "GPUs at ") == expected


def test_at_80_columns_the_shapes_table_folds_its_labels_and_stacks(demo_at_80: str) -> None:
    """The 55-character shape label folds; the stranded causes, which do not fit beside
    the counts, follow in a second part under the same labels: no column is left out."""
    block = _block(demo_at_80, "shapes at ")
    assert block[2] == (
        "┃ shape                         ┃ queued ┃ instances ┃ usable GPUs ┃ idle GPUs ┃"
    )
    at = block.index(
        "│ H20|H800 256 GPU (32x8) x12   │      1 │         0 │           0 │        51 │"
    )
    assert block[at + 1].startswith("│ CPU x96 GiB switch for 1d     │        │")
    rest = _block(demo_at_80[demo_at_80.index("\n(continued)", demo_at_80.index("shapes at ")):].lstrip(),
                  "(continued)")  # fmt: skip
    assert (
        rest[2]
        == "┃ shape                                             ┃ stranded GPUs by cause   ┃"
    )
    assert (
        "│ H20 256 GPU (32x8) x12 CPU x96 GiB switch for 1d  │ fffffffffffftttt f23 t8  │" in rest
    )
    assert "left out" not in demo_at_80


def test_at_80_columns_the_report_summary_keeps_model_names(demo_at_80: str) -> None:
    assert _block(demo_at_80, "report ")[:11] == (
        (DATA / "columns80" / "report_summary.txt").read_text(encoding="utf-8").splitlines()
    )


# -- 3. the README's cron line, verbatim ----------------------------------------------------


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_the_readme_cron_line_runs_verbatim_in_an_empty_folder(tmp_path: Path) -> None:
    """.ci/cron-line runs it with cron's empty environment; here fleetaudit is this checkout."""
    wrapper = tmp_path / "fleetaudit"
    wrapper.write_text(
        f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m fleetaudit "$@"\n'
    )
    wrapper.chmod(0o755)
    done = subprocess.run(
        [str(REPO / ".ci" / "cron-line"), str(wrapper)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "silently" in done.stdout


def test_the_harvesting_replay_says_when_it_compiles(
    monkeypatch: pytest.MonkeyPatch, tiny_db: Path
) -> None:
    """The notice depends on the cache's state, not on a terminal (cron, pipes see it)."""
    from fleetaudit import api
    from fleetaudit.api import harvest_api
    from fleetaudit.api.harvest_api import HarvestRun
    from fleetaudit.core import jitcache
    from fleetaudit.whatif import harvest

    monkeypatch.setattr(harvest, "warm_up", _stop)  # the replay itself is not the point
    said: list[str] = []
    run = HarvestRun(policies=("spotgpu",), record=False)
    monkeypatch.setattr(jitcache, "is_cached", lambda _source: False)
    with pytest.raises(_Stop):
        harvest_api.whatif_harvesting(api.StoreOptions(tiny_db), run, notice=said.append)
    assert len(said) == 1 and said[0].startswith("compiling the harvesting replay, once per")
    monkeypatch.setattr(jitcache, "is_cached", lambda _source: True)
    with pytest.raises(_Stop):
        harvest_api.whatif_harvesting(api.StoreOptions(tiny_db), run, notice=said.append)
    assert len(said) == 1


def _stop() -> None:
    raise _Stop


class _Stop(Exception):
    pass


# -- 10. help texts --------------------------------------------------------------------------

HELP_COMMANDS = [list(path) for path in command_paths(leaves_only=True)]


@pytest.mark.parametrize("command", HELP_COMMANDS, ids=" ".join)
def test_help_has_examples_word_placeholders_and_no_missing_document(
    command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    result = invoke(*command, "--help")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "Examples:" in text
    assert f"fleetaudit {' '.join(command)}" in text.split("Examples:")[1]
    assert "SPEC" not in text and "§" not in text
    assert not re.search(r"<(str|bool|int|float|path|list\[\w+\])>", text), text


def test_placement_help_keeps_its_brackets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    text = invoke("whatif", "placement", "--help").stdout
    assert "the requests of [at - since, at) arrive as recorded" in text
    assert "the window [at - since, at) (default 1d, or from the data" in text
