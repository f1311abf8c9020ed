"""``--format kubernetes``: a call whose documents come from two clusters is refused by name
unless ``--allow-mixed`` (docs/formats/kubernetes.md, "Several clusters").

The documents are invented in the shape kubectl writes (a ``v1`` ``List`` whose
``metadata`` is ``{"resourceVersion": ""}``), with the identities the upstream projects
document: eksctl's ``alpha.eksctl.io/cluster-name`` and AKS's ``kubernetes.azure.com/cluster``
node labels, Cluster API's ``cluster.x-k8s.io/cluster-name``/``-namespace`` node annotations,
``spec.providerID`` as the GCE, Azure and AWS cloud providers write it, and kubeadm's
``kube-apiserver.advertise-address.endpoint`` annotation on the API server's pod.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fleetaudit.cli import app
from fleetaudit.inputs.ingest.kubernetes_clusters import (
    KUBEADM_ENDPOINT,
    SERVER_KEY,
    node_identity,
    pod_identity,
)
from fleetaudit.model.store import open_store
from tests.conftest import write
from tests.test_kubernetes import _gpu_node, _pod

runner = CliRunner()
BEAT_A, BEAT_B = "2026-03-01T10:00:00Z", "2026-03-01T10:00:20Z"


def _list(path: Path, *items: Any, server: str | None = None) -> Path:
    meta: dict[str, str] = {"resourceVersion": ""}
    if server is not None:
        meta[SERVER_KEY] = server
    return write(path, json.dumps({"apiVersion": "v1", "kind": "List", "items": list(items),
                                   "metadata": meta}))  # fmt: skip


def _node(name: str, beat: str = BEAT_A, labels: dict[str, str] | None = None,
          annotations: dict[str, str] | None = None, provider_id: str | None = None) -> Any:  # fmt: skip
    node = _gpu_node(name, beat, {"nvidia.com/gpu.count": "8", **(labels or {})})
    if annotations:
        node["metadata"]["annotations"] = annotations
    if provider_id:
        node["spec"]["providerID"] = provider_id
    return node


def _apiserver(node: str, endpoint: str) -> Any:
    """The mirror pod of a kubeadm cluster's API server, as ``kubectl get pods -A`` lists it."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"kube-apiserver-{node}", "namespace": "kube-system",
                     "uid": f"uid-apiserver-{node}", "creationTimestamp": "2026-02-01T00:00:00Z",
                     "annotations": {KUBEADM_ENDPOINT: endpoint},
                     "labels": {"component": "kube-apiserver", "tier": "control-plane"}},
        "spec": {"nodeName": node, "priorityClassName": "system-node-critical",
                 "containers": [{"name": "kube-apiserver",
                                 "resources": {"requests": {"cpu": "250m"}}}]},
        "status": {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True",
             "lastTransitionTime": "2026-02-01T00:00:01Z"}]},
    }  # fmt: skip


def ingest(db: Path, *args: Any) -> Any:
    return runner.invoke(app, ["ingest", "--db", str(db), "--format", "kubernetes",
                               *map(str, args)])  # fmt: skip


def eks(name: str, cluster: str, beat: str = BEAT_A) -> Any:
    return _node(name, beat, labels={"alpha.eksctl.io/cluster-name": cluster},
                 provider_id=f"aws:///us-east-1a/i-{name}")  # fmt: skip


def test_two_clusters_are_refused_by_name_and_nothing_is_written(tmp_path: Path) -> None:
    db = tmp_path / "fleet.duckdb"
    first = _list(tmp_path / "before.json", eks("ip-10-0-0-9", "gpu-a"))
    assert ingest(db, first).exit_code == 0
    stored = db.read_bytes()
    a = _list(tmp_path / "a.json", eks("ip-10-0-1-1", "gpu-a"), eks("ip-10-0-1-2", "gpu-a"),
              _pod("pa", "ip-10-0-1-1", "2026-03-01T09:00:00Z"))  # fmt: skip
    b = _list(tmp_path / "b.json", eks("ip-10-9-1-1", "gpu-b", BEAT_B),
              _pod("pb", "ip-10-9-1-1", "2026-03-01T09:00:00Z"))  # fmt: skip
    result = ingest(db, a, b)
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line == (
        f"fleetaudit: error: {b}: not the cluster of {a} (eksctl cluster gpu-b here, gpu-a "
        "there, and no node in common): nothing was written; --allow-mixed loads them "
        "together anyway"
    )
    assert db.read_bytes() == stored


