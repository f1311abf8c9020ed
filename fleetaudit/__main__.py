"""``python -m fleetaudit`` and the ``fleetaudit`` console script.

The command line's imports (polars, duckdb, rich) take a moment; a Ctrl-C
during them is one line and exit 130 too, not a traceback.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    """Import the command line under the same Ctrl-C rule as the commands, then run it."""
    try:
        from fleetaudit.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("fleetaudit: error: interrupted; nothing was written\n")
        sys.stderr.flush()
        # Not SystemExit: when a library ran code through PyRun_* as the Ctrl-C came,
        # CPython marks it unhandled and would end by SIGINT (-2) instead of 130.
        os._exit(130)
    cli_main()


if __name__ == "__main__":
    main()
