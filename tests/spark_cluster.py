"""A real Spark standalone cluster on loopback, from the ``spark`` extra's own scripts.

The tests and benchmarks of the Spark engine on a cluster start one here: a
master and N workers (``spark-class org.apache.spark.deploy.master.Master`` /
``...worker.Worker`` of the pip-installed pyspark, no system Spark), each worker
with its own small core and memory allowance, and, on request, a Spark Connect
server (``sbin/start-connect-server.sh --wait`` of the same install) whose
driver runs on that cluster. Everything binds to 127.0.0.1 on ports found free
when it starts, keeps its logs, work and PID-less state under one temporary
folder, and is stopped by the PIDs this module started (each process leads its
own process group: the group is signalled, then killed after a grace period).

The executors run the Python :func:`executor_python` makes: this venv's
interpreter with its packages but **without fleetaudit** (a ``site`` folder of
links to every installed package but fleetaudit's, and ``python -S``), which is
how a real cluster's executors look before fleetaudit ships itself to them.

The master starts first (a worker or driver that finds no master waits 5-20 s
before it tries again), then the workers; once both are registered, the Connect
server and whatever the caller starts in ``while_starting`` (the tests' own
driver) start at once. Their applications register only when every worker has:
an application that registers while one worker is up gets all its executors
there, and the tests that take a worker away need one on each.
``java_options`` are given to every JVM of the cluster (master, workers, Connect
server, executors, and the drivers that take :meth:`Cluster.driver_conf`): the
tests pass :data:`QUICK_JVM`, which halves the CPU of starting them on 2 cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
WORKER_CORES = 2  # two executors of one core each per worker (one per application)
WORKER_MEMORY = "1200m"
EXECUTOR_MEMORY = "512m"  # Spark's floor is 450 MiB of heap
# For JVMs that live a minute on a few MB: the client compiler only (the server
# compiler's work never pays back here) and one garbage-collector thread. A test's
# cluster (master, 2 workers, Connect server, driver, 4 executors) took 69 s of CPU
# to start and run a first job on each session without them, 39 s with them (load 5-6).
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
_QUIET_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex{short}
"""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def executor_python(folder: Path) -> Path:
    """An interpreter with this venv's packages except fleetaudit (see the module doc)."""
    site = folder / "site"
    site.mkdir(parents=True, exist_ok=True)
    purelib = Path(sysconfig.get_paths()["purelib"])
    for entry in purelib.iterdir():
        name = entry.name.lower()
        if "fleetaudit" in name or name.endswith(".pth"):
            continue  # the package, its metadata and the editable install's path hook
        (site / entry.name).symlink_to(entry)
    script = folder / "python"
    script.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{site}" exec {sys.executable} -S "$@"\n'
    )
    script.chmod(0o755)
    return script


