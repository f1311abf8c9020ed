"""``--format prometheus``: dcgm-exporter GPU series into ``telemetry``.

Reads Prometheus ``/api/v1/query_range`` JSON responses (one file per metric
and time chunk, any number of them) and the text exposition formats of a
dcgm-exporter scrape (Prometheus text and OpenMetrics, parsed by
prometheus-client). query_range files are parsed by DuckDB (``read_json`` and
``unnest``): no Python loop runs per sample. docs/formats/prometheus.md:

- one telemetry row per (node, GPU index, instant). ``sm_active`` is
  DCGM_FI_PROF_SM_ACTIVE, else DCGM_FI_PROF_GR_ENGINE_ACTIVE, else
  DCGM_FI_DEV_GPU_UTIL / 100, clipped to [0, 1]; the column ``metric`` names
  the one used. ``mem_used`` is FB_USED / (FB_USED + FB_FREE + FB_RESERVED).
- the node is the ``hostname`` label, or ``Hostname`` (dcgm-exporter before
  May 2026); the GPU is the ``gpu`` label.
- series that differ only in labels the fleet does not key on (``instance``,
  ``job``, ``replica``, ``prometheus``: HA pairs) count once; a GPU instance
  shared by several pods (time-slicing, MPS) reports one value per pod, which
  counts once and names no allocation (the report shares it among the
  allocations on that node); MIG instances of one GPU add up, each activity
  weighted by its slices of 7 (``GPU_I_PROFILE`` ``3g.40gb`` -> 3/7).
- NaN, infinities and DCGM's blank sentinels (>= 9e18) are gaps: no row.
- ``alloc_id``: the ``pod_uid`` label when a stored allocation has that id;
  else the ``pod``/``namespace`` labels (or ``pod_name``/``pod_namespace``)
  matched against the ``pod`` and ``namespace`` columns of the stored
  allocations on that node active at the instant. An unknown pod leaves it
  empty: the sample still counts for its node. A GPU the exporter reports with
  empty pod labels holds no pod: its samples are not loaded (the report would
  otherwise share them among the node's allocations).
- a query_range series without ``__name__`` (PromQL functions such as
  ``avg_over_time`` drop it) takes the metric named in its file's name.
- a text scrape's samples without a timestamp take the file's modification time.
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import polars as pl

from fleetaudit.core.errors import InputError, QueryError
from fleetaudit.inputs.ingest.sources import Source
from fleetaudit.model import schema
from fleetaudit.model.store import Store

FORMAT = "prometheus"

SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
FB_RESERVED = "DCGM_FI_DEV_FB_RESERVED"
ACTIVITY_METRICS = (SM_ACTIVE, GR_ENGINE_ACTIVE, GPU_UTIL)  # in order of preference
METRICS = (*ACTIVITY_METRICS, FB_USED, FB_FREE, FB_RESERVED)

BLANK_SENTINEL = 9e18  # DCGM's "blank" values sit near 9.22e18: no reading
_CHUNK_SAMPLES = 4_000_000  # samples merged per statement
# DuckDB's memory during the call (it spills to disk beyond it), unless
# $FLEETAUDIT_MEMORY_LIMIT sets one: keeps a 20 M-sample dump well within 2 GiB of RSS
# (benchmarks/README.md, "Prometheus ingest")
MEMORY_LIMIT = "1GB"
_SUFFIXES = (".json", ".json.gz", ".prom", ".txt", ".om", ".metrics")

_SERIES = "_fa_prom_series"
_SAMPLES = "_fa_prom_samples"
_FILE = "_fa_prom_file"
_TEXT = "_fa_prom_text"
_KEYS = "_fa_prom_keys"
_MERGED = "_fa_prom_merged"
_GPUS = "_fa_prom_gpus"
_PODS = "_fa_prom_pods"

_MATRIX = (
    "STRUCT(resultType VARCHAR, "
    'result STRUCT(metric MAP(VARCHAR, VARCHAR), "values" VARCHAR[][])[])'
)
_EXPECTED_JSON = (
    'a Prometheus query_range response ({"status": "success", "data": '
    '{"resultType": "matrix", "result": [...]}})'
)
_EXPECTED_TEXT = "dcgm-exporter metrics (Prometheus text or OpenMetrics, DCGM_FI_* series)"


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
    # the exporter maps GPUs to pods (the label is there, empty on a GPU no pod holds)
    "labels['pod'] IS NOT NULL OR labels['pod_name'] IS NOT NULL "
    "OR labels['pod_uid'] IS NOT NULL AS attributed"
)


@dataclass(frozen=True)
class _Input:
    path: Path
    kind: str  # "json" or "text"


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
                    ".prom/.txt/.om scrapes)",
                )
            files.extend(inside)
        elif path.is_file():
            files.append(path)
        else:
            raise InputError(str(path), "no such file or folder")
    return [_Input(p, _sniff(p)) for p in files]


def _open_text(path: Path, size: int | None = None) -> str:
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            return fh.read() if size is None else fh.read(size)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(str(path), f"cannot read: {reason}") from exc


def _sniff(path: Path) -> str:
    head = _open_text(path, 4096).lstrip()
    if not head:
        raise InputError(str(path), f"empty file; expected {_EXPECTED_JSON} or {_EXPECTED_TEXT}")
    return "json" if head[0] in "{[" else "text"


def _file_metric(path: Path) -> str | None:
    """The metric a file's name names (for series without ``__name__``)."""
    found = [m for m in METRICS if m.lower() in path.name.lower()]
    return max(found, key=len) if found else None


