"""Validation of one source against its table, as SQL generated from the schema.

One streaming pass parses every column, resolves the SPEC's defaults, and tags
each row as loaded or rejected (:func:`load_sql`). Only when that pass tagged
rejects does a second pass (:func:`rejects_sql`) number the rows and say, for
each rejected row, the first column at fault and why. Values never enter the
SQL text: they are bound parameters; names enter only through
:func:`~fleetaudit.model.store.quote_identifier`-style quoting.

Checks, in column order, first failure wins (docs/ingest.md):
missing required value, unparsable, not finite, not an integer, negative,
above 1 (fractions), unknown enum value; then per table: unknown node, gpus
above the node's GPUs (allocations), gpu_index beyond the node's GPUs
(telemetry, node_events), end_time before start_time (allocations,
node_events), start_time before submit_time,
gpus not a multiple of gpus_per_pod and locality node with several pods
(requests). An adapter that maps a foreign format can reject a row for a
reason of its own (a hostlist or a time it cannot read): its scan sets
``_reject_column``, ``_reject_reason`` and ``_reject_value`` (only where the
Source says ``adapter_rejects``), which win over every other check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fleetaudit.core.errors import InputError
from fleetaudit.model import schema
from fleetaudit.model.schema import Column, Kind, Table
from fleetaudit.model.store import quote_identifier, quote_literal

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


q = quote_identifier
_lit = quote_literal


@dataclass(frozen=True)
class _Check:
    column: str
    condition: str  # SQL, TRUE when the row is rejected for this reason
    reason: str  # SQL text expression of the reason
    shown: str = "NULL"  # SQL of the offending value as text
    column_sql: str | None = None  # SQL naming the column, when not a fixed one


@dataclass(frozen=True)
class LoadPlan:
    """The SQL that loads one source into its table."""

    new_columns: tuple[tuple[str, str], ...]  # extra columns to add first: (name, DuckDB type)
    load: str  # INSERT ... tagging rejects with -ingest_id
    rejects: str  # INSERT INTO rejects ... (numbered scan; run only when there are rejects)


def _is_decimal(sql_type: str) -> bool:
    return sql_type.upper().startswith("DECIMAL")


@dataclass(frozen=True)
class _Parsed:
    value: str  # SQL of the parsed value
    raw: str  # SQL of the value as text, for messages
    can_fail: bool  # whether parsing can fail (then a raw value with no parsed value is a reject)


def _parse(col: Column, src: str, sql_type: str) -> _Parsed:
    """SQL for a column's parsed value, from a source column of type ``sql_type``."""
    t = sql_type.upper()
    if t == "JSON":  # JSON Lines columns of mixed types: the value's text, without quotes
        raw = f"NULLIF(json_extract_string({src}, '$'), '')"
        t = "VARCHAR"
    else:
        raw = f"NULLIF(CAST({src} AS VARCHAR), '')"
    numeric = t in _NUMERIC or _is_decimal(t)
    if col.kind is Kind.TEXT:
        return _Parsed(raw, raw, False)
    if col.kind is Kind.FLOAT:
        if numeric:
            return _Parsed(f"CAST({src} AS DOUBLE)", raw, False)
        return _Parsed(f"TRY_CAST({raw} AS DOUBLE)", raw, True)
    if col.kind is Kind.INT:
        if t in _INTEGER:
            return _Parsed(f"CAST({src} AS BIGINT)", raw, False)
        num = f"CAST({src} AS DOUBLE)" if numeric else f"TRY_CAST({raw} AS DOUBLE)"
        return _Parsed(
            f"CASE WHEN isfinite({num}) AND {num} = floor({num}) AND abs({num}) < 9e15 "
            f"THEN CAST({num} AS BIGINT) END",
            raw,
            True,
        )
    if col.kind is Kind.BOOL:
        if t == "BOOLEAN":
            return _Parsed(src, raw, False)
        return _Parsed(
            f"CASE WHEN lower({raw}) IN ('true', 't', '1', 'yes', 'y') THEN TRUE "
            f"WHEN lower({raw}) IN ('false', 'f', '0', 'no', 'n') THEN FALSE END",
            raw,
            True,
        )
    # Kind.TIME: ISO 8601 (no zone = UTC: the session runs in UTC) or epoch seconds
    if t in ("TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ"):
        # the instant's microseconds as they are: the same value as the cast in a UTC
        # session, without the cast's time-zone calendar (about a tenth of a native load's CPU)
        return _Parsed(
            f"CASE WHEN isfinite({src}) THEN make_timestamp(epoch_us({src})) "
            f"ELSE CAST({src} AS TIMESTAMP) END",
            raw,
            False,
        )
    if t.startswith("TIMESTAMP") or t == "DATE":
        return _Parsed(f"CAST({src} AS TIMESTAMP)", raw, False)
    num = f"CAST({src} AS DOUBLE)" if numeric else f"TRY_CAST({raw} AS DOUBLE)"
    # isfinite first: a Parquet column's statistics leave NaN out, and DuckDB folds a bound
    # that its statistics say always holds (abs(x) < 1e11) to TRUE, NaN rows included
    epoch = (
        f"CASE WHEN isfinite({num}) AND abs({num}) < 1e11 "
        f"THEN CAST(to_timestamp({num}) AS TIMESTAMP) END"
    )
    if numeric:
        return _Parsed(epoch, raw, True)
    return _Parsed(
        f"COALESCE(CAST(TRY_CAST({raw} AS TIMESTAMPTZ) AS TIMESTAMP), {epoch})", raw, True
    )


