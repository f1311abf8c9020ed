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


LOCALITY_CODES = {"any": 0, "node": 1, "switch": 2, "block": 2}  # reserve_walk's rules


@njit(cache=True, nogil=True, inline="always")
def _reserve_room(
    free: np.ndarray, cpu: np.ndarray, memory: np.ndarray, n: int, pods: int,
    need_cpu: int, need_memory: int, share: int, count: int,
) -> int:  # fmt: skip
    """Pods of the reserving request's shape node n takes in the state ``free``, ``cpu``,
    ``memory`` (the fleet's, or the walk's copy of the node)."""
    cap = pods
    if need_cpu > 0:
        cap = min(cap, cpu[n] // need_cpu)
    if need_memory > 0:
        cap = min(cap, memory[n] // need_memory)
    if count > 0 and share > 0:
        units = 0
        for g in range(free.shape[1]):
            if share < _U:
                units += free[n, g] // share
            elif free[n, g] == _U:
                units += 1
        cap = min(cap, units if share < _U else units // count)
    return max(cap, 0)


@njit(cache=True, nogil=True)
def reserve_walk(
    order: np.ndarray,
    recent: np.ndarray,
    slot_alive: np.ndarray,
    slot_end: np.ndarray,
    slot_node: np.ndarray,
    slot_gpus: np.ndarray,
    slot_units: np.ndarray,
    slot_cpu: np.ndarray,
    slot_memory: np.ndarray,
    free: np.ndarray,
    cpu: np.ndarray,
    memory: np.ndarray,
    scratch_free: np.ndarray,
    scratch_cpu: np.ndarray,
    scratch_memory: np.ndarray,
    copied: np.ndarray,
    eligible: np.ndarray,
    eligible_nodes: np.ndarray,
    room: np.ndarray,
    sums: np.ndarray,
    domain: np.ndarray,
    pods: int,
    locality: int,
    need_cpu: int,
    need_memory: int,
    share: int,
    count: int,
) -> tuple[int, int]:
    """The slurm-backfill reservation's walk: release the running pods' slots in
    expected-end order from a copy of the state until the first waiting request fits;
    (the slot released when it first does, its node), or (-1, -1).

    The slots come from two lists sorted by (expected end, slot), ``order`` and
    ``recent`` (later slots), walked as one; a slot that ended since (``slot_alive``)
    or sits on a node outside the request's model set (``eligible``) is skipped. The
    state is the fleet's (``free``, ``cpu``, ``memory``, never written); a node the
    walk releases work on is copied into the ``scratch_*`` arrays first (``copied``
    marks it, all False on entry and again on return).

    It fits (``locality``, :data:`LOCALITY_CODES`) on one node (a single pod, or a
    gang kept on a node), in the fleet (``any``: the rooms of all nodes), or in one
    domain of ``domain`` (switch or block). ``room`` (zeros) is left holding each of
    ``eligible_nodes``' room in pods at the end (gangs), ``sums`` (zeros, one per
    domain) the domains'.
    """
    if pods > 1 and locality != 1:
        for i in range(eligible_nodes.shape[0]):
            n = eligible_nodes[i]
            room[n] = _reserve_room(free, cpu, memory, n, pods, need_cpu, need_memory, share,
                                    count)  # fmt: skip
            sums[domain[n]] += room[n]
    total = 0
    for i in range(eligible_nodes.shape[0]):
        total += room[eligible_nodes[i]]
    touched = np.empty(free.shape[0], dtype=np.int64)
    n_touched = 0
    found_slot, found_node = -1, -1
    a, b = 0, 0
    while a < order.shape[0] or b < recent.shape[0]:
        if b >= recent.shape[0] or (
            a < order.shape[0] and slot_end[order[a]] <= slot_end[recent[b]]
        ):
            s = order[a]
            a += 1
        else:
            s = recent[b]
            b += 1
        n = slot_node[s]
        if not slot_alive[s] or not eligible[n]:
            continue
        if not copied[n]:
            copied[n] = True
            touched[n_touched] = n
            n_touched += 1
            scratch_cpu[n] = cpu[n]
            scratch_memory[n] = memory[n]
            for g in range(free.shape[1]):
                scratch_free[n, g] = free[n, g]
        held = False
        for g in range(free.shape[1]):
            if slot_gpus[s, g]:
                scratch_free[n, g] += slot_units[s]
                held = True
        if held:  # (a compaction move may have repacked n)
            for g in range(free.shape[1]):
                if scratch_free[n, g] > _U:
                    scratch_free[n, g] = _U
        scratch_cpu[n] += slot_cpu[s]
        scratch_memory[n] += slot_memory[s]
        got = _reserve_room(scratch_free, scratch_cpu, scratch_memory, n, pods, need_cpu,
                            need_memory, share, count)  # fmt: skip
        if locality == 1:
            if got >= pods:
                found_slot, found_node = s, n
                break
        elif locality == 0:
            total += got - room[n]
            room[n] = got
            if total >= pods:
                found_slot, found_node = s, n
                break
        else:
            sums[domain[n]] += got - room[n]
            room[n] = got
            if sums[domain[n]] >= pods:
                found_slot, found_node = s, n
                break
    for i in range(n_touched):
        copied[touched[i]] = False
    return found_slot, found_node
