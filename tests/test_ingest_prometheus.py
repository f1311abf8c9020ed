"""``ingest --format prometheus``: dcgm-exporter series into telemetry (tests/data/prometheus)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fleetaudit import api
from fleetaudit.cli import app
from fleetaudit.core.errors import InputError
from fleetaudit.inputs.generate import GenerateOptions
from fleetaudit.inputs.ingest import IngestOptions, ingest, prometheus
from fleetaudit.model.store import Store, open_store
from tests.conftest import DATA, write

PROM = DATA / "prometheus"
PROMETHEUS = IngestOptions(format="prometheus")
SM, GR, UTIL = "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"
T0 = 1767225600  # 2026-01-01T00:00:00Z


def _at(minute: int) -> datetime:
    return datetime(2026, 1, 1, 0, minute)


# Worked by hand from the files (tests/data/prometheus/README.md):
# (node, gpu, minute) -> (sm_active, mem_used, alloc_id, metric)
EXPECTED = {
    # SM_ACTIVE with the old Hostname label; its HA twin (replica b) counts once;
    # mem 40000 / (40000 + 39000 + 1000)
    ("node-a", 0, 0): (0.5, 0.5, "uid-train-0", SM),
    # SM_ACTIVE is NaN here (a gap): GPU_UTIL 90 / 100 fills in
    ("node-a", 0, 1): (0.9, None, "uid-train-0", UTIL),
    ("node-a", 0, 2): (0.75, None, "uid-train-0", SM),
    # new hostname label; pod gone-pod is not stored: the sample counts for the node
    ("node-a", 1, 0): (0.25, None, None, SM),
    # pod_name/pod_namespace labels; pod infer-0 was reused at 00:01 by a new allocation
    ("node-b", 0, 0): (0.4, None, "uid-infer-old", UTIL),
    ("node-b", 0, 1): (0.6, None, "uid-infer-new", UTIL),
    ("node-b", 0, 2): (0.8, None, "uid-infer-new", UTIL),
    # time-sliced between slice-x and slice-y: one row, no single holder (OpenMetrics, seconds)
    ("node-b", 1, 0): (0.3, None, None, UTIL),
    ("node-b", 1, 1): (0.5, None, None, UTIL),
    # MIG 3g at 0.7 and 4g at 0.35: 0.7 * 3/7 + 0.35 * 4/7; SM_ACTIVE is a blank sentinel
    ("node-m", 0, 0): (0.5, None, None, GR),
}


@pytest.fixture
def cluster(store: Store) -> Store:
    """The invented cluster's nodes and allocations (with namespace and pod columns)."""
    ingest(store, [PROM / "nodes.csv", PROM / "allocations.csv"])
    return store


def _telemetry(store: Store) -> dict[tuple[str, int, int], tuple[object, ...]]:
    rows = store.sql(
        "SELECT node_id, gpu_index, ts, sm_active, mem_used, alloc_id, metric FROM telemetry"
    )
    return {
        (r["node_id"], r["gpu_index"], r["ts"].minute): (
            r["sm_active"],
            r["mem_used"],
            r["alloc_id"],
            r["metric"],
        )
        for r in rows.iter_rows(named=True)
    }


def _approx(row: tuple[object, ...]) -> tuple[object, ...]:
    return tuple(pytest.approx(v) if isinstance(v, float) else v for v in row)


