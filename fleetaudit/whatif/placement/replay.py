"""Placement what-if by time: replay a window's arrivals and departures (see :func:`simulate_replay`)."""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from fleetaudit.core.errors import UsageError
from fleetaudit.core.gcpause import paused_gc
from fleetaudit.core.options import PLACEMENT_QUEUES, QUEUE_DISCIPLINES
from fleetaudit.core.parallel import map_processes as _map_runs
from fleetaudit.core.times import epoch_us, from_epoch_us
from fleetaudit.model.capacity import (
    FAILING_STATES,
    Health,
    first_fit_decreasing,
    health_pieces,
    optional_column,
)
from fleetaudit.whatif import victims
from fleetaudit.whatif.placement.fleet import _U, _Fleet, _prepare_fleet, _row_ids
from fleetaudit.whatif.placement.policies import NO_DRAW, NONE_BLOCKED, POLICIES, _Run
from fleetaudit.whatif.placement.record import QueueFigures, arrivals, as_array, wait_figures
from fleetaudit.whatif.placement.workload import (
    LOCALITIES,
    PlacementOptions,
    _prepare_workload,
    _Workload,
)

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

QUEUES = PLACEMENT_QUEUES
"""The queue disciplines of the by-time replay (see :class:`Replay`)."""
DISCIPLINES = QUEUE_DISCIPLINES
"""The disciplines named after the schedulers operators run (the others are the plain queues)."""
HOLDS = ("record", "none")
_NEVER = np.iinfo(np.int64).max
_SEQ = 1 << 40  # a departure's key: its time x this + its sequence number
_RECENT_SLOTS = 4096  # slots the reservation's walk takes unmerged (Replay._slots_by_end)
_PREEMPT_NODES = 8  # nodes whose victims a single pod's preemption costs exactly
# Kueue's defaults: waitForPodsReady's timeout, and the requeue backoff (base, doubling, most)
_KUEUE_READY_US = 300 * 1_000_000
_KUEUE_BACKOFF_US = 60 * 1_000_000
_KUEUE_BACKOFF_MAX_US = 3600 * 1_000_000
_REPLAY_CURVE: dict[str, PolarsDataType] = {
    "instant": pl.Datetime("us"), "instant_pct": pl.Float64, "allocated_pct": pl.Float64,
    "fragmented_pct": pl.Float64, "queued": pl.Int64, "started": pl.Int64, "failed": pl.Int64,
}  # fmt: skip
_VIEW_CATALOG: dict[str, PolarsDataType] = {
    "alloc_id": pl.String, "job_id": pl.String, "gpus": pl.Float64, "cpus": pl.Float64,
    "memory_gib": pl.Float64, "start_time": pl.Datetime("us"), "end_time": pl.Datetime("us"),
}  # fmt: skip


@dataclass(frozen=True)
class ReplayResult:
    """One by-time replay (see :func:`simulate_replay`).

    Attributes:
        curve: instant (Datetime µs), instant_pct (0..100 of the window),
            allocated_pct, fragmented_pct (Float64), queued, started, failed
            (Int64); one row per ``step_pct``% of the window, 0% and 100%
            included; each row is the state before that instant's events.
        allocations: the replayed placement, one row per pod, in start order,
            after the recorded allocations the replay started from (``recorded``
            true): alloc_id, job_id, request_id (null for recorded rows),
            node_id, gpus, gpu_index, cpus, memory_gib, start_time (the actual
            start), end_time (the departure; null = runs past the window with no
            known duration), recorded.
        waits: one row per request that arrived, in arrival order: request_id,
            submit_time, start_time (null = never started), wait_s (Float64).
        gpus: the fleet's GPUs (healthy nodes).
        arrived, started: requests that arrived and started in the window.
        failed: requests still waiting at the end, plus the rejected ones.
        rejected: requests that fit no node even of an empty fleet; they fail
            on arrival and never join the queue.
        never: the request ids of those (in arrival order).
        waiting: requests still waiting at the end (held ones included).
        held: requests still held at the end (see :class:`Replay`'s ``hold``).
        holds: request_id -> the instant (epoch µs) each held request was held
            until (the window's end or later: never released in it); a later
            replay given them holds the same requests (``hold=result.holds``).
        preempt: whether high-priority requests could evict low-priority work.
        preemptions: one row per eviction: request_id (the victim), at, by (the
            request it made room for), lost_gpu_hours.
        lost_gpu_hours: the work the evictions lost, in GPU-hours.
        reservations: reservations made (``slurm-backfill``).
    """

    policy: str
    seed: int
    queue: str
    empty: bool
    start: datetime
    end: datetime
    curve: pl.DataFrame
    allocations: pl.DataFrame
    waits: pl.DataFrame
    gpus: int
    arrived: int
    started: int
    failed: int
    rejected: int
    never: tuple[str, ...] = ()
    waiting: int = 0
    held: int = 0
    holds: Mapping[str, int] = field(default_factory=dict)
    preempt: bool = False
    preemptions: pl.DataFrame = field(default_factory=pl.DataFrame)
    lost_gpu_hours: float = 0.0
    reservations: int = 0

    def figures(self) -> QueueFigures:
        """The replay's :class:`~fleetaudit.whatif.placement.record.QueueFigures`."""
        p50, p90 = wait_figures(self.waits["wait_s"])
        return QueueFigures(
            arrived=self.arrived,
            started=self.started,
            waiting=self.waiting,
            never=self.rejected,
            wait_p50_s=p50,
            wait_p90_s=p90,
            instants=tuple(self.curve["instant"].to_list()),
            allocated_pct=tuple(self.curve["allocated_pct"].to_list()),
        )


@dataclass
class _Recorded:
    """A recorded allocation occupying the replay's fleet, and what it took."""

    alloc_id: str
    job_id: str | None
    node: int
    gpus: list[int]
    units: list[int]
    cpu: int
    memory: int
    start_us: int
    end_us: int  # _NEVER = no end


def _occupy_recorded(
    run: _Run, allocations: pl.DataFrame, start_us: int, end_us: int
) -> list[_Recorded]:
    """Put the allocations active at ``start_us`` on the run's state.

    Per node, in alloc_id order, whole parts take the lowest fully free GPUs;
    then the fractional parts, largest first, go first-fit onto the GPUs in
    index order (first-fit-decreasing). Capacity the record oversubscribes is
    clamped (a part that finds no room takes none); CPUs and memory are
    subtracted as recorded (they may go negative, and then nothing more fits).
    """
    fleet, st = run.fleet, run.state
    index = {n: i for i, n in enumerate(fleet.node_ids)}
    start = pl.col("start_time").dt.epoch("us")
    end = pl.col("end_time").dt.epoch("us")
    frame = (
        allocations.with_columns(
            optional_column(allocations, "job_id", pl.String, None).alias("job_id"),
            optional_column(allocations, "memory_gib", pl.Float64, None).alias("memory_gib"),
        )
        .filter((start <= start_us) & (end.is_null() | (end > start_us)))
        .select(
            pl.col("alloc_id").cast(pl.String),
            pl.col("job_id"),
            pl.col("node_id").cast(pl.String),
            (pl.col("gpus").cast(pl.Float64).fill_null(0.0) * _U).round().cast(pl.Int64),
            (pl.col("cpus").cast(pl.Float64).fill_null(0.0) * _U).round().cast(pl.Int64),
            (pl.col("memory_gib").fill_null(0.0) * _U).round().cast(pl.Int64),
            start.alias("start_us"),
            end.fill_null(_NEVER).alias("end_us"),
        )
        .sort("node_id", "alloc_id")
    )
    records: list[_Recorded] = []
    fractional: list[tuple[int, int, int]] = []  # node, -frac, record
    for alloc_id, job_id, node_id, gpus, cpus, memory, a_start, a_end in frame.iter_rows():
        n = index.get(node_id)
        if n is None:
            continue
        record = _Recorded(alloc_id, job_id, n, [], [], cpus, memory, a_start, a_end)
        whole, frac = divmod(gpus, _U)
        if whole:
            taken = np.flatnonzero(st.free[n] == _U)[:whole].tolist()
            st.free[n, taken] = 0
            record.gpus += taken
            record.units += [_U] * len(taken)
        if frac:
            fractional.append((n, -frac, len(records)))
        st.cpu[n] -= cpus
        st.memory[n] -= memory
        records.append(record)
    for n, minus_frac, i in sorted(fractional):
        fits = np.flatnonzero(st.free[n] >= -minus_frac)
        if len(fits):
            gpu = int(fits[0])
            st.free[n, gpu] += minus_frac
            records[i].gpus.append(gpu)
            records[i].units.append(-minus_frac)
    for record in records:
        st.group_used[fleet.group[record.node]] += sum(record.units)
    run.resync()
    return records


def _release_recorded(run: _Run, record: _Recorded) -> None:
    st = run.state
    n = record.node
    if record.gpus:
        np.add.at(st.free[n], record.gpus, record.units)
    st.cpu[n] += record.cpu
    st.memory[n] += record.memory
    st.group_used[run.fleet.group[n]] -= sum(record.units)
    run._changed(n)


def _replay_classes(
    workload: _Workload, low: np.ndarray | None = None, limit: np.ndarray | None = None
) -> np.ndarray:
    """Requests that fit exactly the same states share a class (and, given ``low``, the
    same priority; given ``limit``, the same limit, which a reservation reads)."""
    w = workload
    if not len(w.request_ids):
        return np.zeros(0, dtype=np.int64)
    columns = [w.share, w.count, w.cpu, w.memory, w.allowed, w.pods, w.locality]
    if low is not None:
        columns.append(low.astype(np.int64))
    if limit is not None:
        columns.append(limit)
    return _row_ids(np.column_stack(columns))


def _model_speeds(requests: pl.DataFrame, models: list[str]) -> dict[int, dict[int, float]]:
    """Per request (by row), its speed on the models its ``model_speed`` names
    ("MODEL=SPEED|MODEL=SPEED", SPEED in (0, 1]: the share of its recorded speed it
    runs at there); models the fleet lacks are left out. Empty without the column.

    >>> frame = pl.DataFrame({"model_speed": [None, "B=0.8", "C=0.5|A=1"]})
    >>> _model_speeds(frame, ["A", "B"])
    {1: {1: 0.8}, 2: {0: 1.0}}
    """
    if "model_speed" not in requests.columns:
        return {}
    index = {m: i for i, m in enumerate(models)}
    out: dict[int, dict[int, float]] = {}
    parsed: dict[str, dict[int, float]] = {}
    for r, text in enumerate(requests["model_speed"].cast(pl.String).to_list()):
        if not text:
            continue
        if text not in parsed:
            speeds: dict[int, float] = {}
            for part in text.split("|"):
                model, _, speed = part.partition("=")
                if model.strip() in index:
                    speeds[index[model.strip()]] = float(speed)
            parsed[text] = speeds
        if parsed[text]:
            out[r] = parsed[text]
    return out


def _check_replay(options: PlacementOptions, start: datetime, end: datetime, queue: str) -> None:
    if options.policy not in POLICIES:
        raise UsageError(f"unknown policy {options.policy!r}: use one of {', '.join(POLICIES)}")
    if queue not in QUEUES:
        raise UsageError(f"unknown queue {queue!r}: use one of {', '.join(QUEUES)}")
    if not epoch_us(end) > epoch_us(start):
        raise UsageError("the replay window is empty: its end must come after its start")
    if not options.step_pct > 0:
        raise UsageError("the step percentage must be above 0")


def curve_marks(step_pct: float) -> list[float]:
    """The replay curve's instants, in % of the window: every ``step_pct``%, both ends.

    >>> curve_marks(40.0)
    [0.0, 40.0, 80.0, 100.0]
    """
    steps = math.floor(100 / step_pct + 1e-9)
    marks = [min(step_pct * i, 100.0) for i in range(steps + 1)]
    if marks[-1] < 100.0:
        marks.append(100.0)
    return marks


def _pod_name(rid: str, single: bool, pod: int) -> str:
    """A replayed pod's alloc_id: ``replay/<request>``, or ``replay/<request>/<pod>`` in a gang."""
    return f"replay/{rid}" if single else f"replay/{rid}/{pod}"


