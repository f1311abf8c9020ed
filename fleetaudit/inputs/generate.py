"""Deterministic synthetic GPU fleet shaped like Alibaba's ASI platform.

`generate_fleet(out, options)` writes the four native tables of SPEC §1
(`nodes`, `allocations`, `requests`, `telemetry`) into the folder `out`, as
`<table>.parquet` (default) or `<table>.csv`, and with `options.node_events` a fifth,
`node_events` (health intervals: :func:`_node_events_table`). The defaults give an ASI-sized
fleet (OSDI 2026: about 155k GPUs on 19,400 nodes in access-switch domains,
81 departments) over 90 days ending at the export time `options.end`.

Contract:
- Deterministic: the same options give byte-identical files. Every random draw
  comes from a numpy Generator seeded by (seed, stream, block); nothing
  depends on the clock, the process or dict/set order.
- Capacity holds by construction: no node is ever over capacity at any
  instant, in GPUs (whole parts plus shares packed first-fit-decreasing), CPUs
  or memory. Each node's GPUs, CPUs and memory are split once into fixed
  *lanes* whose capacities add up to at most the node's; a lane runs one
  allocation at a time (gangs are lanes spanning whole nodes of one switch
  domain). Shares are powers of two laid out to fill whole GPUs, so any subset
  of them packs first-fit-decreasing into no more GPUs than planned. The one
  exception is opt-in: `harvested_nights` records low-priority work on sleeping
  containers' GPUs, beside them, as a harvesting fleet's record holds it.
- Allocations overlap the window [end - days, end]; those that began before
  the window keep their true start_time. end_time is null for allocations
  still running at `end`.
- Telemetry covers only the last `telemetry_days` (capped at `days`) before
  `end`, one row per allocated GPU every `telemetry_step_s`; its last sample is
  at `end` exactly, so `end` is the latest timestamp in the data (the SPEC's
  export time).
- Timestamps are UTC: timestamp[us, tz=UTC] in Parquet, ISO 8601 with a
  trailing Z in CSV.
- Files are written to temporary names in `out` and moved into place with
  `os.replace` only when every table is complete, so a killed run never
  leaves a half-written file under a final name.
- Memory is bounded: nodes are processed in blocks of whole switch domains and
  every table is written incrementally.

The model, for maintainers: every lane alternates busy phases of high-priority
work (online inference around the clock or by day, training, development,
CPU-only) with idle windows that low-priority work (mostly offline inference,
some training) fills after a delay, a few windows staying empty. The lane
kinds, layouts and durations below are calibrated at ASI scale to the paper's
figures (see the comment above them); change them together and re-measure.

Files of the other format already in `out` are left alone. Only numpy, pyarrow
and the standard library are used (no duckdb, typer, rich).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from fleetaudit.core.options import GenerateOptions
from fleetaudit.model import schema

__all__ = ["GenerateOptions", "GenerateResult", "generate_fleet"]

TABLES = schema.INGEST_ORDER[:4]  # nodes, allocations, requests, telemetry
EVENTS = "node_events"  # written too when GenerateOptions.node_events > 0
FORMATS = ("parquet", "csv")
WORKLOADS = schema.WORKLOAD
PRIORITIES = schema.PRIORITY
HEALTH = schema.HEALTH
TENANTS = tuple(f"dept-{i:02d}" for i in range(1, 82))


@dataclass(frozen=True)
class GenerateResult:
    """What `generate_fleet` wrote.

    Attributes:
        out: the folder holding the tables.
        files: table name -> file written.
        rows: table name -> rows written.
        gpus: GPUs installed in the fleet.
    """

    out: Path
    files: dict[str, Path]
    rows: dict[str, int]
    gpus: int


# --------------------------------------------------------------------------
# Fleet shape. Tuned so that the defaults land on the ASI paper's figures:
# 68% of healthy GPU-hours allocated to high priority, 93% with low priority;
# jobs 54.6% online inference, 21.6% offline, 19.5% training, 3.4% development;
# durations median ~5 h, p90 ~24 h.
# --------------------------------------------------------------------------

_DAY = 86_400
_HOUR = 3_600
_US = 1_000_000
# Lanes start this long before the window so that the window opens on a fleet
# in steady state rather than an empty one.
_WARMUP_S = 5 * _DAY
_BLOCK_NODES = 1024
# Telemetry is built in chunks of at most this many (GPU, sample) cells, which
# bounds memory whatever telemetry_days is.
_TEL_CHUNK_CELLS = 4_000_000
# Share of a node's CPUs and memory split among its GPU lanes in proportion to
# GPUs; the rest is the CPU-only lane, so CPU-only work always fits beside
# fully allocated GPUs.
_GPU_HOST_SHARE = 0.875
_ID_WIDTH = 9


@dataclass(frozen=True)
class _Model:
    name: str
    gpus: int
    cpus: int
    memory_gib: int
    weight: float  # share of switch domains
    training: float  # chance that a domain of this model hosts training gangs


_MODELS = (
    _Model("H20", 8, 192, 2048, 0.36, 0.30),
    _Model("H800", 8, 128, 2048, 0.20, 0.75),
    _Model("A100", 8, 128, 1024, 0.16, 0.55),
    _Model("L20", 8, 128, 1024, 0.14, 0.10),
    _Model("A10", 4, 96, 1024, 0.09, 0.0),
    _Model("XPU-A", 16, 192, 2048, 0.05, 0.0),
)

# Node health at export: ~3% unhealthy.
_HEALTH_P = (0.97, 0.012, 0.010, 0.008)

# Lane kinds. A lane's kind fixes its high-priority workload and its rhythm.
_ONLINE_BASE, _ONLINE_DAY, _TRAIN, _GANG, _DEV, _CPU = range(6)


@dataclass(frozen=True)
class _Kind:
    workload: int  # index into WORKLOADS of its high-priority work
    hp_median_h: float  # lognormal high-priority durations
    hp_sigma: float
    phase_n: float  # mean high-priority allocations per busy phase (not diurnal)
    lp_window_median_h: float  # lognormal idle windows between busy phases
    lp_window_sigma: float
    gap_mean_s: float  # mean gap between back-to-back high-priority allocations
    day: tuple[int, int] | None  # diurnal: busy from..to (UTC seconds of day)
    lp_median_h: float  # lognormal low-priority durations in the idle windows
    lp_sigma: float
    sleepable: float  # chance a high-priority allocation is a warm container


_KINDS = (
    # online inference around the clock (base load; many warm containers)
    _Kind(0, 7.0, 1.6, 8, 38.0, 0.9, 600, None, 14.0, 1.2, 0.45),
    # online inference replicas by day (08:00-22:00 Beijing), the night to LP
    _Kind(0, 3.0, 1.0, 0, 0, 0, 300, (0, 13 * _HOUR), 14.0, 1.0, 0.15),
    # training on one node
    _Kind(2, 8.0, 1.4, 5, 38.0, 1.0, 900, None, 14.0, 1.2, 0.0),
    # training gangs on whole nodes of one switch domain
    _Kind(2, 12.0, 1.1, 4, 26.0, 1.0, 1800, None, 14.0, 1.2, 0.0),
    # development, working hours (09:00-19:00 Beijing)
    _Kind(3, 3.0, 1.0, 0, 0, 0, 900, (1 * _HOUR, 11 * _HOUR), 14.0, 1.0, 0.0),
    # CPU-only work on the CPUs and memory the GPU lanes leave over
    _Kind(4, 6.0, 1.1, 3, 10.0, 1.0, 600, None, 6.0, 1.0, 0.0),
)

# Lane layouts of a node by GPUs per node: GPU sizes of the lanes, "S" is one
# GPU shared by power-of-two shares (variants below), with relative weights.
_LAYOUTS: dict[int, tuple[tuple[tuple[Any, ...], float], ...]] = {
    4: (
        ((4,), 0.30),
        ((2, 2), 0.30),
        ((2, 1, 1), 0.20),
        ((2, 1, "S"), 0.12),
        ((1, 1, 1, "S"), 0.08),
    ),
    8: (
        ((8,), 0.22),
        ((4, 4), 0.22),
        ((4, 2, 2), 0.14),
        ((2, 2, 2, 2), 0.08),
        ((4, 2, 1, 1), 0.10),
        ((4, 2, 1, "S"), 0.08),
        ((2, 2, 2, 1, "S"), 0.04),
        ((2, 2, 1, 1, 1, 1), 0.05),
        ((4, 1, 1, 1, "S"), 0.04),
        ((1,) * 8, 0.03),
    ),
    16: (
        ((16,), 0.10),
        ((8, 8), 0.35),
        ((8, 4, 4), 0.25),
        ((4, 4, 4, 4), 0.15),
        ((8, 4, 2, 2), 0.15),
    ),
}
_SHARES = (((0.5, 0.5), 0.4), ((0.5, 0.25, 0.25), 0.35), ((0.25, 0.25, 0.25, 0.25), 0.25))

# Lane kind by lane size (GPUs; 0.5 stands for any share): weights over
# (ONLINE_BASE, ONLINE_DAY, TRAIN, DEV).
_KIND_BY_SIZE = {
    0.5: (0.46, 0.51, 0.0, 0.03),
    1: (0.34, 0.24, 0.39, 0.03),
    2: (0.26, 0.21, 0.50, 0.03),
    4: (0.28, 0.18, 0.52, 0.02),
    8: (0.36, 0.14, 0.50, 0.0),
    16: (0.30, 0.0, 0.70, 0.0),
}
_CPU_LANE_P = 0.25  # nodes that run CPU-only work beside their GPUs
_GANG_SHARE = 0.8  # healthy nodes of a training domain that form gang tracks
_GANG_SIZES = (32, 16, 8, 4, 2)  # nodes per gang track (a domain holds 32-64 nodes)
_GANG_WEIGHTS = (3.0, 3.0, 2.0, 1.5, 1.0)
_GANG_LP_WHOLE = 0.35  # idle gang windows taken by one low-priority gang
_LP_TRAINING = 0.4  # low-priority fill of training lanes that is training

_CPUS_PER_GPU = np.array([4, 8, 12, 16])
_CPUS_PER_GPU_P = np.array([0.25, 0.4, 0.25, 0.10])
_MEM_PER_GPU = np.array([32, 64, 96, 128, 192])
_MEM_PER_GPU_P = np.array([0.15, 0.3, 0.25, 0.2, 0.1])
_REQUEST_HOURS = np.array([0.5, 1, 2, 4, 8, 12, 24, 48, 72, 168, 336, 720])

_NODE_SCHEMA = pa.schema(
    [
        ("node_id", pa.string()),
        ("gpu_model", pa.string()),
        ("gpus", pa.int64()),
        ("cpus", pa.int64()),
        ("memory_gib", pa.int64()),
        ("switch_id", pa.string()),
        ("health", pa.string()),
    ]
)
_TS = pa.timestamp("us", tz="UTC")
_ALLOC_SCHEMA = pa.schema(
    [
        ("alloc_id", pa.string()),
        ("job_id", pa.string()),
        ("node_id", pa.string()),
        ("gpus", pa.float64()),
        ("cpus", pa.int64()),
        ("memory_gib", pa.int64()),
        ("priority", pa.string()),
        ("workload", pa.string()),
        ("tenant", pa.string()),
        ("start_time", _TS),
        ("end_time", _TS),
        ("checkpoint_interval_s", pa.int64()),
        ("sleepable", pa.bool_()),
    ]
)
_REQUEST_SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),
        ("submit_time", _TS),
        ("start_time", _TS),
        ("gpu_model", pa.string()),
        ("gpus", pa.float64()),
        ("gpus_per_pod", pa.float64()),
        ("cpus_per_gpu", pa.float64()),
        ("memory_gib_per_gpu", pa.float64()),
        ("cpus", pa.int64()),
        ("memory_gib", pa.int64()),
        ("locality", pa.string()),
        ("duration_s", pa.int64()),
        ("start_deadline_s", pa.int64()),
        ("priority", pa.string()),
        ("tenant", pa.string()),
        ("job_id", pa.string()),  # the job whose allocations ran it (null: still pending)
    ]
)
_TELEMETRY_SCHEMA = pa.schema(
    [
        ("ts", _TS),
        ("node_id", pa.string()),
        ("gpu_index", pa.int32()),
        ("sm_active", pa.float64()),
        ("mem_used", pa.float64()),
        ("alloc_id", pa.string()),
    ]
)
_EVENT_SCHEMA = pa.schema(
    [
        ("node_id", pa.string()),
        ("gpu_index", pa.int64()),
        ("start_time", _TS),
        ("end_time", _TS),
        ("state", pa.string()),
        ("reason", pa.string()),
        ("source", pa.string()),
    ]
)
_SCHEMAS = {
    "nodes": _NODE_SCHEMA,
    "allocations": _ALLOC_SCHEMA,
    "requests": _REQUEST_SCHEMA,
    "telemetry": _TELEMETRY_SCHEMA,
    EVENTS: _EVENT_SCHEMA,
}

# Department sizes follow a Zipf-like law: a few large departments own most work.
_TENANT_P = 1.0 / np.arange(1, len(TENANTS) + 1) ** 0.9
_TENANT_P /= _TENANT_P.sum()


def generate_fleet(
    out: Path,
    options: GenerateOptions = GenerateOptions(),
    progress: Callable[[str, float], None] | None = None,
) -> GenerateResult:
    """Write a synthetic ASI-like fleet's four tables into `out`.

    Args:
        out: folder to write into; created if missing.
        options: what to generate (sizes, seed, format, telemetry).
        progress: called as progress(message, fraction done) after each block
            of nodes and at the end.

    Returns:
        The files written, their row counts and the fleet's installed GPUs.

    Raises:
        ValueError: when an option is out of range.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     r = generate_fleet(Path(d), GenerateOptions(nodes=12, days=1, format="csv"))
        ...     sorted(r.files) == sorted(TABLES) and r.rows["nodes"] == 12
        True
    """
    _validate(options)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    end_s = _epoch_seconds(options.end)
    window_s = round(options.days * _DAY)
    tel_steps = int(min(options.telemetry_days, options.days) * _DAY) // options.telemetry_step_s
    ctx = _Context(
        seed=options.seed,
        end_s=end_s,
        start_s=end_s - window_s,
        t0=end_s - window_s - _WARMUP_S,
        tel_step=options.telemetry_step_s,
        tel_ts=end_s - options.telemetry_step_s * np.arange(tel_steps - 1, -1, -1, dtype=np.int64),
        harvested_nights=options.harvested_nights,
    )
    fleet = _layout(options.nodes, options.seed, ctx)
    suffix = "." + options.format
    tables = (*TABLES, EVENTS) if options.node_events > 0 else TABLES
    files = {t: out / f"{t}{suffix}" for t in tables}
    temps = {t: out / f".{t}{suffix}.partial" for t in tables}
    rows = dict.fromkeys(tables, 0)
    writers: dict[str, _Writer] = {}
    try:
        for t in tables:
            writers[t] = _Writer(temps[t], _SCHEMAS[t], options.format)
        rows["nodes"] = writers["nodes"].write(_nodes_table(fleet))
        if EVENTS in writers:
            rows[EVENTS] = writers[EVENTS].write(_node_events_table(fleet, ctx, options))
        ids = _Ids()
        for b, (lo, hi) in enumerate(_blocks(fleet)):
            for table, data in _block_tables(fleet, ctx, b, lo, hi, ids):
                rows[table] += writers[table].write(data)
            if progress is not None:
                progress(f"nodes {hi:,} of {options.nodes:,}", hi / options.nodes)
        rows["requests"] += writers["requests"].write(_queue_table(fleet, ctx, ids))
        for w in writers.values():
            w.close()
        for t in tables:
            os.replace(temps[t], files[t])
    finally:
        for w in writers.values():
            w.close()
        for t in tables:
            temps[t].unlink(missing_ok=True)
    if progress is not None:
        progress("done", 1.0)
    return GenerateResult(out=out, files=files, rows=rows, gpus=int(fleet.gpus.sum()))


# --------------------------------------------------------------------------
# Options, ids and output
# --------------------------------------------------------------------------


def _validate(options: GenerateOptions) -> None:
    if not isinstance(options.nodes, int) or options.nodes < 1:
        raise ValueError(f"nodes must be an integer >= 1, got {options.nodes!r}")
    if not math.isfinite(options.days) or options.days <= 0:
        raise ValueError(f"days must be > 0, got {options.days!r}")
    if round(options.days * _DAY) < 1:
        raise ValueError(f"days must span at least one second, got {options.days!r}")
    if options.format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {options.format!r}")
    if not isinstance(options.seed, int) or options.seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {options.seed!r}")
    if not isinstance(options.telemetry_step_s, int) or options.telemetry_step_s < 1:
        raise ValueError(
            f"telemetry_step_s must be an integer >= 1, got {options.telemetry_step_s!r}"
        )
    if not math.isfinite(options.telemetry_days) or options.telemetry_days < 0:
        raise ValueError(f"telemetry_days must be >= 0, got {options.telemetry_days!r}")
    if not 0 <= options.harvested_nights <= 1:
        raise ValueError(f"harvested_nights must be in [0, 1], got {options.harvested_nights!r}")
    if not isinstance(options.end, datetime):
        raise ValueError(f"end must be a datetime, got {options.end!r}")
    if not math.isfinite(options.node_events) or options.node_events < 0:
        raise ValueError(f"node_events must be >= 0, got {options.node_events!r}")
    if not math.isfinite(options.node_events_days) or options.node_events_days <= 0:
        raise ValueError(f"node_events_days must be > 0, got {options.node_events_days!r}")


def _epoch_seconds(t: datetime) -> int:
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return math.floor(t.timestamp())


@dataclass
class _Ids:
    """Running counters, so ids stay sequential across blocks."""

    alloc: int = 0
    job: int = 0
    harvested: int = 0  # work on sleeping containers' GPUs: ids of its own, "ah-" and "jh-"


def _ids(prefix: str, first: int, n: int, width: int = _ID_WIDTH) -> pa.Array:
    nums = pa.array(np.arange(first + 1, first + n + 1, dtype=np.int64))
    return pc.binary_join_element_wise(
        prefix, pc.utf8_lpad(pc.cast(nums, pa.string()), width, "0"), ""
    )


def _timestamps(seconds: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    mask = None if valid is None else ~valid
    return pa.array(seconds.astype(np.int64) * _US, type=_TS, mask=mask)


def _take(labels: tuple[str, ...] | pa.Array, codes: np.ndarray) -> pa.Array:
    labels = labels if isinstance(labels, pa.Array) else pa.array(labels, pa.string())
    return labels.take(pa.array(codes))


def _optional(values: np.ndarray, valid: np.ndarray) -> pa.Array:
    return pa.array(values, mask=~valid)


class _Writer:
    """Appends tables to one Parquet or CSV file."""

    def __init__(self, path: Path, schema: pa.Schema, fmt: str) -> None:
        self._closed = False
        self._csv = fmt == "csv"
        if self._csv:
            self._schema = pa.schema(
                [pa.field(f.name, pa.string()) if f.type == _TS else f for f in schema]
            )
            self._writer: Any = pacsv.CSVWriter(
                str(path),
                self._schema,
                write_options=pacsv.WriteOptions(quoting_header="none", quoting_style="none"),
            )
        else:
            self._schema = schema
            self._writer = pq.ParquetWriter(str(path), schema, compression="zstd")

    def write(self, table: pa.Table) -> int:
        if self._csv:
            table = pa.table(
                [
                    pc.strftime(col.cast(pa.timestamp("s", tz="UTC")), format="%Y-%m-%dT%H:%M:%SZ")
                    if col.type == _TS
                    else col
                    for col in table.columns
                ],
                schema=self._schema,
            )
        if table.num_rows:
            self._writer.write_table(table)
        return int(table.num_rows)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._writer.close()


# --------------------------------------------------------------------------
# Fleet layout: domains, nodes, health, gang tracks
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Context:
    seed: int
    end_s: int
    start_s: int
    t0: int
    tel_step: int
    tel_ts: np.ndarray
    harvested_nights: float = 0.0


@dataclass(frozen=True)
class _Fleet:
    model: np.ndarray  # per node: index into _MODELS
    gpus: np.ndarray
    cpus: np.ndarray
    memory_gib: np.ndarray
    domain: np.ndarray  # per node: switch domain index
    health: np.ndarray  # per node: index into HEALTH
    fail_s: np.ndarray  # per node: when it left service (unhealthy nodes)
    track: np.ndarray  # per node: gang track index or -1
    domain_start: np.ndarray  # per domain: first node (plus one end marker)
    node_ids: pa.Array


def _layout(n: int, seed: int, ctx: _Context) -> _Fleet:
    rng = np.random.default_rng([seed, 0])
    # Domains of 32-64 nodes as in ASI; small fleets scale them down so that
    # they still hold several domains and GPU models.
    lo = min(32, max(4, n // 20))
    sizes: list[int] = []
    total = 0
    while total < n:
        sizes.append(int(rng.integers(lo, 2 * lo + 1)))
        total += sizes[-1]
    sizes[-1] -= total - n
    dom_sizes = np.array(sizes, dtype=np.int64)
    weights = np.array([m.weight for m in _MODELS])
    dom_model = rng.choice(len(_MODELS), size=dom_sizes.size, p=weights / weights.sum())
    dom_training = rng.random(dom_sizes.size) < np.array([m.training for m in _MODELS])[dom_model]
    domain = np.repeat(np.arange(dom_sizes.size), dom_sizes)
    model = dom_model[domain]
    gpus = np.array([m.gpus for m in _MODELS])[model]
    cpus = np.array([m.cpus for m in _MODELS])[model]
    mem = np.array([m.memory_gib for m in _MODELS])[model]
    health = rng.choice(len(HEALTH), size=n, p=np.array(_HEALTH_P))
    span = min(3 * _DAY, ctx.end_s - ctx.start_s)
    fail_s = ctx.end_s - rng.integers(0, span + 1, size=n)
    fail_s[health == 0] = np.iinfo(np.int64).max

    track = np.full(n, -1, dtype=np.int64)
    tracks = 0
    domain_start = np.concatenate([[0], np.cumsum(dom_sizes)])
    gw = np.array(_GANG_WEIGHTS)
    for d in np.flatnonzero(dom_training):
        members = np.arange(domain_start[d], domain_start[d + 1])
        members = members[(health[members] == 0) & (gpus[members] == 8)]
        left = int(len(members) * _GANG_SHARE)
        pos = 0
        while left >= 2:
            ok = np.array([s <= left for s in _GANG_SIZES])
            size = int(rng.choice(np.array(_GANG_SIZES)[ok], p=gw[ok] / gw[ok].sum()))
            track[members[pos : pos + size]] = tracks
            tracks += 1
            pos += size
            left -= size
    node_ids = _ids("node-", 0, n, width=5)
    return _Fleet(
        model=model,
        gpus=gpus,
        cpus=cpus,
        memory_gib=mem,
        domain=domain,
        health=health,
        fail_s=fail_s,
        track=track,
        domain_start=domain_start,
        node_ids=node_ids,
    )


def _nodes_table(fleet: _Fleet) -> pa.Table:
    switch_ids = _ids("sw-", 0, fleet.domain_start.size - 1, width=4)
    return pa.table(
        [
            fleet.node_ids,
            _take(tuple(m.name for m in _MODELS), fleet.model),
            pa.array(fleet.gpus, pa.int64()),
            pa.array(fleet.cpus, pa.int64()),
            pa.array(fleet.memory_gib, pa.int64()),
            switch_ids.take(pa.array(fleet.domain)),
            _take(HEALTH, fleet.health),
        ],
        schema=_NODE_SCHEMA,
    )


# Health intervals (node_events): kind, share, state, GPU-level, median hours, sources and
# reasons. The recorded health at the export is dated by an open interval (source
# "export"); a fifth of the outages are told by a second source as well, shifted a little.
_EVENT_KINDS = (
    ("xid", 0.45, "unhealthy", True, 2.0, "dcgm:xid", ("xid 79", "xid 48", "xid 94", "xid 63")),
    ("drain", 0.25, "drain", False, 6.0, "slurm:sacctmgr", ("maintenance", "kernel upgrade")),
    ("down", 0.15, "down", False, 1.0, "kubernetes:condition", ("node not ready",)),
    ("cordon", 0.10, "cordoned", False, 12.0, "kubernetes:taint", ("manual cordon",)),
    ("degraded", 0.05, "degraded", False, 24.0, "dcgm:xid", ("row remap failure",)),
)
_EVENT_SIGMA = 1.0  # lognormal spread of an interval's length
_EVENT_WEIGHT_SHAPE = 0.5  # gamma shape of a node's failure rate: a few nodes flap
_EVENT_SECOND_SOURCE = 0.2  # outages told by a second source too


def _node_events_table(fleet: _Fleet, ctx: _Context, options: GenerateOptions) -> pa.Table:
    """Health intervals over the ``node_events_days`` before the export (options doc).

    Each node draws a failure rate (gamma around ``node_events`` a year, so a few nodes
    fail far more often than the rest), then that many intervals at uniform times, of a
    kind drawn by share, with a lognormal length around the kind's median. Intervals of
    one node may overlap; an interval that would run past the export is open. The
    nodes recorded unhealthy at the export get an open interval in their recorded state
    from when they left service (the allocations stop there too)."""
    rng = np.random.default_rng([options.seed, 9])
    n = fleet.gpus.size
    span = round(options.node_events_days * _DAY)
    first = ctx.end_s - span
    rate = options.node_events * options.node_events_days / 365.0
    weight = rng.gamma(_EVENT_WEIGHT_SHAPE, 1.0 / _EVENT_WEIGHT_SHAPE, size=n)
    count = rng.poisson(rate * weight)
    node = np.repeat(np.arange(n), count)
    m = node.size
    shares = np.array([k[1] for k in _EVENT_KINDS])
    kind = rng.choice(len(_EVENT_KINDS), size=m, p=shares / shares.sum())
    median = np.array([k[4] for k in _EVENT_KINDS])[kind] * _HOUR
    length = np.maximum(np.round(median * rng.lognormal(0.0, _EVENT_SIGMA, size=m)), 60)
    start = first + rng.integers(0, span, size=m)
    end = start + length.astype(np.int64)
    gpu_level = np.array([k[3] for k in _EVENT_KINDS])[kind]
    gpu_index = np.where(gpu_level, rng.integers(0, 1 << 30, size=m) % fleet.gpus[node], -1)
    reason_pick = rng.integers(0, 1 << 30, size=m)
    # a second source for some outages: the same node, a few minutes off at either end
    second = np.flatnonzero((kind == 2) & (rng.random(m) < _EVENT_SECOND_SOURCE))
    shift = rng.integers(-600, 601, size=(second.size, 2))
    # the nodes unhealthy at the export, from when they left service
    unhealthy = np.flatnonzero((fleet.health != 0) & (fleet.fail_s < ctx.end_s))
    states = np.array([k[2] for k in _EVENT_KINDS], dtype=object)
    reasons = [k[6] for k in _EVENT_KINDS]
    sources = np.array([k[5] for k in _EVENT_KINDS], dtype=object)
    row_node = np.concatenate([node, node[second], unhealthy])
    row_gpu = np.concatenate([gpu_index, gpu_index[second], np.full(unhealthy.size, -1)])
    row_start = np.concatenate([start, start[second] + shift[:, 0], fleet.fail_s[unhealthy]])
    row_end = np.concatenate(
        [end, end[second] + shift[:, 1], np.full(unhealthy.size, np.iinfo(np.int64).max)]
    )
    row_state = np.concatenate(
        [states[kind], states[kind[second]], np.asarray(HEALTH, dtype=object)[fleet.health[unhealthy]]]
    )
    row_reason = np.concatenate(
        [
            np.array([reasons[k][r % len(reasons[k])] for k, r in zip(kind, reason_pick)], dtype=object),
            np.array(["node lost"] * second.size, dtype=object),
            np.array([None] * unhealthy.size, dtype=object),
        ]
    )
    row_source = np.concatenate(
        [sources[kind], np.array(["slurm:sacctmgr"] * second.size, dtype=object),
         np.array(["export"] * unhealthy.size, dtype=object)]
    )  # fmt: skip
    row_end = np.maximum(row_end, row_start + 60)  # a shifted second source stays an interval
    # an interval that runs past the export is still going there: open
    open_end = row_end > ctx.end_s
    order = np.lexsort((row_start, row_node))
    ts = pa.timestamp("s", tz="UTC")
    return pa.table(
        [
            fleet.node_ids.take(pa.array(row_node[order])),
            pa.array(row_gpu[order], pa.int64(), mask=row_gpu[order] < 0),
            pa.array(np.maximum(row_start[order], 0), pa.int64()).cast(ts).cast(_TS),
            pa.array(np.where(open_end, 0, row_end)[order], pa.int64(), mask=open_end[order])
            .cast(ts)
            .cast(_TS),
            pa.array(row_state[order].tolist(), pa.string()),
            pa.array(row_reason[order].tolist(), pa.string()),
            pa.array(row_source[order].tolist(), pa.string()),
        ],
        schema=_EVENT_SCHEMA,
    )


def _blocks(fleet: _Fleet) -> list[tuple[int, int]]:
    """Node ranges of whole switch domains, about _BLOCK_NODES nodes each."""
    blocks: list[tuple[int, int]] = []
    lo = 0
    for hi in fleet.domain_start[1:]:
        if hi - lo >= _BLOCK_NODES:
            blocks.append((lo, int(hi)))
            lo = int(hi)
    if lo < fleet.domain_start[-1]:
        blocks.append((lo, int(fleet.domain_start[-1])))
    return blocks


# --------------------------------------------------------------------------
# Lanes: the fixed split of each node that guarantees capacity
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Lanes:
    kind: np.ndarray
    gpus: np.ndarray  # GPUs per member node (float; < 1 is a share)
    gpu0: np.ndarray  # first GPU index on each member node
    sub: np.ndarray  # rank of a share on its GPU (telemetry attribution order)
    cpus: np.ndarray  # CPU capacity per member node
    memory_gib: np.ndarray
    owner: np.ndarray  # tenant that owns the lane's high-priority work
    day_shift: np.ndarray  # per-lane shift of the diurnal day, seconds
    member_start: np.ndarray  # CSR into members
    members: np.ndarray  # local node indices

    @property
    def n_members(self) -> np.ndarray:
        return np.diff(self.member_start)


def _layout_table() -> dict[int, tuple[np.ndarray, ...]]:
    """Per GPUs-per-node: flattened layout variants as (variant weights, lane offsets, sizes, gpu0, sub)."""
    tables: dict[int, tuple[np.ndarray, ...]] = {}
    for g, layouts in _LAYOUTS.items():
        weights: list[float] = []
        entries: list[list[tuple[float, int, int]]] = []
        for sizes, w in layouts:
            variants = _SHARES if "S" in sizes else ((None, 1.0),)
            for shares, ws in variants:
                lanes: list[tuple[float, int, int]] = []
                gpu = 0
                for s in sizes:
                    if s == "S":
                        lanes.extend((float(x), gpu, k) for k, x in enumerate(shares or ()))
                        gpu += 1
                    else:
                        lanes.append((float(s), gpu, 0))
                        gpu += int(s)
                assert gpu == g, (g, sizes)
                weights.append(w * ws)
                entries.append(lanes)
        wa = np.array(weights)
        off = np.concatenate([[0], np.cumsum([len(e) for e in entries])])
        flat = [x for e in entries for x in e]
        tables[g] = (
            wa / wa.sum(),
            off,
            np.array([x[0] for x in flat]),
            np.array([x[1] for x in flat], dtype=np.int64),
            np.array([x[2] for x in flat], dtype=np.int64),
        )
    return tables


_LAYOUT_TABLE = _layout_table()


def _expand(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For items owned in runs of `counts`: each item's owner and rank in its run."""
    owner = np.repeat(np.arange(counts.size), counts)
    first = np.cumsum(counts) - counts
    return owner, np.arange(owner.size) - first[owner]


