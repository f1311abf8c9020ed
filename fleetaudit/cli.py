"""The ``fleetaudit`` command line: parse, call one :mod:`fleetaudit.api` function, render.

Every command takes ``--db`` (default ``./fleetaudit.duckdb``, or
``$FLEETAUDIT_DB``). Errors become one line on stderr and an exit code
(:class:`fleetaudit.errors.ExitCode`): 0 ok, 2 bad input or usage, 75 store busy.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from typer.exceptions import TyperException

from fleetaudit import __version__, api, console
from fleetaudit.compaction import CompactionOptions
from fleetaudit.compaction_api import CompactionRun
from fleetaudit.compaction_api import whatif_compaction as run_compaction
from fleetaudit.compaction_over_time import OverTimeOptions
from fleetaudit.contract import (
    compaction_document,
    harvesting_document,
    placement_document,
    report_document,
    shapes_document,
)
from fleetaudit.errors import ExitCode, FleetAuditError, UsageError
from fleetaudit.fsutil import atomic_path
from fleetaudit.generate import GenerateOptions
from fleetaudit.generate_slurm import SlurmGenerateOptions
from fleetaudit.harvest import POLICIES as VICTIM_POLICIES
from fleetaudit.harvest_api import HarvestRun
from fleetaudit.harvest_api import whatif_harvesting as run_harvesting
from fleetaudit.ingest import FORMATS, IngestOptions
from fleetaudit.ingest.alibaba import DEFAULT_TRACE_START
from fleetaudit.placement import POLICIES
from fleetaudit.placement_api import PlacementRun
from fleetaudit.placement_api import whatif_placement as run_placement
from fleetaudit.report import expand_path, write_html
from fleetaudit.report_api import ReportOptions, ReportResult, build_report, record_report
from fleetaudit.shapes import Shape, make_shape
from fleetaudit.shapes_api import ShapesOptions, evaluate_shapes, read_shapes_file
from fleetaudit.times import iso, parse_duration, parse_instant

app = typer.Typer(
    name="fleetaudit",
    help=(
        "Audit the capacity of a shared GPU fleet from exported inventory, allocations, "
        "queue and telemetry: how much is idle physically, how much of that the queued "
        "request shapes could use, and how much allocated capacity does useful work."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

F = TypeVar("F", bound=Callable[..., Any])

DbOption = Annotated[
    Path,
    typer.Option(
        "--db",
        envvar="FLEETAUDIT_DB",
        help="The DuckDB store (env FLEETAUDIT_DB).",
        show_default=True,
    ),
]
AtOption = Annotated[
    str | None, typer.Option("--at", help="The instant (default: the export time).")
]
WindowEndOption = Annotated[
    str | None, typer.Option("--at", help="The window's end (default: the export time).")
]
ScenarioOption = Annotated[
    str | None,
    typer.Option("--scenario", help="Read a saved what-if state (`status` lists them)."),
]
LockTimeoutOption = Annotated[
    float,
    typer.Option(
        "--lock-timeout",
        help="Seconds to wait while another fleetaudit process writes the store; then exit 75.",
    ),
]


def _fail(message: str, code: int) -> None:
    console.err.print(
        f"fleetaudit: error: {message}", markup=False, highlight=False, soft_wrap=True
    )
    raise typer.Exit(code)


def handled(func: F) -> F:
    """Turn fleetaudit errors into one line on stderr and the right exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except FleetAuditError as exc:
            _fail(exc.message, int(exc.exit_code))
        except KeyboardInterrupt:
            _fail("interrupted; nothing was half-written", int(ExitCode.INTERRUPT))
        except (typer.Exit, typer.Abort, SystemExit, GeneratorExit):
            raise
        except BaseException as exc:  # also panics of native code (pyo3 PanicException)
            if os.environ.get("FLEETAUDIT_DEBUG"):
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            _fail(
                f"internal error: {type(exc).__name__}: {first} "
                "(set FLEETAUDIT_DEBUG=1 for a traceback)",
                int(ExitCode.INTERNAL),
            )
        return None

    return wrapper  # type: ignore[return-value]


