"""Physical GPUs of Kubernetes nodes as clusters really report them.

The real node objects of ../shared/realsamples/k8s/ (or $FLEETAUDIT_REALSAMPLES/k8s) are
read from there, never copied: each sample's SOURCE.txt says where it came from and what
a correct reading gives, and each test below holds that reading. Invented nodes work the
inference rules by hand.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from fleetaudit.inputs.ingest import IngestOptions, ingest
from fleetaudit.inputs.ingest.kubernetes import gpu_setup, mig_gpu_bounds, pod_gpus
from fleetaudit.model.store import Store
from tests.conftest import REPO

AT = datetime(2026, 1, 1)


def _realsamples() -> Path | None:
    env = os.environ.get("FLEETAUDIT_REALSAMPLES")
    for candidate in [*([Path(env)] if env else []), REPO.parent / "shared" / "realsamples"]:
        if (candidate / "k8s").is_dir():
            return candidate / "k8s"
    return None


SAMPLES = _realsamples()
needs_samples = pytest.mark.skipif(
    SAMPLES is None, reason="../shared/realsamples is absent (set FLEETAUDIT_REALSAMPLES)"
)


def _nodes(store: Store, sample: str, file: str = "nodes.json") -> dict[str, dict[str, Any]]:
    assert SAMPLES is not None
    ingest(store, [SAMPLES / sample / file], IngestOptions(format="kubernetes", snapshot_time=AT))
    return {r["node_id"]: r for r in store.sql("SELECT * FROM nodes").iter_rows(named=True)}


@needs_samples
@pytest.mark.parametrize(
    ("sample", "file", "node", "model", "gpus", "sharing", "replicas", "inferred"),
    [
        # capacity 1, allocatable 0 while the device plugin restarts: one T4
        ("K1_microk8s_t4_before_ts", "nodes.json", "node1", "T4", 1, "none", 1, False),
        ("K2_microk8s_t4_v100_after_ts", "nodes.json", "node1", "T4", 1, "time-slicing", 4, False),
        ("K2_microk8s_t4_v100_after_ts", "nodes.json", "node2", "V100 PCIE 16GB", 1,
         "time-slicing", 4, False),
        ("K3_nvdocs_h100_mig_mixed", "nodes.json", "s4124-0073", "H100 80GB HBM3", 1,
         "mig-mixed", 1, False),
        # no gpu.count label: 7 whole + one H20 cut into 4 devices (1 to 4 GPUs; the fewest)
        ("K4_h20_mig_mixed_uat", "nodes.json", "zkj-pa-uat-gpu-004", "H20", 8, "mig-mixed", 1,
         True),
        ("K4_h20_mig_mixed_uat", "nodes_with_count.json", "zkj-pa-uat-gpu-004", "H20", 8,
         "mig-mixed", 1, False),
        ("K5_openshift_g4dn_t4_shared", "nodes.json", "g4dn-xlarge-worker", "T4", 1,
         "time-slicing", 8, False),
        # gpu.count 7 counts MIG devices under the single strategy: 7 x 1g.10gb is one GPU
        ("K6_a100pcie_mig_single", "nodes.json", "a100-vm", "A100 80GB PCIE", 1, "mig-single", 1,
         False),
        ("K7_a100pcie_mig_mixed", "nodes.json", "a100-vm", "A100 80GB PCIE", 1, "mig-mixed", 1,
         False),
        ("K8_lke_rtx4000ada", "nodes.json", "lke529760-766837-0a634ab30000",
         "RTX 4000 ADA GENERATION", 1, "none", 1, False),
        ("K9_nvdocs_t4_renamebydefault", "nodes.json", "t4-node", "T4", 4, "time-slicing", 4,
         False),
        ("K9_nvdocs_t4_renamebydefault", "nodes_renamefalse.json", "t4-node", "T4", 4,
         "time-slicing", 4, False),
        # the standalone device plugin, no labels: 2 whole + 4 x 3g.40gb (2 per GPU) = 4
        ("K10_k3s_a100_plugin_only_mixed", "nodes.json", "k3s-a100", "unknown", 4, "mig-mixed", 1,
         True),
    ],
)  # fmt: skip
def test_real_nodes_read_as_their_source_says(
    store: Store, sample: str, file: str, node: str, model: str, gpus: int, sharing: str,
    replicas: int, inferred: bool,
) -> None:  # fmt: skip
    row = _nodes(store, sample, file)[node]
    assert (row["gpu_model"], row["gpus"], row["gpu_sharing"], row["gpu_replicas"]) == (
        model, gpus, sharing, replicas,
    )  # fmt: skip
    assert (row["gpus_inferred"] is not None) is inferred, row["gpus_inferred"]


@needs_samples
def test_real_node_details(store: Store) -> None:
    h20 = _nodes(store, "K4_h20_mig_mixed_uat")["zkj-pa-uat-gpu-004"]
    assert (h20["cpus"], round(h20["memory_gib"], 2)) == (128, 1007.26)  # 1056189400Ki
    assert "1 to 4 GPUs" in h20["gpus_inferred"]
    t4 = _nodes(store, "K5_openshift_g4dn_t4_shared")["g4dn-xlarge-worker"]
    # the label says 16106127360: bytes from an older GFD, 15360 MiB
    assert (t4["gpu_memory_mib"], t4["cpus"], round(t4["memory_gib"], 2)) == (15360, 4, 15.36)
    k1 = _nodes(store, "K1_microk8s_t4_before_ts")["node1"]
    assert k1["health"] == "degraded"  # 1 installed, 0 allocatable
    k9 = _nodes(store, "K9_nvdocs_t4_renamebydefault")["t4-node"]
    assert k9["health"] == "healthy"  # nvidia.com/gpu 0 allocatable by design (renamed)


@needs_samples
def test_shared_gpus_without_a_replica_count_are_never_counted_as_physical(
    store: Store,
) -> None:
    """K11: a p5 (8 x H100) under MIG and time-slicing, no labels: nvidia.com/gpu 0,
    nvidia.com/gpu.shared 128. The node alone cannot say 8 (SOURCE.txt takes it from the
    pull request's text): it is counted as the fewest GPUs it can have (1), flagged, and
    never as the 128 replicas; with the instance's count (Karpenter's label) it is 8."""
    assert SAMPLES is not None
    row = _nodes(store, "K11_bottlerocket_p5_mig_timeslice")["ip-172-31-48-208"]
    assert (row["gpus"], row["gpu_replicas"], row["gpu_replicas_inferred"]) == (1, 128, True)
    assert "1 to 64 physical GPU(s)" in row["gpus_inferred"]
    node = json.loads((SAMPLES / "K11_bottlerocket_p5_mig_timeslice" / "nodes.json").read_text())
    item = node["items"][0]
    item["metadata"]["labels"]["karpenter.k8s.aws/instance-gpu-count"] = "8"
    setup = gpu_setup(item)
    assert (setup.physical, setup.replicas, setup.inferred) == (8, 16, None)


def _node(labels: dict[str, str], capacity: dict[str, str]) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": "n", "labels": labels},
            "status": {"capacity": capacity, "allocatable": capacity}}  # fmt: skip


@pytest.mark.parametrize(
    ("labels", "capacity", "physical", "inferred"),
    [
        # 8 x 1g.10gb + 2 x 3g.40gb on 80 GB GPUs: compute 14 / 7 = 2, memory 16 / 8 = 2,
        # 1g: 8 / 7 -> 2, 3g: 2 / 2 = 1: the fewest is 2, the most 10
        ({"nvidia.com/gpu.memory": "81920"},
         {"nvidia.com/mig-1g.10gb": "8", "nvidia.com/mig-3g.40gb": "2"}, 2, True),
        # mig.config all-balanced: every GPU is cut alike, so the fewest is the count
        ({"nvidia.com/mig.config": "all-balanced", "nvidia.com/gpu.memory": "81920"},
         {"nvidia.com/mig-1g.10gb": "4", "nvidia.com/mig-2g.20gb": "2",
          "nvidia.com/mig-3g.40gb": "2"}, 2, False),
        # one device of each of 7 x 1g: fewest = most = 1 -> counted, not inferred
        ({}, {"nvidia.com/mig-7g.80gb": "3"}, 3, False),
        # shared with the GKE replica label: 12 / 3 = 4
        ({"cloud.google.com/gke-max-shared-clients-per-gpu": "3"},
         {"nvidia.com/gpu.shared": "12"}, 4, False),
        # renameByDefault false, product -SHARED, no replica or count label: unknown
        ({"nvidia.com/gpu.product": "Tesla-T4-SHARED"}, {"nvidia.com/gpu": "8"}, 1, True),
    ],
)  # fmt: skip
def test_inferred_counts(
    labels: dict[str, str], capacity: dict[str, str], physical: int, inferred: bool
) -> None:
    setup = gpu_setup(_node(labels, capacity))
    assert setup.physical == physical
    assert (setup.inferred is not None) is inferred


def test_mig_bounds_worked_by_hand() -> None:
    assert mig_gpu_bounds({(1, 10): 14}, 80.0, 7) == (2, 14)  # 7 per GPU
    assert mig_gpu_bounds({(2, 20): 24}, 80.0, 7) == (8, 24)  # 3 per GPU (compute 48/7 = 7)
    assert mig_gpu_bounds({(1, 20): 4}, 80.0, 7) == (1, 4)  # 1g.20gb: 2 memory slices each
    assert mig_gpu_bounds({(1, 6): 5}, 24.0, 4) == (2, 5)  # A30: 4 slices


def test_a_shared_replica_of_unknown_count_is_the_smallest_share() -> None:
    setup = gpu_setup(_node({}, {"nvidia.com/gpu.shared": "128"}))
    gpus, resource = pod_gpus({"nvidia.com/gpu.shared": Decimal(1)}, {}, setup)
    assert (gpus, resource) == (1 / 128, "nvidia.com/gpu.shared")


def test_a_fractional_extended_resource_is_refused(store: Store, tmp_path: Path) -> None:
    """Kubernetes refuses nvidia.com/gpu: "1.5" (extended resources are whole): a reject
    naming the object and the field, never 1.5 GPUs."""
    doc = {"kind": "List", "items": [
        _node({}, {"nvidia.com/gpu": "8", "cpu": "8"}),
        {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "uid": "u1",
                                     "creationTimestamp": "2026-01-01T00:00:00Z"},
         "spec": {"nodeName": "n", "containers": [
             {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1.5"}}}]},
         "status": {"phase": "Running"}},
    ]}  # fmt: skip
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    result = ingest(store, [path], IngestOptions(format="kubernetes", snapshot_time=AT))
    assert result.rejected == 1
    reject = result.rejects.row(0, named=True)
    assert reject["column"] == "gpus" and "not a whole number" in reject["reason"]
    assert "nvidia.com/gpu" in reject["reason"] and "container c" in reject["reason"]


def test_pods_on_a_node_of_unknown_replicas_hold_the_smallest_share(
    store: Store, tmp_path: Path
) -> None:
    """A bound and a pending pod asking nvidia.com/gpu.shared: 1 of a node advertising 128
    shared GPUs and no replica count: the node is 1 GPU (1 to 64), each pod 1/128 of it,
    both flagged, and the summary says so."""
    def pod(uid: str, node: str | None) -> dict[str, Any]:
        return {"kind": "Pod", "metadata": {"uid": uid, "name": uid, "namespace": "ns",
                                            "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {**({"nodeName": node} if node else {}), "containers": [
                    {"name": "c", "resources": {"limits": {"nvidia.com/gpu.shared": "1"}}}]},
                "status": {"phase": "Running" if node else "Pending"}}  # fmt: skip

    node = _node({}, {"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "128", "cpu": "8"})
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"kind": "List", "items": [node, pod("a", "n"), pod("q", None)]}))
    result = ingest(store, [path], IngestOptions(format="kubernetes", snapshot_time=AT))
    (gpus, flag), = store.sql("SELECT gpus, gpus_inferred FROM allocations").rows()
    assert gpus == pytest.approx(1 / 128) and "1/128" in flag
    (gpus, flag), = store.sql("SELECT gpus, gpus_inferred FROM requests").rows()
    assert gpus == pytest.approx(1 / 128) and "1/128" in flag
    assert any("hold shared GPUs of nodes whose replicas are unknown" in n for n in result.notes)
    assert any("count their physical GPUs by inference" in n for n in result.notes)
