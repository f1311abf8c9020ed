"""whatif remedies: hand-worked fleets where each remedy's effect is computed by hand, the
empty edit reproducing the baseline exactly, sizing, prices and saved edited fleets.

The fleets (tests/data/remedies_*) are replayed over [00:00, 04:00) of 2026-01-01 with
the snapshot sampled every hour (5 instants; each stands for 4/5 of an hour), under the
``kubernetes`` discipline. Every figure below is worked by hand from the CSV files.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fleetaudit import api
from fleetaudit.api.remedies_api import remedies_document, whatif_remedies
from fleetaudit.cli import app
from fleetaudit.core.errors import UsageError
from fleetaudit.core.options import RemediesRun
from fleetaudit.whatif import remedies as rm

DATA = Path(__file__).parent / "data"
T0 = datetime(2026, 1, 1)
RUN = RemediesRun(at=T0 + timedelta(hours=4), since=timedelta(hours=4), step=timedelta(hours=1),
                  queue="kubernetes", workers=1)  # fmt: skip


def _store(tmp_path: Path, name: str) -> api.StoreOptions:
    options = api.StoreOptions(db=tmp_path / f"{name}.duckdb")
    api.ingest_paths(options, [DATA / f"remedies_{name}"])
    return options


def _rows(result: object) -> dict[str, dict]:
    doc = remedies_document(result)  # type: ignore[arg-type]
    return {r["name"]: r for r in [doc["baseline"], *doc["remedies"]]}


def test_cpu_bound_model_more_gpus_gain_nothing_more_cpus_start_the_queue(tmp_path: Path) -> None:
    """Model C: 2 nodes of 8 GPUs and 32 CPUs; three requests of 8 GPUs x 8 CPUs (64
    CPUs, more than a node has), 1 h each, at 00:00, 00:10 and 00:20.

    - baseline: no node fits a request even empty: 3 never, 0 started; every idle GPU
      (16 at each instant, 64 GPU-hours) is stranded by cpu_memory;
    - --add C:2 (two more such nodes): still never; 128 GPU-hours idle, all cpu_memory;
    - --cpus C:+32 (64 CPUs a node): r1 and r2 start at once on the two nodes, r3 waits
      for r1's end at 01:00 (40 min): waits 0, 0, 2400 s (p50 0, p90 2400 s), 3 x 8 GPUs
      x 1 h = 24 GPU-hours served; the snapshot's 64 idle GPU-hours are all usable.
    """
    store = _store(tmp_path, "cpu")
    run = RemediesRun(**{**RUN.__dict__, "edits": (rm.parse_add("C:2"), rm.parse_delta("cpus", "C:+32"))})
    rows = _rows(whatif_remedies(store, run))
    base, add, cpus = rows["recorded fleet (baseline)"], rows["--add C:2"], rows["--cpus C:+32"]
    assert base["snapshot"]["gpu_hours"] | {} == {
        "installed": 64.0, "idle": 64.0, "usable": 0.0, "interval": 0.0, "fragment": 0.0,
        "cpu_memory": 64.0, "topology": 0.0, "unqueued": 0.0,
    }  # fmt: skip
    assert (base["replay"]["started"], base["replay"]["never"]) == (0, 3)
    assert add["snapshot"]["gpu_hours"]["cpu_memory"] == 128.0
    assert add["snapshot"]["gpu_hours"]["usable"] == 0.0
    assert (add["replay"]["started"], add["replay"]["never"]) == (0, 3)
    assert add["change"]["started"] == 0 and add["change"]["served_gpu_hours"] == 0.0
    assert add["fleet"]["nodes_added"] == 2 and add["fleet"]["gpus"] == 16
    assert cpus["snapshot"]["gpu_hours"]["usable"] == 64.0
    assert cpus["snapshot"]["gpu_hours"]["cpu_memory"] == 0.0
    replay = cpus["replay"]
    assert (replay["started"], replay["never"], replay["waiting_at_end"]) == (3, 0, 0)
    assert (replay["wait_p50_s"], replay["wait_p90_s"]) == (0.0, 2400.0)
    assert replay["served_gpu_hours"] == 24.0
    assert cpus["change"]["started"] == 3 and cpus["change"]["usable_gpu_hours"] == 64.0
    assert cpus["fleet"]["cpus_added"] == 64.0
    assert replay["shapes"][0] == {"arrived": 3, "p_start": 1.0}


def test_topology_stranded_gang_only_merge_level_block_starts_it(tmp_path: Path) -> None:
    """Model G: switches s1 and s2 of two 8-GPU nodes each, both in block b1; a 24-GPU
    switch gang (3 pods of 8) arrives at 00:00 for 1 h.

    - baseline: no switch holds 3 pods: never; each domain's 2 slots are stranded by
      topology: 32 GPUs a instant, 128 GPU-hours;
    - --add G:2: a new switch of the typical 2 nodes: still never, 192 GPU-hours topology;
    - --merge-level block: one domain of 4 nodes: the gang starts at once (wait 0),
      24 GPU-hours served; the snapshot's instance takes 24 of the 32 idle GPUs (96
      GPU-hours usable), the fourth node's 8 stay stranded by topology (32 GPU-hours).
    """
    store = _store(tmp_path, "topology")
    run = RemediesRun(**{**RUN.__dict__, "edits": (rm.parse_add("G:2"), rm.parse_merge("block"))})
    result = whatif_remedies(store, run)
    rows = _rows(result)
    base, add, merge = (rows[k] for k in ("recorded fleet (baseline)", "--add G:2", "--merge-level block"))
    assert base["snapshot"]["gpu_hours"]["topology"] == 128.0
    assert base["replay"]["never"] == 1 and base["replay"]["started"] == 0
    assert add["snapshot"]["gpu_hours"]["topology"] == 192.0 and add["replay"]["started"] == 0
    assert merge["snapshot"]["gpu_hours"]["usable"] == 96.0
    assert merge["snapshot"]["gpu_hours"]["topology"] == 32.0
    assert (merge["replay"]["started"], merge["replay"]["wait_p50_s"]) == (1, 0.0)
    assert merge["replay"]["served_gpu_hours"] == 24.0
    assert merge["fleet"]["switch_domains"] == {"before": 2, "after": 1}
    assert any("27%" in n for n in merge["notes"])  # the all-reduce cost, as a note


def test_port_moves_waiting_work_to_an_idle_model_and_lengthens_it(tmp_path: Path) -> None:
    """P's one node is held by recorded work to 10:00; Q's one node is idle. A request for
    8 GPUs of P, 1 h, arrives at 01:00 and waits to the end. --port P=Q:0.5: it starts
    on Q at once and runs 2 h (1 h / 0.5): 16 GPU-hours served; Q's idle GPUs, which no
    queued shape could use (32 GPU-hours unqueued), become usable for the ported shape."""
    store = _store(tmp_path, "port")
    run = RemediesRun(**{**RUN.__dict__, "edits": (rm.parse_port("P=Q:0.5"),)})
    rows = _rows(whatif_remedies(store, run))
    base, port = rows["recorded fleet (baseline)"], rows["--port P=Q:0.5"]
    assert (base["replay"]["started"], base["replay"]["waiting_at_end"]) == (0, 1)
    assert base["replay"]["waiting_gpus"] == 8.0
    assert base["snapshot"]["gpu_hours"]["unqueued"] == 32.0
    assert (port["replay"]["started"], port["replay"]["wait_p50_s"]) == (1, 0.0)
    assert port["replay"]["served_gpu_hours"] == 16.0
    assert port["snapshot"]["gpu_hours"]["usable"] == 32.0
    assert port["snapshot"]["gpu_hours"]["unqueued"] == 0.0
    assert port["fleet"]["requests_ported"] == 1


def test_sizing_finds_the_cpu_increment_and_says_no_purchase_reaches_the_target(
    tmp_path: Path,
) -> None:
    """On the CPU-bound fleet, p_start 1 for C 8 GPU x 8 CPU: adding up to 2 nodes never
    reaches it (cpu_memory strands the shape); CPUs in steps of 8 up to 32: 0 fails, 32
    reaches, 16 and 24 fail, so 32."""
    from fleetaudit.model.shapes import make_shape

    store = _store(tmp_path, "cpu")
    run = RemediesRun(**{**RUN.__dict__, "target": 1.0,
                         "target_shape": make_shape("C", 8, None, 8)})  # fmt: skip
    result = whatif_remedies(store, run)
    add, cpus = result.sizing
    assert (add.kind, add.found, add.bound, add.cause) == ("add", None, 2.0, "cpu_memory")
    assert add.criterion == "replay"
    assert (cpus.kind, cpus.found) == ("cpus", 32.0)
    assert [s.value for s in cpus.steps] == [0.0, 32.0, 16.0, 24.0]
    assert [s.reached for s in cpus.steps] == [False, True, False, False]


def test_prices_rank_the_remedies(tmp_path: Path) -> None:
    """C at 2 a GPU-hour, 0.01 a core-hour. --cpus C:+32: 2 nodes x 32 cores x 0.01 x 730 h
    = 467.2 a month for 24 GPU-hours more in 4 h (4,380 a month): 0.1067 each, rank 1.
    --add C:2: 2 x (8 x 2 + 32 x 0.01) x 730 = 23,827.2 a month for nothing: unranked."""
    store = _store(tmp_path, "cpu")
    prices = tmp_path / "prices.csv"
    prices.write_text("resource,name,unit,price\ngpu,C,gpu_hour,2\ncpu,,core_hour,0.01\n")
    run = RemediesRun(**{**RUN.__dict__, "prices": prices,
                         "edits": (rm.parse_add("C:2"), rm.parse_delta("cpus", "C:+32"))})  # fmt: skip
    result = whatif_remedies(store, run)
    doc = remedies_document(result)
    add, cpus = doc["remedies"]
    assert add["cost"]["per_month"] == 23827.2 and add["cost"]["per_extra_gpu_hour"] is None
    assert cpus["cost"]["per_month"] == 467.2
    assert cpus["cost"]["extra_gpu_hours_per_month"] == 4380.0
    assert cpus["cost"]["per_extra_gpu_hour"] == round(467.2 / 4380, 4)
    assert (cpus["cost"]["rank"], doc["ranking"]) == (1, ["--cpus C:+32"])


def test_prices_of_remedies_that_buy_no_hardware(tmp_path: Path) -> None:
    """--merge-level block buys nothing and the prices (which name a GPU, as they must) give
    'remedy,merge-level' at 1,200 a month: 1,200 for its 24 GPU-hours more in 4 h
    (24 x 730 / 4 = 4,380 a month), 0.274 each. --port P=Q:0.5 with no 'remedy,port' row:
    counted at 0, with a note, for its 16 GPU-hours more (2,920 a month): 0 each, ranked."""
    prices = tmp_path / "prices.csv"
    prices.write_text("resource,name,unit,price\ngpu,G,gpu_hour,2\nremedy,merge-level,month,1200\n")
    run = RemediesRun(**{**RUN.__dict__, "prices": prices, "edits": (rm.parse_merge("block"),)})
    (merge,) = remedies_document(whatif_remedies(_store(tmp_path, "topology"), run))["remedies"]
    assert merge["cost"] == {
        "per_month": 1200.0, "extra_gpu_hours_per_month": 4380.0, "per_extra_gpu_hour": 0.274,
        "rank": 1, "notes": [],
    }  # fmt: skip
    run = RemediesRun(**{**RUN.__dict__, "prices": prices, "edits": (rm.parse_port("P=Q:0.5"),)})
    doc = remedies_document(whatif_remedies(_store(tmp_path, "port"), run))
    (port,) = doc["remedies"]
    assert (port["cost"]["per_month"], port["cost"]["extra_gpu_hours_per_month"]) == (0.0, 2920.0)
    assert (port["cost"]["per_extra_gpu_hour"], port["cost"]["rank"]) == (0.0, 1)
    assert doc["ranking"] == ["--port P=Q:0.5"]
    assert any("'remedy,port' row: counted at 0" in n for n in port["cost"]["notes"])


def test_yaml_prices_read_as_csv_rows(tmp_path: Path) -> None:
    from fleetaudit.api.prices_api import read_prices

    path = tmp_path / "p.yaml"
    path.write_text("currency: EUR\ngpu:\n  H20: {node_month: 7300}\ncpu: {core_hour: 0.1}\n"
                    "tenants: {team-a: 0.8}\nremedies: {port: 100}\n")  # fmt: skip
    prices = read_prices(path)
    assert prices.gpu_hour_of("H20", 8) == pytest.approx(1.25)
    assert (prices.currency, prices.rate("team-a"), prices.remedies) == ("EUR", 0.8, {"port": 100.0})
    bad = tmp_path / "bad.csv"
    bad.write_text("resource,name,unit,price\ngpu,H20,per_day,3\n")
    with pytest.raises(UsageError, match=r"bad.csv row 2, column unit"):
        read_prices(bad)


def test_save_as_keeps_the_edited_fleet_for_every_command(tmp_path: Path) -> None:
    store = _store(tmp_path, "cpu")
    run = RemediesRun(**{**RUN.__dict__, "edits": (rm.parse_add("C:2"),), "save_as": "bigger"})
    whatif_remedies(store, run)
    with api.reading(store) as s:
        assert api.fleet_nodes(s, "bigger").height == 4
        assert api.fleet_nodes(s, None).height == 2
    runner = CliRunner()
    out = runner.invoke(app, ["shapes", "--db", str(store.db), "--scenario", "bigger",
                              "--model", "C", "--gpus", "8", "--json"])  # fmt: skip
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["shapes"][0]["gpus"]["installed"] == 32


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--add", "C"], "--add: give MODEL:N"),
        (["--add", "Z:2"], "--add: the fleet has no GPU model 'Z'"),
        (["--port", "C=C:0.5"], "FROM and TO are the same model"),
        (["--port", "C=D:0"], "SPEED above 0"),
        (["--merge-level", "block"], "no block domains"),
        (["--merge-level", "spine"], "--merge-level: use block"),
        (["--target", "p_start=2", "--model", "C", "--gpus", "8"], "--target: p_start is a probability"),
        (["--cpus", "C:+x"], "--cpus: give MODEL:+N"),
    ],
)
def test_bad_edits_are_one_line_errors(tmp_path: Path, args: list[str], message: str) -> None:
    store = _store(tmp_path, "cpu")
    result = CliRunner().invoke(app, ["whatif", "remedies", "--db", str(store.db), "--since", "4h",
                                      "--at", "2026-01-01T04:00:00Z", "--queue", "kubernetes", *args])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert message in result.stderr and result.stderr.count("\n") == 1


def test_remove_a_node_list_file_names_the_row_of_an_unknown_node(tmp_path: Path) -> None:
    store = _store(tmp_path, "cpu")
    listed = tmp_path / "gone.txt"
    listed.write_text("c1\nnope\n")
    result = CliRunner().invoke(app, ["whatif", "remedies", "--db", str(store.db), "--since", "4h",
                                      "--at", "2026-01-01T04:00:00Z", "--queue", "kubernetes",
                                      "--remove", str(listed)])  # fmt: skip
    assert result.exit_code == 2
    assert f"{listed} row 2, column node_id: no node 'nope'" in result.stderr


# ------------------------------------------------------------ the empty edit


@st.composite
def _fleets(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    n = draw(st.integers(2, 6))
    nodes = pl.DataFrame({
        "node_id": [f"n{i}" for i in range(n)],
        "gpu_model": [draw(st.sampled_from(["A", "B"])) for _ in range(n)],
        "gpus": [draw(st.sampled_from([2, 4, 8])) for _ in range(n)],
        "cpus": [float(draw(st.sampled_from([16, 32, 64]))) for _ in range(n)],
        "memory_gib": [None] * n,
        "switch_id": [f"s{i % 2}" for i in range(n)],
        "health": ["healthy"] * n,
    }, schema_overrides={"memory_gib": pl.Float64})  # fmt: skip
    k = draw(st.integers(1, 14))
    submit = [T0 + timedelta(minutes=draw(st.integers(-60, 230))) for _ in range(k)]
    gpus = [float(draw(st.sampled_from([0.5, 1, 2, 4, 8, 16]))) for _ in range(k)]
    requests = pl.DataFrame({
        "request_id": [f"r{i}" for i in range(k)],
        "submit_time": submit,
        "start_time": [None] * k,
        "gpu_model": [draw(st.sampled_from(["A", "B", "A|B"])) for _ in range(k)],
        "gpus": gpus,
        "cpus_per_gpu": [float(draw(st.sampled_from([0, 4, 8]))) for _ in range(k)],
        "duration_s": [float(draw(st.sampled_from([600, 3600, 7200]))) for _ in range(k)],
        "priority": [draw(st.sampled_from(["high", "low"])) for _ in range(k)],
    }, schema_overrides={"start_time": pl.Datetime("us")})  # fmt: skip
    a = draw(st.integers(0, 4))
    allocations = pl.DataFrame({
        "alloc_id": [f"a{i}" for i in range(a)],
        "node_id": [f"n{draw(st.integers(0, n - 1))}" for _ in range(a)],
        "gpus": [1.0] * a,
        "cpus": [1.0] * a,
        "priority": ["high"] * a,
        "start_time": [T0 - timedelta(hours=1)] * a,
        "end_time": [T0 + timedelta(minutes=draw(st.integers(10, 300))) for _ in range(a)],
    })  # fmt: skip
    return nodes, allocations, requests


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fleet=_fleets())
def test_the_empty_edit_reproduces_the_baseline_exactly(
    tmp_path_factory: pytest.TempPathFactory, fleet: tuple[pl.DataFrame, ...]
) -> None:
    """On random small fleets, edits that change nothing (0 nodes added or removed, +0
    CPUs and memory) give the baseline row back figure for figure,
    and the library's replay of the unedited fleet with the baseline's holds gives the
    baseline's own replay frame for frame."""
    nodes, allocations, requests = fleet
    folder = tmp_path_factory.mktemp("fleet")
    for name, frame in (("nodes", nodes), ("allocations", allocations), ("requests", requests)):
        if frame.height:
            frame.write_parquet(folder / f"{name}.parquet")
    store = api.StoreOptions(db=folder / "store.duckdb")
    api.ingest_paths(store, [folder])
    model = nodes["gpu_model"][0]
    edits = (rm.parse_add(f"{model}:0"), rm.parse_remove(f"{model}:0"),
             rm.parse_delta("cpus", f"{model}:+0"), rm.parse_delta("memory", f"{model}:+0"))  # fmt: skip
    run = RemediesRun(**{**RUN.__dict__, "edits": edits})
    result = whatif_remedies(store, run)
    doc = remedies_document(result)
    base = doc["baseline"]
    for row in doc["remedies"]:
        assert row["snapshot"] == base["snapshot"], row["name"]
        assert row["replay"] == base["replay"], row["name"]
    from fleetaudit.whatif import placement

    with api.reading(store) as s:
        stored_nodes, window = api.load_frames(s, T0, T0 + timedelta(hours=4))
        stored_requests = s.query("requests_all")
    demand = placement.window_demand(stored_nodes, window, stored_requests, T0, T0 + timedelta(hours=4))
    again = placement.replay_demand(stored_nodes, demand, "kubernetes",
                                    hold=result.baseline.result.holds,
                                    preempt=result.baseline.result.preempt)  # fmt: skip
    assert again.waits.equals(result.baseline.result.waits)
    assert again.allocations.equals(result.baseline.result.allocations)