def telemetry_sources(
    store: Store, paths: list[Path], progress: Callable[[str], None] | None = None
) -> list[Source]:
    """Parse every file, merge the series into telemetry rows, one source per file.

    The merged rows wait, narrow, in a temporary table of this connection
    (nothing of the store is written here; :func:`drop_staging` frees it). Each
    source adds node, GPU, metric and ``alloc_id`` (resolved against the stored
    allocations) as the ingest's transaction loads it, where the rows are
    checked like native ones (unknown node, GPU index beyond the node's GPUs).
    """
    inputs = parse_files(store, paths, progress)
    sources = []
    for file_no, item in enumerate(inputs):
        select = _rows_select(store, file_no)
        numbered = (
            f"SELECT *, row_number() OVER (ORDER BY node_id, gpu_index, ts) AS _row FROM ({select})"
        )
        sources.append(Source(str(item.path), "telemetry", select, numbered))
    return sources


def parse_files(
    store: Store, paths: list[Path], progress: Callable[[str], None] | None = None
) -> list[_Input]:
    """Parse every file and merge the series into one narrow row per GPU and instant
    (temporary tables of this connection; :func:`drop_staging` frees them)."""
    inputs = _classify(paths)
    _create_staging(store)
    try:
        for file_no, item in enumerate(inputs):
            if progress is not None:
                progress(f"telemetry: parsing {item.path} ({file_no + 1}/{len(inputs)})")
            if item.kind == "json":
                _stage_json(store, item.path, file_no)
            else:
                _stage_text(store, item.path, file_no)
        if progress is not None:
            progress("telemetry: merging the series into one row per GPU and instant")
        _merge(store)
    finally:
        store.run(f"DROP TABLE IF EXISTS {_FILE}")
    return inputs


def merged_rows_select() -> str:
    """SQL: every merged row of :func:`parse_files` as a raw native telemetry row, without
    a store to resolve pods in (``rollup --format prometheus``): ``alloc_id`` is the
    ``pod_uid`` label (a Kubernetes pod's uid is its allocation's id), and ``gpu_index``
    the ``gpu`` label as a number (empty where it is none)."""
    return (
        "SELECT make_timestamp(w.ts_us) AS ts, g.node AS node_id, "
        "TRY_CAST(g.gpu AS BIGINT) AS gpu_index, w.sm_active, w.mem_used, p.pod_uid AS alloc_id "
        f"FROM {_MERGED} AS w JOIN {_GPUS} AS g USING (gpu_key) "
        f"LEFT JOIN {_PODS} AS p USING (pod_id)"
    )


def drop_staging(store: Store) -> None:
    """Free the parsed rows once the ingest call is over (they live until then)."""
    for name in (_FILE, _SERIES, _SAMPLES, _KEYS, _MERGED, _GPUS, _PODS):
        store.run(f"DROP TABLE IF EXISTS {name}")


def _create_staging(store: Store) -> None:
    """The temporary tables the files are parsed into: one row per series, per sample."""
    store.run(
        f"CREATE OR REPLACE TEMP TABLE {_SERIES} (sid BIGINT, file_no INTEGER, metric VARCHAR, "
        "node VARCHAR, gpu VARCHAR, gi_id VARCHAR, gi_slices DOUBLE, pod_uid VARCHAR, "
        "namespace VARCHAR, pod VARCHAR, attributed BOOLEAN, t0 DOUBLE, t1 DOUBLE)"
    )
    store.run(f"CREATE OR REPLACE TEMP TABLE {_SAMPLES} (sid BIGINT, ts DOUBLE, value DOUBLE)")


