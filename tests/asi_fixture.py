"""The worked fixture of the ASI 2026 adapter: 4 servers, 23 pod-hours, written as the release.

Invented rows (no data of the real release): four hourly partitions day=0/hour=22,
day=0/hour=23, day=1/hour=00 and day=1/hour=01 (t = 22..25), with the release's
column types and no day/hour columns in the files. They exercise a suffixed model
spelling, a null ASW, a server that disappears, a Standby split, a gap split, a pod
that moves to another server, a fractional request, a CPU-only pod of priority
Other, a Pending pod and the over-subscription of standby lending (t = 25 on s2:
4 standby + 2 + 3 GPUs requested on 8).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fleetaudit.inputs.asi_trace import (
    POD_SCHEMA,
    POD_TABLE,
    SERVER_SCHEMA,
    SERVER_TABLE,
    table_of,
    write_partition,
)

HOURS = (22, 23, 24, 25)

# server_id, asw_id, gpu_spec_public, gpu_count, cpu_capacity_cores, hours present
SERVERS = (
    ("s1", "asw1", "H20-96G", 8.0, 192.0, (22, 23, 24, 25)),
    ("s2", "asw1", "H20", 8.0, 192.0, (22, 23, 24, 25)),
    ("s3", "asw2", "A100-SXM4-80GB", 8.0, 128.0, (22, 23, 24, 25)),
    ("s4", None, "XPU-A", 16.0, 256.0, (22, 23, 24)),
)

T, F = True, False


def _pod(pod, workload, prio, job, model, genai, gpu, gmem_req, cpu, ready, sched, rdy):
    return {
        "pod_id": pod,
        "workload_id": workload,
        "priority_class": prio,
        "job_type_public": job,
        "model_type_public": model,
        "is_genai_request": genai,
        "gpu_request": gpu,
        "gpu_mem_request": gmem_req,
        "cpu_request_cores": cpu,
        "ready_status": ready,
        "schedule_delay_sec": sched,
        "ready_delay_sec": rdy,
    }


# per pod: its fixed columns, then (t, server, state, used, sm, gmem, cpu_u, mem_u) per hour
PODS: tuple[tuple[dict[str, Any], tuple[tuple[Any, ...], ...]], ...] = (
    (
        _pod("p-train-1", "w-train", "HP", "training", "genai", T, 8.0, 768.0, 96.0, T, 30, 120),
        tuple((t, "s1", "Running", 8.0, 560.0, 600.0, 0.4, 0.5) for t in HOURS),
    ),
    (
        _pod("p-infer-1", "w-svc", "HP", "online_inference", "genai", T, 4.0, 384.0, 32.0, T, 5, 60),
        (
            (22, "s2", "Running", 4.0, 200.0, 300.0, 0.2, 0.6),
            (23, "s2", "Running", 4.0, 200.0, 300.0, 0.2, 0.6),
            (24, "s2", "Standby", 4.0, 0.0, 300.0, 0.2, 0.6),
            (25, "s2", "Standby", 4.0, 0.0, 300.0, 0.2, 0.6),
        ),
    ),
    (
        _pod("p-lp-1", "w-batch", "LP", "offline_inference", "rec", F, 2.0, 192.0, 16.0, T, 600, 30),
        tuple((t, "s2", "Running", 2.0, 120.0, 100.0, 0.7, 0.4) for t in (24, 25)),
    ),
    (
        _pod("p-share-1", None, "HP", "online_inference", "cv", F, 0.5, 24.0, 4.0, T, 2, 10),
        (
            (22, "s2", "Running", 0.5, 30.0, 10.0, 0.3, 0.3),
            (24, "s2", "Succeeded", 0.25, 30.0, 10.0, 0.3, 0.3),
        ),
    ),
    (
        _pod("p-cpu-1", "w-etl", "Other", "unknown", "unknown", F, 0.0, 0.0, 8.0, T, None, None),
        tuple((t, "s3", "Running", 0.0, None, None, 0.9, 0.5) for t in HOURS),
    ),
    (
        _pod("p-dev-1", "w-nb", "HP", "dev", "dev", F, 1.0, 96.0, 12.0, T, 1, 20),
        (
            (22, "s3", "Running", 1.0, 10.0, 5.0, 0.1, 0.2),
            (23, "s3", "Succeeded", 0.5, None, None, None, None),
        ),
    ),
    (
        _pod("p-mig-1", "w-train2", "HP", "training", "rec", F, 4.0, 320.0, 48.0, T, 40, 90),
        (
            (22, "s3", "Running", 4.0, 320.0, 200.0, 0.5, 0.5),
            (23, "s4", "Running", 4.0, 320.0, 200.0, 0.5, 0.5),
            (24, "s4", "Running", 4.0, 320.0, 200.0, 0.5, 0.5),
        ),
    ),
    (
        _pod("p-pend-1", "w-svc2", "HP", "online_inference", "embedding", F, 1.0, 48.0, 8.0, F,
             None, None),
        ((25, "s3", "Pending", 0.0, None, None, None, None),),
    ),
    (
        _pod("p-lp-2", "w-batch", "LP", "offline_inference", "rec", F, 3.0, 288.0, 24.0, T, 900, 30),
        ((25, "s2", "Running", 3.0, 150.0, 150.0, 0.8, 0.4),),
    ),
)  # fmt: skip


def server_rows(t: int) -> list[dict[str, Any]]:
    return [
        {
            "server_id": sid,
            "cluster_id": "c1",
            "asw_id": asw,
            "gpu_spec_public": spec,
            "gpu_count": gpus,
            "cpu_capacity_cores": cpus,
        }
        for sid, asw, spec, gpus, cpus, present in SERVERS
        if t in present
    ]


def pod_rows(t: int) -> list[dict[str, Any]]:
    servers = {s[0]: s for s in SERVERS}
    rows = []
    for fixed, hours in PODS:
        for hour, sid, state, used, sm, gmem, cpu_u, mem_u in hours:
            if hour != t:
                continue
            _, _, spec, gpus, cpus, _ = servers[sid]
            rows.append(
                {
                    **fixed,
                    "server_id": sid,
                    "cluster_id": "c1",
                    "state_public": state,
                    "gpu_spec_public": spec,
                    "server_gpu_count": gpus,
                    "server_cpu_capacity_cores": cpus,
                    "used_gpu_hours": used,
                    "avg_gpu_sm_util": sm,
                    "avg_gpu_mem_gib": gmem,
                    "avg_cpu_request_util": cpu_u,
                    "avg_memory_util": mem_u,
                }
            )
    return rows


def write_fixture(root: Path) -> Path:
    """Write the fixture's release under ``root``; returns ``root``."""
    for t in HOURS:
        day, hour = divmod(t, 24)
        write_partition(root, SERVER_TABLE, day, hour, table_of(server_rows(t), SERVER_SCHEMA))
        write_partition(root, POD_TABLE, day, hour, table_of(pod_rows(t), POD_SCHEMA))
    return root
