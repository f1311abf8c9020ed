"""The capacity model: hand-worked nodes and shapes, its three forms against each
other, and the engines reading one node the same way."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetaudit.model.capacity import (
    SHARE_UNITS,
    UNBOUNDED,
    Pod,
    first_fit_decreasing,
    free_units,
    gang_instances,
    node_arrays,
    node_index,
    node_slots,
    node_slots_at,
    packed_fills,
    share_room,
    slot_exprs,
    slots_array,
    to_quantity,
    units_of,
    usable,
)
from fleetaudit.model.shapes import make_shape

U = SHARE_UNITS


# ------------------------------------------------------------------ hand-worked


@pytest.mark.parametrize(
    ("sizes", "fills"),
    [
        ([], ()),
        ([500_000, 500_000], (1_000_000,)),
        # 0.6 opens a GPU, 0.5 a second, 0.4 joins the first, 0.5 the second
        ([400_000, 500_000, 600_000, 500_000], (1_000_000, 1_000_000)),
        # 0.7, 0.7 need two GPUs; 0.3 fills the first
        ([300_000, 700_000, 700_000], (1_000_000, 700_000)),
        # decreasing order matters: 0.2 x3 then 0.5 x2 packs as 0.5+0.5, 0.2 x3
        ([200_000] * 3 + [500_000] * 2, (1_000_000, 600_000)),
    ],
)
def test_packed_fills_by_hand(sizes: list[int], fills: tuple[int, ...]) -> None:
    assert packed_fills(sizes) == fills
    assert sorted(first_fit_decreasing(sizes), reverse=True) == list(fills)


@pytest.mark.parametrize(
    ("shape", "pod"),
    [
        (make_shape("H20", 8, cpus_per_gpu=16), Pod(0, 8, 128 * U, 0)),
        (make_shape("H20", 32, gpus_per_pod=8, memory_gib_per_gpu=64), Pod(0, 8, 0, 512 * U)),
        (make_shape("H20", 0.25, cpus_per_gpu=4), Pod(250_000, 0, 1 * U, 0)),
    ],
)
def test_pod_of_shape(shape: object, pod: Pod) -> None:
    assert Pod.of(shape) == pod  # type: ignore[arg-type]


# (pod, free GPUs over W, free CPUs, free memory, fills, free GPUs at t, over) -> slots
SLOT_CASES = [
    # 8 free GPUs take two 4-GPU pods; 24 cores take one pod of 16
    (Pod(0, 4, 16 * U, 0), 8, 24 * U, None, (), None, False, 1),
    # no CPU need: GPUs decide; unknown memory is unbounded
    (Pod(0, 4, 0, 64 * U), 8, 0, UNBOUNDED, (), None, False, 2),
    # memory decides: 100 GiB free, 64 GiB a pod
    (Pod(0, 4, 0, 64 * U), 8, 0, 100 * U, (), None, False, 1),
    # share 0.3: one free GPU (3) + GPUs filled 0.7 (1) and 0.5 (1)
    (Pod(300_000, 0, 0, 0), 1, None, None, (700_000, 500_000), 1, False, 5),
    # something starts in W (free now 2, over W 1): the partly filled GPUs take nothing
    (Pod(300_000, 0, 0, 0), 1, None, None, (700_000, 500_000), 2, False, 3),
    # over-committed node: the partly filled GPUs take nothing
    (Pod(300_000, 0, 0, 0), 1, None, None, (700_000, 500_000), 1, True, 3),
    # share pods also need CPUs: 2.5 cores free, 1 a pod
    (Pod(250_000, 0, U, 0), 1, 2_500_000, None, (), 1, False, 2),
]


@pytest.mark.parametrize(
    ("pod", "free_window", "cpus", "memory", "fills", "free_now", "over", "slots"), SLOT_CASES
)
def test_node_slots_by_hand(
    pod: Pod,
    free_window: int,
    cpus: int | None,
    memory: int | None,
    fills: tuple[int, ...],
    free_now: int | None,
    over: bool,
    slots: int,
) -> None:
    got = node_slots(pod, free_window, cpus, memory, fills=fills, free_gpus=free_now, over=over)
    assert got == slots


def test_unbounded_is_one_value() -> None:
    assert units_of(None) == units_of(float("inf")) == UNBOUNDED
    assert to_quantity(UNBOUNDED) == float("inf")
    assert free_units(UNBOUNDED, 10**12) == UNBOUNDED
    # a pod that needs no CPU has unbounded CPU slots, the same value
    out = slots_array(Pod(0, 1, 0, 0), np.array([3]), np.array([0]), np.array([0]))
    assert out["cpu_slots"] == UNBOUNDED
    # a few unbounded amounts add up within int64
    assert 2 * UNBOUNDED - 1 <= np.iinfo(np.int64).max


def test_gang_instances() -> None:
    assert gang_instances(11, 4) == (2, 3)
    assert gang_instances(3, 4) == (0, 3)


def test_share_room_reads_over_and_steady() -> None:
    assert share_room(250_000, [1_000_000, 500_000, 250_000]) == 5
    assert share_room(250_000, [500_000], over=True) == 0
    assert share_room(250_000, [500_000], steady=False) == 0


def test_node_index_null_health_is_usable_and_unknown_memory_unbounded() -> None:
    nodes = pl.DataFrame(
        {
            "node_id": ["n2", "n1", "n3"],
            "gpu_model": ["H20"] * 3,
            "gpus": [8, 8, 4],
            "cpus": [64.0, 64.0, 32.0],
            "memory_gib": [None, 256.0, 128.0],
            "switch_id": ["n1", None, "n1"],
            "health": [None, "healthy", "cordoned"],
        }
    )
    index = node_index(nodes)
    assert index["node_id"].to_list() == ["n1", "n2", "n3"]
    assert index["usable"].to_list() == [True, True, False]
    assert index["memory_u"].to_list() == [256 * U, UNBOUNDED, 128 * U]
    # node n1 (no switch) and switch n1 are two domains
    assert index["domain"].to_list() == ["node n1", "switch n1", "switch n1"]
    arrays = node_arrays(nodes)
    assert arrays.usable.tolist() == [True, True, False]
    assert [usable(h) for h in nodes["health"].to_list()] == [True, True, False]


def test_node_index_without_optional_columns() -> None:
    nodes = pl.DataFrame(
        {"node_id": ["b", "a"], "gpu_model": ["H20"] * 2, "gpus": [4, 8], "cpus": [4.0, 8.0]}
    )
    index = node_index(nodes)
    assert index.height == 2
    assert index.row(0, named=True) == {
        "node": 0, "node_id": "a", "gpu_model": "H20", "domain": "node a",
        "block_domain": "node a", "usable": True, "gpus": 8, "cpus_u": 8 * U,
        "memory_u": UNBOUNDED,
    }  # fmt: skip


# ------------------------------------------------- the three forms of one rule


@st.composite
def _nodes_and_pod(draw: st.DrawFn) -> tuple[Pod, list[dict[str, object]]]:
    share = draw(st.sampled_from([0, 100_000, 250_000, 300_000, 500_000, 700_000]))
    pod = Pod(
        share=share,
        gpus=0 if share else draw(st.sampled_from([1, 2, 4, 8])),
        cpus=draw(st.sampled_from([0, 500_000, 4 * U, 16 * U])),
        memory=draw(st.sampled_from([0, U, 64 * U])),
    )
    rows = []
    for _ in range(draw(st.integers(1, 8))):
        gpus = draw(st.integers(0, 8))
        fills = sorted(
            draw(st.lists(st.integers(1, 100).map(lambda x: x * 10_000), max_size=4)),
            reverse=True,
        )
        used = draw(st.integers(0, gpus + 2))
        free_now = max(gpus - used - len(fills), 0)
        rows.append(
            {
                "free_gpus": free_now,
                "free_gpus_window": draw(st.integers(0, free_now)),
                # CPUs and memory in micro-units, as the engines hold them
                "cpus": draw(st.integers(0, 64 * U)),
                "memory": draw(st.one_of(st.none(), st.integers(0, 512 * U))),
                "fills": fills,
                "over": used + len(fills) > gpus,
            }
        )
    return pod, rows


@settings(max_examples=150, deadline=None)
@given(_nodes_and_pod())
def test_frame_array_and_python_forms_agree(case: tuple[Pod, list[dict[str, object]]]) -> None:
    pod, rows = case
    expected = [
        node_slots(
            pod,
            r["free_gpus_window"],  # type: ignore[arg-type]
            r["cpus"],  # type: ignore[arg-type]
            r["memory"],  # type: ignore[arg-type]
            fills=r["fills"],  # type: ignore[arg-type]
            free_gpus=r["free_gpus"],  # type: ignore[arg-type]
            over=bool(r["over"]),
        )
        for r in rows
    ]
    # the frame form: quantities as node_state holds them (Float64, null memory unknown)
    state = pl.DataFrame(
        {
            "free_gpus": [r["free_gpus"] for r in rows],
            "free_gpus_window": [r["free_gpus_window"] for r in rows],
            "free_cpus_window": [to_quantity(r["cpus"]) for r in rows],  # type: ignore[arg-type]
            "free_memory_gib_window": [
                None if r["memory"] is None else to_quantity(r["memory"])  # type: ignore[arg-type]
                for r in rows
            ],
            "share_fills": [[f / U for f in r["fills"]] for r in rows],  # type: ignore[attr-defined]
            "over": [r["over"] for r in rows],
        },
        schema_overrides={
            "free_memory_gib_window": pl.Float64,
            "share_fills": pl.List(pl.Float64),
            "free_gpus": pl.Int64,
            "free_gpus_window": pl.Int64,
        },
    )
    exprs = slot_exprs(pod, over=pl.col("over"))
    framed = state.select(pl.min_horizontal(*exprs.values()).alias("slots"))["slots"].to_list()
    assert framed == expected
    # the array form: room already zero where it does not count
    room = np.array(
        [
            share_room(
                pod.share,
                r["fills"],  # type: ignore[arg-type]
                steady=r["free_gpus"] == r["free_gpus_window"],
                over=bool(r["over"]),
            )
            if pod.share
            else 0
            for r in rows
        ]
    )
    arrays = slots_array(
        pod,
        np.array([r["free_gpus_window"] for r in rows]),
        np.array([r["cpus"] for r in rows]),
        np.array([UNBOUNDED if r["memory"] is None else r["memory"] for r in rows]),
        room=room if pod.share else None,
    )
    assert arrays["slots"].tolist() == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, U), max_size=12))
def test_packing_keeps_every_share_and_no_gpu_overflows(sizes: list[int]) -> None:
    fills = packed_fills(sizes)
    assert sum(fills) == sum(sizes)
    assert all(0 < f <= U for f in fills)
    # FFD never uses more than 11/9 OPT + 1 GPUs, and never fewer than the volume needs
    assert len(fills) >= -(-sum(sizes) // U)
    # no two GPUs could be merged: FFD leaves at most one GPU at most half full
    assert sum(1 for f in fills if f <= U // 2) <= 1


# ---------------------------------------- the engines read one node the same way
#
# Before the capacity model, each engine had its own reading of these nodes:
# shapes, denominators and the console took a null health for unhealthy while
# compaction, placement and harvesting took it for healthy; compaction offered
# share room on the partly filled GPUs of a node the record over-commits,
# which shapes, history and reclaim did not. Each test below failed then.

from datetime import datetime, timedelta  # noqa: E402

from fleetaudit.core.options import CompactionOptions  # noqa: E402
from fleetaudit.model import denominators, history, occupancy, shapes
from fleetaudit.outputs import console
from fleetaudit.whatif import compaction  # noqa: E402
from fleetaudit.whatif.harvest import HarvestOptions, replay_harvest  # noqa: E402
from tests.conftest import ALLOC_SCHEMA, NODE_SCHEMA  # noqa: E402

T0 = datetime(2026, 1, 1)


def _fleet(health: str | None, memory: float | None = 512.0) -> pl.DataFrame:
    """Three 8-GPU H20 nodes on switch s1; n1's health and memory are the case's."""
    return pl.DataFrame(
        [
            ("n1", "H20", 8, 64.0, memory, "s1", health),
            ("n2", "H20", 8, 64.0, 512.0, "s1", "healthy"),
            ("n3", "H20", 8, 64.0, 512.0, "s1", "down"),
        ],
        schema=NODE_SCHEMA,
        orient="row",
    )


def _allocations(*rows: tuple[str, str, float, str]) -> pl.DataFrame:
    """(alloc_id, node_id, gpus, priority), 4 CPUs and no memory a GPU, from T0 - 1h on."""
    return pl.DataFrame(
        [
            (a, a, node, gpus, 4.0 * max(gpus, 1), None, priority, T0 - timedelta(hours=1),
             None, None, False)
            for a, node, gpus, priority in rows
        ],
        schema=ALLOC_SCHEMA,
        orient="row",
    )  # fmt: skip


BUSY = _allocations(("a1", "n1", 2.0, "low"), ("a2", "n2", 4.0, "high"))


def _shapes_reading(nodes: pl.DataFrame) -> object:
    e = shapes.evaluate(occupancy.node_state(nodes, BUSY, T0), make_shape("H20", 8))
    return e.instances, e.ledger.as_json()


def _compaction_reading(nodes: pl.DataFrame) -> object:
    result = compaction.compact(nodes, BUSY, T0, [make_shape("H20", 8)], CompactionOptions())
    return result.before, result.after


def _denominators_reading(nodes: pl.DataFrame) -> object:
    return denominators.physical(nodes, BUSY, T0, T0 + timedelta(hours=2)).to_dicts()


def _console_reading(nodes: pl.DataFrame) -> object:
    return console.state_by_model(occupancy.node_state(nodes, BUSY, T0)).to_dicts()


def _harvest_reading(nodes: pl.DataFrame) -> object:
    sleeps = pl.DataFrame(
        schema={"alloc_id": pl.String, "sleep_start": pl.Datetime("us"),
                "sleep_end": pl.Datetime("us")}
    )  # fmt: skip
    result = replay_harvest(nodes, BUSY, sleeps, HarvestOptions(), T0, T0 + timedelta(hours=2))
    return result.healthy_gpu_hours


@pytest.mark.parametrize(
    "reading",
    [_shapes_reading, _compaction_reading, _denominators_reading, _console_reading,
     _harvest_reading],
    ids=["shapes", "compaction", "denominators", "console", "harvest"],
)  # fmt: skip
def test_a_null_health_reads_healthy_in_every_engine(reading: object) -> None:
    assert reading(_fleet(None)) == reading(_fleet("healthy"))  # type: ignore[operator]


def test_a_null_health_counts_healthy_by_hand() -> None:
    # n1 (null health) and n2 are usable, n3 is down: 8 unhealthy GPUs, 10 idle,
    # and n1's 6 free GPUs take no 8-GPU pod, n2's 4 neither: no instance
    instances, ledger = _shapes_reading(_fleet(None))  # type: ignore[misc]
    assert instances == 0
    assert ledger["unhealthy"] == 8 and ledger["idle"] == 10
    assert ledger["stranded"]["fragment"] == 10
    hours = _denominators_reading(_fleet(None))[0]  # type: ignore[index]
    assert hours["healthy_gpu_hours"] == 2 * 16


def test_unknown_memory_is_unbounded_in_shapes_compaction_and_history() -> None:
    # n1 declares no memory; a pod of 8 GPUs x 64 GiB needs 512 GiB: n1 takes
    # one (unbounded), n2 has 512 GiB but 4 GPUs busy; n3 is down
    nodes = _fleet("healthy", memory=None)
    idle = _allocations(("a2", "n2", 4.0, "high"))
    shape = make_shape("H20", 8, memory_gib_per_gpu=64)
    slots = shapes.node_slots(occupancy.node_state(nodes, idle, T0), shape)
    assert dict(zip(slots["node_id"], slots["slots"], strict=True)) == {"n1": 1, "n2": 0}
    assert slots["memory_slots"][0] == UNBOUNDED
    (part,) = compaction._partitions(nodes, idle, T0, [shape], CompactionOptions())
    search = compaction._Search(part)
    assert dict(zip(part.node_ids, search.node_slots[0], strict=True)) == {"n1": 1, "n2": 0}
    assert part.memory[0] == UNBOUNDED
    series = history.evaluate_history(nodes, idle, shape, T0, timedelta(hours=1),
                                      timedelta(minutes=30)).series  # fmt: skip
    assert series["instances"].to_list() == [1, 1, 1]


def test_an_over_committed_node_offers_no_share_room_in_any_engine() -> None:
    # n1 has 8 GPUs; 7 whole GPUs and shares of 0.5 and 0.7 take 9 at t (the
    # record over-commits it): its partly filled GPUs are not all real, so a
    # 0.25-GPU shape finds no slot there, in shapes, compaction and history alike
    nodes = _fleet("healthy")
    over = _allocations(
        ("w", "n1", 7.0, "high"), ("s1", "n1", 0.5, "high"), ("s2", "n1", 0.7, "high"),
        ("x", "n2", 8.0, "high"),
    )  # fmt: skip
    shape = make_shape("H20", 0.25)
    state = occupancy.node_state(nodes, over, T0)
    assert state.filter(pl.col("node_id") == "n1")["gpus_used"].item() == 9
    slots = shapes.node_slots(state, shape)
    assert slots["slots"].to_list() == [0, 0]
    (part,) = compaction._partitions(nodes, over, T0, [shape], CompactionOptions())
    assert compaction._Search(part).node_slots[0] == [0, 0]
    series = history.evaluate_history(nodes, over, shape, T0, timedelta(hours=1),
                                      timedelta(minutes=30)).series  # fmt: skip
    assert series["instances"].to_list() == [0, 0, 0]
    # the same node with 10 GPUs is not over-committed: 1 free GPU (4 pods) and the
    # room of the GPUs filled 0.7 (1 pod) and 0.5 (2 pods)
    roomy = nodes.with_columns(
        pl.when(pl.col("node_id") == "n1").then(10).otherwise(pl.col("gpus")).alias("gpus")
    )
    slots = shapes.node_slots(occupancy.node_state(roomy, over, T0), shape)
    assert slots["slots"].to_list() == [7, 0]
    (part,) = compaction._partitions(roomy, over, T0, [shape], CompactionOptions())
    assert compaction._Search(part).node_slots[0] == [7, 0]


def test_compaction_partitions_keep_their_pods_through_arrow_rows() -> None:
    # the Arrow rows (partitions_table, as --engine spark ships them) carry each
    # shape's pod flat; read back, the search counts the same pods
    nodes = _fleet("healthy")
    shapes_ = [make_shape("H20", 0.25), make_shape("H20", 16, gpus_per_pod=8, cpus_per_gpu=4)]
    parts = compaction._partitions(nodes, BUSY, T0, shapes_, CompactionOptions())
    rows = compaction.partitions_table(parts).to_pylist()
    again = [compaction._partition_from_row(row) for row in rows]
    assert again == parts
    assert [s.pod for s in again[0].shapes] == [Pod.of(s) for s in shapes_]


@settings(max_examples=300, deadline=None)
@given(
    _nodes_and_pod(),
    st.integers(0, 8),
    st.one_of(st.just(UNBOUNDED), st.integers(0, 64 * U)),
    st.one_of(st.just(UNBOUNDED), st.integers(0, 512 * U)),
    st.data(),
)
def test_slots_from_occupancy_agree_with_slots_from_free_capacity(
    case: tuple[Pod, list[dict[str, object]]], gpus: int, cpus: int, memory: int, data: st.DataObject
) -> None:
    pod, _ = case
    fills = data.draw(st.lists(st.integers(1, 100).map(lambda x: x * 10_000), max_size=3))
    used = data.draw(st.integers(0, gpus + 2))
    peak = (
        data.draw(st.integers(used, gpus + 3)),
        data.draw(st.integers(0, 70 * U)),
        data.draw(st.integers(0, 600 * U)),
    )
    expected = node_slots(
        pod,
        free_units(gpus, peak[0]),
        free_units(cpus, peak[1]),
        free_units(memory, peak[2]),
        fills=fills,
        free_gpus=free_units(gpus, used),
        over=used > gpus,
    )
    assert node_slots_at(pod, (gpus, cpus, memory), used, peak, fills) == expected


# ------------------------------------------------------------------ placement's pods


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.sampled_from([0.1, 0.25, 0.3, 0.5, 0.75]).map(lambda g: (g, None)),
        st.tuples(st.integers(1, 8), st.integers(1, 8)).map(lambda t: (float(t[0] * t[1]), float(t[1]))),
    ),
    st.sampled_from([0.0, 1.0, 2.5, 12.0, 16.0]),
    st.sampled_from([0.0, 8.0, 10.5, 96.0]),
)
def test_placement_sizes_pods_as_the_capacity_model_does(
    request_gpus: tuple[float, float | None], cpus_per_gpu: float, memory_gib_per_gpu: float
) -> None:
    """placement decomposes millions of requests into pods vectorised (with row-level
    errors); a request given per-GPU rates gets the capacity model's Pod, unit for unit."""
    from fleetaudit.model.capacity import Pod
    from fleetaudit.model.shapes import make_shape
    from fleetaudit.whatif.placement.workload import _quantities

    gpus, per_pod = request_gpus
    shape = make_shape("H20", gpus, per_pod, cpus_per_gpu, memory_gib_per_gpu)
    pod = Pod.of(shape)
    frame = pl.DataFrame(
        {
            "request_id": ["r1"], "gpus": [gpus], "gpus_per_pod": [per_pod],
            "cpus_per_gpu": [cpus_per_gpu], "memory_gib_per_gpu": [memory_gib_per_gpu],
            "cpus": [None], "memory_gib": [None],
        },
        schema_overrides={"gpus_per_pod": pl.Float64, "cpus": pl.Float64, "memory_gib": pl.Float64},
    )  # fmt: skip
    q = _quantities(frame)
    assert int(q.cpu[0]) == pod.cpus and int(q.memory[0]) == pod.memory
    if pod.share:
        assert (int(q.share[0]), int(q.count[0]), int(q.pods[0])) == (pod.share, 1, 1)
    else:
        assert int(q.count[0]) == pod.gpus and int(q.pods[0]) * pod.gpus == round(gpus)


