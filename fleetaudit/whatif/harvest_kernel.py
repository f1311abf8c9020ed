"""The compiled event loop of the harvesting replay (:mod:`fleetaudit.whatif.harvest`).

Every function here is compiled by numba (``cache=True``: once per machine,
about a minute, then loaded from ``__pycache__`` in about a second; where the
package folder is read-only, from the user's cache folder: :mod:`fleetaudit.core.jitcache`;
an install from a wheel loads the cache compiled when the wheel was built). The
replay's state lives in two numba structrefs of arrays and typed lists,
:class:`Static` (what the record fixes) and :class:`State` (what the replay
changes), built by :func:`new_static` and :func:`new_state` from the field
dicts that :mod:`fleetaudit.whatif.harvest` prepares; that module also turns the
outcome back into frames. The model is the one documented in
:mod:`fleetaudit.whatif.harvest`; this module only runs it, event for event as the
Python loop it replaced did.

Editing this file invalidates the cache: the next replay compiles again.
A structref is passed as one pointer; a named tuple of the same ~60 arrays
took three times as long to compile and was copied at every call.

Units: times in µs since the epoch, GPUs in SHARE_UNITS micro-GPUs split into
a whole part and a fractional part (a *share*), CPUs and memory in micro-units.
A node's shares are counted per distinct share size (``Static.fv``, largest
first), so a node's multiset of shares is one row of a count matrix and its
first-fit-decreasing packing (:func:`_ffd`) needs no sorting.

Event order at one instant: what frees capacity (finishes, high-priority ends,
sleeps), then wake completions, then what needs capacity (high-priority starts,
wakes); arrivals last. Ties keep the order events were created in (``seq``).
"""

from __future__ import annotations

import os
from pathlib import Path

from fleetaudit.core.jitcache import ENV, choose_cache_dir, portable_cpu

# Before numba reads its configuration: a read-only package folder caches elsewhere
# (a wheel's cache compiled at build time is copied there), and the replay compiles
# for the architecture's generic CPU, so that such a cache loads on any machine.
CACHE_DIR = choose_cache_dir(Path(__file__))
portable_cpu()

import numpy as np  # noqa: E402
from numba import njit, types  # noqa: E402
from numba.core import config as numba_config  # noqa: E402
from numba.experimental import structref  # noqa: E402
from numba.typed import Dict, List  # noqa: E402

if (os.environ.get(ENV) or "") != (numba_config.CACHE_DIR or ""):
    numba_config.reload_config()  # numba was imported before the folder was chosen

from fleetaudit.model.occupancy import SHARE_UNITS  # noqa: E402
from fleetaudit.whatif import victims  # noqa: E402

U = SHARE_UNITS
BIG = np.iinfo(np.int64).max  # "never" for an end time
SCAN_BUDGET = 64  # valid nodes one free-GPU level is searched for a fit
LEVELS = 17  # free-GPU levels of the best-fit index: 0..15, and 16 for 16 or more
QUARTERS = 4  # share-room levels of the share index, in quarter GPUs

FINISH, HP_END, SLEEP, WAKE_DONE, HP_START, WAKE = range(6)
PREEMPT, WAKE_REASON = 0, 1

# fixed-allocation states
ABSENT, AWAKE, ASLEEP, WAKING, GONE = range(5)

# counters (State.cnt)
C_HIGH, C_ALLOC, C_STANDBY, C_HARVEST, C_LP = range(5)  # GPU-µs integrals
C_OVER, C_BUDGET, C_FORCED, C_EVICT, C_PREEMPT = range(5, 10)
C_SEQ, C_E, C_A, C_WAITING = range(10, 14)
# entries of State.freed, State.dirty and State.at_start
C_FREED, C_DIRTY, C_AT_START = range(14, 17)
C_OUT = 17  # GPU-µs out of service (health intervals) that no work holds
N_COUNTERS = 18

# victim policies
SPOTGPU, NEWEST, SMALLEST, RANDOM = range(4)  # the order of harvest.POLICIES

ROWS = types.int64[:, ::1]
SET = types.DictType(types.int64, types.int64)
INTS = types.ListType(types.int64)
FLOATS = types.ListType(types.float64)
LP_ON = types.ListType(types.DictType(types.int64, types.int64))
SETS = LP_ON


class HeapsType(types.StructRef):
    """numba type of :class:`Heaps`."""

    def preprocess_fields(self, fields):  # type: ignore[no-untyped-def]
        return tuple((name, types.unliteral(t)) for name, t in fields)


class Heaps(structref.StructRefProxy):
    """A family of heaps whose rows share one array (see :func:`hpush`)."""


HEAPS_FIELDS = (
    # the rows of every heap: heap k's are rows[off[k]:off[k] + cap[k]]
    ("rows", types.int64[:, ::1]),
    ("off", types.int64[::1]),
    ("cap", types.int64[::1]),
    # rows handed out so far
    ("used", types.int64),
)
HEAPS = HeapsType([(n, t) for n, t in HEAPS_FIELDS])
structref.register(HeapsType)
structref.define_boxing(HeapsType, Heaps)


class StaticType(types.StructRef):
    """numba type of :class:`Static`."""

    def preprocess_fields(self, fields):  # type: ignore[no-untyped-def]
        return tuple((name, types.unliteral(t)) for name, t in fields)


class Static(structref.StructRefProxy):
    """What the record fixes: nodes, fixed allocations, jobs, recorded events."""


STATIC_FIELDS = (
    # nodes, sorted by node_id: their GPU model
    ("model", types.int64[::1]),
    ("gpus", types.int64[::1]),
    ("cpus", types.int64[::1]),
    ("mem", types.int64[::1]),
    ("healthy", types.boolean[::1]),
    # (model, switch domain) of the node
    ("group", types.int64[::1]),
    # healthy nodes of group g: group_nodes[group_off[g]:group_off[g + 1]]
    ("group_off", types.int64[::1]),
    ("group_nodes", types.int64[::1]),
    # groups of model m: model_groups[model_off[m]:model_off[m + 1]]
    ("model_off", types.int64[::1]),
    ("model_groups", types.int64[::1]),
    # distinct share sizes, largest first
    ("fv", types.int64[::1]),
    # fixed allocations (high priority, and low priority without GPUs)
    ("f_node", types.int64[::1]),
    ("f_whole", types.int64[::1]),
    # index of its share size in fv, -1: none
    ("f_fi", types.int64[::1]),
    ("f_cpu", types.int64[::1]),
    ("f_mem", types.int64[::1]),
    ("f_high", types.boolean[::1]),
    # GPUs out of service (a health interval), not work: f_whole of them, no share
    ("f_out", types.boolean[::1]),
    # recorded events, sorted by (t, order, seq)
    ("ev_t", types.int64[::1]),
    ("ev_o", types.int64[::1]),
    ("ev_seq", types.int64[::1]),
    ("ev_kind", types.int64[::1]),
    ("ev_item", types.int64[::1]),
    # the fixed allocation of each wake
    ("wake_item", types.int64[::1]),
    # µs, per wake
    ("delays", types.int64[::1]),
    # jobs, sorted by (arrival, job_id)
    ("j_arrival", types.int64[::1]),
    # float µs, inf: open-ended
    ("j_need", types.float64[::1]),
    # pods of job j: [j_pod_off[j], j_pod_off[j + 1]), largest first
    ("j_pod_off", types.int64[::1]),
    ("j_gpus_u", types.int64[::1]),
    ("j_model", types.int64[::1]),
    # several pods kept in one switch domain
    ("j_local", types.boolean[::1]),
    # µs, 0: no checkpoints
    ("j_ckpt", types.int64[::1]),
    ("j_klass", types.int64[::1]),
    # pods
    ("p_whole", types.int64[::1]),
    ("p_frac", types.int64[::1]),
    ("p_fi", types.int64[::1]),
    ("p_cpu", types.int64[::1]),
    ("p_mem", types.int64[::1]),
    # recorded node
    ("p_rec", types.int64[::1]),
    # jobs arriving in the window, in order
    ("arrivals", types.int64[::1]),
    # classes of jobs (same model, locality and pods)
    ("c_model", types.int64[::1]),
    ("c_gang", types.boolean[::1]),
    # free GPUs a node (a gang: a domain) must have
    ("c_need", types.int64[::1]),
    # the window
    ("lo", types.int64),
    ("hi", types.int64),
    # µs after a wake
    ("kill", types.int64),
    # SPOTGPU, NEWEST, SMALLEST or RANDOM
    ("policy", types.int64),
)
STATIC_TYPE = StaticType([(n, t) for n, t in STATIC_FIELDS])
structref.register(StaticType)
structref.define_boxing(StaticType, Static)


