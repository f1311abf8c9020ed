"""The schedulability predicate of SPEC §3: instances of a request shape and the GPU ledger.

Pure functions over the node-state frame of :func:`fleetaudit.model.occupancy.node_state`
(one row per node, with free capacity at t and over the shape's window W). The
predicate, the ledger and the nearest misses all come from one per-node frame
(:func:`node_slots`), so they cannot disagree.

Per eligible node (model in the shape's set, healthy), over W:

- ``interval`` = free GPUs at t - free GPUs over W;
- ``gpu_slots`` = floor(free GPUs over W / p); ``fragment`` = the remainder;
- ``slots`` = min(gpu_slots, CPU slots, memory slots); ``cpu_memory`` = (gpu_slots - slots) x p;
- per group (a switch domain for ``switch``, a block domain for ``block``
  (:func:`fleetaudit.model.occupancy.block_domains`), the model for ``any``, the node
  for ``node``; an instance never spans two models): instances = floor(slots / k),
  ``topology`` = (slots - instances x k) x p.

So idle = usable + interval + fragment + cpu_memory + topology, exactly.
A share shape (G < 1) counts pods per GPU (floor(1/G) on a free GPU,
floor((1 - fill)/G) on a partly filled one) and has no stranded split.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import compress
from typing import Any

import polars as pl

from fleetaudit.core.errors import UsageError
from fleetaudit.model import schema
from fleetaudit.model.capacity import (
    BLOCK_DOMAIN,
    UNBOUNDED,
    Pod,
    block_domains,
    closed_fills,
    gang_instances,
    slot_exprs,
    switch_domains,
    to_quantity,
    usable_expr,
)

LOCALITIES = ("any", "switch", "block", "node")
CAUSES = ("interval", "fragment", "cpu_memory", "topology")


def json_number(value: float) -> int | float:
    """An integral float as int (JSON shows 8, not 8.0), else the float."""
    return int(value) if float(value).is_integer() else float(value)


@dataclass(frozen=True)
class Shape:
    """A request shape (SPEC §3). Build it with :func:`make_shape` to apply the defaults."""

    gpu_model: str | None
    gpus: float
    gpus_per_pod: float
    cpus_per_gpu: float = 0.0
    memory_gib_per_gpu: float = 0.0
    locality: str = "node"
    duration_s: float | None = None

    @property
    def models(self) -> tuple[str, ...] | None:
        """The allowed models, or None for any model."""
        if not self.gpu_model:
            return None
        return tuple(sorted({m.strip() for m in self.gpu_model.split("|") if m.strip()}))

    @property
    def is_share(self) -> bool:
        return 0 < self.gpus < 1

    @property
    def pods(self) -> int:
        """k: pods per instance."""
        if self.is_share or self.gpus == 0:
            return 1
        return round(self.gpus / self.gpus_per_pod)

    def as_json(self) -> dict[str, Any]:
        return {
            "gpu_model": self.gpu_model,
            "gpus": json_number(self.gpus),
            "gpus_per_pod": json_number(self.gpus_per_pod),
            "cpus_per_gpu": float(self.cpus_per_gpu),
            "memory_gib_per_gpu": float(self.memory_gib_per_gpu),
            "locality": self.locality,
            "duration_s": None if self.duration_s is None else float(self.duration_s),
        }

    def label(self) -> str:
        """A short human label (numbers to 4 significant digits); the JSON has exact values."""
        text = f"{self.gpu_model or 'any'} {_short(self.gpus)} GPU"
        if self.pods > 1:
            text += f" ({self.pods}x{_short(self.gpus_per_pod)})"
        if self.cpus_per_gpu:
            text += f" x{_short(self.cpus_per_gpu)} CPU"
        if self.memory_gib_per_gpu:
            text += f" x{_short(self.memory_gib_per_gpu)} GiB"
        text += f" {self.locality}"
        if self.duration_s:
            text += f" for {_duration_label(self.duration_s)}"
        return text



def default_locality(pods: int) -> str:
    """A request's locality when it gives none: ``node`` for one pod, else ``switch``.

    >>> default_locality(1), default_locality(4)
    ('node', 'switch')
    """
    return "node" if pods <= 1 else "switch"


DURATION_CLASSES_S = (900, 3600, 7200, 14400, 28800, 43200, 86400, 172800, 604800)
"""The ladder of duration classes (15m, 1h, 2h, 4h, 8h, 12h, 1d, 2d, 7d), in seconds."""
_WEEK_S = 604800


def duration_class(seconds: float | None) -> float | None:
    """The duration class of a request: its duration rounded up to the ladder.

    Beyond 7 days ("longer"), a duration rounds up to a whole number of weeks.
    No duration (or 0) stays None: the shape's window is the instant alone.

    >>> [duration_class(s) for s in (None, 0, 1, 900, 901, 3435, 3437, 90000, 700000)]
    [None, None, 900.0, 900.0, 3600.0, 3600.0, 3600.0, 172800.0, 1209600.0]
    """
    if seconds is None or not seconds > 0:  # None, 0 and NaN: no duration
        return None
    for bound in DURATION_CLASSES_S:
        if seconds <= bound:
            return float(bound)
    return float(math.ceil(seconds / _WEEK_S) * _WEEK_S)


def duration_class_expr(column: str = "duration_s") -> pl.Expr:
    """:func:`duration_class` as a polars expression over ``column`` (nulls stay null)."""
    value = pl.col(column).cast(pl.Float64)
    out: Any = pl.when(value.is_null() | ~(value > 0)).then(None)  # Then, then ChainedThen
    for bound in DURATION_CLASSES_S:
        out = out.when(value <= bound).then(pl.lit(float(bound)))
    return out.otherwise((value / _WEEK_S).ceil() * _WEEK_S).alias(column)


def _short(value: float) -> str:
    return f"{value:.4g}"


def _duration_label(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{json_number(seconds)}s"


def make_shape(
    gpu_model: str | None,
    gpus: float,
    gpus_per_pod: float | None = None,
    cpus_per_gpu: float | None = None,
    memory_gib_per_gpu: float | None = None,
    locality: str | None = None,
    duration_s: float | None = None,
) -> Shape:
    """A shape with SPEC §1's defaults, checked; :class:`UsageError` names what is wrong.

    >>> make_shape("H20", 256).locality, make_shape("H20", 256).gpus_per_pod
    ('switch', 8.0)
    >>> make_shape("H20", 0.5).pods
    1
    """
    for name, value in (
        ("gpus", gpus),
        ("gpus_per_pod", gpus_per_pod),
        ("cpus_per_gpu", cpus_per_gpu),
        ("memory_gib_per_gpu", memory_gib_per_gpu),
        ("duration", duration_s),
    ):
        if value is not None and (not math.isfinite(value) or value < 0):
            raise UsageError(
                f"--{name.replace('_', '-')}: give a finite number of 0 or more, "
                f"not {json_number(value)}"
            )
    for name, value, bound in (
        ("gpus", gpus, schema.MAX_GPUS_PER_REQUEST),
        ("gpus_per_pod", gpus_per_pod, schema.MAX_GPUS_PER_NODE),
        ("cpus_per_gpu", cpus_per_gpu, schema.MAX_CPUS),
        ("memory_gib_per_gpu", memory_gib_per_gpu, schema.MAX_MEMORY_GIB),
        ("duration", duration_s, schema.MAX_SECONDS),
    ):
        if value is not None and value > bound:
            raise UsageError(
                f"--{name.replace('_', '-')}: {value:g} is above the sanity bound {bound:,} "
                "(the bound ingest applies to requests)"
            )
    if gpus <= 0:
        raise UsageError("--gpus: a shape asks for more than 0 GPUs")
    gpus = float(gpus)
    per_pod = (
        float(gpus_per_pod)
        if gpus_per_pod is not None
        else (gpus if gpus < 1 else min(gpus, schema.DEFAULT_POD_GPUS))
    )
    if gpus < 1:
        if per_pod != gpus:
            raise UsageError(
                f"--gpus-per-pod: a share shape ({json_number(gpus)} of one GPU) is one pod of {json_number(gpus)}"
            )
    else:
        if per_pod < 1 or not per_pod.is_integer():
            raise UsageError(f"--gpus-per-pod: {json_number(per_pod)} is not a whole number of GPUs")
        if not gpus.is_integer() or gpus % per_pod != 0:
            raise UsageError(
                f"--gpus: {json_number(gpus)} is not a multiple of gpus_per_pod {json_number(per_pod)}"
            )
    pods = 1 if gpus < 1 else round(gpus / per_pod)
    place = locality or default_locality(pods)
    if place not in LOCALITIES:
        raise UsageError(f"--locality: unknown value {place!r} (expected {', '.join(LOCALITIES)})")
    if place == "node" and pods > 1:
        raise UsageError(
            f"--locality node with {pods} pods: a node hosts one pod; use switch, block or any"
        )
    return Shape(
        gpu_model=gpu_model or None,
        gpus=float(gpus),
        gpus_per_pod=per_pod,
        cpus_per_gpu=float(cpus_per_gpu or 0.0),
        memory_gib_per_gpu=float(memory_gib_per_gpu or 0.0),
        locality=place,
        duration_s=float(duration_s) if duration_s else None,
    )


SHAPE_COLUMNS = (
    "gpu_model", "gpus", "gpus_per_pod", "cpus_per_gpu", "memory_gib_per_gpu", "locality", "duration_s",
)  # fmt: skip
"""A request's columns that make its shape, in :func:`make_shape`'s order."""


def request_shape(row: Mapping[str, Any]) -> Shape | None:
    """The shape of a request row (its :data:`SHAPE_COLUMNS`; an absent one is None),
    or None where it asks for no GPU or its columns make no valid shape.

    >>> request_shape({"gpu_model": "H20", "gpus": 16}) == make_shape("H20", 16)
    True
    >>> request_shape({"gpus": 0}), request_shape({"gpus": 8, "gpus_per_pod": -1})
    (None, None)
    """
    gpus = row.get("gpus")
    if gpus is None or gpus <= 0:
        return None
    try:
        return make_shape(
            row.get("gpu_model"), gpus, row.get("gpus_per_pod"), row.get("cpus_per_gpu"),
            row.get("memory_gib_per_gpu"), row.get("locality"), row.get("duration_s"),
        )  # fmt: skip
    except UsageError:
        return None


def beyond_fleet(shape: Shape, nodes: pl.DataFrame) -> str | None:
    """Why ``shape`` can never start on this inventory (whatever is free), or None.

    ``nodes`` has node_id, gpu_model, gpus and switch_id; health does not matter
    (a down node may come back). A node without a switch is a domain by itself.

    >>> nodes = pl.DataFrame({"node_id": ["a", "b"], "gpu_model": ["H20", "H20"],
    ...     "gpus": [8, 8], "switch_id": ["s", None]})
    >>> beyond_fleet(make_shape("H20", 16), nodes) is None
    False
    >>> print(beyond_fleet(make_shape("H20", 32), nodes))
    H20 32 GPU (4x8) switch asks for 32 GPUs, more than the 16 installed on its models; it can never start
    """
    return beyond_fleet_all([shape], nodes)[0]


def beyond_fleet_all(shapes: Sequence[Shape], nodes: pl.DataFrame) -> list[str | None]:
    """:func:`beyond_fleet` of each shape, in their order; the inventory's figures are
    computed once per set of models (and pod size), not once per shape."""
    inventory: dict[tuple[str, ...] | None, tuple[pl.DataFrame, float, float]] = {}
    most_pods: dict[tuple[tuple[str, ...] | None, float], int] = {}
    notes: list[str | None] = []
    for shape in shapes:
        models = shape.models
        if models not in inventory:
            mine = nodes if models is None else nodes.filter(pl.col("gpu_model").is_in(list(models)))
            total = float(mine["gpus"].sum() or 0)
            largest = float(mine["gpus"].max() or 0)  # type: ignore[arg-type]
            inventory[models] = (mine, total, largest)
        mine, total, largest = inventory[models]
        most = None
        if shape.locality == "switch" and shape.pods > 1 and not shape.is_share:
            if (models, shape.gpus_per_pod) not in most_pods:
                per_domain = mine.with_columns(switch_domains(mine).alias("_domain"))
                per_domain = per_domain.group_by("gpu_model", "_domain").agg(
                    (pl.col("gpus") // shape.gpus_per_pod).sum().alias("pods")
                )
                most_pods[(models, shape.gpus_per_pod)] = int(per_domain["pods"].max() or 0)  # type: ignore[arg-type]
            most = most_pods[(models, shape.gpus_per_pod)]
        notes.append(_beyond(shape, total, largest, most))
    return notes


def _beyond(shape: Shape, total: float, largest: float, most: int | None) -> str | None:
    """:func:`beyond_fleet` from the GPUs installed on the shape's models, their largest
    node, and (a switch shape of several pods) the most pods one switch domain holds."""
    label = shape.label()
    if shape.is_share:
        if largest >= 1:
            return None
        return f"{label}: no node of its models has a GPU; it can never start"
    if shape.gpus > total:
        return (
            f"{label} asks for {json_number(shape.gpus)} GPUs, more than the {json_number(total)} "
            "installed on its models; it can never start"
        )
    if shape.gpus_per_pod > largest:
        return (
            f"{label}: a pod of {json_number(shape.gpus_per_pod)} GPUs is larger than any node of "
            f"its models ({json_number(largest)} GPUs); it can never start"
        )
    if most is not None and most < shape.pods:
        return (
            f"{label} needs {shape.pods} pods in one switch domain of one model; the largest "
            f"holds {most}; it can never start"
        )
    return None


def check_models(shape: Shape, known: list[str]) -> Shape:
    """The shape with its models spelled as the nodes spell them (``--model h20`` is
    ``H20``: matched without case); fail when a model of the shape is on no node.

    >>> check_models(make_shape("h20|H800", 8), ["H20", "H800"]).gpu_model
    'H20|H800'
    """
    if not shape.models:
        return shape
    spelled = {m.casefold(): m for m in known}
    resolved = []
    for model in shape.models:
        found = model if model in known else spelled.get(model.casefold())
        if found is None:
            raise UsageError(f"no node has model {model}; models are: {', '.join(sorted(known))}")
        resolved.append(found)
    if resolved == list(shape.models):
        return shape  # spelled as the nodes spell them
    return replace(shape, gpu_model="|".join(sorted(resolved)))


@dataclass(frozen=True)
class Ledger:
    """GPUs of the shape's models at t (SPEC §3), adding up exactly."""

    installed: float
    unhealthy: float
    allocated_high: float
    allocated_low: float
    idle: float
    usable: float
    stranded: dict[str, float] | None  # by cause; None for share shapes

    def as_json(self) -> dict[str, Any]:
        return {
            "installed": json_number(self.installed),
            "unhealthy": json_number(self.unhealthy),
            "allocated_high": json_number(self.allocated_high),
            "allocated_low": json_number(self.allocated_low),
            "idle": json_number(self.idle),
            "usable": json_number(self.usable),
            "stranded": None
            if self.stranded is None
            else {cause: json_number(self.stranded[cause]) for cause in CAUSES},
        }


