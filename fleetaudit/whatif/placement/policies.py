"""The placement engine's run: node choice under each policy, and the state changes.

Policies (ties always go to the lowest node index, nodes in node_id order):

- ``first-fit``: the lowest node index that fits;
- ``best-fit``: the node left with the least free GPU capacity, then the least
  free CPU (the FGD paper's best-fit baseline, without its score quantisation);
- ``random``: a uniformly drawn node among those that fit (seeded);
- ``fgd``: Fragmentation Gradient Descent (Weng et al., USENIX ATC'23): the
  node and GPU whose fragmentation grows least (see below);
- ``topology``: the ASI paper's packing: among the nodes that fit, those whose
  (switch domain, GPU model) group is already the most allocated, by share of
  its GPUs, then best-fit inside it; gangs then stay in few domains and the
  empty domains stay whole for later gangs.

A share pod goes to the node's tightest GPU that holds it (least share left,
then lowest index), as the FGD simulator does for every policy but FGD; a
whole-GPU pod takes the lowest-indexed fully free GPUs.

Speed. Node state is numpy arrays (nodes x GPUs for the shares); every pod's
feasibility and policy score is one vectorised pass over all nodes. FGD's
fragmentation increase of a node for a pod shape depends only on that node's
state, so it is cached per (pod shape, node) and recomputed only for the nodes
that changed since the shape was last scored; identical node states in a batch
are evaluated once.
"""

from __future__ import annotations

import numpy as np

from fleetaudit.core.options import PLACEMENT_POLICIES
from fleetaudit.whatif.placement.fleet import _U, _Fleet, _State
from fleetaudit.whatif.placement.workload import _DEDUP_AT, LOCALITIES, _fragmentation, _Workload

POLICIES = PLACEMENT_POLICIES
_CPU_KEY = np.int64(1) << np.int64(32)  # best-fit key = free GPU units x this + free CPU units
_CPU_MAX = int(_CPU_KEY) - 1
NO_DRAW = ("first-fit", "best-fit", "topology")  # policies that take the only node as it is
_COMPILED = ("first-fit", "best-fit")  # policies whose single-pod choice find_in_set makes
NONE_BLOCKED = np.zeros(0, dtype=bool)  # the compiled kernels' "no node is blocked"
_ROUND = 6  # decimals of a fragmentation delta (micro-GPUs) compared for ties


