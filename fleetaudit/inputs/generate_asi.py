"""``generate --format alibaba-gpu-v2026``: a generated fleet in the ASI release's layout.

Writes ``asi_opensource_pod_hourly`` and ``asi_opensource_server_hourly`` as
``day=<D>/hour=<HH>/part-000.parquet`` (day unpadded, hour two digits, no
day/hour columns in the files) and ``asi_opensource_job_execution_summary``,
with the release's column types (:mod:`fleetaudit.inputs.asi_trace`): ids are 32-hex
salted-hash-like strings, counts and requests are doubles.

The fleet, per server (docs/generate.md):

- a GPU model bucket (some written with a suffix, ``H20-96G``), 8 GPUs (16 for
  ``XPU-A``), CPU cores by model, a cluster and an access switch (ASW) of 32
  servers; a few servers have no ASW, a few leave before the end;
- a fixed split of its GPUs into GPU-pod slots; a slot's pod is replaced with
  chance 1/9 each hour (mean span 9 h) and then idles for that hour with
  chance 7 %; slots are HP (training, online inference, dev) or, 27 % of them, LP
  (offline inference): the paper's 68 % HP and 93 % HP+LP allocation;
- HP online-inference pods go ``Standby`` on some nights (hours 0-7); on most
  such nights an LP pod borrows the same GPUs, so the server's summed request
  exceeds its GPUs, as the release records harvesting;
- CPU-only pods (``gpu_request`` 0): ``cpu_pods`` slots per server, replaced
  with chance 1/24 an hour, priority HP, Other or LP.

At the defaults a server-hour holds about 2.2 GPU pods and 29 CPU-only pods:
the release's density (about 1.17 M pod rows an hour for 37,707 servers, 7 %
GPU pods). The same options write the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from fleetaudit.core.options import ASI_RELEASE_DAYS
from fleetaudit.inputs.asi_trace import (
    PAPER_DAYS,
    POD_SCHEMA,
    POD_TABLE,
    SERVER_SCHEMA,
    SERVER_TABLE,
    SUMMARY_SCHEMA,
    SUMMARY_TABLE,
    write_partition,
)

# model bucket, raw spellings, GPUs, CPU cores, share of servers
_MODELS = (
    ("H20", ("H20", "H20-96G"), 8, 192.0, 0.35),
    ("A100", ("A100", "A100-SXM4-80GB"), 8, 128.0, 0.15),
    ("L20", ("L20",), 8, 96.0, 0.15),
    ("A10", ("A10",), 8, 96.0, 0.08),
    ("H800", ("H800",), 8, 192.0, 0.12),
    ("XPU-A", ("XPU-A",), 16, 256.0, 0.15),
)
# GPU-pod slot splits of an 8-GPU server (a 16-GPU server takes two)
_SPLITS = ((8.0,), (4.0, 4.0), (4.0, 2.0, 1.0, 1.0), (2.0, 2.0, 2.0, 1.0, 0.5, 0.5), (1.0,) * 4)
_SPLIT_WEIGHTS = (0.25, 0.3, 0.2, 0.15, 0.1)
SERVERS_PER_ASW = 32
SERVERS_PER_CLUSTER = 2048
_STATES = ("Running", "Standby", "Pending", "Succeeded", "Failed", "Unknown")
_PRIOS = ("HP", "LP", "Other")
_JOBS = ("training", "online_inference", "offline_inference", "dev", "other", "unknown")
_MODEL_TYPES = ("genai", "rec", "cv", "embedding", "dev", "unknown")


@dataclass(frozen=True)
class AsiReleaseOptions:
    """What to generate.

    Attributes:
        servers: GPU servers (the release: 37,707 at the hourly peak).
        days: days to write, from ``first_day`` on.
        first_day: the first day's number (109: the paper week starts there).
        cpu_pods: CPU-only pod slots per server (29: the release's density).
        seed: the seed of every draw.
    """

    servers: int = 37_707
    days: int = ASI_RELEASE_DAYS
    first_day: int = PAPER_DAYS[0]
    cpu_pods: int = 29
    seed: int = 0


@dataclass(frozen=True)
class AsiReleaseResult:
    """What was written."""

    root: Path
    servers: int
    hours: int
    pod_rows: int
    gpu_pod_rows: int
    server_rows: int
    files: int


def _splitmix(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def hex_ids(keys: np.ndarray, salt: int) -> pa.StringArray:
    """32-hex-digit id strings, a salted hash of each integer key (vectorised)."""
    k = keys.astype(np.uint64) ^ np.uint64(salt)
    words = np.stack([_splitmix(k), _splitmix(k ^ np.uint64(0x5DEECE66D))], axis=1)
    raw = np.ascontiguousarray(words).view(np.uint8).reshape(len(keys), 16)
    out = np.empty((len(keys), 32), dtype=np.uint8)
    out[:, 0::2] = _HEX[raw >> 4]
    out[:, 1::2] = _HEX[raw & 15]
    offsets = np.arange(0, 32 * (len(keys) + 1), 32, dtype=np.int32)
    return pa.StringArray.from_buffers(
        len(keys), pa.py_buffer(offsets.tobytes()), pa.py_buffer(out.tobytes())
    )


def _pick(values: tuple[str, ...], index: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    arr = pa.array(values, type=pa.string()).take(pa.array(index.astype(np.int32)))
    if valid is None:
        return arr
    return pc.if_else(pa.array(valid), arr, pa.scalar(None, pa.string()))


def _doubles(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    return pa.array(values.astype(np.float64), mask=None if valid is None else ~valid)


class _Fleet:
    """The servers and their slots (drawn once)."""

    def __init__(self, options: AsiReleaseOptions, rng: np.random.Generator) -> None:
        n = options.servers
        self.n = n
        shares = np.array([m[4] for m in _MODELS])
        self.model = rng.choice(len(_MODELS), size=n, p=shares / shares.sum())
        self.gpus = np.array([_MODELS[m][2] for m in self.model], dtype=np.float64)
        self.cpus = np.array([_MODELS[m][3] for m in self.model], dtype=np.float64)
        spellings = [_MODELS[m][1] for m in self.model]
        pick = rng.integers(0, 2, size=n)
        self.spec = np.array([s[p % len(s)] for s, p in zip(spellings, pick, strict=True)])
        order = np.argsort(self.model, kind="stable")  # ASWs and clusters hold one model mostly
        position = np.empty(n, dtype=np.int64)
        position[order] = np.arange(n)
        self.cluster = position // SERVERS_PER_CLUSTER
        self.asw = position // SERVERS_PER_ASW
        self.asw_valid = rng.random(n) >= 0.02
        self.server_ids = hex_ids(np.arange(n), 0x51)
        self.cluster_ids = hex_ids(np.arange(self.cluster.max() + 1), 0xC1)
        self.asw_ids = hex_ids(np.arange(self.asw.max() + 1), 0xA5)
        hours = options.days * 24
        # 1% of servers leave at a random hour, 1% join late
        self.first = np.where(rng.random(n) < 0.01, rng.integers(1, max(hours, 2), n), 0)
        self.last = np.where(rng.random(n) < 0.01, rng.integers(0, max(hours - 1, 1), n), hours - 1)
        self.last = np.maximum(self.last, self.first)

        slot_server: list[int] = []
        slot_size: list[float] = []
        split_of = rng.choice(len(_SPLITS), size=n, p=_SPLIT_WEIGHTS)
        for s in range(n):
            sizes = _SPLITS[split_of[s]] * (2 if self.gpus[s] == 16 else 1)
            slot_server.extend([s] * len(sizes))
            slot_size.extend(sizes)
        self.g_server = np.array(slot_server, dtype=np.int64)
        self.g_size = np.array(slot_size, dtype=np.float64)
        g = len(self.g_server)
        self.g_lp = rng.random(g) < 0.27
        job = np.where(
            self.g_lp,
            2,
            np.where(
                self.g_size >= 4,
                rng.choice([0, 1], size=g, p=[0.55, 0.45]),
                rng.choice([1, 3, 4], size=g, p=[0.8, 0.15, 0.05]),
            ),
        )
        self.g_job = job
        self.g_model_type = rng.integers(0, len(_MODEL_TYPES), size=g)
        self.g_gen = np.zeros(g, dtype=np.int64)
        self.g_empty = rng.random(g) < 0.07
        self.g_age = rng.integers(0, 20, size=g)
        self.g_standby = np.zeros(g, dtype=bool)
        self.g_borrow = np.zeros(g, dtype=bool)
        c = n * options.cpu_pods
        self.c_server = np.repeat(np.arange(n), options.cpu_pods)
        self.c_gen = np.zeros(c, dtype=np.int64)
        self.c_prio = rng.choice(3, size=c, p=[0.6, 0.05, 0.35])


def generate_release(
    out: Path,
    options: AsiReleaseOptions = AsiReleaseOptions(),
    progress: Callable[[str, float], None] | None = None,
) -> AsiReleaseResult:
    """Write the release layout under ``out`` (the release's ``data`` folder)."""
    if options.servers < 1:
        raise ValueError("servers must be 1 or more")
    if options.days < 1:
        raise ValueError("days must be 1 or more")
    if options.first_day < 0 or options.cpu_pods < 0:
        raise ValueError("first_day and cpu_pods must be 0 or more")
    say = progress or (lambda _m, _f: None)
    rng = np.random.default_rng(options.seed)
    fleet = _Fleet(options, rng)
    hours = options.days * 24
    pod_rows = gpu_rows = server_rows = files = 0
    spans: dict[int, list[int]] = {}  # GPU pod key -> [first hour, last hour, slot]
    for h in range(hours):
        day, hour = options.first_day + h // 24, h % 24
        present = (fleet.first <= h) & (fleet.last >= h)
        server_rows += int(present.sum())
        write_partition(out, SERVER_TABLE, day, hour, _server_table(fleet, present))
        table, n_gpu = _pod_table(fleet, options, rng, h, hour, present, spans)
        write_partition(out, POD_TABLE, day, hour, table)
        pod_rows += table.num_rows
        gpu_rows += n_gpu
        files += 2
        say(f"day={day} hour={hour:02d}: {table.num_rows:,} pod rows", (h + 1) / hours)
    summary = _summary(fleet, spans, rng)
    (out / SUMMARY_TABLE).mkdir(parents=True, exist_ok=True)
    pq.write_table(summary, out / SUMMARY_TABLE / "part-000.parquet", compression="snappy")
    return AsiReleaseResult(out, options.servers, hours, pod_rows, gpu_rows, server_rows, files + 1)


def _server_table(fleet: _Fleet, present: np.ndarray) -> pa.Table:
    idx = np.flatnonzero(present)
    take = pa.array(idx)
    asw = fleet.asw_ids.take(pa.array(fleet.asw[idx]))
    return pa.table(
        {
            "server_id": fleet.server_ids.take(take),
            "cluster_id": fleet.cluster_ids.take(pa.array(fleet.cluster[idx])),
            "asw_id": pc.if_else(
                pa.array(fleet.asw_valid[idx]), asw, pa.scalar(None, pa.string())
            ),
            "gpu_spec_public": pa.array(fleet.spec[idx], type=pa.string()),
            "gpu_count": _doubles(fleet.gpus[idx]),
            "cpu_capacity_cores": _doubles(fleet.cpus[idx]),
        },
        schema=SERVER_SCHEMA,
    )


def _pod_table(
    fleet: _Fleet,
    options: AsiReleaseOptions,
    rng: np.random.Generator,
    h: int,
    hour: int,
    present: np.ndarray,
    spans: dict[int, list[int]],
) -> tuple[pa.Table, int]:
    # GPU slots: replace pods (mean span 9 h), then idle a replaced slot with chance 1/4
    g = len(fleet.g_server)
    new = rng.random(g) < 1 / 9
    fleet.g_gen[new] += 1
    fleet.g_empty[new] = rng.random(int(new.sum())) < 0.07
    fleet.g_age[new] = 0
    fleet.g_age[~new] += 1
    if hour == 0:  # tonight's standby: HP online inference, and whether LP borrows
        night = rng.random(g)
        fleet.g_standby = (~fleet.g_lp) & (fleet.g_job == 1) & (night < 0.5)
        fleet.g_borrow = fleet.g_standby & (rng.random(g) < 0.8)
    asleep = fleet.g_standby & (hour < 8)
    live = present[fleet.g_server] & ~fleet.g_empty
    gi = np.flatnonzero(live)
    bi = np.flatnonzero(live & asleep & fleet.g_borrow)
    # CPU-only slots: mean span 24 h
    fleet.c_gen[rng.random(len(fleet.c_gen)) < 1 / 24] += 1
    ci = np.flatnonzero(present[fleet.c_server])

    n_g, n_b, n_c = len(gi), len(bi), len(ci)
    n = n_g + n_b + n_c
    server = np.concatenate([fleet.g_server[gi], fleet.g_server[bi], fleet.c_server[ci]])
    keys = np.concatenate(
        [
            (gi << 20) + fleet.g_gen[gi],
            (1 << 60) + (bi << 20) + h // 24,  # a borrower lives for the night
            (1 << 61) + (ci << 20) + fleet.c_gen[ci],
        ]
    ).astype(np.uint64)
    workload = np.concatenate(
        [gi // 3, (1 << 40) + bi // 4, (1 << 50) + ci // 50]
    ).astype(np.uint64)
    gpu_req = np.concatenate([fleet.g_size[gi], fleet.g_size[bi], np.zeros(n_c)])
    prio = np.concatenate(
        [np.where(fleet.g_lp[gi], 1, 0), np.ones(n_b, dtype=np.int64), fleet.c_prio[ci]]
    )
    job = np.concatenate(
        [fleet.g_job[gi], np.full(n_b, 2), np.where(fleet.c_prio[ci] == 2, 5, 4)]
    )
    mtype = np.concatenate(
        [fleet.g_model_type[gi], np.full(n_b, 1), np.full(n_c, 5)]
    )
    state = np.zeros(n, dtype=np.int64)
    state[:n_g] = np.where(asleep[gi], 1, np.where(fleet.g_age[gi] == 0, 2, 0))
    state[:n_g][(state[:n_g] == 2) & (rng.random(n_g) < 0.7)] = 0  # most start Running
    used = gpu_req * np.where(state == 2, 0.0, 1.0)
    frac_first = (state[:n_g] == 0) & (fleet.g_age[gi] == 0)
    used[:n_g][frac_first] *= rng.uniform(0.2, 1.0, int(frac_first.sum()))
    sm_ratio = np.where(np.isin(job, [0]), rng.uniform(0.4, 0.95, n), rng.uniform(0.0, 0.5, n))
    sm = np.where(state == 1, 0.0, sm_ratio * gpu_req * 100.0)
    sm_valid = (gpu_req > 0) & (state != 2) & (rng.random(n) >= 0.05)
    draw = (_splitmix(keys) % np.uint64(4)).astype(np.int64)  # fixed for a pod's life
    cpu_req = np.concatenate(
        [
            fleet.g_size[gi] * np.array([8.0, 12.0, 16.0, 12.0])[draw[:n_g]],
            fleet.g_size[bi] * 8.0,
            np.array([0.5, 1.0, 2.0, 4.0])[draw[n_g + n_b :]],
        ]
    )
    ready = state != 2
    delay_valid = rng.random(n) >= 0.1
    for k, slot in zip(keys[:n_g].tolist(), gi.tolist(), strict=True):
        span = spans.get(k)
        if span is None:
            spans[k] = [h, h, slot]
        else:
            span[1] = h
    take = pa.array(server)
    table = pa.table(
        {
            "pod_id": hex_ids(keys, 0x90D),
            "workload_id": pc.if_else(
                pa.array(rng.random(n) >= 0.05),
                hex_ids(workload, 0x30B),
                pa.scalar(None, pa.string()),
            ),
            "server_id": fleet.server_ids.take(take),
            "cluster_id": fleet.cluster_ids.take(pa.array(fleet.cluster[server])),
            "state_public": _pick(_STATES, state),
            "gpu_spec_public": pa.array(fleet.spec[server], type=pa.string()),
            "server_gpu_count": _doubles(fleet.gpus[server]),
            "server_cpu_capacity_cores": _doubles(fleet.cpus[server]),
            "priority_class": _pick(_PRIOS, prio),
            "job_type_public": _pick(_JOBS, job),
            "model_type_public": _pick(_MODEL_TYPES, mtype),
            "is_genai_request": pa.array(mtype == 0),
            "gpu_request": _doubles(gpu_req),
            "gpu_mem_request": _doubles(gpu_req * 96.0),
            "cpu_request_cores": _doubles(cpu_req),
            "used_gpu_hours": _doubles(used),
            "avg_gpu_sm_util": _doubles(sm, sm_valid),
            "avg_gpu_mem_gib": _doubles(gpu_req * rng.uniform(5, 90, n), sm_valid),
            "avg_cpu_request_util": _doubles(rng.uniform(0.0, 1.3, n), ready),
            "avg_memory_util": _doubles(rng.uniform(0.05, 0.95, n), ready),
            "ready_status": pa.array(ready),
            "schedule_delay_sec": pa.array(
                rng.integers(0, 900, n), type=pa.int64(), mask=~delay_valid
            ),
            "ready_delay_sec": pa.array(
                rng.integers(0, 300, n), type=pa.int64(), mask=~(delay_valid & ready)
            ),
        },
        schema=POD_SCHEMA,
    )
    return table, n_g + n_b


def _summary(fleet: _Fleet, spans: dict[int, list[int]], rng: np.random.Generator) -> pa.Table:
    keys = np.fromiter(spans.keys(), dtype=np.uint64, count=len(spans))
    rows = np.array(list(spans.values()), dtype=np.int64).reshape(-1, 3)
    slot = rows[:, 2]
    n = len(keys)
    server = fleet.g_server[slot]
    return pa.table(
        {
            "pod_id": hex_ids(keys, 0x90D),
            "workload_id": hex_ids((slot // 3).astype(np.uint64), 0x30B),
            "server_id": fleet.server_ids.take(pa.array(server)),
            "gpu_spec_public": pa.array(fleet.spec[server], type=pa.string()),
            "priority_class": _pick(_PRIOS, np.where(fleet.g_lp[slot], 1, 0)),
            "job_type_public": _pick(_JOBS, fleet.g_job[slot]),
            "model_type_public": _pick(_MODEL_TYPES, fleet.g_model_type[slot]),
            "is_genai_request": pa.array(fleet.g_model_type[slot] == 0),
            "gpu_request": _doubles(fleet.g_size[slot]),
            "duration_hours": _doubles((rows[:, 1] - rows[:, 0] + 1).astype(np.float64)),
            "schedule_delay_sec": pa.array(rng.integers(0, 900, n), type=pa.int64()),
            "ready_delay_sec": pa.array(rng.integers(0, 300, n), type=pa.int64()),
            "ready_status": pa.array(np.ones(n, dtype=bool)),
            "schedule_status": pa.array(np.ones(n, dtype=bool)),
        },
        schema=SUMMARY_SCHEMA,
    )