_KIND_WORD = {
    Kind.FLOAT: "a number",
    Kind.INT: "an integer",
    Kind.BOOL: "a boolean (true/false)",
    Kind.TIME: "a time (ISO 8601 or epoch seconds)",
    Kind.TEXT: "text",
}


def _column_checks(col: Column, parsed: _Parsed | None) -> list[_Check]:
    c, r = q(col.name), q("r_" + col.name)
    shown = f"COALESCE({r}, CAST({c} AS VARCHAR))" if parsed else f"CAST({c} AS VARCHAR)"
    checks: list[_Check] = []

    def check(condition: str, reason: str) -> None:
        checks.append(_Check(col.name, condition, reason, shown))

    if col.required:
        check(f"{c} IS NULL" + (f" AND {r} IS NULL" if parsed and parsed.can_fail else ""),
              _lit("missing required value"))  # fmt: skip
    if parsed is not None and parsed.can_fail:
        reason = f"{shown} || {_lit(' is not ' + _KIND_WORD[col.kind])}"
        if col.kind is Kind.INT:  # a whole number beyond 9e15 is no typo of an integer
            big = f"TRY_CAST({shown} AS DOUBLE)"
            too_big = (
                f" is above the maximum {col.maximum:g}"
                if col.maximum is not None
                else " is too large"
            )
            reason = (
                f"CASE WHEN isfinite({big}) AND {big} = floor({big}) "
                f"THEN {shown} || {_lit(too_big)} ELSE {reason} END"
            )
        check(f"{r} IS NOT NULL AND {c} IS NULL", reason)
    if col.kind in (Kind.FLOAT, Kind.INT):
        if col.kind is Kind.FLOAT:
            check(f"NOT isfinite({c})", f"{shown} || ' is not a finite number'")
        if col.nonnegative:
            check(f"{c} < 0", f"{shown} || ' is negative'")
        if col.at_most_one:
            check(f"{c} > 1", f"{shown} || ' is above 1'")
        if col.maximum is not None:
            check(
                f"{c} > {col.maximum!r}",
                f"{shown} || {_lit(f' is above the maximum {col.maximum:g}')}",
            )
    if col.kind is Kind.TIME:
        low, high = schema.TIME_RANGE
        check(
            f"NOT isfinite({c}) OR {c} < TIMESTAMP '{low}' OR {c} >= TIMESTAMP '{high}'",
            f"{shown} || {_lit(f' is outside {low[:4]}..{high[:4]}')}",
        )
    if col.enum:
        allowed = ", ".join(_lit(v) for v in col.enum)
        check(
            f"{c} IS NOT NULL AND lower({c}) NOT IN ({allowed})",
            f"'unknown value ' || {shown} || {_lit(' (expected ' + ', '.join(col.enum) + ')')}",
        )
    return checks


