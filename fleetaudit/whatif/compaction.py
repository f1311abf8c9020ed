"""In-place compaction replayed offline (SPEC §4): a move ledger that frees whole nodes.

Pure functions over the store's ``nodes`` and ``allocations`` frames (extra
columns are ignored; neither is mutated), an instant t, the shapes whose
instances are the objective, and a frozen :class:`CompactionOptions`.
The entry point is :func:`compact`; :func:`fleetaudit.whatif.compaction_replay.replay_ledger`
checks its ledger independently.

Model (integer micro-units, :data:`~fleetaudit.model.occupancy.SHARE_UNITS` per GPU,
core or GiB; a node's occupied GPUs are its whole parts plus the GPUs its
shares fill when packed first-fit-decreasing, as in SPEC §2):

- Scope: healthy nodes with GPUs. Partitions: per gpu_model, whole switch
  domains (a node without switch_id is a domain by itself) in domain order,
  grouped while the partition stays within ``partition_nodes`` (a larger
  domain is a partition by itself). Partitions are independent.
- Movable: an allocation active at t holding GPUs, on a healthy node, whose
  known end_time is not within ``min_remaining_s`` of t. An allocation of a job
  with several allocations active at t stays in its switch domain.
- Moves are make-before-break and happen one at a time: the destination holds
  the allocation's GPUs, CPUs and memory while its source still holds it.
  Destinations are occupied nodes (moving work onto a free node never frees one).

Search (the ASI paper's in-place compaction): for up to ``rounds`` rounds,
each partially occupied node without pinned GPU work, emptiest first, is a
target to empty: each of its allocations, largest first, goes to its best
destination; when none fits, one allocation or a pair there is ejected in turn
(recursively, up to ``depth`` levels deep, trying ``breadth`` destinations per
level). Then partial nodes are completed: an allocation elsewhere whose GPUs
exactly fill a partial node moves there. A step is kept only when the
objective improves, in order: the shapes' instances (no shape may lose any),
free nodes, fewer partial nodes (fewer GPUs moved breaks no tie: a kept step
must improve an earlier level). Destination order: best fit (fewest GPUs left
free), then the fullest switch domain (so large gangs find whole domains
later), then fewest CPUs left, then node order.

Instances inside the search are the shapes' counts at t per partition:
``switch`` sums floor(domain slots / k), ``block`` the same per block domain
(with a block shape, partitions are whole blocks), ``node`` sums slots, ``any`` counts the
partition's slots (its instances are floor(fleet slots / k), which cannot fall
when no partition's slots fall). The reported before/after instances are
:func:`fleetaudit.model.shapes.evaluate` on the state before and after (durations
included).

Bound: per partition, nodes minus the nodes pinned by immovable GPU work minus
the fewest further nodes whose capacity (largest first) covers the movable
GPUs, CPUs and memory that the pinned nodes' room cannot hold; a relaxation
(shares as fractions, no packing, no gang locality), so no rearrangement can
free more nodes.

Exact (``exact``): partitions of at most ``exact_nodes`` nodes are solved as an
ILP (scipy's HiGHS): every movable allocation on one eligible node, shares
packed per GPU, CPUs and memory within capacity, fewest occupied nodes,
ignoring depth, rounds and the order of moves.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from fleetaudit.core.options import CompactionOptions
from fleetaudit.core.parallel import map_processes
from fleetaudit.core.times import epoch_us
from fleetaudit.model import occupancy
from fleetaudit.model.capacity import (
    BLOCK_DOMAIN,
    SHARE_UNITS,
    UNBOUNDED,
    Pod,
    micro_units,
    node_index,
    node_slots,
    packed_fills,
)
from fleetaudit.model.shapes import Shape, evaluate, json_number

__all__ = [
    "CompactionOptions",
    "CompactionResult",
    "Migration",
    "Move",
    "PartitionResult",
    "Snapshot",
    "compact",
    "solve_arrow",
]

_U = SHARE_UNITS
_EJECT_PER_NODE = 2  # ejections (one allocation, else a pair) tried on one destination
_GIB_BITS = 8 * 1024**3 / 1e9  # gigabits in one GiB


@dataclass(frozen=True)
class Move:
    """One step of the ledger: ``alloc_id`` moves from ``source`` to ``destination``."""

    step: int
    alloc_id: str
    source: str
    destination: str
    gpus: float
    cpus: float
    memory_gib: float | None
    partition: int

    def as_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "alloc_id": self.alloc_id,
            "from": self.source,
            "to": self.destination,
            "gpus": json_number(self.gpus),
            "cpus": json_number(self.cpus),
            "memory_gib": None if self.memory_gib is None else json_number(self.memory_gib),
        }


@dataclass(frozen=True)
class PartitionResult:
    """One partition's search: counts before and after, its bound, budgets it hit."""

    index: int
    gpu_model: str
    nodes: int
    domains: int
    movable: int
    before_free: int
    before_partial: int
    after_free: int
    after_partial: int
    bound_free: int
    moves: int
    gpus_moved: float
    budgets_hit: tuple[str, ...]
    seconds: float
    exact_free: int | None = None  # the ILP's optimum (None: not solved)
    exact_status: str | None = None  # optimal, bound, time_limit, too_large, failed, or None
    exact_seconds: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "partition": self.index,
            "gpu_model": self.gpu_model,
            "nodes": self.nodes,
            "domains": self.domains,
            "movable": self.movable,
            "before": {"free_nodes": self.before_free, "partial_nodes": self.before_partial},
            "after": {"free_nodes": self.after_free, "partial_nodes": self.after_partial},
            "bound_free_nodes": self.bound_free,
            "moves": self.moves,
            "gpus_moved": json_number(self.gpus_moved),
            "budgets_hit": list(self.budgets_hit),
            "seconds": round(self.seconds, 4),
            "exact": None
            if self.exact_status is None
            else {
                "status": self.exact_status,
                "free_nodes": self.exact_free,
                "seconds": None if self.exact_seconds is None else round(self.exact_seconds, 4),
            },
        }


@dataclass(frozen=True)
class Snapshot:
    """Fleet counts at t (healthy nodes with GPUs) and the instances of each shape."""

    free_nodes: int
    partial_nodes: int
    instances: tuple[tuple[Shape, int], ...]


