"""Placement what-if: fill mode and by-time replay on hand-worked tiny fleets, properties, seeds."""

from __future__ import annotations

import csv
import io
import json
import random
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetaudit.core.errors import UsageError
from fleetaudit.core.times import epoch_us
from fleetaudit.whatif.placement import (
    POLICIES,
    QUEUES,
    PlacementOptions,
    Replay,
    ReplayResult,
    ReplayView,
    fill_curves,
    fleet_fragmentation,
    replay_curves,
    simulate_fill,
    simulate_replay,
)


def make_nodes(*rows: tuple[str, str, int, float, float | None, str | None]) -> pl.DataFrame:
    """rows of (node_id, gpu_model, gpus, cpus, memory_gib, switch_id)."""
    return pl.DataFrame(
        [(*row, "healthy") for row in rows],
        schema={"node_id": pl.String, "gpu_model": pl.String, "gpus": pl.Int64,
                "cpus": pl.Float64, "memory_gib": pl.Float64, "switch_id": pl.String,
                "health": pl.String},
        orient="row",
    )  # fmt: skip


def make_requests(*gpus: float, **columns: list[object]) -> pl.DataFrame:
    frame = pl.DataFrame(
        {
            "request_id": [f"r{i + 1}" for i in range(len(gpus))],
            "trace_order": list(range(len(gpus))),
            "gpus": [float(g) for g in gpus],
        }
    )
    extra = dict(columns)
    if "cpus" not in extra:
        extra["cpus"] = [1.0] * len(gpus)
    return frame.with_columns(pl.Series(name, values) for name, values in extra.items())


def placed(result_frame: pl.DataFrame) -> list[tuple[str, str, str]]:
    return result_frame.select("request_id", "node_id", "gpu_index").rows()


def fill(nodes: pl.DataFrame, requests: pl.DataFrame, policy: str, pct: float, **kw: object):
    options = PlacementOptions(policy=policy, fill_pct=pct, step_pct=pct, **kw)  # type: ignore[arg-type]
    return simulate_fill(nodes, requests, options)


# ------------------------------------------------------------------ policies

TWO_DOMAINS = make_nodes(
    ("a", "T4", 4, 16.0, None, "s1"),
    ("b", "T4", 4, 16.0, None, "s1"),
    ("c", "T4", 4, 16.0, None, "s2"),
    ("d", "T4", 2, 16.0, None, "s2"),
)


def test_first_fit_takes_the_lowest_node_that_fits() -> None:
    # 14 GPUs. r1 (1 GPU) -> a, the first node. r2 (4 GPUs) no longer fits a
    # (3 free) -> b. r3 (2 GPUs) fits a again -> a.
    result = fill(TWO_DOMAINS, make_requests(1, 4, 2), "first-fit", 50)
    assert [n for _, n, _ in placed(result.allocations)] == ["a", "b", "a"]


def test_best_fit_takes_the_node_left_with_least_free_gpus() -> None:
    # r1 (1 GPU): d is left with 1 free GPU, the others with 3 -> d.
    # r2 (1 GPU): d is left with 0 -> d. r3 (2 GPUs): a, b, c tie at 2 left,
    # and equal CPUs -> the lowest index, a.
    result = fill(TWO_DOMAINS, make_requests(1, 1, 2), "best-fit", 25)
    assert [n for _, n, _ in placed(result.allocations)] == ["d", "d", "a"]


def test_topology_packs_into_the_fullest_domain() -> None:
    # r1, r2 as best-fit (d). r3 (2 GPUs): best-fit would take a (tie, lowest
    # index), but s2 is the fullest domain (2 of its 6 GPUs taken) and c is
    # its only node that fits -> c.
    result = fill(TWO_DOMAINS, make_requests(1, 1, 2), "topology", 25)
    assert [n for _, n, _ in placed(result.allocations)] == ["d", "d", "c"]


def test_random_is_seeded() -> None:
    requests = make_requests(*([1] * 7))
    runs = [fill(TWO_DOMAINS, requests, "random", 50, seed=s).allocations for s in (3, 3, 4)]
    assert runs[0].equals(runs[1])
    assert [n for _, n, _ in placed(runs[0])] != [n for _, n, _ in placed(runs[2])]


def test_fgd_avoids_the_gpu_it_would_fragment() -> None:
    # Two 1-GPU nodes; the workload is 0.6 x1, 0.3 x1, 0.4 x3 (p = 0.2, 0.2, 0.6).
    # r1 (0.6): both nodes gain the same fragment (0.4 left cannot serve the
    # 0.6 shape: +0.4 x 0.2) -> tie -> a.
    # r2 (0.3) on a leaves 0.1, which serves no shape: F_a goes from 0.08 to
    # 0.1 (+0.02). On b it leaves 0.7, which serves every shape: +0. -> b,
    # where best-fit takes the tighter a.
    nodes = make_nodes(("a", "T4", 1, 8.0, None, None), ("b", "T4", 1, 8.0, None, None))
    requests = make_requests(0.6, 0.3, 0.4, 0.4, 0.4)
    fgd = fill(nodes, requests, "fgd", 45)
    assert [n for _, n, _ in placed(fgd.allocations)] == ["a", "b"]
    best = fill(nodes, requests, "best-fit", 45)
    assert [n for _, n, _ in placed(best.allocations)] == ["a", "a"]


def test_fgd_prefers_the_gpu_that_keeps_whole_gpus_whole() -> None:
    # One 2-GPU node, workload 0.5 x2 and 1 GPU x1. r1 (0.5) on either GPU
    # leaves [0.5, 1]: no fragment. r2 (0.5) on GPU 0 -> [0, 1] keeps a whole
    # GPU for the 1-GPU shape (F 0); on GPU 1 -> [0.5, 0.5] no shape of 1 GPU
    # fits (F = 1.0 x 1/3) -> GPU 0.
    nodes = make_nodes(("a", "T4", 2, 8.0, None, None))
    result = fill(nodes, make_requests(0.5, 0.5, 1), "fgd", 50)
    assert placed(result.allocations) == [("r1", "a", "0"), ("r2", "a", "0")]


# ------------------------------------------------------- sharing and limits


@pytest.mark.parametrize("policy", POLICIES)
def test_two_halves_share_one_gpu(policy: str) -> None:
    nodes = make_nodes(("a", "T4", 2, 8.0, None, None))
    result = fill(nodes, make_requests(0.5, 0.5, 1, 1), policy, 150)
    # the halves fill GPU 0; one whole GPU is left for r3; r4 (arrival 150%) fails
    assert placed(result.allocations) == [("r1", "a", "0"), ("r2", "a", "0"), ("r3", "a", "1")]
    assert result.failed == 1
    assert result.curve["allocated_pct"].to_list() == [100.0]


def test_two_sixths_tenths_need_two_gpus() -> None:
    nodes = make_nodes(("a", "T4", 2, 8.0, None, None))
    result = fill(nodes, make_requests(0.6, 0.6, 1), "first-fit", 110)
    assert placed(result.allocations) == [("r1", "a", "0"), ("r2", "a", "1")]
    assert result.failed == 1  # no whole GPU is left for r3


def test_model_sets_are_respected() -> None:
    nodes = make_nodes(("a", "T4", 1, 8.0, None, None), ("b", "V100", 1, 8.0, None, None))
    requests = make_requests(0.1, 0.1, 0.1, gpu_model=["V100", "A100|V100", "A100"])
    result = fill(nodes, requests, "first-fit", 15)
    assert placed(result.allocations) == [("r1", "b", "0"), ("r2", "b", "0")]
    assert result.failed == 1


