"""``--format slurm``: sacct history, scontrol node lists, squeue's queue and topology.conf.

Every file is recognised by its content, not its name (:func:`classify`), and
one call may hold any mix:

- ``sacct --parsable2`` output with its header line, or ``sacct --json``:
  allocations (one per job and node, for jobs that ran) and requests (every job);
- ``scontrol -d -o show node`` text or ``--json``: nodes
  (:mod:`fleetaudit.inputs.ingest.slurm_nodes`);
- ``squeue --json``: requests of the pending jobs;
- ``topology.conf``: each node's leaf switch (or block) as ``switch_id`` and the
  level above as ``block_id``. It needs the node list in the same call.

The sacct lines stream through DuckDB's CSV reader once into a temporary table;
TRES strings, hostlists and QOS names are parsed once per distinct value in
Python (:mod:`~fleetaudit.inputs.ingest.tres`, :mod:`~fleetaudit.inputs.ingest.hostlist`,
:class:`~fleetaudit.inputs.ingest.labels.PriorityMap`) and joined back, so a
million-line history is not a Python loop per line. Rows that cannot be mapped
(a bad hostlist, TRES string or time) become rejects with the sacct field and
the reason. The mapping rules are in docs/formats/slurm.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl

from fleetaudit.core.errors import InputError, QueryError, UsageError
from fleetaudit.inputs.ingest.hostlist import HostlistError, expand_hostlist
from fleetaudit.inputs.ingest.labels import PriorityMap, canonical_model, default_priority
from fleetaudit.inputs.ingest.slurm_jobs import (
    JOB_FIELDS,
    sacct_json_row,
    squeue_json_rows,
)
from fleetaudit.inputs.ingest.slurm_nodes import json_node_fields, node_row, split_node_line
from fleetaudit.inputs.ingest.sources import Source, expand_paths
from fleetaudit.inputs.ingest.topology import Topology, read_topology
from fleetaudit.inputs.ingest.topology_conf import looks_like_topology_conf
from fleetaudit.inputs.ingest.tres import TresError, parse_tres
from fleetaudit.model.store import Store

FORMAT = "slurm"
DEFAULT_TIMEZONE = "UTC"
KINDS = (
    "sacct --parsable2 output with its header line, sacct --json, "
    "scontrol -d -o show node (or --json), squeue --json, or topology.conf"
)
_REQUIRED = ("Submit", "Start", "End", "State", "NodeList", "AllocTRES")
_HEAD_BYTES = 65536
_TRES = "_fa_slurm_tres"
_HOSTS = "_fa_slurm_hosts"
_PRIORITY = "_fa_slurm_priority"
_TOPOLOGY = "_fa_slurm_topology"


@dataclass
class _Files:
    sacct: list[tuple[Path, str]] = field(default_factory=list)  # (file, relation name)
    squeue: list[tuple[Path, str]] = field(default_factory=list)
    nodes: list[tuple[Path, str]] = field(default_factory=list)
    topology: list[tuple[Path, Topology]] = field(default_factory=list)


def _head(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            data = fh.read(_HEAD_BYTES)
    except OSError as exc:
        raise InputError(str(path), f"cannot read: {exc.strerror or exc}") from exc
    if data[:2] == b"\x1f\x8b":
        raise InputError(str(path), "a gzip file: decompress it first (gunzip)")
    return data.decode("utf-8-sig", errors="replace")


def classify(path: Path) -> str:
    """The kind of Slurm export a file holds: sacct, sacct-json, squeue-json, nodes,
    nodes-json or topology.

    Raises:
        InputError: none of them (the message names the kinds it could have been).
    """
    head = _head(path)
    stripped = head.lstrip()
    if stripped.startswith("{"):
        document = _json(path)
        if isinstance(document.get("nodes"), list):
            return "nodes-json"
        jobs = document.get("jobs")
        if isinstance(jobs, list):
            first_job = next((j for j in jobs if isinstance(j, dict)), {})
            if "submit_time" in first_job or "job_state" in first_job:
                return "squeue-json"
            if not first_job:
                command = " ".join(map(str, (document.get("meta") or {}).get("command") or []))
                return "squeue-json" if "squeue" in command else "sacct-json"
            return "sacct-json"
        raise InputError(str(path), f"JSON without jobs or nodes; expected {KINDS}")
    first = next((line.strip() for line in head.splitlines() if line.strip()), "")
    if first.startswith("NodeName="):
        return "nodes"
    if looks_like_topology_conf(head):
        return "topology"
    if "|" in first or first.lower() in ("jobid", "jobidraw"):
        names = {name.strip().lower() for name in first.split("|")}
        if names & {"jobid", "jobidraw"}:
            return "sacct"
        if re.match(r"^\d", first):
            raise InputError(
                str(path), "sacct output without its header line: run sacct without -n/--noheader"
            )
    raise InputError(str(path), f"not a Slurm export this format reads; expected {KINDS}")


def _json(path: Path) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8-sig") as fh:
            document = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(str(path), f"cannot read the JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise InputError(str(path), f"JSON that is not an object; expected {KINDS}")
    return document


def check_timezone(name: str) -> str:
    """``name`` if it is an IANA time zone (``UTC``, ``Europe/Berlin``)."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise UsageError(
            f"--timezone: unknown time zone {name!r}; use an IANA name such as UTC or Europe/Berlin"
        ) from exc
    return name


