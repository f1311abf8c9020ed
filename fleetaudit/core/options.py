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
from pathlib import Path
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

DEMAND_DEFAULT_SHAPES = 20
"""``fleetaudit report`` evaluates the demand's heaviest shapes, this many by default..."""

DEMAND_PER_MODEL_SHAPES = 3
"""...and, by default, every GPU model's heaviest shapes, this many, on top of them."""

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
        IngestFormat("alibaba-gpu-v2023", ("--trace-start",), files="its files name their tables"),
        IngestFormat(
            "alibaba-gpu-v2026", ("--trace-start", "--days"), files="its files name their tables"
        ),
        IngestFormat(
            "kubernetes",
            (
                "--snapshot-time",
                "--tenant-label",
                "--priority-map",
                "--allow-mixed",
                "--kubectl",
                "--context",
                "--kubeconfig",
                "--namespace",
                "--keep",
            ),
            files="its files are recognised by content",
            collector="--kubectl",
        ),
        IngestFormat(
            "prometheus",
            (
                "--url",
                "--since",
                "--until",
                "--step",
                "--bearer-token-file",
                "--user",
                "--ca-file",
                "--insecure-skip-verify",
                "--header",
            ),
            files="its files are recognised by content",
            collector="--url",
        ),
        IngestFormat(
            "slurm",
            ("--priority-map", "--timezone", "--since"),
            files="its files are recognised by content",
            collector="--from-slurm",
        ),
    )
}
"""Every ``ingest --format``, the default first: one entry each."""

KUBECTL_CHUNK_SIZE = 500
"""Objects per page that ``ingest --kubectl`` asks of the API server (kubectl's own default):
a large cluster is listed page by page."""
KUBECTL_REQUEST_TIMEOUT = "60s"
"""How long kubectl waits for one request of the API server (its --request-timeout)."""
KUBECTL_TIMEOUT_S = 1800.0
"""How long one kubectl run of ``ingest --kubectl`` may take in all before it is stopped."""


@dataclass(frozen=True)
class KubectlOptions:
    """What ``ingest --format kubernetes --kubectl`` runs: the collector's settings."""

    started: datetime  # naive UTC: the call's start, the snapshot's time
    context: str | None = None
    kubeconfig: str | None = None
    namespaces: tuple[str, ...] = ()  # none: every namespace (-A)
    keep: str | None = None  # a folder for the raw snapshot, dated
    kubectl: str = "kubectl"
    chunk_size: int = KUBECTL_CHUNK_SIZE
    request_timeout: str = KUBECTL_REQUEST_TIMEOUT
    timeout_s: float = KUBECTL_TIMEOUT_S


INGEST_FORMATS = tuple(INGEST_FORMAT_SPECS)
"""``ingest --format`` values (fleetaudit.inputs.ingest.FORMATS)."""

SLURM_COLLECT_SINCE = timedelta(days=1)
"""``ingest --from-slurm --since``: how far back the fetched history reaches, by default."""

PULL_STEP = timedelta(seconds=60)
"""``ingest --format prometheus --url --step``: the resolution of the pulled series."""

PULL_POINTS_PER_SERIES = 10_000
"""Steps per ``query_range`` call at most: Prometheus refuses more than 11,000 points per
series."""

PULL_POINTS_PER_QUERY = 500_000
"""Points (series x steps) per ``query_range`` call at most: far within Prometheus'
``--query.max-samples`` (50 million by default), and where a server answers fastest per
point (a day of 2,000 GPUs took 13-17 s as one call of 2.9 M points, 4 s as six of
480,000: benchmarks/README.md); a fleet with more series per metric is split by host. A
server that still refuses (a lower setting) gets halves."""


