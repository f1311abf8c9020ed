"""The placement replay's single-pod node choice, compiled (numba).

A single pod's node choice is the replay's most frequent step: at ASI scale a
week holds some 700,000 arrivals, and each one's model set is thousands of
nodes. :meth:`~fleetaudit.whatif.placement.policies._Run.fits_in_set` followed
by :meth:`~fleetaudit.whatif.placement.policies._Run._choose_in` builds masks
over all of them; :func:`choose` walks them once, stopping at the first fit
where that is the answer, and gives the same node (the rule is theirs: the
same checks, ties to the lowest node index).

Compiled once per machine (``cache=True``, a few seconds) and loaded from the
cache afterwards, in the folder :mod:`fleetaudit.core.jitcache` chooses (as the
harvesting replay's kernel is).
"""

from __future__ import annotations

from pathlib import Path

from fleetaudit.core.jitcache import choose_cache_dir, portable_cpu

CACHE_DIR = choose_cache_dir(Path(__file__))
portable_cpu()

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

from fleetaudit.whatif.placement.fleet import _U  # noqa: E402

ANY, FIRST, BEST = 0, 1, 2  # what :func:`choose` looks for


@njit(cache=True, nogil=True)
def choose(
    nodes: np.ndarray,
    cpu: np.ndarray,
    memory: np.ndarray,
    largest: np.ndarray,
    whole: np.ndarray,
    blocked: np.ndarray,
    key: np.ndarray,
    need_cpu: int,
    need_memory: int,
    share: int,
    count: int,
    mode: int,
) -> int:
    """A node of ``nodes`` (ascending indices) with room for one pod, or -1.

    The pod needs ``need_cpu`` CPU and ``need_memory`` memory units and, when
    ``count`` > 0, either ``count`` fully free GPUs (``share`` a whole GPU) or one
    GPU with ``share`` units free; a node marked in ``blocked`` (an empty array:
    none is) takes nothing. ``mode`` ANY or FIRST: the lowest-indexed such node;
    BEST: the one of least ``key``, the lowest-indexed among equal keys.
    """
    check_blocked = blocked.shape[0] > 0
    found = -1
    least = 0
    for i in range(nodes.shape[0]):
        n = nodes[i]
        if cpu[n] < need_cpu or memory[n] < need_memory:
            continue
        if count > 0:
            if share < _U:
                if largest[n] < share:
                    continue
            elif whole[n] < count:
                continue
        if check_blocked and blocked[n]:
            continue
        if mode != BEST:
            return n
        k = key[n]
        if found < 0 or k < least:
            found = n
            least = k
    return found
