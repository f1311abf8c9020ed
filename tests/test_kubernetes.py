"""``--format kubernetes``: each mapping rule against small invented kubectl documents.

tests/data/kubernetes/ holds three snapshots of one invented cluster (10:00:04,
10:30:00, 11:00:00 on 2026-03-01); every expected value below is worked by hand
from those files (the comments say how).
"""

from __future__ import annotations

import copy
import json
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fleetaudit.cli import app
from fleetaudit.core.errors import InputError
from fleetaudit.inputs.ingest import IngestOptions, ingest
from fleetaudit.inputs.ingest.kubernetes import (
    GpuSetup,
    effective_request,
    gpu_setup,
    job_id,
    node_health,
    pod_gpus,
    switch_id,
)
from fleetaudit.model.store import Store, open_store
from tests.conftest import DATA, write

K8S = DATA / "kubernetes"
SNAP1, SNAP2, SNAP3 = (K8S / f"snap{i}.json" for i in (1, 2, 3))
T1, T2, T3 = datetime(2026, 3, 1, 10, 0, 4), datetime(2026, 3, 1, 10, 30), datetime(2026, 3, 1, 11)
runner = CliRunner()


def k8s(store: Store, *paths: Path, **options: Any) -> Any:
    return ingest(store, list(paths), IngestOptions(format="kubernetes", **options))


def rows(store: Store, table: str, key: str) -> dict[str, dict[str, Any]]:
    return {r[key]: r for r in store.sql(f"SELECT * FROM {table}").iter_rows(named=True)}


def test_nodes_of_one_snapshot(store: Store) -> None:
    k8s(store, SNAP1)
    nodes = rows(store, "nodes", "node_id")
    a01 = nodes["gpu-a-01"]
    # 8 GPUs installed, 7 allocatable: a withdrawn device -> degraded; cpu 207500m;
    # memory 1024Gi allocatable (capacity is kept apart); GKE block/subblock path
    assert (a01["gpu_model"], a01["gpus"], a01["cpus"], a01["memory_gib"]) == (
        "H100 80GB HBM3",
        8,
        207.5,
        1024.0,
    )
    assert (a01["switch_id"], a01["health"], a01["snapshot_time"]) == ("b1/sb3", "degraded", T1)
    assert a01["block_id"] == "b1"  # the path down to the level above the leaf
    # time-slicing: 16 replicas of 4 physical GPUs; cordoned; EKS layers 1-3
    ts = nodes["t4-ts-01"]
    assert (ts["gpu_model"], ts["gpus"], ts["gpu_sharing"], ts["gpu_replicas"]) == (
        "T4",
        4,
        "time-slicing",
        4,
    )
    assert (ts["health"], ts["switch_id"]) == ("cordoned", "nn-1/nn-2/nn-3")
    assert ts["block_id"] == "nn-1/nn-2"
    # MIG mixed: physical from gpu.count; Ready Unknown -> down
    mig = nodes["a100-mig-01"]
    assert (mig["gpus"], mig["gpu_sharing"], mig["health"]) == (2, "mig-mixed", "down")
    # no GPU feature discovery label: model unknown, GPUs from capacity, no switch
    bare = nodes["gpu-nolabel"]
    assert (bare["gpu_model"], bare["gpus"], bare["switch_id"], bare["block_id"]) == (
        "unknown",
        2,
        None,
        None,
    )


def test_allocations_of_one_snapshot(store: Store) -> None:
    result = k8s(store, SNAP1)
    allocs = rows(store, "allocations", "alloc_id")
    assert set(allocs) == {"uid-pt-0", "uid-pt-1", "uid-nb", "uid-mig", "uid-done"}
    pt0 = allocs["uid-pt-0"]
    # the init container's 100 CPUs exceed the container's 48: the effective request is 100;
    # memory max(10Gi, 400Gi); GPUs only in limits count as the request
    assert (pt0["gpus"], pt0["cpus"], pt0["memory_gib"]) == (4.0, 100.0, 400.0)
    assert (pt0["job_id"], pt0["namespace"], pt0["pod"]) == ("nlp/pt", "nlp", "pt-worker-0")
    assert (pt0["start_time"], pt0["end_time"]) == (datetime(2026, 3, 1, 9, 0, 40), None)
    assert (pt0["tenant"], pt0["priority"], pt0["workload"]) == ("nlp", "high", "training")
    # a pod being deleted still holds its GPUs
    assert allocs["uid-pt-1"]["terminating"] is True and allocs["uid-pt-1"]["end_time"] is None
    # one time-slicing replica of 4 is a quarter GPU; a MIG 3g slice is 3/7 of an A100
    assert allocs["uid-nb"]["gpus"] == 0.25
    assert allocs["uid-mig"]["gpus"] == pytest.approx(3 / 7)
    assert allocs["uid-mig"]["workload"] == "online_inference"  # a ReplicaSet's pod
    # a terminal pod ends at its last container's finish
    done = allocs["uid-done"]
    assert (done["end_time"], done["phase"]) == (datetime(2026, 3, 1, 7, 30), "Succeeded")
    assert result.notes[0] == "ignored 1 object(s) of other kinds (Service 1)"


def test_a_nameless_node_or_pod_is_noted_as_such(store: Store, tmp_path: Path) -> None:
    """A Node or Pod without metadata.name is not an object "of another kind"."""
    doc = json.loads(SNAP1.read_text())
    nodes = [i for i in doc["items"] if i["kind"] == "Node"]
    pods = [i for i in doc["items"] if i["kind"] == "Pod"]
    del nodes[0]["metadata"]["name"]
    pods[0]["metadata"] = {}
    path = write(tmp_path / "snap.json", json.dumps(doc))
    result = k8s(store, path)
    assert list(result.notes[:2]) == [
        "ignored 1 object(s) of other kinds (Service 1)",
        "ignored 2 object(s) without metadata.name (Node 1, Pod 1): not as kubectl writes them",
    ]
    assert store.row_count("nodes") == len(nodes) - 1


