"""Prometheus exports read as streams of series: ``query_range`` JSON, text, OpenMetrics,
``promtool tsdb dump``.

The readers hold no more than one series (``query_range``) or one scrape (OpenMetrics)
at a time, plus a batch of samples, whatever the file's size: a file of any size is
read in bounded memory. They know nothing of fleetaudit's tables; the ingest
(:mod:`fleetaudit.inputs.ingest.prometheus`) and any other caller (a rollup of dumps)
take the batches they yield.

- :func:`read_query_range` streams a ``/api/v1/query_range`` response (plain or
  gzip-compressed): one :class:`SeriesBatch` per about ``batch_samples`` samples.
- :func:`read_text` streams a dcgm-exporter scrape (Prometheus text), concatenated
  OpenMetrics scrapes (each ending in ``# EOF``) or ``promtool tsdb dump`` output.
- :func:`sniff` tells the three kinds apart by a file's first characters.

Every reader raises :class:`~fleetaudit.core.errors.InputError` naming the file, in one
line, for anything that is not such an export.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc

from fleetaudit.core.errors import InputError
from fleetaudit.core.sanitize import quoted
from fleetaudit.inputs.ingest.jsonstream import JsonStream
from fleetaudit.inputs.ingest.sources import unreadable

BATCH_SAMPLES = 1_000_000
"""Samples per batch a reader yields (a batch takes about 20 bytes a sample)."""

MAX_SERIES_CHARS = 64 << 20
"""The longest series (or top-level value) of a ``query_range`` file the reader takes, in
characters: Prometheus returns at most 11,000 points per series (about 0.5 MB); a longer
one is no response of it, and reading it whole would take memory without bound."""

_DECODER = json.JSONDecoder()

EXPECTED_JSON = (
    'a Prometheus query_range response ({"status": "success", "data": '
    '{"resultType": "matrix", "result": [...]}})'
)
EXPECTED_TEXT = (
    "dcgm-exporter metrics (Prometheus text, OpenMetrics or promtool tsdb dump, DCGM_FI_* series)"
)


@dataclass(frozen=True)
class SeriesBatch:
    """Samples of several series.

    Attributes:
        names: each series' metric name (``__name__``, or the name the caller gave
            for series without one; None if neither).
        labels: each series' labels, without ``__name__``.
        steps: each series' smallest gap between two samples, in seconds (None for a
            series of one sample, and for text, where a scrape is one instant).
        series: for each sample, the index of its series in ``names``/``labels``.
        ts: each sample's time in epoch seconds (null: not a number).
        value: each sample's value (NaN and infinities as written; null: not a number).
    """

    names: list[str | None]
    labels: list[dict[str, str]]
    steps: list[float | None]
    series: pa.Array  # int32
    ts: pa.Array  # float64
    value: pa.Array  # float64

    def __len__(self) -> int:
        return len(self.series)


class _Batches:
    """Collects series and their samples; :meth:`take` hands them out as one batch."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.names: list[str | None] = []
        self.labels: list[dict[str, str]] = []
        self.steps: list[float | None] = []
        self._series: list[pa.Array] = []
        self._ts: list[pa.Array] = []
        self._value: list[pa.Array] = []
        self.samples = 0

    def add(self, name: str | None, labels: dict[str, str], ts: pa.Array, value: pa.Array) -> None:
        index = len(self.names)
        self.names.append(name)
        self.labels.append(labels)
        self.steps.append(_smallest_gap(ts))
        self._series.append(pa.array([index] * len(ts), pa.int32()) if len(ts) else _EMPTY_INT)
        self._ts.append(ts)
        self._value.append(value)
        self.samples += len(ts)

    def take(self) -> SeriesBatch:
        batch = SeriesBatch(
            self.names,
            self.labels,
            self.steps,
            pa.concat_arrays(self._series) if self._series else _EMPTY_INT,
            pa.concat_arrays(self._ts) if self._ts else _EMPTY_FLOAT,
            pa.concat_arrays(self._value) if self._value else _EMPTY_FLOAT,
        )
        self._reset()
        return batch


_EMPTY_INT = pa.array([], pa.int32())
_EMPTY_FLOAT = pa.array([], pa.float64())


