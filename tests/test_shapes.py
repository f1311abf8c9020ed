"""The schedulability predicate (SPEC §3): golden tiny fleet, hand-worked cases, properties, CLI."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal
from typer.testing import CliRunner

from fleetaudit.cli import app
from fleetaudit.core.errors import UsageError
from fleetaudit.model import occupancy
from fleetaudit.model.shapes import (
    CAUSES,
    beyond_fleet,
    beyond_fleet_all,
    evaluate,
    evaluate_all,
    make_shape,
    nearest_misses,
)
from tests.conftest import DATA, write

runner = CliRunner()
AT = datetime(2026, 1, 1, 12)


def _frames(folder: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    nodes = pl.read_csv(folder / "nodes.csv", schema_overrides={"switch_id": pl.Utf8})
    nodes = nodes.with_columns(
        pl.col("health").fill_null("healthy"), pl.col("cpus", "memory_gib").cast(pl.Float64)
    )
    allocations = pl.read_csv(folder / "allocations.csv", infer_schema=False).with_columns(
        pl.col("gpus", "cpus", "memory_gib", "checkpoint_interval_s").cast(pl.Float64),
        pl.col("start_time", "end_time")
        .str.to_datetime(time_zone="UTC")
        .dt.replace_time_zone(None),
        pl.col("sleepable") == "true",
    )
    return nodes, allocations


@pytest.fixture
def tiny(tiny_dir: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    return _frames(tiny_dir)


def _eval(frames: tuple[pl.DataFrame, pl.DataFrame], shape, at: datetime = AT):  # type: ignore[no-untyped-def]
    nodes, allocations = frames
    window = timedelta(seconds=shape.duration_s) if shape.duration_s else None
    return evaluate(occupancy.node_state(nodes, allocations, at, window), shape)


# -- the tiny fleet, end to end through the CLI ----------------------------------------------


def test_queued_shapes_match_the_hand_worked_json(tmp_path: Path, tiny_dir: Path) -> None:
    db = tmp_path / "tiny.duckdb"
    assert runner.invoke(app, ["ingest", str(tiny_dir), "--db", str(db)]).exit_code == 0
    result = runner.invoke(
        app, ["shapes", "--db", str(db), "--at", "2026-01-01T12:00:00Z", "--reclaim", "--json"]
    )
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    expected = json.loads((tiny_dir / "expected_queued_at_12.json").read_text())
    assert got["schema"] == "fleetaudit.shapes/1"
    assert got["at"] == expected["at"]
    # the queue holds one request per shape; order them as the expected file does
    by_shape = {json.dumps(s["shape"], sort_keys=True): s for s in got["shapes"]}
    assert len(got["shapes"]) == len(by_shape) == len(expected["shapes"])  # no shape more
    for want in expected["shapes"]:
        have = by_shape[json.dumps(want["shape"], sort_keys=True)]
        assert have["instances"] == want["instances"]
        assert have["gpus"] == want["gpus"]
        assert have["queued"] == want["queued"]
        assert have["reclaimable"]["instances"] == want["reclaimable"]["instances"]
        assert have["history"] is None


def test_history_matches_the_hand_worked_json(tmp_path: Path, tiny_dir: Path) -> None:
    db = tmp_path / "tiny.duckdb"
    assert runner.invoke(app, ["ingest", str(tiny_dir), "--db", str(db)]).exit_code == 0
    args = ["shapes", "--db", str(db), "--at", "2026-01-01T20:00:00Z", "--model", "H20", "--gpus", "8",
            "--cpus-per-gpu", "8", "--history", "12h", "--step", "1h", "--deadline", "1h", "--json"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    whole = json.loads((tiny_dir / "expected_history_r1_at_20.json").read_text())
    assert document["at"] == whole["at"]
    assert len(document["shapes"]) == 1
    got, expected = document["shapes"][0], whole["shapes"][0]
    assert got["shape"] == expected["shape"]
    assert got["reclaimable"] is expected["reclaimable"] is None
    assert got["instances"] == expected["instances"]
    assert got["gpus"] == expected["gpus"]
    assert got["history"] == expected["history"]
    assert got["queued"] == 1  # r1 is still queued at 20:00
    assert "calibration" in got


def test_terminal_output_and_explain(tmp_path: Path, tiny_dir: Path) -> None:
    db = tmp_path / "tiny.duckdb"
    assert runner.invoke(app, ["ingest", str(tiny_dir), "--db", str(db)]).exit_code == 0
    result = runner.invoke(
        app,
        [
            "shapes",
            "--db",
            str(db),
            "--at",
            "2026-01-01T12:00:00Z",
            "--model",
            "H20",
            "--gpus",
            "16",
            "--cpus-per-gpu",
            "4",
            "--explain",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "H20 16 GPU (2x8) x4 CPU switch" in result.stdout
    assert "nearest misses" in result.stdout
    assert "H20/switch sw-a" in result.stdout  # sw-a holds n3's slot and lacks one more pod


# -- hand-worked cases: every cause and locality ---------------------------------------------


def test_every_stranded_cause(tiny: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    r3 = _eval(tiny, make_shape("H20", 4, 4, 16, 0, "node", 7200))
    assert (r3.instances, r3.ledger.stranded) == (
        2,
        {"interval": 8, "fragment": 7, "cpu_memory": 4, "topology": 0},
    )
    r2 = _eval(tiny, make_shape("H20", 16, 8, 4))
    assert (r2.instances, r2.ledger.stranded) == (
        0,
        {"interval": 0, "fragment": 19, "cpu_memory": 0, "topology": 8},
    )


def test_any_locality_pools_domains(tiny: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    # 2 pods of 4 GPUs: n1 1 (4 free), n3 2, n4 1, n6 1 = 5 slots, any -> 2 instances, one slot stranded
    shape = make_shape("H20", 8, 4, 0, 0, "any")
    e = _eval(tiny, shape)
    assert e.instances == 2
    assert e.ledger.stranded == {
        "interval": 0,
        "fragment": 2 + 2 + 3,
        "cpu_memory": 0,
        "topology": 4,
    }
    # switch: sw-a has n1 1 + n3 2 = 3 -> 1; sw-b n4 1 -> 0; n6 alone 1 -> 0
    switch = _eval(tiny, make_shape("H20", 8, 4, 0, 0, "switch"))
    assert switch.instances == 1
    assert switch.ledger.stranded["topology"] == 4 + 4 + 4


def test_model_sets_sum_over_models_and_never_mix(tiny: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    # A10 n7: 4 free GPUs; H20 as r5 (2 GPUs x 2 CPUs) gives 13
    both = _eval(tiny, make_shape("A10|H20", 2, 2, 2))
    assert both.instances == 13 + 2
    assert both.ledger.installed == 48 + 4
    # 2 pods of 4 with any locality: one pod on A10, 5 on H20 -> 2 instances, never A10+H20
    pooled = _eval(tiny, make_shape("A10|H20", 8, 4, 0, 0, "any"))
    assert pooled.instances == 2
    assert pooled.ledger.stranded["topology"] == 4 + 4


def test_share_shape(tiny: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    e = _eval(tiny, make_shape("H20", 0.5, None, 8))
    assert (e.instances, e.ledger.usable, e.ledger.stranded) == (51, 25.5, None)
    # a quarter fits n1's shared GPU (0.25 left): 4 free GPUs x 4 + 1, CPU bound 32 / 2 = 16
    quarter = _eval(tiny, make_shape("H20", 0.25, None, 8))
    n1 = quarter.slots.filter(pl.col("node_id") == "n1")["slots"].item()
    assert n1 == 16
    uncapped = _eval(tiny, make_shape("H20", 0.25))
    assert uncapped.slots.filter(pl.col("node_id") == "n1")["slots"].item() == 4 * 4 + 1


def test_bad_shapes_are_usage_errors() -> None:
    with pytest.raises(UsageError, match=r"--gpus: 12 is not a multiple of gpus_per_pod 8"):
        make_shape("H20", 12)
    with pytest.raises(UsageError, match=r"--locality node with 2 pods"):
        make_shape("H20", 16, 8, locality="node")
    with pytest.raises(UsageError, match=r"--cpus-per-gpu: give a finite number of 0 or more, not -1"):
        make_shape("H20", 8, cpus_per_gpu=-1)


def test_unknown_model_and_bad_shape_from_the_cli(tmp_path: Path, tiny_dir: Path) -> None:
    db = tmp_path / "tiny.duckdb"
    assert runner.invoke(app, ["ingest", str(tiny_dir), "--db", str(db)]).exit_code == 0
    result = runner.invoke(app, ["shapes", "--db", str(db), "--model", "B200", "--gpus", "8"])
    assert result.exit_code == 2
    assert result.stderr == "fleetaudit: error: no node has model B200; models are: A10, H20\n"
    result = runner.invoke(app, ["shapes", "--db", str(db), "--model", "H20", "--gpus", "12"])
    assert result.exit_code == 2
    assert "12 is not a multiple of gpus_per_pod 8" in result.stderr
    bad = write(tmp_path / "shapes.csv", "gpu_model,gpus,gpus_per_pod\nH20,8,8\nH20,x,8\n")
    result = runner.invoke(app, ["shapes", "--db", str(db), "--shapes", str(bad)])
    assert result.exit_code == 2
    assert result.stderr == f"fleetaudit: error: {bad} row 2, column gpus: 'x' is not a number\n"


def test_shapes_file_and_max(tmp_path: Path, tiny_dir: Path) -> None:
    db = tmp_path / "tiny.duckdb"
    assert runner.invoke(app, ["ingest", str(tiny_dir), "--db", str(db)]).exit_code == 0
    shapes = write(
        tmp_path / "shapes.csv",
        "gpu_model,gpus,gpus_per_pod,cpus_per_gpu,duration_s\nH20,2,2,2,\nH20,4,4,16,2h\n",
    )
    result = runner.invoke(
        app,
        [
            "shapes",
            "--db",
            str(db),
            "--at",
            "2026-01-01T12:00:00Z",
            "--shapes",
            str(shapes),
            "--max",
            "5",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)["shapes"]
    assert [(s["instances"], s.get("capped", False)) for s in got] == [(5, True), (2, False)]
    assert got[0]["gpus"]["usable"] == 26  # the ledger is not capped
    assert got[1]["shape"]["duration_s"] == 7200.0


def test_nearest_misses_say_what_is_lacking(tiny: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    e = _eval(tiny, make_shape("H20", 8, 8, 8))
    nodes, allocations = tiny
    misses = nearest_misses(e, occupancy.node_state(nodes, allocations, AT))
    first = misses.row(0, named=True)
    # node locality: every node that gives no pod lacks one; n6 (7 free GPUs) lacks 1 GPU
    assert first["missing_pods"] == 1
    n6 = misses.filter(pl.col("node_id") == "n6").row(0, named=True)
    assert (n6["lacks_gpus"], n6["lacks_cpus"]) == (1, 0)


# -- properties -------------------------------------------------------------------------------

MODELS = ["H20", "A10"]


@st.composite
def fleets(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame]:
    n = draw(st.integers(1, 6))
    nodes = pl.DataFrame(
        {
            "node_id": [f"n{i}" for i in range(n)],
            "gpu_model": [draw(st.sampled_from(MODELS)) for _ in range(n)],
            "gpus": [draw(st.sampled_from([4, 8])) for _ in range(n)],
            "cpus": [float(draw(st.sampled_from([32, 64, 128]))) for _ in range(n)],
            "memory_gib": [float(draw(st.sampled_from([256, 1024]))) for _ in range(n)],
            "switch_id": [draw(st.sampled_from(["a", "b", None])) for _ in range(n)],
            "health": [draw(st.sampled_from(["healthy"] * 4 + ["down"])) for _ in range(n)],
        }
    )
    rows = []
    for j in range(draw(st.integers(0, 10))):
        start = draw(st.integers(0, 20))
        length = draw(st.one_of(st.none(), st.integers(1, 20)))
        rows.append(
            {
                "alloc_id": f"a{j}",
                "job_id": f"j{j}",
                "node_id": f"n{draw(st.integers(0, n - 1))}",
                "gpus": draw(st.sampled_from([0.25, 0.5, 1.0, 2.0, 3.0])),
                "cpus": float(draw(st.integers(0, 16))),
                "memory_gib": float(draw(st.integers(0, 64))),
                "priority": draw(st.sampled_from(["high", "low"])),
                "start_time": datetime(2026, 1, 1) + timedelta(hours=start),
                "end_time": None
                if length is None
                else datetime(2026, 1, 1) + timedelta(hours=start + length),
            }
        )
    schema = {"alloc_id": pl.Utf8, "job_id": pl.Utf8, "node_id": pl.Utf8, "gpus": pl.Float64, "cpus": pl.Float64,
              "memory_gib": pl.Float64, "priority": pl.Utf8, "start_time": pl.Datetime("us"),
              "end_time": pl.Datetime("us")}  # fmt: skip
    return nodes, pl.DataFrame(rows, schema=schema)


shapes_strategy = st.builds(
    make_shape,
    st.sampled_from(["H20", "A10", "A10|H20", None]),
    st.sampled_from([0.5, 1, 2, 4, 8, 16]),
    st.just(None),
    st.sampled_from([0, 4, 16]),
    st.sampled_from([0, 32]),
    st.just(None),
    st.sampled_from([None, 3600.0, 5 * 3600.0]),
)
PROPS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
T = datetime(2026, 1, 1, 10)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleet=fleets(), shapes=st.lists(shapes_strategy, min_size=1, max_size=6))
def test_evaluating_shapes_together_is_evaluating_each(fleet, shapes) -> None:  # type: ignore[no-untyped-def]
    """evaluate_all (the states shared by several shapes summed per model, the others
    alone, the plans collected together) gives each shape's own evaluate, in order."""
    nodes, allocations = fleet
    durations = list(dict.fromkeys(s.duration_s for s in shapes))
    windows = [timedelta(seconds=d) if d else None for d in durations]
    states = dict(zip(durations, occupancy.node_states(nodes, allocations, T, windows), strict=True))
    together = evaluate_all([(states[s.duration_s], s) for s in shapes])
    for shape, batched in zip(shapes, together, strict=True):
        alone = evaluate(states[shape.duration_s], shape)
        assert batched.shape == shape
        assert (batched.instances, batched.ledger) == (alone.instances, alone.ledger)
        assert_frame_equal(batched.slots, alone.slots)


