"""Which cluster a kubectl document comes from, and a call that mixes clusters.

kubectl's List carries no cluster: ``kubectl get nodes,pods -A -o json`` wraps the objects
in a ``v1`` ``List`` whose ``metadata`` is empty (``{"resourceVersion": ""}``; older
versions add an empty ``selfLink``), and objects carry no server either (their
``selfLink``, gone since Kubernetes 1.20, was a path without a host). What does name the
cluster, where present:

- ``metadata["fleetaudit.io/server"]`` of the List: the API server of the kubeconfig,
  which ``ingest --kubectl`` records in the snapshot it takes (and ``--keep`` keeps);
- the ``kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint`` annotation of the
  API server's pods (kubeadm clusters list them in kube-system), one per control-plane node;
- node labels and annotations that name the cluster: ``alpha.eksctl.io/cluster-name``
  (eksctl), ``kubernetes.azure.com/cluster`` (AKS: the node resource group), Cluster API's
  ``cluster.x-k8s.io/cluster-namespace``/``cluster-name`` annotations;
- the node's ``spec.providerID``: the GCE project (``gce://PROJECT/ZONE/NAME``) and the
  Azure subscription and resource group (``azure:///subscriptions/S/resourceGroups/RG/...``).
  An AWS one (``aws:///ZONE/INSTANCE``) names no account, so it says nothing.

**The rule.** Documents are grouped by what they say of their cluster. Two groups are of
different clusters when they **disagree** (some kind of identity both state has no value
in common: two API servers, two eksctl cluster names) **and share no node**: no node name
that one lists (or that one of its bound pods names) is in the other. Either alone is no
proof: an autoscaler can replace every node between two snapshots of one cluster, and one
cluster can be reached at two server addresses. A document saying nothing of its cluster,
or without any node, is never refused. One document lists two clusters when its nodes
carry two names of the cluster itself (eksctl, AKS, Cluster API: a List joined from two
clusters' by hand); several API server endpoints, GCE projects or Azure resource groups
among one document's objects can be one cluster's and are not taken as two.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

SERVER_KEY = "fleetaudit.io/server"
"""The List ``metadata`` key under which ``ingest --kubectl`` records the API server."""
KUBEADM_ENDPOINT = "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"
NODE_LABELS = {
    "alpha.eksctl.io/cluster-name": "eksctl cluster",
    "kubernetes.azure.com/cluster": "AKS cluster",
}
CAPI_NAME, CAPI_NAMESPACE = "cluster.x-k8s.io/cluster-name", "cluster.x-k8s.io/cluster-namespace"
# identities that name the cluster itself: the nodes of one cluster all carry the same one
NAMED = frozenset({*NODE_LABELS.values(), "Cluster API cluster"})

Mix = tuple[str, str, str, str, str]
"""Documents of two clusters: (file, other file, kind of identity, its value(s) in the file,
in the other); the file and the other are one where one document lists both."""


_MAPPING = (dict, Mapping)  # a JSON object is a dict: checked first, at once


def _text(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _meta(item: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    meta = item.get("metadata")
    found = meta.get(key) if isinstance(meta, _MAPPING) else None
    return found if isinstance(found, _MAPPING) else {}


def provider_account(provider_id: object) -> tuple[str, str] | None:
    """The cluster-wide part of a node's ``spec.providerID``, where it has one.

    >>> provider_account("gce://my-project/us-central1-a/gke-a-pool-1")
    ('GCE project', 'my-project')
    >>> provider_account("azure:///subscriptions/S1/resourceGroups/MC_rg_aks_westeurope/"
    ...                  "providers/Microsoft.Compute/virtualMachineScaleSets/x/virtualMachines/0")
    ('Azure resource group', 's1/mc_rg_aks_westeurope')
    >>> provider_account("aws:///us-east-1a/i-0123456789abcdef0") is None
    True
    """
    text = _text(provider_id)
    if text is None or "://" not in text:
        return None
    scheme, rest = text.split("://", 1)
    parts = [p for p in rest.split("/") if p]
    if scheme == "gce" and len(parts) >= 3:
        return "GCE project", parts[0]
    if scheme == "azure":
        low = [p.lower() for p in parts]  # Azure names are case-insensitive (AKS lower-cases)
        if "subscriptions" in low and "resourcegroups" in low:
            s, g = low.index("subscriptions") + 1, low.index("resourcegroups") + 1
            if s < len(low) and g < len(low):
                return "Azure resource group", f"{low[s]}/{low[g]}"
    return None


def node_identity(node: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """What a Node says of its cluster: (kind, value) pairs."""
    labels, annotations = _meta(node, "labels"), _meta(node, "annotations")
    for key, kind in NODE_LABELS.items():
        if (value := _text(labels.get(key))) is not None:
            yield kind, value
    if (name := _text(annotations.get(CAPI_NAME))) is not None:
        yield "Cluster API cluster", f"{_text(annotations.get(CAPI_NAMESPACE)) or ''}/{name}"
    spec = node.get("spec")
    if isinstance(spec, Mapping) and (account := provider_account(spec.get("providerID"))):
        yield account


def pod_identity(pod: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """What a Pod says of its cluster: a kubeadm API server's advertised endpoint."""
    if (endpoint := _text(_meta(pod, "annotations").get(KUBEADM_ENDPOINT))) is not None:
        yield "kubeadm API server", endpoint