def test_cpus_and_memory_are_respected() -> None:
    nodes = make_nodes(
        ("a", "T4", 2, 4.0, 64.0, None),
        ("b", "T4", 2, 16.0, 64.0, None),
        ("c", "T4", 2, 16.0, 512.0, None),
    )
    requests = make_requests(1, 1, cpus=[8.0, 8.0], memory_gib=[32.0, 128.0])
    result = fill(nodes, requests, "first-fit", 30)
    # r1 needs 8 cores: not a (4) -> b. r2 needs 128 GiB: only c.
    assert [n for _, n, _ in placed(result.allocations)] == ["b", "c"]


def test_cpus_per_gpu_when_cpus_is_null() -> None:
    nodes = make_nodes(("a", "T4", 4, 8.0, None, None), ("b", "T4", 4, 32.0, None, None))
    requests = make_requests(2, cpus=[None], cpus_per_gpu=[8.0])
    result = fill(nodes, requests, "first-fit", 25)
    assert result.allocations.select("node_id", "cpus").rows() == [("b", 16.0)]


def test_gangs_are_all_or_nothing() -> None:
    # r1: two pods of 2 GPUs. Pod 1 lands on a, pod 2 finds no 2 free GPUs
    # (b has 1) -> r1 fails and a is given back, so r2 (2 GPUs) still fits a.
    nodes = make_nodes(("a", "T4", 2, 8.0, None, "s1"), ("b", "T4", 1, 8.0, None, "s1"))
    requests = make_requests(4, 2, gpus_per_pod=[2.0, 2.0], locality=["any", "node"])
    result = fill(nodes, requests, "first-fit", 200)
    assert placed(result.allocations) == [("r2", "a", "0,1")]
    assert result.failed >= 1


def test_switch_gangs_stay_in_one_domain() -> None:
    nodes = make_nodes(
        ("a", "T4", 2, 8.0, None, "s1"), ("b", "T4", 4, 8.0, None, "s2"),
        ("c", "T4", 2, 8.0, None, "s2"),
    )  # fmt: skip
    # First fit alone would put pod 1 on a, and s1 has no room for pod 2. Only
    # domains with room for the whole gang take its first pod: s2 (room 3 pods),
    # where first fit puts both pods on b. The same gang with locality any
    # spreads over a and b.
    switch = fill(nodes, make_requests(4, gpus_per_pod=[2.0], locality=["switch"]), "first-fit", 50)
    assert switch.allocations["node_id"].to_list() == ["b", "b"]
    for policy in ("best-fit", "random", "fgd", "topology"):
        for gang in (
            fill(nodes, make_requests(4, gpus_per_pod=[2.0], locality=["switch"]), policy, 50)
            .allocations.group_by("alloc_id")
            .agg("node_id")
            .rows()
        ):
            assert gang[1][0] in ("b", "c")  # fmt: skip
    # A gang no domain can hold fails, and gives nothing back half-placed.
    wide = fill(nodes, make_requests(8, gpus_per_pod=[2.0], locality=["switch"]), "first-fit", 100)
    assert wide.allocations.height == 0
    spread = fill(nodes, make_requests(4, gpus_per_pod=[2.0], locality=["any"]), "first-fit", 50)
    assert spread.allocations["node_id"].to_list() == ["a", "b"]
    assert spread.allocations["alloc_id"].to_list() == ["r1@0/0", "r1@0/1"]


# ----------------------------------------------------------- property test

node_rows = st.lists(
    st.tuples(
        st.sampled_from(["T4", "V100"]),
        st.sampled_from([1, 2, 4, 8]),
        st.sampled_from([4.0, 16.0, 64.0]),
        st.sampled_from([None, 32.0, 256.0]),
        st.sampled_from([None, "s1", "s2"]),
    ),
    min_size=1,
    max_size=6,
)
request_rows = st.lists(
    st.tuples(
        st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.6, 1.0, 2.0, 4.0, 8.0]),
        st.sampled_from([0.5, 2.0, 8.0]),
        st.sampled_from([None, 16.0, 100.0]),
        st.sampled_from([None, "T4", "V100", "T4|V100"]),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node_rows, request_rows, st.sampled_from(POLICIES), st.integers(0, 3))
def test_capacity_is_never_exceeded(nodes_in, requests_in, policy, seed) -> None:
    nodes = make_nodes(*[(f"n{i}", *row) for i, row in enumerate(nodes_in)])
    requests = make_requests(
        *[r[0] for r in requests_in],
        cpus=[r[1] for r in requests_in],
        memory_gib=[r[2] for r in requests_in],
        gpu_model=[r[3] for r in requests_in],
    )
    if requests["gpus"].sum() == 0:
        requests = requests.with_columns(pl.lit(1.0).alias("gpus"))
    result = fill(nodes, requests, policy, 150, seed=seed)
    capacity = {row["node_id"]: row for row in nodes.iter_rows(named=True)}
    wanted = {row["request_id"]: row for row in requests.iter_rows(named=True)}
    gpu_use: dict[tuple[str, int], float] = defaultdict(float)
    cpu_use: dict[str, float] = defaultdict(float)
    mem_use: dict[str, float] = defaultdict(float)
    for row in result.allocations.iter_rows(named=True):
        node = capacity[row["node_id"]]
        model = wanted[row["request_id"]]["gpu_model"]
        assert model is None or node["gpu_model"] in model.split("|")
        used = [int(g) for g in row["gpu_index"].split(",") if g]
        assert len(used) == (1 if 0 < row["gpus"] < 1 else int(row["gpus"]))
        for gpu in used:
            assert gpu < node["gpus"]
            gpu_use[row["node_id"], gpu] += min(row["gpus"], 1.0)
        cpu_use[row["node_id"]] += row["cpus"]
        mem_use[row["node_id"]] += row["memory_gib"]
    assert all(v <= 1.0 + 1e-9 for v in gpu_use.values())
    assert all(cpu_use[n] <= capacity[n]["cpus"] + 1e-9 for n in cpu_use)
    assert all(
        capacity[n]["memory_gib"] is None or mem_use[n] <= capacity[n]["memory_gib"] + 1e-9
        for n in mem_use
    )
    total = nodes["gpus"].sum()
    allocated = sum(gpu_use.values())
    assert result.curve["allocated_pct"][-1] == pytest.approx(100 * allocated / total)
    assert result.curve["allocated_pct"].is_sorted()


# ------------------------------------------------------------ seeds and curves


def test_same_seed_same_curve_and_seeds_average() -> None:
    nodes = TWO_DOMAINS
    requests = make_requests(0.5, 1, 0.3, 2, 0.6)
    base = PlacementOptions(policy="random", fill_pct=120, step_pct=20)
    single = [
        simulate_fill(nodes, requests, PlacementOptions(**{**base.__dict__, "seed": s})).curve
        for s in (5, 6, 7)
    ]
    again = simulate_fill(nodes, requests, PlacementOptions(**{**base.__dict__, "seed": 5}))
    assert again.curve.equals(single[0])
    options = PlacementOptions(**{**base.__dict__, "seed": 5, "seeds": 3})
    averaged = fill_curves(nodes, requests, options, ["random"])["random"]
    expected = (
        pl.concat(single)
        .group_by("arrived_pct")
        .agg(pl.all().cast(pl.Float64).mean())
        .sort("arrived_pct")
    )
    assert averaged.select(expected.columns).equals(expected)
    assert averaged["arrived_pct"].to_list() == [20.0, 40.0, 60.0, 80.0, 100.0, 120.0]


def test_fill_curves_in_processes_match_in_process() -> None:
    requests = make_requests(0.5, 1, 0.3, 2, 0.6)
    options = PlacementOptions(fill_pct=100, seeds=2)
    alone = fill_curves(TWO_DOMAINS, requests, options, ["fgd", "random"])
    pooled = fill_curves(
        TWO_DOMAINS, requests, PlacementOptions(fill_pct=100, seeds=2, workers=2), ["fgd", "random"]
    )
    assert all(alone[p].equals(pooled[p]) for p in alone)


