"""Remedies: fleet edits judged on the same demand as the recorded fleet (``whatif remedies``).

Pure functions over the store's frames; nothing here reads the store or prints.

A *fleet edit* is a change of the nodes frame (and, for a port, of the requests'
model sets), so every engine evaluates the edited fleet exactly as it evaluates
the recorded one, without knowing it was edited:

- ``add MODEL:N``: N nodes like the model's typical node (the most common GPUs,
  CPUs and memory among its nodes), in new switch domains of the model's typical
  size (its most common domain size), or filling its partial domains first
  (``into="existing"``);
- ``remove MODEL:N``: the model's N emptiest healthy nodes (fewest allocated
  GPU-hours over the window), or the nodes of a list;
- ``cpus MODEL:+N`` / ``memory MODEL:+N``: more host CPUs or memory per node;
- ``merge-level block``: every switch domain of a block is merged into one domain
  (a switch-locality request may then use the whole block);
- ``port FROM=TO:SPEED``: a request that may run on FROM and not on TO may also
  run on TO, at SPEED of its recorded speed (the replay's ``model_speed`` column:
  its run there takes 1/SPEED as long).

Each edited fleet is evaluated twice, as the recorded one is (the baseline):

- the *snapshot* (:func:`snapshot`): the report's schedulable denominator over the
  window's sampled instants, on the recorded allocations (the demand's shapes,
  their start probability and mean instances, the idle GPU-hours usable and
  stranded by cause);
- the *replay* (:func:`replay_figures` of
  :func:`fleetaudit.whatif.placement.replay_demand` with the baseline's holds):
  requests started, waits, start probability within the deadline per shape,
  GPU-hours served, work left waiting.

:func:`bisect` sizes a purchase: the smallest value of an increasing edit whose
evaluation reaches a target.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from fleetaudit.core.errors import UsageError
from fleetaudit.model import denominators as den
from fleetaudit.model.capacity import Health, optional_column, switch_domains, usable_expr
from fleetaudit.model.history import evaluate_history
from fleetaudit.model.shapes import (
    CAUSES,
    SHAPE_COLUMNS,
    Shape,
    duration_class_expr,
    make_shape,
    request_shape,
)
from fleetaudit.whatif.placement.record import QueueFigures, arrivals
from fleetaudit.whatif.placement.replay import ReplayResult

__all__ = [
    "EDIT_KINDS",
    "Edit",
    "EditedFleet",
    "ReplayFigures",
    "SizingStep",
    "Snapshot",
    "bisect",
    "edit_fleet",
    "parse_add",
    "parse_delta",
    "parse_merge",
    "parse_port",
    "parse_remove",
    "port_requests",
    "port_shape",
    "replay_figures",
    "request_shapes",
    "snapshot",
]

EDIT_KINDS = ("add", "remove", "cpus", "memory", "merge-level", "port")
MERGE_LEVELS = ("block",)
ALL_REDUCE_NOTE = (
    "--merge-level block lets a switch-locality gang span the switches of a block: its "
    "all-reduce then crosses the spine, which the ASI paper measures at up to 27% lower "
    "throughput than within one switch; no run here is lengthened for it"
)
_NODE_KEYS = {"gpus": "gpus", "cpus": "cpus", "memory": "memory_gib", "memory_gib": "memory_gib"}


# ---------------------------------------------------------------- the edits


@dataclass(frozen=True)
class Edit:
    """One fleet edit as given on the command line (see the module doc).

    ``text`` is the option's value as given; ``option`` its flag.
    """

    kind: str
    text: str
    model: str | None = None
    count: int = 0  # add / remove: nodes
    node: tuple[tuple[str, float], ...] = ()  # add: the new node's gpus, cpus, memory_gib
    into: str = "new"  # add: new switch domains, or the model's partial ones first
    delta: float = 0.0  # cpus / memory: per node
    nodes: tuple[str, ...] = ()  # remove: the nodes of a list
    source: str | None = None  # remove: the list's file
    ports: tuple[tuple[str, str, float], ...] = ()  # port: (from, to, speed)

    @property
    def option(self) -> str:
        return f"--{self.kind}"

    @property
    def label(self) -> str:
        return f"{self.option} {self.text}"

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "given": self.text}
        if self.kind in ("add", "remove", "cpus", "memory"):
            out["model"] = self.model
        if self.kind == "add":
            out |= {"nodes": self.count, "node": dict(self.node) or None, "into": self.into}
        elif self.kind == "remove":
            out |= {"nodes": self.count, "node_list": self.source}
        elif self.kind in ("cpus", "memory"):
            out["per_node"] = self.delta
        elif self.kind == "merge-level":
            out["level"] = self.text
        elif self.kind == "port":
            out["maps"] = [{"from": f, "to": t, "speed": s} for f, t, s in self.ports]
        return out


def _model_count(text: str, option: str) -> tuple[str, int, str]:
    model, sep, rest = text.partition(":")
    count, _, spec = rest.partition(":")
    if not model.strip() or not sep or not count.strip().isdigit():
        raise UsageError(f"{option}: give MODEL:N (e.g. H20:8), not {text!r}")
    return model.strip(), int(count), spec


def parse_add(text: str, into: str = "new") -> Edit:
    """``MODEL:N`` or ``MODEL:N:gpus=8,cpus=192,memory=2048``.

    >>> parse_add("H20:4:cpus=192").node
    (('cpus', 192.0),)
    """
    if into not in ("new", "existing"):
        raise UsageError(f"--into-switches: use new or existing, not {into!r}")
    model, count, spec = _model_count(text, "--add")
    node: dict[str, float] = {}
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        key, _, value = part.partition("=")
        column = _NODE_KEYS.get(key.strip())
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if column is None or not math.isfinite(number) or number < 0:
            raise UsageError(
                f"--add {text}: {part!r} is not gpus=N, cpus=N or memory=GIB (0 or more)"
            )
        node[column] = number
    if "gpus" in node and not float(node["gpus"]).is_integer():
        raise UsageError(f"--add {text}: gpus must be a whole number")
    return Edit("add", text, model=model, count=count, node=tuple(node.items()), into=into)


def parse_remove(text: str, listed: Sequence[str] | None = None) -> Edit:
    """``MODEL:N``, or a node list (``listed``: its node ids; ``text`` the file)."""
    if listed is not None:
        return Edit("remove", text, count=len(listed), nodes=tuple(listed), source=text)
    model, count, spec = _model_count(text, "--remove")
    if spec:
        raise UsageError(f"--remove: give MODEL:N or a file of node ids, not {text!r}")
    return Edit("remove", text, model=model, count=count)


def parse_delta(kind: str, text: str) -> Edit:
    """``--cpus MODEL:+64`` or ``--memory MODEL:+512`` (a minus takes away).

    >>> parse_delta("cpus", "H20:+64").delta
    64.0
    """
    model, sep, amount = text.partition(":")
    try:
        delta = float(amount)
    except ValueError:
        delta = math.nan
    if not model.strip() or not sep or not math.isfinite(delta):
        unit = "cores" if kind == "cpus" else "GiB"
        raise UsageError(f"--{kind}: give MODEL:+N ({unit} per node, e.g. H20:+64), not {text!r}")
    return Edit(kind, text, model=model.strip(), delta=delta)


def parse_merge(text: str) -> Edit:
    if text not in MERGE_LEVELS:
        raise UsageError(f"--merge-level: use {' or '.join(MERGE_LEVELS)}, not {text!r}")
    return Edit("merge-level", text)


def parse_port(text: str) -> Edit:
    """``FROM=TO:SPEED``, several joined by commas.

    >>> parse_port("H800=H20:0.8,H800=L20:0.5").ports
    (('H800', 'H20', 0.8), ('H800', 'L20', 0.5))
    """
    maps: list[tuple[str, str, float]] = []
    for part in (p.strip() for p in text.split(",")):
        pair, _, speed = part.rpartition(":")
        source, _, target = pair.partition("=")
        try:
            value = float(speed)
        except ValueError:
            value = math.nan
        if not source.strip() or not target.strip() or not math.isfinite(value) or value <= 0:
            raise UsageError(
                f"--port: give FROM=TO:SPEED (SPEED above 0, e.g. H800=H20:0.8), not {part!r}"
            )
        if source.strip() == target.strip():
            raise UsageError(f"--port {part}: FROM and TO are the same model")
        maps.append((source.strip(), target.strip(), value))
    return Edit("port", text, ports=tuple(maps))


# ------------------------------------------------------------ editing the fleet


@dataclass(frozen=True)
class EditedFleet:
    """The fleet after some edits: its nodes, the port maps to apply to the demand, and
    what changed (``changes``: nodes and GPUs added and removed, CPUs and memory added,
    domains merged)."""

    nodes: pl.DataFrame
    ports: tuple[tuple[str, str, float], ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    changes: dict[str, Any]
    notes: tuple[str, ...] = ()


def _mode(frame: pl.DataFrame, columns: list[str]) -> dict[str, Any]:
    """The most common row of ``columns`` (ties: the first of them in frame order)."""
    return (
        frame.group_by(columns, maintain_order=True)
        .len()
        .sort("len", descending=True, maintain_order=True)
        .row(0, named=True)
    )


def _models(nodes: pl.DataFrame) -> set[str]:
    return set(nodes["gpu_model"].drop_nulls().cast(pl.String).to_list())


def _check_model(nodes: pl.DataFrame, model: str | None, option: str) -> str:
    known = _models(nodes)
    if model not in known:
        raise UsageError(
            f"{option}: the fleet has no GPU model {model!r}; models: {', '.join(sorted(known))}"
        )
    return model


def _allocated_seconds(allocations: pl.DataFrame, start: datetime, end: datetime) -> pl.DataFrame:
    """GPU-seconds each node held over [start, end) (node_id, gpu_s)."""
    lo, hi = pl.lit(start, dtype=pl.Datetime("us")), pl.lit(end, dtype=pl.Datetime("us"))
    first = pl.max_horizontal(pl.col("start_time").cast(pl.Datetime("us")), lo)
    last = pl.min_horizontal(pl.col("end_time").cast(pl.Datetime("us")).fill_null(hi), hi)
    seconds = ((last - first).dt.total_microseconds() / 1e6).clip(lower_bound=0)
    return allocations.group_by(pl.col("node_id").cast(pl.String)).agg(
        (seconds * pl.col("gpus").cast(pl.Float64).fill_null(0)).sum().alias("gpu_s")
    )


def _add(nodes: pl.DataFrame, edit: Edit, serial: int) -> tuple[pl.DataFrame, list[str], str]:
    model = _check_model(nodes, edit.model, "--add")
    mine = nodes.filter(pl.col("gpu_model") == model)
    typical = _mode(mine, ["gpus", "cpus", "memory_gib"])
    typical.pop("len")
    typical.update(dict(edit.node))
    domains = switch_domains(mine)
    sizes = domains.value_counts()
    has_switch = "switch_id" in nodes.columns and mine["switch_id"].is_not_null().any()
    size = int(_mode(sizes.select(pl.col("count")), ["count"])["count"]) if has_switch else 1
    rows: list[dict[str, Any]] = []
    ids: list[str] = []
    taken = set(nodes["node_id"].cast(pl.String).to_list())
    j = 0

    def new_id() -> str:
        nonlocal j
        while True:
            j += 1
            candidate = f"new{serial}-{model}-{j:05d}"
            if candidate not in taken:
                taken.add(candidate)
                return candidate

    placed: list[str | None] = []
    if edit.into == "existing" and has_switch:
        full = int(sizes["count"].max() or 0)  # type: ignore[arg-type]
        switch_of = (
            mine.select(pl.col("switch_id").cast(pl.String), domains.alias("d"))
            .filter(pl.col("switch_id").is_not_null())
            .unique("d", keep="first", maintain_order=True)
        )
        counts = dict(zip(sizes["domain"].to_list(), sizes["count"].to_list(), strict=True))
        for d, switch in sorted(switch_of.select("d", "switch_id").rows()):
            room = full - counts.get(d, 0)
            while room > 0 and len(placed) < edit.count:
                placed.append(switch)
                room -= 1
    block = None
    if "block_id" in nodes.columns and nodes["block_id"].is_not_null().any():
        block = f"new{serial}-{model}-block"
    k = 0
    while len(placed) < edit.count:
        k += 1
        for _ in range(size):
            if len(placed) < edit.count:
                placed.append(f"new{serial}-{model}-sw{k:03d}" if has_switch else None)
    blocks_of = {}
    if block is not None:
        existing = nodes.filter(pl.col("switch_id").is_not_null()).select(
            pl.col("switch_id").cast(pl.String), pl.col("block_id").cast(pl.String)
        )
        blocks_of = dict(existing.unique("switch_id", keep="first").rows())
    for switch in placed:
        node_id = new_id()
        ids.append(node_id)
        row = {
            "node_id": node_id,
            "gpu_model": model,
            "gpus": typical["gpus"],
            "cpus": typical["cpus"],
            "memory_gib": typical["memory_gib"],
            "switch_id": switch,
            "health": "healthy",
        }
        if "block_id" in nodes.columns:
            row["block_id"] = blocks_of.get(switch, block) if switch is not None else None
        rows.append(row)
    added = pl.DataFrame(rows, schema={c: nodes.schema[c] for c in rows[0]} if rows else None)
    text = (
        f"{edit.count} node(s) of {model} ({int(typical['gpus'] or 0)} GPUs, "
        f"{typical['cpus']:g} CPUs, "
        + ("unbounded memory" if typical["memory_gib"] is None else f"{typical['memory_gib']:g} GiB")
        + ")"
    )
    if not rows:
        return nodes, [], text
    return pl.concat([nodes, added], how="diagonal_relaxed"), ids, text


def _remove(
    nodes: pl.DataFrame, allocations: pl.DataFrame, start: datetime, end: datetime, edit: Edit
) -> tuple[pl.DataFrame, list[str]]:
    ids = nodes["node_id"].cast(pl.String)
    if edit.source is not None:
        known = set(ids.to_list())
        for row, node in enumerate(edit.nodes, start=1):
            if node not in known:
                raise UsageError(f"{edit.source} row {row}, column node_id: no node {node!r}")
        chosen = list(dict.fromkeys(edit.nodes))
    else:
        model = _check_model(nodes, edit.model, "--remove")
        held = _allocated_seconds(allocations, start, end)
        candidates = (
            nodes.filter((pl.col("gpu_model") == model) & usable_expr(nodes))
            .select(pl.col("node_id").cast(pl.String))
            .join(held, on="node_id", how="left")
            .with_columns(pl.col("gpu_s").fill_null(0.0))
            .sort(["gpu_s", "node_id"])
        )
        if candidates.height < edit.count:
            raise UsageError(
                f"--remove {edit.text}: the fleet has {candidates.height} healthy {model} node(s)"
            )
        chosen = candidates["node_id"].head(edit.count).to_list()
    return nodes.filter(~ids.is_in(chosen)), chosen


def _delta(nodes: pl.DataFrame, edit: Edit) -> tuple[pl.DataFrame, int, str | None]:
    model = _check_model(nodes, edit.model, f"--{edit.kind}")
    column = "cpus" if edit.kind == "cpus" else "memory_gib"
    mine = pl.col("gpu_model") == model
    count = nodes.filter(mine).height
    note = None
    if column == "memory_gib":
        unbounded = nodes.filter(mine & pl.col(column).is_null()).height
        if unbounded:
            note = f"{unbounded} {model} node(s) declare no memory (unbounded): --memory leaves them"
    edited = nodes.with_columns(
        pl.when(mine & pl.col(column).is_not_null())
        .then((pl.col(column).cast(pl.Float64) + edit.delta).clip(lower_bound=0))
        .otherwise(pl.col(column).cast(pl.Float64))
        .alias(column)
    )
    return edited, count, note


def _merge(nodes: pl.DataFrame) -> tuple[pl.DataFrame, int, int]:
    if "block_id" not in nodes.columns or not nodes["block_id"].is_not_null().any():
        raise UsageError(
            "--merge-level block: the fleet has no block domains (nodes.block_id); ingest a "
            "topology with blocks (ingest --topology) first"
        )
    before = switch_domains(nodes).n_unique()
    edited = nodes.with_columns(
        pl.when(pl.col("block_id").is_not_null())
        .then(pl.lit("block:") + pl.col("block_id").cast(pl.String))
        .otherwise(pl.col("switch_id"))
        .alias("switch_id")
    )
    return edited, before, switch_domains(edited).n_unique()


def edit_fleet(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    start: datetime,
    end: datetime,
    edits: Sequence[Edit],
) -> EditedFleet:
    """Apply ``edits`` in order to the fleet ``nodes`` (see the module doc).

    Args:
        nodes: the recorded nodes frame (not changed).
        allocations: the window's allocations (which nodes are emptiest).
        start, end: the window.
        edits: the edits, applied one after the other.
    """
    frame = nodes
    added: list[str] = []
    removed: list[str] = []
    ports: list[tuple[str, str, float]] = []
    notes: list[str] = []
    changes: dict[str, Any] = {}
    gpus_before = int(nodes["gpus"].cast(pl.Int64).fill_null(0).sum())
    for serial, edit in enumerate(edits, start=1):
        if edit.kind == "add":
            frame, ids, text = _add(frame, edit, serial)
            added += ids
            changes.setdefault("added", []).append(text)
        elif edit.kind == "remove":
            frame, ids = _remove(frame, allocations, start, end, edit)
            removed += ids
        elif edit.kind in ("cpus", "memory"):
            frame, count, note = _delta(frame, edit)
            key = "cpus_added" if edit.kind == "cpus" else "memory_gib_added"
            changes[key] = changes.get(key, 0.0) + count * edit.delta
            if note:
                notes.append(note)
        elif edit.kind == "merge-level":
            frame, before, after = _merge(frame)
            changes["switch_domains"] = {"before": before, "after": after}
            notes.append(ALL_REDUCE_NOTE)
        elif edit.kind == "port":
            for source, target, _ in edit.ports:
                _check_model(frame, source, "--port")
                _check_model(frame, target, "--port")
            ports += edit.ports
        else:  # pragma: no cover - the parsers make only the kinds above
            raise ValueError(edit.kind)
    if removed:
        held = allocations.filter(
            pl.col("node_id").cast(pl.String).is_in(removed)
            & (pl.col("start_time") <= start)
            & (pl.col("end_time").is_null() | (pl.col("end_time") > start))
        )
        if held.height:
            notes.append(
                f"the removed nodes held {held.height:,} allocation(s) "
                f"({float(held['gpus'].cast(pl.Float64).fill_null(0).sum()):,.1f} GPUs) at the "
                "window's start: the replay leaves them out, as if drained before it"
            )
    changes["nodes_added"] = len(added)
    changes["nodes_removed"] = len(removed)
    changes["gpus"] = int(frame["gpus"].cast(pl.Int64).fill_null(0).sum()) - gpus_before
    return EditedFleet(
        nodes=frame.sort("node_id"),
        ports=tuple(ports),
        added=tuple(added),
        removed=tuple(removed),
        changes=changes,
        notes=tuple(notes),
    )


# ------------------------------------------------------------------- porting


def _ported_set(models: list[str], ports: Sequence[tuple[str, str, float]]) -> dict[str, float]:
    """The models a request allowing ``models`` gains, and its speed on each."""
    gained: dict[str, float] = {}
    for source, target, speed in ports:
        if source in models and target not in models and target not in gained:
            gained[target] = speed
    return gained


def port_shape(shape: Shape, ports: Sequence[tuple[str, str, float]]) -> Shape:
    """``shape`` allowed on the models the port maps add to its set (any model: unchanged).

    >>> port_shape(make_shape("H800", 8), [("H800", "H20", 0.8)]).gpu_model
    'H20|H800'
    """
    if not shape.models or not ports:
        return shape
    gained = _ported_set(list(shape.models), ports)
    if not gained:
        return shape
    return replace(shape, gpu_model="|".join(sorted({*shape.models, *gained})))


def port_requests(
    requests: pl.DataFrame, ports: Sequence[tuple[str, str, float]]
) -> tuple[pl.DataFrame, int]:
    """The requests with the port maps applied, and how many changed.

    A request whose models include a map's FROM and not its TO gains TO (its
    ``gpu_model`` set grows) and runs there at the map's speed (``model_speed``,
    read by the replay: its run on TO takes 1/speed as long). A request for any
    model is not changed.
    """
    if not ports or requests.is_empty():
        return requests, 0
    sets = requests.select(pl.col("gpu_model").cast(pl.String).unique()).to_series().to_list()
    new_model: dict[str, str] = {}
    speeds: dict[str, str] = {}
    for text in sets:
        if not text:
            continue
        models = sorted({m.strip() for m in text.split("|") if m.strip()})
        gained = _ported_set(models, ports)
        if gained:
            new_model[text] = "|".join(sorted({*models, *gained}))
            speeds[text] = "|".join(f"{m}={s:g}" for m, s in gained.items())
    if not new_model:
        return requests, 0
    model = pl.col("gpu_model").cast(pl.String)
    changed = model.is_in(list(new_model))
    prior = optional_column(requests, "model_speed", pl.String, None)
    out = requests.with_columns(
        model.replace(new_model).alias("gpu_model"),
        pl.when(changed)
        .then(
            pl.concat_str(
                [prior, model.replace_strict(speeds, default=None)], separator="|", ignore_nulls=True
            )
        )
        .otherwise(prior)
        .alias("model_speed"),
    )
    return out, int(requests.select(changed.sum()).item())


# ------------------------------------------------------------------ snapshot


@dataclass(frozen=True)
class Snapshot:
    """The report's schedulable denominator over a window's sampled instants.

    ``hours``: GPU-hours over the window of installed, idle, usable and each of
    :data:`fleetaudit.model.denominators.SPLIT` (the stranded causes and unqueued),
    the fleet's sums. ``shapes``: per demand shape (in the order given), its start
    probability (share of instants with an instance) and mean instances.
    """

    instants: int
    hours: dict[str, float]
    shapes: tuple[tuple[float | None, float | None], ...]

    @property
    def stranded(self) -> float:
        return sum(self.hours[c] for c in CAUSES)

    def as_json(self) -> dict[str, Any]:
        return {
            "instants": self.instants,
            "gpu_hours": {k: round(v, 3) for k, v in self.hours.items()},
            "stranded_gpu_hours": round(self.stranded, 3),
            "shapes": [
                {"p_start": p, "instances_mean": None if m is None else round(m, 3)}
                for p, m in self.shapes
            ],
        }


def snapshot(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    pairs: Sequence[tuple[Shape, int]],
    instants: Sequence[datetime],
    span: timedelta,
    step: timedelta,
    health: Health | None = None,
) -> Snapshot:
    """The schedulable figures of ``pairs`` (shape, queued) on this fleet, as the report
    computes them (:func:`fleetaudit.model.denominators.schedulable`, share shapes by
    :func:`fleetaudit.model.history.evaluate_history`), GPUs out of service (``health``)
    taking no work."""
    end = instants[-1]
    share_outlook = {}
    for i, (shape, _count) in enumerate(pairs):
        if shape.is_share:
            h = evaluate_history(nodes, allocations, shape, end, span, step, health=health)
            share_outlook[i] = (h.p_start, h.wait_p50_s, h.wait_p90_s)
    sched = den.schedulable(
        nodes, allocations, list(pairs), list(instants), span, share_outlook, health=health
    )
    return _snapshot_of(sched.steps, sched.shapes, span, len(instants))


def _snapshot_of(
    steps: pl.DataFrame, outlooks: Sequence[den.ShapeOutlook], span: timedelta, instants: int
) -> Snapshot:
    summed = den.sampled_hours(steps, span, [])
    row = summed.row(0, named=True) if summed.height else {}
    hours = {
        name: float(row.get(f"{name}_gpu_hours") or 0.0)
        for name in ("installed", "idle", "usable", *den.SPLIT)
    }
    return Snapshot(
        instants=instants,
        hours=hours,
        shapes=tuple((o.p_start, o.instances_mean) for o in outlooks),
    )


def snapshot_at(
    nodes: pl.DataFrame,
    frames: Sequence[tuple[datetime, pl.DataFrame]],
    pairs: Sequence[tuple[Shape, int]],
    span: timedelta,
    health: Health | None = None,
) -> Snapshot:
    """The schedulable figures at a few instants, each on its own allocations (a
    compacted state per instant): the mean over them, in GPU-hours of ``span``, GPUs
    out of service (``health``) taking no work, as in :func:`snapshot`."""
    whole = [(s, q) for s, q in pairs if not s.is_share]
    steps: list[pl.DataFrame] = []
    per_shape: list[list[den.ShapeOutlook]] = []
    for at, frame in frames:
        sched = den.schedulable(nodes, frame, whole, [at], span, health=health)
        steps.append(sched.steps)
        per_shape.append(list(sched.shapes))
    outs: list[tuple[float | None, float | None]] = []
    k = 0
    for shape, _ in pairs:
        if shape.is_share:
            outs.append((None, None))
            continue
        ps = [o[k].p_start for o in per_shape]
        ms = [m for o in per_shape if (m := o[k].instances_mean) is not None]
        outs.append((sum(ps) / len(ps) if ps else None, sum(ms) / len(ms) if ms else None))
        k += 1
    base = _snapshot_of(pl.concat(steps) if steps else pl.DataFrame(), [], span, len(frames))
    return replace(base, shapes=tuple(outs))


def snapshot_of_steps(
    steps: pl.DataFrame, outlooks: Sequence[den.ShapeOutlook], span: timedelta, instants: int
) -> Snapshot:
    """A :class:`Snapshot` from a schedulable sweep already made (some of its instants)."""
    return _snapshot_of(steps, outlooks, span, instants)


# -------------------------------------------------------------------- replay

def request_shapes(
    requests: pl.DataFrame,
    shapes: Sequence[Shape],
    start: datetime,
    end: datetime,
    deadline_s: float | None = None,
    match: Callable[[Shape, Shape], bool] | None = None,
) -> pl.DataFrame:
    """The window's arriving requests with the index of their shape among ``shapes``.

    A request's shape is its columns with the defaults applied and its duration
    rounded up to its class, as the report's demand groups them; ``match`` (a given
    shape, a request's shape) decides instead where given. Returns request_id, shape
    (Int64, -1: none of them), gpus (asked), deadline_s (the request's
    start_deadline_s, else ``deadline_s``; null: none).
    """
    window = requests.filter(arrivals(requests, start, end))
    frame = window.select(
        pl.col("request_id").cast(pl.String),
        *(optional_column(window, c, pl.Float64 if c not in ("gpu_model", "locality") else pl.String, None).alias(c)
          for c in SHAPE_COLUMNS),
        optional_column(window, "start_deadline_s", pl.Float64, None).alias("deadline_s"),
    ).with_columns(duration_class_expr("duration_s"))  # fmt: skip
    groups = frame.select(SHAPE_COLUMNS).unique(maintain_order=True)
    index: list[int] = []
    for row in groups.iter_rows(named=True):
        found = -1
        kind = request_shape(row)
        if kind is not None:
            for i, shape in enumerate(shapes):
                if (match(shape, kind) if match is not None else shape == kind):
                    found = i
                    break
        index.append(found)
    keyed = groups.with_columns(pl.Series("shape", index, dtype=pl.Int64))
    out = frame.join(keyed, on=list(SHAPE_COLUMNS), how="left", nulls_equal=True,
                     maintain_order="left")  # fmt: skip
    deadline = pl.col("deadline_s")
    if deadline_s is not None:
        deadline = deadline.fill_null(deadline_s)
    return out.select(
        "request_id",
        pl.col("shape").fill_null(-1),
        pl.col("gpus").fill_null(0.0),
        deadline.alias("deadline_s"),
    )


def same_but_duration(given: Shape, kind: Shape) -> bool:
    """A request of shape ``kind`` is of ``given`` (a shape given without a duration
    matches every duration)."""
    if given.duration_s is None:
        return replace(kind, duration_s=None) == given
    return kind == given


@dataclass(frozen=True)
class ReplayFigures:
    """What one replay of the window's demand did (see :func:`replay_figures`): the queue's
    figures as the calibration counts them (``queue``), and what the remedies add."""

    queue: QueueFigures
    served_gpu_hours: float  # GPU-hours the replayed requests held within the window
    waiting_gpus: float  # GPUs asked by the requests still waiting at the end
    p_start: tuple[float | None, ...]  # per shape: share of its arrivals started within the deadline
    shape_arrivals: tuple[int, ...]
    preemptions: int = 0
    lost_gpu_hours: float = 0.0

    @property
    def arrived(self) -> int:
        return self.queue.arrived

    @property
    def started(self) -> int:
        return self.queue.started

    @property
    def waiting(self) -> int:
        """Still waiting at the window's end (held ones too)."""
        return self.queue.waiting

    @property
    def never(self) -> int:
        """Fit no node even of an empty fleet."""
        return self.queue.never

    @property
    def wait_p50_s(self) -> float | None:
        return self.queue.wait_p50_s

    @property
    def wait_p90_s(self) -> float | None:
        return self.queue.wait_p90_s

    def as_json(self) -> dict[str, Any]:
        queue = self.queue.as_json()
        queue.pop("allocated_pct")
        return {
            **queue,
            "served_gpu_hours": round(self.served_gpu_hours, 3),
            "waiting_gpus": round(self.waiting_gpus, 3),
            "preemptions": self.preemptions,
            "lost_gpu_hours": round(self.lost_gpu_hours, 3),
            "shapes": [
                {"arrived": n, "p_start": None if p is None else round(p, 4)}
                for p, n in zip(self.p_start, self.shape_arrivals, strict=True)
            ],
        }


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def replay_figures(
    result: ReplayResult, kinds: pl.DataFrame, shapes: int, start: datetime, end: datetime
) -> ReplayFigures:
    """The figures of a replay, with each request's shape and deadline from ``kinds``
    (:func:`request_shapes`): a request started within its deadline when its wait is
    at most the deadline (no deadline: it started in the window)."""
    waits = result.waits.join(kinds, on="request_id", how="left")
    waits = waits.with_columns(
        (
            pl.col("wait_s").is_not_null()
            & (pl.col("deadline_s").is_null() | (pl.col("wait_s") <= pl.col("deadline_s")))
        ).alias("within")
    )
    per = (
        waits.filter(pl.col("shape") >= 0)
        .group_by("shape")
        .agg(pl.len().alias("n"), pl.col("within").sum().alias("k"))
    )
    counts = {int(s): (int(n), int(k)) for s, n, k in per.iter_rows()}
    never = set(result.never)
    waiting = waits.filter(
        pl.col("wait_s").is_null() & ~pl.col("request_id").is_in(list(never))
    )
    lo, hi = pl.lit(start, dtype=pl.Datetime("us")), pl.lit(end, dtype=pl.Datetime("us"))
    pods = result.allocations.filter(~pl.col("recorded"))
    first = pl.max_horizontal(pl.col("start_time"), lo)
    last = pl.min_horizontal(pl.col("end_time").fill_null(hi), hi)
    served = pods.select(
        (pl.col("gpus") * ((last - first).dt.total_microseconds() / 3.6e9).clip(lower_bound=0)).sum()
    ).item()
    return ReplayFigures(
        queue=result.figures(),
        served_gpu_hours=float(served or 0.0),
        waiting_gpus=float(waiting["gpus"].fill_null(0.0).sum()),
        p_start=tuple(
            (counts[i][1] / counts[i][0]) if i in counts else None for i in range(shapes)
        ),
        shape_arrivals=tuple(counts.get(i, (0, 0))[0] for i in range(shapes)),
        preemptions=result.preemptions.height,
        lost_gpu_hours=result.lost_gpu_hours,
    )


