"""Compaction what-if: hand-worked chains, the independent replay of every ledger, bound, exact mode."""

from __future__ import annotations

import itertools
import random
from datetime import datetime, timedelta
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetaudit.model.occupancy import SHARE_UNITS, first_fit_decreasing
from fleetaudit.model.shapes import Shape, make_shape
from fleetaudit.whatif.compaction import (
    CompactionOptions,
    CompactionResult,
    _exact,
    _partitions,
    compact,
)
from fleetaudit.whatif.compaction_replay import LedgerError, replay_ledger

T = datetime(2026, 1, 1, 12)
SOON = T + timedelta(minutes=30)  # within the default --min-remaining of 1h


def make_nodes(*rows: tuple[Any, ...]) -> pl.DataFrame:
    """rows of (node_id, gpus[, switch_id[, gpu_model[, health[, cpus[, memory_gib]]]]])."""
    full = []
    for row in rows:
        node_id, gpus, switch, model, health, cpus, memory = (
            *row, *(None, "H20", "healthy", 64.0, None)[len(row) - 2 :]
        )  # fmt: skip
        full.append((node_id, model, gpus, cpus, memory, switch, health))
    return pl.DataFrame(
        full,
        schema={"node_id": pl.String, "gpu_model": pl.String, "gpus": pl.Int64,
                "cpus": pl.Float64, "memory_gib": pl.Float64, "switch_id": pl.String,
                "health": pl.String},
        orient="row",
    )  # fmt: skip


def make_allocations(*rows: tuple[Any, ...]) -> pl.DataFrame:
    """rows of (alloc_id, node_id, gpus[, end_time[, job_id[, cpus[, memory_gib]]]])."""
    full = []
    for row in rows:
        alloc_id, node_id, gpus, end, job, cpus, memory = (
            *row, *(None, None, 1.0, None)[len(row) - 3 :]
        )  # fmt: skip
        full.append(
            (alloc_id, job or alloc_id, node_id, float(gpus), cpus, memory, "high",
             T - timedelta(hours=1), end)
        )  # fmt: skip
    return pl.DataFrame(
        full,
        schema={"alloc_id": pl.String, "job_id": pl.String, "node_id": pl.String,
                "gpus": pl.Float64, "cpus": pl.Float64, "memory_gib": pl.Float64,
                "priority": pl.String, "start_time": pl.Datetime("us"),
                "end_time": pl.Datetime("us")},
        orient="row",
    )  # fmt: skip


def run(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    shapes: tuple[Shape, ...] = (),
    **options: Any,
) -> CompactionResult:
    """compact(), then the independent replay of its ledger, which must agree with it."""
    opts = CompactionOptions(**options)
    result = compact(nodes, allocations, T, shapes, opts)
    checked(result, nodes, allocations, shapes, opts)
    return result


def checked(
    result: CompactionResult,
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    shapes: tuple[Shape, ...],
    options: CompactionOptions,
) -> None:
    partition_of = {}
    for move in result.moves:
        partition_of.setdefault(move.source, move.partition)
        partition_of.setdefault(move.destination, move.partition)
    replay = replay_ledger(
        nodes,
        allocations,
        T,
        [m.as_json() for m in result.moves],
        shapes,
        min_remaining_s=options.min_remaining_s,
        partition_of=partition_of,
    )
    for name, snapshot, counts in (
        ("before", result.before, replay.before),
        ("after", result.after, replay.after),
    ):
        assert (snapshot.free_nodes, snapshot.partial_nodes) == (
            counts.free_nodes,
            counts.partial_nodes,
        ), name
        assert tuple(n for _, n in snapshot.instances) == counts.instances, name
    assert result.after.free_nodes <= result.bound_free_nodes
    assert result.before.free_nodes <= result.after.free_nodes
    for (_, before), (_, after) in zip(
        result.before.instances, result.after.instances, strict=True
    ):
        assert after >= before
    assert sorted(replay.allocations["node_id"].to_list()) == sorted(
        result.allocations["node_id"].to_list()
    )
    assert [m.step for m in result.moves] == list(range(1, len(result.moves) + 1))


def ledger(result: CompactionResult) -> list[tuple[str, str, str]]:
    return [(m.alloc_id, m.source, m.destination) for m in result.moves]


# ------------------------------------------------------------------ hand-worked chains