def _smallest_gap(ts: pa.Array) -> float | None:
    if len(ts) < 2:
        return None
    gaps = pc.subtract(ts[1:], ts[:-1])
    positive = pc.filter(gaps, pc.greater(gaps, 0))
    smallest = pc.min(positive).as_py() if len(positive) else None
    return float(smallest) if smallest is not None else None


# -- opening files ---------------------------------------------------------------------------


def open_text(path: Path) -> IO[str]:
    """A file as UTF-8 text, gunzipped where its name ends in ``.gz``."""
    try:
        if _gzipped(path):
            return gzip.open(path, "rt", encoding="utf-8")
        return open(path, encoding="utf-8")
    except OSError as exc:
        raise InputError(str(path), f"cannot read: {_reason(exc)}") from exc


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text


def _gzipped(path: Path) -> bool:
    return path.name.lower().endswith(".gz")  # as open_text reads it


def _read(fh: IO[str], path: Path, size: int) -> str:
    try:
        return fh.read(size)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise unreadable(path, exc, gzipped=_gzipped(path)) from exc


def sniff(path: Path) -> str:
    """The kind of a Prometheus export by its first characters: ``"json"`` (query_range),
    ``"dump"`` (promtool tsdb dump: lines ``{labels} value ms``) or ``"text"``."""
    with open_text(path) as fh:
        head = _read(fh, path, 4096).lstrip()
    if not head:
        raise InputError(str(path), f"empty file; expected {EXPECTED_JSON} or {EXPECTED_TEXT}")
    if head[0] == "[" or (head[0] == "{" and (len(head) < 2 or head[1:].lstrip()[:1] in '"}')):
        return "json"
    return "dump" if head[0] == "{" else "text"


# -- query_range JSON --------------------------------------------------------------------------


class _JsonStream(JsonStream):
    """A ``query_range`` response read a value (a series) at a time."""

    def __init__(self, fh: IO[str], path: Path) -> None:
        super().__init__(path, lambda n: _read(fh, path, n), _DECODER, longest=MAX_SERIES_CHARS)

    def explain(self, reason: str, line: int) -> str:
        return f"cannot read: {reason}; expected {EXPECTED_JSON}"

    def too_deep(self, what: str) -> str:
        return f"cannot read: {what} is nested too deeply"

    def too_long(self, what: str) -> str:
        return (f"{what} is longer than {MAX_SERIES_CHARS >> 20} MiB of text: not {EXPECTED_JSON} "
                "(Prometheus returns at most 11,000 points per series)")  # fmt: skip

    def fail(self, reason: str) -> InputError:
        """An error for a response of the wrong shape (``reason`` says it whole)."""
        return InputError(str(self.path), reason)

    def comma_or(self, close: str, what: str) -> bool:
        """After a member: True when another follows (a comma), False at ``close``."""
        return self.expect(f",{close}", f"in {what}") == ","


def read_query_range(
    path: Path,
    metric: str | None = None,
    batch_samples: int | None = None,
    keep: Callable[[str | None], bool] | None = None,
) -> Iterator[SeriesBatch]:
    """Stream the series of a ``query_range`` response file (``.json`` or ``.json.gz``).

    Args:
        path: the file.
        metric: the name of series without ``__name__`` (PromQL functions such as
            ``avg_over_time`` drop it), typically read from the file's name.
        batch_samples: about how many samples a batch holds (a series is never split;
            default :data:`BATCH_SAMPLES`).
        keep: which metric names to read (None: all); the samples of other series
            are skipped.

    Yields:
        Batches of whole series, in file order.

    Raises:
        InputError: the file is not a successful ``matrix`` response: another JSON
            document, an error response (its ``error`` text is given), a ``vector``
            result, broken JSON, a series without labels or values, or a series
            larger than :data:`MAX_SERIES_CHARS`.
    """
    batch_samples = batch_samples or BATCH_SAMPLES
    with open_text(path) as fh:
        stream = _JsonStream(fh, path)
        if stream.peek() != "{":
            raise stream.fail(f"not {EXPECTED_JSON}")
        top: dict[str, Any] = {}
        seen_data = False
        batches = _Batches()
        stream.expect("{", "to open the response")
        if stream.peek() == "}":
            stream.pos += 1
        else:
            while True:
                key = stream.value("a key of the response")
                if not isinstance(key, str):
                    raise stream.fail(
                        f"cannot read: a key that is not a string; expected {EXPECTED_JSON}"
                    )
                stream.expect(":", "after a key")
                if key == "data" and stream.peek() == "{":
                    seen_data = True
                    yield from _read_data(stream, top, metric, batches, batch_samples, keep)
                else:
                    top[key] = stream.value(f"the response's {key!r}")
                if not stream.comma_or("}", "the response"):
                    break
        if stream.peek():
            raise stream.fail(f"cannot read: text after the response; expected {EXPECTED_JSON}")
        _check_response(stream, top, seen_data)
        if batches.samples or batches.names:
            yield batches.take()