def _column_passes(col: Column, parsed: _Parsed | None) -> str | None:
    """A SQL condition that is TRUE exactly when the column's value passes all its checks
    (:func:`_column_checks`), FALSE or NULL when one of them fails (None: it always passes).

    The loading pass tests every row with one AND of these (cheap: each condition only
    compares a value with its bounds, and NULL needs no COALESCE where a NULL value
    fails anyway); the rejects pass tests the checks one by one to name the first failure.
    A float or time value must be finite (isfinite, which no statistics fold away).
    """
    if parsed is None and not col.required:
        return None  # absent from the file: NULL, which no check of an optional column rejects
    c, r = q(col.name), q("r_" + col.name)
    within: list[str] = []  # the value's conditions (NULL when the value is)
    if col.kind in (Kind.FLOAT, Kind.TIME):
        # not left to the bounds: DuckDB folds a bound that a Parquet column's statistics
        # say every value meets to TRUE, and those statistics leave NaN out, so one NaN
        # among finite values would pass; a function call is never folded
        within.append(f"isfinite({c})")
    if col.kind in (Kind.FLOAT, Kind.INT):
        highs = [v for v in (1 if col.at_most_one else None, col.maximum) if v is not None]
        if col.nonnegative:
            within.append(f"{c} >= 0")
        if highs:
            within.append(f"{c} <= {min(highs)!r}")
    if col.kind is Kind.TIME:
        low, high = schema.TIME_RANGE
        within.append(f"{c} >= TIMESTAMP '{low}' AND {c} < TIMESTAMP '{high}'")
    if col.enum:
        within.append(f"lower({c}) IN ({', '.join(_lit(v) for v in col.enum)})")
    # a NULL value: missing (fails when required) or not parsable (fails when the text was not empty)
    can_fail = parsed is not None and parsed.can_fail
    if within:
        value = " AND ".join(within)
        if col.required:
            return value
        return f"COALESCE({value}, {f'{r} IS NULL' if can_fail else 'TRUE'})"
    if col.required:
        return f"{c} IS NOT NULL"
    return f"({c} IS NOT NULL OR {r} IS NULL)" if can_fail else None


def _shown(column: str) -> str:
    """SQL of a column's value as the file wrote it (parsed value when typed)."""
    return f"COALESCE({q('r_' + column)}, CAST({q(column)} AS VARCHAR))"


def _table_checks(table: Table) -> list[_Check]:
    checks: list[_Check] = []

    def check(column: str, condition: str, reason: str) -> None:
        checks.append(_Check(column, condition, reason, _shown(column)))

    if table.references_node:
        check("node_id", "_node_gpus IS NULL", "'unknown node ' || node_id")
    if table.name == "allocations":
        check(
            "gpus",
            "gpus > _node_gpus",
            f"{_shown('gpus')} || ' is above its node''s ' || CAST(_node_gpus AS VARCHAR) || ' GPUs'",
        )
        check("end_time", "end_time < start_time", "'end_time is before start_time'")
    if table.name == "node_events":
        check("end_time", "end_time < start_time", "'end_time is before start_time'")
    if table.name in ("telemetry", "node_events"):
        check(
            "gpu_index",
            "gpu_index >= _node_gpus",
            f"{_shown('gpu_index')} || ' is not below its node''s ' || CAST(_node_gpus AS VARCHAR) || ' GPUs'",
        )
    if table.name == "requests":
        check("start_time", "start_time < submit_time", "'start_time is before submit_time'")
        check(
            "eligible_time", "eligible_time < submit_time", "'eligible_time is before submit_time'"
        )
        check("gpus", "gpus > 1 AND gpus <> floor(gpus)",
              f"{_shown('gpus')} || ' is not a whole number of GPUs (a share is below 1)'")  # fmt: skip
        check(
            "gpus_per_pod", "gpus > 0 AND _gpus_per_pod = 0", "'gpus_per_pod 0 with gpus above 0'"
        )
        check(
            "gpus",
            "gpus > 0 AND _gpus_per_pod > 0 AND ((gpus < 1 AND gpus <> _gpus_per_pod) "
            "OR (gpus >= 1 AND (_gpus_per_pod <> floor(_gpus_per_pod) "
            "OR TRY(fmod(gpus, _gpus_per_pod)) <> 0)))",
            f"{_shown('gpus')} || ' is not a multiple of gpus_per_pod ' || "
            "CAST(_gpus_per_pod AS VARCHAR) || CASE WHEN gpus_per_pod IS NULL "
            f"THEN ' (the default min(gpus, {schema.DEFAULT_POD_GPUS:g})); give gpus_per_pod' "
            "ELSE '' END",
        )
        check(
            "locality",
            "lower(locality) = 'node' AND _gpus_per_pod > 0 AND gpus > _gpus_per_pod",
            "'node locality with ' || CAST(TRY(gpus / _gpus_per_pod) AS VARCHAR) || ' pods; use switch or any'",
        )
    return checks