@dataclass(frozen=True)
class Evaluation:
    """The predicate for one shape at one instant."""

    shape: Shape
    instances: int
    ledger: Ledger
    slots: pl.DataFrame = field(repr=False)  # per eligible node: node_slots()

    def with_instances(self, instances: int) -> Evaluation:
        return replace(self, instances=instances)


def _eligible(state: pl.DataFrame, shape: Shape) -> pl.Expr:
    return _in_models(shape) & usable_expr(state)


def node_slots(state: pl.DataFrame, shape: Shape) -> pl.DataFrame:
    """Per eligible node: slots over W and the stranded GPUs by cause (before topology).

    Args:
        state: :func:`fleetaudit.model.occupancy.node_state` at t with the shape's duration.
        shape: the shape.

    Returns:
        node_id, gpu_model, domain (and block_domain for a block shape), free_gpus,
        slots, gpu_slots, cpu_slots,
        memory_slots, interval, fragment, cpu_memory (GPUs), sorted by node_id.
    """
    return _node_slots(state, shape).collect()


def _node_slots(state: pl.DataFrame, shape: Shape) -> pl.LazyFrame:
    """:func:`node_slots`, as a plan."""
    p = shape.gpus_per_pod
    domains = ["domain"]
    frame = state.lazy()
    if shape.locality == "block":
        # per node, so the same whether computed before or after the filter
        frame = frame.with_columns(block_domains(state))
        domains.append(BLOCK_DOMAIN)
    eligible = frame.filter(_eligible(state, shape))
    # the slot count is the capacity model's (fleetaudit.model.capacity.node_slots): with a
    # duration, a partly filled GPU counts only where nothing starts in W, and not on a
    # node the record over-commits
    exprs = slot_exprs(Pod.of(shape), over=closed_fills(state))
    slots = eligible.select(
        "node_id",
        "gpu_model",
        *domains,
        "free_gpus",
        *exprs.values(),
        (pl.col("free_gpus") - pl.col("free_gpus_window")).alias("interval"),
        "free_gpus_window",
    ).with_columns(
        pl.min_horizontal("gpu_slots", "cpu_slots", "memory_slots").alias("slots"),
    )
    if shape.is_share:
        slots = slots.with_columns(pl.lit(0).alias("fragment"), pl.lit(0.0).alias("cpu_memory"))
    else:
        slots = slots.with_columns(
            (pl.col("free_gpus_window") - pl.col("gpu_slots") * round(p)).alias("fragment"),
            ((pl.col("gpu_slots") - pl.col("slots")) * p).alias("cpu_memory"),
        )
    return slots.drop("free_gpus_window").sort("node_id")