class ReplayView:
    """The by-time replay's state at a tick, handed to the ``on_tick`` hook of
    :func:`simulate_replay` (compaction over time reads and moves work with it).

    Only :meth:`allocations`, :meth:`move`, :attr:`queued` and :meth:`gpu_use` are
    meant for the hook; moves go through the engine's own per-GPU state.
    """

    def __init__(self, run: _Run, records: list[_Recorded], groups: list[Any],
                 group_start: list[int], group_end: list[int]) -> None:  # fmt: skip
        self._run, self._records, self._groups = run, records, groups
        self._group_start, self._group_end = group_start, group_end
        # told of each move: (record or group, pod (-1: a record), source, node, GPUs)
        self._hook: Callable[[int, int, int, int, list[int]], None] | None = None
        self.queued = 0
        self.freed: list[int] = []
        self._index: dict[str, tuple[int, int]] | None = None
        self._seen = 0  # groups indexed by _where
        self._node_index = {n: i for i, n in enumerate(run.fleet.node_ids)}
        # ticks come in time order: what ended before one tick stays ended
        self._groups_seen = 0  # groups started before the last allocations() call
        # Every row the view ever listed: the records, then each started group's pods
        # in start order; constant columns, and where each row runs now (moves
        # change it). allocations() keeps the rows live at its instant.
        self._catalog = pl.DataFrame(schema=_VIEW_CATALOG)
        self._row_begin = np.zeros(0, dtype=np.int64)  # records: start; pods: no bound
        self._row_end = np.zeros(0, dtype=np.int64)  # _NEVER = no end
        self._row_node = np.zeros(0, dtype=np.int64)
        self._group_row: list[int] = []  # group -> its first row
        self._node_names = pl.Series("node_id", run.fleet.node_ids, dtype=pl.String)
        self._catalog_rows(
            [(rec.alloc_id, rec.job_id or rec.alloc_id, sum(rec.units) / _U, rec.cpu / _U,
              rec.memory / _U, rec.start_us, rec.end_us, rec.node) for rec in records],
            records=True,
        )  # fmt: skip
        self._t: int | None = None  # the instant of the last allocations() call
        # Per node, the records and pod groups that hold work on it (entries that
        # ended or moved away are dropped when next read), so that a move or a
        # count reads the nodes it concerns instead of all the live work.
        self._node_records: dict[int, set[int]] = {}
        for i, rec in enumerate(records):
            self._node_records.setdefault(rec.node, set()).add(i)
        self._node_groups: dict[int, set[int]] = {}
        self._nodes_seen = 0  # groups in _node_groups
        # gpu_use: per node, the state version its count was taken at, and the count
        # of a node holding shares (the others read the per-GPU state)
        self._use_version = np.zeros(len(run.fleet.node_ids), dtype=np.int64)
        self._share_used: dict[int, int] = {}
        self.out_of_service: np.ndarray | None = None  # per (node, GPU): an outage holds it

    def _where(self) -> dict[str, tuple[int, int]]:
        """alloc_id -> (record index, -1) or (group index, pod position)."""
        if self._index is None:
            self._index = {rec.alloc_id: (i, -1) for i, rec in enumerate(self._records)}
        w = self._run.workload
        for g in range(self._seen, len(self._groups)):
            r, pods = self._groups[g]
            rid = w.request_ids[r]
            for k, (pod, _, _) in enumerate(pods):
                name = _pod_name(rid, w.pods[r] == 1, pod)
                self._index[name] = (g, k)
        self._seen = len(self._groups)
        return self._index

    def _catalog_rows(self, rows: list[tuple[Any, ...]], records: bool = False) -> None:
        """Append rows (alloc_id, job_id, gpus, cpus, memory_gib, begin, end, node); a
        record is live from its begin, a pod from its start on (the view lists it)."""
        if not rows:
            return
        ids, jobs, gpus, cpus, memory, begin, end, node = zip(*rows, strict=True)
        end_us = np.array(end, dtype=np.int64)
        part = pl.DataFrame(
            {"alloc_id": ids, "job_id": jobs, "gpus": gpus, "cpus": cpus, "memory_gib": memory,
             "start_time": begin, "end_time": np.where(end_us == _NEVER, 0, end_us)},
            schema={"alloc_id": pl.String, "job_id": pl.String, "gpus": pl.Float64,
                    "cpus": pl.Float64, "memory_gib": pl.Float64, "start_time": pl.Int64,
                    "end_time": pl.Int64},
        ).with_columns(
            pl.col("start_time").cast(pl.Datetime("us")),
            pl.when(pl.Series(end_us != _NEVER)).then(pl.col("end_time"))
            .cast(pl.Datetime("us")).alias("end_time"),
        )  # fmt: skip
        self._catalog = pl.concat([self._catalog, part], rechunk=False)
        if self._catalog.n_chunks() > 32:
            self._catalog = self._catalog.rechunk()
        low = np.array(begin, dtype=np.int64) if records else np.full(len(rows), -_NEVER)
        self._row_begin = np.concatenate([self._row_begin, low])
        self._row_end = np.concatenate([self._row_end, end_us])
        self._row_node = np.concatenate([self._row_node, np.array(node, dtype=np.int64)])

    def allocations(self, t_us: int) -> pl.DataFrame:
        """The work active at ``t_us`` as an allocations frame (alloc_id, job_id,
        node_id, gpus, cpus, memory_gib, start_time, end_time, priority);
        replayed pods are ``replay/<request>[/<pod>]`` of job ``<request>``."""
        w = self._run.workload
        rows: list[tuple[Any, ...]] = []
        for g in range(len(self._group_row), len(self._groups)):
            r, pods = self._groups[g]
            self._group_row.append(len(self._row_end) + len(rows))
            begin, end = self._group_start[g], self._group_end[g]
            rid = w.request_ids[r]
            for pod, n, _ in pods:
                name = _pod_name(rid, w.pods[r] == 1, pod)
                rows.append((name, rid, int(w.share[r]) * int(w.count[r]) / _U,
                             int(w.cpu[r]) / _U, int(w.memory[r]) / _U, begin, end, n))  # fmt: skip
        self._catalog_rows(rows)
        self._t = t_us
        self._groups_seen = len(self._groups)
        live = (self._row_begin <= t_us) & (self._row_end > t_us)
        return (
            self._catalog.filter(pl.Series(live))
            .with_columns(self._node_names.gather(self._row_node[live]))
            .select("alloc_id", "job_id", "node_id", "gpus", "cpus", "memory_gib", "start_time",
                    "end_time", pl.lit("high").alias("priority"))
        )  # fmt: skip

    def _live_record(self, i: int) -> bool:
        """Whether record i is live work (as :meth:`allocations` last pruned them)."""
        return self._t is None or self._records[i].end_us > self._t

    def _live_group(self, g: int) -> bool:
        """Whether pod group g is live work (as :meth:`allocations` last pruned them,
        and every group started since)."""
        if g >= self._groups_seen or self._t is None:
            return True
        return self._group_end[g] > self._t

    def _record_ended(self, i: int) -> None:
        """Record i ended early (an outage ended it at its end_us): its row ends there."""
        self._row_end[i] = self._records[i].end_us

    def _ended(self, g: int, t: int) -> None:
        """Pod group g was evicted (or an outage ended it) at t: its rows end there."""
        if g < len(self._group_row):
            first = self._group_row[g]
            self._row_end[first : first + len(self._groups[g][1])] = t

    def _on_node(self, d: int) -> tuple[list[int], list[int]]:
        """The live records and pod groups holding work on node d, each ascending."""
        groups = self._groups
        for g in range(self._nodes_seen, len(groups)):
            for _, n, _ in groups[g][1]:
                self._node_groups.setdefault(n, set()).add(g)
        self._nodes_seen = len(groups)
        recs: list[int] = []
        mine = self._node_records.get(d)
        if mine:
            recs = sorted(i for i in mine if self._records[i].node == d and self._live_record(i))
            mine.intersection_update(recs)
        held: list[int] = []
        mine = self._node_groups.get(d)
        if mine:
            held = sorted(
                g for g in mine
                if self._live_group(g) and any(n == d for _, n, _ in groups[g][1])
            )  # fmt: skip
            mine.intersection_update(held)
        return recs, held

    def gpu_use(self) -> tuple[int, int]:
        """(free nodes, partially occupied nodes) among the healthy nodes with GPUs."""
        fleet, st, w = self._run.fleet, self._run.state, self._run.workload
        # GPUs in use as the nodes' occupancy counts them: whole GPUs, plus the GPUs
        # the node's shares fill when packed first-fit-decreasing. A node's work
        # changes only with its state's version (a start, a departure or a move
        # refreshes the node), so only the nodes refreshed since the last count are
        # read again.
        changed = np.flatnonzero(st.version != self._use_version)
        share_used = self._share_used
        for n in changed.tolist():
            recs, held = self._on_node(n)
            shares: list[int] = []
            whole = 0
            for i in recs:
                for units in self._records[i].units:
                    if units < _U:
                        shares.append(units)
                    else:
                        whole += 1
            for g in held:
                r, pods = self._groups[g]
                share, count = int(w.share[r]), int(w.count[r])
                if not count:
                    continue
                for _, m, used_gpus in pods:
                    if m != n:
                        continue
                    if share < _U:
                        shares.append(share)
                    else:
                        whole += len(used_gpus)
            if shares:
                share_used[n] = whole + len(first_fit_decreasing(shares))
            else:
                share_used.pop(n, None)
        self._use_version[changed] = st.version[changed]
        used = fleet.gpus - (st.free == _U).sum(axis=1)  # GPUs holding anything
        if share_used:
            # share-holding GPUs as packed, not as laid out
            at = np.fromiter(share_used, dtype=np.int64, count=len(share_used))
            used[at] = np.fromiter(share_used.values(), dtype=np.int64, count=len(share_used))
        has = fleet.gpus > 0
        free = has & (used == 0)
        partial = has & (used > 0) & (used < fleet.gpus)
        return int(free.sum()), int(partial.sum())

    def _repack_shares(self, d: int) -> None:
        """Lay node d's shares out first-fit-decreasing on the GPUs no whole
        allocation holds (the occupancy's packing), updating each holder's GPU. A node
        with a GPU out of service keeps its layout."""
        run, st = self._run, self._run.state
        if self.out_of_service is not None and self.out_of_service[d].any():
            return
        w = run.workload
        holders: list[tuple[int, _Recorded | int, int]] = []  # (units, holder, position)
        whole: set[int] = set()
        recs, held = self._on_node(d)
        for i in recs:
            rec = self._records[i]
            for j, (gpu, units) in enumerate(zip(rec.gpus, rec.units, strict=True)):
                if units >= _U:
                    whole.add(gpu)
                else:
                    holders.append((units, rec, j))
        for g in held:
            r, pods = self._groups[g]
            for k, (_, n, used) in enumerate(pods):
                if n != d or not used:
                    continue
                if int(w.share[r]) >= _U:
                    whole.update(used)
                else:
                    holders.append((int(w.share[r]), g, k))
        if not holders:
            return
        width = st.free.shape[1]
        gpus = [x for x in range(int(run.fleet.gpus[d])) if x not in whole]
        left = dict.fromkeys(gpus, _U)
        placed: list[tuple[int, _Recorded | int, int, int]] = []
        for units, holder, pos in sorted(holders, key=lambda h: -h[0]):
            gpu = next((x for x in gpus if left[x] >= units), -1)
            if gpu < 0:
                return  # cannot happen for a layout that held them; keep it as it is
            left[gpu] -= units
            placed.append((units, holder, pos, gpu))
        for _units, holder, pos, gpu in placed:
            if isinstance(holder, _Recorded):
                holder.gpus[pos] = gpu
            else:
                r, pods = self._groups[holder]
                pods = list(pods)
                pod, n, _ = pods[pos]
                pods[pos] = (pod, n, [gpu])
                self._groups[holder] = (r, pods)
        row = np.zeros(width, dtype=np.int64)
        for x in gpus:
            row[x] = left[x]
        st.free[d] = row
        run._changed(d)

    def move(self, alloc_id: str, node_id: str) -> bool:
        """Move active work to ``node_id``, make-before-break on the engine's GPUs.

        False (and nothing changed) when the destination's GPUs, CPUs or memory
        cannot take it while the source still holds it.
        """
        run, fleet, st = self._run, self._run.fleet, self._run.state
        where = self._where().get(alloc_id)
        d = self._node_index.get(node_id, -1)
        if where is None or d < 0:
            return False
        i, k = where
        self._repack_shares(d)
        if k < 0:
            rec = self._records[i]
            if d == rec.node:
                return False
            whole = [u for u in rec.units if u == _U]
            frac = [u for u in rec.units if u < _U]
            row = st.free[d]
            full = np.flatnonzero(row == _U)
            if len(full) < len(whole) or st.cpu[d] < rec.cpu or st.memory[d] < rec.memory:
                return False
            taken = full[: len(whole)].tolist()
            if frac:
                rest = row.copy()
                rest[taken] = 0
                fits = np.flatnonzero(rest >= frac[0])
                if not len(fits):
                    return False
                taken.append(int(fits[0]))
            units = [_U] * len(whole) + frac
            np.subtract.at(st.free[d], taken, units)
            st.cpu[d] -= rec.cpu
            st.memory[d] -= rec.memory
            st.group_used[fleet.group[d]] += sum(units)
            run._changed(d)
            _release_recorded(run, rec)
            self.freed.append(rec.node)
            source = rec.node
            rec.node, rec.gpus, rec.units = d, taken, units
            self._node_records.setdefault(d, set()).add(i)
            self._row_node[i] = d
            if self._hook is not None:
                self._hook(i, -1, source, d, taken)
            return True
        r, pods = self._groups[i]
        pod, n, used = pods[k]
        if d == n or not run._feasible(r, None, np.array([d], dtype=np.int64))[d]:
            return False
        new_used = run._apply(r, d, -1)
        run._undo(r, n, used)
        self.freed.append(n)
        pods = list(pods)
        pods[k] = (pod, d, new_used)
        self._groups[i] = (r, pods)
        if i < self._nodes_seen:
            self._node_groups.setdefault(d, set()).add(i)
        if i < len(self._group_row):
            self._row_node[self._group_row[i] + k] = d
        if self._hook is not None:
            self._hook(i, k, n, d, new_used)
        return True


