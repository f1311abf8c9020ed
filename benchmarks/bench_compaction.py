"""``fleetaudit whatif compaction``: speed at ASI scale, and quality against the exact optimum.

    python -m benchmarks.bench_compaction [--nodes 19400] [--days 90] [--samples 24]
                                          [--jobs 2] [--work bench-out/compaction]

Generates an ASI-like fleet once (Parquet, no telemetry) and ingests it into a
store in --work, then prints:

1. the whole what-if from the store at the export time and a day before it (every queued shape,
   partitions of 500 nodes, --jobs workers): seconds (target < 60 s on 2
   cores), moves, free and partially occupied nodes before and after, the
   bound, and the reduction in partially occupied nodes beside the ASI paper's
   20.2%;
2. the search per partition: the slowest partition and the largest one
   (target < 2 s for 500 nodes; the paper: under 2 minutes in production);
3. quality: partitions of 25-40 nodes (the first nodes of one switch domain
   of one model) at 85-95% GPU allocation, at instants stepping back from the
   export time: the search's free nodes against the ILP optimum (target >= 90%),
   with both times (the paper: 5 minutes for the ILP at 25 nodes). The ILP runs
   as ``--exact`` does, with the partition's bound as a cut, but without the
   search's result.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl

from benchmarks.fleets import bare_fleet_store, peak_rss_mib
from fleetaudit.api import StoreOptions, load_frames, reading, resolve_at
from fleetaudit.api.compaction_api import CompactionRun, whatif_compaction
from fleetaudit.model import occupancy
from fleetaudit.whatif import compaction
from fleetaudit.whatif.compaction import CompactionOptions

PAPER_PARTIAL_REDUCTION = 20.2  # % fewer partially occupied nodes after IPC (ASI, OSDI 2026)


def _store(args: argparse.Namespace) -> StoreOptions:
    return bare_fleet_store(args.work, args.nodes, args.days)


def whole_fleet(store: StoreOptions, jobs: int, back: timedelta) -> None:
    with reading(store) as s:
        export = resolve_at(s, None)
    at = export - back
    started = time.perf_counter()
    report = whatif_compaction(store, CompactionRun(jobs=jobs, at=at))
    seconds = time.perf_counter() - started
    result = report.result
    before, after = result.before, result.after
    reduction = 100 * (before.partial_nodes - after.partial_nodes) / max(before.partial_nodes, 1)
    gained = sum(a - b for (_, b), (_, a) in zip(before.instances, after.instances, strict=True))
    m = result.migration
    when = "the export time" if not back else f"the export time - {back}"
    print(f"\n## Whole fleet at {when} ({at:%Y-%m-%d %H:%M}, every queued shape)\n")
    print("| | value |\n|---|---|")
    print(f"| wall time, store to result, --jobs {jobs} | **{seconds:.1f} s** (target < 60 s) |")
    print(
        f"| of which the search (sum over partitions) | {sum(p.seconds for p in result.partitions):.1f} s |"
    )
    print(f"| partitions | {len(result.partitions)} (budgets hit in {len(result.budgets_hit)}) |")
    print(
        f"| queued shapes | {len(before.instances)}; instances {sum(n for _, n in before.instances):,} -> {sum(n for _, n in after.instances):,} (+{gained:,}) |"
    )
    print(
        f"| free nodes | {before.free_nodes:,} -> {after.free_nodes:,} (bound {result.bound_free_nodes:,}) |"
    )
    print(
        f"| partially occupied nodes | {before.partial_nodes:,} -> {after.partial_nodes:,}: **-{reduction:.1f}%** (paper: -{PAPER_PARTIAL_REDUCTION}%) |"
    )
    print(f"| moves, GPUs moved | {m.moves:,}, {m.gpus_moved:,.1f} |")
    print(
        f"| pause (80 GiB/GPU at 100 Gbit/s + 60 s) | {m.pause_gpu_hours:,.1f} GPU-hours for {m.freed_gpus:,} GPUs freed: pays back after {m.payback_s or 0:.0f} s |"
    )
    sizes = sorted(result.partitions, key=lambda p: p.nodes)
    slowest = max(result.partitions, key=lambda p: p.seconds)
    print(f"\n## Search per partition (run at {at:%Y-%m-%d %H:%M})\n")
    print(
        f"- largest partition: {sizes[-1].nodes} nodes ({sizes[-1].gpu_model}): {sizes[-1].seconds:.2f} s (target < 2 s)"
    )
    print(
        f"- slowest partition: {slowest.nodes} nodes ({slowest.gpu_model}): {slowest.seconds:.2f} s"
    )
    print(f"- median partition: {statistics.median(p.seconds for p in result.partitions):.2f} s")


def quality(store: StoreOptions, samples: int, seed: int, time_limit: float, uncut: int) -> None:
    with reading(store) as s:
        end = resolve_at(s, None)
        nodes, allocations = load_frames(
            s, end - timedelta(days=2), end + timedelta(microseconds=1)
        )
    rng = random.Random(seed)
    healthy = nodes.filter(pl.col("health") == "healthy", pl.col("switch_id").is_not_null())
    groups = [
        frame.sort("node_id")
        for _, frame in healthy.group_by("gpu_model", "switch_id", maintain_order=True)
        if frame.height >= 25
    ]
    groups.sort(key=lambda f: (f["switch_id"][0], f["gpu_model"][0]))
    print("\n## Search against the exact optimum (25-40 nodes at 85-95% allocation)\n")
    if not groups:
        print("(skipped: no switch of this fleet holds 25 healthy nodes of one model; use --nodes 1000 or more)")
        return
    print(
        "| instant | model | nodes | allocated | search free | ILP free | search / ILP | search s | ILP s | ILP |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    options = CompactionOptions(exact_time_limit_s=time_limit)
    rows = []
    uncut_rows: list[tuple[int, str, float]] = []
    attempts = 0
    while len(rows) < samples and attempts < samples * 40:
        attempts += 1
        at = end - timedelta(hours=6 * rng.randrange(8))
        group = rng.choice(groups)
        size = rng.randint(25, min(40, group.height))
        sub = group.head(size)
        state = occupancy.node_state(sub, allocations, at)
        allocated = 100 * float(state["gpus_used"].sum()) / float(state["gpus"].sum())
        if not 85 <= allocated <= 95:
            continue
        sub_allocations = allocations.filter(pl.col("node_id").is_in(sub["node_id"].implode()))
        started = time.perf_counter()
        result = compaction.compact(sub, sub_allocations, at, (), options)
        search_s = time.perf_counter() - started
        (part,) = compaction._partitions(sub, sub_allocations, at, (), options)
        free, status, ilp_s = compaction._exact(part, 0, compaction._bound(part))
        ratio = None if not free else result.after.free_nodes / free
        rows.append((ratio, ilp_s, status, free, result.after.free_nodes))
        if len(rows) <= uncut:  # the ILP alone: no bound, no search result
            bare = compaction._exact(part)
            uncut_rows.append((size, bare[1], bare[2]))
        print(
            f"| {at:%m-%d %H:%M} | {part.gpu_model} | {size} | {allocated:.1f}% | "
            f"{result.after.free_nodes} | {'-' if free is None else free} | "
            f"{'-' if ratio is None else f'{100 * ratio:.0f}%'} | {search_s:.2f} | {ilp_s:.1f} | {status} |"
        )
    solved = [r for r in rows if r[2] == "optimal"]
    with_free = [r for r in solved if r[0] is not None]
    print()
    if with_free:
        ratios = [r[0] for r in with_free]
        print(
            f"- {len(solved)} of {len(rows)} samples solved to optimality; where the optimum frees "
            f"a node ({len(with_free)}): search / ILP mean {100 * statistics.mean(ratios):.1f}%, "
            f"min {100 * min(ratios):.0f}%, >= 90% in {sum(r >= 0.9 for r in ratios)} of {len(ratios)} (target >= 90%)"
        )
    equal = sum(1 for r in solved if r[3] == r[4])
    print(f"- search equals the optimum in {equal} of {len(solved)} solved samples")
    if rows:
        times = [r[1] for r in rows]
        print(
            f"- ILP time with the bound as a cut: mean {statistics.mean(times):.1f} s, "
            f"max {max(times):.1f} s (limit {time_limit:g} s)"
        )
    _report_uncut(uncut_rows)


SIZES = (1.0, 1.0, 1.0, 2.0, 2.0, 3.0, 4.0, 4.0, 5.0, 6.0, 7.0, 0.5, 0.25)


def _random_partition(
    rng: random.Random, size: int, at: datetime
) -> tuple[pl.DataFrame, pl.DataFrame, float]:
    """``size`` 8-GPU nodes in two domains, filled at random to 85-95% of their GPUs.

    Sizes 1-7 GPUs and a few shares, 8 CPUs per GPU on 64-CPU nodes; nodes fill in
    a random order, so there is no lane structure for the search to find.
    """
    nodes = pl.DataFrame(
        {
            "node_id": [f"r{i:02d}" for i in range(size)],
            "gpu_model": ["H20"] * size,
            "gpus": [8] * size,
            "cpus": [64.0] * size,
            "memory_gib": [None] * size,
            "switch_id": [f"s{2 * i // size}" for i in range(size)],
            "health": ["healthy"] * size,
        },
        schema_overrides={"memory_gib": pl.Float64},
    )
    target = rng.uniform(0.85, 0.95) * 8 * size
    held: list[list[float]] = [[] for _ in range(size)]
    rows = []
    total = 0.0
    tries = 0
    while total < target and tries < 10_000:
        tries += 1
        node = rng.randrange(size)
        gpus = rng.choice(SIZES)
        trial = [*held[node], gpus]
        units = [round(g * 1_000_000) for g in trial]
        whole = sum(u // 1_000_000 for u in units)
        shares = occupancy.first_fit_decreasing(u % 1_000_000 for u in units if u % 1_000_000)
        if whole + len(shares) > 8:
            continue
        held[node] = trial
        total += gpus
        rows.append((f"x{len(rows)}", f"r{node:02d}", gpus, max(1.0, 8 * gpus)))
    allocations = pl.DataFrame(
        rows, schema={"alloc_id": pl.String, "node_id": pl.String, "gpus": pl.Float64,
                      "cpus": pl.Float64}, orient="row",
    ).with_columns(
        pl.col("alloc_id").alias("job_id"),
        pl.lit(None, dtype=pl.Float64).alias("memory_gib"),
        pl.lit("high").alias("priority"),
        pl.lit(at - timedelta(hours=1)).cast(pl.Datetime("us")).alias("start_time"),
        pl.lit(None, dtype=pl.Datetime("us")).alias("end_time"),
    )  # fmt: skip
    state = occupancy.node_state(nodes, allocations, at)
    return nodes, allocations, 100 * float(state["gpus_used"].sum()) / (8 * size)


def random_quality(samples: int, seed: int, time_limit: float) -> None:
    rng = random.Random(seed)
    at = datetime(2026, 5, 1)
    options = CompactionOptions(exact_time_limit_s=time_limit)
    print("\n## Search against the exact optimum, random fills (25-40 nodes at 85-95%)\n")
    print(
        "| nodes | allocated | search free | bound | ILP free | search / ILP | search s | ILP s | ILP |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    ratios, times, equal, solved = [], [], 0, 0
    done = 0
    while done < samples:
        size = rng.randint(25, 40)
        nodes, allocations, allocated = _random_partition(rng, size, at)
        if not 85 <= allocated <= 95:  # shares occupy whole GPUs: a fill can overshoot
            continue
        done += 1
        started = time.perf_counter()
        result = compaction.compact(nodes, allocations, at, (), options)
        search_s = time.perf_counter() - started
        part = compaction._partitions(nodes, allocations, at, (), options)[0]
        bound = compaction._bound(part)
        free, status, ilp_s = compaction._exact(part, 0, bound)
        times.append(ilp_s)
        found = result.after.free_nodes
        if status == "optimal":
            solved += 1
            equal += found == free
            if free:
                ratios.append(found / free)
        ratio = f"{100 * found / free:.0f}%" if free else "-"
        print(
            f"| {size} | {allocated:.1f}% | {found} | {bound} | {'-' if free is None else free} | "
            f"{ratio} | {search_s:.2f} | {ilp_s:.1f} | {status} |"
        )
    print()
    if ratios:
        print(
            f"- {solved} of {samples} solved; search / ILP mean {100 * statistics.mean(ratios):.1f}%, "
            f"min {100 * min(ratios):.0f}%, >= 90% in {sum(r >= 0.9 for r in ratios)} of "
            f"{len(ratios)}; equal in {equal} of {solved}"
        )
    print(
        f"- ILP time with the bound as a cut: mean {statistics.mean(times):.1f} s, max {max(times):.1f} s"
    )


def _report_uncut(rows: list[tuple[int, str, float]]) -> None:
    for size, status, seconds in rows:
        print(f"- the bare ILP (no cut), {size} nodes: {status} in {seconds:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=19_400)
    parser.add_argument("--days", type=float, default=90.0)
    parser.add_argument("--samples", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--ilp-time-limit", type=float, default=120.0)
    parser.add_argument("--uncut", type=int, default=3, help="samples also solved without the cut")
    parser.add_argument("--quality-only", action="store_true", help="skip the whole-fleet runs")
    parser.add_argument("--random-only", action="store_true", help="only the random fills")
    parser.add_argument("--work", type=Path, default=Path("bench-out/compaction"))
    args = parser.parse_args()
    if args.random_only:
        random_quality(args.samples, args.seed, args.ilp_time_limit)
        return
    store = _store(args)
    if not args.quality_only:
        whole_fleet(store, args.jobs, timedelta(0))
        # a day earlier, running work has known end times: what ends within 1h stays
        whole_fleet(store, args.jobs, timedelta(days=1))
    quality(store, args.samples, args.seed, args.ilp_time_limit, args.uncut)
    random_quality(args.samples, args.seed, args.ilp_time_limit)
    peak = peak_rss_mib()
    print(f"\npeak RSS {peak:,.0f} MiB")


if __name__ == "__main__":
    main()