# 4-GPU nodes with 64 CPUs in one domain. Pinned work ends within the hour, so it stays.
# x: a (2 GPUs, 40 CPUs). y: pinned 2 + b (1), 1 GPU free. z: pinned 2 GPUs and
# 40 CPUs, so 2 GPUs but only 24 CPUs free.
# Depth 1: a fits nowhere (y lacks a GPU, z CPUs), and b cannot complete any
# node (no partial node has exactly 1 GPU free but its own y). Depth 2: eject b
# from y to z, then a takes y's 2 freed GPUs: x is free.
DEPTH2_NODES = make_nodes(("x", 4, "s"), ("y", 4, "s"), ("z", 4, "s"))
DEPTH2 = make_allocations(
    ("a", "x", 2, None, None, 40.0), ("b", "y", 1, None, None, 8.0),
    ("py", "y", 2, SOON, None, 8.0), ("pz", "z", 2, SOON, None, 40.0),
)  # fmt: skip


def test_depth_one_cannot_free_a_node_and_depth_two_can() -> None:
    shallow = run(DEPTH2_NODES, DEPTH2, depth=1)
    assert shallow.moves == ()
    assert "depth" in shallow.partitions[0].budgets_hit
    deep = run(DEPTH2_NODES, DEPTH2, depth=2)
    assert ledger(deep) == [("b", "y", "z"), ("a", "x", "y")]  # make-before-break order
    assert (deep.before.free_nodes, deep.before.partial_nodes) == (0, 3)
    assert (deep.after.free_nodes, deep.after.partial_nodes) == (1, 1)
    assert deep.bound_free_nodes == 1
    assert deep.migration.freed_gpus == 4


# 4-GPU nodes with 64 CPUs. x: a (3 GPUs, 34 CPUs). y: pinned 1 GPU + b (2 GPUs,
# 32 CPUs). z: pinned 2 GPUs + c (1 GPU, 31 CPUs). w: pinned 2 GPUs and 33 CPUs.
# a needs y without b; b needs z without c (CPUs); c goes to w: a chain of 3
# moves. No allocation exactly completes a partial node (CPUs), so depth 2 moves
# nothing at all.
DEPTH3_NODES = make_nodes(("x", 4, "s"), ("y", 4, "s"), ("z", 4, "s"), ("w", 4, "s"))
DEPTH3 = make_allocations(
    ("a", "x", 3, None, None, 34.0),
    ("b", "y", 2, None, None, 32.0), ("py", "y", 1, SOON, None, 4.0),
    ("c", "z", 1, None, None, 31.0), ("pz", "z", 2, SOON, None, 2.0),
    ("pw", "w", 2, SOON, None, 33.0),
)  # fmt: skip


def test_depth_two_cannot_free_a_node_and_depth_three_can() -> None:
    assert run(DEPTH3_NODES, DEPTH3, depth=2).moves == ()
    deep = run(DEPTH3_NODES, DEPTH3, depth=3)
    assert ledger(deep) == [("c", "z", "w"), ("b", "y", "z"), ("a", "x", "y")]
    assert (deep.before.free_nodes, deep.after.free_nodes, deep.bound_free_nodes) == (0, 1, 1)
    assert deep.before.partial_nodes == 4 and deep.after.partial_nodes == 1


def test_a_full_fleet_gives_an_empty_ledger() -> None:
    nodes = make_nodes(("n1", 8, "s"), ("n2", 8, "s"), ("n3", 4, None))
    allocations = make_allocations(
        ("a", "n1", 8), ("b", "n2", 4), ("c", "n2", 4), ("d", "n3", 2), ("e", "n3", 1.5),
        ("f", "n3", 0.5),
    )  # fmt: skip
    result = run(nodes, allocations, (make_shape("H20", 1),))
    assert result.moves == ()
    assert result.before == result.after
    assert (result.after.free_nodes, result.after.partial_nodes, result.bound_free_nodes) == (
        0,
        0,
        0,
    )
    assert result.migration.payback_s is None


def test_gangs_stay_in_their_switch_domain() -> None:
    # g1 and g2 are one job: g1 on x (domain s1) could only go to y in s2 (and
    # y1 does not fit x). A single allocation in the same place moves.
    nodes = make_nodes(("x", 4, "s1"), ("w", 8, "s1"), ("y", 8, "s2"))
    gang = make_allocations(
        ("g1", "x", 2, None, "job"), ("g2", "w", 8, None, "job"), ("y1", "y", 4)
    )
    assert run(nodes, gang).moves == ()
    single = gang.with_columns(pl.col("alloc_id").alias("job_id"))
    assert ledger(run(nodes, single)) == [("g1", "x", "y")]


