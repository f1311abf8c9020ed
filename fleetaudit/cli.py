"""The ``fleetaudit`` command line: parse, call one :mod:`fleetaudit.api` function, render.

Every command takes ``--db`` (default ``./fleetaudit.duckdb``, or
``$FLEETAUDIT_DB``). Errors become one line on stderr and an exit code
(:class:`fleetaudit.core.errors.ExitCode`): 0 ok, 2 bad input or usage, 75 store busy.
"""

# No ``from __future__ import annotations``: typer reads every command's parameters at
# start-up (--help too), and string annotations it would evaluate twice each.

import contextlib
import functools
import os
import re
import signal
import sys
import typing
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.markup import escape
from typer.core import TyperGroup
from typer.exceptions import TyperException

from fleetaudit import __version__
from fleetaudit.core.errors import ExitCode, FleetAuditError, UsageError
from fleetaudit.core.fsutil import is_stdout, write_output
from fleetaudit.core.lazy import LazyModule, import_with_stand_ins
from fleetaudit.core.options import ALIBABA_TRACE_START as DEFAULT_TRACE_START
from fleetaudit.core.options import (
    ASI_RELEASE_DAYS,
    ASI_TRACE_START,
    COMPACTION_ENGINES,
    DEFAULT_DB,
    DEFAULT_LOCK_TIMEOUT,
    INGEST_FORMAT_SPECS,
    PLACEMENT_QUEUES,
    REJECTS_LIMIT,
    REPORT_INTERRUPTED_WITHIN,
    REPORT_QUARANTINE,
    REPORT_SINCE,
    REPORT_STEP,
    SCAN_ENGINES,
    SLURM_COLLECT_SINCE,
    VICTIM_POLICIES,
    CompactionOptions,
    GenerateOptions,
    HarvestRun,
    OverTimeOptions,
    SlurmGenerateOptions,
    duration_text,
)
from fleetaudit.core.options import INGEST_FORMATS as FORMATS
from fleetaudit.core.options import PLACEMENT_POLICIES as POLICIES
from fleetaudit.core.options import ROLLUP_INTERVAL_S as DEFAULT_INTERVAL_S
from fleetaudit.core.options import ROLLUP_SOURCES as SOURCES
from fleetaudit.core.times import iso, parse_duration, parse_instant

# The engines (polars, numpy, duckdb, numba: most of a start-up) are imported in
# the command that runs them, and the terminal renderer when a command prints, so
# `fleetaudit --help` and usage errors stay fast.
if TYPE_CHECKING:
    from fleetaudit import api
    from fleetaudit.api.report_api import ReportResult
    from fleetaudit.model.shapes import Shape
    from fleetaudit.outputs import console
else:
    console = LazyModule("fleetaudit.outputs.console")

# Placeholders in --help read as words, by option name (else by type); flags show none.
# typer's help and error renderer imports rich's Markdown (markdown-it, pygments) and
# Traceback at its top, a third of --help's start-up, for markdown help texts and pretty
# tracebacks, neither of which this command line uses: they load if ever called.
import_with_stand_ins("typer.rich_utils", {"rich.markdown": ("Markdown",), "rich.traceback": ("Traceback",)})

METAVARS = {
    "--db": "PATH", "--out": "PATH", "--html": "PATH", "--shapes": "PATH",
    "--topology": "PATH", "--priority-map": "PATH",
    "--at": "TIME", "--trace-start": "TIME",
    "--duration": "DURATION", "--since": "DURATION", "--history": "DURATION",
    "--step": "DURATION", "--deadline": "DURATION", "--idle-for": "DURATION",
    "--eviction-delay": "DURATION", "--eviction-delay-p95": "DURATION",
    "--kill-after": "DURATION", "--min-remaining": "DURATION", "--warmup": "DURATION",
    "--telemetry-step": "DURATION", "--interrupted-within": "DURATION",
    "--model": "MODEL", "--policy": "POLICY", "--scenario": "NAME", "--save-as": "NAME",
    "--table": "TABLE", "--format": "FORMAT", "--out-format": "FORMAT",
    "--locality": "LOCALITY", "--queue": "QUEUE",
    "--gpus": "GPUS", "--gpus-per-pod": "GPUS", "--cpus-per-gpu": "CPUS",
    "--memory-gib-per-gpu": "GIB", "--state-gib-per-gpu": "GIB", "--bandwidth-gbps": "GBPS",
    "--lock-timeout": "SECONDS", "--idle-sm": "FRACTION", "--fill": "PERCENT",
    "--harvested-nights": "CHANCE", "--days": "DAYS", "--telemetry-days": "DAYS",
    "--node-events": "RATE", "--node-events-days": "DAYS",
    "--snapshot-time": "TIME", "--tenant-label": "LABEL", "--timezone": "ZONE",
    "--engine": "ENGINE", "--master": "URL", "--interval": "DURATION", "--jobs": "N",
}  # fmt: skip
_TYPE_METAVARS = {"int": "N", "float": "NUMBER", "Path": "PATH", "str": "TEXT"}


def _word_metavar(param: Any) -> None:
    """Give a parameter a metavar that reads as a word (not <str>, <list[str]>, <bool>).

    typer's parameters (its own click) are read by duck typing.
    """
    if getattr(param, "is_flag", False):
        param.metavar = ""
        return
    if param.metavar is not None:
        return
    if getattr(param, "param_type_name", "") == "argument":
        # the placeholder names it; typer would add its type (<list[Path]>)
        param.metavar = {"paths": "PATH", "out": "FOLDER"}.get(param.name, param.name.upper())
        param.display_type_rich = lambda ctx: None
        return
    named = next((METAVARS[o] for o in param.opts if o in METAVARS), None)
    bare = param.bare_type() if hasattr(param, "bare_type") else ""
    if bare.startswith("list["):
        bare = bare[5:-1]
    param.metavar = named or _TYPE_METAVARS.get(bare.split(" | ")[0], "TEXT")


