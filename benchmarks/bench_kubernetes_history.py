"""Snapshot history of a Kubernetes cluster: ``ingest --format kubernetes`` every 10 minutes.

    python -m benchmarks.bench_kubernetes_history [--nodes 2000] [--pods 60000]
        [--snapshots 4320] [--every 600] [--lifetime-h 12] [--report 144] [--minutes M]
        [--work DIR] [--list-gib G | --aged D]

A generated cluster lives through ``--snapshots`` snapshots ``--every`` seconds apart
(4,320 x 10 minutes = 30 days at the defaults): ``--pods`` pods are live at each
snapshot, each living an exponential time of mean ``--lifetime-h`` hours (a third hold
1, 2, 4 or 8 GPUs, the rest CPUs only), a new one waiting up to 30 minutes pending first
(in gangs of 1-4 pods); a finished pod is listed once more as Succeeded with its finish
time and then gone; about one node a day goes NotReady for an hour. Each snapshot is
written as the List that ``kubectl get nodes,pods -A -o json`` prints and ingested into
one store, in this process, one call per snapshot, as cron would (the ingest keeps no
cache from one call to the next; the interpreter's start and imports, which a cron call
also pays, are not counted). Prints every ``--report`` snapshots and at the end: the
store's size on disk, its rows, and the wall and CPU seconds of each snapshot's ingest
(median, 95th percentile, largest), with the load average, which matters on a shared
machine; at the end also whether a snapshot's CPU grows with the history (the first
hundred snapshots against the last hundred) and the store's growth a day, with the 30
days it gives when the run is shorter. ``--minutes M`` ends the run after the snapshot
that passes M minutes of wall time. Each snapshot's figures go to ``history.csv`` in the
work folder. Targets: the store under 2 GiB after 30 days, each snapshot's ingest under
10 s.

``--aged D`` measures the end of a long history without living through it: it first
fills a store with as many pods as D days of the cluster create (``--pods`` x 24 /
``--lifetime-h`` a day), from a cluster whose pods live half an hour (a snapshot then
brings about a fifth of its pods new, so 30 days' pods take about 270 snapshots), and
then ingests the same ``--snapshots`` snapshots of the cluster as configured into that
store and into a new one, alternately, printing each one's CPU and wall (medians
leave out the first snapshot, whose pods are all new to either store) and the aged
store's size. The history's rows are those of D days; its time span is shorter.

``--list-gib G`` instead writes one List of about G GiB of such pods (the issue's 1 GB
List) and ingests it in a child process, printing its peak RSS (target: under 2 GiB).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import random
import resource
import shutil
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

START = datetime(2026, 3, 1)


def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Pod:
    uid: str
    name: str
    namespace: str
    node: str
    gpus: int
    cpus: int
    created: datetime
    bound: datetime
    ends: datetime
    gang: str | None
    texts: dict[tuple[bool, bool], str] | None = None  # its JSON per (bound, finished)


class Cluster:
    """A cluster that lives through time: ``snapshot(t)`` is what kubectl lists at t."""

    def __init__(self, nodes: int, pods: int, lifetime_h: float, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.nodes = [f"gpu-{i:05d}" for i in range(nodes)]
        self.target = pods
        self.lifetime_s = lifetime_h * 3600
        self.live: list[_Pod] = []
        self.finished: list[_Pod] = []
        self.counter = 0
        self.down: dict[str, tuple[datetime, datetime]] = {}
        self.t = START

    def _new_pod(self, t: datetime, age_s: float = 0.0) -> _Pod:
        self.counter += 1
        rng = self.rng
        gpus = rng.choice((1, 2, 4, 8)) if rng.random() < 1 / 3 else 0
        created = t - timedelta(seconds=age_s)
        bound = created + timedelta(seconds=rng.uniform(0, 1800))
        ends = bound + timedelta(seconds=rng.expovariate(1 / self.lifetime_s))
        i = self.counter
        return _Pod(
            uid=f"{i:08x}-5f1c-4d0e-9a7b-{rng.getrandbits(48):012x}",
            name=f"job-{i // 4:07d}-worker-{i % 4}",
            namespace=f"team-{i % 40:02d}",
            node=rng.choice(self.nodes),
            gpus=gpus,
            cpus=rng.choice((1, 2, 4, 8, 16)),
            created=created,
            bound=bound,
            ends=ends,
            gang=f"job-{i // 4:07d}" if gpus and i % 3 == 0 else None,
        )

    def advance(self, t: datetime) -> None:
        if not self.live:  # a steady state: pods of every age, bound, each with a life left
            for _ in range(self.target):
                age = self.rng.expovariate(1 / self.lifetime_s)
                p = self._new_pod(t, age)
                p.bound = min(p.bound, t - timedelta(seconds=1))
                p.ends = t + timedelta(seconds=self.rng.expovariate(1 / self.lifetime_s))
                self.live.append(p)
        ended = [p for p in self.live if p.ends <= t]
        self.live = [p for p in self.live if p.ends > t]
        self.finished = ended  # listed once more, finished, then gone
        while len(self.live) < self.target:
            self.live.append(self._new_pod(t - timedelta(seconds=self.rng.uniform(0, 600))))
        if self.rng.random() < 600 / 86400:  # about one node a day goes down for an hour
            node = self.rng.choice(self.nodes)
            self.down[node] = (t, t + timedelta(hours=1))
        self.t = t

    def _node(self, name: str, t: datetime) -> dict[str, Any]:
        since, until = self.down.get(name, (START - timedelta(days=30), START))
        ready = not since <= t < until
        transition = since if not ready else (until if until <= t else START - timedelta(days=30))
        return {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8",
                "network.topology.nvidia.com/leaf": f"leaf-{int(name[4:]) // 32:03d}"}},
            "spec": {},
            "status": {
                "capacity": {"cpu": "192", "memory": "2Ti", "nvidia.com/gpu": "8"},
                "allocatable": {"cpu": "190", "memory": "2000Gi", "nvidia.com/gpu": "8"},
                "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                "reason": "KubeletReady" if ready else "KubeletNotReady",
                                "lastHeartbeatTime": _ts(t - timedelta(seconds=20)),
                                "lastTransitionTime": _ts(transition)}]},
        }  # fmt: skip

    @staticmethod
    def _pod(p: _Pod, t: datetime) -> dict[str, Any]:
        bound = p.bound <= t
        finished = p.ends <= t
        requests = {"cpu": str(p.cpus), "memory": f"{p.cpus * 4}Gi"}
        if p.gpus:
            requests["nvidia.com/gpu"] = str(p.gpus)
        meta: dict[str, Any] = {"uid": p.uid, "name": p.name, "namespace": p.namespace,
                                "creationTimestamp": _ts(p.created)}  # fmt: skip
        if p.gang:
            meta["annotations"] = {"scheduling.k8s.io/group-name": p.gang}
        status: dict[str, Any] = {
            "phase": "Succeeded" if finished else ("Running" if bound else "Pending"),
            "conditions": [{"type": "PodScheduled", "status": "True" if bound else "False",
                            "lastTransitionTime": _ts(p.bound if bound else p.created),
                            **({} if bound else {"reason": "Unschedulable"})}],
        }  # fmt: skip
        if finished:
            status["containerStatuses"] = [{"name": "main", "state": {"terminated": {
                "exitCode": 0, "startedAt": _ts(p.bound), "finishedAt": _ts(p.ends)}}}]
        return {
            "apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {**({"nodeName": p.node} if bound else {}), "priorityClassName": "normal",
                     "containers": [{"name": "main", "resources": {"requests": requests,
                                                                   "limits": requests}}]},
            "status": status,
        }  # fmt: skip

    def items(self, t: datetime) -> Iterator[dict[str, Any] | str]:
        """The objects listed at t; a pod as its JSON text, written once per state (a pod
        reads the same in every snapshot until it is bound or finishes)."""
        for name in self.nodes:
            yield self._node(name, t)
        for p in self.live:
            if p.created <= t:
                yield self._pod_text(p, t)
        for p in self.finished:
            yield self._pod_text(p, t)

    def _pod_text(self, p: _Pod, t: datetime) -> str:
        state = (p.bound <= t, p.ends <= t)
        if p.texts is None:
            p.texts = {}
        if state not in p.texts:
            p.texts[state] = json.dumps(self._pod(p, t), indent=4)
        return p.texts[state]


def write_list(path: Path, items: Iterator[dict[str, Any] | str]) -> int:
    """The List as kubectl writes it (``-o json``: indented by 4; an item given as text is
    written as it is); returns its size."""
    with path.open("w", encoding="utf-8") as out:
        out.write('{\n    "apiVersion": "v1",\n    "items": [\n')
        first = True
        for item in items:
            text = item if isinstance(item, str) else json.dumps(item, indent=4)
            out.write(("" if first else ",\n") + text)
            first = False
        out.write('\n    ],\n    "kind": "List",\n    "metadata": {\n        "resourceVersion": ""\n    }\n}\n')
    return path.stat().st_size


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def history(args: argparse.Namespace) -> None:
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    db = work / "history.duckdb"
    cluster = Cluster(args.nodes, args.pods, args.lifetime_h)
    walls: list[float] = []
    cpus: list[float] = []
    sizes: list[tuple[int, int]] = []  # (snapshots, store bytes) at each report
    began = time.perf_counter()
    print(f"cluster: {args.nodes} nodes, {args.pods} live pods, lifetime mean "
          f"{args.lifetime_h} h; {args.snapshots} snapshots every {args.every} s; "
          f"load {_load()}", flush=True)  # fmt: skip
    with (work / "history.csv").open("w", encoding="utf-8") as log:
        log.write("snapshot,list_bytes,ingest_wall_s,ingest_cpu_s,load1\n")
        for k in range(args.snapshots):
            t = START + timedelta(seconds=k * args.every)
            cluster.advance(t)
            snap = work / "snapshot.json"
            size = write_list(snap, cluster.items(t))
            wall, cpu = _timed_ingest(db, snap)
            walls.append(wall)
            cpus.append(cpu)
            log.write(f"{k + 1},{size},{walls[-1]:.3f},{cpus[-1]:.3f},{os.getloadavg()[0]:.2f}\n")
            log.flush()
            over = args.minutes is not None and time.perf_counter() - began > args.minutes * 60
            if (k + 1) % args.report == 0 or k + 1 == args.snapshots or over:
                sizes.append((k + 1, _report(db, k + 1, args, walls, cpus, size)))
            if over:
                break
    _summary(args, walls, cpus, sizes)


CHURN_LIFETIME_H = 0.5
"""The lifetime of the pods that age a store (``--aged``): 24 times shorter than the
cluster's default, so one day of snapshots holds the pods of 24 days."""