def test_the_tables_keep_every_figure_at_80_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On the sample fleet, at 80 columns, no table leaves a column out and no line is
    wider: the remedy's name folds, each table holds four or five figures."""
    monkeypatch.setenv("COLUMNS", "80")
    db = tmp_path / "sample.duckdb"
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", str(api.sample_data_dir()), "--db", str(db)]).exit_code == 0
    prices = tmp_path / "prices.csv"
    prices.write_text("resource,name,unit,price\n" + "".join(
        f"gpu,{m},gpu_hour,1.5\n" for m in ("H20", "H800", "L20", "A10", "A100")
    ) + "cpu,,core_hour,0.02\nmemory,,gib_hour,0.001\n")  # fmt: skip
    result = runner.invoke(app, [
        "whatif", "remedies", "--db", str(db), "--since", "6h", "--step", "1h",
        "--queue", "kubernetes", "--add", "H20:4:gpus=8,cpus=256,memory=4096",
        "--cpus", "L20:+64", "--port", "H800=H20:0.8,H800=L20:0.5", "--compaction", "--together",
        "--prices", str(prices),
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "left out" not in result.stdout
    wide = [line for line in result.stdout.splitlines() if len(line) > 80]
    assert not wide, wide[:3]
    assert "together:" in result.stdout and "rank" in result.stdout
    csv = runner.invoke(app, ["whatif", "remedies", "--db", str(db), "--since", "6h", "--step", "1h",
                              "--queue", "kubernetes", "--add", "H20:2", "--csv",
                              "--csv-raw"])  # fmt: skip (a remedy's name leads with "-")
    # the tables: the baseline's calibration, then the remedies' (one row per remedy)
    frame = pl.read_csv(csv.stdout.encode()).filter(pl.col("table") == "remedies")
    assert frame["remedy"].to_list() == ["recorded fleet (baseline)", "--add H20:2"]
    assert frame["usable_gpu_hours_change"][0] == 0.0


def test_report_prices_its_denominators_and_shows_the_remedies_run(tmp_path: Path) -> None:
    """The CPU-bound fleet at 2 a GPU-hour: 64 idle GPU-hours, all stranded by cpu_memory,
    are 128 in money; no allocation and no telemetry: 0 allocated, 0 unproductive. The
    report's remedies section is the run before it (the baseline and --cpus C:+32)."""
    store = _store(tmp_path, "cpu")
    whatif_remedies(store, RemediesRun(**{**RUN.__dict__, "edits": (rm.parse_delta("cpus", "C:+32"),)}))
    prices = tmp_path / "prices.yaml"
    prices.write_text("currency: EUR\ngpu:\n  C: {gpu_hour: 2}\n")
    page, doc = tmp_path / "r.html", tmp_path / "r.json"
    result = CliRunner().invoke(app, [
        "report", "--db", str(store.db), "--at", "2026-01-01T04:00:00Z", "--since", "4h",
        "--step", "1h", "--prices", str(prices), "--html", str(page), "--json", str(doc),
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(doc.read_text())
    money = report["money"]
    assert money["currency"] == "EUR"
    assert money["fleet"]["idle"] == 128.0 and money["fleet"]["cpu_memory"] == 128.0
    assert money["fleet"]["usable"] == 0.0 and money["fleet"]["allocated"] == 0.0
    assert money["models"]["C"]["gpu_hour"] == 2.0
    rows = report["remedies"]["rows"]
    assert [r["name"] for r in rows] == ["recorded fleet (baseline)", "--cpus C:+32"]
    assert (rows[1]["started"], rows[1]["started_change"]) == (3, 3)
    assert rows[1]["p_start"] == [1.0] and rows[0]["p_start"] == [0.0]
    html = page.read_text()
    assert 'id="remedies-section"' in html and 'id="money-section"' in html
    assert "width:100.0%" in html  # the bar of --cpus C:+32's start probability
    assert "in money (EUR)" in result.stdout and "remedies: ran" in result.stdout


def test_compaction_row_follows_health_as_the_baseline_does(tmp_path: Path) -> None:
    """Two half-full nodes and a queued whole-node gang: compaction frees one node by
    moving the other's work. With c2 drained from 01:00 to past the window's end and GPU
    3 of c1 failed 00:30-02:30, the search at the window's end leaves c2's work where it
    is and puts none on c2 (no move at all: 5 free GPUs on c1 but c2 out of scope); its
    snapshots at the five instants follow the health too, so the row's fleet without
    compaction is the baseline's snapshot figure for figure. It read the fleet without
    health: one move, and the baseline's figures at other values."""
    folder = tmp_path / "fleet"
    folder.mkdir()
    (folder / "nodes.csv").write_text(
        "node_id,gpu_model,gpus,cpus,memory_gib,switch_id,health\n"
        "c1,C,8,64,,s1,healthy\nc2,C,8,64,,s1,healthy\n"
    )
    (folder / "allocations.csv").write_text(
        "alloc_id,node_id,gpus,cpus,priority,start_time,end_time\n"
        "a1,c1,3,12,high,2025-12-31T23:00:00Z,\na2,c2,3,12,high,2025-12-31T23:00:00Z,\n"
    )
    (folder / "requests.csv").write_text(
        "request_id,submit_time,start_time,gpu_model,gpus,gpus_per_pod,cpus_per_gpu,locality,"
        "duration_s,priority\nr1,2026-01-01T00:00:00Z,,C,8,8,4,node,3600,high\n"
    )
    events = folder / "node_events.csv"
    events.write_text(
        "node_id,gpu_index,start_time,end_time,state,reason,source\n"
        "c2,,2026-01-01T01:00:00Z,2026-01-01T05:00:00Z,drain,maintenance,slurm:sacctmgr\n"
        "c1,3,2026-01-01T00:30:00Z,2026-01-01T02:30:00Z,unhealthy,xid 79,dcgm:xid\n"
    )
    run = RemediesRun(**{**RUN.__dict__, "compaction": True})
    found = {}
    for name in ("health", "plain"):
        options = api.StoreOptions(db=tmp_path / f"{name}.duckdb")
        api.ingest_paths(options, [folder])
        found[name] = whatif_remedies(options, run)
        events.unlink(missing_ok=True)
    base, row = found["health"].rows[0], found["health"].rows[-1]
    assert row.kind == "compaction" and row.compaction is not None
    assert row.compaction["snapshot_instants"] == 5
    assert row.snapshot_base == base.snapshot
    assert row.compaction["ledger"]["moves"] == 0
    plain = found["plain"].rows[-1]
    assert plain.compaction is not None and plain.compaction["ledger"]["moves"] == 1
    assert found["plain"].rows[0].snapshot.hours["idle"] > base.snapshot.hours["idle"]
