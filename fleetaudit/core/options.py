"""The options of the commands, and the names and defaults they declare, without any engine.

``fleetaudit --help`` and the option parsing of every command need these before
any engine is imported (polars, numpy, duckdb, numba take most of a command's
start-up), so this module imports the standard library only; the engines import
their options from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from fleetaudit.core.errors import UsageError

DEFAULT_LOCK_TIMEOUT = 30.0
"""Seconds a command waits while another fleetaudit process writes the store."""

DEFAULT_DB = "fleetaudit.duckdb"
"""The store's file when neither ``--db`` nor ``$FLEETAUDIT_DB`` names one."""

REJECTS_LIMIT = 100
"""Rows ``fleetaudit rejects`` shows unless ``--limit`` says otherwise (0: all)."""

REPORT_SINCE = timedelta(days=7)
"""``fleetaudit report --since``: the window's length."""

REPORT_STEP = timedelta(minutes=15)
"""``fleetaudit report --step``: the sampling step of its schedulable figures."""

REPORT_QUARANTINE = 3
"""``fleetaudit report --quarantine``: failures in the window that make a node a
quarantine candidate."""

REPORT_INTERRUPTED_WITHIN = timedelta(minutes=5)
"""``fleetaudit report --interrupted-within``: an allocation that ended this close to its
node's failure was interrupted by it."""


def duration_text(value: float | timedelta) -> str:
    """A default duration as the command line spells it: in the largest unit that divides it,
    and in seconds below two minutes (``parse_duration`` reads it back).

    >>> [duration_text(s) for s in (60, 90, 300, 3600, 5400, 604800)]
    ['60s', '90s', '5m', '1h', '90m', '7d']
    >>> duration_text(timedelta(minutes=15))
    '15m'
    """
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= max(size, 120) and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


@dataclass(frozen=True)
class IngestFormat:
    """An ``ingest --format`` as the command line knows it before its reader loads: which of
    ingest's per-format options apply to it, and how its files are told apart. Its reader
    (and collector, where it has one) is bound in ``fleetaudit.inputs.ingest.ADAPTERS``,
    keyed by the same names (a test holds the two equal)."""

    name: str
    options: tuple[str, ...] = ()  # the per-format ingest options (flags) that apply to it
    files: str = "named"  # "named": --table or a file's stem names its table; else why not
    collector: str | None = None  # the flag that makes ingest fetch the exports itself

    @property
    def takes_table(self) -> bool:
        return self.files == "named"


INGEST_FORMAT_SPECS: dict[str, IngestFormat] = {
    f.name: f
    for f in (
        IngestFormat("native"),
        IngestFormat(
            "alibaba-gpu-v2023", ("--trace-start",), files="its files name their tables"
        ),
        IngestFormat(
            "alibaba-gpu-v2026", ("--trace-start", "--days"), files="its files name their tables"
        ),
        IngestFormat(
            "kubernetes",
            ("--snapshot-time", "--tenant-label", "--priority-map"),
            files="its files are recognised by content",
        ),
        IngestFormat("prometheus", files="its files are recognised by content"),
        IngestFormat(
            "slurm",
            ("--priority-map", "--timezone", "--since"),
            files="its files are recognised by content",
            collector="--from-slurm",
        ),
    )
}
"""Every ``ingest --format``, the default first: one entry each."""

INGEST_FORMATS = tuple(INGEST_FORMAT_SPECS)
"""``ingest --format`` values (fleetaudit.inputs.ingest.FORMATS)."""

SLURM_COLLECT_SINCE = timedelta(days=1)
"""``ingest --from-slurm --since``: how far back the fetched history reaches, by default."""

ALIBABA_TRACE_START = datetime(2023, 1, 1)
"""The instant second 0 of an alibaba-gpu-v2023 trace stands for, by default."""

ASI_TRACE_START = datetime(2026, 1, 1)  # a Thursday: day 109 is Monday 2026-04-20
"""The instant day 0 of an alibaba-gpu-v2026 trace starts at, by default."""

ASI_RELEASE_DAYS = 7
"""Days ``generate --format alibaba-gpu-v2026`` writes by default (the paper week)."""