def _build_lanes(fleet: _Fleet, lo: int, hi: int, rng: np.random.Generator) -> _Lanes:
    n = hi - lo
    gpus = fleet.gpus[lo:hi]
    cpu_per_gpu = np.floor(_GPU_HOST_SHARE * fleet.cpus[lo:hi] / gpus).astype(np.int64)
    mem_per_gpu = np.floor(_GPU_HOST_SHARE * fleet.memory_gib[lo:hi] / gpus).astype(np.int64)
    track = fleet.track[lo:hi]

    parts: list[dict[str, np.ndarray]] = []
    # Single-node lanes from the node's layout.
    free = track < 0
    for g, (wts, off, size, gpu0, sub) in _LAYOUT_TABLE.items():
        nodes = np.flatnonzero(free & (gpus == g))
        if nodes.size == 0:
            continue
        variant = rng.choice(wts.size, size=nodes.size, p=wts)
        owner, rank = _expand(off[variant + 1] - off[variant])
        entry = off[variant][owner] + rank
        node = nodes[owner]
        sz = size[entry]
        size_class = np.where(sz < 1, 0.5, sz)
        kind = np.empty(entry.size, dtype=np.int64)
        for cls, w in _KIND_BY_SIZE.items():
            hit = np.flatnonzero(size_class == cls)
            if hit.size:
                p = np.array(w) / sum(w)
                kind[hit] = np.array([_ONLINE_BASE, _ONLINE_DAY, _TRAIN, _DEV])[
                    rng.choice(4, size=hit.size, p=p)
                ]
        parts.append(
            {
                "kind": kind,
                "gpus": sz,
                "gpu0": gpu0[entry],
                "sub": sub[entry],
                "cpus": np.floor(sz * cpu_per_gpu[node]).astype(np.int64),
                "memory_gib": np.floor(sz * mem_per_gpu[node]).astype(np.int64),
                "members": node,
                "count": np.ones(node.size, dtype=np.int64),
            }
        )
    # Gang tracks: one lane over whole nodes of one domain.
    gang_nodes = np.flatnonzero(track >= 0)
    if gang_nodes.size:
        # Tracks never straddle blocks: blocks are whole domains.
        _, first, counts = np.unique(track[gang_nodes], return_index=True, return_counts=True)
        heads = gang_nodes[first]
        parts.append(
            {
                "kind": np.full(heads.size, _GANG),
                "gpus": gpus[heads].astype(np.float64),
                "gpu0": np.zeros(heads.size, dtype=np.int64),
                "sub": np.zeros(heads.size, dtype=np.int64),
                "cpus": gpus[heads] * cpu_per_gpu[heads],
                "memory_gib": gpus[heads] * mem_per_gpu[heads],
                "members": gang_nodes,
                "count": counts,
            }
        )
    # CPU-only lanes: what the GPU lanes leave of the host.
    cpu_nodes = np.flatnonzero(rng.random(n) < _CPU_LANE_P)
    parts.append(
        {
            "kind": np.full(cpu_nodes.size, _CPU),
            "gpus": np.zeros(cpu_nodes.size),
            "gpu0": np.zeros(cpu_nodes.size, dtype=np.int64),
            "sub": np.zeros(cpu_nodes.size, dtype=np.int64),
            "cpus": fleet.cpus[lo:hi][cpu_nodes] - gpus[cpu_nodes] * cpu_per_gpu[cpu_nodes],
            "memory_gib": fleet.memory_gib[lo:hi][cpu_nodes]
            - gpus[cpu_nodes] * mem_per_gpu[cpu_nodes],
            "members": cpu_nodes,
            "count": np.ones(cpu_nodes.size, dtype=np.int64),
        }
    )

    def cat(key: str) -> np.ndarray:
        return np.concatenate([p[key] for p in parts])

    kind = cat("kind")
    counts = cat("count")
    day_shift = rng.integers(-90 * 60, 90 * 60 + 1, size=kind.size)
    return _Lanes(
        kind=kind,
        gpus=cat("gpus"),
        gpu0=cat("gpu0"),
        sub=cat("sub"),
        cpus=cat("cpus"),
        memory_gib=cat("memory_gib"),
        owner=rng.choice(len(TENANTS), size=kind.size, p=_TENANT_P),
        day_shift=day_shift,
        member_start=np.concatenate([[0], np.cumsum(counts)]),
        members=cat("members"),
    )


