"""``ingest --format slurm --from-slurm``: fetch a cluster's exports with its own tools.

Run on a host with the Slurm client commands (a login node, from cron): the collector
runs them itself, with the flags the installed version takes, writes their output into
the ingest's temporary folder and hands the files to the ingest, which reads them as if
they had been named (:func:`fleetaudit.inputs.ingest.collected`):

- ``sacct -a -X -D -P --noconvert -S now-SECONDS -E now --format=...``: the fields of
  :data:`~fleetaudit.inputs.ingest.slurm_jobs.JOB_FIELDS` that this sacct knows (it is
  asked: ``sacct --helpformat``), plus ``--array`` where it has it (23.02 and later);
- ``scontrol -d -o show node``, ``scontrol -d -o show job``, ``scontrol show topology``;
- ``squeue -a -r --json`` (the pending jobs);
- ``sacctmgr -P show event Start=now-SECONDS End=now``;
- ``sdiag`` (the instant of the export).

Every text command runs with ``SLURM_TIME_FORMAT=%s`` (epoch seconds: no time zone to
guess); the JSON one without it (sacct and squeue refuse their time options under it).
A command that fails stops the call with its own error.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from fleetaudit.core.errors import InputError
from fleetaudit.inputs.ingest.slurm_jobs import JOB_FIELDS

_NOT_SACCT_FIELDS = frozenset({"ReqSwitches"})  # squeue's; sacct does not record it
_REQUIRED = ("JobID", "Submit", "Start", "End", "State", "NodeList", "AllocTRES")


@dataclass(frozen=True)
class SlurmCollect:
    """The settings of ``--from-slurm``: how far back the history goes, and the environment
    the commands run in (None: this process's, so ``SLURM_CONF`` and ``PATH`` apply)."""

    since: timedelta = timedelta(days=1)
    timeout_s: float = 600.0
    environment: Mapping[str, str] | None = field(default=None, compare=False)


def collect(settings: object, folder: Path, progress: Callable[[str], None]) -> list[Path]:
    """Run the Slurm commands into ``folder``; the paths of the files they wrote.

    Raises:
        InputError: a command is missing or fails (the message is its own).
    """
    if not isinstance(settings, SlurmCollect):
        raise TypeError(f"--from-slurm settings expected, got {type(settings).__name__}")
    run = _Runner(settings, progress)
    seconds = max(int(settings.since.total_seconds()), 1)
    fields = run.sacct_fields()
    array = ["--array"] if run.sacct_has_array() else []
    files = [
        run.text(
            folder / "sacct.psv",
            ["sacct", "-a", "-X", "-D", "-P", "--noconvert", *array,
             "-S", f"now-{seconds}", "-E", "now", f"--format={','.join(fields)}"],
        ),
        run.text(folder / "nodes.txt", ["scontrol", "-d", "-o", "show", "node"]),
        run.text(folder / "jobs.txt", ["scontrol", "-d", "-o", "show", "job"], empty_ok=True),
        run.json(folder / "squeue.json", ["squeue", "-a", "-r", "--json"]),
        run.text(
            folder / "events.psv",
            ["sacctmgr", "-P", "show", "event", f"Start=now-{seconds}", "End=now"],
        ),
        run.text(folder / "sdiag.txt", ["sdiag"]),
    ]  # fmt: skip
    topology = run.text(folder / "topology.conf", ["scontrol", "show", "topology"], empty_ok=True)
    if re.search(r"(?im)^\s*(SwitchName|BlockName)=", topology.read_text(errors="replace")):
        files.append(topology)
    else:
        topology.unlink()  # no topology plugin: every node is a domain by itself
    jobs = folder / "jobs.txt"
    if not jobs.read_text(errors="replace").lstrip().startswith("JobId="):
        jobs.unlink()  # "No jobs in the system"
        files.remove(jobs)
    return [f for f in files if f.stat().st_size > 0]


class _Runner:
    def __init__(self, settings: SlurmCollect, progress: Callable[[str], None]) -> None:
        self.settings = settings
        self.progress = progress
        base = dict(settings.environment if settings.environment is not None else os.environ)
        self.text_env = {**base, "SLURM_TIME_FORMAT": "%s"}
        self.json_env = {k: v for k, v in base.items() if k != "SLURM_TIME_FORMAT"}

    def _run(self, args: list[str], env: Mapping[str, str]) -> str:
        path = env.get("PATH")
        if shutil.which(args[0], path=path) is None:
            raise InputError(
                "--from-slurm", f"{args[0]} is not on PATH: run on a host with Slurm's client commands"
            )
        self.progress(f"slurm: {' '.join(args)}")
        try:
            done = subprocess.run(
                args, env=dict(env), capture_output=True, text=True,
                timeout=self.settings.timeout_s, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise InputError(
                "--from-slurm", f"{args[0]} gave no answer in {self.settings.timeout_s:g} s"
            ) from exc
        if done.returncode != 0:
            message = " ".join((done.stderr or done.stdout).split())[:300] or "no message"
            raise InputError(
                "--from-slurm", f"{' '.join(args[:3])} failed (exit {done.returncode}): {message}"
            )
        return done.stdout

    def text(self, path: Path, args: list[str], empty_ok: bool = False) -> Path:
        out = self._run(args, self.text_env)
        if not out.strip() and not empty_ok:
            raise InputError("--from-slurm", f"{' '.join(args[:3])} printed nothing")
        path.write_text(out)
        return path

    def json(self, path: Path, args: list[str]) -> Path:
        path.write_text(self._run(args, self.json_env))
        return path

    def sacct_fields(self) -> list[str]:
        """The fields of JOB_FIELDS this sacct prints (``Restarts`` is not in 22.05's)."""
        known = set(self._run(["sacct", "--helpformat"], self.text_env).split())
        missing = [f for f in _REQUIRED if f not in known]
        if missing:
            raise InputError("--from-slurm", f"this sacct lacks the field(s) {', '.join(missing)}")
        return [f for f in JOB_FIELDS if f in known and f not in _NOT_SACCT_FIELDS]

    def sacct_has_array(self) -> bool:
        """Whether this sacct takes ``--array`` (23.02 and later): without it a pending
        array is one compressed line, which the ingest expands itself."""
        return "--array" in self._run(["sacct", "--help"], self.text_env)
