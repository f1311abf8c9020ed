"""Capacity: the one model of what a node holds and what a pod of a shape takes.

Every engine (occupancy, shapes, history, denominators, compaction, reclaim,
harvesting, placement) counts capacity through this module, so no two of them
can disagree on it. It owns:

- the units: GPUs, CPUs and memory as integer micro-units (:data:`SHARE_UNITS`
  per GPU, core or GiB; :func:`micro_units`), and the one "unbounded" value
  :data:`UNBOUNDED` (a node of unknown memory; a pod that needs no CPU). In
  frames of float quantities it reads as ``inf`` (:func:`to_quantity`);
- the node index (:func:`node_index`, and :func:`node_arrays` for numpy
  engines): node order (by node_id), model, switch and block domain (the one
  domain key: :func:`switch_domains`, :func:`block_domains`), health (a null
  health is ``healthy``, the inputs' default: :func:`usable`) and capacity in
  units;
- the size of a pod of a shape in those units (:class:`Pod`);
- first-fit-decreasing share packing (:func:`first_fit_decreasing`,
  :func:`packed_fills`);
- the slot count of a pod on a node (:func:`node_slots` for one node,
  :func:`slot_exprs` for a polars frame, :func:`slots_array` for numpy arrays:
  one rule in three forms, tested against each other), including the
  over-committed-node rule (:func:`share_room`; :func:`room_counts` over arrays),
  free and partially occupied nodes (:func:`node_use`), and the instances a domain's
  slots give a gang (:func:`gang_instances`);
- health over time (:class:`Health`, :func:`health_of`): the intervals of every
  source merged into the union of out-of-service time per node and per GPU
  (:func:`health_pieces` names each moment by its most severe interval), the GPUs
  of each node out of service as a step function (:attr:`Health.steps`, read at an
  instant by :func:`gpus_out_at`), and how the recorded ``health`` column combines
  with the intervals (:func:`whole_window_health`).

The compiled harvesting kernel and the compaction ledger replay keep packings
of their own on purpose: they are independent checks of this module (the
kernel takes its node arrays from :func:`node_arrays`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import polars as pl

if TYPE_CHECKING:
    import numpy as np
    from polars._typing import PolarsDataType
# numpy loads when an array form runs: ingest and the command line's start-up
# import this module (through occupancy) without it.

__all__ = [
    "BLOCK_DOMAIN",
    "FAILING_STATES",
    "FOREVER_US",
    "HEALTHY",
    "SEVERITY",
    "SHARE_UNITS",
    "SWITCH_DOMAIN",
    "UNBOUNDED",
    "Health",
    "NodeArrays",
    "Pod",
    "ShapeLike",
    "block_domains",
    "closed_fills",
    "event_states_at",
    "first_fit_decreasing",
    "free_array",
    "free_units",
    "gang_instances",
    "gpus_out_at",
    "health_of",
    "health_pieces",
    "micro_units",
    "no_health",
    "node_arrays",
    "node_index",
    "node_slots",
    "node_slots_at",
    "node_use",
    "optional_column",
    "out_unheld",
    "over_committed",
    "packed_fills",
    "room_counts",
    "share_room",
    "slot_exprs",
    "slots_array",
    "switch_domain",
    "switch_domains",
    "to_quantity",
    "units_of",
    "usable",
    "usable_expr",
    "whole_window_health",
]

SHARE_UNITS = 1_000_000
"""Micro-units per GPU (and per CPU core, per GiB) used for exact arithmetic."""

UNBOUNDED = 1 << 62
"""The one "unbounded" amount of units: the capacity of a dimension a node does not
declare (a null ``memory_gib``), the free units left of it, and the slots of a
dimension a pod does not need. Sums of a few of them stay within int64."""

HEALTHY = "healthy"
"""The health of a node that takes work; a null health means it (the inputs' default)."""


# ----------------------------------------------------------------------- units


def micro_units(column: str | pl.Expr) -> pl.Expr:
    """A quantity column (a name or an expression) in integer micro-units (null stays
    null): how every engine counts GPUs, CPUs and memory exactly.

    >>> pl.DataFrame({"x": [0.9, None, 2.5]}).select(micro_units("x"))["x"].to_list()
    [900000, None, 2500000]
    >>> pl.select(micro_units(pl.lit(0.3))).item()
    300000
    """
    quantity = pl.col(column) if isinstance(column, str) else column
    return (quantity.cast(pl.Float64) * SHARE_UNITS).round().cast(pl.Int64)


def units_of(quantity: float | None) -> int:
    """One capacity quantity in micro-units; unknown (None) or infinite is :data:`UNBOUNDED`.

    >>> units_of(0.9), units_of(None) == UNBOUNDED, units_of(float("inf")) == UNBOUNDED
    (900000, True, True)
    """
    if quantity is None or quantity == float("inf"):
        return UNBOUNDED
    return round(float(quantity) * SHARE_UNITS)


def to_quantity(units: int) -> float:
    """Micro-units back to the quantity a frame holds; :data:`UNBOUNDED` reads as ``inf``.

    >>> to_quantity(31_100_000), to_quantity(UNBOUNDED)
    (31.1, inf)
    """
    return float("inf") if units >= UNBOUNDED else units / SHARE_UNITS


def free_array(capacity: np.ndarray, used: np.ndarray) -> np.ndarray:
    """:func:`free_units` over int64 arrays.

    >>> import numpy as np
    >>> free_array(np.array([8, 8, UNBOUNDED]), np.array([3, 9, 5])).tolist() == [5, 0, UNBOUNDED]
    True
    """
    import numpy as np

    capacity = np.asarray(capacity, dtype=np.int64)
    return np.where(capacity >= UNBOUNDED, UNBOUNDED, np.maximum(capacity - used, 0))


def free_units(capacity: int, used: int) -> int:
    """Free units of a dimension: capacity - used floored at 0; unbounded stays unbounded.

    >>> free_units(8, 3), free_units(8, 9), free_units(UNBOUNDED, 5) == UNBOUNDED
    (5, 0, True)
    """
    if capacity >= UNBOUNDED:
        return UNBOUNDED
    return max(capacity - used, 0)


# ------------------------------------------------------------------ node index


def optional_column(
    frame: pl.DataFrame, name: str, dtype: PolarsDataType, default: object
) -> pl.Series:
    """A column of ``frame`` cast to ``dtype``, or ``default`` on every row when absent."""
    if name in frame.columns:
        return frame[name].cast(dtype)
    return pl.Series(name, [default] * frame.height, dtype=dtype)


BLOCK_DOMAIN = "block_domain"
"""The column :func:`block_domains` fills: the domain of ``block`` locality."""

SWITCH_DOMAIN = "domain"
"""The column :func:`switch_domains` fills: the domain of ``switch`` locality."""

_BLOCK, _SWITCH, _NODE = "block ", "switch ", "node "
"""The prefixes that name a domain's level, so keys of two levels never collide."""


def switch_domain(switch_id: str | None, node_id: str) -> str:
    """The ``switch`` locality domain of one node: the one definition.

    A switch domain is the node's switch; a node without one is a domain by
    itself. The key names its level (``switch s1``, ``node n1``), so a switch
    and a node of the same name never share a domain, and the keys sort as the
    plain names do within a level (every lone node before every switch).
    :func:`switch_domains` is the same key for a frame.

    >>> switch_domain("leaf1", "n2"), switch_domain(None, "leaf1")
    ('switch leaf1', 'node leaf1')
    """
    return _SWITCH + switch_id if switch_id is not None else _NODE + node_id


def _switch_key(switch: pl.Expr, node: pl.Expr) -> pl.Expr:
    return (
        pl.when(switch.is_not_null())
        .then(pl.lit(_SWITCH) + switch)
        .otherwise(pl.lit(_NODE) + node)
    )


def switch_domains(frame: pl.DataFrame) -> pl.Series:
    """The ``switch`` locality domain of each node of ``frame`` (column ``domain``).

    Each row's key is :func:`switch_domain` of its switch_id and node_id; a
    frame without ``switch_id`` has every node a domain by itself.

    >>> nodes = pl.DataFrame({"node_id": ["leaf1", "n2", "n3"],
    ...     "switch_id": [None, "leaf1", "leaf1"]})
    >>> switch_domains(nodes).to_list()
    ['node leaf1', 'switch leaf1', 'switch leaf1']
    """
    node = frame["node_id"].cast(pl.String)
    switch = optional_column(frame, "switch_id", pl.String, None)
    return (
        pl.DataFrame({"n": node, "s": switch})
        .select(_switch_key(pl.col("s"), pl.col("n")).alias(SWITCH_DOMAIN))
        .to_series()
    )


def block_domains(frame: pl.DataFrame) -> pl.Series:
    """The ``block`` locality domain of each node of ``frame``: the one definition.

    A block domain is the node's ``block_id``; a node without one is in its
    switch's domain (a block holds at least its switch), and a node without
    either is a domain by itself. The key names its level (``block b1``,
    ``switch s1``, ``node n1``), so a block, a switch and a node of the same
    name never share a domain. A frame without ``block_id`` (an older store) has
    no blocks.

    >>> nodes = pl.DataFrame({"node_id": ["a", "b", "c", "d"],
    ...     "switch_id": ["s1", "s1", "s2", None], "block_id": ["b1", "b1", None, None]})
    >>> block_domains(nodes).to_list()
    ['block b1', 'block b1', 'switch s2', 'node d']
    """
    node = frame["node_id"].cast(pl.String)
    switch = optional_column(frame, "switch_id", pl.String, None)
    block = optional_column(frame, "block_id", pl.String, None)
    return (
        pl.DataFrame({"n": node, "s": switch, "b": block})
        .select(
            pl.when(pl.col("b").is_not_null())
            .then(pl.lit(_BLOCK) + pl.col("b"))
            .otherwise(_switch_key(pl.col("s"), pl.col("n")))
            .alias(BLOCK_DOMAIN)
        )
        .to_series()
    )



def usable(health: str | None) -> bool:
    """Whether a node of this health takes work: ``healthy``, or null (the inputs'
    default health).

    >>> [usable(h) for h in ("healthy", None, "degraded", "down")]
    [True, True, False, False]
    """
    return health is None or health == HEALTHY


def usable_expr(frame: pl.DataFrame | None = None) -> pl.Expr:
    """:func:`usable` as a polars expression over ``health``; a frame without that
    column (when given) has every node usable.

    >>> frame = pl.DataFrame({"health": ["healthy", None, "down"]})
    >>> frame.select(usable_expr())["health"].to_list()
    [True, True, False]
    """
    if frame is not None and "health" not in frame.columns:
        return pl.lit(True).alias("health")
    return pl.col("health").cast(pl.String).fill_null(HEALTHY) == HEALTHY


def node_index(nodes: pl.DataFrame) -> pl.DataFrame:
    """The fleet's node index: one row per node, in node_id order.

    Columns: node (UInt32, 0..n-1, the row's position), node_id (String),
    gpu_model (String), domain (the switch domain,
    :func:`switch_domains`), block_domain
    (:func:`block_domains`), usable (Boolean,
    :func:`usable`), gpus (Int64, null = 0), cpus_u (Int64 micro-cores) and
    memory_u (Int64 micro-GiB): a dimension the node does not declare (null, or
    no such column) is :data:`UNBOUNDED`, as free capacity reads it.

    >>> nodes = pl.DataFrame({"node_id": ["b", "a"], "gpu_model": ["H20", "H20"],
    ...     "gpus": [8, 4], "cpus": [64.0, 32.0], "memory_gib": [None, 512.0],
    ...     "switch_id": ["s", None], "health": [None, "down"]})
    >>> index = node_index(nodes)
    >>> index.select("node", "node_id", "domain", "usable", "gpus", "cpus_u").rows()
    [(0, 'a', 'node a', False, 4, 32000000), (1, 'b', 'switch s', True, 8, 64000000)]
    >>> index["memory_u"].to_list() == [512_000_000, UNBOUNDED]
    True
    """
    frame = nodes.with_columns(pl.col("node_id").cast(pl.String)).sort("node_id")
    return pl.DataFrame(
        {
            "node_id": frame["node_id"],
            "gpu_model": optional_column(frame, "gpu_model", pl.String, None),
            SWITCH_DOMAIN: switch_domains(frame),
            BLOCK_DOMAIN: block_domains(frame),
            "usable": frame.with_columns(usable_expr(frame).alias("_usable"))["_usable"],
            "gpus": optional_column(frame, "gpus", pl.Int64, 0).fill_null(0),
            "cpus_u": _capacity_units(frame, "cpus"),
            "memory_u": _capacity_units(frame, "memory_gib"),
        },
        schema_overrides={"gpus": pl.Int64, "cpus_u": pl.Int64, "memory_u": pl.Int64},
    ).with_row_index("node")


def _capacity_units(frame: pl.DataFrame, column: str) -> pl.Series:
    if column not in frame.columns:
        return pl.Series(column, [UNBOUNDED] * frame.height, dtype=pl.Int64)
    return frame.select(micro_units(column).fill_null(UNBOUNDED)).to_series()


@dataclass(frozen=True)
class NodeArrays:
    """:func:`node_index` as numpy arrays (the form of the numpy and numba engines)."""

    node_id: list[str]
    gpu_model: list[str | None]
    domain: list[str]
    block_domain: list[str]
    usable: np.ndarray  # bool
    gpus: np.ndarray  # int64
    cpus: np.ndarray  # int64 micro-cores
    memory: np.ndarray  # int64 micro-GiB, UNBOUNDED when unknown


def node_arrays(nodes: pl.DataFrame) -> NodeArrays:
    """The node index as arrays, in node_id order.

    >>> nodes = pl.DataFrame({"node_id": ["n2", "n1"], "gpu_model": ["A", "B"], "gpus": [8, 4],
    ...     "cpus": [16.0, 8.0], "memory_gib": [64.0, None], "switch_id": [None, None],
    ...     "health": ["healthy", None]})
    >>> arrays = node_arrays(nodes)
    >>> arrays.node_id, arrays.usable.tolist(), arrays.memory.tolist() == [UNBOUNDED, 64_000_000]
    (['n1', 'n2'], [True, True], True)
    """
    import numpy as np

    index = node_index(nodes)
    return NodeArrays(
        node_id=index["node_id"].to_list(),
        gpu_model=index["gpu_model"].to_list(),
        domain=index[SWITCH_DOMAIN].to_list(),
        block_domain=index[BLOCK_DOMAIN].to_list(),
        usable=index["usable"].to_numpy().astype(np.bool_),
        gpus=index["gpus"].to_numpy().astype(np.int64),
        cpus=index["cpus_u"].to_numpy().astype(np.int64),
        memory=index["memory_u"].to_numpy().astype(np.int64),
    )


# ------------------------------------------------------------------------ pods


class ShapeLike(Protocol):
    """What :meth:`Pod.of` reads of a shape (:class:`fleetaudit.model.shapes.Shape`)."""

    @property
    def gpus(self) -> float: ...
    @property
    def gpus_per_pod(self) -> float: ...
    @property
    def cpus_per_gpu(self) -> float: ...
    @property
    def memory_gib_per_gpu(self) -> float: ...
    @property
    def is_share(self) -> bool: ...


@dataclass(frozen=True)
class Pod:
    """One pod of a shape in integer units.

    Attributes:
        share: micro-GPUs of a share pod (0 < gpus < 1); 0 for a whole-GPU pod.
        gpus: whole GPUs of a whole-GPU pod; 0 for a share pod.
        cpus: micro-cores (0: the pod needs none; its CPU slots are unbounded).
        memory: micro-GiB (0: none needed; unbounded slots).
    """

    share: int
    gpus: int
    cpus: int
    memory: int

    @classmethod
    def of(cls, shape: ShapeLike) -> Pod:
        """The pod of ``shape``: p = gpus_per_pod GPUs, p x cpus_per_gpu cores, p x
        memory_gib_per_gpu GiB, each rounded to units once.

        >>> from fleetaudit.model.shapes import make_shape
        >>> Pod.of(make_shape("H20", 16, gpus_per_pod=8, cpus_per_gpu=12))
        Pod(share=0, gpus=8, cpus=96000000, memory=0)
        >>> Pod.of(make_shape("H20", 0.3))
        Pod(share=300000, gpus=0, cpus=0, memory=0)
        """
        p = shape.gpus_per_pod
        return cls(
            share=round(shape.gpus * SHARE_UNITS) if shape.is_share else 0,
            gpus=0 if shape.is_share else round(p),
            cpus=max(round(p * shape.cpus_per_gpu * SHARE_UNITS), 0),
            memory=max(round(p * shape.memory_gib_per_gpu * SHARE_UNITS), 0),
        )


# ------------------------------------------------------------------------- FFD


def first_fit_decreasing(sizes: Iterable[int]) -> list[int]:
    """Pack share sizes first-fit-decreasing into GPUs of capacity ``SHARE_UNITS``.

    Args:
        sizes: share sizes in micro-units, each in ``(0, SHARE_UNITS]``, in any
            order.

    Returns:
        The fill of each GPU used, in micro-units, in the order the GPUs were
        opened. ``len(result)`` is the number of GPUs the shares occupy.

    Example:
        >>> first_fit_decreasing([400_000, 500_000, 600_000, 500_000])
        [1000000, 1000000]
        >>> first_fit_decreasing([300_000, 700_000, 700_000])
        [1000000, 700000]
    """
    bins: list[int] = []
    for size in sorted(sizes, reverse=True):
        for i, fill in enumerate(bins):
            if fill + size <= SHARE_UNITS:
                bins[i] = fill + size
                break
        else:
            bins.append(size)
    return bins


GangSlots = TypeVar("GangSlots", int, "np.ndarray", pl.Expr)


@lru_cache(maxsize=1 << 16)
def _packed_desc(sizes_desc: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(sorted(first_fit_decreasing(sizes_desc), reverse=True))


def packed_fills(sizes: Iterable[int]) -> tuple[int, ...]:
    """The FFD fills of a multiset of shares, descending (memoised on the multiset:
    fleets repeat a few share mixes on thousands of nodes and instants).

    >>> packed_fills([300_000, 700_000, 700_000])
    (1000000, 700000)
    >>> packed_fills([])
    ()
    """
    key = tuple(sorted(sizes, reverse=True))
    return _packed_desc(key) if key else ()


# ----------------------------------------------------------------------- slots


def share_room(share: int, fills: Iterable[int], *, steady: bool = True, over: bool = False) -> int:
    """Share pods of ``share`` micro-GPUs the partly filled GPUs still take.

    A partly filled GPU takes more shares only where nothing starts on the node
    during the window (``steady``: its free GPUs over the window are its free
    GPUs at t) and where the record does not over-commit the node (``over``:
    gpus_used > gpus; its shares pack onto more GPUs than it has, so its partly
    filled GPUs are not all real).

    >>> share_room(300_000, [1_000_000, 700_000, 400_000])
    3
    >>> share_room(300_000, [700_000, 400_000], over=True), share_room(300_000, [400_000], steady=False)
    (0, 0)
    """
    if not steady or over:
        return 0
    return sum(max(SHARE_UNITS - fill, 0) // share for fill in fills)


def room_counts(
    free_gpus: np.ndarray, free_gpus_window: np.ndarray, used_gpus: np.ndarray, gpus: np.ndarray
) -> np.ndarray:
    """:func:`share_room`'s two conditions over numpy arrays: where a node's partly
    filled GPUs take share pods (steady: its free GPUs at t are its free GPUs over the
    window; not over-committed: used_gpus <= gpus).

    >>> import numpy as np
    >>> room_counts(np.array([2, 2, 0]), np.array([2, 1, 0]), np.array([6, 6, 9]),
    ...     np.array([8, 8, 8])).tolist()
    [True, False, False]
    """
    import numpy as np

    return (np.asarray(free_gpus) == free_gpus_window) & ~(np.asarray(used_gpus) > gpus)


def _by(free: int | None, need: int) -> int:
    if need <= 0 or free is None or free >= UNBOUNDED:
        return UNBOUNDED
    return max(free, 0) // need


def node_slots(
    pod: Pod,
    free_gpus_window: int,
    free_cpus: int | None,
    free_memory: int | None,
    *,
    fills: Sequence[int] = (),
    free_gpus: int | None = None,
    over: bool = False,
) -> int:
    """Pods of ``pod`` one node takes: min(GPU slots, CPU slots, memory slots).

    Args:
        pod: the pod.
        free_gpus_window: whole GPUs free over the window (capacity - peak, >= 0).
        free_cpus, free_memory: free micro-units over the window; None or
            :data:`UNBOUNDED` is unbounded.
        fills: share pods only: the fills (micro-GPUs) of the GPUs holding shares at t.
        free_gpus: share pods only: whole GPUs free at t (None: the window's).
        over: share pods only: the node is over-committed at t (gpus_used > gpus).

    >>> node_slots(Pod(0, 4, 16_000_000, 0), 8, 24_000_000, None)
    1
    >>> node_slots(Pod(300_000, 0, 0, 0), 1, UNBOUNDED, UNBOUNDED, fills=[700_000, 500_000])
    5
    >>> node_slots(Pod(300_000, 0, 0, 0), 1, None, None, fills=[700_000], over=True)
    3
    """
    if pod.share:
        steady = free_gpus is None or free_gpus == free_gpus_window
        gpu = free_gpus_window * (SHARE_UNITS // pod.share) + share_room(
            pod.share, fills, steady=steady, over=over
        )
    else:
        gpu = free_gpus_window // pod.gpus
    return min(gpu, _by(free_cpus, pod.cpus), _by(free_memory, pod.memory))


def node_slots_at(
    pod: Pod,
    capacity: tuple[int, int, int],
    used_gpus: int,
    peak: tuple[int, int, int],
    fills: Iterable[int] = (),
) -> int:
    """:func:`node_slots` from a node's capacity and occupancy, in one call (for the
    engines that track occupancy themselves, in hot loops: reclaim).

    Args:
        pod: the pod.
        capacity: the node's GPUs, micro-cores and micro-GiB (:data:`UNBOUNDED`: unknown).
        used_gpus: GPUs occupied at t (whole GPUs plus those the shares fill).
        peak: the largest GPUs, micro-cores and micro-GiB occupied over the window.
        fills: share pods only: the fills of the GPUs holding shares at t.

    >>> node_slots_at(Pod(300_000, 0, 0, 0), (8, UNBOUNDED, UNBOUNDED), 7, (7, 0, 0), [700_000])
    4
    >>> node_slots_at(Pod(300_000, 0, 0, 0), (8, UNBOUNDED, UNBOUNDED), 9, (9, 0, 0), [700_000])
    0
    """
    gpus, cpus, memory = capacity
    free_window = gpus - peak[0] if gpus > peak[0] else 0
    if pod.share:
        slots = free_window * (SHARE_UNITS // pod.share)
        # partly filled GPUs: only where nothing starts in W and the node is not over-committed
        if used_gpus <= gpus and gpus - used_gpus == free_window:
            slots += sum(max(SHARE_UNITS - fill, 0) // pod.share for fill in fills)
    else:
        slots = free_window // pod.gpus
    if pod.cpus > 0 and cpus < UNBOUNDED:
        slots = min(slots, max(cpus - peak[1], 0) // pod.cpus)
    if pod.memory > 0 and memory < UNBOUNDED:
        slots = min(slots, max(memory - peak[2], 0) // pod.memory)
    return slots


def slots_array(
    pod: Pod,
    free_gpus_window: np.ndarray,
    free_cpus: np.ndarray | None,
    free_memory: np.ndarray | None,
    room: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """:func:`node_slots` over numpy arrays of any (equal) shape.

    Free GPUs, CPUs and memory are integer arrays, >= 0 (as :func:`free_array`
    gives them); CPUs and memory in micro-units, :data:`UNBOUNDED` (or more)
    is unbounded. ``room`` (share pods only) is :func:`share_room` of each
    node, already zero where it does not count. The free units of a dimension
    the pod does not need are not read (None will do).

    Returns:
        gpu_slots, cpu_slots, memory_slots and slots (the minimum of the three).
        A dimension the pod does not need has the scalar :data:`UNBOUNDED` as its
        slots (it broadcasts), so it costs no array and no pass.

    >>> import numpy as np
    >>> out = slots_array(Pod(0, 4, 16_000_000, 0), np.array([8, 8, 3]),
    ...     np.array([24_000_000, 64_000_000, 64_000_000]), np.array([UNBOUNDED] * 3))
    >>> out["slots"].tolist(), out["cpu_slots"].tolist(), int(out["memory_slots"]) == UNBOUNDED
    ([1, 2, 0], [1, 4, 4], True)
    """
    import numpy as np

    free_gpus_window = np.asarray(free_gpus_window)
    if pod.share:
        gpu = free_gpus_window.astype(np.int64) * (SHARE_UNITS // pod.share)
        if room is not None:
            gpu = gpu + room
    else:
        gpu = free_gpus_window // pod.gpus
    out: dict[str, np.ndarray] = {"gpu_slots": gpu}
    slots = gpu
    dimensions = (("cpu_slots", free_cpus, pod.cpus), ("memory_slots", free_memory, pod.memory))
    for name, free, need in dimensions:
        if need <= 0 or free is None:
            if need > 0:
                raise ValueError(f"slots_array: {name} needs the free units of that dimension")
            out[name] = np.int64(UNBOUNDED)
            continue
        free = np.asarray(free, dtype=np.int64)
        out[name] = np.where(free >= UNBOUNDED, UNBOUNDED, free // need)
        slots = np.minimum(slots, out[name])
    out["slots"] = slots
    return out


def slot_exprs(
    pod: Pod,
    *,
    free_gpus: str = "free_gpus",
    free_gpus_window: str = "free_gpus_window",
    free_cpus: str = "free_cpus_window",
    free_memory: str = "free_memory_gib_window",
    share_fills: str = "share_fills",
    over: pl.Expr | None = None,
) -> dict[str, pl.Expr]:
    """:func:`node_slots` as polars expressions over a node state frame
    (:func:`fleetaudit.model.occupancy.node_state`'s columns).

    Free CPUs and memory are Float64 quantities (null or ``inf``: unbounded);
    ``share_fills`` is List(Float64) of fills in GPUs. ``over`` is the
    over-committed flag (None: no node is).

    Returns:
        gpu_slots, cpu_slots, memory_slots (Int64 expressions, so named).

    >>> state = pl.DataFrame({"free_gpus": [1, 1], "free_gpus_window": [1, 1],
    ...     "free_cpus_window": [8.0, 2.0], "free_memory_gib_window": [None, float("inf")],
    ...     "share_fills": [[0.7, 0.5], [0.7]]})
    >>> exprs = slot_exprs(Pod(300_000, 0, 3_000_000, 0))
    >>> state.select(exprs.values()).rows()
    [(5, 2, 4611686018427387904), (4, 0, 4611686018427387904)]
    """

    def by(column: str, need: int) -> pl.Expr:
        if need <= 0:
            return pl.lit(UNBOUNDED, dtype=pl.Int64)
        free = pl.col(column)
        # polars evaluates both branches: a non-strict cast keeps inf from failing
        slots = ((free * SHARE_UNITS).round() // need).cast(pl.Int64, strict=False)
        unbounded = free.is_null() | free.is_infinite()
        return pl.when(unbounded).then(pl.lit(UNBOUNDED, dtype=pl.Int64)).otherwise(slots)

    if pod.share:
        room = (
            pl.col(share_fills)
            .list.eval(
                ((SHARE_UNITS - (pl.element() * SHARE_UNITS).round().cast(pl.Int64)) // pod.share)
                .clip(lower_bound=0)
            )
            .list.sum()
        )
        steady = pl.col(free_gpus_window) == pl.col(free_gpus)
        if over is not None:
            steady = steady & ~over
        gpu = pl.col(free_gpus_window) * (SHARE_UNITS // pod.share) + pl.when(steady).then(
            room
        ).otherwise(0)
    else:
        gpu = pl.col(free_gpus_window) // pod.gpus
    return {
        "gpu_slots": gpu.cast(pl.Int64).alias("gpu_slots"),
        "cpu_slots": by(free_cpus, pod.cpus).alias("cpu_slots"),
        "memory_slots": by(free_memory, pod.memory).alias("memory_slots"),
    }


def over_committed(frame: pl.DataFrame) -> pl.Expr | None:
    """The over-committed flag (gpus_used > gpus) of a node state frame, or None
    when the frame lacks those columns (then no node is over-committed)."""
    if {"gpus_used", "gpus"} <= set(frame.columns):
        return pl.col("gpus_used") > pl.col("gpus")
    return None


def closed_fills(frame: pl.DataFrame) -> pl.Expr | None:
    """Where a node state's partly filled GPUs take no more shares (:func:`share_room`'s
    ``over``), or None when no node's are closed: the record over-commits the node
    (:func:`over_committed`), or, with health intervals, its GPUs occupied at t and
    those out of service add up to more than it has (a node out of service whole with
    shares on it; a failed GPU that must be one of the occupied ones).

    >>> state = pl.DataFrame({"gpus": [8, 8, 8], "gpus_used": [3, 3, 9], "gpus_out": [8, 1, 0]})
    >>> state.select(closed_fills(state))["gpus_used"].to_list()
    [True, False, True]
    """
    over = over_committed(frame)
    if over is None or "gpus_out" not in frame.columns:
        return over
    return over | (pl.col("gpus_used") + pl.col("gpus_out") > pl.col("gpus"))


def node_use(frame: pl.DataFrame) -> tuple[pl.Expr, pl.Expr]:
    """Whether each node of a node state frame is free, and whether it is partially
    occupied: the one definition (``state``, compaction). Both are usable nodes with
    GPUs; a free node has none occupied (gpus_used == 0), a partially occupied one
    0 < gpus_used < gpus. A node without GPUs is neither. With health intervals
    (gpus_out), a node out of service whole at t is neither, a node with some GPUs out
    of service and no work is free (of its other GPUs), and one whose GPUs are all
    occupied or out of service is not partial.

    >>> state = pl.DataFrame({"health": ["healthy", "healthy", None, "down", "healthy"],
    ...     "gpus": [8, 8, 8, 8, 0], "gpus_used": [0, 3, 8, 0, 0]})
    >>> free, partial = node_use(state)
    >>> state.select(free.alias("free"), partial.alias("partial")).rows()
    [(True, False), (False, True), (False, False), (False, False), (False, False)]
    """
    scope = usable_expr(frame) & (pl.col("gpus") > 0)
    used = pl.col("gpus_used")
    if "gpus_out" not in frame.columns:
        return scope & (used == 0), scope & (used > 0) & (used < pl.col("gpus"))
    out = pl.col("gpus_out")
    free = scope & (used == 0) & (out < pl.col("gpus"))
    return free, scope & (used > 0) & (used + out < pl.col("gpus"))


def gang_instances(slots: GangSlots, pods: int) -> tuple[GangSlots, GangSlots]:
    """Instances of a gang of ``pods`` pods that a group's slots give (an instance
    takes ``pods`` slots of one domain, model or node), and the slots left over.

    The same rule for an int, a numpy array or a polars expression.

    >>> gang_instances(11, 4)
    (2, 3)
    >>> import numpy as np
    >>> [a.tolist() for a in gang_instances(np.array([3, 8, 9]), 4)]
    [[0, 2, 2], [3, 0, 1]]
    >>> pl.select(*(e.alias(n) for e, n in zip(gang_instances(pl.lit(9), 4), "il"))).row(0)
    (2, 1)
    """
    return slots // pods, slots % pods


# ----------------------------------------------------------------- health over time

FOREVER_US = 1 << 62
"""The end of an open health interval, in µs since the epoch: later than any instant a
store holds (ingest rejects times from 2200 on), so an open interval covers every
instant after its start."""

SEVERITY = ("down", "unhealthy", "drain", "cordoned", "degraded")
"""The states of a health interval, most severe first: where intervals overlap, the most
severe one names that time (its state and reason)."""

FAILING_STATES = ("down", "unhealthy")
"""The states of a health interval that end the work on what it covers (the node goes
down, the GPU fails); the others (drain, cordoned, degraded) only keep new work off."""

_EVENT_SCHEMA: dict[str, PolarsDataType] = {
    "node_id": pl.String,
    "gpu_index": pl.Int64,
    "start_us": pl.Int64,
    "end_us": pl.Int64,
    "state": pl.String,
    "reason": pl.String,
    "source": pl.String,
}
_SPAN_SCHEMA: dict[str, PolarsDataType] = {
    "node_id": pl.String,
    "gpu_index": pl.Int64,
    "start_us": pl.Int64,
    "end_us": pl.Int64,
}
_STEP_SCHEMA: dict[str, PolarsDataType] = {
    "node_id": pl.String,
    "start_us": pl.Int64,
    "end_us": pl.Int64,
    "gpus_out": pl.Int64,
    "whole": pl.Boolean,
}


@dataclass(frozen=True)
class Health:
    """Health over time: when each node, or one GPU of it, was out of service.

    A health interval (a row of ``node_events``) says that a node, or one GPU of it,
    took no new work from its start to its end (an open interval: for ever). Intervals
    of several sources that overlap describe one outage: a node or GPU is out of
    service at t when any interval covers t (the union of their time), counted once.
    :func:`health_of` builds it; an empty one changes no figure.

    Attributes:
        events: the intervals as given, on known nodes and GPUs: node_id, gpu_index
            (null: the whole node), start_us, end_us (µs since the epoch;
            :data:`FOREVER_US` when open), state, reason, source. Intervals of no
            length are left out: they never cover an instant.
        spans: their union per node (gpu_index null) and per GPU: node_id, gpu_index,
            start_us, end_us, sorted; intervals that overlap or touch make one span.
        steps: the GPUs of each node out of service, as a step function: node_id,
            start_us, end_us, gpus_out (all the node's GPUs while a whole-node span
            covers the time, else how many of its GPUs a span covers), whole (a
            whole-node span); only times with gpus_out > 0, sorted by node and time.
        dated: the nodes whose recorded ``health`` (not healthy) an open whole-node
            span dates (:func:`whole_window_health`), sorted.
    """

    events: pl.DataFrame
    spans: pl.DataFrame
    steps: pl.DataFrame
    dated: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """No interval: every figure is the one the recorded health alone gives."""
        return self.events.height == 0

    def steps_between(self, lo: int, hi: int) -> pl.DataFrame:
        """The steps that meet ``[lo, hi)`` (µs), unclipped."""
        return self.steps.filter((pl.col("start_us") < hi) & (pl.col("end_us") > lo))


def no_health() -> Health:
    """The health of a fleet without intervals."""
    return Health(
        events=pl.DataFrame(schema=_EVENT_SCHEMA),
        spans=pl.DataFrame(schema=_SPAN_SCHEMA),
        steps=pl.DataFrame(schema=_STEP_SCHEMA),
    )


def health_of(nodes: pl.DataFrame, events: pl.DataFrame | None) -> Health:
    """The health over time of the fleet ``nodes`` from its intervals.

    Args:
        nodes: the nodes frame (node_id, gpus, health).
        events: the ``node_events`` rows (node_id, gpu_index, start_time, end_time,
            state, reason, source; an empty end_time is open), or None. Rows on nodes
            absent from ``nodes``, or on a GPU index the node does not have, are
            ignored (ingest rejects them).

    >>> from datetime import datetime as dt
    >>> nodes = pl.DataFrame({"node_id": ["n1", "n2"], "gpus": [8, 8],
    ...     "health": ["healthy", "cordoned"]})
    >>> events = pl.DataFrame({"node_id": ["n1", "n1", "n1", "n2"], "gpu_index": [3, 3, None, None],
    ...     "start_time": [dt(2026, 1, 1, 1), dt(2026, 1, 1, 2), dt(2026, 1, 1, 5), dt(2026, 1, 1, 4)],
    ...     "end_time": [dt(2026, 1, 1, 3), dt(2026, 1, 1, 4), dt(2026, 1, 1, 6), None],
    ...     "state": ["unhealthy", "unhealthy", "drain", "cordoned"],
    ...     "reason": ["xid 79", "xid 79", None, None], "source": ["dcgm:xid", "slurm", None, None]})
    >>> h = health_of(nodes, events)
    >>> h.spans.height, h.dated  # the two GPU 3 intervals overlap: one span
    (3, ('n2',))
    >>> [(n, (s // 3_600_000_000) % 24, g) for n, s, _, g, _ in h.steps.rows()]
    [('n1', 1, 1), ('n1', 5, 8), ('n2', 4, 8)]
    """
    if events is None or events.height == 0:
        return no_health()
    capacity = nodes.select(
        pl.col("node_id").cast(pl.String), pl.col("gpus").cast(pl.Int64).fill_null(0)
    ).unique("node_id", keep="first")
    index = optional_column(events, "gpu_index", pl.Int64, None)
    given = events.select(
        pl.col("node_id").cast(pl.String),
        index.alias("gpu_index"),
        pl.col("start_time").cast(pl.Datetime("us")).dt.epoch("us").alias("start_us"),
        pl.col("end_time")
        .cast(pl.Datetime("us"))
        .dt.epoch("us")
        .fill_null(FOREVER_US)
        .alias("end_us"),
        pl.col("state").cast(pl.String),
        optional_column(events, "reason", pl.String, None).alias("reason"),
        optional_column(events, "source", pl.String, None).alias("source"),
    )
    known = (
        given.join(capacity, on="node_id", how="inner")
        .filter(
            (pl.col("end_us") > pl.col("start_us"))
            & (pl.col("gpu_index").is_null() | (pl.col("gpu_index") < pl.col("gpus")))
        )
        .drop("gpus")
        .sort("node_id", "gpu_index", "start_us", "end_us", "state", "source", "reason",
              nulls_last=False)
    )  # fmt: skip
    if known.height == 0:
        return no_health()
    spans = _union(known)
    open_whole = spans.filter(pl.col("gpu_index").is_null() & (pl.col("end_us") >= FOREVER_US))
    recorded = optional_column(nodes, "health", pl.String, None)
    unhealthy = nodes.select(pl.col("node_id").cast(pl.String)).filter(
        recorded.fill_null(HEALTHY) != HEALTHY
    )
    dated = unhealthy.join(open_whole.select("node_id").unique(), on="node_id", how="semi")
    return Health(
        events=known,
        spans=spans,
        steps=_steps(spans, capacity),
        dated=tuple(sorted(dated["node_id"].to_list())),
    )


def _union(events: pl.DataFrame) -> pl.DataFrame:
    """The union of the intervals per node (gpu_index null) and per GPU: :attr:`Health.spans`.

    ``events`` is sorted by node, GPU (the node's own first) and start: a span runs on
    while the next interval of its node or GPU starts at or before its end so far."""
    nodes = events["node_id"].to_list()
    gpus = events["gpu_index"].to_list()
    starts = events["start_us"].to_list()
    ends = events["end_us"].to_list()
    out: dict[str, list[Any]] = {name: [] for name in _SPAN_SCHEMA}
    key: tuple[Any, Any] | None = None
    first = last = 0
    for node, gpu, start, end in zip(nodes, gpus, starts, ends, strict=True):
        if key == (node, gpu) and start <= last:
            last = max(last, end)
            continue
        if key is not None:
            for name, value in zip(out, (*key, first, last), strict=True):
                out[name].append(value)
        key, first, last = (node, gpu), start, end
    if key is not None:
        for name, value in zip(out, (*key, first, last), strict=True):
            out[name].append(value)
    return pl.DataFrame(out, schema=_SPAN_SCHEMA)


def _steps(spans: pl.DataFrame, capacity: pl.DataFrame) -> pl.DataFrame:
    """The GPUs of each node out of service over time: :attr:`Health.steps`."""
    whole = pl.col("gpu_index").is_null().cast(pl.Int64)
    changes = pl.concat(
        [
            spans.select("node_id", pl.col("start_us").alias("time"), whole.alias("w"),
                         (1 - whole).alias("g")),
            spans.filter(pl.col("end_us") < FOREVER_US).select(
                "node_id", pl.col("end_us").alias("time"), (-whole).alias("w"),
                (whole - 1).alias("g"),
            ),
        ]
    )  # fmt: skip
    same_node_next = pl.col("node_id") == pl.col("node_id").shift(-1)
    segments = (
        changes.lazy()
        .group_by("node_id", "time")
        .agg(pl.col("w", "g").sum())
        .sort("node_id", "time")
        .with_columns(
            pl.col("w", "g").cum_sum().over("node_id"),
            pl.when(same_node_next)
            .then(pl.col("time").shift(-1))
            .otherwise(FOREVER_US)
            .alias("end_us"),
        )
        .join(capacity.lazy(), on="node_id")
        .select(
            "node_id",
            pl.col("time").alias("start_us"),
            "end_us",
            pl.when(pl.col("w") > 0)
            .then(pl.col("gpus"))
            .otherwise(pl.min_horizontal("g", "gpus"))
            .alias("gpus_out"),
            (pl.col("w") > 0).alias("whole"),
        )
        .filter((pl.col("gpus_out") > 0) & (pl.col("end_us") > pl.col("start_us")))
        .sort("node_id", "start_us")
        .collect()
    )
    # consecutive segments of one node with the same GPUs out make one step
    new = (
        (pl.col("node_id") != pl.col("node_id").shift(1))
        | (pl.col("start_us") != pl.col("end_us").shift(1))
        | (pl.col("gpus_out") != pl.col("gpus_out").shift(1))
        | (pl.col("whole") != pl.col("whole").shift(1))
    ).fill_null(True)
    return (
        segments.with_columns(new.cum_sum().alias("_run"))
        .group_by("_run", maintain_order=True)
        .agg(
            pl.col("node_id").first(),
            pl.col("start_us").first(),
            pl.col("end_us").last(),
            pl.col("gpus_out").first(),
            pl.col("whole").first(),
        )
        .drop("_run")
        .cast(_STEP_SCHEMA)  # type: ignore[arg-type]
    )


def whole_window_health(nodes: pl.DataFrame, health: Health) -> pl.DataFrame:
    """``nodes`` with the ``health`` every engine applies to the whole time.

    The recorded ``health`` is a node's state at the export. Where no interval dates
    it, it holds over all the time (the export does not say when it began), as it
    did before health intervals existed: a node recorded out of service counts out of
    service throughout, and no work on it counts as allocated. Where an open
    whole-node interval dates it (:attr:`Health.dated`), the intervals are the
    node's history and its recorded health reads ``healthy`` here; an interval that
    ends never dates it.

    >>> nodes = pl.DataFrame({"node_id": ["n1", "n2"], "gpus": [8, 8],
    ...     "health": ["down", "cordoned"]})
    >>> h = Health(no_health().events, no_health().spans, no_health().steps, ("n2",))
    >>> whole_window_health(nodes, h)["health"].to_list()
    ['down', 'healthy']
    """
    if not health.dated or "health" not in nodes.columns:
        return nodes
    dated = pl.col("node_id").cast(pl.String).is_in(list(health.dated))
    return nodes.with_columns(
        pl.when(dated).then(pl.lit(HEALTHY)).otherwise(pl.col("health")).alias("health")
    )


def out_unheld(used: pl.Expr, out: pl.Expr, gpus: pl.Expr) -> pl.Expr:
    """Of a node's ``gpus``, how many of the ``out`` out of service no work holds: the
    ledger's unhealthy GPUs (work on a failed GPU still counts as allocated, so the
    ``used`` ones are taken first, and no count goes past the node's GPUs).

    >>> frame = pl.DataFrame({"used": [0, 3, 8, 9], "out": [2, 2, 1, 1], "gpus": [8] * 4})
    >>> frame.select(out_unheld(pl.col("used"), pl.col("out"), pl.col("gpus")))["used"].to_list()
    [2, 2, 0, 0]
    """
    return (pl.min_horizontal(used + out, gpus) - pl.min_horizontal(used, gpus)).clip(
        lower_bound=0
    )


def gpus_out_at(health: Health, at_us: int) -> pl.DataFrame:
    """node_id, gpus_out, whole: the nodes with GPUs out of service at ``at_us``."""
    return health.steps.filter(
        (pl.col("start_us") <= at_us) & (pl.col("end_us") > at_us)
    ).select("node_id", "gpus_out", "whole")


def _severity(state: pl.Expr) -> pl.Expr:
    return state.replace_strict(
        {s: i for i, s in enumerate(SEVERITY)}, default=len(SEVERITY), return_dtype=pl.Int64
    )


def event_states_at(health: Health, at_us: int) -> pl.DataFrame:
    """node_id, state: the most severe state of the whole-node intervals covering
    ``at_us``, per node they cover."""
    covering = health.events.filter(
        pl.col("gpu_index").is_null()
        & (pl.col("start_us") <= at_us)
        & (pl.col("end_us") > at_us)
    )
    return (
        covering.with_columns(_severity(pl.col("state")).alias("_rank"))
        .sort("node_id", "_rank", "state")
        .group_by("node_id", maintain_order=True)
        .agg(pl.col("state").first())
    )


def health_pieces(health: Health, lo: int | None = None, hi: int | None = None) -> pl.DataFrame:
    """Every moment of out-of-service time once, named by the interval that leads it.

    The union of a node's (or GPU's) intervals split where the leading interval
    changes: the most severe state (:data:`SEVERITY`) among those covering the
    moment, then the one that began first, then by source and reason. Each piece
    carries that interval's state, reason and source, so GPU-hours split by state
    and reason add up to the out-of-service time, each moment counted once.

    Args:
        health: the health.
        lo, hi: clip the pieces to ``[lo, hi)`` µs (None: unclipped).

    Returns:
        node_id, gpu_index (null: the whole node), start_us, end_us, state, reason,
        source; sorted by node, GPU and start.

    >>> from datetime import datetime as dt
    >>> nodes = pl.DataFrame({"node_id": ["n1"], "gpus": [8]})
    >>> events = pl.DataFrame({"node_id": ["n1", "n1"], "gpu_index": [None, None],
    ...     "start_time": [dt(2026, 1, 1, 1), dt(2026, 1, 1, 2)],
    ...     "end_time": [dt(2026, 1, 1, 4), dt(2026, 1, 1, 3)],
    ...     "state": ["drain", "down"], "reason": ["maintenance", "node lost"],
    ...     "source": ["slurm", "kubernetes"]})
    >>> [(s // 3_600_000_000 % 24, e // 3_600_000_000 % 24, state, reason)
    ...  for _, _, s, e, state, reason, _ in health_pieces(health_of(nodes, events)).rows()]
    [(1, 2, 'drain', 'maintenance'), (2, 3, 'down', 'node lost'), (3, 4, 'drain', 'maintenance')]
    """
    events = health.events
    if lo is not None and hi is not None:
        events = events.filter((pl.col("start_us") < hi) & (pl.col("end_us") > lo))
    rows = events.with_columns(_severity(pl.col("state")).alias("_rank")).rows()
    out: list[tuple[Any, ...]] = []
    i, n = 0, len(rows)
    while i < n:
        j = i
        key = rows[i][:2]
        while j < n and rows[j][:2] == key:
            j += 1
        out.extend(_pieces_of(rows[i:j]))
        i = j
    pieces = pl.DataFrame(out, schema=_EVENT_SCHEMA, orient="row")
    if lo is not None and hi is not None:
        pieces = pieces.with_columns(
            pl.col("start_us").clip(lower_bound=lo), pl.col("end_us").clip(upper_bound=hi)
        ).filter(pl.col("end_us") > pl.col("start_us"))
    return pieces


def _pieces_of(group: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The pieces of one node's (or GPU's) intervals, sorted by start: (node_id,
    gpu_index, start_us, end_us, state, reason, source, rank) rows."""
    times = sorted({t for row in group for t in (row[2], row[3])})
    out: list[tuple[Any, ...]] = []
    active: list[tuple[Any, ...]] = []
    k = 0
    last: tuple[Any, ...] | None = None
    for a, b in zip(times, times[1:]):
        while k < len(group) and group[k][2] <= a:
            active.append(group[k])
            k += 1
        active = [row for row in active if row[3] > a]
        if not active:
            last = None
            continue
        lead = min(active, key=lambda r: (r[7], r[2], r[6] or "", r[5] or ""))
        if last is lead and out and out[-1][3] == a:
            out[-1] = (*out[-1][:3], b, *out[-1][4:])
        else:
            out.append((lead[0], lead[1], a, b, lead[4], lead[5], lead[6]))
        last = lead
    return out