@dataclass
class Origin:
    """What one document says of its cluster, gathered object by object."""

    file: str
    nodes: set[str] = field(default_factory=set)  # listed, or named by a bound pod
    ids: dict[str, set[str]] = field(default_factory=dict)
    named: dict[str, dict[str, str]] = field(default_factory=dict)  # kind -> value -> a node

    def see(self, item: Mapping[str, Any]) -> None:
        kind = item.get("kind")
        if kind not in ("Node", "Pod"):
            return
        # the node: a Node's own name, the one a bound Pod runs on
        part, key = ("metadata", "name") if kind == "Node" else ("spec", "nodeName")
        where = item.get(part)
        name = _text(where.get(key)) if isinstance(where, _MAPPING) else None
        if name is not None:
            self.nodes.add(name)
        if kind == "Pod" and not _meta(item, "annotations").get(KUBEADM_ENDPOINT):
            return  # most pods: nothing more to say
        for what, value in (node_identity if kind == "Node" else pod_identity)(item):
            self.ids.setdefault(what, set()).add(value)
            if what in NAMED and name is not None:
                self.named.setdefault(what, {}).setdefault(value, name)

    def split(self) -> Mix | None:
        """Nodes of two clusters in this one document: two names of one kind that names
        the cluster (each node carries one, so their nodes have none in common)."""
        for what in sorted(self.named):
            if len(seen := self.named[what]) > 1:
                (one, a), (two, b) = sorted(seen.items())[:2]
                return self.file, self.file, what, f"{two} (node {b})", f"{one} (node {a})"
        return None

    def see_list(self, top: Mapping[str, Any]) -> None:
        """The List's own fields: the API server the collector recorded."""
        meta = top.get("metadata")
        if isinstance(meta, Mapping) and (server := _text(meta.get(SERVER_KEY))) is not None:
            self.ids.setdefault("API server", set()).add(server)

    def key(self) -> frozenset[tuple[str, frozenset[str]]]:
        return frozenset((k, frozenset(v)) for k, v in self.ids.items())


@dataclass
class _Group:
    first: str  # the first file with these identities
    ids: dict[str, set[str]]
    nodes: set[str]


def _disagree(a: Mapping[str, set[str]], b: Mapping[str, set[str]]) -> str | None:
    """The first kind of identity both state without a value in common."""
    return next((k for k in sorted(a) if k in b and not a[k] & b[k]), None)


@dataclass
class Clusters:
    """The documents of one call, grouped by what they say of their cluster (in file order;
    a document's node names are folded into its group, so memory is bounded by the groups)."""

    groups: dict[frozenset[tuple[str, frozenset[str]]], _Group] = field(default_factory=dict)
    of_file: dict[str, frozenset[tuple[str, frozenset[str]]]] = field(default_factory=dict)
    split: Mix | None = None  # the first document that lists nodes of two clusters

    def add(self, origin: Origin) -> None:
        self.split = self.split or origin.split()
        if not origin.nodes:
            return  # no node: nothing to tell two clusters apart by
        key = origin.key()
        group = self.groups.setdefault(key, _Group(origin.file, origin.ids, set()))
        group.nodes |= origin.nodes
        self.of_file[origin.file] = key

    def mixed(self) -> Mix | None:
        """A document listing two clusters, or two documents of different clusters."""
        if self.split is not None:
            return self.split
        keys = list(self.groups)
        for i, ka in enumerate(keys):
            a = self.groups[ka]
            for kb in keys[i + 1 :]:
                b = self.groups[kb]
                what = _disagree(a.ids, b.ids)
                if what is not None and not a.nodes & b.nodes:
                    return b.first, a.first, what, _shown(b.ids[what]), _shown(a.ids[what])
        return None

    def apart(self, files: list[str]) -> bool:
        """Whether every two of ``files`` are documents of different clusters."""
        keys = [self.of_file.get(f) for f in files]
        if any(k is None for k in keys) or len(set(keys)) < len(keys):
            return False
        for i, ka in enumerate(keys):
            for kb in keys[i + 1 :]:
                a, b = self.groups[ka], self.groups[kb]  # type: ignore[index]
                if _disagree(a.ids, b.ids) is None or a.nodes & b.nodes:
                    return False
        return True


def _shown(values: set[str]) -> str:
    return ", ".join(sorted(values)[:3]) + (", ..." if len(values) > 3 else "")


def refusal(found: Mix) -> tuple[str, str]:
    """The file and one-line reason of a call refused for mixing clusters."""
    file, other, what, here, there = found
    if file == other:
        return file, (
            f"lists nodes of more than one cluster ({what} {there}, {here}): nothing was "
            "written; --allow-mixed loads them together anyway"
        )
    return file, (
        f"not the cluster of {other} ({what} {here} here, {there} there, and no node in "
        "common): nothing was written; --allow-mixed loads them together anyway"
    )


def mixed_note(found: Mix, together: bool) -> str:
    """The note of a call that loads documents of several clusters (``--allow-mixed``);
    ``together``: the two documents named are one snapshot."""
    file, other, what, here, there = found
    note = "--allow-mixed: loaded nodes of more than one cluster " + (
        f"({file}: {what} {there}, {here})" if file == other
        else f"({other}: {what} {there}; {file}: {here})"
    )  # fmt: skip
    if together:
        return note
    return note + (
        "; they are snapshots of different times, and a snapshot stands for every node and "
        "pod there is, so each takes the other cluster's as gone: give one moment's documents "
        "of all the clusters together, with --snapshot-time"
    )
