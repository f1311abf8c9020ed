"""The one SQL text: the queries Spark runs translate through sqlglot, and the traps are refused.

Needs sqlglot (the ``spark`` extra) but no Java; skipped without it.
"""

from __future__ import annotations

import pytest

pytest.importorskip("sqlglot", reason="sqlglot comes with the spark extra: pip install '.[spark]'")

from fleetaudit.api.rollup_api import SOURCES  # noqa: E402
from fleetaudit.inputs.ingest.asi2026 import ASI_SPARK_QUERIES  # noqa: E402
from fleetaudit.core.resources import load_sql  # noqa: E402
from fleetaudit.model.spark_sql import (  # noqa: E402
    NotPortableError,
    portable_problems,
    spark_sql,
    translate,
)

SPARK_QUERIES = sorted(
    {o.query for s in SOURCES.values() for o in s.outputs}
    | {s.counts for s in SOURCES.values()}
    | set(ASI_SPARK_QUERIES)  # the ASI release's reduction (tests/test_spark.py runs it)
)


@pytest.mark.parametrize("name", SPARK_QUERIES)
def test_queries_spark_runs_are_portable(name: str) -> None:
    assert portable_problems(load_sql(name)) == []
    text = spark_sql(name)
    assert "$" not in text  # DuckDB's $name parameters become Spark's :name


def test_duckdb_idioms_become_spark_functions() -> None:
    text = spark_sql("rollup_telemetry")
    assert "UNIX_MICROS(" in text and "TIMESTAMP_MICROS(" in text
    assert "EPOCH_US" not in text.upper()
    assert "DIV :interval_us" in text


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x) FROM t", "WITHIN GROUP"),
        ("SELECT approx_count_distinct(x) FROM t", "approx_*"),
        ("SELECT COLUMNS('a.*') FROM t", "COLUMNS"),
        ("SELECT * FROM read_parquet('x.parquet')", "paths"),
        ("SELECT hash(node_id) FROM t", "hash()"),
        ("SELECT 1; SELECT 2", "one statement per file"),
    ],
)
def test_traps_are_refused(sql: str, reason: str) -> None:
    problems = portable_problems(sql)
    assert any(reason in p for p in problems), problems


def test_comments_are_not_code() -> None:
    assert portable_problems("-- uses hash( in prose only\nSELECT 1 AS x") == []


def test_a_query_that_is_not_portable_is_a_clear_error() -> None:
    with pytest.raises(NotPortableError, match="telemetry_interval does not run on Spark"):
        spark_sql("telemetry_interval")  # hash() picks its sample of nodes


def test_exact_quantile_stays_exact() -> None:
    import sqlglot

    from fleetaudit.model.spark_sql import FleetSpark

    text = sqlglot.transpile("SELECT quantile_cont(x, 0.5) FROM t", read="duckdb", write=FleetSpark)[0]
    assert text == "SELECT PERCENTILE(x, 0.5) FROM t"


def test_arg_min_skips_nulls_on_spark_as_on_duckdb() -> None:
    """DuckDB's arg_min / min_by skip a NULL value; Spark's MIN_BY would return it."""
    text = translate("SELECT arg_min(x, t), max_by(x, t + 1), arg_max_null(x, t) FROM v")
    assert text == (
        "SELECT MIN_BY(x, CASE WHEN x IS NOT NULL THEN t END), "
        "MAX_BY(x, CASE WHEN x IS NOT NULL THEN t + 1 END), MAX_BY(x, t) FROM v"
    )
    problems = portable_problems("SELECT arg_min(x, t, 2) FROM v")
    assert problems == ["sqlglot: MIN_BY with a count (DuckDB's top-n list) has no Spark form"]


def test_duckdbs_isfinite_and_to_hours_have_spark_forms() -> None:
    text = translate("SELECT isfinite(x), $start + to_hours(CAST(t AS BIGINT)) FROM v")
    assert text == (
        "SELECT (NOT ISNAN(x) AND ABS(x) <> DOUBLE('Infinity')), "
        ":start + (CAST(t AS BIGINT)) * INTERVAL '1' HOUR FROM v"
    )