def test_errors_name_the_problem() -> None:
    requests = make_requests(1)
    with pytest.raises(UsageError, match="unknown policy 'worst-fit'"):
        simulate_fill(TWO_DOMAINS, requests, PlacementOptions(policy="worst-fit", fill_pct=50))
    with pytest.raises(UsageError, match="fill mode needs a fill percentage"):
        simulate_fill(TWO_DOMAINS, requests, PlacementOptions())
    with pytest.raises(UsageError, match="ask for no GPUs"):
        simulate_fill(TWO_DOMAINS, make_requests(0), PlacementOptions(fill_pct=50))
    with pytest.raises(UsageError, match="request r1: gpus must be"):
        simulate_fill(TWO_DOMAINS, make_requests(1.5), PlacementOptions(fill_pct=50))


def test_inputs_are_not_mutated() -> None:
    nodes, requests = TWO_DOMAINS.clone(), make_requests(0.5, 1)
    before = (nodes.clone(), requests.clone())
    simulate_fill(nodes, requests, PlacementOptions(policy="fgd", fill_pct=50))
    assert nodes.equals(before[0])
    assert requests.equals(before[1])


# ------------------------------------------------------------ fragmentation


def test_fragmentation_of_a_hand_worked_node() -> None:
    # Workload: 0.5 share x2 (p 1/2), 2 whole GPUs x1 (p 1/4), CPU-only x1 (p 1/4).
    # Node: GPU 0 has 0.3 free, GPU 1 is free: T = 1.3.
    # - 0.5 share runs (GPU 1); GPU 0's 0.3 can never serve it: 0.3 x 1/2 = 0.15
    # - 2 GPUs cannot run (one free GPU): all of T: 1.3 x 1/4 = 0.325
    # - CPU-only uses no GPU: all of T: 1.3 x 1/4 = 0.325
    nodes = make_nodes(("a", "T4", 2, 16.0, None, None))
    requests = make_requests(0.5, 0.5, 2, 0, gpus_per_pod=[None, None, 2.0, None])
    allocations = pl.DataFrame({"node_id": ["a"], "gpus": [0.7], "gpu_index": ["0"], "cpus": [1.0]})
    assert fleet_fragmentation(nodes, allocations, requests) == pytest.approx(0.8)
    # With too few CPUs left every GPU shape sees the whole node as fragment.
    starved = allocations.with_columns(pl.lit(15.5).alias("cpus"))
    assert fleet_fragmentation(nodes, starved, requests) == pytest.approx(1.3)


def test_curve_reports_fragmentation_of_the_final_state() -> None:
    nodes = make_nodes(("a", "T4", 2, 16.0, None, None))
    requests = make_requests(0.7, 0.5, 0.5, 2, 0, gpus_per_pod=[None, None, None, 2.0, None])
    result = fill(nodes, requests, "first-fit", 35)
    frag = fleet_fragmentation(nodes, result.allocations, requests)
    assert result.curve["fragmented_pct"].to_list() == [pytest.approx(100 * frag / 2)]


# ------------------------------------------------------------------ trace


@pytest.mark.trace
def test_trace_fill_orders_policies_like_the_fgd_paper(traces: Path) -> None:
    from benchmarks.bench_placement import load

    nodes, requests = load(traces, "default")
    options = PlacementOptions(fill_pct=100, seeds=1)
    curves = fill_curves(nodes, requests, options, ["random", "best-fit", "fgd"])
    at_100 = {
        p: c.filter(pl.col("arrived_pct") == 100)["allocated_pct"][0] for p, c in curves.items()
    }
    assert at_100["random"] < at_100["best-fit"] <= at_100["fgd"]
    assert 84 < at_100["random"] < 89
    assert at_100["fgd"] > 92


def test_shuffle_feeds_every_request_once_in_a_seeded_order() -> None:
    requests = make_requests(*([0.5] * 6))
    options = PlacementOptions(policy="first-fit", fill_pct=20, step_pct=20, shuffle=True)
    runs = [
        simulate_fill(TWO_DOMAINS, requests, PlacementOptions(**{**options.__dict__, "seed": s}))
        for s in (1, 1, 2)
    ]
    first = runs[0].allocations["request_id"].to_list()
    assert sorted(first) == [f"r{i}" for i in range(1, 7)]  # 3 GPUs = 21% of 14
    assert first == runs[1].allocations["request_id"].to_list()
    assert first != runs[2].allocations["request_id"].to_list()