def _timed_ingest(db: Path, snap: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one call's ingest of ``snap`` into ``db``."""
    from fleetaudit.inputs.ingest import IngestOptions, ingest
    from fleetaudit.model.store import open_store

    started, cpu = time.perf_counter(), time.process_time()
    with open_store(db) as store:
        ingest(store, [snap], IngestOptions(format="kubernetes"))
    return time.perf_counter() - started, time.process_time() - cpu


def _disk(db: Path) -> int:
    """The store's bytes on disk, its write-ahead log included."""
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))


def _rows(db: Path) -> dict[str, int]:
    from fleetaudit.model.store import open_store

    with open_store(db, read_only=True) as store:
        return {t: int(store.scalar(f"SELECT count(*) FROM {t}"))
                for t in ("nodes", "allocations", "requests", "node_events")}  # fmt: skip


def aged(args: argparse.Namespace) -> None:
    """``--aged D``: a snapshot's ingest into a store holding D days of pods, and into a new one."""
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    old, new, snap = work / "aged.duckdb", work / "new.duckdb", work / "snapshot.json"
    per_day = args.pods * 24 / args.lifetime_h
    goal = round(args.aged * per_day)
    churn = Cluster(args.nodes, args.pods, CHURN_LIFETIME_H, seed=1)
    print(f"aging a store: {goal:,} pods ({args.aged:g} days of {per_day:,.0f} pods), from a "
          f"cluster whose pods live {CHURN_LIFETIME_H} h; load {_load()}", flush=True)  # fmt: skip
    began, t, k = time.perf_counter(), START, 0
    while churn.counter < goal:
        t = START + timedelta(seconds=k * args.every)
        churn.advance(t)
        write_list(snap, churn.items(t))
        _wall, cpu = _timed_ingest(old, snap)
        k += 1
        if k % 20 == 0:
            print(f"  {k} snapshots, {churn.counter:,} pods; last ingest {cpu:.2f} s CPU; "
                  f"load {_load()}", flush=True)  # fmt: skip
    disk = _disk(old)
    print(f"aged store: {k} snapshots, {churn.counter:,} pods ({churn.counter / per_day:.1f} days'), "
          f"{disk / 2**20:,.1f} MiB on disk, rows {_rows(old)}; built in "
          f"{(time.perf_counter() - began) / 60:.1f} min; load {_load()}", flush=True)  # fmt: skip
    cluster = Cluster(args.nodes, args.pods, args.lifetime_h, seed=2)
    cluster.counter = churn.counter  # its pods and jobs are new names to the aged store
    start = t + timedelta(days=1)
    figures: dict[str, list[tuple[float, float]]] = {"aged": [], "new": []}
    for i in range(args.snapshots):
        t = start + timedelta(seconds=i * args.every)
        cluster.advance(t)
        write_list(snap, cluster.items(t))
        for label, db in (("aged", old), ("new", new)):
            figures[label].append(_timed_ingest(db, snap))
        print(f"  snapshot {i + 1}: CPU aged {figures['aged'][-1][1]:.2f} s, new "
              f"{figures['new'][-1][1]:.2f} s; load {_load()}", flush=True)  # fmt: skip
    for label, runs in figures.items():
        walls, cpus = [w for w, _c in runs[1:]], [c for _w, c in runs[1:]]
        if cpus:
            print(f"{label} store: ingest CPU median {statistics.median(cpus):.2f} s, p95 "
                  f"{_q95(cpus):.2f} s, max {max(cpus):.2f} s; wall median "
                  f"{statistics.median(walls):.2f} s, max {max(walls):.2f} s "
                  f"(snapshots 2-{len(runs)})")  # fmt: skip
    disk = _disk(old)
    print(f"aged store after them: {disk / 2**20:,.1f} MiB; load {_load()}")