@njit(cache=True)
def new_static(  # type: ignore[no-untyped-def]
    model,
    gpus,
    cpus,
    mem,
    healthy,
    group,
    group_off,
    group_nodes,
    model_off,
    model_groups,
    fv,
    f_node,
    f_whole,
    f_fi,
    f_cpu,
    f_mem,
    f_high,
    f_out,
    ev_t,
    ev_o,
    ev_seq,
    ev_kind,
    ev_item,
    wake_item,
    delays,
    j_arrival,
    j_need,
    j_pod_off,
    j_gpus_u,
    j_model,
    j_local,
    j_ckpt,
    j_klass,
    p_whole,
    p_frac,
    p_fi,
    p_cpu,
    p_mem,
    p_rec,
    arrivals,
    c_model,
    c_gang,
    c_need,
    lo,
    hi,
    kill,
    policy,
):
    """A :class:`Static` of the given fields (by keyword, in any order)."""
    x = structref.new(STATIC_TYPE)
    x.model = model
    x.gpus = gpus
    x.cpus = cpus
    x.mem = mem
    x.healthy = healthy
    x.group = group
    x.group_off = group_off
    x.group_nodes = group_nodes
    x.model_off = model_off
    x.model_groups = model_groups
    x.fv = fv
    x.f_node = f_node
    x.f_whole = f_whole
    x.f_fi = f_fi
    x.f_cpu = f_cpu
    x.f_mem = f_mem
    x.f_high = f_high
    x.f_out = f_out
    x.ev_t = ev_t
    x.ev_o = ev_o
    x.ev_seq = ev_seq
    x.ev_kind = ev_kind
    x.ev_item = ev_item
    x.wake_item = wake_item
    x.delays = delays
    x.j_arrival = j_arrival
    x.j_need = j_need
    x.j_pod_off = j_pod_off
    x.j_gpus_u = j_gpus_u
    x.j_model = j_model
    x.j_local = j_local
    x.j_ckpt = j_ckpt
    x.j_klass = j_klass
    x.p_whole = p_whole
    x.p_frac = p_frac
    x.p_fi = p_fi
    x.p_cpu = p_cpu
    x.p_mem = p_mem
    x.p_rec = p_rec
    x.arrivals = arrivals
    x.c_model = c_model
    x.c_gang = c_gang
    x.c_need = c_need
    x.lo = lo
    x.hi = hi
    x.kill = kill
    x.policy = policy
    return x


class StateType(types.StructRef):
    """numba type of :class:`State`."""

    def preprocess_fields(self, fields):  # type: ignore[no-untyped-def]
        return tuple((name, types.unliteral(t)) for name, t in fields)


class State(structref.StructRefProxy):
    """What the replay changes (built by :func:`fleetaudit.whatif.harvest._state`)."""


STATE_FIELDS = (
    # capacity held by awake fixed work and running low-priority pods
    ("whole", types.int64[::1]),
    # share counts per node and size
    ("fr", types.int64[:, ::1]),
    # shares on the node
    ("fr_n", types.int64[::1]),
    ("cpu_used", types.int64[::1]),
    ("mem_used", types.int64[::1]),
    # GPUs held (whole + packed shares)
    ("occ", types.int64[::1]),
    # high-priority allocations present (asleep or not)
    ("hp_whole", types.int64[::1]),
    ("hp_fr", types.int64[:, ::1]),
    ("hp_fr_n", types.int64[::1]),
    # the asleep (lent) ones
    ("lent_whole", types.int64[::1]),
    ("lent_fr", types.int64[:, ::1]),
    ("lent_fr_n", types.int64[::1]),
    ("hp_occ", types.int64[::1]),
    ("lent", types.int64[::1]),
    # GPUs out of service on the node (held by f_out items; in whole and occ too)
    ("out", types.int64[::1]),
    # pending wakes on the node
    ("locked", types.int64[::1]),
    # per node: job -> its pods there (insertion ordered), and how many jobs
    ("lp_on", LP_ON),
    ("lp_n", types.int64[::1]),
    # free-capacity index: a node's entry is valid while its version holds
    ("free_ver", types.int64[::1]),
    ("bucket_of", types.int64[::1]),
    # per model x level: heap of (node, version)
    ("buckets", HEAPS),
    ("bucket_n", types.int64[::1]),
    ("share_ver", types.int64[::1]),
    # per model x quarter: heap of (free GPUs, node, version)
    ("share_heaps", HEAPS),
    ("share_n", types.int64[::1]),
    ("group_free", types.int64[::1]),
    # accounting: a node's figures are integrated up to here
    ("last_t", types.int64[::1]),
    # fixed allocations: ABSENT .. GONE
    ("f_state", types.int64[::1]),
    ("f_seen_start", types.int64[::1]),
    ("f_seen_end", types.int64[::1]),
    # lending row of an asleep allocation, -1: none
    ("lent_open", types.int64[::1]),
    # jobs: float µs of work kept
    ("j_done", types.float64[::1]),
    ("j_run_start", types.int64[::1]),
    ("j_version", types.int64[::1]),
    ("j_finish", types.int64[::1]),
    ("j_runs", types.int64[::1]),
    ("j_preempted", types.int64[::1]),
    ("j_resumed", types.boolean[::1]),
    # first segment of the current run, -1: not running
    ("j_seg", types.int64[::1]),
    ("p_placed", types.int64[::1]),
    # per class: heap of (arrival, job)
    ("waiting", HEAPS),
    ("waiting_n", types.int64[::1]),
    # per model: the classes waiting
    ("waiting_by_model", SETS),
    # per class: -1 not known, 1 fits on no empty domain, 0 does
    ("never", types.int64[::1]),
    # nodes freed at this instant (the first cnt[C_FREED])
    ("freed", types.int64[::1]),
    ("freed_mark", types.boolean[::1]),
    # classes that took an evicted job at this instant (the first cnt[C_DIRTY])
    ("dirty", types.int64[::1]),
    ("dirty_mark", types.boolean[::1]),
    # one heap of scheduled events (t, order, seq, kind, item, version)
    ("heap", HEAPS),
    ("heap_n", types.int64[::1]),
    # recorded events at the window's start, replayed after the initial state
    ("at_start", INTS),
    # wakes pending their borrowers' eviction
    ("w_forced", types.boolean[::1]),
    # (start, count)
    ("w_victims", types.int64[:, ::1]),
    ("victim_store", INTS),
    # outputs: segments, one per pod and run
    ("seg_job", INTS),
    ("seg_node", INTS),
    ("seg_start", INTS),
    ("seg_end", INTS),
    ("seg_pod", INTS),
    # evictions
    ("v_job", INTS),
    ("v_t", INTS),
    ("v_reason", INTS),
    ("v_lost", FLOATS),
    ("v_forced", INTS),
    # sleeps as replayed
    ("l_item", INTS),
    ("l_start", INTS),
    ("l_end", INTS),
    # counters, indexed by C_*
    ("cnt", types.int64[::1]),
    # lost GPU-hours, one float
    ("lost", types.float64[::1]),
    # scratch rows: the bins of a share packing (:func:`_ffd`), a node's awake shares
    ("bins", types.int64[::1]),
    ("awake", types.int64[::1]),
)
STATE_TYPE = StateType([(n, t) for n, t in STATE_FIELDS])
structref.register(StateType)
structref.define_boxing(StateType, State)


