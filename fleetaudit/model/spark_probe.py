"""What the Spark executors' Python can import: the check ``--engine spark`` runs first.

Standard library only, and sent to the executors by value (the Spark engine
registers this module with cloudpickle), so it runs where fleetaudit itself is
not installed yet. :mod:`fleetaudit.model.spark_store` calls it through a plain
Python UDF, which needs nothing on the executors but pyspark's own worker.
"""

from __future__ import annotations

import importlib
import json
import sys

# What the fan-out's Arrow function needs on an executor (applyInArrow needs pandas
# and pyarrow; the compaction search, numpy and polars; and fleetaudit itself).
REQUIRED = ("pyarrow", "pandas", "numpy", "polars", "fleetaudit", "fleetaudit.whatif.compaction")


def probe(_: int) -> str:
    """JSON: this Python's version and executable, the modules of REQUIRED it lacks
    (each with the error's first line), and fleetaudit's version and location."""
    missing: dict[str, str] = {}
    for name in REQUIRED:
        try:
            importlib.import_module(name)
        except Exception as exc:  # ImportError, and whatever a broken install raises
            text = str(exc).strip()
            missing[name] = text.splitlines()[0] if text else type(exc).__name__
    fleet = sys.modules.get("fleetaudit")
    return json.dumps(
        {
            "python": ".".join(str(v) for v in sys.version_info[:3]),
            "executable": sys.executable,
            "missing": missing,
            "fleetaudit": getattr(fleet, "__version__", None),
            "fleetaudit_file": getattr(fleet, "__file__", None),
        },
        sort_keys=True,
    )