def _q95(xs: list[float]) -> float:
    return sorted(xs)[max(0, math.ceil(0.95 * len(xs)) - 1)]


def _report(db: Path, done: int, args: argparse.Namespace, walls: list[float],
            cpus: list[float], size: int) -> int:  # fmt: skip
    """Print the store and the last ``--report`` snapshots' figures; returns the store's bytes."""
    disk = _disk(db)
    rows = _rows(db)
    recent_w, recent_c = walls[-args.report:], cpus[-args.report:]
    print(
        f"{done} snapshots ({done * args.every / 86400:.1f} days): store {disk / 2**20:,.1f} MiB, "
        f"rows {rows}; last snapshot {size / 2**20:.1f} MiB; ingest wall median "
        f"{statistics.median(recent_w):.2f} s, p95 {_q95(recent_w):.2f} s, max "
        f"{max(recent_w):.2f} s; CPU median {statistics.median(recent_c):.2f} s, p95 "
        f"{_q95(recent_c):.2f} s, max {max(recent_c):.2f} s (last {len(recent_w)}); "
        f"load {_load()}",
        flush=True,
    )
    return disk


def _summary(args: argparse.Namespace, walls: list[float], cpus: list[float],
             sizes: list[tuple[int, int]]) -> None:  # fmt: skip
    """The whole run: each snapshot's ingest, its growth with the history, the store's."""
    done = len(walls)
    print(
        f"all {done} snapshots: ingest wall median {statistics.median(walls):.2f} s, p95 "
        f"{_q95(walls):.2f} s, max {max(walls):.2f} s; CPU median {statistics.median(cpus):.2f} s, "
        f"p95 {_q95(cpus):.2f} s, max {max(cpus):.2f} s; load {_load()}"
    )
    if done >= 200:
        first, last = cpus[:100], cpus[-100:]
        print(
            f"CPU with the history: first 100 snapshots median {statistics.median(first):.2f} s "
            f"(p95 {_q95(first):.2f}), last 100 median {statistics.median(last):.2f} s "
            f"(p95 {_q95(last):.2f})"
        )
    days = done * args.every / 86400
    if len(sizes) >= 2 and days > 0:
        half = next((s for s in sizes if s[0] >= sizes[-1][0] / 2), sizes[0])
        if half[0] < sizes[-1][0]:
            per_day = (sizes[-1][1] - half[1]) / ((sizes[-1][0] - half[0]) * args.every / 86400)
            target = args.snapshots * args.every / 86400
            ahead = sizes[-1][1] + per_day * max(0.0, target - days)
            print(
                f"store: {sizes[-1][1] / 2**20:,.1f} MiB after {days:.1f} days, growing "
                f"{per_day / 2**20:,.1f} MiB a day (snapshots {half[0]}-{sizes[-1][0]})"
                + (f"; {target:.0f} days: {ahead / 2**30:.2f} GiB (estimate)" if days < target else "")
            )