@njit(cache=True)
def new_state(  # type: ignore[no-untyped-def]
    whole,
    fr,
    fr_n,
    cpu_used,
    mem_used,
    occ,
    hp_whole,
    hp_fr,
    hp_fr_n,
    lent_whole,
    lent_fr,
    lent_fr_n,
    hp_occ,
    lent,
    out,
    locked,
    lp_on,
    lp_n,
    free_ver,
    bucket_of,
    buckets,
    bucket_n,
    share_ver,
    share_heaps,
    share_n,
    group_free,
    last_t,
    f_state,
    f_seen_start,
    f_seen_end,
    lent_open,
    j_done,
    j_run_start,
    j_version,
    j_finish,
    j_runs,
    j_preempted,
    j_resumed,
    j_seg,
    p_placed,
    waiting,
    waiting_n,
    waiting_by_model,
    never,
    freed,
    freed_mark,
    dirty,
    dirty_mark,
    heap,
    heap_n,
    at_start,
    w_forced,
    w_victims,
    victim_store,
    seg_job,
    seg_node,
    seg_start,
    seg_end,
    seg_pod,
    v_job,
    v_t,
    v_reason,
    v_lost,
    v_forced,
    l_item,
    l_start,
    l_end,
    cnt,
    lost,
    bins,
    awake,
):
    """A :class:`State` of the given fields (by keyword, in any order)."""
    x = structref.new(STATE_TYPE)
    x.whole = whole
    x.fr = fr
    x.fr_n = fr_n
    x.cpu_used = cpu_used
    x.mem_used = mem_used
    x.occ = occ
    x.hp_whole = hp_whole
    x.hp_fr = hp_fr
    x.hp_fr_n = hp_fr_n
    x.lent_whole = lent_whole
    x.lent_fr = lent_fr
    x.lent_fr_n = lent_fr_n
    x.hp_occ = hp_occ
    x.lent = lent
    x.out = out
    x.locked = locked
    x.lp_on = lp_on
    x.lp_n = lp_n
    x.free_ver = free_ver
    x.bucket_of = bucket_of
    x.buckets = buckets
    x.bucket_n = bucket_n
    x.share_ver = share_ver
    x.share_heaps = share_heaps
    x.share_n = share_n
    x.group_free = group_free
    x.last_t = last_t
    x.f_state = f_state
    x.f_seen_start = f_seen_start
    x.f_seen_end = f_seen_end
    x.lent_open = lent_open
    x.j_done = j_done
    x.j_run_start = j_run_start
    x.j_version = j_version
    x.j_finish = j_finish
    x.j_runs = j_runs
    x.j_preempted = j_preempted
    x.j_resumed = j_resumed
    x.j_seg = j_seg
    x.p_placed = p_placed
    x.waiting = waiting
    x.waiting_n = waiting_n
    x.waiting_by_model = waiting_by_model
    x.never = never
    x.freed = freed
    x.freed_mark = freed_mark
    x.dirty = dirty
    x.dirty_mark = dirty_mark
    x.heap = heap
    x.heap_n = heap_n
    x.at_start = at_start
    x.w_forced = w_forced
    x.w_victims = w_victims
    x.victim_store = victim_store
    x.seg_job = seg_job
    x.seg_node = seg_node
    x.seg_start = seg_start
    x.seg_end = seg_end
    x.seg_pod = seg_pod
    x.v_job = v_job
    x.v_t = v_t
    x.v_reason = v_reason
    x.v_lost = v_lost
    x.v_forced = v_forced
    x.l_item = l_item
    x.l_start = l_start
    x.l_end = l_end
    x.cnt = cnt
    x.lost = lost
    x.bins = bins
    x.awake = awake
    return x


@njit(cache=True)
def new_containers(n_nodes: int, n_models: int, n_classes: int):  # type: ignore[no-untyped-def]
    """The typed lists of a fresh :class:`State`: lp_on, buckets, share_heaps,
    waiting, waiting_by_model, heap (every heap empty)."""
    lp_on = List.empty_list(SET)
    for _ in range(n_nodes):
        lp_on.append(Dict.empty(types.int64, types.int64))
    buckets = new_heaps(n_models * LEVELS, 2)
    share_heaps = new_heaps(n_models * QUARTERS, 3)
    waiting = new_heaps(n_classes, 2)
    waiting_by_model = List.empty_list(SET)
    for _ in range(n_models):
        waiting_by_model.append(Dict.empty(types.int64, types.int64))
    heap = new_heaps(1, 6)
    return lp_on, buckets, share_heaps, waiting, waiting_by_model, heap


@njit(cache=True)
def int_list():  # type: ignore[no-untyped-def]
    return List.empty_list(types.int64)


@njit(cache=True)
def float_list():  # type: ignore[no-untyped-def]
    return List.empty_list(types.float64)


# ------------------------------------------------------------------ heaps
# A family of heaps is a :class:`Heaps` (one 2-D int64 array of rows, one row
# an item, compared lexicographically; heap k owns a slice of it) and an array
# of their sizes. numba's heapq on typed lists pays a call per item access
# (~2 µs a push and a pop), and a typed list of arrays pays for reference
# counting at every access of an item; rows sliced from one array pay for
# neither. A heap that outgrows its slice moves to a new one at the end of the
# array (which doubles when full), keeping its rows in order. Items are
# distinct, so the order in which they leave a heap does not depend on its
# layout.


@njit(cache=True)
def new_heaps(count: int, width: int):  # type: ignore[no-untyped-def]
    """``count`` empty heaps of rows ``width`` wide."""
    x = structref.new(HEAPS)
    x.rows = np.empty((max(4 * count, 16), width), np.int64)
    x.off = np.zeros(count, np.int64)
    x.cap = np.zeros(count, np.int64)
    x.used = 0
    return x


@njit(cache=True)
def htop(heaps, k: int, c: int) -> int:  # type: ignore[no-untyped-def]
    """Column c of the smallest item of heap k (which is not empty)."""
    return heaps.rows[heaps.off[k], c]


@njit(cache=True)
def _less(a, i: int, j: int) -> bool:  # type: ignore[no-untyped-def]
    for c in range(a.shape[1]):
        x = a[i, c]
        y = a[j, c]
        if x != y:
            return x < y
    return False


@njit(cache=True)
def _swap(a, i: int, j: int) -> None:  # type: ignore[no-untyped-def]
    for c in range(a.shape[1]):
        a[i, c], a[j, c] = a[j, c], a[i, c]


@njit(cache=True)
def _grow(heaps, k: int, s: int) -> None:  # type: ignore[no-untyped-def]
    """Move heap k (s items) to a slice of 2 s + 4 rows at the end of the rows."""
    cap = 2 * s + 4
    used = heaps.used
    rows = heaps.rows
    if used + cap > rows.shape[0]:
        bigger = np.empty((max(2 * rows.shape[0], used + cap), rows.shape[1]), np.int64)
        bigger[:used] = rows[:used]
        heaps.rows = bigger
        rows = bigger
    old = heaps.off[k]
    rows[used : used + s] = rows[old : old + s]
    heaps.off[k] = used
    heaps.cap[k] = cap
    heaps.used = used + cap


@njit(cache=True)
def hpush(heaps, sizes, k: int, item) -> None:  # type: ignore[no-untyped-def]
    """Push ``item`` (a tuple as wide as the heap's rows) on heap k."""
    s = sizes[k]
    if s == heaps.cap[k]:
        _grow(heaps, k, s)
    a = heaps.rows
    base = heaps.off[k]
    for c in range(a.shape[1]):
        a[base + s, c] = item[c]
    sizes[k] = s + 1
    while s > 0:
        parent = (s - 1) >> 1
        if not _less(a, base + s, base + parent):
            break
        _swap(a, base + s, base + parent)
        s = parent


@njit(cache=True)
def hpop(heaps, sizes, k: int) -> None:  # type: ignore[no-untyped-def]
    """Drop the smallest item of heap k (read it first: :func:`htop`)."""
    s = sizes[k] - 1
    sizes[k] = s
    if s == 0:
        return
    a = heaps.rows
    base = heaps.off[k]
    for c in range(a.shape[1]):
        a[base, c] = a[base + s, c]
    pos = 0
    while True:
        child = 2 * pos + 1
        if child >= s:
            break
        if child + 1 < s and _less(a, base + child + 1, base + child):
            child += 1
        if not _less(a, base + child, base + pos):
            break
        _swap(a, base + child, base + pos)
        pos = child


# ------------------------------------------------------------------ share packing


@njit(cache=True)
def _ffd(row, fv, add: int, bins):  # type: ignore[no-untyped-def]
    """GPUs the shares of one count row fill, first-fit-decreasing, with one more
    share of size index ``add`` (-1: none); and the smallest fill. ``bins``: scratch
    space for the fills (the State's, so that a packing allocates nothing; a larger
    one is made where it is too short)."""
    total = 0
    for i in range(fv.shape[0]):
        total += row[i]
    if add >= 0:
        total += 1
    if total == 0:
        return 0, U
    if bins.shape[0] < total:
        bins = np.empty(total, np.int64)
    nb = 0
    for i in range(fv.shape[0]):
        k = row[i] + (1 if i == add else 0)
        size = fv[i]
        for _ in range(k):
            placed = False
            for b in range(nb):
                if bins[b] + size <= U:
                    bins[b] += size
                    placed = True
                    break
            if not placed:
                bins[nb] = size
                nb += 1
    smallest = U
    for b in range(nb):
        if bins[b] < smallest:
            smallest = bins[b]
    return nb, smallest


@njit(cache=True)
def _packed(row, fv, bins) -> int:  # type: ignore[no-untyped-def]
    return _ffd(row, fv, -1, bins)[0]


