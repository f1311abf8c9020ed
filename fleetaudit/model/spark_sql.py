"""One SQL text for two engines: the queries run on DuckDB as written, on Spark transpiled.

The files in ``queries/`` are written in DuckDB's dialect. For ``--engine spark``
this module translates a query with sqlglot through :class:`FleetSpark`, a small
subclass of sqlglot's Spark dialect that holds fleetaudit's few overrides, and it
refuses the constructs whose Spark translation is wrong or approximate, so that
a query never gives a different answer on the other engine without notice.

Only this module imports sqlglot (part of the ``spark`` extra); it never imports
pyspark, so the portability check runs without Java.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark

from fleetaudit.core.errors import FleetAuditError
from fleetaudit.core.resources import load_sql

__all__ = [
    "FleetSpark",
    "NotPortableError",
    "empty_select",
    "portable_problems",
    "spark_sql",
    "translate",
]


class NotPortableError(FleetAuditError):
    """A query uses a construct that Spark would run differently, or not at all."""


def _anonymous(self: Spark.Generator, node: exp.Anonymous) -> str:
    name = str(node.this).upper()
    if name == "EPOCH_US":  # DuckDB's microseconds since the epoch; Spark's unix_micros
        return self.func("UNIX_MICROS", *node.expressions)
    if name == "ISFINITE" and len(node.expressions) == 1:
        # DuckDB's isfinite (NULL for NULL); Spark has isnan and infinite literals
        value = self.sql(node.expressions[0])
        return f"(NOT ISNAN({value}) AND ABS({value}) <> DOUBLE('Infinity'))"
    if name == "TO_HOURS" and len(node.expressions) == 1:  # DuckDB's interval of x hours
        return f"({self.sql(node.expressions[0])}) * INTERVAL '1' HOUR"
    if name in ("ARG_MIN_NULL", "ARG_MAX_NULL") and len(node.expressions) == 2:
        # DuckDB's variants that keep a NULL value: Spark's MIN_BY / MAX_BY as they are
        return self.func("MIN_BY" if name == "ARG_MIN_NULL" else "MAX_BY", *node.expressions)
    return Spark.Generator.anonymous_sql(self, node)


def _arg_by(function: str) -> Callable[[Spark.Generator, exp.ArgMin | exp.ArgMax], str]:
    """DuckDB's arg_min(x, t) / arg_max(x, t) (also spelt min_by / max_by) skip the rows
    where x is NULL; Spark's MIN_BY / MAX_BY return x of the first (last) t even when it
    is NULL. So the ordering is NULL where x is (Spark skips a NULL ordering, as DuckDB
    does): the first (last) value that is not NULL on both engines."""

    def generate(self: Spark.Generator, node: exp.ArgMin | exp.ArgMax) -> str:
        if node.args.get("count") is not None:
            self.unsupported(f"{function} with a count (DuckDB's top-n list) has no Spark form")
        value, order = self.sql(node, "this"), self.sql(node, "expression")
        return f"{function}({value}, CASE WHEN {value} IS NOT NULL THEN {order} END)"

    return generate


class FleetSpark(Spark):
    """sqlglot's Spark dialect with fleetaudit's overrides."""

    class Generator(Spark.Generator):
        TRANSFORMS = {  # noqa: RUF012 (sqlglot's own pattern)
            **Spark.Generator.TRANSFORMS,
            # DuckDB's quantile_cont(x, q) is exact; Spark rejects PERCENTILE_CONT(x, q)
            exp.PercentileCont: lambda self, e: self.func("PERCENTILE", e.this, e.expression),
            exp.Anonymous: _anonymous,
            exp.ArgMin: _arg_by("MIN_BY"),
            exp.ArgMax: _arg_by("MAX_BY"),
        }


# Constructs that transpile silently wrong (WITHIN GROUP becomes PERCENTILE_APPROX),
# engine-dependent by design (approx_*), or not at all (paths, COLUMNS, ASOF, samples).
_DENIED = (
    (re.compile(r"\bwithin\s+group\b", re.I), "WITHIN GROUP becomes an approximate percentile"),
    (re.compile(r"\bapprox_\w+\s*\(", re.I), "approx_* results differ by engine"),
    (re.compile(r"\bcolumns\s*\(", re.I), "COLUMNS(...) has no Spark form"),
    (re.compile(r"\b(asof|positional)\s+join\b", re.I), "ASOF/POSITIONAL JOIN has no Spark form"),
    (re.compile(r"\busing\s+sample\b", re.I), "USING SAMPLE differs on Spark"),
    (re.compile(r"\bread_(parquet|csv|json)\s*\(", re.I), "paths do not belong in queries/"),
    (re.compile(r"\bhash\s*\(", re.I), "hash() differs by engine"),
    (re.compile(r"\bmacro\b", re.I), "macros have no Spark form"),
)


def _code(text: str) -> str:
    """The SQL without its comments (the denylist reads code, not prose)."""
    return re.sub(r"--[^\n]*", "", text)


def portable_problems(text: str) -> list[str]:
    """Why ``text`` is not portable to Spark; empty when it is."""
    code = _code(text)
    problems = [reason for pattern, reason in _DENIED if pattern.search(code)]
    try:
        trees = sqlglot.parse(code, read="duckdb")
        if len(trees) != 1:
            problems.append("one statement per file")
        for tree in trees:
            if tree is not None:
                tree.sql(dialect=FleetSpark, unsupported_level=sqlglot.ErrorLevel.RAISE)
    except sqlglot.errors.SqlglotError as exc:
        problems.append(f"sqlglot: {str(exc).splitlines()[0]}")
    return problems


@cache
def spark_sql(query_name: str) -> str:
    """``queries/<query_name>.sql`` in Spark SQL (``$name`` parameters become ``:name``)."""
    text = load_sql(query_name)
    problems = portable_problems(text)
    if problems:
        raise NotPortableError(
            f"query {query_name} does not run on Spark unchanged: {'; '.join(problems)}"
        )
    return translate(text)


def translate(text: str) -> str:
    """One DuckDB statement in Spark SQL, without the portability check (:func:`spark_sql`
    runs it first)."""
    return sqlglot.transpile(
        _code(text), read="duckdb", write=FleetSpark, unsupported_level=sqlglot.ErrorLevel.RAISE
    )[0]


@cache
def empty_select(ddl_name: str, **extra: str) -> str:
    """A Spark SELECT of no rows with the columns of the DuckDB ``CREATE TABLE`` in
    ``queries/<ddl_name>.sql`` (and ``extra`` columns: name -> DuckDB type): the empty
    table a DuckDB step creates, as a view Spark's queries can read."""
    tree = sqlglot.parse_one(_code(load_sql(ddl_name)), read="duckdb")
    schema = tree.this if isinstance(tree, exp.Create) else None
    if not isinstance(schema, exp.Schema):
        raise NotPortableError(f"query {ddl_name} is not a CREATE TABLE with its columns")
    columns = [
        (c.name, c.args["kind"].sql(dialect=FleetSpark))
        for c in schema.expressions
        if isinstance(c, exp.ColumnDef)
    ]
    columns += [
        (name, exp.DataType.build(kind, dialect="duckdb").sql(dialect=FleetSpark))
        for name, kind in extra.items()
    ]
    listed = ", ".join(f"CAST(NULL AS {kind}) AS {name}" for name, kind in columns)
    return f"SELECT {listed} FROM (SELECT 1 AS one) AS e WHERE FALSE"
