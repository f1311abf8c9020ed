"""The ``fleetaudit`` command line: parse, call one :mod:`fleetaudit.api` function, render.

Every command takes ``--db`` (default ``./fleetaudit.duckdb``, or
``$FLEETAUDIT_DB``). Errors become one line on stderr and an exit code
(:class:`fleetaudit.core.errors.ExitCode`): 0 ok, 2 bad input or usage, 74 no space
left on device, 75 store busy.
"""

# No ``from __future__ import annotations``: typer reads every command's parameters at
# start-up (--help too), and string annotations it would evaluate twice each.

import contextlib
import functools
import inspect
import os
import re
import signal
import sys
import typing
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.markup import escape
from typer.core import TyperGroup
from typer.exceptions import TyperException

from fleetaudit import __version__
from fleetaudit.core.errors import (
    AllRejectedError,
    ExitCode,
    FleetAuditError,
    UsageError,
    no_space,
)
from fleetaudit.core.fsutil import check_outputs, expand_path, is_stdout
from fleetaudit.core.lazy import LazyModule, import_with_stand_ins
from fleetaudit.core.options import ALIBABA_TRACE_START as DEFAULT_TRACE_START
from fleetaudit.core.options import (
    ASI_RELEASE_DAYS,
    ASI_TRACE_START,
    COMPACTION_ENGINES,
    DEFAULT_DB,
    DEFAULT_LOCK_TIMEOUT,
    DEMAND_DEFAULT_SHAPES,
    DEMAND_PER_MODEL_SHAPES,
    HARVEST_SINCE,
    INGEST_FORMAT_SPECS,
    PLACEMENT_QUEUES,
    PLACEMENT_SINCE,
    PULL_STEP,
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
    KubectlOptions,
    OverTimeOptions,
    PrometheusPull,
    RemediesRun,
    SlurmGenerateOptions,
    budget_text,
    duration_text,
    parse_budget,
)
from fleetaudit.core.options import INGEST_FORMATS as FORMATS
from fleetaudit.core.options import PLACEMENT_POLICIES as POLICIES
from fleetaudit.core.options import ROLLUP_INTERVAL_S as DEFAULT_INTERVAL_S
from fleetaudit.core.options import ROLLUP_SOURCES as SOURCES
from fleetaudit.core.sanitize import shown
from fleetaudit.core.times import iso, parse_duration, parse_instant

# The engines (polars, numpy, duckdb, numba: most of a start-up) are imported in
# the command that runs them, and the terminal renderer when a command prints, so
# `fleetaudit --help` and usage errors stay fast.
if TYPE_CHECKING:
    from fleetaudit import api
    from fleetaudit.model.shapes import Shape
    from fleetaudit.outputs import console
else:
    console = LazyModule("fleetaudit.outputs.console")

# Placeholders in --help read as words, by option name (else by type); flags show none.
# typer's help and error renderer imports rich's Markdown (markdown-it, pygments) and
# Traceback at its top, a third of --help's start-up, for markdown help texts and pretty
# tracebacks, neither of which this command line uses: they load if ever called.
import_with_stand_ins(
    "typer.rich_utils", {"rich.markdown": ("Markdown",), "rich.traceback": ("Traceback",)}
)