def _ingest_child(db: str, path: str, q: Any) -> None:
    from fleetaudit.inputs.ingest import IngestOptions, ingest
    from fleetaudit.model.store import open_store

    started, cpu = time.perf_counter(), time.process_time()
    with open_store(Path(db)) as store:
        result = ingest(store, [Path(path)], IngestOptions(format="kubernetes"))
    q.put({"seconds": round(time.perf_counter() - started, 1),
           "cpu_seconds": round(time.process_time() - cpu, 1),
           "rows": {t.table: t.read for t in result.tables},
           "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)})


def big_list(args: argparse.Namespace) -> None:
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cluster = Cluster(args.nodes, 1, args.lifetime_h)
    cluster.advance(START)
    path = work / "big.json"
    goal = args.list_gib * 2**30

    def items() -> Iterator[dict[str, Any]]:
        yield from (cluster._node(n, START) for n in cluster.nodes)
        written = 0
        while written < goal:
            new = cluster._new_pod(START, age_s=cluster.rng.uniform(3600, 7200))
            new.bound, new.ends = min(new.bound, START), START + timedelta(hours=1)
            pod = cluster._pod(new, START)  # running, as most of a large cluster's pods
            written += 1100  # about one pod's indented JSON
            yield pod

    size = write_list(path, items())
    print(f"List: {size / 2**30:.2f} GiB; load {_load()}", flush=True)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    child = ctx.Process(target=_ingest_child, args=(str(work / "big.duckdb"), str(path), q))
    child.start()
    child.join()
    print(q.get() if child.exitcode == 0 else f"the ingest failed (exit {child.exitcode})")
    print(f"load {_load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--pods", type=int, default=60000)
    parser.add_argument("--snapshots", type=int, default=4320)
    parser.add_argument("--every", type=int, default=600)
    parser.add_argument("--lifetime-h", type=float, default=12.0)
    parser.add_argument("--report", type=int, default=144)
    parser.add_argument("--minutes", type=float, default=None)
    parser.add_argument("--work", type=Path, default=Path("bench-out/kubernetes-history"))
    parser.add_argument("--list-gib", type=float, default=None)
    parser.add_argument("--aged", type=float, default=None, metavar="DAYS")
    args = parser.parse_args()
    if args.list_gib is not None:
        big_list(args)
    elif args.aged is not None:
        aged(args)
    else:
        history(args)


if __name__ == "__main__":
    main()