def group_key(shape: Shape) -> list[str]:
    """The columns an instance must stay within (always the model)."""
    if shape.locality == "switch":
        return ["gpu_model", "domain"]
    if shape.locality == "block":
        return ["gpu_model", BLOCK_DOMAIN]
    if shape.locality == "any":
        return ["gpu_model"]
    return ["node_id"]


def group_slots(slots: pl.DataFrame, shape: Shape) -> pl.DataFrame:
    """Slots per group (domain, model or node), its instances and its topology-stranded GPUs."""
    return _group_slots(slots.lazy(), shape).collect()


def _group_slots(slots: pl.LazyFrame, shape: Shape) -> pl.LazyFrame:
    """:func:`group_slots`, as a plan."""
    k = shape.pods
    key = group_key(shape)
    instances, left = gang_instances(pl.col("slots"), k)
    return (
        slots.group_by(key)
        .agg(pl.col("slots").sum())
        .with_columns(instances.alias("instances"), (left * shape.gpus_per_pod).alias("topology"))
        .sort(key)
    )


def evaluate(state: pl.DataFrame, shape: Shape) -> Evaluation:
    """Instances of ``shape`` and its GPU ledger at the state's instant.

    >>> import polars as pl
    >>> state = pl.DataFrame({"node_id": ["a", "b"], "gpu_model": ["H20", "H20"],
    ...     "health": ["healthy", "healthy"], "domain": ["s", "s"], "gpus": [8, 8],
    ...     "gpus_used": [2, 5], "gpus_used_high": [2, 5], "free_gpus": [6, 3],
    ...     "free_gpus_window": [6, 3], "free_cpus_window": [64.0, 64.0],
    ...     "free_memory_gib_window": [None, None], "share_fills": [[], []]})
    >>> e = evaluate(state, make_shape("H20", 4))
    >>> e.instances, e.ledger.usable, e.ledger.stranded["fragment"]
    (1, 4.0, 5.0)
    """
    return evaluate_all([(state, shape)])[0]


