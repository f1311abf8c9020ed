"""Slurm job records of ``sacct --json`` and ``squeue --json`` as sacct ``--parsable2`` fields.

Both JSON forms are turned into the text fields that ``sacct --parsable2``
prints (JobID, JobIDRaw, Submit, Start, ..., AllocTRES), so one SQL mapping
serves every flavour (:mod:`fleetaudit.inputs.ingest.slurm`). Times become epoch
seconds (0 is ``Unknown``); TRES lists become TRES strings; a state list is
joined with ``+``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# The sacct fields the adapter reads, in the order of the recommended --format.
JOB_FIELDS = (
    "JobID",
    "JobIDRaw",
    "JobName",
    "User",
    "Account",
    "Partition",
    "QOS",
    "Priority",
    "Submit",
    "Eligible",
    "Start",
    "End",
    "ElapsedRaw",
    "TimelimitRaw",
    "State",
    "ExitCode",
    "NNodes",
    "NodeList",
    "ReqCPUS",
    "AllocCPUS",
    "ReqMem",
    "ReqTRES",
    "AllocTRES",
    "Restarts",
    "Reason",
    "Flags",
    "SubmitLine",
    "ReqSwitches",  # squeue --json's required_switches; sacct does not record it
)


def json_value(value: Any) -> Any:
    """A plain value of data_parser's ``{"set", "infinite", "number"}`` objects."""
    if isinstance(value, dict) and "number" in value:
        if not value.get("set", True) or value.get("infinite"):
            return None
        return value["number"]
    return value


def _text(value: Any) -> str | None:
    value = json_value(value)
    if value is None or value == "":
        return None
    if isinstance(value, list):
        return "+".join(str(v) for v in value) or None
    return str(value)


def _time(value: Any) -> str:
    """A JSON time as sacct prints it with ``SLURM_TIME_FORMAT=%s``; a value that is no
    whole number of seconds (``NaN``, ``1e30``, text) is passed on as written, for the
    mapping to reject."""
    value = json_value(value)
    if value is None or value == 0 or value == "":
        return "Unknown"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)[:100]
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return str(value)
    return str(int(value))


def _minutes(value: Any) -> str | None:
    if isinstance(value, dict) and value.get("infinite"):
        return "UNLIMITED"
    return _text(value)


# -1 and -2 are Slurm's "infinite" and "not set" (INFINITE64, NO_VAL64 printed signed):
# from 23.02 every job's energy TRES has count -2
_COUNT_MARKERS = (-1, -2)


def tres_string(items: Any) -> str | None:
    """A TRES string of data_parser's TRES list (``[{"type": "gres", "name": "gpu:h100", "count": 8}]``).

    >>> tres_string([{"type": "cpu", "name": "", "count": 16}, {"type": "energy", "count": -2},
    ...              {"type": "gres", "name": "gpu:h100", "count": 8}, {"type": "mem", "count": 65536}])
    'cpu=16,gres/gpu:h100=8,mem=65536M'
    """
    if isinstance(items, str):
        return items or None
    if not isinstance(items, list):
        return None
    parts = []
    for item in items:
        if not isinstance(item, Mapping) or item.get("count") is None:
            continue
        if item["count"] in _COUNT_MARKERS:
            continue  # Slurm's INFINITE64 and NO_VAL64 read as signed: not counts
        key = str(item.get("type") or "")
        if item.get("name"):
            key += "/" + str(item["name"])
        count = item["count"]
        unit = "M" if key in ("mem", "gres/gpumem") else ""
        parts.append(f"{key}={count}{unit}")
    return ",".join(sorted(parts)) or None


def _display_id(
    job_id: str, array_id: Any, task_id: Any, het_id: Any, het_offset: Any, tasks: Any = None
) -> str:
    """The JobID sacct prints: ``4400+1`` (a het component), ``29_3`` (an array task) or
    ``29_[0-9%1]`` (the array's tasks still pending, ``tasks`` as JSON gives them)."""
    array_id, task_id = json_value(array_id), json_value(task_id)
    het_id, het_offset = json_value(het_id), json_value(het_offset)
    if het_id and het_offset is not None:
        return f"{het_id}+{het_offset}"
    if array_id and task_id is not None:
        return f"{array_id}_{task_id}"
    pending = _pending_tasks(tasks)
    if array_id and pending:
        return f"{array_id}_[{pending}]"
    return job_id


def _pending_tasks(tasks: Any) -> str | None:
    """The task list of a pending array in sacct --json: a hex bitmap (``0x3FF``, Slurm
    22.05) or a task string (``0-9%1``), as the ``[...]`` of a compressed JobID."""
    if isinstance(tasks, dict):
        tasks = tasks.get("task")
    text = str(tasks or "").strip()
    if not text:
        return None
    if text.lower().startswith("0x"):
        try:
            bits = int(text, 16)
        except ValueError:
            return text
        return ",".join(str(i) for i in range(bits.bit_length()) if bits >> i & 1) or None
    return text