@dataclass(frozen=True)
class Migration:
    """What the ledger's moves cost against what they free."""

    moves: int
    gpus_moved: float
    state_gib: float
    transfer_s: float  # sum over moves
    pause_gpu_hours: float  # GPUs x (transfer + warmup) of every move
    freed_gpus: int  # GPUs of the nodes that became free
    payback_s: float | None  # pause GPU-seconds / freed GPUs (None: nothing freed)

    def as_json(self) -> dict[str, Any]:
        return {
            "moves": self.moves,
            "gpus_moved": json_number(self.gpus_moved),
            "state_gib": round(self.state_gib, 3),
            "transfer_s": round(self.transfer_s, 3),
            "pause_gpu_hours": round(self.pause_gpu_hours, 4),
            "freed_gpus": self.freed_gpus,
            "payback_s": None if self.payback_s is None else round(self.payback_s, 3),
        }


@dataclass(frozen=True)
class CompactionResult:
    """The ledger, the fleet before and after it, the bound and what it cost."""

    moves: tuple[Move, ...]
    partitions: tuple[PartitionResult, ...]
    before: Snapshot
    after: Snapshot
    bound_free_nodes: int
    migration: Migration
    seconds: float
    allocations: pl.DataFrame = field(repr=False)  # every input row, moved ones on their new node

    @property
    def budgets_hit(self) -> tuple[PartitionResult, ...]:
        return tuple(p for p in self.partitions if p.budgets_hit)


# ------------------------------------------------------------------ preparation


@dataclass(frozen=True)
class _ShapeSpec:
    """A shape as the search counts it on one model's nodes."""

    share: int  # capacity.Pod's fields, flat for the Arrow rows of partitions_table
    per_pod: int
    cpus: int
    memory: int
    pods: int  # k
    group: str  # switch, block, any or node

    @property
    def pod(self) -> Pod:
        """One pod in units: the capacity model's :class:`~fleetaudit.model.capacity.Pod`."""
        return Pod(self.share, self.per_pod, self.cpus, self.memory)


@dataclass(frozen=True)
class _Partition:
    """One partition's nodes and the allocations active on them at t (picklable)."""

    index: int
    gpu_model: str
    node_ids: tuple[str, ...]
    gpus: tuple[int, ...]
    cpus: tuple[int, ...]
    memory: tuple[int, ...]  # UNBOUNDED when unknown
    domain: tuple[int, ...]
    domains: int
    block: tuple[int, ...]  # each node's block domain, numbered within the partition
    alloc_ids: tuple[str, ...]
    alloc_node: tuple[int, ...]
    alloc_gpus: tuple[int, ...]
    alloc_cpus: tuple[int, ...]
    alloc_memory: tuple[int, ...]
    alloc_memory_known: tuple[bool, ...]
    movable: tuple[bool, ...]
    gang: tuple[bool, ...]
    shapes: tuple[_ShapeSpec, ...]
    options: CompactionOptions


def _units(column: str) -> pl.Expr:
    return micro_units(column).fill_null(0)


def _shape_spec(shape: Shape) -> _ShapeSpec:
    pod = Pod.of(shape)
    return _ShapeSpec(pod.share, pod.gpus, pod.cpus, pod.memory, shape.pods, shape.locality)


def _movable_rows(at: datetime, options: CompactionOptions) -> pl.Expr:
    """GPU-holding rows whose known end_time is not within ``min_remaining_s`` of t."""
    horizon = epoch_us(at + timedelta(seconds=options.min_remaining_s))
    end = pl.col("end_time").dt.epoch("us")
    ends_soon = end.is_not_null() & (end < horizon)
    return (pl.col("gpus").fill_null(0) > 0) & ~ends_soon


def _partitions(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    at: datetime,
    shapes: Sequence[Shape],
    options: CompactionOptions,
) -> list[_Partition]:
    """Healthy GPU nodes per model, whole domains grouped up to ``partition_nodes``.

    With a ``block`` shape among ``shapes`` the unit is the whole block domain
    (its switch domains in order), so a block is never split and the search's
    per-partition block counts add up to the fleet's.
    """
    blocks = any(s.locality == "block" for s in shapes)
    unit = BLOCK_DOMAIN if blocks else "domain"
    # usable nodes with GPUs, from the capacity model's node index
    scope = (
        node_index(nodes)
        .filter(pl.col("usable") & (pl.col("gpus") > 0))
        .sort("gpu_model", *([BLOCK_DOMAIN] if blocks else []), "domain", "node_id")
    )
    active = occupancy.active_at(allocations, at).with_columns(
        pl.col("node_id").cast(pl.String),
        pl.coalesce(pl.col("job_id").cast(pl.String), pl.col("alloc_id").cast(pl.String)).alias(
            "_job"
        ),
    )
    active = active.with_columns(
        (pl.len().over("_job") > 1).alias("_gang"),
        _movable_rows(at, options).alias("_movable"),
    ).join(scope.select("node_id"), on="node_id", how="semi")
    # node_id -> its rows (alloc_id, g, c, m, mk, _movable, _gang), in the frame's order:
    # one pass over the rows (a frame per node cost a query per node and round)
    by_node: dict[str, list[tuple[Any, ...]]] = {}
    for node_id, *row in active.select(
        "node_id", "alloc_id", _units("gpus").alias("g"), _units("cpus").alias("c"),
        _units("memory_gib").alias("m"), pl.col("memory_gib").is_not_null().alias("mk"),
        "_movable", "_gang",
    ).iter_rows():  # fmt: skip
        by_node.setdefault(node_id, []).append(tuple(row))
    out: list[_Partition] = []
    for (model,), model_nodes in scope.partition_by(
        "gpu_model", as_dict=True, maintain_order=True
    ).items():
        specs = tuple(_shape_spec(s) for s in shapes if s.models is None or str(model) in s.models)
        groups: list[list[dict[str, Any]]] = []
        current: list[dict[str, Any]] = []
        for (_,), domain_nodes in model_nodes.partition_by(
            unit, as_dict=True, maintain_order=True
        ).items():
            rows = list(domain_nodes.iter_rows(named=True))
            if current and len(current) + len(rows) > options.partition_nodes:
                groups.append(current)
                current = []
            current.extend(rows)
        if current:
            groups.append(current)
        for rows in groups:
            out.append(_partition(len(out), str(model), rows, by_node, specs, options))
    return out


