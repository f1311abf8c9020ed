"""The documentation stays true to the code: help of every registered command, the CLI
reference in docs/cli.md, and the JSON Schemas in docs/schemas/ that every ``--json``
document must validate against.

After changing a command's options or help, regenerate the reference with
``FLEETAUDIT_UPDATE_DOCS=1 pytest tests/test_docs.py`` and read the diff.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from fleetaudit.api import compaction_api, harvest_api, paper_api, remedies_api, report_api
from fleetaudit.cli import app
from fleetaudit.outputs import contract
from tests.conftest import command_paths

REPO = Path(__file__).resolve().parent.parent
SCHEMAS = REPO / "docs" / "schemas"
REFERENCE = REPO / "docs" / "cli.md"
SAMPLE = REPO / "sample_data"
WIDTH = 100
PLAIN = {"COLUMNS": str(WIDTH), "NO_COLOR": "1", "TERM": "dumb"}

runner = CliRunner()


COMMAND_PATHS = [(), *command_paths()]  # () is `fleetaudit --help` itself


def _help(path: tuple[str, ...]) -> str:
    result = runner.invoke(app, [*path, "--help"], env=PLAIN, terminal_width=WIDTH)
    assert result.exit_code == 0, result.output
    # rich pads lines to the width: the reference keeps the text, not the padding
    return "\n".join(line.rstrip() for line in result.stdout.splitlines()).strip() + "\n"


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=lambda p: " ".join(p) or "fleetaudit")
def test_every_registered_command_has_help(path: tuple[str, ...]) -> None:
    text = _help(path)
    assert text.startswith("Usage: fleetaudit"), text[:200]
    summary = text.split("\n\n", 2)[1].strip()
    assert len(summary) > 20, f"{' '.join(path)}: the help says too little: {summary!r}"


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=lambda p: " ".join(p) or "fleetaudit")
def test_windows_ending_at_at_are_half_open_in_the_help(path: tuple[str, ...]) -> None:
    """Every replay and report excludes ``at`` itself (a request submitted at ``at``
    is not replayed): the help must not say ``[at - since, at]``."""
    text = " ".join(_help(path).replace("│", " ").split())
    assert "at - since, at]" not in text
    assert "[at, at + duration]" not in text


def _reference() -> str:
    parts = [
        "# Command-line reference\n",
        "Generated from the commands themselves (`FLEETAUDIT_UPDATE_DOCS=1 pytest "
        "tests/test_docs.py` regenerates it; a test fails when it is stale).\n",
    ]
    for path in COMMAND_PATHS:
        title = " ".join(("fleetaudit", *path))
        parts.append(f"## {title}\n\n```text\n{_help(path)}```\n")
    return "\n".join(parts)


def test_cli_reference_is_current() -> None:
    expected = _reference()
    if os.environ.get("FLEETAUDIT_UPDATE_DOCS"):
        REFERENCE.write_text(expected, encoding="utf-8")
    assert REFERENCE.read_text(encoding="utf-8") == expected, (
        "docs/cli.md is stale: run FLEETAUDIT_UPDATE_DOCS=1 pytest tests/test_docs.py"
    )


# ------------------------------------------------------------------ JSON Schemas

DOCUMENT_IDS = sorted(
    value
    for module in (contract, compaction_api, harvest_api, paper_api, remedies_api, report_api)
    for name, value in vars(module).items()
    if name.endswith("_SCHEMA") and isinstance(value, str) and value.startswith("fleetaudit.")
)


def _schema(document_id: str) -> dict[str, Any]:
    name = document_id.removeprefix("fleetaudit.").split("/")[0]
    return dict(json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8")))


def test_every_document_has_a_published_schema() -> None:
    published = {
        json.loads(p.read_text(encoding="utf-8"))["$id"] for p in SCHEMAS.glob("*.schema.json")
    }
    assert set(DOCUMENT_IDS) == published
    for document_id in DOCUMENT_IDS:
        Draft202012Validator.check_schema(_schema(document_id))


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("schemas")
    db = folder / "sample.duckdb"
    result = runner.invoke(app, ["ingest", str(SAMPLE), "--db", str(db)])
    assert result.exit_code == 0, result.output
    # an ingest with a reject, so that `rejects --json` lists one
    bad = folder / "nodes.csv"
    bad.write_text("node_id,gpu_model,gpus,cpus\nextra-1,H20,-8,64\n", encoding="utf-8")
    result = runner.invoke(app, ["ingest", str(bad), "--db", str(db)])
    assert result.exit_code == 65, result.output  # its one row rejected: nothing loaded
    return db


def _documents(db: Path, out: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    runs: list[tuple[str, list[str]]] = [
        ("shapes", ["shapes", "--json"]),
        ("shapes --reclaim --history", ["shapes", "--json", "--reclaim", "--history", "1d", "--step", "1h", "--deadline", "1h"]),
        ("shapes (share)", ["shapes", "--json", "--model", "A10", "--gpus", "0.25"]),
        ("whatif placement", ["whatif", "placement", "--json", "--since", "6h"]),
        ("whatif placement --fill", ["whatif", "placement", "--json", "--fill", "30", "--seeds", "1", "--policy", "best-fit"]),
        ("whatif compaction", ["whatif", "compaction", "--json", "--jobs", "1"]),
        ("whatif harvesting", ["whatif", "harvesting", "--json", "--since", "1d", "--policy", "spotgpu"]),
        ("whatif remedies", ["whatif", "remedies", "--json", "--since", "6h", "--step", "1h", "--add", "H20:2", "--port", "H800=H20:0.8"]),
        ("rejects", ["rejects", "--json"]),
    ]  # fmt: skip
    for label, args in runs:
        result = runner.invoke(app, [*args, "--db", str(db)])
        assert result.exit_code == 0, f"{label}: {result.output}"
        yield label, json.loads(result.stdout)
    # the paper view needs an ingested ASI 2026 release: a small generated one
    release, trace_db = out / "release", out / "asi.duckdb"
    for args in (
        ["generate", str(release), "--format", "alibaba-gpu-v2026", "--nodes", "40", "--days", "1"],
        ["ingest", "--format", "alibaba-gpu-v2026", str(release), "--db", str(trace_db)],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["paper", "--json", "--db", str(trace_db)])
    assert result.exit_code == 0, result.output
    yield "paper", json.loads(result.stdout)
    path = out / "report.json"
    result = runner.invoke(
        app, ["report", "--since", "2d", "--step", "1h", "--json", str(path), "--db", str(db)]
    )
    assert result.exit_code == 0, result.output
    yield "report", json.loads(path.read_text(encoding="utf-8"))


def test_every_json_output_validates(sample_store: Path, tmp_path: Path) -> None:
    seen = set()
    for label, document in _documents(sample_store, tmp_path):
        validator = Draft202012Validator(_schema(document["schema"]))
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
        assert not errors, f"{label}: " + "; ".join(
            f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:5]
        )
        seen.add(document["schema"])
    assert seen == set(DOCUMENT_IDS), "a document without an output in this test"


@pytest.mark.parametrize(
    ("document_id", "bad"),
    [
        ("fleetaudit.shapes/1", {"schema": "fleetaudit.shapes/1", "at": "2026-01-01T00:00:00Z"}),
        ("fleetaudit.shapes/1", {"schema": "fleetaudit.shapes/1", "at": "yesterday", "shapes": []}),
        ("fleetaudit.compaction/1", {"schema": "fleetaudit.compaction/2"}),
    ],
)
def test_schemas_reject_what_a_reader_could_not_use(document_id: str, bad: dict[str, Any]) -> None:
    assert list(Draft202012Validator(_schema(document_id)).iter_errors(bad))


# ------------------------------------------------------------------ the prose docs

README = REPO / "README.md"
PAGES = sorted(
    [README, REPO / "benchmarks" / "README.md", *(REPO / "docs").rglob("*.md")],
    key=lambda p: p.relative_to(REPO).as_posix(),
)
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)")


def _prose(path: Path) -> str:
    """The page without its fenced code blocks (a `[x](y)` in a shell example is no link)."""
    return re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, spaces -."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_anchor(m) for m in re.findall(r"^#{1,6} (.+)$", _prose(path), re.M)}


def _links(path: Path) -> list[str]:
    return [
        target
        for target in LINK.findall(_prose(path))
        if not re.match(r"[a-z][a-z0-9+.-]*:", target)  # https:, mailto: ...
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in _links(page):
        file_part, _, anchor = target.partition("#")
        resolved = (page.parent / file_part).resolve() if file_part else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (resolved.suffix != ".md" or anchor not in _anchors(resolved)):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Compaction over time (`--over`)", "compaction-over-time---over"),
        ("CPU- and memory-bound nodes", "cpu--and-memory-bound-nodes"),
        ("A nightly report from cron", "a-nightly-report-from-cron"),
    ],
)
def test_anchors_are_spelled_as_github_spells_them(heading: str, anchor: str) -> None:
    assert _anchor(heading) == anchor


def test_the_link_check_finds_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n[ok](page.md#title) [gone](nowhere.md) [web](https://example.com)\n"
        "```sh\necho [not](a-link.md)\n```\n",
        encoding="utf-8",
    )
    assert _links(page) == ["page.md#title", "nowhere.md"]
    assert _anchors(page) == {"title"}


@pytest.mark.parametrize("page", [*PAGES, REFERENCE], ids=lambda p: p.relative_to(REPO).as_posix())
def test_docs_cite_no_document_a_user_does_not_have(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"\bSPEC\b|§", text), page.relative_to(REPO).as_posix()
    assert "README Semantics" not in text and 'README, "Semantics"' not in text, page.name


def test_every_docs_page_is_reachable_from_the_map() -> None:
    """docs/index.md links every page, so the lead (and a reader) finds where a topic goes."""
    index = REPO / "docs" / "index.md"
    linked = {(index.parent / t.partition("#")[0]).resolve() for t in _links(index)}
    pages = {p.resolve() for p in (REPO / "docs").rglob("*.md") if p != index}
    assert not sorted(str(p.relative_to(REPO)) for p in pages - linked)


def _section(text: str, heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"README has no section {heading!r}"
    return match.group(1)


def test_the_quickstart_is_the_two_commands_ci_runs() -> None:
    quickstart = _section(README.read_text(encoding="utf-8"), "Quickstart")
    blocks = re.findall(r"^```sh\n(.*?)^```", quickstart, re.M | re.S)
    assert blocks == ["pip install . && fleetaudit demo\n", "pip install '.[test]' && pytest\n"]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert blocks[1].strip() in ci  # .ci/run runs the second one verbatim


def test_the_readme_keeps_the_cron_line_ci_runs() -> None:
    """.ci/cron-line takes the first schedule line of the README's crontab block."""
    cron = _section(README.read_text(encoding="utf-8"), "A nightly report from cron")
    block = re.findall(r"^```crontab\n(.*?)^```", cron, re.M | re.S)
    assert len(block) == 1
    schedule = [line for line in block[0].splitlines() if re.match(r"[0-9*]", line)]
    assert len(schedule) == 1 and "report --quiet" in schedule[0]