@pytest.mark.parametrize("chunk", [4_000_000, 3], ids=["one-merge", "merged-in-time-windows"])
def test_the_folder_maps_row_by_row(
    cluster: Store, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(prometheus, "_CHUNK_SAMPLES", chunk)
    result = ingest(cluster, [PROM], PROMETHEUS)
    got = _telemetry(cluster)
    assert set(got) == set(EXPECTED)
    for key, row in EXPECTED.items():
        assert got[key] == _approx(row), key
    (summary,) = result.tables
    assert (summary.files, summary.new, summary.superseded, summary.rejected) == (5, 10, 0, 1)


def test_a_host_label_naming_no_node_is_a_reject(cluster: Store) -> None:
    """Without NODE_NAME the exporter labels samples with its own pod's name."""
    ingest(cluster, [PROM], PROMETHEUS)
    (reject,) = cluster.sql('SELECT file, "column", value, reason FROM rejects').iter_rows()
    assert reject == (
        str(PROM / "util-avg_over_time-DCGM_FI_DEV_GPU_UTIL.json"),
        "node_id",
        "dcgm-exporter-7f9c2",
        "unknown node dcgm-exporter-7f9c2",
    )


def test_ha_replicas_in_separate_files_count_once(cluster: Store, tmp_path: Path) -> None:
    """Each Prometheus of an HA pair exported on its own: the same series twice."""
    twin = tmp_path / "replica-b" / "DCGM_FI_PROF_SM_ACTIVE.json"
    twin.parent.mkdir()
    twin.write_text((PROM / "DCGM_FI_PROF_SM_ACTIVE.json").read_text().replace('"a"', '"b"'))
    result = ingest(cluster, [PROM, twin], PROMETHEUS)
    got = _telemetry(cluster)
    assert got == {k: _approx(v) for k, v in EXPECTED.items()}
    assert sum(t.superseded for t in result.tables) == 0


def test_reingest_replaces_and_never_duplicates(cluster: Store) -> None:
    ingest(cluster, [PROM], PROMETHEUS)
    again = ingest(cluster, [PROM], PROMETHEUS)
    assert (again.tables[0].new, again.tables[0].replaced) == (0, 10)
    assert cluster.row_count("telemetry") == 10


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("mig.prom", {("node-m", 0, 0): (0.5, None, None, GR)}),
        (
            "shared.om",
            {("node-b", 1, 0): (0.3, None, None, UTIL), ("node-b", 1, 1): (0.5, None, None, UTIL)},
        ),
        ("DCGM_FI_DEV_FB.json", {}),  # framebuffer alone: no SM activity, so rejects
    ],
)
def test_each_file_alone(cluster: Store, name: str, expected: dict) -> None:
    result = ingest(cluster, [PROM / name], PROMETHEUS)
    got = _telemetry(cluster)
    assert got == {k: _approx(v) for k, v in expected.items()}
    if not expected:
        assert result.rejected == 1
        assert result.rejects.row(0, named=True)["column"] == "sm_active"


def test_text_sample_without_timestamp_takes_the_file_time(cluster: Store, tmp_path: Path) -> None:
    scrape = write(
        tmp_path / "scrape.prom",
        """
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="node-a"} 25
""",
    )
    import os

    os.utime(scrape, (T0 + 180, T0 + 180))
    ingest(cluster, [scrape], PROMETHEUS)
    assert _telemetry(cluster) == {("node-a", 0, 3): (0.25, None, None, UTIL)}


def test_pod_uid_label_names_the_allocation_in_a_native_store(store: Store, tmp_path: Path) -> None:
    """A store without pod/namespace columns attributes by pod_uid = alloc_id only."""
    write(tmp_path / "nodes.csv", "node_id,gpu_model,gpus,cpus\nn1,H100,2,8\n")
    write(
        tmp_path / "allocations.csv",
        "alloc_id,node_id,gpus,cpus,priority,start_time\na1,n1,1,1,high,2026-01-01T00:00:00Z\n",
    )
    ingest(store, [tmp_path / "nodes.csv", tmp_path / "allocations.csv"])
    dump = _matrix(
        [
            ({"__name__": SM, "gpu": "0", "hostname": "n1", "pod_uid": "a1", "pod": "x"}, [0.5]),
            ({"__name__": SM, "gpu": "1", "hostname": "n1", "pod": "a1"}, [0.25]),
        ]
    )
    ingest(store, [write(tmp_path / "dump.json", dump)], PROMETHEUS)
    got = _telemetry(store)
    assert got[("n1", 0, 0)][2] == "a1"
    assert got[("n1", 1, 0)][2] is None  # a pod name alone needs the pod column


def _matrix(series: list[tuple[dict[str, str], list[float | str]]]) -> str:
    return json.dumps(
        {
            "status": "success",
            "data": {
                "resultType": "matrix",
                "result": [
                    {"metric": labels, "values": [[T0 + 60 * i, str(v)] for i, v in enumerate(vs)]}
                    for labels, vs in series
                ],
            },
        }
    )


