"""``--format alibaba-gpu-v2023``: the public Alibaba GPU trace of 2023 (FGD, ATC'23).

Maps ``openb_node_list_*.csv`` onto ``nodes`` and one ``openb_pod_list_*.csv``
onto ``requests`` (pods have no node, so they are requests). The mapped
columns then pass the same validation as native files. docs/formats/alibaba-gpu-v2023.md:

- ``gpu_milli / 1000`` is a GPU share when ``num_gpu`` is 1 and ``gpu_milli``
  is below 1000; otherwise the pod asks for ``num_gpu`` whole GPUs, as one pod.
- ``gpu_spec`` is the set of allowed models; duplicated entries are dropped
  and the set is written sorted (``V100M16|V100M32|V100M32`` -> ``V100M16|V100M32``).
- times are seconds from ``--trace-start``; an empty ``scheduled_time`` means
  the pod never started (still queued); the 5-column multigpu lists have no
  times at all, so every pod is submitted at ``--trace-start`` and queued.
- qos ``LS``, ``Guaranteed`` and ``Burstable`` map to priority high, ``BE``
  (best effort) to low.
- nodes have no switch_id: each is a domain by itself, unless ``--topology``
  places them (:mod:`fleetaudit.inputs.ingest.topology`; the Crux ``topo.csv`` deals
  them into its PSW+ASW domains).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from fleetaudit.core.errors import InputError
from fleetaudit.core.options import ALIBABA_TRACE_START
from fleetaudit.inputs.ingest.sources import CSV_NUMBERED_ROWS, CSV_ROWS, Source, csv_params

FORMAT = "alibaba-gpu-v2023"
DEFAULT_TRACE_START = ALIBABA_TRACE_START
NODE_LIST = "openb_node_list_gpu_node.csv"
DEFAULT_POD_LIST = "openb_pod_list_default.csv"



def _classify(paths: list[Path]) -> tuple[Path, Path | None]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            for name in (NODE_LIST, DEFAULT_POD_LIST):
                if (path / name).is_file():
                    files.append(path / name)
        elif path.is_file():
            files.append(path)
        else:
            raise InputError(str(path), "no such file or folder")
    node_files = [p for p in files if p.name.startswith("openb_node_list")]
    pod_files = [p for p in files if p.name.startswith("openb_pod_list")]
    other = [p for p in files if p not in node_files and p not in pod_files]
    if other:
        raise InputError(
            str(other[0]),
            f"not a file of the {FORMAT} trace (openb_node_list_*.csv, openb_pod_list_*.csv)",
        )
    if len(node_files) != 1:
        raise InputError(
            ", ".join(str(p) for p in paths),
            f"{FORMAT} needs exactly one openb_node_list_*.csv (found {len(node_files)})",
        )
    if len(pod_files) > 1:
        raise InputError(
            str(pod_files[1]),
            f"{FORMAT} takes one pod list per call (pod names repeat across the lists)",
        )
    return node_files[0], (pod_files[0] if pod_files else None)




def _not_number(text: str, column: str) -> tuple[str, str, str, str]:
    """An adapter reject: a non-empty value of ``column`` that is not a finite number (a
    NaN gpu_milli read as a whole GPU, since NaN is below no bound)."""
    number = f"TRY_CAST({text} AS DOUBLE)"
    return (
        f"NULLIF(trim({text}), '') IS NOT NULL AND NOT COALESCE(isfinite({number}), FALSE)",
        column,
        text,
        f"{text} || CASE WHEN {number} IS NULL THEN ' is not a number' "
        "ELSE ' is not a finite number' END",
    )


def _rejects(checks: list[tuple[str, str, str, str]]) -> str:
    """The ``_reject_*`` columns of a scan: the first check (condition, column, value
    SQL, reason SQL) that holds names the row's fault (validate.py: adapter rejects)."""
    column = " ".join(f"WHEN {c} THEN '{name}'" for c, name, _, _ in checks)
    value = " ".join(f"WHEN {c} THEN {v}" for c, _, v, _ in checks)
    reason = " ".join(f"WHEN {c} THEN {r}" for c, _, _, r in checks)
    return (
        f"CASE {column} END AS _reject_column, CASE {reason} END AS _reject_reason, "
        f"CASE {value} END AS _reject_value"
    )


def trace_sources(paths: list[Path], *, trace_start: datetime) -> list[Source]:
    """The nodes source and, when a pod list is given, the requests source."""
    node_file, pod_file = _classify(paths)
    node_path = str(node_file)
    node_params = csv_params(node_file)
    for column in ("sn", "cpu_milli", "memory_mib", "gpu", "model"):
        if column not in node_params["columns"]:
            raise InputError(node_path, "required column missing", column=column)

    node_select = (
        "SELECT n.sn AS node_id, "
        "CASE WHEN n.model IS NULL OR lower(n.model) IN ('', 'nan') "
        "THEN CASE WHEN TRY_CAST(n.gpu AS DOUBLE) = 0 THEN 'CPU' END ELSE n.model END AS gpu_model, "
        "n.gpu AS gpus, TRY_CAST(n.cpu_milli AS DOUBLE) / 1000 AS cpus, "
        "TRY_CAST(n.memory_mib AS DOUBLE) / 1024 AS memory_gib, "
        "CAST(NULL AS VARCHAR) AS switch_id, 'healthy' AS health, "
        + _rejects(
            [_not_number(f"n.{c}", c) for c in ("gpu", "cpu_milli", "memory_mib")]
        )
        + "{row} FROM {scan} AS n ORDER BY n._row"
    )
    sources = [
        Source(
            file=node_path,
            table="nodes",
            select=node_select.format(row="", scan=CSV_ROWS),
            numbered=node_select.format(row=", n._row AS _row", scan=CSV_NUMBERED_ROWS),
            params=node_params,
            csv=True,
            adapter_rejects=True,
        )
    ]
    if pod_file is not None:
        sources.append(_pod_source(pod_file, trace_start))
    return sources


