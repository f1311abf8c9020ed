"""A real Prometheus (Debian's ``prometheus`` package) and a dcgm-exporter stand-in.

Used by tests/test_prometheus_server.py (marker ``realprom``), by
``benchmarks/bench_prometheus_pull.py`` and by ``.ci/cron-line``. Nothing here runs as a
service: every server binds 127.0.0.1 on a port free at run time, keeps its config and
storage in a folder of its own, and is stopped by its PID.

- :class:`StandIn` serves one dcgm-exporter ``/metrics`` per host, each on its own port,
  in the text dcgm-exporter writes (its Go template: ``# HELP``/``# TYPE``, the labels
  ``gpu``, ``UUID``, ``pci_bus_id``, ``device``, ``modelName``, MIG's ``GPU_I_PROFILE``
  and ``GPU_I_ID``, the host label, ``DCGM_FI_DRIVER_VERSION``, then ``container``,
  ``namespace`` and ``pod`` only while a pod holds the GPU; ``%f`` for double fields,
  integers for int fields, the int64 blank 9223372036854775794 where a field has no
  reading), with values that are known functions of time (:class:`Host`).
- :func:`write_history` writes days of the same hosts as OpenMetrics for ``promtool tsdb
  create-blocks-from openmetrics`` (:func:`backfill`).
- :class:`Prometheus` runs the server with its own config (several scrape jobs of the
  same targets make an HA pair) and storage folder.

``python -m tests.promserver --help`` runs a server with a stand-in until killed (for
.ci/cron-line).
"""

from __future__ import annotations

import argparse
import base64
import bisect
import math
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO

BLANK_INT64 = 9223372036854775794  # DCGM_FT_INT64_NOT_SUPPORTED, as older exporters print it
DRIVER = "580.95.05"

# (name, type, help, double?) in dcgm-exporter's order of etc/default-counters.csv
FIELDS: dict[str, tuple[str, str, bool]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %).", False),
    "DCGM_FI_DEV_XID_ERRORS": ("gauge", "Value of the last XID error encountered.", False),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "Framebuffer memory free (in MiB).", False),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB).", False),
    "DCGM_FI_DEV_FB_RESERVED": ("gauge", "Framebuffer memory reserved (in MiB).", False),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("gauge", "Whether remapping of rows has failed", False),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gauge", "Ratio of time the graphics engine is active.", True),
    "DCGM_FI_PROF_SM_ACTIVE": (
        "gauge", "The ratio of cycles an SM has at least 1 warp assigned.", True
    ),
}  # fmt: skip
XID_TEXT = {0: "No Error", 13: "Graphics Engine Exception", 79: "GPU has fallen off the bus"}
FB_TOTAL = {"H100": 81559, "A100": 81920, "V100": 32768}
MODEL_NAMES = {
    "H100": "NVIDIA H100 80GB HBM3",
    "A100": "NVIDIA A100 80GB PCIe",
    "V100": "Tesla V100-SXM2-32GB",
}


@dataclass(frozen=True)
class Hold:
    """A pod holding a GPU (or one MIG instance) over [start, end) seconds of the
    schedule, with its SM activity (GPU_UTIL is 100 x, GR_ENGINE_ACTIVE the same)."""

    pod: str
    namespace: str
    sm: float
    start: float = -math.inf
    end: float = math.inf
    container: str = "main"


@dataclass(frozen=True)
class Gpu:
    """One GPU: who holds it when (several at once: a time-sliced GPU, each pod reported
    with the GPU's value), or MIG instances (profile, instance id, their holds)."""

    index: int
    holds: tuple[Hold, ...] = ()
    mig: tuple[tuple[str, int, tuple[Hold, ...]], ...] = ()
    nan: tuple[tuple[float, float], ...] = ()  # SM_ACTIVE reads NaN then
    blank: tuple[tuple[float, float], ...] = ()  # GPU_UTIL reads the int64 blank then
    xid: tuple[tuple[float, int], ...] = ()  # from time t on, the last XID is code


@dataclass(frozen=True)
class Host:
    """One node's exporter: its GPUs, the host label it writes (``hostname``, or
    ``Hostname`` before May 2026), the activity fields it exports and when it was down."""

    name: str
    model: str
    gpus: tuple[Gpu, ...]
    host_label: str = "hostname"
    activity: tuple[str, ...] = ("DCGM_FI_PROF_SM_ACTIVE",)
    outages: tuple[tuple[float, float], ...] = ()

    def down(self, t: float) -> bool:
        return any(a <= t < b for a, b in self.outages)

    def changes(self) -> list[float]:
        """The times at which anything the exporter writes changes (its scrape is the
        same between two of them)."""
        times: set[float] = set()
        for gpu in self.gpus:
            holds = [*gpu.holds, *(h for _, _, hs in gpu.mig for h in hs)]
            times |= {t for h in holds for t in (h.start, h.end)}
            times |= {t for a, b in (*gpu.nan, *gpu.blank) for t in (a, b)}
            times |= {t for t, _ in gpu.xid}
        return sorted(t for t in times if math.isfinite(t))


