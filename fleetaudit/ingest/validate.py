"""Validation of one source against its table, as SQL generated from the schema.

One streaming pass parses every column, resolves the SPEC's defaults, and tags
each row as loaded or rejected (:func:`load_sql`). Only when that pass tagged
rejects does a second pass (:func:`rejects_sql`) number the rows and say, for
each rejected row, the first column at fault and why. Values never enter the
SQL text: they are bound parameters; names enter only through
:func:`~fleetaudit.store.quote_identifier`-style quoting.

Checks, in column order, first failure wins (README, "Semantics"):
missing required value, unparsable, not finite, not an integer, negative,
above 1 (fractions), unknown enum value; then per table: unknown node, gpus
above the node's GPUs (allocations), gpu_index beyond the node's GPUs
(telemetry), end_time before start_time, start_time before submit_time,
gpus not a multiple of gpus_per_pod and locality node with several pods
(requests).
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetaudit import schema
from fleetaudit.errors import InputError
from fleetaudit.schema import Column, Kind, Table

_NUMERIC = (
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "HUGEINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
    "UHUGEINT",
    "FLOAT",
    "DOUBLE",
    "REAL",
)
_INTEGER = _NUMERIC[:10]


def q(name: str) -> str:
    """Quote an identifier."""
    return '"' + name.replace('"', '""') + '"'


def _lit(text: str) -> str:
    """A SQL string literal for a fixed message (never for data values)."""
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class _Check:
    column: str
    condition: str  # SQL, TRUE when the row is rejected for this reason
    reason: str  # SQL text expression of the reason


@dataclass(frozen=True)
class LoadPlan:
    """The SQL that loads one source into its table."""

    table: Table
    columns: tuple[str, ...]  # schema columns, in table order
    extras: tuple[str, ...]  # the file's other columns, kept as text
    load: str  # INSERT ... tagging rejects with -ingest_id
    rejects: str  # INSERT INTO rejects ... (numbered scan; run only when there are rejects)


def _is_decimal(sql_type: str) -> bool:
    return sql_type.upper().startswith("DECIMAL")


def _parse(col: Column, src: str, sql_type: str) -> tuple[str, str | None]:
    """SQL for the parsed value and, for text sources, the raw text (None when typed)."""
    t = sql_type.upper()
    raw = f"NULLIF(CAST({src} AS VARCHAR), '')"
    numeric = t in _NUMERIC or _is_decimal(t)
    if col.kind is Kind.TEXT:
        return (raw, None)
    if col.kind is Kind.FLOAT:
        if numeric:
            return (f"CAST({src} AS DOUBLE)", None)
        return (f"TRY_CAST({raw} AS DOUBLE)", raw)
    if col.kind is Kind.INT:
        if t in _INTEGER:
            return (f"CAST({src} AS BIGINT)", None)
        num = f"CAST({src} AS DOUBLE)" if numeric else f"TRY_CAST({raw} AS DOUBLE)"
        return (
            f"CASE WHEN isfinite({num}) AND {num} = floor({num}) AND abs({num}) < 9e15 "
            f"THEN CAST({num} AS BIGINT) END",
            raw,
        )
    if col.kind is Kind.BOOL:
        if t == "BOOLEAN":
            return (src, None)
        return (
            f"CASE WHEN lower({raw}) IN ('true', 't', '1', 'yes', 'y') THEN TRUE "
            f"WHEN lower({raw}) IN ('false', 'f', '0', 'no', 'n') THEN FALSE END",
            raw,
        )
    # Kind.TIME: ISO 8601 (no zone = UTC: the session runs in UTC) or epoch seconds
    if t.startswith("TIMESTAMP") or t == "DATE":
        return (f"CAST({src} AS TIMESTAMP)", None)
    if numeric:
        num = f"CAST({src} AS DOUBLE)"
        return (f"CASE WHEN abs({num}) < 1e11 THEN CAST(to_timestamp({num}) AS TIMESTAMP) END", raw)
    num = f"TRY_CAST({raw} AS DOUBLE)"
    return (
        f"COALESCE(CAST(TRY_CAST({raw} AS TIMESTAMPTZ) AS TIMESTAMP), "
        f"CASE WHEN abs({num}) < 1e11 THEN CAST(to_timestamp({num}) AS TIMESTAMP) END)",
        raw,
    )


_KIND_WORD = {
    Kind.FLOAT: "a number",
    Kind.INT: "an integer",
    Kind.BOOL: "a boolean (true/false)",
    Kind.TIME: "a time (ISO 8601 or epoch seconds)",
    Kind.TEXT: "text",
}


def _column_checks(col: Column, has_raw: bool) -> list[_Check]:
    c, r = q(col.name), q("r_" + col.name)
    shown = f"COALESCE({r}, CAST({c} AS VARCHAR))" if has_raw else f"CAST({c} AS VARCHAR)"
    checks: list[_Check] = []
    if col.required:
        missing = f"{r} IS NULL" if has_raw else f"{c} IS NULL"
        checks.append(_Check(col.name, missing, _lit("missing required value")))
    if has_raw:
        checks.append(
            _Check(
                col.name,
                f"{r} IS NOT NULL AND {c} IS NULL",
                f"{shown} || {_lit(' is not ' + _KIND_WORD[col.kind])}",
            )
        )
    if col.kind in (Kind.FLOAT, Kind.INT):
        if col.kind is Kind.FLOAT:
            checks.append(
                _Check(col.name, f"NOT isfinite({c})", f"{shown} || ' is not a finite number'")
            )
        if col.nonnegative:
            checks.append(_Check(col.name, f"{c} < 0", f"{shown} || ' is negative'"))
        if col.at_most_one:
            checks.append(_Check(col.name, f"{c} > 1", f"{shown} || ' is above 1'"))
    if col.enum:
        allowed = ", ".join(_lit(v) for v in col.enum)
        checks.append(
            _Check(
                col.name,
                f"{c} IS NOT NULL AND lower({c}) NOT IN ({allowed})",
                f"'unknown value ' || {shown} || {_lit(' (expected ' + ', '.join(col.enum) + ')')}",
            )
        )
    return checks


def _table_checks(table: Table) -> list[_Check]:
    checks: list[_Check] = []
    if table.references_node:
        checks.append(_Check("node_id", "_node_gpus IS NULL", f"'unknown node ' || {q('node_id')}"))
    if table.name == "allocations":
        checks.append(
            _Check(
                "gpus",
                "gpus > _node_gpus",
                "CAST(gpus AS VARCHAR) || ' is above its node''s ' || CAST(_node_gpus AS VARCHAR) || ' GPUs'",
            )
        )
        checks.append(
            _Check("end_time", "end_time < start_time", "'end_time is before start_time'")
        )
    if table.name == "telemetry":
        checks.append(
            _Check(
                "gpu_index",
                "gpu_index >= _node_gpus",
                "CAST(gpu_index AS VARCHAR) || ' is not below its node''s ' || CAST(_node_gpus AS VARCHAR) || ' GPUs'",
            )
        )
    if table.name == "requests":
        checks.append(
            _Check("start_time", "start_time < submit_time", "'start_time is before submit_time'")
        )
        checks.append(
            _Check(
                "gpus_per_pod",
                "gpus > 0 AND _gpus_per_pod = 0",
                "'gpus_per_pod 0 with gpus above 0'",
            )
        )
        checks.append(
            _Check(
                "gpus",
                "gpus > 0 AND _gpus_per_pod > 0 AND ((gpus < 1 AND gpus <> _gpus_per_pod) "
                "OR (gpus >= 1 AND (_gpus_per_pod <> floor(_gpus_per_pod) "
                "OR gpus <> floor(gpus) OR TRY(fmod(gpus, _gpus_per_pod)) <> 0)))",
                "CAST(gpus AS VARCHAR) || ' is not a multiple of gpus_per_pod ' || "
                "CAST(_gpus_per_pod AS VARCHAR) || CASE WHEN gpus_per_pod IS NULL "
                "THEN ' (the default min(gpus, 8)); give gpus_per_pod' ELSE '' END",
            )
        )
        checks.append(
            _Check(
                "locality",
                "lower(locality) = 'node' AND _gpus_per_pod > 0 AND gpus > _gpus_per_pod",
                "'node locality with ' || CAST(TRY(gpus / _gpus_per_pod) AS VARCHAR) || ' pods; use switch or any'",
            )
        )
    return checks


def _resolved(table: Table, name: str) -> str:
    """The stored value of a schema column, with the SPEC's default applied."""
    c = q(name)
    col = table.column(name)
    value = f"lower({c})" if col.enum else c
    if table.name == "nodes" and name == "health":
        return f"COALESCE({value}, 'healthy')"
    if table.name == "allocations":
        if name == "job_id":
            return "COALESCE(job_id, alloc_id)"
        if name == "sleepable":
            return "COALESCE(sleepable, FALSE)"
    if table.name == "requests":
        if name == "gpus_per_pod":
            return "_gpus_per_pod"
        if name in ("cpus_per_gpu", "memory_gib_per_gpu"):
            return f"COALESCE({c}, 0)"
        if name == "locality":
            return (
                "COALESCE(lower(locality), CASE WHEN gpus <= _gpus_per_pod "
                "THEN 'node' ELSE 'switch' END)"
            )
    return value