# --------------------------------------------------------------------------
# Timelines: each lane alternates busy phases of high-priority work and idle
# windows that low-priority work fills.
# --------------------------------------------------------------------------


def _kind_array(attr: str) -> np.ndarray:
    return np.array([getattr(k, attr) for k in _KINDS], dtype=np.float64)


_K_HP_MU = np.log(_kind_array("hp_median_h") * _HOUR)
_K_HP_SIGMA = _kind_array("hp_sigma")
_K_PHASE_N = _kind_array("phase_n")
_K_WIN_MU = np.log(np.maximum(_kind_array("lp_window_median_h"), 1e-9) * _HOUR)
_K_WIN_SIGMA = _kind_array("lp_window_sigma")
_K_GAP = _kind_array("gap_mean_s")
_K_LP_MU = np.log(_kind_array("lp_median_h") * _HOUR)
_K_LP_SIGMA = _kind_array("lp_sigma")
_K_DIURNAL = np.array([k.day is not None for k in _KINDS])
_K_DAY_FROM = np.array([k.day[0] if k.day else 0 for k in _KINDS], dtype=np.int64)
_K_DAY_TO = np.array([k.day[1] if k.day else _DAY for k in _KINDS], dtype=np.int64)
_K_WORKLOAD = np.array([k.workload for k in _KINDS], dtype=np.int64)
_K_SLEEPABLE = _kind_array("sleepable")