def test_schedulable_waits_by_hand() -> None:
    """One 8-GPU node, busy at 0h, 2h-3h and 5h-6h of seven hourly instants: an 8-GPU
    shape starts at 1h and 4h only, so its waits are 1h, 0, 2h, 1h, 0 and two censored."""
    from datetime import datetime, timedelta

    from fleetaudit.model.denominators import schedulable

    t0 = datetime(2026, 1, 1)
    nodes = pl.DataFrame(
        {"node_id": ["n1"], "gpu_model": ["H20"], "gpus": [8], "cpus": [64.0],
         "memory_gib": [None], "switch_id": ["s1"], "health": ["healthy"]},
        schema={"node_id": pl.String, "gpu_model": pl.String, "gpus": pl.Int64,
                "cpus": pl.Float64, "memory_gib": pl.Float64, "switch_id": pl.String,
                "health": pl.String},
    )  # fmt: skip
    busy = [(0, 1), (2, 4), (5, 7)]
    allocations = pl.DataFrame(
        [(f"a{i}", f"j{i}", "n1", 8.0, 1.0, None, "high", t0 + timedelta(hours=s),
          t0 + timedelta(hours=e)) for i, (s, e) in enumerate(busy)],
        schema={"alloc_id": pl.String, "job_id": pl.String, "node_id": pl.String,
                "gpus": pl.Float64, "cpus": pl.Float64, "memory_gib": pl.Float64,
                "priority": pl.String, "start_time": pl.Datetime("us"),
                "end_time": pl.Datetime("us")},
        orient="row",
    )  # fmt: skip
    instants = [t0 + timedelta(hours=j) for j in range(7)]
    shape = make_shape("H20", 8, 8, locality="node")
    (outlook,) = schedulable(nodes, allocations, [(shape, 1)], instants, timedelta(hours=7)).shapes
    assert outlook.instants == 7 and outlook.p_start == 2 / 7
    assert outlook.wait_p50_s == 3600.0  # ceil(3.5) = 4th of 0, 0, 1h, 1h, 2h, inf, inf
    assert outlook.wait_p90_s is None  # ceil(6.3) = 7th: censored