def test_allow_mixed_loads_them_and_says_so(tmp_path: Path) -> None:
    db = tmp_path / "fleet.duckdb"
    a = _list(tmp_path / "a.json", eks("ip-10-0-1-1", "gpu-a"),
              _pod("pa", "ip-10-0-1-1", "2026-03-01T09:00:00Z"))  # fmt: skip
    b = _list(tmp_path / "b.json", eks("ip-10-9-1-1", "gpu-b"),
              _pod("pb", "ip-10-9-1-1", "2026-03-01T09:00:00Z"))  # fmt: skip
    # one moment of both clusters: the same heartbeat, so one snapshot
    result = ingest(db, a, b, "--allow-mixed")
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if "--allow-mixed" in line]
    assert notes == [
        f"note: --allow-mixed: loaded nodes of more than one cluster ({a}: eksctl cluster "
        f"gpu-a; {b}: gpu-b)"
    ]
    with open_store(db, read_only=True) as store:
        assert dict(store.sql("SELECT node_id, health FROM nodes").rows()) == {
            "ip-10-0-1-1": "healthy", "ip-10-9-1-1": "healthy"
        }  # fmt: skip
        assert store.scalar("SELECT count(*) FROM allocations WHERE end_time IS NULL") == 2


def test_allow_mixed_at_two_times_warns_what_it_does(tmp_path: Path) -> None:
    # the second snapshot lists its own cluster only: the first cluster's node counts as
    # gone from then on, and the note says why and what to do instead
    a = _list(tmp_path / "a.json", eks("ip-10-0-1-1", "gpu-a"))
    b = _list(tmp_path / "b.json", eks("ip-10-9-1-1", "gpu-b", BEAT_B))
    result = ingest(tmp_path / "fleet.duckdb", a, b, "--allow-mixed")
    assert result.exit_code == 0, result.output
    (note,) = [line for line in result.stderr.splitlines() if "--allow-mixed" in line]
    assert note.endswith(
        "they are snapshots of different times, and a snapshot stands for every node and pod "
        "there is, so each takes the other cluster's as gone: give one moment's documents of "
        "all the clusters together, with --snapshot-time"
    )
    with open_store(tmp_path / "fleet.duckdb", read_only=True) as store:
        assert store.scalar("SELECT health FROM nodes WHERE node_id = 'ip-10-0-1-1'") == "down"


def test_snapshot_time_makes_one_snapshot_of_one_document_per_cluster(tmp_path: Path) -> None:
    a = _list(tmp_path / "a.json", eks("ip-10-0-1-1", "gpu-a"),
              _pod("pa", "ip-10-0-1-1", "2026-03-01T09:00:00Z"))  # fmt: skip
    b = _list(tmp_path / "b.json", eks("ip-10-9-1-1", "gpu-b", BEAT_B),
              _pod("pb", "ip-10-9-1-1", "2026-03-01T09:00:00Z"))  # fmt: skip
    db = tmp_path / "fleet.duckdb"
    at = ("--snapshot-time", "2026-03-01T10:01:00")
    assert "not the cluster of" in ingest(db, a, b, *at).stderr  # refused without the flag
    result = ingest(db, a, b, *at, "--allow-mixed")
    assert result.exit_code == 0, result.output
    assert f"note: snapshot 2026-03-01T10:01:00Z (--snapshot-time): {a}, {b}" in result.stderr
    with open_store(db, read_only=True) as store:
        assert store.scalar("SELECT count(DISTINCT snapshot_time) FROM nodes") == 1
        assert store.scalar("SELECT max(snapshot_time) FROM nodes") == datetime(2026, 3, 1, 10, 1)
        assert store.scalar("SELECT count(*) FROM allocations WHERE end_time IS NULL") == 2
    # two documents of one cluster listing pods are still two moments, mixed or not
    a2 = _list(tmp_path / "a2.json", eks("ip-10-0-1-1", "gpu-a"),
               _pod("pa2", "ip-10-0-1-1", "2026-03-01T09:30:00Z"))  # fmt: skip
    result = ingest(tmp_path / "other.duckdb", a, a2, b, *at, "--allow-mixed")
    assert result.exit_code == 2
    assert "--snapshot-time makes one snapshot, but 3 documents list Pods" in result.stderr