def _check_response(stream: _JsonStream, top: dict[str, Any], seen_data: bool) -> None:
    status = top.get("status")
    if status == "error":
        error = " ".join(str(top.get(k, "")) for k in ("errorType", "error")).strip()
        raise stream.fail(
            "a Prometheus error response, not data"
            + (f" ({error})" if error else "")
            + "; re-run the query"
        )
    kind = top.get("_resultType")
    if kind is not None and kind != "matrix":
        raise stream.fail(f"a {kind} result (an instant query?); expected {EXPECTED_JSON}")
    if status != "success" or not seen_data or kind is None:
        raise stream.fail(f"not {EXPECTED_JSON}")


def _read_data(
    stream: _JsonStream,
    top: dict[str, Any],
    metric: str | None,
    batches: _Batches,
    batch_samples: int,
    keep: Callable[[str | None], bool] | None,
) -> Iterator[SeriesBatch]:
    stream.expect("{", "to open the data")
    if stream.peek() == "}":
        stream.pos += 1
        return
    while True:
        key = stream.value("a key of the response's data")
        stream.expect(":", "after a key")
        if key == "resultType":
            top["_resultType"] = stream.value("the resultType")
        elif key == "result" and stream.peek() == "[":
            top.setdefault("_resultType", None)
            stream.expect("[", "to open the result")
            if stream.peek() == "]":
                stream.pos += 1
            else:
                number = 0
                while True:
                    number += 1
                    series = stream.value(f"series {number}")
                    _add_series(stream, series, number, metric, batches, keep)
                    if batches.samples >= batch_samples:
                        yield batches.take()
                    if not stream.comma_or("]", "the result"):
                        break
        else:
            stream.value(f"the data's {key!r}")
        if not stream.comma_or("}", "the response's data"):
            break


def _add_series(
    stream: _JsonStream,
    series: Any,
    number: int,
    metric: str | None,
    batches: _Batches,
    keep: Callable[[str | None], bool] | None,
) -> None:
    if not isinstance(series, dict):
        raise stream.fail(f"series {number} is not an object; expected {EXPECTED_JSON}")
    if "values" not in series and "value" in series:
        raise stream.fail(f"a vector result (an instant query?); expected {EXPECTED_JSON}")
    labels, values = series.get("metric"), series.get("values")
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise stream.fail(f"series {number}: its metric is not a map of label names to text")
    if values is None and "histograms" in series:
        values = []  # native histograms only: no float samples
    if not isinstance(values, list):
        raise stream.fail(f"series {number}: its values are not a list of [time, value] pairs")
    name = labels.pop("__name__", None) or metric
    if keep is not None and not keep(name):
        return
    ts, value = _columns(values)
    if value.null_count:  # a time that is no number fails the file later, naming its range
        k = value.is_null().index(True).as_py()
        point = values[k]
        if not (isinstance(point, list) and len(point) == 2):
            raise stream.fail(
                f"series {number}, sample {k + 1}: {quoted(point, 40)} is not a [time, value] "
                "pair; export it again"
            )
        raise stream.fail(
            f"series {number}, sample {k + 1}: the value {quoted(point[1], 40)} is not a "
            "number (Prometheus writes numbers, NaN and +Inf/-Inf); export it again"
        )
    batches.add(name, labels, ts, value)