def sacct_json_row(job: Mapping[str, Any]) -> dict[str, str | None]:
    """The sacct fields of one ``sacct --json`` job (steps are nested and not read)."""
    raw = str(job.get("job_id"))
    array = job.get("array") or {}
    het = job.get("het") or {}
    time = job.get("time") or {}
    state = job.get("state") or {}
    tres = job.get("tres") or {}
    required = job.get("required") or {}
    exit_code = job.get("exit_code") or {}
    return {
        "JobID": _display_id(
            raw,
            array.get("job_id"),
            array.get("task_id"),
            het.get("job_id"),
            het.get("job_offset"),
            array.get("task"),
        ),
        "JobIDRaw": raw,
        "JobName": _text(job.get("name")),
        "User": _text(job.get("user")),
        "Account": _text(job.get("account")),
        "Partition": _text(job.get("partition")),
        "QOS": _text(job.get("qos")),
        "Priority": _text(job.get("priority")),
        "Submit": _time(time.get("submission")),
        "Eligible": _time(time.get("eligible")),
        "Start": _time(time.get("start")),
        "End": _time(time.get("end")),
        "ElapsedRaw": _text(time.get("elapsed")),
        "TimelimitRaw": _minutes(time.get("limit")),
        "State": _text(state.get("current")) if isinstance(state, Mapping) else _text(state),
        "ExitCode": _text(exit_code.get("return_code")) if isinstance(exit_code, Mapping) else None,
        # a job that never started has allocation_nodes 0: its node count is the requested one
        "NNodes": _text(json_value(job.get("allocation_nodes")) or None),
        "NodeList": _text(job.get("nodes")) or "None assigned",
        "ReqCPUS": _text(required.get("CPUs")),
        "AllocCPUS": None,
        "ReqMem": None,
        "ReqTRES": tres_string(tres.get("requested")),
        "AllocTRES": tres_string(tres.get("allocated")),
        "Restarts": _text(job.get("restart_cnt")),
        "Reason": _text(state.get("reason")) if isinstance(state, Mapping) else None,
        "Flags": _text(job.get("flags")),
        "SubmitLine": _text(job.get("submit_line")),
        "ReqSwitches": None,
    }


def squeue_json_row(job: Mapping[str, Any]) -> dict[str, str | None]:
    """The sacct fields of one ``squeue --json`` job (it has not started: no node, no AllocTRES)."""
    raw = str(job.get("job_id"))
    state = job.get("job_state")
    return {
        "JobID": _display_id(
            raw,
            job.get("array_job_id"),
            job.get("array_task_id"),
            job.get("het_job_id"),
            job.get("het_job_offset"),
        ),
        "JobIDRaw": raw,
        "JobName": _text(job.get("name")),
        "User": _text(job.get("user_name")),
        "Account": _text(job.get("account")),
        "Partition": _text(job.get("partition")),
        "QOS": _text(job.get("qos")),
        "Priority": _text(job.get("priority")),
        "Submit": _time(job.get("submit_time")),
        "Eligible": _time(job.get("eligible_time")),
        "Start": "Unknown",
        "End": "Unknown",
        "ElapsedRaw": None,
        "TimelimitRaw": _minutes(job.get("time_limit")),
        "State": _text(state),
        "ExitCode": None,
        "NNodes": _text(job.get("node_count")),
        "NodeList": "None assigned",
        "ReqCPUS": _text(job.get("cpus")),
        "AllocCPUS": None,
        "ReqMem": None,
        "ReqTRES": _text(job.get("tres_req_str")),
        "AllocTRES": None,
        "Restarts": _text(job.get("restart_cnt")),
        "Reason": _text(job.get("state_reason")),
        "Flags": None,
        "SubmitLine": None,  # squeue's "command" is the script, not the submit line
        "ReqSwitches": _text(job.get("required_switches") or None),
    }


def array_tasks(text: str) -> list[int]:
    """The task ids of squeue's ``array_task_string`` (``5-100``, ``1,3,7-9:2``, ``0-99%4``).

    >>> array_tasks("1,3,7-11:2%4")
    [1, 3, 7, 9, 11]

    Raises:
        ValueError: the text is not a task list.
    """
    tasks: list[int] = []
    for part in text.split("%", 1)[0].split(","):
        part = part.strip()
        if not part:
            continue
        span, _, step = part.partition(":")
        first, _, last = span.partition("-")
        a, b = int(first), int(last or first)
        if b < a or (step and int(step) < 1):
            raise ValueError(f"bad array task range {part!r}")
        tasks.extend(range(a, b + 1, int(step or 1)))
    return tasks


def squeue_json_rows(job: Mapping[str, Any]) -> list[dict[str, str | None]]:
    """The pending rows of one ``squeue --json`` record: one per task of a pending array
    (without ``-r`` squeue lists a pending array once, its tasks in ``array_task_string``)."""
    row = squeue_json_row(job)
    if not is_pending(row):
        return []
    text = _text(job.get("array_task_string"))
    array_id = _text(job.get("array_job_id"))
    if not text or not array_id or json_value(job.get("array_task_id")) is not None:
        return [row]
    try:
        tasks = array_tasks(text)
    except ValueError:
        return [row]  # kept as one request, as printed
    return [
        {**row, "JobID": f"{array_id}_{k}", "JobIDRaw": f"{array_id}_{k}"} for k in tasks
    ]


def is_pending(row: Mapping[str, str | None]) -> bool:
    """Whether a squeue job is pending (running ones come from sacct)."""
    return "PENDING" in str(row.get("State") or "").upper().split("+")
