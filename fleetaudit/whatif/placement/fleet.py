"""The placement engine's fleet: node arrays, domains, and the free units of a run.

Fleet model. Only usable nodes (healthy, or a null health: the capacity model's
rule) take work, and only they count in the fleet's
GPUs. Every node keeps the free share of each of its GPUs in integer
micro-units (:data:`~fleetaudit.model.capacity.SHARE_UNITS` per GPU), its free CPUs
and free memory (micro-units too; a null ``memory_gib`` is unbounded). Sharing
is per GPU: a share pod (0 < gpus < 1) needs ONE GPU with that share left; a
whole-GPU pod of p GPUs needs p fully free GPUs on one node.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from fleetaudit.model.capacity import SHARE_UNITS, UNBOUNDED, node_arrays

_U = SHARE_UNITS
_UNBOUNDED = np.int64(UNBOUNDED)  # free memory of a node with unknown memory


@dataclass(frozen=True)
class _Fleet:
    node_ids: list[str]
    models: list[str]
    model: np.ndarray  # (N,) model index
    gpus: np.ndarray  # (N,) GPUs
    cpus: np.ndarray  # (N,) micro-cores
    memory: np.ndarray  # (N,) micro-GiB, _UNBOUNDED when unknown
    domain: np.ndarray  # (N,) switch-domain index
    block: np.ndarray  # (N,) block-domain index (capacity.block_domains)
    group: np.ndarray  # (N,) (domain, model) group index
    group_gpus: np.ndarray  # (groups,) GPU units of each group
    width: int  # GPUs of the widest node (columns of the share matrix)

    @property
    def total_gpus(self) -> int:
        return int(self.gpus.sum())


def _row_ids(rows: np.ndarray) -> np.ndarray:
    """Dense ids of a 2-D integer array's rows, in lexicographic row order.

    The same ids as ``np.unique(rows, axis=0, return_inverse=True)``, by one
    1-D unique per column (the 2-D unique sorts rows as bytes: seconds on
    millions of rows).
    """
    ids = np.zeros(len(rows), dtype=np.int64)
    for column in rows.T:
        _, col = np.unique(column, return_inverse=True)
        _, ids = np.unique(ids * (int(col.max()) + 1) + col.reshape(-1), return_inverse=True)
        ids = ids.reshape(-1)
    return ids.astype(np.int64)


def _units(values: np.ndarray) -> np.ndarray:
    return np.round(values * _U).astype(np.int64)


def _prepare_fleet(nodes: pl.DataFrame) -> _Fleet:
    # The capacity model's node index: node_id order, the usable nodes (healthy or a
    # null health), units, and the switch and block domain keys (a node with no
    # switch is a domain by itself).
    arrays = node_arrays(nodes)
    keep = np.flatnonzero(arrays.usable)
    node_ids = [arrays.node_id[i] for i in keep]
    model_names = [arrays.gpu_model[i] or "" for i in keep]
    models = sorted(set(model_names))
    number = {m: i for i, m in enumerate(models)}
    model = np.array([number[m] for m in model_names], dtype=np.int64)
    gpus = arrays.gpus[keep]
    cpus = arrays.cpus[keep]
    memory = arrays.memory[keep]
    _, domain = np.unique(
        np.array([arrays.domain[i] for i in keep], dtype=str), return_inverse=True
    )
    domain = domain.reshape(-1).astype(np.int64)
    _, block = np.unique(
        np.array([arrays.block_domain[i] for i in keep], dtype=str), return_inverse=True
    )
    pairs = domain * max(len(models), 1) + model
    _, group = np.unique(pairs, return_inverse=True)
    group = group.reshape(-1).astype(np.int64)
    group_gpus = np.bincount(group, weights=gpus * _U).astype(np.int64) if len(group) else group
    return _Fleet(
        node_ids=node_ids,
        models=models,
        model=model,
        gpus=gpus,
        cpus=cpus,
        memory=memory.astype(np.int64),
        domain=domain,
        block=block.reshape(-1).astype(np.int64),
        group=group,
        group_gpus=group_gpus,
        width=max(int(gpus.max()) if len(gpus) else 1, 1),
    )


class _State:
    """The mutable working state of one run (private: never escapes a run)."""

    def __init__(self, fleet: _Fleet) -> None:
        n, width = len(fleet.node_ids), fleet.width
        self.free = np.where(np.arange(width)[None, :] < fleet.gpus[:, None], _U, 0).astype(
            np.int64
        )
        self.free_total = self.free.sum(axis=1)
        self.whole = fleet.gpus.copy()  # fully free GPUs
        self.largest = self.free.max(axis=1) if width else np.zeros(n, np.int64)
        self.cpu = fleet.cpus.copy()
        self.memory = fleet.memory.copy()
        self.group_used = np.zeros(len(fleet.group_gpus), dtype=np.int64)
        self.version = np.ones(n, dtype=np.int64)
