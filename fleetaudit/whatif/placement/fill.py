"""Placement what-if, fill mode: feed requests onto an empty fleet under a policy.

Fill mode (the FGD paper's method). No departures. Requests arrive in list
order (``trace_order``, else ``submit_time`` then ``request_id``, else row
order); when the list runs out they are drawn again uniformly with replacement
with the seed, until the arrived GPU demand reaches ``fill_pct``% of the
fleet's GPUs. A request that cannot be placed fails and is not retried. At
every ``step_pct``% of arrival the curve records allocated % (allocated GPUs,
shares as their fraction, over all GPUs), fragmented % and failed requests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from fleetaudit.core.errors import UsageError
from fleetaudit.core.parallel import map_processes as _map_runs
from fleetaudit.whatif.placement.fleet import _U, _Fleet, _prepare_fleet
from fleetaudit.whatif.placement.policies import POLICIES, _Run
from fleetaudit.whatif.placement.workload import PlacementOptions, _prepare_workload, _Workload


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
