"""The machines replicas are packed onto: `--cluster FILE` (YAML `nodes: [{name, gpus, cpus}]`),
`--cluster ray` (the node records of a running Ray cluster, which the runtime reads), or this
machine. Imports no Ray: joining a cluster is the launcher's."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planner.config import read_yaml
from planner.cpus import usable_cpu_ids
from planner.errors import ConfigError, ConfigIssue
from planner.limits import (
    MAX_CLUSTER_GPUS, MAX_CPUS_PER_NODE, MAX_GPUS_PER_NODE, MAX_NODES, shown,
)

_NODE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]*")


@dataclass(frozen=True)
class Node:
    name: str
    gpus: int
    cpus: int | None = None  # None: not limited
    # The node's id in Ray, for nodes read from a running Ray cluster: where `planner serve
    # --backend ray` pins the replicas planned on it. Not part of the node's identity.
    ray_id: str | None = field(default=None, compare=False)
    # Which CPUs those are, where known (this machine's); else 0 to cpus - 1.
    cpu_ids: tuple[int, ...] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Cluster:
    nodes: tuple[Node, ...]
    source: str = "this machine"

    @property
    def gpu_count(self) -> int:
        return sum(n.gpus for n in self.nodes)


def _gpus_here() -> int:
    """NVIDIA GPUs the driver lists, without importing torch (the planner core never does)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([v for v in visible.split(",") if v.strip() and v.strip() != "-1"])
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def this_machine() -> Cluster:
    ids = usable_cpu_ids()
    return Cluster((Node("local", _gpus_here(), len(ids), cpu_ids=ids),), source="this machine")


def from_dict(data: Any, source: str) -> Cluster:
    issues: list[ConfigIssue] = []
    nodes_raw = data.get("nodes") if isinstance(data, dict) else None
    if not isinstance(nodes_raw, list) or not nodes_raw:
        raise ConfigError(ConfigIssue(source, "nodes", "missing or empty",
                                      "a list like nodes: [{name: a, gpus: 4, cpus: 32}]"))
    if len(nodes_raw) > MAX_NODES:
        raise ConfigError(ConfigIssue(source, "nodes", f"lists {len(nodes_raw)} nodes",
                                      f"at most {MAX_NODES}; plan for a part of the cluster"))
    if isinstance(data, dict):
        for key in data:
            if key != "nodes":
                issues.append(ConfigIssue(source, str(key), "unknown key", "the only key is nodes"))
    nodes: list[Node] = []
    seen: set[str] = set()
    for i, raw in enumerate(nodes_raw):
        key = f"nodes[{i}]"
        if not isinstance(raw, dict):
            issues.append(ConfigIssue(source, key, f"got {raw!r}", "{name: a, gpus: 4, cpus: 32}"))
            continue
        for k in raw:
            if k not in ("name", "gpus", "cpus"):
                issues.append(ConfigIssue(source, f"{key}.{k}", "unknown key",
                                          "a node has name, gpus and (optionally) cpus"))
        # Every field of the node is checked, so one edit fixes all of its problems.
        before = len(issues)
        name = raw.get("name")
        if not isinstance(name, str) or not _NODE_NAME.fullmatch(name):
            issues.append(ConfigIssue(source, f"{key}.name", f"got {name!r}",
                                      "a name of letters, digits, '_', '-', '.' or ':'"))
        elif name in seen:
            issues.append(ConfigIssue(source, f"{key}.name", f"node {name!r} is listed twice"))
        else:
            seen.add(name)
        gpus, cpus = raw.get("gpus", 0), raw.get("cpus")
        if isinstance(gpus, bool) or not isinstance(gpus, int) \
                or not 0 <= gpus <= MAX_GPUS_PER_NODE:
            issues.append(ConfigIssue(source, f"{key}.gpus", f"got {shown(gpus)}",
                                      f"a whole number from 0 to {MAX_GPUS_PER_NODE}"))
        if cpus is not None and (isinstance(cpus, bool) or not isinstance(cpus, int)
                                 or not 1 <= cpus <= MAX_CPUS_PER_NODE):
            issues.append(ConfigIssue(source, f"{key}.cpus", f"got {shown(cpus)}",
                                      f"a whole number from 1 to {MAX_CPUS_PER_NODE}, or leave "
                                      "it out"))
        if len(issues) == before:
            nodes.append(Node(name, gpus, cpus))
    if not issues and sum(n.gpus for n in nodes) > MAX_CLUSTER_GPUS:
        issues.append(ConfigIssue(source, "nodes", f"{sum(n.gpus for n in nodes)} GPUs in all",
                                  f"at most {MAX_CLUSTER_GPUS}; plan for a part of the cluster"))
    if issues:
        raise ConfigError(issues)
    return Cluster(tuple(nodes), source=source)


def load_cluster(spec: str | Path | None) -> Cluster:
    """`None`: this machine; else a YAML file. A running Ray cluster (`--cluster ray`) is read by
    the runtime, which joins it: `launcher.backends.ray_cluster.cluster_from_ray`."""
    if spec is None:
        return this_machine()
    if str(spec) == "ray":
        raise ConfigError(ConfigIssue("--cluster", "ray", "the planner core does not join a Ray "
                                      "cluster", "read it with launcher.cluster_from_ray() and "
                                      "pass the Cluster, or run `planner solve --cluster ray`"))
    if not Path(spec).is_file():
        raise ConfigError(ConfigIssue("--cluster", "", f"{spec} is not a file",
                                      "pass a YAML file (nodes: [{name: a, gpus: 4, cpus: 32}]) "
                                      "or `ray` for a running Ray cluster"))
    return from_dict(read_yaml(spec), str(spec))


def _within_limits(nodes: list[Node], source: str) -> None:
    """A cluster Ray describes has the same size limits as a cluster file."""
    issues = [ConfigIssue(source, n.name, f"{n.gpus} GPUs",
                          f"at most {MAX_GPUS_PER_NODE} a node") for n in nodes
              if n.gpus > MAX_GPUS_PER_NODE]
    if len(nodes) > MAX_NODES or sum(n.gpus for n in nodes) > MAX_CLUSTER_GPUS:
        issues.append(ConfigIssue(source, "", f"{len(nodes)} nodes with "
                                  f"{sum(n.gpus for n in nodes)} GPUs",
                                  f"at most {MAX_NODES} nodes and {MAX_CLUSTER_GPUS} GPUs"))
    if issues:
        raise ConfigError(issues)


def from_ray_nodes(records: list[dict[str, Any]], source: str = "ray") -> Cluster:
    """A Ray cluster's live nodes, from the records `ray.nodes()` lists (joining the cluster to
    ask is the runtime's: `launcher.backends.ray_cluster`). Sorted by node id, so a cluster reads
    the same each time; a node's name keeps a prefix of its id, as two hosts may share a name."""
    nodes = []
    for i, n in enumerate(sorted(records, key=lambda n: n["NodeID"])):
        if not n.get("Alive"):
            continue
        res = n.get("Resources", {})
        name = n.get("NodeName") or f"node{i}"
        nodes.append(Node(f"{name}-{n['NodeID'][:6]}", int(res.get("GPU", 0)),
                          int(res.get("CPU", 0)), ray_id=n["NodeID"]))
    _within_limits(nodes, source)
    return Cluster(tuple(nodes), source=source)
