"""fleetaudit.outputs.charts and the report's charts: SVG points worked by hand.

The chart box is 600 x 160 (report.CHART_W, CHART_H); y grows downwards, so a value
v on an axis topped at T sits at y = 160 - 160 * v / T.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from types import SimpleNamespace

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetaudit.api.report_api import queued_gpus, recoverable_view
from fleetaudit.model.denominators import SPLIT
from fleetaudit.outputs import charts
from fleetaudit.outputs.report import _over_time

T0 = datetime(2026, 3, 1)
STEP = timedelta(hours=1)


def test_stacked_bands_by_hand() -> None:
    # three instants over a 600-wide box: x = 0, 300, 600; axis topped at 8 GPUs (y = 160 - 20 v)
    bands = charts.stacked_bands(
        [("usable", "usable", "#0f0", [2, 4, 0]), ("fragment", "frag", "#f00", [2, 0, 8])],
        600,
        160,
        8,
    )
    assert [b.key for b in bands] == ["usable", "fragment"]
    # usable: its top edge at 2, 4, 0 GPUs, then back along the axis
    assert bands[0].points == "0.0,120.0 300.0,80.0 600.0,160.0 600.0,160.0 300.0,160.0 0.0,160.0"
    # fragment on top of usable: 4, 4, 8 GPUs, back along usable's edge
    assert bands[1].points == "0.0,80.0 300.0,80.0 600.0,0.0 600.0,160.0 300.0,80.0 0.0,120.0"


def test_polyline_leaves_out_unknown_values_and_scales_to_the_axis() -> None:
    assert charts.polyline([0.25, None, 1.0], 600, 160, 1.0) == "0.0,120.0 600.0,0.0"
    assert charts.polyline([3.0], 600, 160, 4.0) == "0.0,40.0"  # one point sits at x = 0
    assert charts.polyline([], 600, 160, 1.0) == ""


@pytest.mark.parametrize(
    ("value", "top"),
    [(0, 1.0), (1, 1.0), (1.2, 2.0), (2.1, 2.5), (3, 5.0), (9.5, 10.0), (1172, 2000.0)],
)
def test_nice_top(value: float, top: float) -> None:
    assert charts.nice_top(value) == top


def test_sparkline() -> None:
    assert charts.sparkline([0.0, 0.4, 0.7]) == "▁▅█"  # 0.4 of 0.7 is the 4th of 7 steps up
    assert charts.sparkline([None, 0.3]) == " ▄"
    assert charts.sparkline([]) == ""


@given(
    st.lists(
        st.lists(st.floats(0, 1e6, allow_nan=False), min_size=3, max_size=3),
        min_size=1,
        max_size=6,
    )
)
def test_the_top_band_ends_at_the_stacked_total(layers: list[list[float]]) -> None:
    totals = [sum(col) for col in zip(*layers, strict=True)]
    top = charts.nice_top(max(totals))
    bands = charts.stacked_bands(
        [(str(i), "", "#000", v) for i, v in enumerate(layers)], 600, 160, top
    )
    upper = bands[-1].points.split()[:3]
    for point, total in zip(upper, totals, strict=True):
        y = float(point.split(",")[1])
        expected = 160 - 160 * total / top if total > 1e-9 else 160
        assert y == pytest.approx(expected, abs=0.051)
        assert 0 <= y <= 160


def _steps(model: str, rows: list[dict[str, float]]) -> list[dict[str, object]]:
    base = dict.fromkeys(("usable", *SPLIT), 0.0)
    return [
        {"instant": T0 + i * STEP, "gpu_model": model, **base, **row} for i, row in enumerate(rows)
    ]


def test_over_time_charts_of_a_small_fleet_by_hand() -> None:
    """Two models, three instants.

    A: usable 4, 0, 2 and fragment 0, 4, 2 (idle 4, 4, 4); B: unqueued 2, 2, 6.
    Queued: 3 GPUs for A from the start, 8 more (any model) from the last instant.
    Fleet idle 6, 6, 10 and queued 3, 3, 11: the axis tops at 20 (y = 160 - 8 v).
    A alone: idle 4 and queued 3 (A's own): top 5 (y = 160 - 32 v).
    """
    steps = pl.DataFrame(
        _steps("A", [{"usable": 4, "fragment": 0}, {"usable": 0, "fragment": 4},
                     {"usable": 2, "fragment": 2}])
        + _steps("B", [{"unqueued": 2}, {"unqueued": 2}, {"unqueued": 6}])
    )  # fmt: skip
    requests = pl.DataFrame(
        {
            "gpu_model": ["A", None, "B"],
            "gpus": [3.0, 8.0, 0.0],  # a request for no GPU is not queued GPU demand
            "submit_time": [T0 - STEP, T0 + 2 * STEP, T0],
            "start_time": [None, None, None],
        },
        schema={"gpu_model": pl.String, "gpus": pl.Float64, "submit_time": pl.Datetime("us"),
                "start_time": pl.Datetime("us")},
    )  # fmt: skip
    queued = queued_gpus(requests, [T0, T0 + STEP, T0 + 2 * STEP])
    assert queued.sort("gpu_model", "instant", nulls_last=True)["queued_gpus"].to_list() == [
        3.0, 3.0, 3.0, 0.0, 0.0, 8.0,
    ]  # fmt: skip
    result = SimpleNamespace(steps=steps, queued=queued)
    fleet, a, b = _over_time(result)[0]  # type: ignore[arg-type]
    assert (fleet.name, fleet.top, a.name, a.top, b.name, b.top) == ("fleet", 20, "A", 5, "B", 10)
    bands = {band.key: band.points for band in fleet.bands}
    assert bands["usable"] == "0.0,128.0 300.0,160.0 600.0,144.0 600.0,160.0 300.0,160.0 0.0,160.0"
    # fragment on usable: 4, 4, 4
    assert bands["fragment"].startswith("0.0,128.0 300.0,128.0 600.0,128.0 ")
    # unqueued tops the stack at the fleet's idle GPUs: 6, 6, 10
    assert bands["unqueued"].startswith("0.0,112.0 300.0,112.0 600.0,80.0 ")
    assert fleet.queued == "0.0,136.0 300.0,136.0 600.0,72.0"
    assert a.queued == "0.0,64.0 300.0,64.0 600.0,64.0"  # the any-model request is the fleet's
    assert b.queued == "0.0,160.0 300.0,160.0 600.0,160.0"
    assert [label for _, label in fleet.y_ticks] == ["0", "5", "10", "15", "20"]
    labels = _over_time(result)[1]  # type: ignore[arg-type]
    assert labels == (
        (0.0, "2026-03-01 00:00", "start"),
        (300.0, "2026-03-01 01:00", "middle"),
        (600.0, "2026-03-01 02:00", "end"),
    )


def test_a_request_started_between_instants_waits_until_then() -> None:
    requests = pl.DataFrame(
        {
            "gpu_model": ["A"],
            "gpus": [2.0],
            "submit_time": [T0 + timedelta(minutes=30)],
            "start_time": [T0 + timedelta(minutes=150)],
        }
    )
    instants = [T0 + i * STEP for i in range(4)]
    # waiting at 01:00 and 02:00, started by 03:00
    assert queued_gpus(requests, instants)["queued_gpus"].to_list() == [0.0, 2.0, 2.0, 0.0]


def test_recoverable_view_in_a_planners_terms() -> None:
    shape = {"gpu_model": "H100", "gpus": 16, "gpus_per_pod": 8, "locality": "switch"}
    view = recoverable_view(
        {
            "before": {"free_nodes": 40, "instances": [{"shape": shape, "instances": 3}]},
            "after": {"free_nodes": 52, "instances": [{"shape": shape, "instances": 9}]},
            "bound_free_nodes": 60,
            "moves": 1500,
            "migration": {"freed_gpus": 96, "pause_gpu_hours": 1172.4, "payback_s": 43200},
        }
    )
    assert view["freed_gpus"] == 96 and view["freed_nodes"] == 12
    assert view["pause_gpu_hours"] == 1172.4 and view["payback_s"] == 43200
    assert view["instances"] == (
        {"shape": "H100 16 GPU (2x8) switch", "before": 3, "after": 9, "gained": 6},
    )
    # an odd document: what is there is shown as it is, nothing is made up
    odd = recoverable_view({"before": {"free_nodes": "<b>"}, "migration": {}})
    assert odd["free_before"] == "<b>" and odd["freed_nodes"] is None
    assert odd["freed_gpus"] is None and odd["instances"] == ()


def test_a_long_window_is_drawn_with_at_most_200_points_of_run_means() -> None:
    """401 instants of one model: runs of 3 (the last a run of 2), 134 points; usable is
    1 at even instants and 0 at odd ones, so runs average 2/3 and 1/3 alternately."""
    n = 401
    steps = pl.DataFrame(_steps("A", [{"usable": float(i % 2 == 0)} for i in range(n)]))
    result = SimpleNamespace(steps=steps, queued=queued_gpus(pl.DataFrame(), []))
    (fleet, _a), labels = _over_time(result)  # type: ignore[arg-type]
    usable = fleet.bands[0].points.split()
    assert len(usable) == 2 * 134
    top = charts.nice_top(2 / 3)  # 1.0
    ys = [float(p.split(",")[1]) for p in usable[:3]]
    assert ys == [round(160 - 160 * v / top, 1) for v in (2 / 3, 1 / 3, 2 / 3)]
    assert labels[-1] == (600.0, "2026-03-17 15:00", "end")  # the last run starts at 399 h


def test_never_startable_demand_is_drawn_apart() -> None:
    """Model A: one 8-GPU node per switch. A 16-GPU switch gang can never start (no domain
    holds 2 pods of 8); an 8-GPU request can. The gang's 16 GPUs go to the dashed line,
    cut off at the top that A's 8 idle GPUs and the 8 startable queued GPUs set (10)."""
    from fleetaudit.api.report_api import never_startable

    nodes = pl.DataFrame({"node_id": ["n1", "n2"], "gpu_model": ["A", "A"], "gpus": [8, 8],
                          "switch_id": ["s1", "s2"]})  # fmt: skip
    requests = pl.DataFrame(
        {"gpu_model": ["A", "A"], "gpus": [16.0, 8.0], "gpus_per_pod": [8.0, 8.0],
         "cpus_per_gpu": [0.0, 0.0], "memory_gib_per_gpu": [0.0, 0.0],
         "locality": ["switch", "node"], "duration_s": [None, None],
         "submit_time": [T0, T0], "start_time": [None, None]},
        schema_overrides={"duration_s": pl.Float64, "start_time": pl.Datetime("us"),
                          "submit_time": pl.Datetime("us")},
    )  # fmt: skip
    flagged = never_startable(requests, nodes)
    assert flagged["never"].to_list() == [True, False]
    queued = queued_gpus(flagged, [T0, T0 + STEP])
    assert queued.filter(pl.col("never"))["queued_gpus"].to_list() == [16.0, 16.0]
    steps = pl.DataFrame(_steps("A", [{"usable": 8}, {"usable": 8}]))
    fleet, _a = _over_time(SimpleNamespace(steps=steps, queued=queued))[0]  # type: ignore[arg-type]
    assert fleet.top == 10 and fleet.never_most == 16.0
    assert fleet.queued == "0.0,32.0 600.0,32.0"  # 8 of 10
    assert fleet.never == "0.0,0.0 600.0,0.0"  # 16, cut off at the top
    assert [label for _, label in fleet.y_ticks] == ["0", "2", "4", "6", "8", "10"]


def test_usable_and_sm_active_do_not_share_a_colour() -> None:
    from fleetaudit.outputs.report import COLOURS

    assert COLOURS["usable"] != COLOURS["sm_active"]
