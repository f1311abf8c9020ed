"""Run independent pure tasks in worker processes (placement seeds, compaction partitions).

Spawned, not forked: a fork of a process whose DuckDB or polars threads ran can
deadlock. Tasks and results must pickle; results keep the order of the tasks.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

_T = TypeVar("_T")


def map_processes(task: Callable[[Any], _T], tasks: list[Any], workers: int) -> list[_T]:
    """``[task(t) for t in tasks]``, in up to ``workers`` spawned processes when asked.

    Args:
        task: a module-level function (spawned workers import it by name).
        tasks: its arguments, one per call.
        workers: processes to use; 1 (or a single task) runs in this process.

    Returns:
        The results in the order of ``tasks``.

    Example:
        >>> map_processes(abs, [-1, 2, -3], workers=1)
        [1, 2, 3]
    """
    if workers > 1 and len(tasks) > 1:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=context) as pool:
            return list(pool.map(task, tasks, chunksize=1))
    return [task(t) for t in tasks]
