"""Placement what-if of SPEC §5, fill mode: feed requests onto an empty fleet under a policy.

Pure functions over the store's ``nodes`` and ``requests`` frames (extra
columns are ignored; neither frame is mutated) and a frozen
:class:`PlacementOptions`. One run is deterministic in its seed.

Fleet model. Only healthy nodes take work, and only they count in the fleet's
GPUs. Every node keeps the free share of each of its GPUs in integer
micro-units (:data:`~fleetaudit.occupancy.SHARE_UNITS` per GPU), its free CPUs
and free memory (micro-units too; a null ``memory_gib`` is unbounded). Sharing
is per GPU: a share pod (0 < gpus < 1) needs ONE GPU with that share left; a
whole-GPU pod of p GPUs needs p fully free GPUs on one node.

Requests. ``gpus`` is the request's GPU demand; ``gpus_per_pod`` (default
min(gpus, 8)) splits it into k = gpus / gpus_per_pod pods, placed
all-or-nothing (with ``locality`` ``switch`` every pod stays in the first
pod's switch domain, with ``block`` in its block domain
(:func:`fleetaudit.occupancy.block_domains`), with ``node`` on its node). A
pod's CPUs are ``cpus / k`` when ``cpus`` is given, else ``cpus_per_gpu`` x its GPUs (memory alike).
``gpu_model`` is one model, several joined by ``|``, or empty for any.

Fill mode (the FGD paper's method). No departures. Requests arrive in list
order (``trace_order``, else ``submit_time`` then ``request_id``, else row
order); when the list runs out they are drawn again uniformly with replacement
with the seed, until the arrived GPU demand reaches ``fill_pct``% of the
fleet's GPUs. A request that cannot be placed fails and is not retried. At
every ``step_pct``% of arrival the curve records allocated % (allocated GPUs,
shares as their fraction, over all GPUs), fragmented % and failed requests.

Policies (ties always go to the lowest node index, nodes in node_id order):

- ``first-fit``: the lowest node index that fits;
- ``best-fit``: the node left with the least free GPU capacity, then the least
  free CPU (the FGD paper's best-fit baseline, without its score quantisation);
- ``random``: a uniformly drawn node among those that fit (seeded);
- ``fgd``: Fragmentation Gradient Descent (Weng et al., USENIX ATC'23): the
  node and GPU whose fragmentation grows least (see below);
- ``topology``: the ASI paper's packing: among the nodes that fit, those whose
  (switch domain, GPU model) group is already the most allocated, by share of
  its GPUs, then best-fit inside it; gangs then stay in few domains and the
  empty domains stay whole for later gangs.

A share pod goes to the node's tightest GPU that holds it (least share left,
then lowest index), as the FGD simulator does for every policy but FGD; a
whole-GPU pod takes the lowest-indexed fully free GPUs.

Fragmentation (the FGD paper). The workload's pod shapes m = (CPUs, GPU share or
count, model set) are counted over the request list; the most popular ones that
cover ``frag_popularity`` of the pods are kept and their frequencies p_m
renormalised (``frag_popularity``: 1.0 keeps every shape, as the paper defines
it; the authors' simulator keeps 95%). CPU-only pods count, as in their runs. For a node with free GPU capacity T (sum of its GPUs' free
shares), its fragment w.r.t. m is:

- T, when m cannot run on the node at all (model not allowed, too few GPUs with
  m's share left, too few free CPUs), or when m asks for no GPU;
- else the free shares of the GPUs whose free share is below m's per-GPU
  demand (they can never serve m).

F_n = sum_m p_m x fragment_n(m); the fleet's fragmentation is sum_n F_n, shown as
% of all GPUs. FGD places each pod where F_n(after) - F_n(before) is least
(memory is a constraint, not part of the measure, as in the paper).

Speed. Node state is numpy arrays (nodes x GPUs for the shares); every pod's
feasibility and policy score is one vectorised pass over all nodes. FGD's
fragmentation increase of a node for a pod shape depends only on that node's
state, so it is cached per (pod shape, node) and recomputed only for the nodes
that changed since the shape was last scored; identical node states in a batch
are evaluated once.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np
import polars as pl

from fleetaudit.errors import UsageError
from fleetaudit.occupancy import (
    SHARE_UNITS,
    block_domains,
    first_fit_decreasing,
    optional_column,
    switch_domains,
)
from fleetaudit.options import PLACEMENT_POLICIES
from fleetaudit.parallel import map_processes as _map_runs
from fleetaudit.times import epoch_us, from_epoch_us

__all__ = [
    "POLICIES",
    "QUEUES",
    "FillResult",
    "PlacementOptions",
    "ReplayResult",
    "ReplayView",
    "fill_curves",
    "fleet_fragmentation",
    "replay_curves",
    "simulate_fill",
    "simulate_replay",
]


POLICIES = PLACEMENT_POLICIES
LOCALITIES = ("any", "switch", "node", "block")  # indices are stored: append only

_U = SHARE_UNITS
_UNBOUNDED = np.int64(1) << np.int64(60)  # free memory of a node with unknown memory
_CPU_KEY = np.int64(1) << np.int64(32)  # best-fit key = free GPU units x this + free CPU units
_ROUND = 6  # decimals of a fragmentation delta (micro-GPUs) compared for ties
_DEDUP_AT = 48  # batches at least this large evaluate each distinct node state once


@dataclass(frozen=True)
class PlacementOptions:
    """Options of a placement what-if; the defaults are the SPEC's.

    Args:
        policy: one of :data:`POLICIES`.
        fill_pct: fill mode up to this % of the fleet's GPUs (None = by-time
            replay, :func:`simulate_replay`).
        seeds: runs averaged by :func:`fill_curves` (seeds ``seed .. seed+seeds-1``).
        seed: the seed of one run (resampling and ``random``).
        step_pct: the curve's step: in fill mode, in % of the fleet's GPUs
            arrived; in by-time replay, in % of the window's duration.
        frag_popularity: the share of pods whose shapes make the workload of
            the fragmentation measure. 1.0 (every shape) is the paper's
            definition; the authors' simulator cuts at 0.95, which hides rare
            large pods (8 GPUs) from FGD and costs it 14 points of allocation
            on the trace's gpushare40 list.
        frag_cpu_shapes: count CPU-only pod shapes in that workload (as the
            FGD simulator's experiments do; they see every free GPU as fragment).
        max_arrivals: budget of arrivals in one run; a run that hits it stops
            early and says so (:attr:`FillResult.budget_hit`).
        workers: processes used by :func:`fill_curves` (1 = in process).
        shuffle: feed the list in an order drawn with the seed instead of list
            order (the FGD authors' simulator shuffles its pod list per seed).
        frag_weight: what weighs a pod shape in the fragmentation measure:
            ``pods`` (how often it occurs: the FGD paper's measure, fill mode) or
            ``gpus`` (the GPUs its pods ask for, so shapes without GPUs weigh
            nothing: :func:`simulate_replay` uses it).
    """

    policy: str = "fgd"
    fill_pct: float | None = None
    seeds: int = 1
    seed: int = 0
    step_pct: float = 5.0
    frag_popularity: float = 1.0
    frag_cpu_shapes: bool = True
    max_arrivals: int = 2_000_000
    workers: int = 1
    shuffle: bool = False
    frag_weight: str = "pods"


@dataclass(frozen=True)
class FillResult:
    """One fill run.

    Attributes:
        curve: arrived_pct, allocated_pct, fragmented_pct (Float64), failed
            (Int64), one row per step of arrival reached, ascending.
        allocations: the final placement, one row per pod, in arrival order:
            alloc_id, job_id, request_id, node_id, gpus (a share below 1),
            gpu_index (the GPUs used, e.g. ``"0,1"``), cpus, memory_gib, arrival.
        gpus: the fleet's GPUs (healthy nodes).
        arrived: requests that arrived; failed: those that could not be placed.
        budget_hit: the run stopped at ``max_arrivals`` before ``fill_pct``.
    """

    policy: str
    seed: int
    curve: pl.DataFrame
    allocations: pl.DataFrame
    gpus: int
    arrived: int
    failed: int
    budget_hit: bool


# ----------------------------------------------------------------- preparation


@dataclass(frozen=True)
class _Fleet:
    node_ids: list[str]
    models: list[str]
    model: np.ndarray  # (N,) model index
    gpus: np.ndarray  # (N,) GPUs
    cpus: np.ndarray  # (N,) micro-cores
    memory: np.ndarray  # (N,) micro-GiB, _UNBOUNDED when unknown
    domain: np.ndarray  # (N,) switch-domain index
    block: np.ndarray  # (N,) block-domain index (occupancy.block_domains)
    group: np.ndarray  # (N,) (domain, model) group index
    group_gpus: np.ndarray  # (groups,) GPU units of each group
    width: int  # GPUs of the widest node (columns of the share matrix)

    @property
    def total_gpus(self) -> int:
        return int(self.gpus.sum())


@dataclass(frozen=True)
class _Shapes:
    """The workload of the fragmentation measure: GPU shapes and the CPU-only weight."""

    cpu: np.ndarray  # (S,) micro-cores per pod
    share: np.ndarray  # (S,) units needed on each GPU (U for whole GPUs)
    count: np.ndarray  # (S,) GPUs per pod
    allowed: np.ndarray  # (models, S) bool: a node of that model can serve the shape
    weight: np.ndarray  # (S,) popularity
    cpu_only: float  # popularity of the CPU-only shapes
    shares: np.ndarray  # (V,) the distinct values of share
    share_of: np.ndarray  # (S,) index of each shape's share in shares


@dataclass(frozen=True)
class _Workload:
    request_ids: list[str]
    demand: np.ndarray  # (R,) GPU units of the whole request (arrival accounting)
    pods: np.ndarray  # (R,) pods per request
    share: np.ndarray  # (R,) units per GPU of each pod (U whole, 0 CPU-only)
    count: np.ndarray  # (R,) GPUs per pod
    cpu: np.ndarray  # (R,) micro-cores per pod
    memory: np.ndarray  # (R,) micro-GiB per pod
    allowed: np.ndarray  # (R,) index into model_ok
    model_ok: np.ndarray  # (sets, N) bool: nodes of an allowed model
    locality: np.ndarray  # (R,) index into LOCALITIES
    key: np.ndarray  # (R,) pod-shape index for FGD's cache: (cpu, share, count)
    keys: int
    shapes: _Shapes = field(repr=False)


def _row_ids(rows: np.ndarray) -> np.ndarray:
    """Dense ids of a 2-D integer array's rows, in lexicographic row order.

    The same ids as ``np.unique(rows, axis=0, return_inverse=True)``, by one
    1-D unique per column (the 2-D unique sorts rows as bytes: seconds on
    millions of rows).
    """
    ids = np.zeros(len(rows), dtype=np.int64)
    for column in rows.T:
        _, col = np.unique(column, return_inverse=True)
        _, ids = np.unique(ids * (int(col.max()) + 1) + col.reshape(-1), return_inverse=True)
        ids = ids.reshape(-1)
    return ids.astype(np.int64)


def _units(values: np.ndarray) -> np.ndarray:
    return np.round(values * _U).astype(np.int64)


def _prepare_fleet(nodes: pl.DataFrame) -> _Fleet:
    frame = nodes
    if "health" in frame.columns:
        frame = frame.filter(pl.col("health").is_null() | (pl.col("health") == "healthy"))
    frame = frame.sort(pl.col("node_id").cast(pl.String))
    node_ids = frame["node_id"].cast(pl.String).to_list()
    model_names = frame["gpu_model"].cast(pl.String).fill_null("").to_list()
    models = sorted(set(model_names))
    model = np.array([models.index(m) for m in model_names], dtype=np.int64)
    gpus = frame["gpus"].cast(pl.Int64).fill_null(0).to_numpy().astype(np.int64)
    cpus = _units(frame["cpus"].cast(pl.Float64).fill_null(0.0).to_numpy())
    memory_f = optional_column(frame, "memory_gib", pl.Float64, None).to_numpy()
    memory = np.where(np.isnan(memory_f), _UNBOUNDED, _units(np.nan_to_num(memory_f)))
    # A node with no switch is a domain by itself (SPEC §1).
    domains = switch_domains(frame).to_list()
    domain_names = sorted(set(domains))
    domain = np.array([domain_names.index(d) for d in domains], dtype=np.int64)
    _, block = np.unique(block_domains(frame).to_numpy(), return_inverse=True)
    pairs = domain * max(len(models), 1) + model
    _, group = np.unique(pairs, return_inverse=True)
    group = group.reshape(-1).astype(np.int64)
    group_gpus = np.bincount(group, weights=gpus * _U).astype(np.int64) if len(group) else group
    return _Fleet(
        node_ids=node_ids,
        models=models,
        model=model,
        gpus=gpus,
        cpus=cpus,
        memory=memory.astype(np.int64),
        domain=domain,
        block=block.reshape(-1).astype(np.int64),
        group=group,
        group_gpus=group_gpus,
        width=max(int(gpus.max()) if len(gpus) else 1, 1),
    )


def _ordered(requests: pl.DataFrame) -> pl.DataFrame:
    if "trace_order" in requests.columns:
        return requests.sort("trace_order", "request_id", nulls_last=True, maintain_order=True)
    if "submit_time" in requests.columns:
        return requests.sort("submit_time", "request_id", nulls_last=True, maintain_order=True)
    return requests


def _model_set(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(sorted({m.strip() for m in value.split("|") if m.strip()}))


@dataclass(frozen=True)
class _Quantities:
    """Per-request pod quantities of a requests frame (checked), in its row order."""

    pods: np.ndarray  # (R,) pods per request
    share: np.ndarray  # (R,) units per GPU of each pod (U whole, 0 CPU-only)
    count: np.ndarray  # (R,) GPUs per pod
    cpu: np.ndarray  # (R,) micro-cores per pod
    memory: np.ndarray  # (R,) micro-GiB per pod


def _request_id(frame: pl.DataFrame, row: int) -> str:
    return str(frame["request_id"].cast(pl.String)[row])


def _quantities(frame: pl.DataFrame) -> _Quantities:
    """The pods, GPU shares, CPUs and memory per pod of every row; UsageError on a bad row.

    Vectorised: the request ids are read only to name a bad row.
    """
    gpus = frame["gpus"].cast(pl.Float64).fill_null(0.0).to_numpy()
    if (gpus < 0).any():
        bad = _request_id(frame, int(np.argmax(gpus < 0)))
        raise UsageError(f"request {bad}: gpus is negative")
    is_share = (gpus > 0) & (gpus < 1)
    per_pod = optional_column(frame, "gpus_per_pod", pl.Float64, None).to_numpy()
    per_pod = np.where(np.isnan(per_pod), np.minimum(gpus, 8.0), per_pod)
    whole = gpus >= 1
    per_pod_whole = np.where(whole, per_pod, 1.0)
    pods_f = np.where(whole, gpus / np.maximum(per_pod_whole, 1e-12), 1.0)
    bad_rows = whole & (
        (per_pod_whole < 1)
        | (np.abs(per_pod_whole - np.round(per_pod_whole)) > 1e-9)
        | (np.abs(pods_f - np.round(pods_f)) > 1e-9)
    )
    if bad_rows.any():
        bad = _request_id(frame, int(np.argmax(bad_rows)))
        raise UsageError(
            f"request {bad}: gpus must be below 1 (a share) or a whole multiple of gpus_per_pod"
        )
    pods = np.round(pods_f).astype(np.int64)
    count = np.where(is_share, 1, np.where(whole, np.round(per_pod_whole), 0)).astype(np.int64)
    share = np.where(is_share, _units(gpus), np.where(whole, _U, 0)).astype(np.int64)
    pod_gpus = np.where(is_share, gpus, count.astype(np.float64))

    def per_pod_quantity(total: str, per_gpu: str) -> np.ndarray:
        totals = optional_column(frame, total, pl.Float64, None).to_numpy()
        rate = np.nan_to_num(optional_column(frame, per_gpu, pl.Float64, None).to_numpy())
        # A given total wins; the store may leave it null for GPU requests.
        values = np.where(np.isnan(totals), rate * pod_gpus, np.nan_to_num(totals) / pods)
        if (values < 0).any():
            bad = _request_id(frame, int(np.argmax(values < 0)))
            raise UsageError(f"request {bad}: {total} is negative")
        return _units(values)

    cpu = per_pod_quantity("cpus", "cpus_per_gpu")
    memory = per_pod_quantity("memory_gib", "memory_gib_per_gpu")
    return _Quantities(pods=pods, share=share, count=count, cpu=cpu, memory=memory)


def _check_localities(frame: pl.DataFrame) -> None:
    localities = optional_column(frame, "locality", pl.String, None)
    bad = (localities.is_not_null() & ~localities.is_in(list(LOCALITIES))).to_numpy()
    if bad.any():
        i = int(np.argmax(bad))
        value = localities[i]
        raise UsageError(
            f"request {_request_id(frame, i)}: locality {value!r} is not one of {LOCALITIES}"
        )


def _prepare_workload(
    requests: pl.DataFrame,
    fleet: _Fleet,
    options: PlacementOptions,
    weigh: pl.DataFrame | None = None,
) -> _Workload:
    """The per-request arrays of ``requests`` (in list order, :func:`_ordered`).

    ``weigh``: the requests whose pod shapes weigh the fragmentation measure
    (default: ``requests``), every one of them checked; ``requests`` must be
    some of its rows. Its model sets are numbered in its row order.
    """
    frame = _ordered(requests)
    everyone = frame if weigh is None else weigh
    every = _quantities(everyone)
    _check_localities(everyone)
    mine = every if weigh is None else _quantities(frame)
    ids = frame["request_id"].cast(pl.String).to_list()
    pods, share, count, cpu, memory = mine.pods, mine.share, mine.count, mine.cpu, mine.memory

    # Model sets numbered by first appearance in ``everyone`` (the fragmentation
    # measure orders equally popular shapes by this number).
    every_model = optional_column(everyone, "gpu_model", pl.String, None)
    model_sets: list[tuple[str, ...]] = []
    seen: dict[str | None, int] = {}
    for value in every_model.unique(maintain_order=True).to_list():
        models = _model_set(value)
        if models not in model_sets:
            model_sets.append(models)
        seen[value] = model_sets.index(models)
    allowed = np.array(
        [seen[v] for v in optional_column(frame, "gpu_model", pl.String, None).to_list()],
        dtype=np.int64,
    )
    model_ok = np.zeros((len(model_sets), len(fleet.node_ids)), dtype=bool)
    model_allowed = np.zeros((len(model_sets), len(fleet.models)), dtype=bool)
    for s, models in enumerate(model_sets):
        model_allowed[s] = [not models or m in models for m in fleet.models]
        model_ok[s] = model_allowed[s][fleet.model] if len(fleet.model) else False

    localities = optional_column(frame, "locality", pl.String, None).to_list()
    locality = np.empty(len(ids), dtype=np.int64)
    for i, value in enumerate(localities):
        if value is None:
            value = "node" if pods[i] <= 1 else "switch"
        locality[i] = LOCALITIES.index(value)

    key = _row_ids(np.column_stack([cpu, share, count])) if len(ids) else np.zeros(0, np.int64)
    # The shape frequencies from the distinct (cpu, share, count, model) rows: the pods
    # of equal rows summed (exact: integer counts), not one row per request.
    grouped = (
        pl.DataFrame(
            {"cpu": every.cpu, "share": every.share, "count": every.count, "pods": every.pods}
        )
        .with_columns(every_model.alias("model"))
        .group_by("cpu", "share", "count", "model")
        .agg(pl.col("pods").sum())
    )
    shapes = _workload_shapes(
        grouped["cpu"].to_numpy().astype(np.int64),
        grouped["share"].to_numpy().astype(np.int64),
        grouped["count"].to_numpy().astype(np.int64),
        grouped["pods"].to_numpy().astype(np.int64),
        np.array([seen[v] for v in grouped["model"].to_list()], dtype=np.int64),
        model_allowed,
        options,
    )
    return _Workload(
        request_ids=ids,
        demand=share * count * pods,
        pods=pods,
        share=share,
        count=count,
        cpu=cpu,
        memory=memory,
        allowed=allowed,
        model_ok=model_ok,
        locality=locality,
        key=key,
        keys=int(key.max()) + 1 if len(key) else 0,
        shapes=shapes,
    )


def _workload_shapes(
    cpu: np.ndarray,
    share: np.ndarray,
    count: np.ndarray,
    pods: np.ndarray,
    allowed: np.ndarray,
    model_allowed: np.ndarray,
    options: PlacementOptions,
) -> _Shapes:
    """The popular pod shapes and their frequencies (each pod of a gang counts).

    One row per request, or per group of equal requests with ``pods`` summed.
    """
    rows = np.column_stack([cpu, share, count, allowed])
    keep = np.ones(len(rows), dtype=bool) if options.frag_cpu_shapes else count > 0
    weighed = pods * count * share / _U if options.frag_weight == "gpus" else pods
    keep &= weighed > 0
    rows, weights = rows[keep], weighed[keep].astype(np.float64)
    if len(rows):
        inverse = _row_ids(rows)
        first = np.full(int(inverse.max()) + 1, len(rows), dtype=np.int64)
        np.minimum.at(first, inverse, np.arange(len(rows)))
        uniq = rows[first]
        freq = np.bincount(inverse, weights=weights)
        # Most popular first; equal counts in shape order, so the cut is stable.
        order = np.lexsort((*uniq.T[::-1], -freq))
        uniq, freq = uniq[order], freq[order]
        cumulative = np.cumsum(freq)
        cut = int(np.searchsorted(cumulative, options.frag_popularity * freq.sum() - 1e-9)) + 1
        uniq, freq = uniq[:cut], freq[:cut] / freq[:cut].sum()
    else:
        uniq, freq = np.zeros((0, 4), np.int64), np.zeros(0)
    gpu = uniq[:, 2] > 0
    shares, share_of = np.unique(uniq[gpu, 1], return_inverse=True)
    return _Shapes(
        cpu=uniq[gpu, 0],
        share=uniq[gpu, 1],
        count=uniq[gpu, 2],
        allowed=model_allowed[uniq[gpu, 3]].T.copy(),
        weight=freq[gpu],
        cpu_only=float(freq[~gpu].sum()),
        shares=shares.astype(np.int64),
        share_of=share_of.reshape(-1).astype(np.int64),
    )


# --------------------------------------------------------------- fragmentation


def _fragmentation(
    shapes: _Shapes, free: np.ndarray, cpu: np.ndarray, model: np.ndarray, dedup: bool = False
) -> np.ndarray:
    """F of each state row: free (M, G) GPU units, cpu (M,) micro-cores, model (M,).

    ``dedup``: work out the (integer) unusable units once per distinct row (many
    nodes of a fleet are in the same state); the weighted sum is still one
    product over every row, so the result is the same to the bit.
    """
    total = free.sum(axis=1)
    frag = total * shapes.cpu_only
    if len(shapes.weight):
        rows_free, rows_cpu, rows_model, inverse = free, cpu, model, None
        if dedup and len(free) >= _DEDUP_AT:
            rows = np.column_stack([model, cpu, free])
            rows, inverse = np.unique(rows, axis=0, return_inverse=True)
            inverse = inverse.reshape(-1)
            rows_model, rows_cpu, rows_free = rows[:, 0], rows[:, 1], rows[:, 2:]
        rows_total = rows_free.sum(axis=1)
        # Whether a GPU fits a shape depends only on the shape's share: a few values.
        fits = rows_free[:, None, :] >= shapes.shares[None, :, None]  # (M, V, G)
        usable_gpus = fits.sum(axis=2)[:, shapes.share_of]
        small = (rows_total[:, None] - np.where(fits, rows_free[:, None, :], 0).sum(axis=2))[
            :, shapes.share_of
        ]
        runs = (
            shapes.allowed[rows_model]
            & (usable_gpus >= shapes.count)
            & (rows_cpu[:, None] >= shapes.cpu)
        )
        unusable = np.where(runs, small, rows_total[:, None])
        if inverse is not None:
            unusable = unusable[inverse]
        frag = frag + unusable @ shapes.weight
    return frag


def fleet_fragmentation(
    nodes: pl.DataFrame, allocations: pl.DataFrame, requests: pl.DataFrame
) -> float:
    """The FGD fragmentation of a placement, in GPUs, against the requests' shapes.

    Args:
        nodes: the nodes frame.
        allocations: a placement as :class:`FillResult` gives it (node_id, gpus,
            gpu_index, cpus); rows on unknown or unhealthy nodes are ignored.
        requests: the workload whose shapes weigh the measure.

    Returns:
        sum over nodes of F_n, in GPUs.

    Example:
        >>> nodes = pl.DataFrame({"node_id": ["n1"], "gpu_model": ["A"], "gpus": [2],
        ...                       "cpus": [8.0]})
        >>> requests = pl.DataFrame({"request_id": ["r1"], "gpus": [0.5], "cpus": [1.0]})
        >>> placed = pl.DataFrame({"node_id": ["n1"], "gpus": [0.7], "gpu_index": ["0"],
        ...                        "cpus": [1.0]})
        >>> round(fleet_fragmentation(nodes, placed, requests), 6)  # 0.3 left on GPU 0 < 0.5
        0.3
    """
    fleet = _prepare_fleet(nodes)
    workload = _prepare_workload(requests, fleet, PlacementOptions())
    state = _State(fleet)
    index = {n: i for i, n in enumerate(fleet.node_ids)}
    for node_id, gpus, gpu_index, cpus in allocations.select(
        pl.col("node_id").cast(pl.String), "gpus", "gpu_index", pl.col("cpus").fill_null(0.0)
    ).iter_rows():
        n = index.get(node_id)
        if n is None:
            continue
        used = round(gpus * _U) if gpus < 1 else _U
        for gpu in [int(g) for g in gpu_index.split(",") if g]:
            state.free[n, gpu] -= used
        state.cpu[n] -= round(cpus * _U)
    frag = _fragmentation(workload.shapes, state.free, state.cpu, fleet.model)
    return float(frag.sum()) / _U


# ------------------------------------------------------------------ one run


class _State:
    """The mutable working state of one run (private: never escapes a run)."""

    def __init__(self, fleet: _Fleet) -> None:
        n, width = len(fleet.node_ids), fleet.width
        self.free = np.where(np.arange(width)[None, :] < fleet.gpus[:, None], _U, 0).astype(
            np.int64
        )
        self.free_total = self.free.sum(axis=1)
        self.whole = fleet.gpus.copy()  # fully free GPUs
        self.largest = self.free.max(axis=1) if width else np.zeros(n, np.int64)
        self.cpu = fleet.cpus.copy()
        self.memory = fleet.memory.copy()
        self.group_used = np.zeros(len(fleet.group_gpus), dtype=np.int64)
        self.version = np.ones(n, dtype=np.int64)

    def refresh(self, n: int) -> None:
        row = self.free[n]
        self.free_total[n] = row.sum()
        self.whole[n] = int((row == _U).sum())
        self.largest[n] = row.max()
        self.version[n] += 1


class _Run:
    def __init__(self, fleet: _Fleet, workload: _Workload, policy: str, seed: int) -> None:
        self.fleet, self.workload, self.policy = fleet, workload, policy
        self.state = _State(fleet)
        self.rng = np.random.default_rng([seed, 2])
        n = len(fleet.node_ids)
        self.shapes = workload.shapes
        self.frag_before: np.ndarray | None = None
        if policy == "fgd":
            self.frag_before = _fragmentation(
                self.shapes, self.state.free, self.state.cpu, fleet.model
            )
            self.delta = np.zeros((workload.keys, n))
            self.choice = np.zeros((workload.keys, n), dtype=np.int64)
            self.scored = np.zeros((workload.keys, n), dtype=np.int64)
        self.best_key = self.state.free_total * _CPU_KEY + np.minimum(self.state.cpu, _CPU_KEY - 1)
        gpuless = fleet.gpus == 0
        self.gpuless: np.ndarray | None = gpuless if gpuless.any() else None

    def resync(self) -> None:
        """Recompute every derived array after the state was set in bulk."""
        st = self.state
        st.free_total = st.free.sum(axis=1)
        st.whole = (st.free == _U).sum(axis=1)
        st.largest = st.free.max(axis=1) if st.free.shape[1] else np.zeros_like(st.free_total)
        st.version += 1
        self.best_key = st.free_total * _CPU_KEY + np.minimum(np.maximum(st.cpu, 0), _CPU_KEY - 1)
        if self.frag_before is not None:
            self.frag_before = _fragmentation(self.shapes, st.free, st.cpu, self.fleet.model)

    # ---- node choice

    def _feasible(
        self, r: int, within: np.ndarray | None, among: np.ndarray | None = None
    ) -> np.ndarray:
        """The nodes that can take one pod of r (a mask), inside ``within`` (a mask);
        ``among`` (node indices): the caller knows no other node can."""
        w, st = self.workload, self.state
        at: slice | np.ndarray = slice(None) if among is None else among
        ok = (
            w.model_ok[w.allowed[r], at] & (st.cpu[at] >= w.cpu[r]) & (st.memory[at] >= w.memory[r])
        )
        if w.count[r]:
            if w.share[r] < _U:
                ok &= st.largest[at] >= w.share[r]
            else:
                ok &= st.whole[at] >= w.count[r]
        if among is not None:
            full = np.zeros(len(self.fleet.node_ids), dtype=bool)
            full[among] = ok
            ok = full
        if within is not None:
            ok &= within
        return ok

    def _choose(self, r: int, ok: np.ndarray) -> tuple[int, int]:
        """(node, share value of the GPU to use; -1 = the tightest/lowest) or (-1, -1).

        A pod without GPUs goes to a node without GPUs when one fits (GPU nodes are
        tainted against such work on real fleets), else wherever the policy says.
        """
        if self.gpuless is not None and not self.workload.count[r]:
            cpu_nodes = ok & self.gpuless
            if cpu_nodes.any():
                ok = cpu_nodes
        policy = self.policy
        if policy == "first-fit":
            n = int(ok.argmax())
            return (n, -1) if ok[n] else (-1, -1)
        if policy == "random":
            candidates = np.flatnonzero(ok)
            if not len(candidates):
                return -1, -1
            return int(candidates[self.rng.integers(len(candidates))]), -1
        if policy == "best-fit":
            n = int(np.where(ok, self.best_key, np.iinfo(np.int64).max).argmin())
            return (n, -1) if ok[n] else (-1, -1)
        if policy == "topology":
            if not ok.any():
                return -1, -1
            fill = self.state.group_used / np.maximum(self.fleet.group_gpus, 1)
            node_fill = np.where(ok, fill[self.fleet.group], -1.0)
            fullest = ok & (node_fill == node_fill.max())
            n = int(np.where(fullest, self.best_key, np.iinfo(np.int64).max).argmin())
            return n, -1
        return self._choose_fgd(r, ok)

    def _choose_fgd(self, r: int, ok: np.ndarray) -> tuple[int, int]:
        q = int(self.workload.key[r])
        stale = np.flatnonzero(ok & (self.scored[q] < self.state.version))
        if len(stale):
            delta, choice = self._score_fgd(r, stale)
            self.delta[q, stale] = delta
            self.choice[q, stale] = choice
            self.scored[q, stale] = self.state.version[stale]
        scores = np.where(ok, self.delta[q], np.inf)
        n = int(scores.argmin())
        if not ok[n]:
            return -1, -1
        return n, int(self.choice[q, n])

    def _score_fgd(self, r: int, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Fragmentation increase on each node, and the share value of the GPU chosen."""
        assert self.frag_before is not None
        w, st, model = self.workload, self.state, self.fleet.model
        free, cpu, models = st.free[nodes], st.cpu[nodes], model[nodes]
        inverse = None
        if len(nodes) >= _DEDUP_AT:
            # F is symmetric in a node's GPUs: sorted rows of equal states coincide.
            rows = np.column_stack([models, cpu, np.sort(free, axis=1)])
            rows, inverse = np.unique(rows, axis=0, return_inverse=True)
            inverse = inverse.reshape(-1)
            models, cpu, free = rows[:, 0], rows[:, 1], rows[:, 2:]
        share, count = int(w.share[r]), int(w.count[r])
        cpu_after = cpu - w.cpu[r]
        if count and share < _U:
            width = free.shape[1]
            after = np.repeat(free[:, None, :], width, axis=1)
            diagonal = np.arange(width)
            after[:, diagonal, diagonal] -= share
            frag = _fragmentation(
                self.shapes,
                after.reshape(-1, width),
                np.repeat(cpu_after, width),
                np.repeat(models, width),
            ).reshape(-1, width)
            frag = np.round(np.where(free >= share, frag, np.inf), _ROUND)
            best = frag.min(axis=1)
            # Among GPUs equally good, the tightest one keeps whole GPUs whole.
            pick = np.where(frag == best[:, None], free, np.iinfo(np.int64).max).argmin(axis=1)
            choice = free[np.arange(len(free)), pick]
        else:
            after = free
            if count:
                whole = free == _U
                after = np.where(whole & (np.cumsum(whole, axis=1) <= count), 0, free)
            best = _fragmentation(self.shapes, after, cpu_after, models)
            choice = np.full(len(free), -1, dtype=np.int64)
        if inverse is not None:
            best, choice = best[inverse], choice[inverse]
        return np.round(best - self.frag_before[nodes], _ROUND), choice

    # ---- state changes

    def _apply(self, r: int, n: int, value: int) -> list[int]:
        w, st = self.workload, self.state
        share, count = int(w.share[r]), int(w.count[r])
        row = st.free[n]
        if not count:
            used: list[int] = []
        elif share < _U:
            fits = row >= share
            target = value if value >= 0 else int(np.where(fits, row, _U + 1).min())
            gpu = int(np.flatnonzero(row == target)[0])
            row[gpu] -= share
            used = [gpu]
        else:
            used = np.flatnonzero(row == _U)[:count].tolist()
            row[used] = 0
        st.cpu[n] -= w.cpu[r]
        st.memory[n] -= w.memory[r]
        st.group_used[self.fleet.group[n]] += share * count
        self._changed(n)
        return used

    def _undo(self, r: int, n: int, used: list[int]) -> None:
        w, st = self.workload, self.state
        st.free[n, used] += w.share[r]
        st.cpu[n] += w.cpu[r]
        st.memory[n] += w.memory[r]
        st.group_used[self.fleet.group[n]] -= int(w.share[r]) * int(w.count[r])
        self._changed(n)

    def _changed(self, n: int) -> None:
        st = self.state
        st.refresh(n)
        self.best_key[n] = st.free_total[n] * _CPU_KEY + min(int(st.cpu[n]), int(_CPU_KEY) - 1)
        if self.frag_before is not None:
            self.frag_before[n] = _fragmentation(
                self.shapes, st.free[n : n + 1], st.cpu[n : n + 1], self.fleet.model[n : n + 1]
            )[0]

    def room(self, r: int, nodes: np.ndarray | None = None) -> np.ndarray:
        """Pods of request r each node (of ``nodes``, default all) can still take, capped at
        the request's pod count.

        Exact: a pod placed on a node lowers its room by exactly one (it takes
        ``count`` whole GPUs, or one share of a GPU holding at least one, and its
        CPUs and memory), so a domain whose room reaches the pod count holds the
        whole gang wherever the policy puts each pod inside it.
        """
        w, st = self.workload, self.state
        at: slice | np.ndarray = slice(None) if nodes is None else nodes
        k = int(w.pods[r])
        share, count = int(w.share[r]), int(w.count[r])
        # The nodes with room for one pod; the others have none (each bound below
        # would be 0 there), so the bounds are worked out on these only.
        ok = (
            w.model_ok[w.allowed[r], at] & (st.cpu[at] >= w.cpu[r]) & (st.memory[at] >= w.memory[r])
        )
        if count:
            if share >= _U:
                ok &= st.whole[at] >= count
            elif share > 0:
                ok &= st.largest[at] >= share
        some = np.flatnonzero(ok)
        on = some if nodes is None else nodes[some]
        cap = np.full(len(some), k, dtype=np.int64)
        if w.cpu[r] > 0:
            cap = np.minimum(cap, st.cpu[on] // w.cpu[r])
        if w.memory[r] > 0:
            cap = np.minimum(cap, st.memory[on] // w.memory[r])
        if count:
            if share < _U:
                if share > 0:
                    cap = np.minimum(cap, (st.free[on] // share).sum(axis=1))
            else:
                cap = np.minimum(cap, st.whole[on] // count)
        room = np.zeros(len(ok), dtype=np.int64)
        room[some] = np.maximum(cap, 0)
        return room

    def gang_hosts(self, r: int) -> np.ndarray | None:
        """The nodes where the first pod of gang r may go: those in a switch domain (or,
        for locality ``node``, on a node) with room for every pod. None: anywhere
        (a single pod, or a gang of locality ``any`` that the fleet has room for)."""
        w = self.workload
        k = int(w.pods[r])
        if k <= 1:
            return None
        room = self.room(r)
        locality = LOCALITIES[int(w.locality[r])]
        if locality == "any":  # it fits iff the fleet has room: fail before any draw
            return None if int(room.sum()) >= k else np.zeros(len(room), dtype=bool)
        if locality == "node":
            return room >= k
        domain = self.fleet.block if locality == "block" else self.fleet.domain
        return (np.bincount(domain, weights=room, minlength=int(domain.max()) + 1) >= k)[domain]

    def place(
        self, r: int, among: np.ndarray | None = None
    ) -> list[tuple[int, int, list[int]]] | None:
        """Place every pod of request r, or none: [(pod, node, GPUs)], or None.

        A gang kept in one switch domain (or node) goes to the domain that the
        policy's choice for its first pod picks among the domains with room for
        the whole gang; its other pods follow inside that domain. ``among``
        (node indices, for a single pod only): the caller knows that no other
        node can take it, so only these are checked.
        """
        w = self.workload
        placed: list[tuple[int, int, list[int]]] = []
        within = self.gang_hosts(r)
        if within is not None and not within.any():
            return None
        if w.pods[r] != 1:
            among = None
        for pod in range(int(w.pods[r])):
            n, value = self._choose(r, self._feasible(r, within, among))
            if n < 0:
                for _, node, used in reversed(placed):
                    self._undo(r, node, used)
                return None
            placed.append((pod, n, self._apply(r, n, value)))
            if pod == 0 and w.pods[r] > 1:
                locality = LOCALITIES[int(w.locality[r])]
                if locality == "switch":
                    within = self.fleet.domain == self.fleet.domain[n]
                elif locality == "block":
                    within = self.fleet.block == self.fleet.block[n]
                elif locality == "node":
                    within = np.arange(len(self.fleet.node_ids)) == n
        return placed

    def fragmentation(self) -> float:
        if self.frag_before is not None:
            return float(self.frag_before.sum())
        st = self.state
        frag = _fragmentation(self.shapes, st.free, st.cpu, self.fleet.model, dedup=True)
        return float(frag.sum())


@dataclass(frozen=True)
class _RunOutput:
    curve: dict[str, list[float]]
    placed: list[tuple[int, int, int, int, list[int]]]  # arrival, request, pod, node, GPUs
    arrived: int
    failed: int
    budget_hit: bool


def _run(
    fleet: _Fleet, workload: _Workload, options: PlacementOptions, policy: str, seed: int
) -> _RunOutput:
    assert options.fill_pct is not None
    total = fleet.total_gpus * _U
    steps = math.floor(options.fill_pct / options.step_pct + 1e-9)
    marks = [options.step_pct * (i + 1) for i in range(steps)]
    targets = [math.ceil(m / 100 * total - 1e-6) for m in marks]
    run = _Run(fleet, workload, policy, seed)
    draws = np.random.default_rng([seed, 1])
    listed = len(workload.request_ids)
    first_pass = (
        np.random.default_rng([seed, 3]).permutation(listed)
        if options.shuffle
        else np.arange(listed)
    )
    curve: dict[str, list[float]] = {
        "arrived_pct": [], "allocated_pct": [], "fragmented_pct": [], "failed": []
    }  # fmt: skip
    placed: list[tuple[int, int, int, int, list[int]]] = []
    arrived_units = failed = arrivals = 0
    mark = 0
    block = np.zeros(0, dtype=np.int64)
    while mark < steps and arrivals < options.max_arrivals:
        if arrivals < listed:
            r = int(first_pass[arrivals])
        else:
            # Draw in blocks: one generator call per pod is the slow part of resampling.
            if (arrivals - listed) % 4096 == 0:
                block = draws.integers(listed, size=4096)
            r = int(block[(arrivals - listed) % 4096])
        arrived_units += int(workload.demand[r])
        pods = run.place(r)
        if pods is None:
            failed += 1
        else:
            placed.extend((arrivals, r, pod, n, used) for pod, n, used in pods)
        arrivals += 1
        while mark < steps and arrived_units >= targets[mark]:
            allocated = total - int(run.state.free_total.sum())
            curve["arrived_pct"].append(marks[mark])
            curve["allocated_pct"].append(100.0 * allocated / total)
            curve["fragmented_pct"].append(100.0 * run.fragmentation() / total)
            curve["failed"].append(failed)
            mark += 1
    return _RunOutput(curve, placed, arrivals, failed, mark < steps)


def _curve_frame(curve: dict[str, list[float]]) -> pl.DataFrame:
    return pl.DataFrame(
        curve,
        schema={"arrived_pct": pl.Float64, "allocated_pct": pl.Float64,
                "fragmented_pct": pl.Float64, "failed": pl.Int64},
    )  # fmt: skip


def _allocations_frame(fleet: _Fleet, workload: _Workload, output: _RunOutput) -> pl.DataFrame:
    rows = output.placed
    arrival = [a for a, _, _, _, _ in rows]
    request = [workload.request_ids[r] for _, r, _, _, _ in rows]
    job = [f"{rid}@{a}" for rid, a in zip(request, arrival, strict=True)]
    alloc = [
        j if workload.pods[r] == 1 else f"{j}/{pod}"
        for j, (_, r, pod, _, _) in zip(job, rows, strict=True)
    ]
    share = np.array([workload.share[r] for _, r, _, _, _ in rows], dtype=np.int64)
    count = np.array([workload.count[r] for _, r, _, _, _ in rows], dtype=np.int64)
    cpu = np.array([workload.cpu[r] for _, r, _, _, _ in rows], dtype=np.int64)
    memory = np.array([workload.memory[r] for _, r, _, _, _ in rows], dtype=np.int64)
    return pl.DataFrame(
        {
            "alloc_id": alloc,
            "job_id": job,
            "request_id": request,
            "node_id": [fleet.node_ids[n] for _, _, _, n, _ in rows],
            "gpus": share * count / _U,
            "gpu_index": [",".join(map(str, used)) for _, _, _, _, used in rows],
            "cpus": cpu / _U,
            "memory_gib": memory / _U,
            "arrival": arrival,
        },
        schema={"alloc_id": pl.String, "job_id": pl.String, "request_id": pl.String,
                "node_id": pl.String, "gpus": pl.Float64, "gpu_index": pl.String,
                "cpus": pl.Float64, "memory_gib": pl.Float64, "arrival": pl.Int64},
    )  # fmt: skip


def _check(options: PlacementOptions, policies: Sequence[str]) -> None:
    for policy in policies:
        if policy not in POLICIES:
            raise UsageError(f"unknown policy {policy!r}: use one of {', '.join(POLICIES)}")
    if options.fill_pct is None:
        raise UsageError("fill mode needs a fill percentage (--fill PCT)")
    if not options.fill_pct > 0 or not options.step_pct > 0:
        raise UsageError("the fill and step percentages must be above 0")
    if options.seeds < 1:
        raise UsageError("seeds must be at least 1")


def _prepare(
    nodes: pl.DataFrame, requests: pl.DataFrame, options: PlacementOptions
) -> tuple[_Fleet, _Workload]:
    fleet = _prepare_fleet(nodes)
    workload = _prepare_workload(requests, fleet, options)
    if fleet.total_gpus == 0:
        raise UsageError("the fleet has no healthy GPUs to fill")
    if not len(workload.request_ids) or workload.demand.sum() == 0:
        raise UsageError("the requests ask for no GPUs, so arrival never reaches the fill level")
    return fleet, workload


def simulate_fill(
    nodes: pl.DataFrame, requests: pl.DataFrame, options: PlacementOptions
) -> FillResult:
    """One fill-mode run of ``options.policy`` with ``options.seed``.

    Args:
        nodes: the nodes frame (node_id, gpu_model, gpus, cpus; memory_gib,
            switch_id, health optional).
        requests: the requests frame (request_id, gpus; gpus_per_pod,
            gpu_model, cpus, memory_gib, cpus_per_gpu, memory_gib_per_gpu,
            locality, trace_order / submit_time optional).
        options: policy, fill_pct (required), seed, step and budgets.

    Returns:
        The curve, the final placement and the counts (:class:`FillResult`).

    Raises:
        UsageError: unknown policy, no fill level, or unusable requests.

    Example:
        >>> nodes = pl.DataFrame({"node_id": ["a", "b"], "gpu_model": ["T4", "T4"],
        ...                       "gpus": [2, 2], "cpus": [8.0, 8.0]})
        >>> requests = pl.DataFrame({"request_id": ["r1", "r2"], "gpus": [1.0, 0.5],
        ...                          "cpus": [2.0, 1.0]})
        >>> result = simulate_fill(nodes, requests,
        ...     PlacementOptions(policy="best-fit", fill_pct=25, step_pct=25))
        >>> result.allocations.select("request_id", "node_id", "gpus").rows()
        [('r1', 'a', 1.0)]
        >>> result.curve.rows()
        [(25.0, 25.0, 0.0, 0)]
    """
    _check(options, [options.policy])
    fleet, workload = _prepare(nodes, requests, options)
    output = _run(fleet, workload, options, options.policy, options.seed)
    return FillResult(
        policy=options.policy,
        seed=options.seed,
        curve=_curve_frame(output.curve),
        allocations=_allocations_frame(fleet, workload, output),
        gpus=fleet.total_gpus,
        arrived=output.arrived,
        failed=output.failed,
        budget_hit=output.budget_hit,
    )


def _curve_task(
    args: tuple[_Fleet, _Workload, PlacementOptions, str, int],
) -> dict[str, list[float]]:
    return _run(*args).curve


def fill_curves(
    nodes: pl.DataFrame,
    requests: pl.DataFrame,
    options: PlacementOptions,
    policies: Sequence[str] = POLICIES,
) -> dict[str, pl.DataFrame]:
    """Fill curves of several policies, each the mean over ``options.seeds`` seeds.

    Every policy sees the same arrivals for a given seed (the resampling draws
    do not depend on the policy), so the curves compare like with like.

    Args:
        nodes: the nodes frame.
        requests: the requests frame.
        options: fill_pct, seeds (seeds ``seed`` .. ``seed + seeds - 1``),
            step and budgets; ``workers`` > 1 runs the seeds in processes.
        policies: the policies to run, in the order of the result.

    Returns:
        policy -> curve (arrived_pct, allocated_pct, fragmented_pct, failed,
        all Float64 means over the seeds; a step some run did not reach is
        averaged over the runs that did).
    """
    _check(options, policies)
    fleet, workload = _prepare(nodes, requests, options)
    tasks = [
        (fleet, workload, options, policy, options.seed + i)
        for policy in policies
        for i in range(options.seeds)
    ]
    curves = _map_runs(_curve_task, tasks, options.workers)
    result: dict[str, pl.DataFrame] = {}
    for p, policy in enumerate(policies):
        runs = [_curve_frame(c) for c in curves[p * options.seeds : (p + 1) * options.seeds]]
        result[policy] = (
            pl.concat(runs)
            .group_by("arrived_pct")
            .agg(pl.col("allocated_pct", "fragmented_pct", "failed").cast(pl.Float64).mean())
            .sort("arrived_pct")
        )
    return result


# ------------------------------------------------------------ by-time replay

QUEUES = ("fifo", "backfill")
# Backfill skips, at a departure, the waiting shapes that would fail again (exact, see
# simulate_replay's retry); False = try every shape (the reference the tests compare to).
_BACKFILL_PRECHECK = True
_NEVER = np.iinfo(np.int64).max
_REPLAY_CURVE = {
    "instant": pl.Datetime("us"), "instant_pct": pl.Float64, "allocated_pct": pl.Float64,
    "fragmented_pct": pl.Float64, "queued": pl.Int64, "started": pl.Int64, "failed": pl.Int64,
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
        self._live_records = list(range(len(records)))
        self._live_groups: list[int] = []
        self._groups_seen = 0

    def _where(self) -> dict[str, tuple[int, int]]:
        """alloc_id -> (record index, -1) or (group index, pod position)."""
        if self._index is None:
            self._index = {rec.alloc_id: (i, -1) for i, rec in enumerate(self._records)}
        w = self._run.workload
        for g in range(self._seen, len(self._groups)):
            r, pods = self._groups[g]
            rid = w.request_ids[r]
            for k, (pod, _, _) in enumerate(pods):
                name = f"replay/{rid}" if w.pods[r] == 1 else f"replay/{rid}/{pod}"
                self._index[name] = (g, k)
        self._seen = len(self._groups)
        return self._index

    def allocations(self, t_us: int) -> pl.DataFrame:
        """The work active at ``t_us`` as an allocations frame (alloc_id, job_id,
        node_id, gpus, cpus, memory_gib, priority, start_time, end_time);
        replayed pods are ``replay/<request>[/<pod>]`` of job ``<request>``."""
        fleet, w = self._run.fleet, self._run.workload
        rows: list[tuple[object, ...]] = []
        self._live_records = [i for i in self._live_records if self._records[i].end_us > t_us]
        for i in self._live_records:
            rec = self._records[i]
            if rec.start_us <= t_us < rec.end_us:
                rows.append((rec.alloc_id, rec.job_id or rec.alloc_id, fleet.node_ids[rec.node],
                             sum(rec.units) / _U, rec.cpu / _U, rec.memory / _U, rec.start_us,
                             None if rec.end_us == _NEVER else rec.end_us))  # fmt: skip
        live = self._live_groups
        live.extend(range(self._groups_seen, len(self._groups)))
        self._groups_seen = len(self._groups)
        kept: list[int] = []
        for g in live:
            r, pods = self._groups[g]
            begin, length = self._group_start[g], int(self._duration[r])
            if length >= 0 and begin + length <= t_us:
                continue
            kept.append(g)
            rid = w.request_ids[r]
            for pod, n, _ in pods:
                name = f"replay/{rid}" if w.pods[r] == 1 else f"replay/{rid}/{pod}"
                rows.append((name, rid, fleet.node_ids[n], int(w.share[r]) * int(w.count[r]) / _U,
                             int(w.cpu[r]) / _U, int(w.memory[r]) / _U, begin,
                             None if length < 0 else begin + length))  # fmt: skip
        self._live_groups = kept
        return pl.DataFrame(
            rows,
            schema={"alloc_id": pl.String, "job_id": pl.String, "node_id": pl.String,
                    "gpus": pl.Float64, "cpus": pl.Float64, "memory_gib": pl.Float64,
                    "start_time": pl.Int64, "end_time": pl.Int64},
            orient="row",
        ).with_columns(
            pl.lit("high").alias("priority"),
            pl.col("start_time").cast(pl.Datetime("us")),
            pl.col("end_time").cast(pl.Datetime("us")),
        )  # fmt: skip

    def gpu_use(self) -> tuple[int, int]:
        """(free nodes, partially occupied nodes) among the healthy nodes with GPUs."""
        fleet, st, w = self._run.fleet, self._run.state, self._run.workload
        # GPUs in use as the nodes' occupancy counts them: whole GPUs, plus the GPUs
        # the node's shares fill when packed first-fit-decreasing
        shares: dict[int, list[int]] = {}
        whole: dict[int, int] = {}
        for i in self._live_records:
            rec = self._records[i]
            for units in rec.units:
                if units < _U:
                    shares.setdefault(rec.node, []).append(units)
                else:
                    whole[rec.node] = whole.get(rec.node, 0) + 1
        for g in self._live_groups + list(range(self._groups_seen, len(self._groups))):
            r, pods = self._groups[g]
            share, count = int(w.share[r]), int(w.count[r])
            for _, n, used_gpus in pods:
                if count and share < _U:
                    shares.setdefault(n, []).append(share)
                elif count:
                    whole[n] = whole.get(n, 0) + len(used_gpus)
        used = fleet.gpus - (st.free == _U).sum(axis=1)  # GPUs holding anything
        for n, units in shares.items():
            # share-holding GPUs as packed, not as laid out
            used[n] = whole.get(n, 0) + len(first_fit_decreasing(units))
        has = fleet.gpus > 0
        free = has & (used == 0)
        partial = has & (used > 0) & (used < fleet.gpus)
        return int(free.sum()), int(partial.sum())

    def _repack_shares(self, d: int) -> None:
        """Lay node d's shares out first-fit-decreasing on the GPUs no whole
        allocation holds (the occupancy's packing), updating each holder's GPU."""
        run, st = self._run, self._run.state
        w = run.workload
        holders: list[tuple[int, object, int]] = []  # (units, holder, position)
        whole: set[int] = set()
        for i in self._live_records:
            rec = self._records[i]
            if rec.node != d:
                continue
            for j, (gpu, units) in enumerate(zip(rec.gpus, rec.units, strict=True)):
                if units >= _U:
                    whole.add(gpu)
                else:
                    holders.append((units, rec, j))
        for g in self._live_groups + list(range(self._groups_seen, len(self._groups))):
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
        left = {x: _U for x in gpus}
        placed: list[tuple[int, object, int, int]] = []
        for units, holder, pos in sorted(holders, key=lambda h: -h[0]):
            gpu = next((x for x in gpus if left[x] >= units), -1)
            if gpu < 0:
                return  # cannot happen for a layout that held them; keep it as it is
            left[gpu] -= units
            placed.append((units, holder, pos, gpu))
        for units, holder, pos, gpu in placed:
            if isinstance(holder, _Recorded):
                holder.gpus[pos] = gpu
            else:
                r, pods = self._groups[holder]  # type: ignore[index]
                pods = list(pods)
                pod, n, _ = pods[pos]
                pods[pos] = (pod, n, [gpu])
                self._groups[holder] = (r, pods)  # type: ignore[index]
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
        return True


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
    workload = _prepare_workload(window, fleet, replace(options, frag_weight="gpus"), weigh=frame)
    duration_s = optional_column(window, "duration_s", pl.Float64, None).to_numpy()
    duration = np.where(np.isnan(duration_s), -1, np.round(np.nan_to_num(duration_s) * 1e6))
    duration = duration.astype(np.int64)
    arriving = np.arange(len(submit))
    classes = _replay_classes(workload)

    run = _Run(fleet, workload, options.policy, options.seed)
    heap: list[tuple[int, int, int]] = []  # (time, seq, departure: >= 0 pod group, < 0 record)
    records: list[_Recorded] = []
    if not empty:
        records = _occupy_recorded(run, allocations, start_us, end_us)
        for i, record in enumerate(records):
            if record.end_us < end_us:
                heap.append((record.end_us, len(heap), -1 - i))
        heapq.heapify(heap)
    seq = len(heap)

    probe: _Run | None = None
    never: dict[int, bool] = {}

    def fits_empty(r: int) -> bool:
        nonlocal probe
        c = int(classes[r])
        if c not in never:
            if probe is None:
                probe = _Run(fleet, workload, "first-fit", 0)
            pods = probe.place(r)
            never[c] = pods is None
            for _, n, used in reversed(pods or []):
                probe._undo(r, n, used)
        return not never[c]

    started_at = np.full(len(workload.request_ids), -1, dtype=np.int64)
    placed: list[tuple[int, int, int, list[int], int]] = []  # request, pod, node, GPUs, start
    groups: list[tuple[int, list[tuple[int, int, list[int]]]]] = []
    started = rejected = 0

    preferred = np.full(len(workload.request_ids), -1, dtype=np.int64)
    if prefer:
        node_index = {n: i for i, n in enumerate(fleet.node_ids)}
        for r_, rid in enumerate(workload.request_ids):
            n_ = node_index.get(prefer.get(rid, ""), -1)
            if n_ >= 0 and workload.pods[r_] == 1:
                preferred[r_] = n_
    group_start: list[int] = []

    def try_start(r: int, t: int, among: np.ndarray | None = None) -> bool:
        nonlocal seq, started
        pods = None
        n_pref = int(preferred[r])
        if n_pref >= 0 and (among is None or n_pref in among):
            pods = run.place(r, np.array([n_pref], dtype=np.int64))
        if pods is None:
            pods = run.place(r, among)
        if pods is None:
            return False
        group_start.append(t)
        started_at[r] = t
        started += 1
        placed.extend((r, pod, n, used, t) for pod, n, used in pods)
        if duration[r] >= 0 and t + duration[r] < end_us:
            heapq.heappush(heap, (t + int(duration[r]), seq, len(groups)))
            seq += 1
        groups.append((r, pods))
        return True

    fifo: deque[int] = deque()
    waiting: dict[int, deque[tuple[int, int]]] = {}  # backfill: class -> (arrival, request)
    queued = 0

    # Backfill pre-check. Every waiting shape failed at its last try (a retry pass
    # or its arrival), and since then capacity was only taken, except on the nodes
    # freed at this instant. A single pod (or a gang of locality "any", which starts
    # iff the fleet's room counted in pods reaches its size) can only fit now on a
    # freed node: the shapes no freed node can host would fail again, and are
    # skipped without the policy's evaluation (a failed placement changes nothing
    # but caches, and draws no random number). A gang kept in one switch domain (or
    # node) starts iff some domain has room for all of it (_Run.gang_hosts): after
    # a failure, only the domains of the freed nodes can have gained that room.
    rep = np.zeros(int(classes.max()) + 1 if len(classes) else 0, dtype=np.int64)
    rep[classes] = np.arange(len(classes))
    gang = (workload.pods > 1) & (workload.locality != LOCALITIES.index("any"))
    hopeless: set[int] = set()  # gang classes that found no domain at their last try

    # the domains of a gang kept in one switch domain, or one block domain
    grouping = {LOCALITIES.index("switch"): fleet.domain, LOCALITIES.index("block"): fleet.block}
    members = {g: np.argsort(d, kind="stable") for g, d in grouping.items()}  # grouped by domain
    bounds = {
        g: np.searchsorted(d[members[g]], np.arange(int(d.max()) + 2))
        for g, d in grouping.items()
    }
    freed_room: dict[tuple[int, ...], int] = {}  # this pass: pod shape -> most room in a domain
    freed_domain_nodes: dict[int, np.ndarray] = {}  # this pass: the freed nodes' domains' nodes

    def freed_domains_room(r: int, freed: np.ndarray) -> int:
        """The most pods of r's shape one domain (or node) holding a freed node can take."""
        w = workload
        shape = (int(w.locality[r]), int(w.share[r]), int(w.count[r]), int(w.cpu[r]),
                 int(w.memory[r]), int(w.allowed[r]))  # fmt: skip
        most = freed_room.get(shape)
        if most is None:
            if shape[0] in grouping:
                domain, of, at = grouping[shape[0]], members[shape[0]], bounds[shape[0]]
                if shape[0] not in freed_domain_nodes:
                    domains = np.unique(domain[freed])
                    freed_domain_nodes[shape[0]] = np.concatenate(
                        [of[at[d] : at[d + 1]] for d in domains]
                    )
                nodes = freed_domain_nodes[shape[0]]
                most = int(np.bincount(domain[nodes], weights=run.room(r, nodes)).max())
            else:
                most = int(run.room(r, freed).max())
            freed_room[shape] = most
        return most

    def candidates(freed: np.ndarray) -> set[int]:
        """The waiting classes worth a try after the nodes ``freed`` got room back."""
        cls = np.fromiter(waiting, dtype=np.int64, count=len(waiting))
        reps = rep[cls]
        w, st = workload, run.state
        ok = w.model_ok[w.allowed[reps][:, None], freed[None, :]]
        ok &= st.cpu[freed][None, :] >= w.cpu[reps][:, None]
        ok &= st.memory[freed][None, :] >= w.memory[reps][:, None]
        share, count = w.share[reps][:, None], w.count[reps][:, None]
        ok &= (count == 0) | (share >= _U) | (st.largest[freed][None, :] >= share)
        ok &= (count == 0) | (share < _U) | (st.whole[freed][None, :] >= count)
        keep = ok.any(axis=1) | gang[reps]
        return set(cls[keep].tolist())

    def retry(t: int, freed: list[int]) -> None:
        nonlocal queued
        if queue == "fifo":
            # Strict FIFO: nothing started since the head failed, so only the nodes
            # freed now gained room (the same pre-check as backfill, for the head).
            among = None
            if _BACKFILL_PRECHECK and fifo:
                nodes = np.unique(np.array(freed, dtype=np.int64))
                freed_room.clear()
                freed_domain_nodes.clear()
                head = fifo[0]
                if gang[head] and freed_domains_room(head, nodes) < int(workload.pods[head]):
                    return
                among = nodes
            while fifo and try_start(fifo[0], t, among):
                fifo.popleft()
                queued -= 1
                among = None  # the others wait untried behind the head
            return
        if _BACKFILL_PRECHECK:
            nodes = np.unique(np.array(freed, dtype=np.int64))
            worth = candidates(nodes)
            freed_room.clear()
            freed_domain_nodes.clear()
            heads = [(q[0][0], c) for c, q in waiting.items() if c in worth]
        else:
            heads = [(q[0][0], c) for c, q in waiting.items()]
        heapq.heapify(heads)
        while heads:
            _, c = heapq.heappop(heads)
            q = waiting[c]
            r = q[0][1]
            if (
                _BACKFILL_PRECHECK
                and c in hopeless
                and freed_domains_room(r, nodes) < int(workload.pods[r])
            ):
                continue
            # A single pod failed at its last try, and since then only the freed
            # nodes gained room (this pass only takes it): no other node can fit it.
            if try_start(r, t, nodes if _BACKFILL_PRECHECK else None):
                q.popleft()
                queued -= 1
                if q:
                    heapq.heappush(heads, (q[0][0], c))
                else:
                    del waiting[c]
                hopeless.discard(c)
            elif gang[r]:
                hopeless.add(c)

    def arrive(r: int, arrival: int, t: int) -> None:
        nonlocal queued, rejected
        if not fits_empty(r):
            rejected += 1
            return
        if queue == "fifo":
            if not fifo and try_start(r, t):
                return
            fifo.append(r)
        else:
            if try_start(r, t):
                return
            if gang[r]:
                hopeless.add(int(classes[r]))
            waiting.setdefault(int(classes[r]), deque()).append((arrival, r))
        queued += 1

    total = fleet.total_gpus * _U
    window = end_us - start_us
    steps = math.floor(100 / options.step_pct + 1e-9)
    marks = [min(options.step_pct * i, 100.0) for i in range(steps + 1)]
    if marks[-1] < 100.0:
        marks.append(100.0)
    instants = [start_us + round(window * m / 100) for m in marks]
    curve: dict[str, list[object]] = {
        "instant": [], "instant_pct": [], "allocated_pct": [], "fragmented_pct": [],
        "queued": [], "started": [], "failed": [],
    }  # fmt: skip
    mark = 0

    def sample(upto: int) -> None:
        nonlocal mark
        while mark < len(instants) and instants[mark] <= upto:
            allocated = total - int(run.state.free_total.sum())
            last = mark == len(instants) - 1
            curve["instant"].append(from_epoch_us(instants[mark]))
            curve["instant_pct"].append(marks[mark])
            curve["allocated_pct"].append(100.0 * allocated / total)
            curve["fragmented_pct"].append(100.0 * run.fragmentation() / total)
            curve["queued"].append(queued)
            curve["started"].append(started)
            curve["failed"].append(rejected + (queued if last else 0))
            mark += 1

    view = ReplayView(run, records, groups, group_start, duration)
    tick_list = [int(x) for x in ticks if start_us <= int(x) < end_us] if on_tick else []
    k_tick = 0
    a = 0
    while True:
        t_dep = heap[0][0] if heap else _NEVER
        t_arr = int(submit[arriving[a]]) if a < len(arriving) else _NEVER
        t_tick = tick_list[k_tick] if k_tick < len(tick_list) else _NEVER
        t = min(t_dep, t_arr, t_tick)
        if t >= end_us:
            break
        sample(t)
        if t_tick == t and t_dep > t and t_arr > t and on_tick is not None:
            # a tick runs after its instant's departures and arrivals
            k_tick += 1
            view.queued, view.freed = queued, []
            on_tick(view, t)
            if queued and view.freed:
                retry(t, view.freed)
            continue
        if t_dep == t:
            freed: list[int] = []
            while heap and heap[0][0] == t:
                _, _, item = heapq.heappop(heap)
                if item < 0:
                    _release_recorded(run, records[-1 - item])
                    freed.append(records[-1 - item].node)
                else:
                    r, pods = groups[item]
                    for _, n, used in reversed(pods):
                        run._undo(r, n, used)
                        freed.append(n)
            if queued:
                retry(t, freed)
        while a < len(arriving) and int(submit[arriving[a]]) == t:
            arrive(int(arriving[a]), a, t)
            a += 1
    sample(end_us)

    return ReplayResult(
        policy=options.policy,
        seed=options.seed,
        queue=queue,
        empty=empty,
        start=start,
        end=end,
        curve=pl.DataFrame(curve, schema=_REPLAY_CURVE),
        allocations=_replay_allocations(fleet, workload, records, placed, duration),
        waits=_replay_waits(workload, arriving, submit, started_at),
        gpus=fleet.total_gpus,
        arrived=len(arriving),
        started=started,
        failed=rejected + queued,
        rejected=rejected,
    )


def _replay_allocations(
    fleet: _Fleet,
    workload: _Workload,
    records: list[_Recorded],
    placed: list[tuple[int, int, int, list[int], int]],
    duration: np.ndarray,
) -> pl.DataFrame:
    w = workload
    rows: list[tuple[object, ...]] = [
        (rec.alloc_id, rec.job_id, None, fleet.node_ids[rec.node], sum(rec.units) / _U,
         ",".join(map(str, rec.gpus)), rec.cpu / _U, rec.memory / _U,
         from_epoch_us(rec.start_us), None if rec.end_us == _NEVER else from_epoch_us(rec.end_us), True)
        for rec in records
    ]  # fmt: skip
    for r, pod, n, used, t in placed:
        rid = w.request_ids[r]
        rows.append(
            (
                f"replay/{rid}" if w.pods[r] == 1 else f"replay/{rid}/{pod}",
                rid,
                rid,
                fleet.node_ids[n],
                int(w.share[r]) * int(w.count[r]) / _U,
                ",".join(map(str, used)),
                int(w.cpu[r]) / _U,
                int(w.memory[r]) / _U,
                from_epoch_us(t),
                None if duration[r] < 0 else from_epoch_us(t + int(duration[r])),
                False,
            )
        )
    return pl.DataFrame(
        rows,
        schema={"alloc_id": pl.String, "job_id": pl.String, "request_id": pl.String,
                "node_id": pl.String, "gpus": pl.Float64, "gpu_index": pl.String,
                "cpus": pl.Float64, "memory_gib": pl.Float64,
                "start_time": pl.Datetime("us"), "end_time": pl.Datetime("us"),
                "recorded": pl.Boolean},
        orient="row",
    )  # fmt: skip


def _replay_waits(
    workload: _Workload, arriving: np.ndarray, submit: np.ndarray, started_at: np.ndarray
) -> pl.DataFrame:
    begun = started_at[arriving]
    return pl.DataFrame(
        {
            "request_id": [workload.request_ids[r] for r in arriving],
            "submit_time": [from_epoch_us(int(s)) for s in submit[arriving]],
            "start_time": [None if b < 0 else from_epoch_us(int(b)) for b in begun],
            "wait_s": [None if b < 0 else (b - s) / 1e6 for b, s in zip(begun, submit[arriving], strict=True)],
        },
        schema={"request_id": pl.String, "submit_time": pl.Datetime("us"),
                "start_time": pl.Datetime("us"), "wait_s": pl.Float64},
    )  # fmt: skip


def _replay_task(
    args: tuple[
        pl.DataFrame, pl.DataFrame, pl.DataFrame, PlacementOptions, datetime, datetime, bool, str
    ],
) -> pl.DataFrame:
    return simulate_replay(*args).curve.drop("instant")


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
) -> dict[str, pl.DataFrame]:
    """By-time replay curves of several policies, each the mean over ``options.seeds`` seeds.

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
         start, end, empty, queue)
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
