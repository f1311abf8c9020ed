"""The small parsers every input format shares: hostlists, topology.conf, model names, priority maps."""

from __future__ import annotations

import pytest

from fleetaudit.core.errors import InputError
from fleetaudit.inputs.ingest.hostlist import HostlistError, expand_hostlist
from fleetaudit.inputs.ingest.labels import PriorityMap, canonical_model
from fleetaudit.inputs.ingest.topology_conf import (
    TopologyConfError,
    looks_like_topology_conf,
    parse_topology_conf,
)


@pytest.mark.parametrize(
    ("expression", "hosts"),
    [
        # the examples of Slurm's topology.conf man page
        ("tux[0-3,12,18-20]", "tux0 tux1 tux2 tux3 tux12 tux18 tux19 tux20"),
        ("s[0-2,4-8,12]", "s0 s1 s2 s4 s5 s6 s7 s8 s12"),
        ("gpu[001-004,010]", "gpu001 gpu002 gpu003 gpu004 gpu010"),
        ("gpu[001-002],cpu07", "gpu001 gpu002 cpu07"),
        ("rack[1-2]-n[01-02]", "rack1-n01 rack1-n02 rack2-n01 rack2-n02"),
        ("n[0-10/5]", "n0 n5 n10"),
        ("gpu[8-10]", "gpu8 gpu9 gpu10"),  # the width is the lower bound's
        ("single", "single"),
        (",a", "a"),  # empty items are skipped, as Slurm skips them
    ],
)
def test_expand_hostlist(expression: str, hosts: str) -> None:
    assert expand_hostlist(expression) == hosts.split()


@pytest.mark.parametrize(
    "expression", ["None assigned", "", "n[1-", "n[]", "n[3-1]", "n[a]", "n[1-2]],x", ", ,", "n[[1]]"]
)
def test_expand_hostlist_rejects(expression: str) -> None:
    with pytest.raises(HostlistError):
        expand_hostlist(expression)


def test_topology_conf_tree_and_dual_rail() -> None:
    conf = parse_topology_conf(
        [
            "# leaves",
            "SwitchName=leaf0 Nodes=gpu[001-002] LinkSpeed=100",
            "switchname=leaf1 nodes=gpu[003],gpu001",  # names are case-insensitive; gpu001 twice
            "SwitchName=spine Switches=leaf[0-1]",
        ]
    )
    assert conf.levels == {
        "gpu001": ("leaf0", "spine"),
        "gpu002": ("leaf0", "spine"),
        "gpu003": ("leaf1", "spine"),
    }
    assert conf.duplicates == ("gpu001",)
    assert conf.plugin == "tree"


def test_topology_conf_errors_name_the_line() -> None:
    with pytest.raises(TopologyConfError) as caught:
        parse_topology_conf(["SwitchName=s0 Nodes=n1", "Nodes=n2"])
    assert caught.value.line == 2
    with pytest.raises(TopologyConfError, match="bad range"):
        parse_topology_conf(["SwitchName=s0 Nodes=n[2-1]"])
    with pytest.raises(TopologyConfError, match="own ancestor"):
        parse_topology_conf(["SwitchName=a Nodes=n1 Switches=b", "SwitchName=b Switches=a"])


def test_looks_like_topology_conf() -> None:
    assert looks_like_topology_conf("\n# x\nBlockName=b1 Nodes=n[1-4]\n")
    # the block plugin's BlockSizes line may come first
    assert looks_like_topology_conf("BlockSizes=4,16\nBlockName=b1 Nodes=n[1-4]\n")
    assert not looks_like_topology_conf("node_id,switch_id\nn1,s1\n")


@pytest.mark.parametrize(
    ("raw", "model"),
    [
        ("NVIDIA-H100-80GB-HBM3", "H100 80GB HBM3"),  # GPU feature discovery
        ("NVIDIA H100 80GB HBM3", "H100 80GB HBM3"),  # DCGM modelName
        ("nvidia_h100_80gb_hbm3", "H100 80GB HBM3"),  # Slurm GRES type
        ("Tesla-T4-SHARED", "T4"),  # time-slicing rename
        ("A100-SXM4-40GB-MIG-1g.5gb", "A100 SXM4 40GB"),  # MIG single strategy
        ("Tesla-V100-SXM2-16GB", "V100 SXM2 16GB"),  # ACK
        ("NVIDIA Tesla V100", "V100"),
        ("h20", "H20"),
        ("", None),
        (None, None),
    ],
)
def test_canonical_model(raw: str | None, model: str | None) -> None:
    assert canonical_model(raw) == model


def test_priority_map_parse_and_lookup() -> None:
    mapping = PriorityMap.parse(["# comment", "Scavenger = low", "prod,HIGH", ""])
    assert mapping.lookup("normal", "SCAVENGER") == "low"
    assert mapping.lookup(None, "prod") == "high"
    assert mapping.lookup("other") is None


@pytest.mark.parametrize(("line", "reason"), [("a = medium", "high or low"), ("just-a-name", "NAME")])
def test_priority_map_errors(line: str, reason: str) -> None:
    with pytest.raises(InputError, match=reason) as caught:
        PriorityMap.parse(["ok = low", line], "map.txt")
    assert caught.value.row == 2
    assert caught.value.file == "map.txt"