@dataclass(frozen=True)
class PrometheusPull:
    """What ``ingest --format prometheus --url`` pulls, and how it talks to the server.

    Attributes:
        url: the Prometheus (Thanos, Mimir, VictoriaMetrics) base URL; its
            ``/api/v1/query_range`` is asked.
        since: the length of the window pulled, ending at ``until``.
        until: the window's end (naive UTC; None: now). Both ends are rounded down to
            a multiple of ``step`` since the epoch, so that runs over overlapping
            windows ask for the same instants.
        step: the resolution (each step averages the raw samples of the step before it).
        bearer_token_file: a file whose content is sent as ``Authorization: Bearer``.
        user: basic auth, ``NAME:PASSWORD`` or ``NAME`` (the password then comes from
            ~/.netrc); None: ~/.netrc's entry for the host, if any.
        ca_file: PEM certificates to verify the server with (default: the system's).
        insecure_skip_verify: do not verify the server's certificate.
        headers: extra request headers (a tenant: ``X-Scope-OrgID``), as (name, value).
        timeout_s: seconds a request may wait for the server between two reads.
        retries: attempts after the first for a request that times out or gets 429,
            502, 503 or 504, waiting ``retry_wait_s`` x 2^attempt in between.
        points_per_query: the most points (series x steps) one request asks for.
    """

    url: str
    since: timedelta
    until: datetime | None = None
    step: timedelta = PULL_STEP
    bearer_token_file: Path | None = None
    user: str | None = None
    ca_file: Path | None = None
    insecure_skip_verify: bool = False
    headers: tuple[tuple[str, str], ...] = ()
    timeout_s: float = 120.0
    retries: int = 5
    retry_wait_s: float = 1.0
    points_per_query: int = PULL_POINTS_PER_QUERY


ALIBABA_TRACE_START = datetime(2023, 1, 1)
"""The instant second 0 of an alibaba-gpu-v2023 trace stands for, by default."""

ASI_TRACE_START = datetime(2026, 1, 1)  # a Thursday: day 109 is Monday 2026-04-20
"""The instant day 0 of an alibaba-gpu-v2026 trace starts at, by default."""

ASI_RELEASE_DAYS = 7
"""Days ``generate --format alibaba-gpu-v2026`` writes by default (the paper week)."""

PLACEMENT_POLICIES = ("first-fit", "best-fit", "random", "fgd", "topology")
"""``whatif placement --policy`` values, in the order they run and print."""

QUEUE_DISCIPLINES = ("kubernetes", "kueue-best-effort-fifo", "kueue-strict-fifo", "slurm-backfill")
"""The queue disciplines named after the schedulers operators run (docs/placement.md)."""

PLACEMENT_QUEUES = (*QUEUE_DISCIPLINES, "fifo", "backfill")
"""``--queue`` values of the by-time replay (fleetaudit.whatif.placement.QUEUES, held equal
by a test): the named disciplines, then the plain queues (arrival order alone)."""

CALIBRATION_STARTS_TOLERANCE_PCT = 2.0
"""A baseline replay whose started requests differ from the record's by more than this % is flagged."""

CALIBRATION_WAIT_FACTOR = 2.0
"""A baseline replay whose wait p50 or p90 is beyond this factor of the record's is flagged."""

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

ASI_ROLLED_MANIFEST = "alibaba-gpu-v2026.rolled.json"
"""The file that makes a folder a rolled-up ASI release (``rollup --format alibaba-gpu-v2026``),
which ``ingest`` loads as the release (fleetaudit.inputs.ingest.asi2026.write_rolled)."""

ROLLUP_SOURCES = ("native", "prometheus", "alibaba-gpu-v2026")
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


HARVEST_SINCE = timedelta(days=7)
"""``whatif harvesting --since`` by default (from the data's first record when that is later)."""

WINDOW_LEAST = timedelta(hours=1)
"""A default window fitted to data shorter than this (a single snapshot) is this long."""

PLACEMENT_SINCE = timedelta(days=1)
"""``whatif placement --since`` by time, by default (from the data's first record when that
is later)."""


