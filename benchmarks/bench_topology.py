"""``ingest --topology FILE`` and ``block`` locality: their cost at ASI scale.

    python -m benchmarks.bench_topology [--nodes 19400] [--work bench-out/topology]

Writes a nodes file without switches (8 GPUs a node) and the same hierarchy
twice: a CSV ``node_id,switch_id,block_id,spine_id`` and a Slurm topology.conf
(16 nodes a leaf switch, 16 leaves a block, one spine). Then prints:

1. the ingest of the nodes alone, with the CSV, and with topology.conf (each
   into a new store, best of 3): seconds, and the nodes placed;
2. a 256-GPU gang of 8-GPU pods on the idle fleet, with ``switch`` and with
   ``block`` locality: instances, and the seconds of ``shapes.evaluate``
   (best of 3; the state is built once).
"""

from __future__ import annotations

import argparse
import resource
import time
from datetime import datetime
from pathlib import Path

import polars as pl

from fleetaudit.inputs.ingest import IngestOptions, ingest
from fleetaudit.model import occupancy
from fleetaudit.model.shapes import evaluate, make_shape
from fleetaudit.model.store import open_store

LEAF = 16  # nodes a leaf switch: 128 GPUs, too few for the 256-GPU gang
BLOCK = 16  # leaves a block: 2,048 GPUs
RUNS = 3  # each figure is the best of this many runs


def write_inputs(work: Path, nodes: int) -> tuple[Path, Path, Path]:
    work.mkdir(parents=True, exist_ok=True)
    ids = [f"gpu{i:05d}" for i in range(nodes)]
    pl.DataFrame(
        {
            "node_id": ids,
            "gpu_model": ["H800"] * nodes,
            "gpus": [8] * nodes,
            "cpus": [128.0] * nodes,
        }
    ).write_csv(work / "nodes.csv")
    leaf = [i // LEAF for i in range(nodes)]
    pl.DataFrame(
        {
            "node_id": ids,
            "switch_id": [f"leaf{s}" for s in leaf],
            "block_id": [f"block{s // BLOCK}" for s in leaf],
            "spine_id": ["spine0"] * nodes,
        }
    ).write_csv(work / "topology.csv")
    leaves = (nodes + LEAF - 1) // LEAF
    lines = []
    for s in range(leaves):
        last = min((s + 1) * LEAF, nodes) - 1
        lines.append(f"SwitchName=leaf{s} Nodes=gpu[{s * LEAF:05d}-{last:05d}]")
    blocks = (leaves + BLOCK - 1) // BLOCK
    for b in range(blocks):
        last = min((b + 1) * BLOCK, leaves) - 1
        lines.append(f"SwitchName=block{b} Switches=leaf[{b * BLOCK}-{last}]")
    lines.append(f"SwitchName=spine0 Switches=block[0-{blocks - 1}]")
    (work / "topology.conf").write_text("\n".join(lines) + "\n")
    return work / "nodes.csv", work / "topology.csv", work / "topology.conf"


def timed_ingest(db: Path, nodes: Path, topology: Path | None) -> tuple[float, int]:
    db.unlink(missing_ok=True)
    with open_store(db) as store:
        started = time.perf_counter()
        result = ingest(store, [nodes], IngestOptions(topology=topology))
        seconds = time.perf_counter() - started
    return seconds, result.topology.placed if result.topology else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=19_400)
    parser.add_argument("--work", type=Path, default=Path("bench-out/topology"))
    args = parser.parse_args()
    nodes, csv, conf = write_inputs(args.work, args.nodes)
    print(f"{args.nodes:,} nodes, {LEAF} a leaf switch, {LEAF * BLOCK} a block")
    inputs = (("nodes alone", None), ("--topology CSV", csv), ("--topology conf", conf))
    for label, topology in inputs:
        runs = [timed_ingest(args.work / "store.duckdb", nodes, topology) for _ in range(RUNS)]
        seconds, placed = min(runs)
        print(f"ingest, {label:16s} {seconds:6.2f} s, {placed:,} nodes placed")
    with open_store(args.work / "store.duckdb", read_only=True) as store:
        frame = store.query("nodes")
    empty = pl.DataFrame(
        schema={"alloc_id": pl.String, "node_id": pl.String, "gpus": pl.Float64,
                "cpus": pl.Float64, "memory_gib": pl.Float64, "priority": pl.String,
                "start_time": pl.Datetime("us"), "end_time": pl.Datetime("us")}
    )  # fmt: skip
    state = occupancy.node_state(frame, empty, datetime(2026, 1, 1))
    for locality in ("switch", "block"):
        shape = make_shape("H800", 256, 8, locality=locality)
        seconds = float("inf")
        for _ in range(RUNS):
            started = time.perf_counter()
            result = evaluate(state, shape)
            seconds = min(seconds, time.perf_counter() - started)
        print(f"256-GPU gang, {locality:6s} {result.instances:4d} instances in {seconds:.3f} s")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
