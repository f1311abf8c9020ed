"""Pause Python's cyclic garbage collector around a phase that makes many objects and no cycles.

A phase that builds hundreds of thousands of small objects that live to its end (a replay's
state, events and result rows; a kubectl List's pods as they are mapped) makes the
collector walk them again and again (a tenth to a fifth of the time) and find nothing to
free: such a phase makes no reference cycles, and reference counting frees what it lets
go. Cycles made meanwhile (rare: an exception kept with its traceback) are collected once
the phase ends.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection inside (as it was after)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