def release(store: Store) -> None:
    """Drop the temporary tables and views of an earlier Slurm ingest on this connection."""
    for kind in ("TABLE", "VIEW"):
        catalog = "duckdb_tables()" if kind == "TABLE" else "duckdb_views()"
        names = store.sql(
            f"SELECT DISTINCT {'table_name' if kind == 'TABLE' else 'view_name'} AS name "
            f"FROM {catalog} WHERE temporary AND starts_with("
            f"{'table_name' if kind == 'TABLE' else 'view_name'}, '_fa_slurm_')"
        )["name"].to_list()
        for name in names:
            store.run(f"DROP {kind} IF EXISTS {name}")


def slurm_sources(
    store: Store,
    paths: list[Path],
    *,
    timezone: str = DEFAULT_TIMEZONE,
    priority_map: PriorityMap | None = None,
    strict: bool = False,
) -> list[Source]:
    """The nodes, allocations and requests sources of a call's Slurm exports.

    Raises:
        InputError: (with ``strict``) the nodes have GPUs but no accounting row tracks any.
    """
    check_timezone(timezone)
    release(store)
    files = _Files()
    for number, path in enumerate(expand_paths(paths, lambda _: True, "file")):
        kind = classify(path)
        relation = f"_fa_slurm_{number}"
        if kind == "sacct":
            _load_parsable(store, path, relation)
            files.sacct.append((path, relation))
        elif kind in ("sacct-json", "squeue-json"):
            jobs = _json(path).get("jobs") or []
            if kind == "sacct-json":
                rows = [sacct_json_row(j) for j in jobs if isinstance(j, dict)]
            else:
                rows = [r for j in jobs if isinstance(j, dict) for r in squeue_json_rows(j)]
            store.register_frame(
                relation, _job_frame(rows, "sacct" if kind == "sacct-json" else "squeue")
            )
            (files.sacct if kind == "sacct-json" else files.squeue).append((path, relation))
        elif kind in ("nodes", "nodes-json"):
            store.register_frame(relation, _node_frame(path, kind))
            files.nodes.append((path, relation))
        else:
            files.topology.append((path, read_topology(path)))
    if files.topology and not files.nodes:
        raise InputError(
            str(files.topology[0][0]),
            "topology.conf sets the switches of the node list: give the scontrol node list "
            "(scontrol -d -o show node) in the same call",
        )
    store.register_frame(_TOPOLOGY, _topology_frame([t for _, t in files.topology]))
    job_relations = [rel for _, rel in files.sacct + files.squeue]
    if job_relations:
        _register_lookups(store, job_relations, priority_map or PriorityMap())
    sources: list[Source] = []
    for path, relation in files.nodes:
        sources.append(_nodes_source(path, relation))
    for path, relation in files.sacct:
        sources.append(_allocations_source(path, relation, timezone))
    for path, relation in files.sacct + files.squeue:
        sources.append(_requests_source(path, relation, timezone))
    untracked = _gpus_untracked(store, files)
    if untracked:
        if strict:
            raise InputError(str(files.sacct[0][0]), untracked)
        sources = [replace(s, notes=(*s.notes, untracked)) for s in sources]
    return sources


