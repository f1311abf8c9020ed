"""``ingest --format kubernetes --kubectl``: the collector against a stand-in kubectl on PATH
(tests/standin_kubectl.py: the API server cannot run here) serving the real node objects
of ../shared/realsamples/k8s and invented snapshots; and the real kubectl client, where
installed, against a server that is not there."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fleetaudit.cli import app
from fleetaudit.core.errors import InputError
from fleetaudit.core.options import KubectlOptions
from fleetaudit.inputs.ingest.kubectl import collect
from fleetaudit.model.store import open_store
from tests.conftest import REPO, write
from tests.test_kubernetes_gpus import SAMPLES, needs_samples

runner = CliRunner()
STANDIN = Path(__file__).parent / "standin_kubectl.py"
SERVER = "https://gpu-a.example.org:6443"  # the stand-in kubeconfig's API server


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A stand-in kubectl first on PATH, serving the folder ``serve``."""
    bin_dir, serve = tmp_path / "bin", tmp_path / "serve"
    bin_dir.mkdir()
    serve.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STANDIN}" "$@"\n')
    kubectl.chmod(kubectl.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "kubectl.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN_KUBECTL_SERVE", str(serve))
    monkeypatch.setenv("STANDIN_KUBECTL_LOG", str(log))
    monkeypatch.delenv("STANDIN_KUBECTL_FAIL", raising=False)
    monkeypatch.delenv("STANDIN_KUBECTL_CRDS", raising=False)
    monkeypatch.setenv("STANDIN_KUBECTL_SERVER", SERVER)
    for name in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):  # as if not in a pod
        monkeypatch.delenv(name, raising=False)
    return {"serve": serve, "log": log, "bin": bin_dir, "db": tmp_path / "s.duckdb",
            "keep": tmp_path / "kept"}  # fmt: skip


def calls(cluster: dict[str, Path]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in cluster["log"].read_text().splitlines()]


def asked(call: dict[str, Any]) -> str:
    """The resources a ``get`` asked for."""
    return str(call["argv"][call["argv"].index("get") + 1])


def kubectl_ingest(cluster: dict[str, Path], *extra: str) -> Any:
    return runner.invoke(app, ["ingest", "--db", str(cluster["db"]), "--format", "kubernetes",
                               "--kubectl", *extra])  # fmt: skip


def _pod(uid: str, ns: str, node: str | None, gpus: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"uid": uid, "name": uid, "namespace": ns,
                     "creationTimestamp": "2026-03-01T09:00:00Z"},
        "spec": {**({"nodeName": node} if node else {}),
                 "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]},
        "status": {"phase": "Running" if node else "Pending",
                   "conditions": [{"type": "PodScheduled", "status": "True" if node else "False",
                                   "lastTransitionTime": "2026-03-01T09:00:05Z"}]},
    }  # fmt: skip


def _node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"}},
        "status": {"capacity": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8"},
                   "allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8"},
                   "conditions": [{"type": "Ready", "status": "True",
                                   "lastHeartbeatTime": "2026-03-01T09:59:00Z"}]}}  # fmt: skip


def _workload(uid: str, ns: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"uid": uid, "name": uid, "namespace": ns,
                         "creationTimestamp": "2026-03-01T09:30:00Z"},
            "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 2, "template": {
                "spec": {"containers": [{"name": "c", "resources": {
                    "requests": {"nvidia.com/gpu": "8"}}}]}}}]},
            "status": {"conditions": []}}  # fmt: skip


def _serve(cluster: dict[str, Path], *items: Any, name: str = "cluster.json") -> None:
    write(cluster["serve"] / name, json.dumps({"kind": "List", "items": list(items)}))


