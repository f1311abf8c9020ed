"""Money: the prices of a fleet's resources, and GPU-hours and remedies in money.

A price list (:class:`Prices`) gives, per GPU model, a price per GPU-hour or per
node-month; a price per CPU core-hour and per GiB-hour; optional per-tenant rates
(a factor on the list prices, e.g. 0.8 for a tenant with a discount); and
optional monthly prices of the remedies that buy no hardware (``merge-level``,
``port``, ``compaction``). :func:`prices_from_rows` reads the rows of a prices
file (``fleetaudit.api.prices_api`` reads the file).

- A GPU-hour of model M costs its ``gpu_hour`` price, or its ``node_month`` price
  divided by the GPUs of M's typical node and by :data:`HOURS_PER_MONTH`.
- A node-month price is the whole node's (its CPUs and memory included); a
  GPU-hour price is the GPU's alone, and a node priced so costs its CPUs and
  memory at the core-hour and GiB-hour prices on top.

Pure functions; nothing here reads a file or the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetaudit.core.errors import UsageError
from fleetaudit.core.options import HOURS_PER_MONTH

__all__ = ["HOURS_PER_MONTH", "PRICE_UNITS", "Prices", "prices_from_rows"]

PRICE_UNITS = {
    "gpu": ("gpu_hour", "node_month"),
    "cpu": ("core_hour",),
    "memory": ("gib_hour",),
    "tenant": ("rate",),
    "remedy": ("month",),
}
"""The rows a prices file may hold: resource -> its units."""
REMEDY_NAMES = ("merge-level", "port", "compaction")


@dataclass(frozen=True)
class Prices:
    """A price list (see the module doc)."""

    currency: str = ""
    gpu_hour: Mapping[str, float] = field(default_factory=dict)
    node_month: Mapping[str, float] = field(default_factory=dict)
    core_hour: float | None = None
    gib_hour: float | None = None
    tenants: Mapping[str, float] = field(default_factory=dict)
    remedies: Mapping[str, float] = field(default_factory=dict)
    source: str = ""

    def gpu_hour_of(self, model: str, node_gpus: float | None) -> float | None:
        """The price of one GPU-hour of ``model`` (None: the list has none)."""
        if model in self.gpu_hour:
            return self.gpu_hour[model]
        if model in self.node_month and node_gpus:
            return self.node_month[model] / node_gpus / HOURS_PER_MONTH
        return None

    def node_month_of(
        self, model: str, gpus: float, cpus: float, memory_gib: float | None
    ) -> float | None:
        """The price of one node a month (None: a resource it needs has no price).

        >>> p = Prices(gpu_hour={"H20": 1.0}, core_hour=0.01, gib_hour=0.0)
        >>> p.node_month_of("H20", 8, 100, 512)
        6570.0
        """
        if model in self.node_month:
            return self.node_month[model]
        gpu = self.gpu_hour.get(model)
        if gpu is None or (cpus and self.core_hour is None):
            return None
        if memory_gib and self.gib_hour is None:
            return None
        hourly = gpu * gpus + (self.core_hour or 0.0) * cpus
        hourly += (self.gib_hour or 0.0) * (memory_gib or 0.0)
        return hourly * HOURS_PER_MONTH

    def rate(self, tenant: str | None) -> float:
        return self.tenants.get(tenant or "", 1.0)

    def as_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "currency": self.currency or None,
            "gpu_hour": dict(self.gpu_hour),
            "node_month": dict(self.node_month),
            "core_hour": self.core_hour,
            "gib_hour": self.gib_hour,
            "tenants": dict(self.tenants),
            "remedies": dict(self.remedies),
        }


def prices_from_rows(rows: Iterable[tuple[int, Mapping[str, Any]]], source: str) -> Prices:
    """A :class:`Prices` from rows of ``resource, name, unit, price`` (numbered, for the
    error lines), as a CSV prices file holds them (a YAML file is turned into the
    same rows).

    >>> p = prices_from_rows(enumerate([{"resource": "gpu", "name": "H20",
    ...     "unit": "gpu_hour", "price": "1.5"}, {"resource": "currency", "name": "EUR",
    ...     "unit": "", "price": ""}], start=2), "prices.csv")
    >>> p.gpu_hour["H20"], p.currency
    (1.5, 'EUR')
    """
    gpu_hour: dict[str, float] = {}
    node_month: dict[str, float] = {}
    tenants: dict[str, float] = {}
    remedies: dict[str, float] = {}
    core = gib = None
    currency = ""
    for number, row in rows:
        resource = str(row.get("resource") or "").strip().lower()
        name = str(row.get("name") or "").strip()
        unit = str(row.get("unit") or "").strip().lower()
        where = f"{source} row {number}"
        if resource == "currency":
            currency = name
            continue
        if resource not in PRICE_UNITS:
            raise UsageError(
                f"{where}, column resource: {resource!r} is not one of currency, "
                f"{', '.join(PRICE_UNITS)}"
            )
        if unit not in PRICE_UNITS[resource]:
            raise UsageError(
                f"{where}, column unit: a {resource} price is per {' or '.join(PRICE_UNITS[resource])}, "
                f"not {unit!r}"
            )
        try:
            price = float(row.get("price"))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            price = float("nan")
        if not price == price or price < 0 or price == float("inf"):
            raise UsageError(f"{where}, column price: {row.get('price')!r} is not a price of 0 or more")
        if resource in ("gpu", "tenant", "remedy") and not name:
            raise UsageError(f"{where}, column name: a {resource} price names its {resource}")
        if resource == "gpu":
            (gpu_hour if unit == "gpu_hour" else node_month)[name] = price
        elif resource == "cpu":
            core = price
        elif resource == "memory":
            gib = price
        elif resource == "tenant":
            tenants[name] = price
        else:
            if name not in REMEDY_NAMES:
                raise UsageError(
                    f"{where}, column name: a remedy price is for {', '.join(REMEDY_NAMES)}, "
                    f"not {name!r}"
                )
            remedies[name] = price
    if not gpu_hour and not node_month:
        raise UsageError(f"{source}: the prices name no GPU model (resource gpu)")
    return Prices(currency, gpu_hour, node_month, core, gib, tenants, remedies, source)


def money(value: float | None, price: float | None) -> float | None:
    """``value`` (GPU-hours, core-hours...) times ``price``; None when either is unknown."""
    if value is None or price is None:
        return None
    return value * price


def fleet_cost(prices: Prices, before: Any, after: Any) -> tuple[float | None, list[str]]:
    """What turning the fleet ``before`` into ``after`` (nodes frames) costs a month: the
    nodes added at their price, less those removed, plus the CPUs and memory added to
    the nodes kept (at the core-hour and GiB-hour prices). None, with the reason, when
    a price it needs is missing.

    >>> import polars as pl
    >>> p = Prices(gpu_hour={"H20": 1.0}, core_hour=0.01)
    >>> a = pl.DataFrame({"node_id": ["n1"], "gpu_model": ["H20"], "gpus": [8], "cpus": [64.0],
    ...                   "memory_gib": [None]}, schema_overrides={"memory_gib": pl.Float64})
    >>> b = pl.concat([a.with_columns(pl.col("cpus") + 36), a.with_columns(pl.lit("n2").alias("node_id"))])
    >>> cost, why = fleet_cost(p, a, b)
    >>> round(cost, 2), why
    (6570.0, [])
    """
    import polars as pl

    key = ["node_id"]
    cols = ["node_id", "gpu_model", "gpus", "cpus", "memory_gib"]
    left = before.select(cols)
    right = after.select(cols)
    added = right.join(left, on=key, how="anti")
    removed = left.join(right, on=key, how="anti")
    kept = left.join(right, on=key, how="inner", suffix="_after")
    total = 0.0
    missing: list[str] = []
    for sign, frame in ((1.0, added), (-1.0, removed)):
        for model, gpus, cpus, memory, count in (
            frame.group_by("gpu_model", "gpus", "cpus", "memory_gib").len().sort("gpu_model").rows()
        ):
            price = prices.node_month_of(str(model), float(gpus or 0), float(cpus or 0),
                                         None if memory is None else float(memory))  # fmt: skip
            if price is None:
                missing.append(f"no price of a {model} node (gpu {model} gpu_hour with cpu and memory, or node_month)")
                continue
            total += sign * price * count
    cpus = float(kept.select((pl.col("cpus_after").cast(pl.Float64) - pl.col("cpus").cast(pl.Float64)).sum()).item() or 0.0)
    memory = float(kept.select((pl.col("memory_gib_after").cast(pl.Float64) - pl.col("memory_gib").cast(pl.Float64)).fill_null(0).sum()).item() or 0.0)
    for amount, price, what in ((cpus, prices.core_hour, "cpu core_hour"), (memory, prices.gib_hour, "memory gib_hour")):
        if amount:
            if price is None:
                missing.append(f"no {what} price")
            else:
                total += amount * price * HOURS_PER_MONTH
    if missing:
        return None, sorted(set(missing))
    return total, []


MONEY_FIGURES = ("idle", "usable", "interval", "fragment", "cpu_memory", "topology",
                 "unqueued", "unproductive", "allocated")  # fmt: skip
"""What the report prices: the schedulable split of idle GPU-hours, the GPU-hours that
telemetry saw allocated but not SM-active, and the allocated GPU-hours."""


def _priced(figures: Mapping[str, Any], price: float | None) -> dict[str, float | None]:
    sched, prod, ph = figures["schedulable"], figures["productive"], figures["physical"]
    hours: dict[str, float | None] = {
        "idle": sched.get("idle_gpu_hours"),
        "usable": sched.get("usable_gpu_hours"),
        **{c: (sched.get("stranded_gpu_hours") or {}).get(c) for c in
           ("interval", "fragment", "cpu_memory", "topology", "unqueued")},
        "unproductive": None if prod.get("telemetry_gpu_hours") is None else
        float(prod["telemetry_gpu_hours"]) - float(prod.get("sm_active_gpu_hours") or 0.0),
        "allocated": ph.get("allocated_gpu_hours"),
    }  # fmt: skip
    return {k: money(v, price) for k, v in hours.items()}


def report_money(
    prices: Prices,
    models: Mapping[str, Mapping[str, Any]],
    node_gpus: Mapping[str, float],
    tenant_hours: Iterable[tuple[str, str, float]],
) -> dict[str, Any]:
    """The report's denominators in money, per model and for the fleet, and a per-tenant
    showback.

    Args:
        prices: the price list.
        models: the report's figures per GPU model (physical, schedulable, productive).
        node_gpus: GPUs of each model's typical node (a node-month price per GPU-hour).
        tenant_hours: (tenant, model, allocated GPU-hours) over the window.

    A model without a price has null money (and a note). A tenant's allocated cost is its
    GPU-hours at its models' prices times its rate; its share of the idle cost is its
    share of the allocated GPU-hours (the demand the fleet served it).

    >>> p = Prices(gpu_hour={"H20": 2.0}, tenants={"a": 0.5})
    >>> f = {"physical": {"allocated_gpu_hours": 30.0}, "productive": {"telemetry_gpu_hours":
    ...      30.0, "sm_active_gpu_hours": 20.0}, "schedulable": {"idle_gpu_hours": 10.0,
    ...      "usable_gpu_hours": 4.0, "stranded_gpu_hours": {"fragment": 6.0}}}
    >>> m = report_money(p, {"H20": f}, {"H20": 8}, [("a", "H20", 10.0), ("b", "H20", 30.0)])
    >>> m["fleet"]["idle"], m["fleet"]["unproductive"], m["tenants"]["a"]
    (20.0, 20.0, {'allocated_gpu_hours': 10.0, 'rate': 0.5, 'allocated': 10.0, 'idle_share': 0.25, 'idle': 5.0})
    """
    per_model: dict[str, dict[str, float | None]] = {}
    notes: list[str] = []
    price_of: dict[str, float | None] = {}
    for model, figures in models.items():
        price = prices.gpu_hour_of(model, node_gpus.get(model))
        price_of[model] = price
        if price is None:
            notes.append(f"the prices give no GPU price for {model}: its figures are not priced")
        per_model[model] = {"gpu_hour": price, **_priced(figures, price)}
    fleet: dict[str, float | None] = {}
    for key in MONEY_FIGURES:
        values = [m[key] for m in per_model.values()]
        fleet[key] = None if any(v is None for v in values) else float(sum(values))  # type: ignore[arg-type]
    tenants: dict[str, dict[str, Any]] = {}
    for tenant, model, hours in tenant_hours:
        entry = tenants.setdefault(tenant, {"allocated_gpu_hours": 0.0, "rate": prices.rate(tenant),
                                            "allocated": 0.0})  # fmt: skip
        entry["allocated_gpu_hours"] += hours
        price = price_of.get(model, prices.gpu_hour_of(model, node_gpus.get(model)))
        cost = money(hours, price)
        entry["allocated"] = None if cost is None or entry["allocated"] is None else (
            entry["allocated"] + cost * entry["rate"])  # fmt: skip
    total = sum(t["allocated_gpu_hours"] for t in tenants.values())
    for entry in tenants.values():
        share = entry["allocated_gpu_hours"] / total if total > 0 else None
        entry["idle_share"] = share
        entry["idle"] = None if share is None or fleet["idle"] is None else fleet["idle"] * share
    return {
        "currency": prices.currency or None,
        "source": prices.source,
        "fleet": fleet,
        "models": per_model,
        "tenants": dict(sorted(tenants.items(), key=lambda kv: -(kv[1]["allocated"] or 0.0))),
        "notes": notes,
    }
