"""The loading pass's one condition per column rejects exactly the rows one of the column's
checks rejects (the rejects pass names the first of them): random values, NULL, empty text,
NaN, the infinities and values at the bounds, as text (CSV) and as typed columns (Parquet)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetaudit.inputs.ingest.validate import _column_checks, _column_passes, _parse
from fleetaudit.model import schema
from fleetaudit.model.schema import Column, Kind
from fleetaudit.model.store import Store, open_store, quote_identifier

COLUMNS = [
    pytest.param(column, id=f"{table.name}.{column.name}")
    for table in schema.TABLES.values()
    for column in table.columns
]
TYPED = {Kind.FLOAT: "DOUBLE", Kind.INT: "BIGINT", Kind.TIME: "TIMESTAMP", Kind.BOOL: "BOOLEAN",
         Kind.TEXT: "VARCHAR"}  # fmt: skip


@pytest.fixture(scope="module")
def memory_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    store = open_store(Path(tmp_path_factory.mktemp("checks")) / "checks.duckdb")
    yield store
    store.close()


def _bound_texts(column: Column) -> list[str]:
    numbers = [0, 1, -1, 0.5, 1.5, -0.0, 1e-300]
    if column.maximum is not None:
        numbers += [column.maximum, column.maximum + 1, column.maximum - 0.5]
    return [repr(n) for n in numbers]


TEXTS = st.one_of(
    st.none(),
    st.sampled_from(
        ["", " ", "nan", "NaN", "inf", "-inf", "Infinity", "abc", "1e400", "-1e400", "9e15",
         "2026-01-02 03:04:05", "1899-12-31 23:59:59", "2199-12-31", "2200-01-01", "1900-01-01",
         "infinity", "-infinity", "1700000000", "1e11", "-5e10", "true", "F", "yes", "maybe",
         "high", "LOW", "Healthy", "down", "node", "Switch", "other"]
    ),  # fmt: skip
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(10**12), 10**12).map(str),
    st.text(max_size=6),
)


def _rejected(store: Store, column: Column, sql_type: str, values: list[str | None]) -> list[tuple]:
    """Per value: (rejected by the one condition, rejected by one of the checks)."""
    name = quote_identifier(column.name)
    parsed = _parse(column, "src." + name, sql_type)
    checks = _column_checks(column, parsed)
    passes = _column_passes(column, parsed)
    by_check = " OR ".join(f"COALESCE({c.condition}, FALSE)" for c in checks) or "FALSE"
    by_pass = f"NOT COALESCE({passes}, FALSE)" if passes else "FALSE"
    source = f"TRY_CAST(v AS {sql_type})" if sql_type != "VARCHAR" else "v"
    rows = store.sql(
        f"SELECT {by_pass} AS one, {by_check} AS checks FROM (SELECT {parsed.value} AS {name}, "
        f"{parsed.raw} AS {quote_identifier('r_' + column.name)} FROM (SELECT {source} AS {name} "
        f"FROM (SELECT unnest(CAST($values AS VARCHAR[])) AS v) AS raw) AS src) AS p",
        {"values": values},
    )
    return list(rows.iter_rows())


@pytest.mark.parametrize("column", COLUMNS)
@pytest.mark.parametrize("typed", [False, True], ids=["text", "typed"])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(TEXTS, min_size=1, max_size=20))
def test_one_condition_rejects_as_the_checks(
    memory_store: Store, column: Column, typed: bool, values: list[str | None]
) -> None:
    sql_type = TYPED[column.kind] if typed else "VARCHAR"
    values = values + _bound_texts(column) + [None, ""]
    for one, checks in _rejected(memory_store, column, sql_type, values):
        assert one == checks


@pytest.mark.parametrize(
    ("column", "value", "rejected"),
    [
        (schema.ALLOCATIONS.column("gpus"), "1024", False),  # the maximum is allowed
        (schema.ALLOCATIONS.column("gpus"), "1024.5", True),
        (schema.ALLOCATIONS.column("gpus"), "nan", True),
        (schema.ALLOCATIONS.column("gpus"), None, True),  # required
        (schema.ALLOCATIONS.column("memory_gib"), None, False),  # optional
        (schema.ALLOCATIONS.column("memory_gib"), "-inf", True),
        (schema.ALLOCATIONS.column("memory_gib"), "lots", True),  # text that does not parse
        (schema.TELEMETRY.column("sm_active"), "1", False),
        (schema.TELEMETRY.column("sm_active"), "1.0001", True),
        (schema.ALLOCATIONS.column("priority"), "HIGH", False),  # enums ignore case
        (schema.ALLOCATIONS.column("priority"), "urgent", True),
        (schema.ALLOCATIONS.column("end_time"), "2200-01-01", True),  # the range's end is out
        (schema.ALLOCATIONS.column("end_time"), "1900-01-01", False),
        (schema.NODES.column("health"), "", False),  # empty: missing, and health is optional
    ],
)
def test_hand_worked_values(memory_store: Store, column: Column, value: str | None, rejected: bool) -> None:
    ((one, checks),) = _rejected(memory_store, column, "VARCHAR", [value])
    assert (one, checks) == (rejected, rejected)


def test_nan_lies_beyond_every_bound(memory_store: Store) -> None:
    # what the one condition relies on: NaN compares above infinity, NULL stays NULL
    row = memory_store.sql(
        "SELECT CAST('nan' AS DOUBLE) <= 1, CAST('nan' AS DOUBLE) < CAST('inf' AS DOUBLE), "
        "CAST('nan' AS DOUBLE) >= 0, CAST(NULL AS DOUBLE) >= 0"
    ).row(0)
    assert row == (False, False, True, None)