def test_a_capacity_too_large_is_a_reject_saying_so(store: Store, tmp_path: Path) -> None:
    doc = json.loads(SNAP1.read_text())
    node = next(i for i in doc["items"] if i["kind"] == "Node")
    node["status"]["capacity"]["nvidia.com/gpu"] = "1e30"
    k8s(store, write(tmp_path / "snap.json", json.dumps(doc)))
    got = store.sql(
        "SELECT \"column\", value, reason FROM rejects WHERE \"table\" = 'nodes'"
    ).rows()
    assert got == [("gpus", "1e30", "'1e30' is above 2^63-1 (capacity nvidia.com/gpu)")]


def test_unmappable_objects_are_rejects(store: Store) -> None:
    k8s(store, SNAP1)
    found = store.sql('SELECT "row", "column", value, reason FROM rejects ORDER BY "row"').rows()
    assert found == [
        (13, "cpus", "2K", "unknown quantity '2K' (cpu of container c)"),
        (14, "node_id", "gpu-gone-09", "unknown node gpu-gone-09"),
    ]


def test_pending_gang_is_one_request(store: Store) -> None:
    k8s(store, SNAP1)
    (req,) = store.sql("SELECT * FROM requests").iter_rows(named=True)
    # two pending pods of the Volcano group big-train, 8 GPUs, 64 CPUs, 512Gi each
    assert req["request_id"] == "nlp/big-train"
    assert (req["gpus"], req["gpus_per_pod"], req["cpus_per_gpu"], req["memory_gib_per_gpu"]) == (
        16.0,
        8.0,
        8.0,
        64.0,
    )
    assert (req["gpu_model"], req["locality"], req["start_time"]) == (
        "H100 80GB HBM3",
        "switch",
        None,
    )
    assert req["submit_time"] == datetime(2026, 3, 1, 9, 30)  # the first pod's creation
    assert req["pending_reason"] == "Unschedulable"


def _history(store: Store) -> dict[str, pl.DataFrame]:
    return {
        t: store.sql(f"SELECT * EXCLUDE (_ingest_id) FROM {t} ORDER BY 1")
        for t in ("nodes", "allocations", "requests")
    }


def test_history_of_three_snapshots(store: Store) -> None:
    k8s(store, SNAP1, SNAP2, SNAP3)
    allocs = rows(store, "allocations", "alloc_id")
    # pt-0 is seen finished at 10:20 in snapshot 2
    assert (allocs["uid-pt-0"]["end_time"], allocs["uid-pt-0"]["end_censored"]) == (
        datetime(2026, 3, 1, 10, 20),
        False,
    )
    # pt-1 (terminating at 10:00:04) is gone from snapshot 2: it ends at the last sighting
    assert (allocs["uid-pt-1"]["end_time"], allocs["uid-pt-1"]["end_censored"]) == (T1, True)
    # the MIG pod is in snapshots 1 and 2, not 3
    assert allocs["uid-mig"]["end_time"] == T2
    # still running in the last snapshot
    assert allocs["uid-nb"]["end_time"] is None and allocs["uid-nb"]["last_seen"] == T3
    # the gang binds in snapshot 2: allocations from their bind times
    assert allocs["uid-pend-b"]["start_time"] == datetime(2026, 3, 1, 10, 25, 2)
    reqs = rows(store, "requests", "request_id")
    # the gang starts when its last pod binds; the Workload when it is admitted (snapshot 3);
    # the admitted-at-once Workload is a started request (created 10:05, admitted 10:06);
    # the Kueue-gated pod is no request
    assert set(reqs) == {"nlp/big-train", "uid-wl-llm", "uid-wl-ok"}
    ok = reqs["uid-wl-ok"]
    assert (ok["submit_time"], ok["start_time"], ok["left_queue"]) == (
        datetime(2026, 3, 1, 10, 5),
        datetime(2026, 3, 1, 10, 6),
        "started",
    )
    assert reqs["nlp/big-train"]["start_time"] == datetime(2026, 3, 1, 10, 25, 2)
    wl = reqs["uid-wl-llm"]
    assert (wl["start_time"], wl["left_queue"], wl["kind"]) == (
        datetime(2026, 3, 1, 10, 45),
        "started",
        "Workload",
    )
    # 2 pods x 4 GPUs; 32 CPUs and 256Gi per pod; the required sub-block is a switch
    assert (wl["gpus"], wl["gpus_per_pod"], wl["cpus_per_gpu"], wl["memory_gib_per_gpu"]) == (
        8.0,
        4.0,
        8.0,
        64.0,
    )
    assert (wl["locality"], wl["queue"], wl["tenant"]) == ("switch", "llm-q", "llm")
    nodes = rows(store, "nodes", "node_id")
    # the newest snapshot wins: 8 GPUs allocatable again, uncordoned, Ready again
    assert nodes["gpu-a-01"]["health"] == "healthy"
    assert nodes["t4-ts-01"]["health"] == "healthy"
    assert nodes["a100-mig-01"]["health"] == "healthy"


def test_one_by_one_equals_all_at_once(tmp_path: Path) -> None:
    together = open_store(tmp_path / "a.duckdb")
    k8s(together, SNAP1, SNAP2, SNAP3)
    apart = open_store(tmp_path / "b.duckdb")
    for snap in (SNAP1, SNAP2, SNAP3, SNAP3):  # the last one twice: idempotent
        k8s(apart, snap)
    a, b = _history(together), _history(apart)
    for table in a:
        assert a[table].equals(b[table]), table