# -------------------------------------------------------------------- sizing


@dataclass(frozen=True)
class SizingStep:
    """One evaluation of a sizing search: the edit's value and what it gave."""

    value: float
    p_start: float | None  # the criterion's start probability
    reached: bool
    figures: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"value": self.value, "p_start": _r(self.p_start, 4), "reached": self.reached,
                **self.figures}  # fmt: skip


def bisect(
    evaluate: Callable[[float], SizingStep], bound: float, grain: float = 1.0
) -> tuple[float | None, tuple[SizingStep, ...]]:
    """The smallest value in multiples of ``grain`` from 0 to ``bound`` whose step is
    reached, by bisection, and every step evaluated (in the order run).

    Start probabilities need not grow strictly with the value (a replay may start
    other work first), so the search assumes it and says which steps it ran.

    >>> bisect(lambda v: SizingStep(v, None, v >= 5), 16)[0]
    5.0
    >>> bisect(lambda v: SizingStep(v, None, False), 16)[0] is None
    True
    """
    steps: list[SizingStep] = []

    def run(value: float) -> bool:
        step = evaluate(value)
        steps.append(step)
        return step.reached

    if run(0.0):
        return 0.0, tuple(steps)
    top = math.ceil(bound / grain)
    if top <= 0 or not run(top * grain):
        return None, tuple(steps)
    lo, hi = 0, top  # in grains: lo fails, hi reaches
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if run(mid * grain):
            hi = mid
        else:
            lo = mid
    return hi * grain, tuple(steps)
