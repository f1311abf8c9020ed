"""Instants and durations as the command line spells them.

Instants are ISO 8601 (no zone means UTC) or epoch seconds and are handled as
naive UTC datetimes everywhere inside fleetaudit. Durations are ``90s``,
``30m``, ``6h``, ``7d`` (also ``1w``, and plain seconds).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from fleetaudit.core.errors import UsageError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_MAX_SECONDS = 100 * 365 * 86400
_YEARS = (1900, 2200)  # the instants fleetaudit accepts (as ingest does)


class TimeOutOfRange(UsageError):
    """A time that reads as one but lies outside the years fleetaudit takes."""


# ASCII digits: \d would take other scripts' digits too ('١٢h'), which nothing else reads
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$", re.ASCII)


def parse_duration(text: str, *, option: str = "duration") -> timedelta:
    """Parse ``90s``, ``30m``, ``6h``, ``7d``, ``1w`` or plain seconds.

    >>> parse_duration("6h")
    datetime.timedelta(seconds=21600)
    >>> parse_duration("90")
    datetime.timedelta(seconds=90)
    """
    match = _DURATION.match(text)
    if not match:
        raise UsageError(f"{option}: {text!r} is not a duration; write e.g. 90s, 30m, 6h or 7d")
    value, unit = match.groups()
    seconds = float(value) * _UNITS[unit or "s"]
    if seconds > _MAX_SECONDS:
        raise UsageError(f"{option}: {text!r} is longer than 100 years")
    return timedelta(seconds=seconds)


def parse_instant(text: str, *, option: str = "--at") -> datetime:
    """Parse ISO 8601 (no zone means UTC) or epoch seconds into naive UTC.

    >>> parse_instant("2026-01-01T12:00:00Z")
    datetime.datetime(2026, 1, 1, 12, 0)
    >>> parse_instant("2026-01-01T14:00:00+02:00")
    datetime.datetime(2026, 1, 1, 12, 0)
    """
    if (
        len(text) == 20  # the API's own form, 2026-03-01T10:00:04Z: read at once
        and text[19] == "Z"
        and text[10] == "T"
        and text[4] == text[7] == "-"
        and text[13] == text[16] == ":"
    ):
        try:
            fast = datetime.fromisoformat(text[:19])
        except ValueError:
            pass  # the full read below says why
        else:
            if fast.tzinfo is None and _YEARS[0] <= fast.year < _YEARS[1]:
                return fast
    raw = text.strip()
    try:
        if re.fullmatch(r"-?\d+(\.\d+)?", raw, re.ASCII):
            value = from_epoch(float(raw))
        else:
            value = datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
        value = to_utc(value)
    except (ValueError, OverflowError) as exc:
        raise UsageError(
            f"{option}: {text!r} is not a time; write ISO 8601 (2026-05-01T00:00:00Z) "
            "or epoch seconds"
        ) from exc
    if not _YEARS[0] <= value.year < _YEARS[1]:
        raise TimeOutOfRange(f"{option}: {text!r} is outside the years {_YEARS[0]}..{_YEARS[1]}")
    return value


def to_utc(value: datetime) -> datetime:
    """A naive UTC datetime (naive input is taken as UTC already)."""
    if value.tzinfo is None:
        return value
    return value.astimezone(timezone.utc).replace(tzinfo=None)


_EPOCH = datetime(1970, 1, 1)
_ONE_US = timedelta(microseconds=1)


def epoch_us(value: datetime) -> int:
    """Microseconds since the epoch of an instant (naive input is taken as UTC).

    >>> epoch_us(datetime(1970, 1, 1, 0, 0, 1)), epoch_us(datetime(1969, 12, 31, 23, 59, 59))
    (1000000, -1000000)
    """
    return (to_utc(value) - _EPOCH) // _ONE_US


def from_epoch_us(us: int) -> datetime:
    """Microseconds since the epoch as a naive UTC datetime (the inverse of :func:`epoch_us`)."""
    return _EPOCH + timedelta(microseconds=us)


def from_epoch(seconds: float) -> datetime:
    """Epoch seconds as a naive UTC datetime."""
    return datetime(1970, 1, 1) + timedelta(seconds=seconds)


def iso(value: datetime | None) -> str | None:
    """ISO 8601 with a trailing Z, to the second (to the microsecond when it has one)."""
    if value is None:
        return None
    value = to_utc(value)
    spec = "microseconds" if value.microsecond else "seconds"
    return value.isoformat(timespec=spec) + "Z"


def seconds_text(seconds: float | None, missing: str = "-") -> str:
    """A span of seconds in the largest unit it reaches, to one decimal; ``missing``
    for None (a censored wait, a figure not known).

    >>> [seconds_text(s) for s in (59, 90, 5400, 129600)], seconds_text(None)
    (['59s', '1.5m', '1.5h', '1.5d'], '-')
    """
    if seconds is None:
        return missing
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"