def test_vanished_pending_pod_leaves_the_queue(store: Store, tmp_path: Path) -> None:
    later = json.loads(SNAP1.read_text())  # the nodes and the notebook pod, at noon
    later["items"] = [
        i for i in later["items"] if i["kind"] == "Node" or i["metadata"].get("uid") == "uid-nb"
    ]
    for node in later["items"][:-1]:
        node["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-03-01T12:00:00Z"
    k8s(store, SNAP1, write(tmp_path / "noon.json", json.dumps(later)))
    (req,) = store.sql("SELECT * FROM requests").iter_rows(named=True)
    assert (req["start_time"], req["left_queue"]) == (T1, "vanished")
    # the pods gone at noon end at 10:00:04; the notebook runs on
    ended = store.sql("SELECT alloc_id, end_time FROM allocations WHERE end_censored").rows()
    assert sorted(ended) == [("uid-mig", T1), ("uid-pt-0", T1), ("uid-pt-1", T1)]


def test_a_snapshot_of_nodes_alone_ends_no_pod(store: Store, tmp_path: Path) -> None:
    nodes_only = json.loads(SNAP2.read_text())
    nodes_only["items"] = [i for i in nodes_only["items"] if i["kind"] == "Node"]
    k8s(store, SNAP1)
    k8s(store, write(tmp_path / "nodes.json", json.dumps(nodes_only)))
    assert store.scalar("SELECT count(*) FROM allocations WHERE end_time IS NULL") == 4
    assert store.scalar("SELECT start_time FROM requests") is None
    assert store.scalar("SELECT max(snapshot_time) FROM nodes") == T2


def test_a_gated_pod_without_its_workload_is_a_request(store: Store, tmp_path: Path) -> None:
    doc = json.loads(SNAP2.read_text())
    doc["items"] = [i for i in doc["items"] if i["kind"] != "Workload"]
    k8s(store, write(tmp_path / "no-workloads.json", json.dumps(doc)))
    req = rows(store, "requests", "request_id")["vision/plain"]  # the Kueue pod group
    assert (req["gpus"], req["pending_reason"], req["queue"]) == (
        1.0,
        "SchedulingGated",
        "vision-q",
    )


def test_strict_fails_on_an_unknown_quantity(tmp_path: Path) -> None:
    db = tmp_path / "fleet.duckdb"
    result = runner.invoke(
        app, ["ingest", "--format", "kubernetes", "--strict", str(SNAP1), "--db", str(db)]
    )
    assert result.exit_code == 2
    assert result.stderr == (
        f"fleetaudit: error: {SNAP1} row 13, column cpus: unknown quantity '2K' "
        "(cpu of container c) (2 row(s) rejected; --strict writes nothing)\n"
    )


def test_priority_map_and_tenant_label(store: Store, tmp_path: Path) -> None:
    pmap = write(tmp_path / "prio.txt", "train = low\n# the notebook class is not mapped\n")
    k8s(store, SNAP1, priority_map=pmap, tenant_label="team")
    allocs = rows(store, "allocations", "alloc_id")
    assert allocs["uid-pt-0"]["priority"] == "low"  # class train
    # best-effort: not in the map, but a preemptible name (as a Slurm QOS would be)
    assert allocs["uid-nb"]["priority"] == "low"
    assert allocs["uid-nb"]["tenant"] == "vision"  # label team
    assert allocs["uid-pt-0"]["tenant"] == "nlp"  # no label team: the namespace


def test_volcano_preemptable_pods_are_low_unless_mapped(tmp_path: Path) -> None:
    from fleetaudit.inputs.ingest.kubernetes import KubernetesOptions, _Mapper
    from fleetaudit.inputs.ingest.labels import PriorityMap

    meta = {"annotations": {"volcano.sh/preemptable": "true"}}
    assert _Mapper(KubernetesOptions()).priority("train", 50, meta) == "low"
    assert _Mapper(KubernetesOptions()).priority("train", 50, {}) == "high"
    mapped = KubernetesOptions(priority_map=PriorityMap({"train": "high"}))
    assert _Mapper(mapped).priority("train", 50, meta) == "high"


@pytest.mark.parametrize(("name", "priority"), [("spot", "low"), ("Preemptible", "low"),
                                                ("low-priority", "low"), ("prod", "high")])
def test_unmapped_names_default_alike_for_kubernetes_and_slurm(name: str, priority: str) -> None:
    from fleetaudit.inputs.ingest.kubernetes import KubernetesOptions, _Mapper
    from fleetaudit.inputs.ingest.labels import PriorityMap
    from fleetaudit.inputs.ingest.slurm import priority_of

    assert _Mapper(KubernetesOptions()).priority(name, None, {}) == priority
    assert priority_of(name, "gpu", PriorityMap()) == priority


def test_single_objects_and_snapshot_time(store: Store, tmp_path: Path) -> None:
    items = json.loads(SNAP1.read_text())["items"]
    node = write(tmp_path / "node.json", json.dumps(items[1]))  # gpu-a-02, one object
    pod = write(tmp_path / "pod.json", json.dumps(items[6]))  # uid-pt-1
    result = k8s(store, node, pod, snapshot_time=datetime(2026, 3, 1, 9, 45))
    assert store.scalar("SELECT snapshot_time FROM nodes") == datetime(2026, 3, 1, 9, 45)
    assert store.scalar("SELECT last_seen FROM allocations") == datetime(2026, 3, 1, 9, 45)
    assert "--snapshot-time" in result.notes[0]


def test_pods_without_a_time_fail(store: Store, tmp_path: Path) -> None:
    items = json.loads(SNAP1.read_text())["items"]
    pods = write(tmp_path / "pods.json", json.dumps({"kind": "List", "items": items[5:7]}))
    with pytest.raises(InputError, match="no node heartbeat to time this snapshot"):
        k8s(store, pods)
    # with the nodes of one snapshot in the same call, the pods take its time
    k8s(store, SNAP1, pods)
    assert store.scalar("SELECT count(*) FROM allocations WHERE last_seen = $t", {"t": T1}) == 5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not JSON (line 1)"),
        ("[1, 2]", "expected kubectl JSON"),
        ('{"items": []}', "expected kubectl JSON"),
        ('{"kind": "List", "items": 3}', "a List without items"),
    ],
)
def test_a_document_that_is_not_kubectl_json_fails_the_call(
    tmp_path: Path, text: str, message: str
) -> None:
    bad = write(tmp_path / "bad.json", text)
    db = tmp_path / "fleet.duckdb"
    result = runner.invoke(
        app, ["ingest", "--format", "kubernetes", str(SNAP1), str(bad), "--db", str(db)]
    )
    assert result.exit_code == 2
    assert result.stderr.startswith(f"fleetaudit: error: {bad}: ")
    assert message in result.stderr and result.stderr.count("\n") == 1
    with open_store(db) as store:  # nothing written
        assert store.row_count("nodes") == 0


