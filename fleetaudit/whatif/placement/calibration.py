"""The calibrated replay: a window's recorded demand replayed under a queue discipline, and
the calibration that picks the discipline which reproduces the record best.

Every replay-based what-if (``whatif placement`` by time, ``whatif compaction --over``,
the remedies) compares a changed fleet against a *baseline*: the recorded fleet replayed
under the discipline that reproduces the record. The library surface:

- :func:`window_demand` reads a window's demand off the record (:class:`Demand`: each
  request with its recorded run, :mod:`~fleetaudit.whatif.placement.record`);
- :func:`replay_demand` replays a :class:`Demand` on a fleet (the recorded one, or an
  edited one) under a discipline and returns the
  :class:`~fleetaudit.whatif.placement.replay.ReplayResult` (started, waits, the
  allocation curve, the holds it decided);
- :func:`compare` sets a replay's figures beside the record's (:class:`Fit`), with the
  tolerance every output warns against;
- :func:`calibrate` replays every discipline and picks the best (:class:`Calibration`).

The baseline places each single-pod request on its recorded node when that node has
room (policy ``recorded``), best-fit otherwise, and holds the requests that find room on
arrival until their recorded start (their recorded wait was not for capacity). A
what-if replays the same demand with the baseline's holds (``hold=baseline.holds``), so
that only capacity makes it differ: the empty edit gives the baseline back exactly.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

import polars as pl

from fleetaudit.core.gcpause import paused_gc
from fleetaudit.core.options import (
    CALIBRATION_STARTS_TOLERANCE_PCT,
    CALIBRATION_WAIT_FACTOR,
    QUEUE_DISCIPLINES,
)
from fleetaudit.model.capacity import Health
from fleetaudit.whatif.placement.record import QueueFigures, link_runs, record_figures
from fleetaudit.whatif.placement.replay import (
    Replay,
    ReplayResult,
    ReplayView,
    _check_replay,
    curve_marks,
)
from fleetaudit.whatif.placement.workload import PlacementOptions

BASELINE_POLICY = "recorded"
"""The baseline's placement: a single pod on its recorded node where it has room, else best-fit."""


@dataclass(frozen=True)
class Demand:
    """A window's demand as the record shows it (see :func:`window_demand`).

    Attributes:
        allocations: the recorded allocations (those active at ``start`` are the
            replay's starting state; they end at their end_time).
        requests: every request (they all weigh the fragmentation measure), with
            the recorded run of each (``run_s``, ``checkpoint_s``,
            ``recorded_node``: :func:`~fleetaudit.whatif.placement.record.link_runs`).
        start, end: the window [start, end).
        record: the record's own figures over the window (:class:`QueueFigures`).
        health: the fleet's health over time, which every replay of this demand
            follows (GPUs out of service take no work; a failure ends what runs
            there); None: every node healthy as its nodes row says.
    """

    allocations: pl.DataFrame
    requests: pl.DataFrame
    start: datetime
    end: datetime
    record: QueueFigures
    health: Health | None = None

    @cached_property
    def recorded_nodes(self) -> dict[str, str]:
        """request_id -> the node its single recorded allocation ran on."""
        linked = self.requests.select(
            pl.col("request_id").cast(pl.String), "recorded_node"
        ).drop_nulls()
        return dict(linked.iter_rows())


def window_demand(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    requests: pl.DataFrame,
    start: datetime,
    end: datetime,
    step_pct: float = 5.0,
    health: Health | None = None,
) -> Demand:
    """The demand of the window [start, end) and the record's figures over it.

    ``step_pct`` spaces the allocation curve's instants as a replay's curve
    (every ``step_pct``% of the window, both ends included); ``health``: as
    :class:`Demand`.
    """
    linked = link_runs(allocations, requests)
    return Demand(
        allocations=allocations,
        requests=linked,
        start=start,
        end=end,
        record=record_figures(
            nodes, allocations, linked, start, end, _instants(start, end, step_pct)
        ),
        health=health,
    )


def _instants(start: datetime, end: datetime, step_pct: float) -> list[datetime]:
    span = end - start
    return [start + span * (m / 100) for m in curve_marks(step_pct)]