def _holding(holds: tuple[Hold, ...], t: float) -> list[Hold]:
    return [h for h in holds if h.start <= t < h.end]


def _in(spans: tuple[tuple[float, float], ...], t: float) -> bool:
    return any(a <= t < b for a, b in spans)


def _xid(gpu: Gpu, t: float) -> int:
    code = 0
    for since, value in gpu.xid:
        if t >= since:
            code = value
    return code


def samples(host: Host, t: float) -> Iterator[tuple[str, dict[str, str], float]]:
    """The exporter's samples at schedule time ``t``: (field, labels in its order, value)."""
    uuid = f"GPU-{zlib.crc32(host.name.encode()):08x}"
    for gpu in host.gpus:
        base = {
            "gpu": str(gpu.index),
            "UUID": f"{uuid}-{gpu.index:04d}",
            "pci_bus_id": f"00000000:{0x18 + gpu.index:02X}:00.0",
            "device": f"nvidia{gpu.index}",
            "modelName": MODEL_NAMES[host.model],
        }
        total = FB_TOTAL[host.model]
        # (MIG labels, pods holding it, SM activity, framebuffer size)
        instances: list[tuple[dict[str, str], list[Hold], float, int]] = []
        for profile, gi, holds in gpu.mig:
            held = _holding(holds, t)
            slices = int(profile.split("g", 1)[0])
            instances.append(
                ({"GPU_I_PROFILE": profile, "GPU_I_ID": str(gi)}, held,
                 held[0].sm if held else 0.0, total * slices // 7)
            )  # fmt: skip
        if not gpu.mig:
            held = _holding(gpu.holds, t)
            instances.append(({}, held, held[0].sm if held else 0.0, total))
        device = {**base, host.host_label: host.name, "DCGM_FI_DRIVER_VERSION": DRIVER}
        for mig, held, sm, size in instances:
            common = {**base, **mig, host.host_label: host.name, "DCGM_FI_DRIVER_VERSION": DRIVER}
            # a pod's labels only while it holds the GPU; one series per pod of a shared GPU
            pods = [
                {"container": h.container, "namespace": h.namespace, "pod": h.pod} for h in held
            ] or [{}]
            fb_used = size // 2 if held else 300 * size // total
            for pod in pods:
                labels = {**common, **pod}
                for name in host.activity:
                    if name == "DCGM_FI_DEV_GPU_UTIL":
                        if gpu.mig:
                            continue  # not available for MIG
                        value = float(BLANK_INT64) if _in(gpu.blank, t) else round(100 * sm)
                        yield name, labels, value
                    elif name == "DCGM_FI_PROF_SM_ACTIVE" and _in(gpu.nan, t):
                        yield name, labels, math.nan
                    else:
                        yield name, labels, sm
                yield "DCGM_FI_DEV_FB_USED", labels, fb_used
                yield "DCGM_FI_DEV_FB_FREE", labels, size - fb_used - 500
                yield "DCGM_FI_DEV_FB_RESERVED", labels, 500
        # device fields: once per GPU (a MIG GPU's pods hold its instances, not the GPU)
        code = _xid(gpu, t)
        pods = [] if gpu.mig else [
            {"container": h.container, "namespace": h.namespace, "pod": h.pod}
            for h in _holding(gpu.holds, t)
        ]  # fmt: skip
        attributes = {"err_code": str(code), "err_msg": XID_TEXT.get(code, "Unknown Error")}
        for pod in pods or [{}]:
            yield (
                "DCGM_FI_DEV_XID_ERRORS",
                {**device, **dict(sorted({**pod, **attributes}.items()))},
                code,
            )
            yield "DCGM_FI_DEV_ROW_REMAP_FAILURE", {**device, **pod}, 0


def _value(name: str, value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if FIELDS[name][2]:
        return f"{value:f}"
    return str(int(value))


def _labels(labels: dict[str, str]) -> str:
    def quoted(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return "{" + ",".join(f'{k}="{quoted(v)}"' for k, v in labels.items()) + "}"


def scrape_text(host: Host, t: float) -> str:
    """``/metrics`` of the host's exporter at schedule time ``t``, as dcgm-exporter writes it."""
    by_field: dict[str, list[str]] = {}
    for name, labels, value in samples(host, t):
        by_field.setdefault(name, []).append(f"{name}{_labels(labels)} {_value(name, value)}")
    lines: list[str] = []
    for name, (kind, help_text, _) in FIELDS.items():
        if name in by_field:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *by_field[name]]
    return "\n".join(lines) + "\n"


# -- the stand-in exporters ---------------------------------------------------------------------


class StandIn:
    """One HTTP exporter per host on 127.0.0.1, serving its scrape at the time asked.

    Schedule time is ``time.time() - epoch``: a host's outage [a, b) answers 503 then."""

    def __init__(self, hosts: list[Host], epoch: float) -> None:
        self.hosts = hosts
        self.epoch = epoch
        self.servers: list[ThreadingHTTPServer] = []
        self.threads: list[threading.Thread] = []
        self.ports: dict[str, int] = {}

    def start(self) -> StandIn:
        for host in self.hosts:
            server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(host, self.epoch))
            server.daemon_threads = True
            thread = threading.Thread(
                target=server.serve_forever, name=f"dcgm-{host.name}", daemon=True
            )
            thread.start()
            self.servers.append(server)
            self.threads.append(thread)
            self.ports[host.name] = server.server_address[1]
        return self

    def targets(self) -> list[str]:
        return [f"127.0.0.1:{self.ports[h.name]}" for h in self.hosts]

    def stop(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()
        for thread in self.threads:
            thread.join(timeout=5)

    def __enter__(self) -> StandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _handler(host: Host, epoch: float) -> type[BaseHTTPRequestHandler]:
    changes = host.changes()
    rendered: dict[int, bytes] = {}  # the scrape between two changes, written once

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            t = time.time() - epoch
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            if host.down(t):
                self.send_error(503, "exporter down")
                return
            segment = bisect.bisect_right(changes, t)
            body = rendered.get(segment)
            if body is None:
                body = rendered[segment] = scrape_text(host, t).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the scrape timed out on a busy machine: a missing sample, as in life

        def log_message(self, *args: object) -> None:  # quiet
            pass

    return Handler


# -- history for promtool's backfill ------------------------------------------------------------


def write_history(
    out: IO[str],
    hosts: list[Host],
    epoch: float,
    start: float,
    end: float,
    every: float,
    instance: Callable[[Host], str],
    job: str,
    fields: tuple[str, ...] | None = None,
) -> int:
    """Samples of schedule times [start, end) every ``every`` seconds, as the server would
    have scraped them (plus ``instance`` and ``job``), in OpenMetrics for promtool; returns
    the samples written. Times are epoch seconds ``epoch + t``."""
    steps = math.ceil((end - start) / every)
    written = 0
    for name, (kind, help_text, _) in FIELDS.items():
        if fields is not None and name not in fields:
            continue
        header = f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n"
        for host in hosts:  # one host's series at a time, each whole (OpenMetrics)
            extra = {"instance": instance(host), "job": job}
            series: dict[str, list[tuple[float, float]]] = {}
            for i in range(steps):
                t = start + i * every
                if host.down(t):
                    continue
                for field_name, labels, value in samples(host, t):
                    if field_name == name:
                        key = _labels({**labels, **extra})
                        series.setdefault(key, []).append((epoch + t, value))
            if series and header:
                out.write(header)
                header = ""
            for key, points in series.items():
                for ts, value in points:
                    text = "NaN" if math.isnan(value) else repr(float(value))
                    out.write(f"{name}{key} {text} {ts:.3f}\n")
                    written += 1
    out.write("# EOF\n")
    return written


def backfill(openmetrics: Path, data: Path) -> None:
    """``promtool tsdb create-blocks-from openmetrics``: history blocks into ``data``."""
    subprocess.run(
        [
            "promtool",
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            "--quiet",
            str(openmetrics),
            str(data),
        ],
        check=True,
        capture_output=True,
        timeout=1800,
    )


# -- the server ---------------------------------------------------------------------------------


def missing() -> str | None:
    """Why the real server cannot run here (None: it can)."""
    for tool in ("prometheus", "promtool"):
        if shutil.which(tool) is None:
            return (
                f"{tool} is not installed (Debian: apt-get install prometheus; .ci/run installs it)"
            )
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Prometheus:
    """``prometheus`` on 127.0.0.1 with its own config and storage under ``folder``.

    ``jobs`` scrape the same targets each (two jobs: an HA pair's duplicate series)."""

    folder: Path
    targets: list[str]
    jobs: tuple[str, ...] = ("dcgm",)
    scrape_interval: str = "1s"
    extra: tuple[str, ...] = ()  # more flags (a --web.config.file for TLS and basic auth)
    port: int = 0
    scheme: str = "http"
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def start(
        self,
        timeout: float = 90.0,
        scheme: str = "http",
        ca_file: Path | None = None,
        auth: tuple[str, str] | None = None,
    ) -> Prometheus:
        """Start it and wait until it is ready (asked over ``scheme``, trusting ``ca_file``,
        with basic ``auth`` where its web config asks for them)."""
        self.scheme = scheme
        self.data.mkdir(parents=True, exist_ok=True)
        config = self.folder / "prometheus.yml"
        jobs = "".join(
            f"  - job_name: {job}\n    static_configs:\n      - targets: [{', '.join(self.targets)}]\n"
            for job in self.jobs
        )
        config.write_text(
            f"global:\n  scrape_interval: {self.scrape_interval}\n"
            f"  scrape_timeout: {self.scrape_interval}\n"
            + (f"scrape_configs:\n{jobs}" if self.targets else "scrape_configs: []\n")
        )
        self.port = self.port or free_port()
        log = open(self.folder / "prometheus.log", "wb")  # noqa: SIM115 (the child's)
        self.process = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={self.data}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=3650d",
                "--log.level=warn",
                *self.extra,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        context = ssl.create_default_context(cafile=str(ca_file)) if ca_file else None
        headers = {}
        if auth is not None:
            headers["Authorization"] = "Basic " + base64.b64encode(":".join(auth).encode()).decode()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    "prometheus exited: " + (self.folder / "prometheus.log").read_text()[-2000:]
                )
            try:
                ready = urllib.request.Request(self.url + "/-/ready", headers=headers)
                with urllib.request.urlopen(ready, timeout=2, context=context) as answer:
                    if answer.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"prometheus not ready within {timeout:.0f} s")

    def stop(self) -> None:
        """Stop the server by its PID (SIGTERM, then SIGKILL)."""
        if self.process is None or self.process.poll() is not None:
            return
        os.kill(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def __enter__(self) -> Prometheus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- a fleet to serve ---------------------------------------------------------------------------


def nodes_csv(hosts: list[Host]) -> str:
    rows = ["node_id,gpu_model,gpus,cpus,memory_gib,switch_id"]
    rows += [f"{h.name},{h.model},{len(h.gpus)},64,512,sw-{h.model.lower()}" for h in hosts]
    return "\n".join(rows) + "\n"


def main() -> None:
    """Serve the GPUs of ``--nodes`` (a native nodes table, CSV or Parquet: each GPU busy
    with a pod of its node at SM activity 0.5) from a stand-in scraped every 15 s by a
    Prometheus that holds ``--days`` of history backfilled, until SIGTERM; print the
    server's URL and the PID to stop (the stand-in and the server stop with it)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--nodes", type=Path, required=True)
    parser.add_argument("--days", type=float, default=2.0)
    parser.add_argument("--folder", type=Path, default=None)
    args = parser.parse_args()
    # SIGTERM waits for sigwait below, so that the server started meanwhile is stopped
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    import polars as pl

    read = pl.read_parquet if args.nodes.suffix == ".parquet" else pl.read_csv
    rows = read(args.nodes).select("node_id", "gpu_model", "gpus").iter_rows()
    hosts = [
        Host(
            str(node),
            "H100",
            tuple(Gpu(g, (Hold(f"{node}-pod", "fleet", 0.5),)) for g in range(int(gpus))),
        )
        for node, _, gpus in rows
        if gpus
    ]
    folder = args.folder or Path(tempfile.mkdtemp(prefix="fleetaudit-prom-"))
    folder.mkdir(parents=True, exist_ok=True)
    epoch = math.floor(time.time())
    stand_in = StandIn(hosts, epoch).start()
    server = Prometheus(folder, stand_in.targets(), scrape_interval="15s")
    try:
        history = folder / "history.om"
        ports = dict(zip((h.name for h in hosts), stand_in.targets(), strict=True))
        with open(history, "w") as out:
            write_history(
                out, hosts, epoch, -args.days * 86400, -60, 60, lambda h: ports[h.name],
                "dcgm", ("DCGM_FI_PROF_SM_ACTIVE",),
            )  # fmt: skip
        server.data.mkdir(parents=True, exist_ok=True)
        backfill(history, server.data)
        server.start()
        print(server.url, os.getpid(), flush=True)
        signal.sigwait({signal.SIGTERM, signal.SIGINT})
    finally:
        server.stop()
        stand_in.stop()


if __name__ == "__main__":
    main()
