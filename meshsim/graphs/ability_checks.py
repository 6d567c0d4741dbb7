"""Checks of an agent graph against the ability conditions of MeshHeal App. B.7.

Conditions (a)-(d) of :mod:`meshsim.graphs.ability`: every agent has, for each
ability it holds, >= 1 non-target neighbour holding it (targets: >= 2); every
agent is within ``max_distance`` hops of a non-target holder of every ability;
the graph is connected. :func:`check_ability_graph` lists the violations,
:func:`ability_distance` measures the hop distances.
"""
from __future__ import annotations

import math
from collections import deque
from typing import Any, Iterable, Mapping

import networkx as nx

from ..core.names import node_order

__all__ = ["check_ability_graph", "ability_distance"]


def _holders(abilities: Mapping[str, Iterable[str]], exclude: Iterable[str]) -> dict[str, list[str]]:
    exclude = set(exclude)
    vocab = sorted({s for ks in abilities.values() for s in ks})
    out: dict[str, list[str]] = {s: [] for s in vocab}
    for v in sorted(abilities, key=node_order):
        if v in exclude:
            continue
        for s in set(abilities[v]):
            out[s].append(v)
    return out


def ability_distance(G: nx.Graph, abilities: Mapping[str, Iterable[str]],
                     exclude: Iterable[str] = ()) -> dict[str, Any]:
    """Hop distance from every agent to the nearest non-excluded holder of every ability.

    Returns ``{"max": D, "per_ability": {ability: max over agents},
    "per_agent": {agent: max over abilities}}``; distances are
    ``math.inf`` where no such holder is reachable (``max`` is 0 when the
    graph has no agents or there are no abilities).
    """
    holders = _holders(abilities, exclude)
    per_ability: dict[str, float] = {}
    per_agent: dict[str, float] = {v: 0 for v in sorted(G.nodes, key=node_order)}
    for s, hs in holders.items():
        sources = [h for h in hs if h in G]
        dist = _bfs(G, sources)
        worst: float = 0
        for v in per_agent:
            d = dist.get(v, math.inf)
            worst = max(worst, d)
            per_agent[v] = max(per_agent[v], d)
        per_ability[s] = worst if per_agent else 0
    overall = max(per_ability.values(), default=0)
    return {"max": overall, "per_ability": per_ability, "per_agent": per_agent}


def _bfs(G: nx.Graph, sources: list[str]) -> dict[str, int]:
    dist = {v: 0 for v in sources}
    q = deque(sources)
    while q:
        x = q.popleft()
        for y in G[x]:
            if y not in dist:
                dist[y] = dist[x] + 1
                q.append(y)
    return dist


def check_ability_graph(G: nx.Graph, abilities: Mapping[str, Iterable[str]], targets: Iterable[str],
                        max_distance: int = 3, limit: int | None = None) -> list[str]:
    """Human-readable violations of conditions (a)-(d); empty when ``G`` is fine.

    ``limit`` caps the messages listed per kind of violation (a final line
    says how many were left out); ``None`` lists them all.
    """
    targets = set(targets)
    problems: dict[str, list[str]] = {"nodes": [], "coverage": [], "distance": [], "connectivity": []}
    for v in sorted(set(abilities) | targets, key=node_order):
        if v not in G:
            problems["nodes"].append(f"agent {v} is not in the graph")
    for v in sorted(G.nodes, key=node_order):
        ks = sorted(set(abilities.get(v, ())))
        if not ks:
            continue
        need = 2 if v in targets else 1
        healthy_nbrs = [u for u in G[v] if u not in targets]
        for s in ks:
            have = sum(1 for u in healthy_nbrs if s in abilities.get(u, ()))
            if have < need:
                kind = "target" if v in targets else "agent"
                problems["coverage"].append(
                    f"{kind} {v}: {have} non-target neighbour(s) hold '{s}', needs >= {need}")
    dist = ability_distance(G, abilities, exclude=targets)
    holders = _holders(abilities, targets)
    for s, hs in holders.items():
        if not hs:
            problems["distance"].append(f"ability '{s}' has no non-target holder")
    if dist["max"] > max_distance:
        for v, d in dist["per_agent"].items():
            if d > max_distance:
                # name the abilities that are too far
                far = []
                for s, hs in holders.items():
                    if hs and _too_far(G, v, set(hs), max_distance):
                        far.append(s)
                if far:
                    problems["distance"].append(
                        f"agent {v}: no non-target holder of {', '.join(repr(s) for s in far)} "
                        f"within {max_distance} hops")
    if G.number_of_nodes() and not nx.is_connected(G):
        problems["connectivity"].append(
            f"graph is disconnected ({nx.number_connected_components(G)} components)")
    out: list[str] = []
    for msgs in problems.values():
        if limit is not None and len(msgs) > limit:
            out.extend(msgs[:limit])
            out.append(f"... and {len(msgs) - limit} more like the above")
        else:
            out.extend(msgs)
    return out


def _too_far(G: nx.Graph, v: str, goal: set[str], max_distance: int) -> bool:
    if v in goal:
        return False
    seen = {v}
    frontier = [v]
    for _ in range(max_distance):
        nxt = []
        for u in frontier:
            for w in G[u]:
                if w in goal:
                    return False
                if w not in seen:
                    seen.add(w)
                    nxt.append(w)
        frontier = nxt
    return True
