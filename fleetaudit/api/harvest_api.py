"""``fleetaudit whatif harvesting``: read the store, derive sleeps, replay each policy, record the run.

Orchestration only; the engine is :mod:`fleetaudit.whatif.harvest`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetaudit.api import (
    StoreOptions,
    Window,
    by_alloc_id,
    check_scenario,
    fleet_nodes,
    load_health,
    reading,
    record_whatif_run,
    resolve_at,
    resolve_window,
)
from fleetaudit.core import jitcache
from fleetaudit.core.errors import UsageError
from fleetaudit.core.options import HARVEST_SINCE, WINDOW_LEAST, HarvestRun
from fleetaudit.core.times import iso
from fleetaudit.whatif import harvest

if TYPE_CHECKING:
    import polars as pl

    from fleetaudit.model.store import Store

# numba's cache of the replay is kept per source file (fleetaudit.core.jitcache)
KERNEL_SOURCE = Path(harvest.__file__).with_name("harvest_kernel.py")

# Replays of fewer allocations and pods than this run one after the other: on a
# small window a thread's start and the frames' assembly cost more than it saves.
_PARALLEL_FROM_ROWS = 50_000

# Threads take the policies' replays longest first (a replay's length in this order, as
# measured on a 30-day ASI-scale window: random draws and sorts every victim list), so
# that the last replay to start is a short one; results keep the order asked for.
_LONGEST_FIRST = ("random", "smallest", "spotgpu", "newest")


def _longest_first(policies: tuple[str, ...]) -> list[int]:
    """Indices of ``policies`` in the order their replays should start (a policy not yet
    measured starts last)."""
    rank = {policy: k for k, policy in enumerate(_LONGEST_FIRST)}
    return sorted(range(len(policies)), key=lambda i: rank.get(policies[i], len(rank)))


@dataclass(frozen=True)
class HarvestingResult:
    """Every policy's replay of one window, and what the telemetry held."""

    start: datetime
    end: datetime
    scenario: str | None
    run: HarvestRun
    telemetry_samples: int  # telemetry rows in the window
    sleeps: int  # sleep intervals derived from them
    policies: tuple[harvest.HarvestResult, ...]
    notes: tuple[str, ...]
    seconds: float
    window: Window | None = None  # how the window covers the data, and why it is as long


def whatif_harvesting(
    store_options: StoreOptions,
    run: HarvestRun,
    progress: Callable[[str], None] | None = None,
    notice: Callable[[str], None] | None = None,
) -> HarvestingResult:
    """Replay [at - since, at) under each victim policy and record the run in the store.

    Args:
        store_options: the store.
        run: policies, window and the sleep and eviction figures.
        progress: called with a short status line while it runs.
        notice: told once, before it starts, when the replay is compiled in this run.

    Raises:
        UsageError: an unknown policy or scenario, an empty window, bad figures.
    """
    began = time.perf_counter()
    if not run.policies:
        raise UsageError("--policy: give at least one policy")
    for policy in run.policies:
        if policy not in harvest.POLICIES:
            raise UsageError(f"--policy: unknown {policy!r}; use {', '.join(harvest.POLICIES)}")
    if len(set(run.policies)) != len(run.policies):
        raise UsageError("--policy: each policy once")
    if run.since is not None and run.since <= timedelta(0):
        raise UsageError("--since: give a positive duration (e.g. 7d)")
    report = progress or (lambda _msg: None)
    with ExitStack() as stack:
        return _whatif_harvesting(store_options, run, report, notice, began, stack)


def _read_telemetry(
    store: Store, start: datetime, end: datetime, scenario: str | None
) -> tuple[pl.DataFrame, int]:
    """The sleepable allocations' samples in [start, end), and the telemetry rows there."""
    samples = store.query("sleepable_telemetry_between", start=start, end=end, scenario=scenario)
    coverage = store.query("telemetry_samples_between", start=start, end=end)
    return samples, int(coverage["samples"][0])