def _version(value: bool) -> None:
    if value:
        console.out.print(f"fleetaudit {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Audit the capacity of a shared GPU fleet."""


def _store(db: Path, lock_timeout: float) -> api.StoreOptions:
    if lock_timeout < 0 or lock_timeout != lock_timeout:
        raise UsageError("--lock-timeout: must be 0 or more seconds")
    return api.StoreOptions(db=db, lock_timeout=lock_timeout)


def _instant(text: str | None, option: str) -> datetime | None:
    return None if text is None else parse_instant(text, option=option)


@app.command()
@handled
def ingest(
    paths: Annotated[
        list[Path], typer.Argument(help="Table files or folders of them.", show_default=False)
    ],
    table: Annotated[
        str | None,
        typer.Option("--table", help="The table every file feeds (default: the file's stem)."),
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", help=f"Input format: {' or '.join(FORMATS)}.")
    ] = "native",
    strict: Annotated[
        bool,
        typer.Option(
            "--strict", help="Fail the whole call (exit 2, nothing written) on any rejected row."
        ),
    ] = False,
    trace_start: Annotated[
        str | None,
        typer.Option(
            "--trace-start",
            help=f"alibaba-gpu-v2023: the instant trace second 0 stands for (default {iso(DEFAULT_TRACE_START)}).",
        ),
    ] = None,
    topology: Annotated[
        Path | None,
        typer.Option(
            "--topology",
            help="alibaba-gpu-v2023: a topo.csv (PSW, ASW per host) whose switch domains the nodes are dealt into.",
        ),
    ] = None,
    timezone: Annotated[
        str | None,
        typer.Option(
            "--timezone",
            help="slurm: the IANA time zone of sacct's local times, e.g. Europe/Berlin "
            "(default UTC; epoch seconds from SLURM_TIME_FORMAT=%s need none).",
        ),
    ] = None,
    priority_map: Annotated[
        Path | None,
        typer.Option(
            "--priority-map",
            help="A file of NAME = high|low lines mapping site priority names "
            "(Slurm QOS or partition, Kubernetes priority class) to fleetaudit priorities.",
        ),
    ] = None,
    db: DbOption = Path("fleetaudit.duckdb"),
    lock_timeout: LockTimeoutOption = api.DEFAULT_LOCK_TIMEOUT,
) -> None:
    """Load CSV (.csv, .csv.gz), Parquet or JSON Lines files into the store.

    A file's table is its stem (nodes, allocations, requests, telemetry) or --table;
    a folder loads every table file in it. One call is one transaction: all files
    land or none do. A row whose key exists replaces the stored row. Rows that
    break the schema go to the rejects table with file, row, column and reason.

    --format slurm reads a Slurm cluster's exports, each recognised by its content:
    sacct -P or --json, scontrol -d -o show node or --json, squeue --json, topology.conf.
    """
    if fmt != "alibaba-gpu-v2023" and (trace_start is not None or topology is not None):
        raise UsageError("--trace-start and --topology apply to --format alibaba-gpu-v2023 only")
    if fmt == "alibaba-gpu-v2023" and table is not None:
        raise UsageError(
            "--table does not apply to --format alibaba-gpu-v2023 (its files name their tables)"
        )
    if fmt != "slurm" and (timezone is not None or priority_map is not None):
        raise UsageError("--timezone and --priority-map apply to --format slurm only")
    if fmt == "slurm" and table is not None:
        raise UsageError(
            "--table does not apply to --format slurm (files are recognised by content)"
        )
    options = IngestOptions(
        table=table,
        format=fmt,
        strict=strict,
        trace_start=_instant(trace_start, "--trace-start") or DEFAULT_TRACE_START,
        topology=topology,
        timezone=timezone or "UTC",
        priority_map=priority_map,
    )
    with console.progress_status("ingesting") as progress:
        result = api.ingest_paths(_store(db, lock_timeout), paths, options, progress)
    console.render_ingest(result)


@app.command()
@handled
def status(
    db: DbOption = Path("fleetaudit.duckdb"),
    lock_timeout: LockTimeoutOption = api.DEFAULT_LOCK_TIMEOUT,
) -> None:
    """Show what the store holds: rows per table, capacity per GPU model, export time, scenarios."""
    console.render_summary(api.summarize(_store(db, lock_timeout)))


@app.command()
@handled
def state(
    at: AtOption = None,
    duration: Annotated[
        str | None,
        typer.Option(
            "--duration", help="Free capacity over [at, at + duration): 90s, 30m, 6h, 7d."
        ),
    ] = None,
    scenario: ScenarioOption = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Also write the per-node state to this .csv or .parquet file."),
    ] = None,
    db: DbOption = Path("fleetaudit.duckdb"),
    lock_timeout: LockTimeoutOption = api.DEFAULT_LOCK_TIMEOUT,
) -> None:
    """The occupancy of every node at an instant (SPEC §2), summed per GPU model.

    Occupied GPUs count whole GPUs plus the GPUs that shares fill when packed
    first-fit-decreasing; allocated_high is high-priority work alone.
    """
    window = None if duration is None else parse_duration(duration, option="--duration")
    result = api.node_state(_store(db, lock_timeout), _instant(at, "--at"), window, scenario, out)
    console.render_state(result.state, iso(result.at) or "", duration)