def _partition(
    index: int,
    model: str,
    rows: list[dict[str, Any]],
    by_node: dict[str, list[tuple[Any, ...]]],
    specs: tuple[_ShapeSpec, ...],
    options: CompactionOptions,
) -> _Partition:
    domain_index: dict[str, int] = {}
    block_index: dict[str, int] = {}
    alloc: dict[str, list[Any]] = {
        k: [] for k in ("id", "node", "g", "c", "m", "mk", "mov", "gang")
    }
    for i, row in enumerate(rows):
        domain_index.setdefault(row["domain"], len(domain_index))
        block_index.setdefault(row[BLOCK_DOMAIN], len(block_index))
        for alloc_id, g, c, m, mk, mov, gang in by_node.get(row["node_id"], ()):
            alloc["id"].append(alloc_id)
            alloc["node"].append(i)
            alloc["g"].append(g)
            alloc["c"].append(c)
            alloc["m"].append(m)
            alloc["mk"].append(bool(mk))
            alloc["mov"].append(bool(mov))
            alloc["gang"].append(bool(gang))
    return _Partition(
        index=index,
        gpu_model=model,
        node_ids=tuple(r["node_id"] for r in rows),
        gpus=tuple(int(r["gpus"]) for r in rows),
        cpus=tuple(r["cpus_u"] for r in rows),
        memory=tuple(r["memory_u"] for r in rows),
        domain=tuple(domain_index[r["domain"]] for r in rows),
        domains=len(domain_index),
        block=tuple(block_index[r[BLOCK_DOMAIN]] for r in rows),
        alloc_ids=tuple(alloc["id"]),
        alloc_node=tuple(alloc["node"]),
        alloc_gpus=tuple(alloc["g"]),
        alloc_cpus=tuple(alloc["c"]),
        alloc_memory=tuple(alloc["m"]),
        alloc_memory_known=tuple(alloc["mk"]),
        movable=tuple(alloc["mov"]),
        gang=tuple(alloc["gang"]),
        shapes=specs,
        options=options,
    )


# ------------------------------------------------------------------ the search


_FREE, _PARTIAL, _FULL = 0, 1, 2


