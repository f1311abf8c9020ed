"""``--format alibaba-gpu-v2026`` on the worked fixture (tests/asi_fixture.py), by hand."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetaudit import api
from fleetaudit.core.errors import InputError
from fleetaudit.inputs.asi_trace import (
    POD_SCHEMA,
    POD_TABLE,
    SERVER_SCHEMA,
    SERVER_TABLE,
    table_of,
    write_partition,
)
from fleetaudit.inputs.ingest import IngestOptions
from fleetaudit.inputs.ingest.asi2026 import _absences, parse_days
from fleetaudit.inputs.ingest.labels import asi_bucket
from fleetaudit.model.store import open_store
from tests.asi_fixture import pod_rows, server_rows, write_fixture

START = datetime(2026, 1, 1)
OPTIONS = IngestOptions(format="alibaba-gpu-v2026", trace_start=START)


def ts(t: int) -> datetime:
    return datetime(2026, 1, 1 + t // 24, t % 24)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, api.IngestResult]:
    base = tmp_path_factory.mktemp("asi")
    root = write_fixture(base / "data")
    db = base / "fleet.duckdb"
    result = api.ingest_paths(api.StoreOptions(db), [root], OPTIONS)
    return db, result


def _table(db: Path, sql: str) -> pl.DataFrame:
    with open_store(db, read_only=True) as store:
        return store.sql(sql)


def test_layout_is_the_release(tmp_path: Path) -> None:
    root = write_fixture(tmp_path)
    names = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.parquet"))
    assert names[0] == "asi_opensource_pod_hourly/day=0/hour=22/part-000.parquet"
    assert "asi_opensource_server_hourly/day=1/hour=00/part-000.parquet" in names
    assert len(names) == 8


def test_nodes(loaded: tuple[Path, api.IngestResult]) -> None:
    db, _ = loaded
    nodes = _table(
        db,
        "SELECT node_id, gpu_model, gpus, cpus, memory_gib, switch_id, health, gpu_spec_public, "
        "last_seen FROM nodes ORDER BY node_id",
    )
    assert nodes.rows() == [
        ("s1", "H20", 8, 192.0, None, "c1/asw1", "healthy", "H20-96G", ts(25)),
        ("s2", "H20", 8, 192.0, None, "c1/asw1", "healthy", None, ts(25)),
        ("s3", "A100", 8, 128.0, None, "c1/asw2", "healthy", "A100-SXM4-80GB", ts(25)),
        ("s4", "XPU-A", 16, 256.0, None, None, "down", None, ts(24)),
    ]


def test_node_events_date_a_server_gone_before_the_last_hour(
    loaded: tuple[Path, api.IngestResult],
) -> None:
    """s4 was last listed at t = 24: down from the end of that hour on (open), which dates
    its recorded ``down``: it counts as healthy before."""
    db, _ = loaded
    events = _table(db, "SELECT * EXCLUDE (_ingest_id) FROM node_events ORDER BY node_id")
    assert events.rows() == [
        ("s4", None, ts(25), None, "down", "absent from server_hourly",
         "alibaba-gpu-v2026:server_hourly"),
    ]  # fmt: skip


def test_absences_count_only_hours_the_release_lists() -> None:
    """A server missing from listed hours between two it was in is down for them; hours
    without any server file are no absence; a gap across blocks counts from the last hour
    the server was known in."""
    known = pl.DataFrame({"server_id": ["a", "b"], "last_t": [3, 9]})
    day = pl.DataFrame({"server_id": ["a", "a", "a", "b", "b"], "t": [10, 11, 14, 10, 12]})
    listed = set(range(0, 13)) | {14}  # hour 13 has no server file
    gaps = _absences(known, day, listed).sort("server_id", "from_t").rows()
    assert gaps == [("a", 4, 10), ("b", 11, 12)]  # a: 12-13 has unlisted hour 13


EXPECTED_ALLOCATIONS = [
    # alloc_id, node, gpus, cpus, priority, workload, start, end, sleepable, asi_state, gpu_hours
    ("p-cpu-1@22", "s3", 0.0, 8.0, "low", "cpu_only", ts(22), None, False, "Running", 0.0),
    ("p-dev-1@22", "s3", 1.0, 12.0, "high", "development", ts(22), ts(24), False, "Succeeded", 1.5),
    ("p-infer-1@22", "s2", 4.0, 32.0, "high", "online_inference", ts(22), ts(24), False, "Running", 8.0),
    ("p-infer-1@24", "s2", 4.0, 32.0, "high", "online_inference", ts(24), None, True, "Standby", 8.0),
    ("p-lp-1@24", "s2", 2.0, 16.0, "low", "offline_inference", ts(24), None, False, "Running", 4.0),
    ("p-lp-2@25", "s2", 3.0, 24.0, "low", "offline_inference", ts(25), None, False, "Running", 3.0),
    ("p-mig-1@22", "s3", 4.0, 48.0, "high", "training", ts(22), ts(23), False, "Running", 4.0),
    ("p-mig-1@23", "s4", 4.0, 48.0, "high", "training", ts(23), ts(25), False, "Running", 8.0),
    ("p-pend-1@25", "s3", 1.0, 8.0, "high", "online_inference", ts(25), None, False, "Pending", 0.0),
    ("p-share-1@22", "s2", 0.5, 4.0, "high", "online_inference", ts(22), ts(23), False, "Running", 0.5),
    ("p-share-1@24", "s2", 0.5, 4.0, "high", "online_inference", ts(24), ts(25), False, "Succeeded", 0.25),
    ("p-train-1@22", "s1", 8.0, 96.0, "high", "training", ts(22), None, False, "Running", 32.0),
]  # fmt: skip


def test_allocations(loaded: tuple[Path, api.IngestResult]) -> None:
    db, _ = loaded
    rows = _table(
        db,
        "SELECT alloc_id, node_id, gpus, cpus, priority, workload, start_time, end_time, "
        "sleepable, asi_state, gpu_hours FROM allocations ORDER BY alloc_id",
    )
    assert rows.rows() == EXPECTED_ALLOCATIONS


def test_allocation_extras(loaded: tuple[Path, api.IngestResult]) -> None:
    db, _ = loaded
    rows = {
        r["alloc_id"]: r
        for r in _table(db, "SELECT * FROM allocations").iter_rows(named=True)
    }
    assert rows["p-train-1@22"]["left_censored"] is True
    assert rows["p-infer-1@24"]["left_censored"] is False
    assert rows["p-share-1@22"]["workload_id"] is None
    assert rows["p-cpu-1@22"]["priority_class"] == "Other"
    assert rows["p-cpu-1@22"]["job_type_public"] == "unknown"
    assert rows["p-lp-1@24"]["job_id"] == "p-lp-1"  # the pod, not its workload
    assert rows["p-lp-2@25"]["workload_id"] == "w-batch"
    assert rows["p-train-1@22"]["schedule_delay_sec"] == 30
    assert {r["memory_gib"] for r in rows.values()} == {None}


def test_over_subscription_is_kept(loaded: tuple[Path, api.IngestResult]) -> None:
    db, result = loaded
    assert result.rejected == 0
    at_25 = _table(
        db,
        "SELECT sum(gpus) AS g FROM allocations WHERE node_id = 's2' "
        "AND start_time <= TIMESTAMP '2026-01-02 01:00' "
        "AND (end_time IS NULL OR end_time > TIMESTAMP '2026-01-02 01:00')",
    )
    assert at_25["g"][0] == 9.0  # 4 sleeping + 2 + 3 on an 8-GPU server


# node, gpu indices, hours, sm_active, alloc_id (README: synthesised GPU indices)
EXPECTED_TELEMETRY = [
    ("s1", range(8), (22, 23, 24, 25), 0.7, "p-train-1@22"),
    ("s2", range(4), (22, 23), 0.5, "p-infer-1@22"),
    ("s2", (4,), (22,), 0.6, "p-share-1@22"),
    ("s2", range(4), (24,), 0.0, "p-infer-1@24"),
    ("s2", (1, 2, 3), (25,), 0.0, "p-infer-1@24"),
    ("s2", (4, 5), (24, 25), 0.6, "p-lp-1@24"),
    ("s2", (6,), (24,), 0.6, "p-share-1@24"),
    ("s2", (0, 6, 7), (25,), 0.5, "p-lp-2@25"),
    ("s3", range(4), (22,), 0.8, "p-mig-1@22"),
    ("s3", (4,), (22,), 0.1, "p-dev-1@22"),
    ("s4", range(4), (23, 24), 0.8, "p-mig-1@23"),
]


def test_telemetry(loaded: tuple[Path, api.IngestResult]) -> None:
    db, _ = loaded
    got = _table(
        db,
        "SELECT node_id, gpu_index, ts, round(sm_active, 9) AS sm, alloc_id, mem_used, interval_s "
        "FROM telemetry ORDER BY node_id, ts, gpu_index",
    )
    want = sorted(
        (node, i, ts(t), sm, alloc, None, 3600)
        for node, gpus, hours, sm, alloc in EXPECTED_TELEMETRY
        for i in gpus
        for t in hours
    )
    assert got.height == 69
    assert sorted(got.rows()) == want


def test_side_tables(loaded: tuple[Path, api.IngestResult]) -> None:
    db, _ = loaded
    pods = _table(db, "SELECT * FROM asi_pod_hourly")
    assert pods.height == 19  # the 23 pod-hours but p-cpu-1's four (no GPU)
    servers = _table(
        db,
        "SELECT t, server_id, gpu_model, cpu_only_hp_rows FROM asi_server_hourly "
        "ORDER BY t, server_id",
    )
    assert servers.height == 15  # s4 is gone at 25
    assert set(servers["gpu_model"]) == {"H20", "A100", "XPU-A"}
    # the one CPU-only pod is Other, so no HP CPU-only totals; p-pend-1 asks 1 GPU
    assert servers["cpu_only_hp_rows"].sum() == 0
    assert _table(db, "SELECT count(*) AS n FROM asi_trace")["n"][0] == 1


def test_reingest_is_idempotent(tmp_path: Path) -> None:
    root = write_fixture(tmp_path / "data")
    db = tmp_path / "fleet.duckdb"
    (tmp_path / ".fleet.duckdb.asi-staging-killed").mkdir()  # left by a killed call
    api.ingest_paths(api.StoreOptions(db), [root], OPTIONS)
    again = api.ingest_paths(api.StoreOptions(db), [root], OPTIONS)
    assert {t.table: t.new for t in again.tables} == {
        "nodes": 0, "allocations": 0, "telemetry": 0, "node_events": 0,
    }  # fmt: skip
    assert _table(db, "SELECT count(*) AS n FROM allocations")["n"][0] == 12
    assert _table(db, "SELECT count(*) AS n FROM asi_pod_hourly")["n"][0] == 19
    assert not list(tmp_path.glob(".fleet.duckdb.asi-staging-*"))


@pytest.mark.parametrize("days", ["0", "0-0"])
def test_days_window_and_day_boundary(tmp_path: Path, days: str) -> None:
    """Day 0 alone: its last hour (t = 23) is the export time; runs end there open."""
    root = write_fixture(tmp_path / "data")
    db = tmp_path / "fleet.duckdb"
    api.ingest_paths(
        api.StoreOptions(db),
        [root],
        IngestOptions(format="alibaba-gpu-v2026", days=parse_days(days)),
    )
    rows = _table(db, "SELECT alloc_id, end_time FROM allocations ORDER BY alloc_id").rows()
    assert rows == [
        ("p-cpu-1@22", None),
        ("p-dev-1@22", None),
        ("p-infer-1@22", None),
        ("p-mig-1@22", ts(23)),
        ("p-mig-1@23", None),
        ("p-share-1@22", ts(23)),
        ("p-train-1@22", None),
    ]
    health = _table(db, "SELECT health FROM nodes")["health"].to_list()
    assert health == ["healthy"] * 4


def test_day_boundary_joins_runs(loaded: tuple[Path, api.IngestResult]) -> None:
    """p-train-1 runs over t = 23 -> 24 (day 0 -> day 1): one allocation, not two."""
    db, _ = loaded
    ids = _table(db, "SELECT alloc_id FROM allocations WHERE job_id = 'p-train-1'")["alloc_id"]
    assert ids.to_list() == ["p-train-1@22"]


def _broken(tmp_path: Path, pods: pa.Table) -> Path:
    root = tmp_path / "data"
    write_partition(root, SERVER_TABLE, 0, 22, table_of(server_rows(22), SERVER_SCHEMA))
    write_partition(root, POD_TABLE, 0, 22, pods)
    return root


def _ingest_error(root: Path, db: Path) -> InputError:
    with pytest.raises(InputError) as info:
        api.ingest_paths(api.StoreOptions(db), [root], OPTIONS)
    return info.value


def test_missing_gpu_request_names_file_and_column(tmp_path: Path) -> None:
    pods = table_of(pod_rows(22), POD_SCHEMA).drop_columns(["gpu_request"])
    root = _broken(tmp_path, pods)
    err = _ingest_error(root, tmp_path / "f.duckdb")
    assert "day=0/hour=22/part-000.parquet" in err.message
    assert "gpu_request" in err.message
    assert not (tmp_path / "f.duckdb").exists()  # nothing half-written: the new store is gone
    assert not list(tmp_path.glob(".f.duckdb.asi-staging-*"))  # nor the staged days


def test_wrong_type_names_file(tmp_path: Path) -> None:
    pods = table_of(pod_rows(22), POD_SCHEMA)
    pods = pods.set_column(
        pods.schema.get_field_index("gpu_request"),
        "gpu_request",
        pa.array([str(v) for v in pods["gpu_request"].to_pylist()]),
    )
    err = _ingest_error(_broken(tmp_path, pods), tmp_path / "f.duckdb")
    assert "day=0/hour=22" in err.message and "gpu_request" in err.message


def test_server_file_missing_a_column_names_file_and_column(tmp_path: Path) -> None:
    root = _broken(tmp_path, table_of(pod_rows(22), POD_SCHEMA))
    servers = table_of(server_rows(22), SERVER_SCHEMA).drop_columns(["gpu_count"])
    write_partition(root, SERVER_TABLE, 0, 22, servers)
    err = _ingest_error(root, tmp_path / "f.duckdb")
    assert f"{SERVER_TABLE}/day=0/hour=22/part-000.parquet" in err.message
    assert "gpu_count" in err.message
    assert not (tmp_path / "f.duckdb").exists()


def test_not_the_layout(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    err = _ingest_error(tmp_path / "empty", tmp_path / "f.duckdb")
    assert "asi_opensource_pod_hourly/day=D/hour=HH" in err.message


def test_empty_tree(tmp_path: Path) -> None:
    (tmp_path / "data" / SERVER_TABLE).mkdir(parents=True)
    (tmp_path / "data" / POD_TABLE).mkdir(parents=True)
    err = _ingest_error(tmp_path / "data", tmp_path / "f.duckdb")
    assert "no day=D/hour=HH" in err.message


@pytest.mark.parametrize(
    ("table", "old", "new"),
    [(POD_TABLE, "hour=22", "hour=xx"), (SERVER_TABLE, "hour=22", "hour=2 2"), (POD_TABLE, "", "")],
)
def test_a_partition_folder_that_is_no_number_fails_naming_it(
    tmp_path: Path, table: str, old: str, new: str
) -> None:
    root = _broken(tmp_path, table_of(pod_rows(22), POD_SCHEMA))
    if old:
        (root / table / "day=0" / old).rename(root / table / "day=0" / new)
        bad = root / table / "day=0" / new
    else:
        (root / table / "day=0").rename(root / table / "day=zero")
        bad = root / table / "day=zero"
    err = _ingest_error(root, tmp_path / "f.duckdb")
    assert err.file == str(bad)
    assert "is not a number" in err.message
    assert not (tmp_path / "f.duckdb").exists()


def test_unpadded_hour_and_extra_part_files(tmp_path: Path) -> None:
    root = tmp_path / "data"
    rows = server_rows(22)
    write_partition(root, SERVER_TABLE, 0, 5, table_of(rows, SERVER_SCHEMA))
    (root / SERVER_TABLE / "day=0" / "hour=05").rename(root / SERVER_TABLE / "day=0" / "hour=5")
    pods = pod_rows(22)
    write_partition(root, POD_TABLE, 0, 5, table_of(pods[:3], POD_SCHEMA))
    (root / POD_TABLE / "day=0" / "hour=05").rename(root / POD_TABLE / "day=0" / "hour=5")
    write_partition(root, POD_TABLE, 0, 5, table_of(pods[3:], POD_SCHEMA), name="part-001.parquet")
    (root / POD_TABLE / "day=0" / "hour=05" / "part-001.parquet").rename(
        root / POD_TABLE / "day=0" / "hour=5" / "part-001.parquet"
    )
    (root / POD_TABLE / "day=0" / "hour=05").rmdir()
    db = tmp_path / "f.duckdb"
    api.ingest_paths(api.StoreOptions(db), [root], OPTIONS)
    rows_ = _table(db, "SELECT alloc_id, start_time FROM allocations ORDER BY alloc_id").rows()
    assert len(rows_) == len(pods)
    assert rows_[0] == ("p-cpu-1@5", ts(5))


def test_rejects(tmp_path: Path) -> None:
    pods = pod_rows(22)
    pods[0] = {**pods[0], "gpu_request": 9.0}  # p-train-1 on the 8-GPU s1
    pods.append({**pods[1], "pod_id": "p-nowhere", "server_id": None})
    pods.append({**pods[1], "pod_id": "p-ghost", "server_id": "s9"})
    root = _broken(tmp_path, table_of(pods, POD_SCHEMA))
    db = tmp_path / "f.duckdb"
    result = api.ingest_paths(api.StoreOptions(db), [root], OPTIONS)
    rejects = _table(db, 'SELECT file, "row", "column", reason FROM rejects ORDER BY reason')
    reasons = rejects["reason"].to_list()
    assert result.rejected == 3
    assert any("9.0 is above its node's 8 GPUs" in r for r in reasons)
    assert any("unknown node s9" in r for r in reasons)
    assert any("without server_id" in r for r in reasons)
    nowhere = rejects.filter(pl.col("column") == "server_id").row(0)
    assert nowhere[0].endswith("day=0/hour=22/part-000.parquet") and nowhere[1] == len(pods) - 1


def test_bucket_rule() -> None:
    assert [asi_bucket(s) for s in ("H20-96G", "XPU-A", "XPU-A-v2", "A100", "A10", "X1")] == [
        "H20", "XPU-A", "XPU-A", "A100", "A10", "X1",
    ]  # fmt: skip


def test_summary_notes(loaded: tuple[Path, api.IngestResult]) -> None:
    """The covered range and the reconciliation of used vs interval GPU-hours, by hand."""
    _, result = loaded
    assert result.notes[0].endswith(
        "hours t=22..25 cover 2026-01-01T22:00Z to 2026-01-02T02:00Z "
        "(export time 2026-01-02T01:00Z)"
    )
    assert "23 pod-hours -> 12 allocation runs, 69 telemetry rows; 4 servers" in result.notes[1]
    # used: 32 + 8 + 8 + 0.5 + 0.25 + 4 + 3 + 1.5 + 4 + 8 + 0; intervals: the same with
    # whole hours (p-share-1 0.5 at 24, p-dev-1 1 at 23, p-pend-1 1 at 25)
    # s2 at t = 25: 4 (Standby) + 2 + 3 GPUs on 8
    assert result.notes[2].startswith("alibaba-gpu-v2026: 1 server-hours request more GPUs")
    assert "69.2 GPU-hours used" in result.notes[3] and "71.0 requested" in result.notes[3]


@st.composite
def _node_runs(draw: st.DrawFn) -> list[tuple[str, int, int, float]]:
    """Runs on one 8-GPU node that never ask for more than 8 GPUs at once."""
    runs: list[tuple[str, int, int, float]] = []
    for i in range(draw(st.integers(1, 12))):
        start = draw(st.integers(0, 20))
        end = draw(st.integers(start, 23))
        gpus = draw(st.sampled_from([0.25, 0.5, 1.0, 1.5, 2.0, 4.0, 8.0]))
        busy = max(
            (sum(g for _, s, e, g in runs if s <= t <= e) for t in range(start, end + 1)),
            default=0.0,
        )
        if busy + gpus <= 8:
            runs.append((f"a{i}", start, end, gpus))
    return runs


@given(_node_runs())
@settings(max_examples=60, deadline=None)
def test_gpu_colouring_keeps_whole_gpus_apart_within_capacity(runs: list) -> None:
    """Within capacity, no GPU ever holds two whole GPUs of work, and every share is placed.

    (Shares spread over several GPUs can leave too few GPUs wholly free; a whole GPU then
    goes onto the least-loaded shared one, so a GPU may carry one whole GPU plus shares.)
    """
    from fleetaudit.inputs.ingest.asi2026 import _Colouring

    colouring = _Colouring()
    colouring.capacity["n"] = 8.0
    frame = pl.DataFrame(
        [("n", a, s, e, g, False) for a, s, e, g in runs],
        schema=["node_id", "alloc_id", "t_start", "t_last", "gpus", "sleepable"],
        orient="row",
    ).sort("t_start", "gpus", "alloc_id", descending=[False, True, False])
    hours = pl.DataFrame(
        [("n", t, a, 0.5) for a, s, e, _ in runs for t in range(s, e + 1)],
        schema=["node_id", "t", "alloc_id", "ratio"],
        orient="row",
    )
    rows = colouring.telemetry(frame, hours, 23, START)
    assert rows.is_empty() or rows["gpu_index"].max() < 8
    for a, _, _, g in runs:
        assert sum(share for _, share in colouring.placed[a]) == pytest.approx(g)
    for t in range(24):
        whole = [0] * 8
        for a, s, e, _ in runs:
            if s <= t <= e:
                for index, share in colouring.placed[a]:
                    whole[index] += share == 1.0
        assert max(whole) <= 1


def _fixture_with(root: Path, pods_at: dict[int, list[dict[str, object]]]) -> Path:
    for t in (22, 23, 24, 25):
        day, hour = divmod(t, 24)
        write_partition(root, SERVER_TABLE, day, hour, table_of(server_rows(t), SERVER_SCHEMA))
        if t in pods_at:
            write_partition(root, POD_TABLE, day, hour, table_of(pods_at[t], POD_SCHEMA))
    return root


def test_cpu_only_run_split_by_a_changed_request(tmp_path: Path) -> None:
    """p-cpu-1 asks 8 CPUs at t = 22, 23 (carried into day 1), 4 at 24, 8 again at 25: its
    8-CPU hours on day 1 (23 carried, 25) are one group but two runs."""
    cpus = {22: 8.0, 23: 8.0, 24: 4.0, 25: 8.0}
    pods_at = {
        t: [
            {**row, "cpu_request_cores": cpus[t]}
            for row in pod_rows(t)
            if row["pod_id"] == "p-cpu-1"
        ]
        for t in cpus
    }
    db = tmp_path / "f.duckdb"
    api.ingest_paths(api.StoreOptions(db), [_fixture_with(tmp_path / "data", pods_at)], OPTIONS)
    rows = _table(
        db, "SELECT alloc_id, cpus, workload, start_time, end_time FROM allocations ORDER BY 1"
    ).rows()
    assert rows == [
        ("p-cpu-1@22", 8.0, "cpu_only", ts(22), ts(24)),
        ("p-cpu-1@24", 4.0, "cpu_only", ts(24), ts(25)),
        ("p-cpu-1@25", 8.0, "cpu_only", ts(25), None),
    ]


def test_day_without_pod_partitions(tmp_path: Path) -> None:
    """Day 1 has server hours but no pod partition: day 0's runs end at its end (t = 24)."""
    pods_at = {t: pod_rows(t) for t in (22, 23)}
    db = tmp_path / "f.duckdb"
    api.ingest_paths(api.StoreOptions(db), [_fixture_with(tmp_path / "data", pods_at)], OPTIONS)
    ends = dict(
        _table(db, "SELECT alloc_id, end_time FROM allocations ORDER BY 1").rows()
    )
    assert ends["p-cpu-1@22"] == ts(24)
    assert ends["p-train-1@22"] == ts(24)
    servers = _table(db, "SELECT t, count(*) AS n FROM asi_server_hourly GROUP BY t ORDER BY t")
    assert servers.rows() == [(22, 4), (23, 4), (24, 4), (25, 3)]
    assert _table(db, "SELECT max(t) AS t FROM asi_pod_hourly")["t"][0] == 23


