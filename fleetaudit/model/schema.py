"""The input tables: one source of truth for columns and rules.

Ingest validates against these specs, the store creates its tables from them,
and the time model reads the column names from here. A column's ``kind`` says
how a raw value parses and how it is stored; the checks a value must pass are
declared, not coded, so a new column is one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(str, Enum):
    """How a raw value parses, and the DuckDB type it is stored as."""

    TEXT = "VARCHAR"
    INT = "BIGINT"
    FLOAT = "DOUBLE"
    TIME = "TIMESTAMP"  # UTC, without zone
    BOOL = "BOOLEAN"


@dataclass(frozen=True)
class Column:
    """One column of an input table and the rules a value must pass."""

    name: str
    kind: Kind
    required: bool = False
    nonnegative: bool = False
    enum: tuple[str, ...] = ()
    at_most_one: bool = False  # a fraction in [0, 1]
    maximum: float | None = None  # a sanity bound: larger values are rejects, not overflows


@dataclass(frozen=True)
class Table:
    """An input table: its key, its columns in order, and the node it references."""

    name: str
    key: tuple[str, ...]
    columns: tuple[Column, ...]
    references_node: bool = False

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.required)

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)


# Sanity bounds: a value beyond them is a reject (a typo or a unit error), and
# keeps the exact micro-unit arithmetic of the time model far from overflow.
MAX_GPUS_PER_NODE = 1024
MAX_GPUS_PER_REQUEST = 1_000_000
MAX_CPUS = 1_000_000
MAX_MEMORY_GIB = 1_000_000_000
MAX_SECONDS = 10_000_000_000  # about 317 years
TIME_RANGE = ("1900-01-01", "2200-01-01")  # timestamps outside are rejects

DEFAULT_POD_GPUS = 8.0
"""A request's gpus_per_pod when it gives none: min(gpus, 8) (a share is one pod)."""

HEALTH = ("healthy", "degraded", "cordoned", "down")
# The states of a health interval (node_events): what kept a node or one GPU of it from
# taking new work, and for how long.
EVENT_STATES = ("down", "drain", "cordoned", "degraded", "unhealthy")
PRIORITY = ("high", "low")
WORKLOAD = (
    "online_inference",
    "offline_inference",
    "training",
    "development",
    "cpu_only",
    "other",
)
LOCALITY = ("any", "switch", "block", "node")

# An export's own workload labels, mapped to the categories the engines use (the
# label is kept too, in workload_label). Labels are compared in lower case with
# runs of spaces, '-', '/' and '.' read as '_'; any other label is 'other'.
WORKLOAD_SYNONYMS: dict[str, tuple[str, ...]] = {
    "online_inference": (
        "online_inference", "online", "inference", "serving", "serve", "online_serving",
        "realtime_inference", "real_time_inference", "llm_serving", "model_serving",
    ),
    "offline_inference": (
        "offline_inference", "offline", "batch_inference", "batch", "offline_serving",
        "batch_serving",
    ),
    "training": (
        "training", "train", "pretraining", "pretrain", "pre_training", "finetuning",
        "finetune", "fine_tuning", "fine_tune", "sft", "rlhf",
    ),
    "development": ("development", "dev", "notebook", "jupyter", "debug", "interactive"),
    "cpu_only": ("cpu_only", "cpu", "cpuonly"),
    "other": ("other",),
}  # fmt: skip
assert tuple(WORKLOAD_SYNONYMS) == WORKLOAD

NODES = Table(
    name="nodes",
    key=("node_id",),
    columns=(
        Column("node_id", Kind.TEXT, required=True),
        Column("gpu_model", Kind.TEXT, required=True),
        Column("gpus", Kind.INT, required=True, nonnegative=True, maximum=MAX_GPUS_PER_NODE),
        Column("cpus", Kind.FLOAT, required=True, nonnegative=True, maximum=MAX_CPUS),
        Column("memory_gib", Kind.FLOAT, nonnegative=True, maximum=MAX_MEMORY_GIB),
        Column("switch_id", Kind.TEXT),
        Column("health", Kind.TEXT, enum=HEALTH),
        Column("block_id", Kind.TEXT),  # the level above the leaf switch
    ),
)