# ------------------------------------------------------------------ free-capacity index


@njit(cache=True)
def _push(S, X, n: int) -> None:  # type: ignore[no-untyped-def]
    """Index node n under its free GPUs (a node keeps its entry while they stay)."""
    if not S.healthy[n] or X.locked[n]:
        return
    free = S.gpus[n] - X.occ[n]
    level = (free if free < 16 else 16) if free >= 0 else -1
    if level == X.bucket_of[n]:
        return
    X.bucket_of[n] = level
    X.free_ver[n] += 1
    if level >= 0:
        hpush(X.buckets, X.bucket_n, S.model[n] * LEVELS + level, (n, X.free_ver[n]))


@njit(cache=True)
def _free(S, X, n: int) -> int:  # type: ignore[no-untyped-def]
    if S.healthy[n] and not X.locked[n]:
        return S.gpus[n] - X.occ[n]
    return 0


@njit(cache=True)
def _share_push(S, X, n: int) -> None:  # type: ignore[no-untyped-def]
    """Index node n under the room left on its emptiest shared GPU, in quarter GPUs."""
    X.share_ver[n] += 1
    if not X.fr_n[n] or not S.healthy[n] or X.locked[n]:
        return
    room = U - _ffd(X.fr[n], S.fv, -1, X.bins)[1]
    q = room * 4 // U
    if q > 0:
        hpush(
            X.share_heaps,
            X.share_n,
            S.model[n] * QUARTERS + q,
            (S.gpus[n] - X.occ[n], n, X.share_ver[n]),
        )


# ------------------------------------------------------------------ accounting


@njit(cache=True)
def _account(S, X, n: int, t: int) -> None:  # type: ignore[no-untyped-def]
    """Integrate node n's figures from its last change up to t."""
    # every field is read here, where the call begins, and the call has one exit: the
    # reference counts of the state and its arrays then pair up and numba drops them
    healthy = S.healthy[n]
    g = S.gpus[n]
    last_t = X.last_t
    cnt = X.cnt
    lent = X.lent[n]
    out = X.out[n]
    used = X.occ[n] - out  # the work's GPUs: those out of service are whole, no share
    high = X.hp_occ[n]
    last = last_t[n]
    if t > last:
        last_t[n] = t
        if healthy:
            dt = t - last
            cnt[C_HIGH] += (high if high < g else g) * dt
            alloc = used
            if lent:
                alloc = used + lent
                cnt[C_ALLOC] += (alloc if alloc < g else g) * dt
                cnt[C_STANDBY] += lent * dt
                harvest = used - (g - lent)
                if harvest > lent:
                    harvest = lent
                if harvest > 0:
                    cnt[C_HARVEST] += harvest * dt
            else:
                cnt[C_ALLOC] += (used if used < g else g) * dt
            if out:
                held = alloc + out
                cnt[C_OUT] += ((held if held < g else g) - (alloc if alloc < g else g)) * dt


@njit(cache=True)
def _lent_gpus(S, X, n: int) -> int:  # type: ignore[no-untyped-def]
    """GPUs lent on n: the high-priority occupancy minus that of the awake ones."""
    if not X.lent_whole[n] and not X.lent_fr_n[n]:
        return 0
    awake = X.awake
    hp_fr, lent_fr = X.hp_fr, X.lent_fr
    for k in range(awake.shape[0]):
        awake[k] = hp_fr[n, k] - lent_fr[n, k]
    gpus = X.hp_whole[n] - X.lent_whole[n] + _packed(awake, S.fv, X.bins)
    d = X.hp_occ[n] - gpus
    return d if d > 0 else 0


# ------------------------------------------------------------------ holding capacity


@njit(cache=True)
def _fits_shape(S, X, n: int, whole: int, fi: int, cpu: int, mem: int) -> bool:  # type: ignore[no-untyped-def]
    """A holder of this shape (share size index fi, -1: none) fits on node n as it is now."""
    # every field is read here, where the call begins: the reference counts of the
    # state and its arrays then pair up and are dropped by numba (none per call)
    cpus, mems, gpus, fv = S.cpus[n], S.mem[n], S.gpus[n], S.fv
    cpu_used, mem_used, held, occ = X.cpu_used[n], X.mem_used[n], X.whole[n], X.occ[n]
    fr, bins = X.fr, X.bins
    ok = cpu_used + cpu <= cpus and mem_used + mem <= mems
    if ok:
        if fi >= 0:
            occ = held + whole + _ffd(fr[n], fv, fi, bins)[0]
        else:
            occ = occ + whole
        ok = occ <= gpus
    return ok


@njit(cache=True)
def _fits(S, X, n: int, p: int) -> bool:  # type: ignore[no-untyped-def]
    """Pod p fits on node n as it is now."""
    return _fits_shape(S, X, n, S.p_whole[p], S.p_fi[p], S.p_cpu[p], S.p_mem[p])


@njit(cache=True)
def _fits_fixed(S, X, n: int, i: int) -> bool:  # type: ignore[no-untyped-def]
    """Fixed allocation i fits on node n as it is now."""
    return _fits_shape(S, X, n, S.f_whole[i], S.f_fi[i], S.f_cpu[i], S.f_mem[i])


