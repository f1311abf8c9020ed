"""``--format slurm``: sacct history, scontrol node and job lists, squeue's queue, node
events, sdiag and topology.conf.

Every file is recognised by its content, not its name (:func:`classify`), and
one call may hold any mix:

- ``sacct --parsable2`` output with its header line (``-p``'s trailing ``|`` too), or
  ``sacct --json``: allocations (one per job and node, for jobs that ran) and requests
  (every job, a pending array once per task);
- ``scontrol -d -o show node`` text (or the multi-line form people paste), ``--json``,
  or ``sinfo --json``: nodes (:mod:`fleetaudit.inputs.ingest.slurm_nodes`), and an open
  health interval (``node_events``, source ``slurm:scontrol``) for every node not
  healthy at the export;
- ``scontrol -d -o show job`` (optional): the true GPUs of each node of a running job,
  used instead of the even split, and each job's ``--switches``;
- ``squeue --json``: requests of the pending jobs;
- ``sacctmgr -P show event``: node health intervals (source ``slurm:sacctmgr``);
- ``sdiag``: the instant of the export;
- ``topology.conf`` (or ``scontrol show topology``): each node's leaf switch (or block)
  as ``switch_id`` and the level above as ``block_id``. It needs the node list in the
  same call.

The export's own time, where the files carry one (sdiag; a running job's start plus its
elapsed time in sacct or its RunTime in scontrol; squeue --json's last_update), is
handed to the ingest with the sources (:attr:`Source.export_time`).

The sacct lines stream through DuckDB's CSV reader once into a temporary table;
TRES strings, hostlists, array task lists and QOS names are parsed once per distinct
value in Python (:mod:`~fleetaudit.inputs.ingest.tres`,
:mod:`~fleetaudit.inputs.ingest.hostlist`,
:class:`~fleetaudit.inputs.ingest.labels.PriorityMap`) and joined back, so a
million-line history is not a Python loop per line. Rows that cannot be mapped
(a bad hostlist, TRES string or time) become rejects with the sacct field and
the reason. The mapping rules are in docs/formats/slurm.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl

from fleetaudit.core.errors import InputError, QueryError, UsageError
from fleetaudit.inputs.ingest.hostlist import HostlistError, expand_hostlist
from fleetaudit.inputs.ingest.labels import PriorityMap, canonical_model, default_priority
from fleetaudit.inputs.ingest.slurm_jobs import (
    JOB_FIELDS,
    array_tasks,
    json_value,
    sacct_json_row,
    squeue_json_rows,
)
from fleetaudit.inputs.ingest.slurm_nodes import json_node_fields, node_row, split_node_line
from fleetaudit.inputs.ingest.slurm_records import (
    INELIGIBLE_REASONS,
    JobRecord,
    event_rows,
    event_state,
    job_record,
    reason_time,
    records,
    sdiag_time,
)
from fleetaudit.inputs.ingest.slurm_times import UNSET, SlurmTimeError
from fleetaudit.inputs.ingest.sources import Source, expand_paths, unreadable
from fleetaudit.inputs.ingest.topology import Topology, read_topology
from fleetaudit.inputs.ingest.topology_conf import looks_like_topology_conf
from fleetaudit.inputs.ingest.tres import TresError, parse_tres
from fleetaudit.model.store import Store

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

FORMAT = "slurm"
DEFAULT_TIMEZONE = "UTC"
KINDS = (
    "sacct --parsable2 output with its header line, sacct --json, "
    "scontrol -d -o show node (or --json, or sinfo --json), scontrol -d -o show job, "
    "squeue --json, sacctmgr -P show event, sdiag, or topology.conf"
)
_REQUIRED = ("Submit", "Start", "End", "State", "NodeList", "AllocTRES")
_HEAD_BYTES = 65536
_MAX_LINE = 2_097_152  # DuckDB's longest CSV line; sacct's lines are a few hundred bytes
_TRES = "_fa_slurm_tres"
_HOSTS = "_fa_slurm_hosts"
_TASKS = "_fa_slurm_tasks"
_PRIORITY = "_fa_slurm_priority"
_TOPOLOGY = "_fa_slurm_topology"
_LAYOUT = "_fa_slurm_layout"
_SWITCHES = "_fa_slurm_switches"


@dataclass
class _Files:
    sacct: list[tuple[Path, str]] = field(default_factory=list)  # (file, relation name)
    squeue: list[tuple[Path, str]] = field(default_factory=list)
    nodes: list[tuple[Path, str]] = field(default_factory=list)
    topology: list[tuple[Path, Topology]] = field(default_factory=list)
    jobs: list[tuple[Path, list[JobRecord]]] = field(default_factory=list)
    events: list[tuple[Path, str]] = field(default_factory=list)
    # the export's own time, per file: (file, instant, how it is known)
    stamps: list[tuple[Path, datetime, str]] = field(default_factory=list)


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
    nodes-json, jobs, events, sdiag or topology.

    Raises:
        InputError: none of them (the message names the kinds it could have been), or
            a JSON export that carries Slurm's error instead of its data.
    """
    head = _head(path)
    stripped = head.lstrip()
    if stripped.startswith("{"):
        document = _json(path)
        _check_json_errors(path, document)
        if isinstance(document.get("nodes"), list):
            return "nodes-json"
        jobs = document.get("jobs")
        if isinstance(jobs, list):
            first_job = next((j for j in jobs if isinstance(j, dict)), {})
            if "submit_time" in first_job or "job_state" in first_job:
                return "squeue-json"
            if not first_job:
                command = " ".join(map(str, (document.get("meta") or {}).get("command") or []))
                plugin = json.dumps((document.get("meta") or {}).get("plugin") or {})
                return "squeue-json" if "squeue" in command or '"openapi/v' in plugin else "sacct-json"
            return "sacct-json"
        raise InputError(str(path), f"JSON without jobs or nodes; expected {KINDS}")
    lines = [line.strip() for line in head.splitlines() if line.strip()]
    first = lines[0] if lines else ""
    if first.startswith("NodeName="):
        return "nodes"
    if first.startswith("JobId="):
        return "jobs"
    if any(line.startswith("sdiag output at ") for line in lines[:5]):
        return "sdiag"
    if looks_like_topology_conf(head):
        return "topology"
    if "|" in first or first.lower() in ("jobid", "jobidraw"):
        names = {name.strip().lower() for name in first.split("|")}
        if names & {"jobid", "jobidraw"}:
            return "sacct"
        if {"nodename", "timestart"} <= names:
            return "events"
        if first.count("|") >= 3:
            raise InputError(
                str(path),
                "'|'-separated lines without a header naming JobID: sacct output without its "
                "header line? Run sacct without -n/--noheader",
            )
    raise InputError(str(path), f"not a Slurm export this format reads; expected {KINDS}")


