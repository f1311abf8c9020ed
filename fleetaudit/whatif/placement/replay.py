"""Placement what-if by time: replay a window's arrivals and departures (see :func:`simulate_replay`)."""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from fleetaudit.core.errors import UsageError
from fleetaudit.core.parallel import map_processes as _map_runs
from fleetaudit.core.times import epoch_us, from_epoch_us
from fleetaudit.model.capacity import (
    FAILING_STATES,
    Health,
    first_fit_decreasing,
    health_pieces,
    optional_column,
)
from fleetaudit.whatif.placement.fleet import _U, _Fleet, _prepare_fleet, _row_ids
from fleetaudit.whatif.placement.policies import POLICIES, _Run
from fleetaudit.whatif.placement.workload import (
    LOCALITIES,
    PlacementOptions,
    _prepare_workload,
    _Workload,
)

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

QUEUES = ("fifo", "backfill")
_NEVER = np.iinfo(np.int64).max
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


def _replay_classes(workload: _Workload) -> np.ndarray:
    """Requests that fit exactly the same states share a class."""
    w = workload
    if not len(w.request_ids):
        return np.zeros(0, dtype=np.int64)
    return _row_ids(
        np.column_stack([w.share, w.count, w.cpu, w.memory, w.allowed, w.pods, w.locality])
    )


def _check_replay(options: PlacementOptions, start: datetime, end: datetime, queue: str) -> None:
    if options.policy not in POLICIES:
        raise UsageError(f"unknown policy {options.policy!r}: use one of {', '.join(POLICIES)}")
    if queue not in QUEUES:
        raise UsageError(f"unknown queue {queue!r}: use one of {', '.join(QUEUES)}")
    if not epoch_us(end) > epoch_us(start):
        raise UsageError("the replay window is empty: its end must come after its start")
    if not options.step_pct > 0:
        raise UsageError("the step percentage must be above 0")


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
                 group_start: list[int], duration: np.ndarray) -> None:  # fmt: skip
        self._run, self._records, self._groups = run, records, groups
        self._group_start, self._duration = group_start, duration
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
        # pod groups ended early (a health interval took their node: Replay.outage)
        self._group_end: dict[int, int] = {}
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
            begin, length = self._group_start[g], int(self._duration[r])
            rid = w.request_ids[r]
            ends = self._group_end.get(g, _NEVER if length < 0 else begin + length)
            for pod, n, _ in pods:
                name = _pod_name(rid, w.pods[r] == 1, pod)
                rows.append((name, rid, int(w.share[r]) * int(w.count[r]) / _U,
                             int(w.cpu[r]) / _U, int(w.memory[r]) / _U, begin, ends, n))  # fmt: skip
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
        if g in self._group_end:
            return self._t is None or self._group_end[g] > self._t
        if g >= self._groups_seen or self._t is None:
            return True
        length = int(self._duration[self._groups[g][0]])
        return length < 0 or self._group_start[g] + length > self._t

    def end(self, record: int | None, group: int | None, t: int) -> None:
        """Record ``record`` (its end_us already set) or pod group ``group`` ended at t."""
        if record is not None:
            self._row_end[record] = t
        if group is not None:
            self._group_end[group] = t
            if group < len(self._group_row):
                first = self._group_row[group]
                self._row_end[first : first + len(self._groups[group][1])] = t

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
            rec.node, rec.gpus, rec.units = d, taken, units
            self._node_records.setdefault(d, set()).add(i)
            self._row_node[i] = d
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
        return True