def test_run_strings_skip_nulls_across_the_day_boundary(tmp_path: Path) -> None:
    """One run of p-cpu-1 over t = 22..25 (carried from day 0 into day 1) whose strings come
    and go: it keeps the first workload, model type and delay that are not null (t = 24, 23,
    23) and the last state that is not null (t = 24), whichever day they fall on."""
    hours = {
        22: {"workload_id": None, "model_type_public": None, "state_public": "Running",
             "schedule_delay_sec": None},
        23: {"workload_id": None, "model_type_public": "rec", "state_public": "Pending",
             "schedule_delay_sec": 60},
        24: {"workload_id": "w-a", "model_type_public": "cv", "state_public": "Succeeded",
             "schedule_delay_sec": 5},
        25: {"workload_id": "w-b", "model_type_public": "dev", "state_public": None,
             "schedule_delay_sec": 7},
    }  # fmt: skip
    pods_at = {
        t: [{**row, **values} for row in pod_rows(t) if row["pod_id"] == "p-cpu-1"]
        for t, values in hours.items()
    }
    db = tmp_path / "f.duckdb"
    api.ingest_paths(api.StoreOptions(db), [_fixture_with(tmp_path / "data", pods_at)], OPTIONS)
    rows = _table(
        db,
        "SELECT alloc_id, workload_id, model_type_public, asi_state, schedule_delay_sec, "
        "cluster_id, end_time FROM allocations",
    ).rows()
    assert rows == [("p-cpu-1@22", "w-a", "rec", "Succeeded", 60, "c1", None)]


