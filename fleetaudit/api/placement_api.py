"""``fleetaudit whatif placement``: read the store, run the by-time or fill what-if, save a scenario.

Orchestration only; the engine is :mod:`fleetaudit.whatif.placement`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from fleetaudit.api import (
    StoreOptions,
    Window,
    fleet_nodes,
    latest_whatif_runs,
    load_frames,
    load_health,
    reading,
    record_whatif_run,
    resolve_at,
    resolve_window,
    save_scenario,
    writing,
)
from fleetaudit.core.errors import UsageError
from fleetaudit.core.options import PLACEMENT_SINCE, QUEUE_DISCIPLINES, WINDOW_LEAST
from fleetaudit.core.times import iso
from fleetaudit.model import occupancy
from fleetaudit.model.capacity import optional_column, usable_expr
from fleetaudit.model.store import Store
from fleetaudit.whatif import placement
from fleetaudit.whatif.placement.calibration import tolerance_json


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
    since: timedelta | None = (
        None  # by time: [at - since, at); None: PLACEMENT_SINCE, from the data on
    )
    empty: bool = False  # by-time replay from an empty fleet
    queue: str | None = None  # by-time queue discipline; None: the store's calibrated one
    calibrate: bool = False  # replay every discipline against the record first (by time)
    preempt: bool | None = None  # high priority evicts low; None: when both priorities arrive


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
    window: Window | None = None  # by time: how the window covers the data
    # by time: the recorded fleet at the curve's instants, as the record did:
    # instant_pct, allocated_pct, queued, started, failed (fragmentation not computed)
    recorded: pl.DataFrame | None = None
    baseline: Baseline | None = None  # by time: the calibrated baseline beside the record


# -- the baseline: the recorded fleet replayed under the discipline that reproduces it -----


@dataclass(frozen=True)
class Baseline:
    """The calibrated baseline of a by-time what-if, and how its discipline was chosen.

    ``chosen_by``: ``--queue`` (given), ``calibration`` (the store's latest calibration,
    made on the same data), ``calibrated now`` (none was recorded, or ``--calibrate``).
    ``fit`` sets the baseline's figures beside the record's; ``calibration`` holds every
    discipline's when one ran now.
    """

    discipline: str
    chosen_by: str
    suggested: str | None
    result: placement.ReplayResult
    fit: placement.Fit
    calibration: placement.Calibration | None = None

    @classmethod
    def fitted(
        cls,
        chosen: tuple[str, str, placement.Calibration | None],
        suggested: str | None,
        result: placement.ReplayResult,
        record: placement.QueueFigures,
    ) -> Baseline:
        """The baseline of ``result``, the replay under the discipline
        :func:`choose_discipline` chose (``chosen``), set beside the ``record``."""
        discipline, chosen_by, calibration = chosen
        fit = placement.compare(discipline, result.figures(), record)
        return cls(discipline, chosen_by, suggested, result, fit, calibration)

    @property
    def notes(self) -> tuple[str, ...]:
        """Warnings: where the baseline misses the record beyond the tolerance."""
        if self.fit.within_tolerance:
            return ()
        return tuple(
            f"the baseline ({self.discipline}) misses the record: {n}" for n in self.fit.notes
        )

    def as_json(self) -> dict[str, Any]:
        """The ``calibration`` object every replay-based document carries."""
        result = self.result
        return {
            "discipline": self.discipline,
            "chosen_by": self.chosen_by,
            "suggested": self.suggested,
            "policy": placement.BASELINE_POLICY,
            "record": self.fit.record.as_json(),
            "baseline": {
                **self.fit.as_json(),
                "held_at_end": result.held,
                "holds": len(result.holds),
                "preempt": result.preempt,
                "preemptions": result.preemptions.height,
                "lost_gpu_hours": round(result.lost_gpu_hours, 3),
                "never_ids": list(result.never),
            },
            "tolerance": tolerance_json(),
            "disciplines": None
            if self.calibration is None
            else [f.as_json() for f in self.calibration.fits],
        }


def suggested_discipline(store: Store, requests: pl.DataFrame) -> str | None:
    """The discipline the store's formats suggest: Slurm's exports ``slurm-backfill``;
    Kubernetes ``kubernetes``, or with Kueue (requests naming a ``queue``) its ClusterQueue
    strategy: ``queueing_strategy`` when the requests carry it, else Kueue's default,
    BestEffortFIFO. None for the other formats."""
    formats = set(store.query("ingest_formats")["format"].to_list())
    if "slurm" in formats:
        return "slurm-backfill"
    if "kubernetes" not in formats:
        return None
    if "queue" in requests.columns and requests["queue"].is_not_null().any():
        strategy = optional_column(requests, "queueing_strategy", pl.String, None)
        if (strategy == "StrictFIFO").any():
            return "kueue-strict-fifo"
        return "kueue-best-effort-fifo"
    return "kubernetes"


def recorded_discipline(store: Store) -> str | None:
    """The discipline of the store's latest calibration, if it was made on the current data."""
    run = latest_whatif_runs(store).get("calibration")
    if run is None or run.stale:
        return None
    best = run.document.get("best")
    return best if best in QUEUE_DISCIPLINES else None


