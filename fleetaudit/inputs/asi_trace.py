"""The layout and column types of the ASI GPU trace of 2026 (``alibaba-gpu-v2026``).

The release (Li, Yang et al., OSDI'26) is a folder of hive-partitioned hourly
Parquet tables::

    asi_opensource_pod_hourly/day=<D>/hour=<HH>/part-000.parquet     D unpadded, HH two digits
    asi_opensource_server_hourly/day=<D>/hour=<HH>/part-000.parquet
    asi_opensource_job_execution_summary/part-000.parquet

This leaf module (pyarrow only) is shared by the generator that writes that
layout and the adapter that reads it, so both agree on names and types. The
files carry no ``day``/``hour`` columns: those come from the folder names.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from fleetaudit.core.errors import InputError

FORMAT = "alibaba-gpu-v2026"
POD_TABLE = "asi_opensource_pod_hourly"
SERVER_TABLE = "asi_opensource_server_hourly"
SUMMARY_TABLE = "asi_opensource_job_execution_summary"
PART = "part-000.parquet"

PAPER_DAYS = (109, 115)  # the paper week: Monday..Sunday when day 0 is a Thursday

POD_SCHEMA = pa.schema(
    [
        ("pod_id", pa.string()),
        ("workload_id", pa.string()),
        ("server_id", pa.string()),
        ("cluster_id", pa.string()),
        ("state_public", pa.string()),
        ("gpu_spec_public", pa.string()),
        ("server_gpu_count", pa.float64()),
        ("server_cpu_capacity_cores", pa.float64()),
        ("priority_class", pa.string()),
        ("job_type_public", pa.string()),
        ("model_type_public", pa.string()),
        ("is_genai_request", pa.bool_()),
        ("gpu_request", pa.float64()),
        ("gpu_mem_request", pa.float64()),
        ("cpu_request_cores", pa.float64()),
        ("used_gpu_hours", pa.float64()),
        ("avg_gpu_sm_util", pa.float64()),
        ("avg_gpu_mem_gib", pa.float64()),
        ("avg_cpu_request_util", pa.float64()),
        ("avg_memory_util", pa.float64()),
        ("ready_status", pa.bool_()),
        ("schedule_delay_sec", pa.int64()),
        ("ready_delay_sec", pa.int64()),
    ]
)
"""``asi_opensource_pod_hourly``: one pod observed on a GPU server in one hour (23 columns)."""

SERVER_SCHEMA = pa.schema(
    [
        ("server_id", pa.string()),
        ("cluster_id", pa.string()),
        ("asw_id", pa.string()),
        ("gpu_spec_public", pa.string()),
        ("gpu_count", pa.float64()),
        ("cpu_capacity_cores", pa.float64()),
    ]
)
"""``asi_opensource_server_hourly``: one GPU server's inventory in one hour."""

SUMMARY_SCHEMA = pa.schema(
    [
        ("pod_id", pa.string()),
        ("workload_id", pa.string()),
        ("server_id", pa.string()),
        ("gpu_spec_public", pa.string()),
        ("priority_class", pa.string()),
        ("job_type_public", pa.string()),
        ("model_type_public", pa.string()),
        ("is_genai_request", pa.bool_()),
        ("gpu_request", pa.float64()),
        ("duration_hours", pa.float64()),
        ("schedule_delay_sec", pa.int64()),
        ("ready_delay_sec", pa.int64()),
        ("ready_status", pa.bool_()),
        ("schedule_status", pa.bool_()),
    ]
)

# Columns the adapter reads from the pod table (the rest are pruned away).
POD_COLUMNS = (
    "pod_id",
    "workload_id",
    "server_id",
    "cluster_id",
    "state_public",
    "priority_class",
    "job_type_public",
    "model_type_public",
    "is_genai_request",
    "gpu_request",
    "cpu_request_cores",
    "used_gpu_hours",
    "avg_gpu_sm_util",
    "ready_status",
    "schedule_delay_sec",
)
# Columns without which no pod row can be mapped: a partition lacking one is bad input.
POD_REQUIRED = ("pod_id", "server_id", "gpu_request", "cpu_request_cores", "priority_class")
SERVER_REQUIRED = ("server_id", "gpu_count", "cpu_capacity_cores", "gpu_spec_public")

