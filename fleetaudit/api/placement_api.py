"""``fleetaudit whatif placement``: read the store, run the by-time or fill what-if, save a scenario.

Orchestration only; the engine is :mod:`fleetaudit.whatif.placement`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timedelta

import polars as pl

from fleetaudit.api import (
    StoreOptions,
    load_frames,
    load_health,
    reading,
    resolve_at,
    save_scenario,
    writing,
)
from fleetaudit.core.errors import UsageError
from fleetaudit.core.options import PLACEMENT_QUEUES
from fleetaudit.model.capacity import optional_column, usable_expr
from fleetaudit.whatif import placement


@dataclass(frozen=True)
class PlacementRun:
    """What ``whatif placement`` runs (defaults are the command line's)."""

    policies: tuple[str, ...] = placement.POLICIES
    fill_pct: float | None = None
    seeds: int = 1
    seed: int = 0
    shuffle: bool = True  # fill mode: the FGD authors' order, shuffled per seed
    at: datetime | None = None
    save_as: str | None = None
    since: timedelta | None = None  # by-time replay window [at - since, at); None = 1 day
    empty: bool = False  # by-time replay from an empty fleet
    queue: str = PLACEMENT_QUEUES[0]  # by-time replay queue: fifo or backfill


@dataclass(frozen=True)
class PlacementResult:
    """Curves per policy (means over seeds), and the scenario saved, if any.

    ``mode`` is ``fill`` (curves keyed by arrived_pct; ``fill_pct`` set) or
    ``time`` (by-time replay: curves keyed by instant_pct over [start, at];
    ``fill_pct`` None; ``queue`` and ``empty`` as run).
    """

    mode: str
    fill_pct: float | None
    seeds: int
    gpus: int
    curves: dict[str, pl.DataFrame]
    saved: str | None
    saved_policy: str | None
    at: datetime
    start: datetime | None = None
    queue: str | None = None
    empty: bool | None = None


_DEFAULT_SINCE = timedelta(days=1)


def whatif_placement(store_options: StoreOptions, run: PlacementRun) -> PlacementResult:
    """Replay the store's requests onto its nodes under each policy.

    By time when ``run.fill_pct`` is None (:func:`placement.simulate_replay`
    over [at - since, at)), else fill mode.
    """
    if run.seeds < 1:
        raise UsageError("--seeds: must be 1 or more")
    if run.fill_pct is None:
        return _whatif_replay(store_options, run)
    if not 0 < run.fill_pct <= 1000:
        raise UsageError("--fill: give a percentage above 0 (e.g. 100)")
    with reading(store_options) as store:
        at = resolve_at(store, run.at)
        nodes = store.query("nodes")
        requests = store.query("requests_all")
    if requests.height == 0:
        raise UsageError(
            f"{store_options.db}: the store holds no requests to feed; ingest a requests table"
        )
    options = placement.PlacementOptions(
        fill_pct=run.fill_pct,
        seeds=run.seeds,
        seed=run.seed,
        shuffle=run.shuffle,
        workers=min(os.cpu_count() or 1, 2),
    )
    curves = placement.fill_curves(nodes, requests, options, run.policies)
    gpus = int(nodes.filter(usable_expr(nodes))["gpus"].sum())
    saved_policy = None
    if run.save_as is not None:
        saved_policy = run.policies[0]
        final = placement.simulate_fill(
            nodes, requests, placement.PlacementOptions(
                policy=saved_policy, fill_pct=run.fill_pct, seed=run.seed, shuffle=run.shuffle,
            ),
        )  # fmt: skip
        _save_placement(
            store_options,
            run.save_as,
            final.allocations.with_columns(
                pl.lit(at).alias("start_time"),  # placed at t, running on
                pl.lit(None, dtype=pl.Datetime("us")).alias("end_time"),
            ),
            {
                "policy": saved_policy,
                "fill_pct": run.fill_pct,
                "seed": run.seed,
                "shuffle": run.shuffle,
            },
            at,
            requests,
        )
    return PlacementResult(
        mode="fill",
        fill_pct=run.fill_pct,
        seeds=run.seeds,
        gpus=gpus,
        curves=curves,
        saved=run.save_as,
        saved_policy=saved_policy,
        at=at,
    )


def _whatif_replay(store_options: StoreOptions, run: PlacementRun) -> PlacementResult:
    since = _DEFAULT_SINCE if run.since is None else run.since
    if since <= timedelta(0):
        raise UsageError("--since: give a positive duration (e.g. 1d)")
    if run.queue not in placement.QUEUES:
        raise UsageError(f"--queue: use one of {', '.join(placement.QUEUES)}")
    with reading(store_options) as store:
        at = resolve_at(store, run.at)
        start = at - since
        nodes, allocations = load_frames(store, start, at)
        nodes, health = load_health(store, nodes, start, at)
        requests = store.query("requests_all")
    options = placement.PlacementOptions(
        seeds=run.seeds, seed=run.seed, workers=min(os.cpu_count() or 1, 2)
    )
    curves = placement.replay_curves(
        nodes, allocations, requests, options, start, at, run.empty, run.queue, run.policies,
        health,
    )  # fmt: skip
    gpus = int(nodes.filter(usable_expr(nodes))["gpus"].sum())
    saved_policy = None
    if run.save_as is not None:
        saved_policy = run.policies[0]
        final = placement.simulate_replay(
            nodes, allocations, requests,
            placement.PlacementOptions(policy=saved_policy, seed=run.seed),
            start, at, run.empty, run.queue, health=health,
        ).allocations  # fmt: skip
        # The state at the window's end: what still runs there (recorded or replayed).
        final = final.filter(pl.col("end_time").is_null() | (pl.col("end_time") > at))
        _save_placement(
            store_options,
            run.save_as,
            final,
            {
                "policy": saved_policy,
                "mode": "time",
                "since_s": since.total_seconds(),
                "empty": run.empty,
                "queue": run.queue,
                "seed": run.seed,
            },
            at,
            requests,
            allocations,
        )
    return PlacementResult(
        mode="time",
        fill_pct=None,
        seeds=run.seeds,
        gpus=gpus,
        curves=curves,
        saved=run.save_as,
        saved_policy=saved_policy,
        at=at,
        start=start,
        queue=run.queue,
        empty=run.empty,
    )


def _save_placement(
    store_options: StoreOptions,
    name: str,
    placed: pl.DataFrame,
    options: dict[str, object],
    at: datetime,
    requests: pl.DataFrame,
    recorded: pl.DataFrame | None = None,
) -> None:
    """Save placed pods (with start_time and end_time) as scenario ``name`` (base empty).

    A recorded allocation (its alloc_id in ``recorded``) keeps its own priority,
    workload, tenant, checkpoint interval and sleepable flag. A replayed pod takes
    its request's priority (high where the request gives none) and tenant (by
    ``request_id``, else ``job_id``); a request tells no workload nor checkpoints.
    """
    key = "request_id" if "request_id" in placed.columns else "job_id"
    asked = requests.select(
        pl.col("request_id").cast(pl.String).alias(key),
        optional_column(requests, "priority", pl.String, None).alias("_asked_priority"),
        optional_column(requests, "tenant", pl.String, None).alias("_asked_tenant"),
    )
    frame = placed.with_columns(pl.col(key).cast(pl.String)).join(asked, on=key, how="left")
    kept = ("priority", "workload", "tenant", "checkpoint_interval_s", "sleepable")
    if recorded is not None and not recorded.height:
        recorded = None  # no recorded allocation: every pod is replayed
    if recorded is not None:
        own = recorded.select(
            pl.col("alloc_id").cast(pl.String),
            pl.lit(True).alias("_recorded"),
            *(pl.col(c).alias(f"_own_{c}") for c in kept),
        )
        frame = frame.join(own, on="alloc_id", how="left")

    def own_or(column: str, replayed: pl.Expr) -> pl.Expr:
        """A recorded allocation's own ``column``, else the replayed pod's value."""
        if recorded is None:
            return replayed
        recorded_row = pl.col("_recorded").fill_null(False)
        return pl.when(recorded_row).then(pl.col(f"_own_{column}")).otherwise(replayed)

    allocations = frame.select(
        "alloc_id",
        "job_id",
        "node_id",
        "gpus",
        "cpus",
        "memory_gib",
        own_or("priority", pl.col("_asked_priority").fill_null("high"))
        .cast(pl.String).alias("priority"),
        own_or("workload", pl.lit(None, dtype=pl.String)).cast(pl.String).alias("workload"),
        own_or("tenant", pl.col("_asked_tenant")).cast(pl.String).alias("tenant"),
        "start_time",
        "end_time",
        own_or("checkpoint_interval_s", pl.lit(None, dtype=pl.Float64))
        .cast(pl.Float64).alias("checkpoint_interval_s"),
        own_or("sleepable", pl.lit(False)).fill_null(False).alias("sleepable"),
    )  # fmt: skip
    with writing(store_options) as store:
        save_scenario(
            store, name, allocations, base="empty", command="whatif placement",
            options=options, at=at,
        )  # fmt: skip

