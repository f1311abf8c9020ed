"""Slurm hostlist expressions, expanded into node names.

Slurm writes sets of nodes compactly: ``gpu[001-004,010]``, ``gpu[001-002],cpu07``,
``rack[1-2]-n[01-02]`` (several bracket groups: their cartesian product) and, in
ClusterShell's dialect, stepped ranges ``n[0-10/2]``. As in Slurm's own parser, items
are separated at the top level by commas, spaces, tabs and newlines (``"n1 n2"`` is two
nodes, ``"c1, c[2-3]"`` three), empty items are skipped, and commas also appear inside
brackets. A range keeps the zero padding of its lower bound (``[001-004]`` gives ``001``
... ``004``); its bounds are ASCII digits only. Names are kept in the order written,
repeats included, as Slurm keeps them. ``sacct`` prints ``None assigned`` for a job that
never ran: that is not a hostlist.

The size of every item (the product of its bracket groups' sizes) is computed before
anything is expanded, so a typo such as ``n[1-100][1-100][1-1000]`` fails at once
instead of building ten million names.

Written here rather than depended on: the usual Python expanders are GPL
(python-hostlist) or heavier than the few lines it takes.
"""

from __future__ import annotations

import itertools
import re

_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+)(?:/([0-9]+))?)?", re.ASCII)
_SEPARATORS = frozenset(", \t\n\r")
MAX_HOSTS = 1_000_000  # a typo such as n[1-999999999] is an error, not a memory blow-up
_NO_NODES = ("none assigned", "(null)", "none")


class HostlistError(ValueError):
    """A hostlist expression that cannot be expanded; the message says why."""


def expand_hostlist(expression: str) -> list[str]:
    """The node names of a hostlist expression, in the order written.

    Raises:
        HostlistError: unbalanced or nested brackets, a bad range, more than
            :data:`MAX_HOSTS` names, or no hostlist at all.

    >>> expand_hostlist("tux[0-3,12,18-20]")
    ['tux0', 'tux1', 'tux2', 'tux3', 'tux12', 'tux18', 'tux19', 'tux20']
    >>> expand_hostlist("gpu[001-002],cpu07")
    ['gpu001', 'gpu002', 'cpu07']
    >>> expand_hostlist("rack[1-2]-n[01-02]")
    ['rack1-n01', 'rack1-n02', 'rack2-n01', 'rack2-n02']
    >>> expand_hostlist("n[0-6/3]"), expand_hostlist("c1, c[2-3]")
    (['n0', 'n3', 'n6'], ['c1', 'c2', 'c3'])
    """
    text = expression.strip()
    if not text or text.lower() in _NO_NODES:
        raise HostlistError(f"{expression!r} names no nodes")
    items = [_parse_item(item, expression) for item in _split_top_level(text)]
    total = sum(_size(groups) for groups in items)
    if total > MAX_HOSTS:
        raise HostlistError(f"{_short(expression)} names more than {MAX_HOSTS:,} nodes")
    if total == 0:
        raise HostlistError(f"{expression!r} names no nodes")
    hosts: list[str] = []
    for groups in items:
        hosts.extend("".join(combo) for combo in itertools.product(*(_values(g) for g in groups)))
    return hosts


def hostlist_size(expression: str) -> int:
    """How many names ``expression`` expands to, without expanding it.

    >>> hostlist_size("n[1-100][1-100][1-1000]")
    10000000
    """
    text = expression.strip()
    if not text or text.lower() in _NO_NODES:
        raise HostlistError(f"{expression!r} names no nodes")
    return sum(_size(_parse_item(item, expression)) for item in _split_top_level(text))


def _short(text: str, width: int = 60) -> str:
    return repr(text if len(text) <= width else text[: width - 3] + "...")


def _split_top_level(text: str) -> list[str]:
    """The items of ``text``: split on Slurm's separators outside brackets, empty ones
    skipped."""
    items: list[str] = []
    depth, start = 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"nested '[' in {_short(text)}")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in {_short(text)}")
        elif char in _SEPARATORS and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise HostlistError(f"unbalanced '[' in {_short(text)}")
    items.append(text[start:])
    return [item for item in items if item]


# An item's parts: a literal (str) or a bracket group (a list of (low, high, step, width)).
_Group = str | list[tuple[int, int, int, int]]


def _parse_item(item: str, expression: str) -> list[_Group]:
    parts: list[_Group] = []
    end = 0
    for match in re.finditer(r"\[([^\]]*)\]", item):
        if match.start() > end:
            parts.append(item[end : match.start()])
        parts.append(_parse_group(match.group(1), item))
        end = match.end()
    if end < len(item):
        parts.append(item[end:])
    for part in parts:
        if isinstance(part, str) and any(c in "[]" for c in part):
            raise HostlistError(f"unbalanced brackets in {_short(item)}")
    return parts


def _parse_group(group: str, item: str) -> list[tuple[int, int, int, int]]:
    ranges = []
    for piece in group.split(","):
        match = _RANGE.fullmatch(piece.strip())
        if match is None:
            raise HostlistError(f"bad range {_short(piece)} in {_short(item)}")
        low_text, high_text, step_text = match.groups()
        low = int(low_text)
        high = int(high_text) if high_text is not None else low
        step = int(step_text) if step_text is not None else 1
        if high < low or step < 1:
            raise HostlistError(f"bad range {_short(piece)} in {_short(item)}")
        ranges.append((low, high, step, len(low_text)))
    return ranges


def _size(parts: list[_Group]) -> int:
    total = 1
    for part in parts:
        if not isinstance(part, str):
            total *= sum((high - low) // step + 1 for low, high, step, _ in part)
    return total


def _values(part: _Group) -> list[str]:
    if isinstance(part, str):
        return [part]
    return [str(n).zfill(width) for low, high, step, width in part for n in range(low, high + 1, step)]