def _gpus_untracked(store: Store, files: _Files) -> str | None:
    """A warning when the nodes have GPUs but no sacct row's AllocTRES holds gres/gpu."""
    if not files.nodes or not files.sacct:
        return None
    node_gpus = " UNION ALL ".join(f"SELECT gpus FROM {rel}" for _, rel in files.nodes)
    if not store.scalar(f"SELECT count(*) FROM ({node_gpus}) WHERE gpus > 0"):
        return None
    allocs = " UNION ALL ".join(
        f'SELECT "AllocTRES" AS tres FROM {rel} WHERE "AllocTRES" IS NOT NULL'
        for _, rel in files.sacct
    )
    if not store.scalar(f"SELECT count(*) FROM ({allocs})"):
        return None  # no job ran: nothing to say
    if store.scalar(
        f"SELECT count(*) FROM {_TRES} WHERE gpus > 0 AND tres IN (SELECT tres FROM ({allocs}))"
    ):
        return None
    return (
        "the nodes have GPUs but no job's AllocTRES holds gres/gpu: GPU accounting is off "
        "(add gres/gpu to AccountingStorageTRES in slurm.conf), so every job counts as "
        "CPU-only"
    )


# -- reading -------------------------------------------------------------------------


def _load_parsable(store: Store, path: Path, relation: str) -> None:
    """sacct --parsable2 lines into a temporary table of the JOB_FIELDS (text), one scan."""
    first = next((line for line in _head(path).splitlines() if line.strip()), "")
    header = [name.strip() for name in first.rstrip("\r\n").split("|")]
    index = {name.lower(): i for i, name in reversed(list(enumerate(header)))}
    if "jobidraw" not in index and "jobid" in index:
        index["jobidraw"] = index["jobid"]
    if "jobid" not in index and "jobidraw" in index:
        index["jobid"] = index["jobidraw"]
    for name in _REQUIRED:
        if name.lower() not in index:
            raise InputError(
                str(path),
                "required sacct field missing (see docs/formats/slurm.md: the sacct command)",
                column=name,
            )
    columns = ", ".join(
        f"NULLIF(f[{index[name.lower()] + 1}], '') AS \"{name}\""
        if name.lower() in index
        else f'CAST(NULL AS VARCHAR) AS "{name}"'
        for name in JOB_FIELDS
    )
    try:
        store.run(
            f"CREATE OR REPLACE TEMP TABLE {relation} AS SELECT _row, len(f) AS _nfields, "
            f"{len(header)} AS _expected, {columns}, 'sacct' AS _source FROM ("
            "SELECT row_number() OVER () AS _row, string_split(line, '|') AS f FROM read_csv("
            "$path, columns = {'line': 'VARCHAR'}, header = true, delim = chr(30), quote = '', "
            "escape = '', auto_detect = false, compression = 'none')) WHERE f IS NOT NULL",
            {"path": str(path)},
        )
    except QueryError as exc:
        raise InputError(str(path), f"cannot read: {exc.message}") from exc


def _job_frame(rows: list[dict[str, str | None]], source: str) -> pl.DataFrame:
    frame = pl.DataFrame(
        {name: [r.get(name) for r in rows] for name in JOB_FIELDS},
        schema=dict.fromkeys(JOB_FIELDS, pl.Utf8),
    )
    width = len(JOB_FIELDS)
    return frame.with_columns(
        pl.int_range(1, frame.height + 1, dtype=pl.Int64).alias("_row"),
        pl.lit(width, dtype=pl.Int64).alias("_nfields"),
        pl.lit(width, dtype=pl.Int64).alias("_expected"),
        pl.lit(source).alias("_source"),
    )


_NODE_SCHEMA = {
    "node_id": pl.Utf8,
    "gpu_model": pl.Utf8,
    "gpus": pl.Float64,
    "cpus": pl.Float64,
    "memory_gib": pl.Float64,
    "health": pl.Utf8,
    "state": pl.Utf8,
    "partitions": pl.Utf8,
    "features": pl.Utf8,
    "reason": pl.Utf8,
    "gres": pl.Utf8,
    "gres_drain": pl.Utf8,
    "_reject_column": pl.Utf8,
    "_reject_reason": pl.Utf8,
    "_reject_value": pl.Utf8,
    "_row": pl.Int64,
}


