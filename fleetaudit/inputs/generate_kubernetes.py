"""The synthetic fleet of :mod:`fleetaudit.inputs.generate` written as one kubectl JSON snapshot.

``write_kubectl(out, options)`` generates the fleet's native tables into a
scratch folder and writes what ``kubectl get nodes,pods -A -o json`` would have
shown at the export time into ``out/kubectl.json``, plus ``out/priority-map.txt``
naming the two priority classes:

- every node, with GPU feature discovery labels (``NVIDIA-<model>``), the switch
  domain as the Topograph leaf label, allocatable resources, and its health as
  Kubernetes says it (Ready False: down; unschedulable: cordoned; one GPU fewer
  allocatable than installed: degraded), all heartbeats at the export time;
- every allocation of the window as a pod bound to its node: running when it
  has no end, Succeeded with its finish time otherwise. A GPU share below 1 is
  a ``gpu-fraction`` annotation (KAI), whole GPUs ``nvidia.com/gpu``; gangs carry
  ``scheduling.k8s.io/group-name``;
- every request queued at the export time as its pending pods, one gang.

Pure: numpy, pyarrow and the standard library (no store, no duckdb).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from fleetaudit.inputs.generate import GenerateOptions, GenerateResult, generate_fleet
from fleetaudit.model import schema

FILE = "kubectl.json"
PRIORITY_FILE = "priority-map.txt"
PRIORITY_CLASSES = {"high": "prod-high", "low": "batch-low"}
_OWNERS = {
    "training": ("Job", "training"),
    "online_inference": ("ReplicaSet", "serving"),
    "offline_inference": ("Job", "batch-infer"),
    "development": ("Notebook", "notebook"),
    "cpu_only": ("ReplicaSet", "cpu-service"),
    "other": ("ReplicaSet", "other"),
}


def _ts(t: datetime | None) -> str | None:
    if t is None:
        return None
    if t.tzinfo is not None:
        t = t.astimezone(timezone.utc).replace(tzinfo=None)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _cpu(value: float) -> str:
    return f"{round(value * 1000)}m"


def _memory(gib: float | None) -> str:
    return f"{round((gib or 0) * 1024)}Mi"


def _nodes(rows: list[dict[str, Any]], at: str) -> Iterator[dict[str, Any]]:
    for n in rows:
        gpus = int(n["gpus"])
        health = n["health"]
        labels = {
            "kubernetes.io/hostname": n["node_id"],
            "nvidia.com/gpu.product": f"NVIDIA-{n['gpu_model']}",
            "nvidia.com/gpu.count": str(gpus),
            "nvidia.com/gpu.sharing-strategy": "none",
        }
        if n["switch_id"]:
            labels["network.topology.nvidia.com/leaf"] = n["switch_id"]
        capacity = {
            "cpu": str(int(n["cpus"])),
            "memory": _memory(n["memory_gib"]),
            "nvidia.com/gpu": str(gpus),
        }
        allocatable = dict(capacity)
        if health == "degraded":
            allocatable["nvidia.com/gpu"] = str(max(gpus - 1, 0))
        yield {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": n["node_id"], "labels": labels},
            "spec": {"unschedulable": True} if health == "cordoned" else {},
            "status": {
                "capacity": capacity,
                "allocatable": allocatable,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False" if health == "down" else "True",
                        "lastHeartbeatTime": at,
                        "lastTransitionTime": at,
                    }
                ],
            },
        }


def _resources(gpus: float, cpus: float, memory_gib: float | None) -> tuple[dict, dict]:
    requests: dict[str, str] = {"cpu": _cpu(cpus), "memory": _memory(memory_gib)}
    annotations: dict[str, str] = {}
    if gpus >= 1:
        requests["nvidia.com/gpu"] = str(int(gpus))
    elif gpus > 0:
        annotations["gpu-fraction"] = repr(float(gpus))
    return {
        "requests": requests,
        "limits": {k: v for k, v in requests.items() if k == "nvidia.com/gpu"},
    }, annotations


def _pods(rows: list[dict[str, Any]], end: datetime) -> Iterator[dict[str, Any]]:
    for a in rows:
        start = a["start_time"]
        if start is None or start > end:
            continue
        finished = a["end_time"] is not None and a["end_time"] <= end
        resources, annotations = _resources(a["gpus"], a["cpus"], a["memory_gib"])
        owner_kind, owner = _OWNERS.get(a["workload"] or "other", ("ReplicaSet", "other"))
        meta: dict[str, Any] = {
            "uid": a["alloc_id"],
            "name": a["alloc_id"],
            "namespace": a["tenant"] or "default",
            "creationTimestamp": _ts(start),
            "ownerReferences": [
                {"kind": owner_kind, "name": f"{owner}-{a['job_id']}", "controller": True}
            ],
        }
        if a["job_id"] != a["alloc_id"]:
            annotations["scheduling.k8s.io/group-name"] = a["job_id"]
        if annotations:
            meta["annotations"] = annotations
        status: dict[str, Any] = {
            "phase": "Succeeded" if finished else "Running",
            "startTime": _ts(start),
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": _ts(start)}
            ],
        }
        if finished:
            status["containerStatuses"] = [
                {
                    "name": "main",
                    "state": {
                        "terminated": {
                            "exitCode": 0,
                            "startedAt": _ts(start),
                            "finishedAt": _ts(a["end_time"]),
                        }
                    },
                }
            ]
        yield {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {
                "nodeName": a["node_id"],
                "priorityClassName": PRIORITY_CLASSES[a["priority"]],
                "containers": [{"name": "main", "resources": resources}],
            },
            "status": status,
        }


def _pending(rows: list[dict[str, Any]], end: datetime) -> Iterator[dict[str, Any]]:
    for r in rows:
        if r["submit_time"] > end or (r["start_time"] is not None and r["start_time"] <= end):
            continue
        gpus = float(r["gpus"])
        per_pod = float(r["gpus_per_pod"] or min(gpus, schema.DEFAULT_POD_GPUS))
        pods = max(1, round(gpus / per_pod)) if per_pod else 1
        cpus = (r["cpus_per_gpu"] or 0) * per_pod if per_pod else (r["cpus"] or 0)
        memory = (r["memory_gib_per_gpu"] or 0) * per_pod if per_pod else (r["memory_gib"] or 0)
        resources, annotations = _resources(per_pod, cpus, memory)
        if pods > 1:
            annotations["scheduling.k8s.io/group-name"] = r["request_id"]
        spec: dict[str, Any] = {
            "priorityClassName": PRIORITY_CLASSES[r["priority"] or "high"],
            "containers": [{"name": "main", "resources": resources}],
        }
        models = [m for m in (r["gpu_model"] or "").split("|") if m]
        if models:
            spec["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "nvidia.com/gpu.product",
                                        "operator": "In",
                                        "values": [f"NVIDIA-{m}" for m in models],
                                    }
                                ]
                            }
                        ]
                    }
                }
            }
        for k in range(pods):
            name = r["request_id"] if pods == 1 else f"{r['request_id']}-{k}"
            meta: dict[str, Any] = {
                "uid": name,
                "name": name,
                "namespace": r["tenant"] or "default",
                "creationTimestamp": _ts(r["submit_time"]),
            }
            if annotations:
                meta["annotations"] = annotations
            yield {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": meta,
                "spec": spec,
                "status": {
                    "phase": "Pending",
                    "conditions": [
                        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                    ],
                },
            }


def write_kubectl(
    out: Path,
    options: GenerateOptions,
    progress: Callable[[str, float], None] | None = None,
) -> GenerateResult:
    """Write the generated fleet as ``out/kubectl.json`` (and ``out/priority-map.txt``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".kubectl-", dir=out))
    target = out / FILE
    partial = out / f".{FILE}.partial"
    try:
        native = generate_fleet(
            scratch, replace(options, format="parquet", telemetry_days=0), progress
        )
        end = options.end.astimezone(timezone.utc)
        at = _ts(end)
        assert at is not None
        tables = {
            t: pq.read_table(native.files[t]).to_pylist()
            for t in ("nodes", "allocations", "requests")
        }
        counts = {"nodes": 0, "pods": 0, "pending pods": 0}
        with partial.open("w", encoding="utf-8") as fh:
            fh.write('{"apiVersion": "v1", "kind": "List", "metadata": {}, "items": [\n')
            first = True

            def emit(items: Iterator[dict[str, Any]], name: str) -> None:
                nonlocal first
                for item in items:
                    fh.write(("" if first else ",\n") + json.dumps(item, separators=(",", ":")))
                    first = False
                    counts[name] += 1

            emit(_nodes(tables["nodes"], at), "nodes")
            emit(_pods(tables["allocations"], end), "pods")
            emit(_pending(tables["requests"], end), "pending pods")
            fh.write("\n]}\n")
        os.replace(partial, target)
        priority_file = out / PRIORITY_FILE
        priority_file.write_text(
            "# priority classes of the generated fleet\n"
            + "".join(f"{cls} = {level}\n" for level, cls in PRIORITY_CLASSES.items()),
            encoding="utf-8",
        )
        counts["priority map"] = len(PRIORITY_CLASSES)  # its entries
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        partial.unlink(missing_ok=True)
    return GenerateResult(
        out=out,
        files={
            "nodes": target,
            "pods": target,
            "pending pods": target,
            "priority map": priority_file,
        },
        rows=counts,
        gpus=native.gpus,
    )