def _pod_source(pod_file: Path, trace_start: datetime) -> Source:
    path = str(pod_file)
    params = csv_params(pod_file)
    cols = set(params["columns"])
    for column in ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"):
        if column not in cols:
            raise InputError(path, "required column missing", column=column)

    def col(name: str) -> str:
        return f"p.{name}" if name in cols else "NULL"

    def at(name: str) -> str:
        value = f"TRY_CAST(NULLIF(trim({col(name)}), '') AS DOUBLE)"
        # beyond ~300 years the offset is garbage: NULL, so the row is a reject
        return (
            f"CASE WHEN abs({value}) < 1e10 THEN "
            f"$trace_start + to_microseconds(CAST(round({value} * 1e6) AS BIGINT)) END"
        )

    gpus = (
        "CASE WHEN TRY_CAST(p.num_gpu AS DOUBLE) = 1 AND TRY_CAST(p.gpu_milli AS DOUBLE) < 1000 "
        "THEN TRY_CAST(p.gpu_milli AS DOUBLE) / 1000 ELSE TRY_CAST(p.num_gpu AS DOUBLE) END"
    )
    cpus = "TRY_CAST(p.cpu_milli AS DOUBLE) / 1000"
    memory = "TRY_CAST(p.memory_mib AS DOUBLE) / 1024"
    submit = at("creation_time") if "creation_time" in cols else "$trace_start"
    checks = [
        _not_number(f"p.{name}", name)
        for name in ("num_gpu", "gpu_milli", "cpu_milli", "memory_mib")
    ]
    for name in ("creation_time", "scheduled_time", "deletion_time"):
        if name in cols:
            seconds = f"TRY_CAST(NULLIF(trim(p.{name}), '') AS DOUBLE)"
            checks.append(
                (
                    f"NULLIF(trim(p.{name}), '') IS NOT NULL "
                    f"AND ({seconds} IS NULL OR NOT abs({seconds}) < 1e10)",
                    name,
                    f"p.{name}",
                    f"p.{name} || ' is not a trace time (seconds after --trace-start)'",
                )
            )
    if "qos" in cols:
        checks.append(
            (
                "NULLIF(trim(p.qos), '') IS NOT NULL AND upper(trim(p.qos)) "
                "NOT IN ('BE', 'LS', 'GUARANTEED', 'BURSTABLE')",
                "qos",
                "p.qos",
                "'unknown qos ' || p.qos || ' (expected LS, Guaranteed, Burstable, BE)'",
            )
        )
    spec = col("gpu_spec")
    select = (
        "SELECT p.name AS request_id, "
        f"{submit} AS submit_time, "
        f"{at('scheduled_time')} AS start_time, "
        f"CASE WHEN {spec} IS NULL OR lower(trim({spec})) IN ('', 'nan') THEN NULL "
        f"ELSE array_to_string(list_sort(list_distinct(string_split({spec}, '|'))), '|') END AS gpu_model, "
        f"{gpus} AS gpus, {gpus} AS gpus_per_pod, "
        f"CASE WHEN {gpus} > 0 THEN {cpus} / ({gpus}) ELSE 0 END AS cpus_per_gpu, "
        f"CASE WHEN {gpus} > 0 THEN {memory} / ({gpus}) ELSE 0 END AS memory_gib_per_gpu, "
        f"{cpus} AS cpus, {memory} AS memory_gib, 'node' AS locality, "
        f"epoch({at('deletion_time')}) - epoch({at('scheduled_time')}) AS duration_s, "
        "CAST(NULL AS DOUBLE) AS start_deadline_s, "
        f"CASE upper(trim({col('qos')})) WHEN 'BE' THEN 'low' "
        "WHEN 'LS' THEN 'high' WHEN 'GUARANTEED' THEN 'high' WHEN 'BURSTABLE' THEN 'high' END AS priority, "
        "CAST(NULL AS VARCHAR) AS tenant, "
        f"{col('qos')} AS qos, {col('pod_phase')} AS pod_phase, "
        f"{at('deletion_time')} AS deletion_time, p._row AS trace_order, {_rejects(checks)}"
        "{row} FROM {scan} AS p ORDER BY p._row"
    )
    return Source(
        file=path,
        table="requests",
        select=select.format(row="", scan=CSV_ROWS),
        numbered=select.format(row=", p._row AS _row", scan=CSV_NUMBERED_ROWS),
        params={**params, "trace_start": trace_start},
        csv=True,
        adapter_rejects=True,
    )
