"""The by-time replay's window-sized setup gives what the whole-list setup gave.

The replay prepares per-request arrays only for the requests submitted in its
window, and the fragmentation measure's shape frequencies from a grouped frame
of all requests; the fragmentation works per distinct share value and, at the
sample points, per distinct node state. Each is checked against the direct
computation here.
"""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pytest

from fleetaudit.whatif.placement import (
    _U,
    PlacementOptions,
    _fragmentation,
    _prepare_fleet,
    _prepare_workload,
    _Shapes,
)

MODELS = [None, "A100", "H100", "A100|H100", "H100|A100", "T4", ""]


def nodes_frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "node_id": [f"n{i}" for i in range(6)],
            "gpu_model": ["A100", "A100", "H100", "H100", "T4", "T4"],
            "gpus": [8, 8, 8, 4, 4, 2],
            "cpus": [96.0] * 6,
            "health": ["healthy"] * 6,
        }
    )


def requests_frame(rng: random.Random, n: int) -> pl.DataFrame:
    gpus = [rng.choice([0.0, 0.25, 0.5, 1.0, 2.0, 8.0, 16.0]) for _ in range(n)]
    return pl.DataFrame(
        {
            "request_id": [f"r{i:04d}" for i in range(n)],
            "gpus": gpus,
            "gpus_per_pod": [8.0 if g == 16.0 else None for g in gpus],
            "cpus": [rng.choice([None, 1.0, 4.0, 4.0]) for _ in range(n)],
            "cpus_per_gpu": [4.0] * n,
            "gpu_model": [rng.choice(MODELS) for _ in range(n)],
            "submit_time": [rng.randrange(0, 50) for _ in range(n)],
        },
        schema_overrides={"gpus_per_pod": pl.Float64, "cpus": pl.Float64},
    ).sort("submit_time", "request_id")


@pytest.mark.parametrize("seed", range(5))
def test_window_workload_weighs_every_request_like_the_whole_list(seed: int) -> None:
    rng = random.Random(seed)
    fleet = _prepare_fleet(nodes_frame())
    frame = requests_frame(rng, 400)
    whole = _prepare_workload(frame, fleet, PlacementOptions())
    window = frame.filter(pl.col("submit_time").is_between(10, 20, closed="left"))
    part = _prepare_workload(window, fleet, PlacementOptions(), weigh=frame)
    for name in ("cpu", "share", "count", "allowed", "weight", "shares", "share_of"):
        assert np.array_equal(getattr(whole.shapes, name), getattr(part.shapes, name)), name
    assert whole.shapes.cpu_only == part.shapes.cpu_only
    assert np.array_equal(whole.model_ok, part.model_ok)
    rows = np.flatnonzero(frame["submit_time"].is_between(10, 20, closed="left").to_numpy())
    assert part.request_ids == [whole.request_ids[r] for r in rows]
    for name in ("pods", "share", "count", "cpu", "memory", "allowed", "locality", "demand"):
        assert np.array_equal(getattr(whole, name)[rows], getattr(part, name)), name
    # Equal pod shapes share a cache key in both.
    for a in range(len(rows)):
        for b in range(a + 1, len(rows)):
            same_whole = whole.key[rows[a]] == whole.key[rows[b]]
            assert same_whole == (part.key[a] == part.key[b])


def naive_fragmentation(
    shapes: _Shapes, free: np.ndarray, cpu: np.ndarray, model: np.ndarray
) -> np.ndarray:
    """The measure with one GPU-fit test per shape (the definition, unshared)."""
    total = free.sum(axis=1)
    frag = total * shapes.cpu_only
    fits = free[:, None, :] >= shapes.share[None, :, None]
    usable_gpus = fits.sum(axis=2)
    small = total[:, None] - np.where(fits, free[:, None, :], 0).sum(axis=2)
    runs = shapes.allowed[model] & (usable_gpus >= shapes.count) & (cpu[:, None] >= shapes.cpu)
    return frag + np.where(runs, small, total[:, None]) @ shapes.weight


@pytest.mark.parametrize("seed", range(5))
def test_fragmentation_per_share_value_and_node_state_is_bit_identical(seed: int) -> None:
    rng = np.random.default_rng(seed)
    fleet = _prepare_fleet(nodes_frame())
    shapes = _prepare_workload(
        requests_frame(random.Random(seed), 300), fleet, PlacementOptions()
    ).shapes
    m = 500
    values = np.array([0, _U // 4, _U // 2, 3 * _U // 10, _U, _U])
    free = rng.choice(values, size=(m, 8))
    free[rng.random(m) < 0.5] = 0  # many nodes in the same (full) state
    cpu = rng.choice([0, 4 * _U, 96 * _U], size=m)
    model = rng.integers(0, len(fleet.models), size=m)
    expected = naive_fragmentation(shapes, free, cpu, model)
    assert np.array_equal(_fragmentation(shapes, free, cpu, model), expected)
    deduped = _fragmentation(shapes, free, cpu, model, dedup=True)
    assert np.array_equal(deduped, expected)
    assert float(deduped.sum()) == float(expected.sum())