def evaluate_all(cases: Sequence[tuple[pl.DataFrame, Shape]]) -> list[Evaluation]:
    """:func:`evaluate` of each (state, shape), in their order.

    The same plans as one :func:`evaluate` per shape, collected together (two rounds
    for any number of shapes), and the ledger's sums per GPU model once per state that
    several shapes share: a call that evaluates every queued shape pays for the work,
    not for a thousand small collects.
    """
    shared = Counter(id(state) for state, _ in cases)
    by_model: dict[int, int] = {}  # id(state) -> position of its per-model sums
    sums_of: list[int] = []  # per case: position of its sums (alone, or per model)
    plans: list[pl.LazyFrame] = []
    for state, shape in cases:
        if shared[id(state)] == 1:  # one shape: its sums alone
            sums_of.append(len(plans))
            plans.append(state.lazy().filter(_in_models(shape)).select(ledger_exprs(state)))
            continue
        if id(state) not in by_model:
            by_model[id(state)] = len(plans)
            plans.append(state.lazy().group_by("gpu_model").agg(ledger_exprs(state)))
        sums_of.append(by_model[id(state)])
    slots = _collect([_node_slots(state, shape) for state, shape in cases])
    done = _collect(
        [*(_group_slots(frame.lazy(), shape) for frame, (_, shape) in zip(slots, cases, strict=True)),
         *plans]  # fmt: skip
    )
    groups, sums = done[: len(cases)], done[len(cases) :]
    # the per-model sums as Python lists, read once per state: a polars filter of a few
    # rows for each of a thousand shapes costs more than the evaluation itself
    per_model: dict[int, dict[str, list[Any]]] = {}
    evaluations = []
    for (state, shape), frame, grouped, at in zip(cases, slots, groups, sums_of, strict=True):
        if shared[id(state)] == 1:
            columns = {name: sums[at][name].to_list() for name in _LEDGER_SUMS}
        else:
            if at not in per_model:
                per_model[at] = sums[at].to_dict(as_series=False)
            models, rows = shape.models, per_model[at]
            mine = [models is None or m in models for m in rows["gpu_model"]]
            columns = {name: list(compress(rows[name], mine)) for name in _LEDGER_SUMS}
        # whole GPUs: per-model sums add up exactly in any order
        totals = {name: sum(v or 0 for v in columns[name]) for name in _LEDGER_SUMS}
        instances = int(grouped["instances"].sum())
        evaluations.append(
            Evaluation(shape, instances, _ledger(totals, shape, frame, grouped, instances), frame)
        )
    return evaluations