def test_evaluating_shapes_together_by_hand(tiny: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    """The tiny fleet (tests/data/tiny/nodes.csv): H20 holds 48 GPUs, A10 4. A state shared
    by two shapes and one used by a single shape give each its own models' GPUs."""
    nodes, allocations = tiny
    now, hour = occupancy.node_states(nodes, allocations, AT, [None, timedelta(hours=1)])
    h20, a10, both = make_shape("H20", 1), make_shape("A10", 1), make_shape("A10|H20", 1)
    got = evaluate_all([(now, h20), (hour, a10), (now, both)])
    assert [e.ledger.installed for e in got] == [48, 4, 52]
    assert [e.shape for e in got] == [h20, a10, both]


def test_shapes_beyond_the_fleet_together_by_hand() -> None:
    """Two H20 nodes of 8 GPUs, one on switch s, one alone: 16 GPUs in two switch domains
    that hold one pod of 8 or two pods of 4 each. The figures are reused per model set
    and pod size, so each shape still gets its own."""
    nodes = pl.DataFrame(
        {"node_id": ["a", "b"], "gpu_model": ["H20", "H20"], "gpus": [8, 8], "switch_id": ["s", None]}
    )
    shapes = [
        make_shape("H20", 16),  # 2 pods of 8: a domain holds 1
        make_shape("H20", 16, gpus_per_pod=4),  # 4 pods of 4: a domain holds 2
        make_shape("H20", 8, gpus_per_pod=4),  # 2 pods of 4: fits in one domain
        make_shape("H20", 32),
        make_shape("H20", 16, locality="any"),
    ]
    notes = beyond_fleet_all(shapes, nodes)
    assert notes == [beyond_fleet(shape, nodes) for shape in shapes]
    assert [n and n.removesuffix("; it can never start") for n in notes] == [
        "H20 16 GPU (2x8) switch needs 2 pods in one switch domain of one model; the largest holds 1",
        "H20 16 GPU (4x4) switch needs 4 pods in one switch domain of one model; the largest holds 2",
        None,
        "H20 32 GPU (4x8) switch asks for 32 GPUs, more than the 16 installed on its models",
        None,
    ]


@PROPS
@given(fleet=fleets(), shape=shapes_strategy)
def test_ledger_adds_up(fleet: tuple[pl.DataFrame, pl.DataFrame], shape) -> None:  # type: ignore[no-untyped-def]
    e = _eval(fleet, shape, T)
    ledger = e.ledger
    assert (
        ledger.installed
        == ledger.unhealthy + ledger.allocated_high + ledger.allocated_low + ledger.idle
    )
    if ledger.stranded is not None:
        assert ledger.idle == ledger.usable + sum(ledger.stranded[c] for c in CAUSES)
        assert all(ledger.stranded[c] >= 0 for c in CAUSES)


@PROPS
@given(fleet=fleets(), shape=shapes_strategy, data=st.data())
def test_removing_an_allocation_never_lowers_instances(fleet, shape, data) -> None:  # type: ignore[no-untyped-def]
    nodes, allocations = fleet
    if allocations.is_empty():
        return
    drop = data.draw(st.integers(0, allocations.height - 1))
    fewer = allocations.filter(pl.int_range(pl.len()) != drop)
    if shape.is_share and shape.duration_s:
        return  # a partly filled GPU counts only on a steady node: not monotone (docs/shapes.md)
    assert _eval((nodes, fewer), shape, T).instances >= _eval(fleet, shape, T).instances


@PROPS
@given(fleet=fleets(), shape=shapes_strategy)
def test_a_duration_never_raises_instances(fleet, shape) -> None:  # type: ignore[no-untyped-def]
    instant = make_shape(shape.gpu_model, shape.gpus, shape.gpus_per_pod, shape.cpus_per_gpu,
                         shape.memory_gib_per_gpu, shape.locality, None)  # fmt: skip
    longer = make_shape(instant.gpu_model, instant.gpus, instant.gpus_per_pod, instant.cpus_per_gpu,
                        instant.memory_gib_per_gpu, instant.locality, 6 * 3600.0)  # fmt: skip
    assert _eval(fleet, longer, T).instances <= _eval(fleet, instant, T).instances


# -- the public 2023 trace ----------------------------------------------------------------------

REFERENCE = [(1, 8), (1, 12), (4, 32), (4, 48), (4, 64), (8, 64), (8, 96), (8, 128)]


@pytest.mark.trace
def test_reference_shapes_on_the_2023_trace(tmp_path: Path, traces: Path) -> None:
    db = tmp_path / "trace.duckdb"
    trace = traces / "alibaba-gpu-v2023"
    topo = traces / "alibaba-crux-topology-2023" / "topo.csv"
    result = runner.invoke(
        app,
        [
            "ingest",
            "--format",
            "alibaba-gpu-v2023",
            str(trace),
            "--topology",
            str(topo),
            "--db",
            str(db),
        ],
    )
    assert result.exit_code == 0, result.output
    rows = ["gpu_model,gpus,gpus_per_pod,cpus_per_gpu,locality"]
    models = "A10|G2|G3|P100|T4|V100M16|V100M32"
    rows += [f"{models},{g},{g},{c / g},node" for g, c in REFERENCE]
    rows += [f"{models},{g},8,8,{loc}" for g in (128, 256) for loc in ("switch", "any")]
    shapes = write(tmp_path / "shapes.csv", "\n".join(rows) + "\n")
    # the trace has no placements, so the fleet is empty: every GPU idle
    result = runner.invoke(app, ["shapes", "--db", str(db), "--shapes", str(shapes), "--json"])
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)["shapes"]
    assert len(got) == len(REFERENCE) + 4
    for entry in got:
        g = entry["gpus"]
        assert g["installed"] == 6212
        assert (
            g["installed"] == g["unhealthy"] + g["allocated_high"] + g["allocated_low"] + g["idle"]
        )
        assert g["idle"] == g["usable"] + sum(g["stranded"].values())
    by = {(e["shape"]["gpus"], e["shape"]["locality"]): e["instances"] for e in got}
    # 617 8-GPU nodes: 77 whole 128-GPU gangs pool anywhere; within 2-8 node domains none fit
    assert by[(128, "any")] >= by[(128, "switch")]
    assert by[(128, "switch")] == 0 and by[(256, "switch")] == 0