@pytest.mark.parametrize(
    "path", command_paths(leaves_only=True), ids=lambda p: " ".join(p)
)
def test_every_command_has_a_row_and_a_page(path: tuple[str, ...]) -> None:
    """The README's commands table names every registered command, linking its page."""
    commands = _section(README.read_text(encoding="utf-8"), "Commands")
    row = re.search(rf"^\| `{re.escape(' '.join(path))}[ `].*$", commands, re.M)
    assert row, f"the README's commands table has no row for {' '.join(path)}"
    pages = re.findall(r"\]\((docs/[^)#]+\.md)\)", row.group(0))
    assert pages and all((REPO / p).is_file() for p in pages), row.group(0)


def test_the_package_doctests_are_collected() -> None:
    """Docstring examples run as tests of their own (one place: --doctest-modules over the
    package), so no test module runs doctest.testmod again."""
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")  # no tomllib on 3.10
    assert re.search(r'^addopts = \[[^\]]*"--doctest-modules"', pyproject, re.M)
    assert re.search(r'^testpaths = \[.*"fleetaudit"', pyproject, re.M)
    with_examples = [
        p for p in (REPO / "fleetaudit").rglob("*.py") if ">>> " in p.read_text(encoding="utf-8")
    ]
    assert len(with_examples) >= 20


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(p))
def test_every_description_line_fits_an_80_column_help_panel(path: tuple[str, ...]) -> None:
    """The help panel keeps a docstring's line breaks: a line wider than the panel's 76
    columns of text would wrap into a one-word line on an 80-column terminal. The first
    line, which is also the command list's summary, is one line that fits too."""
    import typer

    from fleetaudit.cli import app

    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    description = (command.help or "").split("Examples:")[0]
    summary, *body = description.strip().split("\n\n")
    assert len(summary.splitlines()) == 1 and len(summary) <= 76, summary
    wide = [line for part in body for line in part.splitlines() if len(line.strip()) > 76]
    assert not wide, wide
    # an example wider than the panel wraps too, and then no longer pastes into a shell:
    # a long one continues on the next line after a backslash
    examples = (command.help or "").partition("Examples:")[2]
    wide = [line for line in examples.splitlines() if len(line.strip()) > 76]
    assert not wide, wide