def _next_sid(store: Store) -> int:
    return int(store.scalar(f"SELECT COALESCE(max(sid), 0) FROM {_SERIES}"))


def _stage_json(store: Store, path: Path, file_no: int) -> None:
    file = str(path)
    params = {"path": file, "file_metric": _file_metric(path)}
    size = os.path.getsize(path)
    # read_json holds one document in a buffer of this size; gzip may expand ~10x
    limit = max(size * (16 if file.lower().endswith(".gz") else 1) + (1 << 20), 16 << 20)
    read = (
        f"read_json($path, format = 'unstructured', maximum_object_size = {int(limit)}, "
        f"compression = 'auto', columns = {{status: 'VARCHAR', data: '{_MATRIX}'}})"
    )
    offset = _next_sid(store)
    try:
        store.run(
            f"CREATE OR REPLACE TEMP TABLE {_FILE} AS "
            f"SELECT {offset} + row_number() OVER () AS sid, "
            "coalesce(NULLIF(r.metric['__name__'], ''), $file_metric) AS metric, "
            'r.metric AS labels, r."values" AS vals '
            f"FROM (SELECT unnest(data.result) AS r FROM {read} "
            "WHERE status = 'success' AND data.resultType = 'matrix')",
            params,
        )
        if not store.scalar(f"SELECT count(*) FROM {_FILE}"):
            _check_empty_json(store, file, read)
            return
        unnamed = store.scalar(f"SELECT count(*) FROM {_FILE} WHERE metric IS NULL")
        if unnamed:
            raise InputError(
                file,
                f"{unnamed} series without a metric name (__name__, which PromQL functions drop): "
                f"name the file after its metric, e.g. {SM_ACTIVE}.json",
            )
        store.run(
            # Prometheus returns each series' values in time order: the span is the ends
            f"INSERT INTO {_SERIES} SELECT sid, $file_no, metric, {_SERIES_COLUMNS}, "
            "TRY_CAST(vals[1][1] AS DOUBLE), TRY_CAST(vals[-1][1] AS DOUBLE) "
            f"FROM {_FILE} WHERE list_contains($metrics, metric)",
            {"file_no": file_no, "metrics": list(METRICS)},
        )
        store.run(
            f"INSERT INTO {_SAMPLES} SELECT f.sid, TRY_CAST(v[1] AS DOUBLE), TRY_CAST(v[2] AS DOUBLE) "
            f"FROM {_FILE} AS f, unnest(f.vals) AS u(v) WHERE list_contains($metrics, f.metric)",
            {"metrics": list(METRICS)},
        )
    except QueryError as exc:
        raise InputError(file, f"cannot read: {exc.message}; expected {_EXPECTED_JSON}") from exc
    _check_sample_times(store, file, offset)


def _check_empty_json(store: Store, file: str, read: str) -> None:
    """A response without series: fine when it is an empty matrix, else say what it is."""
    head = store.sql(
        f"SELECT status, data.resultType AS kind, len(data.result) AS n FROM {read}",
        {"path": file},
    )
    if head.height == 1:
        row = head.row(0, named=True)
        if row["status"] == "success" and row["kind"] == "matrix":
            return  # a window without samples
        if row["status"] == "error":
            raise InputError(file, "a Prometheus error response, not data; re-run the query")
        if row["status"] == "success" and row["kind"] is not None:
            raise InputError(
                file,
                f"a {row['kind']} result (an instant query?); expected {_EXPECTED_JSON}",
            )
    raise InputError(file, f"not {_EXPECTED_JSON}")