def _node_frame(path: Path, kind: str) -> pl.DataFrame:
    rows: list[dict[str, Any]] = []
    if kind == "nodes-json":
        for node in _json(path).get("nodes") or []:
            if isinstance(node, dict):
                rows.append(node_row(json_node_fields(node)))
    else:
        try:
            lines = path.read_text(encoding="utf-8-sig").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(str(path), f"cannot read: {exc}") from exc
        for line in lines:
            if line.strip():
                if not line.lstrip().startswith("NodeName="):
                    raise InputError(
                        str(path),
                        f"row {len(rows) + 1}: not a node line; run scontrol -d -o show node "
                        "(-o: one line per node)",
                    )
                rows.append(node_row(split_node_line(line.strip())))
    for number, row in enumerate(rows, 1):
        row["_row"] = number
    return pl.DataFrame(rows, schema=_NODE_SCHEMA) if rows else pl.DataFrame(schema=_NODE_SCHEMA)


def _topology_frame(topologies: list[Topology]) -> pl.DataFrame:
    """switch_id and block_id of every node the topology.conf files name (the first file wins)."""
    frames = [t.levels.select("node_id", "switch_id", "block_id") for t in topologies]
    schema = {"node_id": pl.Utf8, "switch_id": pl.Utf8, "block_id": pl.Utf8}
    if not frames:
        return pl.DataFrame(schema=schema).rename({"node_id": "node"})
    return (
        pl.concat(frames)
        .unique("node_id", keep="first", maintain_order=True)
        .rename({"node_id": "node"})
    )


# -- lookups: one parse per distinct value ---------------------------------------------


def _distinct(
    store: Store, relations: list[str], expression: str, where: str = "TRUE"
) -> list[Any]:
    union = " UNION ".join(
        f"SELECT DISTINCT {expression} AS v FROM {rel} WHERE {where}" for rel in relations
    )
    return [row[0] for row in store.sql(f"SELECT v FROM ({union}) WHERE v IS NOT NULL").iter_rows()]


def _register_lookups(store: Store, relations: list[str], priority_map: PriorityMap) -> None:
    store.register_frame(
        _TRES,
        tres_frame(
            _distinct(store, relations, '"AllocTRES"') + _distinct(store, relations, '"ReqTRES"')
        ),
    )
    multi = _distinct(
        store,
        relations,
        '"NodeList"',
        "(\"NodeList\" LIKE '%[%' OR \"NodeList\" LIKE '%,%') AND \"NodeList\" <> 'None assigned'",
    )
    store.register_frame(_HOSTS, hosts_frame(multi))
    pairs = store.sql(
        " UNION ".join(
            f"SELECT DISTINCT COALESCE(\"QOS\", '') AS qos, COALESCE(\"Partition\", '') AS partition "
            f"FROM {rel}"
            for rel in relations
        )
    )
    store.register_frame(_PRIORITY, priority_frame(pairs, priority_map))


_GPU_SLICES = frozenset({"gres/shard", "gres/mps"})
_SLICE_REASON = (
    "' is a GPU slice (gres/shard or gres/mps) without gres/gpu: its GPU share is unknown'"
)


def tres_frame(values: Iterable[str]) -> pl.DataFrame:
    """One row per distinct TRES string: its GPUs, model, CPUs, memory, nodes, or an error."""
    rows: dict[str, dict[str, Any]] = {}
    for text in values:
        if text in rows:
            continue
        try:
            tres = parse_tres(text)
        except TresError as exc:
            rows[text] = {"tres": text, "error": str(exc)}
            continue
        types = tres.gpu_types
        rows[text] = {
            "tres": text,
            "gpus": tres.gpus,
            "gpu_type": "|".join(types) or None,
            "gpu_model": "|".join(dict.fromkeys(m for t in types if (m := canonical_model(t))))
            or None,
            "cpus": tres.cpus,
            "mem_mib": tres.mem_mib,
            "nodes": tres.nodes,
            # GPU slices Slurm does not size in GPUs (gres/shard, gres/mps), without gres/gpu
            "shares": None
            if tres.gpus
            else ",".join(k for k in tres.counts if k.split(":")[0] in _GPU_SLICES) or None,
            "error": None,
        }
    schema = {
        "tres": pl.Utf8,
        "gpus": pl.Float64,
        "gpu_type": pl.Utf8,
        "gpu_model": pl.Utf8,
        "cpus": pl.Float64,
        "mem_mib": pl.Float64,
        "nodes": pl.Float64,
        "shares": pl.Utf8,
        "error": pl.Utf8,
    }
    return pl.DataFrame(list(rows.values()), schema=schema) if rows else pl.DataFrame(schema=schema)