# The shape options of `shapes`, which `whatif compaction` takes too.
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="GPU model, or a set joined by | ('H20|H800'). With --gpus: an ad-hoc shape.",
    ),
]
GpusOption = Annotated[
    float | None, typer.Option("--gpus", help="GPUs per instance; below 1: a share of one GPU.")
]
GpusPerPodOption = Annotated[
    float | None, typer.Option("--gpus-per-pod", help="GPUs per pod (default min(gpus, 8)).")
]
CpusPerGpuOption = Annotated[
    float | None, typer.Option("--cpus-per-gpu", help="CPU cores per GPU (default 0).")
]
MemoryPerGpuOption = Annotated[
    float | None, typer.Option("--memory-gib-per-gpu", help="Memory GiB per GPU (default 0).")
]
LocalityOption = Annotated[
    str | None,
    typer.Option("--locality", help="switch, any or node (default node for one pod, else switch)."),
]
DurationOption = Annotated[
    str | None,
    typer.Option("--duration", help="Capacity must stay free this long: 90s, 30m, 6h, 7d."),
]
ShapesFileOption = Annotated[
    Path | None,
    typer.Option(
        "--shapes", help="A CSV of shapes (the requests table's shape columns), each reported."
    ),
]


def _shape_options(
    model: str | None,
    gpus: float | None,
    gpus_per_pod: float | None,
    cpus_per_gpu: float | None,
    memory_gib_per_gpu: float | None,
    locality: str | None,
    duration: str | None,
    shapes_file: Path | None,
) -> tuple[Shape, ...]:
    """The ad-hoc shape (--model/--gpus/...) and those of --shapes FILE; empty: none given."""
    adhoc: tuple[Shape, ...] = ()
    if model is not None and gpus is None:
        raise UsageError("--model needs --gpus (the GPUs of one instance)")
    if gpus is not None:
        seconds = (
            None
            if duration is None
            else parse_duration(duration, option="--duration").total_seconds()
        )
        adhoc = (
            make_shape(
                model, gpus, gpus_per_pod, cpus_per_gpu, memory_gib_per_gpu, locality, seconds
            ),
        )
    elif any(
        v is not None for v in (gpus_per_pod, cpus_per_gpu, memory_gib_per_gpu, locality, duration)
    ):
        raise UsageError("shape options need --gpus (and usually --model)")
    if shapes_file is not None:
        adhoc += read_shapes_file(shapes_file)
    return adhoc


