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


@njit(cache=True, nogil=True)
def any_may_fit(
    nodes: np.ndarray,
    free: np.ndarray,
    cpu: np.ndarray,
    memory: np.ndarray,
    whole: np.ndarray,
    largest: np.ndarray,
    lp_free: np.ndarray,
    lp_cpu: np.ndarray,
    lp_memory: np.ndarray,
    need_whole: int,
    need_largest: int,
    need_cpu: int,
    need_memory: int,
    evicts: bool,
) -> bool:
    """Whether some node of ``nodes`` has at least ``need_whole`` fully free GPUs, a GPU
    with ``need_largest`` units free, ``need_cpu`` CPU and ``need_memory`` memory units;
    ``evicts``: counting what the evictable work holds (``lp_*``) as free too."""
    for i in range(nodes.shape[0]):
        n = nodes[i]
        if evicts:
            if cpu[n] + lp_cpu[n] < need_cpu or memory[n] + lp_memory[n] < need_memory:
                continue
            n_whole = 0
            most = 0
            for g in range(free.shape[1]):
                v = free[n, g] + lp_free[n, g]
                if v == _U:
                    n_whole += 1
                if v > most:
                    most = v
            if n_whole >= need_whole and most >= need_largest:
                return True
        elif (
            cpu[n] >= need_cpu
            and memory[n] >= need_memory
            and whole[n] >= need_whole
            and largest[n] >= need_largest
        ):
            return True
    return False


@njit(cache=True, nogil=True)
def refresh_rooms(
    nodes: np.ndarray,
    room: np.ndarray,
    seen: np.ndarray,
    version: np.ndarray,
    model_ok: np.ndarray,
    blocked: np.ndarray,
    free: np.ndarray,
    cpu: np.ndarray,
    memory: np.ndarray,
    lp_free: np.ndarray,
    lp_cpu: np.ndarray,
    lp_memory: np.ndarray,
    after: bool,
    pods: int,
    need_cpu: int,
    need_memory: int,
    share: int,
    count: int,
) -> int:
    """The pods of one request's shape each node of ``nodes`` can take (as
    :meth:`~fleetaudit.whatif.placement.policies._Run.room_one`), kept in ``room``:
    worked out again only where the node's ``version`` moved past ``seen``; their sum.

    The shape: ``pods`` pods, each of ``need_cpu`` CPU and ``need_memory`` memory units
    and ``count`` whole GPUs (or one GPU's ``share`` units); only nodes of its model set
    (``model_ok``) and not ``blocked`` (an empty array: none is); ``after``: counting
    what the evictable work holds (``lp_*``) as free too.
    """
    check_blocked = blocked.shape[0] > 0
    total = 0
    for i in range(nodes.shape[0]):
        n = nodes[i]
        if seen[n] != version[n]:
            seen[n] = version[n]
            room[n] = 0
            if not model_ok[n] or (check_blocked and blocked[n]):
                continue
            c, m = cpu[n], memory[n]
            if after:
                c += lp_cpu[n]
                m += lp_memory[n]
            cap = pods
            if need_cpu > 0:
                cap = min(cap, c // need_cpu)
            elif c < need_cpu:
                continue
            if need_memory > 0:
                cap = min(cap, m // need_memory)
            elif m < need_memory:
                continue
            if count > 0 and share > 0:
                units = 0
                for g in range(free.shape[1]):
                    v = free[n, g] + lp_free[n, g] if after else free[n, g]
                    if share < _U:
                        units += v // share
                    elif v == _U:
                        units += 1
                cap = min(cap, units if share < _U else units // count)
            room[n] = max(cap, 0)
        total += room[n]
    return total