def _stage_text(store: Store, path: Path, file_no: int) -> None:
    """A dcgm-exporter scrape (or several OpenMetrics scrapes), parsed by prometheus-client."""
    from prometheus_client.openmetrics.parser import (
        text_string_to_metric_families as openmetrics_families,
    )
    from prometheus_client.parser import text_string_to_metric_families as text_families

    file = str(path)
    text = _open_text(path)
    mtime = path.stat().st_mtime
    rows: dict[str, list[object]] = {"metric": [], "labels": [], "ts": [], "value": []}
    lines = text.splitlines()
    openmetrics = any(line.strip() == "# EOF" for line in lines)
    try:
        if openmetrics:
            chunks = re.split(r"(?m)^# EOF[ \t]*$\n?", text)
            if chunks and chunks[-1].strip():
                raise ValueError("text after the last # EOF (a scrape cut short?)")
            families: Iterable[Any] = (
                family
                for chunk in chunks
                if chunk.strip()
                for family in openmetrics_families(chunk + "# EOF\n")
            )
        else:
            families = text_families(text)
        for family in families:
            for sample in family.samples:
                if sample.name not in METRICS:
                    continue
                ts = mtime if sample.timestamp is None else float(sample.timestamp)
                rows["metric"].append(sample.name)
                rows["labels"].append(
                    {"keys": list(sample.labels), "values": list(sample.labels.values())}
                )
                rows["ts"].append(ts)
                rows["value"].append(float(sample.value))
    except ValueError as exc:
        raise InputError(file, f"cannot parse as {_EXPECTED_TEXT}: {exc}") from exc
    if not rows["metric"]:
        raise InputError(file, f"no DCGM GPU series in it; expected {_EXPECTED_TEXT}")
    frame = pl.DataFrame(
        rows,
        schema={
            "metric": pl.Utf8,
            "labels": pl.Struct({"keys": pl.List(pl.Utf8), "values": pl.List(pl.Utf8)}),
            "ts": pl.Float64,
            "value": pl.Float64,
        },
    )
    store.register_frame(_TEXT, frame)
    offset = _next_sid(store)
    # one series per distinct label set of a metric
    store.run(
        f"CREATE OR REPLACE TEMP TABLE {_FILE} AS "
        f"SELECT {offset} + dense_rank() OVER (ORDER BY metric, CAST(labels AS VARCHAR)) AS sid, "
        "metric, map_from_entries(list_zip(labels.keys, labels.values)) AS labels_map, ts, value "
        f"FROM {_TEXT}"
    )
    store.run(
        f"INSERT INTO {_SERIES} SELECT sid, $file_no, any_value(metric), "
        f"{_SERIES_COLUMNS.replace('labels[', 'any_value(labels_map)[')}, min(ts), max(ts) "
        f"FROM {_FILE} GROUP BY sid",
        {"file_no": file_no},
    )
    store.run(f"INSERT INTO {_SAMPLES} SELECT sid, ts, value FROM {_FILE}")
    store.con.unregister(_TEXT)
    _check_sample_times(store, file, offset)


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
            if ts is None
            else f"a sample time {ts:g} outside {_YEARS} (epoch seconds)"
        )
        raise InputError(
            file, f"{what}: not a time Prometheus or dcgm-exporter writes; export it again"
        )


