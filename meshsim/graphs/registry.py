"""The registry of topology kinds, at the bottom of :mod:`meshsim.graphs`.

A generator is ``fn(params: dict, seed: int) -> nx.Graph`` on any node labels;
each generator module registers its kinds here when it is imported. The first
lookup imports every module of the package that calls
:func:`register_generator` (:class:`meshsim.core.discovery.Registry`), so a new
kind is one new module and one registration call, nothing else edited; nothing
here imports upward.
"""
from __future__ import annotations

from typing import Any, Callable

import networkx as nx

from ..core.discovery import Registry
from ..core.errors import TopologyError
from ..core.names import agent_name, node_order

__all__ = ["GENERATORS", "Generator", "register_generator", "need", "relabel"]

Generator = Callable[[dict[str, Any], int], nx.Graph]

#: topology kind -> generator (``file`` is handled by :func:`meshsim.graphs.build`)
GENERATORS: Registry[Generator] = Registry(__package__ or "meshsim.graphs", "register_generator")


def register_generator(name: str, fn: Generator) -> Generator:
    """Add a topology kind: ``fn(params: dict, seed: int) -> nx.Graph``."""
    GENERATORS[name] = fn
    return fn


def need(params: dict[str, Any], key: str, kind: str, typ: type = int, low: Any = None, high: Any = None) -> Any:
    """``params[key]`` checked as an int (or float) in [low, high]; one-line error otherwise."""
    if key not in params:
        raise TopologyError(f"topology '{kind}' needs '{key}'", field=f"network.topology.{key}")
    val = params[key]
    if typ is int and (isinstance(val, bool) or not isinstance(val, int)):
        raise TopologyError("must be an integer", field=f"network.topology.{key}", value=val)
    if typ is float and (isinstance(val, bool) or not isinstance(val, (int, float))):
        raise TopologyError("must be a number", field=f"network.topology.{key}", value=val)
    if low is not None and val < low:
        raise TopologyError(f"must be >= {low}", field=f"network.topology.{key}", value=val)
    if high is not None and val > high:
        raise TopologyError(f"must be <= {high}", field=f"network.topology.{key}", value=val)
    return val


def relabel(G: nx.Graph) -> nx.Graph:
    """Rename integer nodes 0..n-1 to A1..An (keeps edge attributes), in natural order."""
    mapping = {v: agent_name(v) if isinstance(v, int) else str(v) for v in G.nodes}
    H = nx.relabel_nodes(G, mapping, copy=True)
    out = nx.Graph()
    out.add_nodes_from(sorted(H.nodes, key=node_order))
    out.add_edges_from(sorted(((*sorted((u, v), key=node_order), d) for u, v, d in H.edges(data=True)),
                              key=lambda e: (node_order(e[0]), node_order(e[1]))))
    return out