@needs_samples
def test_realsamples_through_kubectl_one_snapshot_at_the_call_start(
    cluster: dict[str, Path],
) -> None:
    assert SAMPLES is not None
    for sample in ("K2_microk8s_t4_v100_after_ts", "K10_k3s_a100_plugin_only_mixed"):
        shutil.copy(SAMPLES / sample / "nodes.json", cluster["serve"] / f"{sample}.json")
    before = datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0)
    result = kubectl_ingest(cluster, "--keep", str(cluster["keep"]))
    after = datetime.now(timezone.utc).replace(tzinfo=None)
    assert result.exit_code == 0, result.output
    with open_store(cluster["db"], read_only=True) as store:
        nodes = dict(store.sql("SELECT node_id, gpus FROM nodes").rows())
        (snapshot,) = {r[0] for r in store.sql("SELECT snapshot_time FROM nodes").rows()}
    assert nodes == {"node1": 1, "node2": 1, "k3s-a100": 4}  # as their SOURCE.txt say
    assert before <= snapshot <= after  # the call's start, not a heartbeat
    (kept,) = cluster["keep"].iterdir()
    assert kept.name == snapshot.strftime("%Y%m%dT%H%M%SZ") + ".json"
    kept_list = json.loads(kept.read_text())
    assert len(kept_list["items"]) == 3
    # kubectl's List, its metadata naming the kubeconfig's API server
    assert kept_list["metadata"] == {"resourceVersion": "", "fleetaudit.io/server": SERVER}
    first, server, second = calls(cluster)
    assert first["argv"][-3:] == ["api-resources", "-o", "name"]
    assert "--request-timeout=60s" in first["argv"]
    assert server["argv"][-5:] == [
        "config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}"
    ]  # fmt: skip
    assert second["argv"][-6:] == ["get", "nodes,pods", "-A", "-o", "json", "--chunk-size=500"]
    assert "--chunk-size=500" in second["argv"]


def test_crds_listed_where_served_and_never_required(cluster: dict[str, Path]) -> None:
    _serve(cluster, _node("n1"), _pod("p1", "team-a", "n1"), _pod("p2", "team-a", None),
           _workload("w1", "team-b"))  # fmt: skip
    # no Kueue on the cluster: nodes and pods only, no failure
    assert kubectl_ingest(cluster).exit_code == 0
    assert asked(calls(cluster)[-1]) == "nodes,pods"
    with open_store(cluster["db"], read_only=True) as store:
        assert store.scalar("SELECT count(*) FROM requests WHERE kind = 'Workload'") == 0
    # with Kueue and Volcano: their resources too, and the Workload is a request
    os.environ["STANDIN_KUBECTL_CRDS"] = "workloads.kueue.x-k8s.io,podgroups.scheduling.volcano.sh"
    result = kubectl_ingest(cluster)
    assert result.exit_code == 0, result.output
    assert asked(calls(cluster)[-1]) == (
        "nodes,pods,workloads.kueue.x-k8s.io,podgroups.scheduling.volcano.sh"
    )
    with open_store(cluster["db"], read_only=True) as store:
        assert store.scalar("SELECT gpus FROM requests WHERE kind = 'Workload'") == 16


def test_a_large_cluster_is_paged(cluster: dict[str, Path]) -> None:
    _serve(cluster, _node("n1"), *(_pod(f"p{i:04d}", "ns", "n1", gpus="0") for i in range(1201)))
    result = kubectl_ingest(cluster)
    assert result.exit_code == 0, result.output
    assert calls(cluster)[-1]["pages"] == {"Node": 1, "Pod": 3}  # 500 + 500 + 201


def test_namespaces_context_and_kubeconfig(cluster: dict[str, Path], tmp_path: Path) -> None:
    _serve(cluster, _node("n1"), _pod("a1", "team-a", "n1"), _pod("b1", "team-b", "n1"),
           _pod("c1", "team-c", "n1"))  # fmt: skip
    config = write(tmp_path / "kubeconfig", "apiVersion: v1\nkind: Config\n")
    result = kubectl_ingest(cluster, "--namespace", "team-a", "--namespace", "team-c",
                            "--context", "prod", "--kubeconfig", str(config),
                            "--keep", str(cluster["keep"]))  # fmt: skip
    assert result.exit_code == 0, result.output
    (kept,) = cluster["keep"].iterdir()  # the List joined from the parts names its server too
    assert json.loads(kept.read_text())["metadata"]["fleetaudit.io/server"] == SERVER
    gets = [c["argv"] for c in calls(cluster)[2:]]
    assert [g[3:] for g in gets] == [
        ["get", "nodes", "-o", "json", "--chunk-size=500"],
        ["get", "pods", "-n", "team-a", "-o", "json", "--chunk-size=500"],
        ["get", "pods", "-n", "team-c", "-o", "json", "--chunk-size=500"],
    ]
    assert all(g[:2] == ["--context=prod", f"--kubeconfig={config}"] for g in gets)
    with open_store(cluster["db"], read_only=True) as store:
        assert {r[0] for r in store.sql("SELECT alloc_id FROM allocations").rows()} == {"a1", "c1"}