class _Search:
    """The mutable state of one partition and the ejection-chain search over it."""

    def __init__(self, part: _Partition) -> None:
        self.part = part
        n = len(part.node_ids)
        self.n = n
        self.cap_g = part.gpus
        self.cap_c = part.cpus
        self.cap_m = part.memory
        self.whole = [0] * n
        self.shares: list[list[int]] = [[] for _ in range(n)]
        self.cpu_used = [0] * n
        self.mem_used = [0] * n
        self.on: list[set[int]] = [set() for _ in range(n)]  # GPU-holding allocations
        self.pinned = [0] * n  # immovable GPU-holding allocations
        self.where = list(part.alloc_node)
        self.aw = [g // _U for g in part.alloc_gpus]
        self.af = [g % _U for g in part.alloc_gpus]
        for a, node in enumerate(part.alloc_node):
            self.cpu_used[node] += part.alloc_cpus[a]
            self.mem_used[node] += part.alloc_memory[a]
            if part.alloc_gpus[a] > 0:
                self.whole[node] += self.aw[a]
                if self.af[a]:
                    self.shares[node].append(self.af[a])
                if part.movable[a]:
                    self.on[node].add(a)
                else:
                    self.pinned[node] += 1
        self.dom = np.array(part.domain, dtype=np.int64)
        self.dom_cap = np.bincount(self.dom, weights=part.gpus, minlength=part.domains)
        self.dom_used = np.zeros(part.domains)
        self.free_g = np.zeros(n, dtype=np.int64)
        self.free_c = np.zeros(n, dtype=np.int64)
        self.free_m = np.zeros(n, dtype=np.int64)
        self.used = np.zeros(n, dtype=np.int64)
        self.room = np.zeros(n, dtype=np.int64)  # most share room on a share-holding GPU
        self.share_gpus = np.zeros(n, dtype=np.int64)  # GPUs holding shares
        self.mov2 = np.zeros(n, dtype=np.int64)  # GPUs of the two largest movable allocations
        self.status = [-1] * n
        self.free_nodes = 0
        self.partial = 0
        shapes = part.shapes
        self.pods = [spec.pod for spec in shapes]
        self.node_slots = [[0] * n for _ in shapes]
        self.slots_of: dict[tuple[Any, ...], tuple[int, ...]] = {}  # node state -> slots per shape
        self.group_of = [self._groups(s) for s in shapes]
        self.group_slots = [[0] * (max(g) + 1 if g else 0) for g in self.group_of]
        self.measure = [0] * len(shapes)
        self.moves: list[tuple[int, int, int]] = []  # (alloc, source, destination)
        self.log: list[tuple[int, int]] = []  # (alloc, source) of every tentative move
        self.budgets: set[str] = set()
        for i in range(n):
            self._refresh(i)

    def _groups(self, spec: _ShapeSpec) -> list[int]:
        if spec.group == "switch":
            return list(self.part.domain)
        if spec.group == "block":
            return list(self.part.block)
        if spec.group == "any":
            return [0] * self.n
        return list(range(self.n))

    # -- node state ----------------------------------------------------------------

    def _refresh(self, i: int) -> None:
        """Recompute node i's derived values and the partition's running counts."""
        fills = packed_fills(self.shares[i])
        occupied = self.whole[i] + len(fills)
        self.dom_used[self.dom[i]] += occupied - self.used[i]
        self.used[i] = occupied
        free_g = max(self.cap_g[i] - occupied, 0)
        free_c = max(self.cap_c[i] - self.cpu_used[i], 0)
        free_m = max(self.cap_m[i] - self.mem_used[i], 0)
        self.free_g[i] = free_g
        self.free_c[i] = free_c
        self.free_m[i] = free_m
        self.room[i] = _U - fills[-1] if fills else 0
        self.share_gpus[i] = len(fills)
        self.mov2[i] = sum(sorted(-(-self.part.alloc_gpus[a] // _U) for a in self.on[i])[-2:])
        status = _FREE if occupied == 0 else _PARTIAL if occupied < self.cap_g[i] else _FULL
        old = self.status[i]
        if old != status:
            self.free_nodes += (status == _FREE) - (old == _FREE)
            self.partial += (status == _PARTIAL) - (old == _PARTIAL)
            self.status[i] = status
        over = occupied > self.cap_g[i]
        # nodes repeat a few states (full, empty, a common mix): their slots are memoised
        key = (free_g, free_c, free_m, fills, over)
        every = self.slots_of.get(key)
        if every is None:
            every = tuple(
                node_slots(pod, free_g, free_c, free_m, fills=fills, over=over) for pod in self.pods
            )
            self.slots_of[key] = every
        for s, spec in enumerate(self.part.shapes):
            slots = every[s]
            old_slots = self.node_slots[s][i]
            if slots == old_slots:
                continue
            self.node_slots[s][i] = slots
            g = self.group_of[s][i]
            before = self.group_slots[s][g]
            after = before + slots - old_slots
            self.group_slots[s][g] = after
            if spec.group == "any":
                self.measure[s] += after - before
            else:
                self.measure[s] += after // spec.pods - before // spec.pods

    def _fits(self, a: int, d: int, without: tuple[int, ...] = ()) -> bool:
        """Whether allocation a fits node d now (optionally with the allocations ``without`` gone)."""
        part = self.part
        whole = self.whole[d] + self.aw[a]
        shares = self.shares[d]
        cpu = self.cpu_used[d] + part.alloc_cpus[a]
        mem = self.mem_used[d] + part.alloc_memory[a]
        for b in without:
            whole -= self.aw[b]
            cpu -= part.alloc_cpus[b]
            mem -= part.alloc_memory[b]
            if self.af[b]:
                shares = list(shares)
                shares.remove(self.af[b])
        if cpu > self.cap_c[d] or mem > self.cap_m[d] or whole > self.cap_g[d]:
            return False
        extra = self.af[a]
        return whole + len(packed_fills([*shares, extra] if extra else shares)) <= self.cap_g[d]

    def _place_on(self, a: int, d: int, record: bool = True) -> bool:
        """Move allocation a to node d (True: it always lands, for :meth:`_attempt`)."""
        s = self.where[a]
        part = self.part
        for node, sign in ((s, -1), (d, 1)):
            self.whole[node] += sign * self.aw[a]
            self.cpu_used[node] += sign * part.alloc_cpus[a]
            self.mem_used[node] += sign * part.alloc_memory[a]
        if self.af[a]:
            self.shares[s].remove(self.af[a])
            self.shares[d].append(self.af[a])
        self.on[s].discard(a)
        self.on[d].add(a)
        self.where[a] = d
        self._refresh(s)
        self._refresh(d)
        if record:
            self.moves.append((a, s, d))
            self.log.append((a, s))
        return True

    def _undo_to(self, log_mark: int, move_mark: int) -> None:
        while len(self.log) > log_mark:
            a, s = self.log.pop()
            self._place_on(a, s, record=False)
        del self.moves[move_mark:]

    # -- destinations --------------------------------------------------------------

    def _scope(self, a: int, excluded: set[int]) -> np.ndarray:
        ok = self.used > 0  # a new array: safe to change below
        if self.part.gang[a]:
            ok &= self.dom == self.dom[self.where[a]]
        ok[self.where[a]] = False
        for e in excluded:
            ok[e] = False
        return ok

    def _order(self, idx: np.ndarray, left: np.ndarray) -> np.ndarray:
        fill = self.dom_used[self.dom[idx]] / self.dom_cap[self.dom[idx]]
        return idx[np.lexsort((idx, self.free_c[idx], -fill, left))]

    def _destinations(self, a: int, excluded: set[int]) -> np.ndarray:
        """Nodes a fits on now (by a conservative share test), best first."""
        part = self.part
        need = self.aw[a] + (self.room < self.af[a]) if self.af[a] else self.aw[a]
        ok = self._scope(a, excluded)
        ok &= self.free_g >= need
        ok &= self.free_c >= part.alloc_cpus[a]
        ok &= self.free_m >= part.alloc_memory[a]
        idx = np.flatnonzero(ok)
        if idx.size == 0:
            return idx
        left = self.free_g[idx] - (need[idx] if isinstance(need, np.ndarray) else need)
        return self._order(idx, left)

    def _hosts(self, a: int, excluded: set[int]) -> np.ndarray:
        """Nodes a might fit on after one or two of their movable allocations left, best first."""
        need = self.aw[a] + (1 if self.af[a] else 0)
        ok = self._scope(a, excluded)
        ok &= self.mov2 > 0
        ok &= self.free_g + self.mov2 >= need
        idx = np.flatnonzero(ok)
        if idx.size == 0:
            return idx
        return self._order(idx, self.free_g[idx] + self.mov2[idx] - need)

    def _ejections(self, a: int, y: int) -> list[tuple[int, ...]]:
        """One or two allocations on y whose departure lets a in, fewest GPUs first."""
        size = self.part.alloc_gpus
        others = sorted((b for b in self.on[y] if b != a), key=lambda b: (size[b], b))
        sets: list[tuple[int, ...]] = [(b,) for b in others]
        sets += [(b, c) for i, b in enumerate(others) for c in others[i + 1 :]]
        sets.sort(key=lambda e: (sum(size[b] for b in e), len(e), e))
        found = []
        for ejected in sets:
            if self._fits(a, y, without=ejected):
                found.append(ejected)
                if len(found) == _EJECT_PER_NODE:
                    break
        return found

    def _place(self, a: int, depth: int, excluded: set[int]) -> bool:
        """Move a to its best destination, ejecting up to ``depth - 1`` allocations deep."""
        for d in self._destinations(a, excluded):
            if self._fits(a, int(d)):
                self._place_on(a, int(d))
                return True
        if depth <= 1:
            if self._hosts(a, excluded).size:
                self.budgets.add("depth")
            return False
        hosts = self._hosts(a, excluded)
        if hosts.size > self.part.options.breadth:
            self.budgets.add("breadth")
        for y in hosts[: self.part.options.breadth]:
            y = int(y)
            for ejected in self._ejections(a, y):
                log_mark, move_mark = len(self.log), len(self.moves)
                away = excluded | {y, self.where[a]}
                if all(self._place(b, depth - 1, away) for b in ejected) and self._fits(a, y):
                    self._place_on(a, y)
                    return True
                self._undo_to(log_mark, move_mark)
        return False

    # -- steps ---------------------------------------------------------------------

    def _state(self) -> tuple[list[int], int, int]:
        return list(self.measure), self.free_nodes, self.partial

    def _better(self, before: tuple[list[int], int, int]) -> bool:
        measure, free, partial = before
        if any(now < was for now, was in zip(self.measure, measure, strict=True)):
            return False
        gain = (sum(self.measure) - sum(measure), self.free_nodes - free, partial - self.partial)
        return gain > (0, 0, 0)

    def _attempt(self, step: Any) -> bool:
        before = self._state()
        log_mark, move_mark = len(self.log), len(self.moves)
        if step() and self._better(before):
            self.log.clear()
            return True
        self._undo_to(log_mark, move_mark)
        self.log.clear()
        return False

    def _empty(self, x: int) -> bool:
        allocations = sorted(self.on[x], key=lambda a: (-self.part.alloc_gpus[a], a))
        need = sum(self.aw[a] for a in allocations)
        # whole GPUs the other occupied nodes have free, or could free by packing
        # their shares more tightly: a necessary condition, cheap to test
        others = self.used > 0
        others[x] = False
        room = int(self.free_g[others].sum()) + int(self.share_gpus[others].sum())
        if need > room:
            return False
        depth = self.part.options.depth
        return all(self._place(a, depth, {x}) for a in allocations)

    def _complete(self, y: int, by_size: dict[int, list[int]]) -> bool:
        """Fill partial node y with one allocation whose GPUs are exactly its free GPUs."""
        left = int(self.free_g[y])
        tried = 0
        candidates = sorted(
            (a for a in by_size.get(left, ()) if self.where[a] != y and self.status[self.where[a]] == _PARTIAL),
            key=lambda a: (int(self.used[self.where[a]]), a),
        )  # fmt: skip
        for a in candidates:
            if self.part.gang[a] and self.dom[self.where[a]] != self.dom[y]:
                continue
            if not self._fits(a, y):
                continue
            if self._attempt(lambda a=a: self._place_on(a, y)):
                return True
            tried += 1
            if tried >= self.part.options.breadth:
                self.budgets.add("breadth")
                break
        return False

    def _past_stop(self) -> bool:
        """The ledger already moves more GPUs than ``stop_after_gpus`` (then stop)."""
        stop = self.part.options.stop_after_gpus
        if stop is None:
            return False
        return sum(self.part.alloc_gpus[a] for a, _, _ in self.moves) > stop * _U

    def run(self) -> None:
        options = self.part.options
        failed_at: dict[int, int] = {}
        version = 0
        improved = False
        for _ in range(options.rounds):
            improved = False
            targets = sorted(
                (i for i in range(self.n) if self.status[i] == _PARTIAL and not self.pinned[i]),
                key=lambda i: (int(self.used[i]), i),
            )
            for x in targets:
                if self.status[x] != _PARTIAL or failed_at.get(x) == version:
                    continue
                if self._attempt(lambda x=x: self._empty(x)):
                    version += 1
                    improved = True
                    if self._past_stop():
                        return
                else:
                    failed_at[x] = version
            by_size: dict[int, list[int]] = {}
            for a, movable in enumerate(self.part.movable):
                if movable and self.part.alloc_gpus[a] > 0 and not self.af[a]:
                    by_size.setdefault(self.aw[a], []).append(a)
            for y in sorted(
                (i for i in range(self.n) if self.status[i] == _PARTIAL),
                key=lambda i: (-int(self.used[i]), i),
            ):
                if self.status[y] == _PARTIAL and self._complete(y, by_size):
                    version += 1
                    improved = True
                    if self._past_stop():
                        return
            if not improved:
                break
        if improved:
            self.budgets.add("rounds")


def _bound(part: _Partition) -> int:
    """Free nodes no rearrangement of the partition's movable work can beat (module doc)."""
    n = len(part.node_ids)
    pinned = [False] * n
    fixed = [[0, 0, 0] for _ in range(n)]  # GPUs, CPUs, memory of immovable work
    current = [[0, 0, 0] for _ in range(n)]  # the same of the movable work where it is now
    demand = [0, 0, 0]
    for a, node in enumerate(part.alloc_node):
        values = (part.alloc_gpus[a], part.alloc_cpus[a], part.alloc_memory[a])
        if part.movable[a] and part.alloc_gpus[a] > 0:
            for k in range(3):
                demand[k] += values[k]
                current[node][k] += values[k]
        else:
            pinned[node] = pinned[node] or part.alloc_gpus[a] > 0
            for k in range(3):
                fixed[node][k] += values[k]
    caps = [(part.gpus[i] * _U, part.cpus[i], part.memory[i]) for i in range(n)]
    # never below what a node holds now, so the present arrangement stays within the
    # relaxation even on an over-committed node
    spare = [[max(caps[i][k] - fixed[i][k], current[i][k]) for i in range(n)] for k in range(3)]
    left = [demand[k] - sum(spare[k][i] for i in range(n) if pinned[i]) for k in range(3)]
    others = [i for i in range(n) if not pinned[i]]
    extra = 0
    for k in range(3):
        if left[k] <= 0:
            continue
        room = sorted((spare[k][i] for i in others), reverse=True)
        covered, count = 0, 0
        while covered < left[k] and count < len(room):
            covered += room[count]
            count += 1
        extra = max(extra, count)
    return n - sum(pinned) - extra


def _exact(
    part: _Partition, at_least: int = 0, at_most: int | None = None
) -> tuple[int | None, str, float]:
    """The ILP optimum of free nodes (module doc): (free nodes or None, status, seconds).

    ``at_least`` and ``at_most`` are free-node counts known to be reachable (the
    search's) and unbeatable (the bound); as cuts they spare HiGHS the proof.
    """
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    started = time.perf_counter()
    n = len(part.node_ids)
    columns = 0
    rows: list[tuple[list[int], list[float], float, float]] = []  # (cols, coefs, lo, hi)
    cost: list[float] = []
    integrality: list[int] = []
    lower: list[float] = []

    def var(obj: float = 0.0, lo: float = 0.0) -> int:
        nonlocal columns
        cost.append(obj)
        integrality.append(1)
        lower.append(lo)
        columns += 1
        return columns - 1

    pinned = [False] * n
    for a, node in enumerate(part.alloc_node):
        if part.alloc_gpus[a] > 0 and not part.movable[a]:
            pinned[node] = True
    y = [var(1.0, 1.0 if pinned[i] else 0.0) for i in range(n)]
    bins = [[var() for _ in range(part.gpus[i])] for i in range(n)]
    gpu_terms: list[list[tuple[int, float]]] = [[(b, 1.0) for b in bins[i]] for i in range(n)]
    cpu_terms: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    mem_terms: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    bin_terms: list[list[list[tuple[int, float]]]] = [[[] for _ in bins[i]] for i in range(n)]
    fixed = [[0, 0, 0] for _ in range(n)]  # whole GPUs, CPUs, memory of immovable work
    current = [[0, 0, 0] for _ in range(n)]  # the same for the movable work where it is now
    for a, node in enumerate(part.alloc_node):
        g = part.alloc_gpus[a]
        whole, frac = g // _U, g % _U
        if g == 0 or not part.movable[a]:
            fixed[node][0] += whole
            fixed[node][1] += part.alloc_cpus[a]
            fixed[node][2] += part.alloc_memory[a]
            if frac:  # an immovable share still takes one of its node's GPU bins
                choice = [var() for _ in bins[node]]
                rows.append((choice, [1.0] * len(choice), 1.0, 1.0))
                for k, v in enumerate(choice):
                    bin_terms[node][k].append((v, float(frac)))
            continue
        current[node][0] += whole
        current[node][1] += part.alloc_cpus[a]
        current[node][2] += part.alloc_memory[a]
        eligible = [
            i
            for i in range(n)
            if (not part.gang[a] or part.domain[i] == part.domain[node])
            and part.gpus[i] >= whole + (1 if frac else 0)
        ]
        everything: list[int] = []
        for i in eligible:
            chosen = [var() for _ in bins[i]] if frac else [var()]
            everything.extend(chosen)
            rows.append(([*chosen, y[i]], [*([1.0] * len(chosen)), -1.0], -np.inf, 0.0))
            for v in chosen:
                if whole:
                    gpu_terms[i].append((v, float(whole)))
                cpu_terms[i].append((v, float(part.alloc_cpus[a])))
                mem_terms[i].append((v, float(part.alloc_memory[a])))
            if frac:
                for k, v in enumerate(chosen):
                    bin_terms[i][k].append((v, float(frac)))
        rows.append((everything, [1.0] * len(everything), 1.0, 1.0))
    for i in range(n):
        # capacity, never below what the node holds now (an over-committed node stays feasible)
        gpu_cap = max(part.gpus[i] - fixed[i][0], current[i][0])
        cpu_cap = max(part.cpus[i] - fixed[i][1], current[i][1])
        rows.append(([v for v, _ in gpu_terms[i]], [c for _, c in gpu_terms[i]], -np.inf, gpu_cap))
        rows.append(([v for v, _ in cpu_terms[i]], [c for _, c in cpu_terms[i]], -np.inf, cpu_cap))
        if part.memory[i] < UNBOUNDED:
            mem_cap = max(part.memory[i] - fixed[i][2], current[i][2])
            rows.append(
                ([v for v, _ in mem_terms[i]], [c for _, c in mem_terms[i]], -np.inf, mem_cap)
            )
        for k, b in enumerate(bins[i]):
            terms = bin_terms[i][k]
            rows.append(
                ([v for v, _ in terms] + [b], [c for _, c in terms] + [-float(_U)], -np.inf, 0.0)
            )
            rows.append(([b, y[i]], [1.0, -1.0], -np.inf, 0.0))
            if k:
                rows.append(([bins[i][k - 1], b], [-1.0, 1.0], -np.inf, 0.0))  # symmetry
    most = n if at_most is None else at_most
    rows.append((y, [1.0] * n, float(n - most), float(n - at_least)))  # occupied nodes
    r_idx, c_idx, vals, lo, hi = [], [], [], [], []
    for r, (cols, coefs, low, high) in enumerate(rows):
        r_idx.extend([r] * len(cols))
        c_idx.extend(cols)
        vals.extend(coefs)
        lo.append(low)
        hi.append(high)
    matrix = coo_matrix((vals, (r_idx, c_idx)), shape=(len(rows), columns)).tocsr()
    solution = milp(
        c=np.array(cost),
        constraints=LinearConstraint(matrix, np.array(lo), np.array(hi)),
        integrality=np.array(integrality),
        bounds=Bounds(np.array(lower), np.ones(columns)),
        options={"time_limit": part.options.exact_time_limit_s},
    )
    seconds = time.perf_counter() - started
    if solution.status == 0 and solution.x is not None:
        return n - round(float(np.sum(solution.x[y]))), "optimal", seconds
    if solution.status == 1:
        return None, "time_limit", seconds
    return None, "failed", seconds


@dataclass(frozen=True)
class _Outcome:
    index: int
    moves: tuple[tuple[int, int, int], ...]
    before: tuple[int, int]  # free, partial
    after: tuple[int, int]
    bound: int
    budgets: tuple[str, ...]
    seconds: float
    exact: tuple[int | None, str, float] | None


def _solve(part: _Partition) -> _Outcome:
    """Search one partition (the unit of work of a worker process)."""
    started = time.perf_counter()
    search = _Search(part)
    before = (search.free_nodes, search.partial)
    search.run()
    seconds = time.perf_counter() - started
    bound = _bound(part)
    exact: tuple[int | None, str, float] | None = None
    if part.options.exact:
        if len(part.node_ids) > part.options.exact_nodes:
            exact = (None, "too_large", 0.0)
        elif search.free_nodes >= bound:  # the bound proves the search optimal
            exact = (search.free_nodes, "bound", 0.0)
        else:
            exact = _exact(part, search.free_nodes, bound)
        if exact[1] == "time_limit":
            search.budgets.add("exact_time")
    return _Outcome(
        index=part.index,
        moves=tuple(search.moves),
        before=before,
        after=(search.free_nodes, search.partial),
        bound=bound,
        budgets=tuple(sorted(search.budgets)),
        seconds=seconds,
        exact=exact,
    )


# ------------------------------------------------------------------ Arrow in, outcomes out
#
# A partition crosses to another process or machine (``--engine spark``) as one
# Arrow row, and its outcome comes back as one. The search itself is ``_solve``,
# the same function the local process pool runs.

_SHAPE_TYPE = pa.struct(
    [(f.name, pa.string() if f.name == "group" else pa.int64()) for f in fields(_ShapeSpec)]
)
_LIST_TYPES = {str: pa.list_(pa.string()), int: pa.list_(pa.int64()), bool: pa.list_(pa.bool_())}
PARTITION_SCHEMA = pa.schema(
    [
        ("index", pa.int64()),
        ("gpu_model", pa.string()),
        ("node_ids", _LIST_TYPES[str]),
        ("gpus", _LIST_TYPES[int]),
        ("cpus", _LIST_TYPES[int]),
        ("memory", _LIST_TYPES[int]),
        ("domain", _LIST_TYPES[int]),
        ("block", _LIST_TYPES[int]),
        ("domains", pa.int64()),
        ("alloc_ids", _LIST_TYPES[str]),
        ("alloc_node", _LIST_TYPES[int]),
        ("alloc_gpus", _LIST_TYPES[int]),
        ("alloc_cpus", _LIST_TYPES[int]),
        ("alloc_memory", _LIST_TYPES[int]),
        ("alloc_memory_known", _LIST_TYPES[bool]),
        ("movable", _LIST_TYPES[bool]),
        ("gang", _LIST_TYPES[bool]),
        ("shapes", pa.list_(_SHAPE_TYPE)),
        ("options", pa.string()),  # CompactionOptions as JSON
    ]
)
OUTCOME_SCHEMA = pa.schema(
    [
        ("index", pa.int64()),
        ("move_alloc", _LIST_TYPES[int]),
        ("move_from", _LIST_TYPES[int]),
        ("move_to", _LIST_TYPES[int]),
        ("before_free", pa.int64()),
        ("before_partial", pa.int64()),
        ("after_free", pa.int64()),
        ("after_partial", pa.int64()),
        ("bound", pa.int64()),
        ("budgets", _LIST_TYPES[str]),
        ("seconds", pa.float64()),
        ("exact_free", pa.int64()),
        ("exact_status", pa.string()),
        ("exact_seconds", pa.float64()),
    ]
)


def partitions_table(parts: Sequence[_Partition]) -> pa.Table:
    """The partitions as Arrow rows (:data:`PARTITION_SCHEMA`)."""
    rows = []
    for part in parts:
        row = {f.name: getattr(part, f.name) for f in fields(part)}
        row["shapes"] = [asdict(s) for s in part.shapes]
        row["options"] = json.dumps(asdict(part.options))
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=PARTITION_SCHEMA)


def _partition_from_row(row: dict[str, Any]) -> _Partition:
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in row.items()}
    values["shapes"] = tuple(_ShapeSpec(**s) for s in row["shapes"])
    values["options"] = CompactionOptions(**json.loads(row["options"]))
    return _Partition(**values)


def solve_arrow(table: pa.Table) -> pa.Table:
    """Search the partitions of ``table`` (Arrow rows in, Arrow outcomes out)."""
    rows = []
    for row in table.select(PARTITION_SCHEMA.names).to_pylist():
        outcome = _solve(_partition_from_row(row))
        exact = outcome.exact or (None, None, None)
        rows.append(
            {
                "index": outcome.index,
                "move_alloc": [a for a, _, _ in outcome.moves],
                "move_from": [s for _, s, _ in outcome.moves],
                "move_to": [d for _, _, d in outcome.moves],
                "before_free": outcome.before[0],
                "before_partial": outcome.before[1],
                "after_free": outcome.after[0],
                "after_partial": outcome.after[1],
                "bound": outcome.bound,
                "budgets": list(outcome.budgets),
                "seconds": outcome.seconds,
                "exact_free": exact[0],
                "exact_status": exact[1],
                "exact_seconds": exact[2],
            }
        )
    return pa.Table.from_pylist(rows, schema=OUTCOME_SCHEMA)


def _outcomes_from_table(table: pa.Table, count: int) -> list[_Outcome]:
    """The outcomes of partitions 0..count-1, in partition order."""
    by_index: dict[int, _Outcome] = {}
    for row in table.to_pylist():
        exact = None
        if row["exact_status"] is not None:
            exact = (row["exact_free"], row["exact_status"], row["exact_seconds"])
        by_index[row["index"]] = _Outcome(
            index=row["index"],
            moves=tuple(zip(row["move_alloc"], row["move_from"], row["move_to"], strict=True)),
            before=(row["before_free"], row["before_partial"]),
            after=(row["after_free"], row["after_partial"]),
            bound=row["bound"],
            budgets=tuple(row["budgets"]),
            seconds=row["seconds"],
            exact=exact,
        )
    missing = [i for i in range(count) if i not in by_index]
    if missing:
        raise RuntimeError(f"the fan-out returned no outcome for partition(s) {missing[:5]}")
    return [by_index[i] for i in range(count)]


# Ships Arrow rows grouped by a key column to workers that apply a function; returns
# its output rows (fleetaudit.model.spark_store.SparkEngine.map_groups).
MapArrow = Callable[[pa.Table, str, Callable[[pa.Table], pa.Table], pa.Schema], pa.Table]


def _solve_until(parts: Sequence[_Partition], stop: float) -> list[_Outcome]:
    """Partitions in order, each stopped once the ledger so far passes ``stop`` GPUs;
    the partitions after that are left as they are (no search)."""
    outcomes: list[_Outcome] = []
    spent = 0
    for part in parts:
        left = stop - spent / _U
        options = replace(part.options, stop_after_gpus=left, rounds=part.options.rounds if left >= 0 else 0)
        outcome = _solve(replace(part, options=options))
        spent += sum(part.alloc_gpus[a] for a, _, _ in outcome.moves)
        outcomes.append(outcome)
    return outcomes


# ------------------------------------------------------------------ entry point


def _instances(
    nodes: pl.DataFrame, allocations: pl.DataFrame, at: datetime, shapes: Sequence[Shape]
) -> tuple[tuple[Shape, int], ...]:
    states: dict[float | None, pl.DataFrame] = {}
    out = []
    for shape in shapes:
        if shape.duration_s not in states:
            window = timedelta(seconds=shape.duration_s) if shape.duration_s else None
            states[shape.duration_s] = occupancy.node_state(nodes, allocations, at, window)
        out.append((shape, evaluate(states[shape.duration_s], shape).instances))
    return tuple(out)


def compact(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    at: datetime,
    shapes: Sequence[Shape] = (),
    options: CompactionOptions | None = None,
    map_arrow: MapArrow | None = None,
) -> CompactionResult:
    """Plan in-place compaction of the state at ``at`` (module doc).

    Args:
        nodes: the nodes frame.
        allocations: the allocations frame (at least those active at ``at``;
            later ones count for shapes with a duration).
        at: the instant t (naive = UTC).
        shapes: the shapes whose instances come first in the objective.
        options: budgets and migration costs (defaults: :class:`CompactionOptions`).
        map_arrow: run the partitions' searches there instead of in local processes
            (``--engine spark``): each partition goes as an Arrow row
            (:func:`partitions_table`) to :func:`solve_arrow`; the outcomes merge
            exactly as the local ones do.

    Returns:
        The ledger, before/after, bound, migration cost and the allocations
        with every moved one on its final node.

    Example:
        >>> from datetime import datetime
        >>> t = datetime(2026, 1, 1)
        >>> nodes = pl.DataFrame({"node_id": ["a", "b"], "gpu_model": ["H20"] * 2,
        ...     "gpus": [8, 8], "cpus": [64.0] * 2, "memory_gib": [None, None],
        ...     "switch_id": ["s", "s"], "health": ["healthy"] * 2},
        ...     schema_overrides={"memory_gib": pl.Float64})
        >>> allocations = pl.DataFrame({"alloc_id": ["x", "y"], "job_id": ["x", "y"],
        ...     "node_id": ["a", "b"], "gpus": [2.0, 4.0], "cpus": [8.0, 8.0],
        ...     "memory_gib": [None, None], "priority": ["high"] * 2,
        ...     "start_time": [t, t], "end_time": [None, None]},
        ...     schema_overrides={"memory_gib": pl.Float64, "end_time": pl.Datetime("us")})
        >>> result = compact(nodes, allocations, t)
        >>> [(m.alloc_id, m.source, m.destination) for m in result.moves]
        [('x', 'a', 'b')]
        >>> result.before.free_nodes, result.after.free_nodes, result.bound_free_nodes
        (0, 1, 1)
    """
    options = options or CompactionOptions()
    options.check()
    started = time.perf_counter()
    parts = _partitions(nodes, allocations, at, shapes, options)
    workers = options.jobs if sum(len(p.node_ids) for p in parts) >= _PROCESS_NODES else 1
    if map_arrow is not None and parts:
        shipped = map_arrow(partitions_table(parts), "index", solve_arrow, OUTCOME_SCHEMA)
        outcomes = _outcomes_from_table(shipped, len(parts))
    elif options.stop_after_gpus is not None and workers == 1:
        outcomes = _solve_until(parts, options.stop_after_gpus)
    else:
        outcomes = map_processes(_solve, parts, workers)
    moves: list[Move] = []
    results: list[PartitionResult] = []
    destination: dict[str, str] = {}
    for part, outcome in zip(parts, outcomes, strict=True):
        gpus_moved = 0.0
        for a, s, d in outcome.moves:
            gpus = part.alloc_gpus[a] / _U
            gpus_moved += gpus
            memory = part.alloc_memory[a] / _U if part.alloc_memory_known[a] else None
            moves.append(
                Move(
                    step=len(moves) + 1,
                    alloc_id=part.alloc_ids[a],
                    source=part.node_ids[s],
                    destination=part.node_ids[d],
                    gpus=gpus,
                    cpus=part.alloc_cpus[a] / _U,
                    memory_gib=memory,
                    partition=part.index,
                )
            )
            destination[part.alloc_ids[a]] = part.node_ids[d]
        exact = outcome.exact
        results.append(
            PartitionResult(
                index=part.index, gpu_model=part.gpu_model, nodes=len(part.node_ids),
                domains=part.domains, movable=sum(part.movable),
                before_free=outcome.before[0], before_partial=outcome.before[1],
                after_free=outcome.after[0], after_partial=outcome.after[1],
                bound_free=outcome.bound, moves=len(outcome.moves), gpus_moved=gpus_moved,
                budgets_hit=outcome.budgets, seconds=outcome.seconds,
                exact_free=None if exact is None else exact[0],
                exact_status=None if exact is None else exact[1],
                exact_seconds=None if exact is None else exact[2],
            )
        )  # fmt: skip
    moved = allocations
    if destination:
        mapping = pl.DataFrame(
            {"_alloc": list(destination), "_to": list(destination.values())},
            schema={"_alloc": pl.String, "_to": pl.String},
        )
        moved = (
            allocations.with_columns(pl.col("alloc_id").cast(pl.String).alias("_alloc"))
            .join(mapping, on="_alloc", how="left", maintain_order="left")
            .with_columns(pl.coalesce("_to", pl.col("node_id").cast(pl.String)).alias("node_id"))
            .drop("_alloc", "_to")
        )
    before_free = sum(p.before_free for p in results)
    after_free = sum(p.after_free for p in results)
    counted = shapes if options.count_instances else ()
    before = Snapshot(
        before_free,
        sum(p.before_partial for p in results),
        _instances(nodes, allocations, at, counted),
    )
    after = Snapshot(
        after_free, sum(p.after_partial for p in results), _instances(nodes, moved, at, counted)
    )
    freed = sum(
        part.gpus[i]
        for part, outcome in zip(parts, outcomes, strict=True)
        for i in _newly_free(part, outcome)
    )
    return CompactionResult(
        moves=tuple(moves),
        partitions=tuple(results),
        before=before,
        after=after,
        bound_free_nodes=sum(p.bound_free for p in results),
        migration=_migration(moves, freed, options),
        seconds=time.perf_counter() - started,
        allocations=moved,
    )


_PROCESS_NODES = 1000  # below this many nodes, starting workers costs more than it saves


def _newly_free(part: _Partition, outcome: _Outcome) -> list[int]:
    """Nodes of the partition free after the ledger that were occupied before it."""
    n = len(part.node_ids)
    before = [0] * n
    after = [0] * n
    where = list(part.alloc_node)
    for a, node in enumerate(where):
        if part.alloc_gpus[a] > 0:
            before[node] += 1
    for a, _, d in outcome.moves:
        where[a] = d
    for a, node in enumerate(where):
        if part.alloc_gpus[a] > 0:
            after[node] += 1
    return [i for i in range(n) if before[i] and not after[i]]


def _migration(moves: Sequence[Move], freed_gpus: int, options: CompactionOptions) -> Migration:
    gpus_moved = sum(m.gpus for m in moves)
    state_gib = options.state_gib_per_gpu * gpus_moved
    transfer_s = state_gib * _GIB_BITS / options.bandwidth_gbps
    pause_gpu_s = sum(
        m.gpus * (options.state_gib_per_gpu * m.gpus * _GIB_BITS / options.bandwidth_gbps + options.warmup_s)
        for m in moves
    )  # fmt: skip
    return Migration(
        moves=len(moves),
        gpus_moved=gpus_moved,
        state_gib=state_gib,
        transfer_s=transfer_s,
        pause_gpu_hours=pause_gpu_s / 3600,
        freed_gpus=freed_gpus,
        payback_s=pause_gpu_s / freed_gpus if freed_gpus else None,
    )