def test_work_ending_soon_unhealthy_nodes_and_other_models_stay() -> None:
    nodes = make_nodes(
        ("x", 8, "s"), ("y", 8, "s"), ("c", 8, "s", "H20", "cordoned"), ("l", 8, "s", "L20")
    )
    allocations = make_allocations(("a", "x", 2, SOON), ("b", "y", 4), ("u", "c", 1), ("v", "l", 2))
    result = run(nodes, allocations)
    # x's work ends soon, so y (4 GPUs) is emptied onto... nothing: x is pinned but
    # has room for b: b moves to x and frees y.
    assert ledger(result) == [("b", "y", "x")]
    assert (result.before.free_nodes, result.after.free_nodes) == (0, 1)
    assert run(nodes, allocations, min_remaining_s=0).after.free_nodes == 1
    # the cordoned node is neither counted nor used; the L20 node is alone in its partition
    assert [p.gpu_model for p in result.partitions] == ["H20", "L20"]


def test_shares_pack_per_gpu() -> None:
    # x: 0.5; y: 7 + 0.5 (its last GPU half full). x's share fits y's half GPU.
    # z: 7 + 0.75 cannot take it (0.25 left, and no whole GPU free).
    nodes = make_nodes(("x", 8, "s"), ("y", 8, "s"), ("z", 8, "s"))
    allocations = make_allocations(
        ("a", "x", 0.5), ("b", "y", 7.0), ("c", "y", 0.5), ("d", "z", 7.0), ("e", "z", 0.75)
    )
    result = run(nodes, allocations, (make_shape("H20", 0.25),))
    assert ledger(result) == [("a", "x", "y")]
    assert result.after.free_nodes == 1


def test_cpus_and_memory_bound_destinations() -> None:
    nodes = make_nodes(
        ("x", 8, "s", "H20", "healthy", 64.0, 100.0), ("y", 8, "s", "H20", "healthy", 64.0, 100.0)
    )
    tight = make_allocations(
        ("a", "x", 1, None, None, 8.0, 60.0), ("b", "y", 4, None, None, 8.0, 50.0)
    )
    assert run(nodes, tight).moves == ()  # 110 GiB > 100
    roomy = make_allocations(
        ("a", "x", 1, None, None, 8.0, 40.0), ("b", "y", 4, None, None, 8.0, 50.0)
    )
    assert ledger(run(nodes, roomy)) == [("a", "x", "y")]


def test_destinations_prefer_the_fullest_domain_on_a_tie() -> None:
    # a (1 GPU) on x can go to p (domain s1, 4 of 16 GPUs used) or q (s2, 12 of 16);
    # both are left with 4 free GPUs: the fuller domain s2 wins.
    nodes = make_nodes(
        ("x", 8, "s0"), ("p", 8, "s1"), ("p2", 8, "s1"), ("q", 8, "s2"), ("q2", 8, "s2")
    )
    allocations = make_allocations(
        ("a", "x", 1), ("pa", "p", 3, SOON), ("qa", "q", 3, SOON), ("qb", "q2", 8, SOON)
    )
    assert ledger(run(nodes, allocations))[0] == ("a", "x", "q")


def test_instances_never_fall_even_to_free_a_node() -> None:
    # x: a (1 GPU) and a CPU-only hog of 60 CPUs; y: b (4 GPUs, 8 CPUs; it cannot
    # go to x for CPUs). Emptying x onto y frees a node, but a 4-GPU x 16-CPU
    # shape loses y's one slot and gains nothing on x (its CPUs stay taken).
    nodes = make_nodes(("x", 8, "s"), ("y", 8, "s"))
    allocations = make_allocations(
        ("a", "x", 1), ("b", "y", 4, None, None, 8.0), ("hog", "x", 0, None, None, 60.0)
    )
    plain = run(nodes, allocations)
    assert ledger(plain) == [("a", "x", "y")]
    guarded = run(nodes, allocations, (make_shape("H20", 4, cpus_per_gpu=4),))
    assert guarded.moves == ()
    assert [n for _, n in guarded.after.instances] == [1]


