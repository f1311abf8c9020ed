"""``--format prometheus``: dcgm-exporter GPU series into ``telemetry`` and ``node_events``.

Reads Prometheus ``/api/v1/query_range`` JSON responses (one file per metric and time
chunk, any number of them, plain or gzip-compressed), the text exposition formats of a
dcgm-exporter scrape (Prometheus text and OpenMetrics, parsed by prometheus-client) and
``promtool tsdb dump`` output. :mod:`~fleetaudit.inputs.ingest.prometheus_read` streams
every file, so a file of any size is read in bounded memory; the samples wait in
temporary DuckDB tables (which spill to disk), where SQL merges them. See
docs/formats/prometheus.md:

- one telemetry row per (node, GPU index, instant). ``sm_active`` is
  DCGM_FI_PROF_SM_ACTIVE, else DCGM_FI_PROF_GR_ENGINE_ACTIVE, else
  DCGM_FI_DEV_GPU_UTIL / 100; the column ``metric`` names the one used.
  ``mem_used`` is FB_USED / (FB_USED + FB_FREE + FB_RESERVED). Metric names are read
  whatever their case (dcgm-exporter can write them in lower case).
- the node is the ``hostname`` label, or ``Hostname`` (dcgm-exporter before May 2026);
  the GPU is the ``gpu`` label. A series without either host label is a reject that
  says how to set ``NODE_NAME``.
- a value outside its metric's range (an activity above 1, GPU_UTIL above 100, a
  negative one, a blank value averaged into a step) is a gap with a reject row; NaN,
  infinities and DCGM's blank sentinels (>= 9e18) are gaps without one.
- series that differ only in labels the fleet does not key on (``instance``, ``job``,
  ``replica``, ``prometheus``: HA pairs) count once; a GPU instance shared by several
  pods (time-slicing, MPS) reports one value per pod, which counts once and names no
  allocation (the report shares it among the allocations on that node); MIG
  instances of one GPU add up, each activity weighted by its slices of 7
  (``GPU_I_PROFILE`` ``3g.40gb`` -> 3/7).
- an idle GPU is not loaded: a series without pod labels on a node whose exporter
  labels pods (on other GPUs, at other times, or with empty pod labels) is one
  (Prometheus drops empty labels, so an idle GPU's series has no pod label at all).
  Each file's summary says how many samples that left out.
- ``count_over_time`` files (their name says so) give each step's number of raw
  samples: a step the exporter reported for only part of counts for that part
  (columns ``samples`` and ``sample_interval_s``, as rolled-up telemetry has them).
- ``alloc_id``: the ``pod_uid`` label when a stored allocation has that id; else the
  ``pod``/``namespace`` labels (or ``pod_name``/``pod_namespace``) matched against the
  ``pod`` and ``namespace`` columns of the stored allocations on that node active at
  the instant. An unknown pod leaves it empty: the sample still counts for its node.
- ``DCGM_FI_DEV_XID_ERRORS`` (the last XID a GPU raised) and
  ``DCGM_FI_DEV_ROW_REMAP_FAILURE`` become GPU-level ``unhealthy`` intervals of
  ``node_events`` (sources ``dcgm:xid`` and ``dcgm:row_remap``) for the XIDs of
  :data:`RESET_XIDS`; other XIDs are informational: a note counts them.
- a query_range series without ``__name__`` (PromQL functions such as
  ``avg_over_time`` drop it) takes the metric named in its file's name.
- a text scrape's samples without a timestamp take the file's modification time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from fleetaudit.core.errors import InputError, QueryError
from fleetaudit.inputs.ingest import prometheus_read as read
from fleetaudit.inputs.ingest.sources import Source, read_failure
from fleetaudit.model import schema
from fleetaudit.model.store import Store, quote_literal

FORMAT = "prometheus"

SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
FB_RESERVED = "DCGM_FI_DEV_FB_RESERVED"
XID_ERRORS = "DCGM_FI_DEV_XID_ERRORS"
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
ACTIVITY_METRICS = (SM_ACTIVE, GR_ENGINE_ACTIVE, GPU_UTIL)  # in order of preference
METRICS = (*ACTIVITY_METRICS, FB_USED, FB_FREE, FB_RESERVED)  # the telemetry's
HEALTH_METRICS = (XID_ERRORS, ROW_REMAP_FAILURE)  # the node_events'
READ_METRICS = (*METRICS, *HEALTH_METRICS)

RANGES = {
    SM_ACTIVE: 1.0,
    GR_ENGINE_ACTIVE: 1.0,
    GPU_UTIL: 100.0,
    FB_USED: 1e9,
    FB_FREE: 1e9,
    FB_RESERVED: 1e9,
}
"""The largest value of each telemetry metric that is a reading (from 0): activities are
ratios, GPU_UTIL is a percent, framebuffer sizes are MiB (1e9 MiB is a petabyte).
Averaging adds rounding of about 1e-15, which the check allows."""

RESET_XIDS: dict[int, str] = {
    48: "double-bit ECC error",
    62: "internal micro-controller halt",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    136: "ALI training failure (NVLink)",
    140: "unrecovered ECC error",
    143: "GPU initialization failure",
    144: "NVLink: SAW error",
    145: "NVLink: RLW error",
    146: "NVLink: TLW error",
    147: "NVLink: TREX error",
    148: "NVLink: NVLPW_CTRL error",
    149: "NVLink: NETIR error",
    150: "NVLink: MSE error",
    155: "NVLink: SW defined error",
    157: "resource retirement failure",
    158: "GPU fatal timeout",
    167: "PCIe fatal timeout",
    171: "uncorrectable DRAM error",
    172: "uncorrectable SRAM error",
}
"""XIDs after which a GPU takes no work until it is reset (or the node rebooted): NVIDIA's
Xid catalog gives them the immediate action RESET_GPU or REBOOT_SYSTEM. Every other XID
(13, 31, 43, 45, 63, 94, ...: an application's fault, a contained error, a recorded
row remap) is informational (docs/formats/prometheus.md lists the choice)."""

BLANK_SENTINEL = 9e18  # DCGM's integer "blank" values sit near 9.22e18: no reading
FP64_BLANKS = (140737488355328.0, 140737488355331.0)  # its double ones: 2^47 .. 2^47 + 3
_CHUNK_SAMPLES = 4_000_000  # samples merged per statement
_MOST_SAMPLES = 1_000_000  # raw samples a step may count (a step of a day at 0.1 s)
# DuckDB's memory during the call (it spills to disk beyond it), unless
# $FLEETAUDIT_MEMORY_LIMIT sets one: keeps a 20 M-sample dump well within 2 GiB of RSS
# (benchmarks/README.md, "Prometheus ingest")
MEMORY_LIMIT = "1GB"
_SUFFIXES = (".json", ".json.gz", ".prom", ".txt", ".om", ".metrics", ".dump")
NO_HOST = (
    "the series has no host label (hostname or Hostname): run dcgm-exporter with the "
    "environment variable NODE_NAME set to the node's name (its Helm chart sets it from "
    "spec.nodeName), or export from a Prometheus whose relabelling adds hostname"
)

_SERIES = "_fa_prom_series"
_SAMPLES = "_fa_prom_samples"
_BATCH = "_fa_prom_batch"
_BATCH_SERIES = "_fa_prom_batch_series"
_KEYS = "_fa_prom_keys"
_COUNTS = "_fa_prom_counts"
_CADENCE = "_fa_prom_cadence"
_CHUNK = "_fa_prom_chunk"
_MERGED = "_fa_prom_merged"
_REJECTS = "_fa_prom_rejects"
_EVENTS = "_fa_prom_events"
_GPUS = "_fa_prom_gpus"
_PODS = "_fa_prom_pods"
_STAGING = (
    _SERIES, _SAMPLES, _KEYS, _COUNTS, _CADENCE, _CHUNK, _MERGED, _REJECTS, _EVENTS, _GPUS,
    _PODS,
)  # fmt: skip


def _label(*names: str) -> str:
    """SQL: the first non-empty of the labels ``names`` of the series map ``labels``."""
    return "coalesce(" + ", ".join(f"NULLIF(labels['{n}'], '')" for n in names) + ")"


# One row per series: the labels fleetaudit keys on, from the label map `labels`.
_SERIES_COLUMNS = (
    f"{_label('hostname', 'Hostname')} AS node, "
    f"{_label('gpu')} AS gpu, "
    f"{_label('GPU_I_ID')} AS gi_id, "
    f"TRY_CAST(regexp_extract({_label('GPU_I_PROFILE')}, '^([0-9]+)g', 1) AS DOUBLE) AS gi_slices, "
    f"{_label('pod_uid')} AS pod_uid, "
    f"{_label('namespace', 'pod_namespace')} AS namespace, "
    f"{_label('pod', 'pod_name')} AS pod, "
    # the exporter maps GPUs to pods: a pod label, even an empty one (a text scrape
    # keeps empty labels; Prometheus drops them)
    "labels['pod'] IS NOT NULL OR labels['pod_name'] IS NOT NULL "
    "OR labels['pod_uid'] IS NOT NULL AS attributed"
)


@dataclass(frozen=True)
class _Input:
    path: Path
    kind: str  # "json", "text" or "dump" (prometheus_read.sniff)


def _classify(paths: list[Path]) -> list[_Input]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(
                p for p in path.iterdir() if p.is_file() and p.name.lower().endswith(_SUFFIXES)
            )
            if not inside:
                raise InputError(
                    str(path),
                    "folder holds no Prometheus export (.json query_range responses, "
                    ".prom/.txt/.om scrapes, .dump promtool output)",
                )
            files.extend(inside)
        elif path.is_file():
            files.append(path)
        else:
            raise InputError(str(path), "no such file or folder")
    return [_Input(p, read.sniff(p)) for p in files]


def _file_metric(path: Path) -> str | None:
    """The metric a file's name names (for series without ``__name__``)."""
    found = [m for m in READ_METRICS if m.lower() in path.name.lower()]
    return max(found, key=len) if found else None