@njit(cache=True)
def _gpu_us(dt: int, whole: int, frac: int) -> int:
    """GPU-µs of a pod of whole + frac / U GPUs held for dt µs, rounded down; exact in
    int64 (dt x frac alone passes 2^63 after 107 days)."""
    return dt * whole + (dt // U) * frac + (dt % U) * frac // U


@njit(cache=True)
def _changed(S, X, n: int, before: int, occ: int) -> None:  # type: ignore[no-untyped-def]
    """Node n (healthy, unlocked) went from occupancy ``before`` to ``occ``."""
    X.group_free[S.group[n]] += before - occ
    free = S.gpus[n] - occ
    level = (free if free < 16 else 16) if free >= 0 else -1
    if level != X.bucket_of[n]:
        X.bucket_of[n] = level
        X.free_ver[n] += 1
        if level >= 0:
            hpush(X.buckets, X.bucket_n, S.model[n] * LEVELS + level, (n, X.free_ver[n]))
    if X.fr_n[n] or X.share_ver[n]:
        _share_push(S, X, n)


@njit(cache=True)
def _hold(S, X, n: int, whole: int, fi: int, cpu: int, mem: int, sign: int, t: int) -> None:  # type: ignore[no-untyped-def]
    """Add (sign 1) or remove (sign -1) a holder's resources on node n at t."""
    if t > X.last_t[n]:
        _account(S, X, n, t)
    w = X.whole[n] + sign * whole
    X.whole[n] = w
    if fi >= 0:
        X.fr[n, fi] += sign
        X.fr_n[n] += sign
    occ = w + _packed(X.fr[n], S.fv, X.bins) if X.fr_n[n] else w
    X.cpu_used[n] += sign * cpu
    X.mem_used[n] += sign * mem
    before = X.occ[n]
    X.occ[n] = occ
    if S.healthy[n] and not X.locked[n]:
        _changed(S, X, n, before, occ)
    if sign < 0 and not X.freed_mark[n]:
        _mark_freed(X, n)


@njit(cache=True)
def _mark_freed(X, n: int) -> None:  # type: ignore[no-untyped-def]
    X.freed_mark[n] = True
    X.freed[X.cnt[C_FREED]] = n
    X.cnt[C_FREED] += 1


@njit(cache=True)
def _raw(S, X, n: int, p: int, sign: int) -> None:  # type: ignore[no-untyped-def]
    """Hold or let go of pod p on n tentatively: no accounting, no index."""
    X.whole[n] += sign * S.p_whole[p]
    fi = S.p_fi[p]
    if fi >= 0:
        X.fr[n, fi] += sign
        X.fr_n[n] += sign
    X.cpu_used[n] += sign * S.p_cpu[p]
    X.mem_used[n] += sign * S.p_mem[p]
    X.occ[n] = X.whole[n] + (_packed(X.fr[n], S.fv, X.bins) if X.fr_n[n] else 0)


@njit(cache=True)
def _lock(S, X, n: int) -> None:  # type: ignore[no-untyped-def]
    if S.healthy[n] and not X.locked[n]:
        X.group_free[S.group[n]] -= _free(S, X, n)
    X.locked[n] += 1
    X.free_ver[n] += 1  # drops its bucket entry
    X.bucket_of[n] = -1
    X.share_ver[n] += 1


@njit(cache=True)
def _unlock(S, X, n: int) -> None:  # type: ignore[no-untyped-def]
    X.locked[n] -= 1
    if S.healthy[n] and not X.locked[n]:
        X.group_free[S.group[n]] += _free(S, X, n)
        _push(S, X, n)
        _share_push(S, X, n)
        if not X.freed_mark[n]:
            _mark_freed(X, n)


@njit(cache=True)
def _hp_shape(S, X, n: int, i: int, sign: int, lent: bool) -> None:  # type: ignore[no-untyped-def]
    """Count fixed allocation i in (or out of) the node's high-priority or lent shape."""
    whole, fi = S.f_whole[i], S.f_fi[i]
    if lent:
        X.lent_whole[n] += sign * whole
        if fi >= 0:
            X.lent_fr[n, fi] += sign
            X.lent_fr_n[n] += sign
    else:
        X.hp_whole[n] += sign * whole
        if fi >= 0:
            X.hp_fr[n, fi] += sign
            X.hp_fr_n[n] += sign
    X.hp_occ[n] = X.hp_whole[n] + (_packed(X.hp_fr[n], S.fv, X.bins) if X.hp_fr_n[n] else 0)
    X.lent[n] = _lent_gpus(S, X, n) if X.lent_whole[n] or X.lent_fr_n[n] else 0


# ------------------------------------------------------------------ victims


_lost_since = njit(cache=True)(victims.since_checkpoint)


@njit(cache=True)
def _since_checkpoint(S, X, j: int, t: int) -> int:  # type: ignore[no-untyped-def]
    return _lost_since(t - X.j_run_start[j], S.j_ckpt[j])


@njit(cache=True)
def _before(a0: int, a1: int, a2: int, a3: int, b0: int, b1: int, b2: int, b3: int) -> bool:
    if a0 != b0:
        return a0 < b0
    if a1 != b1:
        return a1 < b1
    if a2 != b2:
        return a2 < b2
    return a3 < b3


@njit(cache=True)
def _victim_order(S, X, n: int, t: int, rng):  # type: ignore[no-untyped-def]
    """The low-priority jobs on n in the order the policy evicts them."""
    on = X.lp_on[n]
    m = len(on)
    cand = np.empty(m, np.int64)
    k = 0
    for j in on:
        cand[k] = j
        k += 1
    if S.policy == RANDOM:
        draws = rng.random(m)
        order = np.argsort(draws, kind="mergesort")
        out = np.empty(m, np.int64)
        # ties of equal draws go to the lower job index, as sorting (draw, job) pairs does
        for a in range(m):
            out[a] = cand[order[a]]
        for a in range(1, m):
            b = a
            while b > 0 and draws[order[b - 1]] == draws[order[b]] and out[b - 1] > out[b]:
                out[b - 1], out[b] = out[b], out[b - 1]
                b -= 1
        return out
    keys = np.empty((m, 4), np.int64)
    for a in range(m):
        j = cand[a]
        newest = -X.j_run_start[j]
        if S.policy == SPOTGPU:
            # GPUs x time since the checkpoint, exact in two 64-bit words (below
            # 2^35 micro-GPU units, 34,000 GPUs, and 2^51 µs, 71 years)
            g = S.j_gpus_u[j]
            since = _since_checkpoint(S, X, j, t)
            lo = g * (since & 0xFFFFFF)
            hi = g * (since >> 24) + (lo >> 24)
            keys[a, 0], keys[a, 1] = hi, lo & 0xFFFFFF
            keys[a, 2], keys[a, 3] = newest, j
        elif S.policy == SMALLEST:
            keys[a, 0], keys[a, 1], keys[a, 2], keys[a, 3] = S.j_gpus_u[j], newest, j, 0
        else:
            keys[a, 0], keys[a, 1], keys[a, 2], keys[a, 3] = newest, j, 0, 0
    # insertion sort: a node holds few jobs
    idx = np.arange(m)
    for a in range(1, m):
        b = a
        while b > 0:
            x, y = idx[b - 1], idx[b]
            if _before(keys[y, 0], keys[y, 1], keys[y, 2], keys[y, 3],
                       keys[x, 0], keys[x, 1], keys[x, 2], keys[x, 3]):  # fmt: skip
                idx[b - 1], idx[b] = y, x
                b -= 1
            else:
                break
    out = np.empty(m, np.int64)
    for a in range(m):
        out[a] = cand[idx[a]]
    return out


@njit(cache=True)
def _make_room_fixed(S, X, n: int, i: int, t: int, rng):  # type: ignore[no-untyped-def]
    """Victims (job indices) whose removal lets fixed allocation i fit on n."""
    none = np.empty(0, np.int64)
    if not X.lp_n[n] or _fits_fixed(S, X, n, i):
        return none
    order = _victim_order(S, X, n, t, rng)
    chosen = 0
    for a in range(order.shape[0]):
        j = order[a]
        for p in range(S.j_pod_off[j], S.j_pod_off[j + 1]):
            if X.p_placed[p] == n:
                _raw(S, X, n, p, -1)
        chosen += 1
        if _fits_fixed(S, X, n, i):
            break
    for a in range(chosen):
        j = order[a]
        for p in range(S.j_pod_off[j], S.j_pod_off[j + 1]):
            if X.p_placed[p] == n:
                _raw(S, X, n, p, 1)
    return order[:chosen].copy()


@njit(cache=True)
def _stop(S, X, j: int, t: int) -> None:  # type: ignore[no-untyped-def]
    seg = X.j_seg[j]
    for p in range(S.j_pod_off[j], S.j_pod_off[j + 1]):
        n = X.p_placed[p]
        _hold(S, X, n, S.p_whole[p], S.p_fi[p], S.p_cpu[p], S.p_mem[p], -1, t)
        on = X.lp_on[n]
        left = on[j] - 1
        if left:
            on[j] = left
        else:
            del on[j]
            X.lp_n[n] -= 1
        s = seg + (p - S.j_pod_off[j])
        dt = t - X.seg_start[s]
        X.seg_end[s] = t
        X.cnt[C_LP] += _gpu_us(dt, S.p_whole[p], S.p_frac[p])
        X.p_placed[p] = -1
    X.j_seg[j] = -1
    X.j_run_start[j] = -1
    X.j_version[j] += 1


@njit(cache=True)
def _wait(S, X, j: int) -> None:  # type: ignore[no-untyped-def]
    c = S.j_klass[j]
    if not X.waiting_n[c]:
        X.cnt[C_WAITING] += 1
    hpush(X.waiting, X.waiting_n, c, (S.j_arrival[j], j))
    X.waiting_by_model[S.j_model[j]][c] = 1


@njit(cache=True)
def _evict(S, X, j: int, t: int, reason: int, forced: bool) -> None:  # type: ignore[no-untyped-def]
    elapsed = t - X.j_run_start[j]
    lost = _since_checkpoint(S, X, j, t)
    X.j_done[j] += elapsed - lost
    X.lost[0] += lost / 1e6 * S.j_gpus_u[j] / U / 3600
    X.v_job.append(j)
    X.v_t.append(t)
    X.v_reason.append(reason)
    X.v_lost.append(lost / 1e6)
    X.v_forced.append(1 if forced else 0)
    X.j_preempted[j] += 1
    if reason == WAKE_REASON:
        X.cnt[C_EVICT] += 1
        if forced:
            X.cnt[C_FORCED] += 1
    else:
        X.cnt[C_PREEMPT] += 1
    _stop(S, X, j, t)
    _wait(S, X, j)
    # it was never tried on the rest of the fleet: the next retry searches everywhere
    c = S.j_klass[j]
    if not X.dirty_mark[c]:
        X.dirty_mark[c] = True
        X.dirty[X.cnt[C_DIRTY]] = c
        X.cnt[C_DIRTY] += 1


# ------------------------------------------------------------------ placement


@njit(cache=True)
def _best_share(S, X, m: int, p: int):  # type: ignore[no-untyped-def]
    """(free GPUs, node) of the best-fit node whose shared GPUs hold share pod p; node -1: none."""
    best_free, best_n = 0, -1
    first = -(-S.p_frac[p] * 4 // U)
    stash = np.empty((SCAN_BUDGET, 3), np.int64)
    # the index's fields once, not at every step of the scan (each read of a field
    # passed on to a call is a reference count up and down)
    heaps, share_n, share_ver = X.share_heaps, X.share_n, X.share_ver
    for q in range(first, QUARTERS):
        k = m * QUARTERS + q
        stashed = 0
        looked = 0
        while share_n[k] and looked < SCAN_BUDGET:
            free, n, ver = htop(heaps, k, 0), htop(heaps, k, 1), htop(heaps, k, 2)
            hpop(heaps, share_n, k)
            if ver != share_ver[n]:
                continue
            looked += 1
            stash[stashed, 0], stash[stashed, 1], stash[stashed, 2] = free, n, ver
            stashed += 1
            if _fits(S, X, n, p):
                if best_n < 0 or free < best_free or (free == best_free and n < best_n):
                    best_free, best_n = free, n
                looked = -1
                break
        if looked >= SCAN_BUDGET:
            X.cnt[C_BUDGET] += 1
        for r in range(stashed):
            hpush(heaps, share_n, k, (stash[r, 0], stash[r, 1], stash[r, 2]))
    return best_free, best_n


@njit(cache=True)
def _best_node(S, X, m: int, p: int) -> int:  # type: ignore[no-untyped-def]
    """Best-fit node of model m for pod p: fewest free GPUs, then lowest index.

    Whole-GPU pods search the free-GPU levels from their size up. A pure share
    also looks at the nodes with that much room left on a GPU that shares
    already hold (the quarter-GPU room index), and takes the better of the two.
    """
    whole, frac = S.p_whole[p], S.p_frac[p]
    share_free, share_n = 0, -1
    if frac and not whole:
        share_free, share_n = _best_share(S, X, m, p)
    low = whole + (1 if frac else 0)
    top = 16 if share_n < 0 else min(share_free, 16)
    stash = np.empty((SCAN_BUDGET, 2), np.int64)
    buckets, bucket_n, free_ver = X.buckets, X.bucket_n, X.free_ver  # once (see _best_share)
    for f in range(min(low, 16), top + 1):
        k = m * LEVELS + f
        stashed = 0
        found = -1
        looked = 0
        while bucket_n[k] and looked < SCAN_BUDGET:
            n, ver = htop(buckets, k, 0), htop(buckets, k, 1)
            if ver != free_ver[n]:
                hpop(buckets, bucket_n, k)
                continue
            looked += 1
            if _fits(S, X, n, p):
                found = n
                break
            hpop(buckets, bucket_n, k)
            stash[stashed, 0], stash[stashed, 1] = n, ver
            stashed += 1
        if found < 0 and looked >= SCAN_BUDGET:
            X.cnt[C_BUDGET] += 1
        for r in range(stashed):
            hpush(buckets, bucket_n, k, (stash[r, 0], stash[r, 1]))
        if found >= 0:
            if share_n >= 0 and (share_free < f or (share_free == f and share_n < found)):
                return share_n
            return found
    return share_n


@njit(cache=True)
def _best_in(S, X, nodes, p: int) -> int:  # type: ignore[no-untyped-def]
    best, best_free = -1, 1 << 30
    for k in range(nodes.shape[0]):
        n = nodes[k]
        if X.locked[n] or not S.healthy[n]:
            continue
        free = S.gpus[n] - X.occ[n]
        if free < best_free and _fits(S, X, n, p):
            best, best_free = n, free
    return best


@njit(cache=True)
def _pods_nodes(S, X, j: int, m: int, nodes, mode: int, out) -> bool:  # type: ignore[no-untyped-def]
    """A node for every pod of job j into ``out``: best-fit in model m (mode 0) or
    among ``nodes`` (mode 1). Pods chosen so far are held tentatively so the next
    pods see them, then let go; the last pod needs no hold."""
    first, end = S.j_pod_off[j], S.j_pod_off[j + 1]
    last = end - first - 1
    placed = 0
    for k in range(end - first):
        p = first + k
        n = _best_node(S, X, m, p) if mode == 0 else _best_in(S, X, nodes, p)
        if n < 0:
            break
        if k < last:
            _raw(S, X, n, p, 1)
        out[k] = n
        placed += 1
    for k in range(min(placed, last)):
        _raw(S, X, out[k], first + k, -1)
    return placed == end - first


@njit(cache=True)
def _try_place(S, X, j: int, t: int, only, wide: bool) -> bool:  # type: ignore[no-untyped-def]
    """Place every pod of job j (all or nothing); unless ``wide``, only on ``only``
    (the freed nodes of the job's model, ascending)."""
    m = S.j_model[j]
    npods = S.j_pod_off[j + 1] - S.j_pod_off[j]
    out = np.empty(npods, np.int64)
    if npods > 1 and S.j_local[j]:
        need = S.j_gpus_u[j] // U
        if wide:
            cands = S.model_groups[S.model_off[m] : S.model_off[m + 1]]
        else:
            gs = np.empty(only.shape[0], np.int64)
            for k in range(only.shape[0]):
                gs[k] = S.group[only[k]]
            cands = np.unique(gs)
        keep = np.empty(cands.shape[0], np.int64)
        kk = 0
        for k in range(cands.shape[0]):
            g = cands[k]
            if X.group_free[g] >= need:
                keep[kk] = g
                kk += 1
        keep = keep[:kk]
        # by free GPUs, then group index (stable over ascending groups)
        frees = np.empty(kk, np.int64)
        for k in range(kk):
            frees[k] = X.group_free[keep[k]]
        order = np.argsort(frees, kind="mergesort")
        ok = False
        for k in range(kk):
            g = keep[order[k]]
            nodes = S.group_nodes[S.group_off[g] : S.group_off[g + 1]]
            if _pods_nodes(S, X, j, m, nodes, 1, out):
                ok = True
                break
        if not ok:
            return False
    else:
        if not _pods_nodes(S, X, j, m, only, 0 if wide else 1, out):
            return False
    _start(S, X, j, out, t)
    return True


@njit(cache=True)
def _start(S, X, j: int, nodes, t: int) -> None:  # type: ignore[no-untyped-def]
    first = S.j_pod_off[j]
    X.j_run_start[j] = t
    X.j_runs[j] += 1
    X.j_version[j] += 1
    X.j_seg[j] = len(X.seg_job)
    for k in range(nodes.shape[0]):
        p = first + k
        n = nodes[k]
        X.p_placed[p] = n
        _hold(S, X, n, S.p_whole[p], S.p_fi[p], S.p_cpu[p], S.p_mem[p], 1, t)
        on = X.lp_on[n]
        if j in on:
            on[j] += 1
        else:
            on[j] = 1
            X.lp_n[n] += 1
        X.seg_job.append(j)
        X.seg_node.append(n)
        X.seg_start.append(t)
        X.seg_end.append(-1)
        X.seg_pod.append(k)
    left = S.j_need[j] - X.j_done[j]
    if t + left < S.hi:
        X.cnt[C_SEQ] += 1
        hpush(X.heap, X.heap_n, 0, (int(t + left), 0, X.cnt[C_SEQ], FINISH, j, X.j_version[j]))


@njit(cache=True)
def _fits_bare(S, n: int, p: int) -> bool:  # type: ignore[no-untyped-def]
    return (
        S.p_whole[p] + (1 if S.p_frac[p] else 0) <= S.gpus[n]
        and S.p_cpu[p] <= S.cpus[n]
        and S.p_mem[p] <= S.mem[n]
    )


@njit(cache=True)
def _fits_empty(S, X, j: int) -> bool:  # type: ignore[no-untyped-def]
    """Job j fits somewhere on an empty fleet (memoised per class)."""
    c = S.j_klass[j]
    if X.never[c] < 0:
        m = S.j_model[j]
        first, end = S.j_pod_off[j], S.j_pod_off[j + 1]
        gang = end - first > 1 and S.j_local[j]
        ok = False
        for gi in range(S.model_off[m], S.model_off[m + 1]):
            g = S.model_groups[gi]
            nodes = S.group_nodes[S.group_off[g] : S.group_off[g + 1]]
            ok = True
            if gang:
                room = 0
                for k in range(nodes.shape[0]):
                    room += S.gpus[nodes[k]]
                ok = room * U >= S.j_gpus_u[j]
            if ok:
                for p in range(first, end):
                    some = False
                    for k in range(nodes.shape[0]):
                        if _fits_bare(S, nodes[k], p):
                            some = True
                            break
                    if not some:
                        ok = False
                        break
            if ok:
                break
        X.never[c] = 0 if ok else 1
    return X.never[c] == 0


# ------------------------------------------------------------------ queue


@njit(cache=True)
def _arrive(S, X, j: int, t: int) -> None:  # type: ignore[no-untyped-def]
    if not _fits_empty(S, X, j):
        return  # waits forever: unfinished
    c = S.j_klass[j]
    if X.waiting_n[c]:
        hpush(X.waiting, X.waiting_n, c, (S.j_arrival[j], j))
        return
    if not _try_place(S, X, j, t, np.empty(0, np.int64), True):
        _wait(S, X, j)


@njit(cache=True)
def _retry(S, X, t: int) -> None:  # type: ignore[no-untyped-def]
    """Start waiting jobs, in arrival order, where capacity freed at t.

    A waiting class failed everywhere at its last try and capacity grew since
    only on the nodes freed at t, so its head is tried on those alone; a class
    that just took an evicted job is searched fleet-wide.
    """
    n_models = S.model_off.shape[0] - 1
    freed = X.freed[: X.cnt[C_FREED]].copy()
    freed.sort()
    # the freed nodes of each model, ascending (the candidates of a narrow search),
    # and the most free GPUs a freed node (and a freed node's domain) has, per model:
    # a shape that needs more cannot start there.
    has = np.zeros(n_models, np.bool_)
    most = np.zeros(n_models, np.int64)
    most_group = np.zeros(n_models, np.int64)
    keep = np.empty(freed.shape[0], np.int64)
    kk = 0
    for k in range(freed.shape[0]):
        n = freed[k]
        if S.healthy[n] and not X.locked[n]:
            m = S.model[n]
            keep[kk] = n
            kk += 1
            has[m] = True
            free = S.gpus[n] - X.occ[n]
            if free > most[m]:
                most[m] = free
            free = X.group_free[S.group[n]]
            if free > most_group[m]:
                most_group[m] = free
    keep = keep[:kk]
    models = np.empty(kk, np.int64)
    for k in range(kk):
        models[k] = S.model[keep[k]]
    by_model = keep[np.argsort(models, kind="mergesort")]
    model_start = np.zeros(n_models + 1, np.int64)
    for k in range(kk):
        model_start[models[k] + 1] += 1
    for m in range(n_models):
        model_start[m + 1] += model_start[m]

    heads = new_heaps(1, 2)
    heads_n = np.zeros(1, np.int64)
    for m in range(n_models):
        if not has[m]:
            continue
        for c in X.waiting_by_model[m]:
            need = S.c_need[c]
            room = most_group[m] if S.c_gang[c] else most[m]
            if X.dirty_mark[c] or need <= room:
                hpush(heads, heads_n, 0, (htop(X.waiting, c, 0), c))
    for k in range(X.cnt[C_DIRTY]):
        c = X.dirty[k]
        if not X.waiting_n[c] or has[S.c_model[c]]:
            continue
        hpush(heads, heads_n, 0, (htop(X.waiting, c, 0), c))
    while heads_n[0]:
        c = htop(heads, 0, 1)
        hpop(heads, heads_n, 0)
        j = htop(X.waiting, c, 1)
        m = S.j_model[j]
        npods = S.j_pod_off[j + 1] - S.j_pod_off[j]
        wide = X.dirty_mark[c] or (npods > 1 and not S.j_local[j])
        only = by_model[model_start[m] : model_start[m + 1]]
        if _try_place(S, X, j, t, only, wide):
            hpop(X.waiting, X.waiting_n, c)
            if X.waiting_n[c]:
                hpush(heads, heads_n, 0, (htop(X.waiting, c, 0), c))
            else:
                X.cnt[C_WAITING] -= 1
                del X.waiting_by_model[m][c]
    _clear_dirty(X)


@njit(cache=True)
def _clear_dirty(X) -> None:  # type: ignore[no-untyped-def]
    for k in range(X.cnt[C_DIRTY]):
        X.dirty_mark[X.dirty[k]] = False
    X.cnt[C_DIRTY] = 0


@njit(cache=True)
def _clear_freed(X) -> None:  # type: ignore[no-untyped-def]
    for k in range(X.cnt[C_FREED]):
        X.freed_mark[X.freed[k]] = False
    X.cnt[C_FREED] = 0


@njit(cache=True)
def _resume(S, X, j: int) -> None:  # type: ignore[no-untyped-def]
    """A job running at the window's start stays on its recorded nodes if they hold it."""
    first, end = S.j_pod_off[j], S.j_pod_off[j + 1]
    ok = True
    for p in range(first, end):
        if not S.healthy[S.p_rec[p]]:
            ok = False
    added = 0
    if ok:
        for p in range(first, end):
            n = S.p_rec[p]
            if not _fits(S, X, n, p):
                ok = False
                break
            _raw(S, X, n, p, 1)
            added += 1
        for k in range(added):
            _raw(S, X, S.p_rec[first + k], first + k, -1)
    if ok:
        X.j_resumed[j] = True
        _start(S, X, j, S.p_rec[first:end].copy(), S.lo)
        # it began before the window: its run (and checkpoints) began at its start
        X.j_run_start[j] = S.j_arrival[j]
        X.j_done[j] = 0.0
        # its finish event was pushed from lo; move it to arrival + need
        X.j_version[j] += 1
        if S.j_arrival[j] + S.j_need[j] < S.hi:
            X.cnt[C_SEQ] += 1
            hpush(
                X.heap,
                X.heap_n,
                0,
                (int(S.j_arrival[j] + S.j_need[j]), 0, X.cnt[C_SEQ], FINISH, j, X.j_version[j]),
            )
    else:
        _wait(S, X, j)


# ------------------------------------------------------------------ events


@njit(cache=True)
def _close_lending(X, item: int, t: int) -> None:  # type: ignore[no-untyped-def]
    k = X.lent_open[item]
    if k >= 0:
        X.lent_open[item] = -1
        X.l_end[k] = t


@njit(cache=True)
def _wake_done(S, X, a: int, t: int) -> None:  # type: ignore[no-untyped-def]
    n = S.f_node[a]
    if not _fits_fixed(S, X, n, a):
        X.cnt[C_OVER] += 1
    _account(S, X, n, t)
    _hp_shape(S, X, n, a, -1, True)
    _hold(S, X, n, S.f_whole[a], S.f_fi[a], S.f_cpu[a], S.f_mem[a], 1, t)
    X.f_state[a] = AWAKE
    _close_lending(X, a, t)


@njit(cache=True)
def _handle(S, X, t: int, kind: int, item: int, version: int, initial: bool, rng) -> None:  # type: ignore[no-untyped-def]
    if kind == FINISH:
        j = item
        if version != X.j_version[j]:
            return
        X.j_done[j] = S.j_need[j]
        X.j_finish[j] = t
        _stop(S, X, j, t)
        X.j_done[j] = S.j_need[j]
    elif kind == HP_START:
        i = item
        n = S.f_node[i]
        if not initial and X.lp_n[n]:  # no low-priority work there: no victims
            for j in _make_room_fixed(S, X, n, i, t, rng):
                _evict(S, X, j, t, PREEMPT, False)
        if not S.f_out[i]:
            # the record's own oversubscription: GPUs out of service aside
            out = X.out[n]
            X.whole[n] -= out
            X.occ[n] -= out
            fits = _fits_fixed(S, X, n, i)
            X.whole[n] += out
            X.occ[n] += out
            if not fits:
                X.cnt[C_OVER] += 1
        _hold(S, X, n, S.f_whole[i], S.f_fi[i], S.f_cpu[i], S.f_mem[i], 1, t)
        if S.f_out[i]:
            X.out[n] += S.f_whole[i]  # after _hold's accounting up to t
        if S.f_high[i]:
            _hp_shape(S, X, n, i, 1, False)
        X.f_state[i] = AWAKE
        X.f_seen_start[i] = t
    elif kind == HP_END:
        i = item
        n = S.f_node[i]
        if X.f_state[i] == AWAKE:
            _hold(S, X, n, S.f_whole[i], S.f_fi[i], S.f_cpu[i], S.f_mem[i], -1, t)
            if S.f_out[i]:
                X.out[n] -= S.f_whole[i]
        else:  # asleep or waking: its resources were lent
            _account(S, X, n, t)
            _hp_shape(S, X, n, i, -1, True)
            _close_lending(X, i, t)
        if S.f_high[i]:
            _account(S, X, n, t)
            _hp_shape(S, X, n, i, -1, False)
        X.f_state[i] = GONE
        X.f_seen_end[i] = t
    elif kind == SLEEP:
        i = item
        if X.f_state[i] != AWAKE:
            return
        n = S.f_node[i]
        _account(S, X, n, t)
        _hp_shape(S, X, n, i, 1, True)
        _hold(S, X, n, S.f_whole[i], S.f_fi[i], S.f_cpu[i], S.f_mem[i], -1, t)
        X.f_state[i] = ASLEEP
        X.lent_open[i] = len(X.l_item)
        X.l_item.append(i)
        X.l_start.append(t)
        X.l_end.append(-1)
    elif kind == WAKE:
        wake = item
        a = S.wake_item[wake]
        if X.f_state[a] != ASLEEP:
            return
        n = S.f_node[a]
        victims = _make_room_fixed(S, X, n, a, t, rng)
        if not victims.shape[0]:
            _wake_done(S, X, a, t)
            return
        delay = S.delays[wake]
        forced = delay > S.kill
        if delay > S.kill:
            delay = S.kill
        if delay <= 0:
            for j in victims:
                _evict(S, X, j, t, WAKE_REASON, forced)
            _wake_done(S, X, a, t)
            return
        X.f_state[a] = WAKING
        _lock(S, X, n)
        X.w_forced[wake] = forced
        X.w_victims[wake, 0] = len(X.victim_store)
        X.w_victims[wake, 1] = victims.shape[0]
        for j in victims:
            X.victim_store.append(j)
        X.cnt[C_SEQ] += 1
        hpush(X.heap, X.heap_n, 0, (t + delay, 1, X.cnt[C_SEQ], WAKE_DONE, wake, 0))
    elif kind == WAKE_DONE:
        wake = item
        a = S.wake_item[wake]
        forced = X.w_forced[wake]
        n = S.f_node[a]
        start, count = X.w_victims[wake, 0], X.w_victims[wake, 1]
        for k in range(start, start + count):
            j = X.victim_store[k]
            if X.j_seg[j] >= 0 and _placed_on(S, X, j, n):  # still running there
                _evict(S, X, j, t, WAKE_REASON, forced)
        _unlock(S, X, n)
        if X.f_state[a] == WAKING:
            # what started on the node since (only high priority can) may need more room
            for j in _make_room_fixed(S, X, n, a, t, rng):
                _evict(S, X, j, t, WAKE_REASON, forced)
            _wake_done(S, X, a, t)


@njit(cache=True)
def _placed_on(S, X, j: int, n: int) -> bool:  # type: ignore[no-untyped-def]
    for p in range(S.j_pod_off[j], S.j_pod_off[j + 1]):
        if X.p_placed[p] == n:
            return True
    return False


# ------------------------------------------------------------------ the replay


@njit(cache=True)
def begin(S, X, early, rng) -> None:  # type: ignore[no-untyped-def]
    """The state at the window's start: fixed work first, then the jobs already running."""
    e = 0
    n_ev = S.ev_t.shape[0]
    while e < n_ev and S.ev_t[e] == S.lo:
        if S.ev_kind[e] == HP_START:
            _handle(S, X, S.lo, HP_START, S.ev_item[e], 0, True, rng)
        else:
            X.at_start.append(e)
            X.cnt[C_AT_START] += 1
        e += 1
    X.cnt[C_E] = e
    for k in range(early.shape[0]):
        _resume(S, X, early[k])
    _clear_freed(X)


@njit(cache=True)
def _room(rows, n: int):  # type: ignore[no-untyped-def]
    """``rows``, or a copy twice as long, so that row n exists."""
    if n < rows.shape[0]:
        return rows
    bigger = np.empty((2 * rows.shape[0], rows.shape[1]), np.int64)
    bigger[:n] = rows[:n]
    return bigger


@njit(cache=True)
def _recorded_row(S, e: int, batch, r: int) -> None:  # type: ignore[no-untyped-def]
    batch[r, 0], batch[r, 1], batch[r, 2] = S.ev_t[e], S.ev_o[e], S.ev_seq[e]
    batch[r, 3], batch[r, 4], batch[r, 5] = S.ev_kind[e], S.ev_item[e], 0


@njit(cache=True)
def _merge(batch, recorded: int, n: int, order) -> None:  # type: ignore[no-untyped-def]
    """``order``: rows [0, recorded) and [recorded, n) of batch (each in order) merged."""
    a, b = 0, recorded
    for k in range(n):
        if b >= n or (a < recorded and _less(batch, a, b)):
            order[k] = a
            a += 1
        else:
            order[k] = b
            b += 1


@njit(cache=True, nogil=True)
def run_until(S, X, stop: int, rng) -> int:  # type: ignore[no-untyped-def]
    """Replay every instant before ``stop`` (and before the window's end); return the
    next instant to replay (``S.hi`` or more: the window is done)."""
    n_ev = S.ev_t.shape[0]
    n_arr = S.arrivals.shape[0]
    # one instant's events, (t, order, seq, kind, item, version) a row, and their order
    batch = np.empty((64, 6), np.int64)
    order = np.empty(64, np.int64)
    while True:
        e, a = X.cnt[C_E], X.cnt[C_A]
        t = BIG
        if e < n_ev:
            t = S.ev_t[e]
        if X.heap_n[0] and htop(X.heap, 0, 0) < t:
            t = htop(X.heap, 0, 0)
        if a < n_arr and S.j_arrival[S.arrivals[a]] < t:
            t = S.j_arrival[S.arrivals[a]]
        if X.cnt[C_AT_START] and S.ev_t[X.at_start[0]] < t:
            t = S.ev_t[X.at_start[0]]
        if t >= S.hi or t >= stop:
            return t
        while True:
            # the batch: the recorded events at t, then those scheduled, merged in order
            nb = 0
            if X.cnt[C_AT_START]:
                for k in X.at_start:
                    batch = _room(batch, nb)
                    _recorded_row(S, k, batch, nb)
                    nb += 1
                X.at_start.clear()
                X.cnt[C_AT_START] = 0
            e = X.cnt[C_E]
            while e < n_ev and S.ev_t[e] == t:
                batch = _room(batch, nb)
                _recorded_row(S, e, batch, nb)
                nb += 1
                e += 1
            X.cnt[C_E] = e
            recorded = nb
            while X.heap_n[0] and htop(X.heap, 0, 0) == t:
                batch = _room(batch, nb)
                heap = X.heap
                r = heap.off[0]
                for c in range(6):
                    batch[nb, c] = heap.rows[r, c]
                nb += 1
                hpop(heap, X.heap_n, 0)
            if not nb:
                break
            if order.shape[0] < nb:
                order = np.empty(batch.shape[0], np.int64)
            if recorded and nb > recorded:
                _merge(batch, recorded, nb, order)
            else:
                for k in range(nb):
                    order[k] = k
            for k in range(nb):
                r = order[k]
                _handle(S, X, batch[r, 0], batch[r, 3], batch[r, 4], batch[r, 5], False, rng)
        if (X.cnt[C_FREED] or X.cnt[C_DIRTY]) and X.cnt[C_WAITING]:
            _retry(S, X, t)
        _clear_dirty(X)
        _clear_freed(X)
        a = X.cnt[C_A]
        while a < n_arr and S.j_arrival[S.arrivals[a]] == t:
            _arrive(S, X, S.arrivals[a], t)
            a += 1
        X.cnt[C_A] = a


@njit(cache=True)
def finish(S, X) -> None:  # type: ignore[no-untyped-def]
    """Close the books at the window's end."""
    hi = S.hi
    n_jobs = S.j_arrival.shape[0]
    for j in range(n_jobs):
        seg = X.j_seg[j]
        if seg < 0:
            continue
        X.j_done[j] += hi - X.j_run_start[j]
        first = S.j_pod_off[j]
        for p in range(first, S.j_pod_off[j + 1]):
            s = seg + (p - first)
            dt = hi - X.seg_start[s]
            X.seg_end[s] = hi
            X.cnt[C_LP] += _gpu_us(dt, S.p_whole[p], S.p_frac[p])
    for n in range(S.gpus.shape[0]):
        _account(S, X, n, hi)
    for i in range(X.lent_open.shape[0]):
        _close_lending(X, i, hi)
    for i in range(X.f_seen_start.shape[0]):
        if X.f_seen_start[i] >= 0 and X.f_seen_end[i] < 0:
            X.f_seen_end[i] = hi


@njit(cache=True)
def index_all(S, X) -> None:  # type: ignore[no-untyped-def]
    """Every healthy node empty: all its GPUs free and indexed under them."""
    for n in range(S.gpus.shape[0]):
        if S.healthy[n]:
            X.group_free[S.group[n]] += S.gpus[n]
            _push(S, X, n)


@njit(cache=True)
def int_array(values):  # type: ignore[no-untyped-def]
    """A typed list of ints as an array (numpy reads a typed list item by item)."""
    out = np.empty(len(values), np.int64)
    for k in range(len(values)):
        out[k] = values[k]
    return out


@njit(cache=True)
def float_array(values):  # type: ignore[no-untyped-def]
    out = np.empty(len(values), np.float64)
    for k in range(len(values)):
        out[k] = values[k]
    return out