def test_durations_group_by_class_in_shapes_and_calibration(tmp_path: Path) -> None:
    """tests/data/duration_classes: q1-q3 (3435-3437 s) make one 1h shape, q4 (7000 s) a 2h
    one; the 1h shape's calibration counts h1 (waited 30 min) and h2 (2 h), not h3 (15m)."""
    db = tmp_path / "classes.duckdb"
    hand = DATA / "report_hand"
    files = [hand / "nodes.csv", hand / "allocations.csv", DATA / "duration_classes" / "requests.csv"]
    assert runner.invoke(app, ["ingest", *map(str, files), "--db", str(db)]).exit_code == 0
    at = ["--db", str(db), "--at", "2026-01-02T00:00:00Z"]
    result = runner.invoke(app, ["shapes", *at, "--history", "1d", "--step", "1h", "--json"])
    assert result.exit_code == 0, result.output
    got = {s["shape"]["duration_s"]: s for s in json.loads(result.stdout)["shapes"]}
    assert sorted(got) == [3600.0, 7200.0]
    assert (got[3600.0]["queued"], got[7200.0]["queued"]) == (3, 1)
    calibration = got[3600.0]["calibration"]
    assert calibration["started"] == 2
    assert (calibration["actual_wait_p50_s"], calibration["actual_wait_p90_s"]) == (1800.0, 7200.0)
    # an ad-hoc duration is evaluated exactly, and counts the requests of its class
    adhoc = runner.invoke(
        app, ["shapes", *at, "--model", "H20", "--gpus", "1", "--duration", "50m", "--json"]
    )
    assert adhoc.exit_code == 0, adhoc.output
    (shape,) = json.loads(adhoc.stdout)["shapes"]
    assert (shape["shape"]["duration_s"], shape["queued"]) == (3000.0, 3)