@dataclass(frozen=True)
class HarvestRun:
    """What ``whatif harvesting`` runs (defaults are the command line's and the SPEC's)."""

    policies: tuple[str, ...] = VICTIM_POLICIES
    seed: int = 0
    at: datetime | None = None
    since: timedelta | None = None  # None: HARVEST_SINCE, from the data's first record on
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
            "since_s": None if self.since is None else self.since.total_seconds(),
            "idle_sm": self.idle_sm,
            "idle_for_s": self.idle_for.total_seconds(),
            "eviction_delay_mean_s": self.eviction_delay_mean.total_seconds(),
            "eviction_delay_p95_s": self.eviction_delay_p95.total_seconds(),
            "kill_after_s": self.kill_after.total_seconds(),
        }


def parse_budget(text: str, *, option: str = "--moves-per-hour") -> tuple[float, str]:
    """A migration budget: a count of GPUs per hour (``64``) or a share of the fleet's
    GPUs per hour (``0.1%``), as (value, unit) with unit ``gpus`` or ``pct``.

    >>> parse_budget("64"), parse_budget("0.1%"), parse_budget(" 2.5 % ")
    ((64.0, 'gpus'), (0.1, 'pct'), (2.5, 'pct'))
    """
    raw = text.strip()
    unit = "pct" if raw.endswith("%") else "gpus"
    number = raw[:-1].strip() if unit == "pct" else raw
    try:
        value = float(number)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (unit == "pct" and value > 100):
        raise UsageError(
            f"{option}: give GPUs per hour (e.g. 64) or a share of the fleet's GPUs per hour "
            f"(e.g. 0.1%), not {text!r}"
        )
    return value, unit


def budget_text(value: float, unit: str) -> str:
    """A budget as the command line spells it (:func:`parse_budget` reads it back).

    >>> budget_text(0.1, "pct"), budget_text(64.0, "gpus")
    ('0.1%', '64')
    """
    return f"{value:g}%" if unit == "pct" else f"{value:g}"


PAPER_PARTIAL_REDUCTION_PCT = -20.2
"""ASI (OSDI 2026): the change of partially occupied nodes with compaction in production."""


@dataclass(frozen=True)
class OverTimeOptions:
    """The window's replay: tick interval, migration budget, arrival placement and queue.

    Args:
        every_s: seconds between compaction rounds.
        moves_per_hour: the migration budget per hour, in ``budget_unit``.
        budget_unit: ``pct`` (a % of the fleet's healthy GPUs) or ``gpus``.
        policy: ``recorded`` or a placement policy.
        queue: a queue discipline (None: the store's calibrated one; the library
            function alone takes ``kubernetes``).
        seed: the seed of the ``random`` policy.
        observe_shapes: the shapes (the first ones: most queued first) whose
            instances each round counts; the search's objective keeps them all.
        sweep: budgets (value, unit) to replay on the one baseline instead of
            ``moves_per_hour``; the one whose reduction is nearest
            ``target_reduction_pct`` is reported in full.
        target_reduction_pct: the change of partially occupied nodes a sweep
            looks for (default: the ASI paper's).
        preempt: high priority evicts low (None: when both priorities arrive).
    """

    every_s: float = 3600.0
    moves_per_hour: float = 0.1
    budget_unit: str = "pct"
    policy: str = "recorded"
    queue: str | None = None
    seed: int = 0
    observe_shapes: int = 10
    sweep: tuple[tuple[float, str], ...] = ()
    target_reduction_pct: float = PAPER_PARTIAL_REDUCTION_PCT
    preempt: bool | None = None

    def check(self) -> None:
        """Raise UsageError naming the first option out of range."""
        if not math.isfinite(self.every_s) or self.every_s <= 0:
            raise UsageError("--every: give a positive duration (e.g. 1h)")
        for value, unit in ((self.moves_per_hour, self.budget_unit), *self.sweep):
            if unit not in ("gpus", "pct"):
                raise UsageError(f"--moves-per-hour: unknown unit {unit!r}")
            if not math.isfinite(value) or value < 0 or (unit == "pct" and value > 100):
                raise UsageError("--moves-per-hour: must be 0 or more (a share: at most 100%)")
        if self.policy not in OVER_TIME_POLICIES:
            raise UsageError(f"--policy: use one of {', '.join(OVER_TIME_POLICIES)}")
        if self.queue is not None and self.queue not in PLACEMENT_QUEUES:
            raise UsageError(f"--queue: use one of {', '.join(PLACEMENT_QUEUES)}")
        if not math.isfinite(self.target_reduction_pct):
            raise UsageError("--target-reduction: give a finite percentage (e.g. -20.2)")

    def budgets(self) -> tuple[tuple[float, str], ...]:
        """The budgets to replay: the sweep's, or the one budget."""
        return self.sweep or ((self.moves_per_hour, self.budget_unit),)