def _columns(values: list[Any]) -> tuple[pa.Array, pa.Array]:
    """[[time, "value"], ...] as two float64 arrays (null where a field is not a number)."""
    try:
        ts = pa.array([p[0] for p in values], pa.float64())
        texts = pa.array([p[1] for p in values], pa.string())
        return ts, pc.cast(texts, pa.float64())
    except (TypeError, IndexError, KeyError, pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    times: list[float | None] = []
    numbers: list[float | None] = []
    for point in values:
        pair = point if isinstance(point, list) and len(point) == 2 else [None, None]
        times.append(_number(pair[0]))
        numbers.append(_number(pair[1]))
    return pa.array(times, pa.float64()), pa.array(numbers, pa.float64())


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return float(value)
    except (ValueError, OverflowError):
        return None


# -- text: Prometheus text, OpenMetrics, promtool tsdb dump ------------------------------------


class _TextSeries:
    """The series of a text file, one index per distinct (name, labels)."""

    def __init__(self) -> None:
        self.index: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
        self.batch_index: dict[int, int] = {}
        self.batches = _Batches()
        self.series: list[int] = []
        self.ts: list[float | None] = []
        self.value: list[float | None] = []

    def add(self, name: str, labels: dict[str, str], ts: float | None, value: float) -> None:
        key = (name, tuple(sorted(labels.items())))
        found = self.index.get(key)
        if found is None:
            found = self.index[key] = len(self.index)
        local = self.batch_index.get(found)
        if local is None:
            local = self.batch_index[found] = len(self.batches.names)
            self.batches.names.append(name)
            self.batches.labels.append(dict(labels))
            self.batches.steps.append(None)
        self.series.append(local)
        self.ts.append(ts)
        self.value.append(value)

    def __len__(self) -> int:
        return len(self.series)

    def take(self) -> SeriesBatch:
        b = self.batches
        batch = SeriesBatch(
            b.names,
            b.labels,
            b.steps,
            pa.array(self.series, pa.int32()),
            pa.array(self.ts, pa.float64()),
            pa.array(self.value, pa.float64()),
        )
        self.batches = _Batches()
        self.batch_index = {}
        self.series, self.ts, self.value = [], [], []
        return batch


def read_text(
    path: Path,
    default_time: float | None,
    keep: Callable[[str], str | None],
    kind: str | None = None,
    batch_samples: int | None = None,
) -> Iterator[SeriesBatch]:
    """Stream the samples of a text export: a Prometheus text scrape (a dcgm-exporter
    ``/metrics``), OpenMetrics scrapes (each ending in ``# EOF``, one after another)
    or ``promtool tsdb dump`` output.

    Prometheus text and ``promtool`` give milliseconds, OpenMetrics seconds; every
    time is yielded in seconds. A series is one (name, labels) of the whole file.

    Args:
        path: the file.
        default_time: the time of samples without one (dcgm-exporter writes none).
        keep: maps a metric name to the name it is read as, or None to skip it (for
            example ``str.upper`` where names are read whatever their case).
        kind: ``"text"`` or ``"dump"`` (None: :func:`sniff` it).
        batch_samples: about how many samples a batch holds (default :data:`BATCH_SAMPLES`).

    Raises:
        InputError: a line the parsers cannot read (with their reason), text after
            the last ``# EOF``.
    """
    kind = kind or sniff(path)
    batch_samples = batch_samples or BATCH_SAMPLES
    series = _TextSeries()
    with open_text(path) as fh:
        if kind == "dump":
            lines = _lines(fh, path)
            for number, line in lines:
                _dump_line(path, number, line, keep, series)
                if len(series) >= batch_samples:
                    yield series.take()
        else:
            yield from _scrapes(fh, path, default_time, keep, series, batch_samples)
    if len(series) or series.batches.names:
        yield series.take()


def _lines(fh: IO[str], path: Path) -> Iterator[tuple[int, str]]:
    number = 0
    try:
        for number, line in enumerate(fh, 1):
            yield number, line
    except UnicodeDecodeError as exc:
        raise unreadable(path, exc, gzipped=_gzipped(path)) from exc
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(str(path), f"cannot read: {_reason(exc)}", row=number + 1) from exc


def _scrapes(
    fh: IO[str],
    path: Path,
    default_time: float | None,
    keep: Callable[[str], str | None],
    series: _TextSeries,
    batch_samples: int,
) -> Iterator[SeriesBatch]:
    """OpenMetrics scrapes one at a time; a file without ``# EOF`` is one Prometheus scrape."""
    pending: list[str] = []
    first = 1  # the line the pending scrape starts at
    openmetrics = False
    for number, line in _lines(fh, path):
        pending.append(line)
        if line.rstrip("\r\n").rstrip(" \t") == "# EOF":
            openmetrics = True
            _parse_scrape(path, first, "".join(pending), True, default_time, keep, series)
            pending = []
            first = number + 1
            if len(series) >= batch_samples:
                yield series.take()
    rest = "".join(pending)
    if openmetrics and rest.strip():
        raise InputError(
            str(path), "cannot parse: text after the last # EOF (a scrape cut short?)", row=first
        )
    if not openmetrics:
        _parse_scrape(path, 1, rest, False, default_time, keep, series)


def _parse_scrape(
    path: Path,
    first_line: int,
    text: str,
    openmetrics: bool,
    default_time: float | None,
    keep: Callable[[str], str | None],
    series: _TextSeries,
) -> None:
    from prometheus_client.openmetrics.parser import (
        text_string_to_metric_families as openmetrics_families,
    )
    from prometheus_client.parser import text_string_to_metric_families as text_families

    try:
        families = openmetrics_families(text) if openmetrics else text_families(text)
        for family in families:
            for sample in family.samples:
                name = keep(sample.name)
                if name is None:
                    continue
                ts = default_time if sample.timestamp is None else float(sample.timestamp)
                series.add(name, dict(sample.labels), ts, float(sample.value))
    except (ValueError, TypeError, IndexError, KeyError, AttributeError, OverflowError) as exc:
        what = "OpenMetrics" if openmetrics else "Prometheus text"
        where = f" (the scrape starting at line {first_line})" if openmetrics else ""
        raise InputError(
            str(path), f"cannot parse as {what}{where}: {_reason(exc)}; expected {EXPECTED_TEXT}"
        ) from exc


# promtool tsdb dump (Prometheus 2.x): {a="1", b="2", __name__="m"} 0.5 1767225600000
_DUMP_LINE = re.compile(r"\{(?P<labels>.*)\} (?P<value>\S+) (?P<ms>-?\d+)\s*")
_DUMP_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"(?:, |$)')
_GO_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3}|.)")
_GO_SIMPLE = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _unquote_go(text: str) -> str:
    r"""A label value as promtool prints it (Go's strconv.Quote), unescaped.

    >>> _unquote_go(r'a\"b\\c\n\x41\u00e9')
    'a"b\\c\nAé'
    """

    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] in "xuU":
            return chr(int(code[1:], 16))
        if len(code) == 3:
            return chr(int(code, 8))
        return _GO_SIMPLE.get(code, code)

    return _GO_ESCAPE.sub(one, text)


def _dump_line(
    path: Path, number: int, line: str, keep: Callable[[str], str | None], series: _TextSeries
) -> None:
    if not line.strip():
        return
    found = _DUMP_LINE.fullmatch(line.rstrip("\r\n"))
    if found is None:
        raise InputError(
            str(path),
            "cannot parse as promtool tsdb dump ({labels} value milliseconds)",
            row=number,
        )
    text = found.group("labels")
    labels: dict[str, str] = {}
    at = 0
    for match in _DUMP_LABEL.finditer(text):
        if match.start() != at:
            break
        labels[match.group(1)] = _unquote_go(match.group(2))
        at = match.end()
    if at != len(text):
        raise InputError(
            str(path), "cannot parse the labels of a promtool tsdb dump line", row=number
        )
    name = keep(labels.pop("__name__", ""))
    if name is None:
        return
    try:
        value = float(found.group("value"))
    except ValueError as exc:
        raise InputError(str(path), f"not a number: {found.group('value')!r}", row=number) from exc
    series.add(name, labels, int(found.group("ms")) / 1000, value)