_MIN_ALLOC_S = 300
_MAX_ALLOC_S = 30 * _DAY
_MIN_LP_S = 1800
_LP_DELAY_S = 1200.0
_LP_EMPTY = 0.18
_LP_SLACK_S = 900


def _durations(rng: np.random.Generator, mu: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    d = rng.lognormal(mu, sigma)
    return np.clip(np.ceil(d), _MIN_ALLOC_S, _MAX_ALLOC_S).astype(np.int64)


def _busy_phases(
    lanes: _Lanes, ctx: _Context, rng: np.random.Generator
) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """High-priority allocations (lane, start, duration) and idle windows (lane, start, end)."""
    n = lanes.kind.size
    kind = lanes.kind
    t = ctx.t0 - rng.integers(0, _DAY, size=n)
    left = rng.geometric(1.0 / np.maximum(_K_PHASE_N[kind], 1.0))
    hp: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    win: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    act = np.arange(n)
    while act.size:
        k = kind[act]
        ta = t[act]
        d = _durations(rng, _K_HP_MU[k], _K_HP_SIGMA[k])
        hp.append((act, ta, d))
        tend = ta + d
        left[act] -= 1
        diurnal = _K_DIURNAL[k]
        tod = (tend - lanes.day_shift[act]) % _DAY
        night = diurnal & ((tod >= _K_DAY_TO[k]) | (tod < _K_DAY_FROM[k]))
        switch = np.where(diurnal, night, left[act] <= 0)
        gap = np.ceil(rng.exponential(_K_GAP[k])).astype(np.int64) + 30
        nxt = tend + gap
        s = np.flatnonzero(switch)
        if s.size:
            ks = k[s]
            w = np.ceil(rng.lognormal(_K_WIN_MU[ks], _K_WIN_SIGMA[ks])).astype(np.int64)
            # Diurnal lanes idle until their next morning.
            te = tend[s]
            tod_s = tod[s]
            morning = te - tod_s + _K_DAY_FROM[ks] + np.where(tod_s >= _K_DAY_FROM[ks], _DAY, 0)
            morning += np.round(rng.normal(0, 1800, size=s.size)).astype(np.int64)
            w = np.where(_K_DIURNAL[ks], np.maximum(morning - te, 1800), w)
            w = np.maximum(w, 600)
            win.append((act[s], te, te + w))
            nxt[s] = te + w
            left[act[s]] = rng.geometric(1.0 / np.maximum(_K_PHASE_N[ks], 1.0))
        t[act] = nxt
        act = act[nxt < ctx.end_s]
    return _concat(hp, 3), _concat(win, 3)


def _concat(chunks: Sequence[tuple[np.ndarray, ...]], width: int) -> tuple[np.ndarray, ...]:
    if not chunks:
        return tuple(np.zeros(0, dtype=np.int64) for _ in range(width))
    return tuple(np.concatenate([c[i] for c in chunks]) for i in range(width))


def _fill_windows(
    w_lane: np.ndarray,
    w_start: np.ndarray,
    w_end: np.ndarray,
    lanes: _Lanes,
    ctx: _Context,
    rng: np.random.Generator,
) -> tuple[np.ndarray, ...]:
    """Low-priority allocations packed into idle windows: (window, start, duration, planned)."""
    k = lanes.kind[w_lane]
    # Low-priority work needs a while to notice the hole, and some holes stay
    # empty: together they are the few percent of healthy GPU-hours left idle.
    t = w_start + 60 + np.ceil(rng.exponential(_LP_DELAY_S, size=w_lane.size)).astype(np.int64)
    used = rng.random(w_lane.size) >= _LP_EMPTY
    out: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    act = np.flatnonzero(used & (w_end - t >= _MIN_LP_S) & (t < ctx.end_s))
    while act.size:
        ka = k[act]
        planned = _durations(rng, _K_LP_MU[ka], _K_LP_SIGMA[ka])
        # The returning high-priority work ends (preempts) what does not fit.
        room = w_end[act] - 120 - t[act]
        d = np.minimum(planned, room)
        out.append((act, t[act], d, planned))
        t[act] += d + rng.integers(60, _LP_SLACK_S, size=act.size)
        act = act[(w_end[act] - t[act] >= _MIN_LP_S) & (t[act] < ctx.end_s)]
    return _concat(out, 4)


# --------------------------------------------------------------------------
# One block of nodes: allocations, requests and telemetry
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Jobs:
    lane: np.ndarray
    member: np.ndarray  # -1: every node of the lane; else one member's rank
    start: np.ndarray
    duration: np.ndarray  # actual, before the export cut
    planned: np.ndarray
    priority: np.ndarray
    workload: np.ndarray

    def take(self, idx: np.ndarray) -> _Jobs:
        return _Jobs(*(getattr(self, f)[idx] for f in _JOB_FIELDS))


_JOB_FIELDS = ("lane", "member", "start", "duration", "planned", "priority", "workload")


def _block_tables(
    fleet: _Fleet, ctx: _Context, block: int, lo: int, hi: int, ids: _Ids
) -> Iterator[tuple[str, pa.Table]]:
    rng = np.random.default_rng([ctx.seed, 1, block])
    lanes = _build_lanes(fleet, lo, hi, rng)
    (h_lane, h_start, h_dur), (w_lane, w_start, w_end) = _busy_phases(lanes, ctx, rng)

    # Idle windows of gang tracks: some go to one low-priority gang, the rest
    # split into one window per member node.
    nm = lanes.n_members[w_lane]
    whole = (nm == 1) | (rng.random(w_lane.size) < _GANG_LP_WHOLE)
    split = np.flatnonzero(~whole)
    owner, rank = _expand(nm[split])
    wl = np.concatenate([w_lane[whole], w_lane[split][owner]])
    wm = np.concatenate([np.full(int(whole.sum()), -1), rank])
    ws = np.concatenate([w_start[whole], w_start[split][owner]])
    we = np.concatenate([w_end[whole], w_end[split][owner]])
    f_win, f_start, f_dur, f_plan = _fill_windows(wl, ws, we, lanes, ctx, rng)

    lp_lane = wl[f_win]
    jobs = _Jobs(
        lane=np.concatenate([h_lane, lp_lane]),
        member=np.concatenate([np.full(h_lane.size, -1), wm[f_win]]),
        start=np.concatenate([h_start, f_start]),
        duration=np.concatenate([h_dur, f_dur]),
        planned=np.concatenate([h_dur, f_plan]),
        priority=np.concatenate([np.zeros(h_lane.size, np.int64), np.ones(lp_lane.size, np.int64)]),
        workload=np.concatenate(
            [_K_WORKLOAD[lanes.kind[h_lane]], _lp_workload(lanes, lp_lane, wm[f_win], rng)]
        ),
    )
    jobs = _cut_unhealthy(jobs, lanes, fleet, lo, ctx)
    order = np.lexsort(
        (lanes.gpu0[jobs.lane], lanes.members[lanes.member_start[jobs.lane]], jobs.start)
    )
    jobs = jobs.take(order)
    yield from _emit_block(fleet, ctx, lanes, jobs, lo, hi, ids, rng, block)


def _lp_workload(
    lanes: _Lanes, lane: np.ndarray, member: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Workload of low-priority fill: offline inference, and training on training lanes."""
    k = lanes.kind[lane]
    u = rng.random(lane.size)
    wl = np.where(u < 0.01, 5, np.where(u < 0.03, 0, 1))
    wl = np.where(((k == _TRAIN) | (k == _GANG)) & (u > 1.0 - _LP_TRAINING), 2, wl)
    wl = np.where((k == _GANG) & (member < 0), 2, wl)
    return np.where(k == _CPU, 4, wl)


def _cut_unhealthy(jobs: _Jobs, lanes: _Lanes, fleet: _Fleet, lo: int, ctx: _Context) -> _Jobs:
    """Unhealthy nodes stopped taking work at fail_s; a down node also lost what ran."""
    node = lo + lanes.members[lanes.member_start[jobs.lane]]
    fail = fleet.fail_s[node]
    down = fleet.health[node] == HEALTH.index("down")
    duration = np.where(down, np.minimum(jobs.duration, fail - jobs.start), jobs.duration)
    keep = (jobs.start < fail) & (jobs.start + duration > ctx.start_s) & (jobs.start < ctx.end_s)
    return replace(jobs, duration=duration).take(np.flatnonzero(keep))


def _emit_block(
    fleet: _Fleet,
    ctx: _Context,
    lanes: _Lanes,
    jobs: _Jobs,
    lo: int,
    hi: int,
    ids: _Ids,
    rng: np.random.Generator,
    block: int,
) -> Iterator[tuple[str, pa.Table]]:
    nj = jobs.lane.size
    lane = jobs.lane
    kind = lanes.kind[lane]
    size = lanes.gpus[lane]
    hp = jobs.priority == 0
    wl = jobs.workload
    # A sliver of high-priority work is neither of the four big classes.
    wl = np.where(hp & (kind != _CPU) & (kind != _GANG) & (rng.random(nj) < 0.008), 5, wl)

    # Per-job shape. CPUs and memory per GPU come from common menus, capped by
    # the lane's share of the host so the lane never exceeds it.
    cap_c = lanes.cpus[lane]
    cap_m = lanes.memory_gib[lane]
    gpu_job = size > 0
    cpg = rng.choice(_CPUS_PER_GPU, size=nj, p=_CPUS_PER_GPU_P)
    mpg = rng.choice(_MEM_PER_GPU, size=nj, p=_MEM_PER_GPU_P)
    cpus = np.where(
        size >= 1,
        np.minimum(size * cpg, cap_c),
        np.minimum(np.maximum(np.floor(size * cpg), 1), cap_c),
    ).astype(np.int64)
    mem = np.where(
        size >= 1,
        np.minimum(size * mpg, cap_m),
        np.minimum(np.maximum(np.floor(size * mpg), 8), cap_m),
    ).astype(np.int64)
    # CPU-only containers take a quarter to all of the CPU lane.
    frac = rng.choice(np.array([0.25, 0.5, 0.75, 1.0]), size=nj)
    cpus = np.where(gpu_job, cpus, np.maximum(np.floor(cap_c * frac), 1)).astype(np.int64)
    mem = np.where(gpu_job, mem, np.maximum(np.floor(cap_m * frac), 1)).astype(np.int64)

    sleepable = hp & (wl == 0) & (rng.random(nj) < _K_SLEEPABLE[kind])
    ckpt_menu = rng.choice(np.array([1800, 2700, 3600]), size=nj)
    lp_menu = rng.choice(np.array([600, 900, 1200, 1800, 3600]), size=nj)
    u = rng.random(nj)
    ckpt = np.where(wl == 2, ckpt_menu, lp_menu)
    has_ckpt = np.where(
        hp, wl == 2, np.where(wl == 2, u < 0.9, np.where(wl == 4, u < 0.3, u < 0.65))
    )
    tenant = np.where(
        hp & (rng.random(nj) < 0.75),
        lanes.owner[lane],
        rng.choice(len(TENANTS), size=nj, p=_TENANT_P),
    )

    # Allocation rows: one per member node of the job.
    nmem = np.where(jobs.member < 0, lanes.n_members[lane], 1)
    job_of, rank = _expand(nmem)
    first = lanes.member_start[lane] + np.maximum(jobs.member, 0)
    node = lanes.members[first[job_of] + rank]  # local index
    end = jobs.start + jobs.duration
    running = end > ctx.end_s
    job_ids = _ids("j-", ids.job, nj)
    alloc_ids = _ids("a-", ids.alloc, job_of.size)
    node_ids = fleet.node_ids.slice(lo, hi - lo)
    alloc = pa.table(
        [
            alloc_ids,
            job_ids.take(pa.array(job_of)),
            node_ids.take(pa.array(node)),
            pa.array(size[job_of]),
            pa.array(cpus[job_of]),
            pa.array(mem[job_of]),
            _take(PRIORITIES, jobs.priority[job_of]),
            _take(WORKLOADS, wl[job_of]),
            _take(TENANTS, tenant[job_of]),
            _timestamps(jobs.start[job_of]),
            _timestamps(end[job_of], ~running[job_of]),
            _optional(ckpt[job_of], has_ckpt[job_of]),
            pa.array(sleepable[job_of]),
        ],
        schema=_ALLOC_SCHEMA,
    )
    yield "allocations", alloc

    # One request per job: the shape it asked for and when it waited.
    gang_size = nmem * size
    wait = _waits(rng, hp, wl, nmem)
    node_model = fleet.model[lo + lanes.members[first]]
    gpu_model = _take(tuple(m.name for m in _MODELS), node_model)
    either = np.isin(node_model, [0, 1]) & (rng.random(nj) < 0.12)
    gpu_model = pc.if_else(pa.array(either), "H20|H800", gpu_model)
    gpu_model = pc.if_else(pa.array(~gpu_job), pa.scalar(None, pa.string()), gpu_model)
    per_gpu = np.where(gpu_job, size, 1.0)
    requested = _request_duration(jobs.planned)
    deadline_menu = rng.choice(np.array([300, 600, 1800, 3600, 4 * 3600]), size=nj)
    has_deadline = rng.random(nj) < np.where(hp, 0.25, 0.05)
    req = pa.table(
        [
            _ids("r-", ids.job, nj),
            _timestamps(jobs.start - wait),
            _timestamps(jobs.start),
            gpu_model,
            pa.array(gang_size),
            pa.array(size),
            pa.array(np.where(gpu_job, cpus / per_gpu, 0.0)),
            pa.array(np.where(gpu_job, mem / per_gpu, 0.0)),
            _optional(cpus, ~gpu_job),
            _optional(mem, ~gpu_job),
            _take(("node", "switch"), (nmem > 1).astype(np.int64)),
            pa.array(requested),
            _optional(deadline_menu, has_deadline),
            _take(PRIORITIES, jobs.priority),
            _take(TENANTS, tenant),
            job_ids,
        ],
        schema=_REQUEST_SCHEMA,
    )
    yield "requests", req

    if ctx.tel_ts.size:
        tel_rng = np.random.default_rng([ctx.seed, 3, block])
        alloc_info = _AllocInfo(
            node=node,
            gpus=size[job_of],
            gpu0=lanes.gpu0[lane][job_of],
            sub=lanes.sub[lane][job_of],
            start=jobs.start[job_of],
            end=np.where(running, np.iinfo(np.int64).max, end)[job_of],
            workload=wl[job_of],
            sleepable=sleepable[job_of],
        )
        yield from _telemetry(fleet, ctx, lo, hi, alloc_info, alloc_ids, node_ids, tel_rng)
    ids.job += nj
    ids.alloc += job_of.size
    if ctx.harvested_nights > 0:
        hp_rows = np.flatnonzero(sleepable[job_of])
        yield "allocations", _harvested_work(
            ctx, block, ids, node_ids.take(pa.array(node[hp_rows])), size[job_of][hp_rows],
            cpus[job_of][hp_rows], mem[job_of][hp_rows], jobs.start[job_of][hp_rows],
            np.minimum(end, ctx.end_s)[job_of][hp_rows],
        )  # fmt: skip


# Warm containers sleep while their telemetry is quiet, 23:30-07:30 Beijing
# (15:30-23:30 UTC); a harvesting fleet lends them from the end of the default
# 30-minute idle period until the morning wake.
_LEND_FROM = 16 * _HOUR
_LEND_TO = 23 * _HOUR + 1800
_HARVEST_DELAY_S = 60.0  # mean wait before low-priority work lands on the lent GPUs
_HARVEST_MIN_S = 600  # shorter lending is not recorded as harvested


def _harvested_work(
    ctx: _Context,
    block: int,
    ids: _Ids,
    node_ids: pa.Array,
    gpus: np.ndarray,
    cpus: np.ndarray,
    mem: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
) -> pa.Table:
    """Low-priority work on the GPUs of sleeping warm containers (one row per lent night).

    Per sleepable allocation (arrays aligned) and night of its life inside the
    window, with chance ``ctx.harvested_nights``: one offline-inference job on the
    container's GPUs, CPUs and memory, from the lending start (16:00 UTC, or 30
    idle minutes after a container that starts later; plus an exponential delay,
    mean one minute) until the wake or the container's end. It has no request
    and no telemetry of its own (the container's samples stay the GPUs' record).
    A random stream and ids of its own ("ah-", "jh-") keep every other row as
    without the option.
    """
    rng = np.random.default_rng([ctx.seed, 5, block])
    lo = np.maximum(start, ctx.start_s)
    first = (lo - _LEND_TO) // _DAY + 1  # first night whose lending ends after lo
    last = (end - _LEND_FROM - 1) // _DAY  # last night whose lending starts before end
    count = np.maximum(last - first + 1, 0)
    owner, k = _expand(count)
    night = (first[owner] + k) * _DAY
    begin = np.maximum(np.maximum(night + _LEND_FROM, start[owner] + 1800), ctx.start_s)
    begin = begin + np.ceil(rng.exponential(_HARVEST_DELAY_S, size=owner.size)).astype(np.int64)
    stop = np.minimum(night + _LEND_TO, end[owner])
    keep = (stop - begin >= _HARVEST_MIN_S) & (rng.random(owner.size) < ctx.harvested_nights)
    owner, begin, stop = owner[keep], begin[keep], stop[keep]
    n = owner.size
    ckpt = rng.choice(np.array([600, 900, 1200, 1800, 3600]), size=n)
    table = pa.table(
        [
            _ids("ah-", ids.harvested, n),
            _ids("jh-", ids.harvested, n),
            node_ids.take(pa.array(owner)),
            pa.array(gpus[owner]),
            pa.array(cpus[owner]),
            pa.array(mem[owner]),
            _take(PRIORITIES, np.ones(n, np.int64)),
            _take(WORKLOADS, np.ones(n, np.int64)),  # offline inference
            _take(TENANTS, rng.choice(len(TENANTS), size=n, p=_TENANT_P)),
            _timestamps(begin),
            _timestamps(stop),
            _optional(ckpt, rng.random(n) < 0.65),
            pa.array(np.zeros(n, dtype=bool)),
        ],
        schema=_ALLOC_SCHEMA,
    )
    ids.harvested += n
    return table


def _waits(
    rng: np.random.Generator, hp: np.ndarray, wl: np.ndarray, nodes: np.ndarray
) -> np.ndarray:
    """Seconds from submit to start: online work starts fast, big gangs and LP wait."""
    n = hp.size
    w = np.where(
        hp,
        np.where(
            wl == 2,
            rng.lognormal(np.log(300.0), 1.0, n) * (1 + nodes / 8),
            np.where(wl == 3, rng.exponential(120.0, n), rng.exponential(45.0, n)),
        ),
        rng.lognormal(np.log(1200.0), 1.2, n),
    )
    return np.ceil(np.minimum(w, 3 * _DAY)).astype(np.int64)


def _request_duration(planned: np.ndarray) -> np.ndarray:
    """Users ask for round run times: the planned duration rounded up to a common size."""
    i = np.searchsorted(_REQUEST_HOURS * _HOUR, planned, side="left")
    return (_REQUEST_HOURS[np.minimum(i, _REQUEST_HOURS.size - 1)] * _HOUR).astype(np.int64)


# --------------------------------------------------------------------------
# Telemetry
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _AllocInfo:
    node: np.ndarray  # local node index
    gpus: np.ndarray
    gpu0: np.ndarray
    sub: np.ndarray
    start: np.ndarray
    end: np.ndarray  # int64 max when still running
    workload: np.ndarray
    sleepable: np.ndarray


def _telemetry(
    fleet: _Fleet,
    ctx: _Context,
    lo: int,
    hi: int,
    a: _AllocInfo,
    alloc_ids: pa.Array,
    node_ids: pa.Array,
    rng: np.random.Generator,
) -> Iterator[tuple[str, pa.Table]]:
    ts = ctx.tel_ts
    steps = ts.size
    t_first, step = int(ts[0]), ctx.tel_step
    # Sample k is at t_first + k*step; an allocation covers the samples in [start, end).
    k0 = np.maximum(-((t_first - a.start) // step), 0)
    k1 = np.minimum(-((t_first - np.minimum(a.end, ts[-1] + 1)) // step), steps)
    live = np.flatnonzero((k1 > k0) & (a.gpus > 0))
    # Training slows down while a CPU-only neighbour runs on its node.
    cpu_busy = np.zeros((hi - lo) * steps, dtype=bool)
    cpu = np.flatnonzero((k1 > k0) & (a.gpus == 0))
    if cpu.size:
        owner, rank = _expand(k1[cpu] - k0[cpu])
        cpu_busy[a.node[cpu][owner] * steps + k0[cpu][owner] + rank] = True
    drop = 1.0 - rng.uniform(0.10, 0.18, size=hi - lo)

    # Per-allocation character of its GPUs.
    n = a.node.size
    wl = a.workload
    level = np.select(
        [wl == 0, wl == 1, wl == 2, wl == 3],
        [
            rng.lognormal(np.log(0.075), 0.5, n),
            rng.uniform(0.25, 0.6, n),
            rng.uniform(0.4, 0.7, n),
            rng.lognormal(np.log(0.03), 0.9, n),
        ],
        rng.uniform(0.05, 0.3, n),
    )
    generative = rng.random(n) < 0.7
    mem_level = np.select(
        [wl == 0, wl == 1, wl == 2, wl == 3],
        [
            np.where(generative, rng.uniform(0.75, 0.95, n), rng.uniform(0.3, 0.6, n)),
            rng.uniform(0.6, 0.9, n),
            rng.uniform(0.75, 0.95, n),
            rng.uniform(0.1, 0.5, n),
        ],
        rng.uniform(0.2, 0.6, n),
    )
    # Inference follows the day (Beijing evening peak); training does not.
    hour = ((ts + 8 * _HOUR) % _DAY) / _HOUR
    diurnal = 0.75 + 0.45 * np.cos((hour - 15.0) / 24.0 * 2 * np.pi)
    night = (hour >= 23.5) | (hour < 7.5)

    gpu_off = np.concatenate([[0], np.cumsum(fleet.gpus[lo:hi])])
    ngpu = np.ceil(a.gpus[live]).astype(np.int64)
    # Chunk by node so that the cells of a chunk stay bounded.
    per_chunk = max(1, _TEL_CHUNK_CELLS // (steps * 16))
    for c_lo in range(0, hi - lo, per_chunk):
        c_hi = min(c_lo + per_chunk, hi - lo)
        sel = (a.node[live] >= c_lo) & (a.node[live] < c_hi)
        al = live[sel]
        if al.size == 0:
            continue
        ng = ngpu[sel]
        owner, gi = _expand(ng)  # one entry per (allocation, GPU)
        ag = al[owner]
        gpu_index = a.gpu0[ag] + gi
        span = k1[ag] - k0[ag]
        og, kk = _expand(span)
        row_alloc = ag[og]
        k = k0[row_alloc] + kk
        slot = gpu_off[a.node[row_alloc]] + gpu_index[og] - gpu_off[c_lo]
        cell = slot * steps + k
        # A shared GPU reports once per sample, attributed to its first share.
        shared = np.flatnonzero(a.gpus[row_alloc] < 1)
        keep = np.ones(cell.size, dtype=bool)
        if shared.size:
            o = shared[np.lexsort((a.sub[row_alloc[shared]], cell[shared]))]
            dup = np.concatenate([[False], cell[o][1:] == cell[o][:-1]])
            keep[o[dup]] = False
        n_cells = (gpu_off[c_hi] - gpu_off[c_lo]) * steps
        grid = np.full(n_cells, -1, dtype=np.int64)
        grid[cell[keep]] = np.flatnonzero(keep)
        rows = grid[grid >= 0]  # ordered by node, GPU, time
        ra = row_alloc[rows]
        rk = k[rows]
        w = wl[ra]
        noise = rng.lognormal(0.0, 0.3, rows.size)
        sm = level[ra] * noise
        sm = np.where((w == 0) | (w == 1), sm * diurnal[rk], sm)
        sm = np.where(w == 2, level[ra] + rng.normal(0.0, 0.04, rows.size), sm)
        busy = cpu_busy[a.node[ra] * steps + rk]
        sm = np.where((w == 2) & busy, sm * drop[a.node[ra]], sm)
        quiet = a.sleepable[ra] & night[rk]
        sm = np.where(quiet, rng.uniform(0.0, 0.004, rows.size), sm)
        mem = mem_level[ra] + rng.normal(0.0, 0.02, rows.size)
        yield (
            "telemetry",
            pa.table(
                [
                    _timestamps(ts[rk]),
                    node_ids.take(pa.array(a.node[ra])),
                    pa.array(gpu_index[og][rows].astype(np.int32)),
                    pa.array(np.round(np.clip(sm, 0.0, 1.0), 3)),
                    pa.array(np.round(np.clip(mem, 0.0, 1.0), 3)),
                    alloc_ids.take(pa.array(ra)),
                ],
                schema=_TELEMETRY_SCHEMA,
            ),
        )


# --------------------------------------------------------------------------
# The queue at export
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _QueueShape:
    gpus: float
    gpus_per_pod: float
    cpus_per_gpu: int
    memory_gib_per_gpu: int
    locality: str
    duration_h: int  # 0: no duration given
    high: float  # chance of high priority
    weight: float


_QUEUE_SHAPES = (
    _QueueShape(256, 8, 12, 96, "switch", 24, 0.9, 0.05),
    _QueueShape(128, 8, 12, 96, "switch", 24, 0.9, 0.07),
    _QueueShape(64, 8, 8, 64, "switch", 12, 0.8, 0.05),
    _QueueShape(32, 8, 8, 64, "switch", 12, 0.8, 0.05),
    _QueueShape(16, 8, 8, 64, "switch", 4, 0.8, 0.05),
    _QueueShape(8, 8, 16, 128, "node", 8, 0.8, 0.10),  # CPU-hungry: 128 cores
    _QueueShape(8, 8, 8, 96, "node", 0, 0.9, 0.10),
    _QueueShape(4, 4, 8, 64, "node", 4, 0.2, 0.08),  # offline batch
    _QueueShape(4, 4, 8, 64, "node", 0, 0.9, 0.04),
    _QueueShape(2, 2, 8, 64, "node", 0, 0.9, 0.10),
    _QueueShape(1, 1, 8, 64, "node", 8, 1.0, 0.11),
    _QueueShape(0.5, 0.5, 8, 64, "node", 0, 0.9, 0.08),
    _QueueShape(0.25, 0.25, 8, 64, "node", 0, 0.9, 0.07),
    _QueueShape(0, 0, 0, 0, "node", 4, 0.5, 0.05),
)


def _queue_table(fleet: _Fleet, ctx: _Context, ids: _Ids) -> pa.Table:
    """Requests still pending at `end`: big switch-local gangs, CPU-hungry and small shapes."""
    rng = np.random.default_rng([ctx.seed, 2])
    n = max(24, fleet.model.size // 16)
    names = [m.name for m in _MODELS]
    present = sorted(set(fleet.model.tolist()))
    gpus_by_model = np.array(
        [fleet.gpus[fleet.model == m].sum() for m in present], dtype=np.float64
    )
    trainers = [m for m in present if _MODELS[m].gpus == 8] or present
    shapes = _QUEUE_SHAPES
    w = np.array([s.weight for s in shapes])
    pick = rng.choice(len(shapes), size=n, p=w / w.sum())
    # Every shape class shows up at least once, even in a tiny fleet.
    pick[: len(shapes)] = np.arange(len(shapes))
    gpus = np.array([shapes[i].gpus for i in pick], dtype=np.float64)
    pod = np.array([shapes[i].gpus_per_pod for i in pick], dtype=np.float64)
    cpg = np.array([shapes[i].cpus_per_gpu for i in pick], dtype=np.float64)
    mpg = np.array([shapes[i].memory_gib_per_gpu for i in pick], dtype=np.float64)
    locality = [shapes[i].locality for i in pick]
    # One duration per class keeps the queue's distinct shapes few.
    duration = np.array([shapes[i].duration_h * _HOUR for i in pick], dtype=np.int64)
    has_duration = duration > 0
    big = gpus >= 8
    model = np.where(
        big,
        rng.choice(trainers, size=n),
        rng.choice(present, size=n, p=gpus_by_model / gpus_by_model.sum()),
    )
    model_txt = [names[m] for m in model]
    sets = rng.random(n)
    for i in range(n):
        if gpus[i] == 0:
            model_txt[i] = ""
        elif model_txt[i] in ("H20", "H800") and sets[i] < 0.3:
            model_txt[i] = "H20|H800"
        elif gpus[i] < 1 and sets[i] < 0.2:
            model_txt[i] = ""  # any model
    hp = rng.random(n) < np.array([shapes[i].high for i in pick])
    # Big gangs are the ones that starve: some have waited for days.
    age = np.where(gpus >= 64, rng.uniform(0, 3 * _DAY, n), rng.uniform(0, _DAY, n))
    submit = ctx.end_s - np.floor(age).astype(np.int64)
    deadline = rng.choice(np.array([600, 1800, 3600, 4 * 3600, 12 * 3600]), size=n)
    has_deadline = rng.random(n) < 0.35
    cpu_only = gpus == 0
    cpus = np.where(cpu_only, rng.choice(np.array([4, 8, 16]), size=n), 0)
    mem = np.where(cpu_only, rng.choice(np.array([16, 32, 64]), size=n), 0)
    order = np.argsort(submit, kind="stable")
    table = pa.table(
        [
            _ids("r-", ids.job, n),
            _timestamps(submit[order]),
            pa.nulls(n, _TS),
            pa.array([model_txt[i] or None for i in order], pa.string()),
            pa.array(gpus[order]),
            pa.array(pod[order]),
            pa.array(cpg[order]),
            pa.array(mpg[order]),
            _optional(cpus[order], cpu_only[order]),
            _optional(mem[order], cpu_only[order]),
            pa.array([locality[i] for i in order], pa.string()),
            _optional(duration[order], has_duration[order]),
            _optional(deadline[order], has_deadline[order]),
            _take(PRIORITIES, (~hp[order]).astype(np.int64)),
            _take(TENANTS, rng.choice(len(TENANTS), size=n, p=_TENANT_P)[order]),
            pa.nulls(n, pa.string()),
        ],
        schema=_REQUEST_SCHEMA,
    )
    ids.job += n
    return table
