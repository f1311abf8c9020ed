"""A stand-in ``kubectl`` for the tests of ``ingest --kubectl`` (the API server cannot run here).

It serves the kubectl JSON documents of the folder ``$STANDIN_KUBECTL_SERVE`` as a cluster
would, and follows kubectl's documented behaviour for what the collector uses:

- ``api-resources -o name``: the built-in resources, plus the CRDs named in
  ``$STANDIN_KUBECTL_CRDS`` (comma-separated, e.g. ``workloads.kueue.x-k8s.io``);
- ``get R1,R2 [-A | -n NS] -o json [--chunk-size=N]``: one List of the objects, in the
  order of the resources asked; a resource the cluster does not serve is
  ``error: the server doesn't have a resource type "workloads"`` (exit 1); without ``-A``
  or ``-n`` the namespaced ones are those of ``default``; pages of N objects (kubectl's
  default 500, 0 for none) are fetched one after another and printed as one List;
- ``config view --minify -o jsonpath={.clusters[0].cluster.server}``: the server of
  ``$STANDIN_KUBECTL_SERVER``; unset, kubectl's answer without a kubeconfig (in a pod):
  ``error: current-context must exist in order to minify`` (exit 1);
- the global flags ``--context``, ``--kubeconfig``, ``--request-timeout``.

``$STANDIN_KUBECTL_FAIL`` plays a failure: ``forbidden`` (RBAC: ``Error from server
(Forbidden): ...``, exit 1), ``unreachable`` (klog lines, then ``Unable to connect to the
server: ... i/o timeout``, exit 1), ``hang`` (never answers). Each call is appended to
``$STANDIN_KUBECTL_LOG`` as a JSON line (its arguments and the pages it fetched).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

BUILT_IN = {"nodes": "Node", "pods": "Pod", "namespaces": "Namespace", "services": "Service",
            "configmaps": "ConfigMap", "events": "Event", "deployments.apps": "Deployment"}  # fmt: skip
CRD_KINDS = {"workloads.kueue.x-k8s.io": "Workload", "podgroups.scheduling.volcano.sh": "PodGroup"}
NAMESPACED = {"Pod", "Workload", "PodGroup", "Service", "ConfigMap", "Event", "Deployment"}


def _objects() -> list[dict]:
    items: list[dict] = []
    for path in sorted(Path(os.environ["STANDIN_KUBECTL_SERVE"]).glob("*.json")):
        doc = json.loads(path.read_text())
        items.extend(doc.get("items", []) if doc.get("kind", "").endswith("List") else [doc])
    return items


def main(argv: list[str]) -> int:
    log = os.environ.get("STANDIN_KUBECTL_LOG")
    record: dict = {"argv": argv}
    fail = os.environ.get("STANDIN_KUBECTL_FAIL", "")
    crds = [c for c in os.environ.get("STANDIN_KUBECTL_CRDS", "").split(",") if c]
    flags = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in argv if a.startswith("--") and "=" in a}
    words = [a for a in argv if not a.startswith("--")]
    try:
        if fail == "hang":
            time.sleep(3600)
        if fail == "unreachable":
            sys.stderr.write(
                'E0301 10:00:00.000000   4242 memcache.go:265] "Unhandled Error" err="couldn\'t '
                'get current server API group list: Get \\"https://10.0.0.1:6443/api\\": dial tcp '
                '10.0.0.1:6443: i/o timeout"\n'
                "Unable to connect to the server: dial tcp 10.0.0.1:6443: i/o timeout\n"
            )
            return 1
        if words[:2] == ["config", "view"]:
            server = os.environ.get("STANDIN_KUBECTL_SERVER")
            if not server:
                sys.stderr.write("error: current-context must exist in order to minify\n")
                return 1
            sys.stdout.write(server)  # jsonpath prints no newline
            return 0
        if words[:1] == ["api-resources"]:
            sys.stdout.write("\n".join([*BUILT_IN, *crds]) + "\n")
            return 0
        if words[:1] != ["get"] or "-o" not in argv or argv[argv.index("-o") + 1] != "json":
            sys.stderr.write(f"error: the stand-in serves get -o json only, not {argv}\n")
            return 1
        resources = words[1].split(",")
        kinds = []
        for r in resources:
            if r in BUILT_IN:
                kinds.append(BUILT_IN[r])
            elif r in crds:
                kinds.append(CRD_KINDS[r])
            else:
                sys.stderr.write(f'error: the server doesn\'t have a resource type "{r.split(".")[0]}"\n')
                return 1
        if fail == "forbidden":
            sys.stderr.write(
                f"Error from server (Forbidden): {resources[0]} is forbidden: User "
                '"system:serviceaccount:audit:fleetaudit" cannot list resource '
                f'"{resources[0]}" in API group "" at the cluster scope\n'
            )
            return 1
        namespace = None if "-A" in argv else (argv[argv.index("-n") + 1] if "-n" in argv
                                               else "default")  # fmt: skip
        chunk = int(flags.get("--chunk-size", "500"))
        objects = _objects()
        items, pages = [], {}
        for kind in kinds:
            found = [o for o in objects if o.get("kind") == kind and (
                namespace is None or kind not in NAMESPACED
                or (o.get("metadata") or {}).get("namespace") == namespace)]  # fmt: skip
            step = chunk or len(found) or 1
            for start in range(0, max(len(found), 1), step):  # one request per page
                items.extend(found[start : start + step])
            pages[kind] = max(1, -(-len(found) // step))
        record["pages"] = pages
        json.dump({"apiVersion": "v1", "items": items, "kind": "List",
                   "metadata": {"resourceVersion": ""}}, sys.stdout, indent=4)  # fmt: skip
        return 0
    finally:
        if log:
            with open(log, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
