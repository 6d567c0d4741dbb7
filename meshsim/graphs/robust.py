"""Robust graph generators of the SAC paper (App. A), registered as topology kinds.

Every generator takes ``(params, seed)``, returns a graph on integer nodes
``0..n-1`` (``meshsim.graphs.build`` renames them ``A1..An``) and draws every random
choice from ``random.Random(seed)``:

``merg`` (n)
    gamma-MERG (Lee & Panagou 2026): the fewest edges for the largest possible
    robustness ``ceil(n/2)``. With gamma = ceil(n/2):

    * odd n: a complete core X of gamma + 1 nodes; each of the remaining
      n - gamma - 1 nodes is linked to gamma nodes of X chosen at random. (The
      paper's text says "the remaining gamma - 1 nodes", which does not add up
      to n; n - gamma - 1 = gamma - 2 does, and gives ceil(n/2)-robust graphs.)
    * even n: gamma nodes X adjacent to every other node; then ceil((gamma-2)/2)
      disjoint pairs of X chosen at random lose their edge.

``pa_robust`` (n, r)
    Preferential attachment built r-robust (LeBlanc et al. 2013, Lemma 4 and
    Thm. 5): a complete core of 2r - 1 nodes, then each new node is linked to r
    distinct existing nodes drawn with probability proportional to degree.

``er_robust`` (n, r, max_tries = 10000, optional p)
    Erdos-Renyi G(n, p) with p = (ln n + (r-1) ln ln n) / n (Zhang et al. 2015),
    resampled until :func:`meshsim.graphs.robustness.is_r_robust` verifies it is
    r-robust; ``TopologyError`` after ``max_tries`` samples.

``k_circulant`` (n, k)
    Node i is linked to i +- 1, ..., i +- k (mod n): degree 2k (n > 2k).
    Sparse and regular; for the sizes we checked exactly it is k-robust.

``merg`` and ``pa_robust`` label nodes in construction order: the core is
A1.. and the last-added (lowest-degree) nodes are the highest names, so a
scenario's roles say where Byzantine agents sit (the SAC scenarios put the
adversary on a peripheral node). ``shuffle: true`` permutes the labels at
random instead, so the position varies with the seed.
"""
from __future__ import annotations

import math
import random

import networkx as nx

from ..core.errors import TopologyError
from .registry import need as _need, register_generator

__all__ = ["merg", "pa_robust", "er_robust", "k_circulant", "er_threshold_p"]


def er_threshold_p(n: int, r: int) -> float:
    """p = (ln n + (r-1) ln ln n) / n (SAC App. A), clipped to [0, 1]."""
    return min(1.0, max(0.0, (math.log(n) + (r - 1) * math.log(math.log(n))) / n))


def _bool(params: dict, key: str, default: bool) -> bool:
    val = params.get(key, default)
    if not isinstance(val, bool):
        raise TopologyError("must be true or false", field=f"network.topology.{key}", value=val)
    return val


def _known(params: dict, kind: str, allowed: set[str]) -> None:
    for key in params:
        if key not in allowed:
            raise TopologyError(f"unknown parameter of topology '{kind}'; choose from {sorted(allowed)}",
                                field=f"network.topology.{key}")


def _shuffled(G: nx.Graph, rnd: random.Random, on: bool) -> nx.Graph:
    if not on:
        return G
    perm = list(G.nodes)
    rnd.shuffle(perm)
    return nx.relabel_nodes(G, dict(zip(sorted(G.nodes), perm)), copy=True)


def merg(params: dict, seed: int) -> nx.Graph:
    _known(params, "merg", {"n", "shuffle"})
    n = _need(params, "n", "merg", low=2)
    rnd = random.Random(seed)
    gamma = math.ceil(n / 2)
    G = nx.Graph()
    G.add_nodes_from(range(n))
    if n % 2:
        core = list(range(gamma + 1))
        G.add_edges_from((u, v) for i, u in enumerate(core) for v in core[i + 1:])
        for v in range(gamma + 1, n):
            G.add_edges_from((v, u) for u in sorted(rnd.sample(core, gamma)))
    else:
        core = list(range(gamma))
        G.add_edges_from((x, v) for x in core for v in range(n) if v != x)
        order = core[:]
        rnd.shuffle(order)
        for i in range(math.ceil((gamma - 2) / 2)):
            G.remove_edge(order[2 * i], order[2 * i + 1])
    return _shuffled(G, rnd, _bool(params, "shuffle", False))


def pa_robust(params: dict, seed: int) -> nx.Graph:
    _known(params, "pa_robust", {"n", "r", "shuffle"})
    r = _need(params, "r", "pa_robust", low=1)
    n = _need(params, "n", "pa_robust", low=2 * r - 1)
    rnd = random.Random(seed)
    core = 2 * r - 1
    G = nx.complete_graph(core)
    for v in range(core, n):
        chosen: list[int] = []
        cand = sorted(G.nodes)
        weights = [G.degree(u) for u in cand]
        for _ in range(r):
            u = rnd.choices(cand, weights=weights if sum(weights) else None)[0]
            k = cand.index(u)
            chosen.append(u)
            del cand[k]
            del weights[k]
        G.add_node(v)
        G.add_edges_from((v, u) for u in chosen)
    return _shuffled(G, rnd, _bool(params, "shuffle", False))


def er_robust(params: dict, seed: int) -> nx.Graph:
    from .robustness import is_r_robust

    _known(params, "er_robust", {"n", "r", "max_tries", "p"})
    n = _need(params, "n", "er_robust", low=2)
    r = _need(params, "r", "er_robust", low=1, high=math.ceil(n / 2))
    tries = _need(params, "max_tries", "er_robust", low=1) if "max_tries" in params else 10000
    p = _need(params, "p", "er_robust", float, 0, 1) if "p" in params else er_threshold_p(n, r)
    rnd = random.Random(seed)
    for _ in range(tries):
        G = nx.gnp_random_graph(n, p, seed=rnd.getrandbits(32))
        if min((d for _, d in G.degree()), default=0) < r or not nx.is_connected(G):
            continue  # r-robust implies min degree >= r (cheap rejection)
        if is_r_robust(G, r, method="exact" if n <= 16 else "auto"):
            return G
    raise TopologyError(f"no {r}-robust G({n}, p={p:.3f}) in {tries} samples; raise max_tries or p",
                        field="network.topology.max_tries", value=tries)


def k_circulant(params: dict, seed: int) -> nx.Graph:
    _known(params, "k_circulant", {"n", "k"})
    n = _need(params, "n", "k_circulant", low=3)
    k = _need(params, "k", "k_circulant", low=1, high=(n - 1) // 2)
    return nx.circulant_graph(n, list(range(1, k + 1)))


register_generator("merg", merg)
register_generator("pa_robust", pa_robust)
register_generator("er_robust", er_robust)
register_generator("k_circulant", k_circulant)