BAD_FILES = [
    (
        "pods.json",
        '{"apiVersion": "v1", "kind": "List", "items": []}',
        "not a Prometheus query_range response",
    ),
    (
        "instant.json",
        '{"status": "success", "data": {"resultType": "vector", "result": '
        '[{"metric": {"gpu": "0"}, "value": [1767225600, "1"]}]}}',
        "a vector result (an instant query?)",
    ),
    (
        "error.json",
        '{"status": "error", "errorType": "bad_data", "error": "exceeded maximum resolution"}',
        "a Prometheus error response",
    ),
    ("broken.json", '{"status": "success", "data": {', "cannot read"),
    (
        "unnamed.json",
        '{"status": "success", "data": {"resultType": "matrix", "result": '
        '[{"metric": {"gpu": "0", "hostname": "node-a"}, "values": [[1767225600, "1"]]}]}}',
        "name the file after its metric",
    ),
    ("table.prom", "ts,node,gpu\n1,2,3\n", "cannot parse as dcgm-exporter metrics"),
    ("other.prom", "# TYPE up gauge\nup 1\n", "no DCGM GPU series in it"),
    (
        "cut.om",
        '# TYPE DCGM_FI_DEV_GPU_UTIL gauge\nDCGM_FI_DEV_GPU_UTIL{gpu="0"} 1 1.0\n# EOF\nDCGM_FI',
        "text after the last # EOF",
    ),
    ("empty.json", "", "empty file"),
    # a time no exporter writes: 1e23 ms (1e20 s) would overflow the merge's microseconds
    (
        "far.prom",
        '# TYPE DCGM_FI_DEV_GPU_UTIL gauge\nDCGM_FI_DEV_GPU_UTIL{gpu="0",hostname="node-a"} 1 '
        "100000000000000000000000\n",
        "a sample time 1e+20 outside 1900..2200",
    ),
    (
        "far.json",
        '{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": '
        '{"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "hostname": "node-a"}, '
        '"values": [[1767225600, "1"], [-3e9, "1"]]}]}}',
        "a sample time -3e+09 outside 1900..2200",
    ),
    (
        "nan_time.json",
        '{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": '
        '{"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "hostname": "node-a"}, '
        '"values": [["noon", "1"]]}]}}',
        "a sample time that is not a number",
    ),
]


@pytest.mark.parametrize(("name", "text", "message"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_file_of_another_kind_fails_naming_it(
    cluster: Store, tmp_path: Path, name: str, text: str, message: str
) -> None:
    good = PROM / "DCGM_FI_PROF_SM_ACTIVE.json"
    bad = tmp_path / name
    bad.write_text(text)
    with pytest.raises(InputError) as caught:
        ingest(cluster, [good, bad], PROMETHEUS)
    assert caught.value.file == str(bad)
    assert message in str(caught.value)
    assert cluster.row_count("telemetry") == 0  # nothing of the good file either


def test_an_empty_window_is_no_error(cluster: Store, tmp_path: Path) -> None:
    empty = write(
        tmp_path / "x.json", '{"status":"success","data":{"resultType":"matrix","result":[]}}'
    )
    result = ingest(cluster, [empty], PROMETHEUS)
    assert cluster.row_count("telemetry") == 0
    assert result.rejected == 0


def test_cli_bad_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "fleet.duckdb"
    bad = write(tmp_path / "pods.json", '{"kind": "List", "items": []}')
    result = CliRunner().invoke(
        app, ["ingest", "--format", "prometheus", str(bad), "--db", str(db)]
    )
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"fleetaudit: error: {bad}")


def test_report_shows_the_metric_provenance(cluster: Store, db_path: Path, tmp_path: Path) -> None:
    ingest(cluster, [PROM], PROMETHEUS)
    cluster.close()
    out = tmp_path / "r.json"
    html = tmp_path / "r.html"
    result = CliRunner().invoke(
        app,
        ["report", "--db", str(db_path), "--since", "1h", "--json", str(out), "--html", str(html)],
    )
    assert result.exit_code == 0, result.stderr
    doc = json.loads(out.read_text())
    sources = {s["metric"]: s for s in doc["telemetry"]["sources"]}
    # the window ends at the export time 00:02 (the latest sample), exclusive: of the
    # 8 rows before it, 2 come from SM_ACTIVE, 5 from GPU_UTIL, 1 from GR_ENGINE_ACTIVE
    assert {m: s["samples"] for m, s in sources.items()} == {SM: 2, UTIL: 5, GR: 1}
    assert sources[UTIL]["share"] == pytest.approx(0.625)
    assert (sources[SM]["upper_bound"], sources[UTIL]["upper_bound"]) == (False, True)
    assert doc["telemetry"]["upper_bound"] is True
    assert doc["telemetry"]["metric"] == "sm_active"  # the existing field is unchanged
    assert any(
        n.startswith("62% of the telemetry samples read SM activity from DCGM_FI_DEV_GPU_UTIL")
        and n.endswith("the productive rates are upper bounds")
        for n in doc["notes"]
    )
    assert "sm_active read from: DCGM_FI_DEV_GPU_UTIL 62.5% (an upper bound)" in result.stdout
    assert "(an upper bound: the productive rates built on it overstate SM activity)" in (
        html.read_text()
    )


# -- properties -----------------------------------------------------------------------------

_values = st.lists(
    st.one_of(st.floats(0, 1, allow_nan=False).map(lambda v: round(v, 3)), st.just("NaN")),
    min_size=1,
    max_size=5,
)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    gpus=st.lists(_values, min_size=1, max_size=2),
    copies=st.integers(1, 3),
    util=st.booleans(),
)
def test_ha_copies_change_nothing_and_gaps_stay_gaps(
    tmp_path_factory: pytest.TempPathFactory,
    gpus: list[list[float | str]],
    copies: int,
    util: bool,
) -> None:
    """One row per sample that is a number, whatever the number of HA replicas."""
    folder = tmp_path_factory.mktemp("ha")
    metric, scale = (UTIL, 100) if util else (SM, 1)
    series = [
        (
            {"__name__": metric, "gpu": str(g), "hostname": "n1", "replica": str(r)},
            [v if v == "NaN" else v * scale for v in values],
        )
        for g, values in enumerate(gpus)
        for r in range(copies)
    ]
    write(folder / "nodes.csv", "node_id,gpu_model,gpus,cpus\nn1,H100,8,8\n")
    with open_store(folder / "s.duckdb") as store:
        ingest(store, [folder / "nodes.csv"])
        result = ingest(store, [write(folder / "d.json", _matrix(series))], PROMETHEUS)
        got = _telemetry(store)
    want = {
        ("n1", g, i): v for g, values in enumerate(gpus) for i, v in enumerate(values) if v != "NaN"
    }
    assert {k: v[0] for k, v in got.items()} == {k: pytest.approx(v) for k, v in want.items()}
    assert result.rejected == 0
    assert sum(t.superseded for t in result.tables) == 0