class _Run:
    def __init__(self, fleet: _Fleet, workload: _Workload, policy: str, seed: int) -> None:
        self.fleet, self.workload, self.policy = fleet, workload, policy
        self.state = _State(fleet)
        self.rng = np.random.default_rng([seed, 2])
        n = len(fleet.node_ids)
        self.shapes = workload.shapes
        self.frag_before: np.ndarray | None = None
        if policy == "fgd":
            self.frag_before = _fragmentation(
                self.shapes, self.state.free, self.state.cpu, fleet.model
            )
            self.delta = np.zeros((workload.keys, n))
            self.choice = np.zeros((workload.keys, n), dtype=np.int64)
            self.scored = np.zeros((workload.keys, n), dtype=np.int64)
        self.best_key = self.state.free_total * _CPU_KEY + np.minimum(self.state.cpu, _CPU_KEY - 1)
        gpuless = fleet.gpus == 0
        self.gpuless: np.ndarray | None = gpuless if gpuless.any() else None
        # per model set, its nodes (ascending): no other node can take its pods
        self.set_nodes = [np.flatnonzero(ok) for ok in workload.model_ok]
        # one request's sizes as Python ints (read once per pod placed or released)
        self._share, self._count = workload.share.tolist(), workload.count.tolist()
        self._cpu, self._memory = workload.cpu.tolist(), workload.memory.tolist()
        self.topology = policy == "topology"  # only it reads the groups' use
        # A single pod placed ``among`` a few nodes is checked and chosen on those
        # nodes only (the same node as over a whole-fleet mask; False: the mask, the
        # reference the replay's tests compare to).
        self.narrow = False
        # Nodes no pod may take now (a reservation held for another request), or None.
        self.blocked: np.ndarray | None = None
        # Preemptible work (see track_preemptible): per request whether it may be
        # evicted, and per node what such work holds; None: nothing is tracked.
        self.evictable: np.ndarray | None = None

    def track_preemptible(self, evictable: np.ndarray) -> None:
        """Track what the requests marked in ``evictable`` hold on each node, so that
        :meth:`fits_after_eviction` and :meth:`room_after_eviction` see a node as it
        would be with all of that work evicted."""
        st, n = self.state, len(self.fleet.node_ids)
        self.evictable = evictable
        self.lp_free = np.zeros_like(st.free)
        self.lp_cpu = np.zeros(n, dtype=np.int64)
        self.lp_memory = np.zeros(n, dtype=np.int64)
        self.lp_count = np.zeros(n, dtype=np.int64)  # evictable pods on the node
        self._pre_whole = st.whole.copy()
        self._pre_largest = st.largest.copy()
        self._pre_dirty: list[int] = []  # nodes changed since pre() last brought them up to date

    def pre(self) -> tuple[np.ndarray, np.ndarray]:
        """(fully free GPUs, largest free share) of every node were its evictable work
        evicted (needs :meth:`track_preemptible`; worked out for the changed nodes only)."""
        if self._pre_dirty:
            d = np.unique(np.array(self._pre_dirty, dtype=np.int64))
            self._pre_dirty = []
            after = self.state.free[d] + self.lp_free[d]
            self._pre_whole[d] = (after == _U).sum(axis=1)
            self._pre_largest[d] = after.max(axis=1)
        return self._pre_whole, self._pre_largest

    def resync(self) -> None:
        """Recompute every derived array after the state was set in bulk."""
        st = self.state
        st.free_total = st.free.sum(axis=1)
        st.whole = (st.free == _U).sum(axis=1)
        st.largest = st.free.max(axis=1) if st.free.shape[1] else np.zeros_like(st.free_total)
        st.version += 1
        self.best_key = st.free_total * _CPU_KEY + np.minimum(np.maximum(st.cpu, 0), _CPU_KEY - 1)
        if self.frag_before is not None:
            self.frag_before = _fragmentation(self.shapes, st.free, st.cpu, self.fleet.model)
        if self.evictable is not None:
            self._pre_dirty = list(range(len(self.fleet.node_ids)))

    # ---- node choice

    def _feasible(
        self, r: int, within: np.ndarray | None, among: np.ndarray | None = None
    ) -> np.ndarray:
        """The nodes that can take one pod of r (a mask), inside ``within`` (a mask);
        ``among`` (node indices): the caller knows no other node can."""
        w, st = self.workload, self.state
        if among is None:
            nodes = self.set_nodes[w.allowed[r]]
            if len(nodes) < len(self.fleet.node_ids):  # the model set's nodes alone
                among = nodes
        at: slice | np.ndarray = slice(None) if among is None else among
        ok = (
            w.model_ok[w.allowed[r], at] & (st.cpu[at] >= w.cpu[r]) & (st.memory[at] >= w.memory[r])
        )
        if w.count[r]:
            if w.share[r] < _U:
                ok &= st.largest[at] >= w.share[r]
            else:
                ok &= st.whole[at] >= w.count[r]
        if among is not None:
            full = np.zeros(len(self.fleet.node_ids), dtype=bool)
            full[among] = ok
            ok = full
        if within is not None:
            ok &= within
        if self.blocked is not None:
            ok &= ~self.blocked
        return ok

    def _choose(self, r: int, ok: np.ndarray) -> tuple[int, int]:
        """(node, share value of the GPU to use; -1 = the tightest/lowest) or (-1, -1).

        A pod without GPUs goes to a node without GPUs when one fits (GPU nodes are
        tainted against such work on real fleets), else wherever the policy says.
        """
        if self.gpuless is not None and not self.workload.count[r]:
            cpu_nodes = ok & self.gpuless
            if cpu_nodes.any():
                ok = cpu_nodes
        policy = self.policy
        if policy == "first-fit":
            n = int(ok.argmax())
            return (n, -1) if ok[n] else (-1, -1)
        if policy == "random":
            candidates = np.flatnonzero(ok)
            if not len(candidates):
                return -1, -1
            return int(candidates[self.rng.integers(len(candidates))]), -1
        if policy == "best-fit":
            n = int(np.where(ok, self.best_key, np.iinfo(np.int64).max).argmin())
            return (n, -1) if ok[n] else (-1, -1)
        if policy == "topology":
            if not ok.any():
                return -1, -1
            fill = self.state.group_used / np.maximum(self.fleet.group_gpus, 1)
            node_fill = np.where(ok, fill[self.fleet.group], -1.0)
            fullest = ok & (node_fill == node_fill.max())
            n = int(np.where(fullest, self.best_key, np.iinfo(np.int64).max).argmin())
            return n, -1
        return self._choose_fgd(r, ok)

    def fits(self, r: int, nodes: np.ndarray) -> np.ndarray:
        """Which of ``nodes`` (node indices) can take one pod of r now (a mask over them)."""
        w = self.workload
        return w.model_ok[w.allowed[r], nodes] & self._room_for_one(r, nodes)

    def _room_for_one(self, r: int, nodes: np.ndarray) -> np.ndarray:
        """Which of ``nodes`` have the CPUs, memory and GPUs of one pod of r, unreserved
        (their model aside)."""
        w, st = self.workload, self.state
        ok = (st.cpu[nodes] >= w.cpu[r]) & (st.memory[nodes] >= w.memory[r])
        if w.count[r]:
            if w.share[r] < _U:
                ok &= st.largest[nodes] >= w.share[r]
            else:
                ok &= st.whole[nodes] >= w.count[r]
        if self.blocked is not None:
            ok &= ~self.blocked[nodes]
        result: np.ndarray = ok
        return result

    def pre_at(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`pre` on ``nodes`` alone, worked out afresh (for a few nodes)."""
        after = self.state.free[nodes] + self.lp_free[nodes]
        return (after == _U).sum(axis=1), after.max(axis=1)

    def room_one(self, r: int, n: int, after_eviction: bool = False) -> int:
        """:meth:`room` of r on node n alone (a scalar computation)."""
        w, st = self.workload, self.state
        if not w.model_ok[w.allowed[r], n] or (self.blocked is not None and self.blocked[n]):
            return 0
        cpu, memory = int(st.cpu[n]), int(st.memory[n])
        row = st.free[n].tolist()
        if after_eviction:
            cpu, memory = cpu + int(self.lp_cpu[n]), memory + int(self.lp_memory[n])
            row = [a + b for a, b in zip(row, self.lp_free[n].tolist(), strict=True)]
        cap = int(w.pods[r])
        need_cpu, need_memory = int(w.cpu[r]), int(w.memory[r])
        if need_cpu > 0:
            cap = min(cap, cpu // need_cpu)
        elif cpu < need_cpu:
            return 0
        if need_memory > 0:
            cap = min(cap, memory // need_memory)
        elif memory < need_memory:
            return 0
        share, count = int(w.share[r]), int(w.count[r])
        if count:
            if share < _U:
                cap = min(cap, sum(v // share for v in row))
            else:
                cap = min(cap, row.count(_U) // count)
        return max(cap, 0)

    def find_in_set(self, r: int, best: bool = False, nodes: np.ndarray | None = None) -> int:
        """A node of r's model set (or of ``nodes``, ascending nodes of that set) that can
        take one pod of r now, or -1: the lowest-indexed one, or (``best``) the one
        :meth:`_choose` picks under best-fit. The same answer as :meth:`fits_in_set` with
        :meth:`_choose_in`, in one compiled pass (:mod:`fleetaudit.whatif.placement.fit_kernel`)
        that stops at the first fit where that is the answer. Not for a pod without GPUs
        on a fleet with GPU-less nodes (:meth:`_choose` prefers those)."""
        from fleetaudit.whatif.placement import fit_kernel

        w, st = self.workload, self.state
        return int(
            fit_kernel.choose(
                self.set_nodes[w.allowed[r]] if nodes is None else nodes,
                st.cpu, st.memory, st.largest, st.whole,
                NONE_BLOCKED if self.blocked is None else self.blocked, self.best_key,
                self._cpu[r], self._memory[r], self._share[r], self._count[r],
                fit_kernel.BEST if best else fit_kernel.FIRST,
            )
        )  # fmt: skip

    def fits_in_set(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        """(the nodes of r's model set, which of them can take one pod of r now): :meth:`fits`
        on the only nodes that can (without checking their model again)."""
        nodes = self.set_nodes[self.workload.allowed[r]]
        return nodes, self._room_for_one(r, nodes)

    def fits_after_eviction(self, r: int, nodes: np.ndarray | None = None) -> np.ndarray:
        """:meth:`fits` were every evictable pod evicted (a mask over ``nodes``,
        default all); needs :meth:`track_preemptible`."""
        w, st = self.workload, self.state
        at: slice | np.ndarray = slice(None) if nodes is None else nodes
        ok = (
            w.model_ok[w.allowed[r], at]
            & (st.cpu[at] + self.lp_cpu[at] >= w.cpu[r])
            & (st.memory[at] + self.lp_memory[at] >= w.memory[r])
        )
        if w.count[r]:
            pre_whole, pre_largest = self.pre()
            if w.share[r] < _U:
                ok &= pre_largest[at] >= w.share[r]
            else:
                ok &= pre_whole[at] >= w.count[r]
        if self.blocked is not None:
            ok &= ~self.blocked[at]
        return ok

    def _choose_in(self, r: int, nodes: np.ndarray, ok: np.ndarray) -> tuple[int, int]:
        """:meth:`_choose` on ``nodes`` (ascending node indices) where ``ok`` (a mask over
        them): the same node as :meth:`_choose` with that mask over the whole fleet."""
        idx = nodes[ok]
        if not len(idx):
            return -1, -1
        if self.gpuless is not None and not self.workload.count[r]:
            cpu_nodes = idx[self.gpuless[idx]]
            if len(cpu_nodes):
                idx = cpu_nodes
        policy = self.policy
        if policy == "first-fit":
            return int(idx[0]), -1
        if policy == "random":
            return int(idx[self.rng.integers(len(idx))]), -1
        if policy == "best-fit":
            return int(idx[self.best_key[idx].argmin()]), -1
        if policy == "topology":
            fill = self.state.group_used / np.maximum(self.fleet.group_gpus, 1)
            node_fill = fill[self.fleet.group[idx]]
            fullest = idx[node_fill == node_fill.max()]
            return int(fullest[self.best_key[fullest].argmin()]), -1
        full = np.zeros(len(self.fleet.node_ids), dtype=bool)
        full[idx] = True
        return self._choose_fgd(r, full)

    def _choose_fgd(self, r: int, ok: np.ndarray) -> tuple[int, int]:
        q = int(self.workload.key[r])
        stale = np.flatnonzero(ok & (self.scored[q] < self.state.version))
        if len(stale):
            delta, choice = self._score_fgd(r, stale)
            self.delta[q, stale] = delta
            self.choice[q, stale] = choice
            self.scored[q, stale] = self.state.version[stale]
        scores = np.where(ok, self.delta[q], np.inf)
        n = int(scores.argmin())
        if not ok[n]:
            return -1, -1
        return n, int(self.choice[q, n])

    def _score_fgd(self, r: int, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Fragmentation increase on each node, and the share value of the GPU chosen."""
        assert self.frag_before is not None
        w, st, model = self.workload, self.state, self.fleet.model
        free, cpu, models = st.free[nodes], st.cpu[nodes], model[nodes]
        inverse = None
        if len(nodes) >= _DEDUP_AT:
            # F is symmetric in a node's GPUs: sorted rows of equal states coincide.
            rows = np.column_stack([models, cpu, np.sort(free, axis=1)])
            rows, inverse = np.unique(rows, axis=0, return_inverse=True)
            inverse = inverse.reshape(-1)
            models, cpu, free = rows[:, 0], rows[:, 1], rows[:, 2:]
        share, count = int(w.share[r]), int(w.count[r])
        cpu_after = cpu - w.cpu[r]
        if count and share < _U:
            width = free.shape[1]
            after = np.repeat(free[:, None, :], width, axis=1)
            diagonal = np.arange(width)
            after[:, diagonal, diagonal] -= share
            frag = _fragmentation(
                self.shapes,
                after.reshape(-1, width),
                np.repeat(cpu_after, width),
                np.repeat(models, width),
            ).reshape(-1, width)
            frag = np.round(np.where(free >= share, frag, np.inf), _ROUND)
            best = frag.min(axis=1)
            # Among GPUs equally good, the tightest one keeps whole GPUs whole.
            pick = np.where(frag == best[:, None], free, np.iinfo(np.int64).max).argmin(axis=1)
            choice = free[np.arange(len(free)), pick]
        else:
            after = free
            if count:
                whole = free == _U
                after = np.where(whole & (np.cumsum(whole, axis=1) <= count), 0, free)
            best = _fragmentation(self.shapes, after, cpu_after, models)
            choice = np.full(len(free), -1, dtype=np.int64)
        if inverse is not None:
            best, choice = best[inverse], choice[inverse]
        return np.round(best - self.frag_before[nodes], _ROUND), choice

    # ---- state changes

    def _apply(self, r: int, n: int, value: int) -> list[int]:
        # Python's ints and lists: a node's few GPUs and one request's sizes, where
        # numpy's per-call cost is most of the work
        st = self.state
        share, count = self._share[r], self._count[r]
        row = st.free[n]
        values = row.tolist()
        if not count:
            used: list[int] = []
        elif share < _U:
            target = value if value >= 0 else min(v for v in values if v >= share)
            gpu = values.index(target)
            values[gpu] -= share
            row[gpu] = values[gpu]
            used = [gpu]
        else:
            used = [g for g, v in enumerate(values) if v == _U][:count]
            for g in used:
                row[g] = 0
                values[g] = 0
        cpu, memory = self._cpu[r], self._memory[r]
        st.cpu[n] -= cpu
        st.memory[n] -= memory
        if self.topology:
            st.group_used[self.fleet.group[n]] += share * count
        if self.evictable is not None and self.evictable[r]:
            for g in used:
                self.lp_free[n, g] += share
            self.lp_cpu[n] += cpu
            self.lp_memory[n] += memory
            self.lp_count[n] += 1
        self._changed(n, values)
        return used

    def _undo(self, r: int, n: int, used: list[int]) -> None:
        st = self.state
        row, share = st.free[n], self._share[r]
        for g in used:
            row[g] += share
        cpu, memory = self._cpu[r], self._memory[r]
        st.cpu[n] += cpu
        st.memory[n] += memory
        if self.topology:
            st.group_used[self.fleet.group[n]] -= share * self._count[r]
        if self.evictable is not None and self.evictable[r]:
            for g in used:
                self.lp_free[n, g] -= share
            self.lp_cpu[n] -= cpu
            self.lp_memory[n] -= memory
            self.lp_count[n] -= 1
        self._changed(n)

    def _changed(self, n: int, row: list[int] | None = None) -> None:
        """Node n's state changed: its derived values again (``row``: its free GPU units
        as a list, when the caller has them)."""
        st = self.state
        if row is None:
            row = st.free[n].tolist()  # a few GPUs: Python's sum and max beat numpy's calls
        total = sum(row)
        st.free_total[n] = total
        st.whole[n] = row.count(_U)
        st.largest[n] = max(row)
        st.version[n] += 1
        self.best_key[n] = (total << 32) + min(int(st.cpu[n]), _CPU_MAX)
        if self.frag_before is not None:
            self.frag_before[n] = _fragmentation(
                self.shapes, st.free[n : n + 1], st.cpu[n : n + 1], self.fleet.model[n : n + 1]
            )[0]
        if self.evictable is not None:
            self._pre_dirty.append(n)

    def place_on(self, r: int, n: int) -> list[tuple[int, int, list[int]]] | None:
        """:meth:`place` of a single pod on node n alone, for a policy that draws nothing
        (there it takes the one node as it is, or none)."""
        return [(0, n, self._apply(r, n, -1))] if self.fits_one(r, n) else None

    def fits_one(self, r: int, n: int) -> bool:
        """:meth:`fits` on node n alone (a scalar check)."""
        w, st = self.workload, self.state
        if not w.model_ok[w.allowed[r], n] or st.cpu[n] < w.cpu[r] or st.memory[n] < w.memory[r]:
            return False
        count = w.count[r]
        if count:
            share = w.share[r]
            if (st.largest[n] < share) if share < _U else (st.whole[n] < count):
                return False
        return self.blocked is None or not self.blocked[n]

    def room(
        self, r: int, nodes: np.ndarray | None = None, after_eviction: bool = False
    ) -> np.ndarray:
        """Pods of request r each node (of ``nodes``, default all) can still take, capped at
        the request's pod count.

        Exact: a pod placed on a node lowers its room by exactly one (it takes
        ``count`` whole GPUs, or one share of a GPU holding at least one, and its
        CPUs and memory), so a domain whose room reaches the pod count holds the
        whole gang wherever the policy puts each pod inside it.
        """
        w, st = self.workload, self.state
        k = int(w.pods[r])
        share, count = int(w.share[r]), int(w.count[r])
        if after_eviction:  # ``after_eviction``: as if every evictable pod were evicted
            ok = self.fits_after_eviction(r, nodes)
        else:
            # The nodes with room for one pod; the others have none (each bound
            # below would be 0 there), so the bounds are worked out on these only.
            ok = self.fits(r, np.arange(len(self.fleet.node_ids)) if nodes is None else nodes)
        some = np.flatnonzero(ok)
        on = some if nodes is None else nodes[some]
        cpu, memory, free = st.cpu[on], st.memory[on], st.free[on]
        if after_eviction:
            cpu, memory = cpu + self.lp_cpu[on], memory + self.lp_memory[on]
            free = free + self.lp_free[on]
        cap = np.full(len(some), k, dtype=np.int64)
        if w.cpu[r] > 0:
            cap = np.minimum(cap, cpu // w.cpu[r])
        if w.memory[r] > 0:
            cap = np.minimum(cap, memory // w.memory[r])
        if count:
            if share < _U:
                if share > 0:
                    cap = np.minimum(cap, (free // share).sum(axis=1))
            else:
                cap = np.minimum(cap, (free == _U).sum(axis=1) // count)
        room = np.zeros(len(ok), dtype=np.int64)
        room[some] = np.maximum(cap, 0)
        return room

    def gang_hosts(self, r: int) -> np.ndarray | None:
        """The nodes where the first pod of gang r may go: those in a switch domain (or,
        for locality ``node``, on a node) with room for every pod. None: anywhere
        (a single pod, or a gang of locality ``any`` that the fleet has room for)."""
        w = self.workload
        k = int(w.pods[r])
        if k <= 1:
            return None
        nodes = self.set_nodes[w.allowed[r]]  # no other node has room for r
        room = self.room(r, nodes)
        locality = LOCALITIES[int(w.locality[r])]
        n_nodes = len(self.fleet.node_ids)
        if locality == "any":  # it fits iff the fleet has room: fail before any draw
            return None if int(room.sum()) >= k else np.zeros(n_nodes, dtype=bool)
        if locality == "node":
            hosts = np.zeros(n_nodes, dtype=bool)
            hosts[nodes] = room >= k
            return hosts
        domain = self.fleet.block if locality == "block" else self.fleet.domain
        in_set = np.bincount(domain[nodes], weights=room, minlength=int(domain.max()) + 1)
        return (in_set >= k)[domain]

    def place(
        self, r: int, among: np.ndarray | None = None
    ) -> list[tuple[int, int, list[int]]] | None:
        """Place every pod of request r, or none: [(pod, node, GPUs)], or None.

        A gang kept in one switch domain (or node) goes to the domain that the
        policy's choice for its first pod picks among the domains with room for
        the whole gang; its other pods follow inside that domain. ``among``
        (node indices, for a single pod only): the caller knows that no other
        node can take it, so only these are checked.
        """
        w = self.workload
        if w.pods[r] == 1 and among is None:
            # a single pod: only its model set's nodes can take it (the same node as the
            # policy over a whole-fleet mask: _choose_in)
            if self.policy in _COMPILED and (self.gpuless is None or self._count[r]):
                n = self.find_in_set(r, best=self.policy == "best-fit")
                return None if n < 0 else [(0, n, self._apply(r, n, -1))]
            n, value = self._choose_in(r, *self.fits_in_set(r))
            return None if n < 0 else [(0, n, self._apply(r, n, value))]
        if among is not None and self.narrow and w.pods[r] == 1:
            if len(among) == 1 and self.policy in NO_DRAW:  # one node: it fits or not
                n = int(among[0])
                return [(0, n, self._apply(r, n, -1))] if self.fits_one(r, n) else None
            n, value = self._choose_in(r, among, self.fits(r, among))
            return None if n < 0 else [(0, n, self._apply(r, n, value))]
        placed: list[tuple[int, int, list[int]]] = []
        within = self.gang_hosts(r)
        if within is not None and not within.any():
            return None
        if w.pods[r] != 1:
            among = None
            if self.policy in _COMPILED and self._count[r]:
                return self._place_gang(r, within)
        for pod in range(int(w.pods[r])):
            n, value = self._choose(r, self._feasible(r, within, among))
            if n < 0:
                for _, node, used in reversed(placed):
                    self._undo(r, node, used)
                return None
            placed.append((pod, n, self._apply(r, n, value)))
            if pod == 0 and w.pods[r] > 1:
                locality = LOCALITIES[int(w.locality[r])]
                if locality == "switch":
                    within = self.fleet.domain == self.fleet.domain[n]
                elif locality == "block":
                    within = self.fleet.block == self.fleet.block[n]
                elif locality == "node":
                    within = np.arange(len(self.fleet.node_ids)) == n
        return placed

    def _place_gang(
        self, r: int, within: np.ndarray | None
    ) -> list[tuple[int, int, list[int]]] | None:
        """:meth:`place` of gang r (GPU pods) under first-fit or best-fit: each pod's node
        chosen by the compiled walk (:meth:`find_in_set`'s) over the nodes of r's model
        set inside ``within`` (:meth:`gang_hosts`), then inside the first pod's domain."""
        w, fleet = self.workload, self.fleet
        nodes = self.set_nodes[w.allowed[r]]
        if within is not None:
            nodes = nodes[within[nodes]]
        best = self.policy == "best-fit"
        locality = LOCALITIES[int(w.locality[r])]
        placed: list[tuple[int, int, list[int]]] = []
        for pod in range(int(w.pods[r])):
            n = self.find_in_set(r, best, nodes)
            if n < 0:
                for _, node, used in reversed(placed):
                    self._undo(r, node, used)
                return None
            placed.append((pod, n, self._apply(r, n, -1)))
            if pod == 0:
                if locality == "switch":
                    nodes = nodes[fleet.domain[nodes] == fleet.domain[n]]
                elif locality == "block":
                    nodes = nodes[fleet.block[nodes] == fleet.block[n]]
                elif locality == "node":
                    nodes = np.array([n], dtype=np.int64)
        return placed

    def fragmentation(self) -> float:
        if self.frag_before is not None:
            return float(self.frag_before.sum())
        st = self.state
        frag = _fragmentation(self.shapes, st.free, st.cpu, self.fleet.model, dedup=True)
        return float(frag.sum())