def test_an_hour_given_twice_beside_a_missing_hour_is_two_runs(tmp_path: Path) -> None:
    """p-cpu-1 at t = 22, 23 (carried into day 1), none at 24, and at 25 twice (the row
    copied): day 1's group of its keys holds as many rows as hours from 23 to 25 (three),
    yet it is two runs and one repeat. A group counted as one run when its rows match its
    span of hours would give one run from 22 to the end; the runs are 22-23 and 25, and
    the copy at 25 is a reject."""
    pods_at = {
        t: [row for row in pod_rows(t) if row["pod_id"] == "p-cpu-1"] * (2 if t == 25 else 1)
        for t in (22, 23, 25)
    }
    assert [len(rows) for rows in pods_at.values()] == [1, 1, 2]
    db = tmp_path / "f.duckdb"
    root = _fixture_with(tmp_path / "data", pods_at)
    result = api.ingest_paths(api.StoreOptions(db), [root], OPTIONS)
    rows = _table(
        db, "SELECT alloc_id, start_time, end_time FROM allocations ORDER BY 1"
    ).rows()
    assert rows == [("p-cpu-1@22", ts(22), ts(24)), ("p-cpu-1@25", ts(25), None)]
    assert result.rejected == 1
    assert result.rejects.select("table", "row", "column").rows() == [("allocations", 2, "pod_id")]
    assert result.rejects["file"][0].endswith("day=1/hour=01/part-000.parquet")


