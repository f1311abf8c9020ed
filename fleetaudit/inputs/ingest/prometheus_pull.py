"""``ingest --format prometheus --url``: pull the dcgm-exporter series from a Prometheus server.

The collector of the ``prometheus`` format (``ADAPTERS["prometheus"].collect``): it asks
the server's HTTP API what the documented export loop asks, and streams each answer to a
file of the call's temporary folder, which the ingest then reads as if the user had
named those files (docs/formats/prometheus.md, "Pulling from a server").

- Which series: ``/api/v1/series`` lists, per metric, the series of the window (from
  the index alone, cheap for the server); metric names are matched whatever their case.
- What is asked: per metric and chunk, ``avg_over_time(M[step])`` for the activities and
  framebuffer metrics, ``count_over_time(M[step])`` for the activities (how much of each
  step the exporter reported: a partial step counts for its part, a step without a
  sample is a gap), ``max_over_time(M[step])`` for the XID and row-remap gauges.
- Chunks: at most :data:`~fleetaudit.core.options.PULL_POINTS_PER_SERIES` steps and
  :data:`~fleetaudit.core.options.PULL_POINTS_PER_QUERY` points (series x steps) per
  request, the series split by host label when one metric has too many. A server that
  refuses a request as too large (422: too many samples, too many points) gets its two
  halves instead; 429, 502, 503, 504 and timeouts are retried with a doubling wait.
- Transport: HTTP(S) through the standard library (urllib): a proxy from the
  environment (``https_proxy``, ``no_proxy``), a bearer token file, basic auth from
  ``--user`` or ~/.netrc, a CA file or no verification, extra headers (a tenant).
  Answers are asked gzip-compressed and written as they come.

Every failure is one :class:`~fleetaudit.core.errors.InputError` naming the URL, the
query and chunk, with the HTTP status and the server's own error text.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import netrc
import re
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fleetaudit import __version__
from fleetaudit.core.errors import InputError, UsageError
from fleetaudit.core.options import PULL_POINTS_PER_SERIES, PrometheusPull
from fleetaudit.inputs.ingest.prometheus import (
    ACTIVITY_METRICS,
    HEALTH_METRICS,
    READ_METRICS,
)

Progress = Callable[[str], None]

_HOST_LABELS = ("hostname", "Hostname")
_RETRIED = {429, 502, 503, 504}
_TOO_LARGE = re.compile(
    r"too many samples|exceeded maximum resolution|max-samples|too many points|"
    r"query processing would load too many|response too large|exceeds the limit",
    re.IGNORECASE,
)
_CHUNK_BYTES = 1 << 20
_SHORTEST_CHUNK = 60  # steps: below it the series are split by host rather than by time


def functions(metric: str) -> tuple[str, ...]:
    """The PromQL range functions pulled for a metric (see the module's docstring).

    >>> functions("DCGM_FI_PROF_SM_ACTIVE"), functions("DCGM_FI_DEV_XID_ERRORS")
    (('avg_over_time', 'count_over_time'), ('max_over_time',))
    """
    if metric in HEALTH_METRICS:
        return ("max_over_time",)
    if metric in ACTIVITY_METRICS:
        return ("avg_over_time", "count_over_time")
    return ("avg_over_time",)


@dataclass(frozen=True)
class _Part:
    """One request's worth: a selector's series (by host) over [start, end] (epoch s)."""

    metric: str  # the canonical name (the file is named after it)
    name: str  # the name the server holds
    hosts: tuple[tuple[str | None, str], ...]  # (host label or None: no host, value)
    series: int
    start: float
    end: float

    def selector(self) -> str:
        matchers = [f'__name__="{_escape(self.name)}"']
        if not self.hosts:
            return "{" + ", ".join(matchers) + "}"
        labels = {label for label, _ in self.hosts}
        if len(labels) != 1:
            raise ValueError("a part holds hosts of one host label")
        (label,) = labels
        if label is None:
            matchers += [f'{h}=""' for h in _HOST_LABELS]
        else:
            values = "|".join(re.escape(v) for _, v in self.hosts)
            matchers.append(f'{label}=~"{_escape(values)}"')
        return "{" + ", ".join(matchers) + "}"


def _escape(text: str) -> str:
    """A PromQL string's content (double-quoted, backslash escapes)."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def window(pull: PrometheusPull, now: datetime | None = None) -> tuple[float, float, float]:
    """(start, end, step) in epoch seconds: ``until`` (or now) rounded down to a multiple
    of the step, and ``since`` before it rounded up to whole steps.

    >>> from datetime import timedelta
    >>> p = PrometheusPull("http://p", timedelta(minutes=3), datetime(2026, 1, 1, 0, 10, 30))
    >>> window(p)
    (1767226020.0, 1767226200.0, 60.0)
    """
    step = pull.step.total_seconds()
    if not step > 0 or not math.isfinite(step):
        raise UsageError("--step: give a positive duration, e.g. 60s")
    since = pull.since.total_seconds()
    if not since > 0:
        raise UsageError("--since: give a positive duration, e.g. 7d")
    until = pull.until or now or datetime.now(timezone.utc).replace(tzinfo=None)
    end = math.floor(until.replace(tzinfo=timezone.utc).timestamp() / step) * step
    start = end - math.ceil(since / step) * step
    return float(start), float(end), float(step)


def plan(
    metric: str,
    name: str,
    series: list[dict[str, str]],
    start: float,
    end: float,
    step: float,
    points_per_query: int,
) -> list[_Part]:
    """The requests for one metric's ``series`` over [start, end]: chunks of at most
    :data:`PULL_POINTS_PER_SERIES` steps and about ``points_per_query`` points; when
    that leaves chunks shorter than an hour of steps, the series are split by host
    instead (a host's series stay together).

    >>> s = [{"hostname": f"h{i}", "gpu": "0"} for i in range(4)]
    >>> [(p.start, p.end, p.series) for p in plan("M", "M", s, 0, 14400, 60, 480)]
    [(0, 7140, 4), (7200, 14340, 4), (14400, 14400, 4)]
    >>> [(p.hosts, p.start, p.end) for p in plan("M", "M", s, 0, 60, 60, 4)]
    ... # doctest: +NORMALIZE_WHITESPACE
    [((('hostname', 'h0'), ('hostname', 'h1')), 0, 60),
     ((('hostname', 'h2'), ('hostname', 'h3')), 0, 60)]
    """
    steps = round((end - start) / step) + 1
    total = max(len(series), 1)
    shortest = min(steps, _SHORTEST_CHUNK)
    per_chunk = min(PULL_POINTS_PER_SERIES, steps, points_per_query // total)
    if per_chunk < shortest:
        per_chunk = shortest
    groups = _host_groups(series, max(1, points_per_query // per_chunk))
    parts = []
    first = 0
    while first < steps:
        last = min(steps, first + per_chunk) - 1
        for hosts, count in groups:
            parts.append(
                _Part(metric, name, hosts, count, start + first * step, start + last * step)
            )
        first = last + 1
    return parts


def _host_groups(
    series: list[dict[str, str]], most: int
) -> list[tuple[tuple[tuple[str | None, str], ...], int]]:
    """Hosts packed into groups of at most ``most`` series (a host's series stay
    together); one group without host selectors when all fit."""
    if len(series) <= most:
        return [((), len(series))]
    per_host: dict[tuple[str | None, str], int] = {}
    for labels in series:
        label = next((h for h in _HOST_LABELS if labels.get(h)), None)
        key = (label, labels[label] if label else "")
        per_host[key] = per_host.get(key, 0) + 1
    groups: list[tuple[tuple[tuple[str | None, str], ...], int]] = []
    for label in (*_HOST_LABELS, None):
        hosts = sorted(k for k in per_host if k[0] == label)
        current: list[tuple[str | None, str]] = []
        count = 0
        for host in hosts:
            if current and count + per_host[host] > most:
                groups.append((tuple(current), count))
                current, count = [], 0
            current.append(host)
            count += per_host[host]
        if current:
            groups.append((tuple(current), count))
    return groups


def collect(settings: object, folder: Path, progress: Progress) -> list[Path]:
    """Pull every metric of the window into ``folder``; returns the files written."""
    if not isinstance(settings, PrometheusPull):
        raise TypeError("the prometheus collector takes PrometheusPull settings")
    pull = settings
    start, end, step = window(pull)
    client = _Client(pull)
    client.closed_ranges = client.ranges_closed_on_the_left()
    names = client.metric_names(start, end)
    files: list[Path] = []
    todo: list[tuple[str, str]] = [
        (metric, name) for metric in READ_METRICS for name in names if name.upper() == metric
    ]
    if not todo:
        progress("prometheus: no dcgm-exporter series in the window")
    for number, (metric, name) in enumerate(todo, 1):
        progress(f"prometheus: {metric} ({number}/{len(todo)}): listing its series")
        series = client.series(name, start, end)
        parts = plan(metric, name, series, start, end, step, pull.points_per_query)
        files.extend(_pull_metric(client, folder, parts, step, progress, f"({number}/{len(todo)})"))
    return files


def _pull_metric(
    client: _Client, folder: Path, parts: list[_Part], step: float, progress: Progress, of: str
) -> list[Path]:
    files: list[Path] = []
    queue = list(parts)
    done = 0
    while queue:
        part = queue.pop(0)
        total = done + len(queue) + 1
        written: list[Path] = []
        for function in functions(part.metric):
            bar = _bar(done, total)
            progress(
                f"prometheus: {part.metric} {of} {bar} chunk {done + 1}/{total} "
                f"{_iso(part.start)}..{_iso(part.end)} {function}"
            )
            stem = f"{function}-{part.metric}.{len(files) + len(written):05d}"
            try:
                written.append(client.query_range(folder / stem, function, part, step))
            except _TooLarge as exc:
                halves = _halves(part, step)
                if not halves:
                    raise exc.error from None
                for path in written:  # the halves ask for every function again
                    path.unlink()
                written = []
                queue[:0] = halves
                break
        else:
            done += 1
        files.extend(written)
    return files


class _TooLarge(Exception):
    """The server refused a request as too large (its halves may pass)."""

    def __init__(self, error: InputError) -> None:
        super().__init__(str(error))
        self.error = error


def _halves(part: _Part, step: float) -> list[_Part]:
    """A part in two, by time where it holds two steps or more, else by host."""
    steps = round((part.end - part.start) / step) + 1
    if steps >= 2:
        middle = part.start + (steps // 2) * step
        return [replace(part, end=middle - step), replace(part, start=middle)]
    if len(part.hosts) >= 2:
        half = len(part.hosts) // 2
        share = part.series // 2
        return [
            replace(part, hosts=part.hosts[:half], series=share),
            replace(part, hosts=part.hosts[half:], series=part.series - share),
        ]
    return []


def _bar(done: int, total: int, width: int = 10) -> str:
    filled = round(width * done / max(total, 1))
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class _Client:
    """The server's HTTP API, with the call's transport settings."""

    def __init__(self, pull: PrometheusPull) -> None:
        self.pull = pull
        self.base = pull.url.rstrip("/")
        parsed = urllib.parse.urlsplit(self.base)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise UsageError(f"--url: {pull.url!r} is not an http:// or https:// URL")
        context = ssl.create_default_context(
            cafile=str(pull.ca_file) if pull.ca_file is not None else None
        ) if parsed.scheme == "https" else None  # fmt: skip
        if context is not None and pull.insecure_skip_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        handlers: list[Any] = [urllib.request.ProxyHandler()]
        if context is not None:
            handlers.append(urllib.request.HTTPSHandler(context=context))
        self.opener = urllib.request.build_opener(*handlers)
        self.closed_ranges = True  # see ranges_closed_on_the_left()
        # uncompressed: gzip costs the server more than it saves on a datacenter network
        # (a day of 2,000 GPUs took 1.5x as long compressed); a gzip answer is read too
        self.headers = {
            "User-Agent": f"fleetaudit/{__version__}",
            **dict(pull.headers),
        }
        auth = _authorization(pull, parsed.hostname or "")
        if auth is not None:
            self.headers["Authorization"] = auth

    def ranges_closed_on_the_left(self) -> bool:
        """Whether the server's range selectors take a sample at the window's left edge.

        Prometheus before 3.0 selects [t - range, t]: a sample exactly on the step grid
        would count in two steps, so the step's range is asked 1 ms shorter. 3.0 selects
        (t - range, t]. A server that does not say its version (a Thanos, Mimir or
        VictoriaMetrics front) is asked the shorter range too: at worst a sample exactly
        1 ms after a step's start is left out, never one counted twice.
        """
        try:
            info = self._json("/api/v1/status/buildinfo", [], "asking the server's version")
        except InputError:
            return True
        version = str(info.get("version", "")) if isinstance(info, dict) else ""
        major = re.match(r"v?(\d+)\.", version)
        return major is None or int(major.group(1)) < 3

    def metric_names(self, start: float, end: float) -> list[str]:
        """The names of the server's metrics that fleetaudit reads, whatever their case."""
        pattern = "(?i)(" + "|".join(READ_METRICS) + ")"
        found = self._json(
            "/api/v1/label/__name__/values",
            [("match[]", f'{{__name__=~"{pattern}"}}'), *_span(start, end)],
            "listing the metric names",
        )
        return sorted(str(n) for n in found) if isinstance(found, list) else []

    def series(self, name: str, start: float, end: float) -> list[dict[str, str]]:
        found = self._json(
            "/api/v1/series",
            [("match[]", f'{{__name__="{_escape(name)}"}}'), *_span(start, end)],
            f"listing the series of {name}",
        )
        return [s for s in found if isinstance(s, dict)] if isinstance(found, list) else []

    def query_range(self, stem: Path, function: str, part: _Part, step: float) -> Path:
        window = step - 0.001 if self.closed_ranges and step > 0.001 else step
        query = f"{function}({part.selector()}[{_duration(window)}])"
        form = [("query", query), *_span(part.start, part.end), ("step", _duration(step))]
        what = f"query {query!r} from {_iso(part.start)} to {_iso(part.end)}"
        with self._send("/api/v1/query_range", form, what) as response:
            gz = response.headers.get("Content-Encoding", "").lower() == "gzip"
            path = stem.with_name(stem.name + (".json.gz" if gz else ".json"))
            with open(path, "wb") as out:
                while True:
                    try:
                        chunk = response.read(_CHUNK_BYTES)
                    except (TimeoutError, OSError) as exc:
                        raise InputError(self.base, f"{what}: the answer broke off: {exc}") from exc
                    if not chunk:
                        break
                    try:
                        out.write(chunk)
                    except OSError as exc:
                        raise InputError(
                            str(path.parent),
                            f"cannot write the pulled answers: {exc.strerror or exc} (the "
                            "temporary folder is $TMPDIR's; point TMPDIR at a larger disk)",
                        ) from exc
        return path

    def _json(self, path: str, form: list[tuple[str, str]], what: str) -> Any:
        # metadata by GET: older servers (Prometheus before 2.44) take POST only for queries
        with self._send(path, form, what, post=False) as response:
            try:
                body = response.read()
                if response.headers.get("Content-Encoding", "").lower() == "gzip":
                    body = gzip.decompress(body)
                document = json.loads(body)
            except (OSError, ValueError, EOFError) as exc:
                raise InputError(self.base, f"{what}: the answer is not JSON: {exc}") from exc
        if not isinstance(document, dict) or document.get("status") != "success":
            raise InputError(self.base, f"{what}: the server answered {str(document)[:200]}")
        return document.get("data")

    def _send(self, path: str, form: list[tuple[str, str]], what: str, post: bool = True) -> Any:
        """``form`` to ``path`` (POST, or GET with a query string); the open response,
        after the retries it earns."""
        url = self.base + path
        data = urllib.parse.urlencode(form)
        attempt = 0
        while True:
            if post:
                request = urllib.request.Request(
                    url,
                    data=data.encode(),
                    headers={**self.headers, "Content-Type": "application/x-www-form-urlencoded"},
                    method="POST",
                )
            else:
                request = urllib.request.Request(f"{url}?{data}", headers=self.headers)
            try:
                return self.opener.open(request, timeout=self.pull.timeout_s)
            except urllib.error.HTTPError as exc:
                text = _error_text(exc)
                error = InputError(url, f"{what}: HTTP {exc.code} {exc.reason}: {text}")
                if exc.code in (400, 422) and _TOO_LARGE.search(text):
                    raise _TooLarge(error) from None
                if exc.code not in _RETRIED or attempt >= self.pull.retries:
                    raise error from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                reason = getattr(exc, "reason", exc)
                # a server that refuses or a name that does not resolve will not answer a
                # retry either; a timeout or a broken connection may
                lasting = isinstance(
                    reason, (ConnectionRefusedError, socket.gaierror, ssl.SSLError)
                )
                if lasting or attempt >= self.pull.retries:
                    raise InputError(
                        url, f"{what}: cannot reach the server: {reason}"
                        + (f" (after {attempt + 1} attempts)" if attempt else "")
                    ) from None  # fmt: skip
            time.sleep(self.pull.retry_wait_s * 2**attempt)
            attempt += 1


def _span(start: float, end: float) -> list[tuple[str, str]]:
    return [("start", f"{start:.3f}"), ("end", f"{end:.3f}")]


def _duration(seconds: float) -> str:
    """A PromQL duration: whole milliseconds.

    >>> _duration(60), _duration(0.5), _duration(59.999)
    ('60s', '500ms', '59999ms')
    """
    ms = round(seconds * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def _error_text(exc: urllib.error.HTTPError) -> str:
    """The server's own words: a Prometheus error document's ``error``, or its text."""
    try:
        body = exc.read()
        if exc.headers.get("Content-Encoding", "").lower() == "gzip":
            body = gzip.decompress(body)
        text = body.decode("utf-8", "replace")
    except (OSError, EOFError):
        return "(no answer body)"
    try:
        document = json.loads(text)
        if isinstance(document, dict) and document.get("error"):
            return str(document["error"])
    except ValueError:
        pass
    return " ".join(text.split())[:300] or "(no answer body)"


def _authorization(pull: PrometheusPull, host: str) -> str | None:
    """The Authorization header: a bearer token file, else basic auth (--user, ~/.netrc)."""
    if pull.bearer_token_file is not None:
        try:
            token = pull.bearer_token_file.read_text().strip()
        except OSError as exc:
            raise InputError(str(pull.bearer_token_file), f"cannot read: {exc.strerror}") from exc
        if not token:
            raise InputError(str(pull.bearer_token_file), "the bearer token file is empty")
        return f"Bearer {token}"
    name, password = None, None
    if pull.user is not None:
        name, _, rest = pull.user.partition(":")
        password = rest if ":" in pull.user else None
    if password is None:
        found = _netrc(host)
        if found is not None and (name is None or found[0] == name):
            name, password = found
    if name is None:
        return None
    if password is None:
        raise UsageError(f"--user {name}: no password given and none in ~/.netrc for {host}")
    return "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()


def _netrc(host: str) -> tuple[str, str] | None:
    try:
        entry = netrc.netrc().authenticators(host)
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return None
    if entry is None:
        return None
    login, _, password = entry
    return (login or "", password or "")