def _collect(plans: list[pl.LazyFrame]) -> list[pl.DataFrame]:
    """The plans' frames: together for many (one call), one by one for a single shape's
    few (collect_all's thread pool costs more than it saves there)."""
    if len(plans) <= 2:
        return [plan.collect() for plan in plans]
    return pl.collect_all(plans)


_LEDGER_SUMS = ("installed", "unhealthy", "allocated_high", "allocated_low", "idle")


def _in_models(shape: Shape) -> pl.Expr:
    return pl.lit(True) if shape.models is None else pl.col("gpu_model").is_in(list(shape.models))


def ledger_exprs(state: pl.DataFrame) -> list[pl.Expr]:
    """The ledger's sums (:data:`_LEDGER_SUMS`) over a state's rows: the GPUs installed,
    unhealthy, allocated high and low and idle (allocated GPUs capped at the node's GPUs).

    A node whose ``health`` (over all the time) is not healthy is unhealthy whole; on
    the others, the GPUs out of service at t that no work holds (gpus_unhealthy, from
    health intervals) are unhealthy, and work on them still counts as allocated."""
    healthy = usable_expr(state)
    used = pl.min_horizontal("gpus_used", "gpus")
    high = pl.min_horizontal("gpus_used_high", used)
    unhealthy = pl.col("gpus").filter(~healthy).sum()
    idle = pl.col("gpus") - used
    if "gpus_unhealthy" in state.columns:
        unhealthy = unhealthy + pl.col("gpus_unhealthy").filter(healthy).sum()
        idle = idle - pl.col("gpus_unhealthy")
    return [
        pl.col("gpus").sum().alias("installed"),
        unhealthy.alias("unhealthy"),
        high.filter(healthy).sum().alias("allocated_high"),
        (used - high).filter(healthy).sum().alias("allocated_low"),
        idle.filter(healthy).sum().alias("idle"),
    ]