class Replay:
    """One by-time replay (see :func:`simulate_replay`): its state and its steps.

    The constructor prepares the fleet, the window's workload and the recorded
    state at ``start``; :meth:`run` then plays the events in time order (each
    instant's departures (:meth:`depart`), then the queue's retry
    (:meth:`retry`), then the requests whose hold ends, then its arrivals
    (:meth:`arrive`)) and returns the :class:`ReplayResult`. A replay runs once.

    The queue disciplines (``queue``, see :data:`QUEUES` and docs/placement.md):

    - ``kubernetes``: waiting requests in priority order, then by age (the time
      they became ready); any that fits starts, in that order: none blocks another.
    - ``kueue-best-effort-fifo`` / ``kueue-strict-fifo``: Kueue's two strategies.
      A request is first admitted against the quota of its GPU model (the model's
      healthy GPUs, one ClusterQueue over the fleet), in priority then age order;
      strict: the first one the quota cannot admit blocks those behind it;
      best effort: it does not. An admitted request holds its quota while it waits
      for nodes (the reservation that keeps the fleet from draining behind it),
      and is placed as under ``kubernetes``.
    - ``slurm-backfill``: priority then age; the first waiting request that cannot
      start gets a reservation: the earliest instant, by the running work's limits,
      at which it fits, and the nodes it fits on then. Another request may start
      on those nodes only if its limit ends it by then (EASY backfill).
    - ``fifo`` and ``backfill``: the plain queues, by arrival alone, without
      priorities or reservations (fifo: the head blocks everyone behind it).

    With ``preempt`` (the named disciplines; default: when the arriving requests
    hold both priorities), a high-priority request that cannot start evicts
    low-priority work that the replay started (:mod:`fleetaudit.whatif.victims`:
    least lost work first); the victim keeps the work up to its last checkpoint
    and waits again in its place in the queue.

    ``hold``: ``record`` holds a request that finds room when it arrives until its
    recorded start (its recorded wait was not for capacity); a mapping
    (request_id -> µs) holds the requests named until then (the holds a
    baseline decided, :attr:`ReplayResult.holds`); None holds nothing.

    ``precheck`` (default on): at a departure, a waiting request is tried only
    where the nodes freed at that instant could now host it (see :meth:`retry`);
    off, every waiting shape (fifo: the head) is tried everywhere, the plain
    reference the pre-check must give the same results as.

    ``memo`` (default on, with the pre-check): within one retry pass, a pod shape
    that no freed node can take is not tried again (the pass only takes room), a
    waiting request that cannot start on a freed node is skipped before the
    policy runs, and a single pod is checked and chosen on the freed nodes only.
    Off: the engine as it was before, which the tests compare it to.

    ``index`` (default on, all queues but fifo, with the memo): the same decisions
    as the memo, found with arrays over the replay classes instead of one check per
    waiting shape: a retry pass checks every waiting class against the freed nodes
    at once, walks the classes that fit in queue order, and after each start checks
    the rest again at once (a start only takes room); an arrival whose class
    already waits, and failed everywhere since the last room the queue's passes did
    not see, queues without a try (see :meth:`enqueue`). Off: the memo's pass,
    which the tests compare it to.
    """

    def __init__(
        self,
        nodes: pl.DataFrame,
        allocations: pl.DataFrame,
        requests: pl.DataFrame,
        options: PlacementOptions,
        start: datetime,
        end: datetime,
        empty: bool,
        queue: str = "fifo",
        *,
        prefer: Mapping[str, str] | None = None,
        hold: str | Mapping[str, int] | None = None,
        preempt: bool | None = None,
        fragmentation: bool = True,
        precheck: bool = True,
        memo: bool = True,
        index: bool = True,
        health: Health | None = None,
    ) -> None:
        _check_replay(options, start, end, queue)
        if isinstance(hold, str) and hold not in HOLDS:
            raise UsageError(f"unknown hold {hold!r}: use one of {', '.join(HOLDS)}")
        fleet = _prepare_fleet(nodes)
        if fleet.total_gpus == 0:
            raise UsageError("the fleet has no healthy GPUs to replay onto")
        frame = requests.sort("submit_time", "request_id", nulls_last=True, maintain_order=True)
        if "trace_order" in frame.columns:
            frame = frame.drop("trace_order")
        start_us, end_us = epoch_us(start), epoch_us(end)
        # The requests submitted in the window arrive at their submit time; those
        # already waiting at its start join the queue then. Only they make the
        # workload (in the same order), while every request weighs the
        # fragmentation measure.
        window = frame.filter(arrivals(frame, start, end))
        submit = as_array(window["submit_time"].cast(pl.Datetime("us")), _NEVER)
        # By time, the measure weighs shapes by the GPUs they ask for: requests without
        # GPUs (most of a serving fleet's) would otherwise make every idle GPU a fragment.
        workload = _prepare_workload(
            window, fleet, replace(options, frag_weight="gpus"), weigh=frame
        )
        limit = as_array(optional_column(window, "duration_s", pl.Float64, None), -1)
        if "run_s" in window.columns:
            recorded_run = as_array(window["run_s"].cast(pl.Float64), -1)
            run_us = np.where(recorded_run >= 0, recorded_run, limit)
            limit = np.where(limit >= 0, limit, recorded_run)
        else:
            run_us = limit
        self.limit = limit.astype(np.int64)  # what the scheduler expects: -1 unknown
        self.checkpoint = np.maximum(
            as_array(optional_column(window, "checkpoint_s", pl.Float64, None), 0), 0
        )
        # A request's speed on some models (``model_speed``: "MODEL=0.8|..."), relative
        # to its recorded run: there it runs 1/speed times as long (a port to another
        # accelerator). Its run left is kept in recorded time.
        self.speeds: dict[int, dict[int, float]] = _model_speeds(window, fleet.models)
        self.group_speed: list[float] = []
        # When the arrivals' record holds no start at all, it says nothing of starts, and
        # nothing is held (-1); else a request it never started is held for good (_NEVER).
        began = optional_column(window, "start_time", pl.Datetime("us"), None)
        self.recorded_start = (
            as_array(began, _NEVER) if began.is_not_null().any()
            else np.full(len(submit), -1, dtype=np.int64)
        )  # fmt: skip
        priority = optional_column(window, "priority", pl.String, None)
        self.low = (priority == "low").fill_null(False).to_numpy().astype(bool)
        self.options, self.queue, self.empty = options, queue, empty
        self.fragmentation = fragmentation  # sample the curve's fragmentation (NaN when off)
        self.start, self.end = start, end
        self.precheck, self.memo = precheck, memo and precheck
        self.fleet, self.workload = fleet, workload
        self.start_us, self.end_us = start_us, end_us
        self.submit = submit
        self.arrive_at = np.maximum(submit, start_us)
        self.remaining_l: list[int] = run_us.astype(np.int64).tolist()  # run left; -1: no end
        self.arriving = np.arange(len(submit))

        self.named = queue in DISCIPLINES
        self.kueue = queue.startswith("kueue-")
        self.strict = queue == "kueue-strict-fifo"
        self.reserving = queue == "slurm-backfill"
        both = bool(self.low.any()) and bool((~self.low).any())
        self.preempt = self.named and (both if preempt is None else preempt)
        self.classes = classes = _replay_classes(
            workload, self.low if self.named else None, self.limit if self.reserving else None
        )

        self.engine = run = _Run(fleet, workload, options.policy, options.seed)
        run.narrow = self.memo
        if self.preempt:
            run.track_preemptible(self.low)
        # requests whose pods are equal (what fits one pod fits the other)
        self.pod_shape = (
            _row_ids(np.column_stack([workload.share, workload.count, workload.cpu,
                                      workload.memory, workload.allowed]))
            if len(classes) else np.zeros(0, dtype=np.int64)
        )  # fmt: skip
        # The departures, in time order: a heap of time x _SEQ + seq (one int: a heap of
        # ints pops in a third of the time of one of tuples), and by seq what leaves
        # (>= 0 pod group, < 0 record).
        self.heap: list[int] = []
        self.leaving: dict[int, int] = {}
        self.records: list[_Recorded] = []
        if not empty:
            self.records = _occupy_recorded(run, allocations, start_us, end_us)
            for i, record in enumerate(self.records):
                if record.end_us < end_us:
                    self.leaving[len(self.heap)] = -1 - i
                    self.heap.append(record.end_us * _SEQ + len(self.heap))
            heapq.heapify(self.heap)
        self.seq = len(self.heap)
        self.ready: list[tuple[int, int, int]] = []  # (hold's end, seq, request)

        self.probe: _Run | None = None  # first-fit on an empty fleet: does a class ever fit
        self.never: dict[int, bool] = {}
        self.never_ids: list[str] = []

        self.started_at = np.full(len(workload.request_ids), -1, dtype=np.int64)
        # request, pod, node, GPUs, start, group
        self.placed: list[tuple[int, int, int, list[int], int, int]] = []
        self.groups: list[tuple[int, list[tuple[int, int, list[int]]]]] = []
        self.group_start: list[int] = []
        self.group_end: list[int] = []  # the departure (_NEVER: none in the window)
        self.started = self.rejected = 0

        self.preferred_l = [-1] * len(workload.request_ids)
        if prefer:
            node_index = {n: i for i, n in enumerate(fleet.node_ids)}
            pods_l = workload.pods.tolist()
            for r_, rid in enumerate(workload.request_ids):
                n_ = node_index.get(prefer.get(rid, ""), -1)
                if n_ >= 0 and pods_l[r_] == 1:
                    self.preferred_l[r_] = n_
        self.draws = options.policy not in NO_DRAW  # placing on one node may draw a number
        # per request, as Python values: read at every event
        self.low_l: list[bool] = self.low.tolist()
        self.class_l: list[int] = classes.tolist()
        self.recorded_start_l: list[int] = self.recorded_start.tolist()
        self.arrive_l: list[int] = self.arrive_at.tolist()
        self.limit_l: list[int] = self.limit.tolist()

        # Holds: per request the instant it is held until (-1: not held).
        self.hold_mode = hold if isinstance(hold, str) else ("given" if hold else "none")
        self.hold_until = np.full(len(workload.request_ids), -1, dtype=np.int64)
        if hold is not None and not isinstance(hold, str):
            index_of = {rid: i for i, rid in enumerate(workload.request_ids)}
            for rid, until in hold.items():
                i_ = index_of.get(rid)
                if i_ is not None:
                    self.hold_until[i_] = int(until)
        self.holding = 0  # requests held now

        self.fifo: deque[int] = deque()
        # the other queues: class -> heap of (key, request)
        self.waiting: dict[int, list[tuple[int, int]]] = {}
        self.key = np.zeros(len(workload.request_ids), dtype=np.int64)  # queue order
        self.enqueued = 0
        self.queued = 0

        # Backfill pre-check. Every waiting shape failed at its last try (a retry pass
        # or its arrival), and since then capacity was only taken, except on the nodes
        # freed at this instant. A single pod (or a gang of locality "any", which starts
        # iff the fleet's room counted in pods reaches its size) can only fit now on a
        # freed node: the shapes no freed node can host would fail again, and are
        # skipped without the policy's evaluation (a failed placement changes nothing
        # but caches, and draws no random number). A gang kept in one switch domain (or
        # node) starts iff some domain has room for all of it (_Run.gang_hosts): after
        # a failure, only the domains of the freed nodes can have gained that room.
        # (With preemption, a high-priority request is checked against the nodes as
        # they would be without their evictable work: that room, too, grows only
        # where work that cannot be evicted leaves.)
        self.rep = np.zeros(int(classes.max()) + 1 if len(classes) else 0, dtype=np.int64)
        self.rep[classes] = np.arange(len(classes))
        self.gang = (workload.pods > 1) & (workload.locality != LOCALITIES.index("any"))
        self.hopeless: set[int] = set()  # gang classes that found no domain at their last try

        # the domains of a gang kept in one switch domain, or one block domain
        grouping = {
            LOCALITIES.index("switch"): fleet.domain,
            LOCALITIES.index("block"): fleet.block,
        }
        self.grouping = grouping
        self.members = {g: np.argsort(d, kind="stable") for g, d in grouping.items()}
        self.bounds = {
            g: np.searchsorted(d[self.members[g]], np.arange(int(d.max()) + 2))
            for g, d in grouping.items()
        }
        self.freed_room: dict[tuple[int, ...], int] = {}  # this pass: pod shape -> most room
        # per gang shape: each node's room and the state version it was worked out at
        self.room_cache: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
        # The indexed backfill (see the class's docstring): per replay class, what one pod
        # needs (a share pod: its share in the node's largest free share; a whole-GPU pod:
        # its GPUs fully free; else nothing), whether the class waits, the key of its
        # oldest waiting request, and whether that request would fail anywhere now.
        self.index = index and self.memo and queue != "fifo"
        reps = self.rep
        share, count = workload.share[reps], workload.count[reps]
        self.class_allowed = workload.allowed[reps]
        self.class_cpu, self.class_memory = workload.cpu[reps], workload.memory[reps]
        self.class_largest = np.where((count > 0) & (share < _U), share, 0)
        self.class_whole = np.where((count > 0) & (share >= _U), count, 0)
        self.class_evicts = (~self.low[reps]) if self.preempt else np.zeros(len(reps), bool)
        self.class_waits = np.zeros(len(reps), dtype=bool)
        self.class_head = np.full(len(reps), _NEVER, dtype=np.int64)
        self.class_blocked = np.zeros(len(reps), dtype=bool)
        self.freed_domain_nodes: dict[int, np.ndarray] = {}  # this pass: freed domains' nodes
        self.waiting_version = 0  # changes when a class starts or stops waiting
        self._needs_version = -1
        self._needs: tuple[int, int, int, int, bool] = (0, 0, 0, 0, False)
        self.freed_later: list[int] = []  # nodes freed by an eviction or a dropped reservation

        # Preemption: the evictable groups on each node; what was evicted.
        self.evictable_on: dict[int, set[int]] = {}
        self.preemptions: list[tuple[str, int, str, float]] = []  # victim, at, by, GPU-hours
        self.lost_us_units = 0  # GPU units x µs lost, summed
        self.evictions = 0

        # Kueue: per GPU model its quota (healthy GPU units) and the units charged to it.
        self.quota = np.bincount(fleet.model, weights=fleet.gpus * _U,
                                 minlength=len(fleet.models)).astype(np.int64)  # fmt: skip
        self.charged = np.zeros(len(fleet.models), dtype=np.int64)
        self.charged_low = np.zeros(len(fleet.models), dtype=np.int64)
        self.charge = np.full(len(workload.request_ids), -1, dtype=np.int64)  # model charged
        self.need = workload.share * workload.count * workload.pods  # GPU units asked
        # not yet admitted: per quota class (GPUs asked, models allowed), a heap of (key, request)
        self.admission: dict[int, list[tuple[int, int]]] = {}
        self.quota_class = (
            _row_ids(np.column_stack([self.need, workload.allowed]))
            if len(classes) else np.zeros(0, dtype=np.int64)
        )  # fmt: skip
        self.timers: list[tuple[int, int, int, int, int]] = []  # Kueue: (t, seq, kind, r, token)
        self.admissions = np.zeros(len(workload.request_ids), dtype=np.int64)
        self.requeues = np.zeros(len(workload.request_ids), dtype=np.int64)
        self.placing: set[int] = set()  # admitted, waiting for nodes
        self.low_running: dict[int, set[int]] = {}  # model -> running low-priority groups
        if self.kueue:
            for record in self.records:
                self.charged[fleet.model[record.node]] += sum(record.units)
            self.set_models = [  # the models each model set allows, in name order
                np.unique(fleet.model[workload.model_ok[s]]) for s in range(len(workload.model_ok))
            ]

        # Slurm: the running work's expected ends per pod (slots), and the reservation.
        # (arrays, grown by doubling: the reservation's compiled walk reads them)
        self.n_slots = 0
        self.slot_node = np.zeros(1024, dtype=np.int64)
        self.slot_end = np.zeros(1024, dtype=np.int64)
        self.slot_alive = np.zeros(1024, dtype=bool)
        self.slot_units = np.zeros(1024, dtype=np.int64)  # units on each GPU it holds
        self.slot_cpu = np.zeros(1024, dtype=np.int64)
        self.slot_memory = np.zeros(1024, dtype=np.int64)
        self.slot_gpus = np.zeros((1024, max(fleet.width, 1)), dtype=bool)  # the GPUs it holds
        # the slots with an expected end by (end, slot), up to slot ``sorted_upto``
        self.slot_sorted = np.zeros(0, dtype=np.int64)
        self.sorted_upto = 0
        n_nodes = len(fleet.node_ids)
        # the reservation's walk: its copies of the nodes it releases work on
        self.reserve_scratch = (np.zeros_like(run.state.free), np.zeros(n_nodes, np.int64),
                                np.zeros(n_nodes, np.int64), np.zeros(n_nodes, dtype=bool))  # fmt: skip
        self.group_slots: list[int] = []  # group -> its first slot
        self.record_slots: list[int] = []
        self.reservation: tuple[int, int, np.ndarray, np.ndarray] | None = (
            None  # owner key, T, mask, nodes
        )
        self.reservations = 0
        if self.reserving:
            for record in self.records:
                self.record_slots.append(self.n_slots)
                self._add_slot(record.node, record.end_us, record.units, record.gpus,
                               record.cpu, record.memory)  # fmt: skip

        self.total = fleet.total_gpus * _U
        window_us = end_us - start_us
        self.marks = curve_marks(options.step_pct)
        self.instants = [start_us + round(window_us * m / 100) for m in self.marks]
        self.curve: dict[str, list[object]] = {
            "instant": [], "instant_pct": [], "allocated_pct": [], "fragmented_pct": [],
            "queued": [], "started": [], "failed": [],
        }  # fmt: skip
        self.mark = 0
        self.view = ReplayView(run, self.records, self.groups, self.group_start, self.group_end)
        self.view._hook = self._moved
        self._done = False

        # Health over time (see :meth:`outage`): per (node, GPU), the spans covering it
        # now and the units they hold; the events of the window, in time order.
        self.outages = _outages(health, fleet, start_us, end_us)
        self.k_out = 0
        self.out_count = np.zeros(run.state.free.shape, dtype=np.int64)
        self.out_held = np.zeros(run.state.free.shape, dtype=np.int64)
        self.out_total = 0  # units the outages hold
        if self.outages:
            self.view.out_of_service = self.out_count

    # ---- steps

    def fits_empty(self, r: int) -> bool:
        """Whether request r fits the empty fleet (first-fit); once per replay class."""
        c = self.class_l[r]
        if c not in self.never:
            if self.probe is None:
                self.probe = _Run(self.fleet, self.workload, "first-fit", 0)
            pods = self.probe.place(r)
            self.never[c] = pods is None
            for _, n, used in reversed(pods or []):
                self.probe._undo(r, n, used)
        return not self.never[c]

    def has_room(self, r: int) -> bool:
        """Whether request r would find room now (by evicting, where it may): a probe
        that changes nothing and draws no random number."""
        run, w = self.engine, self.workload
        after = self.preempt and not self.low_l[r]
        if w.pods[r] == 1:
            n = self.preferred_l[r]
            if n >= 0 and run.fits_one(r, n):
                return True  # its recorded node has room
            if run.find_in_set(r) >= 0:
                return True
            return bool(after and run.fits_after_eviction(r, run.set_nodes[w.allowed[r]]).any())
        nodes = run.set_nodes[w.allowed[r]]  # no other node has room for r
        for evict in (False, True) if after else (False,):
            room = run.room(r, nodes, after_eviction=evict)
            k = int(w.pods[r])
            locality = LOCALITIES[int(w.locality[r])]
            if locality == "any":
                if int(room.sum()) >= k:
                    return True
            elif locality == "node":
                if (room >= k).any():
                    return True
            else:
                domain = self.fleet.block if locality == "block" else self.fleet.domain
                if (np.bincount(domain[nodes], weights=room) >= k).any():
                    return True
        return False

    def try_start(self, r: int, t: int, among: np.ndarray | None = None) -> bool:
        """Start request r at t if it fits (its recorded node first, when preferred)."""
        run = self.engine
        pods = None
        n_pref = self.preferred_l[r]
        if n_pref >= 0 and (among is None or n_pref in among):
            if self.draws:
                pods = run.place(r, np.array([n_pref], dtype=np.int64))
            else:
                pods = run.place_on(r, n_pref)
        if pods is None:
            pods = run.place(r, among)
        if pods is None:
            return False
        g = len(self.groups)
        self.group_start.append(t)
        if self.started_at[r] < 0:
            self.started_at[r] = t
            self.started += 1
        placed = self.placed
        for pod, n, used in pods:
            placed.append((r, pod, n, used, t, g))
        length = self.remaining_l[r]
        speed = 1.0
        if self.speeds and r in self.speeds:
            speed = self.speeds[r].get(int(self.fleet.model[pods[0][1]]), 1.0)
            if length > 0:
                length = math.ceil(length / speed)
        self.group_speed.append(speed)
        end = t + length if length >= 0 else _NEVER
        self.group_end.append(end)
        if end < self.end_us:
            heapq.heappush(self.heap, end * _SEQ + self.seq)
            self.leaving[self.seq] = g
            self.seq += 1
        self.groups.append((r, pods))
        low = self.low_l[r]
        if self.preempt and low:
            for _, n, _ in pods:
                self.evictable_on.setdefault(n, set()).add(g)
        if self.kueue:
            self._charge_placed(r, pods)
            if low and self.charge[r] >= 0:
                self.low_running.setdefault(int(self.charge[r]), set()).add(g)
        if self.reserving:
            limit = self.limit_l[r]
            expected = t + math.ceil(limit / speed) if limit >= 0 else _NEVER
            w = self.workload
            self.group_slots.append(self.n_slots)
            for _, n, used in pods:
                self._add_slot(n, expected, [int(w.share[r])] * len(used), used,
                               int(w.cpu[r]), int(w.memory[r]))  # fmt: skip
        return True

    def _start(self, r: int, t: int, among: np.ndarray | None = None) -> bool:
        """Start r under the discipline: outside another's reservation, else by evicting."""
        run = self.engine
        run.blocked = self._reserved_for(r, t)
        try:
            if self.try_start(r, t, among):
                return True
            return self.preempt and not self.low_l[r] and self._preempt(r, t)
        finally:
            run.blocked = None

    def _freed_domains_room(self, r: int, freed: np.ndarray) -> int:
        """The most pods of r's shape one domain (or node) holding a freed node can take."""
        w, run = self.workload, self.engine
        after = bool(self.preempt and not self.low_l[r])
        shape = (int(w.locality[r]), int(w.share[r]), int(w.count[r]), int(w.cpu[r]),
                 int(w.memory[r]), int(w.allowed[r]), int(w.pods[r]), after)  # fmt: skip
        most = self.freed_room.get(shape)
        if most is None:
            if shape[0] in self.grouping:
                domain, of = self.grouping[shape[0]], self.members[shape[0]]
                at = self.bounds[shape[0]]
                if shape[0] not in self.freed_domain_nodes:
                    domains = sorted(set(domain[freed].tolist()))
                    self.freed_domain_nodes[shape[0]] = (
                        of[at[domains[0]] : at[domains[0] + 1]] if len(domains) == 1
                        else np.concatenate([of[at[d] : at[d + 1]] for d in domains])
                    )  # fmt: skip
                nodes = self.freed_domain_nodes[shape[0]]
                room, total = self._room_cached(shape, r, nodes, after)
                if len(nodes) and domain[nodes[0]] == domain[nodes[-1]]:  # one domain
                    most = total
                else:
                    most = int(np.bincount(domain[nodes], weights=room[nodes]).max())
            else:
                most = int(run.room(r, freed, after).max())
            self.freed_room[shape] = most
        return most

    def _room_cached(self, shape: tuple[int, ...], r: int, nodes: np.ndarray,
                     after: bool) -> tuple[np.ndarray, int]:  # fmt: skip
        """:meth:`_Run.room` of r (by node, over the whole fleet: read it at ``nodes``)
        and its sum over ``nodes``, worked out again only for the nodes whose state
        changed since (a pod's room on a node depends on that node alone)."""
        from fleetaudit.whatif.placement import fit_kernel

        cache = self.room_cache.get(shape)
        if cache is None:
            n_nodes = len(self.fleet.node_ids)
            cache = self.room_cache[shape] = (np.zeros(n_nodes, np.int64),
                                               np.zeros(n_nodes, np.int64))  # fmt: skip
        room, seen = cache
        run, w = self.engine, self.workload
        st = run.state
        # (what evictable work holds: read only ``after`` an eviction, which needs it tracked)
        lp = (run.lp_free, run.lp_cpu, run.lp_memory) if after else (st.free, st.cpu, st.memory)
        total = fit_kernel.refresh_rooms(
            nodes, room, seen, st.version, w.model_ok[w.allowed[r]],
            NONE_BLOCKED if run.blocked is None else run.blocked, st.free, st.cpu, st.memory, *lp,
            after, int(w.pods[r]), int(w.cpu[r]), int(w.memory[r]), int(w.share[r]),
            int(w.count[r]),
        )  # fmt: skip
        return room, int(total)

    def _candidates(self, freed: np.ndarray) -> set[int]:
        """The waiting classes worth a try after the nodes ``freed`` got room back."""
        waiting = self.waiting
        cls = np.fromiter(waiting, dtype=np.int64, count=len(waiting))
        keep = self._classes_fit(cls, freed)
        if not self.memo:
            keep |= self.gang[self.rep[cls]]
        # (memo: a gang kept in one domain needs a domain whose room, in pods of its
        # shape, reaches its size; since its last try only freed nodes gained room, and
        # a freed node that takes none of its pods left its domain's room no higher.)
        return set(cls[keep].tolist())

    def _classes_fit(self, cls: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """Which of the classes ``cls`` some node of ``nodes`` can take one pod of now
        (a mask over ``cls``): :meth:`_Run.fits` of each class's requests, at once
        (with preemption, a high-priority class as if evictable work were gone)."""
        st, run = self.engine.state, self.engine
        whole, largest, cpu, memory = st.whole, st.largest, st.cpu, st.memory
        evicts = self.class_evicts[cls]
        if len(nodes) == 1:
            n = int(nodes[0])
            ok = self.workload.model_ok[self.class_allowed[cls], n]
            cpu_n: int | np.ndarray = int(cpu[n])
            mem_n: int | np.ndarray = int(memory[n])
            largest_n: int | np.ndarray = int(largest[n])
            whole_n: int | np.ndarray = int(whole[n])
            if evicts.any():  # per class: as it is, or without the evictable work
                pre_whole, pre_largest = run.pre_at(nodes)
                cpu_n = np.where(evicts, cpu_n + int(run.lp_cpu[n]), cpu_n)
                mem_n = np.where(evicts, mem_n + int(run.lp_memory[n]), mem_n)
                largest_n = np.where(evicts, int(pre_largest[0]), largest_n)
                whole_n = np.where(evicts, int(pre_whole[0]), whole_n)
            return (
                ok
                & (self.class_cpu[cls] <= cpu_n)
                & (self.class_memory[cls] <= mem_n)
                & (self.class_largest[cls] <= largest_n)
                & (self.class_whole[cls] <= whole_n)
            )

        def fit(c: np.ndarray, cpu_: np.ndarray, mem_: np.ndarray, largest_: np.ndarray,
                whole_: np.ndarray) -> np.ndarray:  # fmt: skip
            ok = self.workload.model_ok[self.class_allowed[c][:, None], nodes[None, :]]
            ok &= self.class_cpu[c][:, None] <= cpu_[None, :]
            ok &= self.class_memory[c][:, None] <= mem_[None, :]
            ok &= self.class_largest[c][:, None] <= largest_[None, :]
            ok &= self.class_whole[c][:, None] <= whole_[None, :]
            result: np.ndarray = ok.any(axis=1)
            return result

        here = (cpu[nodes], memory[nodes], largest[nodes], whole[nodes])
        if not evicts.any():
            return fit(cls, *here)
        out = np.zeros(len(cls), dtype=bool)
        out[~evicts] = fit(cls[~evicts], *here)
        pre_whole, pre_largest = run.pre_at(nodes)
        out[evicts] = fit(cls[evicts], here[0] + run.lp_cpu[nodes], here[1] + run.lp_memory[nodes],
                          pre_largest, pre_whole)  # fmt: skip
        return out

    def _any_may_fit(self, nodes: np.ndarray) -> bool:
        """False when no waiting class can take one pod on any of ``nodes``: each class
        needs at least the least of the waiting classes' needs (GPUs, share, CPUs,
        memory), so a node short of one of those takes none (a quick test before
        :meth:`_classes_fit`; with preemption, against the nodes without evictable work)."""
        if self._needs_version != self.waiting_version:
            cls = np.flatnonzero(self.class_waits)
            if not len(cls):
                return False
            self._needs = (int(self.class_whole[cls].min()), int(self.class_largest[cls].min()),
                           int(self.class_cpu[cls].min()), int(self.class_memory[cls].min()),
                           bool(self.class_evicts[cls].any()))  # fmt: skip
            self._needs_version = self.waiting_version
        from fleetaudit.whatif.placement import fit_kernel

        whole, largest, cpu, memory, evicts = self._needs
        run, st = self.engine, self.engine.state
        # (what evictable work holds: read only with ``evicts``, which needs it tracked)
        lp = (run.lp_free, run.lp_cpu, run.lp_memory) if evicts else (st.free, st.cpu, st.memory)
        return bool(
            fit_kernel.any_may_fit(nodes, st.free, st.cpu, st.memory, st.whole, st.largest,
                                   *lp, whole, largest, cpu, memory, evicts)
        )  # fmt: skip

    def _pop(self, c: int) -> None:
        """The waiting class c's first request started: update the class's index."""
        q = self.waiting[c]
        self.placing.discard(heapq.heappop(q)[1])
        self.queued -= 1
        self.hopeless.discard(c)
        self._class_changed(c)

    def _class_changed(self, c: int) -> None:
        """Class c's queue lost its first request: its index follows (or it leaves)."""
        q = self.waiting[c]
        if q:
            self.class_head[c] = q[0][0]
            return
        del self.waiting[c]
        self.class_waits[c] = False
        self.class_head[c] = _NEVER
        self.class_blocked[c] = False
        self.hopeless.discard(c)
        self.waiting_version += 1

    def _retry_indexed(self, t: int, freed: list[int]) -> None:
        """The memo's backfill pass (see :meth:`retry`), with the waiting classes
        checked against the freed nodes at once.

        The memo pops the waiting classes in queue order and skips one whose pod no
        freed node takes now; a start only takes room, so the classes that fit after
        a start are among those that fit before it, and until a start the classes
        that fit stay the same. Here the classes that fit are walked in that order,
        and checked again at once after each start.
        """
        waiting, workload, gang, hopeless = self.waiting, self.workload, self.gang, self.hopeless
        nodes = np.array(sorted(set(freed)), dtype=np.int64)
        if not self._any_may_fit(nodes):
            return
        self.freed_room.clear()
        self.freed_domain_nodes.clear()
        cls = np.flatnonzero(self.class_waits)
        cls = cls[self._classes_fit(cls, nodes)]
        # An eviction gives room back: the classes after it are checked one at a time
        # (as the memo's pass pops them), not dropped at once.
        unchecked = False
        while len(cls):
            order = cls[np.argsort(self.class_head[cls], kind="stable")]
            evicted = self.evictions
            for i in range(len(order)):
                c = int(order[i])
                if (unchecked or self.evictions != evicted) and not self._classes_fit(
                    order[i : i + 1], nodes
                )[0]:
                    continue
                r = waiting[c][0][1]
                if c in hopeless and self._freed_domains_room(r, nodes) < int(workload.pods[r]):
                    continue
                if self.reserving:
                    self._ensure_reservation(t)
                if self._start(r, t, nodes):
                    break
                if gang[r]:
                    hopeless.add(c)
            else:
                return
            self._pop(c)
            rest = order[i + 1 :]
            if c in waiting:
                rest = np.append(rest, c)
            if not len(rest):
                return
            if self.evictions != evicted:
                self.freed_room.clear()
                cls, unchecked = rest, True
            else:
                cls, unchecked = rest[self._classes_fit(rest, nodes)], False

    def retry(self, t: int, freed: list[int]) -> None:
        """Start what waits and now fits, after the nodes ``freed`` got room back at t."""
        if not freed:
            return
        if self.index:
            self._retry_indexed(t, freed)
        elif self.queue == "fifo":
            self._retry_fifo(t, freed)
        else:
            self._retry_memo(t, freed)
        if self.reserving and self.waiting:
            self._ensure_reservation(t)

    def _retry_fifo(self, t: int, freed: list[int]) -> None:
        precheck, workload = self.precheck, self.workload
        fifo = self.fifo
        # Strict FIFO: nothing started since the head failed, so only the nodes
        # freed now gained room (the same pre-check as backfill, for the head).
        among = None
        if precheck and fifo:
            nodes = np.unique(np.array(freed, dtype=np.int64))
            self.freed_room.clear()
            self.freed_domain_nodes.clear()
            head = fifo[0]
            if self.memo and not self.engine.fits(head, nodes).any():
                return  # no freed node takes one of its pods: no room was gained for it
            if self.gang[head] and self._freed_domains_room(head, nodes) < int(workload.pods[head]):
                return
            among = nodes
        while fifo and self.try_start(fifo[0], t, among):
            fifo.popleft()
            self.queued -= 1
            among = None  # the others wait untried behind the head

    def _retry_memo(self, t: int, freed: list[int]) -> None:
        precheck, workload = self.precheck, self.workload
        waiting = self.waiting
        nodes = np.zeros(0, dtype=np.int64)
        if precheck:
            nodes = np.unique(np.array(freed, dtype=np.int64))
            worth = self._candidates(nodes)
            self.freed_room.clear()
            self.freed_domain_nodes.clear()
            heads = [(q[0][0], c) for c, q in waiting.items() if c in worth]
        else:
            heads = [(q[0][0], c) for c, q in waiting.items()]
        heapq.heapify(heads)
        memo, engine, pod_shape = self.memo, self.engine, self.pod_shape
        no_room: set[tuple[int, bool]] = set()  # this pass: pod shapes no freed node can take
        evicted = self.evictions
        while heads:
            if self.evictions != evicted:  # an eviction gave room back
                evicted = self.evictions
                no_room.clear()
                self.freed_room.clear()
            _, c = heapq.heappop(heads)
            q = waiting[c]
            r = q[0][1]
            if memo:
                # r's shape failed at its last try, and since then only the freed nodes
                # gained room: a single pod fits only there, a gang needs room in pods
                # (the fleet's, or a domain's) that only they can have raised. With
                # none of them able to take one pod, it fails again.
                evicts = bool(self.class_evicts[c])
                shape = (int(pod_shape[r]), evicts)
                if shape in no_room:
                    continue
                fits = engine.fits_after_eviction(r, nodes) if evicts else engine.fits(r, nodes)
                if not fits.any():
                    no_room.add(shape)
                    continue
            if (
                precheck
                and c in self.hopeless
                and self._freed_domains_room(r, nodes) < int(workload.pods[r])
            ):
                continue
            # A single pod failed at its last try, and since then only the freed
            # nodes gained room (this pass only takes it): no other node can fit it.
            if self.reserving:
                self._ensure_reservation(t)
            if self._start(r, t, nodes if precheck else None):
                self._pop(c)
                if c in waiting:
                    heapq.heappush(heads, (waiting[c][0][0], c))
            elif self.gang[r]:
                self.hopeless.add(c)

    def arrive(self, r: int, arrival: int, t: int) -> None:
        """Request r (the ``arrival``-th of the window) arrives at t: hold, start or queue it."""
        if not self.fits_empty(r):
            self.rejected += 1
            self.never_ids.append(self.workload.request_ids[r])
            return
        began = self.recorded_start_l[r]
        if self.hold_mode == "record" and t < began and self.has_room(r):
            # It finds room, yet the record started it later, or not at all: it waited
            # for something other than capacity, and is held until its recorded start
            # (for good when the record never started it; _NEVER when the window's
            # record holds no start at all, and then nothing is held).
            self.hold_until[r] = began
        until = int(self.hold_until[r])
        if until > t:
            self.holding += 1
            if until < self.end_us:
                heapq.heappush(self.ready, (until, self.seq, r))
                self.seq += 1
            return
        self.enqueue(r, t)

    def release(self, r: int, t: int) -> None:
        """Request r's hold ends at t: it becomes ready."""
        self.holding -= 1
        self.enqueue(r, t)

    def enqueue(self, r: int, t: int) -> None:
        """Request r is ready at t: start it or queue it, as the discipline says."""
        self.key[r] = (int(self.low_l[r]) << 40) + self.enqueued if self.named else self.enqueued
        self.enqueued += 1
        if self.queue == "fifo":
            if not self.fifo and self.try_start(r, t):
                return
            self.fifo.append(r)
            self.queued += 1
            return
        if self.kueue:
            self.queued += 1
            first = not self.admission or self.key[r] < min(
                q[0][0] for q in self.admission.values()
            )
            if not self.strict or first:
                # best effort, or strict with none waiting ahead: nothing freed quota
                # since the last pass, so only r can be admitted now
                m = self._flavor(r)
                if m != -1:
                    self._admitted(r, m, t)
                    return
            self._to_admission(r)
            return
        self._start_or_wait(r, t)

    def _start_or_wait(self, r: int, t: int) -> None:
        c = self.class_l[r]
        # Indexed: a class that waits and failed everywhere since the last room the
        # queue's passes did not see fails again (a pass leaves every waiting class
        # failing on the freed nodes, and nothing else gained room).
        if self.reserving:
            self._ensure_reservation(t, r)
        if not (self.index and self.class_blocked[c]) and self._start(r, t):
            return
        self._wait(r, t)

    def _wait(self, r: int, t: int, tried: bool = True) -> None:
        """Put r in its class's queue (``tried``: it failed to start at t; else it was
        evicted, and its class may well fit elsewhere)."""
        c = self.class_l[r]
        if self.gang[r] and tried:
            self.hopeless.add(c)
        q = self.waiting.setdefault(c, [])
        heapq.heappush(q, (int(self.key[r]), r))
        if self.kueue:
            self.placing.add(r)
        if self.index:
            if not self.class_waits[c]:
                self.class_blocked[c] = False
                self.waiting_version += 1
            self.class_waits[c] = True
            self.class_head[c] = q[0][0]
            self.class_blocked[c] |= tried
        self.queued += 1
        if self.reserving:
            self._ensure_reservation(t)

    # ---- Kueue: admission against the quota

    def _flavor(self, r: int) -> int:
        """The GPU model whose quota admits r (-2: r needs no GPU quota; -1: none can).
        With preemption, a high-priority request may count the low-priority charges."""
        need = int(self.need[r])
        if not need:
            return -2
        reclaim = self.preempt and not self.low_l[r]
        for m in self.set_models[int(self.workload.allowed[r])].tolist():
            free = self.quota[m] - self.charged[m]
            if free + (self.charged_low[m] if reclaim else 0) >= need:
                return int(m)
        return -1

    def _to_admission(self, r: int) -> None:
        """Queue r for admission (it is counted in ``queued`` already)."""
        heapq.heappush(
            self.admission.setdefault(int(self.quota_class[r]), []), (int(self.key[r]), r)
        )

    def _admit(self, t: int) -> None:
        """Admit what the quota allows, in queue order (strict: stop at the first that it
        cannot admit; best effort: pass over it); each admitted request starts or waits
        for nodes. Requests of one quota class (GPUs asked, models allowed) are admitted
        alike, so only the first of each is checked."""
        admission = self.admission
        while admission:
            heads = sorted((q[0][0], qc) for qc, q in admission.items())
            for _, qc in heads:
                r = admission[qc][0][1]
                m = self._flavor(r)
                if m != -1:
                    break
                if self.strict:
                    return
            else:
                return
            q = admission[qc]
            heapq.heappop(q)
            if not q:
                del admission[qc]
            self._admitted(r, m, t)

    def _admitted(self, r: int, m: int, t: int) -> None:
        self.queued -= 1
        if m >= 0:
            self.charge[r] = m
            self.charged[m] += int(self.need[r])
            if self.low_l[r]:
                self.charged_low[m] += int(self.need[r])
        self.admissions[r] += 1
        groups = len(self.groups)
        self._start_or_wait(r, t)
        if len(self.groups) == groups:  # it waits for nodes: Kueue's waitForPodsReady
            heapq.heappush(
                self.timers, (t + _KUEUE_READY_US, self.seq, 0, r, int(self.admissions[r]))
            )
            self.seq += 1

    def _reclaim(self, r: int, m: int, t: int) -> None:
        """Evict low-priority work charged to model m, least lost work first, until the
        quota admits high-priority r (Kueue's preemption within the ClusterQueue)."""
        mine = self.low_running.get(m, set())
        while mine and self.quota[m] - self.charged[m] < self.need[r]:
            g = min(mine, key=lambda g: self._group_lost(g, t))
            self._evict(g, t, r)

    def _timer(self, kind: int, r: int, token: int, t: int) -> None:
        """A Kueue timer of request r at t: its pods were not all placed in time (kind 0:
        evict it from admission and requeue it after a backoff), or its backoff ends (1)."""
        if kind == 1:
            self._to_admission(r)
            self._admit(t)
            return
        if token != self.admissions[r] or r not in self.placing:
            return  # it started (or was admitted again) since
        c = self.class_l[r]
        q = self.waiting[c]
        q.remove((int(self.key[r]), r))
        heapq.heapify(q)
        self.placing.discard(r)
        self._class_changed(c)
        self._uncharge(r)
        self.requeues[r] += 1
        backoff = min(_KUEUE_BACKOFF_US << (int(self.requeues[r]) - 1), _KUEUE_BACKOFF_MAX_US)
        heapq.heappush(self.timers, (t + backoff, self.seq, 1, r, 0))
        self.seq += 1
        self._admit(t)  # the quota it gave back

    def _charge_placed(self, r: int, pods: list[tuple[int, int, list[int]]]) -> None:
        """The charge follows the model the request was placed on."""
        m = int(self.charge[r])
        placed = int(self.fleet.model[pods[0][1]])
        if m >= 0 and m != placed:
            units = int(self.need[r])
            self.charged[m] -= units
            self.charged[placed] += units
            if self.low_l[r]:
                self.charged_low[m] -= units
                self.charged_low[placed] += units
            self.charge[r] = placed

    def _uncharge(self, r: int) -> None:
        m = int(self.charge[r])
        if m >= 0:
            self.charged[m] -= int(self.need[r])
            if self.low_l[r]:
                self.charged_low[m] -= int(self.need[r])
            self.charge[r] = -1

    # ---- Slurm: the reservation of the first waiting request

    def _add_slot(self, node: int, end: int, units: list[int], gpus: list[int], cpu: int,
                  memory: int) -> None:  # fmt: skip
        s = self.n_slots
        if s == len(self.slot_node):
            for name in ("slot_node", "slot_end", "slot_alive", "slot_units", "slot_cpu",
                         "slot_memory", "slot_gpus"):  # fmt: skip
                old = getattr(self, name)
                setattr(self, name, np.concatenate([old, np.zeros_like(old)]))
        self.n_slots += 1
        self.slot_node[s], self.slot_end[s], self.slot_alive[s] = node, end, True
        self.slot_units[s] = units[0] if units else 0
        self.slot_cpu[s], self.slot_memory[s] = cpu, memory
        self.slot_gpus[s, gpus] = True

    def _head(self) -> int:
        """The first waiting request in queue order (-1: none waits)."""
        if not self.waiting:
            return -1
        if self.index:
            c = int(self.class_head.argmin())
        else:
            c = min(self.waiting, key=lambda x: self.waiting[x][0][0])
        return self.waiting[c][0][1]

    def _ensure_reservation(self, t: int, arriving: int = -1) -> None:
        """Keep the reservation with the first waiting request (or ``arriving``, when it
        comes first): drop it when that request changed, and make a new one when it
        cannot start now."""
        head = self._head()
        if arriving >= 0 and (head < 0 or self.key[arriving] < self.key[head]):
            head = -1  # the arriving request comes first: it tries before any reservation
        if head < 0:
            self._set_reservation(None)
            return
        if self.reservation is not None and self.reservation[0] == int(self.key[head]):
            return
        self._set_reservation(self._reserve(head, t))

    def _set_reservation(self, new: tuple[int, int, np.ndarray, np.ndarray] | None) -> None:
        old = self.reservation
        self.reservation = new
        if old is not None and len(old[3]):
            # capacity the old reservation held back is offered to the queue again
            self.freed_later.extend(old[3].tolist())
            if self.index:
                self.class_blocked[:] = False
        if new is not None:
            self.reservations += 1

    def _reserved_for(self, r: int, t: int) -> np.ndarray | None:
        """The nodes r may not take now (another's reservation), or None."""
        resv = self.reservation
        if resv is None or not len(resv[3]) or self.key[r] <= resv[0]:
            return None
        limit = self.limit_l[r]
        if limit >= 0 and t + limit <= resv[1]:
            return None  # it ends, by its limit, before the reservation begins
        return resv[2]

    def _reserve(self, h: int, t: int) -> tuple[int, int, np.ndarray, np.ndarray]:
        """(h's key, the earliest instant h fits by the running work's expected ends,
        a mask of the nodes it fits on then, those nodes): released in expected-end
        order, on a copy of the state. No such instant: no nodes are reserved."""
        from fleetaudit.whatif.placement import fit_kernel

        fleet, w, st = self.fleet, self.workload, self.engine.state
        n_nodes = len(fleet.node_ids)
        none = (int(self.key[h]), _NEVER, np.zeros(n_nodes, dtype=bool), np.zeros(0, np.int64))
        eligible = w.model_ok[w.allowed[h]]
        order, recent = self._slots_by_end()
        k = int(w.pods[h])
        locality = LOCALITIES[int(w.locality[h])]
        domain = (fleet.block if locality == "block" else fleet.domain) if k > 1 else fleet.domain
        room = np.zeros(n_nodes, dtype=np.int64)
        sums = np.zeros(int(domain.max()) + 1 if n_nodes else 0, dtype=np.int64)
        scratch = self.reserve_scratch
        s, n = fit_kernel.reserve_walk(
            order, recent, self.slot_alive, self.slot_end, self.slot_node, self.slot_gpus,
            self.slot_units, self.slot_cpu, self.slot_memory, st.free, st.cpu, st.memory,
            *scratch, eligible, self.engine.set_nodes[w.allowed[h]], room, sums, domain, k,
            fit_kernel.LOCALITY_CODES[locality if k > 1 else "node"], int(w.cpu[h]),
            int(w.memory[h]), int(w.share[h]), int(w.count[h]),
        )  # fmt: skip
        if s < 0:
            return none
        when = int(self.slot_end[s])
        if k == 1 or locality == "node":
            mask = np.zeros(n_nodes, dtype=bool)
            mask[n] = True
            return int(self.key[h]), when, mask, np.array([n], dtype=np.int64)
        if locality == "any":
            return int(self.key[h]), when, room > 0, np.flatnonzero(room > 0)
        mask = (domain == domain[n]) & (room > 0)
        return int(self.key[h]), when, mask, np.flatnonzero(mask)

    def _slots_by_end(self) -> tuple[np.ndarray, np.ndarray]:
        """The slots with an expected end, by (expected end, slot), in two lists that
        :func:`~fleetaudit.whatif.placement.fit_kernel.reserve_walk` walks as one: the
        slots up to ``sorted_upto`` (some of them ended since: the walk skips those),
        and the later ones. The later ones are merged into the first list, and the
        ended ones dropped from it, once there are more than a few thousand of them
        (sorting every live slot again for each reservation was most of its cost)."""
        end = self.slot_end
        recent = np.arange(self.sorted_upto, self.n_slots, dtype=np.int64)
        recent = recent[end[recent] < _NEVER]
        recent = recent[np.argsort(end[recent], kind="stable")]
        if len(recent) <= _RECENT_SLOTS:
            return self.slot_sorted, recent
        known = self.slot_sorted
        known = known[self.slot_alive[known]]
        recent = recent[self.slot_alive[recent]]
        # after the known slots of the same end: the recent ones are the later slots
        known = np.insert(known, np.searchsorted(end[known], end[recent], side="right"), recent)
        self.slot_sorted, self.sorted_upto = known, self.n_slots
        return known, recent[:0]

    # ---- preemption

    def _group_lost(self, g: int, t: int) -> tuple[int, int, int]:
        r = self.groups[g][0]
        w = self.workload
        units = int(w.share[r]) * int(w.count[r]) * int(w.pods[r])
        return victims.victim_key(units, self.group_start[g], int(self.checkpoint[r]), t, g)

    def _preempt(self, r: int, t: int) -> bool:
        """Evict low-priority work so that high-priority r starts now; False: no node
        (or domain) would hold r even with all of it evicted."""
        run, w = self.engine, self.workload
        k = int(w.pods[r])
        locality = LOCALITIES[int(w.locality[r])]
        if k == 1:
            ok = run.fits_after_eviction(r) & (run.lp_count > 0)
            candidates = np.flatnonzero(ok)
            if not len(candidates):
                return False
            # the nodes with the fewest evictable pods first (node order on ties), the
            # first few costed exactly: the victims, least lost work first, until r fits
            order = candidates[np.argsort(run.lp_count[candidates], kind="stable")]
            best: tuple[int, int, int, list[int]] | None = None
            for n in order[:_PREEMPT_NODES].tolist():
                chosen, lost = self._victims_on(r, n, t)
                if chosen is not None and (best is None or (lost, len(chosen), n) < best[:3]):
                    best = (lost, len(chosen), n, chosen)
            if best is None:
                return False
            for g in best[3]:
                self._evict(g, t, r)
            return self.try_start(r, t, np.array([best[2]], dtype=np.int64))
        room_now = run.room(r)
        room_after = run.room(r, after_eviction=True)
        if locality == "any":
            if int(room_after.sum()) < k:
                return False
            domain = np.zeros(len(room_now), dtype=np.int64)
        elif locality == "node":
            domain = np.arange(len(room_now))
        else:
            domain = self.fleet.block if locality == "block" else self.fleet.domain
        sums = np.bincount(domain, weights=room_after)
        fit = np.flatnonzero(sums >= k)
        if not len(fit):
            return False
        # the domain that needs the fewest evictions (the most room now), then the
        # lowest; in it, nodes are emptied of evictable work in order of their fewest
        # evictable pods until it holds the gang
        now = np.bincount(domain, weights=room_now, minlength=len(sums))
        d = int(fit[np.argmax(now[fit])])
        have = int(now[d])
        nodes = np.flatnonzero((domain == d) & (room_after > room_now))
        nodes = nodes[np.argsort(run.lp_count[nodes], kind="stable")]
        for n in nodes.tolist():
            if have >= k:
                break
            have += int(room_after[n] - room_now[n])
            for g in sorted(self.evictable_on.get(n, set()), key=lambda g: self._group_lost(g, t)):
                self._evict(g, t, r)
        return self.try_start(r, t)

    def _victims_on(self, r: int, n: int, t: int) -> tuple[list[int] | None, int]:
        """The evictable groups on n to evict, least lost work first, until r fits there."""
        w, st = self.workload, self.engine.state
        row = st.free[n].copy()
        cpu, memory = int(st.cpu[n]), int(st.memory[n])
        share, count = int(w.share[r]), int(w.count[r])
        chosen: list[int] = []
        lost = 0
        for key, g in sorted((self._group_lost(g, t), g) for g in self.evictable_on.get(n, ())):
            rv, pods = self.groups[g]
            for _, m, used in pods:
                if m == n:
                    row[used] += w.share[rv]
                    cpu += int(w.cpu[rv])
                    memory += int(w.memory[rv])
            chosen.append(g)
            lost += key[0]
            if cpu < w.cpu[r] or memory < w.memory[r]:
                continue
            if (
                not count
                or (share < _U and row.max() >= share)
                or (share >= _U and int((row == _U).sum()) >= count)
            ):
                return chosen, lost
        return None, 0

    def _evict(self, g: int, t: int, by: int) -> None:
        """Evict pod group g at t (for request ``by``): it loses the work since its last
        checkpoint and waits again in its place in the queue."""
        w = self.workload
        rv = self.groups[g][0]
        self.evictions += 1
        self.freed_later += self._stop_group(g, t)
        lost = self._requeue(g, t)
        units = int(w.share[rv]) * int(w.count[rv]) * int(w.pods[rv])
        self.lost_us_units += lost * units
        self.preemptions.append(
            (w.request_ids[rv], t, w.request_ids[by], lost / 1e6 / 3600 * units / _U)
        )

    def _stop_group(self, g: int, t: int) -> list[int]:
        """Pod group g stops at t (evicted, or its node failed): its pods leave their
        GPUs; the nodes they held (with repeats)."""
        self.group_end[g] = t
        self.view._ended(g, t)
        return self._release_group(g)

    def _release_group(self, g: int) -> list[int]:
        """Pod group g leaves its GPUs (its end, an eviction or an outage); the nodes
        it held (with repeats)."""
        run = self.engine
        r, pods = self.groups[g]
        freed: list[int] = []
        for _, n, used in reversed(pods):
            run._undo(r, n, used)
            freed.append(n)
            if self.preempt:
                self.evictable_on.get(n, set()).discard(g)
        if self.kueue:
            self.low_running.get(int(self.charge[r]), set()).discard(g)
            self._uncharge(r)
        if self.reserving:
            first = self.group_slots[g]
            self.slot_alive[first : first + len(pods)] = False
        return freed

    def _requeue(self, g: int, t: int) -> int:
        """The request of pod group g, stopped at t, waits again in its place in the
        queue with the run it has left: it loses the work since its last checkpoint
        (:func:`fleetaudit.whatif.victims.since_checkpoint`), returned in microseconds."""
        rv = self.groups[g][0]
        elapsed = t - self.group_start[g]
        lost = victims.since_checkpoint(elapsed, int(self.checkpoint[rv]))
        if self.remaining_l[rv] >= 0:
            done = elapsed - lost  # on a ported model, run in recorded time (module doc)
            if self.group_speed[g] != 1.0:
                done = math.floor(done * self.group_speed[g])
            self.remaining_l[rv] = max(self.remaining_l[rv] - done, 0)
        if self.kueue:
            self.queued += 1
            self._to_admission(rv)
        else:
            self._wait(rv, t, tried=False)
        return lost

    def _moved(self, i: int, k: int, source: int, node: int, gpus: list[int]) -> None:
        """The view moved record i (k < 0) or pod k of group i from ``source`` to ``node``."""
        if k >= 0 and self.preempt and self.low_l[self.groups[i][0]]:
            self.evictable_on.setdefault(node, set()).add(i)
            if not any(m == source for _, m, _ in self.groups[i][1]):
                self.evictable_on.get(source, set()).discard(i)
        if self.reserving:
            s = self.record_slots[i] if k < 0 else self.group_slots[i] + k
            self.slot_node[s] = node
            self.slot_gpus[s] = False
            self.slot_gpus[s, gpus] = True
            self._set_reservation(None)

    def depart(self, t: int) -> list[int]:
        """Release everything that ends at t; the nodes freed (with repeats)."""
        heap, records, leaving = self.heap, self.records, self.leaving
        freed: list[int] = []
        later = (t + 1) * _SEQ  # every key is at least t x _SEQ: t is the earliest
        while heap and heap[0] < later:
            item = leaving.pop(heapq.heappop(heap) % _SEQ)
            if item < 0:
                i = -1 - item
                if records[i].end_us != t:
                    continue  # an outage ended it before its recorded end
                freed.append(self._end_record(i))
            else:
                if self.group_end[item] != t:
                    continue  # evicted before its end
                freed += self._release_group(item)
        return freed

    def _end_record(self, i: int) -> int:
        """Recorded allocation i leaves its GPUs (at its end_us); its node."""
        rec = self.records[i]
        _release_recorded(self.engine, rec)
        if self.kueue:
            self.charged[self.fleet.model[rec.node]] -= sum(rec.units)
        if self.reserving:
            self.slot_alive[self.record_slots[i]] = False
        return rec.node

    def sample(self, upto: int) -> None:
        """Record the curve's points at the instants up to ``upto`` (before its events)."""
        run, curve, instants = self.engine, self.curve, self.instants
        while self.mark < len(instants) and instants[self.mark] <= upto:
            allocated = self.total - int(run.state.free_total.sum()) - self.out_total
            last = self.mark == len(instants) - 1
            waiting = self.queued + self.holding
            curve["instant"].append(from_epoch_us(instants[self.mark]))
            curve["instant_pct"].append(self.marks[self.mark])
            curve["allocated_pct"].append(100.0 * allocated / self.total)
            curve["fragmented_pct"].append(
                100.0 * run.fragmentation() / self.total if self.fragmentation else math.nan
            )
            curve["queued"].append(waiting)
            curve["started"].append(self.started)
            curve["failed"].append(self.rejected + (waiting if last else 0))
            self.mark += 1

    def _give_back(self, t: int, freed: list[int]) -> None:
        """Offer the queue the room the nodes ``freed`` got back at t (what GPUs out of
        service free goes to their outage first)."""
        self.hold_out(freed)
        if self.queued:
            self.retry(t, freed)
        if self.kueue and self.admission:
            self._admit(t)

    def _settle(self, t: int) -> None:
        """Offer the queue what evictions or a dropped reservation gave back at t."""
        while self.freed_later:
            freed, self.freed_later = self.freed_later, []
            self._give_back(t, freed)

    # ---- health over time

    def hold_out(self, nodes: Sequence[int]) -> None:
        """Units freed on GPUs out of service go to the outage, not to new work."""
        if not self.outages:
            return
        run, out = self.engine, self.out_count
        st = run.state
        for n in set(nodes):
            take = (out[n] > 0) & (st.free[n] > 0)
            if take.any():
                units = st.free[n, take]
                self.out_held[n, take] += units
                st.free[n, take] = 0
                st.group_used[self.fleet.group[n]] += int(units.sum())
                self.out_total += int(units.sum())
                run._changed(n)

    def outage(self, t: int) -> list[int]:
        """The health events at t (:func:`_outages`), ends first: a span that ends gives
        its GPUs back; one that begins takes its GPUs as work leaves them (new work
        lands on none of them meanwhile); a failing interval (state down or unhealthy)
        ends the work on what it covers at its start: a recorded allocation ends there,
        a replayed request's pods all stop and the request waits again (:meth:`_end_work`).

        Returns the nodes that got room back."""
        run, st, out = self.engine, self.engine.state, self.out_count
        freed: list[int] = []
        while self.k_out < len(self.outages) and self.outages[self.k_out][0] == t:
            _, kind, n, gpus = self.outages[self.k_out]
            self.k_out += 1
            at = list(gpus)
            if kind == _GIVE:
                out[n, at] -= 1
                back = [g for g in at if out[n, g] == 0 and self.out_held[n, g]]
                if back:
                    units = self.out_held[n, back]
                    st.free[n, back] += units
                    self.out_held[n, back] = 0
                    st.group_used[self.fleet.group[n]] -= int(units.sum())
                    self.out_total -= int(units.sum())
                    run._changed(n)
                    freed.append(n)
                continue
            if kind == _TAKE:
                out[n, at] += 1
            else:
                freed += self._end_work(n, set(at), t)
            self.hold_out([n])
        self.hold_out(freed)
        return freed

    def _end_work(self, n: int, gpus: set[int], t: int) -> list[int]:
        """End the work on GPUs ``gpus`` of node n at t: a recorded allocation ends there;
        a replayed request stops (all its pods) and waits again in its place, having
        lost the work since its last checkpoint (from scratch without one), as an
        evicted one does. The nodes it held (with repeats)."""
        view = self.view
        freed: list[int] = []
        recs, held = view._on_node(n)
        for i in recs:
            rec = self.records[i]
            if rec.node != n or rec.end_us <= t or not gpus & set(rec.gpus):
                continue
            rec.end_us = t
            freed.append(self._end_record(i))
            view._record_ended(i)
        for g in held:
            pods = self.groups[g][1]
            if self.group_end[g] <= t or not any(m == n and gpus & set(u) for _, m, u in pods):
                continue
            freed += self._stop_group(g, t)
            self._requeue(g, t)
        return freed

    def run(
        self,
        on_tick: Callable[[ReplayView, int], None] | None = None,
        ticks: Sequence[int] = (),
    ) -> ReplayResult:
        """Play the window's events in time order and return the result (once)."""
        if self._done:
            raise RuntimeError("a Replay runs once")
        self._done = True
        with paused_gc():
            return self._run(on_tick, ticks)

    def _run(
        self,
        on_tick: Callable[[ReplayView, int], None] | None,
        ticks: Sequence[int],
    ) -> ReplayResult:
        start_us, end_us, arriving = self.start_us, self.end_us, self.arriving
        arrive_l = self.arrive_l  # the arrivals' instants, in arrival order
        heap, ready, view = self.heap, self.ready, self.view
        tick_list = [int(x) for x in ticks if start_us <= int(x) < end_us] if on_tick else []
        k_tick = 0
        a = 0
        outages = self.outages
        while True:
            t_out = outages[self.k_out][0] if self.k_out < len(outages) else _NEVER
            t_dep = heap[0] // _SEQ if heap else _NEVER
            t_arr = arrive_l[a] if a < len(arriving) else _NEVER
            t_ready = ready[0][0] if ready else _NEVER
            if self.timers:
                t_ready = min(t_ready, self.timers[0][0])
            t_tick = tick_list[k_tick] if k_tick < len(tick_list) else _NEVER
            t = min(t_dep, t_arr, t_ready, t_tick, t_out)
            if t >= end_us:
                break
            self.sample(t)
            if t_out == t:
                # health first (what it ends leaves now); the instant's other events next
                freed = self.outage(t)
                self.class_blocked[:] = False  # room the queue's passes did not see
                self._give_back(t, freed)
                self._settle(t)
                continue
            if t_tick == t and t_dep > t and t_arr > t and t_ready > t and on_tick is not None:
                # a tick runs after its instant's departures and arrivals
                k_tick += 1
                view.queued, view.freed = self.queued + self.holding, []
                on_tick(view, t)
                # a move may give room the queue's pass does not see (a repacked node)
                self.class_blocked[:] = False
                self._give_back(t, view.freed)
                self._settle(t)
                continue
            if t_dep == t:
                self._give_back(t, self.depart(t))
                self._settle(t)
            while self.timers and self.timers[0][0] == t:
                _, _, kind, r, token = heapq.heappop(self.timers)
                self._timer(kind, r, token, t)
                self._settle(t)
            while ready and ready[0][0] == t:
                self.release(heapq.heappop(ready)[2], t)
                self._settle(t)
            while a < len(arriving) and arrive_l[a] == t:
                self.arrive(int(arriving[a]), a, t)
                a += 1
                self._settle(t)
        self.sample(end_us)
        fleet, workload = self.fleet, self.workload
        held = {
            workload.request_ids[i]: int(u)
            for i in np.flatnonzero(self.hold_until >= 0).tolist()
            for u in (self.hold_until[i],)
        }
        preemptions = pl.DataFrame(
            self.preemptions,
            schema={"request_id": pl.String, "at": pl.Int64, "by": pl.String,
                    "lost_gpu_hours": pl.Float64},
            orient="row",
        ).with_columns(pl.col("at").cast(pl.Datetime("us")))  # fmt: skip
        return ReplayResult(
            policy=self.options.policy,
            seed=self.options.seed,
            queue=self.queue,
            empty=self.empty,
            start=self.start,
            end=self.end,
            curve=pl.DataFrame(self.curve, schema=_REPLAY_CURVE),
            allocations=_replay_allocations(
                fleet, workload, self.records, self.placed, self.group_end
            ),
            waits=_replay_waits(workload, arriving, self.submit, self.started_at),
            gpus=fleet.total_gpus,
            arrived=len(arriving),
            started=self.started,
            failed=self.rejected + self.queued + self.holding,
            rejected=self.rejected,
            never=tuple(self.never_ids),
            waiting=self.queued + self.holding,
            held=self.holding,
            holds=held,
            preempt=self.preempt,
            preemptions=preemptions,
            lost_gpu_hours=self.lost_us_units / 1e6 / 3600 / _U,
            reservations=self.reservations,
        )


def simulate_replay(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    requests: pl.DataFrame,
    options: PlacementOptions,
    start: datetime,
    end: datetime,
    empty: bool,
    queue: str = "fifo",
    on_tick: Callable[[ReplayView, int], None] | None = None,
    ticks: Sequence[int] = (),
    prefer: Mapping[str, str] | None = None,
    hold: str | Mapping[str, int] | None = None,
    preempt: bool | None = None,
    health: Health | None = None,
) -> ReplayResult:
    """By-time replay of the requests submitted in [start, end) under ``options.policy``.

    The fleet starts from the allocations active at ``start`` (see
    :func:`_occupy_recorded` for how they sit on GPUs), or empty when
    ``empty``; a recorded allocation ending in the window frees its capacity
    at its end_time. Each request arrives at its submit_time and is placed by
    the policy (the same scoring and all-or-nothing gang placement as fill
    mode); a started request departs after ``duration_s`` (null: never, in
    the window). A request that cannot start waits: ``fifo`` is strict (the
    head blocks everyone behind it), ``backfill`` starts any waiting request
    that fits, first-fit in arrival order (a request shape that failed once is
    not tried again in the same pass: equal requests fit equal states). The
    queue is retried after every instant with departures. Events run in time
    order, departures before arrivals at the same instant, arrivals in
    (submit_time, request_id) order. A request that does not fit even an empty
    fleet (under first-fit) is rejected on arrival and counts as failed.

    Args:
        nodes: the nodes frame.
        allocations: the recorded allocations (alloc_id, node_id, gpus, cpus,
            start_time, end_time; memory_gib, job_id optional); ignored when
            ``empty``.
        requests: the requests frame (as :func:`simulate_fill`, plus
            submit_time and duration_s); all of them weigh the fragmentation
            measure, those submitted in the window arrive.
        options: policy, seed (``random``), step_pct (the curve's step, in % of
            the window), frag_popularity, frag_cpu_shapes.
        start, end: the window (naive = UTC).
        empty: start from an empty fleet.
        queue: ``fifo`` or ``backfill``.
        on_tick, ticks: at each instant of ``ticks`` (epoch µs, ascending) in the
            window, after that instant's events, ``on_tick(view, t)`` may move
            work (:meth:`ReplayView.move`); the queue is then retried on the
            nodes it emptied (compaction over time). The result's
            ``allocations`` keep each pod on the node it started on.
        prefer: request_id -> node_id: a single-pod request tries that node
            first (its recorded placement), then the policy.
        health: the fleet's health over time. GPUs out of service take no new work
            while a span lasts (the work already on them runs on, as on a drained
            node) and come back when it ends; a node going down, or a GPU failing
            (the states down and unhealthy), ends what runs there: a recorded
            allocation ends at that instant, a replayed request stops (all its pods)
            and waits again in its place, having lost the work since its last
            checkpoint, as an evicted one (:meth:`Replay.outage`).

    Returns:
        The :class:`ReplayResult`.

    Raises:
        UsageError: unknown policy or queue, an empty window, no healthy GPU,
            or unusable requests.

    Example:
        >>> nodes = pl.DataFrame({"node_id": ["a"], "gpu_model": ["T4"], "gpus": [1],
        ...                       "cpus": [8.0]})
        >>> from datetime import timedelta
        >>> t0 = datetime(2026, 1, 1)
        >>> requests = pl.DataFrame({"request_id": ["r1", "r2"], "gpus": [1.0, 1.0],
        ...     "cpus": [1.0, 1.0], "submit_time": [t0, t0], "duration_s": [60.0, 60.0]})
        >>> none = pl.DataFrame(schema={"alloc_id": pl.String, "node_id": pl.String,
        ...     "gpus": pl.Float64, "cpus": pl.Float64, "start_time": pl.Datetime("us"),
        ...     "end_time": pl.Datetime("us")})
        >>> result = simulate_replay(nodes, none, requests, PlacementOptions(policy="best-fit"),
        ...                          t0, t0 + timedelta(hours=1), empty=True)
        >>> result.waits.select("request_id", "wait_s").rows()
        [('r1', 0.0), ('r2', 60.0)]
    """
    with paused_gc():
        return Replay(
            nodes, allocations, requests, options, start, end, empty, queue, prefer=prefer,
            hold=hold, preempt=preempt, health=health,
        ).run(on_tick, ticks)  # fmt: skip


_GIVE, _TAKE, _END_WORK = range(3)  # a health event's kind, in the order of one instant


def _outages(
    health: Health | None, fleet: _Fleet, lo: int, hi: int
) -> list[tuple[int, int, int, tuple[int, ...]]]:
    """The health events of [lo, hi) on the replay's nodes, in time order: (t, kind,
    node, GPUs). Each span (every source's intervals merged) takes its GPUs at its
    start (the window's start for one already going) and gives them back at its end;
    each piece in a failing state (:data:`fleetaudit.model.capacity.FAILING_STATES`)
    ends the work on them at its start."""
    if health is None or health.empty:
        return []
    index = {n: i for i, n in enumerate(fleet.node_ids)}

    def where(node_id: str, gpu: int | None) -> tuple[int, tuple[int, ...]]:
        n = index.get(node_id, -1)
        if n < 0:
            return n, ()
        count = int(fleet.gpus[n])
        if gpu is None:
            return n, tuple(range(count))
        return n, (int(gpu),) if gpu < count else ()

    events: list[tuple[int, int, int, tuple[int, ...]]] = []
    spans = health.spans.filter((pl.col("start_us") < hi) & (pl.col("end_us") > lo))
    for node_id, gpu, s, e in spans.rows():
        n, gpus = where(node_id, gpu)
        if gpus:
            events.append((max(s, lo), _TAKE, n, gpus))
            if e < hi:
                events.append((e, _GIVE, n, gpus))
    for node_id, gpu, s, _e, state, _reason, _source in health_pieces(health, lo, hi).rows():
        n, gpus = where(node_id, gpu)
        if gpus and state in FAILING_STATES:
            events.append((s, _END_WORK, n, gpus))
    events.sort()
    return events


def _replay_allocations(
    fleet: _Fleet,
    workload: _Workload,
    records: list[_Recorded],
    placed: list[tuple[int, int, int, list[int], int, int]],
    group_end: list[int],
) -> pl.DataFrame:
    w = workload
    node_ids = fleet.node_ids
    # column by column (a window's millions of pods): the strings per row, the numbers
    # and instants as arrays
    r = np.fromiter((p[0] for p in placed), dtype=np.int64, count=len(placed))
    starts = np.fromiter((p[4] for p in placed), dtype=np.int64, count=len(placed))
    ends = np.array(group_end, dtype=np.int64)[
        np.fromiter((p[5] for p in placed), dtype=np.int64, count=len(placed))
    ]
    rids = [w.request_ids[x] for x in r.tolist()]
    single = (w.pods[r] == 1).tolist()
    records_end = [None if rec.end_us == _NEVER else rec.end_us for rec in records]
    columns = {
        "alloc_id": [rec.alloc_id for rec in records]
        + [_pod_name(rid, one, p[1]) for rid, one, p in zip(rids, single, placed, strict=True)],
        "job_id": [rec.job_id for rec in records] + rids,
        "request_id": [None] * len(records) + rids,
        "node_id": [node_ids[rec.node] for rec in records] + [node_ids[p[2]] for p in placed],
        "gpus": [sum(rec.units) / _U for rec in records]
        + ((w.share[r] * w.count[r]).astype(np.int64) / _U).tolist(),
        "gpu_index": [",".join(map(str, rec.gpus)) for rec in records]
        + [",".join(map(str, p[3])) for p in placed],
        "cpus": [rec.cpu / _U for rec in records] + (w.cpu[r].astype(np.int64) / _U).tolist(),
        "memory_gib": [rec.memory / _U for rec in records]
        + (w.memory[r].astype(np.int64) / _U).tolist(),
        "start_time": [rec.start_us for rec in records] + starts.tolist(),
        "end_time": records_end + [None if e == _NEVER else e for e in ends.tolist()],
        "recorded": [True] * len(records) + [False] * len(placed),
    }
    return pl.DataFrame(
        columns,
        schema={"alloc_id": pl.String, "job_id": pl.String, "request_id": pl.String,
                "node_id": pl.String, "gpus": pl.Float64, "gpu_index": pl.String,
                "cpus": pl.Float64, "memory_gib": pl.Float64,
                "start_time": pl.Int64, "end_time": pl.Int64, "recorded": pl.Boolean},
    ).with_columns(pl.col("start_time", "end_time").cast(pl.Datetime("us")))  # fmt: skip


def _replay_waits(
    workload: _Workload, arriving: np.ndarray, submit: np.ndarray, started_at: np.ndarray
) -> pl.DataFrame:
    begun = started_at[arriving]
    submitted = submit[arriving]
    return pl.DataFrame(
        {
            "request_id": [workload.request_ids[r] for r in arriving.tolist()],
            "submit_time": submitted,
            "start_time": np.where(begun < 0, 0, begun),
            "wait_s": (begun - submitted) / 1e6,
            "started": begun >= 0,
        },
        schema={"request_id": pl.String, "submit_time": pl.Int64, "start_time": pl.Int64,
                "wait_s": pl.Float64, "started": pl.Boolean},
    ).select(
        "request_id",
        pl.col("submit_time").cast(pl.Datetime("us")),
        pl.when("started").then(pl.col("start_time").cast(pl.Datetime("us"))).alias("start_time"),
        pl.when("started").then("wait_s").alias("wait_s"),
    )  # fmt: skip


def _replay_task(
    args: tuple[
        pl.DataFrame,
        pl.DataFrame,
        pl.DataFrame,
        PlacementOptions,
        datetime,
        datetime,
        bool,
        str,
        Mapping[str, int] | None,
        bool | None,
        Health | None,
    ],
) -> pl.DataFrame:
    nodes, allocations, requests, options, start, end, empty, queue, hold, preempt, health = args
    return simulate_replay(
        nodes, allocations, requests, options, start, end, empty, queue, hold=hold,
        preempt=preempt, health=health,
    ).curve.drop("instant")  # fmt: skip


def replay_curves(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    requests: pl.DataFrame,
    options: PlacementOptions,
    start: datetime,
    end: datetime,
    empty: bool,
    queue: str = "fifo",
    policies: Sequence[str] = POLICIES,
    hold: Mapping[str, int] | None = None,
    preempt: bool | None = None,
    health: Health | None = None,
) -> dict[str, pl.DataFrame]:
    """By-time replay curves of several policies, each the mean over ``options.seeds`` seeds.

    ``hold``, ``preempt`` and ``health`` as :func:`simulate_replay` (the same for every run: a
    baseline's holds, so that the policies differ by their placements alone).

    Returns:
        policy -> curve (instant_pct, allocated_pct, fragmented_pct, queued,
        started, failed; Float64 means over the seeds).
    """
    for policy in policies:
        _check_replay(replace(options, policy=policy), start, end, queue)
    if options.seeds < 1:
        raise UsageError("seeds must be at least 1")
    tasks = [
        (nodes, allocations, requests, replace(options, policy=policy, seed=options.seed + i),
         start, end, empty, queue, hold, preempt, health)
        for policy in policies
        for i in range(options.seeds)
    ]  # fmt: skip
    curves = _map_runs(_replay_task, tasks, options.workers)
    result: dict[str, pl.DataFrame] = {}
    for p, policy in enumerate(policies):
        runs = curves[p * options.seeds : (p + 1) * options.seeds]
        result[policy] = (
            pl.concat(runs)
            .group_by("instant_pct")
            .agg(pl.exclude("instant_pct").cast(pl.Float64).mean())
            .sort("instant_pct")
        )
    return result