def test_rounds_and_depth_budgets_are_reported() -> None:
    result = run(DEPTH3_NODES, DEPTH3, depth=2)
    assert "depth" in result.partitions[0].budgets_hit
    assert "depth" not in run(DEPTH2_NODES, DEPTH2, depth=2).partitions[0].budgets_hit


def test_partitions_hold_whole_domains() -> None:
    nodes = make_nodes(*[(f"n{i}", 8, f"s{i // 3}") for i in range(9)], ("solo", 8))
    allocations = make_allocations(*[(f"a{i}", f"n{i}", 1 + i % 4) for i in range(9)])
    result = run(nodes, allocations, partition_nodes=4)
    # switch-less nodes come first: solo and s0 share one
    assert [p.nodes for p in result.partitions] == [4, 3, 3]
    domain = {f"n{i}": i // 3 for i in range(9)} | {"solo": 0}
    for move in result.moves:
        assert domain[move.source] == domain[move.destination]
    whole = run(nodes, allocations, partition_nodes=500)
    assert len(whole.partitions) == 1
    assert whole.after.free_nodes >= result.after.free_nodes


def test_migration_cost_adds_up() -> None:
    result = run(DEPTH2_NODES, DEPTH2, depth=2, state_gib_per_gpu=10, bandwidth_gbps=8, warmup_s=30)
    gib_bits = 8 * 1024**3 / 1e9
    # b (1 GPU): 10 GiB; a (2 GPUs): 20 GiB
    transfer_b, transfer_a = 10 * gib_bits / 8, 20 * gib_bits / 8
    assert result.migration.transfer_s == pytest.approx(transfer_a + transfer_b)
    pause = 1 * (transfer_b + 30) + 2 * (transfer_a + 30)
    assert result.migration.pause_gpu_hours == pytest.approx(pause / 3600)
    assert result.migration.payback_s == pytest.approx(pause / 4)


def test_options_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError, match="depth"):
        compact(DEPTH2_NODES, DEPTH2, T, (), CompactionOptions(depth=0))
    with pytest.raises(ValueError, match="bandwidth"):
        compact(DEPTH2_NODES, DEPTH2, T, (), CompactionOptions(bandwidth_gbps=0))


def test_inputs_are_not_mutated() -> None:
    nodes, allocations = DEPTH2_NODES.clone(), DEPTH2.clone()
    run(DEPTH2_NODES, DEPTH2, depth=2)
    assert nodes.equals(DEPTH2_NODES) and allocations.equals(DEPTH2)


# ------------------------------------------------------------------ the replay rejects


@pytest.mark.parametrize(
    ("move", "reason"),
    [
        (("a", "x", "z", 2, 40), "z cannot hold a's CPUs"),
        (("a", "y", "z", 2, 40), "a is on x, not on y"),
        (("py", "y", "x", 2, 8), "ends within"),
        (("nope", "x", "y", 1, 1), "not an allocation active"),
        (("a", "x", "x", 2, 40), "its own node"),
        (("a", "x", "l", 2, 40), "different GPU models"),
        (("a", "x", "c", 2, 40), "c is not healthy"),
        (("a", "x", "y", 3, 40), "gpus 3 is not"),
        (("a", "x", "y", 2, 40), "y cannot hold a's GPUs"),
    ],
)
def test_replay_refuses_a_broken_step(move: tuple[Any, ...], reason: str) -> None:
    nodes = DEPTH2_NODES.vstack(make_nodes(("l", 4, "s", "L20"), ("c", 4, "s", "H20", "down")))
    alloc_id, source, target, gpus, cpus = move
    entry = {"alloc_id": alloc_id, "from": source, "to": target, "gpus": gpus, "cpus": cpus,
             "memory_gib": None}  # fmt: skip
    with pytest.raises(LedgerError, match=reason):
        replay_ledger(nodes, DEPTH2, T, [entry], min_remaining_s=3600)


def test_replay_refuses_a_gang_leaving_its_domain() -> None:
    nodes = make_nodes(("x", 8, "s1"), ("w", 8, "s1"), ("y", 8, "s2"))
    gang = make_allocations(("g1", "x", 2, None, "job"), ("g2", "w", 8, None, "job"))
    move = {"alloc_id": "g1", "from": "x", "to": "y", "gpus": 2, "cpus": 1, "memory_gib": None}
    with pytest.raises(LedgerError, match="leaves its domain switch s1"):
        replay_ledger(nodes, gang, T, [move])