def _state(rows: list[tuple[str, str, int, float]]) -> pl.DataFrame:
    """A node state at t (8-GPU H20 nodes, no duration): (node, domain, free GPUs, free CPUs)."""
    n = len(rows)
    return pl.DataFrame(
        {
            "node_id": [r[0] for r in rows], "gpu_model": ["H20"] * n, "health": ["healthy"] * n,
            "domain": [r[1] for r in rows], "gpus": [8] * n,
            "gpus_used": [8 - r[2] for r in rows], "gpus_used_high": [8 - r[2] for r in rows],
            "free_gpus": [r[2] for r in rows], "free_gpus_window": [r[2] for r in rows],
            "free_cpus_window": [r[3] for r in rows], "free_memory_gib_window": [None] * n,
            "share_fills": [[] for _ in rows],
        },
        schema_overrides={"free_memory_gib_window": pl.Float64, "share_fills": pl.List(pl.Float64)},
    )  # fmt: skip


def test_nearest_misses_rank_by_what_is_lacking_for_a_node_shape() -> None:
    """8 GPUs x 4 CPUs on one node: b lacks 1 GPU; d 1 GPU and 16 CPUs (32 - 16);
    c 2 GPUs and 24 CPUs (32 - 8); a, full, lacks 8 GPUs. Listed fewest first."""
    state = _state([("a", "s", 0, 64.0), ("b", "s", 7, 64.0), ("c", "s", 6, 8.0), ("d", "s", 7, 16.0)])
    shape = make_shape("H20", 8, 8, 4)
    misses = nearest_misses(evaluate(state, shape), state)
    assert misses.select("node_id", "lacks_gpus", "lacks_cpus").rows() == [
        ("b", 1, 0), ("d", 1, 16), ("c", 2, 24), ("a", 8, 0),
    ]  # fmt: skip


