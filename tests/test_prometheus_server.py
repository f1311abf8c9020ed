"""``ingest --format prometheus`` against a real Prometheus (Debian's package, marker ``realprom``).

One Prometheus serves the whole file (pytest-xdist runs a file in one worker): two days of
history backfilled with ``promtool tsdb create-blocks-from openmetrics`` (a sample every
2 minutes), then a minute of live scraping (every second) of a dcgm-exporter stand-in by
two jobs (an HA pair), tests/promserver.py. The fleet (the same in both):

- ``h100-a`` (``hostname`` label; SM_ACTIVE, GR_ENGINE_ACTIVE, GPU_UTIL): GPUs 0-1 train-0
  (tenant research, 0.8), GPU 2 serve-0 (serving, 0.3; its SM_ACTIVE reads NaN live at
  10-14 s), GPU 5 dev-0 (lab, 0.9) from 22.5 s live, GPUs 3, 4, 6, 7 idle; GPU 6 raises XID
  79 live at 20-40 s, GPU 7 XID 13 from 30 s live and XID 48 in history 30-32 h;
- ``a100-b`` (``Hostname``, SM_ACTIVE): GPU 0 split by MIG 3g (mig-a 0.7) + 4g (mig-b
  0.35), GPUs 1-7 idle;
- ``v100-c`` (``Hostname``, GPU_UTIL only): GPUs 0-5 batch-0 (batch, 45%; GPU 2 writes the
  int64 blank live at 30-34 s), GPU 6 old-0 (archive, 20%) on the first day of history,
  then idle; exporter down live at 15-17 s (two scrapes) and 44-56 s;
- ``h100-d`` (``hostname``): GPU 0 time-sliced by serve-1 and serve-2 (serving, 0.6).

The history is checked against figures worked by hand; the live minute against the raw
samples the server holds. Skipped, with the reason, where Debian's prometheus package is
not installed.
"""

from __future__ import annotations

import http.server
import importlib
import json
import math
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fleetaudit import api
from fleetaudit.cli import app
from fleetaudit.core.options import PrometheusPull
from fleetaudit.inputs.ingest import IngestOptions, ingest
from fleetaudit.model.store import open_store
from tests import promserver as ps
from tests.conftest import write

pytestmark = pytest.mark.realprom

DAY = 86400
HIST_STEP = 120  # seconds between history samples (and the step pulled)
LIVE = 64  # seconds of live scraping
STEP = 4  # the step the live minute is pulled at
SM, GR, UTIL = "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"


def _fleet(hist_start: float) -> list[ps.Host]:
    """The hosts; times in seconds from the live minute's start."""
    ever = -math.inf
    train = (ps.Hold("train-0", "research", 0.8),)
    return [
        ps.Host(
            "h100-a",
            "H100",
            (
                ps.Gpu(0, train),
                ps.Gpu(1, train),
                ps.Gpu(2, (ps.Hold("serve-0", "serving", 0.3),), nan=((10, 14),)),
                ps.Gpu(3),
                ps.Gpu(4),
                ps.Gpu(5, (ps.Hold("dev-0", "lab", 0.9, start=22.5, container="notebook"),)),
                ps.Gpu(6, xid=((20, 79), (40, 0))),
                ps.Gpu(
                    7, xid=((hist_start + 30 * 3600, 48), (hist_start + 32 * 3600, 0), (30, 13))
                ),
            ),
            activity=(SM, GR, UTIL),
        ),
        ps.Host(
            "a100-b",
            "A100",
            (
                ps.Gpu(
                    0,
                    mig=(
                        ("3g.40gb", 1, (ps.Hold("mig-a", "research", 0.7),)),
                        ("4g.40gb", 2, (ps.Hold("mig-b", "research", 0.35),)),
                    ),
                ),
                *(ps.Gpu(g) for g in range(1, 8)),
            ),
            host_label="Hostname",
        ),
        ps.Host(
            "v100-c",
            "V100",
            (
                *(
                    ps.Gpu(
                        g, (ps.Hold("batch-0", "batch", 0.45),), blank=((30, 34),) if g == 2 else ()
                    )
                    for g in range(6)
                ),
                ps.Gpu(6, (ps.Hold("old-0", "archive", 0.2, ever, hist_start + DAY),)),
                ps.Gpu(7),
            ),
            host_label="Hostname",
            activity=(UTIL,),
            outages=((15, 17), (44, 56)),
        ),
        ps.Host(
            "h100-d",
            "H100",
            (
                ps.Gpu(0, (ps.Hold("serve-1", "serving", 0.6), ps.Hold("serve-2", "serving", 0.6))),
                ps.Gpu(1),
            ),
        ),
    ]


