"""One switch-domain key for every engine: a switch named like a node is still a switch.

The fleet in tests/data/domainkey has node ``leaf1`` (8 GPUs, no switch) and node
``n2`` (8 GPUs) on a switch also called ``leaf1``: two domains of one node each,
so a gang of two 8-GPU pods kept in one switch domain never fits.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fleetaudit.cli import app
from fleetaudit.model.denominators import schedulable
from fleetaudit.model.history import evaluate_history
from fleetaudit.model.occupancy import block_domains, node_state, switch_domain, switch_domains
from fleetaudit.model.shapes import evaluate, make_shape
from fleetaudit.whatif.compaction import CompactionOptions, compact
from fleetaudit.whatif.compaction_replay import LedgerError, replay_ledger
from fleetaudit.whatif.harvest import HarvestOptions, replay_harvest
from fleetaudit.whatif.placement import PlacementOptions, simulate_replay
from fleetaudit.whatif.reclaim import reclaimable
from tests.conftest import DATA
from tests.test_compaction import T, make_allocations, make_nodes, run

FIXTURE = DATA / "domainkey"


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def _store(tmp_path: Path, switch_of_n2: str = "leaf1") -> Path:
    """The fixture ingested, with n2's switch renamed to ``switch_of_n2``."""
    source = tmp_path / "input"
    shutil.copytree(FIXTURE, source)
    nodes = source / "nodes.csv"
    nodes.write_text(nodes.read_text().replace(",leaf1,healthy", f",{switch_of_n2},healthy"))
    db = tmp_path / "fleet.duckdb"
    result = _invoke("ingest", str(source), "--db", str(db))
    assert result.exit_code == 0, result.output
    return db


# ------------------------------------------------------------------ the key itself


def test_switch_and_node_keys_never_collide_and_block_keys_agree() -> None:
    nodes = pl.DataFrame(
        {"node_id": ["leaf1", "n2", "n3"], "switch_id": [None, "leaf1", "leaf1"],
         "block_id": [None, None, "b"]}
    )  # fmt: skip
    assert switch_domains(nodes).to_list() == ["node leaf1", "switch leaf1", "switch leaf1"]
    assert switch_domains(nodes).name == "domain"
    # without a block, a node's block domain is its switch domain, spelled the same
    assert block_domains(nodes).to_list() == ["node leaf1", "switch leaf1", "block b"]
    assert [switch_domain(s, n) for s, n in zip(nodes["switch_id"], nodes["node_id"])] == (
        switch_domains(nodes).to_list()
    )
    # a frame without switch_id: every node a domain by itself
    assert switch_domains(nodes.select("node_id")).to_list() == ["node leaf1", "node n2", "node n3"]


# ------------------------------------------------------------------ the engines on the fixture