def _counts_file(path: Path) -> bool:
    """Whether a query_range file holds ``count_over_time`` results (its name says so)."""
    return "count_over_time" in path.name.lower()


def metric_name(name: str | None) -> str | None:
    """The metric a series is read as (its name in upper case), or None to skip it.

    >>> metric_name("dcgm_fi_prof_gr_engine_active"), metric_name("DCGM_FI_DEV_SM_CLOCK")
    ('DCGM_FI_PROF_GR_ENGINE_ACTIVE', None)
    """
    upper = name.upper() if name else None
    return upper if upper in READ_METRICS else None


def telemetry_sources(
    store: Store, paths: list[Path], progress: Callable[[str], None] | None = None
) -> list[Source]:
    """Parse every file, merge the series into telemetry rows and health intervals.

    The merged rows wait, narrow, in temporary tables of this connection (nothing of
    the store is written here; :func:`drop_staging` frees them). Each telemetry source
    adds node, GPU, metric and ``alloc_id`` (resolved against the stored allocations)
    as the ingest's transaction loads it, where the rows are checked like native ones
    (unknown node, GPU index beyond the node's GPUs); node_events sources follow for
    the files that hold health series.

    Raises:
        InputError: a file is not a Prometheus export, or DuckDB ran out of memory
            (the message names the setting that raises the limit).
    """
    inputs, merged = parse_files(store, paths, progress)
    counted, idle, informational = merged.counted, merged.idle, merged.informational
    stored = store.column_types("allocations")
    sources = []
    for file_no, item in enumerate(inputs):
        select = _rows_select(store, file_no, counted, "pod" in stored and "namespace" in stored)
        numbered = (
            f"SELECT *, row_number() OVER (ORDER BY node_id, gpu_index, ts) AS _row FROM ({select})"
        )
        notes = []
        if idle.get(file_no):
            notes.append(
                f"{item.path}: {idle[file_no]:,} sample(s) of GPUs held by no pod left out "
                "(series without pod labels from an exporter that labels pods: idle GPUs)"
            )
        sources.append(
            Source(
                str(item.path), "telemetry", select, numbered, adapter_rejects=True,
                notes=tuple(notes),
            )
        )  # fmt: skip
    events_files = {
        int(r[0]) for r in store.sql(f"SELECT DISTINCT file_no FROM {_EVENTS}").iter_rows()
    }
    for file_no in sorted(events_files):
        select = _events_select(file_no)
        numbered = (
            "SELECT *, row_number() OVER (ORDER BY node_id, gpu_index, start_time, source) "
            f"AS _row FROM ({select})"
        )
        sources.append(
            Source(str(inputs[file_no].path), "node_events", select, numbered, adapter_rejects=True)
        )
    if informational and sources:
        codes = ", ".join(f"XID {code} on {gpus} GPU(s)" for code, gpus in informational)
        first = sources[0]
        sources[0] = Source(
            first.file, first.table, first.select, first.numbered,
            adapter_rejects=first.adapter_rejects,
            notes=(*first.notes, f"informational XIDs, not health intervals: {codes}"),
        )  # fmt: skip
    return sources