METAVARS = {
    "--db": "PATH", "--out": "PATH", "--shapes": "PATH",
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
    "--moves-per-hour": "BUDGET", "--add": "MODEL:N", "--remove": "MODEL:N|PATH",
    "--cpus": "MODEL:+N", "--memory": "MODEL:+GIB", "--port": "FROM=TO:SPEED",
    "--merge-level": "LEVEL", "--target": "p_start=P", "--prices": "PATH",
    "--into-switches": "WHERE", "--max-add": "N", "--cpu-step": "CORES", "--demand": "MODE", "--sweep-budget": "BUDGETS", "--target-reduction": "PERCENT",
    "--url": "URL", "--until": "TIME", "--bearer-token-file": "PATH", "--user": "NAME[:PASSWORD]",
    "--ca-file": "PATH", "--header": "K=V",
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


def optional_values(args: list[str], options: frozenset[str]) -> list[str]:
    """The arguments with ``-`` after each of ``options`` given without a value (the
    end, or another option, follows it), which the parser then reads as ``OPTION -``.

    >>> optional_values(["--json", "--db", "x", "--csv"], frozenset({"--json", "--csv"}))
    ['--json', '-', '--db', 'x', '--csv', '-']
    >>> optional_values(["--json", "out.json", "--csv", "-", "--", "--json"], frozenset({"--json", "--csv"}))
    ['--json', 'out.json', '--csv', '-', '--', '--json']
    """
    given = list(args)
    out: list[str] = []
    while given:
        arg = given.pop(0)
        out.append(arg)
        if arg == "--":
            return out + given
        if arg in options and (not given or (given[0].startswith("-") and given[0] != "-")):
            out.append("-")
    return out


def _with_optional_values(command: Any) -> None:
    """Let the command's output options (placeholder [PATH]) be given without a value."""
    options = frozenset(
        opt
        for param in command.params
        if getattr(param, "metavar", None) == OPTIONAL_PATH
        for opt in param.opts
    )
    if not options:
        return
    parse = command.parse_args
    command.parse_args = lambda ctx, args: parse(ctx, optional_values(args, options))


def _readable(command: Any, ctx: Any) -> Any:
    if getattr(command, "_fleetaudit_readable", False):
        return command
    _with_optional_values(command)
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
    str | None,
    typer.Option(
        "--at", help="The instant (default: the export time; a --scenario's saved instant)."
    ),
]
WindowEndOption = Annotated[
    str | None,
    typer.Option(
        "--at", help="The window's end (default: the export time; a --scenario's saved instant)."
    ),
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
# --quiet prints nothing but errors; the outputs --json, --csv and --html take a PATH, or
# none (or -) for stdout, which then holds that output alone (:func:`_emit` writes them).
QuietOption = Annotated[
    bool,
    typer.Option(
        "--quiet", "-q", help="Print nothing but errors (for cron); files are still written."
    ),
]
OPTIONAL_PATH = "[PATH]"
"""The placeholder of an output option whose PATH may be left out (stdout)."""
CsvOption = Annotated[  # text: a trailing / names a folder, which a Path forgets
    str | None,
    typer.Option(
        "--csv",
        metavar=OPTIONAL_PATH,
        help="Write every table of the command as CSV, every figure unrounded, to PATH (a "
        "folder: one NAME.csv per table); - or no value: on stdout, alone. Several tables "
        "share one CSV under a first column, table.",
    ),
]
JsonOption = Annotated[
    Path | None,
    typer.Option(
        "--json",
        metavar=OPTIONAL_PATH,
        help="Write the command's JSON document to PATH; - or no value: on stdout, alone.",
    ),
]
HtmlOption = Annotated[
    Path | None,
    typer.Option(
        "--html",
        metavar=OPTIONAL_PATH,
        help="Write the self-contained HTML page to PATH; - or no value: on stdout, alone.",
    ),
]
OUTPUTS = {"as_json": "--json", "as_csv": "--csv", "as_html": "--html", "out": "--out"}
"""The output parameters of the commands (by their parameter name) and their options."""
CsvRawOption = Annotated[
    bool,
    typer.Option(
        "--csv-raw",
        help="Write CSV cells as they are: no apostrophe before a cell a spreadsheet would "
        "run as a formula (=, +, -, @), no escaped control characters (for pipelines).",
    ),
]


def _fail(message: str, code: int) -> None:
    _print_error(message)
    raise typer.Exit(code)


def handled(func: F) -> F:
    """Turn fleetaudit errors into one line on stderr and the right exit code.

    A command that declares ``quiet: QuietOption`` prints nothing but errors when
    it is set. Of its outputs (``as_json: JsonOption``, ``as_csv: CsvOption``, ``as_html:
    HtmlOption``, ``out``) at most one is stdout, and then the terminal's tables and lines
    stay off stdout; none may name the store (``db``) or another output of the call. One
    that declares ``as_csv`` takes ``--csv-raw`` too (added here, so every command that
    writes CSV has it).
    """
    signature = inspect.signature(func)
    # a command that writes CSV takes --csv-raw; one that uses it itself declares it
    added = "as_csv" in signature.parameters and "csv_raw" not in signature.parameters

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        global _call_db
        csv_raw = bool(kwargs.pop("csv_raw", False) if added else kwargs.get("csv_raw"))
        _call_db = kwargs.get("db")
        outputs = {
            option: None if kwargs.get(name) is None else Path(kwargs[name])
            for name, option in OUTPUTS.items()
        }
        console.configure(
            quiet=bool(kwargs.get("quiet")),
            data=any(is_stdout(p) for p in outputs.values()),
            csv_raw=csv_raw,
        )
        try:
            check_outputs(outputs, store=kwargs.get("db"))  # at most one stdout, none the store
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
            full = no_space(exc)  # a full disk under a library's own error (polars, pyarrow)
            if full is not None:
                _fail(full.message, int(full.exit_code))
            if os.environ.get("FLEETAUDIT_DEBUG"):
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            _fail(
                f"internal error: {type(exc).__name__}: {first} "
                "(set FLEETAUDIT_DEBUG=1 for a traceback)",
                int(ExitCode.INTERNAL),
            )
        return None

    if added:
        raw = inspect.Parameter(
            "csv_raw", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=CsvRawOption
        )
        wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[*signature.parameters.values(), raw]
        )
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


_call_db: Path | None = None
"""The store (``--db``) of the command running (set by :func:`handled`): its outputs are
checked against it again once ``{date}`` and ``{time}`` are filled in (:func:`_emit`)."""


def _emit(
    result: Any,
    render: Callable[[Any], None],
    *,
    as_json: Path | None = None,
    document: Callable[[Any], Any] | None = None,
    as_csv: str | None = None,
    as_html: Path | None = None,
    html: Callable[[Any], str] | None = None,
    when: datetime | None = None,
) -> None:
    """Put a command's result out, as every command does.

    ``--json`` writes ``document(result)``, ``--html`` writes ``html(result)``, to their
    path or alone on stdout; ``{date}`` and ``{time}`` in a path become ``when``'s (by
    default now, UTC); ``--csv`` writes every table ``render`` shows
    (:func:`fleetaudit.outputs.console.write_tables`). Then ``render`` prints the
    terminal's tables and lines, unless an output holds stdout.
    """
    stamp = when or _utc_now()
    json_path, html_path, csv_path = (
        None if p is None else expand_path(Path(p), stamp) for p in (as_json, as_html, as_csv)
    )
    # with {date} and {time} filled in, two templates may meet, or one name the store
    check_outputs({"--json": json_path, "--html": html_path, "--csv": csv_path}, store=_call_db)
    if json_path is not None:
        assert document is not None, "a command with --json gives its document"
        import json

        console.put(json_path, json.dumps(document(result), indent=1) + "\n")
    if html_path is not None:
        assert html is not None, "a command with --html gives its page"
        console.put(html_path, html(result))
    printed = not (is_stdout(as_json) or is_stdout(as_html) or is_stdout(as_csv))
    if as_csv is not None:
        with console.silenced():  # the files first: a reader that leaves stops the rest
            render(result)
        console.write_tables(str(csv_path) + ("/" * as_csv.endswith("/")))
    if printed:
        render(result)