@pytest.mark.parametrize(
    ("fail", "said"),
    [
        ("forbidden", 'Error from server (Forbidden): nodes is forbidden: User "system:'),
        ("unreachable", "Unable to connect to the server: dial tcp 10.0.0.1:6443: i/o timeout"),
    ],
)
def test_a_refusal_or_timeout_is_one_line_and_writes_nothing(
    cluster: dict[str, Path], fail: str, said: str
) -> None:
    _serve(cluster, _node("n1"))
    assert kubectl_ingest(cluster).exit_code == 0
    before = cluster["db"].read_bytes()
    os.environ["STANDIN_KUBECTL_FAIL"] = fail
    result = kubectl_ingest(cluster, "--keep", str(cluster["keep"]))
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("fleetaudit: error: kubectl ") and said in line, line
    assert cluster["db"].read_bytes() == before
    assert not cluster["keep"].exists()


def test_a_hanging_kubectl_is_stopped(cluster: dict[str, Path], tmp_path: Path) -> None:
    os.environ["STANDIN_KUBECTL_FAIL"] = "hang"
    options = KubectlOptions(started=datetime(2026, 3, 1, 10), timeout_s=1.0)
    began = time.monotonic()
    with pytest.raises(InputError, match="timed out after 1 s and was stopped"):
        collect(options, tmp_path, lambda _m: None)
    assert time.monotonic() - began < 30
    leftovers = subprocess.run(["pgrep", "-f", str(STANDIN)], capture_output=True, text=True,
                               check=False).stdout.split()  # fmt: skip
    assert leftovers == []


def test_kubectl_missing(cluster: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(cluster["bin"] / "none"))
    result = kubectl_ingest(cluster)
    assert result.exit_code == 2
    assert "kubectl: not found on PATH" in result.stderr


def test_flags_of_the_collector_need_it(tmp_path: Path) -> None:
    path = write(tmp_path / "a.json", '{"kind": "List", "items": []}')
    result = runner.invoke(app, ["ingest", "--db", str(tmp_path / "s.duckdb"), "--format",
                                 "kubernetes", "--context", "x", str(path)])  # fmt: skip
    assert result.exit_code == 2 and "--context applies with --kubectl only" in result.stderr
    result = runner.invoke(app, ["ingest", "--db", str(tmp_path / "s.duckdb"), "--kubectl"])
    assert result.exit_code == 2 and "--kubectl applies to --format kubernetes" in result.stderr
    result = runner.invoke(app, ["ingest", "--db", str(tmp_path / "s.duckdb"), "--format",
                                 "kubernetes", "--kubectl", str(path)])  # fmt: skip
    assert result.exit_code == 2 and "name no files with it" in result.stderr


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="no kubectl client installed")
@pytest.mark.parametrize(
    ("user", "said"),
    [("token", "127.0.0.1:{port}"), ("none", "asked for a user name and password")],
)
def test_the_real_kubectl_against_no_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, user: str, said: str
) -> None:
    """kubectl itself, told of a server on a closed local port: one line, exit 2."""
    monkeypatch.setenv("HOME", str(tmp_path))
    with socket.socket() as s:  # a port free now, closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    users = {"token": "  user: {token: not-a-real-token}", "none": "  user: {}"}
    config = write(tmp_path / "kubeconfig", (
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
        f"    server: https://127.0.0.1:{port}\ncontexts:\n- name: x\n  context:\n"
        "    cluster: c\n    user: u\ncurrent-context: x\nusers:\n- name: u\n"
        + users[user] + "\n"))  # fmt: skip
    result = runner.invoke(app, ["ingest", "--db", str(tmp_path / "s.duckdb"), "--format",
                                 "kubernetes", "--kubectl", "--kubeconfig", str(config)])  # fmt: skip
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("fleetaudit: error: kubectl "), line
    assert said.format(port=port) in line, line
    assert not (tmp_path / "s.duckdb").exists()