def hosts_frame(values: Iterable[str]) -> pl.DataFrame:
    """One row per (hostlist, host) with the host's index and the list's size, or an error."""
    lists: list[str] = []
    idx: list[int] = []
    nodes: list[str | None] = []
    sizes: list[int] = []
    errors: list[str | None] = []
    for text in values:
        try:
            hosts = expand_hostlist(text)
        except HostlistError as exc:
            lists.append(text)
            idx.append(0)
            nodes.append(None)
            sizes.append(1)
            errors.append(str(exc))
            continue
        lists.extend([text] * len(hosts))
        idx.extend(range(len(hosts)))
        nodes.extend(hosts)
        sizes.extend([len(hosts)] * len(hosts))
        errors.extend([None] * len(hosts))
    return pl.DataFrame(
        {"nodelist": lists, "idx": idx, "node": nodes, "n": sizes, "error": errors},
        schema={
            "nodelist": pl.Utf8,
            "idx": pl.Int64,
            "node": pl.Utf8,
            "n": pl.Int64,
            "error": pl.Utf8,
        },
    )


def priority_of(qos: str | None, partition: str | None, priority_map: PriorityMap) -> str:
    """high or low: the map's word for the QOS, else for the partition, else the built-in
    preemptible names (labels.default_priority) are low, and everything else is high.

    >>> m = PriorityMap({"batch": "low"})
    >>> priority_of("normal", "batch", m), priority_of("scavenger", "gpu", m), priority_of("", "", m)
    ('low', 'low', 'high')
    """
    found = priority_map.lookup(qos or None, partition or None)
    if found is not None:
        return found
    return default_priority(qos, partition)


def priority_frame(pairs: pl.DataFrame, priority_map: PriorityMap) -> pl.DataFrame:
    return pairs.with_columns(
        pl.Series(
            "priority",
            [
                priority_of(q, p, priority_map)
                for q, p in pairs.select("qos", "partition").iter_rows()
            ],
            dtype=pl.Utf8,
        )
    )


# -- the SQL of the three tables -------------------------------------------------------

_UNSET = "('Unknown', 'None', 'NONE', 'N/A', '')"
_ROW = "/*row*/"  # where the numbered scan adds _row


def _time(column: str) -> str:
    """SQL: a sacct time (epoch seconds or local ISO time in $tz) as a UTC TIMESTAMP."""
    c = f'j."{column}"'
    return (
        f"CASE WHEN {c} IS NULL OR trim({c}) IN {_UNSET} THEN NULL "
        f"WHEN regexp_full_match(trim({c}), '\\d{{1,11}}') THEN "
        f"CAST(to_timestamp(CAST(trim({c}) AS BIGINT)) AS TIMESTAMP) "
        f"ELSE CAST(timezone($tz, TRY_CAST(trim({c}) AS TIMESTAMP)) AS TIMESTAMP) END"
    )


def _bad_time(column: str) -> str:
    c = f'j."{column}"'
    return f"({c} IS NOT NULL AND trim({c}) NOT IN {_UNSET} AND j._t_{column.lower()} IS NULL)"


def _jobs(relation: str, times_of: tuple[str, ...] = ("Submit", "Eligible", "Start", "End")) -> str:
    """SQL: the job rows (steps skipped) with the parsed times of ``times_of`` and ``_ran``."""
    times = ", ".join(f"{_time(c)} AS _t_{c.lower()}" for c in times_of)
    return (
        f"SELECT j.*, {times}, upper(split_part(trim(j.\"State\"), ' ', 1)) AS _state, "
        'COALESCE(j."Start" IS NOT NULL AND trim(j."Start") NOT IN ' + _UNSET + " "
        "AND COALESCE(j.\"NodeList\", 'None assigned') NOT IN ('None assigned', '(null)') "
        "AND NULLIF(j.\"AllocTRES\", '') IS NOT NULL AND j._source = 'sacct', FALSE) AS _ran "
        f"FROM {relation} AS j "
        "WHERE strpos(COALESCE(j.\"JobID\", ''), '.') = 0"  # job steps: 1000.batch, 1000.0
    )


