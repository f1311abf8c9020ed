"""Nothing a user sees changes: every ``--json`` document, compared with goldens.

Written when the capacity model was unified under the engines and the package
regrouped into layers, it holds the promise that a refactor moves code, not
figures. It runs every ``--json`` command on

- the sample store (``sample_data/``): the documents are kept in full under
  ``tests/data/outputs/sample/``, so a failure shows the changed lines;
- a generated fleet (``fleetaudit generate`` with a fixed seed; 2,000 nodes with
  FLEETAUDIT_SCALE=full, 300 otherwise): kept as sha256 digests of the canonical
  JSON, with a short summary per document, under
  ``tests/data/outputs/generated_<nodes>.json``.

Volatile fields (wall-clock times, creation stamps) are scrubbed first. The
goldens were written from the branch point, before any engine changed; set
FLEETAUDIT_WRITE_GOLDENS=1 to write them again (only for an intended change).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fleetaudit.cli import app
from tests.conftest import DATA, REPO

OUTPUTS = DATA / "outputs"
WRITE = os.environ.get("FLEETAUDIT_WRITE_GOLDENS") == "1"
FULL = os.environ.get("FLEETAUDIT_SCALE") == "full"
GENERATED_NODES = 2000 if FULL else 300
GENERATED_DAYS = 14
GENERATED_SEED = 17

VOLATILE = frozenset({"seconds", "generated_at", "elapsed_s", "created_at", "ran"})
"""Keys whose values are wall-clock facts of the run, not figures."""

# name -> arguments after the command path; "report" writes its JSON to a file.
COMMANDS: dict[str, list[str]] = {
    "shapes": ["shapes", "--json"],
    "shapes_hist": [
        "shapes", "--reclaim", "--history", "2d", "--step", "30m", "--deadline", "1h", "--json",
    ],
    "shapes_h20": ["shapes", "--model", "H20", "--gpus", "64", "--cpus-per-gpu", "8", "--json"],
    "compaction": ["whatif", "compaction", "--json"],
    "placement": ["whatif", "placement", "--since", "1d", "--json"],
    "placement_fill": ["whatif", "placement", "--fill", "60", "--seeds", "2", "--json"],
    "harvest": ["whatif", "harvesting", "--since", "2d", "--json"],
    "report": ["report", "--since", "7d", "--json"],
}

runner = CliRunner()


def scrub(value: Any) -> Any:
    """The document with every volatile field replaced by ``"<t>"``.

    >>> scrub({"a": 1, "seconds": 2.5, "b": [{"created_at": "x", "c": None}]})
    {'a': 1, 'seconds': '<t>', 'b': [{'created_at': '<t>', 'c': None}]}
    """
    if isinstance(value, dict):
        return {k: "<t>" if k in VOLATILE else scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def canonical(document: Any) -> str:
    """The one text of a document that its digest is taken of."""
    return json.dumps(document, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def _invoke(args: list[str]) -> None:
    result = runner.invoke(app, args)
    if result.exit_code != 0:
        raise AssertionError(f"fleetaudit {' '.join(args)} exited {result.exit_code}:\n"
                             f"{result.output}\n{result.exception!r}")


def documents(db: Path, workdir: Path) -> dict[str, Any]:
    """Every --json document of the commands on the store ``db``, scrubbed."""
    out: dict[str, Any] = {}
    for name, args in COMMANDS.items():
        if name == "report":
            target = workdir / "report.json"
            _invoke([*args, str(target), "--db", str(db)])
            text = target.read_text(encoding="utf-8")
        else:
            result = runner.invoke(app, [*args, "--db", str(db)])
            if result.exit_code != 0:
                raise AssertionError(f"fleetaudit {' '.join(args)} exited {result.exit_code}:\n"
                                     f"{result.output}\n{result.exception!r}")
            text = result.stdout
        out[name] = scrub(json.loads(text))
    return out


def summary(document: Any) -> dict[str, Any]:
    """A few words on a document, so a changed digest says what kind of change."""
    if isinstance(document, dict):
        return {"keys": sorted(document)[:12], "bytes": len(canonical(document))}
    if isinstance(document, list):
        return {"items": len(document), "bytes": len(canonical(document))}
    return {"bytes": len(canonical(document))}


def test_sample_store_outputs_unchanged(tmp_path: Path) -> None:
    db = tmp_path / "sample.duckdb"
    _invoke(["ingest", str(REPO / "sample_data"), "--db", str(db), "--quiet"])
    got = documents(db, tmp_path)
    folder = OUTPUTS / "sample"
    if WRITE:
        folder.mkdir(parents=True, exist_ok=True)
        for name, document in got.items():
            (folder / f"{name}.json").write_text(canonical(document), encoding="utf-8")
    changed = []
    for name, document in got.items():
        golden = (folder / f"{name}.json").read_text(encoding="utf-8")
        if canonical(document) != golden:
            changed.append(name)
    # the documents compared one by one, so pytest's diff shows the changed figures
    for name in changed:
        assert json.loads(canonical(got[name])) == json.loads(
            (folder / f"{name}.json").read_text(encoding="utf-8")
        ), f"{name}: the --json document changed"
    assert not changed, f"changed documents: {changed}"


@pytest.mark.slow
def test_generated_fleet_outputs_unchanged(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet"
    _invoke([
        "generate", str(fleet), "--nodes", str(GENERATED_NODES), "--days", str(GENERATED_DAYS),
        "--seed", str(GENERATED_SEED), "--quiet",
    ])
    db = tmp_path / "fleet.duckdb"
    _invoke(["ingest", str(fleet), "--db", str(db), "--quiet"])
    got = {
        name: {"sha256": hashlib.sha256(canonical(doc).encode()).hexdigest(), **summary(doc)}
        for name, doc in documents(db, tmp_path).items()
    }
    golden_path = OUTPUTS / f"generated_{GENERATED_NODES}.json"
    if WRITE:
        golden_path.parent.mkdir(parents=True, exist_ok=True)
        golden_path.write_text(canonical(got), encoding="utf-8")
    golden = json.loads(golden_path.read_text(encoding="utf-8"))
    changed = {name: (golden.get(name), got[name]) for name in got if golden.get(name) != got[name]}
    assert not changed, f"changed documents (golden, now): {changed}"
    assert sorted(golden) == sorted(got)
