"""``--engine spark`` on a real cluster: a standalone master, two workers and Spark Connect.

The cluster comes from the ``spark`` extra's own scripts, on loopback
(tests/spark_cluster.py); its executors run a Python that has fleetaudit's
dependencies but not fleetaudit, as a real cluster's do. ``rollup`` and ``whatif
compaction`` run against ``--master spark://127.0.0.1:PORT`` (a driver in this
process) and against Spark Connect (``sc://127.0.0.1:PORT``, whose server is the
driver), and give DuckDB's Parquet byte for byte and the local pool's ledger.

The classic driver runs with ``spark.driver.maxResultSize=1m``: a job that brings
the raw rows (or the rolled ones) back to the driver fails, which one test shows,
so the rollups that pass under it read, aggregate and write on the executors.
The last tests take the workers away. Skipped without pyspark or Java.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="pyspark comes with the spark extra: pip install '.[spark]'")
pytest.importorskip("grpc", reason="Spark Connect's client comes with the spark extra")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("Spark needs Java 17 or 21 (no java on PATH, no JAVA_HOME)", allow_module_level=True)
if os.environ.get("PYTEST_XDIST_WORKER"):
    pytest.skip(
        "the cluster suite runs in one process: pytest -n 0 tests/test_spark_cluster.py "
        "(.ci/run runs it so, after the main suite)",
        allow_module_level=True,
    )

from typer.testing import CliRunner  # noqa: E402

from fleetaudit import api  # noqa: E402
from fleetaudit.api import compaction_api  # noqa: E402
from fleetaudit.api.compaction_api import CompactionRun  # noqa: E402
from fleetaudit.api.rollup_api import RollupOptions, rollup  # noqa: E402
from fleetaudit.cli import app  # noqa: E402
from fleetaudit.core.errors import FleetAuditError  # noqa: E402
from fleetaudit.inputs.generate import GenerateOptions  # noqa: E402
from fleetaudit.whatif.compaction import CompactionOptions  # noqa: E402
from tests.spark_cluster import QUICK_JVM, Cluster, free_port, standalone  # noqa: E402

pytestmark = pytest.mark.spark
DRIVER_RESULT_CAP = "1m"  # spark.driver.maxResultSize of the classic driver
TIMEOUT_KEY = "spark.fleetaudit.executorTimeout"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The cluster, with the classic driver (:func:`classic`) started while its workers
    and Connect server start (JVMs of the quick kind: tests/spark_cluster.QUICK_JVM)."""
    saved = {k: os.environ.get(k) for k in ("PYSPARK_PYTHON", "SPARK_LOCAL_IP")}
    folder = tmp_path_factory.mktemp("cluster")
    try:
        with standalone(
            folder, workers=2, connect=True, java_options=QUICK_JVM, while_starting=_start_classic
        ) as running:
            yield running
            # a Connect client left open retries against the stopped server when Python exits
            from pyspark.sql.connect.session import SparkSession as ConnectSession

            left = getattr(ConnectSession, "_default_session", None) or ConnectSession.getActiveSession()
            if left is not None:
                left.stop()
            _CLASSIC.pop().stop()
    finally:
        _CLASSIC.clear()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


_CLASSIC: list[object] = []


def _start_classic(cluster: Cluster) -> None:
    """The driver in this process, on the cluster (the way spark-submit would start it)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:  # another test module's local session
        active.stop()
    os.environ.update(PYSPARK_PYTHON=str(cluster.python), SPARK_LOCAL_IP="127.0.0.1")
    builder = SparkSession.builder.master(cluster.master).appName("fleetaudit-tests")
    for key, value in {**cluster.driver_conf(), "spark.driver.maxResultSize": DRIVER_RESULT_CAP}.items():
        builder = builder.config(key, value)
    _CLASSIC.append(builder.getOrCreate())


@pytest.fixture(scope="module")
def classic(cluster: Cluster) -> object:
    """The classic driver's session (started with the cluster)."""
    return _CLASSIC[0]


