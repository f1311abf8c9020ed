"""Choose the engine of a scan or a fan-out: DuckDB (built in) or Spark (the ``spark`` extra).

Both engines have the methods of :class:`fleetaudit.model.store.ScanEngine`. Nothing
here imports pyspark: :mod:`fleetaudit.model.spark_store` is imported only when
``--engine spark`` is asked for, and a missing extra is a one-line usage error.
"""

from __future__ import annotations

import importlib
from typing import Any

from fleetaudit.core.errors import UsageError
from fleetaudit.core.options import SCAN_ENGINES

ENGINES = SCAN_ENGINES
SPARK_EXTRA = "--engine spark needs the spark extra: pip install 'fleetaudit[spark]' (and Java 17 or 21)"


def check_engine(engine: str, master: str | None) -> None:
    """Raise UsageError for an unknown engine, or ``--master`` without Spark."""
    if engine not in ENGINES:
        raise UsageError(f"--engine: {engine!r} is not one of {', '.join(ENGINES)}")
    if master is not None and engine != "spark":
        raise UsageError("--master: only with --engine spark")
    if master is not None and not master.strip():
        raise UsageError("--master: give a Spark master URL, e.g. local[*] or spark://host:7077")


def spark_module() -> Any:
    """:mod:`fleetaudit.model.spark_store`, or the one-line error that names the extra."""
    try:
        # through sys.modules, so a test can take the module away after an import
        return importlib.import_module("fleetaudit.model.spark_store")
    except ImportError as exc:
        raise UsageError(SPARK_EXTRA) from exc


def open_engine(engine: str, master: str | None = None) -> Any:
    """A scan engine (close it, or use it as a context manager)."""
    check_engine(engine, master)
    if engine == "spark":
        return spark_module().SparkEngine(master)
    from fleetaudit.model.store import ScanEngine

    return ScanEngine()
