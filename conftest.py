"""Collection rules for the doctests of the package (pyproject: --doctest-modules).

The modules of the optional `spark` extra import pyspark and sqlglot at the top;
without the extra their doctests are not collected (their tests skip with a reason).
"""

from __future__ import annotations

from importlib.util import find_spec

collect_ignore = [
    path
    for path, needs in (
        ("fleetaudit/model/spark_sql.py", "sqlglot"),
        ("fleetaudit/model/spark_store.py", "pyspark"),
    )
    if find_spec(needs) is None
]