def parse_files(
    store: Store, paths: list[Path], progress: Callable[[str], None] | None = None
) -> tuple[list[_Input], _Merged]:
    """Parse every file and merge the series into one narrow row per GPU and instant
    (temporary tables of this connection; :func:`drop_staging` frees them).

    Raises:
        InputError: a file is not a Prometheus export, or DuckDB ran out of memory.
    """
    inputs = _classify(paths)
    _create_staging(store)
    try:
        for file_no, item in enumerate(inputs):
            if progress is not None:
                progress(f"telemetry: parsing {item.path} ({file_no + 1}/{len(inputs)})")
            _stage_file(store, item, file_no)
        if progress is not None:
            progress("telemetry: merging the series into one row per GPU and instant")
        merged = _merge(store)
    except QueryError as exc:
        files = ", ".join(str(i.path) for i in inputs)
        raise InputError(files, read_failure(store.memory_limit(), exc)) from exc
    return inputs, merged


def merged_rows_select() -> str:
    """SQL: every merged row of :func:`parse_files` as a raw native telemetry row, without
    a store to resolve pods in (``rollup --format prometheus``): ``alloc_id`` is the
    ``pod_uid`` label (a Kubernetes pod's uid is its allocation's id), and ``gpu_index``
    the ``gpu`` label as a number (empty where it is none). Idle GPUs' series and values
    outside their range are not merged rows (the ingest's rejects)."""
    return (
        "SELECT make_timestamp(w.ts_us) AS ts, g.node AS node_id, "
        "TRY_CAST(g.gpu AS BIGINT) AS gpu_index, w.sm_active, w.mem_used, p.pod_uid AS alloc_id "
        f"FROM {_MERGED} AS w JOIN {_GPUS} AS g USING (gpu_key) "
        f"LEFT JOIN {_PODS} AS p USING (pod_id)"
    )


def drop_staging(store: Store) -> None:
    """Free the parsed rows once the ingest call is over (they live until then)."""
    for name in _STAGING:
        store.run(f"DROP TABLE IF EXISTS {name}")


def _create_staging(store: Store) -> None:
    """The temporary tables the files are parsed into: one row per series, per sample."""
    store.run(
        f"CREATE OR REPLACE TEMP TABLE {_SERIES} (sid BIGINT, file_no INTEGER, metric VARCHAR, "
        "kind VARCHAR, node VARCHAR, gpu VARCHAR, gi_id VARCHAR, gi_slices DOUBLE, "
        "pod_uid VARCHAR, namespace VARCHAR, pod VARCHAR, attributed BOOLEAN, lkey VARCHAR, "
        "step DOUBLE, most DOUBLE, t0 DOUBLE, t1 DOUBLE)"
    )
    store.run(f"CREATE OR REPLACE TEMP TABLE {_SAMPLES} (sid BIGINT, ts DOUBLE, value DOUBLE)")


def _next_sid(store: Store) -> int:
    return int(store.scalar(f"SELECT COALESCE(max(sid), 0) FROM {_SERIES}"))