class Replay:
    """One by-time replay (see :func:`simulate_replay`): its state and its steps.

    The constructor prepares the fleet, the window's workload and the recorded
    state at ``start``; :meth:`run` then plays the events in time order (each
    instant's departures (:meth:`depart`), then the queue's retry
    (:meth:`retry`), then its arrivals (:meth:`arrive`)) and returns the
    :class:`ReplayResult`. A replay runs once.

    ``precheck`` (default on): at a departure, a waiting request is tried only
    where the nodes freed at that instant could now host it (see :meth:`retry`);
    off, every waiting shape (fifo: the head) is tried everywhere, the plain
    reference the pre-check must give the same results as.

    ``memo`` (default on, with the pre-check): within one retry pass, a pod shape
    that no freed node can take is not tried again (the pass only takes room), a
    waiting request that cannot start on a freed node is skipped before the
    policy runs, and a single pod is checked and chosen on the freed nodes only.
    Off: the engine as it was before, which the tests compare it to.

    ``index`` (default on, backfill with the memo): the same decisions as the memo,
    found with arrays over the replay classes instead of one check per waiting
    shape: a retry pass checks every waiting class against the freed nodes at
    once, walks the classes that fit in the order of their oldest request, and
    after each start checks the rest again at once (a start only takes room);
    an arrival whose class already waits, and failed everywhere since the last
    room the queue's passes did not see, queues without a try (see
    :meth:`arrive`). Off: the memo's pass, which the tests compare it to.
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
        precheck: bool = True,
        memo: bool = True,
        index: bool = True,
        health: Health | None = None,
    ) -> None:
        _check_replay(options, start, end, queue)
        fleet = _prepare_fleet(nodes)
        if fleet.total_gpus == 0:
            raise UsageError("the fleet has no healthy GPUs to replay onto")
        frame = requests.sort("submit_time", "request_id", nulls_last=True, maintain_order=True)
        if "trace_order" in frame.columns:
            frame = frame.drop("trace_order")
        start_us, end_us = epoch_us(start), epoch_us(end)
        submit = frame["submit_time"].dt.epoch("us").fill_null(_NEVER).to_numpy().astype(np.int64)
        inside = (submit >= start_us) & (submit < end_us)
        # Only the requests submitted in the window arrive: the workload is theirs (in
        # the same order), while every request weighs the fragmentation measure.
        window = frame.filter(pl.Series(inside))
        submit = submit[inside]
        # By time, the measure weighs shapes by the GPUs they ask for: requests without
        # GPUs (most of a serving fleet's) would otherwise make every idle GPU a fragment.
        workload = _prepare_workload(
            window, fleet, replace(options, frag_weight="gpus"), weigh=frame
        )
        duration_s = optional_column(window, "duration_s", pl.Float64, None).to_numpy()
        duration = np.where(np.isnan(duration_s), -1, np.round(np.nan_to_num(duration_s) * 1e6))
        self.options, self.queue, self.empty = options, queue, empty
        self.start, self.end = start, end
        self.precheck, self.memo = precheck, memo and precheck
        self.fleet, self.workload = fleet, workload
        self.start_us, self.end_us = start_us, end_us
        self.submit = submit
        self.duration = duration.astype(np.int64)
        self.arriving = np.arange(len(submit))
        self.classes = classes = _replay_classes(workload)

        self.engine = run = _Run(fleet, workload, options.policy, options.seed)
        run.narrow = self.memo
        # requests whose pods are equal (what fits one pod fits the other)
        self.pod_shape = (
            _row_ids(np.column_stack([workload.share, workload.count, workload.cpu,
                                      workload.memory, workload.allowed]))
            if len(classes) else np.zeros(0, dtype=np.int64)
        )  # fmt: skip
        # (time, seq, departure: >= 0 pod group, < 0 record)
        self.heap: list[tuple[int, int, int]] = []
        self.records: list[_Recorded] = []
        if not empty:
            self.records = _occupy_recorded(run, allocations, start_us, end_us)
            for i, record in enumerate(self.records):
                if record.end_us < end_us:
                    self.heap.append((record.end_us, len(self.heap), -1 - i))
            heapq.heapify(self.heap)
        self.seq = len(self.heap)

        self.probe: _Run | None = None  # first-fit on an empty fleet: does a class ever fit
        self.never: dict[int, bool] = {}

        self.started_at = np.full(len(workload.request_ids), -1, dtype=np.int64)
        # request, pod, node, GPUs, start
        self.placed: list[tuple[int, int, int, list[int], int]] = []
        self.groups: list[tuple[int, list[tuple[int, int, list[int]]]]] = []
        self.group_start: list[int] = []
        self.started = self.rejected = 0

        self.preferred = np.full(len(workload.request_ids), -1, dtype=np.int64)
        if prefer:
            node_index = {n: i for i, n in enumerate(fleet.node_ids)}
            for r_, rid in enumerate(workload.request_ids):
                n_ = node_index.get(prefer.get(rid, ""), -1)
                if n_ >= 0 and workload.pods[r_] == 1:
                    self.preferred[r_] = n_

        self.fifo: deque[int] = deque()
        # backfill: class -> (arrival, request)
        self.waiting: dict[int, deque[tuple[int, int]]] = {}
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
        # The indexed backfill (see the class's docstring): per replay class, what one pod
        # needs (a share pod: its share in the node's largest free share; a whole-GPU pod:
        # its GPUs fully free; else nothing), whether the class waits, the arrival of
        # its oldest waiting request, and whether that request would fail anywhere now.
        self.index = index and self.memo and queue == "backfill"
        reps = self.rep
        share, count = workload.share[reps], workload.count[reps]
        self.class_allowed = workload.allowed[reps]
        self.class_cpu, self.class_memory = workload.cpu[reps], workload.memory[reps]
        self.class_largest = np.where((count > 0) & (share < _U), share, 0)
        self.class_whole = np.where((count > 0) & (share >= _U), count, 0)
        self.class_waits = np.zeros(len(reps), dtype=bool)
        self.class_head = np.full(len(reps), _NEVER, dtype=np.int64)
        self.class_blocked = np.zeros(len(reps), dtype=bool)
        self.freed_domain_nodes: dict[int, np.ndarray] = {}  # this pass: freed domains' nodes

        self.total = fleet.total_gpus * _U
        window_us = end_us - start_us
        steps = math.floor(100 / options.step_pct + 1e-9)
        self.marks = [min(options.step_pct * i, 100.0) for i in range(steps + 1)]
        if self.marks[-1] < 100.0:
            self.marks.append(100.0)
        self.instants = [start_us + round(window_us * m / 100) for m in self.marks]
        self.curve: dict[str, list[object]] = {
            "instant": [], "instant_pct": [], "allocated_pct": [], "fragmented_pct": [],
            "queued": [], "started": [], "failed": [],
        }  # fmt: skip
        self.mark = 0
        self.view = ReplayView(run, self.records, self.groups, self.group_start, self.duration)
        self._done = False

        # Health over time (see :meth:`outage`): per (node, GPU), the spans covering it
        # now and the units they hold; the events of the window, in time order.
        self.outages = _outages(health, fleet, start_us, end_us)
        self.k_out = 0
        self.out_count = np.zeros(run.state.free.shape, dtype=np.int64)
        self.out_held = np.zeros(run.state.free.shape, dtype=np.int64)
        self.out_total = 0  # units the outages hold
        self.gone: set[int] = set()  # heap items an outage ended before their departure
        self.group_first: list[int] = []  # pod group -> its first row of placed
        self.placed_end: dict[int, int] = {}  # row of placed -> the instant an outage ended it
        self.interrupted = 0  # pod groups and recorded allocations an outage ended
        if self.outages:
            self.view.out_of_service = self.out_count

    # ---- steps

    def fits_empty(self, r: int) -> bool:
        """Whether request r fits the empty fleet (first-fit); once per replay class."""
        c = int(self.classes[r])
        if c not in self.never:
            if self.probe is None:
                self.probe = _Run(self.fleet, self.workload, "first-fit", 0)
            pods = self.probe.place(r)
            self.never[c] = pods is None
            for _, n, used in reversed(pods or []):
                self.probe._undo(r, n, used)
        return not self.never[c]

    def try_start(self, r: int, t: int, among: np.ndarray | None = None) -> bool:
        """Start request r at t if it fits (its recorded node first, when preferred)."""
        run = self.engine
        pods = None
        n_pref = int(self.preferred[r])
        if n_pref >= 0 and (among is None or n_pref in among):
            pods = run.place(r, np.array([n_pref], dtype=np.int64))
        if pods is None:
            pods = run.place(r, among)
        if pods is None:
            return False
        self.group_start.append(t)
        self.started_at[r] = t
        self.started += 1
        self.group_first.append(len(self.placed))
        self.placed.extend((r, pod, n, used, t) for pod, n, used in pods)
        length = int(self.duration[r])
        if length >= 0 and t + length < self.end_us:
            heapq.heappush(self.heap, (t + length, self.seq, len(self.groups)))
            self.seq += 1
        self.groups.append((r, pods))
        return True

    def _freed_domains_room(self, r: int, freed: np.ndarray) -> int:
        """The most pods of r's shape one domain (or node) holding a freed node can take."""
        w, run = self.workload, self.engine
        shape = (int(w.locality[r]), int(w.share[r]), int(w.count[r]), int(w.cpu[r]),
                 int(w.memory[r]), int(w.allowed[r]))  # fmt: skip
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
                room = run.room(r, nodes)
                if len(nodes) and domain[nodes[0]] == domain[nodes[-1]]:  # one domain
                    most = int(room.sum())
                else:
                    most = int(np.bincount(domain[nodes], weights=room).max())
            else:
                most = int(run.room(r, freed).max())
            self.freed_room[shape] = most
        return most

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
        (a mask over ``cls``): :meth:`_Run.fits` of each class's requests, at once."""
        st = self.engine.state
        if len(nodes) == 1:
            n = int(nodes[0])
            return (
                self.workload.model_ok[self.class_allowed[cls], n]
                & (self.class_cpu[cls] <= st.cpu[n])
                & (self.class_memory[cls] <= st.memory[n])
                & (self.class_largest[cls] <= st.largest[n])
                & (self.class_whole[cls] <= st.whole[n])
            )
        ok = self.workload.model_ok[self.class_allowed[cls][:, None], nodes[None, :]]
        ok &= self.class_cpu[cls][:, None] <= st.cpu[nodes][None, :]
        ok &= self.class_memory[cls][:, None] <= st.memory[nodes][None, :]
        ok &= self.class_largest[cls][:, None] <= st.largest[nodes][None, :]
        ok &= self.class_whole[cls][:, None] <= st.whole[nodes][None, :]
        return ok.any(axis=1)

    def _retry_indexed(self, t: int, freed: list[int]) -> None:
        """The memo's backfill pass (see :meth:`retry`), with the waiting classes
        checked against the freed nodes at once.

        The memo pops the waiting classes in the order of their oldest request and
        skips one whose pod no freed node takes now; a start only takes room, so the
        classes that fit after a start are among those that fit before it, and until
        a start the classes that fit stay the same. Here the classes that fit are
        walked in that order, and checked again at once after each start.
        """
        waiting, workload, gang, hopeless = self.waiting, self.workload, self.gang, self.hopeless
        nodes = np.array(sorted(set(freed)), dtype=np.int64)
        self.freed_room.clear()
        self.freed_domain_nodes.clear()
        cls = np.flatnonzero(self.class_waits)
        cls = cls[self._classes_fit(cls, nodes)]
        while len(cls):
            order = cls[np.argsort(self.class_head[cls])]
            for i in range(len(order)):
                c = int(order[i])
                q = waiting[c]
                r = q[0][1]
                if c in hopeless and self._freed_domains_room(r, nodes) < int(workload.pods[r]):
                    continue
                if self.try_start(r, t, nodes):
                    break
                if gang[r]:
                    hopeless.add(c)
            else:
                return
            q.popleft()
            self.queued -= 1
            hopeless.discard(c)
            rest = order[i + 1 :]
            if q:
                self.class_head[c] = q[0][0]
                rest = np.append(rest, c)
            else:
                del waiting[c]
                self.class_waits[c] = False
                self.class_head[c] = _NEVER
                self.class_blocked[c] = False
            if not len(rest):
                return
            cls = rest[self._classes_fit(rest, nodes)]

    def retry(self, t: int, freed: list[int]) -> None:
        """Start what waits and now fits, after the nodes ``freed`` got room back at t."""
        if self.index:
            self._retry_indexed(t, freed)
            return
        precheck, workload = self.precheck, self.workload
        if self.queue == "fifo":
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
                if self.gang[head] and self._freed_domains_room(head, nodes) < int(
                    workload.pods[head]
                ):
                    return
                among = nodes
            while fifo and self.try_start(fifo[0], t, among):
                fifo.popleft()
                self.queued -= 1
                among = None  # the others wait untried behind the head
            return
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
        no_room: set[int] = set()  # this pass: pod shapes no freed node can take
        while heads:
            _, c = heapq.heappop(heads)
            q = waiting[c]
            r = q[0][1]
            if memo:
                # r's shape failed at its last try, and since then only the freed nodes
                # gained room: a single pod fits only there, a gang needs room in pods
                # (the fleet's, or a domain's) that only they can have raised. With
                # none of them able to take one pod, it fails again.
                shape = int(pod_shape[r])
                if shape in no_room:
                    continue
                if not engine.fits(r, nodes).any():
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
            if self.try_start(r, t, nodes if precheck else None):
                q.popleft()
                self.queued -= 1
                if q:
                    heapq.heappush(heads, (q[0][0], c))
                else:
                    del waiting[c]
                self.hopeless.discard(c)
            elif self.gang[r]:
                self.hopeless.add(c)

    def arrive(self, r: int, arrival: int, t: int) -> None:
        """Request r (the ``arrival``-th of the window) arrives at t: start it or queue it."""
        if not self.fits_empty(r):
            self.rejected += 1
            return
        if self.queue == "fifo":
            if not self.fifo and self.try_start(r, t):
                return
            self.fifo.append(r)
        else:
            c = int(self.classes[r])
            # Indexed: a class that waits and failed everywhere since the last room the
            # queue's passes did not see fails again (a pass leaves every waiting class
            # failing on the freed nodes, and nothing else gained room).
            if not (self.index and self.class_blocked[c]) and self.try_start(r, t):
                return
            if self.gang[r]:
                self.hopeless.add(c)
            self.waiting.setdefault(c, deque()).append((arrival, r))
            if self.index:
                if not self.class_waits[c]:
                    self.class_waits[c] = True
                    self.class_head[c] = arrival
                self.class_blocked[c] = True
        self.queued += 1

    def depart(self, t: int) -> list[int]:
        """Release everything that ends at t; the nodes freed (with repeats)."""
        run, heap, records, groups = self.engine, self.heap, self.records, self.groups
        freed: list[int] = []
        while heap and heap[0][0] == t:
            _, _, item = heapq.heappop(heap)
            if item in self.gone:  # an outage ended it already
                continue
            if item < 0:
                _release_recorded(run, records[-1 - item])
                freed.append(records[-1 - item].node)
            else:
                r, pods = groups[item]
                for _, n, used in reversed(pods):
                    run._undo(r, n, used)
                    freed.append(n)
        return freed

    def sample(self, upto: int) -> None:
        """Record the curve's points at the instants up to ``upto`` (before its events)."""
        run, curve, instants = self.engine, self.curve, self.instants
        while self.mark < len(instants) and instants[self.mark] <= upto:
            allocated = self.total - int(run.state.free_total.sum()) - self.out_total
            last = self.mark == len(instants) - 1
            curve["instant"].append(from_epoch_us(instants[self.mark]))
            curve["instant_pct"].append(self.marks[self.mark])
            curve["allocated_pct"].append(100.0 * allocated / self.total)
            curve["fragmented_pct"].append(100.0 * run.fragmentation() / self.total)
            curve["queued"].append(self.queued)
            curve["started"].append(self.started)
            curve["failed"].append(self.rejected + (self.queued if last else 0))
            self.mark += 1

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

    def outage(self, t: int) -> tuple[list[int], list[int]]:
        """The health events at t (:func:`_outages`), ends first: a span that ends gives
        its GPUs back; one that begins takes its GPUs as work leaves them (new work
        lands on none of them meanwhile); a failing interval (state down or unhealthy)
        ends the work on what it covers at its start: a recorded allocation ends there,
        a replayed request's pods all stop and the request waits again, from scratch.

        Returns the nodes that got room back and the requests to queue again."""
        run, st, out = self.engine, self.engine.state, self.out_count
        freed: list[int] = []
        evicted: list[int] = []
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
                freed += self._end_work(n, set(at), t, evicted)
            self.hold_out([n])
        self.hold_out(freed)
        return freed, evicted

    def _end_work(self, n: int, gpus: set[int], t: int, evicted: list[int]) -> list[int]:
        """End the work on GPUs ``gpus`` of node n at t; the nodes it held (module doc)."""
        run, view = self.engine, self.view
        freed: list[int] = []
        recs, held = view._on_node(n)
        for i in recs:
            rec = self.records[i]
            if rec.node != n or rec.end_us <= t or -1 - i in self.gone or not gpus & set(rec.gpus):
                continue
            _release_recorded(run, rec)
            rec.end_us = t
            self.gone.add(-1 - i)
            view.end(i, None, t)
            freed.append(n)
            self.interrupted += 1
        for g in held:
            r, pods = self.groups[g]
            length = int(self.duration[r])
            live = g not in self.gone and (length < 0 or self.group_start[g] + length > t)
            if not live or not any(m == n and gpus & set(used) for _, m, used in pods):
                continue
            for _, m, used in reversed(pods):
                run._undo(r, m, used)
                freed.append(m)
            self.gone.add(g)
            view.end(None, g, t)
            first = self.group_first[g]
            for row in range(first, first + len(pods)):
                self.placed_end[row] = t
            self.started -= 1
            self.started_at[r] = -1
            self.interrupted += 1
            evicted.append(r)
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
        start_us, end_us, submit, arriving = self.start_us, self.end_us, self.submit, self.arriving
        heap, view = self.heap, self.view
        tick_list = [int(x) for x in ticks if start_us <= int(x) < end_us] if on_tick else []
        k_tick = 0
        a = 0
        outages = self.outages
        while True:
            t_dep = heap[0][0] if heap else _NEVER
            t_arr = int(submit[arriving[a]]) if a < len(arriving) else _NEVER
            t_tick = tick_list[k_tick] if k_tick < len(tick_list) else _NEVER
            t_out = outages[self.k_out][0] if self.k_out < len(outages) else _NEVER
            t = min(t_dep, t_arr, t_tick, t_out)
            if t >= end_us:
                break
            self.sample(t)
            if t_out == t:
                # health first: what it ends departs now, then the instant's departures
                freed, evicted = self.outage(t)
                if t_dep == t:
                    freed += self.depart(t)
                    self.hold_out(freed)
                self.class_blocked[:] = False  # room the queue's passes did not see
                if freed and self.queued:
                    self.retry(t, freed)
                for r in evicted:  # each waits again, in its place of arrival
                    self.arrive(r, r, t)
                while a < len(arriving) and int(submit[arriving[a]]) == t:
                    self.arrive(int(arriving[a]), a, t)
                    a += 1
                continue
            if t_tick == t and t_dep > t and t_arr > t and on_tick is not None:
                # a tick runs after its instant's departures and arrivals
                k_tick += 1
                view.queued, view.freed = self.queued, []
                on_tick(view, t)
                # a move may give room the queue's pass does not see (a repacked node)
                self.class_blocked[:] = False
                if self.queued and view.freed:
                    self.retry(t, view.freed)
                continue
            if t_dep == t:
                freed = self.depart(t)
                self.hold_out(freed)
                if self.queued:
                    self.retry(t, freed)
            while a < len(arriving) and int(submit[arriving[a]]) == t:
                self.arrive(int(arriving[a]), a, t)
                a += 1
        self.sample(end_us)
        fleet, workload = self.fleet, self.workload
        return ReplayResult(
            policy=self.options.policy,
            seed=self.options.seed,
            queue=self.queue,
            empty=self.empty,
            start=self.start,
            end=self.end,
            curve=pl.DataFrame(self.curve, schema=_REPLAY_CURVE),
            allocations=_replay_allocations(
                fleet, workload, self.records, self.placed, self.duration, self.placed_end
            ),
            waits=_replay_waits(workload, arriving, submit, self.started_at),
            gpus=fleet.total_gpus,
            arrived=len(arriving),
            started=self.started,
            failed=self.rejected + self.queued,
            rejected=self.rejected,
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
            and waits again from scratch, in its place of arrival (:meth:`Replay.outage`).

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
    return Replay(
        nodes, allocations, requests, options, start, end, empty, queue, prefer=prefer,
        health=health,
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
    placed: list[tuple[int, int, int, list[int], int]],
    duration: np.ndarray,
    placed_end: Mapping[int, int] | None = None,
) -> pl.DataFrame:
    w = workload
    node_ids = fleet.node_ids
    # column by column (a window's millions of pods): the strings per row, the numbers
    # and instants as arrays
    r = np.fromiter((p[0] for p in placed), dtype=np.int64, count=len(placed))
    starts = np.fromiter((p[4] for p in placed), dtype=np.int64, count=len(placed))
    length = duration[r]
    rids = [w.request_ids[x] for x in r.tolist()]
    single = (w.pods[r] == 1).tolist()
    records_end = [None if rec.end_us == _NEVER else rec.end_us for rec in records]
    ends = np.where(length < 0, 0, starts + length)
    early = np.full(len(placed), -1, dtype=np.int64)
    for row, t in (placed_end or {}).items():
        early[row] = t
    columns = {
        "alloc_id": [rec.alloc_id for rec in records] + [
            _pod_name(rid, one, p[1]) for rid, one, p in zip(rids, single, placed, strict=True)
        ],
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
        "end_time": records_end
        + [
            x if x >= 0 else None if n < 0 else e
            for x, n, e in zip(early.tolist(), length.tolist(), ends.tolist(), strict=True)
        ],
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
        pl.DataFrame, pl.DataFrame, pl.DataFrame, PlacementOptions, datetime, datetime, bool,
        str, Health | None,
    ],
) -> pl.DataFrame:
    nodes, allocations, requests, options, start, end, empty, queue, health = args
    return simulate_replay(
        nodes, allocations, requests, options, start, end, empty, queue, health=health
    ).curve.drop("instant")


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
    health: Health | None = None,
) -> dict[str, pl.DataFrame]:
    """By-time replay curves of several policies, each the mean over ``options.seeds`` seeds
    (``health``: as :func:`simulate_replay`).

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
         start, end, empty, queue, health)
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