def test_whatif_placement_cli_saves_a_scenario_that_shapes_reads(tmp_path: Path) -> None:
    """--save-as keeps the final placement; shapes --scenario evaluates on it."""
    import json

    from typer.testing import CliRunner

    from fleetaudit.cli import app

    runner = CliRunner()
    tiny = Path(__file__).parent / "data" / "tiny"
    db = tmp_path / "tiny.duckdb"
    assert runner.invoke(app, ["ingest", str(tiny), "--db", str(db)]).exit_code == 0
    result = runner.invoke(
        app,
        ["whatif", "placement", "--db", str(db), "--fill", "50", "--policy", "best-fit",
         "--in-order", "--save-as", "half", "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["schema"] == "fleetaudit.placement/1"
    assert doc["mode"] == "fill" and doc["gpus"] == 44  # healthy: 40 H20 (n5 cordoned) + 4 A10
    curve = doc["policies"][0]["curve"]
    assert curve[-1]["arrived_pct"] == 50
    placed = curve[-1]["allocated_pct"] * 44 / 100
    # the scenario holds exactly the placement: its allocated GPUs are the curve's
    shapes = runner.invoke(
        app,
        [
            "shapes",
            "--db",
            str(db),
            "--scenario",
            "half",
            "--model",
            "H20|A10",
            "--gpus",
            "1",
            "--json",
        ],
    )
    assert shapes.exit_code == 0, shapes.output
    ledger = json.loads(shapes.stdout)["shapes"][0]["gpus"]
    assert ledger["allocated_high"] + ledger["allocated_low"] == pytest.approx(placed)
    assert ledger["allocated_low"] == 0  # r4, the one low request, arrives after the 50%
    recorded = runner.invoke(
        app, ["shapes", "--db", str(db), "--model", "H20|A10", "--gpus", "1", "--json"]
    )
    assert json.loads(recorded.stdout)["shapes"][0]["gpus"] != ledger


# ------------------------------------------------------------ by-time replay

T0 = datetime(2026, 1, 1)
WINDOW = (T0, T0 + timedelta(minutes=100))  # 5% of it = 5 minutes
PAIR = make_nodes(("a", "T4", 2, 16.0, None, "s1"), ("b", "T4", 2, 16.0, None, "s1"))
NO_ALLOCATIONS = pl.DataFrame(
    schema={"alloc_id": pl.String, "node_id": pl.String, "gpus": pl.Float64,
            "cpus": pl.Float64, "start_time": pl.Datetime("us"), "end_time": pl.Datetime("us")}
)  # fmt: skip


def timed_requests(*rows: tuple[float, float, float | None]) -> pl.DataFrame:
    """rows of (gpus, submit minute, duration minutes or None)."""
    return pl.DataFrame(
        {
            "request_id": [f"r{i + 1}" for i in range(len(rows))],
            "gpus": [float(g) for g, _, _ in rows],
            "cpus": [1.0] * len(rows),
            "submit_time": [T0 + timedelta(minutes=m) for _, m, _ in rows],
            "duration_s": [None if d is None else d * 60.0 for _, _, d in rows],
        },
        schema_overrides={"duration_s": pl.Float64},
    )


def recorded(*rows: tuple[str, str, float, float, float | None]) -> pl.DataFrame:
    """rows of (alloc_id, node_id, gpus, start minute, end minute or None)."""
    return pl.DataFrame(
        {
            "alloc_id": [r[0] for r in rows],
            "node_id": [r[1] for r in rows],
            "gpus": [r[2] for r in rows],
            "cpus": [1.0] * len(rows),
            "start_time": [T0 + timedelta(minutes=r[3]) for r in rows],
            "end_time": [None if r[4] is None else T0 + timedelta(minutes=r[4]) for r in rows],
        },
        schema_overrides={"end_time": pl.Datetime("us"), "start_time": pl.Datetime("us")},
    )


def replay(requests, allocations=NO_ALLOCATIONS, policy="best-fit", queue="fifo",
           empty=False, seed=0, nodes=PAIR):  # fmt: skip
    options = PlacementOptions(policy=policy, seed=seed)
    return simulate_replay(nodes, allocations, requests, options, *WINDOW, empty, queue)


def waits(result) -> dict[str, float | None]:
    return dict(result.waits.select("request_id", "wait_s").iter_rows())


def at_minute(result, minute: float) -> dict[str, object]:
    return result.curve.filter(pl.col("instant") == T0 + timedelta(minutes=minute)).row(
        0, named=True
    )


def test_replay_request_waits_for_a_departure_and_starts_exactly_at_it() -> None:
    # r1 (2 GPUs, 10 min) -> a; r2 (2 GPUs, 20 min) -> b; the fleet is full.
    # r3 (2 GPUs) arrives at minute 1 and waits; r1 departs at minute 10 and
    # r3 starts at that very instant on a (wait 9 minutes), departing at 15.
    result = replay(timed_requests((2, 0, 10), (2, 0, 20), (2, 1, 5)))
    assert waits(result) == {"r1": 0.0, "r2": 0.0, "r3": 540.0}
    r3 = result.allocations.filter(pl.col("request_id") == "r3").row(0, named=True)
    assert r3["node_id"] == "a"
    assert r3["start_time"] == T0 + timedelta(minutes=10)
    assert r3["end_time"] == T0 + timedelta(minutes=15)
    assert at_minute(result, 5)["queued"] == 1
    assert at_minute(result, 5)["allocated_pct"] == 100.0
    # minute 10 is sampled before that instant's events: r3 still waits
    assert at_minute(result, 10)["queued"] == 1
    # minute 20: r3 left at 15, r2 leaves at 20 (after the sample)
    assert at_minute(result, 20) | {"instant": None} == {
        "instant": None, "instant_pct": 20.0, "allocated_pct": 50.0, "fragmented_pct": 0.0,
        "queued": 0, "started": 3, "failed": 0,
    }  # fmt: skip
    assert result.curve.height == 21 and result.curve["instant_pct"][-1] == 100.0
    assert (result.started, result.failed, result.arrived) == (3, 0, 3)


def test_replay_fifo_blocks_behind_the_head_and_backfill_does_not() -> None:
    # r1 (2 GPUs, 10 min) -> a; r2 (1 GPU) -> b, which keeps 1 free GPU.
    # r3 (2 GPUs, minute 1) must wait for a. r4 (1 GPU, minute 2) fits b:
    # FIFO keeps it behind r3 until minute 10 (both start when r1 leaves);
    # backfill starts it at once.
    requests = timed_requests((2, 0, 10), (1, 0, 30), (2, 1, 5), (1, 2, 5))
    fifo = replay(requests, queue="fifo")
    backfill = replay(requests, queue="backfill")
    assert waits(fifo) == {"r1": 0.0, "r2": 0.0, "r3": 540.0, "r4": 480.0}
    assert waits(backfill) == {"r1": 0.0, "r2": 0.0, "r3": 540.0, "r4": 0.0}
    assert at_minute(fifo, 5)["queued"] == 2 and at_minute(backfill, 5)["queued"] == 1
    assert at_minute(fifo, 5)["allocated_pct"] == 75.0
    assert at_minute(backfill, 5)["allocated_pct"] == 100.0
    r4 = fifo.allocations.filter(pl.col("request_id") == "r4").row(0, named=True)
    assert (r4["node_id"], r4["start_time"]) == ("b", T0 + timedelta(minutes=10))


def test_replay_rejects_what_fits_no_node_and_reports_what_still_waits() -> None:
    # r1 (4 GPUs in one pod) fits no 2-GPU node even empty: rejected on arrival,
    # it blocks nobody. r2 holds a for good; r3 and r4 (2 GPUs each) : r3 takes b,
    # r4 waits to the end and fails there.
    result = replay(timed_requests((4, 0, 5), (2, 0, None), (2, 1, None), (2, 2, None)))
    assert waits(result) == {"r1": None, "r2": 0.0, "r3": 0.0, "r4": None}
    assert (result.rejected, result.failed, result.started) == (1, 2, 2)
    assert at_minute(result, 50)["failed"] == 1  # the rejected one; r4 still waits
    assert at_minute(result, 100)["failed"] == 2 and at_minute(result, 100)["queued"] == 1


def test_replay_recorded_allocations_free_capacity_when_they_end() -> None:
    # x holds a until minute 10, y holds b for good; x0 ended and z starts
    # inside the window (neither occupies anything at the start).
    allocations = recorded(
        ("x", "a", 2.0, -60, 10), ("y", "b", 2.0, -60, None),
        ("x0", "a", 2.0, -60, 0), ("z", "a", 1.0, 5, None),
    )  # fmt: skip
    result = replay(timed_requests((2, 0, None)), allocations)
    assert waits(result) == {"r1": 600.0}
    assert at_minute(result, 0)["allocated_pct"] == 100.0
    assert at_minute(result, 5)["queued"] == 1
    assert at_minute(result, 100)["allocated_pct"] == 100.0  # r1 on a, y on b
    rows = result.allocations.select("alloc_id", "node_id", "recorded").rows()
    assert rows == [("x", "a", True), ("y", "b", True), ("replay/r1", "a", False)]


def test_replay_recorded_shares_are_packed_first_fit_decreasing() -> None:
    # On b: 0.7 -> GPU 0, 0.5 -> GPU 1, 0.3 -> GPU 0 (the first with room); the
    # whole GPU on a takes GPU 0. A 0.5 share then fits only b's GPU 1 or a.
    allocations = recorded(
        ("s3", "b", 0.3, -1, None), ("s5", "b", 0.5, -1, None),
        ("s7", "b", 0.7, -1, None), ("w", "a", 1.0, -1, None),
    )  # fmt: skip
    result = replay(timed_requests((0.5, 0, None)), allocations)
    index = dict(result.allocations.select("alloc_id", "gpu_index").iter_rows())
    assert index == {"s3": "0", "s5": "1", "s7": "0", "w": "0", "replay/r1": "1"}
    # best-fit: b is left with 0.0 + 0.0 free after the share, a with 1.0
    assert result.allocations.filter(pl.col("request_id") == "r1")["node_id"].to_list() == ["b"]
    assert at_minute(result, 0)["allocated_pct"] == 62.5  # 2.5 of 4 GPUs


def test_replay_empty_ignores_the_recorded_allocations() -> None:
    allocations = recorded(("x", "a", 2.0, -60, 10), ("y", "b", 2.0, -60, None))
    result = replay(timed_requests((2, 0, None)), allocations, empty=True)
    assert waits(result) == {"r1": 0.0}
    assert at_minute(result, 0)["allocated_pct"] == 0.0
    assert at_minute(result, 5)["allocated_pct"] == 50.0
    assert not result.allocations["recorded"].any()


def test_replay_is_deterministic_and_seeded() -> None:
    requests = timed_requests(*[(g, m, d) for g, m, d in
                                [(1, 0, 30), (0.5, 1, 20), (1, 2, None), (0.25, 3, 7),
                                 (2, 4, 9), (1, 5, 3), (0.5, 6, None)]])  # fmt: skip
    nodes = make_nodes(*[(f"n{i}", "T4", 2, 16.0, None, "s1") for i in range(6)])
    runs = [replay(requests, policy="random", seed=s, nodes=nodes) for s in (3, 3, 4)]
    assert runs[0].curve.equals(runs[1].curve)
    assert runs[0].allocations.equals(runs[1].allocations)
    assert not runs[0].allocations.equals(runs[2].allocations)
    for policy in POLICIES:
        one, two = (replay(requests, policy=policy, nodes=nodes) for _ in range(2))
        assert one.allocations.equals(two.allocations) and one.curve.equals(two.curve)
    curves = replay_curves(
        nodes, NO_ALLOCATIONS, requests, PlacementOptions(seed=3, seeds=2), *WINDOW,
        empty=True, policies=("random", "fgd"),
    )  # fmt: skip
    assert list(curves) == ["random", "fgd"]
    assert curves["random"].columns == [
        "instant_pct", "allocated_pct", "fragmented_pct", "queued", "started", "failed"
    ]  # fmt: skip


def test_replay_errors_name_the_problem() -> None:
    requests = timed_requests((1, 0, None))
    with pytest.raises(UsageError, match="queue"):
        replay(requests, queue="lifo")
    with pytest.raises(UsageError, match="window"):
        simulate_replay(PAIR, NO_ALLOCATIONS, requests, PlacementOptions(), T0, T0, False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from([0.25, 0.5, 0.7, 1.0, 2.0, 4.0]),
            st.integers(0, 99),
            st.one_of(st.none(), st.integers(0, 40)),
        ),
        min_size=1,
        max_size=14,
    ),
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),
            st.sampled_from([0.3, 0.6, 1.0, 1.5]),
            st.one_of(st.none(), st.integers(1, 99)),
        ),
        max_size=4,
    ),
    st.sampled_from(POLICIES),
    st.sampled_from(["fifo", "backfill"]),
)
def test_replay_never_exceeds_capacity_at_any_event(rows, held, policy, queue) -> None:
    requests = timed_requests(*rows).with_columns(gpus_per_pod=pl.lit(None, pl.Float64))
    allocations = recorded(*[(f"h{i}", n, g, -1, e) for i, (n, g, e) in enumerate(held)])
    result = replay(requests, allocations, policy=policy, queue=queue)
    frame = result.allocations
    instants = set(frame["start_time"].to_list()) | set(frame["end_time"].drop_nulls().to_list())
    for t in instants:
        active = frame.filter(
            (pl.col("start_time") <= t) & (pl.col("end_time").is_null() | (pl.col("end_time") > t))
        )
        used: dict[tuple[str, int], float] = defaultdict(float)
        for node, gpus, index in active.select("node_id", "gpus", "gpu_index").iter_rows():
            # whole GPUs first, then the GPU holding the fractional part (1.5 -> 1 + 0.5)
            gpus_of = [int(g) for g in index.split(",") if g]
            whole = int(gpus + 1e-9)
            for k, g in enumerate(gpus_of):
                used[(node, g)] += 1.0 if k < whole else gpus - whole
        assert all(v <= 1 + 1e-9 and g < 2 for (_, g), v in used.items()), (t, used)
    assert result.curve["allocated_pct"].max() <= 100.0 + 1e-9
    starts = result.waits.drop_nulls("start_time")
    assert (starts["wait_s"] >= 0).all()
    if queue == "fifo":  # strict FIFO: starts in arrival order
        assert starts["start_time"].is_sorted()
    assert result.started + result.failed == result.arrived


