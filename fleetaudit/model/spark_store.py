"""Spark as a scan and fan-out engine (``--engine spark``): the only module that imports pyspark.

Part of the optional ``spark`` extra (``pip install 'fleetaudit[spark]'``, and Java
17 or 21). It has the methods of :class:`fleetaudit.model.store.ScanEngine`, and runs
the same files of ``queries/`` through :func:`fleetaudit.model.spark_sql.spark_sql`.

- The session: ``--master URL`` when given; else the session that a ``spark-submit``
  or a ``SPARK_REMOTE`` (Spark Connect) environment provides; else ``local[*]``.
  A ``spark://`` or ``sc://`` address that nothing answers on fails at once, naming it.
- :meth:`SparkEngine.batches` with a ``scratch`` folder has the executors write the
  query's result there as Parquet (the rolled tables never pass through the driver,
  nor do the raw rows); the caller reads the part files back in order.
- :meth:`SparkEngine.map_groups` ships the groups of an Arrow table to the executors
  (``applyInArrow``) and brings the results back as one Arrow table. Before its first
  job it sends the executors this fleetaudit (a zip, through ``addPyFile``, or Spark
  Connect's ``addArtifacts``) and checks that their Python imports it and its
  dependencies (:mod:`fleetaudit.model.spark_probe`); a module they lack is one line
  that names it and how to provide it.
- A failed job is one line naming the session's address and the step that failed. On
  a cluster (not Spark Connect, whose server keeps its executors to itself), a job
  whose application has lost every executor is cancelled once none has come back
  for ``spark.fleetaudit.executorTimeout`` seconds (default 120): Spark itself would
  wait for a worker forever.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

import fleetaudit
from fleetaudit.core.errors import FleetAuditError, QueryError
from fleetaudit.model import spark_probe
from fleetaudit.model.spark_sql import empty_select, spark_sql, translate

DEFAULT_MASTER = "local[*]"
EXECUTOR_TIMEOUT_KEY = "spark.fleetaudit.executorTimeout"
EXECUTOR_TIMEOUT_S = 120.0
CONNECT_TIMEOUT_S = 5.0  # to open a TCP connection to a spark:// master or sc:// server
_DEFAULT_PORTS = {"spark": 7077, "sc": 15002}

# Spark's own log lines would drown the one-line errors and the progress on stderr.
_LOG4J = """\
rootLogger.level = fatal
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = spark: %p %c{1}: %m%n%ex{short}
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""

HOW_TO_PROVIDE = (
    "give the executors fleetaudit's dependencies: pip install them into the Python that "
    "spark.pyspark.python names there, or ship a packed environment (venv-pack -o env.tar.gz; "
    "spark-submit --archives env.tar.gz#env --conf spark.pyspark.python=./env/bin/python); "
    "docs/rollup.md, 'What the executors need'"
)


class SparkJobError(QueryError):
    """A Spark step that failed: names the session's address and the step."""


def _environment_session() -> bool:
    """Whether the environment gives the session (Spark Connect, or a spark-submit driver)."""
    return bool(os.environ.get("SPARK_REMOTE") or os.environ.get("PYSPARK_GATEWAY_PORT"))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


_JAVA_CLASS = re.compile(r"^:?\s*(?:[\w$]+\.)+[\w$]*(?:Exception|Error)(?::\s*|$)")
_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\.?\s*$")


def _reason(exc: BaseException) -> str:
    """The useful line of a Spark error: the task's own failure (an error class such as
    ``[FAILED_READ_FILE...]``, or a Python import error), not py4j's or the job's wrapper."""
    lines = [
        line.strip() for line in str(exc).splitlines()
        if line.strip() and not line.strip().startswith(("at ", "..."))
    ]  # fmt: skip
    if not lines:
        return type(exc).__name__
    for line in lines:
        if "ModuleNotFoundError" in line or "ImportError" in line:
            return line
    causes = [line.split("Caused by: ", 1)[1] for line in lines if "Caused by: " in line]
    causes += [line.split("most recent failure: ", 1)[1] for line in lines if "most recent failure: " in line]
    causes += [line for line in lines if not line.startswith("An error occurred while calling")]
    best = next((c for c in causes if "[" in c and "]" in c), causes[0] if causes else lines[0])
    if ": " in best and best.split(": ", 1)[0].startswith(("Lost task", "Job aborted")):
        best = best.split(": ", 1)[1]
    best = _SQLSTATE.sub("", _JAVA_CLASS.sub("", best)).strip()
    return best if len(best) <= 400 else best[:397] + "..."