# -- end to end: a generated fleet exported through Prometheus -------------------------------


def test_generated_dump_reproduces_the_native_telemetry(tmp_path: Path) -> None:
    """generate --format prometheus, then ingest: the dump holds every GPU at every step;
    the GPUs no pod holds are left out, and the native rows come back exactly (same SM
    activity to 3 digits, same alloc_id); shapes, report and whatif compaction run on it."""
    opts = GenerateOptions(nodes=6, days=1, telemetry_days=0.1, telemetry_step_s=300, seed=3)
    native = api.generate_fleet(tmp_path / "native", opts)
    dumped = api.generate_fleet(
        tmp_path / "prom", GenerateOptions(**{**opts.__dict__, "format": "prometheus"})
    )
    assert not (tmp_path / "prom" / "telemetry.parquet").exists()
    db = tmp_path / "fleet.duckdb"
    with open_store(db) as store:
        ingest(store, [tmp_path / "prom"])
        result = ingest(store, [dumped.files["telemetry"]], PROMETHEUS)
        assert result.rejected == 0
        got = store.sql("SELECT node_id, gpu_index, ts, sm_active, alloc_id, metric FROM telemetry")
    want = pl.read_parquet(native.files["telemetry"]).with_columns(
        pl.col("ts").dt.replace_time_zone(None), pl.col("gpu_index").cast(pl.Int64)
    )
    steps = want["ts"].n_unique()
    assert dumped.rows["telemetry"] == 3 * dumped.gpus * steps  # 3 metrics, every GPU
    assert want.height < dumped.gpus * steps  # some GPUs idle at some steps
    assert got.height == want.height
    assert set(got["metric"]) == {SM}
    joined = want.join(got, on=["node_id", "gpu_index", "ts"], how="left", suffix="_prom")
    assert joined["sm_active_prom"].null_count() == 0
    assert (joined["sm_active"] - joined["sm_active_prom"]).abs().max() < 1e-9
    assert (joined["alloc_id"] == joined["alloc_id_prom"]).all()

    runner = CliRunner()
    for args in (["shapes"], ["report", "--since", "2h"], ["whatif", "compaction"]):
        done = runner.invoke(app, [*args, "--db", str(db)])
        assert done.exit_code == 0, (args, done.stderr)


def test_cli_table_does_not_apply(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "ingest",
            "--format",
            "prometheus",
            "--table",
            "telemetry",
            str(PROM),
            "--db",
            str(tmp_path / "s.duckdb"),
        ],
    )
    assert result.exit_code == 2
    assert "--table does not apply to --format prometheus" in result.stderr


def test_staging_tables_are_dropped_after_the_call(cluster: Store) -> None:
    ingest(cluster, [PROM], PROMETHEUS)
    left = cluster.sql("SELECT table_name FROM duckdb_tables() WHERE temporary")
    assert not [t for t in left["table_name"] if t.startswith("_fa_prom")]