def test_nearest_misses_rank_domains_by_what_they_lack_in_all() -> None:
    """16 GPUs as 2 x 8 in a switch domain: s3 (7 + 8 free) lacks 1 GPU on i; s2 (6 + 5
    free) misses 2 pods that lack 2 + 3 = 5 GPUs; s1 (8 + 0 free) misses 1 pod lacking 8,
    on e (a second pod there) as on f: the tie goes to the first node id."""
    state = _state([("e", "s1", 8, 0.0), ("f", "s1", 0, 0.0), ("g", "s2", 6, 0.0),
                    ("h", "s2", 5, 0.0), ("i", "s3", 7, 0.0), ("j", "s3", 8, 0.0)])  # fmt: skip
    misses = nearest_misses(evaluate(state, make_shape("H20", 16, 8)), state)
    assert misses.select("group", "missing_pods", "node_id", "lacks_gpus").rows() == [
        ("H20/s3", 1, "i", 1), ("H20/s2", 2, "g", 2), ("H20/s2", 2, "h", 3), ("H20/s1", 1, "e", 8),
    ]  # fmt: skip


def test_an_overcommitted_node_offers_no_share_room() -> None:
    """4 GPUs: 3 whole plus five 0.25 shares pack onto 5 GPUs, one more than the node has.

    The fifth share's GPU is not real, so its 0.75 left takes no 0.5 pod (a property
    test once found that dropping one share then *lowered* the instances, 1 -> 0).
    """
    nodes = pl.DataFrame(
        {"node_id": ["n0"], "gpu_model": ["H20"], "gpus": [4], "cpus": [32.0],
         "memory_gib": [256.0], "switch_id": ["a"], "health": ["healthy"]}
    )  # fmt: skip
    t0 = datetime(2026, 1, 1)
    gpus = [0.25] * 5 + [3.0]
    allocations = pl.DataFrame(
        {"alloc_id": [f"a{i}" for i in range(6)], "job_id": [f"j{i}" for i in range(6)],
         "node_id": ["n0"] * 6, "gpus": gpus, "cpus": [0.0] * 6, "memory_gib": [0.0] * 6,
         "priority": ["high"] * 6, "start_time": [t0] * 6, "end_time": [None] * 6},
        schema_overrides={"end_time": pl.Datetime("us")},
    )  # fmt: skip
    shape = make_shape("H20", 0.5, None, 0, 0, None, None)
    assert _eval((nodes, allocations), shape, T).instances == 0
    fewer = allocations.filter(pl.col("alloc_id") != "a0")  # 3 whole + 4 quarters: exactly full
    assert _eval((nodes, fewer), shape, T).instances == 0