def _json(path: Path) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8-sig") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise unreadable(path, exc, "cannot read the JSON") from exc
    try:
        try:
            document = json.loads(text, parse_constant=_refuse_constant)
        except _NotJson:
            # read again, taking the constants, to name the job and field (a file broken
            # after the constant fails as broken JSON)
            document = json.loads(text)
            if isinstance(document, dict):
                _check_finite(path, document)
            raise InputError(str(path), "NaN or Infinity, which JSON does not have") from None
    except RecursionError as exc:
        raise InputError(
            str(path), "JSON nested too deeply to read (Slurm's exports nest about 8 levels)"
        ) from exc
    except json.JSONDecodeError as exc:
        raise InputError(str(path), f"cannot read the JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise InputError(str(path), f"JSON that is not an object; expected {KINDS}")
    return document


class _NotJson(ValueError):
    """A NaN or Infinity literal: Python's reader takes them, JSON (and Slurm) does not."""


def _refuse_constant(name: str) -> Any:
    raise _NotJson(name)


def _check_finite(path: Path, document: dict[str, Any]) -> None:
    """Fail on a NaN or an infinity (JSON has neither; Python's reader accepts them),
    naming the job or node (its 1-based place in the list) and the field."""
    for key in ("jobs", "nodes"):
        items = document.get(key)
        if not isinstance(items, list):
            continue
        for number, item in enumerate(items, 1):
            stack: list[tuple[str, Any]] = [("", item)]
            while stack:
                where, value = stack.pop()
                if isinstance(value, float) and not math.isfinite(value):
                    raise InputError(
                        str(path),
                        f"{value} is not a number Slurm writes ({key[:-1]} "
                        f"{_object_name(item)}; JSON has no NaN or Infinity)",
                        row=number,
                        column=where.lstrip(".") or None,
                    )
                if isinstance(value, dict):
                    stack.extend((f"{where}.{k}", v) for k, v in value.items())
                elif isinstance(value, list):
                    stack.extend((f"{where}[{i}]", v) for i, v in enumerate(value))


def _object_name(item: Any) -> str:
    if isinstance(item, dict):
        for key in ("job_id", "name", "hostname"):
            if item.get(key) is not None:
                return str(item[key])[:40]
    return "?"


def _check_json_errors(path: Path, document: dict[str, Any]) -> None:
    """Pass on the error a Slurm command put into its JSON instead of data."""
    errors = [e for e in document.get("errors") or [] if e]
    if not errors:
        return
    first = errors[0]
    if isinstance(first, dict):
        parts = [str(first.get(k)) for k in ("description", "error", "source") if first.get(k)]
        text = "; ".join(dict.fromkeys(parts)) or json.dumps(first)[:200]
    else:
        text = str(first)[:200]
    command = " ".join(map(str, (document.get("meta") or {}).get("command") or [])) or "Slurm"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    hint = (
        " (SLURM_TIME_FORMAT=%s is for -P text output only: unset it for --json)"
        if "time" in text.lower()
        else ""
    )
    raise InputError(
        str(path), f"{command.split()[0] if command else 'Slurm'} reported an error instead of "
        f"its data: {text}{more}{hint}"
    )


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
    """The nodes, allocations, requests and node_events sources of a call's Slurm exports.

    Raises:
        InputError: (with ``strict``) the nodes have GPUs but no accounting row tracks any.
    """
    check_timezone(timezone)
    release(store)
    files = _Files()
    for number, path in enumerate(expand_paths(paths, lambda _: True, "file")):
        _read_file(store, files, path, f"_fa_slurm_{number}", timezone)
    if files.topology and not files.nodes:
        raise InputError(
            str(files.topology[0][0]),
            "topology.conf sets the switches of the node list: give the scontrol node list "
            "(scontrol -d -o show node) in the same call",
        )
    store.register_frame(_TOPOLOGY, _topology_frame([t for _, t in files.topology]))
    store.register_frame(_LAYOUT, _layout_frame(files.jobs))
    store.register_frame(_SWITCHES, _switches_frame(files.jobs))
    job_relations = [rel for _, rel in files.sacct + files.squeue]
    if job_relations:
        _register_lookups(store, job_relations, priority_map or PriorityMap())
    for path, relation in files.sacct:
        seen = _seen_at(store, relation, timezone)
        if seen is not None:
            files.stamps.append((path, seen, "its running jobs' start plus elapsed time"))
    for path, records_ in files.jobs:
        seen = max((r.seen_at for r in records_ if r.seen_at is not None), default=None)
        if seen is not None:
            files.stamps.append((path, seen, "its running jobs' start plus run time"))
    export_time = max((t for _, t, _ in files.stamps), default=None)
    sources: list[Source] = []
    for path, relation in files.nodes:
        sources.append(_nodes_source(path, relation))
    for path, relation in files.sacct:
        sources.append(_allocations_source(path, relation, timezone))
    for path, relation in files.sacct + files.squeue:
        sources.append(_requests_source(path, relation, timezone))
    for path, relation in files.nodes:
        events = _state_events(store, relation, export_time)
        if events is not None:
            sources.append(_events_source(path, events, "slurm:scontrol"))
    for path, relation in files.events:
        sources.append(_events_source(path, relation, "slurm:sacctmgr"))
    untracked = _gpus_untracked(store, files)
    if untracked:
        if strict:
            raise InputError(str(files.sacct[0][0]), untracked)
        sources = [replace(s, notes=(*s.notes, untracked)) for s in sources]
    if sources and files.stamps:  # an sdiag or a job list feed no table: the first source
        stamps = tuple((str(p), t, how) for p, t, how in files.stamps)
        sources[0] = replace(sources[0], exported=stamps)
    return sources


def _read_file(store: Store, files: _Files, path: Path, relation: str, timezone: str) -> None:
    """Read one export into the temporary relation ``relation`` (or a list of ``files``)."""
    kind = classify(path)
    if kind == "sacct":
        _load_parsable(store, path, relation)
        files.sacct.append((path, relation))
    elif kind in ("sacct-json", "squeue-json"):
        document = _json(path)
        jobs = document.get("jobs") or []
        if kind == "sacct-json":
            rows = [sacct_json_row(j) for j in jobs if isinstance(j, dict)]
        else:
            rows = [r for j in jobs if isinstance(j, dict) for r in squeue_json_rows(j)]
            updated = _json_epoch(document.get("last_update"))
            if updated is not None:
                files.stamps.append((path, updated, "squeue --json's last_update"))
        store.register_frame(
            relation, _job_frame(rows, "sacct" if kind == "sacct-json" else "squeue")
        )
        (files.sacct if kind == "sacct-json" else files.squeue).append((path, relation))
    elif kind in ("nodes", "nodes-json"):
        store.register_frame(relation, _node_frame(path, kind, timezone))
        files.nodes.append((path, relation))
    elif kind == "jobs":
        files.jobs.append((path, _job_records(path, timezone)))
    elif kind == "events":
        store.register_frame(relation, _events_frame(path, timezone))
        files.events.append((path, relation))
    elif kind == "sdiag":
        try:
            instant = sdiag_time(_text(path))
        except SlurmTimeError as exc:
            raise InputError(str(path), f"cannot read sdiag's time: {exc}") from exc
        if instant is None:
            raise InputError(str(path), "sdiag output without its 'sdiag output at' line")
        files.stamps.append((path, instant, "sdiag's own time"))
    else:
        files.topology.append((path, read_topology(path)))


def _json_epoch(value: Any) -> datetime | None:
    number = json_value(value)
    if isinstance(number, (int, float)) and not isinstance(number, bool) and 0 < number < 7e9:
        return datetime(1970, 1, 1) + timedelta(seconds=int(number))
    return None


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise unreadable(path, exc) from exc


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
            f"{len(header)} AS _expected, {columns}, 'sacct' AS _source, _bytes FROM ("
            "SELECT row_number() OVER () AS _row, string_split(line, '|') AS f, "
            "strlen(line) AS _bytes FROM read_csv("
            "$path, columns = {'line': 'VARCHAR'}, header = true, delim = chr(30), quote = '', "
            # DuckDB's parallel reader drops a last line longer than its limit without a word
            "escape = '', auto_detect = false, compression = 'none', parallel = false)) "
            "WHERE f IS NOT NULL",
            {"path": str(path)},
        )
    except QueryError as exc:
        _fail_on_a_long_line(path, header)
        raise InputError(str(path), f"cannot read: {exc.message}") from exc
    if (store.scalar(f"SELECT max(_bytes) FROM {relation}") or 0) > _MAX_LINE:
        _fail_on_a_long_line(path, header)


