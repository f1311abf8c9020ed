"""Replay a compaction ledger move by move and check it (SPEC §4), independently of the search.

This is the replay the SPEC promises scripts: it shares no code with
:mod:`fleetaudit.whatif.compaction`'s search. It reads the state at t from the frames,
applies each move in ledger order and checks, at that step:

- the allocation exists, is active at t, holds GPUs and sits on the move's
  ``from`` node (after the earlier moves), and the ledger's gpus, cpus and
  memory_gib are the allocation's;
- its known end_time is not within ``min_remaining_s`` of t;
- ``from`` and ``to`` are different healthy nodes of the same gpu_model (and of
  the same partition, when a node -> partition map is given);
- an allocation of a job with several allocations active at t stays in its
  switch domain (a node without switch_id is a domain by itself);
- make-before-break: ``to`` holds everything active on it plus the moved
  allocation (whole GPUs plus its shares packed first-fit-decreasing, CPUs,
  memory) while ``from`` still holds it.

Then it recomputes before and after with the time model
(:func:`fleetaudit.model.occupancy.node_state`): free and partially occupied healthy
nodes with GPUs, and the instances of the given shapes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from fleetaudit.core.times import to_utc
from fleetaudit.model import occupancy
from fleetaudit.model.capacity import SHARE_UNITS, node_use, switch_domain, usable
from fleetaudit.model.shapes import Shape, evaluate

__all__ = ["LedgerError", "LedgerReplay", "replay_ledger"]


class LedgerError(ValueError):
    """A ledger step that breaks a rule; ``step`` is its 1-based position."""

    def __init__(self, step: int, reason: str) -> None:
        super().__init__(f"step {step}: {reason}")
        self.step = step
        self.reason = reason


@dataclass(frozen=True)
class Counts:
    """Free and partially occupied healthy GPU nodes, and instances per shape."""

    free_nodes: int
    partial_nodes: int
    instances: tuple[int, ...]


@dataclass(frozen=True)
class LedgerReplay:
    """Before and after the ledger, and the allocations after it."""

    before: Counts
    after: Counts
    allocations: pl.DataFrame = field(repr=False)



def _gpus_holding(shares: Iterable[int]) -> int:
    """GPUs that shares (micro-GPUs) occupy, packed first-fit-decreasing.

    Written here on purpose, apart from :mod:`fleetaudit.model.capacity`'s packing: the
    replay checks the search's ledger, so it must not share the code it checks.

    >>> _gpus_holding([400_000, 500_000, 600_000, 500_000]), _gpus_holding([700_000] * 3)
    (2, 3)
    """
    free: list[int] = []  # room left on each opened GPU, in opening order
    for size in sorted(shares, reverse=True):
        slot = next((i for i, room in enumerate(free) if room >= size), None)
        if slot is None:
            free.append(SHARE_UNITS - size)
        else:
            free[slot] -= size
    return len(free)


def _micro(value: Any) -> int:
    return 0 if value is None else round(float(value) * SHARE_UNITS)


def _counts(
    nodes: pl.DataFrame, allocations: pl.DataFrame, at: datetime, shapes: Sequence[Shape]
) -> Counts:
    state = occupancy.node_state(nodes, allocations, at)
    free_node, partial_node = node_use(state)
    free = state.filter(free_node).height
    partial = state.filter(partial_node).height
    instances = []
    for shape in shapes:
        window = timedelta(seconds=shape.duration_s) if shape.duration_s else None
        instances.append(
            evaluate(occupancy.node_state(nodes, allocations, at, window), shape).instances
        )
    return Counts(free, partial, tuple(instances))


def replay_ledger(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    at: datetime,
    moves: Sequence[Mapping[str, Any]],
    shapes: Sequence[Shape] = (),
    *,
    min_remaining_s: float = 0.0,
    partition_of: Mapping[str, int] | None = None,
) -> LedgerReplay:
    """Apply ``moves`` (the ``--json`` ledger's entries) to the state at ``at``, checking each.

    Args:
        nodes: the nodes frame.
        allocations: the allocations frame.
        at: the instant t.
        moves: entries with alloc_id, from, to, gpus, cpus, memory_gib, in order.
        shapes: shapes whose instances are recomputed before and after.
        min_remaining_s: the run's ``--min-remaining``.
        partition_of: node_id -> partition, to check moves stay in one.

    Returns:
        Before and after the whole ledger.

    Raises:
        LedgerError: the first step that breaks a rule, with the reason.
    """
    node_rows = {r["node_id"]: r for r in nodes.iter_rows(named=True)}
    active = occupancy.active_at(allocations, at)
    rows = {r["alloc_id"]: r for r in active.iter_rows(named=True)}
    jobs: dict[str, int] = {}
    for r in rows.values():
        job = r.get("job_id") or r["alloc_id"]
        jobs[job] = jobs.get(job, 0) + 1
    on_node: dict[str, set[str]] = {}
    where: dict[str, str] = {}
    for alloc_id, r in rows.items():
        where[alloc_id] = r["node_id"]
        on_node.setdefault(r["node_id"], set()).add(alloc_id)
    horizon = at + timedelta(seconds=min_remaining_s)

    def domain(node_id: str) -> str:
        return switch_domain(node_rows[node_id].get("switch_id"), node_id)

    for step, move in enumerate(moves, 1):
        alloc_id, source, target = move["alloc_id"], move["from"], move["to"]
        row = rows.get(alloc_id)
        if row is None:
            raise LedgerError(step, f"{alloc_id} is not an allocation active at t")
        if _micro(row["gpus"]) <= 0:
            raise LedgerError(step, f"{alloc_id} holds no GPUs")
        for key in ("gpus", "cpus", "memory_gib"):
            if _micro(move.get(key)) != _micro(row.get(key)):
                raise LedgerError(step, f"{key} {move.get(key)} is not {alloc_id}'s {row.get(key)}")
        if where[alloc_id] != source:
            raise LedgerError(step, f"{alloc_id} is on {where[alloc_id]}, not on {source}")
        end = row.get("end_time")
        if end is not None and to_utc(end) < to_utc(horizon):
            raise LedgerError(step, f"{alloc_id} ends within the minimum remaining time")
        if target not in node_rows:
            raise LedgerError(step, f"unknown destination {target}")
        if target == source:
            raise LedgerError(step, f"{alloc_id} moves onto its own node")
        for node_id in (source, target):
            if not usable(node_rows[node_id].get("health")):
                raise LedgerError(step, f"{node_id} is not healthy")
        if node_rows[source]["gpu_model"] != node_rows[target]["gpu_model"]:
            raise LedgerError(step, f"{source} and {target} are of different GPU models")
        if partition_of is not None and partition_of.get(source) != partition_of.get(target):
            raise LedgerError(step, f"{source} and {target} are in different partitions")
        job = row.get("job_id") or alloc_id
        if jobs[job] > 1 and domain(source) != domain(target):
            raise LedgerError(
                step, f"{alloc_id} of gang {job} leaves its domain {domain(source)}"
            )
        # make-before-break: the destination holds its work and the moved allocation
        held = [rows[a] for a in on_node.get(target, set())] + [row]
        gpus = [_micro(r["gpus"]) for r in held]
        whole = sum(g // SHARE_UNITS for g in gpus)
        shares = _gpus_holding(g % SHARE_UNITS for g in gpus if g % SHARE_UNITS)
        node = node_rows[target]
        if whole + shares > int(node["gpus"]):
            raise LedgerError(step, f"{target} cannot hold {alloc_id}'s GPUs")
        if sum(_micro(r["cpus"]) for r in held) > _micro(node["cpus"]):
            raise LedgerError(step, f"{target} cannot hold {alloc_id}'s CPUs")
        if node.get("memory_gib") is not None and sum(
            _micro(r.get("memory_gib")) for r in held
        ) > _micro(node["memory_gib"]):
            raise LedgerError(step, f"{target} cannot hold {alloc_id}'s memory")
        on_node[source].discard(alloc_id)
        on_node.setdefault(target, set()).add(alloc_id)
        where[alloc_id] = target
    moved = {a: n for a, n in where.items() if n != rows[a]["node_id"]}
    after = allocations
    if moved:
        alloc = pl.col("alloc_id").cast(pl.String)
        after = allocations.with_columns(
            pl.when(alloc.is_in(list(moved)))
            .then(alloc.replace(moved))
            .otherwise(pl.col("node_id").cast(pl.String))
            .alias("node_id")
        )
    return LedgerReplay(
        before=_counts(nodes, allocations, at, shapes),
        after=_counts(nodes, after, at, shapes),
        allocations=after,
    )