# ASCII digits only: str.isdigit() and re's \d accept other scripts' digits, which the
# SQL that reads the folder names (CAST(day AS INTEGER)) does not
_DAY = re.compile(r"day=([0-9]+)", re.ASCII)
_HOUR = re.compile(r"hour=([0-9]+)", re.ASCII)
MAX_DAY = 36_524
"""The last day a partition may name: 100 years after the trace's start (day=99999999 is
no day of a trace; its hours would overflow the SQL's trace hour)."""


def hour_index(day: int, hour: int) -> int:
    """The trace hour ``t = day * 24 + hour`` (hours since the start of day 0)."""
    return day * 24 + hour


def partition_dir(root: Path, table: str, day: int, hour: int) -> Path:
    """The folder of one hourly partition, spelled as the release spells it."""
    return root / table / f"day={day}" / f"hour={hour:02d}"


def _number(folder: Path, what: str) -> int:
    """The value of a ``day=``/``hour=`` folder's name; fails naming the folder."""
    pattern, maximum, spelled, bound = (
        (_DAY, MAX_DAY, "day=D", f"a day of the trace (0-{MAX_DAY}: 100 years)")
        if what == "day"
        else (_HOUR, 23, "hour=HH", "an hour of the day (00-23)")
    )
    match = pattern.fullmatch(folder.name)
    if match is None:
        raise InputError(str(folder), f"a {what} partition whose {what} is not a number ({spelled})")
    value = int(match.group(1))
    if value > maximum:
        raise InputError(str(folder), f"{folder.name} is not {bound}")
    return value


def list_partitions(root: Path, table: str) -> dict[tuple[int, int], list[Path]]:
    """The Parquet files of a table by (day, hour); any ``*.parquet`` in a partition counts.

    Folder names are read as numbers, so ``hour=5`` and ``hour=05`` name the same hour:
    two folders of one (day, hour), or one folder reached twice (a symlinked day folder),
    would count its rows twice, and fail naming both.

    Raises:
        InputError: a ``day=``/``hour=`` folder whose value is no number, no hour of the
            day or beyond :data:`MAX_DAY`; a partition given twice.
    """
    found: dict[tuple[int, int], list[Path]] = {}
    folders: dict[tuple[int, int], Path] = {}
    seen: dict[str, Path] = {}  # real path -> the folder first reached there
    base = root / table
    if not base.is_dir():
        return found
    for day_dir in sorted(base.iterdir()):
        if not (day_dir.name.startswith("day=") and day_dir.is_dir()):
            continue
        day = _number(day_dir, "day")
        for hour_dir in sorted(day_dir.iterdir()):
            if not (hour_dir.name.startswith("hour=") and hour_dir.is_dir()):
                continue
            hour = _number(hour_dir, "hour")
            real = os.path.realpath(hour_dir)
            twice = folders.get((day, hour)) or seen.get(real)
            if twice is not None:
                what = (
                    "one folder reached by two names (a link)"
                    if real == os.path.realpath(twice)
                    else f"two folders of one partition (day {day}, hour {hour:02d})"
                )
                raise InputError(
                    f"{twice} and {hour_dir}", f"{what}: its rows would count twice; remove one"
                )
            folders[(day, hour)] = hour_dir
            seen[real] = hour_dir
            files = sorted(p for p in hour_dir.glob("*.parquet") if p.is_file())
            if files:
                found[(day, hour)] = files
    return found


def table_of(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """A table of ``schema`` from row dicts; a column a row leaves out is null."""
    return pa.table(
        {f.name: pa.array([r.get(f.name) for r in rows], type=f.type) for f in schema},
        schema=schema,
    )


def write_partition(
    root: Path, table: str, day: int, hour: int, data: pa.Table, name: str = PART
) -> Path:
    """Write one hourly partition file (the folders are created)."""
    folder = partition_dir(root, table, day, hour)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    pq.write_table(data, path, compression="snappy")
    return path
