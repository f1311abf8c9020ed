"""Placement what-if: fill mode and by-time replay of requests onto a fleet under a policy.

Pure functions over the store's ``nodes`` and ``requests`` frames (extra
columns are ignored; neither frame is mutated) and a frozen
:class:`PlacementOptions`. One run is deterministic in its seed.

Modules: :mod:`~fleetaudit.whatif.placement.fleet` (node arrays, domains, free units),
:mod:`~fleetaudit.whatif.placement.workload` (per-request pod arrays, the fragmentation
measure), :mod:`~fleetaudit.whatif.placement.policies` (node choice per policy, state
changes), :mod:`~fleetaudit.whatif.placement.fill` (fill mode),
:mod:`~fleetaudit.whatif.placement.record` (what the record says of a window: each
request's recorded run, the record's figures), :mod:`~fleetaudit.whatif.placement.replay`
(the by-time replay and its queue disciplines) and
:mod:`~fleetaudit.whatif.placement.calibration` (the calibrated replay of a window's
demand, and the calibration that picks the discipline reproducing the record).
"""

from __future__ import annotations

# (the `X as X` imports: engine internals that tests check, importable from here as before)
from fleetaudit.whatif.placement.calibration import (
    BASELINE_POLICY,
    Calibration,
    Demand,
    Fit,
    calibrate,
    compare,
    replay_demand,
    window_demand,
)
from fleetaudit.whatif.placement.fill import FillResult, fill_curves, simulate_fill
from fleetaudit.whatif.placement.fleet import _U as _U
from fleetaudit.whatif.placement.fleet import _prepare_fleet as _prepare_fleet
from fleetaudit.whatif.placement.policies import POLICIES
from fleetaudit.whatif.placement.record import QueueFigures, link_runs
from fleetaudit.whatif.placement.replay import (
    DISCIPLINES,
    QUEUES,
    Replay,
    ReplayResult,
    ReplayView,
    replay_curves,
    simulate_replay,
)
from fleetaudit.whatif.placement.workload import LOCALITIES, PlacementOptions, fleet_fragmentation
from fleetaudit.whatif.placement.workload import _fragmentation as _fragmentation
from fleetaudit.whatif.placement.workload import _prepare_workload as _prepare_workload
from fleetaudit.whatif.placement.workload import _Shapes as _Shapes

__all__ = [
    "BASELINE_POLICY",
    "DISCIPLINES",
    "LOCALITIES",
    "POLICIES",
    "QUEUES",
    "Calibration",
    "Demand",
    "FillResult",
    "Fit",
    "PlacementOptions",
    "QueueFigures",
    "Replay",
    "ReplayResult",
    "ReplayView",
    "calibrate",
    "compare",
    "fill_curves",
    "fleet_fragmentation",
    "link_runs",
    "replay_curves",
    "replay_demand",
    "simulate_fill",
    "simulate_replay",
    "window_demand",
]