def _sleeps(
    read: Future[tuple[pl.DataFrame, int]],
    allocations: pl.DataFrame,
    start: datetime,
    end: datetime,
    run: HarvestRun,
) -> pl.DataFrame:
    """The sleeps of the samples ``read`` gives."""
    samples = read.result()[0]
    return harvest.sleep_intervals(
        samples, allocations, start, end, run.idle_sm, run.idle_for.total_seconds()
    )


def _whatif_harvesting(
    store_options: StoreOptions,
    run: HarvestRun,
    report: Callable[[str], None],
    notice: Callable[[str], None] | None,
    began: float,
    stack: ExitStack,
) -> HarvestingResult:
    with reading(store_options) as store:
        end = resolve_at(store, run.at, run.scenario)
        window = resolve_window(
            store, end, run.since, HARVEST_SINCE, run.scenario, least=WINDOW_LEAST
        )
        start, run = window.start, replace(run, since=window.length)
        # Checked before the store is read at length.
        harvest.check_options(harvest.HarvestOptions.of_run(run, run.policies[0]), start, end)
        if notice is not None:
            cache = jitcache.choose_cache_dir(KERNEL_SOURCE)
            if cache is None:
                notice(
                    "compiling the harvesting replay (a minute or two): no writable cache "
                    f"folder, so every run compiles; set {jitcache.ENV} to a folder to keep it"
                )
            elif not jitcache.is_cached(KERNEL_SOURCE):
                notice(
                    "compiling the harvesting replay, once per machine (a minute or two); "
                    f"later runs load it from {cache}"
                )
        # A thread loads the compiled replay (numba, and the cache's machine code) while
        # the store is read: both mostly run outside the interpreter lock.
        warming = stack.enter_context(ThreadPoolExecutor(1)).submit(harvest.warm_up)
        report("reading allocations and telemetry")
        check_scenario(store, run.scenario)
        nodes = fleet_nodes(store, run.scenario)
        allocations = by_alloc_id(
            [store.query("harvest_allocations", start=start, end=end, scenario=run.scenario)]
        )
        nodes, health = load_health(store, nodes, start, end)
        # A second thread reads the telemetry and derives the sleeps from it while this one
        # prepares the nodes, allocations and jobs, which need no sleeps (DuckDB, polars and
        # numpy mostly run outside the interpreter lock): the store is that thread's alone
        # meanwhile, and the preparation waits for the sleeps when it reaches the events.
        second = stack.enter_context(ThreadPoolExecutor(1))
        read = second.submit(_read_telemetry, store, start, end, run.scenario)
        sleeps = second.submit(_sleeps, read, allocations, start, end, run)  # after the read
        try:
            report("preparing the replay")
            prepared = harvest.prepare_replay(
                nodes, allocations, sleeps, harvest.HarvestOptions.of_run(run, run.policies[0]),
                start, end, health,
            )  # fmt: skip
        except BaseException:
            # Ctrl-C or a failure here: the second thread's work is no longer wanted, and
            # a query there hears no Ctrl-C (DuckDB checks for it on the main thread only),
            # so it is stopped rather than read to its end before the command exits.
            sleeps.cancel()
            if not read.cancel():
                store.con.interrupt()
            raise
        finally:
            wait([read])  # the store closes once the thread is done with it
    samples, telemetry_samples = read.result()
    workers = max(1, min(run.workers, len(run.policies), os.cpu_count() or 1))
    notes: list[str] = [] if window.cover is None else [window.cover]
    if telemetry_samples == 0:
        notes.append(
            "no telemetry in the window: nothing sleeps, so no standby capacity is lent "
            "and only free capacity is harvested"
        )
    elif samples.is_empty():
        notes.append("the telemetry in the window covers no sleepable allocation: nothing sleeps")
    del nodes, allocations, samples  # the prepared arrays hold what the replays need
    if not warming.done():
        report("loading the compiled replay (a machine's first run compiles it: about a minute)")
    harvest.awaited(warming)  # Ctrl-C is heard while a first run compiles
    if prepared.names.n_fixed + prepared.names.n_pods < _PARALLEL_FROM_ROWS:
        workers = 1
    if workers > 1:
        report(f"replaying {len(run.policies)} policies, {workers} at a time")
        # The replay loop lets go of the GIL, so threads replay policies side by side on
        # the one prepared replay (its arrays are only read): no worker process to start,
        # no copy of the prepared replay to send, and each thread takes the next policy
        # as soon as it is done with one.
        order = _longest_first(run.policies)
        with ThreadPoolExecutor(workers) as threads:
            replayed = threads.map(
                partial(harvest.run_replay, prepared), [run.policies[i] for i in order]
            )
            by_index = dict(zip(order, replayed))
        results = [by_index[i] for i in range(len(run.policies))]
    else:
        results = []
        for i, policy in enumerate(run.policies):

            def step(share: float, policy: str = policy, i: int = i) -> None:
                report(
                    f"replaying {policy} ({i + 1} of {len(run.policies)}): {share:.0%} of the window"
                )

            results.append(harvest.run_replay(prepared, policy, progress=step))
    result = HarvestingResult(
        start=start,
        end=end,
        scenario=run.scenario,
        run=run,
        telemetry_samples=telemetry_samples,
        sleeps=sleeps.result().height,
        policies=tuple(results),
        notes=tuple(notes),
        seconds=time.perf_counter() - began,
        window=window,
    )
    if run.record:
        record_whatif_run(
            store_options,
            "harvesting",
            at=end,
            scenario=run.scenario,
            run_options=run.as_json(),
            document=harvesting_document(result),
        )
    return result