def _fail_on_a_long_line(path: Path, header: list[str]) -> None:
    """Name the line (and field) DuckDB's CSV reader could not take, when one is too long."""
    try:
        with path.open("rb") as fh:
            for number, line in enumerate(fh):
                if len(line) <= _MAX_LINE:
                    continue
                fields = line.split(b"|")
                longest = max(range(len(fields)), key=lambda i: len(fields[i]))
                column = header[longest] if longest < len(header) else None
                raise InputError(
                    str(path),
                    f"a line of {len(line) / 2**20:,.1f} MiB (a sacct line holds a few hundred "
                    f"bytes; the longest read is {_MAX_LINE // 2**20} MiB): not sacct output?",
                    row=number,  # the header is line 0
                    column=column,
                )
    except OSError:
        return


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


_NODE_SCHEMA: dict[str, PolarsDataType] = {
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
    "reason_time": pl.Datetime("us"),
    "_reject_column": pl.Utf8,
    "_reject_reason": pl.Utf8,
    "_reject_value": pl.Utf8,
    "_row": pl.Int64,
}


def _node_frame(path: Path, kind: str, timezone: str) -> pl.DataFrame:
    rows: list[dict[str, Any]] = []
    if kind == "nodes-json":
        for node in _json(path).get("nodes") or []:
            if isinstance(node, dict):
                fields = json_node_fields(node)
                row = node_row(fields)
                row["reason_time"] = _json_epoch(node.get("reason_changed_at"))
                rows.append(row)
    else:
        try:
            for _, line in records(_text(path).splitlines(), "NodeName"):
                fields = split_node_line(line)
                row = node_row(fields)
                row["reason_time"] = reason_time(fields.get("Reason"), timezone)
                rows.append(row)
        except ValueError as exc:
            raise InputError(
                str(path), f"{exc}; run scontrol -d -o show node (-o: one line per node)"
            ) from exc
    for number, row in enumerate(rows, 1):
        row["_row"] = number
    return pl.DataFrame(rows, schema=_NODE_SCHEMA) if rows else pl.DataFrame(schema=_NODE_SCHEMA)


