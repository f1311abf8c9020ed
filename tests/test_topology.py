"""--topology FILE for every format, the stored levels, and `block` locality in every engine."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from fleetaudit.cli import app
from fleetaudit.errors import InputError
from fleetaudit.ingest import IngestOptions, ingest
from fleetaudit.ingest.topology import deal_switches, read_topology
from fleetaudit.store import Store, open_store
from tests.conftest import write

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
    [("topology.csv", "csv", "spine_id"), ("topology.conf", "topology.conf", "level2_id")],
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
    assert "1 node(s) of the file are not among this call's nodes" in text


def test_an_old_store_without_block_id_still_reads(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    with open_store(db) as s:
        ingest(s, [DATA / "nodes.csv"])
        s.run("ALTER TABLE nodes DROP COLUMN block_id")
    result = runner.invoke(app, ["shapes", "--db", str(db), "--model", "H100", "--gpus", "16",
                                 "--locality", "block", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["shapes"][0]["instances"] == 0
