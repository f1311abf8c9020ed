"""Slurm's record-per-object text exports: ``scontrol show job``, ``sacctmgr show event``, ``sdiag``.

- :func:`records` joins the multi-line form that people paste (``scontrol show node``
  without ``-o``: a record starts with its ``NodeName=``/``JobId=`` line, its other lines
  are indented) into one line per record, as ``-o`` prints them.
- :func:`job_record` reads one ``scontrol -d -o show job`` line: the job's ids, state,
  times, ``Switches=N`` and, under ``-d``, the true GPUs of each of its nodes
  (``Nodes=gpu03 CPU_IDs=1 Mem=1000 GRES=gpu:h100:4(IDX:2-5)``).
- :func:`event_rows` reads ``sacctmgr -P show event``: one health interval per node.
- :func:`sdiag_time` reads the instant ``sdiag`` printed its output at (epoch seconds).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from fleetaudit.inputs.ingest.hostlist import HostlistError, expand_hostlist
from fleetaudit.inputs.ingest.slurm_nodes import health_of
from fleetaudit.inputs.ingest.slurm_times import SlurmTimeError, parse_slurm_time
from fleetaudit.inputs.ingest.tres import TresError, parse_gres

_PAIR = re.compile(r"(?:^|(?<=\s))([A-Za-z_][A-Za-z0-9_/:.]*)=(\S*)")
_SDIAG = re.compile(r"sdiag output at .*\((\d{1,11})\)")
_REASON_TIME = re.compile(r"\[[^\]@]*@([0-9T:\- ]+)\]\s*$")
_DURATION = re.compile(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)")

# The Slurm states that say a job is not waiting for capacity at all (it may not start
# yet whatever is free): held by its user or an admin, waiting on another job, or before
# its begin time.
INELIGIBLE_REASONS = (
    "JobHeldUser",
    "JobHeldAdmin",
    "Dependency",
    "DependencyNeverSatisfied",
    "BeginTime",
)


def records(lines: Iterable[str], first_key: str) -> Iterator[tuple[int, str]]:
    """(1-based line of its start, record as one line) of each ``first_key=`` record.

    A line that starts (after indentation) with ``first_key=`` starts a record; any other
    non-blank line continues the current one.

    Raises:
        ValueError: text before the first record (the message names its line).
    """
    current: list[str] = []
    start = 0
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text:
            continue
        if text.startswith(f"{first_key}="):
            if current:
                yield start, " ".join(current)
            current, start = [text], number
        elif current:
            current.append(text)
        else:
            raise ValueError(f"line {number}: expected a {first_key}= record")
    if current:
        yield start, " ".join(current)


def pairs(line: str) -> list[tuple[str, str]]:
    """The ``Key=value`` pairs of a record line in order, repeats kept (``Nodes=`` of each
    node block)."""
    return [(m.group(1), m.group(2)) for m in _PAIR.finditer(line)]


def duration_s(text: str | None) -> float | None:
    """Seconds of a Slurm duration (``00:09:25``, ``1-02:03:04``, ``05:00``); None if not one.

    >>> duration_s("1-02:03:04"), duration_s("09:25"), duration_s("UNLIMITED")
    (93784.0, 565.0, None)
    """
    match = _DURATION.fullmatch((text or "").strip())
    if match is None:
        return None
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


@dataclass
class JobRecord:
    """What ``scontrol -d show job`` says of one job that the accounting lacks."""

    job_id: str  # the job's own id (sacct's JobIDRaw)
    state: str
    switches: int | None  # --switches=N (Switches=N@wait)
    start: datetime | None
    run_s: float | None  # RunTime
    layout: dict[str, float] = field(default_factory=dict)  # node -> GPUs
    error: str | None = None

    @property
    def seen_at(self) -> datetime | None:
        """When scontrol printed a running job: its start plus its run time."""
        if self.state != "RUNNING" or self.start is None or self.run_s is None:
            return None
        return self.start + timedelta(seconds=self.run_s)


def job_record(line: str, zone: str) -> JobRecord:
    """One ``scontrol -d -o show job`` line read into a :class:`JobRecord`."""
    fields: dict[str, str] = {}
    layout: dict[str, float] = {}
    error: str | None = None
    block_nodes: list[str] | None = None
    for key, value in pairs(line):
        if key == "Nodes":
            try:
                block_nodes = expand_hostlist(value)
            except HostlistError as exc:
                block_nodes, error = [], f"Nodes: {exc}"
        elif key == "GRES" and block_nodes is not None:
            try:
                gpus = sum(g.count for g in parse_gres(value) if g.name == "gpu")
            except TresError as exc:
                gpus, error = 0.0, f"GRES: {exc}"
            for node in block_nodes:
                layout[node] = layout.get(node, 0.0) + gpus
        else:
            fields.setdefault(key, value)
    switches_text = fields.get("Switches", "").split("@", 1)[0]
    try:
        start = parse_slurm_time(fields.get("StartTime"), zone)
    except SlurmTimeError as exc:
        start, error = None, f"StartTime: {exc}"
    return JobRecord(
        job_id=fields.get("JobId", ""),
        state=fields.get("JobState", "").upper(),
        switches=int(switches_text) if switches_text.isascii() and switches_text.isdigit() else None,
        start=start,
        run_s=duration_s(fields.get("RunTime")),
        layout=layout,
        error=error,
    )


def reason_time(reason: str | None, zone: str) -> datetime | None:
    """The instant scontrol stamped a node's reason with (``xid 79 [root@2026-12-05T01:58:37]``).

    >>> reason_time("xid 79 [root@2026-12-05T01:58:37]", "UTC")
    datetime.datetime(2026, 12, 5, 1, 58, 37)
    """
    match = _REASON_TIME.search(reason or "")
    if match is None:
        return None
    try:
        return parse_slurm_time(match.group(1), zone)
    except SlurmTimeError:
        return None


def event_state(state: str) -> str:
    """The node_events state of a Slurm node state (an event or a node at the export).

    >>> [event_state(s) for s in ("DOWN", "IDLE+DRAIN", "MIXED+DRAIN", "MAINT", "MIXED+FAIL", "")]
    ['down', 'drain', 'drain', 'cordoned', 'degraded', 'unhealthy']
    """
    if not state.strip():
        return "unhealthy"
    health = health_of(state)
    if health == "cordoned":
        return "drain" if "DRAIN" in state.upper() else "cordoned"
    return {"down": "down", "degraded": "degraded"}.get(health, "unhealthy")


def event_rows(text: str, zone: str) -> list[dict[str, object]]:
    """The node health intervals of ``sacctmgr -P show event`` output (its header first).

    One row per node and event (an event's NodeName may be a hostlist); cluster events
    (no NodeName) are left out. A row that cannot be read carries ``_reject_*`` columns.

    Raises:
        ValueError: no header with NodeName and TimeStart.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = [h.strip() for h in lines[0].split("|")]
    index = {name.lower(): i for i, name in enumerate(header)}
    for name in ("nodename", "timestart"):
        if name not in index:
            raise ValueError(f"sacctmgr output without the {name} column in its header")
    rows: list[dict[str, object]] = []

    def cell(fields: list[str], name: str) -> str:
        i = index.get(name)
        return fields[i].strip() if i is not None and i < len(fields) else ""

    for number, line in enumerate(lines[1:], 1):
        fields = line.split("|")
        base: dict[str, object] = {
            "node_id": None, "start_time": None, "end_time": None,
            "state": event_state(cell(fields, "state")), "reason": cell(fields, "reason") or None,
            "slurm_state": cell(fields, "state") or None, "user": cell(fields, "user") or None,
            "_row": number, "_reject_column": None, "_reject_reason": None, "_reject_value": None,
        }  # fmt: skip
        nodes_text = cell(fields, "nodename")
        if cell(fields, "event").lower() == "cluster" or not nodes_text:
            continue

        def reject(column: str, reason: str, value: str, row: dict[str, object] = base) -> None:
            row.update(_reject_column=column, _reject_reason=reason, _reject_value=value[:200])
            rows.append(row)

        try:
            start = parse_slurm_time(cell(fields, "timestart"), zone)
            end = parse_slurm_time(cell(fields, "timeend"), zone)
        except SlurmTimeError as exc:
            reject("start_time", str(exc), cell(fields, "timestart") + " .. " + cell(fields, "timeend"))
            continue
        if start is None:
            reject("start_time", "the event has no start time", cell(fields, "timestart"))
            continue
        try:
            nodes = expand_hostlist(nodes_text)
        except HostlistError as exc:
            reject("node_id", f"bad hostlist: {exc}", nodes_text)
            continue
        for node in nodes:
            rows.append({**base, "node_id": node, "start_time": start, "end_time": end})
    return rows


def sdiag_time(text: str) -> datetime | None:
    """The instant of an ``sdiag`` output, from its ``sdiag output at ... (EPOCH)`` line."""
    match = _SDIAG.search(text)
    if match is None:
        return None
    return parse_slurm_time(match.group(1))