class _FileStager:
    """Stages one file's batches: a series row per distinct (metric, labels), its samples.

    A count series (count_over_time) keeps its largest count (``most``: a whole step)
    on its series row, and only the samples of the steps that hold fewer (partial
    steps), which are few: the merge reads a step without one as whole.
    """

    def __init__(self, store: Store, file_no: int, kind: str) -> None:
        self.store = store
        self.file_no = file_no
        self.kind = kind  # "value" or "count"
        self.offset = _next_sid(store)
        self.sids: dict[str, int] = {}

    def add(self, batch: read.SeriesBatch) -> None:
        local: list[int] = []
        new: dict[str, list[object]] = {
            "sid": [],
            "metric": [],
            "labels": [],
            "lkey": [],
            "step": [],
            "most": [],
        }
        samples = pl.DataFrame(
            {
                "series": pl.from_arrow(batch.series),
                "ts": pl.from_arrow(batch.ts),
                "value": pl.from_arrow(batch.value),
            }
        )
        most: list[float | None] = [None] * len(batch.names)
        if self.kind == "count" and samples.height:
            # a count is a number of raw samples: anything else (NaN, a blank) is none
            samples = samples.filter(
                pl.col("value").is_finite()
                & (pl.col("value") >= 1)
                & (pl.col("value") <= _MOST_SAMPLES)
                & (pl.col("value") == pl.col("value").round())
            )
            largest = samples.group_by("series").agg(pl.col("value").max())
            for index, value in largest.iter_rows():
                most[index] = value
            samples = samples.filter(pl.col("value") < pl.col("value").max().over("series"))
        for position, (name, labels, step) in enumerate(
            zip(batch.names, batch.labels, batch.steps, strict=True)
        ):
            lkey = json.dumps(sorted(labels.items()), ensure_ascii=False)
            key = f"{name}\n{lkey}"
            sid = self.sids.get(key)
            if sid is None:
                sid = self.sids[key] = self.offset + len(self.sids) + 1
                new["sid"].append(sid)
                new["metric"].append(name)
                new["labels"].append({"keys": list(labels), "values": list(labels.values())})
                new["lkey"].append(lkey)
                new["step"].append(step)
                new["most"].append(most[position])
            local.append(sid)
        if new["sid"]:
            frame = pl.DataFrame(
                new,
                schema={
                    "sid": pl.Int64,
                    "metric": pl.Utf8,
                    "labels": pl.Struct({"keys": pl.List(pl.Utf8), "values": pl.List(pl.Utf8)}),
                    "lkey": pl.Utf8,
                    "step": pl.Float64,
                    "most": pl.Float64,
                },
            )
            self.store.register_frame(_BATCH_SERIES, frame)
            self.store.run(
                f"INSERT INTO {_SERIES} SELECT sid, $file_no, metric, $kind, {_SERIES_COLUMNS}, "
                "lkey, step, most, NULL, NULL FROM (SELECT sid, metric, lkey, step, most, "
                f"map_from_entries(list_zip(labels.keys, labels.values)) AS labels FROM {_BATCH_SERIES})",
                {"file_no": self.file_no, "kind": self.kind},
            )
            self.store.unregister(_BATCH_SERIES)
        if samples.height:
            self.store.register_frame(_BATCH, samples)
            self.store.run(
                f"INSERT INTO {_SAMPLES} SELECT ($sids)[series + 1], ts, value FROM {_BATCH}",
                {"sids": local},
            )
            self.store.unregister(_BATCH)

    def finish(self, file: str) -> None:
        """The series' time spans; fails the file on a sample time no exporter writes."""
        self.store.run(
            f"UPDATE {_SERIES} SET t0 = r.t0, t1 = r.t1 FROM (SELECT sid, min(ts) AS t0, "
            f"max(ts) AS t1 FROM {_SAMPLES} WHERE sid > $offset GROUP BY sid) AS r "
            f"WHERE {_SERIES}.sid = r.sid",
            {"offset": self.offset},
        )
        _check_sample_times(self.store, file, self.offset)


def _stage_file(store: Store, item: _Input, file_no: int) -> None:
    file = str(item.path)
    if item.kind == "json":
        stager = _FileStager(store, file_no, "count" if _counts_file(item.path) else "value")
        unnamed = 0

        def keep(name: str | None) -> bool:
            nonlocal unnamed
            if name is None:
                unnamed += 1
            return metric_name(name) is not None

        for batch in read.read_query_range(item.path, _file_metric(item.path), keep=keep):
            stager.add(_upper(batch))
        if unnamed:
            raise InputError(
                file,
                f"{unnamed} series without a metric name (__name__, which PromQL functions drop): "
                f"name the file after its metric, e.g. {SM_ACTIVE}.json",
            )
        stager.finish(file)
        return
    stager = _FileStager(store, file_no, "value")
    staged = False
    for batch in read.read_text(item.path, item.path.stat().st_mtime, metric_name, item.kind):
        staged = staged or len(batch) > 0
        stager.add(batch)
    if not staged:
        raise InputError(file, f"no DCGM GPU series in it; expected {read.EXPECTED_TEXT}")
    stager.finish(file)


def _upper(batch: read.SeriesBatch) -> read.SeriesBatch:
    names = [metric_name(n) for n in batch.names]
    return read.SeriesBatch(names, batch.labels, batch.steps, batch.series, batch.ts, batch.value)


# the instants fleetaudit accepts (schema.TIME_RANGE), as epoch seconds (UTC)
_TS_RANGE = tuple(
    datetime.fromisoformat(day).replace(tzinfo=timezone.utc).timestamp()
    for day in schema.TIME_RANGE
)
_YEARS = "..".join(day[:4] for day in schema.TIME_RANGE)  # 1900..2200


def _check_sample_times(store: Store, file: str, offset: int) -> None:
    """Fail the file when a sample's time is not a number or lies outside the instants
    the schema accepts (1900..2200).

    Such a time is no instant a GPU reported at (a cut or garbled export, a time in
    the wrong unit): dropping the sample would hide it and casting it to microseconds
    would overflow later, in a merge that can no longer name the file.
    """
    lo, hi = _TS_RANGE
    bad = store.sql(
        f"SELECT ts FROM {_SAMPLES} WHERE sid > $offset "
        "AND (ts IS NULL OR NOT isfinite(ts) OR ts < $lo OR ts >= $hi) LIMIT 1",
        {"offset": offset, "lo": lo, "hi": hi},
    )
    if bad.height:
        ts = bad.item(0, 0)
        what = (
            "a sample time that is not a number"
            if ts is None or ts != ts
            else f"a sample time {ts:g} outside {_YEARS} (epoch seconds)"
        )
        raise InputError(
            file, f"{what}: not a time Prometheus or dcgm-exporter writes; export it again"
        )