def _readme_kubernetes_cron() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = text.split("```crontab\n")[2].split("```")[0]
    return [line for line in block.splitlines() if line[:1].isdigit() or line.startswith("*")]


def test_the_readme_cron_lines_run_verbatim(cluster: dict[str, Path], tmp_path: Path) -> None:
    """The README's Kubernetes crontab, as cron runs it (an empty environment but the
    crontab's variables): a snapshot, kept, then the nightly report."""
    _serve(cluster, _node("n1"), _pod("p1", "ns", "n1"))
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    write(fleet / "kubeconfig", "apiVersion: v1\nkind: Config\n")
    fleetaudit = shutil.which("fleetaudit")
    assert fleetaudit is not None
    env = {"FLEET": str(fleet), "FLEETAUDIT": fleetaudit,
           "PATH": f"{cluster['bin']}:/usr/bin:/bin",
           **{k: v for k, v in os.environ.items() if k.startswith("STANDIN_KUBECTL_")}}  # fmt: skip
    for line in _readme_kubernetes_cron():
        command = line.split(None, 5)[5]
        done = subprocess.run(["/bin/sh", "-c", command], env=env, capture_output=True,
                              text=True, check=False, timeout=300)  # fmt: skip
        assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), command
    assert len(list((fleet / "snapshots").glob("*.json"))) == 1
    assert len(list((fleet / "reports").glob("*.html"))) == 1


def test_kept_snapshots_of_two_clusters_are_told_apart(
    cluster: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # cron on two clusters keeping into one folder: each kept List names its API server
    _serve(cluster, _node("a-gpu-1"), _pod("pa", "team-a", "a-gpu-1"))
    assert kubectl_ingest(cluster, "--keep", str(cluster["keep"])).exit_code == 0
    time.sleep(1.1)  # the next call's start names another file
    _serve(cluster, _node("b-gpu-1"), _pod("pb", "team-b", "b-gpu-1"))
    monkeypatch.setenv("STANDIN_KUBECTL_SERVER", "https://gpu-b.example.org:6443")
    assert kubectl_ingest(cluster, "--keep", str(cluster["keep"])).exit_code == 0
    first, second = sorted(cluster["keep"].iterdir())
    assert [json.loads(p.read_text())["metadata"]["fleetaudit.io/server"]
            for p in (first, second)] == [SERVER, "https://gpu-b.example.org:6443"]  # fmt: skip
    result = runner.invoke(app, ["ingest", "--db", str(cluster["db"].with_suffix(".2")),
                                 "--format", "kubernetes", str(cluster["keep"])])  # fmt: skip
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line == (
        f"fleetaudit: error: {second}: not the cluster of {first} (API server "
        f"https://gpu-b.example.org:6443 here, {SERVER} there, and no node in common): nothing "
        "was written; --allow-mixed loads them together anyway"
    )


def test_in_a_pod_the_server_is_the_in_cluster_one(
    cluster: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # no kubeconfig: kubectl cannot minify (and uses the service account), the snapshot
    # names the in-cluster API server; with neither, the List is kubectl's as it wrote it
    _serve(cluster, _node("n1"))
    monkeypatch.delenv("STANDIN_KUBECTL_SERVER")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert kubectl_ingest(cluster, "--keep", str(cluster["keep"])).exit_code == 0
    (kept,) = cluster["keep"].iterdir()
    assert json.loads(kept.read_text())["metadata"] == {
        "resourceVersion": "", "fleetaudit.io/server": "https://10.96.0.1:443"
    }  # fmt: skip
    kept.unlink()
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    assert kubectl_ingest(cluster, "--keep", str(cluster["keep"])).exit_code == 0
    (kept,) = cluster["keep"].iterdir()
    assert json.loads(kept.read_text())["metadata"] == {"resourceVersion": ""}
