"""Slurm's node inventory (``scontrol -d -o show node``, text or ``--json``) as native nodes.

One node per line (text) or per ``nodes[]`` object (JSON). docs/formats/slurm.md,
"Mapping":

- gpus: the node's ``gres/gpu`` in CfgTRES (JSON: ``tres``); without it, the
  GPUs of its Gres. The model is the Gres type (``gpu:h100:8``), through the
  shared model canonicaliser; an untyped Gres takes the first GPU-like feature
  (``h100``, ``a100``, ``l40s``, ``t4``...) or ``unknown``. A node with two GPU
  types is a reject (fleetaudit holds one model per node). No GPU: ``CPU``.
- cpus: CfgTRES ``cpu`` (else CPUTot); memory: RealMemory minus MemSpecLimit, MiB.
- health from the state: base and ``+FLAG`` words of scontrol, and the lower-case
  names and suffix characters of sinfo (``drained*``, ``idle~``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fleetaudit.inputs.ingest.labels import canonical_model
from fleetaudit.inputs.ingest.slurm_jobs import json_value
from fleetaudit.inputs.ingest.tres import TresError, parse_gres, parse_tres

# keys whose values may hold spaces: they run up to the next key of this list
KNOWN_KEYS = [
    "NodeName",
    "Arch",
    "CoresPerSocket",
    "CPUAlloc",
    "CPUEfctv",
    "CPUTot",
    "CPULoad",
    "AvailableFeatures",
    "ActiveFeatures",
    "Gres",
    "GresDrain",
    "GresUsed",
    "NodeAddr",
    "NodeHostName",
    "Port",
    "Version",
    "OS",
    "RealMemory",
    "AllocMem",
    "FreeMem",
    "Sockets",
    "Boards",
    "CoreSpecCount",
    "CPUSpecList",
    "MemSpecLimit",
    "State",
    "ThreadsPerCore",
    "TmpDisk",
    "Weight",
    "Owner",
    "MCS_label",
    "NextState",
    "Partitions",
    "BootTime",
    "SlurmdStartTime",
    "LastBusyTime",
    "ResumeAfterTime",
    "CfgTRES",
    "AllocTRES",
    "CapWatts",
    "CurrentWatts",
    "AveWatts",
    "ExtSensorsJoules",
    "ExtSensorsWatts",
    "ExtSensorsTemp",
    "Reason",
    "Comment",
    "Extra",
    "InstanceId",
    "InstanceType",
    "ReservationName",
    "Topology",
    "LastSeen",
    "CertToken",
]
_KNOWN = frozenset(KNOWN_KEYS)
_FREE_TEXT = frozenset({"OS", "Reason", "Comment", "Extra", "Version"})
_KEY = re.compile(r"(?:^|(?<=\s))([A-Za-z_]+)=")

_DOWN_WORDS = frozenset(
    [
        "DOWN",
        "FUTURE",
        "UNKNOWN",
        "NOT_RESPONDING",
        "INVALID_REG",
        "INVALID",
        "POWERED_DOWN",
        "POWERING_DOWN",
        "FAIL",
        "FAILED",
        "UNK",
        "FUTR",
        "INVAL",
        "POW_DN",
        "NO_RESPOND",
    ]
)
_CORDON_WORDS = frozenset(
    [
        "DRAIN",
        "DRAINED",
        "DRAINING",
        "DRNG",
        "MAINTENANCE",
        "MAINT",
        "REBOOT_REQUESTED",
        "REBOOT_ISSUED",
        "REBOOT",
        "BOOT",
        "POWER_DOWN",  # a power-down is pending: no new work, running jobs finish
    ]
)
_DEGRADED_WORDS = frozenset({"FAILING", "FAILG", "ERROR"})
_BUSY_WORDS = frozenset({"ALLOCATED", "ALLOC", "MIXED", "MIX", "COMPLETING", "COMP"})
# sinfo suffixes: * not responding, ~ powered off, % powering down | $ maintenance,
# @ pending reboot, ^ reboot issued, ! power-down pending
_DOWN_SUFFIX, _CORDON_SUFFIX = set("*~%"), set("$@^!")
_GPU_FEATURE = re.compile(
    r"^(?:nvidia[-_])?(?:tesla[-_])?((?:gb|gh|mi|rtx|[abhlvpk])\d{2,4}[a-z]{0,3}|t4)(?:[-_].*)?$",
    re.IGNORECASE,
)


def split_node_line(line: str) -> dict[str, str]:
    """The ``Key=value`` pairs of one ``scontrol -o show node`` line.

    Values of ``OS=``, ``Reason=`` and the like hold spaces and may hold ``=``:
    they run up to the next key scontrol prints.

    >>> split_node_line("NodeName=g1 OS=Linux 5.15 #1 SMP State=IDLE Reason=xid 79 [root@t]")
    {'NodeName': 'g1', 'OS': 'Linux 5.15 #1 SMP', 'State': 'IDLE', 'Reason': 'xid 79 [root@t]'}
    """
    matches = list(_KEY.finditer(line))
    fields: dict[str, str] = {}
    current: re.Match[str] | None = None
    starts: list[re.Match[str]] = []
    for match in matches:
        key = match.group(1)
        if current is not None and current.group(1) in _FREE_TEXT and key not in _KNOWN:
            continue  # "Reason=a=b": part of the free text
        starts.append(match)
        current = match
    for i, match in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(line)
        fields.setdefault(match.group(1), line[match.end() : end].strip())
    return fields


def health_of(state: str, *, gres_drain: str | None = None, gpu_shortfall: bool = False) -> str:
    """fleetaudit health of a Slurm node state (scontrol ``BASE+FLAG``, sinfo ``drained*``).

    >>> [health_of(s) for s in ("MIXED+DRAIN", "IDLE+CLOUD+POWERED_DOWN", "idle~", "mix")]
    ['cordoned', 'down', 'down', 'healthy']
    >>> health_of("ALLOCATED+FAIL"), health_of("IDLE+FAIL"), health_of("drained*")
    ('degraded', 'down', 'down')
    >>> health_of("MIXED+POWER_DOWN"), health_of("mix!")
    ('cordoned', 'cordoned')
    """
    text = state.strip()
    suffixes = set()
    while text and text[-1] in "*~#!%$@^-":
        suffixes.add(text[-1])
        text = text[:-1]
    words = [w for w in re.split(r"[+\s]", text.upper()) if w]
    base = words[0] if words else "UNKNOWN"
    flags = set(words[1:])
    if "FAIL" in flags and base in _BUSY_WORDS:  # failing: still running its jobs
        flags.discard("FAIL")
        flags.add("FAILING")
    if base in _DOWN_WORDS or flags & _DOWN_WORDS or suffixes & _DOWN_SUFFIX or (not words):
        return "down"
    if base in _CORDON_WORDS or flags & _CORDON_WORDS or suffixes & _CORDON_SUFFIX:
        return "cordoned"
    drained = gres_drain is not None and gres_drain.strip().upper() not in ("", "N/A", "(NULL)")
    if base in _DEGRADED_WORDS or flags & _DEGRADED_WORDS or drained or gpu_shortfall:
        return "degraded"
    return "healthy"


def _gpu_feature(features: str | None) -> str | None:
    for feature in re.split(r"[,&|\s]+", features or ""):
        match = _GPU_FEATURE.match(feature)
        if match:
            return match.group(1)
    return None


def node_row(fields: Mapping[str, Any]) -> dict[str, Any]:
    """One native node row (with extras and an adapter reject reason) from scontrol fields.

    ``fields`` uses scontrol's text keys; :func:`json_node_fields` maps the JSON form.
    """
    name = str(fields.get("NodeName") or "").strip() or None
    row: dict[str, Any] = {
        "node_id": name,
        "gpu_model": None,
        "gpus": None,
        "cpus": None,
        "memory_gib": None,
        "health": None,
        "state": _given(fields.get("State")),
        "partitions": _given(fields.get("Partitions")),
        "features": _given(fields.get("AvailableFeatures")),
        "reason": _given(fields.get("Reason")),
        "gres": _given(fields.get("Gres")),
        "gres_drain": _given(fields.get("GresDrain")),
        "_reject_column": None,
        "_reject_reason": None,
        "_reject_value": None,
    }

    def reject(column: str, reason: str, value: object) -> dict[str, Any]:
        row.update(_reject_column=column, _reject_reason=reason, _reject_value=str(value))
        return row

    try:
        cfg = parse_tres(fields.get("CfgTRES"))
    except TresError as exc:
        return reject("gpus", f"CfgTRES: {exc}", fields.get("CfgTRES"))
    try:
        gres = [g for g in parse_gres(fields.get("Gres")) if g.name == "gpu"]
    except TresError as exc:
        return reject("gpus", f"Gres: {exc}", fields.get("Gres"))
    gres_gpus = sum(g.count for g in gres) if gres else None
    types = list(dict.fromkeys([g.type for g in gres if g.type] + list(cfg.gpu_types)))
    models = list(dict.fromkeys(canonical_model(t) for t in types))
    gpus = cfg.gpus if cfg.gpus is not None else gres_gpus
    if len(models) > 1:
        return reject(
            "gpu_model",
            f"the node has GPUs of {len(models)} types ({', '.join(types)}); "
            "fleetaudit holds one model per node",
            fields.get("Gres"),
        )
    if models:
        model = models[0]
    elif gpus:
        model = canonical_model(_gpu_feature(fields.get("AvailableFeatures"))) or "unknown"
    else:
        model = "CPU"
    cpus = cfg.cpus if cfg.cpus is not None else _number(fields.get("CPUTot"))
    real = _number(fields.get("RealMemory"))
    spec = _number(fields.get("MemSpecLimit")) or 0.0
    row.update(
        gpu_model=model,
        gpus=gpus if gpus is not None else 0,
        cpus=cpus,
        memory_gib=None if real is None else max(real - spec, 0.0) / 1024,
        health=health_of(
            str(fields.get("State") or "UNKNOWN"),
            gres_drain=fields.get("GresDrain"),
            gpu_shortfall=cfg.gpus is not None and gres_gpus is not None and cfg.gpus < gres_gpus,
        ),
    )
    if name is None:
        return reject("node_id", "no NodeName", "")
    return row


def _given(value: object) -> str | None:
    """A text value as scontrol prints it, None where it prints that there is none
    (``(null)``, empty).

    >>> _given("(null)"), _given(" h100,nvlink "), _given("")
    (None, 'h100,nvlink', None)
    """
    if value is None:
        return None
    text = str(value).strip()
    return None if text in ("", "(null)") else text


def _number(value: object) -> float | None:
    if value is None:
        return None
    try:
        return float(str(value).strip())
    except ValueError:
        return None


def _json_text(value: Any) -> str | None:
    value = json_value(value)
    if value is None:
        return None
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def json_node_fields(node: Mapping[str, Any]) -> dict[str, Any]:
    """scontrol text keys from one ``scontrol show node --json`` object."""
    state = node.get("state")
    words = list(state) if isinstance(state, list) else [state] if state else []
    # Slurm 21.08's JSON: the base state apart from its flags (["DRAIN"])
    flags = node.get("state_flags")
    words += [f for f in flags if f not in words] if isinstance(flags, list) else []
    state_text = "+".join(str(w) for w in words) or None
    return {
        "NodeName": node.get("name") or node.get("hostname"),
        "State": state_text,
        "Gres": _json_text(node.get("gres")),
        "GresDrain": _json_text(node.get("gres_drained")),
        "CfgTRES": _json_text(node.get("tres")),
        "CPUTot": _json_text(node.get("cpus")),
        "RealMemory": _json_text(node.get("real_memory")),
        "MemSpecLimit": _json_text(node.get("specialized_memory")),
        "Partitions": _json_text(node.get("partitions")),
        "AvailableFeatures": _json_text(node.get("features")),
        "Reason": _json_text(node.get("reason")),
    }