def replay_demand(
    nodes: pl.DataFrame,
    demand: Demand,
    discipline: str,
    *,
    policy: str = BASELINE_POLICY,
    hold: str | Mapping[str, int] | None = "record",
    preempt: bool | None = None,
    seed: int = 0,
    step_pct: float = 5.0,
    empty: bool = False,
    on_tick: Callable[[ReplayView, int], None] | None = None,
    ticks: Sequence[int] = (),
    fragmentation: bool = False,
) -> ReplayResult:
    """Replay ``demand`` on the fleet ``nodes`` under ``discipline``.

    Args:
        nodes: the fleet (the recorded one, or an edited one: recorded work on a
            node it lacks is left out of the starting state).
        demand: what :func:`window_demand` read.
        discipline: one of :data:`~fleetaudit.whatif.placement.replay.QUEUES`.
        policy: ``recorded`` (the baseline's) or a placement policy.
        hold: ``record`` decides the holds (a baseline), a mapping reuses a
            baseline's (``baseline.holds``), None holds nothing.
        preempt: high priority evicts low priority (None: when the arrivals hold
            both priorities and the discipline is a named one).
        seed, step_pct: the ``random`` policy's seed, the curve's step.
        empty: start from an empty fleet instead of the recorded state.
        on_tick, ticks: as :func:`~fleetaudit.whatif.placement.replay.simulate_replay`.
        fragmentation: sample the curve's fragmented_pct too (NaN otherwise: it
            costs a pass over the fleet per point, and a baseline does not need it).

    Returns:
        The replay's :class:`ReplayResult` (``.figures()`` for its
        :class:`QueueFigures`, ``.holds`` for a what-if to reuse).
    """
    prefer = demand.recorded_nodes if policy == BASELINE_POLICY else None
    options = PlacementOptions(
        policy="best-fit" if policy == BASELINE_POLICY else policy, seed=seed, step_pct=step_pct
    )
    _check_replay(options, demand.start, demand.end, discipline)
    with paused_gc():
        replay = Replay(
            nodes, demand.allocations, demand.requests, options, demand.start, demand.end, empty,
            discipline, prefer=prefer, hold=hold, preempt=preempt, fragmentation=fragmentation,
            health=demand.health,
        )  # fmt: skip
        return replay.run(on_tick, ticks)


@dataclass(frozen=True)
class Fit:
    """A replay's figures against the record's, and whether they agree within the tolerance.

    Attributes:
        discipline: the replay's queue discipline.
        replay, record: the two sides' :class:`QueueFigures`.
        started_gap_pct: (replay started - record started) / record started, in %.
        wait_p50_ratio, wait_p90_ratio: replay / record (each plus one second, so a
            zero wait compares); None where a side started nothing.
        allocation_gap_pts: the mean absolute difference of the allocation curves,
            in percentage points.
        score: the calibration's distance (lower is closer; see :func:`compare`).
        within_tolerance: starts within the tolerance and both waits within the
            factor.
        notes: what is outside the tolerance, in words.
    """

    discipline: str
    replay: QueueFigures
    record: QueueFigures
    started_gap_pct: float | None
    wait_p50_ratio: float | None
    wait_p90_ratio: float | None
    allocation_gap_pts: float
    score: float
    within_tolerance: bool
    notes: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        def r(x: float | None, d: int = 3) -> float | None:
            return None if x is None else round(x, d)

        return {
            "discipline": self.discipline,
            "replay": self.replay.as_json(),
            "started_gap_pct": r(self.started_gap_pct, 2),
            "wait_p50_ratio": r(self.wait_p50_ratio),
            "wait_p90_ratio": r(self.wait_p90_ratio),
            "allocation_gap_pts": round(self.allocation_gap_pts, 2),
            "score": round(self.score, 4),
            "within_tolerance": self.within_tolerance,
            "notes": list(self.notes),
        }


def _ratio(replay: float | None, record: float | None) -> float | None:
    if replay is None or record is None:
        return None
    return (replay + 1.0) / (record + 1.0)


