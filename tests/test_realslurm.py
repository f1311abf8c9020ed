"""A real Slurm cluster in the test loop: its exports, and fleetaudit's figures against
Slurm's own truth taken at the same instant.

The cluster (tests/realslurm/cluster.py) is Debian's Slurm on loopback: munged,
MariaDB, slurmdbd, slurmctld and six ``slurmd -N`` with 8 typed H100 GRES each,
cons_tres, topology/tree (leaf0 = gpu01-03, leaf1 = gpu04-06, under spine), QOS normal
and the preemptible scavenger, accounts vision and speech. It runs the scripted mix of
:func:`tests.realslurm.cluster.submit_mix` (an array, a held job, a dependency, a
``--begin`` three hours ahead, ``--switches=1`` and ``=2``, a multi-node job without
``--switches``, ``--gpus=5`` over two nodes, a requeue, a suspend, a heterogeneous job,
a failure, a timeout, a 32-GPU job cancelled while it waited, a drain of a busy node,
a node drained, resumed and then down), exports with the commands of
docs/formats/slurm.md (run verbatim) and ingests them. The truth is Slurm's:
``scontrol -d show job`` (per-node GRES), ``sinfo``, ``squeue`` and ``sacct``, read
right after the export.

One file, one module-scoped cluster (pytest-xdist's ``--dist loadfile`` runs the file
in one worker). Where the packages cannot be installed, every test skips and says why.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleetaudit.cli import app
from fleetaudit.inputs.ingest.hostlist import expand_hostlist
from fleetaudit.inputs.ingest.slurm_records import INELIGIBLE_REASONS, job_record, records
from fleetaudit.model.store import Store, open_store
from tests.conftest import REPO
from tests.realslurm.cluster import NODES, Cluster, Mix, ensure_packages, start_cluster, submit_mix

pytestmark = pytest.mark.realslurm

DOCS = REPO / "docs" / "formats" / "slurm.md"
GPUS = {name: gpus for name, _, gpus, _, _ in NODES}


def documented_commands() -> str:
    """The export block of docs/formats/slurm.md, verbatim."""
    text = DOCS.read_text()
    after = text.split("<!-- the export commands: tests/test_realslurm.py runs this block -->", 1)[1]
    return after.split("```sh\n", 1)[1].split("```", 1)[0]


@dataclass
class Export:
    """One export of the running mix and Slurm's truth read right after it."""

    cluster: Cluster
    mix: Mix
    folder: Path  # the documented commands' files and their fleetaudit.duckdb
    before: datetime  # the test's clock around the export
    after: datetime
    jobs: dict[str, dict[str, object]]  # scontrol -d show job: id -> state, start, layout
    sinfo: dict[str, str]  # node -> sinfo state
    pending: list[tuple[str, str]]  # squeue -r: (job id, reason) of each pending job or task
    env: dict[str, str]

    @property
    def db(self) -> Path:
        return self.folder / "fleetaudit.duckdb"

    def store(self) -> Store:
        return open_store(self.db, read_only=True)

    def job(self, name: str) -> str:
        return self.mix.jobs[name]


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0)