# A set of models, written the one way: trimmed, deduplicated, sorted, joined by |.
MODEL_SET = (
    "NULLIF(array_to_string(list_sort(list_distinct(list_filter("
    "list_transform(string_split({c}, '|'), lambda x: trim(x)), lambda x: x <> ''))), '|'), '')"
)


def _resolved(table: Table, name: str) -> str:
    """The stored value of a schema column, with the SPEC's default applied."""
    c = q(name)
    col = table.column(name)
    value = f"lower({c})" if col.enum else c
    if table.name == "nodes" and name == "health":
        return f"COALESCE({value}, 'healthy')"
    if table.name == "allocations":
        if name == "workload":
            return workload_category(c)
        if name == "workload_label":
            return f"COALESCE({c}, {q('workload')})"
        if name == "job_id":
            return "COALESCE(job_id, alloc_id)"
        if name == "sleepable":
            return "COALESCE(sleepable, FALSE)"
    if table.name == "requests":
        if name == "gpu_model":
            return MODEL_SET.format(c=c)
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


def workload_category(label: str) -> str:
    """SQL of the category (schema.WORKLOAD) of a free-text workload label column."""
    key = f"regexp_replace(lower(trim({label})), '[\\s./-]+', '_', 'g')"
    whens = " ".join(
        f"WHEN {_lit(synonym)} THEN {_lit(category)}"
        for category, synonyms in schema.WORKLOAD_SYNONYMS.items()
        for synonym in synonyms
    )
    general = f"CASE WHEN {label} IS NULL OR trim({label}) = '' THEN NULL ELSE CASE {key} {whens} ELSE 'other' END END"
    # a label that is already a category is itself (most rows): no regular expression for it;
    # a CASE of the six, not an IN list, which DuckDB would turn into a join of every row
    itself = " ".join(
        f"WHEN {_lit(category)} THEN {label}" for category in schema.WORKLOAD_SYNONYMS
    )
    return f"CASE {label} {itself} ELSE {general} END"


RESERVED = frozenset({schema.INGEST_ID, "_row", "_r", "_nid", "_node_gpus", "_gpus_per_pod"})
# An adapter's own reject: column name, reason and value as text (all three or none).
ADAPTER_REJECT = ("_reject_column", "_reject_reason", "_reject_value")