def check_reachable(url: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Fail with one line when no host of a ``spark://`` or ``sc://`` URL accepts a TCP
    connection (a standalone master's list ``spark://h1:7077,h2:7077`` needs one of them)."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in _DEFAULT_PORTS:
        return  # local[*], yarn, k8s://...: Spark itself says what is wrong
    rest = url.split("://", 1)[1].split("/", 1)[0]
    reasons = []
    for hostport in rest.split(","):
        parsed = urlsplit(f"//{hostport}")
        host, port = parsed.hostname or "localhost", parsed.port or _DEFAULT_PORTS[scheme]
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or type(exc).__name__}")
    what = "Spark Connect server" if scheme == "sc" else "Spark master"
    raise FleetAuditError(
        f"{url}: cannot reach the {what} ({'; '.join(reasons)}); "
        "is it running, and are its host and port right?"
    )


class SparkEngine:
    """A Spark session used as fleetaudit's scan and fan-out engine."""

    name = "spark"

    def __init__(self, master: str | None = None) -> None:
        remote = master if master and master.lower().startswith("sc://") else None
        if master is None:
            remote = os.environ.get("SPARK_REMOTE") or None
        local = master is None and not _environment_session()
        master = DEFAULT_MASTER if local else master
        self.where = remote or master or "the spark-submit session"
        self._python_ready = False
        self._lost = False
        check_reachable(self.where)
        self._scratch = Path(tempfile.mkdtemp(prefix="fleetaudit-spark-"))
        try:
            self.spark = self._connect(remote) if remote else self._classic(master)
        except FleetAuditError:
            self.close()
            raise
        except Exception as exc:
            self.close()
            raise FleetAuditError(
                f"{self.where}: could not start Spark ({_first_line(exc)}); --engine spark needs "
                "Java 17 or 21 on PATH (or JAVA_HOME) and a reachable --master"
            ) from exc
        self.remote = remote is not None
        with self._step("setting up the session"):
            self.spark.conf.set("spark.sql.session.timeZone", "UTC")
            # the part files the executors write are read back by pyarrow as plain timestamps
            self.spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")

    def _connect(self, url: str) -> Any:
        """A Spark Connect session (its own client, whatever classic session this process has)."""
        try:
            from pyspark.sql.connect.session import SparkSession as ConnectSession
        except ImportError as exc:
            raise FleetAuditError(
                f"{url}: Spark Connect needs its client's packages ({_first_line(exc)}): "
                "pip install 'fleetaudit[spark]'"
            ) from exc
        return ConnectSession.builder.remote(url).getOrCreate()

    def _classic(self, master: str | None) -> SparkSession:
        """A classic session: ``master``'s, or the spark-submit driver's (``master`` None)."""
        builder = SparkSession.builder.appName("fleetaudit")
        if master is not None:
            builder = builder.master(master)
            if master.startswith("local"):
                # executors are this machine's Python: the one fleetaudit runs in
                os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
                os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
                builder = builder.config("spark.ui.enabled", "false").config(
                    "spark.sql.shuffle.partitions", str(os.cpu_count() or 2)
                )
            log4j = self._scratch / "log4j2.properties"
            log4j.write_text(_LOG4J)
            builder = (
                builder.config("spark.ui.showConsoleProgress", "false")
                .config("spark.log.structuredLogging.enabled", "false")
                .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
            )
        return builder.config("spark.sql.session.timeZone", "UTC").getOrCreate()

    def close(self) -> None:
        """Release a Spark Connect session (the server stays up; a client that leaves
        its session to the exit handler retries against a server that may be gone);
        leave a classic one to its owner (a local one ends with this process); remove
        this engine's scratch files."""
        if getattr(self, "remote", False):
            with contextlib.suppress(Exception):
                self.spark.stop()
        shutil.rmtree(self._scratch, ignore_errors=True)

    def __enter__(self) -> SparkEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _functions(self) -> Any:
        """pyspark's SQL functions for this session's kind (a process may hold both kinds)."""
        if self.remote:
            from pyspark.sql.connect import functions as connect_functions

            return connect_functions
        from pyspark.sql import functions

        return functions

    # ------------------------------------------------------------------ failures

    def _executors(self) -> int | None:
        """Executors the application holds now; None where this driver cannot tell
        (Spark Connect, local mode)."""
        if self.remote or self._local():
            return None
        status = self.spark.sparkContext._jsc.sc().getExecutorMemoryStatus()  # the driver's block manager too
        return int(status.size()) - 1

    def _executor_timeout(self) -> float:
        return float(self.spark.conf.get(EXECUTOR_TIMEOUT_KEY, str(EXECUTOR_TIMEOUT_S)) or 0)

    def _local(self) -> bool:
        return not self.remote and str(self.spark.sparkContext.master).startswith("local")

    @contextlib.contextmanager
    def _watch(self) -> Iterator[None]:
        """Cancel the running jobs when the application has had no executor for the timeout."""
        if self._executors() is None:
            yield
            return
        timeout = self._executor_timeout()
        done = threading.Event()

        def watch() -> None:
            since: float | None = None
            while not done.wait(0.5):
                try:
                    count = self._executors()
                except Py4JError:
                    return
                if count:
                    since = None
                    continue
                since = since or time.monotonic()
                if time.monotonic() - since >= timeout:
                    self._lost = True
                    self.spark.sparkContext.cancelAllJobs()
                    return

        thread = threading.Thread(target=watch, name="fleetaudit-spark-watch", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()

    @contextlib.contextmanager
    def _step(self, what: str) -> Iterator[None]:
        """One line naming the session and ``what`` for whatever Spark raises inside."""
        self._lost = False
        try:
            with self._watch():
                yield
        except FleetAuditError:
            raise
        except (PySparkException, Py4JError, ConnectionError) as exc:
            if self._lost:
                reason = (
                    f"the application lost every executor (a worker gone?) and none came back "
                    f"within {self._executor_timeout():g} s ({EXECUTOR_TIMEOUT_KEY})"
                )
            else:
                reason = _reason(exc)
            raise SparkJobError(f"{self.where}: {what} failed: {reason}") from exc

    # ------------------------------------------------------------------ scans

    def register_parquet(
        self, view: str, files: list[Path], hive: bool, optional: Mapping[str, str] | None = None
    ) -> None:
        """Make the Parquet ``files`` readable as the temporary view ``view``; an
        ``optional`` column (name -> SQL type) that no file holds reads as NULL."""
        lit = self._functions().lit
        root = _common_root(files)
        with self._step(f"reading the schemas of {len(files)} Parquet file(s) under {root}"):
            frame = self._parquet(files, root if hive else None)
            present = {c.lower() for c in frame.columns}
            for name, kind in (optional or {}).items():
                if name.lower() not in present:
                    frame = frame.withColumn(name, lit(None).cast(kind))
            frame.createOrReplaceTempView(view)

    def _parquet(self, files: list[Path], base: Path | None) -> Any:
        """The Parquet ``files``, their columns united by name; with ``base``, the hive
        partition folders under it read as columns."""
        reader = self.spark.read.option("mergeSchema", "true")
        if base is not None:
            reader = reader.option("basePath", str(base))
        return reader.parquet(*[str(f) for f in files])

    def columns(self, view: str) -> dict[str, str]:
        """The view's columns, name -> Spark type."""
        return {f.name: f.dataType.simpleString() for f in self.spark.table(view).schema.fields}

    def batches(
        self, query_name: str, /, scratch: Path | None = None, **params: Any
    ) -> Iterator[pa.RecordBatch]:
        """Run ``queries/<query_name>.sql`` transpiled; its result as Arrow batches, in order.

        Without ``scratch`` the result comes back to this driver (small results). With
        it, the executors write the result as Parquet into that folder, which must be
        one they and this machine both see, and the batches are read from those files.
        """
        frame = self.spark.sql(spark_sql(query_name), args=params)
        if scratch is None:
            with self._step(f"query {query_name}"):
                table = frame.toArrow()
            yield from table.to_batches()
            return
        with self._step(f"query {query_name} (the executors writing {scratch})"):
            frame.write.mode("overwrite").parquet(str(scratch))
        for part in sorted(scratch.glob("part-*")):  # Spark numbers them in the result's order
            yield from pq.ParquetFile(part).iter_batches(batch_size=1 << 17)

    # ------------------------------------------------------------------ staged reductions
    # A reduction of several steps (rollup --format alibaba-gpu-v2026) keeps each step's
    # rows where the executors wrote them, as DuckDB keeps temporary tables: views over
    # the executors' Parquet, read by the next step's query.

    def register_rows(self, view: str, files: list[Path], base: Path) -> None:
        """The Parquet ``files`` (hive partition folders under ``base`` read as columns,
        the columns united by name) as the view ``view``, with the two columns DuckDB's
        ``read_parquet(filename = true, file_row_number = true)`` adds: ``filename``, the
        file's path as given here (Spark's own is a URI), and ``file_row_number``, the
        row's position in its file from 0 (Spark's ``_metadata``)."""
        functions = self._functions()
        given = {os.path.abspath(f): str(f) for f in files}
        with self._step(f"reading the schemas of {len(files)} Parquet file(s) under {base}"):
            frame = self._parquet(files, base)
            # the files' URIs as the listing gives them (file:///a) and as _metadata does (file:/a)
            names = {
                (spelling, given.get(_uri_path(uri), _uri_path(uri)))
                for uri in frame.inputFiles()
                for spelling in (uri, re.sub(r"^file:///", "file:/", uri))
            }
            mapping = self.spark.createDataFrame(sorted(names), "_file_path string, filename string")
            frame.select(
                "*",
                functions.col("_metadata.file_path").alias("_file_path"),
                functions.col("_metadata.row_index").alias("file_row_number"),
            ).join(functions.broadcast(mapping), "_file_path", "left").drop(
                "_file_path"
            ).createOrReplaceTempView(view)

    def view(self, view: str, query_name: str, /, **params: Any) -> None:
        """``queries/<query_name>.sql`` (transpiled) as the view ``view``, not run yet.

        A view holds the views it reads as they are now: one replaced later is not seen."""
        frame = self._frame(query_name, None, params)
        with self._step(f"query {query_name}"):
            frame.createOrReplaceTempView(view)

    def empty_view(self, view: str, ddl_name: str, /, **extra: str) -> None:
        """The empty table of the DuckDB ``CREATE TABLE`` in ``queries/<ddl_name>.sql``
        (with ``extra`` columns, name -> DuckDB type) as the view ``view``."""
        with self._step(f"query {ddl_name}"):
            self.spark.sql(empty_select(ddl_name, **extra)).createOrReplaceTempView(view)

    def keep(
        self,
        view: str,
        folder: Path,
        /,
        query_name: str | None = None,
        sql: str | None = None,
        row_ids: str | None = None,
        **params: Any,
    ) -> int:
        """Run ``queries/<query_name>.sql`` (or the DuckDB statement ``sql``, translated
        unchecked), have the executors write its rows as Parquet into ``folder``, and make
        them the view ``view``; the rows kept. ``row_ids`` adds a column of that name that
        numbers the rows (``monotonically_increasing_id``: unique, not consecutive)."""
        frame = self._frame(query_name, sql, params)
        if row_ids is not None:
            frame = frame.withColumn(row_ids, self._functions().monotonically_increasing_id())
        self._write(frame, folder, f"query {query_name}" if query_name else "a step of the reduction")
        with self._step(f"reading back {folder}"):
            self.spark.read.parquet(str(folder)).createOrReplaceTempView(view)
        # the rows from the part files' footers (this machine sees the folder): no job
        return sum(pq.read_metadata(part).num_rows for part in folder.glob("part-*"))

    def write(
        self,
        query_name: str,
        folder: Path,
        /,
        partition: tuple[str, str] | None = None,
        **params: Any,
    ) -> list[Path]:
        """Have the executors write the rows of ``queries/<query_name>.sql`` as Parquet
        into ``folder``; its part files, in the result's order. ``partition`` (a column
        name, a Spark SQL expression) writes the rows of each value of the expression into
        ``folder/<column>=<value>/`` (without the column). Timestamps are written as
        DuckDB writes its own, without a time zone, in UTC."""
        frame = self._frame(query_name, None, params)
        if partition is not None:
            frame = frame.withColumn(partition[0], self._functions().expr(partition[1]))
        self._write(frame, folder, f"query {query_name}", partition[0] if partition else None)
        return sorted(folder.rglob("part-*"), key=lambda p: (str(p.parent), p.name))

    def at_least_partitions(self, partitions: int) -> None:
        """Shuffle into at least ``partitions`` partitions (``spark.sql.shuffle.partitions``;
        adaptive execution joins small ones again): a session whose setting is below it
        (local mode's, one per core) would sort a large input in a few tasks whose memory
        cannot hold their joins' buffers."""
        with self._step("setting up the session"):
            now = int(self.spark.conf.get("spark.sql.shuffle.partitions", "200") or 200)
            if partitions > now:
                self.spark.conf.set("spark.sql.shuffle.partitions", str(partitions))

    def count(self, sql: str, /) -> int:
        """The one number the DuckDB statement ``sql`` (translated unchecked) gives."""
        with self._step(f"counting ({sql})"):
            row = self.spark.sql(translate(sql)).collect()[0]
        return int(row[0] or 0)

    def _frame(self, query_name: str | None, sql: str | None, params: Mapping[str, Any]) -> Any:
        text = spark_sql(query_name) if query_name is not None else translate(sql or "")
        with self._step(f"query {query_name or 'of the reduction'}"):
            return self.spark.sql(text, args=dict(params))

    def _write(self, frame: Any, folder: Path, what: str, partition: str | None = None) -> None:
        functions = self._functions()
        naive = [
            functions.col(f.name).cast("timestamp_ntz").alias(f.name)
            if f.dataType.typeName() == "timestamp"
            else functions.col(f.name)
            for f in frame.schema.fields
        ]
        writer = frame.select(*naive).write.mode("overwrite")
        if partition is not None:
            writer = writer.partitionBy(partition)
        with self._step(f"{what} (the executors writing {folder})"):
            writer.parquet(str(folder))

    # ------------------------------------------------------------------ fan-out

    def map_groups(
        self,
        table: pa.Table,
        key: str,
        fn: Callable[[pa.Table], pa.Table],
        schema: pa.Schema,
    ) -> pa.Table:
        """``fn`` applied to the rows of ``table`` of each ``key``, on the executors.

        ``fn`` must be a module-level function of fleetaudit: the executors import it
        by name, from the fleetaudit this engine sends them. The results come back in
        no particular order.
        """
        self.prepare_python()
        frame = self.spark.createDataFrame(table)
        groups = max(1, len(set(table.column(key).to_pylist())))
        with self._step("the fan-out on the executors (applyInArrow)"):
            out = (
                frame.repartition(groups, key)
                .groupBy(key)
                .applyInArrow(fn, from_arrow_schema(schema))
                .toArrow()
            )
        return out.cast(schema)

    def prepare_python(self) -> None:
        """Send the executors this fleetaudit, then check what their Python imports.

        In local mode the executors are this Python: nothing to do.
        """
        if self._python_ready:
            return
        if self._local():
            self._python_ready = True
            return
        package = self._package_zip()
        with self._step("sending fleetaudit to the executors"):
            if self.remote:
                self.spark.addArtifacts(str(package), pyfile=True)
            else:
                self.spark.sparkContext.addPyFile(str(package))
        self._check_python()
        self._python_ready = True

    def _package_zip(self) -> Path:
        """This fleetaudit's Python files as one zip (what addPyFile puts on sys.path)."""
        source = Path(fleetaudit.__file__).parent
        # a name of its own: Spark refuses a second file of one name from another path
        target = self._scratch / f"fleetaudit-{self._scratch.name}.zip"
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(source.rglob("*.py")):
                if "__pycache__" not in path.parts:
                    zf.write(path, str(Path("fleetaudit") / path.relative_to(source)))
        return target

    def _check_python(self) -> None:
        """One line naming the first module the executors' Python lacks, or its version
        where it differs from this one's."""
        from pyspark import cloudpickle

        udf = self._functions().udf
        cloudpickle.register_pickle_by_value(spark_probe)  # runs where fleetaudit is not
        tasks = 4
        with self._step("checking the executors' Python"):
            rows = (
                self.spark.range(tasks, numPartitions=tasks)
                .select(udf(spark_probe.probe, "string", useArrow=False)("id").alias("report"))
                .distinct()
                .collect()
            )
        here = ".".join(str(v) for v in sys.version_info[:2])
        for row in rows:
            report = json.loads(row["report"])
            python = f"{report['executable']}, Python {report['python']}"
            if report["python"].rsplit(".", 1)[0] != here:
                raise FleetAuditError(
                    f"{self.where}: the executors run {python}, this driver Python {here}: "
                    f"Spark needs the same Python minor version on both; {HOW_TO_PROVIDE}"
                )
            for module, why in report["missing"].items():
                raise FleetAuditError(
                    f"{self.where}: the executors' Python ({python}) cannot import {module} "
                    f"({why}); {HOW_TO_PROVIDE}"
                )


def _uri_path(uri: str) -> str:
    """The local path of a ``file:`` URI as Spark gives it (``file:/a/b%20c.parquet``)."""
    parts = urlsplit(uri)
    return os.path.abspath(unquote(parts.path)) if parts.scheme in ("", "file") else uri


def _common_root(files: list[Path]) -> Path:
    """The folder under which the hive partition folders (``key=value``) start."""
    root = Path(os.path.commonpath([str(f.parent) for f in files]))
    while "=" in root.name:
        root = root.parent
    return root