ALLOCATIONS = [
    # alloc_id, node, gpus, workload, tenant (= namespace), pod
    ("train-0", "h100-a", 2, "training", "research"),
    ("serve-0", "h100-a", 1, "online_inference", "serving"),
    ("dev-0", "h100-a", 1, "development", "lab"),
    ("mig-a", "a100-b", 3 / 7, "training", "research"),
    ("mig-b", "a100-b", 4 / 7, "training", "research"),
    ("batch-0", "v100-c", 6, "offline_inference", "batch"),
    ("old-0", "v100-c", 1, "other", "archive"),
    ("serve-1", "h100-d", 0.5, "online_inference", "serving"),
    ("serve-2", "h100-d", 0.5, "online_inference", "serving"),
]


@dataclass
class Server:
    """The running server and what the tests need to know about it."""

    prometheus: ps.Prometheus
    stand_in: ps.StandIn
    hosts: list[ps.Host]
    epoch: float  # live second 0
    hist_start: float
    hist_end: float
    folder: Path

    def wait_live(self) -> None:
        """Until the live minute (and its last scrapes) is in the server."""
        left = self.epoch + LIVE + 3 - time.time()
        if left > 0:
            time.sleep(left)

    def raw(self, selector: str) -> list[dict[str, Any]]:
        """The raw samples of the live minute (a range selector at its end)."""
        end = self.epoch + LIVE + 2
        data = _api(
            self.prometheus.url,
            "/api/v1/query",
            {"query": f"{selector}[{LIVE + 8}s]", "time": str(end)},
        )
        return list(data["result"])


