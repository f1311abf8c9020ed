"""Fleet-scale run: generate, ingest (strict), state at the export time.

CI runs it at a reduced size; FLEETAUDIT_SCALE=full runs the ASI scale
(19,400 nodes, 90 days; minutes and a few GiB of disk).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from fleetaudit import api
from fleetaudit.inputs.generate import GenerateOptions
from fleetaudit.inputs.ingest import IngestOptions

FULL = os.environ.get("FLEETAUDIT_SCALE") == "full"
NODES, DAYS = (19_400, 90.0) if FULL else (600, 10.0)


@pytest.mark.slow
def test_generated_fleet_ingests_and_adds_up(tmp_path: Path) -> None:
    out = tmp_path / "fleet"
    generated = api.generate_fleet(out, GenerateOptions(nodes=NODES, days=DAYS, telemetry_days=1))
    options = api.StoreOptions(tmp_path / "fleet.duckdb")
    result = api.ingest_paths(options, [out], IngestOptions(strict=True))
    assert {t.table: t.new for t in result.tables} == generated.rows
    state = api.node_state(options).state
    assert state.height == NODES
    assert int(state["gpus"].sum()) == generated.gpus
    # no node over capacity; high priority alone never above all work
    assert state.filter(pl.col("gpus_used") > pl.col("gpus")).is_empty()
    assert state.filter(pl.col("gpus_used_high") > pl.col("gpus_used")).is_empty()
    assert state.filter(pl.col("cpus_used") > pl.col("cpus") + 1e-9).is_empty()
    # the ledger adds up on healthy nodes: installed = used + free
    healthy = state.filter(pl.col("health") == "healthy")
    assert int((healthy["gpus_used"] + healthy["free_gpus"]).sum()) == int(healthy["gpus"].sum())
    summary = api.summarize(options)
    assert summary.queued > 0


@pytest.mark.slow
def test_generated_fleet_harvests(tmp_path: Path) -> None:
    """The harvesting replay on a generated fleet: sleeps, lending, figures in range.

    Which policy loses least is a fleet-scale effect (at 200 nodes over 3 days the
    runs diverge too early to rank them); benchmarks/README.md reports it.
    """
    from fleetaudit.api.harvest_api import HarvestRun, whatif_harvesting

    nodes = 19_400 if FULL else 200
    out = tmp_path / "fleet"
    api.generate_fleet(
        out, GenerateOptions(nodes=nodes, days=5, telemetry_days=3, telemetry_step_s=900)
    )
    options = api.StoreOptions(tmp_path / "fleet.duckdb")
    api.ingest_paths(options, [out], IngestOptions(strict=True))
    result = whatif_harvesting(options, HarvestRun(since=timedelta(days=3), record=False))
    assert result.sleeps > 0 and not result.notes
    for r in result.policies:
        assert r.overcommitted == 0
        assert r.allocation_rate is not None and r.allocation_rate_high is not None
        assert r.allocation_rate > r.allocation_rate_high + 0.1
        assert r.standby_gpu_hours > 0 and 0 < (r.harvested_share or 0) <= 1
        assert r.forced_kills <= r.evictions
