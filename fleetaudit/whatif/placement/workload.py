"""The placement engine's requests (per-request pod arrays) and the fragmentation measure.

Requests. ``gpus`` is the request's GPU demand; ``gpus_per_pod`` (default
min(gpus, 8)) splits it into k = gpus / gpus_per_pod pods, placed
all-or-nothing (with ``locality`` ``switch`` every pod stays in the first
pod's switch domain, with ``block`` in its block domain
(:func:`fleetaudit.model.capacity.block_domains`), with ``node`` on its node). A
pod's CPUs are ``cpus / k`` when ``cpus`` is given, else ``cpus_per_gpu`` x its GPUs (memory alike).
``gpu_model`` is one model, several joined by ``|``, or empty for any.

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
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from fleetaudit.core.errors import UsageError
from fleetaudit.model.capacity import optional_column
from fleetaudit.model.schema import DEFAULT_POD_GPUS
from fleetaudit.model.shapes import default_locality
from fleetaudit.whatif.placement.fleet import _U, _Fleet, _prepare_fleet, _row_ids, _State, _units

LOCALITIES = ("any", "switch", "node", "block")  # indices are stored: append only
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
    per_pod = np.where(np.isnan(per_pod), np.minimum(gpus, DEFAULT_POD_GPUS), per_pod)
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
            value = default_locality(int(pods[i]))
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
        freq: np.ndarray = np.bincount(inverse, weights=weights)
        # Most popular first; equal counts in shape order, so the cut is stable.
        order = np.lexsort((*uniq.T[::-1], -freq))
        uniq, freq = uniq[order], freq[order]
        cumulative = np.cumsum(freq)
        cut = int(np.searchsorted(cumulative, options.frag_popularity * freq.sum() - 1e-9)) + 1
        uniq, freq = uniq[:cut], freq[:cut] / freq[:cut].sum()
    else:
        uniq, freq = np.zeros((0, 4), np.int64), np.zeros(0, np.float64)
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
