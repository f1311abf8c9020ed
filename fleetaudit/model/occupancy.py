"""Occupancy: the time model of SPEC §2, per node, at an instant and over a window.

Every command that needs "how much of a node is taken, and how much is free"
calls this module instead of re-deriving it. The functions are pure: they take
polars frames (``nodes``, ``allocations``, with the store's columns; extra
columns are ignored) and instants, never mutate their inputs, and return new
frames sorted by ``node_id`` with one row per node of ``nodes``.

Contract (SPEC §2):

- An allocation is active at t when ``start_time <= t < end_time``; a null
  ``end_time`` runs forever. An allocation whose ``end_time`` equals
  ``start_time`` is never active.
- Occupied GPUs of a node = the whole parts of its active allocations' ``gpus``
  plus the number of GPUs that their fractional parts fill when packed
  first-fit-decreasing (FFD) into GPUs of capacity 1. CPUs and memory add up
  plainly. "High" figures are the same computation over the high-priority
  allocations alone (so ``allocated_low = used - used_high``).
- The window W is ``{t}`` without a duration and ``[t, t + duration)`` with one;
  the free capacity over W is capacity minus the largest occupancy any instant
  of W sees, per dimension separately.

Arithmetic is exact: ``gpus``, ``cpus`` and ``memory_gib`` are rounded to
integer micro-units (:data:`SHARE_UNITS` per unit) before anything is added or
packed, so sums, FFD and the cumulative sweeps carry no float error, and every
Float64 returned is the float nearest the exact decimal (32 - 0.9 is 31.1).
Times are integer microseconds. Instants are ``datetime``: naive means UTC,
aware ones are converted to UTC.

Scale: filtering and aggregation are polars expressions keyed by an integer
node index; only the fractional (shared-GPU) parts go through a Python FFD
loop, over plain lists, with the packing of a multiset of share sizes memoised.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta

import polars as pl

from fleetaudit.core.times import epoch_us
from fleetaudit.model.capacity import (
    BLOCK_DOMAIN,
    HEALTHY,
    SHARE_UNITS,
    SWITCH_DOMAIN,
    UNBOUNDED,
    Health,
    block_domains,
    event_states_at,
    first_fit_decreasing,
    gpus_out_at,
    micro_units,
    optional_column,
    out_unheld,
    packed_fills,
    switch_domain,
    switch_domains,
    to_quantity,
    usable_expr,
)

__all__ = [
    "SHARE_UNITS",
    "BLOCK_DOMAIN",
    "SWITCH_DOMAIN",
    "active_at",
    "block_domains",
    "first_fit_decreasing",
    "micro_units",
    "node_state",
    "node_states",
    "nodes_at",
    "occupancy_at",
    "occupancy_timeline",
    "occupied_gpu_seconds",
    "optional_column",
    "pack_shares",
    "peak_occupancy",
    "switch_domain",
    "switch_domains",
]

_FILLS_DTYPE = pl.List(pl.Float64)
_COUNTS = ("gpus_used", "gpus_used_high")
_QUANTITIES = ("cpus_used", "cpus_used_high", "memory_used", "memory_used_high")


# ------------------------------------------------------------------ preparation


def _divided(frame: pl.DataFrame, columns: Sequence[str], divisor: int) -> pl.DataFrame:
    """Integer columns divided exactly into Float64 (nulls kept).

    polars divides by a scalar through its reciprocal (900000 / 1e6 gives
    0.8999999999999999); by a column, element by element, correctly rounded (as numpy
    does, without numpy's masked arrays, which a frame built from numpy imports).
    """
    divisors = pl.repeat(float(divisor), frame.height, eager=True)
    return frame.with_columns((frame[c].cast(pl.Float64) / divisors).alias(c) for c in columns)


def _index(nodes: pl.DataFrame) -> pl.DataFrame:
    """node (UInt32, 0..n-1) and node_id, in node_id order."""
    return (
        nodes.select(pl.col("node_id").cast(pl.String))
        .drop_nulls()
        .unique()
        .sort("node_id")
        .with_row_index("node")
    )


def _overlapping(allocations: pl.DataFrame, index: pl.DataFrame, lo: int, hi: int) -> pl.DataFrame:
    """Allocations on indexed nodes active at some instant of ``[lo, hi)`` (µs).

    Columns: node (the index), start_us, end_us (null = forever), high (bool),
    whole (GPUs), frac (micro-GPUs of the fractional part), cpus_u, memory_u
    (micro-units, null = 0). ``[t, t + 1µs)`` selects exactly the allocations
    active at t; zero-length allocations are never active.
    """
    start = pl.col("start_time").dt.epoch("us")
    end = pl.col("end_time").dt.epoch("us")
    gpus_u = micro_units("gpus").fill_null(0)
    node_enum = pl.Enum(index["node_id"])
    return (
        allocations.lazy()
        .filter((start < hi) & (end.is_null() | ((end > lo) & (end > start))))
        .select(
            pl.col("node_id")
            .cast(pl.String)
            .cast(node_enum, strict=False)
            .to_physical()
            .cast(pl.UInt32)
            .alias("node"),
            start.alias("start_us"),
            end.alias("end_us"),
            (pl.col("priority") == "high").fill_null(False).alias("high"),
            (gpus_u // SHARE_UNITS).alias("whole"),
            (gpus_u % SHARE_UNITS).alias("frac"),
            micro_units("cpus").fill_null(0).alias("cpus_u"),
            micro_units("memory_gib").fill_null(0).alias("memory_u"),
        )
        .drop_nulls("node")
        .collect()
    )


def _health_rows(
    health: Health | None, index: pl.DataFrame, lo: int, hi: int
) -> pl.DataFrame | None:
    """The health steps that meet ``[lo, hi)`` as sweep events (None: there are none).

    Columns node (the index), start_us, end_us and out: the GPUs of the node out of
    service from start_us to end_us (:attr:`Health.steps`). A GPU out of service takes
    no work, so the sweeps add ``out`` to the occupied GPUs wherever free capacity is
    read; allocated figures keep reading the occupied GPUs.
    """
    if health is None or health.empty:
        return None
    steps = health.steps_between(lo, hi)
    if steps.height == 0:
        return None
    node = pl.col("node_id").cast(pl.Enum(index["node_id"]), strict=False).to_physical()
    return steps.select(
        node.cast(pl.UInt32).alias("node"), "start_us", "end_us", pl.col("gpus_out").alias("out")
    ).drop_nulls("node")


# ------------------------------------------------------------ packing at an instant


def _pack(items: pl.DataFrame, key: str) -> pl.DataFrame:
    """FFD of the fractional parts per ``key``: key, share_gpus, share_fills.

    ``items`` has ``key`` and frac (micro-units); rows with frac 0 are skipped
    and keys without fractional parts are absent from the result.
    """
    fractional = items.filter(pl.col("frac") > 0).sort(key, "frac", descending=[False, True])
    key_col = fractional[key].to_list()
    frac_col = fractional["frac"].to_list()
    # One row per share-holding GPU, imploded per key by polars: building the
    # list column from Python lists of lists is an order of magnitude slower.
    gpu_keys: list[object] = []
    gpu_fills: list[float] = []
    i, n = 0, len(key_col)
    while i < n:
        j = i
        while j < n and key_col[j] == key_col[i]:
            j += 1
        fills = packed_fills(frac_col[i:j])
        gpu_keys.extend([key_col[i]] * len(fills))
        gpu_fills.extend(fill / SHARE_UNITS for fill in fills)
        i = j
    return (
        pl.DataFrame(
            {key: gpu_keys, "share_fills": gpu_fills},
            schema={key: fractional.schema[key], "share_fills": pl.Float64},
        )
        .group_by(key, maintain_order=True)
        .agg(pl.len().cast(pl.Int64).alias("share_gpus"), "share_fills")
    )


def pack_shares(allocations: pl.DataFrame) -> pl.DataFrame:
    """Pack each node's fractional GPU parts first-fit-decreasing.

    The caller chooses the set (for example ``active_at(allocations, t)``, or
    its high-priority rows); no time filter is applied here.

    Args:
        allocations: frame with node_id and gpus (the whole part of ``gpus`` is
            ignored: 2.5 contributes a 0.5 share).

    Returns:
        One row per node holding at least one fractional part, sorted by
        node_id: node_id (String), share_gpus (Int64: GPUs the shares occupy),
        share_fills (List(Float64): each such GPU's fill in (0, 1], descending).

    Example:
        >>> frame = pl.DataFrame({"node_id": ["n1"] * 3, "gpus": [0.7, 1.7, 0.3]})
        >>> pack_shares(frame).rows()
        [('n1', 2, [1.0, 0.7])]
    """
    items = allocations.select(
        pl.col("node_id").cast(pl.String),
        (micro_units("gpus").fill_null(0) % SHARE_UNITS).alias("frac"),
    )
    return _pack(items, "node_id").sort("node_id")


# --------------------------------------------------------------- public: instant


def active_at(allocations: pl.DataFrame, at: datetime) -> pl.DataFrame:
    """The allocations active at ``at`` (``start_time <= at < end_time``).

    Args:
        allocations: the allocations frame (any extra columns are kept).
        at: the instant (naive = UTC).

    Returns:
        The active rows, all columns, sorted by alloc_id.
    """
    t = epoch_us(at)
    start = pl.col("start_time").dt.epoch("us")
    end = pl.col("end_time").dt.epoch("us")
    return allocations.filter((start <= t) & (end.is_null() | (end > t))).sort("alloc_id")


def _occupancy_units(index: pl.DataFrame, active: pl.DataFrame) -> pl.DataFrame:
    """occupancy_at over prepared active rows, quantities in micro-units."""
    high = pl.col("high")
    sums = active.group_by("node").agg(
        pl.col("whole").sum().alias("whole"),
        pl.col("whole").filter(high).sum().alias("whole_high"),
        pl.col("cpus_u").sum().alias("cpus_used"),
        pl.col("cpus_u").filter(high).sum().alias("cpus_used_high"),
        pl.col("memory_u").sum().alias("memory_used"),
        pl.col("memory_u").filter(high).sum().alias("memory_used_high"),
    )
    shares = _pack(active, "node")
    shares_high = _pack(active.filter(high), "node").select(
        "node", pl.col("share_gpus").alias("share_gpus_high")
    )
    return (
        index.join(sums, on="node", how="left")
        .join(shares, on="node", how="left")
        .join(shares_high, on="node", how="left")
        .select(
            "node_id",
            (pl.col("whole").fill_null(0) + pl.col("share_gpus").fill_null(0))
            .cast(pl.Int64)
            .alias("gpus_used"),
            (pl.col("whole_high").fill_null(0) + pl.col("share_gpus_high").fill_null(0))
            .cast(pl.Int64)
            .alias("gpus_used_high"),
            pl.col(_QUANTITIES).fill_null(0).cast(pl.Int64),
            pl.col("share_fills").fill_null(pl.lit([], dtype=_FILLS_DTYPE)),
        )
        .sort("node_id")
    )


def occupancy_at(nodes: pl.DataFrame, allocations: pl.DataFrame, at: datetime) -> pl.DataFrame:
    """Occupied GPUs, CPUs and memory of every node at ``at``.

    Args:
        nodes: the nodes frame (only node_id is read).
        allocations: the allocations frame; rows on nodes absent from ``nodes``
            are ignored.
        at: the instant (naive = UTC).

    Returns:
        One row per node, sorted by node_id: node_id, gpus_used (Int64),
        gpus_used_high (Int64: the high-priority allocations packed alone),
        cpus_used, cpus_used_high, memory_used, memory_used_high (Float64,
        GiB for memory), share_fills (List(Float64): the fill of every GPU
        that holds shares after FFD of all active fractional parts,
        descending; a fill of 1.0 is a GPU the shares fill exactly).
        Invariant: gpus_used = whole GPUs + len(share_fills).
    """
    t = epoch_us(at)
    index = _index(nodes)
    units = _occupancy_units(index, _overlapping(allocations, index, t, t + 1))
    return _divided(units, _QUANTITIES, SHARE_UNITS)


# ---------------------------------------------------------------- public: window


def _share_events(overlapping: pl.DataFrame, lo: int, hi: int) -> pl.DataFrame:
    """node, time (µs), frac: each fractional part's start (clamped to ``lo``, +frac) and
    end before ``hi`` (-frac), sorted by node and time."""
    fractional = overlapping.filter(pl.col("frac") > 0)
    return pl.concat(
        [
            fractional.select(
                "node", pl.max_horizontal("start_us", pl.lit(lo)).alias("time"), "frac"
            ),
            fractional.filter(pl.col("end_us") < hi).select(
                "node", pl.col("end_us").alias("time"), (-pl.col("frac")).alias("frac")
            ),
        ]
    ).sort("node", "time")


def _share_packings(
    overlapping: pl.DataFrame, lo: int, hi: int
) -> Iterator[tuple[int, int, tuple[int, ...]]]:
    """Each node's FFD packing of its fractional parts after every change in ``[lo, hi)``.

    Yields (node, time µs, fills in micro-units, descending), in node then time
    order, once per instant at which the node's fractional parts change.
    """
    return _packings(_share_events(overlapping, lo, hi))


def _packings(events: pl.DataFrame) -> Iterator[tuple[int, int, tuple[int, ...]]]:
    """:func:`_share_packings` of the events of :func:`_share_events`."""
    node_col = events["node"].to_list()
    time_col = events["time"].to_list()
    size_col = events["frac"].to_list()
    node = -1
    active: list[int] = []
    i, n = 0, len(node_col)
    while i < n:
        if node_col[i] != node:
            node, active = node_col[i], []
        time = time_col[i]
        # Half-open intervals: pack only after every change at this instant.
        # Ends are packed too, as FFD is not monotone in its items.
        while i < n and node_col[i] == node and time_col[i] == time:
            size = size_col[i]
            if size > 0:
                active.append(size)
            else:
                active.remove(-size)
            i += 1
        yield node, time, packed_fills(active)


def _share_steps(overlapping: pl.DataFrame, lo: int, hi: int) -> pl.DataFrame:
    """Changes of each node's FFD share-GPU count over ``[lo, hi)``.

    Returns node, time (µs), gpus (the change in share GPUs at that time),
    cpus_u = memory_u = 0, so it concatenates with the whole-part events.

    A node whose fractional parts never add up to more than one GPU at once packs
    them into one GPU whenever it has any (FFD's first GPU takes them all): its
    steps are counted in bulk. Only the other nodes are packed event by event.
    """
    events = _share_events(overlapping, lo, hi)
    changes = (
        events.lazy()
        .group_by("node", "time", maintain_order=True)
        .agg(pl.col("frac").sum().alias("net"), pl.col("frac").sign().sum().alias("parts"))
        .with_columns(
            pl.col("net").cum_sum().over("node").alias("total"),
            pl.col("parts").cum_sum().over("node").alias("active"),
        )
        .collect()
    )
    packed = changes.filter(pl.col("total") > SHARE_UNITS)["node"].unique()
    one_gpu = (
        changes.lazy()
        .filter(~pl.col("node").is_in(packed.implode()))
        .select("node", "time", (pl.col("active") > 0).cast(pl.Int64).alias("count"))
        .with_columns(
            (pl.col("count") - pl.col("count").shift(1, fill_value=0).over("node")).alias("gpus")
        )
        .filter(pl.col("gpus") != 0)
        .select("node", "time", "gpus")
        .collect()
    )
    out_nodes: list[int] = []
    out_times: list[int] = []
    out_deltas: list[int] = []
    last_node, count = -1, 0
    for node, time, fills in _packings(events.filter(pl.col("node").is_in(packed.implode()))):
        if node != last_node:
            last_node, count = node, 0
        if len(fills) != count:
            out_nodes.append(node)
            out_times.append(time)
            out_deltas.append(len(fills) - count)
            count = len(fills)
    schema = {"node": pl.UInt32, "time": pl.Int64, "gpus": pl.Int64}
    return (
        pl.concat(
            [
                one_gpu.cast(schema),  # type: ignore[arg-type]
                pl.DataFrame(
                    {"node": out_nodes, "time": out_times, "gpus": out_deltas}, schema=schema
                ),
            ]
        )
        .sort("node", "time")
        .with_columns(pl.lit(0, dtype=pl.Int64).alias("cpus_u"), pl.lit(0, dtype=pl.Int64).alias("memory_u"))
    )


def _sweep(
    overlapping: pl.DataFrame, lo: int, hi: int, health: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Each node's occupancy on every constant segment of ``[lo, hi)``.

    Occupancy only changes at an allocation's start (clamped to ``lo``) or
    end, so the segments start at those event times. Returns node, time
    (segment start, µs), length (µs), gpus (FFD exact), cpus_u and memory_u
    (micro-units) on that segment, sorted by node and time. Before a node's
    first segment its occupancy is 0. With ``health`` (the rows of :func:`_health_rows`)
    the segments have an ``out`` column too: the GPUs out of service on the segment.
    """
    zero = [pl.lit(0, dtype=pl.Int64).alias("out")] if health is not None else []
    columns = ["gpus", "cpus_u", "memory_u", *(["out"] if health is not None else [])]
    starts = overlapping.select(
        "node",
        pl.max_horizontal("start_us", pl.lit(lo)).alias("time"),
        pl.col("whole").alias("gpus"),
        "cpus_u",
        "memory_u",
        *zero,
    )
    ends = overlapping.filter(pl.col("end_us") < hi).select(
        "node",
        pl.col("end_us").alias("time"),
        (-pl.col("whole")).alias("gpus"),
        -pl.col("cpus_u"),
        -pl.col("memory_u"),
        *zero,
    )
    parts = [starts, ends, _share_steps(overlapping, lo, hi).with_columns(*zero)]
    if health is not None:
        none = [pl.lit(0, dtype=pl.Int64).alias(c) for c in ("gpus", "cpus_u", "memory_u")]
        parts += [
            health.select("node", pl.max_horizontal("start_us", pl.lit(lo)).alias("time"),
                          *none, "out").cast(starts.schema),
            health.filter(pl.col("end_us") < hi).select(
                "node", pl.col("end_us").alias("time"), *none, -pl.col("out")
            ).cast(starts.schema),
        ]  # fmt: skip
    same_node_next = pl.col("node") == pl.col("node").shift(-1)
    next_time = pl.when(same_node_next).then(pl.col("time").shift(-1)).otherwise(hi)
    return (
        pl.concat(parts)
        .lazy()
        .group_by("node", "time")
        .agg(pl.col(columns).sum())
        .sort("node", "time")
        .with_columns(
            pl.col(columns).cum_sum().over("node"),
            (next_time - pl.col("time")).alias("length"),
        )
        .collect()
    )


def _peaks_units(index: pl.DataFrame, overlapping: pl.DataFrame, lo: int, hi: int) -> pl.DataFrame:
    """peak_occupancy over prepared rows, quantities in micro-units."""
    return _peaks_of(index, _sweep(overlapping, lo, hi), hi)


def _peaks_of(index: pl.DataFrame, segments: pl.DataFrame, hi: int) -> pl.DataFrame:
    """The peaks over ``[lo, hi)`` from the segments of a sweep from ``lo`` to ``hi`` or later.

    A sweep to a later end holds the same segments before ``hi`` (events before ``hi``
    are the same, and so are the running sums over them), so one sweep over the longest
    window serves every shorter window from the same instant.
    """
    # GPUs out of service take no work: the GPU peak is of the GPUs occupied or out
    held = pl.col("gpus") + pl.col("out") if "out" in segments.columns else pl.col("gpus")
    maxima = (
        segments.lazy()
        .filter(pl.col("time") < hi)
        .group_by("node")
        .agg(
            held.max().alias("gpus_peak"),
            pl.col("cpus_u").max().alias("cpus_peak"),
            pl.col("memory_u").max().alias("memory_peak"),
        )
        .collect()
    )
    return (
        index.join(maxima, on="node", how="left")
        .select("node_id", pl.col("gpus_peak", "cpus_peak", "memory_peak").fill_null(0))
        .sort("node_id")
    )


def _window_us(start: datetime, end: datetime) -> tuple[int, int]:
    lo, hi = epoch_us(start), epoch_us(end)
    if hi < lo:
        raise ValueError(f"window end {end.isoformat()} is before its start {start.isoformat()}")
    return lo, hi


def peak_occupancy(
    nodes: pl.DataFrame, allocations: pl.DataFrame, start: datetime, end: datetime
) -> pl.DataFrame:
    """The largest occupancy each node sees at any instant of ``[start, end)``.

    Each dimension is maximised separately (the GPU peak and the CPU peak may
    fall at different instants). The GPU count is exact: FFD is re-run
    wherever the set of fractional parts changes.

    Args:
        nodes: the nodes frame (only node_id is read).
        allocations: the allocations frame.
        start: first instant of the window (naive = UTC).
        end: end of the window, excluded; must be after ``start``.

    Returns:
        One row per node, sorted by node_id: node_id, gpus_peak (Int64),
        cpus_peak (Float64), memory_peak (Float64, GiB).

    Raises:
        ValueError: when ``end`` is not after ``start`` (an empty window has
            no instant to take a maximum over).
    """
    lo, hi = _window_us(start, end)
    if hi == lo:
        raise ValueError(f"window [{start.isoformat()}, {end.isoformat()}) is empty")
    index = _index(nodes)
    peaks = _peaks_units(index, _overlapping(allocations, index, lo, hi), lo, hi)
    return _divided(peaks, ["cpus_peak", "memory_peak"], SHARE_UNITS)


def occupied_gpu_seconds(
    nodes: pl.DataFrame, allocations: pl.DataFrame, start: datetime, end: datetime
) -> pl.DataFrame:
    """The integral of each node's occupied GPUs over ``[start, end)``.

    Exact, not sampled: allocations straddling the window's edges count only
    their overlap, and FFD is applied on every constant segment where shares
    are present. Divide by 3600 for GPU-hours (SPEC §7's physical figures).

    Args:
        nodes: the nodes frame (only node_id is read; health is the caller's
            filter).
        allocations: the allocations frame.
        start: first instant of the window (naive = UTC).
        end: end of the window, excluded; ``end == start`` gives zeros.

    Returns:
        One row per node, sorted by node_id: node_id, gpu_seconds and
        gpu_seconds_high (Float64; the latter packs the high-priority
        allocations alone).

    Raises:
        ValueError: when ``end`` is before ``start``.
    """
    lo, hi = _window_us(start, end)
    index = _index(nodes)
    overlapping = _overlapping(allocations, index, lo, hi)

    def integral(rows: pl.DataFrame, name: str) -> pl.DataFrame:
        return (
            _sweep(rows, lo, hi)
            .group_by("node")
            .agg((pl.col("gpus") * pl.col("length")).sum().alias(name))
        )

    microseconds = (
        index.join(integral(overlapping, "gpu_seconds"), on="node", how="left")
        .join(
            integral(overlapping.filter(pl.col("high")), "gpu_seconds_high"), on="node", how="left"
        )
        .select("node_id", pl.col("gpu_seconds", "gpu_seconds_high").fill_null(0))
        .sort("node_id")
    )
    return _divided(microseconds, ["gpu_seconds", "gpu_seconds_high"], 1_000_000)


def _share_fill_steps(overlapping: pl.DataFrame, lo: int, hi: int) -> pl.DataFrame:
    """Each node's FFD share fills after every fractional event of ``[lo, hi)``.

    Returns node, time (µs), share_fills (List(Float64), descending; empty when
    the last share ends), one row per (node, event time), sorted by node and
    time. The fills, not just their count, are what a share shape reads, and a
    change of fills need not change the count.
    """
    out_nodes: list[int] = []
    out_times: list[int] = []
    # One row per (event, share-holding GPU), imploded by polars (see _pack).
    fill_rows: list[int] = []
    fill_values: list[float] = []
    for node, time, fills in _share_packings(overlapping, lo, hi):
        row = len(out_nodes)
        out_nodes.append(node)
        out_times.append(time)
        fill_rows.extend([row] * len(fills))
        fill_values.extend(fill / SHARE_UNITS for fill in fills)
    steps = pl.DataFrame(
        {"node": out_nodes, "time": out_times},
        schema={"node": pl.UInt32, "time": pl.Int64},
    ).with_row_index("row")
    fills_by_row = (
        pl.DataFrame(
            {"row": fill_rows, "share_fills": fill_values},
            schema={"row": pl.UInt32, "share_fills": pl.Float64},
        )
        .group_by("row", maintain_order=True)
        .agg("share_fills")
    )
    return steps.join(fills_by_row, on="row", how="left", maintain_order="left").select(
        "node", "time", pl.col("share_fills").fill_null(pl.lit([], dtype=_FILLS_DTYPE))
    )


def occupancy_timeline(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    start: datetime,
    end: datetime,
    *,
    share_fills: bool = False,
    health: Health | None = None,
) -> pl.DataFrame:
    """Each node's occupancy as a step function over ``[start, end)``.

    The exact sweep behind :func:`peak_occupancy` and
    :func:`occupied_gpu_seconds` (allocation starts and ends in time order, FFD
    re-run wherever the fractional parts change), exposed for callers that
    read occupancy at many instants: the occupancy at any instant t of the
    window is the row of t's node with the latest ``time <= t``.

    Args:
        nodes: the nodes frame (only node_id is read).
        allocations: the allocations frame; rows on nodes absent from ``nodes``
            are ignored.
        start: first instant of the window (naive = UTC).
        end: end of the window, excluded; must be after ``start``.
        share_fills: also return each segment's share fills (a second pass
            over the fractional parts, so off by default).
        health: the fleet's health over time; where a node has GPUs out of service
            in the window, the timeline gains the column gpus_held (its occupied
            GPUs plus those out of service: what no new work can take) and a
            segment starts wherever that changes.

    Returns:
        One row per node and constant segment, sorted by node_id then time:
        node_id (Enum over the sorted node ids of ``nodes``, so its physical
        value is the node's rank), time (Datetime("us"): the segment's start;
        every node has a segment starting at ``start``, and a segment ends
        where the node's next one starts, or at ``end``), gpus_used (Int64),
        cpus_used, memory_used (Float64, GiB), and with ``share_fills`` the
        column share_fills (List(Float64), as in :func:`occupancy_at`).
        Consecutive segments of a node may hold equal values.

    Raises:
        ValueError: when ``end`` is not after ``start``.

    Example:
        >>> from datetime import datetime, timedelta
        >>> t0 = datetime(2026, 1, 1)
        >>> allocations = pl.DataFrame({"alloc_id": ["a", "b"], "node_id": ["n1", "n1"],
        ...     "gpus": [2.0, 0.5], "cpus": [8.0, 4.0], "memory_gib": [None, None],
        ...     "priority": ["high", "low"], "start_time": [t0, t0 + timedelta(hours=1)],
        ...     "end_time": [t0 + timedelta(hours=2), None]},
        ...     schema_overrides={"memory_gib": pl.Float64})
        >>> timeline = occupancy_timeline(pl.DataFrame({"node_id": ["n1", "n2"]}),
        ...     allocations, t0, t0 + timedelta(hours=3))
        >>> [(n, t.hour, g, c) for n, t, g, c, _ in timeline.rows()]
        [('n1', 0, 2, 8.0), ('n1', 1, 3, 12.0), ('n1', 2, 1, 4.0), ('n2', 0, 0, 0.0)]
    """
    lo, hi = _window_us(start, end)
    if hi == lo:
        raise ValueError(f"window [{start.isoformat()}, {end.isoformat()}) is empty")
    index = _index(nodes)
    overlapping = _overlapping(allocations, index, lo, hi)
    # A zero allocation per node from lo gives every node a first segment at
    # lo, so a reader never has to treat "before the first event" apart.
    zero = index.select(
        pl.col("node").cast(pl.UInt32),
        pl.lit(lo, dtype=pl.Int64).alias("start_us"),
        pl.lit(None, dtype=pl.Int64).alias("end_us"),
        pl.lit(False).alias("high"),
        *(pl.lit(0, dtype=pl.Int64).alias(c) for c in ("whole", "frac", "cpus_u", "memory_u")),
    )
    rows = pl.concat([overlapping, zero.cast(overlapping.schema)])
    segments = _sweep(rows, lo, hi, _health_rows(health, index, lo, hi))
    if share_fills:
        segments = (
            segments.join(
                _share_fill_steps(overlapping, lo, hi),
                on=["node", "time"],
                how="left",
                maintain_order="left",
            )
            .with_columns(pl.col("share_fills").forward_fill().over("node"))
            .with_columns(pl.col("share_fills").fill_null(pl.lit([], dtype=_FILLS_DTYPE)))
        )
    node_ids = index["node_id"].cast(pl.Enum(index["node_id"]))
    timeline = _divided(segments, ["cpus_u", "memory_u"], SHARE_UNITS).select(
        node_ids.gather(segments["node"]).alias("node_id"),
        pl.col("time").cast(pl.Datetime("us")),
        pl.col("gpus").cast(pl.Int64).alias("gpus_used"),
        pl.col("cpus_u").alias("cpus_used"),
        pl.col("memory_u").alias("memory_used"),
        *(["share_fills"] if share_fills else []),
        *(
            [(pl.col("gpus") + pl.col("out")).cast(pl.Int64).alias("gpus_held")]
            if "out" in segments.columns
            else []
        ),
    )
    return timeline


def node_state(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    at: datetime,
    duration: timedelta | None = None,
    health: Health | None = None,
) -> pl.DataFrame:
    """The snapshot of every node at ``at`` and over the window W.

    W is ``{at}`` without a duration (or with a zero one) and
    ``[at, at + duration)`` with one. Free capacity is capacity minus
    occupancy, floored at 0 (an over-committed node has nothing free); a null
    ``memory_gib`` (unknown) is unbounded, so its free memory is ``inf``
    (:data:`fleetaudit.model.capacity.UNBOUNDED` as a quantity).

    With ``health``, GPUs out of service take no work: a node's free GPUs are its GPUs
    less those occupied and those out of service (at t, and at every instant of W for
    the window), while its occupancy, and so what counts as allocated, stays its work's.
    The nodes' ``health`` is then the one that holds over all the time
    (:func:`fleetaudit.model.capacity.whole_window_health`).

    Args:
        nodes: the nodes frame; all its columns are kept.
        allocations: the allocations frame.
        at: the instant t (naive = UTC).
        duration: the length of W, or None for the instant alone.
        health: the fleet's health over time (:func:`fleetaudit.model.capacity.health_of`),
            or None: the recorded health alone, and none of the columns below.

    Returns:
        The nodes' columns, then domain (:func:`switch_domains`),
        the columns of :func:`occupancy_at` at t, free_gpus (Int64),
        free_cpus, free_memory_gib (Float64) at t, and free_gpus_window
        (Int64), free_cpus_window, free_memory_gib_window (Float64) over W
        (equal to the at-t values without a duration). With ``health`` also
        gpus_out (Int64: GPUs out of service at t, all of them while the whole node
        is), gpus_unhealthy (Int64: those of them no work holds, the ledger's
        unhealthy GPUs) and health_at (the most severe state of a whole-node
        interval at t, else the node's ``health``, null read as ``healthy``).
        Sorted by node_id.

    Raises:
        ValueError: when ``duration`` is negative.

    Example:
        >>> from datetime import datetime, timedelta
        >>> nodes = pl.DataFrame({"node_id": ["n1"], "gpu_model": ["H20"], "gpus": [8],
        ...     "cpus": [64.0], "memory_gib": [None], "switch_id": [None], "health": ["healthy"]},
        ...     schema_overrides={"memory_gib": pl.Float64, "switch_id": pl.String})
        >>> t0 = datetime(2026, 1, 1)
        >>> allocations = pl.DataFrame({"alloc_id": ["a", "b", "c"], "node_id": ["n1"] * 3,
        ...     "gpus": [2.5, 0.5, 4.0], "cpus": [8.0, 4.0, 16.0], "memory_gib": [None] * 3,
        ...     "priority": ["high", "low", "low"],
        ...     "start_time": [t0, t0, t0 + timedelta(hours=1)], "end_time": [None] * 3},
        ...     schema_overrides={"memory_gib": pl.Float64, "end_time": pl.Datetime("us")})
        >>> state = node_state(nodes, allocations, t0, timedelta(hours=2))
        >>> state.select("domain", "gpus_used", "gpus_used_high", "share_fills",
        ...              "free_gpus", "free_gpus_window", "free_cpus_window").rows()
        [('node n1', 3, 3, [1.0], 5, 1, 36.0)]
    """
    return node_states(nodes, allocations, at, [duration], health)[0]


def node_states(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    at: datetime,
    durations: Sequence[timedelta | None],
    health: Health | None = None,
) -> list[pl.DataFrame]:
    """:func:`node_state` at ``at`` for each of ``durations``, in their order.

    The state at ``at`` is computed once, and the occupancy over every window from one
    sweep over the longest: a command that evaluates shapes of several durations pays
    for one snapshot, not one per duration.

    Raises:
        ValueError: when a duration is negative.
    """
    for duration in durations:
        if duration is not None and duration < timedelta(0):
            raise ValueError(f"duration {duration} is negative")
    t = epoch_us(at)
    window_ends = [t + 1 if not d else epoch_us(at + d) for d in durations]
    longest = max(window_ends, default=t + 1)
    index = _index(nodes)
    overlapping = _overlapping(allocations, index, t, longest)
    occupancy = _occupancy_units(index, overlapping.filter(pl.col("start_us") <= t))
    rows = _health_rows(health, index, t, longest)
    segments = _sweep(overlapping, t, longest, rows) if longest > t + 1 else None

    def free(capacity: str, used: str) -> pl.Expr:
        # clip keeps a null (unknown) capacity null; it becomes inf below
        return (pl.col(capacity) - pl.col(used)).clip(lower_bound=0)

    at_t = nodes.select(
        pl.col("node_id").cast(pl.String),
        pl.col("gpus").cast(pl.Int64).alias("gpus_capacity"),
        micro_units("cpus").alias("cpus_capacity"),
        micro_units("memory_gib").alias("memory_capacity"),
    ).join(occupancy.select("node_id", *_COUNTS, *_QUANTITIES), on="node_id")
    state_at_t = nodes.with_columns(
        pl.col("node_id").cast(pl.String),
        switch_domains(nodes),
    ).join(_divided(occupancy, _QUANTITIES, SHARE_UNITS), on="node_id", how="left")
    # the GPUs no new work can take at t: occupied, or out of service
    held = "gpus_used"
    if health is not None:
        out = gpus_out_at(health, t).select("node_id", "gpus_out")
        at_t = at_t.join(out, on="node_id", how="left").with_columns(
            pl.col("gpus_out").fill_null(0).cast(pl.Int64),
        )
        at_t = at_t.with_columns((pl.col("gpus_used") + pl.col("gpus_out")).alias("gpus_held"))
        held = "gpus_held"
        capacity = pl.col("gpus").cast(pl.Int64).fill_null(0)
        recorded = optional_column(nodes, "health", pl.String, None)
        state_at_t = (
            state_at_t.with_columns(recorded.alias("_recorded"))
            .join(at_t.select("node_id", "gpus_out"), on="node_id", how="left")
            .join(
                event_states_at(health, t).rename({"state": "_event"}), on="node_id", how="left"
            )
            .with_columns(
                out_unheld(pl.col("gpus_used"), pl.col("gpus_out"), capacity).alias(
                    "gpus_unhealthy"
                ),
                pl.coalesce("_event", pl.col("_recorded").fill_null(HEALTHY)).alias("health_at"),
            )
            .drop("_recorded", "_event")
        )
    quantities = ["free_cpus", "free_memory_gib", "free_cpus_window", "free_memory_gib_window"]
    states: dict[int, pl.DataFrame] = {}
    for window_end in window_ends:
        if window_end in states:
            continue
        if window_end == t + 1 or segments is None:
            peaks = at_t.select(
                "node_id",
                pl.col(held).alias("gpus_peak"),
                pl.col("cpus_used").alias("cpus_peak"),
                pl.col("memory_used").alias("memory_peak"),
            )
        else:
            peaks = _peaks_of(index, segments, window_end)
        free_units = at_t.join(peaks, on="node_id").select(
            "node_id",
            free("gpus_capacity", held).alias("free_gpus"),
            free("cpus_capacity", "cpus_used").alias("free_cpus"),
            free("memory_capacity", "memory_used").alias("free_memory_gib"),
            free("gpus_capacity", "gpus_peak").alias("free_gpus_window"),
            free("cpus_capacity", "cpus_peak").alias("free_cpus_window"),
            free("memory_capacity", "memory_peak").alias("free_memory_gib_window"),
        )
        free_capacity = _divided(free_units, quantities, SHARE_UNITS).with_columns(
            pl.col("free_memory_gib", "free_memory_gib_window").fill_null(to_quantity(UNBOUNDED))
        )
        states[window_end] = state_at_t.join(free_capacity, on="node_id", how="left").sort(
            "node_id"
        )
    return [states[window_end] for window_end in window_ends]


def nodes_at(
    nodes: pl.DataFrame, allocations: pl.DataFrame, at: datetime, health: Health | None
) -> pl.DataFrame:
    """``nodes`` as they stand at ``at``, for an engine that reads one instant and knows
    nothing of health intervals (compaction): a node out of service whole at ``at``
    takes the state of its interval as its ``health`` (``unhealthy`` when each of its
    GPUs failed apart), so it is out of scope; a node with some GPUs out of service has
    as many fewer ``gpus`` as no work holds (:func:`node_state`'s gpus_unhealthy), so
    no work lands on them. Other nodes are unchanged, and so is every node without
    health intervals.

    >>> from datetime import datetime
    >>> from fleetaudit.model.capacity import health_of
    >>> nodes = pl.DataFrame({"node_id": ["a", "b"], "gpus": [8, 8], "health": [None, None]},
    ...     schema_overrides={"health": pl.String})
    >>> t = datetime(2026, 1, 1)
    >>> events = pl.DataFrame({"node_id": ["a", "b"], "gpu_index": [None, 2],
    ...     "start_time": [t, t], "end_time": [None, None], "state": ["drain", "unhealthy"]})
    >>> allocations = pl.DataFrame({"alloc_id": ["x"], "node_id": ["b"], "gpus": [8.0],
    ...     "cpus": [1.0], "memory_gib": [None], "priority": ["high"], "start_time": [t],
    ...     "end_time": [None]}, schema_overrides={"memory_gib": pl.Float64,
    ...     "end_time": pl.Datetime("us")})
    >>> nodes_at(nodes, allocations, t, health_of(nodes, events)).rows()
    [('a', 8, 'drain'), ('b', 8, None)]
    """
    if health is None or health.empty:
        return nodes
    t = epoch_us(at)
    out = gpus_out_at(health, t)
    if out.height == 0:
        return nodes
    hit = nodes.filter(pl.col("node_id").cast(pl.String).is_in(out["node_id"].implode()))
    used = occupancy_at(hit, allocations, at).select("node_id", "gpus_used")
    gpus = pl.col("gpus").cast(pl.Int64).fill_null(0)
    change = (
        hit.select(pl.col("node_id").cast(pl.String), gpus.alias("_gpus"))
        .join(out, on="node_id")
        .join(used, on="node_id", how="left")
        .join(event_states_at(health, t), on="node_id", how="left")
        .select(
            "node_id",
            (pl.col("gpus_out") >= pl.col("_gpus")).alias("_whole"),
            out_unheld(pl.col("gpus_used").fill_null(0), pl.col("gpus_out"), pl.col("_gpus"))
            .alias("_out"),
            pl.col("state").fill_null("unhealthy").alias("_state"),
        )
    )
    recorded = optional_column(nodes, "health", pl.String, None)
    return (
        nodes.with_columns(recorded.alias("health"), pl.col("node_id").cast(pl.String))
        .join(change, on="node_id", how="left", maintain_order="left")
        .with_columns(
            pl.when(pl.col("_whole")).then(pl.col("_state")).otherwise(pl.col("health")).alias("health"),
            pl.when(pl.col("_whole").not_() & pl.col("_out").is_not_null())
            .then(pl.col("gpus") - pl.col("_out"))
            .otherwise(pl.col("gpus"))
            .cast(nodes.schema["gpus"])
            .alias("gpus"),
        )
        .drop("_whole", "_out", "_state")
    )


def bound_nodes(state: pl.DataFrame) -> pl.DataFrame:
    """Per GPU model, the healthy nodes whose idle GPUs cannot take work because every CPU,
    or all memory, is in use at t (CPU-only work, or GPU work that took them all).

    A node counts as CPU-bound when it declares CPUs and has none free, as memory-bound
    when it declares memory and has none free; both count once in ``nodes``.

    Returns:
        gpu_model, nodes, cpu_bound_nodes, memory_bound_nodes, idle_gpus (the free
        GPUs on those nodes); only models with such nodes, sorted by model.

    >>> state = pl.DataFrame({"node_id": ["a", "b", "c"], "gpu_model": ["H20"] * 3,
    ...     "health": ["healthy"] * 3, "gpus": [8, 8, 8], "cpus": [32.0, 64.0, 64.0],
    ...     "memory_gib": [None, 256.0, 256.0], "free_gpus": [8, 6, 8],
    ...     "free_cpus": [0.0, 48.0, 64.0], "free_memory_gib": [None, 0.0, 256.0]})
    >>> bound_nodes(state).row(0)
    ('H20', 2, 1, 1, 14)
    """
    eps = 1e-9
    healthy = usable_expr(state) & (pl.col("free_gpus") > 0)
    cpu = (pl.col("cpus") > 0) & (pl.col("free_cpus") <= eps)
    memory = (pl.col("memory_gib").fill_null(0) > 0) & (
        pl.col("free_memory_gib").fill_null(to_quantity(UNBOUNDED)) <= eps
    )
    return (
        state.filter(healthy & (cpu | memory))
        .group_by("gpu_model")
        .agg(
            pl.len().alias("nodes"),
            cpu.sum().alias("cpu_bound_nodes"),
            memory.sum().alias("memory_bound_nodes"),
            pl.col("free_gpus").sum().alias("idle_gpus"),
        )
        .with_columns(
            pl.col("nodes", "cpu_bound_nodes", "memory_bound_nodes", "idle_gpus").cast(pl.Int64)
        )
        .sort("gpu_model")
    )
