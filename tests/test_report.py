"""fleetaudit report (SPEC §7): figures worked by hand, ledger identities, outputs, cron, browser.

tests/data/report_hand/ is the hand-worked fleet (its README says what each row
is for). The window is [2026-01-01T00:00Z, 2026-01-02T00:00Z), sampled hourly:
25 instants, each standing for 24/25 h.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import fleetaudit
from fleetaudit import api
from fleetaudit.api.report_api import ReportOptions, build_report
from fleetaudit.cli import app
from fleetaudit.core.resources import resource_dir
from fleetaudit.model import denominators as den
from fleetaudit.model import occupancy
from fleetaudit.model.shapes import CAUSES, evaluate, make_shape
from fleetaudit.outputs.contract import report_document
from fleetaudit.outputs.report import ReportContext, render_html

from .conftest import DATA, NODE_SCHEMA, write

runner = CliRunner()
PACKAGE_ROOT = Path(fleetaudit.__file__).resolve().parents[1]
HAND = DATA / "report_hand"
AT = "2026-01-02T00:00:00Z"
WINDOW = ("--at", AT, "--since", "1d", "--step", "1h")
PER_INSTANT = 24 / 25  # hours each of the 25 instants stands for


def invoke(*args: str | Path) -> Any:
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def hand_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("hand") / "hand.duckdb"
    api.ingest_paths(api.StoreOptions(db), [HAND])
    return db


@pytest.fixture(scope="module")
def hand(hand_db: Path) -> Any:
    return build_report(
        api.StoreOptions(hand_db),
        ReportOptions(
            at=datetime(2026, 1, 2),
            since=timedelta(days=1),
            step=timedelta(hours=1),
            generated_at=datetime(2026, 1, 2, 6),
        ),
    )


# -- figures worked by hand ------------------------------------------------------------


def test_physical_gpu_hours_by_hand(hand: Any) -> None:
    """Exact integrals, allocations straddling both edges counted by their overlap.

    H20: installed 3 x 8 x 24 = 576; healthy (n3 is down) 384. Allocated on n1:
    a1 4 GPUs 00-06 (started the day before) = 24, a2 2 GPUs 20-24 (still
    running) = 8, a8 1 GPU 10-12 = 2; a9 ends at the window's start and a10
    starts at its end: 0. n2: a3 8 x 24 = 192. a4 is on the down n3: not
    allocated. High: 24 + 2 + 192 = 218.
    A10 (n4): shares a5 (0.5, 00-12) and a6 (0.25, 06-18) pack onto one GPU:
    1 GPU for 18 h, plus a11 1 GPU 19-20: 19; high alone a6 12 + a11 1 = 13.
    L4: 2 x 24 = 48 installed, nothing allocated.
    """
    assert hand.models["H20"]["physical"] == {
        "installed_gpu_hours": 576.0,
        "healthy_gpu_hours": 384.0,
        "allocated_high_gpu_hours": 218.0,
        "allocated_gpu_hours": 226.0,
        "allocation_rate_high": 218 / 384,
        "allocation_rate": 226 / 384,
    }
    assert hand.models["A10"]["physical"]["allocated_gpu_hours"] == 19.0
    assert hand.models["A10"]["physical"]["allocated_high_gpu_hours"] == 13.0
    fleet = hand.fleet["physical"]
    assert fleet["installed_gpu_hours"] == 720.0
    assert fleet["healthy_gpu_hours"] == 528.0
    assert fleet["allocated_high_gpu_hours"] == 231.0
    assert fleet["allocated_gpu_hours"] == 245.0
    assert fleet["allocation_rate_high"] == pytest.approx(231 / 528)
    assert fleet["allocation_rate"] == pytest.approx(245 / 528)


def test_physical_is_exact_between_instants() -> None:
    """An allocation shorter than the step still counts in full (not sampled)."""
    nodes = pl.DataFrame(
        {"node_id": ["n"], "gpu_model": ["H20"], "gpus": [8], "cpus": [8.0],
         "memory_gib": [None], "switch_id": [None], "health": ["healthy"]},
        schema=NODE_SCHEMA,
    )  # fmt: skip
    t0 = datetime(2026, 1, 1)
    allocations = pl.DataFrame(
        {"alloc_id": ["a"], "node_id": ["n"], "gpus": [3.0], "cpus": [1.0],
         "memory_gib": [None], "priority": ["high"],
         "start_time": [t0 + timedelta(minutes=10)], "end_time": [t0 + timedelta(minutes=25)]},
        schema_overrides={"memory_gib": pl.Float64},
    )  # fmt: skip
    row = den.physical(nodes, allocations, t0, t0 + timedelta(hours=1)).row(0, named=True)
    assert row["allocated_gpu_hours"] == 3 * 15 / 60
    assert row["allocated_high_gpu_hours"] == 3 * 15 / 60


def test_schedulable_gpu_hours_by_hand(hand: Any) -> None:
    """Idle GPUs at the 25 hourly instants 00:00 .. 24:00, each standing for 24/25 h.

    H20 idle on n1: 4 at 00-05 (6 instants), 8 at 06-09 (4), 7 at 10-11 (2),
    8 at 12-19 (8), 6 at 20-23 (4), 5 at 24:00 (a10 starts then): 163. The
    queued 8-GPU node shape uses n1 only when it is all free (12 instants):
    96; the rest, 67, is fragment.
    A10: 3 idle at 00-17 (18), 4 at 18, 3 at 19, 4 at 20-24 (5): 81. The 1-GPU
    2-hour shape: at 18:00 one of the 4 free GPUs is taken at 19:00 (a11):
    interval 1; usable 80.
    L4: 2 idle at 25 instants, no queued shape: unqueued 50.
    """
    h20 = hand.models["H20"]["schedulable"]
    assert h20["idle_gpu_hours"] == pytest.approx(163 * PER_INSTANT)
    assert h20["usable_gpu_hours"] == pytest.approx(96 * PER_INSTANT)
    assert h20["stranded_gpu_hours"]["fragment"] == pytest.approx(67 * PER_INSTANT)
    assert h20["unhealthy_gpu_hours"] == pytest.approx(8 * 25 * PER_INSTANT)
    a10 = hand.models["A10"]["schedulable"]
    assert a10["idle_gpu_hours"] == pytest.approx(81 * PER_INSTANT)
    assert a10["usable_gpu_hours"] == pytest.approx(80 * PER_INSTANT)
    assert a10["stranded_gpu_hours"]["interval"] == pytest.approx(1 * PER_INSTANT)
    l4 = hand.models["L4"]["schedulable"]
    assert l4["stranded_gpu_hours"]["unqueued"] == pytest.approx(50 * PER_INSTANT)
    assert l4["usable_gpu_hours"] == 0


def test_shape_outlook_by_hand(hand: Any) -> None:
    """The 8-GPU shape starts at 12 of 25 instants; waits (h) 6,5,4,3,2,1 at 00-05, 0 at
    06-09, 2,1 at 10-11, 0 at 12-19, censored at 20-24: p50 the 13th smallest = 1 h,
    p90 the 23rd = censored."""
    by_label = {s.shape.label(): s for s in hand.shapes}
    eight = by_label["H20 8 GPU node"]
    assert (eight.p_start, eight.wait_p50_s, eight.wait_p90_s) == (12 / 25, 3600.0, None)
    assert eight.usable_gpu_hours == pytest.approx(96 * PER_INSTANT)
    share = by_label["H20 0.5 GPU node"]
    assert share.p_start == 1.0  # n1 has a free GPU at every instant


def test_productive_by_hand(hand: Any) -> None:
    """a1: 24 samples (4 GPUs x 6 h) at 0.5 with its alloc_id; 2 samples at 0.9 on n1 GPU 4
    without one, at 10:00 and 11:00, when a8 is the only GPU allocation there. Each
    sample stands for the median gap, 1 h."""
    assert hand.telemetry["interval_s"] == 3600.0
    assert hand.telemetry["samples"] == 26
    productive = hand.fleet["productive"]
    assert productive["telemetry_gpu_hours"] == pytest.approx(26.0)
    assert productive["sm_active_gpu_hours"] == pytest.approx(12.0 + 1.8)
    assert productive["by_workload"]["training"] == pytest.approx(13.8 / 26)
    assert productive["by_workload"]["online_inference"] is None  # no telemetry
    # allocated (gpus x overlap, every node): 24 + 8 + 192 + 192 + 6 + 3 + 2 + 1
    assert productive["allocated_gpu_hours"] == pytest.approx(428.0)
    # a1 shared n1 with the cpu_only a7 (00-03); a8 (10-12) did not
    assert hand.neighbour["with_cpu_neighbour"] == pytest.approx(0.5)
    assert hand.neighbour["without_cpu_neighbour"] == pytest.approx(0.9)
    assert hand.neighbour["drop"] == pytest.approx(1 - 0.5 / 0.9)


def test_tenants_by_hand(hand: Any) -> None:
    """Healthy nodes, shares by their fraction; a4 (vision) is on the down n3."""
    hours = {t: f["physical"]["allocated_gpu_hours"] for t, f in hand.tenants.items()}
    assert hours == pytest.approx({"ads": 193.0, "search": 14.0, "vision": 26.0, "etl": 0.0})
    assert hand.tenants["vision"]["productive"]["productive_rate"] == pytest.approx(13.8 / 26)


# -- ledger identities per step ----------------------------------------------------------


def _assert_identities(steps: pl.DataFrame) -> None:
    split = steps.select(pl.sum_horizontal("usable", *den.SPLIT)).to_series()
    ledger = steps.select(
        pl.sum_horizontal("unhealthy", "allocated_high", "allocated_low", "idle")
    ).to_series()
    assert (ledger == steps["installed"]).all()
    assert ((split - steps["idle"]).abs() < 1e-9).all()
    assert (steps.select(pl.min_horizontal("usable", *den.SPLIT)).to_series() >= 0).all()


def test_ledger_identities_per_step(hand: Any) -> None:
    _assert_identities(hand.steps)
    assert hand.steps.height == 25 * 3


def _differential(
    nodes: pl.DataFrame, allocations: pl.DataFrame, shapes: list, instants: list
) -> None:
    """Every instant, shape and model: the vectorised figures equal shapes.evaluate's."""
    result = den.schedulable(nodes, allocations, shapes, instants, timedelta(hours=len(instants)))
    _assert_identities(result.steps)
    for index, (shape, _) in enumerate(shapes):
        if shape.is_share:
            continue
        duration = timedelta(seconds=shape.duration_s) if shape.duration_s else None
        starts = 0
        for t in instants:
            state = occupancy.node_state(nodes, allocations, t, duration)
            starts += evaluate(state, shape).instances >= 1
            best = result.steps.filter(pl.col("instant") == t, pl.col("best") == index)
            for row in best.iter_rows(named=True):
                ledger = evaluate(
                    state.filter(pl.col("gpu_model") == row["gpu_model"]), shape
                ).ledger
                assert row["usable"] == ledger.usable
                assert ledger.stranded is not None
                for cause in CAUSES:
                    assert row[cause] == ledger.stranded[cause], (t, row, cause)
        assert result.shapes[index].p_start == starts / len(instants)


