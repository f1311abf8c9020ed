"""Slurm's printed times, read into UTC instants.

Slurm prints a time as epoch seconds (``SLURM_TIME_FORMAT=%s``, the JSON forms) or as
local time without a zone, ``YYYY-MM-DDTHH:MM:SS`` (the default), and ``Unknown``,
``None`` or nothing when there is none. Slurm 24.11's scontrol may append ``.UTC``
(``2026-01-14 13:48:23.UTC``): that time is UTC whatever the cluster's zone. A date
alone is its midnight. Times outside 1900..2200 are errors, as everywhere in the store.

The sacct lines are read by the SQL form of the same rule
(:func:`fleetaudit.inputs.ingest.slurm.sql_time`); a test holds the two equal.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

from fleetaudit.model.schema import TIME_RANGE

UNSET = ("Unknown", "None", "NONE", "N/A", "")
_EPOCH = re.compile(r"[0-9]{1,11}", re.ASCII)
_LOCAL = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})"
    r"(?:[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2}))?)?(\.UTC| UTC)?",
    re.ASCII,
)
_LOW, _HIGH = (datetime.fromisoformat(t) for t in TIME_RANGE)


class SlurmTimeError(ValueError):
    """A time Slurm would not print; the message says what was read."""


def parse_slurm_time(text: str | None, zone: str = "UTC") -> datetime | None:
    """The UTC instant (naive) of a Slurm time, or None for Unknown/None/empty.

    Raises:
        SlurmTimeError: anything else, or an instant outside 1900..2200.

    >>> parse_slurm_time("2026-12-05T02:58:29", "Europe/Berlin")
    datetime.datetime(2026, 12, 5, 1, 58, 29)
    >>> parse_slurm_time("1796435909"), parse_slurm_time("Unknown")
    (datetime.datetime(2026, 12, 5, 1, 58, 29), None)
    """
    value = (text or "").strip()
    if value in UNSET:
        return None
    if _EPOCH.fullmatch(value):
        instant = datetime.fromtimestamp(int(value), timezone.utc).replace(tzinfo=None)
    else:
        match = _LOCAL.fullmatch(value)
        if match is None:
            raise SlurmTimeError(
                f"cannot read the time {value[:40]!r} (epoch seconds or YYYY-MM-DDTHH:MM:SS)"
            )
        year, month, day, hour, minute, second, utc = match.groups()
        try:
            local = datetime(
                int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0)
            )
        except ValueError as exc:
            raise SlurmTimeError(f"cannot read the time {value!r}: {exc}") from exc
        instant = local if utc else _to_utc(local, zone)
    if not _LOW <= instant < _HIGH:
        raise SlurmTimeError(f"the time {value!r} lies outside {TIME_RANGE[0]}..{TIME_RANGE[1]}")
    return instant


def _to_utc(local: datetime, zone: str) -> datetime:
    try:
        aware = local.replace(tzinfo=ZoneInfo(zone))
        return aware.astimezone(timezone.utc).replace(tzinfo=None)
    except (OverflowError, ValueError) as exc:
        raise SlurmTimeError(f"cannot place {local.isoformat()} in {zone}: {exc}") from exc