@app.command()
@handled
def shapes(
    model: ModelOption = None,
    gpus: GpusOption = None,
    gpus_per_pod: GpusPerPodOption = None,
    cpus_per_gpu: CpusPerGpuOption = None,
    memory_gib_per_gpu: MemoryPerGpuOption = None,
    locality: LocalityOption = None,
    duration: DurationOption = None,
    shapes_file: ShapesFileOption = None,
    at: AtOption = None,
    scenario: ScenarioOption = None,
    reclaim: Annotated[
        bool,
        typer.Option(
            "--reclaim",
            help="Also count instances that evicting low-priority and sleepable work would add.",
        ),
    ] = False,
    history: Annotated[
        str | None,
        typer.Option(
            "--history",
            help="Evaluate every --step over this span ending at --at: p_start and waits.",
        ),
    ] = None,
    step: Annotated[str, typer.Option("--step", help="History step.")] = "5m",
    deadline: Annotated[
        str | None,
        typer.Option(
            "--deadline", help="With --history: the share of instants whose wait is within this."
        ),
    ] = None,
    max_instances: Annotated[
        int | None, typer.Option("--max", help="Report at most this many instances per shape.")
    ] = None,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain",
            help="Show the nearest misses: the domains or nodes that lack least for one more instance.",
        ),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the SPEC's JSON document (fleetaudit.shapes/1) only."),
    ] = False,
    db: DbOption = Path("fleetaudit.duckdb"),
    lock_timeout: LockTimeoutOption = api.DEFAULT_LOCK_TIMEOUT,
) -> None:
    """How many instances of a request shape can start now, and what strands the idle rest.

    Without --gpus or --shapes: every distinct GPU shape queued at --at.
    Per shape: instances, usable GPUs, and the idle GPUs stranded by cause
    (interval, fragment, cpu_memory, topology), adding up exactly (SPEC §3).
    """
    adhoc = _shape_options(
        model, gpus, gpus_per_pod, cpus_per_gpu, memory_gib_per_gpu, locality, duration, shapes_file
    )
    options = ShapesOptions(
        shapes=adhoc,
        at=_instant(at, "--at"),
        scenario=scenario,
        reclaim=reclaim,
        history=None if history is None else parse_duration(history, option="--history"),
        step=parse_duration(step, option="--step"),
        deadline=None if deadline is None else parse_duration(deadline, option="--deadline"),
        max_instances=max_instances,
        explain=explain,
    )
    result = evaluate_shapes(_store(db, lock_timeout), options)
    if as_json:
        console.print_json(shapes_document(result))
    else:
        console.render_shapes(result)


whatif = typer.Typer(
    name="whatif",
    help=(
        "Replay what-ifs offline: placement policies, in-place compaction, "
        "harvesting of standby capacity."
    ),
    no_args_is_help=True,
)
app.add_typer(whatif)


@whatif.command("placement")
@handled
def whatif_placement(
    policy: Annotated[
        list[str] | None,
        typer.Option(
            "--policy", help=f"A policy to run (repeatable): {', '.join(POLICIES)}. Default: all."
        ),
    ] = None,
    fill: Annotated[
        float | None,
        typer.Option(
            "--fill",
            help="Fill mode: feed the requests on an empty fleet until arrived GPU demand is this % of the GPUs.",
        ),
    ] = None,
    seeds: Annotated[
        int, typer.Option("--seeds", help="Runs to average (seeds seed .. seed + N - 1).")
    ] = 1,
    seed: Annotated[
        int, typer.Option("--seed", help="The first seed (resampling and the random policy).")
    ] = 0,
    shuffle: Annotated[
        bool,
        typer.Option(
            "--shuffle", help="Feed the list in a seeded order, as the FGD authors' runs do."
        ),
    ] = False,
    since: Annotated[
        str | None,
        typer.Option("--since", help="By-time replay: the window [at - since, at] (default 1d)."),
    ] = None,
    empty: Annotated[
        bool,
        typer.Option(
            "--empty",
            help="By-time replay from an empty fleet, not the state at the window's start.",
        ),
    ] = False,
    queue: Annotated[
        str,
        typer.Option(
            "--queue",
            help="By-time replay: fifo (strict arrival order) or backfill (later requests start when the head does not fit).",
        ),
    ] = "fifo",
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            help="End of the by-time window; with --fill, when the saved placement starts (default: export time).",
        ),
    ] = None,
    save_as: Annotated[
        str | None,
        typer.Option("--save-as", help="Save the first policy's final placement as a scenario."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the SPEC's JSON (fleetaudit.placement/1) only.")
    ] = False,
    db: DbOption = Path("fleetaudit.duckdb"),
    lock_timeout: LockTimeoutOption = api.DEFAULT_LOCK_TIMEOUT,
) -> None:
    """Replay the stored requests onto the nodes under placement policies (SPEC §5).

    By time (default): arrivals and departures as recorded over [at - since, at],
    from the state at the window's start (or --empty), waiting requests in a fifo
    or backfill queue; allocated and fragmented GPU % at every 5% of the window.
    --fill is the FGD paper's method: no departures, requests in list order on an
    empty fleet (resampled with the seed); allocated and fragmented GPU % at every
    5% of arrival.
    """
    chosen = tuple(policy) if policy else POLICIES
    unknown = [p for p in chosen if p not in POLICIES]
    if unknown:
        raise UsageError(f"--policy: unknown {unknown[0]!r}; use {', '.join(POLICIES)}")
    if fill is not None and (since is not None or empty or queue != "fifo"):
        raise UsageError("--since, --empty and --queue apply to by-time replay, not to --fill")
    run = PlacementRun(
        policies=chosen, fill_pct=fill, seeds=seeds, seed=seed, shuffle=shuffle,
        at=_instant(at, "--at"), save_as=save_as,
        since=None if since is None else parse_duration(since, option="--since"),
        empty=empty, queue=queue,
    )  # fmt: skip
    with console.progress_status("replaying placements"):
        result = run_placement(_store(db, lock_timeout), run)
    if as_json:
        console.print_json(placement_document(result))
    else:
        console.render_placement(result)


