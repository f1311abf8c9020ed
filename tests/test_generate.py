"""The synthetic fleet generator: determinism, schema, capacity and realism.

The capacity and allocation-rate checks use their own reference (a per-node
event sweep with first-fit-decreasing share packing written here), not the
generator's lane construction, so they catch a construction that is wrong.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetaudit.inputs.generate import TABLES, GenerateOptions, GenerateResult, generate_fleet

END = datetime(2026, 5, 1, tzinfo=timezone.utc)
EPS = 1e-9


def _read(result: GenerateResult, table: str) -> pl.DataFrame:
    return pl.read_parquet(result.files[table])


def _epoch(df: pl.DataFrame, column: str) -> np.ndarray:
    return df[column].dt.epoch("s").to_numpy()


def _ffd_bins(shares: list[float]) -> int:
    """GPUs that first-fit-decreasing packing of the shares fills."""
    bins: list[float] = []
    for s in sorted(shares, reverse=True):
        for i, used in enumerate(bins):
            if used + s <= 1 + EPS:
                bins[i] = used + s
                break
        else:
            bins.append(s)
    return len(bins)


def _occupied(active: dict[Any, tuple[float, int, int]]) -> tuple[float, int, int]:
    gpus = [g for g, _, _ in active.values()]
    whole = sum(math.floor(g + EPS) for g in gpus)
    shares = [g - math.floor(g + EPS) for g in gpus if g - math.floor(g + EPS) > EPS]
    return (
        whole + _ffd_bins(shares),
        sum(c for _, c, _ in active.values()),
        sum(m for _, _, m in active.values()),
    )


def _sweep(
    allocs: pl.DataFrame, horizon: int
) -> dict[str, list[tuple[int, int, tuple[float, int, int]]]]:
    """Per node: (from, to, occupancy) pieces between consecutive events, in time order."""
    events: dict[str, list[tuple[int, int, int, tuple[float, int, int]]]] = defaultdict(list)
    start = _epoch(allocs, "start_time")
    end = allocs["end_time"].dt.epoch("s").fill_null(horizon).to_numpy()
    rows = zip(
        allocs["node_id"].to_list(),
        allocs["gpus"].to_list(),
        allocs["cpus"].to_list(),
        allocs["memory_gib"].to_list(),
        start.tolist(),
        end.tolist(),
        strict=True,
    )
    for i, (node, g, c, m, s, e) in enumerate(rows):
        # Half-open [start, end): at one instant, ends go before starts.
        events[node].append((s, 1, i, (g, c, m)))
        events[node].append((e, 0, i, (g, c, m)))
    pieces: dict[str, list[tuple[int, int, tuple[float, int, int]]]] = {}
    for node, evs in events.items():
        evs.sort()
        active: dict[int, tuple[float, int, int]] = {}
        out = []
        for j, (t, kind, i, shape) in enumerate(evs):
            if kind:
                active[i] = shape
            else:
                del active[i]
            nxt = evs[j + 1][0] if j + 1 < len(evs) else t
            if nxt > t:
                out.append((t, nxt, _occupied(active)))
        pieces[node] = out
    return pieces


def _assert_capacity(result: GenerateResult) -> None:
    nodes = _read(result, "nodes")
    allocs = _read(result, "allocations")
    cap = {r["node_id"]: r for r in nodes.iter_rows(named=True)}
    horizon = int(END.timestamp()) + 10**9
    for node, pieces in _sweep(allocs, horizon).items():
        c = cap[node]
        for t, _, (g, cpus, mem) in pieces:
            assert g <= c["gpus"], (node, t, g, c["gpus"])
            assert cpus <= c["cpus"], (node, t, cpus, c["cpus"])
            assert mem <= c["memory_gib"], (node, t, mem, c["memory_gib"])


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> GenerateResult:
    """A medium fleet for the realism checks: 400 nodes, 30 days, 2 days of telemetry."""
    return generate_fleet(tmp_path_factory.mktemp("fleet"), GenerateOptions(nodes=400, days=30))


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> GenerateResult:
    return generate_fleet(
        tmp_path_factory.mktemp("small"),
        GenerateOptions(nodes=48, days=4, seed=3, telemetry_days=1),
    )


def test_same_options_write_identical_bytes(tmp_path: Path) -> None:
    for fmt in ("parquet", "csv"):
        options = GenerateOptions(nodes=30, days=3, seed=11, format=fmt, telemetry_days=0.5)
        a = generate_fleet(tmp_path / f"a-{fmt}", options)
        b = generate_fleet(tmp_path / f"b-{fmt}", options)
        assert a.rows == b.rows
        for table in TABLES:
            assert a.files[table].read_bytes() == b.files[table].read_bytes(), (fmt, table)
    other = generate_fleet(
        tmp_path / "c", GenerateOptions(nodes=30, days=3, seed=12, telemetry_days=0.5)
    )
    assert other.files["allocations"].read_bytes() != a.files["allocations"].read_bytes()


def test_writes_the_four_tables_with_the_spec_columns(small: GenerateResult) -> None:
    ts = "timestamp[us, tz=UTC]"
    expected = {
        "nodes": {
            "node_id": "string",
            "gpu_model": "string",
            "gpus": "int64",
            "cpus": "int64",
            "memory_gib": "int64",
            "switch_id": "string",
            "health": "string",
        },
        "allocations": {
            "alloc_id": "string",
            "job_id": "string",
            "node_id": "string",
            "gpus": "double",
            "cpus": "int64",
            "memory_gib": "int64",
            "priority": "string",
            "workload": "string",
            "tenant": "string",
            "start_time": ts,
            "end_time": ts,
            "checkpoint_interval_s": "int64",
            "sleepable": "bool",
        },
        "requests": {
            "request_id": "string",
            "submit_time": ts,
            "start_time": ts,
            "gpu_model": "string",
            "gpus": "double",
            "gpus_per_pod": "double",
            "cpus_per_gpu": "double",
            "memory_gib_per_gpu": "double",
            "cpus": "int64",
            "memory_gib": "int64",
            "locality": "string",
            "duration_s": "int64",
            "start_deadline_s": "int64",
            "priority": "string",
            "tenant": "string",
            "job_id": "string",  # an extra column: the job whose allocations ran it
        },
        "telemetry": {
            "ts": ts,
            "node_id": "string",
            "gpu_index": "int32",
            "sm_active": "double",
            "mem_used": "double",
            "alloc_id": "string",
        },
    }
    assert sorted(small.files) == sorted(TABLES)
    for table, columns in expected.items():
        assert small.files[table] == small.out / f"{table}.parquet"
        schema = pq.read_schema(small.files[table])
        assert {f.name: str(f.type) for f in schema} == columns, table
        assert pq.read_metadata(small.files[table]).num_rows == small.rows[table] > 0
    # Only the final files are left: no temporary names.
    assert sorted(p.name for p in small.out.iterdir()) == sorted(f"{t}.parquet" for t in TABLES)


def test_ids_enums_and_nodes(small: GenerateResult) -> None:
    nodes = _read(small, "nodes")
    allocs = _read(small, "allocations")
    requests = _read(small, "requests")
    assert nodes["node_id"].to_list()[:2] == ["node-00001", "node-00002"]
    assert nodes["switch_id"].str.contains(r"^sw-\d{4}$").all()
    assert allocs["alloc_id"].str.starts_with("a-").all() and allocs["alloc_id"].is_unique().all()
    assert allocs["job_id"].str.starts_with("j-").all()
    assert (
        requests["request_id"].str.starts_with("r-").all()
        and requests["request_id"].is_unique().all()
    )
    assert set(nodes["gpus"]) <= {4, 8, 16}
    assert nodes["cpus"].is_between(96, 192).all()
    assert nodes["memory_gib"].is_between(1024, 2048).all()
    assert set(nodes["health"]) <= {"healthy", "degraded", "cordoned", "down"}
    # One GPU model per switch domain.
    assert nodes.group_by("switch_id").agg(pl.col("gpu_model").n_unique())["gpu_model"].max() == 1
    assert set(allocs["priority"]) <= {"high", "low"}
    assert set(allocs["workload"]) <= {
        "online_inference",
        "offline_inference",
        "training",
        "development",
        "cpu_only",
        "other",
    }
    assert allocs["tenant"].str.contains(r"^dept-\d{2}$").all()
    assert (allocs["gpus"] >= 0).all()
    shares = allocs.filter((pl.col("gpus") > 0) & (pl.col("gpus") < 1))["gpus"]
    assert set(shares) <= {0.25, 0.5}
    assert set(allocs.filter(pl.col("workload") == "cpu_only")["gpus"]) == {0.0}
    ended = allocs.filter(pl.col("end_time").is_not_null())
    assert (ended["end_time"] > ended["start_time"]).all()
    assert (allocs["start_time"] < END).all()
    assert (ended["end_time"] <= END).all()
    # Allocations overlap the window; some still run at export.
    assert (allocs["end_time"].fill_null(END) > END - timedelta(days=4)).all()
    assert allocs["end_time"].null_count() > 0


@pytest.mark.parametrize(("nodes", "days", "seed"), [(60, 5, 0), (24, 7, 5), (57, 3, 9)])
def test_no_node_is_ever_over_capacity(tmp_path: Path, nodes: int, days: float, seed: int) -> None:
    result = generate_fleet(
        tmp_path, GenerateOptions(nodes=nodes, days=days, seed=seed, telemetry_days=0)
    )
    _assert_capacity(result)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    nodes=st.integers(min_value=1, max_value=40),
    days=st.floats(min_value=0.05, max_value=4.0),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_capacity_holds_for_any_small_fleet(
    tmp_path: Path, nodes: int, days: float, seed: int
) -> None:
    out = tmp_path / f"{nodes}-{days}-{seed}"
    _assert_capacity(
        generate_fleet(out, GenerateOptions(nodes=nodes, days=days, seed=seed, telemetry_days=0))
    )


def test_allocation_rates_match_the_paper(fleet: GenerateResult) -> None:
    """ASI: 68% of healthy GPU-hours allocated to high priority alone, 93% with low."""
    nodes = _read(fleet, "nodes").filter(pl.col("health") == "healthy")
    allocs = _read(fleet, "allocations").filter(pl.col("node_id").is_in(nodes["node_id"].implode()))
    hi = int(END.timestamp())
    lo = hi - 30 * 86400

    def gpu_hours(frame: pl.DataFrame) -> float:
        total = 0.0
        for pieces in _sweep(frame, hi).values():
            for t0, t1, (g, _, _) in pieces:
                total += g * max(0, min(t1, hi) - max(t0, lo))
        return total

    healthy = nodes["gpus"].sum() * (hi - lo)
    high = gpu_hours(allocs.filter(pl.col("priority") == "high")) / healthy
    both = gpu_hours(allocs) / healthy
    assert high == pytest.approx(0.68, abs=0.06)
    assert both == pytest.approx(0.93, abs=0.06)
    assert both <= 1.0


def test_workload_mix_and_durations(fleet: GenerateResult) -> None:
    allocs = _read(fleet, "allocations")
    jobs = allocs.group_by("job_id").agg(
        pl.col("workload").first(),
        pl.col("priority").first(),
        (pl.col("end_time") - pl.col("start_time")).first().dt.total_seconds().alias("duration_s"),
    )
    gpu_jobs = jobs.filter(pl.col("workload") != "cpu_only")
    share = dict(gpu_jobs["workload"].value_counts(normalize=True).iter_rows())
    assert share["online_inference"] == pytest.approx(0.546, abs=0.04)
    assert share["offline_inference"] == pytest.approx(0.216, abs=0.04)
    assert share["training"] == pytest.approx(0.195, abs=0.04)
    assert share["development"] == pytest.approx(0.034, abs=0.025)
    assert share.get("other", 0.0) < 0.03
    assert 0.02 < 1 - gpu_jobs.height / jobs.height < 0.25  # CPU-only jobs on GPU nodes
    # Priorities: online inference, training and development mostly high;
    # offline inference low.
    high = dict(jobs.group_by("workload").agg((pl.col("priority") == "high").mean()).iter_rows())
    assert high["online_inference"] > 0.9
    assert high["training"] > 0.7
    assert high["development"] > 0.9
    assert high["offline_inference"] < 0.1
    hours = gpu_jobs["duration_s"].drop_nulls().to_numpy() / 3600
    assert np.median(hours) == pytest.approx(5.0, abs=1.0)
    assert np.quantile(hours, 0.9) == pytest.approx(24.0, abs=5.0)


def test_online_inference_follows_the_day_and_sleeps(fleet: GenerateResult) -> None:
    allocs = _read(fleet, "allocations")
    online = allocs.filter(
        (pl.col("workload") == "online_inference") & (pl.col("priority") == "high")
    )
    assert 0.2 < online["sleepable"].mean() < 0.6
    assert not allocs.filter(pl.col("workload") != "online_inference")["sleepable"].any()
    # More high-priority online replicas by day (Beijing) than at night.
    hours = np.arange(0, 14 * 86400, 3600) + int(END.timestamp()) - 14 * 86400
    start = _epoch(online, "start_time")
    end = online["end_time"].dt.epoch("s").fill_null(2**62).to_numpy()
    live = np.array([((start <= t) & (t < end)).sum() for t in hours])
    beijing = (hours // 3600 + 8) % 24
    day = live[(beijing >= 10) & (beijing < 20)].mean()
    night = live[(beijing >= 1) & (beijing < 7)].mean()
    assert day > 1.15 * night


def test_gangs_stay_in_one_switch_domain(fleet: GenerateResult) -> None:
    nodes = _read(fleet, "nodes").select("node_id", "switch_id", "gpus")
    allocs = _read(fleet, "allocations").join(nodes, on="node_id", suffix="_node")
    gangs = (
        allocs.group_by("job_id")
        .agg(
            pl.len().alias("pods"),
            pl.col("switch_id").n_unique().alias("domains"),
            pl.col("node_id").n_unique().alias("nodes"),
            pl.col("gpus").min().alias("min_gpus"),
            pl.col("gpus").max().alias("max_gpus"),
            pl.col("start_time").n_unique().alias("starts"),
            pl.col("workload").first(),
            pl.col("checkpoint_interval_s").first(),
        )
        .filter(pl.col("pods") > 1)
    )
    assert gangs.height > 0
    assert (gangs["domains"] == 1).all()
    assert (gangs["nodes"] == gangs["pods"]).all()
    assert (gangs["min_gpus"] == 8).all() and (gangs["max_gpus"] == 8).all()
    assert (gangs["starts"] == 1).all()
    assert set(gangs["workload"]) == {"training"}
    assert gangs["pods"].max() * 8 >= 128
    assert gangs["checkpoint_interval_s"].is_between(1800, 3600).all()
    # Low-priority work mostly checkpoints, some does not.
    low = allocs.filter((pl.col("priority") == "low") & (pl.col("gpus") > 0))
    assert 0.5 < low["checkpoint_interval_s"].is_not_null().mean() < 0.95
    assert allocs["tenant"].n_unique() > 60


def test_one_request_per_started_job(fleet: GenerateResult) -> None:
    allocs = _read(fleet, "allocations")
    requests = _read(fleet, "requests")
    started = requests.filter(pl.col("start_time").is_not_null())
    jobs = allocs.group_by("job_id").agg(
        pl.col("start_time").min(),
        pl.col("gpus").sum().alias("total"),
        pl.col("gpus").first().alias("pod"),
        pl.len().alias("pods"),
        pl.col("priority").first(),
        pl.col("tenant").first(),
    )
    assert started.height == jobs.height
    # each started request names its job; a pending one names none
    assert (started["job_id"].str.replace("j-", "r-") == started["request_id"]).all()
    assert requests.filter(pl.col("start_time").is_null())["job_id"].is_null().all()
    joined = jobs.with_columns(request_id=pl.col("job_id").str.replace("j-", "r-")).join(
        started, on="request_id", suffix="_req"
    )
    assert joined.height == jobs.height
    assert (joined["start_time"] == joined["start_time_req"]).all()
    assert (joined["submit_time"] <= joined["start_time"]).all()
    assert (joined["total"] == joined["gpus"]).all()
    assert (joined["pod"] == joined["gpus_per_pod"]).all()
    assert (joined["priority"] == joined["priority_req"]).all()
    assert (joined["tenant"] == joined["tenant_req"]).all()
    assert (joined.filter(pl.col("pods") > 1)["locality"] == "switch").all()
    assert (joined.filter(pl.col("pods") == 1)["locality"] == "node").all()
    assert (joined["duration_s"] > 0).all()


def test_queue_at_export_holds_hard_shapes(fleet: GenerateResult) -> None:
    queued = _read(fleet, "requests").filter(pl.col("start_time").is_null())
    assert queued.height >= 24
    assert (queued["submit_time"] <= END).all()
    assert (queued["submit_time"] > END - timedelta(days=3)).all()
    big = queued.filter(pl.col("locality") == "switch")
    assert {128.0, 256.0} <= set(big["gpus"])
    assert (big["gpus_per_pod"] == 8).all()
    hungry = queued.filter((pl.col("gpus") == 8) & (pl.col("cpus_per_gpu") == 16))
    assert hungry.height > 0
    assert queued.filter(pl.col("gpus").is_between(1, 4)).height > 0
    assert {0.25, 0.5} <= set(queued["gpus"])
    assert queued["gpu_model"].str.contains("|", literal=True).any()
    assert queued["start_deadline_s"].is_not_null().any()
    assert (
        (queued["gpus"] / queued["gpus_per_pod"])
        .fill_nan(1)
        .round(9)
        .is_in([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
        .all()
    )


def test_telemetry_reports_only_allocated_gpus(small: GenerateResult) -> None:
    nodes = _read(small, "nodes")
    allocs = _read(small, "allocations")
    tel = _read(small, "telemetry")
    assert tel.height == small.rows["telemetry"] > 0
    assert tel["sm_active"].is_between(0, 1).all() and tel["mem_used"].is_between(0, 1).all()
    assert tel["ts"].max() == END
    assert tel["ts"].min() > END - timedelta(days=1)
    assert tel.select("node_id", "gpu_index", "ts").is_unique().all()
    joined = tel.join(allocs, on="alloc_id", suffix="_alloc").join(
        nodes, on="node_id", suffix="_node"
    )
    assert joined.height == tel.height
    assert (joined["node_id"] == joined["node_id_alloc"]).all()
    assert (joined["start_time"] <= joined["ts"]).all()
    assert (joined["end_time"].fill_null(END + timedelta(days=1)) > joined["ts"]).all()
    assert (joined["gpu_index"] < joined["gpus_node"]).all() and (joined["gpu_index"] >= 0).all()
    assert (joined["gpus"] > 0).all()
    # An allocation keeps its GPUs: whole-GPU allocations report the same
    # ceil(gpus) indices at every sample.
    whole = joined.filter(pl.col("gpus") >= 1)
    per = whole.group_by("alloc_id").agg(pl.col("gpu_index").n_unique(), pl.col("gpus").first())
    assert (per["gpu_index"] == per["gpus"]).all()
    # Reference: at each sample, a node reports at least its occupied GPUs (FFD)
    # and at most its whole GPUs plus one per share allocation.
    samples = sorted(set(_epoch(tel, "ts").tolist()))
    counts = tel.group_by("node_id", pl.col("ts").dt.epoch("s").alias("t")).len()
    got = {(r["node_id"], r["t"]): r["len"] for r in counts.iter_rows(named=True)}
    horizon = int(END.timestamp()) + 10**9
    for node, pieces in _sweep(allocs.filter(pl.col("gpus") > 0), horizon).items():
        frame = allocs.filter((pl.col("node_id") == node) & (pl.col("gpus") > 0))
        start = _epoch(frame, "start_time")
        end = frame["end_time"].dt.epoch("s").fill_null(horizon).to_numpy()
        g = frame["gpus"].to_numpy()
        for t in samples:
            occ = next((o for a, b, o in pieces if a <= t < b), (0, 0, 0))[0]
            live = (start <= t) & (t < end)
            upper = np.floor(g[live]).sum() + (g[live] < 1).sum()
            assert occ <= got.get((node, t), 0) <= upper, (node, t)


def test_telemetry_is_shaped_like_asi(fleet: GenerateResult) -> None:
    allocs = _read(fleet, "allocations")
    tel = _read(fleet, "telemetry").join(
        allocs.select("alloc_id", "workload", "sleepable", "node_id"), on="alloc_id", suffix="_a"
    )
    med = dict(tel.group_by("workload").agg(pl.col("sm_active").median()).iter_rows())
    mem = dict(tel.group_by("workload").agg(pl.col("mem_used").median()).iter_rows())
    assert med["online_inference"] == pytest.approx(0.06, abs=0.02)
    assert 0.4 <= med["training"] <= 0.7
    assert mem["online_inference"] > 0.6  # generative inference: memory full, SM idle
    # Sleepable warm containers go quiet at night (Beijing).
    sleepers = tel.filter(pl.col("sleepable")).with_columns(hour=(pl.col("ts").dt.hour() + 8) % 24)
    assert sleepers.filter(pl.col("hour") < 7)["sm_active"].median() < 0.01
    assert sleepers.filter(pl.col("hour").is_between(10, 20))["sm_active"].median() > 0.03
    # Training loses 10-18% of its SM while a CPU-only neighbour runs on its node.
    cpu = allocs.filter(pl.col("workload") == "cpu_only")
    grid = np.unique(_epoch(tel, "ts"))
    start = _epoch(cpu, "start_time")
    end = cpu["end_time"].dt.epoch("s").fill_null(2**62).to_numpy()
    busy = [
        (node, int(t))
        for node, s, e in zip(cpu["node_id"].to_list(), start, end, strict=True)
        for t in grid[(grid >= s) & (grid < e)]
    ]
    busy_frame = pl.DataFrame(
        busy, schema={"node_id": pl.String, "t": pl.Int64}, orient="row"
    ).unique()
    training = (
        tel.filter(pl.col("workload") == "training")
        .with_columns(t=pl.col("ts").dt.epoch("s"))
        .join(busy_frame.with_columns(busy=pl.lit(True)), on=["node_id", "t"], how="left")
        .with_columns(pl.col("busy").fill_null(False))
    )
    ratio = (
        training.group_by("alloc_id", "busy")
        .agg(pl.col("sm_active").mean())
        .pivot(on="busy", index="alloc_id", values="sm_active")
        .drop_nulls()
        .select(pl.col("true") / pl.col("false"))
        .to_series()
    )
    assert ratio.len() > 10
    assert 0.8 <= ratio.median() <= 0.92


def test_csv_and_parquet_hold_the_same_rows(tmp_path: Path) -> None:
    options = GenerateOptions(nodes=24, days=2, seed=4, telemetry_days=0.5)
    pq_result = generate_fleet(tmp_path / "pq", options)
    csv_result = generate_fleet(tmp_path / "csv", replace(options, format="csv"))
    assert csv_result.rows == pq_result.rows
    header = csv_result.files["allocations"].read_text().splitlines()[0]
    assert header.startswith("alloc_id,job_id,node_id,gpus,")
    first = csv_result.files["allocations"].read_text().splitlines()[1]
    assert "Z," in first and "T" in first.split(",")[9]
    for table in TABLES:
        expected = pl.read_parquet(pq_result.files[table])
        got = pl.read_csv(csv_result.files[table], schema=expected.schema, try_parse_dates=False)
        assert got.equals(expected), table


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"nodes": 0}, "nodes"),
        ({"days": 0}, "days"),
        ({"days": -1.0}, "days"),
        ({"format": "json"}, "format"),
        ({"seed": -1}, "seed"),
        ({"telemetry_step_s": 0}, "telemetry_step_s"),
        ({"telemetry_days": -1.0}, "telemetry_days"),
        ({"harvested_nights": 1.5}, "harvested_nights"),
        ({"node_events": -1.0}, "node_events"),
        ({"node_events_days": 0.0}, "node_events_days"),
    ],
)
def test_bad_options_raise_value_error(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        generate_fleet(tmp_path / "out", GenerateOptions(**change))
    assert not (tmp_path / "out").exists()


def test_a_harvesting_record_adds_work_on_sleeping_containers_only(tmp_path: Path) -> None:
    """harvested_nights adds night-time low-priority work on the GPUs, CPUs and memory of a
    sleeping warm container, and changes nothing else."""
    options = GenerateOptions(nodes=60, days=4, seed=2, telemetry_days=1)
    plain = generate_fleet(tmp_path / "plain", options)
    harvesting = generate_fleet(tmp_path / "harvesting", replace(options, harvested_nights=1.0))
    for table in ("nodes", "requests", "telemetry"):
        assert _read(plain, table).equals(_read(harvesting, table)), table
    before, after = _read(plain, "allocations"), _read(harvesting, "allocations")
    kept = after.filter(pl.col("alloc_id").is_in(before["alloc_id"].implode()))
    assert kept.sort("alloc_id").equals(before.sort("alloc_id"))
    added = after.filter(~pl.col("alloc_id").is_in(before["alloc_id"].implode()))
    assert added.height > 0 and added["alloc_id"].n_unique() == added.height
    assert set(added["priority"]) == {"low"} and set(added["workload"]) == {"offline_inference"}
    assert not added["sleepable"].any() and added["end_time"].null_count() == 0
    hours = added.select(
        (
            pl.col("start_time").dt.hour().cast(pl.Int32) * 60 + pl.col("start_time").dt.minute()
        ).alias("s"),
        (pl.col("end_time").dt.hour().cast(pl.Int32) * 60 + pl.col("end_time").dt.minute()).alias(
            "e"
        ),
        ((pl.col("end_time") - pl.col("start_time")).dt.total_seconds()).alias("d"),
    )
    assert hours["s"].min() >= 16 * 60 and hours["e"].max() <= 23 * 60 + 30
    assert hours["d"].min() >= 600
    # each on a sleepable container active over it, on its node, with its shape
    hosts = before.filter(pl.col("sleepable"))
    pairs = added.join(hosts, on=["node_id", "gpus", "cpus", "memory_gib"], suffix="_host").filter(
        (pl.col("start_time_host") <= pl.col("start_time"))
        & (pl.col("end_time_host").is_null() | (pl.col("end_time_host") >= pl.col("end_time")))
    )
    assert pairs["alloc_id"].n_unique() == added.height


def test_an_interrupted_run_leaves_no_files(tmp_path: Path) -> None:
    def interrupt(message: str, fraction: float) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        generate_fleet(tmp_path, GenerateOptions(nodes=30, days=2), progress=interrupt)
    assert list(tmp_path.iterdir()) == []


def test_progress_and_no_telemetry(tmp_path: Path) -> None:
    seen: list[tuple[str, float]] = []
    result = generate_fleet(
        tmp_path,
        GenerateOptions(nodes=10, days=1, telemetry_days=0),
        progress=lambda m, f: seen.append((m, f)),
    )
    assert seen[-1] == ("done", 1.0)
    assert all(0 <= f <= 1 for _, f in seen)
    assert result.rows["telemetry"] == 0
    assert pq.read_metadata(result.files["telemetry"]).num_rows == 0
    assert result.gpus == _read(result, "nodes")["gpus"].sum()


def test_node_events_are_a_table_of_their_own(tmp_path: Path) -> None:
    """--node-events adds node_events and leaves every other table as it was; its
    intervals are valid (an ingest rejects none), a few nodes fail far more often than
    the rest, some outages are told by two sources, and the nodes recorded unhealthy at
    the export get an open interval in their recorded state."""
    base = GenerateOptions(nodes=60, days=2, telemetry_days=0.1)
    plain = generate_fleet(tmp_path / "plain", base)
    with_events = generate_fleet(tmp_path / "events", replace(base, node_events=40))
    assert "node_events" not in plain.files
    for table in TABLES:
        assert with_events.files[table].read_bytes() == plain.files[table].read_bytes()
    events = pl.read_parquet(with_events.files["node_events"])
    assert events.height == with_events.rows["node_events"] > 40 * 60 * 0.5
    assert (events["end_time"].is_null() | (events["end_time"] > events["start_time"])).all()
    per_node = events.group_by("node_id").len()["len"]
    assert per_node.max() > 3 * per_node.median()  # type: ignore[operator]
    assert events.filter(pl.col("source") == "slurm:sacctmgr", pl.col("state") == "down").height
    nodes = pl.read_parquet(with_events.files["nodes"])
    recorded = nodes.filter(pl.col("health") != "healthy").select("node_id", "health")
    dated = events.filter(pl.col("source") == "export").select("node_id", "state")
    assert dated.height and dated.join(recorded, on="node_id")["state"].equals(
        dated.join(recorded, on="node_id")["health"].alias("state")
    )
    from fleetaudit.api import StoreOptions, ingest_paths

    result = ingest_paths(StoreOptions(tmp_path / "s.duckdb"), [tmp_path / "events"])
    assert {t.table: t.rejected for t in result.tables}["node_events"] == 0