def ledger(
    state: pl.DataFrame, shape: Shape, slots: pl.DataFrame, groups: pl.DataFrame, instances: int
) -> Ledger:
    """The GPU ledger of the shape's models (SPEC §3).

    Allocated GPUs are capped at the node's GPUs so the identity holds even when
    the data over-commits a node.
    """
    sums = state.lazy().filter(_in_models(shape)).select(ledger_exprs(state)).collect()
    return _ledger(sums.row(0, named=True), shape, slots, groups, instances)


def _ledger(
    sums: dict[str, Any], shape: Shape, slots: pl.DataFrame, groups: pl.DataFrame, instances: int
) -> Ledger:
    usable = instances * shape.gpus
    stranded: dict[str, float] | None = None
    if not shape.is_share:
        stranded = {
            "interval": float(slots["interval"].sum()),
            "fragment": float(slots["fragment"].sum()),
            "cpu_memory": float(slots["cpu_memory"].sum()),
            "topology": float(groups["topology"].sum()),
        }
    return Ledger(
        installed=float(sums["installed"] or 0),
        unhealthy=float(sums["unhealthy"] or 0),
        allocated_high=float(sums["allocated_high"] or 0),
        allocated_low=float(sums["allocated_low"] or 0),
        idle=float(sums["idle"] or 0),
        usable=float(usable),
        stranded=stranded,
    )