def _code(metric: str) -> int:
    """A metric's code in the merge (1-based position in READ_METRICS)."""
    return READ_METRICS.index(metric) + 1


_TELEMETRY_CODES = ", ".join(str(_code(m)) for m in METRICS)
_RANGE_SQL = (
    "CASE m "
    + " ".join(f"WHEN {_code(m)} THEN {hi!r}" for m, hi in RANGES.items())
    + " END * (1 + 1e-9)"
)


@dataclass(frozen=True)
class _Merged:
    """What the merge found beside its rows: whether any step has a raw-sample count,
    the activity samples of idle GPUs left out per file, and the informational XIDs
    seen as (code, GPUs)."""

    counted: bool
    idle: dict[int, int]
    informational: list[tuple[int, int]]


def _merge(store: Store) -> _Merged:
    """Series samples -> one row per (GPU, instant) in _MERGED, its rejects in _REJECTS,
    the health intervals in _EVENTS.

    The work per sample is two joins on small integer keys and one grouping by
    (GPU, instant); only the samples of series that overlap in time with another
    series of the same GPU instance and metric (HA copies, one copy per pod of a
    shared GPU) pass through an extra grouping that counts them once.
    """
    codes = ", ".join(f"'{m}'" for m in READ_METRICS)
    # integer keys per series: GPU, GPU instance, label set, pod; the time span it covers
    store.run(
        f"CREATE OR REPLACE TEMP TABLE {_KEYS} AS "
        "WITH k AS (SELECT se.sid, se.file_no, se.kind, se.node, se.gpu, "
        f"list_position([{codes}], se.metric) AS m, se.gi_slices AS slices, "
        "dense_rank() OVER (ORDER BY se.node, se.gpu) AS gpu_key, "
        "dense_rank() OVER (ORDER BY se.node, se.gpu, se.gi_id) AS inst_key, "
        "dense_rank() OVER (ORDER BY se.metric, se.lkey) AS lk, "
        "se.pod_uid, se.namespace, se.pod, "
        "CASE WHEN se.pod_uid IS NOT NULL OR se.pod IS NOT NULL THEN dense_rank() OVER "
        "(ORDER BY se.pod_uid IS NULL AND se.pod IS NULL, se.pod_uid, se.namespace, se.pod) "
        "END AS pod_id, "
        # an idle GPU: no pod labels, on a node whose exporter labels pods (one exporter
        # runs on each node; its host label, unlike its instance, survives a restart)
        "se.node IS NOT NULL AND se.pod_uid IS NULL AND se.pod IS NULL "
        "AND bool_or(se.attributed) OVER (PARTITION BY se.node) AS idle, "
        # a count series' whole step, and for a value series that of its count series
        "se.most, max(se.most) OVER (PARTITION BY se.metric, se.lkey) AS cmost, "
        f"se.step, se.t0, se.t1 FROM {_SERIES} AS se), "
        "v AS (SELECT * FROM k WHERE kind = 'value' AND NOT idle) "
        "SELECT k.*, k.kind = 'value' AND NOT k.idle AND EXISTS (SELECT 1 FROM v AS o "
        "WHERE o.m = k.m AND o.inst_key = k.inst_key AND o.sid <> k.sid "
        "AND o.t0 <= k.t1 AND k.t0 <= o.t1) AS dup FROM k"
    )
    counted = bool(store.scalar(f"SELECT count(*) FROM {_KEYS} WHERE kind = 'count'"))
    if counted:
        # the raw samples of the partial steps, per label set (a step without one is whole);
        # the cadence of one raw sample per GPU
        store.run(
            f"CREATE OR REPLACE TEMP TABLE {_COUNTS} AS SELECT k.lk, sa.ts, max(sa.value) AS n "
            f"FROM {_SAMPLES} AS sa JOIN {_KEYS} AS k USING (sid) "
            "WHERE k.kind = 'count' AND isfinite(sa.value) AND sa.value > 0 GROUP BY k.lk, sa.ts"
        )
        store.run(
            f"CREATE OR REPLACE TEMP TABLE {_CADENCE} AS "
            "SELECT f.gpu_key, f.m, f.most, s.step / f.most AS interval_s FROM "
            f"(SELECT gpu_key, m, max(most) AS most FROM {_KEYS} WHERE kind = 'count' "
            "GROUP BY gpu_key, m) AS f LEFT JOIN "
            f"(SELECT gpu_key, m, min(step) AS step FROM {_KEYS} WHERE kind = 'value' "
            "GROUP BY gpu_key, m) AS s USING (gpu_key, m)"
        )
    _merge_samples(store, counted)
    informational = _health_intervals(store)
    idle = store.sql(
        f"SELECT k.file_no, count(*) FROM {_SAMPLES} AS sa JOIN {_KEYS} AS k USING (sid) "
        "WHERE k.idle AND k.kind = 'value' AND k.m <= 3 GROUP BY k.file_no"
    )
    store.run(f"DROP TABLE {_SAMPLES}")
    store.run(
        f"CREATE OR REPLACE TEMP TABLE {_GPUS} AS SELECT DISTINCT gpu_key, node, gpu FROM {_KEYS}"
    )
    store.run(
        f"CREATE OR REPLACE TEMP TABLE {_PODS} AS "
        f"SELECT DISTINCT pod_id, pod_uid, namespace, pod FROM {_KEYS} WHERE pod_id IS NOT NULL"
    )
    store.run(f"DROP TABLE IF EXISTS {_COUNTS}")
    return _Merged(counted, {int(f): int(n) for f, n in idle.iter_rows()}, informational)