def _job_records(path: Path, timezone: str) -> list[JobRecord]:
    try:
        return [job_record(line, timezone) for _, line in records(_text(path).splitlines(), "JobId")]
    except ValueError as exc:
        raise InputError(str(path), f"{exc}; run scontrol -d -o show job") from exc


def _layout_frame(jobs: list[tuple[Path, list[JobRecord]]]) -> pl.DataFrame:
    """The GPUs scontrol -d show job gives each node of a running or suspended job (the
    last file wins); an ended job it still lists has released them (its GRES is empty)."""
    rows = {
        (r.job_id, node): (r.start, gpus)
        for _, records_ in jobs
        for r in records_
        if r.start is not None and r.error is None and r.state in ("RUNNING", "SUSPENDED")
        for node, gpus in r.layout.items()
    }
    return pl.DataFrame(
        [(job, node, start, gpus) for (job, node), (start, gpus) in rows.items()],
        schema={"job_id": pl.Utf8, "node": pl.Utf8, "start": pl.Datetime("us"), "gpus": pl.Float64},
        orient="row",
    )


def _switches_frame(jobs: list[tuple[Path, list[JobRecord]]]) -> pl.DataFrame:
    rows = {r.job_id: r.switches for _, records_ in jobs for r in records_ if r.switches}
    return pl.DataFrame(
        list(rows.items()), schema={"job_id": pl.Utf8, "switches": pl.Int64}, orient="row"
    )