def test_history_calibrates_on_every_duration_class_without_duration(tmp_path: Path) -> None:
    """One 8-GPU node, busy 00:00-02:00 (a1) and 05:00-06:00 (a2); --at 04:00, --history 4h
    --step 1h: instants 00:00 .. 04:00. "H20 8 GPU" fits from 02:00 on with no duration or
    a 1h one (waits 2h, 1h, 0, 0, 0); a 4h one never fits (a2 is within 4 h of 02:00,
    03:00, 04:00): censored.

    Requests of the shape: r1 (no duration) waited 00:30-02:00, 1.5 h, predicted at 01:00:
    1 h; r2 (1h) 01:00-02:00, 1 h, predicted 1 h; r3 (4h) 02:00-06:00, 4 h, predicted
    censored; r4 (no duration) is still queued. Without --duration all three that started
    are the sample, each against its own class's history: real p50 = 2nd of (1, 1.5, 4 h)
    = 1.5 h, p90 = 3rd = 4 h; predicted p50 = 1 h, p90 censored; r4 left out as queued.
    (Before, only r1 was compared, r2 and r3 left out without a word.) With --duration 1h
    the sample is r2, and the other three are left out as of other durations.
    """
    folder = tmp_path / "fleet"
    write(folder / "nodes.csv", "node_id,gpu_model,gpus,cpus\nn1,H20,8,64\n")
    write(folder / "allocations.csv", """
alloc_id,node_id,gpus,cpus,priority,start_time,end_time
a1,n1,8,8,high,2026-05-01T00:00:00Z,2026-05-01T02:00:00Z
a2,n1,8,8,high,2026-05-01T05:00:00Z,2026-05-01T06:00:00Z
""")
    write(folder / "requests.csv", """
request_id,submit_time,start_time,gpu_model,gpus,duration_s
r1,2026-05-01T00:30:00Z,2026-05-01T02:00:00Z,H20,8,
r2,2026-05-01T01:00:00Z,2026-05-01T02:00:00Z,H20,8,3600
r3,2026-05-01T02:00:00Z,2026-05-01T06:00:00Z,H20,8,14400
r4,2026-05-01T03:00:00Z,,H20,8,
""")
    db = tmp_path / "s.duckdb"
    assert _invoke("ingest", str(folder), "--db", str(db), "--quiet").exit_code == 0
    base = ["shapes", "--db", str(db), "--model", "H20", "--gpus", "8", "--at",
            "2026-05-01T04:00:00Z", "--history", "4h", "--step", "1h"]  # fmt: skip
    (every,) = json.loads(_invoke(*base, "--json").stdout)["shapes"]
    assert every["calibration"] == {
        "started": 3, "actual_wait_p50_s": 5400.0, "actual_wait_p90_s": 14400.0,
        "predicted_wait_p50_s": 3600.0, "predicted_wait_p90_s": None,
        "left_out": {"not_started": 1, "outside_window": 0},
        "durations_s": [None, 3600.0, 14400.0],
    }  # fmt: skip
    (hour,) = json.loads(_invoke(*base, "--duration", "1h", "--json").stdout)["shapes"]
    assert hour["calibration"] == {
        "started": 1, "actual_wait_p50_s": 3600.0, "actual_wait_p90_s": 3600.0,
        "predicted_wait_p50_s": 3600.0, "predicted_wait_p90_s": 3600.0,
        "left_out": {"not_started": 0, "outside_window": 0, "other_duration": 3},
        "durations_s": [],
    }  # fmt: skip
    terminal = " ".join(_invoke(*base).stdout.split())
    assert (
        "calibration of H20 8 GPU node: 3 started (durations none, 1.0h, 4.0h, each against "
        "its own duration's history); left out: 1 still queued at the end (no real wait yet)"
    ) in terminal


