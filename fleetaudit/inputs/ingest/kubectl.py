"""``ingest --format kubernetes --kubectl``: take the snapshot itself, for cron.

The collector asks the cluster which resources it serves (``kubectl api-resources -o
name``), then lists the nodes and pods of every namespace, and the Kueue Workloads and
Volcano PodGroups where the cluster has those resources (a missing CRD is no error),
as one kubectl List written into the call's temporary folder::

    kubectl [--context C] [--kubeconfig F] --request-timeout=60s \\
        get nodes,pods[,workloads.kueue.x-k8s.io][,podgroups.scheduling.volcano.sh] \\
        -A -o json --chunk-size=500

kubectl writes its output straight into the file (this process never holds it), and
lists a large cluster page by page (``--chunk-size``). The List's ``metadata`` then gains the
API server the kubeconfig names (``kubectl config view --minify``; in a pod without a
kubeconfig, the in-cluster service address), under ``fleetaudit.io/server``: kubectl's List
names no cluster, and this is what tells the snapshots of two clusters apart later
(kubernetes_clusters). With ``--namespace NS`` (repeated)
the nodes are listed once and the namespaced resources per namespace, joined into one
List item by item. ``--keep DIR`` also writes the raw snapshot, named by the call's start
(``DIR/20260301T100000Z.json``), for audit and to ingest again later.

A failure of kubectl (not installed, a refusal such as RBAC ``Forbidden``, a timeout,
an unreachable server) is one line naming the kubectl command and what kubectl said;
nothing is written to the store or kept.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

from fleetaudit.core.errors import InputError, NoSpaceError
from fleetaudit.core.fsutil import atomic_path
from fleetaudit.core.options import KubectlOptions
from fleetaudit.inputs.ingest.kubernetes_clusters import SERVER_KEY

WORKLOADS = "workloads.kueue.x-k8s.io"
PODGROUPS = "podgroups.scheduling.volcano.sh"
OPTIONAL = (WORKLOADS, PODGROUPS)  # listed where the cluster serves them
SNAPSHOT = "snapshot.json"
SERVER_PATH = "{.clusters[0].cluster.server}"  # of the context in use, with --minify
# the end of kubectl's List: its metadata comes last (kubectl writes the keys sorted)
_LIST_END = re.compile(rb'"metadata"\s*:\s*\{([^{}]*)\}\s*\}\s*$')
_KLOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d")  # kubectl's log lines (klog)

Progress = Callable[[str], None]


def kept_name(options: KubectlOptions) -> str:
    """The file name ``--keep`` gives the raw snapshot: the call's start, UTC.

    >>> from datetime import datetime
    >>> kept_name(KubectlOptions(started=datetime(2026, 3, 1, 10, 0, 4)))
    '20260301T100004Z.json'
    """
    return options.started.strftime("%Y%m%dT%H%M%SZ") + ".json"


def collect(settings: object, folder: Path, progress: Progress) -> list[Path]:
    """Run kubectl into ``folder`` and return the snapshot file (see the module's doc).

    Raises:
        InputError: kubectl is missing or failed (its message, one line).
        NoSpaceError: the temporary folder or ``--keep``'s is full.
    """
    if not isinstance(settings, KubectlOptions):
        raise TypeError(f"the kubectl collector takes KubectlOptions, not {type(settings)}")
    options = settings
    base = _base(options)
    progress("kubectl: asking which resources the cluster serves")
    served = set(_run([*base, "api-resources", "-o", "name"], options, listing=True).split())
    extra = [r for r in OPTIONAL if r in served]
    server = _server(base, options)
    target = folder / SNAPSHOT
    try:
        if not options.namespaces:
            resources = ",".join(["nodes", "pods", *extra])
            progress(f"kubectl: listing {resources} of every namespace")
            _run([*base, "get", resources, "-A", "-o", "json",
                  f"--chunk-size={options.chunk_size}"], options, out=target)  # fmt: skip
        else:
            parts = [folder / "nodes.part.json"]
            progress("kubectl: listing nodes")
            _run([*base, "get", "nodes", "-o", "json", f"--chunk-size={options.chunk_size}"],
                 options, out=parts[0])  # fmt: skip
            for i, ns in enumerate(options.namespaces):
                resources = ",".join(["pods", *extra])
                progress(f"kubectl: listing {resources} of namespace {ns}")
                parts.append(folder / f"ns{i}.part.json")
                _run([*base, "get", resources, "-n", ns, "-o", "json",
                      f"--chunk-size={options.chunk_size}"], options, out=parts[-1])  # fmt: skip
            _join(parts, target)
        if server is not None and not record_server(target, server):
            progress(f"kubectl: the List does not end with its metadata; {server} not recorded")
        if options.keep:
            keep = Path(options.keep) / kept_name(options)
            progress(f"kubectl: keeping the raw snapshot as {keep}")
            with atomic_path(keep) as tmp:
                shutil.copyfile(target, tmp)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise NoSpaceError(
                f"no space left on device writing the kubectl snapshot ({exc.filename or folder}):"
                " the store is unchanged; free space (or set TMPDIR to a larger disk)"
            ) from exc
        raise InputError(str(exc.filename or folder), f"cannot write the snapshot: {exc}") from exc
    return [target]


def _server(base: list[str], options: KubectlOptions) -> str | None:
    """The API server kubectl talks to: the kubeconfig's (of ``--context``), else the
    in-cluster one (a pod's service account, where kubectl has no kubeconfig), else None."""
    try:
        said = _run([*base, "config", "view", "--minify", "-o", f"jsonpath={SERVER_PATH}"],
                    options).strip()  # fmt: skip
    except InputError:  # no kubeconfig (in a pod): kubectl cannot minify
        said = ""
    if said:
        return said
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    port = os.environ.get("KUBERNETES_SERVICE_PORT")
    if host:
        return f"https://{'[' + host + ']' if ':' in host else host}:{port or '443'}"
    return None


def record_server(path: Path, server: str) -> bool:
    """Add ``server`` to the metadata of the kubectl List in ``path`` (rewriting its last
    bytes only); False where the List does not end with its metadata.

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "s.json"
    >>> _ = p.write_text('{"items": [], "kind": "List", "metadata": {"resourceVersion": ""}}\\n')
    >>> record_server(p, "https://10.0.0.1:6443"), json.loads(p.read_text())["metadata"]
    (True, {'resourceVersion': '', 'fleetaudit.io/server': 'https://10.0.0.1:6443'})
    """
    with path.open("r+b") as fh:
        size = fh.seek(0, os.SEEK_END)
        start = max(0, size - 4096)
        fh.seek(start)
        found = _LIST_END.search(fh.read())
        if found is None:
            return False
        inner = found.group(1).rstrip()
        entry = f"{json.dumps(SERVER_KEY)}: {json.dumps(server)}".encode()
        fh.seek(start + found.start(1))
        fh.truncate()
        fh.write(inner + (b", " if inner.strip() else b"") + entry + b"}}\n")
    return True


def _base(options: KubectlOptions) -> list[str]:
    found = shutil.which(options.kubectl)
    if found is None:
        raise InputError(
            options.kubectl,
            "not found on PATH: install kubectl (or run fleetaudit where it is), or export "
            "the snapshot yourself and name its file",
        )
    base = [found]
    if options.context:
        base.append(f"--context={options.context}")
    if options.kubeconfig:
        base.append(f"--kubeconfig={options.kubeconfig}")
    base.append(f"--request-timeout={options.request_timeout}")
    return base


def _shown(args: list[str]) -> str:
    """A kubectl command as an error names it (the program's name, not its path)."""
    return " ".join(["kubectl", *args[1:]])


def _run(args: list[str], options: KubectlOptions, out: Path | None = None,
         listing: bool = False) -> str:  # fmt: skip
    """Run kubectl; its stdout (or, with ``out``, into that file). A failure is one line."""
    stdout = out.open("wb") if out is not None else subprocess.PIPE
    try:
        with subprocess.Popen(args, stdout=stdout, stderr=subprocess.PIPE,  # noqa: S603
                              stdin=subprocess.DEVNULL, start_new_session=True) as proc:  # fmt: skip
            try:
                output, errors = proc.communicate(timeout=options.timeout_s)
            except subprocess.TimeoutExpired:
                _stop(proc)
                raise InputError(
                    _shown(args), f"timed out after {options.timeout_s:g} s and was stopped"
                ) from None
            except BaseException:  # Ctrl-C: kubectl stops with the call
                _stop(proc)
                raise
    finally:
        if out is not None and not isinstance(stdout, int):
            stdout.close()
    text = (errors or b"").decode("utf-8", "replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if proc.returncode != 0:
        said = output.decode("utf-8", "replace") if isinstance(output, bytes) else ""
        if out is not None:
            with out.open("rb") as fh:
                said = fh.read(4096).decode("utf-8", "replace")
        # api-resources lists what it can when an aggregated API is down (and exits 1)
        if listing and said.strip() and all("unable to retrieve" in line for line in lines):
            return said
        if "Please enter Username" in said or "Please enter Password" in said:
            raise InputError(_shown(args), "kubectl asked for a user name and password: give the "
                             "kubeconfig's user credentials (a token, a certificate or an "
                             "exec plugin); nothing can answer a prompt here")  # fmt: skip
        said_lines = [line for line in lines if not _KLOG.match(line)]  # its summary, not logs
        message = (said_lines or lines or [f"exited with status {proc.returncode}"])[0]
        raise InputError(_shown(args), message[:300])
    return output.decode("utf-8", "replace") if isinstance(output, bytes) else ""


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop kubectl and anything it started (its own process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _join(parts: list[Path], target: Path) -> None:
    """One kubectl List of the items of several (written item by item; each part read once)."""
    with target.open("w", encoding="utf-8") as out:
        out.write('{"apiVersion": "v1", "kind": "List", "items": [')
        first = True
        for part in parts:
            with part.open("rb") as fh:
                doc = json.load(fh)
            for item in doc.get("items") or [] if isinstance(doc, dict) else []:
                out.write(("" if first else ",\n") + json.dumps(item))
                first = False
            part.unlink()
        out.write('], "metadata": {"resourceVersion": ""}}\n')