def _epoch(text: str) -> datetime:
    return datetime.fromtimestamp(int(text), timezone.utc).replace(tzinfo=None)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    why = ensure_packages()
    if why is not None:
        pytest.skip(f"no Slurm cluster: {why}")
    running = start_cluster(tmp_path_factory.mktemp("slurm") / "c")
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def export(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Export:
    mix = submit_mix(cluster)
    folder = tmp_path_factory.mktemp("export")
    env = {**cluster.env, "PATH": f"{Path(sys.executable).parent}:{cluster.env['PATH']}"}
    env.pop("FLEETAUDIT_DB", None)
    before = _now()
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", documented_commands()],
        cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    after = _now()
    assert done.returncode == 0, done.stderr[-2000:]
    truth = cluster.run("scontrol", "-d", "-o", "show", "job", env={"SLURM_TIME_FORMAT": "%s"})
    jobs = {}
    for _, line in records(truth.stdout.splitlines(), "JobId"):
        record = job_record(line, "UTC")
        state = re.search(r"JobState=(\S+)", line)
        jobs[record.job_id] = {
            "state": state.group(1) if state else "",
            "start": record.start,
            "layout": {node: gpus for node, gpus in record.layout.items() if gpus},
            "switches": record.switches,
        }
    sinfo = dict(
        line.split()
        for line in cluster.run("sinfo", "-h", "-N", "-o", "%N %T").stdout.splitlines()
        if line.strip()
    )
    queue = cluster.run("squeue", "-h", "-r", "-t", "PD", "-o", "%i|%r").stdout.splitlines()
    pending = [tuple(line.split("|", 1)) for line in queue if line.strip()]
    return Export(cluster, mix, folder, before, after, jobs, sinfo, pending, env)  # type: ignore[arg-type]


def _cli(export: Export, *args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [*map(str, args), "--db", str(export.db)])
    return result.exit_code, result.stdout, result.stderr


# -- the documented export ---------------------------------------------------------------


def test_the_documented_commands_run_on_this_slurm_and_ingest_without_rejects(
    export: Export,
) -> None:
    version = export.cluster.run("sacct", "--version").stdout
    assert re.search(r"\b22\.05\.", version), version  # Debian 12's Slurm
    names = sorted(p.name for p in export.folder.iterdir())
    assert names == [
        "events.psv", "fleetaudit.duckdb", "jobs.txt", "nodes.txt", "sacct.psv", "sdiag.txt",
        "squeue.json", "topology.conf",
    ]  # fmt: skip
    with export.store() as store:
        assert store.row_count("rejects") == 0
        assert store.row_count("nodes") == len(NODES)


def test_nodes_gpus_health_and_switches_are_slurms(export: Export) -> None:
    with export.store() as store:
        nodes = {r["node_id"]: r for r in store.sql("SELECT * FROM nodes").iter_rows(named=True)}
    assert set(nodes) == set(export.sinfo)
    for name, row in nodes.items():
        assert (row["gpu_model"], row["gpus"]) == ("H100", GPUS[name])
        leaf = next(n[4] for n in NODES if n[0] == name)
        assert (row["switch_id"], row["block_id"]) == (leaf, "spine")
    # sinfo's states at the same instant: gpu02 drained while busy, gpu06 down
    assert export.sinfo["gpu02"] in ("draining", "drng")
    assert export.sinfo["gpu06"].startswith("down")
    assert nodes["gpu02"]["health"] == "cordoned" and nodes["gpu02"]["state"] == "MIXED+DRAIN"
    assert nodes["gpu06"]["health"] == "down"
    assert {n for n, r in nodes.items() if r["health"] == "healthy"} == {
        "gpu01", "gpu03", "gpu04", "gpu05"
    }  # fmt: skip


def test_per_node_gpus_of_every_running_job_are_scontrols(export: Export) -> None:
    with export.store() as store:
        rows = store.sql(
            "SELECT split_part(alloc_id, ':', 1) AS job, node_id, gpus, start_time, gpus_layout "
            "FROM allocations WHERE end_time IS NULL"
        ).rows()
    got: dict[str, dict[str, float]] = {}
    for job, node, gpus, start, layout in rows:
        truth = export.jobs[job]
        assert start == truth["start"], job
        if gpus:
            got.setdefault(job, {})[node] = gpus
        if len(truth["layout"]) > 1:  # type: ignore[arg-type]
            assert layout == "scontrol"
    running = {
        job: t["layout"]
        for job, t in export.jobs.items()
        if t["state"] in ("RUNNING", "SUSPENDED") and t["layout"]
    }
    assert got == running
    # --gpus=5 over two nodes: Slurm dealt 4 and 1 (not the 3 and 2 of an even split)
    assert sorted(got[export.job("uneven")].values()) == [1.0, 4.0]


def test_ended_jobs_times_and_states_are_saccts(export: Export) -> None:
    sacct = export.cluster.run(
        "sacct", "-a", "-X", "-D", "-P", "-n", "-S", "now-3600", "-E", "now",
        "--format=JobIDRaw,Start,End,State", env={"SLURM_TIME_FORMAT": "%s"},
    ).stdout  # fmt: skip
    ended = {}
    for line in sacct.splitlines():
        raw, start, end, state = line.split("|")
        if end not in ("Unknown", "") and start not in ("Unknown", "None"):
            ended[(raw, int(start))] = (int(end), state.split()[0])
    with export.store() as store:
        allocations = store.sql(
            "SELECT split_part(alloc_id, ':', 1) AS job, epoch(start_time)::BIGINT AS s, "
            "epoch(end_time)::BIGINT AS e, state FROM allocations WHERE end_time IS NOT NULL"
        ).rows()
    got = {(job, s): (e, state.split()[0]) for job, s, e, state in allocations}
    assert {k: v for k, v in ended.items() if k[0] in {j for j, _ in got}} == got
    states = {v[1] for v in got.values()}
    assert {"COMPLETED", "FAILED", "TIMEOUT", "REQUEUED"} <= states


def test_requeue_suspend_het_and_priority(export: Export) -> None:
    with export.store() as store:
        allocs = store.sql("SELECT * FROM allocations").rows(named=True)
    runs = [a for a in allocs if a["alloc_id"].startswith(export.job("requeue") + ":")]
    # each run sacct recorded a start for is an allocation (-D keeps the requeued one)
    recorded = [
        line.split("|")[14]
        for line in (export.folder / "sacct.psv").read_text().splitlines()
        if line.startswith(export.job("requeue") + "|") and line.split("|")[10].isdigit()
    ]
    assert [a["state"] for a in sorted(runs, key=lambda a: a["start_time"])] == recorded
    assert recorded[-1] == "RUNNING" and len(recorded) == 2
    suspended = [a for a in allocs if a["alloc_id"].startswith(export.job("suspend") + ":")]
    assert [(a["gpus"], a["cpus"], a["suspended"]) for a in suspended] == [(1.0, 0.0, True)]
    het = [a for a in allocs if a["slurm_job_id"].startswith(export.job("het") + "+")]
    assert {a["job_id"] for a in het} == {export.job("het")} and len(het) == 2
    scav = next(a for a in allocs if a["alloc_id"].startswith(export.job("scav") + ":"))
    assert (scav["priority"], scav["tenant"]) == ("low", "vision")


# -- queue semantics -----------------------------------------------------------------------


def test_a_pending_array_counts_once_per_task(export: Export) -> None:
    sweep = export.job("sweep")
    tasks = [job for job, _ in export.pending if job.startswith(f"{sweep}_")]
    assert len(tasks) == 10  # squeue -r: the ten tasks of 0-9%1
    with export.store() as store:
        got = store.sql(
            "SELECT slurm_job_id FROM requests WHERE request_id LIKE $p ORDER BY request_id",
            {"p": f"{sweep}_%"},
        )["slurm_job_id"].to_list()
        sacct_line = (export.folder / "sacct.psv").read_text()
    assert f"{sweep}_[0-9%1]|" in sacct_line  # 22.05's sacct prints the array once
    assert sorted(got) == sorted(tasks)


def test_held_dependent_and_begin_time_jobs_are_kept_but_not_queued(export: Export) -> None:
    reasons = dict(export.pending)
    for name, reason in (("held", "JobHeldUser"), ("dep", "Dependency"), ("later", "BeginTime")):
        assert reasons[export.job(name)] == reason
    with export.store() as store:
        kept = dict(
            store.sql(
                "SELECT split_part(request_id, ':', 1), ineligible_reason FROM requests "
                "WHERE ineligible_reason IS NOT NULL"
            ).rows()
        )
        at = store.sql("SELECT max(export_time) FROM exports").item()
        queued = store.query("queued_requests_at", at=at)["request_id"].to_list()
    for name in ("held", "dep", "later"):
        assert kept[export.job(name)] == reasons[export.job(name)]
        assert not any(r.startswith(export.job(name) + ":") for r in queued)
    # the queued demand is squeue's pending jobs less those waiting on themselves
    waiting = [job for job, reason in export.pending if reason not in INELIGIBLE_REASONS]
    assert sorted(r.split(":")[0] for r in queued) == sorted(waiting)
    code, out, err = _cli(export, "shapes", "--json")
    assert code == 0, err
    assert "are not queued demand" in " ".join(json.loads(out)["notes"])


def test_locality_follows_switches(export: Export) -> None:
    truth = {name: export.jobs[export.job(name)]["switches"] for name in ("sw1", "sw2", "multi")}
    assert truth == {"sw1": 1, "sw2": 2, "multi": None}  # scontrol's Switches=N@...
    with export.store() as store:
        locality = dict(
            store.sql("SELECT split_part(request_id, ':', 1), locality FROM requests").rows()
        )
    # two leaves under the spine: --switches=2 is the block level; none: anywhere
    assert [locality[export.job(n)] for n in ("sw1", "sw2", "multi", "uneven", "long8")] == [
        "switch", "block", "any", "any", "node",
    ]  # fmt: skip


# -- the export time --------------------------------------------------------------------


def test_the_export_time_is_the_export_not_a_future_begin(export: Export) -> None:
    code, out, err = _cli(export, "status")
    assert code == 0, err
    first = " ".join(out.split("tables")[0].split())
    match = re.search(r"export time (\S+) \(from (.+?):", first)
    assert match, first
    at = datetime.fromisoformat(match.group(1).rstrip("Z"))
    assert export.before <= at <= export.after + timedelta(seconds=1)
    with export.store() as store:
        begin = store.sql(
            "SELECT eligible_time FROM requests WHERE request_id LIKE $p", {"p": export.job("later") + ":%"}
        ).item()
    assert begin > at + timedelta(hours=2)  # the --begin=now+3hours job's eligible time


# -- health over time -------------------------------------------------------------------


def test_node_events_are_the_intervals_slurm_recorded(export: Export) -> None:
    with export.store() as store:
        events = store.sql(
            "SELECT node_id, state, start_time, end_time, reason, source FROM node_events "
            "ORDER BY node_id, start_time, source"
        ).rows()
    clock = export.mix.clock
    second = timedelta(seconds=2)
    gpu06 = [e for e in events if e[0] == "gpu06" and e[5] == "slurm:sacctmgr"]
    assert [(e[1], e[4]) for e in gpu06] == [("drain", "burn-in"), ("down", "psu failed")]
    drain, down = gpu06
    assert abs(drain[2] - clock["drain"]) <= second and abs(drain[3] - clock["resume"]) <= second
    assert abs(down[2] - clock["down"]) <= second and down[3] is None  # still down
    # gpu02 is draining, not drained: sacctmgr has no event yet, scontrol's state does
    assert not [e for e in events if e[0] == "gpu02" and e[5] == "slurm:sacctmgr"]
    (busy,) = [e for e in events if e[0] == "gpu02"]
    assert (busy[1], busy[3], busy[5]) == ("drain", None, "slurm:scontrol")
    assert abs(busy[2] - clock["drain_busy"]) <= second


def _truth_gpu_hours(export: Export, start: datetime, end: datetime) -> dict[str, float]:
    """Slurm's allocated GPU-hours per node in [start, end): scontrol's per-node GRES for
    the jobs it still holds, sacct's AllocTRES for the ended ones (one node each)."""
    hours: dict[str, float] = {}
    sacct = export.cluster.run(
        "sacct", "-a", "-X", "-D", "-P", "-n", "-S", "now-3600", "-E", "now",
        "--format=JobIDRaw,Start,End,NodeList,AllocTRES,State", env={"SLURM_TIME_FORMAT": "%s"},
    ).stdout  # fmt: skip
    for line in sacct.splitlines():
        raw, s, e, nodelist, tres, state = line.split("|")
        if s in ("Unknown", "None", "") or not tres:
            continue
        began = _epoch(s)
        live = export.jobs.get(raw)
        if e == "Unknown" and live is not None and live["start"] == began:
            layout = live["layout"]  # type: ignore[assignment]
            ended = end
        else:
            (node,) = expand_hostlist(nodelist)
            gpus = float(re.search(r"gres/gpu=(\d+)", tres).group(1)) if "gres/gpu=" in tres else 0.0  # type: ignore[union-attr]
            layout = {node: gpus}
            ended = _epoch(e) if e != "Unknown" else end
        overlap = (min(ended, end) - max(began, start)).total_seconds() / 3600
        for node, gpus in layout.items():  # type: ignore[attr-defined]
            if overlap > 0:
                hours[node] = hours.get(node, 0.0) + gpus * overlap
    return hours


def _report(export: Export, start: datetime, at: datetime) -> dict[str, object]:
    out = export.folder / "report.json"
    since = int((at - start).total_seconds())
    code, _, err = _cli(
        export, "report", "--at", at.isoformat() + "Z", "--since", f"{since}s", "--step", f"{since}s",
        "--json", out,
    )  # fmt: skip
    assert code == 0, err
    return json.loads(out.read_text())["fleet"]["physical"]  # type: ignore[no-any-return]


def _window(export: Export) -> tuple[datetime, datetime]:
    with export.store() as store:
        at = store.sql("SELECT max(export_time) FROM exports").item()
    return export.mix.clock["drain"], at


def test_physical_installed_gpu_hours(export: Export) -> None:
    start, at = _window(export)
    physical = _report(export, start, at)
    hours = (at - start).total_seconds() / 3600
    # the report rounds GPU-hours to 6 decimals
    assert physical["installed_gpu_hours"] == pytest.approx(sum(GPUS.values()) * hours, abs=1e-6)
    # fleetaudit's allocations hold Slurm's GPU-hours, node by node
    truth = _truth_gpu_hours(export, start, at)
    with export.store() as store:
        rows = store.sql(
            "SELECT node_id, gpus, start_time, end_time FROM allocations"
        ).rows()
    mine: dict[str, float] = {}
    for node, gpus, s, e in rows:
        overlap = (min(e or at, at) - max(s, start)).total_seconds() / 3600
        if overlap > 0:
            mine[node] = mine.get(node, 0.0) + gpus * overlap
    assert mine == pytest.approx(truth, rel=1e-9)


def test_a_draining_nodes_running_jobs_stay_allocated(export: Export) -> None:
    start, at = _window(export)
    truth = _truth_gpu_hours(export, start, at)
    assert truth["gpu02"] > 0  # the drained node ran jobs through the window
    physical = _report(export, start, at)
    assert physical["allocated_gpu_hours"] == pytest.approx(sum(truth.values()), abs=1e-6)


# -- the other exports: JSON, local times, Slurm's own error ---------------------------------


def test_sacct_json_gives_the_same_allocations_and_a_never_started_jobs_layout(
    export: Export, tmp_path: Path
) -> None:
    folder = tmp_path / "json"
    folder.mkdir()
    for name in ("nodes.txt", "jobs.txt", "squeue.json", "topology.conf", "sdiag.txt"):
        (folder / name).write_bytes((export.folder / name).read_bytes())
    sacct = export.cluster.run(
        "sacct", "-a", "-X", "-D", "-S", "now-3600", "-E", "now", "--json", timeout=120
    )
    (folder / "sacct.json").write_text(sacct.stdout)
    db = tmp_path / "json.duckdb"
    result = CliRunner().invoke(app, ["ingest", "--format", "slurm", str(folder), "--db", str(db)])
    assert result.exit_code == 0, result.output
    query = "SELECT alloc_id, node_id, gpus, start_time, end_time FROM allocations ORDER BY 1"
    with open_store(db, read_only=True) as store, export.store() as text:
        assert store.sql(query).rows() == text.sql(query).rows()
        big = store.sql(
            "SELECT gpus, gpus_per_pod, locality, never_started FROM requests WHERE request_id LIKE $p",
            {"p": export.job("big") + ":%"},
        ).row(0)
    assert big == (32.0, 8.0, "any", True)  # four nodes of 8, not one pod of 32


def test_local_times_read_in_their_zone(export: Export, tmp_path: Path) -> None:
    fields = "JobID,JobIDRaw,Submit,Eligible,Start,End,State,NodeList,AllocTRES,ReqTRES,NNodes"
    local = export.cluster.run(
        "sacct", "-a", "-X", "-D", "-P", "-S", "now-3600", "-E", "now", f"--format={fields}",
        env={"TZ": "Europe/Berlin"},
    ).stdout  # fmt: skip
    assert re.search(r"\|\d{4}-\d{2}-\d{2}T", local)  # local times, no zone
    folder = tmp_path / "local"
    folder.mkdir()
    (folder / "sacct.psv").write_text(local)
    for name in ("nodes.txt", "jobs.txt"):
        (folder / name).write_bytes((export.folder / name).read_bytes())
    db = tmp_path / "local.duckdb"
    args = ["ingest", "--format", "slurm", str(folder), "--db", str(db), "--timezone", "Europe/Berlin"]
    assert CliRunner().invoke(app, args).exit_code == 0
    query = "SELECT alloc_id, start_time, end_time FROM allocations ORDER BY 1"
    with open_store(db, read_only=True) as store, export.store() as text:
        assert store.sql(query).rows() == text.sql(query).rows()


def test_slurms_own_error_in_its_json_is_passed_on(export: Export, tmp_path: Path) -> None:
    # SLURM_TIME_FORMAT=%s makes sacct --json refuse its own -S and print only an error
    failed = export.cluster.run(
        "sacct", "-a", "-X", "--json", "-S", "2026-01-01T00:00:00", env={"SLURM_TIME_FORMAT": "%s"},
        check=False,
    )  # fmt: skip
    path = tmp_path / "sacct.json"
    path.write_text(failed.stdout)
    result = CliRunner().invoke(
        app, ["ingest", "--format", "slurm", str(path), "--db", str(tmp_path / "e.duckdb")]
    )
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "reported an error instead of its data: Unable to parse time format" in result.stderr
    assert "unset it for --json" in result.stderr


# -- direct collection ----------------------------------------------------------------------


def test_from_slurm_fetches_the_same_data_and_leaves_nothing(export: Export, tmp_path: Path) -> None:
    # a temporary folder of its own: other tests' collectors (kubectl, --url) run at once
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    db = tmp_path / "collected.duckdb"
    done = subprocess.run(
        [sys.executable, "-m", "fleetaudit", "ingest", "--format", "slurm", "--from-slurm",
         "--since", "1h", "--db", str(db)],
        env={**export.env, "TMPDIR": str(scratch)}, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not list(scratch.iterdir())  # the fetched exports' folder is gone
    with open_store(db, read_only=True) as store, export.store() as text:
        assert store.row_count("rejects") == 0
        for query in (
            "SELECT node_id, gpus, health, switch_id, block_id FROM nodes ORDER BY 1",
            # the jobs running at both exports hold the same GPUs on the same nodes
            "SELECT alloc_id, node_id, gpus, start_time FROM allocations WHERE end_time IS NULL "
            "ORDER BY 1",
            "SELECT request_id, gpus, gpus_per_pod, locality, ineligible_reason FROM requests "
            "WHERE start_time IS NULL ORDER BY 1",
            "SELECT node_id, state, start_time, end_time, source FROM node_events "
            "WHERE source = 'slurm:sacctmgr' ORDER BY 1, 3",
        ):
            assert store.sql(query).rows() == text.sql(query).rows(), query
        assert store.sql("SELECT how FROM exports ORDER BY how").to_series().to_list() == [
            "its running jobs' start plus elapsed time",
            "its running jobs' start plus run time",
            "sdiag's own time",
        ]