def _utc_now() -> datetime:
    """Now, in UTC without a zone, to the second (ingest's own parameter ``timezone``
    shadows the module's name inside that command)."""
    return datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0)


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
    allow_mixed: Annotated[
        bool,
        typer.Option(
            "--allow-mixed",
            help="kubernetes: load documents of several clusters together (refused by default: "
            "documents that name different clusters and share no node).",
        ),
    ] = False,
    take_snapshot: Annotated[
        bool,
        typer.Option(
            "--kubectl",
            help="kubernetes: take the snapshot itself: kubectl get nodes,pods -A -o json (with "
            "Kueue Workloads and Volcano PodGroups where the cluster serves them), paged, "
            "ingested as one snapshot at the call's start. For cron.",
        ),
    ] = False,
    context: Annotated[
        str | None,
        typer.Option("--context", help="kubernetes --kubectl: the kubeconfig context to use."),
    ] = None,
    kubeconfig: Annotated[
        Path | None,
        typer.Option("--kubeconfig", help="kubernetes --kubectl: the kubeconfig file to use."),
    ] = None,
    namespace: Annotated[
        list[str] | None,
        typer.Option(
            "--namespace",
            help="kubernetes --kubectl: list the pods of this namespace only (repeat for "
            "several; default every namespace). Nodes are always listed whole.",
        ),
    ] = None,
    keep: Annotated[
        Path | None,
        typer.Option(
            "--keep",
            help="kubernetes --kubectl: also write the raw snapshot into this folder, named "
            "by the call's start (20260301T100000Z.json).",
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
            f"(default {duration_text(SLURM_COLLECT_SINCE)}); prometheus --url: the window "
            "pulled, ending at --until (e.g. 7d).",
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
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            help="prometheus: pull the dcgm-exporter series from this Prometheus (or Thanos, "
            "Mimir, VictoriaMetrics) URL instead of reading files (see docs/formats/prometheus.md).",
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option("--until", help="prometheus --url: the window's end (default: now)."),
    ] = None,
    step: Annotated[
        str | None,
        typer.Option(
            "--step",
            help=f"prometheus --url: the resolution pulled (default {duration_text(PULL_STEP)}).",
        ),
    ] = None,
    bearer_token_file: Annotated[
        Path | None,
        typer.Option(
            "--bearer-token-file",
            help="prometheus --url: send this file's token as Authorization: Bearer.",
        ),
    ] = None,
    user: Annotated[
        str | None,
        typer.Option(
            "--user",
            help="prometheus --url: basic auth as NAME:PASSWORD, or NAME with the password "
            "from ~/.netrc (default: ~/.netrc's entry for the host, if any).",
        ),
    ] = None,
    ca_file: Annotated[
        Path | None,
        typer.Option(
            "--ca-file", help="prometheus --url: PEM certificates to verify the server with."
        ),
    ] = None,
    insecure_skip_verify: Annotated[
        bool,
        typer.Option(
            "--insecure-skip-verify",
            help="prometheus --url: do not verify the server's certificate.",
        ),
    ] = False,
    header: Annotated[
        list[str] | None,
        typer.Option(
            "--header",
            help="prometheus --url: an extra request header K=V (e.g. X-Scope-OrgID=team-a); "
            "repeat for several.",
        ),
    ] = None,
    as_csv: CsvOption = None,
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
    table with file, row, column and reason (`fleetaudit rejects` lists them);
    when every row read of a table is rejected the call still lands (its
    rejects are kept) but exits 65.

    --format kubernetes reads kubectl JSON snapshots (Nodes, Pods, Kueue
    Workloads); with --kubectl it takes a snapshot itself. --format slurm
    reads a Slurm cluster's exports, each recognised by its content: sacct -P
    or --json, scontrol -d -o show node or --json, scontrol -d -o show job,
    squeue --json, sacctmgr -P show event, sdiag, topology.conf; with
    --from-slurm it runs them itself. --format prometheus loads dcgm-exporter
    GPU series (query_range JSON, /metrics scrapes, promtool tsdb dump) into
    telemetry and XID errors into node_events; with --url it pulls them from
    the server itself. Ingest the nodes first.

    Examples:

      fleetaudit ingest exports/latest/
      fleetaudit ingest --table allocations --strict jobs-2026-05-01.csv.gz
      fleetaudit ingest --format kubernetes snapshots/ \\
          --priority-map priorities.txt
      fleetaudit ingest --format slurm sacct.psv nodes.txt topology.conf
      fleetaudit ingest --format slurm --from-slurm --since 1d
      fleetaudit ingest --format prometheus dcgm/
      fleetaudit ingest --format prometheus --url http://prometheus:9090 \\
          --since 2d
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
    elif since is not None and fmt != "prometheus":
        raise UsageError("--since applies with --from-slurm or --url only")
    pulled = {
        "--since": since,
        "--until": until,
        "--step": step,
        "--bearer-token-file": bearer_token_file,
        "--user": user,
        "--ca-file": ca_file,
        "--insecure-skip-verify": insecure_skip_verify or None,
        "--header": header or None,
    }
    if url is not None and fmt == "prometheus":
        collect = _prometheus_pull(url, since, until, step, bearer_token_file, user, ca_file,
                                   insecure_skip_verify, header or [])  # fmt: skip
    elif fmt == "prometheus" and any(v is not None for v in pulled.values()):
        flag = next(f for f, v in pulled.items() if v is not None)
        raise UsageError(f"{flag} applies to --format prometheus --url only")
    given = {
        "--trace-start": trace_start,
        "--days": days,
        "--snapshot-time": snapshot_time,
        "--tenant-label": tenant_label,
        "--priority-map": priority_map,
        "--allow-mixed": True if allow_mixed else None,
        "--timezone": timezone,
        "--kubectl": True if take_snapshot else None,
        "--context": context,
        "--kubeconfig": kubeconfig,
        "--namespace": namespace or None,
        "--keep": keep,
        "--url": url,
        **pulled,
    }
    if take_snapshot and fmt == "kubernetes":
        if paths:
            raise UsageError("--kubectl takes the snapshot itself: name no files with it")
        collect = KubectlOptions(
            started=_utc_now(),
            context=context,
            kubeconfig=None if kubeconfig is None else str(kubeconfig),
            namespaces=tuple(namespace or ()),
            keep=None if keep is None else str(keep),
        )
    elif fmt == "kubernetes":
        for flag in ("--context", "--kubeconfig", "--namespace", "--keep"):
            if given[flag] is not None:
                raise UsageError(f"{flag} applies with --kubectl only")
    for flag, value in given.items():
        if value is not None and spec is not None and flag not in spec.options:
            takers = [f.name for f in INGEST_FORMAT_SPECS.values() if flag in f.options]
            raise UsageError(f"{flag} applies to --format {' or '.join(takers)} only")
    if not paths and collect is None:
        raise UsageError("name the files or folders to ingest")
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
        snapshot_time=_instant(snapshot_time, "--snapshot-time")
        if snapshot_time is not None or not isinstance(collect, KubectlOptions)
        else collect.started,  # the snapshot is the call's
        tenant_label=tenant_label,
        allow_mixed=allow_mixed,
        days=None if days is None else asi2026.parse_days(days),
        percent=tuple(percent or ()),
        collect=collect,
        export_time=_instant(export_time, "--export-time"),
    )
    with console.progress_status("ingesting") as progress:
        result = api.ingest_paths(_store(db, lock_timeout), paths or [], options, progress)
    _emit(result, console.render_ingest, as_csv=as_csv)
    lost = [t for t in result.tables if t.read and t.rejected == t.read]
    if lost:  # committed (the rejects say why), but nothing of those tables landed: 65
        raise AllRejectedError(
            "every row read was rejected, so nothing of "
            + ", ".join(f"{t.table} ({t.rejected:,} of {t.read:,})" for t in lost)
            + f" was loaded; `fleetaudit rejects --ingest {result.ingest_id}` says why"
        )