@pytest.mark.parametrize(
    ("why", "first", "second"),
    [
        # an autoscaler replaced every node: no node in common, but one cluster
        ("same cluster, new nodes", [eks("ip-1", "gpu-a")], [eks("ip-2", "gpu-a", BEAT_B)]),
        # two names for one cluster (say a renamed label) but the same nodes
        ("shared node", [eks("ip-1", "gpu-a")], [eks("ip-1", "gpu-a2", BEAT_B)]),
        # nothing says which cluster: never refused
        ("no identity", [_node("n1")], [_node("n2", BEAT_B)]),
        # different kinds of identity say nothing against each other
        ("unrelated identities", [eks("ip-1", "gpu-a")],
         [_node("n2", BEAT_B, provider_id="gce://proj-b/us-central1-a/n2")]),
        # a document of nodes and one of its pods alone: the pods name its nodes
        ("nodes and their pods", [eks("ip-1", "gpu-a")],
         [_apiserver("ip-1", "10.0.0.2:6443"), _pod("p1", "ip-1", "2026-03-01T09:00:00Z")]),
        # an HA control plane rolled one API server: the endpoints still meet
        ("a rolled control plane",
         [_node("cp-1"), _apiserver("cp-1", "10.0.0.2:6443"), _apiserver("cp-2", "10.0.0.3:6443")],
         [_node("cp-9", BEAT_B), _apiserver("cp-9", "10.0.0.9:6443"),
          _apiserver("cp-2", "10.0.0.3:6443")]),
    ],
)
def test_one_cluster_is_not_refused(tmp_path: Path, why: str, first: Any, second: Any) -> None:
    a, b = _list(tmp_path / "a.json", *first), _list(tmp_path / "b.json", *second)
    result = ingest(tmp_path / "fleet.duckdb", a, b)
    assert result.exit_code == 0, (why, result.output)
    assert "--allow-mixed" not in result.stderr


@pytest.mark.parametrize(
    ("first", "second", "said"),
    [
        (
            {"labels": {"kubernetes.azure.com/cluster": "MC_rg_gpu-a_westeurope"}},
            {"labels": {"kubernetes.azure.com/cluster": "MC_rg_gpu-b_westeurope"}},
            "AKS cluster MC_rg_gpu-b_westeurope here, MC_rg_gpu-a_westeurope there",
        ),
        (
            {"annotations": {"cluster.x-k8s.io/cluster-name": "gpu-a",
                             "cluster.x-k8s.io/cluster-namespace": "fleet"}},
            {"annotations": {"cluster.x-k8s.io/cluster-name": "gpu-b",
                             "cluster.x-k8s.io/cluster-namespace": "fleet"}},
            "Cluster API cluster fleet/gpu-b here, fleet/gpu-a there",
        ),
        (
            {"provider_id": "gce://proj-a/us-central1-a/gke-a-pool-1-abcd"},
            {"provider_id": "gce://proj-b/us-central1-a/gke-b-pool-1-abcd"},
            "GCE project proj-b here, proj-a there",
        ),
        (
            {"provider_id": "azure:///subscriptions/S1/resourceGroups/MC_rg_a_westeurope/providers/"
                            "Microsoft.Compute/virtualMachineScaleSets/aks-gpu-1/virtualMachines/0"},
            {"provider_id": "azure:///subscriptions/S1/resourceGroups/MC_rg_b_westeurope/providers/"
                            "Microsoft.Compute/virtualMachineScaleSets/aks-gpu-1/virtualMachines/0"},
            "Azure resource group s1/mc_rg_b_westeurope here, s1/mc_rg_a_westeurope there",
        ),
    ],
)  # fmt: skip
def test_each_node_identity_tells_clusters_apart(
    tmp_path: Path, first: dict[str, Any], second: dict[str, Any], said: str
) -> None:
    a = _list(tmp_path / "a.json", _node("a-1", **first))
    b = _list(tmp_path / "b.json", _node("b-1", BEAT_B, **second))
    result = ingest(tmp_path / "fleet.duckdb", a, b)
    assert result.exit_code == 2, result.output
    assert f"{b}: not the cluster of {a} ({said}, and no node in common)" in result.stderr


