"""Slurm's TRES and GRES strings, read into counts.

A TRES string (``sacct`` ReqTRES/AllocTRES, ``scontrol`` CfgTRES, ``squeue``
tres_req_str) is ``type[/name]=count`` items joined by commas, sorted by name:
``billing=128,cpu=128,gres/gpu:h100=16,gres/gpu=16,mem=1024000M,node=2``.

- Memory counts in MiB; a K/M/G/T/P suffix multiplies by 1024 steps from MiB
  (``mem=1000G`` is 1,024,000 MiB, ``mem=1.50G`` is 1,536 MiB, ``mem=512000M``
  is 512,000 MiB). A bare number is MiB. Other counts may carry the same
  suffixes, as powers of 1024 of the unit (``gres/gpu=1K`` would be 1024).
- Typed and untyped GPUs appear side by side (``gres/gpu:h100=16,gres/gpu=16``):
  the untyped entry is the amount and the typed one names the model. They are
  never added up. Only typed entries: their sum is the amount.

A GRES string (``scontrol`` Gres) is ``name[:type]:count[(S:0-1)]`` items:
``gpu:h100:8(S:0-1)``, ``gpu:tesla:2,gpu:kepler:2,mps:400``,
``bandwidth:lustre:no_consume:4G``.

Written here: the parsers in python-hostlist and pyslurm are GPL.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

_SUFFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}
_MEM_SUFFIX = {"": 1.0, "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0**2, "P": 1024.0**3}
_COUNT = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([KMGTP]?)$", re.IGNORECASE | re.ASCII)
_NEGATIVE = re.compile(r"^-[0-9]+(?:\.[0-9]+)?[KMGTP]?$", re.IGNORECASE | re.ASCII)
_ITEM = re.compile(r"^([a-z_]+(?:/[^=,]+)?)=(.*)$", re.IGNORECASE | re.ASCII)


class TresError(ValueError):
    """A TRES or GRES string that cannot be read; the message says which part."""


@dataclass(frozen=True)
class Tres:
    """The counts of one TRES string, keyed ``type`` or ``type/name`` (``gres/gpu:h100``)."""

    counts: dict[str, float] = field(default_factory=dict)

    @property
    def gpus(self) -> float | None:
        """GPUs: the untyped ``gres/gpu`` count, else the sum of the typed ones, else None."""
        if "gres/gpu" in self.counts:
            return self.counts["gres/gpu"]
        typed = [v for k, v in self.counts.items() if k.startswith("gres/gpu:")]
        return sum(typed) if typed else None

    @property
    def gpu_types(self) -> tuple[str, ...]:
        """The GPU types named by typed entries, in the string's order."""
        return tuple(k.split(":", 1)[1] for k in self.counts if k.startswith("gres/gpu:"))

    @property
    def cpus(self) -> float | None:
        return self.counts.get("cpu")

    @property
    def mem_mib(self) -> float | None:
        return self.counts.get("mem")

    @property
    def nodes(self) -> float | None:
        return self.counts.get("node")


def parse_count(text: str, *, memory: bool = False) -> float:
    """A TRES count with an optional K/M/G/T/P suffix; memory counts are in MiB.

    >>> parse_count("1000G", memory=True), parse_count("1.50G", memory=True)
    (1024000.0, 1536.0)
    >>> parse_count("512000M", memory=True), parse_count("16")
    (512000.0, 16.0)
    """
    match = _COUNT.match(text.strip())
    if match is None:
        if _NEGATIVE.match(text.strip()):
            raise TresError(f"count {_short(text)} is negative")
        raise TresError(f"count {_short(text)} is not a number")
    number, suffix = float(match.group(1)), match.group(2).upper()
    value = number * (_MEM_SUFFIX[suffix] if memory else _SUFFIX[suffix])
    if not math.isfinite(value):
        raise TresError(f"count {_short(text)} is not a number")
    return value


def _short(text: str, width: int = 40) -> str:
    """``text`` quoted, cut to ``width`` characters (a 100 MB field stays a short reason)."""
    return repr(text if len(text) <= width else text[: width - 3] + "...")


def parse_tres(text: str | None) -> Tres:
    """The counts of a TRES string; an empty or missing string has none.

    Raises:
        TresError: an item that is not ``type[/name]=count``, or a bad count.

    >>> t = parse_tres("billing=128,cpu=128,gres/gpu:h100=16,gres/gpu=16,mem=1024000M,node=2")
    >>> t.gpus, t.gpu_types, t.cpus, t.mem_mib, t.nodes
    (16.0, ('h100',), 128.0, 1024000.0, 2.0)
    """
    counts: dict[str, float] = {}
    if text is None or not text.strip():
        return Tres(counts)
    for item in text.strip().split(","):
        match = _ITEM.match(item.strip())
        if match is None:
            raise TresError(f"TRES item {_short(item.strip())} is not type=count")
        key, value = match.group(1).lower(), match.group(2)
        try:
            counts[key] = parse_count(value, memory=key in ("mem", "gres/gpumem"))
        except TresError as exc:
            raise TresError(f"TRES item {_short(item.strip())}: {exc}") from exc
    return Tres(counts)


@dataclass(frozen=True)
class Gres:
    """One GRES item of a node: ``gpu:h100:8(S:0-1)`` is name gpu, type h100, count 8."""

    name: str
    type: str | None
    count: float


def parse_gres(text: str | None) -> list[Gres]:
    """The items of a node's Gres string (``(null)`` and empty: none).

    Raises:
        TresError: an item without a count.

    >>> parse_gres("gpu:h100:8(S:0-1),mps:400")
    [Gres(name='gpu', type='h100', count=8.0), Gres(name='mps', type=None, count=400.0)]
    >>> parse_gres("gpu:tesla:2,gpu:kepler:2,bandwidth:lustre:no_consume:4G")[2].count
    4294967296.0
    """
    items: list[Gres] = []
    if text is None or text.strip().lower() in ("", "(null)", "n/a", "none"):
        return items
    for raw in _split_outside_parens(text.strip()):
        item = re.sub(r"\([^)]*\)", "", raw).strip()
        parts = [p for p in item.split(":") if p.lower() != "no_consume"]
        if not parts or not parts[0]:
            raise TresError(f"GRES item {_short(raw)} has no name")
        name, gres_type, count_text = parts[0].lower(), None, "1"
        if len(parts) >= 2 and _COUNT.match(parts[-1]):
            count_text = parts[-1]
            middle = parts[1:-1]
        else:
            middle = parts[1:]
        if middle:
            gres_type = ":".join(middle)
        items.append(Gres(name, gres_type, parse_count(count_text)))
    return items


def _split_outside_parens(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item for item in items if item.strip()]