def _reject(cases: list[tuple[str, str, str, str]]) -> str:
    """SQL of _reject_column/_reason/_value from (condition, field, reason SQL, value SQL)."""
    parts = []
    for i, name in enumerate(("_reject_column", "_reject_reason", "_reject_value"), 1):
        whens = " ".join(f"WHEN {case[0]} THEN {case[i]}" for case in cases)
        parts.append(f"CASE {whens} END AS {name}")
    return ", ".join(parts)


def _field_count() -> tuple[str, str, str, str]:
    return (
        "j._nfields <> j._expected",
        "'JobID'",
        "CAST(j._nfields AS VARCHAR) || ' fields where the header has ' || "
        "CAST(j._expected AS VARCHAR) || ' (a ''|'' inside a field?)'",
        'j."JobID"',
    )


def _time_rejects(columns: Iterable[str]) -> list[tuple[str, str, str, str]]:
    return [
        (
            _bad_time(c),
            f"'{c}'",
            f"'cannot read the time ' || j.\"{c}\" || ' (epoch seconds or YYYY-MM-DDTHH:MM:SS)'",
            f'j."{c}"',
        )
        for c in columns
    ]


def _any_bad(cases: list[tuple[str, str, str, str]]) -> str:
    """SQL: whether any reject case holds."""
    return "(" + " OR ".join(f"({case[0]})" for case in cases) + ")"


def _source(path: Path, table: str, select: str, timezone: str) -> Source:
    return Source(
        file=str(path),
        table=table,
        select=select.replace(_ROW, ""),
        numbered=select.replace(_ROW, ", j._row AS _row"),
        params={"tz": timezone},
        adapter_rejects=True,
    )


def _nodes_source(path: Path, relation: str) -> Source:
    select = (
        "SELECT n.node_id, n.gpu_model, n.gpus, n.cpus, n.memory_gib, t.switch_id, "
        "n.health, t.block_id, n.state, n.partitions, n.features, n.reason, n.gres, n.gres_drain, "
        f"n._reject_column, n._reject_reason, n._reject_value{_ROW} "
        f"FROM {relation} AS n LEFT JOIN {_TOPOLOGY} AS t ON t.node = n.node_id ORDER BY n._row"
    )
    return Source(
        file=str(path),
        table="nodes",
        select=select.replace(_ROW, ""),
        numbered=select.replace(_ROW, ", n._row AS _row"),
        adapter_rejects=True,
    )


_INTERACTIVE = (
    "(lower(COALESCE(j.\"JobName\", '')) IN ('interactive', 'bash', 'sh', 'zsh', 'jupyter') "
    "OR COALESCE(j.\"SubmitLine\", '') LIKE 'salloc%' "
    "OR COALESCE(j.\"SubmitLine\", '') LIKE '%--pty%')"
)


def _split(total: str) -> str:
    """SQL: host h.idx's part of a job total over n hosts; a whole total is dealt in whole
    units, the remainder to the first hosts of the hostlist."""
    return (
        f"CASE WHEN {total} = floor({total}) THEN floor({total} / _n) + "
        f"CASE WHEN _idx < {total} - floor({total} / _n) * _n THEN 1 ELSE 0 END "
        f"ELSE {total} / _n END"
    )


# the allocations' rejects of a job line, as the requests query sees them (AllocTRES as a)
_ALLOC_LINE_REJECTS = [
    _field_count(),
    ("a.error IS NOT NULL", "", "", ""),
    ("a.shares IS NOT NULL", "", "", ""),
    *_time_rejects(["Start", "End"]),
]


