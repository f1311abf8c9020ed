"""Slurm hostlist expressions, expanded into node names.

Slurm writes sets of nodes compactly: ``gpu[001-004,010]``, ``gpu[001-002],cpu07``,
``rack[1-2]-n[01-02]`` (several bracket groups: their cartesian product) and, in
ClusterShell's dialect, stepped ranges ``n[0-10/2]``. Commas separate items at the
top level and also appear inside brackets. A range keeps the zero padding of its
lower bound (``[001-004]`` gives ``001`` ... ``004``). ``sacct`` prints
``None assigned`` for a job that never ran: that is not a hostlist.

Written here rather than depended on: the usual Python expanders are GPL
(python-hostlist) or heavier than the forty lines it takes.
"""

from __future__ import annotations

import itertools
import re

_RANGE = re.compile(r"^(\d+)(?:-(\d+)(?:/(\d+))?)?$")
_MAX_HOSTS = 1_000_000  # a typo such as n[1-999999999] is an error, not a memory blow-up


class HostlistError(ValueError):
    """A hostlist expression that cannot be expanded; the message says why."""


def expand_hostlist(expression: str) -> list[str]:
    """The node names of a hostlist expression, in the order written.

    Raises:
        HostlistError: unbalanced brackets, a bad range, or no hostlist at all.

    >>> expand_hostlist("tux[0-3,12,18-20]")
    ['tux0', 'tux1', 'tux2', 'tux3', 'tux12', 'tux18', 'tux19', 'tux20']
    >>> expand_hostlist("gpu[001-002],cpu07")
    ['gpu001', 'gpu002', 'cpu07']
    >>> expand_hostlist("rack[1-2]-n[01-02]")
    ['rack1-n01', 'rack1-n02', 'rack2-n01', 'rack2-n02']
    >>> expand_hostlist("n[0-6/3]")
    ['n0', 'n3', 'n6']
    """
    text = expression.strip()
    if not text or text.lower() in ("none assigned", "(null)", "none"):
        raise HostlistError(f"{expression!r} names no nodes")
    hosts: list[str] = []
    for item in _split_top_level(text):
        hosts.extend(_expand_item(item))
        if len(hosts) > _MAX_HOSTS:
            raise HostlistError(f"{expression!r} names more than {_MAX_HOSTS:,} nodes")
    return hosts


def _split_top_level(text: str) -> list[str]:
    items: list[str] = []
    depth, start = 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"nested '[' in {text!r}")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in {text!r}")
        elif char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise HostlistError(f"unbalanced '[' in {text!r}")
    items.append(text[start:])
    for item in items:
        if not item.strip():
            raise HostlistError(f"empty item in {text!r}")
    return [item.strip() for item in items]


def _expand_item(item: str) -> list[str]:
    # "a[1-2]b[3,5]c" -> literal and bracket parts: ["a"], [..], ["b"], [..], ["c"]
    parts: list[list[str]] = []
    end = 0
    for match in re.finditer(r"\[([^\]]*)\]", item):
        if match.start() > end:
            parts.append([item[end : match.start()]])
        parts.append(_expand_group(match.group(1), item))
        end = match.end()
    if end < len(item):
        parts.append([item[end:]])
    return ["".join(combo) for combo in itertools.product(*parts)]


def _expand_group(group: str, item: str) -> list[str]:
    values: list[str] = []
    for piece in group.split(","):
        match = _RANGE.match(piece.strip())
        if match is None:
            raise HostlistError(f"bad range {piece!r} in {item!r}")
        low_text, high_text, step_text = match.groups()
        low = int(low_text)
        high = int(high_text) if high_text is not None else low
        step = int(step_text) if step_text is not None else 1
        if high < low or step < 1:
            raise HostlistError(f"bad range {piece!r} in {item!r}")
        if (high - low) // step > _MAX_HOSTS:
            raise HostlistError(f"range {piece!r} names more than {_MAX_HOSTS:,} nodes")
        width = len(low_text)
        values.extend(str(n).zfill(width) for n in range(low, high + 1, step))
    return values