_EVENT_SCHEMA: dict[str, PolarsDataType] = {
    "node_id": pl.Utf8,
    "start_time": pl.Datetime("us"),
    "end_time": pl.Datetime("us"),
    "state": pl.Utf8,
    "reason": pl.Utf8,
    "slurm_state": pl.Utf8,
    "user": pl.Utf8,
    "_row": pl.Int64,
    "_reject_column": pl.Utf8,
    "_reject_reason": pl.Utf8,
    "_reject_value": pl.Utf8,
}


def _events_frame(path: Path, timezone: str) -> pl.DataFrame:
    try:
        rows = event_rows(_text(path), timezone)
    except ValueError as exc:
        raise InputError(str(path), str(exc)) from exc
    return pl.DataFrame(rows, schema=_EVENT_SCHEMA) if rows else pl.DataFrame(schema=_EVENT_SCHEMA)


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
        "(\"NodeList\" LIKE '%[%' OR \"NodeList\" LIKE '%,%' OR trim(\"NodeList\") LIKE '% %') "
        "AND \"NodeList\" <> 'None assigned'",
    )
    store.register_frame(_HOSTS, hosts_frame(multi))
    store.register_frame(
        _TASKS, tasks_frame(_distinct(store, relations, '"JobID"', f"{_COMPRESSED} IS NOT NULL"))
    )
    pairs = store.sql(
        " UNION ".join(
            f"SELECT DISTINCT COALESCE(\"QOS\", '') AS qos, COALESCE(\"Partition\", '') AS partition "
            f"FROM {rel}"
            for rel in relations
        )
    )
    store.register_frame(_PRIORITY, priority_frame(pairs, priority_map))


# SQL: a compressed pending array JobID (29_[0-9%1]), else NULL
_COMPRESSED = "NULLIF(regexp_extract(\"JobID\", '^[0-9]+_\\[[^\\]]+\\]$'), '')"
_MAX_TASKS = 1_000_000  # Slurm's MaxArraySize is at most 4,000,001
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


def tasks_frame(job_ids: Iterable[str]) -> pl.DataFrame:
    """One row per task of each compressed pending array JobID (``29_[0-9%1]``: 29_0 ...
    29_9), the way sacct prints an array's tasks that have not started yet."""
    ids: list[str] = []
    tasks: list[str] = []
    for job_id in job_ids:
        base, _, rest = job_id.partition("_[")
        try:
            numbers = array_tasks(rest.rstrip("]"))
        except ValueError:
            continue  # kept as one request, as printed
        if len(numbers) > _MAX_TASKS:
            continue
        ids.extend([job_id] * len(numbers))
        tasks.extend(f"{base}_{n}" for n in numbers)
    return pl.DataFrame({"job_id": ids, "task": tasks}, schema={"job_id": pl.Utf8, "task": pl.Utf8})


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


# -- the SQL of the four tables --------------------------------------------------------

_UNSET = "(" + ", ".join(f"'{u}'" for u in UNSET) + ")"
_ROW = "/*row*/"  # where the numbered scan adds _row
# the states of a job whose record has ended (its End is known or follows from Elapsed)
_LIVE_STATES = (
    "('RUNNING', 'SUSPENDED', 'PENDING', 'COMPLETING', 'CONFIGURING', 'RESIZING', "
    "'STAGE_OUT', 'SIGNALING', 'REQUEUE_HOLD', 'REQUEUE_FED', 'SPECIAL_EXIT', 'STOPPED')"
)
_INELIGIBLE = "(" + ", ".join(f"'{r}'" for r in INELIGIBLE_REASONS) + ")"


def sql_time(column: str) -> str:
    """SQL: a sacct time (epoch seconds or local ISO time in $tz) as a UTC TIMESTAMP; the
    rule of :func:`fleetaudit.inputs.ingest.slurm_times.parse_slurm_time`."""
    c = f'j."{column}"'
    return (
        f"CASE WHEN {c} IS NULL OR trim({c}) IN {_UNSET} THEN NULL "
        f"WHEN regexp_full_match(trim({c}), '[0-9]{{1,11}}') THEN "
        f"CAST(to_timestamp(CAST(trim({c}) AS BIGINT)) AS TIMESTAMP) "
        f"WHEN regexp_full_match(trim({c}), "
        "'[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}(:[0-9]{2})?)?') THEN "
        f"CAST(timezone($tz, TRY_CAST(replace(trim({c}), 'T', ' ') AS TIMESTAMP)) AS TIMESTAMP) "
        "END"
    )


