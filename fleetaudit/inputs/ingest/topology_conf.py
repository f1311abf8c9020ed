"""Slurm's ``topology.conf``: which switches (or blocks) hold each node, leaf first.

Two plugins write it:

- topology/tree: ``SwitchName=s0 Nodes=gpu[001-032]`` declares a leaf switch and its
  nodes; ``SwitchName=s10 Switches=s[0-3]`` a switch above other switches.
- topology/block: ``BlockName=b1 Nodes=gpu[001-032]``, with ``BlockSizes=...``.

Parameter names are case-insensitive, ``#`` starts a comment, values are hostlist
expressions. ``scontrol show topology`` prints the same lines (with ``Level=`` and
``LinkSpeed=``), where a switch above others lists its subtree's nodes too: the nodes
of a switch that has ``Switches=`` are its children's, not its own. A node gets the chain of switches from its leaf up to the top
(``("s0", "s10")``); under the block plugin its block alone (``("b1",)``). A node
listed under two leaves (dual rail) keeps the first and is reported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from fleetaudit.inputs.ingest.hostlist import HostlistError, expand_hostlist

_PARAM = re.compile(r"(\w+)=(\S+)")


class TopologyConfError(ValueError):
    """A line of topology.conf that cannot be read; ``line`` is 1-based."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(reason)
        self.line = line
        self.reason = reason


@dataclass(frozen=True)
class TopologyConf:
    """The nodes of a topology.conf and their switch chains, leaf first."""

    levels: dict[str, tuple[str, ...]]
    duplicates: tuple[str, ...] = ()  # nodes listed under more than one leaf (first kept)
    plugin: str = "tree"  # "tree" or "block"


def looks_like_topology_conf(text: str) -> bool:
    """Whether ``text`` reads as a topology.conf: a SwitchName=, BlockName= or BlockSizes= line first.

    >>> looks_like_topology_conf("# fabric\\nSwitchName=s0 Nodes=n[1-2]\\n")
    True
    >>> looks_like_topology_conf("BlockSizes=4,16\\nBlockName=b1 Nodes=n[1-4]\\n")
    True
    >>> looks_like_topology_conf("node_id,switch_id\\n")
    False
    """
    for line in text.splitlines():
        stripped = line.split("#", 1)[0].strip()
        if stripped:
            return re.match(r"(?i)(switchname|blockname|blocksizes)=", stripped) is not None
    return False


def parse_topology_conf(lines: Iterable[str]) -> TopologyConf:
    """The switch chain of every node named in ``lines``.

    Raises:
        TopologyConfError: a line that is neither a switch, a block nor BlockSizes,
            a bad hostlist, or a switch that is its own ancestor.

    >>> conf = parse_topology_conf([
    ...     "SwitchName=s0 Nodes=gpu[01-02]",
    ...     "SwitchName=s1 Nodes=gpu03",
    ...     "SwitchName=top Switches=s[0-1]  # spine",
    ... ])
    >>> conf.levels["gpu02"], conf.levels["gpu03"]
    (('s0', 'top'), ('s1', 'top'))
    >>> parse_topology_conf(["BlockName=b1 Nodes=n[1-2]", "BlockSizes=2,4"]).levels
    {'n1': ('b1',), 'n2': ('b1',)}
    >>> parse_topology_conf([  # scontrol show topology
    ...     "SwitchName=s0 Level=0 LinkSpeed=1 Nodes=n1",
    ...     "SwitchName=top Level=1 LinkSpeed=1 Nodes=n1 Switches=s0",
    ... ]).levels
    {'n1': ('s0', 'top')}
    """
    leaf_of: dict[str, str] = {}
    duplicates: list[str] = []
    parent_of: dict[str, str] = {}
    plugin = "tree"
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        params = {key.lower(): value for key, value in _PARAM.findall(text)}
        name = params.get("switchname") or params.get("blockname")
        if name is None:
            if "blocksizes" in params:
                continue
            raise TopologyConfError(number, f"expected SwitchName= or BlockName=, got {text!r}")
        if "blockname" in params:
            plugin = "block"
        try:
            if "nodes" in params and "switches" not in params:
                for node in expand_hostlist(params["nodes"]):
                    if node in leaf_of:
                        duplicates.append(node)
                    else:
                        leaf_of[node] = name
            if "switches" in params:
                for child in expand_hostlist(params["switches"]):
                    parent_of.setdefault(child, name)
        except HostlistError as exc:
            raise TopologyConfError(number, str(exc)) from exc
    for switch in parent_of:  # a cycle is an error whether or not a node hangs below it
        seen = [switch]
        while seen[-1] in parent_of:
            parent = parent_of[seen[-1]]
            if parent in seen:
                raise TopologyConfError(0, f"switch {parent!r} is its own ancestor")
            seen.append(parent)
    levels: dict[str, tuple[str, ...]] = {}
    for node, leaf in leaf_of.items():
        chain = [leaf]
        while chain[-1] in parent_of:
            parent = parent_of[chain[-1]]
            if parent in chain:
                raise TopologyConfError(0, f"switch {parent!r} is its own ancestor")
            chain.append(parent)
        levels[node] = tuple(chain)
    return TopologyConf(levels, tuple(dict.fromkeys(duplicates)), plugin)