def choose_discipline(
    store_options: StoreOptions,
    nodes: pl.DataFrame,
    demand: placement.Demand,
    *,
    queue: str | None,
    recorded: str | None,
    suggested: str | None,
    calibrate: bool,
    at: datetime,
    preempt: bool | None = None,
) -> tuple[str, str, placement.Calibration | None]:
    """The baseline's discipline and how it was chosen: ``queue`` when given, else the
    recorded calibration's, else (or with ``calibrate``) a calibration run now, which is
    recorded in the store for later runs (with its replays, so the chosen one need not
    run again)."""
    if queue is not None and queue not in placement.QUEUES:
        raise UsageError(f"--queue: use one of {', '.join(placement.QUEUES)}")
    calibration = None
    if calibrate or (queue is None and recorded is None):
        calibration = placement.calibrate(
            nodes, demand, suggested=suggested, keep_results=True, preempt=preempt
        )
        record_whatif_run(
            store_options, "calibration", at=at, scenario=None,
            run_options={"start": iso(demand.start), "end": iso(demand.end), "preempt": preempt},
            document={"schema": "fleetaudit.calibration/1", **calibration.as_json()},
        )  # fmt: skip
    if queue is not None:
        return queue, "--queue", calibration
    if calibration is not None:
        return calibration.best, "calibrated now", calibration
    assert recorded is not None
    return recorded, "calibration", None


def make_baseline(
    store_options: StoreOptions,
    nodes: pl.DataFrame,
    demand: placement.Demand,
    *,
    queue: str | None,
    recorded: str | None,
    suggested: str | None,
    calibrate: bool,
    at: datetime,
    preempt: bool | None = None,
) -> Baseline:
    """The baseline replay of ``demand`` under the discipline :func:`choose_discipline`
    chooses (with these arguments); a calibration run now lends its replay of that
    discipline, which then need not run again."""
    chosen = choose_discipline(
        store_options, nodes, demand, queue=queue, recorded=recorded, suggested=suggested,
        calibrate=calibrate, at=at, preempt=preempt,
    )  # fmt: skip
    discipline, _, calibration = chosen
    result = None if calibration is None else calibration.results.get(discipline)
    if result is None:
        result = placement.replay_demand(nodes, demand, discipline, preempt=preempt)
    return Baseline.fitted(chosen, suggested, result, demand.record)