PLACEMENT_POLICIES = ("first-fit", "best-fit", "random", "fgd", "topology")
"""``whatif placement --policy`` values, in the order they run and print."""

PLACEMENT_QUEUES = ("fifo", "backfill")
"""``--queue`` values of the by-time replay (fleetaudit.whatif.placement.QUEUES, held equal by a test)."""

COMPACTION_ENGINES = ("local", "spark")
"""``whatif compaction --engine``: where the partitions' searches run (the first is the default)."""

SCAN_ENGINES = ("duckdb", "spark")
"""``rollup --engine``: the engine that scans the raw telemetry (the first is the default)."""

OVER_TIME_POLICIES = ("recorded", *PLACEMENT_POLICIES)
"""``whatif compaction --over ... --policy`` values: the recorded node, or a placement policy."""

VICTIM_POLICIES = ("spotgpu", "newest", "smallest", "random")
"""``whatif harvesting --policy`` values; their indices are the kernel's policy codes."""

ROLLUP_INTERVAL_S = 3600
"""``rollup --interval`` by default: one hour."""

ROLLUP_SOURCES = ("native",)
"""``rollup --format`` values (the keys of fleetaudit.api.rollup_api.SOURCES, held equal by a test)."""


@dataclass(frozen=True)
class GenerateOptions:
    """What to generate.

    Attributes:
        nodes: GPU nodes in the fleet (ASI: about 19,400).
        days: length of the allocation history, ending at `end`.
        seed: seed of every random draw; the same options give the same bytes.
        format: "parquet" or "csv".
        telemetry_step_s: seconds between telemetry samples of a GPU.
        telemetry_days: telemetry covers only the last `telemetry_days` before
            `end` (capped at `days`; 0 writes an empty telemetry table).
        end: the export time; allocations span [end - days, end]. A naive
            datetime is taken as UTC.
        harvested_nights: the record of a fleet that already harvests, as ASI's
            does: the chance that a sleeping warm container's GPUs carry
            low-priority work on a given night (ASI takes 90% of its standby
            GPU-hours; 0.9 here records work on about 76% of them, since
            containers also sleep by day and only nights are harvested). That
            work shares the container's GPUs, CPUs and memory, so such a node is
            over capacity in the record while the container sleeps. 0 (the
            default) records none, and every node stays within capacity.
        node_events: health intervals (``node_events``) per node and year, over the
            ``node_events_days`` before `end`: GPU XIDs, drains, outages, cordons and
            degraded spells, a few nodes failing far more often than the rest, some
            outages told by two sources; the nodes unhealthy at the export get an
            open interval from when they left service. 0 (the default) writes no
            node_events table.
        node_events_days: the days of health history before `end` (default a year).
    """

    nodes: int = 19_400
    days: float = 90.0
    seed: int = 0
    format: str = "parquet"
    telemetry_step_s: int = 300
    telemetry_days: float = 2.0
    end: datetime = datetime(2026, 5, 1, tzinfo=timezone.utc)
    harvested_nights: float = 0.0
    node_events: float = 0.0
    node_events_days: float = 365.0


