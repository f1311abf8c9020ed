"""Slurm exports from the versions operators run, and hostile ones.

- The real outputs in ../shared/realsamples/slurm (each folder's SOURCE.txt names its
  public source; read from there, never copied): one test per sample holds its reading.
- An invented Slurm 24.x pair (tests/data/slurm_json24: sacct --json data_parser
  v0.0.42, squeue --json v0.0.41), written to the documented layout of those plugins,
  for what the 22.05 cluster of tests/test_realslurm.py cannot print.
- Hostile inputs: a NaN in squeue's JSON, a 100 MB sacct line, a negative TRES count, a
  JSON nested 100,000 deep: each is one line naming the file, the row or object and the
  field, exit 2 (or, for a count, a reject saying what is wrong with it).
- The SQL reading of sacct times agrees with the Python one (a fuzz test).
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from fleetaudit.cli import app
from fleetaudit.core.errors import InputError
from fleetaudit.inputs.ingest import IngestOptions, ingest
from fleetaudit.inputs.ingest.slurm import sql_time
from fleetaudit.inputs.ingest.slurm_times import SlurmTimeError, parse_slurm_time
from fleetaudit.model.store import Store, open_store
from tests.conftest import DATA, REPO, write
from tests.fuzzing import FUZZ

JSON24 = DATA / "slurm_json24"
EPOCH = datetime(1970, 1, 1)


def _at(seconds: int) -> datetime:
    return EPOCH + timedelta(seconds=seconds)


@pytest.fixture
def samples() -> Path:
    """../shared/realsamples/slurm, or $FLEETAUDIT_REALSAMPLES/slurm."""
    env = os.environ.get("FLEETAUDIT_REALSAMPLES")
    found = Path(env) / "slurm" if env else REPO.parent / "shared" / "realsamples" / "slurm"
    if not (found / "S_sacctjson_23_2_6" / "sacct.json").is_file():
        pytest.skip("the real Slurm samples are absent (../shared/realsamples/slurm)")
    return found


def _nodes(tmp_path: Path, *names: str, gpus: int = 8) -> Path:
    """An invented node list for the nodes a real sacct sample names (its own lists
    come from other clusters)."""
    lines = [
        f"NodeName={n} CPUTot=96 Gres=gpu:{gpus} RealMemory=512000 State=MIXED "
        f"CfgTRES=cpu=96,mem=500G,gres/gpu={gpus}"
        for n in names
    ]
    return write(tmp_path / "nodes.txt", "\n".join(lines) + "\n")


def _rows(store: Store, sql: str) -> list[dict[str, object]]:
    return store.sql(sql).rows(named=True)


# -- real samples ---------------------------------------------------------------------------


def test_sample_23_02_energy_not_set_keeps_the_job(samples: Path, store: Store, tmp_path: Path) -> None:
    # 23.02 adds an energy TRES with count -2 ("not set"): the job and its 2 GPUs stay
    path = samples / "S_sacctjson_23_2_6" / "sacct.json"
    result = ingest(store, [path, _nodes(tmp_path, "mila02")], IngestOptions(format="slurm"))
    assert result.rejected == 0
    (alloc,) = _rows(store, "SELECT * FROM allocations")
    assert (alloc["node_id"], alloc["gpus"], alloc["end_time"], alloc["state"]) == (
        "mila02", 2.0, None, "RUNNING"
    )  # fmt: skip
    assert alloc["start_time"] == _at(1613725209)
    # the export's own time: the running job's start plus its elapsed time
    assert store.sql("SELECT export_time FROM exports").item() == _at(1613725209 + 83853331)
    assert result.export_time is not None and "elapsed" in result.export_time[1]


def test_sample_23_11_state_list_and_energy(samples: Path, store: Store, tmp_path: Path) -> None:
    path = samples / "S_sacctjson_23_11_5" / "sacct.json"
    ingest(store, [path, _nodes(tmp_path, "mila02")], IngestOptions(format="slurm"))
    (alloc,) = _rows(store, "SELECT gpus, state, workload FROM allocations")
    assert alloc == {"gpus": 2.0, "state": "RUNNING", "workload": "development"}  # JobName sh
    assert store.sql("SELECT export_time FROM exports").item() == _at(1613725209 + 102228976)


def test_sample_22_05_array_task_over_four_nodes(samples: Path, store: Store, tmp_path: Path) -> None:
    path = samples / "S_sacctjson_22_5_9" / "sacct.json"
    nodes = _nodes(tmp_path, "ng30103", "ng30203", "ng30706", "ng30707", gpus=4)
    assert ingest(store, [path, nodes], IngestOptions(format="slurm")).rejected == 0
    allocs = _rows(store, "SELECT node_id, gpus, end_time, slurm_job_id FROM allocations ORDER BY 1")
    assert [(a["node_id"], a["gpus"]) for a in allocs] == [
        ("ng30103", 4.0), ("ng30203", 4.0), ("ng30706", 4.0), ("ng30707", 4.0)
    ]  # fmt: skip
    assert {a["end_time"] for a in allocs} == {_at(1693865044)}
    assert {a["slurm_job_id"] for a in allocs} == {"20247445_100"}
    (request,) = _rows(store, "SELECT * FROM requests")
    assert request["request_id"] == "20247445_100:1692160813"  # keyed by its task
    assert (request["gpus"], request["gpus_per_pod"], request["locality"]) == (16.0, 4.0, "any")
    assert (request["submit_time"], request["eligible_time"]) == (_at(1692160813), _at(1692160814))


def test_sample_21_08_node_fail_with_no_end_ends_after_its_elapsed_time(
    samples: Path, store: Store, tmp_path: Path
) -> None:
    path = samples / "S_clockwork_sacctjson_2108_scontrol_2011" / "sacct_1.json"
    ingest(store, [path, _nodes(tmp_path, "cdr1", "cdr2")], IngestOptions(format="slurm"))
    allocs = {a["state"]: a for a in _rows(store, "SELECT * FROM allocations")}
    failed = allocs["NODE_FAIL"]  # End=0: not running forever
    assert (failed["start_time"], failed["end_time"]) == (_at(1680193504), _at(1680193504 + 20615))
    assert failed["end_from_elapsed"] is True
    assert allocs["REQUEUED"]["end_time"] == _at(1680215981)
    assert sorted(_rows(store, "SELECT request_id FROM requests"), key=str) == [
        {"request_id": "1_7:1680193479"}, {"request_id": "2_0:1680127990"}
    ]  # fmt: skip


def test_sample_21_08_requeued_job(samples: Path, store: Store, tmp_path: Path) -> None:
    path = samples / "S_sacctjson_21_8_8" / "sacct.json"
    ingest(store, [path, _nodes(tmp_path, "cdr896")], IngestOptions(format="slurm"))
    (alloc,) = _rows(store, "SELECT * FROM allocations")
    assert (alloc["gpus"], alloc["state"], alloc["end_time"]) == (1.0, "REQUEUED", _at(1673369386))


@pytest.mark.parametrize(
    ("folder", "files"),
    [
        ("S_clockwork_sacctjson_2108_scontrol_2011", ("scontrol_node_2.txt", "scontrol_node_2.oneline.txt")),
        ("S_scontrol_biowulf_2108", ("nodes.txt", "nodes.oneline.txt")),
        ("S_scontrol_lambda_a100", ("nodes.txt", "nodes.oneline.txt")),
        ("S_scontrol_marcc_1711", ("nodes.txt", "nodes.oneline.txt")),
        ("S_scontrol_soperator_2411", ("nodes.txt", "nodes.oneline.txt")),
    ],
)
def test_sample_node_lists_pasted_or_one_line_read_alike(
    samples: Path, tmp_path: Path, folder: str, files: tuple[str, str]
) -> None:
    read = []
    for name in files:
        with open_store(tmp_path / f"{name}.duckdb") as s:
            assert ingest(s, [samples / folder / name], IngestOptions(format="slurm")).rejected == 0
            read.append(s.sql("SELECT * EXCLUDE (_ingest_id) FROM nodes ORDER BY node_id").rows())
    assert read[0] == read[1]


_NODE_READINGS = {
    # node: (model, GPUs, CPUs, memory GiB, health, features)
    "test-node": ("RTX8000", 8, 80.0, 386619 / 1024, "healthy", "x86_64,turing,48gb"),
    "cn1092": ("A100", 4, 64.0, 253400 / 1024, "healthy", "cpu64,core32,g256,ssd3200,e7543p,ibhdr200,gpua100"),
    # CfgTRES without gres/gpu (accounting does not track it): the Gres gives the 8 GPUs;
    # AvailableFeatures=(null) is no value
    "lambda-hyperplane01": ("A100", 8, 64.0, 1031736 / 1024, "healthy", None),
    # untyped Gres=gpu:2: the model is the feature v100
    "gpudev002": ("V100", 2, 24.0, 95307 / 1024, "healthy", "skylake,v100"),
    # 24.11: typed nvidia_h100_80gb_hbm3, State=IDLE+DYNAMIC_NORM, times with spaces
    "worker-0": ("H100 80GB HBM3", 8, 128.0, 1570840 / 1024, "healthy", None),
}


@pytest.mark.parametrize(
    ("folder", "name", "node"),
    [
        ("S_clockwork_sacctjson_2108_scontrol_2011", "scontrol_node_2.txt", "test-node"),
        ("S_scontrol_biowulf_2108", "nodes.txt", "cn1092"),
        ("S_scontrol_lambda_a100", "nodes.txt", "lambda-hyperplane01"),
        ("S_scontrol_marcc_1711", "nodes.txt", "gpudev002"),
        ("S_scontrol_soperator_2411", "nodes.txt", "worker-0"),
    ],
)
def test_sample_node_readings(samples: Path, store: Store, folder: str, name: str, node: str) -> None:
    ingest(store, [samples / folder / name], IngestOptions(format="slurm"))
    row = store.sql(
        "SELECT gpu_model, gpus, cpus, memory_gib, health, features FROM nodes WHERE node_id = $n",
        {"n": node},
    ).row(0)
    assert row == pytest.approx(_NODE_READINGS[node])


def test_sample_21_08_squeue_pending_array_on_a_dependency(samples: Path, store: Store) -> None:
    path = samples / "S_rivos_squeue_sinfo_2108" / "squeue_out.json"
    ingest(store, [path], IngestOptions(format="slurm"))
    rows = _rows(store, "SELECT request_id, eligible_time, ineligible_reason FROM requests")
    tasks = [r for r in rows if r["request_id"].startswith("58948420_")]
    # array_task_string 1-10: ten tasks, none queued until the dependency is met
    assert sorted(int(r["request_id"].split("_")[1].split(":")[0]) for r in tasks) == list(range(1, 11))
    assert {(r["eligible_time"], r["ineligible_reason"]) for r in tasks} == {(None, "Dependency")}
    assert not store.query("queued_requests_at", at=_at(1800000000)).filter(
        pl.col("request_id").str.starts_with("58948420_")
    ).height


def test_sample_21_08_sinfo_json_nodes(samples: Path, store: Store) -> None:
    path = samples / "S_rivos_squeue_sinfo_2108" / "sinfo_out.json"
    assert ingest(store, [path], IngestOptions(format="slurm")).rejected == 0
    nodes = store.sql("SELECT node_id, gpu_model, gpus, cpus, health FROM nodes ORDER BY 1").rows()
    assert nodes[0] == ("cs2.example.company.com", "CPU", 0, 64.0, "healthy")
    assert len(nodes) == 4


@pytest.mark.parametrize("name", ["sacct-output.txt", "sacct-output-v1.txt"])
def test_sample_headerless_sacct_says_what_to_run(samples: Path, store: Store, name: str) -> None:
    with pytest.raises(InputError, match="without its header line\\? Run sacct without -n"):
        ingest(store, [samples / "S_hpccost_headerless" / name], IngestOptions(format="slurm"))


def test_sample_parsable_with_trailing_bar_names_the_missing_field(samples: Path, store: Store) -> None:
    # -p prints a trailing '|'; this export lacks Submit, NodeList and AllocTRES
    with pytest.raises(InputError, match="column Submit: required sacct field missing"):
        ingest(store, [samples / "S_mila_sacct_p_trailing" / "sacct.psv"], IngestOptions(format="slurm"))


def test_parsable_with_trailing_bar_reads(store: Store, tmp_path: Path) -> None:
    sacct = write(
        tmp_path / "sacct.psv",
        "JobID|JobIDRaw|Submit|Start|End|State|NodeList|AllocTRES|\n"
        "7|7|1772323200|1772326800|1772330400|COMPLETED|n1|cpu=4,gres/gpu=2|\n",
    )
    nodes = write(tmp_path / "nodes.txt", "NodeName=n1 CPUTot=16 Gres=gpu:8 State=IDLE\n")
    assert ingest(store, [sacct, nodes], IngestOptions(format="slurm")).rejected == 0
    assert store.sql("SELECT gpus FROM allocations").item() == 2


# -- an invented Slurm 24.x export ----------------------------------------------------------


def test_slurm_24_json_plugins(store: Store, tmp_path: Path) -> None:
    nodes = write(
        tmp_path / "nodes.txt",
        "NodeName=h01 CPUTot=64 Gres=gpu:h100:8 RealMemory=1000000 State=IDLE\n"
        "NodeName=h02 CPUTot=64 Gres=gpu:h100:8 RealMemory=1000000 State=IDLE\n",
    )
    result = ingest(store, [JSON24, nodes], IngestOptions(format="slurm"))
    assert result.rejected == 0
    allocs = _rows(store, "SELECT node_id, gpus, start_time, end_time, exit_code, state FROM allocations")
    assert [(a["node_id"], a["gpus"], a["exit_code"], a["state"]) for a in allocs] == [
        ("h01", 8.0, "0", "COMPLETED"), ("h02", 8.0, "0", "COMPLETED")
    ]  # fmt: skip
    requests = {r["request_id"]: r for r in _rows(store, "SELECT * FROM requests")}
    # the pending array's task string 0-3: four requests
    assert sorted(k for k in requests if k.startswith("502_")) == [
        f"502_{i}:1772334000" for i in range(4)
    ]
    big = requests["503:1772337600"]  # required_switches 1, four nodes of 8
    assert (big["gpus"], big["gpus_per_pod"], big["locality"]) == (32.0, 8.0, "switch")
    after = requests["504:1772338000"]
    assert (after["ineligible_reason"], after["eligible_time"], after["duration_s"]) == (
        "Dependency", None, None
    )  # fmt: skip
    # squeue's last_update is the export's own time
    assert store.sql("SELECT export_time, how FROM exports").row(0) == (
        _at(1772341200), "squeue --json's last_update"
    )  # fmt: skip


# -- node events --------------------------------------------------------------------------


def test_sacctmgr_events_hostlists_and_an_event_older_than_the_window(
    store: Store, tmp_path: Path
) -> None:
    events = write(
        tmp_path / "events.psv",
        "Cluster|NodeName|TimeStart|TimeEnd|State|Reason|User\n"
        "fa||1700000000|Unknown||Cluster Registered TRES|\n"
        "fa|n[1-2]|1600000000|Unknown|DOWN|rack power|root(0)\n"  # years before any window
        "fa|n2|1772323200|1772326800|IDLE+DRAIN|xid 79|root(0)\n"
        "fa|n3|yesterday|Unknown|DOWN|bad|root(0)\n",
    )
    nodes = write(
        tmp_path / "nodes.txt",
        "".join(f"NodeName=n{i} CPUTot=16 Gres=gpu:8 State=IDLE\n" for i in (1, 2, 3)),
    )
    result = ingest(store, [events, nodes], IngestOptions(format="slurm"))
    got = store.sql(
        "SELECT node_id, state, start_time, end_time, reason, source FROM node_events ORDER BY 1, 3"
    ).rows()
    assert got == [
        ("n1", "down", _at(1600000000), None, "rack power", "slurm:sacctmgr"),
        ("n2", "down", _at(1600000000), None, "rack power", "slurm:sacctmgr"),
        ("n2", "drain", _at(1772323200), _at(1772326800), "xid 79", "slurm:sacctmgr"),
    ]
    (reject,) = result.rejects.rows(named=True)
    assert (reject["table"], reject["row"], reject["column"]) == ("node_events", 4, "start_time")
    assert "cannot read the time 'yesterday'" in reject["reason"]


def test_sinfo_21_08_state_flags_are_read(store: Store, tmp_path: Path) -> None:
    nodes = write(
        tmp_path / "sinfo.json",
        json.dumps({"nodes": [
            {"name": "g1", "state": "idle", "state_flags": ["DRAIN"], "cpus": 32, "gres": "gpu:a100:4",
             "reason": "fan", "reason_changed_at": 1772323200},
            {"name": "g2", "state": "mixed", "state_flags": [], "cpus": 32, "gres": "gpu:a100:4"},
        ]}),
    )  # fmt: skip
    ingest(store, [nodes], IngestOptions(format="slurm", export_time=_at(1772330000)))
    assert store.sql("SELECT node_id, health FROM nodes ORDER BY 1").rows() == [
        ("g1", "cordoned"), ("g2", "healthy")
    ]  # fmt: skip
    # its reason's time from the JSON: the open interval starts there
    assert store.sql("SELECT node_id, state, start_time, source FROM node_events").rows() == [
        ("g1", "drain", _at(1772323200), "slurm:scontrol")
    ]


# -- hostile inputs -------------------------------------------------------------------------


def _cli_ingest(*paths: Path, db: Path, strict: bool = False) -> tuple[int, str]:
    args = ["ingest", "--format", "slurm", *map(str, paths), "--db", str(db)]
    result = CliRunner().invoke(app, [*args, *(["--strict"] if strict else [])])
    return result.exit_code, result.stderr


def test_a_nan_in_squeue_json_names_the_job_and_field(tmp_path: Path) -> None:
    path = write(
        tmp_path / "squeue.json",
        '{"jobs": [{"job_id": 7, "job_state": "PENDING", "submit_time": 1772323200},'
        ' {"job_id": 8, "job_state": "PENDING", "submit_time": NaN}]}',
    )
    code, err = _cli_ingest(path, db=tmp_path / "s.duckdb")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"fleetaudit: error: {path} row 2, column submit_time: nan is not a number")
    assert not (tmp_path / "s.duckdb").exists() or "allocations" not in err


def test_a_100_mb_sacct_line_names_its_row_and_field(tmp_path: Path) -> None:
    path = tmp_path / "sacct.psv"
    with path.open("w") as fh:
        fh.write("JobID|JobIDRaw|Submit|Start|End|State|NodeList|AllocTRES\n")
        fh.write("1|1|1772323200|1772326800|1772330400|COMPLETED|n1|cpu=1\n")
        fh.write("2|2|1772323200|1772326800|1772330400|COMPLETED|n1|" + "x" * 100_000_000 + "\n")
    code, err = _cli_ingest(path, db=tmp_path / "s.duckdb")
    assert code == 2 and err.count("\n") == 1
    assert f"{path} row 2, column AllocTRES: a line of 95.4 MiB" in err


def test_a_negative_tres_count_is_a_reject_that_says_so(tmp_path: Path) -> None:
    sacct = write(
        tmp_path / "in" / "sacct.psv",
        "JobID|JobIDRaw|Submit|Start|End|State|NodeList|AllocTRES\n"
        "1|1|1772323200|1772326800|1772330400|COMPLETED|n1|cpu=4,gres/gpu=-2\n"
        "2|2|1772323200|1772326800|1772330400|COMPLETED|n1|cpu=4,gres/gpu=2\n",
    )
    write(tmp_path / "in" / "nodes.txt", "NodeName=n1 CPUTot=16 Gres=gpu:8 State=IDLE\n")
    code, err = _cli_ingest(sacct.parent, db=tmp_path / "s.duckdb", strict=True)
    assert code == 2 and err.count("\n") == 1
    assert f"{sacct} row 1, column AllocTRES: TRES item 'gres/gpu=-2': count '-2' is negative" in err


def test_a_deeply_nested_squeue_json_is_one_line(tmp_path: Path) -> None:
    path = write(tmp_path / "squeue.json", '{"jobs": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code, err = _cli_ingest(path, db=tmp_path / "s.duckdb")
    assert code == 2 and err.count("\n") == 1
    assert f"{path}: JSON nested too deeply to read" in err


# -- the two readers of Slurm times agree ------------------------------------------------------


def _sql_times(store: Store, texts: list[str], zone: str) -> list[datetime | None]:
    store.register_frame("_fa_times", pl.DataFrame({"t": texts}, schema={"t": pl.Utf8}))
    frame = store.sql(
        f"SELECT {sql_time('t')} AS v FROM (SELECT t AS \"t\" FROM _fa_times) AS j",
        {"tz": zone},
    )
    store.unregister("_fa_times")
    return frame["v"].to_list()


_TIMES = st.one_of(
    st.integers(0, 7_000_000_000).map(str),
    st.datetimes(min_value=datetime(1901, 1, 2), max_value=datetime(2199, 12, 30)).map(
        lambda d: d.replace(microsecond=0).isoformat()
    ),
    st.text(st.sampled_from(list("0123456789-T: .UTCNonekw")), max_size=22),
)


@pytest.mark.fuzz
@FUZZ
@given(st.lists(_TIMES, min_size=1, max_size=8), st.sampled_from(["UTC", "Europe/Berlin"]))
def test_fuzz_sql_and_python_read_sacct_times_alike(texts: list[str], zone: str) -> None:
    with open_store(Path(":memory:")) as store:
        sql = _sql_times(store, texts, zone)
    low, high = datetime(1900, 1, 1), datetime(2200, 1, 1)
    for text, value in zip(texts, sql, strict=True):
        if text.strip().endswith("UTC"):
            continue  # scontrol 24.11's suffix: read by Python only (sacct never prints it)
        try:
            expected = parse_slurm_time(text, zone)
        except SlurmTimeError:
            expected = None  # a reject: no time
        if value is not None and not low <= value < high:
            value = None  # ingest's range check rejects it
        assert value == expected, text


# -- the export time, for every format ---------------------------------------------------------


def test_export_time_given_at_ingest_is_the_export_time_of_its_rows(tmp_path: Path) -> None:
    # a native export whose last allocation ends in the future of the export (a
    # scheduled end): with --export-time, the rows' later times are not the export time
    folder = tmp_path / "native"
    write(folder / "nodes.csv", "node_id,gpu_model,gpus,cpus\nn1,H100,8,64\n")
    write(
        folder / "allocations.csv",
        "alloc_id,node_id,gpus,cpus,priority,start_time,end_time\n"
        "a1,n1,4,8,high,2026-03-01T00:00:00Z,2026-03-01T06:00:00Z\n"
        "a2,n1,4,8,high,2026-03-01T01:00:00Z,2026-03-09T00:00:00Z\n",
    )
    db = tmp_path / "s.duckdb"
    runner = CliRunner()
    args = ["ingest", str(folder), "--db", str(db), "--export-time", "2026-03-01T08:00:00Z"]
    assert runner.invoke(app, args).exit_code == 0
    status = " ".join(runner.invoke(app, ["status", "--db", str(db)]).stdout.split())
    assert "export time 2026-03-01T08:00:00Z (from given with --export-time, ingest #1)" in status
    # a later call without a time of its own: its newest row counts beside the stamp
    later = write(tmp_path / "more" / "allocations.csv",
                  "alloc_id,node_id,gpus,cpus,priority,start_time\na3,n1,1,1,high,2026-03-02T00:00:00Z\n")
    assert runner.invoke(app, ["ingest", str(later), "--db", str(db)]).exit_code == 0
    status = " ".join(runner.invoke(app, ["status", "--db", str(db)]).stdout.split())
    assert "export time 2026-03-02T00:00:00Z (from the newest start, end, submit or sample" in status


def test_a_store_without_stamps_keeps_the_newest_time(tmp_path: Path) -> None:
    folder = tmp_path / "native"
    write(folder / "nodes.csv", "node_id,gpu_model,gpus,cpus\nn1,H100,8,64\n")
    write(
        folder / "allocations.csv",
        "alloc_id,node_id,gpus,cpus,priority,start_time,end_time\n"
        "a1,n1,4,8,high,2026-03-01T00:00:00Z,2026-03-01T06:00:00Z\n",
    )
    db = tmp_path / "s.duckdb"
    assert CliRunner().invoke(app, ["ingest", str(folder), "--db", str(db)]).exit_code == 0
    from fleetaudit.api import export_time_of

    with open_store(db, read_only=True) as store:
        assert export_time_of(store) == (
            datetime(2026, 3, 1, 6), "the newest start, end, submit or sample in the data"
        )
