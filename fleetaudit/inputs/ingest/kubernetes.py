"""``--format kubernetes``: kubectl JSON snapshots (Nodes, Pods, Kueue Workloads).

Each input is a ``kubectl get ... -o json`` document (a ``List`` or a single
object) or a folder of ``*.json`` documents. Objects of kind Node, Pod and
Workload (kueue.x-k8s.io) are mapped onto ``nodes``, ``allocations`` and
``requests``; other kinds are ignored and counted. The mapped rows are polars
frames that pass the same validation as native files, so a pod on an unknown
node or an unknown quantity becomes a reject row with its reason.

Several files taken at different times are snapshots of one cluster (a call whose
documents name two clusters and share no node is refused unless ``--allow-mixed``:
kubernetes_clusters). The rules (docs/formats/kubernetes.md) in short:

- a file's snapshot time is the newest node heartbeat in it, ``--snapshot-time``
  when given, or (for a file without nodes) the time of the call's one snapshot
  with nodes;
- a pod's attributes come from the newest snapshot that lists it; it ends at
  its last container's finish, or, when a later snapshot no longer lists it, at
  the last snapshot that did (``end_censored``);
- a pending pod, gang or Workload is a request; a later snapshot that sees it
  bound or admitted gives its start; one that no longer lists it closes it at
  its last sighting (``left_queue = vanished``).

The state these rules need is kept in the store as extra columns
(``last_seen``, ``first_seen``, ``end_censored``, ``snapshot_time``), so
ingesting the snapshots one call at a time or all in one call gives the same
store.
"""

from __future__ import annotations

import json
import math
import re
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import polars as pl

from fleetaudit.core.errors import InputError, UsageError
from fleetaudit.core.gcpause import paused_gc
from fleetaudit.core.times import TimeOutOfRange, parse_instant
from fleetaudit.inputs.ingest.jsonstream import JsonStream
from fleetaudit.inputs.ingest.kubernetes_clusters import Clusters, Origin, mixed_note, refusal
from fleetaudit.inputs.ingest.labels import PriorityMap, canonical_model, default_priority
from fleetaudit.inputs.ingest.quantity import (
    QuantityError,
    QuantityTooLarge,
    is_whole,
    parse_quantity,
)
from fleetaudit.inputs.ingest.sources import Source, expand_paths, unreadable
from fleetaudit.model.store import Store

FORMAT = "kubernetes"
KINDS = ("Node", "Pod", "Workload")
_GIB = Decimal(2**30)

# GPU feature discovery and provider labels, in the order they are tried.
MODEL_LABELS = (
    "nvidia.com/gpu.product",
    "cloud.google.com/gke-accelerator",
    "aliyun.accelerator/nvidia_name",
)
# Topology label families, top level first, each level one key or its
# alternatives; the first family (in this order) with a label on the node gives
# switch_id: the path of its levels present, down to the lowest.
TOPOLOGY_FAMILIES: tuple[tuple[tuple[str, ...], ...], ...] = (
    (
        ("network.topology.nvidia.com/core", "network.topology.nvidia.com/datacenter"),
        ("network.topology.nvidia.com/spine",),
        ("network.topology.nvidia.com/leaf", "network.topology.nvidia.com/block"),
    ),
    tuple((f"fabric.topograph.run/tier-{i}",) for i in range(5, -1, -1)),
    tuple((f"topology.k8s.aws/network-node-layer-{i}",) for i in range(1, 5)),
    (("cloud.google.com/gce-topology-block",), ("cloud.google.com/gce-topology-subblock",)),
    (
        ("oci.oraclecloud.com/rdma.hpc_island_id",),
        ("oci.oraclecloud.com/rdma.network_block_id",),
        ("oci.oraclecloud.com/rdma.local_block_id",),
    ),
)
# Gang markers, in precedence order: (where, key).
GANG_MARKERS: tuple[tuple[str, str], ...] = (
    ("annotation", "scheduling.k8s.io/group-name"),
    ("annotation", "scheduling.volcano.sh/group-name"),
    ("label", "kueue.x-k8s.io/pod-group-name"),
    ("annotation", "kueue.x-k8s.io/workload"),
    ("label", "scheduling.x-k8s.io/pod-group"),
    ("annotation", "pod-group-name"),
    ("label", "jobset.sigs.k8s.io/jobset-name"),
    ("label", "training.kubeflow.org/job-name"),
    ("label", "leaderworkerset.sigs.k8s.io/name"),
)
_HAMI_RESOURCES = frozenset(
    {"nvidia.com/gpucores", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage"}
)
_PREEMPTABLE = "volcano.sh/preemptable"
_KUEUE_GATE = "kueue.x-k8s.io/admission"
_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
_PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
_HOSTNAME = "kubernetes.io/hostname"
_MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-(\d+)g\.[0-9a-z.]+$")
_MIG_PRODUCT = re.compile(r"-MIG-(\d+)g\.", re.IGNORECASE)
_TRAINING_OWNERS = {
    "Job",
    "JobSet",
    "PyTorchJob",
    "MPIJob",
    "TFJob",
    "XGBoostJob",
    "PaddleJob",
    "TrainJob",
    "RayJob",
}
_SERVING_OWNERS = {"ReplicaSet", "Deployment", "StatefulSet", "LeaderWorkerSet", "DaemonSet"}


@dataclass(frozen=True)
class KubernetesOptions:
    """Options of ``--format kubernetes``."""

    snapshot_time: datetime | None = None  # naive UTC
    priority_map: PriorityMap = field(default_factory=PriorityMap)
    tenant_label: str | None = None
    allow_mixed: bool = False  # load documents of several clusters together


# -- reading -------------------------------------------------------------------


@dataclass
class _Snapshot:
    time: datetime
    files: list[str] = field(default_factory=list)
    nodes: dict[str, tuple[str, int, dict[str, Any]]] = field(default_factory=dict)
    # (file, item, object), or the row of a pod mapped as it was read (its values in rows)
    pods: dict[str, tuple[str, int, Any] | int] = field(default_factory=dict)
    workloads: dict[str, tuple[str, int, dict[str, Any]]] = field(default_factory=dict)
    # objects listed again within the snapshot (same name or UID), per table they feed
    repeated: Counter[str] = field(default_factory=Counter)
    _pod_names: dict[object, str] = field(default_factory=dict)  # (namespace, name) -> uid
    rows: _PodRows | None = None  # the values of the call's pods mapped as they were read

    def add(self, kind: str, key: str, name: object, entry: tuple[str, int, Any] | int) -> None:
        """List an object; a later one with the same key or name replaces it, counted."""
        listed: dict[str, Any] = (
            self.nodes if kind == "Node" else self.pods if kind == "Pod" else self.workloads
        )
        table = "nodes" if kind == "Node" else "requests"
        if kind == "Pod":
            if isinstance(entry, int) or isinstance(entry[2], _Bound):
                table = "allocations"  # mapped as it was read: bound
            else:
                spec = entry[2].get("spec")
                table = "allocations" if isinstance(spec, dict) and spec.get("nodeName") else (
                    "requests"
                )  # fmt: skip
            other = self._pod_names.get(name)
            if other is not None and other != key and other in listed:
                del listed[other]  # one name, two UIDs at one moment: the later one is it
                self.repeated[table] += 1
            self._pod_names[name] = key
        if key in listed:
            self.repeated[table] += 1
        listed[key] = entry


def json_files(paths: Iterable[Path]) -> list[Path]:
    """The files named, and the ``*.json`` files inside each folder named (sorted)."""
    return expand_paths(paths, lambda p: p.suffix == ".json", "kubectl JSON file (*.json)")


_EXPECTED = (
    "expected kubectl JSON (kubectl get nodes,pods -A -o json: a List or one object with a kind)"
)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_float=Decimal, parse_constant=_no_constant)


class _Stream(JsonStream):
    """A kubectl document read a value at a time, its failures said as kubectl's."""

    def explain(self, reason: str, line: int) -> str:
        return f"not JSON (line {line}): {reason}; {_EXPECTED}"

    def too_deep(self, what: str) -> str:
        return "JSON nested too deeply to read (kubectl writes objects a few dozen levels deep)"


