"""``ingest --topology FILE``: the switch hierarchy of the nodes, for every format.

FILE is recognised by its content, one of three kinds:

- ``csv``: a CSV with a header holding ``node_id`` and ``switch_id`` (the leaf
  switch), optionally ``block_id`` (the level above it) and further level
  columns above that, in header order. Those further columns are stored on the
  nodes as extra text columns named by depth, ``level2_id``, ``level3_id`` ...,
  as topology.conf's levels are.
- ``topology.conf``: Slurm's file (:mod:`fleetaudit.inputs.ingest.topology_conf`). A
  node's chain, leaf first, gives ``switch_id``, then ``block_id``, then
  ``level2_id``, ``level3_id`` ... for deeper trees. Under the block plugin a
  node's block is its ``switch_id``.
- ``crux``: the Crux ``topo.csv`` of the public Alibaba trace (``PSW``, ``ASW``
  per host, optionally ``DSW``). Its hosts are not node ids, so the nodes are
  dealt into its PSW+ASW domains (:func:`deal_switches`); ``block_id`` is the
  PSW and ``level2_id`` the DSW.

The topology applies once, generically, to the nodes the ingest call loaded,
whatever the format (:func:`apply_topology`). A node the file names gets the
file's levels (an empty cell is no switch, or no block); a node it does not
name keeps what its own row says (without a switch_id it is a domain by
itself). The summary counts both kinds of mismatch.

In a CSV a name may repeat under different parents (Kubernetes topology labels
are unique only within their parent): a switch (or block ...) name found under
more than one parent is stored as ``parent/name``.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from fleetaudit.core.errors import InputError
from fleetaudit.inputs.ingest.sources import unreadable
from fleetaudit.inputs.ingest.topology_conf import (
    TopologyConfError,
    looks_like_topology_conf,
    parse_topology_conf,
)
from fleetaudit.inputs.ingest.validate import RESERVED, q
from fleetaudit.model import schema
from fleetaudit.model.store import Store

KINDS = ("csv", "topology.conf", "crux")
_LEVELS = "_fa_topology_levels"
_FIXED = ("switch_id", "block_id")


@dataclass(frozen=True)
class Topology:
    """A topology file, read: the levels of the nodes it names, or domains to deal into.

    ``levels`` holds node_id and the level columns, leaf first (switch_id,
    block_id, then deeper ones); for ``crux`` it holds PSW, ASW and DSW per
    host instead.
    """

    file: str
    kind: str  # one of KINDS
    levels: pl.DataFrame
    level_columns: tuple[str, ...]  # the columns stored on nodes, leaf first
    duplicates: int = 0  # nodes named more than once (the first is kept)


@dataclass(frozen=True)
class TopologySummary:
    """What ``--topology`` did to the nodes of one ingest call."""

    file: str
    kind: str
    placed: int  # nodes of the call the file gave a place in the hierarchy
    missing: int  # nodes of the call the file does not name: each keeps its own row's domain
    unknown: int  # nodes the file names that the call does not load
    duplicates: int  # nodes the file names twice or more (the first is kept)
    switches: int  # distinct switch_id among the call's nodes
    blocks: int  # distinct block_id among the call's nodes
    unknown_names: tuple[str, ...] = ()  # the first five nodes of the file the call lacks


def read_topology(path: Path) -> Topology:
    """Read and check a topology file of any kind.

    Raises:
        InputError: the file cannot be read, is of no known kind, or has a bad row.
    """
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise unreadable(path, exc, "cannot read the topology file") from exc
    if looks_like_topology_conf(text):
        return _read_conf(file, text)
    header = next(csv.reader(io.StringIO(text)), [])
    if "node_id" in header and "switch_id" in header:
        return _read_csv(file, text, header)
    if "PSW" in header and "ASW" in header:
        levels = ("switch_id", "block_id", "level2_id")
        return Topology(file, "crux", _read_crux(file, text), levels)
    raise InputError(
        file,
        "not a topology file: expected a CSV with a node_id,switch_id[,block_id,...] header, "
        "a Slurm topology.conf (SwitchName= or BlockName= lines) or a Crux topo.csv (PSW, ASW)",
    )


def _read_conf(file: str, text: str) -> Topology:
    try:
        conf = parse_topology_conf(text.splitlines())
    except TopologyConfError as exc:
        where = f"line {exc.line}: " if exc.line else ""
        raise InputError(file, f"{where}{exc.reason}") from exc
    depth = max((len(chain) for chain in conf.levels.values()), default=1)
    columns = [*_FIXED, *(f"level{i}_id" for i in range(2, depth))][: max(depth, 2)]
    # an unbalanced tree is aligned from the root down: the leaf stays switch_id and the
    # levels above it keep their depth under the root, a missing middle level is empty
    # (s1 <- top beside s0 <- mid <- top: s1's block is empty, not "top")
    aligned = [
        (chain[0], *([None] * (depth - len(chain))), *chain[1:]) for chain in conf.levels.values()
    ]
    data: dict[str, list[str | None]] = {"node_id": list(conf.levels)}
    for i, name in enumerate(columns):
        data[name] = [chain[i] if i < len(chain) else None for chain in aligned]
    frame = pl.DataFrame(data, schema=dict.fromkeys(["node_id", *columns], pl.String))
    return Topology(file, "topology.conf", frame, tuple(columns), len(conf.duplicates))


def _read_csv(file: str, text: str, header: list[str]) -> Topology:
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise InputError(file, "the header names it twice", column=name)
        seen.add(name)
        lower = name.strip().lower()
        if not lower:
            raise InputError(file, "an empty column name in the header")
        clashes = lower in schema.NODES.column_names and name not in ("node_id", *_FIXED)
        if name in RESERVED or clashes:
            raise InputError(
                file, "a topology column cannot be a nodes column or a reserved name", column=name
            )
    try:
        frame = pl.read_csv(io.StringIO(text), infer_schema=False)
    except pl.exceptions.PolarsError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(file, f"cannot read the topology file: {reason}") from exc
    others = [c for c in header if c not in ("node_id", *_FIXED)]
    columns = ["switch_id", "block_id", *others]  # without a block column: no block
    if "block_id" not in header:
        frame = frame.with_columns(pl.lit(None, pl.String).alias("block_id"))
    missing_id = frame["node_id"].is_null()
    if missing_id.any():
        row = int(missing_id.arg_true()[0]) + 1
        raise InputError(file, "node_id is empty", row=row, column="node_id")
    # deeper levels are named by depth, as from topology.conf: the same level is one column
    # whatever file placed the node (spine_id in a CSV header is level2_id)
    depth_names = [f"level{i}_id" for i in range(2, 2 + len(others))]
    frame = frame.select(
        "node_id",
        "switch_id",
        "block_id",
        *(pl.col(c).alias(d) for c, d in zip(others, depth_names, strict=True)),
    )
    columns = ["switch_id", "block_id", *depth_names]
    named = frame.height
    frame = frame.unique("node_id", keep="first", maintain_order=True)
    return Topology(file, "csv", _qualified(frame, columns), tuple(columns), named - frame.height)


def _qualified(frame: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    """Names that repeat under different parents become ``parent/name``, top level down.

    >>> f = pl.DataFrame({"node_id": ["a", "b", "c"], "switch_id": ["s1", "s1", "s2"],
    ...                   "block_id": ["b1", "b2", "b2"]})
    >>> _qualified(f, ["switch_id", "block_id"])["switch_id"].to_list()
    ['b1/s1', 'b2/s1', 's2']
    """
    for i in range(len(columns) - 2, -1, -1):
        name, parent = columns[i], columns[i + 1]
        parents = (
            frame.filter(pl.col(name).is_not_null() & pl.col(parent).is_not_null())
            .group_by(name)
            .agg(pl.col(parent).n_unique().alias("_parents"))
            .filter(pl.col("_parents") > 1)
        )
        if parents.height:
            ambiguous = pl.col(name).is_in(parents[name].implode()) & pl.col(parent).is_not_null()
            frame = frame.with_columns(
                pl.when(ambiguous)
                .then(pl.format("{}/{}", parent, name))
                .otherwise(pl.col(name))
                .alias(name)
            )
    return frame


def _read_crux(file: str, text: str) -> pl.DataFrame:
    try:
        topo = pl.read_csv(io.StringIO(text), infer_schema=False)
    except pl.exceptions.PolarsError as exc:
        raise InputError(file, f"cannot read the topology file: {exc}") from exc
    if "DSW" not in topo.columns:
        topo = topo.with_columns(pl.lit(None, pl.String).alias("DSW"))
    topo = topo.filter(pl.col("PSW").is_not_null() & pl.col("ASW").is_not_null())
    if topo.is_empty():
        raise InputError(file, "the topology file lists no host")
    return topo.select("PSW", "ASW", "DSW")


def _natural(text: str) -> tuple[object, ...]:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def deal_switches(nodes: pl.DataFrame, topology: pl.DataFrame) -> pl.DataFrame:
    """Deal nodes into the topology's PSW+ASW domains, in proportion to their hosts.

    The nodes, ordered by (gpu_model, node_id) with null models last, fill the
    domains in natural (PSW, ASW) order, one domain after another; each domain
    gets a share of the nodes proportional to its host count, rounded by
    largest remainder.

    Args:
        nodes: node_id and gpu_model.
        topology: one row per host with PSW and ASW (and optionally DSW).

    Returns:
        node_id, switch_id (``PSW-ASW``), block_id (the PSW) and level2_id (the
        DSW, null without one) for every node.

    >>> topo = pl.DataFrame({"PSW": ["P1", "P1", "P1", "P2"], "ASW": ["S1", "S1", "S2", "S1"]})
    >>> nodes = pl.DataFrame({"node_id": ["a", "b", "c", "d"], "gpu_model": ["T4"] * 4})
    >>> deal_switches(nodes, topo)["switch_id"].to_list()
    ['P1-S1', 'P1-S1', 'P1-S2', 'P2-S1']
    """
    if "DSW" not in topology.columns:
        topology = topology.with_columns(pl.lit(None, pl.String).alias("DSW"))
    domains = (
        topology.group_by("PSW", "ASW")
        .agg(pl.len(), pl.col("DSW").drop_nulls().first())
        .with_columns(pl.format("{}-{}", "PSW", "ASW").alias("switch_id"))
    )
    ordered = sorted(
        domains.iter_rows(named=True), key=lambda r: (_natural(r["PSW"]), _natural(r["ASW"]))
    )
    total_hosts = sum(r["len"] for r in ordered)
    n = nodes.height
    exact = [r["len"] * n / total_hosts for r in ordered]
    sizes = [int(x) for x in exact]
    by_remainder = sorted(range(len(ordered)), key=lambda i: (-(exact[i] - sizes[i]), i))
    for i in by_remainder[: n - sum(sizes)]:
        sizes[i] += 1
    dealt = [r for r, size in zip(ordered, sizes, strict=False) for _ in range(size)]
    ordered_nodes = nodes.sort("gpu_model", "node_id", nulls_last=True)
    return pl.DataFrame(
        {
            "node_id": ordered_nodes["node_id"],
            "switch_id": [r["switch_id"] for r in dealt],
            "block_id": [r["PSW"] for r in dealt],
            "level2_id": [r["DSW"] for r in dealt],
        },
        schema=dict.fromkeys(["node_id", "switch_id", "block_id", "level2_id"], pl.String),
    )


def node_levels(topology: Topology, nodes: pl.DataFrame) -> tuple[pl.DataFrame, int, int]:
    """The levels of the nodes the file places, and the counts of mismatches.

    Args:
        topology: the file, read.
        nodes: node_id, gpu_model and gpus of the nodes to place.

    Returns:
        (node_id and the level columns of each placed node, nodes not named,
        file nodes not among ``nodes``).
    """
    if topology.kind == "crux":
        # GPU nodes by model first, then the CPU-only ones (their model is made up)
        ordered = nodes.select(
            "node_id",
            pl.when(pl.col("gpus") > 0).then(pl.col("gpu_model")).alias("gpu_model"),
        )
        return deal_switches(ordered, topology.levels), 0, 0
    placed = topology.levels.join(nodes.select("node_id"), on="node_id", how="semi")
    return placed, nodes.height - placed.height, topology.levels.height - placed.height


def _first_unknown(topology: Topology, nodes: pl.DataFrame, n: int = 5) -> tuple[str, ...]:
    """The first ``n`` nodes the file names (file order) that are not among ``nodes``."""
    if topology.kind == "crux":
        return ()
    missing = topology.levels.join(nodes.select("node_id"), on="node_id", how="anti")
    return tuple(missing["node_id"].head(n).to_list())


def apply_topology(store: Store, topology: Topology, ingest_id: int) -> TopologySummary:
    """Set the levels of the nodes this ingest call loaded, from ``topology``.

    Raises:
        InputError: the call loads no nodes.
    """
    mine = {"id": ingest_id}
    nodes = store.sql(
        "SELECT node_id, gpu_model, gpus FROM nodes WHERE _ingest_id = $id", mine
    )
    if nodes.is_empty():
        raise InputError(
            topology.file,
            "--topology applies to the nodes of the same call, and this call loads none "
            "(add the nodes file)",
        )
    levels, missing, unknown = node_levels(topology, nodes)
    stored = {name.lower(): (name, kind) for name, kind in store.column_types("nodes").items()}
    assignments = []
    for column in topology.level_columns:
        if column.lower() not in stored:
            store.add_column("nodes", column, "VARCHAR")
            stored[column.lower()] = (column, "VARCHAR")
        name, kind = stored[column.lower()]
        value = f"t.{q(column)}"
        if kind.upper() != "VARCHAR":
            value = f"TRY_CAST({value} AS {kind})"
        assignments.append(f"{q(name)} = {value}")
    store.register_frame(_LEVELS, levels)
    store.run(
        f"UPDATE nodes SET {', '.join(assignments)} FROM {_LEVELS} AS t "
        "WHERE nodes.node_id = t.node_id AND nodes._ingest_id = $id",
        mine,
    )
    _remember(store, topology, levels)
    counts = store.sql(
        "SELECT count(DISTINCT switch_id) AS switches, count(DISTINCT block_id) AS blocks "
        "FROM nodes WHERE _ingest_id = $id",
        mine,
    ).row(0, named=True)
    return TopologySummary(
        file=topology.file,
        kind=topology.kind,
        placed=levels.height,
        missing=missing,
        unknown=unknown,
        unknown_names=_first_unknown(topology, nodes),
        duplicates=topology.duplicates,
        switches=int(counts["switches"]),
        blocks=int(counts["blocks"]),
    )


# The levels every --topology placed, per node, so a later call of the same nodes
# without --topology keeps them (its rows would otherwise bring the labels' levels back).
_STORED = "topology_levels"
_REMEMBERED = "_fa_topology_remembered"


def _remember(store: Store, topology: Topology, levels: pl.DataFrame) -> None:
    store.run(
        f"CREATE TABLE IF NOT EXISTS {_STORED} "
        "(node_id VARCHAR, level VARCHAR, value VARCHAR, file VARCHAR)"
    )
    columns = [c for c in levels.columns if c != "node_id"]
    long = levels.select(
        "node_id", *(pl.col(c).cast(pl.String) for c in columns)
    ).unpivot(index="node_id", on=columns, variable_name="level", value_name="value")
    store.register_frame(_REMEMBERED, long)
    store.run(f"DELETE FROM {_STORED} WHERE node_id IN (SELECT node_id FROM {_REMEMBERED})")
    store.run(
        f"INSERT INTO {_STORED} SELECT node_id, level, value, $file FROM {_REMEMBERED}",
        {"file": topology.file},
    )


def reapply_topology(store: Store, ingest_id: int) -> int:
    """Give the nodes this call loaded the levels an earlier ``--topology`` placed them at.

    Returns:
        How many of the call's nodes an earlier topology placed.
    """
    if _STORED not in store.table_names():
        return 0
    mine = {"id": ingest_id}
    stored = {name.lower(): (name, kind) for name, kind in store.column_types("nodes").items()}
    for (level,) in store.sql(f"SELECT DISTINCT level FROM {_STORED} ORDER BY level").rows():
        if str(level).lower() not in stored:
            store.add_column("nodes", str(level), "VARCHAR")
            stored[str(level).lower()] = (str(level), "VARCHAR")
        name, kind = stored[str(level).lower()]
        value = "t.value" if kind.upper() == "VARCHAR" else f"TRY_CAST(t.value AS {kind})"
        store.run(
            f"UPDATE nodes SET {q(name)} = {value} FROM {_STORED} AS t "
            "WHERE t.level = $level AND nodes.node_id = t.node_id AND nodes._ingest_id = $id",
            {**mine, "level": level},
        )
    return int(
        store.scalar(
            f"SELECT count(*) FROM nodes WHERE _ingest_id = $id AND node_id IN "
            f"(SELECT node_id FROM {_STORED})",
            mine,
        )
    )
