"""``fleetaudit whatif compaction``: read the store, plan the ledger, save and record the run.

Orchestration only; the search is :mod:`fleetaudit.whatif.compaction` and its
independent check :mod:`fleetaudit.whatif.compaction_replay`.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from fleetaudit.api import (
    StoreOptions,
    check_scenario,
    load_frames,
    load_health,
    reading,
    record_whatif_run,
    save_scenario,
    writing,
)
from fleetaudit.api import resolve_at as resolve_instant
from fleetaudit.api.placement_api import (
    Baseline,
    choose_discipline,
    recorded_discipline,
    suggested_discipline,
)
from fleetaudit.api.shapes_api import shapes_to_evaluate
from fleetaudit.core.errors import UsageError
from fleetaudit.core.options import COMPACTION_ENGINES
from fleetaudit.core.times import iso
from fleetaudit.model import engines, occupancy
from fleetaudit.model.shapes import Shape
from fleetaudit.whatif import compaction, compaction_over_time, placement
from fleetaudit.whatif.compaction import CompactionOptions, CompactionResult, Snapshot
from fleetaudit.whatif.compaction_over_time import OverTimeOptions, OverTimeResult

ENGINES = COMPACTION_ENGINES  # where the partitions' searches run

# the options' names on the command line, for errors; breadth, exact_nodes and
# exact_time_limit_s have no flag (API callers only): their errors name the field
_FLAGS = {
    "depth": "--depth",
    "rounds": "--rounds",
    "partition_nodes": "--partition-nodes",
    "jobs": "--jobs",
    "min_remaining_s": "--min-remaining",
    "state_gib_per_gpu": "--state-gib-per-gpu",
    "bandwidth_gbps": "--bandwidth-gbps",
    "warmup_s": "--warmup",
}


@dataclass(frozen=True)
class CompactionRun:
    """What ``whatif compaction`` runs (defaults are the command line's).

    ``jobs`` None means one worker process per CPU. ``engine`` ``spark`` ships the
    partitions to a Spark session's executors instead (``master``, default ``local[*]``).
    """

    shapes: tuple[Shape, ...] = ()  # empty: every distinct shape queued at t
    at: datetime | None = None
    scenario: str | None = None
    save_as: str | None = None
    jobs: int | None = None
    options: CompactionOptions = field(default_factory=CompactionOptions)
    engine: str = ENGINES[0]  # local: worker processes; spark: the executors of a Spark session
    master: str | None = None  # the Spark master (engine spark only)
    over_s: float | None = None  # --over: replay the window [at - over, at] with rounds
    over_time: OverTimeOptions = field(default_factory=OverTimeOptions)


@dataclass(frozen=True)
class CompactionReport:
    """A compaction run: the algorithm's result and what it ran on."""

    at: datetime
    scenario: str | None
    queued: tuple[int, ...]  # queued requests per shape, in the order of the shapes
    result: CompactionResult
    options: CompactionOptions
    seconds: float  # the whole run: reading the store, the search, the evaluations
    saved: str | None = None
    notes: tuple[str, ...] = ()
    over_time: OverTimeResult | None = None
    over_s: float | None = None
    over_time_options: OverTimeOptions | None = None
    baseline: Baseline | None = (
        None  # with --over: the replay without compaction, beside the record
    )


def _checked(run: CompactionRun) -> CompactionOptions:
    options = replace(run.options, jobs=run.jobs if run.jobs is not None else os.cpu_count() or 1)
    try:
        options.check()
    except ValueError as exc:
        name, _, rest = str(exc).partition(" ")
        raise UsageError(f"{_FLAGS.get(name, name)}: {rest}") from exc
    return options


def whatif_compaction(store_options: StoreOptions, run: CompactionRun) -> CompactionReport:
    """Plan in-place compaction of the state at t, save it if asked, record the run.

    The run is recorded in the store (``whatif_runs``, read by ``report``) with
    its ``--json`` document, whether or not the caller prints it.
    """
    started = time.perf_counter()
    options = _checked(run)
    if run.engine not in ENGINES:
        raise UsageError(f"--engine: {run.engine!r} is not one of {', '.join(ENGINES)}")
    if run.master is not None and run.engine != "spark":
        raise UsageError("--master: only with --engine spark")
    if run.over_s is not None:
        if not run.over_s > 0:
            raise UsageError("--over: give a positive duration (e.g. 7d)")
        run.over_time.check()
    spark = engines.spark_module().SparkEngine(run.master) if run.engine == "spark" else None
    with reading(store_options) as store:
        check_scenario(store, run.scenario)
        at = resolve_instant(store, run.at, run.scenario)
        pairs, notes = shapes_to_evaluate(store, at, run.shapes)
        longest = max((s.duration_s or 0.0 for s, _ in pairs), default=0.0)
        end = at + timedelta(seconds=longest) + timedelta(microseconds=1)
        first = at if run.over_s is None else at - timedelta(seconds=run.over_s)
        nodes, allocations = load_frames(store, first, end, run.scenario)
        nodes, health = load_health(store, nodes, first, end)
        requests = store.query("requests_all") if run.over_s is not None else None
        suggested = recorded = None
        if requests is not None:
            suggested = suggested_discipline(store, requests)
            recorded = recorded_discipline(store)
    shapes = tuple(s for s, _ in pairs)
    # the nodes as they stand at t: one out of service is out of scope, failed GPUs take no move
    standing = occupancy.nodes_at(nodes, allocations, at, health)
    if spark is None:
        result = compaction.compact(standing, allocations, at, shapes, options)
    else:
        with spark:
            result = compaction.compact(
                standing, allocations, at, shapes, options, spark.map_groups
            )
    over: OverTimeResult | None = None
    baseline: Baseline | None = None
    over_time = run.over_time
    if run.over_s is not None and requests is not None:
        start, _ = compaction_over_time.window(at, run.over_s)
        demand = placement.window_demand(nodes, allocations, requests, start, at, health=health)
        chosen = choose_discipline(
            store_options, nodes, demand, queue=over_time.queue, recorded=recorded,
            suggested=suggested, calibrate=False, at=at, preempt=over_time.preempt,
        )  # fmt: skip
        over_time = replace(over_time, queue=chosen[0])
        over = compaction_over_time.compact_over_time(
            nodes, allocations, requests, start, at, shapes, options, over_time, demand=demand,
            health=health,
        )  # fmt: skip
        assert over.base is not None
        baseline = Baseline.fitted(chosen, suggested, over.base, demand.record)
        notes.extend(baseline.notes)
    if run.save_as is not None:
        if over is not None:
            _save_final(store_options, run, over, options, at)
        else:
            _save(store_options, run, result, options, at)
    for (shape, was), (_, now) in zip(result.before.instances, result.after.instances, strict=True):
        if now < was:  # only a shape with a duration can: the search counts shapes at t
            notes.append(
                f"{shape.label()}: {was} -> {now} instances; the search counts shapes at t, "
                "and work starting later in the shape's window stays on its recorded node"
            )
    if any(p.exact_status == "too_large" for p in result.partitions):
        notes.append(
            f"--exact solves partitions of up to {options.exact_nodes} nodes; "
            "larger ones are reported without an optimum"
        )
    report = CompactionReport(
        at=at,
        scenario=run.scenario,
        queued=tuple(q for _, q in pairs),
        result=result,
        options=options,
        seconds=time.perf_counter() - started,
        saved=run.save_as,
        notes=tuple(notes),
        over_time=over,
        over_s=run.over_s,
        over_time_options=None if over is None else over_time,
        baseline=baseline,
    )
    record_whatif_run(
        store_options,
        "compaction" if over is None else "compaction_over_time",
        at=at,
        scenario=run.scenario,
        run_options=run_options(report),
        document=compaction_document(report),
    )
    return report


def run_options(report: CompactionReport) -> dict[str, Any]:
    """The options a run used, as JSON values (also in its ``--json`` document)."""
    out = {**asdict(report.options), "save_as": report.saved}
    if report.over_time_options is not None:
        out.update(over_s=report.over_s, **asdict(report.over_time_options))
    return out


def _save_final(
    store_options: StoreOptions,
    run: CompactionRun,
    over: OverTimeResult,
    options: CompactionOptions,
    at: datetime,
) -> None:
    """Keep the over-time run's final state (every allocation active at the window's
    end, with compaction) as scenario ``run.save_as`` (base ``empty``)."""
    if not run.save_as or not run.save_as.strip():
        raise UsageError("--save-as: give a scenario name")
    frame = over.final.select(
        "alloc_id", "job_id", "node_id", "gpus", "cpus", "memory_gib", "priority",
        pl.lit(None, dtype=pl.Utf8).alias("workload"), pl.lit(None, dtype=pl.Utf8).alias("tenant"),
        "start_time", "end_time", pl.lit(None, dtype=pl.Float64).alias("checkpoint_interval_s"),
        pl.lit(False).alias("sleepable"),
    )  # fmt: skip
    with writing(store_options) as store:
        save_scenario(
            store, run.save_as, frame, base="empty", command="whatif compaction",
            options={**asdict(options), **asdict(run.over_time), "over_s": run.over_s,
                     "from_scenario": run.scenario,
                     "moves": sum(len(t.moves) for t in over.ticks)},
            at=at,
        )  # fmt: skip


def _save(
    store_options: StoreOptions,
    run: CompactionRun,
    result: CompactionResult,
    options: CompactionOptions,
    at: datetime,
) -> None:
    """Keep the compacted state as scenario ``run.save_as``.

    On the recorded state the scenario overrides only the moved allocations
    (each on its final node, its times unchanged); on a scenario it holds every
    allocation read at t, moved ones on their final node (base ``empty``).
    """
    if not run.save_as or not run.save_as.strip():
        raise UsageError("--save-as: give a scenario name")
    moved_ids = sorted({m.alloc_id for m in result.moves})
    frame = result.allocations
    if run.scenario is None:
        frame = frame.filter(pl.col("alloc_id").is_in(moved_ids))
    with writing(store_options) as store:
        save_scenario(
            store, run.save_as, frame, base="recorded" if run.scenario is None else "empty",
            command="whatif compaction",
            options={**asdict(options), "from_scenario": run.scenario, "moves": len(result.moves)},
            at=at,
        )  # fmt: skip


COMPACTION_SCHEMA = "fleetaudit.compaction/1"
BOUND_METHOD = (
    "per partition: nodes - nodes pinned by immovable GPU work - the fewest other nodes "
    "whose capacity, largest first, covers the movable GPUs, CPUs and memory that the "
    "pinned nodes' room cannot (shares as fractions, gangs unconstrained)"
)


def compaction_document(report: CompactionReport) -> dict[str, Any]:
    """The ``fleetaudit whatif compaction --json`` document (SPEC §4).

    Beyond the SPEC keys: the options, the migration cost, the partitions that
    hit a budget, every partition's counts, and with ``--exact`` the ILP's
    optimum and the heuristic's gap to it over the partitions it solved.
    """
    result = report.result

    def snapshot(s: Snapshot) -> dict[str, Any]:
        return {
            "partial_nodes": s.partial_nodes,
            "free_nodes": s.free_nodes,
            "instances": [
                {"shape": shape.as_json(), "queued": queued, "instances": n}
                for (shape, n), queued in zip(s.instances, report.queued, strict=True)
            ],
        }

    exact = None
    if report.options.exact:
        solved = [p for p in result.partitions if p.exact_status in ("optimal", "bound")]
        optimum = sum(p.exact_free or 0 for p in solved)
        heuristic = sum(p.after_free for p in solved)
        exact = {
            "partitions_solved": len(solved),
            "free_nodes": optimum,
            "heuristic_free_nodes": heuristic,
            "gap": optimum - heuristic,
            "seconds": round(sum(p.exact_seconds or 0.0 for p in result.partitions), 4),
            "unsolved": [
                {"partition": p.index, "status": p.exact_status}
                for p in result.partitions
                if p.exact_status not in ("optimal", "bound")
            ],
        }
    return {
        "schema": COMPACTION_SCHEMA,
        "at": iso(report.at),
        "scenario": report.scenario,
        "partitions": len(result.partitions),
        "seconds": round(report.seconds, 3),
        "moves": [m.as_json() for m in result.moves],
        "before": snapshot(result.before),
        "after": snapshot(result.after),
        "bound": {"free_nodes": result.bound_free_nodes, "method": BOUND_METHOD},
        "budgets_hit": [
            {"partition": p.index, "gpu_model": p.gpu_model, "budgets": list(p.budgets_hit)}
            for p in result.budgets_hit
        ],
        "migration": result.migration.as_json(),
        "exact": exact,
        "by_partition": [p.as_json() for p in result.partitions],
        "options": {**asdict(report.options)},
        "saved_as": report.saved,
        "notes": list(report.notes),
        "over_time": None
        if report.over_time is None or report.over_time_options is None
        else {
            **compaction_over_time.over_time_json(
                report.over_time, report.over_s or 0.0, report.over_time_options
            ),
            "calibration": None if report.baseline is None else report.baseline.as_json(),
        },
    }