def test_vectorised_ledger_equals_shapes_evaluate_on_the_hand_fleet(hand_db: Path) -> None:
    with api.reading(api.StoreOptions(hand_db)) as store:
        nodes, allocations = api.load_frames(store, datetime(2026, 1, 1), datetime(2026, 1, 3))
    shapes = [
        (make_shape("H20", 8), 1),
        (make_shape("A10", 1, duration_s=7200), 1),
        (make_shape("A10", 1, memory_gib_per_gpu=100, duration_s=5400), 1),  # not whole steps
        (make_shape("H20|A10", 2, cpus_per_gpu=20), 1),
        (make_shape(None, 4, 2, locality="switch", duration_s=3 * 3600), 1),
        (make_shape("H20", 6, 2, locality="any", memory_gib_per_gpu=100), 1),
    ]
    instants = den.window_instants(datetime(2026, 1, 2), timedelta(days=1), timedelta(hours=1))
    _differential(nodes, allocations, shapes, instants)


@pytest.mark.parametrize("cells", [1, 7, 26])
def test_chunked_instants_give_the_same_ledger(
    hand_db: Path, cells: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep in chunks of 1, 1 and 5 instants (5 nodes) equals the sweep in one go,
    durations that are whole steps (sliding maxima across chunk edges) included."""
    with api.reading(api.StoreOptions(hand_db)) as store:
        nodes, allocations = api.load_frames(store, datetime(2026, 1, 1), datetime(2026, 1, 3))
    shapes = [
        (make_shape("H20", 8), 1),
        (make_shape("A10", 1, duration_s=7200), 1),
        (make_shape("A10", 1, memory_gib_per_gpu=100, duration_s=5400), 1),
        (make_shape(None, 4, 2, locality="switch", duration_s=3 * 3600), 1),
        (make_shape("H20", 0.5), 1),
    ]
    instants = den.window_instants(datetime(2026, 1, 2), timedelta(days=1), timedelta(hours=1))
    whole = den.schedulable(nodes, allocations, shapes, instants, timedelta(days=1))
    monkeypatch.setattr(den, "_CHUNK_CELLS", cells)
    chunked = den.schedulable(nodes, allocations, shapes, instants, timedelta(days=1))
    assert chunked.steps.equals(whole.steps)
    assert chunked.shapes == whole.shapes


@given(st.integers(1, 40), st.integers(1, 9), st.integers(0, 2**32 - 1))
def test_sliding_max_equals_a_plain_window_maximum(width: int, n: int, seed: int) -> None:
    values = np.random.default_rng(seed).integers(0, 50, size=(3, n + width - 1))
    plain = np.stack([values[:, i : i + width].max(axis=1) for i in range(n)], axis=1)
    assert (den._sliding_max(values, width, n) == plain).all()


@st.composite
def _fleets(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame, list]:
    t0 = datetime(2026, 1, 1)
    count = draw(st.integers(1, 5))
    nodes = pl.DataFrame(
        {
            "node_id": [f"n{i}" for i in range(count)],
            "gpu_model": draw(st.lists(st.sampled_from(["H20", "A10"]), min_size=count, max_size=count)),
            "gpus": draw(st.lists(st.sampled_from([2, 4, 8]), min_size=count, max_size=count)),
            "cpus": [32.0] * count,
            "memory_gib": draw(st.lists(st.sampled_from([None, 64.0, 256.0]), min_size=count, max_size=count)),
            "switch_id": draw(st.lists(st.sampled_from([None, "s1", "s2"]), min_size=count, max_size=count)),
            "health": draw(st.lists(st.sampled_from(["healthy", "healthy", "down"]), min_size=count, max_size=count)),
        },
        schema=NODE_SCHEMA,
    )  # fmt: skip
    rows = draw(st.integers(0, 8))
    starts = draw(st.lists(st.integers(-3, 10), min_size=rows, max_size=rows))
    lengths = draw(st.lists(st.sampled_from([None, 1, 2, 5]), min_size=rows, max_size=rows))
    allocations = pl.DataFrame(
        {
            "alloc_id": [f"a{i}" for i in range(rows)],
            "node_id": draw(st.lists(st.sampled_from(nodes["node_id"].to_list()), min_size=rows, max_size=rows)),
            "gpus": draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]), min_size=rows, max_size=rows)),
            "cpus": draw(st.lists(st.sampled_from([1.0, 8.0, 24.0]), min_size=rows, max_size=rows)),
            "memory_gib": [32.0] * rows,
            "priority": draw(st.lists(st.sampled_from(["high", "low"]), min_size=rows, max_size=rows)),
            "start_time": [t0 + timedelta(hours=s) for s in starts],
            "end_time": [None if n is None else t0 + timedelta(hours=s + n) for s, n in zip(starts, lengths, strict=True)],
        },
        schema_overrides={"end_time": pl.Datetime("us"), "start_time": pl.Datetime("us")},
    )  # fmt: skip
    shapes = [
        (make_shape(draw(st.sampled_from([None, "H20", "A10"])), g, p, c, None, loc, d), 1)
        for g, p, c, loc, d in draw(
            st.lists(
                st.sampled_from(
                    [(1, 1, 0, "node", None), (2, 2, 8, "node", 7200), (4, 2, 0, "switch", None),
                     (2, 1, 8, "switch", 5400),
                     (4, 1, 0, "any", 3600), (8, 8, 0, "node", None), (0.5, None, 0, None, None)]
                ),
                min_size=1, max_size=3,
            )
        )
    ]  # fmt: skip
    return nodes, allocations, shapes


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_fleets())
def test_vectorised_ledger_equals_shapes_evaluate_on_random_fleets(fleet: tuple) -> None:
    nodes, allocations, shapes = fleet
    instants = den.window_instants(datetime(2026, 1, 1, 8), timedelta(hours=8), timedelta(hours=1))
    _differential(nodes, allocations, shapes, instants)


def _places_from_the_sweep_equal_node_state(
    nodes: pl.DataFrame, allocations: pl.DataFrame, shapes: list, instants: list, samples: int
) -> None:
    """The stranded places read from the free capacity the sweep kept equal those from
    a node_state per sampled instant and shape duration, frame for frame."""
    from fleetaudit.api.report_api import place_picks, stranded_places

    span = instants[-1] - instants[0]
    picks = place_picks(len(instants), nodes.height, samples)
    sched = den.schedulable(nodes, allocations, shapes, instants, span, keep=picks)
    assert sorted(sched.kept) == picks
    plain = [s for s, _ in shapes]
    kept = stranded_places(nodes, allocations, sched.steps, plain, span, samples, kept=sched.kept)
    recomputed = stranded_places(nodes, allocations, sched.steps, plain, span, samples)
    assert kept[1] == recomputed[1] == len(picks)
    assert kept[0].equals(recomputed[0]), (kept[0], recomputed[0])


@pytest.mark.parametrize("samples", [1, 5, 48])
def test_stranded_places_from_the_sweep_on_the_hand_fleet(
    hand_db: Path, samples: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    with api.reading(api.StoreOptions(hand_db)) as store:
        nodes, allocations = api.load_frames(store, datetime(2026, 1, 1), datetime(2026, 1, 3))
    shapes = [
        (make_shape("H20", 8), 1),
        (make_shape("A10", 1, duration_s=7200), 1),
        (make_shape("A10", 1, memory_gib_per_gpu=100, duration_s=5400), 1),
        (make_shape("H20|A10", 2, cpus_per_gpu=20), 1),
        (make_shape(None, 4, 2, locality="switch", duration_s=3 * 3600), 1),
        (make_shape("H20", 6, 2, locality="any", memory_gib_per_gpu=100), 1),
    ]
    instants = den.window_instants(datetime(2026, 1, 2), timedelta(days=1), timedelta(hours=1))
    monkeypatch.setattr(den, "_CHUNK_CELLS", 26)  # kept instants in several chunks
    _places_from_the_sweep_equal_node_state(nodes, allocations, shapes, instants, samples)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_fleets(), st.integers(1, 9))
def test_stranded_places_from_the_sweep_on_random_fleets(fleet: tuple, samples: int) -> None:
    nodes, allocations, shapes = fleet
    instants = den.window_instants(datetime(2026, 1, 1, 8), timedelta(hours=8), timedelta(hours=1))
    _places_from_the_sweep_equal_node_state(nodes, allocations, shapes, instants, samples)


# -- outputs ---------------------------------------------------------------------------


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.resources: list[str] = []
        self.anchors: list[str] = []
        self.ids: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "xlink:href") and value:
                if value.startswith("#"):  # a link within the page, not a resource
                    self.anchors.append(value)
                else:
                    self.resources.append(value)
        self.ids.extend(value for name, value in attrs if name == "id" and value)


def test_json_document_holds_the_spec_keys(hand: Any) -> None:
    document = report_document(hand)
    assert document["schema"] == "fleetaudit.report/1"
    assert document["window"] == {
        "start": "2026-01-01T00:00:00Z", "end": AT, "step_s": 3600.0, "instants": 25,
        "data": {"start": "2025-12-25T00:00:00Z", "end": "2026-01-02T00:00:00Z"},
        "shortened_from_s": None, "note": None,
    }  # fmt: skip
    for figures in (document["fleet"], *document["models"].values()):
        assert set(figures) == {"physical", "schedulable", "productive"}
        assert {"installed_gpu_hours", "healthy_gpu_hours", "allocated_high_gpu_hours",
                "allocated_gpu_hours", "allocation_rate_high", "allocation_rate"} <= set(figures["physical"])  # fmt: skip
        assert set(CAUSES) <= set(figures["schedulable"]["stranded_gpu_hours"])
        assert {"metric", "telemetry_gpu_hours", "sm_active_gpu_hours", "productive_rate",
                "by_workload"} <= set(figures["productive"])  # fmt: skip
    assert set(document["models"]) == {"A10", "H20", "L4"}
    assert set(document["tenants"]) == {"ads", "etl", "search", "vision"}
    assert document["recoverable"] == {"compaction": None, "harvesting": None}
    json.dumps(document, allow_nan=False)


def test_every_context_field_reaches_the_template() -> None:
    text = "\n".join(p.read_text() for p in resource_dir("templates").glob("*.html"))
    for name in ReportContext.__dataclass_fields__:
        assert re.search(rf"report\.{name}\b", text), name


def test_html_is_self_contained_and_holds_the_figures(hand: Any) -> None:
    page = render_html(hand)
    parser = _Tags()
    parser.feed(page)
    assert "script" not in parser.tags
    assert parser.resources == []
    assert "http://" not in page and "https://" not in page
    assert "@import" not in page and "url(" not in page
    assert '<b id="fleet-allocation-rate-high">43.8%</b>' in page
    assert '<b id="fleet-allocation-rate">46.4%</b>' in page
    assert "Not run on this database yet" in page


EVIL = '<script>alert("x")</script>&"\''


def _hostile(folder: Path) -> Path:
    """Ids, models, switch and tenant holding markup, quotes and ampersands (JSON Lines)."""
    tables = {
        "nodes": [{"node_id": f"n{EVIL}", "gpu_model": f"M{EVIL}", "gpus": 8, "cpus": 64,
                   "memory_gib": 512, "switch_id": f"s{EVIL}", "health": "healthy"}],
        "allocations": [{"alloc_id": f"a{EVIL}", "node_id": f"n{EVIL}", "gpus": 2, "cpus": 8,
                         "priority": "high", "workload": "training", "tenant": f"t{EVIL}",
                         "start_time": "2026-01-01T00:00:00Z", "end_time": None}],
        "requests": [{"request_id": "r1", "submit_time": "2026-01-01T12:00:00Z",
                      "gpu_model": f"M{EVIL}", "gpus": 4}],
    }  # fmt: skip
    for name, rows in tables.items():
        write(folder / f"{name}.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    return folder


def test_hostile_ids_render_escaped(tmp_path: Path) -> None:
    db = tmp_path / "h.duckdb"
    api.ingest_paths(api.StoreOptions(db), [_hostile(tmp_path / "in")])
    api.record_whatif_run(
        api.StoreOptions(db), "compaction", at=datetime(2026, 1, 1, 12), scenario=None,
        run_options={"note": "<script>x</script>"}, document={"before": {"free_nodes": "<b>"}},
    )  # fmt: skip
    html = tmp_path / "r.html"
    result = invoke("report", "--db", db, "--since", "6h", "--html", html)
    assert result.exit_code == 0, result.output
    page = html.read_text()
    parser = _Tags()
    parser.feed(page)
    assert "script" not in parser.tags
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;&#34;&#39;" in page
    assert EVIL not in page
    assert "&lt;b&gt;" in page  # a what-if document's value
    escaped = "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;&#34;&#39;"
    # every new label: the over-time chart's caption and band titles, the heat map's
    # model row and cell, the queued line's model
    assert f"<figcaption>M{escaped}</figcaption>" in page
    assert f"<title>M{escaped}: usable</title>" in page
    assert f'<text class="label" x="0" y="13">M{escaped}</text>' in page
    # the switch's name, cut in the middle to fit its cell (head and tail escaped)
    assert '<text x="4" y="31">s&lt;s…ript&gt;&amp;&#34;&#39;</text>' in page
    assert f"<title>switch s{escaped} (M{escaped}): 6 of 8 GPUs free</title>" in page
    assert f"<td>1</td><td>switch s{escaped}</td><td>M{escaped}</td>" in page  # where it strands
    assert "M<script>" in result.stdout  # the terminal prints the data as it is, no markup


EARLIER = ("--at", "2026-01-01T22:00:00Z", "--since", "1d", "--step", "1h")


def _reports(db: Path) -> list[tuple[str, str]]:
    """The recorded reports: (window end, demand), by report id."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute('SELECT "end", demand FROM reports ORDER BY report_id').fetchall()
    finally:
        con.close()
    return [(r[0].isoformat(), r[1]) for r in rows]


def test_cli_writes_dated_files_and_records_the_trend(hand_db: Path, tmp_path: Path) -> None:
    """The first report has no baseline; the report of a later window compares with it,
    each headline figure's change being the difference of the two documents' figures."""
    db = tmp_path / "trend.duckdb"
    shutil.copy(hand_db, db)
    out = tmp_path / "out"
    first = invoke("report", *EARLIER, "--db", db, "--json", out / "r-{date}-{time}.json")
    assert first.exit_code == 0, first.output
    assert "trend: no earlier recorded window of this report's kind" in first.stdout
    (written,) = out.glob("r-*.json")
    assert re.fullmatch(r"r-\d{4}-\d{2}-\d{2}-\d{6}\.json", written.name)
    earlier = json.loads(written.read_text())
    assert earlier["trend"] == {
        "key": {"scenario": None, "span_s": 86400.0, "step_s": 3600.0, "demand": "waited",
                "shapes": "default"},
        "previous": None,
        "figures": [],
        "history": [],
        "stale": None,
    }  # fmt: skip
    second = invoke("report", *WINDOW, "--db", db, "--json", tmp_path / "second.json")
    assert second.exit_code == 0, second.output
    now = json.loads((tmp_path / "second.json").read_text())
    trend = now["trend"]
    assert (trend["previous"]["start"], trend["previous"]["end"]) == (
        "2025-12-31T22:00:00Z", "2026-01-01T22:00:00Z",
    )  # fmt: skip
    rates = {f["figure"]: f for f in trend["figures"]}
    high = rates["physical.allocation_rate_high"]
    assert high["value"] == pytest.approx(231 / 528)  # this window, by hand above
    then = earlier["fleet"]["physical"]["allocation_rate_high"]
    assert (high["previous"], high["change"]) == (
        pytest.approx(then), pytest.approx(231 / 528 - then),
    )  # fmt: skip
    assert "trend since the window 2025-12-31T22:00:00Z .. 2026-01-01T22:00:00Z" in " ".join(
        second.stdout.split()
    )
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_re_run_of_a_window_replaces_its_point(hand_db: Path, tmp_path: Path) -> None:
    """An identical cron re-run adds no point: the store keeps one report per window, and
    the re-run compares with the preceding window, not with itself."""
    db = tmp_path / "rerun.duckdb"
    shutil.copy(hand_db, db)
    assert invoke("report", *EARLIER, "--db", db, "--record").exit_code == 0
    for _ in range(2):
        done = invoke("report", *WINDOW, "--db", db, "--json", tmp_path / "r.json")
        assert done.exit_code == 0, done.output
        trend = json.loads((tmp_path / "r.json").read_text())["trend"]
        assert trend["previous"]["end"] == "2026-01-01T22:00:00Z"
        assert len(trend["history"]) == 1
    assert _reports(db) == [("2026-01-01T22:00:00", "waited"), ("2026-01-02T00:00:00", "waited")]


def test_a_backfilled_report_compares_with_the_window_before_it(
    hand_db: Path, tmp_path: Path
) -> None:
    """A report for an earlier window, made after a later one was recorded, has no
    baseline (the later window is not its predecessor); a report of the later window
    then draws both in window order, and compares with the backfilled one."""
    db = tmp_path / "backfill.duckdb"
    shutil.copy(hand_db, db)
    assert invoke("report", *WINDOW, "--db", db, "--record").exit_code == 0
    backfilled = invoke("report", *EARLIER, "--db", db, "--json", tmp_path / "b.json")
    assert json.loads((tmp_path / "b.json").read_text())["trend"]["previous"] is None
    assert "no earlier recorded window" in backfilled.stdout
    invoke("report", *WINDOW, "--db", db, "--json", tmp_path / "w.json")
    trend = json.loads((tmp_path / "w.json").read_text())["trend"]
    assert [h["end"] for h in trend["history"]] == ["2026-01-01T22:00:00Z"]
    assert trend["previous"]["end"] == "2026-01-01T22:00:00Z"


def test_the_trend_keeps_demands_apart(hand_db: Path, tmp_path: Path) -> None:
    """A report of the submitted demand is no baseline for one of the waited demand."""
    db = tmp_path / "demand.duckdb"
    shutil.copy(hand_db, db)
    assert invoke("report", *EARLIER, "--demand", "submitted", "--db", db, "--record").exit_code == 0
    waited = invoke("report", *WINDOW, "--db", db, "--json", tmp_path / "w.json")
    assert waited.exit_code == 0, waited.output
    assert json.loads((tmp_path / "w.json").read_text())["trend"]["previous"] is None
    invoke("report", *WINDOW, "--demand", "submitted", "--db", db, "--json", tmp_path / "s.json")
    trend = json.loads((tmp_path / "s.json").read_text())["trend"]
    assert (trend["key"]["demand"], trend["previous"]["end"]) == (
        "submitted", "2026-01-01T22:00:00Z",
    )  # fmt: skip


def test_a_stale_export_is_said_and_fails_with_fail_if_stale(
    hand_db: Path, tmp_path: Path
) -> None:
    """The hand store's export time (its newest timestamp) is the same at the next report:
    a note says so; --fail-if-stale exits 66 and writes nothing. A newer ingest moves it."""
    db = tmp_path / "stale.duckdb"
    shutil.copy(hand_db, db)
    assert invoke("report", *WINDOW, "--db", db, "--record").exit_code == 0
    again = invoke("report", *WINDOW, "--db", db, "--json", tmp_path / "again.json")
    assert again.exit_code == 0
    assert "has not moved since the report recorded at" in " ".join(again.stderr.split())
    stale = json.loads((tmp_path / "again.json").read_text())["trend"]["stale"]
    assert stale["export_time"] == "2026-01-02T00:00:00Z"
    failed = invoke("report", *WINDOW, "--db", db, "--fail-if-stale", "--json", tmp_path / "f.json")
    assert failed.exit_code == 66
    assert failed.stderr.startswith("fleetaudit: error: the export time (2026-01-02T00:00:00Z)")
    assert not (tmp_path / "f.json").exists()
    write(tmp_path / "new" / "requests.csv", """
request_id,submit_time,gpu_model,gpus
late,2026-01-02T06:00:00Z,H20,1
""")
    assert invoke("ingest", tmp_path / "new", "--db", db, "-q").exit_code == 0
    fresh = invoke("report", *WINDOW, "--db", db, "--fail-if-stale")
    assert fresh.exit_code == 0, fresh.output


SHAPE_8 = {"gpu_model": "H100", "gpus": 8, "gpus_per_pod": 4, "locality": "switch"}


def test_whatif_runs_are_shown_with_when_and_what_they_recover(
    hand_db: Path, tmp_path: Path
) -> None:
    db = tmp_path / "w.duckdb"
    shutil.copy(hand_db, db)
    store = api.StoreOptions(db)
    api.record_whatif_run(
        store, "compaction", at=datetime(2026, 1, 2), scenario=None,
        run_options={"partition_size": 500},
        document={"schema": "fleetaudit.compaction/1", "moves": [{}, {}],
                  "before": {"partial_nodes": 3, "free_nodes": 1, "instances": [
                      {"shape": SHAPE_8, "instances": 1}]},
                  "after": {"partial_nodes": 1, "free_nodes": 2, "instances": [
                      {"shape": SHAPE_8, "instances": 2}]}, "bound": {"free_nodes": 3},
                  "migration": {"freed_gpus": 8, "pause_gpu_hours": 1234.56,
                                "payback_s": 1234.56 * 3600 / 8}},
    )  # fmt: skip
    api.record_whatif_run(
        store, "harvesting", at=datetime(2026, 1, 2), scenario=None, run_options={"since": "7d"},
        document={"schema": "fleetaudit.harvesting/1",
                  "policies": [{"policy": "spotgpu", "allocation_rate": 0.93, "preemptions": 4}]},
    )  # fmt: skip
    path = tmp_path / "w.json"
    result = invoke("report", *WINDOW, "--db", db, "--json", path, "--html", tmp_path / "w.html")
    assert result.exit_code == 0, result.output
    recoverable = json.loads(path.read_text())["recoverable"]
    compaction = recoverable["compaction"]
    assert compaction["before"] == {
        "partial_nodes": 3,
        "free_nodes": 1,
        "instances": [{"shape": SHAPE_8, "instances": 1}],
    }
    assert compaction["bound_free_nodes"] == 3 and compaction["moves"] == 2
    assert compaction["options"] == {"partition_size": 500} and compaction["stale"] is False
    assert recoverable["harvesting"]["policies"] == [
        {"policy": "spotgpu", "allocation_rate": 0.93, "preemptions": 4}
    ]
    assert compaction["migration"]["freed_gpus"] == 8
    # the options stay in the JSON; the terminal and the page say what the run recovers
    assert "compaction: ran " in result.stdout and "partition_size" not in result.stdout
    assert (
        "frees 8 GPUs: free nodes 1 → 2 (at most 3), partially occupied 3 → 1; "
        "2 moves: a pause of 1,234.56 GPU-hours, repaid after 154.3 h of use"
    ) in " ".join(result.stdout.split())
    assert "spotgpu: allocation rate high -, all 93.0%" in result.stdout
    assert "instances gained per shape: H100 8 GPU (2x4) switch +1" in result.stdout
    page = (tmp_path / "w.html").read_text()
    assert "partition_size" not in page and "<td>spotgpu</td>" in page
    # GPUs and nodes freed, instances gained per shape, and the pause to a hundredth, as
    # the terminal's and whatif compaction's (0.34 read 0 in whole GPU-hours)
    assert "<th>GPUs freed</th><td><strong>8</strong></td>" in page
    assert "<th>whole nodes freed</th><td><strong>1</strong>" in page
    assert "(free nodes 1 → 2, at most 3)" in page
    assert "<strong>1,234.56</strong> GPU-hours over 2 moves, repaid after 6.4d of use" in page
    assert "<tr><td>H100 8 GPU (2x4) switch</td><td>1</td><td>2</td><td>+1</td></tr>" in page


def test_bad_input_is_one_line_and_exit_2(hand_db: Path, tmp_path: Path) -> None:
    result = invoke("report", "--db", hand_db, "--since", "soon")
    assert result.exit_code == 2
    assert result.stderr == (
        "fleetaudit: error: --since: 'soon' is not a duration; write e.g. 90s, 30m, 6h or 7d\n"
    )
    missing = invoke("report", "--db", tmp_path / "none.duckdb")
    assert missing.exit_code == 2
    assert "no fleetaudit store here" in missing.stderr
    scenario = invoke("report", "--db", hand_db, "--scenario", "nope")
    assert scenario.exit_code == 2 and "no scenario named 'nope'" in scenario.stderr
    folder = invoke("report", "--db", hand_db, *WINDOW, "--json", tmp_path)
    assert folder.exit_code == 2
    assert folder.stderr == f"fleetaudit: error: {tmp_path}: is a folder; give a file name\n"
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    under_file = invoke("report", "--db", hand_db, *WINDOW, "--html", blocked / "r.html")
    assert under_file.exit_code == 2
    assert under_file.stderr.startswith(f"fleetaudit: error: {blocked / 'r.html'}: cannot write")
    assert under_file.stderr.count("\n") == 1


def test_failed_write_leaves_no_file(
    hand_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fleetaudit.outputs.report as report_module

    def broken(_: Any) -> str:
        raise OSError("disk full")

    monkeypatch.setattr(report_module, "render_html", broken)
    html = tmp_path / "r.html"
    html.write_text("the previous report")
    db = tmp_path / "f.duckdb"
    shutil.copy(hand_db, db)
    result = invoke("report", *WINDOW, "--db", db, "--html", html)
    assert result.exit_code == 1
    assert html.read_text() == "the previous report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.duckdb", "r.html"]


def test_busy_store_exits_75(hand_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "busy.duckdb"
    shutil.copy(hand_db, db)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time, duckdb; c = duckdb.connect(sys.argv[1]); print('locked', flush=True); time.sleep(30)",
         str(db)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        result = invoke("report", "--db", db, "--lock-timeout", "0.3")
        assert result.exit_code == 75
        assert (
            result.stderr.count("\n") == 1
            and "locked by another fleetaudit process" in result.stderr
        )
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def test_runs_under_a_cron_like_environment(hand_db: Path, tmp_path: Path) -> None:
    """env -i with PATH=/usr/bin:/bin, no terminal, no stdin, another working directory.

    PYTHONPATH names the folder of the fleetaudit under test, which the
    interpreter running the tests may not have installed (a crontab line names
    the venv's python or console script instead).
    """
    db = tmp_path / "cron.duckdb"
    shutil.copy(hand_db, db)
    work = tmp_path / "elsewhere"
    work.mkdir()
    done = subprocess.run(
        ["/usr/bin/env", "-i", "PATH=/usr/bin:/bin", f"HOME={tmp_path}", f"PYTHONPATH={PACKAGE_ROOT}",
         sys.executable,
         "-m", "fleetaudit", "report", *WINDOW, "--db", str(db),
         "--html", "reports/{date}.html", "--json", "reports/{date}.json"],
        cwd=work, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "\x1b[" not in done.stdout and "\x1b[" not in done.stderr
    assert "physical: allocated / healthy" in done.stdout
    written = sorted(p.suffix for p in (work / "reports").iterdir())
    assert written == [".html", ".json"]
    assert all(line.startswith(("wrote ", "note: ")) for line in done.stderr.splitlines())


# -- a real browser ----------------------------------------------------------------------


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def test_the_html_renders_in_a_real_browser(hand: Any, tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        pytest.skip(
            "no chromium on PATH: .ci/run installs Debian's chromium; it could not here "
            "(no apt, no root or no registry), so the rendered page is not checked"
        )
    page = tmp_path / "report.html"
    page.write_text(render_html(hand), encoding="utf-8")
    flags = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]  # fmt: skip
    env = {**os.environ, "HOME": str(tmp_path)}
    dom = subprocess.run(
        [browser, *flags, "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert dom.returncode == 0, dom.stderr[-2000:]
    for element, text in (
        ("fleet-allocation-rate-high", "43.8%"),
        ("fleet-allocation-rate", "46.4%"),
        ("fleet-usable-gpu-hours", "169"),
        ("fleet-productive-rate", "53.1%"),
    ):
        assert f'id="{element}">{text}</b>' in dom.stdout, element
    for width in (1400, 800):  # a wide window, and a narrow one (the page folds)
        shot = tmp_path / f"report-{width}.png"
        done = subprocess.run(
            [browser, *flags, "--hide-scrollbars", f"--window-size={width},2400",
             f"--screenshot={shot}", page.as_uri()],
            capture_output=True, text=True, timeout=120, check=False, env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
        rows = _png_rows(shot.read_bytes())
        assert len(rows[0]) == width
        # nothing overflows the page's width: the body's right margin stays blank (a
        # table, chart or line wider than the window would run through it), while the
        # page's content does reach the middle of the window
        margin = {row[x] for row in rows for x in range(width - 6, width)}
        assert margin == {(255, 255, 255)}, f"something overflows {width} px"
        assert any(
            row[x] != (255, 255, 255) for row in rows for x in range(width // 2 - 5, width // 2 + 5)
        )


def _png_rows(data: bytes) -> list[list[tuple[int, int, int]]]:
    """The RGB pixels of an 8-bit RGB or RGBA PNG (as Chromium writes), row by row."""
    import struct
    import zlib

    pos, chunks, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks += body
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6), (depth, colour)
    size = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(chunks), width * size
    rows: list[list[tuple[int, int, int]]] = []
    previous = bytearray(stride)
    for y in range(height):
        kind, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for i in range(stride):
            a = line[i - size] if i >= size else 0
            b, c = previous[i], previous[i - size] if i >= size else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x : x + 3]) for x in range(0, stride, size)])  # type: ignore[misc]
        previous = line
    return rows


def _on_a_terminal(args: list[str], env: dict[str, str]) -> bytes:
    """stdout of ``python -m fleetaudit ARGS`` written to a pseudo-terminal."""
    import pty

    master, slave = pty.openpty()
    done = subprocess.run(
        [sys.executable, "-m", "fleetaudit", *args], stdout=slave, stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL, env=env, timeout=120, check=False,
    )  # fmt: skip
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO once the terminal's writer is gone
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert done.returncode == 0, done.stderr
    return out


def test_colour_on_a_terminal_and_none_with_no_color(hand_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "tty.duckdb"
    shutil.copy(hand_db, db)
    args = ["report", *WINDOW, "--db", str(db)]
    base = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TERM")}
    base |= {"TERM": "xterm-256color", "COLUMNS": "150", "PYTHONPATH": str(PACKAGE_ROOT)}
    colour = re.compile(rb"\x1b\[(?:[0-9;]*;)?(?:3[0-7]|38;[25][0-9;]*)m")
    assert colour.search(_on_a_terminal(args, base))
    plain = _on_a_terminal(args, {**base, "NO_COLOR": "1"})
    assert b"physical: allocated / healthy" in plain
    assert not colour.search(plain)


def test_a_store_from_before_reports_gets_the_table_and_a_trend(
    hand_db: Path, tmp_path: Path
) -> None:
    db = tmp_path / "old.duckdb"
    shutil.copy(hand_db, db)
    import duckdb

    con = duckdb.connect(str(db))
    con.execute("DROP TABLE IF EXISTS reports")
    con.close()
    first = invoke("report", *EARLIER, "--db", db, "--record")
    assert first.exit_code == 0, first.output
    assert "trend: no earlier recorded window of this report's kind" in first.stdout
    second = invoke("report", *WINDOW, "--db", db)
    assert "trend since the window" in second.stdout


def test_a_store_whose_reports_lack_the_trend_key_starts_a_new_trend(
    hand_db: Path, tmp_path: Path
) -> None:
    """Reports recorded before the demand and shape budget were kept (their columns
    NULL) are no baseline: which demand they evaluated is not known."""
    import duckdb

    db = tmp_path / "older.duckdb"
    shutil.copy(hand_db, db)
    assert invoke("report", *EARLIER, "--db", db, "--record").exit_code == 0
    con = duckdb.connect(str(db))
    con.execute("UPDATE reports SET demand = NULL, shapes = NULL, exported = NULL")
    con.close()
    result = invoke("report", *WINDOW, "--db", db, "--record")
    assert "no earlier recorded window" in result.stdout
    assert "has not moved" not in result.stderr


def test_scenario_is_read_instead_of_the_recorded_state(hand_db: Path, tmp_path: Path) -> None:
    """A scenario that removes a3 (8 GPUs of n2 for the whole day) frees 192 H20 GPU-hours;
    its trend is kept apart from the recorded state's."""
    db = tmp_path / "s.duckdb"
    shutil.copy(hand_db, db)
    with api.writing(api.StoreOptions(db)) as store:
        removed = store.query(
            "allocations_overlapping", start=datetime(2026, 1, 1), end=datetime(2026, 1, 2),
            scenario=None,
        ).filter(pl.col("alloc_id") == "a3").with_columns(pl.lit(True).alias("removed"))  # fmt: skip
        api.save_scenario(
            store, "no-a3", removed, base="recorded", command="test", options={},
            at=datetime(2026, 1, 2),
        )  # fmt: skip
    assert invoke("report", *WINDOW, "--db", db, "--record").exit_code == 0
    path = tmp_path / "s.json"
    result = invoke("report", *WINDOW, "--db", db, "--scenario", "no-a3", "--json", path)
    assert result.exit_code == 0, result.output
    document = json.loads(path.read_text())
    assert document["scenario"] == "no-a3"
    assert document["models"]["H20"]["physical"]["allocated_gpu_hours"] == 226.0 - 192.0
    assert document["trend"]["previous"] is None  # the recorded state's report is not its own


def test_report_counts_the_rows_ingest_rejected(tmp_path: Path) -> None:
    """Two telemetry rows above 100 (neither fractions nor percent) are rejects; the
    report says so in its notes and its JSON."""
    db = tmp_path / "rejects.duckdb"
    bad = write(
        tmp_path / "more" / "telemetry.csv",
        "ts,node_id,gpu_index,sm_active\n"
        "2026-01-01T01:00:00Z,n1,0,150\n2026-01-01T01:00:00Z,n1,1,250\n"
        "2026-01-01T01:00:00Z,n1,2,0.5\n",
    )
    api.ingest_paths(api.StoreOptions(db), [HAND, bad])
    result = build_report(api.StoreOptions(db), ReportOptions(at=datetime.fromisoformat(AT),
                          since=timedelta(days=1), step=timedelta(hours=1)))  # fmt: skip
    assert result.rejects == {"telemetry": 2}
    assert report_document(result)["rejects"] == {"telemetry": 2}
    assert any("rejected 2 row(s) (telemetry 2)" in note for note in result.notes)


def test_trend_compares_like_for_like(hand_db: Path, tmp_path: Path) -> None:
    """The hand fleet's healthy GPUs are n1, n2 (H20), n4 (A10) and n5 (L4): 22 GPUs, so
    22 healthy GPU-hours per hour whatever the window. A 2-day window, or a 1-day one
    sampled every 2 h, is no baseline for a 1-day window sampled hourly; the preceding
    1-day hourly window is, and its per-hour figures change by 0."""
    db = tmp_path / "like.duckdb"
    shutil.copy(hand_db, db)
    two_days = ("--at", "2026-01-01T22:00:00Z", "--since", "2d", "--step", "1h")
    other_step = ("--at", "2026-01-01T22:00:00Z", "--since", "1d", "--step", "2h")
    for args in (two_days, other_step):
        assert invoke("report", *args, "--db", db, "--record").exit_code == 0
    first = invoke("report", *WINDOW, "--db", db, "--json", tmp_path / "first.json")
    assert "trend: no earlier recorded window" in first.stdout
    assert json.loads((tmp_path / "first.json").read_text())["trend"]["previous"] is None
    assert invoke("report", *EARLIER, "--db", db, "--record").exit_code == 0
    invoke("report", *WINDOW, "--db", db, "--json", tmp_path / "second.json")
    trend = json.loads((tmp_path / "second.json").read_text())["trend"]
    figures = {f["figure"]: f for f in trend["figures"]}
    healthy = figures["physical.healthy_gpu_hours_per_hour"]
    assert (healthy["value"], healthy["previous"], healthy["change"]) == (22.0, 22.0, 0.0)
    assert "physical.healthy_gpu_hours" not in figures  # totals grow with the window


def test_an_ad_hoc_report_is_no_baseline(hand_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "adhoc.duckdb"
    shutil.copy(hand_db, db)
    past = ("--at", "2026-01-01T12:00:00Z", "--since", "1d", "--step", "1h")
    later = ("--at", "2026-01-01T13:00:00Z", "--since", "1d", "--step", "1h")
    adhoc = invoke("report", *past, "--db", db)
    assert adhoc.exit_code == 0, adhoc.output
    assert "not recorded for the next trend" in " ".join(adhoc.stderr.split())
    assert "no earlier recorded" in invoke("report", *later, "--db", db).stdout
    assert invoke("report", *past, "--db", db, "--record").exit_code == 0
    assert "trend since the window" in invoke("report", *later, "--db", db).stdout


def test_a_read_only_store_reports_and_says_it_did_not_record(
    hand_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "ro.duckdb"
    shutil.copy(hand_db, db)
    real = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode: (mode != os.W_OK or Path(p) != db) and real(p, mode)
    )
    result = invoke("report", *WINDOW, "--db", db, "--json", tmp_path / "ro.json")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "ro.json").exists()
    assert f"not recorded for the next trend: {db} is read-only" in " ".join(result.stderr.split())


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes read-only files")
def test_a_read_only_store_file_reports(hand_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "ro.duckdb"
    shutil.copy(hand_db, db)
    db.chmod(0o444)
    result = invoke("report", *WINDOW, "--db", db, "--record")
    assert result.exit_code == 0, result.output
    assert "not recorded for the next trend" in " ".join(result.stderr.split())


def test_a_three_report_trend_is_drawn_in_html_and_on_the_terminal(
    hand_db: Path, tmp_path: Path
) -> None:
    """Two recorded windows with hand-set figures, then this one (43.75% high, from above).

    The windows end at 22:00 and 23:00; the 23:00 one is recorded first, and the chart
    still runs by window end. Its x: 0, 300, 600; y = 160 - 160 x rate. Usable share
    of idle is usable / idle per hour: 5/10 then 2/8. The first window has no SM-active
    rate: its line starts at the second.
    """
    import duckdb

    db = tmp_path / "three.duckdb"
    shutil.copy(hand_db, db)
    for at in ("2026-01-01T23:00:00Z", "2026-01-01T22:00:00Z"):  # the later one first
        window = ("--at", at, "--since", "1d", "--step", "1h")
        assert invoke("report", *window, "--db", db, "--record").exit_code == 0
    figures = [
        {"physical.allocation_rate_high": 0.25, "physical.allocation_rate": 0.5,
         "schedulable.idle_gpu_hours_per_hour": 10.0,
         "schedulable.usable_gpu_hours_per_hour": 5.0, "productive.productive_rate": None},
        {"physical.allocation_rate_high": 0.5, "physical.allocation_rate": 0.75,
         "schedulable.idle_gpu_hours_per_hour": 8.0,
         "schedulable.usable_gpu_hours_per_hour": 2.0, "productive.productive_rate": 0.5},
    ]  # fmt: skip
    con = duckdb.connect(str(db))
    ids = [r[0] for r in con.execute('SELECT report_id FROM reports ORDER BY "end"').fetchall()]
    for report_id, values in zip(ids, figures, strict=True):
        con.execute(
            "UPDATE reports SET figures = ? WHERE report_id = ?", [json.dumps(values), report_id]
        )
    con.close()
    html, doc = tmp_path / "t.html", tmp_path / "t.json"
    third = invoke("report", *WINDOW, "--db", db, "--html", html, "--json", doc)
    assert third.exit_code == 0, third.output
    history = json.loads(doc.read_text())["trend"]["history"]
    assert [h["figures"] for h in history] == figures
    now = json.loads(doc.read_text())["fleet"]
    usable_share = now["schedulable"]["usable_gpu_hours"] / now["schedulable"]["idle_gpu_hours"]
    productive = now["productive"]["productive_rate"]
    page = html.read_text()
    lines = re.findall(r'<polyline class="trend"[^>]* points="([^"]*)"', page)
    assert lines == [
        "0.0,120.0 300.0,80.0 600.0,90.0",  # allocation rate high: 25%, 50%, 231/528
        f"0.0,80.0 300.0,40.0 600.0,{160 - 160 * now['physical']['allocation_rate']:.1f}",
        f"0.0,80.0 300.0,120.0 600.0,{160 - 160 * usable_share:.1f}",
        f"300.0,80.0 600.0,{160 - 160 * productive:.1f}",
    ]
    assert "across the 3 recorded windows of this report's kind, by window end" in page
    assert "over 3 recorded windows, oldest first (this one last):" in third.stdout
    assert re.search(r"^  allocation rate, high +▁█▆ 43\.8%$", third.stdout, re.M)
    # no SM-active rate in the first record: a blank, then 50% and 53.1% (▁ least, █ most)
    assert f"  {'SM-active rate':<27}  ▁█ 53.1%" in third.stdout


def test_where_it_strands_by_switch_domain_by_hand(hand: Any) -> None:
    """Every one of the 25 instants is sampled (a small fleet), so each domain's GPU-hours
    add up to its model's stranded GPU-hours exactly.

    sw-a (n1, n2: H20): the fragment GPUs of the schedulable table, 64.32; sw-c (L4, no
    shape asks for it): its 2 free GPUs at every instant are unqueued, 2 x 24 = 48;
    n4 (A10, no switch: its own domain): the 0.96 interval GPU-hours. sw-b (n3) is down:
    nothing idle there strands.
    """
    assert hand.places_instants == 25
    rows = {(r["domain"], r["gpu_model"]): r for r in hand.places.iter_rows(named=True)}
    # largest first, domains spelled as every command spells them
    assert list(rows) == [("switch sw-a", "H20"), ("switch sw-c", "L4"), ("node n4", "A10")]
    assert rows["switch sw-a", "H20"]["fragment"] == pytest.approx(64.32)
    assert rows["switch sw-c", "L4"]["unqueued"] == pytest.approx(48.0)
    assert rows["node n4", "A10"]["interval"] == pytest.approx(0.96)
    for model, figures in hand.models.items():
        for cause, hours in figures["schedulable"]["stranded_gpu_hours"].items():
            assert sum(r[cause] for r in rows.values() if r["gpu_model"] == model) == (
                pytest.approx(hours)
            ), (model, cause)
    document = report_document(hand)["stranded_places"]
    assert document["sampled_instants"] == 25
    assert document["domains"][0] == {
        "domain": "switch sw-a", "gpu_model": "H20", "interval": 0.0, "fragment": 64.32,
        "cpu_memory": 0.0, "topology": 0.0, "unqueued": 0.0, "stranded_gpu_hours": 64.32,
    }  # fmt: skip
    page = render_html(hand)
    assert (
        "<tr><td>1</td><td>switch sw-a</td><td>H20</td><td><b>64</b></td>\n"
        "<td>0</td><td>64</td><td>0</td><td>0</td><td>0</td></tr>"
    ) in page
    assert "Estimated from 25 of the window's\n25 sampled instants" in page


def test_a_larger_fleet_samples_fewer_instants_for_where_it_strands() -> None:
    from fleetaudit.api.report_api import place_samples

    assert place_samples(1) == 48 and place_samples(19_400) == 8 and place_samples(10**9) == 8


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(2, 30),
    st.data(),
)
def test_segment_rows_is_the_search_per_cell(nodes: int, stride: int, data: st.DataObject) -> None:
    """The ledger's row lookup equals one searchsorted per (node, point), including a node
    whose first segment starts after some points, and a node without segments."""
    per_node = [
        sorted(data.draw(st.sets(st.integers(0, stride - 1), max_size=6))) for _ in range(nodes)
    ]
    keys = np.array([r * stride + o for r, offs in enumerate(per_node) for o in offs], dtype=np.int64)
    points = np.array(sorted(data.draw(st.lists(st.integers(0, stride - 1), max_size=8))), dtype=np.int64)
    query = np.arange(nodes, dtype=np.int64)[:, None] * stride + points[None, :]
    expected = np.searchsorted(keys, query.ravel(), side="right").reshape(nodes, len(points)) - 1
    assert den._segment_rows(keys, stride, nodes, points).tolist() == expected.tolist()


HEAT_LABELS = DATA / "heatmap_labels"
_CELL_LABEL = re.compile(  # a cell's first line: its label, not its "free" figure
    r'<text x="\d+" y="\d+"( font-style="italic")?>(?!\d+/\d+ free)([^<]*)</text>'
)


def test_heatmap_labels_tell_the_cells_apart(tmp_path: Path) -> None:
    """Switches sw-0011..13 (cut to "switch sw-0…" once), two long switch names that
    differ only at the end, and two nodes without a switch (their own domains)."""
    db, html = tmp_path / "labels.duckdb", tmp_path / "labels.html"
    assert invoke("ingest", HEAT_LABELS, "--db", db).exit_code == 0
    result = invoke(
        "report", "--db", db, "--at", "2026-01-01T12:00:00Z", "--since", "6h", "--step", "1h",
        "--html", html,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    page = html.read_text()
    cells = _CELL_LABEL.findall(page)
    # domains in their order (lone nodes sort first); a lone node's name in italics
    assert cells == [
        (' font-style="italic"', "gpu…ode-0017"),
        (' font-style="italic"', "n9"),
        ("", "clu…eaf-0101"),
        ("", "clu…eaf-0102"),
        ("", "sw-0011"),
        ("", "sw-0012"),
        ("", "sw-0013"),
    ]
    # the full name stays in the cell's tooltip
    assert "<title>switch cluster-east-leaf-0102 (H20): 0 of 8 GPUs free</title>" in page
    assert "<title>switch sw-0011 (H20): 4 of 8 GPUs free</title>" in page
    assert "<title>node gpu-node-0017 (H20): 8 of 8 GPUs free</title>" in page


@pytest.mark.parametrize(
    ("domain", "label", "lone"),
    [
        ("switch sw-0011", "sw-0011", False),
        ("node n4", "n4", True),
        ("switch abcdefghijkl", "abcdefghijkl", False),  # 12 characters fit
        ("switch abcdefghijklm", "abc…fghijklm", False),
        ("node rack12-gpu-node-007", "rac…node-007", True),
    ],
)
def test_heatmap_cell_label(domain: str, label: str, lone: bool) -> None:
    from fleetaudit.outputs.report import cell_label

    assert cell_label(domain) == (label, lone)


@given(st.sampled_from(["switch ", "node "]), st.text(min_size=1, max_size=40))
def test_a_cell_label_fits_and_keeps_the_tail(level: str, name: str) -> None:
    from fleetaudit.outputs.report import cell_label

    label, lone = cell_label(level + name)
    assert len(label) <= 12 and lone == (level == "node ")
    assert label == name if len(name) <= 12 else label.endswith(name[-8:])


def test_wait_and_step_texts_by_hand() -> None:
    """The report's (and the console's) texts of a wait and of a step, worked by hand:
    a wait is scaled to the largest unit it reaches, to one decimal; a step is written
    in the largest unit that divides it."""
    from fleetaudit.outputs import console
    from fleetaudit.outputs.report import _duration, _wait

    # 5,400 s = 1.5 h; 129,600 s = 1.5 d; 90 s = 1.5 m; 59 s stays seconds
    for seconds, text in ((5_400, "1.5h"), (129_600, "1.5d"), (90, "1.5m"), (59, "59s")):
        assert _wait(seconds) == text
        assert console.seconds_text(seconds) == text
    assert _wait(None) == "never in the window" and console.seconds_text(None) == "-"
    # 7,200 s = 2 h exactly; 5,400 s is not whole hours but 90 whole minutes; 90 s is neither
    assert [_duration(s) for s in (7_200, 5_400, 90, 86_400)] == ["2h", "90m", "90s", "1d"]
    assert _duration(None) == "-"


# ------------------------------------------------------------ the tiny fleet, end to end


def test_report_physical_gpu_hours_match_the_tiny_hand_worked_json(
    tmp_path: Path, tiny_dir: Path
) -> None:
    """The tiny README's physical GPU-hours over [00:00, 12:00), through the command
    line: every figure of expected_physical_00_12.json, for the fleet, and per model
    (A10 is n7 alone: 4 GPUs x 12 h, healthy, nothing allocated)."""
    db, out = tmp_path / "tiny.duckdb", tmp_path / "report.json"
    assert invoke("ingest", tiny_dir, "--db", db).exit_code == 0
    result = invoke("report", "--db", db, "--at", "2026-01-01T12:00:00Z", "--since", "12h",
                    "--json", out)  # fmt: skip
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    assert document["window"]["start"] == "2026-01-01T00:00:00Z"
    expected = json.loads((tiny_dir / "expected_physical_00_12.json").read_text())
    fleet = document["fleet"]["physical"]
    for key, value in expected.items():
        assert fleet[key] == pytest.approx(value, abs=1e-6), key
    # rates divide by healthy GPU-hours: 52 / 528 and 54.667 / 528
    assert fleet["allocation_rate_high"] == pytest.approx(52 / 528, abs=1e-6)
    assert fleet["allocation_rate"] == pytest.approx((164 / 3) / 528, abs=1e-6)
    h20, a10 = document["models"]["H20"]["physical"], document["models"]["A10"]["physical"]
    assert (h20["installed_gpu_hours"], h20["healthy_gpu_hours"]) == (576, 480)  # n5 cordoned
    assert h20["allocated_gpu_hours"] == pytest.approx(164 / 3, abs=1e-6)
    assert h20["allocated_high_gpu_hours"] == pytest.approx(52, abs=1e-6)
    assert (a10["installed_gpu_hours"], a10["healthy_gpu_hours"]) == (48, 48)
    assert (a10["allocated_gpu_hours"], a10["allocated_high_gpu_hours"]) == (0, 0)


def test_the_three_allocated_figures_are_named_for_what_they_count(hand: Any) -> None:
    """Productive counts each allocation's own GPUs on any node: a1 4 x 6, a2 2 x 4, a3 8 x
    24, a4 8 x 24 (on the down n3), a5 0.5 x 12, a6 0.25 x 12, a8 1 x 2, a11 1 x 1 = 428.
    Physical counts occupied GPUs on healthy nodes, exactly: 245 (by hand above); the
    schedulable ledger the same at the sampled instants."""
    from fleetaudit.api.report_api import allocated_kinds

    assert hand.fleet["productive"]["allocated_gpu_hours"] == pytest.approx(428.0)
    sampled = hand.fleet["schedulable"]["allocated_gpu_hours"]
    assert allocated_kinds(hand) == (
        "allocated GPU-hours, three ways: 428 productive, each allocation's own GPUs (a "
        "share as its fraction) on any node; 245 physical, the GPUs occupied on healthy "
        f"nodes (a share fills its GPU), exact; {sampled:,.0f} schedulable, the same "
        "occupied GPUs at the sampled instants"
    )
    page = render_html(hand)
    assert allocated_kinds(hand) in page.replace("&#39;", "'")



# -- a GPU time-sliced between two pods (share allocations, 0 < gpus < 1) ----------------
# n1 has one H20. p1 (vision, training) holds half of it 00:00-04:00 on 2026-01-01, p2
# (search, offline_inference) the other half 00:00-02:00. The GPU is sampled hourly:
# sm_active 0.6 at 00:00 and 01:00 (both pods on it), 0.2 at 02:00 and 03:00 (p1 alone).
SHARE_T0 = datetime(2026, 1, 1)
SHARE_NODES = pl.DataFrame(
    {"node_id": ["n1"], "gpu_model": ["H20"], "gpus": [1], "cpus": [16.0],
     "memory_gib": [128.0], "switch_id": ["sw-a"], "health": ["healthy"]},
    schema=NODE_SCHEMA,
)  # fmt: skip
SHARE_ALLOCATIONS = pl.DataFrame(
    {
        "alloc_id": ["p1", "p2"],
        "node_id": ["n1", "n1"],
        "gpus": [0.5, 0.5],
        "workload": ["training", "offline_inference"],
        "tenant": ["vision", "search"],
        "priority": ["high", "low"],
        "start_time": [SHARE_T0, SHARE_T0],
        "end_time": [SHARE_T0 + timedelta(hours=4), SHARE_T0 + timedelta(hours=2)],
    },
    schema_overrides={"start_time": pl.Datetime("us"), "end_time": pl.Datetime("us")},
)
NO_SAMPLES = pl.DataFrame(
    schema={"node_id": pl.String, "ts": pl.Datetime("us"), "samples": pl.Int64,
            "sm_active_sum": pl.Float64},
)  # fmt: skip


def test_a_shared_gpus_samples_go_whole_to_the_holder_they_name_by_hand() -> None:
    """One sample per GPU and instant: the shared GPU's samples name p2 at 00 and 01
    (sm_active 0.2, 0.2; p1 holds the other half then) and p1 at 02 and 03 (0.6, 0.6;
    p2 ended at 02). Each named sample goes whole to the allocation it names:
    p1: telemetry 2 x 1 h = 2.0 GPU-h, SM-active 1.2, allocated 0.5 x 4 h = 2.0;
    p2: telemetry 2.0, SM-active 0.4, allocated 0.5 x 2 h = 1.0 (coverage 2: its samples
    carry the whole GPU). The fleet's 4 samples are 4.0 telemetry GPU-h, 1.6 SM-active."""
    by_alloc = pl.DataFrame(
        {"alloc_id": ["p1", "p2"], "samples": [2, 2], "sm_active_sum": [1.2, 0.4]}
    )
    prod = den.productive(
        SHARE_NODES, SHARE_ALLOCATIONS, SHARE_T0, SHARE_T0 + timedelta(hours=4),
        by_alloc, NO_SAMPLES, 3600.0,
    )  # fmt: skip
    rows = {r["alloc_id"]: r for r in prod.allocations.iter_rows(named=True)}
    hours = {
        a: tuple(rows[a][c] / 3600 for c in ("alloc_gpu_s", "telemetry_gpu_s", "sm_active_gpu_s"))
        for a in rows
    }
    assert hours["p1"] == pytest.approx((2.0, 2.0, 1.2))
    assert hours["p2"] == pytest.approx((1.0, 2.0, 0.4))
    assert prod.samples == 4
    assert prod.unattributed_gpu_s == 0.0
    fleet = den.productive_figures(prod.allocations)
    assert fleet["telemetry_gpu_hours"] == pytest.approx(4.0)
    assert fleet["sm_active_gpu_hours"] == pytest.approx(1.6)
    assert fleet["productive_rate"] == pytest.approx(0.4)
    assert fleet["coverage"] == pytest.approx(4.0 / 3.0)
    tenants = den.productive_by(prod.allocations, "tenant")
    assert tenants["vision"]["coverage"] == pytest.approx(1.0)
    assert tenants["vision"]["productive_rate"] == pytest.approx(0.6)
    assert tenants["search"]["coverage"] == pytest.approx(2.0)
    assert tenants["search"]["productive_rate"] == pytest.approx(0.2)


def test_unnamed_samples_of_a_shared_gpu_are_split_by_hand(tmp_path: Path) -> None:
    """Through ingest and the report: the GPU sampled at 00:00 and 01:00 (sm_active 0.6)
    with no alloc_id, when both halves are held: each sample is split 0.5/0.5 by the
    allocations' gpus, so p1 and p2 each take 2 x 0.5 = 1.0 telemetry GPU-h and
    2 x 0.5 x 0.6 = 0.6 SM-active, as two samples naming them would give."""
    write(tmp_path / "in" / "nodes.csv", """
node_id,gpu_model,gpus,cpus,memory_gib,switch_id,health
n1,H20,1,16,128,sw-a,healthy
""")
    write(tmp_path / "in" / "allocations.csv", """
alloc_id,job_id,node_id,gpus,cpus,memory_gib,priority,workload,tenant,start_time,end_time
p1,j1,n1,0.5,4,32,high,training,vision,2026-01-01T00:00:00Z,2026-01-01T04:00:00Z
p2,j2,n1,0.5,4,32,low,offline_inference,search,2026-01-01T00:00:00Z,2026-01-01T02:00:00Z
""")
    write(tmp_path / "in" / "telemetry.csv", """
ts,node_id,gpu_index,sm_active,mem_used,alloc_id
2026-01-01T00:00:00Z,n1,0,0.6,0.5,
2026-01-01T01:00:00Z,n1,0,0.6,0.5,
""")
    db = tmp_path / "share.duckdb"
    api.ingest_paths(api.StoreOptions(db), [tmp_path / "in"])
    report = build_report(
        api.StoreOptions(db),
        ReportOptions(
            at=SHARE_T0 + timedelta(hours=4),
            since=timedelta(hours=4),
            step=timedelta(hours=1),
            generated_at=SHARE_T0 + timedelta(hours=5),
        ),
    )
    assert report.telemetry["interval_s"] == 3600.0
    assert report.telemetry["samples"] == 2
    for tenant in ("vision", "search"):
        figures = report.tenants[tenant]["productive"]
        assert (figures["telemetry_gpu_hours"], figures["sm_active_gpu_hours"]) == pytest.approx(
            (1.0, 0.6)
        )
    fleet = report.fleet["productive"]
    assert (fleet["telemetry_gpu_hours"], fleet["allocated_gpu_hours"]) == pytest.approx((2.0, 3.0))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["vision", "search", None]),
            st.sampled_from(["training", "online_inference", None]),
            *[st.floats(0, 1e6, allow_nan=False) for _ in range(4)],
        ),
        min_size=1,
        max_size=40,
    ),
    st.randoms(use_true_random=False),
)
def test_productive_figures_do_not_depend_on_the_rows_order(rows: list, rng: Any) -> None:
    """productive_by sums whole micro-GPU-seconds: the same rows in another order give the
    same figures to the last bit (float sums in a group-by's order could flip a digit)."""
    columns = ["tenant", "workload", "alloc_gpu_s", "telemetry_gpu_s", "sm_active_gpu_s",
               "upper_gpu_s"]  # fmt: skip
    frame = pl.DataFrame(rows, schema=columns, orient="row")
    shuffled = rows[:]
    rng.shuffle(shuffled)
    other = pl.DataFrame(shuffled, schema=columns, orient="row")
    assert den.productive_by(other, "tenant") == den.productive_by(frame, "tenant")
    assert den.productive_figures(other) == den.productive_figures(frame)
