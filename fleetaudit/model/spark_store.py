"""Spark as a scan and fan-out engine (``--engine spark``): the only module that imports pyspark.

Part of the optional ``spark`` extra (``pip install 'fleetaudit[spark]'``, and Java
17 or 21). It has the methods of :class:`fleetaudit.model.store.ScanEngine`, and runs
the same files of ``queries/`` through :func:`fleetaudit.model.spark_sql.spark_sql`.
:meth:`SparkEngine.map_groups` ships the groups of an Arrow table to the
executors (``applyInArrow``) and brings the results back as one Arrow table.

The session: ``--master URL`` when given; else the session that a ``spark-submit``
or a ``SPARK_REMOTE`` (Spark Connect) environment provides; else ``local[*]``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from fleetaudit.core.errors import FleetAuditError, QueryError
from fleetaudit.model.spark_sql import spark_sql

DEFAULT_MASTER = "local[*]"

# Spark's own log lines would drown the one-line errors and the progress on stderr.
_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark: %p %c{1}: %m%n%ex{short}
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""


def _environment_session() -> bool:
    """Whether the environment gives the session (Spark Connect, or a spark-submit driver)."""
    return bool(os.environ.get("SPARK_REMOTE") or os.environ.get("PYSPARK_GATEWAY_PORT"))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class SparkEngine:
    """A Spark session used as fleetaudit's scan and fan-out engine."""

    name = "spark"

    def __init__(self, master: str | None = None) -> None:
        builder = SparkSession.builder.appName("fleetaudit")
        local = master is None and not _environment_session()
        master = DEFAULT_MASTER if local else master
        if master is not None:
            builder = builder.master(master)
        if master is not None and master.startswith("local"):
            # executors are this machine's Python: the one fleetaudit runs in
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            self._log4j = tempfile.NamedTemporaryFile(
                "w", prefix="fleetaudit-log4j2-", suffix=".properties", delete=False
            )
            self._log4j.write(_LOG4J)
            self._log4j.close()
            builder = (
                builder.config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.log.structuredLogging.enabled", "false")
                .config("spark.sql.shuffle.partitions", str(os.cpu_count() or 2))
                .config(
                    "spark.driver.extraJavaOptions",
                    f"-Dlog4j2.configurationFile=file:{self._log4j.name}",
                )
            )
        builder = builder.config("spark.sql.session.timeZone", "UTC")
        try:
            self.spark = builder.getOrCreate()
        except Exception as exc:
            raise FleetAuditError(
                f"could not start Spark ({_first_line(exc)}); --engine spark needs Java 17 or "
                "21 on PATH (or JAVA_HOME) and a reachable --master"
            ) from exc
        self.spark.conf.set("spark.sql.session.timeZone", "UTC")

    def close(self) -> None:
        """Leave the session to its owner: only a session this engine started locally stops."""
        log4j = getattr(self, "_log4j", None)
        if log4j is not None:
            Path(log4j.name).unlink(missing_ok=True)

    def __enter__(self) -> SparkEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def register_parquet(
        self, view: str, files: list[Path], hive: bool, optional: Mapping[str, str] | None = None
    ) -> None:
        """Make the Parquet ``files`` readable as the temporary view ``view``; an
        ``optional`` column (name -> SQL type) that no file holds reads as NULL."""
        from pyspark.sql.functions import lit

        reader = self.spark.read.option("mergeSchema", "true")
        if hive:
            reader = reader.option("basePath", str(_common_root(files)))
        try:
            frame = reader.parquet(*[str(f) for f in files])
            present = {c.lower() for c in frame.columns}
            for name, kind in (optional or {}).items():
                if name.lower() not in present:
                    frame = frame.withColumn(name, lit(None).cast(kind))
            frame.createOrReplaceTempView(view)
        except PySparkException as exc:
            raise QueryError(_first_line(exc)) from exc

    def columns(self, view: str) -> dict[str, str]:
        """The view's columns, name -> Spark type."""
        return {f.name: f.dataType.simpleString() for f in self.spark.table(view).schema.fields}

    def batches(self, query_name: str, /, **params: Any) -> Iterator[pa.RecordBatch]:
        """Run ``queries/<query_name>.sql`` transpiled; its result, brought back as Arrow."""
        try:
            table = self.spark.sql(spark_sql(query_name), args=params).toArrow()
        except PySparkException as exc:
            raise QueryError(_first_line(exc)) from exc
        yield from table.to_batches()

    def map_groups(
        self,
        table: pa.Table,
        key: str,
        fn: Callable[[pa.Table], pa.Table],
        schema: pa.Schema,
    ) -> pa.Table:
        """``fn`` applied to the rows of ``table`` of each ``key``, on the executors.

        ``fn`` must be a module-level function of an importable module: the
        executors import it by name. The results come back in no particular order.
        """
        frame = self.spark.createDataFrame(table)
        groups = max(1, len(set(table.column(key).to_pylist())))
        try:
            out = (
                frame.repartition(groups, key)
                .groupBy(key)
                .applyInArrow(fn, from_arrow_schema(schema))
                .toArrow()
            )
        except PySparkException as exc:
            raise QueryError(_first_line(exc)) from exc
        return out.cast(schema)


def _common_root(files: list[Path]) -> Path:
    """The folder under which the hive partition folders (``key=value``) start."""
    root = Path(os.path.commonpath([str(f.parent) for f in files]))
    while "=" in root.name:
        root = root.parent
    return root
