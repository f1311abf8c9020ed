"""``fleetaudit shapes``: read the store, evaluate shapes, return a result (no printing).

Orchestration only: the predicate is :mod:`fleetaudit.model.shapes`, reclaim
:mod:`fleetaudit.whatif.reclaim`, history and calibration :mod:`fleetaudit.model.history`.
One load of nodes and allocations serves every shape of a call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from fleetaudit.api import (
    StoreOptions,
    check_scenario,
    data_notes,
    holds_requests,
    ineligible_note,
    load_frames,
    load_health,
    reading,
    resolve_at,
)
from fleetaudit.core.errors import InputError, UsageError
from fleetaudit.core.lazy import LazyModule
from fleetaudit.core.times import parse_duration
from fleetaudit.model import occupancy
from fleetaudit.model.capacity import Health
from fleetaudit.model.shapes import (
    SHAPE_COLUMNS,
    Evaluation,
    Shape,
    beyond_fleet_all,
    check_models,
    duration_class,
    duration_class_expr,
    evaluate_all,
    make_shape,
    nearest_misses,
)
from fleetaudit.model.store import Store

if TYPE_CHECKING:
    from fleetaudit.model import history as history_mod
    from fleetaudit.whatif import reclaim as reclaim_mod
else:  # --history and --reclaim only: history imports numpy, a tenth of the start-up
    history_mod = LazyModule("fleetaudit.model.history")
    reclaim_mod = LazyModule("fleetaudit.whatif.reclaim")


@dataclass(frozen=True)
class ShapesOptions:
    """What ``fleetaudit shapes`` evaluates (defaults are the command line's)."""

    shapes: tuple[Shape, ...] = ()  # empty: every distinct shape queued at t
    at: datetime | None = None
    scenario: str | None = None
    reclaim: bool = False
    history: timedelta | None = None
    step: timedelta = timedelta(minutes=5)
    deadline: timedelta | None = None
    max_instances: int | None = None
    explain: bool = False


@dataclass(frozen=True)
class ShapeReport:
    """Everything reported for one shape."""

    evaluation: Evaluation
    queued: int
    capped: bool = False
    reclaim: reclaim_mod.Reclaim | None = None
    history: history_mod.History | None = None
    calibration: history_mod.Calibration | None = None
    misses: pl.DataFrame | None = field(default=None, repr=False)

    @property
    def instances(self) -> int:
        return self.evaluation.instances


@dataclass(frozen=True)
class ShapesResult:
    """The shapes evaluated at one instant."""

    at: datetime
    scenario: str | None
    shapes: tuple[ShapeReport, ...]
    notes: tuple[str, ...] = ()


def _same_shape(frame: pl.DataFrame, shape: Shape, any_duration: bool = False) -> pl.DataFrame:
    """Requests whose shape columns equal ``shape``'s (after SPEC defaults).

    Durations compare by their class (:func:`fleetaudit.model.shapes.duration_class`):
    a request of 3435 s and one of 3437 s are both of the 1h class, and so is an
    ad-hoc shape of ``--duration 50m`` (which is still evaluated at exactly 50m);
    ``any_duration``: of every duration class.
    """

    def eq(column: str, value: object) -> pl.Expr:
        if value is None:
            return pl.col(column).is_null()
        if isinstance(value, float):
            return (pl.col(column) - value).abs() < 1e-9
        return pl.col(column).eq(value)

    return frame.filter(
        eq("gpu_model", shape.gpu_model),
        eq("gpus", shape.gpus),
        eq("gpus_per_pod", shape.gpus_per_pod),
        eq("cpus_per_gpu", shape.cpus_per_gpu),
        eq("memory_gib_per_gpu", shape.memory_gib_per_gpu),
        eq("locality", shape.locality),
    ).filter(pl.lit(True) if any_duration else _class_eq(frame, shape))


def _of_shapes(frame: pl.DataFrame, shapes: Sequence[Shape]) -> pl.DataFrame:
    """The requests of ``frame`` of some shape of ``shapes``, of any duration class (a
    shape's calibration counts those of other classes), in their order.

    The window's requests are read before the allocations and cut down to these
    at once: a 90-day window at ASI scale holds 9 M of them.
    """
    if not shapes:
        return frame.clear()
    indexed = frame.with_row_index("_row")
    rows = pl.concat([_same_shape(indexed, shape, True)["_row"] for shape in shapes])
    return indexed.filter(pl.col("_row").is_in(rows.implode())).drop("_row")


def _class_eq(frame: pl.DataFrame, shape: Shape) -> pl.Expr:
    wanted = duration_class(shape.duration_s)
    classed = duration_class_expr("duration_s")
    if "duration_s" not in frame.columns:
        return pl.lit(wanted is None)
    return classed.is_null() if wanted is None else classed == wanted


def shapes_to_evaluate(
    store: Store, at: datetime, given: Sequence[Shape]
) -> tuple[list[tuple[Shape, int]], list[str]]:
    """The shapes a command evaluates at ``at``, with how many requests queued at ``at``
    ask for each, and notes.

    The ``given`` shapes (checked against the fleet's GPU models), or else every
    distinct GPU shape queued at ``at`` (SPEC §3), most queued first.
    """
    queued_frame = store.query("queued_requests_at", at=at)
    notes: list[str] = []
    if given:
        models = store.query("gpu_models")["gpu_model"].to_list()
        spelled = [check_models(shape, models) for shape in given]
        return [(s, _same_shape(queued_frame, s).height) for s in spelled], notes
    pairs, cpu_only = queued_shapes(queued_frame)
    if not holds_requests(store):
        notes.append(
            "the store holds no requests, so nothing is queued; give a shape with "
            "--model/--gpus or --shapes"
        )
    if cpu_only:
        notes.append(f"{cpu_only} queued request(s) ask for no GPU and are not GPU shapes")
    ineligible = ineligible_note(store, at)
    if ineligible:
        notes.append(ineligible)
    return pairs, notes


def queued_shapes(queued: pl.DataFrame) -> tuple[list[tuple[Shape, int]], int]:
    """Distinct GPU shapes among queued requests, with counts (most queued first); and CPU-only requests.

    Durations are grouped by their class (rounded up to the ladder of
    :data:`fleetaudit.model.shapes.DURATION_CLASSES_S`), so 3435 s and 3437 s are one 1h shape.
    """
    gpu = queued.filter(pl.col("gpus") > 0).with_columns(duration_class_expr("duration_s"))
    groups = (
        gpu.group_by(SHAPE_COLUMNS, maintain_order=True)
        .agg(pl.len().alias("queued"))
        .sort(["queued", "gpus", "gpu_model"], descending=[True, True, False], nulls_last=True)
    )
    shapes = [
        (
            make_shape(
                r["gpu_model"], r["gpus"], r["gpus_per_pod"], r["cpus_per_gpu"],
                r["memory_gib_per_gpu"], r["locality"], r["duration_s"],
            ),
            int(r["queued"]),
        )
        for r in groups.iter_rows(named=True)
    ]  # fmt: skip
    return shapes, queued.height - gpu.height


def read_shapes_file(path: Path) -> tuple[Shape, ...]:
    """Shapes from a CSV with the requests table's shape columns; one line per bad value."""
    try:
        frame = pl.read_csv(path, infer_schema=False)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise InputError(str(path), f"cannot read: {str(exc).splitlines()[0]}") from exc
    if "gpus" not in frame.columns:
        raise InputError(str(path), "required column missing", column="gpus")
    shapes = []
    for row_number, row in enumerate(frame.iter_rows(named=True), 1):
        values: dict[str, float | None] = {}
        for column in ("gpus", "gpus_per_pod", "cpus_per_gpu", "memory_gib_per_gpu", "duration_s"):
            raw = (row.get(column) or "").strip()
            if not raw:
                values[column] = None
                continue
            try:
                values[column] = (
                    parse_duration(raw).total_seconds() if column == "duration_s" else float(raw)
                )
            except (ValueError, UsageError) as exc:
                raise InputError(
                    str(path), f"{raw!r} is not a number", row=row_number, column=column
                ) from exc
        if values["gpus"] is None:
            raise InputError(str(path), "missing required value", row=row_number, column="gpus")
        try:
            shapes.append(
                make_shape(
                    (row.get("gpu_model") or "").strip() or None,
                    values["gpus"],
                    values["gpus_per_pod"],
                    values["cpus_per_gpu"],
                    values["memory_gib_per_gpu"],
                    (row.get("locality") or "").strip().lower() or None,
                    values["duration_s"],
                )
            )
        except UsageError as exc:
            raise InputError(str(path), exc.message.lstrip("-"), row=row_number) from exc
    return tuple(shapes)


def evaluate_shapes(store_options: StoreOptions, options: ShapesOptions) -> ShapesResult:
    """Evaluate the shapes of ``options`` (or every queued shape) at t."""
    if options.history is not None and options.step.total_seconds() <= 0:
        raise UsageError("--step: must be longer than 0s")
    if options.max_instances is not None and options.max_instances < 0:
        raise UsageError("--max: must be 0 or more")
    with reading(store_options) as store:
        check_scenario(store, options.scenario)
        at = resolve_at(store, options.at, options.scenario)
        pairs, notes = shapes_to_evaluate(store, at, options.shapes)
        start = at - (options.history or timedelta(0))
        notes.extend(
            data_notes(store, start, at, options.scenario, at_given=options.at is not None)
        )
        requests = (
            _of_shapes(
                store.query("requests_submitted_between", start=start, end=at),
                [shape for shape, _ in pairs],
            )
            if options.history is not None
            else None
        )
        longest = max((s.duration_s or 0.0 for s, _ in pairs), default=0.0)
        every = any(s.duration_s is None for s in options.shapes)
        if requests is not None and requests.height and every:
            # the calibration of a shape given without a duration evaluates the shape
            # with each of its requests' duration classes
            classes = requests.select(duration_class_expr("duration_s").max())[0, 0]
            longest = max(longest, float(classes or 0.0))
        end = at + timedelta(seconds=longest) + timedelta(microseconds=1)
        nodes, allocations = load_frames(store, start, end, options.scenario)
        nodes, health = load_health(store, nodes, start, end)
    durations = list(dict.fromkeys(shape.duration_s for shape, _ in pairs))
    windows = [timedelta(seconds=d) if d else None for d in durations]
    states = dict(
        zip(durations, occupancy.node_states(nodes, allocations, at, windows, health), strict=True)
    )
    reports = []
    notes.extend(n for n in beyond_fleet_all([shape for shape, _ in pairs], nodes) if n)
    evaluations = evaluate_all([(states[shape.duration_s], shape) for shape, _ in pairs])
    for (shape, queued), evaluation in zip(pairs, evaluations, strict=True):
        state = states[shape.duration_s]
        capped = options.max_instances is not None and evaluation.instances > options.max_instances
        if capped:
            evaluation = evaluation.with_instances(int(options.max_instances or 0))
        reports.append(
            ShapeReport(
                evaluation=evaluation,
                queued=queued,
                capped=capped,
                reclaim=reclaim_mod.reclaimable(nodes, allocations, at, shape, evaluation, health)
                if options.reclaim
                else None,
                **_history(
                    nodes,
                    allocations,
                    requests,
                    shape,
                    at,
                    options,
                    health,
                    every_duration=bool(options.shapes) and shape.duration_s is None,
                ),
                misses=nearest_misses(evaluation, state) if options.explain else None,
            )
        )
    if options.reclaim and any(r.reclaim and r.reclaim.without_checkpoint for r in reports):
        notes.append(
            "victims without checkpoint_interval_s lose all their work since start "
            "(counted in lost_gpu_hours)"
        )
    return ShapesResult(at=at, scenario=options.scenario, shapes=tuple(reports), notes=tuple(notes))


def _history(
    nodes: pl.DataFrame,
    allocations: pl.DataFrame,
    requests: pl.DataFrame | None,
    shape: Shape,
    at: datetime,
    options: ShapesOptions,
    health: Health,
    every_duration: bool = False,
) -> dict[str, Any]:
    """The shape's history and its calibration against the requests of the shape.

    ``every_duration`` (a shape given without a duration): the sample holds the shape's
    requests of every duration class, each predicted by the history of the shape with
    its class's duration (as ``--duration`` of that class would); otherwise the requests
    of the shape's own class, and those of the others are counted as left out.
    """
    if options.history is None or requests is None:
        return {}
    series = history_mod.evaluate_history(
        nodes, allocations, shape, at, options.history, options.step, options.deadline, health
    )
    anyhow = _same_shape(requests, shape, any_duration=True)
    if not every_duration:
        own = _same_shape(requests, shape)
        left_out = {"other_duration": anyhow.height - own.height}
        return {
            "history": series,
            "calibration": history_mod.calibrate(series, own, left_out),
        }
    classes = []
    classed = anyhow.with_columns(duration_class_expr("duration_s").alias("_class"))
    for (duration,), group in classed.group_by(["_class"], maintain_order=True):
        history = (
            series
            if duration is None
            else history_mod.evaluate_history(
                nodes, allocations, replace(shape, duration_s=duration), at,
                options.history, options.step, options.deadline,
            )
        )  # fmt: skip
        classes.append((duration, history, group))
    classes.sort(key=lambda c: -1.0 if c[0] is None else c[0])
    return {"history": series, "calibration": history_mod.calibrate_classes(classes)}