def test_replay_checks_make_before_break_in_ledger_order() -> None:
    # a then b (the wrong order) needs y before b left it
    entries = [
        {"alloc_id": "a", "from": "x", "to": "y", "gpus": 2, "cpus": 40, "memory_gib": None},
        {"alloc_id": "b", "from": "y", "to": "z", "gpus": 1, "cpus": 8, "memory_gib": None},
    ]
    with pytest.raises(LedgerError, match="step 1: y cannot hold"):
        replay_ledger(DEPTH2_NODES, DEPTH2, T, entries)
    replay = replay_ledger(DEPTH2_NODES, DEPTH2, T, entries[::-1])
    assert (replay.after.free_nodes, replay.after.partial_nodes) == (1, 1)


# ------------------------------------------------------------------ properties

SIZES = (0.25, 0.5, 1.0, 1.0, 2.0, 2.0, 3.0, 4.0)  # power-of-two shares: FFD packs optimally


@st.composite
def fleets(draw: st.DrawFn, max_nodes: int = 7) -> tuple[pl.DataFrame, pl.DataFrame]:
    count = draw(st.integers(2, max_nodes))
    node_rows = []
    alloc_rows: list[tuple[Any, ...]] = []
    for i in range(count):
        gpus = draw(st.sampled_from([4, 8]))
        switch = draw(st.sampled_from(["s1", "s2", None]))
        model = draw(st.sampled_from(["H20", "H20", "A10"]))
        health = draw(st.sampled_from(["healthy"] * 5 + ["down"]))
        node_rows.append((f"n{i}", gpus, switch, model, health, 32.0, 256.0))
        left = gpus
        for j in range(draw(st.integers(0, 3))):
            size = draw(st.sampled_from([s for s in SIZES if s <= left] or [0.25]))
            if size > left:
                break
            left -= int(size) if size >= 1 else 0
            end = draw(st.sampled_from([None, None, None, SOON]))
            job = draw(st.sampled_from([None, None, "gang"]))
            cpus = float(draw(st.integers(0, 8)))
            alloc_rows.append((f"a{i}_{j}", f"n{i}", size, end, job, cpus, 16.0))
    allocations = make_allocations(*alloc_rows) if alloc_rows else make_allocations(("z", "n0", 0))
    # drop what FFD cannot hold (several shares may need more GPUs than whole parts left)
    return make_nodes(*node_rows), _fit(make_nodes(*node_rows), allocations)


def _fit(nodes: pl.DataFrame, allocations: pl.DataFrame) -> pl.DataFrame:
    caps = dict(nodes.select("node_id", "gpus").iter_rows())
    kept: list[dict[str, Any]] = []
    held: dict[str, list[int]] = {}
    for row in allocations.iter_rows(named=True):
        units = held.setdefault(row["node_id"], [])
        trial = [*units, round(row["gpus"] * SHARE_UNITS)]
        whole = sum(u // SHARE_UNITS for u in trial)
        shares = len(first_fit_decreasing(u % SHARE_UNITS for u in trial if u % SHARE_UNITS))
        if whole + shares <= caps[row["node_id"]]:
            units.append(trial[-1])
            kept.append(row)
    return pl.DataFrame(kept, schema=allocations.schema)


SHAPES = (make_shape("H20", 1), make_shape("H20|A10", 8, 4), make_shape(None, 0.5))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets(), st.integers(1, 3))
def test_random_fleets_give_valid_ledgers_within_the_bound(fleet, depth) -> None:
    nodes, allocations = fleet
    run(nodes, allocations, SHAPES, depth=depth)  # run() replays and checks every ledger


