"""Reading a prices file (``--prices``): CSV or YAML, into :class:`fleetaudit.model.money.Prices`.

CSV: columns ``resource, name, unit, price`` (one row per price; see
:data:`fleetaudit.model.money.PRICE_UNITS`). YAML::

    currency: USD
    gpu:
      H20: {gpu_hour: 1.85}
      H800: {node_month: 14000}
    cpu: {core_hour: 0.03}
    memory: {gib_hour: 0.004}
    tenants: {team-a: 0.8}
    remedies: {port: 20000}

Both become the same rows, so every check and error line is the same.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from fleetaudit.core.errors import UsageError
from fleetaudit.model.money import Prices, prices_from_rows

_COLUMNS = ("resource", "name", "unit", "price")
_YAML_SUFFIXES = (".yaml", ".yml")


def read_prices(path: Path) -> Prices:
    """The prices of ``path`` (by its suffix: .yaml/.yml, else CSV)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"--prices: cannot read {path}: {reason}") from exc
    if path.suffix.lower() in _YAML_SUFFIXES:
        return prices_from_rows(_yaml_rows(text, str(path)), str(path))
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in _COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise UsageError(f"{path}: column {missing[0]} is missing (columns: {', '.join(_COLUMNS)})")
    return prices_from_rows(enumerate(reader, start=2), str(path))


def _yaml_rows(text: str, source: str) -> list[tuple[int, dict[str, Any]]]:
    # PyYAML's safe loader: plain data only, no object construction
    import yaml  # type: ignore[import-untyped]  # PyYAML ships no type hints

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{source}{line}: not YAML: {getattr(exc, 'problem', exc)}") from exc
    if not isinstance(data, dict):
        raise UsageError(f"{source}: a YAML prices file is a mapping (gpu:, cpu:, memory:, ...)")
    rows: list[dict[str, Any]] = []
    if data.get("currency") is not None:
        rows.append({"resource": "currency", "name": str(data["currency"])})

    def units(resource: str, name: str, value: Any) -> None:
        if not isinstance(value, dict):
            raise UsageError(f"{source}, {resource} {name}: give its unit and price ({{gpu_hour: 1.5}})")
        for unit, price in value.items():
            rows.append({"resource": resource, "name": name, "unit": unit, "price": price})

    known = {"currency", "gpu", "cpu", "memory", "tenants", "remedies"}
    for key in data:
        if key not in known:
            raise UsageError(f"{source}, key {key!r}: not one of {', '.join(sorted(known))}")
    for model, value in (data.get("gpu") or {}).items():
        units("gpu", str(model), value)
    for resource in ("cpu", "memory"):
        if data.get(resource) is not None:
            units(resource, "", data[resource])
    for key, resource, unit in (("tenants", "tenant", "rate"), ("remedies", "remedy", "month")):
        for name, price in (data.get(key) or {}).items():
            rows.append({"resource": resource, "name": str(name), "unit": unit, "price": price})
    return list(enumerate(rows, start=1))