def iter_document(path: Path, top: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """The objects of one kubectl JSON document, in file order, read as a stream: a List's
    items one at a time (bounded memory), or the one object of a document that is no List.
    ``top``, when given, receives the document's fields other than ``items`` once read."""
    fields: dict[str, Any] = {} if top is None else top
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            stream = _Stream(path, fh.read, _DECODER)
            if stream.peek() != "{":
                stream.value()  # JSON of another shape, or no JSON (which says where)
                raise InputError(str(path), _EXPECTED)
            stream.expect("{")
            listed = False
            if stream.peek() != "}":
                while True:
                    key = stream.value("a key")
                    if not isinstance(key, str):
                        raise stream.syntax_error("expected a key")
                    stream.expect(":")
                    if key == "items" and stream.peek() == "[":
                        stream.expect("[")
                        listed = True
                        if stream.peek() != "]":
                            while True:
                                item = stream.value("an item")
                                yield item if isinstance(item, dict) else {}
                                if stream.expect(",]") == "]":
                                    break
                        else:
                            stream.expect("]")
                    else:
                        fields[key] = stream.value(f"the document's {key!r}")
                    if stream.expect(",}") == "}":
                        break
            else:
                stream.expect("}")
            if stream.peek():
                raise stream.syntax_error("extra data after the document")
    except (OSError, UnicodeDecodeError) as exc:
        raise unreadable(path, exc) from exc
    kind = fields.get("kind")
    if not isinstance(kind, str):
        raise InputError(str(path), _EXPECTED)
    if kind == "List" or (kind.endswith("List") and (listed or "items" in fields)):
        if not listed:
            raise InputError(str(path), f"a List without items: {_EXPECTED}")
        return
    if listed:
        raise InputError(str(path), _EXPECTED)
    yield fields


_TIMES: dict[str, datetime | None] = {}  # times repeat across pods: parse each once
_UNREAD: Any = object()


def _time(text: object) -> datetime | None:
    """An RFC 3339 time of the API (``2026-03-01T10:00:04Z``) as naive UTC, else None."""
    if not isinstance(text, str) or not text:
        return None
    t = _TIMES.get(text, _UNREAD)
    if t is not _UNREAD:
        return t
    try:
        t = parse_instant(text)
    except UsageError:
        t = None
    if len(_TIMES) >= 200_000:  # bounded: the newest times stay
        _TIMES.clear()
    _TIMES[text] = t
    return t


_STATUS_GROUPS = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")


def _time_fields(item: Mapping[str, Any]) -> Iterator[tuple[str, object]]:
    """Every time field of an object that is read, as (field path, raw value)."""
    meta = item.get("metadata")
    if isinstance(meta, dict):
        for key in ("creationTimestamp", "deletionTimestamp"):
            if meta.get(key) is not None:
                yield f"metadata.{key}", meta[key]
    status = item.get("status")
    if not isinstance(status, dict):
        return
    if status.get("startTime") is not None:
        yield "status.startTime", status["startTime"]
    for c in _conditions(item):
        for key in ("lastTransitionTime", "lastHeartbeatTime"):
            if c.get(key) is not None:
                yield f"status.conditions[{c.get('type')}].{key}", c[key]
    for group in _STATUS_GROUPS:
        statuses = status.get(group)
        for cs in statuses if isinstance(statuses, list) else []:
            if not isinstance(cs, dict):
                continue
            for which in ("state", "lastState"):
                states = cs.get(which)
                for name, state in states.items() if isinstance(states, dict) else []:
                    if not isinstance(state, dict):
                        continue
                    for key in ("startedAt", "finishedAt"):
                        if state.get(key) is not None:
                            yield f"status.{group}[{cs.get('name')}].{which}.{name}.{key}", state[key]


def _time_values(item: Mapping[str, Any], deletion: bool = True) -> list[object]:
    """The raw values of :func:`_time_fields` without their paths (the paths are only built
    to name a bad one); ``deletion=False`` leaves ``deletionTimestamp`` out."""
    found: list[object] = []
    meta = item.get("metadata")
    if isinstance(meta, dict):
        if (v := meta.get("creationTimestamp")) is not None:
            found.append(v)
        if deletion and (v := meta.get("deletionTimestamp")) is not None:
            found.append(v)
    status = item.get("status")
    if not isinstance(status, dict):
        return found
    if (v := status.get("startTime")) is not None:
        found.append(v)
    conds = status.get("conditions")
    if isinstance(conds, list):
        for c in conds:
            if isinstance(c, dict):
                if (v := c.get("lastTransitionTime")) is not None:
                    found.append(v)
                if (v := c.get("lastHeartbeatTime")) is not None:
                    found.append(v)
    for group in _STATUS_GROUPS:
        statuses = status.get(group)
        if not isinstance(statuses, list):
            continue
        for cs in statuses:
            if not isinstance(cs, dict):
                continue
            for which in ("state", "lastState"):
                states = cs.get(which)
                if not isinstance(states, dict):
                    continue
                for state in states.values():
                    if isinstance(state, dict):
                        if (v := state.get("startedAt")) is not None:
                            found.append(v)
                        if (v := state.get("finishedAt")) is not None:
                            found.append(v)
    return found


def check_times(item: Mapping[str, Any], column: str) -> None:
    """Refuse an object whose time fields are not times of 1900..2200: a reject naming the
    field (a creation time of 9999-12-31 or "not-a-time" is never ignored).

    Raises:
        _Unmappable: the first bad field.
    """
    if None not in map(_time, _time_values(item)):
        return
    for path, raw in _time_fields(item):
        if _time(raw) is None:
            text = raw if isinstance(raw, str) else json.dumps(raw)[:40]
            try:
                parse_instant(str(text))
                reason = "is not a time"  # an empty value or another JSON type
            except TimeOutOfRange:
                reason = "is outside the years 1900..2200"
            except UsageError:
                reason = "is not an RFC 3339 time"
            raise _Unmappable(column, str(text)[:60], f"{path} {str(text)[:40]!r} {reason}")


def _heartbeat(node: Mapping[str, Any]) -> datetime | None:
    times = [_time(c.get("lastHeartbeatTime")) for c in _conditions(node)]
    return max((t for t in times if t is not None), default=None)


def _conditions(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    status = obj.get("status")
    conds = status.get("conditions") if isinstance(status, dict) else None
    return [c for c in conds if isinstance(c, dict)] if isinstance(conds, list) else []


def _condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    for c in _conditions(obj):
        if c.get("type") == kind:
            return c
    return None


def _event_times(item: Mapping[str, Any]) -> list[datetime | None]:
    """The times an object records of things that happened (creation, transitions,
    finishes), None where a field is no time.

    ``deletionTimestamp`` is left out: it lies in the future by the grace period.
    """
    return list(map(_time, _time_values(item, deletion=False)))


def read_snapshots(
    files: list[Path], snapshot_time: datetime | None, options: KubernetesOptions | None = None
) -> tuple[list[_Snapshot], list[str]]:
    """Group the files' objects into snapshots (oldest first); also the notes to show.

    A document with node heartbeats is a snapshot at the newest time it records (a
    heartbeat, or a creation, transition or finish after it: node leases refresh the
    heartbeat only every few minutes). A document without one joins the call's one
    snapshot with heartbeats (and moves it later when it records a later event).
    """
    for cache in (_TIMES, _PARSED, _CHECKED):  # a call's own: a long process holds none
        cache.clear()
    ignored: Counter[str] = Counter()
    unnamed: Counter[str] = Counter()  # a Node or Pod without a name (and uid)
    per_file: list[tuple[str, list[Any], datetime | None, datetime | None]] = []
    mapper = _Mapper(options) if options is not None else None
    rows = _PodRows()
    clusters = Clusters()
    for path in files:
        items: list[Any] = []
        fileno = rows.file_no(str(path))
        newest: datetime | None = None
        events: datetime | None = None
        setups: dict[str, GpuSetup] = {}  # the document's nodes so far
        origin, top = Origin(str(path)), dict[str, Any]()
        for item in iter_document(path, top):
            origin.see(item)
            kind = item.get("kind")
            if kind == "Node":
                beat = _heartbeat(item)
                if beat is not None and (newest is None or beat > newest):
                    newest = beat
                meta = item.get("metadata")
                if isinstance(meta, dict) and isinstance(meta.get("name"), str):
                    try:
                        setups[meta["name"]] = gpu_setup(item)
                    except (*_MALFORMED, _Unmappable):
                        pass
            times = _event_times(item)
            if snapshot_time is None:
                when = max(filter(None, times), default=None)
                if when is not None and (events is None or when > events):
                    events = when
            entry: Any = item
            if kind == "Pod" and mapper is not None:
                number = len(items) + 1
                entry = _bound(mapper, item, setups, rows, fileno, number, None not in times)
                entry = entry or item
            items.append(entry)
        if snapshot_time is None and newest is not None and events is not None:
            newest = max(newest, events)
        per_file.append((str(path), items, snapshot_time or newest, events))
        origin.see_list(top)
        clusters.add(origin)
    allow_mixed = options is not None and options.allow_mixed
    mixed = clusters.mixed()
    if mixed is not None and not allow_mixed:
        raise InputError(*refusal(mixed))
    if snapshot_time is not None:
        for listed in ("Pod", "Workload"):
            listing = [n for n, items, _, _ in per_file if any(_kind(i) == listed for i in items)]
            if len(listing) > 1 and not (allow_mixed and clusters.apart(listing)):
                raise InputError(
                    listing[1],
                    f"--snapshot-time makes one snapshot, but {len(listing)} documents list "
                    f"{listed}s ({listing[0]} too): ingest each snapshot in a call of its own",
                )
    timed = sorted({t for _, _, t, _ in per_file if t is not None})
    if len(timed) == 1:  # documents without heartbeats join it: its time is the latest event
        joined = max(
            (e for _, _, t, e in per_file if t is None and e is not None), default=timed[0]
        )
        if joined > timed[0]:
            per_file = [(n, i, joined, e) for n, i, _, e in per_file]
            timed = [joined]
    notes: list[str] = []
    if mixed is not None:
        timed_as = {n: t for n, _, t, _ in per_file}
        notes.append(mixed_note(mixed, together=timed_as[mixed[0]] == timed_as[mixed[1]]))
    snapshots: dict[datetime, _Snapshot] = {}
    for name, items, t, _ in per_file:
        if t is None:
            if len(timed) != 1:
                raise InputError(
                    name,
                    "no node heartbeat to time this snapshot: export nodes with it "
                    "(kubectl get nodes,pods -A -o json) or give --snapshot-time",
                )
            t = timed[0]
        snap = snapshots.setdefault(t, _Snapshot(t, rows=rows))
        snap.files.append(name)
        for i, item in enumerate(items, 1):
            if isinstance(item, _Taken):  # a pod mapped as it was read: its row
                snap.add("Pod", item.uid, item.pod_name, item.row)
                continue
            if isinstance(item, _Bound):  # mapped as it was read, finished with its snapshot
                snap.add("Pod", item.uid, item.pod_name, (name, i, item))
                continue
            kind = item.get("kind")
            meta = item.get("metadata")
            if not isinstance(meta, dict):
                meta = {}
            if kind == "Node" and meta.get("name"):
                snap.add("Node", str(meta["name"]), "", (name, i, item))
            elif kind == "Pod" and (meta.get("uid") or meta.get("name")):
                uid = str(meta.get("uid") or f"{meta.get('namespace', '')}/{meta['name']}")
                pod_name = _pod_name(meta.get("namespace", ""), meta.get("name"))
                snap.add("Pod", uid, pod_name, (name, i, item))
            elif kind == "Workload" and str(item.get("apiVersion", "")).startswith(
                "kueue.x-k8s.io"
            ):
                uid = str(meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name')}")
                snap.add("Workload", uid, "", (name, i, item))
            elif kind in ("Node", "Pod"):
                unnamed[str(kind)] += 1
            else:
                ignored[str(kind or "no kind")] += 1
    if ignored:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(ignored.items()))
        notes.append(f"ignored {sum(ignored.values())} object(s) of other kinds ({kinds})")
    if unnamed:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(unnamed.items()))
        notes.append(
            f"ignored {sum(unnamed.values())} object(s) without metadata.name ({kinds}): "
            "not as kubectl writes them"
        )
    repeated = sum((sum(snap.repeated.values()) for snap in snapshots.values()), 0)
    if repeated:
        notes.append(
            f"{repeated} object(s) listed again within one snapshot (the same name or UID): "
            "the later one is kept, the earlier counted as superseded"
        )
    for t in sorted(snapshots):
        how = "--snapshot-time" if snapshot_time else "newest heartbeat or event"
        notes.append(f"snapshot {t.isoformat()}Z ({how}): {', '.join(snapshots[t].files)}")
    return [snapshots[t] for t in sorted(snapshots)], notes


# -- resources -----------------------------------------------------------------


class _Unmappable(Exception):
    def __init__(self, column: str, value: str, reason: str) -> None:
        super().__init__(reason)
        self.column, self.value, self.reason = column, value, reason


_PARSED: dict[object, Decimal] = {}  # quantities repeat ("8", "64Gi"): parse each once


def _quantity(value: object, what: str, column: str) -> Decimal:
    try:
        found = _PARSED.get(value) if isinstance(value, str) else None
        if found is None:
            found = parse_quantity(value)
            if isinstance(value, str):
                if len(_PARSED) >= 100_000:  # bounded: the newest quantities stay
                    _PARSED.clear()
                _PARSED[value] = found
        return found
    except QuantityError as exc:
        # a well-formed number too large for any resource says so, not "unknown"
        reason = str(exc) if isinstance(exc, QuantityTooLarge) else f"unknown quantity {value!r}"
        raise _Unmappable(column, str(value), f"{reason} ({what})") from None


def _column_of(resource: str) -> str:
    return {"cpu": "cpus", "memory": "memory_gib"}.get(resource, "gpus")


_CHECKED: dict[tuple[str, str], Decimal] = {}  # (resource, quantity) found valid


def _resources(res: Mapping[str, Any] | None, what: str | tuple[str, object]) -> dict[str, Decimal]:
    """Requests of one container (``what``: its description, or its kind and name); a key
    only in limits takes the limit (as Kubernetes does)."""
    if not res:
        return {}
    requests = res.get("requests") or {}
    limits = res.get("limits") or {}
    out: dict[str, Decimal] = {}
    for key in {*limits, *requests}:
        raw = requests.get(key, limits.get(key))
        if isinstance(raw, str) and (checked := _CHECKED.get((key, raw))) is not None:
            out[key] = checked
            continue
        if not isinstance(what, str):
            what = f"{what[0]} {what[1]}"
        found = _PARSED.get(raw) if isinstance(raw, str) else None
        value = found if found is not None else _quantity(raw, f"{key} of {what}", _column_of(key))
        if value < 0:
            raise _Unmappable(_column_of(key), str(raw), f"{key} of {what} is negative")
        if is_extended(key) and not is_whole(value):
            raise _Unmappable(
                _column_of(key), str(raw), f"{key} of {what} is {raw!s:.40}, not a whole number: "
                "Kubernetes refuses fractional extended resources",
            )  # fmt: skip
        if isinstance(raw, str):
            if len(_CHECKED) >= 100_000:  # bounded: the newest stay
                _CHECKED.clear()
            _CHECKED[(key, raw)] = value
        out[key] = value
    return out


def is_extended(resource: str) -> bool:
    """Whether a resource is an extended one (``nvidia.com/gpu``), which Kubernetes holds to
    whole numbers: a name with a domain other than ``kubernetes.io``.

    >>> is_extended("nvidia.com/gpu"), is_extended("cpu"), is_extended("hugepages-2Mi")
    (True, False, False)
    """
    return "/" in resource and "kubernetes.io/" not in resource


_ZERO = Decimal(0)


def _add(a: dict[str, Decimal], b: Mapping[str, Decimal]) -> dict[str, Decimal]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, Decimal(0)) + v
    return out


def _max(a: dict[str, Decimal], b: Mapping[str, Decimal]) -> dict[str, Decimal]:
    out = dict(a)
    for k, v in b.items():
        out[k] = max(out.get(k, Decimal(0)), v)
    return out