def test_whatif_placement_replays_by_time_when_no_fill_is_given(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from fleetaudit.api import StoreOptions
    from fleetaudit.api.placement_api import PlacementRun, whatif_placement
    from fleetaudit.cli import app

    tiny = Path(__file__).parent / "data" / "tiny"
    db = tmp_path / "tiny.duckdb"
    assert CliRunner().invoke(app, ["ingest", str(tiny), "--db", str(db)]).exit_code == 0
    run = PlacementRun(policies=("best-fit", "fgd"), since=timedelta(days=2), save_as="replayed")
    result = whatif_placement(StoreOptions(db=db), run)
    assert result.mode == "time" and result.fill_pct is None and result.gpus == 44
    # no calibration recorded yet: one runs now, and the next run reuses its choice
    assert result.queue in QUEUES[:4] and result.empty is False
    assert result.baseline is not None and result.baseline.chosen_by == "calibrated now"
    assert result.baseline.calibration is not None
    assert [f.discipline for f in result.baseline.calibration.fits] == list(QUEUES[:4])
    again = whatif_placement(StoreOptions(db=db), PlacementRun(policies=("best-fit",),
                                                               since=timedelta(days=2)))
    assert again.queue == result.queue and again.baseline is not None
    assert again.baseline.chosen_by == "calibration" and again.baseline.calibration is None
    assert result.start == result.at - timedelta(days=2)
    assert list(result.curves) == ["best-fit", "fgd"]
    curve = result.curves["best-fit"]
    assert curve.columns == [
        "instant_pct", "allocated_pct", "fragmented_pct", "queued", "started", "failed"
    ]  # fmt: skip
    assert curve["instant_pct"].to_list() == [5.0 * i for i in range(21)]
    assert curve["allocated_pct"].max() <= 100.0
    with pytest.raises(UsageError, match="--queue"):
        whatif_placement(StoreOptions(db=db), PlacementRun(queue="lifo"))
    for fill_pct in (None, 50.0):  # one rule for both modes
        with pytest.raises(UsageError, match="--seeds: must be 1 or more"):
            whatif_placement(StoreOptions(db=db), PlacementRun(seeds=0, fill_pct=fill_pct))


def random_replay_case(rng: random.Random) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """A small random fleet (2 models, 2 domains, memory), requests and recorded allocations."""
    node_rows = [
        (f"n{i}", rng.choice(["T4", "A10"]), rng.choice([1, 2, 4]), float(rng.choice([4, 8, 16])),
         rng.choice([None, 32.0, 64.0]), rng.choice(["s1", "s2", "s3"]))
        for i in range(rng.randint(2, 9))
    ]  # fmt: skip
    if rng.random() < 0.3:  # a node without GPUs, where pods without GPUs go first
        node_rows.append(("z-cpu", "cpu", 0, 8.0, None, "s1"))
    nodes = make_nodes(*node_rows)
    rows = []
    for i in range(rng.randint(5, 40)):
        gpus = rng.choice([0.0, 0.25, 0.3, 0.5, 0.7, 1.0, 1.0, 2.0, 2.0, 4.0, 6.0, 8.0])
        per_pod = None
        locality = None
        if gpus >= 2 and rng.random() < 0.5:
            per_pod = rng.choice([1.0, 2.0]) if gpus % 2 == 0 else 1.0
            locality = rng.choice([None, "any", "switch", "node"])
        rows.append(
            {
                "request_id": f"r{i:02d}",
                "gpus": gpus,
                "gpus_per_pod": per_pod,
                "locality": locality,
                "gpu_model": rng.choice([None, None, "T4", "A10"]),
                "cpus": float(rng.choice([0, 1, 2, 4])),
                "memory_gib": rng.choice([None, 8.0, 16.0]),
                "submit_time": T0 + timedelta(seconds=rng.randrange(0, 6000, 30)),
                "duration_s": rng.choice([None, 60.0, 300.0, 600.0, 1200.0, 3000.0]),
            }
        )
    requests = pl.DataFrame(
        rows,
        schema={"request_id": pl.String, "gpus": pl.Float64, "gpus_per_pod": pl.Float64,
                "locality": pl.String, "gpu_model": pl.String, "cpus": pl.Float64,
                "memory_gib": pl.Float64, "submit_time": pl.Datetime("us"),
                "duration_s": pl.Float64},
    )  # fmt: skip
    held = [
        (f"h{i}", rng.choice(node_rows)[0], rng.choice([0.3, 0.5, 1.0, 2.0]), -5,
         rng.choice([None, 10, 30, 60, 90]))
        for i in range(rng.randint(0, 6))
    ]  # fmt: skip
    return nodes, requests, recorded(*held)


@pytest.mark.parametrize("queue", ["backfill", "fifo"])
@pytest.mark.parametrize("policy", POLICIES)
def test_replay_backfill_precheck_gives_the_reference_results(policy, queue) -> None:
    # The reference: the plain queue that retries every waiting shape (fifo: the
    # head) at every departure. The pre-check that skips shapes the freed nodes
    # cannot host must give exactly its starts, nodes and GPUs, with the pass's
    # memo of pod shapes no freed node takes (memo) and without it.
    rng = random.Random(policy)
    waited = 0
    for case in range(60):
        nodes, requests, allocations = random_replay_case(rng)
        options = PlacementOptions(policy=policy, seed=case)
        empty = case % 4 == 0
        results = []
        for precheck, memo, index in (
            (False, False, False), (True, False, False), (True, True, False), (True, True, True)
        ):  # fmt: skip
            replay = Replay(nodes, allocations, requests, options, *WINDOW, empty, queue,
                            precheck=precheck, memo=memo, index=index)  # fmt: skip
            results.append(replay.run())
        reference = results[0]
        waited += int((reference.waits["wait_s"].fill_null(1.0) > 0).sum())
        for fast in results[1:]:
            _assert_same_replay(fast, reference, case)
    assert waited > 100  # the cases exercise the queue


def _assert_same_replay(
    result: ReplayResult, reference: ReplayResult, case: object = None
) -> None:
    """The two replays' frames, curves and counts are equal (``case`` in the message)."""
    assert result.allocations.equals(reference.allocations), case
    assert result.waits.equals(reference.waits), case
    assert result.curve.equals(reference.curve), case
    assert (result.started, result.failed, result.rejected) == (
        reference.started, reference.failed, reference.rejected
    ), case  # fmt: skip


def _mover(node_ids: list[str]) -> Callable[[ReplayView, int], None]:
    """A tick hook that moves up to two pods (alloc_id order) to the last node that
    takes them (node_id order, backwards): the same moves on the same state."""

    def on_tick(view: ReplayView, t: int) -> None:
        moved = 0
        for alloc_id in sorted(view.allocations(t)["alloc_id"].to_list()):
            if moved == 2:
                return
            moved += any(view.move(alloc_id, node) for node in reversed(node_ids))

    return on_tick


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31), policy=st.sampled_from(POLICIES), ticked=st.booleans())
def test_replay_index_gives_the_memo_replay(seed, policy, ticked) -> None:
    # The indexed backfill (index=True) against the memo's pass it replaces: every
    # start, wait and failure, and the curve; with compaction's moves at ticks too
    # (a move may give room no pass sees: an arrival of a waiting class is tried then).
    rng = random.Random(seed)
    nodes, requests, allocations = random_replay_case(rng)
    # many requests of few shapes, so that classes wait with several requests
    requests = pl.concat([requests, requests.with_columns(
        pl.col("request_id") + "b", pl.col("submit_time") + timedelta(seconds=15)
    )])  # fmt: skip
    ticks = [epoch_us(T0 + timedelta(minutes=m)) for m in range(7, 100, 9)] if ticked else []
    hook = _mover(sorted(nodes["node_id"].to_list())) if ticked else None
    empty = rng.random() < 0.25
    options = PlacementOptions(policy=policy, seed=seed % 7)
    memo, index = (
        Replay(nodes, allocations, requests, options, *WINDOW, empty, "backfill", index=on)
        .run(hook, ticks)
        for on in (False, True)
    )  # fmt: skip
    _assert_same_replay(index, memo)