def brute_force_free_nodes(nodes: pl.DataFrame, allocations: pl.DataFrame) -> int:
    """The most free nodes over every assignment of the movable allocations (SPEC rules)."""
    node_rows = {r["node_id"]: r for r in nodes.iter_rows(named=True)}
    healthy = [n for n, r in node_rows.items() if r["health"] == "healthy" and r["gpus"] > 0]
    rows = allocations.filter(pl.col("node_id").is_in(healthy)).to_dicts()
    jobs: dict[str, int] = {}
    for r in allocations.to_dicts():
        jobs[r["job_id"]] = jobs.get(r["job_id"], 0) + 1
    movable = [r for r in rows if r["gpus"] > 0 and r["end_time"] is None]
    fixed = [r for r in rows if r not in movable]

    def domain(n: str) -> str:
        return node_rows[n]["switch_id"] or n

    choices = []
    for r in movable:
        src = node_rows[r["node_id"]]
        choices.append(
            [
                n for n in healthy
                if node_rows[n]["gpu_model"] == src["gpu_model"]
                and (jobs[r["job_id"]] == 1 or domain(n) == domain(r["node_id"]))
            ]
        )  # fmt: skip
    best = -1
    for assignment in itertools.product(*choices):
        held: dict[str, list[dict[str, Any]]] = {n: [] for n in healthy}
        for r in fixed:
            held[r["node_id"]].append(r)
        for r, n in zip(movable, assignment, strict=True):
            held[n].append(r)
        ok = True
        for n, items in held.items():
            units = [round(r["gpus"] * SHARE_UNITS) for r in items]
            whole = sum(u // SHARE_UNITS for u in units)
            shares = len(first_fit_decreasing(u % SHARE_UNITS for u in units if u % SHARE_UNITS))
            if (
                whole + shares > node_rows[n]["gpus"]
                or sum(r["cpus"] for r in items) > node_rows[n]["cpus"]
            ):
                ok = False
                break
        if ok:
            free = sum(1 for n in healthy if not any(r["gpus"] > 0 for r in held[n]))
            best = max(best, free)
    return best


@pytest.mark.parametrize("seed", range(12))
def test_exact_mode_equals_brute_force_on_tiny_fleets(seed: int) -> None:
    rng = random.Random(seed)
    node_rows = [
        (f"n{i}", rng.choice([4, 8]), rng.choice(["s1", "s2"]), rng.choice(["H20", "H20", "A10"]))
        for i in range(rng.randint(3, 5))
    ]
    nodes = make_nodes(*[(*r, "healthy", 32.0) for r in node_rows])
    alloc_rows = []
    for i, (node_id, gpus, _, _) in enumerate(node_rows):
        for j in range(rng.randint(0, 2)):
            size = rng.choice([s for s in SIZES if s <= gpus / 2])
            end = SOON if rng.random() < 0.15 else None
            job = "gang" if rng.random() < 0.2 else None
            alloc_rows.append((f"a{i}_{j}", node_id, size, end, job, float(rng.randint(1, 12))))
    allocations = _fit(nodes, make_allocations(*alloc_rows, ("z", "n0", 0)))
    best = brute_force_free_nodes(nodes, allocations)
    # the ILP alone, without the search's cuts
    solved = [_exact(p) for p in _partitions(nodes, allocations, T, (), CompactionOptions())]
    assert all(status == "optimal" for _, status, _ in solved)
    assert sum(free or 0 for free, _, _ in solved) == best
    result = run(nodes, allocations, exact=True)
    assert all(p.exact_status in ("optimal", "bound") for p in result.partitions)
    assert sum(p.exact_free or 0 for p in result.partitions) == best
    assert result.after.free_nodes <= best <= result.bound_free_nodes


def test_exact_mode_leaves_large_partitions_alone() -> None:
    result = run(DEPTH3_NODES, DEPTH3, exact=True, exact_nodes=3)
    assert [(p.exact_status, p.exact_free) for p in result.partitions] == [("too_large", None)]
    # the search meets the bound: that proves it optimal without the ILP, which agrees
    solved = run(DEPTH3_NODES, DEPTH3, exact=True)
    assert [(p.exact_status, p.exact_free) for p in solved.partitions] == [("bound", 1)]
    (part,) = _partitions(DEPTH3_NODES, DEPTH3, T, (), CompactionOptions())
    assert _exact(part)[:2] == (1, "optimal")
    shallow = run(DEPTH3_NODES, DEPTH3, exact=True, depth=2)
    assert [(p.exact_status, p.exact_free, p.after_free) for p in shallow.partitions] == [
        ("optimal", 1, 0)
    ]


# ------------------------------------------------------------------ the command


def _invoke(*args: str):
    from typer.testing import CliRunner

    from fleetaudit.cli import app

    return CliRunner().invoke(app, list(args))


@pytest.fixture
def tiny_db(tiny_dir, db_path):
    assert _invoke("ingest", str(tiny_dir), "--db", str(db_path)).exit_code == 0
    return db_path


def test_cli_json_is_the_spec_document_its_ledger_replays_and_the_run_is_recorded(tiny_db) -> None:
    import json

    from fleetaudit import api
    from fleetaudit.api import load_frames, reading

    result = _invoke("whatif", "compaction", "--db", str(tiny_db), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["schema"] == "fleetaudit.compaction/1"
    for key in ("at", "partitions", "seconds", "moves", "before", "after", "bound", "budgets_hit"):
        assert key in doc
    assert doc["at"] == "2026-01-02T01:00:00Z" and doc["partitions"] == 2  # H20 and A10
    # by hand, at 01:00 (a3 and a5 have ended): n1 holds 3 + 0.5 GPUs (4 occupied)
    # and 28 CPUs; a8 (1 GPU, 8 CPUs, from n6), then a6 (2 GPUs, 16 CPUs, from n4)
    # fit it, so n6 and n4 join n3 and n7 (A10) as free nodes
    assert [(m["alloc_id"], m["from"], m["to"]) for m in doc["moves"]] == [
        ("a8", "n6", "n1"),
        ("a6", "n4", "n1"),
    ]
    assert (doc["before"]["free_nodes"], doc["after"]["free_nodes"]) == (2, 4)
    assert doc["after"]["free_nodes"] <= doc["bound"]["free_nodes"] == 4
    shapes = [make_shape(**e["shape"]) for e in doc["before"]["instances"]]
    with reading(api.StoreOptions(tiny_db)) as store:
        nodes, allocations = load_frames(store, T - timedelta(days=30), T + timedelta(days=30))
    at = datetime(2026, 1, 2, 1)
    replay = replay_ledger(nodes, allocations, at, doc["moves"], shapes, min_remaining_s=3600)
    for side in ("before", "after"):
        counts = getattr(replay, side)
        assert (counts.free_nodes, counts.partial_nodes) == (
            doc[side]["free_nodes"], doc[side]["partial_nodes"],
        )  # fmt: skip
        assert list(counts.instances) == [e["instances"] for e in doc[side]["instances"]]
    with reading(api.StoreOptions(tiny_db)) as store:
        recorded = api.latest_whatif_runs(store)["compaction"]
    assert recorded.document == doc
    # the terminal run is recorded too (its options tell it apart)
    terminal = _invoke("whatif", "compaction", "--db", str(tiny_db), "--depth", "2")
    assert terminal.exit_code == 0, terminal.output
    assert "free nodes" in terminal.stdout and "partially occupied nodes" in terminal.stdout
    with reading(api.StoreOptions(tiny_db)) as store:
        recorded = api.latest_whatif_runs(store)["compaction"]
    assert recorded.options["depth"] == 2 and recorded.document["options"]["depth"] == 2


def test_cli_save_as_keeps_the_compacted_state_for_shapes(tiny_db) -> None:
    import json

    shape = ("--model", "H20", "--gpus", "8", "--cpus-per-gpu", "8")
    result = _invoke(
        "whatif", "compaction", "--db", str(tiny_db), *shape, "--save-as", "packed", "--json"
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["saved_as"] == "packed"
    before, after = (
        doc["before"]["instances"][0]["instances"],
        doc["after"]["instances"][0]["instances"],
    )
    assert (before, after) == (1, 3)

    def instances(*extra: str) -> int:
        out = _invoke("shapes", "--db", str(tiny_db), *shape, "--json", *extra)
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)["shapes"][0]["instances"]

    assert instances() == before
    assert instances("--scenario", "packed") == after
    # compacting the compacted scenario finds nothing more to gain
    again = _invoke("whatif", "compaction", "--db", str(tiny_db), "--scenario", "packed", "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["after"]["free_nodes"] == doc["after"]["free_nodes"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--depth", "0"), "--depth: must be 1 or more"),
        (("--partition-nodes", "0"), "--partition-nodes: must be 1 or more"),
        (("--bandwidth-gbps", "0"), "--bandwidth-gbps: must be above 0"),
        (("--min-remaining", "soon"), "--min-remaining"),
        (("--scenario", "nope"), "--scenario: no scenario named 'nope'"),
        (("--model", "B200", "--gpus", "8"), "no node has model B200"),
        (("--model", "H20"), "--model needs --gpus"),
    ],
)
def test_cli_errors_are_one_line_and_exit_2(tiny_db, args, message) -> None:
    result = _invoke("whatif", "compaction", "--db", str(tiny_db), *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("fleetaudit: error: ") and message in result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output


@pytest.mark.slow
def test_generated_fleet_in_processes_equals_in_process_and_replays(tmp_path) -> None:
    """A generated fleet above the process threshold: the same ledger with 1 or 2 workers."""
    from fleetaudit.inputs.generate import GenerateOptions, generate_fleet

    out = tmp_path / "fleet"
    generate_fleet(out, GenerateOptions(nodes=1_200, days=1.0, telemetry_days=0))
    nodes = pl.read_parquet(out / "nodes.parquet")
    allocations = pl.read_parquet(out / "allocations.parquet")
    at = datetime(2026, 5, 1)
    shapes = (make_shape("H20", 8, cpus_per_gpu=8), make_shape(None, 16, 8))
    serial = compact(nodes, allocations, at, shapes, CompactionOptions(jobs=1))
    parallel = compact(nodes, allocations, at, shapes, CompactionOptions(jobs=2))
    assert serial.moves == parallel.moves and serial.after == parallel.after
    assert len(serial.partitions) > 1 and serial.moves
    assert serial.after.partial_nodes < serial.before.partial_nodes
    replay = replay_ledger(
        nodes, allocations, at, [m.as_json() for m in serial.moves], shapes, min_remaining_s=3600
    )
    assert (replay.after.free_nodes, replay.after.partial_nodes) == (
        serial.after.free_nodes, serial.after.partial_nodes,
    )  # fmt: skip
    assert replay.after.instances == tuple(n for _, n in serial.after.instances)
    assert serial.after.free_nodes <= serial.bound_free_nodes


def test_whatif_compaction_has_help() -> None:
    result = _invoke("whatif", "compaction", "--help")
    assert result.exit_code == 0, result.output
    assert "in-place compaction" in result.stdout
    for option in ("--depth", "--rounds", "--partition-nodes", "--jobs", "--min-remaining",
                   "--state-gib-per-gpu", "--bandwidth-gbps", "--warmup", "--exact",
                   "--save-as", "--model", "--shapes"):  # fmt: skip
        assert option in result.stdout


def test_the_partition_rows_carry_every_field_of_a_partition() -> None:
    """The Arrow rows that ship partitions to Spark executors hold the whole partition
    (a field added to the partition and not to the rows broke --engine spark)."""
    from dataclasses import fields

    from fleetaudit.whatif.compaction import PARTITION_SCHEMA, _Partition

    assert set(PARTITION_SCHEMA.names) == {f.name for f in fields(_Partition)}


def _compaction_flags() -> set[str]:
    import typer

    from fleetaudit.cli import app

    group = typer.main.get_command(app)
    command = group.commands["whatif"].commands["compaction"]  # type: ignore[attr-defined]
    return {opt for param in command.params for opt in param.opts}


def test_every_flag_an_options_error_names_exists_on_the_command() -> None:
    from fleetaudit.api.compaction_api import _FLAGS

    flags = _compaction_flags()
    assert {"--depth", "--rounds", "--jobs", "--warmup"} <= flags  # the command was found
    assert sorted(f for f in _FLAGS.values() if f not in flags) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"depth": 0}, "--depth: must be 1 or more"),
        ({"warmup_s": -1.0}, "--warmup: must be 0 or more"),
        ({"bandwidth_gbps": 0.0}, "--bandwidth-gbps: must be above 0"),
        # no flag sets these (API callers only): the error names the field
        ({"breadth": 0}, "breadth: must be 1 or more"),
        ({"exact_nodes": 0}, "exact_nodes: must be 1 or more"),
        ({"exact_time_limit_s": -1.0}, "exact_time_limit_s: must be 0 or more"),
    ],
)
def test_an_options_error_names_what_the_caller_can_change(
    change: dict[str, Any], message: str
) -> None:
    from dataclasses import replace

    from fleetaudit.api.compaction_api import CompactionRun, _checked
    from fleetaudit.core.errors import UsageError

    run = CompactionRun(jobs=1, options=replace(CompactionOptions(), **change))
    with pytest.raises(UsageError) as caught:
        _checked(run)
    assert str(caught.value) == message
