"""Placement what-if: fill mode and by-time replay of requests onto a fleet under a policy.

Pure functions over the store's ``nodes`` and ``requests`` frames (extra
columns are ignored; neither frame is mutated) and a frozen
:class:`PlacementOptions`. One run is deterministic in its seed.

Modules: :mod:`~fleetaudit.whatif.placement.fleet` (node arrays, domains, free units),
:mod:`~fleetaudit.whatif.placement.workload` (per-request pod arrays, the fragmentation
measure), :mod:`~fleetaudit.whatif.placement.policies` (node choice per policy, state
changes), :mod:`~fleetaudit.whatif.placement.fill` (fill mode) and
:mod:`~fleetaudit.whatif.placement.replay` (the by-time replay).
"""

from __future__ import annotations

# (the `X as X` imports: engine internals that tests check, importable from here as before)
from fleetaudit.whatif.placement.fill import FillResult, fill_curves, simulate_fill
from fleetaudit.whatif.placement.fleet import _U as _U
from fleetaudit.whatif.placement.fleet import _prepare_fleet as _prepare_fleet
from fleetaudit.whatif.placement.policies import POLICIES
from fleetaudit.whatif.placement.replay import (
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
    "LOCALITIES",
    "POLICIES",
    "QUEUES",
    "FillResult",
    "PlacementOptions",
    "Replay",
    "ReplayResult",
    "ReplayView",
    "fill_curves",
    "fleet_fragmentation",
    "replay_curves",
    "simulate_fill",
    "simulate_replay",
]
