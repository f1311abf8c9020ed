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


def lazy_class(module: str, name: str) -> type:
    """Stands for the class ``module.name``; imports ``module`` when it is first called,
    checked against or has an attribute read (a stand-in is a class too, so ``A | B``
    in another module's annotations still evaluates).

    >>> Fraction = lazy_class("fractions", "Fraction")
    >>> Fraction(1, 2) + Fraction(1, 2), isinstance(Fraction(1), Fraction)
    (Fraction(1, 1), True)
    >>> Fraction.from_float(0.5)
    Fraction(1, 2)
    """

    def real() -> Any:
        return getattr(importlib.import_module(module), name)

    class _Deferred(type):
        def __getattr__(cls, attr: str) -> Any:
            if attr.startswith("__"):
                raise AttributeError(attr)
            return getattr(real(), attr)

        def __instancecheck__(cls, obj: Any) -> bool:
            return isinstance(obj, real())

        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            return real()(*args, **kwargs)

    return _Deferred(name, (), {"__module__": module, "__qualname__": name})


def import_with_stand_ins(name: str, stand_ins: dict[str, tuple[str, ...]]) -> ModuleType:
    """Import module ``name`` while the modules in ``stand_ins`` (not yet imported) are
    stand-ins holding :func:`lazy_class` es of the listed names, then withdraw them:
    ``name`` keeps the lazy classes and any later import gets the real modules.

    For a third-party module that imports at its top what it uses only on some paths
    (tests/test_startup.py shows it on typer's help renderer).
    """
    import sys

    if name in sys.modules:
        return sys.modules[name]
    placed: dict[str, ModuleType] = {}
    for module, names in stand_ins.items():
        if module in sys.modules:
            continue
        stand_in = ModuleType(module)
        for cls in names:
            setattr(stand_in, cls, lazy_class(module, cls))
        placed[module] = sys.modules[module] = stand_in
    try:
        return importlib.import_module(name)
    finally:
        for module, stand_in in placed.items():
            if sys.modules.get(module) is stand_in:
                del sys.modules[module]