def gpus_per_hour(value: float, unit: str, fleet_gpus: float) -> float:
    """A budget in GPUs per hour on a fleet of ``fleet_gpus`` healthy GPUs.

    >>> gpus_per_hour(0.1, "pct", 16_000), gpus_per_hour(64, "gpus", 16_000)
    (16.0, 64)
    """
    return value * fleet_gpus / 100.0 if unit == "pct" else value


REMEDIES_SINCE = timedelta(days=7)
"""``whatif remedies --since``: the window every remedy is judged on."""

REMEDIES_SHAPES_SHOWN = 4
"""``whatif remedies``: the heaviest demand shapes whose start probability is shown."""

REMEDIES_MAX_ADD_FACTOR = 1.0
"""``whatif remedies --target``: without ``--max-add``, the search adds at most this many
times the model's installed nodes."""

REMEDIES_CPU_STEP = 8.0
"""``whatif remedies --target``: the CPU increment is searched in steps of this many cores."""

HOURS_PER_MONTH = 730.0
"""Hours in a month (365 x 24 / 12), for prices per month."""


@dataclass(frozen=True)
class RemediesRun:
    """What ``whatif remedies`` runs (defaults are the command line's).

    Args:
        edits: the fleet edits (``fleetaudit.whatif.remedies.Edit``), one remedy row each.
        compaction: in-place compaction as one more remedy.
        together: one more row with every edit (and compaction) at once.
        at, since, step: the window [at - since, at) and the snapshot's sampling step.
        demand, max_shapes: which demand the shapes are, and how many are evaluated.
        queue, calibrate, preempt: the baseline's discipline (see ``whatif placement``).
        deadline: a request starts in time when its wait is at most its own
            start_deadline_s, else this (None: when it starts in the window).
        shapes_shown: the heaviest shapes whose start probability the table shows.
        target: sizing: the start probability to reach for ``target_shape``.
        max_add: sizing: the most nodes it adds (None: the model's installed nodes).
        cpu_step: sizing: the CPU increment's step (cores per node).
        prices: a prices file (CSV or YAML).
        save_as: save the edited fleet of a one-edit call (or of --together) as a scenario.
        compaction_options, over_time: compaction's options (one instant, and over time).
        workers: processes for the rows (None: 2 on a fleet of 1,000 nodes or more, else 1).
    """

    edits: tuple[Any, ...] = ()
    compaction: bool = False
    together: bool = False
    at: datetime | None = None
    since: timedelta = REMEDIES_SINCE
    step: timedelta = REPORT_STEP
    demand: str | None = None
    max_shapes: int = 20
    queue: str | None = None
    calibrate: bool = False
    preempt: bool | None = None
    deadline: timedelta | None = None
    shapes_shown: int = REMEDIES_SHAPES_SHOWN
    target: float | None = None
    target_shape: Any = None
    max_add: int | None = None
    cpu_step: float = REMEDIES_CPU_STEP
    prices: Any = None
    save_as: str | None = None
    compaction_options: CompactionOptions = CompactionOptions()
    over_time: OverTimeOptions = OverTimeOptions()
    workers: int | None = None