def _allocations_source(path: Path, relation: str, timezone: str) -> Source:
    gpus = "COALESCE(t.gpus, 0)"
    cpus = 'COALESCE(t.cpus, TRY_CAST(j."AllocCPUS" AS DOUBLE), 0)'
    rejects = [
        _field_count(),
        ("j._h_error IS NOT NULL", "'NodeList'", "'bad hostlist: ' || j._h_error", 'j."NodeList"'),
        ("t.error IS NOT NULL", "'AllocTRES'", "t.error", 'j."AllocTRES"'),
        ("t.shares IS NOT NULL", "'AllocTRES'", f"t.shares || {_SLICE_REASON}", 'j."AllocTRES"'),
        *_time_rejects(["Start", "End"]),
    ]
    select = (
        "SELECT j.\"JobIDRaw\" || ':' || CAST(CAST(epoch(j._t_start) AS BIGINT) AS VARCHAR) "
        "|| '@' || _node AS alloc_id, "
        "CASE WHEN j.\"JobID\" LIKE '%+%' THEN split_part(j.\"JobID\", '+', 1) "
        'ELSE j."JobIDRaw" END AS job_id, '
        "_node AS node_id, "
        # a suspended job releases its CPUs (its GPUs and memory stay allocated)
        f"{_split(gpus)} AS gpus, CASE WHEN j._state = 'SUSPENDED' THEN 0 ELSE {_split(cpus)} "
        "END AS cpus, "
        "t.mem_mib / _n / 1024 AS memory_gib, "
        "p.priority AS priority, "
        f"CASE WHEN {gpus} = 0 THEN 'cpu_only' WHEN {_INTERACTIVE} THEN 'development' "
        "ELSE 'training' END AS workload, "
        'j."Account" AS tenant, j._t_start AS start_time, j._t_end AS end_time, '
        'j."JobID" AS slurm_job_id, j."User" AS "user", j."Partition" AS "partition", '
        'j."QOS" AS qos, j."State" AS state, j."ExitCode" AS exit_code, '
        'TRY_CAST(j."Restarts" AS BIGINT) AS restarts, j."Reason" AS reason, '
        'TRY_CAST(j."TimelimitRaw" AS DOUBLE) * 60 AS timelimit_s, t.gpu_type AS gpu_type, '
        "j._state = 'SUSPENDED' AS suspended, "
        f"_n > 1 AND ({gpus} <> floor({gpus} / _n) * _n OR {cpus} <> floor({cpus} / _n) * _n) "
        "AS uneven_split, "
        f"{_reject(rejects)}{_ROW} "
        'FROM (SELECT j.*, COALESCE(h.node, CASE WHEN h.nodelist IS NULL THEN trim(j."NodeList") END) '
        "AS _node, COALESCE(h.n, 1) AS _n, COALESCE(h.idx, 0) AS _idx, h.error AS _h_error "
        f"FROM ({_jobs(relation, ('Start', 'End'))}) AS j "
        f'LEFT JOIN {_HOSTS} AS h ON h.nodelist = j."NodeList" WHERE j._ran) AS j '
        f'LEFT JOIN {_TRES} AS t ON t.tres = j."AllocTRES" '
        f"LEFT JOIN {_PRIORITY} AS p ON p.qos = COALESCE(j.\"QOS\", '') "
        "AND p.partition = COALESCE(j.\"Partition\", '') "
        # a bad line is one reject, not one per node of its hostlist
        f"WHERE j._idx = 0 OR NOT COALESCE({_any_bad(rejects)}, FALSE) "
        "ORDER BY j._row, j._idx"
    )
    return _source(path, "allocations", select, timezone)