def _invoke(*args: str) -> object:
    return runner.invoke(app, list(args))


def test_model_names_are_matched_without_case(tmp_path: Path) -> None:
    """--model h20 is the nodes' H20 (the JSON spells it as they do); an unknown one fails."""
    db = tmp_path / "t.duckdb"
    assert _invoke("ingest", str(DATA / "tiny"), "--db", str(db), "-q").exit_code == 0
    lower = json.loads(_invoke("shapes", "--db", str(db), "--model", "h20", "--gpus", "8",
                               "--json").stdout)  # fmt: skip
    upper = json.loads(_invoke("shapes", "--db", str(db), "--model", "H20", "--gpus", "8",
                               "--json").stdout)  # fmt: skip
    assert lower["shapes"] == upper["shapes"] and lower["shapes"][0]["shape"]["gpu_model"] == "H20"
    missing = _invoke("shapes", "--db", str(db), "--model", "h2O", "--gpus", "8")
    assert missing.exit_code == 2 and "no node has model h2O; models are: A10, H20" in missing.stderr


def test_the_help_examples_show_something_on_the_demo_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """shapes' example finds an instance and names the nearest misses; compaction's frees
    instances of its shape (before < after), and the scenario it saves shows them."""
    import re
    import shlex

    db = tmp_path / "demo.duckdb"
    assert _invoke("demo", "--db", str(db), "-q").exit_code == 0
    monkeypatch.setenv("COLUMNS", "200")  # the help's examples on a line each

    def examples(*command: str) -> list[list[str]]:
        text = _invoke(*command, "--help").stdout.split("Examples:")[1].split("╭")[0]
        joined = re.sub(r"\\\s*\n", " ", text)  # an example continued on the next line
        return [shlex.split(line.strip())[1:] for line in joined.splitlines()
                if line.strip().startswith("fleetaudit ")]  # fmt: skip

    (explain, _history) = examples("shapes")
    shown = json.loads(_invoke(*explain, "--db", str(db), "--json").stdout)["shapes"][0]
    assert shown["instances"] >= 1
    assert re.search(r"nearest misses: H20", _invoke(*explain, "--db", str(db)).stdout)
    compact, read, _over_time = examples("whatif", "compaction")
    document = json.loads(_invoke(*compact, "--db", str(db), "--jobs", "1", "--json").stdout)
    before, after = document["before"]["instances"][0], document["after"]["instances"][0]
    assert after["instances"] > before["instances"]
    packed = json.loads(_invoke(*read, "--db", str(db), "--json").stdout)["shapes"][0]
    assert packed["instances"] == after["instances"]