_COMPACTION = CompactionOptions()
_OVER_TIME = OverTimeOptions()


@whatif.command("compaction")
@handled
def whatif_compaction(
    model: ModelOption = None,
    gpus: GpusOption = None,
    gpus_per_pod: GpusPerPodOption = None,
    cpus_per_gpu: CpusPerGpuOption = None,
    memory_gib_per_gpu: MemoryPerGpuOption = None,
    locality: LocalityOption = None,
    duration: DurationOption = None,
    shapes_file: ShapesFileOption = None,
    depth: Annotated[
        int, typer.Option("--depth", help="Levels of an ejection chain (1: direct moves only).")
    ] = _COMPACTION.depth,
    rounds: Annotated[
        int, typer.Option("--rounds", help="Passes over a partition's target nodes.")
    ] = _COMPACTION.rounds,
    partition_nodes: Annotated[
        int,
        typer.Option(
            "--partition-nodes", help="Nodes per partition (whole switch domains of one model)."
        ),
    ] = _COMPACTION.partition_nodes,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", help="Worker processes for the partitions (default: CPU count)."),
    ] = None,
    min_remaining: Annotated[
        str,
        typer.Option(
            "--min-remaining", help="Allocations whose known end is within this are not moved."
        ),
    ] = "1h",
    state_gib_per_gpu: Annotated[
        float,
        typer.Option("--state-gib-per-gpu", help="State a move transfers per GPU (GiB)."),
    ] = _COMPACTION.state_gib_per_gpu,
    bandwidth_gbps: Annotated[
        float, typer.Option("--bandwidth-gbps", help="Transfer rate of a move (Gbit/s).")
    ] = _COMPACTION.bandwidth_gbps,
    warmup: Annotated[
        str, typer.Option("--warmup", help="Fixed pause of a move on top of its transfer.")
    ] = "60s",
    exact: Annotated[
        bool,
        typer.Option(
            "--exact",
            help=f"Also solve partitions of up to {_COMPACTION.exact_nodes} nodes exactly (ILP) and report the gap.",
        ),
    ] = False,
    at: AtOption = None,
    scenario: ScenarioOption = None,
    save_as: Annotated[
        str | None,
        typer.Option("--save-as", help="Save the compacted state as a scenario (with --over: the window's final state)."),
    ] = None,
    over: Annotated[
        str | None,
        typer.Option(
            "--over",
            help="Replay the window [--at - OVER, --at] by time, with and without compaction rounds (e.g. 7d).",
        ),
    ] = None,
    every: Annotated[
        str, typer.Option("--every", help="With --over: time between compaction rounds.")
    ] = "1h",
    moves_per_hour: Annotated[
        float,
        typer.Option("--moves-per-hour", help="With --over: GPUs that may move per hour (migration budget)."),
    ] = _OVER_TIME.moves_per_hour,
    policy: Annotated[
        str,
        typer.Option(
            "--policy",
            help="With --over: where arrivals go: recorded (their recorded node when it has room, else best-fit), first-fit, best-fit, random, fgd or topology.",
        ),
    ] = _OVER_TIME.policy,
    queue: Annotated[
        str, typer.Option("--queue", help="With --over: fifo or backfill.")
    ] = _OVER_TIME.queue,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the SPEC's JSON (fleetaudit.compaction/1) only.")
    ] = False,
    db: DbOption = Path("fleetaudit.duckdb"),
    lock_timeout: LockTimeoutOption = api.DEFAULT_LOCK_TIMEOUT,
) -> None:
    """Replay in-place compaction on the state at --at: a move ledger and the capacity it frees (SPEC §4).

    Per partition (whole switch domains of one GPU model), partially occupied
    nodes are emptied by ejection chains of make-before-break moves. The objective,
    in order: more instances of the queued shapes (or those given), more free
    nodes, fewer partially occupied nodes, fewer GPUs moved. Without a shape
    option the queued shapes at --at count.

    With --over, the window before --at is also replayed by time twice on the same
    arrivals: without compaction, and with a compaction round every --every that
    applies at most --moves-per-hour GPUs of moves. It reports partially occupied
    and free nodes along the window, start probabilities, requests that started
    earlier and the migration paid; report then shows this run.
    """
    options = replace(
        _COMPACTION, depth=depth, rounds=rounds, partition_nodes=partition_nodes,
        min_remaining_s=parse_duration(min_remaining, option="--min-remaining").total_seconds(),
        state_gib_per_gpu=state_gib_per_gpu, bandwidth_gbps=bandwidth_gbps,
        warmup_s=parse_duration(warmup, option="--warmup").total_seconds(), exact=exact,
    )  # fmt: skip
    shapes = _shape_options(
        model, gpus, gpus_per_pod, cpus_per_gpu, memory_gib_per_gpu, locality, duration, shapes_file
    )
    over_time = replace(
        _OVER_TIME, every_s=parse_duration(every, option="--every").total_seconds(),
        moves_per_hour=moves_per_hour, policy=policy, queue=queue,
    )  # fmt: skip
    over_s = None if over is None else parse_duration(over, option="--over").total_seconds()
    run = CompactionRun(shapes=shapes, at=_instant(at, "--at"), scenario=scenario,
                        save_as=save_as, jobs=jobs, options=options, over_s=over_s,
                        over_time=over_time)  # fmt: skip
    with console.progress_status("compacting"):
        report = run_compaction(_store(db, lock_timeout), run)
    if as_json:
        console.print_json(compaction_document(report))
    else:
        console.render_compaction(report)


