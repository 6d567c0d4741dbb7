"""Build a scenario's graph by kind (a registered generator or ``file``); describe a graph."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx

from ..errors import TopologyError
from .io import from_file
from .registry import GENERATORS, relabel

__all__ = ["build", "describe"]


def build(kind: str, params: dict, seed: int, base_dir: Path | None = None) -> nx.Graph:
    """Build the graph named by ``kind`` with ``params``; nodes named A1..An."""
    if kind == "file":
        path = params.get("path")
        if not path:
            raise TopologyError("topology 'file' needs 'path'", field="network.topology.path")
        p = Path(path)
        if base_dir is not None and not p.is_absolute():
            p = base_dir / p
        return from_file(p, fmt=params.get("format"))
    fn = GENERATORS.get(kind)
    if fn is None:
        raise TopologyError(f"unknown topology kind; choose one of {sorted(GENERATORS) + ['file']}",
                            field="network.topology.kind", value=kind)
    return relabel(fn(params, seed))


def describe(G: nx.Graph) -> dict[str, Any]:
    """Nodes, edges, edge fraction, degree stats, connectivity and diameter."""
    n = G.number_of_nodes()
    m = G.number_of_edges()
    degs = sorted(d for _, d in G.degree())
    connected = n > 0 and nx.is_connected(G)
    info: dict[str, Any] = {
        "nodes": n,
        "edges": m,
        "edge_fraction": (m / (n * (n - 1) / 2)) if n > 1 else 0.0,
        "degree_min": degs[0] if degs else 0,
        "degree_max": degs[-1] if degs else 0,
        "degree_mean": (sum(degs) / n) if n else 0.0,
        "degree_median": (degs[n // 2] if n % 2 else (degs[n // 2 - 1] + degs[n // 2]) / 2) if n else 0,
        "connected": connected,
        "components": nx.number_connected_components(G) if n else 0,
        "diameter": nx.diameter(G) if connected else None,
    }
    if connected and n > 1:
        info["node_connectivity"] = nx.node_connectivity(G) if n <= 200 else None
    return info
