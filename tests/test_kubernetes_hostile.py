"""Hostile and careless kubectl JSON: every case ends in a result, a reject naming the object
and the field, or one line naming the file; never a traceback, never a silent merge.
A fuzz pass (marker ``fuzz``) mutates real-shaped Node and Pod objects."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from fleetaudit.cli import app
from fleetaudit.core.errors import InputError
from fleetaudit.inputs.ingest import IngestOptions, ingest
from fleetaudit.inputs.ingest.kubernetes import KubernetesOptions, map_snapshots, read_snapshots
from fleetaudit.model.store import Store, open_store
from tests.conftest import write
from tests.fuzzing import FUZZ
from tests.test_kubernetes import _leaves

runner = CliRunner()
AT = "2026-03-01T10:05:00Z"


def node(name: str = "n1", **status: Any) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
        "spec": {},
        "status": {
            "capacity": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
            "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True",
                            "lastHeartbeatTime": "2026-03-01T10:00:00Z",
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            **status,
        },
    }  # fmt: skip


def pod(uid: str, name: str | None = None, node_name: str | None = "n1", gpus: str = "1",
        created: object = "2026-03-01T09:00:00Z") -> dict[str, Any]:  # fmt: skip
    return {
        "kind": "Pod",
        "metadata": {"uid": uid, "name": name or uid, "namespace": "ns",
                     "creationTimestamp": created},
        "spec": {**({"nodeName": node_name} if node_name else {}),
                 "containers": [{"name": "c", "resources": {
                     "requests": {"cpu": "1", "nvidia.com/gpu": gpus}}}]},
        "status": {"phase": "Running" if node_name else "Pending",
                   "conditions": [{"type": "PodScheduled",
                                   "status": "True" if node_name else "False",
                                   "lastTransitionTime": "2026-03-01T09:00:10Z"}]},
    }  # fmt: skip


def doc(path: Path, *items: Any) -> Path:
    return write(path, json.dumps({"apiVersion": "v1", "kind": "List", "items": list(items)}))


def k8s(store: Store, *paths: Path) -> Any:
    return ingest(store, list(paths), IngestOptions(format="kubernetes"))


@pytest.mark.parametrize(
    ("created", "reason"),
    [
        ("9999-12-31T00:00:00Z", "outside the years 1900..2200"),
        ("not-a-time", "not an RFC 3339 time"),
        (12, "not"),
    ],
)
def test_a_bad_creation_time_is_a_reject_naming_object_and_field(
    store: Store, tmp_path: Path, created: object, reason: str
) -> None:
    path = doc(tmp_path / "s.json", node(), pod("good"), pod("bad", created=created),
               pod("queued", node_name=None, created=created))  # fmt: skip
    result = k8s(store, path)
    assert result.rejected == 2
    rejects = result.rejects.to_dicts()
    assert {r["row"] for r in rejects} == {3, 4}  # the items' places in the List
    for r in rejects:
        assert "metadata.creationTimestamp" in r["reason"] and reason in r["reason"], r
    # the bad time moved no snapshot: the snapshot is still the heartbeat's
    assert any("snapshot 2026-03-01T10:00:00Z" in n for n in result.notes), result.notes


def test_a_node_with_a_bad_heartbeat_is_a_reject(store: Store, tmp_path: Path) -> None:
    bad = node("n2")
    bad["status"]["conditions"][0]["lastTransitionTime"] = "9999-12-31T00:00:00Z"
    result = k8s(store, doc(tmp_path / "s.json", node(), bad))
    (reject,) = result.rejects.to_dicts()
    assert reject["column"] == "node_id" and reject["row"] == 2
    assert "status.conditions[Ready].lastTransitionTime" in reject["reason"]


def test_objects_listed_twice_are_counted_not_merged_silently(
    store: Store, tmp_path: Path
) -> None:
    first = pod("u1", gpus="1")
    again = pod("u1", gpus="2")  # the same UID later in the List: it wins
    renamed = pod("u3", name="u2")  # the name of u2 under another UID at the same moment
    path = doc(tmp_path / "s.json", node(), node(), first, pod("u2"), again, renamed)
    result = k8s(store, path)
    tables = {t.table: t for t in result.tables}
    assert (tables["nodes"].superseded, tables["nodes"].new) == (1, 1)
    assert (tables["allocations"].superseded, tables["allocations"].new) == (2, 2)
    assert any("listed again within one snapshot" in n for n in result.notes)
    gpus = dict(store.sql("SELECT alloc_id, gpus FROM allocations").rows())
    assert gpus == {"u1": 2.0, "u3": 1.0}


def test_deeply_nested_json_is_one_line_naming_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "deep.json",
                 '{"kind": "List", "items": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    result = runner.invoke(app, ["ingest", "--db", str(tmp_path / "s.duckdb"),
                                 "--format", "kubernetes", str(path)])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("fleetaudit: error: ") and str(path) in result.stderr
    assert "nested too deeply" in result.stderr and "RecursionError" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_deeply_nested_label_value_is_kept_or_rejected_never_a_traceback(
    store: Store, tmp_path: Path
) -> None:
    item = node()
    item["metadata"]["labels"]["nvidia.com/gpu.clique"] = "DEEP"
    text = json.dumps({"kind": "List", "items": [item]})
    path = write(tmp_path / "s.json", text.replace('"DEEP"', "[" * 5000 + "1" + "]" * 5000))
    try:
        result = k8s(store, path)
    except InputError as exc:
        assert str(path) in str(exc)
    else:
        assert result.tables


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs (root only), unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)],
                          capture_output=True, check=False)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_a_full_disk_says_so_and_leaves_the_store_untouched(
    small_disk: Path, tmp_path: Path
) -> None:
    db = small_disk / "s.duckdb"
    first = doc(tmp_path / "a.json", node(), pod("u0"))
    assert runner.invoke(app, ["ingest", "-q", "--db", str(db), "--format", "kubernetes",
                               str(first)]).exit_code == 0  # fmt: skip
    items = [node()] + [pod(f"uid-{i:06d}-{'x' * 30}", gpus="0") for i in range(40_000)]
    big = doc(tmp_path / "b.json", *items)
    before = _digest(small_disk)
    result = runner.invoke(app, ["ingest", "-q", "--db", str(db), "--format", "kubernetes",
                                 str(big)])  # fmt: skip
    assert result.exit_code == 74, result.output
    assert result.stderr.startswith("fleetaudit: error: no space left on device")
    assert "a store keeps its last committed state" in result.stderr and str(big) not in result.stderr
    after = _digest(small_disk)
    assert after["s.duckdb"] == before["s.duckdb"]
    wal = small_disk / "s.duckdb.wal"
    assert after.get("s.duckdb.wal") == before.get("s.duckdb.wal") or wal.stat().st_size == 0
    with open_store(db, read_only=True) as store:
        assert store.scalar("SELECT count(*) FROM allocations") == 1


# -- fuzz: real-shaped Node and Pod objects with one field replaced ---------------------------

_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=12), st.sampled_from(["1.5", "-1", "1e1000000", "9999-12-31T00:00:00Z",
                                           "not-a-time", "１２Gi", "100500u", "NaN", ""]),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=4), st.text(max_size=4),
                                                        max_size=2),
)  # fmt: skip


_TEMPLATES = [node(), pod("p1"), pod("p2", node_name=None)]
_PATHS = [(i, p) for i, t in enumerate(_TEMPLATES) for p in _leaves(t) if p]


@pytest.mark.fuzz
@FUZZ
@given(st.lists(st.tuples(st.sampled_from(_PATHS), _VALUES), min_size=1, max_size=4))
def test_fuzz_kubectl_objects(tmp_path_factory: Any, edits: list[Any]) -> None:
    """No Node or Pod, whatever one of its fields holds, ends in anything but rows, rejects
    (rows carrying a reason) or one InputError naming the file. (The mapping is fuzzed; the
    rows then pass the validation every format shares.)"""
    items = copy.deepcopy(_TEMPLATES)
    for (index, path), value in edits:
        target: Any = items[index]
        try:
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / "s.json"
    path.write_text(json.dumps({"kind": "List", "items": items}))
    try:
        snapshots, _notes = read_snapshots([path], datetime(2026, 3, 1))
        frames = map_snapshots(snapshots, KubernetesOptions())
    except InputError as exc:
        assert str(path) in str(exc)
        return
    mapped = sum(f.height for f in frames.values())
    assert mapped >= 1 or not snapshots


@pytest.mark.parametrize("chunk", [1, 3, 7, 64])
def test_the_stream_reads_values_cut_by_any_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """The document is read a chunk at a time: a value (a string, a number, an object)
    cut by a chunk's end reads whole, and kubectl's key order (items before kind) holds."""
    from fleetaudit.inputs.ingest import jsonstream, kubernetes

    monkeypatch.setattr(jsonstream, "CHUNK_CHARS", chunk)
    items = [node(), pod("p\u00e9-1"), {"kind": "Event", "count": 12345678901234567890,
                                          "rate": 1.25, "note": "é" * 5}]  # fmt: skip
    path = write(tmp_path / "s.json", json.dumps(
        {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {}}, indent=4))
    got = list(kubernetes.iter_document(path))
    assert [i.get("kind") for i in got] == ["Node", "Pod", "Event"]
    assert got[2]["count"] == 12345678901234567890 and str(got[2]["rate"]) == "1.25"
    assert got[1]["metadata"]["uid"] == "p\u00e9-1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"items": [1, 2], "kind": "List"} x', "extra data"),
        ('{"kind": "List", "items": [{"a": NaN}]}', "NaN is not JSON"),
        ('{"kind": "List", "items": [{"a": 1}', "not JSON (line 1)"),
        ('{"kind": "List", "items": 3}', "a List without items"),
    ],
)
def test_the_stream_refuses_what_is_no_kubectl_json(
    tmp_path: Path, text: str, message: str
) -> None:
    from fleetaudit.inputs.ingest import kubernetes

    with pytest.raises(InputError, match=re.escape(message)):
        list(kubernetes.iter_document(write(tmp_path / "s.json", text)))


def test_broken_json_fails_where_it_is_not_at_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A value that is no JSON fails on its own line, at once: the reader does not take
    it for a value cut by its buffer and read the rest of the file first."""
    from fleetaudit.inputs.ingest import jsonstream, kubernetes

    monkeypatch.setattr(jsonstream, "CHUNK_CHARS", 16)
    good = json.dumps(pod("p-1"))
    lines = ['{"kind": "List", "items": [', good + ",", '{"a": tru},', *[good + ","] * 200, good, "]}"]
    path = write(tmp_path / "s.json", "\n".join(lines))
    reads: list[int] = []
    real = jsonstream.JsonStream._more

    def counted(self: jsonstream.JsonStream, what: str) -> bool:
        reads.append(len(self.buf))
        return real(self, what)

    monkeypatch.setattr(jsonstream.JsonStream, "_more", counted)
    with pytest.raises(InputError, match=re.escape("not JSON (line 3): Expecting value (an item)")):
        list(kubernetes.iter_document(path))
    assert max(reads) < 3 * len(good)  # the buffer never held the 200 pods after it