@pytest.mark.parametrize("index, tries", [
    (True, ["r1", "r1", "r2"]),  # r2 queues untried behind r1, its class
    (False, ["r1", "r2", "r1", "r2"]),  # the memo's pass: r2 tried on arrival too
])  # fmt: skip
def test_the_index_queues_an_arrival_of_a_waiting_class_untried(index, tries) -> None:
    """One 2-GPU node, one GPU held by a recorded pod until minute 30; r1 and r2 (2 GPUs,
    the same class) arrive at minutes 1 and 2. r1 fails and waits; r2 cannot fit either
    (nothing left since r1 failed). At minute 30 r1 starts (the oldest) and takes the
    node; r2 starts at minute 40, when r1 ends."""
    nodes = make_nodes(("a", "T4", 2, 16.0, None, "s1"))
    requests = pl.DataFrame(
        {"request_id": ["r1", "r2"], "gpus": [2.0, 2.0], "cpus": [1.0, 1.0],
         "submit_time": [T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)],
         "duration_s": [600.0, 600.0]}
    )  # fmt: skip
    replay = Replay(nodes, recorded(("h", "a", 1.0, -5, 30)), requests,
                    PlacementOptions(policy="best-fit"), *WINDOW, False, "backfill",
                    index=index)  # fmt: skip
    tried: list[str] = []
    try_start = replay.try_start

    def counted(r: int, t: int, among=None) -> bool:
        tried.append(replay.workload.request_ids[r])
        return try_start(r, t, among)

    replay.try_start = counted  # type: ignore[method-assign]
    result = replay.run()
    assert tried == tries
    assert result.waits.select("request_id", "wait_s").rows() == [
        ("r1", 29 * 60.0), ("r2", 38 * 60.0),
    ]  # fmt: skip


# -- requests for no GPU ------------------------------------------------------------------

CPU_FLEET = pl.DataFrame(
    {"node_id": ["a-gpu", "z-cpu"], "gpu_model": ["H20", "cpu"], "gpus": [8, 0],
     "cpus": [64.0, 64.0]}
)  # fmt: skip


def test_a_request_without_gpus_prefers_a_node_without_gpus() -> None:
    """r1 asks 16 CPUs and no GPU, r2 8 GPUs x 8 CPUs (all 64 of a-gpu). First-fit would
    put r1 on a-gpu (first by id) and r2 would fail; r1 goes to z-cpu, and both fit."""
    requests = pl.DataFrame(
        {"request_id": ["r1", "r2"], "gpus": [0.0, 8.0], "cpus": [16.0, None],
         "cpus_per_gpu": [None, 8.0]}
    )  # fmt: skip
    result = simulate_fill(
        CPU_FLEET, requests, PlacementOptions(policy="first-fit", fill_pct=100, step_pct=100)
    )
    assert result.failed == 0
    assert result.allocations.select("request_id", "node_id").rows() == [
        ("r1", "z-cpu"), ("r2", "a-gpu"),
    ]  # fmt: skip


def test_a_request_without_gpus_still_takes_a_gpu_node_when_no_other_fits() -> None:
    requests = pl.DataFrame({"request_id": ["r1"], "gpus": [0.0], "cpus": [100.0]})
    fleet = CPU_FLEET.with_columns(pl.Series("cpus", [128.0, 64.0]))
    t0 = datetime(2026, 1, 1)
    none = pl.DataFrame(schema={"alloc_id": pl.String, "node_id": pl.String, "gpus": pl.Float64,
                                "cpus": pl.Float64, "start_time": pl.Datetime("us"),
                                "end_time": pl.Datetime("us")})  # fmt: skip
    timed = requests.with_columns(pl.lit(t0).alias("submit_time"), pl.lit(60.0).alias("duration_s"))
    result = simulate_replay(
        fleet, none, timed, PlacementOptions(policy="best-fit"), t0, t0 + timedelta(hours=1), True
    )
    assert result.allocations.select("request_id", "node_id").rows() == [("r1", "a-gpu")]