@pytest.mark.parametrize(("switch", "instances"), [("leaf1", 0), ("sw", 0)])
def test_shapes_keeps_a_lone_node_out_of_the_switch_named_like_it(
    tmp_path: Path, switch: str, instances: int
) -> None:
    db = _store(tmp_path, switch)
    result = _invoke(
        "shapes", "--db", str(db), "--gpus", "16", "--gpus-per-pod", "8",
        "--locality", "switch", "--explain", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (shape,) = json.loads(result.stdout)["shapes"]
    assert shape["instances"] == instances
    # 16 idle GPUs, two 8-GPU slots in two one-node domains: all stranded by topology
    assert shape["gpus"]["usable"] == 0
    assert shape["gpus"]["stranded"]["topology"] == 16


def test_shapes_explain_names_the_level_of_each_domain(tmp_path: Path) -> None:
    db = _store(tmp_path)
    result = _invoke(
        "shapes", "--db", str(db), "--gpus", "16", "--gpus-per-pod", "8",
        "--locality", "switch", "--explain",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "H100/node leaf1" in result.stdout
    assert "H100/switch leaf1" in result.stdout


def test_report_schedulable_sees_two_domains(tmp_path: Path) -> None:
    db = _store(tmp_path)
    out = tmp_path / "report.json"
    result = _invoke("report", "--db", str(db), "--since", "1d", "--json", str(out))
    assert result.exit_code == 0, result.output
    figures = json.loads(out.read_text())["fleet"]["schedulable"]
    # 16 GPUs idle for 24 hours; the queued 2x8 switch gang fits no domain
    assert figures["idle_gpu_hours"] == 384.0
    assert figures["usable_gpu_hours"] == 0.0
    assert figures["stranded_gpu_hours"]["topology"] == 384.0


def test_by_time_placement_never_starts_the_gang(tmp_path: Path) -> None:
    db = _store(tmp_path)
    result = _invoke("whatif", "placement", "--db", str(db), "--since", "1d", "--json")
    assert result.exit_code == 0, result.output
    for policy in json.loads(result.stdout)["policies"]:
        assert {point["started"] for point in policy["curve"]} == {0.0}, policy["policy"]


def test_compaction_keeps_a_gang_out_of_the_node_named_like_its_switch() -> None:
    # g1 and g2 are one job on switch "leaf": g1 on x could only go to node "leaf",
    # which has no switch, so it is another domain and g1 stays.
    nodes = make_nodes(("x", 4, "leaf"), ("w", 8, "leaf"), ("leaf", 8, None))
    gang = make_allocations(
        ("g1", "x", 2, None, "job"), ("g2", "w", 8, None, "job"), ("y1", "leaf", 4)
    )
    assert run(nodes, gang).moves == ()
    move = {"alloc_id": "g1", "from": "x", "to": "leaf", "gpus": 2, "cpus": 1, "memory_gib": None}
    with pytest.raises(LedgerError, match="leaves its domain switch leaf"):
        replay_ledger(nodes, gang, T, [move])


# ------------------------------------------------------------------ renaming switches


T0 = datetime(2026, 1, 1, 12)
SHAPES = (
    make_shape("H20", 16, 8, locality="switch"),
    make_shape("H20", 8, 4, locality="switch"),
    make_shape("H20", 4, 4, locality="node"),
)
REQUESTS = pl.DataFrame(
    {"request_id": ["r1", "r2", "r3"], "gpu_model": ["H20"] * 3, "gpus": [8.0, 16.0, 4.0],
     "gpus_per_pod": [4.0, 8.0, 4.0], "cpus": [4.0] * 3, "locality": ["switch", "switch", "node"],
     "submit_time": [T0 - timedelta(minutes=m) for m in (50, 40, 20)],
     "duration_s": [600.0, None, 1200.0]},
)  # fmt: skip
NO_SLEEPS = pl.DataFrame(
    schema={"alloc_id": pl.String, "sleep_start": pl.Datetime("us"),
            "sleep_end": pl.Datetime("us")}
)  # fmt: skip


@st.composite
def fleets(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, str]]:
    """Nodes n0..nk on switches a, b, c or none; allocations; and an order-keeping
    renaming of the switches to node ids (where domains are taken in order, switches
    go by name, so a renaming that reorders them may change a tie-break)."""
    count = draw(st.integers(2, 6))
    node_ids = [f"n{i}" for i in range(count)]
    gpus = draw(st.lists(st.sampled_from([4, 8]), min_size=count, max_size=count))
    switches = draw(
        st.lists(st.sampled_from([None, "a", "b", "c"]), min_size=count, max_size=count)
    )
    used = sorted({s for s in switches if s is not None})
    targets = sorted(draw(st.lists(st.sampled_from(node_ids), min_size=len(used),
                                   max_size=len(used), unique=True)))  # fmt: skip
    rename = dict(zip(used, targets, strict=True))
    nodes = pl.DataFrame(
        {"node_id": node_ids, "gpu_model": ["H20"] * count, "gpus": gpus,
         "cpus": [64.0] * count, "memory_gib": [None] * count, "switch_id": switches,
         "health": ["healthy"] * count},
        schema={"node_id": pl.String, "gpu_model": pl.String, "gpus": pl.Int64,
                "cpus": pl.Float64, "memory_gib": pl.Float64, "switch_id": pl.String,
                "health": pl.String},
    )  # fmt: skip
    rows = []
    for i, node in enumerate(node_ids):
        for j, used_gpus in enumerate(draw(st.lists(st.sampled_from([1, 2, 4]), max_size=2))):
            if sum(r[3] for r in rows if r[2] == node) + used_gpus > gpus[i]:
                continue
            job = draw(st.sampled_from([f"{node}-{j}", "gang", "gang2"]))
            ends = draw(st.sampled_from([None, T0 + timedelta(minutes=30)]))
            priority = draw(st.sampled_from(["high", "low"]))
            rows.append((f"{node}-{j}", job, node, float(used_gpus), 4.0, None, priority,
                         T0 - timedelta(hours=2), ends))  # fmt: skip
    allocations = pl.DataFrame(
        rows,
        schema={"alloc_id": pl.String, "job_id": pl.String, "node_id": pl.String,
                "gpus": pl.Float64, "cpus": pl.Float64, "memory_gib": pl.Float64,
                "priority": pl.String, "start_time": pl.Datetime("us"),
                "end_time": pl.Datetime("us")},
        orient="row",
    )  # fmt: skip
    return nodes, allocations, rename


def figures(nodes: pl.DataFrame, allocations: pl.DataFrame) -> dict[str, Any]:
    """Every engine's figures that do not print a domain name."""
    out: dict[str, Any] = {}
    state = node_state(nodes, allocations, T0)
    for i, shape in enumerate(SHAPES):
        evaluation = evaluate(state, shape)
        out[f"shapes{i}"] = (evaluation.instances, evaluation.ledger.as_json())
        reclaim = reclaimable(nodes, allocations, T0, shape, evaluation)
        out[f"reclaim{i}"] = (reclaim.instances, reclaim.lost_gpu_hours, reclaim.victims)
        history = evaluate_history(
            nodes, allocations, shape, T0, timedelta(hours=1), timedelta(minutes=30)
        )
        out[f"history{i}"] = history.series["instances"].to_list()
    instants = [T0 - timedelta(minutes=30), T0]
    sched = schedulable(nodes, allocations, [(s, 1) for s in SHAPES], instants, timedelta(hours=1))
    out["schedulable"] = (sched.steps.rows(), sched.shapes)
    result = compact(nodes, allocations, T0, SHAPES, CompactionOptions())
    out["compaction"] = (
        [(m.alloc_id, m.source, m.destination) for m in result.moves],
        result.before,
        result.after,
        result.bound_free_nodes,
    )
    for policy in ("first-fit", "topology"):
        replay = simulate_replay(
            nodes, allocations, REQUESTS, PlacementOptions(policy=policy),
            T0 - timedelta(hours=1), T0, False,
        )  # fmt: skip
        out[f"placement {policy}"] = (
            replay.curve.rows(),
            replay.allocations.select("request_id", "node_id", "gpus").rows(),
        )
    harvest = replay_harvest(
        nodes, allocations, NO_SLEEPS, HarvestOptions(), T0 - timedelta(hours=2), T0
    )
    out["harvest"] = (harvest.jobs.rows(), harvest.segments.rows(), harvest.victims.rows())
    return out


@settings(max_examples=25, deadline=None)
@given(fleets())
def test_renaming_switches_to_node_ids_changes_no_figure(
    fleet: tuple[pl.DataFrame, pl.DataFrame, dict[str, str]],
) -> None:
    nodes, allocations, rename = fleet
    renamed = nodes.with_columns(pl.col("switch_id").replace(rename))
    assert figures(renamed, allocations) == figures(nodes, allocations)
