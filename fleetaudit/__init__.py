"""fleetaudit: audit the capacity of a shared GPU fleet.

The command line (``fleetaudit``) is a thin client of :mod:`fleetaudit.api`.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