def compare(discipline: str, replay: QueueFigures, record: QueueFigures) -> Fit:
    """Set a replay's figures beside the record's.

    The tolerance: started within :data:`CALIBRATION_STARTS_TOLERANCE_PCT` (2%) of the
    record's, and wait p50 and p90 each within a factor
    :data:`CALIBRATION_WAIT_FACTOR` (2) of the record's. The score adds the started gap
    in units of that tolerance, each wait's log2 ratio (the factor 2 is one unit) and
    the allocation curves' mean gap in units of 5 points.

    >>> from datetime import datetime
    >>> a = QueueFigures(100, 98, 2, 0, 60.0, 600.0, (datetime(2026, 1, 1),), (90.0,))
    >>> b = QueueFigures(100, 97, 3, 0, 40.0, 1500.0, (datetime(2026, 1, 1),), (88.0,))
    >>> fit = compare("kubernetes", a, b)
    >>> round(fit.started_gap_pct, 2), fit.within_tolerance, fit.notes
    (1.03, False, ("wait p90 600 s is 0.40x the record's 1,500 s (beyond a factor 2)",))
    """
    notes: list[str] = []
    gap = None
    if record.started:
        gap = 100.0 * (replay.started - record.started) / record.started
        if abs(gap) > CALIBRATION_STARTS_TOLERANCE_PCT:
            notes.append(
                f"started {replay.started:,} against the record's {record.started:,} "
                f"({gap:+.1f}%, beyond {CALIBRATION_STARTS_TOLERANCE_PCT:g}%)"
            )
    elif replay.started:
        notes.append(f"started {replay.started:,}; the record started none")
    p50 = _ratio(replay.wait_p50_s, record.wait_p50_s)
    p90 = _ratio(replay.wait_p90_s, record.wait_p90_s)
    factor = CALIBRATION_WAIT_FACTOR
    for name, ratio, mine, theirs in (
        ("p50", p50, replay.wait_p50_s, record.wait_p50_s),
        ("p90", p90, replay.wait_p90_s, record.wait_p90_s),
    ):
        if ratio is not None and not 1 / factor <= ratio <= factor:
            notes.append(
                f"wait {name} {mine:,.0f} s is {ratio:.{2 if ratio < 1 else 1}f}x the record's "
                f"{theirs:,.0f} s "
                f"(beyond a factor {factor:g})"
            )
    pairs = list(zip(replay.allocated_pct, record.allocated_pct, strict=False))
    alloc_gap = sum(abs(a - b) for a, b in pairs) / len(pairs) if pairs else 0.0
    score = (abs(gap or 0.0) / CALIBRATION_STARTS_TOLERANCE_PCT
             + sum(abs(math.log2(x)) for x in (p50, p90) if x is not None) + alloc_gap / 5.0)  # fmt: skip
    return Fit(
        discipline=discipline,
        replay=replay,
        record=record,
        started_gap_pct=gap,
        wait_p50_ratio=p50,
        wait_p90_ratio=p90,
        allocation_gap_pts=alloc_gap,
        score=score,
        within_tolerance=not notes,
        notes=tuple(notes),
    )


@dataclass(frozen=True)
class Calibration:
    """Every discipline's replay of one window against the record, and the best.

    Attributes:
        start, end: the window.
        record: the record's figures.
        fits: one :class:`Fit` per discipline, in the order run.
        best: the discipline with the lowest score (the suggested one wins ties).
        suggested: what the store's format suggests (None: nothing).
        seconds: the replays' wall time.
        results: with ``keep_results``, the replays of the disciplines within a tie of
            the lowest score (the best among them), by discipline.
    """

    start: datetime
    end: datetime
    record: QueueFigures
    fits: tuple[Fit, ...]
    best: str
    suggested: str | None = None
    seconds: float = 0.0
    results: dict[str, ReplayResult] = field(default_factory=dict, repr=False, compare=False)

    def fit(self, discipline: str) -> Fit:
        return next(f for f in self.fits if f.discipline == discipline)

    def as_json(self) -> dict[str, Any]:
        return {
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "record": self.record.as_json(),
            "disciplines": [f.as_json() for f in self.fits],
            "best": self.best,
            "suggested": self.suggested,
            "tolerance": tolerance_json(),
        }


def tolerance_json() -> dict[str, float]:
    """The tolerance a baseline is held to, as the JSON documents state it."""
    return {"started_pct": CALIBRATION_STARTS_TOLERANCE_PCT, "wait_factor": CALIBRATION_WAIT_FACTOR}


_TIE = 0.05  # scores closer than this are a tie, which the suggested discipline wins


def calibrate(
    nodes: pl.DataFrame,
    demand: Demand,
    disciplines: Sequence[str] = QUEUE_DISCIPLINES,
    suggested: str | None = None,
    keep_results: bool = False,
    preempt: bool | None = None,
) -> Calibration:
    """Replay ``demand`` on the recorded fleet under each discipline (the baseline's
    placement and holds) and pick the one closest to the record.

    ``keep_results`` keeps the replays that may be chosen (:attr:`Calibration.results`),
    so that the chosen one need not run again: a replay is let go as soon as another
    scores better than it by more than a tie (it can no longer be chosen; at ASI scale
    that lowered the calibration's peak from 6.11 to 5.74 GiB). ``preempt`` as
    :func:`replay_demand`.
    """
    began = time.perf_counter()
    fits: list[Fit] = []
    results: dict[str, ReplayResult] = {}
    for discipline in disciplines:
        result = replay_demand(nodes, demand, discipline, preempt=preempt)
        fits.append(compare(discipline, result.figures(), demand.record))
        if keep_results:
            results[discipline] = result
            least = min(f.score for f in fits)
            for fit in fits:
                if fit.score > least + _TIE:
                    results.pop(fit.discipline, None)
        del result
    lowest = min(f.score for f in fits)
    tied = [f.discipline for f in fits if f.score <= lowest + _TIE]
    best = suggested if suggested in tied else tied[0]
    return Calibration(
        start=demand.start,
        end=demand.end,
        record=demand.record,
        fits=tuple(fits),
        best=best,
        suggested=suggested,
        seconds=time.perf_counter() - began,
        results=results,
    )