def test_api_servers_tell_clusters_apart(tmp_path: Path) -> None:
    # kubeadm clusters: the API server pods' advertised endpoints
    a = _list(tmp_path / "a.json", _node("cp-a"), _apiserver("cp-a", "10.0.0.2:6443"))
    b = _list(tmp_path / "b.json", _node("cp-b", BEAT_B), _apiserver("cp-b", "10.1.0.2:6443"))
    result = ingest(tmp_path / "fleet.duckdb", a, b)
    assert result.exit_code == 2
    assert "(kubeadm API server 10.1.0.2:6443 here, 10.0.0.2:6443 there" in result.stderr
    # snapshots the collector took (or a user wrote so): the List's metadata
    c = _list(tmp_path / "c.json", _node("n-1"), server="https://gpu-a.example.org:6443")
    d = _list(tmp_path / "d.json", _node("m-1", BEAT_B), server="https://gpu-b.example.org:6443")
    result = ingest(tmp_path / "fleet.duckdb", c, d)
    assert result.exit_code == 2
    assert (
        f"{d}: not the cluster of {c} (API server https://gpu-b.example.org:6443 here, "
        "https://gpu-a.example.org:6443 there, and no node in common)"
    ) in result.stderr


def test_a_folder_of_two_clusters_names_the_first_of_each(tmp_path: Path) -> None:
    folder = tmp_path / "snapshots"
    for i, beat in enumerate(("2026-03-01T10:00:00Z", "2026-03-01T10:10:00Z")):
        _list(folder / f"a{i}.json", eks("ip-10-0-1-1", "gpu-a", beat))
        _list(folder / f"b{i}.json", eks("ip-10-9-1-1", "gpu-b", beat))
    result = ingest(tmp_path / "fleet.duckdb", folder)
    assert result.exit_code == 2
    assert f"{folder / 'b0.json'}: not the cluster of {folder / 'a0.json'} " in result.stderr


def test_identities() -> None:
    node = _node("n", labels={"alpha.eksctl.io/cluster-name": "gpu-a",
                              "kubernetes.azure.com/cluster": " "},
                 annotations={"cluster.x-k8s.io/cluster-name": "c"},
                 provider_id="aws:///us-east-1a/i-0123")  # fmt: skip
    # a blank label says nothing; an AWS providerID names no account
    assert list(node_identity(node)) == [("eksctl cluster", "gpu-a"), ("Cluster API cluster", "/c")]
    assert list(pod_identity(_apiserver("cp", "10.0.0.2:6443"))) == [
        ("kubeadm API server", "10.0.0.2:6443")
    ]
    assert list(node_identity({"kind": "Node", "metadata": "bad", "spec": []})) == []


def test_one_list_of_two_clusters_is_refused(tmp_path: Path) -> None:
    # two clusters' Lists joined into one by hand: the nodes name two clusters
    joined = _list(tmp_path / "joined.json", eks("ip-10-0-1-1", "gpu-a"),
                   eks("ip-10-0-1-2", "gpu-a"), eks("ip-10-9-1-1", "gpu-b"))  # fmt: skip
    result = ingest(tmp_path / "fleet.duckdb", joined)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line == (
        f"fleetaudit: error: {joined}: lists nodes of more than one cluster (eksctl cluster "
        "gpu-a (node ip-10-0-1-1), gpu-b (node ip-10-9-1-1)): nothing was written; "
        "--allow-mixed loads them together anyway"
    )
    result = ingest(tmp_path / "fleet.duckdb", joined, "--allow-mixed")
    assert result.exit_code == 0, result.output
    assert (
        f"note: --allow-mixed: loaded nodes of more than one cluster ({joined}: eksctl cluster "
        "gpu-a (node ip-10-0-1-1), gpu-b (node ip-10-9-1-1))\n"
    ) in result.stderr
    # one cluster's nodes in two GCE projects, or its control plane's several endpoints
    one = _list(tmp_path / "one.json",
                _node("n1", provider_id="gce://proj-a/us-central1-a/n1"),
                _node("n2", provider_id="gce://proj-b/us-central1-a/n2"),
                _apiserver("n1", "10.0.0.2:6443"), _apiserver("n2", "10.0.0.3:6443"))  # fmt: skip
    assert ingest(tmp_path / "other.duckdb", one).exit_code == 0