def test_kubernetes_options_need_the_format(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["ingest", str(SNAP1), "--tenant-label", "team", "--db", str(tmp_path / "x.duckdb")]
    )
    assert result.exit_code == 2
    assert "--tenant-label applies to --format kubernetes only" in result.stderr


def _leaves(obj: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON value (objects and lists too, not just scalars)."""
    found = [path]
    if isinstance(obj, dict):
        for k, v in obj.items():
            found += _leaves(v, (*path, k))
    elif isinstance(obj, list):
        for k, v in enumerate(obj):
            found += _leaves(v, (*path, k))
    return found


_SNAP1 = json.loads(SNAP1.read_text())
_PATHS = [p for p in _leaves(_SNAP1) if len(p) >= 3]  # inside an item
_JSON = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 10**20), st.floats(allow_nan=False),
    st.text(max_size=8), st.just([]), st.just({}), st.just(["x"]), st.just({"a": 1}),
)  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(_PATHS), _JSON), min_size=1, max_size=3))
def test_malformed_objects_never_raise(tmp_path_factory: Any, edits: list[Any]) -> None:
    """Any field of any type: the call succeeds (with rejects) or fails on one line."""
    doc = json.loads(json.dumps(_SNAP1))
    for path, value in edits:
        target = doc
        try:
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = copy.deepcopy(value)  # st.just's value is one object for all
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit replaced a parent
    folder = tmp_path_factory.mktemp("fuzz")
    store = open_store(folder / "fleet.duckdb")
    try:
        k8s(store, write(folder / "snap.json", json.dumps(doc)))
    except InputError:
        pass
    finally:
        store.close()


# -- the rules, object by object ----------------------------------------------------------


def _node(labels: dict[str, str], capacity: dict[str, str], **extra: Any) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": "n", "labels": labels, **extra.pop("metadata", {})},
        "spec": extra.pop("spec", {}),
        "status": {
            "capacity": capacity,
            "allocatable": extra.pop("allocatable", capacity),
            "conditions": extra.pop("conditions", []),
        },
    }


@pytest.mark.parametrize(
    ("node", "physical", "sharing"),
    [
        # MIG single, 1g.5gb: 56 devices are 8 A100s of 7 slices each
        (
            _node(
                {
                    "nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-1g.5gb",
                    "nvidia.com/mig.strategy": "single",
                    "nvidia.com/gpu.count": "56",
                },
                {"nvidia.com/gpu": "56"},
            ),
            8,
            "mig-single",
        ),
        # MIG single, 1g.20gb on an 80 GB H100: 2 of 8 memory slices each, so 4 devices
        # per GPU (not 7): 32 devices are 8 GPUs
        (
            _node(
                {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.20gb"},
                {"nvidia.com/gpu": "32"},
            ),
            8,
            "mig-single",
        ),
        # 3g.40gb: compute gives 7 // 3 = 2, memory 8 // 4 = 2: 6 devices are 3 GPUs
        (
            _node(
                {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb"},
                {"nvidia.com/gpu": "6"},
            ),
            3,
            "mig-single",
        ),
        # A30 (4 slices, 24 GB): 1g.12gb takes 2 of 4 memory slices: 2 per GPU
        (
            _node(
                {"nvidia.com/gpu.product": "NVIDIA-A30-MIG-1g.12gb"},
                {"nvidia.com/gpu": "8"},
            ),
            4,
            "mig-single",
        ),
        # time-slicing renamed: nvidia.com/gpu.shared = 4 x 4
        (
            _node(
                {"nvidia.com/gpu.count": "4", "nvidia.com/gpu.replicas": "4"},
                {"nvidia.com/gpu.shared": "16"},
            ),
            4,
            "time-slicing",
        ),
        # HAMi: split 10 on 8 GPUs
        (
            _node(
                {"nvidia.com/gpu.count": "8"},
                {"nvidia.com/gpu": "80"},
                metadata={"annotations": {"hami.io/node-nvidia-register": "GPU-0,..."}},
            ),
            8,
            "hami",
        ),
        # Alibaba gpushare: 4 GPUs of 16 GiB
        (_node({}, {"aliyun.com/gpu-count": "4", "aliyun.com/gpu-mem": "64"}), 4, "gpushare"),
        # MPS without the count label: 8 exposed / 2 replicas
        (
            _node(
                {"nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.replicas": "2"},
                {"nvidia.com/gpu": "8"},
            ),
            4,
            "mps",
        ),
        (_node({}, {"cpu": "8"}), 0, "none"),
    ],
)
def test_physical_gpus(node: dict[str, Any], physical: int, sharing: str) -> None:
    setup = gpu_setup(node)
    assert (setup.physical, setup.sharing) == (physical, sharing)


@pytest.mark.parametrize(
    ("request_", "annotations", "setup", "gpus"),
    [
        ({"nvidia.com/gpu": Decimal(2)}, {}, GpuSetup(8), 2.0),
        ({"nvidia.com/gpu": Decimal(2)}, {}, GpuSetup(8, "mig-single", 1, 7, 1), 2 / 7),
        ({"nvidia.com/mig-2g.10gb": Decimal(1)}, {}, GpuSetup(8, "mig-mixed"), 2 / 7),
        # MIG single 1g.20gb on H100 80GB: 4 devices per GPU, so one is a quarter
        (
            {"nvidia.com/gpu": Decimal(1)},
            {},
            GpuSetup(8, "mig-single", 1, 7, 1, None, None, 4),
            0.25,
        ),
        # MIG mixed 1g.20gb, GPU memory 81559 MiB known: also a quarter (not 1/7)
        (
            {"nvidia.com/mig-1g.20gb": Decimal(1)},
            {},
            GpuSetup(8, "mig-mixed", 1, 7, 0, 81559),
            0.25,
        ),
        ({"nvidia.com/gpu.shared": Decimal(1)}, {}, GpuSetup(4, "time-slicing", 4), 0.25),
        # HAMi: 2 vGPUs at 30 % of the cores each
        (
            {"nvidia.com/gpu": Decimal(2), "nvidia.com/gpucores": Decimal(30)},
            {},
            GpuSetup(8, "hami", 10),
            0.6,
        ),
        # HAMi by memory: 20000 of 80000 MiB
        (
            {"nvidia.com/gpu": Decimal(1), "nvidia.com/gpumem": Decimal(20000)},
            {},
            GpuSetup(8, "hami", 10, 7, 0, 80000),
            0.25,
        ),
        # gpushare: 4 GiB of a 16 GiB GPU
        (
            {"aliyun.com/gpu-mem": Decimal(4)},
            {},
            GpuSetup(4, "gpushare", 1, 7, 0, None, Decimal(16)),
            0.25,
        ),
        ({}, {"gpu-fraction": "0.5"}, None, 0.5),  # KAI
        ({"cpu": Decimal(4)}, {}, None, 0.0),
    ],
)
def test_pod_gpus_are_physical(
    request_: dict[str, Decimal], annotations: dict[str, str], setup: GpuSetup | None, gpus: float
) -> None:
    assert pod_gpus(request_, annotations, setup)[0] == pytest.approx(gpus)


def test_effective_request_with_sidecars_and_overhead() -> None:
    spec = {
        "initContainers": [
            {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
            {"name": "warm", "resources": {"requests": {"cpu": "6", "memory": "1Gi"}}},
        ],
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}},
            {"name": "b", "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}},
        ],
        "overhead": {"cpu": "250m"},
    }
    total = effective_request(spec)
    # cpu: max(6 + 1 sidecar, 1 + 2 + 0.5) + 0.25 = 7.25; memory: max(1Gi, 5Gi) = 5Gi
    assert total["cpu"] == Decimal("7.25")
    assert total["memory"] == 5 * 2**30
    # pod-level resources replace the containers' cpu and memory
    spec["resources"] = {"requests": {"cpu": "3"}}
    assert effective_request(spec)["cpu"] == Decimal("3.25")


@pytest.mark.parametrize(
    ("where", "key", "value", "expected"),
    [
        ("annotations", "scheduling.volcano.sh/group-name", "pg", "ns/pg"),
        ("labels", "kueue.x-k8s.io/pod-group-name", "grp", "ns/grp"),
        ("annotations", "kueue.x-k8s.io/workload", "job-w", "ns/job-w"),
        ("labels", "scheduling.x-k8s.io/pod-group", "cg", "ns/cg"),
        ("annotations", "pod-group-name", "kai", "ns/kai"),
        ("labels", "training.kubeflow.org/job-name", "tj", "ns/tj"),
        ("labels", "app", "web", "uid-1"),  # a Deployment's replica is no gang
    ],
)
def test_gang_markers(where: str, key: str, value: str, expected: str) -> None:
    assert job_id({"namespace": "ns", where: {key: value}}, "uid-1") == expected


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (
            {"network.topology.nvidia.com/spine": "s1", "network.topology.nvidia.com/block": "b7"},
            "s1/b7",
        ),
        ({"fabric.topograph.run/tier-1": "t1", "fabric.topograph.run/tier-0": "t0"}, "t1/t0"),
        ({"oci.oraclecloud.com/rdma.local_block_id": "lb"}, "lb"),
        ({"topology.kubernetes.io/zone": "z1"}, None),  # a zone is no switch
    ],
)
def test_switch_id(labels: dict[str, str], expected: str | None) -> None:
    assert switch_id(labels) == expected


@pytest.mark.parametrize(
    ("extra", "health"),
    [
        ({"spec": {"taints": [{"key": "node.kubernetes.io/unreachable"}]}}, "down"),
        ({"spec": {"taints": [{"key": "node.kubernetes.io/unschedulable"}]}}, "cordoned"),
        (
            {
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {"type": "DiskPressure", "status": "True"},
                ]
            },
            "degraded",
        ),
        (
            {"conditions": [{"type": "Ready", "status": "False"}], "spec": {"unschedulable": True}},
            "down",
        ),
        ({"spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}}, "healthy"),
    ],
)
def test_health(extra: dict[str, Any], health: str) -> None:
    assert node_health(_node({}, {"nvidia.com/gpu": "8"}, **extra)) == health


# -- end to end ---------------------------------------------------------------------------


def test_generated_snapshot_end_to_end(tmp_path: Path) -> None:
    """generate --format kubernetes, ingest it, then shapes, report and whatif compaction run."""
    native, snap, db = tmp_path / "native", tmp_path / "k8s", tmp_path / "k8s.duckdb"
    args = ["--nodes", "40", "--days", "1", "--seed", "3"]
    assert runner.invoke(app, ["generate", str(native), *args, "--format", "csv"]).exit_code == 0
    done = runner.invoke(app, ["generate", str(snap), *args, "--format", "kubernetes"])
    assert done.exit_code == 0, done.output
    # the priority map's row counts its 2 entries (high and low class)
    (line,) = [x for x in done.output.splitlines() if "priority map" in x]
    assert [cell.strip() for cell in line.split("│")][1:3] == ["priority map", "2"]
    result = runner.invoke(
        app,
        [
            "ingest",
            "--format",
            "kubernetes",
            str(snap / "kubectl.json"),
            "--priority-map",
            str(snap / "priority-map.txt"),
            "--strict",
            "--db",
            str(db),
        ],
    )
    assert result.exit_code == 0, result.output
    end = datetime(2026, 5, 1)
    with open_store(db) as store:
        # the same fleet as the native tables say: nodes, GPUs, and what runs at the export time
        nodes = pl.read_csv(native / "nodes.csv")
        allocs = pl.read_csv(native / "allocations.csv", try_parse_dates=True)
        assert store.row_count("nodes") == nodes.height
        assert store.scalar("SELECT sum(gpus) FROM nodes") == nodes["gpus"].sum()
        health = dict(store.sql("SELECT health, count(*) AS n FROM nodes GROUP BY 1").rows())
        assert health == dict(nodes.group_by("health").len().rows())
        running = allocs.filter(pl.col("end_time").is_null())
        assert (
            store.scalar("SELECT count(*) FROM allocations WHERE end_time IS NULL")
            == running.height
        )
        for priority in ("high", "low"):
            assert store.scalar(
                "SELECT sum(gpus) FROM allocations WHERE end_time IS NULL AND priority = $p",
                {"p": priority},
            ) == pytest.approx(running.filter(pl.col("priority") == priority)["gpus"].sum())
        assert store.scalar("SELECT max(snapshot_time) FROM nodes") == end
    for command in (["shapes"], ["report"], ["whatif", "compaction"]):
        ran = runner.invoke(app, [*command, "--db", str(db)])
        assert ran.exit_code == 0, (command, ran.output)
    # the figures, not just the exit codes: at the snapshot time, whole-node shapes of every
    # model count the same instances and the same GPU ledger as on the native tables
    native_db = tmp_path / "native.duckdb"
    assert runner.invoke(app, ["ingest", str(native), "--db", str(native_db)]).exit_code == 0
    for model in nodes["gpu_model"].unique().to_list():
        shape = ["shapes", "--model", model, "--gpus", "8", "--at", end.isoformat(), "--json"]
        got = [
            json.loads(runner.invoke(app, [*shape, "--db", str(d)]).stdout)["shapes"][0]
            for d in (db, native_db)
        ]
        assert got[0]["gpus"] == got[1]["gpus"], model
        assert got[0]["instances"] == got[1]["instances"], model
        assert got[0]["gpus"]["installed"] == nodes.filter(pl.col("gpu_model") == model)[
            "gpus"
        ].sum()


# -- review findings: small documents built here ---------------------------------------------


def _gpu_node(name: str, beat: str, labels: dict[str, str] | None = None, gpus: str = "8") -> Any:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {},
        "status": {
            "capacity": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": gpus},
            "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": gpus},
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": beat}],
        },
    }


def _pod(uid: str, node: str | None, bound: str, gpus: str = "1", **spec: Any) -> Any:
    return {
        "kind": "Pod",
        "metadata": {"uid": uid, "name": uid, "namespace": "ns", "creationTimestamp": bound},
        "spec": {
            **({"nodeName": node} if node else {}),
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
            **spec,
        },
        "status": {
            "phase": "Running" if node else "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "True" if node else "False",
                    "lastTransitionTime": bound,
                }
            ],
        },
    }


def _doc(path: Path, *items: Any) -> Path:
    return write(path, json.dumps({"kind": "List", "items": list(items)}))


def test_a_lagging_heartbeat_loses_no_allocation(store: Store, tmp_path: Path) -> None:
    # node lease: the heartbeat is 10:00, the pod was bound at 10:03 and is gone by 10:30
    first = _doc(
        tmp_path / "a.json",
        _gpu_node("n1", "2026-03-01T10:00:00Z"),
        _pod("p1", "n1", "2026-03-01T10:03:00Z"),
    )
    second = _doc(
        tmp_path / "b.json",
        _gpu_node("n1", "2026-03-01T10:30:00Z"),
        _pod("p2", "n1", "2026-03-01T10:20:00Z"),
    )
    result = k8s(store, first, second)
    assert result.rejected == 0
    p1 = rows(store, "allocations", "alloc_id")["p1"]
    # the first snapshot's time is its newest event, 10:03: the pod ends there, not before
    assert (p1["start_time"], p1["end_time"], p1["end_censored"]) == (
        datetime(2026, 3, 1, 10, 3),
        datetime(2026, 3, 1, 10, 3),
        True,
    )
    assert store.scalar("SELECT min(snapshot_time) FROM nodes") == datetime(2026, 3, 1, 10, 30)


def test_snapshot_time_with_two_pod_documents_fails(tmp_path: Path) -> None:
    a = _doc(tmp_path / "a.json", _pod("p1", "n1", "2026-03-01T10:03:00Z"))
    b = _doc(tmp_path / "b.json", _pod("p2", "n1", "2026-03-01T10:20:00Z"))
    db = tmp_path / "fleet.duckdb"
    result = runner.invoke(
        app,
        ["ingest", "--format", "kubernetes", str(a), str(b), "--db", str(db),
         "--snapshot-time", "2026-03-01T11:00:00"],
    )
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert f"{b}: --snapshot-time makes one snapshot, but 2 documents list Pods" in result.stderr


def test_pods_alone_use_the_stored_mig_setup(store: Store, tmp_path: Path) -> None:
    mig = _gpu_node(
        "m1", "2026-03-01T10:00:00Z", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.20gb"},
        gpus="32",
    )
    k8s(store, _doc(tmp_path / "nodes.json", mig))
    assert store.scalar("SELECT gpus FROM nodes") == 8  # 32 devices, 4 per GPU
    pods = _doc(tmp_path / "pods.json", _pod("p1", "m1", "2026-03-01T10:10:00Z"))
    result = k8s(store, pods, snapshot_time=datetime(2026, 3, 1, 10, 15))
    assert result.rejected == 0
    # one 1g.20gb device of a GPU that holds 4: a quarter, as when the node is in the call
    assert store.scalar("SELECT gpus FROM allocations WHERE alloc_id = 'p1'") == 0.25


def test_a_bound_gpu_pod_that_counts_nothing_is_a_reject(tmp_path: Path) -> None:
    from fleetaudit.inputs.ingest.kubernetes import KubernetesOptions, map_snapshots, read_snapshots

    # a node stored as MIG single without its product: the device's share is unknown
    stored = {
        "node_id": "m1",
        "gpus": 8,
        "gpu_sharing": "mig-single",
        "snapshot_time": datetime(2026, 3, 1, 10),
    }
    pods = _doc(tmp_path / "pods.json", _pod("p1", "m1", "2026-03-01T10:10:00Z"))
    snaps, _ = read_snapshots([pods], datetime(2026, 3, 1, 10, 15))
    frames = map_snapshots(snaps, KubernetesOptions(), stored_nodes={"m1": stored})
    (row,) = frames["allocations"].iter_rows(named=True)
    assert row["alloc_id"] == "p1"
    assert row["_reject_reason"] == (
        "nvidia.com/gpu on node m1 counts no physical GPU (node GPU sharing unknown)"
    )


def test_pending_pods_take_the_setup_of_the_nodes_they_select(
    store: Store, tmp_path: Path
) -> None:
    beat = "2026-03-01T10:00:00Z"
    t4 = _gpu_node("t4", beat, {"nvidia.com/gpu.product": "Tesla-T4-SHARED",
                                "nvidia.com/gpu.count": "4", "nvidia.com/gpu.replicas": "4"},
                   gpus="16")
    h100 = _gpu_node("h1", beat, {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    on_t4 = _pod("want-t4", None, beat, nodeSelector={"nvidia.com/gpu.product": "Tesla-T4-SHARED"})
    anywhere = _pod("any", None, beat)
    bound = _pod("bound", "t4", beat)
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"uid": "wl", "name": "wl", "namespace": "ns", "creationTimestamp": beat},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {
            "spec": {**on_t4["spec"]}}}]},
        "status": {},
    }
    result = k8s(store, _doc(tmp_path / "a.json", t4, h100, on_t4, anywhere, bound, workload))
    reqs = rows(store, "requests", "request_id")
    # a T4 replica is a quarter of a GPU, pending as bound
    assert reqs["want-t4"]["gpus"] == 0.25
    assert reqs["wl"]["gpus"] == 0.25  # its pod set's template selects the T4 too
    assert store.scalar("SELECT gpus FROM allocations") == 0.25
    # no selection: a T4 quarter or a whole H100, counted whole and said in the summary
    assert reqs["any"]["gpus"] == 1.0
    assert any("1 pending pod(s)" in n for n in result.notes)


def test_multi_device_shares_are_a_row_per_gpu(tmp_path: Path) -> None:
    hami = _gpu_node("hami", "2026-03-01T10:00:00Z", {"nvidia.com/gpu.count": "8"}, gpus="80")
    hami["metadata"]["annotations"] = {"hami.io/node-nvidia-register": "GPU-0,..."}
    vgpus = _pod("hp", "hami", "2026-03-01T09:00:00Z", gpus="2")
    vgpus["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpucores"] = "30"
    kai = _pod("kp", "plain", "2026-03-01T09:00:00Z")
    del kai["spec"]["containers"][0]["resources"]
    kai["metadata"]["annotations"] = {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}
    plain = _gpu_node("plain", "2026-03-01T10:00:00Z")
    first = _doc(tmp_path / "a.json", hami, plain, vgpus, kai)
    second = json.loads(first.read_text())
    for node in second["items"][:2]:
        node["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-03-01T10:30:00Z"
    second = _doc(tmp_path / "b.json", *second["items"])
    with open_store(tmp_path / "one.duckdb") as one, open_store(tmp_path / "two.duckdb") as two:
        k8s(one, first, second)
        k8s(two, first)
        k8s(two, second)  # the stored rows of the first call are joined again, not doubled
        for store in (one, two):
            got = store.sql(
                "SELECT alloc_id, job_id, gpus, end_time FROM allocations ORDER BY alloc_id"
            ).rows()
            # HAMi: 2 vGPUs at 30 % are 0.3 on each of two GPUs; KAI: halves of 2 GPUs
            assert got == [
                ("hp#0", "hp", pytest.approx(0.3), None),
                ("hp#1", "hp", pytest.approx(0.3), None),
                ("kp#0", "kp", 0.5, None),
                ("kp#1", "kp", 0.5, None),
            ]


def test_finished_pods_listed_again_are_read_back_by_key(tmp_path: Path) -> None:
    """A finished pod that later snapshots still list (the garbage collector keeps it) is
    a closed row that a call reads back by its id, a pod stored as a row per GPU by its
    first (``hp#0``): one call per snapshot gives the rows of one call for all, none
    doubled, its end kept."""
    hami = _gpu_node("hami", "2026-03-01T10:00:00Z", {"nvidia.com/gpu.count": "8"}, gpus="80")
    hami["metadata"]["annotations"] = {"hami.io/node-nvidia-register": "GPU-0,..."}
    split = _pod("hp", "hami", "2026-03-01T09:00:00Z", gpus="2")
    split["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpucores"] = "30"
    whole = _pod("wp", "hami", "2026-03-01T09:00:00Z")
    docs = [_doc(tmp_path / "0.json", hami, split, whole)]
    for n, beat in enumerate(("10:30", "11:00", "11:30"), 1):
        node = json.loads(json.dumps(hami))
        node["status"]["conditions"][0]["lastHeartbeatTime"] = f"2026-03-01T{beat}:00Z"
        pods = json.loads(json.dumps([split, whole]))
        for pod in pods:  # finished at 10:20, listed again by every later snapshot
            pod["status"]["phase"] = "Succeeded"
            pod["status"]["containerStatuses"] = [{"name": "c", "state": {"terminated": {
                "finishedAt": "2026-03-01T10:20:00Z", "exitCode": 0}}}]  # fmt: skip
        docs.append(_doc(tmp_path / f"{n}.json", node, *pods))
    with open_store(tmp_path / "one.duckdb") as one, open_store(tmp_path / "apart.duckdb") as apart:
        k8s(one, *docs)
        for doc in docs:
            k8s(apart, doc)
        for store in (one, apart):
            got = store.sql(
                "SELECT alloc_id, first_seen, end_time, end_censored, last_seen FROM allocations "
                "ORDER BY alloc_id"
            ).rows()
            first, end = datetime(2026, 3, 1, 10), datetime(2026, 3, 1, 10, 20)
            last = datetime(2026, 3, 1, 11, 30)
            assert got == [
                ("hp#0", first, end, False, last),
                ("hp#1", first, end, False, last),
                ("wp", first, end, False, last),
            ]


def test_a_node_a_later_snapshot_omits_is_down(tmp_path: Path) -> None:
    t10, t11, t12 = "2026-03-01T10:00:00Z", "2026-03-01T11:00:00Z", "2026-03-01T12:00:00Z"
    a = _doc(tmp_path / "a.json", _gpu_node("keep", t10), _gpu_node("scaled", t10))
    b = _doc(tmp_path / "b.json", _gpu_node("keep", t11))
    c = _doc(tmp_path / "c.json", _gpu_node("keep", t12))
    with open_store(tmp_path / "one.duckdb") as one, open_store(tmp_path / "two.duckdb") as two:
        k8s(one, a, b, c)
        for doc in (a, b, c):
            k8s(two, doc)
        for store in (one, two):
            got = store.sql(
                "SELECT node_id, health, snapshot_time, absent_since FROM nodes ORDER BY node_id"
            ).rows()
            # "scaled" was last listed at 10:00 and missing from the 11:00 listing on
            assert got == [
                ("keep", "healthy", datetime(2026, 3, 1, 12), None),
                ("scaled", "down", datetime(2026, 3, 1, 10), datetime(2026, 3, 1, 11)),
            ]


def test_an_older_snapshot_after_a_newer_one_reopens_no_workload(store: Store) -> None:
    k8s(store, SNAP3)  # 11:00: the llm Workload is admitted (10:45)
    k8s(store, SNAP2)  # 10:30, ingested late: it was still pending then
    wl = rows(store, "requests", "request_id")["uid-wl-llm"]
    assert (wl["start_time"], wl["left_queue"], wl["last_seen"]) == (
        datetime(2026, 3, 1, 10, 45),
        "started",
        T3,
    )


def test_stored_rows_are_not_counted_as_rows_of_a_later_file(store: Store, tmp_path: Path) -> None:
    t10, t11 = "2026-03-01T10:00:00Z", "2026-03-01T11:00:00Z"
    first = _doc(
        tmp_path / "a.json",
        _gpu_node("n1", t10),
        _pod("old", "n1", "2026-03-01T09:00:00Z"),
        _pod("wait", None, "2026-03-01T09:30:00Z"),
    )
    k8s(store, first)
    # 11:00 lists a new pod only: "old" ends (censored), "wait" vanishes; nothing else
    second = _doc(tmp_path / "b.json", _gpu_node("n1", t11), _pod("new", "n1", t10))
    result = k8s(store, second)
    counts = {t.table: (t.read, t.new, t.replaced) for t in result.tables}
    # allocations: "new" is read; "old" is rewritten because it ends; requests: "wait" closes
    assert counts["allocations"] == (2, 1, 1)
    assert counts["requests"] == (1, 0, 1)
    # a third call of the same second snapshot changes no stored row: only its own rows
    result = k8s(store, second)
    counts = {t.table: (t.read, t.new, t.replaced) for t in result.tables}
    assert counts["allocations"] == (1, 0, 1)
    assert "requests" not in counts or counts["requests"] == (0, 0, 0)


def test_the_export_time_of_a_snapshot_store_is_the_snapshot(tmp_path: Path) -> None:
    from fleetaudit.api import export_time

    # the newest event is the 9:00 bind; the snapshot is at 10:00 (the heartbeat)
    doc = _doc(
        tmp_path / "a.json",
        _gpu_node("n1", "2026-03-01T10:00:00Z"),
        _pod("p1", "n1", "2026-03-01T09:00:00Z"),
    )
    with open_store(tmp_path / "k.duckdb") as store:
        k8s(store, doc)
        assert export_time(store) == datetime(2026, 3, 1, 10)


def test_a_started_request_is_written_again_only_when_a_bind_moves_it(
    store: Store, tmp_path: Path
) -> None:
    """A call re-reads a closed request only where its snapshots' binds may give it another
    start: pod p waits at 10:00, is bound at 10:05 (seen at 10:10); a call at 10:20 seeing
    the same bind leaves the request as stored, one whose pod says 10:07 moves its start
    (the first later snapshot's bind, as a call of all the snapshots would not: it keeps
    the first, 10:05)."""
    node = _gpu_node("n1", "2026-03-01T10:00:00Z")
    waiting = _pod("p", None, "2026-03-01T09:55:00Z")
    k8s(store, _doc(tmp_path / "a.json", node, waiting))
    bound = _pod("p", "n1", "2026-03-01T10:05:00Z")
    bound["metadata"]["creationTimestamp"] = "2026-03-01T09:55:00Z"
    k8s(store, _doc(tmp_path / "b.json", _gpu_node("n1", "2026-03-01T10:10:00Z"), bound))
    (req,) = store.sql("SELECT * FROM requests").iter_rows(named=True)
    assert (req["start_time"], req["left_queue"]) == (datetime(2026, 3, 1, 10, 5), "started")
    same = k8s(store, _doc(tmp_path / "c.json", _gpu_node("n1", "2026-03-01T10:20:00Z"), bound))
    assert "requests" not in {t.table for t in same.tables}  # nothing of it to write
    moved = copy.deepcopy(bound)
    moved["status"]["conditions"][0]["lastTransitionTime"] = "2026-03-01T10:07:00Z"
    later = k8s(store, _doc(tmp_path / "d.json", _gpu_node("n1", "2026-03-01T10:30:00Z"), moved))
    assert [(t.table, t.replaced) for t in later.tables if t.table == "requests"] == [
        ("requests", 1)
    ]
    (req,) = store.sql("SELECT * FROM requests").iter_rows(named=True)
    assert (req["start_time"], req["left_queue"]) == (datetime(2026, 3, 1, 10, 7), "started")