def _bad_time(column: str) -> str:
    c = f'j."{column}"'
    return f"({c} IS NOT NULL AND trim({c}) NOT IN {_UNSET} AND j._t_{column.lower()} IS NULL)"


def _jobs(relation: str, times_of: tuple[str, ...] = ("Submit", "Eligible", "Start", "End")) -> str:
    """SQL: the job rows (steps skipped; a compressed pending array once per task) with the
    parsed times of ``times_of``, ``_state``, ``_ran`` and ``_key`` (the job's request key
    before its submit time: the array task ``29_3`` for an array task, else JobIDRaw)."""
    times = ", ".join(f"{sql_time(c)} AS _t_{c.lower()}" for c in times_of)
    ran = (
        'COALESCE(j."Start" IS NOT NULL AND trim(j."Start") NOT IN ' + _UNSET + " "
        "AND COALESCE(j.\"NodeList\", 'None assigned') NOT IN ('None assigned', '(null)') "
        "AND NULLIF(j.\"AllocTRES\", '') IS NOT NULL AND j._source = 'sacct', FALSE)"
    )
    return (
        f"SELECT j.*, {times}, upper(split_part(trim(j.\"State\"), ' ', 1)) AS _state, "
        f"{ran} AS _ran, "
        "CASE WHEN regexp_full_match(j.\"JobID\", '[0-9]+_[0-9]+') THEN j.\"JobID\" "
        'ELSE j."JobIDRaw" END AS _key '
        "FROM (SELECT j.* REPLACE (COALESCE(t.task, j.\"JobID\") AS \"JobID\", "
        "COALESCE(t.task, j.\"JobIDRaw\") AS \"JobIDRaw\") "
        f"FROM {relation} AS j LEFT JOIN {_TASKS} AS t ON t.job_id = j.\"JobID\") AS j "
        "WHERE strpos(COALESCE(j.\"JobID\", ''), '.') = 0"  # job steps: 1000.batch, 1000.0
    )


def _ended(end: str = "j._t_end") -> str:
    """SQL: a job's end, or for a record that ended without one (NODE_FAIL with End=0)
    its start plus its elapsed time."""
    return (
        f"COALESCE({end}, CASE WHEN j._state NOT IN {_LIVE_STATES} "
        "AND TRY_CAST(j.\"ElapsedRaw\" AS BIGINT) >= 0 THEN j._t_start + "
        'to_seconds(TRY_CAST(j."ElapsedRaw" AS BIGINT)) END)'
    )


def _seen_at(store: Store, relation: str, timezone: str) -> datetime | None:
    """When sacct printed its output: a running job's start plus its elapsed time (sacct
    computes a running job's Elapsed at that instant); None without a running job."""
    value = store.scalar(
        f"SELECT max({sql_time('Start')} + to_seconds(TRY_CAST(j.\"ElapsedRaw\" AS BIGINT))) "
        f"FROM {relation} AS j WHERE upper(split_part(trim(j.\"State\"), ' ', 1)) = 'RUNNING' "
        "AND TRY_CAST(j.\"ElapsedRaw\" AS BIGINT) >= 0 AND strpos(j.\"JobID\", '.') = 0",
        {"tz": timezone},
    )
    return value if isinstance(value, datetime) else None


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
            f"'cannot read the time ' || left(j.\"{c}\", 40) || "
            "' (epoch seconds or YYYY-MM-DDTHH:MM:SS)'",
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


def _state_events(store: Store, relation: str, export_time: datetime | None) -> str | None:
    """The frame of the open health interval of every node not healthy at the export
    (scontrol's state): from the time scontrol stamped its reason with, else from the
    export's own time; a node with neither keeps its health column only. None: no node."""
    nodes = store.sql(
        f"SELECT _row, node_id, state, reason, reason_time FROM {relation} "
        "WHERE health IS NOT NULL AND health <> 'healthy' AND node_id IS NOT NULL "
        "AND _reject_reason IS NULL ORDER BY _row"
    )
    rows = [
        {
            "_row": r["_row"],
            "node_id": r["node_id"],
            "start_time": r["reason_time"] or export_time,
            "state": event_state(r["state"] or ""),
            "reason": r["reason"],
            "slurm_state": r["state"],
        }
        for r in nodes.iter_rows(named=True)
        if (r["reason_time"] or export_time) is not None
    ]
    if not rows:
        return None
    name = f"{relation}_events"
    store.register_frame(name, pl.DataFrame(rows, schema=_EVENT_SCHEMA))
    return name


