"""A deterministic synthetic Slurm cluster's exports: sacct history, scontrol node list, topology.conf.

``fleetaudit generate OUT --format slurm`` writes what an operator of a Slurm GPU
cluster would hand over (docs/formats/slurm.md), for the ingest benchmark and
the end-to-end tests:

- ``nodes.txt``: ``scontrol -d -o show node``, 8 GPUs per node, typed GRES (``h100``
  or ``a100``, in contiguous leaf switches), about 1% drained and 1% not responding;
- ``topology.conf``: leaf switches of 32 nodes, 8 leaves under each spine;
- ``sacct.psv``: ``SLURM_TIME_FORMAT=%s sacct -a -X -D --array -P --noconvert``
  output with the recommended fields, ``jobs`` jobs ending at ``end``.

Jobs are laid out so that no node is ever over capacity: the nodes are cut into
groups of 4 inside a leaf, and each group runs a sequence of epochs. An epoch holds
either one 4-node job (32 GPUs) or two 2-node jobs, or on every node 1, 2, 4 or 8
single-node jobs sharing its 8 GPUs. Jobs start in their epoch and end before the
next; those still running at ``end`` have ``End=Unknown``, those not yet started
are pending. A few jobs were cancelled while pending (no node), 1-GPU jobs are
array tasks, QOS ``scavenger`` (low priority) holds about 15% of them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from fleetaudit.core.options import SlurmGenerateOptions

GPUS_PER_NODE = 8
GROUP = 4  # nodes per gang group
LEAF = 32  # nodes per leaf switch
LEAVES_PER_SPINE = 8
_MULTI_P = 0.15  # epochs holding multi-node jobs
_SPLITS = np.array([1, 2, 4, 8])  # single-node jobs per node in an epoch
_SPLIT_P = np.array([0.4, 0.3, 0.2, 0.1])
_CPUS_PER_GPU = np.array([4, 8, 12, 16, 24])
_MEM_PER_GPU_MIB = np.array([64000, 96000, 128000, 192000, 240000])
_STATES = np.array(["COMPLETED", "FAILED", "CANCELLED by 1000", "TIMEOUT"])
_STATE_P = np.array([0.85, 0.07, 0.05, 0.03])
FILES = ("nodes.txt", "topology.conf", "sacct.psv")
SACCT_FIELDS = (
    "JobID|JobIDRaw|JobName|User|Account|Partition|QOS|Priority|Submit|Eligible|Start|End|"
    "ElapsedRaw|TimelimitRaw|State|ExitCode|NNodes|NodeList|ReqCPUS|AllocCPUS|ReqMem|ReqTRES|"
    "AllocTRES|Restarts|Reason|Flags"
)


@dataclass(frozen=True)
class SlurmGenerateResult:
    """The files written and what they hold."""

    out: Path
    files: dict[str, Path]
    nodes: int
    jobs: int
    gpus: int

    @property
    def rows(self) -> dict[str, int]:
        """Lines written per file (topology.conf: its leaf switches)."""
        return {
            "nodes.txt": self.nodes,
            "topology.conf": -(-self.nodes // LEAF),
            "sacct.psv": self.jobs,
        }


def node_names(n: int) -> list[str]:
    width = max(4, len(str(n)))
    return [f"gpu{i:0{width}d}" for i in range(1, n + 1)]


def generate_slurm(
    out: Path, options: SlurmGenerateOptions = SlurmGenerateOptions()
) -> SlurmGenerateResult:
    """Write nodes.txt, topology.conf and sacct.psv into ``out`` (each whole or not at all).

    Raises:
        ValueError: an option out of range.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     r = generate_slurm(Path(d), SlurmGenerateOptions(nodes=8, jobs=200, days=2))
    ...     (r.nodes, r.jobs, sorted(r.files))
    (8, 200, ['nodes.txt', 'sacct.psv', 'topology.conf'])
    """
    if options.nodes < GROUP:
        raise ValueError(f"nodes must be at least {GROUP}, got {options.nodes}")
    if options.jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {options.jobs}")
    if not options.days > 0:
        raise ValueError(f"days must be above 0, got {options.days}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(options.seed)
    names = node_names(options.nodes)
    models = np.where((np.arange(options.nodes) // LEAF) % 5 < 3, "h100", "a100")
    texts = {
        "nodes.txt": _nodes_text(names, models, rng),
        "topology.conf": _topology_text(names),
    }
    jobs = _jobs(names, models, options, rng)
    files = {name: out / name for name in FILES}
    temps = {name: out / f".{name}.partial" for name in FILES}
    try:
        for name, text in texts.items():
            temps[name].write_text(text, encoding="utf-8")
        jobs.write_csv(temps["sacct.psv"], separator="|", quote_style="never", null_value="")
        for name in FILES:
            os.replace(temps[name], files[name])
    finally:
        for temp in temps.values():
            temp.unlink(missing_ok=True)
    return SlurmGenerateResult(
        out=out,
        files=files,
        nodes=options.nodes,
        jobs=jobs.height,
        gpus=options.nodes * GPUS_PER_NODE,
    )


def _nodes_text(names: list[str], models: np.ndarray, rng: np.random.Generator) -> str:
    draw = rng.random(len(names))
    states = np.where(draw < 0.01, "MIXED+DRAIN", np.where(draw < 0.02, "IDLE*", "MIXED"))
    lines = []
    for name, model, state in zip(names, models, states, strict=True):
        reason = " Reason=gpu xid 79 [root@2026-04-30T08:00:00]" if state != "MIXED" else ""
        lines.append(
            f"NodeName={name} Arch=x86_64 CoresPerSocket=56 CPUAlloc=0 CPUEfctv=224 CPUTot=224 "
            f"CPULoad=1.00 AvailableFeatures={model},ib ActiveFeatures={model},ib "
            f"Gres=gpu:{model}:{GPUS_PER_NODE}(S:0-1) NodeAddr={name} NodeHostName={name} "
            "Version=25.11.0 OS=Linux 5.15.0-105-generic #115-Ubuntu SMP RealMemory=2063000 "
            "AllocMem=0 FreeMem=2000000 Sockets=2 Boards=1 MemSpecLimit=16384 "
            f"State={state} ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A "
            f"Partitions={model} BootTime=2026-04-01T00:00:00 SlurmdStartTime=2026-04-01T00:05:00 "
            "LastBusyTime=2026-04-30T23:00:00 ResumeAfterTime=None "
            f"CfgTRES=cpu=224,mem=2063000M,billing=224,gres/gpu={GPUS_PER_NODE} "
            f"AllocTRES= CurrentWatts=0 AveWatts=0{reason}"
        )
    return "\n".join(lines) + "\n"


def _range(names: list[str], lo: int, hi: int) -> str:
    """A hostlist of names[lo:hi] (consecutive): gpu[0001-0032]."""
    first, last = names[lo], names[hi - 1]
    prefix = first.rstrip("0123456789")
    if hi - lo == 1:
        return first
    return f"{prefix}[{first[len(prefix) :]}-{last[len(prefix) :]}]"


def _topology_text(names: list[str]) -> str:
    lines = ["# generated by fleetaudit generate --format slurm"]
    leaves = range(0, len(names), LEAF)
    for i, lo in enumerate(leaves):
        lines.append(f"SwitchName=leaf{i} Nodes={_range(names, lo, min(lo + LEAF, len(names)))}")
    for s, lo in enumerate(range(0, len(leaves), LEAVES_PER_SPINE)):
        hi = min(lo + LEAVES_PER_SPINE, len(leaves)) - 1
        switches = f"leaf[{lo}-{hi}]" if hi > lo else f"leaf{lo}"
        lines.append(f"SwitchName=spine{s} Switches={switches}")
    return "\n".join(lines) + "\n"


def _jobs(
    names: list[str], models: np.ndarray, options: SlurmGenerateOptions, rng: np.random.Generator
) -> pl.DataFrame:
    n = len(names)
    # groups of up to 4 consecutive nodes that never cross a leaf switch
    starts = np.array([lo for leaf in range(0, n, LEAF)
                       for lo in range(leaf, min(leaf + LEAF, n), GROUP)])  # fmt: skip
    sizes = np.minimum(starts + GROUP, np.minimum((starts // LEAF + 1) * LEAF, n)) - starts
    groups = len(starts)
    mean_jobs = _MULTI_P * 1.5 + (1 - _MULTI_P) * sizes.mean() * float(_SPLITS @ _SPLIT_P)
    needed = options.jobs / (groups * mean_jobs)  # epochs per group within the history
    epochs = max(2, int(np.ceil(needed * 1.3)) + 2)
    end_s = int(options.end.timestamp())
    span = options.days * 86400.0
    mean_len = span / (needed * 1.1)  # a little more than asked, dropped at random below
    # epoch start times per group: history starts `span` before the end
    lengths = mean_len * rng.uniform(0.5, 1.5, size=(groups, epochs))
    epoch_start = end_s - span + np.cumsum(lengths, axis=1) - lengths
    multi = rng.random((groups, epochs)) < _MULTI_P
    halves = rng.random((groups, epochs)) < 0.5

    # jobs: (group, epoch, first node, nodes, gpus) per job
    g_idx, e_idx = np.nonzero(np.ones((groups, epochs), dtype=bool))
    is_multi = multi[g_idx, e_idx]
    parts: list[tuple[np.ndarray, ...]] = []
    # multi-node epochs: one job over the group, or two over its halves
    mg, me = g_idx[is_multi], e_idx[is_multi]
    whole = ~halves[mg, me] | (sizes[mg] < 2)
    parts.append((mg[whole], me[whole], starts[mg[whole]], sizes[mg[whole]],
                  sizes[mg[whole]] * GPUS_PER_NODE))  # fmt: skip
    hg, he = mg[~whole], me[~whole]
    half = sizes[hg] // 2
    parts.append((hg, he, starts[hg], half, half * GPUS_PER_NODE))
    parts.append((hg, he, starts[hg] + half, sizes[hg] - half, (sizes[hg] - half) * GPUS_PER_NODE))
    # single-node epochs: every node of the group split into k jobs of 8/k GPUs
    sg, se = g_idx[~is_multi], e_idx[~is_multi]
    for offset in range(GROUP):
        has = sizes[sg] > offset
        ng, ne = sg[has], se[has]
        k = rng.choice(_SPLITS, size=len(ng), p=_SPLIT_P)
        reps = np.repeat(np.arange(len(ng)), k)
        parts.append((ng[reps], ne[reps], starts[ng[reps]] + offset, np.ones(len(reps), dtype=np.int64),
                      GPUS_PER_NODE // k[reps]))  # fmt: skip
    group, epoch, first, nnodes, gpus = (np.concatenate([p[i] for p in parts]) for i in range(5))

    total = len(group)
    e_start = epoch_start[group, epoch]
    e_len = lengths[group, epoch]
    start = e_start + e_len * rng.uniform(0.0, 0.05, total)
    duration = np.maximum(60.0, e_len * rng.uniform(0.2, 0.95, total))
    wait = e_len * rng.exponential(0.1, total)
    submit = start - wait
    keep = submit <= end_s
    if keep.sum() > options.jobs:  # drop at random down to the asked number
        kept = np.flatnonzero(keep)
        keep[:] = False
        keep[rng.choice(kept, size=options.jobs, replace=False)] = True
    sel = np.flatnonzero(keep)
    group, first, nnodes, gpus = group[sel], first[sel], nnodes[sel], gpus[sel]
    start, duration, submit = start[sel], duration[sel], submit[sel]
    order = np.argsort(submit, kind="stable")
    group, first, nnodes, gpus = group[order], first[order], nnodes[order], gpus[order]
    start, duration, submit = start[order], duration[order], submit[order]
    m = len(sel)

    submit_s = np.floor(submit).astype(np.int64)
    start_s = np.maximum(np.floor(start).astype(np.int64), submit_s)
    end_job = start_s + np.floor(duration).astype(np.int64)
    pending = start_s > end_s
    running = ~pending & (end_job > end_s)
    cancelled_pending = ~pending & ~running & (rng.random(m) < 0.003)
    ran = ~pending & ~cancelled_pending
    state = rng.choice(_STATES, size=m, p=_STATE_P)
    state = np.where(running, "RUNNING", np.where(pending, "PENDING", state))
    state = np.where(cancelled_pending, "CANCELLED by 1000", state)

    raw = 100_000 + np.arange(m, dtype=np.int64)
    raw_text = raw.astype(str)
    array_task = gpus == 1
    job_id = np.where(array_task, np.char.add(np.char.add((raw - raw % 10).astype(str), "_"),
                                              (raw % 10).astype(str)), raw_text)  # fmt: skip
    model = models[first]
    cpg = rng.choice(_CPUS_PER_GPU, size=m)
    mpg = rng.choice(_MEM_PER_GPU_MIB, size=m)
    cpus = gpus * cpg
    mem = gpus * mpg
    users = rng.integers(0, 40, size=m)
    qos_draw = rng.random(m)
    qos = np.where(qos_draw < 0.15, "scavenger", np.where(qos_draw < 0.2, "high", "normal"))
    limit_min = np.ceil(duration / 60 * rng.uniform(1.1, 3.0, m) / 30) * 30
    typed_req = rng.random(m) < 0.3

    first_name = np.array(names)[first]
    last_name = np.array(names)[first + nnodes - 1]
    hostlist = np.where(
        nnodes > 1,
        np.char.add(np.char.add(np.char.add("gpu[", np.char.lstrip(first_name, "gpu")), "-"),
                    np.char.add(np.char.lstrip(last_name, "gpu"), "]")),
        first_name,
    )  # fmt: skip
    frame = pl.DataFrame(
        {
            "JobID": job_id,
            "JobIDRaw": raw_text,
            "JobName": np.where(nnodes > 1, "pretrain", np.where(array_task, "sweep", "train")),
            "User": np.char.add("user", users.astype(str)),
            "Account": np.char.add("acct", (users % 10).astype(str)),
            "Partition": model,
            "QOS": qos,
            "Priority": (1000 + users).astype(str),
            "Submit": submit_s,
            "Eligible": submit_s,
            "Start": start_s,
            "End": end_job,
            "ElapsedRaw": end_job - start_s,
            "TimelimitRaw": limit_min.astype(np.int64),
            "State": state,
            "NNodes": nnodes,
            "NodeList": hostlist,
            "ReqCPUS": cpus,
            "gpus": gpus,
            "mem": mem,
            "model": model,
            "typed_req": typed_req,
            "ran": ran,
            "running": running,
            "cancelled_pending": cancelled_pending,
        }
    )
    tres = (
        pl.format("billing={},cpu={},", "ReqCPUS", "ReqCPUS")
        + pl.when(pl.col("typed_req"))
        .then(pl.format("gres/gpu:{}={},", "model", "gpus"))
        .otherwise(pl.lit(""))
        + pl.format("gres/gpu={},mem={}M,node={}", "gpus", "mem", "NNodes")
    )
    alloc = pl.format(
        "billing={},cpu={},gres/gpu:{}={},gres/gpu={},mem={}M,node={}",
        "ReqCPUS", "ReqCPUS", "model", "gpus", "gpus", "mem", "NNodes",
    )  # fmt: skip
    unknown = pl.lit("Unknown")
    return frame.select(
        "JobID",
        "JobIDRaw",
        "JobName",
        "User",
        "Account",
        "Partition",
        "QOS",
        "Priority",
        pl.col("Submit").cast(pl.Utf8),
        pl.col("Eligible").cast(pl.Utf8),
        pl.when(pl.col("ran") | pl.col("cancelled_pending"))
        .then(pl.col("Start").cast(pl.Utf8))
        .otherwise(unknown)
        .alias("Start"),
        pl.when(pl.col("cancelled_pending"))
        .then(pl.col("Start").cast(pl.Utf8))
        .when(pl.col("ran") & ~pl.col("running"))
        .then(pl.col("End").cast(pl.Utf8))
        .otherwise(unknown)
        .alias("End"),
        pl.when(pl.col("ran") & ~pl.col("running"))
        .then(pl.col("ElapsedRaw"))
        .otherwise(0)
        .cast(pl.Utf8)
        .alias("ElapsedRaw"),
        pl.col("TimelimitRaw").cast(pl.Utf8),
        "State",
        pl.lit("0:0").alias("ExitCode"),
        pl.col("NNodes").cast(pl.Utf8),
        pl.when(pl.col("ran"))
        .then(pl.col("NodeList"))
        .otherwise(pl.lit("None assigned"))
        .alias("NodeList"),
        pl.col("ReqCPUS").cast(pl.Utf8),
        pl.when(pl.col("ran"))
        .then(pl.col("ReqCPUS"))
        .otherwise(0)
        .cast(pl.Utf8)
        .alias("AllocCPUS"),
        pl.format("{}M", "mem").alias("ReqMem"),
        tres.alias("ReqTRES"),
        pl.when(pl.col("ran")).then(alloc).otherwise(pl.lit("")).alias("AllocTRES"),
        pl.lit("0").alias("Restarts"),
        pl.when(pl.col("State") == "PENDING")
        .then(pl.lit("Resources"))
        .otherwise(pl.lit("None"))
        .alias("Reason"),
        pl.lit("SchedBackfill").alias("Flags"),
    )