def _merge_samples(store: Store, counted: bool) -> None:
    present = {int(r[0]) for r in store.sql(f"SELECT DISTINCT m FROM {_KEYS}").iter_rows()}

    def metric(name: str, weighted: bool) -> str:
        code = _code(name)
        if code not in present:
            return "CAST(NULL AS DOUBLE)"
        # MIG: instances add up (activities weighted by slices of 7); one instance per
        # GPU: the mean, so copies that the span check missed still count once
        which = f"m = {code}"
        mig = "value * slices / 7" if weighted else "value"
        return (
            f"sum(CASE WHEN slices IS NULL THEN value ELSE {mig} END) FILTER (WHERE {which}) "
            f"/ greatest(count(*) FILTER (WHERE {which} AND slices IS NULL), 1)"
        )

    n = "coalesce(c.n, k.cmost)" if counted else "CAST(NULL AS DOUBLE)"
    counts = f"LEFT JOIN {_COUNTS} AS c ON c.lk = k.lk AND c.ts = sa.ts " if counted else ""
    # one window of time's samples of GPUs that pods hold (or that no exporter maps),
    # without gaps (NaN, infinities, blank sentinels)
    chunk = (
        f"CREATE OR REPLACE TEMP TABLE {_CHUNK} AS SELECT k.gpu_key, k.inst_key, k.m, "
        f"k.slices, k.pod_id, k.file_no, k.dup, sa.ts, sa.value, {n} AS n "
        f"FROM {_SAMPLES} AS sa JOIN {_KEYS} AS k USING (sid) {counts}"
        f"WHERE k.kind = 'value' AND NOT k.idle AND k.m IN ({_TELEMETRY_CODES}) "
        f"AND isfinite(sa.value) AND sa.value < {BLANK_SENTINEL} "
        f"AND NOT sa.value BETWEEN {FP64_BLANKS[0]!r} AND {FP64_BLANKS[1]!r} "
        "AND sa.ts >= $lo AND (sa.ts < $hi OR $last AND sa.ts = $hi)"
    )
    in_range = f"value >= 0 AND value <= {_RANGE_SQL}"
    # a value outside its metric's range is no reading: a gap, and a reject that says so
    rejects = (
        f"SELECT gpu_key, CAST(round(ts * 1e6) AS BIGINT) AS ts_us, min(file_no) AS file_no, "
        f"m, max(value) AS value FROM {_CHUNK} WHERE NOT ({in_range}) GROUP BY gpu_key, ts, m"
    )
    full = f"LEFT JOIN {_CADENCE} AS f ON f.gpu_key = u1.gpu_key AND f.m = u1.m " if counted else ""
    samples = "least(sum(n), max(f.most))" if counted else "CAST(NULL AS DOUBLE)"
    merged = (
        f"WITH ok AS (SELECT * FROM {_CHUNK} WHERE {in_range}), "
        # overlapping copies of one GPU instance's metric count once: per pod the mean
        # (HA copies agree), then the pods (a shared GPU; a pod change within a step)
        # weighted by their raw samples
        "u1 AS (SELECT gpu_key, inst_key, m, ts, pod_id, any_value(slices) AS slices, "
        "min(file_no) AS file_no, avg(value) AS value, max(n) AS n FROM ok WHERE dup "
        "GROUP BY gpu_key, inst_key, m, ts, pod_id), "
        "u AS (SELECT gpu_key, m, slices, pod_id AS lo, pod_id AS hi, file_no, ts, value, n "
        "FROM ok WHERE NOT dup UNION ALL "
        "SELECT u1.gpu_key, u1.m, any_value(u1.slices), min(u1.pod_id), max(u1.pod_id), "
        "min(u1.file_no), u1.ts, CASE WHEN count(u1.n) = count(*) AND sum(u1.n) > 0 "
        "THEN sum(u1.value * u1.n) / sum(u1.n) ELSE avg(u1.value) END, "
        f"{samples} FROM u1 {full}GROUP BY u1.gpu_key, u1.inst_key, u1.m, u1.ts), "
        # MIG instances add up, activities weighted by their slices of 7
        "w AS (SELECT gpu_key, ts, "
        f"{metric(SM_ACTIVE, True)} AS sm, {metric(GR_ENGINE_ACTIVE, True)} AS gr, "
        f"{metric(GPU_UTIL, True)} AS util, {metric(FB_USED, False)} AS fb_used, "
        f"{metric(FB_FREE, False)} AS fb_free, {metric(FB_RESERVED, False)} AS fb_reserved, "
        f"max(n) FILTER (WHERE m = {_code(SM_ACTIVE)}) AS n_sm, "
        f"max(n) FILTER (WHERE m = {_code(GR_ENGINE_ACTIVE)}) AS n_gr, "
        f"max(n) FILTER (WHERE m = {_code(GPU_UTIL)}) AS n_util, "
        # one pod in every series of the GPU at this instant: it is named; several: none
        "CASE WHEN min(lo) = max(hi) THEN min(lo) END AS pod_id, "
        "coalesce(min(file_no) FILTER (WHERE m <= 3), min(file_no)) AS file_no "
        "FROM u GROUP BY gpu_key, ts) "
        # narrow rows (they wait for the load): the values, the series used as a code
        "SELECT CAST(gpu_key AS INTEGER) AS gpu_key, "
        "CAST(round(ts * 1e6) AS BIGINT) AS ts_us, "
        # clipped to [0, 1]; greatest() skips NULLs, so a GPU with no activity stays NULL
        "CASE WHEN coalesce(sm, gr, util) IS NOT NULL "
        "THEN least(greatest(coalesce(sm, gr, util / 100), 0), 1) END AS sm_active, "
        "CASE WHEN fb_used + fb_free + coalesce(fb_reserved, 0) > 0 "
        "THEN fb_used / (fb_used + fb_free + coalesce(fb_reserved, 0)) END AS mem_used, "
        "CAST(CASE WHEN sm IS NOT NULL THEN 1 WHEN gr IS NOT NULL THEN 2 "
        "WHEN util IS NOT NULL THEN 3 END AS UTINYINT) AS m, "
        "CASE WHEN sm IS NOT NULL THEN n_sm WHEN gr IS NOT NULL THEN n_gr ELSE n_util END AS n, "
        "CAST(pod_id AS INTEGER) AS pod_id, CAST(file_no AS INTEGER) AS file_no FROM w"
    )
    # by time windows of about _CHUNK_SAMPLES samples: the grouping's table stays bounded
    # (an instant is never split, so every (GPU, instant) is merged whole)
    lo, hi, total = store.sql(f"SELECT min(ts), max(ts), count(*) FROM {_SAMPLES}").row(0)
    chunks = max(1, -(-int(total) // _CHUNK_SAMPLES)) if lo is not None else 1
    lo, hi = (lo, hi) if lo is not None else (0.0, 0.0)
    bounds = [lo + (hi - lo) * i / chunks for i in range(chunks)] + [hi]
    for i in range(chunks):
        params = {"lo": bounds[i], "hi": bounds[i + 1], "last": i == chunks - 1}
        store.run(chunk, params)
        first = i == 0
        for table, select in ((_MERGED, merged), (_REJECTS, rejects)):
            into = f"CREATE OR REPLACE TEMP TABLE {table} AS " if first else f"INSERT INTO {table} "
            store.run(into + select)
    store.run(f"DROP TABLE IF EXISTS {_CHUNK}")


def _health_intervals(store: Store) -> list[tuple[int, int]]:
    """XID and row-remap series -> GPU-level unhealthy intervals in _EVENTS.

    A GPU is unhealthy from the first sample showing an XID of RESET_XIDS (or a failed
    row remapping) to the first later sample that shows anything else (no error, an
    informational XID, another reset XID, which opens an interval of its own); an
    interval still going at the GPU's last sample is open. Gaps (a GPU off the bus
    reports nothing) do not end it.
    """
    xid, remap = _code(XID_ERRORS), _code(ROW_REMAP_FAILURE)
    store.run(
        f"CREATE OR REPLACE TEMP TABLE {_EVENTS} AS "
        "WITH x AS (SELECT k.gpu_key, k.m, sa.ts, max(sa.value) AS v, min(k.file_no) AS file_no "
        f"FROM {_SAMPLES} AS sa JOIN {_KEYS} AS k USING (sid) "
        f"WHERE k.kind = 'value' AND k.m IN ({xid}, {remap}) AND isfinite(sa.value) "
        f"AND sa.value >= 0 AND sa.value < {BLANK_SENTINEL} GROUP BY k.gpu_key, k.m, sa.ts), "
        # an XID is a whole number below 65536 (anything else, an averaged blank, is none)
        f"c AS (SELECT *, CASE WHEN m = {xid} AND v = round(v) AND list_contains($reset, "
        f"TRY_CAST(v AS INTEGER)) THEN TRY_CAST(v AS INTEGER) WHEN m = {remap} AND v > 0 "
        "THEN 1 ELSE 0 END AS rc FROM x), "
        "l AS (SELECT *, lag(rc) OVER w AS prev, lead(ts) OVER w AS nxt FROM c "
        "WINDOW w AS (PARTITION BY gpu_key, m ORDER BY ts)), "
        "g AS (SELECT *, sum(CASE WHEN rc <> 0 AND (prev IS NULL OR prev <> rc) THEN 1 ELSE 0 END) "
        "OVER (PARTITION BY gpu_key, m ORDER BY ts) AS run FROM l) "
        "SELECT gpu_key, m, rc, min(ts) AS t0, last(nxt ORDER BY ts) AS t1, "
        "min(file_no) AS file_no FROM g WHERE rc <> 0 GROUP BY gpu_key, m, run, rc",
        {"reset": sorted(RESET_XIDS)},
    )
    # the XIDs that need no reset: counted for a note (their GPUs stay healthy)
    found = store.sql(
        "SELECT CAST(v AS INTEGER) AS code, count(DISTINCT gpu_key) AS gpus FROM "
        f"(SELECT k.gpu_key, sa.value AS v FROM {_SAMPLES} AS sa JOIN {_KEYS} AS k USING (sid) "
        f"WHERE k.kind = 'value' AND k.m = {xid} AND sa.value >= 1 AND sa.value < 65536 "
        "AND sa.value = round(sa.value)) "
        "WHERE NOT list_contains($reset, CAST(v AS INTEGER)) GROUP BY code ORDER BY code",
        {"reset": sorted(RESET_XIDS)},
    )
    return [(int(c), int(g)) for c, g in found.iter_rows()]


def _rows_select(store: Store, file_no: int, counted: bool, by_pod_name: bool) -> str:
    """SQL: the telemetry rows of one file, with node, GPU, metric name and ``alloc_id``,
    and its rejects (values outside their range, series without a host label)."""
    by_uid = "(SELECT DISTINCT alloc_id FROM allocations) AS u ON u.alloc_id = t.pod_uid"
    if by_pod_name:
        # the latest allocation of that pod on that node started by then, if still running
        by_name = (
            "ASOF LEFT JOIN (SELECT alloc_id AS named_id, node_id AS a_node, "
            "coalesce(CAST(namespace AS VARCHAR), '') AS a_namespace, "
            "CAST(pod AS VARCHAR) AS a_pod, start_time AS a_start, end_time AS a_end "
            "FROM allocations WHERE pod IS NOT NULL) AS a "
            "ON a.a_node = t.node_id AND a.a_pod = t.pod "
            "AND a.a_namespace = coalesce(t.namespace, '') AND t.ts >= a.a_start "
        )
        named = "CASE WHEN a.a_end IS NULL OR t.ts < a.a_end THEN a.named_id END"
    else:
        by_name, named = "", "NULL"
    names = ", ".join(f"'{m}'" for m in ACTIVITY_METRICS)
    # a step without its count (a metric exported without count_over_time) counts whole
    weights = (
        "CAST(round(coalesce(w.n, c.most, c0.most)) AS BIGINT) AS samples, "
        "coalesce(c.interval_s, c0.interval_s) AS sample_interval_s, "
        if counted
        else ""
    )
    cadence = (
        f"LEFT JOIN {_CADENCE} AS c ON c.gpu_key = w.gpu_key AND c.m = w.m "
        # the GPU's cadence, for a metric exported without its counts
        f"LEFT JOIN (SELECT gpu_key, max(most) AS most, min(interval_s) AS interval_s "
        f"FROM {_CADENCE} GROUP BY gpu_key) AS c0 ON c0.gpu_key = w.gpu_key "
        if counted
        else ""
    )
    weighted = "t.samples, t.sample_interval_s, " if counted else ""
    no_weights = "NULL, NULL, " if counted else ""
    columns = [f"'{m}'" for m in METRICS]
    limits = [f"'{RANGES[m]:g}'" for m in METRICS]
    reject = (
        "CASE WHEN t.node_id IS NULL THEN 'node_id' END AS _reject_column, "
        "CAST(NULL AS VARCHAR) AS _reject_value, "
        f"CASE WHEN t.node_id IS NULL THEN {quote_literal(NO_HOST)} END AS _reject_reason"
    )
    return (
        "WITH t AS (SELECT make_timestamp(w.ts_us) AS ts, g.node AS node_id, "
        f"g.gpu AS gpu_index, w.sm_active, w.mem_used, [{names}][w.m] AS metric, {weights}"
        "p.pod_uid, p.namespace, p.pod "
        f"FROM {_MERGED} AS w JOIN {_GPUS} AS g USING (gpu_key) {cadence}"
        f"LEFT JOIN {_PODS} AS p USING (pod_id) WHERE w.file_no = {int(file_no)}) "
        "SELECT t.ts, t.node_id, t.gpu_index, t.sm_active, t.mem_used, "
        f"coalesce(u.alloc_id, {named}) AS alloc_id, t.metric, {weighted}{reject} "
        f"FROM t {by_name}LEFT JOIN {by_uid} "
        # values outside their metric's range: gaps, each a reject row of its own
        "UNION ALL SELECT make_timestamp(r.ts_us), g.node, g.gpu, NULL, NULL, NULL, NULL, "
        f"{no_weights}CASE WHEN r.m <= 3 THEN 'sm_active' ELSE 'mem_used' END, "
        "CAST(r.value AS VARCHAR), "
        f"[{', '.join(columns)}][r.m] || ' ' || CAST(r.value AS VARCHAR) || ' is outside its range "
        f"0..' || [{', '.join(limits)}][r.m] || ': not a reading (a blank value averaged into "
        "the step?); left a gap' "
        f"FROM {_REJECTS} AS r JOIN {_GPUS} AS g USING (gpu_key) WHERE r.file_no = {int(file_no)}"
    )


def _events_select(file_no: int) -> str:
    """SQL: the health intervals first seen in one file. An interval that overlaps one
    stored from the same GPU, source and reason continues it (a re-run over an
    overlapping window gives the same start, so the stored row is replaced)."""
    xid = _code(XID_ERRORS)
    return (
        "WITH e AS (SELECT g.node AS node_id, g.gpu AS gpu_index, "
        "make_timestamp(CAST(round(v.t0 * 1e6) AS BIGINT)) AS start_time, "
        "make_timestamp(CAST(round(v.t1 * 1e6) AS BIGINT)) AS end_time, "
        "'unhealthy' AS state, "
        f"CASE WHEN v.m = {xid} THEN 'XID ' || v.rc ELSE 'row remapping failed' END AS reason, "
        f"CASE WHEN v.m = {xid} THEN 'dcgm:xid' ELSE 'dcgm:row_remap' END AS source "
        f"FROM {_EVENTS} AS v JOIN {_GPUS} AS g USING (gpu_key) WHERE v.file_no = {int(file_no)}) "
        "SELECT e.node_id, e.gpu_index, coalesce((SELECT min(o.start_time) FROM node_events AS o "
        "WHERE o.node_id = e.node_id AND o.gpu_index = TRY_CAST(e.gpu_index AS INTEGER) "
        "AND o.state = e.state AND o.source = e.source AND o.reason = e.reason "
        "AND o.start_time < e.start_time AND (o.end_time IS NULL OR o.end_time >= e.start_time)), "
        "e.start_time) AS start_time, e.end_time, e.state, e.reason, e.source, "
        "CASE WHEN e.node_id IS NULL THEN 'node_id' END AS _reject_column, "
        "CAST(NULL AS VARCHAR) AS _reject_value, "
        f"CASE WHEN e.node_id IS NULL THEN {quote_literal(NO_HOST)} END AS _reject_reason FROM e"
    )
