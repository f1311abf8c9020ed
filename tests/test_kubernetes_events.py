"""Health over time from kubectl snapshots: each node's conditions and taints become
intervals in ``node_events``, dated by the node's own transition times where it records
them. Four invented snapshots of five nodes; every interval below is worked by hand.

    snapshot  A 10:00   B 10:30   C 11:00   D 11:30
    n1        Ready     NotReady  Ready
                        (since 10:12)  (since 10:47)       -> down [10:12, 10:47)
    n2        Ready     cordoned  cordoned  Ready          -> cordoned [10:30, 11:00)
    n3        Ready     Ready     -         -              -> down (absent) [11:00, open)
    n4        Ready     NotReady  NotReady  NotReady
                        (10:12)   (10:55: it flapped)      -> down [10:12, 10:30) (its last
                                                              sighting) and [10:55, open)
    n5        Ready     cordoned, taint added 10:20; MemoryPressure since 10:25 at C only
                                                           -> cordoned [10:20, open),
                                                              degraded [10:25, 11:00)
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from fleetaudit.inputs.ingest import IngestOptions, ingest
from fleetaudit.model.store import Store, open_store
from tests.conftest import write

T = {k: datetime(2026, 3, 1, h, m) for k, (h, m) in
     {"A": (10, 0), "B": (10, 30), "C": (11, 0), "D": (11, 30)}.items()}  # fmt: skip


def _at(hhmm: str) -> str:
    return f"2026-03-01T{hhmm}:00Z"


def _node(name: str, beat: str, ready: str = "True", since: str = "2026-02-01T00:00:00Z",
          cordoned: bool = False, taint_added: str | None = None,
          pressure: str | None = None) -> dict[str, Any]:  # fmt: skip
    conditions = [{"type": "Ready", "status": ready, "lastHeartbeatTime": beat,
                   "lastTransitionTime": since, "reason": "KubeletNotReady" if ready != "True"
                   else "KubeletReady"}]  # fmt: skip
    if pressure is not None:
        conditions.append({"type": "MemoryPressure", "status": "True",
                           "lastHeartbeatTime": beat, "lastTransitionTime": pressure})
    spec: dict[str, Any] = {}
    if cordoned:
        spec["unschedulable"] = True
        taint: dict[str, Any] = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
        if taint_added:
            taint["timeAdded"] = taint_added
        spec["taints"] = [taint]
    return {"kind": "Node", "metadata": {"name": name}, "spec": spec,
            "status": {"capacity": {"cpu": "8", "nvidia.com/gpu": "8"},
                       "allocatable": {"cpu": "8", "nvidia.com/gpu": "8"},
                       "conditions": conditions}}  # fmt: skip


def _snapshots(folder: Path) -> list[Path]:
    a, b, c, d = (_at(x) for x in ("10:00", "10:30", "11:00", "11:30"))
    docs = {
        "a": [_node("n1", a), _node("n2", a), _node("n3", a), _node("n4", a), _node("n5", a)],
        "b": [_node("n1", b, "False", _at("10:12")), _node("n2", b, cordoned=True),
              _node("n3", b), _node("n4", b, "False", _at("10:12")),
              _node("n5", b, cordoned=True, taint_added=_at("10:20"))],
        "c": [_node("n1", c, "True", _at("10:47")), _node("n2", c, cordoned=True),
              _node("n4", c, "Unknown", _at("10:55")),
              _node("n5", c, cordoned=True, taint_added=_at("10:20"), pressure=_at("10:25"))],
        "d": [_node("n1", d, "True", _at("10:47")), _node("n2", d),
              _node("n4", d, "Unknown", _at("10:55")),
              _node("n5", d, cordoned=True, taint_added=_at("10:20"))],
    }  # fmt: skip
    return [write(folder / f"{k}.json", json.dumps({"kind": "List", "items": v}))
            for k, v in docs.items()]  # fmt: skip


EXPECTED = {
    ("n1", T["A"].replace(minute=12), T["A"].replace(minute=47), "down", "kubernetes:condition/Ready"),
    ("n2", T["B"], T["C"], "cordoned", "kubernetes:unschedulable"),
    ("n3", T["C"], None, "down", "kubernetes:absent"),
    ("n4", T["A"].replace(minute=12), T["B"], "down", "kubernetes:condition/Ready"),
    ("n4", T["A"].replace(minute=55), None, "down", "kubernetes:condition/Ready"),
    ("n5", T["A"].replace(minute=20), None, "cordoned", "kubernetes:unschedulable"),
    ("n5", T["A"].replace(minute=25), T["C"], "degraded", "kubernetes:condition/MemoryPressure"),
}  # fmt: skip


def _events(store: Store) -> set[tuple[Any, ...]]:
    return set(store.sql(
        "SELECT node_id, start_time, end_time, state, source FROM node_events"
    ).rows())  # fmt: skip


def test_intervals_of_four_snapshots(store: Store, tmp_path: Path) -> None:
    result = ingest(store, _snapshots(tmp_path), IngestOptions(format="kubernetes"))
    assert _events(store) == EXPECTED
    events = {t.table: t for t in result.tables}["node_events"]
    assert (events.read, events.new, events.rejected) == (7, 7, 0)
    reasons = dict(store.sql("SELECT node_id || source, reason FROM node_events "
                             "WHERE state = 'down' AND node_id = 'n1'").rows())  # fmt: skip
    assert reasons == {"n1kubernetes:condition/Ready": "Ready False: KubeletNotReady"}
    # each node's health stays the state at the last snapshot
    health = dict(store.sql("SELECT node_id, health FROM nodes").rows())
    assert health == {"n1": "healthy", "n2": "healthy", "n3": "down", "n4": "down",
                      "n5": "cordoned"}  # fmt: skip


def test_one_snapshot_per_call_gives_the_same_intervals(tmp_path: Path) -> None:
    paths = _snapshots(tmp_path / "in")
    with open_store(tmp_path / "one.duckdb") as store:
        for path in paths:
            ingest(store, [path], IngestOptions(format="kubernetes"))
        assert _events(store) == EXPECTED
        # ingesting the last snapshot again changes nothing
        before = store.sql("SELECT * EXCLUDE (_ingest_id) FROM node_events ORDER BY ALL").rows()
        ingest(store, [paths[-1]], IngestOptions(format="kubernetes"))
        assert store.sql("SELECT * EXCLUDE (_ingest_id) FROM node_events ORDER BY ALL").rows() == before


@pytest.mark.parametrize("upto", [1, 2])
def test_an_open_interval_is_closed_by_a_later_call(tmp_path: Path, upto: int) -> None:
    paths = _snapshots(tmp_path / "in")
    with open_store(tmp_path / "s.duckdb") as store:
        ingest(store, paths[: upto + 1], IngestOptions(format="kubernetes"))
        opened = {r[0] for r in store.sql(
            "SELECT node_id FROM node_events WHERE end_time IS NULL").rows()}  # fmt: skip
        assert "n1" in opened if upto == 1 else "n1" not in opened
        ingest(store, paths[upto + 1 :], IngestOptions(format="kubernetes"))
        assert _events(store) == EXPECTED
        assert store.scalar("SELECT count(*) FROM node_events") == len(EXPECTED)
