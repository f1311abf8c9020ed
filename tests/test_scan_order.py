"""No figure depends on the order in which the store returns the window's allocations
or requests: the queries leave it open (sorting 9.4 M rows in DuckDB doubled the
read's memory), and load_frames puts the allocations in alloc_id order itself."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fleetaudit import api
from fleetaudit.cli import app
from fleetaudit.model.store import Store
from tests.conftest import DATA

runner = CliRunner()
SHUFFLED = ("allocations_overlapping", "harvest_allocations", "requests_submitted_between")
VOLATILE = ("seconds", "generated_at", "elapsed_s")


# -- by_alloc_id ------------------------------------------------------------------------


def test_by_alloc_id_orders_by_id_and_ties_by_every_column() -> None:
    frame = pl.DataFrame(
        {"alloc_id": ["b", "a", None, "a", "c"], "node_id": ["n1", "n2", "n1", "n1", "n3"]}
    )
    got = api.by_alloc_id([frame])
    assert got["alloc_id"].to_list() == ["a", "a", "b", "c", None]  # missing ids last
    assert got["node_id"].to_list() == ["n1", "n2", "n1", "n3", "n1"]


def test_by_alloc_id_takes_the_frame_out_of_the_list_and_keeps_an_ordered_one() -> None:
    frame = pl.DataFrame({"alloc_id": ["a1", "a2", "a3"], "gpus": [1.0, 2.0, 3.0]})
    frames = [frame]
    assert api.by_alloc_id(frames) is frame  # already in order: nothing copied
    assert frames == []


@settings(max_examples=50, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from(["a1", "a2", "a10", "b", None]), st.integers(0, 3)),
        max_size=12,
    ),
    seed=st.integers(0, 2**16),
)
def test_by_alloc_id_is_the_same_for_every_order_of_the_rows(
    rows: list[tuple[str | None, int]], seed: int
) -> None:
    frame = pl.DataFrame(rows, schema={"alloc_id": pl.String, "gpus": pl.Int64}, orient="row")
    shuffled = frame.sample(fraction=1.0, shuffle=True, seed=seed)
    expected = frame.sort("alloc_id", "gpus", nulls_last=True)
    assert api.by_alloc_id([shuffled]).equals(expected)
    assert api.by_alloc_id([frame]).equals(expected)


# -- every command, on rows returned in shuffled orders ------------------------------


def _scrubbed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "<t>" if k in VOLATILE else _scrubbed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v) for v in value]
    return value


def _documents(folder: Path, tmp_path: Path, commands: list[list[str]]) -> list[Any]:
    """The JSON of each command on a fresh store of ``folder`` (a report records itself)."""
    documents = []
    for number, args in enumerate(commands):
        db = tmp_path / f"{folder.name}-{number}.duckdb"
        shutil.copy(tmp_path / f"{folder.name}.duckdb", db)
        out = tmp_path / f"{folder.name}-{number}.json"
        argv = [a.replace("{out}", str(out)) for a in args] + ["--db", str(db)]
        result = runner.invoke(app, argv)
        assert result.exit_code == 0, (argv, result.output)
        text = out.read_text() if "{out}" in args else result.stdout
        documents.append(_scrubbed(json.loads(text)))
    return documents


TINY = [
    ["shapes", "--at", "2026-01-01T12:00:00Z", "--reclaim", "--explain", "--json"],
    ["shapes", "--at", "2026-01-01T20:00:00Z", "--model", "H20", "--gpus", "1",
     "--cpus-per-gpu", "4", "--history", "12h", "--step", "1h", "--json"],
    ["whatif", "compaction", "--at", "2026-01-01T12:00:00Z", "--json"],
    ["whatif", "placement", "--at", "2026-01-01T20:00:00Z", "--since", "12h", "--json"],
    ["whatif", "placement", "--at", "2026-01-01T12:00:00Z", "--fill", "60", "--json"],
]  # fmt: skip
HAND = [
    ["report", "--at", "2026-01-02T00:00:00Z", "--since", "1d", "--step", "1h",
     "--json", "{out}"],
    ["shapes", "--at", "2026-01-02T00:00:00Z", "--model", "H20", "--gpus", "8",
     "--history", "1d", "--step", "1h", "--deadline", "2h", "--json"],
    ["whatif", "harvesting", "--at", "2026-01-02T00:00:00Z", "--since", "1d", "--json"],
]  # fmt: skip


@pytest.mark.parametrize(("folder", "commands"), [("tiny", TINY), ("report_hand", HAND)])
def test_every_command_gives_the_same_json_whatever_order_the_store_returns(
    folder: str, commands: list[list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = DATA / folder
    api.ingest_paths(api.StoreOptions(tmp_path / f"{source.name}.duckdb"), [source])
    expected = _documents(source, tmp_path, commands)
    query = Store.query
    for seed in (1, 2):

        def shuffled(self: Store, name: str, /, **params: Any) -> pl.DataFrame:
            frame = query(self, name, **params)
            if name in SHUFFLED:
                return frame.reverse() if seed == 1 else frame.sample(
                    fraction=1.0, shuffle=True, seed=seed
                )
            return frame

        monkeypatch.setattr(Store, "query", shuffled)
        assert _documents(source, tmp_path, commands) == expected, seed