@dataclass(frozen=True)
class SlurmGenerateOptions:
    """What to generate: ``nodes`` GPU nodes, ``jobs`` sacct jobs over ``days`` ending at ``end``."""

    nodes: int = 2_000
    jobs: int = 1_000_000
    days: float = 60.0
    seed: int = 0
    end: datetime = datetime(2026, 5, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class CompactionOptions:
    """Budgets and migration costs of a compaction what-if; the defaults are the CLI's.

    Args:
        depth: levels of an ejection chain (1: direct moves only).
        rounds: passes over the targets of a partition.
        breadth: destinations tried per level of an ejection chain.
        partition_nodes: nodes per partition (whole switch domains).
        jobs: worker processes for the partitions (1: in this process).
        min_remaining_s: an allocation whose known end_time is within this of t
            is not moved.
        state_gib_per_gpu: state moved per GPU of an allocation (GiB).
        bandwidth_gbps: transfer rate of one move (gigabits per second).
        warmup_s: fixed pause of a move on top of its transfer.
        exact: also solve partitions of up to ``exact_nodes`` nodes exactly.
        exact_nodes: the largest partition solved exactly.
        exact_time_limit_s: the ILP's time limit per partition.
        stop_after_gpus: stop the search once its ledger moves more GPUs than
            this (None: never). The ledger's moves within this many GPUs are
            those of the full search; compaction over time applies no more.
        count_instances: evaluate the shapes' instances before and after the
            ledger (compaction over time counts them itself, per round).
    """

    depth: int = 3
    rounds: int = 5
    breadth: int = 8
    partition_nodes: int = 500
    jobs: int = 1
    min_remaining_s: float = 3600.0
    state_gib_per_gpu: float = 80.0
    bandwidth_gbps: float = 100.0
    warmup_s: float = 60.0
    exact: bool = False
    exact_nodes: int = 40
    exact_time_limit_s: float = 60.0
    stop_after_gpus: float | None = None
    count_instances: bool = True

    def check(self) -> None:
        """Raise ValueError naming the first option out of range."""
        for name in ("depth", "rounds", "breadth", "partition_nodes", "jobs", "exact_nodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be 1 or more")
        for name in ("min_remaining_s", "state_gib_per_gpu", "warmup_s", "exact_time_limit_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be 0 or more")
        if not math.isfinite(self.bandwidth_gbps) or self.bandwidth_gbps <= 0:
            raise ValueError("bandwidth_gbps must be above 0")


@dataclass(frozen=True)
class HarvestRun:
    """What ``whatif harvesting`` runs (defaults are the command line's and the SPEC's)."""

    policies: tuple[str, ...] = VICTIM_POLICIES
    seed: int = 0
    at: datetime | None = None
    since: timedelta = timedelta(days=7)
    scenario: str | None = None
    idle_sm: float = 0.05  # these five are also the engine's HarvestOptions defaults
    idle_for: timedelta = timedelta(seconds=1800)
    eviction_delay_mean: timedelta = timedelta(seconds=13)
    eviction_delay_p95: timedelta = timedelta(seconds=48)
    kill_after: timedelta = timedelta(seconds=60)
    workers: int = 2  # policies replayed at once on a large window (1 = one after the other)
    record: bool = True  # keep the run's document in the store for the report

    def as_json(self) -> dict[str, Any]:
        """The options as recorded with the run."""
        return {
            "policies": list(self.policies),
            "seed": self.seed,
            "since_s": self.since.total_seconds(),
            "idle_sm": self.idle_sm,
            "idle_for_s": self.idle_for.total_seconds(),
            "eviction_delay_mean_s": self.eviction_delay_mean.total_seconds(),
            "eviction_delay_p95_s": self.eviction_delay_p95.total_seconds(),
            "kill_after_s": self.kill_after.total_seconds(),
        }


@dataclass(frozen=True)
class OverTimeOptions:
    """The window's replay: tick interval, migration budget, arrival placement and queue.

    Args:
        every_s: seconds between compaction rounds.
        moves_per_hour: GPUs that may move per hour of the window.
        policy: ``recorded`` or a placement policy.
        queue: ``fifo`` or ``backfill``.
        seed: the seed of the ``random`` policy.
        observe_shapes: the shapes (the first ones: most queued first) whose
            instances each round counts; the search's objective keeps them all.
    """

    every_s: float = 3600.0
    moves_per_hour: float = 64.0
    policy: str = "recorded"
    queue: str = PLACEMENT_QUEUES[0]
    seed: int = 0
    observe_shapes: int = 10

    def check(self) -> None:
        """Raise UsageError naming the first option out of range."""
        if not math.isfinite(self.every_s) or self.every_s <= 0:
            raise UsageError("--every: give a positive duration (e.g. 1h)")
        if not math.isfinite(self.moves_per_hour) or self.moves_per_hour < 0:
            raise UsageError("--moves-per-hour: must be 0 or more")
        if self.policy not in OVER_TIME_POLICIES:
            raise UsageError(f"--policy: use one of {', '.join(OVER_TIME_POLICIES)}")
        if self.queue not in PLACEMENT_QUEUES:
            raise UsageError(f"--queue: use one of {', '.join(PLACEMENT_QUEUES)}")

    @property
    def budget_per_tick(self) -> float:
        return self.moves_per_hour * self.every_s / 3600.0