def test_by_time_fragmentation_weighs_shapes_by_their_gpus() -> None:
    """Three CPU-only requests and one 1-GPU request on an empty 8-GPU node. Weighed by
    pods (fill mode, the FGD paper), the CPU-only shapes weigh 3/4 and see every free
    GPU as fragment: 6 of 8 GPUs, 75%. Weighed by GPUs (by time), they weigh nothing,
    and no free GPU is a fragment for a 1-GPU pod: 0%."""
    requests = pl.DataFrame(
        {"request_id": ["c1", "c2", "c3", "g1"], "gpus": [0.0, 0.0, 0.0, 1.0],
         "cpus": [1.0, 1.0, 1.0, None]}
    )  # fmt: skip
    fleet = CPU_FLEET.filter(pl.col("node_id") == "a-gpu")
    empty_placement = pl.DataFrame(schema={"node_id": pl.String, "gpus": pl.Float64,
                                           "gpu_index": pl.String, "cpus": pl.Float64})  # fmt: skip
    assert fleet_fragmentation(fleet, empty_placement, requests) == pytest.approx(6.0)
    t0 = datetime(2026, 1, 1)
    timed = requests.with_columns(
        pl.lit(t0 + timedelta(minutes=30)).alias("submit_time"), pl.lit(60.0).alias("duration_s")
    )
    none = pl.DataFrame(schema={"alloc_id": pl.String, "node_id": pl.String, "gpus": pl.Float64,
                                "cpus": pl.Float64, "start_time": pl.Datetime("us"),
                                "end_time": pl.Datetime("us")})  # fmt: skip
    result = simulate_replay(
        fleet, none, timed, PlacementOptions(policy="fgd"), t0, t0 + timedelta(hours=1), True
    )
    assert result.curve["fragmented_pct"][0] == 0.0


