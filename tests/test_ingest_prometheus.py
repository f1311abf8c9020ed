"""``ingest --format prometheus``: dcgm-exporter series into telemetry (tests/data/prometheus)."""

from __future__ import annotations

import importlib
import json
import os
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fleetaudit import api
from fleetaudit.cli import app
from fleetaudit.core.errors import InputError
from fleetaudit.inputs.generate import GenerateOptions
from fleetaudit.inputs.ingest import IngestOptions, ingest
from fleetaudit.model.store import Store, open_store
from tests.conftest import DATA, REPO, write
from tests.fuzzing import FUZZ

# the module itself: the package binds the name to a lazy stand-in, on which monkeypatch
# would set attributes the module never reads
prometheus = importlib.import_module("fleetaudit.inputs.ingest.prometheus")
jsonstream = importlib.import_module("fleetaudit.inputs.ingest.jsonstream")
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
    ("table.prom", "ts,node,gpu\n1,2,3\n", "cannot parse as Prometheus text"),
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
    # a value no Prometheus writes (it writes numbers, NaN and +Inf/-Inf, as text): not a gap
    (
        "text_value.json",
        '{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": '
        '{"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "hostname": "node-a"}, '
        '"values": [[1767225600, "NaN"], [1767225660, "n/a"]]}]}}',
        "series 1, sample 2: the value 'n/a' is not a number",
    ),
    (
        "null_value.json",
        '{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": '
        '{"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "hostname": "node-a"}, '
        '"values": [[1767225600, "+Inf"], [1767225660, "-Inf"], [1767225720, null]]}]}}',
        "series 1, sample 3: the value None is not a number",
    ),
    (
        "pair.json",
        '{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": '
        '{"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "hostname": "node-a"}, '
        '"values": [[1767225600, "1"], [1767225660]]}]}}',
        "series 1, sample 2: [1767225660] is not a [time, value] pair",
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


# -- a real Prometheus' answers: empty labels dropped, partial steps, health series ----------


def _report(db: Path, folder: Path, *args: str) -> tuple[dict[str, Any], str]:
    """``fleetaudit report --db db ARGS --json``: its JSON document and its terminal text."""
    out = folder / "r.json"
    done = CliRunner().invoke(app, ["report", "--db", str(db), *args, "--json", str(out)])
    assert done.exit_code == 0, done.stderr
    return json.loads(out.read_text()), done.stdout


def _fleet(store: Store, tmp_path: Path) -> Store:
    """n1 (4 GPUs) runs pods p0, p1, p3 (namespace ml); n2 (2 GPUs) has an exporter that
    maps no pods."""
    write(tmp_path / "nodes.csv", "node_id,gpu_model,gpus,cpus\nn1,H100,4,64\nn2,A100,2,32\n")
    write(
        tmp_path / "allocations.csv",
        "alloc_id,node_id,gpus,cpus,priority,workload,tenant,start_time,namespace,pod\n"
        "a0,n1,1,8,high,training,ml,2026-01-01T00:00:00Z,ml,p0\n"
        "a1,n1,1,8,high,training,ml,2026-01-01T00:00:00Z,ml,p1\n"
        "a3,n1,1,8,high,training,ml,2026-01-01T00:00:00Z,ml,p3\n",
    )
    ingest(store, [tmp_path / "nodes.csv", tmp_path / "allocations.csv"])
    return store


def _host(gpu: int, node: str = "n1", pod: str | None = None, **more: str) -> dict[str, str]:
    """A series' labels as Prometheus returns them from avg_over_time: no __name__, no
    empty label (Prometheus drops them), the scrape's instance and job."""
    labels = {"gpu": str(gpu), "UUID": f"GPU-{node}-{gpu}", "hostname": node,
              "instance": f"{node}:9400", "job": "dcgm", **more}  # fmt: skip
    if pod is not None:
        labels |= {"namespace": "ml", "pod": pod, "container": "main"}
    return labels


def _points(series: list[tuple[dict[str, str], dict[int, str]]]) -> str:
    """A query_range response; each series' values by minute."""
    return json.dumps(
        {
            "status": "success",
            "data": {
                "resultType": "matrix",
                "result": [
                    {"metric": labels, "values": [[T0 + 60 * m, v] for m, v in sorted(by.items())]}
                    for labels, by in series
                ],
            },
        }
    )


def test_prometheus_semantics_idle_gpus_pod_changes_and_ranges(
    store: Store, tmp_path: Path
) -> None:
    """Hand-worked, minute by minute:

    - n1 GPU 0 holds p0 (0.8, 0.8); GPU 1 has no pod labels at all (0.0, 0.0): idle,
      since n1's exporter labels pods on its other GPUs, so not loaded;
    - n1 GPU 2: idle at minute 0 (0.0), then p1 arrives within minute 1, whose step
      holds both series: the idle one (0.0) and p1's (0.85); p1's own value is kept;
    - n1 GPU 3 (p3): SM_ACTIVE 3.1e18 at minute 0 (a blank value averaged into the
      step: a gap and a reject), GPU_UTIL 50 fills in; at minute 1 SM_ACTIVE 0.4 is
      used and GPU_UTIL 150 (above 100) is a reject;
    - n2's exporter maps no pods: its GPU 0 (0.5) is loaded, attributed to no one.
    """
    _fleet(store, tmp_path)
    sm = write(
        tmp_path / "avg_over_time-DCGM_FI_PROF_SM_ACTIVE.json",
        _points(
            [
                (_host(0, pod="p0"), {0: "0.8", 1: "0.8"}),
                (_host(1), {0: "0", 1: "0"}),
                (_host(2), {0: "0", 1: "0"}),
                (_host(2, pod="p1"), {1: "0.85", 2: "0.9"}),
                (_host(3, pod="p3"), {0: "3.1e18", 1: "0.4"}),
                (_host(0, node="n2"), {0: "0.5"}),
            ]
        ),
    )
    util = write(
        tmp_path / "avg_over_time-DCGM_FI_DEV_GPU_UTIL.json",
        _points([(_host(3, pod="p3"), {0: "50", 1: "150"})]),
    )
    result = ingest(store, [sm, util], PROMETHEUS)
    got = _telemetry(store)
    assert got == {
        ("n1", 0, 0): _approx((0.8, None, "a0", SM)),
        ("n1", 0, 1): _approx((0.8, None, "a0", SM)),
        ("n1", 2, 1): _approx((0.85, None, "a1", SM)),
        ("n1", 2, 2): _approx((0.9, None, "a1", SM)),
        ("n1", 3, 0): _approx((0.5, None, "a3", UTIL)),
        ("n1", 3, 1): _approx((0.4, None, "a3", SM)),
        ("n2", 0, 0): _approx((0.5, None, None, SM)),
    }
    rejects = store.sql('SELECT "column", value, reason FROM rejects ORDER BY reason').rows()
    assert rejects == [
        (
            "sm_active",
            "150.0",
            "DCGM_FI_DEV_GPU_UTIL 150.0 is outside its range 0..100: not a reading "
            "(a blank value averaged into the step?); left a gap",
        ),
        (
            "sm_active",
            "3.1e+18",
            "DCGM_FI_PROF_SM_ACTIVE 3.1e+18 is outside its range 0..1: not a reading "
            "(a blank value averaged into the step?); left a gap",
        ),
    ]
    # the idle samples of GPU 1 (two) and GPU 2 (two) are left out, and said so
    assert result.notes == (
        f"{sm}: 4 sample(s) of GPUs held by no pod left out (series without pod labels from "
        "an exporter that labels pods: idle GPUs)",
    )


def test_partial_steps_count_for_their_part(store: Store, db_path: Path, tmp_path: Path) -> None:
    """count_over_time files weigh each step by its raw samples: at a 60 s step with four
    scrapes a step (15 s each), a step of two (an outage) counts 30 s; the report's
    telemetry GPU-hours are the raw samples x 15 s."""
    _fleet(store, tmp_path)
    sm = write(
        tmp_path / "avg_over_time-DCGM_FI_PROF_SM_ACTIVE.0.json",
        _points([(_host(0, pod="p0"), {0: "0.5", 1: "0.25", 2: "1"})]),
    )
    counts = write(
        tmp_path / "count_over_time-DCGM_FI_PROF_SM_ACTIVE.0.json",
        _points([(_host(0, pod="p0"), {0: "4", 1: "2", 2: "4"})]),
    )
    # minute 3: SM_ACTIVE missing, GPU_UTIL exported without its counts: a whole step
    util = write(
        tmp_path / "avg_over_time-DCGM_FI_DEV_GPU_UTIL.0.json",
        _points([(_host(0, pod="p0"), {3: "40"})]),
    )
    ingest(store, [sm, counts, util], PROMETHEUS)
    rows = store.sql(
        "SELECT minute(ts) AS m, sm_active, samples, sample_interval_s FROM telemetry ORDER BY ts"
    ).rows()
    assert rows == [(0, 0.5, 4, 15.0), (1, 0.25, 2, 15.0), (2, 1.0, 4, 15.0), (3, 0.4, 4, 15.0)]
    store.close()
    doc, _ = _report(db_path, tmp_path, "--at", "2026-01-01T00:03:00Z", "--since", "3m")
    productive = doc["fleet"]["productive"]
    # 10 raw samples x 15 s; SM-active (0.5 x 4 + 0.25 x 2 + 1 x 4) x 15 s
    assert productive["telemetry_gpu_hours"] == pytest.approx(150 / 3600, abs=1e-6)
    assert productive["sm_active_gpu_hours"] == pytest.approx(6.5 * 15 / 3600, abs=1e-6)


def test_lower_case_names_and_a_missing_host_label(store: Store, tmp_path: Path) -> None:
    """dcgm-exporter can write metric names in lower case; an exporter run without
    NODE_NAME (or with --no-hostname) writes no host label: a reject that says what to
    set."""
    _fleet(store, tmp_path)
    scrape = write(
        tmp_path / "scrape.prom",
        """
# HELP dcgm_fi_prof_gr_engine_active Ratio of time the graphics engine is active.
# TYPE dcgm_fi_prof_gr_engine_active gauge
dcgm_fi_prof_gr_engine_active{gpu="0",uuid="GPU-1",device="nvidia0",modelName="NVIDIA H100",Hostname="n2"} 0.250000
dcgm_fi_prof_gr_engine_active{gpu="1",uuid="GPU-2",device="nvidia1",modelName="NVIDIA H100"} 0.500000
""",
    )
    import os

    os.utime(scrape, (T0, T0))
    result = ingest(store, [scrape], PROMETHEUS)
    assert _telemetry(store) == {("n2", 0, 0): _approx((0.25, None, None, GR))}
    (reject,) = result.rejects.iter_rows(named=True)
    assert (reject["column"], reject["reason"]) == ("node_id", prometheus.NO_HOST)
    assert "NODE_NAME" in prometheus.NO_HOST


def test_promtool_tsdb_dump_is_read(store: Store, tmp_path: Path) -> None:
    """``promtool tsdb dump`` (Debian's promtool 2.42 has no dump-openmetrics): raw samples,
    labels sorted with __name__ among them, Go-quoted values, milliseconds."""
    _fleet(store, tmp_path)
    dump = write(
        tmp_path / "dump.txt",
        '{Hostname="n1", UUID="GPU-1", __name__="DCGM_FI_PROF_SM_ACTIVE", gpu="0", namespace="ml", '
        'pod="p0"} 0.75 1767225600000\n'
        '{Hostname="n1", UUID="GPU-1", __name__="DCGM_FI_PROF_SM_ACTIVE", gpu="0", namespace="ml", '
        'pod="p0"} NaN 1767225660000\n'
        '{Hostname="n1", UUID="GPU-1", __name__="DCGM_FI_DEV_SM_CLOCK", gpu="0"} 1980 1767225600000\n'
        '{Hostname="n1", __name__="DCGM_FI_PROF_SM_ACTIVE", gpu="1", note="a \\"quoted\\" value"} '
        "9.223372036854776e+18 1767225600000\n",
    )
    assert prometheus.read.sniff(dump) == "dump"
    result = ingest(store, [dump], PROMETHEUS)
    assert _telemetry(store) == {("n1", 0, 0): _approx((0.75, None, "a0", SM))}
    assert result.rejected == 0


def test_a_cut_dump_line_is_one_error_naming_the_line(store: Store, tmp_path: Path) -> None:
    _fleet(store, tmp_path)
    dump = write(
        tmp_path / "dump.txt",
        '{__name__="DCGM_FI_PROF_SM_ACTIVE", gpu="0"} 0.5 1767225600000\n{__name__="DCGM',
    )
    with pytest.raises(InputError) as caught:
        ingest(store, [dump], PROMETHEUS)
    assert (caught.value.file, caught.value.row) == (str(dump), 2)
    assert "cannot parse as promtool tsdb dump" in caught.value.reason


# -- XID errors and row-remap failures: GPU-level health intervals ---------------------------


def _events(store: Store) -> list[tuple[object, ...]]:
    return store.sql(
        "SELECT node_id, gpu_index, minute(start_time), minute(end_time), state, reason, source "
        "FROM node_events ORDER BY node_id, gpu_index, start_time"
    ).rows()


def test_xid_errors_become_unhealthy_intervals(store: Store, tmp_path: Path) -> None:
    """max_over_time of DCGM_FI_DEV_XID_ERRORS (the last XID a GPU raised), by minute:

    - n1 GPU 0: 0, 0, 79, 79, (no sample: off the bus), 79, 0 -> unhealthy 2..6
      ("XID 79"); the gap does not end it, the 0 (reset, DCGM restarted) does;
    - n1 GPU 1: XID 13 (an application's fault): informational, no interval, a note;
    - n2 GPU 0: 48 then 79 -> XID 48 for minute 0..1, XID 79 from 1, still going;
    - n2 GPU 1: DCGM_FI_DEV_ROW_REMAP_FAILURE 1 from minute 1: "row remapping failed".
    """
    _fleet(store, tmp_path)
    xid = write(
        tmp_path / "max_over_time-DCGM_FI_DEV_XID_ERRORS.json",
        _points(
            [
                (_host(0, err_code="0"), {0: "0", 1: "0", 6: "0"}),
                (_host(0, err_code="79"), {2: "79", 3: "79", 5: "79"}),
                (_host(1), {0: "13", 1: "13"}),
                (_host(0, node="n2"), {0: "48", 1: "79", 2: "79"}),
            ]
        ),
    )
    remap = write(
        tmp_path / "max_over_time-DCGM_FI_DEV_ROW_REMAP_FAILURE.json",
        _points([(_host(1, node="n2"), {0: "0", 1: "1", 2: "1"})]),
    )
    result = ingest(store, [xid, remap], PROMETHEUS)
    assert _events(store) == [
        ("n1", 0, 2, 6, "unhealthy", "XID 79", "dcgm:xid"),
        ("n2", 0, 0, 1, "unhealthy", "XID 48", "dcgm:xid"),
        ("n2", 0, 1, None, "unhealthy", "XID 79", "dcgm:xid"),
        ("n2", 1, 1, None, "unhealthy", "row remapping failed", "dcgm:row_remap"),
    ]
    assert "informational XIDs, not health intervals: XID 13 on 1 GPU(s)" in result.notes
    assert store.row_count("telemetry") == 0


def test_a_later_pull_continues_an_open_interval(store: Store, tmp_path: Path) -> None:
    """Cron pulls overlapping windows: the second sees XID 79 from its first step, which
    continues the interval the first left open (same start), and closes it."""
    _fleet(store, tmp_path)
    first = write(
        tmp_path / "a" / "max_over_time-DCGM_FI_DEV_XID_ERRORS.json",
        _points([(_host(0), {0: "0", 1: "79", 2: "79"})]),
    )
    second = write(
        tmp_path / "b" / "max_over_time-DCGM_FI_DEV_XID_ERRORS.json",
        _points([(_host(0), {3: "79", 4: "79", 5: "0"})]),
    )
    ingest(store, [first], PROMETHEUS)
    assert _events(store) == [("n1", 0, 1, None, "unhealthy", "XID 79", "dcgm:xid")]
    again = ingest(store, [second], PROMETHEUS)
    assert _events(store) == [("n1", 0, 1, 5, "unhealthy", "XID 79", "dcgm:xid")]
    (events,) = [t for t in again.tables if t.table == "node_events"]
    assert (events.new, events.replaced) == (0, 1)


# -- size: streamed, bounded memory -----------------------------------------------------------


def test_a_file_streams_in_small_pieces(cluster: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader's buffer and batches cut the files anywhere: the rows are the same."""
    monkeypatch.setattr(jsonstream, "CHUNK_CHARS", 7)
    monkeypatch.setattr(prometheus.read, "BATCH_SAMPLES", 1)
    ingest(cluster, [PROM], PROMETHEUS)
    assert _telemetry(cluster) == {k: _approx(v) for k, v in EXPECTED.items()}


def test_a_series_beyond_any_prometheus_answer_is_refused(
    cluster: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prometheus.read, "MAX_SERIES_CHARS", 200)
    monkeypatch.setattr(jsonstream, "CHUNK_CHARS", 64)
    big = write(
        tmp_path / "DCGM_FI_PROF_SM_ACTIVE.json",
        _points([(_host(0, node="node-a"), dict.fromkeys(range(40), "0.5"))]),
    )
    with pytest.raises(InputError) as caught:
        ingest(cluster, [big], PROMETHEUS)
    assert caught.value.file == str(big)
    assert "series 1 is longer than 0 MiB of text" in caught.value.reason
    assert "at most 11,000 points per series" in caught.value.reason


def test_out_of_memory_names_the_setting(
    cluster: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB refusing for memory is said as such, with the setting that raises it."""
    monkeypatch.delenv("FLEETAUDIT_MEMORY_LIMIT", raising=False)
    monkeypatch.setattr(prometheus, "MEMORY_LIMIT", "1MB")
    cluster.run("SET max_temp_directory_size = '0KB'")  # nowhere to spill
    dump = write(
        tmp_path / "DCGM_FI_PROF_SM_ACTIVE.json",
        _points([(_host(g % 2, node="node-a", replica=str(g)), dict.fromkeys(range(3000), "0.5"))
                 for g in range(40)]),
    )  # fmt: skip
    with pytest.raises(InputError) as caught:
        ingest(cluster, [dump], PROMETHEUS)
    assert caught.value.file == str(dump)
    assert "out of memory: the ingest may use" in caught.value.reason
    assert "FLEETAUDIT_MEMORY_LIMIT=4GB" in caught.value.reason
    assert cluster.row_count("telemetry") == 0


# -- the report's productive figures on this telemetry ------------------------------------------


def test_upper_bounds_are_flagged_per_model_workload_and_tenant(
    cluster: Store, db_path: Path, tmp_path: Path
) -> None:
    """Worked from EXPECTED (one sample = 60 s): samples per allocation, those from
    GPU_UTIL in brackets. node-a GPU 1's sample at 00:00 names no live pod: it is shared by
    the two allocations on node-a then (train, notebook: half each); node-b GPU 1's go to
    the allocation on node-b at their instant.

    - uid-train-0 (ml, training): 1 + 1 [1] + 0.5 = 2.5 [1]; uid-notebook (ml,
      development): 0.5 [0]; uid-infer-old (web): 1 [1] + 1 [1]; uid-infer-new (web): 2 [2].
    - tenant ml: 3 samples, 1 upper: an upper bound, share 1/3; tenant web: 4 of 4;
      workload training 1 of 2.5, development none; model H100: 5 of 7.
    """
    ingest(cluster, [PROM], PROMETHEUS)
    cluster.close()
    doc, stdout = _report(db_path, tmp_path, "--since", "1h")
    tenants = {t: f["productive"] for t, f in doc["tenants"].items()}
    assert (tenants["ml"]["upper_bound"], tenants["ml"]["upper_bound_share"]) == (
        True,
        pytest.approx(1 / 3),
    )
    assert tenants["ml"]["telemetry_gpu_hours"] == pytest.approx(3 * 60 / 3600, abs=1e-6)
    assert (tenants["web"]["upper_bound"], tenants["web"]["upper_bound_share"]) == (True, 1.0)
    workloads = doc["fleet"]["productive"]["workloads"]
    assert workloads["training"]["upper_bound_share"] == pytest.approx(1 / 2.5)
    assert workloads["development"]["upper_bound"] is False
    h100 = doc["models"]["H100"]["productive"]
    assert (h100["upper_bound"], h100["upper_bound_share"]) == (True, pytest.approx(5 / 7))
    assert doc["models"]["A100"]["productive"]["upper_bound"] is False
    # the terminal marks each rate that is an upper bound, and says what the mark means
    assert "≤ " in stdout
    assert "≤: an upper bound: part of that telemetry read SM activity from" in stdout


def test_coverage_above_one_is_shown_and_noted(store: Store, db_path: Path, tmp_path: Path) -> None:
    """A 1-GPU allocation on a 4-GPU node whose four GPUs all report without pod labels
    (an exporter that maps no pods): all four GPUs' samples go to it, 4x its GPU-hours."""
    write(tmp_path / "nodes.csv", "node_id,gpu_model,gpus,cpus\nn2,A100,4,32\n")
    write(
        tmp_path / "allocations.csv",
        "alloc_id,node_id,gpus,cpus,priority,tenant,start_time\n"
        "b0,n2,1,8,high,ops,2026-01-01T00:00:00Z\n",
    )
    ingest(store, [tmp_path / "nodes.csv", tmp_path / "allocations.csv"])
    dump = write(
        tmp_path / "DCGM_FI_PROF_SM_ACTIVE.json",
        _points([(_host(g, node="n2"), {0: "0.5", 1: "0.5", 2: "0.5"}) for g in range(4)]),
    )
    ingest(store, [dump], PROMETHEUS)
    store.close()
    doc, _ = _report(db_path, tmp_path, "--at", "2026-01-01T00:02:00Z", "--since", "2m")
    assert doc["fleet"]["productive"]["coverage"] == pytest.approx(4.0)
    assert doc["tenants"]["ops"]["productive"]["coverage"] == pytest.approx(4.0)
    (note,) = [n for n in doc["notes"] if n.startswith("telemetry exceeds")]
    assert note.startswith(
        "telemetry exceeds the allocated GPU-hours (coverage the fleet 400%, model A100 400%, "
        "tenant ops 400%"
    )


# -- real dcgm-exporter scrapes from public sources (../shared/realsamples/dcgm) -----------------

REALSAMPLES = (
    Path(os.environ.get("FLEETAUDIT_REALSAMPLES") or REPO.parent / "shared" / "realsamples")
    / "dcgm"
)

# sample -> (host, the row it reads: sm_active, mem_used, metric), worked from the scrape
REAL_READINGS = {
    # a pod's labels (no stored allocation: the sample counts for its node); XID 0
    "D1_lke_rtx4000ada": ("lke529760-766837-0a634ab30000", 0.004656, 1 / (1 + 20015 + 457), GR),
    # an exporter that labels no pod: every GPU is loaded
    "D2_kops_L4": ("i-030791dc5a37cd257", 0.0, 0.0, GR),
    "D3_upcloud_L40S": ("gpu1-wl8sg", 0.0, 0.0, GR),
    # a vGPU (GRID A100-40C) without profiling metrics: GPU_UTIL / 100, an upper bound
    "D5_vks_GRID_A100-40C": ("test-ai-1-node-pool-40c-d5ds8-br9r6-9tb2c", 0.0, 0.0, UTIL),
    "D6_rafay_T4": ("ip-10-200-3-41", 0.0, 0.0, GR),
    "D7_ericsson_T4": ("cp-bm14r7", 0.156205, 5120 / (5120 + 9791 + 447), GR),
}


def _realsample(name: str) -> Path:
    path = REALSAMPLES / name / "scrape.metrics"
    if not path.is_file():
        pytest.skip(f"{path} is absent (set FLEETAUDIT_REALSAMPLES or place ../shared/realsamples)")
    return path


@pytest.mark.parametrize("name", sorted(REAL_READINGS))
def test_a_real_scrape_reads_its_gpu(store: Store, tmp_path: Path, name: str) -> None:
    scrape = _realsample(name)
    host, sm, mem, metric = REAL_READINGS[name]
    write(tmp_path / "nodes.csv", f"node_id,gpu_model,gpus,cpus\n{host},GPU,1,8\n")
    ingest(store, [tmp_path / "nodes.csv"])
    result = ingest(store, [scrape], PROMETHEUS)
    rows = store.sql(
        "SELECT node_id, gpu_index, sm_active, mem_used, alloc_id, metric FROM telemetry"
    )
    assert rows.rows() == [(host, 0, pytest.approx(sm), pytest.approx(mem), None, metric)]
    assert (result.rejected, store.row_count("node_events")) == (0, 0)


def test_a_real_scrape_abbreviated_by_its_author_is_refused(store: Store) -> None:
    """D4's paste shortens label sets to '...' (its SOURCE.txt says so): not a scrape."""
    scrape = _realsample("D4_viettel_L40Sx2")
    with pytest.raises(InputError) as caught:
        ingest(store, [scrape], PROMETHEUS)
    assert caught.value.file == str(scrape)
    assert caught.value.reason.startswith("cannot parse as Prometheus text: Invalid labels")


def test_a_real_mig_scrape_in_lower_case_without_host_labels(store: Store) -> None:
    """NVIDIA/dcgm-exporter#272: lower-case names (read), uuid and pod_name labels, MIG
    instances of two GPUs, no host label: each GPU's row is a reject that says which
    labels were looked for and how to set NODE_NAME."""
    scrape = _realsample("D8_issue272_mig_lowercase")
    result = ingest(store, [scrape], PROMETHEUS)
    rejects = store.sql('SELECT "column", reason FROM rejects ORDER BY "row"').rows()
    assert rejects == [("node_id", prometheus.NO_HOST)] * 2  # GPU 0 (two instances), GPU 1
    assert result.rejected == 2
    assert store.row_count("telemetry") == 0


def test_a_scrape_of_idle_gpus_says_why_it_reads_nothing(store: Store, tmp_path: Path) -> None:
    """Every GPU with empty pod labels (an exporter that maps pods, none held): no rows,
    and a note that says so."""
    write(tmp_path / "nodes.csv", "node_id,gpu_model,gpus,cpus\nn1,H100,2,8\n")
    ingest(store, [tmp_path / "nodes.csv"])
    scrape = write(
        tmp_path / "idle.prom",
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="n1",container="",namespace="",pod=""} 0\n'
        'DCGM_FI_DEV_GPU_UTIL{gpu="1",Hostname="n1",container="",namespace="",pod=""} 0\n',
    )
    result = ingest(store, [scrape], PROMETHEUS)
    assert store.row_count("telemetry") == 0
    assert result.notes == (
        f"{scrape}: 2 sample(s) of GPUs held by no pod left out (series without pod labels "
        "from an exporter that labels pods: idle GPUs)",
    )


# -- fuzzing: any input ends in a result, reject rows or one line of error ----------------------

_FUZZ = FUZZ

_names = st.sampled_from(
    [SM, GR, UTIL, "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_XID_ERRORS",
     "dcgm_fi_prof_sm_active", "DCGM_FI_DEV_SM_CLOCK", "up", "", "9bad", "a{b"]
)  # fmt: skip
_label_names = st.sampled_from(
    ["gpu", "hostname", "Hostname", "pod", "namespace", "pod_uid", "GPU_I_PROFILE", "GPU_I_ID",
     "__name__", "instance", "le", "quantile", "x y", ""]
)  # fmt: skip
_label_values = st.one_of(
    st.sampled_from(["0", "1", "7", "-1", "1025", "node-a", "node-b", "node-m", "ghost",
                     "train-0", "ml", "3g.40gb", "", "1e400"]),
    st.text(max_size=12),
)  # fmt: skip
_numbers = st.one_of(
    st.sampled_from(["0.5", "1", "150", "NaN", "+Inf", "-Inf", "9223372036854775794", "-3",
                     "1e400", "0x10", "", "abc", "1_0"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)  # fmt: skip
_times = st.one_of(
    st.sampled_from(["", " 1767225600000", " 1767225600", " -1", " 1e30", " 99999999999999999999",
                     " 1767225600.5", " abc"]),
    st.integers(-(2**70), 2**70).map(lambda n: f" {n}"),
)  # fmt: skip


@st.composite
def _scrape(draw: st.DrawFn) -> str:
    """Prometheus text or OpenMetrics built from dcgm-exporter's pieces, broken at random."""
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.integers(0, 9))
        name = draw(_names)
        if kind == 0:
            lines.append(
                f"# TYPE {name} {draw(st.sampled_from(['gauge', 'counter', 'bogus', '']))}"
            )
        elif kind == 1:
            lines.append(f"# HELP {name} {draw(st.text(max_size=10))}")
        elif kind == 2:
            lines.append("# EOF")
        elif kind == 3:
            lines.append(draw(st.text(max_size=40)))
        else:
            labels = draw(st.dictionaries(_label_names, _label_values, max_size=5))
            if draw(st.booleans()):  # mostly a GPU of the store, its values escaped
                labels = {"gpu": draw(st.sampled_from(["0", "1"])),
                          "Hostname": draw(st.sampled_from(["node-a", "node-b", "node-m"])),
                          **labels}  # fmt: skip
                labels = {k: v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
                          for k, v in labels.items()}  # fmt: skip
            inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
            lines.append(f"{name}{{{inner}}} {draw(_numbers)}{draw(_times)}")
    end = draw(st.sampled_from(["", "\n", "\n# EOF\n", "# EOF"]))
    return "\n".join(lines) + end


def _series_json(draw: st.DrawFn) -> object:
    labels = draw(st.dictionaries(_label_names, _label_values, max_size=5))
    if draw(st.booleans()):  # mostly a GPU of the store
        labels = {"gpu": draw(st.sampled_from(["0", "1"])),
                  "hostname": draw(st.sampled_from(["node-a", "node-b", "node-m"])), **labels}  # fmt: skip
    points = draw(
        st.lists(
            st.one_of(
                st.tuples(
                    st.one_of(
                        st.integers(1767225600, 1767229200),
                        st.integers(-(2**40), 2**40),
                        st.floats(),
                        st.text(max_size=5),
                    ),
                    _numbers,
                ).map(list),
                st.just([]),
                st.just(None),
                st.integers(),
            ),
            max_size=5,
        )
    )
    return draw(
        st.sampled_from(
            [{"metric": labels, "values": points}, {"metric": labels, "values": points},
             {"metric": labels, "value": points[:1]}, {"metric": "x", "values": points},
             {"values": points}, [labels], labels]
        )
    )  # fmt: skip


@st.composite
def _query_range(draw: st.DrawFn) -> str:
    """query_range responses, some well formed, some cut, some of another shape."""
    result = [_series_json(draw) for _ in range(draw(st.integers(0, 4)))]
    data = {
        "resultType": draw(st.sampled_from(["matrix", "vector", "scalar", 3])),
        "result": result,
    }
    if draw(st.booleans()):
        data["resultType"] = "matrix"
    doc = draw(
        st.sampled_from(
            [{"status": "success", "data": data}, {"status": "success", "data": data},
             {"data": data, "status": "success"},
             {"status": "error", "errorType": "bad_data", "error": "x"}, {"status": "success"},
             {"status": "success", "data": None}, [data], "text", 7]
        )
    )  # fmt: skip
    text = json.dumps(doc, allow_nan=True)
    cut = draw(st.integers(0, len(text)))
    return draw(st.sampled_from([text, text, text[:cut], text + draw(st.text(max_size=5))]))


def _ends_well(store: Store, path: Path) -> None:
    """An ingest of ``path`` ends in a result (with reject rows, perhaps) or in one
    InputError of one line; nothing else escapes."""
    try:
        ingest(store, [path], PROMETHEUS)
    except InputError as exc:
        assert "\n" not in str(exc), str(exc)
        assert str(exc).startswith(str(path))


@pytest.mark.fuzz
@_FUZZ
@given(text=_scrape(), suffix=st.sampled_from([".prom", ".om", ".txt"]))
def test_fuzz_text_scrapes(cluster: Store, tmp_path: Path, text: str, suffix: str) -> None:
    path = tmp_path / f"scrape{suffix}"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    _ends_well(cluster, path)


@pytest.mark.fuzz
@_FUZZ
@given(
    text=_query_range(),
    name=st.sampled_from(
        ["DCGM_FI_PROF_SM_ACTIVE.json", "x.json", "count_over_time-DCGM_FI_DEV_GPU_UTIL.json"]
    ),
)
def test_fuzz_query_range(cluster: Store, tmp_path: Path, text: str, name: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    _ends_well(cluster, path)


@pytest.mark.fuzz
@_FUZZ
@given(data=st.binary(max_size=300), name=st.sampled_from(["a.json", "a.prom", "a.json.gz"]))
def test_fuzz_bytes(cluster: Store, tmp_path: Path, data: bytes, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    _ends_well(cluster, path)


_valid_values = st.one_of(
    st.floats(-1, 200, allow_nan=False),
    st.sampled_from([0.0, 1.0, 100.0, 79.0, 48.0, 13.0, 3.1e18, 9.2e18, 140737488355328.0]),
    st.just(float("nan")),
)


@st.composite
def _valid_matrix(draw: st.DrawFn) -> list[tuple[str, str]]:
    """Well-formed query_range files (name, text) of the store's GPUs: any metric, pod,
    MIG profile, value and count, as a server could answer them."""
    files = []
    for _ in range(draw(st.integers(1, 3))):
        metric = draw(st.sampled_from(prometheus.READ_METRICS))
        function = draw(st.sampled_from(["avg_over_time", "count_over_time", "max_over_time"]))
        series = []
        for _ in range(draw(st.integers(0, 4))):
            labels = {
                "gpu": draw(st.sampled_from(["0", "1", "2"])),
                draw(st.sampled_from(["hostname", "Hostname"])): draw(
                    st.sampled_from(["node-a", "node-b", "node-m", "ghost"])
                ),
                **draw(st.dictionaries(st.sampled_from(["pod", "namespace", "pod_uid", "GPU_I_PROFILE",
                                                        "GPU_I_ID", "replica"]),
                                       st.sampled_from(["train-0", "ml", "uid-train-0", "3g.40gb",
                                                        "1", "2", "b"]), max_size=4)),
            }  # fmt: skip
            minutes = draw(st.lists(st.integers(0, 5), unique=True, max_size=6))
            series.append((labels, {m: repr(draw(_valid_values)) for m in minutes}))
        files.append((f"{function}-{metric}.{len(files)}.json", _points(series)))
    return files


@pytest.mark.fuzz
@_FUZZ
@given(files=_valid_matrix())
def test_fuzz_well_formed_answers_always_load(
    cluster: Store, tmp_path: Path, files: list[tuple[str, str]]
) -> None:
    """What a server can answer always loads (values out of range as reject rows)."""
    folder = tmp_path / "dump"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    for name, text in files:
        (folder / name).write_text(text)
    result = ingest(cluster, [folder], PROMETHEUS)
    assert all(t.read >= t.rejected for t in result.tables)