def _requests_source(path: Path, relation: str, timezone: str) -> Source:
    # g: GPUs asked (ReqTRES, else AllocTRES); pods: nodes asked, at most one per GPU
    g = "COALESCE(r.gpus, a.gpus, 0)"
    pods = f'GREATEST(LEAST(COALESCE(TRY_CAST(j."NNodes" AS DOUBLE), r.nodes, 1), {g}), 1)'
    per_pod = f"ceil({g} / {pods})"
    gpus = f"CASE WHEN {g} > 0 THEN {per_pod} * {pods} ELSE 0 END"
    cpus = 'COALESCE(TRY_CAST(j."ReqCPUS" AS DOUBLE), r.cpus, a.cpus)'
    mem = "COALESCE(r.mem_mib, a.mem_mib)"
    left = "CASE WHEN j._ran THEN j._t_start ELSE j._t_end END"  # when the job left the queue
    switches = 'TRY_CAST(j."ReqSwitches" AS BIGINT)'
    rejects = [
        _field_count(),
        ("r.error IS NOT NULL", "'ReqTRES'", "r.error", 'j."ReqTRES"'),
        ("a.error IS NOT NULL", "'AllocTRES'", "a.error", 'j."AllocTRES"'),
        (
            "COALESCE(r.shares, a.shares) IS NOT NULL AND COALESCE(r.gpus, a.gpus, 0) = 0",
            "CASE WHEN r.shares IS NOT NULL THEN 'ReqTRES' ELSE 'AllocTRES' END",
            f"COALESCE(r.shares, a.shares) || {_SLICE_REASON}",
            'CASE WHEN r.shares IS NOT NULL THEN j."ReqTRES" ELSE j."AllocTRES" END',
        ),
        *_time_rejects(["Submit", "Eligible", "Start", "End"]),
    ]
    select = (
        "SELECT j.\"JobIDRaw\" || ':' || CAST(CAST(epoch(j._t_submit) AS BIGINT) AS VARCHAR) "
        "AS request_id, "
        f"CASE WHEN j._t_eligible >= j._t_submit AND j._t_eligible <= COALESCE({left}, j._t_eligible) "
        "THEN j._t_eligible ELSE j._t_submit END AS submit_time, "
        f"{left} AS start_time, "
        "r.gpu_model AS gpu_model, "
        f"{gpus} AS gpus, CASE WHEN {g} > 0 THEN {per_pod} END AS gpus_per_pod, "
        f"CASE WHEN {g} > 0 THEN {cpus} / ({gpus}) END AS cpus_per_gpu, "
        f"CASE WHEN {g} > 0 THEN {mem} / 1024 / ({gpus}) END AS memory_gib_per_gpu, "
        f"CASE WHEN {g} = 0 THEN {cpus} END AS cpus, "
        f"CASE WHEN {g} = 0 THEN {mem} / 1024 END AS memory_gib, "
        f"CASE WHEN {g} = 0 THEN NULL WHEN {pods} <= 1 THEN 'node' "
        f"WHEN {switches} > 1 THEN 'any' ELSE 'switch' END AS locality, "
        'CASE WHEN j._ran AND j._t_end IS NOT NULL THEN COALESCE(TRY_CAST(j."ElapsedRaw" AS DOUBLE), '
        "epoch(j._t_end) - epoch(j._t_start)) "
        'ELSE TRY_CAST(j."TimelimitRaw" AS DOUBLE) * 60 END AS duration_s, '
        "CAST(NULL AS DOUBLE) AS start_deadline_s, p.priority AS priority, "
        'j."Account" AS tenant, '
        'j."JobID" AS slurm_job_id, j."User" AS "user", j."Partition" AS "partition", '
        'j."QOS" AS qos, j."State" AS state, j."Reason" AS reason, '
        "j._t_submit AS submitted, j._t_eligible AS eligible, "
        'TRY_CAST(j."NNodes" AS BIGINT) AS nnodes, '
        "CASE WHEN j.\"JobID\" LIKE '%+%' THEN split_part(j.\"JobID\", '+', 1) END AS het_job_id, "
        "NOT (j._ran AND j._t_end IS NOT NULL) AS duration_is_limit, "
        f"NOT j._ran AND {left} IS NOT NULL AS never_started, "
        f"{g} > 0 AND {gpus} <> {g} AS uneven_split, "
        f"{switches} AS req_switches, j._source AS slurm_source, "
        f"{_reject(rejects)}{_ROW} "
        f"FROM ({_jobs(relation)}) AS j "
        f'LEFT JOIN {_TRES} AS r ON r.tres = j."ReqTRES" '
        f'LEFT JOIN {_TRES} AS a ON a.tres = j."AllocTRES" '
        f"LEFT JOIN {_PRIORITY} AS p ON p.qos = COALESCE(j.\"QOS\", '') "
        "AND p.partition = COALESCE(j.\"Partition\", '') "
        # a line the allocations already reject (a job that ran) is not rejected twice
        f"WHERE NOT (j._ran AND COALESCE({_any_bad(_ALLOC_LINE_REJECTS)}, FALSE)) "
        "ORDER BY j._row"
    )
    return _source(path, "requests", select, timezone)
