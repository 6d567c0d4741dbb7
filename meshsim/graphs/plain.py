"""Plain seeded graph generators: complete, G(n,p), G(n,m), regular, ring, path, star.

Each returns a graph on integers ``0..n-1``; :func:`meshsim.graphs.build`
renames the nodes ``A1..An``.
"""
from __future__ import annotations

import networkx as nx

from ..core.errors import TopologyError
from .registry import need as _need, register_generator

__all__: list[str] = []


def _complete(p, seed):
    return nx.complete_graph(_need(p, "n", "complete", low=1))


def _gnp(p, seed):
    n = _need(p, "n", "gnp", low=1)
    return nx.gnp_random_graph(n, _need(p, "p", "gnp", float, 0, 1), seed=seed)


def _gnm(p, seed):
    n = _need(p, "n", "gnm", low=1)
    m = _need(p, "m", "gnm", low=0, high=n * (n - 1) // 2)
    return nx.gnm_random_graph(n, m, seed=seed)


def _regular(p, seed):
    n = _need(p, "n", "regular", low=1)
    d = _need(p, "d", "regular", low=0, high=n - 1)
    if (n * d) % 2:
        raise TopologyError("n * d must be even for a random regular graph",
                            field="network.topology.d", value=d)
    return nx.random_regular_graph(d, n, seed=seed)


def _ring(p, seed):
    return nx.cycle_graph(_need(p, "n", "ring", low=3))


def _path(p, seed):
    return nx.path_graph(_need(p, "n", "path", low=1))


def _star(p, seed):
    return nx.star_graph(_need(p, "n", "star", low=2) - 1)


for _name, _fn in {
    "complete": _complete,
    "gnp": _gnp,
    "erdos_renyi": _gnp,
    "gnm": _gnm,
    "regular": _regular,
    "ring": _ring,
    "path": _path,
    "star": _star,
}.items():
    register_generator(_name, _fn)
