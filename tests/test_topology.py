"""--topology FILE for every format, the stored levels, and `block` locality in every engine."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fleetaudit.cli import app
from fleetaudit.core.errors import InputError
from fleetaudit.inputs.ingest import IngestOptions, ingest
from fleetaudit.inputs.ingest.topology import deal_switches, read_topology
from fleetaudit.model import occupancy
from fleetaudit.model.shapes import evaluate, make_shape
from fleetaudit.model.store import Store, open_store
from tests.conftest import write
from tests.test_shapes import T, fleets

DATA = Path(__file__).parent / "data" / "topology"
runner = CliRunner()


def levels(store: Store) -> list[tuple[object, ...]]:
    return store.sql("SELECT node_id, switch_id, block_id FROM nodes ORDER BY node_id").rows()


# -- reading and applying the file ------------------------------------------------------------

EXPECTED = [
    ("cpu01", None, None),
    ("gpu01", "leaf1", "blockA"),
    ("gpu02", "leaf1", "blockA"),
    ("gpu03", "leaf2", "blockA"),
    ("gpu04", "leaf2", "blockA"),
    ("gpu05", None, None),
]


@pytest.mark.parametrize(
    ("name", "kind", "top_column"),
    # the CSV's spine_id column is stored by its depth, as topology.conf's third level
    [("topology.csv", "csv", "level2_id"), ("topology.conf", "topology.conf", "level2_id")],
)
def test_csv_and_topology_conf_place_the_same_nodes(
    store: Store, name: str, kind: str, top_column: str
) -> None:
    result = ingest(store, [DATA / "nodes.csv"], IngestOptions(topology=DATA / name))
    assert levels(store) == EXPECTED
    # the third level is kept too, as a text column of nodes
    tops = store.sql(f"SELECT DISTINCT {top_column} FROM nodes WHERE {top_column} IS NOT NULL")
    assert tops.rows() == [("spine1",)]
    summary = result.topology
    assert summary is not None and summary.kind == kind
    # gpu01-04 placed; gpu05 and cpu01 not named; ghost99 named but no node of the call
    assert (summary.placed, summary.missing, summary.unknown) == (4, 2, 1)
    assert summary.unknown_names == ("ghost99",)
    assert (summary.switches, summary.blocks) == (2, 1)


def test_a_node_the_file_does_not_name_keeps_its_own_row(tmp_path: Path, store: Store) -> None:
    nodes = write(
        tmp_path / "nodes.csv",
        "node_id,gpu_model,gpus,cpus,switch_id,block_id\n"
        "a,H100,8,64,rack1,hall1\n"
        "b,H100,8,64,rack1,hall1\n",
    )
    topo = write(tmp_path / "topo.csv", "node_id,switch_id\na,leaf9\n")
    result = ingest(store, [nodes], IngestOptions(topology=topo))
    # the file replaces a's levels (no block column: no block); b keeps its row's values
    assert levels(store) == [("a", "leaf9", None), ("b", "rack1", "hall1")]
    assert result.topology is not None and result.topology.missing == 1


def test_names_that_repeat_under_different_parents_are_qualified(
    tmp_path: Path, store: Store
) -> None:
    nodes = write(
        tmp_path / "nodes.csv",
        "node_id,gpu_model,gpus,cpus\na,H100,8,64\nb,H100,8,64\nc,H100,8,64\n",
    )
    # Kubernetes-style labels: sub-block "sb1" exists in two blocks
    topo = write(
        tmp_path / "topo.csv",
        "node_id,switch_id,block_id\na,sb1,b1\nb,sb1,b2\nc,sb2,b2\n",
    )
    ingest(store, [nodes], IngestOptions(topology=topo))
    assert levels(store) == [("a", "b1/sb1", "b1"), ("b", "b2/sb1", "b2"), ("c", "sb2", "b2")]


def test_crux_topo_csv_deals_the_nodes_of_any_format(store: Store) -> None:
    result = ingest(store, [DATA / "nodes.csv"], IngestOptions(topology=DATA / "crux.csv"))
    # 6 nodes over 4 hosts: P1-S1 2/4 -> 3, P1-S2 and P2-S1 1.5 each -> 2 and 1 (largest
    # remainder, ties to the first); GPU nodes by (model, id) first, the CPU node last
    assert levels(store) == [
        ("cpu01", "P2-S1", "P2"),
        ("gpu01", "P1-S1", "P1"),
        ("gpu02", "P1-S1", "P1"),
        ("gpu03", "P1-S1", "P1"),
        ("gpu04", "P1-S2", "P1"),
        ("gpu05", "P1-S2", "P1"),
    ]
    assert store.sql("SELECT DISTINCT level2_id FROM nodes").rows() == [("G1",)]
    assert result.topology is not None and result.topology.missing == 0


def test_deal_switches_keeps_its_doctest_order() -> None:
    topo = pl.DataFrame({"PSW": ["P2", "P10", "P10"], "ASW": ["S1", "S1", "S2"]})
    nodes = pl.DataFrame({"node_id": ["c", "a", "b"], "gpu_model": ["T4", "A10", None]})
    dealt = deal_switches(nodes, topo)
    # natural order: P2 before P10; nodes by model with nulls last: a (A10), c (T4), b (none)
    assert dealt.rows() == [
        ("a", "P2-S1", "P2", None),
        ("c", "P10-S1", "P10", None),
        ("b", "P10-S2", "P10", None),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("host,rack\nn1,r1\n", "not a topology file"),
        ("node_id,switch_id,gpus\nn1,s1,8\n", "column gpus: a topology column cannot be"),
        ("node_id,switch_id\nn1,s1\n,s2\n", "row 2, column node_id: node_id is empty"),
        ("SwitchName=s0 Nodes=n[3-1]\n", "line 1:"),
        ("SwitchName=s0 Nodes=n1\nNodes=n2\n", "line 2: expected SwitchName="),
    ],
)
def test_a_bad_topology_file_fails_naming_it(
    tmp_path: Path, db_path: Path, text: str, message: str
) -> None:
    topo = write(tmp_path / "topo.txt", text)
    with open_store(db_path) as s, pytest.raises(InputError) as caught:
        ingest(s, [DATA / "nodes.csv"], IngestOptions(topology=topo))
    assert str(caught.value).startswith(str(topo))
    assert message in str(caught.value)
    with open_store(db_path) as s:  # nothing half-written
        assert s.row_count("nodes") == 0


def test_a_call_without_nodes_cannot_take_a_topology(tmp_path: Path, store: Store) -> None:
    ingest(store, [DATA / "nodes.csv"])
    requests = write(
        tmp_path / "requests.csv", "request_id,submit_time,gpus\nr1,2026-01-01T00:00:00,8\n"
    )
    with pytest.raises(InputError, match="applies to the nodes of the same call"):
        ingest(store, [requests], IngestOptions(topology=DATA / "topology.csv"))
    assert store.row_count("requests") == 0


def test_dual_rail_nodes_are_counted() -> None:
    topo = read_topology(DATA / "topology.conf")
    assert topo.duplicates == 0
    assert topo.levels.filter(pl.col("node_id") == "gpu03").rows() == [
        ("gpu03", "leaf2", "blockA", "spine1")
    ]


def test_cli_ingest_prints_the_topology_summary(tmp_path: Path) -> None:
    db = tmp_path / "fleet.duckdb"
    result = runner.invoke(
        app,
        ["ingest", str(DATA / "nodes.csv"), "--topology", str(DATA / "topology.conf"),
         "--db", str(db)],
    )
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())  # the terminal may wrap the line
    assert "4 node(s) placed in 2 switch(es) and 1 block(s)" in text
    assert "2 node(s) not in the file keep their own domain" in text
    assert "1 node(s) of the file are not among this call's nodes (ghost99)" in text


def test_an_old_store_without_block_id_still_reads(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    with open_store(db) as s:
        ingest(s, [DATA / "nodes.csv", DATA / "requests.csv"])
        s.run("ALTER TABLE nodes DROP COLUMN block_id")
    result = runner.invoke(app, ["shapes", "--db", str(db), "--model", "H100", "--gpus", "16",
                                 "--locality", "block", "--json"])
    assert result.exit_code == 0, result.output
    # no switch and no block: every node is a domain by itself
    assert json.loads(result.stdout)["shapes"][0]["instances"] == 0
    with open_store(db) as s:  # a writer adds the column back
        assert "block_id" in s.column_types("nodes")


# -- `block` locality in every engine ------------------------------------------------------------
#
# The fixture fleet: leaf1 = gpu01 + gpu02 and leaf2 = gpu03 + gpu04 (16 GPUs each) under
# blockA; gpu05 (8 GPUs) named by no file, so it is a switch and a block domain by itself.

AT = "2026-03-01T00:00:00"
ALLOC_HEADER = (
    "alloc_id,job_id,node_id,gpus,cpus,priority,start_time,end_time,checkpoint_interval_s\n"
)


def fleet(tmp_path: Path, allocations: str = "", requests: str | None = None) -> Path:
    """A store of the fixture fleet (topology.csv applied), then allocations and requests."""
    db = tmp_path / "fleet.duckdb"
    with open_store(db) as s:
        ingest(s, [DATA / "nodes.csv"], IngestOptions(topology=DATA / "topology.csv"))
        files = [DATA / "requests.csv"] if requests is None else [
            write(tmp_path / "requests.csv", requests)
        ]
        if allocations:
            files.insert(0, write(tmp_path / "allocations.csv", ALLOC_HEADER + allocations))
        ingest(s, files)
    return db


def cli_json(*args: object) -> dict:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    ("gpus", "locality", "instances", "topology"),
    [
        # 32 GPUs = 4 pods of 8: no leaf switch has 4 free nodes, blockA has
        (32, "switch", 0, 40),  # every slot stranded: 2 + 2 in the leaves, 1 on gpu05
        (32, "block", 1, 8),  # blockA's 4 slots make one; gpu05's slot is left
        (32, "any", 1, 8),
        (16, "switch", 2, 8),  # one per leaf
        (16, "block", 2, 8),  # blockA's 4 slots make two; gpu05 alone cannot
        (40, "block", 0, 40),
    ],
)
def test_block_locality_counts_instances_per_block(
    tmp_path: Path, gpus: int, locality: str, instances: int, topology: int
) -> None:
    db = fleet(tmp_path)
    doc = cli_json("shapes", "--db", db, "--model", "H100", "--gpus", gpus,
                   "--gpus-per-pod", 8, "--locality", locality, "--json")
    entry = doc["shapes"][0]
    assert entry["shape"]["locality"] == locality
    assert entry["instances"] == instances
    g = entry["gpus"]
    assert (g["installed"], g["idle"], g["usable"]) == (40, 40, instances * gpus)
    assert g["stranded"] == {"interval": 0, "fragment": 0, "cpu_memory": 0, "topology": topology}


def test_a_block_never_merges_with_a_node_or_switch_of_the_same_name(
    tmp_path: Path, store: Store
) -> None:
    nodes = write(
        tmp_path / "nodes.csv",
        "node_id,gpu_model,gpus,cpus,switch_id,block_id\n"
        "x,H100,8,64,s1,blk\n"  # block blk: one slot
        "blk,H100,8,64,,\n"  # a node named blk, no switch: a block by itself
        "y,H100,8,64,blk,\n",  # a switch named blk, no block: its switch's domain
    )
    requests = write(tmp_path / "requests.csv", f"request_id,submit_time,gpus\nr,{AT},1\n")
    ingest(store, [nodes, requests])
    domains = occupancy.block_domains(store.query("nodes")).to_list()
    assert domains == ["node blk", "block blk", "switch blk"]  # by node_id: blk, x, y


def test_history_and_queued_block_shapes(tmp_path: Path) -> None:
    db = fleet(tmp_path)
    # without a shape: the queued r1 (32 GPUs, block, 1h): one instance at every instant
    doc = cli_json("shapes", "--db", db, "--history", "2h", "--step", "1h", "--json")
    (entry,) = doc["shapes"]
    assert entry["shape"]["locality"] == "block" and entry["queued"] == 1
    assert entry["instances"] == 1 and entry["history"]["p_start"] == 1.0
    doc = cli_json("shapes", "--db", db, "--model", "H100", "--gpus", 32, "--locality", "switch",
                   "--history", "2h", "--step", "1h", "--json")
    assert doc["shapes"][0]["history"]["p_start"] == 0.0


def test_reclaim_with_block_locality(tmp_path: Path) -> None:
    # a low-priority 8-GPU job fills gpu01: blockA keeps 3 slots, so no 32-GPU gang
    db = fleet(tmp_path, "a2,j2,gpu01,8,32,low,2026-02-28T20:00:00,,3600\n")
    doc = cli_json("shapes", "--db", db, "--reclaim", "--json")
    (entry,) = doc["shapes"]
    assert entry["instances"] == 0
    reclaimable = entry["reclaimable"]
    assert reclaimable["instances"] == 1 and reclaimable["victims"] == 1  # a2


def test_report_counts_block_shapes_like_shapes(tmp_path: Path) -> None:
    db = fleet(tmp_path)
    out = tmp_path / "report.json"
    result = runner.invoke(app, ["report", "--db", str(db), "--since", "2h", "--step", "1h",
                                 "--json", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    # an idle fleet over 2 h: the queued 32-GPU block shape uses blockA's 32 GPUs, and
    # gpu05's 8 are stranded by topology (with switch locality all 40 would be)
    schedulable = doc["fleet"]["schedulable"]
    assert schedulable["idle_gpu_hours"] == 80.0
    assert schedulable["usable_gpu_hours"] == 64.0
    assert schedulable["stranded_gpu_hours"]["topology"] == 16.0
    (shape,) = doc["shapes"]
    assert shape["shape"]["locality"] == "block" and shape["p_start"] == 1.0


def test_compaction_counts_block_instances(tmp_path: Path) -> None:
    # gpu01 full; gpu02 and gpu03 half full; gpu04 and gpu05 free
    db = fleet(
        tmp_path,
        "a1,j1,gpu02,4,16,high,2026-02-28T00:00:00,,\n"
        "a2,j2,gpu01,8,32,high,2026-02-28T00:00:00,,\n"
        "a3,j3,gpu03,4,16,high,2026-02-28T00:00:00,,\n",
    )
    doc = cli_json("whatif", "compaction", "--db", db, "--model", "H100", "--gpus", 16,
                   "--gpus-per-pod", 8, "--locality", "block", "--json")
    # moving a1 onto gpu03 frees gpu02: blockA then has gpu02 + gpu04, one 16-GPU gang
    assert [(m["alloc_id"], m["from"], m["to"]) for m in doc["moves"]] == [
        ("a1", "gpu02", "gpu03")
    ]
    before = {e["shape"]["locality"]: e["instances"] for e in doc["before"]["instances"]}
    after = {e["shape"]["locality"]: e["instances"] for e in doc["after"]["instances"]}
    assert (before["block"], after["block"]) == (0, 1)


def test_placement_keeps_block_gangs_in_one_block(tmp_path: Path) -> None:
    requests = (
        "request_id,submit_time,gpu_model,gpus,gpus_per_pod,locality,duration_s\n"
        "r1,2026-02-28T22:00:00,H100,32,8,block,7200\n"  # fits blockA
        "r2,2026-02-28T23:00:00,H100,32,8,block,7200\n"  # blockA is taken: waits
        "r3,2026-02-28T23:00:00,H100,32,8,switch,7200\n"  # no leaf holds 4 pods: fails
    )
    db = fleet(tmp_path, requests=requests)
    doc = cli_json("whatif", "placement", "--db", db, "--empty", "--since", "3h", "--at", AT,
                   "--policy", "first-fit", "--policy", "topology", "--json")
    for policy in doc["policies"]:
        last = policy["curve"][-1]
        assert last["allocated_pct"] == 80.0  # r1's 32 of 40 GPUs
        assert last["started"] == 1
    # fill, in list order: r1 alone brings the demand to 80% of the 40 GPUs, and blockA holds it
    doc = cli_json("whatif", "placement", "--db", db, "--fill", 80, "--in-order", "--policy", "best-fit",
                   "--policy", "fgd", "--json")
    for policy in doc["policies"]:
        assert policy["curve"][-1] == {
            "arrived_pct": 80.0, "allocated_pct": 80.0, "fragmented_pct": 0.0, "failed": 0.0
        }


def test_a_shapes_file_may_name_block_locality(tmp_path: Path) -> None:
    db = fleet(tmp_path)
    shapes = write(
        tmp_path / "shapes.csv",
        "gpu_model,gpus,gpus_per_pod,locality\nH100,32,8,block\nH100,32,8,switch\n",
    )
    doc = cli_json("shapes", "--db", db, "--shapes", shapes, "--json")
    assert [(e["shape"]["locality"], e["instances"]) for e in doc["shapes"]] == [
        ("block", 1), ("switch", 0)
    ]


def test_harvesting_runs_on_a_fleet_with_blocks(tmp_path: Path) -> None:
    db = fleet(
        tmp_path,
        "a1,j1,gpu02,4,16,low,2026-02-28T20:00:00,2026-02-28T22:00:00,600\n"
        "a2,j1,gpu03,4,16,low,2026-02-28T20:00:00,2026-02-28T22:00:00,600\n",
    )
    doc = cli_json("whatif", "harvesting", "--db", db, "--since", "6h", "--policy", "spotgpu",
                   "--json")
    assert doc["schema"] == "fleetaudit.harvesting/1"


# -- properties: a block holds its switches --------------------------------------------------


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fleet=fleets(),
    blocks=st.lists(st.sampled_from(["B1", "B2", None]), min_size=3, max_size=3),
    loose=st.lists(st.sampled_from(["B1", None]), min_size=6, max_size=6),
    gpus=st.sampled_from([8, 16, 32]),
    per_pod=st.sampled_from([2, 4, 8]),
    model=st.sampled_from(["H20", "A10", None]),
)
def test_block_instances_lie_between_switch_and_any(  # type: ignore[no-untyped-def]
    fleet, blocks, loose, gpus, per_pod, model
) -> None:
    nodes, allocations = fleet
    # each switch sits in one block (or none); a node without a switch may have a block
    parent = {"a": blocks[0], "b": blocks[1]}
    nodes = nodes.with_columns(
        pl.Series(
            "block_id",
            [parent[s] if s is not None else loose[i] for i, s in enumerate(nodes["switch_id"])],
            dtype=pl.String,
        )
    )
    state = occupancy.node_state(nodes, allocations, T)
    count = {}
    for locality in ("switch", "block", "any"):
        e = evaluate(state, make_shape(model, gpus, per_pod, locality=locality))
        ledger = e.ledger
        assert ledger.stranded is not None
        assert ledger.idle == ledger.usable + sum(ledger.stranded.values())
        count[locality] = e.instances
    assert count["switch"] <= count["block"] <= count["any"]


def test_the_block_plugin_s_blocks_are_switch_domains(tmp_path: Path, store: Store) -> None:
    conf = write(
        tmp_path / "topology.conf",
        "BlockSizes=2,4\nBlockName=b1 Nodes=gpu[01-02]\nBlockName=b2 Nodes=gpu[03-04]\n",
    )
    result = ingest(store, [DATA / "nodes.csv"], IngestOptions(topology=conf))
    assert levels(store)[1:5] == [
        ("gpu01", "b1", None), ("gpu02", "b1", None), ("gpu03", "b2", None), ("gpu04", "b2", None)
    ]
    assert result.topology is not None and result.topology.kind == "topology.conf"
    # without a block_id, a node's block domain is its switch's
    assert occupancy.block_domains(store.query("nodes")).to_list()[1:5] == [
        "switch b1", "switch b1", "switch b2", "switch b2"
    ]


def test_a_later_call_without_the_topology_keeps_it(tmp_path: Path, store: Store) -> None:
    first = write(
        tmp_path / "day1" / "nodes.csv",
        "node_id,gpu_model,gpus,cpus,switch_id\na,H100,8,64,label-sw\nb,H100,8,64,label-sw\n",
    )
    topo = write(tmp_path / "topo.csv", "node_id,switch_id,block_id\na,leaf1,blk1\n")
    ingest(store, [first], IngestOptions(topology=topo))
    # day 2: the same nodes again, their rows carrying the labels' switch, no --topology
    second = write(
        tmp_path / "day2" / "nodes.csv",
        "node_id,gpu_model,gpus,cpus,switch_id\na,H100,8,48,label-sw\nb,H100,8,64,label-sw\n",
    )
    ingest(store, [second])
    # a keeps the file's place (and takes day 2's CPUs); b was never placed by a file
    assert levels(store) == [("a", "leaf1", "blk1"), ("b", "label-sw", None)]
    assert store.scalar("SELECT cpus FROM nodes WHERE node_id = 'a'") == 48
    # a later topology moves it again
    ingest(store, [second], IngestOptions(topology=write(tmp_path / "t2.csv",
                                                         "node_id,switch_id\na,leaf2\n")))
    ingest(store, [second])
    assert levels(store)[0] == ("a", "leaf2", None)


def test_an_unbalanced_tree_is_aligned_from_the_root(tmp_path: Path) -> None:
    conf = write(
        tmp_path / "topology.conf",
        "SwitchName=s0 Nodes=n1\nSwitchName=s1 Nodes=n2\n"
        "SwitchName=mid Switches=s0\nSwitchName=top Switches=mid,s1\n",
    )
    topo = read_topology(conf)
    got = topo.levels.sort("node_id").rows()
    # n1: s0 <- mid <- top; n2: s1 <- top, so top is level 2 for both and n2 has no block
    # (its block domain is its switch), never block "top" beside n1's block "mid"
    assert got == [("n1", "s0", "mid", "top"), ("n2", "s1", None, "top")]