def plan_load(
    table: Table, file: str, select: str, numbered: str, source: list[tuple[str, str]]
) -> LoadPlan:
    """Plan the load of one file's scan into ``table``.

    Args:
        table: the target table.
        file: the file's name as reported in errors and rejects.
        select: the SELECT scanning the file; numbered: the same plus ``_row``.
        source: the scan's columns as (name, DuckDB type).

    Raises:
        InputError: a required column is missing (the whole call fails).
    """
    by_lower: dict[str, tuple[str, str]] = {}
    for name, sql_type in source:
        by_lower.setdefault(name.strip().lower(), (name, sql_type))
    for name in table.required:
        if name not in by_lower:
            raise InputError(file, "required column missing", column=name)
    schema_lower = set(table.column_names)
    extras = tuple(
        name for name, _ in source if name.strip().lower() not in schema_lower and name != "_row"
    )

    parsed: list[str] = []
    checks: list[_Check] = []
    for col in table.columns:
        if col.name in by_lower:
            src_name, sql_type = by_lower[col.name]
            value, raw = _parse(col, "src." + q(src_name), sql_type)
        else:
            value, raw = f"CAST(NULL AS {col.kind.value})", None
        parsed.append(f"{value} AS {q(col.name)}")
        if raw is not None:
            parsed.append(f"{raw} AS {q('r_' + col.name)}")
        checks.extend(_column_checks(col, raw is not None))
    parsed.extend(f"CAST(src.{q(x)} AS VARCHAR) AS {q('x_' + x)}" for x in extras)

    derived = ["p.*"]
    joins = ""
    if table.references_node:
        derived.append("n.gpus AS _node_gpus")
        joins = "LEFT JOIN (SELECT node_id AS _nid, gpus FROM nodes) AS n ON p.node_id = n._nid"
    if table.name == "requests":
        derived.append(
            "COALESCE(p.gpus_per_pod, CASE WHEN p.gpus < 1 THEN p.gpus ELSE least(p.gpus, 8) END) "
            "AS _gpus_per_pod"
        )
    checks.extend(_table_checks(table))

    rejected = " OR ".join(f"COALESCE({c.condition}, FALSE)" for c in checks) or "FALSE"

    def staged(source_sql: str, with_row: bool) -> str:
        row = ", src._row AS _row" if with_row else ""
        return (
            f"SELECT {', '.join(derived)} FROM (SELECT {', '.join(parsed)}{row} "
            f"FROM ({source_sql}) AS src) AS p {joins}"
        )

    target_cols = [q(c) for c in table.column_names] + [q(x) for x in extras]
    values = [_resolved(table, c) for c in table.column_names] + [q("x_" + x) for x in extras]
    load = (
        f"INSERT INTO {q(table.name)} ({', '.join(target_cols)}, {q(schema.INGEST_ID)}) "
        f"SELECT {', '.join(values)}, CASE WHEN {rejected} THEN -$ingest_id ELSE $ingest_id END "
        f"FROM ({staged(select, False)}) AS d"
    )
    column_case = " ".join(
        f"WHEN COALESCE({c.condition}, FALSE) THEN {_lit(c.column)}" for c in checks
    )
    reason_case = " ".join(f"WHEN COALESCE({c.condition}, FALSE) THEN {c.reason}" for c in checks)
    value_case = " ".join(
        f"WHEN COALESCE({c.condition}, FALSE) THEN {_shown_value(table, c.column, parsed)}"
        for c in checks
    )
    rejects = (
        f"INSERT INTO rejects SELECT $ingest_id, $file, {_lit(table.name)}, _row, "
        f"CASE {column_case} END, CASE {value_case} END, CASE {reason_case} END "
        f"FROM ({staged(numbered, True)}) AS d WHERE {rejected} ORDER BY _row"
    )
    return LoadPlan(table, table.column_names, extras, load, rejects)


def _shown_value(table: Table, column: str, parsed: list[str]) -> str:
    raw_alias = q("r_" + column)
    if any(p.endswith(f" AS {raw_alias}") for p in parsed):
        return f"COALESCE({raw_alias}, CAST({q(column)} AS VARCHAR))"
    return f"CAST({q(column)} AS VARCHAR)"