HARVESTING_SCHEMA = "fleetaudit.harvesting/1"


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(float(value), digits)


def harvesting_document(result: HarvestingResult) -> dict[str, Any]:
    """The ``fleetaudit whatif harvesting --json`` document (SPEC §6).

    Per policy the SPEC's keys, plus: evictions (the preemptions a waking
    lender caused, already in ``preemptions``), jobs and unfinished_open
    (open-ended jobs, which cannot finish in the window), the GPU-hours behind
    the rates, and ``overcommitted`` (events where recorded work alone
    exceeded a node), ``search_budget_hits`` (node searches cut by the scan
    budget).
    """
    policies = []
    for r in result.policies:
        completion = r.completion_s()
        jobs = r.jobs
        policies.append(
            {
                "policy": r.policy,
                "allocation_rate_high": _round(r.allocation_rate_high),
                "allocation_rate": _round(r.allocation_rate),
                "standby_gpu_hours": _round(r.standby_gpu_hours, 3),
                "harvested_share": _round(r.harvested_share),
                "lp_completion_s": {k: _round(v, 1) for k, v in completion.items()},
                "preemptions": r.preemptions,
                "forced_kills": r.forced_kills,
                "lost_gpu_hours": _round(r.lost_gpu_hours, 3),
                "unfinished": r.unfinished,
                "evictions": r.evictions,
                "harvested_gpu_hours": _round(r.harvested_gpu_hours, 3),
                "healthy_gpu_hours": _round(r.healthy_gpu_hours, 3),
                "allocated_high_gpu_hours": _round(r.allocated_high_gpu_hours, 3),
                "allocated_gpu_hours": _round(r.allocated_gpu_hours, 3),
                "lp_gpu_hours": _round(r.lp_gpu_hours, 3),
                "jobs": jobs.height,
                "jobs_in_window": int(jobs["in_window"].sum()),
                "unfinished_open": int(jobs["need_s"].null_count()),
                "overcommitted": r.overcommitted,
                "search_budget_hits": r.budget_hits,
            }
        )
    return {
        "schema": HARVESTING_SCHEMA,
        "window": {
            "start": iso(result.start),
            "end": iso(result.end),
            **({} if result.window is None else result.window.as_json()),
        },
        "scenario": result.scenario,
        "telemetry": {"samples": result.telemetry_samples, "sleeps": result.sleeps},
        "options": result.run.as_json(),
        "policies": policies,
        "notes": list(result.notes),
    }
