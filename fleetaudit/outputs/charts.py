"""Chart geometry for the report: pure functions from numbers to SVG point lists.

No SVG markup and no data access here: :mod:`fleetaudit.outputs.report` builds the
series from a report result and the templates place the shapes. Coordinates are
in a chart box ``width`` x ``height`` with y growing downwards (SVG's), values
scaled so that ``top`` is the box's top edge; every coordinate is written with
one decimal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

SPARKS = "▁▂▃▄▅▆▇█"


@dataclass(frozen=True)
class Band:
    """One layer of a stacked area chart: its polygon's points, as SVG text."""

    key: str
    label: str
    colour: str
    points: str


def _x(i: int, n: int, width: float) -> float:
    return 0.0 if n <= 1 else width * i / (n - 1)


def _y(value: float, top: float, height: float) -> float:
    return height if top <= 0 else height - height * value / top


def _fmt(x: float, y: float) -> str:
    return f"{x:.1f},{y:.1f}"


def stacked_bands(
    layers: Sequence[tuple[str, str, str, Sequence[float]]],
    width: float,
    height: float,
    top: float,
) -> tuple[Band, ...]:
    """Polygons of layers stacked bottom-up: (key, label, colour, values per instant).

    Each polygon runs along its upper edge left to right, then back along the
    layers below it right to left. Negative values count as 0.

    >>> [b.points for b in stacked_bands([("a", "a", "#000", [1, 2]),
    ...     ("b", "b", "#111", [1, 0])], 10, 4, 4)]
    ['0.0,3.0 10.0,2.0 10.0,4.0 0.0,4.0', '0.0,2.0 10.0,2.0 10.0,2.0 0.0,3.0']
    """
    if not layers:
        return ()
    n = len(layers[0][3])
    below = [0.0] * n
    bands = []
    for key, label, colour, values in layers:
        above = [b + max(float(v), 0.0) for b, v in zip(below, values, strict=True)]
        upper = [_fmt(_x(i, n, width), _y(v, top, height)) for i, v in enumerate(above)]
        lower = [_fmt(_x(i, n, width), _y(v, top, height)) for i, v in enumerate(below)]
        bands.append(Band(key, label, colour, " ".join(upper + lower[::-1])))
        below = above
    return tuple(bands)


def polyline(
    values: Sequence[float | None], width: float, height: float, top: float, bottom: float = 0.0
) -> str:
    """The points of a line through ``values`` (None: left out), ``bottom``..``top`` in the box.

    >>> polyline([0, 0.5, None, 1], 30, 10, 1)
    '0.0,10.0 10.0,5.0 30.0,0.0'
    """
    n = len(values)
    span = top - bottom
    return " ".join(
        _fmt(_x(i, n, width), height if span <= 0 else height - height * (v - bottom) / span)
        for i, v in enumerate(values)
        if v is not None
    )


def bucket_means(values: Sequence[float], size: int) -> list[float]:
    """Means of consecutive runs of ``size`` values (the last run may be shorter): a long
    series drawn with fewer points, each run's area kept.

    >>> bucket_means([1, 3, 2, 2, 5], 2)
    [2.0, 2.0, 5.0]
    """
    if size <= 1:
        return [float(v) for v in values]
    return [
        sum(values[i : i + size]) / len(values[i : i + size]) for i in range(0, len(values), size)
    ]


def nice_top(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is at least ``value``;
    1 for nothing to draw (at most 1e-9: GPU counts below that are rounding noise).

    >>> [nice_top(v) for v in (0, 7, 10, 11, 230, 0.3)]
    [1.0, 10.0, 10.0, 20.0, 250.0, 0.5]
    """
    if value <= 1e-9:
        return 1.0
    power = 1.0
    while power * 10 < value:
        power *= 10
    while power > value:
        power /= 10
    for factor in (1, 2, 2.5, 5, 10):
        if factor * power >= value:
            return factor * power
    return 10 * power  # pragma: no cover - the loop above always returns


def nice_ticks(top: float) -> list[float]:
    """Gridline values from 0 to a :func:`nice_top` ``top``, at a step that reads easily
    (a fifth of 1, a quarter of 2, a fifth of 2.5 or 5, times a power of ten).

    >>> nice_ticks(20.0), nice_ticks(250.0), nice_ticks(5.0), nice_ticks(1.0)
    ([0.0, 5.0, 10.0, 15.0, 20.0], [0.0, 50.0, 100.0, 150.0, 200.0, 250.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    """
    if top <= 0:
        return [0.0]
    power = 10 ** math.floor(math.log10(top))
    factor = round(top / power, 6)
    step = {1.0: 0.2, 2.0: 0.5, 2.5: 0.5, 5.0: 1.0, 10.0: 2.0}.get(factor, factor / 4) * power
    count = round(top / step)
    return [round(i * step, 10) for i in range(count + 1)]


def sparkline(values: Sequence[float | None]) -> str:
    """One character per value, ▁ (the least) to █ (the most); None is a space. Values
    that differ by rounding noise only (1e-9 of their size) draw a flat line.

    >>> sparkline([0.1, 0.2, 0.3, None, 0.1])
    '▁▅█ ▁'
    >>> sparkline([0.5, 0.5 + 1e-15])
    '▄▄'
    """
    known = [v for v in values if v is not None]
    if not known:
        return " " * len(values)
    lo, hi = min(known), max(known)
    out = []
    for v in values:
        if v is None:
            out.append(" ")
        elif hi - lo <= 1e-9 * max(abs(hi), abs(lo), 1.0):
            out.append(SPARKS[3])
        else:
            out.append(SPARKS[round((v - lo) / (hi - lo) * (len(SPARKS) - 1))])
    return "".join(out)
