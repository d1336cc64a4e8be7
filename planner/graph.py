"""The stage graph: a networkx DiGraph whose nodes are stages and whose edges are handoffs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from planner.pipeline import Pipeline

if TYPE_CHECKING:
    import networkx as nx


def build_graph(pipeline: Pipeline) -> nx.DiGraph:
    """Nodes carry the stage (`stage`, `index`); edges carry `kinds`, `safe` and `reason`."""
    import networkx as nx  # imported on use: it costs a third of a cold `planner solve`

    g = nx.DiGraph(name=pipeline.name, variant=pipeline.variant)
    for i, s in enumerate(pipeline.stages):
        g.add_node(s.name, stage=s, index=i)
    for (u, v), kinds in pipeline.handoffs().items():
        reason = pipeline.unsupported_reason((u, v))
        g.add_edge(u, v, kinds=kinds, safe=reason is None, reason=reason)
    return g