def _api(url: str, path: str, form: dict[str, str]) -> Any:
    body = urllib.parse.urlencode(form).encode()
    with urllib.request.urlopen(url + path, data=body, timeout=30) as answer:
        return json.load(answer)["data"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    reason = ps.missing()
    if reason is not None:
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("prometheus")
    epoch = math.ceil(time.time() / STEP) * STEP + 2 * STEP + 20  # history written first
    hist_end = math.floor((epoch - 600) / HIST_STEP) * HIST_STEP
    hist_start = hist_end - 2 * DAY
    hosts = _fleet(hist_start - epoch)
    stand_in = ps.StandIn(hosts, epoch)
    stand_in.start()
    targets = dict(zip((h.name for h in hosts), stand_in.targets(), strict=True))
    history = folder / "history.om"
    fields = (SM, UTIL, "DCGM_FI_DEV_XID_ERRORS")
    with open(history, "w") as out:
        ps.write_history(
            out, hosts, epoch, hist_start - epoch, hist_end - epoch, HIST_STEP,
            lambda h: targets[h.name], "dcgm-a", fields,
        )  # fmt: skip
    prometheus = ps.Prometheus(folder, stand_in.targets(), jobs=("dcgm-a", "dcgm-b"))
    prometheus.data.mkdir(parents=True)
    ps.backfill(history, prometheus.data)
    prometheus.start()
    try:
        yield Server(prometheus, stand_in, hosts, epoch, hist_start, hist_end, folder)
    finally:
        prometheus.stop()
        stand_in.stop()


def _store(folder: Path, hosts: list[ps.Host], epoch: float) -> Path:
    """A store holding the fleet's nodes and allocations (namespace and pod as the
    kubernetes ingest writes them)."""
    db = folder / "fleet.duckdb"
    if db.exists():
        db.unlink()
    write(folder / "nodes.csv", ps.nodes_csv(hosts))
    rows = ["alloc_id,node_id,gpus,cpus,priority,workload,tenant,start_time,end_time,namespace,pod"]
    start = epoch - 3 * DAY
    for alloc, node, gpus, workload, tenant in ALLOCATIONS:
        begin, end = start, ""
        if alloc == "dev-0":
            begin = epoch + 22.5
        if alloc == "old-0":
            end = str(epoch + _fleet_hold_end(hosts))
        rows.append(
            f"{alloc},{node},{gpus!r},4,high,{workload},{tenant},{begin},{end},{tenant},{alloc}"
        )
    write(folder / "allocations.csv", "\n".join(rows) + "\n")
    with open_store(db) as store:
        ingest(store, [folder / "nodes.csv", folder / "allocations.csv"])
    return db


def _fleet_hold_end(hosts: list[ps.Host]) -> float:
    (old,) = [h for host in hosts for g in host.gpus for h in g.holds if h.pod == "old-0"]
    return old.end


def _pull(db: Path, url: str, *args: str) -> Any:
    done = CliRunner().invoke(
        app, ["ingest", "--db", str(db), "--format", "prometheus", "--url", url, *args]
    )
    assert done.exit_code == 0, done.stderr
    return done


# -- two days of history, backfilled ------------------------------------------------------------


@pytest.fixture(scope="module")
def history(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The history pulled into a store: --since 2d --until its end, at its 2-minute step."""
    folder = tmp_path_factory.mktemp("history")
    db = _store(folder, server.hosts, server.epoch)
    _pull(db, server.prometheus.url, "--since", "2d", "--until", str(server.hist_end),
          "--step", f"{HIST_STEP}s")  # fmt: skip
    return db


def test_history_rows_are_the_known_values(server: Server, history: Path) -> None:
    """One row per held GPU and 2-minute step; idle GPUs and the idle half of old-0's GPU
    are left out; the MIG GPU is 0.7 x 3/7 + 0.35 x 4/7 = 0.5; the time-sliced GPU one
    row naming no pod; v100-c reads GPU_UTIL / 100 (an upper bound)."""
    with open_store(history, read_only=True) as store:
        rows = store.sql(
            "SELECT node_id, gpu_index, count(*) AS n, min(sm_active) AS lo, max(sm_active) AS hi, "
            "any_value(metric) AS metric, list(DISTINCT alloc_id) AS allocs, "
            "min(samples) AS s0, max(samples) AS s1, max(sample_interval_s) AS every "
            "FROM telemetry GROUP BY ALL ORDER BY node_id, gpu_index"
        ).rows()
    steps = 2 * DAY // HIST_STEP  # 1440
    got = {(r[0], r[1]): r[2:] for r in rows}
    assert got == {
        ("a100-b", 0): (steps, pytest.approx(0.5), pytest.approx(0.5), SM, [None], 1, 1, HIST_STEP),
        ("h100-a", 0): (steps, 0.8, 0.8, SM, ["train-0"], 1, 1, HIST_STEP),
        ("h100-a", 1): (steps, 0.8, 0.8, SM, ["train-0"], 1, 1, HIST_STEP),
        ("h100-a", 2): (steps, 0.3, 0.3, SM, ["serve-0"], 1, 1, HIST_STEP),
        ("h100-d", 0): (steps, 0.6, 0.6, SM, [None], 1, 1, HIST_STEP),
        **{
            ("v100-c", g): (steps, 0.45, 0.45, UTIL, ["batch-0"], 1, 1, HIST_STEP) for g in range(6)
        },
        ("v100-c", 6): (steps // 2, 0.2, 0.2, UTIL, ["old-0"], 1, 1, HIST_STEP),
    }


def test_history_xid_48_is_a_two_hour_interval(server: Server, history: Path) -> None:
    with open_store(history, read_only=True) as store:
        events = store.sql(
            "SELECT node_id, gpu_index, epoch(start_time), epoch(end_time), state, reason, source "
            "FROM node_events"
        ).rows()
    assert events == [
        ("h100-a", 7, server.hist_start + 30 * 3600, server.hist_start + 32 * 3600, "unhealthy",
         "XID 48", "dcgm:xid"),
    ]  # fmt: skip


def test_history_productive_figures_worked_by_hand(
    server: Server, history: Path, tmp_path: Path
) -> None:
    """Every held GPU reports every step of the window, so telemetry GPU-hours are
    allocated GPU-hours (48 h per GPU, old-0 24 h), and the rates are the known values:

    - research: train-0 2 GPUs at 0.8, mig-a + mig-b share the MIG GPU's row (0.5) by
      their 3/7 and 4/7: (1.6 + 0.5) / 3 = 0.7; serving: serve-0 0.3 and the time-sliced
      GPU's 0.6 shared by serve-1 and serve-2: (0.3 + 0.6) / 2 = 0.45; batch 0.45 and
      archive 0.2 read GPU_UTIL: upper bounds;
    - H100: (1.6 + 0.3 + 0.6) / 4 = 0.625; A100 0.5; V100: (6 x 48 x 0.45 + 24 x 0.2)
      / (6 x 48 + 24) = 134.4 / 312; fleet: (4 x 48 x 0.625 + 24 + 134.4) / (192 + 48 +
      312) = 278.4 / 552, an upper bound for 312 / 552 of its telemetry.
    """
    out = tmp_path / "history.json"
    done = CliRunner().invoke(
        app,
        ["report", "--db", str(history), "--at", str(server.hist_end), "--since", "2d",
         "--step", "1h", "--json", str(out), "-q"],
    )  # fmt: skip
    assert done.exit_code == 0, done.stderr
    doc = json.loads(out.read_text())
    rate = {t: f["productive"]["productive_rate"] for t, f in doc["tenants"].items()}
    assert rate == {
        "research": pytest.approx(0.7),
        "serving": pytest.approx(0.45),
        "batch": pytest.approx(0.45),
        "archive": pytest.approx(0.2),
    }
    upper = {t: f["productive"]["upper_bound"] for t, f in doc["tenants"].items()}
    assert upper == {"research": False, "serving": False, "batch": True, "archive": True}
    models = {m: f["productive"] for m, f in doc["models"].items()}
    assert models["H100"]["productive_rate"] == pytest.approx(0.625)
    assert models["A100"]["productive_rate"] == pytest.approx(0.5)
    assert models["V100"]["productive_rate"] == pytest.approx(134.4 / 312)
    assert models["V100"]["upper_bound"] and not models["H100"]["upper_bound"]
    fleet = doc["fleet"]["productive"]
    assert fleet["productive_rate"] == pytest.approx(278.4 / 552)
    assert fleet["upper_bound_share"] == pytest.approx(312 / 552)
    assert fleet["coverage"] == pytest.approx(1.0, abs=1e-4)
    workloads = fleet["workloads"]
    assert workloads["training"]["productive_rate"] == pytest.approx(0.7)
    assert workloads["online_inference"]["productive_rate"] == pytest.approx(0.45)
    assert workloads["offline_inference"]["upper_bound"] is True


# -- the live minute: what the server holds, step by step ---------------------------------------


@pytest.fixture(scope="module")
def live(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The live minute pulled at a 4 s step (each step 4 one-second scrapes per job)."""
    server.wait_live()
    folder = tmp_path_factory.mktemp("live")
    db = _store(folder, server.hosts, server.epoch)
    until = server.epoch + LIVE
    _pull(
        db,
        server.prometheus.url,
        "--since",
        f"{LIVE}s",
        "--until",
        str(until),
        "--step",
        f"{STEP}s",
    )
    return db


def _steps(raw: list[dict[str, Any]]) -> dict[float, list[float]]:
    """The raw samples by the step (T - 4, T] they fall in: of the job (HA replica) that
    has more of them there (the copies of a series count once, as many as the fuller)."""
    by_job: dict[str, dict[float, list[float]]] = {}
    for series in raw:
        by_step = by_job.setdefault(series["metric"]["job"], {})
        for ts, value in series["values"]:
            step = math.ceil(float(ts) / STEP) * STEP
            by_step.setdefault(step, []).append(float(value))
    steps = {t for by_step in by_job.values() for t in by_step}
    return {t: max((s.get(t, []) for s in by_job.values()), key=len) for t in steps}


def _rows(db: Path, node: str, gpu: int) -> dict[float, tuple[Any, ...]]:
    with open_store(db, read_only=True) as store:
        rows = store.sql(
            "SELECT epoch(ts), sm_active, samples, sample_interval_s, alloc_id, metric FROM telemetry "
            "WHERE node_id = $n AND gpu_index = $g ORDER BY ts",
            {"n": node, "g": gpu},
        ).rows()
    return {r[0]: r[1:] for r in rows}


def test_live_steps_count_the_ha_pair_once_and_weigh_partial_steps(
    server: Server, live: Path
) -> None:
    """train-0's GPU 0: a row per step with its raw samples of one job (the other job's
    copies count once): their mean and their number, one second each."""
    raw = server.raw(f'{SM}{{hostname="h100-a", gpu="0"}}')
    assert {s["metric"]["job"] for s in raw} == {"dcgm-a", "dcgm-b"}
    want = {t: v for t, v in _steps(raw).items() if server.epoch <= t <= server.epoch + LIVE}
    got = _rows(live, "h100-a", 0)
    assert set(got) == set(want)
    for t, values in want.items():
        assert got[t][:2] == (pytest.approx(0.8), len(values)), t
        assert got[t][2:] == (1.0, "train-0", SM), t


def test_live_outages_leave_gaps_and_partial_steps(server: Server, live: Path) -> None:
    """v100-c's exporter was down at 15-17 s (two scrapes: a partial step) and 44-56 s
    (whole steps without a sample: no rows). Every row's samples are the raw samples the
    server holds in its step; telemetry GPU-seconds are those samples."""
    raw = server.raw(f'{UTIL}{{Hostname="v100-c", gpu="0"}}')
    want = _steps(raw)
    got = _rows(live, "v100-c", 0)
    assert {t: (r[0], r[1]) for t, r in got.items()} == {
        t: (pytest.approx(0.45), len(v))
        for t, v in want.items()
        if server.epoch <= t <= server.epoch + LIVE
    }
    missing = [
        t
        for t in range(int(server.epoch) + STEP, int(server.epoch) + LIVE + 1, STEP)
        if t not in got
    ]
    assert missing, "the long outage leaves whole steps without a row"
    assert all(server.epoch + 44 < t <= server.epoch + 60 for t in missing)
    assert any(r[1] < STEP for r in got.values()), "the short outage leaves a partial step"


def test_live_pod_change_within_a_step_keeps_the_pods_value(server: Server, live: Path) -> None:
    """dev-0 arrives at 22.5 s on GPU 5, idle before (no pod labels): no row before it;
    the step it arrives in has dev-0's own value (0.9) and only its own samples."""
    raw = server.raw(f'{SM}{{hostname="h100-a", gpu="5", pod="dev-0"}}')
    pod_steps = _steps(raw)
    got = _rows(live, "h100-a", 5)
    assert set(got) == {t for t in pod_steps if server.epoch <= t <= server.epoch + LIVE}
    first = min(got)
    assert got[first][:2] == (pytest.approx(0.9), len(pod_steps[first]))
    assert got[first][3] == "dev-0"


def test_live_nan_falls_back_blank_is_a_reject(server: Server, live: Path) -> None:
    """serve-0's SM_ACTIVE reads NaN at 10-14 s: those steps read GR_ENGINE_ACTIVE (avg over
    a NaN is NaN: a gap). batch-0's GPU 2 writes the int64 blank at 30-34 s: a step all
    blank is a gap; a step mixing it with readings averages to ~1e18, a reject."""
    rows = _rows(live, "h100-a", 2)
    metrics = {r[4] for t, r in rows.items() if server.epoch + 10 < t <= server.epoch + 16}
    assert GR in metrics
    assert all(r[0] == pytest.approx(0.3) for r in rows.values())
    with open_store(live, read_only=True) as store:
        rejects = store.sql(
            "SELECT value, reason FROM rejects WHERE reason LIKE 'DCGM_FI_DEV_GPU_UTIL%'"
        ).rows()
    assert rejects, "a step mixing a blank with readings is a reject"
    assert all(float(v) > 100 and "outside its range 0..100" in r for v, r in rejects)
    blank = _rows(live, "v100-c", 2)
    assert not [t for t in blank if server.epoch + 32 < t <= server.epoch + 34]


def test_live_mig_shared_xid_and_idle(server: Server, live: Path) -> None:
    mig = _rows(live, "a100-b", 0)
    assert mig and all(r[0] == pytest.approx(0.5) and r[3] is None for r in mig.values())
    shared = _rows(live, "h100-d", 0)
    assert shared and all(r[0] == pytest.approx(0.6) and r[3] is None for r in shared.values())
    for node, gpu in (("h100-a", 3), ("h100-a", 4), ("a100-b", 1), ("v100-c", 7), ("h100-d", 1)):
        assert not _rows(live, node, gpu), (node, gpu)  # idle GPUs are not loaded
    with open_store(live, read_only=True) as store:
        events = store.sql(
            "SELECT gpu_index, epoch(start_time) - $e, epoch(end_time) - $e, reason FROM node_events "
            "WHERE epoch(start_time) >= $e ORDER BY start_time",
            {"e": server.epoch},
        ).rows()
    # XID 79 is first seen in the step ending after 20 s, gone in the step ending after 40 s
    assert events == [(6, 24, 44, "XID 79")]


def test_a_rerun_over_the_same_window_replaces(server: Server, live: Path) -> None:
    with open_store(live, read_only=True) as store:
        before = store.row_count("telemetry"), store.row_count("node_events")
    done = _pull(live, server.prometheus.url, "--since", f"{LIVE}s", "--until",
                 str(server.epoch + LIVE), "--step", f"{STEP}s", "--csv")  # fmt: skip
    with open_store(live, read_only=True) as store:
        after = store.row_count("telemetry"), store.row_count("node_events")
    assert after == before
    assert "telemetry,1," not in done.stdout  # a summary row per table: no new rows
    lines = {line.split(",")[0]: line.split(",") for line in done.stdout.splitlines()[1:]}
    assert lines["telemetry"][3] == "0"  # new
    assert int(lines["telemetry"][4]) == before[0]  # replaced


def test_a_scrape_and_a_tsdb_dump_read_like_the_server(
    server: Server, live: Path, tmp_path: Path
) -> None:
    """The stand-in's /metrics (dcgm-exporter's text) saved by a cron of curl, and
    ``promtool tsdb dump`` of the server's storage (one job: a dump holds each job's own
    scrape times), read into rows of the known values."""
    port = server.stand_in.ports["h100-a"]
    scrape = tmp_path / "h100-a.prom"
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        scrape.write_bytes(answer.read())
    dump = tmp_path / "dump.txt"
    with open(dump, "w") as out:
        subprocess.run(
            ["promtool", "tsdb", "dump", f"--min-time={int(server.epoch * 1000)}",
             f"--max-time={int((server.epoch + LIVE) * 1000)}",
             f'--match={{__name__="{SM}",hostname="h100-a",gpu="0",job="dcgm-a"}}',
             str(server.prometheus.data)],
            stdout=out, check=True, timeout=120,
        )  # fmt: skip
    folder = tmp_path / "db"
    folder.mkdir()
    db = _store(folder, server.hosts, server.epoch)
    for path in (scrape, dump):
        done = CliRunner().invoke(
            app, ["ingest", "--db", str(db), "--format", "prometheus", str(path)]
        )
        assert done.exit_code == 0, done.stderr
    raw = server.raw(f'{SM}{{hostname="h100-a", gpu="0", job="dcgm-a"}}')
    (series,) = raw
    with open_store(db, read_only=True) as store:
        gpu0 = store.sql(
            "SELECT epoch(ts), sm_active, alloc_id FROM telemetry WHERE node_id = 'h100-a' "
            "AND gpu_index = 0 ORDER BY ts"
        ).rows()
        scraped = store.sql(
            "SELECT gpu_index, sm_active, alloc_id FROM telemetry WHERE node_id = 'h100-a' "
            "AND abs(epoch(ts) - $t) < 0.001 ORDER BY gpu_index",
            {"t": scrape.stat().st_mtime},
        ).rows()
    # promtool reads the blocks and the write-ahead log as far as the server has
    # written it: the last seconds may not be on disk yet
    dumped = [r for r in gpu0 if r[0] <= server.epoch + LIVE]
    assert len(dumped) >= LIVE // 2
    held = [(float(t), 0.8, "train-0") for t, _ in series["values"]
            if server.epoch <= float(t) <= dumped[-1][0]]  # fmt: skip
    assert [(pytest.approx(t), v, a) for t, v, a in held] == dumped
    assert scraped[:3] == [(0, 0.8, "train-0"), (1, 0.8, "train-0"), (2, 0.3, "serve-0")]


# -- the server's refusals, transport and retries -----------------------------------------------


def test_a_request_too_large_is_split_in_halves(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asked for 20,000 steps in one request, Prometheus refuses ("exceeded maximum
    resolution of 11,000 points per timeseries"): the collector asks for the halves."""
    pull = importlib.import_module("fleetaudit.inputs.ingest.prometheus_pull")
    monkeypatch.setattr(pull, "PULL_POINTS_PER_SERIES", 20_000)
    messages: list[str] = []
    settings = PrometheusPull(server.prometheus.url, since=_seconds(6 * 3600), until=_utc(server.hist_end),
                              step=_seconds(1), points_per_query=10**9)  # fmt: skip
    files = pull.collect(settings, tmp_path, messages.append)
    starts = sorted({_chunk_of(m) for m in messages if SM in m and "avg_over_time" in m})
    assert len(starts) >= 3, messages  # 21,601 steps: the first 20,000 refused, then halves
    assert any(p.name.startswith(f"avg_over_time-{SM}") for p in files)


def test_unreachable_and_refusing_servers_say_so(server: Server, tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    closed = f"http://127.0.0.1:{ps.free_port()}"
    done = CliRunner().invoke(
        app, ["ingest", "--db", str(db), "--format", "prometheus", "--url", closed, "--since", "1h"]
    )
    assert done.exit_code == 2
    assert done.stderr.count("\n") == 1
    assert "cannot reach the server" in done.stderr and "Connection refused" in done.stderr
    done = CliRunner().invoke(
        app,
        [
            "ingest",
            "--db",
            str(db),
            "--format",
            "prometheus",
            "--url",
            server.prometheus.url + "/nowhere",
            "--since",
            "1h",
        ],
    )
    assert done.exit_code == 2
    assert "HTTP 404 Not Found" in done.stderr
    assert not db.exists()  # nothing written


class _Proxy(http.server.ThreadingHTTPServer):
    """A forward HTTP proxy that records the headers it forwards; its first ``fail``
    requests answer 503 (a gateway that restarts)."""

    def __init__(self, fail: int = 0) -> None:
        self.seen: list[dict[str, str]] = []
        self.fail = fail
        super().__init__(("127.0.0.1", 0), _ProxyHandler)


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    server: _Proxy

    def do_GET(self) -> None:
        self.do_POST()

    def do_POST(self) -> None:
        self.server.seen.append({k.lower(): v for k, v in self.headers.items()})
        if self.server.fail > 0:
            self.server.fail -= 1
            self.send_error(503, "restarting")
            return
        length = int(self.headers.get("Content-Length") or 0)
        request = urllib.request.Request(
            self.path, data=self.rfile.read(length) if self.command == "POST" else None,
            headers={k: v for k, v in self.headers.items() if k.lower() not in ("host", "proxy-connection")},
            method=self.command,
        )  # fmt: skip
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
            request, timeout=30
        ) as answer:
            body = answer.read()
            self.send_response(answer.status)
            for key in ("Content-Type", "Content-Encoding"):
                if answer.headers.get(key):
                    self.send_header(key, answer.headers[key])
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_proxy_from_the_environment_headers_token_and_retries(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = _Proxy(fail=2)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.server_address[1]}")
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.delenv("NO_PROXY", raising=False)
        token = write(tmp_path / "token", "s3cret\n")
        settings = PrometheusPull(
            server.prometheus.url, since=_seconds(600), until=_utc(server.hist_end),
            step=_seconds(HIST_STEP), bearer_token_file=token,
            headers=(("X-Scope-OrgID", "team-a"),), retry_wait_s=0.01,
        )  # fmt: skip
        db = _store(tmp_path, server.hosts, server.epoch)
        result = api.ingest_paths(
            api.StoreOptions(db), [], IngestOptions(format="prometheus", collect=settings)
        )
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert sum(t.new for t in result.tables if t.table == "telemetry") > 0
    assert len(proxy.seen) > 2  # the two 503s were retried
    assert all(h.get("authorization") == "Bearer s3cret" for h in proxy.seen)
    assert all(h.get("x-scope-orgid") == "team-a" for h in proxy.seen)


def test_tls_and_basic_auth(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second Prometheus behind its own TLS certificate and basic auth (its web config)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: no certificate to serve TLS with")
    crypt = _crypt()
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    hashed = crypt.crypt("pw", "$2b$05$" + "abcdefghijklmnopqrstuu")
    web = write(
        tmp_path / "web.yml",
        f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n"
        f"basic_auth_users:\n  fleet: '{hashed}'\n",
    )
    secure = ps.Prometheus(tmp_path / "tls", [], extra=(f"--web.config.file={web}",))
    secure.start(scheme="https", ca_file=cert, auth=("fleet", "pw"))
    try:
        url = f"https://127.0.0.1:{secure.port}"
        db = tmp_path / "s.duckdb"
        base = ["ingest", "--db", str(db), "--format", "prometheus", "--url", url, "--since", "1h"]
        runner = CliRunner()
        refused = runner.invoke(app, [*base, "--user", "fleet:pw"])
        assert refused.exit_code == 2 and "certificate verify failed" in refused.stderr
        unauthorized = runner.invoke(app, [*base, "--ca-file", str(cert)])
        assert unauthorized.exit_code == 2 and "HTTP 401 Unauthorized" in unauthorized.stderr
        ok = runner.invoke(app, [*base, "--ca-file", str(cert), "--user", "fleet:pw"])
        assert ok.exit_code == 0, ok.stderr
        ok = runner.invoke(app, [*base, "--insecure-skip-verify", "--user", "fleet:pw"])
        assert ok.exit_code == 0, ok.stderr
        (tmp_path / "home").mkdir()
        netrc = write(tmp_path / "home" / ".netrc", "machine 127.0.0.1 login fleet password pw\n")
        netrc.chmod(0o600)
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        ok = runner.invoke(app, [*base, "--ca-file", str(cert)])
        assert ok.exit_code == 0, ok.stderr
    finally:
        secure.stop()


def _crypt() -> Any:
    """The standard library's crypt (bcrypt through the system's libxcrypt), for the
    password hash Prometheus' web config takes."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import crypt
        except ImportError:
            pytest.skip("no crypt module in this Python: no bcrypt hash for basic auth")
    if not crypt.crypt("x", "$2b$05$" + "a" * 22):
        pytest.skip("the system's crypt() has no bcrypt")
    return crypt


def _seconds(n: float) -> timedelta:
    return timedelta(seconds=n)


def _utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, timezone.utc).replace(tzinfo=None)


def _chunk_of(message: str) -> str:
    return message.split(" chunk ")[1].split(" ")[1]