@pytest.mark.parametrize("block_rows", [1, 4])
def test_days_read_in_blocks_of_hours_give_the_same_tables(
    tmp_path: Path,
    loaded: tuple[Path, api.IngestResult],
    monkeypatch: pytest.MonkeyPatch,
    block_rows: int,
) -> None:
    """A large day is reduced in blocks of hours (runs carry from block to block as from
    day to day): blocks of one hour (and of a few) give the fixture's tables exactly."""
    from fleetaudit.inputs.ingest import asi2026

    monkeypatch.setattr(asi2026, "BLOCK_ROWS", block_rows)
    db = tmp_path / "fleet.duckdb"
    result = api.ingest_paths(api.StoreOptions(db), [write_fixture(tmp_path / "data")], OPTIONS)
    assert [(t.table, t.files, t.read) for t in result.tables] == [
        (t.table, t.files, t.read) for t in loaded[1].tables
    ]
    for sql in (
        "SELECT * EXCLUDE (_ingest_id) FROM nodes ORDER BY node_id",
        "SELECT * EXCLUDE (_ingest_id) FROM allocations ORDER BY alloc_id",
        "SELECT * EXCLUDE (_ingest_id) FROM telemetry ORDER BY ts, node_id, gpu_index",
        "SELECT * EXCLUDE (_ingest_id) FROM asi_pod_hourly ORDER BY t, pod_id",
        "SELECT * EXCLUDE (_ingest_id) FROM asi_server_hourly ORDER BY t, server_id",
    ):
        assert _table(db, sql).height > 0
        assert _table(db, sql).equals(_table(loaded[0], sql)), sql
