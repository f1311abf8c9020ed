"""The budget of the fuzz tests (marker ``fuzz``): hypothesis settings read once.

``FLEETAUDIT_FUZZ_EXAMPLES`` examples per test (default 200: what CI runs), no deadline
(the shared 2-core machines stall for seconds at a time). A bug a fuzz test finds
becomes a case of its own in tests/test_hostile.py, the hostile corpus.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

FUZZ_EXAMPLES = int(os.environ.get("FLEETAUDIT_FUZZ_EXAMPLES") or 200)

FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


# A row that passes, per input table (a node n1 of 8 GPUs is its node), over which hostile
# values are laid.
VALID_ROWS: dict[str, dict[str, str]] = {
    "nodes": {"node_id": "n1", "gpu_model": "H20", "gpus": "8", "cpus": "64"},
    "allocations": {
        "alloc_id": "a1", "node_id": "n1", "gpus": "1", "cpus": "4", "priority": "high",
        "start_time": "2026-01-01T00:00:00Z",
    },
    "requests": {"request_id": "r1", "submit_time": "2026-01-01T00:00:00Z", "gpus": "1"},
    "telemetry": {
        "ts": "2026-01-01T00:00:00Z", "node_id": "n1", "gpu_index": "0", "sm_active": "0.5",
    },
    "node_events": {"node_id": "n1", "start_time": "2026-01-01T00:00:00Z", "state": "down"},
}  # fmt: skip
NODE_N1 = "node_id,gpu_model,gpus,cpus\nn1,H20,8,64\n"