ALLOCATIONS = Table(
    name="allocations",
    key=("alloc_id",),
    references_node=True,
    columns=(
        Column("alloc_id", Kind.TEXT, required=True),
        Column("job_id", Kind.TEXT),
        Column("node_id", Kind.TEXT, required=True),
        Column("gpus", Kind.FLOAT, required=True, nonnegative=True, maximum=MAX_GPUS_PER_NODE),
        Column("cpus", Kind.FLOAT, required=True, nonnegative=True, maximum=MAX_CPUS),
        Column("memory_gib", Kind.FLOAT, nonnegative=True, maximum=MAX_MEMORY_GIB),
        Column("priority", Kind.TEXT, required=True, enum=PRIORITY),
        Column("workload", Kind.TEXT),  # a category of WORKLOAD, from the label
        Column("workload_label", Kind.TEXT),  # the label as the export wrote it
        Column("tenant", Kind.TEXT),
        Column("start_time", Kind.TIME, required=True),
        Column("end_time", Kind.TIME),
        Column("checkpoint_interval_s", Kind.FLOAT, nonnegative=True, maximum=MAX_SECONDS),
        Column("sleepable", Kind.BOOL),
    ),
)

REQUESTS = Table(
    name="requests",
    key=("request_id",),
    columns=(
        Column("request_id", Kind.TEXT, required=True),
        Column("submit_time", Kind.TIME, required=True),
        Column("start_time", Kind.TIME),
        Column("gpu_model", Kind.TEXT),
        Column("gpus", Kind.FLOAT, required=True, nonnegative=True, maximum=MAX_GPUS_PER_REQUEST),
        Column("gpus_per_pod", Kind.FLOAT, nonnegative=True, maximum=MAX_GPUS_PER_NODE),
        Column("cpus_per_gpu", Kind.FLOAT, nonnegative=True, maximum=MAX_CPUS),
        Column("memory_gib_per_gpu", Kind.FLOAT, nonnegative=True, maximum=MAX_MEMORY_GIB),
        Column("cpus", Kind.FLOAT, nonnegative=True, maximum=MAX_CPUS),
        Column("memory_gib", Kind.FLOAT, nonnegative=True, maximum=MAX_MEMORY_GIB),
        Column("locality", Kind.TEXT, enum=LOCALITY),
        Column("duration_s", Kind.FLOAT, nonnegative=True, maximum=MAX_SECONDS),
        Column("start_deadline_s", Kind.FLOAT, nonnegative=True, maximum=MAX_SECONDS),
        Column("priority", Kind.TEXT, enum=PRIORITY),
        Column("tenant", Kind.TEXT),
        # when the request could first start (a begin time reached, a hold released, a
        # dependency met); it waits for capacity from then. Empty: from its submit_time.
        Column("eligible_time", Kind.TIME),
        # why the request could not start at the export for reasons of its own (held,
        # waiting on another job, a begin time): it is queued demand only from its
        # eligible_time, and never without one
        Column("ineligible_reason", Kind.TEXT),
    ),
)

TELEMETRY = Table(
    name="telemetry",
    key=("node_id", "gpu_index", "ts"),
    references_node=True,
    columns=(
        Column("ts", Kind.TIME, required=True),
        Column("node_id", Kind.TEXT, required=True),
        Column("gpu_index", Kind.INT, required=True, nonnegative=True, maximum=MAX_GPUS_PER_NODE),
        Column("sm_active", Kind.FLOAT, required=True, nonnegative=True, at_most_one=True),
        Column("mem_used", Kind.FLOAT, nonnegative=True, at_most_one=True),
        Column("alloc_id", Kind.TEXT),
        # which series sm_active came from (e.g. DCGM_FI_PROF_SM_ACTIVE); empty: as given
        Column("metric", Kind.TEXT),
    ),
)

NODE_EVENTS = Table(
    name="node_events",
    # one interval per node (or GPU), start, state and source: a later export that ends an
    # open interval replaces it; gpu_index and source may be empty (compared null-safely)
    key=("node_id", "gpu_index", "start_time", "state", "source"),
    references_node=True,
    columns=(
        Column("node_id", Kind.TEXT, required=True),
        # empty: the whole node; else the one GPU the event is about
        Column("gpu_index", Kind.INT, nonnegative=True, maximum=MAX_GPUS_PER_NODE),
        Column("start_time", Kind.TIME, required=True),
        Column("end_time", Kind.TIME),  # empty: still going at the export
        Column("state", Kind.TEXT, required=True, enum=EVENT_STATES),
        Column("reason", Kind.TEXT),
        Column("source", Kind.TEXT),  # which export said it, e.g. slurm:sacctmgr, dcgm:xid
    ),
)

TABLES: dict[str, Table] = {
    t.name: t for t in (NODES, ALLOCATIONS, REQUESTS, TELEMETRY, NODE_EVENTS)
}

# Ingest order within one call: a table that references nodes sees the nodes of
# the same call.
INGEST_ORDER: tuple[str, ...] = ("nodes", "allocations", "requests", "telemetry", "node_events")

# Internal column on every input table: the ingest call that loaded the row
# (negative while a row of the running call awaits its reject check).
INGEST_ID = "_ingest_id"


def table(name: str) -> Table:
    """The table called ``name``; KeyError if there is none."""
    return TABLES[name]
