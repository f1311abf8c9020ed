"""A real Slurm cluster on loopback, started from Debian's packages for the tests.

:func:`start_cluster` installs nothing; :func:`ensure_packages` installs Debian's
``slurm-wlm``, ``slurmdbd``, ``munge`` and ``mariadb-server`` where they are missing
(as root, through apt). The cluster runs every daemon as a process of its own, in a
temporary folder that holds every configuration, state and log file, on ports chosen
free at run time; :meth:`Cluster.stop` stops them by PID. Nothing is a system service.

The cluster: munged, MariaDB, slurmdbd, slurmctld and one ``slurmd -N NAME`` per node;
GPUs as typed GRES backed by placeholder device files (Slurm 22.05 drops GPUs without
files), select/cons_tres, topology/tree with two leaf switches under a spine, QOS
``normal`` and the preemptible ``scavenger``, accounts ``vision`` and ``speech``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

PACKAGES = ("slurm-wlm", "slurmdbd", "munge", "mariadb-server")
COMMANDS = ("slurmctld", "slurmd", "slurmdbd", "munged", "mungekey", "mariadbd", "sacct")

# name, GPU type, GPUs, CPUs, leaf switch
NODES: tuple[tuple[str, str, int, int, str], ...] = (
    ("gpu01", "h100", 8, 32, "leaf0"),
    ("gpu02", "h100", 8, 32, "leaf0"),
    ("gpu03", "h100", 8, 32, "leaf0"),
    ("gpu04", "h100", 8, 32, "leaf1"),
    ("gpu05", "h100", 8, 32, "leaf1"),
    ("gpu06", "h100", 8, 32, "leaf1"),
)
NODE_MEMORY_MIB = 256000
ACCOUNTS = ("vision", "speech")
CLUSTER = "fa"


class ClusterError(RuntimeError):
    """The cluster could not be installed or started; the message says which step."""


def missing_commands() -> list[str]:
    return [c for c in COMMANDS if shutil.which(c) is None and not Path("/usr/sbin", c).exists()]


def ensure_packages() -> str | None:
    """Install the packages where a command is missing; None when ready, else why not."""
    if not missing_commands():
        return None
    if shutil.which("apt-get") is None:
        return f"Slurm is not installed ({', '.join(missing_commands())} missing) and apt-get is absent"
    as_root: list[str] = []
    if os.geteuid() != 0:
        if shutil.which("sudo") is None:
            return "Slurm is not installed and installing it needs root (no sudo)"
        as_root = ["sudo", "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    lock = ["-o", "DPkg::Lock::Timeout=900"]
    for command in (
        [*as_root, "apt-get", *lock, "update", "-qq"],
        [*as_root, "apt-get", *lock, "install", "-y", "-qq", "--no-install-recommends", *PACKAGES],
    ):
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return f"could not install {' '.join(PACKAGES)}: {' / '.join(tail)}"
    missing = missing_commands()
    return f"installed, but {', '.join(missing)} still missing" if missing else None


def _free_ports(count: int) -> list[int]:
    sockets, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in sockets:
            s.close()
    return ports


def _wait_port(port: int, process: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ClusterError(f"{Path(str(process.args[0])).name} exited: {_tail(log)}")
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise ClusterError(f"{process.args[0]} did not listen on {port} in {timeout:g} s: {_tail(log)}")


def _tail(log: Path, lines: int = 5) -> str:
    try:
        return " / ".join(log.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class Cluster:
    """A running cluster: its folder, ports, environment and daemons (by PID)."""

    root: Path
    env: dict[str, str]
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    def run(
        self, *args: str, check: bool = True, timeout: float = 60, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command against this cluster."""
        done = subprocess.run(
            list(args),
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise ClusterError(f"{' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
        return done

    def start_process(self, name: str, args: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            process = subprocess.Popen(
                list(args),
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.processes[name] = process
        return process

    def stragglers(self) -> list[int]:
        """PIDs of processes this cluster started that are still alive outside
        :attr:`processes` (a job's slurmstepd and its tasks): they carry this cluster's
        ``SLURM_CONF`` in their environment."""
        marker = f"SLURM_CONF={self.conf}".encode()
        found = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            try:
                environ = (proc / "environ").read_bytes()
            except OSError:
                continue
            if marker in environ.split(b"\0"):
                found.append(int(proc.name))
        return [p for p in found if p not in {pr.pid for pr in self.processes.values()}]

    def stop(self) -> None:
        """Cancel every job, then stop every daemon by its PID (slurmd and slurmctld first,
        MariaDB and munged last), then any process of a job that outlived its slurmd."""
        if "slurmctld" in self.processes and self.processes["slurmctld"].poll() is None:
            self.run("scancel", "--user=root", check=False, timeout=30)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                left = self.run("squeue", "-h", "-t", "R,CG,S", check=False, timeout=10)
                if left.returncode != 0 or not left.stdout.strip():
                    break
                time.sleep(0.5)
        for name in reversed(list(self.processes)):
            process = self.processes[name]
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)
        for pid in self.stragglers():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid_file in (self.root / "run").glob("*.pid"):
            pid_file.unlink(missing_ok=True)
        self.processes.clear()


def _write(path: Path, text: str, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def _slurm_conf(root: Path, ports: dict[str, int], node_ports: dict[str, int]) -> str:
    lines = [
        f"ClusterName={CLUSTER}",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={ports['slurmctld']}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={root / 'run' / 'munge.socket'}",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}/%n",
        f"SlurmctldPidFile={root / 'run' / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'run'}/slurmd.%n.pid",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'log'}/slurmd.%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "SlurmdParameters=config_overrides",
        "ProctrackType=proctrack/pgid",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "GresTypes=gpu",
        "AccountingStorageType=accounting_storage/slurmdbd",
        "AccountingStorageHost=127.0.0.1",
        f"AccountingStoragePort={ports['slurmdbd']}",
        # the munge socket of connections to slurmdbd (AuthInfo serves those to slurmctld)
        f"AccountingStoragePass={root / 'run' / 'munge.socket'}",
        "AccountingStorageTRES=gres/gpu,gres/gpu:h100",
        "AccountingStorageEnforce=associations,limits,qos",
        "JobCompType=jobcomp/none",
        "TopologyPlugin=topology/tree",
        "MpiDefault=none",
        "ReturnToService=2",
        "SchedulerType=sched/backfill",
        "SchedulerParameters=bf_interval=2,sched_interval=2",
        "PriorityType=priority/basic",
        "PreemptType=preempt/qos",
        "PreemptMode=REQUEUE",
        "MinJobAge=600",
        "KillWait=2",
        "OverTimeLimit=0",
        "InactiveLimit=0",
        "SlurmdTimeout=300",
        "SlurmctldTimeout=60",
        "MessageTimeout=20",
        "DefMemPerCPU=1000",
        "RebootProgram=/bin/true",
    ]
    for name, gpu_type, gpus, cpus, _ in NODES:
        lines.append(
            f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={node_ports[name]} "
            f"CPUs={cpus} RealMemory={NODE_MEMORY_MIB} Gres=gpu:{gpu_type}:{gpus} "
            "Feature=" + gpu_type + " State=UNKNOWN"
        )
    names = ",".join(n[0] for n in NODES)
    lines.append(f"PartitionName=gpu Nodes={names} Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def _gres_conf(root: Path) -> str:
    lines = []
    for name, gpu_type, gpus, _, _ in NODES:
        folder = root / "dev" / name
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(gpus):
            (folder / f"nvidia{i}").touch()
        lines.append(
            f"NodeName={name} Name=gpu Type={gpu_type} File={folder}/nvidia[0-{gpus - 1}]"
        )
    return "\n".join(lines) + "\n"


def topology_conf() -> str:
    """topology/tree: leaf0 and leaf1 under the spine."""
    leaves: dict[str, list[str]] = {}
    for name, *_, leaf in NODES:
        leaves.setdefault(leaf, []).append(name)
    lines = [f"SwitchName={leaf} Nodes={','.join(names)}" for leaf, names in leaves.items()]
    lines.append(f"SwitchName=spine Switches={','.join(leaves)}")
    return "\n".join(lines) + "\n"


def start_cluster(root: Path, timeout: float = 120) -> Cluster:
    """Start munged, MariaDB, slurmdbd, slurmctld and the slurmd of :data:`NODES` under
    ``root``, set up the accounts and QOS, and wait for every node to be idle.

    Raises:
        ClusterError: a step failed (the message holds the tail of its log).
    """
    for sub in ("etc", "run", "log", "state", "spool", "db", "dev"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    root.chmod(0o755)
    names = [n[0] for n in NODES]
    free = _free_ports(4 + len(names))
    ports = dict(zip(("slurmctld", "slurmdbd", "mysql", "spare"), free[:4], strict=True))
    node_ports = dict(zip(names, free[4:], strict=True))
    conf = _write(root / "etc" / "slurm.conf", _slurm_conf(root, ports, node_ports))
    _write(root / "etc" / "gres.conf", _gres_conf(root))
    _write(root / "etc" / "topology.conf", topology_conf())
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(root),
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "SLURM_CONF": str(conf),
    }
    cluster = Cluster(root=root, env=env)
    try:
        _start_munge(cluster)
        _start_mariadb(cluster, ports["mysql"], timeout)
        _start_slurmdbd(cluster, ports, timeout)
        _setup_accounts(cluster)
        cluster.start_process(
            "slurmctld", ["slurmctld", "-D", "-i", "-f", str(conf)], root / "log" / "slurmctld.out"
        )
        _wait_port(ports["slurmctld"], cluster.processes["slurmctld"], root / "log" / "slurmctld.log", timeout)
        for name in names:
            cluster.start_process(
                f"slurmd-{name}",
                ["slurmd", "-D", "-N", name, "-f", str(conf)],
                root / "log" / f"slurmd-{name}.out",
            )
        _wait_idle(cluster, names, timeout)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _start_munge(cluster: Cluster) -> None:
    run = cluster.root / "run"
    key = cluster.root / "etc" / "munge.key"
    subprocess.run(
        ["mungekey", "--create", f"--keyfile={key}"], check=True, capture_output=True,
        env=cluster.env,  # its PATH holds /usr/sbin, where Debian puts mungekey
    )  # fmt: skip
    key.chmod(0o400)
    socket_path = run / "munge.socket"
    cluster.start_process(
        "munged",
        [
            "munged", "--foreground", "--force",
            f"--socket={socket_path}", f"--key-file={key}",
            f"--pid-file={run / 'munged.pid'}", f"--log-file={cluster.root / 'log' / 'munged.log'}",
            f"--seed-file={run / 'munged.seed'}",
        ],
        cluster.root / "log" / "munged.out",
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while not socket_path.exists():
        if cluster.processes["munged"].poll() is not None or time.monotonic() > deadline:
            raise ClusterError(f"munged did not start: {_tail(cluster.root / 'log' / 'munged.out')}")
        time.sleep(0.1)


def _start_mariadb(cluster: Cluster, port: int, timeout: float) -> None:
    data = cluster.root / "db"
    log = cluster.root / "log" / "mariadb.log"
    done = subprocess.run(
        [
            "mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
            "--auth-root-authentication-method=normal", "--skip-test-db",
        ],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    if done.returncode != 0:
        raise ClusterError(f"mariadb-install-db failed: {done.stderr.strip()[-400:]}")
    cluster.start_process(
        "mariadb",
        [
            "mariadbd", "--no-defaults", f"--datadir={data}", "--user=root",
            f"--socket={cluster.root / 'run' / 'mysql.sock'}", f"--port={port}",
            "--bind-address=127.0.0.1", f"--pid-file={cluster.root / 'run' / 'mariadb.pid'}",
            f"--log-error={log}", "--skip-grant-tables", "--innodb-buffer-pool-size=64M",
            "--skip-log-bin",
        ],
        cluster.root / "log" / "mariadb.out",
    )  # fmt: skip
    _wait_port(port, cluster.processes["mariadb"], log, timeout)


def _start_slurmdbd(cluster: Cluster, ports: dict[str, int], timeout: float) -> None:
    root = cluster.root
    conf = _write(
        root / "etc" / "slurmdbd.conf",
        "\n".join(
            [
                "AuthType=auth/munge",
                f"AuthInfo=socket={root / 'run' / 'munge.socket'}",
                "DbdHost=localhost",
                "DbdAddr=127.0.0.1",
                f"DbdPort={ports['slurmdbd']}",
                "SlurmUser=root",
                f"PidFile={root / 'run' / 'slurmdbd.pid'}",
                f"LogFile={root / 'log' / 'slurmdbd.log'}",
                "DebugLevel=info",
                "StorageType=accounting_storage/mysql",
                "StorageHost=127.0.0.1",
                f"StoragePort={ports['mysql']}",
                "StorageUser=root",
                "StorageLoc=slurm_acct_db",
            ]
        )
        + "\n",
        mode=0o600,
    )
    cluster.start_process("slurmdbd", ["slurmdbd", "-D"], root / "log" / "slurmdbd.out")
    _wait_port(ports["slurmdbd"], cluster.processes["slurmdbd"], root / "log" / "slurmdbd.log", timeout)


def _setup_accounts(cluster: Cluster) -> None:
    mgr = ["sacctmgr", "-i"]
    cluster.run(*mgr, "add", "cluster", CLUSTER)
    cluster.run(*mgr, "add", "qos", "scavenger", "Priority=0")
    cluster.run(*mgr, "modify", "qos", "normal", "set", "Preempt=scavenger", "Priority=100")
    for account in ACCOUNTS:
        cluster.run(*mgr, "add", "account", account, f"Cluster={CLUSTER}")
    cluster.run(
        *mgr, "add", "user", "root", f"Account={','.join(ACCOUNTS)}", f"Cluster={CLUSTER}",
        "QOS=normal,scavenger", "DefaultQOS=normal",
    )  # fmt: skip


def _wait_idle(cluster: Cluster, names: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        done = cluster.run("sinfo", "-h", "-N", "-o", "%N %T", check=False)
        states = dict(line.split() for line in done.stdout.splitlines() if line.strip())
        if all(states.get(n) == "idle" for n in names):
            return
        for name in names:
            process = cluster.processes[f"slurmd-{name}"]
            if process.poll() is not None:
                raise ClusterError(
                    f"slurmd -N {name} exited: {_tail(cluster.root / 'log' / f'slurmd.{name}.log')}"
                )
        time.sleep(0.5)
    raise ClusterError(f"the nodes did not become idle in {timeout:g} s: {states}")


HET_SCRIPT = """#!/bin/bash
#SBATCH -J het -A vision --gpus=2 -o /dev/null
#SBATCH hetjob
#SBATCH --gpus=1
sleep 3600
"""


@dataclass
class Mix:
    """The scripted job mix: job ids by name and the instants the test's own clock read
    around the node updates (UTC, naive)."""

    jobs: dict[str, str] = field(default_factory=dict)
    clock: dict[str, datetime] = field(default_factory=dict)


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0)


def submit_mix(cluster: Cluster, timeout: float = 240) -> Mix:
    """Drain and resume an idle node, take it down, run a job of every kind, drain a busy
    node, and wait until the job with a one-minute limit has timed out.

    gpu06 is drained (idle), resumed, then set DOWN; gpu01 and gpu02 hold pinned jobs;
    gpu02 is drained while busy (MIXED+DRAIN at the export).

    Raises:
        ClusterError: a job did not reach the state it should within ``timeout``.
    """
    mix = Mix()

    def update(node: str, state: str, reason: str | None = None) -> None:
        args = ["scontrol", "update", f"nodename={node}", f"state={state}"]
        cluster.run(*args, *([f"reason={reason}"] if reason else []))

    update("gpu06", "drain", "burn-in")
    mix.clock["drain"] = _now()
    _wait(cluster, lambda: _node_state(cluster, "gpu06") == "drained", "gpu06 drained", 30)
    time.sleep(1.5)
    update("gpu06", "resume")
    mix.clock["resume"] = _now()
    time.sleep(1.5)
    update("gpu06", "down", "psu failed")
    mix.clock["down"] = _now()
    sb = ("sbatch", "--parsable", "-o", "/dev/null")
    wrap = ("--wrap", "sleep 3600")
    jobs = {
        "long8": [*sb, "-J", "long8", "-A", "vision", "-w", "gpu01", "--gpus=8", *wrap],
        "busy4": [*sb, "-J", "busy4", "-A", "speech", "-w", "gpu02", "--gpus=4", *wrap],
        "short2": [*sb, "-J", "short2", "-A", "vision", "--gpus=2", "--wrap", "sleep 2"],
        "fail": [*sb, "-J", "fail", "-A", "vision", "--gpus=1", "--wrap", "sleep 1; exit 3"],
        "timeout": [*sb, "-J", "timeout", "-A", "speech", "--gpus=1", "-t", "1", *wrap],
        "sweep": [*sb, "-J", "sweep", "-A", "vision", "--array=0-9%1", "--gpus=8",
                  "-w", "gpu01", "--wrap", "sleep 5"],
        "held": [*sb, "-J", "held", "-A", "vision", "-H", "--gpus=1", *wrap],
        "later": [*sb, "-J", "later", "-A", "speech", "--begin=now+3hours", "--gpus=2", *wrap],
        "sw1": [*sb, "-J", "sw1", "-A", "vision", "-N2", "--gpus-per-node=2", "--switches=1", *wrap],
        "sw2": [*sb, "-J", "sw2", "-A", "vision", "-N2", "--gpus-per-node=2", "--switches=2", *wrap],
        "multi": [*sb, "-J", "multi", "-A", "vision", "-N3", "--gpus-per-node=1", *wrap],
        "uneven": [*sb, "-J", "uneven", "-A", "speech", "-N2", "--gpus=5", *wrap],
        "requeue": [*sb, "-J", "requeue", "-A", "speech", "--gpus=1", *wrap],
        "suspend": [*sb, "-J", "suspend", "-A", "speech", "--gpus=1", *wrap],
        "scav": [*sb, "-J", "scav", "-A", "vision", "--qos=scavenger", "--gpus=1", *wrap],
        "cpuonly": [*sb, "-J", "cpuonly", "-A", "speech", "-n", "4", *wrap],
    }  # fmt: skip
    for name, args in jobs.items():
        mix.jobs[name] = cluster.run(*args).stdout.strip().split(";")[0]
    mix.jobs["dep"] = cluster.run(
        *sb, "-J", "dep", "-A", "speech", "-d", f"afterok:{mix.jobs['long8']}", "--gpus=1", *wrap
    ).stdout.strip()
    het = cluster.root / "het.sh"
    het.write_text(HET_SCRIPT)
    mix.jobs["het"] = cluster.run(*sb, str(het)).stdout.strip()
    # a 32-GPU job that cannot start, cancelled while it waits
    mix.jobs["big"] = cluster.run(
        *sb, "-J", "big", "-A", "vision", "-N4", "--gpus-per-node=8", *wrap
    ).stdout.strip()
    running = ["long8", "busy4", "timeout", "sw1", "sw2", "multi", "uneven", "requeue",
               "suspend", "scav", "cpuonly", "het"]  # fmt: skip
    _wait(
        cluster,
        lambda: all(_job_state(cluster, mix.jobs[n]) == "RUNNING" for n in running)
        and _job_state(cluster, mix.jobs["big"]) == "PENDING",
        "the mix running",
        timeout,
    )
    # a job requeued before its start reaches the accounting has a run without a Start
    _wait(cluster, lambda: _started(cluster, mix.jobs["requeue"]), "the requeue job started", 60)
    cluster.run("scontrol", "requeue", mix.jobs["requeue"])
    mix.clock["requeue"] = _now()
    cluster.run("scontrol", "suspend", mix.jobs["suspend"])
    update("gpu02", "drain", "xid 79")
    mix.clock["drain_busy"] = _now()
    cluster.run("scancel", mix.jobs["big"])
    # Slurm holds a requeued job back for two minutes; the one-minute job times out
    # within a minute and a half: then nothing changes until the jobs are cancelled
    _wait(
        cluster,
        lambda: _job_state(cluster, mix.jobs["timeout"]) == "TIMEOUT"
        and _job_state(cluster, mix.jobs["requeue"]) == "RUNNING",
        "the one-minute job timed out and the requeued one runs again",
        timeout,
    )
    return mix


def _wait(cluster: Cluster, done: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return
        time.sleep(1)
    raise ClusterError(f"{what}: not reached in {timeout:g} s")


def _started(cluster: Cluster, job: str) -> bool:
    """Whether the accounting holds the job's start and its batch step's, three seconds
    ago or more (a job requeued sooner may keep no start for that run)."""
    done = cluster.run(
        "sacct", "-n", "-P", "-j", job, "--format=JobID,Start,ElapsedRaw",
        env={"SLURM_TIME_FORMAT": "%s"}, check=False,
    )  # fmt: skip
    lines = [line.split("|") for line in done.stdout.splitlines()]
    job_line = [f for f in lines if f[0] == job and f[1].isdigit() and f[2].isdigit()]
    batch = [f for f in lines if f[0] == f"{job}.batch" and f[1].isdigit()]
    return bool(job_line and batch and int(job_line[0][2]) >= 3)


def _node_state(cluster: Cluster, node: str) -> str:
    return cluster.run("sinfo", "-h", "-n", node, "-o", "%T", check=False).stdout.strip()


def _job_state(cluster: Cluster, job: str) -> str:
    done = cluster.run("scontrol", "-o", "show", "job", job, check=False)
    match = re.search(r"JobState=(\S+)", done.stdout)
    return match.group(1) if match else ""