def effective_request(spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """A pod's effective request per resource (Kubernetes' rules for init and sidecar containers).

    ``max(max_i(init_i + sidecars started before i), sidecars + containers) + overhead``;
    pod-level ``spec.resources`` replaces the containers' cpu and memory when set.
    """
    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for c in spec.get("initContainers") or []:
        res = _resources(c.get("resources"), ("init container", c.get("name")))
        if c.get("restartPolicy") == "Always":
            sidecars = _add(sidecars, res)
        else:
            init_peak = _max(init_peak, _add(res, sidecars))
    running = dict(sidecars)
    for c in spec.get("containers") or []:
        for key, value in _resources(c.get("resources"), ("container", c.get("name"))).items():
            running[key] = running.get(key, _ZERO) + value
    # (no init container's peak: the containers' sum, none of it negative)
    total = _max(init_peak, running) if init_peak else running
    pod_level = spec.get("resources")
    if pod_level:
        for key, value in _resources(pod_level, "pod resources").items():
            if key in ("cpu", "memory"):
                total[key] = value
    overhead = spec.get("overhead") or {}
    for key, raw in overhead.items():
        total[key] = total.get(key, Decimal(0)) + _quantity(raw, f"{key} overhead", _column_of(key))
    return total


# -- nodes ---------------------------------------------------------------------


@dataclass(frozen=True)
class GpuSetup:
    """How a node's GPUs are exposed, to turn a pod's GPU resources into physical GPUs."""

    physical: int = 0
    sharing: str = "none"  # none|time-slicing|mps|mig-single|mig-mixed|hami|gpushare
    replicas: int = 1  # time-slicing/MPS replicas, HAMi split count
    slices: int = 7  # MIG compute slices of one GPU
    mig_g: int = 0  # MIG single: slices of each device
    gpu_memory_mib: float | None = None  # per physical GPU
    gpushare_unit: Decimal | None = None  # aliyun.com/gpu-mem per physical GPU
    mig_per_gpu: int = 0  # MIG single: devices on each physical GPU
    inferred: str | None = None  # how the physical count was inferred (None: the node says it)
    replicas_inferred: bool = False  # replicas unknown: the largest plausible count


_MIG_PROFILE = re.compile(r"-MIG-(\d+)g\.(\d+)gb", re.IGNORECASE)
_MIG_MIXED = re.compile(r"^nvidia\.com/mig-(\d+)g\.(\d+)gb$")
_MIG_SHARED = re.compile(r"^nvidia\.com/mig-(\d+)g\.(\d+)gb\.shared$")
_GPU_GB = re.compile(r"(\d+)GB", re.IGNORECASE)
_GPU_GB_OF = {"A30": 24}  # products whose name carries no memory size
# MIG memory slices of an Ng profile where the GPU's memory is unknown (8 per GPU; 4 on A30)
_MIG_MEMORY_SLICES = {1: 1, 2: 2, 3: 4, 4: 4, 7: 8}
MEMORY_BYTES_FROM = 2**24
"""A ``nvidia.com/gpu.memory`` label of this value or more is bytes, below it MiB: 2^24 MiB
(16 TiB) is no GPU's memory, 2^24 bytes (16 MiB) none either (older GFDs wrote bytes)."""
KARPENTER_GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
KARPENTER_GPU_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"  # MiB per GPU
GKE_REPLICAS = "cloud.google.com/gke-max-shared-clients-per-gpu"


def mig_devices_per_gpu(g: int, profile_gb: int, gpu_gb: float | None, slices: int) -> int:
    """Devices of one MIG profile ``Ng.Mgb`` that fit on one GPU.

    A GPU has ``slices`` compute slices and 8 memory slices (4 on A30); the profile takes
    N compute slices and M / (GPU memory / memory slices) memory slices, so ``1g.20gb``
    on an 80 GB H100 fits 4 times (memory bound), not 7. Unknown GPU memory: compute only.
    """
    by_compute = max(1, slices // max(g, 1))
    if not gpu_gb:
        return by_compute
    memory_slices = 4 if slices == 4 else 8
    profile_slices = max(1, round(profile_gb * memory_slices / gpu_gb))
    return max(1, min(by_compute, memory_slices // profile_slices))


def mig_gpu_bounds(
    devices: Mapping[tuple[int, int], int], gpu_gb: float | None, slices: int
) -> tuple[int, int]:
    """The fewest and the most physical GPUs that MIG devices can sit on.

    ``devices`` counts the devices of each profile ``(N, M)`` (``Ng.Mgb``). The fewest is
    the largest of what the compute slices, the memory slices and each profile's
    devices per GPU need (a bound: MIG's placement rules may need more); the most puts
    every device on a GPU of its own.

    >>> mig_gpu_bounds({(3, 40): 4}, None, 7)  # 4 x 3g.40gb: 2 per GPU
    (2, 4)
    >>> mig_gpu_bounds({(1, 12): 2, (1, 24): 1, (3, 48): 1}, 95.6, 7)  # one H20 cut up
    (1, 4)
    """
    memory_slices = 4 if slices == 4 else 8
    compute = memory = 0
    fewest = 0
    for (g, gb), n in devices.items():
        if n <= 0:
            continue
        compute += g * n
        if gpu_gb:
            memory += max(1, round(gb * memory_slices / gpu_gb)) * n
        else:
            memory += _MIG_MEMORY_SLICES.get(g, g) * n
        fewest = max(fewest, math.ceil(n / mig_devices_per_gpu(g, gb, gpu_gb, slices)))
    fewest = max(fewest, math.ceil(compute / slices), math.ceil(memory / memory_slices))
    return fewest, sum(n for n in devices.values() if n > 0)


def _product_gb(product: str) -> int | None:
    """A GPU's memory in GB from its product name (``NVIDIA-H100-80GB-HBM3-MIG-...``)."""
    head = product[: m.start()] if (m := _MIG_PROFILE.search(product)) else product
    size = _GPU_GB.search(head)
    if size:
        return int(size.group(1))
    return next((gb for name, gb in _GPU_GB_OF.items() if name in head.upper()), None)


def _int_label(labels: Mapping[str, Any], key: str) -> int | None:
    try:
        value = int(str(labels[key]).strip(), 10)
    except (KeyError, ValueError):
        return None
    return value if 0 <= value < 2**31 else None


def gpu_memory_mib(labels: Mapping[str, Any]) -> float | None:
    """One GPU's memory in MiB from ``nvidia.com/gpu.memory`` (MiB, or bytes from older GFDs,
    told apart by :data:`MEMORY_BYTES_FROM`), else Karpenter's ``instance-gpu-memory``.

    >>> gpu_memory_mib({"nvidia.com/gpu.memory": "15360"})
    15360.0
    >>> gpu_memory_mib({"nvidia.com/gpu.memory": "16106127360"})  # a T4 in bytes
    15360.0
    """
    for key in ("nvidia.com/gpu.memory", KARPENTER_GPU_MEMORY):
        value = _int_label(labels, key) if key in labels else None
        if value is None:
            try:
                big = int(str(labels.get(key, "")).strip(), 10)
            except ValueError:
                continue
            value = big if big >= MEMORY_BYTES_FROM else None
        if value:
            return float(value / 2**20 if value >= MEMORY_BYTES_FROM else value)
    return None


def gpu_setup(node: Mapping[str, Any]) -> GpuSetup:
    """The physical GPUs of a node and how they are shared (never the replica-inflated count).

    With GPU feature discovery labels the node says its count; without them the count is
    inferred from the resources it advertises, and ``inferred`` says how
    (docs/formats/kubernetes.md, "Physical GPUs").
    """
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    status = node.get("status") or {}
    capacity = status.get("capacity") or {}

    def cap(key: str) -> Decimal | None:
        if key not in capacity:
            return None
        return _whole(_quantity(capacity[key], f"capacity {key}", "gpus"), f"capacity {key}")

    product = str(labels.get("nvidia.com/gpu.product", ""))
    count = _int_label(labels, "nvidia.com/gpu.count")
    karpenter = _int_label(labels, KARPENTER_GPU_COUNT)  # the instance's physical GPUs
    replicas_label = _int_label(labels, "nvidia.com/gpu.replicas") or _int_label(
        labels, GKE_REPLICAS
    )
    replicas = replicas_label or 1
    strategy = str(labels.get("nvidia.com/gpu.sharing-strategy", "none")).lower()
    memory = gpu_memory_mib(labels)
    gpu = cap("nvidia.com/gpu")
    slices = 4 if "A30" in product.upper() else 7
    gpu_gb = memory / 1024 if memory else _product_gb(product)
    mig = _MIG_PRODUCT.search(product)
    if mig and labels.get("nvidia.com/mig.strategy", "single") == "single":
        g = int(mig.group(1))
        profile = _MIG_PROFILE.search(product)
        per_gpu = mig_devices_per_gpu(
            g, int(profile.group(2)) if profile else 0, _product_gb(product), slices
        )
        devices = gpu or Decimal(count or 0)
        shared = cap("nvidia.com/gpu.shared")
        if shared and replicas > 1:  # MIG single, time-sliced: devices x replicas
            devices = shared / replicas
        physical = karpenter if karpenter is not None else math.ceil(devices / per_gpu)
        return GpuSetup(physical, "mig-single", 1, slices, g, None, None, per_gpu)
    mig_types: dict[tuple[int, int], int] = {}
    for key in capacity:
        if (m := _MIG_MIXED.match(key)) is not None:
            n = cap(key) or Decimal(0)
        elif (m := _MIG_SHARED.match(key)) is not None:
            profile_replicas = _int_label(labels, key[: -len(".shared")] + ".replicas") or replicas
            n = (cap(key) or Decimal(0)) / max(profile_replicas, 1)
        else:
            continue
        profile_key = (int(m.group(1)), int(m.group(2)))
        mig_types[profile_key] = mig_types.get(profile_key, 0) + math.ceil(n)
    if mig_types:
        whole = int(gpu or 0)
        if count is not None or karpenter is not None:
            physical = count if count is not None else karpenter or 0
            return GpuSetup(physical, "mig-mixed", 1, slices, 0, memory)
        fewest, most = mig_gpu_bounds(mig_types, gpu_gb, slices)
        config = str(labels.get("nvidia.com/mig.config", ""))
        inferred = None
        if fewest != most and not config.startswith("all-"):
            split_devices = sum(mig_types.values())
            inferred = (
                f"MIG lower bound: {whole} whole + {fewest} split GPU(s); its {split_devices} MIG "
                f"device(s) fit on {fewest} to {most} GPUs"
            )
        return GpuSetup(whole + fewest, "mig-mixed", 1, slices, 0, memory, inferred=inferred)
    if "hami.io/node-nvidia-register" in annotations:
        physical = count if count is not None else karpenter or int((gpu or 0) / 10)
        split = int((gpu or 0) / physical) if physical else 1
        return GpuSetup(physical, "hami", max(split, 1), slices, 0, memory)
    gpushare = cap("aliyun.com/gpu-count")
    if gpushare is not None:
        mem = cap("aliyun.com/gpu-mem")
        unit = mem / gpushare if mem is not None and gpushare else None
        return GpuSetup(int(gpushare), "gpushare", 1, slices, 0, memory, unit)
    shared = cap("nvidia.com/gpu.shared")
    if (
        strategy in ("time-slicing", "mps")
        or replicas > 1
        or product.upper().endswith("-SHARED")
        or shared
    ):
        sharing = strategy if strategy in ("time-slicing", "mps") else "time-slicing"
        # renameByDefault: the shared GPUs are nvidia.com/gpu.shared (nvidia.com/gpu 0);
        # otherwise nvidia.com/gpu counts the replicas
        exposed = int(shared or 0) + (int(gpu or 0) if not shared else 0)
        unshared = int(gpu or 0) if shared else 0  # GPUs a mixed config leaves whole
        stated = count if count is not None else karpenter
        if stated is not None:
            if replicas_label is None and stated > unshared and exposed:
                replicas = max(1, round(exposed / (stated - unshared)))
            return GpuSetup(stated, sharing, replicas, slices, 0, memory)
        if replicas_label:
            return GpuSetup(unshared + math.ceil(exposed / replicas), sharing, replicas, slices,
                            0, memory)  # fmt: skip
        if not exposed:
            return GpuSetup(unshared, sharing, 1, slices, 0, memory)
        # no count, no replicas: at least one GPU, at most exposed / 2 (a shared GPU has
        # 2 replicas or more); counted as the fewest, each replica 1/exposed of it
        inferred = (
            f"replicas unknown: {exposed} shared GPU(s) without a replica count are 1 to "
            f"{max(1, exposed // 2)} physical GPU(s); counted {unshared + 1}, the fewest"
        )
        return GpuSetup(
            unshared + 1, sharing, exposed, slices, 0, memory, inferred=inferred,
            replicas_inferred=True,
        )  # fmt: skip
    if gpu is not None:
        physical = int(gpu)
    else:
        physical = count if count is not None else karpenter or 0
    return GpuSetup(physical, "none", 1, slices, 0, memory)


_NO_SETUP = GpuSetup()  # a node of unknown setup: whole GPUs


def _whole(value: Decimal, what: str) -> Decimal:
    """An extended resource's value, which Kubernetes holds to whole numbers."""
    if not is_whole(value):
        raise _Unmappable(
            "gpus", f"{value}", f"{what} {value} is not a whole number: Kubernetes "
            "refuses fractional extended resources",
        )  # fmt: skip
    if value < 0:
        raise _Unmappable("gpus", f"{value}", f"{what} {value} is negative")
    return value


def stored_setup(row: Mapping[str, Any]) -> GpuSetup:
    """The GPU setup of a node row an earlier call stored (its extra columns)."""
    product = str(row.get("gpu_model_raw") or "")
    per_gpu = int(row.get("gpu_mig_per_gpu") or 0)
    mig = _MIG_PRODUCT.search(product)
    unit = row.get("gpushare_unit")
    return GpuSetup(
        int(row.get("gpus") or 0),
        str(row.get("gpu_sharing") or "none"),
        int(row.get("gpu_replicas") or 1),
        4 if "A30" in product.upper() else 7,
        int(mig.group(1)) if mig else 0,
        row.get("gpu_memory_mib"),
        Decimal(str(unit)) if unit else None,
        per_gpu,
        row.get("gpus_inferred"),
        bool(row.get("gpu_replicas_inferred")),
    )


def _taint_keys(node: Mapping[str, Any]) -> set[str]:
    return {str(t.get("key")) for t in (node.get("spec") or {}).get("taints") or []}


def node_health(node: Mapping[str, Any]) -> str:
    """down, cordoned, degraded or healthy, in that precedence."""
    taints = _taint_keys(node)
    ready = _condition(node, "Ready")
    if (ready is not None and ready.get("status") != "True") or taints & {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    }:
        return "down"
    if (node.get("spec") or {}).get(
        "unschedulable"
    ) or "node.kubernetes.io/unschedulable" in taints:
        return "cordoned"
    status = node.get("status") or {}
    cap = (status.get("capacity") or {}).get("nvidia.com/gpu")
    alloc = (status.get("allocatable") or {}).get("nvidia.com/gpu")
    if (
        cap is not None
        and alloc is not None
        and _quantity(cap, "capacity nvidia.com/gpu", "gpus")
        > _quantity(alloc, "allocatable nvidia.com/gpu", "gpus")
    ):
        return "degraded"
    for kind in ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"):
        c = _condition(node, kind)
        if c is not None and c.get("status") == "True":
            return "degraded"
    if taints & {
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/network-unavailable",
    }:
        return "degraded"
    return "healthy"


def switch_id(labels: Mapping[str, Any]) -> str | None:
    """The path of topology labels down to the leaf level (``blockA/sb3``), or None."""
    path = _topology_path(labels)
    return "/".join(path) if path else None


def block_id(labels: Mapping[str, Any]) -> str | None:
    """The path of topology labels down to the level above the leaf (``blockA``), or None."""
    path = _topology_path(labels)
    return "/".join(path[:-1]) if len(path) > 1 else None


def _topology_path(labels: Mapping[str, Any]) -> list[str]:
    """The values of the first topology label family found, top level first."""
    for family in TOPOLOGY_FAMILIES:
        present = []
        for level in family:
            value = next((labels[k] for k in level if labels.get(k) not in (None, "")), None)
            if value is not None:
                present.append(str(value))
        if present:
            return present
    return []


def node_model(labels: Mapping[str, Any], gpus: int) -> str:
    for key in MODEL_LABELS:
        model = canonical_model(labels.get(key))
        if model:
            return model
    return "unknown" if gpus > 0 else "CPU"


def node_row(node: Mapping[str, Any]) -> dict[str, Any]:
    check_times(node, "node_id")
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    status = node.get("status") or {}
    alloc = status.get("allocatable") or status.get("capacity") or {}
    capacity = status.get("capacity") or {}
    setup = gpu_setup(node)
    row: dict[str, Any] = {
        "node_id": str(meta.get("name")),
        "gpu_model": node_model(labels, setup.physical),
        "gpus": setup.physical,
        "switch_id": switch_id(labels),
        "block_id": block_id(labels),
        "gpu_sharing": setup.sharing,
        "gpu_replicas": setup.replicas,
        "gpu_model_raw": next((str(labels[k]) for k in MODEL_LABELS if labels.get(k)), None),
        "nvlink_domain": labels.get("nvidia.com/gpu.clique"),
        "capacity_gpu_units": None,
        # what a later call needs to turn the pods of this node into physical GPUs
        "gpu_mig_per_gpu": setup.mig_per_gpu or None,
        "gpu_memory_mib": setup.gpu_memory_mib,
        "gpushare_unit": float(setup.gpushare_unit) if setup.gpushare_unit else None,
        "gpus_inferred": setup.inferred,
        "gpu_replicas_inferred": setup.replicas_inferred or None,
    }
    if "nvidia.com/gpu" in capacity:
        row["capacity_gpu_units"] = float(
            _quantity(capacity["nvidia.com/gpu"], "capacity nvidia.com/gpu", "gpus")
        )
    row["cpus"] = float(_quantity(alloc.get("cpu", "0"), "allocatable cpu", "cpus"))
    row["memory_gib"] = float(
        _quantity(alloc.get("memory", "0"), "allocatable memory", "memory_gib") / _GIB
    )
    row["health"] = node_health(node)
    return row


# -- pods ----------------------------------------------------------------------


def pod_gpus(
    request: Mapping[str, Decimal], annotations: Mapping[str, Any], setup: GpuSetup | None
) -> tuple[float, str | None]:
    """A pod's GPUs as physical GPUs (shares below 1), and the resource it named."""
    setup = setup or _NO_SETUP
    total = _ZERO
    names: list[str] = []
    for key, n in request.items():
        if not n:
            continue
        m = _MIG_RESOURCE.match(key) if key.startswith("nvidia.com/mig-") else None
        if m:
            sized = _MIG_MIXED.match(key)
            gpu_gb = setup.gpu_memory_mib / 1024 if setup.gpu_memory_mib else None
            if sized and gpu_gb:  # one device is 1/devices-per-GPU of its GPU
                per_gpu = mig_devices_per_gpu(
                    int(sized.group(1)), int(sized.group(2)), gpu_gb, setup.slices
                )
                total += n / per_gpu
            else:
                total += n * int(m.group(1)) / setup.slices
            names.append(key)
    whole = request.get("nvidia.com/gpu") or _ZERO
    shared = request.get("nvidia.com/gpu.shared") or _ZERO
    if shared:
        total += shared / max(setup.replicas, 1)
        names.append("nvidia.com/gpu.shared")
    if whole:
        names.append("nvidia.com/gpu")
        if setup.sharing == "mig-single":
            if setup.mig_per_gpu:  # one device is 1/devices-per-GPU of its GPU
                total += whole / setup.mig_per_gpu
            else:
                total += whole * setup.mig_g / setup.slices
        elif setup.sharing in ("time-slicing", "mps"):
            total += whole / max(setup.replicas, 1)
        elif setup.sharing == "hami" or not _HAMI_RESOURCES.isdisjoint(request):
            cores = request.get("nvidia.com/gpucores")
            mem = request.get("nvidia.com/gpumem")
            pct = request.get("nvidia.com/gpumem-percentage")
            if cores:
                share = cores / 100
            elif mem and setup.gpu_memory_mib:
                share = mem / Decimal(setup.gpu_memory_mib)
            elif pct:
                share = pct / 100
            else:
                share = Decimal(1) / max(setup.replicas, 1)
            total += whole * min(share, Decimal(1))
        else:
            total += whole
    gpushare = request.get("aliyun.com/gpu-mem")
    if gpushare:
        names.append("aliyun.com/gpu-mem")
        if setup.gpushare_unit:
            total += min(gpushare / setup.gpushare_unit, Decimal(1))
        else:
            raise _Unmappable(
                "gpus", str(gpushare), "aliyun.com/gpu-mem on a node without aliyun.com/gpu-count"
            )
    if request.get("aliyun.com/gpu-count"):
        total += request["aliyun.com/gpu-count"]
        names.append("aliyun.com/gpu-count")
    fraction = annotations.get("gpu-fraction")
    if fraction is not None and not total:
        try:
            share = Decimal(str(fraction))
        except ArithmeticError:
            raise _Unmappable(
                "gpus", str(fraction), f"gpu-fraction {fraction!r} is not a number"
            ) from None
        devices = Decimal(str(annotations.get("gpu-fraction-num-devices", "1")))
        total += share * devices
        names.append("gpu-fraction")
    return float(total), ("+".join(names) or None)


def pod_devices(
    request: Mapping[str, Decimal], annotations: Mapping[str, Any], setup: GpuSetup | None
) -> int:
    """GPUs a pod's share is spread over: N for N HAMi vGPUs or KAI ``gpu-fraction``
    devices below a whole GPU each (each on its own GPU), else 1."""
    setup = setup or _NO_SETUP
    whole = request.get("nvidia.com/gpu") or _ZERO
    if whole > 1 and whole == int(whole) and (
        setup.sharing == "hami" or not _HAMI_RESOURCES.isdisjoint(request)
    ):
        return int(whole)
    fraction = annotations.get("gpu-fraction")
    if fraction is not None and not whole:
        try:
            devices = Decimal(str(annotations.get("gpu-fraction-num-devices", "1")))
            if Decimal(str(fraction)) < 1 and devices > 1 and devices == int(devices):
                return int(devices)
        except ArithmeticError:
            return 1
    return 1


def job_id(meta: Mapping[str, Any], uid: str) -> str:
    """The gang a pod belongs to (namespace/name of its first marker), or its own UID."""
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    if not labels and not annotations:
        return uid
    ns = meta.get("namespace", "")
    for where, key in GANG_MARKERS:
        value = (annotations if where == "annotation" else labels).get(key)
        if value:
            if key == "leaderworkerset.sigs.k8s.io/name":
                index = labels.get("leaderworkerset.sigs.k8s.io/group-index", "0")
                return f"{ns}/{value}/{index}"
            return f"{ns}/{value}"
    return uid


def workload_kind(gpus: float, owner: str | None) -> str:
    if gpus <= 0:
        return "cpu_only"
    if owner in _SERVING_OWNERS:
        return "online_inference"
    if owner in _TRAINING_OWNERS:
        return "training"
    if owner == "Notebook":
        return "development"
    return "other"


def _owner(meta: Mapping[str, Any]) -> tuple[str | None, str | None]:
    owners = meta.get("ownerReferences") or []
    for o in owners:
        if o.get("controller"):
            return o.get("kind"), o.get("name")
    if owners:
        return owners[0].get("kind"), owners[0].get("name")
    return None, None


def _finished(pod: Mapping[str, Any]) -> datetime | None:
    status = pod.get("status") or {}
    times = []
    for key in _STATUS_GROUPS:
        for cs in status.get(key) or []:
            t = _time(((cs.get("state") or {}).get("terminated") or {}).get("finishedAt"))
            if t is not None:
                times.append(t)
    return max(times, default=None)


def _transition_times(obj: Mapping[str, Any]) -> list[object]:
    """The raw ``lastTransitionTime`` of each of an object's conditions."""
    return [c.get("lastTransitionTime") for c in _conditions(obj)]


def _bind_time(pod: Mapping[str, Any]) -> datetime | None:
    sched = _condition(pod, "PodScheduled")
    if sched is not None and sched.get("status") == "True":
        t = _time(sched.get("lastTransitionTime"))
        if t is not None:
            return t
    status = pod.get("status") or {}
    return _time(status.get("startTime")) or _time(
        (pod.get("metadata") or {}).get("creationTimestamp")
    )


def _selected_models(spec: Mapping[str, Any]) -> str | None:
    """GPU models a pod asks for through nodeSelector or required node affinity."""
    found: set[str] = set()
    selector = spec.get("nodeSelector") or {}
    for key in MODEL_LABELS:
        if selector.get(key):
            found.add(canonical_model(str(selector[key])) or "")
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in affinity.get("nodeSelectorTerms") or []:
        for expr in term.get("matchExpressions") or []:
            if expr.get("key") in MODEL_LABELS and expr.get("operator") == "In":
                found.update(canonical_model(str(v)) or "" for v in expr.get("values") or [])
    found.discard("")
    return "|".join(sorted(found)) or None


# -- health over time (node_events) ----------------------------------------------

_PRESSURES = ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")


def node_conditions(node: Mapping[str, Any]) -> dict[str, tuple[bool, datetime | None, str]]:
    """What one snapshot of a node says of each kind of unhealth: kind -> (active, since,
    reason). ``since`` is the time the node records for the state's last change (a
    condition's ``lastTransitionTime``, a taint's ``timeAdded``), or None where it records
    none (a cordon, withdrawn GPUs): the snapshots then date it."""
    found: dict[str, tuple[bool, datetime | None, str]] = {}
    spec = node.get("spec") if isinstance(node.get("spec"), dict) else {}
    taints = {str(t.get("key")): t for t in (spec or {}).get("taints") or [] if isinstance(t, dict)}
    ready = _condition(node, "Ready")
    if ready is not None:
        active = ready.get("status") != "True"
        why = f"Ready {ready.get('status')}" + (f": {ready['reason']}" if ready.get("reason") else "")
        found["Ready"] = (active, _time(ready.get("lastTransitionTime")), why)
    else:
        gone = next((taints[k] for k in ("node.kubernetes.io/not-ready",
                                         "node.kubernetes.io/unreachable") if k in taints), None)
        found["Ready"] = (gone is not None, _time((gone or {}).get("timeAdded")),
                          str((gone or {}).get("key") or "Ready"))  # fmt: skip
    cordon = taints.get("node.kubernetes.io/unschedulable")
    found["unschedulable"] = (
        bool((spec or {}).get("unschedulable")) or cordon is not None,
        _time((cordon or {}).get("timeAdded")),
        "unschedulable (cordoned)",
    )
    for kind in _PRESSURES:
        c = _condition(node, kind)
        if c is not None:
            found[kind] = (c.get("status") == "True", _time(c.get("lastTransitionTime")), kind)
    status = node.get("status") if isinstance(node.get("status"), dict) else {}
    cap = ((status or {}).get("capacity") or {}).get("nvidia.com/gpu")
    alloc = ((status or {}).get("allocatable") or {}).get("nvidia.com/gpu")
    try:
        withdrawn = cap is not None and alloc is not None and (
            parse_quantity(cap) > parse_quantity(alloc)
        )  # fmt: skip
    except QuantityError:
        withdrawn = False
    found["allocatable"] = (withdrawn, None, f"nvidia.com/gpu: {alloc} of {cap} allocatable")
    return found


# the state each kind means in node_events, and the source named
EVENT_KINDS = {
    "Ready": "down",
    "unschedulable": "cordoned",
    **{k: "degraded" for k in _PRESSURES},
    "allocatable": "degraded",
    "absent": "down",
}


def event_source(kind: str) -> str:
    """The ``source`` of a node event of one kind (the key keeps kinds apart)."""
    if kind in ("unschedulable", "absent", "allocatable"):
        return f"kubernetes:{kind}"
    return f"kubernetes:condition/{kind}"


@dataclass
class _Open:
    """An interval still going at the newest observation: its start, last sighting, reason,
    the time the node recorded for its start (to tell a new interval from the same one),
    and the file and item that last showed it."""

    start: datetime
    seen: datetime
    reason: str
    since: datetime | None
    file: str
    row: int


def node_intervals(
    name: str,
    observations: list[tuple[datetime, str, int, dict[str, tuple[bool, datetime | None, str]] | None]],
    stored: Mapping[str, _Open],
) -> list[dict[str, Any]]:
    """The intervals of one node's unhealth, from its observations (snapshot time, file,
    item, what it says; ``None`` where a snapshot listing nodes does not list it) in time
    order, continuing the intervals an earlier call left open (``stored``, by kind).

    A state the node dates (Ready's ``lastTransitionTime``) starts then and ends at the
    transition that ends it; one it does not date starts at the first snapshot that shows
    it. One that a later snapshot no longer shows without saying when it ended (another
    transition since, the node gone, a cordon lifted) ends at the last snapshot that
    showed it: the earliest it can have ended. An absent node is down from the first
    listing without it until it is listed again.
    """
    rows: list[dict[str, Any]] = []
    going: dict[str, _Open] = dict(stored)

    def close(kind: str, end: datetime | None) -> None:
        o = going.pop(kind)
        rows.append({
            "node_id": name, "gpu_index": None, "start_time": o.start,
            "end_time": max(end, o.start) if end is not None else None,
            "state": EVENT_KINDS[kind], "reason": o.reason, "source": event_source(kind),
            "last_seen": o.seen, "recorded_time": o.since, "_file": o.file, "_row": o.row,
        })  # fmt: skip

    for t, file, row, says in observations:
        if says is None:  # not listed: every state ends at its last sighting; absent from now
            for kind in [k for k in going if k != "absent"]:
                close(kind, going[kind].seen)
            if "absent" not in going:
                going["absent"] = _Open(t, t, "not listed (scaled away or deleted)", None, file, row)
            else:
                going["absent"].seen = t
            continue
        if "absent" in going:
            close("absent", t)  # listed again
        for kind in [k for k in going if k not in says]:
            close(kind, going[kind].seen)  # the node no longer reports it
        for kind, (active, since, reason) in says.items():
            o = going.get(kind)
            if o is not None and (not active or (since is not None and since != o.since)):
                # ended: at its recorded transition when the node says one, else at its
                # last sighting (the earliest it can have ended)
                ended = since if not active and since is not None and since <= t else o.seen
                close(kind, ended if since is None or since >= o.start else o.seen)
                o = None
            if active:
                if o is None:
                    start = since if since is not None and since <= t else t
                    going[kind] = _Open(start, t, reason, since, file, row)
                else:
                    o.seen, o.file, o.row = t, file, row
    for kind in list(going):
        close(kind, None)
    return rows


# -- bound pods as read: their values, packed ------------------------------------

def _pack(values: Mapping[str, Any]) -> tuple[Any, ...]:
    """A pod's mapped values as a tuple of :data:`_PACK_KEYS` (a dict costs 5x more)."""
    return tuple(map(values.get, _PACK_KEYS))


def _vals(values: tuple[Any, ...]) -> dict[str, Any]:
    """A pod's packed values as a dict."""
    return dict(zip(_PACK_KEYS, values, strict=True))


class _PodRows:
    """The values of the pods a call maps (packed), turned into polars frames a batch at a
    time: a pod then costs its columns (a few hundred bytes), not a tuple of objects. Its
    file is a number (:meth:`file_no`)."""

    BATCH = 1 << 15

    def __init__(self) -> None:
        self.batch: list[tuple[Any, ...]] = []
        self.frames: list[pl.DataFrame] = []
        self.count = 0
        self.files: dict[str, int] = {}

    def file_no(self, file: str) -> int:
        return self.files.setdefault(file, len(self.files))

    def column(self, key: str) -> pl.Series:
        """One column of every row kept so far."""
        self._flush()
        if not self.frames:
            return pl.Series(key, [], dtype=_PACK_SCHEMA[key])
        return pl.concat([f[key] for f in self.frames], rechunk=False)

    def add(self, values: tuple[Any, ...]) -> int:
        """Keep one pod's packed values; returns its row number."""
        self.batch.append(values)
        self.count += 1
        if len(self.batch) >= self.BATCH:
            self._flush()
        return self.count - 1

    def _flush(self) -> None:
        if not self.batch:
            return
        columns = list(zip(*self.batch, strict=True))
        self.batch = []
        series = []
        for (key, dtype), column in zip(_PACK_SCHEMA.items(), columns, strict=True):
            series.append(pl.Series(key, _typed(list(column), dtype), dtype=dtype))
        columns.clear()
        self.frames.append(pl.DataFrame(series))

    def frame(self) -> pl.DataFrame:
        """Every row kept, in the order kept (the batches are let go)."""
        self._flush()
        frames, self.frames = self.frames, []
        if not frames:
            return pl.DataFrame(schema=_PACK_SCHEMA)
        return pl.concat(frames, rechunk=False)


@dataclass(slots=True)
class _Taken:
    """A bound pod mapped as it was read, its values in the call's :class:`_PodRows` (row
    ``row``), until its snapshot lists it."""

    row: int
    uid: str
    pod_name: tuple[Any, Any]  # (namespace, name): a name listed twice in a snapshot


@dataclass(slots=True)
class _Bound:
    """A bound pod as the read maps it at once (its node's GPU setup known from earlier in
    its document) that its snapshot still has to finish (:func:`_as_read`): what the
    mapping needs, never the object itself."""

    node: str
    phase: Any
    values: tuple[Any, ...]
    bind: datetime | None
    finished: datetime | None  # the last container's finish
    last_transition: datetime | None  # a terminal pod without a finish ends here
    terminating: bool
    uid: str
    pod_name: tuple[Any, Any]


def _kind(entry: Any) -> Any:
    """The kind of an object read, or of what the read kept of it."""
    return "Pod" if isinstance(entry, (_Taken, _Bound)) else entry.get("kind")


def _pod_name(namespace: object, name: object) -> tuple[Any, Any]:
    return (namespace, name) if isinstance(namespace, str) and isinstance(name, str) else (
        str(namespace), str(name)
    )  # fmt: skip


def _bound(
    mapper: _Mapper,
    item: Mapping[str, Any],
    setups: Mapping[str, GpuSetup],
    rows: _PodRows,
    fileno: int,
    number: int,
    times_read: bool = False,
) -> _Taken | _Bound | None:
    """A bound pod (item ``number`` of file ``fileno``) mapped as it is read, where its
    node's setup is known: its values go to ``rows`` (or, where its snapshot must finish
    it, to a :class:`_Bound`); else None (the object is kept and mapped with the snapshot)."""
    spec = item.get("spec")
    node = spec.get("nodeName") if isinstance(spec, dict) else None
    if not isinstance(node, str) or node not in setups:
        return None
    try:
        values = mapper.pod_values(item, setups[node], times_read)
        status = item.get("status") or {}
        phase = status.get("phase")
        terminal = phase in ("Succeeded", "Failed")
        meta = item.get("metadata") or {}
        finished = last = None
        if terminal:  # it ends at its last container's finish, else its last transition
            finished = _finished(item)
            last = max(filter(None, map(_time, _transition_times(item))), default=None)
        bind = _bind_time(item)
        terminating = bool(meta.get("deletionTimestamp"))
        values.update(alloc_id=values["uid"], node_id=node, start_time=bind, phase=phase,
                      terminating=terminating, finish=(finished or last) if terminal else None,
                      _fileno=fileno, _item=number)  # fmt: skip
        name = _pod_name(values["namespace"], meta.get("name"))
        packed = _pack(values)
        if _as_read(packed, terminal):
            return _Taken(rows.add(packed), values["uid"], name)
        return _Bound(
            values["node_id"], values["phase"], packed, bind, finished, last, terminating,
            values["uid"], name,
        )  # fmt: skip
    except _MALFORMED:
        return None


def _as_read(values: tuple[Any, ...], terminal: bool) -> bool:
    """Whether a pod mapped as it was read needs nothing of its snapshot: it names no GPU
    it does not count, and a finished one has its end."""
    if _get(values, "gpu_resource") and not _get(values, "_reject_reason") and not _get(
        values, "gpus"
    ):
        return False  # a reject naming its node, made with the others below
    return not (terminal and _get(values, "finish") is None)


# -- mapping -------------------------------------------------------------------


@dataclass(slots=True)
class _Obs:
    """One row as one snapshot sees it: its file, item number, time and values."""

    file: str
    row: int
    time: datetime
    values: Any  # a dict, or a pod's values packed (_Packed)


class _Mapper:
    def __init__(self, options: KubernetesOptions) -> None:
        self.options = options
        self._classes: dict[tuple[str | None, int | None], tuple[str | None, str]] = {}

    def priority(
        self, class_name: object, value: object, meta: Mapping[str, Any] | None = None
    ) -> str:
        """The map's word for the class (else the value); else low if Volcano may preempt it."""
        plain = (class_name is None or type(class_name) is str) and (
            value is None or type(value) is int
        )  # a class and value looked up once (True is no 1 here: its text differs)
        known = self._classes.get((class_name, value)) if plain else None  # type: ignore[arg-type]
        if known is None:
            known = (
                self.options.priority_map.lookup(class_name, value),
                default_priority(class_name),
            )
            if plain:
                self._classes[(class_name, value)] = known  # type: ignore[index]
        found, default = known
        if found is not None:
            return found
        for where in ("annotations", "labels"):
            marks = (meta or {}).get(where) or {}
            if str(marks.get(_PREEMPTABLE, "")).lower() == "true":
                return "low"
        return default

    def tenant(self, meta: Mapping[str, Any]) -> str | None:
        if self.options.tenant_label:
            found = (meta.get("labels") or {}).get(self.options.tenant_label)
            if found:
                return str(found)
        return meta.get("namespace")

    def pod_values(
        self, pod: Mapping[str, Any], setup: GpuSetup | None, times_read: bool = False
    ) -> dict[str, Any]:
        """The values shared by a pod's allocation and request rows (``times_read``: every
        time field but ``deletionTimestamp`` is known to be a time)."""
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        annotations = meta.get("annotations") or {}
        uid = str(meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name')}")
        owner_kind, owner_name = _owner(meta)
        values: dict[str, Any] = {
            "uid": uid,
            "job_id": job_id(meta, uid),
            "namespace": meta.get("namespace"),
            "pod": meta.get("name"),
            "priority": self.priority(spec.get("priorityClassName"), spec.get("priority"), meta),
            "priority_class": spec.get("priorityClassName"),
            "tenant": self.tenant(meta),
            "owner_kind": owner_kind,
            "owner_name": owner_name,
            "created": _time(meta.get("creationTimestamp")),
        }
        try:
            deleted = meta.get("deletionTimestamp")
            if not times_read or (deleted is not None and _time(deleted) is None):
                check_times(pod, "start_time" if spec.get("nodeName") else "submit_time")
            request = effective_request(spec)
            gpus, resource = pod_gpus(request, annotations, setup)
            values["gpus"] = gpus
            values["gpu_resource"] = resource
            values["gpu_devices"] = pod_devices(request, annotations, setup)
            if setup is not None and setup.replicas_inferred and gpus and resource and (
                "nvidia.com/gpu" in resource.split("+")
                or "nvidia.com/gpu.shared" in resource.split("+")
            ):
                values["gpus_inferred"] = (
                    f"{resource} on a node of unknown replicas: each replica counted as "
                    f"1/{setup.replicas} of a GPU, the smallest share it can be"
                )
            values["cpus"] = float(request.get("cpu", Decimal(0)))
            values["memory_gib"] = float(request.get("memory", Decimal(0)) / _GIB)
        except _Unmappable as bad:
            values.update(gpus=None, gpu_resource=None, cpus=None, memory_gib=None)
            values["_reject_reason"], values["_reject_column"] = bad.reason, bad.column
            values["_reject_value"] = bad.value
        values["workload"] = workload_kind(values["gpus"] or 0, owner_kind)
        return values


# A field of an unexpected type (a list where kubectl writes an object, ...)
_MALFORMED = (
    AttributeError, TypeError, ValueError, KeyError, IndexError, ArithmeticError, RecursionError
)


def _malformed(kind: str, exc: Exception) -> dict[str, str]:
    """The reject columns of an object that is not shaped as kubectl writes a ``kind``."""
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return {
        "_reject_reason": f"malformed {kind}: a field has an unexpected type ({detail})",
        "_reject_column": {"Node": "node_id", "Pod": "alloc_id"}.get(kind, "request_id"),
    }


def _typed(values: list[Any], dtype: Any) -> list[Any]:
    """A column's values as ``dtype`` holds them: a label of another JSON type becomes text,
    a number or time that is not one becomes missing (and the row a reject where it is needed).
    """
    if dtype == pl.Utf8:
        kind: Any = str
    elif dtype == pl.Float64:
        kind = float
    elif dtype == pl.Int64:
        kind = int
    elif dtype == pl.Boolean:
        kind = bool
    else:
        kind = datetime
    if set(map(type, values)) <= {kind, type(None)}:
        return values
    out: list[Any] = []
    for v in values:
        if v is None or type(v) is kind:
            out.append(v)
        elif kind is str:
            try:
                out.append(json.dumps(v) if isinstance(v, (list, dict)) else str(v))
            except RecursionError:
                out.append("(a value nested too deeply to show)")
        elif kind is float and isinstance(v, (int, float, Decimal)) and not isinstance(v, bool):
            out.append(float(v))
        elif kind is int and isinstance(v, int) and not isinstance(v, bool):
            out.append(v)
        else:
            out.append(None)
    return out


def _unchanged(
    row: Mapping[str, Any], stored: Mapping[str, Any] | None, schema: Mapping[str, Any]
) -> bool:
    """Whether ``row`` holds what the store holds for it already."""
    return stored is not None and all(row.get(k) == stored.get(k) for k in schema)


def _latest(obs: list[_Obs]) -> _Obs:
    return max(obs, key=lambda o: o.time)


_NODE_SCHEMA: dict[str, Any] = {
    "node_id": pl.Utf8,
    "gpu_model": pl.Utf8,
    "gpus": pl.Int64,
    "cpus": pl.Float64,
    "memory_gib": pl.Float64,
    "switch_id": pl.Utf8,
    "block_id": pl.Utf8,
    "health": pl.Utf8,
    "gpu_sharing": pl.Utf8,
    "gpu_replicas": pl.Int64,
    "gpu_model_raw": pl.Utf8,
    "nvlink_domain": pl.Utf8,
    "capacity_gpu_units": pl.Float64,
    "gpu_mig_per_gpu": pl.Int64,
    "gpu_memory_mib": pl.Float64,
    "gpushare_unit": pl.Float64,
    "gpus_inferred": pl.Utf8,
    "gpu_replicas_inferred": pl.Boolean,
    "snapshot_time": pl.Datetime("us"),
    "absent_since": pl.Datetime("us"),
}
_ALLOC_SCHEMA: dict[str, Any] = {
    "alloc_id": pl.Utf8,
    "job_id": pl.Utf8,
    "node_id": pl.Utf8,
    "gpus": pl.Float64,
    "cpus": pl.Float64,
    "memory_gib": pl.Float64,
    "priority": pl.Utf8,
    "workload": pl.Utf8,
    "tenant": pl.Utf8,
    "start_time": pl.Datetime("us"),
    "end_time": pl.Datetime("us"),
    "namespace": pl.Utf8,
    "pod": pl.Utf8,
    "phase": pl.Utf8,
    "terminating": pl.Boolean,
    "priority_class": pl.Utf8,
    "owner_kind": pl.Utf8,
    "owner_name": pl.Utf8,
    "gpu_resource": pl.Utf8,
    "gpu_devices": pl.Int64,
    "gpus_inferred": pl.Utf8,
    "first_seen": pl.Datetime("us"),
    "last_seen": pl.Datetime("us"),
    "finished": pl.Boolean,
    "end_censored": pl.Boolean,
}
_REQUEST_SCHEMA: dict[str, Any] = {
    "request_id": pl.Utf8,
    "submit_time": pl.Datetime("us"),
    "start_time": pl.Datetime("us"),
    "gpu_model": pl.Utf8,
    "gpus": pl.Float64,
    "gpus_per_pod": pl.Float64,
    "cpus_per_gpu": pl.Float64,
    "memory_gib_per_gpu": pl.Float64,
    "cpus": pl.Float64,
    "memory_gib": pl.Float64,
    "locality": pl.Utf8,
    "priority": pl.Utf8,
    "tenant": pl.Utf8,
    "namespace": pl.Utf8,
    "name": pl.Utf8,
    "kind": pl.Utf8,
    "pods": pl.Int64,
    "pending_reason": pl.Utf8,
    "queue": pl.Utf8,
    "last_seen": pl.Datetime("us"),
    "left_queue": pl.Utf8,
    "gpus_inferred": pl.Utf8,
}
_EVENT_SCHEMA: dict[str, Any] = {
    "node_id": pl.Utf8,
    "gpu_index": pl.Int64,
    "start_time": pl.Datetime("us"),
    "end_time": pl.Datetime("us"),
    "state": pl.Utf8,
    "reason": pl.Utf8,
    "source": pl.Utf8,
    "last_seen": pl.Datetime("us"),  # the last snapshot that showed the interval
    "recorded_time": pl.Datetime("us"),  # the node's own time of its start, where it has one
}
_ADAPTER: dict[str, Any] = {
    "_reject_reason": pl.Utf8,
    "_reject_column": pl.Utf8,
    "_reject_value": pl.Utf8,
    "_file": pl.Utf8,
    "_row": pl.Int64,
}
_PACK_SCHEMA: dict[str, Any] = {
    **_ALLOC_SCHEMA,
    "finish": pl.Datetime("us"),  # its last container's finish, when it has one
    "_reject_reason": pl.Utf8,
    "_reject_column": pl.Utf8,
    "_reject_value": pl.Utf8,
    "_fileno": pl.Int64,  # its file (_PodRows.file_no) and item there
    "_item": pl.Int64,
}
_PACK_KEYS = tuple(_PACK_SCHEMA)
_PACK_INDEX = {k: i for i, k in enumerate(_PACK_KEYS)}


def _get(values: tuple[Any, ...], key: str) -> Any:
    """One of a pod's packed values."""
    return values[_PACK_INDEX[key]]


class _Sightings:
    """The sightings of pods mapped with their snapshot (not as read) as allocations: its
    key, the snapshot's time, the row of its values in the call's :class:`_PodRows`, and
    its order (snapshot, place in it)."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.times: list[datetime] = []
        self.rows: list[int] = []
        self.order: list[int] = []

    def add(self, key: str, time: datetime, row: int, order: int) -> None:
        self.keys.append(key)
        self.times.append(time)
        self.rows.append(row)
        self.order.append(order)

    def frame(self) -> pl.DataFrame:
        columns = (self.keys, self.times, self.rows, self.order)
        return pl.DataFrame(dict(zip(_SIGHTING, columns, strict=True)), schema=_SIGHTING)


_SIGHTING: dict[str, Any] = {
    "_key": pl.Utf8, "_t": pl.Datetime("us"), "_at": pl.Int64, "_seq": pl.Int64
}  # fmt: skip
_PLACE = 32  # a sighting's order: snapshot << _PLACE | its place in the snapshot


def _taken_sightings(
    rows: _PodRows, taken: list[tuple[datetime, int, array[int], array[int]]]
) -> tuple[pl.DataFrame, list[pl.DataFrame]]:
    """The sightings of the pods mapped as they were read (per snapshot: its time, number,
    and its pods' rows and places), those that are allocations (a reject, or holding GPUs,
    CPUs or memory), and per snapshot the latest bind of each job (else the snapshot's time)."""
    if not taken:
        return pl.DataFrame(schema=_SIGHTING), []
    columns = ["alloc_id", "job_id", "start_time", "gpus", "cpus", "memory_gib", "_reject_reason"]
    held = (pl.col("_reject_reason").is_not_null() & (pl.col("_reject_reason") != "")) | (
        pl.any_horizontal([pl.col(k).fill_null(0) != 0 for k in ("gpus", "cpus", "memory_gib")])
    )  # truthy, as Python takes them (NaN too)
    found, binds = [], []
    values = {k: rows.column(k) for k in columns}
    for time, number, at, place in taken:
        mine = pl.Series("_at", at, dtype=pl.Int64)
        frame = pl.DataFrame([mine, *(values[k].gather(mine) for k in columns)]).with_columns(
            _t=pl.lit(time, pl.Datetime("us")),
            _seq=pl.Series(place, dtype=pl.Int64) + (number << _PLACE),
        )
        key = pl.col("alloc_id").alias("_key")
        found.append(frame.filter(held).select(key, "_t", "_at", "_seq"))
        binds.append(_latest_binds(frame))
    return pl.concat(found), binds


def _latest_binds(frame: pl.DataFrame) -> pl.DataFrame:
    """Per job of a snapshot's bound pods (``job_id``, ``start_time``, the snapshot's time
    ``_t``), its latest bind (``bound``; a pod without one binds at the snapshot)."""
    return frame.group_by("job_id").agg(pl.coalesce("start_time", "_t").max().alias("bound"))


def _stored_frame(
    store: Store, table: str, marker: str, where: str, keyed: tuple[str, str] | None = None
) -> pl.DataFrame | None:
    """Rows an earlier kubernetes ingest stored (they carry ``marker``) that may still
    change, in the table's order: those ``where`` holds for and, given ``keyed`` (a join
    of the table as ``t``, ``JOIN view AS m ON m.key = t.id``, and a condition on the
    joined rows), those it joins that ``where`` does not hold for.

    The table holds every pod ever seen, so neither part may read whole rows of it:
    ``where`` tests for an empty column (DuckDB skips the row groups whose statistics
    say they hold none) and the join probes one key column with the call's keys.
    An ``OR`` of the two made DuckDB evaluate both over every row (on a store of 9 days
    of history, 0.5 s a call for requests, where the two parts take 0.08 s).
    """
    columns = store.column_types(table)
    if marker not in columns:
        return None
    marked = f't."{marker}" IS NOT NULL'
    text = f'SELECT t.*, t.rowid AS _stored_row FROM "{table}" AS t WHERE {marked} AND ({where})'
    if keyed is not None:
        join, condition = keyed
        text += (f' UNION ALL SELECT t.*, t.rowid AS _stored_row FROM "{table}" AS t {join} '
                 f"WHERE {marked} AND NOT coalesce({where}, false) AND ({condition})")  # fmt: skip
    return store.sql(f"SELECT * EXCLUDE (_stored_row) FROM ({text}) ORDER BY _stored_row")


def _stored(
    store: Store, table: str, marker: str, where: str, keyed: tuple[str, str] | None = None
) -> list[dict[str, Any]]:
    """:func:`_stored_frame` as dicts."""
    found = _stored_frame(store, table, marker, where, keyed)
    return [] if found is None else found.to_dicts()


def _taken_column(snapshots: list[_Snapshot], key: str) -> pl.Series:
    """Column ``key`` of the values of the pods the snapshots list that were mapped as read."""
    rows = next((s.rows for s in snapshots if s.rows is not None), None)
    at = array("q", (e for snap in snapshots for e in snap.pods.values() if isinstance(e, int)))
    if rows is None or not at:
        return pl.Series(key, [], dtype=pl.Utf8)
    return rows.column(key).gather(pl.Series(at, dtype=pl.Int64))


def _stored_allocations(store: Store, snapshots: list[_Snapshot]) -> pl.DataFrame | None:
    """Stored kubernetes allocations still open, or listed again by this call (a pod
    stored as a row per GPU by its first, ``uid#0``: :func:`_stored_values` reads no
    other)."""
    others = [k for snap in snapshots for k, e in snap.pods.items() if not isinstance(e, int)]
    taken = _taken_column(snapshots, "alloc_id")
    uids = pl.concat([pl.Series("uid", others, dtype=pl.Utf8), taken.alias("uid")]).unique()
    store.register_frame(_UIDS, pl.concat([uids, uids + "#0"]).to_frame("key"))
    try:
        return _stored_frame(
            store, "allocations", "last_seen", "t.end_time IS NULL",
            keyed=(f"JOIN {_UIDS} AS m ON m.key = t.alloc_id", "TRUE"),
        )  # fmt: skip
    finally:
        store.unregister(_UIDS)


def _stored_values(stored: pl.DataFrame | None, fileno: int) -> pl.DataFrame:
    """Stored allocations as packed values of pods (:data:`_PACK_SCHEMA`, file ``fileno``,
    item 0) with ``_key``, ``_t`` (their last sighting), ``first_seen`` and ``_stored_id``
    (the id they are stored under): a pod stored as a row per GPU (``uid#0``, ``uid#1``,
    ...) is rejoined."""
    extra: dict[str, Any] = {"_key": pl.Utf8, "_t": pl.Datetime("us"), "_stored_id": pl.Utf8}
    if stored is None or stored.is_empty():
        return pl.DataFrame(schema={**_PACK_SCHEMA, **extra})
    missing = [pl.lit(None, dtype).alias(k) for k, dtype in _ALLOC_SCHEMA.items()
               if k not in stored.columns]  # fmt: skip
    stored = stored.with_columns(missing).select(
        [pl.col(k).cast(dtype) for k, dtype in _ALLOC_SCHEMA.items()]
    )
    devices = pl.col("gpu_devices").fill_null(0)
    devices = pl.when(devices == 0).then(1).otherwise(devices)  # int(devices or 1)
    alloc_id = pl.col("alloc_id")
    hashed = alloc_id.str.contains("#", literal=True)
    index = pl.when(hashed).then(alloc_id.str.extract(r"#([^#]*)$", 1)).otherwise(alloc_id)
    base = pl.when(hashed).then(alloc_id.str.replace(r"#[^#]*$", "")).otherwise(pl.lit(""))
    split = devices > 1
    stored = stored.filter(~split | (index == "0")).with_columns(
        alloc_id.alias("_stored_id"),
        pl.when(split).then(base).otherwise(alloc_id).alias("alloc_id"),
        *[pl.when(split).then(pl.col(k) * devices).otherwise(pl.col(k)).alias(k)
          for k in ("gpus", "cpus", "memory_gib")],
    )  # fmt: skip
    return stored.with_columns(
        finish=pl.when(pl.col("finished")).then(pl.col("end_time")),
        _reject_reason=pl.lit(None, pl.Utf8),
        _reject_column=pl.lit(None, pl.Utf8),
        _reject_value=pl.lit(None, pl.Utf8),
        _fileno=pl.lit(fileno, pl.Int64),
        _item=pl.lit(0, pl.Int64),
        _key=alloc_id,
        _t=pl.col("last_seen"),
    ).select(*_PACK_SCHEMA, *extra)


def _gathered(frame: pl.DataFrame, values: pl.DataFrame, *keys: str) -> pl.DataFrame:
    """``frame`` with the ``values`` of each of its rows (``_at``) named."""
    return frame.with_columns([values[k].gather(frame["_at"]) for k in keys])


def _merge_allocations(
    rows: _PodRows,
    sightings: pl.DataFrame,
    stored: pl.DataFrame | None,
    latest_pods: datetime | None,
    newest_file: str,
) -> tuple[pl.DataFrame, int]:
    """The allocation rows of a call, and how many hold shares of unknown size.

    Per pod (key), over its ``sightings`` in this call's snapshots and its row stored by
    an earlier call: its values are those of its newest sighting (the first of equals),
    its first sighting the earliest, its end the latest container finish, else (no later
    snapshot listing pods lists it) its last sighting, censored; a stored row that comes
    out as stored is not written again. A pod holding a share on each of N GPUs becomes
    N rows of one share each (``uid#0``, ...), so it is never packed as one larger share.
    The choices are made on the sightings alone and the values gathered once, at the end
    (a million pods' values are a few hundred megabytes); a call whose pods are all new
    and seen once keeps its values as they are.
    """
    old = _stored_values(stored, rows.file_no(newest_file))
    files = list(rows.files)
    mine = rows.frame()
    height = mine.height  # the stored rows' values follow this call's
    values = pl.concat([mine, old.select(*_PACK_SCHEMA)], how="vertical", rechunk=False)
    del mine
    last = int(sightings.select(pl.col("_seq").max()).item() or 0) + 1 if sightings.height else 0
    sightings = pl.concat([
        sightings,
        old.select("_key", "_t").with_columns(
            _at=pl.int_range(height, height + pl.len(), dtype=pl.Int64),
            _seq=pl.int_range(last, last + pl.len(), dtype=pl.Int64),
        ),
    ])  # fmt: skip

    sightings = _gathered(sightings, values, "finish", "first_seen")
    if sightings["_key"].n_unique() == sightings.height:  # each pod seen once
        picked = sightings.sort("_seq").select(
            *_SIGHTING, _first=pl.col("_seq"), _first_seen=pl.coalesce("first_seen", "_t"),
            _finish=pl.col("finish"),
        )  # fmt: skip
    else:
        newest = sightings.sort(["_t", "_seq"], descending=[True, False]).unique(
            "_key", keep="first", maintain_order=True
        )
        spans = sightings.group_by("_key").agg(
            _first=pl.col("_seq").min(),
            _first_seen=pl.coalesce("first_seen", "_t").min(),
            _finish=pl.col("finish").max(),
        )
        picked = newest.select(*_SIGHTING).join(spans, on="_key").sort("_first")
    del sightings
    finished = pl.col("_finish").is_not_null()
    later = pl.col("_t") < latest_pods if latest_pods is not None else pl.lit(False)
    censored = ~finished & later
    picked = _gathered(
        picked, values, "start_time", "gpu_devices", "_reject_reason", "gpus_inferred",
        "_fileno", "_item",
    )  # fmt: skip
    picked = picked.with_columns(
        alloc_id=pl.col("_key"),
        first_seen=pl.col("_first_seen"),
        last_seen=pl.col("_t"),
        finished=finished,
        end_censored=censored,
        # never before its start (a clock ahead of the snapshot's, or a coarse time)
        end_time=pl.when(finished).then(pl.col("_finish"))
        .when(censored).then(pl.max_horizontal("_t", "start_time")),
    )  # fmt: skip
    computed = ["alloc_id", "first_seen", "last_seen", "finished", "end_censored", "end_time"]
    if not old.is_empty():  # a stored row that comes out as stored is not written again
        # (compared with the id it is stored under: a pod stored as a row per GPU, uid#0,
        # is written again, as it always was)
        kept = picked.filter(pl.col("_item") == 0)
        again = values.select(pl.all().gather(kept["_at"])).with_columns(
            kept.select(computed).get_columns()
        )
        before = old.with_columns(alloc_id=pl.col("_stored_id")).select("_key", *_ALLOC_SCHEMA)
        before = before.unique("_key", keep="last", maintain_order=True)
        compared = again.with_columns(kept["_key"]).join(
            before.rename({k: f"{k}_stored" for k in _ALLOC_SCHEMA}),
            on="_key", how="left", maintain_order="left",
        )  # fmt: skip
        same = pl.lit(True)
        for k, dtype in _ALLOC_SCHEMA.items():
            equal = pl.col(k).eq_missing(pl.col(f"{k}_stored"))
            if dtype == pl.Float64:  # NaN is equal to nothing, as in Python
                equal = equal & ~pl.col(k).is_nan().fill_null(False)
            same = same & equal
        unchanged = compared.filter(same)["_key"]
        picked = picked.filter(~((pl.col("_item") == 0) & pl.col("_key").is_in(unchanged)))
    inferred = pl.col("gpus_inferred").is_not_null() & (pl.col("gpus_inferred") != "")
    shares = picked.filter(inferred & (pl.col("_item").fill_null(0) != 0)).height
    devices = pl.col("gpu_devices").fill_null(1)
    rejected = pl.col("_reject_reason").is_not_null() & (pl.col("_reject_reason") != "")
    picked = picked.with_columns(
        _devices=pl.when((devices > 1) & ~rejected).then(devices).otherwise(1)
    )
    if (picked["_devices"].max() or 1) > 1:  # type: ignore[operator]
        picked = picked.with_columns(_device=pl.int_ranges(0, "_devices")).explode("_device")
    else:
        picked = picked.with_columns(_device=pl.lit(0, pl.Int64))
    split = pl.col("_devices") > 1
    picked = picked.with_columns(
        pl.when(split).then(pl.format("{}#{}", "_key", "_device")).otherwise("alloc_id")
        .alias("alloc_id"),
    )  # fmt: skip
    at = picked["_at"]
    if at.len() == values.height and (at == pl.int_range(0, at.len(), eager=True)).all():
        merged = values  # every value kept, in order: nothing to gather
    else:
        merged = values.select(pl.all().gather(at))
    del values
    merged = merged.with_columns(
        *picked.select(*computed, "_devices").get_columns(),
        pl.Series(files, dtype=pl.Utf8).gather(picked["_fileno"]).alias("_file"),
        picked["_item"].alias("_row"),
    )
    merged = merged.with_columns(
        pl.when(pl.col("_devices") > 1).then(pl.col(k) / pl.col("_devices")).otherwise(pl.col(k))
        for k in ("gpus", "cpus", "memory_gib")
    )  # fmt: skip
    full = {**_ALLOC_SCHEMA, **_ADAPTER}
    return merged.select([pl.col(k).cast(dtype) for k, dtype in full.items()]), shares


def _stored_requests(store: Store, snapshots: list[_Snapshot]) -> list[dict[str, Any]]:
    """Stored kubernetes requests that this call may change: those still queued, those a
    pod or Workload of the call not mapped as it was read may be (its UID or gang, a
    Workload or one of its pod sets), and those of the jobs of pods mapped as they were
    read (all bound) whose start the call's binds may move: never the whole history, nor
    a closed request that every snapshot of the call gives the start it has already."""
    keys: set[str] = set()
    for snap in snapshots:
        for uid, entry in snap.pods.items():
            if isinstance(entry, int):
                continue
            keys.add(uid)
            _f, _i, pod = entry
            if isinstance(pod, _Bound):
                keys.add(str(_get(pod.values, "job_id")))
                continue
            meta = pod.get("metadata")
            try:
                keys.add(job_id(meta if isinstance(meta, dict) else {}, uid))
            except _MALFORMED:
                pass
        for uid, (_f, _i, wl) in snap.workloads.items():
            keys.add(uid)
            spec = wl.get("spec")
            sets = spec.get("podSets") if isinstance(spec, dict) else None
            for ps in sets if isinstance(sets, list) else []:
                if isinstance(ps, dict):
                    keys.add(f"{uid}/{ps.get('name')}")
    # a job of pods mapped as read (no key above) starts, in each snapshot, at its latest
    # bind there; a closed request whose start all of those give (at least its submit
    # time, as the merge clamps it) comes out as stored
    rows = next((s.rows for s in snapshots if s.rows is not None), None)
    binds = [pl.DataFrame(schema={"job_id": pl.Utf8, "bound": pl.Datetime("us")})]
    if rows is not None:
        jobs, starts = rows.column("job_id"), rows.column("start_time")
        for snap in snapshots:
            at = pl.Series(
                array("q", (e for e in snap.pods.values() if isinstance(e, int))), dtype=pl.Int64
            )
            if at.len():
                frame = pl.DataFrame([jobs.gather(at), starts.gather(at)])
                binds.append(_latest_binds(frame.with_columns(_t=pl.lit(snap.time))))
    spans = pl.concat(binds).group_by("job_id").agg(
        lo=pl.col("bound").min(), hi=pl.col("bound").max()
    )
    # one row per key a stored request may be found by: ``keyed``, or a job whose binds
    # span ``lo``..``hi``
    match = (
        pl.Series("job_id", list(keys), dtype=pl.Utf8).to_frame()
        .with_columns(keyed=pl.lit(True))
        .join(spans, on="job_id", how="full", coalesce=True)
        .select(key="job_id", keyed=pl.col("keyed").fill_null(False), lo="lo", hi="hi")
    )  # fmt: skip
    store.register_frame(_KEYS, match)

    def clamped(bound: str) -> str:
        return (f"CASE WHEN t.submit_time IS NOT NULL AND {bound} < t.submit_time "
                f"THEN t.submit_time ELSE {bound} END")  # fmt: skip

    try:
        return _stored(
            store, "requests", "last_seen", "t.start_time IS NULL",
            keyed=(
                f"JOIN {_KEYS} AS m ON m.key = t.request_id",
                f"m.keyed OR NOT coalesce(t.left_queue = 'started' AND {clamped('m.lo')} = "
                f"t.start_time AND {clamped('m.hi')} = t.start_time, false)",
            ),
        )  # fmt: skip
    finally:
        store.unregister(_KEYS)


_KEYS = "_fa_kubernetes_request_keys"


_UIDS = "_fa_kubernetes_uids"


def _stored_latest(store: Store) -> dict[str, datetime]:
    """The newest snapshot stored that listed pods, and the newest that listed Workloads."""
    found: dict[str, datetime] = {}

    def keep(kind: str, t: datetime | None) -> None:
        if t is not None and (kind not in found or t > found[kind]):
            found[kind] = t

    if "last_seen" in store.column_types("allocations"):
        keep("Pod", store.scalar("SELECT max(last_seen) FROM allocations"))
    if {"last_seen", "kind"} <= set(store.column_types("requests")):
        for kind, t in store.sql(
            "SELECT kind, max(last_seen) AS t FROM requests WHERE kind IS NOT NULL GROUP BY kind"
        ).rows():
            keep(str(kind), t)
    return found


def _request_values(
    key: str, members: list[dict[str, Any]], pods: list[Mapping[str, Any]]
) -> dict[str, Any]:
    """One request from the pending pods of one pod or gang."""
    first = members[0]
    per_pod = max((m["gpus"] or 0) for m in members)
    gpus = sum((m["gpus"] or 0) for m in members)
    bad = next((m for m in members if m.get("_reject_reason")), None)
    reasons = []
    for pod in pods:
        cond = _condition(pod, "PodScheduled")
        reason = (cond or {}).get("reason") or (
            "SchedulingGated" if (pod.get("spec") or {}).get("schedulingGates") else "Pending"
        )
        reasons.append(str(reason))
    annotations = (pods[0].get("metadata") or {}).get("annotations") or {}
    locality = None
    if annotations.get(_REQUIRED_TOPOLOGY):
        locality = "node" if annotations[_REQUIRED_TOPOLOGY] == _HOSTNAME else "switch"
    elif annotations.get(_PREFERRED_TOPOLOGY):
        locality = "any"
    lead = next((m for m in members if (m["gpus"] or 0) == per_pod), first)
    row: dict[str, Any] = {
        "request_id": key,
        "submit_time": min((m["created"] for m in members if m["created"]), default=None),
        "gpu_model": _selected_models(pods[0].get("spec") or {}),
        "gpus": gpus,
        "gpus_per_pod": per_pod if gpus > 0 else None,
        "cpus_per_gpu": (lead["cpus"] or 0) / per_pod if per_pod else None,
        "memory_gib_per_gpu": (lead["memory_gib"] or 0) / per_pod if per_pod else None,
        "cpus": sum((m["cpus"] or 0) for m in members),
        "memory_gib": sum((m["memory_gib"] or 0) for m in members),
        "locality": locality,
        "priority": first["priority"],
        "tenant": first["tenant"],
        "namespace": first["namespace"],
        "name": first["job_id"].split("/", 1)[1] if key != first["uid"] else first["pod"],
        "kind": "Pod",
        "pods": len(members),
        "pending_reason": ",".join(sorted(set(reasons))),
        "queue": ((pods[0].get("metadata") or {}).get("labels") or {}).get(
            "kueue.x-k8s.io/queue-name"
        ),
        "gpus_inferred": next((m["gpus_inferred"] for m in members if m.get("gpus_inferred")), None),
    }
    if bad is not None:
        row.update({k: bad[k] for k in ("_reject_reason", "_reject_column", "_reject_value")})
    return row


class _SetupPicker:
    """The GPU setup a pending pod will get: that of the nodes it selects, when they agree.

    The nodes are those matching the pod's ``nodeSelector`` and the GPU models it selects
    (all nodes with GPUs when it selects none). Nodes shared in different ways give no
    setup (the pod's GPUs count whole) and the pod is counted in ``ambiguous``.
    """

    def __init__(self, nodes: list[tuple[Mapping[str, Any] | None, str, GpuSetup | None]]) -> None:
        self.nodes = [(labels, model, s) for labels, model, s in nodes if s and s.physical]
        self.ambiguous = 0
        self._seen: dict[tuple[Any, ...], GpuSetup | None] = {}

    def __call__(self, spec: Mapping[str, Any]) -> GpuSetup | None:
        selector = spec.get("nodeSelector") or {}
        selector = selector if isinstance(selector, dict) else {}
        models = _selected_models(spec)
        key = (tuple(sorted((str(k), str(v)) for k, v in selector.items())), models)
        if key in self._seen:
            found = self._seen[key]
        else:
            wanted = set(models.split("|")) if models else None
            kinds: dict[tuple[Any, ...], GpuSetup] = {}
            for labels, model, setup in self.nodes:
                if wanted is not None and model not in wanted:
                    continue
                if labels is not None and any(
                    str(labels.get(k)) != str(v) for k, v in selector.items()
                ):
                    continue
                kinds[(setup.sharing, setup.replicas, setup.mig_g, setup.mig_per_gpu)] = setup
            found = next(iter(kinds.values())) if len(kinds) == 1 else None
            if len(kinds) > 1:
                found = _AMBIGUOUS
            self._seen[key] = found
        if found is _AMBIGUOUS:
            self.ambiguous += 1
            return None
        return found


_AMBIGUOUS = GpuSetup(-1)


def _workload_requests(
    mapper: _Mapper, wl: Mapping[str, Any], pick: Callable[[Mapping[str, Any]], GpuSetup | None]
) -> tuple[list[dict[str, Any]], bool, datetime | None]:
    """A Kueue Workload's requests (one per pod set), whether it is pending, and its admission."""
    meta = wl.get("metadata") or {}
    spec = wl.get("spec") or {}
    uid = str(meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name')}")
    admitted = _condition(wl, "Admitted")
    finished = _condition(wl, "Finished")
    admitted_at = None
    if admitted is not None and admitted.get("status") == "True":
        admitted_at = _time(admitted.get("lastTransitionTime"))
    pending = (
        admitted_at is None
        and not (wl.get("status") or {}).get("admission")
        and not (finished is not None and finished.get("status") == "True")
    )
    if not pending and admitted_at is None:
        reserved = _condition(wl, "QuotaReserved")
        admitted_at = _time((reserved or {}).get("lastTransitionTime"))
    pod_sets = [p for p in spec.get("podSets") or [] if isinstance(p, dict)]
    rows = []
    for ps in pod_sets:
        count = int(ps.get("count", 1) or 0)
        template = ps.get("template") or {}
        row: dict[str, Any] = {
            "request_id": uid if len(pod_sets) == 1 else f"{uid}/{ps.get('name')}",
            "submit_time": _time(meta.get("creationTimestamp")),
            "gpu_model": _selected_models(template.get("spec") or {}),
            "priority": mapper.priority(spec.get("priorityClassName"), spec.get("priority")),
            "tenant": mapper.tenant(meta),
            "namespace": meta.get("namespace"),
            "name": meta.get("name")
            if len(pod_sets) == 1
            else f"{meta.get('name')}/{ps.get('name')}",
            "kind": "Workload",
            "pods": count,
            "pending_reason": "not admitted",
            "queue": spec.get("queueName"),
        }
        try:
            req = effective_request(template.get("spec") or {})
            per_pod, _ = pod_gpus(
                req,
                (template.get("metadata") or {}).get("annotations") or {},
                pick(template.get("spec") or {}),
            )
            cpus = float(req.get("cpu", Decimal(0)))
            mem = float(req.get("memory", Decimal(0)) / _GIB)
            row.update(
                gpus=per_pod * count,
                gpus_per_pod=per_pod if per_pod > 0 else None,
                cpus_per_gpu=cpus / per_pod if per_pod else None,
                memory_gib_per_gpu=mem / per_pod if per_pod else None,
                cpus=cpus * count,
                memory_gib=mem * count,
            )
        except _Unmappable as bad:
            row.update(_reject_reason=bad.reason, _reject_column=bad.column, _reject_value=bad.value)
        topo = ps.get("topologyRequest") or {}
        if topo.get("required"):
            row["locality"] = "node" if topo["required"] == _HOSTNAME else "switch"
        elif topo.get("preferred"):
            row["locality"] = "any"
        rows.append(row)
    return rows, pending, admitted_at


def map_snapshots(
    snapshots: list[_Snapshot],
    options: KubernetesOptions,
    stored_nodes: Mapping[str, dict[str, Any]] | None = None,
    stored_allocations: pl.DataFrame | None = None,
    stored_requests: list[dict[str, Any]] | None = None,
    stored_latest: Mapping[str, datetime] | None = None,
    notes: list[str] | None = None,
    stored_events: list[dict[str, Any]] | None = None,
) -> dict[str, pl.DataFrame]:
    """Map the snapshots (merged with the rows stored by earlier calls) onto the native tables.

    Every frame carries ``_file`` and ``_row`` (the object's place in its file)
    and, for rows that cannot be mapped, ``_reject_reason``/``_reject_column``/``_reject_value``.
    """
    mapper = _Mapper(options)
    stored_nodes = stored_nodes or {}
    # a pod (Workload) no longer listed ends only against a later snapshot that lists pods
    # (Workloads): a snapshot of the nodes alone says nothing about them
    latest: dict[str, datetime] = dict(stored_latest or {})
    for snap in snapshots:
        for kind, listed in (("Pod", snap.pods), ("Workload", snap.workloads)):
            if listed and (kind not in latest or snap.time > latest[kind]):
                latest[kind] = snap.time
    newest_file = snapshots[-1].files[0]

    # nodes: the newest snapshot that lists the node wins
    node_obs: dict[str, _Obs] = {}
    setups: dict[tuple[datetime, str], GpuSetup] = {}
    for snap in snapshots:
        for name, (file, i, node_item) in snap.nodes.items():
            try:
                values = node_row(node_item)
                setups[(snap.time, name)] = gpu_setup(node_item)
            except _MALFORMED as exc:
                values = {"node_id": name, **_malformed("Node", exc)}
            except _Unmappable as bad:
                values = {
                    "node_id": name,
                    "_reject_reason": bad.reason,
                    "_reject_column": bad.column,
                    "_reject_value": bad.value,
                }
            values["snapshot_time"] = snap.time
            node_obs[name] = _Obs(file, i, snap.time, values)
    # a node that a later snapshot listing nodes no longer lists is gone (scaled away,
    # deleted): down from then on, so it adds no free capacity
    listings = sorted(snap.time for snap in snapshots if snap.nodes)

    def absent_since(seen: datetime) -> datetime | None:
        return next((t for t in listings if t > seen), None)

    node_rows = []
    for name, o in node_obs.items():
        before = stored_nodes.get(name)
        if before is not None and before["snapshot_time"] and before["snapshot_time"] > o.time:
            continue  # a newer snapshot is stored already
        gone = absent_since(o.time)
        values = {**o.values, "absent_since": gone}
        if gone is not None and not values.get("_reject_reason"):
            values["health"] = "down"
        node_rows.append({**values, "_file": o.file, "_row": o.row})
    for name, before in stored_nodes.items():
        seen = before.get("snapshot_time")
        if name in node_obs or seen is None or before.get("absent_since") is not None:
            continue
        gone = absent_since(seen)
        if gone is not None:
            values = {k: before.get(k) for k in _NODE_SCHEMA}
            values.update(health="down", absent_since=gone)
            node_rows.append({**values, "_file": newest_file, "_row": 0})
    event_rows = _node_event_rows(snapshots, node_obs, stored_nodes, stored_events or [])
    inferred = [r for r in node_rows if r.get("gpus_inferred") and r["_row"]]
    if inferred and notes is not None:
        shown = "; ".join(f"{r['node_id']}: {r['gpus_inferred']}" for r in inferred[:3])
        more = "; ..." if len(inferred) > 3 else ""
        notes.append(
            f"{len(inferred)} node(s) count their physical GPUs by inference (column "
            f"gpus_inferred; label them nvidia.com/gpu.count to count them): {shown}{more}"
        )
    latest_setup: dict[str, GpuSetup] = {}
    for (_t, name), newest in sorted(setups.items(), key=lambda kv: kv[0][0]):
        latest_setup[name] = newest
    for name, before in stored_nodes.items():
        if name not in latest_setup and before.get("gpu_sharing"):
            latest_setup[name] = stored_setup(before)

    # allocations and requests from pods, snapshot by snapshot
    pod_rows = next((s.rows for s in snapshots if s.rows is not None), None) or _PodRows()
    seen = _Sightings()
    taken: list[tuple[datetime, int, array[int], array[int]]] = []  # pods mapped as read
    pending_obs: dict[str, list[_Obs]] = {}
    pickers: list[_SetupPicker] = []
    # per snapshot: the latest bind of each job bound (mapped here), the gangs still
    # waiting, the Workloads admitted
    bound_here: list[dict[str, datetime]] = []
    waiting: list[set[str]] = []
    admitted: list[dict[str, datetime]] = []
    for number, snap in enumerate(snapshots):
        snap_setups = {name: setups.get((snap.time, name)) for name in snap.nodes}
        known: list[tuple[Mapping[str, Any] | None, str, GpuSetup | None]] = []
        for name, (_f, _i, item) in snap.nodes.items():
            meta = item.get("metadata")
            labels = meta.get("labels") if isinstance(meta, dict) else None
            if not isinstance(labels, dict):
                labels = {}
            setup = snap_setups.get(name)
            try:
                model = node_model(labels, setup.physical if setup else 0)
            except _MALFORMED:
                model = ""
            known.append((labels, model, setup))
        if not snap.nodes:  # pods alone: the nodes stored by earlier calls (labels not kept)
            for name, before in stored_nodes.items():
                known.append((None, str(before.get("gpu_model") or ""), latest_setup.get(name)))
        pick = _SetupPicker(known)
        pickers.append(pick)
        gangs: dict[str, list[tuple[str, int, dict[str, Any], dict[str, Any]]]] = {}
        bound_jobs: dict[str, datetime] = {}  # gang -> its latest bind
        rows_read, places = array("q"), array("q")
        taken.append((snap.time, number, rows_read, places))
        for place, (uid, entry) in enumerate(snap.pods.items()):
            if isinstance(entry, int):  # mapped as it was read: its values are in rows
                rows_read.append(entry)
                places.append(place)
                continue
            file, i, pod = entry
            order = number << _PLACE | place
            spec: Mapping[str, Any]
            node: Any
            try:
                if isinstance(pod, _Bound):  # mapped as it was read, to be finished here
                    spec, node, phase = {}, pod.node, pod.phase
                else:
                    spec = pod.get("spec") or {}
                    status = pod.get("status") or {}
                    phase = status.get("phase")
                    node = spec.get("nodeName")
                terminal = phase in ("Succeeded", "Failed")
                if node:
                    if isinstance(pod, _Bound):
                        values = _vals(pod.values)
                        bind_time, finished = pod.bind, pod.finished
                        last_transition, terminating = pod.last_transition, pod.terminating
                    else:
                        setup = snap_setups.get(node) or latest_setup.get(node)
                        values = mapper.pod_values(pod, setup)
                        bind_time = _bind_time(pod)
                        finished = _finished(pod) if terminal else None
                        last_transition = max(
                            filter(None, map(_time, _transition_times(pod))), default=None
                        )
                        terminating = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
                    bound = bind_time or snap.time
                    key = values["job_id"]
                    if key not in bound_jobs or bound > bound_jobs[key]:
                        bound_jobs[key] = bound
                    if values.get("gpu_resource") and not values.get("_reject_reason"):
                        if not values["gpus"]:  # named GPUs, none counted: never silent
                            values.update(
                                _reject_reason=f"{values['gpu_resource']} on node {node} "
                                "counts no physical GPU (node GPU sharing unknown)",
                                _reject_column="gpus",
                                _reject_value=values["gpu_resource"],
                            )
                    held = values.get("_reject_reason") or any(
                        values[k] for k in ("gpus", "cpus", "memory_gib")
                    )
                    if not held:
                        continue
                    finish = finished if terminal else None
                    if terminal and finish is None:
                        finish = last_transition or snap.time
                    values.update(
                        alloc_id=uid,
                        node_id=node,
                        start_time=bind_time,
                        phase=phase,
                        terminating=terminating,
                        finish=finish,
                        _fileno=pod_rows.file_no(file),
                        _item=i,
                    )
                    seen.add(uid, snap.time, pod_rows.add(_pack(values)), order)
                elif not terminal:
                    gates = [g.get("name") for g in spec.get("schedulingGates") or []]
                    if _KUEUE_GATE in gates and snap.workloads:
                        continue  # its Workload is the request
                    values = mapper.pod_values(pod, pick(spec))
                    gangs.setdefault(values["job_id"], []).append((file, i, pod, values))
            except _MALFORMED as exc:
                malformed = {"alloc_id": uid, **_malformed("Pod", exc),
                             "_fileno": pod_rows.file_no(file), "_item": i}  # fmt: skip
                seen.add(uid, snap.time, pod_rows.add(_pack(malformed)), order)
        for key, members in gangs.items():
            file, i = members[0][0], members[0][1]
            try:
                row = _request_values(key, [m[3] for m in members], [m[2] for m in members])
            except _MALFORMED as exc:
                row = {"request_id": key, "kind": "Pod", **_malformed("Pod", exc)}
            pending_obs.setdefault(key, []).append(_Obs(file, i, snap.time, row))
        bound_here.append(bound_jobs)
        waiting.append(set(gangs))
        starts: dict[str, datetime] = {}
        admitted.append(starts)
        for uid, (file, i, wl) in snap.workloads.items():
            try:
                check_times(wl, "request_id")
                rows, pending, admitted_at = _workload_requests(mapper, wl, pick)
            except _MALFORMED as exc:
                rows, pending, admitted_at = (
                    [{"request_id": uid, "kind": "Workload", **_malformed("Workload", exc)}],
                    True,
                    None,
                )
            except _Unmappable as bad:
                rejected = {"_reject_reason": bad.reason, "_reject_column": bad.column,
                            "_reject_value": bad.value}  # fmt: skip
                rows, pending, admitted_at = (
                    [{"request_id": uid, "kind": "Workload", **rejected}], True, None
                )
            for row in rows:
                key = row["request_id"]
                if pending:
                    pending_obs.setdefault(key, []).append(_Obs(file, i, snap.time, row))
                else:
                    start = admitted_at or snap.time
                    starts[key] = min(starts.get(key, start), start)
                    # an admitted Workload is a request that has started: stored closed,
                    # so an older snapshot ingested later cannot reopen it
                    row.update(
                        start_time=admitted_at or snap.time,
                        left_queue="started",
                        pending_reason=None,
                    )
                    pending_obs.setdefault(key, []).append(_Obs(file, i, snap.time, row))

    ambiguous = sum(p.ambiguous for p in pickers)
    if ambiguous and notes is not None:
        notes.append(
            f"{ambiguous} pending pod(s) or Workload pod set(s) may land on nodes whose GPUs "
            "are shared in different ways: their GPUs count as whole GPUs"
        )

    # merge with the rows earlier calls stored, then decide ends and starts; a stored row
    # that comes out unchanged is not written again (it is no row of this call's files)
    sightings, bound_read = _taken_sightings(pod_rows, taken)
    del taken
    sightings = pl.concat([sightings, seen.frame()])
    allocations, shares = _merge_allocations(
        pod_rows, sightings, stored_allocations, latest.get("Pod"), newest_file
    )
    del sightings
    if shares and notes is not None:
        notes.append(
            f"{shares} allocation(s) hold shared GPUs of nodes whose replicas are unknown: "
            "each replica is counted as the smallest share it can be (column gpus_inferred)"
        )
    stored_request: dict[str, dict[str, Any]] = {}
    for stored in stored_requests or []:
        values = {k: stored.get(k) for k in _REQUEST_SCHEMA}
        stored_request[stored["request_id"]] = values
        pending_obs.setdefault(stored["request_id"], []).append(
            _Obs(newest_file, 0, stored["last_seen"], values)
        )
    # per snapshot: key -> when it started (bound, a gang no longer waiting in part, or
    # admitted), for the requests' keys
    wanted = pl.Series(list(pending_obs), dtype=pl.Utf8)
    started: list[tuple[datetime, dict[str, datetime]]] = []
    for n, snap in enumerate(snapshots):
        binds = dict(bound_read[n].filter(pl.col("job_id").is_in(wanted)).iter_rows())
        for key, t in bound_here[n].items():
            if key not in binds or t > binds[key]:
                binds[key] = t
        starts = {key: t for key, t in binds.items() if key not in waiting[n]}
        for key, t in admitted[n].items():
            starts[key] = min(starts.get(key, t), t)
        started.append((snap.time, starts))
    request_rows = []
    for key, obs in pending_obs.items():
        o = _latest(obs)
        row = {k: o.values.get(k) for k in _REQUEST_SCHEMA}
        row.update(request_id=key, last_seen=o.time, left_queue=None, start_time=None)
        later = [(t, starts[key]) for t, starts in started if t > o.time and key in starts]
        if later:  # the first later snapshot that saw it bound or admitted
            row["start_time"], row["left_queue"] = min(later)[1], "started"
        elif o.values.get("start_time") is not None:  # stored, already closed
            row["start_time"], row["left_queue"] = (
                o.values["start_time"],
                o.values.get("left_queue"),
            )
        elif o.time < latest.get(
            row["kind"] or "Pod", o.time
        ):  # a later snapshot no longer lists it
            row["start_time"], row["left_queue"] = o.time, "vanished"
        if (
            row["start_time"] is not None
            and row["submit_time"]
            and row["start_time"] < row["submit_time"]
        ):
            row["start_time"] = row["submit_time"]  # bound before the clock of the creator said
        for k in ("_reject_reason", "_reject_column", "_reject_value"):
            row[k] = o.values.get(k)
        row["_file"], row["_row"] = o.file, o.row
        if o.row == 0 and _unchanged(row, stored_request.get(key), _REQUEST_SCHEMA):
            continue
        request_rows.append(row)

    def frame(rows: list[dict[str, Any]], schema: Mapping[str, Any]) -> pl.DataFrame:
        full = {**schema, **_ADAPTER}
        columns = {k: _typed([r.get(k) for r in rows], dtype) for k, dtype in full.items()}
        return pl.DataFrame(columns, schema=full)

    return {
        "nodes": frame(node_rows, _NODE_SCHEMA),
        "allocations": allocations,
        "requests": frame(request_rows, _REQUEST_SCHEMA),
        "node_events": frame(event_rows, _EVENT_SCHEMA),
    }


def _node_event_rows(
    snapshots: list[_Snapshot],
    node_obs: Mapping[str, _Obs],
    stored_nodes: Mapping[str, dict[str, Any]],
    stored_events: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """The node_events rows of the call: the intervals of every node the call's snapshots
    list (or, listing nodes, no longer list), continuing those earlier calls left open."""
    listings = [snap for snap in snapshots if snap.nodes]
    if not listings:
        return []
    kinds = {event_source(k): k for k in EVENT_KINDS}
    going: dict[str, dict[str, _Open]] = {}
    for e in stored_events:
        kind = kinds.get(str(e.get("source")))
        if kind is not None and e.get("end_time") is None:
            going.setdefault(str(e["node_id"]), {})[kind] = _Open(
                e["start_time"], e.get("last_seen") or e["start_time"], str(e.get("reason") or ""),
                e.get("recorded_time"), listings[-1].files[0], 0,
            )  # fmt: skip
    first_seen: dict[str, datetime] = {}
    for name, before in stored_nodes.items():
        if before.get("snapshot_time") is not None:
            first_seen[name] = before["snapshot_time"]
    for snap in listings:
        for name in snap.nodes:
            first_seen.setdefault(name, snap.time)
    rows: list[dict[str, Any]] = []
    for name in sorted(first_seen):
        latest = node_obs.get(name)
        if latest is not None and latest.values.get("_reject_reason"):
            continue  # a node that cannot be mapped has no health to follow
        stored_time = (stored_nodes.get(name) or {}).get("snapshot_time")
        observations: list[Any] = []
        for snap in listings:
            if snap.time < first_seen[name] or (stored_time is not None and snap.time <= stored_time):
                continue  # before it was first listed, or older than what is stored
            listed = snap.nodes.get(name)
            if listed is None:
                observations.append((snap.time, snap.files[0], 0, None))
                continue
            file, i, item = listed
            try:
                observations.append((snap.time, file, i, node_conditions(item)))
            except _MALFORMED:
                continue
        if observations:
            rows.extend(node_intervals(name, observations, going.get(name, {})))
    return rows


_VIEW = "_fa_kubernetes_{table}"


def snapshot_sources(store: Store, paths: list[Path], options: KubernetesOptions) -> list[Source]:
    """The sources of one kubernetes ingest call, one per (table, file), carrying the notes."""
    files = json_files(paths)
    with paused_gc():  # a List's objects, mapped: many, and no cycles
        snapshots, notes = read_snapshots(files, options.snapshot_time, options)
        if not snapshots:
            raise InputError(", ".join(str(p) for p in paths), "no kubectl JSON object to read")
        stored_nodes = {r["node_id"]: r for r in _stored(store, "nodes", "snapshot_time", "TRUE")}
        frames = map_snapshots(
            snapshots,
            options,
            stored_nodes=stored_nodes,
            stored_allocations=_stored_allocations(store, snapshots),
            stored_requests=_stored_requests(store, snapshots),
            stored_latest=_stored_latest(store),
            notes=notes,
            stored_events=_stored(
                store, "node_events", "last_seen", "end_time IS NULL AND source LIKE 'kubernetes:%'"
            ),
        )
    sources: list[Source] = []
    order = [str(f) for f in files]
    repeated: Counter[str] = Counter()
    for snap in snapshots:
        repeated.update(snap.repeated)
    for table, data in frames.items():
        view = _VIEW.format(table=table)
        store.register_frame(view, data)
        listed = set(data["_file"].unique().to_list())
        for n, file in enumerate([f for f in order if f in listed]):
            select = f"SELECT * EXCLUDE (_file, _row) FROM {view} WHERE _file = $file ORDER BY _row"
            numbered = f"SELECT * EXCLUDE (_file) FROM {view} WHERE _file = $file ORDER BY _row"
            sources.append(
                Source(
                    file, table, select, numbered, {"file": file}, notes=tuple(notes),
                    adapter_rejects=True, superseded=repeated[table] if n == 0 else 0,
                )
            )
    return sources
