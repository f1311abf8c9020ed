"""Build hook: the wheel carries the harvesting replay compiled (fleetaudit/whatif/_jitcache, beside the kernel).

numba compiles the replay on its first run, a minute or two; a wheel built here
ships that cache, and the first run of a fresh install loads it
(:mod:`fleetaudit.core.jitcache`). The build needs numba, numpy and polars (they are
in ``[build-system] requires``) and compiles once, for the architecture's generic CPU
and this Python. ``FLEETAUDIT_PREBUILT_JIT=0`` builds without it (an install then
compiles on its first replay, as an editable install always does).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SKIP = "FLEETAUDIT_PREBUILT_JIT"


class PrebuiltReplayHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        if os.environ.get(SKIP, "1").strip().lower() in ("0", "no", "false", "off"):
            return
        sys.path.insert(0, self.root)
        try:
            from fleetaudit.core import jitcache
        finally:
            sys.path.remove(self.root)
        out = Path(tempfile.mkdtemp(prefix="fleetaudit-jit-"))
        # the caches sit beside the kernel's source, wherever the package keeps it
        kernel = next(Path(self.root, "fleetaudit").rglob("harvest_kernel.py"))
        beside = kernel.parent.relative_to(self.root).as_posix()
        for path in jitcache.build(out):
            build_data["force_include"][str(path)] = f"{beside}/{jitcache.PREBUILT}/{path.name}"
        # numba's cache is for this Python: the wheel says so (any OS of this architecture
        # would load it, but pip picks wheels by tag and numba's are per platform anyway)
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