def _span(duration: timedelta) -> str:
    """A default duration as the options spell it (7d, 30m, 13s)."""
    seconds = duration.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


@whatif.command("harvesting")
@handled
def whatif_harvesting(
    policy: Annotated[
        list[str] | None,
        typer.Option(
            "--policy",
            help=f"A victim policy to compare (repeatable): {', '.join(VICTIM_POLICIES)}. Default: all.",
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since", help=f"The window [at - since, at) to replay ({_span(HarvestRun.since)})."
        ),
    ] = None,
    at: WindowEndOption = None,
    scenario: ScenarioOption = None,
    seed: Annotated[
        int, typer.Option("--seed", help="Seeds the eviction delays and --policy random.")
    ] = HarvestRun.seed,
    idle_sm: Annotated[
        float, typer.Option("--idle-sm", help="A GPU below this SM-active (0..1) is idle.")
    ] = HarvestRun.idle_sm,
    idle_for: Annotated[
        str | None,
        typer.Option(
            "--idle-for",
            help=f"A sleepable allocation idle this long sleeps ({_span(HarvestRun.idle_for)}).",
        ),
    ] = None,
    eviction_delay: Annotated[
        str | None,
        typer.Option(
            "--eviction-delay",
            help=f"Mean delay from a wake to the eviction ({_span(HarvestRun.eviction_delay_mean)}).",
        ),
    ] = None,
    eviction_delay_p95: Annotated[
        str | None,
        typer.Option(
            "--eviction-delay-p95",
            help=f"95th percentile of that delay ({_span(HarvestRun.eviction_delay_p95)}).",
        ),
    ] = None,
    kill_after: Annotated[
        str | None,
        typer.Option(
            "--kill-after",
            help=f"A borrower still there this long is killed: forced ({_span(HarvestRun.kill_after)}).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the SPEC's JSON (fleetaudit.harvesting/1) only.")
    ] = False,
    db: DbOption = Path("fleetaudit.duckdb"),
    lock_timeout: LockTimeoutOption = api.DEFAULT_LOCK_TIMEOUT,
) -> None:
    """Replay a window with sleeping inference lending GPUs to low-priority work (SPEC §6).

    High priority runs as recorded; low-priority jobs arrive as recorded and run
    wherever their GPU model has room, on lent GPUs too. Victim policies compare
    side by side. Sleeps come from telemetry; without it nothing sleeps. The
    first run on a machine compiles the replay (about a minute), later runs load it.
    """
    durations = {
        field: parse_duration(text, option=option)
        for field, option, text in (
            ("since", "--since", since),
            ("idle_for", "--idle-for", idle_for),
            ("eviction_delay_mean", "--eviction-delay", eviction_delay),
            ("eviction_delay_p95", "--eviction-delay-p95", eviction_delay_p95),
            ("kill_after", "--kill-after", kill_after),
        )
        if text is not None
    }  # unset ones keep HarvestRun's defaults
    run = HarvestRun(
        policies=tuple(policy) if policy else VICTIM_POLICIES, seed=seed,
        at=_instant(at, "--at"), scenario=scenario, idle_sm=idle_sm, **durations,
    )  # fmt: skip
    with console.progress_status("replaying harvesting") as progress:
        result = run_harvesting(_store(db, lock_timeout), run, progress)
    if as_json:
        console.print_json(harvesting_document(result))
    else:
        console.render_harvesting(result)


