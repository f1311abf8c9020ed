"""Locate the package data folders (queries/, templates/, sample_data/).

In a source checkout they sit beside the package; in an installed wheel the
build maps them into the package (pyproject.toml, force-include).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from fleetaudit.core.errors import FleetAuditError

# the package's folder, however deep in it this module sits
_PKG = Path(__file__).resolve().parents[__name__.count(".") - 1]


def resource_dir(name: str) -> Path:
    """The folder ``name`` of the installed package, else of the source checkout."""
    for candidate in (_PKG / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FleetAuditError(f"fleetaudit is installed without its {name}/ folder; reinstall it")


@cache
def load_sql(name: str) -> str:
    """The text of ``queries/<name>.sql``."""
    path = resource_dir("queries") / f"{name}.sql"
    if not path.is_file():
        raise FleetAuditError(f"fleetaudit has no query named {name!r}")
    return path.read_text(encoding="utf-8")
