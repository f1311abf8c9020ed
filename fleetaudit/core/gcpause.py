"""Pause Python's cyclic garbage collector around a phase that makes many objects and no cycles.

A phase that builds hundreds of thousands of small objects that live to its end (a kubectl
List's pods, a replay's events) makes the collector walk them again and again, finding
nothing to free: reference counting frees what such a phase lets go. Cycles made meanwhile
(rare: an exception kept with its traceback) are collected once the phase ends.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cycles_uncollected() -> Iterator[None]:
    """The block runs with the cyclic collector paused (as it was again afterwards)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