def test_shuffle_and_in_order_exclude_each_other(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from fleetaudit.cli import app

    db = tmp_path / "tiny.duckdb"
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", str(Path(__file__).parent / "data" / "tiny"), "--db", str(db)]).exit_code == 0
    both = runner.invoke(
        app, ["whatif", "placement", "--db", str(db), "--fill", "50", "--shuffle", "--in-order"]
    )
    assert both.exit_code == 2 and "--in-order" in both.stderr


# -- the replay's memo against the engine before it, on generated fleets ------------------


@pytest.fixture(scope="module", params=[120, 400], ids=lambda n: f"{n}-nodes")
def generated_frames(request, tmp_path_factory):
    """Nodes, allocations and requests of a generated fleet (2 days), and its last day."""
    from fleetaudit.api import StoreOptions, ingest_paths, load_frames, reading, resolve_at
    from fleetaudit.inputs.generate import GenerateOptions, generate_fleet

    out = tmp_path_factory.mktemp(f"fleet{request.param}")
    generate_fleet(out / "data", GenerateOptions(nodes=request.param, days=2.0, telemetry_days=0))
    options = StoreOptions(out / "store.duckdb")
    ingest_paths(options, [out / "data"])
    with reading(options) as store:
        at = resolve_at(store, None)
        start = at - timedelta(days=1)
        nodes, allocations = load_frames(store, start, at)
        requests = store.query("requests_all")
    return nodes, allocations, requests, start, at


@pytest.mark.slow
@pytest.mark.parametrize("queue", QUEUES)
@pytest.mark.parametrize("policy", ["best-fit", "topology"])
def test_replay_memo_gives_the_same_replay_on_generated_fleets(generated_frames, policy, queue):
    # Every start (node, GPUs, time), every wait and failure and the curve, frame by frame.
    # The memo's pass and the indexed backfill (index, the default) against the engine
    # before both.
    nodes, allocations, requests, start, at = generated_frames
    if queue == "fifo":  # a gang the record never started would block the whole day
        requests = requests.filter(pl.col("start_time").is_not_null())
    options = PlacementOptions(policy=policy)
    before, *afters = (
        Replay(nodes, allocations, requests, options, start, at, False, queue, memo=memo,
               index=index).run()
        for memo, index in ((False, False), (True, False), (True, True))
        if index is False or queue != "fifo"
    )  # fmt: skip
    assert before.started > 100 and before.failed > 0  # the queue is at work
    for after in afters:
        _assert_same_replay(after, before)


def test_saved_placement_keeps_priorities_of_records_and_requests(tmp_path: Path) -> None:
    """tests/data/placement_priority: a recorded low allocation stays low (with its
    tenant, workload, checkpoint and sleepable flag); a replayed pod takes its
    request's priority and tenant, high where the request gives none."""
    import json

    import duckdb
    from typer.testing import CliRunner

    from fleetaudit.cli import app

    runner = CliRunner()
    folder = Path(__file__).parent / "data" / "placement_priority"
    db = tmp_path / "p.duckdb"
    assert runner.invoke(app, ["ingest", str(folder), "--db", str(db)]).exit_code == 0
    at = ["--at", "2026-01-01T03:00:00Z"]
    result = runner.invoke(app, ["whatif", "placement", "--db", str(db), *at, "--since", "2h",
                                 "--policy", "first-fit", "--save-as", "ff", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    with duckdb.connect(str(db), read_only=True) as connection:
        rows = connection.sql(
            "SELECT job_id, priority, workload, tenant, checkpoint_interval_s, sleepable "
            "FROM scenario_allocations WHERE scenario = 'ff' ORDER BY job_id"
        ).fetchall()
    assert rows == [
        ("j1", "low", "offline_inference", "ads", 600.0, True),
        ("r1", "high", None, "vision", None, False),
        ("r2", "low", None, "search", None, False),
        ("r3", "high", None, None, None, False),
    ]
    shapes = runner.invoke(app, ["shapes", "--db", str(db), "--scenario", "ff", *at,
                                 "--model", "H20", "--gpus", "1", "--json"])  # fmt: skip
    assert shapes.exit_code == 0, shapes.output
    ledger = json.loads(shapes.stdout)["shapes"][0]["gpus"]
    assert (ledger["allocated_high"], ledger["allocated_low"], ledger["idle"]) == (5, 3, 0)
    recorded = runner.invoke(app, ["shapes", "--db", str(db), *at, "--model", "H20",
                                   "--gpus", "1", "--json"])  # fmt: skip
    # by default, at the instant the state was saved (03:00), not at r2's end (03:30)
    default = runner.invoke(app, ["shapes", "--db", str(db), "--scenario", "ff",
                                  "--model", "H20", "--gpus", "1", "--json"])  # fmt: skip
    document = json.loads(default.stdout)
    assert document["at"] == "2026-01-01T03:00:00Z"
    assert document["shapes"][0]["gpus"] == ledger
    later = runner.invoke(app, ["shapes", "--db", str(db), "--scenario", "ff", "--at",
                                "2026-01-01T03:30:00Z", "--model", "H20", "--gpus", "1", "--json"])  # fmt: skip
    assert json.loads(later.stdout)["shapes"][0]["gpus"]["allocated_low"] == 2
    # the record alone: a1's 2 low GPUs (requests are not allocations)
    ledger = json.loads(recorded.stdout)["shapes"][0]["gpus"]
    assert (ledger["allocated_high"], ledger["allocated_low"], ledger["idle"]) == (0, 2, 6)


def test_by_time_the_recorded_fleet_is_the_baseline_row(tmp_path: Path) -> None:
    """One 8-GPU node; a1 holds 4 GPUs over the window's first half, a2 8 GPUs from 18:00.
    Requests: r1 submitted at 00:00, started at 06:00; r2 submitted at 12:00, never started.
    Recorded at 0%: 4 of 8 GPUs (50%), r1 waiting; at 50% (12:00): 0 allocated (a1 ended),
    r1 started, r2 waiting; at 100% (the window's end, 24:00): a2's 8 (100%), r2 still
    waiting, so failed 1."""
    from typer.testing import CliRunner

    from fleetaudit.cli import app

    folder = tmp_path / "fleet"
    folder.mkdir()
    (folder / "nodes.csv").write_text("node_id,gpu_model,gpus,cpus\nn1,H20,8,64\n")
    (folder / "allocations.csv").write_text(
        "alloc_id,node_id,gpus,cpus,priority,start_time,end_time\n"
        "a1,n1,4,4,high,2026-01-01T00:00:00Z,2026-01-01T12:00:00Z\n"
        "a2,n1,8,4,high,2026-01-01T18:00:00Z,\n"
    )
    (folder / "requests.csv").write_text(
        "request_id,submit_time,start_time,gpu_model,gpus\n"
        "r1,2026-01-01T00:00:00Z,2026-01-01T06:00:00Z,H20,8\n"
        "r2,2026-01-01T12:00:00Z,,H20,8\n"
    )
    runner = CliRunner()
    db = tmp_path / "p.duckdb"
    assert runner.invoke(app, ["ingest", str(folder), "--db", str(db), "-q"]).exit_code == 0
    args = ["whatif", "placement", "--db", str(db), "--at", "2026-01-02T00:00:00Z",
            "--since", "1d", "--policy", "best-fit"]  # fmt: skip
    document = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    curve = {p["instant_pct"]: p for p in document["recorded"]["curve"]}
    assert curve[0.0] == {"instant_pct": 0.0, "allocated_pct": 50.0, "queued": 1, "started": 0, "failed": 0}
    assert curve[50.0] == {"instant_pct": 50.0, "allocated_pct": 0.0, "queued": 1, "started": 1, "failed": 0}
    assert curve[100.0] == {"instant_pct": 100.0, "allocated_pct": 100.0, "queued": 1, "started": 1, "failed": 1}
    table = runner.invoke(app, args).stdout
    first = next(line for line in table.splitlines() if line.startswith("│ recorded"))
    assert "50.0/-" in first
    # two tables (the calibrated baseline's, then the policies'), each row led by its name
    rows = list(csv.DictReader(io.StringIO(runner.invoke(app, [*args, "--csv"]).stdout)))
    recorded = next(r for r in rows if r["table"] == "placement")
    assert recorded["policy"] == "recorded"  # the policies' columns: means over seeds
    assert (recorded["instant_pct"], recorded["allocated_pct"], recorded["fragmented_pct"]) == (
        "0.0", "50.0", ""
    )
    assert rows[0]["table"] == "calibration" and rows[0]["replay"] == "record"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 4), st.integers(0, 3), st.integers(0, 8), st.integers(0, 4),
            st.integers(0, 3), st.booleans(),
        ),
        min_size=1,
        max_size=12,
    ),
    st.integers(0, 4), st.integers(0, 3), st.sampled_from([0, 1, 2, 8]),
    st.sampled_from(["half", "whole"]), st.booleans(), st.sampled_from(["first", "best"]),
)
def test_compiled_single_pod_choice_is_the_masks_choice(
    rows: list[tuple[int, int, int, int, int, bool]],
    need_cpu: int, need_memory: int, count: int, share: str, blocking: bool, mode: str,
) -> None:  # fmt: skip
    """The compiled walk over a model set's nodes picks the node the vectorised masks
    pick (policies._Run.fits_in_set then _choose_in): the first that fits, or the
    least best-fit key with ties to the lowest index."""
    import numpy as np

    from fleetaudit.whatif.placement import fit_kernel
    from fleetaudit.whatif.placement.fleet import _U

    cpu, memory, whole, largest_q, key_q, blocked = (np.array(c) for c in zip(*rows, strict=True))
    cpu, memory, whole = cpu.astype(np.int64), memory.astype(np.int64), whole.astype(np.int64)
    largest = largest_q.astype(np.int64) * (_U // 2)  # 0, half, whole, ... GPU units
    key = key_q.astype(np.int64)  # few values: ties are common
    blocked = blocked.astype(bool) if blocking else np.zeros(0, dtype=bool)
    nodes = np.flatnonzero(np.arange(len(rows)) % 3 != 1).astype(np.int64)  # a model set
    need_share = _U // 2 if share == "half" and count else _U
    ok = (cpu[nodes] >= need_cpu) & (memory[nodes] >= need_memory)
    if count:
        ok &= largest[nodes] >= need_share if need_share < _U else whole[nodes] >= count
    if blocking:
        ok &= ~blocked[nodes]
    fit = nodes[ok]
    if not len(fit):
        expected = -1
    elif mode == "first":
        expected = int(fit[0])
    else:
        expected = int(fit[key[fit].argmin()])
    chosen = fit_kernel.choose(
        nodes, cpu, memory, largest, whole, blocked, key, need_cpu, need_memory, need_share,
        count, fit_kernel.FIRST if mode == "first" else fit_kernel.BEST,
    )  # fmt: skip
    assert chosen == expected


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node_rows, request_rows, st.lists(st.booleans(), min_size=12, max_size=12), st.booleans())
def test_compiled_rooms_are_the_engines_rooms(nodes_in, requests_in, placed_first, blocking) -> None:
    """After some requests are placed (some of them evictable), the compiled room of
    every request on every node (fit_kernel.refresh_rooms, as the replay's cache uses
    it) is _Run.room's, as is, and as if the evictable work were gone; and
    fit_kernel.any_may_fit says what the vectorised masks say."""
    import numpy as np

    from fleetaudit.whatif.placement import fit_kernel
    from fleetaudit.whatif.placement.fleet import _U, _prepare_fleet
    from fleetaudit.whatif.placement.policies import _Run
    from fleetaudit.whatif.placement.workload import _prepare_workload

    nodes = make_nodes(*[(f"n{i}", *row) for i, row in enumerate(nodes_in)])
    requests = make_requests(
        *[r[0] for r in requests_in],
        cpus=[r[1] for r in requests_in],
        memory_gib=[r[2] for r in requests_in],
        gpu_model=[r[3] for r in requests_in],
    )
    fleet = _prepare_fleet(nodes)
    w = _prepare_workload(requests, fleet, PlacementOptions(policy="first-fit"))
    run = _Run(fleet, w, "first-fit", 0)
    evictable = np.array(placed_first[: len(w.request_ids)], dtype=bool)
    run.track_preemptible(evictable)
    for r in range(len(w.request_ids)):
        if placed_first[-1 - r]:
            run.place(r)
    n_nodes = len(fleet.node_ids)
    if blocking:
        run.blocked = np.arange(n_nodes) % 2 == 1
    st_ = run.state
    every = np.arange(n_nodes, dtype=np.int64)
    for r in range(len(w.request_ids)):
        for after in (False, True):
            room, seen = np.zeros(n_nodes, np.int64), np.zeros(n_nodes, np.int64)
            lp = (run.lp_free, run.lp_cpu, run.lp_memory)
            total = fit_kernel.refresh_rooms(
                every, room, seen, st_.version, w.model_ok[w.allowed[r]],
                run.blocked if blocking else np.zeros(0, dtype=bool), st_.free, st_.cpu,
                st_.memory, *lp, after, int(w.pods[r]), int(w.cpu[r]), int(w.memory[r]),
                int(w.share[r]), int(w.count[r]),
            )  # fmt: skip
            expected = run.room(r, every, after_eviction=after)
            assert room.tolist() == expected.tolist()
            assert total == int(expected.sum())
        need = (int(w.count[r]) if w.share[r] >= _U else 0, int(w.share[r]) if w.count[r] else 0,
                int(w.cpu[r]), int(w.memory[r]))  # fmt: skip
        for evicts in (False, True):
            pre_whole, pre_largest = run.pre_at(every)
            whole = pre_whole if evicts else st_.whole
            largest = pre_largest if evicts else st_.largest
            cpu = st_.cpu + run.lp_cpu if evicts else st_.cpu
            memory = st_.memory + run.lp_memory if evicts else st_.memory
            masks = bool(((whole >= need[0]) & (largest >= need[1]) & (cpu >= need[2])
                          & (memory >= need[3])).any())  # fmt: skip
            compiled = fit_kernel.any_may_fit(
                every, st_.free, st_.cpu, st_.memory, st_.whole, st_.largest, run.lp_free,
                run.lp_cpu, run.lp_memory, *need, evicts,
            )  # fmt: skip
            assert compiled == masks
