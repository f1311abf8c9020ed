"""``fleetaudit whatif placement``: read the store, run the fill what-if, save a scenario.

Orchestration only; the engine is :mod:`fleetaudit.placement`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime

import polars as pl

from fleetaudit import placement
from fleetaudit.api import StoreOptions, reading, resolve_at, save_scenario, writing
from fleetaudit.errors import UsageError


@dataclass(frozen=True)
class PlacementRun:
    """What ``whatif placement`` runs (defaults are the command line's)."""

    policies: tuple[str, ...] = placement.POLICIES
    fill_pct: float | None = None
    seeds: int = 1
    seed: int = 0
    shuffle: bool = False
    at: datetime | None = None
    save_as: str | None = None


@dataclass(frozen=True)
class PlacementResult:
    """Curves per policy (means over seeds), and the scenario saved, if any."""

    mode: str
    fill_pct: float
    seeds: int
    gpus: int
    curves: dict[str, pl.DataFrame]
    saved: str | None
    saved_policy: str | None
    at: datetime


def whatif_placement(store_options: StoreOptions, run: PlacementRun) -> PlacementResult:
    """Replay the store's requests onto its nodes under each policy (fill mode)."""
    if run.fill_pct is None:
        raise UsageError(
            "by-time replay is not built yet; give --fill PCT (the FGD paper's method)"
        )
    if not 0 < run.fill_pct <= 1000:
        raise UsageError("--fill: give a percentage above 0 (e.g. 100)")
    if run.seeds < 1:
        raise UsageError("--seeds: must be 1 or more")
    with reading(store_options) as store:
        at = resolve_at(store, run.at)
        nodes = store.query("nodes")
        requests = store.query("requests_all")
    options = placement.PlacementOptions(
        fill_pct=run.fill_pct,
        seeds=run.seeds,
        seed=run.seed,
        shuffle=run.shuffle,
        workers=min(os.cpu_count() or 1, 2),
    )
    curves = placement.fill_curves(nodes, requests, options, run.policies)
    gpus = int(nodes.filter(pl.col("health") == "healthy")["gpus"].sum())
    saved_policy = None
    if run.save_as is not None:
        saved_policy = run.policies[0]
        final = placement.simulate_fill(
            nodes, requests, placement.PlacementOptions(
                policy=saved_policy, fill_pct=run.fill_pct, seed=run.seed, shuffle=run.shuffle,
            ),
        )  # fmt: skip
        allocations = final.allocations.select(
            "alloc_id",
            "job_id",
            "node_id",
            "gpus",
            "cpus",
            "memory_gib",
            pl.lit("high").alias("priority"),
            pl.lit(None, dtype=pl.Utf8).alias("workload"),
            pl.lit(None, dtype=pl.Utf8).alias("tenant"),
            pl.lit(at).alias("start_time"),  # placed at t, running on
            pl.lit(None, dtype=pl.Datetime("us")).alias("end_time"),
            pl.lit(None, dtype=pl.Float64).alias("checkpoint_interval_s"),
            pl.lit(False).alias("sleepable"),
        )
        with writing(store_options) as store:
            save_scenario(
                store,
                run.save_as,
                allocations,
                base="empty",
                command="whatif placement",
                options={
                    "policy": saved_policy,
                    "fill_pct": run.fill_pct,
                    "seed": run.seed,
                    "shuffle": run.shuffle,
                },
                at=at,
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