def plan_load(
    table: Table,
    file: str,
    select: str,
    numbered: str,
    source: list[tuple[str, str]],
    existing: dict[str, str],
    adapter_rejects: bool = False,
    percent: frozenset[str] = frozenset(),
) -> LoadPlan:
    """Plan the load of one file's scan into ``table``.

    Args:
        table: the target table.
        file: the file's name as reported in errors and rejects.
        select: the SELECT scanning the file; numbered: the same plus ``_row``.
        source: the scan's columns as (name, DuckDB type).
        existing: the table's stored columns, name -> DuckDB type.
        adapter_rejects: the scan is an adapter's and may set ADAPTER_REJECT columns.
        percent: columns given in percent, scaled by 1/100 before the checks.

    Raises:
        InputError: a required column is missing or a column name is reserved
            (the whole call fails).
    """
    by_lower: dict[str, tuple[str, str]] = {}
    for name, sql_type in source:
        by_lower.setdefault(name.strip().lower(), (name, sql_type))
    for name in table.required:
        if name not in by_lower:
            raise InputError(file, "required column missing", column=name)
    schema_names = set(table.column_names)
    stored = {name.lower(): (name, sql_type) for name, sql_type in existing.items()}
    extras: list[tuple[str, str]] = []  # (stored name, value SQL)
    new_columns: list[tuple[str, str]] = []
    adapter_reject = adapter_rejects and all(name in dict(source) for name in ADAPTER_REJECT)
    for name, sql_type in source:
        if name.strip().lower() in schema_names or name == "_row":
            continue
        if adapter_reject and name in ADAPTER_REJECT:
            continue
        if name in RESERVED:
            raise InputError(
                file, "the column name is reserved by fleetaudit; rename it", column=name
            )
        kept = "VARCHAR" if sql_type.upper() == "JSON" else sql_type
        value = f"src.{q(name)}" if kept != "JSON" else f"CAST(src.{q(name)} AS VARCHAR)"
        if name.lower() in stored:
            stored_name, stored_type = stored[name.lower()]
            if stored_type.upper() != kept.upper():
                value = f"TRY_CAST({value} AS {stored_type})"
            extras.append((stored_name, value))
        else:
            extras.append((name, value))
            new_columns.append((name, kept))

    parsed: list[str] = []
    checks: list[_Check] = []
    passes: list[str] = []  # the column checks as the loading pass tests them
    if adapter_reject:
        parsed.extend(f"src.{q(name)} AS {q(name)}" for name in ADAPTER_REJECT)
        checks.append(
            _Check(
                "",
                "_reject_reason IS NOT NULL",
                "_reject_reason",
                "_reject_value",
                column_sql="_reject_column",
            )
        )
        passes.append("_reject_reason IS NULL")  # the adapter's own reject (checks[0])
    for col in table.columns:
        if col.name in by_lower:
            src_name, sql_type = by_lower[col.name]
            found: _Parsed | None = _parse(col, "src." + q(src_name), sql_type)
            assert found is not None
            value = f"({found.value}) / 100.0" if col.name in percent else found.value
            parsed.append(f"{value} AS {q(col.name)}")
            parsed.append(f"{found.raw} AS {q('r_' + col.name)}")
        else:
            found = None
            parsed.append(f"CAST(NULL AS {col.kind.value}) AS {q(col.name)}")
            parsed.append(f"CAST(NULL AS VARCHAR) AS {q('r_' + col.name)}")
        checks.extend(_column_checks(col, found))
        condition = _column_passes(col, found)
        if condition is not None:
            passes.append(condition)
    parsed.extend(f"{value} AS {q('x_' + name)}" for name, value in extras)

    derived = ["p.*"]
    joins = ""
    if table.references_node:
        derived.append("n.gpus AS _node_gpus")
        joins = "LEFT JOIN (SELECT node_id AS _nid, gpus FROM nodes) AS n ON p.node_id = n._nid"
    if table.name == "requests":
        derived.append(
            "COALESCE(p.gpus_per_pod, CASE WHEN p.gpus < 1 THEN p.gpus "
            f"ELSE least(p.gpus, {schema.DEFAULT_POD_GPUS!r}) END) "
            "AS _gpus_per_pod"
        )
    table_checks = _table_checks(table)
    checks.extend(table_checks)

    passes.extend(f"COALESCE(NOT ({c.condition}), TRUE)" for c in table_checks)
    passing = " AND ".join(passes) or "TRUE"  # FALSE or NULL: the row is rejected
    rejected = f"NOT COALESCE({passing}, FALSE)"

    def staged(source_sql: str, with_row: bool) -> str:
        row = ", src._row AS _row" if with_row else ""
        return (
            f"SELECT {', '.join(derived)} FROM (SELECT {', '.join(parsed)}{row} "
            f"FROM ({source_sql}) AS src) AS p {joins}"
        )

    target_cols = [q(c) for c in table.column_names] + [q(name) for name, _ in extras]
    values = [_resolved(table, c) for c in table.column_names] + [q("x_" + n) for n, _ in extras]
    load = (
        f"INSERT INTO {q(table.name)} ({', '.join(target_cols)}, {q(schema.INGEST_ID)}) "
        f"SELECT {', '.join(values)}, CASE WHEN {passing} THEN $ingest_id ELSE -$ingest_id END "
        f"FROM ({staged(select, False)}) AS d"
    )

    def case(part: Callable[[_Check], str]) -> str:
        whens = " ".join(f"WHEN COALESCE({c.condition}, FALSE) THEN {part(c)}" for c in checks)
        return f"CASE {whens} END"

    rejects = (
        f"INSERT INTO rejects SELECT $ingest_id, $file, {_lit(table.name)}, _row, "
        f"{case(lambda c: c.column_sql or _lit(c.column))}, {case(lambda c: c.shown)}, {case(lambda c: c.reason)} "
        f"FROM ({staged(numbered, True)}) AS d WHERE {rejected} ORDER BY _row"
    )
    return LoadPlan(tuple(new_columns), load, rejects)