@pytest.fixture
def connect(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> str:
    """SPARK_REMOTE names the cluster's Connect server (and no --master is given)."""
    monkeypatch.setenv("SPARK_REMOTE", cluster.remote)
    return cluster.remote


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fleet") / "fleet"
    api.generate_fleet(out, GenerateOptions(nodes=32, days=3, telemetry_days=1.0, telemetry_step_s=300))
    return out


@pytest.fixture(scope="module")
def duckdb_rolled(fleet: Path, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    out = tmp_path_factory.mktemp("duckdb") / "rolled"
    rollup([fleet], out, RollupOptions(3600))
    return (out / "telemetry.parquet").read_bytes()


@pytest.fixture(scope="module")
def store(fleet: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("store") / "fleet.duckdb"
    api.ingest_paths(api.StoreOptions(db=db), [fleet])
    return db


@pytest.fixture(scope="module")
def local_ledger(store: Path) -> object:
    return _compaction(store, "local", None)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _compaction(db: Path, engine: str, master: str | None) -> object:
    options = CompactionOptions(partition_nodes=4, exact=True, exact_nodes=4)
    run = CompactionRun(jobs=1, options=options, engine=engine, master=master)
    return compaction_api.whatif_compaction(api.StoreOptions(db=db), run).result


def _same_ledger(local: object, remote: object) -> None:
    assert len(local.partitions) > 4 and local.moves  # type: ignore[attr-defined]
    for name in ("moves", "before", "after", "bound_free_nodes", "migration"):
        assert getattr(local, name) == getattr(remote, name), name
    seconds = {"seconds", "exact_seconds"}
    for a, b in zip(local.partitions, remote.partitions, strict=True):  # type: ignore[attr-defined]
        assert {k: v for k, v in a.__dict__.items() if k not in seconds} == {
            k: v for k, v in b.__dict__.items() if k not in seconds
        }
    assert local.allocations.equals(remote.allocations)  # type: ignore[attr-defined]


# ---------------------------------------------------------------- the cluster answers


def test_the_cluster_has_two_workers_and_the_executors_lack_fleetaudit(
    cluster: Cluster, classic: object
) -> None:
    """The issue's failure, now one line: the executors' Python has no fleetaudit
    until the engine sends it (this check runs before any what-if did)."""
    from fleetaudit.model.spark_store import SparkEngine

    assert cluster.alive_workers() == 2
    engine = SparkEngine(cluster.master)
    with pytest.raises(FleetAuditError) as caught:
        engine._check_python()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{cluster.master}: the executors' Python")
    assert "cannot import fleetaudit" in message and "--archives env.tar.gz#env" in message


def test_rollup_on_the_cluster_gives_duckdbs_file(
    cluster: Cluster, classic: object, fleet: Path, duckdb_rolled: bytes, tmp_path: Path
) -> None:
    result = rollup([fleet], tmp_path / "out", RollupOptions(3600, engine="spark", master=cluster.master))
    assert result.engine == "spark" and result.rows > 50_000
    assert _digest((tmp_path / "out" / "telemetry.parquet").read_bytes()) == _digest(duckdb_rolled)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["telemetry.parquet"]


def test_rollup_on_spark_connect_gives_duckdbs_file(
    connect: str, fleet: Path, duckdb_rolled: bytes, tmp_path: Path
) -> None:
    result = rollup([fleet], tmp_path / "out", RollupOptions(3600, engine="spark"))
    assert result.rows > 50_000
    assert _digest((tmp_path / "out" / "telemetry.parquet").read_bytes()) == _digest(duckdb_rolled)


def test_the_driver_cannot_hold_the_raw_rows(classic: object, fleet: Path) -> None:
    """The control for the rollups above: under the driver's result cap, bringing the
    raw telemetry (or even the rolled table) back to the driver fails."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    raw = classic.read.parquet(str(fleet / "telemetry.parquet"))  # type: ignore[attr-defined]
    with pytest.raises((PySparkException, Py4JJavaError), match="maxResultSize"):
        raw.toArrow()


def test_compaction_on_the_cluster_gives_the_local_ledger(
    cluster: Cluster, classic: object, store: Path, local_ledger: object
) -> None:
    _same_ledger(local_ledger, _compaction(store, "spark", cluster.master))


def test_compaction_on_spark_connect_gives_the_local_ledger(
    connect: str, store: Path, local_ledger: object
) -> None:
    _same_ledger(local_ledger, _compaction(store, "spark", None))


def test_a_module_the_executors_lack_is_one_line(
    cluster: Cluster, classic: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fleetaudit.model import spark_probe
    from fleetaudit.model.spark_store import SparkEngine

    monkeypatch.setattr(spark_probe, "REQUIRED", (*spark_probe.REQUIRED, "fleetaudit_no_such_dep"))
    engine = SparkEngine(cluster.master)
    with pytest.raises(FleetAuditError) as caught:
        engine.prepare_python()
    message = str(caught.value)
    assert "\n" not in message
    assert "cannot import fleetaudit_no_such_dep (No module named 'fleetaudit_no_such_dep')" in message
    assert "pip install" in message and "spark.pyspark.python=./env/bin/python" in message


# ---------------------------------------------------------------- the ASI release


@pytest.fixture(scope="module")
def asi(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[tuple]]]:
    """A generated ASI release (tests/test_spark._asi_release: repeats, rejects, a ghost
    server) and the store tables of its DuckDB rollup's ingest."""
    from tests.test_rollup_sources import _tables
    from tests.test_spark import _asi_release

    folder = tmp_path_factory.mktemp("asi")
    release = _asi_release(folder / "release")
    rollup([release], folder / "duckdb", RollupOptions(format="alibaba-gpu-v2026"))
    api.ingest_paths(api.StoreOptions(folder / "duckdb.duckdb"), [folder / "duckdb"])
    return release, _tables(folder / "duckdb.duckdb")


def test_asi_rollup_on_the_cluster_ingests_as_duckdbs(
    cluster: Cluster, classic: object, asi: tuple[Path, dict[str, list[tuple]]], tmp_path: Path
) -> None:
    """The executors read the release and reduce it; the classic driver's result cap
    (1 MiB) holds: no raw rows come back to it (the GPU runs, server-hours and GPU
    pod-hours this machine reads back are part files the executors wrote)."""
    from tests.test_rollup_sources import _tables, same_tables

    release, want = asi
    out = tmp_path / "rolled"
    options = RollupOptions(format="alibaba-gpu-v2026", engine="spark", master=cluster.master)
    rollup([release], out, options)
    api.ingest_paths(api.StoreOptions(tmp_path / "spark.duckdb"), [out])
    same_tables(want, _tables(tmp_path / "spark.duckdb"))


def test_asi_rollup_on_spark_connect_ingests_as_duckdbs(
    connect: str, asi: tuple[Path, dict[str, list[tuple]]], tmp_path: Path
) -> None:
    """The same through the Connect server: the client sends the plans and reads back
    only the part files the executors wrote."""
    from tests.test_rollup_sources import _tables, same_tables

    release, want = asi
    out = tmp_path / "rolled"
    rollup([release], out, RollupOptions(format="alibaba-gpu-v2026", engine="spark"))
    api.ingest_paths(api.StoreOptions(tmp_path / "spark.duckdb"), [out])
    same_tables(want, _tables(tmp_path / "spark.duckdb"))


# ---------------------------------------------------------------- what fails, and how


def test_an_unreachable_master_is_one_line(fleet: Path, tmp_path: Path) -> None:
    port = free_port()
    out = tmp_path / "out"
    argv = ["rollup", str(fleet), "--out", str(out), "--engine", "spark"]
    result = CliRunner().invoke(app, [*argv, "--master", f"spark://127.0.0.1:{port}"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(
        f"fleetaudit: error: spark://127.0.0.1:{port}: cannot reach the Spark master (127.0.0.1:{port}: "
    )
    assert result.stderr.count("\n") == 1
    result = CliRunner().invoke(app, argv, env={"SPARK_REMOTE": f"sc://127.0.0.1:{port}"})
    assert result.exit_code == 2
    assert f"sc://127.0.0.1:{port}: cannot reach the Spark Connect server" in result.stderr
    assert not out.exists()


def _corrupt_copy(fleet: Path, folder: Path) -> Path:
    """The fleet's telemetry with its data pages overwritten: its footer (which fleetaudit's
    checks on this machine read) is whole, the pages the executors decode are not."""
    folder.mkdir()
    data = bytearray((fleet / "telemetry.parquet").read_bytes())
    for at in range(64, len(data) // 2, 4096):
        data[at : at + 64] = b"\xff" * 64
    (folder / "part-0.parquet").write_bytes(bytes(data))
    return folder


def test_a_source_the_executors_cannot_read_is_one_line(
    cluster: Cluster, classic: object, fleet: Path, tmp_path: Path
) -> None:
    lake = _corrupt_copy(fleet, tmp_path / "lake")
    out = tmp_path / "out"
    argv = ["rollup", str(lake), "--out", str(out), "--engine", "spark", "--master", cluster.master]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    line = result.stderr
    assert line.count("\n") == 1 and "Traceback" not in line
    assert line.startswith(f"fleetaudit: error: {cluster.master}: query rollup_telemetry")
    assert not out.exists()


def test_a_lost_worker_is_replaced_then_losing_all_is_one_line(
    cluster: Cluster, classic: object, fleet: Path, duckdb_rolled: bytes, tmp_path: Path
) -> None:
    """One worker killed mid-job: Spark runs its tasks again on the other, and the file
    is DuckDB's. Both killed: the job is cancelled once no executor came back within
    the timeout, one line, and no output folder."""
    classic.conf.set(TIMEOUT_KEY, "3")  # type: ignore[attr-defined]
    sc = classic.sparkContext  # type: ignore[attr-defined]

    def kill_when_running(names: list[str]) -> threading.Thread:
        def run() -> None:
            deadline = time.monotonic() + 60
            while not sc.statusTracker().getActiveJobsIds() and time.monotonic() < deadline:
                time.sleep(0.05)
            for name in names:
                cluster.kill_process(name)

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    options = RollupOptions(3600, engine="spark", master=cluster.master)
    killer = kill_when_running(["worker-0"])
    rollup([fleet], tmp_path / "one", options)
    killer.join()
    assert _digest((tmp_path / "one" / "telemetry.parquet").read_bytes()) == _digest(duckdb_rolled)

    killer = kill_when_running(["worker-1"])
    with pytest.raises(FleetAuditError) as caught:
        rollup([fleet], tmp_path / "none", options)
    killer.join()
    message = str(caught.value)
    assert message.startswith(f"{cluster.master}: ")
    assert "failed: the application lost every executor" in message and "within 3 s" in message
    assert not (tmp_path / "none").exists()