@dataclass
class Cluster:
    """A running standalone cluster (and maybe a Connect server) and its processes."""

    folder: Path
    master_port: int
    python: Path
    master_ui_port: int = 0
    connect_port: int | None = None
    java_options: str = ""
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def master(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def remote(self) -> str:
        assert self.connect_port is not None
        return f"sc://127.0.0.1:{self.connect_port}"

    def env(self) -> dict[str, str]:
        """The environment of every process of the cluster (and of its drivers)."""
        env = dict(os.environ)
        for name in ("SPARK_HOME", "SPARK_REMOTE", "PYSPARK_GATEWAY_PORT", "SPARK_CONF_DIR"):
            env.pop(name, None)
        env.update(
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=str(self.folder / "logs"),
            SPARK_PID_DIR=str(self.folder / "pids"),
            SPARK_CONF_DIR=str(self.folder / "conf"),
            SPARK_IDENT_STRING="fleetaudit-test",
            PYSPARK_PYTHON=str(self.python),
        )
        if self.java_options:
            env["SPARK_DAEMON_JAVA_OPTS"] = self.java_options  # the master and workers
        return env

    def driver_conf(self) -> dict[str, str]:
        """What an application on this cluster asks for: one core on each worker."""
        conf = {
            "spark.cores.max": "2",
            "spark.executor.cores": "1",
            "spark.executor.memory": EXECUTOR_MEMORY,
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.pyspark.python": str(self.python),
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "4",
        }
        if self.java_options:
            conf["spark.driver.extraJavaOptions"] = self.java_options
            conf["spark.executor.extraJavaOptions"] = self.java_options
        return conf

    def _start(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.folder / "logs" / f"{name}.log", "ab")  # noqa: SIM115 (the child holds it)
        proc = subprocess.Popen(
            argv,
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.folder,
            start_new_session=True,  # its own process group: stopped as one by its PID
        )
        log.close()
        self.processes[name] = proc
        return proc

    def _wait_for(self, what: str, ready: callable, timeout: float = 90.0) -> None:  # type: ignore[valid-type]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            for name, proc in self.processes.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited ({proc.returncode}): {self.log_tail(name)}")
            time.sleep(0.3)
        raise RuntimeError(f"{what} not ready after {timeout:.0f} s: {self.log_tail(what)}")

    def log_tail(self, name: str, lines: int = 15) -> str:
        path = self.folder / "logs" / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def start_worker(self, index: int) -> None:
        name = f"worker-{index}"
        work = self.folder / name
        work.mkdir(exist_ok=True)
        self._start(
            name,
            [
                str(SPARK_HOME / "bin" / "spark-class"),
                "org.apache.spark.deploy.worker.Worker",
                "--host", "127.0.0.1",
                "--port", str(free_port()),
                "--webui-port", str(free_port()),
                "--cores", str(WORKER_CORES),
                "--memory", WORKER_MEMORY,
                "--work-dir", str(work),
                self.master,
            ],
        )  # fmt: skip

    def alive_workers(self) -> int:
        """How many workers the master counts as alive (its web UI's JSON)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.master_ui_port}/json/", timeout=2) as r:
                state = json.load(r)
        except OSError:
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def wait_for_workers(self, count: int) -> None:
        self._wait_for("master", lambda: self.alive_workers() >= count)

    def start_connect(self) -> None:
        """Start the Connect server (:meth:`wait_for_connect` waits for it to listen)."""
        self.connect_port = free_port()
        argv = [str(SPARK_HOME / "sbin" / "start-connect-server.sh"), "--wait", "--master", self.master]
        conf = {
            **self.driver_conf(),
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.connect_port),
        }
        for key, value in conf.items():
            argv += ["--conf", f"{key}={value}"]
        self._start("connect", argv)

    def wait_for_connect(self) -> None:
        port = self.connect_port
        assert port is not None
        self._wait_for("connect", lambda: _listening(port), timeout=120.0)

    def stop_process(self, name: str, grace: float = 10.0) -> None:
        """Stop one process of the cluster (its whole process group) by its PID."""
        proc = self.processes.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(grace)

    def kill_process(self, name: str) -> None:
        """A worker lost: SIGKILL for its process group (its executors die with it)."""
        proc = self.processes.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)

    def stop(self) -> None:
        for name in ["connect", *sorted(n for n in self.processes if n.startswith("worker")), "master"]:
            self.stop_process(name)


@contextlib.contextmanager
def standalone(
    folder: Path,
    workers: int = 2,
    connect: bool = False,
    java_options: str = "",
    while_starting: Callable[[Cluster], object] | None = None,
) -> Iterator[Cluster]:
    """A master, ``workers`` workers and maybe a Connect server; all stopped at the end.

    ``while_starting(cluster)`` runs once the workers are registered and the Connect
    server has been started, before it is waited for (a driver starts meanwhile)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise RuntimeError("Spark needs Java 17 or 21 (no java on PATH, no JAVA_HOME)")
    for sub in ("logs", "pids", "conf"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    (folder / "conf" / "log4j2.properties").write_text(_QUIET_LOG4J)
    cluster = Cluster(
        folder,
        free_port(),
        executor_python(folder / "executor-python"),
        master_ui_port=free_port(),
        java_options=java_options,
    )
    try:
        cluster._start(
            "master",
            [
                str(SPARK_HOME / "bin" / "spark-class"),
                "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1",
                "--port", str(cluster.master_port),
                "--webui-port", str(cluster.master_ui_port),
            ],
        )  # fmt: skip
        cluster._wait_for("master", lambda: _listening(cluster.master_port))
        for i in range(workers):
            cluster.start_worker(i)
        cluster.wait_for_workers(workers)
        if connect:
            cluster.start_connect()
        if while_starting is not None:
            while_starting(cluster)
        if connect:
            cluster.wait_for_connect()
        yield cluster
    finally:
        cluster.stop()