def _merge(store: Store) -> None:
    """Series samples -> one row per (GPU, instant) in _MERGED.

    The work per sample is two joins on small integer keys and one grouping by
    (GPU, instant); only the samples of series that overlap in time with
    another series of the same GPU instance and metric (HA copies, one copy per
    pod of a shared GPU) pass through an extra grouping that counts them once.
    """
    codes = ", ".join(f"'{m}'" for m in METRICS)
    # integer keys per series: GPU, GPU instance, pod; the time span it covers
    store.run(
        f"CREATE OR REPLACE TEMP TABLE {_KEYS} AS "
        "WITH k AS (SELECT se.sid, se.file_no, se.node, se.gpu, "
        f"list_position([{codes}], se.metric) AS m, se.gi_slices AS slices, "
        "dense_rank() OVER (ORDER BY se.node, se.gpu) AS gpu_key, "
        "dense_rank() OVER (ORDER BY se.node, se.gpu, se.gi_id) AS inst_key, "
        "se.pod_uid, se.namespace, se.pod, "
        "CASE WHEN se.pod_uid IS NOT NULL OR se.pod IS NOT NULL THEN dense_rank() OVER "
        "(ORDER BY se.pod_uid IS NULL AND se.pod IS NULL, se.pod_uid, se.namespace, se.pod) "
        "END AS pod_id, se.attributed, se.t0, se.t1 "
        f"FROM {_SERIES} AS se) "
        "SELECT k.*, EXISTS (SELECT 1 FROM k AS o WHERE o.m = k.m AND o.inst_key = k.inst_key "
        "AND o.sid <> k.sid AND o.t0 <= k.t1 AND k.t0 <= o.t1) AS dup FROM k"
    )

    present = {int(r[0]) for r in store.sql(f"SELECT DISTINCT m FROM {_KEYS}").iter_rows()}

    def metric(name: str, weighted: bool) -> str:
        code = METRICS.index(name) + 1
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

    merged = (
        # gaps: NaN, infinities, blank sentinels
        "WITH s AS (SELECT k.gpu_key, k.inst_key, k.m, k.slices, k.pod_id, k.file_no, k.dup, "
        "k.attributed, "
        f"sa.ts, sa.value FROM {_SAMPLES} AS sa JOIN {_KEYS} AS k USING (sid) "
        f"WHERE isfinite(sa.value) AND sa.value < {BLANK_SENTINEL} "
        "AND sa.ts >= $lo AND (sa.ts < $hi OR $last AND sa.ts = $hi)), "
        # overlapping copies of one GPU instance's metric count once
        "u AS (SELECT gpu_key, m, slices, pod_id AS lo, pod_id AS hi, attributed, file_no, "
        "ts, value FROM s WHERE NOT dup UNION ALL "
        "SELECT gpu_key, m, any_value(slices), min(pod_id), max(pod_id), bool_and(attributed), "
        "min(file_no), ts, avg(value) FROM s WHERE dup GROUP BY gpu_key, inst_key, m, ts) "
        # MIG instances add up, activities weighted by their slices of 7
        ", w AS (SELECT gpu_key, ts, "
        f"{metric(SM_ACTIVE, True)} AS sm, {metric(GR_ENGINE_ACTIVE, True)} AS gr, "
        f"{metric(GPU_UTIL, True)} AS util, {metric(FB_USED, False)} AS fb_used, "
        f"{metric(FB_FREE, False)} AS fb_free, {metric(FB_RESERVED, False)} AS fb_reserved, "
        # one pod in every series of the GPU at this instant: it is named; several: none
        "CASE WHEN min(lo) = max(hi) THEN min(lo) END AS pod_id, "
        # the exporter says no pod holds the GPU: no allocation's telemetry, not loaded
        "bool_and(attributed) AND max(hi) IS NULL AS idle, "
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
        "CAST(pod_id AS INTEGER) AS pod_id, CAST(file_no AS INTEGER) AS file_no "
        "FROM w WHERE NOT idle"
    )
    # by time windows of about _CHUNK_SAMPLES samples: the grouping's table stays bounded
    # (an instant is never split, so every (GPU, instant) is merged whole)
    lo, hi, n = store.sql(f"SELECT min(ts), max(ts), count(*) FROM {_SAMPLES}").row(0)
    chunks = max(1, -(-int(n) // _CHUNK_SAMPLES)) if lo is not None else 1
    lo, hi = (lo, hi) if lo is not None else (0.0, 0.0)
    bounds = [lo + (hi - lo) * i / chunks for i in range(chunks)] + [hi]
    for i in range(chunks):
        into = (
            f"CREATE OR REPLACE TEMP TABLE {_MERGED} AS " if i == 0 else f"INSERT INTO {_MERGED} "
        )
        params = {"lo": bounds[i], "hi": bounds[i + 1], "last": i == chunks - 1}
        store.run(into + merged, params)
    store.run(f"DROP TABLE {_SAMPLES}")
    store.run(
        f"CREATE OR REPLACE TEMP TABLE {_GPUS} AS SELECT DISTINCT gpu_key, node, gpu FROM {_KEYS}"
    )
    store.run(
        f"CREATE OR REPLACE TEMP TABLE {_PODS} AS "
        f"SELECT DISTINCT pod_id, pod_uid, namespace, pod FROM {_KEYS} WHERE pod_id IS NOT NULL"
    )
    store.run(f"DROP TABLE {_KEYS}")
    store.run(f"DROP TABLE {_SERIES}")


def _rows_select(store: Store, file_no: int) -> str:
    """SQL: the telemetry rows of one file, with node, GPU, metric name and ``alloc_id``."""
    by_uid = "(SELECT DISTINCT alloc_id FROM allocations) AS u ON u.alloc_id = t.pod_uid"
    stored = store.column_types("allocations")
    if "pod" in stored and "namespace" in stored:
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
    return (
        "WITH t AS (SELECT make_timestamp(w.ts_us) AS ts, g.node AS node_id, "
        f"g.gpu AS gpu_index, w.sm_active, w.mem_used, [{names}][w.m] AS metric, "
        "p.pod_uid, p.namespace, p.pod "
        f"FROM {_MERGED} AS w JOIN {_GPUS} AS g USING (gpu_key) "
        f"LEFT JOIN {_PODS} AS p USING (pod_id) WHERE w.file_no = {int(file_no)}) "
        "SELECT t.ts, t.node_id, t.gpu_index, t.sm_active, t.mem_used, "
        f"coalesce(u.alloc_id, {named}) AS alloc_id, t.metric "
        f"FROM t {by_name}LEFT JOIN {by_uid}"
    )