@app.command()
@handled
def generate(
    out: Annotated[
        Path,
        typer.Argument(help="Folder to write nodes, allocations, requests and telemetry into."),
    ],
    nodes: Annotated[
        int, typer.Option("--nodes", help="Nodes in the fleet (ASI: about 19,400).")
    ] = GenerateOptions.nodes,
    days: Annotated[
        float, typer.Option("--days", help="Days of allocations before the export time.")
    ] = GenerateOptions.days,
    seed: Annotated[
        int, typer.Option("--seed", help="Random seed: the same seed writes the same files.")
    ] = GenerateOptions.seed,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="parquet or csv; or slurm: a Slurm cluster's exports (sacct.psv, nodes.txt, "
            "topology.conf) for ingest --format slurm.",
        ),
    ] = GenerateOptions.format,
    jobs: Annotated[
        int, typer.Option("--jobs", help="slurm: jobs in the sacct history.")
    ] = SlurmGenerateOptions.jobs,
    telemetry_step: Annotated[
        str, typer.Option("--telemetry-step", help="Telemetry sampling step (e.g. 5m).")
    ] = "5m",
    telemetry_days: Annotated[
        float,
        typer.Option(
            "--telemetry-days", help="Telemetry covers this many days before the export time."
        ),
    ] = GenerateOptions.telemetry_days,
    harvested_nights: Annotated[
        float,
        typer.Option(
            "--harvested-nights",
            help="Record a fleet that already harvests: the chance that a sleeping warm "
            "container's GPUs carry low-priority work on a night (e.g. 0.9). Such nodes are "
            "over capacity in the record while the container sleeps. Default 0: none.",
        ),
    ] = GenerateOptions.harvested_nights,
) -> None:
    """Write a deterministic synthetic fleet shaped like Alibaba's ASI platform.

    8-GPU nodes (some 4 and 16) in switch domains of 32-64 nodes, several GPU
    models, online inference with a daily cycle and sleepable warm containers,
    low-priority offline inference in the gaps, training gangs, a pending queue
    and SM-active telemetry.
    """
    if fmt == "slurm":
        try:
            cluster = api.generate_slurm_cluster(
                out, SlurmGenerateOptions(nodes=nodes, jobs=jobs, days=days, seed=seed)
            )
        except UsageError as exc:
            field, _, rest = str(exc).partition(" ")
            if field in ("nodes", "jobs", "days"):
                raise UsageError(f"--{field}: {rest}") from exc
            raise
        console.render_generate(cluster)  # type: ignore[arg-type]
        return
    options = GenerateOptions(
        nodes=nodes,
        days=days,
        seed=seed,
        format=fmt,
        telemetry_step_s=int(
            parse_duration(telemetry_step, option="--telemetry-step").total_seconds()
        ),
        telemetry_days=telemetry_days,
        harvested_nights=harvested_nights,
    )
    try:
        with console.progress_status("generating") as progress:
            result = api.generate_fleet(out, options, lambda msg, _frac: progress(msg))
    except UsageError as exc:
        # The generator names its option fields; say the flags the user typed.
        field, _, rest = str(exc).partition(" ")
        if field in _GENERATE_FLAGS:
            raise UsageError(f"{_GENERATE_FLAGS[field]}: {rest}") from exc
        raise
    console.render_generate(result)