def _plain_help(text: str | None) -> str | None:
    """Help text shown as written: rich would read [at - since, at) as markup and drop it."""
    return None if text is None else escape(text)


# typer (0.29) converts every option value through a pydantic TypeAdapter, built on the
# first value and importing pydantic (a tenth of a second, on every command). The values
# a command line gives are plain (a word, a whole or decimal number, a path, a default);
# they are converted here as that adapter would, and anything else goes to typer's own
# conversion, so that its errors read as they always did.
try:  # typer's private modules (0.29): without them every value is typer's to convert
    from typer import _coercion as typer_coercion
    from typer import _param_types as typer_param_types
except ImportError:  # pragma: no cover - another typer
    typer_coercion = typer_param_types = None  # type: ignore[assignment]

_WHOLE = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")
_NOT_PLAIN = object()


def _plain_value(annotation: Any, value: Any, info: Any, param: Any, ctx: Any) -> Any:
    """``value`` converted to ``annotation`` as typer's adapter would, or _NOT_PLAIN."""
    kind = type(value)
    if info.parser is not None:
        return _NOT_PLAIN
    if annotation is str:
        return value if kind is str else _NOT_PLAIN
    if annotation in (int, float) and (info.min is not None or info.max is not None):
        return _NOT_PLAIN
    if annotation is int:
        if kind is int:
            return value
        return int(value) if kind is str and _WHOLE.fullmatch(value) else _NOT_PLAIN
    if annotation is float:
        if kind is float or kind is int:
            return float(value)
        return float(value) if kind is str and _DECIMAL.fullmatch(value) else _NOT_PLAIN
    if annotation is Path and info.path_type is None:
        if kind is str:
            value = Path(value)  # pydantic's Path of a str; the path checks are typer's own
        if isinstance(value, Path):
            return typer_param_types.coerce_cli_path(
                value, info, path_type=Path, param=param, ctx=ctx
            )
    return _NOT_PLAIN


class _PlainCoercion:
    """A parameter's conversion: plain values here, any other by typer's own (built once)."""

    def __init__(self, param: Any) -> None:
        self.descriptor = param.type_descriptor
        self.typer_coercion: Any = None

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        many = param.multiple or param.nargs == -1
        annotation, info = self.descriptor.annotation, self.descriptor.parameter_info
        if value is None:
            return () if many else None
        # what Python refuses to convert (a whole number of thousands of digits, a path
        # holding NUL) is typer's to judge: its error, not a traceback
        with contextlib.suppress(ValueError, OverflowError):
            if many and typing.get_origin(annotation) is list and isinstance(value, (list, tuple)):
                (item,) = typing.get_args(annotation)
                items = [_plain_value(item, v, info, param, ctx) for v in value]
                if all(v is not _NOT_PLAIN for v in items):
                    return items
            elif not many:
                plain = _plain_value(annotation, value, info, param, ctx)
                if plain is not _NOT_PLAIN:
                    return plain
        if self.typer_coercion is None:
            self.typer_coercion = typer_coercion.build_runtime_param(self.descriptor)
        return self.typer_coercion.coerce(value, param=param, ctx=ctx)


def _plain_coercion(param: Any) -> None:
    """Give a typer parameter the conversion above (typer's lazy slot for its own)."""
    if typer_coercion is None or typer_param_types is None:
        return
    if getattr(param, "_runtime_param", False) is None and hasattr(param, "type_descriptor"):
        if param.type_descriptor.file_annotation is None:
            param._runtime_param = _PlainCoercion(param)


def _readable(command: Any, ctx: Any) -> Any:
    if getattr(command, "_fleetaudit_readable", False):
        return command
    for param in [*command.params, command.get_help_option(ctx)]:
        if param is None:
            continue
        _plain_coercion(param)
        _word_metavar(param)
        if getattr(param, "help", None) is not None:
            param.help = _plain_help(param.help)
    command.help = _plain_help(command.help)
    command.short_help = _plain_help(command.short_help)
    command._fleetaudit_readable = True
    return command


class ReadableGroup(TyperGroup):
    """Every command's --help, this group's and those of commands added later alike:
    placeholders as words, brackets shown as written."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        return None if command is None else _readable(command, ctx)

    def get_params(self, ctx: Any) -> Any:
        _readable(self, ctx)
        return super().get_params(ctx)


app = typer.Typer(
    cls=ReadableGroup,
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
    str | None, typer.Option(
        "--at", help="The instant (default: the export time; a --scenario's saved instant)."
    )
]
WindowEndOption = Annotated[
    str | None, typer.Option(
        "--at", help="The window's end (default: the export time; a --scenario's saved instant)."
    )
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
        metavar="SECONDS",
    ),
]
# Mechanisms every command adopts by declaring the parameter (``handled`` acts on it):
# --quiet prints nothing but errors; --csv prints the command's table as CSV only.
QuietOption = Annotated[
    bool,
    typer.Option(
        "--quiet", "-q", help="Print nothing but errors (for cron); files are still written."
    ),
]
CsvOption = Annotated[
    bool,
    typer.Option("--csv", help="Print the table as CSV on stdout, nothing else (for scripts)."),
]


def _fail(message: str, code: int) -> None:
    _print_error(message)
    raise typer.Exit(code)


def handled(func: F) -> F:
    """Turn fleetaudit errors into one line on stderr and the right exit code.

    A command that declares ``quiet: QuietOption`` prints nothing but errors when
    it is set; one that declares ``as_csv: CsvOption`` prints only its CSV.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        console.configure(quiet=bool(kwargs.get("quiet")), data=bool(kwargs.get("as_csv")))
        try:
            return func(*args, **kwargs)
        except FleetAuditError as exc:
            _fail(exc.message, int(exc.exit_code))
        except KeyboardInterrupt:
            _fail(INTERRUPTED, int(ExitCode.INTERRUPT))
        except BrokenPipeError:
            _reader_left()
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
        console.configure()  # the output of this call alone (a library caller may have quieted it)
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