def _events_source(path: Path, relation: str, source: str) -> Source:
    """node_events from a frame of :data:`_EVENT_SCHEMA`: sacctmgr's events
    (``slurm:sacctmgr``) or the intervals of the nodes' states (``slurm:scontrol``)."""
    select = (
        "SELECT node_id, CAST(NULL AS BIGINT) AS gpu_index, start_time, end_time, state, "
        f"reason, '{source}' AS source, slurm_state, \"user\", "
        f"_reject_column, _reject_reason, _reject_value{_ROW} FROM {relation} ORDER BY _row"
    )
    return Source(
        file=str(path),
        table="node_events",
        select=select.replace(_ROW, ""),
        numbered=select.replace(_ROW, ", _row"),
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
    split = "l.gpus IS NULL"  # no layout from scontrol -d show job: the totals are dealt
    select = (
        "SELECT j.\"JobIDRaw\" || ':' || CAST(CAST(epoch(j._t_start) AS BIGINT) AS VARCHAR) "
        "|| '@' || _node AS alloc_id, "
        "CASE WHEN j.\"JobID\" LIKE '%+%' THEN split_part(j.\"JobID\", '+', 1) "
        'ELSE j."JobIDRaw" END AS job_id, '
        "_node AS node_id, "
        # a suspended job releases its CPUs (its GPUs and memory stay allocated)
        f"COALESCE(l.gpus, {_split(gpus)}) AS gpus, "
        f"CASE WHEN j._state = 'SUSPENDED' THEN 0 ELSE {_split(cpus)} END AS cpus, "
        "t.mem_mib / _n / 1024 AS memory_gib, "
        "p.priority AS priority, "
        f"CASE WHEN {gpus} = 0 THEN 'cpu_only' WHEN {_INTERACTIVE} THEN 'development' "
        "ELSE 'training' END AS workload, "
        f'j."Account" AS tenant, j._t_start AS start_time, {_ended()} AS end_time, '
        'j."JobID" AS slurm_job_id, j."User" AS "user", j."Partition" AS "partition", '
        'j."QOS" AS qos, j."State" AS state, j."ExitCode" AS exit_code, '
        'TRY_CAST(j."Restarts" AS BIGINT) AS restarts, j."Reason" AS reason, '
        'TRY_CAST(j."TimelimitRaw" AS DOUBLE) * 60 AS timelimit_s, t.gpu_type AS gpu_type, '
        "j._state = 'SUSPENDED' AS suspended, "
        f"_n > 1 AND (({split} AND {gpus} <> floor({gpus} / _n) * _n) "
        f"OR {cpus} <> floor({cpus} / _n) * _n) AS uneven_split, "
        "CASE WHEN l.gpus IS NOT NULL THEN 'scontrol' WHEN _n > 1 THEN 'split' END AS gpus_layout, "
        f"j._t_end IS NULL AND {_ended()} IS NOT NULL AS end_from_elapsed, "
        f"{_reject(rejects)}{_ROW} "
        'FROM (SELECT j.*, COALESCE(h.node, CASE WHEN h.nodelist IS NULL THEN trim(j."NodeList") END) '
        "AS _node, COALESCE(h.n, 1) AS _n, COALESCE(h.idx, 0) AS _idx, h.error AS _h_error "
        f"FROM ({_jobs(relation, ('Start', 'End'))}) AS j "
        f'LEFT JOIN {_HOSTS} AS h ON h.nodelist = j."NodeList" WHERE j._ran) AS j '
        f'LEFT JOIN {_TRES} AS t ON t.tres = j."AllocTRES" '
        f"LEFT JOIN {_PRIORITY} AS p ON p.qos = COALESCE(j.\"QOS\", '') "
        "AND p.partition = COALESCE(j.\"Partition\", '') "
        f'LEFT JOIN {_LAYOUT} AS l ON l.job_id = j."JobIDRaw" AND l.node = j._node '
        "AND l.start = j._t_start "
        # a bad line is one reject, not one per node of its hostlist
        f"WHERE j._idx = 0 OR NOT COALESCE({_any_bad(rejects)}, FALSE) "
        "ORDER BY j._row, j._idx"
    )
    return _source(path, "allocations", select, timezone)


def _requests_source(path: Path, relation: str, timezone: str) -> Source:
    # g: GPUs asked (ReqTRES, else AllocTRES); pods: nodes asked, at most one per GPU
    g = "COALESCE(r.gpus, a.gpus, 0)"
    nodes = 'COALESCE(NULLIF(TRY_CAST(j."NNodes" AS DOUBLE), 0), r.nodes, 1)'
    pods = f"GREATEST(LEAST({nodes}, {g}), 1)"
    per_pod = f"ceil({g} / {pods})"
    gpus = f"CASE WHEN {g} > 0 THEN {per_pod} * {pods} ELSE 0 END"
    cpus = 'COALESCE(TRY_CAST(j."ReqCPUS" AS DOUBLE), r.cpus, a.cpus)'
    mem = "COALESCE(r.mem_mib, a.mem_mib)"
    end = _ended()
    left = f"CASE WHEN j._ran THEN j._t_start ELSE {end} END"  # when the job left the queue
    switches = 'COALESCE(TRY_CAST(j."ReqSwitches" AS BIGINT), w.switches)'
    # --switches=N above 1: the level above the leaves, where one holds N of them
    block_leaves = (
        f"(SELECT max(n) FROM (SELECT count(DISTINCT switch_id) AS n FROM {_TOPOLOGY} "
        "WHERE block_id IS NOT NULL GROUP BY block_id))"
    )
    # not waiting for capacity: held, waiting on another job, before its begin time
    ineligible = f'NOT j._ran AND trim(j."Reason") IN {_INELIGIBLE}'
    held = ineligible + " AND trim(j.\"Reason\") <> 'BeginTime'"
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
        "SELECT j._key || ':' || CAST(CAST(epoch(j._t_submit) AS BIGINT) AS VARCHAR) "
        "AS request_id, "
        "j._t_submit AS submit_time, "
        f"CASE WHEN {held} THEN NULL "
        f"WHEN j._t_eligible >= j._t_submit AND j._t_eligible <= COALESCE({left}, j._t_eligible) "
        "THEN j._t_eligible END AS eligible_time, "
        f'CASE WHEN {ineligible} THEN trim(j."Reason") END AS ineligible_reason, '
        f"{left} AS start_time, "
        "r.gpu_model AS gpu_model, "
        f"{gpus} AS gpus, CASE WHEN {g} > 0 THEN {per_pod} END AS gpus_per_pod, "
        f"CASE WHEN {g} > 0 THEN {cpus} / ({gpus}) END AS cpus_per_gpu, "
        f"CASE WHEN {g} > 0 THEN {mem} / 1024 / ({gpus}) END AS memory_gib_per_gpu, "
        f"CASE WHEN {g} = 0 THEN {cpus} END AS cpus, "
        f"CASE WHEN {g} = 0 THEN {mem} / 1024 END AS memory_gib, "
        f"CASE WHEN {g} = 0 THEN NULL WHEN {pods} <= 1 THEN 'node' "
        f"WHEN COALESCE({switches}, 0) <= 0 THEN 'any' WHEN {switches} = 1 THEN 'switch' "
        f"WHEN {switches} <= {block_leaves} THEN 'block' ELSE 'any' END AS locality, "
        f"CASE WHEN j._ran AND {end} IS NOT NULL THEN COALESCE(TRY_CAST(j.\"ElapsedRaw\" AS DOUBLE), "
        f"epoch({end}) - epoch(j._t_start)) "
        'ELSE TRY_CAST(j."TimelimitRaw" AS DOUBLE) * 60 END AS duration_s, '
        "CAST(NULL AS DOUBLE) AS start_deadline_s, p.priority AS priority, "
        'j."Account" AS tenant, '
        'j."JobID" AS slurm_job_id, j."JobIDRaw" AS slurm_job_id_raw, j."User" AS "user", '
        'j."Partition" AS "partition", '
        'j."QOS" AS qos, j."State" AS state, j."Reason" AS reason, '
        'TRY_CAST(j."NNodes" AS BIGINT) AS nnodes, '
        "CASE WHEN j.\"JobID\" LIKE '%+%' THEN split_part(j.\"JobID\", '+', 1) END AS het_job_id, "
        f"NOT (j._ran AND {end} IS NOT NULL) AS duration_is_limit, "
        f"NOT j._ran AND {left} IS NOT NULL AS never_started, "
        f"{g} > 0 AND {gpus} <> {g} AS uneven_split, "
        f"{switches} AS req_switches, j._source AS slurm_source, "
        f"{_reject(rejects)}{_ROW} "
        f"FROM ({_jobs(relation)}) AS j "
        f'LEFT JOIN {_TRES} AS r ON r.tres = j."ReqTRES" '
        f'LEFT JOIN {_TRES} AS a ON a.tres = j."AllocTRES" '
        f"LEFT JOIN {_PRIORITY} AS p ON p.qos = COALESCE(j.\"QOS\", '') "
        "AND p.partition = COALESCE(j.\"Partition\", '') "
        f'LEFT JOIN {_SWITCHES} AS w ON w.job_id = j."JobIDRaw" '
        # a line the allocations already reject (a job that ran) is not rejected twice
        f"WHERE NOT (j._ran AND COALESCE({_any_bad(_ALLOC_LINE_REJECTS)}, FALSE)) "
        "ORDER BY j._row"
    )
    return _source(path, "requests", select, timezone)