def _prometheus_pull(
    url: str,
    since: str | None,
    until: str | None,
    step: str | None,
    bearer_token_file: Path | None,
    user: str | None,
    ca_file: Path | None,
    insecure_skip_verify: bool,
    header: list[str],
) -> PrometheusPull:
    """The settings of ``ingest --format prometheus --url`` from its flags."""
    if since is None:
        raise UsageError("--url needs --since, the window to pull (e.g. --since 7d)")
    headers = []
    for item in header:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--header {item!r}: write NAME=VALUE, e.g. X-Scope-OrgID=team-a")
        headers.append((name.strip(), value))
    return PrometheusPull(
        url=url,
        since=parse_duration(since, option="--since"),
        until=_instant(until, "--until"),
        step=PULL_STEP if step is None else parse_duration(step, option="--step"),
        bearer_token_file=bearer_token_file,
        user=user,
        ca_file=ca_file,
        insecure_skip_verify=insecure_skip_verify,
        headers=tuple(headers),
    )


@app.command()
@handled
def status(
    as_csv: CsvOption = None,
    db: DbOption = Path(DEFAULT_DB),
    lock_timeout: LockTimeoutOption = DEFAULT_LOCK_TIMEOUT,
    quiet: QuietOption = False,
) -> None:
    """What the store holds: rows per table, GPUs per model, export, scenarios.

    Examples:

      fleetaudit status
      fleetaudit status --csv status/
    """
    from fleetaudit import api

    summary = api.summarize(_store(db, lock_timeout))
    _emit(summary, console.render_summary, as_csv=as_csv)


