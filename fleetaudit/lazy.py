"""A module imported on its first use, for the start-up of the command line.

``fleetaudit --help`` and a usage error should not pay for polars, numpy, duckdb or
the engines (most of a command's start-up). The presentation modules that the CLI
imports at start-up bind such modules as :class:`LazyModule` at run time, and as the
real module for type checkers, so annotations and attribute access read the same.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for the module ``name``; imports it when an attribute is first read.

    >>> json = LazyModule("json")
    >>> json.dumps([1])
    '[1]'
    """

    def __init__(self, name: str) -> None:
        self.__dict__["_name"] = name
        self.__dict__["_module"] = None

    def _load(self) -> ModuleType:
        module = self.__dict__["_module"]
        if module is None:
            module = importlib.import_module(self.__dict__["_name"])
            self.__dict__["_module"] = module
        return module

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):  # introspection (doctest, inspect.unwrap) loads nothing
            raise AttributeError(attr)
        return getattr(self._load(), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self.__dict__['_name']!r}>"