def replay_gpus(nodes: pl.DataFrame) -> int:
    """The healthy GPUs a by-time replay places onto; a fleet without one is refused."""
    gpus = int(nodes.filter(usable_expr(nodes))["gpus"].cast(pl.Int64).sum())
    if gpus == 0:
        raise UsageError("the fleet has no healthy GPUs to replay onto")
    return gpus


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
        nodes = fleet_nodes(store)
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
    if run.since is not None and run.since <= timedelta(0):
        raise UsageError("--since: give a positive duration (e.g. 1d)")
    if run.queue is not None and run.queue not in placement.QUEUES:
        raise UsageError(f"--queue: use one of {', '.join(placement.QUEUES)}")
    with reading(store_options) as store:
        at = resolve_at(store, run.at)
        window = resolve_window(store, at, run.since, PLACEMENT_SINCE, least=WINDOW_LEAST)
        start, since = window.start, window.length
        nodes, allocations = load_frames(store, start, at)
        nodes, health = load_health(store, nodes, start, at)
        requests = store.query("requests_all")
        suggested = suggested_discipline(store, requests)
        recorded = recorded_discipline(store)
    gpus = replay_gpus(nodes)
    demand = placement.window_demand(nodes, allocations, requests, start, at, health=health)
    baseline = make_baseline(
        store_options, nodes, demand, queue=run.queue, recorded=recorded, suggested=suggested,
        calibrate=run.calibrate, at=at, preempt=run.preempt,
    )  # fmt: skip
    queue, holds, preempt = baseline.discipline, baseline.result.holds, baseline.result.preempt
    options = placement.PlacementOptions(
        seeds=run.seeds, seed=run.seed, workers=min(os.cpu_count() or 1, 2)
    )
    curves = placement.replay_curves(
        nodes, demand.allocations, demand.requests, options, start, at, run.empty, queue,
        run.policies, hold=holds, preempt=preempt, health=health,
    )  # fmt: skip
    saved_policy = None
    if run.save_as is not None:
        saved_policy = run.policies[0]
        final = placement.simulate_replay(
            nodes, demand.allocations, demand.requests,
            placement.PlacementOptions(policy=saved_policy, seed=run.seed),
            start, at, run.empty, queue, hold=holds, preempt=preempt, health=health,
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
                "queue": queue,
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
        queue=queue,
        empty=run.empty,
        window=window,
        recorded=recorded_curve(nodes, allocations, requests, start, at),
        baseline=baseline,
    )


def recorded_curve(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    requests: pl.DataFrame,
    start: datetime,
    end: datetime,
) -> pl.DataFrame:
    """What the recorded fleet did at the by-time curve's instants (every 5% of the
    window): its allocated GPUs as a % of the healthy nodes' GPUs (occupancy as every
    command counts it), and of the requests the replay takes (GPU requests submitted in
    the window, or before it and still waiting at its start) how many had started and
    how many waited; failed: those still waiting at the end."""
    healthy = usable_expr(nodes)
    total = float(nodes.filter(healthy)["gpus"].sum() or 0)
    span = end - start
    arrivals = requests.filter(
        (pl.col("gpus") > 0)
        & (pl.col("submit_time") < end)
        & (
            (pl.col("submit_time") >= start)
            | pl.col("start_time").is_null()
            | (pl.col("start_time") > start)
        )
    )
    rows = []
    for step in range(21):
        pct = 5.0 * step
        t = start + span * (pct / 100)
        state = occupancy.node_state(nodes, allocations, t)
        allocated = float(
            state.filter(usable_expr(state))
            .select((pl.col("gpus") - pl.col("free_gpus")).sum())
            .item()
            or 0
        )
        begun = arrivals.filter(pl.col("start_time") <= t).height
        waiting = arrivals.filter(
            (pl.col("submit_time") <= t)
            & (pl.col("start_time").is_null() | (pl.col("start_time") > t))
        ).height
        rows.append({
            "instant_pct": pct,
            "allocated_pct": 100.0 * allocated / total if total else None,
            "queued": waiting, "started": begun, "failed": waiting if step == 20 else 0,
        })  # fmt: skip
    return pl.DataFrame(
        rows,
        schema={"instant_pct": pl.Float64, "allocated_pct": pl.Float64, "queued": pl.Int64,
                "started": pl.Int64, "failed": pl.Int64},
    )  # fmt: skip


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