_GENERATE_FLAGS = {
    "nodes": "--nodes",
    "days": "--days",
    "seed": "--seed",
    "format": "--format",
    "telemetry_step_s": "--telemetry-step",
    "telemetry_days": "--telemetry-days",
    "harvested_nights": "--harvested-nights",
}


@app.command()
@handled
def report(
    at: WindowEndOption = None,
    since: Annotated[
        str, typer.Option("--since", help="The window's length, ending at --at: 90m, 6h, 7d.")
    ] = "7d",
    step: Annotated[
        str, typer.Option("--step", help="Sampling step of the schedulable figures.")
    ] = "15m",
    scenario: ScenarioOption = None,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html", help="Write the self-contained HTML report here ({date}, {time} expand)."
        ),
    ] = None,
    json_path: Annotated[
        Path | None,
        typer.Option(
            "--json", help="Write the JSON (fleetaudit.report/1) here ({date}, {time} expand)."
        ),
    ] = None,
    db: DbOption = Path("fleetaudit.duckdb"),
    lock_timeout: LockTimeoutOption = api.DEFAULT_LOCK_TIMEOUT,
) -> None:
    """The three denominators of a window, per GPU model and for the fleet (SPEC §7).

    Physical GPU-hours (exact), schedulable ones (idle GPU-hours the queued shapes
    could use and the stranded rest by cause, sampled every --step), productive
    ones (SM-active over allocated, from telemetry), the stored what-if
    estimates, and each headline figure's change since the previous report.
    """
    store = _store(db, lock_timeout)
    options = ReportOptions(
        at=_instant(at, "--at"),
        since=parse_duration(since, option="--since"),
        step=parse_duration(step, option="--step"),
        scenario=scenario,
    )
    with console.progress_status("computing the report"):
        result = build_report(store, options)
    _write_report(result, html, json_path)
    console.render_report(result)
    record_report(store, result)


def _write_report(result: ReportResult, html: Path | None, json_path: Path | None) -> None:
    if json_path is not None:
        target = expand_path(json_path, result.generated_at)
        with atomic_path(target) as tmp:
            tmp.write_text(json.dumps(report_document(result), indent=1) + "\n", encoding="utf-8")
        console.err.print(f"wrote {target}")
    if html is not None:
        target = expand_path(html, result.generated_at)
        write_html(result, target)
        console.err.print(f"wrote {target}")


@app.command()
@handled
def demo(
    db: DbOption = Path("fleetaudit.duckdb"),
    lock_timeout: LockTimeoutOption = api.DEFAULT_LOCK_TIMEOUT,
) -> None:
    """Ingest the bundled sample fleet and show what it holds: capacity, state, queued shapes, report."""
    with console.progress_status("ingesting the sample fleet") as progress:
        result = api.run_demo(_store(db, lock_timeout), progress)
    console.render_ingest(result.ingest)
    console.render_summary(result.summary)
    state = result.state
    console.render_state(state.state, iso(state.at) or "")
    shapes_result = evaluate_shapes(_store(db, lock_timeout), ShapesOptions(explain=False))
    console.render_shapes(shapes_result)
    console.out.print()
    report_result = build_report(_store(db, lock_timeout), ReportOptions())
    shown = set(shapes_result.notes)  # a note both print is said once
    console.render_report(
        replace(report_result, notes=tuple(n for n in report_result.notes if n not in shown))
    )
    record_report(_store(db, lock_timeout), report_result)


def main() -> None:
    """Console-script entry point: usage errors too are one line and exit 2."""
    try:
        code = app(prog_name="fleetaudit", standalone_mode=False)
    except typer.Abort:
        _print_error("interrupted; nothing was half-written")
        sys.exit(int(ExitCode.INTERRUPT))
    except TyperException as exc:  # typer's click: a bad option, a missing argument
        ctx = getattr(exc, "ctx", None)
        command = ctx.command_path if ctx is not None else "fleetaudit"
        _print_error(f"{exc.format_message()} (see {command} --help)")  # type: ignore[attr-defined]
        sys.exit(int(ExitCode.INPUT))
    sys.exit(code if isinstance(code, int) else 0)


def _print_error(message: str) -> None:
    line = message.strip().replace("\n", " ")
    console.err.print(f"fleetaudit: error: {line}", markup=False, highlight=False, soft_wrap=True)


if __name__ == "__main__":
    sys.exit(main())
