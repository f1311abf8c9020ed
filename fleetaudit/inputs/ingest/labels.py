"""Free-text labels of real exports mapped onto the native vocabulary, one way for every format.

Every adapter (kubectl, Slurm, DCGM, the ASI release) meets the same two problems:

- **GPU model names** are spelled per source: ``NVIDIA-H100-80GB-HBM3`` (GPU feature
  discovery), ``NVIDIA H100 80GB HBM3`` (DCGM), ``nvidia_h100_80gb_hbm3`` (Slurm GRES),
  ``Tesla-T4-SHARED`` (time-slicing), ``A100-SXM4-40GB-MIG-1g.5gb`` (MIG single).
  :func:`canonical_model` gives one name per product, so the same GPU is one model
  whichever export it came from.
- **Priorities** are site-specific (Kubernetes priority classes and values, Slurm QOS
  and partitions). A :class:`PriorityMap` read from ``--priority-map FILE`` says which
  are ``high`` and which ``low``; what it does not name falls back to the adapter's
  documented default.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from fleetaudit.core.errors import InputError
from fleetaudit.inputs.ingest.sources import unreadable

PRIORITIES = ("high", "low")

_SHARE_SUFFIX = re.compile(r"[-_ ](SHARED|MIG[-_ ].*)$", re.IGNORECASE)
_VENDOR = re.compile(r"^(NVIDIA|TESLA)\s+")


def canonical_model(raw: str | None) -> str | None:
    """One model name per GPU product, whichever export spelled it.

    Upper case, ``-``/``_``/space runs become one space, a share or MIG suffix
    (``-SHARED``, ``-MIG-1g.5gb``) and a leading ``NVIDIA``/``Tesla`` are cut.
    An empty value stays ``None``.

    >>> canonical_model("NVIDIA-H100-80GB-HBM3")
    'H100 80GB HBM3'
    >>> canonical_model("nvidia_h100_80gb_hbm3")
    'H100 80GB HBM3'
    >>> canonical_model("Tesla-T4-SHARED")
    'T4'
    >>> canonical_model("A100-SXM4-40GB-MIG-1g.5gb")
    'A100 SXM4 40GB'
    >>> canonical_model("  ") is None
    True
    """
    if raw is None:
        return None
    text = _SHARE_SUFFIX.sub("", raw.strip())
    text = re.sub(r"[-_\s]+", " ", text).strip().upper()
    while True:  # "NVIDIA Tesla V100" loses both
        shorter = _VENDOR.sub("", text)
        if shorter == text:
            break
        text = shorter
    return text or None


@dataclass(frozen=True)
class PriorityMap:
    """Site names (priority classes, values, QOS, partitions) to ``high`` or ``low``.

    Keys compare case-insensitively. :meth:`lookup` takes the candidates of one
    object in precedence order and returns the first mapped one's priority.
    """

    entries: Mapping[str, str] = field(default_factory=dict)
    source: str = ""

    def lookup(self, *candidates: object) -> str | None:
        """The priority of the first candidate the map names, or ``None``.

        >>> PriorityMap({"scavenger": "low"}).lookup(None, "Scavenger")
        'low'
        >>> PriorityMap({}).lookup("normal") is None
        True
        """
        for candidate in candidates:
            if candidate is None:
                continue
            found = self.entries.get(str(candidate).strip().lower())
            if found is not None:
                return found
        return None

    @classmethod
    def parse(cls, lines: Iterable[str], source: str = "--priority-map") -> PriorityMap:
        """Read ``NAME = high|low`` (or ``NAME,high``) lines; ``#`` starts a comment.

        >>> PriorityMap.parse(["# site classes", "batch-low = low", "prod,HIGH"]).entries
        {'batch-low': 'low', 'prod': 'high'}
        """
        entries: dict[str, str] = {}
        for number, line in enumerate(lines, 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            parts = re.split(r"\s*[=,]\s*", text)
            if len(parts) != 2 or not parts[0]:
                raise InputError(
                    source, f"expected NAME = high|low, got {line.strip()!r}", row=number
                )
            name, priority = parts[0].lower(), parts[1].lower()
            if priority not in PRIORITIES:
                raise InputError(
                    source,
                    f"priority must be high or low, got {parts[1]!r}",
                    row=number,
                )
            entries[name] = priority
        return cls(entries, source)

    @classmethod
    def read(cls, path: Path | None) -> PriorityMap:
        """The map in ``path``; an empty map without one."""
        if path is None:
            return cls()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise unreadable(path, exc, "cannot read the priority map") from exc
        return cls.parse(text.splitlines(), str(path))


ASI_BUCKETS = ("A10", "L20", "H20", "A100", "H800", "XPU-A", "XPU-C")
"""The public GPU model buckets of the ASI release (``gpu_spec_public``)."""


def asi_bucket(raw: str | None) -> str | None:
    """The ASI release's model bucket of a raw ``gpu_spec_public``.

    The longest bucket ``b`` with ``raw == b`` or ``raw`` starting ``b + "-"``
    wins; a value in no bucket is kept as written (trimmed). Unlike the paper's
    scripts (cut at the first ``-``), a suffixed ``XPU-A-...`` stays ``XPU-A``.

    >>> asi_bucket("H20-96G"), asi_bucket("XPU-A"), asi_bucket("A100-SXM4-80GB")
    ('H20', 'XPU-A', 'A100')
    >>> asi_bucket("XPU-A-2"), asi_bucket("A10"), asi_bucket("MI300X")
    ('XPU-A', 'A10', 'MI300X')
    >>> asi_bucket("  ") is None
    True
    """
    if raw is None or not raw.strip():
        return None
    text = raw.strip()
    for bucket in sorted(ASI_BUCKETS, key=len, reverse=True):
        if text == bucket or text.startswith(bucket + "-"):
            return bucket
    return text


# Names of preemptible work (QOS, partitions, priority classes) where --priority-map is silent
LOW_NAMES = frozenset(
    [
        "scavenger",
        "scavenge",
        "preempt",
        "preemptible",
        "preemptable",
        "standby",
        "spot",
        "low",
        "lowprio",
        "low_priority",
        "besteffort",
        "best_effort",
        "opportunistic",
    ]
)


def default_priority(*names: object) -> str:
    """The priority of work the map does not name, for every format: ``low`` when one of
    its names (QOS, partition, priority class) is a preemptible name, else ``high`` (work
    of unknown importance is never counted as reclaimable).

    >>> default_priority("Spot"), default_priority(None, "low-priority"), default_priority("prod")
    ('low', 'low', 'high')
    """
    for name in names:
        if isinstance(name, str) and name.strip().lower().replace("-", "_") in LOW_NAMES:
            return "low"
    return "high"
