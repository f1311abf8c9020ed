"""``--format slurm``: TRES/GRES strings, node states, each sacct/scontrol/squeue mapping rule by hand.

The fixtures are invented. tests/data/slurm: sacct --parsable2 with epoch times (T =
2026-03-01T00:00:00Z = 1772323200), scontrol -d -o text, topology.conf (leaf0 =
gpu[001-004], leaf1 = gpu[005-008,010], both under spine; gpu009 and cpu01 absent).
Its jobs, hours after T:

- 1000 gpu001 8 GPUs 0-2, with its steps .batch, .extern, .0;
- 1001 gpu006 4 GPUs from 1, running, JobName bash (development);
- 1002 gpu[001-002],gpu[007-008] 32 GPUs 2-6;
- 1100_0 / 1100_1 (JobIDRaw 1101, 1102) gpu009 2 GPUs 3-4 and from 8, QOS scavenger;
- 1200+0 / 1200+1 (1200, 1201) gpu001 and gpu003 8 GPUs each 6-8;
- 1300 requeued: gpu007 1-2 (REQUEUED), gpu004 3-5;
- 1400 cancelled while pending at 5; 1500 pending two-node 16 GPUs, submitted 9, eligible 9.5;
- 1700 gpu[005,010] 5 GPUs, 10 CPUs from 7.5 (uneven); 1800 cpu01 CPUs only 1-3.

Node states: gpu005 MIXED+DRAIN, gpu010 IDLE* (not responding), gpu009 untyped Gres
with the feature nvidia_h100, cpu01 no GPUs. tests/data/slurm_json holds the JSON
flavours (sacct --json, scontrol show node --json, squeue --json).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from fleetaudit.cli import app
from fleetaudit.core.errors import InputError, UsageError
from fleetaudit.inputs.ingest import IngestOptions, ingest
from fleetaudit.inputs.ingest.labels import PriorityMap
from fleetaudit.inputs.ingest.slurm import classify, priority_of
from fleetaudit.inputs.ingest.slurm_nodes import health_of, split_node_line
from fleetaudit.inputs.ingest.tres import TresError, parse_count, parse_gres, parse_tres
from fleetaudit.model.store import Store, open_store
from tests.conftest import DATA, write

SLURM = DATA / "slurm"
SLURM_JSON = DATA / "slurm_json"
T = datetime(2026, 3, 1)
HEADER = (
    "JobID|JobIDRaw|JobName|User|Account|Partition|QOS|Submit|Eligible|Start|End|ElapsedRaw|"
    "TimelimitRaw|State|NNodes|NodeList|ReqCPUS|ReqTRES|AllocTRES"
)
NODE = (
    "NodeName={name} CPUTot=16 Gres=gpu:h100:8 RealMemory=1048576 State=IDLE "
    "CfgTRES=cpu=16,mem=1T,gres/gpu=8"
)


def _plus(hours: float) -> datetime:
    return T + timedelta(hours=hours)


# -- TRES and GRES -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "gpus", "types", "cpus", "mem_mib"),
    [
        # the note's vectors: typed and untyped side by side are never added up
        (
            "billing=128,cpu=128,gres/gpu:h100=16,gres/gpu=16,mem=1024000M,node=2",
            16,
            ("h100",),
            128,
            1024000,
        ),
        ("cpu=16,gres/gpu=1,mem=128000M,node=1", 1, (), 16, 128000),
        ("billing=128,cpu=128,gres/gpu=16,mem=1000G,node=2", 16, (), 128, 1024000),
        ("cpu=8,mem=1.50G", None, (), 8, 1536),
        ("cpu=8,mem=512000M", None, (), 8, 512000),
        ("cpu=4,gres/gpu:a100=2,gres/gpu:t4=1", 3, ("a100", "t4"), 4, None),  # only typed: summed
        ("cpu=2,mem=1T", None, (), 2, 1048576),
        ("", None, (), None, None),
    ],
)
def test_parse_tres(text, gpus, types, cpus, mem_mib) -> None:
    tres = parse_tres(text)
    assert tres.gpus == gpus
    assert tres.gpu_types == types
    assert tres.cpus == cpus
    assert tres.mem_mib == mem_mib


@pytest.mark.parametrize("text", ["cpu", "cpu=many", "gres/gpu=1,=2", "mem=12Q"])
def test_parse_tres_rejects(text: str) -> None:
    with pytest.raises(TresError):
        parse_tres(text)


def _slurm_exact(mib: int) -> str:
    """sacct's default memory print (CONVERT_NUM_UNIT_EXACT): divide by 1024 while the value
    stays a multiple of 512; %.2f when fractional."""
    value, units = float(mib), "MGTP"
    unit = 0
    while value >= 1024 and value % 512 == 0 and unit < len(units) - 1:
        value /= 1024
        unit += 1
    number = f"{value:.2f}" if value != int(value) else str(int(value))
    return f"{number}{units[unit]}"


@given(st.integers(min_value=0, max_value=2**40))
def test_memory_printed_the_way_sacct_prints_it_reads_back(mib: int) -> None:
    text = _slurm_exact(mib)
    assert parse_count(text, memory=True) == pytest.approx(mib, rel=0.01)
    if "." not in text:
        assert parse_count(text, memory=True) == mib


@pytest.mark.parametrize(
    ("text", "items"),
    [
        ("gpu:h100:8(S:0-1)", [("gpu", "h100", 8)]),
        ("gpu:8", [("gpu", None, 8)]),
        (
            "gpu:tesla:2,gpu:kepler:2,mps:400",
            [("gpu", "tesla", 2), ("gpu", "kepler", 2), ("mps", None, 400)],
        ),
        (
            "gpu:a100:4(S:0,1),bandwidth:lustre:no_consume:4G",
            [("gpu", "a100", 4), ("bandwidth", "lustre", 4 * 1024**3)],
        ),
        ("(null)", []),
    ],
)
def test_parse_gres(text: str, items: list[tuple[str, str | None, float]]) -> None:
    assert [(g.name, g.type, g.count) for g in parse_gres(text)] == items


# -- node lines and states ------------------------------------------------------------------


def test_node_line_values_with_spaces_and_equals() -> None:
    line = (SLURM / "nodes.txt").read_text().splitlines()[4]
    fields = split_node_line(line)
    assert fields["NodeName"] == "gpu005"
    assert fields["OS"] == "Linux 5.15.0-105-generic #115-Ubuntu SMP"
    assert fields["Reason"] == "xid 79 gpu3 [root@2026-03-01T08:00:00]"
    assert fields["State"] == "MIXED+DRAIN"
    assert split_node_line("NodeName=n1 Reason=cfg a=b c State=IDLE")["Reason"] == "cfg a=b c"


@pytest.mark.parametrize(
    ("state", "health"),
    [
        ("IDLE", "healthy"),
        ("MIXED", "healthy"),
        ("ALLOCATED+COMPLETING", "healthy"),
        ("IDLE+PLANNED", "healthy"),
        ("mix-", "healthy"),
        ("MIXED+DRAIN", "cordoned"),
        ("IDLE+DRAIN", "cordoned"),
        ("drained", "cordoned"),
        ("idle$", "cordoned"),  # maintenance reservation
        ("IDLE+REBOOT_REQUESTED", "cordoned"),
        ("alloc@", "cordoned"),
        # a power-down is pending: jobs still run, no new work; both spellings alike
        ("MIXED+POWER_DOWN", "cordoned"),
        ("mix!", "cordoned"),
        ("IDLE+POWERING_DOWN", "down"),
        ("idle%", "down"),
        ("DOWN", "down"),
        ("DOWN+DRAIN", "down"),
        ("IDLE*", "down"),  # not responding
        ("idle~", "down"),  # powered off
        ("IDLE+CLOUD+POWERED_DOWN", "down"),
        ("FUTURE", "down"),
        ("IDLE+FAIL", "down"),  # failed, no jobs left
        ("MIXED+FAIL", "degraded"),  # failing: still runs its jobs
        ("drained*", "down"),
    ],
)
def test_health_of_states(state: str, health: str) -> None:
    assert health_of(state) == health


def test_health_degraded_by_gres() -> None:
    assert health_of("IDLE", gres_drain="gpu:h100:1") == "degraded"
    assert health_of("IDLE", gres_drain="N/A") == "healthy"
    assert health_of("IDLE", gpu_shortfall=True) == "degraded"


def test_priority_default_and_map() -> None:
    site = PriorityMap.parse(["batch = low", "urgent = high"])
    assert priority_of("normal", "gpu", PriorityMap()) == "high"
    assert priority_of("scavenger", "gpu", PriorityMap()) == "low"
    assert priority_of("normal", "batch", site) == "low"  # the partition, when the QOS is unmapped
    assert priority_of("urgent", "batch", site) == "high"  # the QOS first
    assert priority_of("scavenger", "gpu", PriorityMap.parse(["scavenger = high"])) == "high"


# -- recognising files --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        (SLURM / "sacct.psv", "sacct"),
        (SLURM / "nodes.txt", "nodes"),
        (SLURM / "topology.conf", "topology"),
        (SLURM_JSON / "sacct.json", "sacct-json"),
        (SLURM_JSON / "nodes.json", "nodes-json"),
        (SLURM_JSON / "squeue.json", "squeue-json"),
    ],
)
def test_classify_by_content(path: Path, kind: str) -> None:
    assert classify(path) == kind


def test_classify_unknown_names_the_kinds(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        classify(write(tmp_path / "sacct.psv", "node_id,gpus\nn1,8\n"))
    message = str(exc.value)
    assert message.startswith(str(tmp_path / "sacct.psv"))
    for kind in ("sacct --parsable2", "sacct --json", "scontrol", "squeue --json", "topology.conf"):
        assert kind in message
    with pytest.raises(InputError, match="without its header line"):
        classify(write(tmp_path / "h.psv", "1000|1000|train|ana\n"))


# -- the parsable2 cluster, rule by rule ---------------------------------------------------------


@pytest.fixture
def cluster(store: Store) -> Store:
    result = ingest(store, [SLURM], IngestOptions(format="slurm"))
    assert result.rejected == 0, result.rejects
    return store


def _allocs(store: Store) -> dict[str, dict]:
    frame = store.sql("SELECT * FROM allocations ORDER BY alloc_id")
    return {r["alloc_id"]: r for r in frame.iter_rows(named=True)}


def _requests(store: Store) -> dict[str, dict]:
    frame = store.sql("SELECT * FROM requests ORDER BY request_id")
    return {r["request_id"]: r for r in frame.iter_rows(named=True)}


def test_nodes_from_scontrol_and_topology(cluster: Store) -> None:
    nodes = {r["node_id"]: r for r in cluster.sql("SELECT * FROM nodes").iter_rows(named=True)}
    assert len(nodes) == 11
    g1 = nodes["gpu001"]
    # RealMemory 2000000 MiB minus MemSpecLimit 16384 MiB
    assert (g1["gpu_model"], g1["gpus"], g1["cpus"], g1["memory_gib"]) == ("H100", 8, 224, 1937.125)
    assert (g1["switch_id"], g1["block_id"]) == ("leaf0", "spine")
    assert nodes["gpu005"]["health"] == "cordoned"  # MIXED+DRAIN
    assert nodes["gpu005"]["reason"] == "xid 79 gpu3 [root@2026-03-01T08:00:00]"
    assert nodes["gpu010"]["health"] == "down"  # IDLE*
    assert nodes["gpu010"]["switch_id"] == "leaf1"  # gpu[005-008,010]
    # untyped Gres gpu:8: the model from the feature nvidia_h100; absent from topology.conf
    assert (nodes["gpu009"]["gpu_model"], nodes["gpu009"]["gpus"]) == ("H100", 8)
    assert nodes["gpu009"]["switch_id"] is None and nodes["gpu009"]["block_id"] is None
    assert (nodes["cpu01"]["gpu_model"], nodes["cpu01"]["gpus"], nodes["cpu01"]["memory_gib"]) == (
        "CPU",
        0,
        (512000 - 16384) / 1024,
    )


def test_allocations_one_per_job_and_node(cluster: Store) -> None:
    allocs = _allocs(cluster)
    # 1000, 1001, 1002 x4, 1100_0, 1100_1, 1200+0, 1200+1, 1300 x2 (requeue), 1700 x2, 1800;
    # the steps 1000.batch/.extern/.0, the cancelled-pending 1400 and the pending 1500 are not
    assert len(allocs) == 15
    assert not [a for a in allocs if a.startswith(("1400", "1500")) or "." in a.split(":")[0]]


def test_multi_node_job_split_over_two_bracket_groups(cluster: Store) -> None:
    allocs = _allocs(cluster)
    rows = [a for k, a in allocs.items() if k.startswith("1002:")]
    # gpu[001-002],gpu[007-008]: zero padding kept; 32 GPUs, 448 CPUs, 4000 GiB over 4 nodes
    assert sorted(r["node_id"] for r in rows) == ["gpu001", "gpu002", "gpu007", "gpu008"]
    assert {(r["gpus"], r["cpus"], r["memory_gib"], r["job_id"]) for r in rows} == {
        (8, 112, 1000, "1002")
    }
    one = allocs["1002:1772330400@gpu007"]
    assert (one["start_time"], one["end_time"]) == (_plus(2), _plus(6))
    assert one["gpu_type"] == "h100" and one["uneven_split"] is False


def test_uneven_split_deals_the_remainder_to_the_first_hosts(cluster: Store) -> None:
    allocs = _allocs(cluster)
    # 1700: gres/gpu=5, cpu=10, mem=100G over gpu[005,010]
    first, second = allocs["1700:1772350200@gpu005"], allocs["1700:1772350200@gpu010"]
    assert (first["gpus"], second["gpus"]) == (3, 2)
    assert (first["cpus"], second["cpus"]) == (5, 5)
    assert first["memory_gib"] == second["memory_gib"] == 50
    assert first["uneven_split"] and second["uneven_split"]
    assert first["end_time"] is None  # End=Unknown: still running


def test_array_het_requeue_priority_workload(cluster: Store) -> None:
    allocs = _allocs(cluster)
    # array tasks are their own jobs, keyed by JobIDRaw; QOS scavenger is low
    task = allocs["1102:1772352000@gpu009"]
    assert (task["job_id"], task["slurm_job_id"], task["priority"]) == ("1102", "1100_1", "low")
    assert task["memory_gib"] == 1.5  # mem=1536M
    # heterogeneous components share the leader's job id (one gang)
    assert allocs["1200:1772344800@gpu001"]["job_id"] == "1200"
    assert allocs["1201:1772344800@gpu003"]["job_id"] == "1200"
    # requeued: each run is an allocation, told apart by its start
    assert allocs["1300:1772326800@gpu007"]["state"] == "REQUEUED"
    assert allocs["1300:1772334000@gpu004"]["restarts"] == 1
    # workload: interactive shell -> development, no GPU -> cpu_only, else training
    assert allocs["1001:1772326800@gpu006"]["workload"] == "development"
    assert allocs["1800:1772326800@cpu01"]["workload"] == "cpu_only"
    assert allocs["1000:1772323200@gpu001"]["workload"] == "training"
    assert allocs["1000:1772323200@gpu001"]["tenant"] == "vision"
    assert allocs["1000:1772323200@gpu001"]["priority"] == "high"


def test_requests_every_job(cluster: Store) -> None:
    requests = _requests(cluster)
    assert len(requests) == 13  # every job row, steps skipped; the requeued job twice
    done = requests["1000:1772321400"]
    assert (done["submit_time"], done["start_time"], done["duration_s"]) == (
        _plus(-0.5),
        _plus(0),
        7200,
    )
    assert (done["gpus"], done["gpus_per_pod"], done["locality"]) == (8, 8, "node")
    assert (done["cpus_per_gpu"], done["memory_gib_per_gpu"]) == (8, 62.5)
    assert done["gpu_model"] is None  # ReqTRES untyped: any model
    # the queue wait starts at Eligible, not Submit (1100_1 was held until T+7.5h); an
    # array task's request is keyed by its task, 1100_1, as squeue keys it while it waits
    held = requests["1100_1:1772332200"]
    assert (held["submit_time"], held["eligible_time"]) == (_plus(2.5), _plus(7.5))
    assert held["ineligible_reason"] is None
    # cancelled while pending: no allocation; it left the queue at the cancel time
    cancelled = requests["1400:1772337600"]
    assert cancelled["start_time"] == _plus(5) and cancelled["never_started"]
    # pending two-node job: typed ReqTRES names the model; duration is the time limit; sacct
    # does not record --switches, and without it Slurm spreads a job over any switches
    pending = requests["1500:1772355600"]
    assert pending["start_time"] is None
    assert (pending["gpu_model"], pending["gpus"], pending["gpus_per_pod"]) == ("H100", 16, 8)
    assert (pending["locality"], pending["duration_s"], pending["duration_is_limit"]) == (
        "any",
        2880 * 60,
        True,
    )
    assert (pending["cpus_per_gpu"], pending["memory_gib_per_gpu"]) == (14, 125)
    # requeued: one request per run (sacct -D: the requeue resets the submit time)
    assert {"1300:1772325000", "1300:1772330400"} <= requests.keys()
    # 5 GPUs over 2 nodes asks for 2 pods of 3 GPUs
    uneven = requests["1700:1772348400"]
    assert (uneven["gpus"], uneven["gpus_per_pod"], uneven["uneven_split"]) == (6, 3, True)
    cpu = requests["1800:1772325000"]
    assert (cpu["gpus"], cpu["cpus"], cpu["memory_gib"]) == (0, 16, 62.5)


# -- the JSON flavours --------------------------------------------------------------------------


def test_json_flavours(store: Store) -> None:
    result = ingest(store, [SLURM_JSON], IngestOptions(format="slurm"))
    # the node with two GPU types is the one reject
    assert result.rejected == 1
    reject = result.rejects.row(0, named=True)
    assert (reject["table"], reject["row"], reject["column"]) == ("nodes", 4, "gpu_model")
    assert "2 types (a100, t4)" in reject["reason"]
    nodes = {r["node_id"]: r for r in store.sql("SELECT * FROM nodes").iter_rows(named=True)}
    assert nodes["a01"]["gpu_model"] == "A100 SXM4 80GB"  # AutoDetect=nvml type name
    assert nodes["a02"]["health"] == "cordoned" and nodes["a02"]["memory_gib"] == 498
    assert nodes["a03"]["health"] == "degraded"  # gres_drained
    allocs = _allocs(store)
    assert sorted(allocs) == ["2001:1772326800@a01", "2001:1772326800@a02", "2101:1772326800@a03"]
    task = allocs["2001:1772326800@a01"]
    assert (task["slurm_job_id"], task["gpus"], task["cpus"], task["memory_gib"]) == (
        "2000_3",
        4,
        16,
        128,
    )
    het = allocs["2101:1772326800@a03"]
    assert (het["job_id"], het["slurm_job_id"], het["priority"], het["end_time"]) == (
        "2100",
        "2100+1",
        "low",
        None,
    )
    requests = _requests(store)
    # sacct's three jobs plus squeue's two pending ones (its running job comes from sacct)
    assert sorted(requests) == [
        "2000_3:1772323200",  # an array task: keyed by its task, as squeue keys it
        "2101:1772323200",
        "2200:1772330400",
        "2300:1772334000",
        "2301:1772334000",
    ]
    assert requests["2200:1772330400"]["submit_time"] == _plus(2)
    assert requests["2200:1772330400"]["eligible_time"] is None  # eligible 0: from Submit
    big = requests["2300:1772334000"]
    assert (big["submit_time"], big["eligible_time"]) == (_plus(3), _plus(3) + timedelta(minutes=1))
    # squeue's required_switches 1: one leaf switch
    assert (big["gpu_model"], big["gpus"], big["gpus_per_pod"], big["locality"]) == (
        "A100",
        8,
        4,
        "switch",
    )
    assert big["duration_s"] == 36000 and big["slurm_source"] == "squeue"
    assert requests["2101:1772323200"]["duration_s"] is None  # unlimited time limit, still running


# -- times, priority map, bad input ----------------------------------------------------------------


def test_local_times_with_timezone(store: Store, tmp_path: Path) -> None:
    sacct = write(
        tmp_path / "sacct.txt",
        HEADER + "\n"
        "7|7|x|u|acct|gpu|normal|2026-03-01T09:00:00|Unknown|2026-03-01T10:00:00|Unknown|0|60|"
        "RUNNING|1|n1|16|cpu=16,gres/gpu=8|cpu=16,gres/gpu=8,mem=1000G\n",
    )
    nodes = write(tmp_path / "nodes.txt", NODE.format(name="n1") + "\n")
    ingest(store, [nodes, sacct], IngestOptions(format="slurm", timezone="Europe/Berlin"))
    row = store.sql("SELECT start_time, end_time FROM allocations").row(0)
    assert row == (datetime(2026, 3, 1, 9), None)  # 10:00 CET is 09:00 UTC
    assert store.sql("SELECT submit_time FROM requests").item() == datetime(2026, 3, 1, 8)
    with pytest.raises(UsageError, match="--timezone"):
        ingest(store, [sacct], IngestOptions(format="slurm", timezone="Mars/Olympus"))


def test_priority_map_file(store: Store, tmp_path: Path) -> None:
    pmap = write(tmp_path / "prio.txt", "# site QOS\nnormal = low\n")
    ingest(store, [SLURM], IngestOptions(format="slurm", priority_map=pmap))
    assert store.sql("SELECT DISTINCT priority FROM allocations").to_series().to_list() == ["low"]


def test_unparsable_values_become_rejects_with_reasons(store: Store, tmp_path: Path) -> None:
    sacct = write(
        tmp_path / "sacct.txt",
        HEADER + "\n"
        "1|1|a|u|acct|gpu|normal|1772323200|1772323200|1772326800|1772330400|3600|60|COMPLETED|2|n[1-|16|cpu=16|cpu=16,gres/gpu=8\n"
        "2|2|a|u|acct|gpu|normal|1772323200|1772323200|1772326800|1772330400|3600|60|COMPLETED|1|n1|16|cpu=16|cpu=16,gres/gpu=lots\n"
        "3|3|a|u|acct|gpu|normal|1772323200|1772323200|yesterday|1772330400|3600|60|COMPLETED|1|n1|16|cpu=16|cpu=16,gres/gpu=8\n"
        "4|4|a|u|acct|gpu|normal|1772323200|1772323200|1772326800|1772330400|3600|60|COMPLETED|1|n1|16|cpu=16|cpu=16|extra\n"
        "5|5|a|u|acct|gpu|normal|1772323200|1772323200|1772326800|1772330400|3600|60|COMPLETED|1|n1|16|cpu=16|cpu=16,gres/gpu=8\n",
    )
    nodes = write(tmp_path / "nodes.txt", NODE.format(name="n1") + "\n")
    result = ingest(store, [nodes, sacct], IngestOptions(format="slurm"))
    rejects = store.sql(
        'SELECT "table", "row", "column", value, reason FROM rejects ORDER BY "table", "row"'
    )
    got = {(r["table"], r["row"], r["column"]): r["reason"] for r in rejects.iter_rows(named=True)}
    assert got[("allocations", 1, "NodeList")].startswith("bad hostlist: ")
    assert "lots" in got[("allocations", 2, "AllocTRES")]
    assert got[("allocations", 3, "Start")].startswith("cannot read the time yesterday")
    assert (
        got[("allocations", 4, "JobID")]
        == "20 fields where the header has 19 (a '|' inside a field?)"
    )
    # a line of a job that ran is rejected once, by the allocations, not again as a request
    # (line 1's request is sound: only its node list is bad)
    assert sorted(got) == [
        ("allocations", 1, "NodeList"),
        ("allocations", 2, "AllocTRES"),
        ("allocations", 3, "Start"),
        ("allocations", 4, "JobID"),
    ]
    assert store.sql("SELECT alloc_id FROM allocations").to_series().to_list() == [
        "5:1772326800@n1"
    ]
    assert result.rejected == len(got)


def test_bad_file_in_the_mix_writes_nothing(store: Store, tmp_path: Path) -> None:
    bad = write(tmp_path / "mystery.txt", "hello world\n")
    with pytest.raises(InputError, match=r"mystery\.txt: not a Slurm export"):
        ingest(store, [SLURM, bad], IngestOptions(format="slurm"))
    assert store.row_count("nodes") == 0 and store.row_count("allocations") == 0


def test_topology_needs_the_node_list(store: Store) -> None:
    with pytest.raises(InputError, match="scontrol -d -o show node"):
        ingest(store, [SLURM / "topology.conf", SLURM / "sacct.psv"], IngestOptions(format="slurm"))


def test_missing_sacct_field_fails_the_call(store: Store, tmp_path: Path) -> None:
    sacct = write(tmp_path / "s.txt", "JobID|Start|End|State\n1|1|2|COMPLETED\n")
    with pytest.raises(InputError, match="column Submit: required sacct field missing"):
        ingest(store, [sacct], IngestOptions(format="slurm"))


def test_reingest_is_idempotent(cluster: Store) -> None:
    again = ingest(cluster, [SLURM], IngestOptions(format="slurm"))
    by_table = {t.table: t for t in again.tables}
    assert by_table["allocations"].replaced == 15 and by_table["allocations"].new == 0
    assert by_table["requests"].replaced == 13


# -- end to end: the command line on the small cluster ------------------------------------------


def _cli(*args: object) -> object:
    return CliRunner().invoke(app, [str(a) for a in args])


def test_end_to_end_shapes_report_compaction(tmp_path: Path) -> None:
    db = tmp_path / "fleet.duckdb"
    result = _cli("ingest", "--format", "slurm", SLURM, "--db", db)
    assert result.exit_code == 0, result.output
    at = "2026-03-01T10:00:00Z"
    result = _cli(
        "shapes",
        "--model",
        "H100",
        "--gpus",
        32,
        "--gpus-per-pod",
        8,
        "--locality",
        "switch",
        "--at",
        at,
        "--json",
        "--db",
        db,
    )
    assert result.exit_code == 0, result.output
    (shape,) = json.loads(result.stdout)["shapes"]
    # leaf0 (gpu001-004) is free: one 4-node instance. leaf1: gpu005 cordoned, gpu010 down,
    # gpu006 half used by 1001 (fragment 4), gpu007-008 free but only 2 pods (topology 16);
    # gpu009, absent from topology.conf, is its own domain, 2 GPUs of the scavenger task 1100_1
    # (allocated_low) leave 6 (fragment). gpu005 (drained since 08:00) and gpu010 (down since
    # 07:00) are out of service at 10:00 by their health intervals, which date their recorded
    # health: the work still on them (1700, 3 and 2 GPUs) stays allocated, and only their
    # other GPUs are unhealthy (5 + 6).
    assert shape["instances"] == 1
    assert shape["gpus"] == {
        "installed": 80,
        "unhealthy": 11,
        "allocated_high": 9,
        "allocated_low": 2,
        "idle": 58,
        "usable": 32,
        "stranded": {"interval": 0, "fragment": 10, "cpu_memory": 0, "topology": 16},
    }
    report = tmp_path / "report.json"
    result = _cli(
        "report", "--at", at, "--since", "10h", "--step", "1h", "--json", report, "--db", db
    )
    assert result.exit_code == 0, result.output
    physical = json.loads(report.read_text())["models"]["H100"]["physical"]
    # high on healthy nodes: 1000 8x2h + 1001 4x9h + 1002 32x4h + 1200 16x2h + 1300 2x1h+2x2h = 218,
    # and 1700 from 07:30 on the two nodes that went out of service (their intervals date
    # their recorded health): 3x2.5h on gpu005 + 2x2.5h on gpu010 = 12.5; low: 1100_0 2x1h +
    # 1100_1 2x2h = 6. Unhealthy: gpu005 from 08:00, (8-3)x2h = 10; gpu010 from 07:00,
    # 8x0.5h + (8-2)x2.5h = 19: healthy 800 - 29
    assert physical["installed_gpu_hours"] == 800 and physical["healthy_gpu_hours"] == 771
    assert physical["allocated_high_gpu_hours"] == 230.5
    assert physical["allocated_gpu_hours"] == 236.5
    result = _cli("whatif", "compaction", "--at", at, "--json", "--db", db)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    # the queued 1500 (2 pods of 8 H100, anywhere: sacct does not record --switches): 3 pairs of
    # free nodes (leaf0 holds 4, leaf1 gpu007-008) before and after;
    # the only movable work is 1001 and 1100_1 (4 and 2 GPUs)
    assert [i["instances"] for i in doc["before"]["instances"]] == [3]
    assert [i["instances"] for i in doc["after"]["instances"]] == [3]
    assert {m["alloc_id"] for m in doc["moves"]} <= {
        "1001:1772326800@gpu006",
        "1102:1772352000@gpu009",
    }
    assert doc["after"]["free_nodes"] >= doc["before"]["free_nodes"] == 6


def test_cli_options_that_do_not_apply(tmp_path: Path) -> None:
    result = _cli("ingest", SLURM, "--timezone", "UTC", "--db", tmp_path / "x.duckdb")
    assert result.exit_code == 2 and "--timezone applies to --format slurm only" in result.output
    result = _cli("ingest", "--format", "slurm", SLURM / "nowhere", "--db", tmp_path / "x.duckdb")
    assert result.exit_code == 2 and "nowhere: no such file or folder" in result.output


# -- the generated cluster: generate --format slurm, then every command --------------------------


def test_generated_cluster_end_to_end(tmp_path: Path) -> None:
    out, db = tmp_path / "cluster", tmp_path / "fleet.duckdb"
    result = _cli("generate", out, "--format", "slurm", "--nodes", 40, "--jobs", 3000, "--days", 5)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["nodes.txt", "sacct.psv", "topology.conf"]
    result = _cli("ingest", "--format", "slurm", out, "--db", db)
    assert result.exit_code == 0, result.output
    with open_store(db) as store:
        assert store.row_count("rejects") == 0
        assert store.row_count("requests") == 3000
        # 40 nodes: leaf0 = gpu0001-0032, leaf1 = gpu0033-0040, both under spine0
        domains = store.sql(
            "SELECT switch_id, block_id, count(*) AS n FROM nodes GROUP BY ALL ORDER BY switch_id"
        ).rows()
        assert domains == [("leaf0", "spine0", 32), ("leaf1", "spine0", 8)]
        # multi-node jobs stay within a leaf switch, as the generator lays them out
        spread = store.sql(
            "SELECT a.job_id, count(DISTINCT n.switch_id) AS leaves FROM allocations a "
            "JOIN nodes n USING (node_id) GROUP BY a.job_id HAVING count(*) > 1"
        )
        assert spread.height > 0 and spread["leaves"].max() == 1
    result = _cli(
        "shapes", "--gpus", 32, "--gpus-per-pod", 8, "--locality", "switch", "--json", "--db", db
    )
    assert result.exit_code == 0, result.output
    for shape in json.loads(result.stdout)["shapes"]:
        g = shape["gpus"]
        assert (
            g["installed"] == g["unhealthy"] + g["allocated_high"] + g["allocated_low"] + g["idle"]
        )
        assert g["idle"] == g["usable"] + sum(g["stranded"].values())
        assert g["usable"] == 32 * shape["instances"]
    assert _cli("report", "--since", "1d", "--json", tmp_path / "r.json", "--db", db).exit_code == 0
    result = _cli("whatif", "compaction", "--json", "--db", db)
    assert result.exit_code == 0, result.output


def test_calls_on_one_store_leave_no_temporary_copies(store: Store) -> None:
    ingest(store, [SLURM_JSON], IngestOptions(format="slurm"))
    ingest(store, [SLURM], IngestOptions(format="slurm"))  # the same names, now tables
    left = store.sql(
        "SELECT table_name AS name FROM duckdb_tables() WHERE starts_with(table_name, '_fa_slurm_') "
        "UNION ALL SELECT view_name FROM duckdb_views() WHERE starts_with(view_name, '_fa_slurm_')"
    )
    assert left.is_empty()
    assert store.row_count("allocations") == 3 + 15


def test_cli_strict_and_generate_errors(tmp_path: Path) -> None:
    sacct = write(
        tmp_path / "in" / "sacct.txt",
        HEADER + "\n7|7|x|u|acct|gpu|normal|1772323200|Unknown|1772326800|Unknown|0|60|"
        "RUNNING|2|n[1-|16|cpu=16|cpu=16,gres/gpu=8\n",
    )
    write(tmp_path / "in" / "nodes.txt", NODE.format(name="n1") + "\n")
    db = tmp_path / "fleet.duckdb"
    result = _cli("ingest", "--format", "slurm", "--strict", sacct.parent, "--db", db)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert f"{sacct} row 1, column NodeList: bad hostlist" in result.stderr
    result = _cli("generate", tmp_path / "g", "--format", "slurm", "--nodes", 2)
    assert result.exit_code == 2 and "--nodes: must be at least 4, got 2" in result.stderr


def test_native_files_cannot_reject_through_adapter_columns(store: Store, tmp_path: Path) -> None:
    nodes = write(
        tmp_path / "nodes.csv",
        "node_id,gpu_model,gpus,cpus,_reject_column,_reject_reason,_reject_value\n"
        "n1,H100,8,64,gpus,no,x\n",
    )
    result = ingest(store, [nodes])
    assert result.rejected == 0 and store.row_count("nodes") == 1


def test_untracked_gpus_and_gpu_slices_are_never_silent(store: Store, tmp_path: Path) -> None:
    # gres/gpu is not in AccountingStorageTRES: AllocTRES holds CPUs only; job 2 used shards
    sacct = write(
        tmp_path / "sacct.txt",
        HEADER + "\n"
        "1|1|a|u|acct|gpu|normal|1772323200|1772323200|1772326800|1772330400|3600|60|COMPLETED|1|n1|16|cpu=16|cpu=16\n"
        "2|2|a|u|acct|gpu|normal|1772323200|1772323200|1772326800|1772330400|3600|60|COMPLETED|1|n1|4|cpu=4,gres/shard=2|cpu=4,gres/shard=2\n",
    )
    nodes = write(tmp_path / "nodes.txt", NODE.format(name="n1") + "\n")
    result = ingest(store, [nodes, sacct], IngestOptions(format="slurm"))
    assert any("no job's AllocTRES holds gres/gpu" in n for n in result.notes)
    # the shard job is no cpu_only allocation: a reject naming the slice
    assert store.sql("SELECT alloc_id, workload FROM allocations").rows() == [
        ("1:1772326800@n1", "cpu_only")
    ]
    reasons = store.sql('SELECT "table", "column", reason FROM rejects ORDER BY 1').rows()
    slice_reason = (
        "gres/shard is a GPU slice (gres/shard or gres/mps) without gres/gpu: "
        "its GPU share is unknown"
    )
    assert reasons == [("allocations", "AllocTRES", slice_reason)]  # once per line
    with open_store(tmp_path / "strict.duckdb") as strict_store:
        with pytest.raises(InputError, match="no job's AllocTRES holds gres/gpu"):
            ingest(strict_store, [nodes, sacct], IngestOptions(format="slurm", strict=True))


def test_a_pending_array_is_a_request_per_task(store: Store, tmp_path: Path) -> None:
    # without -r, squeue prints a pending array once: tasks 5-7 and 10 are 4 requests
    unset = {"set": False, "infinite": False, "number": 0}
    job = {
        "job_id": 900,
        "array_job_id": {"set": True, "infinite": False, "number": 900},
        "array_task_id": unset,
        "array_task_string": "5-7,10%2",
        "name": "sweep",
        "account": "vision",
        "partition": "gpu",
        "job_state": ["PENDING"],
        "submit_time": {"set": True, "infinite": False, "number": 1772334000},
        "tres_req_str": "cpu=8,gres/gpu=1",
    }
    squeue = write(tmp_path / "squeue.json", json.dumps({"jobs": [job]}))
    ingest(store, [squeue], IngestOptions(format="slurm"))
    got = store.sql("SELECT slurm_job_id, gpus FROM requests ORDER BY request_id").rows()
    assert got == [("900_10", 1.0), ("900_5", 1.0), ("900_6", 1.0), ("900_7", 1.0)]


def test_a_bad_line_of_a_multi_node_job_is_one_reject(store: Store, tmp_path: Path) -> None:
    sacct = write(
        tmp_path / "sacct.txt",
        HEADER + "\n"
        "7|7|a|u|acct|gpu|normal|1772323200|1772323200|1772326800|1772330400|3600|60|COMPLETED|2|n[1-2]|16|cpu=16|cpu=16,gres/gpu=lots\n",
    )
    nodes = write(tmp_path / "nodes.txt", NODE.format(name="n1") + "\n" + NODE.format(name="n2"))
    result = ingest(store, [nodes, sacct], IngestOptions(format="slurm"))
    assert result.rejected == 1  # not one per node, nor again as a request
    assert store.sql('SELECT "table", "row" FROM rejects').rows() == [("allocations", 1)]


def test_a_suspended_job_releases_its_cpus(store: Store, tmp_path: Path) -> None:
    sacct = write(
        tmp_path / "sacct.txt",
        HEADER + "\n"
        "8|8|a|u|acct|gpu|normal|1772323200|1772323200|1772326800|Unknown|3600|60|SUSPENDED|1|n1|16|cpu=16|cpu=16,gres/gpu=8\n",
    )
    nodes = write(tmp_path / "nodes.txt", NODE.format(name="n1") + "\n")
    ingest(store, [nodes, sacct], IngestOptions(format="slurm"))
    # Slurm gives a suspended job's CPUs to others; its GPUs stay allocated
    assert store.sql("SELECT gpus, cpus, suspended FROM allocations").rows() == [(8.0, 0.0, True)]


def test_held_dependent_and_begin_time_jobs_wait_for_no_capacity(tmp_path: Path) -> None:
    # at T: 10 waits for capacity; 11 is held and 12 waits on 10 (no eligible time: never
    # queued); 13 may start from T+3h (--begin); 14 was held, then cancelled at T+1h
    sacct = write(
        tmp_path / "in" / "sacct.psv",
        HEADER + "|Reason\n"
        "10|10|a|u|acct|gpu|normal|1772319600|1772319600|Unknown|Unknown|0|60|PENDING|1|None assigned|8|cpu=8,gres/gpu=8||Resources\n"
        "11|11|a|u|acct|gpu|normal|1772319600|Unknown|Unknown|Unknown|0|60|PENDING|1|None assigned|8|cpu=8,gres/gpu=8||JobHeldUser\n"
        "12|12|a|u|acct|gpu|normal|1772319600|Unknown|Unknown|Unknown|0|60|PENDING|1|None assigned|8|cpu=8,gres/gpu=8||Dependency\n"
        "13|13|a|u|acct|gpu|normal|1772319600|1772334000|Unknown|Unknown|0|60|PENDING|1|None assigned|8|cpu=8,gres/gpu=8||BeginTime\n"
        "14|14|a|u|acct|gpu|normal|1772319600|Unknown|None|1772326800|0|60|CANCELLED by 0|1|None assigned|8|cpu=8,gres/gpu=8||JobHeldUser\n",
    )
    write(tmp_path / "in" / "nodes.txt", NODE.format(name="n1") + "\n")
    db = tmp_path / "s.duckdb"
    assert _cli("ingest", "--format", "slurm", sacct.parent, "--db", db).exit_code == 0
    with open_store(db, read_only=True) as store:
        got = store.sql(
            "SELECT request_id, eligible_time, ineligible_reason FROM requests ORDER BY 1"
        ).rows()
        assert got == [
            ("10:1772319600", _plus(-1), None),
            ("11:1772319600", None, "JobHeldUser"),
            ("12:1772319600", None, "Dependency"),
            ("13:1772319600", _plus(3), "BeginTime"),
            ("14:1772319600", None, "JobHeldUser"),
        ]
        for hours, queued in ((0, ["10"]), (0.5, ["10"]), (4, ["10", "13"])):
            at = _plus(hours)
            ids = store.query("queued_requests_at", at=at)["request_id"].to_list()
            assert [i.split(":")[0] for i in ids] == queued, hours
    result = _cli("shapes", "--at", "2026-03-01T00:00:00Z", "--json", "--db", db)
    doc = json.loads(result.stdout)
    assert [s["queued"] for s in doc["shapes"]] == [1]
    # 14 was still held at T (it left at T+1h)
    assert (
        "4 request(s) submitted by 2026-03-01T00:00:00Z are not queued demand: they may not "
        "start yet for reasons of their own (2 JobHeldUser, 1 BeginTime, 1 Dependency)"
    ) in doc["notes"]
    report = tmp_path / "r.json"
    result = _cli("report", "--at", "2026-03-01T04:00:00Z", "--since", "4h", "--json", report, "--db", db)
    assert result.exit_code == 0, result.output
    notes = json.loads(report.read_text())["notes"]
    # at T+4h: 13 is eligible, 14 has left; 11 and 12 still wait on themselves
    assert any(
        n.startswith("2 request(s) submitted by 2026-03-01T04:00:00Z are not queued demand")
        and n.endswith("(1 Dependency, 1 JobHeldUser)")
        for n in notes
    )


def test_switches_give_block_where_a_level_holds_that_many_leaves(store: Store, tmp_path: Path) -> None:
    # squeue's required_switches: 1 -> switch; 2 -> block (the spine holds 2 leaves); 3 -> any
    jobs = [
        {"job_id": 30 + n, "job_state": ["PENDING"], "state_reason": "Resources",
         "submit_time": 1772323200, "node_count": 2, "tres_req_str": "cpu=2,gres/gpu=16",
         "required_switches": n}
        for n in (0, 1, 2, 3)
    ]  # fmt: skip
    squeue = write(tmp_path / "squeue.json", json.dumps({"jobs": jobs}))
    ingest(store, [SLURM / "nodes.txt", SLURM / "topology.conf", squeue], IngestOptions(format="slurm"))
    got = store.sql("SELECT request_id, locality FROM requests ORDER BY 1").rows()
    assert [loc for _, loc in got] == ["any", "switch", "block", "any"]