@app.command()
@handled
def rejects(
    ingest_id: Annotated[
        int | None,
        typer.Option(
            "--ingest",
            help="The ingest call (its # in ingest's summary; default: the newest).",
            metavar="N",
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", help="Show at most this many rows (0: all).", metavar="N")
    ] = REJECTS_LIMIT,
    as_json: JsonOption = None,
    as_csv: CsvOption = None,
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

    result = api.list_rejects(_store(db, lock_timeout), ingest_id, limit)
    _emit(result, console.render_rejects, as_json=as_json, document=rejects_document, as_csv=as_csv)


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
    as_csv: CsvOption = None,
    csv_raw: CsvRawOption = False,
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
    result = api.node_state(
        _store(db, lock_timeout),
        _instant(at, "--at"),
        window,
        scenario,
        out,
        out_format,
        csv_raw=csv_raw,
    )
    if out is not None:
        console.wrote(out)
    _emit(
        result,
        lambda r: console.render_state(r.state, iso(r.at) or "", duration),
        as_csv=as_csv,
    )
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
    typer.Option(
        "--locality", help="switch, block, any or node (default node for one pod, else switch)."
    ),
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
    as_json: JsonOption = None,
    as_csv: CsvOption = None,
    db: DbOption = Path(DEFAULT_DB),
    lock_timeout: LockTimeoutOption = DEFAULT_LOCK_TIMEOUT,
    quiet: QuietOption = False,
) -> None:
    """How many instances of a request shape can start now; what strands the rest.

    Without --gpus or --shapes: every distinct GPU shape queued at --at.
    Per shape: instances, usable GPUs, and the idle GPUs stranded by cause
    (interval, fragment, cpu_memory, topology), adding up exactly.

    Examples:

      fleetaudit shapes --model H20 --gpus 8 --cpus-per-gpu 8 --explain
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
    result = evaluate_shapes(_store(db, lock_timeout), options)
    _emit(result, console.render_shapes, as_json=as_json, document=shapes_document, as_csv=as_csv)


whatif = typer.Typer(
    cls=ReadableGroup,
    name="whatif",
    help="Replay what-ifs offline: placement, compaction, harvesting, remedies.",
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
        typer.Option(
            "--since",
            help=f"By-time replay: the window [at - since, at) (default "
            f"{duration_text(PLACEMENT_SINCE)}, or from the data's first record when that is later).",
        ),
    ] = None,
    empty: Annotated[
        bool,
        typer.Option(
            "--empty",
            help="By-time replay from an empty fleet, not the state at the window's start.",
        ),
    ] = False,
    queue: Annotated[
        str | None,
        typer.Option(
            "--queue",
            help=f"By-time replay: the queue discipline, {', '.join(PLACEMENT_QUEUES)} "
            "(default: the one the store's calibration chose; a store without one is "
            "calibrated first).",
        ),
    ] = None,
    calibrate: Annotated[
        bool,
        typer.Option(
            "--calibrate",
            help="By-time replay: first replay the window under every named discipline, "
            "print each beside the record, and keep the closest as the store's default.",
        ),
    ] = False,
    preempt: Annotated[
        bool | None,
        typer.Option(
            "--preempt/--no-preempt",
            help="By-time replay: high-priority requests evict low-priority work (default: "
            "when the window's requests hold both priorities).",
            show_default=False,
        ),
    ] = None,
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
    as_json: JsonOption = None,
    as_csv: CsvOption = None,
    db: DbOption = Path(DEFAULT_DB),
    lock_timeout: LockTimeoutOption = DEFAULT_LOCK_TIMEOUT,
    quiet: QuietOption = False,
) -> None:
    """Replay the stored requests onto the nodes under placement policies.

    By time (default): the requests of [at - since, at) arrive as recorded,
    from the state at the window's start (or --empty), each running its
    recorded run time, queued under a discipline operators run (kubernetes,
    kueue-best-effort-fifo, kueue-strict-fifo, slurm-backfill; high priority
    evicts low). First the recorded fleet is replayed: the baseline, whose
    started requests and waits are printed beside the record's; then each
    policy, with the baseline's holds. Allocated and fragmented GPU % at every
    5% of the window. --fill is the FGD paper's method: no departures,
    requests in an order shuffled per seed (--in-order: list order) on an
    empty fleet (resampled with the seed); allocated and fragmented GPU % at
    every 5% of arrival.

    Examples:

      fleetaudit whatif placement --since 2d --calibrate
      fleetaudit whatif placement --since 1d --queue slurm-backfill
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
    if fill is not None and (
        since is not None or empty or queue is not None or calibrate or preempt is not None
    ):
        raise UsageError(
            "--since, --empty, --queue, --calibrate and --preempt apply to by-time replay, "
            "not to --fill"
        )
    if shuffle and in_order:
        raise UsageError("--shuffle and --in-order: give one of them")
    shuffle = not in_order
    run = PlacementRun(
        policies=chosen, fill_pct=fill, seeds=seeds, seed=seed, shuffle=shuffle,
        at=_instant(at, "--at"), save_as=save_as,
        since=None if since is None else parse_duration(since, option="--since"),
        empty=empty, queue=queue, calibrate=calibrate, preempt=preempt,
    )  # fmt: skip
    with console.progress_status("replaying placements"):
        result = run_placement(_store(db, lock_timeout), run)
    _emit(
        result, console.render_placement, as_json=as_json, document=placement_document,
        as_csv=as_csv,
    )  # fmt: skip


_COMPACTION = CompactionOptions()
_OVER_TIME = OverTimeOptions()
_REMEDIES = RemediesRun()


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
        typer.Option(
            "--save-as",
            help="Save the compacted state as a scenario (with --over: the window's final state).",
        ),
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
        str,
        typer.Option(
            "--moves-per-hour",
            help="With --over: the migration budget, GPUs that may move per hour (64) or a "
            "share of the fleet's healthy GPUs per hour (0.1%).",
        ),
    ] = budget_text(_OVER_TIME.moves_per_hour, _OVER_TIME.budget_unit),
    sweep_budget: Annotated[
        str | None,
        typer.Option(
            "--sweep-budget",
            help="With --over: replay these budgets (comma-separated, e.g. 0.05%,0.1%,0.4%) "
            "against the one baseline, and report the one nearest --target-reduction in full.",
        ),
    ] = None,
    target_reduction: Annotated[
        float,
        typer.Option(
            "--target-reduction",
            help="With --sweep-budget: the change of partially occupied nodes to match, in % "
            "(default: the ASI paper's).",
        ),
    ] = _OVER_TIME.target_reduction_pct,
    policy: Annotated[
        str,
        typer.Option(
            "--policy",
            help="With --over: where arrivals go: recorded (their recorded node when it has room, else best-fit), first-fit, best-fit, random, fgd or topology.",
        ),
    ] = _OVER_TIME.policy,
    queue: Annotated[
        str | None,
        typer.Option(
            "--queue",
            help=f"With --over: the queue discipline, {', '.join(PLACEMENT_QUEUES)} (default: "
            "the store's calibrated one, see whatif placement --calibrate).",
        ),
    ] = None,
    preempt: Annotated[
        bool | None,
        typer.Option(
            "--preempt/--no-preempt",
            help="With --over: high-priority requests evict low-priority work (default: when "
            "the window's requests hold both priorities).",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = None,
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
    as_csv: CsvOption = None,
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
    the same arrivals: without compaction (the baseline, printed beside the
    record), and with a compaction round every --every that applies at most
    --moves-per-hour of moves (GPUs, or a share of the fleet's). It reports
    partially occupied and free nodes along the window, start probabilities,
    requests that started earlier and the migration paid; report then shows
    this run. --sweep-budget replays several budgets on the one baseline.

    Examples:

      fleetaudit whatif compaction --model H20 --gpus 8 --cpus-per-gpu 8 \\
          --save-as packed
      fleetaudit shapes --scenario packed --model H20 --gpus 8 --cpus-per-gpu 8
      fleetaudit whatif compaction --over 2d --sweep-budget 0.05%,0.1%,0.4%
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
    budget, unit = parse_budget(moves_per_hour)
    sweep = tuple(
        parse_budget(part, option="--sweep-budget")
        for part in (sweep_budget or "").split(",") if part.strip()
    )  # fmt: skip
    if sweep_budget is not None and not sweep:
        raise UsageError("--sweep-budget: give budgets separated by commas (e.g. 0.05%,0.1%)")
    over_time = replace(
        _OVER_TIME, every_s=parse_duration(every, option="--every").total_seconds(),
        moves_per_hour=budget, budget_unit=unit, policy=policy, queue=queue, sweep=sweep,
        target_reduction_pct=target_reduction, preempt=preempt,
    )  # fmt: skip
    over_s = None if over is None else parse_duration(over, option="--over").total_seconds()
    run = CompactionRun(shapes=shapes, at=_instant(at, "--at"), scenario=scenario,
                        save_as=save_as, jobs=jobs, options=options,
                        engine=engine, master=master, over_s=over_s,
                        over_time=over_time)  # fmt: skip
    with console.progress_status("compacting"):
        report = run_compaction(_store(db, lock_timeout), run)
    _emit(
        report, console.render_compaction, as_json=as_json, document=compaction_document,
        as_csv=as_csv,
    )  # fmt: skip


@whatif.command("remedies")
@handled
def whatif_remedies(
    add: Annotated[
        list[str] | None,
        typer.Option("--add", help="Buy GPUs: MODEL:N nodes like the model's typical node, or "
                     "MODEL:N:gpus=8,cpus=192,memory=2048 (repeatable; each is a remedy)."),
    ] = None,
    into_switches: Annotated[
        str,
        typer.Option("--into-switches", help="Where --add puts its nodes: new (switch domains "
                     "of the model's typical size) or existing (its partial domains first)."),
    ] = "new",
    remove: Annotated[
        list[str] | None,
        typer.Option("--remove", help="MODEL:N of the model's emptiest healthy nodes, or a file "
                     "of node ids (one a line, or a CSV with node_id) (repeatable)."),
    ] = None,
    cpus: Annotated[
        list[str] | None,
        typer.Option("--cpus", help="CPU balancing: MODEL:+N more host CPU cores per node (repeatable)."),
    ] = None,
    memory: Annotated[
        list[str] | None,
        typer.Option("--memory", help="MODEL:+GIB more host memory per node (repeatable)."),
    ] = None,
    merge_level: Annotated[
        str | None,
        typer.Option("--merge-level", help="Topology repair: block lets a switch-locality "
                     "request use its whole block (its switches merged into one domain)."),
    ] = None,
    port: Annotated[
        list[str] | None,
        typer.Option("--port", help="Portability: FROM=TO:SPEED, a request pinned to FROM may run "
                     "on TO at SPEED (0.8: its run takes 1/0.8 as long); several maps joined by commas (repeatable)."),
    ] = None,
    compaction: Annotated[
        bool,
        typer.Option("--compaction", help="In-place compaction as one more remedy (at sampled "
                     "instants, and over the window with --every and --moves-per-hour)."),
    ] = False,
    together: Annotated[
        bool,
        typer.Option("--together", help="Add a row with every edit (and --compaction) at once."),
    ] = False,
    target: Annotated[
        str | None,
        typer.Option("--target", help="Sizing: p_start=0.95, the start probability the shape "
                     "(--model M --gpus G ... or --shapes FILE) must reach; finds the fewest "
                     "nodes of M to add, and separately the fewest CPUs per node."),
    ] = None,
    model: ModelOption = None,
    gpus: GpusOption = None,
    gpus_per_pod: GpusPerPodOption = None,
    cpus_per_gpu: CpusPerGpuOption = None,
    memory_gib_per_gpu: MemoryPerGpuOption = None,
    locality: LocalityOption = None,
    duration: DurationOption = None,
    shapes_file: ShapesFileOption = None,
    max_add: Annotated[
        int | None,
        typer.Option("--max-add", help="Sizing: the most nodes to add (default: the model's installed nodes)."),
    ] = None,
    cpu_step: Annotated[
        float, typer.Option("--cpu-step", help="Sizing: the CPU increment's step, cores per node.")
    ] = _REMEDIES.cpu_step,
    prices: Annotated[
        Path | None,
        typer.Option("--prices", help="A prices file (CSV or YAML; docs/remedies.md): each "
                     "remedy's cost a month and per extra GPU-hour served, ranked."),
    ] = None,
    since: Annotated[
        str, typer.Option("--since", help="The window [at - since, at) every remedy is judged on.")
    ] = duration_text(_REMEDIES.since),
    step: Annotated[
        str, typer.Option("--step", help="The snapshot's sampling step (as report's).")
    ] = duration_text(_REMEDIES.step),
    deadline: Annotated[
        str | None,
        typer.Option("--deadline", help="A request starts in time when it waits at most its own "
                     "start_deadline_s, else this (default: when it starts in the window)."),
    ] = None,
    demand: Annotated[
        str | None,
        typer.Option("--demand", help="The demand's shapes: waited, submitted or queued (as report's)."),
    ] = None,
    queue: Annotated[
        str | None,
        typer.Option("--queue", help=f"The replay's queue discipline, {', '.join(PLACEMENT_QUEUES)} "
                     "(default: the store's calibrated one)."),
    ] = None,
    calibrate: Annotated[
        bool, typer.Option("--calibrate", help="Calibrate the discipline again first.")
    ] = False,
    preempt: Annotated[
        bool | None,
        typer.Option("--preempt/--no-preempt", help="High-priority requests evict low-priority "
                     "work (default: when the window's requests hold both priorities).",
                     show_default=False),
    ] = None,
    every: Annotated[
        str, typer.Option("--every", help="--compaction: time between rounds over the window.")
    ] = duration_text(_OVER_TIME.every_s),
    moves_per_hour: Annotated[
        str,
        typer.Option("--moves-per-hour", help="--compaction: GPUs that may move an hour, or a "
                     "share of the fleet's (0.1%)."),
    ] = budget_text(_OVER_TIME.moves_per_hour, _OVER_TIME.budget_unit),
    at: WindowEndOption = None,
    save_as: Annotated[
        str | None,
        typer.Option("--save-as", help="Save the edited fleet (of one edit, or of --together) as a "
                     "scenario that every command reads with --scenario."),
    ] = None,
    as_json: JsonOption = None,
    as_csv: CsvOption = None,
    db: DbOption = Path(DEFAULT_DB),
    lock_timeout: LockTimeoutOption = DEFAULT_LOCK_TIMEOUT,
    quiet: QuietOption = False,
) -> None:
    """Compare remedies on one demand: GPUs, CPUs, topology, porting, compaction.

    The recorded fleet is replayed first (the calibrated baseline of whatif
    placement); each edit given is one more row, evaluated on the same window
    and demand: the report's schedulable snapshot (usable and stranded
    GPU-hours, by cause) and the replay of the window's arrivals (started,
    waits, start probability per shape, GPU-hours served, work left waiting),
    each with its change against the baseline. --target sizes a purchase by a
    bisection of replays; --prices prices and ranks the remedies.

    Examples:

      fleetaudit whatif remedies --since 2d --add H20:4 --cpus A10:+32 \\
          --port H800=H20:0.8
      fleetaudit whatif remedies --since 2d --add H800:2 --compaction --together
      fleetaudit whatif remedies --since 2d --target p_start=0.9 \\
          --model H800 --gpus 8 --cpus-per-gpu 8 --max-add 8
      fleetaudit whatif remedies --since 2d --add H20:4 --prices prices.yaml \\
          --json
    """
    from fleetaudit.api.remedies_api import read_node_list, remedies_document
    from fleetaudit.api.remedies_api import whatif_remedies as run_remedies
    from fleetaudit.whatif import remedies as rm

    edits = [rm.parse_add(text, into_switches) for text in add or ()]
    for text in remove or ():
        listed = read_node_list(Path(text)) if Path(text).is_file() else None
        edits.append(rm.parse_remove(text, listed))
    edits += [rm.parse_delta("cpus", text) for text in cpus or ()]
    edits += [rm.parse_delta("memory", text) for text in memory or ()]
    if merge_level is not None:
        edits.append(rm.parse_merge(merge_level))
    edits += [rm.parse_port(text) for text in port or ()]
    shapes = _shape_options(
        model, gpus, gpus_per_pod, cpus_per_gpu, memory_gib_per_gpu, locality, duration, shapes_file
    )
    if len(shapes) > 1:
        raise UsageError("--target: give one shape (the options, or a --shapes file of one row)")
    budget, unit = parse_budget(moves_per_hour)
    run = replace(
        _REMEDIES, edits=tuple(edits), compaction=compaction, together=together,
        at=_instant(at, "--at"), since=parse_duration(since, option="--since"),
        step=parse_duration(step, option="--step"), demand=demand, queue=queue,
        calibrate=calibrate, preempt=preempt,
        deadline=None if deadline is None else parse_duration(deadline, option="--deadline"),
        target=None if target is None else _target(target), target_shape=shapes[0] if shapes else None,
        max_add=max_add, cpu_step=cpu_step, prices=prices, save_as=save_as,
        over_time=replace(_OVER_TIME, every_s=parse_duration(every, option="--every").total_seconds(),
                          moves_per_hour=budget, budget_unit=unit),
    )  # fmt: skip
    if shapes and target is None:
        raise UsageError("the shape options apply with --target (sizing)")
    if cpu_step <= 0:
        raise UsageError("--cpu-step: give a positive number of cores")
    with console.progress_status("replaying remedies"):
        result = run_remedies(_store(db, lock_timeout), run)
    _emit(
        result, console.render_remedies, as_json=as_json, document=remedies_document,
        as_csv=as_csv,
    )  # fmt: skip


def _target(text: str) -> float:
    """``p_start=0.95`` (or ``0.95``) as 0.95."""
    name, _, value = text.rpartition("=")
    if name.strip() not in ("", "p_start"):
        raise UsageError(f"--target: give p_start=P (e.g. p_start=0.95), not {text!r}")
    try:
        return float(value)
    except ValueError:
        raise UsageError(f"--target: {value!r} is not a probability (e.g. 0.95)") from None


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
            "--since",
            help=f"The window [at - since, at) to replay (default {duration_text(HARVEST_SINCE)}, "
            "or from the data's first record when that is later).",
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
    as_json: JsonOption = None,
    as_csv: CsvOption = None,
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
    with console.progress_status("replaying harvesting") as progress:
        result = run_harvesting(_store(db, lock_timeout), run, progress, notice=console.note)
    _emit(
        result, console.render_harvesting, as_json=as_json, document=harvesting_document,
        as_csv=as_csv,
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
            help="Raw telemetry: Parquet files, or folders of them (hive partitions too); "
            "Prometheus query_range dumps (--format prometheus); the ASI release's data folder "
            "(--format alibaba-gpu-v2026).",
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
    days: Annotated[
        str | None,
        typer.Option(
            "--days",
            help="alibaba-gpu-v2026: the trace days to roll up, A-B or A (default every day).",
            show_default=False,
        ),
    ] = None,
    quiet: QuietOption = False,
) -> None:
    """Roll raw telemetry up per node, GPU, allocation and interval, into Parquet.

    Writes OUT/telemetry.parquet: per interval, the means of sm_active and
    mem_used and the number of samples. `fleetaudit ingest OUT` loads it, and
    `report` counts each row as its samples, so the productive figures are
    those of the raw telemetry. `--engine spark` runs the same SQL on Spark,
    where the raw history lives.

    --format prometheus reads query_range dumps with ingest's own reader, then
    rolls them up the same way (the reader runs here, on DuckDB, whatever the
    engine). --format alibaba-gpu-v2026 reduces the ASI release (pod-hours
    into allocation runs, server-hours, GPU-hours) into OUT, which `fleetaudit
    ingest OUT` loads exactly as it would the release; with --engine spark the
    executors read the release and reduce it, and OUT must be a folder they
    can write.

    Examples:

      fleetaudit rollup lake/telemetry/ --out rolled/ && fleetaudit ingest rolled/
      fleetaudit rollup lake/telemetry/ --out rolled/ --interval 15m \\
          --engine spark --master spark://head:7077
      fleetaudit rollup dumps/ --format prometheus --out rolled/
      fleetaudit rollup release/data --format alibaba-gpu-v2026 --out asi-rolled/
      fleetaudit rollup /shared/release/data --format alibaba-gpu-v2026 \\
          --out /shared/asi-rolled/ --engine spark --master spark://head:7077
    """
    from fleetaudit.api.rollup_api import RollupOptions
    from fleetaudit.api.rollup_api import rollup as run_rollup

    options = RollupOptions(
        interval_s=parse_duration(interval, option="--interval").total_seconds(),
        engine=engine,
        master=master,
        format=fmt,
        days=days,
    )
    with console.progress_status(f"rolling up on {engine}") as progress:
        result = run_rollup(sources, out, options, progress)
    console.render_rollup(result)


@app.command()
@handled
def report(
    at: WindowEndOption = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help=f"The window's length, ending at --at: 90m, 6h, 7d (default "
            f"{duration_text(REPORT_SINCE)}, or from the data's first record when that is later).",
        ),
    ] = None,
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
    max_shapes: Annotated[
        int | None,
        typer.Option(
            "--shapes",
            help=f"Evaluate the N heaviest shapes of the demand (default: the "
            f"{DEMAND_DEFAULT_SHAPES} heaviest, and every GPU model's "
            f"{DEMAND_PER_MODEL_SHAPES} heaviest).",
            metavar="N",
        ),
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option(
            "--prices",
            help="A prices file (CSV or YAML, see docs/remedies.md): the idle, stranded and "
            "unproductive GPU-hours in money, and a per-tenant showback.",
        ),
    ] = None,
    as_html: HtmlOption = None,
    as_json: JsonOption = None,
    as_csv: CsvOption = None,
    record: Annotated[
        bool,
        typer.Option(
            "--record",
            help="Keep this report as the baseline of the next report's trend (a report that "
            "writes --html or --json is kept anyway).",
        ),
    ] = False,
    fail_if_stale: Annotated[
        bool,
        typer.Option(
            "--fail-if-stale",
            help="Exit 66, writing nothing, when the export time has not moved since the "
            "last recorded report (for cron: the export was not refreshed).",
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
    headline figure's change since the preceding recorded window of the same
    length, step, demand and shape budget.

    Examples:

      fleetaudit report --html 'reports/{date}.html' --json 'reports/{date}.json'
      fleetaudit report --json - | jq '.fleet'
    """
    from fleetaudit.api.report_api import ReportOptions, build_report, record_report
    from fleetaudit.outputs.contract import report_document
    from fleetaudit.outputs.report import render_html

    store = _store(db, lock_timeout)
    options = ReportOptions(
        at=_instant(at, "--at"),
        since=None if since is None else parse_duration(since, option="--since"),
        step=parse_duration(step, option="--step"),
        scenario=scenario,
        demand=demand,
        max_shapes=max_shapes,
        fail_if_stale=fail_if_stale,
        quarantine=quarantine,
        interrupted_within=parse_duration(interrupted_within, option="--interrupted-within"),
        prices=prices,
    )
    with console.progress_status("computing the report"):
        result = build_report(store, options)
    _emit(
        result, console.render_report, as_json=as_json, document=report_document,
        as_html=as_html, html=render_html, as_csv=as_csv, when=result.generated_at,
    )  # fmt: skip
    if as_html is not None or as_json is not None or record:
        why = record_report(store, result)
        if why is not None:
            console.note(f"this report is not recorded for the next trend: {why}")
    else:
        console.note(
            "this report is not recorded for the next trend (it writes no file; --record keeps it)"
        )


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
    as_json: JsonOption = None,
    as_csv: CsvOption = None,
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
    _emit(result, console.render_paper, as_json=as_json, document=paper_document, as_csv=as_csv)


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
    """One line on stderr, even under --quiet; the data's text in it made safe (control
    characters escaped, cut at 2,000 characters: :func:`sanitize.shown`)."""
    line = shown(message.strip())  # a line break from the data shows as \n, on this one line
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"fleetaudit: error: {line}\n")
        sys.stderr.flush()


if __name__ == "__main__":
    main()