def _store(db: Path, lock_timeout: float) -> "api.StoreOptions":
    from fleetaudit import api

    if lock_timeout < 0 or lock_timeout != lock_timeout:
        raise UsageError("--lock-timeout: must be 0 or more seconds")
    return api.StoreOptions(db=db, lock_timeout=lock_timeout, on_wait=console.note)


INTERRUPTED = "interrupted; the store keeps its last committed state"


def _reader_left() -> None:
    """The reader of stdout went away (`| head`): end quietly, as `cat` would (SIGPIPE)."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    raise typer.Exit(int(ExitCode.PIPE))


def _one_format(*, as_json: bool, as_csv: bool) -> None:
    if as_json and as_csv:
        raise UsageError("--json and --csv: choose one")


def _check_outputs(**paths: Path | None) -> bool:
    """Whether one of the output options is stdout (``-``); two of them cannot be."""
    to_stdout = [name for name, path in paths.items() if is_stdout(path)]
    if len(to_stdout) > 1:
        raise UsageError(f"{' and '.join(to_stdout)}: only one output can go to stdout (-)")
    return bool(to_stdout)


def _show(
    result: Any,
    as_json: bool,
    as_csv: bool,
    document: Callable[[Any], Any],
    render: Callable[[Any], None],
    frame: Callable[[Any], Any],
) -> None:
    """--json: the document only; else the rendering, and with --csv its table (the
    console, configured by :func:`handled`, then prints nothing but the CSV)."""
    if as_json:
        console.print_json(document(result))
    else:
        render(result)
        if as_csv:
            console.print_csv(frame(result))


def _instant(text: str | None, option: str) -> datetime | None:
    return None if text is None else parse_instant(text, option=option)


@app.command()
@handled
def ingest(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Table files or folders of them (none where the format's collector fetches them).",
            show_default=False,
        ),
    ] = None,
    table: Annotated[
        str | None,
        typer.Option("--table", help="The table every file feeds (default: the file's stem)."),
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", help=f"Input format: {' or '.join(FORMATS)}.")
    ] = FORMATS[0],
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
            help=f"alibaba-gpu-v2023: the instant trace second 0 stands for (default {iso(DEFAULT_TRACE_START)}); "
            f"alibaba-gpu-v2026: the instant day 0 starts (default {iso(ASI_TRACE_START)}, a Thursday).",
        ),
    ] = None,
    days: Annotated[
        str | None,
        typer.Option(
            "--days",
            help="alibaba-gpu-v2026: the trace days to read, A-B or A (the paper week is 109-115; default every day).",
        ),
    ] = None,
    topology: Annotated[
        Path | None,
        typer.Option(
            "--topology",
            help="The switch hierarchy of the call's nodes, any format: a CSV node_id,switch_id[,block_id,...], "
            "a Slurm topology.conf, or a Crux topo.csv (PSW, ASW per host) whose domains the nodes are dealt into.",
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
            help="kubernetes, slurm: a file of NAME = high|low lines mapping site priority names "
            "(Kubernetes priority class or value, Slurm QOS or partition); see "
            "docs/formats/slurm.md for what an unnamed one becomes.",
        ),
    ] = None,
    snapshot_time: Annotated[
        str | None,
        typer.Option(
            "--snapshot-time",
            help="kubernetes: when the files were exported (default: the newest node heartbeat in each file).",
        ),
    ] = None,
    tenant_label: Annotated[
        str | None,
        typer.Option(
            "--tenant-label",
            help="kubernetes: the pod label naming the tenant (default: the namespace).",
        ),
    ] = None,
    from_slurm: Annotated[
        bool,
        typer.Option(
            "--from-slurm",
            help="slurm: run sacct, scontrol, squeue, sacctmgr and sdiag on this host (a login "
            "node) and ingest their output instead of named files; nothing is left behind.",
        ),
    ] = False,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="slurm --from-slurm: how far back the fetched history reaches "
            f"(default {duration_text(SLURM_COLLECT_SINCE)}).",
        ),
    ] = None,
    export_time: Annotated[
        str | None,
        typer.Option(
            "--export-time",
            help="When the files were exported (default: the instant an export says it was "
            "taken, else the newest time in the data).",
        ),
    ] = None,
    as_csv: CsvOption = False,

    percent: Annotated[
        list[str] | None,
        typer.Option(
            "--percent",
            help="A fraction column (sm_active, mem_used) whose values are percent (0..100): "
            "scaled to 0..1. Repeat for several.",
        ),
    ] = None,
    db: DbOption = Path(DEFAULT_DB),
    lock_timeout: LockTimeoutOption = DEFAULT_LOCK_TIMEOUT,
    quiet: QuietOption = False,
) -> None:
    """Load CSV (.csv, .csv.gz), Parquet or JSON Lines files into the store.

    A file's table is its stem (nodes, allocations, requests, telemetry,
    node_events) or --table; a folder loads every table file in it. One call
    is one transaction: all files land or none do. A row whose key exists
    replaces the stored row. Rows that break the schema go to the rejects
    table with file, row, column and reason (`fleetaudit rejects` lists them).

    --format kubernetes reads kubectl JSON snapshots (Nodes, Pods, Kueue
    Workloads). --format slurm reads a Slurm cluster's exports, each
    recognised by its content: sacct -P or --json, scontrol -d -o show node or
    --json, scontrol -d -o show job, squeue --json, sacctmgr -P show event,
    sdiag, topology.conf; with --from-slurm it runs them itself.
    --format prometheus loads
    dcgm-exporter GPU series (query_range JSON, /metrics scrapes) into
    telemetry; ingest the nodes first.

    Examples:

      fleetaudit ingest exports/latest/
      fleetaudit ingest --table allocations --strict jobs-2026-05-01.csv.gz
      fleetaudit ingest --format kubernetes snapshots/ \\
          --priority-map priorities.txt
      fleetaudit ingest --format slurm sacct.psv nodes.txt topology.conf
      fleetaudit ingest --format slurm --from-slurm --since 1d
      fleetaudit ingest --format prometheus dcgm/
    """
    from fleetaudit import api
    from fleetaudit.inputs.ingest import IngestOptions, asi2026

    spec = INGEST_FORMAT_SPECS.get(fmt)
    collect: object | None = None  # a collector's settings, where its flag was given
    if from_slurm:
        if spec is not None and spec.collector != "--from-slurm":
            raise UsageError("--from-slurm applies to --format slurm only")
        from fleetaudit.inputs.ingest.slurm_collect import SlurmCollect

        collect = SlurmCollect(
            since=SLURM_COLLECT_SINCE if since is None else parse_duration(since, option="--since")
        )
    elif since is not None:
        raise UsageError("--since applies with --from-slurm only")
    if not paths and collect is None:
        raise UsageError("name the files or folders to ingest")
    given = {
        "--trace-start": trace_start,
        "--days": days,
        "--snapshot-time": snapshot_time,
        "--tenant-label": tenant_label,
        "--priority-map": priority_map,
        "--timezone": timezone,
    }
    for flag, value in given.items():
        if value is not None and spec is not None and flag not in spec.options:
            takers = [f.name for f in INGEST_FORMAT_SPECS.values() if flag in f.options]
            raise UsageError(f"{flag} applies to --format {' or '.join(takers)} only")
    if table is not None and spec is not None and not spec.takes_table:
        raise UsageError(f"--table does not apply to --format {fmt} ({spec.files})")
    options = IngestOptions(
        table=table,
        format=fmt,
        strict=strict,
        trace_start=_instant(trace_start, "--trace-start"),
        topology=topology,
        timezone=timezone or "UTC",
        priority_map=priority_map,
        snapshot_time=_instant(snapshot_time, "--snapshot-time"),
        tenant_label=tenant_label,
        days=None if days is None else asi2026.parse_days(days),
        percent=tuple(percent or ()),
        collect=collect,
        export_time=_instant(export_time, "--export-time"),
    )
    with console.progress_status("ingesting") as progress:
        result = api.ingest_paths(_store(db, lock_timeout), paths or [], options, progress)
    console.render_ingest(result)
    if as_csv:
        console.print_csv(console.ingest_frame(result))


@app.command()
@handled
def status(
    as_csv: CsvOption = False,
    db: DbOption = Path(DEFAULT_DB),
    lock_timeout: LockTimeoutOption = DEFAULT_LOCK_TIMEOUT,
    quiet: QuietOption = False,
) -> None:
    """What the store holds: rows per table, GPUs per model, export, scenarios.

    Examples:

      fleetaudit status
      fleetaudit status --csv > capacity.csv
    """
    from fleetaudit import api

    summary = api.summarize(_store(db, lock_timeout))
    console.render_summary(summary)
    if as_csv:
        console.print_csv(console.status_frame(summary))


@app.command()
@handled
def rejects(
    ingest_id: Annotated[
        int | None,
        typer.Option(
            "--ingest", help="The ingest call (its # in ingest's summary; default: the newest).",
            metavar="N",
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", help="Show at most this many rows (0: all).", metavar="N")
    ] = REJECTS_LIMIT,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the JSON document (fleetaudit.rejects/1) only."),
    ] = False,
    as_csv: CsvOption = False,
    db: DbOption = Path(DEFAULT_DB),
    lock_timeout: LockTimeoutOption = DEFAULT_LOCK_TIMEOUT,
    quiet: QuietOption = False,
) -> None:
    """List the rows an ingest rejected: file, row, column, value and reason.

    Examples:

      fleetaudit rejects
      fleetaudit rejects --ingest 1 --limit 0 --csv > rejects-1.csv
    """
    from fleetaudit import api
    from fleetaudit.outputs.contract import rejects_document

    _one_format(as_json=as_json, as_csv=as_csv)
    result = api.list_rejects(_store(db, lock_timeout), ingest_id, limit)
    if as_json:
        console.print_json(rejects_document(result))
    elif as_csv:
        console.print_csv(result.rejects.drop("ingest_id"))
    else:
        console.render_rejects(result)


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
        typer.Option(
            "--out",
            help="Also write the per-node state to this .csv or .parquet file (- : stdout).",
            metavar="PATH",
        ),
    ] = None,
    out_format: Annotated[
        str | None,
        typer.Option(
            "--out-format",
            help="csv or parquet (default: the --out suffix; needed for -, a FIFO or a device).",
            metavar="FORMAT",
        ),
    ] = None,
    as_csv: CsvOption = False,
    db: DbOption = Path(DEFAULT_DB),
    lock_timeout: LockTimeoutOption = DEFAULT_LOCK_TIMEOUT,
    quiet: QuietOption = False,
) -> None:
    """The occupancy of every node at an instant, summed per GPU model.

    Occupied GPUs count whole GPUs plus the GPUs that shares fill when packed
    first-fit-decreasing; allocated_high is high-priority work alone.

    Examples:

      fleetaudit state --at 2026-04-30T06:00:00Z --duration 6h
      fleetaudit state --out - --out-format csv | grep -E 'degraded|cordoned|down'
    """
    from fleetaudit import api

    window = None if duration is None else parse_duration(duration, option="--duration")
    to_stdout = _check_outputs(**{"--out": out, "--csv": Path("-") if as_csv else None})
    result = api.node_state(
        _store(db, lock_timeout), _instant(at, "--at"), window, scenario, out, out_format
    )
    if out is not None:
        console.wrote(out)
    if as_csv:
        frame = console.state_by_model(result.state).drop("overcommitted")
        console.print_csv(frame if duration else frame.drop("idle_window"))
    elif not to_stdout:  # stdout holds the file alone
        console.render_state(result.state, iso(result.at) or "", duration)
    for text in result.notes:  # on stderr, like those of shapes and report
        console.note(text)


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
    typer.Option("--locality", help="switch, block, any or node (default node for one pod, else switch)."),
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
) -> "tuple[Shape, ...]":
    """The ad-hoc shape (--model/--gpus/...) and those of --shapes FILE; empty: none given."""
    from fleetaudit.api.shapes_api import read_shapes_file
    from fleetaudit.model.shapes import make_shape

    adhoc: "tuple[Shape, ...]" = ()
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
        typer.Option("--json", help="Print the JSON document (fleetaudit.shapes/1) only."),
    ] = False,
    as_csv: CsvOption = False,
    db: DbOption = Path(DEFAULT_DB),
    lock_timeout: LockTimeoutOption = DEFAULT_LOCK_TIMEOUT,
    quiet: QuietOption = False,
) -> None:
    """How many instances of a request shape can start now; what strands the rest.

    Without --gpus or --shapes: every distinct GPU shape queued at --at.
    Per shape: instances, usable GPUs, and the idle GPUs stranded by cause
    (interval, fragment, cpu_memory, topology), adding up exactly.

    Examples:

      fleetaudit shapes --model H20 --gpus 256 --cpus-per-gpu 16 --explain
      fleetaudit shapes --reclaim --history 7d --step 5m --deadline 1h --csv
    """
    from fleetaudit.api.shapes_api import ShapesOptions, evaluate_shapes
    from fleetaudit.outputs.contract import shapes_document

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
    _one_format(as_json=as_json, as_csv=as_csv)
    result = evaluate_shapes(_store(db, lock_timeout), options)
    _show(result, as_json, as_csv, shapes_document, console.render_shapes, console.shapes_frame)


whatif = typer.Typer(
    cls=ReadableGroup,
    name="whatif",
    help=(
        "Replay what-ifs offline: placement, in-place compaction, standby harvesting."
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
            "--shuffle",
            help="Fill mode: feed the list in a seeded order, as the FGD authors' runs do "
            "(the default).",
        ),
    ] = False,
    in_order: Annotated[
        bool,
        typer.Option("--in-order", help="Fill mode: feed the list in its own order, unshuffled."),
    ] = False,
    since: Annotated[
        str | None,
        typer.Option("--since", help="By-time replay: the window [at - since, at) (default 1d)."),
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
    ] = PLACEMENT_QUEUES[0],
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
        bool, typer.Option("--json", help="Print the JSON document (fleetaudit.placement/1) only.")
    ] = False,
    as_csv: CsvOption = False,
    db: DbOption = Path(DEFAULT_DB),
    lock_timeout: LockTimeoutOption = DEFAULT_LOCK_TIMEOUT,
    quiet: QuietOption = False,
) -> None:
    """Replay the stored requests onto the nodes under placement policies.

    By time (default): arrivals and departures as
    recorded over [at - since, at), from the state at the window's start (or
    --empty), waiting requests in a fifo or backfill queue; allocated and
    fragmented GPU % at every 5% of the window. --fill is the FGD paper's
    method: no departures, requests in an order shuffled per seed (--in-order:
    list order) on an empty fleet (resampled with the seed); allocated and
    fragmented GPU % at every 5% of arrival.

    Examples:

      fleetaudit whatif placement --since 1d --queue backfill
      fleetaudit whatif placement --fill 90 --seeds 5 \\
          --policy fgd --policy best-fit
    """
    from fleetaudit.api.placement_api import PlacementRun
    from fleetaudit.api.placement_api import whatif_placement as run_placement
    from fleetaudit.outputs.contract import placement_document

    chosen = tuple(policy) if policy else POLICIES
    unknown = [p for p in chosen if p not in POLICIES]
    if unknown:
        raise UsageError(f"--policy: unknown {unknown[0]!r}; use {', '.join(POLICIES)}")
    if fill is not None and (since is not None or empty or queue != PLACEMENT_QUEUES[0]):
        raise UsageError("--since, --empty and --queue apply to by-time replay, not to --fill")
    if shuffle and in_order:
        raise UsageError("--shuffle and --in-order: give one of them")
    shuffle = not in_order
    run = PlacementRun(
        policies=chosen, fill_pct=fill, seeds=seeds, seed=seed, shuffle=shuffle,
        at=_instant(at, "--at"), save_as=save_as,
        since=None if since is None else parse_duration(since, option="--since"),
        empty=empty, queue=queue,
    )  # fmt: skip
    _one_format(as_json=as_json, as_csv=as_csv)
    with console.progress_status("replaying placements"):
        result = run_placement(_store(db, lock_timeout), run)
    _show(
        result, as_json, as_csv, placement_document,
        console.render_placement, console.placement_frame,
    )  # fmt: skip


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
    ] = duration_text(_COMPACTION.min_remaining_s),
    state_gib_per_gpu: Annotated[
        float,
        typer.Option("--state-gib-per-gpu", help="State a move transfers per GPU (GiB)."),
    ] = _COMPACTION.state_gib_per_gpu,
    bandwidth_gbps: Annotated[
        float, typer.Option("--bandwidth-gbps", help="Transfer rate of a move (Gbit/s).")
    ] = _COMPACTION.bandwidth_gbps,
    warmup: Annotated[
        str, typer.Option("--warmup", help="Fixed pause of a move on top of its transfer.")
    ] = duration_text(_COMPACTION.warmup_s),
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
    ] = duration_text(_OVER_TIME.every_s),
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
        bool, typer.Option("--json", help="Print the JSON document (fleetaudit.compaction/1) only.")
    ] = False,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            help="Where the partitions run: local (worker processes) or spark (the executors "
            "of a Spark session; needs pip install 'fleetaudit[spark]' and Java 17 or 21).",
        ),
    ] = COMPACTION_ENGINES[0],
    master: Annotated[
        str | None,
        typer.Option(
            "--master",
            help="Spark master URL (default: local[*], or the session of spark-submit or "
            "SPARK_REMOTE); only with --engine spark.",
            show_default=False,
        ),
    ] = None,

    as_csv: CsvOption = False,
    db: DbOption = Path(DEFAULT_DB),
    lock_timeout: LockTimeoutOption = DEFAULT_LOCK_TIMEOUT,
    quiet: QuietOption = False,
) -> None:
    """Replay in-place compaction at --at: a move ledger and the capacity it frees.

    Per partition (whole switch domains of one GPU model), partially
    occupied nodes are emptied by ejection chains of make-before-break
    moves. The objective, in order: more instances of the queued shapes (or
    those given), more free nodes, fewer partially occupied nodes, fewer
    GPUs moved. Without a shape option the queued shapes at --at count.

    With --over, the window before --at is also replayed by time twice on
    the same arrivals: without compaction, and with a compaction round every
    --every that applies at most --moves-per-hour GPUs of moves. It reports
    partially occupied and free nodes along the window, start probabilities,
    requests that started earlier and the migration paid; report then shows
    this run.

    Examples:

      fleetaudit whatif compaction --model H20 --gpus 64 --save-as compacted
      fleetaudit shapes --scenario compacted --model H20 --gpus 64
    """
    from fleetaudit.api.compaction_api import CompactionRun, compaction_document
    from fleetaudit.api.compaction_api import whatif_compaction as run_compaction

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
                        save_as=save_as, jobs=jobs, options=options,
                        engine=engine, master=master, over_s=over_s,
                        over_time=over_time)  # fmt: skip
    _one_format(as_json=as_json, as_csv=as_csv)
    with console.progress_status("compacting"):
        report = run_compaction(_store(db, lock_timeout), run)
    _show(
        report, as_json, as_csv, compaction_document,
        console.render_compaction, console.compaction_frame,
    )  # fmt: skip


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
            "--since", help=f"The window [at - since, at) to replay ({duration_text(HarvestRun.since)})."
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
            help=f"A sleepable allocation idle this long sleeps ({duration_text(HarvestRun.idle_for)}).",
        ),
    ] = None,
    eviction_delay: Annotated[
        str | None,
        typer.Option(
            "--eviction-delay",
            help=f"Mean delay from a wake to the eviction ({duration_text(HarvestRun.eviction_delay_mean)}).",
        ),
    ] = None,
    eviction_delay_p95: Annotated[
        str | None,
        typer.Option(
            "--eviction-delay-p95",
            help=f"95th percentile of that delay ({duration_text(HarvestRun.eviction_delay_p95)}).",
        ),
    ] = None,
    kill_after: Annotated[
        str | None,
        typer.Option(
            "--kill-after",
            help=f"A borrower still there this long is killed: forced ({duration_text(HarvestRun.kill_after)}).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the JSON document (fleetaudit.harvesting/1) only.")
    ] = False,
    as_csv: CsvOption = False,
    db: DbOption = Path(DEFAULT_DB),
    lock_timeout: LockTimeoutOption = DEFAULT_LOCK_TIMEOUT,
    quiet: QuietOption = False,
) -> None:
    """Replay a window with sleeping inference lending GPUs to low-priority work.

    High priority runs as recorded; low-priority jobs arrive as recorded and run
    wherever their GPU model has room, on lent GPUs too. Victim policies compare
    side by side. Sleeps come from telemetry; without it nothing sleeps. An
    install from a wheel loads the replay compiled when the wheel was built;
    otherwise the first run on a machine compiles it (a minute or two, said on
    stderr) and later runs load it.

    Examples:

      fleetaudit whatif harvesting --since 7d
      fleetaudit whatif harvesting --policy spotgpu --policy newest \\
          --kill-after 2m --json
    """
    from fleetaudit.api.harvest_api import harvesting_document
    from fleetaudit.api.harvest_api import whatif_harvesting as run_harvesting

    durations: dict[str, Any] = {
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
    _one_format(as_json=as_json, as_csv=as_csv)
    with console.progress_status("replaying harvesting") as progress:
        result = run_harvesting(_store(db, lock_timeout), run, progress, notice=console.note)
    _show(
        result, as_json, as_csv, harvesting_document,
        console.render_harvesting, console.harvesting_frame,
    )  # fmt: skip


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
        float | None,
        typer.Option(
            "--days",
            help=f"Days of allocations before the export time (default {GenerateOptions.days:g}; "
            f"slurm: default {SlurmGenerateOptions.days:g}; "
            f"alibaba-gpu-v2026: days written, default {ASI_RELEASE_DAYS}).",
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", help="Random seed: the same seed writes the same files.")
    ] = GenerateOptions.seed,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="parquet or csv; kubernetes: one kubectl JSON snapshot at the export time; "
            "prometheus: Parquet tables and the telemetry as dcgm-exporter query_range JSON "
            "files in FOLDER/prometheus; slurm: a Slurm cluster's exports (sacct.psv, nodes.txt, "
            "topology.conf); alibaba-gpu-v2026: the ASI release's own layout (--nodes servers "
            "over --days whole days from day 109, the paper week).",
        ),
    ] = GenerateOptions.format,
    jobs: Annotated[
        int, typer.Option("--jobs", help="slurm: jobs in the sacct history.")
    ] = SlurmGenerateOptions.jobs,
    telemetry_step: Annotated[
        str, typer.Option("--telemetry-step", help="Telemetry sampling step (e.g. 5m).")
    ] = duration_text(GenerateOptions.telemetry_step_s),
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
    node_events: Annotated[
        float,
        typer.Option(
            "--node-events",
            help="Also write node_events: health intervals per node and year (GPU XIDs, "
            "drains, outages, cordons; a few nodes flap), e.g. 15. Default 0: none.",
        ),
    ] = GenerateOptions.node_events,
    node_events_days: Annotated[
        float,
        typer.Option(
            "--node-events-days", help="Days of health history before the export time."
        ),
    ] = GenerateOptions.node_events_days,
    quiet: QuietOption = False,
) -> None:
    """Write a deterministic synthetic fleet shaped like Alibaba's ASI platform.

    8-GPU nodes (some 4 and 16) in switch domains of 32-64 nodes, several GPU
    models, online inference with a daily cycle and sleepable warm containers,
    low-priority offline inference in the gaps, training gangs, a pending queue
    and SM-active telemetry.

    Examples:

      fleetaudit generate fleet --nodes 500 --days 14
      fleetaudit generate fleet --nodes 50 --format csv && fleetaudit ingest fleet
    """
    from fleetaudit import api

    if fmt == "slurm":
        slurm_days = SlurmGenerateOptions.days if days is None else days
        try:
            cluster = api.generate_slurm_cluster(
                out, SlurmGenerateOptions(nodes=nodes, jobs=jobs, days=slurm_days, seed=seed)
            )
        except UsageError as exc:
            field, _, rest = str(exc).partition(" ")
            if field in ("nodes", "jobs", "days"):
                raise UsageError(f"--{field}: {rest}") from exc
            raise
        console.render_generate(cluster)  # type: ignore[arg-type]
        return
    if fmt == "alibaba-gpu-v2026":
        from fleetaudit.inputs.generate_asi import AsiReleaseOptions

        whole = AsiReleaseOptions.days if days is None else days
        if whole != int(whole):
            raise UsageError(f"--days: {whole:g} is not a whole number of days")
        release = AsiReleaseOptions(servers=nodes, days=int(whole), seed=seed)
        with console.progress_status("generating") as progress:
            written = api.generate_release(out, release, lambda msg, _frac: progress(msg))
        console.render_release(written)
        return
    options = GenerateOptions(
        nodes=nodes,
        days=GenerateOptions.days if days is None else days,
        seed=seed,
        format=fmt,
        telemetry_step_s=int(
            parse_duration(telemetry_step, option="--telemetry-step").total_seconds()
        ),
        telemetry_days=telemetry_days,
        harvested_nights=harvested_nights,
        node_events=node_events,
        node_events_days=node_events_days,
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
    "node_events": "--node-events",
    "node_events_days": "--node-events-days",
    "nodes": "--nodes",
    "days": "--days",
    "seed": "--seed",
    "format": "--format",
    "telemetry_step_s": "--telemetry-step",
    "telemetry_days": "--telemetry-days",
    "harvested_nights": "--harvested-nights",
}


EngineOption = Annotated[
    str,
    typer.Option(
        "--engine",
        help="duckdb (built in) or spark (needs pip install 'fleetaudit[spark]' and Java 17 or 21).",
    ),
]
MasterOption = Annotated[
    str | None,
    typer.Option(
        "--master",
        help="Spark master URL (default: local[*], or the session of spark-submit or "
        "SPARK_REMOTE); only with --engine spark.",
        show_default=False,
    ),
]


@app.command()
@handled
def rollup(
    sources: Annotated[
        list[Path],
        typer.Argument(
            help="Raw telemetry: Parquet files, or folders of them (hive partitions too).",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", help="Folder to write the rolled-up native tables into.")
    ],
    interval: Annotated[
        str, typer.Option("--interval", help="Length of one rolled-up interval: 15m, 1h, 1d.")
    ] = duration_text(DEFAULT_INTERVAL_S),
    engine: EngineOption = SCAN_ENGINES[0],
    master: MasterOption = None,
    fmt: Annotated[
        str, typer.Option("--format", help=f"Format of the raw files: {', '.join(SOURCES)}.")
    ] = "native",
    quiet: QuietOption = False,
) -> None:
    """Roll raw telemetry up per node, GPU, allocation and interval, into Parquet.

    Writes OUT/telemetry.parquet: per interval, the means of sm_active and
    mem_used and the number of samples. `fleetaudit ingest OUT` loads it, and
    `report` counts each row as its samples, so the productive figures are
    those of the raw telemetry. `--engine spark` runs the same SQL on Spark,
    where the raw history lives.

    Examples:

      fleetaudit rollup lake/telemetry/ --out rolled/ && fleetaudit ingest rolled/
      fleetaudit rollup lake/telemetry/ --out rolled/ --interval 15m \\
          --engine spark
    """
    from fleetaudit.api.rollup_api import RollupOptions
    from fleetaudit.api.rollup_api import rollup as run_rollup

    options = RollupOptions(
        interval_s=parse_duration(interval, option="--interval").total_seconds(),
        engine=engine,
        master=master,
        format=fmt,
    )
    with console.progress_status(f"rolling up on {engine}"):
        result = run_rollup(sources, out, options)
    console.render_rollup(result)


@app.command()
@handled
def report(
    at: WindowEndOption = None,
    since: Annotated[
        str, typer.Option("--since", help="The window's length, ending at --at: 90m, 6h, 7d.")
    ] = duration_text(REPORT_SINCE),
    step: Annotated[
        str, typer.Option("--step", help="Sampling step of the schedulable figures.")
    ] = duration_text(REPORT_STEP),
    scenario: ScenarioOption = None,
    demand: Annotated[
        str | None,
        typer.Option(
            "--demand",
            help="The shapes the schedulable figures evaluate: waited (requests that waited in "
            "the window), submitted (submitted in it) or queued (queued at its end). "
            "Default: waited, or submitted where none waited.",
        ),
    ] = None,
    quarantine: Annotated[
        int,
        typer.Option(
            "--quarantine",
            help="Failures in the window that make a node a quarantine candidate.",
        ),
    ] = REPORT_QUARANTINE,
    interrupted_within: Annotated[
        str,
        typer.Option(
            "--interrupted-within",
            help="An allocation that ended this close to its node going down was interrupted.",
        ),
    ] = duration_text(REPORT_INTERRUPTED_WITHIN),
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
    as_csv: CsvOption = False,

    record: Annotated[
        bool,
        typer.Option(
            "--record",
            help="Keep this report as the baseline of the next report's trend (a report that "
            "writes --html or --json is kept anyway).",
        ),
    ] = False,
    db: DbOption = Path(DEFAULT_DB),
    lock_timeout: LockTimeoutOption = DEFAULT_LOCK_TIMEOUT,
    quiet: QuietOption = False,
) -> None:
    """The three denominators of a window, per GPU model and for the fleet.

    Physical GPU-hours (exact), schedulable ones (idle GPU-hours the
    window's demand could use and the stranded rest by cause, sampled every
    --step), productive ones (SM-active over allocated, from telemetry), what
    failures cost (unhealthy GPU-hours by state and reason, the nodes that fail
    most, MTBF, interrupted work), the stored what-if estimates, and each
    headline figure's change since the previous recorded report of the same
    window length and step.

    Examples:

      fleetaudit report --html 'reports/{date}.html' --json 'reports/{date}.json'
      fleetaudit report --json - | jq '.fleet'
    """
    from fleetaudit.api.report_api import ReportOptions, build_report, record_report

    to_stdout = _check_outputs(
        **{"--html": html, "--json": json_path, "--csv": Path("-") if as_csv else None}
    )
    store = _store(db, lock_timeout)
    options = ReportOptions(
        at=_instant(at, "--at"),
        since=parse_duration(since, option="--since"),
        step=parse_duration(step, option="--step"),
        scenario=scenario,
        demand=demand,
        quarantine=quarantine,
        interrupted_within=parse_duration(interrupted_within, option="--interrupted-within"),
    )
    with console.progress_status("computing the report"):
        result = build_report(store, options)
    _write_report(result, html, json_path)
    if as_csv:
        console.print_csv(console.report_frame(result))
    elif not to_stdout:  # stdout holds the file alone
        console.render_report(result)
    if html is not None or json_path is not None or record:
        why = record_report(store, result)
        if why is not None:
            console.note(f"this report is not recorded for the next trend: {why}")
    else:
        console.note(
            "this report is not recorded for the next trend (it writes no file; --record keeps it)"
        )


def _write_report(result: "ReportResult", html: Path | None, json_path: Path | None) -> None:
    from fleetaudit.outputs.contract import report_document
    from fleetaudit.outputs.report import expand_path, write_html

    if json_path is not None:
        import json

        target = expand_path(json_path, result.generated_at)
        write_output(target, json.dumps(report_document(result), indent=1) + "\n")
        console.wrote(target)
    if html is not None:
        target = expand_path(html, result.generated_at)
        write_html(result, target)
        console.wrote(target)


@app.command()
@handled
def paper(
    days: Annotated[
        str | None,
        typer.Option(
            "--days",
            help="Trace days A-B or A (default: the paper week 109-115 where the store holds it, "
            "else every day it holds).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the fleetaudit.paper/1 document.")
    ] = False,
    db: DbOption = Path(DEFAULT_DB),
    lock_timeout: LockTimeoutOption = DEFAULT_LOCK_TIMEOUT,
    quiet: QuietOption = False,
) -> None:
    """The ASI paper's figures on an ingested ASI trace, beside fleetaudit's own.

    Allocation rate per model (HP, HP+LP), idle-GPU classes for the eight
    reference shapes, ASW slots for 128/256-GPU gangs at 12 vCPU per GPU,
    standby GPU-hours and their harvested share, requested vCPU per GPU; each
    computed as the paper's scripts do, next to fleetaudit's own figure for the
    same window and a line on how they differ.

    Examples:

      fleetaudit ingest --format alibaba-gpu-v2026 \\
          cluster-trace-gpu-v2026/data --days 109-115
      fleetaudit paper
      fleetaudit paper --days 109-115 --json > asi-paper-week.json
    """
    from fleetaudit.api.paper_api import PaperOptions, build_paper
    from fleetaudit.inputs.ingest import asi2026
    from fleetaudit.outputs.contract import paper_document

    options = PaperOptions(days=asi2026.parse_days(days))
    with console.progress_status("computing the paper's figures"):
        result = build_paper(_store(db, lock_timeout), options)
    if as_json:
        console.print_json(paper_document(result))
    else:
        console.render_paper(result)


@app.command()
@handled
def demo(
    db: DbOption = Path(DEFAULT_DB),
    lock_timeout: LockTimeoutOption = DEFAULT_LOCK_TIMEOUT,
    quiet: QuietOption = False,
) -> None:
    """Ingest the bundled sample fleet; show its capacity, state, shapes, report.

    The report's HTML page is written beside the store (DB's name with
    -report.html) and its path is the last line.

    Examples:

      fleetaudit demo
      fleetaudit demo --db /tmp/sample.duckdb
    """
    from fleetaudit import api
    from fleetaudit.api.report_api import ReportOptions, build_report
    from fleetaudit.api.shapes_api import ShapesOptions, evaluate_shapes
    from fleetaudit.outputs.report import write_html

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
    page = db.parent / f"{db.stem}-report.html"
    write_html(report_result, page)
    console.out.print("the report as a page, to open in a browser:")
    console.out.print(str(page), soft_wrap=True)


def main() -> None:
    """Console-script entry point: usage errors too are one line and exit 2."""
    try:
        code = app(prog_name="fleetaudit", standalone_mode=False)
        sys.stdout.flush()
    except (typer.Abort, KeyboardInterrupt):  # Ctrl-C outside a command's body
        _print_error(INTERRUPTED)
        code = int(ExitCode.INTERRUPT)
    except BrokenPipeError:
        with contextlib.suppress(typer.Exit):
            _reader_left()
        sys.exit(int(ExitCode.PIPE))
    except TyperException as exc:  # typer's click: a bad option, a missing argument
        ctx = getattr(exc, "ctx", None)
        command = ctx.command_path if ctx is not None else "fleetaudit"
        _print_error(f"{exc.format_message()} (see {command} --help)")
        sys.exit(int(ExitCode.INPUT))
    code = code if isinstance(code, int) else 0
    # The command is done: a Ctrl-C from here on has nothing left to stop, and during
    # the interpreter's shutdown it would kill the process without a word (-2).
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if code == ExitCode.INTERRUPT:
        # The stores are closed by now. Not SystemExit: when a library ran code through
        # PyRun_* as the Ctrl-C came, CPython would end by SIGINT (-2) instead of 130.
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _print_error(message: str) -> None:
    """One line on stderr, even under --quiet."""
    line = " ".join(message.strip().split("\n"))
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"fleetaudit: error: {line}\n")
        sys.stderr.flush()


if __name__ == "__main__":
    main()
