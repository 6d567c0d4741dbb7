"""Build a scenario's graph by kind (a registered generator or ``file``); describe a graph."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx

from ..core.errors import TopologyError
from .io import from_file
from .registry import GENERATORS, relabel

__all__ = ["build", "describe"]


class _Asked(dict):
    """``params`` that remember every key a generator asked for (present or not),
    so a key nobody asked for is refused after the build instead of ignored."""

    def __init__(self, *a: Any):
        super().__init__(*a)
        self.asked: set[str] = set()

    def __getitem__(self, k):
        self.asked.add(k)
        return super().__getitem__(k)

    def get(self, k, default=None):
        self.asked.add(k)
        return super().get(k, default)

    def __contains__(self, k):
        self.asked.add(k)
        return super().__contains__(k)

    def __iter__(self):  # a generator that walks its params checks them itself
        self.asked.update(super().keys())
        return super().__iter__()

    def items(self):
        self.asked.update(super().keys())
        return super().items()


def _refuse_unasked(kind: str, params: _Asked) -> None:
    import difflib

    unknown = sorted(k for k in dict.keys(params) if k not in params.asked)
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key, sorted(params.asked), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else (
            f"; it takes {sorted(params.asked)}" if params.asked else "")
        raise TopologyError(f"unknown key for topology '{kind}'{hint}", field=f"network.topology.{key}")


def build(kind: str, params: dict, seed: int, base_dir: Path | None = None,
          limits: tuple[int, int] | None = None) -> nx.Graph:
    """Build the graph named by ``kind`` with ``params``; nodes named A1..An.
    A parameter the generator never asks for is an error (issue 19);
    ``limits`` (agents, links) bound a topology file while it is read."""
    params = _Asked(params)
    if kind == "file":
        path = params.get("path")
        if not path:
            raise TopologyError("topology 'file' needs 'path'", field="network.topology.path")
        p = Path(path)
        if base_dir is not None and not p.is_absolute():
            p = base_dir / p
        fmt = params.get("format")
        _refuse_unasked(kind, params)
        return from_file(p, fmt=fmt, max_agents=limits[0] if limits else None,
                         max_links=limits[1] if limits else None)
    fn = GENERATORS.get(kind)
    if fn is None:
        raise TopologyError(f"unknown topology kind; choose one of {sorted(GENERATORS) + ['file']}",
                            field="network.topology.kind", value=kind)
    G = fn(params, seed)
    _refuse_unasked(kind, params)
    return relabel(G)


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