# -- nearest misses ----------------------------------------------------------------------


def nearest_misses(evaluation: Evaluation, state: pl.DataFrame, limit: int = 5) -> pl.DataFrame:
    """The groups (switch domains, or nodes) that lack least to host one more instance.

    Groups rank by what their best nodes lack in all for the missing pods: GPUs,
    then CPUs, then memory, then the pods missing; fewest first, for every
    locality (so a node lacking one GPU comes before a full node lacking eight).

    For each group: the pods it still lacks, and, for its best nodes, what one
    more pod there lacks in GPUs, CPUs and memory, and how many of its free GPUs
    are taken during W (interval).

    Returns:
        group, missing_pods, node_id, lacks_gpus, lacks_cpus, lacks_memory_gib,
        busy_in_window_gpus; one row per (group, node) shown, best groups first.
    """
    shape = evaluation.shape
    k = shape.pods
    p = shape.gpus_per_pod
    slots = evaluation.slots
    groups = group_slots(slots, shape).with_columns(
        (k - (pl.col("slots") - pl.col("instances") * k)).alias("missing_pods")
    )
    key = group_key(shape)
    window = state.select(
        "node_id", "free_gpus_window", "free_cpus_window", "free_memory_gib_window"
    )
    nodes = slots.join(window, on="node_id").with_columns(
        # what the next pod on this node lacks, beyond the pods it already gives
        (((pl.col("slots") + 1) * p - pl.col("free_gpus_window")).clip(lower_bound=0)).alias(
            "lacks_gpus"
        ),
        (
            ((pl.col("slots") + 1) * p * shape.cpus_per_gpu - pl.col("free_cpus_window")).clip(
                lower_bound=0
            )
        ).alias("lacks_cpus"),
        (
            (
                (pl.col("slots") + 1) * p * shape.memory_gib_per_gpu
                - pl.col("free_memory_gib_window").fill_null(to_quantity(UNBOUNDED))
            ).clip(lower_bound=0)
        ).alias("lacks_memory_gib"),
        pl.col("interval").alias("busy_in_window_gpus"),
    )
    group_label = pl.concat_str([pl.col(c).cast(pl.Utf8) for c in key], separator="/").alias(
        "group"
    )
    lacks = ["lacks_gpus", "lacks_cpus", "lacks_memory_gib"]
    # per group, the nodes closest to giving the missing pods: those shown
    shown = (
        nodes.join(groups.select(*key, "missing_pods"), on=key)
        .with_columns(group_label)
        .sort(["group", *lacks, "node_id"])
        .with_columns(pl.int_range(pl.len()).over("group").alias("_rank"))
        .filter(pl.col("_rank") < pl.col("missing_pods").clip(upper_bound=limit))
    )
    # groups rank by what they lack in all (GPUs, then CPUs, then memory), fewest first
    totals = shown.group_by("group").agg(pl.col(lacks).sum().name.prefix("_total_"))
    best = (
        totals.join(shown.select("group", "missing_pods").unique(), on="group")
        .sort([*(f"_total_{c}" for c in lacks), "missing_pods", "group"])
        .head(limit)
        .with_columns(pl.int_range(pl.len()).alias("_group_rank"))
    )
    return (
        shown.join(best.select("group", "_group_rank"), on="group")
        .sort(["_group_rank", "_rank"])
        .select(
            "group",
            "missing_pods",
            "node_id",
            "lacks_gpus",
            "lacks_cpus",
            "lacks_memory_gib",
            "busy_in_window_gpus",
        )
    )
